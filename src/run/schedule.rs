//! The scheduler's decisions, as pure functions of a run's state and its
//! plan: which tasks may start, which can never start, when the circuit
//! breaker trips, what a retry is told, which agents to try, and where a
//! new attempt starts. The driver and the worker both act on them.

use crate::event::{FailureClass, Outcome};
use crate::gate::context::RetryContext;
use crate::ids::TaskId;
use crate::plan::Plan;
use crate::state::{RunState, TaskStatus};
use crate::store::Store;

use std::collections::BTreeSet;

use super::{RunContext, RunError, retries_for};

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
/// every dependency done or skipped. (The cap and serial tasks are the
/// caller's business: it knows what runs.)
pub fn ready_tasks(run: &RunState, plan: &Plan) -> Vec<TaskId> {
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
        .filter(|s| status(&s.id).may_start())
        .filter(|s| {
            s.depends_on
                .iter()
                .all(|d| matches!(status(d), TaskStatus::Done | TaskStatus::Skipped))
        })
        .map(|s| s.id.clone())
        .collect()
}

/// The circuit breaker's counters since a driver took a run over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Breaker {
    /// Consecutive agent failures (crash, timeout, unavailable, internal).
    pub agent_failures: u32,
    /// Attempts after the first of their task.
    pub retries: u32,
    /// Consecutive results that changed nothing.
    pub empties: u32,
}

impl Breaker {
    /// The counters over the attempts ended since `since_ms`.
    pub fn count(run: &RunState, since_ms: i64) -> Self {
        let mut ended: Vec<_> = run
            .attempts()
            .filter(|(_, a)| a.finished_ms.is_some_and(|t| t >= since_ms))
            .map(|(_, a)| a)
            .collect();
        ended.sort_by_key(|a| a.finished_ms);
        let class = |a: &crate::state::AttemptState| a.failure.as_ref().map(|f| f.class);
        // Interruptions say nothing about agents or tasks: they neither
        // count nor break a streak.
        let consecutive = |pred: &dyn Fn(Option<FailureClass>) -> bool| {
            ended
                .iter()
                .rev()
                .filter(|a| class(a) != Some(FailureClass::Interrupted))
                .take_while(|a| pred(class(a)))
                .count() as u32
        };
        Self {
            agent_failures: consecutive(&|c| {
                matches!(
                    c,
                    Some(
                        FailureClass::AgentCrash
                            | FailureClass::Timeout
                            | FailureClass::Unavailable
                            | FailureClass::Internal
                    )
                )
            }),
            retries: run
                .attempts()
                .filter(|(_, a)| a.n > 1 && a.created_ms >= since_ms)
                .count() as u32,
            empties: consecutive(&|c| c == Some(FailureClass::Empty)),
        }
    }

    /// Why the breaker trips with these settings, if it does.
    pub fn tripped(&self, s: &crate::event::RunSettings) -> Option<String> {
        if self.agent_failures >= s.breaker_failures {
            Some(format!(
                "{} consecutive agent failures (limit {})",
                self.agent_failures, s.breaker_failures
            ))
        } else if self.retries >= s.breaker_retries {
            Some(format!(
                "{} retries (limit {})",
                self.retries, s.breaker_retries
            ))
        } else if self.empties >= s.breaker_empty {
            Some(format!(
                "{} consecutive empty results (limit {})",
                self.empties, s.breaker_empty
            ))
        } else {
            None
        }
    }
}

/// What the next attempt of `task` is told about the one before it, and
/// whether it continues from that attempt's result (see
/// [`crate::config::RetryFrom`]).
pub fn retry_context(
    run: &RunState,
    task: &TaskId,
    from: crate::config::RetryFrom,
) -> Option<RetryContext> {
    let mut ctx = failure_context(run, task)?;
    let t = run.tasks.get(task)?;
    let last = t.attempts.last()?;
    let Some(result) = &last.result else {
        return Some(ctx);
    };
    // Only work that passed scope and secrets is ever continued: anything
    // else must not become part of the next attempt's history.
    let clean = ["scope", "secrets"].iter().all(|g| {
        last.verdicts
            .iter()
            .find(|v| v.gate == *g)
            .is_some_and(|v| !v.blocks())
    });
    // A landing that failed (a conflict, or the integration gate with the
    // target's newer work) needs that newer work in the worktree: start
    // from the current target. An attempt that failed its own tests,
    // verification, placeholders or review continues where it was.
    let content = match (&last.landing_failure, &last.failure) {
        (Some(_), _) => false,
        (None, Some(f)) => matches!(f.class, FailureClass::Gate),
        (None, None) => false,
    };
    use crate::config::RetryFrom;
    let continued = clean
        && match from {
            RetryFrom::Base => false,
            RetryFrom::Auto => content,
            RetryFrom::Previous => {
                last.landing_failure.is_none()
                    && !matches!(
                        last.failure.as_ref().map(|f| f.class),
                        Some(FailureClass::Empty)
                    )
            }
        };
    ctx.previous = Some(crate::gate::context::PreviousWork {
        base: last.base.clone(),
        commit: result.commit.clone(),
        continued,
        diff: String::new(),
    });
    Some(ctx)
}

/// The failure part of the retry context of `task`'s next attempt.
fn failure_context(run: &RunState, task: &TaskId) -> Option<RetryContext> {
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

/// Where a new attempt starts: the target's tip when it contains the run's
/// base (so dependents build on what landed), else the run's base.
pub fn attempt_base(store: &Store, ctx: &RunContext) -> Result<crate::store::Oid, RunError> {
    let tip = store.ref_target(&format!("refs/heads/{}", ctx.target))?;
    Ok(match tip {
        Some(t) if store.is_ancestor(ctx.base, t)? => t,
        _ => ctx.base,
    })
}
