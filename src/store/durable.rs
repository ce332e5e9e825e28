//! Durable writes: the objects an operation writes reach the disk before
//! the refs that name them move, and are still there after they moved.
//!
//! Three things outside git-orch can otherwise break a ref:
//!
//! * **A crash of the machine.** The kernel may commit a file's name
//!   before its data; ext4 (delayed allocation) then leaves a loose object
//!   or ref file of zero length at a name a ref points to. Every object
//!   written here has its write-back started (and, where the file system
//!   does not order it, finished) before any ref moves, and a ref's new
//!   file before it replaces the old one ([`Durability`]).
//! * **A concurrent `git prune`** (or `git gc --prune=now`). It deletes
//!   every loose object its reachability walk did not reach, whatever its
//!   age (`--expire=now` means "everything", not "older than now"): the
//!   objects of an operation between their writing and the ref update,
//!   and even after it when its walk began before. No lock or ref can
//!   protect an object that did not exist when that walk began, so the
//!   objects are kept in memory (the journal) and checked after the refs
//!   moved: at once, and then by a background thread at growing intervals
//!   for [`GRACE`]; any that vanished are written again (same bytes, same
//!   id). A read of one in between writes it again first
//!   ([`Store::recover_object`], [`Store::retrying`]), and a command that
//!   saw a prune at work waits out the grace period before it ends
//!   ([`Store::settle`]).
//!
//!   An object counts as published when a ref update of the store (or
//!   thread) that wrote it moved: another thread's update, meanwhile, names
//!   none of it, and its grace period would run out before the object's own
//!   ref moved (an attempt's result is taken in and named seconds apart
//!   under load). What no update of its writer published is published at
//!   the writer's end ([`Store`]'s drop, or the command's).
//! * **`git prune --expire=…`** removes empty fan-out folders
//!   (`objects/xx/`), also the one gix just made for an object it is about
//!   to rename into place: the write is retried.
//!
//! The journal is shared by every store of this process that opened the
//! same repository: any of them that reads an object another wrote may
//! have to write it again.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::error::StoreError;
use super::objects::loose_path;
use super::oid::Oid;
use super::repository::Store;

pub use super::durability::Durability;

/// Objects larger than this are not kept in memory: one that vanishes
/// cannot be written again, and the operation fails saying so.
const KEEP_OBJECT: usize = 1 << 20;
/// At most this many bytes of objects are kept per repository.
const KEEP_TOTAL: usize = 64 << 20;
/// Files whose writeout was started and not waited for yet; past this the
/// oldest are waited for, so a large import does not hold many files open.
const OPEN_FILES: usize = 128;
/// How long after its ref moved an object is still checked: longer than a
/// prune of an ordinary repository takes from its reachability walk to
/// its end.
pub const GRACE: Duration = Duration::from_secs(2);
/// When, after its ref moved, a published object is checked again (once
/// at once, by the ref update itself): often at first, when a prune that
/// began before is most likely still at work.
const CHECKS: [Duration; 5] = [
    Duration::from_millis(10),
    Duration::from_millis(50),
    Duration::from_millis(200),
    Duration::from_millis(700),
    GRACE,
];
/// How often the background thread looks for checks that are due.
const TICK: Duration = Duration::from_millis(5);
/// Rounds of checking and writing again before giving up.
const HEAL_ROUNDS: u32 = 12;
/// How often a read of an object that looks missing is tried again, over
/// about 60 ms, when this process cannot write it again: long enough for
/// a `git repack -d` to finish deleting the pack it moved the object out
/// of (see [`Store::healing`]).
const REPACK_RETRIES: u32 = 6;
/// How often a write whose fan-out folder vanished is tried again.
const WRITE_TRIES: u32 = 8;

/// One object written by this process.
#[derive(Debug, Clone)]
struct Written {
    id: Oid,
    kind: gix::objs::Kind,
    /// Its bytes, to write it again; `None` when too large to keep.
    data: Option<Arc<[u8]>>,
    /// Whose ref update publishes it.
    owner: Owner,
}

/// Who wrote a pending object: the store, and the thread it wrote on.
/// The next ref update of either is the one that makes it reachable (an
/// operation writes its objects and moves its refs through one store, on
/// one thread; a store handed to another thread, or a nested store on the
/// same one, is still matched by the other half).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Owner {
    store: u64,
    thread: std::thread::ThreadId,
}

impl Owner {
    fn publishes(self, w: &Written) -> bool {
        w.owner.store == self.store || w.owner.thread == self.thread
    }
}

/// A store that goes publishes what it wrote and never published.
impl Drop for Store {
    fn drop(&mut self) {
        self.release_pending();
    }
}

