//! The status model: what a person is shown of a run, one state per task,
//! named the same in `status`, `status --watch`, `--json` and the live
//! views of `run`, `merge` and `worker`.
//!
//! Everything here is derived from a folded [`RunState`] and its plan, and
//! is pure: no I/O and no printing. The command line renders these values
//! as text, as JSON or as live rows; the live views add only what no record
//! holds yet (the step an attempt is at, a landing in progress), and take
//! their rows from here again whenever a task's state changes, so a final
//! screen never shows a row the log has moved past.

use serde::Serialize;

use crate::event::RunSummary;
use crate::ids::TaskId;
use crate::plan::Plan;
use crate::state::{RunState, TaskState, TaskStatus, Workspace};

/// Where a task stands, as shown everywhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Not started yet: waiting for its dependencies or for a free slot.
    Pending,
    /// Cannot start: a dependency failed or was cancelled.
    Blocked,
    /// An attempt is running.
    Running,
    /// The last attempt failed and budget is left: the next one is due.
    Retrying,
    /// Its attempt was stopped with the run; it starts again on resume.
    Stopped,
    /// Passed its gates; waits in the merge queue.
    Passed,
    /// The merge queue is landing it now (live views only: no record says
    /// so until it has landed).
    Landing,
    /// Landed on the target.
    Done,
    /// The retry budget is spent.
    Failed,
    Skipped,
    Cancelled,
}

impl Status {
    /// Every state, in the order summaries list them.
    pub const ALL: [Status; 11] = [
        Status::Done,
        Status::Landing,
        Status::Passed,
        Status::Running,
        Status::Retrying,
        Status::Stopped,
        Status::Pending,
        Status::Blocked,
        Status::Failed,
        Status::Skipped,
        Status::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Blocked => "blocked",
            Status::Running => "running",
            Status::Retrying => "retrying",
            Status::Stopped => "stopped",
            Status::Passed => "passed",
            Status::Landing => "landing",
            Status::Done => "done",
            Status::Failed => "failed",
            Status::Skipped => "skipped",
            Status::Cancelled => "cancelled",
        }
    }

    /// Whether time is running in this state (an agent, gates or a
    /// landing at work).
    pub fn is_live(self) -> bool {
        matches!(self, Status::Running | Status::Landing)
    }

    /// Whether something went wrong that a person may have to look at.
    pub fn is_trouble(self) -> bool {
        matches!(
            self,
            Status::Failed | Status::Blocked | Status::Retrying | Status::Stopped
        )
    }

    /// The shown state of a task whose scheduler status is `s`.
    pub fn of(s: TaskStatus, blocked: bool) -> Status {
        match s {
            TaskStatus::Pending if blocked => Status::Blocked,
            TaskStatus::Pending => Status::Pending,
            TaskStatus::Running => Status::Running,
            TaskStatus::Retrying => Status::Retrying,
            TaskStatus::Stopped => Status::Stopped,
            TaskStatus::Passed => Status::Passed,
            TaskStatus::Done => Status::Done,
            TaskStatus::Failed => Status::Failed,
            TaskStatus::Skipped => Status::Skipped,
            TaskStatus::Cancelled => Status::Cancelled,
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Tokens an agent reported, summed over attempts; `None` where no
/// attempt reported any (unknown, which is not zero).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Usage {
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cost_usd: Option<f64>,
}

impl Usage {
    /// Adds another known or unknown amount: unknown plus known is the
    /// known part (shown with the unknown count beside it).
    fn add(&mut self, other: Usage) {
        fn sum<T: std::ops::Add<Output = T>>(a: Option<T>, b: Option<T>) -> Option<T> {
            match (a, b) {
                (Some(a), Some(b)) => Some(a + b),
                (a, b) => a.or(b),
            }
        }
        self.input_tokens = sum(self.input_tokens, other.input_tokens);
        self.output_tokens = sum(self.output_tokens, other.output_tokens);
        self.cost_usd = sum(self.cost_usd, other.cost_usd);
    }

    /// Whether anything is known.
    pub fn is_known(&self) -> bool {
        self.input_tokens.is_some() || self.output_tokens.is_some() || self.cost_usd.is_some()
    }
}

/// What one task's attempts reported using.
fn task_usage(t: &TaskState) -> Usage {
    let mut total = Usage::default();
    for a in &t.attempts {
        let Some(run) = &a.agent_run else { continue };
        let u = &run.usage;
        // An adapter that cannot read usage reports zeros and no cost.
        let tokens_known = u.input_tokens > 0 || u.output_tokens > 0;
        total.add(Usage {
            input_tokens: tokens_known.then_some(u.input_tokens),
            output_tokens: tokens_known.then_some(u.output_tokens),
            cost_usd: u.cost_usd,
        });
    }
    total
}

/// One task, as shown.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskRow {
    pub task: TaskId,
    pub status: Status,
    /// The latest attempt's number.
    pub attempt: Option<u32>,
    /// Attempts made.
    pub attempts: usize,
    pub agent: Option<String>,
    /// Time the latest attempt took, or has taken so far.
    pub elapsed_ms: Option<i64>,
    #[serde(flatten)]
    pub usage: Usage,
    pub worktree: Option<String>,
    pub workspace: Option<Workspace>,
    pub port: Option<u16>,
    /// The deciding gate of the latest attempt: `name status`.
    pub gate: Option<String>,
    /// Why the task is not done, when it is not for a reason: the latest
    /// failure (a failed landing included), a blocking dependency, a
    /// person's skip or cancel.
    pub failure: Option<String>,
    /// The clone that made the latest attempt.
    pub writer: Option<String>,
}

