//! Warm worktrees benchmark (issue 28): what a warm `target/` saves an
//! attempt of a real Rust project. A generated project depending on clap
//! (derive), regex, serde (derive) and serde_json, fetched by cargo in the
//! setup (crates.io), is built once in its main checkout; then, side by
//! side in one run, rounds alternating:
//!
//! - **incremental** (the baseline, the physical limit): a one-line
//!   change and `cargo build --offline` in the main checkout;
//! - **warm attempt**: `git orch run` of one subtask whose fake agent
//!   makes a one-line change, verified by `cargo build --offline`, with
//!   `[worktree] cache = target/ ~/.cargo`;
//! - **cold attempt** (today): the same without `target/` among the
//!   caches (`~/.cargo` stays, so neither side downloads: the cold
//!   side compiles every dependency in the gate's fresh checkout, which is
//!   what an attempt did before).
//!
//! An attempt's time is its run's wall time, with the integration gate
//! set to `true` (the landing costs milliseconds); the verification
//! verdict's own duration is printed beside it. Then 8 attempts at cap 8,
//! whose agents also build in their worktrees (cleanup off), and the disk
//! their checkouts hold against one warm `target/`.
//!
//! Every command runs in the bubblewrap sandbox (`sandbox = bwrap`); the
//! project's `target/` lives in the bench's folder (`CARGO_TARGET_DIR`
//! unset for every command), crates in `~/.cargo`. Run with `cargo bench
//! --bench warm`; `ORCH_WARM_ROUNDS` (default 3) sets the rounds of the
//! fast sides, `ORCH_WARM_COLD` (default 1) the cold attempts.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const SUBTASKS: usize = 8;

const CARGO_TOML: &str = r#"[package]
name = "warmproj"
version = "0.1.0"
edition = "2021"

[dependencies]
clap = { version = "4", features = ["derive"] }
regex = "1"
serde = { version = "1", features = ["derive"] }
serde_json = "1"
"#;

fn main_rs() -> String {
    let mut s = String::new();
    for t in 0..SUBTASKS {
        s.push_str(&format!("mod t{t};\n"));
    }
    s.push_str(
        r#"
use clap::Parser;
use serde::{Deserialize, Serialize};

/// Counts the words of a text that match a pattern.
#[derive(Parser, Debug)]
struct Args {
    #[arg(long, default_value = "[a-z]+")]
    pattern: String,
    text: Vec<String>,
}

#[derive(Serialize, Deserialize, Debug)]
struct Report {
    pattern: String,
    matches: usize,
    parts: Vec<u32>,
}

fn main() {
    let args = Args::parse();
    let re = regex::Regex::new(&args.pattern).expect("a pattern");
    let matches = args.text.iter().filter(|w| re.is_match(w)).count();
    let parts = vec!["#,
    );
    let calls: Vec<String> = (0..SUBTASKS).map(|t| format!("t{t}::value()")).collect();
    s.push_str(&calls.join(", "));
    s.push_str(
        r#"];
    let report = Report { pattern: args.pattern, matches, parts };
    println!("{}", serde_json::to_string(&report).expect("json"));
}
"#,
    );
    s
}

/// The environment every cargo and git-orch command of the bench gets:
/// the toolchain where rustup keeps it, no inherited target folder or
/// jobserver.
fn cargo_env(cmd: &mut Command) {
    for var in [
        "CARGO_TARGET_DIR",
        "CARGO_HOME",
        "CARGO_BUILD_TARGET_DIR",
        "CARGO_MAKEFLAGS",
        "MAKEFLAGS",
        "MFLAGS",
        "RUSTC_WRAPPER",
        "RUSTFLAGS",
    ] {
        cmd.env_remove(var);
    }
    if std::env::var_os("RUSTUP_HOME").is_none()
        && let Some(home) = std::env::var_os("HOME")
    {
        let rustup = Path::new(&home).join(".rustup");
        if rustup.is_dir() {
            cmd.env("RUSTUP_HOME", rustup);
        }
    }
}

fn cargo(dir: &Path, args: &[&str]) -> Duration {
    let mut cmd = common::command("cargo", dir);
    cmd.args(args);
    cargo_env(&mut cmd);
    let start = Instant::now();
    let out = cmd.output().expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    start.elapsed()
}

/// The project `name` with `caches` as its `[worktree] cache` (and the
/// sandbox's view of the toolchain), its plan of `SUBTASKS` subtasks
/// stored and approved, crates fetched, `target/` built once.
fn project(root: &Path, name: &str, caches: &str, agent_builds: bool, planned: usize) -> PathBuf {
    let repo = root.join(name);
    std::fs::create_dir_all(repo.join("src")).expect("dir");
    common::git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("Cargo.toml"), CARGO_TOML).expect("toml");
    std::fs::write(repo.join(".gitignore"), "target/\n").expect("ignore");
    std::fs::write(repo.join("src/main.rs"), main_rs()).expect("main");
    let mut subtasks = Vec::new();
    for t in 0..SUBTASKS {
        std::fs::write(
            repo.join(format!("src/t{t}.rs")),
            format!("pub fn value() -> u32 {{\n    {t}\n}}\n"),
        )
        .expect("module");
        if t >= planned {
            continue;
        }
        subtasks.push(serde_json::json!({
            "id": format!("t{t}"), "title": format!("Change t{t}"),
            "owned_globs": [format!("src/t{t}.rs")], "deliverable": "a one-line change",
            "verification": "cargo build --offline",
        }));
    }
    let rustup = std::env::var("RUSTUP_HOME").unwrap_or_else(|_| "~/.rustup".into());
    let rustup = match std::env::var("HOME") {
        Ok(h) if rustup.starts_with(&h) => format!("~{}", &rustup[h.len()..]),
        _ => rustup,
    };
    std::fs::create_dir_all(repo.join(".orch")).expect("dir");
    std::fs::write(
        repo.join(".orch/config"),
        format!(
            "[orch]\n    sandbox = bwrap\n    cap = 8\n{}[sandbox]\n    roBind = {rustup}\n[integration]\n    run = true\n[worktree]\n    cache = {caches}\n",
            if agent_builds { "    cleanup = never\n" } else { "" }
        ),
    )
    .expect("config");
    // The lock file is committed: every checkout builds the same crates.
    cargo(&repo, &["generate-lockfile"]);
    cargo(&repo, &["fetch"]);
    common::git(&repo, &["add", "."]);
    common::git(&repo, &["commit", "-q", "-m", "project"]);
    let file = root.join(format!("{name}.plan.json"));
    let plan = serde_json::json!({"version": 1, "id": "warm", "instruction": "Change every module",
        "subtasks": subtasks});
    std::fs::write(&file, plan.to_string()).expect("plan");
    common::orch(&repo, &["plan", "add", &file.to_string_lossy()]);
    common::orch(&repo, &["approve", "warm"]);
    repo
}

