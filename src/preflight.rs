//! Whether each agent can work here, before any attempt starts it: its
//! program installed, its version, and the checks of `agent::preflight`
//! against the environment and home files the agent will really get
//! (allow-listed, sandboxed or not).
//!
//! Whether the program is there is asked inside the sandbox the agent
//! will run in ([`starts`]): a program the sandbox hides is not "ready".
//!
//! `git orch agents` shows the whole report; a run asks [`before_run`]
//! before it starts, and stops there when a task has no agent that can
//! work; the runner asks [`runnable`] before it starts an agent, so one
//! that cannot work (no API key, Claude as root outside a sandbox) is
//! skipped for the next agent of the fallback chain with the fix in the
//! reason, instead of failing every attempt.

pub mod starts;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Mutex, OnceLock};

use crate::agent::preflight::{self, Finding, Probe, Severity};
use crate::agent::{AgentKind, AgentSpec, PromptInput};
use crate::config::Settings;
use crate::sandbox::Sandbox;

/// What is known about one agent here.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AgentReport {
    pub name: String,
    pub kind: AgentKind,
    /// The program it runs (`None` for a command template).
    pub program: Option<String>,
    pub installed: bool,
    /// The first line of `<program> --version`, when asked for.
    pub version: Option<String>,
    /// Whether its program is there where it runs (inside the sandbox).
    pub presence: starts::Presence,
    pub findings: Vec<Finding>,
}

impl AgentReport {
    /// Whether nothing stops the agent from working.
    pub fn ready(&self) -> bool {
        self.installed && self.findings.iter().all(|f| f.severity != Severity::Error)
    }

    /// The first blocking problem with its fix, in one line.
    pub fn blocker(&self) -> Option<String> {
        self.blocking()
            .map(|(problem, fix)| format!("{problem} (fix: {fix})"))
    }

    /// The first blocking problem and its fix.
    pub fn blocking(&self) -> Option<(String, String)> {
        if !self.installed {
            let missing = match &self.presence {
                starts::Presence::Missing { program } => program.clone(),
                _ => self.program.clone().unwrap_or_else(|| "its program".into()),
            };
            let fix = match self.kind {
                AgentKind::Command => format!(
                    "install it, or fix `command` in [agent \"{}\"] of .orch/config",
                    self.name
                ),
                kind => kind.install_hint().to_owned(),
            };
            return Some((format!("{missing} not found on PATH"), fix));
        }
        self.findings
            .iter()
            .find(|f| f.severity == Severity::Error)
            .map(|f| (f.problem.clone(), f.fix_line(&self.name)))
    }
}

/// The environment `spec`'s agent gets under `sandbox`, as a map.
fn agent_env(spec: &AgentSpec, sandbox: &Sandbox) -> BTreeMap<String, String> {
    let dummy = std::path::Path::new("/");
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
    let mut set = spec.env.clone();
    set.extend(inv.env);
    sandbox
        .environment(&crate::sandbox::agent_pass_env(spec), &set)
        .into_iter()
        .collect()
}

/// Checks `spec` here, for the repository whose git folder is `git_dir`
/// (none: outside one); with `version`, also starts the program with
/// `--version` where it will run (slow for Node programs, so the runner
/// does not).
pub fn check(
    spec: &AgentSpec,
    sandbox: &Sandbox,
    git_dir: Option<&Path>,
    version: bool,
) -> AgentReport {
    let program = crate::agent::probe_program(spec);
    let env = agent_env(spec, sandbox);
    let (presence, version) = starts::presence(
        spec,
        sandbox,
        git_dir,
        env.get("PATH").map(String::as_str),
        version,
    );
    let installed = !matches!(presence, starts::Presence::Missing { .. });
    let reader = sandbox.home_reader(&crate::sandbox::agent_home_files(spec));
    let mut findings: Vec<Finding> = presence
        .problem()
        .map(|(problem, fix)| Finding {
            severity: Severity::Error,
            problem,
            fix,
            paste: None,
        })
        .into_iter()
        .collect();
    findings.extend(preflight::check(
        spec,
        &Probe {
            env: &env,
            home_file: &reader,
            root: crate::process::is_root(),
            sandboxed: sandbox.confines(),
        },
    ));
    AgentReport {
        name: spec.name.clone(),
        kind: spec.kind,
        program,
        installed,
        version,
        presence,
        findings,
    }
}

