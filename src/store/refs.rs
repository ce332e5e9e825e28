//! Reading refs and updating them by compare-and-swap.
//!
//! A [`RefUpdate`] always names the value it replaces ([`Expected`]); several
//! updates are applied in one gix transaction, so either all of them land or
//! none does. There is deliberately no way to say "whatever is there".

use super::error::{Result, StoreError, full_name, ref_error};
use super::oid::Oid;
use super::repository::Store;

/// The prefix under which all git-orch state lives.
pub const ORCH_PREFIX: &str = "refs/orch/";
/// Tracking copies of other clones' `refs/orch/*`, one folder per remote.
pub const REMOTES_PREFIX: &str = "refs/orch-remotes/";
/// One ref that keeps result commits and candidates reachable for `git gc`.
pub const KEEP_REF: &str = "refs/orch/keep";
/// Derived, never authoritative notes on result and landed commits.
pub const NOTES_REF: &str = "refs/notes/orch";

/// What a ref must hold for an update to apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expected {
    /// The ref must not exist yet.
    Absent,
    /// The ref must point at exactly this object.
    At(Oid),
}

impl Expected {
    /// `At` for `Some`, `Absent` for `None`: the usual "what I read".
    pub fn from_read(value: Option<Oid>) -> Self {
        value.map_or(Expected::Absent, Expected::At)
    }
}

/// One compare-and-swap ref change.
#[derive(Debug, Clone)]
pub struct RefUpdate {
    /// Full ref name, e.g. `refs/orch/plans/add-auth`.
    pub name: String,
    /// The new value, or `None` to delete the ref.
    pub new: Option<Oid>,
    /// What the ref must hold now.
    pub expected: Expected,
    /// Reflog message.
    pub message: String,
}

impl RefUpdate {
    /// Sets `name` to `new` if it currently holds `expected`.
    pub fn set(name: impl Into<String>, new: Oid, expected: Expected, message: &str) -> Self {
        Self {
            name: name.into(),
            new: Some(new),
            expected,
            message: message.to_owned(),
        }
    }

    /// Deletes `name` if it currently holds `old`.
    pub fn delete(name: impl Into<String>, old: Oid, message: &str) -> Self {
        Self {
            name: name.into(),
            new: None,
            expected: Expected::At(old),
            message: message.to_owned(),
        }
    }
}

/// The outcome of [`Store::apply`]: applied, or someone else moved a ref first.
#[derive(Debug, PartialEq, Eq)]
pub enum Applied {
    Done,
    Conflict,
}

impl Store {
    /// The object a ref points to (peeled to a non-tag object), if it exists.
    /// In a view with proposed refs ([`Store::with_proposed_refs`]), the
    /// proposed value wins.
    pub fn ref_target(&self, name: &str) -> Result<Option<Oid>> {
        if let Some(proposed) = self.overlay.get(name) {
            return Ok(*proposed);
        }
        // gix reads packed-refs before the loose file: a `git pack-refs`
        // (every `git gc` runs one) that moves the ref into a new
        // packed-refs and deletes its loose file in between makes it look
        // absent, or older. Read again when packed-refs changed meanwhile.
        for _ in 0..PACKED_RACE_TRIES {
            let before = self.packed_refs_stamp();
            let found = self.ref_target_once(name)?;
            if self.packed_refs_stamp() == before {
                return Ok(found);
            }
        }
        self.ref_target_once(name)
    }

    fn ref_target_once(&self, name: &str) -> Result<Option<Oid>> {
        let reference = match self.repo.try_find_reference(name) {
            Ok(r) => r,
            Err(e) => {
                let err = StoreError::git(format!("reading {name}"), e);
                return Err(match self.broken_ref_files(name).into_iter().next() {
                    Some(broken) => broken.into_error(),
                    None => err,
                });
            }
        };
        match reference {
            None => Ok(None),
            Some(mut r) => self.peeled(&mut r, name).map(Some),
        }
    }

