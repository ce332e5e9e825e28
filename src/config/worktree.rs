//! The `[worktree]` section: what every fresh checkout of an attempt (its
//! worktree, its gates' scratch checkout, the merge queue's) gets besides
//! the files of its commit: `include`, ignored files copied from the main
//! checkout (`.env`, `config/local.toml`), and `cache`, folders it sees
//! warm (`target/`, `node_modules/`, `~/.cargo/registry`).
//!
//! Only the words are checked here, where a typo or a hostile entry is
//! refused before anything runs: an entry that leaves the repository
//! (`..`, an absolute path outside the home folder) or names its git
//! folder. Where an entry really points (a symlink out) is checked when a
//! checkout is warmed (`sandbox::warm`), on the files themselves.

use crate::store::config::Section;

/// A refused entry: the key (as written in docs) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub key: &'static str,
    pub message: String,
}

fn err(_section: &Section, key: &'static str, message: String) -> Refused {
    Refused { key, message }
}

/// Where a cache folder lives.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum CachePath {
    /// A folder of the repository's working tree (`target`), relative,
    /// without a trailing slash: each checkout sees it at the same place.
    Repo(String),
    /// A folder of the home folder (`~/.cargo/registry`), relative to it:
    /// each command sees it under the home folder it runs with.
    Home(String),
}

impl std::fmt::Display for CachePath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CachePath::Repo(p) => write!(f, "{p}/"),
            CachePath::Home(p) => write!(f, "~/{p}/"),
        }
    }
}

/// `[worktree] cacheMode`: how caches are made warm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CacheMode {
    /// The cheapest way that works here: an overlay inside the sandbox,
    /// else a reflink copy, else a plain copy.
    #[default]
    Auto,
    /// Always a copy (reflinked where the filesystem can).
    Copy,
}

/// The `[worktree]` section.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WorktreeSettings {
    /// Globs (relative to the repository's root) of ignored files copied
    /// into every fresh checkout; they never land.
    pub include: Vec<String>,
    /// Folders every checkout sees warm.
    pub cache: Vec<CachePath>,
    pub mode: CacheMode,
}

impl WorktreeSettings {
    /// Whether there is anything to give a checkout.
    pub fn is_empty(&self) -> bool {
        self.include.is_empty() && self.cache.is_empty()
    }
}

/// Reads `[worktree]`; `home` is the user's home folder (for absolute
/// cache paths inside it).
pub fn parse(
    section: &Section,
    home: Option<&std::path::Path>,
) -> Result<WorktreeSettings, Refused> {
    let mut w = WorktreeSettings::default();
    let words = |key: &str| -> Vec<String> {
        section
            .values
            .get(key)
            .into_iter()
            .flatten()
            .flat_map(|v| v.split_whitespace())
            .map(str::to_owned)
            .collect()
    };
    for glob in words("include") {
        let rel =
            relative(&glob).map_err(|why| err(section, "include", format!("{glob:?} {why}")))?;
        globset::Glob::new(&rel).map_err(|e| {
            err(
                section,
                "include",
                format!("{glob:?} is not a valid glob: {e}"),
            )
        })?;
        if !w.include.contains(&rel) {
            w.include.push(rel);
        }
    }
    for entry in words("cache") {
        let path = cache_path(&entry, home)
            .map_err(|why| err(section, "cache", format!("{entry:?} {why}")))?;
        if !w.cache.contains(&path) {
            w.cache.push(path);
        }
    }
    if let Some(v) = section.get("cachemode") {
        w.mode = match v.trim().to_ascii_lowercase().as_str() {
            "auto" => CacheMode::Auto,
            "copy" => CacheMode::Copy,
            other => {
                return Err(err(
                    section,
                    "cacheMode",
                    format!("{other:?} is not auto or copy"),
                ));
            }
        };
    }
    Ok(w)
}

/// The `[worktree]` a project with the files at `root` most likely wants
/// (`Cargo.toml` → `target/`, `package.json` → `node_modules/`, a Python
/// project with a `.venv/` → it, a `.env` → include it), as lines of
/// `.orch/config`; `None` when nothing suggests one. Suggested, never
/// written: what `[worktree]` is absent means is no caches and no files.
pub fn suggested(root: &std::path::Path) -> Option<String> {
    let has = |name: &str| root.join(name).exists();
    let mut cache = Vec::new();
    if has("Cargo.toml") {
        cache.push("target/");
    }
    if has("package.json") {
        cache.push("node_modules/");
    }
    let python = ["pyproject.toml", "requirements.txt", "setup.py"]
        .iter()
        .any(|f| has(f));
    if python && has(".venv") {
        cache.push(".venv/");
    }
    let include: Vec<&str> = [".env", ".env.local"]
        .into_iter()
        .filter(|f| root.join(f).is_file())
        .collect();
    if cache.is_empty() && include.is_empty() {
        return None;
    }
    let mut text = String::from("[worktree]\n");
    if !cache.is_empty() {
        text.push_str(&format!("\tcache = {}\n", cache.join(" ")));
    }
    if !include.is_empty() {
        text.push_str(&format!("\tinclude = {}\n", include.join(" ")));
    }
    Some(text)
}

