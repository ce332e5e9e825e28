//! Agents: what git-orch knows about each coding-agent CLI it can run.
//!
//! An agent is configured as an [`AgentSpec`] (a built-in name such as
//! `claude`, or an `[agent "NAME"]` section in git-config syntax). For one
//! attempt this module turns the spec and the prompt into an [`Invocation`]
//! (program, arguments, extra environment, stdin bytes) using each CLI's
//! documented flags for non-interactive, unattended editing; after the run it
//! reads the captured stdout back into [`Usage`] (tokens, cost) and
//! classifies the exit for the fallback chain ([`classify_exit`]).
//!
//! One file per adapter (`claude`, `codex`, `gemini`, `aider`, `command`)
//! holds that CLI's argv and its output parser, with the documentation each
//! flag comes from. The offline fake agent (`fixtures/agents/fake-agent`)
//! needs no file of its own: it takes no arguments and prints Claude's
//! result shape. Beside them: `stream` reads a CLI's output as it runs and
//! says, within seconds, when the provider refused (a rejected key, a rate
//! limit, a server that is down) and what the agent's own error text was;
//! `price` turns tokens into an estimated cost; `preflight` says what to fix
//! before an agent can run; `environment` lists the variables and home
//! files each CLI needs (the sandbox passes nothing else).
//!
//! This layer is pure. It must not start programs (the runner hands the
//! [`Invocation`] to `process`), print, read files or touch git; the
//! environment the runner always sets (`ORCH_RUN`, `ORCH_TASK`,
//! `ORCH_PROMPT_FILE`, …) is the runner's business, not this module's.

mod aider;
mod availability;
mod claude;
mod codex;
mod command;
pub mod environment;
mod gemini;
pub mod preflight;
pub mod price;
pub mod stream;
mod usage;

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

pub use availability::{Availability, classify_exit};
pub use stream::{StreamWatch, Unavailable};
pub use usage::{CostSource, Usage};

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

/// An agent's configuration is unusable; the message names the section and
/// the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentError {
    /// `kind` is not one this version knows.
    #[error(
        "[agent \"{section}\"]: unknown kind {kind:?}; use one of claude, codex, gemini, aider, command, fake"
    )]
    UnknownKind { section: String, kind: String },
    /// Neither a built-in agent nor a configured section.
    #[error("no agent named {name:?}")]
    Unknown { name: String },
    /// No `kind`, and the section name is not a built-in one to infer it from.
    #[error(
        "[agent \"{section}\"]: no kind; add `kind = claude` (or codex, gemini, aider, command, fake)"
    )]
    MissingKind { section: String },
    /// `kind = command` without a template.
    #[error(
        "[agent \"{section}\"]: kind = command needs a template; add e.g. `command = my-agent --prompt-file {{prompt_file}}`"
    )]
    MissingCommand { section: String },
    /// `command` given for a CLI kind, where it would be silently ignored.
    #[error(
        "[agent \"{section}\"]: `command` is the template of kind = command and does nothing for kind = {kind}; to run another binary use `program = PATH`"
    )]
    CommandForCliKind { section: String, kind: AgentKind },
    /// `program` given for `kind = command`, whose template already says what
    /// to run.
    #[error(
        "[agent \"{section}\"]: `program` does nothing for kind = command; put the program in the `command` template"
    )]
    ProgramForCommandKind { section: String },
    /// A key that must have a value was set to the empty string.
    #[error("[agent \"{section}\"]: `{key}` is empty; give it a value or remove the line")]
    EmptyValue { section: String, key: String },
    /// `timeout` is not a whole, positive number of seconds.
    #[error(
        "[agent \"{section}\"]: timeout {value:?} is not a number of seconds; use whole seconds, e.g. `timeout = 900`"
    )]
    BadTimeout { section: String, value: String },
    /// An `env` entry is not `NAME=VALUE`.
    #[error(
        "[agent \"{section}\"]: env {value:?} is not NAME=VALUE; write e.g. `env = IS_SANDBOX=1`"
    )]
    BadEnv { section: String, value: String },
    /// A `passEnv` entry is not a variable name (optionally ending in `*`).
    #[error(
        "[agent \"{section}\"]: passEnv {value:?} is not a variable name; write e.g. `passEnv = AWS_PROFILE` or `passEnv = AWS_*`"
    )]
    BadPassEnv { section: String, value: String },
    /// A `homeFile` entry is not a relative path inside the home folder.
    #[error(
        "[agent \"{section}\"]: homeFile {value:?} must be a path relative to the home folder without `..`, e.g. `homeFile = .config/my-agent`"
    )]
    BadHomeFile { section: String, value: String },
    /// `apiRetries` is not a whole number.
    #[error(
        "[agent \"{section}\"]: apiRetries {value:?} is not a whole number; e.g. `apiRetries = 2` (0 stops at the first refusal)"
    )]
    BadApiRetries { section: String, value: String },
    /// `bypassPermissions` is not a boolean.
    #[error("[agent \"{section}\"]: bypassPermissions {value:?} is not true or false")]
    BadBypass { section: String, value: String },
    /// A key this version does not know, most likely a typo.
    #[error(
        "[agent \"{section}\"]: unknown key `{key}`; the keys are kind, program, command, model, args, timeout, env, passEnv, homeFile, apiRetries, bypassPermissions"
    )]
    UnknownKey { section: String, key: String },
}

