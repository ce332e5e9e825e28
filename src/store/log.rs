//! The append-only event log: one ref per clone, `refs/orch/log/<writer>`.
//!
//! Each commit on a writer's ref is one atomic operation. Its tree is a
//! cumulative index of every event the writer ever wrote,
//! `ev/<hi>/<mid>/<seq>-<blob>.json`, so the tip alone lists the whole log and
//! two diverged copies of one writer's log merge by taking the union of their
//! trees (the blob prefix keeps even equal seqs from colliding). Its message
//! is a one-line summary plus trailers, so `git log refs/orch/log/<w>` reads
//! as a journal.
//!
//! Appending takes the advisory lock, reads the tip, writes blob, tree and
//! commit, then moves the ref by compare-and-swap together with any other
//! ref updates of the same operation; a lost race redoes everything from a
//! fresh read after a jittered backoff. Reading takes the union of every
//! local and remote-tracking writer ref, deduplicated by blob id, in the
//! global order (clock, writer, seq).

use std::collections::HashSet;

use super::error::{Result, StoreError};
use super::lock::{LOG_LOCK, MAX_TRIES, backoff};
use super::oid::Oid;
use super::refs::{Applied, Expected, RefUpdate};
use super::repository::Store;
use crate::clock::now_ms;
use crate::event::{Event, FORMAT_VERSION, MAX_CLOCK, MAX_EVENT_BYTES, Record};
use crate::ids::WriterId;

/// Where each clone's log ref lives.
pub const LOG_PREFIX: &str = "refs/orch/log/";
/// Seq interval at which appends start background git maintenance.
pub const MAINTENANCE_EVERY: u64 = 1000;

/// What one atomic operation writes: events for the log and any other ref
/// updates that must land together with them.
#[derive(Debug, Default)]
pub struct Operation {
    pub events: Vec<Event>,
    pub refs: Vec<RefUpdate>,
}

impl Operation {
    /// An operation that only appends `events`.
    pub fn events(events: Vec<Event>) -> Self {
        Self {
            events,
            refs: Vec::new(),
        }
    }
}

/// One event read back, with where it came from.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The blob holding the record; identical events share it.
    pub id: Oid,
    /// The first ref it was found under.
    pub reference: String,
    pub record: Record,
}

/// A record that could not be read; the rest of the log stays readable.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Problem {
    pub reference: String,
    pub seq: Option<u64>,
    pub path: String,
    pub reason: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.seq {
            Some(seq) => write!(
                f,
                "unreadable event in {} at seq {seq} ({}): {}",
                self.reference, self.path, self.reason
            ),
            None => write!(
                f,
                "unreadable entry in {} ({}): {}",
                self.reference, self.path, self.reason
            ),
        }
    }
}

/// The union of all logs in global order, plus anything unreadable.
#[derive(Debug, Default)]
pub struct LogView {
    pub entries: Vec<Entry>,
    pub problems: Vec<Problem>,
}

impl LogView {
    /// The records alone, in global order.
    pub fn records(&self) -> impl Iterator<Item = &Record> {
        self.entries.iter().map(|e| &e.record)
    }
}

pub use super::tip::TipPosition;

/// The path of an event inside a log tree.
pub fn event_path(seq: u64, blob: Oid) -> String {
    let hex = blob.to_hex().to_string();
    format!(
        "ev/{:02x}/{:02x}/{seq:010}-{}.json",
        seq >> 16,
        (seq >> 8) & 0xff,
        &hex[..8]
    )
}

fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// The commit message of a log commit: summary line plus trailers.
pub fn commit_message(writer: &WriterId, records: &[Record]) -> String {
    let last = records.last().expect("an operation has at least one event");
    let subject = if records.len() == 1 {
        one_line(&last.event.summary())
    } else {
        format!(
            "{} events: {}",
            records.len(),
            one_line(&records[0].event.summary())
        )
    };
    let kinds: Vec<&str> = records.iter().map(|r| r.event.kind()).collect();
    format!(
        "{subject}\n\nOrch-Writer: {writer}\nOrch-Seq: {}\nOrch-Clock: {}\nOrch-Events: {}\nOrch-Type: {}\nOrch-Format: {FORMAT_VERSION}\n",
        last.seq,
        last.clock,
        records.len(),
        kinds.join(", ")
    )
}

/// Reads `Orch-Seq` and `Orch-Clock` from a log commit message.
pub fn parse_trailers(message: &str) -> Option<TipPosition> {
    let mut seq = None;
    let mut clock = None;
    for line in message.lines() {
        if let Some(v) = line.strip_prefix("Orch-Seq: ") {
            seq = v.trim().parse().ok();
        } else if let Some(v) = line.strip_prefix("Orch-Clock: ") {
            clock = v.trim().parse().ok();
        }
    }
    Some(TipPosition {
        seq: seq?,
        clock: clock?,
    })
}