impl TaskRow {
    /// The one line of detail a view shows after the columns: the reason
    /// when there is one, else the deciding gate.
    pub fn detail(&self) -> Option<&str> {
        self.failure.as_deref().or(self.gate.as_deref())
    }
}

/// The rows of `run`, in plan order, at wall time `now_ms`.
pub fn task_rows(run: &RunState, plan: &Plan, now_ms: i64) -> Vec<TaskRow> {
    let blocked = super::schedule::blocked_tasks(run, plan);
    let mut out = Vec::new();
    for sub in &plan.subtasks {
        let t = run.tasks.get(&sub.id);
        let retries = super::retries_for(run, sub);
        let is_blocked = blocked.contains(&sub.id);
        let status = Status::of(
            t.map_or(TaskStatus::Pending, |t| t.status(retries)),
            is_blocked,
        );
        let last = t.and_then(|t| t.attempts.last());
        let elapsed_ms = last.map(|a| {
            let start = a.started.map_or(a.created_ms, |s| s.time_ms);
            (a.finished_ms.unwrap_or(now_ms) - start).max(0)
        });
        let gate = last.and_then(|a| {
            a.verdicts
                .iter()
                .find(|v| v.blocks())
                .or(a.verdicts.last())
                .map(|v| format!("{} {}", v.gate, v.status.as_str()))
        });
        let failure = match status {
            Status::Blocked => {
                let deps: Vec<&str> = sub
                    .depends_on
                    .iter()
                    .filter(|d| {
                        run.tasks.get(*d).is_some_and(|t| {
                            plan.subtask(d.as_str()).is_some_and(|s| {
                                matches!(
                                    t.status(super::retries_for(run, s)),
                                    TaskStatus::Failed | TaskStatus::Cancelled
                                )
                            })
                        }) || blocked.contains(*d)
                    })
                    .map(|d| d.as_str())
                    .collect();
                Some(if deps.is_empty() {
                    "a dependency did not land".to_owned()
                } else {
                    format!("depends on {}, which will not land", deps.join(", "))
                })
            }
            Status::Skipped => Some("skipped by request".to_owned()),
            Status::Cancelled => Some("cancelled by request".to_owned()),
            Status::Done => None,
            _ => last.and_then(|a| a.effective_failure()).map(|f| {
                if status == Status::Failed {
                    format!("retry budget exhausted: {}", f.reason)
                } else {
                    f.reason.clone()
                }
            }),
        };
        let carried = t.and_then(|t| t.carried.as_ref());
        out.push(TaskRow {
            task: sub.id.clone(),
            status,
            attempt: last.map(|a| a.n),
            attempts: t.map_or(0, |t| t.attempts.len()),
            agent: last.map(|a| a.agent.clone()),
            elapsed_ms,
            usage: t.map(task_usage).unwrap_or_default(),
            worktree: last.map(|a| a.worktree.clone()),
            workspace: last.map(|a| a.workspace()),
            port: last.map(|a| a.port),
            gate: gate.or_else(|| carried.map(|c| format!("landed by run {}", c.run))),
            failure,
            writer: last.map(|a| a.writer.to_string()),
        });
    }
    out
}

