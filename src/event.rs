//! The event log's record types: what every line of the journal means.
//!
//! A [`Record`] is the versioned envelope (`version`, writer, per-writer
//! `seq`, Lamport `clock`, informational wall time) around one typed
//! [`Event`]. Records are plain data: this module does no I/O, so the store
//! below can serialise them and every layer above can fold them into state.
//! The global order is [`Record::order_key`], never wall-clock time, so every
//! clone sorts the same union of logs the same way.
//!
//! Adding an event type is backwards compatible for readers that know it;
//! older readers report the record as unreadable rather than misreading it.
//! Changing the meaning of a field needs a new `version`.

use serde::{Deserialize, Serialize};

use crate::ids::{PlanId, RunId, TaskId, WriterId};
use crate::oid::Oid;

/// The envelope format this build writes and understands.
pub const FORMAT_VERSION: u32 = 1;

/// The largest Lamport clock a record may carry: 2^53 - 1, the
/// largest integer every JSON reader holds exactly (JavaScript and `jq`
/// read numbers as doubles), and more than any honest log reaches (a
/// million events a second for 285 years). A clock above it can only be
/// forged or corrupt: readers report such a record and skip it, appends
/// ignore such a clock of another log, and clocks stop growing here
/// (saturate) rather than ever wrapping to 0, which would sort new events
/// first.
pub const MAX_CLOCK: u64 = (1 << 53) - 1;

/// The largest event record, in bytes (1 MiB), that anything of git-orch
/// takes in: the server hook refuses a push holding a larger one, `sync`
/// refuses to take in a log that gained one, and every reader of the log
/// skips and reports one, judging by the object's header before reading
/// it. git-orch writes records of a few KiB (output tails are bounded);
/// anything near this is not an event but a file smuggled into the log.
pub const MAX_EVENT_BYTES: u64 = 1024 * 1024;

/// The clock an append continues from: the writer's own last clock
/// `own`, raised to every clock of other logs it has seen (`seen`) that is
/// not above [`MAX_CLOCK`] (one above it is forged or corrupt, and taking
/// it over would carry the damage into this log). `None` when `own` itself
/// is above the ceiling: whatever continued that log would be untrusted.
pub fn lamport_base(own: u64, seen: impl IntoIterator<Item = u64>) -> Option<u64> {
    (own <= MAX_CLOCK).then(|| {
        seen.into_iter()
            .filter(|c| *c <= MAX_CLOCK)
            .fold(own, u64::max)
    })
}

/// The clock of the `i`-th event (from 1) appended after `base`: one more
/// each, stopping at [`MAX_CLOCK`] (events at the ceiling still sort by
/// writer and seq), never wrapping.
pub fn lamport_next(base: u64, i: u64) -> u64 {
    base.saturating_add(i).min(MAX_CLOCK)
}

/// Why stored bytes are not a record, in words that fit after "the blob
/// …".
#[derive(Debug, thiserror::Error)]
pub enum BadRecord {
    #[error("is not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    #[error(
        "has format version {}, this git-orch reads {FORMAT_VERSION}; upgrade git-orch",
        version.map_or("none".into(), |v| v.to_string())
    )]
    OtherVersion { version: Option<u64> },
    #[error("is not a valid event: {0}")]
    NotAnEvent(#[source] serde_json::Error),
}

/// One event as stored in the log: envelope plus payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Envelope format version; [`FORMAT_VERSION`].
    pub version: u32,
    /// The clone that wrote the event.
    pub writer: WriterId,
    /// Position in the writer's log, from 1, contiguous per writer.
    pub seq: u64,
    /// Lamport clock: greater than every clock the writer had seen.
    pub clock: u64,
    /// Wall-clock milliseconds since the Unix epoch, for display only.
    pub time_ms: i64,
    /// The payload, tagged by `type`.
    #[serde(flatten)]
    pub event: Event,
}

impl Record {
    /// The global order: the same on every clone that holds the same events.
    pub fn order_key(&self) -> (u64, &str, u64) {
        (self.clock, self.writer.as_str(), self.seq)
    }

    /// Parses one stored record, saying why not in words that fit after
    /// "the blob …": not JSON, another format version, or not a valid event.
    /// This is the one parser of event bytes; the log reader and the server
    /// hook both use it.
    pub fn from_json(bytes: &[u8]) -> Result<Record, BadRecord> {
        let record: Record = match serde_json::from_slice(bytes) {
            Ok(r) => r,
            Err(e) => {
                let probe: serde_json::Value =
                    serde_json::from_slice(bytes).map_err(BadRecord::NotJson)?;
                let version = probe.get("version").and_then(|v| v.as_u64());
                if version != Some(u64::from(FORMAT_VERSION)) {
                    return Err(BadRecord::OtherVersion { version });
                }
                return Err(BadRecord::NotAnEvent(e));
            }
        };
        if record.version != FORMAT_VERSION {
            return Err(BadRecord::OtherVersion {
                version: Some(u64::from(record.version)),
            });
        }
        Ok(record)
    }
}

