//! Claude Code (`claude`): its headless command line and its `stream-json`
//! output.
//!
//! Flags, from the CLI reference
//! (<https://docs.anthropic.com/en/docs/claude-code/cli-reference>) and the
//! headless-mode and permission-mode pages:
//!
//! - `-p` / `--print`: "print response without interactive mode"; runs the
//!   whole agent loop and exits.
//! - `--output-format stream-json`: one JSON object per line as the agent
//!   works, ending with a `{"type":"result",...}` object carrying
//!   `total_cost_usd` (`cost_usd` before 1.0), `usage`, `num_turns` and
//!   `is_error`. Streaming rather than `json` means a run that is killed at
//!   its timeout still leaves the per-message usage behind.
//! - `--verbose`: print mode refuses `stream-json` without it.
//! - `--include-partial-messages`: the raw stream events too, among them
//!   each message's `message_delta` with its running output-token count.
//!   Without them the `assistant` lines carry only the count of
//!   `message_start` (1), so an agent killed at its timeout would be
//!   recorded with almost no output tokens.
//! - `--dangerously-skip-permissions` (the same as `--permission-mode
//!   bypassPermissions`): "everything runs without asking". Passed only
//!   inside git-orch's sandbox, or when the agent's section says
//!   `bypassPermissions = true`. Claude Code refuses it when run as root
//!   unless `IS_SANDBOX=1` (anthropics/claude-code#9184), which git-orch
//!   sets only when the attempt really is sandboxed.
//! - Otherwise `--permission-mode acceptEdits` ("automatically accept file
//!   edits") with allow rules `Bash(<command>)` and `Bash(<command> *)`
//!   for the subtask's verification and the gate commands, so the agent can
//!   check its work; in print mode any other tool call that would ask is
//!   denied. The rules go in `--settings '{"permissions":{"allow":[…]}}'`
//!   ("a settings JSON file or a JSON string"), where each is a string of
//!   its own, whatever the command holds.
//! - `--model M`: "an alias for the latest model (sonnet, opus) or a
//!   model's full name".
//! - `--`: the prompt is a positional argument (commander.js); after `--` a
//!   prompt starting with `-`, or equal to a subcommand name such as
//!   `update`, is still the prompt, and a variadic option in the user's
//!   `args` (`--allowedTools Read Edit`) cannot swallow it.
//!
//! A prompt too long for one argument goes to stdin instead: "cat file |
//! claude -p" is documented, and with no positional prompt stdin is the
//! prompt.

use std::collections::BTreeMap;

use serde_json::Value;

use super::command_line::{
    Invocation, Permissions, PromptInput, base_invocation, prompt_fits_argv,
};
use super::spec::AgentSpec;
use super::usage::{Usage, amount, count, count0, json_lines};

pub(super) fn invocation(
    spec: &AgentSpec,
    input: &PromptInput,
    bypass: bool,
    permissions: &Permissions,
) -> Invocation {
    let mut inv = base_invocation(spec);
    inv.args.extend(
        [
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--include-partial-messages",
        ]
        .map(String::from),
    );
    if bypass {
        inv.args.push("--dangerously-skip-permissions".into());
        if permissions.sandboxed && permissions.root {
            inv.env.push(("IS_SANDBOX".into(), "1".into()));
        }
    } else {
        inv.args
            .extend(["--permission-mode".to_owned(), "acceptEdits".to_owned()]);
        let mut seen = std::collections::BTreeSet::new();
        let commands: Vec<&str> = permissions
            .allowed_commands
            .iter()
            .map(|c| c.trim())
            .filter(|c| !c.is_empty() && seen.insert(*c))
            .collect();
        if !commands.is_empty() {
            inv.args
                .extend(["--settings".to_owned(), allow_settings(&commands)]);
        }
    }
    if let Some(model) = &spec.model {
        inv.args.extend(["--model".to_owned(), model.clone()]);
    }
    inv.args.extend(spec.args.iter().cloned());
    if prompt_fits_argv(input.prompt) {
        inv.args.extend(["--".to_owned(), input.prompt.to_owned()]);
    } else {
        inv.stdin = Some(input.prompt.as_bytes().to_vec());
    }
    inv
}

