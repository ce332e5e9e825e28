//! Warm checkouts (`[worktree]`): every fresh checkout git-orch makes for
//! an attempt, its gates or the merge queue gets the main checkout's
//! ignored local files (`include`) and sees its build caches warm
//! (`cache`), without any write reaching the main checkout.
//!
//! A cache is given one of three ways, the cheapest that works here,
//! chosen once per process ([`method`]):
//!
//! - **overlay**, for commands in the bubblewrap sandbox: the main
//!   checkout's folder is the read-only lower layer of an overlay mounted
//!   at the same place in the checkout, with an upper layer of the
//!   checkout's own under `.git/orch/warm/<key>/` (see
//!   [`crate::store::scratch::warm_layers`]). It costs nothing until
//!   written, the upper layer keeps what the checkout's commands wrote from
//!   one command to the next, and overlayfs never writes a lower layer.
//!   The mount is made in a mount namespace of the command's own (a user
//!   namespace too, unless git-orch runs as root) by `git-orch
//!   warm-mount` ([`enter`]), which then starts bubblewrap: the sandbox
//!   binds the checkout with the overlay inside, and the host never sees
//!   the mount. bubblewrap 0.9 can mount overlays itself; this works with
//!   older ones too.
//! - **reflink**, where the sandbox cannot mount: a copy whose blocks are
//!   shared with the main checkout's until written (`FICLONE`), made when
//!   the checkout is made;
//! - **copy**, the last resort, a plain copy.
//!
//! Nothing here trusts what an agent can write: a checkout's folders are
//! walked without following links before a mount or copy goes there, and
//! a source is taken only when it really lies inside the main checkout
//! (or the home folder, for `~/` entries), links resolved.

use std::ffi::{CString, OsString};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use crate::config::{CacheMode, CachePath, WorktreeSettings};

/// Overrides how caches are made for one command: `copy` makes copies
/// (reflinked where possible) even where an overlay would work.
pub const WARM_ENV: &str = "GIT_ORCH_WARM";

/// Most bytes of included files copied into one checkout: local
/// settings are small, and a huge match should not fill the disk once per
/// attempt.
const INCLUDE_LIMIT: u64 = 64 * 1024 * 1024;

/// Most entries looked at while finding included files.
const INCLUDE_WALK_LIMIT: usize = 200_000;

/// How the caches of a checkout are made warm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    Overlay,
    Reflink,
    Copy,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Overlay => "overlay",
            Method::Reflink => "reflink",
            Method::Copy => "copy",
        }
    }
}

/// Why a checkout cannot be warmed as configured.
#[derive(Debug, thiserror::Error)]
pub enum WarmError {
    /// An entry that really points outside the repository (or the home
    /// folder): a symlink out.
    #[error(
        "[worktree] {key} {entry:?} points outside {inside} (to {}): refused; name a folder that really lies inside it",
        target.display()
    )]
    Escapes {
        key: &'static str,
        entry: String,
        inside: &'static str,
        target: PathBuf,
    },
    /// A path an overlay's options cannot carry.
    #[error("[worktree] cache: {} holds a comma, colon or backslash, which an overlay mount cannot name", path.display())]
    Unmountable { path: PathBuf },
    /// A checkout's folder is a link or not a folder (an agent's doing).
    #[error("{} is not a folder of the checkout (a link?): the cache is not put there", path.display())]
    NotAFolder { path: PathBuf },
    #[error("warming {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl WarmError {
    /// Whether the configuration is at fault (no retry can fix it).
    pub fn is_config(&self) -> bool {
        matches!(
            self,
            WarmError::Escapes { .. } | WarmError::Unmountable { .. }
        )
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> WarmError + '_ {
    move |source| WarmError::Io {
        path: path.to_owned(),
        source,
    }
}

/// The main checkout of the repository whose git directory is `common`
/// (`<main>/.git`), if it has one.
pub fn main_checkout(common: &Path) -> Option<PathBuf> {
    let common = canonical(common);
    (common.file_name().is_some_and(|n| n == ".git"))
        .then(|| common.parent().map(Path::to_owned))
        .flatten()
}

