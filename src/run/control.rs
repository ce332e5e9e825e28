//! What people do to a run besides driving it: retry, skip or cancel a
//! task; clean worktrees up; and the derived note text on result commits.

use std::path::PathBuf;

use crate::event::{Control, Event, Failure, Outcome, Verdict};
use crate::ids::{RunId, TaskId};
use crate::state::{RunState, TaskStatus, Workspace};
use crate::store::{Store, StoreError};

use super::{RunContext, RunError};

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
        return Err(RunError::Config(format!(
            "run {} has no task {task}\nhint: `git orch status {}` lists its tasks",
            run.id, run.id
        )));
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

/// Which worktrees `cleanup` should consider.
#[derive(Debug, Clone, Default)]
pub struct CleanupFilter {
    pub run: Option<RunId>,
    pub task: Option<TaskId>,
    pub attempt: Option<u32>,
    /// Only attempts whose task is done (landed, skipped, cancelled).
    pub all_completed: bool,
    /// Only attempts that landed (used when a run is archived).
    pub landed_only: bool,
    pub force: bool,
    pub dry_run: bool,
}

/// What cleanup did or would do with one worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CleanupAction {
    Removed,
    WouldRemove,
    /// Kept, with the reason (dirty, live, under review, …).
    Kept(String),
}

/// The report of a cleanup.
#[derive(Debug, Clone, Default)]
pub struct CleanupReport {
    /// (run, task, attempt, path, action)
    pub worktrees: Vec<(RunId, TaskId, u32, PathBuf, CleanupAction)>,
    /// Folders under a worktree root that no record points to.
    pub orphan_folders: Vec<PathBuf>,
    /// Records whose worktree folder is gone (not cleaned through git-orch).
    pub missing_folders: Vec<(RunId, TaskId, u32, PathBuf)>,
}

/// Removes attempt worktrees no longer needed. Never deletes a branch or a
/// result commit; refuses dirty, live and under-review worktrees unless
/// forced; reports orphan folders and records whose folder is gone; runs
/// `git worktree prune` afterwards.
pub fn cleanup(
    store: &Store,
    runs: &std::collections::BTreeMap<RunId, RunState>,
    filter: &CleanupFilter,
    live_driver: &dyn Fn(&RunId) -> bool,
) -> Result<CleanupReport, RunError> {
    let mut report = CleanupReport::default();
    let mut known: Vec<PathBuf> = Vec::new();
    let mut roots: Vec<PathBuf> = Vec::new();
    // Attempts another clone made (seen through sync) have their worktrees
    // on that clone's machine: never this clone's to touch.
    let me = store.writer_id()?;
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
                    || a.workspace() == Workspace::Cleaned
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
                if !path.exists() {
                    report
                        .missing_folders
                        .push((run.id.clone(), task.clone(), a.n, path));
                    continue;
                }
                let reason = if a.is_open() && driven {
                    Some("its attempt is live".to_owned())
                } else if a.outcome == Some(Outcome::Passed)
                    && status == TaskStatus::Done
                    && run.finished.is_none()
                {
                    Some("its result is under review (passed, not landed)".to_owned())
                } else if store.is_dirty(&path).unwrap_or(true) {
                    Some("it has uncommitted changes".to_owned())
                } else {
                    None
                };
                let action = match (reason, filter.force, filter.dry_run) {
                    (Some(r), false, _) => CleanupAction::Kept(format!("{r}; --force removes it")),
                    (_, _, true) => CleanupAction::WouldRemove,
                    (_, force, false) => {
                        store.remove_worktree(&path, force || a.is_open())?;
                        store.append(vec![Event::WorkspaceCleaned {
                            run_id: run.id.clone(),
                            task: task.clone(),
                            attempt: a.n,
                            path: path.to_string_lossy().into_owned(),
                        }])?;
                        CleanupAction::Removed
                    }
                };
                report
                    .worktrees
                    .push((run.id.clone(), task.clone(), a.n, path, action));
            }
        }
    }
    // Folders under the worktree roots that no attempt record names.
    for root in roots {
        let Ok(runs_dir) = std::fs::read_dir(&root) else {
            continue;
        };
        for run_dir in runs_dir.flatten() {
            let Ok(entries) = std::fs::read_dir(run_dir.path()) else {
                continue;
            };
            for e in entries.flatten() {
                let p = e.path();
                if p.is_dir() && !known.contains(&p) {
                    report.orphan_folders.push(p);
                }
            }
        }
    }
    if !filter.dry_run {
        store.prune_worktrees()?;
    }
    Ok(report)
}

