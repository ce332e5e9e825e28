//! Building a candidate: an attempt's work on top of a commit of the
//! target, in memory, with one of three strategies.
//!
//! * **rebase** (default): each commit of the attempt (base..result, first
//!   parents) is replayed onto the target, keeping its author and message:
//!   linear history.
//! * **merge**: one merge commit with the target and the attempt's result as
//!   parents.
//! * **squash**: one commit on the target holding the attempt's whole
//!   change, titled by the subtask, with trailers naming run, task, attempt
//!   and plan hash.
//!
//! Every step is a three-way tree merge in gix; a conflict stops the build
//! and is returned with its paths and hunks. Nothing touches a working tree.

use crate::plan::Subtask;
use crate::store::merge::{MergeConflict, TreeMerge};
use crate::store::{Oid, Store, StoreError};

/// How attempts land.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    Rebase,
    Merge,
    Squash,
}

impl Strategy {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "rebase" => Some(Strategy::Rebase),
            "merge" => Some(Strategy::Merge),
            "squash" => Some(Strategy::Squash),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Rebase => "rebase",
            Strategy::Merge => "merge",
            Strategy::Squash => "squash",
        }
    }
}

/// One passed attempt waiting to land.
#[derive(Debug, Clone)]
pub struct Entry {
    pub task: Subtask,
    pub attempt: u32,
    /// The commit the attempt started from.
    pub base: Oid,
    /// Its result commit.
    pub result: Oid,
}

impl Entry {
    /// `task/attempt`, as events name it.
    pub fn label(&self) -> String {
        format!("{}/{}", self.task.id, self.attempt)
    }
}

/// A built candidate, or why there is none.
#[derive(Debug, Clone)]
pub enum Built {
    /// The new tip and the commits it adds, oldest first.
    Commits {
        tip: Oid,
        commits: Vec<Oid>,
    },
    Conflict(Vec<MergeConflict>),
}

/// What the commit messages name.
pub struct Names<'a> {
    pub run: &'a str,
    pub plan_id: &'a str,
    pub plan_hash: &'a str,
}

fn trailers(entry: &Entry, names: &Names) -> String {
    format!(
        "Orch-Run: {}\nOrch-Task: {}\nOrch-Attempt: {}\nOrch-Plan: {}\nOrch-Plan-Hash: {}\n",
        names.run, entry.task.id, entry.attempt, names.plan_id, names.plan_hash
    )
}

fn merge(store: &Store, base: Oid, ours: Oid, theirs: Oid) -> Result<TreeMerge, StoreError> {
    store.merge_trees(base, ours, theirs, ["base", "target", "attempt"])
}

/// Builds `entry` on top of `onto` with `strategy`.
pub fn build(
    store: &Store,
    strategy: Strategy,
    onto: Oid,
    entry: &Entry,
    names: &Names,
) -> Result<Built, StoreError> {
    let onto_tree = store.commit_info(onto)?.tree;
    let result = store.commit_info(entry.result)?;
    let author = (
        result.author_name.as_str(),
        result.author_email.as_str(),
        result.time,
        0,
    );
    match strategy {
        Strategy::Rebase => {
            let mut current = onto;
            let mut current_tree = onto_tree;
            let mut commits = Vec::new();
            for c in store.first_parent_range(entry.base, entry.result)? {
                let info = store.commit_info(c)?;
                let parent_tree = match info.parents.first() {
                    Some(p) => store.commit_info(*p)?.tree,
                    None => store.empty_tree_id(),
                };
                let tree = match merge(store, parent_tree, current_tree, info.tree)? {
                    TreeMerge::Clean(t) => t,
                    TreeMerge::Conflicts(c) => return Ok(Built::Conflict(c)),
                };
                let new = store.write_commit_by(
                    (&info.author_name, &info.author_email, info.time, 0),
                    &info.message,
                    tree,
                    &[current],
                )?;
                commits.push(new);
                current = new;
                current_tree = tree;
            }
            Ok(Built::Commits {
                tip: current,
                commits,
            })
        }
        Strategy::Squash | Strategy::Merge => {
            let base_tree = store.commit_info(entry.base)?.tree;
            let tree = match merge(store, base_tree, onto_tree, result.tree)? {
                TreeMerge::Clean(t) => t,
                TreeMerge::Conflicts(c) => return Ok(Built::Conflict(c)),
            };
            let (message, parents) = if strategy == Strategy::Squash {
                (
                    format!(
                        "{}\n\n{}\n\n{}",
                        entry.task.title,
                        entry.task.deliverable,
                        trailers(entry, names)
                    ),
                    vec![onto],
                )
            } else {
                (
                    format!(
                        "Merge {} attempt {} of run {}\n\n{}\n\n{}",
                        entry.task.id,
                        entry.attempt,
                        names.run,
                        entry.task.title,
                        trailers(entry, names)
                    ),
                    vec![onto, entry.result],
                )
            };
            let tip = store.write_commit_by(author, &message, tree, &parents)?;
            Ok(Built::Commits {
                tip,
                commits: vec![tip],
            })
        }
    }
}
