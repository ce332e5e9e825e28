//! Finds placeholders an agent left in the lines it added.
//!
//! An agent that cannot finish a piece of work tends to say so in the code
//! rather than in its report: an upper-case to-do, fix-me or triple-x marker,
//! a Rust `todo!`/`unimplemented!` macro, or a "not implemented" stub (Python's
//! `NotImplementedError` and its kin). This module reports each added line
//! carrying one, so a gate can refuse work that only looks finished.
//!
//! Only added lines are scanned (see `diffscan`): markers already in the base
//! are not the attempt's doing. Pure: no I/O, no printing.

use std::sync::LazyLock;

use regex::Regex;

use super::diffscan::AddedLine;

/// The longest `text` a finding carries, in characters: enough to see the
/// marker in context, short enough for a one-line report.
pub const MAX_TEXT_CHARS: usize = 200;

/// What kind of placeholder a line carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlaceholderKind {
    /// The upper-case to-do marker as a whole word.
    Todo,
    /// The upper-case fix-me marker as a whole word.
    Fixme,
    /// The upper-case triple-x marker as a whole word.
    Xxx,
    /// Rust's `todo!(…)` macro.
    TodoMacro,
    /// Rust's `unimplemented!(…)` macro.
    UnimplementedMacro,
    /// "not implemented" or "not yet implemented" in any case, with or
    /// without separators: `NotImplementedError`, `E_NOT_IMPLEMENTED`.
    NotImplemented,
}

/// One added line that carries a placeholder.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PlaceholderFinding {
    /// The file, as in [`AddedLine::path`].
    pub path: String,
    /// 1-based line number in the new file.
    pub line: u32,
    /// The first placeholder on the line, by position.
    pub kind: PlaceholderKind,
    /// The trimmed line, cut to [`MAX_TEXT_CHARS`] characters.
    pub text: String,
}

/// One regex for all kinds, one named group per kind, so a line is searched
/// once and the leftmost placeholder wins.
static PLACEHOLDER: LazyLock<Regex> = LazyLock::new(|| {
    let pattern = concat!(
        // Upper-case whole words only: `\b` keeps out longer words (the
        // plural, clothing sizes, identifiers with `_`) and the missing
        // `(?i)` keeps out prose such as "a to-do list".
        r"\b(?:(?P<todo>TODO)|(?P<fixme>FIXME)|(?P<xxx>XXX))\b",
        // Rust macros take any delimiter: `m!(…)`, `m![…]`, `m!{…}`.
        r"|\b(?P<todo_macro>todo!\s*[(\[{])",
        r"|\b(?P<unimplemented_macro>unimplemented!\s*[(\[{])",
        // No word boundaries: `NotImplementedError`, `E_NOT_IMPLEMENTED`
        // and `isNotImplemented` all count. "not yet implemented" is what
        // `todo!` itself prints, so stubs that copy it count too.
        r"|(?i:(?P<not_implemented>not[ _-]?(?:yet[ _-]?)?implemented))",
    );
    Regex::new(pattern).expect("the placeholder pattern is a valid regex")
});

/// Reports every added line that carries a placeholder, in input order, one
/// finding per line (its leftmost placeholder).
pub fn scan(lines: &[AddedLine]) -> Vec<PlaceholderFinding> {
    lines
        .iter()
        .filter_map(|line| {
            let kind = find(&line.text)?;
            Some(PlaceholderFinding {
                path: line.path.clone(),
                line: line.line,
                kind,
                text: line.text.trim().chars().take(MAX_TEXT_CHARS).collect(),
            })
        })
        .collect()
}

