//! One run's merge queue: which attempts wait to land, and landing them
//! (singly, or as a speculative batch with bisection).
//!
//! **Batching** (`--batch K`, `orch.mergeBatch`): up to K waiting attempts
//! are stacked into candidates c1 (on the tip), c2 (on c1), …, cK; only cK
//! is gated. If it passes, all K land at once. If it fails, the largest
//! passing prefix is found by bisection (gating c⌈K/2⌉ and so on), that
//! prefix lands, the first attempt after it is sent back as the culprit, and
//! the rest wait for the next round. The target still only moves to gated
//! trees; what batching gives up is a gate run on every intermediate commit
//! (c1 … cK−1 of a passing batch land ungated on their own).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use tokio_util::sync::CancellationToken;

use super::MergeError;
use super::bisect;
use super::candidate::{self, Built, Entry, Names, Strategy};
use super::checkout;
use crate::config::Settings;
use crate::event::{Event, Failure, FailureClass, GateMode, Verdict};
use crate::gate::GateDef;
use crate::ids::{RunId, TaskId};
use crate::plan::revisions::PlanRevision;
use crate::run::progress::{LandReport, LandingProblem};
use crate::state::{RunState, SharedIndex, TaskStatus};
use crate::store::log::Operation;
use crate::store::refs::{Applied, Expected, RefUpdate};
use crate::store::{Oid, Store};

/// An attempt held for a person's approval: its result tree, its branch
/// and the control paths it changes.
type Held = (String, String, Vec<String>);

/// How often a landing is rebuilt because the target moved under it.
const MAX_ROUNDS: u32 = 10;

/// The queue of one run.
#[derive(Debug, Clone)]
pub struct Queue {
    pub common_dir: PathBuf,
    pub run: RunId,
    pub revision: PlanRevision,
    pub target: String,
    pub settings: Settings,
    pub strategy: Strategy,
    pub batch: usize,
    /// With a remote (workers sharing one), candidates are built on the
    /// remote's target and a landing is one atomic, non-forced push of the
    /// target and this clone's log: the push is the compare-and-swap.
    pub remote: Option<String>,
    /// With a remote: the claim this landing holds (the run's queue claim
    /// ref and the commit this clone holds there). Each round and the
    /// landing push itself check it still holds: a lander frozen past its
    /// lease, whose claim another took meanwhile, stops instead of
    /// publishing (`MergeError::LeaseLost`).
    pub fence: Option<(String, Oid)>,
    /// The folded log (the driver's, when the queue runs inside a run).
    pub state: SharedIndex,
    /// Who approved the run's plan revision (named in landed commits).
    pub approver: String,
    /// The author of landed commits: the person who started the run.
    pub author: (String, String),
    /// The integration gate's scratch worktree, kept from one landing to
    /// the next and removed when the last clone of this queue goes.
    pub scratch: std::sync::Arc<crate::run::workspace::KeptScratch>,
}

/// The scratch worktree a landing gates its candidates in, and the commit
/// it was put at already, if any.
#[derive(Clone, Copy)]
struct CandidateCheckout<'a> {
    path: &'a Path,
    at: Option<Oid>,
}

async fn blocking<T: Send + 'static>(
    dir: &Path,
    f: impl FnOnce(&Store) -> Result<T, MergeError> + Send + 'static,
) -> Result<T, MergeError> {
    let dir = dir.to_owned();
    tokio::task::spawn_blocking(move || Store::with_reused(&dir, f)?)
        .await
        .expect("merge steps do not panic")
}

/// Plan order with dependencies first (Kahn; plan order breaks ties).
pub fn topo_order(plan: &crate::plan::Plan) -> Vec<TaskId> {
    let mut done: BTreeSet<TaskId> = BTreeSet::new();
    let mut out = Vec::new();
    while out.len() < plan.subtasks.len() {
        let before = out.len();
        for s in &plan.subtasks {
            if !done.contains(&s.id) && s.depends_on.iter().all(|d| done.contains(d)) {
                done.insert(s.id.clone());
                out.push(s.id.clone());
            }
        }
        if out.len() == before {
            break; // a cycle; approved plans have none
        }
    }
    out
}