/// Objects of one repository that this process wrote: those no ref may
/// name yet (pending), and those published within the grace period.
#[derive(Default)]
struct Journal {
    pending: Vec<Written>,
    /// Writeouts started and not waited for.
    open: VecDeque<std::fs::File>,
    /// Fan-out folders of pending objects (for `Durability::Full`).
    folders: BTreeSet<PathBuf>,
    /// Published objects by the check they wait for next: `stages[k]`
    /// holds (published at, object) due at `CHECKS[k]` after publishing,
    /// oldest first.
    stages: [VecDeque<(Instant, Written)>; CHECKS.len()],
    kept_bytes: usize,
    /// Objects that vanished and were written again.
    healed: u64,
    /// When an object last vanished.
    last_loss: Option<Instant>,
    durability: Option<Durability>,
    hash: Option<gix::hash::Kind>,
}

impl Journal {
    fn keep(&mut self, bytes: &[u8]) -> Option<Arc<[u8]>> {
        let data = (bytes.len() <= KEEP_OBJECT && self.kept_bytes + bytes.len() <= KEEP_TOTAL)
            .then(|| Arc::<[u8]>::from(bytes));
        self.kept_bytes += data.as_ref().map_or(0, |d| d.len());
        data
    }

    fn forget(&mut self, w: &Written) {
        self.kept_bytes -= w.data.as_ref().map_or(0, |d| d.len());
    }

    /// Moves the pending objects `which` picks to the first check, as
    /// published at `now`; returns them.
    fn publish(&mut self, now: Instant, which: impl Fn(&Written) -> bool) -> Vec<Written> {
        let (mine, others): (Vec<Written>, Vec<Written>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(which);
        self.pending = others;
        self.stages[0].extend(mine.iter().cloned().map(|w| (now, w)));
        mine
    }

    fn published(&self) -> impl Iterator<Item = &Written> {
        self.stages.iter().flatten().map(|(_, w)| w)
    }

    fn is_idle(&self) -> bool {
        self.stages.iter().all(VecDeque::is_empty)
    }

    /// The published objects whose next check is due at `now`; each moves
    /// on to its next check, or is forgotten after its last.
    fn due(&mut self, now: Instant) -> Vec<Written> {
        let mut due = Vec::new();
        for (k, check) in CHECKS.iter().enumerate() {
            while self.stages[k]
                .front()
                .is_some_and(|(at, _)| now.duration_since(*at) >= *check)
            {
                let (at, w) = self.stages[k].pop_front().expect("front exists");
                due.push(w.clone());
                if k + 1 < CHECKS.len() {
                    self.stages[k + 1].push_back((at, w));
                } else {
                    self.forget(&w);
                }
            }
        }
        due
    }

    /// When the next check is due, if any.
    fn next_due(&self) -> Option<Instant> {
        self.stages
            .iter()
            .zip(CHECKS)
            .filter_map(|(stage, check)| stage.front().map(|(at, _)| *at + check))
            .min()
    }
}

fn journals() -> &'static Mutex<HashMap<PathBuf, Journal>> {
    static JOURNALS: std::sync::OnceLock<Mutex<HashMap<PathBuf, Journal>>> =
        std::sync::OnceLock::new();
    JOURNALS.get_or_init(Default::default)
}

fn with_journal<T>(objects: &Path, f: impl FnOnce(&mut Journal) -> T) -> T {
    let mut all = journals().lock().unwrap_or_else(|e| e.into_inner());
    f(all.entry(objects.to_owned()).or_default())
}

/// Starts sending a file's data to the device without waiting for it.
fn start_writeout(file: &std::fs::File) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: a valid open descriptor; the call only schedules I/O.
        unsafe {
            libc::sync_file_range(file.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = file;
}

/// Waits until a file's data is on the device (not necessarily past the
/// device's cache: see [`Durability::Ordered`]).
fn finish_writeout(file: &std::fs::File) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: a valid open descriptor; the call only waits for I/O.
        let rc = unsafe {
            libc::sync_file_range(
                file.as_raw_fd(),
                0,
                0,
                libc::SYNC_FILE_RANGE_WAIT_BEFORE
                    | libc::SYNC_FILE_RANGE_WRITE
                    | libc::SYNC_FILE_RANGE_WAIT_AFTER,
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    file.sync_data()
}

/// Whether the file system holding `path` commits a file's data, once its
/// write-back started, before any later change of names (ext4, whose
/// default `data=ordered` journal does): then [`Durability::Ordered`]
/// needs no wait. `false` where it cannot tell.
fn starting_orders(path: &Path) -> bool {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::ffi::OsStrExt;
        /// `EXT4_SUPER_MAGIC` (also ext2 and ext3's).
        const EXT4: i64 = 0xEF53;
        let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
            return false;
        };
        let mut fs = std::mem::MaybeUninit::<libc::statfs>::zeroed();
        // SAFETY: a NUL-terminated path and a buffer statfs fills.
        let rc = unsafe { libc::statfs(c.as_ptr(), fs.as_mut_ptr()) };
        // SAFETY: statfs returned 0, so it filled the buffer.
        #[allow(clippy::unnecessary_cast)] // `f_type`'s type differs by target.
        let kind = rc == 0 && unsafe { fs.assume_init() }.f_type as i64 == EXT4;
        kind
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = path;
        false
    }
}

