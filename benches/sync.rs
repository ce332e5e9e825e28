//! Sharing benchmark: `git orch sync` of a big log between two clones
//! beside plain `git fetch` of the same refs, and the round-trip latency of
//! a worker's claim against a local bare remote, in one run.
//!
//! 1. Two clones are up to date with the remote; clone A then publishes
//!    10,000 new events (1,000 operations of 10). One clone runs
//!    `git orch sync`, the other `git fetch origin
//!    '+refs/orch/*:refs/orch-remotes/origin/*'` (sync's fetch step alone,
//!    without integrating or pushing). Best of 3.
//! 2. Claims: writing a claim commit and pushing it without force to a new
//!    claim ref (what a worker does per task), beside a plain `git push` of
//!    a commit to a new ref. Median of 30.
//!
//! Run with `cargo bench --bench sync`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use git_orch::store::Store;
use git_orch::store::remote::{Claim, Pushed};

const EVENTS: u64 = 10_000;
const PER_OPERATION: u64 = 10;
const CLAIMS: usize = 30;

fn cmd(program: &str, dir: &Path) -> Command {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_git-orch"));
    let mut c = Command::new(program);
    c.current_dir(dir)
        .env(
            "PATH",
            format!(
                "{}:{}",
                exe.parent().expect("bin dir").display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.com")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.com");
    c
}

fn run(program: &str, dir: &Path, args: &[&str]) -> String {
    let out = cmd(program, dir).args(args).output().expect("runs");
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn timed(program: &str, dir: &Path, args: &[&str]) -> Duration {
    let start = Instant::now();
    run(program, dir, args);
    start.elapsed()
}

fn fresh_clone(root: &Path, bare: &Path, name: &str) -> PathBuf {
    let dir = root.join(name);
    let _ = std::fs::remove_dir_all(&dir);
    run(
        "git",
        root,
        &[
            "clone",
            "-q",
            &bare.to_string_lossy(),
            &dir.to_string_lossy(),
        ],
    );
    dir
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let tmp = tempfile::Builder::new()
        .prefix("orch-bench-sync-")
        .tempdir_in(
            std::env::var_os("ORCH_BENCH_DIR").map_or_else(std::env::temp_dir, PathBuf::from),
        )
        .expect("tmp");
    let root = tmp.path();
    println!(
        "sync benchmark ({EVENTS} events in {} operations; {CLAIMS} claims), in {}",
        EVENTS / PER_OPERATION,
        root.display()
    );
    let bare = root.join("remote.git");
    run(
        "git",
        root,
        &[
            "init",
            "-q",
            "--bare",
            "-b",
            "main",
            &bare.to_string_lossy(),
        ],
    );
    let a = root.join("a");
    run(
        "git",
        root,
        &["init", "-q", "-b", "main", &a.to_string_lossy()],
    );
    std::fs::write(a.join("README"), "x\n").expect("write");
    run("git", &a, &["add", "."]);
    run("git", &a, &["commit", "-q", "-m", "init"]);
    run(
        "git",
        &a,
        &["remote", "add", "origin", &bare.to_string_lossy()],
    );
    run("git", &a, &["push", "-q", "origin", "main"]);
    run("git", &a, &["orch", "init", "--remote", "origin"]);
    run("git", &a, &["orch", "sync"]);

    // 1. sync vs fetch: two clones that are up to date, then A publishes
    // 10,000 new events and each clone takes them in.
    let mut sync = Vec::new();
    let mut fetch = Vec::new();
    for round in 0..3 {
        let s = fresh_clone(root, &bare, &format!("s{round}"));
        run("git", &s, &["orch", "init", "--remote", "origin"]);
        run("git", &s, &["orch", "sync"]);
        let f = fresh_clone(root, &bare, &format!("f{round}"));
        let refspec = "+refs/orch/*:refs/orch-remotes/origin/*";
        run("git", &f, &["fetch", "-q", "origin", refspec]);
        run(
            "git",
            &a,
            &[
                "orch",
                "debug",
                "append",
                "--count",
                &EVENTS.to_string(),
                "--batch",
                &PER_OPERATION.to_string(),
            ],
        );
        run("git", &a, &["orch", "sync"]);
        sync.push(timed("git", &s, &["orch", "sync"]));
        let read = run("git", &s, &["orch", "log", "--json", "--limit", "1"]);
        assert!(!read.is_empty(), "the synced clone reads the log");
        fetch.push(timed("git", &f, &["fetch", "-q", "origin", refspec]));
    }
    let (sync, fetch) = (
        sync.into_iter().min().expect("rounds"),
        fetch.into_iter().min().expect("rounds"),
    );

    // 2. Claims against the local bare remote, in process as a worker does.
    let store = Store::open(&a).expect("store");
    let mut claim_times = Vec::new();
    for i in 0..CLAIMS {
        let claim = Claim {
            version: 1,
            run: "bench-run".into(),
            what: format!("task-{i}"),
            attempt: 1,
            writer: "bench".into(),
            host: "bench".into(),
            pid: 1,
            lease_secs: 60,
            claimed_ms: 0,
        };
        let start = Instant::now();
        let commit = store.write_claim(&claim, None).expect("claim");
        let pushed = store
            .push_atomic(
                "origin",
                &[(commit, Store::claim_ref("bench-run", &format!("task-{i}")))],
            )
            .expect("push");
        claim_times.push(start.elapsed());
        assert_eq!(pushed, Pushed::Accepted);
    }
    let head = run("git", &a, &["rev-parse", "HEAD"]);
    let mut push_times = Vec::new();
    for i in 0..CLAIMS {
        push_times.push(timed(
            "git",
            &a,
            &[
                "push",
                "-q",
                "origin",
                &format!("{head}:refs/bench/plain-{i}"),
            ],
        ));
    }
    let (claim, push) = (median(claim_times), median(push_times));

    println!();
    println!(
        "git orch sync (fetch + integrate + push)   {:>8.0} ms",
        ms(sync)
    );
    println!(
        "git fetch of refs/orch/*                   {:>8.0} ms",
        ms(fetch)
    );
    println!(
        "ratio {:.2}×  (target ≤ 1.50×)",
        sync.as_secs_f64() / fetch.as_secs_f64()
    );
    println!();
    println!(
        "claim round trip (commit + non-forced push) {:>7.1} ms  median of {CLAIMS}",
        ms(claim)
    );
    println!(
        "plain git push of a new ref                 {:>7.1} ms",
        ms(push)
    );
    println!("ratio {:.2}×", claim.as_secs_f64() / push.as_secs_f64());
}