impl Queue {
    /// The queue of `run`, with its plan and the settings at its base,
    /// reading state through `state`.
    pub fn for_run(
        store: &Store,
        state: SharedIndex,
        run: &RunState,
        strategy: Option<Strategy>,
        batch: Option<usize>,
    ) -> Result<Self, MergeError> {
        let revision = crate::run::plan_of(store, run)?;
        let base = run.base;
        let settings = Settings::from_values(&store.project_config(Some(base))?)
            .map_err(MergeError::Settings)?;
        let strategy = match strategy {
            Some(s) => s,
            None => match settings.merge_strategy.as_deref() {
                None => Strategy::Squash,
                Some(s) => Strategy::parse(s).ok_or_else(|| {
                    MergeError::Refused(format!(
                        "orch.mergeStrategy {s:?} is not rebase, merge or squash"
                    ))
                })?,
            },
        };
        Ok(Self {
            scratch: std::sync::Arc::new(crate::run::workspace::KeptScratch::new(
                store.common_dir(),
                &crate::run::workspace::scratch_dir(store.common_dir()).join(run.id.as_str()),
            )),
            common_dir: store.common_dir().to_owned(),
            run: run.id.clone(),
            batch: batch.unwrap_or(settings.merge_batch).max(1),
            target: run.target.clone(),
            revision,
            settings,
            strategy,
            remote: None,
            fence: None,
            state,
            approver: approver_of(store, run),
            author: run
                .by
                .as_ref()
                .map(|p| (p.name.clone(), p.email.clone()))
                .unwrap_or_else(|| {
                    (
                        crate::store::ORCH_NAME.to_owned(),
                        crate::store::ORCH_EMAIL.to_owned(),
                    )
                }),
        })
    }

    fn target_ref(&self) -> String {
        format!("refs/heads/{}", self.target)
    }

    /// Attempts waiting to land, in the plan's topological order; only
    /// those whose dependencies have landed. With `orch.landingOrder =
    /// plan` (the default) only those that no task before them in that
    /// order can still come before: a task that has not ended (pending,
    /// running, retrying, or passed but not landable yet) holds back every
    /// task after it, so two runs of one plan land in the same order
    /// whatever order their agents finished in.
    pub fn waiting(&self, run: &RunState) -> Vec<(Entry, i64)> {
        let plan = &self.revision.plan;
        let status = |id: &TaskId| {
            let sub = plan.subtask(id.as_str());
            let retries = sub.map_or(run.settings.retries, |s| crate::run::retries_for(run, s));
            run.tasks
                .get(id)
                .map(|t| t.status(retries))
                .unwrap_or(TaskStatus::Pending)
        };
        let in_order = self.settings.landing_in_plan_order;
        // Tasks that can never run: a dependency failed or was cancelled.
        let mut blocked: BTreeSet<TaskId> = BTreeSet::new();
        let mut out = Vec::new();
        for id in topo_order(plan) {
            let sub = plan.subtask(id.as_str()).expect("tasks come from the plan");
            if sub.depends_on.iter().any(|d| {
                blocked.contains(d)
                    || matches!(status(d), TaskStatus::Failed | TaskStatus::Cancelled)
            }) {
                blocked.insert(id.clone());
            }
            let settled = blocked.contains(&id)
                || matches!(
                    status(&id),
                    TaskStatus::Done
                        | TaskStatus::Failed
                        | TaskStatus::Skipped
                        | TaskStatus::Cancelled
                );
            if settled {
                continue;
            }
            let queued = run
                .tasks
                .get(&id)
                .and_then(|t| t.current())
                .filter(|last| last.is_queued());
            let Some(last) = queued else {
                if in_order {
                    break; // it has not ended: nothing after it lands first
                }
                continue;
            };
            let deps_landed = sub
                .depends_on
                .iter()
                .all(|d| matches!(status(d), TaskStatus::Done | TaskStatus::Skipped));
            let (Some(result), base) = (&last.result, last.base) else {
                continue;
            };
            let result = result.commit;
            if !deps_landed && in_order {
                break;
            }
            if deps_landed {
                out.push((
                    Entry {
                        task: sub.clone(),
                        attempt: last.n,
                        base,
                        result,
                        agent: last.agent.clone(),
                    },
                    last.finished_ms.unwrap_or(0),
                ));
            }
        }
        out
    }

    /// Lands everything that can land now (`git orch merge`).
    pub async fn land_all(&self, cancel: &CancellationToken) -> Result<LandReport, MergeError> {
        let mut total = LandReport::default();
        loop {
            let r = self.land_next(cancel).await?;
            let nothing = r.landed.is_empty() && r.failed.is_empty();
            total.landed.extend(r.landed);
            total.failed.extend(r.failed);
            total.warnings.extend(r.warnings);
            total.gate_runs += r.gate_runs;
            if r.refused.is_some() {
                total.refused = r.refused;
                return Ok(total);
            }
            if nothing || cancel.is_cancelled() {
                return Ok(total);
            }
        }
    }

