//! Aider (`aider`): its scripting command line and the usage lines it
//! prints.
//!
//! Flags, from the options reference
//! (<https://aider.chat/docs/config/options.html>) and the scripting guide
//! (<https://aider.chat/docs/scripting.html>):
//!
//! - `--message=<prompt>` (`-m`): "a single message to send the LLM,
//!   process reply then exit (disables chat mode)". Written with `=`
//!   because argparse will not take a separate value that starts with `-`.
//!   A prompt too long for one argument is given as
//!   `--message-file=<prompt_file>` ("a file containing the message").
//! - `--yes-always`: "always say yes to every confirmation" (add files to
//!   the chat, create files, fix lint errors). Aider still asks for an
//!   explicit yes before running shell commands it suggests, so those are
//!   declined; the gates run the checks instead.
//! - `--no-pretty`, `--no-stream`: plain, uncoloured output written once
//!   per reply, so the captured log reads cleanly.
//! - `--no-gitignore`: without it Aider (told yes to everything) appends
//!   `.aider*` to `.gitignore`, an edit outside any task's owned paths.
//! - `--chat-history-file`, `--input-history-file`: moved into a folder of
//!   the attempt's own beside the prompt file (`<prompt>.aider/`), outside
//!   the worktree, so the histories are not committed as part of the result
//!   and two attempts never write the same file. The folder is listed in
//!   [`Invocation::writable`], so a sandboxed Aider may write it. (The
//!   repo-map cache, `.aider.tags.cache.v3/`, has no such option; the
//!   runner must keep `.aider*` out of the result.)
//! - `--no-suggest-shell-commands`: `--yes-always` answers yes to edits and
//!   new files but, since 0.7x, declines to run suggested shell commands
//!   (they need an explicit yes), so that is already Aider's mild mode and
//!   there is no bypass to grant even in the sandbox; not asking for
//!   commands saves the tokens of suggesting them.
//! - `--no-check-update`, `--no-show-release-notes`, `--no-analytics`:
//!   nothing on start-up may wait for an answer or reach out for its own
//!   reasons; without `--no-analytics`, `--yes-always` would also opt the
//!   user in to analytics on first run.
//! - `--model=M`.
//!
//! Aider commits its own edits (`--auto-commits` is on by default); the
//! runner commits whatever is left on top.

use super::command_line::{Invocation, PromptInput, base_invocation, prompt_fits_argv};
use super::spec::AgentSpec;
use super::usage::{Usage, abbreviated_count};

/// Aider's chat history, kept beside the prompt file.
const CHAT_HISTORY_FILE: &str = "aider.chat.history.md";
/// Aider's input history, kept beside the prompt file.
const INPUT_HISTORY_FILE: &str = "aider.input.history";

/// The attempt's own folder for Aider's history files: beside the prompt
/// file, named after it.
fn history_dir(prompt_file: &std::path::Path) -> std::path::PathBuf {
    prompt_file.with_extension("aider")
}

pub(super) fn invocation(spec: &AgentSpec, input: &PromptInput) -> Invocation {
    let mut inv = base_invocation(spec);
    inv.args.extend(
        [
            "--yes-always",
            "--no-pretty",
            "--no-stream",
            "--no-gitignore",
            "--no-check-update",
            "--no-show-release-notes",
            "--no-analytics",
            "--no-suggest-shell-commands",
        ]
        .map(String::from),
    );
    let own = history_dir(input.prompt_file);
    inv.args.push(format!(
        "--chat-history-file={}",
        own.join(CHAT_HISTORY_FILE).to_string_lossy()
    ));
    inv.args.push(format!(
        "--input-history-file={}",
        own.join(INPUT_HISTORY_FILE).to_string_lossy()
    ));
    inv.writable.push(own);
    if let Some(model) = &spec.model {
        inv.args.push(format!("--model={model}"));
    }
    inv.args.extend(spec.args.iter().cloned());
    if prompt_fits_argv(input.prompt) {
        inv.args.push(format!("--message={}", input.prompt));
    } else {
        inv.args.push(format!(
            "--message-file={}",
            input.prompt_file.to_string_lossy()
        ));
    }
    inv
}

