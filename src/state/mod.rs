//! The state of runs, folded from the event log.
//!
//! State is never stored as truth: it is the fold of the union of all
//! clones' logs in global order, so every clone that holds the same events
//! sees the same state. The fold itself ([`fold`]) is pure: it takes records
//! and returns values, and it is the only place that says what a sequence
//! of events means, landings and the verdict cache included. It does not
//! decide what to do next (that is the scheduler's job).
//!
//! [`index`] keeps that fold up to date incrementally and caches it under
//! `.git/orch/state/`, so that reading state costs what changed since the
//! last read, not the whole history.

#[cfg(test)]
pub(crate) mod history;
pub mod index;

pub use index::{CacheSize, RunBrief, SharedIndex, StateIndex, cache_size};

use std::collections::BTreeMap;

use serde::Serialize;

use crate::event::{
    AgentUsage, Candidate, Control, Event, Failure, FailureClass, Outcome, Record, RunSettings,
    RunSummary, StopReason, Verdict,
};
use crate::ids::{PlanId, RunId, TaskId, WriterId};
use crate::oid::Oid;

/// Where an attempt's worktree is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Workspace {
    /// Branch and record exist; the agent has not started.
    Created,
    /// The agent is (or was last known to be) running.
    Active,
    /// The attempt ended with a result.
    Completed,
    /// The attempt was given up.
    Abandoned,
    /// The worktree was removed.
    Cleaned,
}

/// How an agent run ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentRun {
    pub exit: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub duration_ms: u64,
    pub usage: AgentUsage,
    pub unavailable: Option<String>,
}

/// The agent process of an attempt, as recorded when it started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct AgentProcess {
    pub pid: u32,
    /// Its process group (the agent leads its own).
    pub pgid: u32,
    pub time_ms: i64,
}

/// An attempt's result commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AttemptOutput {
    pub commit: Oid,
    pub tree: Oid,
    /// Paths changed relative to the attempt's base.
    pub changed: usize,
    /// The control paths it changes (see `attempt_result`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub control_paths: Vec<String>,
}

/// Where the merge queue put an attempt's work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LandedOn {
    /// The target's tip after the landing.
    pub new: Oid,
    /// The commits the attempt added to the target, oldest first.
    pub commits: Vec<Oid>,
}

/// One `landed` record of a run, and whether a later record voided it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Landing {
    pub task: TaskId,
    pub attempt: u32,
    pub target: String,
    pub old: Oid,
    pub new: Oid,
    pub commits: Vec<Oid>,
    pub voided: bool,
    /// Its place in the global order (clock, writer, seq).
    pub order: (u64, String, u64),
}

/// The integration gate's verdict on one candidate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IntegrationRecord {
    pub candidate: Oid,
    pub tree: Oid,
    pub attempts: Vec<String>,
    pub verdict: Verdict,
}

/// One attempt at one task.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttemptState {
    pub n: u32,
    pub writer: WriterId,
    pub branch: String,
    pub base: Oid,
    pub worktree: String,
    pub port: u16,
    pub agent: String,
    pub created_ms: i64,
    /// The agent process, once it started.
    pub started: Option<AgentProcess>,
    pub setup_ok: Option<bool>,
    pub agent_run: Option<AgentRun>,
    pub result: Option<AttemptOutput>,
    /// The verdicts its outcome rests on.
    pub verdicts: Vec<Verdict>,
    /// Verdicts of `git orch gate` run after the attempt ended.
    pub regated: Vec<Verdict>,
    pub outcome: Option<Outcome>,
    pub failure: Option<Failure>,
    pub finished_ms: Option<i64>,
    pub cleaned: bool,
    /// Its branch was deleted by cleanup (its commits kept elsewhere).
    pub branch_removed: bool,
    /// Set once the merge queue landed it (and not voided since).
    pub landed: Option<LandedOn>,
    /// Why the merge queue could not land it.
    pub landing_failure: Option<Failure>,
    /// Conflicting paths and hunks, and failing integration verdicts, of a
    /// failed landing (for the retry context).
    pub landing_conflicts: Vec<String>,
    pub landing_hunks: Vec<String>,
    pub landing_verdicts: Vec<Verdict>,
    /// Its place in a best-of-N round, if it is a candidate.
    pub candidate: Option<Candidate>,
    /// What its round's judgement made of it, once the round is judged.
    pub judged: Option<Judged>,
    /// Its branch was someone else's when it was created (see
    /// `attempt_created`): git-orch leaves that branch alone.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub foreign_branch: bool,
}

/// A candidate's place after its best-of-N round was judged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "as", content = "why", rename_all = "snake_case")]
pub enum Judged {
    /// The one that goes to the merge queue.
    Chosen,
    /// Not chosen, with why: kept, never landed.
    Archived(String),
}