    /// One landing: up to `batch` waiting attempts.
    pub async fn land_next(&self, cancel: &CancellationToken) -> Result<LandReport, MergeError> {
        let mut report = LandReport::default();
        let dir = self.common_dir.clone();
        let lock_name = format!(
            "queue-{}.lock",
            blake3::hash(self.target.as_bytes()).to_hex()
        );
        let what = format!("landing run {} on {}", self.run, self.target);
        let _lock = blocking(&dir, move |store| {
            Ok(crate::store::lock::acquire(
                &store.orch_dir().join(lock_name),
                &what,
                std::time::Duration::from_secs(3600),
            )?)
        })
        .await?;
        // The integration gate's scratch worktree: the queue's, kept for
        // the next landing (or this landing's own, removed when it ends).
        let scratch = self.scratch.take()?;
        if let Some(why) = self.recover().await? {
            report.refused = Some(why);
            return Ok(report);
        }
        let this = self.clone();
        let entries = blocking(&dir, move |store| {
            this.state.read(store, |index| {
                let run = index
                    .run(&this.run)?
                    .ok_or_else(|| MergeError::NoRun(this.run.clone()))?;
                // An attempt that changes control paths waits for a
                // person's approval of its exact result.
                let waiting: Vec<(Entry, Option<Held>)> = this
                    .waiting(run)
                    .into_iter()
                    .map(|(e, _)| {
                        let control = run
                            .tasks
                            .get(&e.task.id)
                            .and_then(|t| t.attempts.iter().find(|a| a.n == e.attempt))
                            .filter(|a| !a.control_paths().is_empty())
                            .and_then(|a| {
                                let tree = a.result.as_ref()?.tree.to_string();
                                Some((tree, a.branch.clone(), a.control_paths()))
                            });
                        (e, control)
                    })
                    .collect();
                let mut ready = Vec::new();
                let mut held = Vec::new();
                for (e, control) in waiting {
                    match control {
                        Some((tree, branch, paths))
                            if index.branch_approval_for_tree(&tree)?.is_none() =>
                        {
                            held.push((e.label(), branch, paths))
                        }
                        // In plan order, nothing lands past one that waits
                        // for a person.
                        _ if this.settings.landing_in_plan_order && !held.is_empty() => {}
                        _ => ready.push(e),
                    }
                }
                ready.truncate(this.batch);
                Ok((ready, held))
            })
        })
        .await?;
        let (entries, held) = entries;
        report.held = held;
        if entries.is_empty() {
            return Ok(report);
        }
        // Passing integration verdicts are recorded with the landing they
        // allow (one append); whatever did not land is recorded here.
        let mut passed = Vec::new();
        let landed = self
            .land_entries(entries, &scratch.path, cancel, &mut report, &mut passed)
            .await;
        if !passed.is_empty() {
            blocking(&self.common_dir, move |store| {
                store.append(passed)?;
                Ok(())
            })
            .await?;
        }
        landed.map(|()| report)
    }

    /// Builds, gates and lands `entries` (one landing, rebuilt when the
    /// target moves under it). `passed`: the passing verdicts not recorded
    /// yet.
    async fn land_entries(
        &self,
        entries: Vec<Entry>,
        scratch: &Path,
        cancel: &CancellationToken,
        report: &mut LandReport,
        passed: &mut Vec<Event>,
    ) -> Result<(), MergeError> {
        let mut entries = entries;
        for round in 0..MAX_ROUNDS {
            self.follow_remote().await?;
            // Without what landed meanwhile: after a lost race (another
            // lander may have landed these very attempts), and with a
            // remote in every round, its records taken in after its
            // target. A landing pushes both at once, so every landing the
            // fetched target holds has its record here, and one another
            // lander made since `entries` were read is never taken for a
            // landing whose record a crash lost (and recorded again).
            if round > 0 || self.remote.is_some() {
                entries = self.still_waiting(entries).await?;
                if entries.is_empty() {
                    return Ok(());
                }
            }
            let (tip, stack, conflict) = self.build_stack(&entries).await?;
            if let Some((e, conflicts)) = conflict {
                self.record_conflict(&e, &conflicts).await?;
                report
                    .failed
                    .push((e.label(), "conflict with the target".into()));
                entries.retain(|x| x.label() != e.label());
            }
            if stack.is_empty() {
                return Ok(());
            }
            // Landing all of it would change files someone edits in a
            // checkout of the target: refuse before spending a gate run.
            // The scratch worktree is moved to the candidate meanwhile.
            let top = stack.last().expect("not empty").1;
            let (in_the_way, ready) =
                tokio::join!(self.in_the_way(tip, top), self.prepare(scratch, top));
            if let Some(why) = in_the_way? {
                report.refused = Some(why);
                return Ok(());
            }
            ready?;
            // Gate the top; on failure, bisect for the largest good prefix.
            let (pass, failing) = self
                .gate(
                    tip,
                    &stack,
                    stack.len(),
                    CandidateCheckout {
                        path: scratch,
                        at: Some(top),
                    },
                    cancel,
                    report,
                    passed,
                )
                .await?;
            let (good, culprit) = if pass {
                (stack.len(), None)
            } else {
                let mut search = bisect::Bisection::new(stack.len(), failing);
                while let Some(n) = search.next() {
                    let at = CandidateCheckout {
                        path: scratch,
                        at: None,
                    };
                    let (ok, verdicts) = self
                        .gate(tip, &stack, n, at, cancel, report, passed)
                        .await?;
                    search.record(n, ok, verdicts);
                }
                let found = search.found();
                (found.passing, Some((found.index, found.verdicts)))
            };
            if cancel.is_cancelled() {
                return Ok(());
            }
            if let Some((i, verdicts)) = culprit {
                let e = stack[i].0.clone();
                self.record_gate_failure(&e, verdicts).await?;
                report
                    .failed
                    .push((e.label(), "the integration gate failed".into()));
                entries.retain(|x| x.label() != e.label());
            }
            if good == 0 {
                return Ok(());
            }
            let landed = stack[..good].to_vec();
            let new = landed.last().expect("good > 0").1;
            // Again, just before moving: the person may have edited since.
            if let Some(why) = self.in_the_way(tip, new).await? {
                report.refused = Some(why);
                return Ok(());
            }
            match self.swap(tip, &landed, report, passed).await? {
                Applied::Done => {
                    report
                        .landed
                        .extend(landed.iter().map(|(e, _, _)| e.label()));
                    self.after_landing(&landed).await;
                    return Ok(());
                }
                // The target moved: rebuild on the new tip and gate again.
                Applied::Conflict => continue,
            }
        }
        Err(MergeError::TargetMoving {
            target: self.target.clone(),
            tries: MAX_ROUNDS as usize,
        })
    }

