//! Web benchmark: `git orch web` serving a run from a long history.
//!
//! A clone gets about 100k events of finished history runs (each a 5-task
//! run written in git-orch's own log format, one operation per commit, as
//! `benches/growth.rs` writes them) and, newest, an unfinished run of a
//! 30-task plan with dependencies: 20 tasks landed, 3 failed after a retry,
//! 3 running, 4 pending. The repository is packed, and `git orch status`
//! runs once so the state cache is what a user's clone holds.
//!
//! Then, in `ORCH_WEB_ROUNDS` rounds (default 20), alternating which side
//! goes first and flushing before each:
//!
//! * the run page of that run from one long-lived `git orch web`: the
//!   server's own time (its `Server-Timing` header) and the request's wall
//!   time;
//! * the baseline: `git orch status <run> --json`, the terminal's view of
//!   the same data (a process that opens the repository and the state
//!   cache and renders the same rows).
//!
//! Printed: medians side by side and their ratio, the server's resident
//! memory (now and peak, from /proc) after serving every page kind, and,
//! for the record, a cold start without the state cache. Goals: the run
//! page under 200 ms of server time, the server under 60 MB.
//! `cargo bench --bench web` (a few minutes: the history's setup is most
//! of it).

mod common;

use std::io::{BufRead, Read, Write};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{command, flush, git, ms, orch};
use git_orch::event::{
    AgentUsage, Event, FORMAT_VERSION, Failure, FailureClass, GateMode, GateStatus, Outcome,
    Record, RunSettings, RunSummary, Verdict,
};
use git_orch::ids::{PlanId, RunId, TaskId, WriterId};
use git_orch::store::log::parse_trailers;

/// Tasks of each history run, and of the measured run.
const HISTORY_TASKS: usize = 5;
const BIG_TASKS: usize = 30;

fn hex(n: u64, salt: u64) -> String {
    blake3::hash(format!("{n}/{salt}").as_bytes()).to_hex()[..40].to_owned()
}

fn settings() -> RunSettings {
    RunSettings {
        cap: 4,
        agent: "fake".into(),
        fallback: vec![],
        timeout_secs: 120,
        budget_usd: None,
        retries: 1,
        breaker_failures: 5,
        breaker_retries: 20,
        breaker_empty: 3,
        workers: false,
        best_of: 1,
    }
}

fn verdict(gate: &str, pass: bool) -> Verdict {
    Verdict {
        gate: gate.into(),
        mode: GateMode::Block,
        status: if pass {
            GateStatus::Pass
        } else {
            GateStatus::Fail
        },
        cached_pass: None,
        command: (gate == "verification").then(|| "cargo test -q".to_owned()),
        duration_ms: 120,
        summary: format!("{gate}: 3 changed path(s) checked"),
        tail: "running 12 tests\ntest result: ok. 12 passed; 0 failed\n".into(),
        details: serde_json::Value::Null,
        inputs: None,
    }
}

/// The operations of one attempt of `task` in `run`: created, started,
/// the agent's end with its result, the verdicts with the end; then, when
/// it passed and `land`, the integration verdict with the landing.
fn attempt(
    run: &RunId,
    task: &TaskId,
    n: u32,
    k: u64,
    passed: bool,
    land: bool,
    old: &mut String,
) -> Vec<Vec<Event>> {
    let id = |what: &str| hex(k, what.len() as u64 + u64::from(n) * 100);
    let mut ops = vec![
        vec![Event::AttemptCreated {
            run_id: run.clone(),
            task: task.clone(),
            attempt: n,
            branch: format!("orch/{run}/{task}/attempt-{n}"),
            base: old.parse().expect("hex"),
            start: None,
            worktree: format!("/home/dev/proj.orch/{run}/{task}-{n}"),
            port: 20000,
            agent: "fake".into(),
            candidate: None,
            foreign_branch: false,
        }],
        vec![Event::AttemptStarted {
            run_id: run.clone(),
            task: task.clone(),
            attempt: n,
            pid: 5000,
            pgid: 5000,
            sandbox: None,
        }],
        vec![
            Event::AgentFinished {
                run_id: run.clone(),
                task: task.clone(),
                attempt: n,
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
            },
            Event::AttemptResult {
                run_id: run.clone(),
                task: task.clone(),
                attempt: n,
                commit: id("commit").parse().expect("hex"),
                tree: id("tree").parse().expect("hex"),
                changed: 3,
                control_paths: Vec::new(),
            },
        ],
    ];
    let mut end: Vec<Event> = ["diff", "scope", "secrets", "placeholders", "verification"]
        .into_iter()
        .map(|g| Event::GateVerdict {
            run_id: run.clone(),
            task: task.clone(),
            attempt: n,
            verdict: verdict(g, passed || g != "verification"),
        })
        .collect();
    end.push(Event::AttemptFinished {
        run_id: run.clone(),
        task: task.clone(),
        attempt: n,
        outcome: if passed {
            Outcome::Passed
        } else {
            Outcome::Failed
        },
        failure: (!passed).then(|| Failure {
            class: FailureClass::Gate,
            reason: "verification failed: exit 101".into(),
        }),
    });
    ops.push(end);
    if passed && land {
        let candidate = id("candidate");
        ops.push(vec![
            Event::IntegrationVerdict {
                run_id: run.clone(),
                candidate: candidate.parse().expect("hex"),
                tree: id("ctree").parse().expect("hex"),
                attempts: vec![format!("{task}/{n}")],
                verdict: verdict("integration", true),
            },
            Event::Landed {
                run_id: run.clone(),
                task: task.clone(),
                attempt: n,
                target: "history".into(),
                old: old.parse().expect("hex"),
                new: candidate.parse().expect("hex"),
                strategy: "rebase".into(),
                commits: vec![candidate.parse().expect("hex")],
            },
        ]);
        *old = candidate;
    }
    ops
}

