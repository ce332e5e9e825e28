//! git-orch's scratch checkouts under `.git/orch/scratch/`: where the
//! merge queue's integration gate, an attempt's gates and `git orch gate`
//! run, each a checkout with a git folder of its own (see
//! [`super::quarantine`]), never a linked worktree of the repository.
//!
//! A scratch checkout is held through a lock beside it (`<name>.lock`), so
//! `git orch cleanup` and `git orch fsck` know it is in use; git-orch's
//! index of it is `<name>.index` beside it, out of reach of the gate
//! commands that run inside. Whatever they leave goes when the checkout is
//! prepared again or removed.

use std::path::{Path, PathBuf};

use super::error::StoreError;
use super::oid::Oid;
use super::quarantine::CheckoutPaths;
use super::repository::Store;

/// The scratch checkout at `scratch` as a checkout: its folder and
/// git-orch's index of it (`<name>.index` beside it).
pub fn scratch_checkout(scratch: &Path) -> CheckoutPaths {
    let mut name = scratch.file_name().unwrap_or_default().to_os_string();
    name.push(".index");
    CheckoutPaths {
        dir: scratch.to_owned(),
        index: scratch.with_file_name(name),
    }
}

/// The branch of a scratch checkout's own git folder.
const SCRATCH_BRANCH: &str = "orch-scratch";

/// Puts a scratch checkout of git-orch's own (under `.git/orch/scratch/`)
/// at exactly `commit`, making it if needed: whatever a gate command left
/// there (changed files, ignored files, a rewritten git folder) goes. It
/// is not a user's working tree, so it may be forced and cleaned at will.
pub fn prepare_scratch(store: &Store, scratch: &Path, commit: Oid) -> Result<(), StoreError> {
    let checkout = scratch_checkout(scratch);
    if std::fs::symlink_metadata(scratch.join(".git")).is_ok_and(|m| m.is_file()) {
        // A linked worktree of an earlier git-orch: start over.
        let _ = std::fs::remove_dir_all(scratch);
        store.forget_worktree(scratch)?;
    }
    store.reset_checkout(&checkout, commit, SCRATCH_BRANCH)
}

/// The folder of git-orch's scratch worktrees, `.git/orch/scratch/`.
pub fn scratch_dir(common_dir: &Path) -> PathBuf {
    common_dir.join("orch").join("scratch")
}

/// The folder of a checkout's own upper layers of its warm caches
/// (`[worktree] cache`, see `sandbox::warm`):
/// `.git/orch/warm/<key>`, the key a hash of the checkout's (canonical)
/// path, so whoever removes a checkout finds its layers from its path
/// alone.
pub fn warm_layers(common_dir: &Path, checkout: &Path) -> PathBuf {
    let hash = blake3::hash(checkout.as_os_str().as_encoded_bytes());
    common_dir
        .join("orch")
        .join("warm")
        .join(&hash.to_hex()[..16])
}

/// The file in a checkout's layers folder naming its checkout, so a
/// folder whose checkout is gone (a killed git-orch) can be found.
const OWNER: &str = "checkout";

/// Records which checkout a layers folder ([`warm_layers`]) belongs to.
pub fn own_warm_layers(layers: &Path, checkout: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(layers)?;
    let owner = layers.join(OWNER);
    if !owner.is_file() {
        std::fs::write(owner, checkout.as_os_str().as_encoded_bytes())?;
    }
    Ok(())
}

/// Layers folders under `.git/orch/warm/` whose checkout is gone: what a
/// git-orch killed before it cleaned up left. A folder naming no checkout
/// (or one whose name does not hash to the folder's) counts as gone once
/// it is an hour old: a command mounting its layers names it within
/// milliseconds.
pub fn orphan_warm_layers(common_dir: &Path) -> Vec<PathBuf> {
    let root = common_dir.join("orch").join("warm");
    let Ok(entries) = std::fs::read_dir(&root) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in entries.flatten() {
        let dir = e.path();
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let owner = std::fs::read(dir.join(OWNER)).ok().map(|b| {
            use std::os::unix::ffi::OsStringExt;
            PathBuf::from(std::ffi::OsString::from_vec(b))
        });
        let gone = match owner.filter(|c| warm_layers(common_dir, c) == dir) {
            Some(checkout) => !checkout.is_dir(),
            None => e
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > std::time::Duration::from_secs(3600)),
        };
        if gone {
            out.push(dir);
        }
    }
    out.sort();
    out
}

/// Removes a checkout's warm layers: overlayfs leaves its work folder
/// unreadable (mode 000), so folders are opened up when a first try fails.
pub fn remove_warm_layers(common_dir: &Path, checkout: &Path) {
    let checkout = checkout
        .canonicalize()
        .unwrap_or_else(|_| checkout.to_owned());
    remove_layers_dir(&warm_layers(common_dir, &checkout));
}