    /// Those of `entries` that still wait to land, by the log as it is now
    /// (with a remote, after taking in its records: other landers').
    async fn still_waiting(&self, entries: Vec<Entry>) -> Result<Vec<Entry>, MergeError> {
        let this = self.clone();
        blocking(&self.common_dir, move |store| {
            if let Some(remote) = &this.remote {
                store.catch_up(remote)?;
            }
            this.state.read(store, |index| {
                let Some(run) = index.run(&this.run)? else {
                    return Ok::<_, MergeError>(Vec::new());
                };
                Ok(entries
                    .into_iter()
                    .filter(|e| {
                        run.tasks
                            .get(&e.task.id)
                            .and_then(|t| t.attempts.iter().find(|a| a.n == e.attempt))
                            .is_some_and(|a| a.is_queued())
                    })
                    .collect())
            })
        })
        .await
    }

    /// With a remote: brings the local target to the remote's tip
    /// (fast-forward only; clean checkouts follow), so that candidates are
    /// built on exactly what the landing push must replace.
    async fn follow_remote(&self) -> Result<(), MergeError> {
        let Some(remote) = self.remote.clone() else {
            return Ok(());
        };
        let target = self.target.clone();
        let fence = self.fence.clone();
        blocking(&self.common_dir, move |store| {
            check_fence(store, &remote, fence.as_ref())?;
            follow_target(store, &remote, &target)
        })
        .await
    }

    /// Puts the scratch worktree at `commit`.
    async fn prepare(&self, scratch: &Path, commit: Oid) -> Result<(), MergeError> {
        let scratch = scratch.to_owned();
        let warm = self.settings.sandbox.clone();
        blocking(&self.common_dir, move |store| {
            crate::run::workspace::prepare_scratch(store, &scratch, commit)
                .map_err(MergeError::Scratch)?;
            warm_scratch(store, &warm, &scratch)
        })
        .await
    }

    /// Why moving the target from `old` to `new` would touch files a
    /// person changed in a checkout of it, as a refusal message.
    async fn in_the_way(&self, old: Oid, new: Oid) -> Result<Option<LandingProblem>, MergeError> {
        let target_ref = self.target_ref();
        blocking(&self.common_dir, move |store| {
            checkout::blocking_paths(store, &target_ref, old, new)
        })
        .await
    }

    /// Builds the stack of candidates on the current tip: (tip, stack,
    /// the first entry that conflicted).
    #[allow(clippy::type_complexity)]
    async fn build_stack(
        &self,
        entries: &[Entry],
    ) -> Result<
        (
            Oid,
            Vec<(Entry, Oid, Vec<Oid>)>,
            Option<(Entry, Vec<crate::store::merge::MergeConflict>)>,
        ),
        MergeError,
    > {
        let this = self.clone();
        let entries = entries.to_vec();
        blocking(&self.common_dir, move |store| {
            let tip =
                store
                    .ref_target(&this.target_ref())?
                    .ok_or_else(|| MergeError::NoTarget {
                        target: this.target.clone(),
                    })?;
            let committer = if this.settings.land.orch_committer {
                (crate::store::ORCH_NAME, crate::store::ORCH_EMAIL)
            } else {
                (this.author.0.as_str(), this.author.1.as_str())
            };
            let names = Names {
                run: this.run.as_str(),
                plan_id: this.revision.plan.id.as_str(),
                plan_hash: &this.revision.hash,
                revision: this.revision.revision,
                approver: &this.approver,
                author: (this.author.0.as_str(), this.author.1.as_str()),
                committer,
                land: &this.settings.land,
            };
            let mut stack = Vec::new();
            let mut onto = tip;
            for e in entries {
                match candidate::build(store, this.strategy, onto, &e, &names)? {
                    Built::Commits { tip, commits } => {
                        onto = tip;
                        stack.push((e, tip, commits));
                    }
                    Built::Conflict(c) => return Ok((tip, stack, Some((e, c)))),
                }
            }
            if !stack.is_empty() {
                // Built and pinned; not yet checked out, gated or landed.
                crate::failpoint::hit("land.built");
            }
            Ok((tip, stack, None))
        })
        .await
    }

