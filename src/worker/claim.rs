//! Whether a claim on the remote still binds, and what a worker that wants
//! a task does about the claim it finds there: decisions made from the log
//! and the claim alone, at a given wall-clock time, so that every worker
//! looking at the same records and claim at the same time decides alike.
//!
//! Pushing the claim (the compare-and-swap that makes the decision stick)
//! and recording it are the worker's business ([`super::Worker`]).

use crate::ids::TaskId;
use crate::state::RunState;
use crate::store::Oid;
use crate::store::remote::{Claim, QUEUE_CLAIM};

/// Why a claim no longer binds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Free {
    /// Its holder released it, or its attempt ended in the log.
    Ended,
    /// Its holder stopped renewing it for longer than its lease while its
    /// attempt had not ended: the holder (a writer id) may still be at
    /// work on a machine no one can see.
    LeaseRanOut { holder: String },
}

/// Whether the claim `commit` (read from the remote) no longer binds at
/// `now_ms`: `None` while it binds.
pub fn free(run: &RunState, commit: Oid, claim: &Claim, now_ms: i64) -> Option<Free> {
    let recorded = run.claims.get(&commit.to_string());
    if recorded.is_some_and(|c| c.released) {
        return Some(Free::Ended);
    }
    if claim.what != QUEUE_CLAIM
        && let Ok(task) = TaskId::new(&claim.what)
        && let Some(t) = run.tasks.get(&task)
        && t.attempts
            .iter()
            .any(|a| a.n == claim.attempt && a.outcome.is_some())
    {
        return Some(Free::Ended);
    }
    // The last sign of life: the claim, or a renewal recorded in the log.
    let last = recorded.map_or(claim.claimed_ms, |c| c.renewed_ms.max(claim.claimed_ms));
    let lease_ms = i64::try_from(claim.lease_secs.saturating_mul(1000)).unwrap_or(i64::MAX);
    (now_ms.saturating_sub(last) > lease_ms).then(|| Free::LeaseRanOut {
        holder: claim.writer.clone(),
    })
}

/// What a worker that wants `task` should do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Another worker's claim binds: leave the task alone.
    Held,
    /// Claim the task for attempt `attempt`.
    Take {
        attempt: u32,
        /// The holder whose lease ran out, when taking over.
        took_over_from: Option<String>,
        /// The attempt the old holder left open, to record as abandoned.
        abandon: Option<u32>,
    },
}

