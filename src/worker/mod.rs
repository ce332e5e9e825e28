//! The worker: one process per machine that works the approved runs it
//! finds on a shared remote, coordinating with other machines through
//! nothing but that remote.
//!
//! Each round: `sync`; for every unfinished run, claim ready tasks by
//! pushing a claim commit to `refs/orch/claims/<run>/<task>` without force
//! (a rejected push means another worker won); run the attempt and its
//! gates here; push its result branch; and, holding the run's queue claim
//! (`refs/orch/claims/<run>/_queue`), land what waits with one atomic,
//! non-forced push of the target and this clone's log (the push is the
//! compare-and-swap, see `merge::Queue::remote`).
//!
//! Claims are leases. The holder renews its claim with `claim_renewed`
//! events while the attempt runs; a claim whose holder has not renewed it
//! for its lease (by the claim's own `lease_secs`, measured on the wall
//! clock: machines are assumed to keep NTP time) can be taken over by a
//! claim commit on top of it, again by a non-forced push. The taker records
//! the old attempt abandoned. A worker that finds its claim taken stops its
//! attempt. A claim whose attempt has ended in the log is free.
//!
//! This module decides and acts; it does not print (it reports through a
//! callback the command renders).

pub mod claim;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

use tokio::task::JoinSet;

use crate::clock::now_ms;
use crate::event::{Event, Failure, FailureClass, Outcome, RunSummary};
use crate::ids::{RunId, TaskId};
use crate::run::attempt::{self, Attempt, AttemptEnd};
use crate::run::progress::{LandReport, LandingProblem, Progress};
use crate::run::schedule::ready_tasks;
use crate::run::{RunContext, RunError};
use crate::state::{RunState, SharedIndex};
use crate::store::remote::{Claim, Pushed, QUEUE_CLAIM};
use crate::store::{Oid, Store, StoreError};

/// What the user asked for.
#[derive(Clone)]
pub struct WorkerOptions {
    pub remote: String,
    /// Run every attempt here with this agent instead of the run's.
    pub agent: Option<String>,
    /// Most attempts running here at once.
    pub cap: usize,
    /// How long a claim holds without renewal.
    pub lease: Duration,
    /// How often to sync and look for work.
    pub poll: Duration,
    /// One round: claim up to `cap` tasks, run them, land, sync, exit.
    pub once: bool,
    /// Exit once no unfinished run is left.
    pub until_done: bool,
    /// Told each step of the attempts run here (setup, agent, each gate).
    pub on_step: Option<crate::run::StepObserver>,
}

/// Something worth showing.
#[derive(Debug, Clone)]
pub enum Report {
    /// An attempt event, as a run's driver reports it.
    Run {
        run: String,
        progress: Progress,
    },
    Claimed {
        run: String,
        task: String,
        attempt: u32,
        took_over_from: Option<String>,
    },
    /// Another worker took this worker's claim (its lease had run out).
    LeaseLost {
        run: String,
        task: String,
    },
    /// A run cannot be worked here (not approved any more, plan missing…).
    Skipped {
        run: String,
        why: String,
        cause: SkipCause,
    },
    /// A sync failed; the worker tries again next round.
    SyncFailed(String),
    /// A push the worker needed (a claim) was refused by the remote or did
    /// not reach it; the worker tries again after `retry_in`.
    PushFailed {
        what: String,
        why: String,
        retry_in: Duration,
    },
    Finished {
        run: String,
        summary: RunSummary,
    },
}

/// Why a run is not worked here, for the hint the command line gives.
#[derive(Debug, Clone)]
pub enum SkipCause {
    /// Its approval no longer holds for the plan it runs.
    NotApproved(Box<crate::approval::Verdict>),
    /// Its state cannot be read here; tried again every round. `persists`:
    /// still failing after several rounds.
    Failing { persists: bool },
    /// This machine's agents cannot work for it as configured.
    Config,
    /// Its landing was refused.
    Landing(LandingProblem),
    /// The target could not follow the remote's; tried again next round.
    Following(Option<LandingProblem>),
}