    /// The integration gate's gates for the first `k` entries.
    fn integration_gates(&self, entries: &[&Entry]) -> Vec<GateDef> {
        if let Some(configured) = super::integration::configured(&self.settings) {
            return configured;
        }
        let mut out: Vec<GateDef> = Vec::new();
        for e in entries {
            for g in crate::gate::stack(&self.settings, &self.revision.plan, &e.task) {
                let name_taken = out.iter().any(|o| o.name == g.name && o.kind == g.kind);
                if g.mode == GateMode::Block && g.kind.command().is_some() && !name_taken {
                    // Two subtasks' verifications are both run.
                    let name = if out.iter().any(|o| o.name == g.name) {
                        format!("{}:{}", g.name, e.task.id)
                    } else {
                        g.name.clone()
                    };
                    out.push(GateDef { name, ..g });
                }
            }
        }
        out
    }

    /// Gates the candidate of the first `k` stack entries. Returns whether
    /// it passed and the failing verdicts. A passing candidate's verdicts
    /// go to `passed`, to be recorded with its landing; a failing one's are
    /// recorded at once. `tip`: the target's tip the stack is built on.
    #[allow(clippy::too_many_arguments)]
    async fn gate(
        &self,
        tip: Oid,
        stack: &[(Entry, Oid, Vec<Oid>)],
        k: usize,
        scratch: CandidateCheckout<'_>,
        cancel: &CancellationToken,
        report: &mut LandReport,
        passed: &mut Vec<Event>,
    ) -> Result<(bool, Vec<Verdict>), MergeError> {
        let candidate = stack[k - 1].1;
        let entries: Vec<&Entry> = stack[..k].iter().map(|(e, _, _)| e).collect();
        let defs = self.integration_gates(&entries);
        let labels: Vec<String> = entries.iter().map(|e| e.label()).collect();
        let (scratch, prepared) = (scratch.path.to_owned(), scratch.at);
        let (tree, cache) = {
            let s = scratch.clone();
            let state = self.state.clone();
            let warm = self.settings.sandbox.clone();
            blocking(&self.common_dir, move |store| {
                let tree = store.commit_info(candidate)?.tree;
                let cache = state.read(store, |index| index.verdicts_for(&tree.to_string()))?;
                if prepared != Some(candidate) {
                    crate::run::workspace::prepare_scratch(store, &s, candidate)
                        .map_err(MergeError::Scratch)?;
                    warm_scratch(store, &warm, &s)?;
                }
                Ok((tree, cache))
            })
            .await?
        };
        let gate_env = crate::run::gating::LandingEnv {
            run: Some(&self.run),
            plan: Some(&self.revision.plan.id),
            target: &self.target,
            base: tip,
            candidate,
            landing: None,
            task: match entries.as_slice() {
                [one] => Some((&one.task, one.agent.as_str())),
                _ => None,
            },
        }
        .gate_env();
        let env = gate_env.vars();
        let inputs = gate_env.fingerprint(&self.settings.sandbox);
        let log_dir = self
            .common_dir
            .join("orch")
            .join("logs")
            .join(self.run.as_str())
            .join("queue");
        let place = crate::gate::command::Place {
            worktree: &scratch,
            env: &env,
            log_dir: &log_dir,
        };
        let (verdicts, ran) = if defs.is_empty() {
            (vec![super::integration::clean_merge()], 0)
        } else {
            super::integration::run(
                &defs,
                &tree.to_string(),
                &cache,
                &place,
                &inputs,
                &self.settings,
                &self.common_dir,
                cancel,
            )
            .await
        };
        report.gate_runs += ran;
        let run = self.run.clone();
        let events: Vec<Event> = verdicts
            .iter()
            .map(|v| Event::IntegrationVerdict {
                run_id: run.clone(),
                candidate,
                tree,
                attempts: labels.clone(),
                verdict: v.clone(),
            })
            .collect();
        let failing: Vec<Verdict> = verdicts.iter().filter(|v| v.blocks()).cloned().collect();
        if failing.is_empty() {
            passed.extend(events);
        } else {
            blocking(&self.common_dir, move |store| {
                store.append(events)?;
                Ok(())
            })
            .await?;
        }
        Ok((failing.is_empty(), failing))
    }

    async fn record_conflict(
        &self,
        e: &Entry,
        conflicts: &[crate::store::merge::MergeConflict],
    ) -> Result<(), MergeError> {
        let paths: Vec<String> = conflicts.iter().map(|c| c.path.clone()).collect();
        let hunks: Vec<String> = conflicts
            .iter()
            .flat_map(|c| c.hunks.iter().map(move |h| format!("{}:\n{h}", c.path)))
            .take(20)
            .map(|h| crate::gate::masking::mask_text(&h))
            .collect();
        let event = Event::LandingFailed {
            run_id: self.run.clone(),
            task: e.task.id.clone(),
            attempt: e.attempt,
            failure: Failure {
                class: FailureClass::Integration,
                reason: format!("conflicts with {} in {}", self.target, paths.join(", ")),
            },
            conflicts: paths,
            hunks,
            verdicts: Vec::new(),
        };
        blocking(&self.common_dir, move |store| {
            store.append(vec![event])?;
            Ok(())
        })
        .await
    }

