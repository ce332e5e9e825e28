//! The driver: one process per run that dispatches ready tasks up to the
//! cap, in the plan's order, lands what passed, and watches it all end.
//!
//! It holds the run's driver lock (`.git/orch/runs/<run>.lock`) for its whole
//! life, so two `git orch run` of one run cannot both dispatch. On start it
//! finds the attempts this clone's dead driver left open, stops their
//! agents if they still run (after checking the process really is that
//! attempt's), and records them abandoned; their tasks are dispatched
//! again. Attempts of other clones are never touched: workers coordinate
//! through claims and leases. Every decision is taken from the state index
//! refreshed after each change, so a `retry`, `skip` or `cancel` recorded
//! by another process is seen within a second.
//!
//! It stops dispatching when the circuit breaker trips, when the budget is
//! spent, when a task's agents cannot work as configured, or on
//! Ctrl-C/SIGTERM; in-flight agents are stopped (TERM, then KILL) except
//! on budget and configuration, where they may finish. An attempt whose task
//! panics is recorded failed (internal error) and the run goes on.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

use tokio::task::JoinSet;

use crate::event::{Candidate, Event, Failure, FailureClass, Outcome, RunSummary, StopReason};
use crate::ids::TaskId;
use crate::state::{RunState, TaskStatus};
use crate::store::{Store, lock};

use super::attempt::{self, Attempt, AttemptEnd};
use super::context::{RunContext, RunError};
use super::prepare::summarize;
use super::progress::{LandError, LandReport, Lander, Progress};
use super::schedule::{self, Breaker};

/// How a drive ended.
#[derive(Debug, Clone)]
pub enum DriveOutcome {
    /// Every task ended; all done or skipped.
    Finished(RunSummary),
    /// Every task ended; some failed, were cancelled or are blocked.
    Incomplete(RunSummary),
    /// The circuit breaker tripped.
    Breaker(String),
    /// The budget is spent.
    Budget { spent: f64, budget: f64 },
    /// Ctrl-C or SIGTERM.
    Interrupted,
    /// The merge queue refused to land (a dirty checkout of the target).
    LandingRefused(super::progress::LandingProblem),
    /// git-orch cannot do its own work here: the disk is full, or the same
    /// failure inside git-orch repeats attempt after attempt. Retrying
    /// would only repeat it; the run stops until someone fixes the cause.
    Broken(String),
    /// An agent cannot work as configured and no fallback can: its key
    /// was refused, its program is missing. Retrying would only repeat
    /// it; the run stops until the configuration is fixed.
    Config(String),
    /// Nothing can go on until a person approves results that change
    /// control paths; the run stops, keeping every passed result in the
    /// queue, and resumes when run again.
    AwaitingApproval(String),
}

/// Whether an error's text says the disk is full (`ENOSPC`, from git-orch
/// itself or a git it ran): nothing git-orch does can succeed until space
/// is freed.
pub fn disk_full(text: &str) -> bool {
    text.contains("No space left on device") || text.contains("os error 28")
}

/// Drives `ctx`'s run until every task has ended or it must stop.
pub async fn drive(
    ctx: RunContext,
    progress: &(dyn Fn(Progress) + Sync),
    lander: Lander,
) -> Result<DriveOutcome, RunError> {
    let mut driver = Driver::start(ctx, progress, lander)?;
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| RunError::Internal(format!("cannot watch SIGTERM: {e}")))?;
    loop {
        match driver.turn(&mut sigterm).await {
            Ok(Some(outcome)) => return Ok(outcome),
            Ok(None) => {}
            // The disk is full: every write fails from here on. Stop the
            // agents, wait for them, and say so once.
            Err(e) if disk_full(&e.to_string()) => {
                return Ok(driver.break_down(e.to_string()).await);
            }
            Err(e) => return Err(e),
        }
    }
}

/// Attempts in a row that failed inside git-orch itself (class
/// `internal`, a panic included) after which the run stops: the same
/// failure of git-orch's own work does not go away by retrying.
const INTERNAL_IN_A_ROW: u32 = 3;

/// An attempt running under this driver.
struct RunningAttempt {
    n: u32,
    cancel: CancellationToken,
}

/// A task's attempts running under this driver: one, or the candidates
/// of a best-of-N round.
type LiveTask = Vec<RunningAttempt>;

