//! OpenAI Codex CLI (`codex exec`): its non-interactive command line and its
//! `--json` event stream.
//!
//! Flags, from the non-interactive mode guide
//! (<https://developers.openai.com/codex/noninteractive>, also
//! `docs/exec.md` in openai/codex) and the `codex exec` reference:
//!
//! - `exec`: runs one task without the TUI and exits. "In non-interactive
//!   mode, Codex does not ask for command or edit approvals", so no approval
//!   flag is needed.
//! - `--json`: "streams events to stdout as JSON Lines"; `turn.completed`
//!   "includes token usage".
//! - `--sandbox workspace-write`: `exec` runs read-only by default; the docs'
//!   way to "allow edits" is this flag, Codex's own least-privilege mode
//!   (writes in the workspace only, no network for the commands it runs).
//!   The older `--full-auto` meant the same sandbox and newer releases warn
//!   that it is deprecated. A task that needs the network can add `args =
//!   -c` and `args = sandbox_workspace_write.network_access=true`.
//! - `--dangerously-bypass-approvals-and-sandbox` instead, inside
//!   git-orch's sandbox (or with `bypassPermissions = true`): "intended
//!   solely for running in environments that are externally sandboxed",
//!   which the attempt then is, and Codex's own sandbox cannot nest inside
//!   it.
//! - `--skip-git-repo-check`: Codex refuses to start outside a git repository
//!   or a directory the user has trusted. An attempt worktree is a git
//!   repository, but how Codex recognises linked worktrees and trust has
//!   changed between releases (openai/codex#13804), and the check only
//!   guards against editing unversioned files, which the worktree already
//!   does; skipping it removes a failure that has nothing to do with the task.
//! - `--model M` (`-m`).
//! - `--`, then the prompt as the final argument, so a prompt starting with
//!   `-` is not read as a flag. A prompt too long for one argument is passed
//!   as `-`, which the reference documents as "read the instructions from
//!   stdin".
//!
//! Codex reports no cost.

use serde_json::Value;

use super::command_line::{Invocation, PromptInput, base_invocation, prompt_fits_argv};
use super::spec::AgentSpec;
use super::usage::{Usage, count, count0, json_lines};

pub(super) fn invocation(spec: &AgentSpec, input: &PromptInput, bypass: bool) -> Invocation {
    let mut inv = base_invocation(spec);
    inv.args.extend(["exec", "--json"].map(String::from));
    if bypass {
        inv.args
            .push("--dangerously-bypass-approvals-and-sandbox".to_owned());
    } else {
        inv.args
            .extend(["--sandbox".to_owned(), "workspace-write".to_owned()]);
    }
    inv.args.push("--skip-git-repo-check".to_owned());
    if let Some(model) = &spec.model {
        inv.args.extend(["--model".to_owned(), model.clone()]);
    }
    inv.args.extend(spec.args.iter().cloned());
    if prompt_fits_argv(input.prompt) {
        inv.args.extend(["--".to_owned(), input.prompt.to_owned()]);
    } else {
        inv.args.push("-".to_owned());
        inv.stdin = Some(input.prompt.as_bytes().to_vec());
    }
    inv
}

/// Input, output and cached input tokens of a Codex usage object.
/// `cached_input_tokens` is the cached part of `input_tokens` (OpenAI
/// counts it inside), and reasoning tokens are inside `output_tokens`, so
/// neither is added.
fn tokens(usage: &Value) -> (u64, u64, u64) {
    (
        count0(usage, "input_tokens"),
        count0(usage, "output_tokens"),
        count0(usage, "cached_input_tokens"),
    )
}

