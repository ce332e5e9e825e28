//! Damage that a crash or a prune left in git-orch's refs: found without
//! trusting it, and repaired without losing what can be kept.
//!
//! A machine that lost power with writes in flight can leave a ref file of
//! zero length, or a ref naming a loose object of zero length (a file
//! system that commits names before data, which git-orch now orders; see
//! [`super::durable`]); a `git prune` beside an older git-orch could delete
//! the objects a ref had just moved to. [`Store::damaged_refs`] finds such
//! refs (fsck reports them, and checks the rest with them hidden);
//! [`Store::repair_refs`] restores each to the newest intact value it can
//! find (its reflog, a remote's tracking copy, its own intact ancestors),
//! moves unreadable object files aside to `.git/orch/lost/`, drops the
//! reflog entries that name objects no longer there (`git fsck` fails on
//! them), and says what it restored and what was lost.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use super::error::{Result, StoreError};
use super::log::LOG_PREFIX;
use super::oid::Oid;
use super::refs::{Applied, Expected, ORCH_PREFIX, REMOTES_PREFIX, RefUpdate};
use super::repository::Store;

/// Where repairs put what they move out of git's way.
const LOST: &str = "lost";

/// The refs whose objects are checked: git-orch's own, its tracking
/// copies, its notes and its attempt branches.
const CHECKED: [&str; 4] = [
    ORCH_PREFIX,
    REMOTES_PREFIX,
    "refs/notes/orch",
    "refs/heads/orch/",
];

/// A loose ref file that holds no object id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokenRef {
    pub reference: String,
    pub path: PathBuf,
    pub problem: String,
}

impl BrokenRef {
    /// The error every command stops with when it meets this ref.
    pub fn into_error(self) -> StoreError {
        StoreError::Damaged {
            reference: self.reference,
            problem: self.problem,
        }
    }
}

/// One damaged ref, as fsck reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    pub reference: String,
    /// The value it holds, when its file holds one.
    pub value: Option<Oid>,
    /// Its loose file, when that is what is damaged.
    pub path: Option<PathBuf>,
    pub problem: String,
}

/// Whether `text` is what git writes in a loose ref file.
fn parses_as_ref(text: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(text) else {
        return false;
    };
    let line = text.strip_suffix('\n').unwrap_or(text);
    line.starts_with("ref: refs/")
        || ((line.len() == 40 || line.len() == 64) && line.bytes().all(|b| b.is_ascii_hexdigit()))
}

impl Store {
    /// The loose ref files at or under `name` (a full ref name, or a
    /// prefix ending in `/`) that hold no object id.
    pub fn broken_ref_files(&self, name: &str) -> Vec<BrokenRef> {
        let root = self.common_dir().join(name.trim_end_matches('/'));
        let mut out = Vec::new();
        let mut stack = vec![root];
        while let Some(path) = stack.pop() {
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.is_dir() {
                if let Ok(entries) = std::fs::read_dir(&path) {
                    stack.extend(entries.flatten().map(|e| e.path()));
                }
                continue;
            }
            if !meta.is_file() || path.extension().is_some_and(|e| e == "lock") {
                continue;
            }
            let Ok(text) = std::fs::read(&path) else {
                continue;
            };
            if parses_as_ref(&text) {
                continue;
            }
            let Ok(relative) = path.strip_prefix(self.common_dir()) else {
                continue;
            };
            let reference = relative.to_string_lossy().replace('\\', "/");
            let problem = if text.is_empty() {
                format!(
                    "its file {} is empty (a crash lost what was written to it)",
                    path.display()
                )
            } else {
                format!("its file {} holds no object id", path.display())
            };
            out.push(BrokenRef {
                reference,
                path,
                problem,
            });
        }
        out.sort_by(|a, b| a.reference.cmp(&b.reference));
        out
    }

    /// Refs under `prefix` with the value their file holds (not peeled,
    /// nothing read), skipping files that hold none.
    fn raw_refs(&self, prefix: &str) -> Result<Vec<(String, Oid)>> {
        let platform = self
            .repo
            .references()
            .map_err(|e| StoreError::git("listing refs", e))?;
        let iter = platform
            .prefixed(prefix)
            .map_err(|e| StoreError::git(format!("listing {prefix}*"), e))?;
        Ok(iter
            .flatten()
            .filter_map(|r| {
                let id = r.target().try_id()?.to_owned();
                Some((r.name().as_bstr().to_string(), Oid::from(id)))
            })
            .collect())
    }