/// Every kind of event, tagged by `type` in snake_case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// `git orch init` ran in a clone.
    Initialized {
        /// The remote configured for sharing, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        remote: Option<String>,
    },
    /// A plan revision was stored under `refs/orch/plans/<plan_id>`.
    PlanAdded {
        plan_id: PlanId,
        /// 1 for a new plan, then 2, 3, …
        revision: u32,
        /// `blake3:<hex>` of the canonical plan bytes.
        hash: String,
        /// The plan revision commit.
        commit: Oid,
        subtasks: usize,
    },
    /// A decision on a plan revision was recorded under
    /// `refs/orch/approvals/<plan_id>`.
    ApprovalRecorded {
        plan_id: PlanId,
        revision: u32,
        /// The plan hash the decision is bound to.
        hash: String,
        decision: Decision,
        approver: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
        /// Whether the approval commit carries a gpg/ssh signature.
        signed: bool,
        /// The approval commit.
        commit: Oid,
    },
    /// A run of an approved plan revision began.
    RunStarted {
        run_id: RunId,
        plan_id: PlanId,
        revision: u32,
        plan_hash: String,
        /// The approval commit that allowed it.
        approval: Oid,
        /// The branch results land on.
        target: String,
        /// The commit attempts start from.
        base: Oid,
        settings: RunSettings,
        /// Tasks an earlier run of the plan already landed on the target
        /// (producing the same thing): this run counts them done and never
        /// runs them again (`git orch run --redo TASK` or `--redo-all`
        /// leaves them out).
        #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
        carried: std::collections::BTreeMap<TaskId, Carried>,
        /// The person who started the run (git's author identity in that
        /// clone): the author of what the run lands.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<Person>,
    },
    /// A driver process took over an existing run (after a crash, Ctrl-C,
    /// or on another invocation of the same `run` command).
    RunResumed {
        run_id: RunId,
        pid: u32,
        host: String,
    },
    /// An attempt's branch exists (created in the same ref transaction as
    /// this event); its worktree is being made.
    AttemptCreated {
        run_id: RunId,
        task: TaskId,
        attempt: u32,
        branch: String,
        /// The commit its change is judged against and landed from.
        base: Oid,
        /// Where its branch starts when not at `base`: the previous
        /// attempt's result, for a retry that continues it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        start: Option<Oid>,
        worktree: String,
        /// First port of the attempt's block of [`PORT_BLOCK`].
        port: u16,
        agent: String,
        /// One of several attempts run at once on the task (best of N),
        /// of which one is chosen to land.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        candidate: Option<Candidate>,
        /// Its branch existed already, made by someone else: git-orch
        /// never made it, never moves it and never deletes it (the
        /// attempt ends at once, failed).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        foreign_branch: bool,
    },
    /// The attempt's agent process is running.
    AttemptStarted {
        run_id: RunId,
        task: TaskId,
        attempt: u32,
        pid: u32,
        /// Process group id (the agent leads its own group).
        pgid: u32,
        /// How the agent is confined: `bwrap` or `none` (absent in logs
        /// written before git-orch had a sandbox).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sandbox: Option<String>,
    },
    /// The per-worktree setup command ran.
    SetupFinished {
        run_id: RunId,
        task: TaskId,
        attempt: u32,
        ok: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit: Option<i32>,
        duration_ms: u64,
        /// Masked tail of its output.
        tail: String,
    },
    /// The attempt's agent exited, was stopped, or could not run.
    AgentFinished {
        run_id: RunId,
        task: TaskId,
        attempt: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit: Option<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<i32>,
        timed_out: bool,
        duration_ms: u64,
        usage: AgentUsage,
        /// Set when the agent was unavailable (missing, rate limited):
        /// the fallback chain may try another agent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        unavailable: Option<String>,
        /// Masked tail of its output.
        tail: String,
        /// The agent's own last error message (masked, one line), when it
        /// printed one: what failure reasons quote.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cause: Option<String>,
    },
    /// What the agent left became the attempt's result commit.
    AttemptResult {
        run_id: RunId,
        task: TaskId,
        attempt: u32,
        commit: Oid,
        tree: Oid,
        /// Paths changed relative to the attempt's base.
        changed: usize,
        /// The [control paths](crate::plan::control) the result changes,
        /// in its net change or any of its commits: it lands only once a
        /// person approved its exact tree.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        control_paths: Vec<String>,
    },
    /// One gate's verdict on an attempt's result.
    GateVerdict {
        run_id: RunId,
        task: TaskId,
        attempt: u32,
        verdict: Verdict,
    },
    /// An attempt ended.
    AttemptFinished {
        run_id: RunId,
        task: TaskId,
        attempt: u32,
        outcome: Outcome,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        failure: Option<Failure>,
    },
    /// The merge queue moved the target to a gated tree holding this
    /// attempt's work (several events share `new` when a batch landed).
    Landed {
        run_id: RunId,
        task: TaskId,
        attempt: u32,
        target: String,
        /// The target's tip before the landing (the compare-and-swap's
        /// expected value).
        old: Oid,
        /// The target's tip after it.
        new: Oid,
        strategy: String,
        /// The commits this attempt added to the target, oldest first.
        commits: Vec<Oid>,
    },
    /// The merge queue could not land an attempt (conflict or integration
    /// gate); the task gets a new attempt from the fresh target.
    LandingFailed {
        run_id: RunId,
        task: TaskId,
        attempt: u32,
        failure: Failure,
        /// Conflicting paths, for conflicts.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        conflicts: Vec<String>,
        /// Conflicting hunks (masked, bounded), for conflicts.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        hunks: Vec<String>,
        /// The integration gate's failing verdicts, for gate failures.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        verdicts: Vec<Verdict>,
    },
    /// A `landed` record whose target move did not happen (the process was
    /// killed between the two, or someone moved the target in between):
    /// the attempt waits in the queue again. Only `new` identifies the
    /// landing it voids.
    LandingVoided {
        run_id: RunId,
        task: TaskId,
        attempt: u32,
        /// The `new` of the voided `landed` event.
        new: Oid,
        reason: String,
    },
    /// The integration gate's verdict on a candidate (one or a stack of
    /// attempts on top of the target).
    IntegrationVerdict {
        run_id: RunId,
        /// The candidate commit.
        candidate: Oid,
        /// Its tree (the verdict cache key).
        tree: Oid,
        /// The attempts in the candidate, as `task/attempt`.
        attempts: Vec<String>,
        verdict: Verdict,
    },
    /// A person asked for a task to be retried, skipped or cancelled.
    TaskControl {
        run_id: RunId,
        task: TaskId,
        action: Control,
        by: String,
    },
    /// The run stopped dispatching (breaker, budget, interrupt); it can be
    /// resumed.
    RunStopped {
        run_id: RunId,
        reason: StopReason,
        detail: String,
    },
    /// Every task has reached an end state.
    RunFinished {
        run_id: RunId,
        summary: RunSummary,
        /// Why the run was closed before its tasks ended: replaced by a
        /// new revision of its plan, or by `git orch run --new`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        closed: Option<String>,
    },
    /// An attempt's worktree was removed (its branch and commits stay).
    WorkspaceCleaned {
        run_id: RunId,
        task: TaskId,
        attempt: u32,
        path: String,
    },
    /// An attempt's branch was deleted by cleanup, once every commit on it
    /// was reachable from `refs/orch/keep` or another branch, tag or
    /// remote-tracking branch (so nothing was lost).
    AttemptBranchRemoved {
        run_id: RunId,
        task: TaskId,
        attempt: u32,
        /// The branch, without `refs/heads/`.
        branch: String,
        /// Its tip when it was deleted.
        tip: Oid,
    },
    /// Every candidate of a best-of-N round ended and one was chosen to
    /// land (or none passed): by gates, then the reviewer, then the
    /// smaller diff. The others are archived: kept, never landed.
    CandidatesJudged {
        run_id: RunId,
        task: TaskId,
        /// The round: the number of its first attempt.
        round: u32,
        /// The chosen attempt; `None` when no candidate passed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        winner: Option<u32>,
        /// Every candidate, best first.
        ranking: Vec<CandidateRank>,
    },
    /// A person reviewed something `git orch fsck` found and accepted it;
    /// fsck lists it as accepted from then on instead of failing.
    FindingAccepted {
        finding: AcceptedFinding,
        by: String,
    },
    /// This clone won a claim on a remote (its claim commit is the value of
    /// `refs/orch/claims/<run>/<what>` there): a task's attempt, or the
    /// merge queue (`what` = `_queue`).
    Claimed {
        run_id: RunId,
        what: String,
        attempt: u32,
        /// The claim commit.
        commit: Oid,
        lease_secs: u64,
        host: String,
        pid: u32,
        /// The writer whose expired claim this one replaced.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        took_over_from: Option<String>,
    },
    /// The holder of a claim is alive: the lease runs again from now.
    ClaimRenewed { run_id: RunId, commit: Oid },
    /// The holder let a claim go before its lease ran out.
    ClaimReleased { run_id: RunId, commit: Oid },
    /// A diagnostic marker written by `git orch debug append`; used by the
    /// concurrency tests and benchmarks, harmless in a real log.
    DebugMarker { label: String, n: u64 },
    /// One round of `git orch plan new --agent`: the lead agent ran in a
    /// read-only checkout of `base` and what it wrote was checked like
    /// `plan check` does. A draft is not a stored plan: nothing else in
    /// the state changes.
    PlanRound {
        /// Ties the rounds of one `plan new` together (12 hex digits).
        session: String,
        /// This round, from 1.
        round: u32,
        /// The most rounds the session may take (`--rounds`).
        rounds: u32,
        /// The lead agent's name.
        agent: String,
        /// The commit the agent read and the plan was checked against.
        base: Oid,
        outcome: PlanRoundOutcome,
        /// The plan's id and content hash, when it was a valid plan.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        plan_id: Option<PlanId>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hash: Option<String>,
        /// Blocking findings and warnings of the check.
        blocking: usize,
        warnings: usize,
        /// What went back to the agent (findings, or why no plan could be
        /// read); masked and bounded.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        problems: Vec<String>,
        /// Where the draft was saved.
        draft: String,
        /// Files the agent changed in its read-only checkout (discarded).
        stray: usize,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit: Option<i32>,
        timed_out: bool,
        duration_ms: u64,
        usage: AgentUsage,
        /// Masked tail of its output.
        tail: String,
    },
    /// A person approved a branch for `git orch land` (`git orch approve
    /// --branch`): the decision is bound to the exact tree of the branch's
    /// tip, so any change to the branch voids it. Not part of any run.
    BranchApproved {
        /// The branch, without `refs/heads/`.
        branch: String,
        /// Its tip when approved.
        commit: Oid,
        /// That tip's tree: what the approval is bound to.
        tree: Oid,
        approver: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
        /// Whether the approval commit carries a gpg/ssh signature.
        signed: bool,
        /// The approval commit: its tree holds `approval.json`, its parent
        /// is the approved tip; `refs/orch/keep` keeps it reachable.
        approval: Oid,
    },
    /// `git orch land` moved the target to a candidate holding an approved
    /// branch, after the integration gate passed on it, by compare-and-swap
    /// from `old` (recorded first, like `landed`). Not part of any run.
    BranchLanded {
        /// Names this landing (`land-<12 hex>`): its scratch worktree and
        /// gate logs under `.git/orch/`.
        landing: String,
        branch: String,
        /// The branch tip that landed, and its tree (the approved one).
        commit: Oid,
        tree: Oid,
        /// The approval commit that allowed it.
        approval: Oid,
        target: String,
        /// The target's tip before and after.
        old: Oid,
        new: Oid,
        strategy: String,
        /// The commits the landing added to the target, oldest first.
        commits: Vec<Oid>,
        /// The integration gate's verdicts on the candidate `new`.
        verdicts: Vec<Verdict>,
    },
}

