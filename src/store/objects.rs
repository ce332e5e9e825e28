//! Plain object access: blobs, trees and commits, by id.
//!
//! State commits are written with the fixed orch signature
//! ([`super::repository::ORCH_NAME`]) so they never depend on the user's identity.

use std::path::{Path, PathBuf};

use super::error::{Result, StoreError};
use super::oid::Oid;
use super::repository::Store;

/// One path that differs between two trees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathChange {
    pub path: String,
    /// The blob before (None: added).
    pub old: Option<Oid>,
    /// The blob after (None: deleted).
    pub new: Option<Oid>,
    /// Whether either side is a symbolic link (its blob is the target).
    pub symlink: bool,
    /// Whether either side is a submodule commit.
    pub submodule: bool,
}

/// One non-tree entry that differs between two trees (see
/// [`Store::tree_changes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeChange {
    pub path: String,
    /// The entry before (None: added).
    pub old: Option<Oid>,
    /// The entry after (None: removed).
    pub new: Option<Oid>,
}

fn join_path(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_owned()
    } else {
        format!("{prefix}/{name}")
    }
}

/// A commit's fields that the layers above need, detached from gix.
#[derive(Debug, Clone)]
pub struct CommitInfo {
    pub id: Oid,
    pub tree: Oid,
    pub parents: Vec<Oid>,
    pub message: String,
    /// Committer time, seconds since the epoch.
    pub time: i64,
    /// Author time, seconds since the epoch, and the author's time zone
    /// (offset from UTC in seconds), as written: a rebase keeps both.
    pub author_time: i64,
    pub author_offset: i32,
    pub author_name: String,
    pub author_email: String,
    pub committer_name: String,
    pub committer_email: String,
    /// Whether the commit carries a gpg/ssh signature header (not whether
    /// it verifies; see [`Store::signature_valid`]).
    pub signed: bool,
}

/// Where the loose object `id` lives under `objects`.
pub(super) fn loose_path(objects: &Path, id: &gix::hash::oid) -> PathBuf {
    let hex = id.to_hex().to_string();
    objects.join(&hex[..2]).join(&hex[2..])
}

impl Store {
    /// Writes `bytes` as a blob.
    pub fn write_blob(&self, bytes: &[u8]) -> Result<Oid> {
        self.write_new(gix::objs::Kind::Blob, bytes)
            .map_err(|e| StoreError::git("writing a blob", e))
    }

    /// Writes an object that is almost certainly new (it carries a time
    /// stamp or a fresh parent), skipping the existence check that
    /// `Repository::write_object` makes: a `stat` per object, on the hot
    /// path of every append. Writing an object that exists is harmless.
    /// Every object git-orch writes goes through here, into the journal
    /// that makes it durable and keeps it until it is safely published
    /// (see [`super::durable`]).
    pub(super) fn write_new(&self, kind: gix::objs::Kind, bytes: &[u8]) -> gix::Result<Oid> {
        self.write_journaled(kind, bytes)
    }

    /// The size of an object in bytes, from its header (the object is not
    /// read: a blob of a gigabyte costs nothing here).
    pub fn object_size(&self, id: Oid) -> Result<u64> {
        self.healing(id, || self.repo.find_header(id))
            .map(|h| h.size())
            .map_err(|e| StoreError::git(format!("reading the header of {id}"), e))
    }

    /// Reads a blob's bytes.
    pub fn read_blob(&self, id: Oid) -> Result<Vec<u8>> {
        let blob = self
            .healing(id, || self.repo.find_blob(id))
            .map_err(|e| StoreError::git(format!("reading blob {id}"), e))?;
        Ok(blob.data.clone())
    }

    /// The id of the empty tree for this repository's hash kind.
    pub fn empty_tree_id(&self) -> Oid {
        gix::ObjectId::empty_tree(self.repo.object_hash()).into()
    }

    /// The empty tree, written to the object database if it is not there.
    /// Git never needs it stored, but a commit that points at it (the keep
    /// ref's commits) does: without it `git fsck` reports a missing tree.
    pub fn write_empty_tree(&self) -> Result<Oid> {
        let id = self.empty_tree_id();
        // `Repository::has_object` answers yes for the empty tree whether or
        // not it is stored; ask the object database itself.
        if !gix::objs::Exists::exists(&self.repo.objects, id.as_gix()) {
            let written = self
                .write_new(gix::objs::Kind::Tree, &[])
                .map_err(|e| StoreError::git("writing the empty tree", e))?;
            debug_assert_eq!(written, id);
        }
        Ok(id)
    }

