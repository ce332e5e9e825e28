//! What people do to a run besides driving it: retry, skip or cancel a
//! task; clean worktrees up; and the derived note text on result commits.

use std::path::PathBuf;
use tokio_util::sync::CancellationToken;

use crate::event::{Control, Event, Failure, Outcome, Verdict};
use crate::ids::{RunId, TaskId};
use crate::state::{RunState, TaskStatus};
use crate::store::{Store, StoreError};

use super::context::{RunContext, RunError};

/// The note written on an attempt's result commit (`refs/notes/orch`):
/// plain text, every line already masked.
pub fn note_text(
    ctx: &RunContext,
    task: &TaskId,
    n: u32,
    agent: &str,
    verdicts: &[Verdict],
    outcome: Outcome,
    failure: Option<&Failure>,
) -> String {
    let mut s = format!(
        "git-orch attempt {}/{task}/attempt-{n}\nplan: {} revision {} ({})\nagent: {agent}\ngates:\n",
        ctx.run,
        ctx.plan().id,
        ctx.revision.revision,
        ctx.revision.hash
    );
    for v in verdicts {
        let summary: String = v.summary.chars().take(160).collect();
        s.push_str(&format!(
            "  {:<14} {:<7} {:<5} {}\n",
            v.gate,
            v.status.as_str(),
            v.mode.as_str(),
            summary
        ));
    }
    s.push_str(&format!("outcome: {}", outcome.as_str()));
    if let Some(f) = failure {
        s.push_str(&format!(" ({}: {})", f.class.as_str(), f.reason));
    }
    s.push('\n');
    crate::gate::masking::mask_text(&s)
}

/// Records a person's request about a task of `run`.
pub fn control(
    store: &Store,
    run: &RunState,
    task: &TaskId,
    action: Control,
    by: &str,
) -> Result<(), RunError> {
    if !run.tasks.contains_key(task) && !run_has_task(store, run, task)? {
        return Err(RunError::NoTaskInRun {
            run: run.id.clone(),
            task: task.clone(),
        });
    }
    store.append(vec![Event::TaskControl {
        run_id: run.id.clone(),
        task: task.clone(),
        action,
        by: by.to_owned(),
    }])?;
    Ok(())
}

/// The runs a `retry`, `skip` or `cancel` of `task` can mean: the
/// unfinished runs whose plan has the task, else (for `retry`, which
/// reopens a run) the newest finished run of each plan that has it.
pub fn runs_holding(
    store: &Store,
    index: &mut crate::state::StateIndex,
    task: &TaskId,
    reopen: bool,
) -> Result<Vec<RunState>, RunError> {
    let mut out = Vec::new();
    for run in index.unfinished()?.into_values() {
        if run.tasks.contains_key(task) || run_has_task(store, &run, task)? {
            out.push(run);
        }
    }
    if out.is_empty() && reopen {
        let mut plans: Vec<crate::ids::PlanId> =
            index.all_briefs()?.into_iter().map(|b| b.plan_id).collect();
        plans.sort();
        plans.dedup();
        for plan in plans {
            let Some(brief) = index.last_finished_of_plan(&plan)? else {
                continue;
            };
            if let Some(run) = index.run(&brief.id)?.cloned()
                && (run.tasks.contains_key(task) || run_has_task(store, &run, task)?)
            {
                out.push(run);
            }
        }
    }
    out.sort_by_key(|r| std::cmp::Reverse(r.started_ms));
    Ok(out)
}

fn run_has_task(store: &Store, run: &RunState, task: &TaskId) -> Result<bool, RunError> {
    let rev = crate::plan::revisions::all(store, &run.plan_id)?;
    Ok(rev
        .iter()
        .find(|r| r.hash == run.plan_hash)
        .is_some_and(|r| r.plan.subtask(task.as_str()).is_some()))
}

/// Which attempts `cleanup` should consider.
#[derive(Debug, Clone, Default)]
pub struct CleanupFilter {
    pub run: Option<RunId>,
    pub task: Option<TaskId>,
    pub attempt: Option<u32>,
    /// Only attempts whose task is done (landed, skipped, cancelled).
    pub all_completed: bool,
    /// Only attempts that landed (`[orch] cleanup = landed`).
    pub landed_only: bool,
    pub force: bool,
    pub dry_run: bool,
    /// Leave `git worktree prune` out (a cleanup of one attempt, which
    /// forgets the worktree it removes itself).
    pub skip_prune: bool,
}