/// The state of one drive.
struct Driver<'p> {
    store: Store,
    ctx: Arc<RunContext>,
    progress: &'p (dyn Fn(Progress) + Sync),
    lander: Lander,
    /// Held for the driver's life: no second driver of this run.
    _lock: lock::LockGuard,
    /// When this driver took over: the breaker counts from here.
    since_ms: i64,
    exe: std::path::PathBuf,
    cancel_all: CancellationToken,
    /// Stops a landing in progress: only an interruption or git-orch's own
    /// breakdown does; a breaker, budget or configuration stop still lands
    /// what passed (an attempt may pass after the stop, while it ends).
    cancel_landings: CancellationToken,
    live: BTreeMap<TaskId, LiveTask>,
    running: JoinSet<AttemptEnd>,
    /// Which attempt each tokio task runs, to name a panic.
    tasks: HashMap<tokio::task::Id, (TaskId, u32)>,
    landings: JoinSet<Result<LandReport, LandError>>,
    /// Landed attempts' worktrees and branches being removed (`[orch]
    /// cleanup`), while the run goes on.
    cleanups: JoinSet<()>,
    stop: Option<DriveOutcome>,
    /// Attempts in a row that failed inside git-orch (a panic, an
    /// internal error, an end that could not even be recorded): a failure
    /// that repeats stops the run, whatever the log could record of it.
    internal: u32,
    /// The attempts waiting to land when a landing last landed nothing and
    /// failed nothing: no new landing starts until that set changes (a
    /// landing that cannot progress is not retried in a loop).
    stuck_landing: Option<Vec<(TaskId, u32)>>,
    /// The attempts waiting when the landing in flight started.
    landing_set: Vec<(TaskId, u32)>,
    /// Tasks whose landing is known to whoever watches: landed before this
    /// driver started, or reported since. A task that depends on a landing
    /// recorded but not reported yet (its landing task is still writing
    /// notes) waits for the report, so the watcher never sees the
    /// dependent start before its dependency landed.
    shown_landed: BTreeSet<TaskId>,
}

impl<'p> Driver<'p> {
    /// Takes the run over: its driver lock, a `run_resumed` record, and
    /// this clone's attempts a dead driver left open.
    fn start(
        ctx: RunContext,
        progress: &'p (dyn Fn(Progress) + Sync),
        lander: Lander,
    ) -> Result<Self, RunError> {
        let store = Store::open_shared(&ctx.common_dir)?;
        let lock_path = super::prepare::driver_lock_path(&store, &ctx.run);
        let lock = match lock::try_acquire(&lock_path, &format!("driving run {}", ctx.run))? {
            Ok(g) => g,
            Err(held) => {
                return Err(RunError::Busy {
                    run: ctx.run.clone(),
                    holder: held.holder,
                });
            }
        };
        let start = store.append(vec![Event::RunResumed {
            run_id: ctx.run.clone(),
            pid: std::process::id(),
            host: super::prepare::host(),
        }])?;
        let since_ms = start.first().map_or(0, |r| r.time_ms);
        let mut driver = Self {
            store,
            ctx: Arc::new(ctx),
            progress,
            lander,
            _lock: lock,
            since_ms,
            exe: std::env::current_exe().unwrap_or_else(|_| "git-orch".into()),
            cancel_all: CancellationToken::new(),
            cancel_landings: CancellationToken::new(),
            live: BTreeMap::new(),
            running: JoinSet::new(),
            tasks: HashMap::new(),
            landings: JoinSet::new(),
            cleanups: JoinSet::new(),
            stop: None,
            internal: 0,
            stuck_landing: None,
            landing_set: Vec::new(),
            shown_landed: BTreeSet::new(),
        };
        let run = driver.read_run()?;
        driver.shown_landed = landed_tasks(&run);
        let abandoned = abandon_orphans(&driver.store, &run)?;
        progress(Progress::Resumed {
            run: driver.ctx.run.to_string(),
            abandoned,
        });
        Ok(driver)
    }

