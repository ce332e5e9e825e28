//! The state index: the fold of the log, kept up to date by reading only
//! what changed, and cached on disk so the next process starts where the
//! last one stopped.
//!
//! Reading state by folding every event ever written costs more with every
//! run. The index instead remembers, for every log ref, the tip it has
//! folded; a refresh asks the store what each ref gained since
//! ([`Store::log_changes`] compares trees by id, so the cost follows the
//! size of the change) and folds only the new records. Records are grouped
//! by run: a run's state is the fold of that run's records alone, so an
//! event that arrives late from another clone (a lower clock than what was
//! already folded) refolds one run, never the history.
//!
//! The cache lives under `.git/orch/state/`: `index.json` (the tips it
//! covers, the unfinished runs, the newest finished one, the newest
//! landing per target, unreadable records, and the names of the catalog's
//! shards), `runs/<run>.<hash>.json` (one run's records) and
//! `catalog/<hash>.json` (the [`Value`]s readers look up by key: finished
//! runs, which run landed a commit, gated a tree or owns a branch). What a
//! reader touches stays the same size however long the history grows. Run
//! files and shards are named by their content and written before the
//! index that names them, which is renamed into place, so a reader always
//! sees a consistent snapshot and two processes saving at once cannot mix
//! theirs. Each save (one at a time) removes what the newest index no
//! longer names once it has been unnamed for a grace period, so the cache
//! holds one copy of each run, not one per save; a reader whose files
//! were removed anyway reads the newest index again
//! ([`StateIndex::recovering`]).
//! The cache is never the truth: it is keyed by the tips it was built
//! from, a ref that moved anywhere but forward (entries removed or
//! replaced), disappeared, or whose folded tip cannot be read any more
//! (pruned after a reset) makes it rebuild from the log, and deleting the
//! folder only costs one full read.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{RunState, fold};
use crate::event::{Event, Record};
use crate::ids::{PlanId, RunId, WriterId};
use crate::store::log::{Entry, Found, Problem};
use crate::store::{Oid, Store, StoreError};

/// A record's place in the global order: (clock, writer, seq).
type Order = (u64, String, u64);

/// The cache format; a cache of another format is rebuilt. (4: run files
/// are named `<run>.<hash>.json`, and the last landing on a target is kept
/// per writer.)
const CACHE_FORMAT: u32 = 4;
/// How long a cache file no index names any more is kept: a reader that
/// loaded an index naming it a moment before it was retired still finds
/// it. One that finds it gone anyway reads the newest index again (see
/// [`StateIndex::recovering`]).
const GRACE: std::time::Duration = std::time::Duration::from_secs(10);
/// How long a save waits for another process's save before leaving its
/// work for a later one (the cache is only an optimisation).
const SAVE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);
/// The lock a save holds while it writes files, replaces `index.json` and
/// removes what that index no longer names.
const SAVE_LOCK: &str = "lock";
/// Records folded since the last save after which a refresh saves on its
/// own, so short-lived readers rarely redo much of each other's work.
const SAVE_AFTER: usize = 64;
/// Catalog entries kept in the index before they are folded into their
/// shards.
const PENDING_LINKS: usize = 512;

/// What every reader needs to know about a run without loading it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunBrief {
    pub id: RunId,
    pub plan_id: PlanId,
    pub plan_hash: String,
    pub target: String,
    pub started_ms: i64,
    pub finished: bool,
    /// The clone that started the run.
    pub writer: Option<WriterId>,
    /// Records of the run.
    pub events: usize,
    /// Its run file, `None` until first saved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    file: Option<String>,
}

/// A record as the index keeps it: with the blob it was read from, which
/// identifies it across copies of a log.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Stored {
    blob: String,
    record: Record,
}

/// One run's records, loaded.
#[derive(Debug, Default)]
struct Slot {
    records: Vec<Stored>,
    blobs: HashSet<String>,
    state: Option<RunState>,
}

impl Slot {
    /// Adds records not seen yet; returns how many were new.
    fn add(&mut self, records: impl IntoIterator<Item = Stored>) -> usize {
        let mut added = 0;
        for r in records {
            if self.blobs.insert(r.blob.clone()) {
                self.records.push(r);
                added += 1;
            }
        }
        if added > 0 {
            self.records.sort_by(|a, b| {
                a.record
                    .order_key()
                    .cmp(&b.record.order_key())
                    .then(a.blob.cmp(&b.blob))
            });
            self.state = None;
        }
        added
    }

    fn state(&mut self, id: &RunId) -> Option<&RunState> {
        if self.state.is_none() {
            self.state = fold(self.records.iter().map(|s| &s.record)).remove(id);
        }
        self.state.as_ref()
    }
}

/// The catalog: what readers look up by key without loading every run.
/// Keys are `run:<id>` (a finished run's brief), `plan:<id>` (the newest
/// finished run of a plan), `commit:<hex>` (runs that landed a commit or
/// moved a target to it), `tree:<hex>` (runs with command-gate verdicts
/// on a tree), `branch:<name>` (the run of an attempt branch),
/// `approved-tree:<hex>` and `approved-branch:<name>` (the newest approval
/// of a person's branch by the tree it is bound to, and by its name) and
/// `hand:<hex>` (the hand landing that landed a commit or moved a target
/// to it) and `approval:<hex>` (a plan decision's commit, recorded by an
/// `approval_recorded` event of a well-formed log). It is
/// cut into [`SHARDS`] files by a hash of the key, so a lookup reads one
/// small file whatever the size of the history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
enum Value {
    Run(RunBrief),
    /// Runs, accumulated (set semantics).
    Runs(BTreeSet<RunId>),
    /// One run, the newest wins.
    Newest {
        run: RunId,
        started_ms: i64,
    },
    /// A branch approval; the latest folded wins.
    BranchApproval(super::BranchApproval),
    /// A hand landing; the latest folded wins.
    BranchLanding(super::BranchLanding),
    /// A plan decision recorded in the log: its plan.
    Decision(crate::ids::PlanId),
}

impl Value {
    /// `self` updated by `new`.
    fn merge(&mut self, new: Value) {
        match (self, new) {
            (Value::Runs(a), Value::Runs(b)) => a.extend(b),
            (
                Value::Newest { run, started_ms },
                Value::Newest {
                    run: r2,
                    started_ms: s2,
                },
            ) => {
                if s2 >= *started_ms {
                    *run = r2;
                    *started_ms = s2;
                }
            }
            (this, new) => *this = new,
        }
    }
}