impl AgentError {
    /// What makes the agent usable, when the message does not say it: the
    /// fix a preflight finding shows, and the CLI's hint.
    pub fn fix(&self) -> Option<String> {
        match self {
            AgentError::Unknown { name } => Some(format!(
                "use claude, codex, gemini, aider or fake, or define `[agent \"{name}\"]` in .orch/config"
            )),
            _ => None,
        }
    }
}

/// An agent as configured: a built-in name, or `[agent "NAME"]` in
/// git-config syntax with keys `kind`, `program`, `command`, `model`, `args`
/// (multi-valued), `timeout`, `env` (multi-valued, `NAME=VALUE`), `passEnv`
/// and `homeFile` (multi-valued), `apiRetries` and `bypassPermissions`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AgentSpec {
    /// The config section name (`claude`, `claude-opus`, …).
    pub name: String,
    /// Which adapter builds the command line.
    pub kind: AgentKind,
    /// Overrides the binary (defaults: `claude`, `codex`, `gemini`, `aider`,
    /// `fake-agent`). Unused by `Command`.
    pub program: Option<String>,
    /// For `Command` only: a script run with `sh -c`, in which
    /// `{prompt_file}`, `{workdir}`, `{task}`, `{attempt}` and `{model}` are
    /// replaced by the values, each already single-quoted for the shell.
    pub command: Option<String>,
    /// The model to ask the CLI for; the CLI's own default when unset.
    pub model: Option<String>,
    /// Extra arguments appended after the adapter's own flags (for `Command`:
    /// the script's positional parameters `$1`, `$2`, …).
    pub args: Vec<String>,
    /// Extra environment for the agent (`env = NAME=VALUE` entries), on top
    /// of what the runner sets.
    #[serde(default)]
    pub env: Vec<(String, String)>,
    /// How long one attempt may run before the runner stops it, in seconds;
    /// the run's default when unset.
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    /// More variables of the user's environment the agent may see, on top
    /// of its kind's (`NAME`, or a prefix `NAME_*`).
    #[serde(default)]
    pub pass_env: Vec<String>,
    /// More files or folders of the home folder a sandboxed agent gets a
    /// copy of, on top of its kind's (relative to `$HOME`).
    #[serde(default)]
    pub home_files: Vec<String>,
    /// How many provider retries (rate limit, overload, server errors,
    /// unreachable server) the agent may go through, as its output reports
    /// them, before git-orch stops it as unavailable; `None`: the default
    /// ([`DEFAULT_API_RETRIES`]).
    #[serde(default)]
    pub api_retries: Option<u32>,
    /// Whether the CLI's permission-bypass flag is passed: `None` means
    /// only inside the sandbox.
    #[serde(default)]
    pub bypass_permissions: Option<bool>,
}

/// Provider retries an agent may go through before it is stopped as
/// unavailable: enough to ride out a blip, few enough that the fallback
/// agent starts within seconds.
pub const DEFAULT_API_RETRIES: u32 = 2;