/// Whether `spec` can work here, in the repository whose git folder is
/// `git_dir`: its program there where it runs, and its preflight passed;
/// the problem and its fix if not. Checked once per agent configuration,
/// sandbox and process.
pub fn runnable(
    spec: &AgentSpec,
    sandbox: &Sandbox,
    git_dir: Option<&Path>,
) -> Result<(), (String, String)> {
    type Seen = BTreeMap<String, Result<(), (String, String)>>;
    static SEEN: OnceLock<Mutex<Seen>> = OnceLock::new();
    let seen = SEEN.get_or_init(Default::default);
    // The whole spec: a worker runs plans whose sections of one name
    // differ.
    let key = format!("{spec:?}\u{0}{sandbox:?}\u{0}{git_dir:?}");
    if let Some(r) = seen.lock().expect("preflight cache lock").get(&key) {
        return r.clone();
    }
    let report = check(spec, sandbox, git_dir, false);
    let result = report.blocking().map_or(Ok(()), Err);
    seen.lock()
        .expect("preflight cache lock")
        .insert(key, result.clone());
    result
}

/// What a run says once at its start: how agents are confined (a warning
/// when `auto` found no sandbox).
pub fn notices(settings: &Settings) -> Vec<String> {
    match crate::sandbox::resolve(&settings.sandbox) {
        // Said at every start, `none` included: whoever reads the run's
        // output knows how its agents were confined.
        Ok(sandbox) => vec![match sandbox.warning() {
            Some(w) => format!("warning: {w}"),
            None => format!("sandbox: {}", sandbox.describe()),
        }],
        Err(e) => vec![e.to_string()],
    }
}

/// An agent that cannot work here and leaves tasks with no agent that
/// can: a run does not start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    pub agent: String,
    /// The tasks whose every agent cannot work; empty when that is every
    /// task of the run.
    pub tasks: Vec<String>,
    pub problem: String,
    pub fix: String,
}

/// What a run learns before it starts anything.
#[derive(Debug, Clone, Default)]
pub struct BeforeRun {
    /// Agents that cannot work, each with a task that falls back past it:
    /// warnings.
    pub warnings: Vec<String>,
    /// Agents that leave tasks with none that can work: the run stops.
    pub blocked: Vec<Blocked>,
}

/// Checks the agents of a run before it starts: `chains` holds each task
/// to run with its agents in fallback order. A task needs one of its
/// agents to work here (known, its program there inside the sandbox, its
/// preflight passed); an agent that cannot, where a later one can, is a
/// warning. The sandbox's binds are checked first: they concern every
/// agent.
pub fn before_run(
    settings: &Settings,
    chains: &[(String, Vec<String>)],
    git_dir: &Path,
) -> Result<BeforeRun, crate::sandbox::SandboxError> {
    let sandbox = crate::sandbox::resolve(&settings.sandbox)?;
    sandbox.check_binds(Some(git_dir))?;
    let mut verdicts: BTreeMap<&str, Result<(), (String, String)>> = BTreeMap::new();
    let mut out = BeforeRun::default();
    for (task, chain) in chains {
        for name in chain {
            verdicts.entry(name).or_insert_with(|| {
                match AgentSpec::resolve(name, &settings.agents) {
                    Ok(spec) => runnable(&spec, &sandbox, Some(git_dir)),
                    Err(e) => Err((
                        e.to_string(),
                        e.fix().unwrap_or_else(|| "fix the agent's name".to_owned()),
                    )),
                }
            });
        }
        let works = chain.iter().find(|n| verdicts[n.as_str()].is_ok());
        for name in chain {
            let Err((problem, fix)) = &verdicts[name.as_str()] else {
                break;
            };
            match works {
                Some(next) => {
                    let w = format!(
                        "agent {name} cannot work here: {problem} (fix: {fix}); its tasks fall back to {next}"
                    );
                    if !out.warnings.contains(&w) {
                        out.warnings.push(w);
                    }
                }
                None => match out.blocked.iter_mut().find(|b| b.agent == *name) {
                    Some(b) => {
                        if !b.tasks.contains(task) {
                            b.tasks.push(task.clone());
                        }
                    }
                    None => out.blocked.push(Blocked {
                        agent: name.clone(),
                        tasks: vec![task.clone()],
                        problem: problem.clone(),
                        fix: fix.clone(),
                    }),
                },
            }
        }
    }
    // Every task blocked: the message need not list them.
    let all: std::collections::BTreeSet<&String> = chains.iter().map(|(t, _)| t).collect();
    for b in &mut out.blocked {
        if b.tasks.iter().collect::<std::collections::BTreeSet<_>>() == all {
            b.tasks.clear();
        }
    }
    Ok(out)
}

