//! Growth benchmark: what reading state costs as the log grows.
//!
//! For logs of about 1k, 10k and 100k events (`ORCH_GROWTH_SIZES` to
//! change), a repository is given a history of finished runs written in
//! exactly git-orch's own log format (one operation per commit, as real
//! runs write them: one event per commit, except an attempt's verdicts
//! with its end and a landing with its keep update), packed as
//! `git gc` / `git maintenance` leave a long-lived repository. Then, in the
//! same run:
//!
//! * `git orch status <run>`, `git orch log --limit 20` and
//!   `git orch plan list`: median wall time and peak RSS, alternating with
//!   the git baseline `git log --oneline -20` + `git for-each-ref` on the
//!   same repository, each round after flushing dirty pages;
//! * the first `status` after the state cache is deleted (the one full
//!   read that rebuilds it);
//! * a real 30-subtask run (`git orch run` with an instant scripted agent,
//!   a real worktree, commit, gates and landing per subtask): wall time and
//!   peak RSS of the driver.
//!
//! Ratios are against the smallest size; the goal is ≤ 1.3 for the reads
//! and ≤ 1.2 for the run at 100k. Run with `cargo bench --bench growth`.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use common::{Measured, alternate, command, flush, git, measure, ms, orch};
use git_orch::event::{
    AgentUsage, Event, FORMAT_VERSION, Failure, GateMode, GateStatus, Outcome, Record, RunSettings,
    RunSummary, Verdict,
};
use git_orch::ids::{PlanId, RunId, TaskId, WriterId};
use git_orch::store::log::{commit_message, event_path, parse_trailers};

/// Subtasks of each run in the generated history.
const HISTORY_TASKS: usize = 5;
/// Subtasks of the real run.
const RUN_TASKS: usize = 30;

fn sizes() -> Vec<usize> {
    std::env::var("ORCH_GROWTH_SIZES")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1_000, 10_000, 100_000])
}

fn hex(n: u64, salt: u64) -> String {
    let h = blake3::hash(format!("{n}/{salt}").as_bytes());
    h.to_hex()[..40].to_owned()
}

fn verdict(gate: &str, command: Option<&str>) -> Verdict {
    Verdict {
        gate: gate.into(),
        mode: GateMode::Block,
        status: GateStatus::Pass,
        cached_pass: None,
        command: command.map(str::to_owned),
        duration_ms: 120,
        summary: format!("{gate}: 14 changed path(s) checked, nothing found"),
        tail: "running 12 tests\ntest result: ok. 12 passed; 0 failed\n".into(),
        details: serde_json::Value::Null,
    }
}

