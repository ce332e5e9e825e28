//! An attempt's workspace: its branch, worktree, port block, hook folder,
//! prompt files, and the commit of whatever the agent leaves.
//!
//! The branch and the `attempt_created` record are written in one ref
//! transaction. The worktree is then added; if that fails, the branch is
//! deleted and the attempt recorded abandoned in one transaction again, so
//! there is never a branch without a record or a record pointing at a
//! branch that was never made.

use std::net::TcpListener;
use std::path::{Path, PathBuf};

use crate::event::{Event, Failure, FailureClass, Outcome, PORT_BLOCK};
use crate::ids::{RunId, TaskId};
use crate::process::Git;
use crate::store::log::Operation;
use crate::store::refs::{Expected, RefUpdate};
use crate::store::{Oid, Store, StoreError};

use super::{RunContext, RunError};

/// Where one attempt's things live.
#[derive(Debug, Clone)]
pub struct AttemptPaths {
    /// `refs/heads/…` of the attempt branch.
    pub branch_ref: String,
    pub worktree: PathBuf,
    /// `.git/orch/logs/<run>/<task>/attempt-<n>/`: agent and gate output.
    pub log_dir: PathBuf,
    /// `.git/orch/prompts/<run>/<task>-<n>.md`
    pub prompt: PathBuf,
    /// `.git/orch/prompts/<run>/<task>-<n>.retry.json`
    pub retry_context: PathBuf,
    /// `.git/orch/hooks/<run>/<task>-<n>/`: the hooks the agent's git runs.
    pub hooks: PathBuf,
}

/// The paths of attempt `n` of `task`.
pub fn paths(ctx: &RunContext, task: &crate::plan::Subtask, n: u32) -> AttemptPaths {
    let orch = ctx.common_dir.join("orch");
    let branch = match &task.branch {
        Some(prefix) => format!("{prefix}/{}/attempt-{n}", ctx.run),
        None => format!("orch/{}/{}/attempt-{n}", ctx.run, task.id),
    };
    AttemptPaths {
        branch_ref: format!("refs/heads/{branch}"),
        worktree: ctx
            .worktree_root
            .join(ctx.run.as_str())
            .join(format!("{}-{n}", task.id)),
        log_dir: orch
            .join("logs")
            .join(ctx.run.as_str())
            .join(task.id.as_str())
            .join(format!("attempt-{n}")),
        prompt: orch
            .join("prompts")
            .join(ctx.run.as_str())
            .join(format!("{}-{n}.md", task.id)),
        retry_context: orch
            .join("prompts")
            .join(ctx.run.as_str())
            .join(format!("{}-{n}.retry.json", task.id)),
        hooks: orch
            .join("hooks")
            .join(ctx.run.as_str())
            .join(format!("{}-{n}", task.id)),
    }
}

/// A free block of [`PORT_BLOCK`] ports on 127.0.0.1: the candidate comes
/// from a hash of the worktree path (so an attempt keeps its block across
/// restarts when it is free), then the next blocks are probed.
pub fn port_block(worktree: &Path, base: u16, span: u16) -> Option<u16> {
    let blocks = (span / PORT_BLOCK).max(1) as u64;
    let hash = blake3::hash(worktree.to_string_lossy().as_bytes());
    let first = u64::from_le_bytes(hash.as_bytes()[..8].try_into().expect("8 bytes")) % blocks;
    for i in 0..blocks.min(200) {
        let start = u32::from(base) + (((first + i) % blocks) * u64::from(PORT_BLOCK)) as u32;
        if start + u32::from(PORT_BLOCK) > u32::from(u16::MAX) {
            continue;
        }
        let start = start as u16;
        let free = (start..start + PORT_BLOCK).all(|p| TcpListener::bind(("127.0.0.1", p)).is_ok());
        if free {
            return Some(start);
        }
    }
    None
}

/// What a new attempt is recorded with.
#[derive(Debug, Clone)]
pub struct NewAttempt {
    pub task: TaskId,
    pub n: u32,
    pub port: u16,
    pub agent: String,
    /// The commit its change is judged against.
    pub base: Oid,
    /// Where its branch starts when not at `base` (the previous attempt's
    /// result, for a retry that continues it).
    pub start: Option<Oid>,
    /// Its place in a best-of-N round.
    pub candidate: Option<crate::event::Candidate>,
}

