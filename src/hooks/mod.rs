//! Git hook gates: the hooks that make git itself refuse what git-orch
//! would not have done.
//!
//! This module owns installing and removing the hook shims ([`install`]),
//! which branches are protected ([`policy`]), and the decisions of each
//! hook as plain verdicts: the client's `pre-push` ([`push`]), the
//! server's `pre-receive` ([`receive`]) and the scope check of commits in
//! attempt worktrees ([`commit`]). It reads hook input as text handed to
//! it and never prints; `cli::hook` reads stdin and renders the verdicts.
//! It never updates a ref: a hook only says yes or no.

pub mod commit;
pub mod install;
pub mod policy;
pub mod push;
pub mod receive;

use crate::process::ProcessError;
use crate::store::{Oid, Store, StoreError};

/// What stops a hook from reaching a verdict, or an install from finishing.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error("line {line} of the {hook} hook's input is not `{expected}`: {text:?}")]
    Input {
        hook: &'static str,
        line: usize,
        expected: &'static str,
        text: String,
    },
    /// A hook file is not git-orch's, and the place its own hook would be
    /// chained from already holds another.
    #[error("{} is not git-orch's hook, and {} already holds another one", hook.display(), chained.display())]
    Replaced {
        hook: std::path::PathBuf,
        chained: std::path::PathBuf,
    },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    Process(#[from] ProcessError),
    /// The recorded state cannot answer (a run whose plan is missing).
    #[error("{0}")]
    State(String),
    /// The owned globs of the attempt's subtask cannot be read: the hook
    /// fails closed.
    #[error("{0}")]
    Globs(#[source] crate::plan::glob::OwnershipError),
}

impl HookError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        HookError::Io {
            context: context.into(),
            source,
        }
    }
}

/// One ref a hook refuses, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The full ref name, e.g. `refs/heads/main`.
    pub reference: String,
    /// The commit at fault, when one commit is.
    pub commit: Option<String>,
    /// One sentence: what is wrong.
    pub reason: String,
    /// What to do about it.
    pub hint: String,
}

/// A hook's answer: accept the push unless anything was refused.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decision {
    pub refusals: Vec<Refusal>,
    /// Protected refs checked, with the number of commits verified for each.
    pub verified: Vec<(String, usize)>,
}

impl Decision {
    pub fn accepted(&self) -> bool {
        self.refusals.is_empty()
    }
}

/// An object id from hook input; `None` for git's all-zero id (a ref that
/// does not exist on one side).
pub(crate) fn parse_hook_oid(store: &Store, text: &str) -> Option<Option<Oid>> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    if text.bytes().all(|b| b == b'0') {
        return Some(None);
    }
    store.parse_oid(text).ok().map(Some)
}

/// Most refusals listed for one ref; the rest are counted.
pub const MAX_LISTED: usize = 10;

/// The commits a protected branch gains: the first-parent chain from `new`
/// down to (not including) the first commit reachable from one of
/// `known`. Only the first-parent chain is checked: those are the commits
/// the branch itself points at over time. The second parents of a landed
/// merge commit are the attempt's own commits, vouched for by that merge.
pub(crate) fn first_parent_commits(
    store: &Store,
    new: Oid,
    known: &[Oid],
) -> Result<Vec<Oid>, HookError> {
    let mut args = vec![
        "rev-list".to_owned(),
        "--first-parent".into(),
        new.to_string(),
    ];
    if !known.is_empty() {
        args.push("--not".into());
        args.extend(known.iter().map(Oid::to_string));
    }
    let out = store.git().run(&args)?;
    let mut commits = out
        .lines()
        .map(|l| store.parse_oid(l.trim()))
        .collect::<Result<Vec<_>, _>>()?;
    commits.reverse();
    Ok(commits)
}

/// Verifies the commits each protected ref gains and turns every failure
/// into a refusal naming the commit, oldest first.
pub(crate) fn verify_updates(
    store: &Store,
    updates: &[(String, Vec<Oid>)],
    hint: &str,
) -> Result<Decision, HookError> {
    let mut decision = Decision::default();
    let all: Vec<Oid> = updates
        .iter()
        .flat_map(|(_, c)| c.iter().copied())
        .collect();
    if all.is_empty() {
        decision.verified = updates.iter().map(|(r, _)| (r.clone(), 0)).collect();
        return Ok(decision);
    }
    let require_signed = store
        .config_get("orch.requireSignedApprovals")?
        .is_some_and(|v| v == "true");
    let results = crate::merge::verify::verify(store, &all, require_signed)?;
    let by_commit: std::collections::HashMap<String, &crate::merge::verify::Verification> =
        results.iter().map(|v| (v.commit.clone(), v)).collect();
    for (reference, commits) in updates {
        decision.verified.push((reference.clone(), commits.len()));
        let failed: Vec<&crate::merge::verify::Verification> = commits
            .iter()
            .filter_map(|c| by_commit.get(&c.to_string()).copied())
            .filter(|v| !v.ok)
            .collect();
        for v in failed.iter().take(MAX_LISTED) {
            let subject = store
                .parse_oid(&v.commit)
                .and_then(|id| store.commit_info(id))
                .map(|i| i.message.lines().next().unwrap_or_default().to_owned())
                .unwrap_or_default();
            decision.refusals.push(Refusal {
                reference: reference.clone(),
                commit: Some(v.commit.clone()),
                reason: format!(
                    "commit {} ({subject:?}) is not a verified git-orch landing: {}",
                    &v.commit[..12.min(v.commit.len())],
                    v.reason
                ),
                hint: hint.to_owned(),
            });
        }
        if failed.len() > MAX_LISTED {
            decision.refusals.push(Refusal {
                reference: reference.clone(),
                commit: None,
                reason: format!(
                    "and {} more commits that do not verify",
                    failed.len() - MAX_LISTED
                ),
                hint: hint.to_owned(),
            });
        }
    }
    Ok(decision)
}
