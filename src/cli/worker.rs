//! `git orch worker`: work approved runs from a shared remote.

use std::time::Duration;

use clap::Args;

use super::{Cli, CommandError, CommandResult, exit, open_store, output, progress};
use crate::worker::{Report, Worker, WorkerOptions, WorkerOutcome};

/// Work the approved runs of a shared remote, with other machines.
///
/// Loops: sync; claim ready tasks by a non-forced push of
/// refs/orch/claims/<run>/<task> (a rejected push means another worker won);
/// run the attempt and its gates here; push the result; land passed
/// attempts while holding the run's queue claim, by an atomic non-forced
/// push of the target and the log. Claims are leases renewed while the
/// attempt runs; an expired claim is taken over and its attempt recorded
/// abandoned. Start runs for workers with `git orch run <plan>
/// --start-only` and `git orch sync`.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// The remote every machine shares.
    #[arg(long, value_name = "REMOTE")]
    pub remote: String,
    /// Run every attempt here with this agent instead of the run's.
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    /// Most attempts running here at once.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub cap: usize,
    /// How long a claim holds without renewal, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub lease: u64,
    /// Seconds between rounds (sync, claim, land).
    #[arg(long, value_name = "SECS", default_value_t = 2.0)]
    pub poll: f64,
    /// One round: claim up to --cap tasks, run and land them, exit.
    #[arg(long)]
    pub once: bool,
    /// Exit when no unfinished run is left (default: keep waiting for work).
    #[arg(long)]
    pub until_done: bool,
}

fn render(renderer: &progress::Renderer, r: Report) {
    match r {
        Report::Run { progress, .. } => renderer.handle(progress),
        Report::Claimed {
            run,
            task,
            attempt,
            took_over_from: Some(from),
        } => renderer.note(&format!(
            "  {task:<24} claimed attempt {attempt} of {run}, taken over from {from} (its lease ran out)"
        )),
        Report::Claimed {
            run,
            task,
            attempt,
            took_over_from: None,
        } => renderer.note(&format!("  {task:<24} claimed attempt {attempt} of {run}")),
        Report::LeaseLost { run, task } => renderer.note(&format!(
            "  {task:<24} another worker took the claim on {run}/{task}; stopping the attempt here"
        )),
        Report::Skipped { run, why } => {
            renderer.note(&format!("run {run}: not working it here: {why}"))
        }
        Report::SyncFailed(why) => renderer.note(&format!("sync failed (will try again): {why}")),
        Report::Finished { run, summary } => renderer.note(&format!(
            "Run {run} finished: {} of {} tasks done, {} attempts.",
            summary.done, summary.tasks, summary.attempts
        )),
    }
}

pub fn run(cli: &Cli, args: &WorkerArgs) -> CommandResult {
    if !(args.poll.is_finite() && args.poll > 0.0) {
        return Err(CommandError::with_code(
            exit::USAGE,
            "--poll must be a positive number of seconds",
        ));
    }
    if args.lease == 0 {
        return Err(CommandError::with_code(
            exit::USAGE,
            "--lease must be at least 1 second",
        ));
    }
    let store = open_store(&cli.directory)?;
    let renderer = std::sync::Arc::new(progress::Renderer::new(format!(
        "worker on {}",
        args.remote
    )));
    let opts = WorkerOptions {
        on_step: Some(crate::run::StepObserver(std::sync::Arc::new({
            let renderer = renderer.clone();
            move |p| renderer.handle(p)
        }))),
        remote: args.remote.clone(),
        agent: args.agent.clone(),
        cap: args.cap,
        lease: Duration::from_secs(args.lease),
        poll: Duration::from_secs_f64(args.poll),
        once: args.once,
        until_done: args.until_done,
    };
    // Once: how agents will be confined here (by this clone's settings;
    // each run reads its own at its base).
    if let Ok(Some(head)) = store.resolve_commit("HEAD")
        && let Ok(values) = store.project_config(Some(head))
        && let Ok(settings) = crate::config::Settings::from_values(&values)
    {
        for line in crate::preflight::notices(&settings, &[]) {
            output::status(&line);
        }
    }
    let mut worker = Worker::new(store, opts).map_err(|e| CommandError::error(e.to_string()))?;
    crate::process::limit_malloc_arenas(2);
    let runtime = super::scheduler()?;
    output::status(&format!(
        "Worker on {} (cap {}, lease {}s).",
        args.remote, args.cap, args.lease
    ));
    let outcome = runtime.block_on(worker.work(&|r| render(&renderer, r)));
    renderer.finish();
    match outcome.map_err(|e| CommandError::error(e.to_string()))? {
        WorkerOutcome::Done => Ok(exit::OK),
        WorkerOutcome::Interrupted => Err(CommandError::with_code(
            exit::INTERRUPTED,
            "worker interrupted; its attempts were stopped and recorded\nhint: start it again to go on",
        )),
    }
}