/// Records the attempt and creates its branch at `start` or `base`, in
/// one ref transaction.
pub fn create(
    store: &Store,
    ctx: &RunContext,
    p: &AttemptPaths,
    new: &NewAttempt,
) -> Result<(), RunError> {
    let NewAttempt {
        task,
        n,
        port,
        agent,
        base,
        start,
        candidate,
    } = new;
    let (n, port, base, start) = (*n, *port, *base, *start);
    store.transact(|store| {
        if store.ref_target(&p.branch_ref)?.is_some() {
            return Err(RunError::BranchExists(p.branch_ref.clone()));
        }
        Ok((
            Operation {
                events: vec![Event::AttemptCreated {
                    run_id: ctx.run.clone(),
                    task: task.clone(),
                    attempt: n,
                    branch: p.branch_ref["refs/heads/".len()..].to_owned(),
                    base: base.to_string(),
                    start: start.map(|s| s.to_string()),
                    worktree: p.worktree.to_string_lossy().into_owned(),
                    port,
                    agent: agent.to_owned(),
                    candidate: *candidate,
                }],
                refs: vec![RefUpdate::set(
                    &p.branch_ref,
                    start.unwrap_or(base),
                    Expected::Absent,
                    &format!("orch: attempt {n} of {task}"),
                )],
            },
            (),
        ))
    })?;
    Ok(())
}

/// Gives an attempt up because its worktree could not be made: removes the
/// branch (still at the base, nothing on it) and records why, atomically.
pub fn abandon_unmade(
    store: &Store,
    run: &RunId,
    task: &TaskId,
    n: u32,
    p: &AttemptPaths,
    why: &str,
) -> Result<(), StoreError> {
    store.transact(|store| {
        let mut refs = Vec::new();
        if let Some(at) = store.ref_target(&p.branch_ref)? {
            refs.push(RefUpdate::delete(
                &p.branch_ref,
                at,
                "orch: attempt abandoned",
            ));
        }
        Ok::<_, StoreError>((
            Operation {
                events: vec![Event::AttemptFinished {
                    run_id: run.clone(),
                    task: task.clone(),
                    attempt: n,
                    outcome: Outcome::Abandoned,
                    failure: Some(Failure {
                        class: FailureClass::Internal,
                        reason: format!("the worktree could not be made: {why}"),
                    }),
                }],
                refs,
            },
            (),
        ))
    })?;
    Ok(())
}

/// Writes the attempt's hook folder: a pre-commit hook that refuses staged
/// paths outside the owned globs, then hands over to the hook that was in
/// effect before; every other hook of that folder is chained as is.
/// `exe` is this program, called back as `git-orch hook pre-commit`;
/// `original` is the repository's own hook folder
/// ([`original_hooks_dir`], read once per run).
pub fn install_hooks(
    original: &Path,
    p: &AttemptPaths,
    owned: &[String],
    exe: &Path,
) -> Result<(), StoreError> {
    let io = |e| StoreError::io(format!("writing hooks in {}", p.hooks.display()), e);
    std::fs::create_dir_all(&p.hooks).map_err(io)?;
    let globs_file = p.hooks.join("owned-globs");
    std::fs::write(&globs_file, owned.join("\n") + "\n").map_err(io)?;
    let mut names: Vec<String> = std::fs::read_dir(original)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !n.ends_with(".sample"))
                .collect()
        })
        .unwrap_or_default();
    if !names.iter().any(|n| n == "pre-commit") {
        names.push("pre-commit".into());
    }
    for name in names {
        let chained = original.join(&name);
        let mut script =
            String::from("#!/bin/sh\n# Written by git-orch for one attempt worktree.\n");
        if name == "pre-commit" {
            script.push_str(&format!(
                "{} hook pre-commit --owned-globs {} || exit 1\n",
                sh_quote(&exe.to_string_lossy()),
                sh_quote(&globs_file.to_string_lossy())
            ));
        }
        script.push_str(&format!(
            "if [ -x {h} ]; then exec {h} \"$@\"; fi\nexit 0\n",
            h = sh_quote(&chained.to_string_lossy())
        ));
        let path = p.hooks.join(&name);
        std::fs::write(&path, script).map_err(io)?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).map_err(io)?;
    }
    Ok(())
}