/// What a `finding_accepted` event accepts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AcceptedFinding {
    /// Different events at one seq of one writer's log (a rewrite kept
    /// beside the original): exactly these blobs. Another blob appearing
    /// at that seq later is a new finding.
    Rewrite {
        writer: WriterId,
        seq: u64,
        blobs: Vec<String>,
    },
    /// A commit on a protected target that no landing vouches for.
    Commit { commit: Oid, target: String },
}

/// How one lead-agent round ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanRoundOutcome {
    /// The plan is valid and has no blocking finding.
    Passed,
    /// The plan is valid but has blocking findings.
    Blocked,
    /// The file is not a valid plan (not JSON, wrong shape, bad glob, …).
    Invalid,
    /// The agent wrote no plan file.
    Missing,
    /// The agent could not run, failed before writing, timed out, or was
    /// unavailable (rate limited).
    AgentFailed,
    /// Stopped by the user (Ctrl-C).
    Interrupted,
}

impl PlanRoundOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            PlanRoundOutcome::Passed => "passed",
            PlanRoundOutcome::Blocked => "blocked",
            PlanRoundOutcome::Invalid => "invalid",
            PlanRoundOutcome::Missing => "missing",
            PlanRoundOutcome::AgentFailed => "agent_failed",
            PlanRoundOutcome::Interrupted => "interrupted",
        }
    }
}

