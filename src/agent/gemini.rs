//! Google Gemini CLI (`gemini`): its headless command line and its JSON
//! output.
//!
//! Flags, from the CLI reference (`docs/cli/cli-reference.md` in
//! google-gemini/gemini-cli) and the headless-mode reference
//! (<https://geminicli.com/docs/cli/headless/>):
//!
//! - `--approval-mode yolo`: "auto-approve all tools", file edits and shell
//!   commands alike. Passed only inside git-orch's sandbox, or with
//!   `bypassPermissions = true`. Otherwise `--approval-mode auto_edit`
//!   ("auto-approve edit tools") with `--allowed-tools=run_shell_command(
//!   <command>)`, once per command (the option takes one value per
//!   occurrence), for the subtask's verification and the gate commands
//!   (the flag is marked deprecated in favour of policy files, but still
//!   works in 0.61).
//! - `--output-format stream-json`: one JSON event per line as the agent
//!   works, ending with a `result` event carrying `stats` (token counts);
//!   streaming rather than `json` means the runner sees retries and errors
//!   as they happen.
//! - `GEMINI_CLI_TRUST_WORKSPACE=true` in the environment: Gemini CLI
//!   0.61 refuses to run headless in a folder the user has not trusted
//!   ("Gemini CLI is not running in a trusted directory", exit 55), and
//!   every attempt worktree is a new folder. The variable trusts it for
//!   this run only and, unlike `--skip-trust`, older releases ignore it
//!   rather than rejecting an unknown flag.
//! - `--model M` (`-m`).
//! - `--prompt=<prompt>` (`-p`): "forces non-interactive mode". Written with
//!   `=` because yargs will not take a separate value that starts with `-`
//!   as the option's value. A prompt too long for one argument is written
//!   to stdin with no `--prompt`: "when stdin is not a TTY, the CLI reads
//!   its content" and runs headless.
//!
//! Gemini CLI reports no cost.

use serde_json::Value;

use super::command_line::{
    Invocation, Permissions, PromptInput, base_invocation, prompt_fits_argv,
};
use super::spec::AgentSpec;
use super::usage::{Usage, count, count0, json_lines};

pub(super) fn invocation(
    spec: &AgentSpec,
    input: &PromptInput,
    bypass: bool,
    permissions: &Permissions,
) -> Invocation {
    let mut inv = base_invocation(spec);
    inv.env
        .push(("GEMINI_CLI_TRUST_WORKSPACE".into(), "true".into()));
    inv.args.push("--approval-mode".into());
    if bypass {
        inv.args.push("yolo".into());
    } else {
        inv.args.push("auto_edit".into());
        // One `--allowed-tools=…` per command: the option takes one value
        // per occurrence, and a second bare value would be read as a
        // positional prompt.
        let mut seen = std::collections::BTreeSet::new();
        for c in &permissions.allowed_commands {
            let c = c.trim();
            if !c.is_empty() && seen.insert(c) {
                inv.args
                    .push(format!("--allowed-tools=run_shell_command({c})"));
            }
        }
    }
    inv.args
        .extend(["--output-format".to_owned(), "stream-json".to_owned()]);
    if let Some(model) = &spec.model {
        inv.args.extend(["--model".to_owned(), model.clone()]);
    }
    inv.args.extend(spec.args.iter().cloned());
    if prompt_fits_argv(input.prompt) {
        inv.args.push(format!("--prompt={}", input.prompt));
    } else {
        inv.stdin = Some(input.prompt.as_bytes().to_vec());
    }
    inv
}

/// The JSON documents in `text`: the whole output when it is one
/// (pretty-printed, as `--output-format json` prints it), else every JSON
/// line (`stream-json`), else the object that opens on the last line
/// starting with `{` (JSON printed among other text).
fn documents(text: &str) -> Vec<Value> {
    if let Ok(v) = serde_json::from_str::<Value>(text.trim()) {
        return v.is_object().then_some(v).into_iter().collect();
    }
    let lines: Vec<Value> = json_lines(text).collect();
    if !lines.is_empty() {
        return lines;
    }
    let start = text
        .starts_with('{')
        .then_some(0)
        .into_iter()
        .chain(text.match_indices("\n{").map(|(i, _)| i + 1))
        .last();
    start
        .and_then(|start| {
            // Only the first value: whatever follows the object is not ours.
            serde_json::Deserializer::from_str(&text[start..])
                .into_iter::<Value>()
                .next()?
                .ok()
        })
        .filter(Value::is_object)
        .into_iter()
        .collect()
}

