//! `verify`: was this commit landed by git-orch from an approved, gated run?
//!
//! For hosted CI where server hooks cannot run, as a required check. A
//! commit passes only if a `landed` event lists it, the run's approval
//! decision approves exactly the run's plan hash (and the stored plan bytes
//! hash to it), the attempt passed its gates, and the candidate it landed in
//! passed the integration gate. A commit of a person's branch landed by
//! `git orch land` passes if a `branch_landed` event lists it, the approval
//! commit it cites approves exactly the tree that landed (signed, when
//! `orch.requireSignedApprovals` asks), and the gate's verdicts recorded
//! with it passed.

use serde::Serialize;

use crate::event::Decision;
use crate::state::{RunState, StateIndex};
use crate::store::{Oid, Store};

/// The answer for one commit.
#[derive(Debug, Clone, Serialize)]
pub struct Verification {
    pub commit: String,
    pub ok: bool,
    /// Why (or why not), one sentence.
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// For a hand landing: the branch that landed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
}

fn no(commit: Oid, reason: String) -> Verification {
    Verification {
        commit: commit.to_string(),
        ok: false,
        reason,
        run: None,
        task: None,
        attempt: None,
        branch: None,
    }
}

/// Checks every commit in `commits`.
pub fn verify(
    store: &Store,
    commits: &[Oid],
    require_signed: bool,
) -> Result<Vec<Verification>, crate::store::StoreError> {
    let mut index = StateIndex::open(store)?;
    verify_with(store, &mut index, commits, require_signed)
}

/// Checks every commit in `commits` against the state `index` holds (a
/// reader that keeps its own index, such as `git orch web`, which must not
/// save one).
pub fn verify_with(
    store: &Store,
    index: &mut StateIndex,
    commits: &[Oid],
    require_signed: bool,
) -> Result<Vec<Verification>, crate::store::StoreError> {
    let mut out = Vec::new();
    for &c in commits {
        let hex = c.to_string();
        let mut found = None;
        for run_id in index.runs_landing(&hex)? {
            let Some(run) = index.run(&run_id)? else {
                continue;
            };
            if let Some(l) = run
                .landings
                .iter()
                .rev()
                .find(|l| !l.voided && l.commits.iter().any(|c| c.to_string() == hex))
            {
                found = Some((run.clone(), l.clone()));
                break;
            }
        }
        if found.is_none()
            && let Some(hand) = index.hand_landing(&hex)?
        {
            let (ok, reason) = match check_hand(store, &hand, require_signed) {
                Ok(reason) => (true, reason),
                Err(reason) => (false, reason.to_string()),
            };
            out.push(Verification {
                commit: hex,
                ok,
                reason,
                run: None,
                task: None,
                attempt: None,
                branch: Some(hand.branch),
            });
            continue;
        }
        let Some((run, landing)) = found else {
            out.push(no(
                c,
                "no git-orch landing records this commit (made by hand, or not landed)".into(),
            ));
            continue;
        };
        let (task, attempt) = (landing.task.to_string(), landing.attempt);
        let verdict = check_run(
            store,
            &run,
            &task,
            attempt,
            &landing.new.to_string(),
            require_signed,
        );
        let (ok, reason) = match verdict {
            Ok(reason) => (true, reason),
            Err(reason) => (false, reason.to_string()),
        };
        out.push(Verification {
            commit: hex,
            ok,
            reason,
            run: Some(run.id.to_string()),
            task: Some(task),
            attempt: Some(attempt),
            branch: None,
        });
    }
    Ok(out)
}

