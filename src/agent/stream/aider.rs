//! What Aider prints while it runs (`--no-pretty --no-stream`), for
//! [`StreamWatch`].
//!
//! Aider calls its model through LiteLLM and, on an error LiteLLM raises,
//! prints `litellm.<Class>: <Class>: <Provider>Exception - <message>`
//! (wrapped at 80 columns, each cut line ending in a space), then for some
//! classes its own explanation ("The API provider's servers are down or
//! overloaded."), then `Retrying in 0.5 seconds...`, doubling the wait up
//! to a minute in all; after the last try it **exits 0**. Recognised, by
//! LiteLLM's class (as Aider 0.86's `exceptions.py` lists them) and then
//! by the message:
//!
//! - `AuthenticationError`: its credentials were refused; stops it at once.
//! - `RateLimitError`, `RouterRateLimitError`, `BudgetExceededError`: rate
//!   limited.
//! - `APIConnectionError`, `Timeout`, and any class whose message is
//!   "Connection error." (LiteLLM reports a refused connection as an
//!   `InternalServerError`), "Empty or invalid response from LLM endpoint"
//!   (a truncated stream) or a JSON decoding error ("Expecting value", a
//!   garbled one): unreachable.
//! - `APIError` (a gateway's 529 "Overloaded" is one), `InternalServerError`,
//!   `ServiceUnavailableError`, `BadGatewayError`,
//!   `APIResponseValidationError`, `OpenAIError`, `AzureOpenAIError`:
//!   overloaded or failing.
//!
//! Each `Retrying in` counts against `apiRetries`. Other LiteLLM errors
//! (`BadRequestError`, `NotFoundError`, `ContextWindowExceededError`) are
//! the cause, not a sign of an unavailable provider. The model's reply is
//! printed too and may say anything, so nothing else is read.

use crate::agent::availability::Availability;

use super::watch::{StreamWatch, Wrapped, class_of_text, shorten};

/// Lines Aider prints on every run (its banner, its progress).
const NOISE: &[&str] = &[
    "Warning: Input is not a terminal",
    "Aider v",
    "Main model:",
    "Weak model:",
    "Model:",
    "Git repo:",
    "Repo-map:",
    "Tokens:",
    "Cost:",
    "Retrying in ",
    "Applied edit to ",
    "Commit ",
    "Added ",
    "https://aider.chat/",
];

/// Parts of lines Aider prints on start-up that are not about the run:
/// LiteLLM fetching its price list (and failing without a network).
const NOISE_FRAGMENTS: &[&str] = &["model_prices_and_context_window.json"];

/// The class of a LiteLLM exception Aider printed (`text` is the whole,
/// joined message); `None` for one that says nothing about the provider.
fn class_of_exception(text: &str) -> Option<Availability> {
    let name = text
        .strip_prefix("litellm.")?
        .split(|c: char| c == ':' || c.is_whitespace())
        .next()
        .unwrap_or_default();
    let lower = text.to_lowercase();
    let said = |words: &[&str]| words.iter().any(|w| lower.contains(w));
    match name {
        "AuthenticationError" => return Some(Availability::AuthFailed),
        "RateLimitError" | "RouterRateLimitError" | "BudgetExceededError" => {
            return Some(Availability::RateLimited);
        }
        _ => {}
    }
    // A message cut at the end of the output ("… - Connection ") is
    // still the refused connection.
    if name == "APIConnectionError"
        || name == "Timeout"
        || lower.trim_end().ends_with("- connection")
        || said(&[
            "connection error",
            "empty or invalid response",
            "expecting value",
        ])
    {
        return Some(Availability::Unreachable);
    }
    match name {
        "APIError"
        | "InternalServerError"
        | "ServiceUnavailableError"
        | "BadGatewayError"
        | "APIResponseValidationError"
        | "OpenAIError"
        | "AzureOpenAIError" => Some(class_of_text(text).unwrap_or(Availability::Overloaded)),
        _ => None,
    }
}

