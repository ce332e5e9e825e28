//! Running a whole gate stack on one result, with the verdict cache.
//!
//! Order: the built-in gates from the trees (all of them, they are cheap);
//! then, only if none of them blocks, the command gates one by one, each
//! looked up first in the verdict cache (same tree, gate name, command and
//! inputs, see [`super::inputs`]: the command does not run again, the
//! verdict is `cached`); then the
//! reviewer. The first blocking failure stops the expensive part; the gates
//! not run are reported `skipped` with the reason.

use std::path::PathBuf;
use tokio_util::sync::CancellationToken;

use super::builtin::{self, Changes};
use super::command::{self, Place};
use super::review::{self, ReviewInput};
use super::stack::{GateDef, GateKind};
use crate::agent::AgentSpec;
use crate::config::Settings;
use crate::event::{Failure, FailureClass, GateMode, GateStatus, Verdict};
use crate::plan::Subtask;
use crate::state::{VerdictCache, VerdictKey};
use crate::store::{Oid, Store, StoreError};

/// What is being gated.
pub struct Subject {
    /// The repository (each blocking step opens its own handle).
    pub common_dir: PathBuf,
    pub task: Subtask,
    pub attempt: u32,
    pub base_tree: Oid,
    pub result_tree: Oid,
    /// The attempt's commits from its base to its result, oldest first.
    /// Content gates judge each.
    pub steps: Vec<crate::store::CommitStep>,
    /// Whether the merge strategy keeps those commits on the target.
    pub every_commit: bool,
    /// The commit judged: command gates and the reviewer run in a fresh
    /// checkout of it, never in the agent's worktree with whatever it left
    /// there.
    pub result: Oid,
    /// Where that checkout is made (a scratch checkout under
    /// `.git/orch/scratch/`), when the first gate that needs files runs;
    /// it goes when the stack ends.
    pub scratch: PathBuf,
    /// `ORCH_*` environment for command gates and the reviewer, marked
    /// by what can change a verdict.
    pub env: super::GateEnv,
    pub log_dir: PathBuf,
    /// The agent that wrote the attempt (for reviewer independence).
    pub writer_agent: String,
    pub settings: Settings,
    /// Told the name of each command or review gate as it starts (for live
    /// progress); not for cached or skipped ones.
    pub on_gate: Option<GateStarted>,
}

/// Told the name of a gate as it starts.
pub type GateStarted = std::sync::Arc<dyn Fn(&str) + Send + Sync>;

/// All verdicts, and the failure they amount to, if any.
#[derive(Debug, Clone)]
pub struct StackOutcome {
    pub verdicts: Vec<Verdict>,
    pub failure: Option<Failure>,
}

fn skipped(def: &GateDef, why: &str) -> Verdict {
    Verdict {
        gate: def.name.clone(),
        mode: def.mode,
        status: GateStatus::Skipped,
        cached_pass: None,
        inputs: None,
        command: def.kind.command().map(str::to_owned),
        duration_ms: 0,
        summary: why.to_owned(),
        tail: String::new(),
        details: serde_json::Value::Null,
    }
}

/// The failure class a blocking verdict stands for.
pub fn failure_of(v: &Verdict) -> Failure {
    let class = match v.gate.as_str() {
        "scope" => FailureClass::Scope,
        "secrets" => FailureClass::Secret,
        // The diff gate also refuses files over the size limit.
        "diff" if v.details.get("too_large").is_some() => FailureClass::Gate,
        "diff" => FailureClass::Empty,
        _ => FailureClass::Gate,
    };
    Failure {
        class,
        reason: format!("gate {} {}: {}", v.gate, v.status.as_str(), v.summary),
    }
}

/// A masked unified diff of the change, for the reviewer (bounded).
fn diff_text(store: &Store, changes: &Changes) -> Result<String, StoreError> {
    diff_of(store, changes, 200 * 1024)
}

/// The unified diff between two trees, masked, cut at `max` bytes (what a
/// retry is shown of the attempt before it).
pub fn diff_between(
    store: &Store,
    old_tree: Oid,
    new_tree: Oid,
    max: usize,
) -> Result<String, StoreError> {
    diff_of(store, &Changes::read(store, old_tree, new_tree, &[])?, max)
}

fn diff_of(store: &Store, changes: &Changes, max: usize) -> Result<String, StoreError> {
    let max = max.max(1);
    let mut out = String::new();
    for c in &changes.paths {
        let read = |id: Option<Oid>| -> Result<String, StoreError> {
            Ok(match id {
                Some(i) => match store.object_size(i)? {
                    n if n > super::builtin::MAX_SCAN_BYTES as u64 => {
                        format!("({n} bytes, not shown)\n")
                    }
                    _ => String::from_utf8_lossy(&store.read_blob(i)?).into_owned(),
                },
                None => String::new(),
            })
        };
        let (a, b) = (read(c.old)?, read(c.new)?);
        let d = similar::TextDiff::from_lines(&a, &b);
        out.push_str(
            &d.unified_diff()
                .header(&format!("a/{}", c.path), &format!("b/{}", c.path))
                .to_string(),
        );
        if out.len() > max {
            let mut cut = max;
            while !out.is_char_boundary(cut) {
                cut -= 1;
            }
            out.truncate(cut);
            out.push_str("\n… (diff truncated)\n");
            break;
        }
    }
    Ok(super::masking::mask_text(&out))
}

