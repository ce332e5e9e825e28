//! `git orch run`: start or resume the run of an approved plan.

use clap::Args;

use super::error::CommandError;
use super::exit;
use super::globals::{CommandResult, GlobalArgs, open_store};
use super::{output, progress};
use crate::clock::now_ms;
use crate::ids::{PlanId, TaskId};
use crate::run::progress::Progress;
use crate::run::{self, DriveOutcome, Prepared, RunError, RunOptions};

/// Run an approved plan: one worktree, branch and agent per attempt.
///
/// Refuses unless `git orch approve verify <plan>` passes. Running the same
/// command again resumes an unfinished run instead of starting another.
/// Exit codes: 0 all tasks done, 3 some failed, 64 budget spent, 65 circuit
/// breaker tripped, 78 an agent or the sandbox cannot work as configured
/// (checked before anything starts; nothing is retried), 130 interrupted
/// (rerun to resume).
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The plan id.
    #[arg(add = super::completions::plans())]
    pub plan: String,
    /// Most attempts running at once (default: config orch.cap, else 4).
    #[arg(long, value_name = "N")]
    pub cap: Option<usize>,
    /// Agent for subtasks that name none (default: config orch.agent, else
    /// claude).
    #[arg(long, value_name = "NAME", add = super::completions::agents())]
    pub agent: Option<String>,
    /// Branch results land on (default: the plan's target, else config
    /// orch.target, else the current branch).
    #[arg(long, value_name = "BRANCH", add = super::completions::branches())]
    pub target: Option<String>,
    /// Base the run on this commit instead of the target's tip: its
    /// .orch/config and analysis are read there, and attempts start from it
    /// until the target's tip contains it (then from the tip, so later
    /// attempts see what landed).
    #[arg(long, value_name = "REF")]
    pub base: Option<String>,
    /// Stop an agent after this long (e.g. 900, 15m, 2h; default: config
    /// orch.timeout, else 30m).
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub timeout: Option<std::time::Duration>,
    /// Stop dispatching once reported agent cost exceeds this many USD.
    #[arg(long, value_name = "USD")]
    pub budget: Option<f64>,
    /// Show what would run; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Record the run and dispatch nothing here: workers on other machines
    /// (`git orch worker`) pick it up after `git orch sync`.
    #[arg(long, conflicts_with = "dry_run")]
    pub start_only: bool,
    /// Run TASK again even though an earlier run of the plan landed it
    /// (repeatable). Without it, a rerun never redoes landed work.
    #[arg(long, value_name = "TASK", add = super::completions::tasks())]
    pub redo: Vec<String>,
    /// Never resume: close the plan's unfinished run, if any (recorded as
    /// closed), and start a fresh run from the target's tip with the
    /// configuration there. Landed work is still carried.
    #[arg(long)]
    pub new: bool,
    /// Run every task again, landed before or not (carry nothing).
    #[arg(long, conflicts_with = "redo")]
    pub redo_all: bool,
    /// Best of N: run N attempts of each task at once (the cap and the
    /// budget count each), land the one the gates, then a reviewer, then
    /// the smaller diff choose, and archive the others. A subtask's own
    /// `candidates` list of agents wins.
    #[arg(long, value_name = "N", conflicts_with = "start_only",
          value_parser = clap::value_parser!(u32).range(1..=8))]
    pub best_of: Option<u32>,
    /// When the run ends, push what it landed on the target to the remote
    /// this clone shares (`orch.remote`; a fast-forward, never forced) and
    /// `git orch sync` the records of those landings. Without it, a run
    /// with a sharing remote says what is left to push.
    #[arg(long, conflicts_with_all = ["start_only", "dry_run"])]
    pub push: bool,
}

fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    crate::config::parse_duration(s)
        .ok_or_else(|| format!("{s:?} is not a duration (e.g. 900, 15m, 2h)"))
}

/// The plan a run executes, for its summary.
fn ctx_plan(
    store: &crate::store::Store,
    run: &crate::state::RunState,
) -> Result<crate::plan::Plan, CommandError> {
    Ok(run::plan_of(store, run)?.plan)
}

/// Prints progress lines on stderr, one per event (see
/// [`progress::plain_line`]).
pub fn print_progress(p: Progress) {
    output::status(&progress::plain_line(&p));
}

/// One row per task in plan order, as the status model gives them (a
/// resumed run has tasks done already; reasons stay on the rows).
pub fn seed_rows(
    renderer: &progress::Renderer,
    state: &crate::state::RunState,
    plan: &crate::plan::Plan,
) {
    for row in run::view::task_rows(state, plan, now_ms()) {
        renderer.show(&row);
    }
}