/// `fsync` of a folder, so the names created in it survive a crash.
fn sync_folder(path: &Path) -> std::io::Result<()> {
    std::fs::File::open(path)?.sync_all()
}

/// Makes one file written by someone else (gix) as durable as `mode`
/// asks before a name points at it.
pub(super) fn sync_file(path: &Path, mode: Durability) -> std::io::Result<()> {
    match mode {
        Durability::Unsynced => Ok(()),
        Durability::Ordered => {
            let file = std::fs::File::open(path)?;
            start_writeout(&file);
            match path.parent() {
                Some(folder) if starting_orders(folder) => Ok(()),
                _ => finish_writeout(&file),
            }
        }
        Durability::Full => std::fs::File::open(path)?.sync_all(),
    }
}

/// Makes the folders holding `paths` durable (for [`Durability::Full`]).
pub(super) fn sync_folders<'a>(paths: impl IntoIterator<Item = &'a Path>) -> std::io::Result<()> {
    let folders: BTreeSet<&Path> = paths.into_iter().filter_map(Path::parent).collect();
    for f in folders {
        sync_folder(f)?;
    }
    Ok(())
}

/// Writes one object as a loose file into `objects`. gix creates the
/// fan-out folder and then renames the object into it; `git prune
/// --expire=…` removes empty fan-out folders, so the rename can find the
/// folder gone: that write is tried again.
fn write_loose_to(
    objects: &impl gix::objs::Write,
    kind: gix::objs::Kind,
    bytes: &[u8],
) -> gix::Result<Oid> {
    let mut tries = 0;
    loop {
        match objects.write_buf(kind, bytes) {
            Ok(id) => return Ok(id.into()),
            Err(e) if tries + 1 < WRITE_TRIES && folder_vanished(&e) => tries += 1,
            Err(e) => return Err(e),
        }
    }
}

/// Writes again those of `objects` that are gone from `dir`; `exists` also
/// looks in packs (a `git repack` moves loose objects into packs). Returns
/// how many it wrote, or the first it could not.
fn rewrite_missing(
    dir: &Path,
    objects: &[Written],
    exists: impl Fn(Oid) -> bool,
    write: impl Fn(gix::objs::Kind, &[u8]) -> gix::Result<Oid>,
    durability: Durability,
) -> std::result::Result<usize, StoreError> {
    let mut n = 0;
    for w in objects {
        if std::fs::symlink_metadata(loose_path(dir, w.id.as_gix())).is_ok() || exists(w.id) {
            continue;
        }
        let Some(data) = &w.data else {
            return Err(StoreError::ObjectVanished { id: w.id });
        };
        let id = write(w.kind, data)
            .map_err(|e| StoreError::git(format!("writing object {} again", w.id), e))?;
        debug_assert_eq!(id, w.id);
        let path = loose_path(dir, id.as_gix());
        let synced = sync_file(&path, durability).and_then(|()| match durability {
            Durability::Full => sync_folders([path.as_path()]),
            _ => Ok(()),
        });
        match synced {
            // Gone again already: the next round of checks sees it.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(StoreError::io(
                    format!("writing {} to the disk", path.display()),
                    e,
                ));
            }
            Ok(()) => {}
        }
        n += 1;
    }
    if n > 0 {
        with_journal(dir, |j| {
            j.healed += n as u64;
            j.last_loss = Some(Instant::now());
        });
    }
    Ok(n)
}

/// Open object databases of the repositories this process journals, for
/// checks made away from any store (the background thread, the end of a
/// command).
type Handles = HashMap<PathBuf, gix::odb::Handle>;

/// Checks the published objects of every journal whose checks are due at
/// `now` (of `only` that repository, when given), writing again what is
/// gone. The first failure to write one again is returned; the rest are
/// still checked.
fn check_due(now: Instant, handles: &mut Handles, only: Option<&Path>) -> Result<(), StoreError> {
    let work: Vec<(PathBuf, Vec<Written>, Durability, gix::hash::Kind)> = {
        let mut all = journals().lock().unwrap_or_else(|e| e.into_inner());
        all.iter_mut()
            .filter(|(dir, _)| only.is_none_or(|o| o == dir.as_path()))
            .filter_map(|(dir, j)| {
                let due = j.due(now);
                (!due.is_empty()).then(|| {
                    (
                        dir.clone(),
                        due,
                        j.durability.unwrap_or(Durability::Ordered),
                        j.hash.unwrap_or(gix::hash::Kind::Sha1),
                    )
                })
            })
            .collect()
    };
    let mut first = Ok(());
    for (dir, due, durability, hash) in work {
        if !handles.contains_key(&dir) {
            match gix::odb::at(&dir, hash) {
                Ok(h) => {
                    handles.insert(dir.clone(), h);
                }
                Err(e) => {
                    if first.is_ok() {
                        first = Err(StoreError::io(format!("opening {}", dir.display()), e));
                    }
                    continue;
                }
            }
        }
        let odb = &handles[&dir];
        let loose = gix::odb::loose::Store::at(&dir, hash);
        let done = rewrite_missing(
            &dir,
            &due,
            |id| gix::objs::Exists::exists(odb, id.as_gix()),
            |kind, bytes| write_loose_to(&loose, kind, bytes),
            durability,
        );
        if let (Err(e), true) = (done, first.is_ok()) {
            first = Err(e);
        }
    }
    first
}