    async fn record_gate_failure(
        &self,
        e: &Entry,
        verdicts: Vec<Verdict>,
    ) -> Result<(), MergeError> {
        let reason = verdicts
            .first()
            .map(|v| {
                format!(
                    "integration gate {} {}: {}",
                    v.gate,
                    v.status.as_str(),
                    v.summary
                )
            })
            .unwrap_or_else(|| "the integration gate failed".into());
        let event = Event::LandingFailed {
            run_id: self.run.clone(),
            task: e.task.id.clone(),
            attempt: e.attempt,
            failure: Failure {
                class: FailureClass::Integration,
                reason,
            },
            conflicts: Vec::new(),
            hunks: Vec::new(),
            verdicts,
        };
        blocking(&self.common_dir, move |store| {
            store.append(vec![event])?;
            Ok(())
        })
        .await
    }

    /// Records the `landed` events and moves the target from `old` to the
    /// last landed tip (with a remote: publishes both in one atomic push).
    /// `passed`: the integration verdicts that allow it, recorded with it
    /// (and taken out of `passed` once they are).
    async fn swap(
        &self,
        old: Oid,
        landed: &[(Entry, Oid, Vec<Oid>)],
        report: &mut LandReport,
        passed: &mut Vec<Event>,
    ) -> Result<Applied, MergeError> {
        let this = self.clone();
        let landed = landed.to_vec();
        let verdicts = passed.clone();
        let (applied, problems, recorded) = blocking(&self.common_dir, move |store| {
            let new = landed.last().expect("something lands").1;
            let events: Vec<Event> = verdicts
                .into_iter()
                .chain(landed.iter().map(|(e, _, commits)| Event::Landed {
                    run_id: this.run.clone(),
                    task: e.task.id.clone(),
                    attempt: e.attempt,
                    target: this.target.clone(),
                    old,
                    new,
                    strategy: this.strategy.as_str().into(),
                    commits: commits.to_vec(),
                }))
                .collect();
            let target_ref = this.target_ref();
            if let Some(remote) = &this.remote {
                // Where a lander frozen past its lease would wake up.
                crate::failpoint::hit("land.publish");
                let moves = checkout::begin(store, &target_ref, old, new)?;
                let published = store.transact_published(
                    |store| {
                        if store.ref_target(&target_ref)? != Some(old) {
                            return Err(MergeError::MovedHere {
                                reference: target_ref.clone(),
                            });
                        }
                        // The candidate is kept here as a local landing
                        // keeps it; `sync` publishes the keep ref (merging
                        // other clones' keeps), never this push.
                        let keep = store.keep_update(
                            store.ref_target(crate::store::refs::KEEP_REF)?,
                            &[new],
                            &format!("landing of run {}", this.run),
                        )?;
                        Ok((
                            Operation {
                                events: events.clone(),
                                refs: vec![
                                    RefUpdate::set(
                                        &target_ref,
                                        new,
                                        Expected::At(old),
                                        &format!("orch: land run {}", this.run),
                                    ),
                                    keep,
                                ],
                            },
                            (),
                        ))
                    },
                    |store, updates| {
                        let pushes: Vec<(Oid, String)> = updates
                            .iter()
                            .filter(|u| u.name != crate::store::refs::KEEP_REF)
                            .filter_map(|u| u.new.map(|n| (n, u.name.clone())))
                            .collect();
                        let fence = this.fence.as_ref().map(|(n, c)| (n.as_str(), *c));
                        match store.push_fenced(remote, &pushes, fence)? {
                            crate::store::remote::Pushed::Accepted => Ok(true),
                            pushed if pushed.lost_race() => {
                                // Lost to a landing elsewhere, or lost the
                                // claim itself: only the first is retried.
                                check_fence(store, remote, this.fence.as_ref())?;
                                Ok(false)
                            }
                            crate::store::remote::Pushed::Rejected(why) => {
                                Err(MergeError::PushRefused {
                                    remote: remote.clone(),
                                    why,
                                })
                            }
                        }
                    },
                );
                return Ok(match published {
                    Ok(Some(_)) => {
                        crate::failpoint::hit("land.moved");
                        (Applied::Done, checkout::finish(store, &moves), true)
                    }
                    Ok(None) => {
                        checkout::cancel(store, &moves);
                        (Applied::Conflict, Vec::new(), false)
                    }
                    Err(e) => {
                        checkout::cancel(store, &moves);
                        return Err(e);
                    }
                });
            }
            // 1. The record first, with the candidate kept reachable: a
            // kill after this is completed (or voided) by the next landing,
            // see `recover`. A ref transaction is not atomic across refs
            // on disk, so the two never share one.
            let mut applied = Applied::Done;
            store.transact(|store| {
                // Read again under the log lock: a push may have moved it.
                if store.ref_target(&target_ref)? != Some(old) {
                    applied = Applied::Conflict;
                    return Ok::<_, MergeError>((Operation::default(), ()));
                }
                applied = Applied::Done;
                let keep = store.keep_update(
                    store.ref_target(crate::store::refs::KEEP_REF)?,
                    &[new],
                    &format!("landing of run {}", this.run),
                )?;
                Ok((
                    Operation {
                        events: events.clone(),
                        refs: vec![keep],
                    },
                    (),
                ))
            })?;
            if applied == Applied::Conflict {
                return Ok((Applied::Conflict, Vec::new(), false));
            }
            let moves = checkout::begin(store, &target_ref, old, new)?;
            crate::failpoint::hit("land.recorded");
            // 2. The target, from exactly the tip the candidate was built on.
            let moved = store.apply(&[RefUpdate::set(
                &target_ref,
                new,
                Expected::At(old),
                &format!("orch: land run {}", this.run),
            )])?;
            if moved == Applied::Conflict {
                checkout::cancel(store, &moves);
                let landings: Vec<crate::state::Landing> = landed
                    .iter()
                    .map(|(e, _, _)| crate::state::Landing {
                        task: e.task.id.clone(),
                        attempt: e.attempt,
                        target: this.target.clone(),
                        old,
                        new,
                        commits: Vec::new(),
                        voided: false,
                        order: Default::default(),
                    })
                    .collect();
                void(
                    store,
                    &this.run,
                    &landings,
                    "the target moved between recording the landing and moving it",
                )?;
                // The target did not move: neither do its checkouts (the
                // record, and the verdicts with it, are written).
                return Ok((moved, Vec::new(), true));
            }
            crate::failpoint::hit("land.moved");
            Ok((moved, checkout::finish(store, &moves), true))
        })
        .await?;
        if recorded {
            passed.clear();
        }
        report.warnings.extend(problems);
        Ok(applied)
    }