impl Store {
    /// This clone's writer id, if one was made.
    pub fn writer_id(&self) -> Result<Option<WriterId>> {
        if let Some(w) = self.writer.get() {
            return Ok(Some(w.clone()));
        }
        // The local configuration as read when the repository was opened
        // answers without a `git config` process (a driver opens a store
        // for each step of each attempt). A writer id, once made, does not
        // change under a running process; when it is not there yet, ask git,
        // which sees one another process wrote since.
        let local = |meta: &gix::config::file::Metadata| meta.source == gix::config::Source::Local;
        if let Some(value) = self
            .repo
            .config_snapshot()
            .plumbing()
            .string_filter("orch.writerId", local)
            && let Ok(id) = WriterId::new(value.to_string().trim())
        {
            let _ = self.writer.set(id.clone());
            return Ok(Some(id));
        }
        let out = self
            .git()
            .output(["config", "--local", "--get", "orch.writerId"])?;
        let value = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if !out.status.success() || value.is_empty() {
            return Ok(None);
        }
        let id = WriterId::new(value).map_err(|source| StoreError::BadWriterId { source })?;
        let _ = self.writer.set(id.clone());
        Ok(Some(id))
    }

    /// This clone's writer id, made and stored now if it does not exist.
    /// Callers hold the log lock so two first writers cannot pick two ids.
    fn ensure_writer(&self) -> Result<WriterId> {
        if let Some(w) = self.writer_id()? {
            return Ok(w);
        }
        let id = WriterId::random();
        self.git()
            .run(["config", "--local", "orch.writerId", id.as_str()])?;
        let _ = self.writer.set(id.clone());
        Ok(id)
    }

    /// This clone's writer id, creating it under the log lock if needed.
    pub fn writer(&self) -> Result<WriterId> {
        if let Some(w) = self.writer_id()? {
            return Ok(w);
        }
        let _guard = self.lock(LOG_LOCK, "creating writer id")?;
        self.ensure_writer()
    }

    /// Every writer ref, local and remote-tracking, with its tip.
    pub fn log_tips(&self) -> Result<Vec<(String, Oid)>> {
        let mut tips = self.refs_with_prefix(LOG_PREFIX)?;
        for (name, id) in self.refs_with_prefix(super::refs::REMOTES_PREFIX)? {
            let rest = &name[super::refs::REMOTES_PREFIX.len()..];
            if rest
                .split_once('/')
                .is_some_and(|(_, r)| r.starts_with("log/"))
            {
                tips.push((name, id));
            }
        }
        Ok(tips)
    }

    /// The position recorded in a log commit's trailers.
    pub fn tip_position(&self, tip: Oid) -> Result<TipPosition> {
        Ok(self.tip_info(tip)?.0)
    }

    /// A log commit's position and tree, cached by commit id (commits never
    /// change, so the cache needs no invalidation, only a bound).
    fn tip_info(&self, tip: Oid) -> Result<(TipPosition, Oid)> {
        if let Some(hit) = self
            .tips
            .lock()
            .expect("cache lock is never poisoned")
            .get(&tip)
        {
            return Ok(*hit);
        }
        let info = self.commit_info(tip)?;
        let pos = parse_trailers(&info.message).ok_or(StoreError::LogWithoutTrailers { tip })?;
        self.remember_tip(tip, pos, info.tree);
        Ok((pos, info.tree))
    }

    fn remember_tip(&self, tip: Oid, pos: TipPosition, tree: Oid) {
        let mut tips = self.tips.lock().expect("cache lock is never poisoned");
        if tips.len() >= 1024 {
            tips.clear();
        }
        tips.insert(tip, (pos, tree));
    }

    /// Appends `events` as one operation.
    pub fn append(&self, events: Vec<Event>) -> Result<Vec<Record>> {
        let (records, ()) =
            self.transact(|_| Ok::<_, StoreError>((Operation::events(events.clone()), ())))?;
        Ok(records)
    }

