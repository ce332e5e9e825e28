//! `git orch worker`: work approved runs from a shared remote.

use std::time::Duration;

use clap::Args;

use super::error::CommandError;
use super::exit;
use super::globals::{CommandResult, GlobalArgs, open_store};
use super::{output, progress};
use crate::clock::now_ms;
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
    /// The remote every machine shares (default: config orch.remote, which
    /// `git orch init --remote` sets).
    #[arg(long, value_name = "REMOTE")]
    pub remote: Option<String>,
    /// Run every attempt here with this agent instead of the run's.
    #[arg(long, value_name = "NAME", add = super::completions::agents())]
    pub agent: Option<String>,
    /// Most attempts running here at once (default: config orch.cap, else
    /// 2).
    #[arg(long, value_name = "N")]
    pub cap: Option<usize>,
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

/// What the worker's live view needs to take a run's rows from the log.
struct Model {
    store: std::sync::Mutex<crate::store::Store>,
    state: crate::state::SharedIndex,
    /// Runs this worker showed rows of, with their plans.
    runs:
        std::sync::Mutex<std::collections::BTreeMap<crate::ids::RunId, Option<crate::plan::Plan>>>,
}

impl Model {
    /// Takes `run`'s rows from the log again (after a task's state
    /// changed: another worker may have landed what this one ran).
    fn reseed(&self, renderer: &progress::Renderer, run: &str) {
        let Ok(id) = crate::ids::RunId::new(run) else {
            return;
        };
        let store = self.store.lock().unwrap_or_else(|e| e.into_inner());
        let mut runs = self.runs.lock().unwrap_or_else(|e| e.into_inner());
        let Ok(Some(state)) = self.state.read(&store, |index| {
            Ok::<_, crate::store::StoreError>(index.run(&id)?.cloned())
        }) else {
            return;
        };
        let plan = runs.entry(id).or_insert(None);
        if plan.is_none() {
            *plan = crate::run::plan_of(&store, &state).ok().map(|r| r.plan);
        }
        if let Some(plan) = plan {
            // Only tasks this worker shows: other workers' tasks are theirs.
            for row in crate::run::view::task_rows(&state, plan, now_ms()) {
                if renderer.has_row(row.task.as_str()) {
                    renderer.show(&row);
                }
            }
        }
    }

    /// Every run shown, once more, before the last frame.
    fn reseed_all(&self, renderer: &progress::Renderer) {
        let runs: Vec<String> = self
            .runs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .map(|r| r.to_string())
            .collect();
        for r in runs {
            self.reseed(renderer, &r);
        }
    }
}

fn render(renderer: &progress::Renderer, model: &Model, r: Report) {
    match r {
        Report::Run { run, progress } => {
            let reseed = super::run::changes_state(&progress);
            renderer.handle(progress);
            if reseed {
                model.reseed(renderer, &run);
            }
        }
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
        Report::Skipped { run, why, cause } => {
            let hint = super::error::skip_hint(&cause)
                .map(|h| format!("\nhint: {h}"))
                .unwrap_or_default();
            renderer.note(&format!("run {run}: not working it here: {why}{hint}"))
        }
        Report::SyncFailed(why) => renderer.note(&format!("sync failed (will try again): {why}")),
        Report::PushFailed {
            what,
            why,
            retry_in,
        } => renderer.note(&format!(
            "could not push {what}: {why} (trying again in {:.1}s)",
            retry_in.as_secs_f64()
        )),
        Report::Finished { run, summary } => {
            model.reseed(renderer, &run);
            renderer.note(&format!(
                "Run {run} finished: {} of {} tasks done, {} attempts.",
                summary.done, summary.tasks, summary.attempts
            ))
        }
    }
}

pub fn run(cli: &GlobalArgs, args: &WorkerArgs) -> CommandResult {
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
    let remote = match &args.remote {
        Some(r) => r.clone(),
        None => store.config_get("orch.remote")?.ok_or_else(|| {
            CommandError::with_code(
                exit::USAGE,
                "no remote: pass --remote <remote>, or set orch.remote (`git orch init --remote <remote>` does)",
            )
        })?,
    };
    let cap = match args.cap {
        Some(c) => c,
        None => {
            let head = store.resolve_commit("HEAD")?;
            let values = store.project_config(head)?;
            let settings = crate::config::Settings::from_values(&values).map_err(|e| {
                CommandError::error(format!(
                    "{e}\nhint: fix .orch/config, or the orch.* keys of this repository"
                ))
            })?;
            let configured = values
                .section("orch", None)
                .is_some_and(|s| s.get("cap").is_some());
            if configured { settings.cap } else { 2 }
        }
    };
    if cap == 0 {
        return Err(CommandError::with_code(
            exit::USAGE,
            "--cap must be at least 1",
        ));
    }
    let model = Model {
        store: std::sync::Mutex::new(open_store(&cli.directory)?),
        state: crate::state::SharedIndex::open(&store)?,
        runs: Default::default(),
    };
    let renderer = std::sync::Arc::new(progress::Renderer::new(format!("worker on {remote}")));
    let opts = WorkerOptions {
        on_step: Some(crate::run::StepObserver(std::sync::Arc::new({
            let renderer = renderer.clone();
            move |p| renderer.handle(p)
        }))),
        remote: remote.clone(),
        agent: args.agent.clone(),
        cap,
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
        for line in crate::preflight::notices(&settings) {
            output::status(&line);
        }
        for line in crate::sandbox::warm_notices(&settings.sandbox, store.common_dir()) {
            output::status(&line);
        }
    }
    let mut worker = Worker::new(store, opts)?;
    crate::process::limit_malloc_arenas(2);
    let runtime = super::globals::scheduler()?;
    output::status(&format!(
        "Worker on {remote} (cap {cap}, lease {}s).",
        args.lease
    ));
    let outcome = runtime.block_on(worker.work(&|r| {
        if let Report::Run { run, .. } = &r
            && let Ok(id) = crate::ids::RunId::new(run)
        {
            model
                .runs
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(id)
                .or_insert(None);
        }
        render(&renderer, &model, r)
    }));
    // The last frame as the log has it: what other workers landed too.
    model.reseed_all(&renderer);
    renderer.finish();
    match outcome? {
        WorkerOutcome::Done { incomplete } if incomplete.is_empty() => Ok(exit::OK),
        WorkerOutcome::Done { incomplete } => {
            let lines: Vec<String> = incomplete
                .iter()
                .map(|(run, s)| {
                    format!(
                        "run {run} ended with {} done, {} failed, {} blocked, {} cancelled of {} tasks",
                        s.done, s.failed, s.blocked, s.cancelled, s.tasks
                    )
                })
                .collect();
            let first = &incomplete[0].0;
            Err(CommandError::with_code(
                exit::BLOCKED,
                format!(
                    "{}\nhint: `git orch status {first}` shows why; `git orch retry <task> --run {first}` and `git orch sync` give a task a fresh budget for the workers",
                    lines.join("\n")
                ),
            ))
        }
        WorkerOutcome::Interrupted => Err(CommandError::with_code(
            exit::INTERRUPTED,
            "worker interrupted; its attempts were stopped and recorded\nhint: start it again to go on",
        )),
    }
}
