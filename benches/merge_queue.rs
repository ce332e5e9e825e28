//! Merge queue benchmark: landing 16 passed attempts, beside raw git doing
//! the same work, in one run.
//!
//! 1. Per landing, with a zero-cost integration gate (`true`, so nothing
//!    hides the queue's own overhead) and with one that sleeps 0.5 s, in
//!    rounds (`ORCH_MERGE_ROUNDS`, default 3) that alternate which side goes
//!    first, flushing dirty pages before each, each side on its own project
//!    made the same way:
//!    * baseline: for each of the 16 result branches, in one scratch
//!      worktree, `git rebase` onto the target, run the gate there,
//!      `git update-ref` the target from its old tip (a compare-and-swap),
//!      and `git read-tree -m -u <old> <new>` in the checkout of the target
//!      (what a careful shell script does; git-orch moves that checkout
//!      too);
//!    * `git orch merge --batch 1` of the same 16 attempts.
//! 2. `git orch merge --batch 8`, all green, and with one culprit that only
//!    the integration gate catches (bisection lands the other 15, the
//!    culprit is sent back), against batch 1, with the 0.5 s gate.
//!
//! Attempts are made by a real `git orch run` with the fake agent while the
//! target's checkout is dirty (so they pass and wait in the queue); the
//! timed part is only the landing. Run with `cargo bench --bench merge_queue`
//! (about 5 minutes).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

mod common;

const TASKS: usize = 16;
/// The slow gate's command (the culprit check makes it fail on t05's bad
/// file).
const SLOW_GATE: &str = "sleep 0.5; test ! -e src/t05/bad";
/// The zero-cost gate.
const ZERO_GATE: &str = "true";

fn bin_path() -> String {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_git-orch"));
    let agents = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/agents");
    format!(
        "{}:{}:{}",
        exe.parent().expect("bin dir").display(),
        agents.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

fn cmd(program: &str, dir: &Path, script: &str) -> Command {
    let mut c = Command::new(program);
    c.current_dir(dir)
        .env("PATH", bin_path())
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.com")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.com")
        .env("NO_COLOR", "1")
        .env("FAKE_AGENT_SCRIPT", script);
    c
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = cmd("git", dir, "").args(args).output().expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A repository whose plan has `TASKS` independent tasks, each owning
/// `src/tNN/**`, all run to `passed` and waiting in the queue, with `gate`
/// as the integration gate; with `culprit`, task t05's attempt writes
/// `src/t05/bad`, which the slow gate refuses.
struct Project {
    repo: PathBuf,
    /// The fake agent's script (a folder of scripts under the bench's own
    /// directory would be hidden by the sandbox).
    script: String,
}

fn project(root: &Path, name: &str, culprit: bool, gate: &str) -> Project {
    let repo = root.join(name);
    std::fs::create_dir_all(repo.join(".orch")).expect("dir");
    git(&repo, &["init", "-q", "-b", "main"]);
    let mut subtasks = Vec::new();
    for i in 0..TASKS {
        let id = format!("t{i:02}");
        let dir = repo.join("src").join(&id);
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join("README"), format!("{id}\n")).expect("file");
        subtasks.push(serde_json::json!({
            "id": id, "title": format!("Task {id}"), "owned_globs": [format!("src/{id}/**")],
            "deliverable": "done", "verification": format!("test -f src/{id}/done"),
        }));
    }
    let mut script = String::from("run sh -c \"d=${ORCH_OWNED_GLOBS%/**}; echo yes > $d/done\"\n");
    if culprit {
        script.push_str("run sh -c \"if [ $ORCH_TASK = t05 ]; then echo yes > src/t05/bad; fi\"\n");
    }
    script.push_str("commit work\n");
    std::fs::write(
        repo.join(".orch/config"),
        format!("[integration]\n\trun = \"{gate}\"\n"),
    )
    .expect("config");
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "project"]);
    let plan = serde_json::json!({"version": 1, "id": "bench", "instruction": "bench", "subtasks": subtasks});
    let plan_file = root.join(format!("{name}-plan.json"));
    std::fs::write(&plan_file, plan.to_string()).expect("plan");
    let p = Project { repo, script };
    p.orch(&["plan", "add", &plan_file.to_string_lossy()]);
    p.orch(&["approve", "bench", "--approver", "bench"]);
    // Untracked files in the checkout of main where the landings would
    // add theirs keep the queue from landing while the attempts run: every
    // one passes and waits.
    for i in 0..TASKS {
        std::fs::write(p.repo.join(format!("src/t{i:02}/done")), "mine").expect("block");
    }
    let out = p.orch_output(&[
        "run", "bench", "--agent", "fake", "--cap", "16", "--base", "main",
    ]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "run: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for i in 0..TASKS {
        std::fs::remove_file(p.repo.join(format!("src/t{i:02}/done"))).expect("unblock");
    }
    p
}