    /// Runs one atomic operation: `plan` reads whatever it needs and returns
    /// the events and ref updates to apply; they land together or not at all.
    /// On a lost race, `plan` runs again against fresh state. If the object
    /// database ran out of pack index slots (a `git repack` beside a long
    /// run), the operation runs again on a freshly opened one.
    pub fn transact<T, E>(
        &self,
        mut plan: impl FnMut(&Store) -> std::result::Result<(Operation, T), E>,
    ) -> std::result::Result<(Vec<Record>, T), E>
    where
        E: From<StoreError>,
    {
        let mut fresh: Option<Store> = None;
        let mut attempt = 0;
        while attempt < MAX_TRIES {
            let store = fresh.as_ref().unwrap_or(self);
            match store.transact_round(&mut plan) {
                Ok(Some(done)) => return Ok(done),
                Ok(None) => {
                    backoff(attempt);
                    attempt += 1;
                }
                Err(Round::Exhausted(_)) if fresh.is_none() => fresh = Some(self.fresh()?),
                Err(Round::Exhausted(e)) => return Err(e.into()),
                Err(Round::Failed(e)) => return Err(e),
            }
        }
        Err(StoreError::Contention {
            reference: format!("{LOG_PREFIX}…"),
            attempts: MAX_TRIES,
        }
        .into())
    }

    /// One try of [`Store::transact`]: `None` when a ref moved meanwhile.
    fn transact_round<T, E>(
        &self,
        plan: &mut impl FnMut(&Store) -> std::result::Result<(Operation, T), E>,
    ) -> std::result::Result<Option<(Vec<Record>, T)>, Round<E>>
    where
        E: From<StoreError>,
    {
        let mut guard = self.lock(LOG_LOCK, "appending").map_err(Round::from)?;
        let writer = self.ensure_writer().map_err(Round::from)?;
        let (op, value) = plan(self).map_err(Round::Failed)?;
        if op.events.is_empty() {
            guard.intend(op.refs.iter().map(|u| u.name.as_str()));
            if self.apply(&op.refs).map_err(Round::from)? == Applied::Done {
                return Ok(Some((Vec::new(), value)));
            }
            return Ok(None);
        }
        let (records, update) = self
            .prepare_append(&writer, op.events)
            .map_err(Round::from)?;
        let mut updates = Vec::with_capacity(op.refs.len() + 1);
        updates.push(update);
        updates.extend(op.refs);
        guard.intend(updates.iter().map(|u| u.name.as_str()));
        crate::failpoint::hit("append.objects-written");
        if self.apply(&updates).map_err(Round::from)? == Applied::Done {
            drop(guard);
            self.maintain_if_due(&records);
            return Ok(Some((records, value)));
        }
        Ok(None)
    }

