//! What Claude Code prints while it runs (`-p --output-format
//! stream-json --verbose`), for [`StreamWatch`].
//!
//! Recognised, with the class each is:
//!
//! - `{"type":"system","subtype":"api_retry","error_status":N,"error":…}`,
//!   one per retry of a refused request (up to 10, with back-off): 401 and
//!   403 stop it at once (its credentials were refused), 429 is a rate
//!   limit, 5xx and 529 overload, no status an unreachable server; each
//!   counts against `apiRetries`.
//! - An `assistant` message whose text starts with `API Error` (or that
//!   carries `"error"`), as Claude Code reports the request it gave up on:
//!   `API Error: Connection to the API was lost (ECONNRESET)` (a broken
//!   stream), `API Error: API returned an empty or malformed response (HTTP
//!   200) — check for a proxy or gateway intercepting the request` (a
//!   garbled or truncated stream; Claude then exits 1 at once), `API Error:
//!   Request timed out`: the agent is unavailable when it ends on one.
//! - A `result` with `"is_error":true` ("Claude AI usage limit
//!   reached|…", which it exits 0 after): the cause, and a rate limit.
//!
//! Everything else on stdout is JSON events; its stderr has no banners.

use serde_json::Value;

use crate::agent::availability::Availability;

use super::watch::{StreamWatch, Unavailable, class_of_status, class_of_text, shorten};

/// Lines Claude Code prints on every run: none it is known to print.
const NOISE: &[&str] = &[];

impl StreamWatch {
    /// Whether `line` is one of the lines it prints on every run.
    pub(super) fn claude_noise(line: &str) -> bool {
        NOISE.iter().any(|p| line.starts_with(p))
    }