    /// One turn of the drive: take in what ended, decide, act, wait.
    /// `Some` when the drive is over.
    async fn turn(
        &mut self,
        sigterm: &mut tokio::signal::unix::Signal,
    ) -> Result<Option<DriveOutcome>, RunError> {
        // Report what has ended before acting on the state it left: a
        // landing's record is in the log before its report, and the
        // dependent it frees must not be shown starting first.
        self.report_ended()?;
        let run = self.read_run()?;
        self.forward_cancels(&run);
        let run = if self.judge_rounds(&run)? {
            self.read_run()?
        } else {
            run
        };
        if self.stop.is_none() {
            self.check_limits(&run)?;
        }
        if self.stop.is_none() {
            self.dispatch(&run)?;
        }
        self.start_landing(&run);
        if self.live.is_empty() && self.landings.is_empty() && self.cleanups.is_empty() {
            if let Some(outcome) = self.stop.take() {
                return Ok(Some(outcome));
            }
            if let Some(outcome) = self.finish_if_done()? {
                return Ok(Some(outcome));
            }
            // Nothing runs and nothing could start: wait (a second, or a
            // signal) for what changes that, never spin.
        }
        self.wait(sigterm).await?;
        Ok(None)
    }

    /// Stops the run because git-orch cannot do its own work here: every
    /// agent is stopped and waited for (their attempts record themselves
    /// where the disk allows; the next start records the rest), the stop is
    /// recorded where it can be, and the outcome says why once.
    async fn break_down(&mut self, why: String) -> DriveOutcome {
        self.cancel_all.cancel();
        self.cancel_landings.cancel();
        while let Some(done) = self.running.join_next_with_id().await {
            let _ = self.attempt_ended(done);
        }
        while self.landings.join_next().await.is_some() {}
        while self.cleanups.join_next().await.is_some() {}
        let _ = self.store.append(vec![Event::RunStopped {
            run_id: self.ctx.run.clone(),
            reason: StopReason::Breaker,
            detail: why.clone(),
        }]);
        DriveOutcome::Broken(why)
    }

    /// The run as the log tells it now.
    fn read_run(&self) -> Result<RunState, RunError> {
        self.ctx
            .state
            .read(&self.store, |index| {
                Ok::<_, RunError>(index.run(&self.ctx.run)?.cloned())
            })?
            .ok_or_else(|| RunError::Internal(format!("run {} is not in the log", self.ctx.run)))
    }

    /// Tells live attempts whose task a person cancelled to stop.
    fn forward_cancels(&self, run: &RunState) {
        for (task, live) in &self.live {
            if run
                .tasks
                .get(task)
                .is_some_and(|t| t.control == Some(crate::event::Control::Cancel))
            {
                for l in live {
                    l.cancel.cancel();
                }
            }
        }
    }

    /// Stops dispatching when the breaker trips or the budget is spent.
    fn check_limits(&mut self, run: &RunState) -> Result<(), RunError> {
        let counts = Breaker::count(run, self.since_ms);
        if let Some(why) = counts.tripped(&self.ctx.run_settings) {
            (self.progress)(Progress::Stopping(format!("circuit breaker: {why}")));
            self.store.append(vec![Event::RunStopped {
                run_id: self.ctx.run.clone(),
                reason: StopReason::Breaker,
                detail: format!(
                    "{why}; counters: agent failures {}, retries {}, empty results {}",
                    counts.agent_failures, counts.retries, counts.empties
                ),
            }])?;
            self.cancel_all.cancel();
            self.stop = Some(DriveOutcome::Breaker(why));
        } else if let Some(budget) = self.ctx.budget
            && run.cost() > budget
        {
            let spent = run.cost();
            (self.progress)(Progress::Stopping(format!(
                "budget: spent {} of {}",
                crate::agent::price::usd(spent),
                crate::agent::price::usd(budget)
            )));
            self.store.append(vec![Event::RunStopped {
                run_id: self.ctx.run.clone(),
                reason: StopReason::Budget,
                detail: format!("spent ${spent:.4} of ${budget:.4}"),
            }])?;
            self.stop = Some(DriveOutcome::Budget { spent, budget });
        }
        Ok(())
    }

    /// Starts attempts for ready tasks, in plan order, up to the cap; a
    /// serial task waits for the others to drain and runs alone.
    fn dispatch(&mut self, run: &RunState) -> Result<(), RunError> {
        let ctx = self.ctx.clone();
        let serial = &ctx.serial;
        if self.live.keys().any(|t| serial.contains(t)) {
            return Ok(());
        }
        for task in schedule::ready_tasks(run, ctx.plan()) {
            if self.stop.is_some() {
                break;
            }
            if self.live_attempts() >= self.ctx.run_settings.cap || self.live.contains_key(&task) {
                continue;
            }
            if self.waits_for_report(run, &task) {
                continue;
            }
            let alone = serial.contains(&task);
            if alone && !self.live.is_empty() {
                // Nothing else starts meanwhile.
                break;
            }
            self.start_attempt(run, &task)?;
            if alone {
                break;
            }
        }
        Ok(())
    }