/// Why a `[worktree]` entry is refused; shown after the entry itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadEntry {
    #[error("is a glob; name the folder itself (e.g. target/)")]
    Glob,
    #[error("is the whole home folder; name a folder inside it")]
    WholeHome,
    #[error(
        "leaves the repository: only folders of the repository and of your home folder (~/…) can be caches"
    )]
    OutsideHome,
    #[error("leaves the repository: write a path relative to the repository's root")]
    Absolute,
    #[error("is the whole repository; name something inside it")]
    WholeRepository,
    #[error("is inside {0}/, which is git's or git-orch's own")]
    OwnFolder(String),
    #[error("holds a backslash or a control character")]
    Unprintable,
    #[error("leaves the repository (`..`)")]
    Parent,
}

/// A cache entry as a [`CachePath`]: `~/…` or an absolute path inside the
/// home folder, else a path inside the repository.
fn cache_path(entry: &str, home: Option<&std::path::Path>) -> Result<CachePath, BadEntry> {
    if entry.contains(['*', '?', '[', '{']) {
        return Err(BadEntry::Glob);
    }
    let in_home = |rel: &str| -> Result<CachePath, BadEntry> {
        let rel = clean(rel)?;
        if rel.is_empty() {
            return Err(BadEntry::WholeHome);
        }
        Ok(CachePath::Home(rel))
    };
    if let Some(rel) = entry.strip_prefix("~/") {
        return in_home(rel);
    }
    if entry.starts_with('/') {
        let home = home.ok_or(BadEntry::OutsideHome)?;
        let rel = std::path::Path::new(entry)
            .strip_prefix(home)
            .map_err(|_| BadEntry::OutsideHome)?;
        return in_home(&rel.to_string_lossy());
    }
    Ok(CachePath::Repo(relative(entry)?))
}

/// A path inside the repository: relative, no `..`, not in its git
/// folder or git-orch's; `./` and trailing slashes dropped.
fn relative(entry: &str) -> Result<String, BadEntry> {
    if entry.starts_with('/') || entry.starts_with('~') {
        return Err(BadEntry::Absolute);
    }
    let rel = clean(entry)?;
    if rel.is_empty() {
        return Err(BadEntry::WholeRepository);
    }
    let first = rel.split('/').next().unwrap_or_default();
    if first == ".git" || first == ".orch" {
        return Err(BadEntry::OwnFolder(first.to_owned()));
    }
    Ok(rel)
}

/// `entry` without `.` components and empty ones; `..` refused.
fn clean(entry: &str) -> Result<String, BadEntry> {
    if entry.contains('\\') || entry.chars().any(char::is_control) {
        return Err(BadEntry::Unprintable);
    }
    let mut parts = Vec::new();
    for part in entry.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(BadEntry::Parent),
            p => parts.push(p),
        }
    }
    Ok(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(lines: &[(&str, &str)]) -> Section {
        let mut values: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        for (k, v) in lines {
            values.entry(k.to_string()).or_default().push(v.to_string());
        }
        Section {
            name: "worktree".into(),
            subsection: None,
            values,
        }
    }

    #[test]
    fn suggestions_follow_the_files_seen() {
        let root = tempfile::tempdir().expect("tmp");
        assert_eq!(suggested(root.path()), None);
        std::fs::write(root.path().join("Cargo.toml"), "").expect("w");
        std::fs::write(root.path().join("package.json"), "{}").expect("w");
        std::fs::write(root.path().join(".env"), "K=v").expect("w");
        assert_eq!(
            suggested(root.path()).as_deref(),
            Some("[worktree]\n\tcache = target/ node_modules/\n\tinclude = .env\n")
        );
    }

    #[test]
    fn entries_are_read_and_normalised() {
        let home = std::path::Path::new("/home/ada");
        let w = parse(
            &section(&[
                ("include", ".env config/local.toml"),
                ("include", "./secrets/*.json"),
                ("cache", "target/ node_modules"),
                ("cache", "~/.cargo/registry/"),
                ("cache", "/home/ada/.npm"),
                ("cachemode", "copy"),
            ]),
            Some(home),
        )
        .expect("valid");
        assert_eq!(w.include, [".env", "config/local.toml", "secrets/*.json"]);
        assert_eq!(
            w.cache,
            [
                CachePath::Repo("target".into()),
                CachePath::Repo("node_modules".into()),
                CachePath::Home(".cargo/registry".into()),
                CachePath::Home(".npm".into()),
            ]
        );
        assert_eq!(w.mode, CacheMode::Copy);
        assert_eq!(w.cache[0].to_string(), "target/");
    }

    #[test]
    fn entries_that_escape_are_refused() {
        let home = std::path::Path::new("/home/ada");
        for (key, value, why) in [
            ("cache", "../other/target", "leaves the repository"),
            ("cache", "target/../../x", "leaves the repository"),
            ("cache", "/etc", "leaves the repository"),
            ("cache", "/home/ada", "whole home folder"),
            ("cache", "~/", "whole home folder"),
            ("cache", "~/../bob/.cargo", "leaves the repository"),
            ("cache", ".git/objects", "git's or git-orch's own"),
            ("cache", ".", "whole repository"),
            ("cache", "tar*", "is a glob"),
            ("include", "/etc/passwd", "leaves the repository"),
            ("include", "../.env", "leaves the repository"),
            ("include", "~/.ssh/id_rsa", "leaves the repository"),
            ("include", ".orch/config", "git's or git-orch's own"),
            ("include", "a[", "not a valid glob"),
            ("cachemode", "fast", "not auto or copy"),
        ] {
            let e = parse(&section(&[(key, value)]), Some(home)).expect_err(value);
            assert!(e.message.contains(why), "{value}: {e:?}");
            assert_eq!(e.key.to_ascii_lowercase(), key, "{e:?}");
        }
    }
}