/// What cleanup did or would do with one attempt or scratch worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CleanupAction {
    Removed,
    WouldRemove,
    /// Kept, with the reason (dirty, live, under review, holds commits
    /// nothing else keeps, …) and what to do about it.
    Kept(String),
}

/// What cleanup did with one attempt's worktree and branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptCleanup {
    pub run: RunId,
    pub task: TaskId,
    pub attempt: u32,
    /// Its worktree, when it was still there.
    pub worktree: Option<PathBuf>,
    /// Its branch (without `refs/heads/`), when it still existed.
    pub branch: Option<String>,
    pub action: CleanupAction,
}

/// The report of a cleanup.
#[derive(Debug, Clone, Default)]
pub struct CleanupReport {
    pub attempts: Vec<AttemptCleanup>,
    /// Scratch worktrees under `.git/orch/scratch/` that a landing or gate
    /// left behind (a crash), or that are in use now.
    pub scratch: Vec<(PathBuf, CleanupAction)>,
    /// Folders under a worktree root that no record points to.
    pub orphan_folders: Vec<PathBuf>,
    /// Records whose worktree folder was gone already (now recorded as
    /// cleaned, unless a dry run).
    pub missing_folders: Vec<(RunId, TaskId, u32, PathBuf)>,
    /// Empty run folders (and the worktree root) removed, or that would be.
    pub empty_folders: Vec<PathBuf>,
    /// Warm caches' layers (`.git/orch/warm/`) whose checkout is gone,
    /// removed or that would be.
    pub warm_layers: Vec<PathBuf>,
}

/// Why a branch or worktree must stay: it holds commits nothing else
/// keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unkept {
    /// The commits only it reaches.
    pub commits: Vec<crate::store::Oid>,
    pub kind: UnkeptKind,
}

/// What the commits only an attempt branch reaches are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnkeptKind {
    /// Its result, which failed the secrets gate: deliberately never kept.
    SecretResult,
    /// Work of an attempt that was never judged (abandoned or still open),
    /// so never kept.
    Unjudged,
    /// Its result should be in `refs/orch/keep` and is not.
    ResultNotKept,
    /// Commits on top of (or instead of) its recorded result: made by hand.
    Added,
}

impl Unkept {
    /// One sentence for cleanup and fsck: what the commits are and what
    /// to do with them.
    pub fn explain(&self, branch: &str) -> String {
        let n = self.commits.len();
        let first = self
            .commits
            .first()
            .map(|c| c.to_string()[..12].to_owned())
            .unwrap_or_default();
        let what = if n == 1 {
            format!("commit {first}")
        } else {
            format!("{n} commits ({first}, …)")
        };
        match self.kind {
            UnkeptKind::SecretResult => format!(
                "it holds {what} that nothing else reaches: its result, which failed the secrets gate and is never kept; review it, then delete the branch yourself: `git branch -D {branch}`"
            ),
            UnkeptKind::Unjudged => format!(
                "it holds {what} that nothing else reaches: work of an attempt that was never judged; keep it on a branch of yours (`git branch <name> {branch}`) or delete it after review (`git branch -D {branch}`)"
            ),
            UnkeptKind::ResultNotKept => format!(
                "it holds {what}, its result, which refs/orch/keep should hold and does not; `git orch fsck --repair` keeps it"
            ),
            UnkeptKind::Added => format!(
                "it holds {what} that nothing else reaches, added after its result (by hand?); move them to a branch of yours (`git branch <name> {branch}`), then clean up again, or delete the branch yourself (`git branch -D {branch}`)"
            ),
        }
    }
}

/// Whether an attempt's result went to `refs/orch/keep` when the attempt
/// ended: it ended through its gates (passed or failed) and the secrets
/// gate did not flag it. The same rule the attempt applied.
pub fn result_is_kept(a: &crate::state::AttemptState) -> bool {
    a.result.is_some()
        && matches!(a.outcome, Some(Outcome::Passed) | Some(Outcome::Failed))
        && a.verdicts
            .iter()
            .find(|v| v.gate == "secrets")
            .is_none_or(|v| {
                matches!(
                    v.status,
                    crate::event::GateStatus::Pass | crate::event::GateStatus::Skipped
                )
            })
}

