//! Preparing a run: the approval checked, the target, base and settings
//! settled, and a run started, resumed or found to have nothing to do;
//! with the look-ups commands share (the run a command means, its plan
//! revision, its context, its summary).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::approval::{self, Verdict as ApprovalVerdict};
use crate::config::Settings;
use crate::event::{Event, RunSettings, RunSummary};
use crate::ids::{PlanId, RunId, TaskId};
use crate::plan::Plan;
use crate::plan::revisions::{self, PlanRevision};
use crate::state::{RunState, StateIndex, TaskStatus};
use crate::store::{Oid, Store, StoreError};

use super::context::{DryRun, Prepared, RunContext, RunError, RunOptions};
use super::schedule::retries_for;

/// A run id: the plan id (shortened) and six random hex digits.
fn new_run_id(plan: &PlanId) -> RunId {
    let short: String = plan.as_str().chars().take(40).collect();
    let short = short.trim_end_matches('-');
    let hex: String = crate::ids::random_bytes::<3>()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    RunId::new(format!("{short}-{hex}")).expect("a plan id plus hex is a valid run id")
}

pub fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// The unfinished run of `plan_id`, if any.
pub fn unfinished(
    index: &mut StateIndex,
    plan_id: &PlanId,
) -> Result<Option<RunState>, StoreError> {
    let newest = index
        .open_runs()
        .filter(|b| b.plan_id == *plan_id)
        .max_by_key(|b| b.started_ms)
        .map(|b| b.id.clone());
    match newest {
        Some(id) => Ok(index.run(&id)?.cloned()),
        None => Ok(None),
    }
}

/// Path of the lock the driver of `run` holds.
pub fn driver_lock_path(store: &Store, run: &RunId) -> PathBuf {
    store.orch_dir().join("runs").join(format!("{run}.lock"))
}