/// Takes the rows of run `run_id` from the log again (after a task's state
/// changed, and before the last frame), so no row stays behind the log.
pub fn reseed(
    renderer: &progress::Renderer,
    store: &crate::store::Store,
    state: &crate::state::SharedIndex,
    run_id: &crate::ids::RunId,
    plan: &crate::plan::Plan,
) {
    if let Ok(Some(r)) = state.read(store, |index| {
        Ok::<_, crate::store::StoreError>(index.run(run_id)?.cloned())
    }) {
        seed_rows(renderer, &r, plan);
    }
}

/// Whether a progress event changes a task's state in the log.
pub fn changes_state(p: &Progress) -> bool {
    matches!(
        p,
        Progress::Ended { .. }
            | Progress::Landed(_)
            | Progress::LandingFailed { .. }
            | Progress::Judged { .. }
    )
}

pub fn run(cli: &GlobalArgs, args: &RunArgs) -> CommandResult {
    let store = open_store(&cli.directory)?;
    let plan = PlanId::new(&args.plan)?;
    check_arguments(&store, &plan, args)?;
    let sharing = run::sharing_remote(&store)?;
    if args.push && sharing.is_none() {
        return Err(RunError::NoSharedRemote.into());
    }
    let opts = run_options(args)?;
    if !args.dry_run {
        finish_interrupted_landing(&store);
    }
    let mut ctx = match prepare(&store, &plan, &opts)? {
        Prepared::DryRun(d) => {
            print_dry_run(&d);
            return Ok(exit::OK);
        }
        Prepared::Started(ctx) => {
            say_started(&ctx);
            ctx
        }
        // Whether this process drives it or follows the one that does is
        // settled by the driver lock, and said then.
        Prepared::Resumed(ctx) => {
            say_warnings(&ctx.warnings);
            ctx
        }
        Prepared::NothingToDo(last) => {
            say_nothing_to_do(&store, &last)?;
            return Ok(exit::OK);
        }
    };
    if args.start_only {
        say_recorded(&ctx.run, sharing.as_deref());
        return Ok(exit::OK);
    }
    say_run_notices(&ctx);
    crate::process::limit_malloc_arenas(2);
    let runtime = super::globals::scheduler()?;
    let renderer = std::sync::Arc::new(progress::Renderer::new(format!("run {}", ctx.run)));
    let outcome = drive_with_progress(cli, &store, &runtime, &mut ctx, &renderer)?;
    if renderer.mode() == progress::Mode::Plain && !matches!(outcome, DriveOutcome::Finished(_)) {
        print_unfinished(&store, &ctx);
    }
    if let Some(remote) = &sharing {
        publish(&store, remote, &ctx.target, args.push)?;
    }
    outcome_result(&store, &ctx, outcome)
}

/// Refuses a plan that does not exist (with the nearest names) and a
/// budget that is not a non-negative number, before anything is read.
fn check_arguments(
    store: &crate::store::Store,
    plan: &PlanId,
    args: &RunArgs,
) -> Result<(), CommandError> {
    if crate::plan::revisions::latest(store, plan)?.is_none() {
        return Err(super::suggest::with_plan_hint(
            crate::plan::revisions::RevisionError::NoSuchPlan(plan.to_string()).into(),
            plan.as_str(),
            store,
        ));
    }
    if args.budget.is_some_and(|b| !(b.is_finite() && b >= 0.0)) {
        return Err(CommandError::with_code(
            exit::USAGE,
            "--budget must be a non-negative number",
        ));
    }
    Ok(())
}

/// The run's options from the command line: a `--redo` task id that is
/// not one is a usage error.
fn run_options(args: &RunArgs) -> Result<RunOptions, CommandError> {
    Ok(RunOptions {
        cap: args.cap,
        agent: args.agent.clone(),
        target: args.target.clone(),
        base: args.base.clone(),
        timeout: args.timeout,
        budget: args.budget,
        dry_run: args.dry_run,
        start_only: args.start_only,
        redo: args
            .redo
            .iter()
            .map(|t| {
                TaskId::new(t).map_err(|e| CommandError::with_code(exit::USAGE, e.to_string()))
            })
            .collect::<Result<_, _>>()?,
        new: args.new,
        redo_all: args.redo_all,
        best_of: args.best_of,
    })
}

/// A landing killed between moving the target and moving its checkout
/// left the checkout at the old tree: finish that first, or the new run
/// would refuse the landing's own files as the person's uncommitted
/// changes. What cannot be finished stays for the refusal (and `git orch
/// fsck`) to name.
fn finish_interrupted_landing(store: &crate::store::Store) {
    let _ = crate::merge::checkout::recover(store);
}

