//! A person's branch through the merge queue (`git orch land <branch>`).
//!
//! A hotfix made by hand lands the way an attempt does: under the target's
//! queue lock (so it never lands beside a run's landing), on a candidate
//! built in memory on the current tip with the queue's strategies
//! ([`candidate`]), gated by the integration gate in a scratch worktree,
//! refused when it would change files someone edits in a checkout of the
//! target, recorded (`branch_landed`, with the gate's verdicts) and then
//! moved by compare-and-swap from exactly the tip it was built on. What
//! makes it admissible is a person's approval bound to the branch tip's
//! exact tree (`git orch approve --branch`, a `branch_approved` record):
//! a branch changed after approval has another tree and is refused.
//! `verify` and the server's hook accept its commits by the record.
//!
//! A landing killed between its record and the target's move leaves a
//! record whose commits never reached the target (they are approved and
//! gated, so `verify` would still vouch for them); landing the branch
//! again builds a new candidate.

use std::path::{Path, PathBuf};
use tokio_util::sync::CancellationToken;

use super::MergeError;
use super::candidate::{self, Built, Entry, Names, Strategy};
use super::checkout;
use crate::config::Settings;
use crate::event::{Event, GateMode, Verdict};
use crate::gate::{GateDef, GateKind};
use crate::run::progress::LandingProblem;
use crate::state::{BranchApproval, BranchLanding, SharedIndex};
use crate::store::log::Operation;
use crate::store::refs::{Applied, Expected, RefUpdate};
use crate::store::{Oid, Store};

/// How often a landing is rebuilt because the target moved under it.
const MAX_ROUNDS: u32 = 10;

/// What to land where.
#[derive(Debug, Clone)]
pub struct Request {
    /// The branch, without `refs/heads/`.
    pub branch: String,
    /// The target branch, without `refs/heads/`.
    pub target: String,
    /// `None`: `orch.mergeStrategy` at the target's tip, else rebase.
    pub strategy: Option<Strategy>,
}

/// How a hand landing ended.
#[derive(Debug)]
pub enum Outcome {
    /// The target moved; the record as written, the integration gate
    /// commands that ran, and checkouts that could not follow.
    Landed {
        landing: Box<BranchLanding>,
        approval: Box<BranchApproval>,
        gate_runs: usize,
        warnings: Vec<LandingProblem>,
    },
    /// Nothing moved, for a reason a person must act on (exit 3): no
    /// approval for this tree, a conflict, a failing integration gate, a
    /// checkout in the way.
    Refused(Refusal),
}

/// Why a hand landing did not go ahead: each a situation a person acts
/// on. What to do about each is the CLI's hint.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error(
        "branch {branch} changed after it was approved: the approval by {approver} is for tree {} (commit {}), the branch is now at {} (tree {tree})",
        short(approved_tree),
        short(approval),
        short(tip)
    )]
    ChangedSinceApproval {
        branch: String,
        approver: String,
        approved_tree: String,
        approval: String,
        tip: String,
        tree: String,
    },
    #[error("branch {branch} is not approved for landing (tree {tree})")]
    NotApproved { branch: String, tree: String },
    #[error("the approval of branch {branch} is unusable: {why}")]
    ApprovalUnusable {
        branch: String,
        #[source]
        why: crate::approval::NotOurDecision,
    },
    #[error(
        "orch.requireSignedApprovals is set and the approval of branch {branch} has no valid signature"
    )]
    Unsigned { branch: String },
    #[error(
        "{target} already contains branch {branch} at {}: nothing to land",
        short(tip)
    )]
    AlreadyContained {
        target: String,
        branch: String,
        tip: String,
    },
    #[error("branch {branch} conflicts with {target} in {}", paths.join(", "))]
    Conflict {
        branch: String,
        target: String,
        paths: Vec<String>,
    },
    #[error("{target} already has every change of branch {branch}: nothing to land")]
    NothingToLand { target: String, branch: String },
    #[error("interrupted while the integration gate ran; nothing landed")]
    Interrupted,
    #[error(
        "the integration gate failed on branch {branch} on top of {target}: {gate} {status}: {summary}"
    )]
    GateFailed {
        branch: String,
        target: String,
        gate: String,
        status: &'static str,
        summary: String,
        /// The landing's id: its gate output is under `.git/orch/logs/<landing>/`.
        landing: String,
    },
    #[error(transparent)]
    Checkout(#[from] LandingProblem),
}