impl AgentSpec {
    /// The built-in spec for a bare name: `claude`, `codex`, `gemini`,
    /// `aider` and `fake` are that kind with defaults; anything else (and
    /// `command`, which needs a template) is `None`.
    pub fn builtin(name: &str) -> Option<AgentSpec> {
        let kind = AgentKind::parse(name).filter(|k| *k != AgentKind::Command)?;
        if name != kind.as_str() {
            // `Claude` is not a built-in name; sections are matched exactly.
            return None;
        }
        Some(AgentSpec::with_defaults(name, kind))
    }

    fn with_defaults(name: &str, kind: AgentKind) -> AgentSpec {
        AgentSpec {
            name: name.to_owned(),
            kind,
            program: None,
            command: None,
            model: None,
            args: Vec::new(),
            env: Vec::new(),
            timeout_secs: None,
            pass_env: Vec::new(),
            home_files: Vec::new(),
            api_retries: None,
            bypass_permissions: None,
        }
    }

    /// Builds a spec from the values of one `[agent "NAME"]` section (key →
    /// values in file order; single-valued keys take the last value, as git
    /// does). Without `kind`, a built-in section name gives it
    /// (`[agent "codex"]` is kind codex).
    pub fn from_config(
        name: &str,
        values: &BTreeMap<String, Vec<String>>,
    ) -> Result<AgentSpec, AgentError> {
        let section = || name.to_owned();
        let mut normalized: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (key, vals) in values {
            // git config keys are case-insensitive.
            normalized
                .entry(key.to_ascii_lowercase())
                .or_default()
                .extend(vals.iter().cloned());
        }
        if let Some(key) = normalized.keys().find(|k| {
            !matches!(
                k.as_str(),
                "kind"
                    | "program"
                    | "command"
                    | "model"
                    | "args"
                    | "timeout"
                    | "env"
                    | "passenv"
                    | "homefile"
                    | "apiretries"
                    | "bypasspermissions"
            )
        }) {
            return Err(AgentError::UnknownKey {
                section: section(),
                key: key.clone(),
            });
        }
        let last = |key: &str| normalized.get(key).and_then(|v| v.last()).cloned();
        let non_empty = |key: &str| -> Result<Option<String>, AgentError> {
            match last(key) {
                Some(v) if v.trim().is_empty() => Err(AgentError::EmptyValue {
                    section: section(),
                    key: key.to_owned(),
                }),
                other => Ok(other),
            }
        };

        let kind = match last("kind") {
            Some(k) => AgentKind::parse(&k).ok_or_else(|| AgentError::UnknownKind {
                section: section(),
                kind: k.clone(),
            })?,
            None => AgentSpec::builtin(name)
                .map(|s| s.kind)
                .ok_or_else(|| AgentError::MissingKind { section: section() })?,
        };

        let mut spec = AgentSpec::with_defaults(name, kind);
        spec.program = non_empty("program")?;
        spec.command = non_empty("command")?;
        spec.model = non_empty("model")?;
        spec.args = normalized.get("args").cloned().unwrap_or_default();

        match (kind, &spec.command, &spec.program) {
            (AgentKind::Command, None, _) => {
                return Err(AgentError::MissingCommand { section: section() });
            }
            (AgentKind::Command, Some(_), Some(_)) => {
                return Err(AgentError::ProgramForCommandKind { section: section() });
            }
            (k, Some(_), _) if k != AgentKind::Command => {
                return Err(AgentError::CommandForCliKind {
                    section: section(),
                    kind: k,
                });
            }
            _ => {}
        }

        if let Some(t) = last("timeout") {
            let secs = t
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|s| *s > 0)
                .ok_or_else(|| AgentError::BadTimeout {
                    section: section(),
                    value: t.clone(),
                })?;
            spec.timeout_secs = Some(secs);
        }

        for entry in normalized.get("env").into_iter().flatten() {
            let bad = || AgentError::BadEnv {
                section: section(),
                value: entry.clone(),
            };
            let (key, value) = entry.split_once('=').ok_or_else(bad)?;
            let valid_name = !key.is_empty()
                && !key.starts_with(|c: char| c.is_ascii_digit())
                && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid_name {
                return Err(bad());
            }
            spec.env.push((key.to_owned(), value.to_owned()));
        }