/// Claude Code settings (JSON, for `--settings`) whose permission rules
/// allow each command exactly and with more arguments: `Bash(<command>)`
/// and `Bash(<command> *)`. As settings, not `--allowedTools`: Claude
/// splits that option's values at spaces and commas outside what it reads
/// as parentheses, so a command holding `$(…)` broke into pieces
/// ("Ignoring --allowedTools rule \"*)\""); in JSON every rule is one
/// string.
fn allow_settings(commands: &[&str]) -> String {
    let allow: Vec<String> = commands
        .iter()
        .flat_map(|c| [format!("Bash({c})"), format!("Bash({c} *)")])
        .collect();
    serde_json::json!({"permissions": {"allow": allow}}).to_string()
}

/// Input tokens of a Claude `usage` object: uncached, cache-creation and
/// cache-read tokens are reported apart and all are prompt tokens.
fn input_tokens(usage: &Value) -> u64 {
    count0(usage, "input_tokens")
        + count0(usage, "cache_creation_input_tokens")
        + count0(usage, "cache_read_input_tokens")
}

/// Tokens of one message: (input incl. cache, output, cache read, cache
/// write).
type Tokens = (u64, u64, u64, u64);

fn tokens_of(usage: &Value) -> Tokens {
    (
        input_tokens(usage),
        count0(usage, "output_tokens"),
        count0(usage, "cache_read_input_tokens"),
        count0(usage, "cache_creation_input_tokens"),
    )
}

/// Keeps the larger of each count: a message's usage only grows as it
/// streams.
fn merge(into: &mut Tokens, t: Tokens) {
    into.0 = into.0.max(t.0);
    into.1 = into.1.max(t.1);
    into.2 = into.2.max(t.2);
    into.3 = into.3.max(t.3);
}