/// Why a branch may land, or why not (a refusal message).
pub fn approval_for(
    store: &Store,
    state: &SharedIndex,
    branch: &str,
    tip: Oid,
    tree: Oid,
) -> Result<Result<BranchApproval, Refusal>, MergeError> {
    let tree_hex = tree.to_string();
    let (for_tree, of_branch) = state.read(store, |index| {
        Ok::<_, MergeError>((
            index.branch_approval_for_tree(&tree_hex)?,
            index.branch_approval_of(branch)?,
        ))
    })?;
    let Some(approval) = for_tree else {
        return Ok(Err(match of_branch {
            Some(a) => Refusal::ChangedSinceApproval {
                branch: branch.to_owned(),
                approver: a.approver,
                approved_tree: a.tree.to_string(),
                approval: a.commit.to_string(),
                tip: tip.to_string(),
                tree: tree_hex,
            },
            None => Refusal::NotApproved {
                branch: branch.to_owned(),
                tree: tree_hex,
            },
        }));
    };
    let approval_commit = approval.approval;
    if let Err(why) = crate::approval::read_branch_approval(store, approval_commit, &tree_hex) {
        return Ok(Err(Refusal::ApprovalUnusable {
            branch: branch.to_owned(),
            why,
        }));
    }
    let require_signed = store
        .config_get("orch.requireSignedApprovals")?
        .is_some_and(|v| v == "true");
    if require_signed
        && !(store.commit_info(approval_commit)?.signed
            && store.signature_valid(approval_commit)?)
    {
        return Ok(Err(Refusal::Unsigned {
            branch: branch.to_owned(),
        }));
    }
    Ok(Ok(approval))
}

fn short(hex: &str) -> &str {
    &hex[..hex.len().min(12)]
}

/// The integration gate of a hand landing: `[integration] run`, else every
/// blocking command gate of the project's config.
fn gates(settings: &Settings) -> Vec<GateDef> {
    if let Some(configured) = super::integration::configured(settings) {
        return configured;
    }
    settings
        .gates
        .values()
        .filter(|g| g.mode == crate::plan::format::GateMode::Block)
        .filter_map(|g| {
            g.run.as_ref().map(|run| GateDef {
                name: g.name.clone(),
                kind: GateKind::Command { run: run.clone() },
                mode: GateMode::Block,
                timeout: g.timeout,
            })
        })
        .collect()
}