/// Checks the approval and settles everything a run needs; starts a new
/// run, picks up the unfinished one, or finds there is nothing to do.
///
/// Starting is atomic: the check for an unfinished run and the
/// `run_started` record happen under the plan's lock
/// (`.git/orch/runs/plan-<plan>.lock`), so of two `git orch run` of one
/// plan in one clone exactly one starts the run and the other finds it to
/// resume (and then drives it or follows the one that does). With a
/// sharing remote (`orch.remote`), a new run is also claimed there by a
/// non-forced push of `refs/orch/starts/<plan>`: of two clones starting
/// the plan at once, one wins and the other is told whose run it is.
pub fn prepare(store: &Store, plan_id: &PlanId, opts: &RunOptions) -> Result<Prepared, RunError> {
    let verdict = approval_verdict(store, plan_id)?;
    let ApprovalVerdict::Valid { current, approval } = verdict else {
        return Err(RunError::NotApproved {
            run: None,
            verdict: Box::new(verdict),
        });
    };
    let revision = *current;
    if opts.start_only
        && let Some(sub) = revision
            .plan
            .subtasks
            .iter()
            .find(|s| !s.candidates.is_empty())
    {
        return Err(RunError::CandidatesForWorkers {
            plan: plan_id.clone(),
            why: format!("subtask {} lists candidates", sub.id),
        });
    }
    let _plan_lock = if opts.dry_run {
        None
    } else {
        Some(crate::store::lock::acquire(
            &store
                .orch_dir()
                .join("runs")
                .join(format!("plan-{plan_id}.lock")),
            &format!("starting a run of plan {plan_id}"),
            Duration::from_secs(120),
        )?)
    };
    let remote = if opts.dry_run {
        None
    } else {
        sharing_remote(store)?
    };
    if let Some(remote) = &remote {
        // See other clones' runs of this plan before deciding.
        store.sync(remote)?;
    }
    let state = crate::state::SharedIndex::open(store)?;
    let previous = state.read(store, |index| unfinished(index, plan_id))?;
    if let Some(prev) = &previous
        && !opts.dry_run
    {
        if prev.plan_hash != revision.hash {
            supersede(
                store,
                prev,
                &revision,
                format!("replaced by revision {} of the plan", revision.revision),
            )?;
        } else if opts.new {
            refuse_foreign(store, prev)?;
            supersede(
                store,
                prev,
                &revision,
                "replaced by a fresh run (`git orch run --new`)".into(),
            )?;
        }
    }
    // The unfinished run `--new` closes (or would, in a dry run).
    let closes = previous
        .as_ref()
        .filter(|p| opts.new && p.plan_hash == revision.hash)
        .map(|p| p.id.clone());
    let resume = previous.filter(|p| p.plan_hash == revision.hash && !opts.new);
    if let Some(r) = &resume {
        refuse_foreign(store, r)?;
    }
    let target = choose_target(store, resume.as_ref(), opts, &revision)?;
    let target_tip = store.ref_target(&format!("refs/heads/{target}"))?;
    let base = match (&resume, &opts.base) {
        (Some(r), _) => r.base,
        (None, Some(b)) => store
            .resolve_commit(b)?
            .ok_or_else(|| RunError::BadBase(b.clone()))?,
        (None, None) => {
            let tip = target_tip.ok_or_else(|| RunError::NoTarget(target.clone()))?;
            refuse_dirty(store, &revision.plan, &target)?;
            tip
        }
    };
    if opts.start_only && resume.is_none() && !opts.dry_run {
        refuse_unpublished(store, remote.as_deref(), &target, base)?;
    }
    let settings = settings_at(store, base)?;
    let warnings = match &resume {
        _ if opts.dry_run => Vec::new(),
        Some(r) => config_drift(store, r, &target, target_tip)?
            .into_iter()
            .collect(),
        None => config_warnings(store, base)?,
    };
    // A sandbox that is asked for but cannot work, or a bind that
    // cannot, stops the run before anything is written.
    crate::sandbox::resolve(&settings.sandbox)?.check_binds(Some(store.common_dir()))?;
    let worktree_root = worktree_root(store, &settings);
    if let Some(w) = store.workdir() {
        let w = w.canonicalize().unwrap_or_else(|_| w.to_owned());
        let root = worktree_root
            .canonicalize()
            .unwrap_or_else(|_| worktree_root.clone());
        if root.starts_with(&w) {
            return Err(RunError::NestedRoot { root, workdir: w });
        }
    }
    let run_settings = match &resume {
        Some(r) => {
            let mut s = r.settings.clone();
            if let Some(c) = opts.cap {
                s.cap = c.max(1);
            }
            if let Some(t) = opts.timeout {
                s.timeout_secs = t.as_secs().max(1);
            }
            s
        }
        None => RunSettings {
            cap: opts.cap.unwrap_or(settings.cap).max(1),
            agent: opts
                .agent
                .clone()
                .or_else(|| settings.agent.clone())
                .unwrap_or_else(|| "claude".into()),
            fallback: settings.fallback.clone(),
            timeout_secs: opts.timeout.unwrap_or(settings.timeout).as_secs().max(1),
            budget_usd: opts.budget,
            retries: settings.retries,
            breaker_failures: settings.breaker.consecutive_failures,
            breaker_retries: settings.breaker.total_retries,
            breaker_empty: settings.breaker.consecutive_empty,
            workers: opts.start_only,
            best_of: opts.best_of.unwrap_or(1).max(1),
        },
    };
    let Carrying { carried, redone } = match &resume {
        Some(_) => Carrying::default(),
        None => state.read(store, |index| {
            carried_tasks(store, index, &revision, &target, opts)
        })?,
    };
    let budget = opts.budget.or(run_settings.budget_usd);
    if opts.dry_run {
        let mut tasks = match &resume {
            Some(r) => r.clone(),
            None => empty_run(&revision, &target, base, &run_settings),
        };
        for (task, c) in &carried {
            tasks.tasks.entry(task.clone()).or_default().carried = Some(c.clone());
        }
        let ready = super::schedule::ready_tasks(&tasks, &revision.plan);
        return Ok(Prepared::DryRun(DryRun {
            run: resume.as_ref().map(|r| r.id.clone()),
            plan_id: plan_id.clone(),
            revision: revision.revision,
            target,
            base,
            worktree_root,
            tasks: revision
                .plan
                .subtasks
                .iter()
                .map(|s| {
                    let status = tasks
                        .tasks
                        .get(&s.id)
                        .map(|t| t.status(run_settings.retries).as_str())
                        .unwrap_or("pending");
                    (s.id.to_string(), status.to_owned(), ready.contains(&s.id))
                })
                .collect(),
            settings: run_settings,
            redone,
            closes,
        }));
    }
    if resume.is_none()
        && revision
            .plan
            .subtasks
            .iter()
            .all(|s| carried.contains_key(&s.id))
    {
        let last = state
            .read(store, |index| {
                let last = index.last_finished_of_plan(plan_id)?;
                match last {
                    Some(b) => Ok::<_, RunError>(index.run(&b.id)?.cloned()),
                    None => Ok(None),
                }
            })?
            .ok_or_else(|| {
                RunError::Internal("every task is carried but no run landed them".into())
            })?;
        return Ok(Prepared::NothingToDo(Box::new(last)));
    }
    // Every task to run needs an agent that can work here, checked where
    // it will run: else the run stops now, with the fix, before any
    // attempt (workers check their own machines).
    let agent_warnings = if opts.start_only {
        Vec::new()
    } else {
        let to_run = |sub: &crate::plan::Subtask| match &resume {
            Some(r) => r.tasks.get(&sub.id).is_none_or(|t| {
                !t.status(retries_for(r, sub)).is_terminal()
                    && t.status(retries_for(r, sub)) != TaskStatus::Passed
            }),
            None => !carried.contains_key(&sub.id),
        };
        let chains = planned_chains(&revision.plan, &run_settings, &to_run);
        let checked = crate::preflight::before_run(&settings, &chains, store.common_dir())?;
        if !checked.blocked.is_empty() {
            return Err(RunError::AgentsCannotWork(checked.blocked));
        }
        checked.warnings
    };
    let run_id = resume
        .as_ref()
        .map_or_else(|| new_run_id(plan_id), |r| r.id.clone());
    let mut ctx = build_context(
        store,
        state,
        run_id,
        revision,
        settings,
        run_settings,
        target,
        base,
        budget,
    )?;
    ctx.warnings = warnings;
    ctx.agent_warnings = agent_warnings;
    if !opts.dry_run {
        ctx.warnings.extend(unpassed_variables(
            &ctx.settings,
            &ctx.run_settings.agent,
            ctx.plan(),
        ));
    }
    if resume.is_some() {
        return Ok(Prepared::Resumed(ctx));
    }
    let started = Event::RunStarted {
        run_id: ctx.run.clone(),
        plan_id: plan_id.clone(),
        revision: ctx.revision.revision,
        plan_hash: ctx.revision.hash.clone(),
        approval: approval.commit,
        target: ctx.target.clone(),
        base,
        settings: ctx.run_settings.clone(),
        carried,
        by: store
            .user_identity()?
            .map(|(name, email)| crate::event::Person { name, email }),
    };
    match &remote {
        Some(remote) => start_shared(store, remote, plan_id, &ctx.run, started)?,
        None => {
            store.append(vec![started])?;
        }
    }
    Ok(Prepared::Started(ctx))
}