    /// Writes a tree holding `files` (path → blob id) and nothing else.
    pub fn write_tree(&self, files: &[(&str, Oid)]) -> Result<Oid> {
        let mut editor = self.tree_editor(self.empty_tree_id())?;
        for (path, id) in files {
            editor.upsert_blob(path, *id)?;
        }
        editor.write()
    }

    /// An editor for trees whose paths git-orch itself chose.
    pub(crate) fn tree_editor(&self, base: Oid) -> Result<TreeEditor<'_>> {
        use gix::objs::FindExt;
        let mut buf = Vec::new();
        // (Through the store's own lookup, which writes again a tree a
        // prune took from this process.)
        let root = self
            .find_tree(base.as_gix(), &mut buf)
            .map_err(|e| StoreError::git(format!("reading tree {base}"), e))?
            .into();
        Ok(TreeEditor {
            inner: gix::objs::tree::Editor::new(root, self, self.repo.object_hash()),
            store: self,
        })
    }

    /// Writes a commit with the orch signature. Does not move any ref.
    pub fn write_commit(&self, message: &str, tree: Oid, parents: &[Oid]) -> Result<Oid> {
        let sig = gix::actor::Signature {
            name: super::repository::ORCH_NAME.into(),
            email: super::repository::ORCH_EMAIL.into(),
            time: gix::date::Time::now_utc(),
        };
        // Written as a plain object: `Repository::new_commit_as` would read
        // the commit straight back from disk to return it.
        let commit = gix::objs::Commit {
            tree: tree.into(),
            parents: parents.iter().copied().map(Into::into).collect(),
            author: sig.clone(),
            committer: sig,
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

    /// Writes a commit signed with the user's git signing setup (gpg or
    /// ssh, `user.signingKey`, `gpg.format`): `git commit-tree -S`. The
    /// committer is the user, since the signature is theirs.
    pub fn write_signed_commit(&self, message: &str, tree: Oid, parents: &[Oid]) -> Result<Oid> {
        let mut args = vec!["commit-tree".to_owned(), "-S".into(), tree.to_string()];
        for p in parents {
            args.push("-p".into());
            args.push(p.to_string());
        }
        args.push("-m".into());
        args.push(message.to_owned());
        let out = self
            .git()
            .run(&args)
            .map_err(|source| StoreError::SigningFailed { source })?;
        let id = self.parse_oid(out.trim())?;
        // git wrote it; the journal keeps it like git-orch's own until a
        // ref names it safely (see `super::durable`).
        let object = self
            .repo
            .find_object(id)
            .map_err(|e| StoreError::git(format!("reading the signed commit {id}"), e))?;
        self.adopt(id, object.kind, &object.data);
        Ok(id)
    }

    /// Whether `commit` carries a signature that `git verify-commit` accepts.
    pub fn signature_valid(&self, commit: Oid) -> Result<bool> {
        let out = self.git().output(["verify-commit", &commit.to_string()])?;
        Ok(out.status.success())
    }

    /// Reads a commit.
    pub fn commit_info(&self, id: Oid) -> Result<CommitInfo> {
        let commit = self
            .healing(id, || self.repo.find_commit(id))
            .map_err(|e| StoreError::git(format!("reading commit {id}"), e))?;
        let decoded = commit
            .decode()
            .map_err(|e| StoreError::git(format!("decoding commit {id}"), e))?;
        let author = decoded
            .author()
            .map_err(|e| StoreError::git(format!("decoding author of {id}"), e))?;
        let committer = decoded
            .committer()
            .map_err(|e| StoreError::git(format!("decoding committer of {id}"), e))?;
        // A time that does not parse (a hand-made commit) keeps at least
        // its seconds, in UTC.
        let author_at = author
            .time()
            .unwrap_or_else(|_| gix::date::Time::new(author.seconds(), 0));
        Ok(CommitInfo {
            id,
            tree: decoded.tree().into(),
            parents: decoded.parents().map(Into::into).collect(),
            message: decoded.message.to_string(),
            time: committer.seconds(),
            author_time: author_at.seconds,
            author_offset: author_at.offset,
            author_name: author.name.to_string(),
            author_email: author.email.to_string(),
            committer_name: committer.name.to_string(),
            committer_email: committer.email.to_string(),
            signed: decoded
                .extra_headers
                .iter()
                .any(|(k, _)| *k == "gpgsig" || *k == "gpgsig-sha256"),
        })
    }

    /// Reads the blob at `path` in the tree of `commit`, if present.
    pub fn file_at(&self, commit: Oid, path: &str) -> Result<Option<Vec<u8>>> {
        let tree = self.commit_info(commit)?.tree;
        let tree = self
            .healing(tree, || self.repo.find_tree(tree))
            .map_err(|e| StoreError::git(format!("reading tree of {commit}"), e))?;
        let entry = tree
            .lookup_entry_by_path(path)
            .map_err(|e| StoreError::git(format!("looking up {path} in {commit}"), e))?;
        match entry {
            Some(entry) if entry.mode().is_blob() => {
                Ok(Some(self.read_blob(entry.object_id().into())?))
            }
            _ => Ok(None),
        }
    }

    /// Every file path (blobs, executables, symlinks, submodules) in the
    /// tree of `commit`, sorted as git sorts them.
    pub fn tree_paths(&self, commit: Oid) -> Result<Vec<String>> {
        let tree = self.commit_info(commit)?.tree;
        self.paths_in_tree(tree)
    }

    /// Every non-tree path under the tree `tree`.
    pub fn paths_in_tree(&self, tree: Oid) -> Result<Vec<String>> {
        let mut out: Vec<String> = self
            .tree_blobs(tree, None)?
            .into_iter()
            .map(|(path, _)| path)
            .collect();
        out.sort();
        Ok(out)
    }

    /// The entries of one tree: (name, id, whether it is a tree), in git's
    /// order.
    pub(crate) fn tree_entries(&self, tree: Oid) -> Result<Vec<(String, Oid, bool)>> {
        let found = self
            .healing(tree, || self.repo.find_tree(tree))
            .map_err(|e| StoreError::git(format!("reading tree {tree}"), e))?;
        let decoded = found
            .decode()
            .map_err(|e| StoreError::git(format!("decoding tree {tree}"), e))?;
        Ok(decoded
            .entries
            .iter()
            .map(|e| (e.filename.to_string(), e.oid.into(), e.mode.is_tree()))
            .collect())
    }

    /// Every non-tree entry under `tree` with its id. With `seen`,
    /// subtrees listed there are skipped and every subtree walked is added
    /// to it, so walking several trees that share subtrees at the same
    /// paths (the copies of one log) reads each subtree once.
    pub fn tree_blobs(
        &self,
        tree: Oid,
        mut seen: Option<&mut std::collections::HashSet<Oid>>,
    ) -> Result<Vec<(String, Oid)>> {
        let mut out = Vec::new();
        let mut stack = vec![(tree, String::new())];
        while let Some((id, prefix)) = stack.pop() {
            if let Some(seen) = seen.as_deref_mut()
                && !seen.insert(id)
            {
                continue;
            }
            for (name, oid, is_tree) in self.tree_entries(id)? {
                let path = join_path(&prefix, &name);
                if is_tree {
                    stack.push((oid, path));
                } else {
                    out.push((path, oid));
                }
            }
        }
        Ok(out)
    }

    /// The non-tree entries that differ between `old` (`None`: nothing)
    /// and `new`, found by comparing ids, so identical subtrees are never
    /// read: the cost follows the size of the change, not of the trees.
    pub fn tree_changes(&self, old: Option<Oid>, new: Oid) -> Result<Vec<TreeChange>> {
        let mut out = Vec::new();
        let mut stack = vec![(old, Some(new), String::new())];
        while let Some((a, b, prefix)) = stack.pop() {
            if a == b {
                continue;
            }
            let list =
                |id: Option<Oid>| -> Result<std::collections::BTreeMap<String, (Oid, bool)>> {
                    Ok(match id {
                        Some(id) => self
                            .tree_entries(id)?
                            .into_iter()
                            .map(|(n, o, t)| (n, (o, t)))
                            .collect(),
                        None => Default::default(),
                    })
                };
            let (left, right) = (list(a)?, list(b)?);
            let names: std::collections::BTreeSet<&String> =
                left.keys().chain(right.keys()).collect();
            for name in names {
                let path = join_path(&prefix, name);
                let (l, r) = (left.get(name), right.get(name));
                if l.map(|x| x.0) == r.map(|x| x.0) && l.map(|x| x.1) == r.map(|x| x.1) {
                    continue;
                }
                let sub = |x: Option<&(Oid, bool)>| x.filter(|(_, t)| *t).map(|(o, _)| *o);
                let blob = |x: Option<&(Oid, bool)>| x.filter(|(_, t)| !*t).map(|(o, _)| *o);
                if sub(l).is_some() || sub(r).is_some() {
                    stack.push((sub(l), sub(r), path.clone()));
                }
                if blob(l).is_some() || blob(r).is_some() {
                    out.push(TreeChange {
                        path,
                        old: blob(l),
                        new: blob(r),
                    });
                }
            }
        }
        out.sort_by(|x, y| x.path.cmp(&y.path));
        Ok(out)
    }

    /// Lines added plus lines removed from `old` to `new` (a binary file
    /// counts 1): the size of a change, to prefer the smaller of two that
    /// do the same job.
    pub fn changed_lines(&self, old: Oid, new: Oid) -> Result<u64> {
        let out = self.retrying(|| {
            Ok(self.git().run([
                "diff",
                "--no-renames",
                "--numstat",
                &old.to_string(),
                &new.to_string(),
            ])?)
        })?;
        Ok(out
            .lines()
            .map(|l| {
                let mut parts = l.split('\t');
                let added = parts.next().and_then(|n| n.parse::<u64>().ok());
                let removed = parts.next().and_then(|n| n.parse::<u64>().ok());
                match (added, removed) {
                    (Some(a), Some(r)) => a + r,
                    _ => 1,
                }
            })
            .sum())
    }

    /// The paths that differ between two trees, without rename detection (a
    /// rename is a deletion plus an addition, so both sides are listed).
    pub fn diff_trees(&self, old: Oid, new: Oid) -> Result<Vec<PathChange>> {
        self.retrying(|| self.diff_trees_once(old, new))
    }

    fn diff_trees_once(&self, old: Oid, new: Oid) -> Result<Vec<PathChange>> {
        use gix::object::tree::diff::ChangeDetached as C;
        let load = |id: Oid| {
            self.healing(id, || self.repo.find_tree(id))
                .map_err(|e| StoreError::git(format!("reading tree {id}"), e))
        };
        let (a, b) = (load(old)?, load(new)?);
        let changes = self
            .repo
            .diff_tree_to_tree(&a, &b, gix::diff::Options::default())
            .map_err(|e| StoreError::git(format!("diffing {old}..{new}"), e))?;
        let mut out = Vec::new();
        for c in changes {
            let (path, old, new, modes) = match c {
                C::Addition {
                    location,
                    entry_mode,
                    id,
                    ..
                } => (location, None, Some(id), vec![entry_mode]),
                C::Deletion {
                    location,
                    entry_mode,
                    id,
                    ..
                } => (location, Some(id), None, vec![entry_mode]),
                C::Modification {
                    location,
                    previous_entry_mode,
                    previous_id,
                    entry_mode,
                    id,
                } => (
                    location,
                    Some(previous_id),
                    Some(id),
                    vec![previous_entry_mode, entry_mode],
                ),
                C::Rewrite { location, .. } => {
                    return Err(StoreError::Corrupt(format!(
                        "unexpected rename at {location} with rename detection off"
                    )));
                }
            };
            if modes.iter().all(|m| m.is_tree()) {
                continue;
            }
            out.push(PathChange {
                path: path.to_string(),
                old: old.filter(|_| !modes[0].is_tree()).map(Oid::from),
                new: new
                    .filter(|_| !modes.last().is_some_and(|m| m.is_tree()))
                    .map(Oid::from),
                symlink: modes.iter().any(|m| m.is_link()),
                submodule: modes.iter().any(|m| m.is_commit()),
            });
        }
        out.sort_by(|x, y| x.path.cmp(&y.path));
        Ok(out)
    }

    /// Resolves a revision (`main`, `HEAD~2`, a hex id) to a commit id.
    pub fn resolve_commit(&self, spec: &str) -> Result<Option<Oid>> {
        let Ok(id) = self.repo.rev_parse_single(spec) else {
            return Ok(None);
        };
        let Ok(object) = id.object() else {
            return Ok(None);
        };
        match object.peel_to_commit() {
            Ok(c) => Ok(Some(c.id.into())),
            Err(_) => Ok(None),
        }
    }

    /// Whether the object exists in the object database.
    pub fn has_object(&self, id: Oid) -> bool {
        self.repo.has_object(id)
    }

    /// Parses a full hex object id.
    pub fn parse_oid(&self, hex: &str) -> Result<Oid> {
        Oid::from_hex(hex.as_bytes())
            .map_err(|e| StoreError::Corrupt(format!("{hex:?} is not an object id: {e}")))
    }
}

/// Edits a tree in memory and writes the changed subtrees.
///
/// This is gix's plumbing editor: unlike `gix::object::tree::Editor` it does
/// not look up every entry of every rewritten tree to check it exists. The
/// paths come from git-orch itself (event indexes, plan files) and every
/// blob was just written, so that check would only cost one `stat` per
/// entry; in a log leaf with 256 events it dominated the append.
pub(crate) struct TreeEditor<'s> {
    inner: gix::objs::tree::Editor<'s>,
    store: &'s Store,
}

