//! What must be true before an agent CLI can work here, and the line of
//! configuration (or the command) that fixes what is not.
//!
//! Pure: the caller describes the world in a [`Probe`] (the environment the
//! agent will get, the files of the home folder it will see, whether it
//! runs as root and in the sandbox); this module reads nothing itself.
//! Checks are about what today's CLIs refuse: Claude Code's refusal of
//! `--dangerously-skip-permissions` as root, a missing API key or login,
//! Codex ignoring `OPENAI_BASE_URL` for its built-in provider, Gemini
//! CLI's untrusted folders and its gateway URL without an auth type.

use std::collections::BTreeMap;

use super::{AgentKind, AgentSpec};

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// The agent will work, but something is worth knowing.
    Note,
    /// The agent cannot work until this is fixed: runs fall back to the
    /// next agent without starting it.
    Error,
}

/// One thing to know or fix.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Finding {
    pub severity: Severity,
    pub problem: String,
    /// What to do: a config line, a command, an environment variable.
    pub fix: String,
}

/// What the caller found out about where the agent would run.
pub struct Probe<'a> {
    /// The environment the agent gets (already allow-listed).
    pub env: &'a BTreeMap<String, String>,
    /// The text of a file of the home folder (relative path), if it exists.
    pub home_file: &'a dyn Fn(&str) -> Option<String>,
    /// The agent runs as root.
    pub root: bool,
    /// The agent runs in git-orch's sandbox.
    pub sandboxed: bool,
}

impl Probe<'_> {
    fn has(&self, name: &str) -> bool {
        self.env.get(name).is_some_and(|v| !v.trim().is_empty())
    }

    fn has_file(&self, rel: &str) -> bool {
        (self.home_file)(rel).is_some()
    }
}

fn error(problem: impl Into<String>, fix: impl Into<String>) -> Finding {
    Finding {
        severity: Severity::Error,
        problem: problem.into(),
        fix: fix.into(),
    }
}

fn note(problem: impl Into<String>, fix: impl Into<String>) -> Finding {
    Finding {
        severity: Severity::Note,
        problem: problem.into(),
        fix: fix.into(),
    }
}

/// Whether any argument of the spec mentions `text` (a `-c key=value` of
/// Codex, say).
fn args_mention(spec: &AgentSpec, text: &str) -> bool {
    spec.args.iter().any(|a| a.contains(text))
}

/// The checks for `spec` in the world `probe` describes.
pub fn check(spec: &AgentSpec, probe: &Probe) -> Vec<Finding> {
    let section = &spec.name;
    match spec.kind {
        AgentKind::Claude => claude(spec, probe, section),
        AgentKind::Codex => codex(spec, probe, section),
        AgentKind::Gemini => gemini(probe, section),
        AgentKind::Aider => aider(spec, probe, section),
        AgentKind::Command | AgentKind::Fake => Vec::new(),
    }
}

/// The variables that give Claude Code a key, a token, or a cloud
/// provider's credentials to use.
const CLAUDE_AUTH_VARS: [&str; 5] = [
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
];

/// Whether Claude Code's user settings (`~/.claude/settings.json`, the
/// text `settings`) give it credentials as Claude Code reads them: one of
/// [`CLAUDE_AUTH_VARS`] in its `env` object (applied to Claude's own
/// environment), or an `apiKeyHelper` command that prints a key.
fn claude_settings_auth(settings: &str) -> bool {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(settings) else {
        return false;
    };
    let set = |v: Option<&serde_json::Value>| {
        v.and_then(serde_json::Value::as_str)
            .is_some_and(|s| !s.trim().is_empty())
    };
    set(v.get("apiKeyHelper"))
        || CLAUDE_AUTH_VARS
            .iter()
            .any(|k| set(v.get("env").and_then(|e| e.get(k))))
}

fn claude(spec: &AgentSpec, probe: &Probe, section: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    // What Claude Code itself reads: its environment, its user settings'
    // `env` and `apiKeyHelper`, a login (`/login` writes the credentials
    // file; older versions the key into ~/.claude.json).
    let keyed = CLAUDE_AUTH_VARS.iter().any(|k| probe.has(k))
        || (probe.home_file)(".claude/settings.json").is_some_and(|t| claude_settings_auth(&t));
    let logged_in = probe.has_file(".claude/.credentials.json")
        || (probe.home_file)(".claude.json")
            .is_some_and(|t| t.contains("\"primaryApiKey\"") || t.contains("\"oauthAccount\""));
    if !keyed && !logged_in {
        out.push(error(
            "Claude Code has no API key and no login",
            "set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN for a gateway) where git orch runs or in the `env` of ~/.claude/settings.json, set an `apiKeyHelper` there, or run `claude` once and log in",
        ));
    }
    let bypass = spec.bypasses_permissions(probe.sandboxed);
    let declared_sandbox = probe.env.get("IS_SANDBOX").map(String::as_str) == Some("1");
    if probe.root && bypass && !probe.sandboxed && !declared_sandbox {
        out.push(error(
            "Claude Code refuses --dangerously-skip-permissions as root outside a sandbox",
            format!(
                "use the sandbox (`sandbox = bwrap` in [orch]; git-orch then tells Claude it is sandboxed), or drop `bypassPermissions = true` from [agent \"{section}\"], or, on a throwaway container, add `env = IS_SANDBOX=1` to it"
            ),
        ));
    }
    if !bypass {
        out.push(note(
            "Claude Code runs with --permission-mode acceptEdits: file edits and the subtask's verification and gate commands are allowed, other shell commands are denied",
            format!("run in the sandbox, or set `bypassPermissions = true` in [agent \"{section}\"] to allow everything"),
        ));
    }
    out
}