/// Aider's own explanation of an exception, when it printed nothing
/// before it to classify.
fn class_of_explanation(line: &str) -> Option<Availability> {
    if line.starts_with("The API provider is not able to authenticate you") {
        Some(Availability::AuthFailed)
    } else if line.starts_with("The API provider has rate limited you") {
        Some(Availability::RateLimited)
    } else if line.starts_with("The API provider timed out") {
        Some(Availability::Unreachable)
    } else if line.starts_with("The API provider's servers are down or overloaded") {
        Some(Availability::Overloaded)
    } else {
        None
    }
}

impl StreamWatch {
    /// Whether `line` is one of Aider's banner or progress lines.
    pub(super) fn aider_noise(line: &str) -> bool {
        NOISE.iter().any(|p| line.starts_with(p))
            || NOISE_FRAGMENTS.iter().any(|f| line.contains(f))
    }

    /// One line of Aider's output, untrimmed (a wrapped line ends in a
    /// space).
    pub(super) fn aider(&mut self, raw: &str) {
        let line = raw.trim();
        let starts_anew = line.starts_with("litellm.")
            || line.starts_with("The API provider")
            || line.starts_with("Retrying in ");
        if let Some(open) = self.open.as_mut()
            && open.goes_on
            && !starts_anew
        {
            open.text.push(' ');
            open.text.push_str(line);
            open.goes_on = raw.ends_with(' ');
            let text = open.text.clone();
            self.litellm_error(&text);
            return;
        }
        self.open = None;
        if line.starts_with("Tokens:") {
            self.progress();
            return;
        }
        if let Some(rest) = line
            .strip_prefix("Model: ")
            .or_else(|| line.strip_prefix("Main model: "))
        {
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
        if line.starts_with("litellm.") {
            self.open = Some(Wrapped {
                text: line.to_owned(),
                goes_on: raw.ends_with(' '),
            });
            self.litellm_error(line);
            return;
        }
        // Aider explains an exception on the next line ("The API
        // provider's servers are down or overloaded." after a connection
        // error too): the exception's own class is the more precise.
        if line.starts_with("The API provider") && self.last_error.is_some() && !self.recovered {
            return;
        }
        if let Some(class) = class_of_explanation(line) {
            self.aider_error(class, line);
        }
    }

    /// A LiteLLM exception, whole so far: the cause, and the last error
    /// when its class says the provider failed.
    fn litellm_error(&mut self, text: &str) {
        match class_of_exception(text) {
            Some(class) => self.aider_error(class, text),
            None => self.cause = Some(shorten(text)),
        }
    }

    /// An error Aider will retry or give up on: recorded, but not counted
    /// as a retry (the `Retrying in` line that follows counts it).
    fn aider_error(&mut self, class: Availability, text: &str) {
        let keep = self.retries;
        self.provider_error(class, text, false);
        self.retries = keep;
    }
}

#[cfg(test)]
mod tests {
    use crate::agent::stream::watch::{feed, is_noise};
    use crate::agent::{AgentKind, Availability};

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
    fn aider_529_api_error_is_overloaded_and_stops_after_the_allowance() {
        // Aider 0.86.2 against a gateway answering 529 (tests/it/mock_models).
        let lines = [
            (
                false,
                "litellm.APIError: APIError: OpenAIException - Overloaded",
            ),
            (false, "Retrying in 0.2 seconds..."),
            (
                false,
                "litellm.APIError: APIError: OpenAIException - Overloaded",
            ),
            (false, "Retrying in 0.5 seconds..."),
        ];
        let (w, at) = feed(AgentKind::Aider, 1, &lines);
        assert_eq!(at, Some(3));
        let u = w.unavailable().expect("stopped");
        assert_eq!(u.class, Availability::Overloaded);
        assert_eq!(
            u.evidence,
            "litellm.APIError: APIError: OpenAIException - Overloaded"
        );
    }

