//! What of the user's environment and home folder each agent CLI needs.
//!
//! Agents and gates get an allow-listed environment: the variables every
//! program needs ([`BASE`]), the ones a CLI reads for its keys, gateway and
//! settings ([`AgentKind::env_patterns`]), and what the configuration names
//! (`passEnv`). Everything else (`SSH_AUTH_SOCK`, cloud credentials, tokens
//! of other tools, git's redirecting variables) stays out. In the sandbox
//! the home folder is private: only the files a CLI keeps its login and
//! settings in ([`AgentKind::home_files`]) are copied into it.
//!
//! Patterns are a variable name, or a prefix followed by `*`.

use super::kind::AgentKind;

/// Variables every agent and gate gets when set: the basics of a Unix
/// process (search path, identity, locale, terminal), proxies and CA
/// bundles (agents reach their API through them), git's identity and
/// config redirection (the attempt's hooks are set through
/// `GIT_CONFIG_COUNT`), the toolchain locations builds rely on, and a port
/// the user chose.
pub const BASE: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "COLORTERM",
    "NO_COLOR",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TZ",
    "TMPDIR",
    "PORT",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_AUTHOR_DATE",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
    "GIT_COMMITTER_DATE",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_NOSYSTEM",
    "GIT_CONFIG_COUNT",
    "GIT_CONFIG_KEY_*",
    "GIT_CONFIG_VALUE_*",
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "GOPATH",
    "GOROOT",
    "GOMODCACHE",
    "GOCACHE",
    "GOFLAGS",
    "JAVA_HOME",
    "NVM_DIR",
    "NODE_PATH",
    "PYENV_ROOT",
    "VIRTUAL_ENV",
    "PNPM_HOME",
];

impl AgentKind {
    /// Variables this CLI reads for its keys, gateway, model and settings.
    pub fn env_patterns(self) -> &'static [&'static str] {
        match self {
            AgentKind::Claude => &[
                "ANTHROPIC_*",
                "CLAUDE_*",
                "DISABLE_AUTOUPDATER",
                "DISABLE_TELEMETRY",
                "DISABLE_ERROR_REPORTING",
                "MCP_TIMEOUT",
                "BASH_DEFAULT_TIMEOUT_MS",
                "BASH_MAX_TIMEOUT_MS",
                "IS_SANDBOX",
            ],
            AgentKind::Codex => &["OPENAI_*", "CODEX_*", "AZURE_OPENAI_*"],
            AgentKind::Gemini => &[
                "GEMINI_*",
                "GOOGLE_API_KEY",
                "GOOGLE_GEMINI_BASE_URL",
                "GOOGLE_VERTEX_BASE_URL",
                "GOOGLE_CLOUD_PROJECT",
                "GOOGLE_CLOUD_LOCATION",
                "GOOGLE_GENAI_*",
                "GOOGLE_APPLICATION_CREDENTIALS",
            ],
            AgentKind::Aider => &[
                "AIDER_*",
                "OPENAI_*",
                "ANTHROPIC_*",
                "GEMINI_API_KEY",
                "OPENROUTER_API_KEY",
                "DEEPSEEK_API_KEY",
                "GROQ_API_KEY",
                "MISTRAL_API_KEY",
                "XAI_API_KEY",
                "OLLAMA_API_BASE",
                "LITELLM_*",
            ],
            AgentKind::Command => &[],
            // The offline fake reads its script and test switches from
            // these; it is a test tool.
            AgentKind::Fake => &["FAKE_*"],
        }
    }

    /// Files and folders of `$HOME` (relative paths) that hold this CLI's
    /// login and settings: copied into the private home of a sandboxed
    /// attempt, so the agent can use and even rewrite them without touching
    /// the originals.
    pub fn home_files(self) -> &'static [&'static str] {
        match self {
            AgentKind::Claude => &[
                ".claude.json",
                ".claude/settings.json",
                ".claude/.credentials.json",
                ".claude/CLAUDE.md",
                ".claude/agents",
                ".claude/commands",
            ],
            AgentKind::Codex => &[".codex/config.toml", ".codex/auth.json", ".codex/AGENTS.md"],
            AgentKind::Gemini => &[
                ".gemini/settings.json",
                ".gemini/oauth_creds.json",
                ".gemini/google_accounts.json",
                ".gemini/installation_id",
                ".gemini/GEMINI.md",
            ],
            AgentKind::Aider => &[
                ".aider.conf.yml",
                ".aider.model.settings.yml",
                ".aider.model.metadata.json",
                ".env",
            ],
            AgentKind::Command | AgentKind::Fake => &[],
        }
    }
}