fn codex(spec: &AgentSpec, probe: &Probe, section: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    let custom_provider = args_mention(spec, "model_provider")
        || (probe.home_file)(".codex/config.toml").is_some_and(|t| t.contains("model_provider"));
    let keyed = ["OPENAI_API_KEY", "CODEX_API_KEY"]
        .iter()
        .any(|k| probe.has(k));
    if !keyed && !probe.has_file(".codex/auth.json") && !custom_provider {
        out.push(error(
            "Codex CLI has no API key and no login",
            "set OPENAI_API_KEY (or CODEX_API_KEY) where git orch runs, or run `codex login`",
        ));
    }
    if probe.has("OPENAI_BASE_URL") && !custom_provider {
        out.push(error(
            "OPENAI_BASE_URL is set, but Codex CLI sends its built-in provider's requests to OpenAI regardless",
            format!(
                "declare a provider in [agent \"{section}\"]: `args = -c`, `args = model_provider=\"gateway\"`, `args = -c`, `args = model_providers.gateway={{name=\"gateway\", base_url=\"https://…/v1\", env_key=\"OPENAI_API_KEY\", wire_api=\"responses\"}}` (see docs/agents/codex.md)"
            ),
        ));
    }
    out
}

fn gemini(probe: &Probe, section: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    let settings = (probe.home_file)(".gemini/settings.json").unwrap_or_default();
    let system_settings = probe.has("GEMINI_CLI_SYSTEM_SETTINGS_PATH");
    let auth_type_set = settings.contains("selectedType") || system_settings;
    let keyed = [
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "GOOGLE_GENAI_USE_VERTEXAI",
        "GOOGLE_GENAI_USE_GCA",
    ]
    .iter()
    .any(|k| probe.has(k));
    if !keyed && !probe.has_file(".gemini/oauth_creds.json") && !auth_type_set {
        out.push(error(
            "Gemini CLI has no API key and no login",
            "set GEMINI_API_KEY where git orch runs, or run `gemini` once and log in",
        ));
    }
    if probe.has("GOOGLE_GEMINI_BASE_URL") && !auth_type_set {
        out.push(error(
            "GOOGLE_GEMINI_BASE_URL is set without an auth type, which Gemini CLI rejects (\"Invalid auth method selected\")",
            format!(
                "select the API-key auth type in ~/.gemini/settings.json: {{\"security\":{{\"auth\":{{\"selectedType\":\"gemini-api-key\"}}}}}} (see docs/agents/gemini.md; [agent \"{section}\"] may point elsewhere with `env = GEMINI_CLI_SYSTEM_SETTINGS_PATH=…`)"
            ),
        ));
    }
    out
}