fn started(run: &RunId, plan: &str, hash: &str, approval: &str, base: &str) -> Vec<Event> {
    vec![Event::RunStarted {
        run_id: run.clone(),
        plan_id: PlanId::new(plan).expect("plan id"),
        revision: 1,
        plan_hash: hash.into(),
        approval: approval.parse().expect("hex"),
        target: "history".into(),
        base: base.parse().expect("hex"),
        settings: settings(),
        carried: Default::default(),
        by: None,
    }]
}

/// One finished 5-task history run.
fn history_run(k: u64, hash: &str, approval: &str) -> Vec<Vec<Event>> {
    let run = RunId::new(format!("history-{k:06x}")).expect("run id");
    let mut old = hex(k, 0);
    let mut ops = vec![started(&run, "history", hash, approval, &old)];
    for t in 0..HISTORY_TASKS {
        let task = TaskId::new(format!("h{t}")).expect("task id");
        ops.extend(attempt(
            &run,
            &task,
            1,
            k * 100 + t as u64,
            true,
            true,
            &mut old,
        ));
    }
    ops.push(vec![Event::RunFinished {
        run_id: run,
        summary: RunSummary {
            tasks: HISTORY_TASKS,
            done: HISTORY_TASKS,
            attempts: HISTORY_TASKS,
            gate_runs: HISTORY_TASKS * 5,
            cost_usd: Some(0.42),
            duration_ms: 300_000,
            ..Default::default()
        },
        closed: None,
    }]);
    ops
}

/// The measured run: 20 landed, 3 failed twice, 3 running, 4 pending.
fn big_run(hash: &str, approval: &str) -> Vec<Vec<Event>> {
    let run = RunId::new("big-run").expect("run id");
    let mut old = hex(999_999, 0);
    let mut ops = vec![started(&run, "big", hash, approval, &old)];
    for t in 0..BIG_TASKS {
        let task = TaskId::new(format!("b{t}")).expect("task id");
        let k = 10_000_000 + t as u64;
        match t {
            0..20 => ops.extend(attempt(&run, &task, 1, k, true, true, &mut old)),
            20..23 => {
                ops.extend(attempt(&run, &task, 1, k, false, false, &mut old));
                ops.extend(attempt(&run, &task, 2, k, false, false, &mut old));
            }
            23..26 => ops.extend(
                attempt(&run, &task, 1, k, true, false, &mut old)
                    .into_iter()
                    .take(2),
            ),
            _ => {}
        }
    }
    ops
}

/// The 30-task plan: task i depends on task i-5 (six waves of five).
fn big_plan() -> String {
    let subtasks: Vec<serde_json::Value> = (0..BIG_TASKS)
        .map(|i| {
            let deps: Vec<String> = if i >= 5 {
                vec![format!("b{}", i - 5)]
            } else {
                vec![]
            };
            serde_json::json!({
                "id": format!("b{i}"), "title": format!("Task b{i}"),
                "owned_globs": [format!("src/b{i}/**")], "deliverable": "done",
                "verification": format!("test -f src/b{i}/done"), "depends_on": deps,
            })
        })
        .collect();
    serde_json::json!({"version": 1, "id": "big", "instruction": "bench", "subtasks": subtasks})
        .to_string()
}

fn history_plan() -> String {
    let subtasks: Vec<serde_json::Value> = (0..HISTORY_TASKS)
        .map(|i| {
            serde_json::json!({
                "id": format!("h{i}"), "title": format!("Task h{i}"),
                "owned_globs": [format!("src/h{i}/**")], "deliverable": "done",
                "verification": format!("test -f src/h{i}/done"),
            })
        })
        .collect();
    serde_json::json!({"version": 1, "id": "history", "instruction": "bench", "subtasks": subtasks})
        .to_string()
}

