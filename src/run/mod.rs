//! Runs: an approved plan revision becomes attempts, one worktree and
//! branch each, with an agent in each, bounded by a cap, recorded event by
//! event so that a crash or Ctrl-C loses nothing and a rerun resumes.
//!
//! `context` holds what its files share. `prepare` checks the approval, settles the target, base and settings,
//! and starts a run or finds the unfinished one to resume. `driver` is the
//! scheduler that holds the run's driver lock and dispatches; `attempt`
//! carries one attempt from branch to verdict; `workspace` makes and
//! commits worktrees; `gating` gives an attempt's gates their subject and
//! environment; `control` records retry/skip/cancel and cleans up.

pub mod attempt;
pub mod context;
pub mod control;
pub mod driver;
pub mod follow;
pub mod gating;
pub mod notes;
pub mod prepare;
pub mod progress;
pub mod prompt;
pub mod schedule;
pub mod view;
pub mod warm;
pub mod workspace;

pub use context::{DryRun, Prepared, RunContext, RunError, RunOptions, StepObserver};
pub use driver::{DriveOutcome, disk_full, drive};
pub use prepare::{
    approval_verdict, context_for, driver_lock_path, host, pick_run, plan_of, prepare,
    sharing_remote, summarize, unfinished, worktree_root,
};
pub use schedule::retries_for;