/// How the worker stopped.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkerOutcome {
    /// `--once` did its round, or `--until-done` found nothing left.
    /// `incomplete`: the runs this worker worked on that ended with tasks
    /// not done (failed, blocked or cancelled), with their summaries.
    Done {
        incomplete: Vec<(RunId, RunSummary)>,
    },
    /// Ctrl-C or SIGTERM.
    Interrupted,
}

/// Why the worker cannot go on.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    Run(#[from] RunError),
    #[error("{0}")]
    Config(String),
}

/// An attempt running here under a claim.
struct ClaimedAttempt {
    claim: Oid,
    cancel: CancellationToken,
    renewed: Instant,
}

/// A landing running here under the run's queue claim.
type Landing = (RunId, Oid, Result<LandReport, crate::merge::MergeError>);

/// The worker itself.
pub struct Worker {
    store: Store,
    /// The folded log, refreshed every round and shared with the attempts
    /// and landings run here.
    state: SharedIndex,
    opts: WorkerOptions,
    contexts: HashMap<RunId, Arc<RunContext>>,
    live: BTreeMap<(RunId, TaskId), ClaimedAttempt>,
    running: JoinSet<(RunId, AttemptEnd)>,
    /// Which task each attempt's tokio task runs, so that one that
    /// panicked still leaves `live` (else the run could never finish here).
    running_tasks: HashMap<tokio::task::Id, (RunId, TaskId)>,
    landing: JoinSet<Landing>,
    /// The queue claim of the landing in flight, and when it was last
    /// renewed.
    landing_claim: Option<(RunId, Oid, Instant)>,
    /// Pushes that failed in a row, and when the worker may push again:
    /// a remote that refuses or is out of reach is retried with backoff,
    /// never a reason to stop.
    push_failures: u32,
    push_again: Option<Instant>,
    /// Runs this worker leaves alone, with why: not approved any more, or
    /// its agents cannot work here.
    skipped: BTreeMap<RunId, String>,
    /// Runs whose context failed to load for another reason, with the
    /// error and how many rounds in a row it did.
    failing: BTreeMap<RunId, (String, u32)>,
    /// Runs for workers this worker found unfinished: how they ended
    /// decides its exit status.
    seen: std::collections::BTreeSet<RunId>,
    exe: PathBuf,
}

/// Rounds after which a run that keeps failing to load is reported again,
/// as an error with its fix.
const FAILING_ROUNDS: u32 = 5;

impl Worker {
    pub fn new(store: Store, mut opts: WorkerOptions) -> Result<Self, WorkerError> {
        store.check_remote(&opts.remote)?;
        opts.cap = opts.cap.max(1);
        // Renew well before the lease runs out: each round may renew.
        opts.poll = opts
            .poll
            .min(opts.lease / 3)
            .max(Duration::from_millis(100));
        Ok(Self {
            state: SharedIndex::open(&store)?,
            store,
            opts,
            contexts: HashMap::new(),
            live: BTreeMap::new(),
            running: JoinSet::new(),
            running_tasks: HashMap::new(),
            landing: JoinSet::new(),
            landing_claim: None,
            push_failures: 0,
            push_again: None,
            skipped: BTreeMap::new(),
            failing: BTreeMap::new(),
            seen: Default::default(),
            exe: std::env::current_exe().unwrap_or_else(|_| "git-orch".into()),
        })
    }