/// The tips that count as keeping a commit safe: `refs/orch/keep` (and
/// copies of other clones' keep refs), every branch that is not an attempt
/// branch (`attempt_branches`, and anything under `refs/heads/orch/`),
/// tags and remote-tracking branches.
pub fn archive_tips(
    store: &Store,
    attempt_branches: &std::collections::HashSet<String>,
) -> Result<Vec<crate::store::Oid>, StoreError> {
    let mut tips = Vec::new();
    if let Some(k) = store.ref_target(crate::store::refs::KEEP_REF)? {
        tips.push(k);
    }
    for (name, id) in store.refs_with_prefix(crate::store::refs::REMOTES_PREFIX)? {
        if name.ends_with("/keep") {
            tips.push(id);
        }
    }
    for (name, id) in store.refs_with_prefix("refs/heads/")? {
        let short = &name["refs/heads/".len()..];
        if !short.starts_with("orch/") && !attempt_branches.contains(short) {
            tips.push(id);
        }
    }
    for prefix in ["refs/tags/", "refs/remotes/"] {
        tips.extend(
            store
                .refs_with_prefix(prefix)?
                .into_iter()
                .map(|(_, id)| id),
        );
    }
    tips.sort();
    tips.dedup();
    Ok(tips)
}

/// The branch names of every attempt recorded in `runs`.
pub fn attempt_branches(
    runs: &std::collections::BTreeMap<RunId, RunState>,
) -> std::collections::HashSet<String> {
    runs.values()
        .flat_map(|r| {
            r.attempts()
                .filter(|(_, a)| !a.foreign_branch)
                .map(|(_, a)| a.branch.clone())
        })
        .collect()
}

/// The commits on `tips` (an attempt's branch tip and its worktree's
/// HEAD) that nothing in `archive` reaches, and what they are; `None`
/// when everything is kept.
pub fn unkept(
    store: &Store,
    a: &crate::state::AttemptState,
    tips: &[crate::store::Oid],
    archive: &[crate::store::Oid],
) -> Result<Option<Unkept>, StoreError> {
    let commits = store.commits_only_in(tips, archive)?;
    if commits.is_empty() {
        return Ok(None);
    }
    let result = a.result.as_ref().map(|r| r.commit);
    let judged = matches!(a.outcome, Some(Outcome::Passed) | Some(Outcome::Failed));
    let beyond_result = match result {
        Some(r) => {
            let mut beyond = false;
            for t in tips {
                beyond |= !store.is_ancestor(*t, r)?;
            }
            beyond
        }
        None => judged,
    };
    let kind = if !judged {
        UnkeptKind::Unjudged
    } else if beyond_result {
        UnkeptKind::Added
    } else if result_is_kept(a) {
        UnkeptKind::ResultNotKept
    } else {
        UnkeptKind::SecretResult
    };
    Ok(Some(Unkept { commits, kind }))
}