impl AttemptState {
    /// The worktree's place in its life cycle.
    pub fn workspace(&self) -> Workspace {
        if self.cleaned {
            return Workspace::Cleaned;
        }
        match self.outcome {
            Some(Outcome::Abandoned) => Workspace::Abandoned,
            Some(_) => Workspace::Completed,
            None if self.started.is_some() => Workspace::Active,
            None => Workspace::Created,
        }
    }

    /// Whether the attempt has not ended.
    pub fn is_open(&self) -> bool {
        self.outcome.is_none()
    }

    /// Whether its failure counts against the task's retry budget: an
    /// unavailable agent is the fallback chain's business, not the task's.
    /// A passed attempt the merge queue could not land counts.
    pub fn counts_as_failure(&self) -> bool {
        (self.outcome == Some(Outcome::Failed)
            && self.failure.as_ref().is_none_or(|f| {
                !matches!(f.class, FailureClass::Unavailable | FailureClass::Config)
            }))
            || self.landing_failure.is_some()
    }

    /// Passed its gates and waits for the merge queue (a candidate only
    /// once its round chose it).
    pub fn is_queued(&self) -> bool {
        self.outcome == Some(Outcome::Passed)
            && self.landed.is_none()
            && self.landing_failure.is_none()
            && (self.candidate.is_none() || self.judged == Some(Judged::Chosen))
    }

    /// The control paths its result changes (see
    /// [`crate::plan::control`]), as git-orch found them when it took the
    /// result, whatever the gates' modes: it lands only once a person
    /// approved its exact result.
    pub fn control_paths(&self) -> Vec<String> {
        self.result
            .as_ref()
            .map(|r| r.control_paths.clone())
            .unwrap_or_default()
    }

    /// Why it failed, counting a failed landing.
    pub fn effective_failure(&self) -> Option<&Failure> {
        self.landing_failure.as_ref().or(self.failure.as_ref())
    }
}

/// One task of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TaskState {
    pub attempts: Vec<AttemptState>,
    /// The last skip/cancel, unless a retry came after it.
    pub control: Option<Control>,
    /// Failed attempts numbered at or below this do not count against the
    /// budget (a `retry` resets it).
    pub budget_reset_after: u32,
    /// Landed by an earlier run of the plan: done here without an attempt.
    pub carried: Option<crate::event::Carried>,
    /// Best-of-N rounds judged, by their first attempt: the chosen attempt,
    /// or `None` when no candidate passed.
    pub rounds: BTreeMap<u32, Option<u32>>,
}

/// Where a task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Not started; may be waiting for dependencies.
    Pending,
    /// An attempt is open.
    Running,
    /// A failed attempt and budget left: the next attempt is due.
    Retrying,
    /// Its attempt was stopped with the run (Ctrl-C, a driver that died),
    /// or its agent cannot work as configured: it starts again when the
    /// run is resumed.
    Stopped,
    /// The last attempt passed its gates and waits for the merge queue.
    Passed,
    /// The last attempt landed on the target.
    Done,
    /// Terminal: the retry budget is exhausted.
    Failed,
    Skipped,
    Cancelled,
}

impl TaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Pending => "pending",
            TaskStatus::Running => "running",
            TaskStatus::Retrying => "retrying",
            TaskStatus::Stopped => "stopped",
            TaskStatus::Passed => "passed",
            TaskStatus::Done => "done",
            TaskStatus::Failed => "failed",
            TaskStatus::Skipped => "skipped",
            TaskStatus::Cancelled => "cancelled",
        }
    }

    /// Whether a new attempt may start (dependencies permitting).
    pub fn may_start(self) -> bool {
        matches!(
            self,
            TaskStatus::Pending | TaskStatus::Retrying | TaskStatus::Stopped
        )
    }

    /// Whether nothing more will happen to the task (unless a person asks).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStatus::Done | TaskStatus::Failed | TaskStatus::Skipped | TaskStatus::Cancelled
        )
    }
}

impl TaskState {
    /// The task's status, given its retry budget.
    pub fn status(&self, retries: u32) -> TaskStatus {
        match self.control {
            Some(Control::Cancel) => return TaskStatus::Cancelled,
            Some(Control::Skip) => return TaskStatus::Skipped,
            _ => {}
        }
        let Some(last) = self.current() else {
            return if self.carried.is_some() {
                TaskStatus::Done
            } else {
                TaskStatus::Pending
            };
        };
        if last.is_open() || self.awaits_judgement() {
            return TaskStatus::Running;
        }
        if last.landed.is_some() {
            return TaskStatus::Done;
        }
        if last.is_queued() {
            return TaskStatus::Passed;
        }
        if self.failures() > retries {
            return TaskStatus::Failed;
        }
        if last.outcome == Some(Outcome::Abandoned)
            && last
                .failure
                .as_ref()
                .is_none_or(|f| f.class == FailureClass::Interrupted)
        {
            return TaskStatus::Stopped;
        }
        // Its agent cannot work as configured: it waits for the fix and a
        // resume, not for a retry.
        if last
            .failure
            .as_ref()
            .is_some_and(|f| f.class == FailureClass::Config)
        {
            return TaskStatus::Stopped;
        }
        TaskStatus::Retrying
    }

