//! Approvals: a human decision bound to the exact bytes of a plan revision.
//!
//! Each decision is a commit on `refs/orch/approvals/<plan-id>` whose tree
//! holds `approval.json` (plan id, revision, plan hash, decision, approver,
//! note) and whose parents are the previous decision and the plan revision
//! commit it judges, so the approved bytes stay reachable. Recording moves
//! that ref and appends an `approval_recorded` event atomically. With
//! `--sign` the commit is signed by the user's own git signing setup.
//!
//! Verification recomputes the plan hash from the stored bytes of the
//! current revision and compares it to the latest decision's hash: any
//! change to the plan, however small, voids the approval (invariant 4).

use serde::{Deserialize, Serialize};

use crate::event::{Decision, Event};
use crate::ids::PlanId;
use crate::plan::revisions::{self, PlanRevision, RevisionError};
use crate::store::log::Operation;
use crate::store::refs::{Expected, RefUpdate};
use crate::store::{Oid, Store, StoreError};

/// A plan analysed against a base commit of the repository, as `plan
/// check` shows it and `approve` requires it clean.
#[derive(Debug, Clone)]
pub struct Review {
    pub analysis: crate::plan::Analysis,
    /// The commit whose files were checked (`None` in an empty repository).
    pub base: Option<Oid>,
    /// How the base was named (`main`, `HEAD`, a `--base` argument).
    pub base_name: String,
}

/// Why a review could not run.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("--base {0:?} does not name a commit")]
    BadBase(String),
    #[error("{0}")]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The base a plan is checked against: `--base`, else the plan's target
/// branch if it exists, else `HEAD` (none in an empty repository).
pub fn resolve_base(
    store: &Store,
    plan: &crate::plan::Plan,
    base: Option<&str>,
) -> Result<(Option<Oid>, String), ReviewError> {
    if let Some(b) = base {
        return match store.resolve_commit(b)? {
            Some(c) => Ok((Some(c), b.to_owned())),
            None => Err(ReviewError::BadBase(b.to_owned())),
        };
    }
    if let Some(t) = &plan.target
        && let Some(c) = store.resolve_commit(&format!("refs/heads/{t}"))?
    {
        return Ok((Some(c), t.clone()));
    }
    Ok((store.resolve_commit("HEAD")?, "HEAD".into()))
}

/// Analyses `plan` against the files and the `.orch/config` of its base.
pub fn review(
    store: &Store,
    plan: &crate::plan::Plan,
    base: Option<&str>,
) -> Result<Review, ReviewError> {
    let (base, base_name) = resolve_base(store, plan, base)?;
    let settings = crate::config::Settings::from_values(&store.project_config(base)?)?;
    let paths = match base {
        Some(c) => store.tree_paths(c)?,
        None => Vec::new(),
    };
    let rules = crate::plan::pinch::rules(&settings.pinch_paths, &settings.pinch_ignore);
    Ok(Review {
        analysis: crate::plan::analyse(plan, &paths, &rules),
        base,
        base_name,
    })
}

/// Where decision chains live.
pub const APPROVALS_PREFIX: &str = "refs/orch/approvals/";
/// The record file in a decision commit's tree.
pub const APPROVAL_FILE: &str = "approval.json";

/// One recorded decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Approval {
    pub version: u32,
    pub plan_id: PlanId,
    pub revision: u32,
    /// The plan hash the decision is bound to.
    pub plan_hash: String,
    /// The plan revision commit.
    pub plan_commit: String,
    pub decision: Decision,
    pub approver: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub time_ms: i64,
}

/// A decision as read back, with its commit.
#[derive(Debug, Clone)]
pub struct RecordedApproval {
    pub approval: Approval,
    pub commit: Oid,
    pub signed: bool,
}