/// The remote this clone shares state through, if `init --remote` set one.
pub fn sharing_remote(store: &Store) -> Result<Option<String>, StoreError> {
    match store.config_get("orch.remote")? {
        Some(r) if store.config_get(&format!("remote.{r}.url"))?.is_some() => Ok(Some(r)),
        _ => Ok(None),
    }
}

/// Refuses to record a run for workers whose base is not on the sharing
/// remote's target branch (fetched now): workers start every attempt from
/// the remote's target, and a base only this clone has makes each of them
/// conflict, or land on top of commits nobody pushed.
fn refuse_unpublished(
    store: &Store,
    remote: Option<&str>,
    target: &str,
    base: Oid,
) -> Result<(), RunError> {
    let remote = remote.ok_or(RunError::NoSharedRemote)?;
    let published = match store.fetch_branch(remote, target)? {
        Some(tip) => store.is_ancestor(base, tip)?,
        None => false,
    };
    if published {
        return Ok(());
    }
    Err(RunError::BaseNotPublished {
        base: base.to_string(),
        remote: remote.to_owned(),
        target: target.to_owned(),
    })
}

/// Closes an unfinished run of an older revision, so it is never resumed
/// against a plan nobody approved any more.
fn supersede(
    store: &Store,
    prev: &RunState,
    revision: &PlanRevision,
    why: String,
) -> Result<(), RunError> {
    if let Err(held) =
        crate::store::lock::try_acquire(&driver_lock_path(store, &prev.id), "superseding")?
    {
        return Err(RunError::Busy {
            run: prev.id.clone(),
            holder: held.holder,
        });
    }
    store.append(vec![Event::RunFinished {
        run_id: prev.id.clone(),
        summary: summarize(prev, &revision.plan),
        closed: Some(why),
    }])?;
    Ok(())
}