/// Catalog shards kept in memory at most (beyond those not written yet).
const LOADED_SHARDS: usize = 4;
/// Catalog shards.
const SHARDS: usize = 256;

fn shard_of(key: &str) -> usize {
    blake3::hash(key.as_bytes()).as_bytes()[0] as usize % SHARDS
}

type Shard = BTreeMap<String, Value>;

/// The catalog entries a record adds.
fn catalog_of(record: &Record) -> Vec<(String, Value)> {
    let runs = |run: &RunId| Value::Runs(BTreeSet::from([run.clone()]));
    match &record.event {
        Event::Landed {
            run_id,
            new,
            commits,
            ..
        } => commits
            .iter()
            .chain(std::iter::once(new))
            .map(|c| (format!("commit:{c}"), runs(run_id)))
            .collect(),
        Event::AttemptResult { run_id, tree, .. }
        | Event::IntegrationVerdict { run_id, tree, .. } => {
            vec![(format!("tree:{tree}"), runs(run_id))]
        }
        Event::AttemptCreated { run_id, branch, .. } => {
            vec![(format!("branch:{branch}"), runs(run_id))]
        }
        Event::ApprovalRecorded {
            plan_id, commit, ..
        } => vec![(
            format!("approval:{commit}"),
            Value::Decision(plan_id.clone()),
        )],
        Event::BranchApproved { branch, tree, .. } => {
            let a = super::BranchApproval::of(record).expect("a branch_approved record");
            vec![
                (
                    format!("approved-tree:{tree}"),
                    Value::BranchApproval(a.clone()),
                ),
                (
                    format!("approved-branch:{branch}"),
                    Value::BranchApproval(a),
                ),
            ]
        }
        Event::BranchLanded { commits, new, .. } => {
            let l = super::BranchLanding::of(record).expect("a branch_landed record");
            commits
                .iter()
                .chain(std::iter::once(new))
                .map(|c| (format!("hand:{c}"), Value::BranchLanding(l.clone())))
                .collect()
        }
        _ => Vec::new(),
    }
}

/// `index.json`: small whatever the history holds.
#[derive(Debug, Default, Serialize, Deserialize)]
struct IndexFile {
    format: u32,
    /// Log ref → the tip folded.
    tips: BTreeMap<String, String>,
    /// Unfinished runs.
    open: BTreeMap<RunId, RunBrief>,
    /// The newest finished run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    newest_finished: Option<RunBrief>,
    /// Runs with records but no `run_started` yet (it is in a log not
    /// fetched yet), with their run file.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    orphans: BTreeMap<RunId, Option<String>>,
    problems: Vec<Problem>,
    /// Records that belong to no run (plans, approvals, markers), and in
    /// all.
    other_events: u64,
    events: u64,
    /// target → writer → (order, run) of the newest landing that writer
    /// recorded on it: a clone completes or voids only its own.
    last_landings: BTreeMap<String, BTreeMap<String, (Order, RunId)>>,
    /// The catalog's shard files, by shard number.
    shards: BTreeMap<usize, String>,
    /// Catalog entries not yet folded into their shards.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pending: Vec<(String, Value)>,
}

/// The folded state of the log, incrementally maintained.
#[derive(Debug)]
pub struct StateIndex {
    /// The repository whose log this folds, for reading it again when a
    /// cache file this index names is gone (another process's save
    /// removed it) or damaged.
    source: Source,
    /// The cache file a read just found gone or unreadable.
    gone: Option<PathBuf>,
    dir: PathBuf,
    file: IndexFile,
    tips: BTreeMap<String, Oid>,
    slots: HashMap<RunId, Slot>,
    /// Runs whose records changed since the last save.
    dirty: BTreeSet<RunId>,
    /// Catalog shards read so far.
    shards: HashMap<usize, Shard>,
    /// Records folded since the last save.
    unsaved: usize,
    /// Whether anything differs from what is on disk.
    changed: bool,
    /// A view of a push in progress (a server hook): never saved.
    read_only: bool,
}

/// A handle of the repository an index folds.
struct Source(Store);

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Source").field(&self.0.common_dir()).finish()
    }
}

impl StateIndex {
    /// The index of `store`'s log, brought up to date. Starts from the
    /// cache when there is a usable one.
    pub fn open(store: &Store) -> Result<Self, StoreError> {
        let (mut index, usable) = Self::load(store);
        crate::failpoint::hit("state.index-read");
        index.recovering(|ix| {
            if usable {
                ix.refresh_inner(store).map(drop)
            } else {
                let tips = store.log_tips()?.into_iter().collect();
                ix.rebuild(store, tips)
            }
        })?;
        Ok(index)
    }

    /// The index of `store`'s log for a reader that must write nothing
    /// (`git orch web`): it starts from the cache when there is a usable
    /// one and folds what the log gained since in memory, but never saves,
    /// so the repository stays exactly as it was however long it reads.
    pub fn open_read_only(store: &Store) -> Result<Self, StoreError> {
        let (mut index, usable) = Self::load(store);
        index.read_only = true;
        index.recovering(|ix| {
            if usable {
                ix.refresh_inner(store).map(drop)
            } else {
                let tips = store.log_tips()?.into_iter().collect();
                ix.rebuild(store, tips)
            }
        })?;
        Ok(index)
    }

    /// The newest saved index of `store`'s log as it is on disk, not
    /// brought up to date, and whether it was usable (else it is empty).
    fn load(store: &Store) -> (Self, bool) {
        let dir = store.orch_dir().join("state");
        let file = std::fs::read(dir.join("index.json"))
            .ok()
            .and_then(|bytes| serde_json::from_slice::<IndexFile>(&bytes).ok())
            .filter(|f| f.format == CACHE_FORMAT);
        let usable = file.is_some();
        let mut index = Self::new(dir, file.unwrap_or_default(), Source(store.handle()));
        index.read_only = store.is_view();
        (index, usable)
    }