/// How caches are made here for commands `confined` in bubblewrap or
/// not.
pub fn method(w: &WorktreeSettings, confined: bool) -> Method {
    let forced_copy = w.mode == CacheMode::Copy
        || std::env::var(WARM_ENV).is_ok_and(|v| v.trim().eq_ignore_ascii_case("copy"));
    if !forced_copy && confined && overlay_probe().is_ok() {
        Method::Overlay
    } else if reflink_works() {
        Method::Reflink
    } else {
        Method::Copy
    }
}

/// What a run says once at its start about `[worktree]`: how caches are
/// made, and the entries that give nothing (a missing folder is a
/// warning, not a failure). Empty without a `[worktree]` section.
pub fn notices(w: &WorktreeSettings, confined: bool, common: &Path) -> Vec<String> {
    if w.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let Some(main) = main_checkout(common) else {
        out.push("warning: [worktree] has no main checkout to take files from (a bare repository): checkouts start cold".into());
        return out;
    };
    if !w.include.is_empty() {
        out.push(format!(
            "worktree: local files copied into every checkout: {}",
            w.include.join(", ")
        ));
    }
    if !w.cache.is_empty() {
        let how = match method(w, confined) {
            Method::Overlay => {
                "an overlay on the main checkout's folder; each checkout writes only its own layer"
                    .to_owned()
            }
            Method::Reflink => {
                "a reflink copy of the main checkout's folder per checkout".to_owned()
            }
            Method::Copy => {
                let why = overlay_probe().err().filter(|_| confined);
                format!(
                    "a plain copy of the main checkout's folder per checkout (this filesystem cannot reflink{})",
                    why.map(|w| format!("; no overlay: {w}"))
                        .unwrap_or_default()
                )
            }
        };
        let names: Vec<String> = w.cache.iter().map(ToString::to_string).collect();
        out.push(format!(
            "worktree: warm caches {} by {how}",
            names.join(", ")
        ));
    }
    match sources(w, &main) {
        Ok((_, notes)) => out.extend(notes.into_iter().map(|n| format!("warning: {n}"))),
        Err(e) => out.push(format!("error: {e}")),
    }
    out
}

/// One cache's source, checked.
#[derive(Debug, Clone)]
pub struct Source {
    pub entry: CachePath,
    /// The folder itself, links resolved.
    pub from: PathBuf,
}

/// The cache folders of `w` that exist, links resolved and checked to lie
/// where their entry says, and a note for each that does not exist.
pub fn sources(w: &WorktreeSettings, main: &Path) -> Result<(Vec<Source>, Vec<String>), WarmError> {
    let main = canonical(main);
    let home = real_home();
    let mut found = Vec::new();
    let mut notes = Vec::new();
    for entry in &w.cache {
        let (base, rel, inside) = match entry {
            CachePath::Repo(rel) => (main.clone(), rel, "the repository"),
            CachePath::Home(rel) => match &home {
                Some(h) => (h.clone(), rel, "your home folder"),
                None => {
                    notes.push(format!("[worktree] cache {entry}: no home folder here"));
                    continue;
                }
            },
        };
        let path = base.join(rel);
        if std::fs::symlink_metadata(&path).is_err() {
            notes.push(format!(
                "[worktree] cache {entry}: {} does not exist yet: checkouts start without it (build once in the main checkout)",
                path.display()
            ));
            continue;
        }
        let real = path.canonicalize().map_err(io(&path))?;
        if !real.starts_with(&base) || real == base {
            return Err(WarmError::Escapes {
                key: "cache",
                entry: entry.to_string(),
                inside,
                target: real,
            });
        }
        if !real.is_dir() {
            notes.push(format!(
                "[worktree] cache {entry}: {} is not a folder: ignored",
                path.display()
            ));
            continue;
        }
        found.push(Source {
            entry: entry.clone(),
            from: real,
        });
    }
    Ok((found, notes))
}

fn real_home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute() && h != Path::new("/"))
        .map(|h| canonical(&h))
}

