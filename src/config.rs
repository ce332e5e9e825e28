//! Project settings: `.orch/config` (committed, git-config syntax) with the
//! repository's `orch.*` keys on top, turned into typed values with
//! defaults.
//!
//! Reading is strict where a typo would silently change behaviour (a gate
//! mode, a number) and names the section and key in the error. Unknown keys
//! are ignored so that a newer `.orch/config` still works with an older
//! git-orch.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::agent::AgentSpec;
use crate::agent::price::Price;
use crate::plan::format::GateMode;
use crate::store::config::{ConfigValues, Section};

pub mod worktree;
pub use worktree::{CacheMode, CachePath, WorktreeSettings};

/// `[orch] sandbox`: whether attempts run in a sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SandboxMode {
    /// The sandbox where it works here (bubblewrap on Linux), else none,
    /// said once at the start of a run.
    #[default]
    Auto,
    /// Always the bubblewrap sandbox; refuse to run agents where it does
    /// not work.
    Bwrap,
    /// No sandbox: agents run as you, with the allow-listed environment.
    None,
}

impl SandboxMode {
    /// Parses a config value (`auto`, `bwrap`, `none`).
    pub fn parse(value: &str) -> Option<SandboxMode> {
        match value.trim().to_ascii_lowercase().as_str() {
            "auto" => Some(SandboxMode::Auto),
            "bwrap" | "bubblewrap" => Some(SandboxMode::Bwrap),
            "none" | "off" => Some(SandboxMode::None),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::Auto => "auto",
            SandboxMode::Bwrap => "bwrap",
            SandboxMode::None => "none",
        }
    }
}

/// The `[sandbox]` section and `[orch] sandbox`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSettings {
    pub mode: SandboxMode,
    /// Whether sandboxed commands reach the network (agents need their
    /// API; `network = false` leaves only loopback inside).
    pub network: bool,
    /// More variables passed to every agent and gate (`NAME` or `PREFIX_*`).
    pub pass_env: Vec<String>,
    /// More paths sandboxed commands may write (`~/` is the home folder).
    pub bind: Vec<PathBuf>,
    /// More paths they may read where the sandbox would hide them.
    pub ro_bind: Vec<PathBuf>,
    /// `[worktree]`: the local files and warm caches every confined
    /// command's checkout gets (`sandbox::warm`).
    pub worktree: WorktreeSettings,
}

impl Default for SandboxSettings {
    fn default() -> Self {
        SandboxSettings {
            mode: SandboxMode::Auto,
            network: true,
            pass_env: Vec::new(),
            bind: Vec::new(),
            ro_bind: Vec::new(),
            worktree: WorktreeSettings::default(),
        }
    }
}

/// A gate as configured in `[gate "NAME"]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateConfig {
    pub name: String,
    /// Command to run; `None` for built-in gates.
    pub run: Option<String>,
    /// For a reviewer gate: the agent that reviews.
    pub agent: Option<String>,
    pub mode: GateMode,
    pub timeout: Duration,
}

/// Thresholds of the circuit breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Breaker {
    /// Consecutive agent failures (crashes, timeouts) before stopping.
    pub consecutive_failures: u32,
    /// Retries across the whole run before stopping.
    pub total_retries: u32,
    /// Consecutive attempts that changed nothing before stopping.
    pub consecutive_empty: u32,
}