/// The operations (each one commit) of one finished run of the history
/// plan: every task dispatched, agent, result, five verdicts with the
/// end, an integration verdict and a landing.
fn history_run(k: u64, plan_hash: &str, approval: &str) -> Vec<Vec<Event>> {
    let run = RunId::new(format!("history-{k:06x}")).expect("run id");
    let mut ops = vec![vec![Event::RunStarted {
        run_id: run.clone(),
        plan_id: PlanId::new("history").expect("plan id"),
        revision: 1,
        plan_hash: plan_hash.into(),
        approval: approval.into(),
        // Its own branch: the history's commits are not in this repository,
        // and the real run's queue must not try to complete its landings.
        target: "history".into(),
        base: hex(k, 0),
        settings: RunSettings {
            cap: 4,
            agent: "fake".into(),
            fallback: vec![],
            timeout_secs: 120,
            budget_usd: None,
            retries: 2,
            breaker_failures: 5,
            breaker_retries: 20,
            breaker_empty: 3,
            workers: false,
            best_of: 1,
        },
        carried: Default::default(),
        by: None,
    }]];
    ops.push(vec![Event::RunResumed {
        run_id: run.clone(),
        pid: 4242,
        host: "bench".into(),
    }]);
    let mut old = hex(k, 0);
    for t in 0..HISTORY_TASKS {
        let task = TaskId::new(format!("h{t}")).expect("task id");
        let id = |what: &str| hex(k * 100 + t as u64, what.len() as u64);
        ops.push(vec![Event::AttemptCreated {
            run_id: run.clone(),
            task: task.clone(),
            attempt: 1,
            branch: format!("orch/{run}/{task}/attempt-1"),
            base: old.clone(),
            start: None,
            worktree: format!("/home/dev/proj.orch/{run}/{task}-1"),
            port: 20000 + t as u16 * 10,
            agent: "fake".into(),
            candidate: None,
        }]);
        ops.push(vec![Event::AttemptStarted {
            run_id: run.clone(),
            task: task.clone(),
            attempt: 1,
            pid: 5000 + t as u32,
            pgid: 5000 + t as u32,
            sandbox: None,
        }]);
        ops.push(vec![Event::AgentFinished {
            run_id: run.clone(),
            task: task.clone(),
            attempt: 1,
            exit: Some(0),
            signal: None,
            timed_out: false,
            duration_ms: 41_000,
            usage: AgentUsage {
                input_tokens: 21_000,
                output_tokens: 3_400,
                cost_usd: Some(0.0842),
                ..Default::default()
            },
            unavailable: None,
            tail: "Edited 3 files; all tests pass.\n".repeat(6),
            cause: None,
        }]);
        ops.push(vec![Event::AttemptResult {
            run_id: run.clone(),
            task: task.clone(),
            attempt: 1,
            commit: id("commit"),
            tree: id("tree"),
            changed: 3,
        }]);
        let mut end: Vec<Event> = [
            ("diff", None),
            ("scope", None),
            ("secrets", None),
            ("placeholders", None),
            ("verification", Some("cargo test -q")),
        ]
        .into_iter()
        .map(|(g, c)| Event::GateVerdict {
            run_id: run.clone(),
            task: task.clone(),
            attempt: 1,
            verdict: verdict(g, c),
        })
        .collect();
        end.push(Event::AttemptFinished {
            run_id: run.clone(),
            task: task.clone(),
            attempt: 1,
            outcome: Outcome::Passed,
            failure: None::<Failure>,
        });
        ops.push(end);
        let candidate = id("candidate");
        ops.push(vec![Event::IntegrationVerdict {
            run_id: run.clone(),
            candidate: candidate.clone(),
            tree: id("ctree"),
            attempts: vec![format!("{task}/1")],
            verdict: verdict("integration", Some("cargo test -q")),
        }]);
        ops.push(vec![Event::Landed {
            run_id: run.clone(),
            task: task.clone(),
            attempt: 1,
            target: "history".into(),
            old: old.clone(),
            new: candidate.clone(),
            strategy: "rebase".into(),
            commits: vec![candidate.clone()],
        }]);
        old = candidate;
    }
    ops.push(vec![Event::RunFinished {
        run_id: run,
        summary: RunSummary {
            tasks: HISTORY_TASKS,
            done: HISTORY_TASKS,
            attempts: HISTORY_TASKS,
            gate_runs: HISTORY_TASKS * 2,
            cost_usd: 0.42,
            duration_ms: 300_000,
            ..Default::default()
        },
    }]);
    ops
}