    fn new(dir: PathBuf, file: IndexFile, source: Source) -> Self {
        let tips = file
            .tips
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), Oid::from_hex(v.as_bytes()).ok()?)))
            .collect();
        Self {
            source,
            gone: None,
            dir,
            file,
            tips,
            slots: HashMap::new(),
            dirty: BTreeSet::new(),
            shards: HashMap::new(),
            unsaved: 0,
            changed: false,
            read_only: false,
        }
    }

    /// Runs `f`, a read of this index; when it finds a cache file this
    /// index names gone (another process's save removed it once a newer
    /// index stopped naming it) or unreadable, starts again from the newest
    /// saved index brought up to date, and then, should that fail the same
    /// way, from the log itself (everything in memory), and runs `f` again.
    /// What the index had folded and not saved is read again from the log:
    /// nothing is lost, and a read never fails for the cache's sake.
    fn recovering<T>(
        &mut self,
        mut f: impl FnMut(&mut Self) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        for from_log in [false, true] {
            match f(self) {
                Err(_) if self.gone.take().is_some() => self.start_again(from_log)?,
                done => return done,
            }
        }
        let done = f(self);
        self.gone = None;
        done
    }

    /// Replaces this index by the newest saved one brought up to date
    /// (or, `from_log`, by a rebuild from the log).
    fn start_again(&mut self, from_log: bool) -> Result<(), StoreError> {
        let store = self.source.0.handle();
        let (mut fresh, usable) = Self::load(&store);
        // A read-only index stays read-only through a fresh start.
        fresh.read_only |= self.read_only;
        if usable && !from_log {
            let caught_up = fresh.refresh_inner(&store);
            if caught_up.is_err() {
                fresh.unsaved = 0;
                return if fresh.gone.is_some() {
                    self.start_again(true)
                } else {
                    caught_up.map(drop)
                };
            }
        } else {
            let tips = store.log_tips()?.into_iter().collect();
            fresh.rebuild(&store, tips)?;
        }
        // What this one folded and did not save is in `fresh` too, read
        // again from the log; never save the old one over it.
        self.unsaved = 0;
        *self = fresh;
        Ok(())
    }

    /// Folds what the log gained since the last refresh. Returns whether
    /// anything changed.
    pub fn refresh(&mut self, store: &Store) -> Result<bool, StoreError> {
        self.recovering(|ix| ix.refresh_inner(store))
    }

    fn refresh_inner(&mut self, store: &Store) -> Result<bool, StoreError> {
        let now: BTreeMap<String, Oid> = store.log_tips()?.into_iter().collect();
        if now == self.tips {
            return Ok(false);
        }
        let mut added: Vec<Found> = Vec::new();
        let mut rebuild = self.tips.keys().any(|name| !now.contains_key(name));
        if !rebuild {
            for (name, tip) in &now {
                let old = self.tips.get(name).copied();
                if old == Some(*tip) {
                    continue;
                }
                // A tip folded before that cannot be read any more (the ref
                // was set back and `git gc` pruned it, or objects were lost
                // and the ref repaired) cannot be compared with: like a ref
                // moved other than forward, start over from every ref as it
                // is, which never needs the old tips. (Damage at the tip
                // itself is met again there, and named.)
                let Ok(changes) = store.log_changes(name, old, *tip) else {
                    rebuild = true;
                    break;
                };
                if !changes.lost.is_empty() {
                    // Not append-only: start over from every ref as it is.
                    rebuild = true;
                    break;
                }
                // What commits git-orch did not write add is not folded:
                // it may be a forgery made with plain git.
                let Ok(forged) = store.check_log_commits(name, old, *tip) else {
                    rebuild = true;
                    break;
                };
                let trusted = trusted_below(&forged);
                added.extend(
                    changes
                        .added
                        .into_iter()
                        .filter(|f| f.seq.is_some_and(|s| s < trusted)),
                );
                self.add_problems(forged);
            }
        }
        if rebuild {
            self.rebuild(store, now)?;
            return Ok(true);
        }
        // Copies of one log (local and remote-tracking) hold the same blobs.
        let mut seen = HashSet::new();
        added.retain(|f| seen.insert(f.id));
        let (entries, problems) = store.read_found(added);
        self.add_problems(problems);
        self.tips = now;
        self.fold_in(entries)?;
        self.changed = true;
        if self.unsaved >= SAVE_AFTER {
            self.save_inner()?;
        }
        Ok(true)
    }

    /// Starts over from the whole log.
    fn rebuild(&mut self, store: &Store, tips: BTreeMap<String, Oid>) -> Result<(), StoreError> {
        let mut view = store.read_log()?;
        // Logs with commits git-orch did not write are not folded (see
        // `refresh`).
        for (name, tip) in &tips {
            // A log whose objects are missing or unreadable (a crash, a
            // prune) stops the command with the repair to run: folding
            // around it would forget what this clone did and redo it. A
            // log whose commits cannot all be read otherwise is not
            // trusted at all (`read_log` reported what it could not read);
            // the others still count.
            let forged = match store.check_log_commits(name, None, *tip) {
                Ok(forged) => forged,
                Err(e) => match e.at_ref(name) {
                    damaged @ StoreError::Damaged { .. } => return Err(damaged),
                    e => vec![Problem {
                        reference: name.clone(),
                        seq: None,
                        path: tip.to_string(),
                        reason: format!("its commits cannot all be read: {e}"),
                    }],
                },
            };
            let trusted = trusted_below(&forged);
            view.entries
                .retain(|e| e.reference != *name || e.record.seq < trusted);
            view.problems.extend(forged);
        }
        let read_only = self.read_only;
        let source = Source(self.source.0.handle());
        // Nothing of the old state is kept, nor saved on its way out.
        self.unsaved = 0;
        *self = Self::new(
            self.dir.clone(),
            IndexFile {
                format: CACHE_FORMAT,
                ..Default::default()
            },
            source,
        );
        self.read_only = read_only;
        // Nothing of the old catalog is trusted: every shard is rewritten.
        for n in 0..SHARDS {
            self.shards.insert(n, Shard::new());
        }
        self.tips = tips;
        self.add_problems(view.problems);
        self.fold_in(view.entries)?;
        self.changed = true;
        self.save_inner()
    }

    fn add_problems(&mut self, problems: Vec<Problem>) {
        for p in problems {
            if !self.file.problems.contains(&p) {
                self.file.problems.push(p);
            }
        }
    }

    /// Routes new records to their runs and refolds those runs.
    fn fold_in(&mut self, entries: Vec<Entry>) -> Result<(), StoreError> {
        let mut by_run: BTreeMap<RunId, Vec<Stored>> = BTreeMap::new();
        for e in entries {
            self.file.events += 1;
            self.unsaved += 1;
            for (key, value) in catalog_of(&e.record) {
                self.catalog_put(key, value);
            }
            if let Event::Landed { run_id, target, .. } = &e.record.event {
                let writer = e.record.writer.to_string();
                let order = (e.record.clock, writer.clone(), e.record.seq);
                let by_writer = self.file.last_landings.entry(target.clone()).or_default();
                if by_writer.get(&writer).is_none_or(|(o, _)| order > *o) {
                    by_writer.insert(writer, (order, run_id.clone()));
                }
            }
            let stored = Stored {
                blob: e.id.to_string(),
                record: e.record,
            };
            match stored.record.event.run_id() {
                Some(run) => by_run.entry(run.clone()).or_default().push(stored),
                None => self.file.other_events += 1,
            }
        }
        for (run, records) in by_run {
            let previous = self.brief_inner(&run)?;
            let slot = self.slot_with(&run, previous.as_ref())?;
            if slot.add(records) == 0 {
                continue;
            }
            let events = slot.records.len();
            let state = slot.state(&run).cloned();
            self.dirty.insert(run.clone());
            let Some(state) = state else {
                // Records of a run whose start has not arrived yet: kept,
                // and shown once `run_started` comes.
                self.file.orphans.entry(run).or_default();
                continue;
            };
            let file = match self.file.orphans.remove(&run) {
                Some(f) => f,
                None => previous.and_then(|b| b.file),
            };
            self.set_brief(RunBrief {
                id: run.clone(),
                plan_id: state.plan_id.clone(),
                plan_hash: state.plan_hash.clone(),
                target: state.target.clone(),
                started_ms: state.started_ms,
                finished: state.finished.is_some(),
                writer: state.drivers.first().map(|d| d.writer.clone()),
                events,
                file,
            });
        }
        Ok(())
    }

    /// Records where a run stands: open runs in the index itself, finished
    /// ones in the catalog.
    fn set_brief(&mut self, brief: RunBrief) {
        let id = brief.id.clone();
        if brief.finished {
            self.file.open.remove(&id);
            let newer = self
                .file
                .newest_finished
                .as_ref()
                .is_none_or(|n| n.id == id || brief.started_ms >= n.started_ms);
            if newer {
                self.file.newest_finished = Some(brief.clone());
            }
            self.catalog_put(
                format!("plan:{}", brief.plan_id),
                Value::Newest {
                    run: id.clone(),
                    started_ms: brief.started_ms,
                },
            );
            self.catalog_put(format!("run:{id}"), Value::Run(brief));
        } else {
            if self
                .file
                .newest_finished
                .as_ref()
                .is_some_and(|n| n.id == id)
            {
                self.file.newest_finished = None;
            }
            self.file.open.insert(id, brief);
        }
    }

    fn catalog_put(&mut self, key: String, value: Value) {
        let n = shard_of(&key);
        if let Some(shard) = self.shards.get_mut(&n) {
            match shard.get_mut(&key) {
                Some(v) => v.merge(value.clone()),
                None => {
                    shard.insert(key.clone(), value.clone());
                }
            }
        }
        self.file.pending.push((key, value));
        self.changed = true;
    }

    /// The catalog's value for `key`: its shard, updated by what is
    /// pending.
    fn catalog_get(&mut self, key: &str) -> Result<Option<Value>, StoreError> {
        let n = shard_of(key);
        self.load_shard(n)?;
        let found = self.shards[&n].get(key).cloned();
        // A long-lived reader (a run's driver) would otherwise end up with
        // every shard in memory. One on disk is its file plus what is
        // pending, so it can always be read again; only shards not written
        // yet must stay.
        if self.shards.len() > LOADED_SHARDS {
            let written = &self.file.shards;
            self.shards
                .retain(|m, _| *m == n || !written.contains_key(m));
        }
        Ok(found)
    }

    fn load_shard(&mut self, n: usize) -> Result<(), StoreError> {
        if self.shards.contains_key(&n) {
            return Ok(());
        }
        let mut shard: Shard = match self.file.shards.get(&n) {
            Some(name) => self.read_cached(&self.dir.join("catalog").join(name))?,
            None => Shard::new(),
        };
        for (key, value) in self.file.pending.iter().filter(|(k, _)| shard_of(k) == n) {
            match shard.get_mut(key) {
                Some(v) => v.merge(value.clone()),
                None => {
                    shard.insert(key.clone(), value.clone());
                }
            }
        }
        self.shards.insert(n, shard);
        Ok(())
    }

    /// The brief of `run`: open, or finished (from the catalog).
    pub fn brief(&mut self, run: &RunId) -> Result<Option<RunBrief>, StoreError> {
        self.recovering(|ix| ix.brief_inner(run))
    }

    fn brief_inner(&mut self, run: &RunId) -> Result<Option<RunBrief>, StoreError> {
        if let Some(b) = self.file.open.get(run) {
            return Ok(Some(b.clone()));
        }
        if let Some(b) = self.file.newest_finished.as_ref().filter(|b| b.id == *run) {
            return Ok(Some(b.clone()));
        }
        Ok(match self.catalog_get(&format!("run:{run}"))? {
            Some(Value::Run(b)) => Some(b),
            _ => None,
        })
    }

    /// Reads one cache file. One that is gone or unreadable is remembered
    /// ([`StateIndex::gone`]): the read is then made again from a newer
    /// index (see [`StateIndex::recovering`]).
    fn read_cached<T: serde::de::DeserializeOwned>(
        &mut self,
        path: &Path,
    ) -> Result<T, StoreError> {
        let read = std::fs::read(path)
            .map_err(|e| e.to_string())
            .and_then(|bytes| serde_json::from_slice(&bytes).map_err(|e| e.to_string()));
        read.map_err(|why| {
            self.gone = Some(path.to_owned());
            StoreError::StateCache {
                path: path.to_owned(),
                folder: self.dir.clone(),
                why,
            }
        })
    }

    /// The loaded records of `run` (empty for a run not seen yet).
    fn slot_with(
        &mut self,
        run: &RunId,
        brief: Option<&RunBrief>,
    ) -> Result<&mut Slot, StoreError> {
        if !self.slots.contains_key(run) {
            let mut slot = Slot::default();
            let file = match brief {
                Some(b) => b.file.clone(),
                None => self.file.orphans.get(run).cloned().flatten(),
            };
            if let Some(file) = file {
                let records: Vec<Stored> = self.read_cached(&self.dir.join("runs").join(&file))?;
                slot.add(records);
            }
            self.slots.insert(run.clone(), slot);
        }
        Ok(self.slots.get_mut(run).expect("inserted above"))
    }

    /// Writes what changed: run files, touched catalog shards, then the
    /// index naming them, and removes the files no index needs any more
    /// (see [`StateIndex::collect_garbage`]). A view of a push in progress
    /// is never saved.
    pub fn save(&mut self) -> Result<(), StoreError> {
        self.recovering(|ix| ix.save_inner())
    }

    fn save_inner(&mut self) -> Result<(), StoreError> {
        if self.read_only || !self.changed {
            return Ok(());
        }
        // One save at a time: the files the newest index names are then
        // never another save's garbage.
        let _saving = match crate::store::lock::acquire(
            &self.dir.join(SAVE_LOCK),
            "saving the state cache",
            SAVE_WAIT,
        ) {
            Ok(guard) => guard,
            // Left for a later save (or another process's).
            Err(StoreError::Busy { .. }) => return Ok(()),
            Err(e) => return Err(e),
        };
        let runs_dir = self.dir.join("runs");
        for run in std::mem::take(&mut self.dirty) {
            let Some(slot) = self.slots.get(&run) else {
                continue;
            };
            let bytes = serde_json::to_vec(&slot.records).expect("records serialise");
            let name = write_named(&runs_dir, &format!("{run}."), &bytes)?;
            let previous = if let Some(brief) = self.file.open.get_mut(&run) {
                brief.file.replace(name.clone())
            } else if let Some(file) = self.file.orphans.get_mut(&run) {
                file.replace(name.clone())
            } else if let Some(mut brief) = self.brief_inner(&run)? {
                let previous = brief.file.replace(name.clone());
                if self
                    .file
                    .newest_finished
                    .as_ref()
                    .is_some_and(|n| n.id == run)
                {
                    self.file.newest_finished = Some(brief.clone());
                }
                self.catalog_put(format!("run:{run}"), Value::Run(brief));
                previous
            } else {
                None
            };
            if let Some(previous) = previous.filter(|p| *p != name) {
                stamp(&runs_dir.join(previous));
            }
        }
        let unwritten: Vec<usize> = self
            .shards
            .keys()
            .copied()
            .filter(|n| !self.file.shards.contains_key(n))
            .collect();
        if self.file.pending.len() > PENDING_LINKS || !unwritten.is_empty() {
            let touched: BTreeSet<usize> = self
                .file
                .pending
                .iter()
                .map(|(k, _)| shard_of(k))
                .chain(unwritten)
                .collect();
            let catalog = self.dir.join("catalog");
            for n in touched {
                self.load_shard(n)?;
                let bytes = serde_json::to_vec(&self.shards[&n]).expect("shards serialise");
                let name = write_named(&catalog, "", &bytes)?;
                if let Some(previous) = self.file.shards.insert(n, name.clone())
                    && previous != name
                    && !self.file.shards.values().any(|v| *v == previous)
                {
                    stamp(&catalog.join(previous));
                }
            }
            self.file.pending.clear();
        }
        self.file.tips = self
            .tips
            .iter()
            .map(|(k, v)| (k.clone(), v.to_string()))
            .collect();
        self.file.format = CACHE_FORMAT;
        let bytes = serde_json::to_vec(&self.file).expect("the index serialises");
        write_atomically(&self.dir.join("index.json"), &bytes)?;
        self.unsaved = 0;
        self.changed = false;
        self.collect_garbage();
        Ok(())
    }

    /// Removes the cache files the index just saved (the newest: saves
    /// hold [`SAVE_LOCK`]) does not name and that no index named for
    /// [`GRACE`] (a file's time is set when a save names it and when one
    /// stops naming it): catalog shards, run files replaced by newer ones
    /// and leftovers of crashed writes. Run files of finished runs are
    /// named only in the catalog, so only runs with more than one file are
    /// looked up, unless every shard is in memory anyway (a rebuild, a
    /// read of all history), when every run file is checked. Best effort:
    /// whatever stays is removed by a later save.
    fn collect_garbage(&mut self) {
        let now = std::time::SystemTime::now();
        let idle = |e: &std::fs::DirEntry| {
            e.metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| now.duration_since(t).ok())
                .is_some_and(|age| age > GRACE)
        };
        let remove = |e: &std::fs::DirEntry| {
            if idle(e) {
                let _ = std::fs::remove_file(e.path());
            }
        };
        let shards: HashSet<&str> = self.file.shards.values().map(String::as_str).collect();
        if let Ok(entries) = std::fs::read_dir(self.dir.join("catalog")) {
            entries
                .flatten()
                .filter(|e| !shards.contains(e.file_name().to_string_lossy().as_ref()))
                .for_each(|e| remove(&e));
        }
        let Ok(entries) = std::fs::read_dir(self.dir.join("runs")) else {
            return;
        };
        let mut by_run: BTreeMap<RunId, Vec<(String, std::fs::DirEntry)>> = BTreeMap::new();
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            match run_of_file(&name) {
                Some(run) => by_run.entry(run).or_default().push((name, e)),
                // Not a run file of this format: a temporary file of a
                // write that died, or an older format's.
                None => remove(&e),
            }
        }
        let every = self.shards.len() == SHARDS;
        for (run, files) in by_run {
            if files.len() < 2 && !every {
                continue;
            }
            let live = match self.file.orphans.get(&run) {
                Some(file) => Ok(file.clone()),
                None => self.brief_inner(&run).map(|b| b.and_then(|b| b.file)),
            };
            let Ok(live) = live else {
                // A shard that cannot be read: nothing is removed blind.
                self.gone = None;
                continue;
            };
            for (name, e) in &files {
                if live.as_deref() != Some(name.as_str()) {
                    remove(e);
                }
            }
        }
    }

    /// Unfinished runs.
    pub fn open_runs(&self) -> impl Iterator<Item = &RunBrief> {
        self.file.open.values()
    }

    /// The newest run: the newest unfinished one, else the newest finished.
    pub fn newest_run(&self) -> Option<&RunBrief> {
        self.file
            .open
            .values()
            .max_by_key(|b| b.started_ms)
            .or(self.file.newest_finished.as_ref())
    }

    /// The newest finished run of `plan`.
    pub fn last_finished_of_plan(&mut self, plan: &PlanId) -> Result<Option<RunBrief>, StoreError> {
        self.recovering(|ix| match ix.catalog_get(&format!("plan:{plan}"))? {
            Some(Value::Newest { run, .. }) => ix.brief_inner(&run),
            _ => Ok(None),
        })
    }

    /// Every run, briefly: reads the whole catalog (for commands that look
    /// at all history: cleanup, fsck, `log --task`).
    pub fn all_briefs(&mut self) -> Result<Vec<RunBrief>, StoreError> {
        self.recovering(|ix| (0..SHARDS).try_for_each(|n| ix.load_shard(n)))?;
        let mut out: BTreeMap<RunId, RunBrief> = BTreeMap::new();
        for shard in self.shards.values() {
            for v in shard.values() {
                if let Value::Run(b) = v {
                    out.insert(b.id.clone(), b.clone());
                }
            }
        }
        for b in self.file.open.values() {
            out.insert(b.id.clone(), b.clone());
        }
        Ok(out.into_values().collect())
    }

    /// Every run, briefly, as [`StateIndex::all_briefs`] gives them, but
    /// reading the catalog one shard at a time and keeping no shard it
    /// did not hold before: for a long-lived reader (`git orch web`),
    /// which would otherwise hold the whole catalog from its first list on.
    pub fn all_briefs_lean(&mut self) -> Result<Vec<RunBrief>, StoreError> {
        let mut out: BTreeMap<RunId, RunBrief> = BTreeMap::new();
        for n in 0..SHARDS {
            let held = self.shards.contains_key(&n);
            self.recovering(|ix| ix.load_shard(n))?;
            for v in self.shards[&n].values() {
                if let Value::Run(b) = v {
                    out.insert(b.id.clone(), b.clone());
                }
            }
            // One on disk can be read again (with what is pending).
            if !held && self.file.shards.contains_key(&n) {
                self.shards.remove(&n);
            }
        }
        for b in self.file.open.values() {
            out.insert(b.id.clone(), b.clone());
        }
        Ok(out.into_values().collect())
    }

    /// Lets go of what can be read again from the cache files: the
    /// records of finished runs that all came from their saved run file,
    /// and catalog shards saved on disk. Unfinished runs (read again
    /// soon) and whatever was folded but not saved stay. For a long-lived
    /// reader, whose memory would otherwise grow with every run it was
    /// asked about.
    pub fn trim(&mut self) {
        let (dirty, open) = (&self.dirty, &self.file.open);
        self.slots
            .retain(|run, _| dirty.contains(run) || open.contains_key(run));
        let written = &self.file.shards;
        self.shards.retain(|n, _| !written.contains_key(n));
    }

    /// The state of `run`, if the log has it.
    pub fn run(&mut self, run: &RunId) -> Result<Option<&RunState>, StoreError> {
        if !self.recovering(|ix| ix.load_run(run))? {
            return Ok(None);
        }
        Ok(self
            .slots
            .get_mut(run)
            .expect("load_run loaded it")
            .state(run))
    }

    /// Loads the records of `run` if the log has it; returns whether.
    fn load_run(&mut self, run: &RunId) -> Result<bool, StoreError> {
        let Some(brief) = self.brief_inner(run)? else {
            return Ok(false);
        };
        self.slot_with(run, Some(&brief))?;
        Ok(true)
    }

    /// The states of every unfinished run.
    pub fn unfinished(&mut self) -> Result<BTreeMap<RunId, RunState>, StoreError> {
        let ids: Vec<RunId> = self.file.open.keys().cloned().collect();
        self.states(ids)
    }

    /// The states of every run (reads all history).
    pub fn all_runs(&mut self) -> Result<BTreeMap<RunId, RunState>, StoreError> {
        let ids: Vec<RunId> = self.all_briefs()?.into_iter().map(|b| b.id).collect();
        self.states(ids)
    }

    /// The states of the runs `ids`.
    pub fn states(&mut self, ids: Vec<RunId>) -> Result<BTreeMap<RunId, RunState>, StoreError> {
        let mut out = BTreeMap::new();
        for id in ids {
            if let Some(s) = self.run(&id)? {
                out.insert(id, s.clone());
            }
        }
        Ok(out)
    }

    /// The records of `run`, in global order, with their blobs (the ref
    /// they were read from is not kept).
    pub fn entries_of(&mut self, run: &RunId) -> Result<Vec<Entry>, StoreError> {
        self.recovering(|ix| {
            let brief = ix.brief_inner(run)?;
            ix.slot_with(run, brief.as_ref()).map(drop)
        })?;
        self.slots
            .get(run)
            .expect("slot_with made it")
            .records
            .iter()
            .map(|s| {
                Ok(Entry {
                    id: Oid::from_hex(s.blob.as_bytes()).map_err(|e| {
                        StoreError::Corrupt(format!("the state cache names a bad blob id: {e}"))
                    })?,
                    reference: String::new(),
                    record: s.record.clone(),
                })
            })
            .collect()
    }

    /// Records that could not be read, with where they are.
    pub fn problems(&self) -> &[Problem] {
        &self.file.problems
    }

    /// How many records the log holds.
    pub fn event_count(&self) -> u64 {
        self.file.events
    }

    /// The catalog's value for `key`, for a reader.
    fn lookup(&mut self, key: &str) -> Result<Option<Value>, StoreError> {
        self.recovering(|ix| ix.catalog_get(key))
    }

    fn runs_at(&mut self, key: String) -> Result<Vec<RunId>, StoreError> {
        Ok(match self.lookup(&key)? {
            Some(Value::Runs(r)) => r.into_iter().collect(),
            _ => Vec::new(),
        })
    }

    /// The runs that landed `commit` (as one of a landing's commits or as
    /// the tip it moved the target to).
    pub fn runs_landing(&mut self, commit: &str) -> Result<Vec<RunId>, StoreError> {
        self.runs_at(format!("commit:{commit}"))
    }

    /// The runs holding command-gate verdicts on `tree`.
    pub fn runs_with_tree(&mut self, tree: &str) -> Result<Vec<RunId>, StoreError> {
        self.runs_at(format!("tree:{tree}"))
    }

    /// The run whose attempt has the branch `branch` (without `refs/heads/`).
    pub fn run_of_branch(&mut self, branch: &str) -> Result<Option<RunId>, StoreError> {
        Ok(self.runs_at(format!("branch:{branch}"))?.into_iter().next())
    }

    /// The newest approval of a person's branch bound to `tree`.
    pub fn branch_approval_for_tree(
        &mut self,
        tree: &str,
    ) -> Result<Option<super::BranchApproval>, StoreError> {
        Ok(match self.lookup(&format!("approved-tree:{tree}"))? {
            Some(Value::BranchApproval(a)) => Some(a),
            _ => None,
        })
    }

    /// Whether the log records the plan decision commit `commit` (an
    /// `approval_recorded` event from a log commit git-orch wrote) as a
    /// decision on plan `plan`: an approvals ref moved by anything else
    /// names a commit no record does.
    pub fn decision_recorded(
        &mut self,
        commit: &str,
        plan: &crate::ids::PlanId,
    ) -> Result<bool, StoreError> {
        Ok(matches!(
            self.lookup(&format!("approval:{commit}"))?,
            Some(Value::Decision(p)) if p == *plan
        ))
    }

    /// The newest approval of the branch `branch`, whatever its tree.
    pub fn branch_approval_of(
        &mut self,
        branch: &str,
    ) -> Result<Option<super::BranchApproval>, StoreError> {
        Ok(match self.lookup(&format!("approved-branch:{branch}"))? {
            Some(Value::BranchApproval(a)) => Some(a),
            _ => None,
        })
    }

    /// The hand landing (`git orch land`) that landed `commit` (one of its
    /// commits, or the tip it moved the target to).
    pub fn hand_landing(
        &mut self,
        commit: &str,
    ) -> Result<Option<super::BranchLanding>, StoreError> {
        Ok(match self.lookup(&format!("hand:{commit}"))? {
            Some(Value::BranchLanding(l)) => Some(l),
            _ => None,
        })
    }

    /// The run of the newest landing `writer` recorded on `target`.
    pub fn last_landing_run(&self, target: &str, writer: &str) -> Option<RunId> {
        self.file
            .last_landings
            .get(target)
            .and_then(|w| w.get(writer))
            .map(|(_, run)| run.clone())
    }

    /// The verdict cache for `tree`: what the runs that judged it found.
    pub fn verdicts_for(&mut self, tree: &str) -> Result<super::VerdictCache, StoreError> {
        let runs = self.runs_with_tree(tree)?;
        let states = self.states(runs)?;
        let mut cache = super::verdict_cache(states.values());
        cache.retain(|k, _| k.tree == tree);
        Ok(cache)
    }
}