    /// The attempt that stands for the task: the newest one, except that
    /// a judged best-of-N round is represented by its chosen candidate
    /// (or, when none passed, its last).
    pub fn current(&self) -> Option<&AttemptState> {
        let last = self.attempts.last()?;
        let Some(c) = last.candidate else {
            return Some(last);
        };
        match self.rounds.get(&c.round) {
            Some(Some(winner)) => self.attempts.iter().find(|a| a.n == *winner).or(Some(last)),
            _ => Some(last),
        }
    }

    /// The newest best-of-N round has candidates still open, or all ended
    /// and it is not judged yet.
    pub fn awaits_judgement(&self) -> bool {
        let Some(c) = self.attempts.last().and_then(|a| a.candidate) else {
            return false;
        };
        !self.rounds.contains_key(&c.round)
    }

    /// The candidates of the newest round when every one has ended and
    /// the round is not judged yet: what a driver judges next.
    pub fn round_to_judge(&self) -> Option<(u32, Vec<&AttemptState>)> {
        let c = self.attempts.last()?.candidate?;
        if self.rounds.contains_key(&c.round) {
            return None;
        }
        let round: Vec<&AttemptState> = self
            .attempts
            .iter()
            .filter(|a| a.candidate.is_some_and(|x| x.round == c.round))
            .collect();
        round
            .iter()
            .all(|a| !a.is_open())
            .then_some((c.round, round))
    }

    /// Failed attempts that count against the budget. A best-of-N round
    /// counts once: when none of its candidates passed (or its chosen one
    /// could not land).
    pub fn failures(&self) -> u32 {
        let attempts = self
            .attempts
            .iter()
            .filter(|a| a.n > self.budget_reset_after)
            .filter(|a| match a.candidate {
                None => a.counts_as_failure(),
                Some(_) => a.landing_failure.is_some(),
            })
            .count();
        // A round without a winner counts when one of its candidates failed
        // (a round only stopped by Ctrl-C or a lost driver does not).
        let rounds = self
            .rounds
            .iter()
            .filter(|(round, winner)| **round > self.budget_reset_after && winner.is_none())
            .filter(|(round, _)| {
                self.attempts.iter().any(|a| {
                    a.candidate.is_some_and(|c| c.round == **round) && a.counts_as_failure()
                })
            })
            .count();
        (attempts + rounds) as u32
    }

    /// The open attempt, if any.
    pub fn open_attempt(&self) -> Option<&AttemptState> {
        self.attempts.iter().rev().find(|a| a.is_open())
    }

    /// The next attempt number.
    pub fn next_attempt(&self) -> u32 {
        self.attempts.iter().map(|a| a.n).max().unwrap_or(0) + 1
    }

    /// Money its attempts reported spending.
    pub fn cost(&self) -> f64 {
        // `sum` of no floats is -0.0, which prints as "-0.00".
        0.0 + self
            .attempts
            .iter()
            .filter_map(|a| a.agent_run.as_ref().and_then(|r| r.usage.cost_usd))
            .sum::<f64>()
    }
}

/// A driver that took a run over.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Driver {
    pub writer: WriterId,
    pub pid: u32,
    pub host: String,
    pub time_ms: i64,
}

/// One run, as the log tells it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunState {
    pub id: RunId,
    pub plan_id: PlanId,
    pub revision: u32,
    pub plan_hash: String,
    pub approval: String,
    pub target: String,
    pub base: Oid,
    pub settings: RunSettings,
    pub started_ms: i64,
    pub drivers: Vec<Driver>,
    /// The person who started the run, when git knew one.
    pub by: Option<crate::event::Person>,
    /// The last stop since the last driver took over.
    pub stopped: Option<(StopReason, String)>,
    pub finished: Option<RunSummary>,
    /// Why it was closed before its tasks ended, if it was.
    pub closed: Option<String>,
    pub tasks: BTreeMap<TaskId, TaskState>,
    /// Claims recorded by workers, by claim commit (see `worker`).
    pub claims: BTreeMap<String, ClaimState>,
    /// Every `landed` record, in global order.
    pub landings: Vec<Landing>,
    /// Every integration gate verdict, in global order.
    pub integration: Vec<IntegrationRecord>,
}

/// A claim a worker recorded winning, and what became of its lease.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClaimState {
    /// The task, or `_queue` for the merge queue.
    pub what: String,
    pub attempt: u32,
    pub writer: WriterId,
    pub host: String,
    pub lease_secs: u64,
    pub claimed_ms: i64,
    /// The last sign of life: the claim or its latest renewal.
    pub renewed_ms: i64,
    pub released: bool,
    pub took_over_from: Option<String>,
}

impl RunState {
    /// The newest claim recorded on `what` (a task id, or `_queue`).
    pub fn claim_of(&self, what: &str) -> Option<(&String, &ClaimState)> {
        self.claims
            .iter()
            .filter(|(_, c)| c.what == what)
            .max_by_key(|(_, c)| (c.attempt, c.claimed_ms))
    }
}

