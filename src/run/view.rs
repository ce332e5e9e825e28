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
use crate::state::{AttemptState, RunState, TaskStatus, Workspace};

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

/// Where a cost comes from, summed over attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CostKind {
    /// No agent ran.
    None,
    /// Agents ran and none reported a cost (nor has its model a price):
    /// unknown, which is not $0.00.
    Unknown,
    /// Some agents reported a cost or had one estimated, others not.
    Partial,
    /// Every cost is known, some estimated from the price table.
    Estimated,
    /// Every cost was reported by the agents.
    Reported,
}

/// Tokens and cost agents reported (or that were estimated), summed over
/// attempts: the same numbers for a task, a run, the table and JSON.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    /// The known part of the cost; `None` when it is unknown.
    pub cost_usd: Option<f64>,
    pub cost: CostKind,
    /// Attempts whose agent ran, and those that reported no tokens.
    #[serde(skip)]
    pub runs: usize,
    #[serde(skip)]
    pub runs_without_tokens: usize,
}

impl Default for Usage {
    fn default() -> Self {
        Usage {
            input_tokens: 0,
            output_tokens: 0,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            cost_usd: None,
            cost: CostKind::None,
            runs: 0,
            runs_without_tokens: 0,
        }
    }
}

/// The usage of `attempts`.
pub fn usage<'a>(attempts: impl IntoIterator<Item = &'a AttemptState>) -> Usage {
    let mut u = Usage::default();
    let (mut known, mut unknown, mut estimated) = (0usize, 0usize, 0usize);
    let mut cost = 0.0;
    for run in attempts.into_iter().filter_map(|a| a.agent_run.as_ref()) {
        let r = &run.usage;
        u.runs += 1;
        if r.input_tokens == 0 && r.output_tokens == 0 {
            u.runs_without_tokens += 1;
        }
        u.input_tokens += r.input_tokens;
        u.output_tokens += r.output_tokens;
        u.cache_read_tokens += r.cache_read_tokens;
        u.cache_write_tokens += r.cache_write_tokens;
        match r.cost_usd {
            Some(c) => {
                known += 1;
                cost += c;
                if r.cost_source.as_deref() == Some("estimated") {
                    estimated += 1;
                }
            }
            None => unknown += 1,
        }
    }
    u.cost = match (known, unknown, estimated) {
        (0, 0, _) => CostKind::None,
        (0, _, _) => CostKind::Unknown,
        (_, n, _) if n > 0 => CostKind::Partial,
        (_, _, e) if e > 0 => CostKind::Estimated,
        _ => CostKind::Reported,
    };
    // A number only where some agent reported or was priced: nothing
    // reported yet is not $0.00. (`sum` of no floats would be -0.0.)
    u.cost_usd = matches!(
        u.cost,
        CostKind::Reported | CostKind::Estimated | CostKind::Partial
    )
    .then_some(0.0 + cost);
    u
}

