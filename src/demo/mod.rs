//! `git orch demo`: the whole loop, plan to landed commits, on a throwaway
//! repository, offline.
//!
//! The demo makes a folder (a temp dir, or `--keep DIR`) holding `project/`,
//! a small real project committed on `main`, and `plan.json` beside it.
//! Then it runs the very commands a user would (`git orch plan check`,
//! `plan add`, `approve`, `run`, `status`, `log`, `git log --notes=orch`) as
//! child processes of this build in that project, so what the newcomer sees
//! are real command lines and their real output, and the state they leave
//! is exactly what a user's run would leave.
//!
//! This module decides what happens and streams it as [`Event`]s; it never
//! prints (the `cli` renders the events) and it starts programs only
//! through `process`. The children get a hermetic git: no global or system
//! git config (a user's `commit.gpgsign` or hooks must not break the demo),
//! a fixed demo identity in the environment (no `user.name` needed), and
//! this build's folder first on `PATH`, so `git orch` and the scripted agent
//! (`git-orch demo-agent`, see `agent`) are this very binary. Nothing is
//! written outside the demo's folder; the user's repository, if the demo
//! starts inside one, is only read (for an agent configured there).

pub mod agent;
pub mod project;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::agent::{AgentKind, AgentSpec};
use crate::plan::Plan;

/// What the user asked for.
#[derive(Debug, Clone)]
pub struct Options {
    /// Keep the demo in this folder (new or empty) instead of a temp dir.
    pub keep: Option<PathBuf>,
    /// A real agent instead of the scripted one.
    pub agent: Option<String>,
    /// This program; its folder goes first on the children's `PATH`.
    pub exe: PathBuf,
    /// Where the demo was started: relative `--keep` paths start here, and
    /// an agent configured in a project here may be used.
    pub cwd: PathBuf,
}

/// Who writes the code.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentChoice {
    /// The built-in scripted agent, with its two planned mistakes.
    Scripted,
    /// A real agent: a built-in kind, or one configured in the project the
    /// demo started in (its section is copied into the demo's config).
    Real {
        name: String,
        kind: AgentKind,
        section: Option<String>,
    },
}

impl AgentChoice {
    /// The name `git orch run --agent` takes.
    pub fn name(&self) -> &str {
        match self {
            AgentChoice::Scripted => project::DEMO_AGENT,
            AgentChoice::Real { name, .. } => name,
        }
    }
}

/// The steps of the demo, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// A small real project, committed on `main`.
    Project,
    /// The plan, written and checked.
    Plan,
    /// The plan stored and approved.
    Approve,
    /// The run: attempts, gates, retries, the merge queue.
    Run,
    /// Where every task stands.
    Status,
    /// The event journal.
    Journal,
    /// Notes on the landed commits.
    Notes,
    /// The project after the run.
    Result,
}

impl Stage {
    pub const ALL: [Stage; 8] = [
        Stage::Project,
        Stage::Plan,
        Stage::Approve,
        Stage::Run,
        Stage::Status,
        Stage::Journal,
        Stage::Notes,
        Stage::Result,
    ];

    /// The step's number, from 1.
    pub fn number(self) -> usize {
        Stage::ALL
            .iter()
            .position(|s| *s == self)
            .expect("every stage is listed")
            + 1
    }
}

