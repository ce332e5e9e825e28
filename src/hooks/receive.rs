//! The server's `pre-receive` gate: what a shared repository accepts.
//!
//! git runs `pre-receive` once per push with one line per ref on stdin,
//! `<old id> <new id> <ref>`, the pushed objects still in quarantine; a
//! non-zero exit refuses the whole push, so every push is all-or-nothing.
//! The caller opens the store over the quarantine
//! ([`crate::store::Store::with_object_dirs`]). Refused:
//!
//! * any update of `refs/orch-remotes/*` (tracking copies are private to a
//!   clone; on a server they would feed `verify` unchecked events);
//! * deleting a ref under `refs/orch/*`, pointing one at anything but a
//!   commit, or moving one to a commit that does not descend from its old
//!   value (git's `receive.denyNonFastForwards` does not cover them);
//! * malformed records: a log commit of `refs/orch/log/<writer>` without
//!   git-orch's trailers, or whose tree adds, against any parent, anything
//!   but event files `ev/<hi>/<mid>/<seq>-<blob8>.json` each holding a
//!   record of this format by that writer at that seq, at most
//!   [`MAX_EVENT_BYTES`]; a log commit that removes or rewrites an event; a
//!   plan ref whose revisions do not read back as canonical plans; an
//!   approval ref whose latest decision does not parse; a claim ref
//!   `refs/orch/claims/<run>/<task>` with ids that are not ids; a run start
//!   `refs/orch/starts/<plan>` that does not name that plan and a run;
//! * deleting a protected branch, moving it backwards or sideways, or
//!   moving it to commits `verify` rejects. Verification reads the server's
//!   state as it will be after the push: the log, plan and approval refs
//!   pushed together with the branch count
//!   ([`crate::store::Store::with_proposed_refs`]);
//! * a landing whose changes leave the owned globs of the subtasks it
//!   landed while the log says their scope gate passed: the hook re-reads
//!   the landing's diff and asks the same [`crate::plan::glob::Ownership`]
//!   the gate asked, so a log that does not match the content is caught.

use std::collections::HashSet;

use crate::event::{MAX_CLOCK, Record};
use crate::ids::{PlanId, RunId, TaskId, WriterId};
use crate::store::log::{LOG_PREFIX, event_path, parse_trailers};
use crate::store::refs::{ORCH_PREFIX, REMOTES_PREFIX};
use crate::store::view::ObjectKind;
use crate::store::{Oid, Store};

use super::policy::protection;
use super::{
    Decision, HookError, MAX_LISTED, Refusal, first_parent_commits, parse_hook_oid, verify_updates,
};

/// The largest event record the server accepts: the one limit every
/// reader of the log applies (see [`crate::event::MAX_EVENT_BYTES`]).
pub use crate::event::MAX_EVENT_BYTES;

/// One line of `pre-receive` input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiveLine {
    /// `None` when the ref is created.
    pub old: Option<Oid>,
    /// `None` when the ref is deleted.
    pub new: Option<Oid>,
    pub reference: String,
}

/// Parses `pre-receive` input; blank lines are ignored, anything else that
/// is not two object ids and a ref name is an error.
pub fn parse(store: &Store, input: &str) -> Result<Vec<ReceiveLine>, HookError> {
    let mut out = Vec::new();
    for (i, line) in input.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = || HookError::Input {
            hook: "pre-receive",
            line: i + 1,
            expected: "<old id> <new id> <ref>",
            text: line.chars().take(200).collect(),
        };
        let fields: Vec<&str> = line.split(' ').collect();
        let [old, new, reference] = fields[..] else {
            return Err(bad());
        };
        if !reference.starts_with("refs/") {
            return Err(bad());
        }
        out.push(ReceiveLine {
            old: parse_hook_oid(store, old).ok_or_else(bad)?,
            new: parse_hook_oid(store, new).ok_or_else(bad)?,
            reference: reference.to_owned(),
        });
    }
    Ok(out)
}

