//! Reading an agent's output while it runs, to catch in seconds what would
//! otherwise surface only at its timeout.
//!
//! Every CLI retries a refused request on its own, with back-off, for
//! minutes: Claude Code up to ten times (`{"type":"system","subtype":
//! "api_retry","error_status":429,…}` per try), Codex five times per
//! stream plus an endless "waiting for network" (`{"type":"error",
//! "message":"Reconnecting... 2/5 (…)"}`), Gemini CLI ("Attempt 1 failed
//! with status 429. Retrying with backoff..." on stderr), Aider through
//! LiteLLM ("litellm.RateLimitError: …", "Retrying in 0.5 seconds...") —
//! and Aider then exits 0 as if it had worked. [`StreamWatch`] reads those
//! lines: a refused key stops the agent at once (no retry can fix it), and
//! rate limits, overload, server errors and an unreachable server stop it
//! after the agent's `apiRetries`, so the fallback agent (or the run's
//! retry) starts within seconds. It also keeps the agent's own last error
//! text, the *cause* shown in failure reasons, `status` and the next
//! attempt's retry context.
//!
//! Lines arrive already masked (the runner masks output before anything
//! else sees it), so a cause never carries a secret.

use serde_json::Value;

use super::{AgentKind, Availability};

/// Longest cause kept, in characters.
const CAUSE_CHARS: usize = 400;

/// Why an agent was found unable to work, with the words that showed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable {
    pub class: Availability,
    /// The agent's own words (masked, shortened).
    pub evidence: String,
}

impl Unavailable {
    /// The reason recorded in `agent_finished.unavailable` and the failure.
    pub fn reason(&self) -> String {
        let what = match self.class {
            Availability::AuthFailed => "its credentials were refused",
            Availability::RateLimited => "rate limited",
            Availability::Overloaded => "the provider is overloaded or failing",
            Availability::Unreachable => "the provider could not be reached",
            Availability::Missing => "its program is missing",
            Availability::Available => "unavailable",
        };
        if self.evidence.is_empty() {
            what.to_owned()
        } else {
            format!("{what}: {}", self.evidence)
        }
    }
}

/// Watches one agent run's output lines.
#[derive(Debug, Clone)]
pub struct StreamWatch {
    kind: AgentKind,
    allowed_retries: u32,
    retries: u32,
    /// Decided during the run: stop the agent.
    verdict: Option<Unavailable>,
    /// The last provider error seen, and whether the agent made progress
    /// (a reply, a finished turn) after it.
    last_error: Option<Unavailable>,
    recovered: bool,
    /// The agent's own last error text.
    cause: Option<String>,
    model: Option<String>,
}

/// The HTTP status a number stands for, as a class.
fn class_of_status(status: u64) -> Option<Availability> {
    match status {
        401 | 403 => Some(Availability::AuthFailed),
        429 => Some(Availability::RateLimited),
        500..=599 => Some(Availability::Overloaded),
        _ => None,
    }
}

/// The class a free-text error message stands for.
fn class_of_text(text: &str) -> Option<Availability> {
    let t = text.to_lowercase();
    let any = |words: &[&str]| words.iter().any(|w| t.contains(w));
    if any(&[
        "401",
        "403 forbidden",
        "unauthorized",
        "authentication",
        "invalid api key",
        "invalid x-api-key",
        "incorrect api key",
        "api key not valid",
        "invalid_api_key",
        "permission_denied",
        "not able to authenticate",
        "please run /login",
    ]) {
        return Some(Availability::AuthFailed);
    }
    if any(&[
        "429",
        "rate limit",
        "rate_limit",
        "ratelimit",
        "too many requests",
        "usage limit",
        "quota",
        "resource_exhausted",
    ]) {
        return Some(Availability::RateLimited);
    }
    if any(&[
        "529",
        "overloaded",
        "high demand",
        "internal server error",
        "internalservererror",
        "service unavailable",
        "serviceunavailable",
        "bad gateway",
        "servers are down",
        "500",
        "502",
        "503",
        "504",
    ]) {
        return Some(Availability::Overloaded);
    }
    if any(&[
        "waiting for network",
        "connection refused",
        "connection failed",
        "error sending request",
        "connection error",
        "apiconnectionerror",
        "failed to lookup",
        "econnrefused",
        "fetch failed",
        "cannot connect",
        "stream disconnected",
        "network error",
        "econnreset",
        "connection reset",
        "connection to the api was lost",
        "socket hang up",
    ]) {
        return Some(Availability::Unreachable);
    }
    None
}

/// `text` cut to [`CAUSE_CHARS`] on one line.
fn shorten(text: &str) -> String {
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= CAUSE_CHARS {
        return one_line;
    }
    let cut: String = one_line.chars().take(CAUSE_CHARS).collect();
    format!("{cut}…")
}

/// The model a CLI says it uses, from its whole output.
pub fn model_in(kind: AgentKind, text: &str) -> Option<String> {
    let mut watch = StreamWatch::new(kind, u32::MAX);
    for line in text.lines() {
        watch.line(false, line);
    }
    watch.model
}

