//! Run benchmark: dispatching attempts and the orchestrator's footprint,
//! beside `git worktree add`, in one run.
//!
//! 1. Dispatch 16 attempts (branch + record in one ref transaction, a
//!    worktree checked out, the hook folder) on a repository of 20,000
//!    files, against `git worktree add -b` of 16 worktrees of the same
//!    commit. Rounds alternate which side goes first, and dirty pages are
//!    flushed before each side: checking out 16 × 20,000 files leaves
//!    hundreds of megabytes to write back, which would otherwise land on
//!    whichever side comes second. Medians of `ORCH_DISPATCH_ROUNDS`
//!    (default 3).
//! 2. Peak RSS of `git orch run` driving 16 sleeping agents, and the CPU it
//!    uses while they sleep.
//!
//! Run with `cargo bench --bench dispatch`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use git_orch::store::Store;

mod common;

use common::{flush, median};

const FILES: usize = 20_000;
const ATTEMPTS: usize = 16;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.com")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.com")
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A repository with `FILES` small files in 200 folders.
fn big_repo(root: &Path) -> PathBuf {
    let repo = root.join("big");
    std::fs::create_dir_all(&repo).expect("dir");
    git(&repo, &["init", "-q", "-b", "main"]);
    for d in 0..200 {
        let dir = repo.join(format!("src/m{d:03}"));
        std::fs::create_dir_all(&dir).expect("dir");
        for f in 0..FILES / 200 {
            std::fs::write(
                dir.join(format!("f{f:03}.rs")),
                format!("// {d} {f}\nfn f() {{}}\n"),
            )
            .expect("file");
        }
    }
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "big"]);
    repo
}

fn plan_json(n: usize, script_sleep: &str) -> String {
    let subtasks: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            serde_json::json!({
                "id": format!("t{i:02}"), "title": "t", "owned_globs": [format!("src/m{i:03}/**")],
                "deliverable": "d", "verification": format!("test -n {script_sleep}"),
            })
        })
        .collect();
    serde_json::json!({"version": 1, "id": "bench", "instruction": "bench", "subtasks": subtasks})
        .to_string()
}