    /// Attempts running now: what the cap counts.
    fn live_attempts(&self) -> usize {
        self.live.values().map(Vec::len).sum()
    }

    /// Starts the task's next attempt, or every candidate of its next
    /// best-of-N round at once (when the cap has room for them all).
    fn start_attempt(&mut self, run: &RunState, task: &TaskId) -> Result<(), RunError> {
        let sub = self
            .ctx
            .plan()
            .subtask(task.as_str())
            .expect("ready tasks come from the plan")
            .clone();
        let chains = schedule::round_chains(&self.ctx.run_settings, run, &sub);
        let free = self
            .ctx
            .run_settings
            .cap
            .saturating_sub(self.live_attempts());
        if chains.len() > free {
            return Ok(());
        }
        // No attempt for a task none of whose agents can work: that is the
        // configuration's to fix, and the run stops for it.
        for chain in &chains {
            if let Err(why) = attempt::choose_agent(&self.ctx, chain) {
                return self.config_stop(why.to_string());
            }
        }
        let first = run.tasks.get(task).map_or(1, |t| t.next_attempt());
        let of = chains.len() as u32;
        for (i, chain) in chains.into_iter().enumerate() {
            let n = first + i as u32;
            let mut job = Attempt::next(&self.store, &self.ctx, run, task, n, self.exe.clone())?;
            if of > 1 {
                job.agents = chain;
                job.candidate = Some(Candidate { round: first, of });
            }
            (self.progress)(Progress::Dispatched {
                task: task.to_string(),
                attempt: n,
                agent: job.agents[0].clone(),
            });
            // Its own token, a child of the run's: cancelling the task
            // stops this attempt, cancelling the run stops every attempt.
            let cancel = self.cancel_all.child_token();
            let handle = self.running.spawn(attempt::run(job, cancel.clone()));
            self.tasks.insert(handle.id(), (task.clone(), n));
            self.live
                .entry(task.clone())
                .or_default()
                .push(RunningAttempt { n, cancel });
        }
        Ok(())
    }

    /// Judges every best-of-N round whose candidates have all ended (here,
    /// or before a crash): the best is chosen to land, the others are
    /// archived with why.
    fn judge_rounds(&mut self, run: &RunState) -> Result<bool, RunError> {
        let mut judged = false;
        for (task, t) in &run.tasks {
            if self.live.contains_key(task) {
                continue;
            }
            let Some((round, candidates)) = t.round_to_judge() else {
                continue;
            };
            let store = &self.store;
            let lines = |a: &crate::state::AttemptState| {
                let (base, Some(result)) = (a.base, a.result.as_ref().map(|r| r.commit)) else {
                    return 0;
                };
                store.changed_lines(base, result).unwrap_or(u64::MAX)
            };
            let ranking = schedule::rank(&candidates, &lines);
            let winner = ranking.first().filter(|r| r.passed).map(|r| r.attempt);
            crate::failpoint::hit("candidates.judging");
            self.store.append(vec![Event::CandidatesJudged {
                run_id: self.ctx.run.clone(),
                task: task.clone(),
                round,
                winner,
                ranking: ranking.clone(),
            }])?;
            (self.progress)(Progress::Judged {
                task: task.to_string(),
                winner,
                ranking,
            });
            judged = true;
        }
        Ok(judged)
    }

    /// Starts a landing when attempts wait in the queue and none runs.
    fn start_landing(&mut self, run: &RunState) {
        let may_land = !matches!(
            self.stop,
            Some(DriveOutcome::Interrupted | DriveOutcome::LandingRefused(_))
        );
        if may_land && self.landings.is_empty() && self.queued(run) && !self.stuck(run) {
            self.landing_set = waiting_set(run);
            self.landings
                .spawn((self.lander)(self.cancel_landings.child_token()));
        }
    }

    /// Whether the last landing could do nothing with exactly the attempts
    /// that wait now (their dependencies have not landed, say): another
    /// one would not either.
    fn stuck(&self, run: &RunState) -> bool {
        self.stuck_landing
            .as_ref()
            .is_some_and(|set| *set == waiting_set(run))
    }

