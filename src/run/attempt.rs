//! One attempt, from branch to verdict.
//!
//! create branch + record → add worktree → hooks, prompt, retry context →
//! setup command → agent (own process group, timeout, masked output) →
//! result commit → gate stack → note, keep ref → `attempt_finished`.
//!
//! This file tells the story in order; every step that touches the
//! repository or the worktree is one method of [`Workspace`]
//! (`run::workspace`), every gate's subject and environment comes from
//! `run::gating`.
//!
//! Every step is recorded as it happens, so a driver that dies at any point
//! leaves a log from which the next driver can tell what was done: an
//! attempt without `attempt_finished` is open, and a resumed driver finds
//! and abandons it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

use crate::agent::{AgentSpec, Availability};
use crate::event::{AgentUsage, Event, Failure, FailureClass, GateStatus, Outcome};
use crate::gate::context::RetryContext;
use crate::gate::{self, GateDef, GateEnv};
use crate::plan::Subtask;
use crate::process::{GroupChild, GroupSpec};
use crate::store::Store;

use super::context::{RunContext, RunError};
use super::gating::{AttemptEnv, AttemptGates};
use super::workspace::{CheckedOut, ImportedResult, Workspace};

/// Grace between SIGTERM and SIGKILL when an agent is stopped.
pub const GRACE: Duration = Duration::from_secs(3);
/// Bytes of agent output kept in its event.
pub const TAIL_BYTES: usize = 2 * 1024;

/// Everything one attempt needs.
pub struct Attempt {
    pub ctx: Arc<RunContext>,
    /// The commit the attempt's change is judged against (and landed
    /// from): where the task's work begins.
    pub base: crate::store::Oid,
    /// Where its worktree starts when not at `base`: the previous
    /// attempt's result, for a retry that continues it.
    pub start: Option<crate::store::Oid>,
    pub task: Subtask,
    pub n: u32,
    /// Agents to try, in order, when one is unavailable.
    pub agents: Vec<String>,
    pub retry: Option<RetryContext>,
    pub gates: Vec<GateDef>,
    /// This program, for the commit hook.
    pub exe: PathBuf,
    /// Its place in a best-of-N round.
    pub candidate: Option<crate::event::Candidate>,
}

impl Attempt {
    /// Attempt `n` of `task`: its agents, gates, base, and, for a retry,
    /// what it is told of the attempt before and where it starts.
    pub fn next(
        store: &Store,
        ctx: &Arc<RunContext>,
        run: &crate::state::RunState,
        task: &crate::ids::TaskId,
        n: u32,
        exe: PathBuf,
    ) -> Result<Self, RunError> {
        let sub = ctx
            .plan()
            .subtask(task.as_str())
            .expect("ready tasks come from the plan")
            .clone();
        let retry = super::schedule::retry_context(run, task, ctx.settings.retry_from);
        // A retry that continues the previous attempt is judged from that
        // attempt's base, and its worktree starts at that attempt's result.
        let (base, start) = match retry.as_ref().and_then(|r| r.previous.as_ref()) {
            Some(p) if p.continued => {
                (store.parse_oid(&p.base)?, Some(store.parse_oid(&p.commit)?))
            }
            _ => (super::schedule::attempt_base(store, ctx)?, None),
        };
        Ok(Attempt {
            base,
            start,
            agents: super::schedule::agent_chain(&ctx.run_settings, run, &sub),
            retry,
            gates: crate::gate::stack(&ctx.settings, ctx.plan(), &sub),
            ctx: ctx.clone(),
            task: sub,
            n,
            exe,
            candidate: None,
        })
    }
}

/// How an attempt ended, for the driver.
#[derive(Debug, Clone)]
pub struct AttemptEnd {
    pub task: crate::ids::TaskId,
    pub n: u32,
    pub outcome: Outcome,
    pub failure: Option<Failure>,
    pub agent: String,
}

/// What the agent's run came to.
struct AgentOutcome {
    ended: crate::process::Ended,
    unavailable: Option<String>,
    /// Unavailable for the rest of the run: its key was refused, its
    /// program is missing.
    permanent: bool,
    /// The agent's own last error message.
    cause: Option<String>,
    /// The timeout it ran under.
    timeout: Duration,
    /// Its `agent_finished` event when not recorded yet: it goes into the
    /// log with the result commit, one append where there were two.
    record: Option<Event>,
}

