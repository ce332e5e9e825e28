//! Confinement of agents, setup commands and command gates: an
//! allow-listed environment always, and a bubblewrap sandbox per command
//! where it works.
//!
//! Inside the sandbox (`bwrap`, Linux) the whole filesystem is read-only
//! except the attempt's worktree and exactly the parts of the repository's
//! git directory that committing there needs (the object store, the
//! worktree's own git folder, the attempt branch's ref and log folders);
//! `/tmp` and the home folder are private (the home folder holds copies of
//! the agent's own login and settings files, and the toolchains installed
//! under it stay visible read-only); what the command must run is shown
//! read-only wherever it lives, `/tmp` included (its program, the
//! interpreter of a script, git-orch itself: [`exposure`]); the runtime
//! folders holding agent sockets (`/run`, `$XDG_RUNTIME_DIR`) are hidden,
//! and so is `$SSH_AUTH_SOCK` itself, but not the rest of its folder; the
//! command gets a PID namespace of its own, dies with its parent and keeps
//! no capabilities, even as root. The network stays on unless `[sandbox]
//! network = false`: agents need their API. `[sandbox] bind` and `roBind`
//! are checked before any command starts ([`binds`]).
//!
//! `[orch] sandbox = auto` (the default) uses bwrap where a probe shows it
//! works and otherwise runs unconfined, saying why once per run; `bwrap`
//! refuses to run without it; `none` never uses it. `GIT_ORCH_SANDBOX`
//! overrides the setting for one command. Whatever the mode, commands get
//! only the allow-listed environment (`agent::environment`).
//!
//! This module builds command lines and prepares folders; starting them is
//! `process`'s job.

pub mod binds;
pub mod command_line;
pub mod exposure;
pub mod in_place;
pub mod warm;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use crate::agent::environment;
use crate::config::{SandboxMode, SandboxSettings};
use crate::process::GroupSpec;

/// The environment variable that overrides `[orch] sandbox` for one
/// command (for example on a CI machine where namespaces are blocked).
pub const SANDBOX_ENV: &str = "GIT_ORCH_SANDBOX";

/// The environment variable naming more variables (`NAME` or `PREFIX_*`,
/// separated by spaces or commas) that agents and gates get, for one
/// command, on top of the configuration's.
pub const PASS_ENV: &str = "GIT_ORCH_PASS_ENV";

/// Most bytes copied into one private home folder: login and settings
/// files are small, and a huge folder named by `homeFile` should not fill
/// the disk once per attempt.
const HOME_COPY_LIMIT: u64 = 64 * 1024 * 1024;

/// Why a command cannot be confined as asked.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// `sandbox = bwrap`, but bubblewrap does not work here.
    #[error("{origin} asks for the bubblewrap sandbox, but it does not work here: {why}")]
    Unavailable { origin: String, why: Unconfinable },
    /// `GIT_ORCH_SANDBOX` holds something else than a mode.
    #[error("{SANDBOX_ENV}={value:?} is not a sandbox mode; use auto, bwrap or none")]
    BadOverride { value: String },
    /// A `[sandbox] bind` or `roBind` that cannot work, or would undo what
    /// the sandbox hides.
    #[error(transparent)]
    BadBind(#[from] binds::BindError),
    /// `[worktree]` cannot be given to the command as configured.
    #[error(transparent)]
    Warm(#[from] warm::WarmError),
    /// A folder of the sandbox could not be prepared.
    #[error("preparing the sandbox at {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl SandboxError {
    /// What makes the sandbox work as set: the fix a preflight finding
    /// shows, and the CLI's hint.
    pub fn fix(&self) -> Option<String> {
        match self {
            SandboxError::Unavailable { .. } => Some(
                "install bubblewrap (Debian, Ubuntu: apt-get install bubblewrap) and allow user namespaces, or set `sandbox = auto` (runs unconfined, with a warning) or `sandbox = none` in the [orch] section of .orch/config"
                    .to_owned(),
            ),
            SandboxError::BadBind(b) => Some(b.fix.clone()),
            SandboxError::BadOverride { .. } | SandboxError::Warm(_) | SandboxError::Io { .. } => None,
        }
    }
}

/// Why bubblewrap cannot make a sandbox here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unconfinable {
    #[error("bwrap is not installed (not found on PATH)")]
    NotInstalled,
    #[error("bwrap could not be started")]
    NotStarted,
    #[error("bwrap exited {0}")]
    Exited(i32),
    #[error("bwrap did not finish")]
    Unfinished,
    /// The last line bwrap printed, e.g. that user namespaces are off.
    #[error("{0}")]
    Said(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SandboxError + '_ {
    move |source| SandboxError::Io {
        path: path.to_owned(),
        source,
    }
}

/// How commands are confined in a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Each command in its own bubblewrap sandbox.
    Bwrap,
    /// No sandbox: only the environment is allow-listed.
    None,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Bwrap => "bwrap",
            Kind::None => "none",
        }
    }
}

/// The sandbox in force: what was asked, what works, and the options.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Sandbox {
    pub kind: Kind,
    /// The mode asked for (config, or `GIT_ORCH_SANDBOX`).
    pub requested: &'static str,
    /// Why `auto` runs without a sandbox here.
    pub fallback: Option<String>,
    pub network: bool,
    pub pass_env: Vec<String>,
    pub bind: Vec<PathBuf>,
    pub ro_bind: Vec<PathBuf>,
    /// `[worktree]`: local files and warm caches ([`warm`]).
    #[serde(skip)]
    pub warm: crate::config::WorktreeSettings,
}

/// The arguments of the probe: the same isolation the real commands get.
fn isolation_args() -> Vec<String> {
    [
        "--die-with-parent",
        "--new-session",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--cap-drop",
        "ALL",
    ]
    .map(String::from)
    .to_vec()
}