/// Removes the worktrees and branches of attempts no longer needed, once
/// every commit they hold is reachable from `refs/orch/keep` or another
/// branch, tag or remote-tracking branch ([`archive_tips`]), so nothing is
/// ever lost. Keeps (and reports) live attempts, results under review,
/// dirty worktrees (unless forced) and anything holding a commit nothing
/// else reaches (even when forced). Removes scratch worktrees a landing or
/// gate left behind, records worktrees whose folder is gone as cleaned,
/// removes empty run folders (and the root when empty), reports orphan
/// folders, and runs `git worktree prune`. A dry run only reports.
pub fn cleanup(
    store: &Store,
    runs: &std::collections::BTreeMap<RunId, RunState>,
    filter: &CleanupFilter,
    live_driver: &dyn Fn(&RunId) -> bool,
) -> Result<CleanupReport, RunError> {
    let mut report = CleanupReport::default();
    let mut known: Vec<PathBuf> = Vec::new();
    let mut roots: Vec<PathBuf> = Vec::new();
    let branches = attempt_branches(runs);
    let archive = archive_tips(store, &branches)?;
    // Attempts another clone made (seen through sync) have their worktrees
    // and branches on that clone's machine: never this clone's to touch.
    let me = store.writer_id()?;
    let mut removals: Vec<(Option<usize>, Removal)> = Vec::new();
    for run in runs.values() {
        if filter.run.as_ref().is_some_and(|r| *r != run.id) {
            continue;
        }
        let driven = live_driver(&run.id);
        for (task, state) in &run.tasks {
            let retries = run.settings.retries;
            let status = state.status(retries);
            for a in state
                .attempts
                .iter()
                .filter(|a| Some(&a.writer) == me.as_ref())
            {
                let path = PathBuf::from(&a.worktree);
                known.push(path.clone());
                if let Some(root) = path.parent().and_then(|p| p.parent())
                    && !roots.contains(&root.to_path_buf())
                {
                    roots.push(root.to_path_buf());
                }
                if filter.task.as_ref().is_some_and(|t| t != task)
                    || filter.attempt.is_some_and(|n| n != a.n)
                {
                    continue;
                }
                if filter.all_completed
                    && !matches!(
                        status,
                        TaskStatus::Done | TaskStatus::Skipped | TaskStatus::Cancelled
                    )
                {
                    continue;
                }
                if filter.landed_only && a.landed.is_none() {
                    continue;
                }
                if let Some(mut done) =
                    clean_attempt(store, run, task, a, status, driven, filter, &archive)?
                {
                    let removal = done.removal.take();
                    if let Some(missing) = &done.missing
                        && !matches!(done.action, CleanupAction::Kept(_))
                    {
                        report.missing_folders.push((
                            run.id.clone(),
                            task.clone(),
                            a.n,
                            missing.clone(),
                        ));
                    }
                    let shown = done.worktree.is_some() || done.branch.is_some();
                    if let Some(r) = removal {
                        removals.push((shown.then_some(report.attempts.len()), r));
                    }
                    if shown {
                        report.attempts.push(AttemptCleanup {
                            run: run.id.clone(),
                            task: task.clone(),
                            attempt: a.n,
                            worktree: done.worktree,
                            branch: done.branch,
                            action: done.action,
                        });
                    }
                }
            }
        }
    }
    // One record for every worktree removed above (a cleanup killed before
    // it leaves folders gone unrecorded: the next one records them).
    let (shown, removals): (Vec<Option<usize>>, Vec<Removal>) = removals.into_iter().unzip();
    for i in record_removals(store, &removals)? {
        if let Some(at) = shown[i] {
            report.attempts[at].action = CleanupAction::Kept(
                "its branch moved while it was cleaned up; run cleanup again".to_owned(),
            );
        }
    }
    // Scratch worktrees: what a landing or gate that ended normally removed
    // itself; what is left is a crash's (or in use right now).
    if filter.task.is_none() && filter.attempt.is_none() {
        let wanted = |name: &str| match &filter.run {
            // `<run>-<pid>`: a landing's own while another process held
            // the run's (see `KeptScratch`).
            Some(r) => {
                name == r.as_str()
                    || name == format!("gate-{r}")
                    || name
                        .strip_prefix(&format!("{r}-"))
                        .is_some_and(|pid| pid.bytes().all(|b| b.is_ascii_digit()))
            }
            None => true,
        };
        for (path, lock) in super::workspace::idle_scratch(store, &wanted)? {
            let action = match (lock, filter.dry_run) {
                (None, _) => CleanupAction::Kept("a landing or gate is using it".into()),
                (Some(_), true) => CleanupAction::WouldRemove,
                (Some(_held), false) => {
                    super::workspace::remove_scratch(store, &path)?;
                    CleanupAction::Removed
                }
            };
            report.scratch.push((path, action));
        }
        // Layers of warm caches whose checkout a killed git-orch left
        // (its own cleanup removes them with the checkout).
        if filter.run.is_none() {
            for dir in crate::store::scratch::orphan_warm_layers(store.common_dir()) {
                if !filter.dry_run {
                    crate::store::scratch::remove_layers_dir(&dir);
                }
                report.warm_layers.push(dir);
            }
        }
    }
    // Folders under the worktree roots that no attempt record names, and
    // run folders (then the root) that are empty now.
    for root in roots {
        let Ok(runs_dir) = std::fs::read_dir(&root) else {
            continue;
        };
        for run_dir in runs_dir.flatten() {
            // Dot folders are no run's (lead agents' checkouts are in one).
            if run_dir.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let Ok(entries) = std::fs::read_dir(run_dir.path()) else {
                continue;
            };
            let mut left = 0;
            for e in entries.flatten() {
                let p = e.path();
                // In a dry run, what would be removed still stands.
                let would_go = filter.dry_run
                    && report.attempts.iter().any(|c| {
                        c.worktree.as_ref() == Some(&p) && c.action == CleanupAction::WouldRemove
                    });
                if !would_go {
                    left += 1;
                }
                if p.is_dir() && !known.contains(&p) {
                    report.orphan_folders.push(p);
                }
            }
            if left == 0 && remove_empty(&run_dir.path(), filter.dry_run) {
                report.empty_folders.push(run_dir.path());
            }
        }
        let left = std::fs::read_dir(&root).map_or(1, |rd| {
            rd.flatten()
                .filter(|e| !(filter.dry_run && report.empty_folders.contains(&e.path())))
                .count()
        });
        if left == 0 && remove_empty(&root, filter.dry_run) {
            report.empty_folders.push(root);
        }
    }
    if !filter.dry_run && !filter.skip_prune {
        store.prune_worktrees()?;
    }
    Ok(report)
}

