//! What the run's files share: the options a run is asked for, its
//! errors, the context a driver and its attempts work in, and what
//! `prepare` decided. Its own file so that `run/mod.rs` only declares and
//! re-exports, and no child names its parent back.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::approval;
use crate::config::Settings;
use crate::event::RunSettings;
use crate::ids::{PlanId, RunId, TaskId};
use crate::plan::Plan;
use crate::plan::revisions::{self, PlanRevision};
use crate::state::RunState;
use crate::store::{Oid, StoreError};

use super::progress;

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
    /// Record the run for workers and dispatch nothing here.
    pub start_only: bool,
    /// Run these tasks again even if an earlier run landed them.
    pub redo: Vec<TaskId>,
    /// Never resume: close an unfinished run of the plan (recorded) and
    /// start a fresh one from the target's tip, with the configuration
    /// there; landed work is carried as usual.
    pub new: bool,
    /// Run every task again: carry nothing over from earlier runs.
    pub redo_all: bool,
    /// Candidates per task and round (best of N).
    pub best_of: Option<u32>,
}

/// Why a run cannot start or go on. Each variant is one situation the
/// user can tell apart; the command line gives each its exit code and its
/// hints (`cli::run`), so the texts here say what is wrong, not what to do.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The plan's approval is missing, voided or does not bind this run.
    #[error(
        "{}{}",
        match run {
            Some(run) => format!("run {run} is not approved for its plan any more: "),
            None => "refusing to run: ".to_owned(),
        },
        verdict.explain()
    )]
    NotApproved {
        /// The run found unapproved, or `None` for a run about to start.
        run: Option<RunId>,
        verdict: Box<crate::approval::Verdict>,
    },
    #[error(
        "the working tree {path} has uncommitted changes a run would not see: {}",
        paths.join(", ")
    )]
    Dirty {
        path: PathBuf,
        target: String,
        /// The changed tracked files, and untracked files a subtask owns.
        paths: Vec<String>,
    },
    #[error("the target branch {0} does not exist")]
    NoTarget(String),
    #[error("{name:?} cannot be a target branch: {source}")]
    BadTarget {
        name: String,
        #[source]
        source: crate::plan::format::BranchNameError,
    },
    #[error("--base {0:?} does not name a commit")]
    BadBase(String),
    #[error("run {run} is being driven by another process ({holder})")]
    Busy { run: RunId, holder: String },
    #[error(
        "the worktree root {root} is inside the working tree {workdir}; nested worktrees confuse build tools"
    )]
    NestedRoot { root: PathBuf, workdir: PathBuf },
    #[error(
        "run {run} is worked by workers (it was started with --start-only), not driven by `git orch run`"
    )]
    WorkersRun { run: RunId },
    #[error(
        "run {run} of this plan was started by another clone (writer {writer}) and is not finished"
    )]
    StartedElsewhere { run: RunId, writer: String },
    /// Another clone's start of the plan won the race on the remote, and
    /// its run is not here yet.
    #[error("another clone started plan {plan} at the same moment")]
    StartRace { plan: PlanId },
    /// Workers start every attempt from what the remote has: a base only
    /// this clone has would fail or fork every one of them.
    #[error("the run's base {base} is not on {remote}/{target}: workers could not start from it")]
    BaseNotPublished {
        base: String,
        remote: String,
        target: String,
    },
    /// A run for workers with no remote to share it through.
    #[error("a run for workers needs a remote they share, and this clone has none set")]
    NoSharedRemote,
    #[error("{remote} refused the start of run {run}: {why}")]
    StartRefused {
        remote: String,
        run: RunId,
        why: String,
    },
    #[error("plan {plan} has no task {task}")]
    UnknownTask { plan: PlanId, task: TaskId },
    /// Best of N needs one driver to start a round's candidates together
    /// and judge them; workers claim attempts one by one.
    #[error("plan {plan} runs candidates (best of N), which workers do not: {why}")]
    CandidatesForWorkers { plan: PlanId, why: String },
    #[error("run {run} has no task {task}")]
    NoTaskInRun { run: RunId, task: TaskId },
    #[error("{run}/{task} has no attempt {n}")]
    NoAttempt { run: RunId, task: TaskId, n: u32 },
    #[error("{run}/{task} attempt {n} has no result commit yet")]
    NoResult { run: RunId, task: TaskId, n: u32 },
    /// An attempt's branch is there before its attempt was recorded: left
    /// by hand, or by a run whose records were lost.
    #[error("the branch {0} already exists; remove it or clean the run up first")]
    BranchExists(String),
    #[error("no run {0}")]
    NoRun(RunId),
    #[error(transparent)]
    BadRunId(#[from] crate::ids::IdError),
    #[error("no runs yet")]
    NoRuns,
    #[error("the plan revision of run {run} ({hash}) is not stored here")]
    PlanNotHere { run: RunId, hash: String },
    /// `.orch/config` at the run's base commit cannot be used.
    #[error("{0}")]
    Settings(#[source] crate::config::ConfigError),
    #[error(transparent)]
    Sandbox(#[from] crate::sandbox::SandboxError),
    /// Some task has no agent that can work here (unknown, its program
    /// missing or hidden by the sandbox, no key): nothing was started.
    #[error("{}", agents_cannot_work(.0))]
    AgentsCannotWork(Vec<crate::preflight::Blocked>),
    #[error("committing the result: {0}")]
    Commit(#[source] crate::process::ProcessError),
    #[error(transparent)]
    Revision(#[from] revisions::RevisionError),
    #[error(transparent)]
    Approval(#[from] approval::ApprovalError),
    #[error(transparent)]
    Review(#[from] approval::ReviewError),
    /// git-orch itself failed (a bug, or the machine): not the user's input.
    #[error("internal error: {0}")]
    Internal(String),
    #[error("the merge queue failed: {0}")]
    Merge(#[source] progress::LandError),
    #[error(transparent)]
    Store(#[from] StoreError),
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
    /// The repository's own hook folder, which every attempt's hooks chain
    /// to (read once: it is a `git config` call, and a run does not follow
    /// a change of `core.hooksPath` made while it runs).
    pub hooks_dir: PathBuf,
    /// The budget in force for this driver (the command's, else the run's).
    pub budget: Option<f64>,
    /// Tasks that must run alone: declared `serial_only`, or forced by a
    /// pinch point at the base.
    pub serial: std::collections::BTreeSet<crate::ids::TaskId>,
    /// Bounds the disk-heavy steps (worktree checkout, committing a result)
    /// that run at once: beyond the number of cores they only add memory.
    pub heavy: std::sync::Arc<tokio::sync::Semaphore>,
    /// The folded log, shared by the driver, its attempts and its queue.
    pub state: crate::state::SharedIndex,
    /// Told the step each attempt is on, for live progress; `None`: no one
    /// listens.
    pub on_step: Option<StepObserver>,
    /// What the person starting the run should be told first.
    pub warnings: Vec<String>,
    /// Agents that cannot work here while their tasks have a fallback that
    /// can: said at every start.
    pub agent_warnings: Vec<String>,
}

/// Receives [`progress::Progress::Step`] from any attempt's task, as it
/// happens (the driver's own events go to `drive`'s callback).
#[derive(Clone)]
pub struct StepObserver(pub std::sync::Arc<dyn Fn(progress::Progress) + Send + Sync>);

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
    /// The plan's last run landed every task of this revision: nothing to
    /// run (the run is given for its summary).
    NothingToDo(Box<RunState>),
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
    /// Tasks the plan's last finished run landed that this run would do
    /// again, and why.
    pub redone: BTreeMap<TaskId, String>,
    /// The unfinished run `--new` would close.
    pub closes: Option<RunId>,
}

/// The one message for agents that cannot work here.
fn agents_cannot_work(blocked: &[crate::preflight::Blocked]) -> String {
    let each: Vec<String> = blocked
        .iter()
        .map(|b| {
            let tasks = match b.tasks.len() {
                0 => String::new(),
                1 => format!(" (task {})", b.tasks[0]),
                _ => format!(" (tasks {})", b.tasks.join(", ")),
            };
            format!("agent {}{tasks} cannot work here: {}", b.agent, b.problem)
        })
        .collect();
    format!("the run cannot start: {}", each.join("; "))
}