/// What the demo is doing, as it happens.
#[derive(Debug)]
pub enum Event<'a> {
    /// The folder is ready.
    Started {
        dir: &'a Path,
        project: &'a Path,
        kept: bool,
        agent: &'a AgentChoice,
    },
    /// A new step begins.
    Stage(Stage),
    /// The files of the project's first commit.
    Files(&'a [&'a str]),
    /// The plan written to `plan.json`.
    Plan(&'a Plan),
    /// A command about to run in the project, as a user would type it.
    Command(&'a str),
    /// One line of its output (stdout and stderr, in order).
    Line(&'a str),
}

/// How the demo ended.
#[derive(Debug)]
pub struct Finished {
    /// The demo's folder (gone unless kept).
    pub dir: PathBuf,
    /// The project repository inside it.
    pub project: PathBuf,
    pub kept: bool,
    pub elapsed: Duration,
}

/// Why the demo could not run or stopped.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("--keep {0} is not an empty folder; the demo only writes into a new or empty one")]
    KeepNotEmpty(PathBuf),
    #[error("no agent named {name:?}")]
    UnknownAgent { name: String },
    #[error("agent {name}: {source}")]
    BadAgent {
        name: String,
        #[source]
        source: crate::agent::AgentError,
    },
    #[error("agent {name} runs `{program}`, which is not on PATH")]
    AgentMissing {
        name: String,
        program: String,
        install: String,
    },
    /// Its preflight failed where it would run (no key, hidden by the
    /// sandbox): the demo's run would stop at once.
    #[error("agent {name} cannot work here: {problem}")]
    AgentCannotWork {
        name: String,
        problem: String,
        fix: String,
    },
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("could not run `{command}`: {source}")]
    Spawn {
        command: String,
        #[source]
        source: crate::process::ProcessError,
    },
    #[error("`{command}` {status}; the demo stopped")]
    StepFailed {
        command: String,
        status: String,
        project: PathBuf,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> DemoError {
    let what = what.into();
    move |source| DemoError::Io { what, source }
}

/// How to install the program of a built-in agent kind.
fn install_hint(kind: AgentKind, program: &str) -> String {
    match kind {
        AgentKind::Claude => {
            "install Claude Code (`npm install -g @anthropic-ai/claude-code`)".into()
        }
        AgentKind::Codex => "install the Codex CLI (`npm install -g @openai/codex`)".into(),
        AgentKind::Gemini => "install the Gemini CLI (`npm install -g @google/gemini-cli`)".into(),
        AgentKind::Aider => {
            "install Aider (`python -m pip install aider-install && aider-install`)".into()
        }
        AgentKind::Fake => "put the fixtures/agents folder of git-orch's source on PATH".into(),
        AgentKind::Command => format!("install `{program}`"),
    }
}

/// Quotes a value for a git-config file.
fn config_value(value: &str) -> String {
    let mut out = String::from("\"");
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `[agent "NAME"]` as configured in the project at `cwd`, if any.
fn configured_agent(cwd: &Path, name: &str) -> Option<BTreeMap<String, Vec<String>>> {
    let store = crate::store::Store::discover(cwd).ok()?;
    let head = store.resolve_commit("HEAD").ok()??;
    let values = store.project_config(Some(head)).ok()?;
    let settings = crate::config::Settings::from_values(&values).ok()?;
    settings.agents.get(name).cloned()
}

/// Settles who writes the code, before anything is written: an unknown
/// agent, a missing program or one that fails its preflight where the
/// demo's run would start it is an error naming the fix.
pub fn choose_agent(name: Option<&str>, cwd: &Path) -> Result<AgentChoice, DemoError> {
    let name = match name {
        None => return Ok(AgentChoice::Scripted),
        Some(n) if n == project::DEMO_AGENT => return Ok(AgentChoice::Scripted),
        Some(n) => n,
    };
    let (spec, section) = match AgentSpec::builtin(name) {
        Some(spec) => (spec, None),
        None => {
            let values = configured_agent(cwd, name).ok_or_else(|| DemoError::UnknownAgent {
                name: name.to_owned(),
            })?;
            let spec =
                AgentSpec::from_config(name, &values).map_err(|source| DemoError::BadAgent {
                    name: name.to_owned(),
                    source,
                })?;
            let mut text = format!("[agent {}]\n", config_value(name));
            for (key, vals) in &values {
                for v in vals {
                    text.push_str(&format!("\t{key} = {}\n", config_value(v)));
                }
            }
            (spec, Some(text))
        }
    };
    if let Some(program) = crate::agent::probe_program(&spec)
        && !crate::process::on_path(&program)
    {
        return Err(DemoError::AgentMissing {
            name: name.to_owned(),
            install: install_hint(spec.kind, &program),
            program,
        });
    }
    // The demo's project keeps the default sandbox settings.
    let sandbox = crate::sandbox::resolve(&crate::config::SandboxSettings::default())
        .unwrap_or_else(|_| crate::sandbox::Sandbox::none());
    if let Some((problem, fix)) = crate::preflight::check(&spec, &sandbox, None, false).blocking() {
        return Err(DemoError::AgentCannotWork {
            name: name.to_owned(),
            problem,
            fix,
        });
    }
    Ok(AgentChoice::Real {
        name: name.to_owned(),
        kind: spec.kind,
        section,
    })
}

/// The demo's folder: a temp dir removed at the end, or the kept one.
enum Folder {
    Temp(tempfile::TempDir),
    Kept(PathBuf),
}

impl Folder {
    fn path(&self) -> &Path {
        match self {
            Folder::Temp(t) => t.path(),
            Folder::Kept(p) => p,
        }
    }
}

fn make_folder(keep: Option<&Path>, cwd: &Path) -> Result<Folder, DemoError> {
    let Some(dir) = keep else {
        let t = tempfile::Builder::new()
            .prefix("git-orch-demo-")
            .tempdir()
            .map_err(io("cannot make a temp folder for the demo"))?;
        return Ok(Folder::Temp(t));
    };
    let dir = cwd.join(dir);
    if dir.exists() {
        let mut entries =
            std::fs::read_dir(&dir).map_err(|_| DemoError::KeepNotEmpty(dir.clone()))?;
        if entries.next().is_some() {
            return Err(DemoError::KeepNotEmpty(dir));
        }
    } else {
        std::fs::create_dir_all(&dir).map_err(io(format!("cannot make {}", dir.display())))?;
    }
    let dir = dir
        .canonicalize()
        .map_err(io(format!("cannot resolve {}", dir.display())))?;
    Ok(Folder::Kept(dir))
}

/// Runs commands in the project and streams them as events.
struct Shell<'e, 'f> {
    project: PathBuf,
    env: Vec<(String, String)>,
    emit: &'e mut (dyn FnMut(Event<'_>) + 'f),
}

/// Shows an argument as a shell would need it typed (`--format='%h %s'`).
fn shown(arg: &str) -> String {
    let plain = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./=:@%+,".contains(c))
    };
    if plain(arg) {
        return arg.to_owned();
    }
    match arg.split_once('=') {
        Some((option, value)) if option.starts_with("--") && plain(option) => {
            format!("{option}={}", crate::process::shell_quote(value))
        }
        _ => crate::process::shell_quote(arg),
    }
}

impl Shell<'_, '_> {
    /// Runs `program args…` in the project, showing it; returns its exit
    /// code.
    fn run(&mut self, program: &str, args: &[&str]) -> Result<Option<i32>, DemoError> {
        let line = std::iter::once(program.to_owned())
            .chain(args.iter().map(|a| shown(a)))
            .collect::<Vec<_>>()
            .join(" ");
        (self.emit)(Event::Command(&line));
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        let emit = &mut *self.emit;
        crate::process::run_lines(
            OsStr::new(program),
            &args,
            &self.project,
            &self.env,
            &mut |l| emit(Event::Line(l)),
        )
        .map_err(|source| DemoError::Spawn {
            command: line.clone(),
            source,
        })
        .and_then(|code| match code {
            Some(0) => Ok(code),
            _ => Err(DemoError::StepFailed {
                command: line.clone(),
                status: match code {
                    Some(c) => format!("exited {c}"),
                    None => "was killed by a signal".into(),
                },
                project: self.project.clone(),
            }),
        })
    }
}

/// The identity of every commit the demo and its agents make.
const DEMO_NAME: &str = "git-orch demo";
const DEMO_EMAIL: &str = "demo@git-orch.invalid";

/// The children's environment: hermetic git, demo identity, this build
/// first on PATH.
fn child_env(exe: &Path) -> Vec<(String, String)> {
    let mut path = exe
        .parent()
        .map(|p| p.as_os_str().to_owned())
        .unwrap_or_default();
    if let Some(rest) = std::env::var_os("PATH") {
        path.push(":");
        path.push(rest);
    }
    vec![
        ("PATH".into(), path.to_string_lossy().into_owned()),
        ("GIT_CONFIG_GLOBAL".into(), "/dev/null".into()),
        ("GIT_CONFIG_NOSYSTEM".into(), "1".into()),
        ("GIT_AUTHOR_NAME".into(), DEMO_NAME.into()),
        ("GIT_AUTHOR_EMAIL".into(), DEMO_EMAIL.into()),
        ("GIT_COMMITTER_NAME".into(), DEMO_NAME.into()),
        ("GIT_COMMITTER_EMAIL".into(), DEMO_EMAIL.into()),
    ]
}

/// Runs the demo, streaming what happens to `emit`.
pub fn run(opts: &Options, emit: &mut dyn FnMut(Event<'_>)) -> Result<Finished, DemoError> {
    let start = Instant::now();
    let agent = choose_agent(opts.agent.as_deref(), &opts.cwd)?;
    let folder = make_folder(opts.keep.as_deref(), &opts.cwd)?;
    let dir = folder.path().to_owned();
    let project = dir.join("project");
    emit(Event::Started {
        dir: &dir,
        project: &project,
        kept: matches!(folder, Folder::Kept(_)),
        agent: &agent,
    });
    let mut shell = Shell {
        project: project.clone(),
        env: child_env(&opts.exe),
        emit,
    };
    match steps(&mut shell, &dir, &agent) {
        Ok(()) => {
            let kept = matches!(folder, Folder::Kept(_));
            // A temp folder goes here, with everything the run left in it.
            drop(folder);
            Ok(Finished {
                dir,
                project,
                kept,
                elapsed: start.elapsed(),
            })
        }
        Err(e) => {
            // Keep what failed, so it can be looked at.
            if let Folder::Temp(t) = folder {
                let _ = t.keep();
            }
            Err(e)
        }
    }
}

/// Where the agent's output of one attempt is kept, relative to the
/// project: `.git/orch/logs/<run>/<task>/attempt-<n>/agent.out` of the
/// demo's only run.
fn agent_output(project: &Path, task: &str, attempt: u32) -> Result<String, DemoError> {
    let logs = project.join(".git/orch/logs");
    let run = std::fs::read_dir(&logs)
        .map_err(io(format!("cannot read {}", logs.display())))?
        .filter_map(Result::ok)
        .find(|e| e.path().is_dir())
        .ok_or_else(|| DemoError::Io {
            what: format!("no run in {}", logs.display()),
            source: std::io::ErrorKind::NotFound.into(),
        })?;
    Ok(format!(
        ".git/orch/logs/{}/{task}/attempt-{attempt}/agent.out",
        run.file_name().to_string_lossy()
    ))
}

fn steps(shell: &mut Shell<'_, '_>, dir: &Path, agent: &AgentChoice) -> Result<(), DemoError> {
    let project = shell.project.clone();
    (shell.emit)(Event::Stage(Stage::Project));
    let files = project::seed_files();
    let mut config = project::ORCH_CONFIG.to_owned();
    if let AgentChoice::Real {
        section: Some(s), ..
    } = agent
    {
        config.push_str(s);
    }
    for (path, text) in &files {
        let text = if *path == ".orch/config" {
            &config
        } else {
            *text
        };
        let full = project.join(path);
        let parent = full.parent().expect("project files are in a folder");
        std::fs::create_dir_all(parent).map_err(io(format!("cannot make {}", parent.display())))?;
        std::fs::write(&full, text).map_err(io(format!("cannot write {}", full.display())))?;
    }
    let names: Vec<&str> = files.iter().map(|(p, _)| *p).collect();
    (shell.emit)(Event::Files(&names));
    shell.run("git", &["init", "-q", "-b", project::TARGET])?;
    shell.run("git", &["add", "-A"])?;
    shell.run("git", &["commit", "-q", "-m", project::SEED_MESSAGE])?;
    shell.run("cat", &[".orch/config"])?;
    shell.run("sh", &["test.sh"])?;

    (shell.emit)(Event::Stage(Stage::Plan));
    let plan_json = project::plan();
    let bytes = serde_json::to_vec_pretty(&plan_json).expect("the plan serialises");
    let plan = crate::plan::format::parse(&bytes).expect("the demo's plan is valid");
    let plan_file = dir.join("plan.json");
    std::fs::write(&plan_file, &bytes)
        .map_err(io(format!("cannot write {}", plan_file.display())))?;
    (shell.emit)(Event::Plan(&plan));
    shell.run("git", &["orch", "plan", "check", "../plan.json"])?;

    (shell.emit)(Event::Stage(Stage::Approve));
    shell.run("git", &["orch", "plan", "add", "../plan.json"])?;
    shell.run(
        "git",
        &[
            "orch",
            "approve",
            project::PLAN_ID,
            "--approver",
            DEMO_NAME,
            "--note",
            "Reviewed: disjoint files, real tests, ci runs alone",
        ],
    )?;

    (shell.emit)(Event::Stage(Stage::Run));
    match agent {
        AgentChoice::Scripted => shell.run("git", &["orch", "run", project::PLAN_ID])?,
        AgentChoice::Real { name, .. } => {
            shell.run("git", &["orch", "run", project::PLAN_ID, "--agent", name])?
        }
    };

    (shell.emit)(Event::Stage(Stage::Status));
    shell.run("git", &["orch", "status"])?;

    (shell.emit)(Event::Stage(Stage::Journal));
    shell.run("git", &["orch", "log", "--task", "reverse"])?;
    if *agent == AgentChoice::Scripted {
        let out = agent_output(&project, "reverse", 2)?;
        shell.run("cat", &[&out])?;
    }

    (shell.emit)(Event::Stage(Stage::Notes));
    shell.run(
        "git",
        &["log", "--notes=orch", "--format=%h %s%n%N", project::TARGET],
    )?;

    (shell.emit)(Event::Stage(Stage::Result));
    shell.run("sh", &["test.sh"])?;
    shell.run("sh", &["tt.sh", "shout", "it works"])?;
    Ok(())
}
