//! The watch itself: what every CLI's output shares (the classes of HTTP
//! statuses and error words, the retry allowance, the cause, the banners
//! that are never one). What each CLI prints is read by its own file
//! beside this one, as methods of [`StreamWatch`].

use serde_json::Value;

use crate::agent::availability::{Availability, standing_alone};
use crate::agent::kind::AgentKind;

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
    pub(super) kind: AgentKind,
    pub(super) allowed_retries: u32,
    pub(super) retries: u32,
    /// Decided during the run: stop the agent.
    pub(super) verdict: Option<Unavailable>,
    /// The last provider error seen, and whether the agent made progress
    /// (a reply, a finished turn) after it.
    pub(super) last_error: Option<Unavailable>,
    pub(super) recovered: bool,
    /// The agent's own last error text.
    pub(super) cause: Option<String>,
    pub(super) model: Option<String>,
    /// A file the CLI wrote its error report to (Gemini's "Full report
    /// available at: …"), as it named it: inside the sandbox it may be
    /// gone once the agent ends.
    pub(super) report: Option<String>,
    /// An error message the CLI wrapped over several lines that may go on
    /// (Aider wraps at 80 columns): the text so far.
    pub(super) open: Option<Wrapped>,
}

/// An error message wrapped over lines, joined so far.
#[derive(Debug, Clone)]
pub(super) struct Wrapped {
    pub(super) text: String,
    /// The last line ended where the terminal width cut it (with a space),
    /// so the next line goes on with the message.
    pub(super) goes_on: bool,
}

/// The HTTP status a number stands for, as a class.
pub(super) fn class_of_status(status: u64) -> Option<Availability> {
    match status {
        401 | 403 => Some(Availability::AuthFailed),
        429 => Some(Availability::RateLimited),
        500..=599 => Some(Availability::Overloaded),
        _ => None,
    }
}

/// The class a free-text error message stands for.
pub(super) fn class_of_text(text: &str) -> Option<Availability> {
    let t = text.to_lowercase();
    // A status code counts only standing alone: the mock server's port
    // `34401` in a URL is no 401.
    let any = |words: &[&str]| {
        words.iter().any(|w| {
            if w.bytes().all(|b| b.is_ascii_digit()) {
                standing_alone(&t, w).next().is_some()
            } else {
                t.contains(w)
            }
        })
    };
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
        "request timed out",
        // A stream cut short or garbled on the way (a gateway's fault as
        // often as the provider's): the CLIs' words for it.
        "empty or malformed response",
        "empty or invalid response",
        "stream ended without a finish reason",
        "stream closed before",
        "in json at position",
    ]) {
        return Some(Availability::Unreachable);
    }
    None
}

