//! The defaults the docs state are the ones the code uses: the merge
//! strategy (in the CLI reference, the merge-queue configuration table
//! and the defaults table of running.md, checked against what a real run
//! lands with) and the cleanup mode (checked against the settings'
//! default). A default changed in one place fails here until the docs
//! say the same.

mod common;

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
