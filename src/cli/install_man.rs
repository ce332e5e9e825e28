//! `git orch install-man`: write the man pages where `man` finds them, so
//! that `git orch --help` (which git turns into `man git-orch`) works.
//!
//! The pages come from [`super::manual`]; this file only decides where they
//! go and whether `man` will look there.

use std::path::{Path, PathBuf};

use clap::Args;

use super::error::CommandError;
use super::exit;
use super::globals::{CommandResult, GlobalArgs};
use super::{manual, output};

/// Install the man pages, so that `git orch --help` and `man git-orch` work.
///
/// Writes git-orch(1) and one page per command (git-orch-run(1),
/// git-orch-plan-check(1), …), replacing pages of an older version. The
/// default directory is share/man/man1 next to the directory holding this
/// program: for `cargo install`, ~/.cargo/share/man/man1, which man finds
/// by itself because ~/.cargo/bin is on PATH.
#[derive(Debug, Args)]
pub struct InstallManArgs {
    /// Write the pages into DIR (e.g. ~/.local/share/man/man1).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// `<dir of the running executable>/../share/man/man1`.
fn default_dir() -> Result<PathBuf, CommandError> {
    let exe = std::env::current_exe().map_err(|e| {
        CommandError::error(format!(
            "cannot tell where this program is ({e})\nhint: pass --dir <DIR>"
        ))
    })?;
    let bin = exe.parent().unwrap_or(Path::new("."));
    let prefix = bin.parent().unwrap_or(bin);
    Ok(prefix.join("share").join("man").join("man1"))
}

/// Whether man-db searches the man root `root` (the folder holding man1/),
/// given `PATH` and `MANPATH`: listed in MANPATH, or (when MANPATH is unset
/// or has an empty entry, which stands for the default path) a standard
/// folder or `<entry>/../share/man` / `<entry>/../man` of a PATH entry.
pub fn man_searches(root: &Path, path: Option<&str>, manpath: Option<&str>) -> bool {
    let same = |a: &Path| {
        a == root
            || matches!(
                (a.canonicalize(), root.canonicalize()),
                (Ok(x), Ok(y)) if x == y
            )
    };
    if let Some(mp) = manpath {
        if mp.split(':').any(|d| !d.is_empty() && same(Path::new(d))) {
            return true;
        }
        if !mp.split(':').any(str::is_empty) {
            return false;
        }
    }
    let standard = ["/usr/share/man", "/usr/local/share/man", "/usr/local/man"];
    if standard.iter().any(|d| same(Path::new(d))) {
        return true;
    }
    path.unwrap_or_default()
        .split(':')
        .filter(|d| !d.is_empty())
        .filter_map(|d| Path::new(d).parent())
        .any(|prefix| same(&prefix.join("share").join("man")) || same(&prefix.join("man")))
}

/// `tree`: the whole command tree, whose pages are installed.
pub fn run(_cli: &GlobalArgs, args: &InstallManArgs, tree: clap::Command) -> CommandResult {
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => default_dir()?,
    };
    let failed = |what: &str, path: &Path, e: std::io::Error| {
        CommandError::error(format!(
            "cannot {what} {} ({e})\nhint: pass --dir with a directory you can write to, \
             e.g. --dir ~/.local/share/man/man1",
            path.display()
        ))
    };
    std::fs::create_dir_all(&dir).map_err(|e| failed("create", &dir, e))?;
    let pages = manual::man_pages(tree);
    // Pages of commands that no longer exist would outlive an upgrade.
    if let Ok(entries) = std::fs::read_dir(&dir) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let ours = name.starts_with("git-orch") && name.ends_with(".1");
            if ours && !pages.iter().any(|p| p.file_name == name) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    for page in &pages {
        let path = dir.join(&page.file_name);
        std::fs::write(&path, &page.text).map_err(|e| failed("write", &path, e))?;
    }
    output::status(&format!(
        "Installed {} man pages in {}.",
        pages.len(),
        dir.display()
    ));
    let root = dir.parent().unwrap_or(&dir);
    let path = std::env::var("PATH").ok();
    let manpath = std::env::var("MANPATH").ok();
    if !man_searches(root, path.as_deref(), manpath.as_deref()) {
        output::status(&format!(
            "hint: man does not search {root} yet; add `export MANPATH=\"{root}:$MANPATH\"` \
             to your shell profile (the colon keeps the default pages)",
            root = root.display()
        ));
    }
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn man_finds_share_man_beside_a_bin_dir_on_path() {
        let root = Path::new("/opt/tool/share/man");
        assert!(man_searches(root, Some("/usr/bin:/opt/tool/bin"), None));
        assert!(!man_searches(root, Some("/usr/bin"), None));
        assert!(man_searches(root, None, Some("/opt/tool/share/man")));
        // A MANPATH without an empty entry replaces the default search.
        assert!(!man_searches(
            root,
            Some("/opt/tool/bin"),
            Some("/usr/share/man")
        ));
        assert!(man_searches(
            root,
            Some("/opt/tool/bin"),
            Some("/usr/share/man:")
        ));
        assert!(man_searches(Path::new("/usr/share/man"), None, None));
    }
}
