//! Runs: an approved plan revision becomes attempts, one worktree and
//! branch each, with an agent in each, bounded by a cap, recorded event by
//! event so that a crash or Ctrl-C loses nothing and a rerun resumes.
//!
//! `prepare` checks the approval, settles the target, base and settings,
//! and starts a run or finds the unfinished one to resume. `driver` is the
//! scheduler that holds the run's driver lock and dispatches; `attempt`
//! carries one attempt from branch to verdict; `workspace` makes and
//! commits worktrees; `control` records retry/skip/cancel and cleans up.

pub mod attempt;
pub mod control;
pub mod driver;
pub mod prompt;
pub mod workspace;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::approval::{self, Verdict as ApprovalVerdict};
use crate::config::Settings;
use crate::event::{Event, RunSettings, RunSummary};
use crate::ids::{PlanId, RunId};
use crate::plan::Plan;
use crate::plan::revisions::{self, PlanRevision};
use crate::state::{self, RunState, TaskStatus};
use crate::store::{Oid, Store, StoreError};

/// What the user asked for on the command line.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    pub cap: Option<usize>,
    pub agent: Option<String>,
    pub target: Option<String>,
    pub base: Option<String>,
    pub timeout: Option<Duration>,
    pub budget: Option<f64>,
    pub dry_run: bool,
}

/// Why a run cannot start or go on.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("{0}")]
    NotApproved(String),
    #[error(
        "the working tree {path} has uncommitted changes; a run starts from the tip of {target} and must not silently depend on them\nhint: commit them first, or pass --base <commit> to base the run on a commit explicitly (git-orch never stashes or resets your files)"
    )]
    Dirty { path: PathBuf, target: String },
    #[error("the target branch {0} does not exist\nhint: create it, or pass --target <branch>")]
    NoTarget(String),
    #[error("--base {0:?} does not name a commit\nhint: give a branch, tag or commit id")]
    BadBase(String),
    #[error(
        "run {run} is being driven by another process ({holder})\nhint: wait for it to finish, watch it with `git orch status {run} --watch`, or stop that process"
    )]
    Busy { run: RunId, holder: String },
    #[error(
        "the worktree root {root} is inside the working tree {workdir}; nested worktrees confuse build tools\nhint: set orch.worktreeRoot to a folder outside the repository"
    )]
    NestedRoot { root: PathBuf, workdir: PathBuf },
    #[error("{0}")]
    Config(String),
    #[error("{0}")]
    Store(#[from] StoreError),
}

impl From<revisions::RevisionError> for RunError {
    fn from(e: revisions::RevisionError) -> Self {
        RunError::Config(e.to_string())
    }
}

impl From<approval::ApprovalError> for RunError {
    fn from(e: approval::ApprovalError) -> Self {
        RunError::Config(e.to_string())
    }
}

/// Everything a driver needs to know about its run.
#[derive(Debug, Clone)]
pub struct RunContext {
    pub common_dir: PathBuf,
    pub run: RunId,
    pub revision: PlanRevision,
    pub settings: Settings,
    pub run_settings: RunSettings,
    pub target: String,
    pub base: Oid,
    pub base_tree: Oid,
    pub worktree_root: PathBuf,
    /// The budget in force for this driver (the command's, else the run's).
    pub budget: Option<f64>,
    /// Tasks that must run alone: declared `serial_only`, or forced by a
    /// pinch point at the base.
    pub serial: std::collections::BTreeSet<crate::ids::TaskId>,
    /// Bounds the disk-heavy steps (worktree checkout, committing a result)
    /// that run at once: beyond the number of cores they only add memory.
    pub heavy: std::sync::Arc<tokio::sync::Semaphore>,
    /// Told the step each attempt is on, for live progress; `None`: no one
    /// listens.
    pub on_step: Option<StepObserver>,
}

/// Receives [`driver::Progress::Step`] from any attempt's task, as it
/// happens (the driver's own events go to `drive`'s callback).
#[derive(Clone)]
pub struct StepObserver(pub std::sync::Arc<dyn Fn(driver::Progress) + Send + Sync>);

impl std::fmt::Debug for StepObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StepObserver")
    }
}

impl RunContext {
    pub fn plan(&self) -> &Plan {
        &self.revision.plan
    }
}

/// What `prepare` decided.
pub enum Prepared {
    Started(RunContext),
    Resumed(RunContext),
    /// `--dry-run`: what would happen, nothing written.
    DryRun(DryRun),
}

/// The plan a dry run shows.
#[derive(Debug, Clone)]
pub struct DryRun {
    pub run: Option<RunId>,
    pub plan_id: PlanId,
    pub revision: u32,
    pub target: String,
    pub base: Oid,
    pub worktree_root: PathBuf,
    pub settings: RunSettings,
    /// (task, status, would dispatch now).
    pub tasks: Vec<(String, String, bool)>,
}