    /// Like [`Store::transact`], but before the refs move here, `publish`
    /// gets the updates (the log's included) with their objects written and
    /// must make them public elsewhere (an atomic push to a remote, whose
    /// rejection is the compare-and-swap of a shared ref). If it returns
    /// false nothing moves here either and `None` is returned.
    ///
    /// The log lock is held across `publish`, so no other local append can
    /// slip between what was published and what is applied here; if a ref
    /// moved anyway (a person's command beside git-orch), the published
    /// state stays authoritative and the next `sync` merges it back.
    pub fn transact_published<T, E>(
        &self,
        plan: impl FnOnce(&Store) -> std::result::Result<(Operation, T), E>,
        publish: impl FnOnce(&Store, &[RefUpdate]) -> std::result::Result<bool, E>,
    ) -> std::result::Result<Option<(Vec<Record>, T)>, E>
    where
        E: From<StoreError>,
    {
        let mut guard = self.lock(LOG_LOCK, "appending")?;
        let writer = self.ensure_writer()?;
        let (op, value) = plan(self)?;
        let (records, updates) = if op.events.is_empty() {
            (Vec::new(), op.refs)
        } else {
            let (records, update) = self.prepare_append(&writer, op.events)?;
            let mut updates = vec![update];
            updates.extend(op.refs);
            (records, updates)
        };
        if !publish(self, &updates)? {
            return Ok(None);
        }
        guard.intend(updates.iter().map(|u| u.name.as_str()));
        if self.apply(&updates)? == Applied::Conflict {
            return Err(StoreError::PublishedButMoved {
                references: updates
                    .iter()
                    .map(|u| u.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            }
            .into());
        }
        drop(guard);
        self.maintain_if_due(&records);
        Ok(Some((records, value)))
    }

    /// Every append leaves a handful of loose objects and gix never packs;
    /// each time a writer's seq passes a multiple of [`MAINTENANCE_EVERY`],
    /// `git maintenance run --auto` is started in the background. It does
    /// real work only past git's own thresholds (`gc.auto`), and git's gc is
    /// safe beside concurrent writers (unreachable objects younger than
    /// `gc.pruneExpire` are kept).
    fn maintain_if_due(&self, records: &[Record]) {
        let (Some(first), Some(last)) = (records.first(), records.last()) else {
            return;
        };
        // Due when a multiple of the interval lies in first..=last.
        if last.seq / MAINTENANCE_EVERY > (first.seq - 1) / MAINTENANCE_EVERY {
            // Best effort: a failure to start housekeeping is not an error
            // of the append that just succeeded.
            let _ = self
                .git()
                .spawn_detached(&["maintenance", "run", "--auto", "--quiet"]);
        }
    }

    /// Writes the objects of an append and returns the ref update to apply.
    fn prepare_append(
        &self,
        writer: &WriterId,
        events: Vec<Event>,
    ) -> Result<(Vec<Record>, RefUpdate)> {
        let name = format!("{LOG_PREFIX}{writer}");
        let tips = self.log_tips()?;
        let tip = tips.iter().find(|(n, _)| *n == name).map(|(_, id)| *id);
        let (own, base_tree) = match tip {
            Some(t) => self.tip_info(t).map_err(|e| e.at_ref(&name))?,
            None => (TipPosition::default(), self.empty_tree_id()),
        };
        let others = tips
            .iter()
            .filter(|(other, _)| *other != name)
            .map(|(_, id)| self.tip_position(*id).map(|p| p.clock).unwrap_or(0));
        let clock = crate::event::lamport_base(own.clock, others).ok_or_else(|| {
            StoreError::ClockBeyondCeiling {
                reference: name.clone(),
                clock: own.clock,
                ceiling: MAX_CLOCK,
            }
        })?;
        if own.seq.checked_add(events.len() as u64).is_none() {
            return Err(StoreError::SeqBeyondEnd {
                reference: name,
                seq: own.seq,
            });
        }
        let time_ms = now_ms();
        let records: Vec<Record> = events
            .into_iter()
            .enumerate()
            .map(|(i, event)| Record {
                version: FORMAT_VERSION,
                writer: writer.clone(),
                seq: own.seq.saturating_add(i as u64 + 1),
                clock: crate::event::lamport_next(clock, i as u64 + 1),
                time_ms,
                event,
            })
            .collect();
        let mut editor = self.tree_editor(base_tree)?;
        for r in &records {
            let bytes = serde_json::to_vec(r).expect("records always serialise");
            let blob = self.write_blob(&bytes)?;
            editor.upsert_blob(&event_path(r.seq, blob), blob)?;
        }
        let tree = editor.write()?;
        let parents: Vec<Oid> = tip.into_iter().collect();
        let commit = self.write_commit(&commit_message(writer, &records), tree, &parents)?;
        wrote(commit);
        let last = records.last().expect("an operation has at least one event");
        self.remember_tip(
            commit,
            TipPosition {
                seq: last.seq,
                clock: last.clock,
            },
            tree,
        );
        let update = RefUpdate::set(
            name,
            commit,
            Expected::from_read(tip),
            &format!("orch: append {}", records.len()),
        );
        Ok((records, update))
    }

    /// Reads the union of all logs in global order.
    pub fn read_log(&self) -> Result<LogView> {
        let mut view = LogView::default();
        let mut seen_trees: HashSet<Oid> = HashSet::new();
        let mut found = Vec::new();
        for (reference, tip) in self.log_tips()? {
            let listed = self
                .tip_tree(tip)
                .and_then(|tree| self.tree_blobs(tree, Some(&mut seen_trees)));
            match listed {
                Ok(blobs) => found.extend(
                    blobs
                        .into_iter()
                        .map(|(path, id)| Found::new(&reference, path, id)),
                ),
                Err(e) => view.problems.push(Problem {
                    reference: reference.clone(),
                    seq: None,
                    path: tip.to_string(),
                    reason: e.at_ref(&reference).to_string(),
                }),
            }
        }
        let (entries, problems) = self.read_found(found);
        view.entries = entries;
        view.problems.extend(problems);
        view.sort();
        Ok(view)
    }

    /// What changed in the log ref `reference` when its tip moved from
    /// `old` (`None`: the ref is new) to `new`: the event blobs added, and
    /// any entry removed or replaced. An append-only log only ever adds;
    /// anything in `lost` means the ref was rewritten. The cost follows the
    /// size of the change, not of the log.
    pub fn log_changes(&self, reference: &str, old: Option<Oid>, new: Oid) -> Result<LogChanges> {
        let old_tree = old.map(|o| self.tip_tree(o)).transpose()?;
        let new_tree = self.tip_tree(new)?;
        let mut changes = LogChanges::default();
        for c in self.tree_changes(old_tree, new_tree)? {
            match (c.old, c.new) {
                (None, Some(id)) => changes.added.push(Found::new(reference, c.path, id)),
                _ => changes.lost.push(c),
            }
        }
        Ok(changes)
    }

    /// The commits of the log ref `reference` from `new` back to `old`
    /// (exclusive: checked before; `None` checks them all) that git-orch
    /// did not write the way it writes them, each with why. A log commit
    /// carries git-orch's own signature, the trailers of the writer whose
    /// ref holds it (`Orch-Writer`, `Orch-Seq`, `Orch-Clock`,
    /// `Orch-Events`), and continues its parent: its seq is the parent's
    /// plus the events it adds, its tree adds exactly those event files
    /// (at seqs after the parent's) and loses nothing. A merge of two
    /// diverged copies of one log adds no event, keeps both sides and
    /// carries the greater position. Events of a ref whose commits fail
    /// this are not trusted: they may be a forgery made with plain git.
    pub fn check_log_commits(
        &self,
        reference: &str,
        old: Option<Oid>,
        new: Oid,
    ) -> Result<Vec<Problem>> {
        let writer = reference.rsplit('/').next().unwrap_or_default().to_owned();
        let floor = match old {
            Some(o) => self.tip_position(o).map(|p| p.seq).unwrap_or(0),
            None => 0,
        };
        let mut problems = Vec::new();
        let mut seen: HashSet<Oid> = HashSet::new();
        let mut stack = vec![new];
        while let Some(c) = stack.pop() {
            if Some(c) == old || !seen.insert(c) {
                continue;
            }
            let info = self.commit_info(c)?;
            if written_here(c) {
                // This process made it as it makes them: only what lies
                // below (someone else's, possibly) needs checking.
                stack.extend(info.parents.iter().copied());
                continue;
            }
            let position = parse_trailers(&info.message);
            if position.is_some_and(|p| p.seq <= floor) && old.is_some() {
                // At or before what was checked already (the far side of a
                // merge reaching back into the checked history).
                continue;
            }
            if let Err(why) = self.check_log_commit(&writer, &info) {
                // The first seq it could have added: nothing from there on
                // is trusted.
                let first = info
                    .parents
                    .iter()
                    .filter_map(|p| self.tip_position(*p).ok())
                    .map(|p| p.seq.saturating_add(1))
                    .max()
                    .unwrap_or(1);
                problems.push(Problem {
                    reference: reference.to_owned(),
                    seq: Some(first),
                    path: c.to_string(),
                    reason: format!("log commit {c} {why}"),
                });
            }
            stack.extend(info.parents.iter().copied());
        }
        problems.sort_by_key(|p| p.seq);
        Ok(problems)
    }

    /// Why one log commit of `writer` is not as git-orch writes them.
    fn check_log_commit(
        &self,
        writer: &str,
        info: &super::objects::CommitInfo,
    ) -> std::result::Result<(), BadLogCommit> {
        use BadLogCommit as B;
        if (info.committer_name.as_str(), info.committer_email.as_str())
            != (super::repository::ORCH_NAME, super::repository::ORCH_EMAIL)
        {
            return Err(B::ForeignCommitter {
                name: info.committer_name.clone(),
                email: info.committer_email.clone(),
            });
        }
        let trailer = |key: &str| {
            info.message
                .lines()
                .find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_owned()))
        };
        if trailer("Orch-Writer: ").as_deref() != Some(writer) {
            return Err(B::OtherWriter {
                writer: writer.to_owned(),
            });
        }
        let pos = parse_trailers(&info.message).ok_or(B::NoPosition)?;
        if pos.clock > MAX_CLOCK {
            return Err(B::ClockBeyondCeiling { clock: pos.clock });
        }
        let events: u64 = trailer("Orch-Events: ")
            .and_then(|v| v.parse().ok())
            .ok_or(B::NoEventCount)?;
        let parents: Vec<(TipPosition, Oid)> = info
            .parents
            .iter()
            .map(|p| self.tip_info(*p).map_err(B::ParentNotInLog))
            .collect::<std::result::Result<_, _>>()?;
        match parents.as_slice() {
            [] | [_] => {
                let (before, before_tree) = parents
                    .first()
                    .copied()
                    .unwrap_or((TipPosition::default(), self.empty_tree_id()));
                if events == 0 || before.seq.checked_add(events) != Some(pos.seq) {
                    return Err(B::Gap {
                        seq: pos.seq,
                        before: before.seq,
                        events,
                    });
                }
                // Clocks stop at the ceiling (see `MAX_CLOCK`).
                if pos.clock < before.clock.saturating_add(events).min(MAX_CLOCK) {
                    return Err(B::ClockBackwards {
                        clock: pos.clock,
                        before: before.clock,
                    });
                }
                let changes = self
                    .tree_changes(Some(before_tree), info.tree)
                    .map_err(B::Unreadable)?;
                let added: Vec<u64> = changes
                    .iter()
                    .filter(|c| c.old.is_none() && c.new.is_some())
                    .filter_map(|c| Found::new("", c.path.clone(), c.new.expect("added")).seq)
                    .filter(|s| *s > before.seq && *s <= pos.seq)
                    .collect();
                if added.len() as u64 != events || changes.len() as u64 != events {
                    return Err(B::OtherChanges {
                        events,
                        after: before.seq,
                        changed: changes.len(),
                    });
                }
            }
            [(a, a_tree), (b, b_tree)] => {
                if events != 0 || pos.seq != a.seq.max(b.seq) || pos.clock != a.clock.max(b.clock) {
                    return Err(B::MergeMovesPosition);
                }
                for side in [a_tree, b_tree] {
                    let lost = self
                        .tree_changes(Some(*side), info.tree)
                        .map_err(B::Unreadable)?
                        .into_iter()
                        .any(|c| c.old.is_some());
                    if lost {
                        return Err(B::MergeLosesEvents);
                    }
                }
            }
            _ => return Err(B::TooManyParents),
        }
        Ok(())
    }

    /// The last `n` events of the union of all logs, in global order,
    /// reading only the newest entries of each log (a writer's events sort
    /// by seq, and its clock grows with its seq).
    pub fn log_tail(&self, n: usize) -> Result<LogView> {
        let mut view = LogView::default();
        let mut found = Vec::new();
        let mut ids: HashSet<Oid> = HashSet::new();
        for (reference, tip) in self.log_tips()? {
            let mut newest = Vec::new();
            let listed = self
                .tip_tree(tip)
                .and_then(|tree| self.newest_blobs(tree, n, &mut newest));
            if let Err(e) = listed {
                view.problems.push(Problem {
                    reference: reference.clone(),
                    seq: None,
                    path: tip.to_string(),
                    reason: e.at_ref(&reference).to_string(),
                });
            }
            for (path, id) in newest {
                if ids.insert(id) {
                    found.push(Found::new(&reference, path, id));
                }
            }
        }
        let (entries, problems) = self.read_found(found);
        view.entries = entries;
        view.problems.extend(problems);
        view.sort();
        let extra = view.entries.len().saturating_sub(n);
        view.entries.drain(..extra);
        Ok(view)
    }

    /// Collects up to `n` blobs with the greatest paths under `tree`,
    /// walking from the end so older parts are never read.
    fn newest_blobs(&self, tree: Oid, n: usize, out: &mut Vec<(String, Oid)>) -> Result<()> {
        fn walk(
            store: &Store,
            tree: Oid,
            prefix: &str,
            n: usize,
            out: &mut Vec<(String, Oid)>,
        ) -> Result<()> {
            let mut entries = store.tree_entries(tree)?;
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            for (name, id, is_tree) in entries.into_iter().rev() {
                if out.len() >= n {
                    return Ok(());
                }
                let path = if prefix.is_empty() {
                    name
                } else {
                    format!("{prefix}/{name}")
                };
                if is_tree {
                    walk(store, id, &path, n, out)?;
                } else {
                    out.push((path, id));
                }
            }
            Ok(())
        }
        walk(self, tree, "", n, out)
    }

    /// The tree of a log commit.
    pub fn tip_tree(&self, tip: Oid) -> Result<Oid> {
        if let Some(hit) = self
            .tips
            .lock()
            .expect("cache lock is never poisoned")
            .get(&tip)
        {
            return Ok(hit.1);
        }
        Ok(self.commit_info(tip)?.tree)
    }

    /// Reads and checks found event blobs; what cannot be read becomes a
    /// problem and the rest stays readable. Entries are not sorted.
    pub fn read_found(&self, found: Vec<Found>) -> (Vec<Entry>, Vec<Problem>) {
        // Reading loose objects is dominated by per-file work (open, map,
        // inflate), so the blobs are parsed on every core, each thread with
        // its own repository handle.
        let threads = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .min(found.len() / 512 + 1);
        let chunk = found.len().div_ceil(threads.max(1)).max(1);
        let results: Vec<Vec<std::result::Result<Record, BadEntry>>> =
            std::thread::scope(|scope| {
                let handles: Vec<_> = found
                    .chunks(chunk)
                    .map(|part| {
                        let repo = self.repo.clone();
                        scope.spawn(move || part.iter().map(|f| parse_entry(&repo, f)).collect())
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("log reader thread does not panic"))
                    .collect()
            });
        let mut entries = Vec::with_capacity(found.len());
        let mut problems = Vec::new();
        for (f, result) in found.into_iter().zip(results.into_iter().flatten()) {
            // A blob this process wrote that a prune took after its ref
            // moved is written again and read once more.
            let result = match result {
                Err(_) => self.healing(f.id, || parse_entry(&self.repo, &f)),
                ok => ok,
            };
            match result {
                Ok(record) => entries.push(Entry {
                    id: f.id,
                    reference: f.reference,
                    record,
                }),
                Err(why) => problems.push(Problem {
                    reference: f.reference,
                    seq: f.seq,
                    path: f.path,
                    reason: why.to_string(),
                }),
            }
        }
        (entries, problems)
    }
}