/// Refuses to drive a run that is not this clone's to drive: one worked by
/// workers, or one another clone started.
fn refuse_foreign(store: &Store, run: &RunState) -> Result<(), RunError> {
    if run.settings.workers {
        return Err(RunError::WorkersRun {
            run: run.id.clone(),
        });
    }
    let me = store.writer_id()?;
    let starter = run.drivers.first().map(|d| d.writer.clone());
    if starter.is_some() && starter != me {
        return Err(RunError::StartedElsewhere {
            run: run.id.clone(),
            writer: starter.map(|w| w.to_string()).unwrap_or_default(),
        });
    }
    Ok(())
}

/// The branch results land on: the resumed run's, `--target`, the plan's,
/// `orch.target`, else the checked-out branch (else `main`).
fn choose_target(
    store: &Store,
    resume: Option<&RunState>,
    opts: &RunOptions,
    revision: &PlanRevision,
) -> Result<String, RunError> {
    let target = match (resume, &opts.target) {
        (Some(r), _) => r.target.clone(),
        (None, Some(t)) => t.clone(),
        (None, None) => match &revision.plan.target {
            Some(t) => t.clone(),
            None => match store.config_get("orch.target")? {
                Some(t) => t,
                None => store
                    .workdir()
                    .map(|w| store.checked_out_branch(w))
                    .transpose()?
                    .flatten()
                    .and_then(|b| b.strip_prefix("refs/heads/").map(str::to_owned))
                    .unwrap_or_else(|| "main".into()),
            },
        },
    };
    crate::plan::format::check_branch_name(&target).map_err(|source| RunError::BadTarget {
        name: target.clone(),
        source,
    })?;
    Ok(target)
}

/// Refuses to start from the tip of a checkout whose tracked files have
/// uncommitted changes (the run would silently not see them), or that
/// holds untracked files a subtask owns (its landing would meet them).
/// Untracked files no subtask owns are the person's business.
fn refuse_dirty(store: &Store, plan: &Plan, target: &str) -> Result<(), RunError> {
    let Some(w) = store.workdir() else {
        return Ok(());
    };
    // An approved plan's globs compile; one that does not owns nothing.
    let owned: Vec<crate::plan::glob::Ownership> = plan
        .subtasks
        .iter()
        .filter_map(|s| crate::plan::glob::Ownership::new(&s.owned_globs).ok())
        .collect();
    let paths: Vec<String> = store
        .dirty_paths(w)?
        .into_iter()
        .filter(|(p, untracked)| !untracked || owned.iter().any(|o| o.is_owned(p)))
        .map(|(p, untracked)| {
            if untracked {
                format!("{p} (untracked)")
            } else {
                p
            }
        })
        .collect();
    if paths.is_empty() {
        return Ok(());
    }
    Err(RunError::Dirty {
        path: w.to_owned(),
        target: target.to_owned(),
        paths,
    })
}

/// What a resumed run should say when `.orch/config` on its target has
/// changed since its base: the run keeps the configuration of its base (a
/// fixed agent command would not reach it), and `--new` is how to get a
/// run with the new one.
fn config_drift(
    store: &Store,
    run: &RunState,
    target: &str,
    tip: Option<Oid>,
) -> Result<Option<String>, RunError> {
    let (base, Some(tip)) = (run.base, tip) else {
        return Ok(None);
    };
    if base == tip {
        return Ok(None);
    }
    let path = crate::store::config::PROJECT_CONFIG;
    if store.file_at(base, path)? == store.file_at(tip, path)? {
        return Ok(None);
    }
    Ok(Some(format!(
        "{path} on {target} changed since run {} started from {}; a resumed run keeps the configuration of its base. `git orch run {} --new` closes this run and starts a fresh one from {target}'s tip with the new configuration (landed work is carried)",
        run.id,
        &run.base.to_string()[..12],
        run.plan_id
    )))
}

