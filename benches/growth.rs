//! Growth benchmark: what git-orch's everyday operations cost as the log
//! grows.
//!
//! For logs of about 1k, 10k and 100k events (`ORCH_GROWTH_SIZES` to
//! change), a clone is given a history of finished runs written in exactly
//! git-orch's own log format (one operation per commit, as real runs write
//! them: an agent's end with its result commit, an attempt's verdicts with
//! its end, a landing's passing integration verdict with its record and
//! keep update, a landed attempt's cleanup records together, every other
//! event alone), packed as `git gc` /
//! `git maintenance` leave a long-lived repository, and two bare remotes
//! get all of it: `origin`, and `hooked` with the server's pre-receive
//! hook. Then, in rounds (`ORCH_GROWTH_ROUNDS`, default 5), each round
//! measuring every size, in ascending order one round and descending the
//! next, with dirty pages flushed before every measurement, so machine
//! noise falls on all sizes alike:
//!
//! * `git orch status <run>`, `git orch log --limit 20`,
//!   `git orch plan list`, beside `git log --oneline -20` +
//!   `git for-each-ref` on the same clone;
//! * the worker's loop: one `git orch worker --remote origin --once`
//!   round with nothing to do, beside the `git fetch` it starts with;
//! * the server hook: a landing made by a real one-task run, then
//!   `git push --atomic` of the log and `main` to `hooked` and to
//!   `origin` (alternating which goes first): the hook's cost must follow
//!   the pushed events, not the history;
//! * a real 30-subtask run (`git orch run` with an instant scripted agent:
//!   a worktree, commit, gates and landing per subtask), on a fresh copy of
//!   each clone every round (`ORCH_GROWTH_RUN_ROUNDS`, default 3), beside
//!   the same run on a fresh repository.
//!
//! Every table prints git-orch and its baseline at each size, the growth
//! of each against the smallest size, and git-orch against the baseline
//! (medians; peak RSS from wait4). Also printed: the first `status` after
//! the state cache is deleted (the one full read that rebuilds it). Goals:
//! growth ≤ 1.3 at 100k for the reads, the worker and the hook; the run at
//! 100k within 1.2× of the fresh one. Run with `cargo bench --bench growth`
//! (about 15 minutes on 2 cores; see benches/README.md).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Measured, command, flush, git, measure, measure_with_rss, ms, orch};
use git_orch::event::{
    AgentUsage, Event, FORMAT_VERSION, Failure, GateMode, GateStatus, Outcome, Record, RunSettings,
    RunSummary, Verdict,
};
use git_orch::ids::{PlanId, RunId, TaskId, WriterId};
use git_orch::store::log::parse_trailers;

/// Subtasks of each run in the generated history.
const HISTORY_TASKS: usize = 5;
/// Subtasks of the real run.
const RUN_TASKS: usize = 30;
/// The instant agent of the real runs: writes the file its task's
/// verification looks for, in the folder its task owns. (A script folder
/// under the bench's own directory would be hidden by the sandbox.)
const RUN_SCRIPT: &str = "run sh -c \"d=${ORCH_OWNED_GLOBS%/**}; echo yes > $d/done\"\n";

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
        inputs: None,
        command: command.map(str::to_owned),
        duration_ms: 120,
        summary: format!("{gate}: 14 changed path(s) checked, nothing found"),
        tail: "running 12 tests\ntest result: ok. 12 passed; 0 failed\n".into(),
        details: serde_json::Value::Null,
    }
}