impl TreeEditor<'_> {
    /// Adds or replaces the blob at `path`.
    pub fn upsert_blob(&mut self, path: &str, id: Oid) -> Result<()> {
        self.inner
            .upsert(
                path.split('/'),
                gix::objs::tree::EntryKind::Blob,
                gix::ObjectId::from(id),
            )
            .map_err(|e| {
                StoreError::git(
                    format!("adding {path} to a tree"),
                    gix::Error::from_error(e),
                )
            })?;
        Ok(())
    }

    /// Whether there is an entry at `path`.
    pub fn contains(&self, path: &str) -> bool {
        self.inner.get(path.split('/')).is_some()
    }

    /// Writes every changed tree and returns the root's id.
    pub fn write(&mut self) -> Result<Oid> {
        let store = self.store;
        self.inner
            .write(|tree| {
                let mut bytes = Vec::new();
                gix::objs::WriteTo::write_to(tree, &mut bytes)
                    .expect("writing a tree to a Vec cannot fail");
                let id = store.write_new(gix::objs::Kind::Tree, &bytes)?;
                store.remember_tree(id, bytes);
                Ok::<_, gix::Error>(gix::ObjectId::from(id))
            })
            .map(Oid::from)
            .map_err(|e| StoreError::git("writing a tree", e))
    }
}

