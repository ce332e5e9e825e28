//! The `pre-commit` scope gate of attempt worktrees: a commit there may
//! only touch the attempt's owned globs.
//!
//! An agent's git gets this hook without any install: the attempt's hook
//! folder is put in front through `GIT_CONFIG_COUNT` (see
//! `run::workspace::Workspace::install_hooks`), and it passes the owned globs as a
//! file. `git orch hooks install --worktree` also puts a `pre-commit` shim
//! in the repository's hooks folder, so a person committing by hand in an
//! attempt worktree meets the same rule; that shim passes no globs, and
//! they are found from the branch checked out: an attempt branch
//! (`…/attempt-<n>`) recorded in the log, whose subtask owns them. On any
//! other branch the hook accepts at once, without reading the log.

use std::path::Path;

use crate::process::Git;
use crate::store::Store;

use super::HookError;

/// The owned globs of the attempt whose branch `branch_ref` is, or `None`
/// if it is not an attempt branch this repository recorded.
pub fn attempt_globs(store: &Store, branch_ref: &str) -> Result<Option<Vec<String>>, HookError> {
    let Some(branch) = branch_ref.strip_prefix("refs/heads/") else {
        return Ok(None);
    };
    let looks_like_attempt = branch
        .rsplit_once("/attempt-")
        .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    if !looks_like_attempt {
        return Ok(None);
    }
    let mut index = crate::state::StateIndex::open(store)?;
    let Some(run_id) = index.run_of_branch(branch)? else {
        return Ok(None);
    };
    if let Some(run) = index.run(&run_id)? {
        for (task, state) in &run.tasks {
            if !state.attempts.iter().any(|a| a.branch == branch) {
                continue;
            }
            let revision =
                crate::run::plan_of(store, run).map_err(|e| HookError::State(e.to_string()))?;
            let globs = revision
                .plan
                .subtask(task.as_str())
                .map(|s| s.owned_globs.clone())
                .ok_or_else(|| {
                    HookError::State(format!("run {} has no subtask {task} in its plan", run.id))
                })?;
            return Ok(Some(globs));
        }
    }
    Ok(None)
}

/// The branch checked out in `worktree`, as a full ref name.
pub fn current_branch(worktree: &Path) -> Result<Option<String>, HookError> {
    let out = Git::new(worktree).output(["symbolic-ref", "-q", "HEAD"])?;
    let name = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    Ok((out.status.success() && !name.is_empty()).then_some(name))
}

/// The staged paths in `worktree` that `globs` (owned globs, `!`
/// exclusions included) do not own: every side of every change
/// (additions, modifications, deletions and both names of a rename).
/// Globs that cannot be read refuse everything: the hook fails closed.
pub fn outside_paths(worktree: &Path, globs: &[String]) -> Result<Vec<String>, HookError> {
    let ownership = crate::plan::glob::Ownership::new(globs).map_err(HookError::Globs)?;
    let staged =
        Git::new(worktree).run(["diff", "--cached", "--name-only", "--no-renames", "-z"])?;
    Ok(staged
        .split('\0')
        .filter(|p| !p.is_empty())
        .filter(|p| !ownership.is_owned(p))
        .map(str::to_owned)
        .collect())
}
