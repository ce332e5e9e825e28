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
mod command_line;
pub mod environment;
mod gemini;
mod kind;
pub mod preflight;
pub mod price;
mod spec;
pub mod stream;
mod usage;

pub use availability::{Availability, classify_exit};
use command_line::base_invocation;
pub use command_line::{Invocation, MAX_PROMPT_ARG_BYTES, Permissions, PromptInput};
pub use kind::AgentKind;
pub use spec::{AgentError, AgentSpec, DEFAULT_API_RETRIES};
pub use stream::{StreamWatch, Unavailable};
pub use usage::{CostSource, Usage};
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
    use super::command_line::prompt_fits_argv;
    use super::*;
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};

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