/// `text` cut to [`CAUSE_CHARS`] on one line.
pub(super) fn shorten(text: &str) -> String {
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
            report: None,
            open: None,
        }
    }

    /// Reads one output line (`stderr` says from which stream); true when
    /// the agent should be stopped now.
    pub fn line(&mut self, stderr: bool, raw: &str) -> bool {
        if self.verdict.is_some() {
            return true;
        }
        let line = raw.trim();
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
            (AgentKind::Aider, _) => self.aider(raw),
            (AgentKind::Claude | AgentKind::Codex, None) if stderr => self.error_text(line),
            _ => {}
        }
        self.verdict.is_some()
    }

    /// A provider error: a refused key stops at once; others count as a
    /// retry when `retrying`, and stop once over the allowance.
    pub(super) fn provider_error(&mut self, class: Availability, evidence: &str, retrying: bool) {
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
    pub(super) fn error_text(&mut self, text: &str) {
        if is_noise(self.kind, text) {
            return;
        }
        let lower = text.to_lowercase();
        if lower.contains("error") || lower.contains("fail") || lower.contains("refuse") {
            self.cause = Some(shorten(text));
        }
    }

    pub(super) fn progress(&mut self) {
        self.recovered = true;
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

    /// The file the CLI said holds a full report of its last error, as it
    /// named it; whoever knows where the agent ran decides whether that
    /// path means anything outside the sandbox.
    pub fn report(&self) -> Option<&str> {
        self.report.as_deref()
    }
}

/// Whether `line` is one of the banners and progress lines `kind`'s CLI
/// prints on every run ("Reading additional input from stdin...",
/// "Ripgrep is not available…", "Input is not a terminal"): never an
/// agent's error, so never its cause.
pub fn is_noise(kind: AgentKind, line: &str) -> bool {
    let line = line.trim();
    match kind {
        AgentKind::Claude | AgentKind::Fake => StreamWatch::claude_noise(line),
        AgentKind::Codex => StreamWatch::codex_noise(line),
        AgentKind::Gemini => StreamWatch::gemini_noise(line),
        AgentKind::Aider => StreamWatch::aider_noise(line),
        AgentKind::Command => false,
    }
}

/// Words that make a line of free output look like an error.
const ERROR_WORDS: [&str; 12] = [
    "error",
    "fail",
    "refuse",
    "denied",
    "exception",
    "fatal",
    "panic",
    "cannot",
    "can't",
    "unable",
    "not found",
    "invalid",
];

/// The last meaningful line of an agent's output `tail` (stdout and
/// stderr), for the cause when its stream watch kept none: not blank, not
/// a JSON event, not one of its CLI's banners ([`is_noise`]), not a stack
/// frame. With `errors_only` (the agent was stopped at its timeout, so its
/// last line is whatever it was doing then) only a line that reads like an
/// error counts. Whole, on one line, bounded like every cause.
pub fn last_error_line(kind: AgentKind, tail: &str, errors_only: bool) -> Option<String> {
    tail.lines()
        .rev()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('{') && !l.starts_with("at "))
        .filter(|l| !is_noise(kind, l))
        .find(|l| {
            let lower = l.to_lowercase();
            !errors_only || ERROR_WORDS.iter().any(|w| lower.contains(w))
        })
        .map(shorten)
}

/// Feeds `lines` (from stderr?, text) to a new watch; the watch, and the
/// index of the line that stopped the agent.
#[cfg(test)]
pub(super) fn feed(
    kind: AgentKind,
    allowed: u32,
    lines: &[(bool, &str)],
) -> (StreamWatch, Option<usize>) {
    let mut w = StreamWatch::new(kind, allowed);
    let mut stopped_at = None;
    for (i, (err, l)) in lines.iter().enumerate() {
        if w.line(*err, l) && stopped_at.is_none() {
            stopped_at = Some(i);
        }
    }
    (w, stopped_at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_are_one_bounded_line() {
        let long = format!("error: {}", "x ".repeat(1000));
        let (w, _) = feed(AgentKind::Claude, 2, &[(true, long.as_str())]);
        let cause = w.cause().expect("cause");
        assert!(cause.chars().count() <= CAUSE_CHARS + 1);
        assert!(!cause.contains('\n'));
    }

    /// Codex names the URL it retried, and a local mock server's port
    /// may hold a status code's digits: that made an overload a refusal
    /// of credentials.
    #[test]
    fn a_status_code_counts_only_standing_alone() {
        let text = "Reconnecting... 1/1 (unexpected status 529 <unknown status code>: Overloaded, url: http://127.0.0.1:34401/v1/responses)";
        assert_eq!(class_of_text(text), Some(Availability::Overloaded));
        assert_eq!(
            class_of_text("connection refused, url: http://127.0.0.1:54290/"),
            Some(Availability::Unreachable)
        );
        assert_eq!(class_of_text("request 14290 failed: nothing"), None);
        assert_eq!(
            class_of_text("unexpected status 401 Unauthorized"),
            Some(Availability::AuthFailed)
        );
        assert_eq!(
            class_of_text("HTTP 429: slow down"),
            Some(Availability::RateLimited)
        );
    }
}
