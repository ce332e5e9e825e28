//! Sandbox benchmark: what confining each agent costs. The same plan of
//! trivial subtasks runs end to end (worktree, agent, gates, landing) with
//! every agent in its bubblewrap sandbox and with none, on two projects
//! made alike, rounds alternating which side goes first, dirty pages
//! flushed before each. Prints both medians, their ratio, and the cost per
//! attempt. Also shows `sandbox = auto` picks bubblewrap here.
//!
//! Run with `cargo bench --bench sandbox` (needs `bwrap`; without it the
//! bench says so and stops).

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

const TASKS: usize = 8;
const ROUNDS: usize = 7;

/// A project of `TASKS` subtasks (each owns `src/tN/**`, verification
/// `true`), its plan stored and approved; the fake agent writes a fresh
/// line in each subtask's folder on every run.
fn project(root: &Path, name: &str) -> PathBuf {
    let repo = root.join(name);
    std::fs::create_dir_all(&repo).expect("dir");
    common::git(&repo, &["init", "-q", "-b", "main"]);
    let mut subtasks = Vec::new();
    for t in 0..TASKS {
        let dir = repo.join(format!("src/t{t}"));
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join("README"), format!("t{t}\n")).expect("file");
        subtasks.push(serde_json::json!({
            "id": format!("t{t}"), "title": format!("Task {t}"),
            "owned_globs": [format!("src/t{t}/**")], "deliverable": "a line",
            "verification": "true",
        }));
    }
    common::git(&repo, &["add", "."]);
    common::git(&repo, &["commit", "-q", "-m", "project"]);
    let plan = serde_json::json!({"version": 1, "id": "bench", "instruction": "Touch every folder",
        "subtasks": subtasks});
    let file = root.join(format!("{name}.plan.json"));
    std::fs::write(&file, plan.to_string()).expect("plan");
    common::orch(&repo, &["plan", "add", &file.to_string_lossy()]);
    common::orch(&repo, &["approve", "bench"]);
    repo
}

/// One run of the whole plan (`--new`: every task again) in `mode`.
fn run(repo: &Path, mode: &str) -> Duration {
    let mut cmd = common::command(common::orch_bin(), repo);
    cmd.args(["run", "bench", "--agent", "fake", "--new", "--cap", "4"])
        .env("GIT_ORCH_SANDBOX", mode)
        .env(
            "FAKE_AGENT_SCRIPT",
            "run sh -c 'date +%s%N >> src/$ORCH_TASK/lines'\n",
        );
    common::measure(cmd).wall
}

fn main() {
    let bwrap_works = std::process::Command::new("bwrap")
        .args(["--ro-bind", "/", "/", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !bwrap_works {
        println!("bubblewrap does not work here; nothing to compare (install `bubblewrap`)");
        return;
    }
    let root = tempfile::Builder::new()
        .prefix("orch-sandbox-bench")
        .tempdir_in(common::bench_root())
        .expect("temp dir");
    println!(
        "sandbox bench: {TASKS} trivial subtasks per run, cap 4, {ROUNDS} rounds per side, on {}",
        common::fs_type(root.path())
    );
    let confined = project(root.path(), "confined");
    let open = project(root.path(), "open");
    // One warm-up run each: the first run pays for caches both sides share.
    run(&confined, "bwrap");
    run(&open, "none");
    let (bwrap, none) =
        common::alternate(ROUNDS, || run(&confined, "bwrap"), || run(&open, "none"));
    let per_attempt = (bwrap.as_secs_f64() - none.as_secs_f64()) / TASKS as f64 * 1000.0;
    println!("| side | median run | per attempt |");
    println!("|---|---|---|");
    println!(
        "| sandbox = bwrap | {} | {:.1} ms |",
        common::ms(bwrap),
        bwrap.as_secs_f64() * 1000.0 / TASKS as f64
    );
    println!(
        "| sandbox = none (baseline) | {} | {:.1} ms |",
        common::ms(none),
        none.as_secs_f64() * 1000.0 / TASKS as f64
    );
    println!(
        "ratio bwrap/none: {:.2}x; the sandbox adds {per_attempt:.1} ms per attempt",
        bwrap.as_secs_f64() / none.as_secs_f64()
    );
    let agents = common::command(common::orch_bin(), &confined)
        .args(["agents"])
        .output()
        .expect("git orch agents");
    let text = String::from_utf8_lossy(&agents.stdout);
    if let Some(line) = text.lines().find(|l| l.to_lowercase().contains("sandbox")) {
        println!("git orch agents: {}", line.trim());
    }
}