    /// Works until done (see [`WorkerOptions`]) or interrupted.
    pub async fn work(
        &mut self,
        report: &(dyn Fn(Report) + Sync),
    ) -> Result<WorkerOutcome, WorkerError> {
        let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .map_err(|e| WorkerError::Config(format!("cannot watch SIGTERM: {e}")))?;
        let mut claimed_once = false;
        loop {
            self.sync(report);
            // Finished runs are history: only unfinished ones are loaded.
            let runs = self.unfinished_runs()?;
            self.seen.extend(
                runs.values()
                    .filter(|r| r.settings.workers && !self.skipped.contains_key(&r.id))
                    .map(|r| r.id.clone()),
            );
            self.watch_leases(report)?;
            let may_claim = !(self.opts.once && claimed_once);
            if may_claim {
                self.claim_and_start(&runs, report)?;
                claimed_once = true;
            }
            self.land(&runs, report)?;
            self.finish_runs(&runs, report)?;
            let unfinished = runs.values().any(|r| {
                r.finished.is_none() && r.settings.workers && !self.skipped.contains_key(&r.id)
            });
            let idle = self.live.is_empty() && self.landing.is_empty();
            if idle {
                let done = (self.opts.once && claimed_once && !self.has_own_queued(&runs))
                    || (self.opts.until_done && !unfinished);
                if done {
                    self.sync(report);
                    return Ok(WorkerOutcome::Done {
                        incomplete: self.incomplete()?,
                    });
                }
            }
            tokio::select! {
                done = self.running.join_next_with_id(), if !self.running.is_empty() => {
                    match done {
                        Some(Ok((id, (run, end)))) => {
                            self.running_tasks.remove(&id);
                            self.ended(run, end, report)?;
                        }
                        // The attempt panicked: its end is not recorded. It
                        // leaves `live`, so its claim is no longer renewed
                        // and the task is taken over after the lease.
                        Some(Err(e)) => {
                            if let Some(key) = self.running_tasks.remove(&e.id()) {
                                report(Report::Run {
                                    run: key.0.to_string(),
                                    progress: Progress::Warning(format!(
                                        "the attempt of {} ended without recording its end: {e}",
                                        key.1
                                    )),
                                });
                                self.live.remove(&key);
                            }
                        }
                        None => {}
                    }
                }
                done = self.landing.join_next(), if !self.landing.is_empty() => {
                    if let Some(Ok(landing)) = done {
                        self.landed(landing, report)?;
                    }
                }
                _ = tokio::signal::ctrl_c() => return self.interrupt(report).await,
                _ = sigterm.recv() => return self.interrupt(report).await,
                _ = tokio::time::sleep(self.opts.poll) => {}
            }
        }
    }

    fn sync(&mut self, report: &(dyn Fn(Report) + Sync)) {
        if let Err(e) = self.store.sync(&self.opts.remote) {
            report(Report::SyncFailed(e.to_string()));
        }
        // A fetch may have written packs this handle has not seen: open
        // the repository again, so every object it brought is readable.
        if let Err(e) = self.store.reload() {
            report(Report::SyncFailed(e.to_string()));
        }
    }

    /// The context of `run`, made once. A run that is not approved any
    /// more is reported once and skipped from then on; any other failure
    /// (a read that met an object a fetch was still bringing) is reported
    /// and retried next round, and reported again, as an error with its
    /// fix, once it keeps failing.
    fn context(
        &mut self,
        run: &RunState,
        report: &(dyn Fn(Report) + Sync),
    ) -> Option<Arc<RunContext>> {
        if let Some(c) = self.contexts.get(&run.id) {
            return Some(c.clone());
        }
        if self.skipped.contains_key(&run.id) {
            return None;
        }
        match crate::run::context_for(&self.store, run) {
            Ok(mut ctx) => {
                if let Some(a) = &self.opts.agent {
                    ctx.run_settings.agent = a.clone();
                    ctx.run_settings.fallback.clear();
                }
                ctx.on_step = self.opts.on_step.clone();
                ctx.state = self.state.clone();
                self.failing.remove(&run.id);
                let ctx = Arc::new(ctx);
                self.contexts.insert(run.id.clone(), ctx.clone());
                Some(ctx)
            }
            Err(e) => {
                let why = e.to_string();
                if let RunError::NotApproved { verdict, .. } = e {
                    report(Report::Skipped {
                        run: run.id.to_string(),
                        why: why.clone(),
                        cause: SkipCause::NotApproved(verdict),
                    });
                    self.skipped.insert(run.id.clone(), why);
                    return None;
                }
                let seen = self
                    .failing
                    .entry(run.id.clone())
                    .or_insert((String::new(), 0));
                seen.1 = if seen.0 == why { seen.1 + 1 } else { 1 };
                seen.0 = why.clone();
                if seen.1 == 1 || seen.1 == FAILING_ROUNDS {
                    report(Report::Skipped {
                        run: run.id.to_string(),
                        why: if seen.1 == FAILING_ROUNDS {
                            format!(
                                "{why} (still failing after {FAILING_ROUNDS} rounds; retrying every round)"
                            )
                        } else {
                            format!("{why} (retrying next round)")
                        },
                        cause: SkipCause::Failing {
                            persists: seen.1 == FAILING_ROUNDS,
                        },
                    });
                }
                None
            }
        }
    }

