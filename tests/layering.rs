//! The module layering of STYLE.md, checked by reading the source: each
//! top-level module only refers to modules of lower layers, only `store`
//! touches gix, only `process` starts programs, and only `cli` prints.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Layer of each top-level module; a module may use strictly lower layers
/// (and itself).
fn layers() -> BTreeMap<&'static str, u8> {
    BTreeMap::from([
        ("process", 0),
        ("ids", 0),
        ("failpoint", 0),
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
        for (line_no, code) in code_lines(&text) {
            for (pos, _) in code.match_indices("crate::") {
                let rest = &code[pos + "crate::".len()..];
                let used: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if used.is_empty() || used == module {
                    continue;
                }
                match layers.get(used.as_str()) {
                    Some(&l) if l < own => {}
                    _ => violations.push(format!(
                        "{}:{line_no}: `{module}` (layer {own}) uses `{used}`",
                        file.display()
                    )),
                }
            }
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