    /// The result trees of the tasks that passed and wait in the queue,
    /// with their labels (`task #n`); the tree is empty for a result that
    /// changes no control path (nothing for a person to approve).
    fn passed_trees(&self, run: &RunState) -> Vec<(String, String)> {
        self.ctx
            .plan()
            .subtasks
            .iter()
            .filter_map(|sub| {
                let t = run.tasks.get(&sub.id)?;
                (t.status(super::schedule::retries_for(run, sub)) == TaskStatus::Passed)
                    .then(|| (sub.id.to_string(), t.current()))
            })
            .filter_map(|(task, a)| {
                let a = a?;
                let tree = Some(a)
                    .filter(|a| !a.control_paths().is_empty())
                    .and_then(|a| a.result.as_ref())
                    .map_or(String::new(), |r| r.tree.to_string());
                Some((format!("{task} #{}", a.n), tree))
            })
            .collect()
    }

    /// The passed results that change control paths and that no person
    /// has approved yet (`git orch approve --branch`), by label.
    fn awaiting_approval(&self, run: &RunState) -> Result<Vec<String>, RunError> {
        let held: Vec<(String, String)> = self
            .passed_trees(run)
            .into_iter()
            .filter(|(_, tree)| !tree.is_empty())
            .collect();
        if held.is_empty() {
            return Ok(Vec::new());
        }
        self.ctx.state.read(&self.store, |index| {
            let mut out = Vec::new();
            for (label, tree) in &held {
                if index.branch_approval_for_tree(tree)?.is_none() {
                    out.push(label.clone());
                }
            }
            Ok::<_, RunError>(out)
        })
    }

    /// Whether an attempt waits in the queue that may land now: passed,
    /// and not held for a person's approval of a change to control paths
    /// (that one lands by `git orch merge` once approved).
    fn queued(&self, run: &RunState) -> bool {
        let passed = self.passed_trees(run);
        let held_trees: Vec<&str> = passed.iter().map(|(_, tree)| tree.as_str()).collect();
        if held_trees.iter().any(|t| t.is_empty()) {
            return true;
        }
        if held_trees.is_empty() {
            return false;
        }
        // Only attempts that change control paths wait: any approved?
        self.ctx
            .state
            .read(&self.store, |index| {
                for tree in &held_trees {
                    if index.branch_approval_for_tree(tree)?.is_some() {
                        return Ok::<_, RunError>(true);
                    }
                }
                Ok(false)
            })
            .unwrap_or(true)
    }

    /// With nothing live: records the run finished when nothing can start
    /// and nothing waits to land, and archives it.
    fn finish_if_done(&mut self) -> Result<Option<DriveOutcome>, RunError> {
        let run = self.read_run()?;
        let plan = self.ctx.plan();
        let landable = self.queued(&run) && !self.stuck(&run);
        if landable || !schedule::ready_tasks(&run, plan).is_empty() {
            return Ok(None);
        }
        // An attempt whose end could not be recorded (the disk was full)
        // is open in the log though nothing runs it: it is recorded
        // abandoned, and its task dispatched again, before the run may
        // finish; a finished run never shows a live task.
        if abandon_orphans(&self.store, &run)? > 0 {
            return Ok(None);
        }
        // Results wait for a person: the run is not over. It stops with
        // every passed result in the queue, so that once they are
        // approved, running the plan again resumes it and lands them
        // instead of doing them all again.
        let held = self.awaiting_approval(&run)?;
        if !held.is_empty() {
            let detail = format!(
                "{} result{} change{} control paths and wait{} for a person's approval: {}",
                held.len(),
                if held.len() == 1 { "" } else { "s" },
                if held.len() == 1 { "s" } else { "" },
                if held.len() == 1 { "s" } else { "" },
                held.join(", ")
            );
            self.store.append(vec![Event::RunStopped {
                run_id: self.ctx.run.clone(),
                reason: StopReason::AwaitingApproval,
                detail: detail.clone(),
            }])?;
            let _ = self.ctx.state.save();
            return Ok(Some(DriveOutcome::AwaitingApproval(detail)));
        }
        let summary = summarize(&run, plan);
        self.store.append(vec![Event::RunFinished {
            run_id: self.ctx.run.clone(),
            summary: summary.clone(),
            closed: None,
        }])?;
        // The run is archived: its attempts' worktrees and branches go by
        // `[orch] cleanup` and the cleanup rules (never a dirty one, never
        // a commit nothing else keeps).
        let runs = self.ctx.state.read(&self.store, |index| {
            index.states(vec![self.ctx.run.clone()])
        })?;
        let _ =
            super::control::after_run(&self.store, &runs, &self.ctx.run, self.ctx.settings.cleanup);
        let _ = self.ctx.state.save();
        let complete = summary.done + summary.skipped == summary.tasks;
        Ok(Some(if complete {
            DriveOutcome::Finished(summary)
        } else {
            DriveOutcome::Incomplete(summary)
        }))
    }

