//! Merge queue benchmark: landing 16 passed attempts through an integration
//! gate that costs `GATE` seconds, beside raw git doing the same work, in
//! one run.
//!
//! 1. Baseline: for each of the 16 result branches, in one scratch
//!    worktree, `git rebase` onto the target, run the gate, `git update-ref`
//!    the target from its old tip (what a careful shell script does).
//! 2. `git orch merge` of the same 16 attempts, serially (batch 1).
//! 3. `git orch merge --batch 8`, all green.
//! 4. `git orch merge --batch 8` with one culprit that only the integration
//!    gate catches: bisection lands the other 15, the culprit is sent back.
//!
//! Attempts are made by a real `git orch run` with the fake agent while the
//! target's checkout is dirty (so they pass and wait in the queue); the
//! timed part is only the landing. Run with `cargo bench --bench merge_queue`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const TASKS: usize = 16;
const GATE: &str = "0.5";

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

fn cmd(program: &str, dir: &Path, scripts: &Path) -> Command {
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
        .env("FAKE_AGENT_DIR", scripts);
    c
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = cmd("git", dir, Path::new("/nonexistent"))
        .args(args)
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A repository whose plan has `TASKS` independent tasks, each owning
/// `src/tNN/**`, all run to `passed` and waiting in the queue. The
/// integration gate sleeps `GATE` and fails if `src/t05/bad` exists; with
/// `culprit`, task t05's attempt writes that file.
struct Project {
    repo: PathBuf,
    scripts: PathBuf,
}

fn project(root: &Path, name: &str, culprit: bool) -> Project {
    let repo = root.join(name);
    let scripts = root.join(format!("{name}-scripts"));
    std::fs::create_dir_all(&scripts).expect("scripts");
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
        let extra = if culprit && i == 5 {
            "write src/t05/bad yes\n"
        } else {
            ""
        };
        std::fs::write(
            scripts.join(format!("{id}.1.script")),
            format!("write src/{id}/done yes\n{extra}commit {id} work\n"),
        )
        .expect("script");
    }
    std::fs::write(
        repo.join(".orch/config"),
        format!("[integration]\n\trun = \"sleep {GATE}; test ! -e src/t05/bad\"\n"),
    )
    .expect("config");
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "project"]);
    let plan = serde_json::json!({"version": 1, "id": "bench", "instruction": "bench", "subtasks": subtasks});
    let plan_file = root.join(format!("{name}-plan.json"));
    std::fs::write(&plan_file, plan.to_string()).expect("plan");
    let p = Project { repo, scripts };
    p.orch(&["plan", "add", &plan_file.to_string_lossy()]);
    p.orch(&["approve", "bench", "--approver", "bench"]);
    // A dirty checkout of main keeps the queue from landing while the
    // attempts run: every one passes and waits.
    std::fs::write(p.repo.join("wip"), "wip").expect("wip");
    let out = p.orch_output(&[
        "run", "bench", "--agent", "fake", "--cap", "16", "--base", "main",
    ]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "run: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_file(p.repo.join("wip")).expect("rm wip");
    p
}

impl Project {
    fn orch_output(&self, args: &[&str]) -> std::process::Output {
        cmd("git", &self.repo, &self.scripts)
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
/// branch, rebase onto the current target, run the gate, and move the
/// target with `update-ref <new> <old>` (a CAS). Lands on `refs/heads/
/// baseline` so the real target stays for git-orch.
fn baseline(p: &Project) -> Duration {
    let base = git(&p.repo, &["rev-parse", "main"]);
    git(&p.repo, &["update-ref", "refs/heads/baseline", &base, ""]);
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
    let start = Instant::now();
    for b in &branches {
        let old = git(&p.repo, &["rev-parse", "refs/heads/baseline"]);
        git(&scratch, &["checkout", "-q", "--detach", b]);
        git(&scratch, &["rebase", "-q", &old]);
        let gate = Command::new("sh")
            .current_dir(&scratch)
            .args(["-c", &format!("sleep {GATE}; test ! -e src/t05/bad")])
            .status()
            .expect("gate");
        assert!(gate.success(), "all green in the baseline");
        let new = git(&scratch, &["rev-parse", "HEAD"]);
        git(&p.repo, &["update-ref", "refs/heads/baseline", &new, &old]);
    }
    let wall = start.elapsed();
    let landed = git(
        &p.repo,
        &[
            "rev-list",
            "--count",
            &format!("{base}..refs/heads/baseline"),
        ],
    );
    assert_eq!(
        landed,
        (TASKS * 2).to_string(),
        "agent + result commit each"
    );
    wall
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn main() {
    let tmp = tempfile::Builder::new()
        .prefix("orch-bench-merge-")
        .tempdir_in(
            std::env::var_os("ORCH_BENCH_DIR").map_or_else(std::env::temp_dir, PathBuf::from),
        )
        .expect("tmp");
    let root = tmp.path();
    println!(
        "merge queue benchmark ({TASKS} passed attempts, integration gate sleep {GATE} s), in {}",
        root.display()
    );

    let serial_project = project(root, "serial", false);
    let base_wall = baseline(&serial_project);
    let (serial, serial_landed, serial_gates) = serial_project.merge(&["--batch", "1"]);
    assert_eq!(serial_landed, TASKS, "serial lands all");

    let batch_project = project(root, "batch", false);
    let (batch, batch_landed, batch_gates) = batch_project.merge(&["--batch", "8"]);
    assert_eq!(batch_landed, TASKS, "batch lands all");

    let culprit_project = project(root, "culprit", true);
    let (culprit, culprit_landed, culprit_gates) = culprit_project.merge(&["--batch", "8"]);
    assert_eq!(culprit_landed, TASKS - 1, "all but the culprit land");

    println!();
    println!("{:<52} {:>9} {:>11}", "", "wall (s)", "gate runs");
    println!(
        "{:<52} {:>9.2} {:>11}",
        "raw git: rebase + gate + update-ref, ×16",
        secs(base_wall),
        TASKS
    );
    println!(
        "{:<52} {:>9.2} {:>11}",
        "git orch merge --batch 1",
        secs(serial),
        serial_gates
    );
    println!(
        "{:<52} {:>9.2} {:>11}",
        "git orch merge --batch 8 (all green)",
        secs(batch),
        batch_gates
    );
    println!(
        "{:<52} {:>9.2} {:>11}",
        "git orch merge --batch 8 (one culprit)",
        secs(culprit),
        culprit_gates
    );
    println!();
    println!(
        "serial / raw git        {:>6.2}×  (target ≤ 1.20×)",
        secs(serial) / secs(base_wall)
    );
    println!(
        "serial / batch 8        {:>6.2}×  (target ≥ 4×)",
        secs(serial) / secs(batch)
    );
    println!(
        "serial / batch culprit  {:>6.2}×  (target ≥ 2×)",
        secs(serial) / secs(culprit)
    );
}
