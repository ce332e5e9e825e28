//! Checkouts git-orch makes for agents and gates, and the import of what
//! an agent committed in one.
//!
//! A checkout is a folder holding the files of a commit and a `.git` folder
//! of its own, the *quarantine*: a small standalone repository with the
//! repository's object store as a read-only alternate, one branch, an
//! index, hooks and a config of its own. It is never a linked worktree of
//! the repository: an agent (or a gate command) there commits into the
//! quarantine only, and may rewrite every byte of it without reaching the
//! repository's objects, refs or configuration.
//!
//! Beside each checkout git-orch keeps an index of its own, outside the
//! folder (the *trusted index*): it records the files as git-orch checked
//! them out, so git run against the folder with that index and the
//! repository's own git directory ([`crate::process::HardenedGit`]) sees
//! exactly what changed, and never what the folder's `.git` says.
//!
//! The quarantine is read back only here, and only as data: `HEAD` and the
//! one branch parsed by hand from regular files, every loose object read
//! from a regular file, re-hashed, parsed, checked to be in git's
//! canonical form and to name no path git would refuse (`.git`, `..`), and
//! followed until everything it refers to is in the repository or
//! imported too. Anything else an agent might have left there to redirect
//! git (alternates, `commondir`, grafts, `info/` files, packs, symbolic
//! refs, other refs) is refused with a [`Refusal`] that names it.

use std::collections::{HashSet, VecDeque};
use std::path::{Path, PathBuf};

use super::error::{Result, StoreError};
use super::oid::Oid;
use super::repository::Store;
use crate::process::HardenedGit;

/// Where one checkout lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckoutPaths {
    /// The folder with the files and the quarantine `.git` (writable by
    /// whatever runs there).
    pub dir: PathBuf,
    /// git-orch's own index for it, outside `dir` and out of reach of what
    /// runs there.
    pub index: PathBuf,
}

impl CheckoutPaths {
    /// The quarantine git folder.
    pub fn quarantine(&self) -> PathBuf {
        self.dir.join(".git")
    }
}

/// Bounds on what one import may bring into the repository.
#[derive(Debug, Clone, Copy)]
pub struct ImportLimits {
    /// Most new objects.
    pub objects: usize,
    /// Most bytes of new objects, in all.
    pub bytes: u64,
    /// Most bytes of any one new object.
    pub object: u64,
}

impl Default for ImportLimits {
    fn default() -> Self {
        ImportLimits {
            objects: 200_000,
            bytes: 512 * 1024 * 1024,
            object: 100 * 1024 * 1024,
        }
    }
}

/// What an import brought in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Imported {
    /// The quarantine's branch tip, now in the repository (the start
    /// commit when the agent committed nothing).
    pub head: Oid,
    /// New commits.
    pub commits: usize,
    /// New objects of every kind.
    pub objects: usize,
}

/// Why what an agent left in its quarantine is not imported. Each says
/// what was found; none is ever followed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "its git folder .git is gone or is not a folder (a file or link there is not followed)"
    )]
    NoGitFolder,
    #[error("{0} in its git folder is a link or not a regular file")]
    NotRegular(String),
    #[error(
        "its git folder has {0}, which would point git at another repository or history; git-orch does not follow it"
    )]
    Redirect(String),
    #[error("objects/info/alternates was changed; it must name only the repository's object store")]
    Alternates,
    #[error(
        "its git folder holds a pack ({0}); commit with plain `git commit`, without `git gc` or `git repack`"
    )]
    Pack(String),
    #[error("HEAD {0}; commit on the branch the attempt was given")]
    Head(String),
    #[error("its git folder holds the ref {0}; commit only on the branch the attempt was given")]
    ExtraRef(String),
    #[error("{0} is a symbolic ref; commit only on the branch the attempt was given")]
    Symref(String),
    #[error("the branch {0} was deleted")]
    NoBranch(String),
    #[error("object {id}: {why}")]
    BadObject { id: String, why: String },
    #[error("object {0} is missing: what the agent committed is incomplete")]
    Missing(String),
    #[error("commit {commit} has the path {path:?}, which git refuses to check out")]
    BadPath { commit: String, path: String },
    #[error("its branch is at {0}, which does not descend from the commit the attempt started at")]
    NotDescendant(String),
    #[error("its new objects exceed {0}")]
    TooLarge(String),
    #[error(
        "{path} is {size} bytes, more than the {limit} bytes a file may have ([orch] maxFileSize)"
    )]
    FileTooLarge { path: String, size: u64, limit: u64 },
    #[error("it leaves {0}, more than git-orch takes from one attempt")]
    TooMuch(String),
    #[error(
        "{0} is a git repository of its own (a gitlink); git-orch lands files, not nested repositories (leave it out, or make its files part of the project)"
    )]
    Gitlink(String),
}

/// What went wrong importing: a refusal of what the agent left, or a
/// failure of git-orch's own.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("what the agent left in its git folder was refused: {0}")]
    Refused(#[from] Refusal),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The folder of a checkout's quarantine branch, `refs/heads/<branch>`.
fn branch_ref(branch: &str) -> String {
    format!("refs/heads/{branch}")
}

fn io(context: String) -> impl FnOnce(std::io::Error) -> StoreError {
    move |e| StoreError::io(context, e)
}

/// Removes whatever is at `path` (a folder, a file, a link), never
/// following a link.
fn remove_any(path: &Path) -> Result<()> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StoreError::io(format!("reading {}", path.display()), e)),
        Ok(m) if m.is_dir() => {
            std::fs::remove_dir_all(path).map_err(io(format!("removing {}", path.display())))
        }
        Ok(_) => std::fs::remove_file(path).map_err(io(format!("removing {}", path.display()))),
    }
}

impl Store {
    /// git against the checkout's folder with git-orch's own index and the
    /// repository's git directory: nothing of the folder's `.git` is read.
    pub fn hardened_git(&self, paths: &CheckoutPaths) -> HardenedGit {
        let mut git = HardenedGit::new(&self.common_dir)
            .work_tree(&paths.dir)
            .index(&paths.index);
        // The user's global excludes file (not read with the rest of the
        // global configuration): what they keep out of every commit stays
        // out of results too.
        // From the configuration read when the repository was opened: no
        // `git config` process per checkout.
        let excludes = self
            .repo
            .config_snapshot()
            .string("core.excludesFile")
            .map(|v| v.to_string());
        if let Some(file) = excludes {
            let file = match (file.strip_prefix("~/"), std::env::var_os("HOME")) {
                (Some(rest), Some(home)) => Path::new(&home).join(rest),
                _ => PathBuf::from(file),
            };
            git = git.config(format!("core.excludesFile={}", file.display()));
        }
        git
    }

