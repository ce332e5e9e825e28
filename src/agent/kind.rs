//! Which CLI an agent is: the one value every adapter, parser and check
//! of this layer branches on, in a file of its own so that they name it
//! here and not their parent module.

use std::fmt;

/// Which CLI an agent is, and so which adapter builds its command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentKind {
    /// Claude Code (`claude`).
    Claude,
    /// OpenAI Codex CLI (`codex`).
    Codex,
    /// Google Gemini CLI (`gemini`).
    Gemini,
    /// Aider (`aider`).
    Aider,
    /// Any program, from a shell template (`command = ...`).
    Command,
    /// The scripted offline fake (`fixtures/agents/fake-agent`), for tests.
    Fake,
}

impl AgentKind {
    /// Every kind, in the order messages list them.
    pub const ALL: [AgentKind; 6] = [
        AgentKind::Claude,
        AgentKind::Codex,
        AgentKind::Gemini,
        AgentKind::Aider,
        AgentKind::Command,
        AgentKind::Fake,
    ];

    /// The name used in config (`kind = claude`) and records.
    pub fn as_str(self) -> &'static str {
        match self {
            AgentKind::Claude => "claude",
            AgentKind::Codex => "codex",
            AgentKind::Gemini => "gemini",
            AgentKind::Aider => "aider",
            AgentKind::Command => "command",
            AgentKind::Fake => "fake",
        }
    }

    /// Parses a config value (`kind = Claude` works too: git config values
    /// are case-sensitive, but nobody means a different CLI by the case).
    pub fn parse(value: &str) -> Option<AgentKind> {
        let value = value.trim();
        AgentKind::ALL
            .into_iter()
            .find(|k| k.as_str().eq_ignore_ascii_case(value))
    }

    /// The binary run when the spec names none; `None` for `Command`, whose
    /// template says what to run.
    pub fn default_program(self) -> Option<&'static str> {
        match self {
            AgentKind::Claude => Some("claude"),
            AgentKind::Codex => Some("codex"),
            AgentKind::Gemini => Some("gemini"),
            AgentKind::Aider => Some("aider"),
            AgentKind::Command => None,
            AgentKind::Fake => Some("fake-agent"),
        }
    }

    /// How to install this kind's CLI, for messages about a missing one.
    pub fn install_hint(self) -> &'static str {
        match self {
            AgentKind::Claude => "install Claude Code: npm install -g @anthropic-ai/claude-code",
            AgentKind::Codex => "install Codex CLI: npm install -g @openai/codex",
            AgentKind::Gemini => "install Gemini CLI: npm install -g @google/gemini-cli",
            AgentKind::Aider => {
                "install Aider: pipx install aider-chat (or pip install aider-chat in a venv)"
            }
            AgentKind::Command => "check the program named in the `command` template",
            AgentKind::Fake => "put fixtures/agents of the git-orch sources first on PATH",
        }
    }
}

impl fmt::Display for AgentKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