impl Project {
    fn orch_output(&self, args: &[&str]) -> std::process::Output {
        cmd("git", &self.repo, &self.script)
            .arg("orch")
            .args(args)
            .output()
            .expect("git orch")
    }

    fn orch(&self, args: &[&str]) -> String {
        let out = self.orch_output(args);
        assert!(
            out.status.success(),
            "git orch {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Times `git orch merge <args> --json`; returns the wall time, the
    /// number landed and the integration gate runs.
    fn merge(&self, args: &[&str]) -> (Duration, usize, u64) {
        let mut all = vec!["merge", "--json"];
        all.extend_from_slice(args);
        let start = Instant::now();
        let out = self.orch_output(&all);
        let wall = start.elapsed();
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "merge report ({e}): {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        let landed = report["landed"].as_array().map_or(0, Vec::len);
        (wall, landed, report["gate_runs"].as_u64().unwrap_or(0))
    }

    /// The result branches of the run's attempts, in task order.
    fn result_branches(&self) -> Vec<String> {
        let mut v: Vec<String> = git(
            &self.repo,
            &["for-each-ref", "--format=%(refname)", "refs/heads/orch/"],
        )
        .lines()
        .map(str::to_owned)
        .collect();
        v.sort();
        assert_eq!(v.len(), TASKS, "one result branch per task");
        v
    }
}

/// What a careful script does with raw git: in one scratch worktree, per
/// branch, rebase onto the current target, run the gate, move the target
/// with `update-ref <new> <old>` (a CAS), and move the checkout of the
/// target from the old tree to the new one, as git-orch does.
fn baseline(p: &Project, gate: &str) -> Duration {
    let base = git(&p.repo, &["rev-parse", "main"]);
    let scratch = p.repo.with_extension("baseline-scratch");
    git(
        &p.repo,
        &[
            "worktree",
            "add",
            "-q",
            "--detach",
            &scratch.to_string_lossy(),
            &base,
        ],
    );
    let branches = p.result_branches();
    // Every commit of every result branch lands (git-orch squashes each
    // into one; the fake agent makes exactly one, so both land the same).
    let commits: usize = branches
        .iter()
        .map(|b| {
            git(&p.repo, &["rev-list", "--count", &format!("{base}..{b}")])
                .parse::<usize>()
                .expect("a count")
        })
        .sum();
    common::flush();
    let start = Instant::now();
    for b in &branches {
        let old = git(&p.repo, &["rev-parse", "refs/heads/main"]);
        git(&scratch, &["checkout", "-q", "--detach", b]);
        git(&scratch, &["rebase", "-q", &old]);
        let ok = Command::new("sh")
            .current_dir(&scratch)
            .args(["-c", gate])
            .status()
            .expect("gate")
            .success();
        assert!(ok, "all green in the baseline");
        let new = git(&scratch, &["rev-parse", "HEAD"]);
        git(&p.repo, &["update-ref", "refs/heads/main", &new, &old]);
        git(&p.repo, &["read-tree", "-m", "-u", &old, &new]);
    }
    let wall = start.elapsed();
    let landed = git(&p.repo, &["rev-list", "--count", &format!("{base}..main")]);
    assert_eq!(landed, commits.to_string(), "every result commit landed");
    assert_eq!(
        git(&p.repo, &["status", "--porcelain", "--untracked-files=no"]),
        "",
        "the checkout follows the target"
    );
    wall
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn main() {
    let tmp = tempfile::Builder::new()
        .prefix("orch-bench-merge-")
        .tempdir_in(common::bench_root())
        .expect("tmp");
    let root = tmp.path();
    let rounds = std::env::var("ORCH_MERGE_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3usize)
        .max(1);
    println!("merge queue benchmark ({TASKS} passed attempts), {rounds} rounds");
    println!("  {}", common::machine(root));

    let gates = [
        ("zero-cost gate (true)", ZERO_GATE),
        ("0.5 s gate", SLOW_GATE),
    ];
    let mut results = Vec::new();
    for (g, (gate_name, gate)) in gates.iter().enumerate() {
        let (mut raw, mut ours) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            let raw_project = project(root, &format!("raw-{g}-{round}"), false, gate);
            let orch_project = project(root, &format!("orch-{g}-{round}"), false, gate);
            let run_orch = || {
                common::flush();
                let (wall, landed, _) = orch_project.merge(&["--batch", "1"]);
                assert_eq!(landed, TASKS, "serial lands all");
                wall
            };
            if round % 2 == 0 {
                raw.push(baseline(&raw_project, gate));
                ours.push(run_orch());
            } else {
                ours.push(run_orch());
                raw.push(baseline(&raw_project, gate));
            }
        }
        results.push((
            *gate_name,
            common::median(&mut raw),
            common::median(&mut ours),
        ));
    }

    let serial_project = project(root, "serial", false, SLOW_GATE);
    common::flush();
    let (serial, _, serial_gates) = serial_project.merge(&["--batch", "1"]);
    let batch_project = project(root, "batch", false, SLOW_GATE);
    common::flush();
    let (batch, batch_landed, batch_gates) = batch_project.merge(&["--batch", "8"]);
    assert_eq!(batch_landed, TASKS, "batch lands all");
    let culprit_project = project(root, "culprit", true, SLOW_GATE);
    common::flush();
    let (culprit, culprit_landed, culprit_gates) = culprit_project.merge(&["--batch", "8"]);
    assert_eq!(culprit_landed, TASKS - 1, "all but the culprit land");

    println!();
    println!("landing {TASKS} attempts one at a time (medians of {rounds}):");
    println!(
        "  {:<24} {:>12} {:>12} {:>14} {:>14} {:>8}",
        "integration gate", "raw git", "git orch", "raw / landing", "orch / landing", "ratio"
    );
    for (name, raw, ours) in &results {
        println!(
            "  {:<24} {:>10.2} s {:>10.2} s {:>11.1} ms {:>11.1} ms {:>7.2}x",
            name,
            secs(*raw),
            secs(*ours),
            secs(*raw) * 1e3 / TASKS as f64,
            secs(*ours) * 1e3 / TASKS as f64,
            secs(*ours) / secs(*raw)
        );
    }
    println!("  goal: ≤ 1.15x per landing with the zero-cost gate");
    println!();
    println!("batching, 0.5 s gate:");
    println!("{:<52} {:>9} {:>11}", "", "wall (s)", "gate runs");
    for (name, wall, gates) in [
        ("git orch merge --batch 1", serial, serial_gates),
        ("git orch merge --batch 8 (all green)", batch, batch_gates),
        (
            "git orch merge --batch 8 (one culprit)",
            culprit,
            culprit_gates,
        ),
    ] {
        println!("{name:<52} {:>9.2} {gates:>11}", secs(wall));
    }
    println!(
        "serial / batch 8        {:>6.2}×  (target ≥ 4×)",
        secs(serial) / secs(batch)
    );
    println!(
        "serial / batch culprit  {:>6.2}×  (target ≥ 2×)",
        secs(serial) / secs(culprit)
    );
}
