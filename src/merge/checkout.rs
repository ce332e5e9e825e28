//! The user's checkouts of the target: moving them with the target the way
//! `git merge` would, and never losing a byte of theirs.
//!
//! A landing may move the target only when, in every working tree that
//! has it checked out, none of the paths the landing changes is modified,
//! staged or untracked; other edits and untracked files stay as they are.
//! Otherwise it refuses and names the paths. After the target moves, each
//! clean checkout is moved from the old tree to the new with a two-tree
//! `git read-tree -m -u`, which updates exactly the changed paths.
//!
//! Between moving the target and moving a checkout, a crash would leave
//! the checkout at the old tree under the new commit: it would look like
//! the user had reverted the landing. So before the target moves, a
//! marker `.git/orch/checkouts/<hash of the path>.json` records (path,
//! old, new); it goes when the checkout has moved. The next landing (or
//! `git orch fsck`) finds markers left behind and finishes what they
//! describe, or explains what state the checkout is in and the command
//! that finishes it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::MergeError;
use crate::process::Git;
use crate::run::progress::LandingProblem;
use crate::store::{Oid, Store};

/// A checkout being moved from `old` to `new`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Move {
    pub path: PathBuf,
    /// The branch checked out there (a full ref name).
    pub branch: String,
    pub old: String,
    pub new: String,
}

impl Move {
    /// The command that finishes the move by hand.
    pub fn fix(&self) -> String {
        format!(
            "git -C '{}' read-tree -m -u {} {}",
            self.path.display(),
            self.old,
            self.new
        )
    }
}

fn markers_dir(store: &Store) -> PathBuf {
    store.orch_dir().join("checkouts")
}

fn marker_path(store: &Store, path: &Path) -> PathBuf {
    let hash = blake3::hash(path.to_string_lossy().as_bytes());
    markers_dir(store).join(format!("{}.json", &hash.to_hex()[..16]))
}

/// Why a landing may not move the target: the checkout and the paths in
/// the way.
pub fn blocking_paths(
    store: &Store,
    target_ref: &str,
    old: Oid,
    new: Oid,
) -> Result<Option<LandingProblem>, MergeError> {
    let checkouts = store.checkouts_of(target_ref)?;
    if checkouts.is_empty() {
        return Ok(None);
    }
    let changed: std::collections::HashSet<String> = store
        .diff_trees(store.commit_info(old)?.tree, store.commit_info(new)?.tree)?
        .into_iter()
        .map(|c| c.path)
        .collect();
    let branch = target_ref.trim_start_matches("refs/heads/");
    for path in checkouts {
        let in_the_way: Vec<String> = store
            .dirty_paths(&path)?
            .into_iter()
            .filter(|(p, _)| changed.contains(p) || changed.iter().any(|c| under(c, p)))
            .map(|(p, untracked)| {
                if untracked {
                    format!("{p} (untracked)")
                } else {
                    p
                }
            })
            .collect();
        if !in_the_way.is_empty() {
            let shown: Vec<&str> = in_the_way.iter().take(10).map(String::as_str).collect();
            let more = in_the_way.len().saturating_sub(shown.len());
            return Ok(Some(LandingProblem::CheckoutInTheWay {
                branch: branch.to_owned(),
                checkout: path,
                paths: shown.into_iter().map(str::to_owned).collect(),
                more,
            }));
        }
    }
    Ok(None)
}

/// Whether `path` is inside the folder `dir` (`git status` names an
/// untracked folder, not its files, in some modes).
fn under(path: &str, dir: &str) -> bool {
    dir.ends_with('/') && path.starts_with(dir)
}

/// Records that the checkouts of `target_ref` are about to move from
/// `old` to `new`; call before moving the target.
pub fn begin(store: &Store, target_ref: &str, old: Oid, new: Oid) -> Result<Vec<Move>, MergeError> {
    let mut moves = Vec::new();
    for path in store.checkouts_of(target_ref)? {
        let m = Move {
            path: path.clone(),
            branch: target_ref.to_owned(),
            old: old.to_string(),
            new: new.to_string(),
        };
        let file = marker_path(store, &path);
        let io = |e| {
            MergeError::Store(crate::store::StoreError::io(
                format!("writing {}", file.display()),
                e,
            ))
        };
        std::fs::create_dir_all(markers_dir(store)).map_err(io)?;
        std::fs::write(&file, serde_json::to_vec(&m).expect("moves serialise")).map_err(io)?;
        moves.push(m);
    }
    Ok(moves)
}

/// Forgets moves that will not happen (the target did not move).
pub fn cancel(store: &Store, moves: &[Move]) {
    for m in moves {
        let _ = std::fs::remove_file(marker_path(store, &m.path));
    }
}

/// Moves each checkout; returns a message for each that could not be
/// moved (its marker stays, for `recover` and `git orch fsck`).
pub fn finish(store: &Store, moves: &[Move]) -> Vec<LandingProblem> {
    let mut problems = Vec::new();
    for m in moves {
        // The new tip's objects may be ones git-orch just wrote and a
        // prune beside it took: `retrying` writes them again.
        let moved = store
            .retrying(|| Ok(Git::new(&m.path).run(["read-tree", "-m", "-u", &m.old, &m.new])?));
        match moved {
            Ok(_) => {
                let _ = std::fs::remove_file(marker_path(store, &m.path));
            }
            Err(e) => problems.push(LandingProblem::CheckoutNotMoved {
                branch: m.branch.trim_start_matches("refs/heads/").to_owned(),
                checkout: m.path.clone(),
                old: m.old.clone(),
                new: m.new.clone(),
                why: e.to_string(),
                fix: m.fix(),
            }),
        }
    }
    problems
}

/// Moves left behind by a process that died between moving the target and
/// moving a checkout.
pub fn pending(store: &Store) -> Vec<Move> {
    let Ok(entries) = std::fs::read_dir(markers_dir(store)) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| serde_json::from_slice(&std::fs::read(e.path()).ok()?).ok())
        .collect()
}

/// Finishes or forgets the moves left behind: a checkout whose branch is
/// at the move's new commit is moved (when its index still holds the old
/// tree); one whose branch never moved is forgotten. Returns what could
/// not be finished.
pub fn recover(store: &Store) -> Result<Vec<LandingProblem>, MergeError> {
    let mut problems = Vec::new();
    for m in pending(store) {
        let tip = store.ref_target(&m.branch)?.map(|t| t.to_string());
        let still_checked_out = store.checkouts_of(&m.branch)?.contains(&m.path);
        if tip.as_deref() != Some(m.new.as_str()) || !still_checked_out {
            // The target never moved there, or moved on and the person
            // has handled the checkout since: nothing of ours to finish.
            cancel(store, std::slice::from_ref(&m));
            continue;
        }
        problems.extend(finish(store, std::slice::from_ref(&m)));
    }
    Ok(problems)
}