/// The hooks folder git uses in this repository: `core.hooksPath` (relative
/// to the main worktree, as git reads it) or `.git/hooks`.
pub fn original_hooks_dir(store: &Store) -> Result<PathBuf, StoreError> {
    Ok(match store.config_get("core.hooksPath")? {
        Some(p) => {
            let p = PathBuf::from(p);
            if p.is_absolute() {
                p
            } else {
                store
                    .workdir()
                    .map(Path::to_owned)
                    .unwrap_or_else(|| store.common_dir().to_owned())
                    .join(p)
            }
        }
        None => store.common_dir().join("hooks"),
    })
}

/// Single-quotes a value for `sh` (the one helper lives in `process`).
pub use crate::process::shell_quote as sh_quote;

/// Environment that points the agent's git at the attempt's hook folder
/// without touching any config file: git reads `GIT_CONFIG_COUNT`,
/// `GIT_CONFIG_KEY_<n>` and `GIT_CONFIG_VALUE_<n>` (appended after any the
/// user already set).
pub fn hooks_env(hooks: &Path) -> Vec<(String, String)> {
    let n: usize = std::env::var("GIT_CONFIG_COUNT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    vec![
        ("GIT_CONFIG_COUNT".into(), (n + 1).to_string()),
        (format!("GIT_CONFIG_KEY_{n}"), "core.hooksPath".into()),
        (
            format!("GIT_CONFIG_VALUE_{n}"),
            hooks.to_string_lossy().into_owned(),
        ),
    ]
}

/// Commits whatever the agent left uncommitted in `worktree` as the
/// attempt's result commit, with trailers naming run, task and attempt;
/// when it left nothing uncommitted, its own last commit is the result.
/// Returns (commit, tree). Hooks are skipped: the result is judged by the
/// gates, including what the agent should not have written.
pub fn commit_result(
    store: &Store,
    worktree: &Path,
    run: &RunId,
    task: &TaskId,
    n: u32,
    agent: &str,
) -> Result<(Oid, Oid), RunError> {
    let git = Git::new(worktree)
        .env("GIT_AUTHOR_NAME", format!("git-orch agent ({agent})"))
        .env("GIT_AUTHOR_EMAIL", "agent@git-orch.invalid")
        .env("GIT_COMMITTER_NAME", "git-orch")
        .env("GIT_COMMITTER_EMAIL", crate::store::ORCH_EMAIL);
    // Aider's repo-map cache is not the agent's work.
    git.run(["add", "-A", "--", ".", ":(exclude).aider*"])
        .map_err(RunError::Commit)?;
    let message = format!(
        "orch: result of {task} attempt {n}\n\nOrch-Run: {run}\nOrch-Task: {task}\nOrch-Attempt: {n}\nOrch-Agent: {agent}\n"
    );
    // Commit first: a commit with nothing staged fails, and only then is
    // it worth asking why. git-orch runs maintenance itself (every 1000
    // events), not after each result.
    let committed = git
        .output([
            "-c",
            "commit.gpgSign=false",
            "-c",
            "maintenance.auto=false",
            "-c",
            "gc.auto=0",
            "commit",
            "-q",
            "--no-verify",
            "-m",
            &message,
        ])
        .map_err(RunError::Commit)?;
    if !committed.status.success() {
        // Everything committed already (the agent committed its own
        // work): its last commit is the result; no empty commit of ours.
        let staged = git
            .output(["diff", "--cached", "--quiet"])
            .map_err(RunError::Commit)?;
        if !staged.status.success() {
            return Err(RunError::Commit(crate::process::ProcessError::Failed {
                command: "git commit".into(),
                status: committed.status.to_string(),
                stderr: String::from_utf8_lossy(&committed.stderr).trim().to_owned(),
            }));
        }
    }
    let commit = match store.worktree_head(worktree) {
        Some(c) => c,
        None => {
            let (c, _) = head_and_tree(&git).map_err(RunError::Commit)?;
            store.parse_oid(&c)?
        }
    };
    let tree = store.commit_info(commit)?.tree;
    Ok((commit, tree))
}

