//! Gate benchmark, in one run:
//!
//! 1. The overhead of the gate stack over running the same commands
//!    directly (three command gates of 200 ms each, plus the built-in gates
//!    on a small change).
//! 2. The built-in diff-based gates (diff, scope, secrets, placeholders) on
//!    a change of 10,000 files, beside `git diff` producing the same diff.
//! 3. The same gates judging every commit of an attempt made of 20 commits
//!    (each editing 50 of those files), as they do for what lands, beside
//!    the net diff alone and beside `git log -p base..result`, which
//!    produces the same per-commit diffs; rounds rotate the order of the
//!    three sides, flushed before each, medians printed.
//!
//! Run with `cargo bench --bench gates`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use git_orch::config::Settings;
use git_orch::event::GateMode;
use git_orch::gate::{self, GateDef, GateKind, Subject};
use git_orch::store::Store;

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
    assert!(out.status.success(), "git {args:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn subtask(globs: &[&str]) -> git_orch::plan::Subtask {
    serde_json::from_value(serde_json::json!({
        "id": "bench", "title": "t", "owned_globs": globs, "deliverable": "d", "verification": "true"
    }))
    .expect("subtask")
}

fn builtin_defs() -> Vec<GateDef> {
    [
        ("diff", GateKind::Diff, GateMode::Block),
        ("scope", GateKind::Scope, GateMode::Block),
        ("secrets", GateKind::Secrets, GateMode::Block),
        ("placeholders", GateKind::Placeholders, GateMode::Warn),
    ]
    .into_iter()
    .map(|(n, k, m)| GateDef {
        name: n.into(),
        kind: k,
        mode: m,
        timeout: Duration::from_secs(60),
    })
    .collect()
}

async fn evaluate(subject: &Subject, defs: &[GateDef]) -> Duration {
    let cancel = tokio_util::sync::CancellationToken::new();
    let none = git_orch::state::VerdictCache::new();
    let start = Instant::now();
    let out = gate::evaluate(subject, defs, &none, &cancel)
        .await
        .expect("gates");
    let elapsed = start.elapsed();
    assert!(out.failure.is_none(), "{:?}", out.failure);
    elapsed
}