        for entry in normalized.get("passenv").into_iter().flatten() {
            let name = entry.trim();
            if !environment::is_pattern(name) {
                return Err(AgentError::BadPassEnv {
                    section: section(),
                    value: entry.clone(),
                });
            }
            spec.pass_env.push(name.to_owned());
        }
        for entry in normalized.get("homefile").into_iter().flatten() {
            let rel = entry.trim();
            let path = Path::new(rel);
            let inside = !rel.is_empty()
                && path.is_relative()
                && path
                    .components()
                    .all(|c| matches!(c, std::path::Component::Normal(_)));
            if !inside {
                return Err(AgentError::BadHomeFile {
                    section: section(),
                    value: entry.clone(),
                });
            }
            spec.home_files.push(rel.to_owned());
        }
        if let Some(v) = last("apiretries") {
            spec.api_retries =
                Some(
                    v.trim()
                        .parse::<u32>()
                        .map_err(|_| AgentError::BadApiRetries {
                            section: section(),
                            value: v.clone(),
                        })?,
                );
        }
        if let Some(v) = last("bypasspermissions") {
            spec.bypass_permissions = Some(match v.trim().to_ascii_lowercase().as_str() {
                "" | "true" | "yes" | "on" | "1" => true,
                "false" | "no" | "off" | "0" => false,
                _ => {
                    return Err(AgentError::BadBypass {
                        section: section(),
                        value: v.clone(),
                    });
                }
            });
        }
        Ok(spec)
    }

    /// Provider retries tolerated before the agent counts as unavailable.
    pub fn api_retries(&self) -> u32 {
        self.api_retries.unwrap_or(DEFAULT_API_RETRIES)
    }

    /// Whether the permission-bypass flag is passed, given whether the
    /// attempt runs in the sandbox: inside it by default, outside only when
    /// the user opted in with `bypassPermissions = true`.
    pub fn bypasses_permissions(&self, sandboxed: bool) -> bool {
        self.bypass_permissions.unwrap_or(sandboxed)
    }

    /// The spec named `name`: its `[agent "NAME"]` section in `configured`
    /// if there is one, else the built-in of that name.
    pub fn resolve(
        name: &str,
        configured: &BTreeMap<String, BTreeMap<String, Vec<String>>>,
    ) -> Result<AgentSpec, AgentError> {
        match configured.get(name) {
            Some(values) => AgentSpec::from_config(name, values),
            None => AgentSpec::builtin(name).ok_or_else(|| AgentError::Unknown {
                name: name.to_owned(),
            }),
        }
    }

    /// The binary this spec runs (`None` for `Command`, which runs `sh`).
    pub fn program(&self) -> Option<&str> {
        if self.kind == AgentKind::Command {
            return None;
        }
        self.program
            .as_deref()
            .or_else(|| self.kind.default_program())
    }
}

/// What to run for one attempt. The runner starts `program` with `args` in
/// the attempt's worktree, in a process group of its own, adding `env` on
/// top of the `ORCH_*` variables.
#[derive(Debug, Clone, PartialEq)]
pub struct Invocation {
    /// The program, looked up on PATH unless it contains a `/`.
    pub program: String,
    /// Its arguments, each passed as one argv entry (no shell in between).
    pub args: Vec<String>,
    /// Extra environment on top of the `ORCH_*` variables the runner sets.
    pub env: Vec<(String, String)>,
    /// Bytes to write to the agent's stdin, then close it. `None` means
    /// stdin must be `/dev/null`: Codex, Claude and Gemini all read a piped
    /// stdin as extra prompt, and would wait forever on an open one.
    pub stdin: Option<Vec<u8>>,
    /// Folders outside the worktree the CLI writes to (Aider's history
    /// files): the runner creates them, and the sandbox lets the agent
    /// write them.
    pub writable: Vec<std::path::PathBuf>,
}

/// Where the attempt runs, which decides the permission flags.
#[derive(Debug, Clone, Default)]
pub struct Permissions {
    /// The attempt runs inside git-orch's sandbox.
    pub sandboxed: bool,
    /// The agent runs as root (uid 0), which Claude Code minds.
    pub root: bool,
    /// Shell commands the agent should be allowed to run in the milder,
    /// non-bypass mode: the subtask's verification and the gate commands,
    /// so it can check its own work.
    pub allowed_commands: Vec<String>,
}