    /// The object `r` points to, peeled past tags. One whose object a
    /// prune took after this process wrote it is written again first; one
    /// whose object is missing or unreadable otherwise is damage, named.
    fn peeled(&self, r: &mut gix::Reference<'_>, name: &str) -> Result<Oid> {
        let direct = r.target().try_id().map(ToOwned::to_owned);
        let peeled = match direct {
            Some(id) => self.healing(id.into(), || r.peel_to_id().map(|p| p.detach())),
            None => r.peel_to_id().map(|p| p.detach()),
        };
        match peeled {
            Ok(id) => Ok(id.into()),
            Err(e) => {
                let message = super::error::chain(&e);
                match direct {
                    Some(id) if super::error::is_object_damage(&message) => {
                        Err(StoreError::Damaged {
                            reference: name.to_owned(),
                            problem: format!(
                                "it points at {id}, which is missing or unreadable ({message})"
                            ),
                        })
                    }
                    _ => Err(StoreError::git(format!("resolving {name}"), e)),
                }
            }
        }
    }

    /// All refs whose full name starts with `prefix` (which ends in `/`),
    /// with their targets, sorted by name. In a view with proposed refs,
    /// proposed values replace, add or remove refs.
    pub fn refs_with_prefix(&self, prefix: &str) -> Result<Vec<(String, Oid)>> {
        // Another process (a fetch, `git pack-refs`, a ref deleted with
        // its folder) may remove a loose ref or its folder while the
        // folders are walked; the walk then fails on a path that was
        // there a moment ago. Such a failure is a race, not a state:
        // walk again, a few times, before reporting it.
        let mut tries = 0;
        let mut packed_races = 0;
        let mut out = loop {
            let before = self.packed_refs_stamp();
            match self.walk_refs(prefix) {
                // A `git pack-refs` meanwhile may have hidden a ref that
                // moved from its loose file into packed-refs (see
                // `ref_target`): walk again.
                Ok(_) if packed_races < PACKED_RACE_TRIES && self.packed_refs_stamp() != before => {
                    packed_races += 1;
                }
                Ok(out) => break out,
                // Damage is a state, not a race: no use walking again.
                Err(e @ StoreError::Damaged { .. }) => return Err(e),
                Err(_) if tries < 4 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(5 << tries));
                }
                Err(e) => return Err(e),
            }
        };
        for (name, proposed) in self.overlay.range(prefix.to_owned()..) {
            if !name.starts_with(prefix) {
                break;
            }
            if let Some(id) = proposed {
                out.push((name.clone(), *id));
            }
        }
        out.sort();
        Ok(out)
    }

    /// What identifies the packed-refs file's content now (its inode, size
    /// and time of change), or `None` when there is none: a new one is
    /// always a new file, renamed into place.
    fn packed_refs_stamp(&self) -> Option<(u64, u64, i64, i64)> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(self.common_dir().join("packed-refs")).ok()?;
        Some((m.ino(), m.size(), m.mtime(), m.mtime_nsec()))
    }

    /// One walk of the refs under `prefix` as git holds them (the overlay
    /// is applied by the caller).
    fn walk_refs(&self, prefix: &str) -> Result<Vec<(String, Oid)>> {
        let platform = self
            .repo
            .references()
            .map_err(|e| StoreError::git("listing refs", e))?;
        let iter = platform
            .prefixed(prefix)
            .map_err(|e| StoreError::git(format!("listing {prefix}*"), e))?;
        let mut out = Vec::new();
        for r in iter {
            let mut r = match r {
                Ok(r) => r,
                Err(e) => {
                    // A ref file that holds no object id (a crash emptied
                    // it) is named; one hidden from this view is skipped.
                    let broken: Vec<_> = self
                        .broken_ref_files(prefix)
                        .into_iter()
                        .filter(|b| !self.overlay.contains_key(&b.reference))
                        .collect();
                    match broken.into_iter().next() {
                        Some(b) => return Err(b.into_error()),
                        None if self.overlay.is_empty() => {
                            return Err(StoreError::git(format!("listing {prefix}*"), e));
                        }
                        None => continue,
                    }
                }
            };
            let name = r.name().as_bstr().to_string();
            if self.overlay.contains_key(&name) {
                continue;
            }
            let id = self.peeled(&mut r, &name)?;
            out.push((name, id));
        }
        Ok(out)
    }

    /// Applies every update atomically. `Conflict` means at least one ref no
    /// longer held its expected value; nothing changed and the caller redoes
    /// its whole operation from a fresh read.
    ///
    /// Before the refs move, the objects written since the last update
    /// (the ones these refs name) are made durable, and so are the refs'
    /// new files before they replace the old ones; after, the objects are
    /// checked to still exist and written again if a prune took them (see
    /// [`super::durable`]). Every ref moved gets a reflog entry, so
    /// `git orch fsck --repair` can restore a ref whose file a crash
    /// emptied.
    pub fn apply(&self, updates: &[RefUpdate]) -> Result<Applied> {
        use gix::refs::Target;
        use gix::refs::transaction::{LogChange, PreviousValue, RefEdit, RefLog};
        if updates.is_empty() {
            return Ok(Applied::Done);
        }
        if self.is_view() {
            return Err(StoreError::ReadOnlyView {
                reference: updates[0].name.clone(),
            });
        }
        let mut edits = Vec::with_capacity(updates.len());
        for u in updates {
            if !u.name.starts_with("refs/") {
                return Err(StoreError::InvalidRefName(format!(
                    "refusing to update {:?}: only names under refs/ are allowed",
                    u.name
                )));
            }
            let name = full_name(&u.name)?;
            let expected = match u.expected {
                Expected::Absent => PreviousValue::MustNotExist,
                Expected::At(id) => PreviousValue::MustExistAndMatch(Target::Object(id.into())),
            };
            edits.push(match u.new {
                Some(new) => RefEdit::update_with_log(
                    name,
                    Target::Object(new.into()),
                    expected,
                    LogChange {
                        mode: RefLog::AndReference,
                        // (Not in the previous design a benchmark measures.)
                        force_create_reflog: self.durability
                            != super::durability::Durability::Unsynced,
                        message: u.message.clone().into(),
                    },
                ),
                None => RefEdit::delete(name, expected),
            });
        }
        self.flush_objects()?;
        // git's own default for packed-refs, and the OVERRIDES' value for
        // loose ref files (a concurrent `git gc` packing refs holds them
        // for microseconds).
        let wait = gix::lock::acquire::Fail::AfterDurationWithBackoff(
            std::time::Duration::from_millis(1000),
        );
        let (mut folder_tries, mut packed_tries) = (0, 0);
        let prepared = loop {
            let packed = self.packed_refs_stamp();
            match self
                .repo
                .refs
                .transaction()
                .prepare(edits.clone(), wait, wait)
            {
                // A `git pack-refs` (every `git gc` runs one) replaced
                // packed-refs while the refs were locked and their values
                // compared: gix may have compared with the packed-refs
                // before it, in which a ref whose loose file pack-refs then
                // removed holds an older value. Dropped unwritten (its
                // locks released) and prepared again; still racing after
                // that, the caller reads again as after a lost race.
                Ok(p) if self.packed_refs_stamp() != packed => {
                    drop(p);
                    packed_tries += 1;
                    if packed_tries > PACKED_RACE_TRIES {
                        return Ok(Applied::Conflict);
                    }
                }
                Ok(p) => break p,
                Err(e) if is_cas_conflict(&e) => return Ok(Applied::Conflict),
                // `git pack-refs --prune` removes a ref's folder once it
                // is empty, also between gix making it and making the
                // ref's lock file in it ("No such file or directory", or
                // "File exists" when gix made it again meanwhile): again.
                Err(e) if folder_tries < LOCK_FOLDER_TRIES && lock_folder_vanished(&e) => {
                    folder_tries += 1;
                }
                Err(e) => return Err(ref_error(&updates[0].name, self.common_dir(), e)),
            }
        };
        // Each new ref file is complete on the disk before its rename
        // replaces the old one: a crash then leaves the old value or the
        // new, never an empty file.
        let written: Vec<std::path::PathBuf> = updates
            .iter()
            .filter(|u| u.new.is_some())
            .map(|u| self.common_dir().join(format!("{}.lock", u.name)))
            .filter(|p| p.is_file())
            .collect();
        for lock in &written {
            super::durable::sync_file(lock, self.durability).map_err(|e| {
                StoreError::io(format!("writing {} to the disk", lock.display()), e)
            })?;
        }
        // The reflog names the person's identity as git does, or git-orch's
        // own where none is configured (a reflog entry needs one).
        let orch = gix::actor::Signature {
            name: super::repository::ORCH_NAME.into(),
            email: super::repository::ORCH_EMAIL.into(),
            time: gix::date::Time::now_utc(),
        };
        let mut time = gix::date::parse::TimeBuf::default();
        let committer = match self.repo.committer() {
            Some(Ok(c)) => c,
            _ => orch.to_ref(&mut time),
        };
        if let Err(e) = prepared.commit(Some(committer)) {
            return Err(ref_error(&updates[0].name, self.common_dir(), e));
        }
        if self.durability == super::durability::Durability::Full {
            let refs: Vec<std::path::PathBuf> = updates
                .iter()
                .map(|u| self.common_dir().join(&u.name))
                .collect();
            super::durable::sync_folders(refs.iter().map(std::path::PathBuf::as_path))
                .map_err(|e| StoreError::io("writing ref folders to the disk", e))?;
        }
        self.settle_published()?;
        Ok(Applied::Done)
    }

    /// Whether `ancestor` is reachable from `descendant` (or equal to it).
    pub fn is_ancestor(&self, ancestor: Oid, descendant: Oid) -> Result<bool> {
        if ancestor == descendant {
            return Ok(true);
        }
        self.retrying(|| {
            let base = self
                .repo
                .merge_base(ancestor, descendant)
                .map_err(|e| StoreError::git("finding a merge base", e))?;
            Ok(base.is_some_and(|b| b.detach() == ancestor))
        })
    }

    /// The commits reachable from `tips` that no commit of `hidden` reaches
    /// (what `git rev-list <tips> --not <hidden>` lists), in no particular
    /// order. Empty when everything on `tips` is kept by `hidden`.
    pub fn commits_only_in(&self, tips: &[Oid], hidden: &[Oid]) -> Result<Vec<Oid>> {
        if tips.is_empty() {
            return Ok(Vec::new());
        }
        self.retrying(|| {
            let walk = self
                .repo
                .rev_walk(tips.iter().copied())
                .with_hidden(hidden.iter().copied())
                .all()
                .map_err(|e| StoreError::git("walking commits", e))?;
            let mut out = Vec::new();
            for info in walk {
                let info = info.map_err(|e| StoreError::git("walking commits", e))?;
                out.push(info.id.into());
            }
            Ok(out)
        })
    }

    /// Keeps `commits` reachable from [`KEEP_REF`], so `git gc --prune=now`
    /// never drops them. One commit per call, whose parents are the previous
    /// keep tip and the kept commits; its tree is empty.
    pub fn keep(&self, commits: &[Oid], why: &str) -> Result<()> {
        if commits.is_empty() {
            return Ok(());
        }
        for attempt in 0..super::lock::MAX_TRIES {
            let mut guard = self.lock(super::lock::LOG_LOCK, "keeping commits")?;
            let tip = self.ref_target(KEEP_REF)?;
            let update = self.keep_update(tip, commits, why)?;
            guard.intend([KEEP_REF]);
            if self.apply(&[update])? == Applied::Done {
                return Ok(());
            }
            drop(guard);
            super::lock::backoff(attempt);
        }
        Err(StoreError::Contention {
            reference: KEEP_REF.into(),
            attempts: super::lock::MAX_TRIES,
        })
    }

    /// The ref update that adds `commits` to the keep ref whose tip is `tip`,
    /// for callers that bundle it into a larger atomic operation.
    pub fn keep_update(&self, tip: Option<Oid>, commits: &[Oid], why: &str) -> Result<RefUpdate> {
        let mut parents: Vec<Oid> = tip.into_iter().collect();
        for c in commits {
            if !parents.contains(c) {
                parents.push(*c);
            }
        }
        let empty = self.write_empty_tree()?;
        let commit = self.write_commit(&format!("keep: {why}"), empty, &parents)?;
        Ok(RefUpdate::set(
            KEEP_REF,
            commit,
            Expected::from_read(tip),
            &format!("orch: keep {why}"),
        ))
    }
}