/// The kind of the leftmost placeholder in `text`, if any.
fn find(text: &str) -> Option<PlaceholderKind> {
    let caps = PLACEHOLDER.captures(text)?;
    let kinds = [
        ("todo", PlaceholderKind::Todo),
        ("fixme", PlaceholderKind::Fixme),
        ("xxx", PlaceholderKind::Xxx),
        ("todo_macro", PlaceholderKind::TodoMacro),
        ("unimplemented_macro", PlaceholderKind::UnimplementedMacro),
        ("not_implemented", PlaceholderKind::NotImplemented),
    ];
    let kind = kinds
        .into_iter()
        .find(|(group, _)| caps.name(group).is_some())
        .map(|(_, kind)| kind);
    Some(kind.expect("every alternative of the pattern is a named group"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn added(text: &str) -> AddedLine {
        AddedLine {
            path: "src/lib.rs".to_owned(),
            line: 7,
            text: text.to_owned(),
        }
    }

    fn kind_of(text: &str) -> Option<PlaceholderKind> {
        let found = scan(&[added(text)]);
        assert!(found.len() <= 1, "one finding per line: {found:?}");
        found.first().map(|f| f.kind)
    }

    #[test]
    fn upper_case_markers_are_found_as_whole_words() {
        use PlaceholderKind::*;
        assert_eq!(kind_of("    // TODO: handle errors"), Some(Todo));
        assert_eq!(kind_of("# TODO(alice) later"), Some(Todo));
        assert_eq!(kind_of("/* FIXME */"), Some(Fixme));
        assert_eq!(kind_of("x = 1  # XXX hack"), Some(Xxx));
    }

    #[test]
    fn marker_look_alikes_are_not_found() {
        assert_eq!(kind_of("TODOS are tracked elsewhere"), None);
        assert_eq!(kind_of("sizes: S M L XXXL"), None);
        assert_eq!(kind_of("keep a to-do list; todo items go there"), None);
        assert_eq!(kind_of("let TODO_COUNT = 3;"), None);
        assert_eq!(kind_of("fixme: the Fixme label"), None);
        assert_eq!(kind_of("let xxx = 1;"), None);
    }

    #[test]
    fn rust_placeholder_macros_are_found() {
        use PlaceholderKind::*;
        assert_eq!(kind_of("    todo!()"), Some(TodoMacro));
        assert_eq!(
            kind_of("fn f() -> u8 { todo!(\"later\") }"),
            Some(TodoMacro)
        );
        assert_eq!(kind_of("let v = todo![];"), Some(TodoMacro));
        assert_eq!(
            kind_of("    unimplemented!(\"parse {}\", x)"),
            Some(UnimplementedMacro)
        );
        assert_eq!(kind_of("unimplemented! { }"), Some(UnimplementedMacro));
    }

    #[test]
    fn macro_names_without_invocation_are_not_found() {
        assert_eq!(kind_of("let todo = vec![];"), None);
        assert_eq!(kind_of("fn my_todo!() {}"), None);
        assert_eq!(kind_of("// the unimplemented branch is unreachable"), None);
        assert_eq!(kind_of("is_unimplemented!(x)"), None);
    }

    #[test]
    fn not_implemented_is_found_in_any_case_and_spelling() {
        use PlaceholderKind::*;
        assert_eq!(
            kind_of("    raise NotImplementedError"),
            Some(NotImplemented)
        );
        assert_eq!(
            kind_of("throw new Error('Not implemented yet');"),
            Some(NotImplemented)
        );
        assert_eq!(kind_of("return E_NOT_IMPLEMENTED;"), Some(NotImplemented));
        assert_eq!(kind_of("panic(\"not implemented\")"), Some(NotImplemented));
        assert_eq!(
            kind_of("bail!(\"not yet implemented\")"),
            Some(NotImplemented)
        );
        assert_eq!(kind_of("if isNotImplemented(x) {"), Some(NotImplemented));
    }

    #[test]
    fn implemented_in_other_phrases_is_not_found() {
        assert_eq!(kind_of("// implemented in terms of `fold`"), None);
        assert_eq!(kind_of("// this is now implemented"), None);
        assert_eq!(kind_of("cannot_implement(x)"), None);
        assert_eq!(kind_of("// a trait that cannot be implemented twice"), None);
        assert_eq!(kind_of("// nothing here is unimplementable"), None);
    }

    #[test]
    fn the_leftmost_placeholder_wins_and_the_line_is_reported_once() {
        let line = "  todo!(\"FIXME: not implemented\")  ";
        let found = scan(&[added(line)]);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].kind, PlaceholderKind::TodoMacro);
        assert_eq!(found[0].text, line.trim());
        assert_eq!((found[0].path.as_str(), found[0].line), ("src/lib.rs", 7));
    }

    #[test]
    fn findings_keep_input_order_and_long_lines_are_cut() {
        let long = format!("// TODO {}", "é".repeat(500));
        let lines = [
            added("fine"),
            added(&long),
            added("raise NotImplementedError"),
        ];
        let found = scan(&lines);
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].text.chars().count(), MAX_TEXT_CHARS);
        assert_eq!(found[1].kind, PlaceholderKind::NotImplemented);
    }

    #[test]
    fn kinds_serialise_in_snake_case() {
        let json = serde_json::to_string(&PlaceholderKind::UnimplementedMacro).expect("serialise");
        assert_eq!(json, "\"unimplemented_macro\"");
    }
}
