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
//! covers, one brief per run, unreadable records, a pointer to the links
//! file), `runs/<hash>.json` (one run's records) and `links/<hash>.json`
//! (which run landed a commit, gated a tree, owns a branch). Run and link
//! files are named by their content and written before the index that
//! names them, which is renamed into place, so a reader always sees a
//! consistent snapshot and two processes saving at once cannot mix theirs.
//! The cache is never the truth: it is keyed by the tips it was built
//! from, a ref that moved anywhere but forward (entries removed or
//! replaced) or disappeared makes it rebuild from the log, and deleting the
//! folder only costs one full read.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{RunState, fold};
use crate::event::{Event, Record};
use crate::ids::{PlanId, RunId, WriterId};
use crate::store::log::{Entry, Found, Problem};
use crate::store::{Oid, Store, StoreError};

/// The cache format; a cache of another format is rebuilt.
const CACHE_FORMAT: u32 = 1;
/// Records folded since the last save after which a refresh saves on its
/// own, so short-lived readers rarely redo much of each other's work.
const SAVE_AFTER: usize = 64;
/// Link updates kept in the index before they are folded into a new
/// links file.
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

/// A pointer from something to the run that holds its story.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Link {
    /// A commit a landing added, or the tip it moved the target to.
    Landed { commit: String, run: RunId },
    /// A tree with command-gate verdicts (an attempt result or candidate).
    Tree { tree: String, run: RunId },
    /// An attempt branch.
    Branch { branch: String, run: RunId },
    /// A landing on a target, with its place in the global order.
    Landing {
        target: String,
        order: (u64, String, u64),
        run: RunId,
    },
}

/// Which run holds what; a superset of the truth, always checked against
/// the run it points to.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Links {
    landed: HashMap<String, BTreeSet<RunId>>,
    trees: HashMap<String, BTreeSet<RunId>>,
    branches: HashMap<String, RunId>,
    /// target → the newest landing on it.
    last_landing: HashMap<String, ((u64, String, u64), RunId)>,
}

impl Links {
    fn apply(&mut self, link: &Link) {
        match link {
            Link::Landed { commit, run } => {
                self.landed
                    .entry(commit.clone())
                    .or_default()
                    .insert(run.clone());
            }
            Link::Tree { tree, run } => {
                self.trees
                    .entry(tree.clone())
                    .or_default()
                    .insert(run.clone());
            }
            Link::Branch { branch, run } => {
                self.branches.insert(branch.clone(), run.clone());
            }
            Link::Landing { target, order, run } => {
                let newer = self.last_landing.get(target).is_none_or(|(o, _)| order > o);
                if newer {
                    self.last_landing
                        .insert(target.clone(), (order.clone(), run.clone()));
                }
            }
        }
    }
}

/// The links a record adds.
fn links_of(record: &Record) -> Vec<Link> {
    match &record.event {
        Event::Landed {
            run_id,
            target,
            new,
            commits,
            ..
        } => {
            let mut out: Vec<Link> = commits
                .iter()
                .chain(std::iter::once(new))
                .map(|c| Link::Landed {
                    commit: c.clone(),
                    run: run_id.clone(),
                })
                .collect();
            out.push(Link::Landing {
                target: target.clone(),
                order: (record.clock, record.writer.to_string(), record.seq),
                run: run_id.clone(),
            });
            out
        }
        Event::AttemptResult { run_id, tree, .. }
        | Event::IntegrationVerdict { run_id, tree, .. } => {
            vec![Link::Tree {
                tree: tree.clone(),
                run: run_id.clone(),
            }]
        }
        Event::AttemptCreated { run_id, branch, .. } => vec![Link::Branch {
            branch: branch.clone(),
            run: run_id.clone(),
        }],
        _ => Vec::new(),
    }
}

/// `index.json`.
#[derive(Debug, Default, Serialize, Deserialize)]
struct IndexFile {
    format: u32,
    /// Log ref → the tip folded.
    tips: BTreeMap<String, String>,
    runs: BTreeMap<RunId, RunBrief>,
    /// Runs with records but no `run_started` yet (it is in a log not
    /// fetched yet), with their run file.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    orphans: BTreeMap<RunId, Option<String>>,
    problems: Vec<Problem>,
    /// Records that belong to no run (plans, approvals, markers).
    other_events: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    links_file: Option<String>,
    /// Link updates not yet folded into the links file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pending_links: Vec<Link>,
}