    /// Makes a checkout of `commit` at `paths.dir` (absent or empty): its
    /// files, git-orch's index for it, and a quarantine whose `branch`
    /// (`refs/heads/<branch>` inside it) is at `commit`.
    pub fn make_checkout(&self, paths: &CheckoutPaths, commit: Oid, branch: &str) -> Result<()> {
        std::fs::create_dir_all(&paths.dir)
            .map_err(io(format!("creating {}", paths.dir.display())))?;
        if let Some(parent) = paths.index.parent() {
            std::fs::create_dir_all(parent)
                .map_err(io(format!("creating {}", parent.display())))?;
        }
        remove_any(&paths.index)?;
        let mut first = true;
        self.retrying(|| {
            if !std::mem::take(&mut first) {
                // What a failed try wrote: the folder was absent or empty.
                remove_any(&paths.dir)?;
                std::fs::create_dir_all(&paths.dir)
                    .map_err(io(format!("creating {}", paths.dir.display())))?;
                remove_any(&paths.index)?;
            }
            self.check_out_fresh(paths, commit)
        })?;
        self.write_quarantine(paths, commit, branch)
    }

    /// Writes the files of `commit` into the empty folder `paths.dir` and
    /// git-orch's index of them, in process (with the repository's own
    /// attributes and filters, as `git worktree add` would check out).
    fn check_out_fresh(&self, paths: &CheckoutPaths, commit: Oid) -> Result<()> {
        let context = || format!("checking out {commit} into {}", paths.dir.display());
        let tree = self.commit_info(commit)?.tree;
        let mut index = self
            .repo
            .index_from_tree(tree.as_gix())
            .map_err(|e| StoreError::git(context(), e))?;
        let mut options = self
            .repo
            .checkout_options(gix::worktree::stack::state::attributes::Source::IdMapping)
            .map_err(|e| StoreError::git(context(), e))?;
        options.destination_is_initially_empty = true;
        let objects = self
            .repo
            .objects
            .clone()
            .into_arc()
            .map_err(|e| StoreError::io(context(), e))?;
        let interrupt = std::sync::atomic::AtomicBool::new(false);
        let outcome = gix::worktree::state::checkout(
            &mut index,
            &paths.dir,
            objects,
            &gix::progress::Discard,
            &gix::progress::Discard,
            &interrupt,
            options,
        )
        .map_err(|e| StoreError::git(context(), e))?;
        if let Some(first) = outcome.errors.first() {
            return Err(StoreError::io(
                format!("{}: {}", context(), first.path),
                std::io::Error::other(first.error.to_string()),
            ));
        }
        index.set_path(&paths.index);
        index
            .write(Default::default())
            .map_err(|e| StoreError::git(format!("writing {}", paths.index.display()), e))
    }

    /// Puts an existing checkout at `commit`, in place: files that differ
    /// from git-orch's index (whatever changed them) are written again,
    /// every file and folder the commit does not hold goes (ignored ones
    /// and nested repositories included), and the quarantine is made anew.
    /// A checkout without git-orch's index is made from scratch.
    pub fn reset_checkout(&self, paths: &CheckoutPaths, commit: Oid, branch: &str) -> Result<()> {
        if !paths.index.is_file() || !paths.dir.is_dir() {
            remove_any(&paths.dir)?;
            return self.make_checkout(paths, commit, branch);
        }
        remove_any(&paths.quarantine())?;
        let git = self.hardened_git(paths);
        self.retrying(|| Ok(git.run(["read-tree", "--reset", "-u", &commit.to_string()])?))?;
        git.run(["clean", "-q", "-f", "-f", "-d", "-x"])?;
        self.write_quarantine(paths, commit, branch)
    }

    /// Writes the quarantine `.git` of a checkout anew, replacing whatever
    /// is there: `HEAD` on `branch` at `commit`, the repository's objects
    /// as an alternate, a minimal config, and a copy of git-orch's index.
    pub fn write_quarantine(&self, paths: &CheckoutPaths, commit: Oid, branch: &str) -> Result<()> {
        let q = paths.quarantine();
        remove_any(&q)?;
        let reference = branch_ref(branch);
        // As few files as git needs (each new file costs): the branch
        // lives in `packed-refs`, so no folder per component of its name.
        for dir in [q.join("objects").join("info"), q.join("refs")] {
            std::fs::create_dir_all(&dir).map_err(io(format!("creating {}", dir.display())))?;
        }
        let write = |path: PathBuf, text: String| {
            std::fs::write(&path, text).map_err(io(format!("writing {}", path.display())))
        };
        write(q.join("HEAD"), format!("ref: {reference}\n"))?;
        write(
            q.join("packed-refs"),
            format!("# pack-refs with: peeled fully-peeled sorted \n{commit} {reference}\n"),
        )?;
        write(q.join("objects/info/alternates"), self.alternates_line())?;
        let sha256 = self.repo.object_hash() != gix::hash::Kind::Sha1;
        let mut config = format!(
            "[core]\n\trepositoryformatversion = {}\n\tfilemode = true\n\tbare = false\n[gc]\n\tauto = 0\n[maintenance]\n\tauto = false\n",
            u8::from(sha256)
        );
        if sha256 {
            config.push_str("[extensions]\n\tobjectformat = sha256\n");
        }
        write(q.join("config"), config)?;
        if paths.index.is_file() {
            std::fs::copy(&paths.index, q.join("index"))
                .map_err(io(format!("copying the index into {}", q.display())))?;
        }
        Ok(())
    }

    /// The one line of a quarantine's `objects/info/alternates`.
    fn alternates_line(&self) -> String {
        let objects = self.common_dir.join("objects");
        let objects = objects.canonicalize().unwrap_or(objects);
        format!("{}\n", objects.display())
    }

