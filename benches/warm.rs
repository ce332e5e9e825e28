//! Warm worktrees benchmark (issue 28): what a warm `target/` saves an
//! attempt of a real Rust project. The project is ripgrep 14.1.1's
//! published source, downloaded from crates.io in the setup (its checksum
//! checked against the registry's), unpacked as a git repository and built
//! once in its main checkout (`cargo test --no-run`); then, side by side in
//! one run, rounds alternating:
//!
//! - **incremental** (the baseline, the physical limit): a one-line change
//!   (a new function) in `crates/core/search.rs` and `cargo test --no-run
//!   --offline --features pcre2` in the main checkout;
//! - **warm attempt**: `git orch run` of one subtask whose fake agent makes
//!   the same kind of change there, verified by the same command, with
//!   `[worktree] cache = target/ ~/.cargo`;
//! - **cold attempt** (before this issue): the same without `target/`
//!   among the caches (`~/.cargo` stays, so neither side downloads: the
//!   cold side compiles every dependency in the gate's fresh checkout).
//!
//! An attempt's figure is the time from `git orch run`'s start to its
//! verification verdict (the verdict's own duration and the whole run,
//! with a `true` integration gate and the landing, are printed beside it).
//! Then 8 attempts at cap 8, whose agents also build in their worktrees
//! (cleanup off), and the disk their checkouts hold against one warm
//! `target/`.
//!
//! Every command runs in the bubblewrap sandbox (`sandbox = bwrap`); the
//! project's `target/` lives in the bench's folder (`CARGO_TARGET_DIR`
//! unset for every command), crates in `~/.cargo`. Run with `cargo bench
//! --bench warm` (it needs `curl`, `sha256sum` and `tar`);
//! `ORCH_WARM_ROUNDS` (default 5) sets the rounds of the fast sides,
//! `ORCH_WARM_COLD` (default 1) the cold attempts.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

/// The crate whose published source is the project.
const CRATE: &str = "ripgrep";
const VERSION: &str = "14.1.1";
/// Its `.crate` file's SHA-256, as the crates.io index lists it.
const SHA256: &str = "f77b8032dc584527975f34aa5a897d0ef5a785573fda778771a614ff9da501d9";

/// The files the subtasks change, one each (the first is the baseline's).
const FILES: [&str; 8] = [
    "crates/core/search.rs",
    "crates/core/haystack.rs",
    "crates/core/logger.rs",
    "crates/core/messages.rs",
    "crates/core/main.rs",
    "crates/core/flags/hiargs.rs",
    "crates/core/flags/lowargs.rs",
    "crates/core/flags/parse.rs",
];

/// The verification of every subtask, and the baseline's build: ripgrep
/// as its releases are built, with PCRE2 (a C library compiled by its
/// build script), tests included.
const VERIFY: &str = "cargo test --no-run --offline --features pcre2";

/// The one-line change: a new function named and valued by `tag`.
fn edit_line(tag: &str) -> String {
    format!("#[allow(dead_code)] fn orch_edit_{tag}() -> u64 {{ {tag} }}")
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

/// The project's published source, downloaded once into the bench's
/// folder and checked against the registry's checksum.
fn crate_file() -> PathBuf {
    let file = common::bench_root().join(format!("{CRATE}-{VERSION}.crate"));
    let sum = |f: &Path| -> String {
        let out = Command::new("sha256sum")
            .arg(f)
            .output()
            .expect("sha256sum");
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_owned()
    };
    if !file.is_file() || sum(&file) != SHA256 {
        let url = format!("https://static.crates.io/crates/{CRATE}/{CRATE}-{VERSION}.crate");
        let got = Command::new("curl")
            .args(["-sSfL", "--retry", "3", "-o"])
            .arg(&file)
            .arg(&url)
            .status()
            .expect("curl");
        assert!(got.success(), "downloading {url}");
    }
    assert_eq!(
        sum(&file),
        SHA256,
        "{} is not the published crate",
        file.display()
    );
    file
}

/// The project `name` with `caches` as its `[worktree] cache` (and the
/// sandbox's view of the toolchain), its plan of `planned` subtasks
/// stored and approved, crates fetched. Not built.
fn project(root: &Path, name: &str, caches: &str, agent_builds: bool, planned: usize) -> PathBuf {
    let repo = root.join(name);
    std::fs::create_dir_all(&repo).expect("dir");
    let unpacked = Command::new("tar")
        .args(["xzf"])
        .arg(crate_file())
        .arg("-C")
        .arg(&repo)
        .arg("--strip-components=1")
        .status()
        .expect("tar");
    assert!(unpacked.success(), "unpacking the crate");
    common::git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join(".gitignore"), "target/\n").expect("ignore");
    let subtasks: Vec<_> = FILES
        .iter()
        .take(planned)
        .enumerate()
        .map(|(t, file)| {
            serde_json::json!({
                "id": format!("t{t}"), "title": format!("Change {file}"),
                "owned_globs": [file], "deliverable": "a one-line change",
                "verification": VERIFY,
            })
        })
        .collect();
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
    // The published lock file: every checkout builds the same crates.
    cargo(&repo, &["fetch"]);
    common::git(&repo, &["add", "."]);
    common::git(&repo, &["commit", "-q", "-m", "ripgrep 14.1.1"]);
    let file = root.join(format!("{name}.plan.json"));
    let plan = serde_json::json!({"version": 1, "id": "warm", "instruction": "Change ripgrep",
        "subtasks": subtasks});
    std::fs::write(&file, plan.to_string()).expect("plan");
    common::orch(&repo, &["plan", "add", &file.to_string_lossy()]);
    common::orch(&repo, &["approve", "warm"]);
    repo
}

