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

use super::kind::AgentKind;
use super::spec::AgentSpec;

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
    /// What to do, in words: a command, an environment variable, a file.
    pub fix: String,
    /// Text that fixes it when pasted, exactly as given, into a file; the
    /// fix says so. Never a placeholder to fill in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paste: Option<Paste>,
}

/// Text to paste into a file, valid there as it stands.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Paste {
    /// The file, as people name it: `.orch/config`,
    /// `~/.gemini/settings.json`.
    pub file: String,
    /// What to add to it (a whole `[agent "NAME"]` section for
    /// `.orch/config`, which git's config syntax merges with the one
    /// there: a single-valued key's last value wins).
    pub text: String,
}

/// `value` written so git's config parser reads back exactly `value`:
/// quoted when it holds what git would strip or take as a comment (`#`,
/// `;`, quotes, backslashes, surrounding spaces), with `"` and `\`
/// escaped inside.
pub fn config_value(value: &str) -> String {
    let plain =
        !value.is_empty() && value.trim() == value && !value.contains(['#', ';', '"', '\\', '\n']);
    if plain {
        return value.to_owned();
    }
    let escaped = value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n");
    format!("\"{escaped}\"")
}

/// An `[agent "NAME"]` section with `lines` (`key = value`, values already
/// written with [`config_value`]), indented as the docs' recipes are.
fn agent_section(section: &str, lines: &[String]) -> String {
    let mut out = format!(
        "[agent \"{}\"]\n",
        section.replace('\\', "\\\\").replace('"', "\\\"")
    );
    for l in lines {
        out.push_str("    ");
        out.push_str(l);
        out.push('\n');
    }
    out
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
        paste: None,
    }
}

fn note(problem: impl Into<String>, fix: impl Into<String>) -> Finding {
    Finding {
        severity: Severity::Note,
        problem: problem.into(),
        fix: fix.into(),
        paste: None,
    }
}

impl Finding {
    /// The fix in one line, and where the block to paste is shown.
    pub fn fix_line(&self, agent: &str) -> String {
        match &self.paste {
            Some(p) => format!(
                "{}; `git orch agents {agent}` prints the block to paste into {}",
                self.fix, p.file
            ),
            None => self.fix.clone(),
        }
    }

