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

pub mod bisect;
pub mod candidate;
pub mod checkout;
pub mod hand;
pub mod integration;
pub mod publish;
pub mod queue;
pub mod verify;

pub use candidate::Strategy;
pub use queue::Queue;

/// What can stop the merge queue or a hand landing. Each variant is one
/// situation; the command line gives each its exit code and hints.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error(transparent)]
    Run(#[from] crate::run::RunError),
    /// `.orch/config` at the commit the landing reads it from.
    #[error("{0}")]
    Settings(#[source] crate::config::ConfigError),
    #[error("no run {0}")]
    NoRun(crate::ids::RunId),
    #[error("no branch {0}")]
    NoBranch(String),
    #[error("the target branch {target} does not exist")]
    NoTarget { target: String },
    /// Other landings kept moving the target faster than this one could
    /// build and gate on top of it.
    #[error("{target} kept moving while landing ({tries} tries)")]
    TargetMoving { target: String, tries: usize },
    #[error("{reference} moved here while landing")]
    MovedHere { reference: String },
    #[error("preparing the scratch worktree: {0}")]
    Scratch(#[source] crate::store::StoreError),
    /// Another lander took this one's claim (it stopped renewing it: a
    /// frozen or partitioned machine); this one must not publish.
    #[error("the merge queue claim {claim} was taken over; this landing stops")]
    LeaseLost { claim: String },
    #[error("{remote} refused the landing: {why}")]
    PushRefused { remote: String, why: String },
    #[error(
        "{target} here has commits that {remote}/{target} does not have; landing would publish them unreviewed"
    )]
    Unpublished { target: String, remote: String },
    /// The checkout of the target cannot follow (files the user changed),
    /// or following it left files to finish by hand.
    #[error("{problem}{}", if *following { " (the target cannot follow the remote until then)" } else { "" })]
    Checkout {
        problem: Box<crate::run::progress::LandingProblem>,
        /// Met while bringing the target to the remote's.
        following: bool,
    },
    /// A hand landing that cannot go ahead (no shared history, a strategy
    /// that is not one); the text says why.
    #[error("{0}")]
    Refused(String),
}
