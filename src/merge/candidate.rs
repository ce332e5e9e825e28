//! Building a candidate: an attempt's work on top of a commit of the
//! target, in memory, with one of three strategies.
//!
//! * **squash** (default): one commit per subtask whose tree is the gated
//!   tree merged onto the target (the agent's own commits folded in). Its
//!   subject is the subtask's title, its body the deliverable, and its
//!   trailers name plan, revision and hash, run, task, attempt and
//!   approver, with the agent as `Co-authored-by`. Its author is the person
//!   who started the run, and so is its committer unless `[land]
//!   committer = git-orch`. The message follows `[land] subject`/`body`.
//! * **rebase**: each commit of the attempt (base..result, first parents)
//!   is replayed onto the target, keeping its author and message, with the
//!   landing person as committer; commits that change nothing are left
//!   out. Every one of them passed the content gates.
//! * **merge**: one merge commit with the target and the attempt's result
//!   as parents, written like a squash commit.
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
    /// The agent that wrote it.
    pub agent: String,
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

/// What the commits a landing writes say, and who they are by.
pub struct Names<'a> {
    pub run: &'a str,
    pub plan_id: &'a str,
    pub plan_hash: &'a str,
    pub revision: u32,
    /// Who approved the plan revision.
    pub approver: &'a str,
    /// The author (name, email): the person who started the run.
    pub author: (&'a str, &'a str),
    /// The committer (name, email).
    pub committer: (&'a str, &'a str),
    pub land: &'a crate::config::LandSettings,
}

fn fill(template: &str, entry: &Entry, names: &Names) -> String {
    template
        .replace("{title}", &entry.task.title)
        .replace("{deliverable}", &entry.task.deliverable)
        .replace("{task}", entry.task.id.as_str())
        .replace("{plan}", names.plan_id)
        .replace("{run}", names.run)
        .replace("{attempt}", &entry.attempt.to_string())
        .replace("{agent}", &entry.agent)
}

fn trailers(entry: &Entry, names: &Names) -> String {
    let agent = &entry.agent;
    format!(
        "Orch-Plan: {} revision {}\nOrch-Plan-Hash: {}\nOrch-Run: {}\nOrch-Task: {}\nOrch-Attempt: {}\nOrch-Approved-By: {}\nCo-authored-by: {agent} (coding agent) <{agent}@agents.git-orch.invalid>\n",
        names.plan_id,
        names.revision,
        names.plan_hash,
        names.run,
        entry.task.id,
        entry.attempt,
        names.approver
    )
}

/// The message of the one commit a subtask lands as: subject, body,
/// trailers. `agent_subject` is the subject of the agent's one commit, when
/// it made exactly one.
fn message(entry: &Entry, names: &Names, agent_subject: Option<&str>) -> String {
    let subject = match agent_subject {
        Some(s) if names.land.agent_subject && !s.trim().is_empty() => s.trim().to_owned(),
        _ => fill(&names.land.subject, entry, names),
    };
    // A subject is one line.
    let subject = subject.lines().next().unwrap_or_default().to_owned();
    let body = fill(&names.land.body, entry, names);
    let body = body.trim();
    if body.is_empty() {
        format!("{subject}\n\n{}", trailers(entry, names))
    } else {
        format!("{subject}\n\n{body}\n\n{}", trailers(entry, names))
    }
}

/// The subject of the agent's commit when the attempt is exactly one
/// commit of its own (not git-orch's result commit).
fn only_agent_subject(store: &Store, entry: &Entry) -> Result<Option<String>, StoreError> {
    let range = store.first_parent_range(entry.base, entry.result)?;
    let own: Vec<_> = range
        .iter()
        .map(|c| store.commit_info(*c))
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .filter(|i| !i.message.contains("\nOrch-Run: "))
        .collect();
    Ok(match own.as_slice() {
        [one] => one.message.lines().next().map(str::to_owned),
        _ => None,
    })
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
    let built = build_unpinned(store, strategy, onto, entry, names)?;
    // Nothing names a candidate until it lands: pinned, a `git prune`
    // beside the queue cannot take it while git checks it out and the
    // gates judge it.
    if let Built::Commits { tip, .. } = &built
        && *tip != onto
    {
        store.pin(&[*tip])?;
    }
    Ok(built)
}

