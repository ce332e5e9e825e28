//! The only place that starts other programs.
//!
//! Two kinds of children exist: the `git` binary, for what gix cannot or
//! should not do (fetch and push with the user's credentials, gc, commits in a
//! populated worktree, signing), and long-running commands (agents, gates)
//! that run in a process group of their own so a timeout can stop the whole
//! tree with `killpg`. Nothing here knows about plans or runs.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

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
        let mut script = String::from("git -C \"$0\"");
        for i in 0..args.len() {
            script.push_str(&format!(" \"${}\"", i + 1));
        }
        script.push_str(" >/dev/null 2>&1 </dev/null &");
        let status = Command::new("sh")
            .arg("-c")
            .arg(script)
            .arg(&self.dir)
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
                command: format!("sh -c 'git {} &'", args.join(" ")),
                status: status.to_string(),
                stderr: String::new(),
            });
        }
        Ok(())
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
}