/// Where a run as a whole stands.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum RunStanding {
    /// Being worked, or waiting for a driver or workers.
    Open,
    /// Stopped dispatching (breaker, budget, interrupt): it resumes when
    /// run again.
    Stopped { reason: String, detail: String },
    /// Every task has reached an end.
    Finished,
}

impl RunStanding {
    pub fn of(run: &RunState) -> RunStanding {
        match (&run.finished, &run.stopped) {
            (Some(_), _) => RunStanding::Finished,
            (None, Some((reason, detail))) => RunStanding::Stopped {
                reason: reason.as_str().to_owned(),
                detail: detail.clone(),
            },
            (None, None) => RunStanding::Open,
        }
    }

    /// `open`, `stopped (budget)`, `finished`.
    pub fn label(&self) -> String {
        match self {
            RunStanding::Open => "open".into(),
            RunStanding::Stopped { reason, .. } => format!("stopped ({reason})"),
            RunStanding::Finished => "finished".into(),
        }
    }
}

/// The exit code `git orch run` ends with for a run that has ended as
/// `run` says (DESIGN.md §4), or `None` while it goes on: 0 when every
/// task is done or skipped, 3 when some are not, 64 for a spent budget, 65
/// for the circuit breaker, 130 when interrupted.
pub fn exit_code(run: &RunState) -> Option<u8> {
    if let Some(s) = &run.finished {
        return Some(if is_complete(s) { 0 } else { 3 });
    }
    run.stopped.as_ref().map(|(reason, _)| match reason {
        crate::event::StopReason::Breaker => 65,
        crate::event::StopReason::Budget => 64,
        crate::event::StopReason::Interrupted => 130,
    })
}

/// Whether a finished run landed or skipped every task.
pub fn is_complete(s: &RunSummary) -> bool {
    s.done + s.skipped == s.tasks
}

/// How many tasks are in each state, in [`Status::ALL`] order, leaving out
/// states no task is in.
pub fn counts<'a>(states: impl IntoIterator<Item = &'a Status>) -> Vec<(Status, usize)> {
    let mut n = std::collections::HashMap::new();
    for s in states {
        *n.entry(*s).or_insert(0usize) += 1;
    }
    Status::ALL
        .iter()
        .filter_map(|s| n.get(s).map(|c| (*s, *c)))
        .collect()
}

/// A run's totals of usage, and how many tasks with attempts reported
/// nothing (their usage is unknown).
pub fn run_usage(rows: &[TaskRow]) -> (Usage, usize) {
    let mut total = Usage::default();
    let mut unknown = 0;
    for r in rows.iter().filter(|r| r.attempts > 0) {
        if r.usage.is_known() {
            total.add(r.usage);
        } else {
            unknown += 1;
        }
    }
    (total, unknown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_one_word_and_unique() {
        let names: std::collections::BTreeSet<&str> =
            Status::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(names.len(), Status::ALL.len());
        for s in Status::ALL {
            assert_eq!(
                serde_json::to_value(s).expect("serialises"),
                serde_json::Value::String(s.as_str().into())
            );
            assert!(!s.as_str().contains(' '));
        }
    }

    #[test]
    fn counts_follow_the_fixed_order() {
        let c = counts(&[Status::Pending, Status::Done, Status::Pending]);
        assert_eq!(c, vec![(Status::Done, 1), (Status::Pending, 2)]);
    }

    #[test]
    fn unknown_usage_stays_unknown_and_known_parts_add() {
        let mut u = Usage::default();
        u.add(Usage {
            input_tokens: Some(10),
            output_tokens: Some(2),
            cost_usd: None,
        });
        u.add(Usage {
            input_tokens: None,
            output_tokens: None,
            cost_usd: Some(0.5),
        });
        assert_eq!(u.input_tokens, Some(10));
        assert_eq!(u.cost_usd, Some(0.5));
        assert!(!Usage::default().is_known());
    }
}
