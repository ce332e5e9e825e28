//! What Gemini CLI prints while it runs (`--output-format stream-json`),
//! for [`StreamWatch`].
//!
//! Recognised, with the class each is:
//!
//! - `Attempt 1 failed with status 429. Retrying with backoff...` on
//!   stderr, one per retry: the class of the status (401 and 403 stop it
//!   at once), each counted against `apiRetries`.
//! - `Error when talking to Gemini API Full report available at: PATH
//!   ERROR` and `[API Error: …]` as it gives up: a refused key, a rate
//!   limit, or (`fetch failed`, a JSON syntax error from a broken or
//!   garbled stream) an unreachable server. The report's path is kept
//!   apart ([`StreamWatch::report`]): inside the sandbox it is in a
//!   private `/tmp` that is gone when the agent ends.
//! - `{"type":"error","severity":"error","message":"Model stream ended
//!   without a finish reason."}`, a truncated stream (it then exits 0):
//!   unreachable.
//! - A `result` with `"status":"error"`: the cause, with the class of its
//!   words.
//!
//! On stderr it prints banners on every run ("YOLO mode is enabled…",
//! "Ripgrep is not available. Falling back to GrepTool.", the 256-colour
//! warning): never the cause.

use serde_json::Value;

use crate::agent::availability::Availability;

use super::watch::{StreamWatch, Unavailable, class_of_status, class_of_text, shorten};

/// Lines Gemini CLI prints on every run.
const NOISE: &[&str] = &[
    "YOLO mode is enabled",
    "Ripgrep is not available",
    "Warning: 256-color support not detected",
    "Loaded cached credentials",
];

impl StreamWatch {
    /// Whether `line` is one of the lines it prints on every run.
    pub(super) fn gemini_noise(line: &str) -> bool {
        NOISE.iter().any(|p| line.starts_with(p))
    }

    /// One JSON line of `--output-format stream-json`.
    pub(super) fn gemini_json(&mut self, v: &Value) {
        match v.get("type").and_then(Value::as_str) {
            Some("init") => {
                if let Some(m) = v.get("model").and_then(Value::as_str)
                    && m != "auto"
                {
                    self.model = Some(m.to_owned());
                }
            }
            Some("result") => {
                if let Some(models) = v.pointer("/stats/models").and_then(Value::as_object)
                    && let Some(m) = models.keys().next_back()
                {
                    self.model = Some(m.clone());
                }
                let failed = v.get("status").and_then(Value::as_str) == Some("error")
                    || v.get("error").is_some_and(|e| !e.is_null());
                if failed {
                    match v.pointer("/error/message").and_then(Value::as_str) {
                        Some(msg) => self.failed_with(msg),
                        // The error event before it said why.
                        None if self.cause.is_some() => {}
                        None => self.cause = Some("the run failed".to_owned()),
                    }
                } else {
                    self.progress();
                }
            }
            // `{"type":"error","severity":"error","message":"Model stream
            // ended without a finish reason."}` before a failed result.
            Some("error") if v.get("severity").and_then(Value::as_str) != Some("warning") => {
                if let Some(msg) = v.get("message").and_then(Value::as_str) {
                    self.failed_with(msg);
                }
            }
            Some("message" | "tool_use" | "tool_result") => {
                if v.get("role").and_then(Value::as_str) != Some("user") {
                    self.progress();
                }
            }
            _ => {
                // `--output-format json` prints one object with `error`.
                if let Some(msg) = v.pointer("/error/message").and_then(Value::as_str) {
                    self.error_text(&format!("error: {msg}"));
                }
            }
        }
    }

    /// One line of text (its stderr).
    pub(super) fn gemini_text(&mut self, line: &str) {
        // "Attempt 2 failed with status 429. Retrying with backoff..."
        if let Some(rest) = line.strip_prefix("Attempt ")
            && let Some((_, after)) = rest.split_once("failed with status ")
        {
            let status: String = after.chars().take_while(char::is_ascii_digit).collect();
            let class = status
                .parse::<u64>()
                .ok()
                .and_then(class_of_status)
                .unwrap_or(Availability::Overloaded);
            self.provider_error(class, line, true);
            return;
        }
        if line.starts_with("Attempt ") && line.contains("failed") {
            let class = class_of_text(line).unwrap_or(Availability::Unreachable);
            self.provider_error(class, line, true);
            return;
        }
        if line.starts_with("at ") || line.starts_with('}') {
            // Stack frames of an error already seen.
            return;
        }
        if line.contains("[API Error") || line.contains("Error when talking to Gemini API") {
            let line = self.without_report(line);
            let class = class_of_text(&line).unwrap_or(Availability::Unreachable);
            self.provider_error(class, &line, false);
            return;
        }
        self.error_text(line);
    }

    /// A failed turn's message: the cause, and unavailable when its words
    /// say the provider failed.
    fn failed_with(&mut self, msg: &str) {
        self.cause = Some(shorten(msg));
        if let Some(class) = class_of_text(msg) {
            self.last_error = Some(Unavailable {
                class,
                evidence: shorten(msg),
            });
            self.recovered = false;
        }
    }