    fn pasting(mut self, file: &str, text: String) -> Finding {
        self.paste = Some(Paste {
            file: file.to_owned(),
            text,
        });
        self
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
        AgentKind::Aider => aider(spec, probe),
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
        out.push(
            error(
                "Claude Code refuses --dangerously-skip-permissions as root outside a sandbox",
                "run Claude in its milder acceptEdits mode (`bypassPermissions = false` in the agent's section); or use the sandbox (`sandbox = bwrap` in the [orch] section), where git-orch tells Claude it is sandboxed; or, on a throwaway container only, add `env = IS_SANDBOX=1` to the agent's section",
            )
            .pasting(
                ".orch/config",
                agent_section(section, &["bypassPermissions = false".to_owned()]),
            ),
        );
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
    if let Some(arg) = stripped_inline_table(&spec.args) {
        out.push(error(
            format!(
                "Codex CLI cannot load `-c {arg}`: an inline table whose strings lost their quotes (git's config syntax strips them), which Codex rejects (\"Error loading config.toml: invalid type: string\")"
            ),
            format!(
                "write one `-c` per key, without quotes, in [agent \"{section}\"]: `args = -c` then `args = model_providers.NAME.base_url=URL`, and so on (see docs/agents/codex.md)"
            ),
        ));
    }
    if let Some(url) = probe
        .env
        .get("OPENAI_BASE_URL")
        .filter(|u| !u.trim().is_empty())
        && !custom_provider
    {
        // Each override a `-c` of its own, dotted and unquoted: git's
        // config syntax strips quotes, and Codex reads a value that is not
        // TOML as a plain string, so these survive the paste.
        let mut lines = Vec::new();
        for value in [
            "model_provider=gateway".to_owned(),
            "model_providers.gateway.name=gateway".to_owned(),
            format!("model_providers.gateway.base_url={}", url.trim()),
            "model_providers.gateway.env_key=OPENAI_API_KEY".to_owned(),
            "model_providers.gateway.wire_api=responses".to_owned(),
        ] {
            lines.push("args = -c".to_owned());
            lines.push(format!("args = {}", config_value(&value)));
        }
        out.push(
            error(
                "OPENAI_BASE_URL is set, but Codex CLI sends its built-in provider's requests to OpenAI regardless",
                "declare the gateway as a model provider of Codex, one `-c` per key (see docs/agents/codex.md)",
            )
            .pasting(".orch/config", agent_section(section, &lines)),
        );
    }
    out
}

/// The first `-c KEY=VALUE` override whose value is an inline table
/// (`{…}`) with a bare word where a string belongs (`{name=gateway}`):
/// what `model_providers.x={name="x"}` becomes in git's config syntax,
/// which removes the quotes. Codex parses the value as TOML, falls back
/// to a plain string, and then refuses its whole configuration.
fn stripped_inline_table(args: &[String]) -> Option<String> {
    args.windows(2)
        .filter(|w| w[0] == "-c" || w[0] == "--config")
        .map(|w| &w[1])
        .find(|arg| {
            let Some((_, value)) = arg.split_once('=') else {
                return false;
            };
            let value = value.trim();
            let Some(inner) = value.strip_prefix('{').and_then(|v| v.strip_suffix('}')) else {
                return false;
            };
            inner.split(',').any(|pair| {
                pair.split_once('=').is_some_and(|(_, v)| {
                    let v = v.trim();
                    !v.is_empty()
                        && !v.starts_with(['"', '\'', '[', '{'])
                        && v.parse::<f64>().is_err()
                        && v != "true"
                        && v != "false"
                })
            })
        })
        .cloned()
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
        // Only Gemini's own settings select an auth type; the file does
        // not exist yet (else it would be read above), so this is all of
        // it.
        out.push(
            error(
                "GOOGLE_GEMINI_BASE_URL is set without an auth type, which Gemini CLI rejects (\"Invalid auth method selected\")",
                format!(
                    "select the API-key auth type in ~/.gemini/settings.json (`{{\"security\": {{\"auth\": {{\"selectedType\": \"gemini-api-key\"}}}}}}`, beside what the file holds); [agent \"{section}\"] may name another settings file with `env = GEMINI_CLI_SYSTEM_SETTINGS_PATH=PATH` (see docs/agents/gemini.md)"
                ),
            )
            .pasting(
                "~/.gemini/settings.json",
                "{\"security\": {\"auth\": {\"selectedType\": \"gemini-api-key\"}}}\n".to_owned(),
            ),
        );
    }
    out
}