/// Prepares the run; a `--redo` task the plan does not have gets the
/// nearest names as a hint.
fn prepare(
    store: &crate::store::Store,
    plan: &PlanId,
    opts: &RunOptions,
) -> Result<Prepared, CommandError> {
    run::prepare(store, plan, opts).map_err(|e| match e {
        RunError::UnknownTask { ref plan, ref task } => {
            let (given, plans) = (task.to_string(), [plan.clone()]);
            super::suggest::with_task_hint(e.into(), &given, store, &plans)
        }
        e => e.into(),
    })
}

/// `--dry-run`: what would run, with which settings, and each task's
/// state.
fn print_dry_run(d: &run::DryRun) {
    let mut out = output::Out::new();
    out.line(&format!(
        "{} plan {} revision {} onto {} from {}",
        match (&d.run, &d.closes) {
            (Some(r), _) => format!("would resume run {r} of"),
            (None, Some(old)) => format!("would close run {old} and start a new run of"),
            (None, None) => "would start a run of".into(),
        },
        d.plan_id,
        d.revision,
        d.target,
        &d.base.to_string()[..12]
    ));
    out.line(&format!(
        "cap {}, agent {}, timeout {}s, retries {}, worktrees under {}",
        d.settings.cap,
        d.settings.agent,
        d.settings.timeout_secs,
        d.settings.retries,
        d.worktree_root.display()
    ));
    for (task, status, ready) in &d.tasks {
        let again = TaskId::new(task)
            .ok()
            .and_then(|t| d.redone.get(&t))
            .map(|why| format!(" (landed before; runs again: {why})"))
            .unwrap_or_default();
        out.line(&format!(
            "  {task:<24} {status:<10}{}{again}",
            if *ready { " ready now" } else { "" }
        ));
    }
}

fn say_warnings(warnings: &[String]) {
    for w in warnings {
        output::status(&format!("warning: {w}"));
    }
}

/// A new run: its warnings, then which run of what it is.
fn say_started(ctx: &run::RunContext) {
    say_warnings(&ctx.warnings);
    output::status(&format!(
        "Started run {} of plan {} revision {} onto {} (cap {}, agent {}).",
        ctx.run,
        ctx.plan().id,
        ctx.revision.revision,
        ctx.target,
        ctx.run_settings.cap,
        ctx.run_settings.agent
    ));
}

/// The plan's last run landed everything: its summary, and how to run
/// tasks again.
fn say_nothing_to_do(
    store: &crate::store::Store,
    last: &crate::state::RunState,
) -> Result<(), CommandError> {
    let s = run::summarize(last, &ctx_plan(store, last)?);
    output::status(&format!(
        "Nothing to do: run {} of plan {} landed all {} tasks ({} attempts, cost {}).\nhint: `git orch status {}` shows it; `git orch run {} --redo <task>` runs a task again, `--redo-all` runs them all",
        last.id,
        last.plan_id,
        s.tasks,
        s.attempts,
        super::status::run_usage_text(last),
        last.id,
        last.plan_id
    ));
    Ok(())
}

/// `--start-only`: the run is recorded, and where workers pick it up.
fn say_recorded(run_id: &crate::ids::RunId, sharing: Option<&str>) {
    output::status(&match sharing {
        // Started through the remote: the start is published already.
        Some(remote) => format!(
            "Run {run_id} is recorded and published to {remote}; nothing runs here.\nNext: `git orch worker --remote {remote}` on each machine that should work on it."
        ),
        None => format!(
            "Run {run_id} is recorded; nothing runs here.\nNext: `git orch sync` to publish it, then `git orch worker --remote <remote>` on each machine."
        ),
    });
}

/// Once per run: how agents are confined, and which cannot work here
/// (their tasks fall back past them; with no fallback the run did not
/// start), what every checkout gets ([worktree]), and the agents'
/// warnings.
fn say_run_notices(ctx: &run::RunContext) {
    for line in crate::preflight::notices(&ctx.settings) {
        output::status(&line);
    }
    for line in crate::sandbox::warm_notices(&ctx.settings.sandbox, &ctx.common_dir) {
        output::status(&line);
    }
    say_warnings(&ctx.agent_warnings);
}