    /// Renews this worker's claims, and stops attempts whose claim another
    /// worker took.
    fn watch_leases(&mut self, report: &(dyn Fn(Report) + Sync)) -> Result<(), WorkerError> {
        let mut renew = Vec::new();
        for ((run, task), live) in &mut self.live {
            let name = Store::claim_ref(run.as_str(), task.as_str());
            // The tracking copy may still show the claim ours replaced
            // (an ancestor); only a claim on top of ours means it was taken.
            let taken = match self.store.tracked(&self.opts.remote, &name)? {
                Some(v) if v != live.claim => !self.store.is_ancestor(v, live.claim)?,
                _ => false,
            };
            if taken {
                if !live.cancel.is_cancelled() {
                    report(Report::LeaseLost {
                        run: run.to_string(),
                        task: task.to_string(),
                    });
                }
                live.cancel.cancel();
                continue;
            }
            if live.renewed.elapsed() >= self.opts.lease / 3 {
                live.renewed = Instant::now();
                renew.push(Event::ClaimRenewed {
                    run_id: run.clone(),
                    commit: live.claim,
                });
            }
        }
        // The queue claim is a lease like any other: renewed while the
        // landing runs here, so it holds as long as this worker is alive.
        if let Some((run, claim, renewed)) = &mut self.landing_claim
            && renewed.elapsed() >= self.opts.lease / 3
        {
            *renewed = Instant::now();
            renew.push(Event::ClaimRenewed {
                run_id: run.clone(),
                commit: *claim,
            });
        }
        if !renew.is_empty() {
            self.store.append(renew)?;
        }
        Ok(())
    }

    /// Whether a push may be tried now (not backing off after failures).
    fn may_push(&self) -> bool {
        self.push_again.is_none_or(|t| Instant::now() >= t)
    }

    /// A push went through: no more backing off.
    fn pushed(&mut self) {
        self.push_failures = 0;
        self.push_again = None;
    }

    /// A push was refused or did not reach the remote: report it and back
    /// off (doubling from the poll interval, at most a minute, jittered so
    /// workers that failed together do not retry together).
    fn push_failed(&mut self, what: String, why: String, report: &(dyn Fn(Report) + Sync)) {
        self.push_failures = self.push_failures.saturating_add(1);
        let base = self.opts.poll.as_millis() as u64;
        let exp = base.saturating_mul(1u64 << self.push_failures.min(6));
        let capped = exp.min(60_000);
        let jitter = u64::from(crate::ids::random_bytes::<2>()[0]) * capped / 512;
        let retry_in = Duration::from_millis(capped / 2 + jitter);
        self.push_again = Some(Instant::now() + retry_in);
        report(Report::PushFailed {
            what,
            why,
            retry_in,
        });
    }