impl RunState {
    /// The newest landing `writer` recorded of this run on `target` (every
    /// attempt of it, for a batch), or nothing when it was voided.
    pub fn last_landing_on(&self, target: &str, writer: &str) -> Vec<Landing> {
        let Some(newest) = self
            .landings
            .iter()
            .filter(|l| l.target == target && l.order.1 == writer)
            .max_by(|a, b| a.order.cmp(&b.order))
        else {
            return Vec::new();
        };
        if newest.voided {
            return Vec::new();
        }
        self.landings
            .iter()
            .filter(|l| {
                l.target == target && l.order.1 == writer && l.new == newest.new && !l.voided
            })
            .cloned()
            .collect()
    }

    /// Money spent so far.
    pub fn cost(&self) -> f64 {
        0.0 + self.tasks.values().map(TaskState::cost).sum::<f64>()
    }

    /// Every attempt with its task.
    pub fn attempts(&self) -> impl Iterator<Item = (&TaskId, &AttemptState)> {
        self.tasks
            .iter()
            .flat_map(|(t, s)| s.attempts.iter().map(move |a| (t, a)))
    }

    /// Each task's current attempt, when it has passed and waits to land:
    /// what the merge queue lands. An older attempt that passed never
    /// lands, so nothing waits for it: a worker frozen past its lease can
    /// finish an attempt after another worker took the task over and
    /// landed a newer one.
    pub fn waiting_to_land(&self) -> impl Iterator<Item = (&TaskId, &AttemptState)> {
        self.tasks
            .iter()
            .filter_map(|(t, s)| s.current().filter(|a| a.is_queued()).map(|a| (t, a)))
    }

    fn attempt_mut(&mut self, task: &TaskId, n: u32) -> Option<&mut AttemptState> {
        self.tasks
            .get_mut(task)?
            .attempts
            .iter_mut()
            .find(|a| a.n == n)
    }
}

/// Folds records (in global order) into the state of every run.
pub fn fold<'a>(records: impl IntoIterator<Item = &'a Record>) -> BTreeMap<RunId, RunState> {
    let mut runs: BTreeMap<RunId, RunState> = BTreeMap::new();
    for r in records {
        apply(&mut runs, r);
    }
    runs
}

fn apply(runs: &mut BTreeMap<RunId, RunState>, r: &Record) {
    if let Some(run) = RunState::started(r) {
        // The first start of a run id stands.
        runs.entry(run.id.clone()).or_insert(run);
    } else if let Some(run) = r.event.run_id().and_then(|id| runs.get_mut(id)) {
        run.apply(r);
    }
}

impl RunState {
    /// The run a `run_started` record begins, with the tasks it carried.
    fn started(r: &Record) -> Option<RunState> {
        let Event::RunStarted {
            run_id,
            plan_id,
            revision,
            plan_hash,
            approval,
            target,
            base,
            settings,
            carried,
            by,
        } = &r.event
        else {
            return None;
        };
        Some(RunState {
            id: run_id.clone(),
            plan_id: plan_id.clone(),
            revision: *revision,
            plan_hash: plan_hash.clone(),
            approval: approval.to_string(),
            target: target.clone(),
            base: *base,
            settings: settings.clone(),
            started_ms: r.time_ms,
            drivers: vec![Driver {
                writer: r.writer.clone(),
                pid: 0,
                host: String::new(),
                time_ms: r.time_ms,
            }],
            by: by.clone(),
            stopped: None,
            finished: None,
            closed: None,
            tasks: carried
                .iter()
                .map(|(task, c)| {
                    (
                        task.clone(),
                        TaskState {
                            carried: Some(c.clone()),
                            ..Default::default()
                        },
                    )
                })
                .collect(),
            claims: BTreeMap::new(),
            landings: Vec::new(),
            integration: Vec::new(),
        })
    }

    /// What one record about this run changes, by the part of the run it
    /// is about.
    fn apply(&mut self, r: &Record) {
        match &r.event {
            Event::RunResumed { .. }
            | Event::RunStopped { .. }
            | Event::RunFinished { .. }
            | Event::TaskControl { .. } => self.apply_control(r),
            Event::AttemptCreated { .. } => self.open_attempt(r),
            Event::AttemptStarted { task, attempt, .. }
            | Event::SetupFinished { task, attempt, .. }
            | Event::AgentFinished { task, attempt, .. }
            | Event::AttemptResult { task, attempt, .. }
            | Event::GateVerdict { task, attempt, .. }
            | Event::AttemptFinished { task, attempt, .. }
            | Event::WorkspaceCleaned { task, attempt, .. }
            | Event::AttemptBranchRemoved { task, attempt, .. } => {
                if let Some(a) = self.attempt_mut(task, *attempt) {
                    a.apply(r);
                }
            }
            Event::CandidatesJudged { .. } => self.judge_round(r),
            Event::Landed { .. }
            | Event::LandingVoided { .. }
            | Event::LandingFailed { .. }
            | Event::IntegrationVerdict { .. } => self.apply_landing(r),
            Event::Claimed { .. } | Event::ClaimRenewed { .. } | Event::ClaimReleased { .. } => {
                self.apply_claim(r)
            }
            // Not about a run (`run_id` is none), or its start: branch
            // approvals and hand landings are looked up by key in the state
            // index's catalog (see `index`).
            Event::RunStarted { .. }
            | Event::Initialized { .. }
            | Event::PlanAdded { .. }
            | Event::ApprovalRecorded { .. }
            | Event::DebugMarker { .. }
            | Event::PlanRound { .. }
            | Event::BranchApproved { .. }
            | Event::BranchLanded { .. }
            | Event::FindingAccepted { .. } => {}
        }
    }

