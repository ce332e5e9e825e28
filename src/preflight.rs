//! Whether each agent can work here, before any attempt starts it: its
//! program installed, its version, and the checks of `agent::preflight`
//! against the environment and home files the agent will really get
//! (allow-listed, sandboxed or not).
//!
//! `git orch agents` shows the whole report; the runner asks
//! [`runnable`] before it starts an agent, so one that cannot work (no API
//! key, Claude as root outside a sandbox) is skipped for the next agent of
//! the fallback chain with the fix in the reason, instead of failing every
//! attempt.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

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
    pub findings: Vec<Finding>,
}

impl AgentReport {
    /// Whether nothing stops the agent from working.
    pub fn ready(&self) -> bool {
        self.installed && self.findings.iter().all(|f| f.severity != Severity::Error)
    }

    /// The first blocking problem with its fix, in one line.
    pub fn blocker(&self) -> Option<String> {
        if !self.installed {
            return Some(format!(
                "{} not found on PATH ({})",
                self.program.as_deref().unwrap_or("its program"),
                self.kind.install_hint()
            ));
        }
        self.findings
            .iter()
            .find(|f| f.severity == Severity::Error)
            .map(|f| format!("{} (fix: {})", f.problem, f.fix_line(&self.name)))
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

/// Whether `line` holds a version number (`1.2`, `0.169.0`).
fn has_version(line: &str) -> bool {
    let b = line.as_bytes();
    b.windows(3)
        .any(|w| w[0].is_ascii_digit() && w[1] == b'.' && w[2].is_ascii_digit())
}

/// The line of `--version` output that names the version: the first with
/// a version number (a CLI may warn first: Codex about its helpers under
/// /tmp), else the first.
fn version_line(out: &str) -> Option<&str> {
    let lines = || out.lines().map(str::trim).filter(|l| !l.is_empty());
    lines().find(|l| has_version(l)).or_else(|| lines().next())
}

/// Checks `spec` here; with `version`, also asks the program its version
/// (slow for Node programs, so the runner does not).
pub fn check(spec: &AgentSpec, sandbox: &Sandbox, version: bool) -> AgentReport {
    let program = crate::agent::probe_program(spec);
    let installed = program.as_deref().is_none_or(crate::process::on_path);
    let env = agent_env(spec, sandbox);
    let version = match (&program, installed && version) {
        (Some(p), true) => {
            let pairs: Vec<(String, String)> =
                env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            crate::process::capture(
                p,
                &["--version".to_owned()],
                &pairs,
                Duration::from_secs(20),
            )
            .and_then(|(code, out)| {
                let line = version_line(&out)?;
                (code == Some(0)).then(|| line.to_owned())
            })
        }
        _ => None,
    };
    let reader = sandbox.home_reader(&crate::sandbox::agent_home_files(spec));
    let findings = preflight::check(
        spec,
        &Probe {
            env: &env,
            home_file: &reader,
            root: crate::process::is_root(),
            sandboxed: sandbox.confines(),
        },
    );
    AgentReport {
        name: spec.name.clone(),
        kind: spec.kind,
        program,
        installed,
        version,
        findings,
    }
}

/// Whether `spec` can work here; the reason with the fix if not. Checked
/// once per agent configuration and process.
pub fn runnable(spec: &AgentSpec, sandbox: &Sandbox) -> Result<(), String> {
    static SEEN: OnceLock<Mutex<BTreeMap<String, Result<(), String>>>> = OnceLock::new();
    let seen = SEEN.get_or_init(Default::default);
    // The whole spec: a worker runs plans whose sections of one name
    // differ.
    let key = format!("{spec:?}\u{0}{}", sandbox.kind.as_str());
    if let Some(r) = seen.lock().expect("preflight cache lock").get(&key) {
        return r.clone();
    }
    // Whether the program is installed is the caller's first question,
    // with its own message; this is about what the installed one needs.
    let report = check(spec, sandbox, false);
    let result = report
        .findings
        .iter()
        .find(|f| f.severity == Severity::Error)
        .map_or(Ok(()), |f| {
            Err(format!("{} (fix: {})", f.problem, f.fix_line(&spec.name)))
        });
    seen.lock()
        .expect("preflight cache lock")
        .insert(key, result.clone());
    result
}

/// What a run says once at its start: how agents are confined (a warning
/// when `auto` found no sandbox), and each agent of `names` that cannot
/// work here, with the fix (the run then falls back past it).
pub fn notices(settings: &Settings, names: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let sandbox = match crate::sandbox::resolve(&settings.sandbox) {
        Ok(s) => s,
        Err(e) => return vec![e.to_string()],
    };
    // Said at every start, `none` included: whoever reads the run's
    // output knows how its agents were confined.
    match sandbox.warning() {
        Some(w) => out.push(format!("warning: {w}")),
        None => out.push(format!("sandbox: {}", sandbox.describe())),
    }
    let mut seen = std::collections::BTreeSet::new();
    for name in names {
        if !seen.insert(name.clone()) {
            continue;
        }
        let Ok(spec) = AgentSpec::resolve(name, &settings.agents) else {
            continue;
        };
        let report = check(&spec, &sandbox, false);
        if let Some(why) = report.blocker() {
            out.push(format!("warning: agent {name} cannot work here: {why}"));
        }
    }
    out
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
    pub network: bool,
}

/// The agents worth showing: the four CLIs git-orch knows, then every
/// `[agent "NAME"]` of the settings; or exactly `names`.
pub fn survey(settings: &Settings, names: &[String], versions: bool) -> Result<Survey, String> {
    let (sandbox, report) = match crate::sandbox::resolve(&settings.sandbox) {
        Ok(sb) => {
            let report = SandboxReport {
                requested: sb.requested.to_owned(),
                in_force: Some(sb.kind.as_str().to_owned()),
                summary: sb.describe(),
                network: sb.network,
            };
            (sb, report)
        }
        Err(e) => {
            let report = SandboxReport {
                requested: settings.sandbox.mode.as_str().to_owned(),
                in_force: None,
                summary: e.to_string(),
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
    for name in wanted {
        let spec = AgentSpec::resolve(&name, &settings.agents).map_err(|e| e.to_string())?;
        agents.push(check(&spec, &sandbox, versions));
    }
    Ok(Survey {
        sandbox: report,
        agents,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
