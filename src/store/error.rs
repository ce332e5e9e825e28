//! What goes wrong in the store ([`StoreError`]), with gix's own errors
//! kept as sources, and the helpers that make such errors from gix's.

use std::path::{Path, PathBuf};

use crate::process::ProcessError;

use super::oid::Oid;

/// How gix says a store's object database has no room for another pack
/// index.
pub(super) const SLOTS_EXHAUSTED: &str = "too few index slots";

/// Bumped whenever an object database ran out of index slots: shared and
/// kept handles opened before are dropped at their next use.
pub(super) static ODB_GENERATION: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(0);

pub(super) fn odb_generation() -> u64 {
    ODB_GENERATION.load(std::sync::atomic::Ordering::SeqCst)
}

/// What went wrong in the store, with enough context to act on. The
/// texts say what is wrong; what to do about it is the CLI's hint
/// (`cli::error`), chosen by the variant.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("not a git repository: {path}")]
    NotARepository { path: PathBuf },
    #[error(
        "the repository at {path} stores refs in the reftable format, which git-orch does not support yet"
    )]
    Reftable { path: PathBuf },
    #[error("a lock file blocks updating {reference}: {path}")]
    StaleLock { reference: String, path: PathBuf },
    #[error("another git-orch process ({holder}) has held {path} for {seconds}s")]
    Busy {
        path: PathBuf,
        holder: String,
        seconds: u64,
    },
    #[error("{reference} kept changing under this update ({attempts} tries)")]
    Contention { reference: String, attempts: u32 },
    #[error("{0}")]
    InvalidRefName(String),
    /// gix failed; its error is kept whole as the source.
    #[error("{context}: {source}")]
    Git {
        context: String,
        #[source]
        source: GitError,
    },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Process(#[from] ProcessError),
    /// A record git-orch reads back is malformed: a claim, a start, an
    /// object id, a merge result it cannot use.
    #[error("{0}")]
    Corrupt(String),
    #[error(
        "refusing to update {reference}: this repository handle is a read-only view of a push in progress"
    )]
    ReadOnlyView { reference: String },
    /// A ref whose file holds no object id, or whose objects are missing
    /// or unreadable: what a crash that lost writes, or a prune beside an
    /// older git-orch, leaves.
    #[error("{reference} is damaged: {problem}")]
    Damaged { reference: String, problem: String },
    /// `orch.writerId` in the repository's config is not a writer id.
    #[error("orch.writerId in the repository config is not usable: {source}")]
    BadWriterId {
        #[source]
        source: crate::ids::IdError,
    },
    /// A log commit lacks the trailers git-orch writes on every one: the
    /// log ref was rewritten by something else.
    #[error("log commit {tip} has no Orch-Seq/Orch-Clock trailers")]
    LogWithoutTrailers { tip: Oid },
    /// A log tip carries a Lamport clock above any a log reaches: git-orch
    /// did not write it.
    #[error(
        "{reference} carries clock {clock}, above the ceiling {ceiling} no log reaches: git-orch did not write its tip"
    )]
    ClockBeyondCeiling {
        reference: String,
        clock: u64,
        ceiling: u64,
    },
    /// A log tip carries a seq no log reaches: git-orch did not write it.
    #[error("{reference} carries seq {seq}, which no log reaches: git-orch did not write its tip")]
    SeqBeyondEnd { reference: String, seq: u64 },
    /// The shared remote took an update, but a local ref moved before the
    /// same update could be made here.
    #[error("published {references} but a local ref moved meanwhile")]
    PublishedButMoved { references: String },
    /// An object git-orch just wrote was deleted (a `git prune` beside
    /// it) and is too large to write again from memory.
    #[error(
        "object {id} that git-orch just wrote was deleted (by a `git prune` running beside it?) and is too large to write again"
    )]
    ObjectVanished { id: Oid },
    /// Objects git-orch wrote kept vanishing, round after round.
    #[error(
        "objects git-orch wrote kept vanishing (a `git prune` looping beside it?), e.g. {example}"
    )]
    ObjectsKeepVanishing { example: Oid },
    /// A git-config file git-orch reads does not parse.
    #[error("{origin} is not valid git-config syntax: {message}")]
    ConfigSyntax { origin: String, message: String },
    /// The name given as a remote is none of the repository's remotes.
    #[error("{remote:?} is not a configured remote")]
    UnknownRemote { remote: String },
    /// `git commit-tree -S` failed.
    #[error("signing failed: {source}")]
    SigningFailed {
        #[source]
        source: ProcessError,
    },
    /// The state cache under `.git/orch/` cannot be read.
    #[error("the state cache file {} cannot be read: {why}", path.display())]
    StateCache {
        path: PathBuf,
        /// The cache's folder, deletable as a whole.
        folder: PathBuf,
        why: String,
    },
}