/// Reads the stream of `codex exec --json`.
///
/// Current releases print `turn.completed` (or `turn.failed`) with a
/// `usage` that is cumulative since the thread started, so the last one is
/// the total. Releases before 0.44 printed `{"id":..,"msg":{..}}` events
/// instead, whose `token_count` carries either `info.total_token_usage`
/// (cumulative; the last wins) or, in the oldest, one response's counts at
/// the top level (summed).
pub(super) fn parse_usage(text: &str) -> Usage {
    let mut turn_total: Option<(u64, u64, u64)> = None;
    let mut legacy_total: Option<(u64, u64, u64)> = None;
    let mut legacy_sum: Option<(u64, u64, u64)> = None;
    let mut turns = 0u32;
    let mut failed = false;
    let mut completed = false;
    for line in json_lines(text) {
        // `exec --json` prints events bare; releases before 0.44 wrapped
        // them in `msg`; the session files (`~/.codex/sessions/…/
        // rollout-*.jsonl`) in `payload`.
        let event = line
            .get("msg")
            .or_else(|| line.get("payload"))
            .filter(|m| m.is_object())
            .unwrap_or(&line);
        match event.get("type").and_then(Value::as_str) {
            Some(kind @ ("turn.completed" | "turn.failed")) => {
                turns += 1;
                if kind == "turn.failed" {
                    failed = true;
                } else {
                    completed = true;
                }
                if let Some(usage) = event.get("usage").filter(|u| u.is_object()) {
                    turn_total = Some(tokens(usage));
                }
            }
            Some("error" | "stream_error") => failed = true,
            Some("task_complete") => completed = true,
            Some("token_count") => {
                if let Some(total) = event.pointer("/info/total_token_usage") {
                    legacy_total = Some(tokens(total));
                } else if count(event, "input_tokens").is_some()
                    || count(event, "output_tokens").is_some()
                {
                    let (i, o, c) = tokens(event);
                    let sum = legacy_sum.get_or_insert((0, 0, 0));
                    sum.0 += i;
                    sum.1 += o;
                    sum.2 += c;
                }
            }
            _ => {}
        }
    }
    let (input_tokens, output_tokens, cache_read_tokens) = turn_total
        .or(legacy_total)
        .or(legacy_sum)
        .unwrap_or((0, 0, 0));
    Usage {
        input_tokens,
        output_tokens,
        cache_read_tokens,
        cache_write_tokens: 0,
        model: None,
        cost_usd: None,
        turns: (turns > 0).then_some(turns),
        is_error: if failed {
            Some(true)
        } else {
            completed.then_some(false)
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::{AgentKind, MAX_PROMPT_ARG_BYTES};
    use std::path::Path;

    const STREAM: &str = include_str!("../../fixtures/agent-output/codex.jsonl");
    const LEGACY: &str = include_str!("../../fixtures/agent-output/codex-legacy.jsonl");

    fn input(prompt: &str) -> PromptInput<'_> {
        PromptInput {
            prompt,
            prompt_file: Path::new("/run/p/prompt.md"),
            workdir: Path::new("/w"),
            task: "add-parser",
            attempt: 2,
        }
    }

    #[test]
    fn argv_without_model_or_args() {
        let spec = AgentSpec::builtin("codex").expect("built-in");
        let inv = invocation(&spec, &input("Implement the parser."), false);
        assert_eq!(inv.program, "codex");
        assert_eq!(
            inv.args,
            [
                "exec",
                "--json",
                "--sandbox",
                "workspace-write",
                "--skip-git-repo-check",
                "--",
                "Implement the parser.",
            ]
        );
        assert_eq!(inv.stdin, None);
    }

    #[test]
    fn argv_with_model_and_args() {
        let mut spec = AgentSpec::builtin("codex").expect("built-in");
        spec.model = Some("gpt-5-codex".into());
        spec.args = vec![
            "-c".into(),
            "sandbox_workspace_write.network_access=true".into(),
        ];
        let inv = invocation(&spec, &input("--not a flag"), false);
        assert_eq!(
            inv.args,
            [
                "exec",
                "--json",
                "--sandbox",
                "workspace-write",
                "--skip-git-repo-check",
                "--model",
                "gpt-5-codex",
                "-c",
                "sandbox_workspace_write.network_access=true",
                "--",
                "--not a flag",
            ]
        );
    }

    #[test]
    fn argv_in_the_sandbox_bypasses_codex_own_sandbox() {
        let spec = AgentSpec::builtin("codex").expect("built-in");
        let inv = invocation(&spec, &input("x"), true);
        assert_eq!(
            inv.args,
            [
                "exec",
                "--json",
                "--dangerously-bypass-approvals-and-sandbox",
                "--skip-git-repo-check",
                "--",
                "x",
            ]
        );
    }

    #[test]
    fn long_prompt_is_read_from_stdin() {
        let spec = AgentSpec::builtin("codex").expect("built-in");
        let prompt = "z".repeat(MAX_PROMPT_ARG_BYTES + 1);
        let inv = invocation(&spec, &input(&prompt), false);
        assert_eq!(inv.args.last().map(String::as_str), Some("-"));
        assert!(!inv.args.contains(&"--".to_owned()));
        assert_eq!(inv.stdin.as_deref(), Some(prompt.as_bytes()));
    }

    #[test]
    fn parses_turn_completed_usage() {
        let usage = parse_usage(STREAM);
        assert_eq!(
            usage,
            Usage {
                input_tokens: 24763,
                output_tokens: 1122,
                cache_read_tokens: 24448,
                cost_usd: None,
                turns: Some(1),
                is_error: Some(false),
                ..Usage::default()
            }
        );
        assert_eq!(
            crate::agent::parse_usage(AgentKind::Codex, STREAM.as_bytes()),
            usage
        );
    }

    #[test]
    fn turn_usage_is_cumulative_so_the_last_wins() {
        let text = concat!(
            "{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":100,\"cached_input_tokens\":0,\"output_tokens\":10}}\n",
            "{\"type\":\"turn.failed\",\"usage\":{\"input_tokens\":250,\"cached_input_tokens\":90,\"output_tokens\":30},\"error\":{\"message\":\"stream disconnected\"}}\n",
        );
        let usage = parse_usage(text);
        assert_eq!((usage.input_tokens, usage.output_tokens), (250, 30));
        assert_eq!(usage.turns, Some(2));
        assert_eq!(usage.is_error, Some(true));
    }

    #[test]
    fn parses_legacy_token_count_events() {
        let usage = parse_usage(LEGACY);
        assert_eq!((usage.input_tokens, usage.output_tokens), (24763, 1122));
        assert_eq!(usage.cost_usd, None);
        assert_eq!(usage.is_error, Some(false));

        let flat = concat!(
            "{\"id\":\"0\",\"msg\":{\"type\":\"token_count\",\"input_tokens\":1000,\"cached_input_tokens\":0,\"output_tokens\":50,\"total_tokens\":1050}}\n",
            "{\"id\":\"0\",\"msg\":{\"type\":\"token_count\",\"input_tokens\":1200,\"cached_input_tokens\":900,\"output_tokens\":70,\"total_tokens\":1270}}\n",
        );
        let usage = parse_usage(flat);
        assert_eq!((usage.input_tokens, usage.output_tokens), (2200, 120));
    }

    #[test]
    fn reads_the_session_files_token_counts() {
        // What a Codex killed mid-turn leaves in its session file.
        let text = concat!(
            r#"{"timestamp":"t","type":"session_meta","payload":{"cwd":"/w"}}"#,
            "\n",
            r#"{"timestamp":"t","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":1200,"cached_input_tokens":300,"output_tokens":40,"total_tokens":1240}}}}"#,
            "\n",
        );
        let usage = parse_usage(text);
        assert_eq!((usage.input_tokens, usage.output_tokens), (1200, 40));
        assert_eq!(usage.cache_read_tokens, 300);
    }

    #[test]
    fn error_events_mark_the_run_failed() {
        let text = "{\"type\":\"thread.started\",\"thread_id\":\"t\"}\n{\"type\":\"error\",\"message\":\"You've hit your usage limit. Try again in 4 days 20 hours 9 minutes.\"}\n";
        let usage = parse_usage(text);
        assert_eq!(usage.is_error, Some(true));
        assert_eq!((usage.input_tokens, usage.output_tokens), (0, 0));
    }

    #[test]
    fn malformed_output_is_skipped() {
        assert_eq!(parse_usage(""), Usage::default());
        let text = "Reading prompt from stdin...\n{\"type\":\"turn.completed\",\"usage\":\"n/a\"}\n{\"type\":\"turn.completed\",\n";
        let usage = parse_usage(text);
        assert_eq!((usage.input_tokens, usage.output_tokens), (0, 0));
        assert_eq!(usage.turns, Some(1));
    }
}
