//! The only place that starts other programs.
//!
//! Two kinds of children exist: the `git` binary, for what gix cannot or
//! should not do (fetch and push with the user's credentials, gc, commits in a
//! populated worktree, signing), and long-running commands (agents, gates)
//! that run in a process group of their own so a timeout can stop the whole
//! tree with `killpg`, under a supervisor (`supervisor`) that ends the
//! whole tree when the process that started it dies, even by SIGKILL.
//! git run on a folder that an agent or a gate command could write goes
//! through [`HardenedGit`]: repository, work tree and index given by
//! git-orch, no configuration that could start a program.
//! Nothing here knows about plans or runs.
//!
//! It also owns the one shell-quoting helper ([`shell_quote`]): text that
//! reaches `sh` is built here or with it, nowhere else.

mod hardened;
mod supervisor;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use tokio_util::sync::CancellationToken;

pub use hardened::HardenedGit;
pub use supervisor::{Supervision, supervise};

/// Exit code of a supervisor whose parent died before the command
/// started: nobody is left to read it, but it must not look like success.
pub const PARENT_GONE_EXIT: i32 = 125;

/// Quotes `value` as one word for a POSIX shell: inside single quotes
/// nothing is special, and a `'` is written as `'\''` (close the quotes,
/// an escaped quote, reopen them). The only quoting function of the
/// codebase: values that can be passed as arguments or environment
/// variables should be, and this is for the few scripts that must name a
/// fixed path (hook shims, detached housekeeping).
pub fn shell_quote(value: &str) -> String {
    let mut quoted = String::with_capacity(value.len() + 2);
    quoted.push('\'');
    for c in value.chars() {
        if c == '\'' {
            quoted.push_str("'\\''");
        } else {
            quoted.push(c);
        }
    }
    quoted.push('\'');
    quoted
}

/// The program that supervises long-running commands (this very binary,
/// run as `git-orch supervise`), set once at start-up by the command line.
/// Unset (as in unit tests of the library), commands run directly.
static SUPERVISOR: OnceLock<PathBuf> = OnceLock::new();

/// Makes every [`GroupChild`] run under `exe supervise` (Linux only, where
/// the supervisor's guarantees hold). Called once by the binary's `main`.
pub fn use_supervisor(exe: PathBuf) {
    if cfg!(target_os = "linux") {
        let _ = SUPERVISOR.set(exe);
    }
}

/// Whether commands run under the supervisor.
pub fn supervised() -> bool {
    SUPERVISOR.get().is_some()
}

/// This program, as the command line set it for [`use_supervisor`]: what
/// wraps a command that must start in a namespace of its own (the warm
/// caches' `git-orch warm-mount`). `None` in the library's unit tests.
pub fn this_program() -> Option<&'static Path> {
    SUPERVISOR.get().map(PathBuf::as_path)
}

/// Replaces this process with `program` (for a wrapper that prepared
/// something only a process of its own can have, such as mounts in a
/// namespace of its own). Returns only on failure.
pub fn exec(program: &OsStr, args: &[std::ffi::OsString]) -> std::io::Error {
    use std::os::unix::process::CommandExt;
    Command::new(program).args(args).exec()
}

/// A program that could not be started or did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// The program could not be started at all (not installed, not executable).
    #[error("could not start `{program}`: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    /// The program ran and exited unsuccessfully.
    #[error("`{command}` failed ({status}): {stderr}")]
    Failed {
        command: String,
        status: String,
        stderr: String,
    },
}

/// A `git` invocation rooted at one directory (`git -C <dir>`).
///
/// The environment is inherited so the user's SSH agent, credential helpers
/// and signing keys work; variables that would redirect git to another
/// repository (`GIT_DIR`, `GIT_WORK_TREE`, `GIT_INDEX_FILE`) are removed
/// because the directory given here is the whole truth.
#[derive(Debug, Clone)]
pub struct Git {
    dir: PathBuf,
    envs: Vec<(String, String)>,
}