    /// The tree of the files in a checkout now (what `git add -A` would
    /// stage, ignored files and the quarantine left out, nor `exclude`d
    /// pathspecs), written to the repository; git-orch's index records it.
    pub fn snapshot_tree(
        &self,
        paths: &CheckoutPaths,
        exclude: &[&str],
        limits: ImportLimits,
    ) -> std::result::Result<Oid, ImportError> {
        // What would be added is sized first (never read, never followed):
        // a file of terabytes, or millions of them, is refused, not hashed.
        let mut total = 0u64;
        let changes = self.checkout_changes(paths)?;
        if changes.len() > limits.objects {
            return Err(Refusal::TooMuch(format!("{} changed files", changes.len())).into());
        }
        for (path, _) in &changes {
            let Ok(meta) = std::fs::symlink_metadata(paths.dir.join(path)) else {
                continue;
            };
            if meta.is_file() {
                if meta.len() > limits.object {
                    return Err(Refusal::FileTooLarge {
                        path: path.escape_debug().to_string(),
                        size: meta.len(),
                        limit: limits.object,
                    }
                    .into());
                }
                total = total.saturating_add(meta.len());
            }
        }
        if total > limits.bytes {
            return Err(Refusal::TooMuch(format!("{total} bytes of changed files")).into());
        }
        let git = self.hardened_git(paths);
        let mut args: Vec<String> = vec!["add".into(), "-A".into(), "--".into(), ".".into()];
        args.extend(exclude.iter().map(|e| format!(":(exclude){e}")));
        // git writes objects into fan-out folders that a `git prune`
        // beside it may remove under it ("unable to create temporary
        // file"); and a blob it wrote a moment ago may be gone: again.
        let tree = self.retrying_transient(|| {
            git.run(&args)?;
            let mut rehashed = 0;
            loop {
                match git.run(["write-tree"]) {
                    Err(crate::process::ProcessError::Failed { ref stderr, .. })
                        if rehashed < 64
                            && let Some((mode, path)) = invalid_object(stderr) =>
                    {
                        if mode.starts_with("04") || paths.dir.join(path).is_dir() {
                            // A tree an earlier `write-tree` wrote, that the
                            // index caches for a folder, was pruned: an
                            // index made afresh caches no tree, and
                            // `write-tree` writes them all again.
                            remove_any(&paths.index)?;
                            git.run(&args)?;
                        } else {
                            // A blob `git add` wrote a moment ago was pruned
                            // before the tree named it: hashed again from
                            // the file.
                            git.run(["hash-object", "-w", "--", path])?;
                        }
                        rehashed += 1;
                    }
                    other => return Ok(other?),
                }
            }
        })?;
        Ok(self.parse_oid(tree.trim())?)
    }

    /// The paths of a checkout that differ from git-orch's index: changed,
    /// deleted and untracked (not ignored) files, each with whether it is
    /// untracked. Whatever the folder's `.git` says is not consulted.
    pub fn checkout_changes(&self, paths: &CheckoutPaths) -> Result<Vec<(String, bool)>> {
        let git = self.hardened_git(paths);
        // Submodules are not looked into: that would run git in a nested
        // repository with whatever configuration the agent gave it.
        let out = self.retrying(|| {
            let out = git.output([
                "status",
                "--porcelain=v1",
                "-z",
                "--untracked-files=all",
                "--no-renames",
                "--ignore-submodules=all",
            ])?;
            super::worktrees::failed_status(&out)?;
            Ok(out)
        })?;
        // X is the index against the repository's HEAD, which says nothing
        // here; Y is the folder against the index.
        Ok(super::worktrees::status_entries(out, &paths.dir)?
            .into_iter()
            .filter(|e| e.untracked() || e.y != b' ')
            .map(|e| {
                let untracked = e.untracked();
                (e.path, untracked)
            })
            .collect())
    }

    /// Reads the quarantine of the checkout at `dir` as data and imports
    /// the commits on its `branch` into the repository: each new object
    /// re-hashed, parsed, checked and written; nothing written unless all
    /// of it passes. The branch must descend from `start`, the commit the
    /// checkout was made at.
    pub fn import_quarantine(
        &self,
        dir: &Path,
        branch: &str,
        start: Oid,
        limits: ImportLimits,
    ) -> std::result::Result<Imported, ImportError> {
        let q = dir.join(".git");
        let head = self.quarantine_head(&q, branch)?;
        if head == start {
            return Ok(Imported {
                head,
                commits: 0,
                objects: 0,
            });
        }
        let objects = checked_dir(&q, "objects")?;
        let loose = gix::odb::loose::Store::at_opts(
            &objects,
            self.repo.object_hash(),
            gix::odb::loose::Options {
                alloc_limit_bytes: usize::try_from(limits.object).ok(),
                ..Default::default()
            },
        );
        let reader = Reader {
            store: self,
            objects: &objects,
            loose,
            limits,
        };
        let found = reader.walk(head)?;
        let mut descends = false;
        for b in &found.boundary {
            if *b == start || self.is_ancestor(start, *b)? {
                descends = true;
                break;
            }
        }
        if !descends {
            return Err(Refusal::NotDescendant(head.to_string()).into());
        }
        for (kind, id, data) in &found.objects {
            let written = self
                .write_new(*kind, data)
                .map_err(|e| StoreError::git(format!("importing object {id}"), e))?;
            if written != *id {
                return Err(StoreError::Corrupt(format!(
                    "imported object {id} was written as {written}"
                ))
                .into());
            }
        }
        if found.empty_tree {
            self.write_empty_tree()?;
        }
        Ok(Imported {
            head,
            commits: found.commits,
            objects: found.objects.len(),
        })
    }

    /// The commit the quarantine of the checkout at `dir` is on, read as
    /// [`Store::import_quarantine`] reads it (nothing imported); why not,
    /// when it is not one git-orch would import.
    pub fn quarantine_tip(&self, dir: &Path, branch: &str) -> std::result::Result<Oid, Refusal> {
        self.quarantine_head(&dir.join(".git"), branch)
    }

    /// Makes git-orch's index of a checkout anew from `commit`, with no
    /// record of the files' state: git then compares every file by
    /// content (for a checkout whose index was lost).
    pub fn index_from(&self, paths: &CheckoutPaths, commit: Oid) -> Result<()> {
        if let Some(parent) = paths.index.parent() {
            std::fs::create_dir_all(parent)
                .map_err(io(format!("creating {}", parent.display())))?;
        }
        remove_any(&paths.index)?;
        self.hardened_git(paths)
            .run(["read-tree", &commit.to_string()])?;
        Ok(())
    }

    /// Removes a checkout: its folder (never following a link out of it),
    /// git-orch's index of it, and git's record of it if an earlier
    /// git-orch made it as a linked worktree.
    pub fn remove_checkout(&self, paths: &CheckoutPaths) -> Result<()> {
        remove_any(&paths.dir)?;
        remove_any(&paths.index)?;
        self.forget_worktree(&paths.dir)
    }