impl Drop for StateIndex {
    /// Whatever a process folded and did not save yet is saved on the way
    /// out, best effort: the cache is only ever an optimisation.
    fn drop(&mut self) {
        if self.unsaved > 0 {
            let _ = self.save();
        }
    }
}

/// Sets a cache file's time to now: when a save stops naming it, so it is
/// kept for [`GRACE`] for readers of the index that named it, and when a
/// save names it again.
fn stamp(path: &Path) {
    if let Ok(f) = std::fs::OpenOptions::new().write(true).open(path) {
        let _ = f.set_modified(std::time::SystemTime::now());
    }
}

/// The run a run file belongs to: its name is `<run>.<hash>.json`.
fn run_of_file(name: &str) -> Option<RunId> {
    let (run, hash) = name.strip_suffix(".json")?.rsplit_once('.')?;
    let hex = hash.len() == 32 && hash.bytes().all(|b| b.is_ascii_hexdigit());
    hex.then(|| RunId::new(run).ok()).flatten()
}

/// How much the state cache holds on disk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CacheSize {
    /// Bytes of every file under `.git/orch/state/`.
    pub bytes: u64,
    pub files: usize,
    /// Run files (`runs/`): one per run once old ones are collected.
    pub runs: usize,
}

/// The state cache of `store` as it is on disk (for `git orch fsck`).
pub fn cache_size(store: &Store) -> CacheSize {
    fn walk(dir: &Path, size: &mut CacheSize) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let Ok(meta) = e.metadata() else { continue };
            if meta.is_dir() {
                walk(&e.path(), size);
            } else {
                size.bytes += meta.len();
                size.files += 1;
            }
        }
    }
    let dir = store.orch_dir().join("state");
    let mut size = CacheSize::default();
    walk(&dir, &mut size);
    size.runs = std::fs::read_dir(dir.join("runs"))
        .map(|entries| entries.flatten().count())
        .unwrap_or(0);
    size
}