/// Warnings for command agents of this run whose template names a
/// variable of the user's shell that the allow-listed environment leaves
/// out: it would expand to nothing, silently. Each names the `passEnv`
/// that lets it through.
fn unpassed_variables(settings: &Settings, agent: &str, plan: &crate::plan::Plan) -> Vec<String> {
    use crate::agent::{AgentKind, AgentSpec, environment};
    let mut names: Vec<&str> = vec![agent];
    names.extend(settings.fallback.iter().map(String::as_str));
    for sub in &plan.subtasks {
        names.extend(sub.agent.as_deref());
        names.extend(sub.candidates.iter().map(String::as_str));
    }
    names.sort_unstable();
    names.dedup();
    let extra = std::env::var(crate::sandbox::PASS_ENV).unwrap_or_default();
    let mut warnings = Vec::new();
    for name in names {
        let Ok(spec) = AgentSpec::resolve(name, &settings.agents) else {
            continue; // an unknown agent is the preflight's to report
        };
        if spec.kind != AgentKind::Command {
            continue;
        }
        let mut patterns: Vec<&str> = environment::BASE.to_vec();
        patterns.extend(spec.pass_env.iter().map(String::as_str));
        patterns.extend(settings.sandbox.pass_env.iter().map(String::as_str));
        patterns.extend(
            extra
                .split([' ', ','])
                .map(str::trim)
                .filter(|p| !p.is_empty()),
        );
        // Variables the agent's own `env = NAME=VALUE` sets are there.
        let set: Vec<&str> = spec.env.iter().map(|(k, _)| k.as_str()).collect();
        patterns.extend(set);
        let text = std::iter::once(spec.command.clone().unwrap_or_default())
            .chain(spec.args.iter().cloned())
            .collect::<Vec<_>>()
            .join(" ");
        for var in environment::unpassed_references(&text, &patterns) {
            warnings.push(format!(
                "agent {name}'s command names ${var}, which agents do not get (only allow-listed variables reach them): it will expand to nothing. Add `passEnv = {var}` to `[agent \"{name}\"]` (or `[sandbox] passEnv`) in .orch/config to pass it"
            ));
        }
    }
    warnings
}

/// What a person should know before the run starts: project settings
/// edited but not committed are not what the run reads.
fn config_warnings(store: &Store, base: Oid) -> Result<Vec<String>, RunError> {
    let Some(w) = store.workdir() else {
        return Ok(Vec::new());
    };
    Ok(store
        .dirty_paths(w)?
        .into_iter()
        .filter(|(p, _)| p == ".orch/config" || p.starts_with(".orch/"))
        .map(|(p, _)| {
            format!(
                "{p} has uncommitted changes; this run reads the committed one at {}",
                &base.to_string()[..12]
            )
        })
        .collect())
}

/// What a new run takes over from the plan's last finished run.
#[derive(Default)]
struct Carrying {
    /// Tasks landed before, whose product is unchanged: done without an
    /// attempt.
    carried: BTreeMap<TaskId, crate::event::Carried>,
    /// Tasks landed before that run again, and why.
    redone: BTreeMap<TaskId, String>,
}

