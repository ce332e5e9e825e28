//! The scheduler's decisions, as pure functions of a run's state and its
//! plan: which tasks may start, which can never start, when the circuit
//! breaker trips, what a retry is told, which agents to try, and where a
//! new attempt starts. The driver and the worker both act on them.

use crate::event::{FailureClass, Outcome, RunSettings};
use crate::gate::context::RetryContext;
use crate::ids::TaskId;
use crate::plan::Plan;
use crate::state::{RunState, TaskStatus};
use crate::store::Store;

use std::collections::BTreeSet;

use super::context::{RunContext, RunError};

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
            // A round's candidates beyond its first are not retries: they
            // were asked for at once (best of N).
            retries: run
                .attempts()
                .filter(|(_, a)| a.n > 1 && a.created_ms >= since_ms)
                .filter(|(_, a)| a.candidate.is_none_or(|c| c.round == a.n))
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
    let last = t.current()?;
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
        base: last.base.to_string(),
        commit: result.commit.to_string(),
        continued,
        diff: String::new(),
    });
    Some(ctx)
}

/// The failure part of the retry context of `task`'s next attempt.
fn failure_context(run: &RunState, task: &TaskId) -> Option<RetryContext> {
    let t = run.tasks.get(task)?;
    // Only the attempt right before the next one informs it.
    let last = t.current()?;
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
pub fn agent_chain(
    settings: &RunSettings,
    run: &RunState,
    task: &crate::plan::Subtask,
) -> Vec<String> {
    let first = task.agent.clone().unwrap_or_else(|| settings.agent.clone());
    let mut chain = vec![first];
    for f in &settings.fallback {
        if !chain.contains(f) {
            chain.push(f.clone());
        }
    }
    if let Some(last) = run.tasks.get(&task.id).and_then(|t| t.current())
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

/// The agent chains of the candidates the next round of `task` starts:
/// one chain per candidate. A subtask's own `candidates` list names one
/// agent per candidate (each keeps the run's fallbacks behind it); else
/// the run's `best_of` copies of the task's chain. Never more than the
/// cap, since every candidate is an attempt the cap counts. One chain is
/// an ordinary attempt.
pub fn round_chains(
    settings: &RunSettings,
    run: &RunState,
    task: &crate::plan::Subtask,
) -> Vec<Vec<String>> {
    let chain = agent_chain(settings, run, task);
    let mut chains: Vec<Vec<String>> = if task.candidates.is_empty() {
        vec![chain; settings.best_of.max(1) as usize]
    } else {
        task.candidates
            .iter()
            .map(|first| {
                let mut c = vec![first.clone()];
                c.extend(settings.fallback.iter().filter(|f| *f != first).cloned());
                c
            })
            .collect()
    };
    chains.truncate(settings.cap.max(1));
    chains
}

/// A round's candidates, best first: passed every blocking gate, then not
/// rejected by a reviewer, then the smaller diff, then the cheaper, then
/// the earlier. `lines` gives a candidate's changed lines (0 without a
/// result). Each says what decided its place ([`explain`]).
pub fn rank(
    round: &[&crate::state::AttemptState],
    lines: &dyn Fn(&crate::state::AttemptState) -> u64,
) -> Vec<crate::event::CandidateRank> {
    use crate::event::{CandidateRank, GateStatus};
    let mut ranked: Vec<CandidateRank> = round
        .iter()
        .map(|a| {
            let passed = a.outcome == Some(Outcome::Passed);
            let reviewer_ok = !a.verdicts.iter().any(|v| {
                v.details.get("reviewer").is_some()
                    && matches!(
                        v.status,
                        GateStatus::Fail | GateStatus::Warn | GateStatus::Error
                    )
            });
            CandidateRank {
                attempt: a.n,
                agent: a.agent.clone(),
                passed,
                reviewer_ok,
                changed_lines: if a.result.is_some() { lines(a) } else { 0 },
                cost_usd: a.agent_run.as_ref().and_then(|r| r.usage.cost_usd),
                decided_by: None,
                why: String::new(),
            }
        })
        .collect();
    ranked.sort_by(|x, y| {
        y.passed
            .cmp(&x.passed)
            .then(y.reviewer_ok.cmp(&x.reviewer_ok))
            .then(x.changed_lines.cmp(&y.changed_lines))
            .then(cost_of(x).total_cmp(&cost_of(y)))
            .then(x.attempt.cmp(&y.attempt))
    });
    explain(&mut ranked, &|n| {
        let a = round
            .iter()
            .find(|a| a.n == n)
            .expect("ranked from the round");
        match a.effective_failure() {
            Some(f) => format!("did not pass: {}", f.reason),
            None => format!(
                "did not pass ({})",
                a.outcome.map_or("open", |o| o.as_str())
            ),
        }
    });
    ranked
}

/// A candidate's cost as the ranking compares it: unknown counts as none.
fn cost_of(r: &crate::event::CandidateRank) -> f64 {
    r.cost_usd.unwrap_or(0.0)
}

/// The first criterion on which `a` and `b` differ, in the ranking's order.
fn criterion(
    a: &crate::event::CandidateRank,
    b: &crate::event::CandidateRank,
) -> crate::event::Criterion {
    use crate::event::Criterion;
    if a.passed != b.passed {
        Criterion::Gates
    } else if a.reviewer_ok != b.reviewer_ok {
        Criterion::Reviewer
    } else if a.changed_lines != b.changed_lines {
        Criterion::Lines
    } else if cost_of(a) != cost_of(b) {
        Criterion::Cost
    } else {
        Criterion::Order
    }
}

/// A cost for a reason: the amount, or that it is unknown.
fn cost_words(r: &crate::event::CandidateRank) -> String {
    match r.cost_usd {
        Some(c) => crate::agent::price::usd(c),
        None => "an unknown cost (counted as none)".to_owned(),
    }
}

/// Fills in, for `ranked` (best first), what decided each candidate's
/// place and why in words: the chosen one against the runner-up, every
/// other one against the chosen one, naming the criterion that decided a
/// tie (lines changed, then cost, then order). `failure` says why a
/// candidate did not pass.
fn explain(ranked: &mut [crate::event::CandidateRank], failure: &dyn Fn(u32) -> String) {
    use crate::event::Criterion;
    let best = ranked.first().filter(|r| r.passed).cloned();
    let runner_up = ranked.get(1).cloned();
    for r in ranked.iter_mut() {
        // The best did not pass, so none did.
        let Some(b) = &best else {
            r.decided_by = None;
            r.why = failure(r.attempt);
            continue;
        };
        if b.attempt == r.attempt {
            let rejected = if r.reviewer_ok {
                ""
            } else {
                " (reviewer rejected; no better)"
            };
            let lines = r.changed_lines;
            r.decided_by = runner_up.as_ref().map(|o| criterion(r, o));
            r.why = match (&runner_up, r.decided_by) {
                (Some(o), Some(Criterion::Gates)) => format!(
                    "chosen: the only one of the round that passed its gates{rejected}, {lines} changed line(s) (attempt {} did not pass)",
                    o.attempt
                ),
                (Some(o), Some(Criterion::Reviewer)) => format!(
                    "chosen: passed its gates and its reviewer, {lines} changed line(s) (attempt {}'s reviewer rejected it)",
                    o.attempt
                ),
                (Some(o), Some(Criterion::Lines)) => format!(
                    "chosen: passed its gates{rejected} with the smallest change, {lines} changed line(s) (attempt {}: {})",
                    o.attempt, o.changed_lines
                ),
                (Some(o), Some(Criterion::Cost)) => format!(
                    "chosen: passed its gates{rejected}; a tie on changed lines ({lines}) with attempt {} decided by cost: {} against {}",
                    o.attempt,
                    cost_words(r),
                    cost_words(o)
                ),
                (Some(o), Some(Criterion::Order)) => format!(
                    "chosen: passed its gates{rejected}; a tie on changed lines ({lines}) and cost ({}) with attempt {} decided by order: it came first",
                    cost_words(r),
                    o.attempt
                ),
                _ => format!("chosen: passed its gates{rejected}, {lines} changed line(s)"),
            };
            continue;
        }
        r.decided_by = Some(criterion(b, r));
        r.why = match r.decided_by {
            Some(Criterion::Gates) => failure(r.attempt),
            Some(Criterion::Reviewer) => format!(
                "passed, but the reviewer rejected it; attempt {} was chosen",
                b.attempt
            ),
            Some(Criterion::Lines) => format!(
                "passed with {} changed line(s); attempt {} did it with {}",
                r.changed_lines, b.attempt, b.changed_lines
            ),
            Some(Criterion::Cost) => format!(
                "passed with {} changed line(s), as attempt {} did; a tie decided by cost: attempt {} cost {} against {}",
                r.changed_lines,
                b.attempt,
                b.attempt,
                cost_words(b),
                cost_words(r)
            ),
            Some(Criterion::Order) | None => format!(
                "passed with {} changed line(s) at {}, as attempt {} did; a tie decided by order: attempt {} came first",
                r.changed_lines,
                cost_words(r),
                b.attempt,
                b.attempt
            ),
        };
    }
}

/// How many retries a task has: its own, else the run's.
pub fn retries_for(run: &RunState, sub: &crate::plan::Subtask) -> u32 {
    sub.retries.unwrap_or(run.settings.retries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{CandidateRank, Control, Criterion};
    use crate::state::history::{History, settings};

    /// A plan of `(id, depends_on, extra fields)` subtasks, as a user
    /// would write it.
    fn plan(tasks: &[(&str, &[&str], serde_json::Value)]) -> Plan {
        let subtasks: Vec<serde_json::Value> = tasks
            .iter()
            .map(|(id, deps, extra)| {
                let mut s = serde_json::json!({
                    "id": id, "title": format!("Task {id}"),
                    "owned_globs": [format!("src/{id}/**")],
                    "deliverable": "done", "verification": "true", "depends_on": deps,
                });
                if let (Some(s), Some(extra)) = (s.as_object_mut(), extra.as_object()) {
                    s.extend(extra.clone());
                }
                s
            })
            .collect();
        let plan = serde_json::json!({
            "version": 1, "id": "p", "instruction": "work", "subtasks": subtasks,
        });
        crate::plan::format::parse(plan.to_string().as_bytes()).expect("a valid plan")
    }

    fn none() -> serde_json::Value {
        serde_json::json!({})
    }

    fn ids(tasks: impl IntoIterator<Item = TaskId>) -> Vec<String> {
        tasks.into_iter().map(|t| t.to_string()).collect()
    }

    #[test]
    fn a_dead_dependency_blocks_every_task_behind_it_and_nothing_else() {
        let p = plan(&[
            ("a", &[], none()),
            ("b", &["a"], none()),
            ("c", &["b"], none()),
            ("d", &[], none()),
            ("e", &["d"], none()),
            ("f", &[], none()),
        ]);
        let mut h = History::started(settings());
        h.created("a", 1, "fake")
            .finished("a", 1, Outcome::Failed, Some(FailureClass::Gate));
        // One failure of a budget of one retry: `a` will be retried.
        assert!(blocked_tasks(&h.state(), &p).is_empty());
        h.created("a", 2, "fake")
            .finished("a", 2, Outcome::Failed, Some(FailureClass::Gate))
            .control("d", Control::Cancel);
        assert_eq!(ids(blocked_tasks(&h.state(), &p)), ["b", "c", "e"]);
        // A person's retry of `a` brings its dependents back.
        h.control("a", Control::Retry);
        assert_eq!(ids(blocked_tasks(&h.state(), &p)), ["e"]);
    }

    #[test]
    fn a_subtasks_own_retry_budget_decides_when_it_blocks_its_dependents() {
        let p = plan(&[
            ("a", &[], serde_json::json!({"retries": 0})),
            ("b", &["a"], none()),
        ]);
        let mut h = History::started(settings());
        h.created("a", 1, "fake")
            .finished("a", 1, Outcome::Failed, Some(FailureClass::Gate));
        assert_eq!(ids(blocked_tasks(&h.state(), &p)), ["b"]);
    }

    #[test]
    fn tasks_start_in_plan_order_once_their_dependencies_landed_or_were_skipped() {
        let p = plan(&[
            ("a", &[], none()),
            ("b", &["a"], none()),
            ("c", &["a", "d"], none()),
            ("d", &[], none()),
        ]);
        let mut h = History::started(settings());
        assert_eq!(ids(ready_tasks(&h.state(), &p)), ["a", "d"]);
        h.created("a", 1, "fake");
        assert_eq!(ids(ready_tasks(&h.state(), &p)), ["d"], "a runs");
        h.finished("a", 1, Outcome::Passed, None);
        // Passed is not landed: dependents build on what landed.
        assert_eq!(ids(ready_tasks(&h.state(), &p)), ["d"]);
        h.landed("a", 1);
        assert_eq!(ids(ready_tasks(&h.state(), &p)), ["b", "d"]);
        h.control("d", Control::Skip);
        assert_eq!(ids(ready_tasks(&h.state(), &p)), ["b", "c"]);
    }

    #[test]
    fn retrying_and_stopped_tasks_may_start_again_failed_ones_may_not() {
        let p = plan(&[("a", &[], none()), ("b", &[], none()), ("c", &[], none())]);
        let mut h = History::started(settings());
        h.created("a", 1, "fake")
            .finished("a", 1, Outcome::Failed, Some(FailureClass::Gate))
            .created("b", 1, "fake")
            .finished("b", 1, Outcome::Abandoned, Some(FailureClass::Interrupted))
            .created("c", 1, "fake")
            .finished("c", 1, Outcome::Failed, Some(FailureClass::Gate))
            .created("c", 2, "fake")
            .finished("c", 2, Outcome::Failed, Some(FailureClass::Gate));
        assert_eq!(ids(ready_tasks(&h.state(), &p)), ["a", "b"]);
    }

    #[test]
    fn the_breaker_counts_streaks_that_interruptions_neither_count_nor_break() {
        let mut h = History::started(settings());
        h.at(1_000).created("a", 1, "fake").finished(
            "a",
            1,
            Outcome::Failed,
            Some(FailureClass::AgentCrash),
        );
        let since = 2_000;
        h.at(since)
            .created("b", 1, "fake")
            .finished("b", 1, Outcome::Failed, Some(FailureClass::Timeout))
            .created("c", 1, "fake")
            .finished("c", 1, Outcome::Abandoned, Some(FailureClass::Interrupted))
            .created("d", 1, "fake")
            .finished("d", 1, Outcome::Failed, Some(FailureClass::Unavailable));
        let b = Breaker::count(&h.state(), since);
        // `a` ended before the driver took over: not counted.
        assert_eq!(b.agent_failures, 2);
        assert_eq!((b.retries, b.empties), (0, 0));
        h.created("e", 1, "fake")
            .finished("e", 1, Outcome::Failed, Some(FailureClass::Gate));
        assert_eq!(
            Breaker::count(&h.state(), since).agent_failures,
            0,
            "a failure of the work, not of the agent, ends the streak"
        );
    }

    #[test]
    fn the_breaker_counts_retries_but_not_the_candidates_of_a_round() {
        let mut h = History::started(settings());
        h.candidate("a", 1, 1, 3)
            .candidate("a", 2, 1, 3)
            .candidate("a", 3, 1, 3)
            .created("b", 1, "fake")
            .finished("b", 1, Outcome::Failed, Some(FailureClass::Empty))
            .created("b", 2, "fake")
            .finished("b", 2, Outcome::Failed, Some(FailureClass::Empty))
            .candidate("a", 4, 4, 2)
            .candidate("a", 5, 4, 2);
        let b = Breaker::count(&h.state(), 0);
        // b's second attempt and a's second round: two retries.
        assert_eq!(b.retries, 2);
        assert_eq!(b.empties, 2);
    }

    #[test]
    fn the_breaker_trips_at_its_limits_and_says_which() {
        let s = settings();
        let at = |agent_failures, retries, empties| Breaker {
            agent_failures,
            retries,
            empties,
        };
        assert_eq!(at(4, 19, 2).tripped(&s), None);
        assert_eq!(
            at(5, 0, 0).tripped(&s).as_deref(),
            Some("5 consecutive agent failures (limit 5)")
        );
        assert_eq!(
            at(0, 20, 0).tripped(&s).as_deref(),
            Some("20 retries (limit 20)")
        );
        assert_eq!(
            at(0, 0, 3).tripped(&s).as_deref(),
            Some("3 consecutive empty results (limit 3)")
        );
    }

    #[test]
    fn the_agent_chain_puts_the_subtasks_agent_first_and_an_unavailable_one_last() {
        let p = plan(&[("a", &[], serde_json::json!({"agent": "claude"}))]);
        let sub = p.subtask("a").expect("a");
        let mut s = settings();
        s.fallback = vec!["codex".into(), "claude".into(), "gemini".into()];
        let mut h = History::started(s.clone());
        assert_eq!(
            agent_chain(&s, &h.state(), sub),
            ["claude", "codex", "gemini"]
        );
        h.created("a", 1, "claude").finished(
            "a",
            1,
            Outcome::Failed,
            Some(FailureClass::Unavailable),
        );
        assert_eq!(
            agent_chain(&s, &h.state(), sub),
            ["codex", "gemini", "claude"]
        );
        // Alone, an unavailable agent is still the one to try.
        s.fallback.clear();
        assert_eq!(agent_chain(&s, &h.state(), sub), ["claude"]);
    }

    #[test]
    fn a_round_has_one_chain_per_candidate_and_never_more_than_the_cap() {
        let p = plan(&[
            ("a", &[], none()),
            (
                "b",
                &[],
                serde_json::json!({"candidates": ["claude", "codex"]}),
            ),
        ]);
        let mut s = settings();
        s.fallback = vec!["codex".into()];
        s.best_of = 3;
        let h = History::started(s.clone());
        let a = p.subtask("a").expect("a");
        let b = p.subtask("b").expect("b");
        // best_of 3 at cap 2: two candidates.
        assert_eq!(
            round_chains(&s, &h.state(), a),
            [["fake", "codex"], ["fake", "codex"]]
        );
        let chains = round_chains(&s, &h.state(), b);
        assert_eq!(chains, [vec!["claude", "codex"], vec!["codex"]]);
        s.best_of = 1;
        assert_eq!(round_chains(&s, &h.state(), a).len(), 1);
    }

    fn candidate(attempt: u32, passed: bool, lines: u64, cost: Option<f64>) -> CandidateRank {
        CandidateRank {
            attempt,
            agent: "fake".into(),
            passed,
            reviewer_ok: true,
            changed_lines: lines,
            cost_usd: cost,
            decided_by: None,
            why: String::new(),
        }
    }

    fn explained(mut ranked: Vec<CandidateRank>) -> Vec<CandidateRank> {
        explain(&mut ranked, &|n| {
            format!("did not pass: attempt {n} failed")
        });
        ranked
    }

    #[test]
    fn a_tie_on_lines_is_decided_by_cost_and_says_so() {
        let r = explained(vec![
            candidate(2, true, 3, Some(0.0021)),
            candidate(1, true, 3, Some(0.0045)),
        ]);
        assert_eq!(r[0].decided_by, Some(Criterion::Cost));
        assert_eq!(
            r[0].why,
            "chosen: passed its gates; a tie on changed lines (3) with attempt 1 decided by cost: $0.0021 against $0.0045"
        );
        assert_eq!(r[1].decided_by, Some(Criterion::Cost));
        assert_eq!(
            r[1].why,
            "passed with 3 changed line(s), as attempt 2 did; a tie decided by cost: attempt 2 cost $0.0021 against $0.0045"
        );
    }

    #[test]
    fn a_tie_on_lines_and_cost_is_decided_by_order() {
        let r = explained(vec![
            candidate(1, true, 3, Some(0.5)),
            candidate(2, true, 3, Some(0.5)),
        ]);
        assert_eq!(r[0].decided_by, Some(Criterion::Order));
        assert!(
            r[0].why.ends_with("decided by order: it came first"),
            "{}",
            r[0].why
        );
        assert!(r[0].why.contains("cost ($0.50)"), "{}", r[0].why);
        assert_eq!(
            r[1].why,
            "passed with 3 changed line(s) at $0.50, as attempt 1 did; a tie decided by order: attempt 1 came first"
        );
    }

    #[test]
    fn lines_gates_and_lone_winners_name_their_criterion() {
        let r = explained(vec![
            candidate(3, true, 1, None),
            candidate(2, true, 5, None),
            candidate(1, false, 0, None),
        ]);
        assert_eq!(r[0].decided_by, Some(Criterion::Lines));
        assert!(
            r[0].why
                .contains("with the smallest change, 1 changed line(s) (attempt 2: 5)"),
            "{}",
            r[0].why
        );
        assert_eq!(
            r[1].why,
            "passed with 5 changed line(s); attempt 3 did it with 1"
        );
        assert_eq!(r[2].decided_by, Some(Criterion::Gates));
        assert_eq!(r[2].why, "did not pass: attempt 1 failed");
        let alone = explained(vec![candidate(1, true, 2, None)]);
        assert_eq!(alone[0].decided_by, None);
        assert_eq!(alone[0].why, "chosen: passed its gates, 2 changed line(s)");
        let none = explained(vec![
            candidate(1, false, 0, None),
            candidate(2, false, 0, None),
        ]);
        assert!(
            none.iter()
                .all(|r| r.decided_by.is_none() && r.why.starts_with("did not pass"))
        );
        let only = explained(vec![
            candidate(2, true, 4, None),
            candidate(1, false, 0, None),
        ]);
        assert_eq!(only[0].decided_by, Some(Criterion::Gates));
        assert!(
            only[0]
                .why
                .starts_with("chosen: the only one of the round that passed"),
            "{}",
            only[0].why
        );
    }

    #[test]
    fn an_unknown_cost_counts_as_none_and_says_so() {
        let r = explained(vec![
            candidate(2, true, 3, None),
            candidate(1, true, 3, Some(0.01)),
        ]);
        assert_eq!(r[0].decided_by, Some(Criterion::Cost));
        assert!(
            r[0].why
                .contains("an unknown cost (counted as none) against $0.01"),
            "{}",
            r[0].why
        );
    }
}