/// Whether `checkout` is one git-orch made (an attempt's worktree, a
/// scratch checkout), not the main checkout itself (where a lead agent
/// runs), which is never given its own files again.
fn is_fresh(checkout: &Path, main: &Path) -> bool {
    checkout != main && !main.starts_with(checkout)
}

/// Gives a checkout git-orch just made what `[worktree]` asks: the
/// included files, and, unless the caches are overlays mounted per
/// command, copies of the caches. Returns notes for people (a missing
/// folder, a file not ignored). Nothing happens without a main checkout.
pub fn prepare_checkout(
    w: &WorktreeSettings,
    confined: bool,
    common: &Path,
    checkout: &Path,
) -> Result<Vec<String>, WarmError> {
    let Some(main) = main_checkout(common) else {
        return Ok(Vec::new());
    };
    let checkout = canonical(checkout);
    if w.is_empty() || !is_fresh(&checkout, &main) {
        return Ok(Vec::new());
    }
    // Checked whatever the method: a cache that links out is refused
    // before anything runs in the checkout.
    let (found, missing) = sources(w, &main)?;
    let mut notes = copy_includes(&w.include, &main, &checkout)?;
    notes.extend(missing);
    if method(w, confined) != Method::Overlay {
        for s in found {
            // Home caches are used in place without an overlay: a copy
            // per checkout of a home folder would not be found there.
            let CachePath::Repo(rel) = &s.entry else {
                continue;
            };
            let dest = safe_dir(&checkout, rel, false)?;
            copy_tree(&s.from, &dest.path)?;
        }
    }
    Ok(notes)
}

/// Copies the ignored files of the main checkout that `include` names
/// into `checkout`, where it has no file of that name yet.
fn copy_includes(
    include: &[String],
    main: &Path,
    checkout: &Path,
) -> Result<Vec<String>, WarmError> {
    if include.is_empty() {
        return Ok(Vec::new());
    }
    let mut notes = Vec::new();
    let matcher = include_matcher(include);
    let mut candidates: Vec<String> = Vec::new();
    let mut seen = 0usize;
    for glob in include {
        // Walk only below the glob's literal folder.
        let literal: Vec<&str> = glob
            .split('/')
            .take_while(|p| !p.contains(['*', '?', '[', '{']))
            .collect();
        let start = if literal.len() == glob.split('/').count() {
            // A plain path: itself.
            let p = main.join(glob);
            if std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_file()) {
                candidates.push(glob.clone());
            }
            continue;
        } else {
            literal.join("/")
        };
        let mut stack = vec![start];
        while let Some(rel) = stack.pop() {
            let dir = main.join(&rel);
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                seen += 1;
                if seen > INCLUDE_WALK_LIMIT {
                    notes.push(format!(
                        "[worktree] include: more than {INCLUDE_WALK_LIMIT} files looked at; name the files more precisely"
                    ));
                    break;
                }
                let name = e.file_name().to_string_lossy().into_owned();
                let child = if rel.is_empty() {
                    name.clone()
                } else {
                    format!("{rel}/{name}")
                };
                let Ok(t) = e.file_type() else { continue };
                if t.is_dir() && name != ".git" {
                    stack.push(child);
                } else if t.is_file() && matcher.is_match(&child) {
                    candidates.push(child);
                }
            }
        }
    }
    candidates.sort();
    candidates.dedup();
    if candidates.is_empty() {
        return Ok(notes);
    }
    let ignored = ignored_in(main, &candidates);
    let mut budget = INCLUDE_LIMIT;
    for rel in candidates {
        if !ignored.contains(&rel) {
            notes.push(format!(
                "[worktree] include {rel}: not ignored by git in the main checkout, so not copied (it would be committed); add it to .gitignore"
            ));
            continue;
        }
        let from = main.join(&rel);
        // A folder on the way that links out is not the repository's.
        if !from
            .parent()
            .and_then(|p| p.canonicalize().ok())
            .is_some_and(|p| p.starts_with(main))
        {
            continue;
        }
        let Ok(meta) = std::fs::symlink_metadata(&from) else {
            continue;
        };
        if !meta.is_file() || meta.len() > budget {
            continue;
        }
        let (parent, name) = match rel.rsplit_once('/') {
            Some((p, n)) => (Some(p), n),
            None => (None, rel.as_str()),
        };
        let dir = match parent {
            Some(p) => safe_dir(checkout, p, false)?.path,
            None => checkout.to_owned(),
        };
        let to = dir.join(name);
        if std::fs::symlink_metadata(&to).is_ok() {
            continue; // the commit's own file, never overwritten
        }
        std::fs::copy(&from, &to).map_err(io(&to))?;
        budget -= meta.len();
    }
    Ok(notes)
}