    /// The commit the quarantine's HEAD names, checked: HEAD on `branch`
    /// (or detached), no other ref, no symbolic ref, nothing that would
    /// redirect git. The commit itself is not read here.
    fn quarantine_head(&self, q: &Path, branch: &str) -> std::result::Result<Oid, Refusal> {
        match std::fs::symlink_metadata(q) {
            Ok(m) if m.is_dir() => {}
            _ => return Err(Refusal::NoGitFolder),
        }
        for redirect in [
            "commondir",
            "gitdir",
            "shallow",
            "info",
            "objects/info/grafts",
        ] {
            if std::fs::symlink_metadata(q.join(redirect)).is_ok() {
                let empty_dir = std::fs::read_dir(q.join(redirect))
                    .map(|mut d| d.next().is_none())
                    .unwrap_or(false);
                if !(redirect == "info" && empty_dir) {
                    return Err(Refusal::Redirect(redirect.to_owned()));
                }
            }
        }
        let objects = checked_dir(q, "objects")?;
        let info = objects.join("info");
        if let Ok(entries) = std::fs::read_dir(&info) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name != "alternates" {
                    return Err(Refusal::Redirect(format!("objects/info/{name}")));
                }
            }
        }
        let alternates = read_small(&info.join("alternates"), "objects/info/alternates")?;
        if alternates.as_deref() != Some(self.alternates_line().as_bytes()) {
            return Err(Refusal::Alternates);
        }
        if let Ok(entries) = std::fs::read_dir(objects.join("pack"))
            && let Some(e) = entries.flatten().next()
        {
            return Err(Refusal::Pack(e.file_name().to_string_lossy().into_owned()));
        }
        let reference = branch_ref(branch);
        let head = read_small(&q.join("HEAD"), "HEAD")?
            .ok_or_else(|| Refusal::Head("is missing".into()))?;
        let head = String::from_utf8_lossy(&head).trim().to_owned();
        let detached = match head.strip_prefix("ref:") {
            Some(name) if name.trim() == reference => None,
            Some(name) => {
                return Err(Refusal::Head(format!("names {}", shown_ref(name.trim()))));
            }
            None => Some(
                self.parse_oid(&head)
                    .map_err(|_| Refusal::Head(format!("holds {:?}", shown_ref(&head))))?,
            ),
        };
        let refs = self.quarantine_refs(q, &reference)?;
        match (detached, refs) {
            (Some(id), _) => Ok(id),
            (None, Some(id)) => Ok(id),
            (None, None) => Err(Refusal::NoBranch(branch.to_owned())),
        }
    }

    /// The value of `reference` in the quarantine `q` (loose or packed),
    /// refusing every other ref and every symbolic ref.
    fn quarantine_refs(
        &self,
        q: &Path,
        reference: &str,
    ) -> std::result::Result<Option<Oid>, Refusal> {
        let mut value = None;
        let refs = checked_dir(q, "refs")?;
        let mut stack = vec![(refs, "refs".to_owned())];
        let mut seen = 0usize;
        while let Some((dir, name)) = stack.pop() {
            let entries = std::fs::read_dir(&dir).map_err(|_| Refusal::NotRegular(name.clone()))?;
            for e in entries.flatten() {
                seen += 1;
                if seen > 10_000 {
                    return Err(Refusal::ExtraRef(format!("{name}/… (thousands of refs)")));
                }
                let child = format!("{name}/{}", e.file_name().to_string_lossy());
                let meta = std::fs::symlink_metadata(e.path())
                    .map_err(|_| Refusal::NotRegular(child.clone()))?;
                if meta.is_dir() {
                    stack.push((e.path(), child));
                } else if !meta.is_file() {
                    return Err(Refusal::NotRegular(child));
                } else if child.ends_with(".lock") {
                    // A lock a killed git left: not a ref.
                } else if child != reference {
                    return Err(Refusal::ExtraRef(shown_ref(&child)));
                } else {
                    value = Some(self.ref_value(&e.path(), &child)?);
                }
            }
        }
        if let Some(packed) = read_small(&q.join("packed-refs"), "packed-refs")? {
            for line in String::from_utf8_lossy(&packed).lines() {
                if line.starts_with('#') || line.starts_with('^') || line.trim().is_empty() {
                    continue;
                }
                let Some((id, name)) = line.split_once(' ') else {
                    return Err(Refusal::NotRegular("packed-refs".into()));
                };
                if name != reference {
                    return Err(Refusal::ExtraRef(shown_ref(name)));
                }
                if value.is_none() {
                    value = Some(
                        self.parse_oid(id)
                            .map_err(|_| Refusal::NotRegular("packed-refs".into()))?,
                    );
                }
            }
        }
        Ok(value)
    }

    /// The commit id a loose ref file holds; a symbolic ref is refused.
    fn ref_value(&self, file: &Path, name: &str) -> std::result::Result<Oid, Refusal> {
        let text = read_small(file, name)?.unwrap_or_default();
        let text = String::from_utf8_lossy(&text).trim().to_owned();
        if text.starts_with("ref:") {
            return Err(Refusal::Symref(shown_ref(name)));
        }
        self.parse_oid(&text)
            .map_err(|_| Refusal::NotRegular(shown_ref(name)))
    }
}

/// A ref name as it may be shown: control characters escaped, cut short.
fn shown_ref(name: &str) -> String {
    let escaped: String = name.escape_debug().collect();
    let mut cut: String = escaped.chars().take(200).collect();
    if cut.len() < escaped.len() {
        cut.push('…');
    }
    cut
}

/// `q/name`, which must be a real folder (not a link).
fn checked_dir(q: &Path, name: &str) -> std::result::Result<PathBuf, Refusal> {
    let path = q.join(name);
    match std::fs::symlink_metadata(&path) {
        Ok(m) if m.is_dir() => Ok(path),
        _ => Err(Refusal::NotRegular(name.to_owned())),
    }
}

/// The bytes of a small regular file (at most 64 KiB); `None` when absent.
/// A link, a FIFO, a device or a folder is refused, never opened.
fn read_small(path: &Path, name: &str) -> std::result::Result<Option<Vec<u8>>, Refusal> {
    use std::io::Read;
    let meta = match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(_) => return Err(Refusal::NotRegular(name.to_owned())),
        Ok(m) => m,
    };
    if !meta.is_file() || meta.len() > 64 * 1024 {
        return Err(Refusal::NotRegular(name.to_owned()));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(64 * 1024).read_to_end(&mut bytes))
        .map_err(|_| Refusal::NotRegular(name.to_owned()))?;
    Ok(Some(bytes))
}

/// Whether git would refuse to check out a tree entry of this name: `.`,
/// `..`, `.git` in any case (and the forms Windows and macOS file systems
/// treat as `.git`), anything with a `/` or a NUL.
fn refused_name(name: &[u8]) -> bool {
    if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') || name.contains(&0)
    {
        return true;
    }
    // Trailing dots and spaces vanish on Windows; `git~1` is the 8.3 name.
    let mut trimmed = name;
    while let [rest @ .., b'.' | b' '] = trimmed {
        trimmed = rest;
    }
    let lower = trimmed.to_ascii_lowercase();
    if lower == b".git" || lower == b"git~1" {
        return true;
    }
    // HFS+ ignores some zero-width characters: `.g\u{200c}it`.
    let visible: Vec<u8> = String::from_utf8_lossy(&lower)
        .chars()
        .filter(|c| !matches!(*c, '\u{200c}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{206a}'..='\u{206f}' | '\u{feff}'))
        .collect::<String>()
        .into_bytes();
    visible == b".git"
}