/// What a run does when it ends, by `[orch] cleanup`: removes its
/// finished (or only its landed) attempts' worktrees and branches, by the
/// rules of [`cleanup`]; `never` leaves them for `git orch cleanup`.
pub fn after_run(
    store: &Store,
    runs: &std::collections::BTreeMap<RunId, RunState>,
    run: &RunId,
    policy: crate::config::CleanupPolicy,
) -> Result<Option<CleanupReport>, RunError> {
    use crate::config::CleanupPolicy;
    if policy == CleanupPolicy::Never {
        return Ok(None);
    }
    let filter = CleanupFilter {
        run: Some(run.clone()),
        landed_only: policy == CleanupPolicy::Landed,
        ..Default::default()
    };
    cleanup(store, runs, &filter, &|_| false).map(Some)
}

/// Removes `dir` if it is an empty folder (a dry run only says it would).
fn remove_empty(dir: &std::path::Path, dry_run: bool) -> bool {
    if dry_run {
        return true;
    }
    std::fs::remove_dir(dir).is_ok()
}

/// What cleaning one attempt did.
struct Cleaned {
    worktree: Option<PathBuf>,
    branch: Option<String>,
    action: CleanupAction,
    /// Its worktree folder was gone already.
    missing: Option<PathBuf>,
    /// What is left to record and delete once the worktree is gone.
    removal: Option<Removal>,
}

/// The record of one attempt's cleanup, and its branch to delete: written
/// for every attempt of one cleanup in one operation ([`record_removals`]).
struct Removal {
    run: RunId,
    task: TaskId,
    attempt: u32,
    path: PathBuf,
    /// Its worktree was recorded as cleaned before.
    cleaned: bool,
    branch: String,
    /// The branch's tip when it was judged (deleted only from there).
    tip: Option<crate::store::Oid>,
}

/// Records the cleanup of every attempt in `removals` in one operation:
/// `workspace_cleaned` for each, and each branch deleted by
/// compare-and-swap from the tip it was judged at. Returns, by index, the
/// branches that moved meanwhile and stay.
fn record_removals(store: &Store, removals: &[Removal]) -> Result<Vec<usize>, StoreError> {
    let mut moved = Vec::new();
    if removals.is_empty() {
        return Ok(moved);
    }
    store.transact(|store| {
        moved.clear();
        let mut events = Vec::new();
        let mut refs = Vec::new();
        for (i, r) in removals.iter().enumerate() {
            if !r.cleaned {
                events.push(Event::WorkspaceCleaned {
                    run_id: r.run.clone(),
                    task: r.task.clone(),
                    attempt: r.attempt,
                    path: r.path.to_string_lossy().into_owned(),
                });
            }
            let branch_ref = format!("refs/heads/{}", r.branch);
            match (r.tip, store.ref_target(&branch_ref)?) {
                (Some(t), Some(n)) if t == n => {
                    events.push(Event::AttemptBranchRemoved {
                        run_id: r.run.clone(),
                        task: r.task.clone(),
                        attempt: r.attempt,
                        branch: r.branch.clone(),
                        tip: t,
                    });
                    refs.push(crate::store::refs::RefUpdate::delete(
                        &branch_ref,
                        t,
                        &format!(
                            "orch: cleanup of {}/{} attempt {}",
                            r.run, r.task, r.attempt
                        ),
                    ));
                }
                // Someone committed to it while it was judged: it stays.
                (Some(_), Some(_)) => moved.push(i),
                _ => {}
            }
        }
        Ok::<_, StoreError>((crate::store::log::Operation { events, refs }, ()))
    })?;
    Ok(moved)
}

