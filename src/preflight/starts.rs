//! Whether an agent's program is there where the agent will run: found
//! on the `PATH` it gets, and, inside the sandbox it will get, visible
//! with everything it needs to start (a script's interpreter, the script
//! a command template hands to one). Asked in that very sandbox, so what
//! `git orch agents` and a run's preflight say is what an attempt meets.
//!
//! A run looks only (one `test -e` per file in the sandbox, a few
//! milliseconds); `git orch agents` also starts the program with
//! `--version` there. What is found missing names why the sandbox hides
//! it and how to show it ([`crate::sandbox::why_hidden`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::agent::{AgentKind, AgentSpec, PromptInput};
use crate::process::GroupSpec;
use crate::sandbox::{Confine, PrivateHome, Sandbox, exposure};

/// Where an agent's program stands here.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Presence {
    /// There, with what it needs to start (as far as a look can tell).
    Ready,
    /// Not found on the `PATH` the agent gets.
    Missing { program: String },
    /// There outside, but not inside the sandbox.
    Hidden {
        path: String,
        why: String,
        fix: String,
    },
    /// Started inside the sandbox, it could not run at all.
    DoesNotStart { why: String },
    /// The sandbox itself could not be made for it.
    NoSandbox { why: String },
}

impl Presence {
    /// The problem and its fix, when there is one.
    pub fn problem(&self) -> Option<(String, String)> {
        match self {
            Presence::Ready | Presence::Missing { .. } => None,
            Presence::Hidden { path, why, fix } => Some((
                format!("its program {path} is hidden by the sandbox: {why}"),
                fix.clone(),
            )),
            Presence::DoesNotStart { why } => Some((
                format!("its program does not start in the sandbox: {why}"),
                "run `git orch agents` for details; show what it needs with `roBind = …` in the [sandbox] section of .orch/config".into(),
            )),
            Presence::NoSandbox { why } => Some((
                format!("the sandbox cannot be made: {why}"),
                "fix the [sandbox] section of .orch/config".into(),
            )),
        }
    }
}

/// Lists the paths given that do not exist where it runs.
const LOOK: &str = r#"for f; do [ -e "$f" ] || printf 'hidden %s\n' "$f"; done"#;

/// The program and its arguments as the agent is started, its extra
/// environment, and the names of what it starts.
fn invocation(spec: &AgentSpec, sandbox: &Sandbox) -> (String, Vec<(String, String)>, Vec<String>) {
    let dummy = Path::new("/");
    let inv = crate::agent::invocation_in(
        spec,
        &PromptInput {
            prompt: "",
            prompt_file: dummy,
            workdir: dummy,
            task: "preflight",
            attempt: 1,
        },
        &sandbox.permissions(),
    );
    let mut env = spec.env.clone();
    env.extend(inv.env);
    let mut names = vec![inv.program.clone()];
    names.extend(crate::sandbox::agent_programs(spec));
    (inv.program, env, names)
}

