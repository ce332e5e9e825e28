//! The module layering of ARCHITECTURE.md, checked by reading the source
//! as Rust (with `syn`, so strings, comments, `#[cfg(test)]` items and
//! macro bodies are what they are): each top-level module only refers to
//! modules of lower layers; only `store` touches gix, directly or through
//! a type it re-exports from gix; only `process` starts programs; only
//! `cli` prints; nothing updates a ref with `PreviousValue::Any`; and no
//! two files name each other's items (a cycle), a parent and its child
//! included unless the parent only re-exports the child.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::common::{item_attrs, test_only};
use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// Layer of each top-level module; a module may use strictly lower layers
/// (and itself).
fn layers() -> BTreeMap<&'static str, u8> {
    BTreeMap::from([
        ("process", 0),
        ("ids", 0),
        ("oid", 0),
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
        ("web", 11),
        ("cli", 12),
    ])
}

/// A path the code names, with the line it is on.
#[derive(Debug, Clone)]
struct Named {
    segments: Vec<String>,
    line: usize,
    /// Named by a `pub use` (a re-export), not used.
    reexport: bool,
}

/// What one file's product code names: paths (in `use` trees, in code and
/// inside macro bodies), the macros it calls, the modules it declares,
/// and what it re-exports from gix.
#[derive(Debug, Default)]
struct Source {
    paths: Vec<Named>,
    macros: Vec<(String, usize)>,
    children: Vec<String>,
    /// `pub use gix::…` names: the name other modules would use.
    gix_reexports: Vec<String>,
}

/// `a::{b, c::{d, e as f}}` → `a::b`, `a::c::d`, `a::c::e` (with the
/// name each is known by: `b`, `d`, `f`).
fn expand_use(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            expand_use(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let mut path = prefix.clone();
            path.push(n.ident.to_string());
            out.push((path, n.ident.to_string()));
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix.clone();
            path.push(r.ident.to_string());
            out.push((path, r.rename.to_string()));
        }
        syn::UseTree::Glob(_) => out.push((prefix.clone(), "*".into())),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                expand_use(t, prefix, out);
            }
        }
    }
}