/// Home files every sandboxed command gets a copy of: git's own settings,
/// so commits carry the user's identity.
pub const BASE_HOME_FILES: &[&str] = &[".gitconfig", ".config/git/config", ".config/git/ignore"];

/// Whether `text` is a variable name or a name prefix ending in `*`.
pub fn is_pattern(text: &str) -> bool {
    let name = text.strip_suffix('*').unwrap_or(text);
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Whether the variable `name` matches `pattern`.
pub fn matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => name == pattern,
    }
}

/// The pairs of `vars` whose names match any of `patterns`, in the order
/// given.
pub fn allowed<'a, I>(vars: I, patterns: &[&str]) -> Vec<(String, String)>
where
    I: IntoIterator<Item = (&'a str, &'a str)>,
{
    vars.into_iter()
        .filter(|(k, _)| patterns.iter().any(|p| matches(p, k)))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// The variables `text` (a shell command template) names as `$NAME` or
/// `${NAME…}` that match none of `patterns` and are not git-orch's own
/// (`ORCH_*`): the agent's shell would expand each to nothing, silently,
/// because the allow-listed environment leaves it out. Special and
/// positional parameters (`$1`, `$@`, `$$`, …) are not names.
pub fn unpassed_references(text: &str, patterns: &[&str]) -> Vec<String> {
    let bytes = text.as_bytes();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    let mut quoted = false;
    while i < bytes.len() {
        match bytes[i] {
            // Nothing expands inside single quotes.
            b'\'' => quoted = !quoted,
            b'\\' if !quoted => i += 1,
            b'$' if !quoted => {
                let start = i + 1 + usize::from(bytes.get(i + 1) == Some(&b'{'));
                let end = bytes[start..]
                    .iter()
                    .position(|c| !(c.is_ascii_alphanumeric() || *c == b'_'))
                    .map_or(bytes.len(), |n| start + n);
                let name = &text[start..end];
                if is_pattern(name)
                    && !name.starts_with("ORCH_")
                    && !patterns.iter().any(|p| matches(p, name))
                    && !out.iter().any(|n| n == name)
                {
                    out.push(name.to_owned());
                }
                i = end.max(i + 1);
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_the_allow_list_drops_are_found_and_nothing_else() {
        let patterns = ["PATH", "HOME", "MY_*"];
        assert_eq!(
            unpassed_references(
                r#"sh "$HELPER" --out ${OUT_DIR}/x $HOME $MY_KEY"#,
                &patterns
            ),
            ["HELPER", "OUT_DIR"]
        );
        // Git-orch's own, positional and special parameters, single
        // quotes and escapes are not references.
        assert!(
            unpassed_references(
                r#"run $ORCH_PROMPT_FILE "$1" "$@" $$ '$LITERAL' \$ESCAPED"#,
                &patterns
            )
            .is_empty()
        );
        assert_eq!(unpassed_references("$A $A ${A:-x}", &[]), ["A"]);
    }

    #[test]
    fn patterns_are_names_or_prefixes() {
        assert!(is_pattern("AWS_PROFILE"));
        assert!(is_pattern("AWS_*"));
        assert!(!is_pattern("*"));
        assert!(!is_pattern("A B"));
        assert!(!is_pattern("1X"));
        assert!(!is_pattern("A*B"));
        assert!(matches("LC_*", "LC_ALL"));
        assert!(!matches("LC_*", "LANG"));
        assert!(matches("PATH", "PATH"));
        assert!(!matches("PATH", "PATHX"));
    }

    #[test]
    fn secrets_of_other_tools_are_not_passed() {
        let vars = [
            ("PATH", "/bin"),
            ("SSH_AUTH_SOCK", "/tmp/agent.sock"),
            ("AWS_SECRET_ACCESS_KEY", "x"),
            ("GITHUB_TOKEN", "x"),
            ("GIT_DIR", "/elsewhere"),
            ("ANTHROPIC_API_KEY", "k"),
            ("OPENAI_API_KEY", "o"),
            ("LC_ALL", "C"),
        ];
        let mut patterns: Vec<&str> = BASE.to_vec();
        patterns.extend(AgentKind::Claude.env_patterns());
        let got: Vec<String> = allowed(vars, &patterns)
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(got, ["PATH", "ANTHROPIC_API_KEY", "LC_ALL"]);
    }
}