    #[test]
    fn aider_wrapped_messages_are_joined_whole() {
        // Exactly as Aider wrapped them at 80 columns: each cut line ends
        // in a space.
        let (w, _) = feed(
            AgentKind::Aider,
            2,
            &[
                (
                    false,
                    "litellm.InternalServerError: InternalServerError: OpenAIException - Empty or ",
                ),
                (
                    false,
                    "invalid response from LLM endpoint. Received: ''. Check the reverse proxy or ",
                ),
                (false, "model server configuration."),
                (false, "The API provider's servers are down or overloaded."),
                (false, "Retrying in 0.2 seconds..."),
            ],
        );
        let whole = "litellm.InternalServerError: InternalServerError: OpenAIException - Empty or invalid response from LLM endpoint. Received: ''. Check the reverse proxy or model server configuration.";
        assert_eq!(w.cause(), Some(whole));
        let u = w.unresolved().expect("unavailable");
        assert_eq!(u.class, Availability::Unreachable);
        assert_eq!(u.evidence, whole);
        assert_eq!(w.retries(), 1);
    }

    #[test]
    fn aider_garbled_reply_is_unreachable() {
        let (w, _) = feed(
            AgentKind::Aider,
            2,
            &[
                (
                    false,
                    "litellm.InternalServerError: InternalServerError: OpenAIException - error - ",
                ),
                (
                    false,
                    "Expecting value: line 1 column 47 (char 46), Received response - <APIResponse ",
                ),
                (
                    false,
                    "[200 OK] type=<class 'openai.types.chat.chat_completion.ChatCompletion'>>, Type ",
                ),
                (
                    false,
                    "of response - <class 'openai._legacy_response.LegacyAPIResponse'>",
                ),
                (false, "The API provider's servers are down or overloaded."),
            ],
        );
        let cause = w.cause().expect("cause");
        assert!(cause.ends_with("LegacyAPIResponse'>"), "{cause}");
        assert_eq!(
            w.unresolved().map(|u| u.class),
            Some(Availability::Unreachable)
        );
    }

    #[test]
    fn aider_classes_by_litellm_exception() {
        for (line, class) in [
            (
                "litellm.Timeout: Timeout: OpenAIException - Request timed out.",
                Some(Availability::Unreachable),
            ),
            (
                "litellm.APIConnectionError: APIConnectionError: OpenAIException - boom",
                Some(Availability::Unreachable),
            ),
            (
                "litellm.ServiceUnavailableError: ServiceUnavailableError: OpenAIException - The server is overloaded.",
                Some(Availability::Overloaded),
            ),
            (
                "litellm.BadGatewayError: BadGatewayError: OpenAIException - Bad gateway",
                Some(Availability::Overloaded),
            ),
            (
                "litellm.BudgetExceededError: Budget has been exceeded",
                Some(Availability::RateLimited),
            ),
            (
                "litellm.NotFoundError: NotFoundError: OpenAIException - model not found",
                None,
            ),
            (
                "litellm.BadRequestError: BadRequestError: OpenAIException - bad 500 words",
                None,
            ),
        ] {
            let (w, _) = feed(AgentKind::Aider, 2, &[(false, line)]);
            assert_eq!(w.unresolved().map(|u| u.class), class, "{line}");
            assert_eq!(w.cause(), Some(line));
        }
    }

    #[test]
    fn aider_banners_are_noise_and_replies_are_not_read() {
        for banner in [
            "Warning: Input is not a terminal (fd=0).",
            "Aider v0.86.2",
            "HTTPSConnectionPool(host='raw.githubusercontent.com', port=443): Max retries exceeded with url: /BerriAI/litellm/main/model_prices_and_context_window.json",
        ] {
            assert!(is_noise(AgentKind::Aider, banner), "{banner}");
        }
        // A reply that quotes an error is the model's text, not Aider's.
        let (w, _) = feed(
            AgentKind::Aider,
            2,
            &[(false, "The server is overloaded. Error code: 529")],
        );
        assert_eq!(w.cause(), None);
        assert!(w.unresolved().is_none());
    }
}