fn aider(spec: &AgentSpec, probe: &Probe) -> Vec<Finding> {
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
    // No key in .orch/config: it is committed and travels with the
    // repository.
    vec![error(
        "Aider has no API key for any provider",
        "set the key of your model's provider (OPENAI_API_KEY, ANTHROPIC_API_KEY, …) where git orch runs, or in ~/.aider.conf.yml or a .env file",
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
    fn codex_fix_declares_the_gateway_it_found_without_quotes() {
        let no_files = |_: &str| None;
        let spec = AgentSpec::builtin("codex").expect("built-in");
        let e = env(&[
            ("OPENAI_API_KEY", "k"),
            ("OPENAI_BASE_URL", "http://127.0.0.1:4000/v1"),
        ]);
        let f = check(&spec, &probe_with(&e, &no_files, false, false));
        let paste = f[0].paste.as_ref().expect("a paste");
        assert_eq!(paste.file, ".orch/config");
        assert_eq!(
            paste.text,
            "[agent \"codex\"]\n    args = -c\n    args = model_provider=gateway\n    args = -c\n    args = model_providers.gateway.name=gateway\n    args = -c\n    args = model_providers.gateway.base_url=http://127.0.0.1:4000/v1\n    args = -c\n    args = model_providers.gateway.env_key=OPENAI_API_KEY\n    args = -c\n    args = model_providers.gateway.wire_api=responses\n"
        );
        assert!(!paste.text.contains('…'), "no placeholder");
    }

    #[test]
    fn codex_inline_table_without_quotes_is_refused() {
        let no_files = |_: &str| None;
        let e = env(&[("OPENAI_API_KEY", "k")]);
        let mut spec = AgentSpec::builtin("codex").expect("built-in");
        // What git reads back from the fix this preflight used to print.
        spec.args = vec![
            "-c".into(),
            "model_provider=gateway".into(),
            "-c".into(),
            "model_providers.gateway={name=gateway, base_url=http://127.0.0.1:4000/v1, env_key=OPENAI_API_KEY, wire_api=responses}".into(),
        ];
        let f = check(&spec, &probe_with(&e, &no_files, false, false));
        assert_eq!(errors(&f).len(), 1, "{f:?}");
        assert!(errors(&f)[0].contains("lost their quotes"), "{f:?}");
        // Quoted strings, numbers and booleans are TOML: fine.
        spec.args = vec![
            "-c".into(),
            "model_providers.gateway={name=\"gateway\", request_max_retries=1, x=true}".into(),
            "-c".into(),
            "model_providers.gateway.base_url=http://gw/v1".into(),
        ];
        assert!(errors(&check(&spec, &probe_with(&e, &no_files, false, false))).is_empty());
    }

    #[test]
    fn claude_root_fix_pastes_the_milder_mode() {
        let no_files = |_: &str| None;
        let mut spec = AgentSpec::builtin("claude").expect("built-in");
        spec.bypass_permissions = Some(true);
        let e = env(&[("ANTHROPIC_API_KEY", "k")]);
        let f = check(&spec, &probe_with(&e, &no_files, true, false));
        let paste = f[0].paste.as_ref().expect("a paste");
        assert_eq!(
            paste.text,
            "[agent \"claude\"]\n    bypassPermissions = false\n"
        );
    }

    #[test]
    fn config_values_are_quoted_only_when_git_would_change_them() {
        assert_eq!(
            config_value("model_provider=gateway"),
            "model_provider=gateway"
        );
        assert_eq!(config_value("http://gw/v1"), "http://gw/v1");
        assert_eq!(config_value("http://gw/v1#frag"), "\"http://gw/v1#frag\"");
        assert_eq!(config_value("a;b"), "\"a;b\"");
        assert_eq!(config_value("say \"hi\""), "\"say \\\"hi\\\"\"");
        assert_eq!(config_value("C:\\x"), "\"C:\\\\x\"");
        assert_eq!(config_value(" padded "), "\" padded \"");
        assert_eq!(config_value(""), "\"\"");
    }

    #[test]
    fn no_fix_names_a_placeholder_or_a_quoted_config_value() {
        // Every finding of every kind in worlds that trigger them all.
        let no_files = |_: &str| None;
        let e = env(&[
            ("OPENAI_BASE_URL", "http://gw/v1"),
            ("GOOGLE_GEMINI_BASE_URL", "http://gw"),
        ]);
        for name in ["claude", "codex", "gemini", "aider"] {
            let mut spec = AgentSpec::builtin(name).expect("built-in");
            spec.bypass_permissions = Some(true);
            for f in check(&spec, &probe_with(&e, &no_files, true, false)) {
                assert!(!f.fix.contains("=\""), "{name}: {}", f.fix);
                if let Some(p) = &f.paste {
                    assert!(!p.text.contains('…'), "{name}: {}", p.text);
                }
            }
        }
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