/// Names whose symbolic links `git fsck` reports: git reads these files
/// itself, and must not be led elsewhere by them.
const NO_LINK_NAMES: &[&[u8]] = &[
    b".gitmodules",
    b".gitattributes",
    b".gitignore",
    b".mailmap",
];

/// What a walk of a quarantine found: the new objects, in an order that
/// writes each one's dependencies first.
struct Found {
    objects: Vec<(gix::objs::Kind, Oid, Vec<u8>)>,
    commits: usize,
    /// Commits the walk reached that the repository has already.
    boundary: Vec<Oid>,
    /// A new tree refers to the empty tree, which must then be stored.
    empty_tree: bool,
}

/// Reads a quarantine's loose objects for one import.
struct Reader<'a> {
    store: &'a Store,
    objects: &'a Path,
    loose: gix::odb::loose::Store,
    limits: ImportLimits,
}

impl Reader<'_> {
    /// Every object reachable from `head` that the repository lacks, read
    /// and checked; a walk stops at objects the repository has.
    fn walk(&self, head: Oid) -> std::result::Result<Found, Refusal> {
        let hash = self.store.repo.object_hash();
        let empty_tree = Oid::from(gix::ObjectId::empty_tree(hash));
        let mut found = Found {
            objects: Vec::new(),
            commits: 0,
            boundary: Vec::new(),
            empty_tree: false,
        };
        let mut seen: HashSet<Oid> = HashSet::new();
        let mut queue: VecDeque<(Oid, gix::objs::Kind, Option<String>)> = VecDeque::new();
        queue.push_back((head, gix::objs::Kind::Commit, None));
        let mut bytes = 0u64;
        while let Some((id, want, commit)) = queue.pop_front() {
            if !seen.insert(id) {
                continue;
            }
            if id == empty_tree {
                found.empty_tree = true;
                continue;
            }
            if self.store.has_object(id) {
                if want == gix::objs::Kind::Commit {
                    found.boundary.push(id);
                }
                continue;
            }
            if found.objects.len() >= self.limits.objects {
                return Err(Refusal::TooLarge(format!(
                    "{} objects",
                    self.limits.objects
                )));
            }
            let (kind, data) = self.read(id)?;
            bytes += data.len() as u64;
            if bytes > self.limits.bytes {
                return Err(Refusal::TooLarge(format!("{} bytes", self.limits.bytes)));
            }
            if kind != want {
                return Err(Refusal::BadObject {
                    id: id.to_string(),
                    why: format!("is a {kind}, where a {want} was expected"),
                });
            }
            let bad = |why: String| Refusal::BadObject {
                id: id.to_string(),
                why,
            };
            match kind {
                gix::objs::Kind::Commit => {
                    let parsed = gix::objs::CommitRef::from_bytes(&data, hash)
                        .map_err(|e| bad(format!("is not a valid commit: {e}")))?;
                    canonical(&parsed, &data, &id)?;
                    if parsed.parents.is_empty() {
                        // A second history, merged in or not, is nothing an
                        // attempt that started from the target makes.
                        return Err(bad("has no parent: it starts a history of its own".into()));
                    }
                    queue.push_back((
                        parsed.tree().into(),
                        gix::objs::Kind::Tree,
                        Some(id.to_string()),
                    ));
                    for p in parsed.parents() {
                        queue.push_back((p.into(), gix::objs::Kind::Commit, None));
                    }
                    found.commits += 1;
                }
                gix::objs::Kind::Tree => {
                    let parsed = gix::objs::TreeRef::from_bytes(&data, hash)
                        .map_err(|e| bad(format!("is not a valid tree: {e}")))?;
                    let commit = commit.clone().unwrap_or_default();
                    let mut previous: Option<Vec<u8>> = None;
                    // A file and a folder of one name sort apart (`a`,
                    // `a.b`, `a/`): git would check out only one of them.
                    let mut names: HashSet<&[u8]> = HashSet::with_capacity(parsed.entries.len());
                    for entry in &parsed.entries {
                        let name: &[u8] = entry.filename.as_ref();
                        let kind = entry.mode.kind();
                        if gix::objs::tree::EntryMode::from(kind) != entry.mode
                            || refused_name(name)
                            || (kind == gix::objs::tree::EntryKind::Link
                                && NO_LINK_NAMES.iter().any(|n| name.eq_ignore_ascii_case(n)))
                        {
                            return Err(Refusal::BadPath {
                                commit,
                                path: String::from_utf8_lossy(name).escape_debug().to_string(),
                            });
                        }
                        // git's order: names compared as if trees ended in `/`.
                        let mut key = name.to_vec();
                        if kind == gix::objs::tree::EntryKind::Tree {
                            key.push(b'/');
                        }
                        if previous.as_ref().is_some_and(|p| *p >= key) || !names.insert(name) {
                            return Err(bad("its entries are not sorted, or repeat".into()));
                        }
                        previous = Some(key);
                        let child = Oid::from(entry.oid);
                        match kind {
                            gix::objs::tree::EntryKind::Tree => queue.push_back((
                                child,
                                gix::objs::Kind::Tree,
                                Some(commit.clone()),
                            )),
                            gix::objs::tree::EntryKind::Commit => {}
                            _ => queue.push_back((child, gix::objs::Kind::Blob, None)),
                        }
                    }
                    // Only now: gix's writer insists on sorted entries.
                    canonical(&parsed, &data, &id)?;
                }
                gix::objs::Kind::Blob => {}
                gix::objs::Kind::Tag => {
                    return Err(bad("is a tag; an attempt lands commits only".into()));
                }
            }
            found.objects.push((kind, id, data));
        }
        // What an object refers to is written before it: blobs, trees
        // (subtrees before the trees that hold them), then commits (parents
        // first).
        found.objects.reverse();
        found.objects.sort_by_key(|(kind, _, _)| match kind {
            gix::objs::Kind::Blob => 0,
            gix::objs::Kind::Tree => 1,
            _ => 2,
        });
        Ok(found)
    }

    /// One loose object of the quarantine, read from a regular file and
    /// re-hashed: its id must be the hash of what it holds.
    fn read(&self, id: Oid) -> std::result::Result<(gix::objs::Kind, Vec<u8>), Refusal> {
        let hex = id.to_string();
        let missing = || Refusal::Missing(hex.clone());
        let folder = self.objects.join(&hex[..2]);
        match std::fs::symlink_metadata(&folder) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(Refusal::NotRegular(format!("objects/{}", &hex[..2]))),
            Err(_) => return Err(missing()),
        }
        let file = folder.join(&hex[2..]);
        match std::fs::symlink_metadata(&file) {
            Ok(m) if m.is_file() => {
                if m.len() > self.limits.object.saturating_add(1024) {
                    return Err(Refusal::TooLarge(format!(
                        "{} bytes in one object ({hex})",
                        self.limits.object
                    )));
                }
            }
            Ok(_) => {
                return Err(Refusal::NotRegular(format!(
                    "objects/{}/{}",
                    &hex[..2],
                    &hex[2..]
                )));
            }
            Err(_) => return Err(missing()),
        }
        let bad = |why: String| Refusal::BadObject {
            id: hex.clone(),
            why,
        };
        match self.loose.try_header(id.as_gix()) {
            Ok(Some((size, _))) if size > self.limits.object => {
                return Err(Refusal::TooLarge(format!(
                    "{} bytes in one object ({hex})",
                    self.limits.object
                )));
            }
            Ok(Some(_)) => {}
            Ok(None) => return Err(missing()),
            Err(e) => return Err(bad(format!("cannot be read: {e}"))),
        }
        let mut buf = Vec::new();
        let data = self
            .loose
            .try_find(id.as_gix(), &mut buf)
            .map_err(|e| bad(format!("cannot be read: {e}")))?
            .ok_or_else(missing)?;
        let kind = data.kind;
        let actual = gix::objs::compute_hash(id.as_gix().kind(), kind, data.data)
            .map_err(|e| bad(format!("cannot be hashed: {e}")))?;
        if actual != id {
            return Err(bad(format!("holds an object whose id is {actual}")));
        }
        let bytes = data.data.to_vec();
        Ok((kind, bytes))
    }
}