async fn blocking<T: Send + 'static>(
    ctx: &RunContext,
    f: impl FnOnce(&Store) -> Result<T, RunError> + Send + 'static,
) -> Result<T, RunError> {
    let dir = ctx.common_dir.clone();
    tokio::task::spawn_blocking(move || Store::with_reused(&dir, f)?)
        .await
        .expect("attempt steps do not panic")
}

/// Reaches the failpoint `name` (see [`crate::failpoint`]) on a blocking
/// thread, so a failpoint that waits holds this attempt, not the driver's
/// whole runtime; one that panics panics this attempt's task.
/// (Release builds have no failpoints: nothing is spawned.)
async fn failpoint(name: &'static str) {
    #[cfg(debug_assertions)]
    if let Err(e) = tokio::task::spawn_blocking(move || crate::failpoint::hit(name)).await
        && e.is_panic()
    {
        std::panic::resume_unwind(e.into_panic());
    }
    #[cfg(not(debug_assertions))]
    let _ = name;
}

fn append(store: &Store, events: Vec<Event>) -> Result<(), RunError> {
    store.append(events)?;
    Ok(())
}

fn end(job: &Attempt, agent: &str, outcome: Outcome, failure: Option<Failure>) -> AttemptEnd {
    AttemptEnd {
        task: job.task.id.clone(),
        n: job.n,
        outcome,
        failure,
        agent: agent.to_owned(),
    }
}

/// Tells the run's observer, if any, that the attempt is on `step`.
fn step(job: &Attempt, step: impl Into<String>) {
    if let Some(observe) = &job.ctx.on_step {
        (observe.0)(super::progress::Progress::Step {
            task: job.task.id.to_string(),
            attempt: job.n,
            step: step.into(),
        });
    }
}

/// Picks the first agent of the chain whose program is there where it
/// runs (inside the sandbox), that passes its preflight here, and that
/// has not shown earlier in this run that it cannot work (a refused key,
/// a missing program). None left is a configuration problem: no retry
/// can change it.
pub fn choose_agent(ctx: &RunContext, chain: &[String]) -> Result<AgentSpec, NoAgent> {
    let mut missing = Vec::new();
    let sandbox = crate::sandbox::resolve(&ctx.settings.sandbox)?;
    for name in chain {
        match AgentSpec::resolve(name, &ctx.settings.agents) {
            Ok(spec) => {
                if let Some(why) = refused_earlier(&ctx.run, name) {
                    missing.push(format!("{name} ({why} earlier in this run)"));
                    continue;
                }
                match crate::preflight::runnable(&spec, &sandbox, Some(&ctx.common_dir)) {
                    Ok(()) => return Ok(spec),
                    Err((problem, fix)) => missing.push(format!("{name}: {problem} (fix: {fix})")),
                }
            }
            Err(e) => missing.push(e.to_string()),
        }
    }
    Err(NoAgent::NoneCanWork(missing))
}

/// Why no agent of a task's chain can take an attempt here: a
/// configuration problem, which no retry can change.
#[derive(Debug, thiserror::Error)]
pub enum NoAgent {
    /// The sandbox the settings ask for cannot be made here.
    #[error(transparent)]
    Sandbox(#[from] crate::sandbox::SandboxError),
    /// Each agent of the chain, and why it cannot work.
    #[error(
        "no agent can work here: {} (fix it, or name a fallback agent that can with `fallback` in [orch])",
        .0.join("; ")
    )]
    NoneCanWork(Vec<String>),
}