/// The background thread that checks published objects when their checks
/// are due and writes again those a prune took; it ends when nothing is
/// left to check and starts again with the next publishing.
fn ensure_healer() {
    static RUNNING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if RUNNING.swap(true, std::sync::atomic::Ordering::SeqCst) {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("git-orch-healer".into())
        .spawn(|| {
            let mut handles = Handles::new();
            loop {
                std::thread::sleep(TICK);
                {
                    let all = journals().lock().unwrap_or_else(|e| e.into_inner());
                    if all.values().all(Journal::is_idle) {
                        // Under the lock: a publisher that finds the flag
                        // set afterwards knows this thread will see it.
                        RUNNING.store(false, std::sync::atomic::Ordering::SeqCst);
                        return;
                    }
                }
                // Errors are met again by the store that publishes next,
                // or at the end of the command; nobody to tell here.
                let _ = check_due(Instant::now(), &mut handles, None);
            }
        });
    if spawned.is_err() {
        RUNNING.store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

/// For the end of a command: in every repository where this process saw a
/// prune delete objects it wrote, or where git's maintenance is running,
/// checks what it published until the grace period is over, so a prune
/// that began before its last ref update cannot take what it wrote once it
/// is gone. Costs nothing otherwise.
pub fn settle_all() -> Result<(), StoreError> {
    let suspects: Vec<PathBuf> = {
        let mut all = journals().lock().unwrap_or_else(|e| e.into_inner());
        // What its writer never published is as published as it will be.
        let now = Instant::now();
        for j in all.values_mut() {
            j.publish(now, |_| true);
        }
        all.iter()
            .filter(|(dir, j)| {
                let maintaining = dir.join("maintenance.lock").exists()
                    || dir.parent().is_some_and(|git| git.join("gc.pid").exists());
                !j.is_idle() && (j.last_loss.is_some() || maintaining)
            })
            .map(|(dir, _)| dir.clone())
            .collect()
    };
    let mut handles = Handles::new();
    for dir in suspects {
        loop {
            check_due(Instant::now(), &mut handles, Some(&dir))?;
            let Some(next) = with_journal(&dir, |j| j.next_due()) else {
                break;
            };
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
        }
    }
    // What this process pinned is safe now, or never will be needed.
    for repo in Store::pinned_repositories() {
        Store::open(&repo)?.unpin_all()?;
    }
    Ok(())
}

impl Store {
    /// The repository's object folder.
    fn objects_dir(&self) -> PathBuf {
        self.common_dir.join("objects")
    }

    /// Whether objects are journaled: not in a read-only view, and not in
    /// the previous design a benchmark measures.
    fn journaled(&self) -> bool {
        !self.is_view() && self.durability != Durability::Unsynced
    }

    fn write_loose(&self, kind: gix::objs::Kind, bytes: &[u8]) -> gix::Result<Oid> {
        write_loose_to(&self.repo.objects, kind, bytes)
    }

    /// Writes an object and notes it in the journal: it is written out
    /// before the next ref update and kept until it is safely published.
    pub(super) fn write_journaled(&self, kind: gix::objs::Kind, bytes: &[u8]) -> gix::Result<Oid> {
        let id = self.write_loose(kind, bytes)?;
        if self.journaled() {
            self.adopt(id, kind, bytes);
        }
        Ok(id)
    }

    /// Notes in the journal an object written for the operation under way,
    /// by git-orch or by a `git` subprocess.
    pub(super) fn adopt(&self, id: Oid, kind: gix::objs::Kind, bytes: &[u8]) {
        if !self.journaled() {
            return;
        }
        let objects = self.objects_dir();
        let path = loose_path(&objects, id.as_gix());
        let file = std::fs::File::open(&path).ok();
        if let Some(f) = &file {
            start_writeout(f);
        }
        let durability = self.durability;
        let hash = self.repo.object_hash();
        let owner = self.owner();
        let overflow = with_journal(&objects, |j| {
            j.durability = Some(durability);
            j.hash = Some(hash);
            let data = j.keep(bytes);
            j.pending.push(Written {
                id,
                kind,
                data,
                owner,
            });
            if durability == Durability::Full
                && file.is_some()
                && let Some(folder) = path.parent()
            {
                j.folders.insert(folder.to_owned());
            }
            if let Some(f) = file {
                j.open.push_back(f);
            }
            if j.open.len() > OPEN_FILES {
                j.open.drain(..OPEN_FILES / 2).collect::<Vec<_>>()
            } else {
                Vec::new()
            }
        });
        let ordered = !overflow.is_empty() && starting_orders(&objects);
        for f in overflow {
            // An error here shows again when the ref update syncs.
            let _ = self.make_durable(&f, ordered);
        }
    }

    /// Takes into the journal the trees and blobs of `tree` that `base`
    /// (the tree it was made from) does not have, which `git add` and
    /// `git write-tree` just wrote: from here on they are made durable and
    /// kept like git-orch's own. `false` when one is gone already (a prune
    /// took it before anything named it): the caller writes them again.
    pub fn adopt_tree(&self, base: Option<Oid>, tree: Oid) -> Result<bool, StoreError> {
        let mut stack = vec![(base, tree)];
        while let Some((before, now)) = stack.pop() {
            if before == Some(now) {
                continue;
            }
            let Ok(object) = self.repo.find_object(now) else {
                return Ok(false);
            };
            self.adopt(now, object.kind, &object.data);
            let entries = self.tree_entries_with_modes(now)?;
            let old: HashMap<String, (Oid, gix::objs::tree::EntryMode)> = match before {
                Some(b) => self
                    .tree_entries_with_modes(b)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(n, id, m)| (n, (id, m)))
                    .collect(),
                None => HashMap::new(),
            };
            for (name, id, mode) in entries {
                let was = old.get(&name);
                if was.is_some_and(|(o, _)| *o == id) {
                    continue;
                }
                if mode.is_tree() {
                    stack.push((was.filter(|(_, m)| m.is_tree()).map(|(o, _)| *o), id));
                } else if !mode.is_commit() {
                    let Ok(blob) = self.repo.find_object(id) else {
                        return Ok(false);
                    };
                    self.adopt(id, blob.kind, &blob.data);
                }
            }
        }
        Ok(true)
    }

    /// A tree's entries with their modes.
    fn tree_entries_with_modes(
        &self,
        tree: Oid,
    ) -> Result<Vec<(String, Oid, gix::objs::tree::EntryMode)>, StoreError> {
        let found = self
            .repo
            .find_tree(tree)
            .map_err(|e| StoreError::git(format!("reading tree {tree}"), e))?;
        let decoded = found
            .decode()
            .map_err(|e| StoreError::git(format!("decoding tree {tree}"), e))?;
        Ok(decoded
            .entries
            .iter()
            .map(|e| (e.filename.to_string(), e.oid.into(), e.mode))
            .collect())
    }

    /// Makes one object file as durable as [`Durability`] asks; its
    /// write-back was started when it was written.
    fn make_durable(&self, file: &std::fs::File, ordered: bool) -> std::io::Result<()> {
        match self.durability {
            Durability::Unsynced => Ok(()),
            Durability::Ordered if ordered => Ok(()),
            Durability::Ordered => finish_writeout(file),
            Durability::Full => file.sync_data(),
        }
    }

    /// Before a ref update: every object written so far is on the disk as
    /// far as [`Durability`] asks.
    pub(super) fn flush_objects(&self) -> Result<(), StoreError> {
        if !self.journaled() {
            return Ok(());
        }
        let objects = self.objects_dir();
        let (open, folders) = with_journal(&objects, |j| {
            (
                j.open.drain(..).collect::<Vec<_>>(),
                std::mem::take(&mut j.folders),
            )
        });
        let ordered = !open.is_empty() && starting_orders(&objects);
        for f in &open {
            self.make_durable(f, ordered)
                .map_err(|e| StoreError::io("writing objects to the disk", e))?;
        }
        if self.durability == Durability::Full && !folders.is_empty() {
            for folder in &folders {
                sync_folder(folder).map_err(|e| {
                    StoreError::io(format!("writing {} to the disk", folder.display()), e)
                })?;
            }
            // A fan-out folder made for these objects is a name in here.
            sync_folder(&objects)
                .map_err(|e| StoreError::io("writing the object folder to the disk", e))?;
        }
        Ok(())
    }

    /// After refs moved: the objects written before are checked to still
    /// exist (what vanished is written again, until a check finds it all)
    /// and handed to the background checks of the grace period. Fails only
    /// when an object that vanished was too large to keep in memory, or
    /// kept vanishing.
    pub(super) fn settle_published(&self) -> Result<(), StoreError> {
        if !self.journaled() {
            return Ok(());
        }
        let objects = self.objects_dir();
        let now = Instant::now();
        let owner = self.owner();
        let published = with_journal(&objects, |j| j.publish(now, |w| owner.publishes(w)));
        if published.is_empty() {
            return Ok(());
        }
        ensure_healer();
        self.heal(&objects, &published)
    }

    /// This store, on this thread, as the writer of objects.
    fn owner(&self) -> Owner {
        Owner {
            store: self.id,
            thread: std::thread::current().id(),
        }
    }

    /// For a store that goes: what it wrote and never published is
    /// published now (a ref update of another store may have named it), so
    /// it is checked through the grace period instead of never.
    fn release_pending(&self) {
        if !self.journaled() {
            return;
        }
        let store = self.id;
        let now = Instant::now();
        let released = with_journal(&self.objects_dir(), |j| {
            !j.publish(now, |w| w.owner.store == store).is_empty()
        });
        if released {
            ensure_healer();
        }
    }

    /// Writes again every one of `objects` that no longer exists, until a
    /// check finds all of them.
    fn heal(&self, dir: &Path, objects: &[Written]) -> Result<(), StoreError> {
        for round in 0..HEAL_ROUNDS {
            let n = rewrite_missing(
                dir,
                objects,
                |id| gix::objs::Exists::exists(&self.repo.objects, id.as_gix()),
                |kind, bytes| self.write_loose(kind, bytes),
                self.durability,
            )?;
            if n == 0 {
                return Ok(());
            }
            // A prune is deleting what it could not reach when its walk
            // began; let it get past these folders before checking again.
            std::thread::sleep(Duration::from_millis(2 << round.min(6)));
        }
        Err(StoreError::ObjectsKeepVanishing {
            example: objects[0].id,
        })
    }

    /// Writes again every object of the journal (pending or published)
    /// that is gone; how many.
    pub(super) fn heal_missing(&self) -> usize {
        if !self.journaled() {
            return 0;
        }
        let objects = self.objects_dir();
        let all: Vec<Written> = with_journal(&objects, |j| {
            j.pending.iter().chain(j.published()).cloned().collect()
        });
        rewrite_missing(
            &objects,
            &all,
            |id| gix::objs::Exists::exists(&self.repo.objects, id.as_gix()),
            |kind, bytes| self.write_loose(kind, bytes),
            self.durability,
        )
        .unwrap_or(0)
    }

    /// Runs `op`; when it fails and objects this process wrote were gone
    /// (a prune took them after their ref moved, before the next check),
    /// writes them again and runs `op` once more (a few times at most).
    /// For reads that gix or git make inside (walks, diffs, checkouts),
    /// where [`Store::recover_object`] cannot step in.
    pub fn retrying<T>(
        &self,
        mut op: impl FnMut() -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        for round in 0..HEAL_ROUNDS {
            let healed = self.healed_objects();
            match op() {
                // Also when the background checks wrote something again
                // while `op` ran: what it missed may be there now.
                Err(e)
                    if self.heal_missing() > 0
                        || self.healed_objects() != healed
                        || is_transient(&e.to_string()) =>
                {
                    pause(round);
                }
                other => return other,
            }
        }
        op()
    }

    /// [`Store::retrying`] for a `git` subprocess that writes objects:
    /// also runs it again when git could not make a file in a fan-out
    /// folder a prune removed under it.
    pub fn retrying_transient<T>(
        &self,
        mut op: impl FnMut() -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        for round in 0..HEAL_ROUNDS {
            let healed = self.healed_objects();
            match op() {
                Err(e)
                    if is_vanished_folder(&e.to_string())
                        || self.heal_missing() > 0
                        || self.healed_objects() != healed =>
                {
                    pause(round);
                }
                other => return other,
            }
        }
        op()
    }

    /// Writes `id` again if this process wrote it recently and still holds
    /// its bytes: a read that found it missing (a prune deleted it after
    /// its ref moved, before the next check) then finds it. Whether it did.
    pub(super) fn recover_object(&self, id: Oid) -> bool {
        if !self.journaled() {
            return false;
        }
        let objects = self.objects_dir();
        let found = with_journal(&objects, |j| {
            j.pending
                .iter()
                .chain(j.published())
                .find(|w| w.id == id)
                .cloned()
        });
        let Some(w) = found else {
            return false;
        };
        if w.data.is_none() {
            return false;
        }
        // There again (the background checks wrote it meanwhile): the
        // read may try once more. Never written over when present: an
        // unreadable file is not what a prune leaves.
        if std::fs::symlink_metadata(loose_path(&objects, id.as_gix())).is_ok() {
            return true;
        }
        rewrite_missing(
            &objects,
            std::slice::from_ref(&w),
            |id| gix::objs::Exists::exists(&self.repo.objects, id.as_gix()),
            |kind, bytes| self.write_loose(kind, bytes),
            self.durability,
        )
        .is_ok_and(|n| n > 0)
    }

    /// Runs a read of `id`; if it fails because `id` is missing, runs it
    /// again: at once and a few times more when anyone may have written
    /// it, for as long as it takes when this process can write it again
    /// ([`Store::recover_object`]).
    ///
    /// Two things make an object look missing. A prune that began its
    /// walk before the ref update may still be at work and delete it
    /// again before it is read: written again and read again, with
    /// growing pauses, until it stays. And a `git repack -a -d` beside
    /// the read moves it to a new pack and deletes the old one: gix, which
    /// found it in the old pack's index, now and then answers "not found"
    /// for an object that sits in the new pack (about one run in forty
    /// beside a looped repack, under load). git reads its pack folder
    /// again and tries once more on any miss; so does this.
    pub(super) fn healing<T, E: std::fmt::Display>(
        &self,
        id: Oid,
        mut read: impl FnMut() -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        let mut round = 0;
        loop {
            match read() {
                Err(e)
                    if round < HEAL_ROUNDS
                        && is_missing(&e.to_string())
                        && (self.recover_object(id) || round < REPACK_RETRIES) =>
                {
                    pause(round);
                    round += 1;
                }
                other => return other,
            }
        }
    }

    /// Makes sure `id` is there if this process can write it again: for
    /// lookups that cannot be repeated through [`Store::healing`].
    pub(super) fn ensure_present(&self, id: Oid) {
        for round in 0..HEAL_ROUNDS {
            if gix::objs::Exists::exists(&self.repo.objects, id.as_gix())
                || !self.recover_object(id)
            {
                return;
            }
            pause(round);
        }
    }

    /// gix's lookup of `id` into `buffer`, looked up again when it says
    /// "not found" as [`Store::healing`] does: for the reads gix makes
    /// inside, through [`gix::objs::Find`] (the tree editor's).
    pub(super) fn find_retrying<'a>(
        &self,
        id: &gix::hash::oid,
        buffer: &'a mut Vec<u8>,
    ) -> gix::Result<Option<gix::objs::Data<'a>>> {
        let mut round = 0;
        let found = loop {
            self.ensure_present(id.into());
            // Only what the found object says is kept, so that `buffer`
            // is free for the next round; its bytes are `buffer` itself.
            let found = gix::objs::Find::try_find(&self.repo.objects, id, buffer)?.map(|d| {
                (
                    d.kind,
                    d.object_hash,
                    d.data.as_ptr() as usize,
                    d.data.len(),
                )
            });
            match found {
                None if round < REPACK_RETRIES => {
                    pause(round);
                    round += 1;
                }
                found => break found,
            }
        };
        match found {
            None => Ok(None),
            Some((kind, object_hash, at, len)) if at == buffer.as_ptr() as usize => {
                Ok(Some(gix::objs::Data {
                    kind,
                    object_hash,
                    data: &buffer[..len],
                }))
            }
            // Not in `buffer` after all (no store gix has does this): ask
            // once more and hand its answer on as it is.
            Some(_) => gix::objs::Find::try_find(&self.repo.objects, id, buffer),
        }
    }

    /// How many objects this process wrote again after they vanished.
    pub fn healed_objects(&self) -> u64 {
        with_journal(&self.objects_dir(), |j| j.healed)
    }
}