/// How many recently written trees [`Store`] keeps in memory.
const RECENT_TREES: usize = 256;

impl Store {
    /// Keeps the bytes of a tree just written, so the next edit of the same
    /// tree (the next append to the log) needs no read from disk.
    fn remember_tree(&self, id: Oid, bytes: Vec<u8>) {
        let mut recent = self
            .recent_trees
            .lock()
            .expect("cache lock is never poisoned");
        if recent.len() >= RECENT_TREES {
            recent.clear();
        }
        recent.insert(id, bytes);
    }
}

/// Tree lookups for [`TreeEditor`]: recently written trees from memory,
/// everything else from the object database.
impl gix::objs::Find for Store {
    fn try_find<'a>(
        &self,
        id: &gix::hash::oid,
        buffer: &'a mut Vec<u8>,
    ) -> gix::Result<Option<gix::objs::Data<'a>>> {
        {
            let recent = self
                .recent_trees
                .lock()
                .expect("cache lock is never poisoned");
            if let Some(bytes) = recent.get(&Oid::from(id)) {
                buffer.clear();
                buffer.extend_from_slice(bytes);
                return Ok(Some(gix::objs::Data {
                    kind: gix::objs::Kind::Tree,
                    object_hash: self.repo.object_hash(),
                    data: buffer,
                }));
            }
        }
        // A tree this process wrote and a prune took is written again; one
        // a repack is moving is looked up again.
        self.find_retrying(id, buffer)
    }
}
