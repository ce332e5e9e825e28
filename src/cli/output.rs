//! Rendering helpers shared by commands: stdout that tolerates a closed
//! pipe and fails loudly on any other write error, error and status lines
//! on stderr, colour only where wanted, and time formatting without a date
//! library.

use std::io::{IsTerminal, Write};

/// The first error writing stdout met, other than a closed pipe: the
/// command's output is incomplete, so `main` exits 1 with it.
static WRITE_ERROR: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

fn record_write_error(e: &std::io::Error) {
    let mut slot = WRITE_ERROR.lock().unwrap_or_else(|p| p.into_inner());
    if slot.is_none() {
        *slot = Some(e.to_string());
    }
}

/// Flushes stdout and returns the write error that cut the output short,
/// if one did (a closed pipe is none).
pub fn take_write_error() -> Option<String> {
    if let Err(e) = std::io::stdout().lock().flush()
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        record_write_error(&e);
    }
    WRITE_ERROR.lock().unwrap_or_else(|p| p.into_inner()).take()
}

/// Writes data lines to stdout. A closed pipe (`git orch log | head`) is not
/// an error: the command stops writing and still exits 0. Any other write
/// error (a full disk) also stops the writing, and makes the command exit 1
/// saying so (see [`take_write_error`]).
pub struct Out {
    inner: std::io::StdoutLock<'static>,
    closed: bool,
}

impl Default for Out {
    fn default() -> Self {
        Self::new()
    }
}

impl Out {
    pub fn new() -> Self {
        Self {
            inner: std::io::stdout().lock(),
            closed: false,
        }
    }

    /// Writes one line ([`clean`]ed); returns false once the reader has
    /// gone away.
    pub fn line(&mut self, s: &str) -> bool {
        self.raw(&clean(s))
    }

    /// Writes one line as it is: for text git-orch styled itself (bold,
    /// colour) around parts it [`clean`]ed.
    pub fn raw(&mut self, s: &str) -> bool {
        if self.closed {
            return false;
        }
        if let Err(e) = writeln!(self.inner, "{s}") {
            if e.kind() != std::io::ErrorKind::BrokenPipe {
                record_write_error(&e);
            }
            self.closed = true;
            return false;
        }
        true
    }

    /// Flushes; used by `--follow` between polls.
    pub fn flush(&mut self) -> bool {
        if self.closed {
            return false;
        }
        if let Err(e) = self.inner.flush() {
            if e.kind() != std::io::ErrorKind::BrokenPipe {
                record_write_error(&e);
            }
            self.closed = true;
        }
        !self.closed
    }

    /// Whether the reader has gone away.
    pub fn is_closed(&self) -> bool {
        self.closed
    }
}

/// `text` made safe for a terminal: every control character (an escape
/// sequence's ESC, a bell, a carriage return that would overwrite the
/// line, C1 controls) and every bidirectional override is written as a
/// visible `\u{..}` escape; newlines and tabs stay. Agents, gate commands
/// and other clones write file names, reasons and outputs that reach
/// these lines: none of them may move the cursor, retitle the window or
/// hide text.
pub fn clean(text: &str) -> std::borrow::Cow<'_, str> {
    let hostile = |c: char| {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}')
    };
    if !text.chars().any(hostile) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if hostile(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Whether `NO_COLOR` asks for no colour: set and not empty (no-color.org).
pub fn no_color() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
}

/// Whether stderr gets colour: a terminal, and no `NO_COLOR`.
pub fn colour_stderr() -> bool {
    std::io::stderr().is_terminal() && !no_color()
}

/// Prints a status line ([`clean`]ed) to stderr.
pub fn status(s: &str) {
    let _ = writeln!(std::io::stderr(), "{}", clean(s));
}

/// Prints an error: the first line after `error:`, further lines as given
/// (they carry `hint:` and detail lines).
pub fn print_error(message: &str) {
    let mut lines = message.lines();
    let first = lines.next().unwrap_or("failed");
    let (red, reset) = if colour_stderr() {
        ("\x1b[31m", "\x1b[0m")
    } else {
        ("", "")
    };
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{red}error:{reset} {}", clean(first));
    for l in lines {
        let _ = writeln!(err, "{}", clean(l));
    }
}

/// Formats milliseconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn format_time(ms: i64) -> String {
    crate::clock::utc_text(ms)
}

/// Formats a duration in seconds as `1h02m`, `3m04s` or `5s`.
pub fn format_duration(secs: u64) -> String {
    crate::clock::duration_text(secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(format_time(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_time(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(format_time(1_795_000_000_123), "2026-11-18T11:06:40Z");
    }

    #[test]
    fn formats_durations() {
        assert_eq!(format_duration(5), "5s");
        assert_eq!(format_duration(184), "3m04s");
        assert_eq!(format_duration(3720), "1h02m");
    }
}