/// Brings the server's state cache up to date with its real refs and
/// saves it, before a push is judged: the judgement reads state through a
/// view of the push in progress, which never saves (what it folds is not
/// accepted yet), so without this each push would fold everything pushed
/// since the cache was last saved, and a server nobody reads state on
/// directly would read its whole history on every push. Takes `store`
/// before it is given the push's objects, so only accepted state is
/// cached. Best effort: the cache is only ever an optimisation, and
/// whatever stops it here stops the judgement with a clear error later.
pub fn warm_state(store: &Store) {
    if let Ok(mut index) = crate::state::StateIndex::open(store) {
        let _ = index.save();
    }
}

/// Judges one push into the repository of `store` (opened over the
/// push's quarantine).
pub fn decide(store: Store, lines: &[ReceiveLine]) -> Result<Decision, HookError> {
    let protected = protection(&store)?;
    // Commits on a protected branch now are not new to a protected branch
    // created by this push.
    let protected_tips: Vec<Oid> = store
        .refs_with_prefix("refs/heads/")?
        .into_iter()
        .filter(|(name, _)| protected.protects(name).is_some())
        .map(|(_, id)| id)
        .collect();
    let store = store.with_proposed_refs(lines.iter().map(|l| (l.reference.clone(), l.new)));
    let mut refusals = Vec::new();
    let mut updates: Vec<(String, Vec<Oid>)> = Vec::new();
    for line in lines {
        let refuse = |reason: String, hint: &str| Refusal {
            reference: line.reference.clone(),
            commit: None,
            reason,
            hint: hint.to_owned(),
        };
        if line.reference.starts_with(REMOTES_PREFIX) {
            refusals.push(refuse(
                format!(
                    "{} is a clone's private tracking copy and is never pushed",
                    line.reference
                ),
                "push refs/orch/* instead (`git orch sync` does)",
            ));
        } else if line.reference.starts_with(ORCH_PREFIX) {
            refusals.extend(check_orch_ref(&store, line)?);
        } else if let Some(branch) = protected.protects(&line.reference) {
            let Some(new) = line.new else {
                refusals.push(refuse(
                    format!("{branch} is protected by git-orch and may not be deleted"),
                    "protected branches are listed in orch.protect; see docs/hooks.md",
                ));
                continue;
            };
            let commits = match line.old {
                None => first_parent_commits(&store, new, &protected_tips)?,
                Some(old) if !store.is_ancestor(old, new)? => {
                    refusals.push(refuse(
                        format!("{branch} is protected by git-orch and only moves forward; this push rewrites it"),
                        "a protected branch only takes landings from the merge queue; do not force-push it",
                    ));
                    continue;
                }
                Some(old) => first_parent_commits(&store, new, &[old])?,
            };
            updates.push((line.reference.clone(), commits));
        }
    }
    for (reference, commits) in &updates {
        refusals.extend(scope_refusals(&store, reference, commits)?);
    }
    let mut decision = verify_updates(
        &store,
        &updates,
        "land changes through git-orch and push the log with them: `git push --atomic <remote> 'refs/orch/*' <branch>` (or `git orch sync`, then push the branch)",
    )?;
    refusals.append(&mut decision.refusals);
    decision.refusals = refusals;
    Ok(decision)
}