/// Whether bubblewrap can make a sandbox here; the reason if not. Asked
/// once per process.
pub fn probe() -> Result<(), Unconfinable> {
    static RESULT: OnceLock<Result<(), Unconfinable>> = OnceLock::new();
    RESULT
        .get_or_init(|| {
            if !crate::process::on_path("bwrap") {
                return Err(Unconfinable::NotInstalled);
            }
            let mut args = isolation_args();
            args.extend(
                [
                    "--ro-bind",
                    "/",
                    "/",
                    "--dev",
                    "/dev",
                    "--proc",
                    "/proc",
                    "--tmpfs",
                    "/tmp",
                    "--",
                    "true",
                ]
                .map(String::from),
            );
            let env: Vec<(String, String)> = std::env::var("PATH")
                .map(|p| vec![("PATH".to_owned(), p)])
                .unwrap_or_default();
            match crate::process::capture("bwrap", &args, &env, Duration::from_secs(20)) {
                None => Err(Unconfinable::NotStarted),
                Some((Some(0), _)) => Ok(()),
                Some((code, out)) => {
                    let why = out
                        .trim()
                        .lines()
                        .last()
                        .unwrap_or("")
                        .trim()
                        .trim_end_matches('.')
                        .to_owned();
                    Err(match (code, why.is_empty()) {
                        (Some(c), true) => Unconfinable::Exited(c),
                        (None, true) => Unconfinable::Unfinished,
                        (_, false) => Unconfinable::Said(why),
                    })
                }
            }
        })
        .clone()
}

/// The sandbox `settings` (with `GIT_ORCH_SANDBOX` on top) amount to here.
pub fn resolve(settings: &SandboxSettings) -> Result<Sandbox, SandboxError> {
    let (mode, origin) = match std::env::var(SANDBOX_ENV) {
        Ok(v) if !v.trim().is_empty() => (
            SandboxMode::parse(&v).ok_or(SandboxError::BadOverride { value: v })?,
            SANDBOX_ENV.to_owned(),
        ),
        _ => (
            settings.mode,
            "`sandbox = bwrap` in .orch/config".to_owned(),
        ),
    };
    let (kind, fallback) = match mode {
        SandboxMode::None => (Kind::None, None),
        SandboxMode::Bwrap => match probe() {
            Ok(()) => (Kind::Bwrap, None),
            Err(why) => return Err(SandboxError::Unavailable { origin, why }),
        },
        SandboxMode::Auto => {
            if !cfg!(target_os = "linux") {
                (
                    Kind::None,
                    Some("the sandbox uses bubblewrap, which needs Linux".to_owned()),
                )
            } else {
                match probe() {
                    Ok(()) => (Kind::Bwrap, None),
                    Err(why) => (Kind::None, Some(why.to_string())),
                }
            }
        }
    };
    Ok(Sandbox {
        kind,
        requested: mode.as_str(),
        fallback,
        network: settings.network,
        pass_env: settings.pass_env.clone(),
        bind: settings.bind.clone(),
        ro_bind: settings.ro_bind.clone(),
        warm: settings.worktree.clone(),
    })
}

/// The variable patterns an agent of `spec` may see: its kind's and its
/// section's `passEnv`.
pub fn agent_pass_env(spec: &crate::agent::AgentSpec) -> Vec<String> {
    spec.kind
        .env_patterns()
        .iter()
        .map(|p| (*p).to_owned())
        .chain(spec.pass_env.iter().cloned())
        .collect()
}

/// Why the sandbox hides `path`, which exists outside it, and how to show
/// it: for a program a preflight found missing inside. `git_dir` is the
/// repository's.
pub fn why_hidden(path: &Path, git_dir: Option<&Path>) -> (String, String) {
    let home = host_env()
        .get("HOME")
        .map(|h| canonical(Path::new(h)))
        .filter(|h| h.is_absolute() && h != Path::new("/"));
    let real = canonical(path);
    let folder = real.parent().unwrap_or(&real).to_owned();
    let show = |shown: String| {
        format!(
            "show it read-only with `roBind = {shown}` in the [sandbox] section of .orch/config, or install it outside (under /usr/local or /opt)"
        )
    };
    if let Some(temp) = exposure::PRIVATE_TEMP
        .iter()
        .find(|t| real.starts_with(t) || path.starts_with(t))
    {
        return (
            format!("{temp} is private to each sandboxed command"),
            show(folder.display().to_string()),
        );
    }
    if let Some(h) = home.as_ref().filter(|h| real.starts_with(h)) {
        let rel = folder.strip_prefix(h).unwrap_or(&folder);
        return (
            "the home folder is hidden (only the toolchains on PATH stay visible)".into(),
            show(format!("~/{}", rel.display())),
        );
    }
    if let Some(g) = git_dir.filter(|g| real.starts_with(canonical(g))) {
        return (
            format!("the repository's git folder {} is hidden", g.display()),
            "keep agent programs outside the repository's git folder".into(),
        );
    }
    let runtime = host_env()
        .get("XDG_RUNTIME_DIR")
        .map(|d| canonical(Path::new(d)));
    if real.starts_with("/run")
        || real.starts_with("/var/run")
        || runtime.is_some_and(|d| real.starts_with(d))
    {
        return (
            "runtime folders (/run, $XDG_RUNTIME_DIR) are hidden: they hold agents' sockets".into(),
            "install it outside (under /usr/local or /opt)".into(),
        );
    }
    (
        "the sandbox hides it".into(),
        show(folder.display().to_string()),
    )
}

/// What an agent of `spec` starts besides its program (`sh` for a
/// command agent): the program and script its command template names.
pub fn agent_programs(spec: &crate::agent::AgentSpec) -> Vec<String> {
    match (&spec.kind, &spec.command) {
        (crate::agent::AgentKind::Command, Some(template)) => command_line::programs(template),
        _ => Vec::new(),
    }
}

