//! The driver: one process per run that dispatches ready tasks up to the
//! cap, in the plan's order, and watches them end.
//!
//! It holds the run's driver lock (`.git/orch/runs/<run>.lock`) for its whole
//! life, so two `git orch run` of one run cannot both dispatch. On start it
//! finds attempts a dead driver left open, stops their agents if they still
//! run (after checking the process really is that attempt's), and records
//! them abandoned; their tasks are dispatched again. Every decision is
//! taken from the log re-read after each change, so a `retry`, `skip` or
//! `cancel` recorded by another process is seen within a second.
//!
//! It stops dispatching when the circuit breaker trips (consecutive agent
//! failures, total retries, consecutive empty results), when the budget is
//! spent, or on Ctrl-C/SIGTERM; in-flight agents are stopped (TERM, then
//! KILL) except on budget, where they may finish.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::event::{Event, FailureClass, Outcome, RunSummary, StopReason};
use crate::gate::context::RetryContext;
use crate::ids::TaskId;
use crate::plan::Plan;
use crate::state::{RunState, TaskStatus};
use crate::store::{Store, lock};

use super::attempt::{self, End, Job};
use super::{RunContext, RunError, retries_for, summarize};

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
    LandingRefused(String),
}

/// What one landing of the merge queue did.
#[derive(Debug, Clone, Default)]
pub struct LandReport {
    /// `task/attempt` of every attempt that landed.
    pub landed: Vec<String>,
    /// `task/attempt` and why, of every attempt sent back.
    pub failed: Vec<(String, String)>,
    /// Set when the landing was refused (a dirty checkout of the target).
    pub refused: Option<String>,
    /// Integration gate commands that actually ran.
    pub gate_runs: usize,
}

/// Lands what waits in the run's merge queue; supplied by the layer above
/// (the merge queue), so that dispatch and landing share one driver.
pub type Lander = std::sync::Arc<
    dyn Fn(
            watch::Receiver<bool>,
        ) -> std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<LandReport, String>> + Send>,
        > + Send
        + Sync,
>;

/// Something worth showing while a run goes on.
#[derive(Debug, Clone)]
pub enum Progress {
    Resumed {
        run: String,
        abandoned: usize,
    },
    Dispatched {
        task: String,
        attempt: u32,
        agent: String,
    },
    Ended {
        task: String,
        attempt: u32,
        outcome: Outcome,
        reason: Option<String>,
    },
    /// An attempt moved on to a step: `setup`, `agent NAME`, `gate NAME`.
    /// Attempts send it through [`super::RunContext::on_step`], from their
    /// own tasks, not through `drive`'s callback.
    Step {
        task: String,
        attempt: u32,
        step: String,
    },
    Stopping(String),
    Landed(String),
    LandingFailed {
        attempt: String,
        reason: String,
    },
}

/// Tasks whose dependencies can never be satisfied (a dependency failed,
/// was cancelled, or is itself blocked).
pub fn blocked_tasks(run: &RunState, plan: &Plan) -> BTreeSet<TaskId> {
    let mut blocked = BTreeSet::new();
    loop {
        let before = blocked.len();
        for s in &plan.subtasks {
            let dead = s.depends_on.iter().any(|d| {
                blocked.contains(d)
                    || run.tasks.get(d).is_some_and(|t| {
                        let sub = plan.subtask(d.as_str());
                        let retries = sub.map_or(run.settings.retries, |x| retries_for(run, x));
                        matches!(
                            t.status(retries),
                            TaskStatus::Failed | TaskStatus::Cancelled
                        )
                    })
            });
            if dead {
                blocked.insert(s.id.clone());
            }
        }
        if blocked.len() == before {
            return blocked;
        }
    }
}