    /// Claims ready tasks up to the cap and starts their attempts.
    fn claim_and_start(
        &mut self,
        runs: &BTreeMap<RunId, RunState>,
        report: &(dyn Fn(Report) + Sync),
    ) -> Result<(), WorkerError> {
        // Only runs started for workers (`run --start-only`): a run that a
        // `git orch run` drives is that driver's alone.
        let mut ordered: Vec<&RunState> = runs
            .values()
            .filter(|r| r.finished.is_none() && r.settings.workers)
            .collect();
        ordered.sort_by_key(|r| r.started_ms);
        let mut followed = false;
        if !self.may_push() {
            return Ok(());
        }
        for run in ordered {
            if self.live.len() >= self.opts.cap || !self.may_push() {
                return Ok(());
            }
            let Some(ctx) = self.context(run, report) else {
                continue;
            };
            let plan = ctx.plan().clone();
            let busy = self.claimed_anywhere(run)?;
            if busy.iter().any(|t| ctx.serial.contains(t)) {
                continue; // a serial task runs somewhere: nothing else starts
            }
            let mut candidates = ready_tasks(run, &plan);
            // A task whose attempt is open under a claim that no longer
            // binds (its worker stopped renewing) is taken over. An open
            // attempt without any claim belongs to a `git orch run` driver
            // somewhere, which is never second-guessed.
            for sub in &plan.subtasks {
                let open = run
                    .tasks
                    .get(&sub.id)
                    .is_some_and(|t| t.open_attempt().is_some());
                let name = Store::claim_ref(run.id.as_str(), sub.id.as_str());
                if open
                    && !busy.contains(&sub.id)
                    && !candidates.contains(&sub.id)
                    && self.store.tracked(&self.opts.remote, &name)?.is_some()
                {
                    candidates.push(sub.id.clone());
                }
            }
            for task in candidates {
                if self.live.len() >= self.opts.cap {
                    break;
                }
                if busy.contains(&task) || self.live.contains_key(&(run.id.clone(), task.clone())) {
                    continue;
                }
                if ctx.serial.contains(&task) && !busy.is_empty() {
                    break;
                }
                if !followed {
                    // New attempts start from what has landed everywhere;
                    // a remote out of reach now is tried again later.
                    if let Err(e) = crate::merge::queue::follow_target(
                        &self.store,
                        &self.opts.remote,
                        &ctx.target,
                    ) {
                        report(Report::Skipped {
                            run: run.id.to_string(),
                            why: format!("{e} (trying again next round)"),
                            cause: SkipCause::Following(match e {
                                crate::merge::MergeError::Checkout { problem, .. } => {
                                    Some(*problem)
                                }
                                _ => None,
                            }),
                        });
                        return Ok(());
                    }
                    followed = true;
                }
                if self.claim_task(&ctx, run, &task, report)? && ctx.serial.contains(&task) {
                    break;
                }
            }
        }
        Ok(())
    }

    /// Tasks of `run` whose claim on the remote still binds.
    fn claimed_anywhere(&self, run: &RunState) -> Result<Vec<TaskId>, WorkerError> {
        let prefix = format!(
            "{}{}/",
            crate::store::refs::REMOTES_PREFIX,
            self.opts.remote
        ) + &format!("claims/{}/", run.id);
        let mut out = Vec::new();
        for (name, commit) in self.store.refs_with_prefix(&prefix)? {
            let what = &name[prefix.len()..];
            let Ok(task) = TaskId::new(what) else {
                continue;
            };
            let Ok(claim) = self.store.read_claim(commit) else {
                continue;
            };
            if claim::free(run, commit, &claim, now_ms()).is_none() {
                out.push(task);
            }
        }
        for (r, t) in self.live.keys() {
            if *r == run.id && !out.contains(t) {
                out.push(t.clone());
            }
        }
        Ok(out)
    }