/// How far back on the target's first-parent chain a landing whose
/// record was lost is looked for.
const LOST_LANDING_DEPTH: usize = 256;

/// The commit on the target (`onto` and its first parents, down to the
/// attempt's base) that git-orch already landed for `entry` when a crash
/// lost the record of that landing with the log's newest writes: its
/// trailers name exactly this run, task and attempt, and its content is
/// exactly what `strategy` makes of the attempt on its parent (so a
/// commit that only borrows the trailers is never taken for it). Only
/// squash and merge landings carry trailers.
fn lost_landing(
    store: &Store,
    strategy: Strategy,
    onto: Oid,
    entry: &Entry,
    names: &Names,
) -> Result<Option<Oid>, StoreError> {
    if strategy == Strategy::Rebase {
        return Ok(None);
    }
    let wanted = [
        format!("Orch-Run: {}", names.run),
        format!("Orch-Task: {}", entry.task.id),
        format!("Orch-Attempt: {}", entry.attempt),
    ];
    let mut at = onto;
    for _ in 0..LOST_LANDING_DEPTH {
        if at == entry.base {
            return Ok(None);
        }
        let info = store.commit_info(at)?;
        let Some(&parent) = info.parents.first() else {
            return Ok(None);
        };
        let lines: Vec<&str> = info.message.lines().collect();
        if wanted.iter().all(|w| lines.contains(&w.as_str())) {
            let expected_parents = match strategy {
                Strategy::Merge => vec![parent, entry.result],
                _ => vec![parent],
            };
            let result_tree = store.commit_info(entry.result)?.tree;
            let base_tree = store.commit_info(entry.base)?.tree;
            let parent_tree = store.commit_info(parent)?.tree;
            let same = info.parents == expected_parents
                && matches!(
                    merge(store, base_tree, parent_tree, result_tree)?,
                    TreeMerge::Clean(t) if t == info.tree
                );
            return Ok(same.then_some(at));
        }
        at = parent;
    }
    Ok(None)
}

fn build_unpinned(
    store: &Store,
    strategy: Strategy,
    onto: Oid,
    entry: &Entry,
    names: &Names,
) -> Result<Built, StoreError> {
    // Landed before a crash cut the record: recorded now, nothing moves.
    if let Some(landed) = lost_landing(store, strategy, onto, entry, names)? {
        return Ok(Built::Commits {
            tip: onto,
            commits: vec![landed],
        });
    }
    let onto_tree = store.commit_info(onto)?.tree;
    let now = crate::clock::now_secs();
    let author = (names.author.0, names.author.1, now, 0);
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
                if tree == current_tree {
                    // Never an empty commit on the target.
                    continue;
                }
                // Each commit keeps its author, date and time zone; the
                // committer is the lander.
                let new = store.write_commit_as(
                    (
                        &info.author_name,
                        &info.author_email,
                        info.author_time,
                        info.author_offset,
                    ),
                    names.committer,
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
            let result = store.commit_info(entry.result)?;
            let base_tree = store.commit_info(entry.base)?.tree;
            let tree = match merge(store, base_tree, onto_tree, result.tree)? {
                TreeMerge::Clean(t) => t,
                TreeMerge::Conflicts(c) => return Ok(Built::Conflict(c)),
            };
            if strategy == Strategy::Squash && tree == onto_tree {
                // The target has all of it already: nothing to land.
                return Ok(Built::Commits {
                    tip: onto,
                    commits: Vec::new(),
                });
            }
            let agent_subject = if names.land.agent_subject {
                only_agent_subject(store, entry)?
            } else {
                None
            };
            let message = message(entry, names, agent_subject.as_deref());
            let parents = if strategy == Strategy::Squash {
                vec![onto]
            } else {
                vec![onto, entry.result]
            };
            let tip = store.write_commit_as(author, names.committer, &message, tree, &parents)?;
            Ok(Built::Commits {
                tip,
                commits: vec![tip],
            })
        }
    }
}