    /// Finishes this clone's last landing on the target if a process died
    /// between recording it and moving the target: rolls the target forward
    /// when it still sits where the landing started, voids the record when
    /// someone moved it since. Another clone's landings are never touched. Returns a refusal when a checkout of the target is
    /// dirty (the roll-forward would change the user's files).
    async fn recover(&self) -> Result<Option<LandingProblem>, MergeError> {
        let this = self.clone();
        let refusal = blocking(&self.common_dir, move |store| {
            // A checkout a dead lander did not move yet comes first: until
            // it holds the target's files, any change there looks like the
            // person's.
            if let Some(problem) = checkout::recover(store)?.into_iter().next() {
                return Ok(Some(problem));
            }
            // Only this clone's own: another clone's landing that is not
            // here yet (not pushed, not fetched) is that clone's to finish,
            // and voiding or completing it from here would undo its work.
            let Some(me) = store.writer_id()? else {
                return Ok(None); // this clone never recorded anything
            };
            let me = me.to_string();
            let found = this.state.read(store, |index| {
                let Some(run) = index.last_landing_run(&this.target, &me) else {
                    return Ok::<_, MergeError>(None);
                };
                let last = index
                    .run(&run)?
                    .map(|r| r.last_landing_on(&this.target, &me))
                    .unwrap_or_default();
                Ok(Some((run, last)))
            })?;
            let Some((run, last)) = found else {
                return Ok(None);
            };
            let Some(landing) = last.first() else {
                return Ok(None);
            };
            let (old, new) = (landing.old, landing.new);
            if !store.has_object(new) {
                // Landed by a clone whose commits are not here: nothing this
                // clone could complete.
                return Ok(None);
            }
            let target_ref = this.target_ref();
            let tip = store.ref_target(&target_ref)?;
            if let Some(t) = tip
                && (t == new || store.is_ancestor(new, t)?)
            {
                return Ok(None); // it happened
            }
            if tip == Some(old) {
                if let Some(why) = checkout::blocking_paths(store, &target_ref, old, new)? {
                    return Ok(Some(LandingProblem::InterruptedLanding {
                        target: this.target.clone(),
                        new: new.to_string(),
                        cause: Box::new(why),
                    }));
                }
                let moves = checkout::begin(store, &target_ref, old, new)?;
                let done = store.apply(&[RefUpdate::set(
                    &target_ref,
                    new,
                    Expected::At(old),
                    &format!("orch: complete interrupted landing of run {run}"),
                )])?;
                if done == Applied::Done {
                    let problems = checkout::finish(store, &moves);
                    return Ok(problems.first().cloned());
                }
                checkout::cancel(store, &moves);
            }
            void(
                store,
                &run,
                &last,
                "the landing was interrupted and the target has moved since; it is rebuilt on the new tip",
            )?;
            Ok(None)
        })
        .await?;
        Ok(refusal)
    }