    /// Waits for an attempt or a landing to end, a signal, or a second.
    async fn wait(&mut self, sigterm: &mut tokio::signal::unix::Signal) -> Result<(), RunError> {
        tokio::select! {
            // A `join_next` on an empty set returns at once: guard both.
            Some(done) = self.running.join_next_with_id(), if !self.running.is_empty() => {
                self.attempt_ended(done)?;
            }
            Some(done) = self.landings.join_next(), if !self.landings.is_empty() => {
                self.landing_ended(done)?;
            }
            Some(_) = self.cleanups.join_next(), if !self.cleanups.is_empty() => {}
            _ = tokio::signal::ctrl_c() => self.interrupt()?,
            _ = sigterm.recv() => self.interrupt()?,
            _ = tokio::time::sleep(Duration::from_millis(1000)) => {}
        }
        Ok(())
    }

    /// An attempt's task ended: normally with its end, or by panicking,
    /// which is recorded as the attempt's internal failure so the run goes
    /// on instead of waiting forever.
    fn attempt_ended(
        &mut self,
        done: Result<(tokio::task::Id, AttemptEnd), tokio::task::JoinError>,
    ) -> Result<(), RunError> {
        // Said after the attempt's end, which it explains.
        let mut config = None;
        let (task, n, outcome, reason) = match done {
            Ok((id, end)) => {
                self.tasks.remove(&id);
                match &end.failure {
                    Some(f) if f.class == FailureClass::Internal => {
                        self.internal_failure(&f.reason)?;
                    }
                    Some(f) if f.class == FailureClass::Config => {
                        self.internal = 0;
                        config = Some(f.reason.clone());
                    }
                    // Stopped by this driver: says nothing of git-orch's work.
                    Some(f) if f.class == FailureClass::Interrupted => {}
                    _ => self.internal = 0,
                }
                (end.task, end.n, end.outcome, end.failure.map(|f| f.reason))
            }
            Err(e) => {
                let Some((task, n)) = self.tasks.remove(&e.id()) else {
                    return Ok(());
                };
                let why = panic_message(e);
                let failure = Failure {
                    class: FailureClass::Internal,
                    reason: format!("git-orch failed inside the attempt: {why}"),
                };
                // Only if the attempt did not record its own end first.
                let open = self
                    .read_run()?
                    .tasks
                    .get(&task)
                    .and_then(|t| t.attempts.iter().find(|a| a.n == n))
                    .is_some_and(|a| a.is_open());
                if open {
                    self.store.append(vec![Event::attempt_finished(
                        &self.ctx.run,
                        &task,
                        n,
                        Outcome::Failed,
                        Some(failure.clone()),
                    )])?;
                }
                self.internal_failure(&failure.reason)?;
                (task, n, Outcome::Failed, Some(failure.reason))
            }
        };
        if let Some(live) = self.live.get_mut(&task) {
            live.retain(|l| l.n != n);
            if live.is_empty() {
                self.live.remove(&task);
            }
        }
        (self.progress)(Progress::Ended {
            task: task.to_string(),
            attempt: n,
            outcome,
            reason,
        });
        if let Some(why) = config {
            self.config_stop(why)?;
        }
        Ok(())
    }