/// Why one round of [`Store::transact`] did not finish.
enum Round<E> {
    /// The object database has no room for another pack index: the round
    /// may run again on a fresh one.
    Exhausted(StoreError),
    Failed(E),
}

impl<E: From<StoreError>> From<StoreError> for Round<E> {
    fn from(e: StoreError) -> Self {
        if e.is_odb_exhausted() {
            Round::Exhausted(e)
        } else {
            Round::Failed(e.into())
        }
    }
}

/// Log commits this process wrote (bounded: forgetting one only costs
/// checking it again).
static WRITTEN: std::sync::Mutex<Vec<Oid>> = std::sync::Mutex::new(Vec::new());

fn wrote(commit: Oid) {
    let mut w = WRITTEN.lock().unwrap_or_else(|e| e.into_inner());
    if w.len() >= 4096 {
        w.drain(..2048);
    }
    w.push(commit);
}

fn written_here(commit: Oid) -> bool {
    WRITTEN
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .contains(&commit)
}

/// An event blob found in a log tree, not read yet.
#[derive(Debug, Clone)]
pub struct Found {
    pub id: Oid,
    /// The log ref it was found under.
    pub reference: String,
    /// The writer that ref belongs to.
    pub writer: String,
    /// Its path in the log tree.
    pub path: String,
    /// The seq its file name gives, if it parses.
    pub seq: Option<u64>,
}

