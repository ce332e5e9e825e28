//! The defaults the docs state are the ones the code uses: the merge
//! strategy (in the CLI reference, the merge-queue configuration table
//! and the defaults table of running.md, checked against what a real run
//! lands with) and the cleanup mode (checked against the settings'
//! default). A default changed in one place fails here until the docs
//! say the same.

use crate::common;

use common::{Sandbox, events, project, repo_root, stderr};

fn doc(path: &str) -> String {
    std::fs::read_to_string(repo_root().join(path)).expect("doc")
}

/// The first backticked word of the table row of `doc` that starts with
/// `row`, in column `column` (0-based, after the row's first cell).
fn cell(text: &str, row: &str, column: usize) -> String {
    let line = text
        .lines()
        .find(|l| l.starts_with(row))
        .unwrap_or_else(|| panic!("no row starting {row:?}"));
    let cells: Vec<&str> = line.split('|').map(str::trim).collect();
    cells[column + 1].to_owned()
}

#[test]
fn the_documented_merge_strategy_is_the_one_a_run_lands_with() {
    let mut sb = Sandbox::new();
    let p = project(&mut sb, &[("a", &[], "true")], None);
    p.script("a", "write src/a/done yes\n");
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let landed = events(&sb, &p.repo)
        .into_iter()
        .find(|e| e["type"] == "landed")
        .expect("landed");
    let actual = landed["strategy"].as_str().expect("strategy").to_owned();
    // merge-queue.md's configuration table: "`squash` (`git orch land`: …)".
    let table = cell(&doc("docs/merge-queue.md"), "| `orch.mergeStrategy`", 2);
    assert!(
        table.starts_with(&format!("`{actual}`")),
        "merge-queue.md says {table:?}, a run lands with {actual}"
    );
    // running.md's defaults table: "squash (`land`: rebase)".
    let defaults = cell(&doc("docs/running.md"), "| `merge --strategy`", 2);
    assert!(
        defaults.starts_with(&actual),
        "running.md says {defaults:?}, a run lands with {actual}"
    );
    // The CLI reference (generated from `merge --help`).
    let cli = doc("docs/cli.md");
    let merge = &cli[cli.find("## git orch merge").expect("merge section")..];
    let line = merge
        .lines()
        .find(|l| l.starts_with("- `--strategy"))
        .expect("--strategy");
    assert!(
        line.contains(&format!("else {actual})")),
        "docs/cli.md says {line:?}, a run lands with {actual}"
    );
}

#[test]
fn the_documented_cleanup_mode_is_the_settings_default() {
    let running = doc("docs/running.md");
    let section = &running[running
        .find("### When a run ends: `[orch] cleanup`")
        .expect("cleanup section")..];
    let row = section
        .lines()
        .find(|l| l.starts_with("| `") && l.contains("(default)"))
        .expect("a row marked (default)");
    let documented = row
        .split('`')
        .nth(1)
        .expect("a backticked value")
        .to_owned();
    let default = git_orch::config::Settings::default().cleanup.as_str();
    assert_eq!(
        documented, default,
        "running.md marks {documented} as the default"
    );
}

/// The invariant numbers a test file's header cites (`invariants 1, 6 and
/// 8`), from its `//!` block.
fn cited_invariants(header: &str) -> Vec<u32> {
    let text = header.replace("\n//!", " ");
    let mut out = Vec::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("invariant") {
        rest = &rest[i + "invariant".len()..];
        let list: String = rest
            .trim_start_matches('s')
            .chars()
            .take_while(|c| c.is_ascii_digit() || matches!(c, ' ' | ',') || c.is_alphabetic())
            .collect();
        for word in list.split([' ', ',']) {
            if let Ok(n) = word.parse() {
                out.push(n);
            } else if !(word.is_empty() || word == "and") {
                break;
            }
        }
    }
    out
}

#[test]
fn every_invariant_a_test_cites_is_in_architecture_md_naming_that_test() {
    let architecture = doc("ARCHITECTURE.md");
    // The entry of invariant `n`: from `n. **` to the next entry or section.
    let invariant = |n: u32| -> String {
        let start = architecture
            .find(&format!("\n{n}. **"))
            .unwrap_or_else(|| panic!("ARCHITECTURE.md has no invariant {n}"));
        architecture[start + 1..]
            .lines()
            .enumerate()
            .take_while(|(i, l)| {
                *i == 0
                    || !(l.starts_with("## ")
                        || l.split_once(". **")
                            .is_some_and(|(num, _)| num.parse::<u32>().is_ok()))
            })
            .map(|(_, l)| l)
            .collect::<Vec<_>>()
            .join("\n")
    };
    let mut checked = 0;
    for entry in std::fs::read_dir(repo_root().join("tests/it")).expect("tests") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read");
        let header: String = text
            .lines()
            .take_while(|l| l.starts_with("//!"))
            .collect::<Vec<_>>()
            .join("\n");
        let name = path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        for n in cited_invariants(&header) {
            let body = invariant(n);
            assert!(
                body.contains(&format!("tests/it/{name}")),
                "{name} cites invariant {n}, whose entry in ARCHITECTURE.md does not name it:\n{body}"
            );
            checked += 1;
        }
    }
    assert!(
        checked >= 10,
        "only {checked} citations found: the header reading broke"
    );
}

#[test]
fn no_text_in_the_repository_points_at_design_or_style_briefs_outside_it() {
    let mut stale = Vec::new();
    let mut stack = vec![repo_root()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("dir") {
            let path = entry.expect("entry").path();
            let name = path
                .file_name()
                .expect("name")
                .to_string_lossy()
                .into_owned();
            if path.is_dir() {
                if !matches!(name.as_str(), "target" | ".git") {
                    stack.push(path);
                }
                continue;
            }
            if !matches!(
                path.extension().and_then(|e| e.to_str()),
                Some("rs" | "md" | "toml" | "sh")
            ) {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            for brief in ["DESIGN", "STYLE"] {
                let name = format!("{brief}.md");
                if text.contains(&name) && !repo_root().join(&name).exists() {
                    stale.push(format!("{}: {name}", path.display()));
                }
            }
        }
    }
    assert!(
        stale.is_empty(),
        "references to files the repository does not have:\n{}",
        stale.join("\n")
    );
}
