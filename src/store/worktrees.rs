//! Linked worktrees: git's records of them (`.git/worktrees/*/`), the
//! adoption of an attempt's worktree once its agent is gone, and the
//! questions git-orch asks about a working tree (is it dirty?).
//!
//! An attempt's worktree is never a linked worktree while its agent runs
//! (see [`super::quarantine`]); afterwards it becomes one, with a record
//! written here. Questions about a linked worktree are asked of git with
//! that record as its git directory ([`crate::process::HardenedGit`]),
//! never through the folder's own `.git`. The user's main checkout is
//! asked with plain `git status`, which knows every rule (ignores,
//! submodules, the index) a user expects.

use std::path::{Path, PathBuf};

use super::error::{Result, StoreError, full_name};
use super::repository::Store;

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
    /// Makes the folder `dir`, which holds the files of `branch` (a full
    /// ref name) and whatever `.git` something else left there, a linked
    /// worktree of the repository on that branch: its `.git` is replaced
    /// by one written here, and git's record of it (`HEAD` on the branch,
    /// `index` a copy of `index`, which must describe the files) is made
    /// in the repository's own git directory, where nothing that ran in
    /// the folder could write. Files are not touched.
    pub fn adopt_worktree(&self, dir: &Path, branch: &str, index: &Path) -> Result<()> {
        full_name(branch)?;
        let _one_at_a_time = self.lock(WORKTREES_LOCK, "adding a worktree")?;
        let io = |what: String| move |e| StoreError::io(what, e);
        let dot_git = dir.join(".git");
        match std::fs::symlink_metadata(&dot_git) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&dot_git),
            Ok(_) => std::fs::remove_file(&dot_git),
            Err(_) => Ok(()),
        }
        .map_err(io(format!("removing {}", dot_git.display())))?;
        let records = self.common_dir().join("worktrees");
        let base = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "worktree".into());
        // `git worktree prune` (which `git gc` runs) removes a record
        // without a `gitdir` unless it is locked: the record is locked
        // while it is written, as `git worktree add` does, and written
        // again if a prune removed it before the lock was there.
        let mut tries = 0;
        let admin = loop {
            let mut name = base.clone();
            let mut n = 1;
            while std::fs::symlink_metadata(records.join(&name)).is_ok() {
                name = format!("{base}{n}");
                n += 1;
            }
            let admin = records.join(&name);
            match self.write_worktree_record(&admin, branch, index, &dot_git) {
                Ok(()) => break admin,
                Err(e) if tries < 4 && e.kind() == std::io::ErrorKind::NotFound => tries += 1,
                Err(e) => return Err(io(format!("writing {}", admin.display()))(e)),
            }
        };
        std::fs::write(&dot_git, format!("gitdir: {}\n", admin.display()))
            .map_err(io(format!("writing {}", dot_git.display())))?;
        // Whole now: unlocked, as `git worktree add` leaves it.
        std::fs::remove_file(admin.join("locked"))
            .map_err(io(format!("unlocking {}", admin.display())))
    }

    /// Writes git's record of a linked worktree at `admin`, locked.
    fn write_worktree_record(
        &self,
        admin: &Path,
        branch: &str,
        index: &Path,
        dot_git: &Path,
    ) -> std::io::Result<()> {
        std::fs::create_dir_all(admin)?;
        let write = |file: &str, text: String| std::fs::write(admin.join(file), text);
        write("locked", "initializing\n".into())?;
        write("HEAD", format!("ref: {branch}\n"))?;
        write("commondir", "../..\n".into())?;
        std::fs::copy(index, admin.join("index"))?;
        // Last: a record with a `gitdir` is whole.
        write("gitdir", format!("{}\n", dot_git.display()))
    }

    /// The repository's own record of the linked worktree at `dir`
    /// (`.git/worktrees/<name>/`), found from the records' side: the
    /// folder's `.git` file is not read.
    pub fn worktree_record(&self, dir: &Path) -> Option<PathBuf> {
        let want = dir.join(".git");
        std::fs::read_dir(self.common_dir().join("worktrees"))
            .ok()?
            .flatten()
            .find(|e| {
                std::fs::read_to_string(e.path().join("gitdir"))
                    .is_ok_and(|g| Path::new(g.trim()) == want)
            })
            .map(|e| e.path())
    }

    /// What the linked worktree at `dir` holds beyond its branch: changed
    /// and untracked (not ignored) paths, asked of git with the
    /// repository's own record of the worktree (never its `.git` file),
    /// and the commit its HEAD is on. `None` if git has no record of it.
    pub fn linked_worktree_state(
        &self,
        dir: &Path,
    ) -> Result<Option<(Vec<String>, Option<super::oid::Oid>)>> {
        let Some(record) = self.worktree_record(dir) else {
            return Ok(None);
        };
        let out = self.retrying(|| {
            let out = crate::process::HardenedGit::new(&record)
                .work_tree(dir)
                .output([
                    "status",
                    "--porcelain",
                    "-z",
                    "--untracked-files=normal",
                    "--ignore-submodules=all",
                    "--no-renames",
                ])?;
            failed_status(&out)?;
            Ok(out)
        })?;
        let paths = status_entries(out, dir)?
            .into_iter()
            .map(|e| e.path)
            .collect();
        Ok(Some((paths, self.record_head(&record))))
    }

    /// The commit the linked worktree at `dir` is on, from the
    /// repository's record of it; `None` without one.
    pub fn linked_worktree_head(&self, dir: &Path) -> Option<super::oid::Oid> {
        self.record_head(&self.worktree_record(dir)?)
    }

    /// The commit the HEAD of a worktree record names.
    fn record_head(&self, record: &Path) -> Option<super::oid::Oid> {
        let head = std::fs::read_to_string(record.join("HEAD")).ok()?;
        let head = head.trim();
        match head.strip_prefix("ref:") {
            Some(name) => self.ref_target(name.trim()).ok().flatten(),
            None => self.parse_oid(head).ok(),
        }
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
        let out = self.retrying(|| {
            let out = crate::process::Git::new(dir).output([
                "status",
                "--porcelain=v1",
                "-z",
                "--untracked-files=all",
                "--no-renames",
            ])?;
            failed_status(&out)?;
            Ok(out)
        })?;
        Ok(status_entries(out, dir)?
            .into_iter()
            .map(|e| {
                let untracked = e.untracked();
                (e.path, untracked)
            })
            .collect())
    }

    /// The branch checked out in the working tree at `dir`, if any.
    pub fn checked_out_branch(&self, dir: &Path) -> Result<Option<String>> {
        let out = crate::process::Git::new(dir).output(["symbolic-ref", "-q", "HEAD"])?;
        let s = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        Ok((out.status.success() && !s.is_empty()).then_some(s))
    }
}