impl Git {
    /// Runs git in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            envs: Vec::new(),
        }
    }

    /// Adds an environment variable for every command run through this value.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.envs.push((key.into(), value.into()));
        self
    }

    /// The directory git runs in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn command<I, S>(&self, args: I) -> (Command, String)
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = Command::new("git");
        cmd.arg("-C").arg(&self.dir);
        let mut shown = String::from("git");
        for a in args {
            shown.push(' ');
            shown.push_str(&a.as_ref().to_string_lossy());
            cmd.arg(a);
        }
        for var in ["GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_PREFIX"] {
            cmd.env_remove(var);
        }
        for (k, v) in &self.envs {
            cmd.env(k, v);
        }
        cmd.stdin(Stdio::null());
        (cmd, shown)
    }

    /// Runs git and returns its output whatever the exit status.
    pub fn output<I, S>(&self, args: I) -> Result<Output, ProcessError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let (mut cmd, _) = self.command(args);
        cmd.output().map_err(|source| ProcessError::Spawn {
            program: "git".into(),
            source,
        })
    }

    /// Starts git in the background, detached from this process (a shell
    /// starts it and exits at once, so no zombie is left to reap), with no
    /// input or output. For housekeeping such as `maintenance run --auto`.
    pub fn spawn_detached(&self, args: &[&str]) -> Result<(), ProcessError> {
        let mut all: Vec<&OsStr> = vec![OsStr::new("-C"), self.dir.as_os_str()];
        all.extend(args.iter().map(OsStr::new));
        start_detached(
            OsStr::new("git"),
            &all,
            &format!("sh -c 'git {} &'", args.join(" ")),
        )
    }

    /// Runs git, requires success and returns stdout with the trailing
    /// newline removed.
    pub fn run<I, S>(&self, args: I) -> Result<String, ProcessError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let (mut cmd, shown) = self.command(args);
        let out = cmd.output().map_err(|source| ProcessError::Spawn {
            program: "git".into(),
            source,
        })?;
        git_stdout(shown, out)
    }
}