/// Where `spec`'s program stands under `sandbox`, for the repository whose
/// git folder is `git_dir` (none: outside one). `path` is the `PATH` the
/// agent gets. With `version`, the first line `--version` prints, when it
/// starts.
pub fn presence(
    spec: &AgentSpec,
    sandbox: &Sandbox,
    git_dir: Option<&Path>,
    path: Option<&str>,
    version: bool,
) -> (Presence, Option<String>) {
    let (program, env, names) = invocation(spec, sandbox);
    let mut files: Vec<PathBuf> = Vec::new();
    for name in &names {
        let Some(file) = exposure::find(name, path).filter(|f| f.exists()) else {
            return (
                Presence::Missing {
                    program: name.clone(),
                },
                None,
            );
        };
        let real = file.canonicalize().unwrap_or_else(|_| file.clone());
        files.extend(exposure::interpreters(&real, path));
        files.push(file);
    }
    // A command template's own program runs as `sh -c`: no version.
    let versioned = version && spec.kind != AgentKind::Command;
    if !sandbox.confines() {
        if let Some(missing) = files.iter().find(|f| !f.exists()) {
            return (
                Presence::Missing {
                    program: missing.display().to_string(),
                },
                None,
            );
        }
        if !versioned {
            return (Presence::Ready, None);
        }
        return match version_of(&program, &env, sandbox, spec) {
            Ok(v) => (Presence::Ready, v),
            Err(why) => (
                Presence::DoesNotStart {
                    why: why.to_string(),
                },
                None,
            ),
        };
    }
    let Ok(home) = PrivateHome::make() else {
        return (
            Presence::NoSandbox {
                why: "no private home folder could be made".into(),
            },
            None,
        );
    };
    let worktree = home.path().join("p/w/t");
    if let Err(e) = std::fs::create_dir_all(&worktree) {
        return (Presence::NoSandbox { why: e.to_string() }, None);
    }
    let confine = Confine {
        worktree: &worktree,
        // Outside a repository there is no git folder to hide.
        common_dir: git_dir.unwrap_or(Path::new("/")),
        readable: &[],
        writable: &[],
        home: home.path(),
        home_files: &[],
        pass_env: &crate::sandbox::agent_pass_env(spec),
        program: &program,
        programs: &crate::sandbox::agent_programs(spec),
        view: crate::sandbox::View::OwnPath,
    };
    let mut args = vec!["-c".to_owned(), LOOK.to_owned(), "look".to_owned()];
    args.extend(files.iter().map(|f| f.to_string_lossy().into_owned()));
    // The probe's folder is no checkout: no warm caches' layers for it
    // (they would outlive it under `.git/orch/warm/`).
    let mut sandbox = sandbox.clone();
    sandbox.warm.cache.clear();
    let sandbox = &sandbox;
    let look = match run_in(sandbox, &confine, "sh", args, &env) {
        Ok(out) => out,
        Err(why) => {
            return (
                Presence::NoSandbox {
                    why: why.to_string(),
                },
                None,
            );
        }
    };
    if let Some(hidden) = look.lines().find_map(|l| l.strip_prefix("hidden ")) {
        let (why, fix) = crate::sandbox::why_hidden(Path::new(hidden), git_dir);
        return (
            Presence::Hidden {
                path: hidden.to_owned(),
                why,
                fix,
            },
            None,
        );
    }
    if !versioned {
        return (Presence::Ready, None);
    }
    match version_in(sandbox, &confine, &program, &env) {
        Ok(v) => (Presence::Ready, v),
        Err(why) => (
            Presence::DoesNotStart {
                why: why.to_string(),
            },
            None,
        ),
    }
}

