//! Three-way tree merges in memory, for building merge-queue candidates
//! without touching any working tree.
//!
//! A conflict is never resolved: a merge whose outcome git would consider
//! unresolved (conflict markers, undecidable renames, evasive renames)
//! returns the conflicting paths and, for text conflicts, the conflicting
//! hunks, and no tree.

use super::error::{Result, StoreError};
use super::oid::Oid;
use super::repository::Store;

/// One conflicting path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeConflict {
    pub path: String,
    /// The conflicting regions of a text conflict, markers included.
    pub hunks: Vec<String>,
}

/// The outcome of a three-way tree merge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreeMerge {
    Clean(Oid),
    Conflicts(Vec<MergeConflict>),
}

/// Bytes of one hunk kept for the retry context.
const MAX_HUNK: usize = 2048;

/// The `<<<<<<<` … `>>>>>>>` regions of a blob with conflict markers.
fn hunks(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if line.starts_with("<<<<<<<") {
            current = Some(String::new());
        }
        if let Some(h) = current.as_mut() {
            if h.len() < MAX_HUNK {
                h.push_str(line);
                h.push('\n');
            }
            if line.starts_with(">>>>>>>") {
                out.push(current.take().expect("inside a hunk"));
            }
        }
    }
    out
}

/// One commit of an attempt's history, as gates judge it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitStep {
    pub commit: Oid,
    /// The tree of its first parent (the empty tree for a root commit).
    pub before: Oid,
    /// Its own tree.
    pub after: Oid,
}

impl Store {
    /// Merges `ours` and `theirs` (trees) with `base` as their ancestor.
    pub fn merge_trees(
        &self,
        base: Oid,
        ours: Oid,
        theirs: Oid,
        labels: [&str; 3],
    ) -> Result<TreeMerge> {
        self.retrying(|| self.merge_trees_once(base, ours, theirs, labels))
    }

    fn merge_trees_once(
        &self,
        base: Oid,
        ours: Oid,
        theirs: Oid,
        labels: [&str; 3],
    ) -> Result<TreeMerge> {
        use gix::bstr::ByteSlice;
        // The merge writes its blobs and trees to memory; only a clean
        // outcome's are written to the repository, through the journal
        // like every object git-orch writes (see `super::durable`).
        let mut repo = self.repo.clone();
        repo.objects.enable_object_memory();
        let options = repo
            .tree_merge_options()
            .map_err(|e| StoreError::git("reading merge options", e))?;
        let mut outcome = repo
            .merge_trees(
                base,
                ours,
                theirs,
                gix::merge::blob::builtin_driver::text::Labels {
                    ancestor: Some(labels[0].as_bytes().as_bstr()),
                    current: Some(labels[1].as_bytes().as_bstr()),
                    other: Some(labels[2].as_bytes().as_bstr()),
                },
                options,
            )
            .map_err(|e| StoreError::git("merging trees", e))?;
        let how = gix::merge::tree::TreatAsUnresolved::git();
        if outcome.has_unresolved_conflicts(how) {
            let mut conflicts = Vec::new();
            for c in outcome.conflicts.iter().filter(|c| c.is_unresolved(how)) {
                let path = c.ours.location().to_string();
                // A text conflict's merged blob holds the markers.
                let mut h = Vec::new();
                if let Ok(
                    gix::merge::tree::Resolution::OursModifiedTheirsModifiedThenBlobContentMerge {
                        merged_blob,
                    },
                ) = &c.resolution
                    && let Ok(blob) = repo.find_blob(merged_blob.merged_blob_id)
                {
                    h = hunks(&String::from_utf8_lossy(&blob.data));
                }
                if !conflicts.iter().any(|x: &MergeConflict| x.path == path) {
                    conflicts.push(MergeConflict { path, hunks: h });
                }
            }
            return Ok(TreeMerge::Conflicts(conflicts));
        }
        let tree = outcome
            .tree
            .write()
            .map_err(|e| StoreError::git("writing a merged tree", e))?
            .detach();
        drop(outcome);
        for (id, (kind, data)) in repo.objects.take_object_memory().unwrap_or_default().iter() {
            let written = self
                .write_new(*kind, data)
                .map_err(|e| StoreError::git("writing a merged tree", e))?;
            debug_assert_eq!(written, *id);
        }
        Ok(TreeMerge::Clean(tree.into()))
    }