    /// An attempt failed inside git-orch: a full disk stops the run at
    /// once, any other such failure once it repeats
    /// [`INTERNAL_IN_A_ROW`] times (or the breaker's own count, if lower).
    fn internal_failure(&mut self, reason: &str) -> Result<(), RunError> {
        self.internal += 1;
        if self.stop.is_some() {
            return Ok(());
        }
        let limit = INTERNAL_IN_A_ROW.min(self.ctx.run_settings.breaker_failures.max(1));
        let why = if disk_full(reason) {
            format!("the disk is full: {reason}")
        } else if self.internal >= limit {
            format!(
                "{} attempts in a row failed inside git-orch; the last: {reason}",
                self.internal
            )
        } else {
            return Ok(());
        };
        (self.progress)(Progress::Stopping(why.clone()));
        // Best effort: the disk may not take it; the outcome says it anyway.
        let _ = self.store.append(vec![Event::RunStopped {
            run_id: self.ctx.run.clone(),
            reason: StopReason::Breaker,
            detail: why.clone(),
        }]);
        self.cancel_all.cancel();
        self.cancel_landings.cancel();
        self.stop = Some(DriveOutcome::Broken(why));
        Ok(())
    }

    /// An agent cannot work as configured and no fallback can: no more
    /// attempts start (each would fail the same way), the ones running
    /// finish, what passed lands, and the run stops with why.
    fn config_stop(&mut self, why: String) -> Result<(), RunError> {
        if self.stop.is_some() {
            return Ok(());
        }
        (self.progress)(Progress::Stopping(
            "an agent cannot work as configured; no attempt is retried".into(),
        ));
        self.store.append(vec![Event::RunStopped {
            run_id: self.ctx.run.clone(),
            reason: StopReason::Config,
            detail: why.clone(),
        }])?;
        self.stop = Some(DriveOutcome::Config(why));
        Ok(())
    }

    fn landing_ended(
        &mut self,
        done: Result<Result<LandReport, LandError>, tokio::task::JoinError>,
    ) -> Result<(), RunError> {
        let report = match done {
            Ok(Ok(report)) => report,
            Ok(Err(e)) => return Err(RunError::Merge(e)),
            Err(e) => return Err(RunError::Merge(panic_message(e).into())),
        };
        let progressed =
            !(report.landed.is_empty() && report.failed.is_empty() && report.refused.is_none());
        self.stuck_landing = (!progressed).then(|| std::mem::take(&mut self.landing_set));
        let mut landed = Vec::new();
        for a in report.landed {
            if let Some((task, n)) = a.rsplit_once('/')
                && let Ok(task) = TaskId::new(task)
            {
                self.shown_landed.insert(task.clone());
                if let Ok(n) = n.parse::<u32>() {
                    landed.push((task, n));
                }
            }
            (self.progress)(Progress::Landed(a));
        }
        self.clean_landed(landed);
        for (attempt, reason) in report.failed {
            (self.progress)(Progress::LandingFailed { attempt, reason });
        }
        for problem in report.warnings {
            (self.progress)(Progress::Landing {
                problem,
                stops: false,
            });
        }
        if let Some(why) = report.refused {
            // The sentence only: the run's end repeats it with the hint.
            (self.progress)(Progress::Stopping(why.to_string()));
            if self.stop.is_none() {
                self.stop = Some(DriveOutcome::LandingRefused(why));
            }
        }
        Ok(())
    }

    /// Removes the worktrees and branches of attempts that just landed, by
    /// `[orch] cleanup` and the cleanup rules, while the run goes on (they
    /// are not needed again; the rest go when the run ends). Best effort:
    /// what is left, the run's end or `git orch cleanup` removes.
    fn clean_landed(&mut self, landed: Vec<(TaskId, u32)>) {
        if landed.is_empty() || self.ctx.settings.cleanup == crate::config::CleanupPolicy::Never {
            return;
        }
        let ctx = self.ctx.clone();
        self.cleanups.spawn_blocking(move || {
            let _ = Store::with_reused(&ctx.common_dir, |store| {
                let runs = ctx
                    .state
                    .read(store, |index| index.states(vec![ctx.run.clone()]))?;
                for (task, n) in landed {
                    let filter = super::control::CleanupFilter {
                        run: Some(ctx.run.clone()),
                        task: Some(task),
                        attempt: Some(n),
                        landed_only: true,
                        skip_prune: true,
                        ..Default::default()
                    };
                    super::control::cleanup(store, &runs, &filter, &|_| false)?;
                }
                Ok::<_, RunError>(())
            });
        });
    }

    /// Whether `task` depends on a landing the log has and the watcher was
    /// not told about yet (its landing task has not returned).
    fn waits_for_report(&self, run: &RunState, task: &TaskId) -> bool {
        if self.landings.is_empty() {
            return false;
        }
        let Some(sub) = self.ctx.plan().subtask(task.as_str()) else {
            return false;
        };
        sub.depends_on.iter().any(|d| {
            !self.shown_landed.contains(d)
                && run
                    .tasks
                    .get(d)
                    .and_then(|t| t.current())
                    .is_some_and(|a| a.landed.is_some())
        })
    }