/// Reads the final `result` object; without one (the run was killed), sums
/// the usage of the messages seen so far. Claude Code prints one
/// `assistant` line per content block, repeating the usage of the
/// message's start on each, so messages are counted once by id; the raw
/// stream events (`--include-partial-messages`) add each message's running
/// output count from `message_delta`, so a message cut off by a timeout
/// still counts what it generated. With several `result` lines (only a fake
/// agent prints more than one) the last wins.
pub(super) fn parse_usage(text: &str) -> Usage {
    let mut result: Option<Value> = None;
    let mut messages: BTreeMap<String, Tokens> = BTreeMap::new();
    let mut anonymous: Tokens = (0, 0, 0, 0);
    let mut current: Option<String> = None;
    for line in json_lines(text) {
        match line.get("type").and_then(Value::as_str) {
            Some("result") => result = Some(line),
            Some("assistant") => {
                let Some(usage) = line.pointer("/message/usage") else {
                    continue;
                };
                let t = tokens_of(usage);
                match line.pointer("/message/id").and_then(Value::as_str) {
                    Some(id) => merge(messages.entry(id.to_owned()).or_default(), t),
                    None => {
                        anonymous.0 += t.0;
                        anonymous.1 += t.1;
                        anonymous.2 += t.2;
                        anonymous.3 += t.3;
                    }
                }
            }
            Some("stream_event") => {
                let Some(event) = line.get("event") else {
                    continue;
                };
                match event.get("type").and_then(Value::as_str) {
                    Some("message_start") => {
                        let id = event.pointer("/message/id").and_then(Value::as_str);
                        current = id.map(str::to_owned);
                        if let (Some(id), Some(usage)) = (id, event.pointer("/message/usage")) {
                            merge(messages.entry(id.to_owned()).or_default(), tokens_of(usage));
                        }
                    }
                    Some("message_delta") => {
                        if let (Some(id), Some(usage)) = (&current, event.get("usage")) {
                            let entry = messages.entry(id.clone()).or_default();
                            // A delta may repeat the input counts or leave
                            // them out; output is the running total.
                            merge(entry, tokens_of(usage));
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    let streamed = messages.values().fold(anonymous, |acc, t| {
        (acc.0 + t.0, acc.1 + t.1, acc.2 + t.2, acc.3 + t.3)
    });

    let Some(result) = result else {
        return Usage {
            input_tokens: streamed.0,
            output_tokens: streamed.1,
            cache_read_tokens: streamed.2,
            cache_write_tokens: streamed.3,
            ..Usage::default()
        };
    };
    let t = match result.get("usage").filter(|u| u.is_object()) {
        Some(u) => tokens_of(u),
        None => streamed,
    };
    Usage {
        input_tokens: t.0,
        output_tokens: t.1,
        cache_read_tokens: t.2,
        cache_write_tokens: t.3,
        cost_usd: amount(&result, "total_cost_usd").or_else(|| amount(&result, "cost_usd")),
        turns: count(&result, "num_turns").and_then(|n| u32::try_from(n).ok()),
        is_error: result.get("is_error").and_then(Value::as_bool),
        model: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::{AgentKind, MAX_PROMPT_ARG_BYTES};
    use std::path::Path;

    const STREAM: &str = include_str!("../../fixtures/agent-output/claude.jsonl");

    fn input(prompt: &str) -> PromptInput<'_> {
        PromptInput {
            prompt,
            prompt_file: Path::new("/run/p/prompt.md"),
            workdir: Path::new("/w"),
            task: "add-parser",
            attempt: 1,
        }
    }

    fn sandboxed() -> Permissions {
        Permissions {
            sandboxed: true,
            ..Permissions::default()
        }
    }

    #[test]
    fn argv_in_the_sandbox_bypasses_permissions() {
        let spec = AgentSpec::builtin("claude").expect("built-in");
        let inv = invocation(&spec, &input("Fix the parser."), true, &sandboxed());
        assert_eq!(inv.program, "claude");
        assert_eq!(
            inv.args,
            [
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                "--include-partial-messages",
                "--dangerously-skip-permissions",
                "--",
                "Fix the parser.",
            ]
        );
        assert_eq!(inv.stdin, None);
        assert!(inv.env.is_empty());
        // As root, Claude is told it is sandboxed, which it is.
        let root = Permissions {
            root: true,
            ..sandboxed()
        };
        let inv = invocation(&spec, &input("x"), true, &root);
        assert_eq!(inv.env, [("IS_SANDBOX".to_owned(), "1".to_owned())]);
    }

    #[test]
    fn argv_outside_the_sandbox_accepts_edits_and_allows_the_checks() {
        let spec = AgentSpec::builtin("claude").expect("built-in");
        let perms = Permissions {
            sandboxed: false,
            root: true,
            allowed_commands: vec!["cargo test".into(), " ".into(), "cargo test".into()],
        };
        let inv = crate::agent::invocation_in(&spec, &input("Fix it."), &perms);
        assert_eq!(
            inv.args,
            [
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                "--include-partial-messages",
                "--permission-mode",
                "acceptEdits",
                "--settings",
                r#"{"permissions":{"allow":["Bash(cargo test)","Bash(cargo test *)"]}}"#,
                "--",
                "Fix it.",
            ]
        );
        // Not sandboxed: no IS_SANDBOX, whatever the uid.
        assert!(inv.env.is_empty());
    }

    #[test]
    fn every_allow_rule_is_one_string_whatever_the_command_holds() {
        let v = r#"test "$(cat out.txt)" = 'a, b' && echo Bash"#;
        let settings: Value =
            serde_json::from_str(&allow_settings(&[v])).expect("settings are JSON");
        assert_eq!(
            settings["permissions"]["allow"],
            serde_json::json!([format!("Bash({v})"), format!("Bash({v} *)")])
        );
    }

    #[test]
    fn argv_with_model_args_and_env() {
        let mut spec = AgentSpec::builtin("claude").expect("built-in");
        spec.model = Some("opus".into());
        spec.args = vec!["--max-turns".into(), "30".into()];
        spec.env = vec![("IS_SANDBOX".into(), "1".into())];
        let inv = invocation(&spec, &input("-starts with a dash"), true, &sandboxed());
        assert_eq!(
            inv.args,
            [
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                "--include-partial-messages",
                "--dangerously-skip-permissions",
                "--model",
                "opus",
                "--max-turns",
                "30",
                "--",
                "-starts with a dash",
            ]
        );
        assert_eq!(inv.env, [("IS_SANDBOX".to_owned(), "1".to_owned())]);
    }

    #[test]
    fn long_prompt_goes_to_stdin() {
        let spec = AgentSpec::builtin("claude").expect("built-in");
        let prompt = "y".repeat(MAX_PROMPT_ARG_BYTES + 1);
        let inv = invocation(&spec, &input(&prompt), true, &sandboxed());
        assert_eq!(
            inv.args.last().map(String::as_str),
            Some("--dangerously-skip-permissions")
        );
        assert_eq!(inv.stdin.as_deref(), Some(prompt.as_bytes()));
    }

    #[test]
    fn a_timed_out_run_counts_the_streamed_output_tokens() {
        let text = concat!(
            r#"{"type":"stream_event","event":{"type":"message_start","message":{"id":"m1","usage":{"input_tokens":10,"cache_read_input_tokens":90,"output_tokens":1}}}}"#,
            "\n",
            r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":10,"cache_read_input_tokens":90,"output_tokens":1}}}"#,
            "\n",
            r#"{"type":"stream_event","event":{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":57}}}"#,
            "\n",
            r#"{"type":"stream_event","event":{"type":"message_start","message":{"id":"m2","usage":{"input_tokens":12,"output_tokens":1}}}}"#,
            "\n",
            r#"{"type":"stream_event","event":{"type":"message_delta","usage":{"output_tokens":8}}}"#,
            "\n",
        );
        let usage = parse_usage(text);
        assert_eq!(usage.input_tokens, 100 + 12);
        assert_eq!(usage.cache_read_tokens, 90);
        assert_eq!(usage.output_tokens, 57 + 8);
        assert_eq!(usage.cost_usd, None);
    }

    #[test]
    fn parses_the_result_line() {
        let usage = parse_usage(STREAM);
        assert_eq!(
            usage,
            Usage {
                input_tokens: 16 + 5983 + 46664,
                output_tokens: 316,
                cache_read_tokens: 46664,
                cache_write_tokens: 5983,
                cost_usd: Some(0.0612867),
                turns: Some(5),
                is_error: Some(false),
                model: None,
            }
        );
        assert_eq!(
            crate::agent::parse_usage(AgentKind::Claude, STREAM.as_bytes()).input_tokens,
            usage.input_tokens
        );
    }

    #[test]
    fn without_a_result_sums_assistant_messages_once_each() {
        let cut: String = STREAM
            .lines()
            .filter(|l| !l.contains("\"type\":\"result\""))
            .map(|l| format!("{l}\n"))
            .collect();
        let usage = parse_usage(&cut);
        // The streamed messages add up to what the result line reports,
        // although the first message appears on two lines.
        assert_eq!(usage.input_tokens, 16 + 5983 + 46664);
        assert_eq!(usage.output_tokens, 316);
        assert_eq!(usage.cost_usd, None);
        assert_eq!(usage.turns, None);
        assert_eq!(usage.is_error, None);
    }

    #[test]
    fn older_cost_field_and_error_results() {
        let text = r#"{"type":"result","subtype":"error_max_turns","is_error":true,"cost_usd":0.25,"num_turns":30,"usage":{"input_tokens":100,"output_tokens":7}}"#;
        let usage = parse_usage(text);
        assert_eq!(usage.cost_usd, Some(0.25));
        assert_eq!(usage.is_error, Some(true));
        assert_eq!(usage.turns, Some(30));
        assert_eq!((usage.input_tokens, usage.output_tokens), (100, 7));
    }

    #[test]
    fn malformed_output_is_skipped() {
        assert_eq!(parse_usage(""), Usage::default());
        assert_eq!(
            parse_usage("not json\n{\"type\":\"result\""),
            Usage::default()
        );
        let text = "{\"type\":\"result\",\"total_cost_usd\":\"lots\",\"usage\":{\"input_tokens\":-3,\"output_tokens\":2}}\ngarbage\n";
        let usage = parse_usage(text);
        assert_eq!(usage.cost_usd, None);
        assert_eq!((usage.input_tokens, usage.output_tokens), (0, 2));
    }

    #[test]
    fn the_fake_agents_cost_line_parses_as_claude() {
        let text = "working\n{\"type\":\"result\",\"total_cost_usd\":0.5,\"usage\":{\"input_tokens\":10,\"output_tokens\":5}}\n";
        let usage = crate::agent::parse_usage(AgentKind::Fake, text.as_bytes());
        assert_eq!(usage.cost_usd, Some(0.5));
        assert_eq!((usage.input_tokens, usage.output_tokens), (10, 5));
    }
}