/// A token count for people: `345`, `12.3k`, `1.5M`.
fn short(n: u64) -> String {
    match n {
        0..=999 => n.to_string(),
        1_000..=999_999 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

impl Usage {
    /// A cost for people: `$0.12`, `~$0.12` (estimated), `$0.12+?` (some
    /// unknown), `unknown`.
    pub fn cost_text(&self) -> String {
        let usd = crate::agent::price::usd(self.cost_usd.unwrap_or(0.0));
        match self.cost {
            CostKind::Unknown => "unknown".to_owned(),
            CostKind::None => "none reported yet".to_owned(),
            CostKind::Partial => format!("{usd}+?"),
            CostKind::Estimated => format!("~{usd}"),
            CostKind::Reported => usd,
        }
    }

    /// Tokens for people: `12.3k in, 1.1k out`, or `tokens unknown` when
    /// agents ran and none reported any.
    pub fn tokens_text(&self) -> String {
        if self.runs == 0 {
            return "no tokens reported yet".to_owned();
        }
        if self.runs_without_tokens == self.runs {
            return "tokens unknown".to_owned();
        }
        format!(
            "{} in, {} out",
            short(self.input_tokens),
            short(self.output_tokens)
        )
    }

    /// Tokens in a table cell: `12.3k/1.1k` (in/out), `unknown` when the
    /// agents reported none, `-` when no agent ran.
    pub fn tokens_cell(&self) -> String {
        if self.runs == 0 {
            "-".to_owned()
        } else if self.runs_without_tokens == self.runs {
            "unknown".to_owned()
        } else {
            format!("{}/{}", short(self.input_tokens), short(self.output_tokens))
        }
    }

    /// `cost $0.12, 12.3k in, 1.1k out`: a run's or a task's usage in one
    /// phrase.
    pub fn text(&self) -> String {
        format!("{}, {}", self.cost_text(), self.tokens_text())
    }
}

/// One attempt's usage as its agent recorded it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttemptUsage {
    pub attempt: u32,
    pub agent: String,
    pub usage: crate::event::AgentUsage,
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
    /// The task's known cost; `None` when unknown (not $0.00).
    pub cost_usd: Option<f64>,
    /// Tokens and cost over every attempt of the task.
    pub usage: Usage,
    /// Each attempt's usage as its agent recorded it.
    pub attempt_usage: Vec<AttemptUsage>,
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
    /// The candidates of the task's latest best-of-N round, if it ran one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub candidates: Vec<CandidateRow>,
    /// Every attempt, for `status --attempts` (the JSON has their usage
    /// in `attempt_usage`).
    #[serde(skip)]
    pub attempt_rows: Vec<AttemptRow>,
}

/// One attempt of a task, as `status --attempts` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptRow {
    pub attempt: u32,
    pub agent: String,
    /// `running`, `landed`, `chosen`, `archived`, or its outcome.
    pub state: String,
    pub elapsed_ms: Option<i64>,
    /// Its own tokens and cost.
    pub usage: Usage,
    /// Why it did not pass, or where its best-of-N round put it.
    pub detail: Option<String>,
}

/// Every attempt of `t`, oldest first, at wall time `now_ms`.
fn attempt_rows(t: &crate::state::TaskState, now_ms: i64) -> Vec<AttemptRow> {
    use crate::state::Judged;
    t.attempts
        .iter()
        .map(|a| {
            let state = match (&a.judged, a.outcome) {
                _ if a.landed.is_some() => "landed",
                (_, None) => "running",
                (Some(Judged::Archived(_)), _) => "archived",
                (Some(Judged::Chosen), _) => "chosen",
                (None, Some(o)) => o.as_str(),
            };
            let start = a.started.map_or(a.created_ms, |s| s.time_ms);
            let detail = match &a.judged {
                Some(Judged::Archived(why)) => Some(why.clone()),
                _ => a.effective_failure().map(|f| f.reason.clone()),
            };
            AttemptRow {
                attempt: a.n,
                agent: a.agent.clone(),
                state: state.to_owned(),
                elapsed_ms: a
                    .started
                    .is_some()
                    .then(|| (a.finished_ms.unwrap_or(now_ms) - start).max(0)),
                usage: usage(std::iter::once(a)),
                detail,
            }
        })
        .collect()
}

/// One candidate of a best-of-N round, as shown.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CandidateRow {
    pub attempt: u32,
    pub agent: String,
    /// `running`, `chosen`, `archived`, or, before the round is judged,
    /// the attempt's outcome (`passed`, `failed`, `abandoned`).
    pub state: String,
    /// Why it was not chosen, or why it did not pass.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// The money its agent reported, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