/// Why an approval could not be recorded or read.
#[derive(Debug, thiserror::Error)]
pub enum ApprovalError {
    #[error("{0}")]
    Revision(#[from] RevisionError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{reference} at {commit} is not a decision git-orch wrote: {why}")]
    Corrupt {
        reference: String,
        commit: Oid,
        why: String,
    },
}

/// Why a commit is not a decision (or branch approval) git-orch wrote: a
/// commit made with plain git to look like one fails one of these.
#[derive(Debug, thiserror::Error)]
pub enum NotOurDecision {
    #[error("it was committed by {name} <{email}>, not by git-orch")]
    ForeignCommitter { name: String, email: String },
    #[error("its trailers do not agree with its approval.json")]
    TrailersDisagree,
    #[error("its tree holds more than {APPROVAL_FILE}")]
    OtherFiles,
    #[error("it does not descend from the plan revision it judges")]
    NotOnRevision,
    #[error("the approval commit {commit} holds no {APPROVAL_FILE}")]
    NoFile { commit: Oid },
    #[error("the approval commit {commit} is unreadable: {source}")]
    Unreadable {
        commit: Oid,
        #[source]
        source: serde_json::Error,
    },
    #[error("{commit} is not the approval of a branch")]
    NotABranchApproval { commit: Oid },
    #[error("the approval {commit} is for tree {approved}, not {tree}")]
    OtherTree {
        commit: Oid,
        approved: String,
        tree: String,
    },
    /// It could not be read to tell.
    #[error("{0}")]
    Store(#[from] StoreError),
}

/// The ref of plan `id`'s decisions.
pub fn approval_ref(id: &PlanId) -> String {
    format!("{APPROVALS_PREFIX}{id}")
}

/// Reads the latest decision on plan `id`, if any.
pub fn latest(store: &Store, id: &PlanId) -> Result<Option<RecordedApproval>, ApprovalError> {
    let reference = approval_ref(id);
    let Some(commit) = store.ref_target(&reference)? else {
        return Ok(None);
    };
    let corrupt = |why: String| ApprovalError::Corrupt {
        reference: reference.clone(),
        commit,
        why,
    };
    let bytes = store
        .file_at(commit, APPROVAL_FILE)?
        .ok_or_else(|| corrupt(format!("no {APPROVAL_FILE}")))?;
    let approval: Approval =
        serde_json::from_slice(&bytes).map_err(|e| corrupt(format!("{APPROVAL_FILE}: {e}")))?;
    if approval.plan_id != *id {
        return Err(corrupt(format!("it is about plan {}", approval.plan_id)));
    }
    check_decision_commit(store, commit, &approval).map_err(|e| corrupt(e.to_string()))?;
    let signed = store.commit_info(commit)?.signed;
    Ok(Some(RecordedApproval {
        approval,
        commit,
        signed,
    }))
}

/// Why the decision commit `commit` holding `approval` is not one
/// [`record`] wrote: git-orch's signature as committer, trailers that
/// agree with the file, a tree of that file alone, and the plan revision
/// it judges among its parents. A commit made with plain git to look like
/// an approval fails one of these.
pub fn check_decision_commit(
    store: &Store,
    commit: Oid,
    approval: &Approval,
) -> Result<(), NotOurDecision> {
    let info = store.commit_info(commit)?;
    // A signed decision is committed by the person who signs it (their
    // signing setup makes the commit); whether it verifies is
    // `orch.requireSignedApprovals`'s question.
    if !info.signed
        && (info.committer_name.as_str(), info.committer_email.as_str())
            != (crate::store::ORCH_NAME, crate::store::ORCH_EMAIL)
    {
        return Err(NotOurDecision::ForeignCommitter {
            name: info.committer_name,
            email: info.committer_email,
        });
    }
    let trailer = |key: &str| {
        info.message
            .lines()
            .find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_owned()))
    };
    if trailer("Orch-Plan: ").as_deref() != Some(approval.plan_id.as_str())
        || trailer("Orch-Plan-Hash: ").as_deref() != Some(approval.plan_hash.as_str())
    {
        return Err(NotOurDecision::TrailersDisagree);
    }
    if store.paths_in_tree(info.tree)? != [APPROVAL_FILE] {
        return Err(NotOurDecision::OtherFiles);
    }
    let judged = store.parse_oid(&approval.plan_commit)?;
    if !info.parents.contains(&judged) {
        return Err(NotOurDecision::NotOnRevision);
    }
    Ok(())
}

