//! Errors stay typed up to the command line's edge (ARCHITECTURE.md, the
//! `cli` layer): below `cli`, an error is a situation with its fields, and
//! what the user can do about it (the `hint:` line) is chosen in
//! `src/cli/error.rs` by matching its type. Two checks read the source as
//! Rust (`syn`, so comments, `#[cfg(test)]` items and strings inside
//! macros and attributes are what they are): no string literal below
//! `cli` holds a `hint:` line, and no type below `cli` is
//! `Result<_, String>`. Then, through the real binary, a hint chosen at
//! the edge reaches the user for an error of each layer that used to
//! write its own (the sandbox's, which needs bubblewrap to be met by a
//! run, is `a_new_users_first_hour_with_everything_under_tmp` in
//! `first_hour.rs`, and a unit test in `src/cli/error.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

use crate::common::{self, Sandbox, item_attrs, project, stderr, test_only};

/// What one file's product code holds that only the edge may.
#[derive(Debug, Default)]
struct Findings {
    /// Lines of string literals holding a `hint:` line.
    hints: Vec<usize>,
    /// Lines of `Result<_, String>` types.
    string_results: Vec<usize>,
}

/// A hint line in a string's value: `hint:` after a line break.
fn holds_hint(value: &str) -> bool {
    value
        .lines()
        .skip(1)
        .any(|l| l.trim_start().starts_with("hint:"))
}

impl Findings {
    fn literal(&mut self, value: &str, line: usize) {
        if holds_hint(value) {
            self.hints.push(line);
        }
    }

    /// String literals among tokens a macro or an attribute holds.
    fn tokens(&mut self, tokens: TokenStream) {
        for tree in tokens {
            match tree {
                TokenTree::Group(g) => self.tokens(g.stream()),
                TokenTree::Literal(l) => {
                    let line = l.span().start().line;
                    if let Ok(s) = syn::parse2::<syn::LitStr>(TokenTree::Literal(l).into()) {
                        self.literal(&s.value(), line);
                    }
                }
                _ => {}
            }
        }
    }
}

impl<'ast> Visit<'ast> for Findings {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if test_only(item_attrs(item)) {
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if test_only(&f.attrs) {
            return;
        }
        syn::visit::visit_impl_item_fn(self, f);
    }

    fn visit_lit_str(&mut self, s: &'ast syn::LitStr) {
        self.literal(&s.value(), s.span().start().line);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.tokens(m.tokens.clone());
        syn::visit::visit_macro(self, m);
    }

    fn visit_meta_list(&mut self, m: &'ast syn::MetaList) {
        self.tokens(m.tokens.clone());
        syn::visit::visit_meta_list(self, m);
    }