/// The matcher of `[worktree] include` globs (checked when read).
pub fn include_matcher(include: &[String]) -> globset::GlobSet {
    let mut b = globset::GlobSetBuilder::new();
    for g in include {
        if let Ok(glob) = globset::GlobBuilder::new(g).literal_separator(true).build() {
            b.add(glob);
        }
    }
    b.build().unwrap_or_else(|_| globset::GlobSet::empty())
}

/// The paths of `candidates` that git ignores in the main checkout.
fn ignored_in(main: &Path, candidates: &[String]) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "-C".into(),
        main.to_string_lossy().into_owned(),
        "check-ignore".into(),
        "--".into(),
    ];
    args.extend(candidates.iter().cloned());
    let env: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| !matches!(k.as_str(), "GIT_DIR" | "GIT_WORK_TREE" | "GIT_INDEX_FILE"))
        .collect();
    match crate::process::capture("git", &args, &env, Duration::from_secs(30)) {
        Some((Some(0), out)) => out
            .lines()
            .filter(|l| candidates.iter().any(|c| c == l))
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

/// A folder of a checkout, made if missing, reached without following a
/// link: an agent may have put one where the folder should be.
pub struct SafeDir {
    pub path: PathBuf,
    /// Open on the folder itself (`O_PATH`): mount on `/proc/self/fd/N`.
    pub fd: Option<std::os::fd::OwnedFd>,
}

/// `base/rel` as a [`SafeDir`]; `keep_open` keeps a handle for mounting.
pub fn safe_dir(base: &Path, rel: &str, keep_open: bool) -> Result<SafeDir, WarmError> {
    use std::os::fd::{FromRawFd, OwnedFd};
    let c = |p: &Path| {
        CString::new(p.as_os_str().as_encoded_bytes())
            .map_err(|_| WarmError::NotAFolder { path: p.to_owned() })
    };
    let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: a valid C string and flags; the result is checked.
    let fd = unsafe { libc::open(c(base)?.as_ptr(), flags) };
    if fd < 0 {
        return Err(io(base)(std::io::Error::last_os_error()));
    }
    // SAFETY: fd was just opened and is owned here.
    let mut dir = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut path = base.to_owned();
    for part in rel.split('/').filter(|p| !p.is_empty() && *p != ".") {
        path.push(part);
        if part == ".." {
            return Err(WarmError::NotAFolder { path });
        }
        let name = c(Path::new(part))?;
        use std::os::fd::AsRawFd;
        // SAFETY: a valid directory fd and C string.
        let made = unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), 0o755) };
        if made != 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::AlreadyExists {
                return Err(io(&path)(e));
            }
        }
        // SAFETY: as above.
        let next = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags) };
        if next < 0 {
            return Err(WarmError::NotAFolder { path });
        }
        // SAFETY: just opened, owned here.
        dir = unsafe { OwnedFd::from_raw_fd(next) };
    }
    Ok(SafeDir {
        path,
        fd: keep_open.then_some(dir),
    })
}