/// Appends about `events` events of finished history runs to this clone's
/// log with `git fast-import`, continuing its seq and clock, in git-orch's
/// own tree layout and commit format; then packs the repository. Returns
/// the newest run's id.
fn write_history(repo: &Path, events: usize) -> String {
    let writer = git(repo, &["config", "orch.writerId"]);
    let writer_id = WriterId::new(&writer).expect("writer id");
    let log_ref = format!("refs/orch/log/{writer}");
    let pos =
        parse_trailers(&git(repo, &["log", "-1", "--format=%B", &log_ref])).unwrap_or_default();
    // The history plan's hash and approval, as `approve` recorded them.
    let approval = orch(repo, &["log", "--json"])
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("json"))
        .find(|e| e["type"] == "approval_recorded" && e["plan_id"] == "history")
        .expect("the history plan is approved");
    let (hash, commit) = (
        approval["hash"].as_str().expect("hash").to_owned(),
        approval["commit"].as_str().expect("commit").to_owned(),
    );
    let mut child = command("git", repo)
        .args(["fast-import", "--quiet", "--done"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("fast-import");
    let mut input = std::io::BufWriter::new(child.stdin.take().expect("stdin"));
    let (mut seq, mut clock) = (pos.seq, pos.clock);
    let mut written = 0;
    let mut first = true;
    let mut k = 0;
    let time = 1_767_225_600i64; // 2026-01-01
    while written < events {
        for op in history_run(k, &hash, &commit) {
            let records: Vec<Record> = op
                .into_iter()
                .map(|event| {
                    seq += 1;
                    clock += 1;
                    Record {
                        version: FORMAT_VERSION,
                        writer: writer_id.clone(),
                        seq,
                        clock,
                        time_ms: (time + clock as i64) * 1000,
                        event,
                    }
                })
                .collect();
            written += records.len();
            let message = commit_message(&writer_id, &records);
            writeln!(input, "commit {log_ref}").expect("write");
            writeln!(
                input,
                "committer git-orch <git-orch@localhost> {} +0000",
                time + clock as i64
            )
            .expect("write");
            writeln!(input, "data {}\n{message}", message.len()).expect("write");
            if first {
                writeln!(input, "from {log_ref}^0").expect("write");
                first = false;
            }
            for r in &records {
                let bytes = serde_json::to_vec(r).expect("record");
                let id =
                    gix::objs::compute_hash(gix::hash::Kind::Sha1, gix::objs::Kind::Blob, &bytes)
                        .expect("hash");
                writeln!(input, "M 100644 inline {}", event_path(r.seq, id)).expect("write");
                writeln!(input, "data {}", bytes.len()).expect("write");
                input.write_all(&bytes).expect("write");
                writeln!(input).expect("write");
            }
        }
        k += 1;
    }
    writeln!(input, "done").expect("write");
    drop(input);
    assert!(child.wait().expect("fast-import").success(), "fast-import");
    git(repo, &["gc", "-q"]);
    format!("history-{:06x}", k - 1)
}

fn plan_json(id: &str, prefix: &str, n: usize) -> String {
    let subtasks: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            serde_json::json!({
                "id": format!("{prefix}{i}"),
                "title": format!("Task {prefix}{i}"),
                "owned_globs": [format!("src/{prefix}{i}/**")],
                "deliverable": format!("{prefix}{i} done"),
                "verification": format!("test -f src/{prefix}{i}/done"),
            })
        })
        .collect();
    serde_json::json!({"version": 1, "id": id, "instruction": "bench", "subtasks": subtasks})
        .to_string()
}

/// A repository with the history plan and the 30-task plan approved, a
/// history of about `events` events (and its newest run), and agent
/// scripts for the real run.
fn setup(root: &Path, events: usize) -> (PathBuf, Option<String>) {
    let repo = root.join(format!("growth-{events}"));
    let _ = std::fs::remove_dir_all(&repo);
    let _ = std::fs::remove_dir_all(root.join(format!("growth-{events}.orch")));
    std::fs::create_dir_all(&repo).expect("dir");
    git(&repo, &["init", "-q", "-b", "main"]);
    for (prefix, n) in [("h", HISTORY_TASKS), ("t", RUN_TASKS)] {
        for i in 0..n {
            let d = repo.join(format!("src/{prefix}{i}"));
            std::fs::create_dir_all(&d).expect("dir");
            std::fs::write(d.join("README"), "x\n").expect("file");
        }
    }
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "project"]);
    orch(&repo, &["init"]);
    let plans = root.join(format!("growth-{events}-plans"));
    std::fs::create_dir_all(&plans).expect("dir");
    let history = plans.join("history.json");
    std::fs::write(&history, plan_json("history", "h", HISTORY_TASKS)).expect("plan");
    orch(&repo, &["plan", "add", &history.to_string_lossy()]);
    orch(&repo, &["approve", "history"]);
    let newest = (events > 0).then(|| write_history(&repo, events));
    let proj = plans.join("proj.json");
    std::fs::write(&proj, plan_json("proj", "t", RUN_TASKS)).expect("plan");
    orch(&repo, &["plan", "add", &proj.to_string_lossy()]);
    orch(&repo, &["approve", "proj"]);
    let scripts = plans.join("scripts");
    std::fs::create_dir_all(&scripts).expect("dir");
    for i in 0..RUN_TASKS {
        std::fs::write(
            scripts.join(format!("t{i}.script")),
            format!("write src/t{i}/done yes\n"),
        )
        .expect("script");
    }
    (repo, newest)
}