    /// Why the commit `id` and what it holds cannot be read: every tree,
    /// and with `blobs` every blob's header. Unreadable object files (as
    /// opposed to missing ones) are added to `bad`.
    fn unreadable(&self, id: Oid, blobs: bool, bad: &mut BTreeSet<Oid>) -> Option<String> {
        let mut note = |oid: Oid, what: &str, e: StoreError| {
            let file = super::objects::loose_path(&self.common_dir().join("objects"), oid.as_gix());
            let there = file.is_file();
            if there {
                bad.insert(oid);
            }
            let how = if !there {
                "is missing"
            } else if std::fs::metadata(&file).is_ok_and(|m| m.len() == 0) {
                "is an empty file"
            } else {
                "cannot be read"
            };
            Some(format!("its {what} {oid} {how} ({e})"))
        };
        let info = match self.commit_info(id) {
            Ok(info) => info,
            Err(e) => return note(id, "commit", e),
        };
        let mut seen = HashSet::new();
        let mut stack = vec![info.tree];
        while let Some(tree) = stack.pop() {
            if !seen.insert(tree) {
                continue;
            }
            let entries: Vec<(Oid, gix::objs::tree::EntryMode)> = match self
                .repo
                .find_tree(tree)
                .map_err(|e| StoreError::git(format!("reading tree {tree}"), e))
                .and_then(|t| {
                    t.decode()
                        .map(|d| {
                            d.entries
                                .iter()
                                .map(|e| (Oid::from(e.oid), e.mode))
                                .collect()
                        })
                        .map_err(|e| StoreError::git(format!("decoding tree {tree}"), e))
                }) {
                Ok(entries) => entries,
                Err(e) => return note(tree, "tree", e),
            };
            for (oid, mode) in entries {
                if mode.is_tree() {
                    stack.push(oid);
                } else if blobs
                    // A submodule's commit is not in this repository.
                    && !mode.is_commit()
                    && let Err(e) = self.object_size(oid)
                {
                    return note(oid, "blob", e);
                }
            }
        }
        None
    }

    /// Every damaged git-orch ref: a loose file that holds no object id, or
    /// a value whose commit or trees are missing or unreadable; with
    /// `blobs`, also a log whose event blobs are (without, those show as
    /// unreadable records when the log is read).
    pub fn damaged_refs(&self, blobs: bool) -> Result<Vec<Damage>> {
        let mut out: Vec<Damage> = self
            .broken_ref_files("refs/")
            .into_iter()
            .map(|b| Damage {
                reference: b.reference,
                value: None,
                path: Some(b.path),
                problem: b.problem,
            })
            .collect();
        let mut bad = BTreeSet::new();
        for prefix in CHECKED {
            for (name, id) in self.raw_refs(prefix)? {
                let is_log = name.starts_with(LOG_PREFIX)
                    || (name.starts_with(REMOTES_PREFIX) && name.contains("/log/"));
                if let Some(problem) = self.unreadable(id, blobs && is_log, &mut bad) {
                    out.push(Damage {
                        reference: name,
                        value: Some(id),
                        path: None,
                        problem: format!("it points at {id}, and {problem}"),
                    });
                }
            }
        }
        out.sort_by(|a, b| a.reference.cmp(&b.reference));
        out.dedup_by(|a, b| a.reference == b.reference);
        Ok(out)
    }

    /// The values a damaged ref held before, newest first, from its reflog.
    fn reflog_values(&self, name: &str) -> Vec<Oid> {
        let path = self.common_dir().join("logs").join(name);
        let Ok(text) = std::fs::read_to_string(path) else {
            return Vec::new();
        };
        let mut out: Vec<Oid> = text
            .lines()
            .filter_map(|l| {
                let mut parts = l.split(' ');
                let _old = parts.next()?;
                Oid::from_hex(parts.next()?.as_bytes()).ok()
            })
            .filter(|id| !id.is_null())
            .collect();
        out.reverse();
        let mut seen = HashSet::new();
        out.retain(|id| seen.insert(*id));
        out
    }