/// One index shared by everything a process does at once (a driver, its
/// attempts and its merge queue), so each new event is read and folded
/// once, not once per reader.
#[derive(Debug, Clone)]
pub struct SharedIndex(std::sync::Arc<std::sync::Mutex<StateIndex>>);

impl SharedIndex {
    /// The index of `store`'s log, brought up to date.
    pub fn open(store: &Store) -> Result<Self, StoreError> {
        Ok(Self(std::sync::Arc::new(std::sync::Mutex::new(
            StateIndex::open(store)?,
        ))))
    }

    /// Brings the index up to date, then lets `f` read it.
    pub fn read<T, E: From<StoreError>>(
        &self,
        store: &Store,
        f: impl FnOnce(&mut StateIndex) -> Result<T, E>,
    ) -> Result<T, E> {
        let mut index = self.0.lock().unwrap_or_else(|e| e.into_inner());
        index.refresh(store)?;
        f(&mut index)
    }

    /// Saves what was folded and not saved yet.
    pub fn save(&self) -> Result<(), StoreError> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).save()
    }
}

/// Writes `bytes` under `dir` as `<prefix><hash of the content>.json`;
/// returns the name. A file of that name holds those bytes already: it is
/// only marked as named now (see [`stamp`]).
fn write_named(dir: &Path, prefix: &str, bytes: &[u8]) -> Result<String, StoreError> {
    let name = format!("{prefix}{}.json", &blake3::hash(bytes).to_hex()[..32]);
    let path = dir.join(&name);
    if path.is_file() {
        stamp(&path);
    } else {
        write_atomically(&path, bytes)?;
    }
    Ok(name)
}