/// Waits a little before round `round` of writing objects again: a prune
/// still at work gets past their folders.
fn pause(round: u32) {
    if round > 0 {
        std::thread::sleep(Duration::from_millis(1 << round.min(6)));
    }
}

/// Whether a read failed because the object is not there (as opposed to
/// being there and unreadable, or not what was expected).
fn is_missing(message: &str) -> bool {
    message.contains("could not be found") || message.contains("No such file or directory")
}

/// Whether a failure of git beside git's maintenance is worth one more
/// try: a commit-graph or pack replaced while git read it.
fn is_transient(message: &str) -> bool {
    message.contains("commit-graph")
        || message.contains("packfile") && message.contains("No such file")
}

/// Whether git failed to make a file in a fan-out folder that a prune
/// removed under it.
fn is_vanished_folder(message: &str) -> bool {
    message.contains("unable to create temporary file")
        || (message.contains("unable to write file")
            && message.contains("No such file or directory"))
}

/// Whether a failed loose write failed because its fan-out folder was
/// removed between its creation and the rename into it.
fn folder_vanished(e: &gix::Error) -> bool {
    let message = super::error::chain(e);
    message.contains("Could not persist loose object")
        || message.contains("Could not create object directory")
        || message.contains("No such file or directory")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `git prune --expire=2.weeks.ago` removes every empty fan-out
    /// folder; one made by gix for an object is empty until the object is
    /// renamed into it. A thread doing what prune does to folders, beside
    /// a thousand writes, made some of them fail before the retry.
    #[test]
    fn writes_survive_fan_out_folders_removed_under_them() {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        // The remover can only catch a folder empty between gix making it
        // and the object landing in it, and once every folder holds an
        // object there is nothing left to catch: fresh repositories, until
        // it caught some (a loaded machine may give it no turn at first).
        let objects = Arc::new(Mutex::new(PathBuf::new()));
        let (stop, removed) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicU64::new(0)),
        );
        let remover = {
            let (objects, stop, removed) = (objects.clone(), stop.clone(), removed.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let dir = objects.lock().expect("path").clone();
                    for i in 0..256 {
                        // rmdir(2) removes only an empty folder, as prune.
                        if std::fs::remove_dir(dir.join(format!("{i:02x}"))).is_ok() {
                            removed.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                }
            })
        };
        for repo in 0..5 {
            let dir = tempfile::tempdir().expect("tempdir");
            let store = Store::init_for_tests(dir.path());
            *objects.lock().expect("path") = dir.path().join(".git/objects");
            for i in 0..2000 {
                store
                    .write_blob(format!("blob {i}\n").as_bytes())
                    .unwrap_or_else(|e| panic!("repository {repo}, write {i}: {e}"));
            }
            if removed.load(Ordering::SeqCst) > 0 {
                break;
            }
        }
        stop.store(true, Ordering::SeqCst);
        remover.join().expect("remover");
        assert!(removed.load(Ordering::SeqCst) > 0, "no folder was removed");
    }

    /// git's own fsync settings choose `Full`; anything else, `Ordered`.
    #[test]
    fn git_fsync_settings_choose_the_mode() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut store = Store::init_for_tests(dir.path());
        assert_eq!(store.durability(), Durability::Ordered);
        let git = crate::process::Git::new(dir.path())
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1");
        for (key, value, mode) in [
            ("core.fsync", "pack,index", Durability::Ordered),
            ("core.fsync", "pack, committed", Durability::Full),
            ("core.fsync", "reference", Durability::Full),
            ("core.fsync", "none", Durability::Ordered),
        ] {
            git.run(["config", key, value]).expect("config");
            store.reload().expect("reload");
            assert_eq!(store.durability(), mode, "{key}={value}");
        }
        git.run(["config", "core.fsyncObjectFiles", "true"])
            .expect("config");
        store.reload().expect("reload");
        assert_eq!(store.durability(), Durability::Full);
    }

    /// Appends with `fsync` (objects, their folders, ref files and
    /// folders) work and read back; a path that is not there is never
    /// taken for a file system that orders write-back.
    #[test]
    fn full_durability_appends_and_reads_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut store = Store::init_for_tests(dir.path());
        store.set_durability(Durability::Full);
        for n in 0..3 {
            store
                .append(vec![crate::event::Event::DebugMarker {
                    label: "fsynced".into(),
                    n,
                }])
                .expect("append");
        }
        assert_eq!(store.read_log().expect("log").entries.len(), 3);
        assert!(!starting_orders(&dir.path().join("not-there")));
    }

    /// A blob, a tree holding it and a commit of that tree, written by
    /// `store`: what an operation publishes.
    fn blob_tree_commit(store: &Store, text: &str) -> [Oid; 3] {
        let blob = store.write_blob(text.as_bytes()).expect("blob");
        let tree = store.write_tree(&[("f", blob)]).expect("tree");
        let commit = store.write_commit(text, tree, &[]).expect("commit");
        [blob, tree, commit]
    }

    /// Deletes loose objects, as a prune does.
    fn prune(objects: &Path, ids: &[Oid]) {
        for id in ids {
            std::fs::remove_file(loose_path(objects, id.as_gix())).expect("delete");
        }
    }

    /// Makes `name` (new) point at `commit`.
    fn publish_at(store: &Store, name: &str, commit: Oid) {
        let update = super::super::refs::RefUpdate::set(
            name,
            commit,
            super::super::refs::Expected::Absent,
            "test",
        );
        store.apply(&[update]).expect("apply");
    }

    fn assert_back(objects: &Path, ids: &[Oid]) {
        for id in ids {
            assert!(loose_path(objects, id.as_gix()).is_file(), "{id} is back");
        }
    }

    /// An object deleted after the ref that names it moved is written
    /// again by the next check, from memory.
    #[test]
    fn vanished_objects_are_written_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::init_for_tests(dir.path());
        let ids = blob_tree_commit(&store, "precious\n");
        let objects = dir.path().join(".git/objects");
        prune(&objects, &ids);
        publish_at(&store, "refs/orch/test", ids[2]);
        assert_back(&objects, &ids);
        assert_eq!(store.read_blob(ids[0]).expect("read"), b"precious\n");
        assert!(store.healed_objects() >= 3);
    }

    /// Objects are published by their writer's own ref update, not by
    /// another store's on another thread: an attempt's result is taken in
    /// seconds before its branch names it, while the driver's other
    /// threads move refs. Counted from that other update, the grace period
    /// ran out first, and a prune that took the objects after the branch
    /// moved left it naming a missing commit.
    #[test]
    fn another_writers_ref_update_does_not_start_an_objects_grace_period() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::init_for_tests(dir.path());
        let ids = blob_tree_commit(&store, "result\n");
        let path = dir.path().to_owned();
        std::thread::spawn(move || {
            let other = Store::open(&path).expect("open");
            let [_, _, commit] = blob_tree_commit(&other, "other\n");
            publish_at(&other, "refs/orch/test-other", commit);
        })
        .join()
        .expect("other writer");
        std::thread::sleep(GRACE + Duration::from_millis(100));
        // A prune whose walk began before the branch moved deletes them
        // just as it moves.
        let objects = dir.path().join(".git/objects");
        prune(&objects, &ids);
        publish_at(&store, "refs/orch/test", ids[2]);
        assert_back(&objects, &ids);
    }
}
