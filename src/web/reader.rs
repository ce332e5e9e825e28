//! The state a page reads: the repository and the folded log, shared by
//! every request of one server, and never written.
//!
//! The index is opened with [`StateIndex::open_read_only`]: it starts from
//! the state cache when one is there and folds what the log gained since in
//! memory, never saving, so serving leaves no trace under `.git`. Each
//! request brings it up to date first (comparing log tips costs a ref
//! listing), so a page is never older than the log when it was asked for.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::error::PageError;
use super::href::Links;
use crate::state::StateIndex;
use crate::store::{Store, StoreError};

/// What a page renders from.
pub struct Ctx<'a> {
    pub store: &'a Store,
    pub index: &'a mut StateIndex,
    pub links: &'a Links,
}

/// The repository and its folded log, for every request.
#[derive(Clone)]
pub struct Reader {
    /// The repository's git directory.
    dir: PathBuf,
    index: Arc<Mutex<StateIndex>>,
    links: Links,
}

impl Reader {
    /// Folds `store`'s log (from the cache when there is one), read-only.
    pub fn open(store: &Store, links: Links) -> Result<Self, StoreError> {
        Ok(Self {
            dir: store.common_dir().to_owned(),
            index: Arc::new(Mutex::new(StateIndex::open_read_only(store)?)),
            links,
        })
    }

    pub fn links(&self) -> &Links {
        &self.links
    }

    /// Brings the index up to date, then lets `f` read. Runs on the
    /// calling thread (a blocking one): the store is this thread's kept
    /// handle of the repository.
    pub fn read<T>(
        &self,
        f: impl FnOnce(&mut Ctx<'_>) -> Result<T, PageError>,
    ) -> Result<T, PageError> {
        Store::with_reused(&self.dir, |store| {
            let mut index = self.index.lock().unwrap_or_else(|e| e.into_inner());
            index.refresh(store)?;
            let mut ctx = Ctx {
                store,
                index: &mut index,
                links: &self.links,
            };
            let out = f(&mut ctx);
            // What a page loaded and the cache holds is read again when
            // needed: the server's memory stays that of the runs in play.
            index.trim();
            out
        })?
    }

    /// Folds what the log gained; whether it gained anything.
    pub fn refresh(&self) -> Result<bool, StoreError> {
        Store::with_reused(&self.dir, |store| {
            let mut index = self.index.lock().unwrap_or_else(|e| e.into_inner());
            index.refresh(store)
        })?
    }
}