/// Copies the folder `from` into `to` (made), file by file: a reflink
/// where the filesystem shares blocks, else a plain copy. Links are
/// copied as links; what is there already stays.
pub fn copy_tree(from: &Path, to: &Path) -> Result<(), WarmError> {
    std::fs::create_dir_all(to).map_err(io(to))?;
    let mut stack = vec![(from.to_owned(), to.to_owned())];
    while let Some((src, dst)) = stack.pop() {
        for e in std::fs::read_dir(&src).map_err(io(&src))?.flatten() {
            let (s, d) = (e.path(), dst.join(e.file_name()));
            let Ok(t) = e.file_type() else { continue };
            if std::fs::symlink_metadata(&d).is_ok() && !t.is_dir() {
                continue;
            }
            if t.is_dir() {
                match std::fs::create_dir(&d) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(io(&d)(e)),
                }
                stack.push((s, d));
            } else if t.is_symlink() {
                if let Ok(target) = std::fs::read_link(&s) {
                    let _ = std::os::unix::fs::symlink(target, &d);
                }
            } else if t.is_file() {
                copy_file(&s, &d)?;
            }
        }
    }
    Ok(())
}

/// One file: `FICLONE` first, a copy when the filesystem cannot.
fn copy_file(from: &Path, to: &Path) -> Result<(), WarmError> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::PermissionsExt;
    let src = std::fs::File::open(from).map_err(io(from))?;
    let meta = src.metadata().map_err(io(from))?;
    let dst = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(to)
        .map_err(io(to))?;
    // SAFETY: two open files; FICLONE takes the source's descriptor.
    let cloned = unsafe { libc::ioctl(dst.as_raw_fd(), libc::FICLONE, src.as_raw_fd()) } == 0;
    if !cloned {
        let mut src = src;
        let mut dst = &dst;
        std::io::copy(&mut src, &mut dst).map_err(io(to))?;
    }
    let _ = dst.set_permissions(std::fs::Permissions::from_mode(
        meta.permissions().mode() & 0o7777,
    ));
    // Keep the times: builds compare them.
    if let Ok(m) = meta.modified() {
        let _ = dst.set_modified(m);
    }
    Ok(())
}

/// Whether files can be reflinked in `.git/orch`'s filesystem here
/// (asked of the temporary folder once: where the worktrees usually are
/// too; a copy that cannot reflink falls back per file anyway).
fn reflink_works() -> bool {
    static WORKS: OnceLock<bool> = OnceLock::new();
    *WORKS.get_or_init(|| {
        let Ok(dir) = tempfile::Builder::new()
            .prefix("git-orch-reflink-")
            .tempdir()
        else {
            return false;
        };
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        if std::fs::write(&a, b"x").is_err() {
            return false;
        }
        use std::os::fd::AsRawFd;
        let (Ok(src), Ok(dst)) = (std::fs::File::open(&a), std::fs::File::create(&b)) else {
            return false;
        };
        // SAFETY: two open files.
        unsafe { libc::ioctl(dst.as_raw_fd(), libc::FICLONE, src.as_raw_fd()) == 0 }
    })
}

/// One overlay to mount: a cache's lower layer, the checkout's upper
/// layer and overlayfs's work folder beside it, at `dest`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlay {
    pub lower: PathBuf,
    pub upper: PathBuf,
    pub work: PathBuf,
    /// Where the command sees it: a checkout's folder, or its home's.
    pub base: PathBuf,
    pub rel: String,
}

impl Overlay {
    /// As `warm-mount` arguments.
    fn args(&self) -> Vec<String> {
        vec![
            "--overlay".into(),
            self.lower.to_string_lossy().into_owned(),
            self.upper.to_string_lossy().into_owned(),
            self.work.to_string_lossy().into_owned(),
            self.base.to_string_lossy().into_owned(),
            self.rel.clone(),
        ]
    }
}