/// The paths written in a macro's tokens (`format!("{}", crate::a::b())`
/// names `crate::a::b`), which `syn` leaves unparsed.
fn token_paths(tokens: TokenStream, out: &mut Vec<Named>) {
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    let mut i = 0;
    while i < trees.len() {
        match &trees[i] {
            TokenTree::Group(g) => token_paths(g.stream(), out),
            TokenTree::Ident(first) => {
                let line = first.span().start().line;
                let mut segments = vec![first.to_string()];
                let mut j = i + 1;
                while let (
                    Some(TokenTree::Punct(a)),
                    Some(TokenTree::Punct(b)),
                    Some(TokenTree::Ident(next)),
                ) = (trees.get(j), trees.get(j + 1), trees.get(j + 2))
                {
                    if a.as_char() != ':' || b.as_char() != ':' {
                        break;
                    }
                    segments.push(next.to_string());
                    j += 3;
                }
                if segments.len() > 1 {
                    out.push(Named {
                        segments,
                        line,
                        reexport: false,
                    });
                }
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
}

impl<'ast> Visit<'ast> for Source {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if test_only(item_attrs(item)) {
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if m.content.is_none() {
            self.children.push(m.ident.to_string());
        }
        syn::visit::visit_item_mod(self, m);
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let line = u.use_token.span.start().line;
        let public = !matches!(u.vis, syn::Visibility::Inherited);
        let mut found = Vec::new();
        expand_use(&u.tree, &mut Vec::new(), &mut found);
        for (segments, name) in found {
            if public && segments.first().is_some_and(|s| s == "gix") {
                self.gix_reexports.push(name);
            }
            self.paths.push(Named {
                segments,
                line,
                reexport: public,
            });
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        let line = p
            .segments
            .first()
            .map_or(0, |s| s.ident.span().start().line);
        self.paths.push(Named {
            segments,
            line,
            reexport: false,
        });
        syn::visit::visit_path(self, p);
    }

    /// `pub(super)`, `pub(in crate::x)`: who may see an item, not a use
    /// of the module named.
    fn visit_vis_restricted(&mut self, _: &'ast syn::VisRestricted) {}

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        if let Some(last) = m.path.segments.last() {
            self.macros
                .push((last.ident.to_string(), last.ident.span().start().line));
        }
        token_paths(m.tokens.clone(), &mut self.paths);
        syn::visit::visit_macro(self, m);
    }
}

/// Reads one file; a file that does not parse fails the test.
fn read_source(file: &Path) -> Source {
    let text = std::fs::read_to_string(file).expect("read");
    let parsed =
        syn::parse_file(&text).unwrap_or_else(|e| panic!("{} does not parse: {e}", file.display()));
    let mut source = Source::default();
    source.visit_file(&parsed);
    source
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
/// `None` for paths outside the crate (`std::`, `gix::`) and local names.
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

/// Every file of `src` read, by module path.
fn sources(src: &Path) -> BTreeMap<Vec<String>, (PathBuf, Source)> {
    let mut paths = Vec::new();
    rust_files(src, &mut paths);
    paths
        .into_iter()
        .map(|f| (module_path(src, &f), (f.clone(), read_source(&f))))
        .collect()
}

/// The edges "file A names an item of file B". A parent's `mod child;`
/// and `pub use child::…` (a re-export) are no edge; a parent that uses
/// an item of its child is, so a child naming its parent back is a cycle.
/// No parent is exempt: what a parent's children share lives in a file of
/// its own, and `mod.rs` only declares, re-exports and dispatches.
fn file_edges(src: &Path) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let all = sources(src);
    let files: BTreeMap<Vec<String>, PathBuf> = all
        .iter()
        .map(|(m, (f, _))| (m.clone(), f.clone()))
        .collect();
    let mut edges = BTreeMap::new();
    for (own, (file, source)) in &all {
        let mut to = BTreeSet::new();
        for named in &source.paths {
            let Some(target) = absolute(own, &named.segments, &source.children) else {
                continue;
            };
            let Some(target_file) = file_of(&files, &target) else {
                continue;
            };
            let descendant = {
                let m = module_path(src, target_file);
                m.len() > own.len() && m.starts_with(own)
            };
            if target_file != file && !(descendant && named.reexport) {
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

fn describe_cycles(src: &Path, edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<String> {
    cycles(edges)
        .iter()
        .map(|c| {
            c.iter()
                .map(|f| {
                    let to: Vec<String> = edges[f]
                        .iter()
                        .filter(|t| c.contains(t))
                        .map(|t| t.strip_prefix(src).unwrap_or(t).display().to_string())
                        .collect();
                    format!(
                        "  {} -> {}",
                        f.strip_prefix(src).unwrap_or(f).display(),
                        to.join(", ")
                    )
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect()
}

/// Every rule broken in the crate at `src`, one line each.
fn violations(src: &Path) -> Vec<String> {
    let layers = layers();
    let all = sources(src);
    // Names other modules would reach gix's types by.
    let gix_types: BTreeSet<String> = all
        .iter()
        .filter(|(m, _)| m.first().is_some_and(|f| f == "store"))
        .flat_map(|(_, (_, s))| s.gix_reexports.iter().cloned())
        .collect();
    let mut out = Vec::new();
    for (own_path, (file, source)) in &all {
        let Some(module) = own_path.first().cloned() else {
            continue; // lib.rs, main.rs
        };
        if *own_path == ["build"] {
            continue; // the build script: no module of the crate
        }
        let at =
            |line: usize, what: String| format!("{}:{line}: `{module}` {what}", file.display());
        let Some(&own) = layers.get(module.as_str()) else {
            out.push(format!(
                "{}: module `{module}` has no layer; add it to tests/it/layering.rs",
                file.display()
            ));
            continue;
        };
        for named in &source.paths {
            let segments = &named.segments;
            if module != "store" && segments.first().is_some_and(|s| s == "gix") {
                out.push(at(named.line, "uses gix; only `store` may".into()));
            }
            if module != "process"
                && segments
                    .windows(2)
                    .any(|w| w[0] == "Command" && w[1] == "new")
            {
                out.push(at(
                    named.line,
                    "starts a program; only `process` may".into(),
                ));
            }
            if segments
                .windows(2)
                .any(|w| w[0] == "PreviousValue" && w[1] == "Any")
            {
                out.push(at(named.line, "uses PreviousValue::Any".into()));
            }
            let Some(target) = absolute(own_path, segments, &source.children) else {
                continue;
            };
            if module != "store"
                && target.first().is_some_and(|s| s == "store")
                && target.last().is_some_and(|t| gix_types.contains(t))
            {
                out.push(at(
                    named.line,
                    format!(
                        "uses gix's type `{}` through store's re-export; only `store` may",
                        target.last().expect("a name")
                    ),
                ));
            }
            let Some(used) = target.first() else { continue };
            if *used == module {
                continue;
            }
            match layers.get(used.as_str()) {
                Some(&l) if l < own => {}
                _ => out.push(at(
                    named.line,
                    format!("(layer {own}) uses `{}`", segments.join("::")),
                )),
            }
        }
        for (name, line) in &source.macros {
            if module != "cli"
                && matches!(
                    name.as_str(),
                    "println" | "eprintln" | "print" | "eprint" | "dbg"
                )
            {
                out.push(at(*line, "prints; only `cli` may".into()));
            }
        }
    }
    out
}

#[test]
fn modules_only_use_lower_layers_and_their_own_tools() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = violations(&src);
    assert!(
        found.is_empty(),
        "layering violations:\n{}",
        found.join("\n")
    );
}

#[test]
fn no_file_names_an_item_of_a_file_that_names_it_back() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = describe_cycles(&src, &file_edges(&src));
    assert!(
        found.is_empty(),
        "import cycles between files:\n{}",
        found.join("\n\n")
    );
}

/// A made-up crate under a temp folder: `files` (path under `src`, text).
fn crate_of(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for (path, text) in files {
        let file = dir.path().join(path);
        std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
        std::fs::write(file, text).expect("write");
    }
    dir
}

/// The tricks a line-based reading fell for, each planted in a made-up
/// crate: every one must be found.
#[test]
fn the_check_sees_through_strings_test_modules_macros_and_reexports() {
    let base: &[(&str, &str)] = &[
        ("lib.rs", "pub mod plan;\npub mod store;\npub mod cli;\n"),
        ("cli/mod.rs", "pub fn main() {}\n"),
        (
            "store/mod.rs",
            "pub use gix::ObjectId as Oid;\npub fn open() {}\n",
        ),
    ];
    let cases: [(&str, &str, &str); 7] = [
        (
            "a `//` inside a string hides nothing after it",
            "pub fn f() -> bool { \"a//b\".contains(\"//\") && { crate::cli::main(); true } }\n",
            "uses `crate::cli::main`",
        ),
        (
            "code after a test module is product code",
            "#[cfg(test)]\nmod tests {}\npub fn g() { crate::cli::main(); }\n",
            "uses `crate::cli::main`",
        ),
        (
            "a path inside a macro body",
            "pub fn h() -> String { format!(\"{:?}\", crate::cli::main()) }\n",
            "uses `crate::cli::main`",
        ),
        (
            "gix's type through store's re-export",
            "use crate::store::Oid;\npub fn i(_: Oid) {}\n",
            "uses gix's type `Oid` through store's re-export",
        ),
        (
            "gix used directly",
            "pub fn j() { let _ = gix::open(\".\"); }\n",
            "uses gix; only `store` may",
        ),
        (
            "printing below the CLI",
            "pub fn k() { eprintln!(\"x\"); }\n",
            "prints; only `cli` may",
        ),
        (
            "a program started below process",
            "pub fn l() { let _ = std::process::Command::new(\"git\"); }\n",
            "starts a program; only `process` may",
        ),
    ];
    for (what, code, expected) in cases {
        let mut files = base.to_vec();
        files.push(("plan/mod.rs", code));
        let dir = crate_of(&files);
        let found = violations(dir.path());
        assert!(
            found
                .iter()
                .any(|v| v.contains("plan/mod.rs") && v.contains(expected)),
            "{what}: not found in {found:?}"
        );
    }
    // What is not a use: text in strings and comments, test-only code,
    // `#[cfg(not(test))]` code that is clean.
    let mut files = base.to_vec();
    files.push((
        "plan/mod.rs",
        "// crate::cli::main()\n/// crate::cli::main()\npub fn m() -> &'static str { \"use crate::cli::x; gix::open\" }\n#[cfg(test)]\nmod tests { fn t() { crate::cli::main(); println!(\"x\"); } }\n#[cfg(not(test))]\npub fn n() {}\n",
    ));
    let dir = crate_of(&files);
    let found = violations(dir.path());
    assert!(
        !found.iter().any(|v| v.contains("plan/mod.rs")),
        "false findings: {found:?}"
    );
}

/// Cycles: two siblings naming each other; a parent using its child's item
/// while the child names the parent; but not a parent that only declares
/// or re-exports its child.
#[test]
fn cycles_between_siblings_and_between_parent_and_child_are_found() {
    let siblings = crate_of(&[
        ("lib.rs", "mod store;\n"),
        ("store/mod.rs", "mod log;\nmod refs;\n"),
        ("store/log.rs", "use super::{\n    refs::Tries,\n};\n"),
        (
            "store/refs.rs",
            "pub struct Tries; fn f() { crate::store::log::append(); }\n",
        ),
    ]);
    let src = siblings.path();
    let found = cycles(&file_edges(src));
    assert_eq!(
        found,
        vec![vec![src.join("store/log.rs"), src.join("store/refs.rs")]]
    );
    let parent = crate_of(&[
        ("lib.rs", "mod store;\n"),
        (
            "store/mod.rs",
            "mod log;\npub struct Error;\nfn f() { log::append(); }\n",
        ),
        (
            "store/log.rs",
            "pub fn append() -> super::Error { super::Error }\n",
        ),
    ]);
    let src = parent.path();
    assert_eq!(
        cycles(&file_edges(src)),
        vec![vec![src.join("store/log.rs"), src.join("store/mod.rs")]]
    );
    let reexport = crate_of(&[
        ("lib.rs", "mod store;\n"),
        (
            "store/mod.rs",
            "mod log;\npub use log::append;\npub struct Error;\n",
        ),
        (
            "store/log.rs",
            "pub fn append() -> super::Error { super::Error }\n",
        ),
    ]);
    assert!(cycles(&file_edges(reexport.path())).is_empty());
    // A child's item visible to its parent only (`pub(super)`) names no
    // module: the parent calling it is no cycle.
    let visibility = crate_of(&[
        ("lib.rs", "mod store;\n"),
        ("store/mod.rs", "mod log;\nfn f() { log::append(); }\n"),
        ("store/log.rs", "pub(super) fn append() {}\n"),
    ]);
    assert!(cycles(&file_edges(visibility.path())).is_empty());
}