    /// `line` without Gemini's "Full report available at: PATH" (or
    /// "Partial report … available at: PATH"), which is kept apart: the
    /// report is in the agent's temporary folder, which inside the sandbox
    /// is gone once it ends.
    fn without_report(&mut self, line: &str) -> String {
        let Some(at) = line.find(" available at: ") else {
            return line.to_owned();
        };
        let Some(start) = line[..at]
            .rfind("Full report")
            .or_else(|| line[..at].rfind("Partial report"))
        else {
            return line.to_owned();
        };
        let after = &line[at + " available at: ".len()..];
        let (path, rest) = after.split_once(char::is_whitespace).unwrap_or((after, ""));
        if !path.starts_with('/') {
            return line.to_owned();
        }
        self.report = Some(path.to_owned());
        let before = line[..start].trim_end();
        match rest.trim() {
            "" => before.to_owned(),
            rest => format!("{before}: {rest}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::agent::stream::watch::{feed, is_noise};
    use crate::agent::{AgentKind, Availability};

    #[test]
    fn gemini_backoff_lines_count_as_retries() {
        let (w, at) = feed(
            AgentKind::Gemini,
            1,
            &[
                (
                    true,
                    "Attempt 1 failed with status 429. Retrying with backoff... _ApiError: {\"error\":{\"code\":429}}",
                ),
                (true, "    at throwErrorIfNotOK (file:///x.js:1:1)"),
                (
                    true,
                    "Attempt 2 failed with status 429. Retrying with backoff...",
                ),
            ],
        );
        assert_eq!(at, Some(2));
        assert_eq!(
            w.unavailable().expect("stopped").class,
            Availability::RateLimited
        );
    }

    #[test]
    fn gemini_report_path_is_kept_apart_from_the_cause() {
        let (w, _) = feed(
            AgentKind::Gemini,
            2,
            &[(
                true,
                "Error when talking to Gemini API Full report available at: /tmp/gemini-client-error-Turn.run-sendMessageStream-2026-11-26T17-22-58-319Z.json SyntaxError: Expected property name or '}' in JSON at position 1",
            )],
        );
        assert_eq!(
            w.cause(),
            Some(
                "Error when talking to Gemini API: SyntaxError: Expected property name or '}' in JSON at position 1"
            )
        );
        assert_eq!(
            w.report(),
            Some(
                "/tmp/gemini-client-error-Turn.run-sendMessageStream-2026-11-26T17-22-58-319Z.json"
            )
        );
        assert_eq!(
            w.unresolved().map(|u| u.class),
            Some(Availability::Unreachable)
        );
    }

    #[test]
    fn gemini_truncated_stream_is_unreachable_though_it_exits_0() {
        // Gemini CLI 0.61.0 against a stream that stopped before its
        // finish reason (tests/it/mock_models: Truncated).
        let (w, _) = feed(
            AgentKind::Gemini,
            2,
            &[
                (
                    false,
                    r#"{"type":"error","timestamp":"t","severity":"error","message":"Model stream ended without a finish reason."}"#,
                ),
                (
                    false,
                    r#"{"type":"result","timestamp":"t","status":"error","stats":{"total_tokens":0}}"#,
                ),
            ],
        );
        assert_eq!(
            w.cause(),
            Some("Model stream ended without a finish reason.")
        );
        assert_eq!(
            w.unresolved().map(|u| u.class),
            Some(Availability::Unreachable)
        );
    }

    #[test]
    fn gemini_overload_retries_count() {
        let line = r#"Attempt 1 failed with status 529. Retrying with backoff... _ApiError: {"error":{"code":529,"message":"Overloaded","status":"INTERNAL"}}"#;
        let (w, at) = feed(AgentKind::Gemini, 1, &[(true, line), (true, line)]);
        assert_eq!(at, Some(1));
        assert_eq!(
            w.unavailable().map(|u| u.class),
            Some(Availability::Overloaded)
        );
    }

    #[test]
    fn gemini_banners_are_never_the_cause() {
        for banner in [
            "Ripgrep is not available. Falling back to GrepTool.",
            "YOLO mode is enabled. All tool calls will be automatically approved.",
            "Warning: 256-color support not detected. Using a terminal with at least 256-color support is recommended for a better visual experience.",
        ] {
            assert!(is_noise(AgentKind::Gemini, banner), "{banner}");
            let (w, _) = feed(AgentKind::Gemini, 2, &[(true, banner)]);
            assert_eq!(w.cause(), None, "{banner}");
        }
    }

    #[test]
    fn gemini_refused_key_stops_at_once_and_fetch_failed_is_unreachable() {
        let (w, at) = feed(
            AgentKind::Gemini,
            2,
            &[(
                true,
                r#"Error when talking to Gemini API Full report available at: /tmp/r.json ApiError: {"error":{"code":401,"message":"API key not valid. Please pass a valid API key.","status":"UNAUTHENTICATED"}}"#,
            )],
        );
        assert_eq!(at, Some(0));
        assert_eq!(
            w.unavailable().map(|u| u.class),
            Some(Availability::AuthFailed)
        );
        let (w, _) = feed(
            AgentKind::Gemini,
            2,
            &[(
                true,
                "Attempt 1 failed: fetch failed. Retrying with backoff...",
            )],
        );
        assert_eq!(
            w.unresolved().map(|u| u.class),
            Some(Availability::Unreachable)
        );
        assert_eq!(w.retries(), 1);
    }
}