/// Cleans one attempt up: decides whether its worktree and branch may go,
/// then removes the worktree; the caller records that and deletes the
/// branch (by compare-and-swap from the tip judged here) with the others
/// of the same cleanup ([`record_removals`]).
#[allow(clippy::too_many_arguments)]
fn clean_attempt(
    store: &Store,
    run: &RunState,
    task: &TaskId,
    a: &crate::state::AttemptState,
    status: TaskStatus,
    driven: bool,
    filter: &CleanupFilter,
    archive: &[crate::store::Oid],
) -> Result<Option<Cleaned>, RunError> {
    if a.foreign_branch {
        // No worktree was made, and the branch is someone else's.
        return Ok(None);
    }
    let path = PathBuf::from(&a.worktree);
    let branch_ref = format!("refs/heads/{}", a.branch);
    let tip = store.ref_target(&branch_ref)?;
    let present = !a.cleaned && std::fs::symlink_metadata(&path).is_ok();
    let paths = super::workspace::attempt_paths(store.common_dir(), &run.id, task, a);
    let missing = (!a.cleaned && !present).then(|| path.clone());
    if !present && tip.is_none() && missing.is_none() {
        return Ok(None);
    }
    // The commit a person left the worktree on, if not its branch's tip.
    let mut head = None;
    let reason = if a.is_open() && driven {
        Some("its attempt is live; --force removes it".to_owned())
    } else if a.is_queued() && status == TaskStatus::Passed && !a.control_paths().is_empty() {
        Some(format!(
            "its result changes control paths and waits for your approval (`git orch approve --branch {}`); --force removes it",
            a.branch
        ))
    } else if a.is_queued() && status == TaskStatus::Passed && run.finished.is_none() {
        Some("its result is under review (passed, not landed); --force removes it".to_owned())
    } else if present {
        let known: Vec<crate::store::Oid> = tip
            .into_iter()
            .chain(a.result.as_ref().map(|r| r.commit))
            .chain(Some(a.base))
            .collect();
        match super::workspace::unrecorded_work(store, &paths, &known) {
            Ok(u) => {
                head = u.head;
                u.why.map(|why| format!("{why}; --force removes it"))
            }
            Err(e) => Some(format!(
                "whether it has uncommitted changes could not be told ({e}); --force removes it"
            )),
        }
    } else {
        None
    };
    if let Some(r) = reason.filter(|_| !filter.force) {
        return Ok(Some(Cleaned {
            worktree: present.then(|| path.clone()),
            branch: tip.map(|_| a.branch.clone()),
            action: CleanupAction::Kept(r),
            missing: None,
            removal: None,
        }));
    }
    // Nothing that only this attempt holds is ever deleted, forced or not.
    let mut tips: Vec<crate::store::Oid> = tip.into_iter().collect();
    if let Some(head) = head
        && !tips.contains(&head)
    {
        tips.push(head);
    }
    if let Some(held) = unkept(store, a, &tips, archive)? {
        return Ok(Some(Cleaned {
            worktree: present.then(|| path.clone()),
            branch: tip.map(|_| a.branch.clone()),
            action: CleanupAction::Kept(held.explain(&a.branch)),
            missing: None,
            removal: None,
        }));
    }
    if tip.is_some()
        && let Some(other) = store
            .checkouts_of(&branch_ref)?
            .into_iter()
            .find(|p| *p != path)
    {
        return Ok(Some(Cleaned {
            worktree: present.then(|| path.clone()),
            branch: Some(a.branch.clone()),
            action: CleanupAction::Kept(format!(
                "its branch is checked out at {}; switch that checkout to another branch first",
                other.display()
            )),
            missing: None,
            removal: None,
        }));
    }
    if filter.dry_run {
        return Ok(Some(Cleaned {
            worktree: present.then(|| path.clone()),
            branch: tip.map(|_| a.branch.clone()),
            action: CleanupAction::WouldRemove,
            missing,
            removal: None,
        }));
    }
    // Its warm caches' upper layers go with it (warm worktrees, issue 28).
    crate::store::scratch::remove_warm_layers(store.common_dir(), &paths.worktree);
    if present {
        // Found clean just above (`reason`), or forced past it.
        store.remove_checkout(&paths.checkout())?;
    } else {
        let _ = std::fs::remove_file(&paths.index);
    }
    Ok(Some(Cleaned {
        worktree: present.then(|| path.clone()),
        branch: tip.map(|_| a.branch.clone()),
        action: CleanupAction::Removed,
        missing,
        removal: Some(Removal {
            run: run.id.clone(),
            task: task.clone(),
            attempt: a.n,
            path,
            cleaned: a.cleaned,
            branch: a.branch.clone(),
            tip,
        }),
    }))
}