/// A person as git names one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Person {
    pub name: String,
    pub email: String,
}

/// Where a task carried into a run landed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Carried {
    /// The run that landed it.
    pub run: RunId,
    pub attempt: u32,
}

/// An attempt's place in a best-of-N round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Candidate {
    /// The number of the round's first attempt.
    pub round: u32,
    /// How many candidates the round has.
    pub of: u32,
}

/// How one candidate of a round compared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CandidateRank {
    pub attempt: u32,
    pub agent: String,
    /// Passed every blocking gate.
    pub passed: bool,
    /// No reviewer gate rejected it (true when no reviewer ran).
    pub reviewer_ok: bool,
    /// Lines added plus lines removed against the attempt's base (a
    /// binary file counts 1).
    pub changed_lines: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// What set it apart from the chosen candidate (for the chosen one:
    /// from the runner-up); absent when it stood alone, and in logs from
    /// before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<Criterion>,
    /// Why it stands where it does, in a few words.
    pub why: String,
}

/// What decides between two candidates of a best-of-N round, in the order
/// the ranking applies them: the first on which they differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Criterion {
    /// One passed every blocking gate, the other did not.
    Gates,
    /// A reviewer gate rejected one of them.
    Reviewer,
    /// The smaller change (lines added plus removed).
    Lines,
    /// The lower cost (an unknown cost counts as nothing).
    Cost,
    /// The lower attempt number: everything else was equal.
    Order,
}

/// Ports reserved per attempt, exported from `ORCH_PORT`.
pub const PORT_BLOCK: u16 = 10;

/// The settings a run was started with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSettings {
    pub cap: usize,
    /// Default agent (a subtask's `agent` wins).
    pub agent: String,
    /// Agents tried in order when the chosen one is unavailable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fallback: Vec<String>,
    pub timeout_secs: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_usd: Option<f64>,
    pub retries: u32,
    pub breaker_failures: u32,
    pub breaker_retries: u32,
    pub breaker_empty: u32,
    /// Started with `run --start-only`: workers (`git orch worker`) work
    /// it through claims; no `git orch run` drives it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub workers: bool,
    /// Candidates run at once per task and round (`run --best-of N`; a
    /// subtask's own `candidates` list wins). 1: one attempt at a time.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub best_of: u32,
}

/// Tokens and cost an agent reported.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentUsage {
    /// Prompt-side tokens, cached ones included.
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Cost in US dollars; absent when unknown (the CLI reports none and
    /// the model is not in the price table), which is not the same as 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// The part of `input_tokens` read from the provider's prompt cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_read_tokens: u64,
    /// The part of `input_tokens` written to the provider's prompt cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
    /// The model, as the CLI or the agent's config names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// `reported` (by the CLI) or `estimated` (from the price table);
    /// absent with no cost, and in logs from before estimates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_source: Option<String>,
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// How a gate's failure counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateMode {
    /// A failure stops the attempt from reaching the merge queue.
    Block,
    /// A failure is reported but does not stop the attempt.
    Warn,
    /// The gate does not run.
    Skip,
}

impl GateMode {
    pub fn as_str(self) -> &'static str {
        match self {
            GateMode::Block => "block",
            GateMode::Warn => "warn",
            GateMode::Skip => "skip",
        }
    }
}

/// What a gate said.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateStatus {
    Pass,
    Fail,
    /// Failed, but the gate's mode is `warn`.
    Warn,
    Skipped,
    /// The gate could not run (command missing, crashed, timed out).
    Error,
    /// Reused from an earlier verdict on the same tree and command.
    Cached,
}

impl GateStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            GateStatus::Pass => "pass",
            GateStatus::Fail => "fail",
            GateStatus::Warn => "warn",
            GateStatus::Skipped => "skipped",
            GateStatus::Error => "error",
            GateStatus::Cached => "cached",
        }
    }
}

/// A gate's structured verdict on one result tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub gate: String,
    pub mode: GateMode,
    pub status: GateStatus,
    /// For `cached`: whether the reused verdict passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_pass: Option<bool>,
    /// The command run, for command gates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// For a command gate that ran: the fingerprint of what its verdict
    /// rests on besides the tree and the command (the inputs among its
    /// environment's variables, and the sandbox settings; see
    /// `gate::inputs`). A verdict without one (recorded by an older
    /// git-orch) is never reused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<String>,
    pub duration_ms: u64,
    pub summary: String,
    /// Masked tail of the gate's output.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tail: String,
    /// Gate-specific structured data (out-of-scope paths, secret
    /// locations without the secret, failing test names, …).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub details: serde_json::Value,
}

impl Verdict {
    /// `prev`, reused for gate `gate` in `mode` on the same tree and
    /// command: status `cached`, whether it passed kept, its summary as
    /// judged (every view prints the status beside it: no `cached: cached:`).
    pub fn reused(prev: &Verdict, gate: &str, mode: GateMode) -> Verdict {
        // The status says `cached`; the summary stays the one judged.
        let summary = prev.summary.clone();
        Verdict {
            gate: gate.to_owned(),
            mode,
            status: GateStatus::Cached,
            cached_pass: Some(prev.status == GateStatus::Pass || prev.cached_pass == Some(true)),
            summary,
            duration_ms: 0,
            ..prev.clone()
        }
    }