/// The hash and approval commit `approve` recorded for `plan`.
fn approval_of(repo: &Path, plan: &str) -> (String, String) {
    let e = orch(repo, &["log", "--json"])
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("json"))
        .find(|e| e["type"] == "approval_recorded" && e["plan_id"] == plan)
        .expect("approved");
    (
        e["hash"].as_str().expect("hash").to_owned(),
        e["commit"].as_str().expect("commit").to_owned(),
    )
}

/// A repository with about `events` events of history and the big run.
fn setup(repo: &Path, events: usize) {
    let _ = std::fs::remove_dir_all(repo);
    std::fs::create_dir_all(repo).expect("dir");
    git(repo, &["init", "-q", "-b", "main"]);
    for i in 0..BIG_TASKS {
        let d = repo.join(format!("src/b{i}"));
        std::fs::create_dir_all(&d).expect("dir");
        std::fs::write(d.join("README"), "x\n").expect("file");
    }
    git(repo, &["add", "."]);
    git(repo, &["commit", "-q", "-m", "project"]);
    orch(repo, &["init"]);
    for (id, text) in [("history", history_plan()), ("big", big_plan())] {
        let file = repo.with_extension(format!("{id}.json"));
        std::fs::write(&file, text).expect("plan");
        orch(repo, &["plan", "add", &file.to_string_lossy()]);
        orch(repo, &["approve", id]);
        let _ = std::fs::remove_file(file);
    }
    let (h_hash, h_approval) = approval_of(repo, "history");
    let (b_hash, b_approval) = approval_of(repo, "big");
    let writer = git(repo, &["config", "orch.writerId"]);
    let writer_id = WriterId::new(&writer).expect("writer");
    let pos = parse_trailers(&git(
        repo,
        &[
            "log",
            "-1",
            "--format=%B",
            &format!("refs/orch/log/{writer}"),
        ],
    ))
    .unwrap_or_default();
    let (mut seq, mut clock) = (pos.seq, pos.clock);
    let time = 1_767_225_600i64;
    let mut ops: Vec<Vec<Record>> = Vec::new();
    let mut written = 0;
    let mut push = |op: Vec<Event>, ops: &mut Vec<Vec<Record>>| {
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
        let n = records.len();
        ops.push(records);
        n
    };
    let mut k = 0;
    while written < events {
        for op in history_run(k, &h_hash, &h_approval) {
            written += push(op, &mut ops);
        }
        k += 1;
    }
    for op in big_run(&b_hash, &b_approval) {
        written += push(op, &mut ops);
    }
    common::fast_import_log(repo, &writer_id, ops);
    git(repo, &["gc", "-q"]);
    println!("history: {written} events in {k} finished runs and the measured run");
}

/// A running `git orch web` and its URL.
struct Server {
    child: Child,
    port: u16,
    base: String,
}

impl Server {
    fn start(repo: &Path) -> (Server, Duration) {
        let start = Instant::now();
        let mut child = command(common::orch_bin(), repo)
            .arg("web")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("git orch web");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("url");
        let took = start.elapsed();
        let rest = line
            .trim()
            .strip_prefix("http://127.0.0.1:")
            .expect("a URL")
            .to_owned();
        let (port, token) = rest.split_once('/').expect("port/token");
        (
            Server {
                child,
                port: port.parse().expect("port"),
                base: format!("/{}", token.trim_end_matches('/')),
            },
            took,
        )
    }

    /// GET `path` under the token: wall time, server time, body length.
    fn get(&self, path: &str) -> (Duration, Duration, usize) {
        let start = Instant::now();
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        write!(
            s,
            "GET {}{path} HTTP/1.0\r\nHost: 127.0.0.1:{}\r\n\r\n",
            self.base, self.port
        )
        .expect("request");
        let mut text = String::new();
        s.read_to_string(&mut text).expect("response");
        let wall = start.elapsed();
        assert!(
            text.lines()
                .next()
                .and_then(|l| l.split_whitespace().nth(1))
                == Some("200"),
            "{}",
            &text[..text.len().min(300)]
        );
        let server = text
            .lines()
            .find_map(|l| {
                l.to_lowercase()
                    .strip_prefix("server-timing: render;dur=")
                    .map(str::to_owned)
            })
            .and_then(|v| v.trim().parse::<f64>().ok())
            .expect("a Server-Timing header");
        (wall, Duration::from_secs_f64(server / 1000.0), text.len())
    }

