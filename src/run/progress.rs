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
    /// Attempts send it through [`super::RunContext::on_step`], from their
    /// own tasks, not through `drive`'s callback.
    Step {
        task: String,
        attempt: u32,
        step: String,
    },
    Stopping(String),
    /// Something a person must see and may have to fix; the run goes on.
    Warning(String),
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
    pub refused: Option<String>,
    /// What went wrong after the target moved (a checkout that could not
    /// follow), with the command that fixes it.
    pub warnings: Vec<String>,
    /// Integration gate commands that actually ran.
    pub gate_runs: usize,
    /// `task/attempt`, branch and control paths of every passed attempt
    /// that waits for a person's approval before it may land.
    pub held: Vec<(String, String, Vec<String>)>,
}

/// Lands what waits in the run's merge queue; supplied by the layer above
/// (the merge queue), so that dispatch and landing share one driver.
pub type Lander = std::sync::Arc<
    dyn Fn(
            CancellationToken,
        ) -> std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<LandReport, String>> + Send>,
        > + Send
        + Sync,
>;