/// One run of the plan (`--new --redo-all`: every task again); returns
/// its wall time and the longest verification verdict it recorded.
fn attempt(repo: &Path, builds: bool) -> (Duration, Duration) {
    let mut cmd = common::command(common::orch_bin(), repo);
    cmd.args(["run", "warm", "--agent", "fake", "--new", "--redo-all"]);
    cargo_env(&mut cmd);
    // A one-line change; with `builds`, the agent checks its work too.
    let script = if builds {
        "run sh -c 'sed -i \"s/^    [0-9]*$/    $(date +%N)/\" src/$ORCH_TASK.rs && cargo build --offline -q'\n"
    } else {
        "run sh -c 'sed -i \"s/^    [0-9]*$/    $(date +%N)/\" src/$ORCH_TASK.rs'\n"
    };
    // Cargo's home at its real place (the sandbox's HOME is private),
    // seen warm through `~/.cargo` among the caches.
    if let Some(home) = std::env::var_os("HOME") {
        cmd.env("CARGO_HOME", Path::new(&home).join(".cargo"));
    }
    cmd.env("FAKE_AGENT_SCRIPT", script)
        .env("GIT_ORCH_PASS_ENV", "FAKE_*")
        .env_remove("GIT_ORCH_SANDBOX");
    let start = Instant::now();
    let out = cmd.output().expect("git orch run");
    let wall = start.elapsed();
    assert!(
        out.status.success(),
        "git orch run: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let log = common::orch(repo, &["log", "--json", "--limit", "400"]);
    let verdict = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["type"] == "gate_verdict" && e["verdict"]["gate"] == "verification")
        .filter_map(|e| e["verdict"]["duration_ms"].as_u64())
        .next_back()
        .unwrap_or(0);
    (wall, Duration::from_millis(verdict))
}

/// A one-line change of `src/t0.rs` in the main checkout, then an
/// incremental build there.
fn incremental(repo: &Path) -> Duration {
    let file = repo.join("src/t0.rs");
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    std::fs::write(
        &file,
        format!("pub fn value() -> u32 {{\n    {nanos}\n}}\n"),
    )
    .expect("edit");
    let took = cargo(repo, &["build", "--offline", "-q"]);
    common::git(repo, &["checkout", "-q", "--", "src/t0.rs"]);
    took
}