/// A finished git's stdout without its trailing newline, or its failure.
fn git_stdout(shown: String, out: Output) -> Result<String, ProcessError> {
    if !out.status.success() {
        return Err(ProcessError::Failed {
            command: shown,
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    let mut s = String::from_utf8_lossy(&out.stdout).into_owned();
    while s.ends_with('\n') || s.ends_with('\r') {
        s.pop();
    }
    Ok(s)
}

/// Runs `program` in `cwd` to its end with stdout and stderr merged into one
/// pipe, handing each line to `on_line` as it arrives, in the order the
/// program wrote them (what a person would see in a terminal). Stdin is
/// /dev/null; `env` is added to the inherited environment, and the
/// variables that would point git at another repository are removed.
/// Returns the exit code (`None` when killed by a signal).
pub fn run_lines(
    program: &OsStr,
    args: &[String],
    cwd: &Path,
    env: &[(String, String)],
    on_line: &mut dyn FnMut(&str),
) -> Result<Option<i32>, ProcessError> {
    use std::io::BufRead;
    let spawn_error = |source| ProcessError::Spawn {
        program: program.to_string_lossy().into_owned(),
        source,
    };
    let (reader, writer) = std::io::pipe().map_err(spawn_error)?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(writer.try_clone().map_err(spawn_error)?)
        .stderr(writer);
    for var in ["GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_PREFIX"] {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().map_err(spawn_error)?;
    // The command holds the parent's copies of the write end: without
    // dropping it the pipe never reaches end-of-file.
    drop(cmd);
    let mut reader = std::io::BufReader::new(reader);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                let text = String::from_utf8_lossy(&line);
                on_line(text.trim_end_matches(['\n', '\r']));
            }
        }
    }
    let status = child.wait().map_err(spawn_error)?;
    Ok(status.code())
}

/// A long-running command (agent, gate, setup) started in its own process
/// group, with stdout and stderr captured to files.
#[derive(Clone)]
pub struct GroupSpec {
    pub program: String,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    /// Variables added to the environment (the whole environment when
    /// `env_clear` is set).
    pub env: Vec<(String, String)>,
    /// Variables removed from it.
    pub env_remove: Vec<String>,
    /// Start from an empty environment instead of this process's: the
    /// caller passes an allow-listed environment in `env`.
    pub env_clear: bool,
    /// Bytes for stdin; `None` connects stdin to /dev/null (agent CLIs
    /// read an open stdin as more prompt and would wait forever).
    pub stdin: Option<Vec<u8>>,
    pub stdout: PathBuf,
    pub stderr: PathBuf,
    /// Applied to every output line before it reaches the files (secret
    /// masking): the raw bytes then never touch the disk.
    pub filter: Option<LineFilter>,
    /// Told every output line (after `filter`) as it arrives; returning
    /// true stops the group at once (an agent whose stream says it cannot
    /// go on, such as a refused API key, need not run to its timeout).
    pub on_line: Option<LineWatcher>,
}

/// A per-line output filter; it may keep state between lines (a private
/// key spans several).
pub type LineFilter = std::sync::Arc<dyn Fn(&str) -> String + Send + Sync>;

/// Which output a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// Watches output lines; true means "stop the command now".
pub type LineWatcher = std::sync::Arc<dyn Fn(Stream, &str) -> bool + Send + Sync>;

/// Copies `from` to the file at `to` line by line through `filter`,
/// telling `watch` each line and `stop` when it asks to end the command.
async fn pump(
    from: impl tokio::io::AsyncRead + Unpin,
    to: std::fs::File,
    filter: LineFilter,
    watch: Option<(Stream, LineWatcher, std::sync::Arc<tokio::sync::Notify>)>,
) {
    use std::io::Write;
    use tokio::io::AsyncBufReadExt;
    let mut reader = tokio::io::BufReader::new(from);
    let mut to = std::io::BufWriter::new(to);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                let text = String::from_utf8_lossy(&line);
                let (body, nl) = match text.strip_suffix('\n') {
                    Some(b) => (b, "\n"),
                    None => (text.as_ref(), ""),
                };
                let shown = filter(body);
                let _ = write!(to, "{shown}{nl}");
                let _ = to.flush();
                if let Some((stream, watch, stop)) = &watch
                    && watch(*stream, &shown)
                {
                    stop.notify_one();
                }
            }
        }
    }
}

/// How a group command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ended {
    pub exit: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    /// Stopped because the caller cancelled (Ctrl-C, circuit breaker).
    pub cancelled: bool,
    /// Stopped because the line watcher asked (see [`GroupSpec::on_line`]).
    pub stopped_early: bool,
}

impl Ended {
    pub fn success(&self) -> bool {
        self.exit == Some(0) && !self.timed_out && !self.cancelled && !self.stopped_early
    }

    /// An end for a command that could not start at all (exit 127, as a
    /// shell reports a missing program).
    pub fn not_started() -> Self {
        Ended {
            exit: Some(127),
            signal: None,
            timed_out: false,
            cancelled: false,
            stopped_early: false,
        }
    }
}

/// A running command that leads its own process group.
#[derive(Debug)]
pub struct GroupChild {
    child: tokio::process::Child,
    pgid: u32,
    pumps: Vec<tokio::task::JoinHandle<()>>,
    stop: std::sync::Arc<tokio::sync::Notify>,
}

/// Sends `signal` to the process group `pgid`; false if no process is in
/// it. Refuses group ids 0 and 1, which would mean "my own group" and
/// "every process" to the kernel.
pub fn signal_group(pgid: u32, signal: i32) -> bool {
    if pgid <= 1 || pgid > i32::MAX as u32 {
        return false;
    }
    // SAFETY: killpg has no memory effects; the group id was checked to be
    // a real group (> 1), never 0 (our own group) or negative.
    unsafe { libc::killpg(pgid as libc::pid_t, signal) == 0 }
}

/// Whether any process is still in group `pgid`.
pub fn group_alive(pgid: u32) -> bool {
    signal_group(pgid, 0)
}