/// The folder attempt worktrees go in by default: beside the repository,
/// never inside it (`<parent>/<name>.orch`).
fn default_root(common_dir: &Path) -> PathBuf {
    let repo = if common_dir.file_name().is_some_and(|n| n == ".git") {
        common_dir.parent().unwrap_or(common_dir)
    } else {
        common_dir
    };
    let name = repo
        .file_name()
        .map(|n| n.to_string_lossy().trim_end_matches(".git").to_owned())
        .unwrap_or_else(|| "repo".into());
    repo.parent().unwrap_or(repo).join(format!("{name}.orch"))
}

/// A run id: the plan id (shortened) and six random hex digits.
fn new_run_id(plan: &PlanId) -> RunId {
    let short: String = plan.as_str().chars().take(40).collect();
    let short = short.trim_end_matches('-');
    let hex: String = crate::ids::random_bytes::<3>()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    RunId::new(format!("{short}-{hex}")).expect("a plan id plus hex is a valid run id")
}

pub fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// The current state of every run.
pub fn runs(store: &Store) -> Result<std::collections::BTreeMap<RunId, RunState>, StoreError> {
    let view = store.read_log()?;
    Ok(state::fold(view.records()))
}

/// The unfinished run of `plan_id`, if any.
pub fn unfinished(store: &Store, plan_id: &PlanId) -> Result<Option<RunState>, StoreError> {
    Ok(runs(store)?
        .into_values()
        .filter(|r| r.plan_id == *plan_id && r.finished.is_none())
        .max_by_key(|r| r.started_ms))
}

/// Path of the lock the driver of `run` holds.
pub fn driver_lock_path(store: &Store, run: &RunId) -> PathBuf {
    store.orch_dir().join("runs").join(format!("{run}.lock"))
}

/// Checks the approval and settles everything a run needs; starts a new
/// run or picks up the unfinished one.
pub fn prepare(store: &Store, plan_id: &PlanId, opts: &RunOptions) -> Result<Prepared, RunError> {
    let require_signed = store
        .config_get("orch.requireSignedApprovals")?
        .is_some_and(|v| v == "true");
    let verdict = approval::verify(store, plan_id, require_signed)?;
    let ApprovalVerdict::Valid { current, approval } = verdict else {
        return Err(RunError::NotApproved(format!(
            "refusing to run: {}",
            verdict.explain()
        )));
    };
    let revision = *current;
    let previous = unfinished(store, plan_id)?;
    if let Some(prev) = &previous
        && prev.plan_hash != revision.hash
    {
        // An unfinished run of an older revision: close it so it is never
        // resumed against a plan nobody approved any more.
        if let Err(holder) =
            crate::store::lock::try_acquire(&driver_lock_path(store, &prev.id), "superseding")?
        {
            return Err(RunError::Busy {
                run: prev.id.clone(),
                holder,
            });
        }
        store.append(vec![Event::RunFinished {
            run_id: prev.id.clone(),
            summary: summarize(prev, &revision.plan),
        }])?;
    }
    let resume = previous.filter(|p| p.plan_hash == revision.hash);
    let target = match (&resume, &opts.target) {
        (Some(r), _) => r.target.clone(),
        (None, Some(t)) => t.clone(),
        (None, None) => match &revision.plan.target {
            Some(t) => t.clone(),
            None => match store.config_get("orch.target")? {
                Some(t) => t,
                None => store
                    .workdir()
                    .map(|w| store.checked_out_branch(w))
                    .transpose()?
                    .flatten()
                    .and_then(|b| b.strip_prefix("refs/heads/").map(str::to_owned))
                    .unwrap_or_else(|| "main".into()),
            },
        },
    };
    crate::plan::format::check_branch_name(&target).map_err(RunError::Config)?;
    let target_tip = store.ref_target(&format!("refs/heads/{target}"))?;
    let base = match (&resume, &opts.base) {
        (Some(r), _) => store.parse_oid(&r.base)?,
        (None, Some(b)) => store
            .resolve_commit(b)?
            .ok_or_else(|| RunError::BadBase(b.clone()))?,
        (None, None) => {
            let tip = target_tip.ok_or_else(|| RunError::NoTarget(target.clone()))?;
            if let Some(w) = store.workdir()
                && store.is_dirty(w)?
            {
                return Err(RunError::Dirty {
                    path: w.to_owned(),
                    target,
                });
            }
            tip
        }
    };
    let settings = settings_at(store, base)?;
    // A sandbox that is asked for but cannot work stops the run before
    // anything is written.
    crate::sandbox::resolve(&settings.sandbox).map_err(|e| RunError::Config(e.to_string()))?;
    let worktree_root = worktree_root(store, &settings);
    if let Some(w) = store.workdir() {
        let w = w.canonicalize().unwrap_or_else(|_| w.to_owned());
        let root = worktree_root
            .canonicalize()
            .unwrap_or_else(|_| worktree_root.clone());
        if root.starts_with(&w) {
            return Err(RunError::NestedRoot { root, workdir: w });
        }
    }
    let run_settings = match &resume {
        Some(r) => {
            let mut s = r.settings.clone();
            if let Some(c) = opts.cap {
                s.cap = c.max(1);
            }
            if let Some(t) = opts.timeout {
                s.timeout_secs = t.as_secs().max(1);
            }
            s
        }
        None => RunSettings {
            cap: opts.cap.unwrap_or(settings.cap).max(1),
            agent: opts
                .agent
                .clone()
                .or_else(|| settings.agent.clone())
                .unwrap_or_else(|| "claude".into()),
            fallback: settings.fallback.clone(),
            timeout_secs: opts.timeout.unwrap_or(settings.timeout).as_secs().max(1),
            budget_usd: opts.budget,
            retries: settings.retries,
            breaker_failures: settings.breaker.consecutive_failures,
            breaker_retries: settings.breaker.total_retries,
            breaker_empty: settings.breaker.consecutive_empty,
        },
    };
    let budget = opts.budget.or(run_settings.budget_usd);
    if opts.dry_run {
        let tasks = match &resume {
            Some(r) => r.clone(),
            None => empty_run(&revision, &target, base, &run_settings),
        };
        let ready = driver::ready_tasks(&tasks, &revision.plan, 0, false);
        return Ok(Prepared::DryRun(DryRun {
            run: resume.as_ref().map(|r| r.id.clone()),
            plan_id: plan_id.clone(),
            revision: revision.revision,
            target,
            base,
            worktree_root,
            tasks: revision
                .plan
                .subtasks
                .iter()
                .map(|s| {
                    let status = tasks
                        .tasks
                        .get(&s.id)
                        .map(|t| t.status(run_settings.retries).as_str())
                        .unwrap_or("pending");
                    (s.id.to_string(), status.to_owned(), ready.contains(&s.id))
                })
                .collect(),
            settings: run_settings,
        }));
    }
    let run_id = resume
        .as_ref()
        .map_or_else(|| new_run_id(plan_id), |r| r.id.clone());
    let ctx = build_context(
        store,
        run_id,
        revision,
        settings,
        run_settings,
        target,
        base,
        budget,
    )?;
    if resume.is_some() {
        return Ok(Prepared::Resumed(ctx));
    }
    store.append(vec![Event::RunStarted {
        run_id: ctx.run.clone(),
        plan_id: plan_id.clone(),
        revision: ctx.revision.revision,
        plan_hash: ctx.revision.hash.clone(),
        approval: approval.commit.to_string(),
        target: ctx.target.clone(),
        base: base.to_string(),
        settings: ctx.run_settings.clone(),
    }])?;
    Ok(Prepared::Started(ctx))
}

