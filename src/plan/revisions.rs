//! Plan revisions in git: `refs/orch/plans/<id>`.
//!
//! Each revision is a commit whose tree holds the canonical `plan.json` and
//! whose parent is the previous revision; trailers name the plan, the
//! revision number and the hash. Adding a revision moves the plan ref and
//! appends a `plan_added` event in one atomic operation. Reading recomputes
//! the hash from the stored bytes instead of trusting the trailer, so a
//! plan ref rewritten by hand cannot pass for an approved revision.

use crate::event::Event;
use crate::ids::PlanId;
use crate::store::log::Operation;
use crate::store::refs::{Expected, RefUpdate};
use crate::store::{Oid, Store, StoreError};

use super::format::{Plan, canonical_bytes, hash_bytes, parse};

/// Where plan revision chains live.
pub const PLANS_PREFIX: &str = "refs/orch/plans/";
/// The file holding the canonical plan in a revision's tree.
pub const PLAN_FILE: &str = "plan.json";

/// One stored revision of a plan.
#[derive(Debug, Clone)]
pub struct PlanRevision {
    pub plan: Plan,
    pub revision: u32,
    /// `blake3:<hex>`, recomputed from the stored bytes.
    pub hash: String,
    pub commit: Oid,
}

/// Why a stored plan could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum RevisionError {
    #[error("no plan {0}")]
    NoSuchPlan(String),
    #[error("plan {plan} has no revision {revision} (latest is {latest})")]
    NoSuchRevision {
        plan: String,
        revision: u32,
        latest: u32,
    },
    #[error("{reference} at {commit} is not a plan revision git-orch wrote: {why}")]
    Corrupt {
        reference: String,
        commit: Oid,
        why: String,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The ref of plan `id`.
pub fn plan_ref(id: &PlanId) -> String {
    format!("{PLANS_PREFIX}{id}")
}

/// What `add` did.
#[derive(Debug)]
pub enum Added {
    /// A new revision was stored.
    Stored(PlanRevision),
    /// The content equals the latest revision; nothing was written.
    Unchanged(PlanRevision),
}

fn trailer<'a>(message: &'a str, key: &str) -> Option<&'a str> {
    message
        .lines()
        .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(": ")))
        .map(str::trim)
}

/// Reads the revision stored in `commit` of plan `id`.
pub fn read_commit(store: &Store, id: &PlanId, commit: Oid) -> Result<PlanRevision, RevisionError> {
    let reference = plan_ref(id);
    let corrupt = |why: String| RevisionError::Corrupt {
        reference: reference.clone(),
        commit,
        why,
    };
    let info = store.commit_info(commit)?;
    let revision: u32 = trailer(&info.message, "Orch-Plan-Revision")
        .and_then(|r| r.parse().ok())
        .ok_or_else(|| corrupt("no Orch-Plan-Revision trailer".into()))?;
    let bytes = store
        .file_at(commit, PLAN_FILE)?
        .ok_or_else(|| corrupt(format!("no {PLAN_FILE} in its tree")))?;
    let plan =
        parse(&bytes).map_err(|e| corrupt(format!("{PLAN_FILE} is not a valid plan: {e}")))?;
    if canonical_bytes(&plan) != bytes {
        return Err(corrupt(format!("{PLAN_FILE} is not in canonical form")));
    }
    if plan.id != *id {
        return Err(corrupt(format!(
            "{PLAN_FILE} is plan {}, not {id}",
            plan.id
        )));
    }
    Ok(PlanRevision {
        plan,
        revision,
        hash: hash_bytes(&bytes),
        commit,
    })
}

/// The latest revision of plan `id`, if the plan exists.
pub fn latest(store: &Store, id: &PlanId) -> Result<Option<PlanRevision>, RevisionError> {
    match store.ref_target(&plan_ref(id))? {
        None => Ok(None),
        Some(tip) => read_commit(store, id, tip).map(Some),
    }
}

/// Every revision of plan `id`, oldest first (first-parent chain).
pub fn all(store: &Store, id: &PlanId) -> Result<Vec<PlanRevision>, RevisionError> {
    let mut out = Vec::new();
    let mut at = store.ref_target(&plan_ref(id))?;
    while let Some(commit) = at {
        out.push(read_commit(store, id, commit)?);
        at = store.commit_info(commit)?.parents.first().copied();
    }
    out.reverse();
    Ok(out)
}

/// Revision `n` of plan `id`.
pub fn revision(store: &Store, id: &PlanId, n: u32) -> Result<PlanRevision, RevisionError> {
    let all = all(store, id)?;
    let latest = all.last().map(|r| r.revision).unwrap_or(0);
    if all.is_empty() {
        return Err(RevisionError::NoSuchPlan(id.to_string()));
    }
    all.into_iter()
        .find(|r| r.revision == n)
        .ok_or(RevisionError::NoSuchRevision {
            plan: id.to_string(),
            revision: n,
            latest,
        })
}

/// The ids of every stored plan.
pub fn ids(store: &Store) -> Result<Vec<PlanId>, RevisionError> {
    Ok(store
        .refs_with_prefix(PLANS_PREFIX)?
        .into_iter()
        .filter_map(|(name, _)| PlanId::new(&name[PLANS_PREFIX.len()..]).ok())
        .collect())
}

/// Stores `plan` as a new revision, unless it equals the latest one.
pub fn add(store: &Store, plan: &Plan) -> Result<Added, RevisionError> {
    let bytes = canonical_bytes(plan);
    let hash = hash_bytes(&bytes);
    let reference = plan_ref(&plan.id);
    let (_, added) = store.transact(|store| {
        let tip = store.ref_target(&reference)?;
        let previous = match tip {
            Some(t) => Some(read_commit(store, &plan.id, t)?),
            None => None,
        };
        if let Some(prev) = previous.as_ref().filter(|p| p.hash == hash) {
            return Ok::<_, RevisionError>((Operation::default(), Added::Unchanged(prev.clone())));
        }
        let revision = previous.as_ref().map_or(1, |p| p.revision + 1);
        let blob = store.write_blob(&bytes)?;
        let tree = store.write_tree(&[(PLAN_FILE, blob)])?;
        let message = format!(
            "plan {} revision {revision}\n\nOrch-Plan: {}\nOrch-Plan-Revision: {revision}\nOrch-Plan-Hash: {hash}\n",
            plan.id, plan.id
        );
        let parents: Vec<Oid> = tip.into_iter().collect();
        let commit = store.write_commit(&message, tree, &parents)?;
        let op = Operation {
            events: vec![Event::PlanAdded {
                plan_id: plan.id.clone(),
                revision,
                hash: hash.clone(),
                commit,
                subtasks: plan.subtasks.len(),
            }],
            refs: vec![RefUpdate::set(
                &reference,
                commit,
                Expected::from_read(tip),
                &format!("orch: plan {} revision {revision}", plan.id),
            )],
        };
        Ok((
            op,
            Added::Stored(PlanRevision {
                plan: plan.clone(),
                revision,
                hash: hash.clone(),
                commit,
            }),
        ))
    })?;
    Ok(added)
}