/// Drives the run here with the progress shown, or follows the process
/// that drives it; the last frame shows every task as the log has it.
fn drive_with_progress(
    cli: &GlobalArgs,
    store: &crate::store::Store,
    runtime: &tokio::runtime::Runtime,
    ctx: &mut run::RunContext,
    renderer: &std::sync::Arc<progress::Renderer>,
) -> Result<DriveOutcome, CommandError> {
    let lander = lander(cli, ctx, renderer)?;
    ctx.on_step = Some(run::StepObserver(std::sync::Arc::new({
        let renderer = renderer.clone();
        move |p| renderer.handle(p)
    })));
    // Events go to the renderer; whenever one changes a task's state, the
    // rows are taken from the log again (the budget decides whether a
    // failed attempt means retrying or failed, which the event cannot say).
    // Sharing the driver's object database: a long history's pack index
    // is mapped once in this process, not once per store.
    let model_store = std::sync::Mutex::new(crate::store::Store::open_shared(store.common_dir())?);
    let on_event = |p: Progress| {
        let reseed_now = changes_state(&p);
        renderer.handle(p);
        if reseed_now {
            let store = model_store.lock().unwrap_or_else(|e| e.into_inner());
            reseed(renderer, &store, &ctx.state, &ctx.run, ctx.plan());
        }
    };
    let outcome = drive_or_follow(runtime, store, ctx, &on_event, lander, renderer);
    reseed(renderer, store, &ctx.state, &ctx.run, ctx.plan());
    renderer.finish();
    Ok(outcome?)
}

/// The landing queue the driver calls, on a store of its own, with the
/// rows seeded from the run as prepared.
fn lander(
    cli: &GlobalArgs,
    ctx: &run::RunContext,
    renderer: &progress::Renderer,
) -> Result<run::progress::Lander, CommandError> {
    let store = open_store(&cli.directory)?;
    let state = ctx
        .state
        .read(&store, |index| index.run(&ctx.run).map(|r| r.cloned()))?
        .expect("the run was just prepared");
    seed_rows(renderer, &state, ctx.plan());
    let queue = crate::merge::Queue::for_run(&store, ctx.state.clone(), &state, None, None)?;
    let queue = std::sync::Arc::new(queue);
    Ok(std::sync::Arc::new(move |cancel| {
        let q = queue.clone();
        Box::pin(async move {
            q.land_next(&cancel)
                .await
                .map_err(|e| -> run::progress::LandError { Box::new(e) })
        })
    }))
}

/// Drives the run; if another process drives it, follows that one to the
/// end (and takes over should it die first).
fn drive_or_follow(
    runtime: &tokio::runtime::Runtime,
    store: &crate::store::Store,
    ctx: &run::RunContext,
    on_event: &(dyn Fn(Progress) + Sync),
    lander: run::progress::Lander,
    renderer: &progress::Renderer,
) -> Result<DriveOutcome, RunError> {
    let run_id = &ctx.run;
    loop {
        match runtime.block_on(run::drive(ctx.clone(), on_event, lander.clone())) {
            Err(RunError::Busy { holder, .. }) => {
                renderer.note(&format!(
                    "run {run_id} is being driven by another process ({holder}); following it"
                ));
                // Rows change only when a task's state does.
                let seen = std::sync::Mutex::new(String::new());
                let followed = run::follow::follow(store, &ctx.state, run_id, &|r| {
                    let now = format!(
                        "{:?}",
                        r.attempts()
                            .map(|(t, a)| (t, a.n, a.outcome, a.landed.is_some()))
                            .collect::<Vec<_>>()
                    );
                    let mut last = seen.lock().unwrap_or_else(|e| e.into_inner());
                    if *last != now {
                        seed_rows(renderer, r, ctx.plan());
                        *last = now;
                    }
                });
                match followed {
                    Ok(run::follow::Followed::Ended(o)) => return Ok(o),
                    Ok(run::follow::Followed::DriverGone) => {
                        renderer.note(&format!(
                            "the driver of run {run_id} went away; taking the run over"
                        ));
                        continue;
                    }
                    Err(e) => return Err(e),
                }
            }
            other => return other,
        }
    }
}

/// No last frame in plain output: what is not done, and why, once more
/// at the end.
fn print_unfinished(store: &crate::store::Store, ctx: &run::RunContext) {
    let Ok(Some(r)) = ctx.state.read(store, |index| {
        Ok::<_, crate::store::StoreError>(index.run(&ctx.run)?.cloned())
    }) else {
        return;
    };
    for row in run::view::task_rows(&r, ctx.plan(), now_ms()) {
        if matches!(
            row.status,
            run::view::Status::Done | run::view::Status::Skipped
        ) {
            continue;
        }
        let attempt = row.attempt.map(|n| format!(" #{n}")).unwrap_or_default();
        output::status(&match row.detail() {
            Some(d) => format!("  {:<24} {}{attempt}: {d}", row.task.as_str(), row.status),
            None => format!("  {:<24} {}{attempt}", row.task.as_str(), row.status),
        });
    }
}

