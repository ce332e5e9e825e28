//! Installing and removing the hook shims, chaining whatever hook was
//! there before.
//!
//! A shim is a small `sh` script (the files under the repository's
//! top-level `hooks/`, compiled in) that calls `git-orch hook <name>` by
//! the absolute path of the binary that installed it, falling back to
//! `git orch` on PATH. It carries a marker line, so installing twice
//! rewrites the shim in place and never chains a shim to itself.
//!
//! The hooks folder is the one git uses, `git rev-parse --git-path hooks`,
//! which honours `core.hooksPath`. A hook already there is renamed to
//! `<name>.orch-chained` (a rename keeps its bytes and mode exactly); the
//! shim runs it first and stops if it fails. Uninstalling renames it back,
//! or removes the shim if there was none. A hook that is not ours is never
//! overwritten or removed.

use std::path::{Path, PathBuf};

use crate::process::Git;

use super::HookError;

/// The line that marks a file as a git-orch shim.
pub const MARKER: &str = "# git-orch-shim: ";
/// What a chained hook's file name ends with.
pub const CHAINED_SUFFIX: &str = ".orch-chained";
/// The placeholder in a shim that install replaces by the binary's path.
const EXE_PLACEHOLDER: &str = "'@GIT_ORCH_EXE@'";

/// A hook git-orch can install.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    /// Client: refuses pushing protected branches to unverified commits.
    PrePush,
    /// Server: refuses malformed or rewritten state and unverified landings.
    PreReceive,
    /// Attempt worktrees: refuses commits outside the owned globs.
    PreCommit,
}

impl Hook {
    pub fn name(self) -> &'static str {
        match self {
            Hook::PrePush => "pre-push",
            Hook::PreReceive => "pre-receive",
            Hook::PreCommit => "pre-commit",
        }
    }

    /// The shim's text, with `{exe}` still a placeholder.
    fn template(self) -> &'static str {
        match self {
            Hook::PrePush => include_str!("../../hooks/pre-push"),
            Hook::PreReceive => include_str!("../../hooks/pre-receive"),
            Hook::PreCommit => include_str!("../../hooks/pre-commit"),
        }
    }

    /// The shim that calls the binary at `exe`.
    pub fn shim(self, exe: &Path) -> String {
        let quoted = crate::run::workspace::sh_quote(&exe.to_string_lossy());
        self.template().replacen(EXE_PLACEHOLDER, &quoted, 1)
    }
}

/// Whether `bytes` are a git-orch shim.
pub fn is_shim(bytes: &[u8]) -> bool {
    String::from_utf8_lossy(bytes)
        .lines()
        .take(5)
        .any(|l| l.starts_with(MARKER))
}

/// The hooks folder git uses for the repository containing `dir`
/// (`core.hooksPath` if set), as an absolute path.
pub fn hooks_dir(dir: &Path) -> Result<PathBuf, HookError> {
    let out = Git::new(dir).run(["rev-parse", "--git-path", "hooks"])?;
    let path = PathBuf::from(out.trim());
    Ok(if path.is_absolute() {
        path
    } else {
        dir.join(path)
    })
}

/// What installing one hook did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    pub hook: Hook,
    pub path: PathBuf,
    /// The earlier hook, now run first by the shim.
    pub chained: Option<PathBuf>,
    /// Whether anything was written (false: the same shim was there).
    pub changed: bool,
}

/// What uninstalling one hook did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Uninstalled {
    /// The earlier hook is back in place.
    Restored { path: PathBuf },
    /// The shim was removed; there was no earlier hook.
    Removed { path: PathBuf },
    /// No shim of ours was there; nothing changed.
    Absent { path: PathBuf },
}

fn chained_path(dir: &Path, hook: Hook) -> PathBuf {
    dir.join(format!("{}{CHAINED_SUFFIX}", hook.name()))
}

/// Reads `path` without following a symbolic link at it; `None` if absent.
fn read_hook(path: &Path) -> Result<Option<Vec<u8>>, HookError> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(HookError::io(format!("reading {}", path.display()), e)),
        Ok(_) => {}
    }
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        // A dangling link is a hook that is not ours.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Some(Vec::new())),
        Err(e) => Err(HookError::io(format!("reading {}", path.display()), e)),
    }
}

/// A complete executable file holding `text` in the folder `dir`, to be
/// renamed over a hook, so a hook is never seen half-written.
fn staged_executable(dir: &Path, text: &str) -> Result<tempfile::NamedTempFile, HookError> {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    let io = |e| HookError::io(format!("writing a hook in {}", dir.display()), e);
    let mut tmp = tempfile::Builder::new()
        .prefix(".git-orch-hook-")
        .tempfile_in(dir)
        .map_err(io)?;
    tmp.write_all(text.as_bytes()).map_err(io)?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o755))
        .map_err(io)?;
    Ok(tmp)
}

/// Writes `text` to `path` atomically, executable.
fn write_executable(path: &Path, text: &str) -> Result<(), HookError> {
    let dir = path.parent().expect("a hook path has a folder");
    staged_executable(dir, text)?
        .persist(path)
        .map_err(|e| HookError::io(format!("writing {}", path.display()), e.error))?;
    Ok(())
}

