//! Read-only views of a repository as it will be once a push is accepted.
//!
//! A server's `pre-receive` hook must judge refs that do not exist yet,
//! pointing at objects that are not in the object database yet: git keeps
//! the pushed objects in a quarantine folder (`GIT_OBJECT_DIRECTORY`, with
//! the real database as `GIT_ALTERNATE_OBJECT_DIRECTORIES`) until the hook
//! says yes. gix does not read those variables, so
//! [`Store::with_object_dirs`] opens the object database through a
//! throw-away `info/alternates` naming the quarantine and the real database
//! (outside the repository, removed when the store is dropped; the
//! quarantine itself is never written to, since git moves everything in it
//! into the repository on success).
//!
//! [`Store::with_proposed_refs`] layers the pushed ref values over the real
//! ones for every read through [`Store::ref_target`] and
//! [`Store::refs_with_prefix`] (and so the event log, plans and approvals):
//! a landing pushed together with the log that records it verifies against
//! that log. A view refuses every ref update.

use std::path::{Path, PathBuf};

use super::error::{Result, StoreError};
use super::oid::Oid;
use super::repository::Store;

/// Where git keeps the objects of a push in progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectDirs {
    /// `GIT_OBJECT_DIRECTORY`: the quarantine folder of the push.
    pub primary: PathBuf,
    /// `GIT_ALTERNATE_OBJECT_DIRECTORIES`: the real object database (and
    /// any other alternates).
    pub alternates: Vec<PathBuf>,
}

impl ObjectDirs {
    /// Reads git's variables as a hook receives them; `None` when git put
    /// the push in no quarantine (its objects are then already in the
    /// repository's database).
    pub fn from_vars(object_dir: Option<&str>, alternates: Option<&str>) -> Option<Self> {
        let primary = object_dir.filter(|d| !d.is_empty())?;
        Some(Self {
            primary: PathBuf::from(primary),
            alternates: alternates
                .map(split_alternates)
                .unwrap_or_default()
                .into_iter()
                .map(PathBuf::from)
                .collect(),
        })
    }
}

/// Splits `GIT_ALTERNATE_OBJECT_DIRECTORIES` as git does: `:`-separated,
/// an entry may be double-quoted (C-style escapes) to contain a `:`.
fn split_alternates(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = value.chars().peekable();
    while chars.peek().is_some() {
        let mut entry = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '"' => break,
                    '\\' => match chars.next() {
                        Some('n') => entry.push('\n'),
                        Some('t') => entry.push('\t'),
                        Some(other) => entry.push(other),
                        None => {}
                    },
                    c => entry.push(c),
                }
            }
            // Skip to the next separator.
            for c in chars.by_ref() {
                if c == ':' {
                    break;
                }
            }
        } else {
            for c in chars.by_ref() {
                if c == ':' {
                    break;
                }
                entry.push(c);
            }
        }
        if !entry.is_empty() {
            out.push(entry);
        }
    }
    out
}

/// The kind of a git object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectKind {
    Commit,
    Tree,
    Blob,
    Tag,
}

impl ObjectKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectKind::Commit => "commit",
            ObjectKind::Tree => "tree",
            ObjectKind::Blob => "blob",
            ObjectKind::Tag => "tag",
        }
    }
}

