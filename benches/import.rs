//! Import benchmark: what it costs git-orch to take an agent's commits
//! out of its worktree's own git folder, beside git doing the same work.
//!
//! A repository of `ORCH_IMPORT_FILES` (default 2,000) files in nested
//! folders; per round, two checkouts of it made as an attempt's worktree
//! is (a quarantine git folder borrowing the repository's objects), in
//! each of which an "agent" makes `ORCH_IMPORT_COMMITS` (default 20)
//! commits, each changing three files in different folders and adding
//! one (content unique to the round and side, so nothing is in the
//! repository already). Then, timed, dirty pages flushed before each side
//! and the order alternating from round to round (`ORCH_IMPORT_ROUNDS`,
//! default 7):
//!
//! * git-orch: `Store::import_quarantine`, in process: HEAD and the branch
//!   read as data, every new loose object re-hashed, parsed, checked
//!   canonical and free of refused paths, connectivity followed, then
//!   written to the repository;
//! * git: `git fetch` of the branch from that git folder into the
//!   repository with `fetch.fsckObjects` (the checks git makes of objects
//!   it takes from elsewhere), the honest CLI equivalent of a checked
//!   import.
//!
//! Printed: the median of each side, the ratio, and the goal (git-orch
//! under 50 ms for 20 commits). Run with `cargo bench --bench import`.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{flush, git, median, ms};
use git_orch::store::Store;
use git_orch::store::quarantine::{CheckoutPaths, ImportLimits};

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// The repository: `files` files under `d<i>/e<j>/`.
fn repository(dir: &Path, files: usize) {
    std::fs::create_dir_all(dir).expect("dir");
    git(dir, &["init", "-q", "-b", "main"]);
    for i in 0..files {
        let p = dir.join(format!("d{}/e{}/f{i}.txt", i % 20, i % 7));
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, format!("file {i}\n")).expect("write");
    }
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "base"]);
    git(dir, &["gc", "-q"]);
}

/// A checkout of `start` in which an agent made `commits` commits with
/// content unique to `tag`.
fn agent_work(
    store: &Store,
    root: &Path,
    tag: &str,
    start: git_orch::store::Oid,
    commits: usize,
) -> CheckoutPaths {
    let paths = CheckoutPaths {
        dir: root.join(format!("wt-{tag}")),
        index: root.join(format!("index-{tag}")),
    };
    store
        .make_checkout(&paths, start, "orch/bench/t/attempt-1")
        .expect("checkout");
    for c in 0..commits {
        for k in 0..3 {
            let i = (c * 3 + k) * 37 % 2000;
            let p = paths.dir.join(format!("d{}/e{}/f{i}.txt", i % 20, i % 7));
            if p.exists() {
                std::fs::write(&p, format!("{tag} commit {c} change {k}\n")).expect("write");
            }
        }
        std::fs::write(
            paths.dir.join(format!("d{}/new-{tag}-{c}.txt", c % 20)),
            format!("{tag} {c}\n"),
        )
        .expect("write");
        git(&paths.dir, &["add", "-A"]);
        git(
            &paths.dir,
            &["commit", "-q", "-m", &format!("{tag} step {c}")],
        );
    }
    paths
}

fn main() {
    let files = env_number("ORCH_IMPORT_FILES", 2000).max(10);
    let commits = env_number("ORCH_IMPORT_COMMITS", 20).max(1);
    let rounds = env_number("ORCH_IMPORT_ROUNDS", 7).max(1);
    let tmp = tempfile::Builder::new()
        .prefix("orch-bench-import-")
        .tempdir_in(common::bench_root())
        .expect("tmp");
    let root = tmp.path();
    println!(
        "import benchmark: an agent's {commits} commits on a {files}-file repository, {rounds} rounds"
    );
    println!("  {}", common::machine(root));
    let repo = root.join("repo");
    repository(&repo, files);
    let store = Store::open(&repo).expect("store");
    let start = store
        .resolve_commit("HEAD")
        .expect("head")
        .expect("a commit");
    let (mut orch, mut raw) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let a = agent_work(&store, root, &format!("orch{round}"), start, commits);
        let b = agent_work(&store, root, &format!("git{round}"), start, commits);
        let time_orch = || {
            flush();
            let t = Instant::now();
            let imported = store
                .import_quarantine(
                    &a.dir,
                    "orch/bench/t/attempt-1",
                    start,
                    ImportLimits::default(),
                )
                .expect("import");
            let d = t.elapsed();
            assert_eq!(imported.commits, commits);
            d
        };
        let time_git = || {
            flush();
            let q = b.dir.join(".git");
            let t = Instant::now();
            git(
                &repo,
                &[
                    "-c",
                    "fetch.fsckObjects=true",
                    "fetch",
                    "-q",
                    "--no-tags",
                    &q.to_string_lossy(),
                    &format!("refs/heads/orch/bench/t/attempt-1:refs/bench/{round}"),
                ],
            );
            t.elapsed()
        };
        if round % 2 == 0 {
            orch.push(time_orch());
            raw.push(time_git());
        } else {
            raw.push(time_git());
            orch.push(time_orch());
        }
    }
    let (o, g): (Duration, Duration) = (median(&mut orch), median(&mut raw));
    println!();
    println!(
        "  {:<58} {:>10}",
        "git-orch import (in process, checked)",
        ms(o)
    );
    println!(
        "  {:<58} {:>10}",
        "git fetch from the git folder, fetch.fsckObjects",
        ms(g)
    );
    println!(
        "  ratio git-orch / git: {:.2}x; goal: under 50 ms for {commits} commits ({})",
        o.as_secs_f64() / g.as_secs_f64(),
        if o < Duration::from_millis(50) {
            "met"
        } else {
            "missed"
        }
    );
}
