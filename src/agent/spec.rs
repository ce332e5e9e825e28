//! An agent's configuration ([`AgentSpec`]): a built-in name or an
//! `[agent "NAME"]` section, read and checked, with what is wrong with one
//! ([`AgentError`]).

use std::collections::BTreeMap;
use std::path::Path;

use super::environment;
use super::kind::AgentKind;

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