/// Process groups (pid, pgid) of processes whose environment holds every
/// one of `vars` (read from `/proc/<pid>/environ`; Linux). This is how a
/// resumed driver finds the agents and gates of attempts its dead
/// predecessor started, even one that died before it could record the pid.
pub fn find_by_env(vars: &[(&str, &str)]) -> Vec<(u32, u32)> {
    let wanted: Vec<String> = vars.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let own_pgid = {
        // SAFETY: getpgrp has no preconditions.
        unsafe { libc::getpgrp() as u32 }
    };
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let entries: Vec<&[u8]> = environ.split(|b| *b == 0).collect();
        let all = wanted.iter().all(|w| entries.contains(&w.as_bytes()));
        if !all {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the command name: state ppid pgrp …
        let pgid = stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.split_whitespace().nth(2))
            .and_then(|p| p.parse::<u32>().ok());
        if let Some(pgid) = pgid
            && pgid > 1
            && pgid != own_pgid
        {
            out.push((pid, pgid));
        }
    }
    out
}

/// A live process found by a variable of its environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundProcess {
    pub pid: u32,
    /// Its process group, always > 1.
    pub pgid: u32,
    /// Its variables whose names start with the prefix asked for.
    pub vars: std::collections::BTreeMap<String, String>,
}

/// Every live process (outside this process's own group) whose environment
/// sets `key`, with its variables that start with `prefix`. Reads
/// `/proc`; elsewhere it finds nothing.
pub fn find_with_var(key: &str, prefix: &str) -> Vec<FoundProcess> {
    let own_pgid = {
        // SAFETY: getpgrp has no preconditions.
        unsafe { libc::getpgrp() as u32 }
    };
    let wanted = format!("{key}=");
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let vars: Vec<&[u8]> = environ.split(|b| *b == 0).collect();
        if !vars.iter().any(|v| v.starts_with(wanted.as_bytes())) {
            continue;
        }
        let Some((_, pgid)) = parent_and_group(pid) else {
            continue;
        };
        if pgid <= 1 || pgid == own_pgid {
            continue;
        }
        let vars = vars
            .iter()
            .filter(|v| v.starts_with(prefix.as_bytes()))
            .filter_map(|v| {
                let text = String::from_utf8_lossy(v);
                let (k, val) = text.split_once('=')?;
                Some((k.to_owned(), val.to_owned()))
            })
            .collect();
        out.push(FoundProcess { pid, pgid, vars });
    }
    out
}

/// The parent and process group of `pid`, from `/proc/<pid>/stat`.
fn parent_and_group(pid: u32) -> Option<(u32, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name: state ppid pgrp …
    let mut rest = stat.rsplit_once(") ")?.1.split_whitespace().skip(1);
    let ppid = rest.next()?.parse().ok()?;
    let pgid = rest.next()?.parse().ok()?;
    Some((ppid, pgid))
}

/// The nearest ancestor of `pid` (its parent, that one's parent, …) whose
/// command line `accept` takes, or `None` once the chain reaches init or
/// a process that is gone.
pub fn ancestor_where(pid: u32, accept: &dyn Fn(&[String]) -> bool) -> Option<u32> {
    let mut at = pid;
    // A chain longer than this is a loop read mid-change, not a tree.
    for _ in 0..256 {
        let (parent, _) = parent_and_group(at)?;
        if parent <= 1 {
            return None;
        }
        let cmdline = std::fs::read(format!("/proc/{parent}/cmdline")).unwrap_or_default();
        let argv: Vec<String> = cmdline
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if accept(&argv) {
            return Some(parent);
        }
        at = parent;
    }
    None
}