    fn visit_type_path(&mut self, t: &'ast syn::TypePath) {
        if let Some(last) = t.path.segments.last()
            && last.ident == "Result"
            && let syn::PathArguments::AngleBracketed(args) = &last.arguments
        {
            let types: Vec<&syn::Type> = args
                .args
                .iter()
                .filter_map(|a| match a {
                    syn::GenericArgument::Type(t) => Some(t),
                    _ => None,
                })
                .collect();
            if let [_, syn::Type::Path(err)] = types.as_slice()
                && err.qself.is_none()
                && err
                    .path
                    .segments
                    .last()
                    .is_some_and(|s| s.ident == "String")
            {
                self.string_results.push(last.ident.span().start().line);
            }
        }
        syn::visit::visit_type_path(self, t);
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every library file under `src` (the `cli` folder and `main.rs` are the
/// edge), by its path under `src`, with what it holds.
fn findings(src: &Path) -> BTreeMap<String, Findings> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut out = BTreeMap::new();
    for file in files {
        let rel = file
            .strip_prefix(src)
            .expect("under src")
            .to_string_lossy()
            .replace('\\', "/");
        if rel.starts_with("cli/") || rel == "main.rs" {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("read");
        let parsed = syn::parse_file(&text)
            .unwrap_or_else(|e| panic!("{} does not parse: {e}", file.display()));
        let mut found = Findings::default();
        found.visit_file(&parsed);
        out.insert(rel, found);
    }
    out
}

/// Every breach of the rule in the crate at `src`, one line each.
fn breaches(src: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for (file, found) in findings(src) {
        for line in &found.hints {
            out.push(format!(
                "src/{file}:{line}: a `hint:` line below the CLI; match the error's type in src/cli/error.rs instead"
            ));
        }
        for line in &found.string_results {
            out.push(format!(
                "src/{file}:{line}: `Result<_, String>` below the CLI; give the error a type of its situations"
            ));
        }
    }
    out
}

#[test]
fn below_the_cli_errors_are_typed_and_carry_no_hint_lines() {
    let src = common::repo_root().join("src");
    let found = breaches(&src);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// A made-up crate under a temp folder: `files` (path under `src`, text).
fn crate_of(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for (path, text) in files {
        let file = dir.path().join("src").join(path);
        std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
        std::fs::write(file, text).expect("write");
    }
    dir
}

/// Each way a hint or a text error was written below the edge, planted in
/// a made-up crate: every one is found, and what the edge and tests may
/// hold is not.
#[test]
fn the_check_finds_hints_and_string_errors_wherever_they_are_written() {
    let planted: &[(&str, &str)] = &[
        (
            "store/a.rs",
            "#[derive(Debug, thiserror::Error)]\npub enum E {\n    #[error(\"locked\\nhint: remove it\")]\n    Locked,\n}\n",
        ),
        (
            "store/b.rs",
            "pub fn f(x: u8) -> String { format!(\"bad {x}\\nhint: fix it\") }\n",
        ),
        (
            "plan/c.rs",
            "pub fn g() -> &'static str { \"bad\\n  hint: fix it\" }\n",
        ),
        ("plan/d.rs", "pub fn h() -> Result<(), String> { Ok(()) }\n"),
        (
            "merge/e.rs",
            "pub fn i() -> std::result::Result<Result<u8, String>, ()> { Ok(Ok(1)) }\n",
        ),
        (
            "merge/f.rs",
            "pub type Landing = (u8, Result<u8, String>);\nstruct S { r: Vec<Result<(), std::string::String>> }\n",
        ),
        (
            "merge/g.rs",
            "impl S { pub fn j(&self) -> Result<(), String> { Ok(()) } }\n",
        ),
    ];
    let dir = crate_of(planted);
    let found = breaches(&dir.path().join("src"));
    for (file, _) in planted {
        assert!(
            found.iter().any(|b| b.starts_with(&format!("src/{file}:"))),
            "{file} was not found: {found:#?}"
        );
    }
    assert_eq!(found.len(), 8, "{found:#?}");
    let allowed: &[(&str, &str)] = &[
        (
            "cli/error.rs",
            "pub fn k() -> Result<(), String> { Err(\"x\\nhint: y\".into()) }\n",
        ),
        (
            "store/h.rs",
            "// \"x\\nhint: y\" Result<(), String>\npub fn l() -> Result<(), std::io::Error> { Ok(()) }\n#[cfg(test)]\nmod tests { fn t() -> Result<(), String> { assert!(\"x\\nhint: y\".contains(\"hint: \")); Ok(()) } }\n",
        ),
        (
            "store/i.rs",
            "/// A text that says `hint: no`.\npub fn m() -> &'static str { \"hint: on its first line is a word, not a hint line\" }\n",
        ),
    ];
    let dir = crate_of(allowed);
    let found = breaches(&dir.path().join("src"));
    assert!(found.is_empty(), "{found:#?}");
}

/// The hint lines a failed command printed.
fn hints(err: &str) -> Vec<&str> {
    err.lines().filter(|l| l.starts_with("hint: ")).collect()
}

#[test]
fn a_store_error_gets_its_hint_at_the_edge() {
    let mut sb = Sandbox::new();
    let p = project(&mut sb, &[("a", &[], "true")], None);
    sb.git(&p.repo, &["config", "orch.writerId", "not a writer id"]);
    let out = sb.orch(&p.repo, &["debug", "append", "--label", "x"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("error: orch.writerId in the repository config is not usable"),
        "{err}"
    );
    assert_eq!(
        hints(&err),
        [
            "hint: remove it with `git config --unset orch.writerId`; a new one is made on the next write"
        ],
        "{err}"
    );
}

#[test]
fn a_plan_error_gets_its_hint_at_the_edge() {
    let sb = Sandbox::new();
    let repo = sb.repo("r");
    let plan = serde_json::json!({"version": 1, "id": "p", "instruction": "Do it",
        "subtasks": [{"id": "a", "titel": "Task a", "owned_globs": ["src/a/**"],
        "deliverable": "a done", "verification": "true"}]});
    let file = sb.path().join("plan.json");
    std::fs::write(&file, plan.to_string()).expect("plan");
    let out = sb.orch(&repo, &["plan", "check", &file.to_string_lossy()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("unknown field `titel`"), "{err}");
    assert_eq!(
        hints(&err),
        [
            "hint: did you mean `title`? The format is in docs/plans.md; `git orch plan schema` prints its JSON Schema"
        ],
        "{err}"
    );
}

#[test]
fn an_approval_verdict_gets_its_hint_at_the_edge() {
    let mut sb = Sandbox::new();
    let p = project(&mut sb, &[("a", &[], "true")], None);
    let plan = serde_json::json!({"version": 1, "id": "proj", "instruction": "Do other work",
        "subtasks": [{"id": "a", "title": "Task a", "owned_globs": ["src/a/**"],
        "deliverable": "a done", "verification": "true"}]});
    let file = sb.path().join("plan2.json");
    std::fs::write(&file, plan.to_string()).expect("plan");
    sb.orch_ok(&p.repo, &["plan", "add", &file.to_string_lossy()]);
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("error: refusing to run: the approval of plan proj"),
        "{err}"
    );
    assert_eq!(
        hints(&err),
        ["hint: review the change with `git orch plan diff proj`, then `git orch approve proj`"],
        "{err}"
    );
}

#[test]
fn a_refused_landing_gets_its_hint_at_the_edge() {
    let mut sb = Sandbox::new();
    let p = project(&mut sb, &[("a", &[], "true")], None);
    let ident = ["-c", "user.name=T", "-c", "user.email=t@example.com"];
    sb.git(&p.repo, &["checkout", "-q", "-b", "hotfix"]);
    std::fs::write(p.repo.join("src/a/fix"), "fixed\n").expect("write");
    sb.git(&p.repo, &["add", "src/a/fix"]);
    sb.git(&p.repo, &[&ident[..], &["commit", "-qm", "fix"]].concat());
    sb.git(&p.repo, &["checkout", "-q", "-"]);
    let before = sb.git(&p.repo, &["rev-parse", "HEAD"]);
    let out = sb.orch(&p.repo, &["land", "hotfix"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("error: branch hotfix is not approved for landing"),
        "{err}"
    );
    assert_eq!(
        hints(&err),
        ["hint: review it, then `git orch approve --branch hotfix`"],
        "{err}"
    );
    assert_eq!(sb.git(&p.repo, &["rev-parse", "HEAD"]), before);
}

#[test]
fn an_fsck_error_gets_its_hint_at_the_edge() {
    let sb = Sandbox::new();
    let repo = sb.repo("r");
    sb.orch_ok(&repo, &["debug", "append", "--label", "x"]);
    let out = sb.orch(&repo, &["fsck", "--accept-rewrite", "0123456789ab:7"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("error: fsck finds no rewrite of writer 0123456789ab's log at seq 7; nothing was recorded"),
        "{err}"
    );
    assert_eq!(
        hints(&err),
        ["hint: `git orch fsck` lists what it finds"],
        "{err}"
    );
}