    /// Drivers taking over, stopping and finishing; a person's control of
    /// a task.
    fn apply_control(&mut self, r: &Record) {
        match &r.event {
            Event::RunResumed { pid, host, .. } => {
                self.drivers.push(Driver {
                    writer: r.writer.clone(),
                    pid: *pid,
                    host: host.clone(),
                    time_ms: r.time_ms,
                });
                self.stopped = None;
            }
            Event::RunStopped { reason, detail, .. } => {
                self.stopped = Some((*reason, detail.clone()));
            }
            Event::RunFinished {
                summary, closed, ..
            } => {
                self.finished = Some(summary.clone());
                self.closed = closed.clone();
            }
            Event::TaskControl { task, action, .. } => {
                let t = self.tasks.entry(task.clone()).or_default();
                match action {
                    Control::Retry => {
                        t.control = None;
                        t.budget_reset_after = t.attempts.iter().map(|a| a.n).max().unwrap_or(0);
                        // A retry reopens a finished run.
                        self.finished = None;
                    }
                    other => t.control = Some(*other),
                }
            }
            _ => {}
        }
    }

    /// A new attempt of a task; a second record of the same attempt
    /// changes nothing.
    fn open_attempt(&mut self, r: &Record) {
        let Event::AttemptCreated {
            task,
            attempt,
            branch,
            base,
            worktree,
            port,
            agent,
            candidate,
            foreign_branch,
            ..
        } = &r.event
        else {
            return;
        };
        let t = self.tasks.entry(task.clone()).or_default();
        if t.attempts.iter().any(|a| a.n == *attempt) {
            return;
        }
        t.attempts.push(AttemptState {
            n: *attempt,
            writer: r.writer.clone(),
            branch: branch.clone(),
            base: *base,
            worktree: worktree.clone(),
            port: *port,
            agent: agent.clone(),
            created_ms: r.time_ms,
            started: None,
            setup_ok: None,
            agent_run: None,
            result: None,
            verdicts: Vec::new(),
            regated: Vec::new(),
            outcome: None,
            failure: None,
            finished_ms: None,
            cleaned: false,
            branch_removed: false,
            landed: None,
            landing_failure: None,
            landing_conflicts: Vec::new(),
            landing_hunks: Vec::new(),
            landing_verdicts: Vec::new(),
            candidate: *candidate,
            judged: None,
            // Nothing of git-orch's to clean up: no worktree was made, and
            // the branch is someone else's.
            foreign_branch: *foreign_branch,
        });
        t.attempts.sort_by_key(|a| a.n);
    }

    /// The judgement of a best-of-N round: the first one stands.
    fn judge_round(&mut self, r: &Record) {
        let Event::CandidatesJudged {
            task,
            round,
            winner,
            ranking,
            ..
        } = &r.event
        else {
            return;
        };
        let Some(t) = self.tasks.get_mut(task) else {
            return;
        };
        if t.rounds.contains_key(round) {
            return;
        }
        t.rounds.insert(*round, *winner);
        for a in t
            .attempts
            .iter_mut()
            .filter(|a| a.candidate.is_some_and(|c| c.round == *round))
        {
            a.judged = Some(if Some(a.n) == *winner {
                Judged::Chosen
            } else {
                Judged::Archived(
                    ranking
                        .iter()
                        .find(|r| r.attempt == a.n)
                        .map_or_else(|| "not chosen".to_owned(), |r| r.why.clone()),
                )
            });
        }
    }