/// Why a program could not run where an agent would.
#[derive(Debug, thiserror::Error)]
enum CannotStart {
    #[error("{0}")]
    Sandbox(#[from] crate::sandbox::SandboxError),
    #[error("bwrap could not be started")]
    BwrapNotStarted,
    #[error("bwrap failed")]
    BwrapFailed,
    #[error("{program} could not be started")]
    NotStarted { program: String },
    #[error("exit {0:?}")]
    Exit(Option<i32>),
    /// The last line it (or bwrap) printed.
    #[error("{0}")]
    Said(String),
}

/// Runs `program args` confined as `confine` says; its output, or why it
/// could not run (bwrap's own words).
fn run_in(
    sandbox: &Sandbox,
    confine: &Confine,
    program: &str,
    args: Vec<String>,
    env: &[(String, String)],
) -> Result<String, CannotStart> {
    let spec = GroupSpec {
        program: program.to_owned(),
        args,
        cwd: confine.worktree.to_owned(),
        env: env.to_vec(),
        env_remove: Vec::new(),
        env_clear: false,
        stdin: None,
        stdout: PathBuf::new(),
        stderr: PathBuf::new(),
        filter: None,
        on_line: None,
    };
    let wrapped = sandbox.wrap(spec, confine)?;
    let (code, out) = crate::process::capture(
        &wrapped.program,
        &wrapped.args,
        &wrapped.env,
        Duration::from_secs(20),
    )
    .ok_or(CannotStart::BwrapNotStarted)?;
    match code {
        Some(0) => Ok(out),
        _ => Err(last_line(&out).map_or(CannotStart::BwrapFailed, CannotStart::Said)),
    }
}

/// The first line `program --version` prints in the sandbox; an error
/// when it could not start there at all.
fn version_in(
    sandbox: &Sandbox,
    confine: &Confine,
    program: &str,
    env: &[(String, String)],
) -> Result<Option<String>, CannotStart> {
    let spec = GroupSpec {
        program: program.to_owned(),
        args: vec!["--version".to_owned()],
        cwd: confine.worktree.to_owned(),
        env: env.to_vec(),
        env_remove: Vec::new(),
        env_clear: false,
        stdin: None,
        stdout: PathBuf::new(),
        stderr: PathBuf::new(),
        filter: None,
        on_line: None,
    };
    let wrapped = sandbox.wrap(spec, confine)?;
    let Some((code, out)) = crate::process::capture(
        &wrapped.program,
        &wrapped.args,
        &wrapped.env,
        Duration::from_secs(20),
    ) else {
        return Err(CannotStart::BwrapNotStarted);
    };
    judge_version(code, &out)
}

/// `--version` outside a sandbox (`sandbox = none`), with the
/// environment the agent gets.
fn version_of(
    program: &str,
    env: &[(String, String)],
    sandbox: &Sandbox,
    spec: &AgentSpec,
) -> Result<Option<String>, CannotStart> {
    let full = sandbox.environment(&crate::sandbox::agent_pass_env(spec), env);
    let Some((code, out)) = crate::process::capture(
        program,
        &["--version".to_owned()],
        &full,
        Duration::from_secs(20),
    ) else {
        return Err(CannotStart::NotStarted {
            program: program.to_owned(),
        });
    };
    judge_version(code, &out)
}

/// What a `--version` run says: its first line when it exited 0;
/// nothing when it ran but said no version (an option it does not know);
/// an error when it could not start (not found, not executable, a
/// library or interpreter missing).
fn judge_version(code: Option<i32>, out: &str) -> Result<Option<String>, CannotStart> {
    let could_not_start = matches!(code, Some(126 | 127))
        || out.contains("bwrap: execvp")
        || out.contains("error while loading shared libraries")
        || out.contains("bad interpreter");
    if could_not_start {
        return Err(last_line(out).map_or(CannotStart::Exit(code), CannotStart::Said));
    }
    Ok((code == Some(0))
        .then(|| version_line(out))
        .flatten()
        .map(str::to_owned))
}

/// Whether `line` holds a version number (`1.2`, `0.169.0`).
fn has_version(line: &str) -> bool {
    let b = line.as_bytes();
    b.windows(3)
        .any(|w| w[0].is_ascii_digit() && w[1] == b'.' && w[2].is_ascii_digit())
}

/// The line of `--version` output that names the version: the first with
/// a version number (a CLI may warn first: Codex about its helpers under
/// /tmp), else the first.
pub(crate) fn version_line(out: &str) -> Option<&str> {
    let lines = || out.lines().map(str::trim).filter(|l| !l.is_empty());
    lines().find(|l| has_version(l)).or_else(|| lines().next())
}

fn last_line(out: &str) -> Option<String> {
    out.lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .map(|l| l.chars().take(300).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_run_that_could_not_start_is_an_error() {
        assert_eq!(
            judge_version(Some(0), "claude 2.1\n").ok(),
            Some(Some("claude 2.1".into()))
        );
        assert_eq!(judge_version(Some(2), "unknown option\n").ok(), Some(None));
        assert!(judge_version(Some(1), "bwrap: execvp claude: No such file or directory").is_err());
        assert!(judge_version(Some(127), "").is_err());
        assert!(
            judge_version(
                Some(127),
                "x: error while loading shared libraries: libfoo.so: cannot open shared object file"
            )
            .is_err()
        );
    }
}