/// The folded state of the log, incrementally maintained.
#[derive(Debug)]
pub struct StateIndex {
    dir: PathBuf,
    tips: BTreeMap<String, Oid>,
    runs: BTreeMap<RunId, RunBrief>,
    orphans: BTreeMap<RunId, Option<String>>,
    slots: HashMap<RunId, Slot>,
    dirty: BTreeSet<RunId>,
    problems: Vec<Problem>,
    other_events: u64,
    links_file: Option<String>,
    pending_links: Vec<Link>,
    links: Option<Links>,
    /// Records folded since the last save.
    unsaved: usize,
    /// Whether anything differs from what is on disk.
    changed: bool,
    /// A view of a push in progress (a server hook): never saved.
    read_only: bool,
}

impl StateIndex {
    /// The index of `store`'s log, brought up to date. Starts from the
    /// cache when there is a usable one.
    pub fn open(store: &Store) -> Result<Self, StoreError> {
        let dir = store.orch_dir().join("state");
        let mut index = Self::load(&dir).unwrap_or_else(|| Self::empty(dir));
        index.read_only = store.is_view();
        index.refresh(store)?;
        Ok(index)
    }

    fn empty(dir: PathBuf) -> Self {
        Self {
            dir,
            tips: BTreeMap::new(),
            runs: BTreeMap::new(),
            orphans: BTreeMap::new(),
            slots: HashMap::new(),
            dirty: BTreeSet::new(),
            problems: Vec::new(),
            other_events: 0,
            links_file: None,
            pending_links: Vec::new(),
            links: Some(Links::default()),
            unsaved: 0,
            changed: false,
            read_only: false,
        }
    }

    /// The cache on disk, if it is there, of this format, and whole.
    fn load(dir: &Path) -> Option<Self> {
        let bytes = std::fs::read(dir.join("index.json")).ok()?;
        let file: IndexFile = serde_json::from_slice(&bytes).ok()?;
        if file.format != CACHE_FORMAT {
            return None;
        }
        let mut tips = BTreeMap::new();
        for (name, hex) in file.tips {
            tips.insert(name, Oid::from_hex(hex.as_bytes()).ok()?);
        }
        // Every file it names must exist, or the snapshot is not whole.
        let whole = file
            .runs
            .values()
            .filter_map(|b| b.file.as_ref())
            .chain(file.orphans.values().flatten())
            .map(|f| dir.join("runs").join(f))
            .chain(file.links_file.iter().map(|f| dir.join("links").join(f)))
            .all(|p| p.is_file());
        if !whole {
            return None;
        }
        Some(Self {
            dir: dir.to_owned(),
            tips,
            runs: file.runs,
            orphans: file.orphans,
            slots: HashMap::new(),
            dirty: BTreeSet::new(),
            problems: file.problems,
            other_events: file.other_events,
            links_file: file.links_file,
            pending_links: file.pending_links,
            links: None,
            unsaved: 0,
            changed: false,
            read_only: false,
        })
    }