/// The home files a sandboxed agent of `spec` gets copies of: its kind's
/// and its section's `homeFile`.
pub fn agent_home_files(spec: &crate::agent::AgentSpec) -> Vec<String> {
    spec.kind
        .home_files()
        .iter()
        .map(|p| (*p).to_owned())
        .chain(spec.home_files.iter().cloned())
        .collect()
}

/// What a confined command may touch besides its worktree.
#[derive(Debug, Clone)]
pub struct Confine<'a> {
    /// Where the command runs, writable (with its own git folder inside).
    pub worktree: &'a Path,
    /// The repository's git directory: hidden, but for its object store,
    /// which the worktree's git folder borrows, shown read-only (`/`: no
    /// repository, nothing to hide).
    pub common_dir: &'a Path,
    /// Files under the hidden git directory the command reads (its prompt
    /// and retry context), shown read-only.
    pub readable: &'a [PathBuf],
    /// More folders the command writes (Aider's history folder).
    pub writable: &'a [PathBuf],
    /// The private home folder ([`PrivateHome`]), filled here.
    pub home: &'a Path,
    /// Home files to copy into it (relative to `$HOME`).
    pub home_files: &'a [String],
    /// Variables (patterns) passed on top of the base allow-list.
    pub pass_env: &'a [String],
    /// The program run (shown wherever it lives, with its interpreter).
    pub program: &'a str,
    /// More programs it starts that must be visible: what a command line
    /// run by `sh -c` names ([`command_line::programs`]).
    pub programs: &'a [String],
    /// Where the command sees its checkout.
    pub view: View,
}

/// Where a confined command sees its checkout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum View {
    /// At its own path (agents, setup commands).
    #[default]
    OwnPath,
    /// At the main checkout's path, when it gets warm caches of the
    /// repository's folders and bubblewrap confines it (gates: see
    /// [`in_place`]); at its own path otherwise.
    MainPath,
}

/// A home folder for one sandboxed command, visible to nothing else: a
/// fresh folder in this user's own private folder of the system's
/// temporary directory (`$TMPDIR/git-orch-<uid>/`, mode 0700), outside
/// the repository, mounted only into that command's sandbox (every
/// sandbox has a `/tmp` of its own, so no other one can see it), and
/// deleted when dropped. Ones a killed git-orch left behind are deleted
/// by the next one made.
#[derive(Debug)]
pub struct PrivateHome {
    dir: PathBuf,
}

impl PrivateHome {
    /// The folder holding this user's private homes.
    pub fn base() -> PathBuf {
        // SAFETY: getuid has no preconditions.
        let uid = unsafe { libc::getuid() };
        std::env::temp_dir().join(format!("git-orch-{uid}"))
    }

    /// A new, empty private home.
    pub fn make() -> Result<PrivateHome, SandboxError> {
        use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
        // SAFETY: getuid has no preconditions.
        let uid = unsafe { libc::getuid() };
        let base = Self::base();
        match std::fs::DirBuilder::new().mode(0o700).create(&base) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io(&base)(e)),
        }
        // Someone else's folder (or a link to one) in a shared /tmp would
        // let them read every home put there.
        let meta = std::fs::symlink_metadata(&base).map_err(io(&base))?;
        if !meta.is_dir() || meta.uid() != uid {
            return Err(SandboxError::Io {
                path: base,
                source: std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    "it is not a folder of this user's; remove it",
                ),
            });
        }
        if meta.permissions().mode() & 0o077 != 0 {
            std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o700))
                .map_err(io(&base))?;
        }
        // Once per process: what a killed git-orch left goes.
        static SWEPT: std::sync::Once = std::sync::Once::new();
        SWEPT.call_once(|| sweep_homes(&base));
        let pid = std::process::id();
        let suffix: String = crate::ids::random_bytes::<6>()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let dir = base.join(format!("{pid}-{suffix}"));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(io(&dir))?;
        Ok(PrivateHome { dir })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for PrivateHome {
    fn drop(&mut self) {
        remove_tree(&self.dir);
    }
}

/// Deletes the homes in `base` whose git-orch process is gone.
fn sweep_homes(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.split('-').next().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        // SAFETY: signal 0 only asks whether the process exists.
        let alive = pid > 0
            && (unsafe { libc::kill(pid, 0) } == 0
                || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM));
        if !alive {
            remove_tree(&e.path());
        }
    }
}

/// Removes a folder a sandboxed command wrote, even one it made
/// unreadable (`chmod 000`): folders are opened up and the removal tried
/// again. Links are removed, never followed.
fn remove_tree(dir: &Path) {
    if std::fs::remove_dir_all(dir).is_ok() || !dir.exists() {
        return;
    }
    fn open_up(dir: &Path) {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                open_up(&e.path());
            }
        }
    }
    open_up(dir);
    let _ = std::fs::remove_dir_all(dir);
}

/// `~/.gitconfig` cut down to the identity: `[user] name` and `email`.
/// What else people keep there (`http.*` tokens, `url.*` rewrites with
/// credentials, `credential.*` helpers, `include`s) never reaches an
/// agent.
fn identity_only(config: &str) -> String {
    let mut in_user = false;
    let mut out = String::new();
    for line in config.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            let header = t.trim_start_matches('[').split(']').next().unwrap_or("");
            in_user = header.trim().eq_ignore_ascii_case("user");
            continue;
        }
        if !in_user {
            continue;
        }
        let Some((key, value)) = t.split_once('=') else {
            continue;
        };
        let key = key.trim().to_ascii_lowercase();
        if key != "name" && key != "email" {
            continue;
        }
        let value = value.trim();
        let value = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or(value);
        if value
            .chars()
            .any(|c| c.is_control() || c == '"' || c == '\\')
        {
            continue;
        }
        out.push_str(&format!("\t{key} = \"{value}\"\n"));
    }
    if out.is_empty() {
        String::new()
    } else {
        format!("[user]\n{out}")
    }
}