    /// Restores every damaged ref (see the module docs). Returns what it
    /// did, one line each; a ref it cannot restore is said so and left.
    pub fn repair_refs(&self) -> Result<Vec<String>> {
        let damage = self.damaged_refs(true)?;
        let mut done = Vec::new();
        let mut bad: BTreeSet<Oid> = BTreeSet::new();
        let lost_dir = self.orch_dir().join(LOST);
        let stamp = crate::clock::now_ms();
        for d in &damage {
            // A file that holds no id is useless to git and to us: moved
            // aside, the ref reads as whatever packed-refs holds, if any.
            if let Some(path) = &d.path {
                let aside = lost_dir.join(format!("{}.{stamp}", d.reference));
                move_aside(path, &aside)?;
                done.push(format!(
                    "moved the damaged file of {} aside to {}",
                    d.reference,
                    aside.display()
                ));
            }
            let current = match &d.path {
                Some(_) => self
                    .raw_refs(&d.reference)?
                    .into_iter()
                    .find(|(n, _)| *n == d.reference)
                    .map(|(_, id)| id),
                None => d.value,
            };
            let is_log = d.reference.starts_with(LOG_PREFIX)
                || (d.reference.starts_with(REMOTES_PREFIX) && d.reference.contains("/log/"));
            // Candidates: the reflog (newest first), what the ref holds
            // now, remotes' tracking copies, its own first-parent history.
            let mut candidates: Vec<(Oid, String)> = self
                .reflog_values(&d.reference)
                .into_iter()
                .map(|id| (id, "its reflog".to_owned()))
                .collect();
            if let Some(c) = current {
                candidates.push((c, "packed-refs".to_owned()));
            }
            if let Some(rest) = d.reference.strip_prefix(ORCH_PREFIX) {
                for (name, id) in self.raw_refs(REMOTES_PREFIX)? {
                    let tail = &name[REMOTES_PREFIX.len()..];
                    if tail.split_once('/').is_some_and(|(_, r)| r == rest) {
                        candidates.push((id, format!("the tracking copy {name}")));
                    }
                }
            }
            if let Some(start) = d.value {
                let mut at = start;
                for _ in 0..1000 {
                    let Ok(info) = self.commit_info(at) else {
                        break;
                    };
                    let Some(parent) = info.parents.first().copied() else {
                        break;
                    };
                    candidates.push((parent, "its history".to_owned()));
                    at = parent;
                }
            }
            let mut intact: Vec<(Oid, String)> = Vec::new();
            let mut tried = HashSet::new();
            for (id, source) in candidates {
                if Some(id) == d.value || !tried.insert(id) {
                    continue;
                }
                if self.unreadable(id, true, &mut bad).is_none() {
                    intact.push((id, source));
                    if !is_log {
                        break;
                    }
                }
            }
            if let Some(v) = d.value {
                self.unreadable(v, true, &mut bad);
            }
            // Of a log's intact values, the one with the most events.
            let best = if is_log {
                intact
                    .into_iter()
                    .max_by_key(|(id, _)| self.tip_position(*id).map(|p| p.seq).unwrap_or(0))
            } else {
                intact.into_iter().next()
            };
            let Some((to, source)) = best else {
                done.push(format!(
                    "could not restore {}: neither its reflog, a remote's copy nor its history holds an intact value; restore it from another clone or a backup, or drop it with `git update-ref -d {}`",
                    d.reference, d.reference
                ));
                continue;
            };
            let expected = Expected::from_read(current);
            let update = RefUpdate::set(
                &d.reference,
                to,
                expected,
                "orch: fsck --repair restored a damaged ref",
            );
            let _guard = self.lock(super::lock::LOG_LOCK, "repairing refs")?;
            if self.apply(std::slice::from_ref(&update))? != Applied::Done {
                done.push(format!(
                    "{} moved while it was being repaired; run `git orch fsck --repair` again",
                    d.reference
                ));
                continue;
            }
            let short = &to.to_string()[..12];
            if is_log {
                let seq = self.tip_position(to).map(|p| p.seq).unwrap_or(0);
                let was = d
                    .value
                    .and_then(|v| self.tip_position(v).ok())
                    .map(|p| format!(", up to seq {}", p.seq))
                    .unwrap_or_default();
                done.push(format!(
                    "restored {} to {short} (seq {seq}) from {source}; lost: whatever it held after seq {seq}{was} that no other clone has",
                    d.reference
                ));
            } else {
                let lost = match d.value {
                    Some(v) => format!("lost: its damaged value {}", &v.to_string()[..12]),
                    None => "lost: nothing, unless the crash also cut its reflog".to_owned(),
                };
                done.push(format!(
                    "restored {} to {short} from {source}; {lost}",
                    d.reference
                ));
            }
        }
        // Unreadable loose files make `git fsck` fail even where nothing
        // reaches them; empty ones are certainly unreadable.
        bad.extend(self.empty_loose_objects());
        let objects = self.common_dir().join("objects");
        let mut moved = BTreeSet::new();
        for id in &bad {
            let file = super::objects::loose_path(&objects, id.as_gix());
            if file.is_file() {
                let hex = id.to_string();
                move_aside(
                    &file,
                    &lost_dir.join("objects").join(&hex[..2]).join(&hex[2..]),
                )?;
                moved.insert(*id);
            }
        }
        if !moved.is_empty() {
            done.push(format!(
                "moved {} unreadable object file(s) aside to {}",
                moved.len(),
                lost_dir.join("objects").display()
            ));
        }
        let damaged: BTreeSet<&str> = damage.iter().map(|d| d.reference.as_str()).collect();
        for line in self.drop_dead_reflog_entries(&damaged, &moved, &lost_dir, stamp)? {
            done.push(line);
        }
        Ok(done)
    }

