//! `git orch merge`: land a run's passed attempts through the merge queue.

use clap::Args;
use tokio_util::sync::CancellationToken;

use super::error::CommandError;
use super::exit;
use super::globals::{CommandResult, GlobalArgs, open_store};
use super::{output, progress};
use crate::merge::{Queue, Strategy};
use crate::run::view::Status;
use crate::run::{
    self,
    progress::{LandReport, Progress},
};

/// Land passed attempts of a run on its target through the merge queue.
///
/// Each landing builds the candidate on the current target (rebase, merge or
/// squash, in memory), runs the integration gate on it in a scratch
/// worktree, and moves the target by compare-and-swap from the exact tip it
/// built on. `run` does this on its own as attempts pass; this command lands
/// what is left (after a refusal, or with another strategy). Exit 3 if
/// something could not land or the landing was refused.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The run, or a plan id for its newest run (default: the newest
    /// unfinished one).
    #[arg(add = super::completions::runs())]
    pub run: Option<String>,
    /// How attempts land (default: config orch.mergeStrategy, else squash).
    #[arg(long, value_parser = ["rebase", "merge", "squash"])]
    pub strategy: Option<String>,
    /// Stack up to K attempts and gate only the top (default: config
    /// orch.mergeBatch, else 1).
    #[arg(long, value_name = "K")]
    pub batch: Option<usize>,
    /// Show what waits to land; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `Queue::land_all`, one landing at a time, showing which attempts are
/// landing and how each landing ends.
fn land_all(
    store: &crate::store::Store,
    runtime: &tokio::runtime::Runtime,
    queue: &Queue,
    cancel: &CancellationToken,
    renderer: &progress::Renderer,
) -> Result<LandReport, CommandError> {
    let mut total = LandReport::default();
    let mut index = crate::state::StateIndex::open(store)?;
    loop {
        index.refresh(store)?;
        let next: Vec<_> = index.run(&queue.run)?.map_or_else(Vec::new, |state| {
            queue.waiting(state).into_iter().take(queue.batch).collect()
        });
        for (e, _) in &next {
            renderer.task(e.task.id.as_str(), Status::Landing, Some(e.attempt));
        }
        let one = runtime.block_on(queue.land_next(cancel))?;
        for a in &one.landed {
            renderer.handle(Progress::Landed(a.clone()));
        }
        for (attempt, reason) in &one.failed {
            renderer.handle(Progress::LandingFailed {
                attempt: attempt.clone(),
                reason: reason.clone(),
            });
        }
        for problem in &one.warnings {
            renderer.handle(Progress::Landing {
                problem: problem.clone(),
                stops: false,
            });
        }
        // How each landing ended, in the log's words (a failed landing is a
        // retry due, or a spent budget).
        index.refresh(store)?;
        if let Some(state) = index.run(&queue.run)? {
            super::run::seed_rows(renderer, state, &queue.revision.plan);
        }
        let nothing = one.landed.is_empty() && one.failed.is_empty();
        total.warnings.extend(one.warnings);
        total.landed.extend(one.landed);
        total.failed.extend(one.failed);
        total.gate_runs += one.gate_runs;
        total.held = one.held;
        if one.refused.is_some() {
            for (e, _) in &next {
                renderer.task(e.task.id.as_str(), Status::Passed, Some(e.attempt));
            }
            total.refused = one.refused;
            return Ok(total);
        }
        if nothing || cancel.is_cancelled() {
            return Ok(total);
        }
    }
}

pub fn run(cli: &GlobalArgs, args: &MergeArgs) -> CommandResult {
    let store = open_store(&cli.directory)?;
    let state = crate::state::SharedIndex::open(&store)?;
    let r = state.read(&store, |index| {
        run::pick_run(index, args.run.as_deref())
            .map_err(|e| super::suggest::with_run_hint(e.into(), args.run.as_deref(), index))
    })?;
    let strategy = args.strategy.as_deref().and_then(Strategy::parse);
    let queue = Queue::for_run(&store, state, &r, strategy, args.batch)?;
    if args.dry_run {
        let waiting = queue.waiting(&r);
        let mut out = output::Out::new();
        if args.json {
            let list: Vec<String> = waiting.iter().map(|(e, _)| e.label()).collect();
            out.line(
                &serde_json::json!({"run": r.id, "target": r.target, "waiting": list}).to_string(),
            );
        } else {
            out.line(&format!(
                "{} attempt(s) of run {} wait to land on {} ({}, batch {}):",
                waiting.len(),
                r.id,
                r.target,
                queue.strategy.as_str(),
                queue.batch
            ));
            for (e, _) in waiting {
                out.line(&format!("  {}", e.label()));
            }
        }
        return Ok(exit::OK);
    }
    let runtime = super::globals::scheduler()?;
    let cancel = CancellationToken::new();
    let renderer = progress::Renderer::new(format!("merge run {} onto {}", r.id, r.target));
    for (e, _) in queue.waiting(&r) {
        renderer.task(e.task.id.as_str(), Status::Passed, Some(e.attempt));
    }
    let report = land_all(&store, &runtime, &queue, &cancel, &renderer);
    renderer.finish();
    let report = report?;
    if args.json {
        let json = serde_json::json!({
            "run": r.id,
            "landed": report.landed,
            "failed": report.failed,
            "refused": report.refused.as_ref().map(ToString::to_string),
            "gate_runs": report.gate_runs,
            "awaiting_approval": report.held.iter().map(|(a, branch, paths)| {
                serde_json::json!({"attempt": a, "branch": branch, "control_paths": paths})
            }).collect::<Vec<_>>(),
        });
        output::Out::new().line(&json.to_string());
    }
    if let Some(problem) = report.refused {
        return Err(problem.into());
    }
    for (attempt, branch, paths) in &report.held {
        output::status(&format!(
            "{attempt} changes control path(s) {} and waits for your approval of its result: review `git diff {}^..{branch}` (or the attempt's worktree), then `git orch approve --branch {branch}` and `git orch merge`.",
            output::clean(&paths.join(", ")),
            r.target,
        ));
    }
    output::status(&format!(
        "Landed {} attempt(s) on {} with {} integration gate run(s).",
        report.landed.len(),
        r.target,
        report.gate_runs
    ));
    Ok(if report.failed.is_empty() && report.held.is_empty() {
        exit::OK
    } else {
        exit::BLOCKED
    })
}