fn aider(spec: &AgentSpec, probe: &Probe, section: &str) -> Vec<Finding> {
    let keys = [
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "GEMINI_API_KEY",
        "OPENROUTER_API_KEY",
        "DEEPSEEK_API_KEY",
        "GROQ_API_KEY",
        "MISTRAL_API_KEY",
        "XAI_API_KEY",
        "OLLAMA_API_BASE",
    ];
    let keyed = keys.iter().any(|k| probe.has(k))
        || probe
            .env
            .keys()
            .any(|k| k.starts_with("AIDER_") && k.ends_with("API_KEY"))
        || args_mention(spec, "api-key")
        || probe.has_file(".aider.conf.yml")
        || probe.has_file(".env");
    if keyed {
        return Vec::new();
    }
    vec![error(
        "Aider has no API key for any provider",
        format!(
            "set the key of your model's provider (OPENAI_API_KEY, ANTHROPIC_API_KEY, …) where git orch runs, or pass one in [agent \"{section}\"] with `args = --api-key` and `args = openai=…`"
        ),
    )]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe_with<'a>(
        env: &'a BTreeMap<String, String>,
        files: &'a dyn Fn(&str) -> Option<String>,
        root: bool,
        sandboxed: bool,
    ) -> Probe<'a> {
        Probe {
            env,
            home_file: files,
            root,
            sandboxed,
        }
    }

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn errors(f: &[Finding]) -> Vec<&str> {
        f.iter()
            .filter(|f| f.severity == Severity::Error)
            .map(|f| f.problem.as_str())
            .collect()
    }

    #[test]
    fn claude_needs_a_key_and_minds_root_outside_the_sandbox() {
        let no_files = |_: &str| None;
        let spec = AgentSpec::builtin("claude").expect("built-in");
        let e = env(&[]);
        let f = check(&spec, &probe_with(&e, &no_files, false, false));
        assert_eq!(errors(&f), ["Claude Code has no API key and no login"]);
        let e = env(&[("ANTHROPIC_API_KEY", "k")]);
        assert!(errors(&check(&spec, &probe_with(&e, &no_files, true, true))).is_empty());
        // Root outside the sandbox is fine in the milder mode …
        assert!(errors(&check(&spec, &probe_with(&e, &no_files, true, false))).is_empty());
        // … but not with an explicit bypass.
        let mut bypass = spec.clone();
        bypass.bypass_permissions = Some(true);
        let f = check(&bypass, &probe_with(&e, &no_files, true, false));
        assert_eq!(errors(&f).len(), 1);
        assert!(f.iter().any(|f| f.fix.contains("IS_SANDBOX=1")));
        let e = env(&[("ANTHROPIC_API_KEY", "k"), ("IS_SANDBOX", "1")]);
        assert!(errors(&check(&bypass, &probe_with(&e, &no_files, true, false))).is_empty());
    }

    #[test]
    fn claude_settings_env_or_key_helper_count_as_auth() {
        let spec = AgentSpec::builtin("claude").expect("built-in");
        let e = env(&[]);
        for settings in [
            r#"{"env":{"ANTHROPIC_API_KEY":"sk-x","ANTHROPIC_BASE_URL":"http://gw"}}"#,
            r#"{"env":{"ANTHROPIC_AUTH_TOKEN":"t"}}"#,
            r#"{"env":{"CLAUDE_CODE_USE_BEDROCK":"1"}}"#,
            r#"{"apiKeyHelper":"~/bin/print-key.sh"}"#,
        ] {
            let files = |p: &str| (p == ".claude/settings.json").then(|| settings.to_owned());
            let f = check(&spec, &probe_with(&e, &files, false, true));
            assert!(errors(&f).is_empty(), "{settings}: {f:?}");
        }
        for settings in [
            r#"{"env":{"ANTHROPIC_BASE_URL":"http://gw"}}"#,
            r#"{"env":{"ANTHROPIC_API_KEY":""},"apiKeyHelper":" "}"#,
            r#"{"permissions":{"allow":["Bash(ANTHROPIC_API_KEY=x)"]}}"#,
            "not json",
        ] {
            let files = |p: &str| (p == ".claude/settings.json").then(|| settings.to_owned());
            let f = check(&spec, &probe_with(&e, &files, false, true));
            assert_eq!(
                errors(&f),
                ["Claude Code has no API key and no login"],
                "{settings}"
            );
        }
    }

    #[test]
    fn claude_login_file_counts_as_auth() {
        let files = |p: &str| (p == ".claude/.credentials.json").then(|| "{}".to_owned());
        let spec = AgentSpec::builtin("claude").expect("built-in");
        let e = env(&[]);
        assert!(errors(&check(&spec, &probe_with(&e, &files, false, true))).is_empty());
    }

    #[test]
    fn codex_base_url_needs_a_provider() {
        let no_files = |_: &str| None;
        let spec = AgentSpec::builtin("codex").expect("built-in");
        let e = env(&[("OPENAI_API_KEY", "k"), ("OPENAI_BASE_URL", "http://x/v1")]);
        let f = check(&spec, &probe_with(&e, &no_files, false, false));
        assert_eq!(errors(&f).len(), 1, "{f:?}");
        let mut with = spec.clone();
        with.args = vec!["-c".into(), "model_provider=\"gateway\"".into()];
        assert!(errors(&check(&with, &probe_with(&e, &no_files, false, false))).is_empty());
    }

    #[test]
    fn gemini_gateway_needs_an_auth_type() {
        let no_files = |_: &str| None;
        let e = env(&[
            ("GEMINI_API_KEY", "k"),
            ("GOOGLE_GEMINI_BASE_URL", "http://x"),
        ]);
        let spec = AgentSpec::builtin("gemini").expect("built-in");
        let f = check(&spec, &probe_with(&e, &no_files, false, false));
        assert_eq!(errors(&f).len(), 1, "{f:?}");
        let e = env(&[
            ("GEMINI_API_KEY", "k"),
            ("GOOGLE_GEMINI_BASE_URL", "http://x"),
            (
                "GEMINI_CLI_SYSTEM_SETTINGS_PATH",
                ".orch/gemini-settings.json",
            ),
        ]);
        assert!(errors(&check(&spec, &probe_with(&e, &no_files, false, false))).is_empty());
    }

    #[test]
    fn aider_needs_some_key() {
        let no_files = |_: &str| None;
        let spec = AgentSpec::builtin("aider").expect("built-in");
        let e = env(&[]);
        assert_eq!(
            errors(&check(&spec, &probe_with(&e, &no_files, false, false))).len(),
            1
        );
        let e = env(&[("OPENAI_API_KEY", "k")]);
        assert!(check(&spec, &probe_with(&e, &no_files, false, false)).is_empty());
    }
}