    /// Loose object files of zero length.
    fn empty_loose_objects(&self) -> Vec<Oid> {
        let objects = self.common_dir().join("objects");
        let mut out = Vec::new();
        for i in 0..=255u8 {
            let hex = format!("{i:02x}");
            let Ok(entries) = std::fs::read_dir(objects.join(&hex)) else {
                continue;
            };
            for e in entries.flatten() {
                if e.metadata().is_ok_and(|m| m.is_file() && m.len() == 0)
                    && let Some(rest) = e.file_name().to_str()
                    && let Ok(id) = Oid::from_hex(format!("{hex}{rest}").as_bytes())
                {
                    out.push(id);
                }
            }
        }
        out
    }

    /// Rewrites the reflogs of the damaged refs without the entries that
    /// name objects no longer there, and every reflog without entries
    /// that name `moved` objects. The old files go to `lost`.
    fn drop_dead_reflog_entries(
        &self,
        damaged: &BTreeSet<&str>,
        moved: &BTreeSet<Oid>,
        lost: &Path,
        stamp: i64,
    ) -> Result<Vec<String>> {
        let logs = self.common_dir().join("logs");
        let mut files: BTreeMap<String, PathBuf> = BTreeMap::new();
        for name in damaged {
            files.insert((*name).to_owned(), logs.join(name));
        }
        if !moved.is_empty() {
            let mut stack = vec![logs.join("refs")];
            while let Some(p) = stack.pop() {
                if p.is_dir() {
                    if let Ok(entries) = std::fs::read_dir(&p) {
                        stack.extend(entries.flatten().map(|e| e.path()));
                    }
                } else if let Ok(rel) = p.strip_prefix(&logs) {
                    files.insert(rel.to_string_lossy().replace('\\', "/"), p.clone());
                }
            }
            files.insert("HEAD".into(), logs.join("HEAD"));
        }
        let mut out = Vec::new();
        for (name, path) in files {
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let check_all = damaged.contains(name.as_str());
            let mut exists: std::collections::HashMap<Oid, bool> = Default::default();
            let mut live = |id: Oid| -> bool {
                if id.is_null() {
                    return true;
                }
                if moved.contains(&id) {
                    return false;
                }
                if !check_all {
                    return true;
                }
                *exists.entry(id).or_insert_with(|| self.has_object(id))
            };
            let mut kept = String::with_capacity(text.len());
            let mut dropped = 0;
            for line in text.lines() {
                let mut parts = line.split(' ');
                let ids = (
                    parts.next().and_then(|h| Oid::from_hex(h.as_bytes()).ok()),
                    parts.next().and_then(|h| Oid::from_hex(h.as_bytes()).ok()),
                );
                match ids {
                    (Some(old), Some(new)) if live(old) && live(new) => {
                        kept.push_str(line);
                        kept.push('\n');
                    }
                    _ => dropped += 1,
                }
            }
            if dropped == 0 {
                continue;
            }
            move_aside(&path, &lost.join("logs").join(format!("{name}.{stamp}")))?;
            std::fs::write(&path, kept)
                .map_err(|e| StoreError::io(format!("writing {}", path.display()), e))?;
            out.push(format!(
                "dropped {dropped} reflog entr{} of {name} naming objects that are gone (the old reflog is under {})",
                if dropped == 1 { "y" } else { "ies" },
                lost.join("logs").display()
            ));
        }
        Ok(out)
    }
}

/// Moves `from` to `to` (creating its folder), keeping it for a person to
/// look at; nothing a repair finds damaged is deleted.
fn move_aside(from: &Path, to: &Path) -> Result<()> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| StoreError::io(format!("creating {}", parent.display()), e))?;
    }
    std::fs::rename(from, to).map_err(|e| {
        StoreError::io(
            format!("moving {} aside to {}", from.display(), to.display()),
            e,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ref_files_parse_as_git_writes_them() {
        assert!(parses_as_ref(b"0123456789abcdef0123456789abcdef01234567\n"));
        assert!(parses_as_ref(b"ref: refs/heads/main\n"));
        assert!(!parses_as_ref(b""));
        assert!(!parses_as_ref(b"0123"));
        assert!(!parses_as_ref(b"\0\0\0\0"));
    }
}
