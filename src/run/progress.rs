//! What a run tells whoever watches it, as it happens: the values the
//! driver, its attempts and its merge queue report, and the shape of a
//! landing's report. Rendering them is the command line's business.

use tokio_util::sync::CancellationToken;

use crate::event::Outcome;

/// Something worth showing while a run goes on.
#[derive(Debug, Clone)]
pub enum Progress {
    Resumed {
        run: String,
        abandoned: usize,
    },
    Dispatched {
        task: String,
        attempt: u32,
        agent: String,
    },
    Ended {
        task: String,
        attempt: u32,
        outcome: Outcome,
        reason: Option<String>,
    },
    /// An attempt moved on to a step: `setup`, `agent NAME`, `gate NAME`.
    /// Attempts send it through [`super::context::RunContext::on_step`], from their
    /// own tasks, not through `drive`'s callback.
    Step {
        task: String,
        attempt: u32,
        step: String,
    },
    Stopping(String),
    /// Something a person must see and may have to fix; the run goes on.
    Warning(String),
    /// A landing was refused (`stops`: the run stops for it), or a
    /// checkout could not follow a landing.
    Landing {
        problem: LandingProblem,
        stops: bool,
    },
    Landed(String),
    LandingFailed {
        attempt: String,
        reason: String,
    },
    /// A best-of-N round was judged: the chosen candidate, if one passed,
    /// and every candidate best first.
    Judged {
        task: String,
        winner: Option<u32>,
        ranking: Vec<crate::event::CandidateRank>,
    },
}

/// What one landing of the merge queue did.
#[derive(Debug, Clone, Default)]
pub struct LandReport {
    /// `task/attempt` of every attempt that landed.
    pub landed: Vec<String>,
    /// `task/attempt` and why, of every attempt sent back.
    pub failed: Vec<(String, String)>,
    /// Set when the landing was refused (a dirty checkout of the target).
    pub refused: Option<LandingProblem>,
    /// What went wrong after the target moved (a checkout that could not
    /// follow), with the command that fixes it.
    pub warnings: Vec<LandingProblem>,
    /// Integration gate commands that actually ran.
    pub gate_runs: usize,
    /// `task/attempt`, branch and control paths of every passed attempt
    /// that waits for a person's approval before it may land.
    pub held: Vec<(String, String, Vec<String>)>,
}

/// What stands in a landing's way, or what it left undone, as a person
/// must resolve it. What to do about each is the CLI's hint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LandingProblem {
    /// Moving the target would change files a person changed in a
    /// checkout of it.
    #[error(
        "{branch} is checked out at {} and the landing changes files you have changed there: {}{}",
        checkout.display(),
        paths.join(", "),
        if *more > 0 { format!(" and {more} more") } else { String::new() }
    )]
    CheckoutInTheWay {
        branch: String,
        checkout: std::path::PathBuf,
        /// The first paths in the way; `more` counts the rest.
        paths: Vec<String>,
        more: usize,
    },
    /// The target moved, but a checkout of it could not follow.
    #[error(
        "{branch} moved to {} but its checkout at {} still holds the files of {} ({why})",
        &new[..12.min(new.len())],
        checkout.display(),
        &old[..12.min(old.len())]
    )]
    CheckoutNotMoved {
        branch: String,
        checkout: std::path::PathBuf,
        old: String,
        new: String,
        why: String,
        /// The command that finishes the move by hand.
        fix: String,
    },
    /// An interrupted landing cannot be completed.
    #[error("an interrupted landing must move {target} to {new}, but {cause}")]
    InterruptedLanding {
        target: String,
        new: String,
        cause: Box<LandingProblem>,
    },
}

impl LandingProblem {
    /// The problem at the bottom of an interrupted landing.
    pub fn innermost(&self) -> &LandingProblem {
        match self {
            LandingProblem::InterruptedLanding { cause, .. } => cause.innermost(),
            other => other,
        }
    }
}

/// Why a landing stopped, as the layer above (the merge queue) said it:
/// kept whole, so the command line can tell its situation and hint.
pub type LandError = Box<dyn std::error::Error + Send + Sync>;

/// Lands what waits in the run's merge queue; supplied by the layer above
/// (the merge queue), so that dispatch and landing share one driver.
pub type Lander = std::sync::Arc<
    dyn Fn(
            CancellationToken,
        ) -> std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<LandReport, LandError>> + Send>,
        > + Send
        + Sync,
>;