/// Reads `stats` from `--output-format json` (per model: `tokens.prompt`,
/// which includes cached tokens, plus `tokens.tool`, in; `tokens.candidates`
/// plus `tokens.thoughts` out, which add up to `tokens.total`) or from the
/// `result` event of `--output-format stream-json` (`stats.input_tokens`,
/// `stats.output_tokens`).
pub(super) fn parse_usage(text: &str) -> Usage {
    let mut usage = Usage::default();
    for doc in documents(text) {
        let is_result_event = doc.get("type").and_then(Value::as_str) == Some("result");
        let Some(stats) = doc.get("stats").filter(|s| s.is_object()) else {
            if doc.get("error").is_some_and(|e| !e.is_null()) {
                usage.is_error = Some(true);
            }
            continue;
        };
        if let Some(models) = stats.get("models").and_then(Value::as_object) {
            let (mut input, mut output, mut cached, mut requests) = (0, 0, 0, 0u64);
            // The model that did most of the work names the run's model.
            let mut most = 0;
            for (name, model) in models {
                // `--output-format json`: per model `tokens.prompt`, …;
                // `stream-json` (0.61): per model `input_tokens`,
                // `output_tokens`, `cached` directly.
                let (i, o, c) = match model.get("tokens") {
                    Some(tokens) => (
                        count0(tokens, "prompt") + count0(tokens, "tool"),
                        count0(tokens, "candidates") + count0(tokens, "thoughts"),
                        count0(tokens, "cached"),
                    ),
                    None if model.get("input_tokens").is_some() => (
                        count0(model, "input_tokens"),
                        count0(model, "output_tokens"),
                        count0(model, "cached"),
                    ),
                    None => continue,
                };
                if usage.model.is_none() || i > most {
                    most = i;
                    usage.model = Some(name.clone());
                }
                input += i;
                output += o;
                cached += c;
                requests += model
                    .get("api")
                    .map(|api| count0(api, "totalRequests"))
                    .unwrap_or(0);
            }
            usage.input_tokens = input;
            usage.output_tokens = output;
            usage.cache_read_tokens = cached;
            usage.turns = (requests > 0)
                .then(|| u32::try_from(requests).ok())
                .flatten();
        } else if count(stats, "input_tokens").is_some() || count(stats, "output_tokens").is_some()
        {
            usage.input_tokens = count0(stats, "input_tokens");
            usage.output_tokens = count0(stats, "output_tokens");
            usage.cache_read_tokens = count0(stats, "cached");
        }
        let failed = doc.get("error").is_some_and(|e| !e.is_null())
            || (is_result_event
                && doc
                    .get("status")
                    .and_then(Value::as_str)
                    .is_some_and(|s| s != "success"));
        usage.is_error = Some(failed || usage.is_error == Some(true));
    }
    usage
}