impl Store {
    /// Reads objects from `dirs` (a push's quarantine) and the repository's
    /// own database. The returned store is a read-only view.
    pub fn with_object_dirs(mut self, dirs: &ObjectDirs) -> Result<Self> {
        let io = |e| StoreError::io("preparing a view of the pushed objects", e);
        let view = tempfile::Builder::new()
            .prefix("git-orch-objects-")
            .tempdir()
            .map_err(io)?;
        let objects = view.path().join("objects");
        std::fs::create_dir_all(objects.join("info")).map_err(io)?;
        let own = self.common_dir.join("objects");
        let mut list = String::new();
        for dir in std::iter::once(&dirs.primary)
            .chain(&dirs.alternates)
            .chain(std::iter::once(&own))
        {
            list.push_str(&alternates_line(dir)?);
            list.push('\n');
        }
        std::fs::write(objects.join("info").join("alternates"), list).map_err(io)?;
        let odb = gix::odb::Store::at_opts(
            objects,
            self.repo.object_hash(),
            &mut std::iter::empty(),
            Default::default(),
        )
        .map_err(|e| StoreError::io("opening the pushed objects", e))?;
        let mut sync = self.repo.clone().into_sync();
        sync.objects = std::sync::Arc::new(odb);
        let mut repo = sync.to_thread_local();
        repo.object_cache_size_if_unset(1024 * 1024);
        self.repo = repo;
        self.object_view = Some(std::sync::Arc::new(view));
        Ok(self)
    }

    /// Reads `refs` (full name → new value, `None` for a deletion) in place
    /// of the real refs. The returned store is a read-only view.
    pub fn with_proposed_refs(
        mut self,
        refs: impl IntoIterator<Item = (String, Option<Oid>)>,
    ) -> Self {
        self.overlay.extend(refs);
        self
    }

    /// Whether this store is a read-only view of a push in progress.
    pub fn is_view(&self) -> bool {
        !self.overlay.is_empty() || self.object_view.is_some()
    }

    /// The kind and size in bytes of an object, without reading its data;
    /// `None` if the object does not exist.
    pub fn object_header(&self, id: Oid) -> Result<Option<(ObjectKind, u64)>> {
        let header = self
            .repo
            .try_find_header(id)
            .map_err(|e| StoreError::git(format!("reading the header of {id}"), e))?;
        Ok(header.map(|h| {
            let kind = match h.kind() {
                gix::objs::Kind::Commit => ObjectKind::Commit,
                gix::objs::Kind::Tree => ObjectKind::Tree,
                gix::objs::Kind::Blob => ObjectKind::Blob,
                gix::objs::Kind::Tag => ObjectKind::Tag,
            };
            (kind, h.size())
        }))
    }
}

/// One line of an `info/alternates` file naming `dir`, quoted when needed.
fn alternates_line(dir: &Path) -> Result<String> {
    let text = dir.to_str().ok_or_else(|| {
        StoreError::Corrupt(format!(
            "the object folder {} is not valid UTF-8",
            dir.display()
        ))
    })?;
    if text.contains(['"', '\\', '\n', '\t']) || text.starts_with('#') {
        let mut quoted = String::from("\"");
        for c in text.chars() {
            match c {
                '"' => quoted.push_str("\\\""),
                '\\' => quoted.push_str("\\\\"),
                '\n' => quoted.push_str("\\n"),
                '\t' => quoted.push_str("\\t"),
                c => quoted.push(c),
            }
        }
        quoted.push('"');
        return Ok(quoted);
    }
    Ok(text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alternates_split_like_git() {
        assert_eq!(split_alternates("/a/objects"), ["/a/objects"]);
        assert_eq!(split_alternates("/a:/b"), ["/a", "/b"]);
        assert_eq!(split_alternates("\"/x:y\":/b"), ["/x:y", "/b"]);
        assert!(split_alternates("").is_empty());
        assert_eq!(
            ObjectDirs::from_vars(Some("/q"), Some("/r/objects")),
            Some(ObjectDirs {
                primary: "/q".into(),
                alternates: vec!["/r/objects".into()],
            })
        );
        assert_eq!(ObjectDirs::from_vars(None, Some("/r")), None);
    }

    #[test]
    fn alternates_lines_quote_what_git_would_misread() {
        assert_eq!(
            alternates_line(Path::new("/a b/objects")).expect("utf-8"),
            "/a b/objects"
        );
        assert_eq!(
            alternates_line(Path::new("#x/\"q\"")).expect("utf-8"),
            "\"#x/\\\"q\\\"\""
        );
    }
}