    /// Tries to claim `task`; on success starts its attempt. Returns whether
    /// this worker won.
    fn claim_task(
        &mut self,
        ctx: &Arc<RunContext>,
        run: &RunState,
        task: &TaskId,
        report: &(dyn Fn(Report) + Sync),
    ) -> Result<bool, WorkerError> {
        // A task none of whose agents can work on this machine gets no
        // claim here: another worker's may work. Said once.
        if let Some(sub) = ctx.plan().subtask(task.as_str()) {
            let chain = crate::run::schedule::agent_chain(&ctx.run_settings, run, sub);
            if let Err(why) = attempt::choose_agent(ctx, &chain) {
                self.skip_for_config(&run.id, why.to_string(), report);
                return Ok(false);
            }
        }
        let name = Store::claim_ref(run.id.as_str(), task.as_str());
        let previous = self.store.tracked(&self.opts.remote, &name)?;
        let found = match previous {
            Some(prev) => Some((prev, self.store.read_claim(prev)?)),
            None => None,
        };
        let found = found.as_ref().map(|(commit, claim)| (*commit, claim));
        let (n, took_over_from, abandon) = match claim::decide(run, task, found, now_ms()) {
            claim::Decision::Held => return Ok(false),
            claim::Decision::Take {
                attempt,
                took_over_from,
                abandon,
            } => (attempt, took_over_from, abandon),
        };
        let writer = self.store.writer()?;
        let claim = Claim {
            version: 1,
            run: run.id.to_string(),
            what: task.to_string(),
            attempt: n,
            writer: writer.to_string(),
            host: crate::run::host(),
            pid: std::process::id(),
            lease_secs: self.opts.lease.as_secs().max(1),
            claimed_ms: now_ms(),
        };
        let commit = self.store.write_claim(&claim, previous)?;
        let what = format!("the claim on {}/{task}", run.id);
        match self.store.push_atomic(&self.opts.remote, &[(commit, name)]) {
            Ok(Pushed::Accepted) => self.pushed(),
            Ok(pushed) if pushed.lost_race() => return Ok(false),
            Ok(Pushed::Rejected(why)) => {
                self.push_failed(
                    what,
                    format!("{} refused it: {why}", self.opts.remote),
                    report,
                );
                return Ok(false);
            }
            Err(e) => {
                self.push_failed(what, e.to_string(), report);
                return Ok(false);
            }
        }
        let mut events = vec![Event::Claimed {
            run_id: run.id.clone(),
            what: task.to_string(),
            attempt: n,
            commit,
            lease_secs: claim.lease_secs,
            host: claim.host.clone(),
            pid: claim.pid,
            took_over_from: took_over_from.clone(),
        }];
        if let Some(old) = abandon {
            events.push(Event::attempt_finished(
                &run.id,
                task,
                old,
                Outcome::Abandoned,
                Some(Failure {
                    class: FailureClass::Interrupted,
                    reason: format!(
                        "its worker ({}) stopped renewing its claim; taken over by {}",
                        took_over_from.as_deref().unwrap_or("?"),
                        claim.host
                    ),
                }),
            ));
        }
        self.store.append(events)?;
        report(Report::Claimed {
            run: run.id.to_string(),
            task: task.to_string(),
            attempt: n,
            took_over_from,
        });
        // Re-read: the abandonment above changes the retry context.
        let fresh = self.unfinished_runs()?;
        let run = fresh.get(&run.id).unwrap_or(run);
        let job = Attempt::next(&self.store, ctx, run, task, n, self.exe.clone())?;
        report(Report::Run {
            run: run.id.to_string(),
            progress: Progress::Dispatched {
                task: task.to_string(),
                attempt: n,
                agent: job.agents[0].clone(),
            },
        });
        let cancel = CancellationToken::new();
        let run_id = run.id.clone();
        let stop = cancel.clone();
        let handle = self
            .running
            .spawn(async move { (run_id, attempt::run(job, stop).await) });
        self.running_tasks
            .insert(handle.id(), (run.id.clone(), task.clone()));
        self.live.insert(
            (run.id.clone(), task.clone()),
            ClaimedAttempt {
                claim: commit,
                cancel,
                renewed: Instant::now(),
            },
        );
        Ok(true)
    }

    /// An attempt ended: publish its branch; its claim is free now that
    /// its end is in the log.
    fn ended(
        &mut self,
        run: RunId,
        end: AttemptEnd,
        report: &(dyn Fn(Report) + Sync),
    ) -> Result<(), WorkerError> {
        self.live.remove(&(run.clone(), end.task.clone()));
        if let Some(f) = end
            .failure
            .as_ref()
            .filter(|f| f.class == FailureClass::Config)
        {
            self.skip_for_config(&run, f.reason.clone(), report);
        }
        let branch = format!("refs/heads/orch/{}/{}/attempt-{}", run, end.task, end.n);
        if let Some(tip) = self.store.ref_target(&branch)? {
            // Best effort: the result is also kept under refs/orch/keep,
            // which sync pushes; the branch is for people.
            let _ = self.store.push_atomic(&self.opts.remote, &[(tip, branch)]);
        }
        report(Report::Run {
            run: run.to_string(),
            progress: Progress::Ended {
                task: end.task.to_string(),
                attempt: end.n,
                outcome: end.outcome,
                reason: end.failure.map(|f| f.reason),
            },
        });
        self.sync(report);
        Ok(())
    }

    /// This machine's agents cannot work for `run` as configured: it is
    /// left to other workers, said once.
    fn skip_for_config(&mut self, run: &RunId, why: String, report: &(dyn Fn(Report) + Sync)) {
        if self.skipped.contains_key(run) {
            return;
        }
        report(Report::Skipped {
            run: run.to_string(),
            why: why.clone(),
            cause: SkipCause::Config,
        });
        self.contexts.remove(run);
        self.skipped.insert(run.clone(), why);
    }

