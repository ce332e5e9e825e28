//! Masking output as it streams: every line an agent or gate prints passes
//! through here before it reaches a log file, an event or a note.
//!
//! [`super::secrets::mask`] works on whole texts; a stream arrives line by
//! line, and a private key spans many lines. [`line_filter`] keeps that one
//! bit of state (inside a key block or not) between lines.

use std::sync::{Arc, Mutex};

use super::secrets::{MASK, mask};

/// A stateful per-line filter that masks secrets, for process output.
pub fn line_filter() -> Arc<dyn Fn(&str) -> String + Send + Sync> {
    let in_key = Mutex::new(false);
    Arc::new(move |line: &str| {
        let line = &strip_terminal(line);
        let mut inside = in_key.lock().expect("mask state lock is never poisoned");
        let is_begin = line.contains("-----BEGIN") && line.contains("PRIVATE KEY");
        let is_end = line.contains("-----END") && line.contains("PRIVATE KEY");
        if *inside {
            if is_end {
                *inside = false;
                return line.trim().to_owned();
            }
            return MASK.to_owned();
        }
        if is_begin && !is_end {
            *inside = true;
            return line.trim().to_owned();
        }
        mask(line)
    })
}

/// `line` without terminal control sequences: colours and cursor moves
/// (`ESC [ … final`), titles and links (`ESC ] … BEL` or `ESC ] … ESC \`),
/// other escapes and control characters (tabs stay). What a tool prints
/// for a terminal is stored, shown to an agent and written to notes as
/// plain text.
pub fn strip_terminal(line: &str) -> std::borrow::Cow<'_, str> {
    if !line.chars().any(|c| c.is_control() && c != '\t') {
        return std::borrow::Cow::Borrowed(line);
    }
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.next() {
                Some('[') => {
                    // Parameters and intermediates, then one final byte.
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
                Some(']' | 'P' | '_' | '^') => {
                    // A string: up to BEL or ESC \.
                    while let Some(c) = chars.next() {
                        if c == '\u{7}' {
                            break;
                        }
                        if c == '\u{1b}' {
                            if chars.peek() == Some(&'\\') {
                                chars.next();
                            }
                            break;
                        }
                    }
                }
                _ => {}
            },
            '\u{9b}' => {
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            '\t' => out.push('\t'),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Masks a whole text (a tail, a message) the same way.
pub fn mask_text(text: &str) -> String {
    let f = line_filter();
    let mut out: Vec<String> = text.lines().map(|l| f(l)).collect();
    if text.ends_with('\n') {
        out.push(String::new());
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_escapes_are_stripped() {
        let cases = [
            ("\u{1b}[1;31merror\u{1b}[0m: bad", "error: bad"),
            ("\u{1b}]0;title\u{7}text", "text"),
            ("\u{1b}]8;;http://x\u{1b}\\link\u{1b}]8;;\u{1b}\\", "link"),
            ("a\tb\rc", "a\tbc"),
            ("\u{1b}[2K\u{1b}[1Gprogress", "progress"),
            ("plain", "plain"),
        ];
        for (input, want) in cases {
            assert_eq!(strip_terminal(input), want, "{input:?}");
        }
        assert_eq!(mask_text("\u{1b}[32mok\u{1b}[0m\n"), "ok\n");
    }

    #[test]
    fn key_blocks_are_masked_across_lines() {
        let body = "MIIEowIBAAKCAQEAx".repeat(3);
        let text = format!(
            "before\n-----BEGIN RSA PRIVATE KEY-----\n{body}\n{body}\n-----END RSA PRIVATE KEY-----\nafter\n"
        );
        let out = mask_text(&text);
        assert!(!out.contains(&body), "{out}");
        assert!(
            out.starts_with("before\n") && out.ends_with("after\n"),
            "{out}"
        );
    }

    #[test]
    fn tokens_are_masked_per_line() {
        let token = format!("ghp_{}", "a1B2".repeat(9));
        let out = mask_text(&format!("using {token} now"));
        assert!(!out.contains(&token[4..]), "{out}");
    }
}
