//! `git` run by git-orch on a folder that something else could write: an
//! attempt's worktree, a gate's checkout, the merge queue's scratch
//! checkout.
//!
//! Whatever an agent or a gate command can write is untrusted data. A
//! plain `git -C <dir>` there would discover the repository from the
//! folder's own `.git` (which the agent may have pointed anywhere) and
//! read a configuration the agent wrote, whose `core.fsmonitor`,
//! `filter.*.clean`, `core.hooksPath` or `diff.external` run programs on
//! the host with git-orch's whole environment. So here the repository
//! (`GIT_DIR`), the work tree and the index are always given by git-orch
//! itself, from its own records; no system or global configuration is
//! read; every setting that could start a program is forced off on the
//! command line (which wins over any file); optional locks, replace
//! objects and lazy fetches are off; and the environment holds only what
//! git needs (`PATH`, `HOME` for the default excludes file, a fixed
//! locale) plus what the caller sets.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use super::ProcessError;

/// Settings given on every command line: each one that could make git run
/// a program, write beside the index, or reach the network, switched off.
const FORCED: &[&str] = &[
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.untrackedCache=false",
    "core.splitIndex=false",
    "core.sshCommand=false",
    "core.askPass=false",
    "core.pager=cat",
    "diff.external=",
    "gc.auto=0",
    "maintenance.auto=false",
    "commit.gpgSign=false",
    "protocol.allow=never",
    "credential.helper=",
    "submodule.recurse=false",
    "fetch.recurseSubmodules=false",
    "index.skipHash=false",
];

/// Variables of this process that reach a hardened git: only what it needs
/// to run and to find the user's default excludes file.
const KEPT: &[&str] = &["PATH", "HOME", "XDG_CONFIG_HOME"];

/// A `git` pinned to one repository, work tree and index.
#[derive(Debug, Clone)]
pub struct HardenedGit {
    git_dir: PathBuf,
    work_tree: Option<PathBuf>,
    index: Option<PathBuf>,
    config: Vec<String>,
    env: Vec<(String, String)>,
    timeout: Duration,
}

/// How long one hardened git may run before it is stopped: it reads a
/// folder something else filled (a file of terabytes, millions of files),
/// and must not hang the run.
pub const TIMEOUT: Duration = Duration::from_secs(30 * 60);

impl HardenedGit {
    /// git on the repository whose git directory is `git_dir` (a path
    /// git-orch knows from its own records), with no work tree.
    pub fn new(git_dir: impl Into<PathBuf>) -> Self {
        Self {
            git_dir: git_dir.into(),
            work_tree: None,
            index: None,
            config: Vec::new(),
            env: Vec::new(),
            timeout: TIMEOUT,
        }
    }

    /// How long each command may run (default [`TIMEOUT`]).
    pub fn timeout(mut self, limit: Duration) -> Self {
        self.timeout = limit;
        self
    }

    /// The work tree git reads and writes files in.
    pub fn work_tree(mut self, dir: impl Into<PathBuf>) -> Self {
        self.work_tree = Some(dir.into());
        self
    }

    /// The index git uses: a file of git-orch's own, never one the agent
    /// could write.
    pub fn index(mut self, file: impl Into<PathBuf>) -> Self {
        self.index = Some(file.into());
        self
    }

    /// One more `-c key=value`, after the forced ones (a caller may tighten
    /// further; nothing here loosens).
    pub fn config(mut self, setting: impl Into<String>) -> Self {
        self.config.push(setting.into());
        self
    }