/// Whether `parsed` writes back to exactly `data`: objects git itself
/// made always do; one crafted to differ is refused before `git fsck`
/// could object to it in the repository.
fn canonical(
    parsed: &dyn gix::objs::WriteTo,
    data: &[u8],
    id: &Oid,
) -> std::result::Result<(), Refusal> {
    let bad = |why: String| Refusal::BadObject {
        id: id.to_string(),
        why,
    };
    let mut again = Vec::with_capacity(data.len());
    parsed
        .write_to(&mut again)
        .map_err(|e| bad(format!("cannot be written back: {e}")))?;
    if again != data {
        return Err(bad("is not in git's canonical form".into()));
    }
    Ok(())
}

/// The mode and path git names when `write-tree` meets an object that is
/// not in the object database ("invalid object 100644 <id> for '<path>'";
/// mode 040000 for a tree the index caches).
fn invalid_object(stderr: &str) -> Option<(&str, &str)> {
    let (mode_id, rest) = stderr
        .lines()
        .find_map(|l| l.split_once("invalid object ")?.1.split_once(" for '"))?;
    let mode = mode_id.split_whitespace().next()?;
    Some((mode, rest.strip_suffix('\'')?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_tree_names_the_missing_object_and_its_mode() {
        let blob = "error: invalid object 100644 0123456789abcdef0123456789abcdef01234567 for 'src/a b'\nfatal: git-write-tree: error building trees";
        assert_eq!(invalid_object(blob), Some(("100644", "src/a b")));
        let tree =
            "error: invalid object 040000 0123456789abcdef0123456789abcdef01234567 for 'src/t00'";
        assert_eq!(invalid_object(tree), Some(("040000", "src/t00")));
        assert_eq!(invalid_object("fatal: something else"), None);
    }

    const BRANCH: &str = "orch/r/t/attempt-1";

    /// git as an agent runs it inside its checkout (the quarantine found
    /// by discovery), with an identity and no machine configuration.
    fn agent_git(dir: &Path, args: &[&str]) -> String {
        let mut all = vec!["-c", "user.name=Agent", "-c", "user.email=a@example.com"];
        all.extend_from_slice(args);
        crate::process::Git::new(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .run(&all)
            .unwrap_or_else(|e| panic!("git {args:?}: {e}"))
            .trim()
            .to_owned()
    }

    /// A repository with one commit, and a checkout of it.
    fn setup() -> (tempfile::TempDir, Store, CheckoutPaths, Oid) {
        let tmp = tempfile::tempdir().expect("tmp");
        let repo = tmp.path().join("repo");
        std::fs::create_dir_all(&repo).expect("mkdir");
        let store = Store::init_for_tests(&repo);
        std::fs::write(repo.join("README.md"), "hello\n").expect("write");
        agent_git(&repo, &["add", "."]);
        agent_git(&repo, &["commit", "-q", "-m", "initial"]);
        let start = store
            .resolve_commit("HEAD")
            .expect("head")
            .expect("a commit");
        let paths = CheckoutPaths {
            dir: tmp.path().join("work"),
            index: tmp.path().join("index"),
        };
        store
            .make_checkout(&paths, start, BRANCH)
            .expect("checkout");
        (tmp, store, paths, start)
    }

    fn import(
        store: &Store,
        paths: &CheckoutPaths,
        start: Oid,
    ) -> std::result::Result<Imported, ImportError> {
        store.import_quarantine(&paths.dir, BRANCH, start, ImportLimits::default())
    }

    fn refusal(r: std::result::Result<Imported, ImportError>) -> Refusal {
        match r {
            Err(ImportError::Refused(r)) => r,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    /// Writes raw object bytes into the quarantine as `git hash-object
    /// --literally` does (no checks), returning the id.
    fn literal(dir: &Path, kind: &str, bytes: &[u8]) -> String {
        let file = tempfile::NamedTempFile::new().expect("tmp");
        std::fs::write(file.path(), bytes).expect("write");
        let path = file.path().to_string_lossy().into_owned();
        agent_git(
            dir,
            &["hash-object", "--literally", "-w", "-t", kind, &path],
        )
    }

    fn raw_tree(entries: &[(&str, &str, &str)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (mode, name, hex) in entries {
            out.extend_from_slice(format!("{mode} {name}\0").as_bytes());
            out.extend_from_slice(Oid::from_hex(hex.as_bytes()).expect("hex").raw_bytes());
        }
        out
    }

    /// Points the quarantine's branch at a commit of `tree` on `parent`.
    fn commit_tree(paths: &CheckoutPaths, tree: &str, parent: Oid) -> String {
        let c = agent_git(
            &paths.dir,
            &["commit-tree", tree, "-p", &parent.to_string(), "-m", "x"],
        );
        set_branch(paths, &c);
        c
    }

    /// Points the quarantine's branch at `commit`, as `git update-ref`
    /// would (a loose ref, over the packed one).
    fn set_branch(paths: &CheckoutPaths, commit: &str) {
        agent_git(
            &paths.dir,
            &["update-ref", &format!("refs/heads/{BRANCH}"), commit],
        );
    }

    #[test]
    fn an_agents_commits_are_imported_with_every_object_they_need() {
        let (_tmp, store, paths, start) = setup();
        for i in 0..3 {
            std::fs::create_dir_all(paths.dir.join("src")).expect("mkdir");
            std::fs::write(paths.dir.join(format!("src/f{i}.rs")), format!("{i}\n")).expect("w");
            agent_git(&paths.dir, &["add", "-A"]);
            agent_git(&paths.dir, &["commit", "-q", "-m", &format!("step {i}")]);
        }
        let head = agent_git(&paths.dir, &["rev-parse", "HEAD"]);
        assert!(!store.has_object(store.parse_oid(&head).expect("oid")));
        let imported = import(&store, &paths, start).expect("imports");
        assert_eq!(imported.head.to_string(), head);
        assert_eq!(imported.commits, 3);
        // Three commits, three root trees, three src trees, three blobs.
        assert_eq!(imported.objects, 12);
        let steps = store.commit_steps(start, imported.head).expect("steps");
        assert_eq!(steps.len(), 3);
        assert_eq!(
            store.file_at(imported.head, "src/f2.rs").expect("read"),
            Some(b"2\n".to_vec())
        );
        // Nothing committed: the start is the head.
        let (_tmp2, store2, paths2, start2) = setup();
        assert_eq!(import(&store2, &paths2, start2).expect("ok").head, start2);
    }

    #[test]
    fn a_snapshot_holds_the_files_and_never_the_git_folder() {
        let (_tmp, store, paths, start) = setup();
        std::fs::write(paths.dir.join("new.txt"), "new\n").expect("w");
        std::fs::write(paths.dir.join(".gitignore"), "junk\n").expect("w");
        std::fs::write(paths.dir.join("junk"), "ignored\n").expect("w");
        let tree = store
            .snapshot_tree(&paths, &[], ImportLimits::default())
            .expect("snapshot");
        let listed = store.paths_in_tree(tree).expect("paths");
        assert_eq!(listed, [".gitignore", "README.md", "new.txt"]);
        assert!(store.checkout_changes(&paths).expect("changes").is_empty());
        std::fs::write(paths.dir.join("README.md"), "changed\n").expect("w");
        assert_eq!(
            store.checkout_changes(&paths).expect("changes"),
            [("README.md".to_owned(), false)]
        );
        let _ = start;
    }

    #[test]
    fn a_reset_checkout_holds_exactly_the_commit() {
        let (_tmp, store, paths, start) = setup();
        std::fs::write(paths.dir.join("README.md"), "changed\n").expect("w");
        std::fs::create_dir_all(paths.dir.join("target/debug")).expect("mkdir");
        std::fs::write(paths.dir.join("target/debug/bin"), "stale").expect("w");
        std::fs::write(
            paths.quarantine().join("config"),
            "[core]\n\tfsmonitor = /bin/evil\n",
        )
        .expect("w");
        store.reset_checkout(&paths, start, BRANCH).expect("reset");
        assert_eq!(
            std::fs::read_to_string(paths.dir.join("README.md")).expect("r"),
            "hello\n"
        );
        assert!(!paths.dir.join("target").exists());
        assert!(
            !std::fs::read_to_string(paths.quarantine().join("config"))
                .expect("r")
                .contains("fsmonitor")
        );
        assert_eq!(import(&store, &paths, start).expect("ok").head, start);
    }

    #[test]
    fn metadata_that_would_redirect_git_is_refused() {
        type Attack = Box<dyn Fn(&CheckoutPaths)>;
        type Expected = fn(&Refusal) -> bool;
        let cases: Vec<(&str, Attack, Expected)> = vec![
            (
                "alternates",
                Box::new(|p| {
                    std::fs::write(p.quarantine().join("objects/info/alternates"), "/tmp/x\n")
                        .expect("w")
                }),
                |r| matches!(r, Refusal::Alternates),
            ),
            (
                "commondir",
                Box::new(|p| {
                    std::fs::write(p.quarantine().join("commondir"), "/elsewhere\n").expect("w")
                }),
                |r| matches!(r, Refusal::Redirect(n) if n == "commondir"),
            ),
            (
                "a .git file",
                Box::new(|p| {
                    std::fs::remove_dir_all(p.quarantine()).expect("rm");
                    std::fs::write(p.quarantine(), "gitdir: /elsewhere\n").expect("w");
                }),
                |r| matches!(r, Refusal::NoGitFolder),
            ),
            (
                "HEAD on main",
                Box::new(|p| {
                    std::fs::write(p.quarantine().join("HEAD"), "ref: refs/heads/main\n")
                        .expect("w")
                }),
                |r| matches!(r, Refusal::Head(w) if w.contains("refs/heads/main")),
            ),
            (
                "a symbolic branch",
                Box::new(|p| {
                    agent_git(
                        &p.dir,
                        &[
                            "symbolic-ref",
                            &format!("refs/heads/{BRANCH}"),
                            "refs/orch/approvals/x",
                        ],
                    );
                }),
                |r| matches!(r, Refusal::Symref(_)),
            ),
            (
                "another ref",
                Box::new(|p| {
                    agent_git(&p.dir, &["update-ref", "refs/orch/log/w", "HEAD"]);
                }),
                |r| matches!(r, Refusal::ExtraRef(n) if n == "refs/orch/log/w"),
            ),
            (
                "a pack",
                Box::new(|p| {
                    std::fs::create_dir_all(p.quarantine().join("objects/pack")).expect("mkdir");
                    std::fs::write(p.quarantine().join("objects/pack/pack-1.pack"), "PACK")
                        .expect("w")
                }),
                |r| matches!(r, Refusal::Pack(_)),
            ),
            (
                "grafts",
                Box::new(|p| {
                    std::fs::create_dir_all(p.quarantine().join("info")).expect("mkdir");
                    std::fs::write(p.quarantine().join("info/grafts"), "x\n").expect("w");
                }),
                |r| matches!(r, Refusal::Redirect(n) if n == "info"),
            ),
            (
                "a deleted branch",
                Box::new(|p| {
                    agent_git(
                        &p.dir,
                        &["update-ref", "-d", &format!("refs/heads/{BRANCH}")],
                    );
                }),
                |r| matches!(r, Refusal::NoBranch(_)),
            ),
        ];
        for (what, attack, expected) in cases {
            let (_tmp, store, paths, start) = setup();
            attack(&paths);
            let r = refusal(import(&store, &paths, start));
            assert!(expected(&r), "{what}: got {r:?}");
        }
    }

    #[test]
    fn trees_with_paths_git_refuses_are_not_imported() {
        for name in [".git", ".GIT", "..", ".git.", "git~1", ".g\u{200c}it"] {
            let (_tmp, store, paths, start) = setup();
            let blob = literal(&paths.dir, "blob", b"[core]\n\tfsmonitor = evil\n");
            let inner = literal(
                &paths.dir,
                "tree",
                &raw_tree(&[("100644", "config", &blob)]),
            );
            let tree = literal(&paths.dir, "tree", &raw_tree(&[("40000", name, &inner)]));
            commit_tree(&paths, &tree, start);
            let r = refusal(import(&store, &paths, start));
            assert!(matches!(r, Refusal::BadPath { .. }), "{name:?}: {r:?}");
            assert!(
                !store.has_object(store.parse_oid(&tree).expect("oid")),
                "{name:?} was written"
            );
        }
    }

    #[test]
    fn objects_that_lie_about_their_content_are_refused() {
        // An object file holding another object's bytes.
        let (_tmp, store, paths, start) = setup();
        std::fs::write(paths.dir.join("a"), "a\n").expect("w");
        agent_git(&paths.dir, &["add", "-A"]);
        agent_git(&paths.dir, &["commit", "-q", "-m", "a"]);
        let blob = agent_git(&paths.dir, &["rev-parse", "HEAD:a"]);
        let other = literal(&paths.dir, "blob", b"something else\n");
        let objects = paths.quarantine().join("objects");
        std::fs::copy(
            objects.join(&other[..2]).join(&other[2..]),
            objects.join(&blob[..2]).join(&blob[2..]),
        )
        .expect("swap");
        let r = refusal(import(&store, &paths, start));
        assert!(
            matches!(&r, Refusal::BadObject { id, .. } if *id == blob),
            "{r:?}"
        );

        // An unsorted tree.
        let (_tmp, store, paths, start) = setup();
        let b = literal(&paths.dir, "blob", b"x\n");
        let tree = literal(
            &paths.dir,
            "tree",
            &raw_tree(&[("100644", "b", &b), ("100644", "a", &b)]),
        );
        commit_tree(&paths, &tree, start);
        let r = refusal(import(&store, &paths, start));
        assert!(matches!(r, Refusal::BadObject { .. }), "{r:?}");

        // A file and a folder of one name, apart in git's order.
        let (_tmp, store, paths, start) = setup();
        let b = literal(&paths.dir, "blob", b"x\n");
        let sub = literal(&paths.dir, "tree", &raw_tree(&[("100644", "f", &b)]));
        let tree = literal(
            &paths.dir,
            "tree",
            &raw_tree(&[
                ("100644", "a", &b),
                ("100644", "a.b", &b),
                ("40000", "a", &sub),
            ]),
        );
        commit_tree(&paths, &tree, start);
        let r = refusal(import(&store, &paths, start));
        assert!(matches!(r, Refusal::BadObject { .. }), "{r:?}");
        assert!(!store.has_object(store.parse_oid(&tree).expect("oid")));

        // A new history: a commit with no parent, alone or merged in.
        let (_tmp, store, paths, start) = setup();
        let b = literal(&paths.dir, "blob", b"x\n");
        let tree = literal(&paths.dir, "tree", &raw_tree(&[("100644", "a", &b)]));
        let orphan = agent_git(&paths.dir, &["commit-tree", &tree, "-m", "orphan"]);
        set_branch(&paths, &orphan);
        let r = refusal(import(&store, &paths, start));
        assert!(matches!(r, Refusal::BadObject { .. }), "{r:?}");
        assert!(!store.has_object(store.parse_oid(&orphan).expect("oid")));
        let merge = agent_git(
            &paths.dir,
            &[
                "commit-tree",
                &tree,
                "-p",
                &start.to_string(),
                "-p",
                &orphan,
                "-m",
                "merge",
            ],
        );
        set_branch(&paths, &merge);
        let r = refusal(import(&store, &paths, start));
        assert!(matches!(r, Refusal::BadObject { .. }), "{r:?}");
        assert!(!store.has_object(store.parse_oid(&merge).expect("oid")));

        // A commit on one the repository has that does not descend from
        // the start.
        let (tmp, store, paths, start) = setup();
        let repo = tmp.path().join("repo");
        let empty = agent_git(&repo, &["mktree"]);
        let elsewhere = agent_git(&repo, &["commit-tree", &empty, "-m", "elsewhere"]);
        let b = literal(&paths.dir, "blob", b"x\n");
        let tree = literal(&paths.dir, "tree", &raw_tree(&[("100644", "a", &b)]));
        let on_it = commit_tree(&paths, &tree, store.parse_oid(&elsewhere).expect("oid"));
        let r = refusal(import(&store, &paths, start));
        assert!(matches!(r, Refusal::NotDescendant(_)), "{r:?}");
        assert!(!store.has_object(store.parse_oid(&on_it).expect("oid")));
    }

    #[test]
    fn a_fifo_or_a_link_in_the_git_folder_is_never_opened() {
        let (_tmp, store, paths, start) = setup();
        std::fs::write(paths.dir.join("a"), "a\n").expect("w");
        agent_git(&paths.dir, &["add", "-A"]);
        agent_git(&paths.dir, &["commit", "-q", "-m", "a"]);
        let head = agent_git(&paths.dir, &["rev-parse", "HEAD"]);
        let file = paths
            .quarantine()
            .join("objects")
            .join(&head[..2])
            .join(&head[2..]);
        std::fs::remove_file(&file).expect("rm");
        let c = std::ffi::CString::new(file.to_string_lossy().as_bytes()).expect("c path");
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let r = refusal(import(&store, &paths, start));
        assert!(matches!(r, Refusal::NotRegular(_)), "{r:?}");

        let (_tmp, store, paths, start) = setup();
        let head_file = paths.quarantine().join("HEAD");
        std::fs::remove_file(&head_file).expect("rm");
        std::os::unix::fs::symlink("/etc/passwd", &head_file).expect("link");
        let r = refusal(import(&store, &paths, start));
        assert!(matches!(&r, Refusal::NotRegular(n) if n == "HEAD"), "{r:?}");
    }

    #[test]
    fn names_git_refuses_are_recognised() {
        for bad in [
            &b".git"[..],
            b".Git",
            b".git ",
            b"..",
            b".",
            b"",
            b"a/b",
            b"GIT~1",
        ] {
            assert!(refused_name(bad), "{:?}", String::from_utf8_lossy(bad));
        }
        for good in [&b".github"[..], b".gitignore", b"git", b"a.git", b"..a"] {
            assert!(!refused_name(good), "{:?}", String::from_utf8_lossy(good));
        }
    }
}