/// Whether a driver currently holds `run`'s lock (on this machine).
pub fn driver_alive(store: &Store, run: &RunId) -> Result<bool, StoreError> {
    let path = super::driver_lock_path(store, run);
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
    let rev = super::plan_of(&store, run)?;
    let sub = rev
        .plan
        .subtask(task.as_str())
        .ok_or_else(|| {
            RunError::Config(format!(
                "run {} has no task {task}\nhint: `git orch status {}` lists its tasks",
                run.id, run.id
            ))
        })?
        .clone();
    let attempt = run
        .tasks
        .get(task)
        .and_then(|t| t.attempts.iter().find(|a| a.n == n))
        .ok_or_else(|| {
            RunError::Config(format!(
                "{}/{task} has no attempt {n}\nhint: `git orch status {}` shows each task's attempts",
                run.id, run.id
            ))
        })?;
    let Some(result) = &attempt.result else {
        return Err(RunError::Config(format!(
            "{}/{task} attempt {n} has no result commit yet",
            run.id
        )));
    };
    let mut worktree = PathBuf::from(&attempt.worktree);
    if !worktree.exists() {
        // The attempt's worktree was cleaned up: command gates run on its
        // result commit in a scratch worktree instead.
        let commit = &result.commit;
        worktree = store
            .orch_dir()
            .join("scratch")
            .join(format!("gate-{}", run.id));
        super::workspace::prepare_scratch(&store, &worktree, store.parse_oid(commit)?)?;
    }
    // Settings are the run's; the diff is the attempt's own, from the
    // commit it started on (later attempts start from what landed).
    let run_base = store.parse_oid(&run.base)?;
    let base = store.parse_oid(&attempt.base)?;
    let settings = crate::config::Settings::from_values(&store.project_config(Some(run_base))?)
        .map_err(|e| RunError::Config(e.to_string()))?;
    let gates = crate::gate::stack(&settings, &rev.plan, &sub);
    let subject = crate::gate::Subject {
        steps: store.commit_steps(base, store.parse_oid(&result.commit)?)?,
        every_commit: settings.lands_attempt_commits(),
        on_gate: None,
        common_dir: store.common_dir().to_owned(),
        task: sub.clone(),
        attempt: n,
        base_tree: store.commit_info(base)?.tree,
        result_tree: store.parse_oid(&result.tree)?,
        worktree: worktree.clone(),
        env: vec![
            ("ORCH_RUN".into(), run.id.to_string()),
            ("ORCH_TASK".into(), task.to_string()),
            ("ORCH_ATTEMPT".into(), n.to_string()),
            ("ORCH_OWNED_GLOBS".into(), sub.owned_globs.join("\n")),
            ("ORCH_BASE".into(), attempt.base.clone()),
        ],
        log_dir: store
            .orch_dir()
            .join("logs")
            .join(run.id.as_str())
            .join(task.as_str())
            .join(format!("attempt-{n}")),
        writer_agent: attempt.agent.clone(),
        settings,
    };
    let (_tx, mut cancel) = tokio::sync::watch::channel(false);
    let tree_hex = result.tree.clone();
    let cache = crate::state::StateIndex::open(&store)?.verdicts_for(&tree_hex)?;
    let lookup = move |gate: &str, command: &str| {
        cache
            .get(&crate::state::VerdictKey {
                tree: tree_hex.clone(),
                gate: gate.to_owned(),
                command: command.to_owned(),
            })
            .cloned()
    };
    let outcome = crate::gate::evaluate(&subject, &gates, &lookup, &mut cancel).await?;
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