/// The overlays a command confined in bubblewrap in `checkout` gets,
/// their layers made: home caches at their real place in `home` (the
/// sandbox binds them there, writable, over its hidden home), since
/// tools key their caches on absolute paths. Empty unless the caches are
/// overlays here.
pub fn overlays(
    w: &WorktreeSettings,
    common: &Path,
    checkout: &Path,
    home: Option<&Path>,
) -> Result<Vec<Overlay>, WarmError> {
    if w.cache.is_empty() || method(w, true) != Method::Overlay {
        return Ok(Vec::new());
    }
    let Some(main) = main_checkout(common) else {
        return Ok(Vec::new());
    };
    let checkout = canonical(checkout);
    if !is_fresh(&checkout, &main) {
        return Ok(Vec::new());
    }
    let layers = crate::store::scratch::warm_layers(common, &checkout);
    let (found, _) = sources(w, &main)?;
    if !found.is_empty() {
        crate::store::scratch::own_warm_layers(&layers, &checkout).map_err(io(&layers))?;
    }
    let mut out = Vec::new();
    for (i, s) in found.into_iter().enumerate() {
        let (base, rel, tag) = match &s.entry {
            CachePath::Repo(rel) => (checkout.clone(), rel.clone(), "repo"),
            CachePath::Home(rel) => match home {
                Some(h) => (canonical(h), rel.clone(), "home"),
                None => continue,
            },
        };
        let slug: String = rel
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let dir = layers.join(format!("{i}-{tag}-{slug}"));
        let (upper, work) = (dir.join("upper"), dir.join("work"));
        for d in [&upper, &work] {
            std::fs::create_dir_all(d).map_err(io(d))?;
        }
        for p in [&s.from, &upper, &work, &base] {
            if p.to_string_lossy().contains([',', ':', '\\']) {
                return Err(WarmError::Unmountable { path: p.clone() });
            }
        }
        if rel.contains([',', ':', '\\']) {
            return Err(WarmError::Unmountable {
                path: base.join(&rel),
            });
        }
        out.push(Overlay {
            lower: s.from,
            upper,
            work,
            base,
            rel,
        });
    }
    Ok(out)
}

/// `program args` wrapped to start with `overlays` mounted:
/// `git-orch warm-mount --overlay … -- program args`. Unchanged without
/// overlays.
pub fn wrap_command(
    program: String,
    args: Vec<String>,
    overlays: &[Overlay],
) -> (String, Vec<String>) {
    let Some(exe) = crate::process::this_program().filter(|_| !overlays.is_empty()) else {
        return (program, args);
    };
    let mut out = vec!["warm-mount".to_owned()];
    for o in overlays {
        out.extend(o.args());
    }
    out.push("--".into());
    out.push(program);
    out.extend(args);
    (exe.to_string_lossy().into_owned(), out)
}

/// Why overlays cannot be mounted for commands here, or a mount failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OverlayError {
    #[error("overlays need Linux")]
    NotLinux,
    #[error("git-orch's own program is unknown here")]
    NoProgram,
    #[error("the overlay probe could not start")]
    ProbeNotStarted,
    /// The last line the probe (`git-orch warm-mount --probe`) printed.
    #[error("{0}")]
    ProbeSaid(String),
    /// A step on the way failed, in the system's words.
    #[error("{step}: {why}")]
    System { step: String, why: String },
    #[error("an overlay mounted here does not keep writes apart")]
    WritesNotApart,
    #[error("unexpected argument {0:?}")]
    UnexpectedArgument(String),
    #[error("no command after --")]
    NoCommand,
}

impl OverlayError {
    fn system(step: &str, why: impl std::fmt::Display) -> Self {
        OverlayError::System {
            step: step.to_owned(),
            why: why.to_string(),
        }
    }
}

/// Whether overlays can be mounted for commands here: asked once, of
/// `git-orch warm-mount --probe`.
pub fn overlay_probe() -> Result<(), OverlayError> {
    static RESULT: OnceLock<Result<(), OverlayError>> = OnceLock::new();
    RESULT
        .get_or_init(|| {
            if !cfg!(target_os = "linux") {
                return Err(OverlayError::NotLinux);
            }
            let Some(exe) = crate::process::this_program() else {
                return Err(OverlayError::NoProgram);
            };
            let env: Vec<(String, String)> = std::env::vars()
                .filter(|(k, _)| k == "PATH" || k == "TMPDIR")
                .collect();
            match crate::process::capture(
                &exe.to_string_lossy(),
                &["warm-mount".into(), "--probe".into()],
                &env,
                Duration::from_secs(20),
            ) {
                Some((Some(0), _)) => Ok(()),
                Some((_, out)) => Err(OverlayError::ProbeSaid(
                    out.trim()
                        .lines()
                        .last()
                        .unwrap_or("the overlay probe failed")
                        .trim_start_matches("error: ")
                        .to_owned(),
                )),
                None => Err(OverlayError::ProbeNotStarted),
            }
        })
        .clone()
}

