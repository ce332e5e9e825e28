//! The merge queue: lands passed attempts on the target branch, one
//! landing at a time, and only ever moves the target to a tree that passed
//! the integration gate on top of exactly the old target.
//!
//! A landing takes the queue lock (one per target, so runs sharing a target
//! never land at once), builds candidates in memory on the current tip
//! ([`candidate`]), gates the candidate in a scratch worktree under
//! `.git/orch/scratch/`, records the `landed` events, then moves
//! `refs/heads/<target>` by compare-and-swap from the exact tip it built on
//! (the next landing completes or voids a landing interrupted between the
//! two; with a remote, one atomic push does both). If someone moved the target
//! meanwhile, the swap fails and the candidate is rebuilt and re-gated. A
//! working tree with the target checked out is fast-forwarded when clean;
//! when dirty, the landing is refused and nothing moves. A person's own
//! branch takes the same path ([`hand`], `git orch land`) with an approval
//! bound to its tree. `verify` answers, for any commit, whether git-orch
//! landed it from an approved, gated run or an approved, gated branch.

pub mod candidate;
pub mod checkout;
pub mod hand;
pub mod queue;
pub mod verify;

pub use candidate::Strategy;
pub use queue::Queue;

/// What can stop the merge queue.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("{0}")]
    Store(#[from] crate::store::StoreError),
    #[error("{0}")]
    Run(#[from] crate::run::RunError),
    #[error("{0}")]
    Config(String),
}