impl Found {
    fn new(reference: &str, path: String, id: Oid) -> Self {
        let name = path.rsplit('/').next().unwrap_or_default();
        Found {
            id,
            reference: reference.to_owned(),
            writer: reference.rsplit('/').next().unwrap_or_default().to_owned(),
            seq: name.split('-').next().and_then(|s| s.parse().ok()),
            path,
        }
    }
}

/// What moved in one log ref (see [`Store::log_changes`]).
#[derive(Debug, Default)]
pub struct LogChanges {
    /// Event blobs that are new.
    pub added: Vec<Found>,
    /// Entries removed or replaced: the ref was rewritten.
    pub lost: Vec<super::objects::TreeChange>,
}

impl LogView {
    /// Puts entries in global order, problems by ref and seq.
    fn sort(&mut self) {
        self.entries.sort_by(|a, b| {
            a.record
                .order_key()
                .cmp(&b.record.order_key())
                .then(a.id.cmp(&b.id))
        });
        self.problems
            .sort_by(|a, b| (&a.reference, a.seq).cmp(&(&b.reference, b.seq)));
    }
}

/// Why one log commit is not as git-orch writes them; each text follows
/// "log commit <id>".
#[derive(Debug, thiserror::Error)]
pub enum BadLogCommit {
    #[error("was committed by {name} <{email}>, not by git-orch")]
    ForeignCommitter { name: String, email: String },
    #[error("does not name writer {writer} (Orch-Writer)")]
    OtherWriter { writer: String },
    #[error("has no Orch-Seq/Orch-Clock trailers")]
    NoPosition,
    #[error("carries clock {clock}, above the ceiling {MAX_CLOCK} no log reaches")]
    ClockBeyondCeiling { clock: u64 },
    #[error("has no Orch-Events trailer")]
    NoEventCount,
    #[error("has a parent that is no log commit: {0}")]
    ParentNotInLog(#[source] StoreError),
    #[error("does not continue its parent (seq {seq} after {before}, {events} event(s))")]
    Gap { seq: u64, before: u64, events: u64 },
    #[error("moves the clock backwards ({clock} after {before})")]
    ClockBackwards { clock: u64, before: u64 },
    #[error("{0}")]
    Unreadable(#[source] StoreError),
    #[error(
        "should add {events} event(s) after seq {after} and change nothing else, but changes {changed} entries"
    )]
    OtherChanges {
        events: u64,
        after: u64,
        changed: usize,
    },
    #[error("is a merge that does not keep its parents' position")]
    MergeMovesPosition,
    #[error("is a merge that drops or replaces events")]
    MergeLosesEvents,
    #[error("has more than two parents")]
    TooManyParents,
}