/// Records `decision` on `revision`. `sign` signs the commit with the
/// user's git signing setup.
pub fn record(
    store: &Store,
    revision: &PlanRevision,
    decision: Decision,
    approver: &str,
    note: Option<&str>,
    sign: bool,
) -> Result<RecordedApproval, ApprovalError> {
    let id = &revision.plan.id;
    let reference = approval_ref(id);
    let (_, recorded) = store.transact(|store| {
        // The plan must not have moved since the caller analysed it.
        let current = revisions::latest(store, id)?
            .ok_or_else(|| RevisionError::NoSuchPlan(id.to_string()))?;
        if current.hash != revision.hash {
            return Err(ApprovalError::Revision(RevisionError::Corrupt {
                reference: revisions::plan_ref(id),
                commit: current.commit,
                why: format!(
                    "it moved to revision {} while the decision was being recorded; run the command again",
                    current.revision
                ),
            }));
        }
        let tip = store.ref_target(&reference)?;
        let approval = Approval {
            version: 1,
            plan_id: id.clone(),
            revision: revision.revision,
            plan_hash: revision.hash.clone(),
            plan_commit: revision.commit.to_string(),
            decision,
            approver: approver.to_owned(),
            note: note.map(str::to_owned),
            time_ms: crate::clock::now_ms(),
        };
        let mut bytes = serde_json::to_vec_pretty(&approval).expect("approvals serialise");
        bytes.push(b'\n');
        let blob = store.write_blob(&bytes)?;
        let tree = store.write_tree(&[(APPROVAL_FILE, blob)])?;
        let verb = match decision {
            Decision::Approve => "approve",
            Decision::Revise => "revise",
        };
        let message = format!(
            "{verb} plan {id} revision {}\n\nOrch-Plan: {id}\nOrch-Plan-Revision: {}\nOrch-Plan-Hash: {}\nOrch-Decision: {verb}\n",
            revision.revision, revision.revision, revision.hash
        );
        let mut parents: Vec<Oid> = tip.into_iter().collect();
        parents.push(revision.commit);
        let commit = if sign {
            store.write_signed_commit(&message, tree, &parents)?
        } else {
            store.write_commit(&message, tree, &parents)?
        };
        let op = Operation {
            events: vec![Event::ApprovalRecorded {
                plan_id: id.clone(),
                revision: revision.revision,
                hash: revision.hash.clone(),
                decision,
                approver: approver.to_owned(),
                note: note.map(str::to_owned),
                signed: sign,
                commit,
            }],
            refs: vec![RefUpdate::set(
                &reference,
                commit,
                Expected::from_read(tip),
                &format!("orch: {verb} plan {id}"),
            )],
        };
        Ok((
            op,
            RecordedApproval {
                approval,
                commit,
                signed: sign,
            },
        ))
    })?;
    Ok(recorded)
}

/// The outcome of `approve verify`.
#[derive(Debug, Clone)]
pub enum Verdict {
    /// The latest decision approves exactly the current revision.
    Valid {
        current: Box<PlanRevision>,
        approval: Box<RecordedApproval>,
    },
    /// The plan has never been decided on.
    NoDecision { current: Box<PlanRevision> },
    /// The latest decision asks for a revision.
    Revise {
        current: Box<PlanRevision>,
        approval: Box<RecordedApproval>,
    },
    /// The approval is for other bytes than the current revision.
    Stale {
        current: Box<PlanRevision>,
        approval: Box<RecordedApproval>,
    },
    /// Signatures are required and this one is missing or invalid.
    Unsigned {
        current: Box<PlanRevision>,
        approval: Box<RecordedApproval>,
    },
    /// No `approval_recorded` event of git-orch's log names the decision
    /// the approvals ref points at: the ref was moved by something else.
    Unrecorded {
        current: Box<PlanRevision>,
        approval: Box<RecordedApproval>,
    },
}

impl Verdict {
    pub fn is_valid(&self) -> bool {
        matches!(self, Verdict::Valid { .. })
    }

    /// One sentence saying why; the fix is the CLI's hint.
    pub fn explain(&self) -> String {
        match self {
            Verdict::Valid { current, approval } => format!(
                "plan {} revision {} ({}) is approved by {}",
                current.plan.id, current.revision, current.hash, approval.approval.approver
            ),
            Verdict::NoDecision { current } => format!(
                "plan {} revision {} has no approval",
                current.plan.id, current.revision
            ),
            Verdict::Revise { current, approval } => format!(
                "plan {} revision {} was sent back for revision by {}{}",
                current.plan.id,
                approval.approval.revision,
                approval.approval.approver,
                approval
                    .approval
                    .note
                    .as_deref()
                    .map(|n| format!(": {n}"))
                    .unwrap_or_default()
            ),
            Verdict::Stale { current, approval } => format!(
                "the approval of plan {} is for revision {} ({}), but the plan is now at revision {} ({})",
                current.plan.id,
                approval.approval.revision,
                approval.approval.plan_hash,
                current.revision,
                current.hash
            ),
            Verdict::Unsigned { current, approval } => format!(
                "orch.requireSignedApprovals is set and the approval of plan {} (commit {}) has no valid signature",
                current.plan.id, approval.commit
            ),
            Verdict::Unrecorded { current, approval } => format!(
                "the approval of plan {} (commit {}) is recorded by no event of git-orch's log: its ref was moved by something other than `git orch approve`",
                current.plan.id, approval.commit
            ),
        }
    }
}