/// What one run of the plan took.
struct Attempted {
    /// From `git orch run`'s start to the last verification verdict.
    to_verdict: Duration,
    /// That verdict's own duration.
    verdict: Duration,
    /// The whole run, landing included.
    wall: Duration,
}

/// One run of the plan (`--new --redo-all`: every task again).
fn attempt(repo: &Path, builds: bool) -> Attempted {
    let mut cmd = common::command(common::orch_bin(), repo);
    cmd.args(["run", "warm", "--agent", "fake", "--new", "--redo-all"]);
    cargo_env(&mut cmd);
    // A one-line change in the task's file; with `builds`, the agent
    // checks its work too.
    let cases: String = FILES
        .iter()
        .enumerate()
        .map(|(t, f)| format!("t{t}) f={f};; "))
        .collect();
    let change = format!(
        "case $ORCH_TASK in {cases}esac; n=$(date +%N); echo \"{}\" >> $f",
        edit_line("$n")
    );
    let script = if builds {
        format!("run sh -c '{change} && cargo build --offline -q'\n")
    } else {
        format!("run sh -c '{change}'\n")
    };
    // Cargo's home at its real place (the sandbox's HOME is private),
    // seen warm through `~/.cargo` among the caches.
    if let Some(home) = std::env::var_os("HOME") {
        cmd.env("CARGO_HOME", Path::new(&home).join(".cargo"));
    }
    cmd.env("FAKE_AGENT_SCRIPT", script)
        .env("GIT_ORCH_PASS_ENV", "FAKE_*")
        .env_remove("GIT_ORCH_SANDBOX");
    let started = SystemTime::now();
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
    let (at_ms, took_ms) = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["type"] == "gate_verdict" && e["verdict"]["gate"] == "verification")
        .filter_map(|e| {
            Some((
                e["time_ms"].as_u64()?,
                e["verdict"]["duration_ms"].as_u64()?,
            ))
        })
        .next_back()
        .expect("a verification verdict");
    let started_ms = started
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    Attempted {
        to_verdict: Duration::from_millis(at_ms.saturating_sub(started_ms)),
        verdict: Duration::from_millis(took_ms),
        wall,
    }
}