/// The decision about `task` given the claim on the remote (`previous`,
/// with its commit), at `now_ms`.
pub fn decide(
    run: &RunState,
    task: &TaskId,
    previous: Option<(Oid, &Claim)>,
    now_ms: i64,
) -> Decision {
    let mut attempt = run.tasks.get(task).map_or(1, |t| t.next_attempt());
    let Some((commit, claim)) = previous else {
        return Decision::Take {
            attempt,
            took_over_from: None,
            abandon: None,
        };
    };
    let Some(why) = free(run, commit, claim, now_ms) else {
        return Decision::Held;
    };
    // Never reuse the number of an attempt that may still report from a
    // machine we cannot see.
    attempt = attempt.max(claim.attempt + 1);
    let Free::LeaseRanOut { holder } = why else {
        return Decision::Take {
            attempt,
            took_over_from: None,
            abandon: None,
        };
    };
    let open = run
        .tasks
        .get(task)
        .and_then(|t| t.attempts.iter().find(|a| a.n == claim.attempt))
        .is_some_and(|a| a.outcome.is_none());
    Decision::Take {
        attempt,
        took_over_from: Some(holder),
        abandon: open.then_some(claim.attempt),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Event, Outcome};
    use crate::state::history::{History, settings, task};

    const LEASE_SECS: u64 = 30;

    fn claim(what: &str, attempt: u32, claimed_ms: i64) -> Claim {
        Claim {
            version: 1,
            run: "r1".into(),
            what: what.into(),
            attempt,
            writer: "other-writer".into(),
            host: "other-host".into(),
            pid: 7,
            lease_secs: LEASE_SECS,
            claimed_ms,
        }
    }

    fn commit(n: u8) -> Oid {
        format!("{n:02x}").repeat(20).parse().expect("hex")
    }

    /// Records the claim `commit` on attempt `attempt` of `what`.
    fn claimed(h: &mut History, what: &str, attempt: u32, commit: Oid) {
        let run_id = h.run_id().clone();
        h.push(Event::Claimed {
            run_id,
            what: what.into(),
            attempt,
            commit,
            lease_secs: LEASE_SECS,
            host: "other-host".into(),
            pid: 7,
            took_over_from: None,
        });
    }

    #[test]
    fn a_task_nobody_claimed_is_taken_for_its_next_attempt() {
        let mut h = History::started(settings());
        let t = task("a");
        assert_eq!(
            decide(&h.state(), &t, None, 0),
            Decision::Take {
                attempt: 1,
                took_over_from: None,
                abandon: None
            }
        );
        h.created("a", 1, "fake").finished(
            "a",
            1,
            Outcome::Failed,
            Some(crate::event::FailureClass::Gate),
        );
        assert!(matches!(
            decide(&h.state(), &t, None, 0),
            Decision::Take { attempt: 2, .. }
        ));
    }

    #[test]
    fn a_claim_binds_for_its_lease_counted_from_its_last_renewal() {
        let mut h = History::started(settings());
        let c = claim("a", 1, 1_000);
        h.at(1_000).created("a", 1, "fake");
        claimed(&mut h, "a", 1, commit(1));
        let lease = LEASE_SECS as i64 * 1000;
        let t = task("a");
        let at = |h: &History, now| decide(&h.state(), &t, Some((commit(1), &c)), now);
        assert_eq!(at(&h, 1_000 + lease), Decision::Held, "exactly the lease");
        // A renewal recorded in the log moves the lease on.
        let run_id = h.run_id().clone();
        h.at(20_000).push(Event::ClaimRenewed {
            run_id,
            commit: commit(1),
        });
        assert_eq!(at(&h, 1_001 + lease), Decision::Held);
        assert_eq!(at(&h, 20_000 + lease), Decision::Held);
        assert_eq!(
            at(&h, 20_001 + lease),
            Decision::Take {
                attempt: 2,
                took_over_from: Some("other-writer".into()),
                abandon: Some(1),
            },
            "taken over: the open attempt is recorded abandoned"
        );
    }

    #[test]
    fn a_claim_whose_attempt_ended_or_was_released_is_free_at_once() {
        let t = task("a");
        let c = claim("a", 1, 1_000);
        let mut ended = History::started(settings());
        ended.created("a", 1, "fake");
        claimed(&mut ended, "a", 1, commit(1));
        ended.finished(
            "a",
            1,
            Outcome::Failed,
            Some(crate::event::FailureClass::Gate),
        );
        assert_eq!(
            free(&ended.state(), commit(1), &c, 1_000),
            Some(Free::Ended)
        );
        assert_eq!(
            decide(&ended.state(), &t, Some((commit(1), &c)), 1_000),
            Decision::Take {
                attempt: 2,
                took_over_from: None,
                abandon: None
            }
        );
        let mut released = History::started(settings());
        released.created("a", 1, "fake");
        claimed(&mut released, "a", 1, commit(1));
        let run_id = released.run_id().clone();
        released.push(Event::ClaimReleased {
            run_id,
            commit: commit(1),
        });
        assert_eq!(
            free(&released.state(), commit(1), &c, 1_000),
            Some(Free::Ended)
        );
    }

    #[test]
    fn an_attempt_number_claimed_elsewhere_is_never_reused() {
        // The other worker claimed attempt 3 but its `attempt_created`
        // never reached this clone's log; its lease ran out.
        let h = History::started(settings());
        let c = claim("a", 3, 0);
        let later = LEASE_SECS as i64 * 1000 + 1;
        assert_eq!(
            decide(&h.state(), &task("a"), Some((commit(2), &c)), later),
            Decision::Take {
                attempt: 4,
                took_over_from: Some("other-writer".into()),
                abandon: None,
            },
            "nothing open here to abandon; attempt 3 may still report"
        );
    }

    #[test]
    fn the_queue_claim_is_a_lease_like_any_other() {
        let h = History::started(settings());
        let c = claim(QUEUE_CLAIM, 0, 0);
        assert_eq!(free(&h.state(), commit(3), &c, 1), None);
        assert_eq!(
            free(&h.state(), commit(3), &c, LEASE_SECS as i64 * 1000 + 1),
            Some(Free::LeaseRanOut {
                holder: "other-writer".into()
            })
        );
    }
}
