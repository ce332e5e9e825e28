//! The git-native state store: the only module that uses gix.
//!
//! Everything git-orch remembers is a git object reachable from `refs/orch/*`
//! (plus the derived `refs/notes/orch`). This module owns opening the
//! repository, the append-only event log ([`log`]), compare-and-swap ref
//! updates ([`refs`]), the keep ref and plan refs, notes ([`notes`]), the
//! advisory lock ([`lock`]), configuration ([`config`]) and sharing through a
//! remote ([`sync`]). It knows nothing of what plans or runs mean; the layers
//! above hand it bytes and events.
//!
//! Every ref update states the value it expects to replace
//! (`MustExistAndMatch` or `MustNotExist`); a lost race is redone from a
//! fresh read, never forced.

pub mod config;
pub mod durability;
pub mod durable;
pub mod error;
pub mod lock;
pub mod log;
pub mod merge;
pub mod notes;
pub mod objects;
pub mod oid;
pub mod pins;
pub mod quarantine;
pub mod refs;
pub mod remote;
pub mod repair;
pub mod repository;
pub mod scratch;
pub mod sync;
pub mod tip;
pub mod view;
pub mod worktrees;

pub(crate) use error::is_object_damage;
pub use error::{GitError, StoreError};
pub use merge::CommitStep;
pub use oid::{BadOid, Oid};
pub use repository::{ORCH_EMAIL, ORCH_NAME, Store};