/// The prompt and where the attempt runs.
#[derive(Debug, Clone, Copy)]
pub struct PromptInput<'a> {
    /// The full prompt text (also in `prompt_file`).
    pub prompt: &'a str,
    /// Where the runner wrote the prompt; outside the worktree, so nothing
    /// written beside it (Aider's history files) ends up in the result.
    pub prompt_file: &'a Path,
    /// The attempt's worktree, the agent's working directory.
    pub workdir: &'a Path,
    /// The task id.
    pub task: &'a str,
    /// The attempt number, from 1.
    pub attempt: u32,
}

/// The longest prompt passed as one command-line argument. Linux refuses an
/// argument over 32 pages (`MAX_ARG_STRLEN`, 128 KiB) with E2BIG, so larger
/// prompts go through stdin or the prompt file, which every CLI here
/// documents as an alternative.
pub const MAX_PROMPT_ARG_BYTES: usize = 100 * 1024;

/// Whether `prompt` can be passed as an argument: short enough, and free of
/// NUL bytes, which no argv entry can hold.
fn prompt_fits_argv(prompt: &str) -> bool {
    prompt.len() <= MAX_PROMPT_ARG_BYTES && !prompt.contains('\0')
}

/// An invocation of the spec's program with no arguments yet.
fn base_invocation(spec: &AgentSpec) -> Invocation {
    Invocation {
        program: spec
            .program()
            .expect("CLI kinds always have a program")
            .to_owned(),
        args: Vec::new(),
        env: spec.env.clone(),
        stdin: None,
        writable: Vec::new(),
    }
}

/// Builds the command line from each CLI's documented flags for
/// non-interactive, unattended editing in `input.workdir`, as if outside
/// the sandbox with no extra commands allowed (see [`invocation_in`]).
pub fn invocation(spec: &AgentSpec, input: &PromptInput) -> Invocation {
    invocation_in(spec, input, &Permissions::default())
}

/// Builds the command line for an attempt that runs where `permissions`
/// says: the permission-bypass flags only when
/// [`AgentSpec::bypasses_permissions`], else each CLI's milder mode with
/// the allowed commands.
pub fn invocation_in(
    spec: &AgentSpec,
    input: &PromptInput,
    permissions: &Permissions,
) -> Invocation {
    let bypass = spec.bypasses_permissions(permissions.sandboxed);
    match spec.kind {
        AgentKind::Claude => claude::invocation(spec, input, bypass, permissions),
        AgentKind::Codex => codex::invocation(spec, input, bypass),
        AgentKind::Gemini => gemini::invocation(spec, input, bypass, permissions),
        AgentKind::Aider => aider::invocation(spec, input),
        AgentKind::Command => command::invocation(spec, input),
        AgentKind::Fake => {
            // The fake reads everything from the ORCH_* environment (its
            // prompt from ORCH_PROMPT_FILE), so it needs no flags.
            let mut inv = base_invocation(spec);
            inv.args.extend(spec.args.iter().cloned());
            inv
        }
    }
}

/// Parses what the CLI printed on stdout (the whole output; for stream
/// formats every line) into tokens and cost, where the CLI reports them.
/// Unknown or malformed lines are skipped, never an error: a run that
/// printed nothing useful has a default [`Usage`].
pub fn parse_usage(kind: AgentKind, stdout: &[u8]) -> Usage {
    let text = String::from_utf8_lossy(stdout);
    let mut usage = parse_usage_text(kind, &text);
    if usage.model.is_none() {
        usage.model = stream::model_in(kind, &text);
    }
    usage
}

