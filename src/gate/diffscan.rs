//! The lines a change adds to one file, as the content gates see them.
//!
//! Content gates judge what a change *adds*: a secret or a placeholder that
//! was already in the base is not the attempt's doing, and flagging it would
//! make every attempt on that file fail. This module turns two versions of a
//! file's bytes into those added lines, with their line numbers in the new
//! version. It is pure: the caller reads the blobs (through `store`) and
//! decides what to do with the lines.
//!
//! Lines are compared without their terminators, so a file that only gains a
//! final newline, or moves between `\n` and `\r\n`, adds no content.

use std::borrow::Cow;
use std::collections::HashSet;
use std::time::Duration;

use similar::{Algorithm, DiffOp, TextDiff};

/// How long one file's diff may take before `similar` gives up on the
/// minimal diff and approximates. An approximate diff only ever reports
/// *more* lines as added, which makes a gate stricter, never blind; and a
/// pathological file must not stall a merge queue.
pub const DIFF_TIMEOUT: Duration = Duration::from_secs(3);

/// One line added by a change, as the content gates see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddedLine {
    /// The file's path in the new tree, `/`-separated as git stores it.
    pub path: String,
    /// 1-based line number in the new file.
    pub line: u32,
    /// The line's text without its terminator, decoded lossily from UTF-8.
    pub text: String,
}

/// Computes the lines added between two versions of one file's text.
///
/// `old` is empty for a new file. Binary content (a NUL byte anywhere, the
/// rule git uses in spirit) yields no lines when it is the new version; a
/// binary old version that became text counts as empty, so every line of
/// the new text is added. Invalid UTF-8 is decoded lossily, so a secret next
/// to a stray byte is still seen.
pub fn added_lines(path: &str, old: &[u8], new: &[u8]) -> Vec<AddedLine> {
    if is_binary(new) {
        return Vec::new();
    }
    let old_text = if is_binary(old) {
        Cow::Borrowed("")
    } else {
        String::from_utf8_lossy(old)
    };
    let new_text = String::from_utf8_lossy(new);
    let old_lines: Vec<&str> = old_text.lines().collect();
    let new_lines: Vec<&str> = new_text.lines().collect();

    let line = |index: usize| AddedLine {
        path: path.to_owned(),
        // A file past u32::MAX lines is gigabytes of text; saturating keeps
        // the report usable instead of panicking on it.
        line: u32::try_from(index + 1).unwrap_or(u32::MAX),
        text: new_lines[index].to_owned(),
    };

    // Nothing to align against: skip the diff machinery for the common case
    // of a new file.
    if old_lines.is_empty() {
        return (0..new_lines.len()).map(line).collect();
    }

    // A line that appears nowhere in the other version can never be part of
    // a common subsequence, so it is added (or deleted) whatever the
    // alignment. Setting such lines aside first, as git's xdiff does, leaves
    // Myers only the lines that could match: a full rewrite then costs a
    // hash lookup per line instead of the algorithm's quadratic worst case.
    let in_old: HashSet<&str> = old_lines.iter().copied().collect();
    let in_new: HashSet<&str> = new_lines.iter().copied().collect();
    let old_kept: Vec<&str> = old_lines
        .iter()
        .copied()
        .filter(|l| in_new.contains(l))
        .collect();
    let new_kept: Vec<usize> = (0..new_lines.len())
        .filter(|&i| in_old.contains(new_lines[i]))
        .collect();
    let new_kept_text: Vec<&str> = new_kept.iter().map(|&i| new_lines[i]).collect();

    let mut is_added: Vec<bool> = new_lines.iter().map(|l| !in_old.contains(l)).collect();
    // Myers is what `git diff` uses by default, so the lines reported here
    // are the ones a reviewer sees marked `+`.
    let diff = TextDiff::configure()
        .algorithm(Algorithm::Myers)
        .timeout(DIFF_TIMEOUT)
        .diff_slices(&old_kept, &new_kept_text);
    for op in diff.ops() {
        match *op {
            DiffOp::Insert {
                new_index, new_len, ..
            }
            | DiffOp::Replace {
                new_index, new_len, ..
            } => {
                for kept in &new_kept[new_index..new_index + new_len] {
                    is_added[*kept] = true;
                }
            }
            DiffOp::Equal { .. } | DiffOp::Delete { .. } => {}
        }
    }
    (0..new_lines.len())
        .filter(|&i| is_added[i])
        .map(line)
        .collect()
}