/// The tasks of `revision` that the plan's last finished run on `target`
/// already landed (or carried), whose [product](product) is unchanged;
/// `--redo-all` carries none, `--redo` leaves the named ones out. The others
/// that landed there are listed with the reason they run again.
fn carried_tasks(
    store: &Store,
    index: &mut StateIndex,
    revision: &PlanRevision,
    target: &str,
    opts: &RunOptions,
) -> Result<Carrying, RunError> {
    for t in &opts.redo {
        if revision.plan.subtask(t.as_str()).is_none() {
            return Err(RunError::UnknownTask {
                plan: revision.plan.id.clone(),
                task: t.clone(),
            });
        }
    }
    let mut out = Carrying::default();
    let Some(last) = index.last_finished_of_plan(&revision.plan.id)? else {
        return Ok(out);
    };
    let Some(run) = index.run(&last.id)?.cloned() else {
        return Ok(out);
    };
    let before = if run.plan_hash == revision.hash {
        revision.plan.clone()
    } else {
        plan_of(store, &run)?.plan
    };
    for sub in &revision.plan.subtasks {
        let Some(t) = run.tasks.get(&sub.id) else {
            continue;
        };
        let carried = match (
            &t.carried,
            t.attempts.iter().rev().find(|a| a.landed.is_some()),
        ) {
            (_, Some(a)) => crate::event::Carried {
                run: run.id.clone(),
                attempt: a.n,
            },
            (Some(c), None) if t.attempts.is_empty() => c.clone(),
            _ => continue,
        };
        let changed = before
            .subtask(sub.id.as_str())
            .map(|old| changed_product(old, sub));
        let why = if opts.redo_all {
            Some("--redo-all".to_owned())
        } else if opts.redo.contains(&sub.id) {
            Some("--redo names it".to_owned())
        } else if run.target != target {
            Some(format!(
                "run {} landed it on {}, not {target}",
                run.id, run.target
            ))
        } else {
            match changed {
                None => Some(format!("run {} had no subtask of that id", run.id)),
                Some(fields) if !fields.is_empty() => Some(format!(
                    "its {} changed since run {} landed it",
                    fields.join(", "),
                    run.id
                )),
                Some(_) => None,
            }
        };
        match why {
            Some(why) => {
                out.redone.insert(sub.id.clone(), why);
            }
            None => {
                out.carried.insert(sub.id.clone(), carried);
            }
        }
    }
    Ok(out)
}

/// What a subtask produces and how that is judged, field by field: its
/// title and deliverable (what the agent is asked for), its owned globs,
/// its verification and its gates' commands and modes. Not how it is run
/// (agent, candidates, retries, branch, serial, dependencies, gate
/// timeouts): changing those never redoes landed work.
fn product(sub: &crate::plan::Subtask) -> [(&'static str, serde_json::Value); 5] {
    let gates: BTreeMap<&String, serde_json::Value> = sub
        .gates
        .iter()
        .map(|(name, g)| (name, serde_json::json!([g.run, g.mode])))
        .collect();
    [
        ("title", serde_json::json!(sub.title)),
        ("deliverable", serde_json::json!(sub.deliverable)),
        ("owned globs", serde_json::json!(sub.owned_globs)),
        ("verification", serde_json::json!(sub.verification)),
        ("gates", serde_json::json!(gates)),
    ]
}

/// The fields of [`product`] that differ between two definitions.
fn changed_product(old: &crate::plan::Subtask, new: &crate::plan::Subtask) -> Vec<&'static str> {
    product(old)
        .into_iter()
        .zip(product(new))
        .filter(|((_, a), (_, b))| a != b)
        .map(|((name, _), _)| name)
        .collect()
}

/// Starts a run shared through `remote`: claims the plan's start there
/// (`refs/orch/starts/<plan>`, a commit naming the run, pushed without
/// force on top of the previous start) together with the log, in one
/// atomic push. Losing the race means another clone started the plan.
fn start_shared(
    store: &Store,
    remote: &str,
    plan: &PlanId,
    run: &RunId,
    started: Event,
) -> Result<(), RunError> {
    let name = format!("refs/orch/starts/{plan}");
    let published = store.transact_published(
        |store| {
            let previous = store.tracked(remote, &name)?;
            let commit = store.write_run_start(plan.as_str(), run.as_str(), previous)?;
            Ok::<_, RunError>((
                crate::store::log::Operation {
                    events: vec![started.clone()],
                    refs: vec![crate::store::refs::RefUpdate::set(
                        &name,
                        commit,
                        crate::store::refs::Expected::from_read(store.ref_target(&name)?),
                        &format!("orch: start {run}"),
                    )],
                },
                (),
            ))
        },
        |store, updates| {
            let pushes: Vec<(crate::store::Oid, String)> = updates
                .iter()
                .filter_map(|u| u.new.map(|n| (n, u.name.clone())))
                .collect();
            match store.push_atomic(remote, &pushes)? {
                crate::store::remote::Pushed::Accepted => Ok(true),
                pushed if pushed.lost_race() => Ok(false),
                crate::store::remote::Pushed::Rejected(why) => Err(RunError::StartRefused {
                    remote: remote.to_owned(),
                    run: run.clone(),
                    why,
                }),
            }
        },
    )?;
    if published.is_none() {
        // Someone else's start landed first: say whose.
        store.sync(remote)?;
        let mut index = StateIndex::open(store)?;
        let other = unfinished(&mut index, plan)?;
        return Err(match other {
            Some(r) => RunError::StartedElsewhere {
                run: r.id.clone(),
                writer: r
                    .drivers
                    .first()
                    .map(|d| d.writer.to_string())
                    .unwrap_or_default(),
            },
            None => RunError::StartRace { plan: plan.clone() },
        });
    }
    Ok(())
}