/// Stops the group `pgid`: SIGTERM, then SIGKILL after `grace` if any
/// member is left. Blocking; for groups this process did not start (an
/// orphan found on resume).
pub fn stop_group_blocking(pgid: u32, grace: std::time::Duration) {
    if !signal_group(pgid, libc::SIGTERM) {
        return;
    }
    let deadline = std::time::Instant::now() + grace;
    while std::time::Instant::now() < deadline {
        if !group_alive(pgid) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    signal_group(pgid, libc::SIGKILL);
}

impl GroupChild {
    /// Starts `spec` as the leader of a new process group; under the
    /// supervisor when one is set (see [`use_supervisor`]), which then
    /// leads the group and runs the command in it.
    pub fn spawn(spec: &GroupSpec) -> Result<Self, ProcessError> {
        let open = |p: &Path| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .map_err(|source| ProcessError::Spawn {
                    program: format!("{} (log file {})", spec.program, p.display()),
                    source,
                })
        };
        let mut cmd = match SUPERVISOR.get() {
            Some(exe) => {
                let mut c = tokio::process::Command::new(exe);
                c.arg("supervise")
                    .arg("--parent")
                    .arg(std::process::id().to_string())
                    .arg("--")
                    .arg(&spec.program)
                    .args(&spec.args);
                c
            }
            None => {
                let mut c = tokio::process::Command::new(&spec.program);
                c.args(&spec.args);
                c
            }
        };
        let (out, err) = (open(&spec.stdout)?, open(&spec.stderr)?);
        cmd.current_dir(&spec.cwd).process_group(0);
        let piped = spec.filter.is_some() || spec.on_line.is_some();
        if piped {
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        } else {
            cmd.stdout(Stdio::from(out.try_clone().map_err(|source| {
                ProcessError::Spawn {
                    program: spec.program.clone(),
                    source,
                }
            })?))
            .stderr(Stdio::from(err.try_clone().map_err(|source| {
                ProcessError::Spawn {
                    program: spec.program.clone(),
                    source,
                }
            })?));
        }
        cmd.stdin(if spec.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .kill_on_drop(false);
        if spec.env_clear {
            cmd.env_clear();
        }
        for k in &spec.env_remove {
            cmd.env_remove(k);
        }
        for (k, v) in &spec.env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().map_err(|source| ProcessError::Spawn {
            program: spec.program.clone(),
            source,
        })?;
        let pgid = child.id().expect("a just-spawned child has a pid");
        let stop = std::sync::Arc::new(tokio::sync::Notify::new());
        let mut pumps = Vec::new();
        if piped {
            let filter: LineFilter = spec
                .filter
                .clone()
                .unwrap_or_else(|| std::sync::Arc::new(|l: &str| l.to_owned()));
            let watch = |stream| spec.on_line.clone().map(|w| (stream, w, stop.clone()));
            if let Some(o) = child.stdout.take() {
                pumps.push(tokio::spawn(pump(
                    o,
                    out,
                    filter.clone(),
                    watch(Stream::Stdout),
                )));
            }
            if let Some(e) = child.stderr.take() {
                pumps.push(tokio::spawn(pump(e, err, filter, watch(Stream::Stderr))));
            }
        }
        if let (Some(bytes), Some(mut stdin)) = (spec.stdin.clone(), child.stdin.take()) {
            tokio::spawn(async move {
                use tokio::io::AsyncWriteExt;
                // A child that exits without reading is not an error here.
                let _ = stdin.write_all(&bytes).await;
            });
        }
        Ok(Self {
            child,
            pgid,
            pumps,
            stop,
        })
    }

    /// The leader's pid, which is also the group id.
    pub fn pid(&self) -> u32 {
        self.pgid
    }

    /// Waits until the leader exits, `deadline` passes, `cancel` turns
    /// true or the line watcher asks to stop; then makes sure no member of
    /// the group is left (TERM, then KILL after `grace`).
    pub async fn wait(
        &mut self,
        deadline: tokio::time::Instant,
        cancel: &CancellationToken,
        grace: std::time::Duration,
    ) -> Ended {
        use std::os::unix::process::ExitStatusExt;
        let mut timed_out = false;
        let mut cancelled = false;
        let mut stopped_early = false;
        let stop = self.stop.clone();
        let status = tokio::select! {
            s = self.child.wait() => s.ok(),
            _ = tokio::time::sleep_until(deadline) => { timed_out = true; None }
            _ = cancel.cancelled() => { cancelled = true; None }
            _ = stop.notified() => { stopped_early = true; None }
        };
        let status = match status {
            Some(s) => Some(s),
            None => self.stop(grace).await,
        };
        // Whatever the leader left behind in its group goes too.
        if group_alive(self.pgid) {
            signal_group(self.pgid, libc::SIGTERM);
            let end = tokio::time::Instant::now() + grace;
            while group_alive(self.pgid) && tokio::time::Instant::now() < end {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            signal_group(self.pgid, libc::SIGKILL);
        }
        // The group is gone, so the pipes are closed: the copies finish.
        for p in self.pumps.drain(..) {
            let _ = p.await;
        }
        Ended {
            exit: status.and_then(|s| s.code()),
            signal: status.and_then(|s| s.signal()),
            timed_out,
            cancelled,
            stopped_early,
        }
    }

    /// TERM to the group, KILL after `grace`; returns the leader's status.
    async fn stop(&mut self, grace: std::time::Duration) -> Option<std::process::ExitStatus> {
        signal_group(self.pgid, libc::SIGTERM);
        match tokio::time::timeout(grace, self.child.wait()).await {
            Ok(s) => s.ok(),
            Err(_) => {
                signal_group(self.pgid, libc::SIGKILL);
                self.child.wait().await.ok()
            }
        }
    }
}

/// Runs `program` to its end with a clean environment (`env` only, plus
/// nothing inherited), stdin from /dev/null, and returns its exit code and
/// merged output, or `None` if it could not start. Killed (with its
/// process group) after `timeout`. For quick probes: `--version`, whether
/// bubblewrap works here.
pub fn capture(
    program: &str,
    args: &[String],
    env: &[(String, String)],
    timeout: std::time::Duration,
) -> Option<(Option<i32>, String)> {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    let (mut reader, writer) = std::io::pipe().ok()?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::null())
        .stdout(writer.try_clone().ok()?)
        .stderr(writer)
        .process_group(0);
    let mut child = cmd.spawn().ok()?;
    drop(cmd);
    let pgid = child.id();
    let reading = std::thread::spawn(move || {
        let mut buf = Vec::new();
        // Bounded: a probe that prints without end is not a version.
        let _ = (&mut reader).take(256 * 1024).read_to_end(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    });
    let deadline = std::time::Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            _ => {
                signal_group(pgid, libc::SIGKILL);
                let _ = child.wait();
                break None;
            }
        }
    };
    // Whatever it started in its group goes too, so the pipe closes.
    signal_group(pgid, libc::SIGKILL);
    let text = reading.join().unwrap_or_default();
    Some((status.and_then(|s| s.code()), text))
}