/// Every setting git-orch reads, with defaults applied.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Most attempts running at once.
    pub cap: usize,
    /// Default target branch.
    pub target: Option<String>,
    /// Where attempt worktrees go (default: beside the repository).
    pub worktree_root: Option<PathBuf>,
    /// Default agent name.
    pub agent: Option<String>,
    /// Agents tried, in order, when the chosen one is unavailable.
    pub fallback: Vec<String>,
    /// Agent timeout.
    pub timeout: Duration,
    /// Retry budget per task.
    pub retries: u32,
    pub breaker: Breaker,
    /// Extra pinch globs and built-in ones switched off.
    pub pinch_paths: Vec<String>,
    pub pinch_ignore: Vec<String>,
    /// Command gates and built-in gate settings, by name.
    pub gates: BTreeMap<String, GateConfig>,
    /// Raw `[agent "NAME"]` sections, for the agent adapters.
    pub agents: BTreeMap<String, BTreeMap<String, Vec<String>>>,
    /// `[setup] run`: a command run in every new attempt worktree.
    pub setup: Option<String>,
    /// First port of the range attempt port blocks are taken from.
    pub port_base: u16,
    /// Number of ports in that range.
    pub port_span: u16,
    /// Whether `approve verify` requires a valid signature.
    pub require_signed_approvals: bool,
    /// Merge strategy for the queue.
    pub merge_strategy: Option<String>,
    /// Speculative batch size of the merge queue (1 = no batching).
    pub merge_batch: usize,
    /// `orch.landingOrder`: whether passed attempts land strictly in the
    /// plan's order (`plan`, the default: two runs of a plan give the same
    /// history) or as soon as they pass (`passed`).
    pub landing_in_plan_order: bool,
    /// Branches the pre-push hook protects.
    pub protected: Vec<String>,
    /// Reviewer gate must use a different agent than the writer.
    pub reviewer_independent: bool,
    /// `[integration] run`: the merge queue's integration gate commands
    /// (default: every blocking command gate of the landing subtasks).
    pub integration: Vec<String>,
    /// `[orch] sandbox` and the `[sandbox]` section.
    pub sandbox: SandboxSettings,
    /// `[price "MODEL"]` sections: prices that override or extend the
    /// built-in table, per model name prefix.
    pub prices: BTreeMap<String, Price>,
    /// `[land]`: how the commits a landing makes read.
    pub land: LandSettings,
    /// `[orch] retryFrom`: where a retry's worktree starts.
    pub retry_from: RetryFrom,
    /// `[orch] cleanup`: what goes when a run ends.
    pub cleanup: CleanupPolicy,
    /// `[orch] maxFileSize`: the largest file an attempt may add or change
    /// (bytes); gates read every changed file, and an import reads every
    /// new object, so this bounds what either holds in memory.
    pub max_file_size: u64,
}

/// What goes when a run ends (`[orch] cleanup`): the worktrees and
/// branches of its attempts, each only once every commit it holds is kept
/// elsewhere, and never a dirty worktree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CleanupPolicy {
    /// Every finished attempt's (landed, failed or abandoned).
    #[default]
    Finished,
    /// Only the landed attempts'.
    Landed,
    /// Nothing: `git orch cleanup` removes them when asked.
    Never,
}

impl CleanupPolicy {
    /// Parses a config value (`finished`, `landed`, `never`).
    pub fn parse(value: &str) -> Option<CleanupPolicy> {
        match value.trim().to_ascii_lowercase().as_str() {
            "finished" => Some(CleanupPolicy::Finished),
            "landed" => Some(CleanupPolicy::Landed),
            "never" | "off" | "false" => Some(CleanupPolicy::Never),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            CleanupPolicy::Finished => "finished",
            CleanupPolicy::Landed => "landed",
            CleanupPolicy::Never => "never",
        }
    }
}

/// Where a retry's worktree starts (`[orch] retryFrom`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RetryFrom {
    /// From the previous result after a content failure of the attempt
    /// (tests, verification, placeholders, review); from the current
    /// target after anything else (scope, secrets, a crash, an empty
    /// result, a landing that conflicted or failed the integration gate).
    #[default]
    Auto,
    /// Always from the base.
    Base,
    /// From the previous result whenever it passed scope and secrets.
    Previous,
}

/// How the commit a subtask lands as reads (`[land]` in `.orch/config`).
/// Templates take `{title}`, `{deliverable}`, `{task}`, `{plan}`, `{run}`,
/// `{attempt}` and `{agent}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LandSettings {
    /// The subject line (default `{title}`).
    pub subject: String,
    /// The body above the trailers (default `{deliverable}`).
    pub body: String,
    /// When the agent made exactly one commit, use its subject instead.
    pub agent_subject: bool,
    /// Commit as git-orch (`committer = git-orch`) rather than as the
    /// person who started the run (`committer = author`, the default).
    pub orch_committer: bool,
}

impl Default for LandSettings {
    fn default() -> Self {
        Self {
            subject: "{title}".into(),
            body: "{deliverable}".into(),
            agent_subject: false,
            orch_committer: false,
        }
    }
}

impl Settings {
    /// Whether the merge strategy puts an attempt's own commits on the
    /// target (`rebase`, `merge`) rather than one commit per subtask
    /// (`squash`, the default): then every one of them must pass the
    /// content gates, not only the net change.
    pub fn lands_attempt_commits(&self) -> bool {
        matches!(self.merge_strategy.as_deref(), Some("rebase" | "merge"))
    }

