//! The open repository ([`Store`]): how it is found and opened, the
//! options every handle is opened with, and the paths git-orch keeps
//! beside it. Its other methods live with what they do (the log, refs,
//! objects, …).

use std::path::{Path, PathBuf};

use crate::process::Git;

use super::durability::Durability;
use super::error::{StoreError, chain, odb_generation};
use super::oid::Oid;
use super::tip::TipPosition;

/// The fixed identity of every state commit, so they work in repositories
/// without `user.name` and never borrow the user's name for machine records.
pub const ORCH_NAME: &str = "git-orch";
/// The e-mail half of [`ORCH_NAME`].
pub const ORCH_EMAIL: &str = "git-orch@localhost";

/// Configuration every repository handle of git-orch is opened with. They
/// are open options, not edits of a loaded snapshot, so that repositories
/// gix opens from ours (a new linked worktree) carry them too.
const OVERRIDES: [&str; 5] = [
    // State commits, notes commits and reflog entries (also the new HEAD of
    // an attempt worktree) use the fixed identity; the user's own identity
    // is never needed.
    "committer.name=git-orch",
    "committer.email=git-orch@localhost",
    "author.name=git-orch",
    "author.email=git-orch@localhost",
    // git's own ref transactions hold a lock for microseconds; wait up to a
    // second (git's default is 100 ms) so a concurrent `git gc` packing refs
    // is not taken for a stale lock.
    "core.filesRefLockTimeout=1000",
];

/// Room for pack indexes in an object database, fixed for its lifetime.
/// gix's default (the packs on disk at open × 1.1, at least 32) ran out
/// when `git repack -d` beside a long run added a pack each time; a slot
/// costs a few dozen bytes, so plenty are given. Running out still only
/// makes the next open fresh ([`StoreError::is_odb_exhausted`]).
fn slots() -> gix::odb::store::init::Slots {
    gix::odb::store::init::Slots::AsNeededByDiskState {
        multiplier: 2.0,
        minimum: 4096,
    }
}

/// An open repository plus the paths git-orch keeps beside it.
pub struct Store {
    pub(crate) repo: gix::Repository,
    pub(super) common_dir: PathBuf,
    pub(super) workdir: Option<PathBuf>,
    /// `orch.writerId`, once read or made.
    pub(super) writer: std::sync::OnceLock<crate::ids::WriterId>,
    /// Trees this process wrote recently (see `objects::TreeEditor`).
    pub(super) recent_trees: std::sync::Mutex<std::collections::HashMap<Oid, Vec<u8>>>,
    /// Log tip commit → (trailer position, tree), so appends do not re-read
    /// commits they wrote or saw.
    pub(super) tips: std::sync::Mutex<std::collections::HashMap<Oid, (TipPosition, Oid)>>,
    /// Proposed ref values read in place of the real ones (see [`view`]).
    pub(super) overlay: std::collections::BTreeMap<String, Option<Oid>>,
    /// The folder holding the alternates of a quarantine view; removed
    /// when the last handle of the view is dropped (see [`view`]).
    pub(super) object_view: Option<std::sync::Arc<tempfile::TempDir>>,
    /// How hard writes reach the disk before a ref names them.
    pub(super) durability: Durability,
    /// [`ODB_GENERATION`] when this store was opened.
    pub(super) generation: u64,
    /// This store among the process's, as a writer of objects the journal
    /// keeps until a ref update of this store publishes them (see
    /// [`super::durable`]).
    pub(super) id: u64,
}