    /// Whether an attempt this worker ran waits to land.
    /// Every unfinished run, read from the state index brought up to date.
    fn unfinished_runs(&mut self) -> Result<BTreeMap<RunId, RunState>, WorkerError> {
        Ok(self.state.read(&self.store, |index| index.unfinished())?)
    }

    /// The runs this worker saw that have ended with tasks not done.
    fn incomplete(&mut self) -> Result<Vec<(RunId, RunSummary)>, WorkerError> {
        let seen: Vec<RunId> = self.seen.iter().cloned().collect();
        let states = self.state.read(&self.store, |index| index.states(seen))?;
        Ok(states
            .into_values()
            .filter_map(|r| Some((r.id.clone(), r.finished?)))
            .filter(|(_, s)| !crate::run::view::is_complete(s))
            .collect())
    }

    fn has_own_queued(&self, runs: &BTreeMap<RunId, RunState>) -> bool {
        let Ok(me) = self.store.writer() else {
            return false;
        };
        // A run this worker stopped working (its landing was refused, its
        // approval withdrawn) has nothing it will land: `--once` ends.
        runs.values().any(|r| {
            r.finished.is_none()
                && !self.skipped.contains_key(&r.id)
                && r.waiting_to_land().any(|(_, a)| a.writer == me)
        })
    }

    /// Starts a landing for the first run with passed attempts, if this
    /// worker can take the run's queue claim.
    fn land(
        &mut self,
        runs: &BTreeMap<RunId, RunState>,
        report: &(dyn Fn(Report) + Sync),
    ) -> Result<(), WorkerError> {
        if !self.landing.is_empty() || !self.may_push() {
            return Ok(());
        }
        for run in runs
            .values()
            .filter(|r| r.finished.is_none() && r.settings.workers)
        {
            if self.skipped.contains_key(&run.id) {
                continue;
            }
            let queued = run.waiting_to_land().next().is_some();
            if !queued {
                continue;
            }
            let name = Store::claim_ref(run.id.as_str(), QUEUE_CLAIM);
            let previous = self.store.tracked(&self.opts.remote, &name)?;
            if let Some(prev) = previous {
                let claim = self.store.read_claim(prev)?;
                if claim::free(run, prev, &claim, now_ms()).is_none() {
                    continue;
                }
            }
            // Where a lander has read the queue and not claimed it yet.
            crate::failpoint::hit("worker.claim-queue");
            let writer = self.store.writer()?;
            let claim = Claim {
                version: 1,
                run: run.id.to_string(),
                what: QUEUE_CLAIM.into(),
                attempt: 0,
                writer: writer.to_string(),
                host: crate::run::host(),
                pid: std::process::id(),
                // The same lease as a task's: renewed while the landing
                // runs, so a killed lander holds the queue only that long.
                lease_secs: self.opts.lease.as_secs().max(1),
                claimed_ms: now_ms(),
            };
            let commit = self.store.write_claim(&claim, previous)?;
            let what = format!("the merge queue claim of {}", run.id);
            match self
                .store
                .push_atomic(&self.opts.remote, &[(commit, name.clone())])
            {
                Ok(Pushed::Accepted) => self.pushed(),
                Ok(pushed) if pushed.lost_race() => continue,
                Ok(Pushed::Rejected(why)) => {
                    self.push_failed(
                        what,
                        format!("{} refused it: {why}", self.opts.remote),
                        report,
                    );
                    return Ok(());
                }
                Err(e) => {
                    self.push_failed(what, e.to_string(), report);
                    return Ok(());
                }
            }
            self.store.append(vec![Event::Claimed {
                run_id: run.id.clone(),
                what: QUEUE_CLAIM.into(),
                attempt: 0,
                commit,
                lease_secs: claim.lease_secs,
                host: claim.host,
                pid: claim.pid,
                took_over_from: None,
            }])?;
            let mut queue =
                crate::merge::Queue::for_run(&self.store, self.state.clone(), run, None, None)
                    .map_err(|e| WorkerError::Config(e.to_string()))?;
            queue.remote = Some(self.opts.remote.clone());
            queue.fence = Some((name, commit));
            let run_id = run.id.clone();
            self.landing_claim = Some((run_id.clone(), commit, Instant::now()));
            self.landing.spawn(async move {
                let cancel = CancellationToken::new();
                let result = queue.land_next(&cancel).await;
                (run_id, commit, result)
            });
            return Ok(());
        }
        Ok(())
    }