/// Tasks that may start now, in plan order: not running, not ended, with
/// every dependency done or skipped. `running` is how many attempts are
/// live; `serial_running` whether one of them must run alone.
pub fn ready_tasks(
    run: &RunState,
    plan: &Plan,
    running: usize,
    serial_running: bool,
) -> Vec<TaskId> {
    let _ = running;
    if serial_running {
        return Vec::new();
    }
    let status = |id: &TaskId| {
        let sub = plan.subtask(id.as_str());
        let retries = sub.map_or(run.settings.retries, |s| retries_for(run, s));
        run.tasks
            .get(id)
            .map(|t| t.status(retries))
            .unwrap_or(TaskStatus::Pending)
    };
    plan.subtasks
        .iter()
        .filter(|s| matches!(status(&s.id), TaskStatus::Pending | TaskStatus::Retrying))
        .filter(|s| {
            s.depends_on
                .iter()
                .all(|d| matches!(status(d), TaskStatus::Done | TaskStatus::Skipped))
        })
        .map(|s| s.id.clone())
        .collect()
}

/// Breaker counters over the attempts ended since `since_ms`.
fn breaker_counts(run: &RunState, since_ms: i64) -> (u32, u32, u32) {
    let mut ended: Vec<_> = run
        .attempts()
        .filter(|(_, a)| a.finished_ms.is_some_and(|t| t >= since_ms))
        .map(|(_, a)| a)
        .collect();
    ended.sort_by_key(|a| a.finished_ms);
    let class = |a: &crate::state::AttemptState| a.failure.as_ref().map(|f| f.class);
    // Interruptions say nothing about agents or tasks: they neither count
    // nor break a streak.
    let consecutive = |pred: &dyn Fn(Option<FailureClass>) -> bool| {
        ended
            .iter()
            .rev()
            .filter(|a| class(a) != Some(FailureClass::Interrupted))
            .take_while(|a| pred(class(a)))
            .count() as u32
    };
    let agent_failures = consecutive(&|c| {
        matches!(
            c,
            Some(
                FailureClass::AgentCrash
                    | FailureClass::Timeout
                    | FailureClass::Unavailable
                    | FailureClass::Internal
            )
        )
    });
    let empties = consecutive(&|c| c == Some(FailureClass::Empty));
    let retries = run
        .attempts()
        .filter(|(_, a)| a.n > 1 && a.created_ms >= since_ms)
        .count() as u32;
    (agent_failures, retries, empties)
}