    /// The merge queue's records: landings, voided landings, failed ones,
    /// integration verdicts.
    fn apply_landing(&mut self, r: &Record) {
        match &r.event {
            Event::Landed {
                task,
                attempt,
                target,
                old,
                new,
                commits,
                ..
            } => {
                self.landings.push(Landing {
                    task: task.clone(),
                    attempt: *attempt,
                    target: target.clone(),
                    old: *old,
                    new: *new,
                    commits: commits.clone(),
                    voided: false,
                    order: (r.clock, r.writer.to_string(), r.seq),
                });
                if let Some(a) = self.attempt_mut(task, *attempt) {
                    a.landed = Some(LandedOn {
                        new: *new,
                        commits: commits.clone(),
                    });
                }
            }
            Event::LandingVoided {
                task, attempt, new, ..
            } => {
                for l in self
                    .landings
                    .iter_mut()
                    .filter(|l| l.task == *task && l.attempt == *attempt && l.new == *new)
                {
                    l.voided = true;
                }
                if let Some(a) = self.attempt_mut(task, *attempt)
                    && a.landed.as_ref().is_some_and(|l| l.new == *new)
                {
                    a.landed = None;
                }
            }
            Event::LandingFailed {
                task,
                attempt,
                failure,
                conflicts,
                hunks,
                verdicts,
                ..
            } => {
                if let Some(a) = self.attempt_mut(task, *attempt)
                    && a.landed.is_none()
                {
                    a.landing_failure = Some(failure.clone());
                    a.landing_conflicts = conflicts.clone();
                    a.landing_hunks = hunks.clone();
                    a.landing_verdicts = verdicts.clone();
                }
            }
            Event::IntegrationVerdict {
                candidate,
                tree,
                attempts,
                verdict,
                ..
            } => self.integration.push(IntegrationRecord {
                candidate: *candidate,
                tree: *tree,
                attempts: attempts.clone(),
                verdict: verdict.clone(),
            }),
            _ => {}
        }
    }

    /// Workers' claims and their leases.
    fn apply_claim(&mut self, r: &Record) {
        match &r.event {
            Event::Claimed {
                what,
                attempt,
                commit,
                lease_secs,
                host,
                took_over_from,
                ..
            } => {
                self.claims.insert(
                    commit.to_string(),
                    ClaimState {
                        what: what.clone(),
                        attempt: *attempt,
                        writer: r.writer.clone(),
                        host: host.clone(),
                        lease_secs: *lease_secs,
                        claimed_ms: r.time_ms,
                        renewed_ms: r.time_ms,
                        released: false,
                        took_over_from: took_over_from.clone(),
                    },
                );
            }
            Event::ClaimRenewed { commit, .. } => {
                if let Some(c) = self.claims.get_mut(&commit.to_string()) {
                    c.renewed_ms = c.renewed_ms.max(r.time_ms);
                }
            }
            Event::ClaimReleased { commit, .. } => {
                if let Some(c) = self.claims.get_mut(&commit.to_string()) {
                    c.released = true;
                }
            }
            _ => {}
        }
    }
}

impl AttemptState {
    /// What one record about this attempt changes.
    fn apply(&mut self, r: &Record) {
        match &r.event {
            Event::AttemptStarted { pid, pgid, .. } => {
                self.started = Some(AgentProcess {
                    pid: *pid,
                    pgid: *pgid,
                    time_ms: r.time_ms,
                });
            }
            Event::SetupFinished { ok, .. } => self.setup_ok = Some(*ok),
            Event::AgentFinished {
                exit,
                signal,
                timed_out,
                duration_ms,
                usage,
                unavailable,
                ..
            } => {
                self.agent_run = Some(AgentRun {
                    exit: *exit,
                    signal: *signal,
                    timed_out: *timed_out,
                    duration_ms: *duration_ms,
                    usage: usage.clone(),
                    unavailable: unavailable.clone(),
                });
            }
            Event::AttemptResult {
                commit,
                tree,
                changed,
                control_paths,
                ..
            } => {
                self.result = Some(AttemptOutput {
                    commit: *commit,
                    tree: *tree,
                    changed: *changed,
                    control_paths: control_paths.clone(),
                });
            }
            Event::GateVerdict { verdict, .. } => {
                // The verdicts an outcome rests on are those recorded
                // before it; a later `git orch gate` adds to the record
                // without changing history's verdict.
                if self.outcome.is_none() {
                    self.verdicts.push(verdict.clone());
                } else {
                    self.regated.push(verdict.clone());
                }
            }
            // The first end wins: a resumed driver that marks an attempt
            // abandoned cannot be overwritten by a late write.
            Event::AttemptFinished {
                outcome, failure, ..
            } if self.outcome.is_none() => {
                self.outcome = Some(*outcome);
                self.failure = failure.clone();
                self.finished_ms = Some(r.time_ms);
            }
            Event::WorkspaceCleaned { .. } => self.cleaned = true,
            Event::AttemptBranchRemoved { .. } => self.branch_removed = true,
            _ => {}
        }
    }
}

/// A person's branch approved for `git orch land`, from its
/// `branch_approved` record.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct BranchApproval {
    pub branch: String,
    pub commit: Oid,
    /// The tree the approval is bound to.
    pub tree: Oid,
    pub approver: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub signed: bool,
    /// The approval commit.
    pub approval: Oid,
    pub time_ms: i64,
}

impl BranchApproval {
    /// The approval a `branch_approved` record holds.
    pub fn of(r: &Record) -> Option<Self> {
        match &r.event {
            Event::BranchApproved {
                branch,
                commit,
                tree,
                approver,
                note,
                signed,
                approval,
            } => Some(Self {
                branch: branch.clone(),
                commit: *commit,
                tree: *tree,
                approver: approver.clone(),
                note: note.clone(),
                signed: *signed,
                approval: *approval,
                time_ms: r.time_ms,
            }),
            _ => None,
        }
    }
}