    /// (resident now, peak) in kB.
    fn rss_kb(&self) -> (u64, u64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("proc status");
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        (field("VmRSS:"), field("VmHWM:"))
    }

    fn stop(mut self) {
        let pid = self.child.id() as libc::pid_t;
        assert!(pid > 1);
        // SAFETY: our own child, not reaped yet.
        unsafe { libc::kill(pid, libc::SIGINT) };
        let _ = self.child.wait();
    }
}

fn median(v: &mut [Duration]) -> Duration {
    common::median(v)
}

fn main() {
    let root = common::bench_root().join("orch-web");
    std::fs::create_dir_all(&root).expect("root");
    let events = common::env_number("ORCH_WEB_EVENTS", 100_000);
    let rounds = common::env_number("ORCH_WEB_ROUNDS", 20).max(1);
    let repo = root.join("repo");
    println!("machine: {}", common::machine(&root));
    let t = Instant::now();
    setup(&repo, events);
    println!("setup took {:.0} s", t.elapsed().as_secs_f64());
    // The state cache as a user's clone has it.
    orch(&repo, &["status", "big-run"]);

    let (server, startup) = Server::start(&repo);
    // Warm both sides once.
    server.get("/runs/big-run");
    orch(&repo, &["status", "big-run", "--json"]);
    let (mut web_server, mut web_wall, mut baseline) = (Vec::new(), Vec::new(), Vec::new());
    let mut page_bytes = 0;
    for i in 0..rounds {
        let mut web = || {
            flush();
            let (wall, server_time, bytes) = server.get("/runs/big-run");
            web_wall.push(wall);
            web_server.push(server_time);
            page_bytes = bytes;
        };
        let mut status = || {
            flush();
            let start = Instant::now();
            let out = command(common::orch_bin(), &repo)
                .args(["status", "big-run", "--json"])
                .output()
                .expect("status");
            assert!(out.status.success());
            baseline.push(start.elapsed());
        };
        if i % 2 == 0 {
            web();
            status();
        } else {
            status();
            web();
        }
    }
    // Every kind of page once, for the memory they take.
    let mut others = Vec::new();
    for path in [
        "/",
        "/?page=2",
        "/runs/big-run/tasks/b21",
        "/runs/big-run/tasks/b3",
        "/runs/history-000001",
        "/plans/big",
    ] {
        let (_, server_time, _) = server.get(path);
        others.push((path, server_time));
    }
    let (rss, peak) = server.rss_kb();
    server.stop();

    let (s, w, b) = (
        median(&mut web_server),
        median(&mut web_wall),
        median(&mut baseline),
    );
    println!();
    println!(
        "run page of a {BIG_TASKS}-task open run, {events} events of history (medians of {rounds}, sides alternated, flushed before each)"
    );
    println!(
        "  {:<52} {:>10}",
        "git orch web: server time (Server-Timing)",
        ms(s)
    );
    println!("  {:<52} {:>10}", "git orch web: request wall time", ms(w));
    println!(
        "  {:<52} {:>10}",
        "baseline: git orch status big-run --json (process)",
        ms(b)
    );
    println!(
        "  web request / status --json: {:.2}x; server time / status --json: {:.2}x",
        w.as_secs_f64() / b.as_secs_f64(),
        s.as_secs_f64() / b.as_secs_f64()
    );
    println!("  page size {} kB", page_bytes / 1024);
    println!(
        "  goal: server time < 200 ms: {}",
        if s < Duration::from_millis(200) {
            "met"
        } else {
            "NOT met"
        }
    );
    println!("other pages (server time, one request each):");
    for (path, d) in others {
        println!("  {path:<30} {}", ms(d));
    }
    println!(
        "server memory after every page kind: {} MB resident, peak {} MB (goal < 60 MB: {}); start-up to the URL {}",
        rss / 1024,
        peak / 1024,
        if peak < 60 * 1024 { "met" } else { "NOT met" },
        ms(startup)
    );

    // Cold: no state cache. The server folds the whole log in memory and
    // saves nothing.
    std::fs::remove_dir_all(repo.join(".git/orch/state")).expect("cache");
    let (cold, cold_start) = Server::start(&repo);
    let (_, cold_first, _) = cold.get("/runs/big-run");
    let (cold_rss, cold_peak) = cold.rss_kb();
    cold.stop();
    println!(
        "cold (no state cache): start-up to the URL {}, first run page {}, {} MB resident, peak {} MB",
        ms(cold_start),
        ms(cold_first),
        cold_rss / 1024,
        cold_peak / 1024
    );
    assert!(
        !repo.join(".git/orch/state").exists(),
        "the server wrote the state cache"
    );
    if std::env::var_os("ORCH_WEB_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&root);
    }
}