    /// Whether this verdict stops the attempt.
    pub fn blocks(&self) -> bool {
        self.mode == GateMode::Block
            && match self.status {
                GateStatus::Fail | GateStatus::Error => true,
                GateStatus::Cached => self.cached_pass == Some(false),
                _ => false,
            }
    }
}

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Every blocking gate passed.
    Passed,
    /// The agent or a gate failed.
    Failed,
    /// Given up without a result (its driver died, its worktree could not
    /// be made, it was cancelled or stopped).
    Abandoned,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::Failed => "failed",
            Outcome::Abandoned => "abandoned",
        }
    }
}

/// Why an attempt failed, in the taxonomy the retry logic and the
/// circuit breaker use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    pub class: FailureClass,
    pub reason: String,
}

/// Failure classes: deterministic ones will fail the same way again
/// without a change of approach; transient ones may pass on a plain retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureClass {
    /// A blocking gate failed (tests, build, lint, verification, review).
    Gate,
    /// The result touched files outside the subtask's ownership.
    Scope,
    /// The result added a secret.
    Secret,
    /// The agent changed nothing.
    Empty,
    /// The agent exited non-zero or was killed (not by a timeout).
    AgentCrash,
    /// The agent ran past its timeout.
    Timeout,
    /// The agent was unavailable (missing binary, rate limit).
    Unavailable,
    /// The per-worktree setup command failed.
    Setup,
    /// git-orch itself could not carry out the attempt (its worktree
    /// could not be made, a step failed).
    Internal,
    /// Stopped from outside: Ctrl-C, the circuit breaker, or a driver that
    /// died and was replaced. Says nothing about the task.
    Interrupted,
    /// Integration with the current target failed (merge queue).
    Integration,
    /// What the agent left in its worktree's git folder was refused:
    /// metadata that would redirect git (alternates, a moved HEAD, other
    /// refs), objects that do not hash to their names, or paths git
    /// refuses (`.git`, `..`).
    Quarantine,
    /// The agent cannot work here as configured, and no fallback can: its
    /// program is missing or hidden by the sandbox, its key was refused,
    /// a `[sandbox]` bind cannot work. No retry can change that, so the
    /// run stops for the fix; the task's retry budget is untouched.
    Config,
}

impl FailureClass {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureClass::Gate => "gate",
            FailureClass::Scope => "scope",
            FailureClass::Secret => "secret",
            FailureClass::Empty => "empty",
            FailureClass::AgentCrash => "agent_crash",
            FailureClass::Timeout => "timeout",
            FailureClass::Unavailable => "unavailable",
            FailureClass::Setup => "setup",
            FailureClass::Internal => "internal",
            FailureClass::Interrupted => "interrupted",
            FailureClass::Integration => "integration",
            FailureClass::Quarantine => "quarantine",
            FailureClass::Config => "config",
        }
    }

    /// Whether a plain retry is likely to behave differently.
    pub fn is_transient(self) -> bool {
        matches!(
            self,
            FailureClass::AgentCrash
                | FailureClass::Timeout
                | FailureClass::Unavailable
                | FailureClass::Internal
                | FailureClass::Interrupted
        )
    }
}

/// A person's request about one task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Control {
    /// Run it again, with a fresh retry budget.
    Retry,
    /// Do not run it; dependents may proceed.
    Skip,
    /// Stop it and do not run it again; dependents do not proceed.
    Cancel,
}

impl Control {
    pub fn as_str(self) -> &'static str {
        match self {
            Control::Retry => "retry",
            Control::Skip => "skip",
            Control::Cancel => "cancel",
        }
    }
}

/// Why a run stopped dispatching.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    Breaker,
    Budget,
    Interrupted,
    /// An agent or the sandbox cannot work as configured
    /// ([`FailureClass::Config`]).
    Config,
    /// Nothing can go on until a person approves results that change
    /// control paths (`git orch approve --branch`): those and the results
    /// behind them in the queue keep their place, and the next `git orch
    /// run` of the plan resumes the run instead of doing them again.
    AwaitingApproval,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Breaker => "circuit breaker",
            StopReason::Budget => "budget",
            StopReason::Interrupted => "interrupted",
            StopReason::Config => "configuration",
            StopReason::AwaitingApproval => "awaiting approval",
        }
    }
}

/// Totals recorded when a run finishes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub tasks: usize,
    pub done: usize,
    pub failed: usize,
    pub skipped: usize,
    pub cancelled: usize,
    /// Tasks that could not start because a dependency failed or was
    /// cancelled.
    #[serde(default)]
    pub blocked: usize,
    pub attempts: usize,
    pub gate_runs: usize,
    /// What agents reported spending (or was estimated from the price
    /// table); `null` when none reported a cost. Older records hold 0.0
    /// there for unknown.
    #[serde(default)]
    pub cost_usd: Option<f64>,
    pub duration_ms: u64,
}

/// A human decision on a plan revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Approve,
    Revise,
}

impl Event {
    /// The end of attempt `attempt` of `task` in `run_id`: the one way
    /// every part of git-orch records it (the attempt itself, its driver
    /// when it panics or is found dead, a worker taking a claim over).
    pub fn attempt_finished(
        run_id: &RunId,
        task: &TaskId,
        attempt: u32,
        outcome: Outcome,
        failure: Option<Failure>,
    ) -> Event {
        Event::AttemptFinished {
            run_id: run_id.clone(),
            task: task.clone(),
            attempt,
            outcome,
            failure,
        }
    }