    fn landed(
        &mut self,
        (run, claim, result): Landing,
        report: &(dyn Fn(Report) + Sync),
    ) -> Result<(), WorkerError> {
        self.landing_claim = None;
        self.store.append(vec![Event::ClaimReleased {
            run_id: run.clone(),
            commit: claim,
        }])?;
        let run_s = run.to_string();
        match result {
            Ok(r) => {
                for a in r.landed {
                    report(Report::Run {
                        run: run_s.clone(),
                        progress: Progress::Landed(a),
                    });
                }
                for (attempt, reason) in r.failed {
                    report(Report::Run {
                        run: run_s.clone(),
                        progress: Progress::LandingFailed { attempt, reason },
                    });
                }
                for problem in r.warnings {
                    report(Report::Run {
                        run: run_s.clone(),
                        progress: Progress::Landing {
                            problem,
                            stops: false,
                        },
                    });
                }
                if let Some(problem) = r.refused {
                    report(Report::Skipped {
                        run: run_s,
                        why: problem.to_string(),
                        cause: SkipCause::Landing(problem.clone()),
                    });
                    self.skipped.insert(run, problem.to_string());
                }
            }
            // A refused push, a lost claim, a remote out of reach: the
            // attempts wait in the queue for the next landing, here or on
            // another machine.
            Err(why) => report(Report::Run {
                run: run_s,
                progress: Progress::Warning(format!(
                    "the landing stopped: {why}; its attempts wait for the next one"
                )),
            }),
        }
        self.sync(report);
        Ok(())
    }

    /// Records runs whose every task has ended (and nothing waits to land)
    /// as finished.
    fn finish_runs(
        &mut self,
        runs: &BTreeMap<RunId, RunState>,
        report: &(dyn Fn(Report) + Sync),
    ) -> Result<(), WorkerError> {
        for run in runs.values().filter(|r| r.finished.is_none()) {
            let Some(ctx) = self.contexts.get(&run.id).cloned() else {
                continue;
            };
            if self.live.keys().any(|(r, _)| *r == run.id) || !self.landing.is_empty() {
                continue;
            }
            let plan = ctx.plan();
            // Nothing can start, nothing runs anywhere, nothing waits to
            // land: what is left is failed, cancelled, skipped or blocked.
            let all_ended = ready_tasks(run, plan).is_empty()
                && !run.attempts().any(|(_, a)| a.is_open())
                && run.waiting_to_land().next().is_none();
            if !all_ended {
                continue;
            }
            let summary = crate::run::summarize(run, plan);
            self.store.append(vec![Event::RunFinished {
                run_id: run.id.clone(),
                summary: summary.clone(),
                closed: None,
            }])?;
            // Archived: this clone's attempts' worktrees and branches go by
            // `[orch] cleanup` (never a dirty one, never a commit nothing
            // else keeps; other clones clean their own).
            let runs = self
                .state
                .read(&self.store, |index| index.states(vec![run.id.clone()]))?;
            let _ =
                crate::run::control::after_run(&self.store, &runs, &run.id, ctx.settings.cleanup);
            report(Report::Finished {
                run: run.id.to_string(),
                summary,
            });
        }
        Ok(())
    }

    /// Ctrl-C: stop attempts (they record themselves abandoned), release
    /// claims, publish.
    async fn interrupt(
        &mut self,
        report: &(dyn Fn(Report) + Sync),
    ) -> Result<WorkerOutcome, WorkerError> {
        for live in self.live.values() {
            live.cancel.cancel();
        }
        while let Some(done) = self.running.join_next().await {
            if let Ok((run, end)) = done {
                self.ended(run, end, report)?;
            }
        }
        self.landing.abort_all();
        if let Some((run, claim, _)) = self.landing_claim.take() {
            self.store.append(vec![Event::ClaimReleased {
                run_id: run,
                commit: claim,
            }])?;
        }
        self.sync(report);
        Ok(WorkerOutcome::Interrupted)
    }
}
