//! Publishing what a driver landed: a `git orch run` lands on this clone's
//! target branch only, and other clones (and workers, which start from the
//! remote's target) see it once it is pushed. This says how far the target
//! is ahead of the remote's, and pushes it (never forced) when asked.

use super::MergeError;
use crate::store::remote::Pushed;
use crate::store::{Oid, Store};

/// The target here against the remote's, as fetched now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    /// The remote has every commit of the target here.
    Published,
    /// The target here has `n` commits the remote's does not, on top of it.
    Ahead(usize),
    /// Both have commits the other lacks: a push would be refused.
    Diverged,
    /// The remote has no such branch.
    Missing,
}

/// Where `target` here stands against `remote`'s (fetched now).
pub fn standing(store: &Store, remote: &str, target: &str) -> Result<Standing, MergeError> {
    let ours = store
        .ref_target(&format!("refs/heads/{target}"))?
        .ok_or_else(|| MergeError::NoTarget {
            target: target.to_owned(),
        })?;
    let Some(theirs) = store.fetch_branch(remote, target)? else {
        return Ok(Standing::Missing);
    };
    Ok(compare(store, ours, theirs)?)
}

fn compare(store: &Store, ours: Oid, theirs: Oid) -> Result<Standing, crate::store::StoreError> {
    if store.is_ancestor(ours, theirs)? {
        return Ok(Standing::Published);
    }
    if !store.is_ancestor(theirs, ours)? {
        return Ok(Standing::Diverged);
    }
    Ok(Standing::Ahead(
        store.commits_only_in(&[ours], &[theirs])?.len(),
    ))
}

/// Pushes `target` to `remote` (a fast-forward only: never forced) and
/// returns how many commits that published.
pub fn push_target(store: &Store, remote: &str, target: &str) -> Result<usize, MergeError> {
    let ahead = match standing(store, remote, target)? {
        Standing::Published => return Ok(0),
        Standing::Ahead(n) => Some(n),
        Standing::Missing => None,
        Standing::Diverged => {
            return Err(MergeError::PushRefused {
                remote: remote.to_owned(),
                why: format!("{remote}/{target} has commits {target} here does not"),
            });
        }
    };
    let name = format!("refs/heads/{target}");
    let tip = store
        .ref_target(&name)?
        .ok_or_else(|| MergeError::NoTarget {
            target: target.to_owned(),
        })?;
    match store.push_atomic(remote, &[(tip, name)])? {
        Pushed::Accepted => Ok(ahead.unwrap_or_else(|| {
            store
                .commits_only_in(&[tip], &[])
                .map(|c| c.len())
                .unwrap_or(0)
        })),
        Pushed::Rejected(why) => Err(MergeError::PushRefused {
            remote: remote.to_owned(),
            why,
        }),
    }
}
