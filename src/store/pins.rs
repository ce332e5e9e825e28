//! Pins: commits this process works on before any state ref names them
//! (merge-queue candidates: built, checked out by git, gated for seconds,
//! and only then kept by a landing), held reachable so that a `git prune`
//! beside a run does not take them in between.
//!
//! One ref per process, `refs/orch-pins/<pid>`, outside `refs/orch/` so
//! that `sync` never shares it and no reader takes it for state: a commit
//! on the empty tree whose parents are the last [`PINNED`] pinned commits,
//! moved by compare-and-swap. It goes when the process ends
//! ([`super::durable::settle_all`]); one that a process which died left
//! is removed by the next pin of any process, and by `git orch fsck
//! --repair`. A prune whose walk began before the pin was made can still
//! take the objects once; the journal writes them again (see
//! [`super::durable`]).

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Mutex;

use super::error::Result;
use super::oid::Oid;
use super::refs::{Applied, Expected, RefUpdate};
use super::repository::Store;

/// Where pins live.
pub const PINS_PREFIX: &str = "refs/orch-pins/";
/// How many commits one process keeps pinned (the newest).
const PINNED: usize = 32;

/// The commits each repository's pin of this process holds.
fn pinned() -> &'static Mutex<HashMap<PathBuf, VecDeque<Oid>>> {
    static PINNED_BY_REPO: std::sync::OnceLock<Mutex<HashMap<PathBuf, VecDeque<Oid>>>> =
        std::sync::OnceLock::new();
    PINNED_BY_REPO.get_or_init(Default::default)
}

/// This process's pin ref.
fn own_pin() -> String {
    format!("{PINS_PREFIX}{}", std::process::id())
}

/// Whether process `pid` is alive (or belongs to someone else).
fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    pid > 0
        && (unsafe { libc::kill(pid, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM))
}

impl Store {
    /// Keeps `commits` reachable from this process's pin ref until it ends
    /// (or until [`PINNED`] newer ones were pinned).
    pub fn pin(&self, commits: &[Oid]) -> Result<()> {
        if commits.is_empty() || self.is_view() {
            return Ok(());
        }
        let name = own_pin();
        let first = {
            let mut all = pinned().lock().unwrap_or_else(|e| e.into_inner());
            let first = !all.contains_key(self.common_dir());
            let list = all.entry(self.common_dir().to_owned()).or_default();
            for c in commits {
                if !list.contains(c) {
                    list.push_back(*c);
                }
            }
            while list.len() > PINNED {
                list.pop_front();
            }
            first
        };
        if first {
            self.remove_dead_pins()?;
        }
        for attempt in 0..super::lock::MAX_TRIES {
            let parents: Vec<Oid> = pinned()
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(self.common_dir())
                .map(|l| l.iter().copied().collect())
                .unwrap_or_default();
            let tree = self.write_empty_tree()?;
            let commit =
                self.write_commit("pin: commits git-orch is working on", tree, &parents)?;
            let now = self.ref_target(&name)?;
            let update = RefUpdate::set(&name, commit, Expected::from_read(now), "orch: pin");
            if self.apply(&[update])? == Applied::Done {
                return Ok(());
            }
            super::lock::backoff(attempt);
        }
        Err(super::error::StoreError::Contention {
            reference: name,
            attempts: super::lock::MAX_TRIES,
        })
    }

    /// Removes this process's pin ref.
    pub fn unpin_all(&self) -> Result<()> {
        let name = own_pin();
        pinned()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(self.common_dir());
        if let Some(now) = self.ref_target(&name)? {
            self.apply(&[RefUpdate::delete(&name, now, "orch: unpin")])?;
        }
        Ok(())
    }

    /// The pins of processes that are gone (a crash, a SIGKILL), with
    /// their values.
    pub fn dead_pins(&self) -> Result<Vec<(String, Oid)>> {
        Ok(self
            .refs_with_prefix(PINS_PREFIX)?
            .into_iter()
            .filter(|(name, _)| !alive(name[PINS_PREFIX.len()..].parse::<i32>().unwrap_or(0)))
            .collect())
    }

    /// Removes the pins of processes that are gone; returns their names.
    pub fn remove_dead_pins(&self) -> Result<Vec<String>> {
        let mut removed = Vec::new();
        for (name, id) in self.dead_pins()? {
            if self.apply(&[RefUpdate::delete(
                &name,
                id,
                "orch: remove a dead process's pin",
            )])? == Applied::Done
            {
                removed.push(name);
            }
        }
        Ok(removed)
    }

    /// The repositories this process pinned commits in.
    pub(super) fn pinned_repositories() -> Vec<PathBuf> {
        pinned()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect()
    }
}