    /// Folds what the log gained since the last refresh. Returns whether
    /// anything changed.
    pub fn refresh(&mut self, store: &Store) -> Result<bool, StoreError> {
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
                let changes = store.log_changes(name, old, *tip)?;
                if !changes.lost.is_empty() {
                    // Not append-only: start over from every ref as it is.
                    rebuild = true;
                    break;
                }
                added.extend(changes.added);
            }
        }
        if rebuild {
            return self.rebuild(store, now);
        }
        // Copies of one log (local and remote-tracking) hold the same blobs.
        let mut seen = HashSet::new();
        added.retain(|f| seen.insert(f.id));
        let (entries, problems) = store.read_found(added);
        self.add_problems(problems);
        self.fold_in(entries)?;
        self.tips = now;
        self.changed = true;
        if self.unsaved >= SAVE_AFTER {
            self.save()?;
        }
        Ok(true)
    }

    /// Starts over from the whole log.
    fn rebuild(&mut self, store: &Store, tips: BTreeMap<String, Oid>) -> Result<bool, StoreError> {
        let view = store.read_log()?;
        let dir = std::mem::take(&mut self.dir);
        let read_only = self.read_only;
        *self = Self::empty(dir);
        self.read_only = read_only;
        self.tips = tips;
        self.add_problems(view.problems);
        self.fold_in(view.entries)?;
        self.changed = true;
        self.save()?;
        Ok(true)
    }

    fn add_problems(&mut self, problems: Vec<Problem>) {
        for p in problems {
            if !self.problems.contains(&p) {
                self.problems.push(p);
            }
        }
    }

    /// Routes new records to their runs and refolds those runs.
    fn fold_in(&mut self, entries: Vec<Entry>) -> Result<(), StoreError> {
        let mut by_run: BTreeMap<RunId, Vec<Stored>> = BTreeMap::new();
        let mut links = Vec::new();
        for e in entries {
            links.extend(links_of(&e.record));
            let stored = Stored {
                blob: e.id.to_string(),
                record: e.record,
            };
            match stored.record.event.run_id() {
                Some(run) => by_run.entry(run.clone()).or_default().push(stored),
                None => {
                    self.other_events += 1;
                    self.unsaved += 1;
                }
            }
        }
        for (run, records) in by_run {
            let slot = self.slot(&run)?;
            let added = slot.add(records);
            if added == 0 {
                continue;
            }
            self.unsaved += added;
            let Some(state) = self.slot(&run)?.state(&run).cloned() else {
                // Records of a run whose start has not arrived yet: kept,
                // and shown once `run_started` comes.
                self.orphans.entry(run.clone()).or_default();
                self.dirty.insert(run);
                continue;
            };
            let events = self.slot(&run)?.records.len();
            let file = match self.orphans.remove(&run) {
                Some(f) => f,
                None => self.runs.get(&run).and_then(|b| b.file.clone()),
            };
            self.runs.insert(
                run.clone(),
                RunBrief {
                    id: run.clone(),
                    plan_id: state.plan_id.clone(),
                    plan_hash: state.plan_hash.clone(),
                    target: state.target.clone(),
                    started_ms: state.started_ms,
                    finished: state.finished.is_some(),
                    writer: state.drivers.first().map(|d| d.writer.clone()),
                    events,
                    file,
                },
            );
            self.dirty.insert(run);
        }
        if !links.is_empty() {
            if let Some(l) = self.links.as_mut() {
                for link in &links {
                    l.apply(link);
                }
            }
            self.pending_links.extend(links);
        }
        Ok(())
    }

    /// The loaded records of `run` (empty for a run not seen yet).
    fn slot(&mut self, run: &RunId) -> Result<&mut Slot, StoreError> {
        if !self.slots.contains_key(run) {
            let mut slot = Slot::default();
            let file = match self.runs.get(run) {
                Some(b) => b.file.clone(),
                None => self.orphans.get(run).cloned().flatten(),
            };
            if let Some(file) = file {
                let path = self.dir.join("runs").join(&file);
                let bytes = std::fs::read(&path)
                    .map_err(|e| StoreError::io(format!("reading {}", path.display()), e))?;
                let records: Vec<Stored> = serde_json::from_slice(&bytes).map_err(|e| {
                    StoreError::Corrupt(format!(
                        "the state cache file {} is unreadable: {e}\nhint: remove {} (it is rebuilt from the log)",
                        path.display(),
                        self.dir.display()
                    ))
                })?;
                slot.add(records);
            }
            self.slots.insert(run.clone(), slot);
        }
        Ok(self.slots.get_mut(run).expect("inserted above"))
    }

    fn links(&mut self) -> Result<&Links, StoreError> {
        if self.links.is_none() {
            let mut links = match &self.links_file {
                Some(f) => {
                    let path = self.dir.join("links").join(f);
                    let bytes = std::fs::read(&path)
                        .map_err(|e| StoreError::io(format!("reading {}", path.display()), e))?;
                    serde_json::from_slice(&bytes).map_err(|e| {
                        StoreError::Corrupt(format!(
                            "the state cache file {} is unreadable: {e}\nhint: remove {} (it is rebuilt from the log)",
                            path.display(),
                            self.dir.display()
                        ))
                    })?
                }
                None => Links::default(),
            };
            for link in &self.pending_links {
                links.apply(link);
            }
            self.links = Some(links);
        }
        Ok(self.links.as_ref().expect("loaded above"))
    }

    /// Writes what changed: run files, links, then the index naming them.
    /// A view of a push in progress is never saved.
    pub fn save(&mut self) -> Result<(), StoreError> {
        if self.read_only || !self.changed {
            return Ok(());
        }
        for run in std::mem::take(&mut self.dirty) {
            let Some(slot) = self.slots.get(&run) else {
                continue;
            };
            let bytes = serde_json::to_vec(&slot.records).expect("records serialise");
            let name = write_named(&self.dir.join("runs"), &bytes)?;
            if let Some(brief) = self.runs.get_mut(&run) {
                brief.file = Some(name);
            } else {
                self.orphans.insert(run, Some(name));
            }
        }
        if self.pending_links.len() > PENDING_LINKS || self.links_file.is_none() {
            let links = self.links()?.clone();
            let bytes = serde_json::to_vec(&links).expect("links serialise");
            self.links_file = Some(write_named(&self.dir.join("links"), &bytes)?);
            self.pending_links.clear();
        }
        let file = IndexFile {
            format: CACHE_FORMAT,
            tips: self
                .tips
                .iter()
                .map(|(k, v)| (k.clone(), v.to_string()))
                .collect(),
            runs: self.runs.clone(),
            orphans: self.orphans.clone(),
            problems: self.problems.clone(),
            other_events: self.other_events,
            links_file: self.links_file.clone(),
            pending_links: self.pending_links.clone(),
        };
        let bytes = serde_json::to_vec(&file).expect("the index serialises");
        write_atomically(&self.dir.join("index.json"), &bytes)?;
        self.unsaved = 0;
        self.changed = false;
        self.collect_garbage();
        Ok(())
    }

    /// Removes cache files no index names any more, once there are many;
    /// files younger than a minute stay, for readers of an older index.
    fn collect_garbage(&self) {
        let names: HashSet<&str> = self
            .runs
            .values()
            .filter_map(|b| b.file.as_deref())
            .chain(self.orphans.values().flatten().map(String::as_str))
            .chain(self.links_file.as_deref())
            .collect();
        for sub in ["runs", "links"] {
            let Ok(entries) = std::fs::read_dir(self.dir.join(sub)) else {
                continue;
            };
            let entries: Vec<_> = entries.flatten().collect();
            if entries.len() < 2 * names.len() + 64 {
                continue;
            }
            for e in entries {
                let name = e.file_name().to_string_lossy().into_owned();
                let old = e
                    .metadata()
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .is_some_and(|age| age.as_secs() > 60);
                if old && !names.contains(name.as_str()) {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    }

    /// Every run, briefly, by id.
    pub fn briefs(&self) -> impl Iterator<Item = &RunBrief> {
        self.runs.values()
    }

    /// The state of `run`, if the log has it.
    pub fn run(&mut self, run: &RunId) -> Result<Option<&RunState>, StoreError> {
        if !self.runs.contains_key(run) {
            return Ok(None);
        }
        Ok(self.slot(run)?.state(run))
    }

    /// The states of the runs whose briefs `pick` accepts.
    pub fn runs_where(
        &mut self,
        pick: impl Fn(&RunBrief) -> bool,
    ) -> Result<BTreeMap<RunId, RunState>, StoreError> {
        let ids: Vec<RunId> = self
            .runs
            .values()
            .filter(|b| pick(b))
            .map(|b| b.id.clone())
            .collect();
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
        self.slot(run)?
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
        &self.problems
    }

    /// How many records the log holds.
    pub fn event_count(&self) -> u64 {
        self.other_events + self.runs.values().map(|b| b.events as u64).sum::<u64>()
    }

    /// The runs that landed `commit` (as one of a landing's commits or as
    /// the tip it moved the target to).
    pub fn runs_landing(&mut self, commit: &str) -> Result<Vec<RunId>, StoreError> {
        Ok(self
            .links()?
            .landed
            .get(commit)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default())
    }

    /// The runs holding command-gate verdicts on `tree`.
    pub fn runs_with_tree(&mut self, tree: &str) -> Result<Vec<RunId>, StoreError> {
        Ok(self
            .links()?
            .trees
            .get(tree)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default())
    }

    /// The run whose attempt has the branch `branch` (without `refs/heads/`).
    pub fn run_of_branch(&mut self, branch: &str) -> Result<Option<RunId>, StoreError> {
        Ok(self.links()?.branches.get(branch).cloned())
    }

    /// The run of the newest landing on `target`.
    pub fn last_landing_run(&mut self, target: &str) -> Result<Option<RunId>, StoreError> {
        Ok(self
            .links()?
            .last_landing
            .get(target)
            .map(|(_, run)| run.clone()))
    }

    /// The verdict cache for `tree`: what the runs that judged it found.
    pub fn verdicts_for(&mut self, tree: &str) -> Result<super::VerdictCache, StoreError> {
        let runs = self.runs_with_tree(tree)?;
        let mut states = Vec::new();
        for r in runs {
            if let Some(s) = self.run(&r)? {
                states.push(s.clone());
            }
        }
        let mut cache = super::verdict_cache(&states);
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

/// Writes `bytes` under `dir` named by their content; returns the name.
fn write_named(dir: &Path, bytes: &[u8]) -> Result<String, StoreError> {
    let name = format!("{}.json", &blake3::hash(bytes).to_hex()[..32]);
    let path = dir.join(&name);
    if !path.is_file() {
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