/// Kilobytes `du` counts under `paths` together (shared blocks once).
fn disk_kb(paths: &[PathBuf]) -> u64 {
    let mut cmd = Command::new("du");
    cmd.arg("-skc");
    for p in paths.iter().filter(|p| p.exists()) {
        cmd.arg(p);
    }
    let out = cmd.output().expect("du");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

fn main() {
    if !Command::new("bwrap")
        .args(["--ro-bind", "/", "/", "true"])
        .status()
        .is_ok_and(|s| s.success())
    {
        println!("bubblewrap does not work here; the warm caches' overlay needs it");
        return;
    }
    let rounds = common::env_number("ORCH_WARM_ROUNDS", 3);
    let cold_rounds = common::env_number("ORCH_WARM_COLD", 1);
    let root = tempfile::Builder::new()
        .prefix("orch-warm-bench")
        .tempdir_in(common::bench_root())
        .expect("temp dir");
    println!("warm bench on {}", common::machine(root.path()));
    let warm = project(root.path(), "warm", "target/ ~/.cargo", false, 1);
    let cold = project(root.path(), "cold", "~/.cargo", false, 1);
    let first = cargo(&warm, &["build", "--offline", "-q"]);
    println!(
        "cold build in the main checkout: {} (clap, regex, serde, serde_json; debug)",
        secs(first)
    );
    let notices = common::command(common::orch_bin(), &warm)
        .args(["agents", "fake"])
        .output()
        .expect("agents");
    for l in String::from_utf8_lossy(&notices.stdout)
        .lines()
        .filter(|l| {
            l.starts_with("worktree:") || l.starts_with("sandbox:") || l.starts_with("warning:")
        })
    {
        println!("{l}");
    }
    // One attempt each untimed: the first run of a project pays for what
    // both sides share (the state cache, the sandbox's probes).
    attempt(&warm, false);
    let (mut inc, mut warm_runs, mut warm_verdicts) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..rounds {
        let mut w = || {
            common::flush();
            let (wall, verdict) = attempt(&warm, false);
            warm_runs.push(wall);
            warm_verdicts.push(verdict);
        };
        let mut b = || {
            common::flush();
            inc.push(incremental(&warm));
        };
        if i % 2 == 0 {
            w();
            b();
        } else {
            b();
            w();
        }
    }
    let (mut cold_runs, mut cold_verdicts) = (Vec::new(), Vec::new());
    for _ in 0..cold_rounds {
        common::flush();
        let (wall, verdict) = attempt(&cold, false);
        cold_runs.push(wall);
        cold_verdicts.push(verdict);
    }
    let inc = common::median(&mut inc);
    let warm_run = common::median(&mut warm_runs);
    let warm_verdict = common::median(&mut warm_verdicts);
    let cold_run = common::median(&mut cold_runs);
    let cold_verdict = common::median(&mut cold_verdicts);
    println!();
    println!("| side | median | verification verdict |");
    println!("|---|---|---|");
    println!(
        "| incremental build in the main checkout (baseline) | {} | |",
        secs(inc)
    );
    println!(
        "| warm attempt ([worktree] cache = target/) | {} | {} |",
        secs(warm_run),
        secs(warm_verdict)
    );
    println!(
        "| cold attempt (no target/ cache, as before) | {} | {} |",
        secs(cold_run),
        secs(cold_verdict)
    );
    println!(
        "warm attempt / incremental build: {:.2}x; cold attempt / warm attempt: {:.1}x ({rounds} rounds, {cold_rounds} cold)",
        warm_run.as_secs_f64() / inc.as_secs_f64(),
        cold_run.as_secs_f64() / warm_run.as_secs_f64()
    );
    // Disk: 8 attempts at cap 8, agents building in their worktrees too.
    let many = project(root.path(), "many", "target/ ~/.cargo", true, SUBTASKS);
    // The same crates, built once: a copy of the first project's target/
    // (Cargo keys its caches on paths relative to the workspace).
    let copied = Command::new("cp")
        .args(["-a"])
        .arg(warm.join("target"))
        .arg(many.join("target"))
        .status()
        .expect("cp");
    assert!(copied.success(), "copying target/");
    cargo(&many, &["build", "--offline", "-q"]);
    let target_kb = disk_kb(&[many.join("target")]);
    let (wall, _) = attempt(&many, true);
    let checkouts = vec![many.join(".git/orch/warm"), root.path().join("many.orch")];
    let used_kb = disk_kb(&checkouts);
    println!(
        "{SUBTASKS} attempts at cap 8 (each agent builds too, {}): their checkouts and cache layers hold {:.1} MB; one warm target/ is {:.1} MB: {:.2}x",
        secs(wall),
        used_kb as f64 / 1024.0,
        target_kb as f64 / 1024.0,
        used_kb as f64 / target_kb as f64
    );
    println!(
        "load average after: {}",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    // Cleanup: the attempts' layers hold files overlayfs made unreadable.
    let _ = common::command(common::orch_bin(), &many)
        .args(["cleanup", "--all-completed", "--force"])
        .output();
}