/// Runs `defs` on `subject`. A command gate whose verdict `cache` holds
/// for the subject's tree, the gate's name and command and the subject's
/// inputs is not run again: that verdict is reused as `cached`.
pub async fn evaluate(
    subject: &Subject,
    defs: &[GateDef],
    cache: &VerdictCache,
    cancel: &CancellationToken,
) -> Result<StackOutcome, StoreError> {
    let env = subject.env.vars();
    let inputs = subject.env.fingerprint(&subject.settings.sandbox);
    let tree = subject.result_tree.to_string();
    let cached = |gate: &str, command: &str| {
        cache.get(&VerdictKey {
            tree: tree.clone(),
            gate: gate.to_owned(),
            command: command.to_owned(),
            inputs: inputs.clone(),
        })
    };
    let want_diff = defs
        .iter()
        .any(|d| matches!(d.kind, GateKind::Review { .. }) && d.mode != GateMode::Skip);
    let (builtins, diff) = {
        let dir = subject.common_dir.clone();
        let (base, result) = (subject.base_tree, subject.result_tree);
        let (steps, every_commit) = (subject.steps.clone(), subject.every_commit);
        let max_file = subject.settings.max_file_size;
        let owned = subject.task.owned_globs.clone();
        let include = subject.settings.sandbox.worktree.include.clone();
        let builtin_defs: Vec<GateDef> = defs
            .iter()
            .filter(|d| d.kind.is_builtin())
            .cloned()
            .collect();
        tokio::task::spawn_blocking(move || -> Result<(Vec<Verdict>, String), StoreError> {
            Store::with_reused(&dir, |store| {
                let mut changes = Changes::read(store, base, result, &steps)?;
                changes.every_commit = every_commit;
                changes.max_file = max_file;
                let verdicts = builtin_defs
                    .iter()
                    .map(|d| {
                        if d.mode == GateMode::Skip {
                            skipped(d, "mode skip")
                        } else {
                            // (warm worktrees: local files never land)
                            let v = builtin::evaluate(d, &changes, &owned);
                            builtin::refuse_local_files(v, d, &changes, &include)
                        }
                    })
                    .collect();
                let diff = if want_diff {
                    diff_text(store, &changes)?
                } else {
                    String::new()
                };
                Ok((verdicts, diff))
            })?
        })
        .await
        .expect("the gate thread does not panic")?
    };
    let mut verdicts = builtins;
    let mut blocked: Option<String> = verdicts.iter().find(|v| v.blocks()).map(|v| v.gate.clone());
    let mut checkout = Checkout::Unmade;
    // Command gates and the reviewer run in the attempt's sandbox.
    let sandbox = crate::sandbox::resolve(&subject.settings.sandbox).map_err(|e| e.to_string());
    let unconfinable = |def: &GateDef, why: &str| Verdict {
        status: GateStatus::Error,
        summary: why.to_owned(),
        ..skipped(def, "")
    };
    for def in defs.iter().filter(|d| !d.kind.is_builtin()) {
        if def.mode == GateMode::Skip {
            verdicts.push(skipped(def, "mode skip"));
            continue;
        }
        if let Some(g) = &blocked {
            verdicts.push(skipped(def, &format!("not run: gate {g} failed")));
            continue;
        }
        if cancel.is_cancelled() {
            verdicts.push(skipped(def, "not run: the run was interrupted"));
            continue;
        }
        let started = |name: &str| {
            if let Some(tell) = &subject.on_gate {
                tell(name);
            }
        };
        let verdict = match &def.kind {
            GateKind::Command { run } | GateKind::Verification { run } => {
                match cached(&def.name, run) {
                    Some(prev) => Verdict::reused(prev, &prev.gate, def.mode),
                    None => match (&sandbox, checkout.ready(subject).await) {
                        (Err(why), _) => unconfinable(def, why),
                        (_, Err(why)) => unconfinable(def, &why.to_string()),
                        (Ok(sb), Ok(dir)) => {
                            started(&def.name);
                            let confinement = command::Confinement {
                                sandbox: sb,
                                common_dir: &subject.common_dir,
                            };
                            let place = Place {
                                worktree: &dir,
                                env: &env,
                                log_dir: &subject.log_dir,
                            };
                            Verdict {
                                inputs: Some(inputs.clone()),
                                ..command::run_confined(def, run, &place, &confinement, cancel)
                                    .await
                            }
                        }
                    },
                }
            }
            GateKind::Review { agent } => {
                match AgentSpec::resolve(agent, &subject.settings.agents) {
                    Err(e) => Verdict {
                        status: GateStatus::Error,
                        summary: e.to_string(),
                        ..skipped(def, "")
                    },
                    Ok(_) if let Err(why) = &sandbox => unconfinable(def, why),
                    Ok(spec) => match checkout.ready(subject).await {
                        Err(why) => unconfinable(def, &why.to_string()),
                        Ok(dir) => {
                            let so_far: Vec<String> = verdicts
                                .iter()
                                .map(|v| {
                                    format!("- {} {}: {}", v.gate, v.status.as_str(), v.summary)
                                })
                                .collect();
                            let input = ReviewInput {
                                spec: &spec,
                                writer_agent: &subject.writer_agent,
                                independent: subject.settings.reviewer_independent,
                                task: &subject.task,
                                diff: &diff,
                                gates_so_far: &so_far,
                                worktree: &dir,
                                env: &env,
                                log_dir: &subject.log_dir,
                                attempt: subject.attempt,
                                sandbox: sandbox.as_ref().expect("checked above"),
                                common_dir: &subject.common_dir,
                            };
                            started(&def.name);
                            review::run(def, &input, cancel).await
                        }
                    },
                }
            }
            _ => unreachable!("built-in gates were evaluated above"),
        };
        if verdict.blocks() {
            blocked = Some(verdict.gate.clone());
        }
        verdicts.push(verdict);
    }
    checkout.remove().await;
    let failure = verdicts.iter().find(|v| v.blocks()).map(failure_of);
    Ok(StackOutcome { verdicts, failure })
}