fn parse_usage_text(kind: AgentKind, text: &str) -> Usage {
    let text = text.to_owned();
    match kind {
        // The fake prints Claude's result shape (`cost` in its script).
        AgentKind::Claude | AgentKind::Fake => claude::parse_usage(&text),
        AgentKind::Codex => codex::parse_usage(&text),
        AgentKind::Gemini => gemini::parse_usage(&text),
        AgentKind::Aider => aider::parse_usage(&text),
        // A template may wrap any CLI: take the first format that reports
        // something.
        AgentKind::Command => [
            claude::parse_usage,
            codex::parse_usage,
            gemini::parse_usage,
            aider::parse_usage,
        ]
        .into_iter()
        .map(|parse| parse(&text))
        .find(|u| *u != Usage::default())
        .unwrap_or_default(),
    }
}

/// Folders (relative to the home folder) holding a CLI's session records,
/// and the parser of one record.
pub type SessionRecords = (&'static [&'static str], fn(&str) -> Usage);

/// Where a CLI keeps a per-session record with token counts, for usage
/// when its output has none yet (it was killed at its timeout): folders
/// relative to the agent's home folder, and the parser of one file.
pub fn session_records(kind: AgentKind) -> Option<SessionRecords> {
    match kind {
        AgentKind::Codex => Some((&[".codex/sessions"], codex::parse_usage)),
        AgentKind::Gemini => Some((&[".gemini/tmp"], gemini::parse_session)),
        _ => None,
    }
}

