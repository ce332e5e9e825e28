//! Derived notes under `refs/notes/orch`.
//!
//! A note on a result commit or a landed commit repeats what the log already
//! says (attempt, gate verdicts, plan hash) so that plain
//! `git log --notes=orch` shows it. Notes are never read back as truth: they
//! can be regenerated from the log at any time, which is why a lost note race
//! is simply retried and a missing note is not an error.

use super::refs::NOTES_REF;
use super::{Oid, Result, Store, StoreError};

impl Store {
    /// Sets the orch note of `target` to `text` (a trailing newline is added
    /// as git does), replacing any previous note.
    pub fn set_note(&self, target: Oid, text: &str) -> Result<()> {
        let mut data = text.trim_end_matches('\n').to_owned();
        data.push('\n');
        let mut guard = self.lock("notes.lock", "writing a note")?;
        guard.intend([NOTES_REF]);
        let mut last = String::new();
        for attempt in 0..super::lock::MAX_TRIES {
            let mut notes = self
                .repo
                .notes()
                .map_err(|e| StoreError::git("opening notes", e))?
                .with_commit_message("git-orch: note");
            match notes.replace(NOTES_REF, target, data.as_bytes()) {
                Ok(_) => return Ok(()),
                Err(e) => {
                    // The notes platform updates its ref by compare-and-swap;
                    // losing to another writer is a conflict to retry.
                    last = super::chain(&e);
                    super::lock::backoff(attempt);
                }
            }
        }
        Err(StoreError::Git {
            context: format!("writing the note of {target} in {NOTES_REF}"),
            message: last,
        })
    }

    /// The orch note of `target`, if any.
    pub fn note(&self, target: Oid) -> Result<Option<String>> {
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
