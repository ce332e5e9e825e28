//! The records git-orch writes as notes on commits (`refs/notes/orch`):
//! an attempt's verdicts on its result commit, a landing on the commit it
//! landed. One commit can be both, or more: a later attempt that changed
//! nothing has main's landed tip as its result. So a note is a list of
//! records, blocks separated by a blank line, each named by its first line
//! (`git-orch attempt <run>/<task>/attempt-<n>`, `git-orch landed …`); a
//! record is added to a note or replaces the one of the same name, never
//! the others. Notes are derived from the log: `git orch fsck --repair`
//! writes a landing's record again when it is missing.

use crate::store::{Oid, Store, StoreError};

/// A task's landing, as the record on the commit it landed.
pub struct TaskLanding<'a> {
    pub run: &'a str,
    pub task: &'a str,
    pub attempt: u32,
    pub target: &'a str,
    pub plan_id: &'a str,
    pub revision: u32,
    pub plan_hash: &'a str,
    pub strategy: &'a str,
}

impl TaskLanding<'_> {
    /// The record's name: what [`has_record`] looks for.
    pub fn name(&self) -> String {
        format!(
            "git-orch landed {}/{}/attempt-{} on {}",
            self.run, self.task, self.attempt, self.target
        )
    }

    pub fn record(&self) -> String {
        format!(
            "{}\nplan: {} revision {} ({})\nstrategy: {}\n",
            self.name(),
            self.plan_id,
            self.revision,
            self.plan_hash,
            self.strategy
        )
    }
}

/// A person's branch landed by `git orch land`, as the record on the
/// commit it landed.
pub struct BranchLanding<'a> {
    pub branch: &'a str,
    pub commit: &'a str,
    pub target: &'a str,
    pub approver: &'a str,
    pub approval: &'a str,
    pub strategy: &'a str,
}

impl BranchLanding<'_> {
    pub fn name(&self) -> String {
        format!(
            "git-orch landed branch {} ({}) on {}",
            self.branch, self.commit, self.target
        )
    }

    pub fn record(&self) -> String {
        format!(
            "{}\napproved by {} ({})\nstrategy: {}\n",
            self.name(),
            self.approver,
            self.approval,
            self.strategy
        )
    }
}

/// Adds `record` to the note of `commit`, replacing a record of the same
/// name (its first line) and keeping every other.
pub fn add_record(store: &Store, commit: Oid, record: &str) -> Result<(), StoreError> {
    store.update_note(commit, |existing| {
        merged(existing.unwrap_or_default(), record)
    })
}

/// The ref update that adds `record` to the note of `commit` (as
/// [`add_record`] does), for an operation that bundles it with others.
pub fn record_update(
    store: &Store,
    commit: Oid,
    record: &str,
) -> Result<crate::store::refs::RefUpdate, StoreError> {
    store.note_update(commit, |existing| {
        merged(existing.unwrap_or_default(), record)
    })
}

/// Whether the note of `commit` holds a record named `name`.
pub fn has_record(store: &Store, commit: Oid, name: &str) -> Result<bool, StoreError> {
    Ok(store
        .note(commit)?
        .is_some_and(|note| records(&note).any(|r| first_line(r) == name)))
}

/// The first line of a record: its name.
pub fn first_line(record: &str) -> &str {
    record.lines().next().unwrap_or_default().trim_end()
}

fn records(note: &str) -> impl Iterator<Item = &str> {
    note.split("\n\n")
        .map(|r| r.trim_matches('\n'))
        .filter(|r| !r.is_empty())
}

/// `note` with `record` added (or put in place of the record of its name).
fn merged(note: &str, record: &str) -> String {
    let record = record.trim_matches('\n');
    let name = first_line(record);
    let mut out: Vec<&str> = records(note).filter(|r| first_line(r) != name).collect();
    out.push(record);
    out.join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_added_and_replaced_by_name_never_dropped() {
        let landed = "git-orch landed r/a/attempt-1 on main\nstrategy: squash\n";
        let attempt = "git-orch attempt r/b/attempt-2\noutcome: failed\n";
        let both = merged(landed, attempt);
        assert!(both.contains("git-orch landed r/a/attempt-1"), "{both}");
        assert!(both.contains("git-orch attempt r/b/attempt-2"), "{both}");
        // The same record again replaces itself only.
        let again = merged(&both, "git-orch attempt r/b/attempt-2\noutcome: passed\n");
        assert!(again.contains("outcome: passed"), "{again}");
        assert!(!again.contains("outcome: failed"), "{again}");
        assert!(again.contains("git-orch landed r/a/attempt-1"), "{again}");
        assert_eq!(records(&again).count(), 2);
        // An old note without records is kept as one.
        assert_eq!(merged("", landed).trim_end(), landed.trim_end());
    }
}