/// The fresh checkout of the result that command gates and the reviewer
/// share, made when the first of them runs. Each later one gets it put
/// back at exactly the result first: a gate command runs code of the
/// agent's, and what one leaves (a rewritten file, a planted hook, a
/// doctored git folder) must not decide the next one's verdict.
enum Checkout {
    Unmade,
    /// Made; `used` once a gate has been handed it.
    Made {
        dir: PathBuf,
        guard: crate::store::scratch::ScratchGuard,
        used: bool,
    },
    Failed(CheckoutFailed),
}

/// The result could not be checked out for a command gate.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the result could not be checked out{}: {why}", if *again { " again" } else { "" })]
struct CheckoutFailed {
    /// Putting it back after an earlier gate failed.
    again: bool,
    why: String,
}

impl Checkout {
    /// Its folder, at exactly the result: made now if it was not yet,
    /// put back if an earlier gate ran in it.
    async fn ready(&mut self, subject: &Subject) -> Result<PathBuf, CheckoutFailed> {
        let (dir, scratch, result) = (
            subject.common_dir.clone(),
            subject.scratch.clone(),
            subject.result,
        );
        // Warm worktrees (issue 28): local files and cache copies.
        let warm = subject.settings.sandbox.clone();
        let warm2 = warm.clone();
        match self {
            Checkout::Unmade => {
                let made = tokio::task::spawn_blocking(move || {
                    Store::with_reused(&dir, |store| {
                        let guard = crate::store::scratch::ScratchGuard::take(&dir, &scratch)?;
                        crate::store::scratch::prepare_scratch(store, &scratch, result)?;
                        crate::sandbox::warm_checkout(&warm, &dir, &scratch).map_err(|e| {
                            StoreError::io("warming the checkout", std::io::Error::other(e))
                        })?;
                        Ok::<_, StoreError>(guard)
                    })?
                })
                .await
                .expect("the checkout thread does not panic");
                *self = match made {
                    Ok(guard) => Checkout::Made {
                        dir: subject.scratch.clone(),
                        guard,
                        used: false,
                    },
                    Err(e) => Checkout::Failed(CheckoutFailed {
                        again: false,
                        why: e.to_string(),
                    }),
                };
            }
            Checkout::Made { used: true, .. } => {
                let reset = tokio::task::spawn_blocking(move || {
                    Store::with_reused(&dir, |store| {
                        crate::store::scratch::prepare_scratch(store, &scratch, result)?;
                        crate::sandbox::warm_checkout(&warm2, &dir, &scratch).map_err(|e| {
                            StoreError::io("warming the checkout", std::io::Error::other(e))
                        })?;
                        Ok::<_, StoreError>(())
                    })?
                })
                .await
                .expect("the checkout thread does not panic");
                if let Err(e) = reset {
                    // The guard's drop removes what is there.
                    let old = std::mem::replace(
                        self,
                        Checkout::Failed(CheckoutFailed {
                            again: true,
                            why: e.to_string(),
                        }),
                    );
                    old.remove().await;
                }
            }
            Checkout::Made { used: false, .. } | Checkout::Failed(_) => {}
        }
        match self {
            Checkout::Made { dir, used, .. } => {
                *used = true;
                Ok(dir.clone())
            }
            Checkout::Failed(why) => Err(why.clone()),
            Checkout::Unmade => unreachable!("made above"),
        }
    }

    /// Removes it (on a blocking thread: a large checkout takes a while).
    async fn remove(self) {
        if let Checkout::Made { guard, .. } = self {
            let _ = tokio::task::spawn_blocking(move || drop(guard)).await;
        }
    }
}