impl StreamWatch {
    /// A watch for an agent of `kind` allowed `allowed_retries` provider
    /// retries.
    pub fn new(kind: AgentKind, allowed_retries: u32) -> Self {
        StreamWatch {
            kind,
            allowed_retries,
            retries: 0,
            verdict: None,
            last_error: None,
            recovered: false,
            cause: None,
            model: None,
        }
    }

    /// Reads one output line (`stderr` says from which stream); true when
    /// the agent should be stopped now.
    pub fn line(&mut self, stderr: bool, line: &str) -> bool {
        if self.verdict.is_some() {
            return true;
        }
        let line = line.trim();
        if line.is_empty() {
            return false;
        }
        let json = line
            .starts_with('{')
            .then(|| serde_json::from_str::<Value>(line).ok())
            .flatten();
        match (self.kind, json) {
            (AgentKind::Claude | AgentKind::Fake, Some(v)) => self.claude(&v),
            (AgentKind::Codex, Some(v)) => self.codex(&v),
            (AgentKind::Gemini, Some(v)) => self.gemini_json(&v),
            (AgentKind::Gemini, None) => self.gemini_text(line),
            (AgentKind::Aider, _) => self.aider(line),
            (AgentKind::Claude | AgentKind::Codex, None) if stderr => self.error_text(line),
            _ => {}
        }
        self.verdict.is_some()
    }

    /// A provider error: a refused key stops at once; others count as a
    /// retry when `retrying`, and stop once over the allowance.
    fn provider_error(&mut self, class: Availability, evidence: &str, retrying: bool) {
        let u = Unavailable {
            class,
            evidence: shorten(evidence),
        };
        self.cause = Some(u.evidence.clone());
        self.last_error = Some(u.clone());
        self.recovered = false;
        if class == Availability::AuthFailed {
            self.verdict = Some(u);
            return;
        }
        if retrying {
            self.retries += 1;
            if self.retries > self.allowed_retries {
                self.verdict = Some(u);
            }
        }
    }

    /// Free text that looks like an error becomes the cause. It is not
    /// classified: an agent's stderr may quote anything (a test's "500"),
    /// and only the CLIs' own structured retry and error reports decide
    /// availability.
    fn error_text(&mut self, text: &str) {
        let lower = text.to_lowercase();
        if lower.contains("error") || lower.contains("fail") || lower.contains("refuse") {
            self.cause = Some(shorten(text));
        }
    }

    fn progress(&mut self) {
        self.recovered = true;
    }