/// Why one event blob of a log is not trusted.
#[derive(Debug, thiserror::Error)]
pub enum BadEntry {
    #[error(
        "blob {id} sits at {path} whose name does not name it (the log was rewritten by something other than git-orch)"
    )]
    Misnamed { id: Oid, path: String },
    #[error("blob {id} cannot be read: {source}")]
    Unreadable {
        id: Oid,
        #[source]
        source: super::error::GitError,
    },
    #[error("blob {id} is {size} bytes; an event may be at most {MAX_EVENT_BYTES} bytes")]
    TooLarge { id: Oid, size: u64 },
    #[error("blob {id} {source}")]
    NotARecord {
        id: Oid,
        #[source]
        source: crate::event::BadRecord,
    },
    #[error(
        "blob {id} has clock {clock}, above the ceiling {MAX_CLOCK} no log reaches (forged or corrupt)"
    )]
    ClockBeyondCeiling { id: Oid, clock: u64 },
    #[error("blob {id} claims writer {claims} but sits in the log of {log}")]
    OtherWriter {
        id: Oid,
        claims: String,
        log: String,
    },
    #[error("blob {id} claims seq {claims} but its file name says {named:?}")]
    OtherSeq {
        id: Oid,
        claims: u64,
        named: Option<u64>,
    },
}

