//! The client's `pre-push` gate: a protected branch is only pushed to
//! commits that `git orch verify` accepts.
//!
//! git runs `pre-push <remote> <url>` with one line per ref on stdin:
//! `<local ref> <local id> <remote ref> <remote id>`. For every remote ref
//! that is a protected branch ([`super::policy`]):
//!
//! * a deletion is refused;
//! * an update that is not a fast-forward of the remote's value is refused
//!   (the target only moves forward);
//! * every commit the branch gains on its first-parent chain must be a
//!   landing git-orch verifies, judged by this clone's own log. When the
//!   remote branch is new, the commits already on one of the remote's
//!   protected branches (its remote-tracking refs here) are not new.
//!
//! `refs/orch/*`, tags and other branches pass untouched. The server's
//! `pre-receive` makes the same decision with the log it will hold; this
//! hook only tells the user before the upload.

use crate::store::{Oid, Store};

use super::policy::protection;
use super::{Decision, HookError, Refusal, first_parent_commits, parse_hook_oid, verify_updates};

/// One line of `pre-push` input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushLine {
    pub local_ref: String,
    /// `None` for a deletion.
    pub local: Option<Oid>,
    pub remote_ref: String,
    /// `None` when the remote ref does not exist yet.
    pub remote: Option<Oid>,
}

/// Parses `pre-push` input; blank lines are ignored, anything else that is
/// not four fields with two object ids is an error.
pub fn parse(store: &Store, input: &str) -> Result<Vec<PushLine>, HookError> {
    let mut out = Vec::new();
    for (i, line) in input.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = || HookError::Input {
            hook: "pre-push",
            line: i + 1,
            expected: "<local ref> <local id> <remote ref> <remote id>",
            text: line.chars().take(200).collect(),
        };
        let fields: Vec<&str> = line.split(' ').collect();
        let [local_ref, local, remote_ref, remote] = fields[..] else {
            return Err(bad());
        };
        let local = parse_hook_oid(store, local).ok_or_else(bad)?;
        let remote = parse_hook_oid(store, remote).ok_or_else(bad)?;
        if !remote_ref.starts_with("refs/") {
            return Err(bad());
        }
        out.push(PushLine {
            local_ref: local_ref.to_owned(),
            local,
            remote_ref: remote_ref.to_owned(),
            remote,
        });
    }
    Ok(out)
}

/// The tracking refs of `remote`'s protected branches, if `remote` is a
/// configured remote name (git passes the URL when pushing to one).
fn protected_tracking_tips(
    store: &Store,
    remote: &str,
    protected: &super::policy::Protection,
) -> Result<Vec<Oid>, HookError> {
    let valid = !remote.is_empty()
        && remote
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !remote.contains("..");
    if !valid {
        return Ok(Vec::new());
    }
    let prefix = format!("refs/remotes/{remote}/");
    Ok(store
        .refs_with_prefix(&prefix)?
        .into_iter()
        .filter(|(name, _)| {
            protected
                .protects(&format!("refs/heads/{}", &name[prefix.len()..]))
                .is_some()
        })
        .map(|(_, id)| id)
        .collect())
}

/// Judges one push from this clone to `remote`. The `refs/orch/*` values
/// the same push sends count as this clone's state: a worker's landing
/// pushes its log (holding the `landed` events) together with the target,
/// before its own log ref moves.
pub fn decide(store: Store, remote: &str, lines: &[PushLine]) -> Result<Decision, HookError> {
    let store = &store.with_proposed_refs(
        lines
            .iter()
            .filter(|l| l.remote_ref.starts_with("refs/orch/log/"))
            .filter_map(|l| l.local.map(|oid| (l.remote_ref.clone(), Some(oid)))),
    );
    let protected = protection(store)?;
    let mut refusals = Vec::new();
    let mut updates: Vec<(String, Vec<Oid>)> = Vec::new();
    let mut known: Option<Vec<Oid>> = None;
    for line in lines {
        let Some(branch) = protected.protects(&line.remote_ref) else {
            continue;
        };
        let refuse = |reason: String, hint: &str| Refusal {
            reference: line.remote_ref.clone(),
            commit: None,
            reason,
            hint: hint.to_owned(),
        };
        let Some(local) = line.local else {
            refusals.push(refuse(
                format!("{branch} is protected by git-orch and may not be deleted from {remote}"),
                "protected branches are listed in orch.protect; see docs/hooks.md",
            ));
            continue;
        };
        let commits = match line.remote {
            None => {
                if known.is_none() {
                    known = Some(protected_tracking_tips(store, remote, &protected)?);
                }
                first_parent_commits(store, local, known.as_deref().unwrap_or_default())?
            }
            Some(old) if !store.has_object(old) => {
                refusals.push(refuse(
                    format!("{remote} has {branch} at {old}, which this clone does not have, so the push cannot be checked"),
                    &format!("fetch first (`git fetch {remote}`), then land your work on top through git-orch"),
                ));
                continue;
            }
            Some(old) if !store.is_ancestor(old, local)? => {
                refusals.push(refuse(
                    format!("{branch} is protected by git-orch and only moves forward; this push would rewrite it on {remote}"),
                    "a protected branch only takes landings from the merge queue; do not force-push it",
                ));
                continue;
            }
            Some(old) => first_parent_commits(store, local, &[old])?,
        };
        updates.push((line.remote_ref.clone(), commits));
    }
    let mut decision = verify_updates(
        store,
        &updates,
        "land changes on a protected branch through `git orch run` / `git orch merge`; if another clone landed them, `git orch sync` first so this clone has its log",
    )?;
    refusals.append(&mut decision.refusals);
    decision.refusals = refusals;
    Ok(decision)
}