fn main() {
    let tmp = tempfile::Builder::new()
        .prefix("orch-bench-dispatch-")
        .tempdir_in(
            std::env::var_os("ORCH_BENCH_DIR").map_or_else(std::env::temp_dir, PathBuf::from),
        )
        .expect("tmp");
    let root = tmp.path();
    println!(
        "run benchmark ({} files, {ATTEMPTS} attempts), in {}",
        FILES,
        root.display()
    );
    println!("  {}", common::machine(root));
    let repo = big_repo(root);
    let base = git(&repo, &["rev-parse", "HEAD"]);

    // Baseline: git worktree add of 16 worktrees.
    let git_round = |round: usize| {
        let wt_root = root.join(format!("git-wt-{round}"));
        let start = Instant::now();
        for i in 0..ATTEMPTS {
            git(
                &repo,
                &[
                    "worktree",
                    "add",
                    "-q",
                    "-b",
                    &format!("bench/{round}/{i}"),
                    &wt_root.join(format!("w{i}")).to_string_lossy(),
                    &base,
                ],
            );
        }
        start.elapsed()
    };

    // git-orch: a real run's dispatch steps, in process, for 16 attempts.
    let plan_file = root.join("plan.json");
    std::fs::write(&plan_file, plan_json(ATTEMPTS, "x")).expect("plan");
    let exe = env!("CARGO_BIN_EXE_git-orch");
    let orch = |args: &[&str]| {
        let out = Command::new(exe)
            .current_dir(&repo)
            .args(args)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .expect("git-orch");
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    orch(&["plan", "add", &plan_file.to_string_lossy()]);
    orch(&["approve", "bench", "--approver", "bench"]);
    let store = Store::open(&repo).expect("store");
    let plan_id = git_orch::ids::PlanId::new("bench").expect("id");
    let orch_round = |round: usize| {
        let opts = git_orch::run::RunOptions {
            agent: Some("fake".into()),
            base: Some(base.clone()),
            new: true,
            ..Default::default()
        };
        // A fresh run each round (the previous one is superseded by a new
        // plan revision).
        if round > 0 {
            std::fs::write(&plan_file, plan_json(ATTEMPTS, &format!("x{round}"))).expect("plan");
            orch(&["plan", "add", &plan_file.to_string_lossy()]);
            orch(&["approve", "bench", "--approver", "bench"]);
        }
        let ctx = match git_orch::run::prepare(&store, &plan_id, &opts).expect("prepare") {
            git_orch::run::Prepared::Started(c) | git_orch::run::Prepared::Resumed(c) => {
                Arc::new(c)
            }
            git_orch::run::Prepared::DryRun(_) | git_orch::run::Prepared::NothingToDo(_) => {
                unreachable!("not a dry run, and --new carries nothing")
            }
        };
        flush();
        let start = Instant::now();
        for sub in &ctx.plan().subtasks {
            let ws = git_orch::run::workspace::Workspace::new(&ctx, sub, 1, ctx.base, None);
            let port = ws.port_block(20_000, 20_000);
            ws.record(&store, "fake", port, None).expect("record");
            let made = ws.check_out(&store).expect("worktree");
            assert!(
                matches!(made, git_orch::run::workspace::CheckedOut::Made),
                "{made:?}"
            );
            ws.install_hooks(&ctx.hooks_dir, &sub.owned_globs, Path::new(exe))
                .expect("hooks");
        }
        start.elapsed()
    };
    let rounds = std::env::var("ORCH_DISPATCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3usize)
        .max(1);
    let (mut git_walls, mut orch_walls) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        // git-orch's side prepares its run (plan revision, run record)
        // before its own flush; the git side is flushed here.
        if round % 2 == 0 {
            flush();
            git_walls.push(git_round(round));
            orch_walls.push(orch_round(round));
        } else {
            orch_walls.push(orch_round(round));
            flush();
            git_walls.push(git_round(round));
        }
    }
    let git_time = median(&mut git_walls);
    let orch_time = median(&mut orch_walls);
    println!();
    println!("dispatch {ATTEMPTS} attempts:");
    println!(
        "  git worktree add ×{ATTEMPTS}        {:>8.0} ms",
        git_time.as_secs_f64() * 1e3
    );
    println!(
        "  git-orch dispatch ×{ATTEMPTS}        {:>8.0} ms  (branch + record + worktree + hooks)",
        orch_time.as_secs_f64() * 1e3
    );
    println!(
        "  ratio {:.2}×  (target ≤ 1.20×)",
        orch_time.as_secs_f64() / git_time.as_secs_f64()
    );

    // Footprint: a real `git orch run` with 16 agents sleeping 6 s each.
    let small = root.join("small");
    std::fs::create_dir_all(&small).expect("dir");
    git(&small, &["init", "-q", "-b", "main"]);
    for i in 0..ATTEMPTS {
        let d = small.join(format!("src/m{i:03}"));
        std::fs::create_dir_all(&d).expect("dir");
        std::fs::write(d.join("a"), "a").expect("file");
    }
    git(&small, &["add", "."]);
    git(&small, &["commit", "-q", "-m", "small"]);
    let run_orch = |args: &[&str]| {
        let mut cmd = Command::new(exe);
        cmd.current_dir(&small)
            .args(args)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env(
                "FAKE_AGENT_SCRIPT",
                "run sh -c \"sleep 6; d=${ORCH_OWNED_GLOBS%/**}; echo done > $d/done\"\n",
            )
            .env(
                "PATH",
                format!(
                    "{}:{}",
                    Path::new(env!("CARGO_MANIFEST_DIR"))
                        .join("fixtures/agents")
                        .display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            );
        cmd
    };
    std::fs::write(&plan_file, plan_json(ATTEMPTS, "y")).expect("plan");
    assert!(
        run_orch(&["plan", "add", &plan_file.to_string_lossy()])
            .status()
            .expect("add")
            .success()
    );
    assert!(
        run_orch(&["approve", "bench", "--approver", "b"])
            .status()
            .expect("approve")
            .success()
    );
    let child = run_orch(&["run", "bench", "--agent", "fake", "--cap", "16"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run");
    let pid = child.id();
    let cpu = |pid: u32| -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let f: Vec<&str> = stat
            .rsplit_once(") ")
            .map(|(_, r)| r)
            .unwrap_or("")
            .split_whitespace()
            .collect();
        let ticks: f64 = f.get(11).and_then(|u| u.parse().ok()).unwrap_or(0.0)
            + f.get(12).and_then(|s| s.parse().ok()).unwrap_or(0.0);
        ticks / 100.0
    };
    let hwm = |pid: u32| -> u64 {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    // Let all 16 start, then measure 3 s of sleeping.
    std::thread::sleep(Duration::from_millis(2000));
    let cpu0 = cpu(pid);
    std::thread::sleep(Duration::from_millis(3000));
    let cpu1 = cpu(pid);
    let peak_kb = hwm(pid);
    let out = child.wait_with_output().expect("wait");
    assert!(
        out.status.success(),
        "the footprint run failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    println!();
    println!("git orch run with {ATTEMPTS} sleeping agents:");
    println!(
        "  peak RSS  {:>6.1} MB  (target < 30 MB)",
        peak_kb as f64 / 1024.0
    );
    println!(
        "  CPU while they sleep: {:.0} ms over 3 s ({:.1}% of one core)",
        (cpu1 - cpu0) * 1e3,
        (cpu1 - cpu0) / 3.0 * 100.0
    );
}