    /// The `type` tag, for commit trailers and human output.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::Initialized { .. } => "initialized",
            Event::PlanAdded { .. } => "plan_added",
            Event::RunStarted { .. } => "run_started",
            Event::RunResumed { .. } => "run_resumed",
            Event::AttemptCreated { .. } => "attempt_created",
            Event::AttemptStarted { .. } => "attempt_started",
            Event::SetupFinished { .. } => "setup_finished",
            Event::AgentFinished { .. } => "agent_finished",
            Event::AttemptResult { .. } => "attempt_result",
            Event::GateVerdict { .. } => "gate_verdict",
            Event::AttemptFinished { .. } => "attempt_finished",
            Event::TaskControl { .. } => "task_control",
            Event::Landed { .. } => "landed",
            Event::LandingFailed { .. } => "landing_failed",
            Event::LandingVoided { .. } => "landing_voided",
            Event::IntegrationVerdict { .. } => "integration_verdict",
            Event::RunStopped { .. } => "run_stopped",
            Event::RunFinished { .. } => "run_finished",
            Event::WorkspaceCleaned { .. } => "workspace_cleaned",
            Event::AttemptBranchRemoved { .. } => "attempt_branch_removed",
            Event::CandidatesJudged { .. } => "candidates_judged",
            Event::FindingAccepted { .. } => "finding_accepted",
            Event::Claimed { .. } => "claimed",
            Event::ClaimRenewed { .. } => "claim_renewed",
            Event::ClaimReleased { .. } => "claim_released",
            Event::ApprovalRecorded { .. } => "approval_recorded",
            Event::DebugMarker { .. } => "debug_marker",
            Event::PlanRound { .. } => "plan_round",
            Event::BranchApproved { .. } => "branch_approved",
            Event::BranchLanded { .. } => "branch_landed",
        }
    }

    /// The run an event is about, if any.
    pub fn run_id(&self) -> Option<&RunId> {
        match self {
            Event::RunStarted { run_id, .. }
            | Event::RunResumed { run_id, .. }
            | Event::AttemptCreated { run_id, .. }
            | Event::AttemptStarted { run_id, .. }
            | Event::SetupFinished { run_id, .. }
            | Event::AgentFinished { run_id, .. }
            | Event::AttemptResult { run_id, .. }
            | Event::GateVerdict { run_id, .. }
            | Event::AttemptFinished { run_id, .. }
            | Event::TaskControl { run_id, .. }
            | Event::Landed { run_id, .. }
            | Event::LandingFailed { run_id, .. }
            | Event::LandingVoided { run_id, .. }
            | Event::IntegrationVerdict { run_id, .. }
            | Event::RunStopped { run_id, .. }
            | Event::RunFinished { run_id, .. }
            | Event::WorkspaceCleaned { run_id, .. }
            | Event::AttemptBranchRemoved { run_id, .. }
            | Event::CandidatesJudged { run_id, .. }
            | Event::Claimed { run_id, .. }
            | Event::ClaimRenewed { run_id, .. }
            | Event::ClaimReleased { run_id, .. } => Some(run_id),
            _ => None,
        }
    }

    /// The task an event is about, if any.
    pub fn task(&self) -> Option<&TaskId> {
        match self {
            Event::AttemptCreated { task, .. }
            | Event::AttemptStarted { task, .. }
            | Event::SetupFinished { task, .. }
            | Event::AgentFinished { task, .. }
            | Event::AttemptResult { task, .. }
            | Event::GateVerdict { task, .. }
            | Event::AttemptFinished { task, .. }
            | Event::TaskControl { task, .. }
            | Event::Landed { task, .. }
            | Event::LandingFailed { task, .. }
            | Event::LandingVoided { task, .. }
            | Event::WorkspaceCleaned { task, .. }
            | Event::AttemptBranchRemoved { task, .. }
            | Event::CandidatesJudged { task, .. } => Some(task),
            _ => None,
        }
    }

    /// A one-line human summary, used as the commit subject and in `log`:
    /// `<run>/<task> attempt <n> …` for what befell an attempt, `run <run> …`
    /// or `<run>/<task> …` for a run's own records, and the record's own
    /// words for the rest.
    pub fn summary(&self) -> String {
        if let Some(text) = self.attempt_summary() {
            return text;
        }
        self.run_summary()
            .unwrap_or_else(|| self.repository_summary())
    }

    /// The summary of a record about one attempt.
    fn attempt_summary(&self) -> Option<String> {
        let (run_id, task, attempt, what) = match self {
            Event::AttemptCreated {
                run_id,
                task,
                attempt,
                agent,
                ..
            } => (run_id, task, attempt, format!("created for {agent}")),
            Event::AttemptStarted {
                run_id,
                task,
                attempt,
                pid,
                ..
            } => (run_id, task, attempt, format!("agent started (pid {pid})")),
            Event::SetupFinished {
                run_id,
                task,
                attempt,
                ok,
                ..
            } => (
                run_id,
                task,
                attempt,
                format!("setup {}", if *ok { "done" } else { "failed" }),
            ),
            Event::AgentFinished {
                run_id,
                task,
                attempt,
                exit,
                timed_out,
                unavailable,
                ..
            } => {
                let how = match (unavailable, timed_out, exit) {
                    (Some(u), _, _) => format!("unavailable ({u})"),
                    (None, true, _) => "timed out".to_owned(),
                    (None, false, Some(c)) => format!("exited {c}"),
                    (None, false, None) => "was killed".to_owned(),
                };
                (run_id, task, attempt, format!("agent {how}"))
            }
            Event::AttemptResult {
                run_id,
                task,
                attempt,
                commit,
                changed,
                ..
            } => (
                run_id,
                task,
                attempt,
                format!("result {} ({changed} paths)", short(&commit.to_string())),
            ),
            Event::GateVerdict {
                run_id,
                task,
                attempt,
                verdict,
            } => (
                run_id,
                task,
                attempt,
                format!("gate {} {}", verdict.gate, verdict.status.as_str()),
            ),
            Event::AttemptFinished {
                run_id,
                task,
                attempt,
                outcome,
                failure,
            } => (
                run_id,
                task,
                attempt,
                match failure {
                    Some(f) => format!("{}: {}", outcome.as_str(), f.reason),
                    None => outcome.as_str().to_owned(),
                },
            ),
            Event::Landed {
                run_id,
                task,
                attempt,
                target,
                new,
                ..
            } => (
                run_id,
                task,
                attempt,
                format!("landed on {target} at {}", short(&new.to_string())),
            ),
            Event::LandingFailed {
                run_id,
                task,
                attempt,
                failure,
                ..
            } => (
                run_id,
                task,
                attempt,
                format!("could not land: {}", failure.reason),
            ),
            Event::LandingVoided {
                run_id,
                task,
                attempt,
                reason,
                ..
            } => (run_id, task, attempt, format!("landing voided: {reason}")),
            Event::WorkspaceCleaned {
                run_id,
                task,
                attempt,
                ..
            } => (run_id, task, attempt, "worktree removed".to_owned()),
            Event::AttemptBranchRemoved {
                run_id,
                task,
                attempt,
                branch,
                ..
            } => (run_id, task, attempt, format!("branch {branch} removed")),
            _ => return None,
        };
        Some(format!("{run_id}/{task} attempt {attempt} {what}"))
    }

    /// The summary of a record about a run as a whole, a task of it
    /// (not one attempt) or its claims.
    fn run_summary(&self) -> Option<String> {
        Some(match self {
            Event::RunStarted {
                run_id,
                plan_id,
                revision,
                target,
                ..
            } => format!(
                "run {run_id} of plan {plan_id} revision {revision} started, target {target}"
            ),
            Event::RunResumed { run_id, pid, host } => {
                format!("run {run_id} driven by pid {pid} on {host}")
            }
            Event::TaskControl {
                run_id,
                task,
                action,
                by,
            } => format!("{run_id}/{task} {} requested by {by}", action.as_str()),
            Event::IntegrationVerdict {
                run_id,
                candidate,
                verdict,
                ..
            } => format!(
                "{run_id} integration gate {} {} on {}",
                verdict.gate,
                verdict.status.as_str(),
                short(&candidate.to_string())
            ),
            Event::RunStopped {
                run_id,
                reason,
                detail,
            } => format!("run {run_id} stopped ({}): {detail}", reason.as_str()),
            Event::RunFinished {
                run_id,
                summary,
                closed,
            } => format!(
                "run {run_id} finished: {} done, {} failed, {} skipped{}",
                summary.done,
                summary.failed,
                summary.skipped,
                closed
                    .as_ref()
                    .map(|why| format!(" (closed: {why})"))
                    .unwrap_or_default()
            ),
            Event::CandidatesJudged {
                run_id,
                task,
                round,
                winner,
                ranking,
            } => match winner {
                Some(w) => format!(
                    "{run_id}/{task} attempt {w} chosen of {} candidates (round {round})",
                    ranking.len()
                ),
                None => format!(
                    "{run_id}/{task} none of {} candidates passed (round {round})",
                    ranking.len()
                ),
            },
            Event::Claimed {
                run_id,
                what,
                attempt,
                host,
                took_over_from,
                ..
            } => match took_over_from {
                Some(w) => format!(
                    "{run_id}/{what} attempt {attempt} claimed on {host}, taken over from {w}"
                ),
                None => format!("{run_id}/{what} attempt {attempt} claimed on {host}"),
            },
            Event::ClaimRenewed { run_id, commit } => {
                format!("{run_id} claim {} renewed", short(&commit.to_string()))
            }
            Event::ClaimReleased { run_id, commit } => {
                format!("{run_id} claim {} released", short(&commit.to_string()))
            }
            _ => return None,
        })
    }

    /// The summary of a record about the repository: plans, approvals,
    /// branches, accepted findings, markers.
    fn repository_summary(&self) -> String {
        match self {
            Event::Initialized { remote: Some(r) } => format!("initialized, sharing through {r}"),
            Event::Initialized { remote: None } => "initialized".into(),
            Event::PlanAdded {
                plan_id,
                revision,
                subtasks,
                ..
            } => format!("plan {plan_id} revision {revision} added ({subtasks} subtasks)"),
            Event::ApprovalRecorded {
                plan_id,
                revision,
                decision,
                approver,
                ..
            } => match decision {
                Decision::Approve => {
                    format!("plan {plan_id} revision {revision} approved by {approver}")
                }
                Decision::Revise => format!(
                    "plan {plan_id} revision {revision} sent back for revision by {approver}"
                ),
            },
            Event::FindingAccepted { finding, by } => match finding {
                AcceptedFinding::Rewrite { writer, seq, .. } => {
                    format!("rewrite of writer {writer} at seq {seq} accepted by {by}")
                }
                AcceptedFinding::Commit { commit, target } => {
                    format!(
                        "commit {} on {target} accepted by {by}",
                        short(&commit.to_string())
                    )
                }
            },
            Event::DebugMarker { label, n } => format!("debug marker {label} #{n}"),
            Event::PlanRound {
                round,
                rounds,
                agent,
                outcome,
                plan_id,
                blocking,
                ..
            } => {
                let what = match (outcome, plan_id) {
                    (PlanRoundOutcome::Passed, Some(id)) => format!("plan {id} passes the check"),
                    (PlanRoundOutcome::Blocked, Some(id)) => {
                        format!("plan {id} has {blocking} blocking finding(s)")
                    }
                    (o, _) => o.as_str().replace('_', " "),
                };
                format!("plan new round {round}/{rounds} by {agent}: {what}")
            }
            Event::BranchApproved {
                branch,
                tree,
                approver,
                ..
            } => format!(
                "branch {branch} approved for landing by {approver} (tree {})",
                short(&tree.to_string())
            ),
            Event::BranchLanded {
                branch,
                target,
                new,
                ..
            } => format!(
                "branch {branch} landed on {target} at {}",
                short(&new.to_string())
            ),
            // Records about a run or an attempt are summarized above
            // (see `summary`); a new kind says at least what it is.
            _ => self.kind().to_owned(),
        }
    }
}