/// Lands `req.branch` on `req.target` through the queue; see the module
/// docs. `cancel` stops a running gate (the landing is then refused).
pub async fn land(
    common_dir: &Path,
    state: SharedIndex,
    req: &Request,
    cancel: &CancellationToken,
) -> Result<Outcome, MergeError> {
    let store = Store::open(common_dir)?;
    let branch_ref = format!("refs/heads/{}", req.branch);
    let target_ref = format!("refs/heads/{}", req.target);
    let tip = store
        .ref_target(&branch_ref)?
        .ok_or_else(|| MergeError::NoBranch(req.branch.clone()))?;
    let tree = store.commit_info(tip)?.tree;
    let approval = match approval_for(&store, &state, &req.branch, tip, tree)? {
        Ok(a) => a,
        Err(why) => return Ok(Outcome::Refused(why)),
    };
    let _lock = crate::store::lock::acquire(
        &store.orch_dir().join(format!(
            "queue-{}.lock",
            blake3::hash(req.target.as_bytes()).to_hex()
        )),
        &format!("landing branch {} on {}", req.branch, req.target),
        std::time::Duration::from_secs(3600),
    )?;
    // A checkout a dead lander did not move yet comes first.
    if let Some(problem) = checkout::recover(&store)?.into_iter().next() {
        return Ok(Outcome::Refused(problem.into()));
    }
    let landing = format!(
        "land-{}",
        crate::ids::random_bytes::<6>()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    );
    let subtask = crate::plan::Subtask {
        id: crate::ids::TaskId::new("hand-landing").expect("a valid id"),
        title: format!("Land branch {}", req.branch),
        owned_globs: Vec::new(),
        deliverable: format!(
            "{} at {}, approved by {}",
            req.branch,
            short(&tip.to_string()),
            approval.approver
        ),
        verification: String::new(),
        depends_on: Vec::new(),
        serial_only: false,
        branch: None,
        candidates: Vec::new(),
        agent: None,
        retries: None,
        gates: Default::default(),
    };
    let mut gate_runs = 0;
    for _round in 0..MAX_ROUNDS {
        let old = store
            .ref_target(&target_ref)?
            .ok_or_else(|| MergeError::NoTarget {
                target: req.target.clone(),
            })?;
        if old == tip || store.is_ancestor(tip, old)? {
            return Ok(Outcome::Refused(Refusal::AlreadyContained {
                target: req.target.clone(),
                branch: req.branch.clone(),
                tip: tip.to_string(),
            }));
        }
        let settings = Settings::from_values(&store.project_config(Some(old))?)
            .map_err(MergeError::Settings)?;
        let strategy = match req.strategy {
            Some(s) => s,
            None => match settings.merge_strategy.as_deref() {
                None => Strategy::Rebase,
                Some(s) => Strategy::parse(s).ok_or_else(|| {
                    MergeError::Refused(format!(
                        "orch.mergeStrategy {s:?} is not rebase, merge or squash"
                    ))
                })?,
            },
        };
        let base_hex = store
            .git()
            .run(["merge-base", &old.to_string(), &tip.to_string()])
            .map_err(|_| {
                MergeError::Refused(format!(
                    "branch {} shares no history with {}",
                    req.branch, req.target
                ))
            })?;
        let base = store.parse_oid(base_hex.trim())?;
        let entry = Entry {
            task: subtask.clone(),
            attempt: 1,
            base,
            result: tip,
            agent: "person".into(),
        };
        // A person's branch keeps its own commits by default (rebase); a
        // squash or merge commit is by whoever lands it.
        let (name, email) = store.user_identity()?.unwrap_or_else(|| {
            (
                crate::store::ORCH_NAME.to_owned(),
                crate::store::ORCH_EMAIL.to_owned(),
            )
        });
        let approval_hex = approval.approval.to_string();
        let names = Names {
            run: &landing,
            plan_id: "-",
            plan_hash: &approval_hex,
            revision: 0,
            approver: &approval.approver,
            author: (&name, &email),
            committer: (&name, &email),
            land: &settings.land,
        };
        let (new, commits) = match candidate::build(&store, strategy, old, &entry, &names)? {
            Built::Commits { tip, commits } => (tip, commits),
            Built::Conflict(c) => {
                return Ok(Outcome::Refused(Refusal::Conflict {
                    branch: req.branch.clone(),
                    target: req.target.clone(),
                    paths: c.iter().map(|c| c.path.clone()).collect(),
                }));
            }
        };
        if store.commit_info(new)?.tree == store.commit_info(old)?.tree {
            return Ok(Outcome::Refused(Refusal::NothingToLand {
                target: req.target.clone(),
                branch: req.branch.clone(),
            }));
        }
        if let Some(why) = checkout::blocking_paths(&store, &target_ref, old, new)? {
            return Ok(Outcome::Refused(why.into()));
        }
        let (verdicts, ran) = gate(
            &store,
            &state,
            &settings,
            &landing,
            (old, new),
            &req.target,
            cancel,
        )
        .await?;
        gate_runs += ran;
        if cancel.is_cancelled() {
            return Ok(Outcome::Refused(Refusal::Interrupted));
        }
        if let Some(v) = verdicts.iter().find(|v| v.blocks()) {
            return Ok(Outcome::Refused(Refusal::GateFailed {
                branch: req.branch.clone(),
                target: req.target.clone(),
                gate: v.gate.clone(),
                status: v.status.as_str(),
                summary: v.summary.clone(),
                landing: landing.clone(),
            }));
        }
        // Again, just before moving: the person may have edited since.
        if let Some(why) = checkout::blocking_paths(&store, &target_ref, old, new)? {
            return Ok(Outcome::Refused(why.into()));
        }
        let record = BranchLanding {
            landing: landing.clone(),
            branch: req.branch.clone(),
            commit: tip,
            tree,
            approval: approval.approval,
            target: req.target.clone(),
            old,
            new,
            strategy: strategy.as_str().into(),
            commits: commits.to_vec(),
            verdicts,
        };
        match swap(&store, &target_ref, old, new, &record)? {
            Some(warnings) => {
                let note = crate::run::notes::BranchLanding {
                    branch: &req.branch,
                    commit: &tip.to_string(),
                    target: &req.target,
                    approver: &approval.approver,
                    approval: &approval.approval.to_string(),
                    strategy: strategy.as_str(),
                };
                let _ = crate::run::notes::add_record(&store, new, &note.record());
                return Ok(Outcome::Landed {
                    landing: Box::new(record),
                    approval: Box::new(approval),
                    gate_runs,
                    warnings,
                });
            }
            // The target moved: build on the new tip, gate again.
            None => continue,
        }
    }
    Err(MergeError::TargetMoving {
        target: req.target.clone(),
        tries: MAX_ROUNDS as usize,
    })
}