/// Why git-orch does not vouch for a landed commit.
#[derive(Debug, thiserror::Error)]
enum Unvouched {
    #[error("run {run} names no approval commit")]
    RunWithoutApproval { run: String },
    #[error("the approval {approval} of run {run} is missing")]
    ApprovalMissing { approval: String, run: String },
    #[error("the approval of run {run} is unreadable: {source}")]
    ApprovalUnreadable {
        run: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("the approval {approval} of run {run} is not one git-orch recorded: {why}")]
    ApprovalNotRecorded {
        approval: String,
        run: String,
        #[source]
        why: Box<crate::approval::NotOurDecision>,
    },
    #[error("run {run}'s plan decision was not an approval")]
    NotAnApproval { run: String },
    #[error(
        "run {run} ran plan hash {ran} but its approval is for {approved} (the plan changed after approval)"
    )]
    PlanChanged {
        run: String,
        ran: String,
        approved: String,
    },
    #[error("the stored plan of run {run} does not hash to the approved hash")]
    StoredPlanDiffers { run: String },
    #[error("the approval of run {run} is not validly signed")]
    RunUnsigned { run: String },
    #[error("attempt {task}/{attempt} of run {run} is not recorded")]
    AttemptUnknown {
        task: String,
        attempt: u32,
        run: String,
    },
    #[error("attempt {task}/{attempt} did not pass its gates")]
    GatesFailed { task: String, attempt: u32 },
    #[error("the candidate {candidate} did not pass the integration gate")]
    IntegrationFailed { candidate: String },
    #[error("the landing of branch {branch} names tree {named}, but its commit has tree {actual}")]
    TreeDiffers {
        branch: String,
        named: String,
        actual: String,
    },
    #[error("the approval of branch {branch} is for commit {approved}, but {landed} landed")]
    OtherCommit {
        branch: String,
        approved: String,
        landed: String,
    },
    #[error("the approval of branch {branch} is not validly signed")]
    BranchUnsigned { branch: String },
    #[error("{0}")]
    BranchApproval(#[source] Box<crate::approval::NotOurDecision>),
    #[error("{0}")]
    Store(#[from] crate::store::StoreError),
    /// The run's plan could not be read.
    #[error("{0}")]
    Plan(#[source] Box<crate::run::RunError>),
}

fn check_run(
    store: &Store,
    run: &RunState,
    task: &str,
    attempt: u32,
    tip: &str,
    require_signed: bool,
) -> Result<String, Unvouched> {
    use Unvouched as U;
    let id = || run.id.to_string();
    // The approval the run cites must approve exactly the run's plan hash.
    let approval_commit = store
        .parse_oid(&run.approval)
        .map_err(|_| U::RunWithoutApproval { run: id() })?;
    let bytes = store
        .file_at(approval_commit, crate::approval::APPROVAL_FILE)?
        .ok_or_else(|| U::ApprovalMissing {
            approval: run.approval.clone(),
            run: id(),
        })?;
    let approval: crate::approval::Approval = serde_json::from_slice(&bytes)
        .map_err(|source| U::ApprovalUnreadable { run: id(), source })?;
    crate::approval::check_decision_commit(store, approval_commit, &approval).map_err(|why| {
        U::ApprovalNotRecorded {
            approval: run.approval.clone(),
            run: id(),
            why: Box::new(why),
        }
    })?;
    if approval.decision != Decision::Approve {
        return Err(U::NotAnApproval { run: id() });
    }
    if approval.plan_hash != run.plan_hash {
        return Err(U::PlanChanged {
            run: id(),
            ran: run.plan_hash.clone(),
            approved: approval.plan_hash,
        });
    }
    let rev = crate::run::plan_of(store, run).map_err(|e| U::Plan(Box::new(e)))?;
    if rev.hash != approval.plan_hash {
        return Err(U::StoredPlanDiffers { run: id() });
    }
    if require_signed {
        let signed = store
            .commit_info(approval_commit)
            .map(|i| i.signed)
            .unwrap_or(false)
            && store.signature_valid(approval_commit).unwrap_or(false);
        if !signed {
            return Err(U::RunUnsigned { run: id() });
        }
    }
    let a = run
        .tasks
        .iter()
        .find(|(id, _)| id.as_str() == task)
        .map(|(_, t)| t)
        .and_then(|t| t.attempts.iter().find(|x| x.n == attempt))
        .ok_or_else(|| U::AttemptUnknown {
            task: task.to_owned(),
            attempt,
            run: id(),
        })?;
    if a.outcome != Some(crate::event::Outcome::Passed) || a.verdicts.iter().any(|v| v.blocks()) {
        return Err(U::GatesFailed {
            task: task.to_owned(),
            attempt,
        });
    }
    let on_tip: Vec<_> = run
        .integration
        .iter()
        .filter(|i| i.candidate.to_string() == tip)
        .collect();
    if on_tip.is_empty() || on_tip.iter().any(|i| i.verdict.blocks()) {
        return Err(U::IntegrationFailed {
            candidate: tip.to_owned(),
        });
    }
    Ok(format!(
        "landed by git-orch from run {} ({task}, attempt {attempt}) of plan {} revision {}, approved by {}",
        run.id, run.plan_id, run.revision, approval.approver
    ))
}

/// Whether a hand landing (`git orch land`) may stand: its approval commit
/// approves exactly the tree that landed, and the integration gate passed
/// on the candidate.
fn check_hand(
    store: &Store,
    hand: &crate::state::BranchLanding,
    require_signed: bool,
) -> Result<String, Unvouched> {
    use Unvouched as U;
    let branch = || hand.branch.clone();
    let approval_commit = hand.approval;
    let approval =
        crate::approval::read_branch_approval(store, approval_commit, &hand.tree.to_string())
            .map_err(|e| U::BranchApproval(Box::new(e)))?;
    // The record's tree must be the landed tip's: the content decides.
    if let Ok(info) = store.commit_info(hand.commit)
        && Some(hand.tree) != Some(info.tree)
    {
        return Err(U::TreeDiffers {
            branch: branch(),
            named: hand.tree.to_string(),
            actual: info.tree.to_string(),
        });
    }
    if approval.file.commit != hand.commit.to_string() {
        return Err(U::OtherCommit {
            branch: branch(),
            approved: approval.file.commit,
            landed: hand.commit.to_string(),
        });
    }
    if require_signed
        && !(approval.signed && store.signature_valid(approval_commit).unwrap_or(false))
    {
        return Err(U::BranchUnsigned { branch: branch() });
    }
    if hand.verdicts.is_empty() || hand.verdicts.iter().any(|v| v.blocks()) {
        return Err(U::IntegrationFailed {
            candidate: hand.new.to_string(),
        });
    }
    Ok(format!(
        "landed by git-orch from branch {} ({}), approved by {}; the integration gate passed",
        hand.branch,
        &hand.commit.to_string()[..12],
        approval.file.approver
    ))
}