fn is_binary(bytes: &[u8]) -> bool {
    bytes.contains(&0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(lines: &[AddedLine]) -> Vec<(u32, &str)> {
        lines.iter().map(|l| (l.line, l.text.as_str())).collect()
    }

    #[test]
    fn a_new_file_adds_every_line() {
        let lines = added_lines("src/a.rs", b"", b"one\ntwo\n\nfour");
        assert_eq!(
            texts(&lines),
            [(1, "one"), (2, "two"), (3, ""), (4, "four")]
        );
        assert!(lines.iter().all(|l| l.path == "src/a.rs"));
    }

    #[test]
    fn only_inserted_and_replaced_lines_are_reported_with_new_numbers() {
        let old = b"a\nb\nc\nd\n";
        let new = b"a\nnew\nb\nC\nd\ntail\n";
        assert_eq!(
            texts(&added_lines("f", old, new)),
            [(2, "new"), (4, "C"), (6, "tail")]
        );
    }

    #[test]
    fn repeated_lines_are_aligned_not_assumed_present() {
        // `}` already exists in the old file, yet the second one is new.
        let old = b"fn a() {\n}\n";
        let new = b"fn a() {\n}\nfn b() {\n}\n";
        assert_eq!(
            texts(&added_lines("f", old, new)),
            [(3, "fn b() {"), (4, "}")]
        );
    }

    #[test]
    fn deletions_and_unchanged_files_add_nothing() {
        assert!(added_lines("f", b"a\nb\nc\n", b"a\nc\n").is_empty());
        assert!(added_lines("f", b"a\nb\n", b"a\nb\n").is_empty());
        assert!(added_lines("f", b"a\nb\n", b"").is_empty());
    }

    #[test]
    fn line_terminators_are_not_content() {
        assert!(added_lines("f", b"a\nb", b"a\nb\n").is_empty());
        assert!(added_lines("f", b"a\nb\n", b"a\r\nb\r\n").is_empty());
        assert_eq!(
            texts(&added_lines("f", b"a\r\n", b"a\r\nb\r\n")),
            [(2, "b")]
        );
    }

    #[test]
    fn binary_new_content_yields_nothing() {
        assert!(added_lines("img.png", b"", b"\x89PNG\r\n\x1a\n\0\0secret").is_empty());
        assert!(added_lines("f", b"text\n", b"text\n\0more\n").is_empty());
    }

    #[test]
    fn binary_old_content_counts_as_empty() {
        assert_eq!(
            texts(&added_lines("f", b"\0\x01\x02", b"now text\n")),
            [(1, "now text")]
        );
    }

    #[test]
    fn invalid_utf8_is_decoded_lossily() {
        let lines = added_lines("f", b"", b"ok\nbad \xff byte\n");
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[1].text, "bad \u{fffd} byte");
    }

    #[test]
    fn a_ten_thousand_line_file_is_diffed_whole() {
        let old: String = (0..10_000).map(|i| format!("line {i}\n")).collect();
        // Scattered edits: every 100th line changes, one block is inserted.
        let mut new = String::new();
        for i in 0..10_000 {
            if i == 5_000 {
                new.push_str("inserted one\ninserted two\n");
            }
            if i % 100 == 0 {
                new.push_str(&format!("changed {i}\n"));
            } else {
                new.push_str(&format!("line {i}\n"));
            }
        }
        let lines = added_lines("big.txt", old.as_bytes(), new.as_bytes());
        assert_eq!(lines.len(), 102);
        assert!(
            lines
                .iter()
                .all(|l| { l.text.starts_with("changed ") || l.text.starts_with("inserted ") })
        );
        let inserted = lines
            .iter()
            .find(|l| l.text == "inserted one")
            .expect("the inserted block is reported");
        assert_eq!(inserted.line, 5_001);
    }

    #[test]
    fn a_ten_thousand_line_rewrite_reports_every_line() {
        // Nothing in common: the worst case for a plain Myers diff.
        let old: String = (0..10_000).map(|i| format!("old {i}\n")).collect();
        let new: String = (0..10_000).map(|i| format!("new {i}\n")).collect();
        let lines = added_lines("big.txt", old.as_bytes(), new.as_bytes());
        assert_eq!(lines.len(), 10_000);
        assert_eq!(lines[9_999].line, 10_000);
    }
}