    /// An environment variable for every command run through this value.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    fn command<I, S>(&self, args: I) -> (Command, String)
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = Command::new("git");
        cmd.env_clear();
        for key in KEPT {
            if let Some(value) = std::env::var_os(key) {
                cmd.env(key, value);
            }
        }
        cmd.env("LC_ALL", "C")
            .env("GIT_DIR", &self.git_dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_ATTR_NOSYSTEM", "1")
            .env("GIT_OPTIONAL_LOCKS", "0")
            .env("GIT_NO_REPLACE_OBJECTS", "1")
            .env("GIT_NO_LAZY_FETCH", "1")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_PAGER", "cat");
        match &self.work_tree {
            Some(w) => {
                cmd.env("GIT_WORK_TREE", w).current_dir(w);
            }
            None => {
                cmd.current_dir(&self.git_dir);
            }
        }
        if let Some(index) = &self.index {
            cmd.env("GIT_INDEX_FILE", index);
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        for setting in FORCED
            .iter()
            .copied()
            .chain(self.config.iter().map(String::as_str))
        {
            cmd.arg("-c").arg(setting);
        }
        let mut shown = String::from("git");
        for a in args {
            shown.push(' ');
            shown.push_str(&a.as_ref().to_string_lossy());
            cmd.arg(a);
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
        let (cmd, shown) = self.command(args);
        output_within(cmd, &shown, self.timeout)
    }

    /// Runs git, requires success and returns stdout without its trailing
    /// newline.
    pub fn run<I, S>(&self, args: I) -> Result<String, ProcessError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let (cmd, shown) = self.command(args);
        let out = output_within(cmd, &shown, self.timeout)?;
        super::git_stdout(shown, out)
    }

    /// The git directory this runs against.
    pub fn git_dir(&self) -> &Path {
        &self.git_dir
    }
}

/// Runs `cmd` to its end, or stops it (its whole process group) once
/// `limit` has passed; its output either way.
fn output_within(mut cmd: Command, shown: &str, limit: Duration) -> Result<Output, ProcessError> {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    let spawn_error = |source| ProcessError::Spawn {
        program: "git".into(),
        source,
    };
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd.spawn().map_err(spawn_error)?;
    let pgid = child.id();
    let read = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = read(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = read(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let status = match rx.recv_timeout(limit) {
        Ok(status) => status.map_err(spawn_error)?,
        Err(_) => {
            super::signal_group(pgid, libc::SIGKILL);
            let _ = rx.recv();
            return Err(ProcessError::Failed {
                command: shown.to_owned(),
                status: "stopped".into(),
                stderr: format!("it ran longer than {}s", limit.as_secs()),
            });
        }
    };
    Ok(Output {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        let ok = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .status()
            .expect("git")
            .success();
        assert!(ok, "git {args:?}");
    }

    /// A work tree whose own `.git` points at a repository with an
    /// fsmonitor payload: a hardened `git add` and `git status` against
    /// the real repository never run it.
    #[test]
    fn a_work_trees_own_git_metadata_is_never_read() {
        let tmp = tempfile::tempdir().expect("tmp");
        let repo = tmp.path().join("repo");
        let evil = tmp.path().join("evil");
        let work = tmp.path().join("work");
        for d in [&repo, &evil, &work] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        git(&repo, &["init", "-q"]);
        git(&evil, &["init", "-q"]);
        let marker = tmp.path().join("pwned");
        let payload = evil.join("payload.sh");
        std::fs::write(&payload, format!("#!/bin/sh\ntouch {}\n", marker.display()))
            .expect("payload");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&payload, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        git(
            &evil,
            &["config", "core.fsmonitor", &payload.to_string_lossy()],
        );
        git(
            &evil,
            &["config", "core.hooksPath", &evil.to_string_lossy()],
        );
        std::fs::write(
            work.join(".git"),
            format!("gitdir: {}\n", evil.join(".git").display()),
        )
        .expect(".git file");
        std::fs::write(work.join("a.txt"), "a\n").expect("file");
        let index = tmp.path().join("index");
        let hardened = HardenedGit::new(repo.join(".git"))
            .work_tree(&work)
            .index(&index);
        hardened.run(["add", "-A"]).expect("add");
        let tree = hardened.run(["write-tree"]).expect("write-tree");
        hardened.run(["status", "--porcelain"]).expect("status");
        assert!(!marker.exists(), "the agent's fsmonitor ran");
        // The tree was written into the real repository, and holds the
        // file but not the `.git` file.
        let listing = HardenedGit::new(repo.join(".git"))
            .run(["ls-tree", "--name-only", &tree])
            .expect("ls-tree");
        assert_eq!(listing, "a.txt");
    }
}