    /// One JSON line of `--output-format stream-json`.
    pub(super) fn claude(&mut self, v: &Value) {
        let kind = v.get("type").and_then(Value::as_str);
        let subtype = v.get("subtype").and_then(Value::as_str);
        match (kind, subtype) {
            (Some("system"), Some("init")) => {
                if let Some(m) = v.get("model").and_then(Value::as_str) {
                    self.model = Some(m.to_owned());
                }
            }
            (Some("system"), Some("api_retry")) => {
                let status = v.get("error_status").and_then(Value::as_u64);
                let error = v.get("error").and_then(Value::as_str).unwrap_or("");
                let class = status
                    .and_then(class_of_status)
                    .or_else(|| class_of_text(error))
                    .unwrap_or(Availability::Unreachable);
                // A refused key is not retried: git-orch stops it here.
                let retrying = if class == Availability::AuthFailed {
                    ""
                } else {
                    ", retrying"
                };
                let evidence = match status {
                    Some(s) => format!("API error {s} ({error}){retrying}"),
                    None => format!("API request failed ({error}){retrying}"),
                };
                self.provider_error(class, &evidence, true);
            }
            (Some("assistant"), _) => {
                let text = v
                    .pointer("/message/content/0/text")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                if text.starts_with("API Error") || v.get("error").is_some() {
                    let evidence = if text.is_empty() {
                        v.get("error")
                            .and_then(Value::as_str)
                            .unwrap_or("API error")
                            .to_owned()
                    } else {
                        text.to_owned()
                    };
                    self.cause = Some(shorten(&evidence));
                    if let Some(class) = class_of_text(&evidence) {
                        self.last_error = Some(Unavailable {
                            class,
                            evidence: shorten(&evidence),
                        });
                        self.recovered = false;
                        if class == Availability::AuthFailed {
                            self.verdict = self.last_error.clone();
                        }
                    }
                } else {
                    self.progress();
                }
            }
            (Some("result"), _) => {
                let is_error = v.get("is_error").and_then(Value::as_bool) == Some(true);
                if is_error {
                    let text = v
                        .get("result")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                        .or_else(|| {
                            v.get("errors").and_then(Value::as_array).map(|e| {
                                e.iter()
                                    .filter_map(Value::as_str)
                                    .collect::<Vec<_>>()
                                    .join("; ")
                            })
                        })
                        .unwrap_or_else(|| subtype.unwrap_or("error").to_owned());
                    self.cause = Some(shorten(&text));
                    let status = v.get("api_error_status").and_then(Value::as_u64);
                    if let Some(class) = status
                        .and_then(class_of_status)
                        .or_else(|| class_of_text(&text))
                    {
                        self.last_error = Some(Unavailable {
                            class,
                            evidence: shorten(&text),
                        });
                        self.recovered = false;
                    }
                } else {
                    self.progress();
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::agent::stream::watch::feed;
    use crate::agent::{AgentKind, Availability};

    #[test]
    fn claude_401_stops_at_the_first_retry() {
        let (w, at) = feed(
            AgentKind::Claude,
            2,
            &[
                (
                    false,
                    r#"{"type":"system","subtype":"init","model":"claude-sonnet-4-5"}"#,
                ),
                (
                    false,
                    r#"{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"error_status":401,"error":"authentication_failed"}"#,
                ),
            ],
        );
        assert_eq!(at, Some(1));
        let u = w.unavailable().expect("unavailable");
        assert_eq!(u.class, Availability::AuthFailed);
        assert!(u.reason().contains("401"), "{}", u.reason());
        assert_eq!(w.model(), Some("claude-sonnet-4-5"));
    }

    #[test]
    fn claude_rate_limits_stop_after_the_allowance() {
        let retry = |n: u32, s: u32| {
            format!(
                r#"{{"type":"system","subtype":"api_retry","attempt":{n},"error_status":{s},"error":"rate_limit_error"}}"#
            )
        };
        let lines = [retry(1, 429), retry(2, 429), retry(3, 429)];
        let lines: Vec<(bool, &str)> = lines.iter().map(|l| (false, l.as_str())).collect();
        let (w, at) = feed(AgentKind::Claude, 2, &lines);
        assert_eq!(at, Some(2));
        assert_eq!(
            w.unavailable().expect("stopped").class,
            Availability::RateLimited
        );
        let (w, at) = feed(AgentKind::Claude, 0, &lines[..1]);
        assert_eq!(at, Some(0));
        assert_eq!(w.retries(), 1);
        let overloaded = retry(1, 529);
        let (w, _) = feed(AgentKind::Claude, 0, &[(false, overloaded.as_str())]);
        assert_eq!(
            w.unavailable().expect("stopped").class,
            Availability::Overloaded
        );
    }

    #[test]
    fn claude_error_result_is_the_cause() {
        let (w, at) = feed(
            AgentKind::Claude,
            2,
            &[(
                false,
                r#"{"type":"result","subtype":"success","is_error":true,"result":"Claude AI usage limit reached|1753441200"}"#,
            )],
        );
        assert_eq!(at, None);
        assert_eq!(w.cause(), Some("Claude AI usage limit reached|1753441200"));
        assert_eq!(
            w.unresolved().expect("refused").class,
            Availability::RateLimited
        );
    }

    #[test]
    fn claude_malformed_or_truncated_stream_is_unreachable() {
        // What Claude Code 2.1.197 printed when a gateway answered 200 with
        // an SSE event that is not JSON, or with a stream that stopped
        // before `message_stop` (tests/it/mock_models: Garbled, Truncated).
        let message = "API Error: API returned an empty or malformed response (HTTP 200) — check for a proxy or gateway intercepting the request";
        let assistant = format!(
            r#"{{"type":"assistant","message":{{"id":"x","model":"<synthetic>","role":"assistant","content":[{{"type":"text","text":"{message}"}}]}},"error":"unknown"}}"#
        );
        let result = format!(
            r#"{{"type":"result","subtype":"success","is_error":true,"api_error_status":null,"result":"{message}"}}"#
        );
        let (w, at) = feed(
            AgentKind::Claude,
            2,
            &[
                (false, assistant.as_str()),
                (false, result.as_str()),
                (true, "Could not parse message into JSON: {not json at all"),
            ],
        );
        assert_eq!(at, None, "Claude ends by itself");
        let u = w.unresolved().expect("unavailable when it ends");
        assert_eq!(u.class, Availability::Unreachable);
        assert_eq!(u.evidence, message);
        assert_eq!(w.cause(), Some(message));
    }

    #[test]
    fn claude_connection_lost_and_timeouts_are_unreachable() {
        for text in [
            "API Error: Connection to the API was lost (ECONNRESET). This is usually temporary — try again.",
            "API Error: Request timed out.",
        ] {
            let line = format!(
                r#"{{"type":"assistant","message":{{"content":[{{"type":"text","text":"{text}"}}]}}}}"#
            );
            let (w, _) = feed(AgentKind::Claude, 2, &[(false, line.as_str())]);
            assert_eq!(
                w.unresolved().map(|u| u.class),
                Some(Availability::Unreachable),
                "{text}"
            );
        }
    }

    #[test]
    fn claude_overload_retries_stop_after_the_allowance() {
        let retry = r#"{"type":"system","subtype":"api_retry","attempt":1,"error_status":529,"error":"overloaded_error"}"#;
        let (w, at) = feed(AgentKind::Claude, 1, &[(false, retry), (false, retry)]);
        assert_eq!(at, Some(1));
        assert_eq!(
            w.unavailable().map(|u| u.class),
            Some(Availability::Overloaded)
        );
    }

    #[test]
    fn claude_retry_without_a_status_is_an_unreachable_server() {
        let retry = r#"{"type":"system","subtype":"api_retry","attempt":1,"error_status":null,"error":"Connection error."}"#;
        let (w, at) = feed(AgentKind::Claude, 0, &[(false, retry)]);
        assert_eq!(at, Some(0));
        let u = w.unavailable().expect("stopped");
        assert_eq!(u.class, Availability::Unreachable);
        assert_eq!(
            u.evidence,
            "API request failed (Connection error.), retrying"
        );
    }
}