/// Installs `hook` in the folder `dir`, calling the binary at `exe`.
pub fn install(dir: &Path, hook: Hook, exe: &Path) -> Result<Installed, HookError> {
    let path = dir.join(hook.name());
    let chained = chained_path(dir, hook);
    let shim = hook.shim(exe);
    let chained_exists = std::fs::symlink_metadata(&chained).is_ok();
    match read_hook(&path)? {
        Some(bytes) if is_shim(&bytes) => {
            let changed = bytes != shim.as_bytes();
            if changed {
                write_executable(&path, &shim)?;
            }
            Ok(Installed {
                hook,
                path,
                chained: chained_exists.then_some(chained),
                changed,
            })
        }
        Some(_) if chained_exists => Err(HookError::Replaced {
            hook: path,
            chained,
        }),
        Some(_) => {
            // The shim is made complete beside the hook before the hook
            // moves, so a failure leaves the original where it was.
            let tmp = staged_executable(dir, &shim)?;
            std::fs::rename(&path, &chained).map_err(|e| {
                HookError::io(
                    format!("moving {} to {}", path.display(), chained.display()),
                    e,
                )
            })?;
            if let Err(e) = tmp.persist(&path) {
                let _ = std::fs::rename(&chained, &path);
                return Err(HookError::io(
                    format!("writing {}", path.display()),
                    e.error,
                ));
            }
            Ok(Installed {
                hook,
                path,
                chained: Some(chained),
                changed: true,
            })
        }
        None => {
            std::fs::create_dir_all(dir)
                .map_err(|e| HookError::io(format!("creating {}", dir.display()), e))?;
            write_executable(&path, &shim)?;
            Ok(Installed {
                hook,
                path,
                chained: chained_exists.then_some(chained),
                changed: true,
            })
        }
    }
}

/// Removes `hook` from the folder `dir`, putting back the hook it chained.
pub fn uninstall(dir: &Path, hook: Hook) -> Result<Uninstalled, HookError> {
    let path = dir.join(hook.name());
    let chained = chained_path(dir, hook);
    match read_hook(&path)? {
        Some(bytes) if is_shim(&bytes) => {
            if std::fs::symlink_metadata(&chained).is_ok() {
                std::fs::rename(&chained, &path).map_err(|e| {
                    HookError::io(
                        format!("moving {} back to {}", chained.display(), path.display()),
                        e,
                    )
                })?;
                Ok(Uninstalled::Restored { path })
            } else {
                std::fs::remove_file(&path)
                    .map_err(|e| HookError::io(format!("removing {}", path.display()), e))?;
                Ok(Uninstalled::Removed { path })
            }
        }
        _ => Ok(Uninstalled::Absent { path }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shims_carry_the_marker_and_the_quoted_binary() {
        for hook in [Hook::PrePush, Hook::PreReceive, Hook::PreCommit] {
            let text = hook.shim(Path::new("/opt/it's/git-orch"));
            assert!(is_shim(text.as_bytes()), "{}", hook.name());
            assert!(text.starts_with("#!/bin/sh\n"));
            assert!(text.contains(&format!("{MARKER}{}", hook.name())));
            assert!(text.contains("exe='/opt/it'\\''s/git-orch'"), "{text}");
            assert!(!text.contains("@GIT_ORCH_EXE@"));
            assert!(text.contains(&format!("{}{CHAINED_SUFFIX}", "$hook")));
        }
        assert!(!is_shim(b"#!/bin/sh\necho mine\n"));
    }

    #[test]
    fn install_chains_and_uninstall_restores() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("temp dir");
        let hooks = dir.path().join("hooks");
        std::fs::create_dir_all(&hooks).expect("mkdir");
        let original = hooks.join("pre-push");
        std::fs::write(&original, b"#!/bin/sh\nexit 0\n").expect("write");
        std::fs::set_permissions(&original, std::fs::Permissions::from_mode(0o750)).expect("chmod");
        let exe = Path::new("/usr/bin/git-orch");
        let first = install(&hooks, Hook::PrePush, exe).expect("install");
        assert!(first.changed);
        assert_eq!(first.chained, Some(hooks.join("pre-push.orch-chained")));
        let again = install(&hooks, Hook::PrePush, exe).expect("install again");
        assert!(!again.changed, "idempotent");
        assert_eq!(
            std::fs::read(hooks.join("pre-push.orch-chained")).expect("chained"),
            b"#!/bin/sh\nexit 0\n"
        );
        assert_eq!(
            uninstall(&hooks, Hook::PrePush).expect("uninstall"),
            Uninstalled::Restored {
                path: original.clone()
            }
        );
        assert_eq!(
            std::fs::read(&original).expect("read"),
            b"#!/bin/sh\nexit 0\n"
        );
        let mode = std::fs::metadata(&original)
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o750);
        assert!(!hooks.join("pre-push.orch-chained").exists());
        assert!(matches!(
            uninstall(&hooks, Hook::PrePush).expect("again"),
            Uninstalled::Absent { .. }
        ));
    }
}