/// How often a read is made again because packed-refs changed under it.
const PACKED_RACE_TRIES: usize = 8;
/// How often a ref update is prepared again because the folder of a lock
/// file vanished.
const LOCK_FOLDER_TRIES: usize = 8;

/// Whether preparing a ref update failed because the folder of a ref's
/// lock file was removed (or removed and made again) while the lock was
/// being made: gix's "another IO error" (a lock another process holds is
/// a different error, waited for inside gix).
fn lock_folder_vanished(e: &gix::Error) -> bool {
    super::error::chain(e).contains("Another IO error occurred while obtaining the lock")
}

/// Whether preparing a ref update failed because a ref's value was not
/// the one the update expected: gix's own types for a failed
/// `MustExistAndMatch` (the ref moved) and `MustNotExist` (the ref was
/// made meanwhile), found by type anywhere in the error's tree, never by
/// its wording.
fn is_cas_conflict(e: &gix::Error) -> bool {
    use gix::refs::file::transaction::prepare::{MustNotExist, ReferenceOutOfDate};
    e.downcast_any_ref::<ReferenceOutOfDate>().is_some()
        || e.downcast_any_ref::<MustNotExist>().is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::repository::Store;

    /// Two commits to point a ref at.
    fn two_commits(store: &Store) -> (Oid, Oid) {
        let mut out = Vec::new();
        for text in ["a\n", "b\n"] {
            let blob = store.write_blob(text.as_bytes()).expect("blob");
            let tree = store.write_tree(&[("f", blob)]).expect("tree");
            out.push(store.write_commit(text, tree, &[]).expect("commit"));
        }
        (out[0], out[1])
    }

    /// `git update-ref` run by another process, as a user or a second
    /// git-orch would.
    fn git_update_ref(dir: &std::path::Path, args: &[String]) {
        let mut all = vec!["update-ref".to_owned()];
        all.extend_from_slice(args);
        crate::process::Git::new(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .run(&all)
            .expect("git update-ref");
    }

    #[test]
    fn a_ref_another_process_moved_after_the_read_is_a_conflict_and_keeps_its_value() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::init_for_tests(dir.path());
        let (a, b) = two_commits(&store);
        let name = "refs/orch/test/moved";
        let made = store.apply(&[RefUpdate::set(name, a, Expected::Absent, "make")]);
        assert_eq!(made.expect("create"), Applied::Done);
        let read = store.ref_target(name).expect("read");
        // Between this read and the update, another process moves it.
        git_update_ref(dir.path(), &[name.into(), b.to_string(), a.to_string()]);
        let update = RefUpdate::set(name, a, Expected::from_read(read), "stale");
        assert_eq!(
            store.apply(&[update]).expect("a lost race is no error"),
            Applied::Conflict
        );
        assert_eq!(store.ref_target(name).expect("read"), Some(b));
    }

    #[test]
    fn a_ref_another_process_made_after_the_read_is_a_conflict() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::init_for_tests(dir.path());
        let (a, b) = two_commits(&store);
        let name = "refs/orch/test/made";
        let read = store.ref_target(name).expect("read");
        assert_eq!(read, None);
        git_update_ref(dir.path(), &[name.into(), b.to_string()]);
        let update = RefUpdate::set(name, a, Expected::from_read(read), "stale");
        assert_eq!(
            store.apply(&[update]).expect("a lost race is no error"),
            Applied::Conflict
        );
        assert_eq!(store.ref_target(name).expect("read"), Some(b));
    }

    #[test]
    fn a_conflict_is_known_by_gix_type_and_not_by_wording() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::init_for_tests(dir.path());
        let (a, b) = two_commits(&store);
        let name = "refs/orch/test/typed";
        store
            .apply(&[RefUpdate::set(name, b, Expected::Absent, "make")])
            .expect("create");
        use gix::refs::Target;
        use gix::refs::transaction::{LogChange, PreviousValue, RefEdit};
        let stale = RefEdit::update_with_log(
            full_name(name).expect("name"),
            Target::Object(b.into()),
            PreviousValue::MustExistAndMatch(Target::Object(a.into())),
            LogChange::default(),
        );
        let fail = gix::lock::acquire::Fail::Immediately;
        let e = store
            .repo
            .refs
            .transaction()
            .prepare(vec![stale], fail, fail)
            .map(drop)
            .expect_err("the ref is at b, not a");
        assert!(is_cas_conflict(&e), "{e:?}");
        // Words that once identified a conflict are not one.
        let words = gix::Error::from_error(std::io::Error::other(
            "the reference should have content a, but the previous value did not exist",
        ));
        assert!(!is_cas_conflict(&words));
    }
}