/// The last `max` bytes of a file, as text (for output tails).
pub fn tail_of(path: &Path, max: usize) -> String {
    String::from_utf8_lossy(&tail_bytes(path, max)).into_owned()
}

/// The last `max` bytes of a file, from a line boundary when cut: an
/// agent's output is as long as it likes, and only its end is read.
pub fn tail_bytes(path: &Path, max: usize) -> Vec<u8> {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(path) else {
        return Vec::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(max as u64);
    let _ = f.seek(SeekFrom::Start(start));
    let mut buf = Vec::new();
    let _ = f.take(max as u64).read_to_end(&mut buf);
    if start > 0
        && let Some(i) = buf.iter().position(|&b| b == b'\n')
    {
        buf.drain(..=i);
    }
    buf
}

/// A file a confined process could write, read as data: only a regular
/// file (never through a symlink, never a fifo that would block) of at
/// most `max` bytes, else `None`.
pub fn read_written(path: &Path, max: u64) -> Option<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let meta = f.metadata().ok()?;
    if !meta.is_file() || meta.len() > max {
        return None;
    }
    let mut buf = Vec::new();
    f.take(max + 1).read_to_end(&mut buf).ok()?;
    (buf.len() as u64 <= max).then_some(buf)
}

/// Whether this process runs as root (effective uid 0).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Whether `program` can be found on PATH (or is an existing path).
pub fn on_path(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        return executable(Path::new(program));
    }
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|dir| executable(&dir.join(program)))
    })
}

