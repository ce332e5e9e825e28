//! Whether a finished run says its agent is unavailable, for the fallback
//! chain.
//!
//! The chain moves to the next agent only when this one could not work at
//! all (its binary is missing, or its provider refused for rate or usage
//! limits or overload), never because its work failed a gate. So the test
//! errs towards `Available`: a rate-limit phrase counts only when the run
//! failed, because a run that succeeded may well print "rate limit" from
//! the code it wrote or the tests it ran.
//!
//! The phrases are the CLIs' own: Claude Code's "Claude AI usage limit
//! reached|<epoch>", "5-hour limit reached", `API Error: 429
//! {"type":"rate_limit_error"...}` and `529 ... overloaded_error`; Codex's
//! "You've hit your usage limit. Try again in …" and "exceeded retry
//! limit, last status: 429 Too Many Requests"; Gemini's `RESOURCE_EXHAUSTED`
//! and "Quota exceeded for quota metric"; Aider's (LiteLLM's)
//! `RateLimitError`.

use serde_json::Value;

use super::kind::AgentKind;
use super::usage::json_lines;

/// What a finished run says about its agent's availability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Availability {
    /// The agent ran; whether its work is good is for the gates.
    Available,
    /// The binary is not installed (or not executable).
    Missing,
    /// The provider refused: rate limit, usage limit, quota or overload.
    RateLimited,
    /// The provider refused the agent's credentials (401, 403, a missing or
    /// invalid key): no retry can fix that during the run.
    AuthFailed,
    /// The provider is overloaded or failing (529, 5xx).
    Overloaded,
    /// The provider could not be reached (connection refused, DNS, a
    /// stream that broke off).
    Unreachable,
}

/// Phrases (lower-case) that mean the provider refused the request.
const REFUSALS: [&str; 14] = [
    "rate limit",
    "rate-limit",
    "rate_limit",
    "ratelimit",
    "usage limit",
    "hit your limit",
    "limit reached",
    "overloaded",
    "quota",
    "resource_exhausted",
    "resource exhausted",
    "too many requests",
    "exhausted your capacity",
    "insufficient_quota",
];

/// Words that, near a `429`, make it an HTTP status rather than any number.
const STATUS_CONTEXT: [&str; 5] = ["error", "status", "http", "code", "too many"];

/// Where `number` stands alone in `text`: not part of a longer number (a
/// port such as `:34401`, an id, a count).
pub(crate) fn standing_alone<'t>(
    text: &'t str,
    number: &'t str,
) -> impl Iterator<Item = usize> + 't {
    let bytes = text.as_bytes();
    text.match_indices(number)
        .map(|(at, _)| at)
        .filter(move |&at| {
            let before = at.checked_sub(1).map(|i| bytes[i]);
            let after = bytes.get(at + number.len()).copied();
            !before.is_some_and(|b| b.is_ascii_digit())
                && !after.is_some_and(|b| b.is_ascii_digit())
        })
}

/// Whether `text` (lower-case) names HTTP status 429: the number standing
/// alone, with a status-like word within a few characters.
fn mentions_http_429(text: &str) -> bool {
    standing_alone(text, "429").any(|at| {
        let mut from = at.saturating_sub(24);
        while !text.is_char_boundary(from) {
            from -= 1;
        }
        let mut to = (at + 3 + 24).min(text.len());
        while !text.is_char_boundary(to) {
            to += 1;
        }
        let near = &text[from..to];
        STATUS_CONTEXT.iter().any(|w| near.contains(w))
    })
}

/// Whether `text` says the provider refused.
fn says_refused(text: &str) -> bool {
    let lower = text.to_lowercase();
    REFUSALS.iter().any(|p| lower.contains(p)) || mentions_http_429(&lower)
}

/// Whether the last non-empty line is a shell's "not found" for a command.
fn says_not_found(tail: &str) -> bool {
    tail.lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .is_some_and(|l| {
            let l = l.to_lowercase();
            l.contains("command not found") || l.ends_with(": not found")
        })
}

/// A Claude-shaped `result` line in the tail that reports an error and a
/// refusal: Claude Code has exited 0 after "Claude AI usage limit reached".
fn result_says_refused(tail: &str) -> bool {
    json_lines(tail).any(|v| {
        v.get("type").and_then(Value::as_str) == Some("result")
            && v.get("is_error").and_then(Value::as_bool) == Some(true)
            && v.get("result")
                .and_then(Value::as_str)
                .is_some_and(says_refused)
    })
}