/// Why an attempt's agent could not be run (git-orch's failure, not the
/// agent's: an agent that cannot start is unavailable instead).
#[derive(Debug, thiserror::Error)]
enum AgentRunError {
    #[error("reading the prompt: {0}")]
    Prompt(#[source] std::io::Error),
    #[error(transparent)]
    Sandbox(#[from] crate::sandbox::SandboxError),
    /// What `launch` could not set up.
    #[error(transparent)]
    Launch(#[from] crate::launch::LaunchError),
    #[error(transparent)]
    Record(#[from] RunError),
}

/// Agents that showed in a run that they cannot work there (a provider
/// refused their credentials, their program is missing): no attempt of
/// the run tries them again (the next agent of the fallback chain does).
/// Kept for the life of the driver; a resumed driver finds out again
/// within one attempt.
static REFUSED: std::sync::Mutex<Vec<(String, String, String)>> = std::sync::Mutex::new(Vec::new());

fn refused_earlier(run: &crate::ids::RunId, agent: &str) -> Option<String> {
    REFUSED
        .lock()
        .expect("the refusal list lock is never poisoned")
        .iter()
        .find(|(r, a, _)| r == run.as_str() && a == agent)
        .map(|(_, _, why)| why.clone())
}

/// Runs one attempt to its end; records every step.
pub async fn run(job: Attempt, cancel: CancellationToken) -> AttemptEnd {
    let ctx = job.ctx.clone();
    let spec = match choose_agent(&ctx, &job.agents) {
        Ok(s) => s,
        // The driver asked just before dispatching: only an agent refused
        // meanwhile by another attempt gets here. No attempt is made for
        // it; the driver stops the run on the configuration failure.
        Err(why) => {
            let agent = job.agents.first().cloned().unwrap_or_default();
            return end(
                &job,
                &agent,
                Outcome::Failed,
                Some(Failure {
                    class: FailureClass::Config,
                    reason: why.to_string(),
                }),
            );
        }
    };
    let ws = Workspace::new(&ctx, &job.task, job.n, job.base, job.start);
    let port = match prepare(&job, &spec, &ws).await {
        Ok(port) => port,
        Err(Unprepared::NotMade(why)) => {
            return end(
                &job,
                &spec.name,
                Outcome::Abandoned,
                Some(Failure {
                    class: FailureClass::Internal,
                    reason: why,
                }),
            );
        }
        Err(Unprepared::Failed(class, why)) => {
            let f = Failure { class, reason: why };
            return give_up(&job, &spec, &ws, Outcome::Failed, f).await;
        }
    };
    let gate_env = attempt_env(&job, &ws, &spec, port);
    let env = gate_env.vars();
    if let Some(setup) = ctx.settings.setup.clone()
        && let Err(f) = run_setup(&job, &ws, &env, &setup, &cancel).await
    {
        let outcome = if cancel.is_cancelled() {
            Outcome::Abandoned
        } else {
            Outcome::Failed
        };
        return give_up(&job, &spec, &ws, outcome, f).await;
    }
    let agent_run = match run_agent(&job, &spec, &ws, &env, &cancel).await {
        Ok(a) => a,
        Err(why) => {
            let f = Failure {
                class: FailureClass::Internal,
                reason: why.to_string(),
            };
            return give_up(&job, &spec, &ws, Outcome::Failed, f).await;
        }
    };
    if agent_run.ended.cancelled || agent_run.unavailable.is_some() {
        record_agent(&job, agent_run.record.clone()).await;
    }
    if agent_run.ended.cancelled {
        let f = Failure {
            class: FailureClass::Interrupted,
            reason: "stopped: the run was interrupted".into(),
        };
        return give_up(&job, &spec, &ws, Outcome::Abandoned, f).await;
    }
    if let Some(why) = agent_run.unavailable {
        // Unavailable is for the fallback chain; with no agent of the
        // chain left that can work, it is the configuration's to fix.
        let class = if agent_run.permanent && choose_agent(&ctx, &job.agents).is_err() {
            FailureClass::Config
        } else {
            FailureClass::Unavailable
        };
        let f = Failure {
            class,
            reason: format!("agent {} unavailable: {why}", spec.name),
        };
        return give_up(&job, &spec, &ws, Outcome::Failed, f).await;
    }
    match judge(&job, &spec, &ws, &gate_env, &agent_run, &cancel).await {
        Ok((outcome, failure)) => end(&job, &spec.name, outcome, failure),
        Err(e) => {
            let f = Failure {
                class: FailureClass::Internal,
                reason: e.to_string(),
            };
            give_up(&job, &spec, &ws, Outcome::Failed, f).await
        }
    }
}

/// Ends an attempt before (or instead of) its result: its workspace
/// settled, its end recorded.
async fn give_up(
    job: &Attempt,
    spec: &AgentSpec,
    ws: &Workspace,
    outcome: Outcome,
    failure: Failure,
) -> AttemptEnd {
    settle(job, ws).await;
    let _ = record_end(job, outcome, Some(failure.clone())).await;
    end(job, &spec.name, outcome, Some(failure))
}

/// Settles the worktree of an attempt that ends without its result being
/// taken (see [`Workspace::settle`]); best effort: a failure here leaves
/// it for `git orch cleanup`, which never reads its git folder either.
async fn settle(job: &Attempt, ws: &Workspace) {
    let ws = ws.clone();
    let _ = blocking(&job.ctx, move |store| Ok(ws.settle(store)?)).await;
}

/// Why an attempt's workspace could not be prepared.
enum Unprepared {
    /// The worktree could not be made; recorded abandoned.
    NotMade(String),
    Failed(FailureClass, String),
}

/// Branch, record, worktree, hooks, prompt and retry context.
async fn prepare(job: &Attempt, spec: &AgentSpec, ws: &Workspace) -> Result<u16, Unprepared> {
    let ctx = job.ctx.clone();
    let port = ws.port_block(ctx.settings.port_base, ctx.settings.port_span);
    let (w, agent, candidate) = (ws.clone(), spec.name.clone(), job.candidate);
    blocking(&ctx, move |store| w.record(store, &agent, port, candidate))
        .await
        .map_err(|e| match e {
            // Recorded with its end already.
            RunError::BranchExists(b) => {
                Unprepared::NotMade(format!("its branch {b} exists already"))
            }
            e => Unprepared::Failed(FailureClass::Internal, e.to_string()),
        })?;
    // Recorded and branched: a panic from here on is the driver's to record.
    failpoint("attempt.created").await;
    let permit = ctx
        .heavy
        .acquire()
        .await
        .expect("the semaphore is never closed");
    let w = ws.clone();
    let made = blocking(&ctx, move |store| Ok(w.check_out(store)?))
        .await
        .map_err(|e| Unprepared::NotMade(e.to_string()))?;
    drop(permit);
    if let CheckedOut::Abandoned(why) = made {
        return Err(Unprepared::NotMade(why.to_string()));
    }
    // Warm worktrees (issue 28): local files and cache copies.
    super::warm::worktree(&ctx, &ws.paths.worktree)
        .await
        .map_err(|e| {
            let class = if e.is_config() {
                FailureClass::Config
            } else {
                FailureClass::Internal
            };
            Unprepared::Failed(class, e.to_string())
        })?;
    failpoint("attempt.worktree-added").await;
    let retry = retry_context(job).await;
    let prompt = super::prompt::render(
        ctx.plan(),
        &job.task,
        ctx.run.as_str(),
        job.n,
        &job.gates,
        retry.as_ref(),
    );
    let (w, owned, exe, hooks_dir) = (
        ws.clone(),
        job.task.owned_globs.clone(),
        job.exe.clone(),
        ctx.hooks_dir.clone(),
    );
    blocking(&ctx, move |_store| {
        w.install_hooks(&hooks_dir, &owned, &exe)?;
        w.write_prompt(&prompt, retry.as_ref())?;
        Ok(())
    })
    .await
    .map_err(|e| Unprepared::Failed(FailureClass::Internal, e.to_string()))?;
    Ok(port)
}

/// What a retry is told of the attempt before it, with what that attempt
/// changed.
async fn retry_context(job: &Attempt) -> Option<RetryContext> {
    let mut r = job.retry.clone()?;
    if let Some(prev) = r.previous.as_mut() {
        let (base, commit) = (prev.base.clone(), prev.commit.clone());
        prev.diff = blocking(&job.ctx, move |store| {
            let old = store.commit_info(store.parse_oid(&base)?)?.tree;
            let new = store.commit_info(store.parse_oid(&commit)?)?.tree;
            Ok(gate::evaluate::diff_between(
                store,
                old,
                new,
                crate::gate::context::PREVIOUS_DIFF_BYTES,
            )?)
        })
        .await
        .unwrap_or_default();
    }
    Some(r)
}

/// The environment every process of the attempt gets (see
/// [`AttemptEnv`]).
fn attempt_env(job: &Attempt, ws: &Workspace, spec: &AgentSpec, port: u16) -> GateEnv {
    AttemptEnv {
        run: &job.ctx.run,
        plan: &job.ctx.plan().id,
        task: &job.task,
        n: job.n,
        base: job.base,
        port,
        agent: &spec.name,
        agent_env: &spec.env,
        paths: &ws.paths,
        retry: job.retry.is_some(),
    }
    .gate_env()
}

/// Variables that would point the child's git at the wrong repository.
const GIT_REDIRECTS: [&str; 4] = ["GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_PREFIX"];

async fn run_setup(
    job: &Attempt,
    ws: &Workspace,
    env: &[(String, String)],
    setup: &str,
    cancel: &CancellationToken,
) -> Result<(), Failure> {
    step(job, "setup");
    let paths = &ws.paths;
    let start = Instant::now();
    let spec = GroupSpec {
        program: "sh".into(),
        args: vec!["-c".into(), setup.into()],
        cwd: paths.worktree.clone(),
        env: env.to_vec(),
        env_remove: GIT_REDIRECTS.iter().map(|s| (*s).to_owned()).collect(),
        env_clear: false,
        stdin: None,
        stdout: paths.log_dir.join("setup.out"),
        stderr: paths.log_dir.join("setup.err"),
        filter: Some(gate::masking::line_filter()),
        on_line: None,
    };
    // Confined like the agent (the same sandbox, environment allow-list).
    let started = crate::sandbox::resolve(&job.ctx.settings.sandbox)
        .map_err(crate::launch::LaunchError::from)
        .and_then(|sb| {
            crate::launch::command(
                &sb,
                spec.clone(),
                &job.ctx.common_dir,
                &crate::launch::files_named_in(env),
                crate::sandbox::View::OwnPath,
            )
        })
        .and_then(|confined| Ok((GroupChild::spawn(&confined.group)?, confined)));
    let ended = match started {
        // `_confined` is held until setup ends: its private home goes with it.
        Ok((mut c, _confined)) => {
            let deadline = tokio::time::Instant::now()
                + Duration::from_secs(job.ctx.run_settings.timeout_secs);
            c.wait(deadline, cancel, GRACE).await
        }
        Err(e) => {
            return Err(Failure {
                class: FailureClass::Setup,
                reason: format!("setup `{setup}` could not start: {e}"),
            });
        }
    };
    let tail = format!(
        "{}{}",
        crate::process::tail_of(&spec.stdout, TAIL_BYTES),
        crate::process::tail_of(&spec.stderr, TAIL_BYTES)
    );
    let ctx = job.ctx.clone();
    let (task, n) = (job.task.id.clone(), job.n);
    let ok = ended.success();
    let duration_ms = start.elapsed().as_millis() as u64;
    let tail2 = tail.clone();
    let _ = blocking(&ctx.clone(), move |store| {
        append(
            store,
            vec![Event::SetupFinished {
                run_id: ctx.run.clone(),
                task,
                attempt: n,
                ok,
                exit: ended.exit,
                duration_ms,
                tail: gate::command::tail_chars(&tail2, TAIL_BYTES),
            }],
        )
    })
    .await;
    if ok {
        Ok(())
    } else {
        Err(Failure {
            class: FailureClass::Setup,
            reason: format!(
                "setup `{setup}` failed ({}): {}",
                ended.exit.map_or("killed".into(), |c| format!("exit {c}")),
                tail.lines().last().unwrap_or_default()
            ),
        })
    }
}

async fn run_agent(
    job: &Attempt,
    spec: &AgentSpec,
    ws: &Workspace,
    env: &[(String, String)],
    cancel: &CancellationToken,
) -> Result<AgentOutcome, AgentRunError> {
    step(job, format!("agent {}", spec.name));
    let paths = &ws.paths;
    let ctx = job.ctx.clone();
    let prompt = std::fs::read_to_string(&paths.prompt).map_err(AgentRunError::Prompt)?;
    let sandbox = crate::sandbox::resolve(&ctx.settings.sandbox)?;
    // The agent may run what the gates will run, to check its own work.
    let allowed_commands: Vec<String> = std::iter::once(job.task.verification.clone())
        .chain(
            job.gates
                .iter()
                .filter_map(|g| g.kind.command().map(str::to_owned)),
        )
        .filter(|c| !c.trim().is_empty())
        .collect();
    let launch = crate::launch::agent(&crate::launch::AgentJob {
        spec,
        sandbox: &sandbox,
        prompt: &prompt,
        prompt_file: &paths.prompt,
        worktree: &paths.worktree,
        common_dir: &ctx.common_dir,
        readable: crate::launch::files_named_in(env),
        log_dir: &paths.log_dir,
        log_name: "agent",
        task: job.task.id.as_str(),
        attempt: job.n,
        env,
        allowed_commands,
        filter: gate::masking::line_filter(),
        writable: Vec::new(),
    })
    .map_err(AgentRunError::Launch)?;
    let start = Instant::now();
    let timeout = Duration::from_secs(spec.timeout_secs.unwrap_or(ctx.run_settings.timeout_secs));
    let mut child = match GroupChild::spawn(&launch.group) {
        Ok(c) => c,
        Err(e) => {
            // A program that cannot start is unavailable, not a crash.
            let ended = crate::process::Ended::not_started();
            let why = e.to_string();
            let record = agent_finished(
                job,
                &ended,
                0,
                AgentUsage::default(),
                Some(why.clone()),
                why.clone(),
                None,
            );
            // (Its supervisor could not be started: the machine, not the
            // configuration, which the preflight checked.)
            return Ok(AgentOutcome {
                ended,
                unavailable: Some(why),
                permanent: false,
                cause: None,
                timeout,
                record: Some(record),
            });
        }
    };
    let pid = child.pid();
    {
        let c = ctx.clone();
        let (task, n) = (job.task.id.clone(), job.n);
        let confined = sandbox.kind.as_str().to_owned();
        blocking(&ctx, move |store| {
            append(
                store,
                vec![Event::AttemptStarted {
                    run_id: c.run.clone(),
                    task,
                    attempt: n,
                    pid,
                    pgid: pid,
                    sandbox: Some(confined),
                }],
            )
        })
        .await?;
    }
    failpoint("attempt.agent-started").await;
    let ended = child
        .wait(tokio::time::Instant::now() + timeout, cancel, GRACE)
        .await;
    let tail = format!(
        "{}{}",
        crate::process::tail_of(&launch.group.stdout, TAIL_BYTES),
        crate::process::tail_of(&launch.group.stderr, TAIL_BYTES)
    );
    let read = crate::launch::read(spec, &ended, &launch, &ctx.settings.prices, &tail);
    let permanent = match read.availability {
        Availability::AuthFailed => Some("its credentials were refused"),
        Availability::Missing => Some("its program was missing"),
        _ => None,
    };
    if let Some(why) = permanent {
        REFUSED
            .lock()
            .expect("the refusal list lock is never poisoned")
            .push((ctx.run.to_string(), spec.name.clone(), why.to_owned()));
    }
    let record = agent_finished(
        job,
        &ended,
        start.elapsed().as_millis() as u64,
        read.usage,
        read.unavailable.clone(),
        tail,
        read.cause.clone(),
    );
    failpoint("attempt.agent-finished").await;
    Ok(AgentOutcome {
        ended,
        unavailable: read.unavailable,
        permanent: permanent.is_some(),
        cause: read.cause,
        timeout,
        record: Some(record),
    })
}

/// The `agent_finished` event of the attempt's agent (recorded by the
/// caller: with the result commit, or alone when the attempt ends here).
fn agent_finished(
    job: &Attempt,
    ended: &crate::process::Ended,
    duration_ms: u64,
    usage: AgentUsage,
    unavailable: Option<String>,
    tail: String,
    cause: Option<String>,
) -> Event {
    Event::AgentFinished {
        run_id: job.ctx.run.clone(),
        task: job.task.id.clone(),
        attempt: job.n,
        exit: ended.exit,
        signal: ended.signal,
        timed_out: ended.timed_out,
        duration_ms,
        usage,
        unavailable,
        tail: gate::masking::mask_text(&gate::command::tail_chars(&tail, TAIL_BYTES)),
        cause: cause.map(|c| gate::masking::mask_text(&c)),
    }
}

/// Records the agent's end alone: the attempt ends before a result.
async fn record_agent(job: &Attempt, record: Option<Event>) {
    let Some(event) = record else { return };
    let _ = blocking(&job.ctx, move |store| append(store, vec![event])).await;
}

/// Judges the attempt: commit its work, run its gates, decide, record.
async fn judge(
    job: &Attempt,
    spec: &AgentSpec,
    ws: &Workspace,
    env: &GateEnv,
    agent_run: &AgentOutcome,
    cancel: &CancellationToken,
) -> Result<(Outcome, Option<Failure>), RunError> {
    let committed = match commit(job, spec, ws, agent_run.record.clone()).await? {
        Ok(c) => c,
        Err(refused) => return Ok((Outcome::Failed, Some(refused))),
    };
    failpoint("attempt.result-recorded").await;
    let stack = run_gates(job, spec, ws, env, &committed, cancel).await?;
    if cancel.is_cancelled() {
        return record_interrupted(job, stack).await;
    }
    let failure = decide(spec, agent_run, &stack);
    let outcome = if failure.is_some() {
        Outcome::Failed
    } else {
        Outcome::Passed
    };
    record_end_of(job, spec, &committed, &stack, outcome, failure.clone()).await?;
    failpoint("attempt.finished").await;
    Ok((outcome, failure))
}

/// The commit phase: whatever the agent left uncommitted becomes the
/// result commit, recorded with how many paths it changes (see
/// [`Workspace::import_result`]). `agent`: the agent's `agent_finished`
/// event, recorded with the result (or alone, when no result could be
/// made).
async fn commit(
    job: &Attempt,
    spec: &AgentSpec,
    ws: &Workspace,
    agent: Option<Event>,
) -> Result<Result<ImportedResult, Failure>, RunError> {
    let ctx = job.ctx.clone();
    step(job, "committing the result");
    let permit = ctx
        .heavy
        .acquire()
        .await
        .expect("the semaphore is never closed");
    let (w, agent_name) = (ws.clone(), spec.name.clone());
    let committed = blocking(&ctx, move |store| {
        w.import_result(store, &agent_name, agent)
    })
    .await?;
    drop(permit);
    Ok(committed)
}

/// The gate phase: the attempt's gate stack on its result, reusing
/// verdicts already recorded for the same tree, command and inputs.
async fn run_gates(
    job: &Attempt,
    spec: &AgentSpec,
    ws: &Workspace,
    env: &GateEnv,
    committed: &ImportedResult,
    cancel: &CancellationToken,
) -> Result<gate::evaluate::StackOutcome, RunError> {
    let ctx = job.ctx.clone();
    let on_gate = ctx.on_step.clone().map(|observe| {
        let (task, attempt) = (job.task.id.to_string(), job.n);
        let tell: gate::evaluate::GateStarted = std::sync::Arc::new(move |gate: &str| {
            (observe.0)(super::progress::Progress::Step {
                task: task.clone(),
                attempt,
                step: format!("gate {gate}"),
            })
        });
        tell
    });
    let (c, task, n, base) = (ctx.clone(), job.task.clone(), job.n, job.base);
    let (w, agent, env, result) = (
        ws.clone(),
        spec.name.clone(),
        env.clone(),
        committed.clone(),
    );
    let (subject, cache) = blocking(&ctx, move |store| {
        let tree_hex = result.tree.to_string();
        let cache = c.state.read(store, |index| index.verdicts_for(&tree_hex))?;
        let subject = AttemptGates {
            common_dir: &c.common_dir,
            run: &c.run,
            task: &task,
            n,
            base,
            result: result.commit,
            result_tree: result.tree,
            agent: &agent,
            paths: &w.paths,
            env,
            settings: &c.settings,
        }
        .subject(store, Some(result.steps), on_gate)?;
        Ok((subject, cache))
    })
    .await?;
    Ok(gate::evaluate(&subject, &job.gates, &cache, cancel).await?)
}

/// Gates stopped half way judge nothing: the attempt did not pass. Its
/// verdicts so far are kept; it is judged again when the run resumes.
async fn record_interrupted(
    job: &Attempt,
    stack: gate::evaluate::StackOutcome,
) -> Result<(Outcome, Option<Failure>), RunError> {
    let ctx = job.ctx.clone();
    let f = Failure {
        class: FailureClass::Interrupted,
        reason: "stopped while its gates ran: the run was interrupted".into(),
    };
    let c = ctx.clone();
    let (task, n) = (job.task.id.clone(), job.n);
    let f2 = f.clone();
    blocking(&ctx, move |store| {
        let mut events: Vec<Event> = stack
            .verdicts
            .into_iter()
            .map(|verdict| Event::GateVerdict {
                run_id: c.run.clone(),
                task: task.clone(),
                attempt: n,
                verdict,
            })
            .collect();
        events.push(Event::attempt_finished(
            &c.run,
            &task,
            n,
            Outcome::Abandoned,
            Some(f2),
        ));
        append(store, events)
    })
    .await?;
    Ok((Outcome::Abandoned, Some(f)))
}

/// The decision: why the attempt failed, if it did. A deterministic gate
/// failure says most about what to change; a crash or timeout comes next;
/// then any other blocking gate.
fn decide(
    spec: &AgentSpec,
    agent_run: &AgentOutcome,
    stack: &gate::evaluate::StackOutcome,
) -> Option<Failure> {
    let ended = agent_run.ended;
    let cause = agent_run
        .cause
        .as_ref()
        .map(|c| format!(": {}", gate::masking::mask_text(c)))
        .unwrap_or_default();
    let agent_failure = if ended.timed_out {
        Some(Failure {
            class: FailureClass::Timeout,
            reason: format!(
                "agent {} ran past its timeout of {}s{cause}",
                spec.name,
                agent_run.timeout.as_secs()
            ),
        })
    } else if !ended.success() {
        Some(Failure {
            class: FailureClass::AgentCrash,
            reason: format!(
                "agent {} {}{cause}",
                spec.name,
                match (ended.exit, ended.signal) {
                    (Some(c), _) => format!("exited {c}"),
                    (None, Some(s)) => format!("was killed by signal {s}"),
                    _ => "failed".into(),
                }
            ),
        })
    } else {
        None
    };
    match (&stack.failure, agent_failure) {
        (Some(g), _) if matches!(g.class, FailureClass::Scope | FailureClass::Secret) => {
            Some(g.clone())
        }
        (_, Some(a)) => Some(a),
        (g, None) => g.clone(),
    }
}

/// The record phase, one operation: the verdicts and the end appended,
/// the result kept (unless it may hold a secret) and its note written.
async fn record_end_of(
    job: &Attempt,
    spec: &AgentSpec,
    committed: &ImportedResult,
    stack: &gate::evaluate::StackOutcome,
    outcome: Outcome,
    failure: Option<Failure>,
) -> Result<(), RunError> {
    let ctx = job.ctx.clone();
    let secrets_clean = stack
        .verdicts
        .iter()
        .find(|v| v.gate == "secrets")
        .is_none_or(|v| matches!(v.status, GateStatus::Pass | GateStatus::Skipped));
    let (task, n) = (job.task.id.clone(), job.n);
    let verdicts = stack.verdicts.clone();
    let agent = spec.name.clone();
    let commit = committed.commit;
    // An attempt that changed nothing has the commit it started from as
    // its result: a landed commit, or the previous attempt's result,
    // whose records are not this attempt's to write over.
    let made_here = commit != job.base && Some(commit) != job.start;
    let note = made_here.then(|| {
        super::control::note_text(&ctx, &task, n, &agent, &verdicts, outcome, failure.as_ref())
    });
    let mut events: Vec<Event> = verdicts
        .into_iter()
        .map(|verdict| Event::GateVerdict {
            run_id: ctx.run.clone(),
            task: task.clone(),
            attempt: n,
            verdict,
        })
        .collect();
    events.push(Event::attempt_finished(
        &ctx.run, &task, n, outcome, failure,
    ));
    let why = format!("{}/{task}/attempt-{n}", ctx.run);
    blocking(&ctx, move |store| {
        // One operation: the log, keep and notes refs move in one ref
        // transaction once every object is written, so a kill before it
        // leaves none of them, never a kept result or a note whose end
        // is not recorded (and the next driver abandons the attempt).
        store.transact(|store| {
            let mut refs = Vec::new();
            // A result that may hold a secret never becomes reachable
            // from refs/orch/*, which is what sharing pushes.
            if secrets_clean {
                let tip = store.ref_target(crate::store::refs::KEEP_REF)?;
                refs.push(store.keep_update(tip, &[commit], &why)?);
            }
            // Notes are derived: one that cannot be written does not
            // fail the attempt.
            if let Some(note) = &note
                && let Ok(update) = super::notes::record_update(store, commit, note)
            {
                refs.push(update);
            }
            Ok::<_, RunError>((
                crate::store::log::Operation {
                    events: events.clone(),
                    refs,
                },
                (),
            ))
        })?;
        Ok(())
    })
    .await
}

/// Records an attempt's end on its own (for ends without a result).
async fn record_end(
    job: &Attempt,
    outcome: Outcome,
    failure: Option<Failure>,
) -> Result<(), RunError> {
    let end = Event::attempt_finished(&job.ctx.run, &job.task.id, job.n, outcome, failure);
    blocking(&job.ctx, move |store| append(store, vec![end])).await
}