/// This process's environment.
fn host_env() -> BTreeMap<String, String> {
    std::env::vars().collect()
}

/// The folder to expose for a tool found at `path` inside the home folder:
/// the parent of its `bin` folder (so `lib/`, `share/` beside it come too),
/// else its own folder.
fn install_root(path: &Path, home: &Path) -> Option<PathBuf> {
    if !path.starts_with(home) || path == home {
        return None;
    }
    let mut dir = if path.is_dir() {
        path.to_owned()
    } else {
        path.parent()?.to_owned()
    };
    for ancestor in dir.clone().ancestors() {
        if ancestor == home {
            break;
        }
        if ancestor
            .file_name()
            .is_some_and(|n| n == "bin" || n == "shims")
        {
            if let Some(parent) = ancestor.parent()
                && parent != home
            {
                dir = parent.to_owned();
            } else {
                dir = ancestor.to_owned();
            }
            break;
        }
    }
    (dir != home).then_some(dir)
}

/// Toolchain folders under `home` that the command needs: every `PATH`
/// entry inside it, and the install folders of the files it needs
/// ([`exposure::needed_files`]: its program, an interpreter, git-orch).
fn toolchain_roots(home: &Path, path: Option<&str>, needed: &[PathBuf]) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = Vec::new();
    let mut add = |p: &Path| {
        for candidate in [Some(p.to_owned()), p.canonicalize().ok()]
            .into_iter()
            .flatten()
        {
            if let Some(root) = install_root(&candidate, home)
                && root.exists()
                && !roots.iter().any(|r| root.starts_with(r))
            {
                roots.retain(|r| !r.starts_with(&root));
                roots.push(root);
            }
        }
    };
    if let Some(path) = path {
        for dir in std::env::split_paths(path).filter(|d| d.is_absolute()) {
            add(&dir);
        }
    }
    for file in needed {
        add(file);
    }
    roots.sort();
    roots
}

/// Copies `from` (a file or folder) to `to`, within `budget` bytes;
/// symlinks are followed once, sockets and devices skipped.
fn copy_into(from: &Path, to: &Path, budget: &mut u64) -> std::io::Result<()> {
    let meta = std::fs::metadata(from)?;
    if meta.is_dir() {
        std::fs::create_dir_all(to)?;
        for entry in std::fs::read_dir(from)? {
            let entry = entry?;
            // One unreadable entry does not spoil the rest.
            let _ = copy_into(&entry.path(), &to.join(entry.file_name()), budget);
        }
        return Ok(());
    }
    if !meta.is_file() || meta.len() > *budget {
        return Ok(());
    }
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::copy(from, to)?;
    *budget -= meta.len();
    Ok(())
}

/// The home files that are git configuration: copied cut down to the
/// identity ([`identity_only`]).
const GIT_CONFIG_FILES: &[&str] = &[".gitconfig", ".config/git/config"];

/// The repository's object store and the stores it borrows from (its
/// `objects/info/alternates`), which a worktree's own git folder reads
/// through its alternate.
fn object_dirs(common: &Path) -> Vec<PathBuf> {
    let objects = common.join("objects");
    let mut dirs = vec![objects.clone()];
    if let Ok(text) = std::fs::read_to_string(objects.join("info/alternates")) {
        for line in text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
        {
            let dir = objects.join(line);
            if dir.is_dir() {
                dirs.push(canonical(&dir));
            }
        }
    }
    dirs
}

/// Warm worktrees (issue 28): gives a checkout git-orch just made (an
/// attempt's worktree, a gate's or the merge queue's scratch checkout)
/// what `[worktree]` asks, for commands confined as `settings` say (see
/// [`warm::prepare_checkout`]). Nothing to do where the sandbox cannot be
/// resolved: the command run there reports that.
pub fn warm_checkout(
    settings: &SandboxSettings,
    common: &Path,
    checkout: &Path,
) -> Result<Vec<String>, warm::WarmError> {
    if settings.worktree.is_empty() {
        return Ok(Vec::new());
    }
    match resolve(settings) {
        Ok(sandbox) => {
            warm::prepare_checkout(&settings.worktree, sandbox.confines(), common, checkout)
        }
        Err(_) => Ok(Vec::new()),
    }
}

/// What a run says once about `[worktree]` ([`warm::notices`]); the
/// sandbox's own notice says why it cannot be resolved, if it cannot.
pub fn warm_notices(settings: &SandboxSettings, common: &Path) -> Vec<String> {
    match resolve(settings) {
        Ok(sandbox) => warm::notices(&settings.worktree, sandbox.confines(), common),
        Err(_) => Vec::new(),
    }
}

/// `OPTION SOURCE DEST` for bwrap.
fn bind(args: &mut Vec<String>, option: &str, source: &Path, dest: &Path) {
    args.push(option.to_owned());
    args.push(source.to_string_lossy().into_owned());
    args.push(dest.to_string_lossy().into_owned());
}

/// `OPTION PATH` for bwrap.
fn flag(args: &mut Vec<String>, option: &str, path: &str) {
    args.push(option.to_owned());
    args.push(path.to_owned());
}

fn canonical(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| p.to_owned())
}

impl Sandbox {
    /// A sandbox that confines nothing but the environment (for callers
    /// with no settings at hand).
    pub fn none() -> Sandbox {
        Sandbox {
            kind: Kind::None,
            requested: "none",
            fallback: None,
            network: true,
            pass_env: Vec::new(),
            bind: Vec::new(),
            ro_bind: Vec::new(),
            warm: Default::default(),
        }
    }

    /// Whether commands run inside bubblewrap.
    pub fn confines(&self) -> bool {
        self.kind == Kind::Bwrap
    }