    /// What one import of an agent's commits may bring in.
    pub fn import_limits(&self) -> crate::store::quarantine::ImportLimits {
        crate::store::quarantine::ImportLimits {
            object: self.max_file_size,
            ..Default::default()
        }
    }
}

/// The folder attempt worktrees go in by default: beside the repository,
/// never inside it (`<parent>/<name>.orch`).
fn default_root(common_dir: &Path) -> PathBuf {
    let repo = if common_dir.file_name().is_some_and(|n| n == ".git") {
        common_dir.parent().unwrap_or(common_dir)
    } else {
        common_dir
    };
    let name = repo
        .file_name()
        .map(|n| n.to_string_lossy().trim_end_matches(".git").to_owned())
        .unwrap_or_else(|| "repo".into());
    repo.parent().unwrap_or(repo).join(format!("{name}.orch"))
}

/// Where attempt worktrees (and lead agents' checkouts) go:
/// `orch.worktreeRoot` (relative to the repository's parent folder), else
/// beside the repository.
pub fn worktree_root(common_dir: &Path, settings: &Settings) -> PathBuf {
    match &settings.worktree_root {
        Some(r) if r.is_absolute() => r.clone(),
        Some(r) => default_root(common_dir)
            .parent()
            .map(|p| p.join(r))
            .unwrap_or_else(|| r.clone()),
        None => default_root(common_dir),
    }
}

/// Default of `[orch] maxFileSize`: 100 MiB.
pub const MAX_FILE_SIZE: u64 = 100 * 1024 * 1024;

/// A size in bytes: a number with an optional `k`, `m` or `g` suffix
/// (powers of 1024), as git writes them.
fn size(section: &Section, key: &str) -> Result<Option<u64>, ConfigError> {
    let Some(v) = section.get(key) else {
        return Ok(None);
    };
    let t = v.trim().to_ascii_lowercase();
    let (digits, unit) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1024),
        Some('m') => (&t[..t.len() - 1], 1024 * 1024),
        Some('g') => (&t[..t.len() - 1], 1024 * 1024 * 1024),
        _ => (t.as_str(), 1),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .filter(|n| *n > 0)
        .map(Some)
        .ok_or_else(|| {
            err(
                section,
                key,
                format!("{v:?} is not a size (e.g. 500k, 100m, 1g)"),
            )
        })
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            cap: 4,
            target: None,
            worktree_root: None,
            agent: None,
            fallback: Vec::new(),
            timeout: Duration::from_secs(30 * 60),
            retries: 2,
            breaker: Breaker {
                consecutive_failures: 5,
                total_retries: 20,
                consecutive_empty: 3,
            },
            pinch_paths: Vec::new(),
            pinch_ignore: Vec::new(),
            gates: BTreeMap::new(),
            agents: BTreeMap::new(),
            setup: None,
            port_base: 20_000,
            port_span: 20_000,
            require_signed_approvals: false,
            merge_strategy: None,
            merge_batch: 1,
            landing_in_plan_order: true,
            protected: Vec::new(),
            reviewer_independent: true,
            integration: Vec::new(),
            sandbox: SandboxSettings::default(),
            prices: BTreeMap::new(),
            land: LandSettings::default(),
            retry_from: RetryFrom::Auto,
            cleanup: CleanupPolicy::Finished,
            max_file_size: MAX_FILE_SIZE,
        }
    }
}

/// A setting that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}: {message}")]
pub struct ConfigError {
    pub origin: String,
    pub message: String,
}

fn err(section: &Section, key: &str, message: String) -> ConfigError {
    let origin = match &section.subsection {
        Some(s) => format!("[{} \"{s}\"] {key}", section.name),
        None => format!("[{}] {key}", section.name),
    };
    ConfigError { origin, message }
}

fn number<T: std::str::FromStr>(section: &Section, key: &str) -> Result<Option<T>, ConfigError> {
    match section.get(key) {
        None => Ok(None),
        Some(v) => v
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| err(section, key, format!("{v:?} is not a valid number"))),
    }
}

fn boolean(section: &Section, key: &str) -> Result<Option<bool>, ConfigError> {
    match section.get(key).map(|v| v.trim().to_ascii_lowercase()) {
        None => Ok(None),
        // A bare `key` line in git config means true.
        Some(v) if matches!(v.as_str(), "" | "true" | "yes" | "on" | "1") => Ok(Some(true)),
        Some(v) if matches!(v.as_str(), "false" | "no" | "off" | "0") => Ok(Some(false)),
        Some(v) => Err(err(section, key, format!("{v:?} is not true or false"))),
    }
}