/// Removes a folder of overlay layers (see [`remove_warm_layers`]).
pub fn remove_layers_dir(dir: &Path) {
    let dir = dir.to_owned();
    if std::fs::remove_dir_all(&dir).is_ok() || !dir.exists() {
        return;
    }
    fn open_up(dir: &Path) {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                open_up(&e.path());
            }
        }
    }
    open_up(&dir);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The lock that says a scratch worktree is in use (`<name>.lock` beside
/// it). Lock files stay: removing one while another process waits on it
/// would let two holders in.
fn scratch_lock(scratch: &Path) -> PathBuf {
    let mut name = scratch.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    scratch.with_file_name(name)
}

/// Holds a scratch worktree (`.git/orch/scratch/<name>`) for one landing
/// or one `git orch gate`, and removes it when dropped, however the
/// landing or gate ends. Its lock tells `git orch cleanup` that the
/// worktree is in use.
#[derive(Debug)]
pub struct ScratchGuard {
    common_dir: PathBuf,
    path: PathBuf,
    _lock: super::lock::LockGuard,
}

impl ScratchGuard {
    /// Takes the scratch worktree at `path` (made later, by
    /// [`prepare_scratch`]).
    pub fn take(common_dir: &Path, path: &Path) -> Result<Self, StoreError> {
        let lock = scratch_lock(path);
        make_parent(&lock)?;
        let guard = super::lock::acquire(
            &lock,
            &format!("using the scratch worktree {}", path.display()),
            std::time::Duration::from_secs(60),
        )?;
        Ok(Self {
            common_dir: common_dir.to_owned(),
            path: path.to_owned(),
            _lock: guard,
        })
    }
}

impl Drop for ScratchGuard {
    fn drop(&mut self) {
        // Best effort: one left behind (a failing git) is what `git orch
        // cleanup` sweeps and `git orch fsck` reports.
        let _ = Store::with_reused(&self.common_dir, |store| remove_scratch(store, &self.path));
    }
}

fn make_parent(path: &Path) -> Result<(), StoreError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| StoreError::io(format!("creating {}", parent.display()), e))?;
    }
    Ok(())
}

/// A merge queue's scratch worktree, kept from one landing to the next:
/// each landing moves it to its candidate (the files that differ, not a
/// whole checkout). Its lock is taken at the first landing and held until
/// the queue (every clone of it) is dropped, at the end of the run or of
/// `git orch merge`, which removes the worktree: `git orch cleanup` and
/// `git orch fsck` see it in use meanwhile.
#[derive(Debug)]
pub struct KeptScratch {
    common_dir: PathBuf,
    path: PathBuf,
    lock: std::sync::Mutex<Option<super::lock::LockGuard>>,
}

/// The scratch worktree one landing uses: the queue's kept one, or, while
/// another process holds that, one of its own, removed when this is
/// dropped.
#[derive(Debug)]
pub struct ScratchUse {
    pub path: PathBuf,
    _own: Option<ScratchGuard>,
}

impl KeptScratch {
    pub fn new(common_dir: &Path, path: &Path) -> Self {
        Self {
            common_dir: common_dir.to_owned(),
            path: path.to_owned(),
            lock: std::sync::Mutex::new(None),
        }
    }

    /// The scratch worktree for one landing of this queue. Landings of one
    /// queue come one at a time (the queue lock), so the kept worktree is
    /// never shared within a process; a queue of another process (`git
    /// orch merge` of a run its driver lands too) gets a worktree named
    /// after its process instead of waiting for this one.
    pub fn take(&self) -> Result<ScratchUse, StoreError> {
        let mut held = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        if held.is_none() {
            let lock = scratch_lock(&self.path);
            make_parent(&lock)?;
            match super::lock::try_acquire(&lock, "landing through this scratch worktree")? {
                Ok(guard) => *held = Some(guard),
                Err(_busy) => {
                    let mut name = self.path.file_name().unwrap_or_default().to_os_string();
                    name.push(format!("-{}", std::process::id()));
                    let own = self.path.with_file_name(name);
                    return Ok(ScratchUse {
                        _own: Some(ScratchGuard::take(&self.common_dir, &own)?),
                        path: own,
                    });
                }
            }
        }
        Ok(ScratchUse {
            path: self.path.clone(),
            _own: None,
        })
    }
}

impl Drop for KeptScratch {
    fn drop(&mut self) {
        let held = self.lock.get_mut().unwrap_or_else(|e| e.into_inner());
        if held.is_some() {
            let _ = Store::with_reused(&self.common_dir, |store| remove_scratch(store, &self.path));
        }
        // The lock goes after the worktree.
        held.take();
    }
}

/// Removes a scratch checkout: its folder and git-orch's index of it
/// (and git's record of it, for a linked worktree an earlier git-orch
/// made). It is git-orch's own, under `.git/orch/`, and holds nothing of
/// a person's, so removal is forced.
pub fn remove_scratch(store: &Store, scratch: &Path) -> Result<(), StoreError> {
    // Its warm caches' layers go with it (warm worktrees, issue 28).
    remove_warm_layers(store.common_dir(), scratch);
    let linked = std::fs::symlink_metadata(scratch.join(".git")).is_ok_and(|m| m.is_file());
    match std::fs::remove_dir_all(scratch) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(StoreError::io(format!("removing {}", scratch.display()), e)),
    }
    let _ = std::fs::remove_file(scratch_checkout(scratch).index);
    if linked {
        store.forget_worktree(scratch)?;
    }
    Ok(())
}

/// A scratch worktree found by [`idle_scratch`]: its path and, when no
/// landing or gate uses it, its lock (held until dropped).
pub type FoundScratch = (PathBuf, Option<super::lock::LockGuard>);

/// Every scratch worktree folder under `.git/orch/scratch/` (whose name
/// `keep` accepts), each with its lock when it is idle: a landing or gate
/// that crashed left it. A busy one comes with `None`.
pub fn idle_scratch(
    store: &Store,
    keep: &dyn Fn(&str) -> bool,
) -> Result<Vec<FoundScratch>, StoreError> {
    let dir = scratch_dir(store.common_dir());
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for e in entries.flatten() {
        let path = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if !path.is_dir() || !keep(&name) {
            continue;
        }
        let lock = super::lock::try_acquire(&scratch_lock(&path), "cleaning up")?.ok();
        out.push((path, lock));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}
