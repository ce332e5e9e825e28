//! The module layering of STYLE.md, checked by reading the source: each
//! top-level module only refers to modules of lower layers, only `store`
//! touches gix, only `process` starts programs, and only `cli` prints.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Layer of each top-level module; a module may use strictly lower layers
/// (and itself).
fn layers() -> BTreeMap<&'static str, u8> {
    BTreeMap::from([
        ("process", 0),
        ("ids", 0),
        ("failpoint", 0),
        ("clock", 0),
        ("event", 1),
        ("store", 2),
        ("plan", 3),
        ("agent", 3),
        ("config", 4),
        ("approval", 5),
        ("state", 5),
        ("sandbox", 5),
        ("preflight", 6),
        ("launch", 6),
        ("gate", 7),
        ("run", 8),
        ("lead", 8),
        ("merge", 9),
        ("hooks", 10),
        ("worker", 10),
        ("demo", 11),
        ("fsck", 11),
        ("cli", 12),
    ])
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

/// The top-level module a file belongs to (`src/store/log.rs` → `store`).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).expect("under src");
    let first = rel.components().next().expect("component");
    first
        .as_os_str()
        .to_string_lossy()
        .trim_end_matches(".rs")
        .to_owned()
}

/// Code without `//` comments, so doc text naming modules does not count.
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().filter_map(|(i, l)| {
        let code = l.split("//").next().unwrap_or("");
        (!code.trim().is_empty()).then_some((i + 1, code))
    })
}

/// The paths a piece of code names: every `use` tree expanded
/// (`use crate::{a::b, c}` gives `crate::a::b` and `crate::c`, however the
/// tree is laid out over lines), then every path written inline
/// (`crate::a::b`, `super::x`, `self::y`, or `child::z` for a module the
/// file declares with `mod child;`). Each path is its segments.
fn named_paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = String::new();
    let mut text = code;
    while let Some(at) = find_word(text, "use") {
        rest.push_str(&text[..at]);
        let after = &text[at + 3..];
        let Some(end) = after.find(';') else {
            text = after;
            continue;
        };
        for tree in expand_use_tree(&after[..end]) {
            out.push(segments(&tree));
        }
        text = &after[end + 1..];
    }
    rest.push_str(text);
    let children = declared_children(code);
    let idents = |s: &str| -> Vec<(usize, String)> {
        let mut found = Vec::new();
        let bytes: Vec<char> = s.chars().collect();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i].is_alphanumeric() || bytes[i] == '_' {
                let start = i;
                while i < bytes.len() && (bytes[i].is_alphanumeric() || bytes[i] == '_') {
                    i += 1;
                }
                let before = start.checked_sub(1).map(|j| bytes[j]);
                let word: String = bytes[start..i].iter().collect();
                // The start of a path, not a segment in the middle of one.
                if before != Some(':')
                    && bytes.get(i) == Some(&':')
                    && bytes.get(i + 1) == Some(&':')
                {
                    found.push((start, word));
                }
            } else {
                i += 1;
            }
        }
        found
    };
    let chars: Vec<char> = rest.chars().collect();
    for (start, word) in idents(&rest) {
        if !(word == "crate" || word == "super" || word == "self" || children.contains(&word)) {
            continue;
        }
        let path: String = chars[start..]
            .iter()
            .take_while(|c| c.is_alphanumeric() || **c == '_' || **c == ':')
            .collect();
        out.push(segments(&path));
    }
    out
}

