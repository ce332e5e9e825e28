//! Linked worktrees for attempts: add, remove, list, and the questions the
//! runner asks about a working tree (is it dirty?).
//!
//! Adding goes through gix, which checks out in parallel and rolls the
//! registration back if checkout fails. Removal refuses dirty worktrees
//! unless forced. Dirtiness is asked of `git status`, which knows every
//! rule (ignores, submodules, the index) a user expects.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use super::{Result, Store, StoreError, full_name};

/// One registered linked worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkedWorktree {
    pub path: PathBuf,
    /// `refs/heads/…` checked out there, if any.
    pub branch: Option<String>,
    /// Whether git considers it prunable (its folder is gone).
    pub prunable: bool,
}

/// Serialises changes to git's records of linked worktrees: adding one
/// writes its record before its folder, and neither gix nor `git worktree
/// prune` expect another process between the two.
const WORKTREES_LOCK: &str = "worktrees.lock";

impl Store {
    /// Adds a linked worktree at `path` with `branch` (a full ref name,
    /// which must exist) checked out.
    pub fn add_worktree(&self, path: &Path, branch: &str) -> Result<()> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| StoreError::io(format!("creating {}", parent.display()), e))?;
        }
        let name = full_name(branch)?;
        let interrupt = AtomicBool::new(false);
        // gix reads every registered worktree while adding one; another add
        // half done (its gitdir file still empty) makes that fail, so adds
        // are taken one at a time, across processes too.
        let _one_at_a_time = self.lock(WORKTREES_LOCK, "adding a worktree")?;
        self.repo
            .add_worktree(
                path,
                gix::worktree::add::Head::Attached(name),
                gix::progress::Discard,
                &interrupt,
            )
            .map(|_| ())
            .map_err(|e| StoreError::git(format!("adding worktree {}", path.display()), e))
    }

    /// Adds a linked worktree at `path` with a detached HEAD at `commit`.
    pub fn add_worktree_detached(&self, path: &Path, commit: super::Oid) -> Result<()> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| StoreError::io(format!("creating {}", parent.display()), e))?;
        }
        let interrupt = AtomicBool::new(false);
        let _one_at_a_time = self.lock(WORKTREES_LOCK, "adding a worktree")?;
        self.repo
            .add_worktree(
                path,
                gix::worktree::add::Head::Detached(commit),
                gix::progress::Discard,
                &interrupt,
            )
            .map(|_| ())
            .map_err(|e| StoreError::git(format!("adding worktree {}", path.display()), e))
    }

    /// Drops the registration of a worktree whose folder is gone, even when
    /// a process killed while adding it left it locked (which `git worktree
    /// prune` respects). Only for git-orch's own scratch worktrees.
    pub fn forget_worktree(&self, path: &Path) -> Result<()> {
        let _one_at_a_time = self.lock(WORKTREES_LOCK, "forgetting a worktree")?;
        let Ok(entries) = std::fs::read_dir(self.common_dir().join("worktrees")) else {
            return Ok(());
        };
        let want = path.join(".git");
        for entry in entries.flatten() {
            let gitdir = std::fs::read_to_string(entry.path().join("gitdir")).unwrap_or_default();
            if Path::new(gitdir.trim()) == want {
                std::fs::remove_dir_all(entry.path()).map_err(|e| {
                    StoreError::io(format!("removing {}", entry.path().display()), e)
                })?;
            }
        }
        Ok(())
    }

    /// Removes the registration of the worktree at `path` if a process
    /// killed while adding it left it half written (an empty or missing
    /// `gitdir`): gix refuses to list worktrees while one is broken, which
    /// would stop every later attempt. Registrations are named after the
    /// folder (with a number when taken); one that is whole is left alone.
    pub fn repair_half_made_worktree(&self, path: &Path) -> Result<()> {
        let _one_at_a_time = self.lock(WORKTREES_LOCK, "repairing a worktree record")?;
        let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else {
            return Ok(());
        };
        let Ok(entries) = std::fs::read_dir(self.common_dir().join("worktrees")) else {
            return Ok(());
        };
        for entry in entries.flatten() {
            let entry_name = entry.file_name().to_string_lossy().into_owned();
            let ours = entry_name == name
                || entry_name.strip_prefix(&name).is_some_and(|rest| {
                    !rest.is_empty() && rest.chars().all(|c| c.is_ascii_digit())
                });
            let gitdir = std::fs::read_to_string(entry.path().join("gitdir")).unwrap_or_default();
            if ours && gitdir.trim().is_empty() {
                std::fs::remove_dir_all(entry.path()).map_err(|e| {
                    StoreError::io(format!("removing {}", entry.path().display()), e)
                })?;
            }
        }
        Ok(())
    }

    /// Every working tree (main or linked) that has `branch` (a full ref
    /// name) checked out.
    pub fn checkouts_of(&self, branch: &str) -> Result<Vec<PathBuf>> {
        Ok(self
            .worktree_records()
            .into_iter()
            .map(|(_, w)| w)
            .filter(|w| w.branch.as_deref() == Some(branch) && !w.prunable)
            .map(|w| w.path)
            .collect())
    }

    /// git's records of working trees, read from `.git/worktrees/*/`
    /// directly rather than through `git worktree list`, which fails on a
    /// record another process is writing this instant: such a half-made
    /// record (no `gitdir` yet) is skipped, never an error. The main
    /// worktree comes first, marked `true`.
    fn worktree_records(&self) -> Vec<(bool, LinkedWorktree)> {
        let head_of = |git_dir: &Path| -> Option<String> {
            let head = std::fs::read_to_string(git_dir.join("HEAD")).ok()?;
            head.trim().strip_prefix("ref: ").map(str::to_owned)
        };
        let mut out = Vec::new();
        let common = self.common_dir();
        // From the configuration read when the repository was opened, not
        // a `git config` process: this runs several times per attempt and
        // landing, and whether the repository is bare does not change
        // under a running process.
        let bare = self
            .repo
            .config_snapshot()
            .boolean("core.bare")
            .unwrap_or(false);
        if !bare
            && common.file_name().is_some_and(|n| n == ".git")
            && let Some(main) = common.parent()
        {
            out.push((
                true,
                LinkedWorktree {
                    path: main.to_owned(),
                    branch: head_of(common),
                    prunable: false,
                },
            ));
        }
        let Ok(entries) = std::fs::read_dir(common.join("worktrees")) else {
            return out;
        };
        let mut linked: Vec<LinkedWorktree> = entries
            .flatten()
            .filter_map(|e| {
                let gitdir = std::fs::read_to_string(e.path().join("gitdir")).ok()?;
                let gitdir = PathBuf::from(gitdir.trim());
                if gitdir.as_os_str().is_empty() {
                    return None;
                }
                let path = gitdir.parent()?.to_owned();
                Some(LinkedWorktree {
                    prunable: !gitdir.exists(),
                    branch: head_of(&e.path()),
                    path,
                })
            })
            .collect();
        linked.sort_by(|a, b| a.path.cmp(&b.path));
        out.extend(linked.into_iter().map(|w| (false, w)));
        out
    }

    /// Removes the linked worktree at `path`; dirty ones only with `force`.
    pub fn remove_worktree(&self, path: &Path, force: bool) -> Result<()> {
        let _one_at_a_time = self.lock(WORKTREES_LOCK, "removing a worktree")?;
        let mut args = vec!["worktree", "remove"];
        if force {
            args.push("--force");
        }
        let p = path.to_string_lossy();
        args.push(&p);
        self.git().run(&args)?;
        Ok(())
    }

    /// Removes the linked worktree at `path`, which [`Store::is_dirty`] has
    /// just found clean, without starting git: its folder, then git's
    /// record of it (what `git worktree remove` does after repeating that
    /// check). A worktree that is locked or has a `.gitmodules` goes
    /// through `git worktree remove` instead, which refuses the first and
    /// checks the submodules of the second itself.
    pub fn remove_clean_worktree(&self, path: &Path) -> Result<()> {
        let locked = linked_git_dir(path).is_none_or(|a| a.join("locked").exists());
        if locked || path.join(".gitmodules").exists() {
            return self.remove_worktree(path, false);
        }
        std::fs::remove_dir_all(path)
            .map_err(|e| StoreError::io(format!("removing {}", path.display()), e))?;
        self.forget_worktree(path)
    }

    /// `git worktree prune`: forget worktrees whose folders are gone.
    pub fn prune_worktrees(&self) -> Result<()> {
        // A worktree being added has its record before its folder: prune
        // must not run meanwhile, or it drops the record under the adder.
        let _one_at_a_time = self.lock(WORKTREES_LOCK, "pruning worktrees")?;
        self.git().run(["worktree", "prune"])?;
        Ok(())
    }

    /// Every linked worktree git knows of (not the main one).
    pub fn linked_worktrees(&self) -> Result<Vec<LinkedWorktree>> {
        Ok(self
            .worktree_records()
            .into_iter()
            .filter(|(main, _)| !main)
            .map(|(_, w)| w)
            .collect())
    }

    /// The paths of the working tree at `dir` that differ from its HEAD:
    /// modified, staged, deleted, and untracked (not ignored) files, with
    /// whether each is untracked.
    pub fn dirty_paths(&self, dir: &Path) -> Result<Vec<(String, bool)>> {
        let out = crate::process::Git::new(dir).output([
            "status",
            "--porcelain=v1",
            "-z",
            "--untracked-files=all",
            "--no-renames",
        ])?;
        if !out.status.success() {
            return Err(StoreError::Process(crate::process::ProcessError::Failed {
                command: format!("git status in {}", dir.display()),
                status: out.status.to_string(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            }));
        }
        Ok(out
            .stdout
            .split(|b| *b == 0)
            .filter(|e| e.len() > 3)
            .map(|e| {
                let untracked = e.starts_with(b"??");
                (String::from_utf8_lossy(&e[3..]).into_owned(), untracked)
            })
            .collect())
    }

    /// Whether the working tree at `dir` has uncommitted changes or
    /// untracked files (ignored files do not count).
    pub fn is_dirty(&self, dir: &Path) -> Result<bool> {
        // What `git worktree remove` checks before it removes one.
        let out = crate::process::Git::new(dir).run([
            "status",
            "--porcelain",
            "--untracked-files=normal",
            "--ignore-submodules=none",
        ])?;
        Ok(!out.trim().is_empty())
    }

    /// The commit checked out in the linked worktree at `worktree`, read
    /// from its HEAD file (the branch it names, or a detached id) without
    /// starting git; `None` when that cannot be read (an unborn branch, a
    /// folder that is no worktree).
    pub fn worktree_head(&self, worktree: &Path) -> Option<super::Oid> {
        let head = std::fs::read_to_string(linked_git_dir(worktree)?.join("HEAD")).ok()?;
        let head = head.trim();
        match head.strip_prefix("ref:") {
            Some(name) => self.ref_target(name.trim()).ok().flatten(),
            None => self.parse_oid(head).ok(),
        }
    }

    /// The branch checked out in the working tree at `dir`, if any.
    pub fn checked_out_branch(&self, dir: &Path) -> Result<Option<String>> {
        let out = crate::process::Git::new(dir).output(["symbolic-ref", "-q", "HEAD"])?;
        let s = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        Ok((out.status.success() && !s.is_empty()).then_some(s))
    }
}

/// The git dir of the linked worktree at `worktree` (its record under
/// `.git/worktrees/`), from the `gitdir:` line of its `.git` file; `None`
/// for a folder that is no linked worktree.
fn linked_git_dir(worktree: &Path) -> Option<std::path::PathBuf> {
    let dot_git = std::fs::read_to_string(worktree.join(".git")).ok()?;
    // A relative path is relative to the worktree; `join` keeps an
    // absolute one as it is.
    Some(worktree.join(dot_git.strip_prefix("gitdir:")?.trim()))
}