/// The binary the availability probe looks for on PATH; `None` for
/// `Command`, which is always taken to be available (its template may run
/// anything, even a shell function).
pub fn probe_program(spec: &AgentSpec) -> Option<String> {
    spec.program().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn config(pairs: &[(&str, &str)]) -> BTreeMap<String, Vec<String>> {
        let mut map: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (k, v) in pairs {
            map.entry((*k).to_owned())
                .or_default()
                .push((*v).to_owned());
        }
        map
    }

    #[test]
    fn builtin_names_give_their_kind_with_defaults() {
        for (name, kind, program) in [
            ("claude", AgentKind::Claude, "claude"),
            ("codex", AgentKind::Codex, "codex"),
            ("gemini", AgentKind::Gemini, "gemini"),
            ("aider", AgentKind::Aider, "aider"),
            ("fake", AgentKind::Fake, "fake-agent"),
        ] {
            let spec = AgentSpec::builtin(name).expect("built-in");
            assert_eq!(spec.kind, kind);
            assert_eq!(spec.name, name);
            assert_eq!(spec.program(), Some(program));
            assert!(spec.args.is_empty() && spec.model.is_none());
        }
        assert_eq!(AgentSpec::builtin("command"), None);
        assert_eq!(AgentSpec::builtin("Claude"), None);
        assert_eq!(AgentSpec::builtin("gpt"), None);
    }

    #[test]
    fn from_config_reads_every_key() {
        let spec = AgentSpec::from_config(
            "opus",
            &config(&[
                ("kind", "claude"),
                ("program", "/opt/claude/bin/claude"),
                ("model", "opus"),
                ("args", "--max-turns"),
                ("args", "30"),
                ("timeout", "900"),
                ("env", "IS_SANDBOX=1"),
                ("env", "EMPTY="),
                ("env", "WITH_EQ=a=b"),
            ]),
        )
        .expect("valid");
        assert_eq!(spec.name, "opus");
        assert_eq!(spec.kind, AgentKind::Claude);
        assert_eq!(spec.program(), Some("/opt/claude/bin/claude"));
        assert_eq!(spec.model.as_deref(), Some("opus"));
        assert_eq!(spec.args, ["--max-turns", "30"]);
        assert_eq!(spec.timeout_secs, Some(900));
        assert_eq!(
            spec.env,
            [
                ("IS_SANDBOX".to_owned(), "1".to_owned()),
                ("EMPTY".to_owned(), String::new()),
                ("WITH_EQ".to_owned(), "a=b".to_owned()),
            ]
        );
    }

    #[test]
    fn from_config_infers_kind_from_builtin_section_names() {
        let spec = AgentSpec::from_config("codex", &config(&[("model", "o3")])).expect("valid");
        assert_eq!(spec.kind, AgentKind::Codex);
        let err = AgentSpec::from_config("mine", &config(&[])).expect_err("no kind");
        assert_eq!(
            err,
            AgentError::MissingKind {
                section: "mine".into()
            }
        );
        assert!(err.to_string().contains("add `kind = claude`"), "{err}");
    }

    #[test]
    fn from_config_keys_are_case_insensitive_and_last_value_wins() {
        let spec = AgentSpec::from_config(
            "x",
            &config(&[("Kind", "gemini"), ("MODEL", "flash"), ("model", "pro")]),
        )
        .expect("valid");
        assert_eq!(spec.kind, AgentKind::Gemini);
        // Both spellings land in one key (the map, not the file, orders them).
        assert!(spec.model.is_some());
    }

    #[test]
    fn from_config_rejects_what_would_be_silently_wrong() {
        let cases: Vec<(Vec<(&str, &str)>, &str)> = vec![
            (vec![("kind", "gpt")], "unknown kind \"gpt\""),
            (vec![("kind", "command")], "needs a template"),
            (vec![("kind", "claude"), ("command", "x")], "program = PATH"),
            (
                vec![("kind", "command"), ("command", "x"), ("program", "y")],
                "put the program in the `command` template",
            ),
            (
                vec![("kind", "claude"), ("timeout", "15m")],
                "whole seconds",
            ),
            (vec![("kind", "claude"), ("timeout", "0")], "whole seconds"),
            (vec![("kind", "claude"), ("env", "NOEQUALS")], "NAME=VALUE"),
            (vec![("kind", "claude"), ("env", "=v")], "NAME=VALUE"),
            (vec![("kind", "claude"), ("env", "A B=v")], "NAME=VALUE"),
            (
                vec![("kind", "claude"), ("modle", "x")],
                "unknown key `modle`",
            ),
            (vec![("kind", "claude"), ("model", " ")], "`model` is empty"),
        ];
        for (pairs, expected) in cases {
            let err = AgentSpec::from_config("sec", &config(&pairs)).expect_err("invalid");
            let msg = err.to_string();
            assert!(msg.starts_with("[agent \"sec\"]: "), "{msg}");
            assert!(msg.contains(expected), "{msg} should contain {expected}");
        }
    }

    #[test]
    fn command_spec_from_config() {
        let spec = AgentSpec::from_config(
            "mine",
            &config(&[("kind", "command"), ("command", "my-agent {prompt_file}")]),
        )
        .expect("valid");
        assert_eq!(spec.kind, AgentKind::Command);
        assert_eq!(spec.program(), None);
        assert_eq!(probe_program(&spec), None);
    }

    #[test]
    fn kind_round_trips_through_serde_and_parse() {
        for kind in AgentKind::ALL {
            let json = serde_json::to_string(&kind).expect("serialise");
            assert_eq!(json, format!("\"{}\"", kind.as_str()));
            assert_eq!(AgentKind::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(AgentKind::parse(" Claude "), Some(AgentKind::Claude));
        assert_eq!(AgentKind::parse("cursor"), None);
    }

    #[test]
    fn fake_takes_no_flags_and_probes_fake_agent() {
        let spec = AgentSpec::builtin("fake").expect("built-in");
        let prompt_file = PathBuf::from("/tmp/p.md");
        let input = PromptInput {
            prompt: "do it",
            prompt_file: &prompt_file,
            workdir: Path::new("/w"),
            task: "t",
            attempt: 1,
        };
        let inv = invocation(&spec, &input);
        assert_eq!(inv.program, "fake-agent");
        assert!(inv.args.is_empty());
        assert_eq!(inv.stdin, None);
        assert_eq!(probe_program(&spec).as_deref(), Some("fake-agent"));
    }

    #[test]
    fn program_override_is_used_and_probed() {
        let mut spec = AgentSpec::builtin("codex").expect("built-in");
        spec.program = Some("/usr/local/bin/codex-nightly".into());
        assert_eq!(
            probe_program(&spec).as_deref(),
            Some("/usr/local/bin/codex-nightly")
        );
    }

    #[test]
    fn prompt_fits_argv_only_when_short_and_nul_free() {
        assert!(prompt_fits_argv("short"));
        assert!(!prompt_fits_argv("a\0b"));
        assert!(!prompt_fits_argv(&"x".repeat(MAX_PROMPT_ARG_BYTES + 1)));
        assert!(prompt_fits_argv(&"x".repeat(MAX_PROMPT_ARG_BYTES)));
    }
}