/// Checks one update under `refs/orch/`.
fn check_orch_ref(store: &Store, line: &ReceiveLine) -> Result<Vec<Refusal>, HookError> {
    let refuse = |reason: String, hint: &str| Refusal {
        reference: line.reference.clone(),
        commit: None,
        reason,
        hint: hint.to_owned(),
    };
    let append_only = "git-orch state is append-only; `git orch sync` integrates diverged state without rewriting it";
    let Some(new) = line.new else {
        return Ok(vec![refuse(
            format!("deleting {} would lose git-orch state", line.reference),
            append_only,
        )]);
    };
    match store.object_header(new)? {
        Some((ObjectKind::Commit, _)) => {}
        Some((kind, _)) => {
            return Ok(vec![refuse(
                format!(
                    "{} must point at a commit, not a {}",
                    line.reference,
                    kind.as_str()
                ),
                "git-orch refs hold commits written by git-orch",
            )]);
        }
        None => {
            return Ok(vec![refuse(
                format!(
                    "{} points at {new}, which the push did not send",
                    line.reference
                ),
                "push again; if it repeats, run `git fsck` in the pushing clone",
            )]);
        }
    }
    if let Some(old) = line.old
        && !store.is_ancestor(old, new)?
    {
        return Ok(vec![refuse(
            format!(
                "{} moves from {old} to {new}, which does not descend from it: the update would drop state",
                line.reference
            ),
            append_only,
        )]);
    }
    let rest = &line.reference[ORCH_PREFIX.len()..];
    let malformed = "git-orch writes these refs itself; push what `git orch sync` pushes, never hand-made commits";
    let mut out = Vec::new();
    if let Some(writer) = line.reference.strip_prefix(LOG_PREFIX) {
        if WriterId::new(writer).is_err() {
            out.push(refuse(
                format!("{} does not end in a writer id", line.reference),
                malformed,
            ));
        } else {
            let problems = check_log(store, writer, line.old, new)?;
            for p in problems.iter().take(MAX_LISTED) {
                out.push(refuse(p.clone(), malformed));
            }
            if problems.len() > MAX_LISTED {
                out.push(refuse(
                    format!("and {} more problems", problems.len() - MAX_LISTED),
                    malformed,
                ));
            }
        }
    } else if let Some(id) = rest.strip_prefix("plans/") {
        match PlanId::new(id) {
            Err(e) => out.push(refuse(format!("{}: {e}", line.reference), malformed)),
            Ok(id) => {
                if let Err(e) = crate::plan::revisions::all(store, &id) {
                    out.push(refuse(first_line(&e.to_string()), malformed));
                }
            }
        }
    } else if let Some(id) = rest.strip_prefix("approvals/") {
        match PlanId::new(id) {
            Err(e) => out.push(refuse(format!("{}: {e}", line.reference), malformed)),
            Ok(id) => {
                if let Err(e) = crate::approval::latest(store, &id) {
                    out.push(refuse(first_line(&e.to_string()), malformed));
                }
            }
        }
    } else if let Some(plan) = rest.strip_prefix("starts/") {
        match PlanId::new(plan) {
            Err(e) => out.push(refuse(format!("{}: {e}", line.reference), malformed)),
            Ok(_) => match store.read_run_start(new) {
                Ok(start) if start.plan == plan && RunId::new(&start.run).is_ok() => {}
                Ok(_) => out.push(refuse(
                    format!("{} names another plan or no valid run", line.reference),
                    malformed,
                )),
                Err(e) => out.push(refuse(first_line(&e.to_string()), malformed)),
            },
        }
    } else if let Some(claim) = rest.strip_prefix("claims/") {
        let ok = claim.split_once('/').is_some_and(|(run, what)| {
            RunId::new(run).is_ok()
                && (TaskId::new(what).is_ok() || what == crate::store::remote::QUEUE_CLAIM)
        });
        if !ok {
            out.push(refuse(
                format!(
                    "{} is not refs/orch/claims/<run>/<task> or refs/orch/claims/<run>/{}",
                    line.reference,
                    crate::store::remote::QUEUE_CLAIM
                ),
                malformed,
            ));
        } else if let Err(e) = store.read_claim(new) {
            out.push(refuse(first_line(&e.to_string()), malformed));
        }
    }
    Ok(out)
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().to_owned()
}