    fn claude(&mut self, v: &Value) {
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
                let evidence = match status {
                    Some(s) => format!("API error {s} ({error}), retrying"),
                    None => format!("API request failed ({error}), retrying"),
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

    fn codex(&mut self, v: &Value) {
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

    fn gemini_json(&mut self, v: &Value) {
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
                    let msg = v
                        .pointer("/error/message")
                        .and_then(Value::as_str)
                        .unwrap_or("the run failed");
                    self.cause = Some(shorten(msg));
                    if let Some(class) = class_of_text(msg) {
                        self.last_error = Some(Unavailable {
                            class,
                            evidence: shorten(msg),
                        });
                        self.recovered = false;
                    }
                } else {
                    self.progress();
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

    fn gemini_text(&mut self, line: &str) {
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
            let class = class_of_text(line).unwrap_or(Availability::Unreachable);
            self.provider_error(class, line, false);
            return;
        }
        self.error_text(line);
    }

    fn aider(&mut self, line: &str) {
        if line.starts_with("Tokens:") {
            self.progress();
            return;
        }
        if let Some(rest) = line.strip_prefix("Model: ") {
            let model = rest.split_whitespace().next().unwrap_or_default();
            if !model.is_empty() {
                self.model = Some(model.to_owned());
            }
            return;
        }
        if line.starts_with("Retrying in ") {
            if let Some(last) = self.last_error.clone() {
                self.provider_error(last.class, &last.evidence, true);
            }
            return;
        }
        // Only LiteLLM's exceptions and Aider's own explanations of them:
        // the model's reply is printed here too, and may say anything.
        let litellm = line.starts_with("litellm.");
        // Aider explains an exception on the next line ("The API
        // provider's servers are down or overloaded." after a connection
        // error too): the exception's own class is the more precise.
        if line.starts_with("The API provider") && self.last_error.is_some() && !self.recovered {
            return;
        }
        let class = if (litellm && line.contains("AuthenticationError"))
            || line.starts_with("The API provider is not able to authenticate you")
        {
            Some(Availability::AuthFailed)
        } else if (litellm && line.contains("RateLimitError"))
            || line.starts_with("The API provider has rate limited you")
        {
            Some(Availability::RateLimited)
        } else if litellm
            && (line.contains("APIConnectionError")
                || line.to_lowercase().trim_end().ends_with("connection")
                || line.to_lowercase().contains("connection error"))
        {
            // LiteLLM reports a refused connection as an
            // InternalServerError whose message is "Connection error."
            // (which Aider wraps onto the next line).
            Some(Availability::Unreachable)
        } else if (litellm
            && (line.contains("InternalServerError")
                || line.contains("ServiceUnavailableError")
                || line.contains("BadGatewayError")))
            || line.starts_with("The API provider's servers are down or overloaded")
        {
            Some(Availability::Overloaded)
        } else {
            None
        };
        match class {
            // The retry line that follows counts the retry.
            Some(c) => {
                let keep = self.retries;
                self.provider_error(c, line, false);
                self.retries = keep;
            }
            None if litellm => self.cause = Some(shorten(line)),
            None => {}
        }
    }

    /// Whether the agent was found unable to work while it ran.
    pub fn unavailable(&self) -> Option<&Unavailable> {
        self.verdict.as_ref()
    }

    /// A provider error the agent ended on without recovering from it
    /// (Aider exits 0 after giving up; a run killed at its timeout while
    /// retrying): the agent could not work, whatever its exit code says.
    pub fn unresolved(&self) -> Option<&Unavailable> {
        self.verdict
            .as_ref()
            .or(self.last_error.as_ref().filter(|_| !self.recovered))
    }

    /// The agent's own last error text, if it printed one.
    pub fn cause(&self) -> Option<&str> {
        self.cause.as_deref()
    }

    /// The model the CLI said it uses.
    pub fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }

    /// Provider retries seen so far.
    pub fn retries(&self) -> u32 {
        self.retries
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(kind: AgentKind, allowed: u32, lines: &[(bool, &str)]) -> (StreamWatch, Option<usize>) {
        let mut w = StreamWatch::new(kind, allowed);
        let mut stopped_at = None;
        for (i, (err, l)) in lines.iter().enumerate() {
            if w.line(*err, l) && stopped_at.is_none() {
                stopped_at = Some(i);
            }
        }
        (w, stopped_at)
    }

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
    fn aider_auth_error_stops_even_though_aider_would_exit_0() {
        let (w, at) = feed(
            AgentKind::Aider,
            2,
            &[
                (false, "Model: openai/gpt-4o with whole edit format"),
                (
                    false,
                    "litellm.AuthenticationError: AuthenticationError: OpenAIException - Error code: 401",
                ),
                (
                    false,
                    "The API provider is not able to authenticate you. Check your API key.",
                ),
            ],
        );
        assert_eq!(at, Some(1));
        assert_eq!(
            w.unavailable().expect("stopped").class,
            Availability::AuthFailed
        );
        assert_eq!(w.model(), Some("openai/gpt-4o"));
    }

    #[test]
    fn aider_retries_then_success_recovers() {
        let (w, at) = feed(
            AgentKind::Aider,
            2,
            &[
                (
                    false,
                    "litellm.InternalServerError: InternalServerError: OpenAIException - Error code: 500",
                ),
                (false, "The API provider's servers are down or overloaded."),
                (false, "Retrying in 0.5 seconds..."),
                (false, "Tokens: 2.1k sent, 50 received."),
            ],
        );
        assert_eq!(at, None);
        assert_eq!(w.retries(), 1);
        assert!(w.unresolved().is_none());
        let (w, at) = feed(
            AgentKind::Aider,
            1,
            &[
                (
                    false,
                    "litellm.RateLimitError: RateLimitError: OpenAIException - Error code: 429",
                ),
                (false, "Retrying in 0.5 seconds..."),
                (
                    false,
                    "litellm.RateLimitError: RateLimitError: OpenAIException - Error code: 429",
                ),
                (false, "Retrying in 1.0 seconds..."),
            ],
        );
        assert_eq!(at, Some(3));
        assert_eq!(
            w.unavailable().expect("stopped").class,
            Availability::RateLimited
        );
    }

    #[test]
    fn aider_connection_errors_are_unreachable_whatever_litellm_calls_them() {
        let (w, at) = feed(
            AgentKind::Aider,
            1,
            &[
                (
                    false,
                    "litellm.InternalServerError: InternalServerError: OpenAIException - Connection ",
                ),
                (false, "error."),
                (false, "The API provider's servers are down or overloaded."),
                (false, "Retrying in 0.2 seconds..."),
                (
                    false,
                    "litellm.InternalServerError: InternalServerError: OpenAIException - Connection ",
                ),
                (false, "The API provider's servers are down or overloaded."),
                (false, "Retrying in 0.5 seconds..."),
            ],
        );
        assert_eq!(at, Some(6));
        assert_eq!(
            w.unavailable().expect("stopped").class,
            Availability::Unreachable
        );
    }

    #[test]
    fn causes_are_one_bounded_line() {
        let long = format!("error: {}", "x ".repeat(1000));
        let (w, _) = feed(AgentKind::Claude, 2, &[(true, long.as_str())]);
        let cause = w.cause().expect("cause");
        assert!(cause.chars().count() <= CAUSE_CHARS + 1);
        assert!(!cause.contains('\n'));
    }
}