/// Starts `command` (a shell command line, as git runs `core.pager`) with
/// a pipe on its stdin and this process's stdout and stderr, for a pager.
pub fn spawn_pager(
    command: &str,
    env: &[(&str, &str)],
) -> Result<std::process::Child, ProcessError> {
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(command).stdin(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().map_err(|source| ProcessError::Spawn {
        program: command.to_owned(),
        source,
    })
}

/// Opens `url` in the user's browser, in the background: `$BROWSER` when
/// set (a program, given the URL as its one argument), else `xdg-open`
/// (`open` on macOS). A shell starts it and exits at once, so no zombie is
/// left for a long-lived caller to reap; whether the browser came up is
/// not known.
pub fn open_url(url: &str) -> Result<(), ProcessError> {
    let program = std::env::var("BROWSER")
        .ok()
        .filter(|b| !b.trim().is_empty())
        .unwrap_or_else(|| {
            if cfg!(target_os = "macos") {
                "open".into()
            } else {
                "xdg-open".into()
            }
        });
    if !on_path(&program) {
        return Err(ProcessError::Spawn {
            program: program.clone(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "not found on PATH"),
        });
    }
    start_detached(
        OsStr::new(&program),
        &[OsStr::new(url)],
        &format!("sh -c '{program} <url> &'"),
    )
}

/// Starts `program args` in the background, detached from this process:
/// a shell starts it and exits at once, so no zombie is left for a
/// long-lived caller to reap, and it gets no input or output. `shown`
/// names the command in an error.
fn start_detached(program: &OsStr, args: &[&OsStr], shown: &str) -> Result<(), ProcessError> {
    let status = Command::new("sh")
        .arg("-c")
        .arg("\"$0\" \"$@\" >/dev/null 2>&1 </dev/null &")
        .arg(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|source| ProcessError::Spawn {
            program: "sh".into(),
            source,
        })?;
    if !status.success() {
        return Err(ProcessError::Failed {
            command: shown.to_owned(),
            status: status.to_string(),
            stderr: String::new(),
        });
    }
    Ok(())
}

/// Limits glibc's per-thread malloc arenas for a long-lived process with a
/// few worker threads: each arena keeps its freed memory, and a driver's
/// resident size is mostly that. A no-op on other C libraries.
pub fn limit_malloc_arenas(max: i32) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only tunes the allocator; called before other threads
    // exist, as glibc recommends.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, max);
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = max;
}

#[cfg(test)]
mod run_lines_tests {
    use super::*;

    #[test]
    fn merges_stdout_and_stderr_in_the_order_written() {
        let mut lines = Vec::new();
        let code = run_lines(
            OsStr::new("sh"),
            &[
                "-c".into(),
                "echo one; echo two >&2; echo three; exit 4".into(),
            ],
            Path::new("/"),
            &[],
            &mut |l| lines.push(l.to_owned()),
        )
        .expect("sh runs");
        assert_eq!(code, Some(4));
        assert_eq!(lines, ["one", "two", "three"]);
    }
}

#[cfg(test)]
mod detached_tests {
    use super::*;

    /// Every argument reaches the program whole, past the ninth too (a
    /// shell reads `$10` as `$1` and a `0`).
    #[test]
    fn a_detached_program_gets_every_argument_whole() {
        let dir = tempfile::tempdir().expect("temp");
        let file = dir.path().join("args");
        let words: Vec<String> = std::iter::once("a b".to_owned())
            .chain((2..=11).map(|n| n.to_string()))
            .collect();
        let mut args: Vec<&OsStr> = vec![
            OsStr::new("-c"),
            OsStr::new("printf '%s\\n' \"$@\" > \"$0.tmp\" && mv \"$0.tmp\" \"$0\""),
            file.as_os_str(),
        ];
        args.extend(words.iter().map(OsStr::new));
        start_detached(OsStr::new("sh"), &args, "sh").expect("started");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !file.exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let got = std::fs::read_to_string(&file).expect("the program ran");
        assert_eq!(got.lines().collect::<Vec<_>>(), words);
    }
}
