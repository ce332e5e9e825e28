//! How hard the store's writes reach the disk before a ref names them
//! (see [`super::durable`], which does the writing).

/// How hard writes are pushed to the disk before a ref moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// git-orch before issue 25: nothing is synced and nothing is kept to
    /// be written again. A crash can leave a ref naming an object of zero
    /// length, a prune a ref naming none. Only for benchmarks that show
    /// what the other modes cost.
    Unsynced,
    /// Every object file and new ref file has its write-back started
    /// before a ref names it, and on file systems other than ext4 waited
    /// for; no flush of the device's cache. On ext4 starting it is enough:
    /// it allocates the file's blocks, and ext4's default `data=ordered`
    /// journal writes a file's allocated data before it commits any later
    /// change of names, such as the rename that moves the ref; elsewhere
    /// (xfs, btrfs) the data is on the device before the ref moves. After
    /// a crash the state is the old or the new one, never a ref on an
    /// empty file; the last seconds of work may be lost. The default.
    Ordered,
    /// `fsync` of every object file and its folder before the ref moves,
    /// of the ref's new file before it replaces the old one, and of the
    /// ref's folder after: nothing that succeeded is lost, on any file
    /// system. Chosen by git's own `core.fsync` (`loose-object`,
    /// `reference`, `committed`, `added` or `all`) or
    /// `core.fsyncObjectFiles`.
    Full,
}

impl Durability {
    /// The mode a repository's git configuration asks for.
    pub(super) fn from_config(repo: &gix::Repository) -> Self {
        let config = repo.config_snapshot();
        if config.boolean("core.fsyncObjectFiles") == Some(true) {
            return Durability::Full;
        }
        let wanted = config
            .string("core.fsync")
            .map(|v| v.to_string())
            .unwrap_or_default();
        let full = wanted.split(',').map(str::trim).any(|c| {
            matches!(
                c,
                "loose-object" | "reference" | "committed" | "added" | "all"
            )
        });
        if full {
            Durability::Full
        } else {
            Durability::Ordered
        }
    }
}
