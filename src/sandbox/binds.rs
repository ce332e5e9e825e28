//! `[sandbox] bind` and `roBind` checked before any command starts: each
//! must be an existing absolute path (or `~/…`), and none may hold or lie
//! in what the sandbox hides on purpose: the home folder (logins, keys),
//! the repository's git folder (config, refs, hooks that run outside the
//! sandbox) or the folder of git-orch's private homes. bubblewrap would
//! otherwise fail every attempt ("Can't remount readonly"), or the bind
//! would quietly undo the hiding. Pure but for reading paths' metadata.

use std::path::{Path, PathBuf};

/// A `[sandbox] bind` or `roBind` that cannot work, or would undo what
/// the sandbox hides.
#[derive(Debug, thiserror::Error)]
#[error("[sandbox] {key} = {value}: {why}")]
pub struct BindError {
    pub key: &'static str,
    pub value: String,
    pub why: String,
    /// What makes the line work, for a preflight finding and the CLI's
    /// hint.
    pub fix: String,
}

/// What a bind must not hold or lie in, with a word for people.
pub struct Hidden<'a> {
    pub home: Option<&'a Path>,
    pub git_dir: Option<&'a Path>,
    pub private_homes: Option<&'a Path>,
}

/// One bind, checked: the path to mount, read-write or not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bind {
    pub path: PathBuf,
    pub writable: bool,
}

fn bad(key: &'static str, value: &Path, why: String, fix: String) -> BindError {
    BindError {
        key,
        value: value.display().to_string(),
        why,
        fix,
    }
}

/// `path` of the setting `key`, checked against `hidden`.
fn check_one(
    key: &'static str,
    path: &Path,
    writable: bool,
    hidden: &Hidden,
) -> Result<Bind, BindError> {
    let expanded = match (path.strip_prefix("~"), hidden.home) {
        (Ok(rest), Some(h)) => h.join(rest),
        (Ok(_), None) => {
            return Err(bad(
                key,
                path,
                "`~` needs the home folder, and HOME is not set".into(),
                "write the full path".into(),
            ));
        }
        (Err(_), _) if path.is_absolute() => path.to_owned(),
        (Err(_), _) => {
            return Err(bad(
                key,
                path,
                "it is not an absolute path".into(),
                "write it as /full/path or ~/path".into(),
            ));
        }
    };
    let real = expanded.canonicalize().map_err(|e| {
        bad(
            key,
            path,
            format!("{} cannot be used: {e}", expanded.display()),
            "create it, or remove the line from .orch/config".into(),
        )
    })?;
    let named = |what: &str, p: &Path| {
        let p = p.canonicalize().unwrap_or_else(|_| p.to_owned());
        if p.starts_with(&real) {
            Some(format!("it holds {what} {}", p.display()))
        } else if real.starts_with(&p) && what != "the home folder" {
            Some(format!("it is inside {what} {}", p.display()))
        } else {
            None
        }
    };
    let why = [
        hidden
            .home
            .and_then(|h| named("the home folder", h))
            .map(|w| (w, "agents must not see its logins and keys")),
        hidden
            .git_dir
            .and_then(|g| named("the repository's git folder", g))
            .map(|w| {
                (
                    w,
                    "agents must not reach its config, refs and hooks, which run outside the sandbox",
                )
            }),
        hidden
            .private_homes
            .and_then(|p| named("the folder of git-orch's private homes", p))
            .map(|w| (w, "each sandboxed command's home must stay its own")),
    ]
    .into_iter()
    .flatten()
    .next();
    if let Some((what, because)) = why {
        return Err(bad(
            key,
            path,
            format!("{what}, which the sandbox hides: {because}"),
            format!(
                "bind only the folders agents need inside it (e.g. `{key} = ~/.cargo/registry`)"
            ),
        ));
    }
    Ok(Bind {
        path: real,
        writable,
    })
}

/// Every bind of the settings, checked, read-only ones first.
pub fn check(
    ro_bind: &[PathBuf],
    bind: &[PathBuf],
    hidden: &Hidden,
) -> Result<Vec<Bind>, BindError> {
    let ro = ro_bind
        .iter()
        .map(|p| check_one("roBind", p, false, hidden));
    let rw = bind.iter().map(|p| check_one("bind", p, true, hidden));
    ro.chain(rw).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn world() -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf) {
        let t = tempfile::tempdir().expect("tmp");
        let root = t.path().canonicalize().expect("canonical");
        let home = root.join("u/home");
        let git = root.join("proj/.git");
        let cache = home.join(".cache");
        for d in [&home, &git, &cache] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        (t, home, git, root)
    }

    fn hidden<'a>(home: &'a Path, git: &'a Path) -> Hidden<'a> {
        Hidden {
            home: Some(home),
            git_dir: Some(git),
            private_homes: None,
        }
    }

    /// The message and the fix, as one text to search.
    fn why(e: BindError) -> String {
        format!("{e} (fix: {})", e.fix)
    }

    #[test]
    fn folders_inside_the_home_folder_are_fine() {
        let (_t, home, git, _) = world();
        let ok = check(&[PathBuf::from("~/.cache")], &[], &hidden(&home, &git)).expect("valid");
        assert_eq!(ok[0].path, home.join(".cache"));
        assert!(!ok[0].writable);
    }

    #[test]
    fn a_bind_holding_the_home_folder_is_refused_naming_the_setting() {
        let (_t, home, git, root) = world();
        let e = why(check(&[], &[root.join("u")], &hidden(&home, &git)).expect_err("refused"));
        assert!(
            e.starts_with(&format!(
                "[sandbox] bind = {}: it holds the home folder",
                root.join("u").display()
            )),
            "{e}"
        );
        assert!(e.contains("(fix: bind only the folders"), "{e}");
        let e = why(check(&[root.join("u")], &[], &hidden(&home, &git)).expect_err("refused"));
        assert!(e.starts_with("[sandbox] roBind = "), "{e}");
    }

    #[test]
    fn the_git_folder_may_be_neither_held_nor_entered() {
        let (_t, home, git, root) = world();
        for p in [root.join("proj"), git.join("hooks")] {
            std::fs::create_dir_all(&p).expect("mkdir");
            let e =
                why(check(&[], std::slice::from_ref(&p), &hidden(&home, &git))
                    .expect_err("refused"));
            assert!(e.contains("the repository's git folder"), "{e}");
        }
    }

    #[test]
    fn missing_and_relative_paths_are_refused() {
        let (_t, home, git, root) = world();
        let e = why(check(&[root.join("nope")], &[], &hidden(&home, &git)).expect_err("refused"));
        assert!(e.contains("cannot be used"), "{e}");
        assert!(e.contains("(fix: create it, or remove the line"), "{e}");
        let e =
            why(check(&[PathBuf::from("rel/x")], &[], &hidden(&home, &git)).expect_err("refused"));
        assert!(e.contains("not an absolute path"), "{e}");
        let none = Hidden {
            home: None,
            git_dir: None,
            private_homes: None,
        };
        let e = why(check(&[PathBuf::from("~/x")], &[], &none).expect_err("refused"));
        assert!(e.contains("HOME is not set"), "{e}");
    }
}