/// The candidates of `t`'s latest round (none when it ran no round).
fn candidate_rows(t: &crate::state::TaskState) -> Vec<CandidateRow> {
    let Some(c) = t.attempts.last().and_then(|a| a.candidate) else {
        return Vec::new();
    };
    t.attempts
        .iter()
        .filter(|a| a.candidate.is_some_and(|x| x.round == c.round))
        .map(|a| {
            use crate::state::Judged;
            let state = match (&a.judged, a.outcome) {
                (_, None) => "running",
                (Some(Judged::Archived(_)), _) => "archived",
                (Some(Judged::Chosen), _) => "chosen",
                (None, Some(o)) => o.as_str(),
            }
            .to_owned();
            let archived = match &a.judged {
                Some(Judged::Archived(why)) => Some(why.clone()),
                _ => None,
            };
            CandidateRow {
                attempt: a.n,
                agent: a.agent.clone(),
                state,
                why: archived.or_else(|| a.effective_failure().map(|f| f.reason.clone())),
                cost_usd: a.agent_run.as_ref().and_then(|r| r.usage.cost_usd),
            }
        })
        .collect()
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
        let retries = super::schedule::retries_for(run, sub);
        let is_blocked = blocked.contains(&sub.id);
        let status = match Status::of(
            t.map_or(TaskStatus::Pending, |t| t.status(retries)),
            is_blocked,
        ) {
            // A run that stopped retries nothing until it is resumed.
            Status::Retrying if run.stopped.is_some() && run.finished.is_none() => Status::Stopped,
            s => s,
        };
        let last = t.and_then(|t| t.current());
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
                                    t.status(super::schedule::retries_for(run, s)),
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
            Status::Passed => last
                .filter(|a| !a.control_paths().is_empty())
                .map(|a| {
                    format!(
                        "changes control path(s) {}: it lands once a person approves its result (`git orch approve --branch {}`, then `git orch merge`)",
                        a.control_paths().join(", "),
                        a.branch
                    )
                }),
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
            cost_usd: t.and_then(|t| usage(&t.attempts).cost_usd),
            usage: t.map(|t| usage(&t.attempts)).unwrap_or_default(),
            attempt_usage: t.map_or_else(Vec::new, |t| {
                t.attempts
                    .iter()
                    .filter_map(|a| {
                        a.agent_run.as_ref().map(|r| AttemptUsage {
                            attempt: a.n,
                            agent: a.agent.clone(),
                            usage: r.usage.clone(),
                        })
                    })
                    .collect()
            }),
            worktree: last.map(|a| a.worktree.clone()),
            workspace: last.map(|a| a.workspace()),
            port: last.map(|a| a.port),
            gate: gate.or_else(|| carried.map(|c| format!("landed by run {}", c.run))),
            failure,
            writer: last.map(|a| a.writer.to_string()),
            candidates: t.map(candidate_rows).unwrap_or_default(),
            attempt_rows: t.map(|t| attempt_rows(t, now_ms)).unwrap_or_default(),
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
/// `run` says (docs/cli.md, exit codes), or `None` while it goes on: 0 when every
/// task is done or skipped, 3 when some are not, 64 for a spent budget, 65
/// for the circuit breaker, 78 for an agent that cannot work as
/// configured, 130 when interrupted.
pub fn exit_code(run: &RunState) -> Option<u8> {
    if let Some(s) = &run.finished {
        return Some(if is_complete(s) { 0 } else { 3 });
    }
    run.stopped.as_ref().map(|(reason, _)| match reason {
        crate::event::StopReason::Breaker => 65,
        crate::event::StopReason::Budget => 64,
        crate::event::StopReason::Interrupted => 130,
        crate::event::StopReason::Config => 78,
        crate::event::StopReason::AwaitingApproval => 3,
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

/// A run's usage: every attempt of every task.
pub fn run_usage(run: &RunState) -> Usage {
    usage(run.attempts().map(|(_, a)| a))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_reported_yet_is_no_number_anywhere() {
        let u = usage(std::iter::empty());
        assert_eq!(u.cost, CostKind::None);
        assert_eq!(u.cost_usd, None);
        assert_eq!(u.text(), "none reported yet, no tokens reported yet");
        assert_eq!(u.tokens_cell(), "-");
        let json = serde_json::to_value(u).expect("serialises");
        assert!(json["cost_usd"].is_null(), "{json}");
    }

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
    fn no_cost_reported_is_unknown_not_zero() {
        let u = Usage {
            cost_usd: None,
            cost: CostKind::Unknown,
            runs: 1,
            runs_without_tokens: 1,
            ..Usage::default()
        };
        assert_eq!(u.cost_text(), "unknown");
        assert_eq!(u.tokens_cell(), "unknown");
        assert_eq!(u.text(), "unknown, tokens unknown");
        assert_eq!(Usage::default().tokens_cell(), "-");
        let partial = Usage {
            input_tokens: 12_300,
            output_tokens: 1_100,
            cost_usd: Some(0.5),
            cost: CostKind::Partial,
            runs: 2,
            runs_without_tokens: 1,
            ..Usage::default()
        };
        assert_eq!(partial.text(), "$0.50+?, 12.3k in, 1.1k out");
        assert_eq!(partial.tokens_cell(), "12.3k/1.1k");
    }
}