/// Reads and checks one event blob: its file name must name it
/// (`<seq>-<first 8 hex digits of its id>.json`), and it must be a record
/// of this format, written by the writer whose log holds it, at the seq
/// its name says. A blob under a name that is not its own was put there by
/// something other than git-orch (a rewritten log), and is not trusted.
fn parse_entry(repo: &gix::Repository, found: &Found) -> std::result::Result<Record, BadEntry> {
    use BadEntry as B;
    let id = found.id;
    let name = found.path.rsplit('/').next().unwrap_or_default();
    let hex = id.to_hex().to_string();
    let named = name
        .strip_suffix(".json")
        .and_then(|n| n.split_once('-'))
        .map(|(_, b)| b);
    if named != Some(&hex[..8]) {
        return Err(B::Misnamed {
            id,
            path: found.path.clone(),
        });
    }
    // Sized from its header first: a huge blob is never read.
    let unreadable = |e: gix::Error| B::Unreadable {
        id,
        source: super::error::GitError::new(e),
    };
    let size = repo.find_header(id).map_err(unreadable)?.size();
    if size > MAX_EVENT_BYTES {
        return Err(B::TooLarge { id, size });
    }
    let blob = repo.find_blob(id).map_err(unreadable)?;
    let record = Record::from_json(&blob.data).map_err(|source| B::NotARecord { id, source })?;
    if record.clock > MAX_CLOCK {
        return Err(B::ClockBeyondCeiling {
            id,
            clock: record.clock,
        });
    }
    if record.writer.as_str() != found.writer {
        return Err(B::OtherWriter {
            id,
            claims: record.writer.to_string(),
            log: found.writer.clone(),
        });
    }
    if found.seq != Some(record.seq) {
        return Err(B::OtherSeq {
            id,
            claims: record.seq,
            named: found.seq,
        });
    }
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_paths_fan_out_and_sort_by_seq() {
        let blob = Oid::from_hex(b"0123456789abcdef0123456789abcdef01234567").expect("hex");
        assert_eq!(event_path(1, blob), "ev/00/00/0000000001-01234567.json");
        assert_eq!(event_path(256, blob), "ev/00/01/0000000256-01234567.json");
        assert_eq!(
            event_path(70_000, blob),
            "ev/01/11/0000070000-01234567.json"
        );
    }

    #[test]
    fn trailers_round_trip() {
        let writer = WriterId::new("abc").expect("valid");
        let records: Vec<Record> = (1..=3)
            .map(|i| Record {
                version: 1,
                writer: writer.clone(),
                seq: 10 + i,
                clock: 20 + i,
                time_ms: 0,
                event: Event::DebugMarker {
                    label: "line\nbreak".into(),
                    n: i,
                },
            })
            .collect();
        let msg = commit_message(&writer, &records);
        assert!(
            msg.lines()
                .next()
                .expect("subject")
                .starts_with("3 events: debug marker line break")
        );
        assert_eq!(
            parse_trailers(&msg),
            Some(TipPosition { seq: 13, clock: 23 })
        );
        assert!(msg.contains("Orch-Type: debug_marker, debug_marker, debug_marker"));
    }

    /// The writer id comes from the configuration read at open when it is
    /// there, and from git when it is not, so one made by another process
    /// after this store was opened is still found rather than replaced.
    #[test]
    fn writer_id_made_by_another_process_is_seen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let early = Store::init_for_tests(dir.path());
        assert_eq!(early.writer_id().expect("read"), None);
        let other = Store::open(dir.path()).expect("open");
        let made = other.writer().expect("make writer id");
        assert_eq!(early.writer_id().expect("read"), Some(made.clone()));
        assert_eq!(early.writer().expect("writer"), made);
        // A store opened after the id was made answers from its snapshot.
        let late = Store::open(dir.path()).expect("open");
        assert_eq!(late.writer_id().expect("read"), Some(made));
    }
}