/// The worktree's HEAD commit and its tree, from one `git rev-parse`.
fn head_and_tree(git: &Git) -> Result<(String, String), crate::process::ProcessError> {
    let out = git.run(["rev-parse", "HEAD", "HEAD^{tree}"])?;
    let mut lines = out.lines().map(str::trim);
    match (lines.next(), lines.next()) {
        (Some(commit), Some(tree)) if !commit.is_empty() && !tree.is_empty() => {
            Ok((commit.to_owned(), tree.to_owned()))
        }
        _ => Err(crate::process::ProcessError::Failed {
            command: "git rev-parse HEAD HEAD^{tree}".into(),
            status: "unexpected output".into(),
            stderr: format!("expected a commit and a tree, got {out:?}"),
        }),
    }
}

/// Puts a scratch worktree of git-orch's own (under `.git/orch/scratch/`)
/// at `commit`, detached, making it if needed. It is not a user's working
/// tree, so it may be forced and cleaned at will.
pub fn prepare_scratch(store: &Store, scratch: &Path, commit: Oid) -> Result<(), StoreError> {
    if scratch.join(".git").exists() {
        let git = Git::new(scratch);
        let reused = git
            .run(["checkout", "-q", "--detach", "--force", &commit.to_string()])
            .and_then(|_| git.run(["clean", "-q", "-f", "-d", "-x"]));
        if reused.is_ok() {
            return Ok(());
        }
        // Half made by a process killed while adding it: start over (it is
        // ours, under .git/orch/, and holds nothing of the user's).
    }
    let _ = std::fs::remove_dir_all(scratch);
    store.forget_worktree(scratch)?;
    store.prune_worktrees()?;
    store.add_worktree_detached(scratch, commit)
}

/// The folder of git-orch's scratch worktrees, `.git/orch/scratch/`.
pub fn scratch_dir(common_dir: &Path) -> PathBuf {
    common_dir.join("orch").join("scratch")
}

/// The lock that says a scratch worktree is in use (`<name>.lock` beside
/// it). Lock files stay: removing one while another process waits on it
/// would let two holders in.
fn scratch_lock(scratch: &Path) -> PathBuf {
    let mut name = scratch.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    scratch.with_file_name(name)
}

/// Holds a scratch worktree (`.git/orch/scratch/<name>`) for one landing
/// or one `git orch gate`, and removes it when dropped, however the
/// landing or gate ends. Its lock tells `git orch cleanup` that the
/// worktree is in use.
#[derive(Debug)]
pub struct ScratchGuard {
    common_dir: PathBuf,
    path: PathBuf,
    _lock: crate::store::lock::LockGuard,
}

impl ScratchGuard {
    /// Takes the scratch worktree at `path` (made later, by
    /// [`prepare_scratch`]).
    pub fn take(common_dir: &Path, path: &Path) -> Result<Self, StoreError> {
        let lock = scratch_lock(path);
        make_parent(&lock)?;
        let guard = crate::store::lock::acquire(
            &lock,
            &format!("using the scratch worktree {}", path.display()),
            std::time::Duration::from_secs(60),
        )?;
        Ok(Self {
            common_dir: common_dir.to_owned(),
            path: path.to_owned(),
            _lock: guard,
        })
    }
}

impl Drop for ScratchGuard {
    fn drop(&mut self) {
        // Best effort: one left behind (a failing git) is what `git orch
        // cleanup` sweeps and `git orch fsck` reports.
        if let Ok(store) = Store::open(&self.common_dir) {
            let _ = remove_scratch(&store, &self.path);
        }
    }
}

fn make_parent(path: &Path) -> Result<(), StoreError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| StoreError::io(format!("creating {}", parent.display()), e))?;
    }
    Ok(())
}

/// A merge queue's scratch worktree, kept from one landing to the next:
/// each landing moves it to its candidate (the files that differ, not a
/// whole checkout). Its lock is taken at the first landing and held until
/// the queue (every clone of it) is dropped, at the end of the run or of
/// `git orch merge`, which removes the worktree: `git orch cleanup` and
/// `git orch fsck` see it in use meanwhile.
#[derive(Debug)]
pub struct KeptScratch {
    common_dir: PathBuf,
    path: PathBuf,
    lock: std::sync::Mutex<Option<crate::store::lock::LockGuard>>,
}