/// Whether the latest decision on `id` approves its current revision.
/// `recorded` tells whether git-orch's log records a decision commit (see
/// `StateIndex::decision_recorded`).
pub fn verify(
    store: &Store,
    id: &PlanId,
    require_signed: bool,
    recorded: &mut dyn FnMut(Oid) -> bool,
) -> Result<Verdict, ApprovalError> {
    let current = Box::new(
        revisions::latest(store, id)?.ok_or_else(|| RevisionError::NoSuchPlan(id.to_string()))?,
    );
    let Some(approval) = latest(store, id)? else {
        return Ok(Verdict::NoDecision { current });
    };
    let approval = Box::new(approval);
    if approval.approval.decision == Decision::Revise {
        return Ok(Verdict::Revise { current, approval });
    }
    if approval.approval.plan_hash != current.hash {
        return Ok(Verdict::Stale { current, approval });
    }
    if require_signed && !(approval.signed && store.signature_valid(approval.commit)?) {
        return Ok(Verdict::Unsigned { current, approval });
    }
    if !recorded(approval.commit) {
        return Ok(Verdict::Unrecorded { current, approval });
    }
    Ok(Verdict::Valid { current, approval })
}

/// One person's approval of a branch for `git orch land`, as stored in the
/// approval commit's `approval.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BranchApprovalFile {
    pub version: u32,
    /// Always `branch`: tells it from a plan decision.
    pub kind: String,
    pub branch: String,
    pub commit: String,
    /// The tree the approval is bound to.
    pub tree: String,
    pub decision: Decision,
    pub approver: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub time_ms: i64,
}

/// A branch approval as recorded.
#[derive(Debug, Clone)]
pub struct RecordedBranchApproval {
    pub file: BranchApprovalFile,
    pub commit: Oid,
    pub signed: bool,
}

/// Records that `approver` approves branch `branch` at `commit` (whose
/// tree is `tree`) for `git orch land`: an approval commit holding
/// `approval.json` with the approved tip as its parent (signed with the
/// user's git signing setup when `sign`), a `branch_approved` event, and
/// `refs/orch/keep` moved to keep the approval commit, in one operation.
pub fn record_branch(
    store: &Store,
    branch: &str,
    commit: Oid,
    tree: Oid,
    approver: &str,
    note: Option<&str>,
    sign: bool,
) -> Result<RecordedBranchApproval, ApprovalError> {
    let file = BranchApprovalFile {
        version: 1,
        kind: "branch".into(),
        branch: branch.to_owned(),
        commit: commit.to_string(),
        tree: tree.to_string(),
        decision: Decision::Approve,
        approver: approver.to_owned(),
        note: note.map(str::to_owned),
        time_ms: crate::clock::now_ms(),
    };
    let mut bytes = serde_json::to_vec_pretty(&file).expect("approvals serialise");
    bytes.push(b'\n');
    let blob = store.write_blob(&bytes)?;
    let approval_tree = store.write_tree(&[(APPROVAL_FILE, blob)])?;
    let message = format!(
        "approve branch {branch} for landing\n\nOrch-Branch: {branch}\nOrch-Commit: {commit}\nOrch-Tree: {tree}\nOrch-Decision: approve\n"
    );
    let approval = if sign {
        store.write_signed_commit(&message, approval_tree, &[commit])?
    } else {
        store.write_commit(&message, approval_tree, &[commit])?
    };
    store.transact(|store| {
        let keep = store.keep_update(
            store.ref_target(crate::store::refs::KEEP_REF)?,
            &[approval],
            &format!("approval of branch {branch}"),
        )?;
        Ok::<_, ApprovalError>((
            Operation {
                events: vec![Event::BranchApproved {
                    branch: branch.to_owned(),
                    commit,
                    tree,
                    approver: approver.to_owned(),
                    note: note.map(str::to_owned),
                    signed: sign,
                    approval,
                }],
                refs: vec![keep],
            },
            (),
        ))
    })?;
    Ok(RecordedBranchApproval {
        file,
        commit: approval,
        signed: sign,
    })
}

/// Reads the branch approval commit `commit`: why not, when it is not one
/// git-orch wrote approving exactly `tree`.
pub fn read_branch_approval(
    store: &Store,
    commit: Oid,
    tree: &str,
) -> Result<RecordedBranchApproval, NotOurDecision> {
    let bytes = store
        .file_at(commit, APPROVAL_FILE)?
        .ok_or(NotOurDecision::NoFile { commit })?;
    let file: BranchApprovalFile = serde_json::from_slice(&bytes)
        .map_err(|source| NotOurDecision::Unreadable { commit, source })?;
    if file.kind != "branch" || file.decision != Decision::Approve {
        return Err(NotOurDecision::NotABranchApproval { commit });
    }
    if file.tree != tree {
        return Err(NotOurDecision::OtherTree {
            commit,
            approved: file.tree,
            tree: tree.to_owned(),
        });
    }
    let signed = store.commit_info(commit)?.signed;
    Ok(RecordedBranchApproval {
        file,
        commit,
        signed,
    })
}