struct Row {
    events: usize,
    status: Measured,
    log: Measured,
    plans: Measured,
    git: Duration,
    cold: Measured,
    run: Option<Measured>,
}

fn timed(repo: &Path, args: &[&str], rounds: usize) -> Measured {
    let mut walls = Vec::new();
    let mut rss = 0;
    for _ in 0..rounds {
        flush();
        let m = measure({
            let mut c = command(common::orch_bin(), repo);
            c.args(args);
            c
        });
        walls.push(m.wall);
        rss = rss.max(m.max_rss_kb);
    }
    Measured {
        wall: common::median(&mut walls),
        max_rss_kb: rss,
    }
}

fn main() {
    let root = common::bench_root().join("orch-growth");
    std::fs::create_dir_all(&root).expect("root");
    println!(
        "growth bench in {} ({}), binary {}",
        root.display(),
        common::fs_type(&root),
        common::orch_bin().display()
    );
    let mut rows = Vec::new();
    let mut fresh_run = None;
    for events in std::iter::once(0).chain(sizes()) {
        let (repo, newest) = setup(&root, events);
        let scripts = root.join(format!("growth-{events}-plans/scripts"));
        let real_run = || {
            let mut c = command(common::orch_bin(), &repo);
            c.args(["run", "proj", "--agent", "fake"])
                .env("FAKE_AGENT_DIR", &scripts);
            flush();
            measure(c)
        };
        let Some(status_run) = newest else {
            // The fresh repository only serves as the run's baseline.
            fresh_run = Some(real_run());
            continue;
        };
        let _ = std::fs::remove_dir_all(repo.join(".git/orch/state"));
        let cold = timed(&repo, &["status", &status_run], 1);
        let status = timed(&repo, &["status", &status_run], 5);
        let log = timed(&repo, &["log", "--limit", "20"], 5);
        let plans = timed(&repo, &["plan", "list"], 5);
        let (_, git_side) = alternate(
            5,
            || timed(&repo, &["status", &status_run], 1).wall,
            || {
                let start = std::time::Instant::now();
                git(&repo, &["log", "--oneline", "-20"]);
                git(&repo, &["for-each-ref"]);
                start.elapsed()
            },
        );
        rows.push(Row {
            events,
            status,
            log,
            plans,
            git: git_side,
            cold,
            run: Some(real_run()),
        });
    }
    let base = &rows[0];
    println!();
    println!(
        "{:>8}  {:>22}  {:>22}  {:>22}  {:>10}  {:>12}",
        "events", "status", "log --limit 20", "plan list", "git log+refs", "cold status"
    );
    for r in &rows {
        let cell = |m: &Measured, b: &Measured| {
            format!(
                "{} {:.2}x {}MB",
                ms(m.wall),
                m.wall.as_secs_f64() / b.wall.as_secs_f64(),
                m.max_rss_kb / 1024
            )
        };
        println!(
            "{:>8}  {:>22}  {:>22}  {:>22}  {:>10}  {:>12}",
            r.events,
            cell(&r.status, &base.status),
            cell(&r.log, &base.log),
            cell(&r.plans, &base.plans),
            ms(r.git),
            ms(r.cold.wall),
        );
    }
    if let Some(fresh) = fresh_run {
        println!();
        println!(
            "30-subtask run, fresh repository: {} ({} MB peak RSS)",
            ms(fresh.wall),
            fresh.max_rss_kb / 1024
        );
        for r in &rows {
            if let Some(run) = r.run {
                println!(
                    "30-subtask run at {:>6} events: {} ({} MB peak RSS), {:.2}x the fresh run",
                    r.events,
                    ms(run.wall),
                    run.max_rss_kb / 1024,
                    run.wall.as_secs_f64() / fresh.wall.as_secs_f64()
                );
            }
        }
    }
}