/// One entry of `git status --porcelain=v1 -z`: `XY path`.
pub(crate) struct StatusEntry {
    /// The index against HEAD.
    pub x: u8,
    /// The working tree against the index.
    pub y: u8,
    pub path: String,
}

impl StatusEntry {
    pub fn untracked(&self) -> bool {
        self.x == b'?'
    }
}

/// The entries of `git status --porcelain=v1 -z` run on `dir`, or why
/// it failed.
pub(crate) fn status_entries(out: std::process::Output, dir: &Path) -> Result<Vec<StatusEntry>> {
    if !out.status.success() {
        return Err(StoreError::Process(crate::process::ProcessError::Failed {
            command: format!("git status of {}", dir.display()),
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        }));
    }
    Ok(out
        .stdout
        .split(|b| *b == 0)
        .filter(|e| e.len() > 3)
        .map(|e| StatusEntry {
            x: e[0],
            y: e[1],
            path: String::from_utf8_lossy(&e[3..]).into_owned(),
        })
        .collect())
}

/// A failed `git status` as an error, so [`Store::retrying`] can write
/// again an object a prune took (its HEAD's tree, a blob of its index)
/// and run it once more.
pub(crate) fn failed_status(out: &std::process::Output) -> Result<()> {
    if out.status.success() {
        return Ok(());
    }
    Err(StoreError::Process(crate::process::ProcessError::Failed {
        command: "git status".into(),
        status: out.status.to_string(),
        stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
    }))
}