/// Reads the chat file Gemini CLI keeps per session
/// (`~/.gemini/tmp/<project>/chats/session-*.jsonl`): each model message
/// carries its `tokens`, and a message is written again as it grows, so
/// each counts once, by id, with its last figures. What a Gemini CLI killed
/// at its timeout leaves, when its output stream has no totals yet.
pub fn parse_session(text: &str) -> Usage {
    let mut messages: std::collections::BTreeMap<String, (u64, u64, u64, Option<String>)> =
        std::collections::BTreeMap::new();
    for line in json_lines(text) {
        if line.get("type").and_then(Value::as_str) != Some("gemini") {
            continue;
        }
        let (Some(id), Some(tokens)) = (line.get("id").and_then(Value::as_str), line.get("tokens"))
        else {
            continue;
        };
        messages.insert(
            id.to_owned(),
            (
                count0(tokens, "input") + count0(tokens, "tool"),
                count0(tokens, "output") + count0(tokens, "thoughts"),
                count0(tokens, "cached"),
                line.get("model").and_then(Value::as_str).map(str::to_owned),
            ),
        );
    }
    let mut usage = Usage::default();
    for (i, o, c, m) in messages.into_values() {
        usage.input_tokens += i;
        usage.output_tokens += o;
        usage.cache_read_tokens += c;
        if m.is_some() {
            usage.model = m;
        }
    }
    usage
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::{AgentKind, MAX_PROMPT_ARG_BYTES};
    use std::path::Path;

    const JSON: &str = include_str!("../../fixtures/agent-output/gemini.json");

    fn input(prompt: &str) -> PromptInput<'_> {
        PromptInput {
            prompt,
            prompt_file: Path::new("/run/p/prompt.md"),
            workdir: Path::new("/w"),
            task: "add-parser",
            attempt: 1,
        }
    }

    fn run(spec: &AgentSpec, prompt: &str, bypass: bool) -> Invocation {
        invocation(spec, &input(prompt), bypass, &Permissions::default())
    }

    #[test]
    fn argv_without_model_or_args() {
        let spec = AgentSpec::builtin("gemini").expect("built-in");
        let inv = run(&spec, "Implement the parser.\nThen test it.", true);
        assert_eq!(inv.program, "gemini");
        assert_eq!(
            inv.args,
            [
                "--approval-mode",
                "yolo",
                "--output-format",
                "stream-json",
                "--prompt=Implement the parser.\nThen test it.",
            ]
        );
        assert_eq!(inv.stdin, None);
        assert_eq!(
            inv.env,
            [("GEMINI_CLI_TRUST_WORKSPACE".to_owned(), "true".to_owned())]
        );
    }

    #[test]
    fn argv_outside_the_sandbox_auto_edits_and_allows_the_checks() {
        let spec = AgentSpec::builtin("gemini").expect("built-in");
        let perms = Permissions {
            allowed_commands: vec!["npm test".into(), "npm test".into(), "make -k".into()],
            ..Permissions::default()
        };
        let inv = crate::agent::invocation_in(&spec, &input("x"), &perms);
        assert_eq!(
            inv.args,
            [
                "--approval-mode",
                "auto_edit",
                "--allowed-tools=run_shell_command(npm test)",
                "--allowed-tools=run_shell_command(make -k)",
                "--output-format",
                "stream-json",
                "--prompt=x",
            ]
        );
    }

    #[test]
    fn argv_with_model_and_args() {
        let mut spec = AgentSpec::builtin("gemini").expect("built-in");
        spec.model = Some("gemini-2.5-flash".into());
        spec.args = vec!["--sandbox".into()];
        let inv = run(&spec, "-x", true);
        assert_eq!(
            inv.args,
            [
                "--approval-mode",
                "yolo",
                "--output-format",
                "stream-json",
                "--model",
                "gemini-2.5-flash",
                "--sandbox",
                "--prompt=-x",
            ]
        );
    }

    #[test]
    fn long_prompt_goes_to_stdin() {
        let spec = AgentSpec::builtin("gemini").expect("built-in");
        let prompt = "g".repeat(MAX_PROMPT_ARG_BYTES + 1);
        let inv = run(&spec, &prompt, true);
        assert!(inv.args.iter().all(|a| !a.starts_with("--prompt")));
        assert_eq!(inv.stdin.as_deref(), Some(prompt.as_bytes()));
    }

    #[test]
    fn parses_stats_of_every_model() {
        let usage = parse_usage(JSON);
        assert_eq!(
            usage,
            Usage {
                input_tokens: 24939 + 1207,
                output_tokens: 420 + 154 + 35,
                cache_read_tokens: 21263,
                cost_usd: None,
                turns: Some(5),
                is_error: Some(false),
                model: usage.model.clone(),
                ..Usage::default()
            }
        );
        assert!(usage.model.is_some());
        assert_eq!(
            crate::agent::parse_usage(AgentKind::Gemini, JSON.as_bytes()),
            usage
        );
    }

    #[test]
    fn json_among_other_text_is_found() {
        let text = format!("Loaded cached credentials.\n{JSON}\nbye\n");
        assert_eq!(parse_usage(&text).input_tokens, 24939 + 1207);
    }

    #[test]
    fn stream_json_result_event() {
        let text = concat!(
            "{\"type\":\"init\",\"timestamp\":\"2025-10-10T12:00:00.000Z\",\"session_id\":\"s\",\"model\":\"gemini-2.5-pro\"}\n",
            "{\"type\":\"message\",\"role\":\"assistant\",\"content\":\"Done.\",\"delta\":true}\n",
            "{\"type\":\"result\",\"timestamp\":\"2025-10-10T12:00:09.000Z\",\"status\":\"success\",\"stats\":{\"total_tokens\":900,\"input_tokens\":800,\"output_tokens\":100,\"duration_ms\":9000,\"tool_calls\":2}}\n",
        );
        let usage = parse_usage(text);
        assert_eq!((usage.input_tokens, usage.output_tokens), (800, 100));
        assert_eq!(usage.is_error, Some(false));
    }

    #[test]
    fn stream_json_result_with_models_of_gemini_cli_0_61() {
        let text = r#"{"type":"result","timestamp":"2026-11-23T15:23:30.487Z","status":"success","stats":{"total_tokens":2480,"input_tokens":2400,"output_tokens":80,"cached":600,"input":1800,"duration_ms":185,"tool_calls":1,"models":{"gemini-2.5-flash":{"total_tokens":2480,"input_tokens":2400,"output_tokens":80,"cached":600,"input":1800}}}}"#;
        let usage = parse_usage(text);
        assert_eq!((usage.input_tokens, usage.output_tokens), (2400, 80));
        assert_eq!(usage.cache_read_tokens, 600);
        assert_eq!(usage.model.as_deref(), Some("gemini-2.5-flash"));
        assert_eq!(usage.is_error, Some(false));
    }

    #[test]
    fn reads_the_session_chat_file_once_per_message() {
        let text = concat!(
            r#"{"sessionId":"s","projectHash":"h"}"#,
            "\n",
            r#"{"id":"u1","type":"user","content":[{"text":"task"}]}"#,
            "\n",
            r#"{"id":"m1","type":"gemini","content":"","tokens":{"input":1200,"output":40,"cached":300,"thoughts":0,"tool":0,"total":1240},"model":"gemini-2.5-flash"}"#,
            "\n",
            r#"{"id":"m1","type":"gemini","content":"","tokens":{"input":1200,"output":40,"cached":300,"thoughts":0,"tool":0,"total":1240},"model":"gemini-2.5-flash","toolCalls":[]}"#,
            "\n",
        );
        let usage = parse_session(text);
        assert_eq!((usage.input_tokens, usage.output_tokens), (1200, 40));
        assert_eq!(usage.cache_read_tokens, 300);
        assert_eq!(usage.model.as_deref(), Some("gemini-2.5-flash"));
    }

    #[test]
    fn error_object_marks_the_run_failed() {
        let text = r#"{"session_id":"s","error":{"type":"Error","message":"[API Error: You have exhausted your capacity on this model. Your quota will reset after 2h.]","code":429}}"#;
        let usage = parse_usage(text);
        assert_eq!(usage.is_error, Some(true));
        assert_eq!((usage.input_tokens, usage.output_tokens), (0, 0));
    }

    #[test]
    fn malformed_output_is_skipped() {
        assert_eq!(parse_usage(""), Usage::default());
        assert_eq!(
            parse_usage("{\n  \"response\": \"cut off"),
            Usage::default()
        );
        assert_eq!(parse_usage("[1, 2]"), Usage::default());
        let text = r#"{"response":"x","stats":{"models":{"m":{"tokens":{"prompt":"many","candidates":3}}}}}"#;
        let usage = parse_usage(text);
        assert_eq!((usage.input_tokens, usage.output_tokens), (0, 3));
    }
}