/// Whether a driver currently holds `run`'s lock (on this machine).
pub fn driver_alive(store: &Store, run: &RunId) -> Result<bool, StoreError> {
    let path = super::prepare::driver_lock_path(store, run);
    if !path.exists() {
        return Ok(false);
    }
    Ok(crate::store::lock::try_acquire(&path, "probing")?.is_err())
}

/// Runs the gate stack on an attempt's result by hand (`git orch gate`),
/// against the commit the attempt started from, records the verdicts and
/// returns them. The attempt's outcome does not change, and neither does
/// whether its landing verifies: verdicts recorded after an attempt ended
/// are kept apart from the ones its outcome (and a landing) rested on.
pub async fn gate_attempt(
    store_dir: &std::path::Path,
    run: &RunState,
    task: &TaskId,
    n: u32,
) -> Result<crate::gate::StackOutcome, RunError> {
    let store = Store::open(store_dir)?;
    let rev = super::prepare::plan_of(&store, run)?;
    let sub = rev
        .plan
        .subtask(task.as_str())
        .ok_or_else(|| RunError::NoTaskInRun {
            run: run.id.clone(),
            task: task.clone(),
        })?
        .clone();
    let attempt = run
        .tasks
        .get(task)
        .and_then(|t| t.attempts.iter().find(|a| a.n == n))
        .ok_or_else(|| RunError::NoAttempt {
            run: run.id.clone(),
            task: task.clone(),
            n,
        })?;
    let Some(result) = &attempt.result else {
        return Err(RunError::NoResult {
            run: run.id.clone(),
            task: task.clone(),
            n,
        });
    };
    // Settings are the run's; the diff is the attempt's own, from the
    // commit it started on (later attempts start from what landed).
    let run_base = run.base;
    let base = attempt.base;
    let settings = crate::config::Settings::from_values(&store.project_config(Some(run_base))?)
        .map_err(RunError::Settings)?;
    let gates = crate::gate::stack(&settings, &rev.plan, &sub);
    let paths = super::workspace::attempt_paths(store.common_dir(), &run.id, task, attempt);
    // The agent's own section may set PORT; an agent no longer configured
    // is named as it was.
    let agent_env = crate::agent::AgentSpec::resolve(&attempt.agent, &settings.agents)
        .map(|a| a.env)
        .unwrap_or_default();
    // The same environment the run gave the attempt's gates: a verdict
    // recorded here is reused by the run as `cached`, and one the run
    // recorded is reused here, when the inputs are the same.
    let env = super::gating::AttemptEnv {
        run: &run.id,
        plan: &rev.plan.id,
        task: &sub,
        n,
        base,
        port: attempt.port,
        agent: &attempt.agent,
        agent_env: &agent_env,
        paths: &paths,
        retry: paths.retry_context.is_file(),
    }
    .gate_env();
    let subject = super::gating::AttemptGates {
        common_dir: store.common_dir(),
        run: &run.id,
        task: &sub,
        n,
        base,
        result: result.commit,
        result_tree: result.tree,
        agent: &attempt.agent,
        paths: &paths,
        env,
        settings: &settings,
    }
    .subject(&store, None, None)?;
    let cancel = CancellationToken::new();
    let cache = crate::state::StateIndex::open(&store)?.verdicts_for(&result.tree.to_string())?;
    let outcome = crate::gate::evaluate(&subject, &gates, &cache, &cancel).await?;
    store.append(
        outcome
            .verdicts
            .iter()
            .map(|v| Event::GateVerdict {
                run_id: run.id.clone(),
                task: task.clone(),
                attempt: n,
                verdict: v.clone(),
            })
            .collect(),
    )?;
    Ok(outcome)
}
