//! Reading an agent's output while it runs, to catch in seconds what would
//! otherwise surface only at its timeout.
//!
//! Every CLI retries a refused request on its own, with back-off, for
//! minutes, and some end as if they had worked. [`StreamWatch`] reads their
//! output line by line: a refused key stops the agent at once (no retry can
//! fix it), and rate limits, overload, server errors, an unreachable server
//! and a broken or malformed stream stop it after the agent's
//! `apiRetries`, or make it unavailable when it ends on them, so the
//! fallback agent (or the run's retry) starts within seconds. It also keeps
//! the agent's own last error text, the *cause* shown in failure reasons,
//! `status` and the next attempt's retry context.
//!
//! `watch` holds what every CLI shares (the classes of HTTP statuses and
//! error words, the retry allowance, the cause); one file per CLI holds
//! what that CLI prints: `claude`, `codex`, `gemini`, `aider`, each with
//! the lines it recognises and the banner and progress lines it prints on
//! every run, which are never a cause ([`is_noise`]).
//!
//! Lines arrive already masked (the runner masks output before anything
//! else sees it), so a cause never carries a secret.

mod aider;
mod claude;
mod codex;
mod gemini;
mod watch;

pub use watch::{StreamWatch, Unavailable, is_noise, last_error_line, model_in};