/// Everything wrong with the log commits a push adds to `writer`'s log
/// (`old..new`, or all of `new` for a new log).
fn check_log(
    store: &Store,
    writer: &str,
    old: Option<Oid>,
    new: Oid,
) -> Result<Vec<String>, HookError> {
    let range = match old {
        Some(old) => format!("{old}..{new}"),
        None => new.to_string(),
    };
    let listed = store.git().run(["rev-list", &range])?;
    let mut seen: HashSet<Oid> = HashSet::new();
    let mut problems = Vec::new();
    for line in listed.lines() {
        let commit = store.parse_oid(line.trim())?;
        let info = store.commit_info(commit)?;
        match parse_trailers(&info.message) {
            None => problems.push(format!(
                "log commit {commit} has no Orch-Seq/Orch-Clock trailers: git-orch did not write it"
            )),
            Some(pos) if pos.clock > MAX_CLOCK => problems.push(format!(
                "log commit {commit} carries clock {}, above the ceiling {MAX_CLOCK} no log reaches",
                pos.clock
            )),
            Some(_) => {}
        }
        let bases: Vec<Oid> = if info.parents.is_empty() {
            vec![store.empty_tree_id()]
        } else {
            info.parents
                .iter()
                .map(|p| store.commit_info(*p).map(|i| i.tree))
                .collect::<Result<_, _>>()?
        };
        for base in bases {
            for change in store.diff_trees(base, info.tree)? {
                let path = &change.path;
                let at = format!("log commit {commit}: {path}");
                if !path.starts_with("ev/") {
                    problems.push(format!("{at} is outside ev/; a log tree holds only events"));
                } else if change.symlink || change.submodule {
                    problems.push(format!("{at} is not a regular file"));
                } else if change.old.is_some() && change.new.is_none() {
                    problems.push(format!("{at} removes an event; the log is append-only"));
                } else if change.old.is_some() {
                    problems.push(format!("{at} rewrites an event; the log is append-only"));
                } else if let Some(blob) = change.new
                    && seen.insert(blob)
                    && let Some(problem) = check_event(store, writer, path, blob)?
                {
                    problems.push(format!("{at} {problem}"));
                }
            }
        }
        if problems.len() > MAX_LISTED {
            break;
        }
    }
    Ok(problems)
}

/// What is wrong with the event blob `blob` at `path` in `writer`'s log.
fn check_event(
    store: &Store,
    writer: &str,
    path: &str,
    blob: Oid,
) -> Result<Option<String>, HookError> {
    let size = match store.object_header(blob)? {
        Some((ObjectKind::Blob, size)) => size,
        Some((kind, _)) => return Ok(Some(format!("is a {}, not an event", kind.as_str()))),
        None => return Ok(Some("is missing from the push".into())),
    };
    if size > MAX_EVENT_BYTES {
        return Ok(Some(format!(
            "is {size} bytes; an event may be at most {MAX_EVENT_BYTES} bytes"
        )));
    }
    let record = match Record::from_json(&store.read_blob(blob)?) {
        Ok(r) => r,
        Err(why) => return Ok(Some(why.to_string())),
    };
    if record.clock > MAX_CLOCK {
        return Ok(Some(format!(
            "has clock {}, above the ceiling {MAX_CLOCK} no log reaches",
            record.clock
        )));
    }
    if record.writer.as_str() != writer {
        return Ok(Some(format!(
            "claims writer {} but sits in the log of {writer}",
            record.writer
        )));
    }
    let expected = event_path(record.seq, blob);
    if path != expected {
        return Ok(Some(format!(
            "holds seq {} of this blob, which belongs at {expected}",
            record.seq
        )));
    }
    Ok(None)
}

/// The paths of `changed` that none of `owners` owns: what a landing of
/// those subtasks may not change.
pub fn outside_owned<'p>(
    owners: &[crate::plan::glob::Ownership],
    changed: &'p [String],
) -> Vec<&'p str> {
    changed
        .iter()
        .map(String::as_str)
        .filter(|p| !owners.iter().any(|o| o.is_owned(p)))
        .collect()
}