    /// `[sandbox] roBind` and `bind` checked ([`binds`]) against the
    /// repository whose git folder is `git_dir`: what each command of it
    /// would mount. Nothing to check without bubblewrap, which is the only
    /// thing that reads them.
    pub fn check_binds(&self, git_dir: Option<&Path>) -> Result<Vec<binds::Bind>, SandboxError> {
        if !self.confines() {
            return Ok(Vec::new());
        }
        let home = host_env()
            .get("HOME")
            .map(PathBuf::from)
            .filter(|h| h.is_absolute() && h != Path::new("/"));
        let base = PrivateHome::base();
        Ok(binds::check(
            &self.ro_bind,
            &self.bind,
            &binds::Hidden {
                home: home.as_deref(),
                git_dir,
                private_homes: Some(&base),
            },
        )?)
    }

    /// The permissions an agent gets here (no commands allowed yet).
    pub fn permissions(&self) -> crate::agent::Permissions {
        crate::agent::Permissions {
            sandboxed: self.confines(),
            root: crate::process::is_root(),
            allowed_commands: Vec::new(),
        }
    }

    /// One line for people: what is in force and, for `auto` without a
    /// sandbox, why.
    pub fn describe(&self) -> String {
        match (self.kind, &self.fallback) {
            (Kind::Bwrap, _) => format!(
                "bubblewrap sandbox per attempt (network {})",
                if self.network { "on" } else { "off" }
            ),
            (Kind::None, Some(why)) => format!(
                "no sandbox: {why}; agents run as you, with an allow-listed environment (set `sandbox = none` in [orch] to silence this, see docs/security.md)"
            ),
            (Kind::None, None) => {
                "no sandbox (sandbox = none): agents run as you, with an allow-listed environment"
                    .to_owned()
            }
        }
    }

    /// The warning a run prints once, when `auto` found no sandbox.
    pub fn warning(&self) -> Option<String> {
        self.fallback.as_ref().map(|_| self.describe())
    }

    /// The environment for a command: the variables of this process that
    /// the base list, the `[sandbox] passEnv` list and `pass_env` allow,
    /// then `set` on top (its values win).
    pub fn environment(
        &self,
        pass_env: &[String],
        set: &[(String, String)],
    ) -> Vec<(String, String)> {
        let host = host_env();
        let mut patterns: Vec<&str> = environment::BASE.to_vec();
        patterns.extend(self.pass_env.iter().map(String::as_str));
        patterns.extend(pass_env.iter().map(String::as_str));
        let extra = host.get(PASS_ENV).cloned().unwrap_or_default();
        patterns.extend(
            extra
                .split([' ', ','])
                .map(str::trim)
                .filter(|p| environment::is_pattern(p)),
        );
        let mut env: BTreeMap<String, String> = environment::allowed(
            host.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            &patterns,
        )
        .into_iter()
        .collect();
        for (k, v) in set {
            env.insert(k.clone(), v.clone());
        }
        let mut config: Vec<(String, String)> = Vec::new();
        // An identity given only in the environment is also git's
        // configured one, so a CLI that checks `git config user.name`
        // (Aider, which otherwise writes a placeholder identity into the
        // repository's own config) finds it.
        if let (Some(name), Some(email)) = (env.get("GIT_AUTHOR_NAME"), env.get("GIT_AUTHOR_EMAIL"))
        {
            config.push(("user.name".into(), name.clone()));
            config.push(("user.email".into(), email.clone()));
        }
        if self.confines() {
            env.insert("TMPDIR".into(), "/tmp".into());
            // Housekeeping would write outside what the sandbox opens
            // (packed refs, gc.log); the driver does it instead.
            config.push(("gc.auto".into(), "0".into()));
            config.push(("maintenance.auto".into(), "false".into()));
        }
        if !config.is_empty() {
            let n: usize = env
                .get("GIT_CONFIG_COUNT")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            for (i, (k, v)) in config.iter().enumerate() {
                env.insert(format!("GIT_CONFIG_KEY_{}", n + i), k.clone());
                env.insert(format!("GIT_CONFIG_VALUE_{}", n + i), v.clone());
            }
            env.insert("GIT_CONFIG_COUNT".into(), (n + config.len()).to_string());
        }
        env.into_iter().collect()
    }