/// The project settings (`.orch/config`) at a run's base commit.
fn settings_at(store: &Store, base: Oid) -> Result<Settings, RunError> {
    Settings::from_values(&store.project_config(Some(base))?).map_err(RunError::Settings)
}

/// Where attempt worktrees go (see [`crate::config::worktree_root`]).
pub fn worktree_root(store: &Store, settings: &Settings) -> PathBuf {
    crate::config::worktree_root(store.common_dir(), settings)
}

/// Settles what a driver needs to know about a run: the serial tasks from
/// the plan's analysis at the base, and the bound on disk-heavy steps.
#[allow(clippy::too_many_arguments)]
fn build_context(
    store: &Store,
    state: crate::state::SharedIndex,
    run: RunId,
    revision: PlanRevision,
    settings: Settings,
    run_settings: RunSettings,
    target: String,
    base: Oid,
    budget: Option<f64>,
) -> Result<RunContext, RunError> {
    let review = approval::review(store, &revision.plan, Some(&base.to_string()))?;
    let serial = review
        .analysis
        .serial
        .iter()
        .filter_map(|t| crate::ids::TaskId::new(t).ok())
        .collect();
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    Ok(RunContext {
        heavy: std::sync::Arc::new(tokio::sync::Semaphore::new(cores.clamp(1, 4))),
        state,
        serial,
        common_dir: store.common_dir().to_owned(),
        run,
        base_tree: store.commit_info(base)?.tree,
        worktree_root: worktree_root(store, &settings),
        hooks_dir: super::workspace::original_hooks_dir(store)?,
        revision,
        settings,
        run_settings,
        target,
        base,
        budget,
        on_step: None,
        warnings: Vec::new(),
        agent_warnings: Vec::new(),
    })
}

/// Whether plan `id`'s latest decision approves its current revision
/// (signed, when `orch.requireSignedApprovals` asks), recorded by an
/// event of git-orch's log: the approvals ref alone is not enough.
pub fn approval_verdict(store: &Store, id: &PlanId) -> Result<ApprovalVerdict, RunError> {
    let require_signed = store
        .config_get("orch.requireSignedApprovals")?
        .is_some_and(|v| v == "true");
    let mut index = StateIndex::open(store)?;
    let mut failed = None;
    let verdict = approval::verify(store, id, require_signed, &mut |commit| {
        index
            .decision_recorded(&commit.to_string(), id)
            .unwrap_or_else(|e| {
                failed = Some(e);
                false
            })
    })?;
    match failed {
        Some(e) => Err(e.into()),
        None => Ok(verdict),
    }
}

/// The context of a run already in the log (started here or on another
/// machine), for a worker. Checks that its approval still holds for the
/// exact plan bytes the run executes.
pub fn context_for(store: &Store, run: &RunState) -> Result<RunContext, RunError> {
    let verdict = approval_verdict(store, &run.plan_id)?;
    match &verdict {
        ApprovalVerdict::Valid { current, .. } if current.hash == run.plan_hash => {}
        _ => {
            return Err(RunError::NotApproved {
                run: Some(run.id.clone()),
                verdict: Box::new(verdict),
            });
        }
    }
    let revision = plan_of(store, run)?;
    let base = run.base;
    let settings = settings_at(store, base)?;
    let mut run_settings = run.settings.clone();
    run_settings.cap = run_settings.cap.max(1);
    build_context(
        store,
        crate::state::SharedIndex::open(store)?,
        run.id.clone(),
        revision,
        settings,
        run_settings,
        run.target.clone(),
        base,
        run.settings.budget_usd,
    )
}