/// An object id's first 12 hex digits, as summaries show them.
fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reused_verdict_is_cached_by_status_and_keeps_its_summary_and_whether_it_passed() {
        let ran = Verdict {
            gate: "verify".into(),
            mode: GateMode::Block,
            status: GateStatus::Fail,
            cached_pass: None,
            inputs: None,
            command: Some("make test".into()),
            duration_ms: 1200,
            summary: "exit 2".into(),
            tail: String::new(),
            details: serde_json::Value::Null,
        };
        let once = Verdict::reused(&ran, "integration", GateMode::Block);
        assert_eq!(once.summary, "exit 2");
        assert_eq!(once.gate, "integration");
        assert_eq!(
            (once.status, once.cached_pass, once.duration_ms),
            (GateStatus::Cached, Some(false), 0)
        );
        assert!(once.blocks());
        let twice = Verdict::reused(&once, "integration", GateMode::Warn);
        assert_eq!(twice.summary, "exit 2");
        assert_eq!(twice.cached_pass, Some(false));
        assert!(!twice.blocks(), "a warning gate never blocks");
    }

    #[test]
    fn record_round_trips_with_flat_type_tag() {
        let r = Record {
            version: FORMAT_VERSION,
            writer: WriterId::new("abc123").expect("valid"),
            seq: 7,
            clock: 9,
            time_ms: 1,
            event: Event::DebugMarker {
                label: "x".into(),
                n: 3,
            },
        };
        let json = serde_json::to_string(&r).expect("serialises");
        assert!(json.contains(r#""type":"debug_marker""#), "{json}");
        let back: Record = serde_json::from_str(&json).expect("parses");
        assert_eq!(back, r);
    }

    /// Log lines as git-orch has written them, with object ids as hex
    /// text, are read and written again byte for byte: a log in the
    /// repository is history, and a change of the ids' types (or of any
    /// field) must leave its bytes as they are.
    #[test]
    fn recorded_lines_with_object_ids_are_read_and_written_again_byte_for_byte() {
        let a = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391";
        let b = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";
        let c = "0123456789abcdef0123456789abcdef01234567";
        let head = r#"{"version":1,"writer":"abc123","seq":4,"clock":9,"time_ms":1700000000000,"#;
        let lines = [
            format!(
                r#"{head}"type":"attempt_created","run_id":"p-abc123","task":"a","attempt":2,"branch":"orch/p-abc123/a/2","base":"{a}","start":"{b}","worktree":"/tmp/w","port":40000,"agent":"claude"}}"#
            ),
            format!(
                r#"{head}"type":"attempt_result","run_id":"p-abc123","task":"a","attempt":2,"commit":"{c}","tree":"{b}","changed":3}}"#
            ),
            format!(
                r#"{head}"type":"landed","run_id":"p-abc123","task":"a","attempt":2,"target":"main","old":"{a}","new":"{c}","strategy":"rebase","commits":["{b}","{c}"]}}"#
            ),
            format!(
                r#"{head}"type":"landing_voided","run_id":"p-abc123","task":"a","attempt":2,"new":"{c}","reason":"the target moved"}}"#
            ),
            format!(
                r#"{head}"type":"claimed","run_id":"p-abc123","what":"a","attempt":2,"commit":"{a}","lease_secs":60,"host":"h","pid":42}}"#
            ),
            format!(
                r#"{head}"type":"branch_approved","branch":"feature","commit":"{c}","tree":"{b}","approver":"A <a@example.com>","signed":false,"approval":"{a}"}}"#
            ),
        ];
        for line in lines {
            let record = Record::from_json(line.as_bytes())
                .unwrap_or_else(|e| panic!("{line} does not parse: {e}"));
            let again = serde_json::to_vec(&record).expect("serialises");
            assert_eq!(String::from_utf8_lossy(&again), line);
        }
        // An id that is not one makes the record unreadable, not a string
        // that later readers trip over.
        let forged = format!(
            r#"{head}"type":"landing_voided","run_id":"p-abc123","task":"a","attempt":2,"new":"HEAD~1","reason":"x"}}"#
        );
        assert!(matches!(
            Record::from_json(forged.as_bytes()),
            Err(BadRecord::NotAnEvent(_))
        ));
    }

    #[test]
    fn unknown_type_is_an_error_not_a_guess() {
        let json = r#"{"version":1,"writer":"abc","seq":1,"clock":1,"time_ms":0,"type":"from_the_future"}"#;
        assert!(serde_json::from_str::<Record>(json).is_err());
    }

    /// Clocks above the ceiling seen in other logs are not taken over, an
    /// own clock above it refuses, and the next clocks stop at the
    /// ceiling instead of wrapping.
    #[test]
    fn lamport_clocks_stop_at_the_ceiling_and_never_wrap() {
        assert_eq!(lamport_base(5, [3, 9]), Some(9));
        assert_eq!(lamport_base(5, [u64::MAX, MAX_CLOCK + 1]), Some(5));
        assert_eq!(lamport_base(5, [MAX_CLOCK]), Some(MAX_CLOCK));
        assert_eq!(lamport_base(MAX_CLOCK + 1, [1]), None);
        assert_eq!(lamport_next(9, 1), 10);
        assert_eq!(lamport_next(MAX_CLOCK - 1, 1), MAX_CLOCK);
        assert_eq!(lamport_next(MAX_CLOCK, 3), MAX_CLOCK);
        assert_eq!(lamport_next(u64::MAX, u64::MAX), MAX_CLOCK);
        assert_eq!(MAX_CLOCK, 9_007_199_254_740_991);
    }
}