/// The operations (each one commit) of one finished run of the history
/// plan: every task dispatched, agent, result, five verdicts with the
/// end, an integration verdict and a landing, the landed attempt's
/// cleanup.
fn history_run(k: u64, plan_hash: &str, approval: &str) -> Vec<Vec<Event>> {
    let run = RunId::new(format!("history-{k:06x}")).expect("run id");
    let mut ops = vec![vec![Event::RunStarted {
        run_id: run.clone(),
        plan_id: PlanId::new("history").expect("plan id"),
        revision: 1,
        plan_hash: plan_hash.into(),
        approval: approval.parse().expect("hex"),
        // Its own branch: the history's commits are not in this repository,
        // and the real run's queue must not try to complete its landings.
        target: "history".into(),
        base: hex(k, 0).parse().expect("hex"),
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
            base: old.parse().expect("hex"),
            start: None,
            worktree: format!("/home/dev/proj.orch/{run}/{task}-1"),
            port: 20000 + t as u16 * 10,
            agent: "fake".into(),
            candidate: None,
            foreign_branch: false,
        }]);
        ops.push(vec![Event::AttemptStarted {
            run_id: run.clone(),
            task: task.clone(),
            attempt: 1,
            pid: 5000 + t as u32,
            pgid: 5000 + t as u32,
            sandbox: None,
        }]);
        // The agent's end and the result commit share an append.
        ops.push(vec![
            Event::AgentFinished {
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
            },
            Event::AttemptResult {
                run_id: run.clone(),
                task: task.clone(),
                attempt: 1,
                commit: id("commit").parse().expect("hex"),
                tree: id("tree").parse().expect("hex"),
                changed: 3,
                control_paths: Vec::new(),
            },
        ]);
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
        // A landing's passing verdict is recorded with it; the landed
        // attempt's cleanup follows.
        ops.push(vec![
            Event::IntegrationVerdict {
                run_id: run.clone(),
                candidate: candidate.parse().expect("hex"),
                tree: id("ctree").parse().expect("hex"),
                attempts: vec![format!("{task}/1")],
                verdict: verdict("integration", Some("cargo test -q")),
            },
            Event::Landed {
                run_id: run.clone(),
                task: task.clone(),
                attempt: 1,
                target: "history".into(),
                old: old.parse().expect("hex"),
                new: candidate.parse().expect("hex"),
                strategy: "rebase".into(),
                commits: vec![candidate.parse().expect("hex")],
            },
        ]);
        ops.push(vec![
            Event::WorkspaceCleaned {
                run_id: run.clone(),
                task: task.clone(),
                attempt: 1,
                path: format!("/work/proj.orch/{run}/{task}-1"),
            },
            Event::AttemptBranchRemoved {
                run_id: run.clone(),
                task: task.clone(),
                attempt: 1,
                branch: format!("orch/{run}/{task}/attempt-1"),
                tip: id("commit").parse().expect("hex"),
            },
        ]);
        old = candidate;
    }
    ops.push(vec![Event::RunFinished {
        run_id: run,
        summary: RunSummary {
            tasks: HISTORY_TASKS,
            done: HISTORY_TASKS,
            attempts: HISTORY_TASKS,
            gate_runs: HISTORY_TASKS * 2,
            cost_usd: Some(0.42),
            duration_ms: 300_000,
            ..Default::default()
        },
        closed: None,
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
    let (mut seq, mut clock) = (pos.seq, pos.clock);
    let mut written = 0;
    let mut k = 0;
    let time = 1_767_225_600i64; // 2026-01-01
    let mut ops: Vec<Vec<Record>> = Vec::new();
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
            ops.push(records);
        }
        k += 1;
    }
    common::fast_import_log(repo, &writer_id, ops);
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

/// One size of history: a clone holding it, and two bare remotes holding
/// the same refs: `origin` without hooks (the worker's remote, and the
/// hook push's baseline) and `hooked`, with
/// `git orch hooks install --server`.
struct Size {
    /// Events of generated history (0: a fresh repository).
    events: usize,
    repo: PathBuf,
    /// The newest finished run, for `status`.
    newest: Option<String>,
    /// Hook pushes so far (the landing task writes a new file each time).
    pushes: usize,
    /// The bare remote with the hook.
    hooked: PathBuf,
}

/// A repository with the history plan, the 30-task plan and a one-task
/// plan approved, a history of about `events` events, two bare remotes
/// holding all of it.
fn setup(root: &Path, events: usize) -> Size {
    let repo = root.join(format!("growth-{events}"));
    for extra in ["", ".orch", "-plans", "-origin.git", "-hooked.git"] {
        let _ = std::fs::remove_dir_all(root.join(format!("growth-{events}{extra}")));
    }
    std::fs::create_dir_all(&repo).expect("dir");
    git(&repo, &["init", "-q", "-b", "main"]);
    for (prefix, n) in [("h", HISTORY_TASKS), ("t", RUN_TASKS), ("k", 1)] {
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
    for (id, prefix, n) in [("proj", "t", RUN_TASKS), ("hook", "k", 1)] {
        let file = plans.join(format!("{id}.json"));
        std::fs::write(&file, plan_json(id, prefix, n)).expect("plan");
        orch(&repo, &["plan", "add", &file.to_string_lossy()]);
        orch(&repo, &["approve", id]);
    }
    let origin = root.join(format!("growth-{events}-origin.git"));
    let hooked = root.join(format!("growth-{events}-hooked.git"));
    for (name, bare) in [("origin", &origin), ("hooked", &hooked)] {
        git(root, &["init", "-q", "--bare", &bare.to_string_lossy()]);
        git(&repo, &["remote", "add", name, &bare.to_string_lossy()]);
        git(
            &repo,
            &["push", "-q", name, "refs/orch/*:refs/orch/*", "main"],
        );
    }
    orch(&hooked, &["hooks", "install", "--server"]);
    time_hook(&hooked);
    Size {
        events,
        repo,
        newest,
        pushes: 0,
        hooked,
    }
}

impl Size {
    fn orch_cmd(&self, args: &[&str]) -> Command {
        let mut c = command(common::orch_bin(), &self.repo);
        c.args(args).env("FAKE_AGENT_SCRIPT", RUN_SCRIPT);
        c
    }

    /// One landing through the one-task plan (not timed): a new run whose
    /// agent writes a file no earlier run wrote, gated and landed on
    /// `main`. Returns how many events it added.
    fn land_one(&mut self) -> u64 {
        self.pushes += 1;
        let before = self.seq();
        let mut c = self.orch_cmd(&["run", "hook", "--agent", "fake", "--new"]);
        c.env(
            "FAKE_AGENT_SCRIPT",
            format!(
                "write src/k0/done yes\nwrite src/k0/push-{} yes\n",
                self.pushes
            ),
        );
        let out = c.output().expect("run");
        assert!(
            out.status.success(),
            "the landing run failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.seq() - before
    }

    /// This clone's log seq.
    fn seq(&self) -> u64 {
        let writer = git(&self.repo, &["config", "orch.writerId"]);
        let message = git(
            &self.repo,
            &[
                "log",
                "-1",
                "--format=%B",
                &format!("refs/orch/log/{writer}"),
            ],
        );
        parse_trailers(&message).expect("trailers").seq
    }

    /// `git push --atomic <remote>` of the log and `main`, timed.
    fn push(&self, remote: &str) -> Duration {
        let start = Instant::now();
        git(
            &self.repo,
            &[
                "push",
                "-q",
                "--atomic",
                remote,
                "refs/orch/*:refs/orch/*",
                "main",
            ],
        );
        start.elapsed()
    }
}

/// Wraps the server's pre-receive hook so each run appends its wall time
/// in nanoseconds to `hook-times` in the bare repository: the hook alone,
/// without the push around it.
fn time_hook(bare: &Path) {
    let hooks = bare.join("hooks");
    std::fs::rename(hooks.join("pre-receive"), hooks.join("pre-receive.timed")).expect("rename");
    let wrapper = "#!/bin/sh\n\
        start=$(date +%s%N)\n\
        \"$(dirname -- \"$0\")/pre-receive.timed\" \"$@\"\n\
        status=$?\n\
        end=$(date +%s%N)\n\
        echo $((end - start)) >>\"$(dirname -- \"$0\")/../hook-times\"\n\
        exit $status\n";
    std::fs::write(hooks.join("pre-receive"), wrapper).expect("wrapper");
    let status = Command::new("chmod")
        .arg("+x")
        .arg(hooks.join("pre-receive"))
        .status()
        .expect("chmod");
    assert!(status.success(), "chmod");
}

/// The wall time of the last run of `bare`'s timed hook.
fn last_hook_time(bare: &Path) -> Duration {
    let text = std::fs::read_to_string(bare.join("hook-times")).expect("hook times");
    let ns: u64 = text
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .expect("a time");
    Duration::from_nanos(ns)
}

/// Runs `args` of `git orch` in `size`'s clone once, after a flush.
fn once(size: &Size, args: &[&str]) -> Measured {
    flush();
    measure(size.orch_cmd(args))
}

/// Runs git commands in `dir` one after the other, after a flush; the
/// wall time of all of them.
fn git_once(dir: &Path, commands: &[&[&str]]) -> Duration {
    flush();
    let start = Instant::now();
    for args in commands {
        git(dir, args);
    }
    start.elapsed()
}

/// Samples of one measurement at each size.
#[derive(Default)]
struct Samples {
    wall: BTreeMap<usize, Vec<Duration>>,
    rss: BTreeMap<usize, u64>,
}

impl Samples {
    fn add(&mut self, events: usize, m: Measured) {
        self.wall.entry(events).or_default().push(m.wall);
        let rss = self.rss.entry(events).or_default();
        *rss = (*rss).max(m.max_rss_kb);
    }

    fn add_wall(&mut self, events: usize, d: Duration) {
        self.wall.entry(events).or_default().push(d);
    }

    fn median(&self, events: usize) -> Duration {
        let mut v = self.wall.get(&events).cloned().unwrap_or_default();
        if v.is_empty() {
            return Duration::ZERO;
        }
        common::median(&mut v)
    }
}

/// The sizes in the order of round `round`: ascending, then descending,
/// so no size is always measured first or last.
fn in_order(sizes: &mut [Size], round: usize) -> Vec<&mut Size> {
    let mut v: Vec<&mut Size> = sizes.iter_mut().collect();
    if round % 2 == 1 {
        v.reverse();
    }
    v
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64().max(1e-9)
}

/// One table: git-orch and its baseline at every size, the growth of
/// each against the smallest size, and git-orch against the baseline.
fn table(
    title: &str,
    baseline_name: &str,
    ours: &Samples,
    baseline: &Samples,
    sizes: &[usize],
    goal: &str,
) {
    println!();
    println!("{title}");
    println!("  baseline: {baseline_name}");
    println!(
        "  {:>8}  {:>10} {:>7} {:>8}  {:>10} {:>8}  {:>11}",
        "events", "git-orch", "RSS", "growth", "baseline", "growth", "vs baseline"
    );
    let first = sizes[0];
    for &n in sizes {
        let (o, b) = (ours.median(n), baseline.median(n));
        let rss = ours
            .rss
            .get(&n)
            .map_or("-".to_owned(), |kb| format!("{} MB", kb / 1024));
        println!(
            "  {:>8}  {:>10} {:>7} {:>7.2}x  {:>10} {:>7.2}x  {:>10.2}x",
            n,
            ms(o),
            rss,
            ratio(o, ours.median(first)),
            ms(b),
            ratio(b, baseline.median(first)),
            ratio(o, b)
        );
    }
    println!("  goal: {goal}");
}

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

fn main() {
    let root = common::bench_root().join("orch-growth");
    std::fs::create_dir_all(&root).expect("root");
    let rounds = env_number("ORCH_GROWTH_ROUNDS", 5).max(1);
    let run_rounds = env_number("ORCH_GROWTH_RUN_ROUNDS", 3);
    println!("growth bench: {rounds} rounds of reads, {run_rounds} of runs");
    println!("  {}", common::machine(&root));
    let (mut sizes, mut fresh): (Vec<Size>, Option<Size>) = (Vec::new(), None);
    let mut cold = BTreeMap::new();
    for events in std::iter::once(0).chain(self::sizes()) {
        let setup_start = Instant::now();
        let mut size = setup(&root, events);
        eprintln!(
            "set up {events} events in {:.1} s",
            setup_start.elapsed().as_secs_f64()
        );
        if let Some(newest) = size.newest.clone() {
            // The one full read, which leaves the cache warm.
            let _ = std::fs::remove_dir_all(size.repo.join(".git/orch/state"));
            flush();
            cold.insert(
                events,
                measure_with_rss(size.orch_cmd(&["status", &newest])),
            );
        }
        // Warm-ups, not timed: the first landing pushed to the hooked
        // remote (its server-side cache), the worker's first round (the
        // tracking refs and their fold).
        size.land_one();
        size.push("hooked");
        size.push("origin");
        once(&size, &["worker", "--remote", "origin", "--once"]);
        if events == 0 {
            fresh = Some(size);
        } else {
            sizes.push(size);
        }
    }
    let events: Vec<usize> = sizes.iter().map(|s| s.events).collect();

    let (mut status, mut log) = (Samples::default(), Samples::default());
    let (mut plans, mut reads_git) = (Samples::default(), Samples::default());
    let (mut worker, mut fetch) = (Samples::default(), Samples::default());
    let (mut hook, mut plain) = (Samples::default(), Samples::default());
    let mut hook_alone = Samples::default();
    let mut pushed = BTreeMap::new();
    for round in 0..rounds {
        for s in in_order(&mut sizes, round) {
            let newest = s.newest.clone().expect("history has runs");
            status.add(s.events, once(s, &["status", &newest]));
        }
        for s in in_order(&mut sizes, round) {
            log.add(s.events, once(s, &["log", "--limit", "20"]));
        }
        for s in in_order(&mut sizes, round) {
            plans.add(s.events, once(s, &["plan", "list"]));
        }
        for s in in_order(&mut sizes, round) {
            reads_git.add_wall(
                s.events,
                git_once(&s.repo, &[&["log", "--oneline", "-20"], &["for-each-ref"]]),
            );
        }
        for s in in_order(&mut sizes, round) {
            worker.add(
                s.events,
                once(s, &["worker", "--remote", "origin", "--once"]),
            );
        }
        for s in in_order(&mut sizes, round) {
            fetch.add_wall(
                s.events,
                git_once(
                    &s.repo,
                    &[&[
                        "fetch",
                        "--quiet",
                        "--no-write-fetch-head",
                        "origin",
                        "+refs/orch/*:refs/orch-remotes/origin/*",
                    ]],
                ),
            );
        }
        for s in in_order(&mut sizes, round) {
            let n = s.land_one();
            pushed.insert(s.events, n);
            let sides: [&str; 2] = if round % 2 == 0 {
                ["hooked", "origin"]
            } else {
                ["origin", "hooked"]
            };
            for remote in sides {
                flush();
                let d = s.push(remote);
                if remote == "hooked" {
                    hook.add_wall(s.events, d);
                    hook_alone.add_wall(s.events, last_hook_time(&s.hooked));
                } else {
                    plain.add_wall(s.events, d);
                }
            }
        }
        eprintln!("round {} of {rounds} done", round + 1);
    }
    // Peak memory: one more, untimed, run of each command at each size,
    // through /usr/bin/time (see `common::measure_with_rss`).
    for s in &sizes {
        let newest = s.newest.clone().expect("history has runs");
        let rss = |args: &[&str]| measure_with_rss(s.orch_cmd(args)).max_rss_kb;
        status.rss.insert(s.events, rss(&["status", &newest]));
        log.rss.insert(s.events, rss(&["log", "--limit", "20"]));
        plans.rss.insert(s.events, rss(&["plan", "list"]));
        worker
            .rss
            .insert(s.events, rss(&["worker", "--remote", "origin", "--once"]));
    }

    // The 30-subtask run, on a copy of each clone so every round starts
    // from the same history.
    let mut runs = Samples::default();
    let mut all: Vec<Size> = fresh.into_iter().chain(sizes).collect();
    // Every copy is made before anything is timed and removed after: on
    // ext4, creating files costs more while many were deleted in the last
    // seconds, so removing one run's copy would tax the next run.
    let copy_of = |events: usize, round: usize| root.join(format!("run-{events}-{round}"));
    for round in 0..run_rounds {
        for s in &all {
            let copy = copy_of(s.events, round);
            let _ = std::fs::remove_dir_all(&copy);
            let _ = std::fs::remove_dir_all(copy.with_extension("orch"));
            let status = Command::new("cp")
                .args(["-a"])
                .arg(&s.repo)
                .arg(&copy)
                .status()
                .expect("cp");
            assert!(status.success(), "copying the clone");
        }
    }
    if run_rounds > 0 {
        std::thread::sleep(Duration::from_secs(10));
    }
    for round in 0..run_rounds {
        for s in in_order(&mut all, round) {
            let mut c = command(common::orch_bin(), &copy_of(s.events, round));
            c.args(["run", "proj", "--agent", "fake"])
                .env("FAKE_AGENT_SCRIPT", RUN_SCRIPT);
            flush();
            runs.add(s.events, measure_with_rss(c));
        }
        eprintln!("run round {} of {run_rounds} done", round + 1);
    }
    for round in 0..run_rounds {
        for s in &all {
            let copy = copy_of(s.events, round);
            let _ = std::fs::remove_dir_all(&copy);
            let _ = std::fs::remove_dir_all(copy.with_extension("orch"));
        }
    }

    let git_reads = "`git log --oneline -20` + `git for-each-ref` on the same clone";
    table(
        "git orch status <newest run>",
        git_reads,
        &status,
        &reads_git,
        &events,
        "growth ≤ 1.30x at 100k; ≤ 30 MB RSS",
    );
    table(
        "git orch log --limit 20",
        git_reads,
        &log,
        &reads_git,
        &events,
        "growth ≤ 1.30x at 100k",
    );
    table(
        "git orch plan list",
        git_reads,
        &plans,
        &reads_git,
        &events,
        "growth ≤ 1.30x at 100k",
    );
    table(
        "worker loop: git orch worker --remote origin --once, nothing to do",
        "`git fetch origin +refs/orch/*:refs/orch-remotes/origin/*` (the round's fetch alone)",
        &worker,
        &fetch,
        &events,
        "growth ≤ 1.30x at 100k",
    );
    let n: Vec<String> = pushed.iter().map(|(k, v)| format!("{v} at {k}")).collect();
    table(
        &format!(
            "server hook alone: pre-receive of a push of the log and a landing on main ({} new events)",
            n.join(", ")
        ),
        "the whole push of the same refs to a bare remote without the hook",
        &hook_alone,
        &plain,
        &events,
        "growth ≤ 1.30x at 100k (the hook's cost follows the push, not the history)",
    );
    table(
        "push through the server hook: git push --atomic of the log and main",
        "the same push to a bare remote without the hook",
        &hook,
        &plain,
        &events,
        "the hook's share of a push stays the same at every size",
    );
    if run_rounds > 0 {
        let all_events: Vec<usize> = all.iter().map(|s| s.events).collect();
        let mut fresh_side = Samples::default();
        for &n in &all_events {
            for _ in 0..run_rounds {
                fresh_side.add_wall(n, runs.median(0));
            }
        }
        table(
            &format!("{RUN_TASKS}-subtask run (git orch run, instant agent, landing each)"),
            "the same run on a fresh repository (0 events of history)",
            &runs,
            &fresh_side,
            &all_events,
            "vs baseline ≤ 1.20x at 100k; RSS < 40 MB",
        );
    }
    println!();
    println!("cold status (state cache deleted: the one full read that rebuilds it):");
    for (n, m) in &cold {
        println!(
            "  {n:>8} events  {}  {} MB",
            ms(m.wall),
            m.max_rss_kb / 1024
        );
    }
}