/// A number for each store this process opens ([`Store::id`]).
fn next_store_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl Store {
    /// Opens the repository containing `start`: a main worktree, a linked
    /// worktree or a bare repository. `GIT_DIR` and
    /// `GIT_CEILING_DIRECTORIES` are honoured like git does (see
    /// [`ceiling_above`]).
    pub fn discover(start: &Path) -> Result<Self, StoreError> {
        let mut trust = gix::sec::trust::Mapping::<gix::open::Options>::default();
        trust.full = trust
            .full
            .config_overrides(OVERRIDES)
            .object_store_slots(slots());
        trust.reduced = trust
            .reduced
            .config_overrides(OVERRIDES)
            .object_store_slots(slots());
        let options = gix::discover::upwards::Options {
            // gix refuses to search at all when no ceiling is above
            // `start`; git ignores such ceilings.
            match_ceiling_dir_or_error: false,
            ..Default::default()
        };
        let not_found = || StoreError::NotARepository {
            path: start.to_owned(),
        };
        let ts = match gix::ThreadSafeRepository::discover_with_environment_overrides_opts(
            start, options, trust,
        ) {
            Ok(r) => r,
            Err(e) => {
                let message = chain(&e);
                if message.contains("reftable") || message.contains("refStorage") {
                    return Err(StoreError::Reftable {
                        path: start.to_owned(),
                    });
                }
                return Err(not_found());
            }
        };
        let repo = ts.to_thread_local();
        // gix searches the ceiling folder itself too; git stops below it.
        if std::env::var_os("GIT_DIR").is_none()
            && let Some(value) = std::env::var_os("GIT_CEILING_DIRECTORIES")
            && let Ok(physical) = start.canonicalize()
            && let Some(ceiling) = ceiling_above(&physical, &value)
        {
            let found = repo.workdir().unwrap_or_else(|| repo.git_dir());
            let found = found.canonicalize().unwrap_or_else(|_| found.to_owned());
            if !(found.starts_with(&ceiling) && found != ceiling) {
                return Err(not_found());
            }
        }
        Self::from_repo(repo)
    }

    /// Opens exactly the repository at `path` (a `.git` dir, a bare repo or a
    /// worktree), without searching upwards.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let repo = gix::open_opts(
            path,
            gix::open::Options::default()
                .config_overrides(OVERRIDES)
                .object_store_slots(slots()),
        )
        .map_err(|e| {
            let message = chain(&e);
            if message.contains("reftable") || message.contains("refStorage") {
                StoreError::Reftable {
                    path: path.to_owned(),
                }
            } else {
                StoreError::NotARepository {
                    path: path.to_owned(),
                }
            }
        })?;
        Self::from_repo(repo)
    }

    /// Opens the repository at `path` as [`Store::open`] does, sharing one
    /// object database (its mapped pack indexes and packs) with every store
    /// this process opened the same way: several threads' stores then map
    /// a large history's packs once, not once each.
    /// One that ran out of pack index slots is replaced by a fresh one.
    pub fn open_shared(path: &Path) -> Result<Self, StoreError> {
        type Shared = Vec<(PathBuf, u64, gix::ThreadSafeRepository)>;
        static SHARED: std::sync::Mutex<Shared> = std::sync::Mutex::new(Vec::new());
        let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
        let generation = odb_generation();
        shared.retain(|(_, g, _)| *g == generation);
        if let Some((_, _, ts)) = shared.iter().find(|(p, _, _)| p == path) {
            return Self::from_repo(ts.to_thread_local());
        }
        let store = Self::open(path)?;
        shared.push((path.to_owned(), generation, store.repo.clone().into_sync()));
        Ok(store)
    }

    /// A new empty repository in `dir` (`git init`, the machine's git
    /// configuration left out), opened: for unit tests.
    #[cfg(test)]
    pub(crate) fn init_for_tests(dir: &Path) -> Self {
        crate::process::Git::new(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .run(["init", "-q"])
            .expect("git init");
        Self::open(dir).expect("open")
    }

    /// Runs `f` on a store of the repository at `path` that this thread
    /// opened before, or opens one (and keeps it for the thread's next
    /// call). For the short steps a driver runs on tokio's blocking
    /// threads: opening a repository reads its config and maps its pack
    /// indexes again, which cost more than many of the steps themselves.
    /// A kept store sees every ref and object written since (gix reads
    /// loose refs and objects from disk and looks for new packs on a
    /// miss); only configuration is as it was when it was opened.
    pub fn with_reused<T>(path: &Path, f: impl FnOnce(&Store) -> T) -> Result<T, StoreError> {
        thread_local! {
            static KEPT: std::cell::RefCell<Option<Store>> = const { std::cell::RefCell::new(None) };
        }
        // Taken out while `f` runs, so a nested call opens its own.
        let kept = KEPT.with(|k| k.borrow_mut().take());
        let store = match kept {
            Some(s) if s.common_dir == path && s.generation == odb_generation() => s,
            _ => Store::open_shared(path)?,
        };
        let out = f(&store);
        KEPT.with(|k| *k.borrow_mut() = Some(store));
        Ok(out)
    }

    fn from_repo(mut repo: gix::Repository) -> Result<Self, StoreError> {
        debug_assert!(OVERRIDES[0].ends_with(ORCH_NAME) && OVERRIDES[1].ends_with(ORCH_EMAIL));
        let common_dir = repo.common_dir().to_owned();
        let reftable = repo
            .config_snapshot()
            .string("extensions.refStorage")
            .is_some_and(|v| v.eq_ignore_ascii_case(b"reftable"))
            || common_dir.join("reftable").is_dir();
        if reftable {
            return Err(StoreError::Reftable { path: common_dir });
        }
        // Enough for the trees and commits an append or a read touches
        // again; a driver holds one handle per live attempt.
        repo.object_cache_size_if_unset(128 * 1024);
        let workdir = repo.workdir().map(Path::to_owned);
        let durability = Durability::from_config(&repo);
        Ok(Self {
            repo,
            common_dir,
            workdir,
            writer: std::sync::OnceLock::new(),
            recent_trees: Default::default(),
            tips: Default::default(),
            overlay: Default::default(),
            object_view: None,
            durability,
            generation: odb_generation(),
            id: next_store_id(),
        })
    }

    /// How hard this store's writes reach the disk before a ref names
    /// them (see [`Durability`]).
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// Sets how hard writes reach the disk. Benchmarks lower it to show
    /// what the previous design cost; nothing else should.
    pub fn set_durability(&mut self, durability: Durability) {
        self.durability = durability;
    }

    /// The shared git directory (the main `.git` even from a linked worktree).
    pub fn common_dir(&self) -> &Path {
        &self.common_dir
    }

    /// `.git/orch/`: locks, caches and agent logs; deletable without losing state.
    pub fn orch_dir(&self) -> PathBuf {
        self.common_dir.join("orch")
    }

    /// The working tree this store was opened from, if not bare.
    pub fn workdir(&self) -> Option<&Path> {
        self.workdir.as_deref()
    }

    /// Whether the repository has no working tree.
    pub fn is_bare(&self) -> bool {
        self.workdir.is_none()
    }

    /// A `git` runner for this repository, for what gix should not do.
    pub fn git(&self) -> Git {
        Git::new(
            self.workdir
                .clone()
                .unwrap_or_else(|| self.common_dir.clone()),
        )
    }

    /// A fresh store of the same repository, with an object database of
    /// its own: for an operation that ran out of pack index slots.
    pub(crate) fn fresh(&self) -> Result<Self, StoreError> {
        let mut fresh = Self::open(&self.common_dir)?;
        fresh.workdir = self.workdir.clone();
        fresh.durability = self.durability;
        Ok(fresh)
    }

    /// Another handle of this repository, seeing exactly what this one
    /// sees (a view included): for a reader that outlives the borrow of
    /// the store it was opened with (the state index, which reads the log
    /// again when a cache file it needs is gone). The object database is
    /// shared; caches are not.
    pub fn handle(&self) -> Store {
        let writer = std::sync::OnceLock::new();
        if let Some(w) = self.writer.get() {
            let _ = writer.set(w.clone());
        }
        Store {
            repo: self.repo.clone(),
            common_dir: self.common_dir.clone(),
            workdir: self.workdir.clone(),
            writer,
            recent_trees: Default::default(),
            tips: Default::default(),
            overlay: self.overlay.clone(),
            object_view: self.object_view.clone(),
            durability: self.durability,
            generation: self.generation,
            id: next_store_id(),
        }
    }

    /// Reopens the repository so that configuration written by a `git`
    /// subprocess is seen.
    pub fn reload(&mut self) -> Result<(), StoreError> {
        let fresh = Self::open(&self.common_dir)?;
        let workdir = self.workdir.take();
        *self = fresh;
        self.workdir = workdir;
        Ok(())
    }
}