/// A run with no events yet, for dry runs of a new run.
fn empty_run(rev: &PlanRevision, target: &str, base: Oid, settings: &RunSettings) -> RunState {
    RunState {
        id: RunId::new("dry-run").expect("valid id"),
        plan_id: rev.plan.id.clone(),
        revision: rev.revision,
        plan_hash: rev.hash.clone(),
        approval: String::new(),
        target: target.to_owned(),
        base,
        settings: settings.clone(),
        started_ms: 0,
        drivers: Vec::new(),
        by: None,
        stopped: None,
        finished: None,
        closed: None,
        tasks: Default::default(),
        claims: Default::default(),
        landings: Vec::new(),
        integration: Vec::new(),
    }
}

/// Totals of a run as it stands.
pub fn summarize(run: &RunState, plan: &Plan) -> RunSummary {
    let mut s = RunSummary {
        tasks: plan.subtasks.len(),
        ..Default::default()
    };
    let blocked = super::schedule::blocked_tasks(run, plan);
    for sub in &plan.subtasks {
        let status = run
            .tasks
            .get(&sub.id)
            .map(|t| t.status(retries_for(run, sub)))
            .unwrap_or(TaskStatus::Pending);
        match status {
            TaskStatus::Done => s.done += 1,
            TaskStatus::Failed => s.failed += 1,
            TaskStatus::Skipped => s.skipped += 1,
            TaskStatus::Cancelled => s.cancelled += 1,
            _ if blocked.contains(&sub.id) => s.blocked += 1,
            _ => {}
        }
    }
    for (_, a) in run.attempts() {
        s.attempts += 1;
        s.gate_runs += a
            .verdicts
            .iter()
            .filter(|v| {
                !matches!(
                    v.status,
                    crate::event::GateStatus::Skipped | crate::event::GateStatus::Cached
                )
            })
            .count();
    }
    s.cost_usd = super::view::run_usage(run).cost_usd;
    let end = run
        .attempts()
        .filter_map(|(_, a)| a.finished_ms)
        .max()
        .unwrap_or(run.started_ms);
    s.duration_ms = (end - run.started_ms).max(0) as u64;
    s
}

/// The retry budget of one subtask in `run`.
/// The agents each task that `runs` would try, in fallback order: its
/// own or the run's agent, and each best-of-N candidate's, each followed
/// by the run's fallbacks.
fn planned_chains(
    plan: &Plan,
    settings: &RunSettings,
    runs: &dyn Fn(&crate::plan::Subtask) -> bool,
) -> Vec<(String, Vec<String>)> {
    let chain = |first: &str| {
        let mut c = vec![first.to_owned()];
        for f in &settings.fallback {
            if !c.contains(f) {
                c.push(f.clone());
            }
        }
        c
    };
    let mut out = Vec::new();
    for sub in plan.subtasks.iter().filter(|s| runs(s)) {
        let first = sub.agent.as_deref().unwrap_or(&settings.agent);
        out.push((sub.id.to_string(), chain(first)));
        for c in &sub.candidates {
            out.push((sub.id.to_string(), chain(c)));
        }
    }
    out
}

/// The plan revision a run executes.
pub fn plan_of(store: &Store, run: &RunState) -> Result<PlanRevision, RunError> {
    revisions::all(store, &run.plan_id)?
        .into_iter()
        .find(|r| r.hash == run.plan_hash)
        .ok_or_else(|| RunError::PlanNotHere {
            run: run.id.clone(),
            hash: run.plan_hash.clone(),
        })
}

/// The run a command means: `given` (a run id, or a plan id for that
/// plan's newest unfinished run, else its newest finished one), else the
/// newest unfinished run, else the newest run.
pub fn pick_run(index: &mut StateIndex, given: Option<&str>) -> Result<RunState, RunError> {
    if let Some(g) = given {
        let id = RunId::new(g)?;
        if let Some(run) = index.run(&id)?.cloned() {
            return Ok(run);
        }
        if let Ok(plan) = PlanId::new(g) {
            if let Some(run) = unfinished(index, &plan)? {
                return Ok(run);
            }
            if let Some(brief) = index.last_finished_of_plan(&plan)?
                && let Some(run) = index.run(&brief.id)?.cloned()
            {
                return Ok(run);
            }
        }
        return Err(RunError::NoRun(id));
    }
    let newest = index
        .newest_run()
        .map(|b| b.id.clone())
        .ok_or(RunError::NoRuns)?;
    Ok(index
        .run(&newest)?
        .cloned()
        .expect("a run with a brief has a state"))
}