/// The project settings (`.orch/config`) at a run's base commit.
fn settings_at(store: &Store, base: Oid) -> Result<Settings, RunError> {
    Settings::from_values(&store.project_config(Some(base))?)
        .map_err(|e| RunError::Config(format!("{e}\nhint: fix .orch/config at the base commit")))
}

/// Where attempt worktrees go: `orch.worktreeRoot` (relative to the
/// repository's parent folder), else beside the repository.
fn worktree_root(store: &Store, settings: &Settings) -> PathBuf {
    match &settings.worktree_root {
        Some(r) if r.is_absolute() => r.clone(),
        Some(r) => default_root(store.common_dir())
            .parent()
            .map(|p| p.join(r))
            .unwrap_or_else(|| r.clone()),
        None => default_root(store.common_dir()),
    }
}

/// Settles what a driver needs to know about a run: the serial tasks from
/// the plan's analysis at the base, and the bound on disk-heavy steps.
#[allow(clippy::too_many_arguments)]
fn build_context(
    store: &Store,
    run: RunId,
    revision: PlanRevision,
    settings: Settings,
    run_settings: RunSettings,
    target: String,
    base: Oid,
    budget: Option<f64>,
) -> Result<RunContext, RunError> {
    let review = approval::review(store, &revision.plan, Some(&base.to_string()))
        .map_err(|e| RunError::Config(e.to_string()))?;
    let serial = review
        .analysis
        .serial
        .iter()
        .filter_map(|t| crate::ids::TaskId::new(t).ok())
        .collect();
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    Ok(RunContext {
        heavy: std::sync::Arc::new(tokio::sync::Semaphore::new(cores.clamp(1, 4))),
        serial,
        common_dir: store.common_dir().to_owned(),
        run,
        base_tree: store.commit_info(base)?.tree,
        worktree_root: worktree_root(store, &settings),
        revision,
        settings,
        run_settings,
        target,
        base,
        budget,
        on_step: None,
    })
}