/// Reads Aider's per-reply usage lines:
///
/// ```text
/// Tokens: 4.8k sent, 1.2k cache write, 3.1k cache hit, 312 received. Cost: $0.02 message, $0.02 session.
/// ```
///
/// Token counts are summed over the replies (`sent` already includes the
/// cache tokens, so those parts are not added again); the cost is the last
/// `session` figure, which is cumulative. A reply to a model without known
/// prices prints no `Cost:` part, leaving the cost unknown.
pub(super) fn parse_usage(text: &str) -> Usage {
    let mut usage = Usage::default();
    let mut replies = 0u32;
    let mut message_costs: Option<f64> = None;
    let mut session_cost: Option<f64> = None;
    for line in text.lines() {
        let Some(rest) = line.trim().strip_prefix("Tokens:") else {
            continue;
        };
        let (tokens, cost) = match rest.split_once("Cost:") {
            Some((tokens, cost)) => (tokens, Some(cost)),
            None => (rest, None),
        };
        let mut counted = false;
        for part in tokens.split(',') {
            let part = part.trim().trim_end_matches('.');
            let Some((number, label)) = part.split_once(' ') else {
                continue;
            };
            let Some(n) = abbreviated_count(number) else {
                continue;
            };
            match label.trim() {
                "sent" => usage.input_tokens += n,
                "received" => usage.output_tokens += n,
                "cache hit" => usage.cache_read_tokens += n,
                "cache write" => usage.cache_write_tokens += n,
                _ => continue,
            }
            counted = true;
        }
        if counted {
            replies += 1;
        }
        for part in cost.into_iter().flat_map(|c| c.split(',')) {
            let part = part.trim().trim_end_matches('.');
            let Some((amount, label)) = part.strip_prefix('$').and_then(|p| p.split_once(' '))
            else {
                continue;
            };
            let Some(amount) = amount.parse::<f64>().ok().filter(|a| a.is_finite()) else {
                continue;
            };
            match label.trim() {
                "session" => session_cost = Some(amount),
                "message" => *message_costs.get_or_insert(0.0) += amount,
                _ => {}
            }
        }
    }
    usage.cost_usd = session_cost.or(message_costs);
    usage.turns = (replies > 0).then_some(replies);
    usage
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::{AgentKind, MAX_PROMPT_ARG_BYTES};
    use std::path::Path;

    const LOG: &str = include_str!("../../fixtures/agent-output/aider.txt");

    fn input(prompt: &str) -> PromptInput<'_> {
        PromptInput {
            prompt,
            prompt_file: Path::new("/repo/.git/orch/runs/r1/add-parser/1/prompt.md"),
            workdir: Path::new("/w"),
            task: "add-parser",
            attempt: 1,
        }
    }

    const FIXED: [&str; 10] = [
        "--yes-always",
        "--no-pretty",
        "--no-stream",
        "--no-gitignore",
        "--no-check-update",
        "--no-show-release-notes",
        "--no-analytics",
        "--no-suggest-shell-commands",
        "--chat-history-file=/repo/.git/orch/runs/r1/add-parser/1/prompt.aider/aider.chat.history.md",
        "--input-history-file=/repo/.git/orch/runs/r1/add-parser/1/prompt.aider/aider.input.history",
    ];

    #[test]
    fn argv_without_model_or_args() {
        let spec = AgentSpec::builtin("aider").expect("built-in");
        let inv = invocation(&spec, &input("Implement the parser."));
        assert_eq!(inv.program, "aider");
        let mut expected: Vec<String> = FIXED.map(String::from).to_vec();
        expected.push("--message=Implement the parser.".into());
        assert_eq!(inv.args, expected);
        assert_eq!(inv.stdin, None);
        assert_eq!(
            inv.writable,
            [std::path::PathBuf::from(
                "/repo/.git/orch/runs/r1/add-parser/1/prompt.aider"
            )]
        );
    }

    #[test]
    fn argv_with_model_and_args() {
        let mut spec = AgentSpec::builtin("aider").expect("built-in");
        spec.model = Some("sonnet".into());
        spec.args = vec!["--no-auto-lint".into()];
        let inv = invocation(&spec, &input("- dash first"));
        let mut expected: Vec<String> = FIXED.map(String::from).to_vec();
        expected.extend([
            "--model=sonnet".into(),
            "--no-auto-lint".into(),
            "--message=- dash first".into(),
        ]);
        assert_eq!(inv.args, expected);
    }

    #[test]
    fn long_prompt_is_read_from_the_prompt_file() {
        let spec = AgentSpec::builtin("aider").expect("built-in");
        let prompt = "a".repeat(MAX_PROMPT_ARG_BYTES + 1);
        let inv = invocation(&spec, &input(&prompt));
        assert_eq!(
            inv.args.last().map(String::as_str),
            Some("--message-file=/repo/.git/orch/runs/r1/add-parser/1/prompt.md")
        );
        assert_eq!(inv.stdin, None);
    }

    #[test]
    fn parses_tokens_and_session_cost() {
        let usage = parse_usage(LOG);
        assert_eq!(
            usage,
            Usage {
                input_tokens: 4800 + 12_000,
                output_tokens: 312 + 95,
                cache_read_tokens: 3100,
                cache_write_tokens: 1200,
                cost_usd: Some(0.03),
                turns: Some(2),
                is_error: None,
                model: None,
            }
        );
        // The model from Aider's banner ("Main model: …").
        assert_eq!(
            crate::agent::parse_usage(AgentKind::Aider, LOG.as_bytes()),
            Usage {
                model: Some("anthropic/claude-sonnet-4-20250514".into()),
                ..usage
            }
        );
    }

    #[test]
    fn replies_without_prices_leave_the_cost_unknown() {
        let usage = parse_usage("Tokens: 116 sent, 30 received.\n");
        assert_eq!((usage.input_tokens, usage.output_tokens), (116, 30));
        assert_eq!(usage.cost_usd, None);
        assert_eq!(usage.turns, Some(1));
    }

    #[test]
    fn message_costs_add_up_when_no_session_figure() {
        let text = "Tokens: 1k sent, 10 received. Cost: $0.01 message.\nTokens: 2k sent, 20 received. Cost: $0.02 message.\n";
        let usage = parse_usage(text);
        let cost = usage.cost_usd.expect("cost");
        assert!((cost - 0.03).abs() < 1e-9, "{cost}");
        assert_eq!((usage.input_tokens, usage.output_tokens), (3000, 30));
    }

    #[test]
    fn malformed_output_is_skipped() {
        assert_eq!(parse_usage(""), Usage::default());
        let text = "The model said: Tokens: 5 sent\nTokens: lots sent, ?? received. Cost: $x message, $ session.\nTokens:\n";
        assert_eq!(parse_usage(text), Usage::default());
    }
}