/// The ceiling of a repository search from `start` (absolute, free of
/// symlinks, as git's `getcwd` gives it) under git's rule for
/// `GIT_CEILING_DIRECTORIES` (`value`): of the absolute entries, the
/// longest that is a folder above `start` (not `start` itself); entries
/// are resolved to their real path, except those after an empty entry,
/// which are taken as written (and one that cannot be resolved is
/// dropped). The search then looks only in folders below the ceiling.
/// `None` when no entry is above `start`: git then ignores the variable.
fn ceiling_above(start: &Path, value: &std::ffi::OsStr) -> Option<PathBuf> {
    let mut resolve = true;
    let mut best: Option<PathBuf> = None;
    for entry in std::env::split_paths(value) {
        if entry.as_os_str().is_empty() {
            resolve = false;
            continue;
        }
        if !entry.is_absolute() {
            continue;
        }
        let entry = if resolve {
            match entry.canonicalize() {
                Ok(real) => real,
                Err(_) => continue,
            }
        } else {
            entry.components().collect()
        };
        let longer = best
            .as_ref()
            .is_none_or(|b| entry.components().count() > b.components().count());
        if start != entry && start.starts_with(&entry) && longer {
            best = Some(entry);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::refs;

    /// `git repack -d` beside a long-lived store: each one packs what is
    /// loose into a pack of its own, so the packs add up. With gix's
    /// default slot map (32 slots, fixed for the store's lifetime) a store
    /// kept across a few dozen of them failed every read with "too few
    /// index slots".
    #[test]
    fn a_kept_store_reads_through_many_repacks() {
        let dir = tempfile::tempdir().expect("tempdir");
        let _init = Store::init_for_tests(dir.path());
        let kept = Store::open_shared(dir.path()).expect("open");
        let git = crate::process::Git::new(dir.path())
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1");
        let mut parent: Option<String> = None;
        for i in 0..80 {
            let blob = kept.write_blob(format!("{i}\n").as_bytes()).expect("blob");
            let tree = kept.write_tree(&[("n", blob)]).expect("tree");
            let parents: Vec<Oid> = parent
                .iter()
                .map(|p| kept.parse_oid(p).expect("id"))
                .collect();
            let commit = kept.write_commit("step", tree, &parents).expect("commit");
            let name = "refs/heads/main";
            let expected = refs::Expected::from_read(kept.ref_target(name).expect("read"));
            assert_eq!(
                kept.apply(&[refs::RefUpdate::set(name, commit, expected, "step")])
                    .expect("update"),
                refs::Applied::Done
            );
            git.run(["repack", "-d", "-q"]).expect("repack");
            // The commit now lives only in the newest pack.
            let info = kept
                .commit_info(commit)
                .unwrap_or_else(|e| panic!("after {} repacks: {e}", i + 1));
            assert_eq!(info.tree, tree);
            parent = Some(commit.to_string());
        }
    }

    /// `git pack-refs --all --prune` (what every `git gc` runs) looped
    /// beside appends: it moves the log ref into a new packed-refs and
    /// removes its loose file, and gix reads packed-refs before the loose
    /// file, also when it compares a ref's value under its lock. Without
    /// reading again when packed-refs changed, an append's compare-and-
    /// swap passed against an older value and the appends after it were
    /// lost.
    #[test]
    fn appends_beside_pack_refs_lose_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::init_for_tests(dir.path());
        store.writer().expect("writer");
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let packer = {
            let stop = stop.clone();
            let path = dir.path().to_owned();
            std::thread::spawn(move || {
                let git = crate::process::Git::new(&path)
                    .env("GIT_CONFIG_GLOBAL", "/dev/null")
                    .env("GIT_CONFIG_NOSYSTEM", "1");
                let mut rounds = 0u32;
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    // A lock git-orch holds for a moment fails a round.
                    let _ = git.run(["pack-refs", "--all", "--prune"]);
                    rounds += 1;
                }
                rounds
            })
        };
        const N: u64 = 300;
        for n in 0..N {
            store
                .append(vec![crate::event::Event::DebugMarker {
                    label: "beside pack-refs".into(),
                    n,
                }])
                .expect("append");
        }
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        assert!(packer.join().expect("packer") > 2, "pack-refs hardly ran");
        assert_eq!(store.read_log().expect("log").entries.len() as u64, N);
    }

    /// A store whose object database did run out of index slots (opened
    /// here with two, where git-orch gives thousands) still appends, on a
    /// fresh open, and stores shared or kept from before are replaced.
    #[test]
    fn a_store_out_of_index_slots_appends_on_a_fresh_open() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = Store::init_for_tests(dir.path());
        first
            .append(vec![crate::event::Event::DebugMarker {
                label: "first".into(),
                n: 0,
            }])
            .expect("append");
        let git = crate::process::Git::new(dir.path())
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1");
        let cramped = gix::open_opts(
            dir.path(),
            gix::open::Options::default()
                .config_overrides(OVERRIDES)
                .object_store_slots(gix::odb::store::init::Slots::Given(2)),
        )
        .expect("open");
        let cramped = Store::from_repo(cramped).expect("store");
        let shared = Store::open_shared(dir.path()).expect("shared");
        let before = shared.generation;
        // Three packs, each holding a new commit on main.
        for i in 0..3 {
            let blob = first.write_blob(format!("{i}").as_bytes()).expect("blob");
            let tree = first.write_tree(&[("n", blob)]).expect("tree");
            let commit = first.write_commit("c", tree, &[]).expect("commit");
            let name = format!("refs/heads/b{i}");
            first
                .apply(&[refs::RefUpdate::set(
                    name,
                    commit,
                    refs::Expected::Absent,
                    "b",
                )])
                .expect("branch");
            git.run(["repack", "-d", "-q"]).expect("repack");
        }
        let tip = first
            .ref_target("refs/heads/b2")
            .expect("read")
            .expect("b2");
        let err = cramped
            .commit_info(tip)
            .expect_err("no room for a third pack");
        assert!(err.is_odb_exhausted(), "{err}");
        cramped
            .append(vec![crate::event::Event::DebugMarker {
                label: "second".into(),
                n: 1,
            }])
            .expect("append on a fresh open");
        assert_eq!(first.read_log().expect("log").entries.len(), 2);
        let again = Store::open_shared(dir.path()).expect("shared");
        assert!(again.generation > before, "the shared handle was replaced");
    }
}