/// How the run ended, as the command's result: its summary when every
/// task is done, else the exit code of why it stopped and what to do.
fn outcome_result(
    store: &crate::store::Store,
    ctx: &run::RunContext,
    outcome: DriveOutcome,
) -> CommandResult {
    let run_id = &ctx.run;
    match outcome {
        DriveOutcome::Finished(s) => {
            // Unknown cost is not $0.00: say which it is.
            let spent = ctx
                .state
                .read(store, |index| index.run(run_id).map(|r| r.cloned()))
                .ok()
                .flatten()
                .map(|r| super::status::run_usage_text(&r))
                .unwrap_or_else(|| "unknown".into());
            output::status(&format!(
                "Run {run_id} finished: {} of {} tasks done, {} attempts, {} gate runs, cost {spent}.",
                s.done, s.tasks, s.attempts, s.gate_runs
            ));
            Ok(exit::OK)
        }
        DriveOutcome::Incomplete(s) => Err(CommandError::with_code(
            exit::BLOCKED,
            format!(
                "run {run_id} ended with {} done, {} failed, {} blocked, {} cancelled of {} tasks\nhint: `git orch status {run_id}` shows why; `git orch retry <task> --run {run_id}` gives a task a fresh budget",
                s.done, s.failed, s.blocked, s.cancelled, s.tasks
            ),
        )),
        DriveOutcome::Breaker(why) => Err(CommandError::with_code(
            exit::BREAKER,
            format!(
                "run {run_id} stopped: circuit breaker ({why})\nhint: look at the failing attempts (`git orch status {run_id}`), then rerun to resume"
            ),
        )),
        DriveOutcome::Budget { spent, budget } => Err(CommandError::with_code(
            exit::BUDGET,
            format!(
                "run {run_id} stopped: {} spent of a {} budget\nhint: rerun with a larger --budget to resume",
                crate::agent::price::usd(spent),
                crate::agent::price::usd(budget)
            ),
        )),
        DriveOutcome::LandingRefused(problem) => Err(problem.into()),
        DriveOutcome::Broken(why) => Err(CommandError::with_code(
            exit::BROKEN,
            format!(
                "run {run_id} stopped: {why}\nhint: {}, then run the same command again to resume",
                if run::disk_full(&why) {
                    "free space on this disk".to_owned()
                } else {
                    format!("fix the cause (`git orch status {run_id}` shows the failed attempts)")
                }
            ),
        )),
        DriveOutcome::Config(why) => Err(CommandError::with_code(
            exit::CONFIG,
            format!(
                "run {run_id} stopped: {why}\nhint: fix it (`git orch agents` checks every agent where it runs), then run the same command again to resume"
            ),
        )),
        DriveOutcome::AwaitingApproval(why) => Err(CommandError::with_code(
            exit::BLOCKED,
            format!(
                "run {run_id} stopped: {why}\nhint: `git orch status {run_id}` names their branches; approve each with `git orch approve --branch <branch>`, then run the same command again: the run resumes and lands them with the results queued behind them"
            ),
        )),
        DriveOutcome::Interrupted => Err(CommandError::with_code(
            exit::INTERRUPTED,
            format!("run {run_id} interrupted\nhint: run the same command again to resume"),
        )),
    }
}

/// What a driver landed is on this clone's target only: with `--push` it
/// goes to the sharing remote (then the records, by `sync`); without, the
/// run says what is left to push, so nobody starts workers from a base
/// the remote does not have.
fn publish(
    store: &crate::store::Store,
    remote: &str,
    target: &str,
    push: bool,
) -> Result<(), CommandError> {
    use crate::merge::publish::{Standing, push_target, standing};
    if push {
        let n = push_target(store, remote, target)?;
        store.sync(remote)?;
        if n > 0 {
            output::status(&format!(
                "Pushed {target} to {remote} ({n} new commit{}).",
                if n == 1 { "" } else { "s" }
            ));
        }
        return Ok(());
    }
    // Best effort: a remote out of reach now does not fail a finished run.
    match standing(store, remote, target) {
        Ok(Standing::Ahead(n)) => output::status(&format!(
            "{target} has {n} commit{} that {remote}/{target} does not: `git push {remote} {target}` and `git orch sync` publish {} (or run with --push)",
            if n == 1 { "" } else { "s" },
            if n == 1 { "it" } else { "them" },
        )),
        Ok(Standing::Diverged) => output::status(&format!(
            "warning: {target} and {remote}/{target} have diverged: merge or rebase, then push, before starting runs for workers"
        )),
        Ok(Standing::Published | Standing::Missing) | Err(_) => {}
    }
    Ok(())
}