/// Parses a duration: seconds, or a number with `s`, `m` or `h`.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let t = text.trim();
    let (num, unit) = match t.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => (&t[..i], &t[i..]),
        None => (t, "s"),
    };
    let n: u64 = num.parse().ok()?;
    let secs = match unit {
        "s" | "" => n,
        "m" => n * 60,
        "h" => n * 3600,
        "ms" => return Some(Duration::from_millis(n)),
        _ => return None,
    };
    Some(Duration::from_secs(secs))
}

fn duration(section: &Section, key: &str) -> Result<Option<Duration>, ConfigError> {
    match section.get(key) {
        None => Ok(None),
        Some(v) => parse_duration(v).map(Some).ok_or_else(|| {
            err(
                section,
                key,
                format!("{v:?} is not a duration (e.g. 900, 15m, 2h)"),
            )
        }),
    }
}

fn gate_mode(section: &Section) -> Result<Option<GateMode>, ConfigError> {
    match section.get("mode").map(str::trim) {
        None => Ok(None),
        Some("block") => Ok(Some(GateMode::Block)),
        Some("warn") => Ok(Some(GateMode::Warn)),
        Some("skip") => Ok(Some(GateMode::Skip)),
        Some(v) => Err(err(
            section,
            "mode",
            format!("{v:?} is not a gate mode; use block, warn or skip"),
        )),
    }
}