/// The same one-line change of the first subtask's file in the main
/// checkout, then an incremental build there.
fn incremental(repo: &Path) -> Duration {
    use std::io::Write;
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(repo.join(FILES[0]))
        .expect("the file");
    writeln!(file, "{}", edit_line(&nanos.to_string())).expect("edit");
    drop(file);
    let args: Vec<&str> = VERIFY.split(' ').skip(1).collect();
    let took = cargo(repo, &args);
    common::git(repo, &["checkout", "-q", "--", FILES[0]]);
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
    let rounds = common::env_number("ORCH_WARM_ROUNDS", 5);
    let cold_rounds = common::env_number("ORCH_WARM_COLD", 1);
    let root = tempfile::Builder::new()
        .prefix("orch-warm-bench")
        .tempdir_in(common::bench_root())
        .expect("temp dir");
    println!("warm bench on {}", common::machine(root.path()));
    println!("load average before: {}", load());
    let warm = project(root.path(), "warm", "target/ ~/.cargo", false, 1);
    let cold = project(root.path(), "cold", "~/.cargo", false, 1);
    let args: Vec<&str> = VERIFY.split(' ').skip(1).collect();
    let first = cargo(&warm, &args);
    println!(
        "{CRATE} {VERSION}: cold `{VERIFY}` in the main checkout: {}",
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
    // One round of each side untimed: the first run of a project pays for
    // what both sides share (the state cache, the sandbox's probes).
    attempt(&warm, false);
    incremental(&warm);
    let (mut inc, mut warm_to, mut warm_verdicts, mut warm_walls) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..rounds {
        let mut w = || {
            common::flush();
            let a = attempt(&warm, false);
            warm_to.push(a.to_verdict);
            warm_verdicts.push(a.verdict);
            warm_walls.push(a.wall);
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
    let (mut cold_to, mut cold_verdicts, mut cold_walls) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..cold_rounds {
        common::flush();
        let a = attempt(&cold, false);
        cold_to.push(a.to_verdict);
        cold_verdicts.push(a.verdict);
        cold_walls.push(a.wall);
    }
    let inc = common::median(&mut inc);
    let (warm_to, warm_verdict, warm_wall) = (
        common::median(&mut warm_to),
        common::median(&mut warm_verdicts),
        common::median(&mut warm_walls),
    );
    let (cold_to, cold_verdict, cold_wall) = (
        common::median(&mut cold_to),
        common::median(&mut cold_verdicts),
        common::median(&mut cold_walls),
    );
    println!();
    println!("| side (medians) | to the verification verdict | the verdict itself | whole run |");
    println!("|---|---|---|---|");
    println!(
        "| incremental `{VERIFY}` in the main checkout (baseline) | {} | | |",
        secs(inc)
    );
    println!(
        "| warm attempt (`[worktree] cache = target/ ~/.cargo`) | {} | {} | {} |",
        secs(warm_to),
        secs(warm_verdict),
        secs(warm_wall)
    );
    println!(
        "| cold attempt (no `target/` cache, as before) | {} | {} | {} |",
        secs(cold_to),
        secs(cold_verdict),
        secs(cold_wall)
    );
    println!(
        "warm attempt to its verdict / incremental build: {:.2}x (the verdict alone {:.2}x); cold / warm attempt to the verdict: {:.1}x ({rounds} rounds, {cold_rounds} cold)",
        warm_to.as_secs_f64() / inc.as_secs_f64(),
        warm_verdict.as_secs_f64() / inc.as_secs_f64(),
        cold_to.as_secs_f64() / warm_to.as_secs_f64()
    );
    // Disk: 8 attempts at cap 8, agents building in their worktrees too.
    let many = project(root.path(), "many", "target/ ~/.cargo", true, FILES.len());
    // The same crates, built once: a copy of the first project's target/
    // (cargo keys its dependencies' caches on paths relative to the
    // workspace), brought up to date.
    let copied = Command::new("cp")
        .arg("-a")
        .arg(warm.join("target"))
        .arg(many.join("target"))
        .status()
        .expect("cp");
    assert!(copied.success(), "copying target/");
    cargo(&many, &args);
    let target_kb = disk_kb(&[many.join("target")]);
    let a = attempt(&many, true);
    let checkouts = vec![many.join(".git/orch/warm"), root.path().join("many.orch")];
    let used_kb = disk_kb(&checkouts);
    println!(
        "{} attempts at cap 8 (each agent builds too, {}): their checkouts and cache layers hold {:.1} MB; one warm target/ is {:.1} MB: {:.2}x",
        FILES.len(),
        secs(a.wall),
        used_kb as f64 / 1024.0,
        target_kb as f64 / 1024.0,
        used_kb as f64 / target_kb as f64
    );
    println!("load average after: {}", load());
    // Cleanup: the attempts' layers hold files overlayfs made unreadable.
    let _ = common::command(common::orch_bin(), &many)
        .args(["cleanup", "--all-completed", "--force"])
        .output();
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}
