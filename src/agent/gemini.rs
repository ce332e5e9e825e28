//! Google Gemini CLI (`gemini`): its headless command line and its JSON
//! output.
//!
//! Flags, from the CLI reference (`docs/cli/cli-reference.md` in
//! google-gemini/gemini-cli) and the headless-mode reference
//! (<https://geminicli.com/docs/cli/headless/>):
//!
//! - `--approval-mode yolo`: "approval mode for tool execution"; `yolo`
//!   approves every tool call, file edits and shell commands alike, which an
//!   unattended run needs. The older `--yolo` / `-y` is documented as
//!   deprecated in favour of this.
//! - `--output-format json`: "a single JSON object when the response is
//!   complete" with `response`, `stats` (token counts per model) and, on
//!   failure, `error`.
//! - `--model M` (`-m`).
//! - `--prompt=<prompt>` (`-p`): "forces non-interactive mode". Written with
//!   `=` because yargs will not take a separate value that starts with `-`
//!   as the option's value. A prompt too long for one argument is written
//!   to stdin with no `--prompt`: "when stdin is not a TTY, the CLI reads
//!   its content" and runs headless.
//!
//! Gemini CLI reports no cost.

use serde_json::Value;

use super::usage::{Usage, count, count0, json_lines};
use super::{AgentSpec, Invocation, PromptInput, base_invocation, prompt_fits_argv};

pub(super) fn invocation(spec: &AgentSpec, input: &PromptInput) -> Invocation {
    let mut inv = base_invocation(spec);
    inv.args
        .extend(["--approval-mode", "yolo", "--output-format", "json"].map(String::from));
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
            let (mut input, mut output, mut requests) = (0, 0, 0u64);
            for model in models.values() {
                let Some(tokens) = model.get("tokens") else {
                    continue;
                };
                input += count0(tokens, "prompt") + count0(tokens, "tool");
                output += count0(tokens, "candidates") + count0(tokens, "thoughts");
                requests += model
                    .get("api")
                    .map(|api| count0(api, "totalRequests"))
                    .unwrap_or(0);
            }
            usage.input_tokens = input;
            usage.output_tokens = output;
            usage.turns = (requests > 0)
                .then(|| u32::try_from(requests).ok())
                .flatten();
        } else if count(stats, "input_tokens").is_some() || count(stats, "output_tokens").is_some()
        {
            usage.input_tokens = count0(stats, "input_tokens");
            usage.output_tokens = count0(stats, "output_tokens");
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

    #[test]
    fn argv_without_model_or_args() {
        let spec = AgentSpec::builtin("gemini").expect("built-in");
        let inv = invocation(&spec, &input("Implement the parser.\nThen test it."));
        assert_eq!(inv.program, "gemini");
        assert_eq!(
            inv.args,
            [
                "--approval-mode",
                "yolo",
                "--output-format",
                "json",
                "--prompt=Implement the parser.\nThen test it.",
            ]
        );
        assert_eq!(inv.stdin, None);
    }

    #[test]
    fn argv_with_model_and_args() {
        let mut spec = AgentSpec::builtin("gemini").expect("built-in");
        spec.model = Some("gemini-2.5-flash".into());
        spec.args = vec!["--sandbox".into()];
        let inv = invocation(&spec, &input("-x"));
        assert_eq!(
            inv.args,
            [
                "--approval-mode",
                "yolo",
                "--output-format",
                "json",
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
        let inv = invocation(&spec, &input(&prompt));
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
                cost_usd: None,
                turns: Some(5),
                is_error: Some(false),
            }
        );
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