/// Gates the candidate `new`, built on `old`, the tip of `target`, in a
/// scratch worktree; returns the verdicts and how many gate commands ran
/// (cached verdicts on the same tree and inputs are reused).
async fn gate(
    store: &Store,
    state: &SharedIndex,
    settings: &Settings,
    landing: &str,
    (old, new): (Oid, Oid),
    target: &str,
    cancel: &CancellationToken,
) -> Result<(Vec<Verdict>, usize), MergeError> {
    let defs = gates(settings);
    if defs.is_empty() {
        return Ok((vec![super::integration::clean_merge()], 0));
    }
    let orch: PathBuf = store.orch_dir().to_path_buf();
    let scratch = orch.join("scratch").join(landing);
    // The scratch worktree goes when this gate ends, however it ends.
    let _scratch = crate::run::workspace::ScratchGuard::take(store.common_dir(), &scratch)?;
    let log_dir = orch.join("logs").join(landing);
    let tree = store.commit_info(new)?.tree.to_string();
    let cache = state.read(store, |index| index.verdicts_for(&tree))?;
    crate::run::workspace::prepare_scratch(store, &scratch, new).map_err(MergeError::Scratch)?;
    // Warm worktrees (issue 28).
    crate::sandbox::warm_checkout(&settings.sandbox, store.common_dir(), &scratch).map_err(
        |e| {
            MergeError::Scratch(crate::store::StoreError::io(
                "warming the checkout",
                std::io::Error::other(e),
            ))
        },
    )?;
    let gate_env = crate::run::gating::LandingEnv {
        run: None,
        plan: None,
        target,
        base: old,
        candidate: new,
        landing: Some(landing),
        task: None,
    }
    .gate_env();
    let env = gate_env.vars();
    let inputs = gate_env.fingerprint(&settings.sandbox);
    let place = crate::gate::command::Place {
        worktree: &scratch,
        env: &env,
        log_dir: &log_dir,
    };
    let (verdicts, ran) = super::integration::run(
        &defs,
        &tree,
        &cache,
        &place,
        &inputs,
        settings,
        store.common_dir(),
        cancel,
    )
    .await;
    Ok((verdicts, ran))
}

/// Records the landing, then moves the target from `old` to `new` and its
/// checkouts with it. `None` when the target moved meanwhile.
fn swap(
    store: &Store,
    target_ref: &str,
    old: Oid,
    new: Oid,
    record: &BranchLanding,
) -> Result<Option<Vec<LandingProblem>>, MergeError> {
    let approval = record.approval;
    let mut moved_meanwhile = false;
    store.transact(|store| {
        // Read again under the log lock: a push may have moved it.
        if store.ref_target(target_ref)? != Some(old) {
            moved_meanwhile = true;
            return Ok::<_, MergeError>((Operation::default(), ()));
        }
        moved_meanwhile = false;
        let keep = store.keep_update(
            store.ref_target(crate::store::refs::KEEP_REF)?,
            &[new, approval],
            &format!("hand landing {}", record.landing),
        )?;
        Ok((
            Operation {
                events: vec![Event::BranchLanded {
                    landing: record.landing.clone(),
                    branch: record.branch.clone(),
                    commit: record.commit,
                    tree: record.tree,
                    approval: record.approval,
                    target: record.target.clone(),
                    old: record.old,
                    new: record.new,
                    strategy: record.strategy.clone(),
                    commits: record.commits.clone(),
                    verdicts: record.verdicts.clone(),
                }],
                refs: vec![keep],
            },
            (),
        ))
    })?;
    if moved_meanwhile {
        return Ok(None);
    }
    let moves = checkout::begin(store, target_ref, old, new)?;
    crate::failpoint::hit("hand.recorded");
    let applied = store.apply(&[RefUpdate::set(
        target_ref,
        new,
        Expected::At(old),
        &format!("orch: land branch {}", record.branch),
    )])?;
    if applied == Applied::Conflict {
        checkout::cancel(store, &moves);
        return Ok(None);
    }
    Ok(Some(checkout::finish(store, &moves)))
}
