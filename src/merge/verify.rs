//! `verify`: was this commit landed by git-orch from an approved, gated run?
//!
//! For hosted CI where server hooks cannot run, as a required check. A
//! commit passes only if a `landed` event lists it, the run's approval
//! decision approves exactly the run's plan hash (and the stored plan bytes
//! hash to it), the attempt passed its gates, and the candidate it landed in
//! passed the integration gate.

use serde::Serialize;

use crate::event::{Decision, Event};
use crate::state::RunState;
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
}

fn no(commit: Oid, reason: String) -> Verification {
    Verification {
        commit: commit.to_string(),
        ok: false,
        reason,
        run: None,
        task: None,
        attempt: None,
    }
}

/// Checks every commit in `commits`.
pub fn verify(
    store: &Store,
    commits: &[Oid],
    require_signed: bool,
) -> Result<Vec<Verification>, crate::store::StoreError> {
    let view = store.read_log()?;
    let runs = crate::state::fold(view.records());
    // commit → (run, task, attempt, landing tip)
    let mut landed: std::collections::HashMap<String, (String, String, u32, String)> =
        Default::default();
    let mut integration_ok: std::collections::HashSet<String> = Default::default();
    let mut integration_bad: std::collections::HashSet<String> = Default::default();
    for r in view.records() {
        match &r.event {
            Event::Landed {
                run_id,
                task,
                attempt,
                new,
                commits,
                ..
            } => {
                for c in commits {
                    landed.insert(
                        c.clone(),
                        (run_id.to_string(), task.to_string(), *attempt, new.clone()),
                    );
                }
            }
            Event::LandingVoided { new, .. } => {
                landed.retain(|_, (_, _, _, tip)| tip != new);
            }
            Event::IntegrationVerdict {
                candidate, verdict, ..
            } => {
                if verdict.blocks() {
                    integration_bad.insert(candidate.clone());
                } else {
                    integration_ok.insert(candidate.clone());
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    for &c in commits {
        let Some((run_id, task, attempt, tip)) = landed.get(&c.to_string()).cloned() else {
            out.push(no(
                c,
                "no git-orch landing records this commit (made by hand, or not landed)".into(),
            ));
            continue;
        };
        let run = runs.values().find(|r| r.id.as_str() == run_id);
        let verdict = match run {
            None => Err(format!("its run {run_id} is not in the log")),
            Some(run) => check_run(
                store,
                run,
                &task,
                attempt,
                &tip,
                &integration_ok,
                &integration_bad,
                require_signed,
            ),
        };
        out.push(match verdict {
            Ok(reason) => Verification {
                commit: c.to_string(),
                ok: true,
                reason,
                run: Some(run_id),
                task: Some(task),
                attempt: Some(attempt),
            },
            Err(reason) => Verification {
                commit: c.to_string(),
                ok: false,
                reason,
                run: Some(run_id),
                task: Some(task),
                attempt: Some(attempt),
            },
        });
    }
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
fn check_run(
    store: &Store,
    run: &RunState,
    task: &str,
    attempt: u32,
    tip: &str,
    integration_ok: &std::collections::HashSet<String>,
    integration_bad: &std::collections::HashSet<String>,
    require_signed: bool,
) -> Result<String, String> {
    // The approval the run cites must approve exactly the run's plan hash.
    let approval_commit = store
        .parse_oid(&run.approval)
        .map_err(|_| format!("run {} names no approval commit", run.id))?;
    let bytes = store
        .file_at(approval_commit, crate::approval::APPROVAL_FILE)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("the approval {} of run {} is missing", run.approval, run.id))?;
    let approval: crate::approval::Approval = serde_json::from_slice(&bytes)
        .map_err(|e| format!("the approval of run {} is unreadable: {e}", run.id))?;
    if approval.decision != Decision::Approve {
        return Err(format!(
            "run {}'s plan decision was not an approval",
            run.id
        ));
    }
    if approval.plan_hash != run.plan_hash {
        return Err(format!(
            "run {} ran plan hash {} but its approval is for {} (the plan changed after approval)",
            run.id, run.plan_hash, approval.plan_hash
        ));
    }
    let rev = crate::run::plan_of(store, run).map_err(|e| e.to_string())?;
    if rev.hash != approval.plan_hash {
        return Err(format!(
            "the stored plan of run {} does not hash to the approved hash",
            run.id
        ));
    }
    if require_signed {
        let signed = store
            .commit_info(approval_commit)
            .map(|i| i.signed)
            .unwrap_or(false)
            && store.signature_valid(approval_commit).unwrap_or(false);
        if !signed {
            return Err(format!(
                "the approval of run {} is not validly signed",
                run.id
            ));
        }
    }
    let a = run
        .tasks
        .iter()
        .find(|(id, _)| id.as_str() == task)
        .map(|(_, t)| t)
        .and_then(|t| t.attempts.iter().find(|x| x.n == attempt))
        .ok_or_else(|| format!("attempt {task}/{attempt} of run {} is not recorded", run.id))?;
    if a.outcome != Some(crate::event::Outcome::Passed) || a.verdicts.iter().any(|v| v.blocks()) {
        return Err(format!("attempt {task}/{attempt} did not pass its gates"));
    }
    if integration_bad.contains(tip) || !integration_ok.contains(tip) {
        return Err(format!(
            "the candidate {tip} did not pass the integration gate"
        ));
    }
    Ok(format!(
        "landed by git-orch from run {} ({task}, attempt {attempt}) of plan {} revision {}, approved by {}",
        run.id, run.plan_id, run.revision, approval.approver
    ))
}