    /// Takes in the attempts and landings that ended since the last look,
    /// without waiting.
    fn report_ended(&mut self) -> Result<(), RunError> {
        while let Some(done) = self.landings.try_join_next() {
            self.landing_ended(done)?;
        }
        while let Some(done) = self.running.try_join_next_with_id() {
            self.attempt_ended(done)?;
        }
        Ok(())
    }

    /// Ctrl-C or SIGTERM: stop every agent and record the stop.
    fn interrupt(&mut self) -> Result<(), RunError> {
        if matches!(self.stop, Some(DriveOutcome::Interrupted)) {
            return Ok(());
        }
        (self.progress)(Progress::Stopping(
            "interrupted: stopping agents (rerun the same command to resume)".into(),
        ));
        self.cancel_all.cancel();
        self.cancel_landings.cancel();
        self.store.append(vec![Event::RunStopped {
            run_id: self.ctx.run.clone(),
            reason: StopReason::Interrupted,
            detail: "Ctrl-C or SIGTERM".into(),
        }])?;
        self.stop = Some(DriveOutcome::Interrupted);
        Ok(())
    }
}

/// What a panicked task said.
fn panic_message(e: tokio::task::JoinError) -> String {
    match e.try_into_panic() {
        Ok(payload) => payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".into()),
        Err(e) => e.to_string(),
    }
}

/// The attempts that have passed and wait to land.
fn waiting_set(run: &RunState) -> Vec<(TaskId, u32)> {
    run.waiting_to_land()
        .map(|(t, a)| (t.clone(), a.n))
        .collect()
}

/// Tasks whose latest attempt has landed.
fn landed_tasks(run: &RunState) -> BTreeSet<TaskId> {
    run.tasks
        .iter()
        .filter(|(_, t)| t.current().is_some_and(|a| a.landed.is_some()))
        .map(|(id, _)| id.clone())
        .collect()
}

/// Stops and abandons the attempts this clone's dead driver left open.
/// Returns how many. Other clones' attempts are theirs (and their
/// workers' leases') to end.
fn abandon_orphans(store: &Store, run: &RunState) -> Result<usize, RunError> {
    let Some(me) = store.writer_id()? else {
        return Ok(0);
    };
    let mut events = Vec::new();
    for (task, a) in run.attempts() {
        if !a.is_open() || a.writer != me {
            continue;
        }
        // Its agent, setup or gate processes may still run (a driver killed
        // with SIGKILL does not take its children along). They carry the
        // attempt's ORCH_* variables, which identifies them even when the
        // pid was never recorded; a recycled pid never matches.
        let n = a.n.to_string();
        let groups: BTreeSet<u32> = crate::process::find_by_env(&[
            ("ORCH_RUN", run.id.as_str()),
            ("ORCH_TASK", task.as_str()),
            ("ORCH_ATTEMPT", &n),
        ])
        .into_iter()
        .map(|(_, pgid)| pgid)
        .collect();
        for pgid in groups {
            crate::process::stop_group_blocking(pgid, attempt::GRACE);
        }
        // A driver killed while adding the worktree can leave git's record
        // of it half written, which would block every later worktree.
        store.repair_half_made_worktree(std::path::Path::new(&a.worktree))?;
        // Its agent's git folder goes as any ended attempt's does: its
        // commits imported as data where they can be, the worktree handed
        // over (best effort: cleanup never reads that folder either).
        let paths = super::workspace::attempt_paths(store.common_dir(), &run.id, task, a);
        if let Some(tip) = store.ref_target(&paths.branch_ref)? {
            let base = a.base;
            let workspace = super::workspace::Workspace::recorded(
                store.common_dir(),
                &run.id,
                task,
                a,
                base,
                tip,
            );
            let _ = workspace.settle(store);
        }
        events.push(Event::attempt_finished(
            &run.id,
            task,
            a.n,
            Outcome::Abandoned,
            Some(Failure {
                class: FailureClass::Interrupted,
                reason: "its driver stopped before it ended (the worktree is kept)".into(),
            }),
        ));
    }
    let n = events.len();
    if n > 0 {
        store.append(events)?;
    }
    Ok(n)
}
