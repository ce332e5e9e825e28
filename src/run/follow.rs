//! Following a run another process drives: what a second `git orch run`
//! of the same plan does instead of driving it twice.
//!
//! The follower reads the run from the log every half second until it
//! ends, and reports how it ended as if it had driven it, so both commands
//! exit with the run's code. If the driver dies without ending the run
//! (its lock is free and no stop is recorded), the follower says so and
//! the caller takes the run over.

use std::time::Duration;

use crate::event::StopReason;
use crate::ids::RunId;
use crate::state::{RunState, SharedIndex};
use crate::store::Store;

use super::context::RunError;
use super::driver::DriveOutcome;

/// How following ended.
#[derive(Debug, Clone)]
pub enum Followed {
    /// The run ended (or stopped) under its driver.
    Ended(DriveOutcome),
    /// The driver went away without ending the run: take it over.
    DriverGone,
}

/// Follows `run` until it ends or its driver goes; `tick` sees the run
/// at every look.
pub fn follow(
    store: &Store,
    state: &SharedIndex,
    run: &RunId,
    tick: &dyn Fn(&RunState),
) -> Result<Followed, RunError> {
    loop {
        let r = state
            .read(store, |index| Ok::<_, RunError>(index.run(run)?.cloned()))?
            .ok_or_else(|| RunError::Internal(format!("run {run} vanished from the log")))?;
        tick(&r);
        if let Some(ended) = finished(&r) {
            return Ok(ended);
        }
        if !super::control::driver_alive(store, run)? {
            // The driver writes the run's end, then lets go of its lock:
            // read the run again, or a run that just finished looks
            // abandoned and gets a second driver.
            let r = state
                .read(store, |index| Ok::<_, RunError>(index.run(run)?.cloned()))?
                .ok_or_else(|| RunError::Internal(format!("run {run} vanished from the log")))?;
            if let Some(ended) = finished(&r) {
                return Ok(ended);
            }
            return Ok(match &r.stopped {
                Some((StopReason::Breaker, why)) => {
                    Followed::Ended(DriveOutcome::Breaker(why.clone()))
                }
                Some((StopReason::Budget, _)) => Followed::Ended(DriveOutcome::Budget {
                    spent: r.cost(),
                    budget: r.settings.budget_usd.unwrap_or_default(),
                }),
                Some((StopReason::Interrupted, _)) => Followed::Ended(DriveOutcome::Interrupted),
                Some((StopReason::Config, why)) => {
                    Followed::Ended(DriveOutcome::Config(why.clone()))
                }
                Some((StopReason::AwaitingApproval, why)) => {
                    Followed::Ended(DriveOutcome::AwaitingApproval(why.clone()))
                }
                None => Followed::DriverGone,
            });
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// How `r` ended, once it has finished.
fn finished(r: &RunState) -> Option<Followed> {
    let summary = r.finished.as_ref()?;
    Some(Followed::Ended(
        if summary.done + summary.skipped == summary.tasks {
            DriveOutcome::Finished(summary.clone())
        } else {
            DriveOutcome::Incomplete(summary.clone())
        },
    ))
}
