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
//! - `--dangerously-skip-permissions`: the same as `--permission-mode
//!   bypassPermissions`, "everything runs without asking". The milder
//!   `acceptEdits` approves file edits and a few filesystem commands (mkdir,
//!   touch, mv, cp) but nothing else, and in print mode a tool call that
//!   would ask is denied, so the agent could not run the build or the tests
//!   it is told to check its work with. The attempt runs in a throwaway
//!   worktree whose result is gated before it merges, which is the isolated
//!   setting the docs ask for. Claude Code refuses this flag when run as
//!   root unless `IS_SANDBOX=1` (anthropics/claude-code#9184); in a root
//!   container, add `env = IS_SANDBOX=1` to the agent's section.
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

use super::usage::{Usage, amount, count, count0, json_lines};
use super::{AgentSpec, Invocation, PromptInput, base_invocation, prompt_fits_argv};

pub(super) fn invocation(spec: &AgentSpec, input: &PromptInput) -> Invocation {
    let mut inv = base_invocation(spec);
    inv.args.extend(
        [
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--dangerously-skip-permissions",
        ]
        .map(String::from),
    );
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

/// Input tokens of a Claude `usage` object: uncached, cache-creation and
/// cache-read tokens are reported apart and all are prompt tokens.
fn input_tokens(usage: &Value) -> u64 {
    count0(usage, "input_tokens")
        + count0(usage, "cache_creation_input_tokens")
        + count0(usage, "cache_read_input_tokens")
}

/// Reads the final `result` object; without one (the run was killed), sums
/// the usage of the assistant messages seen so far. Claude Code prints one
/// line per content block, repeating the message's usage on each, so
/// messages are counted once by id. With several `result` lines (only a
/// fake agent prints more than one) the last wins.
pub(super) fn parse_usage(text: &str) -> Usage {
    let mut result: Option<Value> = None;
    let mut messages: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut anonymous = (0u64, 0u64);
    for line in json_lines(text) {
        match line.get("type").and_then(Value::as_str) {
            Some("result") => result = Some(line),
            Some("assistant") => {
                let Some(usage) = line.pointer("/message/usage") else {
                    continue;
                };
                let tokens = (input_tokens(usage), count0(usage, "output_tokens"));
                match line.pointer("/message/id").and_then(Value::as_str) {
                    Some(id) => {
                        messages.insert(id.to_owned(), tokens);
                    }
                    None => {
                        anonymous.0 += tokens.0;
                        anonymous.1 += tokens.1;
                    }
                }
            }
            _ => {}
        }
    }
    let streamed = messages
        .values()
        .fold(anonymous, |acc, t| (acc.0 + t.0, acc.1 + t.1));

    let Some(result) = result else {
        return Usage {
            input_tokens: streamed.0,
            output_tokens: streamed.1,
            ..Usage::default()
        };
    };
    let (input, output) = match result.get("usage").filter(|u| u.is_object()) {
        Some(u) => (input_tokens(u), count0(u, "output_tokens")),
        None => streamed,
    };
    Usage {
        input_tokens: input,
        output_tokens: output,
        cost_usd: amount(&result, "total_cost_usd").or_else(|| amount(&result, "cost_usd")),
        turns: count(&result, "num_turns").and_then(|n| u32::try_from(n).ok()),
        is_error: result.get("is_error").and_then(Value::as_bool),
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

    #[test]
    fn argv_without_model_or_args() {
        let spec = AgentSpec::builtin("claude").expect("built-in");
        let inv = invocation(&spec, &input("Fix the parser."));
        assert_eq!(inv.program, "claude");
        assert_eq!(
            inv.args,
            [
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                "--dangerously-skip-permissions",
                "--",
                "Fix the parser.",
            ]
        );
        assert_eq!(inv.stdin, None);
        assert!(inv.env.is_empty());
    }

    #[test]
    fn argv_with_model_args_and_env() {
        let mut spec = AgentSpec::builtin("claude").expect("built-in");
        spec.model = Some("opus".into());
        spec.args = vec!["--allowedTools".into(), "Read".into(), "Edit".into()];
        spec.env = vec![("IS_SANDBOX".into(), "1".into())];
        let inv = invocation(&spec, &input("-starts with a dash"));
        assert_eq!(
            inv.args,
            [
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                "--dangerously-skip-permissions",
                "--model",
                "opus",
                "--allowedTools",
                "Read",
                "Edit",
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
        let inv = invocation(&spec, &input(&prompt));
        assert_eq!(
            inv.args.last().map(String::as_str),
            Some("--dangerously-skip-permissions")
        );
        assert_eq!(inv.stdin.as_deref(), Some(prompt.as_bytes()));
    }

    #[test]
    fn parses_the_result_line() {
        let usage = parse_usage(STREAM);
        assert_eq!(
            usage,
            Usage {
                input_tokens: 16 + 5983 + 46664,
                output_tokens: 316,
                cost_usd: Some(0.0612867),
                turns: Some(5),
                is_error: Some(false),
            }
        );
        assert_eq!(
            crate::agent::parse_usage(AgentKind::Claude, STREAM.as_bytes()),
            usage
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