/// Stops and abandons attempts a dead driver left open. Returns how many.
fn abandon_orphans(store: &Store, run: &RunState) -> Result<usize, RunError> {
    let mut events = Vec::new();
    for (task, a) in run.attempts() {
        if !a.is_open() {
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
        events.push(Event::AttemptFinished {
            run_id: run.id.clone(),
            task: task.clone(),
            attempt: a.n,
            outcome: Outcome::Abandoned,
            failure: Some(crate::event::Failure {
                class: FailureClass::Interrupted,
                reason: "its driver stopped before it ended (the worktree is kept)".into(),
            }),
        });
    }
    let n = events.len();
    if n > 0 {
        store.append(events)?;
    }
    Ok(n)
}

pub fn retry_context(run: &RunState, task: &TaskId) -> Option<RetryContext> {
    let t = run.tasks.get(task)?;
    // Only the attempt right before the next one informs it.
    let last = t.attempts.last()?;
    if let Some(f) = &last.landing_failure {
        let mut ctx = RetryContext::new(task.as_str(), last.n, f, &last.landing_verdicts);
        if !last.landing_conflicts.is_empty() {
            ctx.failures = vec![crate::gate::context::ContextFailure {
                gate: "integration".into(),
                command: None,
                summary: f.reason.clone(),
                tail: last.landing_hunks.join("\n"),
                failing_tests: Vec::new(),
                out_of_scope_paths: Vec::new(),
                secrets: Vec::new(),
                conflicts: last.landing_conflicts.clone(),
                findings: Vec::new(),
            }];
        }
        return Some(ctx);
    }
    if last.outcome != Some(Outcome::Failed) {
        return None;
    }
    let failure = last.failure.clone()?;
    Some(RetryContext::new(
        task.as_str(),
        last.n,
        &failure,
        &last.verdicts,
    ))
}

/// The agents to try for the next attempt of `task`: its own or the run's,
/// then the fallbacks; an agent the last attempt found unavailable goes
/// last.
pub fn agent_chain(ctx: &RunContext, run: &RunState, task: &crate::plan::Subtask) -> Vec<String> {
    let first = task
        .agent
        .clone()
        .unwrap_or_else(|| ctx.run_settings.agent.clone());
    let mut chain = vec![first];
    for f in &ctx.run_settings.fallback {
        if !chain.contains(f) {
            chain.push(f.clone());
        }
    }
    if let Some(last) = run.tasks.get(&task.id).and_then(|t| t.attempts.last())
        && last
            .failure
            .as_ref()
            .is_some_and(|f| f.class == FailureClass::Unavailable)
        && chain.len() > 1
        && let Some(pos) = chain.iter().position(|a| *a == last.agent)
    {
        let a = chain.remove(pos);
        chain.push(a);
    }
    chain
}

/// Drives `ctx`'s run until every task has ended or it must stop.
pub async fn drive(
    ctx: RunContext,
    progress: &(dyn Fn(Progress) + Sync),
    lander: Lander,
) -> Result<DriveOutcome, RunError> {
    let serial = ctx.serial.clone();
    let store = Store::open(&ctx.common_dir)?;
    let lock_path = super::driver_lock_path(&store, &ctx.run);
    let _driver_lock = match lock::try_acquire(&lock_path, &format!("driving run {}", ctx.run))? {
        Ok(g) => g,
        Err(holder) => {
            return Err(RunError::Busy {
                run: ctx.run.clone(),
                holder,
            });
        }
    };
    let start = store.append(vec![Event::RunResumed {
        run_id: ctx.run.clone(),
        pid: std::process::id(),
        host: super::host(),
    }])?;
    let since_ms = start.first().map_or(0, |r| r.time_ms);
    let state = ctx.state.clone();
    let run = state
        .read(&store, |index| {
            Ok::<_, RunError>(index.run(&ctx.run)?.cloned())
        })?
        .ok_or_else(|| RunError::Config(format!("run {} is not in the log", ctx.run)))?;
    let abandoned = abandon_orphans(&store, &run)?;
    progress(Progress::Resumed {
        run: ctx.run.to_string(),
        abandoned,
    });
    let exe = std::env::current_exe().unwrap_or_else(|_| "git-orch".into());
    let ctx = Arc::new(ctx);
    let (cancel_all, _) = watch::channel(false);
    let mut per_task: HashMap<TaskId, watch::Sender<bool>> = HashMap::new();
    let mut running: JoinSet<End> = JoinSet::new();
    let mut landings: JoinSet<Result<LandReport, String>> = JoinSet::new();
    let mut live: BTreeSet<TaskId> = BTreeSet::new();
    let mut stop: Option<DriveOutcome> = None;
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| RunError::Config(format!("cannot watch SIGTERM: {e}")))?;
    let plan = ctx.plan().clone();
    loop {
        let run = state
            .read(&store, |index| {
                Ok::<_, RunError>(index.run(&ctx.run)?.cloned())
            })?
            .ok_or_else(|| RunError::Config(format!("run {} vanished from the log", ctx.run)))?;
        let run = &run;
        // Cancel requests for live attempts.
        for task in &live {
            if run
                .tasks
                .get(task)
                .is_some_and(|t| t.control == Some(crate::event::Control::Cancel))
                && let Some(tx) = per_task.get(task)
            {
                let _ = tx.send(true);
            }
        }
        if stop.is_none() {
            let (fails, retries, empties) = breaker_counts(run, since_ms);
            let s = &ctx.run_settings;
            let tripped = if fails >= s.breaker_failures {
                Some(format!(
                    "{fails} consecutive agent failures (limit {})",
                    s.breaker_failures
                ))
            } else if retries >= s.breaker_retries {
                Some(format!("{retries} retries (limit {})", s.breaker_retries))
            } else if empties >= s.breaker_empty {
                Some(format!(
                    "{empties} consecutive empty results (limit {})",
                    s.breaker_empty
                ))
            } else {
                None
            };
            if let Some(why) = tripped {
                progress(Progress::Stopping(format!("circuit breaker: {why}")));
                store.append(vec![Event::RunStopped {
                    run_id: ctx.run.clone(),
                    reason: StopReason::Breaker,
                    detail: format!(
                        "{why}; counters: agent failures {fails}, retries {retries}, empty results {empties}"
                    ),
                }])?;
                let _ = cancel_all.send(true);
                stop = Some(DriveOutcome::Breaker(why));
            } else if let Some(budget) = ctx.budget
                && run.cost() > budget
            {
                let spent = run.cost();
                progress(Progress::Stopping(format!(
                    "budget: spent ${spent:.2} of ${budget:.2}"
                )));
                store.append(vec![Event::RunStopped {
                    run_id: ctx.run.clone(),
                    reason: StopReason::Budget,
                    detail: format!("spent ${spent:.4} of ${budget:.4}"),
                }])?;
                stop = Some(DriveOutcome::Budget { spent, budget });
            }
        }
        if stop.is_none() {
            let serial_running = live.iter().any(|t| serial.contains(t));
            for task in ready_tasks(run, &plan, live.len(), serial_running) {
                if live.len() >= ctx.run_settings.cap || live.contains(&task) {
                    continue;
                }
                if serial.contains(&task) && !live.is_empty() {
                    // A serial task waits for the others to drain, and
                    // nothing else starts meanwhile.
                    break;
                }
                let sub = plan
                    .subtask(task.as_str())
                    .expect("ready tasks come from the plan")
                    .clone();
                let n = run.tasks.get(&task).map_or(1, |t| t.next_attempt());
                let gates = crate::gate::stack(&ctx.settings, &plan, &sub);
                let job = Job {
                    base: attempt_base(&store, &ctx)?,
                    ctx: ctx.clone(),
                    agents: agent_chain(&ctx, run, &sub),
                    retry: retry_context(run, &task),
                    task: sub,
                    n,
                    gates,
                    exe: exe.clone(),
                };
                progress(Progress::Dispatched {
                    task: task.to_string(),
                    attempt: n,
                    agent: job.agents[0].clone(),
                });
                let (tx, mut rx) = watch::channel(false);
                let mut all = cancel_all.subscribe();
                // One receiver per attempt that fires on either its own
                // cancel or the run-wide one.
                let (merged_tx, merged_rx) = watch::channel(false);
                tokio::spawn(async move {
                    tokio::select! {
                        _ = async { while !*rx.borrow_and_update() { if rx.changed().await.is_err() { std::future::pending::<()>().await } } } => {}
                        _ = async { while !*all.borrow_and_update() { if all.changed().await.is_err() { std::future::pending::<()>().await } } } => {}
                    }
                    let _ = merged_tx.send(true);
                });
                per_task.insert(task.clone(), tx);
                live.insert(task.clone());
                running.spawn(attempt::run(job, merged_rx));
                if serial.contains(&task) {
                    break;
                }
            }
        }
        // The merge queue: one landing at a time, whenever attempts wait.
        let queued = plan.subtasks.iter().any(|sub| {
            run.tasks
                .get(&sub.id)
                .is_some_and(|t| t.status(super::retries_for(run, sub)) == TaskStatus::Passed)
        });
        let may_land = !matches!(
            stop,
            Some(DriveOutcome::Interrupted | DriveOutcome::LandingRefused(_))
        );
        if queued && may_land && landings.is_empty() {
            landings.spawn(lander(cancel_all.subscribe()));
        }
        if live.is_empty() && landings.is_empty() {
            if let Some(outcome) = stop.take() {
                return Ok(outcome);
            }
            let run = state
                .read(&store, |index| {
                    Ok::<_, RunError>(index.run(&ctx.run)?.cloned())
                })?
                .expect("the run was read above");
            let run = &run;
            let queued = plan.subtasks.iter().any(|sub| {
                run.tasks
                    .get(&sub.id)
                    .is_some_and(|t| t.status(super::retries_for(run, sub)) == TaskStatus::Passed)
            });
            if !queued && ready_tasks(run, &plan, 0, false).is_empty() {
                let summary = summarize(run, &plan);
                store.append(vec![Event::RunFinished {
                    run_id: ctx.run.clone(),
                    summary: summary.clone(),
                }])?;
                // The run is archived: landed attempts' worktrees go, by the
                // cleanup rules (never a dirty one).
                let runs = state.read(&store, |index| index.states(vec![ctx.run.clone()]))?;
                let _ = state.save();
                let filter = super::control::CleanupFilter {
                    run: Some(ctx.run.clone()),
                    landed_only: true,
                    ..Default::default()
                };
                let _ = super::control::cleanup(&store, &runs, &filter, &|_| false);
                let complete = summary.done + summary.skipped == summary.tasks;
                return Ok(if complete {
                    DriveOutcome::Finished(summary)
                } else {
                    DriveOutcome::Incomplete(summary)
                });
            }
            continue;
        }
        tokio::select! {
            // A `join_next` on an empty set returns at once: guard both.
            done = running.join_next(), if !running.is_empty() => {
                if let Some(Ok(end)) = done {
                    live.remove(&end.task);
                    per_task.remove(&end.task);
                    progress(Progress::Ended {
                        task: end.task.to_string(),
                        attempt: end.n,
                        outcome: end.outcome,
                        reason: end.failure.map(|f| f.reason),
                    });
                }
            }
            Some(done) = landings.join_next(), if !landings.is_empty() => {
                match done.expect("a landing does not panic") {
                    Ok(report) => {
                        for a in report.landed {
                            progress(Progress::Landed(a));
                        }
                        for (attempt, reason) in report.failed {
                            progress(Progress::LandingFailed { attempt, reason });
                        }
                        if let Some(why) = report.refused {
                            progress(Progress::Stopping(why.lines().next().unwrap_or_default().to_owned()));
                            if stop.is_none() {
                                stop = Some(DriveOutcome::LandingRefused(why));
                            }
                        }
                    }
                    Err(e) => return Err(RunError::Config(format!("the merge queue failed: {e}"))),
                }
            }
            _ = tokio::signal::ctrl_c() => interrupt(&store, &ctx, &cancel_all, &mut stop, progress)?,
            _ = sigterm.recv() => interrupt(&store, &ctx, &cancel_all, &mut stop, progress)?,
            _ = tokio::time::sleep(Duration::from_millis(1000)) => {}
        }
    }
}

/// Where a new attempt starts: the target's tip when it contains the run's
/// base (so dependents build on what landed), else the run's base.
pub fn attempt_base(store: &Store, ctx: &RunContext) -> Result<crate::store::Oid, RunError> {
    let tip = store.ref_target(&format!("refs/heads/{}", ctx.target))?;
    Ok(match tip {
        Some(t) if store.is_ancestor(ctx.base, t)? => t,
        _ => ctx.base,
    })
}

fn interrupt(
    store: &Store,
    ctx: &RunContext,
    cancel_all: &watch::Sender<bool>,
    stop: &mut Option<DriveOutcome>,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<(), RunError> {
    if matches!(stop, Some(DriveOutcome::Interrupted)) {
        return Ok(());
    }
    progress(Progress::Stopping(
        "interrupted: stopping agents (rerun the same command to resume)".into(),
    ));
    let _ = cancel_all.send(true);
    store.append(vec![Event::RunStopped {
        run_id: ctx.run.clone(),
        reason: StopReason::Interrupted,
        detail: "Ctrl-C or SIGTERM".into(),
    }])?;
    *stop = Some(DriveOutcome::Interrupted);
    Ok(())
}