    /// Writes a commit with the given author (name, email, seconds, tz
    /// offset in seconds) and the orch committer.
    pub fn write_commit_by(
        &self,
        author: (&str, &str, i64, i32),
        message: &str,
        tree: Oid,
        parents: &[Oid],
    ) -> Result<Oid> {
        self.write_commit_as(
            author,
            (super::repository::ORCH_NAME, super::repository::ORCH_EMAIL),
            message,
            tree,
            parents,
        )
    }

    /// Writes a commit with the given author (name, email, seconds, tz
    /// offset in seconds) and committer (name, email; committed now).
    pub fn write_commit_as(
        &self,
        author: (&str, &str, i64, i32),
        committer: (&str, &str),
        message: &str,
        tree: Oid,
        parents: &[Oid],
    ) -> Result<Oid> {
        let author_sig = gix::actor::Signature {
            name: author.0.into(),
            email: author.1.into(),
            time: gix::date::Time::new(author.2, author.3),
        };
        let committer = gix::actor::Signature {
            name: committer.0.into(),
            email: committer.1.into(),
            time: gix::date::Time::now_utc(),
        };
        let commit = gix::objs::Commit {
            tree: tree.into(),
            parents: parents.iter().copied().map(Into::into).collect(),
            author: author_sig,
            committer,
            encoding: None,
            message: message.into(),
            extra_headers: Vec::new(),
        };
        let mut bytes = Vec::with_capacity(512);
        gix::objs::WriteTo::write_to(&commit, &mut bytes)
            .expect("writing a commit to a Vec cannot fail");
        self.write_new(gix::objs::Kind::Commit, &bytes)
            .map_err(|e| StoreError::git("writing a commit", e))
    }

    /// Every commit reachable from `tip` but not from `base` (side branches
    /// an agent merged included), oldest first: the steps by which the
    /// attempt's history got from `base` to `tip`.
    pub fn commit_steps(&self, base: Oid, tip: Oid) -> Result<Vec<CommitStep>> {
        // In process (a walk with `base` hidden, what `git rev-list
        // base..tip` lists), then ordered parents first by a depth-first
        // walk from the tip, so a linear history comes out oldest first.
        let only: std::collections::HashSet<Oid> =
            self.commits_only_in(&[tip], &[base])?.into_iter().collect();
        let mut infos = std::collections::HashMap::new();
        let mut ordered = Vec::with_capacity(only.len());
        let mut done = std::collections::HashSet::new();
        // (commit, whether its parents were pushed already)
        let mut stack = vec![(tip, false)];
        while let Some((commit, expanded)) = stack.pop() {
            if !only.contains(&commit) || (done.contains(&commit) && !expanded) {
                continue;
            }
            if expanded {
                if done.insert(commit) {
                    ordered.push(commit);
                }
                continue;
            }
            let info = self.commit_info(commit)?;
            stack.push((commit, true));
            for p in info.parents.iter().rev() {
                if !done.contains(p) {
                    stack.push((*p, false));
                }
            }
            infos.insert(commit, info);
        }
        let mut out = Vec::with_capacity(ordered.len());
        for commit in ordered {
            let info = &infos[&commit];
            let parent_tree = match info.parents.first() {
                Some(p) => self.commit_info(*p)?.tree,
                None => self.write_empty_tree()?,
            };
            out.push(CommitStep {
                commit,
                before: parent_tree,
                after: info.tree,
            });
        }
        Ok(out)
    }

    /// The commits reachable from `tip` but not from `base`, oldest first,
    /// following first parents.
    pub fn first_parent_range(&self, base: Oid, tip: Oid) -> Result<Vec<Oid>> {
        let mut out = Vec::new();
        let mut at = tip;
        while at != base {
            if self.is_ancestor(at, base)? {
                break;
            }
            out.push(at);
            match self.commit_info(at)?.parents.first() {
                Some(p) => at = *p,
                None => break,
            }
            if out.len() > 100_000 {
                return Err(StoreError::Corrupt(format!(
                    "{base}..{tip} is implausibly long"
                )));
            }
        }
        out.reverse();
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hunks_are_cut_at_markers() {
        let text = "a\n<<<<<<< ours\nx\n=======\ny\n>>>>>>> theirs\nb\n";
        assert_eq!(
            hunks(text),
            ["<<<<<<< ours\nx\n=======\ny\n>>>>>>> theirs\n"]
        );
    }
}
