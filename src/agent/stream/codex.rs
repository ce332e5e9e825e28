//! What Codex CLI prints while it runs (`codex exec --json`), for
//! [`StreamWatch`].
//!
//! Recognised, with the class each is:
//!
//! - `{"type":"error","message":"Reconnecting... 2/5 (…)"}`, one per retry
//!   of a failed stream, and `Reconnecting... waiting for network` for
//!   ever when no server answers: each counts against `apiRetries`, the
//!   class from the words in brackets (`stream disconnected before
//!   completion` and `stream closed before response.completed`, a broken,
//!   garbled or truncated stream: unreachable).
//! - `{"type":"error","message":"unexpected status 401 Unauthorized: …"}`
//!   and the like, as Codex gives up: 401 and 403 stop it at once, 429 and
//!   "You've hit your usage limit" are rate limits, 5xx and 529 overload.
//! - `{"type":"turn.failed","error":{"message":…}}`: the cause, and the
//!   class of its words.
//!
//! On stderr it says `Reading additional input from stdin...` on every
//! run: a banner, never the cause.

use serde_json::Value;

use super::watch::{StreamWatch, Unavailable, class_of_text, shorten};

/// Lines Codex CLI prints on every run.
const NOISE: &[&str] = &[
    "Reading additional input from stdin",
    "Reading prompt from stdin",
];

impl StreamWatch {
    /// Whether `line` is one of the lines it prints on every run.
    pub(super) fn codex_noise(line: &str) -> bool {
        NOISE.iter().any(|p| line.starts_with(p))
    }

    /// One JSON line of `codex exec --json`.
    pub(super) fn codex(&mut self, v: &Value) {
        let event = v.get("msg").filter(|m| m.is_object()).unwrap_or(v);
        match event.get("type").and_then(Value::as_str) {
            Some("error") => {
                let msg = event.get("message").and_then(Value::as_str).unwrap_or("");
                let retrying = msg.starts_with("Reconnecting");
                let class = class_of_text(msg);
                match class {
                    Some(c) => self.provider_error(c, msg, retrying),
                    None => self.cause = Some(shorten(msg)),
                }
            }
            Some("turn.failed") => {
                let msg = event
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("the turn failed");
                self.cause = Some(shorten(msg));
                if let Some(class) = class_of_text(msg) {
                    self.last_error = Some(Unavailable {
                        class,
                        evidence: shorten(msg),
                    });
                    self.recovered = false;
                }
            }
            Some("turn.completed" | "item.completed" | "task_complete") => self.progress(),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::agent::stream::watch::{feed, is_noise};
    use crate::agent::{AgentKind, Availability};

    #[test]
    fn codex_reconnects_and_network_waits_count() {
        let (w, at) = feed(
            AgentKind::Codex,
            2,
            &[
                (false, r#"{"type":"thread.started","thread_id":"t"}"#),
                (
                    false,
                    r#"{"type":"error","message":"Reconnecting... waiting for network (Connection failed: error sending request)"}"#,
                ),
                (
                    false,
                    r#"{"type":"error","message":"Reconnecting... waiting for network (Connection failed: error sending request)"}"#,
                ),
                (
                    false,
                    r#"{"type":"error","message":"Reconnecting... waiting for network (Connection failed: error sending request)"}"#,
                ),
            ],
        );
        assert_eq!(at, Some(3));
        assert_eq!(
            w.unavailable().expect("stopped").class,
            Availability::Unreachable
        );
        let (w, at) = feed(
            AgentKind::Codex,
            2,
            &[(
                false,
                r#"{"type":"error","message":"unexpected status 401 Unauthorized: Incorrect API key provided"}"#,
            )],
        );
        assert_eq!(at, Some(0));
        assert_eq!(
            w.unavailable().expect("stopped").class,
            Availability::AuthFailed
        );
    }

    #[test]
    fn codex_turn_failed_message_is_the_cause() {
        let (w, _) = feed(
            AgentKind::Codex,
            2,
            &[(
                false,
                r#"{"type":"turn.failed","error":{"message":"model refused: context too long"}}"#,
            )],
        );
        assert_eq!(w.cause(), Some("model refused: context too long"));
        assert!(w.unresolved().is_none());
    }

    #[test]
    fn codex_broken_garbled_and_overloaded_streams() {
        // Codex CLI 0.169.0 against tests/it/mock_models: a 529, a stream that
        // is not JSON, one cut before `response.completed`.
        for (message, class) in [
            (
                "unexpected status 529 <unknown status code>: Overloaded, url: http://127.0.0.1:1/v1/responses",
                Availability::Overloaded,
            ),
            (
                "stream disconnected before completion: stream closed before response.completed",
                Availability::Unreachable,
            ),
            (
                "stream disconnected before completion: Transport error: network error: error decoding response body",
                Availability::Unreachable,
            ),
            (
                "exceeded retry limit, last status: 429 Too Many Requests",
                Availability::RateLimited,
            ),
        ] {
            let line = format!(r#"{{"type":"error","message":"{message}"}}"#);
            let (w, _) = feed(AgentKind::Codex, 2, &[(false, line.as_str())]);
            assert_eq!(w.unresolved().map(|u| u.class), Some(class), "{message}");
            assert_eq!(w.cause(), Some(message));
        }
    }

    #[test]
    fn codex_banner_is_never_the_cause() {
        assert!(is_noise(
            AgentKind::Codex,
            "Reading additional input from stdin..."
        ));
        let (w, _) = feed(
            AgentKind::Codex,
            2,
            &[(true, "Reading additional input from stdin... error")],
        );
        assert_eq!(w.cause(), None);
    }
}