/// The context of a run already in the log (started here or on another
/// machine), for a worker. Checks that its approval still holds for the
/// exact plan bytes the run executes.
pub fn context_for(store: &Store, run: &RunState) -> Result<RunContext, RunError> {
    let require_signed = store
        .config_get("orch.requireSignedApprovals")?
        .is_some_and(|v| v == "true");
    let verdict = approval::verify(store, &run.plan_id, require_signed)?;
    match &verdict {
        ApprovalVerdict::Valid { current, .. } if current.hash == run.plan_hash => {}
        _ => {
            return Err(RunError::NotApproved(format!(
                "run {} is not approved for its plan any more: {}",
                run.id,
                verdict.explain()
            )));
        }
    }
    let revision = plan_of(store, run)?;
    let base = store.parse_oid(&run.base)?;
    let settings = settings_at(store, base)?;
    let mut run_settings = run.settings.clone();
    run_settings.cap = run_settings.cap.max(1);
    build_context(
        store,
        run.id.clone(),
        revision,
        settings,
        run_settings,
        run.target.clone(),
        base,
        run.settings.budget_usd,
    )
}

/// A run with no events yet, for dry runs of a new run.
fn empty_run(rev: &PlanRevision, target: &str, base: Oid, settings: &RunSettings) -> RunState {
    RunState {
        id: RunId::new("dry-run").expect("valid id"),
        plan_id: rev.plan.id.clone(),
        revision: rev.revision,
        plan_hash: rev.hash.clone(),
        approval: String::new(),
        target: target.to_owned(),
        base: base.to_string(),
        settings: settings.clone(),
        started_ms: 0,
        drivers: Vec::new(),
        stopped: None,
        finished: None,
        tasks: Default::default(),
        claims: Default::default(),
    }
}

/// Totals of a run as it stands.
pub fn summarize(run: &RunState, plan: &Plan) -> RunSummary {
    let mut s = RunSummary {
        tasks: plan.subtasks.len(),
        ..Default::default()
    };
    let blocked = driver::blocked_tasks(run, plan);
    for sub in &plan.subtasks {
        let status = run
            .tasks
            .get(&sub.id)
            .map(|t| t.status(retries_for(run, sub)))
            .unwrap_or(TaskStatus::Pending);
        match status {
            TaskStatus::Done => s.done += 1,
            TaskStatus::Failed => s.failed += 1,
            TaskStatus::Skipped => s.skipped += 1,
            TaskStatus::Cancelled => s.cancelled += 1,
            _ if blocked.contains(&sub.id) => s.blocked += 1,
            _ => {}
        }
    }
    for (_, a) in run.attempts() {
        s.attempts += 1;
        s.gate_runs += a
            .verdicts
            .iter()
            .filter(|v| {
                !matches!(
                    v.status,
                    crate::event::GateStatus::Skipped | crate::event::GateStatus::Cached
                )
            })
            .count();
    }
    s.cost_usd = run.cost();
    let end = run
        .attempts()
        .filter_map(|(_, a)| a.finished_ms)
        .max()
        .unwrap_or(run.started_ms);
    s.duration_ms = (end - run.started_ms).max(0) as u64;
    s
}

/// The retry budget of one subtask in `run`.
pub fn retries_for(run: &RunState, sub: &crate::plan::Subtask) -> u32 {
    sub.retries.unwrap_or(run.settings.retries)
}

pub use driver::{DriveOutcome, drive};

/// The plan revision a run executes.
pub fn plan_of(store: &Store, run: &RunState) -> Result<PlanRevision, RunError> {
    revisions::all(store, &run.plan_id)?
        .into_iter()
        .find(|r| r.hash == run.plan_hash)
        .ok_or_else(|| {
            RunError::Config(format!(
                "the plan revision of run {} ({}) is not stored here\nhint: `git orch sync` fetches it from the clone that started the run",
                run.id, run.plan_hash
            ))
        })
}

/// The run a command means: `given`, else the newest unfinished run, else
/// the newest run.
pub fn pick_run(
    runs: &std::collections::BTreeMap<RunId, RunState>,
    given: Option<&str>,
) -> Result<RunState, RunError> {
    if let Some(g) = given {
        let id = RunId::new(g).map_err(|e| RunError::Config(e.to_string()))?;
        return runs.get(&id).cloned().ok_or_else(|| {
            RunError::Config(format!(
                "no run {id}\nhint: `git orch status` without an argument shows the newest run"
            ))
        });
    }
    runs.values()
        .filter(|r| r.finished.is_none())
        .max_by_key(|r| r.started_ms)
        .or_else(|| runs.values().max_by_key(|r| r.started_ms))
        .cloned()
        .ok_or_else(|| {
            RunError::Config("no runs yet\nhint: `git orch run <plan>` starts one".into())
        })
}