/// Writes `path` through a temporary file in the same folder and a rename,
/// so a reader sees the old file or the new one, never half of one.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let dir = path.parent().expect("cache files live in a folder");
    let io = |e| StoreError::io(format!("writing {}", path.display()), e);
    std::fs::create_dir_all(dir).map_err(io)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
    std::io::Write::write_all(&mut tmp, bytes).map_err(io)?;
    tmp.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}

/// The seq below which a log's events are trusted, given what
/// [`Store::check_log_commits`] found: everything when nothing, else
/// nothing from the first commit git-orch did not write on (a commit
/// without trailers gives no seq: then nothing of the range is trusted).
fn trusted_below(forged: &[Problem]) -> u64 {
    if forged.is_empty() {
        return u64::MAX;
    }
    if forged.iter().any(|p| p.seq.is_none()) {
        return 0;
    }
    forged.iter().filter_map(|p| p.seq).min().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(run: &RunId, i: usize) -> Event {
        Event::AttemptResult {
            run_id: run.clone(),
            task: crate::ids::TaskId::new(format!("t{i}")).expect("task id"),
            attempt: 1,
            commit: format!("{i:040x}").parse().expect("hex"),
            tree: format!("{:040x}", i + 1_000_000).parse().expect("hex"),
            changed: 1,
            control_paths: Vec::new(),
        }
    }

    /// Run files name their run; nothing else passes for one.
    #[test]
    fn run_files_are_known_by_name() {
        let hash = "0123456789abcdef0123456789abcdef";
        assert_eq!(
            run_of_file(&format!("proj-abc123.{hash}.json")),
            Some(RunId::new("proj-abc123").expect("run id"))
        );
        for other in [
            format!("{hash}.json"),
            format!("proj-abc123.{hash}.json.tmp"),
            format!("Bad_Run.{hash}.json"),
            "proj-abc123.short.json".into(),
            ".tmpA1b2C3".into(),
        ] {
            assert_eq!(run_of_file(&other), None, "{other}");
        }
    }

    /// A read-only index folds the log, with no cache and then with what
    /// the log gained, and never writes one: not when it rebuilds, not
    /// when it passes the save threshold, not when it is dropped.
    #[test]
    fn a_read_only_index_folds_everything_and_writes_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::init_for_tests(dir.path());
        let run = RunId::new("proj-abc123").expect("run id");
        store
            .append((0..10).map(|i| result(&run, i)).collect())
            .expect("append");
        let cache = store.orch_dir().join("state");
        let mut index = StateIndex::open_read_only(&store).expect("index");
        let tree = |i: usize| format!("{:040x}", i + 1_000_000);
        assert_eq!(
            index.runs_with_tree(&tree(3)).expect("lookup"),
            vec![run.clone()]
        );
        store
            .append(
                (10..(10 + SAVE_AFTER + 5))
                    .map(|i| result(&run, i))
                    .collect(),
            )
            .expect("append");
        assert!(index.refresh(&store).expect("refresh"));
        assert_eq!(
            index
                .runs_with_tree(&tree(10 + SAVE_AFTER))
                .expect("lookup"),
            vec![run.clone()]
        );
        index.save().expect("save is a no-op");
        drop(index);
        assert!(
            !cache.exists(),
            "a read-only index wrote {}",
            cache.display()
        );
    }

    /// What a trimmed index let go of is read again from the cache as it
    /// was, and the lean list of runs is the full one.
    #[test]
    fn a_trimmed_index_reads_again_what_it_let_go() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::init_for_tests(dir.path());
        let run = RunId::new("proj-abc123").expect("run id");
        store
            .append((0..20).map(|i| result(&run, i)).collect())
            .expect("append");
        StateIndex::open(&store)
            .expect("index")
            .save()
            .expect("save");
        let mut index = StateIndex::open_read_only(&store).expect("index");
        let before = index.run(&run).expect("run").cloned();
        let briefs = index.all_briefs().expect("briefs");
        index.trim();
        assert!(index.slots.is_empty() || index.file.open.contains_key(&run));
        assert_eq!(index.all_briefs_lean().expect("lean"), briefs);
        assert_eq!(index.run(&run).expect("run").cloned(), before);
        let tree = format!("{:040x}", 7 + 1_000_000);
        assert_eq!(index.runs_with_tree(&tree).expect("lookup"), vec![run]);
    }

    /// A reader that looks up many keys keeps a bounded number of catalog
    /// shards in memory, and every lookup still finds what the shards on
    /// disk and the entries not folded into them yet hold.
    #[test]
    fn lookups_across_many_shards_keep_few_in_memory_and_find_everything() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::init_for_tests(dir.path());
        let run = RunId::new("proj-abc123").expect("run id");
        // Written to shards on disk (a full build), then more pending.
        store
            .append((0..300).map(|i| result(&run, i)).collect())
            .expect("append");
        let mut index = StateIndex::open(&store).expect("index");
        index.save().expect("save");
        store
            .append((300..340).map(|i| result(&run, i)).collect())
            .expect("append");
        let mut index = StateIndex::open(&store).expect("index");
        for i in 0..340 {
            let tree = format!("{:040x}", i + 1_000_000);
            assert_eq!(
                index.runs_with_tree(&tree).expect("lookup"),
                vec![run.clone()],
                "tree {i}"
            );
            let unwritten = index
                .shards
                .keys()
                .filter(|n| !index.file.shards.contains_key(n))
                .count();
            assert!(
                index.shards.len() <= LOADED_SHARDS + 1 + unwritten,
                "{} shards in memory",
                index.shards.len()
            );
        }
        assert!(
            index
                .runs_with_tree(&"f".repeat(40))
                .expect("lookup")
                .is_empty()
        );
    }
}