    /// `spec` confined: its environment replaced by the allow-listed one
    /// and, with bubblewrap, its command run inside a sandbox that opens
    /// what `confine` says.
    pub fn wrap(&self, mut spec: GroupSpec, confine: &Confine) -> Result<GroupSpec, SandboxError> {
        let env = self.environment(confine.pass_env, &spec.env);
        spec.env_clear = true;
        spec.env_remove.clear();
        if !self.confines() {
            spec.env = env;
            return Ok(spec);
        }
        let env_map: BTreeMap<&str, &str> =
            env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let home = env_map
            .get("HOME")
            .map(PathBuf::from)
            .filter(|h| h.is_absolute() && h != Path::new("/"));
        let mut args = isolation_args();
        if !self.network {
            args.push("--unshare-net".into());
        }
        bind(&mut args, "--ro-bind", Path::new("/"), Path::new("/"));
        flag(&mut args, "--dev", "/dev");
        flag(&mut args, "--proc", "/proc");
        flag(&mut args, "--tmpfs", "/tmp");
        if Path::new("/var/tmp").is_dir() {
            flag(&mut args, "--tmpfs", "/var/tmp");
        }
        // Sockets (ssh-agent, gpg-agent, D-Bus, docker.sock) live under
        // /run; a read-only mount would not stop a connect. The resolver's
        // configuration may live there too (systemd-resolved) and comes
        // back, read-only.
        for run in ["/run", "/var/run"] {
            let is_dir = std::fs::symlink_metadata(run).is_ok_and(|m| m.is_dir());
            if is_dir {
                flag(&mut args, "--tmpfs", run);
            }
        }
        for file in ["/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf"] {
            let real = canonical(Path::new(file));
            if real.is_file() && (real.starts_with("/run") || real.starts_with("/var/run")) {
                bind(&mut args, "--ro-bind", &real, &real);
            }
        }
        let host = host_env();
        // A runtime folder holds nothing but sockets and their like: all
        // of it goes. The SSH agent's socket may sit beside anything (a
        // project's folder), so only the socket itself is hidden, last.
        let runtime_dir = host
            .get("XDG_RUNTIME_DIR")
            .map(|d| canonical(Path::new(d)))
            .filter(|d| d.is_dir() && d.is_absolute() && d != Path::new("/"));
        if let Some(dir) = runtime_dir.as_ref().filter(|d| {
            !exposure::in_private_temp(d) && !d.starts_with("/run") && !d.starts_with("/var/run")
        }) {
            flag(&mut args, "--tmpfs", &dir.to_string_lossy());
        }
        let ssh_socket = host
            .get("SSH_AUTH_SOCK")
            .map(|s| canonical(Path::new(s)))
            .filter(|s| {
                use std::os::unix::fs::FileTypeExt;
                s.is_absolute()
                    && std::fs::symlink_metadata(s).is_ok_and(|m| m.file_type().is_socket())
            });
        // The real home folder is hidden behind an empty read-only one, with
        // the toolchains installed under it visible again; HOME points at
        // a private folder holding copies of the agent's own files.
        let private_home = canonical(confine.home);
        let real_home = home.as_ref().map(|h| canonical(h));
        if let Some(real) = &real_home {
            let mut budget = HOME_COPY_LIMIT;
            let mut files: Vec<&str> = environment::BASE_HOME_FILES.to_vec();
            files.extend(confine.home_files.iter().map(String::as_str));
            for rel in files {
                let from = real.join(rel);
                let to = private_home.join(rel);
                if !from.exists() || to.exists() {
                    continue;
                }
                if GIT_CONFIG_FILES.contains(&rel) {
                    if let Ok(text) = std::fs::read_to_string(&from) {
                        let _ = to.parent().map(std::fs::create_dir_all);
                        let _ = std::fs::write(&to, identity_only(&text));
                    }
                } else {
                    let _ = copy_into(&from, &to, &mut budget);
                }
            }
        }
        let common = canonical(confine.common_dir);
        let worktree = canonical(confine.worktree);
        let main_checkout = (common.file_name().is_some_and(|n| n == ".git"))
            .then(|| common.parent().map(Path::to_owned))
            .flatten();
        let worktree_root = worktree.parent().and_then(Path::parent).map(Path::to_owned);
        let private_base = private_home.parent().map(Path::to_owned);
        // `/` stands for no repository (a preflight outside one).
        let git_dir = (common != Path::new("/")).then_some(common.as_path());
        let user_binds = self.check_binds(git_dir)?;
        // What the command runs must be there. A `#!` line is read only
        // where no agent can write: else an agent could name any file as
        // the next attempt's interpreter and have it shown.
        let mut agent_writable: Vec<PathBuf> = vec![worktree.clone()];
        agent_writable.extend(main_checkout.iter().cloned());
        agent_writable.extend(worktree_root.iter().cloned());
        agent_writable.extend(private_base.iter().cloned());
        agent_writable.extend(git_dir.map(Path::to_owned));
        agent_writable.extend(confine.writable.iter().map(|w| canonical(w)));
        agent_writable.extend(
            user_binds
                .iter()
                .filter(|b| b.writable)
                .map(|b| b.path.clone()),
        );
        let trusted = |f: &Path| !agent_writable.iter().any(|w| f.starts_with(w));
        let names: Vec<&str> = std::iter::once(confine.program)
            .chain(confine.programs.iter().map(String::as_str))
            .collect();
        let path_var = env_map.get("PATH").copied();
        let needed = exposure::needed_files(&names, path_var, &trusted);
        // Warm caches (issue 28): overlays mounted in a namespace of the
        // command's own before bubblewrap binds the checkout; home caches
        // at their real paths (tools key caches on absolute paths).
        let overlays = warm::overlays(&self.warm, &common, &worktree, real_home.as_deref())?;
        if let Some(real) = real_home.as_ref().filter(|r| r.is_dir()) {
            flag(&mut args, "--tmpfs", &real.to_string_lossy());
            let roots = toolchain_roots(real, path_var, &needed);
            for root in &roots {
                bind(&mut args, "--ro-bind", root, root);
            }
            let cached: Vec<PathBuf> = overlays
                .iter()
                .filter(|o| o.base == *real)
                .map(|o| o.base.join(&o.rel))
                .collect();
            for dest in &cached {
                bind(&mut args, "--bind", dest, dest);
            }
            // Registry tokens sit inside some toolchain folders.
            for secret in [".cargo/credentials.toml", ".cargo/credentials"] {
                let file = real.join(secret);
                let shown = roots.iter().chain(&cached).any(|r| file.starts_with(r));
                if shown && file.is_file() {
                    bind(&mut args, "--ro-bind", Path::new("/dev/null"), &file);
                }
            }
        }
        // Programs kept in a temporary folder (a downloaded binary, a
        // script in a scratch folder), git-orch itself included, would be
        // missing in the private /tmp: shown read-only, never with a folder
        // that holds what the sandbox hides.
        let protected: Vec<PathBuf> = real_home
            .iter()
            .chain(private_base.iter())
            .chain(runtime_dir.iter())
            .chain(ssh_socket.iter())
            .cloned()
            .collect();
        let mut shown_temp: Vec<PathBuf> = Vec::new();
        for file in &needed {
            if let Some(dir) = exposure::temp_bind(file, &protected)
                && !shown_temp.iter().any(|d| dir.starts_with(d))
            {
                shown_temp.retain(|d| !d.starts_with(&dir));
                shown_temp.push(dir);
            }
        }
        for dir in &shown_temp {
            bind(&mut args, "--ro-bind", dir, dir);
        }
        // The repository: its working tree (the user's main checkout) and
        // every attempt worktree, read-only; they may sit under /tmp or the
        // home folder, which are private now, and shown read-only a write
        // there fails instead of landing in a private copy nobody sees.
        // Its git directory is hidden (config, refs, hooks, git-orch's own
        // logs, prompts and other attempts' files), but for the object
        // store, read-only, which the worktree's own git folder borrows.
        for shown in main_checkout.iter().chain(worktree_root.iter()) {
            let useful = shown != Path::new("/")
                && real_home
                    .as_ref()
                    .is_none_or(|h| shown != h && !h.starts_with(shown))
                && shown.is_dir();
            if useful {
                bind(&mut args, "--ro-bind", shown, shown);
            }
        }
        let hides_git_dir = common != Path::new("/") && common.is_dir();
        if hides_git_dir {
            flag(&mut args, "--tmpfs", &common.to_string_lossy());
            for dir in object_dirs(&common) {
                bind(&mut args, "--ro-bind", &dir, &dir);
            }
            // The repository's own hooks, which the worktree's hooks chain
            // (git's samples are not hooks: nothing to show then).
            let hooks = common.join("hooks");
            let has_hooks = std::fs::read_dir(&hooks).is_ok_and(|entries| {
                entries
                    .flatten()
                    .any(|e| !e.file_name().to_string_lossy().ends_with(".sample"))
            });
            if has_hooks {
                bind(&mut args, "--ro-bind", &hooks, &hooks);
            }
        }
        for file in confine.readable {
            if file.exists() {
                let file = canonical(file);
                bind(&mut args, "--ro-bind", &file, &file);
            }
        }
        bind(&mut args, "--bind", &worktree, &worktree);
        let in_place = match (confine.view, &main_checkout) {
            (View::MainPath, Some(main))
                if hides_git_dir
                    && *main != worktree
                    && overlays.iter().any(|o| o.base == worktree) =>
            {
                let readable: Vec<PathBuf> = confine
                    .readable
                    .iter()
                    .filter(|f| f.exists())
                    .map(|f| canonical(f))
                    .collect();
                in_place::show(
                    main,
                    &worktree,
                    &canonical(&spec.cwd),
                    &object_dirs(&common),
                    &readable,
                    &crate::store::scratch::warm_layers(&common, &worktree),
                )
                .map_err(io(&worktree))?
            }
            _ => None,
        };
        if let Some(shown) = &in_place {
            args.extend(shown.args.iter().cloned());
        }
        // Other commands' private homes sit beside this one; where the
        // temporary directory is not one of the private ones above
        // (TMPDIR set elsewhere), their folder is hidden here.
        if let Some(base) = private_home.parent() {
            let hidden = base.starts_with("/tmp")
                || base.starts_with("/var/tmp")
                || real_home.as_ref().is_some_and(|h| base.starts_with(h));
            let ours = base
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("git-orch-"));
            if ours && !hidden && base.is_dir() {
                flag(&mut args, "--tmpfs", &base.to_string_lossy());
            }
        }
        bind(&mut args, "--bind", &private_home, &private_home);
        for w in confine.writable {
            std::fs::create_dir_all(w).map_err(io(w))?;
            let w = canonical(w);
            bind(&mut args, "--bind", &w, &w);
        }
        for b in &user_binds {
            let option = if b.writable { "--bind" } else { "--ro-bind" };
            bind(&mut args, option, &b.path, &b.path);
        }
        // Last, so no bind above shows it again: a connect to /dev/null
        // fails.
        if let Some(socket) = &ssh_socket {
            bind(&mut args, "--ro-bind", Path::new("/dev/null"), socket);
        }
        // Read-only only now: bwrap made the mount points for the binds
        // above inside them first.
        if let Some(real) = real_home.as_ref().filter(|r| r.is_dir()) {
            flag(&mut args, "--remount-ro", &real.to_string_lossy());
        }
        // Shown in place, the checkout's own git folder is at the main
        // one's path now, and the hidden one lies under it.
        if hides_git_dir && in_place.is_none() {
            flag(&mut args, "--remount-ro", &common.to_string_lossy());
        }
        let chdir = in_place.as_ref().map_or(&worktree, |p| &p.chdir);
        args.push("--chdir".into());
        args.push(chdir.to_string_lossy().into_owned());
        args.push("--".into());
        args.push(spec.program.clone());
        args.append(&mut spec.args);
        (spec.program, spec.args) = warm::wrap_command("bwrap".into(), args, &overlays);
        let mut env = env;
        if let Some(shown) = &in_place {
            in_place::rename_files(&mut env, &shown.moved);
        }
        spec.env = env
            .into_iter()
            .map(|(k, v)| {
                if k == "HOME" {
                    (k, private_home.to_string_lossy().into_owned())
                } else {
                    (k, v)
                }
            })
            .collect();
        if !spec.env.iter().any(|(k, _)| k == "HOME") {
            spec.env
                .push(("HOME".into(), private_home.to_string_lossy().into_owned()));
        }
        Ok(spec)
    }

    /// A reader of home files as the agent will see them: with the sandbox
    /// only the copied ones (`files`, and the base ones), else any.
    pub fn home_reader(&self, files: &[String]) -> impl Fn(&str) -> Option<String> + use<> {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let only: Option<Vec<String>> = self.confines().then(|| {
            environment::BASE_HOME_FILES
                .iter()
                .map(|s| (*s).to_owned())
                .chain(files.iter().cloned())
                .collect()
        });
        move |rel: &str| {
            if let Some(only) = &only
                && !only
                    .iter()
                    .any(|f| rel == f || rel.starts_with(&format!("{f}/")))
            {
                return None;
            }
            std::fs::read_to_string(home.as_ref()?.join(rel)).ok()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_roots_are_the_parents_of_bin_folders() {
        let home = Path::new("/home/u");
        assert_eq!(
            install_root(Path::new("/home/u/.local/bin/aider"), home),
            Some(PathBuf::from("/home/u/.local"))
        );
        assert_eq!(
            install_root(Path::new("/home/u/.nvm/versions/node/v20/bin/node"), home),
            Some(PathBuf::from("/home/u/.nvm/versions/node/v20"))
        );
        assert_eq!(
            install_root(Path::new("/home/u/.pyenv/shims/python"), home),
            Some(PathBuf::from("/home/u/.pyenv"))
        );
        // ~/bin itself, not the whole home folder.
        assert_eq!(
            install_root(Path::new("/home/u/bin/tool"), home),
            Some(PathBuf::from("/home/u/bin"))
        );
        assert_eq!(install_root(Path::new("/usr/bin/git"), home), None);
        assert_eq!(install_root(Path::new("/home/u/script"), home), None);
    }

    /// The bwrap arguments for `program` run with `bind` as `[sandbox]
    /// bind`, in a world made under `root`.
    fn bwrap_args(root: &Path, program: &Path, bind: Vec<PathBuf>) -> Vec<String> {
        let sb = Sandbox {
            kind: Kind::Bwrap,
            requested: "bwrap",
            fallback: None,
            network: true,
            pass_env: Vec::new(),
            bind,
            ro_bind: Vec::new(),
            warm: Default::default(),
        };
        let worktree = root.join("proj.orch/run/t-1");
        let git = root.join("proj/.git");
        for d in [&worktree, &git.join("objects")] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        let home = PrivateHome::make().expect("home");
        let spec = GroupSpec {
            program: program.to_string_lossy().into_owned(),
            args: Vec::new(),
            cwd: worktree.clone(),
            env: Vec::new(),
            env_remove: Vec::new(),
            env_clear: false,
            stdin: None,
            stdout: PathBuf::from("/o"),
            stderr: PathBuf::from("/e"),
            filter: None,
            on_line: None,
        };
        let program = program.to_string_lossy().into_owned();
        sb.wrap(
            spec,
            &Confine {
                worktree: &worktree,
                common_dir: &git,
                readable: &[],
                writable: &[],
                home: home.path(),
                home_files: &[],
                pass_env: &[],
                program: &program,
                programs: &[],
                view: crate::sandbox::View::OwnPath,
            },
        )
        .expect("wraps")
        .args
    }

    #[test]
    fn a_link_an_agent_could_write_shows_nothing_it_points_at() {
        // The agent's program lives in a writable bind; an earlier attempt
        // made it a link to a script beside a secret in a private temp
        // folder.
        let root = tempfile::Builder::new()
            .prefix("orch-wrap-")
            .tempdir_in("/tmp")
            .expect("tmp");
        let root = root.path().canonicalize().expect("canonical");
        let secret = root.join("secret");
        std::fs::create_dir_all(&secret).expect("mkdir");
        std::fs::write(secret.join("key"), "k").expect("key");
        let evil = secret.join("evil.sh");
        std::fs::write(
            &evil,
            "#!/bin/sh
cat key
",
        )
        .expect("write");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&evil, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let cache = root.join("cache");
        std::fs::create_dir_all(&cache).expect("mkdir");
        let agent = cache.join("agent");
        std::os::unix::fs::symlink(&evil, &agent).expect("symlink");
        let shown = |args: &[String]| args.iter().any(|a| Path::new(a).starts_with(&secret));
        let args = bwrap_args(&root, &agent, vec![cache.clone()]);
        assert!(!shown(&args), "{args:?}");
        // Where no agent writes, the same link is followed.
        let args = bwrap_args(&root, &agent, Vec::new());
        assert!(shown(&args), "{args:?}");
    }

    #[test]
    fn without_bwrap_only_the_environment_changes() {
        let sb = Sandbox::none();
        let spec = GroupSpec {
            program: "agent".into(),
            args: vec!["a".into()],
            cwd: PathBuf::from("/w"),
            env: vec![("ORCH_TASK".into(), "t".into())],
            env_remove: vec!["GIT_DIR".into()],
            env_clear: false,
            stdin: None,
            stdout: PathBuf::from("/o"),
            stderr: PathBuf::from("/e"),
            filter: None,
            on_line: None,
        };
        let home = tempfile::tempdir().expect("tmp");
        let wrapped = sb
            .wrap(
                spec,
                &Confine {
                    worktree: Path::new("/w"),
                    common_dir: Path::new("/r/.git"),
                    readable: &[],
                    writable: &[],
                    home: home.path(),
                    home_files: &[],
                    pass_env: &[],
                    program: "agent",
                    programs: &[],
                    view: crate::sandbox::View::OwnPath,
                },
            )
            .expect("wraps");
        assert_eq!(wrapped.program, "agent");
        assert!(wrapped.env_clear);
        assert!(
            wrapped
                .env
                .iter()
                .any(|(k, v)| k == "ORCH_TASK" && v == "t")
        );
        assert!(
            wrapped
                .env
                .iter()
                .all(|(k, _)| k != "GIT_DIR" && k != "SSH_AUTH_SOCK")
        );
    }

    #[test]
    fn only_the_identity_of_a_gitconfig_reaches_an_agent() {
        let config = "[user]\n\tname = Ada Lovelace\n\temail = \"ada@example.com\"\n\tsigningkey = ABC\n\
[http \"https://github.com\"]\n\textraheader = AUTHORIZATION: bearer ghp_secret\n\
[url \"https://x:tok@github.com/\"]\n\tinsteadOf = https://github.com/\n\
[credential]\n\thelper = store\n[include]\n\tpath = ~/.secrets\n";
        let reduced = identity_only(config);
        assert_eq!(
            reduced,
            "[user]\n\tname = \"Ada Lovelace\"\n\temail = \"ada@example.com\"\n"
        );
        assert_eq!(identity_only("[http]\n\tproxy = x\n"), "");
    }
}