impl Settings {
    /// Typed settings from parsed config values.
    pub fn from_values(values: &ConfigValues) -> Result<Self, ConfigError> {
        let mut s = Settings::default();
        if let Some(orch) = values.section("orch", None) {
            if let Some(cap) = number::<usize>(orch, "cap")? {
                if cap == 0 {
                    return Err(err(orch, "cap", "must be at least 1".into()));
                }
                s.cap = cap;
            }
            s.target = orch.get("target").map(str::to_owned);
            s.worktree_root = orch.get("worktreeroot").map(PathBuf::from);
            s.agent = orch.get("agent").map(str::to_owned);
            if let Some(f) = orch.values.get("fallback") {
                s.fallback = f
                    .iter()
                    .flat_map(|v| v.split([',', ' ']))
                    .filter(|v| !v.is_empty())
                    .map(str::to_owned)
                    .collect();
            }
            if let Some(t) = duration(orch, "timeout")? {
                s.timeout = t;
            }
            if let Some(r) = number(orch, "retries")? {
                s.retries = r;
            }
            if let Some(v) = number(orch, "portbase")? {
                s.port_base = v;
            }
            if let Some(v) = number(orch, "portspan")? {
                s.port_span = v;
            }
            if let Some(v) = boolean(orch, "requiresignedapprovals")? {
                s.require_signed_approvals = v;
            }
            s.merge_strategy = orch.get("mergestrategy").map(str::to_owned);
            if let Some(v) = number::<usize>(orch, "mergebatch")? {
                s.merge_batch = v.max(1);
            }
            if let Some(v) = orch.get("landingorder") {
                s.landing_in_plan_order = match v.trim().to_ascii_lowercase().as_str() {
                    "plan" => true,
                    "passed" => false,
                    _ => {
                        return Err(err(
                            orch,
                            "landingOrder",
                            format!("{v:?} is not plan or passed"),
                        ));
                    }
                };
            }
            if let Some(p) = orch.values.get("protect") {
                s.protected = p.clone();
            }
            if let Some(v) = boolean(orch, "reviewerindependent")? {
                s.reviewer_independent = v;
            }
            if let Some(v) = orch.get("retryfrom") {
                s.retry_from = match v {
                    "auto" => RetryFrom::Auto,
                    "base" => RetryFrom::Base,
                    "previous" => RetryFrom::Previous,
                    other => {
                        return Err(err(
                            orch,
                            "retryFrom",
                            format!("{other:?} is not auto, base or previous"),
                        ));
                    }
                };
            }
            if let Some(v) = orch.get("cleanup") {
                s.cleanup = CleanupPolicy::parse(v).ok_or_else(|| {
                    err(
                        orch,
                        "cleanup",
                        format!("{v:?} is not finished, landed or never"),
                    )
                })?;
            }
            if let Some(v) = size(orch, "maxfilesize")? {
                s.max_file_size = v;
            }
            if let Some(v) = orch.get("sandbox") {
                s.sandbox.mode = SandboxMode::parse(v).ok_or_else(|| {
                    err(
                        orch,
                        "sandbox",
                        format!("{v:?} is not a sandbox mode; use auto, bwrap or none"),
                    )
                })?;
            }
        }
        if let Some(land) = values.section("land", None) {
            if let Some(v) = land.get("subject") {
                if v.trim().is_empty() {
                    return Err(err(land, "subject", "must not be empty".into()));
                }
                s.land.subject = v.to_owned();
            }
            if let Some(v) = land.get("body") {
                s.land.body = v.to_owned();
            }
            if let Some(v) = boolean(land, "agentsubject")? {
                s.land.agent_subject = v;
            }
            if let Some(v) = land.get("committer") {
                s.land.orch_committer = match v {
                    "author" => false,
                    "git-orch" => true,
                    other => {
                        return Err(err(
                            land,
                            "committer",
                            format!("{other:?} is not author or git-orch"),
                        ));
                    }
                };
            }
        }
        if let Some(sb) = values.section("sandbox", None) {
            if let Some(v) = boolean(sb, "network")? {
                s.sandbox.network = v;
            }
            for p in sb.values.get("passenv").into_iter().flatten() {
                if !crate::agent::environment::is_pattern(p.trim()) {
                    return Err(err(
                        sb,
                        "passEnv",
                        format!("{p:?} is not a variable name; write e.g. AWS_PROFILE or AWS_*"),
                    ));
                }
                s.sandbox.pass_env.push(p.trim().to_owned());
            }
            for (key, into) in [
                ("bind", &mut s.sandbox.bind),
                ("robind", &mut s.sandbox.ro_bind),
            ] {
                for p in sb.values.get(key).into_iter().flatten() {
                    let p = p.trim();
                    if !(p.starts_with('/') || p.starts_with("~/")) {
                        return Err(err(
                            sb,
                            key,
                            format!("{p:?} must be an absolute path or start with ~/"),
                        ));
                    }
                    into.push(PathBuf::from(p));
                }
            }
        }
        // (warm worktrees, issue 28)
        if let Some(w) = values.section("worktree", None) {
            let home = std::env::var_os("HOME").map(PathBuf::from);
            s.sandbox.worktree =
                worktree::parse(w, home.as_deref()).map_err(|r| err(w, r.key, r.message))?;
        }
        for p in values.subsections("price") {
            let model = p.subsection.clone().expect("subsections have names");
            let usd = |key: &str| -> Result<Option<f64>, ConfigError> {
                match p.get(key) {
                    None => Ok(None),
                    Some(v) => v
                        .trim()
                        .parse::<f64>()
                        .ok()
                        .filter(|f| f.is_finite() && *f >= 0.0)
                        .map(Some)
                        .ok_or_else(|| {
                            err(
                                p,
                                key,
                                format!("{v:?} is not a price; write US dollars per million tokens, e.g. 3.00"),
                            )
                        }),
                }
            };
            let (Some(input), Some(output)) = (usd("input")?, usd("output")?) else {
                return Err(err(
                    p,
                    "input",
                    "a price needs both `input` and `output` (US dollars per million tokens)"
                        .into(),
                ));
            };
            let price = Price {
                input,
                output,
                cache_read: usd("cacheread")?.unwrap_or(input),
                cache_write: usd("cachewrite")?.unwrap_or(input),
            };
            s.prices.insert(model, price);
        }

        if let Some(b) = values.section("breaker", None) {
            if let Some(v) = number(b, "consecutivefailures")? {
                s.breaker.consecutive_failures = v;
            }
            if let Some(v) = number(b, "totalretries")? {
                s.breaker.total_retries = v;
            }
            if let Some(v) = number(b, "consecutiveempty")? {
                s.breaker.consecutive_empty = v;
            }
        }
        if let Some(p) = values.section("pinch", None) {
            s.pinch_paths = p.values.get("path").cloned().unwrap_or_default();
            s.pinch_ignore = p.values.get("ignore").cloned().unwrap_or_default();
            for g in &s.pinch_paths {
                crate::plan::glob::compile(g)
                    .map_err(|e| err(p, "path", format!("glob {g:?} does not compile: {e}")))?;
            }
        }
        if let Some(i) = values.section("integration", None) {
            s.integration = i.values.get("run").cloned().unwrap_or_default();
        }
        if let Some(setup) = values.section("setup", None) {
            s.setup = setup.get("run").map(str::to_owned);
        }
        for g in values.subsections("gate") {
            let name = g.subsection.clone().expect("subsections have names");
            crate::ids::check("gate", &name).map_err(|e| err(g, "name", e.to_string()))?;
            let gate = GateConfig {
                run: g.get("run").map(str::to_owned),
                agent: g.get("agent").map(str::to_owned),
                mode: gate_mode(g)?.unwrap_or(GateMode::Block),
                timeout: duration(g, "timeout")?.unwrap_or(Duration::from_secs(900)),
                name: name.clone(),
            };
            s.gates.insert(name, gate);
        }
        for a in values.subsections("agent") {
            let name = a.subsection.clone().expect("subsections have names");
            // Checked now, so a typo stops the run before anything is
            // written rather than failing every attempt.
            AgentSpec::from_config(&name, &a.values).map_err(|e| ConfigError {
                origin: format!("[agent \"{name}\"]"),
                message: e
                    .to_string()
                    .trim_start_matches(&format!("[agent \"{name}\"]: "))
                    .to_owned(),
            })?;
            s.agents.insert(name, a.values.clone());
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::config::parse_config;

    #[test]
    fn reads_every_section_with_defaults() {
        let text = br#"
[orch]
    cap = 3
    target = main
    timeout = 15m
[gate "test"]
    run = cargo test
    mode = warn
    timeout = 900
[agent "claude"]
    kind = claude
    args = --max-turns
    args = 30
[setup]
    run = npm ci
[pinch]
    path = schema/**
"#;
        let v = parse_config(text, "test").expect("parses");
        let s = Settings::from_values(&v).expect("valid");
        assert_eq!(s.cap, 3);
        assert_eq!(s.timeout, Duration::from_secs(900));
        let g = &s.gates["test"];
        assert_eq!(g.mode, GateMode::Warn);
        assert_eq!(g.run.as_deref(), Some("cargo test"));
        assert_eq!(s.agents["claude"]["args"], ["--max-turns", "30"]);
        assert_eq!(s.setup.as_deref(), Some("npm ci"));
        assert_eq!(s.pinch_paths, ["schema/**"]);
        assert_eq!(s.retries, 2);
    }

    #[test]
    fn typos_that_change_behaviour_are_errors() {
        for bad in [
            "[gate \"x\"]\nmode = blocking\n",
            "[orch]\ncap = many\n",
            "[orch]\ncap = 0\n",
            "[orch]\ntimeout = soon\n",
            "[pinch]\npath = a[\n",
            "[orch]\nsandbox = banana\n",
            "[sandbox]\nnetwork = maybe\n",
            "[sandbox]\npassEnv = A B\n",
            "[sandbox]\nbind = relative/path\n",
            "[price \"m\"]\ninput = cheap\noutput = 1\n",
            "[price \"m\"]\ninput = 1\n",
            "[agent \"x\"]\nkind = claude\napiRetries = many\n",
        ] {
            let v = parse_config(bad.as_bytes(), "t").expect("syntax ok");
            let e = Settings::from_values(&v).expect_err(bad);
            assert!(e.to_string().starts_with('['), "{e}");
        }
    }

    #[test]
    fn sandbox_and_prices() {
        let text = br#"
[orch]
    sandbox = none
[sandbox]
    network = false
    passEnv = AWS_PROFILE
    passEnv = MY_*
    bind = ~/.cargo/registry
    roBind = /opt/sdk
[price "my-model"]
    input = 1.5
    output = 6
    cacheRead = 0.15
"#;
        let v = parse_config(text, "test").expect("parses");
        let s = Settings::from_values(&v).expect("valid");
        assert_eq!(s.sandbox.mode, SandboxMode::None);
        assert!(!s.sandbox.network);
        assert_eq!(s.sandbox.pass_env, ["AWS_PROFILE", "MY_*"]);
        assert_eq!(s.sandbox.bind, [PathBuf::from("~/.cargo/registry")]);
        assert_eq!(s.sandbox.ro_bind, [PathBuf::from("/opt/sdk")]);
        let p = s.prices["my-model"];
        assert_eq!(
            (p.input, p.output, p.cache_read, p.cache_write),
            (1.5, 6.0, 0.15, 1.5)
        );
        let d = Settings::default();
        assert_eq!(d.sandbox.mode, SandboxMode::Auto);
        assert!(d.sandbox.network);
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration("x"), None);
    }
}
