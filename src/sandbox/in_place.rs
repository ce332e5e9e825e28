//! A gate's checkout shown, inside its sandbox, at the main checkout's
//! own path, so that the warm caches it gets (`[worktree] cache`, see
//! [`super::warm`]) are warm for it.
//!
//! Build tools key their caches on absolute paths: cargo fingerprints a
//! build script's inputs by path, and rustc's incremental session depends
//! on the working directory. A `target/` built in the main checkout is
//! therefore warm only for a build run at the main checkout's path: run in
//! a checkout elsewhere, cargo rebuilds the project's own crates from
//! nothing (ripgrep, one line changed: 14.7 s there against 2.7 s at the
//! main checkout's path). A sandboxed command has a mount namespace of its
//! own, so its checkout can be shown there at that path, over the main
//! checkout, which it then does not see at all.
//!
//! The checkout's own git folder (its quarantine) comes with it, to
//! `<main>/.git`. Its `objects/info/alternates` names the repository's
//! object store by its path on the host, `<main>/.git/objects`, which is
//! now the quarantine's own: a file naming where the store is shown
//! instead (read-only, under the sandbox's private `/tmp`) is bound over
//! it. The files the command reads from the repository's git folder (an
//! attempt's prompt) are shown there too, and the variables naming them
//! follow. Nothing on the host changes: the quarantine keeps its own
//! alternates file for every command that runs outside the sandbox.

use std::path::{Path, PathBuf};

/// Where, inside the sandbox, the repository's object stores and the files
/// the command reads are shown: the sandbox's `/tmp` is its own.
const SHOWN: &str = "/tmp/.git-orch";

/// What showing a checkout at the main checkout's path takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InPlace {
    /// bwrap arguments, to follow every bind under the main checkout and
    /// the checkout (they are hidden under the checkout's new place).
    pub args: Vec<String>,
    /// Where the command starts: its folder, at its new place.
    pub chdir: PathBuf,
    /// Files the command reads and where it sees them now.
    pub moved: Vec<(PathBuf, PathBuf)>,
}

/// How to show `checkout` (with its quarantine git folder) at `main`, for
/// a command that starts in `cwd` and reads `readable`; `object_dirs` are
/// the repository's object stores, `scratch` a folder of the checkout's
/// own, out of the sandbox's sight, for the alternates file. `None` when
/// the checkout has no quarantine to carry (nothing is changed then).
pub fn show(
    main: &Path,
    checkout: &Path,
    cwd: &Path,
    object_dirs: &[PathBuf],
    readable: &[PathBuf],
    scratch: &Path,
) -> std::io::Result<Option<InPlace>> {
    let alternates = checkout.join(".git/objects/info/alternates");
    if !std::fs::symlink_metadata(&alternates).is_ok_and(|m| m.is_file()) {
        return Ok(None);
    }
    let shown = Path::new(SHOWN);
    let mut args = Vec::new();
    let mut push = |option: &str, from: &Path, to: &Path| {
        args.push(option.to_owned());
        args.push(from.to_string_lossy().into_owned());
        args.push(to.to_string_lossy().into_owned());
    };
    push("--bind", checkout, main);
    let mut list = String::new();
    for (i, dir) in object_dirs.iter().enumerate() {
        let to = shown.join(format!("objects-{i}"));
        push("--ro-bind", dir, &to);
        list.push_str(&format!("{}\n", to.display()));
    }
    std::fs::create_dir_all(scratch)?;
    let ours = scratch.join("alternates");
    std::fs::write(&ours, list)?;
    push(
        "--ro-bind",
        &ours,
        &main.join(".git/objects/info/alternates"),
    );
    let mut moved = Vec::new();
    for (i, file) in readable.iter().enumerate() {
        let name = file.file_name().unwrap_or_default().to_string_lossy();
        let to = shown.join(format!("files/{i}-{name}"));
        push("--ro-bind", file, &to);
        moved.push((file.clone(), to));
    }
    let chdir = match cwd.strip_prefix(checkout) {
        Ok(rel) => main.join(rel),
        Err(_) => main.to_owned(),
    };
    Ok(Some(InPlace { args, chdir, moved }))
}

/// `env` with every value naming a moved file renamed to where the
/// command sees it.
pub fn rename_files(env: &mut [(String, String)], moved: &[(PathBuf, PathBuf)]) {
    for (_, value) in env.iter_mut() {
        let named = Path::new(value.as_str());
        if !named.is_absolute() {
            continue;
        }
        let real = named.canonicalize().ok();
        let to = moved
            .iter()
            .find(|(from, _)| from == named || real.as_deref() == Some(from.as_path()));
        if let Some((_, to)) = to {
            *value = to.to_string_lossy().into_owned();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checkout_goes_over_the_main_path_with_its_store_and_files_shown_apart() {
        let dir = tempfile::tempdir().expect("temp");
        let main = dir.path().join("repo");
        let checkout = main.join(".git/orch/scratch/gate");
        std::fs::create_dir_all(checkout.join(".git/objects/info")).expect("dirs");
        std::fs::write(
            checkout.join(".git/objects/info/alternates"),
            format!("{}\n", main.join(".git/objects").display()),
        )
        .expect("alternates");
        let prompt = main.join(".git/orch/prompts/a.md");
        let layers = dir.path().join("layers");
        let shown = show(
            &main,
            &checkout,
            &checkout.join("sub"),
            &[main.join(".git/objects")],
            std::slice::from_ref(&prompt),
            &layers,
        )
        .expect("io")
        .expect("a quarantine to carry");
        assert_eq!(shown.chdir, main.join("sub"));
        let args = shown.args.join(" ");
        assert!(
            args.starts_with(&format!("--bind {} {}", checkout.display(), main.display())),
            "{args}"
        );
        assert!(args.contains("/tmp/.git-orch/objects-0"), "{args}");
        assert_eq!(
            std::fs::read_to_string(layers.join("alternates")).expect("written"),
            "/tmp/.git-orch/objects-0\n"
        );
        // The quarantine's own file on the host is left as it was.
        assert!(
            std::fs::read_to_string(checkout.join(".git/objects/info/alternates"))
                .expect("kept")
                .starts_with(&main.display().to_string())
        );
        let mut env = vec![
            ("ORCH_PROMPT_FILE".to_owned(), prompt.display().to_string()),
            ("OTHER".to_owned(), "x".to_owned()),
        ];
        rename_files(&mut env, &shown.moved);
        assert_eq!(env[0].1, "/tmp/.git-orch/files/0-a.md");
        assert_eq!(env[1].1, "x");
    }

    #[test]
    fn a_checkout_without_a_quarantine_is_left_where_it_is() {
        let dir = tempfile::tempdir().expect("temp");
        let checkout = dir.path().join("c");
        std::fs::create_dir_all(&checkout).expect("dir");
        let shown = show(
            dir.path(),
            &checkout,
            &checkout,
            &[],
            &[],
            &dir.path().join("l"),
        )
        .expect("io");
        assert_eq!(shown, None);
    }
}