    /// Writes the notes on the landed commits (derived; best effort).
    async fn after_landing(&self, landed: &[(Entry, Oid, Vec<Oid>)]) {
        let this = self.clone();
        let landed = landed.to_vec();
        let _ = blocking(&self.common_dir, move |store| {
            for (e, tip, _) in &landed {
                let note = crate::run::notes::TaskLanding {
                    run: this.run.as_str(),
                    task: e.task.id.as_str(),
                    attempt: e.attempt,
                    target: &this.target,
                    plan_id: this.revision.plan.id.as_str(),
                    revision: this.revision.revision,
                    plan_hash: &this.revision.hash,
                    strategy: this.strategy.as_str(),
                };
                let _ = crate::run::notes::add_record(store, *tip, &note.record());
            }
            Ok(())
        })
        .await;
    }
}

/// Fails with [`MergeError::LeaseLost`] once the claim `fence` names is
/// no longer this clone's on `remote` (read there now, not from a fetch).
fn check_fence(
    store: &Store,
    remote: &str,
    fence: Option<&(String, Oid)>,
) -> Result<(), MergeError> {
    let Some((name, held)) = fence else {
        return Ok(());
    };
    if store.remote_value(remote, name)? == Some(*held) {
        return Ok(());
    }
    Err(MergeError::LeaseLost {
        claim: name.clone(),
    })
}

/// Who approved the plan revision `run` executes, as its approval says.
fn approver_of(store: &Store, run: &RunState) -> String {
    store
        .parse_oid(&run.approval)
        .ok()
        .and_then(|c| {
            store
                .file_at(c, crate::approval::APPROVAL_FILE)
                .ok()
                .flatten()
        })
        .and_then(|bytes| serde_json::from_slice::<crate::approval::Approval>(&bytes).ok())
        .map(|a| a.approver)
        .unwrap_or_else(|| "unknown".into())
}

/// Records landings of `run` as void: the target never moved there, and
/// their attempts wait in the queue again.
fn void(
    store: &Store,
    run: &RunId,
    landed: &[crate::state::Landing],
    reason: &str,
) -> Result<(), MergeError> {
    let events: Vec<Event> = landed
        .iter()
        .map(|l| Event::LandingVoided {
            run_id: run.clone(),
            task: l.task.clone(),
            attempt: l.attempt,
            new: l.new,
            reason: reason.to_owned(),
        })
        .collect();
    if !events.is_empty() {
        store.append(events)?;
    }
    Ok(())
}

/// Moves the target forward from `old` to `new` (compare-and-swap), and its
/// checkouts with it; refuses when that would touch files someone changed
/// in a checkout.
fn advance_target(
    store: &Store,
    target_ref: &str,
    old: Oid,
    new: Oid,
    why: &str,
) -> Result<(), MergeError> {
    if let Some(refusal) = checkout::blocking_paths(store, target_ref, old, new)? {
        return Err(MergeError::Checkout {
            problem: Box::new(refusal),
            following: true,
        });
    }
    let moves = checkout::begin(store, target_ref, old, new)?;
    if store.apply(&[RefUpdate::set(target_ref, new, Expected::At(old), why)])? == Applied::Done {
        if let Some(problem) = checkout::finish(store, &moves).into_iter().next() {
            return Err(MergeError::Checkout {
                problem: Box::new(problem),
                following: false,
            });
        }
    } else {
        checkout::cancel(store, &moves);
    }
    Ok(())
}

/// Brings the local target branch to `remote`'s (fast-forward only), so
/// that new attempts start from what has landed everywhere.
pub fn follow_target(store: &Store, remote: &str, target: &str) -> Result<(), MergeError> {
    let target_ref = format!("refs/heads/{target}");
    let Some(theirs) = store.fetch_branch(remote, target)? else {
        return Ok(());
    };
    match store.ref_target(&target_ref)? {
        Some(o) if o == theirs => Ok(()),
        Some(o) if store.is_ancestor(o, theirs)? => advance_target(
            store,
            &target_ref,
            o,
            theirs,
            &format!("orch: follow {remote}"),
        ),
        Some(_) => Err(MergeError::Unpublished {
            target: target.to_owned(),
            remote: remote.to_owned(),
        }),
        None => {
            store.apply(&[RefUpdate::set(
                &target_ref,
                theirs,
                Expected::Absent,
                "orch: follow",
            )])?;
            Ok(())
        }
    }
}

/// Warm worktrees (issue 28): the queue's scratch checkout gets the local
/// files and warm caches; its overlay layers are its own and stay from
/// one landing to the next, as long as the checkout does.
fn warm_scratch(
    store: &Store,
    warm: &crate::config::SandboxSettings,
    scratch: &Path,
) -> Result<(), MergeError> {
    crate::sandbox::warm_checkout(warm, store.common_dir(), scratch)
        .map(|_| ())
        .map_err(|e| {
            MergeError::Scratch(crate::store::StoreError::io(
                "warming the checkout",
                std::io::Error::other(e),
            ))
        })
}