/// A person's branch landed by `git orch land`, from its `branch_landed`
/// record.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct BranchLanding {
    pub landing: String,
    pub branch: String,
    pub commit: Oid,
    pub tree: Oid,
    pub approval: Oid,
    pub target: String,
    pub old: Oid,
    pub new: Oid,
    pub strategy: String,
    pub commits: Vec<Oid>,
    pub verdicts: Vec<Verdict>,
}

impl BranchLanding {
    /// The landing a `branch_landed` record holds.
    pub fn of(r: &Record) -> Option<Self> {
        match &r.event {
            Event::BranchLanded {
                landing,
                branch,
                commit,
                tree,
                approval,
                target,
                old,
                new,
                strategy,
                commits,
                verdicts,
            } => Some(Self {
                landing: landing.clone(),
                branch: branch.clone(),
                commit: *commit,
                tree: *tree,
                approval: *approval,
                target: target.clone(),
                old: *old,
                new: *new,
                strategy: strategy.clone(),
                commits: commits.clone(),
                verdicts: verdicts.clone(),
            }),
            _ => None,
        }
    }
}

/// What a verdict of a command gate is cached under: the same command on
/// the same tree, given the same inputs (`gate::inputs`), gives the same
/// answer.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VerdictKey {
    pub tree: String,
    pub gate: String,
    pub command: String,
    /// The fingerprint of the gate's inputs; empty for a verdict recorded
    /// without one, which no gate asks for.
    pub inputs: String,
}

/// Verdicts already known, by [`VerdictKey`].
pub type VerdictCache = std::collections::HashMap<VerdictKey, Verdict>;

/// The verdict cache of `runs`: every decided verdict of a command gate on
/// an attempt's result tree, and of the integration gate on a candidate's
/// tree, under the inputs it was judged with; later verdicts win.
pub fn verdict_cache<'a>(runs: impl IntoIterator<Item = &'a RunState>) -> VerdictCache {
    use crate::event::GateStatus;
    let decided = |v: &Verdict| {
        matches!(
            v.status,
            GateStatus::Pass | GateStatus::Fail | GateStatus::Warn
        )
    };
    let mut cache = VerdictCache::new();
    for run in runs {
        for (_, a) in run.attempts() {
            let Some(result) = &a.result else { continue };
            for v in a.verdicts.iter().chain(&a.regated).filter(|v| decided(v)) {
                if let Some(command) = &v.command {
                    cache.insert(
                        VerdictKey {
                            tree: result.tree.to_string(),
                            gate: v.gate.clone(),
                            command: command.clone(),
                            inputs: v.inputs.clone().unwrap_or_default(),
                        },
                        v.clone(),
                    );
                }
            }
        }
        for i in run.integration.iter().filter(|i| decided(&i.verdict)) {
            if let Some(command) = &i.verdict.command {
                cache.insert(
                    VerdictKey {
                        tree: i.tree.to_string(),
                        gate: i.verdict.gate.clone(),
                        command: command.clone(),
                        inputs: i.verdict.inputs.clone().unwrap_or_default(),
                    },
                    i.verdict.clone(),
                );
            }
        }
    }
    cache
}

#[cfg(test)]
mod tests {
    use super::history::{History, settings, task};
    use super::*;
    use crate::event::FailureClass;

    fn judged(h: &mut History, round: u32, winner: Option<u32>) {
        let run_id = h.run_id().clone();
        h.push(Event::CandidatesJudged {
            run_id,
            task: task("t"),
            round,
            winner,
            ranking: Vec::new(),
        });
    }

    fn task_of(h: &History) -> TaskState {
        h.state().tasks[&task("t")].clone()
    }

    /// A worker frozen past its lease finishes attempt 1 after another
    /// took the task over, recorded attempt 1 abandoned and landed attempt
    /// 2. The frozen worker's clock had not seen those records, so its
    /// pass comes first in the log's order and the abandon, a second end,
    /// is not taken. Attempt 1 passed, but nothing waits for it, so the
    /// run can finish (workers used to claim the queue for it forever).
    #[test]
    fn a_superseded_attempt_that_passed_late_waits_for_nothing() {
        let mut h = History::started(settings());
        h.created("t", 1, "fake")
            .finished("t", 1, Outcome::Passed, None)
            .finished("t", 1, Outcome::Abandoned, None)
            .created("t", 2, "fake")
            .finished("t", 2, Outcome::Passed, None)
            .landed("t", 2);
        let run = h.state();
        assert!(run.tasks[&task("t")].attempts[0].is_queued());
        assert_eq!(run.tasks[&task("t")].status(1), TaskStatus::Done);
        assert_eq!(run.waiting_to_land().count(), 0);
        // Its current attempt passed and not landed yet: that one waits.
        let mut h = History::started(settings());
        h.created("t", 1, "fake")
            .finished("t", 1, Outcome::Passed, None);
        let run = h.state();
        let waiting: Vec<u32> = run.waiting_to_land().map(|(_, a)| a.n).collect();
        assert_eq!(waiting, vec![1]);
    }

