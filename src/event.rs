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

use crate::ids::{PlanId, WriterId};

/// The envelope format this build writes and understands.
pub const FORMAT_VERSION: u32 = 1;

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
        commit: String,
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
        commit: String,
    },
    /// A diagnostic marker written by `git orch debug append`; used by the
    /// concurrency tests and benchmarks, harmless in a real log.
    DebugMarker { label: String, n: u64 },
}

/// A human decision on a plan revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Approve,
    Revise,
}

impl Event {
    /// The `type` tag, for commit trailers and human output.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::Initialized { .. } => "initialized",
            Event::PlanAdded { .. } => "plan_added",
            Event::ApprovalRecorded { .. } => "approval_recorded",
            Event::DebugMarker { .. } => "debug_marker",
        }
    }

    /// A one-line human summary, used as the commit subject and in `log`.
    pub fn summary(&self) -> String {
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
            Event::DebugMarker { label, n } => format!("debug marker {label} #{n}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn unknown_type_is_an_error_not_a_guess() {
        let json = r#"{"version":1,"writer":"abc","seq":1,"clock":1,"time_ms":0,"type":"from_the_future"}"#;
        assert!(serde_json::from_str::<Record>(json).is_err());
    }
}