/// An error of gix, kept whole: its text joins the chain of its causes
/// (gix's own `{}` shows only the top line), and the error itself stays
/// reachable for matching by type ([`GitError::gix`]).
#[derive(Debug)]
pub struct GitError(gix::Error);

impl GitError {
    pub(crate) fn new(err: gix::Error) -> Self {
        GitError(err)
    }

    /// The error as gix gave it.
    pub(crate) fn gix(&self) -> &gix::Error {
        &self.0
    }
}

impl std::fmt::Display for GitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&chain(&self.0))
    }
}

// The text already holds the whole chain: no `source()` to repeat it.
impl std::error::Error for GitError {}

impl StoreError {
    pub(crate) fn git(context: impl Into<String>, err: impl Into<gix::Error>) -> Self {
        let err: gix::Error = err.into();
        if chain(&err).contains(SLOTS_EXHAUSTED) {
            // Every handle sharing this object database is stuck: the next
            // open must make a new one.
            ODB_GENERATION.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        StoreError::Git {
            context: context.into(),
            source: GitError(err),
        }
    }

    /// This error as met reading `reference`: a missing or unreadable
    /// object becomes [`StoreError::Damaged`], naming the ref and the
    /// repair; anything else is kept as it is.
    pub fn at_ref(self, reference: &str) -> Self {
        match self {
            StoreError::Git { context, source } if is_object_damage(&chain(source.gix())) => {
                StoreError::Damaged {
                    reference: reference.to_owned(),
                    problem: format!("{context}: {source}"),
                }
            }
            other => other,
        }
    }

    /// Whether the object database ran out of index slots (more packs
    /// appeared than it was opened with room for): a fresh open works.
    pub fn is_odb_exhausted(&self) -> bool {
        // gix gives this one no class or type of its own: its words.
        matches!(self, StoreError::Git { source, .. } if chain(source.gix()).contains(SLOTS_EXHAUSTED))
    }

    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        StoreError::Io {
            context: context.into(),
            source,
        }
    }
}

/// Whether a gix error says an object is missing or cannot be read (an
/// empty or corrupt loose file). Only gix's own words: a record that is
/// readable but wrong ("forged or corrupt") is not damage a repair of the
/// ref could mend.
pub(crate) fn is_object_damage(message: &str) -> bool {
    [
        "could not be found",
        "Empty loose object",
        "Could not read loose object",
        "Loose object size mismatch",
        "zlib",
        "decompress",
    ]
    .iter()
    .any(|m| message.contains(m))
}

/// Joins a gix error tree into one line; `{}` alone shows only the top.
pub(crate) fn chain(err: &gix::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for e in err.iter_errors() {
        let s = e.to_string();
        if !parts.iter().any(|p| p == &s) {
            parts.push(s);
        }
    }
    if parts.is_empty() {
        err.to_string()
    } else {
        parts.join(": ")
    }
}

/// Fails with a clear message if `err` came from a ref lock left behind.
pub(crate) fn ref_error(reference: &str, common_dir: &Path, err: gix::Error) -> StoreError {
    let message = chain(&err);
    if message.contains(".lock") && !err.is_conflict() {
        // gix names the lock file; the loose ref lock is `<ref>.lock`.
        let path = common_dir.join(format!("{reference}.lock"));
        if path.exists() {
            return StoreError::StaleLock {
                reference: reference.to_owned(),
                path,
            };
        }
        let packed = common_dir.join("packed-refs.lock");
        if packed.exists() {
            return StoreError::StaleLock {
                reference: reference.to_owned(),
                path: packed,
            };
        }
    }
    StoreError::git(format!("updating {reference}"), err)
}

/// Shortcut used across the store's submodules.
pub(crate) type Result<T, E = StoreError> = std::result::Result<T, E>;

pub(crate) fn full_name(name: &str) -> Result<gix::refs::FullName> {
    gix::refs::FullName::try_from(name)
        .map_err(|e| StoreError::InvalidRefName(format!("invalid ref name {name:?}: {e}")))
}