/// Where `word` stands alone in `text` (not inside another identifier).
fn find_word(text: &str, word: &str) -> Option<usize> {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut from = 0;
    while let Some(i) = text[from..].find(word) {
        let at = from + i;
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        if !before.is_some_and(is_ident) && after.is_some_and(char::is_whitespace) {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// `a::{b, c::{d, e}}` → `a::b`, `a::c::d`, `a::c::e`.
fn expand_use_tree(tree: &str) -> Vec<String> {
    let tree: String = tree
        .chars()
        .filter(|c| !c.is_whitespace() || *c == ' ')
        .collect();
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        return vec![tree.to_owned()];
    };
    let close = tree.rfind('}').unwrap_or(tree.len());
    let prefix = &tree[..open];
    let mut items = Vec::new();
    let (mut depth, mut current) = (0, String::new());
    for c in tree[open + 1..close].chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    items.push(current);
    items
        .iter()
        .filter(|i| !i.trim().is_empty())
        .flat_map(|i| expand_use_tree(i))
        .map(|i| format!("{prefix}{i}"))
        .collect()
}

/// `crate::store::log::Thing as Other` → `["crate", "store", "log", "Thing"]`.
fn segments(path: &str) -> Vec<String> {
    path.split("::")
        .map(|s| s.split(" as ").next().unwrap_or("").trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

/// The modules a file declares with `mod name;`.
fn declared_children(code: &str) -> Vec<String> {
    code.lines()
        .filter_map(|l| {
            let l = l.trim();
            let l = l.strip_prefix("pub ").unwrap_or(l);
            let l = l.strip_prefix("pub(crate) ").unwrap_or(l);
            l.strip_prefix("mod ")?
                .strip_suffix(';')
                .map(|n| n.trim().to_owned())
        })
        .collect()
}

/// The product code of a file: comments and the `#[cfg(test)]` module
/// (whose `use super::*` names the file itself) left out.
fn product_code(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or("");
    let code = code_lines(text)
        .map(|(_, l)| l)
        .collect::<Vec<_>>()
        .join("\n");
    without_strings(&code)
}

/// `code` with the contents of its string literals (plain and raw) blanked,
/// so a message saying "use --force; …" is not read as an import.
fn without_strings(code: &str) -> String {
    let chars: Vec<char> = code.chars().collect();
    let mut out = String::with_capacity(code.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' && chars.get(i + 1) == Some(&'"') && chars.get(i + 2) == Some(&'\'') {
            out.push_str("' '");
            i += 3;
        } else if c == 'r' && matches!(chars.get(i + 1), Some('"' | '#')) {
            let hashes = chars[i + 1..].iter().take_while(|c| **c == '#').count();
            if chars.get(i + 1 + hashes) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            let close: String = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            let body_start = i + 2 + hashes;
            let rest: String = chars[body_start..].iter().collect();
            let len = rest
                .find(&close)
                .map_or(rest.chars().count(), |b| rest[..b].chars().count());
            out.push_str("\"\"");
            i = body_start + len + close.chars().count();
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            out.push_str("\"\"");
            i += 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// The module path of a file under `src` (`store/log.rs` → `[store, log]`,
/// `store/mod.rs` → `[store]`, `lib.rs` → `[]`).
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file
        .strip_prefix(src)
        .expect("under src")
        .with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts == ["lib"] || parts == ["main"] {
        parts.clear();
    }
    parts
}

/// The absolute module path a path written in module `own` names, or
/// `None` for paths outside the crate (`std::`, `gix::`).
fn absolute(own: &[String], path: &[String], children: &[String]) -> Option<Vec<String>> {
    let (first, rest) = path.split_first()?;
    match first.as_str() {
        "crate" => Some(rest.to_vec()),
        "self" => Some([own, rest].concat()),
        "super" => {
            let mut base = own[..own.len().saturating_sub(1)].to_vec();
            let mut rest = rest;
            while rest.first().is_some_and(|s| s == "super") {
                base.pop();
                rest = &rest[1..];
            }
            Some([base.as_slice(), rest].concat())
        }
        name if children.iter().any(|c| c == name) => Some([own, path].concat()),
        _ => None,
    }
}

/// Which file of `files` (module path → file) holds the item at `path`:
/// the file of the longest prefix of the path that is a module.
fn file_of<'a>(files: &'a BTreeMap<Vec<String>, PathBuf>, path: &[String]) -> Option<&'a PathBuf> {
    (1..=path.len()).rev().find_map(|n| files.get(&path[..n]))
}

/// The edges "file A names an item of file B" between the files of `src`,
/// leaving out the edges from a module's own file to the files of its
/// submodules: a parent names its children by declaring them, and children
/// name their parent's shared types; what must not happen is a cycle
/// among siblings or across modules.
fn file_edges(src: &Path) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let mut paths = Vec::new();
    rust_files(src, &mut paths);
    let files: BTreeMap<Vec<String>, PathBuf> = paths
        .iter()
        .map(|f| (module_path(src, f), f.clone()))
        .collect();
    let mut edges = BTreeMap::new();
    for (own, file) in &files {
        let code = product_code(&std::fs::read_to_string(file).expect("read"));
        let children = declared_children(&code);
        let mut to = BTreeSet::new();
        for path in named_paths(&code) {
            let Some(target) = absolute(own, &path, &children) else {
                continue;
            };
            let Some(target_file) = file_of(&files, &target) else {
                continue;
            };
            let target_module = module_path(src, target_file);
            let descendant = target_module.len() > own.len() && target_module.starts_with(own);
            if target_file != file && !descendant {
                to.insert(target_file.clone());
            }
        }
        edges.insert(file.clone(), to);
    }
    edges
}

/// Every cycle's files (strongly connected components of more than one
/// file), found by walking the edges depth first (Tarjan).
fn cycles(edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    struct Walk<'a> {
        edges: &'a BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        index: BTreeMap<&'a PathBuf, usize>,
        low: BTreeMap<&'a PathBuf, usize>,
        stack: Vec<&'a PathBuf>,
        found: Vec<Vec<PathBuf>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a PathBuf) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            for w in self.edges.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.stack.contains(&w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    component.push(w.clone());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    walk.found
}

#[test]
fn no_file_names_an_item_of_a_file_that_names_it_back() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let edges = file_edges(&src);
    let found = cycles(&edges);
    let text: Vec<String> = found
        .iter()
        .map(|c| {
            c.iter()
                .map(|f| {
                    let to: Vec<String> = edges[f]
                        .iter()
                        .filter(|t| c.contains(t))
                        .map(|t| t.strip_prefix(&src).unwrap_or(t).display().to_string())
                        .collect();
                    format!(
                        "  {} -> {}",
                        f.strip_prefix(&src).unwrap_or(f).display(),
                        to.join(", ")
                    )
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect();
    assert!(
        found.is_empty(),
        "import cycles between files:\n{}",
        text.join("\n\n")
    );
}

/// The checks above are only as good as their reading of `use`: a grouped
/// import over several lines, a renamed one, a path written inline and one
/// through a declared child are all seen, and a cycle between two files of
/// a made-up crate is found.
#[test]
fn the_reading_of_imports_sees_grouped_renamed_and_inline_paths() {
    let code = "use crate::{\n    store::{log::Entry, refs},\n    cli::Out as O,\n};\nmod child;\nfn f() { crate::plan::check(); child::g(); super::x::y(); }\n";
    let named: BTreeSet<String> = named_paths(code).iter().map(|p| p.join("::")).collect();
    for want in [
        "crate::store::log::Entry",
        "crate::store::refs",
        "crate::cli::Out",
        "crate::plan::check",
        "child::g",
        "super::x::y",
    ] {
        assert!(named.contains(want), "{want} not seen in {named:?}");
    }
    // What the layer check makes of it, in `store/log.rs`: `cli` is used.
    let own = ["store".to_owned(), "log".to_owned()];
    let used: BTreeSet<String> = named_paths(code)
        .iter()
        .filter_map(|p| absolute(&own, p, &["child".to_owned()]))
        .filter_map(|p| p.first().cloned())
        .collect();
    assert!(used.contains("cli") && used.contains("plan"), "{used:?}");
    // Text in a string is not an import.
    let quoted = product_code("fn f() { say(\"use crate::cli::x; now\"); }\n");
    assert!(named_paths(&quoted).is_empty(), "{quoted}");
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path();
    std::fs::create_dir_all(src.join("store")).expect("mkdir");
    std::fs::write(src.join("lib.rs"), "mod store;\n").expect("write");
    std::fs::write(
        src.join("store/mod.rs"),
        "mod log;\nmod refs;\nuse log::Entry;\n",
    )
    .expect("write");
    std::fs::write(
        src.join("store/log.rs"),
        "use super::{\n    refs::Tries,\n};\n",
    )
    .expect("write");
    std::fs::write(
        src.join("store/refs.rs"),
        "fn f() { crate::store::log::append(); }\n",
    )
    .expect("write");
    let found = cycles(&file_edges(src));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        found[0],
        vec![src.join("store/log.rs"), src.join("store/refs.rs")]
    );
    std::fs::write(src.join("store/refs.rs"), "fn f() {}\n").expect("write");
    assert!(
        cycles(&file_edges(src)).is_empty(),
        "a parent naming its children is no cycle"
    );
}

#[test]
fn modules_only_use_lower_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let layers = layers();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut violations = Vec::new();
    for file in &files {
        let module = module_of(&src, file);
        if module == "lib" || module == "main" {
            continue;
        }
        let Some(&own) = layers.get(module.as_str()) else {
            violations.push(format!(
                "{}: module `{module}` has no layer; add it to tests/layering.rs",
                file.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(file).expect("read");
        let own_path = module_path(&src, file);
        let code = product_code(&text);
        let children = declared_children(&code);
        for path in named_paths(&code) {
            let Some(target) = absolute(&own_path, &path, &children) else {
                continue;
            };
            let Some(used) = target.first() else { continue };
            if *used == module {
                continue;
            }
            match layers.get(used.as_str()) {
                Some(&l) if l < own => {}
                _ => violations.push(format!(
                    "{}: `{module}` (layer {own}) uses `{}`",
                    file.display(),
                    path.join("::")
                )),
            }
        }
        for (line_no, code) in code_lines(&text) {
            let outside = |what: &str| format!("{}:{line_no}: `{module}` {what}", file.display());
            if module != "store" && (code.contains("gix::") || code.contains("use gix")) {
                violations.push(outside("uses gix; only `store` may"));
            }
            if module != "process" && code.contains("Command::new") {
                violations.push(outside("starts a program; only `process` may"));
            }
            if module != "cli"
                && (code.contains("println!")
                    || code.contains("eprintln!")
                    || code.contains("print!("))
            {
                violations.push(outside("prints; only `cli` may"));
            }
            if code.contains("PreviousValue::Any") {
                violations.push(outside("uses PreviousValue::Any"));
            }
        }
    }
    assert!(
        violations.is_empty(),
        "layering violations:\n{}",
        violations.join("\n")
    );
}