/// Refusals for landings among `commits` (commits a protected branch
/// gains) that change paths outside the owned globs of the subtasks they
/// landed although each of those attempts' scope gate recorded a pass. A
/// scope gate set to `warn` or `skip` by the project is its choice, and is
/// honoured here too.
fn scope_refusals(
    store: &Store,
    reference: &str,
    commits: &[Oid],
) -> Result<Vec<Refusal>, HookError> {
    use crate::event::GateStatus;
    if commits.is_empty() {
        return Ok(Vec::new());
    }
    // The index of the log as the push would leave it: the cache of the
    // real refs (see [`warm_state`]) plus what the push adds, so the cost
    // follows the push, not the history.
    let mut index = crate::state::StateIndex::open(store)?;
    /// The tip before a landing, and the attempts it landed.
    type Landing = (String, Vec<(RunId, TaskId, u32)>);
    let mut landings: std::collections::HashMap<String, Landing> = Default::default();
    let mut runs: std::collections::HashMap<RunId, crate::state::RunState> = Default::default();
    for commit in commits {
        let hex = commit.to_string();
        let mut found: Option<Landing> = None;
        let mut voided = false;
        for run_id in index.runs_landing(&hex)? {
            let Some(run) = index.run(&run_id)?.cloned() else {
                continue;
            };
            for l in run.landings.iter().filter(|l| l.new.to_string() == hex) {
                voided |= l.voided;
                found
                    .get_or_insert_with(|| (l.old.to_string(), Vec::new()))
                    .1
                    .push((run_id.clone(), l.task.clone(), l.attempt));
            }
            runs.insert(run_id, run);
        }
        // A voided landing is not judged here: `verify` speaks for it.
        if let Some(landing) = found.filter(|_| !voided) {
            landings.insert(hex, landing);
        }
    }
    if landings.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for commit in commits {
        let Some((old, landed)) = landings.get(&commit.to_string()) else {
            continue;
        };
        let mut owners = Vec::new();
        let mut enforced = true;
        let mut names = Vec::new();
        for (run_id, task, n) in landed {
            let Some(run) = runs.get(run_id) else {
                enforced = false;
                break;
            };
            let passed = run
                .tasks
                .get(task)
                .and_then(|t| t.attempts.iter().find(|a| a.n == *n))
                .and_then(|a| a.verdicts.iter().rev().find(|v| v.gate == "scope"))
                .is_some_and(|v| v.status == GateStatus::Pass);
            let plan = crate::run::plan_of(store, run).ok();
            let ownership = plan
                .as_ref()
                .and_then(|p| p.plan.subtask(task.as_str()))
                .and_then(|s| crate::plan::glob::Ownership::new(&s.owned_globs).ok());
            match (passed, ownership) {
                (true, Some(o)) => owners.push(o),
                // Not judged in scope by the gate, or no plan to judge by:
                // `verify` speaks for it.
                _ => {
                    enforced = false;
                    break;
                }
            }
            names.push(format!("{run_id}/{task}"));
        }
        let Ok(old) = store.parse_oid(old) else {
            continue;
        };
        if !enforced {
            continue;
        }
        let changed: Vec<String> = store
            .diff_trees(
                store.commit_info(old)?.tree,
                store.commit_info(*commit)?.tree,
            )?
            .into_iter()
            .map(|c| c.path)
            .collect();
        let outside = outside_owned(&owners, &changed);
        if outside.is_empty() {
            continue;
        }
        let shown: Vec<&str> = outside.iter().take(MAX_LISTED).copied().collect();
        out.push(Refusal {
            reference: reference.to_owned(),
            commit: Some(commit.to_string()),
            reason: format!(
                "the landing {} of {} changes {} path(s) outside their owned globs ({}), though the log says their scope gate passed",
                &commit.to_string()[..12],
                names.join(", "),
                outside.len(),
                shown.join(", ")
            ),
            hint: "the log and the content disagree: land the work again through git-orch".into(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_landing_is_judged_by_the_ownership_table() {
        for (globs, path, owned) in crate::plan::glob::tests::ownership_cases() {
            let owners = [crate::plan::glob::Ownership::new(&globs).expect("valid")];
            let changed = [path.clone()];
            let outside = outside_owned(&owners, &changed);
            assert_eq!(outside.is_empty(), owned, "{globs:?} {path}");
        }
    }
}