/// Enters a mount namespace of this process's own (inside a user
/// namespace mapping only this user, unless root) and mounts `overlays`
/// there. Only for a process that is about to become the confined
/// command (`git-orch warm-mount`), single-threaded: nothing else sees
/// the mounts, and they go with it.
pub fn enter(overlays: &[Overlay]) -> Result<(), OverlayError> {
    let os = |what: &str| OverlayError::system(what, std::io::Error::last_os_error());
    // SAFETY: plain system calls with checked results; the process is
    // single-threaded (a user namespace requires it).
    unsafe {
        let (uid, gid) = (libc::geteuid(), libc::getegid());
        let root = uid == 0;
        let flags = if root {
            libc::CLONE_NEWNS
        } else {
            libc::CLONE_NEWNS | libc::CLONE_NEWUSER
        };
        if libc::unshare(flags) != 0 {
            return Err(os("a mount namespace could not be made"));
        }
        if !root {
            let write = |file: &str, text: String| {
                std::fs::write(file, text)
                    .map_err(|e| OverlayError::system(&format!("writing {file}"), e))
            };
            write("/proc/self/setgroups", "deny".into())?;
            write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
            write("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
        }
        let slash = CString::new("/").expect("no NUL");
        if libc::mount(
            std::ptr::null(),
            slash.as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) != 0
        {
            return Err(os("the mount namespace could not be made private"));
        }
        for o in overlays {
            let dest = safe_dir(&o.base, &o.rel, true)
                .map_err(|e| OverlayError::system("the overlay's folder", e))?;
            use std::os::fd::AsRawFd;
            let fd = dest.fd.as_ref().expect("kept open").as_raw_fd();
            let target = CString::new(format!("/proc/self/fd/{fd}")).expect("no NUL");
            let mut options = format!(
                "lowerdir={},upperdir={},workdir={}",
                o.lower.display(),
                o.upper.display(),
                o.work.display()
            );
            if !root {
                options.push_str(",userxattr");
            }
            let fstype = CString::new("overlay").expect("no NUL");
            let mount = |options: &str| -> Result<bool, OverlayError> {
                let options = CString::new(options).map_err(|_| {
                    OverlayError::system("the overlay's options", "a path holds NUL")
                })?;
                Ok(libc::mount(
                    fstype.as_ptr(),
                    target.as_ptr(),
                    fstype.as_ptr(),
                    0,
                    options.as_ptr().cast(),
                ) == 0)
            };
            // As root, a file a build only relinks or re-stamps (rustc's
            // incremental session, cargo's hard links) is copied up as
            // metadata, not data: a third faster, and two fifths of the
            // layer. Not offered in a user namespace; older kernels may
            // lack it.
            let fast = root && mount(&format!("{options},metacopy=on"))?;
            if !fast && !mount(&options)? {
                return Err(os(&format!(
                    "the overlay of {} could not be mounted at {}",
                    o.lower.display(),
                    dest.path.display()
                )));
            }
        }
    }
    Ok(())
}

/// What `git-orch warm-mount --probe` does: mounts an overlay in a
/// namespace of its own over a folder of a temporary one, writes through
/// it, and checks the write went to the upper layer only.
pub fn probe_here() -> Result<(), OverlayError> {
    let dir = tempfile::Builder::new()
        .prefix("git-orch-overlay-probe-")
        .tempdir()
        .map_err(|e| OverlayError::system("a temporary folder", e))?;
    let root = canonical(dir.path());
    let o = Overlay {
        lower: root.join("lower"),
        upper: root.join("upper"),
        work: root.join("work"),
        base: root.clone(),
        rel: "dest".into(),
    };
    for d in [&o.lower, &o.upper, &o.work] {
        std::fs::create_dir_all(d).map_err(|e| OverlayError::system("the probe's folders", e))?;
    }
    std::fs::write(o.lower.join("seen"), "x")
        .map_err(|e| OverlayError::system("the probe's file", e))?;
    enter(std::slice::from_ref(&o))?;
    let dest = root.join("dest");
    let works = std::fs::read(dest.join("seen")).is_ok()
        && std::fs::write(dest.join("written"), "y").is_ok()
        && o.upper.join("written").is_file()
        && !o.lower.join("written").exists();
    // SAFETY: unmounting what this process mounted.
    if let Ok(c) = CString::new(dest.as_os_str().as_encoded_bytes()) {
        unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
    }
    crate::store::scratch::remove_layers_dir(&root);
    if works {
        Ok(())
    } else {
        Err(OverlayError::WritesNotApart)
    }
}

/// `git-orch warm-mount`'s arguments: `--overlay LOWER UPPER WORK BASE
/// REL`… `-- PROGRAM ARGS…`.
pub fn parse_args(args: &[OsString]) -> Result<(Vec<Overlay>, Vec<OsString>), OverlayError> {
    let mut overlays = Vec::new();
    let mut i = 0;
    while i < args.len() {
        if args[i] == "--" {
            return Ok((overlays, args[i + 1..].to_vec()));
        }
        if args[i] != "--overlay" || i + 5 >= args.len() {
            return Err(OverlayError::UnexpectedArgument(
                args[i].to_string_lossy().into_owned(),
            ));
        }
        let p = |k: usize| PathBuf::from(&args[i + k]);
        overlays.push(Overlay {
            lower: p(1),
            upper: p(2),
            work: p(3),
            base: p(4),
            rel: args[i + 5].to_string_lossy().into_owned(),
        });
        i += 6;
    }
    Err(OverlayError::NoCommand)
}

fn canonical(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| p.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_where_a_folder_should_be_is_not_followed() {
        let root = tempfile::tempdir().expect("tmp");
        let root = root.path().canonicalize().expect("canonical");
        let outside = root.join("outside");
        std::fs::create_dir_all(&outside).expect("mkdir");
        let checkout = root.join("checkout");
        std::fs::create_dir_all(&checkout).expect("mkdir");
        std::os::unix::fs::symlink(&outside, checkout.join("target")).expect("link");
        assert!(matches!(
            safe_dir(&checkout, "target/debug", false),
            Err(WarmError::NotAFolder { .. })
        ));
        assert!(!outside.join("debug").exists());
        let made = safe_dir(&checkout, "node_modules/.cache", true).expect("made");
        assert!(made.path.is_dir() && made.fd.is_some());
    }

    #[test]
    fn copies_keep_contents_modes_and_links() {
        let root = tempfile::tempdir().expect("tmp");
        let from = root.path().join("from");
        std::fs::create_dir_all(from.join("debug/deps")).expect("mkdir");
        std::fs::write(from.join("debug/deps/libx.rlib"), "rlib").expect("w");
        std::os::unix::fs::symlink("deps/libx.rlib", from.join("debug/link")).expect("link");
        let to = root.path().join("to");
        copy_tree(&from, &to).expect("copied");
        assert_eq!(
            std::fs::read_to_string(to.join("debug/deps/libx.rlib")).expect("r"),
            "rlib"
        );
        assert_eq!(
            std::fs::read_link(to.join("debug/link")).expect("link"),
            Path::new("deps/libx.rlib")
        );
    }

    #[test]
    fn warm_mount_arguments_round_trip() {
        let o = Overlay {
            lower: "/r/target".into(),
            upper: "/r/.git/orch/warm/k/0/upper".into(),
            work: "/r/.git/orch/warm/k/0/work".into(),
            base: "/w".into(),
            rel: "target".into(),
        };
        let mut args: Vec<OsString> = o.args().into_iter().map(OsString::from).collect();
        args.extend(["--", "cargo", "build"].map(OsString::from));
        let (parsed, command) = parse_args(&args).expect("parses");
        assert_eq!(parsed, [o]);
        assert_eq!(command, ["cargo", "build"].map(OsString::from));
        assert!(parse_args(&["--overlay".into()]).is_err());
    }
}
