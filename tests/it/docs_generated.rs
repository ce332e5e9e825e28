//! Generated documents stay in step with the code: docs/cli.md and the man
//! pages in docs/man/ are rendered from the clap definitions in src/cli/
//! (by `git_orch::cli::manual`), so a changed help text, option or command
//! makes these tests fail until the files are regenerated.
//!
//! Regenerate both with:
//!
//! ```text
//! GIT_ORCH_BLESS=1 cargo test --test it docs_generated
//! ```

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::{Sandbox, repo_root};

const REGENERATE: &str = "GIT_ORCH_BLESS=1 cargo test --test it docs_generated";

/// The whole command tree the references are generated from.
fn tree() -> clap::Command {
    <git_orch::cli::Cli as clap::CommandFactory>::command()
}

fn bless() -> bool {
    std::env::var_os("GIT_ORCH_BLESS").is_some_and(|v| !v.is_empty())
}

/// The first line where `have` and `want` differ, for the failure message.
fn first_difference(have: &str, want: &str) -> String {
    let (mut h, mut w) = (have.lines(), want.lines());
    for n in 1.. {
        match (h.next(), w.next()) {
            (None, None) => break,
            (a, b) if a == b => continue,
            (a, b) => {
                return format!(
                    "line {n}:\n  in the file: {}\n  generated:   {}",
                    a.unwrap_or("<end of file>"),
                    b.unwrap_or("<end of file>")
                );
            }
        }
    }
    "only whitespace at the end differs".into()
}

#[test]
fn cli_reference_is_up_to_date() {
    let path = repo_root().join("docs/cli.md");
    let want = git_orch::cli::manual::cli_reference(tree());
    if bless() {
        std::fs::write(&path, &want).expect("write docs/cli.md");
        return;
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "docs/cli.md is out of date with the clap definitions; regenerate it with\n\n    {REGENERATE}\n\nfirst difference at {}",
        first_difference(&have, &want)
    );
}

fn man_dir() -> PathBuf {
    repo_root().join("docs/man")
}

fn pages_on_disk(dir: &Path) -> BTreeMap<String, String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return BTreeMap::new();
    };
    entries
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "1"))
        .map(|p| {
            let name = p
                .file_name()
                .expect("file name")
                .to_string_lossy()
                .into_owned();
            (name, std::fs::read_to_string(&p).expect("read page"))
        })
        .collect()
}

#[test]
fn man_pages_are_up_to_date() {
    let dir = man_dir();
    let want: BTreeMap<String, String> = git_orch::cli::manual::man_pages(tree())
        .into_iter()
        .map(|p| (p.file_name, p.text))
        .collect();
    if bless() {
        std::fs::create_dir_all(&dir).expect("mkdir docs/man");
        for name in pages_on_disk(&dir).keys() {
            if !want.contains_key(name) {
                std::fs::remove_file(dir.join(name)).expect("remove a stale page");
            }
        }
        for (name, text) in &want {
            std::fs::write(dir.join(name), text).expect("write page");
        }
        return;
    }
    let have = pages_on_disk(&dir);
    let mut problems = Vec::new();
    for (name, text) in &want {
        match have.get(name) {
            None => problems.push(format!("docs/man/{name} is missing")),
            Some(h) if h != text => problems.push(format!(
                "docs/man/{name} differs at {}",
                first_difference(h, text)
            )),
            Some(_) => {}
        }
    }
    for name in have.keys().filter(|n| !want.contains_key(*n)) {
        problems.push(format!("docs/man/{name} belongs to no command"));
    }
    assert!(
        problems.is_empty(),
        "the man pages in docs/man/ are out of date with the clap definitions; regenerate them with\n\n    {REGENERATE}\n\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_hidden_debug_command_prints_the_same_reference() {
    let sb = Sandbox::new();
    let out = sb.orch_ok(sb.path(), &["debug", "cli-reference"]);
    assert_eq!(
        out.trim_end(),
        git_orch::cli::manual::cli_reference(tree()).trim_end()
    );
}