/// The scratch worktree one landing uses: the queue's kept one, or, while
/// another process holds that, one of its own, removed when this is
/// dropped.
#[derive(Debug)]
pub struct ScratchUse {
    pub path: PathBuf,
    _own: Option<ScratchGuard>,
}

impl KeptScratch {
    pub fn new(common_dir: &Path, path: &Path) -> Self {
        Self {
            common_dir: common_dir.to_owned(),
            path: path.to_owned(),
            lock: std::sync::Mutex::new(None),
        }
    }

    /// The scratch worktree for one landing of this queue. Landings of one
    /// queue come one at a time (the queue lock), so the kept worktree is
    /// never shared within a process; a queue of another process (`git
    /// orch merge` of a run its driver lands too) gets a worktree named
    /// after its process instead of waiting for this one.
    pub fn take(&self) -> Result<ScratchUse, StoreError> {
        let mut held = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        if held.is_none() {
            let lock = scratch_lock(&self.path);
            make_parent(&lock)?;
            match crate::store::lock::try_acquire(&lock, "landing through this scratch worktree")? {
                Ok(guard) => *held = Some(guard),
                Err(_busy) => {
                    let mut name = self.path.file_name().unwrap_or_default().to_os_string();
                    name.push(format!("-{}", std::process::id()));
                    let own = self.path.with_file_name(name);
                    return Ok(ScratchUse {
                        _own: Some(ScratchGuard::take(&self.common_dir, &own)?),
                        path: own,
                    });
                }
            }
        }
        Ok(ScratchUse {
            path: self.path.clone(),
            _own: None,
        })
    }
}

impl Drop for KeptScratch {
    fn drop(&mut self) {
        let held = self.lock.get_mut().unwrap_or_else(|e| e.into_inner());
        if held.is_some()
            && let Ok(store) = Store::open(&self.common_dir)
        {
            let _ = remove_scratch(&store, &self.path);
        }
        // The lock goes after the worktree.
        held.take();
    }
}

/// Removes a scratch worktree: its folder and git's record of it. It is
/// git-orch's own, under `.git/orch/`, and holds nothing of a person's, so
/// removal is forced.
pub fn remove_scratch(store: &Store, scratch: &Path) -> Result<(), StoreError> {
    if scratch.exists() && store.remove_worktree(scratch, true).is_ok() && !scratch.exists() {
        return Ok(());
    }
    match std::fs::remove_dir_all(scratch) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(StoreError::io(format!("removing {}", scratch.display()), e)),
    }
    store.forget_worktree(scratch)
}

/// A scratch worktree found by [`idle_scratch`]: its path and, when no
/// landing or gate uses it, its lock (held until dropped).
pub type FoundScratch = (PathBuf, Option<crate::store::lock::LockGuard>);

/// Every scratch worktree folder under `.git/orch/scratch/` (whose name
/// `keep` accepts), each with its lock when it is idle: a landing or gate
/// that crashed left it. A busy one comes with `None`.
pub fn idle_scratch(
    store: &Store,
    keep: &dyn Fn(&str) -> bool,
) -> Result<Vec<FoundScratch>, StoreError> {
    let dir = scratch_dir(store.common_dir());
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for e in entries.flatten() {
        let path = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if !path.is_dir() || !keep(&name) {
            continue;
        }
        let lock = crate::store::lock::try_acquire(&scratch_lock(&path), "cleaning up")?.ok();
        out.push((path, lock));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// The tree of `commit`.
pub fn tree_of(store: &Store, commit: Oid) -> Result<Oid, StoreError> {
    Ok(store.commit_info(commit)?.tree)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_blocks_are_free_and_stable() {
        let a = port_block(Path::new("/tmp/x/a-1"), 30_000, 2_000).expect("a block");
        assert!((30_000..32_000).contains(&a));
        assert_eq!(a % PORT_BLOCK, 0);
        let held = TcpListener::bind(("127.0.0.1", a)).expect("bind");
        let b = port_block(Path::new("/tmp/x/a-1"), 30_000, 2_000).expect("another block");
        assert_ne!(a, b, "a busy block is skipped");
        drop(held);
    }

    #[test]
    fn quoting_survives_hostile_paths() {
        assert_eq!(sh_quote("a'b"), "'a'\\''b'");
    }
}