fn main() {
    let tmp = tempfile::Builder::new()
        .prefix("orch-bench-gates-")
        .tempdir_in(
            std::env::var_os("ORCH_BENCH_DIR").map_or_else(std::env::temp_dir, PathBuf::from),
        )
        .expect("tmp");
    let root = tmp.path();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    println!("gate benchmark in {}", root.display());

    // 1. Overhead over running the commands directly.
    let repo = root.join("small");
    std::fs::create_dir_all(repo.join("src")).expect("dir");
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("src/a.rs"), "fn a() {}\n").expect("file");
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "base"]);
    let base = git(&repo, &["rev-parse", "HEAD^{tree}"]);
    std::fs::write(repo.join("src/a.rs"), "fn a() { let x = 1; }\n").expect("file");
    git(&repo, &["commit", "-q", "-am", "change"]);
    let result = git(&repo, &["rev-parse", "HEAD^{tree}"]);
    let result_commit = git(&repo, &["rev-parse", "HEAD"]);
    let store = Store::open(&repo).expect("store");
    let commands = ["sleep 0.2", "sleep 0.2", "sleep 0.2"];
    let mut defs = builtin_defs();
    for (i, c) in commands.iter().enumerate() {
        defs.push(GateDef {
            name: format!("cmd{i}"),
            kind: GateKind::Command { run: (*c).into() },
            mode: GateMode::Block,
            timeout: Duration::from_secs(60),
        });
    }
    let subject = Subject {
        on_gate: None,
        common_dir: store.common_dir().to_owned(),
        task: subtask(&["src/**"]),
        attempt: 1,
        base_tree: store.parse_oid(&base).expect("oid"),
        result_tree: store.parse_oid(&result).expect("oid"),
        steps: Vec::new(),
        every_commit: false,
        result: store.parse_oid(&result_commit).expect("oid"),
        scratch: store.common_dir().join("orch/scratch/bench-gates"),
        env: gate::GateEnv::default(),
        log_dir: root.join("logs"),
        writer_agent: "fake".into(),
        settings: Settings::default(),
    };
    let runs = 5;
    let direct = (0..runs)
        .map(|_| {
            let start = Instant::now();
            for c in commands {
                assert!(
                    Command::new("sh")
                        .args(["-c", c])
                        .current_dir(&repo)
                        .status()
                        .expect("sh")
                        .success()
                );
            }
            start.elapsed()
        })
        .min()
        .expect("runs");
    let stacked = (0..runs)
        .map(|_| rt.block_on(evaluate(&subject, &defs)))
        .min()
        .expect("runs");
    let overhead = stacked.saturating_sub(direct);
    let allowed = direct.mul_f64(0.05) + Duration::from_millis(50);
    println!();
    println!("gate stack vs the same commands run directly (3 × `sleep 0.2`):");
    println!(
        "  commands directly      {:>7.1} ms",
        direct.as_secs_f64() * 1e3
    );
    println!(
        "  gate stack             {:>7.1} ms  (plus diff, scope, secrets, placeholders)",
        stacked.as_secs_f64() * 1e3
    );
    println!(
        "  overhead               {:>7.1} ms  (target ≤ 5% + 50 ms = {:.1} ms)",
        overhead.as_secs_f64() * 1e3,
        allowed.as_secs_f64() * 1e3
    );

    // 2. Built-in gates on a 10,000-file change.
    let big = root.join("big");
    std::fs::create_dir_all(&big).expect("dir");
    git(&big, &["init", "-q", "-b", "main"]);
    for d in 0..100 {
        let dir = big.join(format!("src/m{d:02}"));
        std::fs::create_dir_all(&dir).expect("dir");
        for f in 0..100 {
            std::fs::write(
                dir.join(format!("f{f:02}.rs")),
                format!("fn f{d}_{f}() {{}}\n"),
            )
            .expect("file");
        }
    }
    git(&big, &["add", "."]);
    git(&big, &["commit", "-q", "-m", "base"]);
    let base_commit = git(&big, &["rev-parse", "HEAD"]);
    for d in 0..100 {
        for f in 0..100 {
            let p = big.join(format!("src/m{d:02}/f{f:02}.rs"));
            let mut text = std::fs::read_to_string(&p).expect("read");
            text.push_str(&format!("fn g{d}_{f}() -> u32 {{ {f} }}\n"));
            std::fs::write(p, text).expect("write");
        }
    }
    git(&big, &["commit", "-q", "-am", "change everything"]);
    let result_commit = git(&big, &["rev-parse", "HEAD"]);
    let store = Store::open(&big).expect("store");
    let subject = Subject {
        on_gate: None,
        common_dir: store.common_dir().to_owned(),
        task: subtask(&["src/**"]),
        attempt: 1,
        base_tree: store
            .commit_info(store.parse_oid(&base_commit).expect("oid"))
            .expect("c")
            .tree,
        result_tree: store
            .commit_info(store.parse_oid(&result_commit).expect("oid"))
            .expect("c")
            .tree,
        steps: Vec::new(),
        every_commit: false,
        result: store.parse_oid(&result_commit).expect("oid"),
        scratch: store.common_dir().join("orch/scratch/bench-big"),
        env: gate::GateEnv::default(),
        log_dir: root.join("logs-big"),
        writer_agent: "fake".into(),
        settings: Settings::default(),
    };
    let builtins = (0..3)
        .map(|_| rt.block_on(evaluate(&subject, &builtin_defs())))
        .min()
        .expect("runs");
    let git_diff = (0..3)
        .map(|_| {
            let start = Instant::now();
            let _ = git(&big, &["diff", &base_commit, &result_commit]);
            start.elapsed()
        })
        .min()
        .expect("runs");
    println!();
    println!("built-in gates on a 10,000-file change (10,000 added lines):");
    println!(
        "  diff + scope + secrets + placeholders  {:>7.1} ms",
        builtins.as_secs_f64() * 1e3
    );
    println!(
        "  `git diff base result` alone           {:>7.1} ms  (ratio {:.2}×)",
        git_diff.as_secs_f64() * 1e3,
        builtins.as_secs_f64() / git_diff.as_secs_f64()
    );

    // 3. Every commit of a 20-commit attempt judged, against the net diff
    // alone and against `git log -p` of the range.
    const COMMITS: usize = 20;
    const FILES_PER_COMMIT: usize = 50;
    let range_base = result_commit.clone();
    for c in 0..COMMITS {
        for i in 0..FILES_PER_COMMIT {
            let k = c * FILES_PER_COMMIT + i;
            let p = big.join(format!("src/m{:02}/f{:02}.rs", k / 100, k % 100));
            let mut text = std::fs::read_to_string(&p).expect("read");
            text.push_str(&format!("fn h{c}_{i}() -> u32 {{ {k} }}\n"));
            std::fs::write(p, text).expect("write");
        }
        git(&big, &["commit", "-q", "-am", &format!("step {c}")]);
    }
    let tip = git(&big, &["rev-parse", "HEAD"]);
    let (range_base_oid, tip_oid) = (
        store.parse_oid(&range_base).expect("oid"),
        store.parse_oid(&tip).expect("oid"),
    );
    let steps = store.commit_steps(range_base_oid, tip_oid).expect("steps");
    assert_eq!(steps.len(), COMMITS);
    let judged = |steps: Vec<git_orch::store::CommitStep>, logs: &str| Subject {
        on_gate: None,
        common_dir: store.common_dir().to_owned(),
        task: subtask(&["src/**"]),
        attempt: 1,
        base_tree: store.commit_info(range_base_oid).expect("c").tree,
        result_tree: store.commit_info(tip_oid).expect("c").tree,
        every_commit: !steps.is_empty(),
        steps,
        result: tip_oid,
        scratch: store.common_dir().join("orch/scratch/bench-history"),
        env: gate::GateEnv::default(),
        log_dir: root.join(logs),
        writer_agent: "fake".into(),
        settings: Settings::default(),
    };
    let history = judged(steps, "logs-history");
    let net_only = judged(Vec::new(), "logs-net");
    // Rounds rotate which side goes first; dirty pages are written back
    // before each side; medians of the rounds.
    let (mut every, mut net, mut log_p) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..6 {
        for side in 0..3 {
            // SAFETY: sync(2) takes no arguments and cannot fail.
            unsafe { libc::sync() };
            match (side + round) % 3 {
                0 => every.push(rt.block_on(evaluate(&history, &builtin_defs()))),
                1 => net.push(rt.block_on(evaluate(&net_only, &builtin_defs()))),
                _ => {
                    let start = Instant::now();
                    let _ = git(
                        &big,
                        &["log", "-p", "--format=%H", &format!("{range_base}..{tip}")],
                    );
                    log_p.push(start.elapsed());
                }
            }
        }
    }
    let median = |xs: &mut Vec<Duration>| {
        xs.sort();
        xs[xs.len() / 2]
    };
    let (every, net, log_p) = (median(&mut every), median(&mut net), median(&mut log_p));
    println!();
    println!(
        "built-in gates on an attempt of {COMMITS} commits × {FILES_PER_COMMIT} files, judged commit by commit:"
    );
    println!(
        "  every commit judged                    {:>7.1} ms",
        every.as_secs_f64() * 1e3
    );
    println!(
        "  the net diff only (before this issue)  {:>7.1} ms",
        net.as_secs_f64() * 1e3
    );
    println!(
        "  `git log -p base..result` alone        {:>7.1} ms  (ratio {:.2}×)",
        log_p.as_secs_f64() * 1e3,
        every.as_secs_f64() / log_p.as_secs_f64()
    );
}