/// Everything `git orch agents` shows.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Survey {
    pub sandbox: SandboxReport,
    pub agents: Vec<AgentReport>,
}

/// The sandbox as a run here would get it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SandboxReport {
    /// What the settings (or `GIT_ORCH_SANDBOX`) ask for.
    pub requested: String,
    /// What runs would use: `bwrap` or `none`; absent when the request
    /// cannot be met (runs are refused).
    pub in_force: Option<String>,
    /// One line for people.
    pub summary: String,
    /// What makes the sandbox work as set, when it does not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
    pub network: bool,
}

/// The agents worth showing: the four CLIs git-orch knows, then every
/// `[agent "NAME"]` of the settings; or exactly `names`.
pub fn survey(
    settings: &Settings,
    git_dir: Option<&Path>,
    names: &[String],
    versions: bool,
) -> Result<Survey, crate::agent::AgentError> {
    let resolved = crate::sandbox::resolve(&settings.sandbox).and_then(|sb| {
        sb.check_binds(git_dir)?;
        Ok(sb)
    });
    let (sandbox, report) = match resolved {
        Ok(sb) => {
            let report = SandboxReport {
                requested: sb.requested.to_owned(),
                in_force: Some(sb.kind.as_str().to_owned()),
                summary: sb.describe(),
                fix: None,
                network: sb.network,
            };
            (sb, report)
        }
        Err(e) => {
            let report = SandboxReport {
                requested: settings.sandbox.mode.as_str().to_owned(),
                in_force: None,
                summary: e.to_string(),
                fix: e.fix(),
                network: settings.sandbox.network,
            };
            // Agents are still checked as if unconfined.
            (crate::sandbox::Sandbox::none(), report)
        }
    };
    let mut wanted: Vec<String> = if names.is_empty() {
        ["claude", "codex", "gemini", "aider"]
            .iter()
            .map(|s| (*s).to_owned())
            .chain(settings.agents.keys().cloned())
            .collect()
    } else {
        names.to_vec()
    };
    let mut seen = std::collections::BTreeSet::new();
    wanted.retain(|n| seen.insert(n.clone()));
    let mut agents = Vec::new();
    // A sandbox that cannot be used as set refuses every run: no agent is
    // ready, whatever the checks made as if unconfined say.
    let refused = report.in_force.is_none().then(|| Finding {
        severity: Severity::Error,
        problem: format!("runs are refused here: {}", report.summary),
        fix: report
            .fix
            .clone()
            .unwrap_or_else(|| "fix the [sandbox] settings".to_owned()),
        paste: None,
    });
    for name in wanted {
        let spec = AgentSpec::resolve(&name, &settings.agents)?;
        let mut report = check(&spec, &sandbox, git_dir, versions);
        if let Some(f) = &refused {
            report.findings.insert(0, f.clone());
        }
        agents.push(report);
    }
    Ok(Survey {
        sandbox: report,
        agents,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use starts::version_line;

    #[test]
    fn the_version_line_is_the_one_with_a_number() {
        assert_eq!(
            version_line(
                "WARNING: proceeding, even though we could not create PATH aliases: Refusing to create helper binaries under temporary dir \"/tmp\"\ncodex-cli 0.169.0\n"
            ),
            Some("codex-cli 0.169.0")
        );
        assert_eq!(
            version_line("\n2.1.197 (Claude Code)\n"),
            Some("2.1.197 (Claude Code)")
        );
        assert_eq!(version_line("mytool dev\n"), Some("mytool dev"));
        assert_eq!(version_line(""), None);
    }
}
