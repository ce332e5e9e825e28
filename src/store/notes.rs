//! Derived notes under `refs/notes/orch`.
//!
//! A note on a result commit or a landed commit repeats what the log already
//! says (attempt, gate verdicts, plan hash) so that plain
//! `git log --notes=orch` shows it. Notes are never read back as truth: they
//! can be regenerated from the log at any time, which is why a lost note race
//! is simply retried and a missing note is not an error.

use super::error::{Result, StoreError};
use super::oid::Oid;
use super::refs::{Applied, Expected, NOTES_REF, RefUpdate};
use super::repository::Store;

/// The store as gix's notes plumbing reads and writes objects through it:
/// every tree it writes goes through the journal (see [`super::durable`]).
struct NoteObjects<'s>(&'s Store);

impl gix::objs::Find for NoteObjects<'_> {
    fn try_find<'a>(
        &self,
        id: &gix::hash::oid,
        buffer: &'a mut Vec<u8>,
    ) -> gix::Result<Option<gix::objs::Data<'a>>> {
        gix::objs::Find::try_find(self.0, id, buffer)
    }
}

impl gix::objs::Write for NoteObjects<'_> {
    fn write_buf_with_known_id(
        &self,
        kind: gix::objs::Kind,
        from: &[u8],
        _id: gix::ObjectId,
    ) -> gix::Result<gix::ObjectId> {
        self.0.write_new(kind, from).map(Into::into)
    }

    fn write_stream(
        &self,
        kind: gix::objs::Kind,
        _size: u64,
        from: &mut dyn std::io::Read,
    ) -> gix::Result<gix::ObjectId> {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(from, &mut bytes).map_err(gix::Error::from_error)?;
        self.0.write_new(kind, &bytes).map(Into::into)
    }

    fn write_stream_with_known_id(
        &self,
        kind: gix::objs::Kind,
        size: u64,
        from: &mut dyn std::io::Read,
        _id: gix::ObjectId,
    ) -> gix::Result<gix::ObjectId> {
        self.write_stream(kind, size, from)
    }
}

impl Store {
    /// Sets the orch note of `target` to `text` (a trailing newline is added
    /// as git does), replacing any previous note: the blob, the notes
    /// trees (with git's fan-out) and a commit on the previous notes tip,
    /// then a compare-and-swap of the notes ref, redone if another writer
    /// moved it first.
    pub fn set_note(&self, target: Oid, text: &str) -> Result<()> {
        self.update_note(target, |_| text.to_owned())
    }

    /// Sets the orch note of `target` to what `edit` makes of the note it
    /// holds (`None`: none), read under the notes lock and again on every
    /// retry: two writers adding records to one note never lose one.
    pub fn update_note(&self, target: Oid, edit: impl Fn(Option<&str>) -> String) -> Result<()> {
        let mut guard = self.lock("notes.lock", "writing a note")?;
        guard.intend([NOTES_REF]);
        for attempt in 0..super::lock::MAX_TRIES {
            let update = self.note_update(target, &edit)?;
            if self.apply(&[update])? == Applied::Done {
                return Ok(());
            }
            super::lock::backoff(attempt);
        }
        Err(StoreError::Contention {
            reference: NOTES_REF.into(),
            attempts: super::lock::MAX_TRIES,
        })
    }

    /// The ref update that sets the orch note of `target` to what `edit`
    /// makes of the note it holds now, by compare-and-swap from the notes
    /// tip read here: for callers that bundle it into a larger atomic
    /// operation (an attempt's end), which reads it again when it is
    /// redone.
    pub fn note_update(
        &self,
        target: Oid,
        edit: impl Fn(Option<&str>) -> String,
    ) -> Result<RefUpdate> {
        let objects = NoteObjects(self);
        let context = || format!("writing the note of {target} in {NOTES_REF}");
        let tip = self.ref_target(NOTES_REF)?;
        // Read after the tip: a note newer than it fails the
        // compare-and-swap, and the caller reads both again.
        let existing = self.note(target)?;
        let mut data = edit(existing.as_deref()).trim_end_matches('\n').to_owned();
        data.push('\n');
        let root = match tip {
            Some(commit) => self.commit_info(commit)?.tree,
            None => self.write_empty_tree()?,
        };
        let mut notes = gix::note::plumbing::State::new(root.into(), &objects)
            .map_err(|e| StoreError::git(context(), e))?;
        let blob = self.write_blob(data.as_bytes())?;
        let edit = notes
            .replace(target.into(), blob.into(), &objects)
            .map_err(|e| StoreError::git(context(), e))?;
        let parents: Vec<Oid> = tip.into_iter().collect();
        let commit = self.write_commit("git-orch: note", edit.tree.into(), &parents)?;
        Ok(RefUpdate::set(
            NOTES_REF,
            commit,
            Expected::from_read(tip),
            "notes: git-orch: note",
        ))
    }

    /// The orch note of `target`, if any. A note tree or blob this process
    /// wrote that a prune took is written again and the read made once
    /// more: a note read as missing would be written back without the
    /// records it held.
    pub fn note(&self, target: Oid) -> Result<Option<String>> {
        self.retrying(|| self.note_once(target))
    }

    fn note_once(&self, target: Oid) -> Result<Option<String>> {
        let mut notes = self
            .repo
            .notes()
            .map_err(|e| StoreError::git("opening notes", e))?
            .with_refs([NOTES_REF])
            .map_err(|e| StoreError::git("selecting notes", e))?;
        let found = notes
            .get(target)
            .map_err(|e| StoreError::git(format!("reading the note of {target}"), e))?;
        Ok(found
            .first()
            .map(|n| String::from_utf8_lossy(&n.blob.data).into_owned()))
    }
}