/// Classifies a finished run from its exit code (`None` when a signal ended
/// it, as at a timeout) and the tail of its output (stdout and stderr):
/// `Missing` for exit 127 or 126 (a shell's "not found" / "not
/// executable"), or a failure whose last line says "command not found";
/// `RateLimited` when a failed run's output says the provider refused (HTTP
/// 429, "rate limit", "usage limit", "overloaded", "quota"); otherwise
/// `Available`.
pub fn classify_exit(kind: AgentKind, exit_code: Option<i32>, output_tail: &str) -> Availability {
    match exit_code {
        Some(127 | 126) => return Availability::Missing,
        Some(code) if code != 0 && says_not_found(output_tail) => {
            return Availability::Missing;
        }
        _ => {}
    }
    let failed = exit_code.is_some_and(|c| c != 0);
    let refused = if failed {
        says_refused(output_tail)
    } else {
        matches!(kind, AgentKind::Claude | AgentKind::Fake) && result_says_refused(output_tail)
    };
    if refused {
        Availability::RateLimited
    } else {
        Availability::Available
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [AgentKind; 6] = AgentKind::ALL;

    #[test]
    fn exit_127_and_126_mean_missing() {
        for kind in ALL {
            assert_eq!(classify_exit(kind, Some(127), ""), Availability::Missing);
            assert_eq!(
                classify_exit(kind, Some(126), "sh: 1: ./agent: Permission denied"),
                Availability::Missing
            );
        }
        assert_eq!(
            classify_exit(
                AgentKind::Command,
                Some(1),
                "setup done\nbash: my-agent: command not found\n"
            ),
            Availability::Missing
        );
        assert_eq!(
            classify_exit(AgentKind::Command, Some(2), "sh: 1: my-agent: not found"),
            Availability::Missing
        );
    }

    #[test]
    fn not_found_earlier_in_the_output_is_not_missing() {
        // The agent tried a tool that is not installed, then failed for its
        // own reasons: it ran, so it is available.
        let tail = "bash: npm: command not found\nI could not run the tests.\n";
        assert_eq!(
            classify_exit(AgentKind::Claude, Some(1), tail),
            Availability::Available
        );
        assert_eq!(
            classify_exit(AgentKind::Claude, Some(0), "x: command not found"),
            Availability::Available
        );
    }

    #[test]
    fn real_refusal_messages_are_rate_limited() {
        let cases = [
            (
                AgentKind::Claude,
                "Claude AI usage limit reached|1753441200",
            ),
            (AgentKind::Claude, "5-hour limit reached ∙ resets 3pm"),
            (
                AgentKind::Claude,
                r#"API Error: 429 {"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed your account's rate limit. Please try again later."}}"#,
            ),
            (
                AgentKind::Claude,
                r#"API Error: 529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            ),
            (
                AgentKind::Codex,
                "ERROR: You've hit your usage limit. Try again in 4 days 20 hours 9 minutes.",
            ),
            (
                AgentKind::Codex,
                "ERROR: exceeded retry limit, last status: 429 Too Many Requests",
            ),
            (
                AgentKind::Gemini,
                "Error when talking to Gemini API [{\"error\":{\"code\":429,\"status\":\"RESOURCE_EXHAUSTED\"}}]",
            ),
            (
                AgentKind::Gemini,
                "Quota exceeded for quota metric 'Gemini 2.5 Pro Requests' and limit 'Gemini 2.5 Pro Requests per day per user per tier'",
            ),
            (
                AgentKind::Aider,
                "litellm.RateLimitError: AnthropicException - {\"type\":\"error\"}\nThe API provider has rate limited you. Try again later or check your quotas.",
            ),
            (AgentKind::Command, "upstream replied HTTP 429"),
        ];
        for (kind, tail) in cases {
            assert_eq!(
                classify_exit(kind, Some(1), tail),
                Availability::RateLimited,
                "{tail}"
            );
        }
    }

    #[test]
    fn refusal_words_after_success_do_not_count() {
        for kind in ALL {
            assert_eq!(
                classify_exit(
                    kind,
                    Some(0),
                    "Added a rate limit of 429 requests per quota window."
                ),
                Availability::Available
            );
        }
        // A timeout (signal) is not a refusal either.
        assert_eq!(
            classify_exit(AgentKind::Codex, None, "429 Too Many Requests"),
            Availability::Available
        );
    }

    #[test]
    fn claude_error_result_with_exit_zero_is_rate_limited() {
        let tail = r#"{"type":"result","subtype":"success","is_error":true,"result":"Claude AI usage limit reached|1753441200","total_cost_usd":0}"#;
        assert_eq!(
            classify_exit(AgentKind::Claude, Some(0), tail),
            Availability::RateLimited
        );
        let ok = r#"{"type":"result","is_error":false,"result":"Added a rate limit."}"#;
        assert_eq!(
            classify_exit(AgentKind::Claude, Some(0), ok),
            Availability::Available
        );
    }

    #[test]
    fn plain_failures_are_available() {
        for kind in ALL {
            assert_eq!(
                classify_exit(
                    kind,
                    Some(1),
                    "error[E0425]: cannot find value `x` at line 4291"
                ),
                Availability::Available
            );
        }
    }

    #[test]
    fn a_bare_429_needs_status_context() {
        assert!(mentions_http_429("status 429"));
        assert!(mentions_http_429("429 too many requests"));
        assert!(mentions_http_429("\"code\":429"));
        assert!(!mentions_http_429("line 429 of main.rs"));
        assert!(!mentions_http_429("error at 14290"));
        assert!(!mentions_http_429("ünïcödé 429 ünïcödé"));
    }
}