    #[test]
    fn a_best_of_round_runs_until_judged_then_stands_for_its_winner() {
        let mut h = History::started(settings());
        h.candidate("t", 1, 1, 2)
            .candidate("t", 2, 1, 2)
            .finished("t", 1, Outcome::Passed, None);
        assert_eq!(task_of(&h).status(1), TaskStatus::Running);
        h.finished("t", 2, Outcome::Passed, None);
        // Every candidate ended, none chosen yet: nothing is queued.
        let t = task_of(&h);
        assert_eq!(t.status(1), TaskStatus::Running);
        assert!(t.attempts.iter().all(|a| !a.is_queued()));
        assert_eq!(t.round_to_judge().map(|(r, c)| (r, c.len())), Some((1, 2)));
        judged(&mut h, 1, Some(1));
        let t = task_of(&h);
        assert_eq!(t.status(1), TaskStatus::Passed);
        assert_eq!(t.current().map(|a| a.n), Some(1));
        assert!(t.attempts[0].is_queued());
        assert!(
            !t.attempts[1].is_queued(),
            "the archived candidate waits to land"
        );
        assert!(matches!(t.attempts[1].judged, Some(Judged::Archived(_))));
        assert!(t.round_to_judge().is_none());
        // A second judgement of the same round changes nothing.
        judged(&mut h, 1, Some(2));
        assert_eq!(task_of(&h).current().map(|a| a.n), Some(1));
    }

    #[test]
    fn a_round_where_none_passed_is_one_failure() {
        let mut h = History::started(settings());
        for n in [1, 2, 3] {
            h.candidate("t", n, 1, 3);
        }
        for n in [1, 2, 3] {
            h.finished("t", n, Outcome::Failed, Some(FailureClass::Gate));
        }
        judged(&mut h, 1, None);
        let t = task_of(&h);
        assert_eq!(t.failures(), 1);
        assert_eq!(t.status(1), TaskStatus::Retrying);
        assert_eq!(t.status(0), TaskStatus::Failed);
    }

    #[test]
    fn a_round_stopped_by_an_interruption_costs_no_retry() {
        let mut h = History::started(settings());
        h.candidate("t", 1, 1, 2)
            .candidate("t", 2, 1, 2)
            .finished("t", 1, Outcome::Abandoned, Some(FailureClass::Interrupted))
            .finished("t", 2, Outcome::Abandoned, Some(FailureClass::Interrupted));
        judged(&mut h, 1, None);
        let t = task_of(&h);
        assert_eq!(t.failures(), 0);
        assert_eq!(t.status(0), TaskStatus::Stopped);
    }

    #[test]
    fn retries_then_terminal_failure() {
        let mut h = History::started(settings());
        h.created("t", 1, "fake");
        let status = |h: &History| task_of(h).status(1);
        assert_eq!(status(&h), TaskStatus::Running);
        h.finished("t", 1, Outcome::Failed, Some(FailureClass::Gate));
        assert_eq!(status(&h), TaskStatus::Retrying);
        h.created("t", 2, "fake")
            .finished("t", 2, Outcome::Failed, Some(FailureClass::Gate));
        assert_eq!(status(&h), TaskStatus::Failed);
        // A person's retry resets the budget.
        h.control("t", Control::Retry);
        assert_eq!(status(&h), TaskStatus::Retrying);
    }

    #[test]
    fn an_agent_that_cannot_work_as_configured_stops_the_task_without_spending_its_budget() {
        let mut h = History::started(settings());
        h.created("t", 1, "fake")
            .finished("t", 1, Outcome::Failed, Some(FailureClass::Config));
        let t = task_of(&h);
        assert_eq!(t.failures(), 0);
        // Waiting for the fix and a resume, whatever the budget.
        assert_eq!(t.status(0), TaskStatus::Stopped);
        assert_eq!(t.status(5), TaskStatus::Stopped);
        assert!(t.status(0).may_start());
    }

    #[test]
    fn unavailable_agents_do_not_spend_the_budget_and_first_end_wins() {
        let mut h = History::started(settings());
        h.created("t", 1, "fake")
            .finished("t", 1, Outcome::Failed, Some(FailureClass::Unavailable))
            .created("t", 2, "fake")
            .finished("t", 2, Outcome::Failed, Some(FailureClass::Gate))
            .created("t", 3, "fake")
            .finished("t", 3, Outcome::Abandoned, None)
            .finished("t", 3, Outcome::Passed, None);
        let t = task_of(&h);
        assert_eq!(t.failures(), 1);
        assert_eq!(t.attempts[2].outcome, Some(Outcome::Abandoned));
        assert_eq!(t.attempts[2].workspace(), Workspace::Abandoned);
        assert_eq!(t.next_attempt(), 4);
    }
}
