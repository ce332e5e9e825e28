//! Runs end to end (ARCHITECTURE.md, invariants 2 and 5): the real binary,
//! real worktrees and the scripted fake agent.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{Sandbox, events, project, status_json, stderr, stdout};

/// (task, start, end) from stamp lines `start <task> <n> <t>` / `end …`.
fn intervals(stamps: &Path) -> Vec<(String, f64, f64)> {
    let text = std::fs::read_to_string(stamps).unwrap_or_default();
    let mut open: BTreeMap<(String, String), f64> = BTreeMap::new();
    let mut out = Vec::new();
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        let (label, task, n, t) = (w[0], w[1], w[2], w[3].parse::<f64>().expect("time"));
        match label {
            "start" => {
                open.insert((task.into(), n.into()), t);
            }
            _ => {
                let s = open
                    .remove(&(task.into(), n.into()))
                    .expect("start before end");
                out.push((task.to_owned(), s, t));
            }
        }
    }
    out
}

fn max_concurrent(iv: &[(String, f64, f64)]) -> usize {
    let mut points: Vec<(f64, i32)> = iv
        .iter()
        .flat_map(|(_, s, e)| [(*s, 1), (*e, -1)])
        .collect();
    points.sort_by(|a, b| a.partial_cmp(b).expect("times compare"));
    let (mut cur, mut max) = (0, 0);
    for (_, d) in points {
        cur += d;
        max = max.max(cur);
    }
    max as usize
}

fn task_status(status: &serde_json::Value, task: &str) -> String {
    status["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .find(|t| t["task"] == task)
        .map(|t| t["status"].as_str().expect("status").to_owned())
        .expect("task row")
}

#[test]
fn six_tasks_with_a_chain_and_cap_2() {
    let mut sb = Sandbox::new();
    let tasks: Vec<(&str, &[&str], &str)> = vec![
        ("a", &[], "test -f src/a/done"),
        ("b", &["a"], "test -f src/b/done"),
        ("c", &["b"], "test -f src/c/done"),
        ("d", &[], "test -f src/d/done"),
        ("e", &[], "test -f src/e/done"),
        ("f", &["d"], "test -f src/f/done"),
    ];
    let p = project(&mut sb, &tasks, None);
    let stamps = sb.path().join("stamps");
    for (id, _, _) in &tasks {
        p.script(
            id,
            &format!(
                "stamp {s} start\nsleep 0.3\nwrite src/{id}/done yes\nstamp {s} end\n",
                s = stamps.display()
            ),
        );
    }
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake", "--cap", "2"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let iv = intervals(&stamps);
    assert_eq!(iv.len(), 6, "every task ran exactly once: {iv:?}");
    assert!(
        max_concurrent(&iv) <= 2,
        "more than 2 agents at once: {iv:?}"
    );
    let end = |t: &str| iv.iter().find(|x| x.0 == t).expect(t).2;
    let start = |t: &str| iv.iter().find(|x| x.0 == t).expect(t).1;
    assert!(start("b") >= end("a") && start("c") >= end("b") && start("f") >= end("d"));
    let s = status_json(&sb, &p.repo);
    for (id, _, _) in &tasks {
        assert_eq!(task_status(&s, id), "done");
    }
    assert_eq!(s["state"], "finished");
    // The journal of one task.
    let run_id = s["run"].as_str().expect("run").to_owned();
    let only_b = common::json_lines(
        &sb.orch_ok(&p.repo, &["log", "--json", "--run", &run_id, "--task", "b"]),
    );
    assert!(!only_b.is_empty());
    assert!(
        only_b
            .iter()
            .all(|e| e["task"] == "b" && e["run_id"] == run_id.as_str())
    );
    // Invariant 2: the user's working tree is untouched.
    assert_eq!(sb.git(&p.repo, &["status", "--porcelain"]), "");
    // Worktrees live outside the repository.
    let wt = s["tasks"][0]["worktree"].as_str().expect("worktree");
    assert!(
        !Path::new(wt).starts_with(&p.repo),
        "{wt} nested in the repo"
    );
}

fn pid_alive(pid: i32) -> bool {
    // A zombie has exited; only its entry is left for its parent to reap.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat.split(") ").nth(1).is_some_and(|s| s.starts_with('Z')),
        Err(_) => false,
    }
}

#[test]
fn a_hanging_agent_and_its_stubborn_child_are_gone_after_the_timeout() {
    let mut sb = Sandbox::new();
    let p = project(&mut sb, &[("a", &[], "true")], None);
    let pids = sb.path().join("pids");
    sb.set_env("FAKE_AGENT_PIDS", &pids.to_string_lossy());
    p.script("a", "spawn-stubborn-child\nhang\n");
    std::fs::write(p.repo.join(".git/info/exclude"), "").expect("exclude");
    sb.git(&p.repo, &["config", "orch.retries", "0"]);
    let started = Instant::now();
    let out = sb.orch(
        &p.repo,
        &["run", "proj", "--agent", "fake", "--timeout", "2"],
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(30));
    let child: i32 = std::fs::read_to_string(&pids)
        .expect("pid file")
        .trim()
        .parse()
        .expect("pid");
    common::wait_until(
        &format!("the TERM-ignoring child {child} to be gone"),
        Duration::from_secs(10),
        || !pid_alive(child),
    );
    let finished: Vec<_> = events(&sb, &p.repo)
        .into_iter()
        .filter(|e| e["type"] == "agent_finished")
        .collect();
    assert_eq!(finished[0]["timed_out"], true);
    let s = status_json(&sb, &p.repo);
    assert!(
        s["tasks"][0]["failure"]
            .as_str()
            .expect("failure")
            .contains("timeout"),
        "{s}"
    );
}

/// The crash windows of a driver, each a named failpoint where the driver
/// kills itself with SIGKILL (debug builds only; see `src/failpoint.rs`).
const CRASH_WINDOWS: [&str; 10] = [
    "attempt.created=kill@1",
    "attempt.worktree-added=kill@1",
    "attempt.agent-started=kill@1",
    "attempt.agent-finished=kill@1",
    "attempt.result-recorded=kill@1",
    "attempt.finished=kill@1",
    "land.recorded=kill@1",
    "land.moved=kill@1",
    "append.objects-written=kill@3",
    "append.objects-written=kill@9",
];

#[test]
fn a_driver_killed_in_every_crash_window_then_rerun_lands_every_task_exactly_once() {
    let mut sb = Sandbox::new();
    let tasks: Vec<(&str, &[&str], &str)> = vec![
        ("a", &[], "test -f src/a/done"),
        ("b", &[], "test -f src/b/done"),
        ("c", &["a"], "test -f src/c/done"),
    ];
    let p = project(&mut sb, &tasks, None);
    let stamps = sb.path().join("stamps");
    let mut runs_seen = std::collections::BTreeSet::new();
    for (trial, window) in CRASH_WINDOWS.iter().enumerate() {
        let _ = std::fs::remove_file(&stamps);
        // Each trial's work differs from what earlier trials landed.
        for (id, _, _) in &tasks {
            p.script(
                id,
                &format!(
                    "stamp {s} start\nwrite src/{id}/done trial {trial}\nstamp {s} end\n",
                    s = stamps.display()
                ),
            );
        }
        let killed = sb
            .command("git-orch", &p.repo)
            .args(["run", "proj", "--agent", "fake", "--cap", "2", "--redo-all"])
            .env("ORCH_FAILPOINTS", window)
            .output()
            .expect("run");
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            killed.status.signal(),
            Some(9),
            "{window}: the failpoint was not reached\n{}",
            stderr(&killed)
        );
        let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake", "--cap", "2"]);
        assert_eq!(out.status.code(), Some(0), "{window}: {}", stderr(&out));
        let s = status_json(&sb, &p.repo);
        assert_eq!(s["state"], "finished", "{window}");
        let run = s["run"].as_str().expect("run id").to_owned();
        assert!(runs_seen.insert(run.clone()), "{window}: no new run");
        let evs = events(&sb, &p.repo);
        for (id, _, _) in &tasks {
            assert_eq!(task_status(&s, id), "done", "{window}");
            let landed = evs
                .iter()
                .filter(|e| e["type"] == "landed" && e["run_id"] == run && e["task"] == *id)
                .count();
            let voided = evs
                .iter()
                .filter(|e| e["type"] == "landing_voided" && e["run_id"] == run && e["task"] == *id)
                .count();
            assert_eq!(
                landed - voided,
                1,
                "{window}: {id} landed {landed}, voided {voided}"
            );
            // The target holds this trial's work for the task, once.
            let content = sb.git(&p.repo, &["show", &format!("main:src/{id}/done")]);
            assert_eq!(content, format!("trial {trial}"), "{window}");
        }
        // Every attempt ended; the dead driver's ones as abandoned.
        let count = |kind: &str| {
            evs.iter()
                .filter(|e| e["type"] == kind && e["run_id"] == run)
                .count()
        };
        assert_eq!(
            count("attempt_created"),
            count("attempt_finished"),
            "{window}: an attempt was forgotten"
        );
        // The user's checkout follows the target and looks untouched.
        assert_eq!(sb.git(&p.repo, &["status", "--porcelain"]), "", "{window}");
        // Never two live agents of one task at once.
        let iv = intervals(&stamps);
        for (id, _, _) in &tasks {
            let mine: Vec<_> = iv.iter().filter(|x| x.0 == *id).cloned().collect();
            assert!(
                max_concurrent(&mine) <= 1,
                "{window}: {id} ran twice at once"
            );
        }
    }
}

/// An attempt's end is one operation: its result kept, its note and its
/// `attempt_finished` record become visible together. The driver is held
/// before every append it makes; at none of them may the keep ref or a
/// note already show an end the log does not have yet.
#[test]
fn an_attempts_end_keeps_notes_and_records_it_in_one_operation() {
    let mut sb = Sandbox::new();
    let p = project(&mut sb, &[("a", &[], "test -f src/a/done")], None);
    p.script("a", "write src/a/done yes\n");
    let keep_tip = |sb: &Sandbox| {
        let out = sb
            .command("git", &p.repo)
            .args(["rev-parse", "--verify", "--quiet", "refs/orch/keep"])
            .output()
            .expect("git runs");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let notes = |sb: &Sandbox| {
        let out = sb
            .command("git", &p.repo)
            .args(["notes", "--ref=orch", "list"])
            .output()
            .expect("git runs");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let ended = |sb: &Sandbox| {
        sb.git(&p.repo, &["log", "--format=%B", "--glob=refs/orch/log/*"])
            .contains("attempt_finished")
    };
    let (keep_before, notes_before) = (keep_tip(&sb), notes(&sb));
    let gate = sb.path().join("gate");
    let mut driver = sb
        .command("git-orch", &p.repo)
        .args(["run", "proj", "--agent", "fake"])
        .env("ORCH_FAILPOINTS", "append.objects-written=wait")
        .env("ORCH_FAILPOINT_FILE", &gate)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run");
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let mut holds = 0;
    let status = loop {
        if let Some(status) = driver.try_wait().expect("wait") {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "the run never ended");
        if std::fs::read_to_string(&gate)
            .unwrap_or_default()
            .is_empty()
        {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        // Held just before an append's refs move.
        holds += 1;
        if !ended(&sb) {
            assert_eq!(
                keep_tip(&sb),
                keep_before,
                "the result was kept before the attempt's end was recorded"
            );
            assert_eq!(
                notes(&sb),
                notes_before,
                "a note was written before the attempt's end was recorded"
            );
        }
        std::fs::remove_file(&gate).expect("release the driver");
    };
    assert!(status.success(), "the run failed");
    assert!(holds > 3, "only {holds} appends were held");
    // And the end did happen: kept, noted, recorded.
    assert!(ended(&sb));
    assert_ne!(keep_tip(&sb), keep_before);
    assert_ne!(notes(&sb), notes_before);
}

#[test]
fn a_second_run_of_the_same_plan_follows_the_driver_and_exits_with_its_code() {
    let mut sb = Sandbox::new();
    let p = project(&mut sb, &[("a", &[], "true"), ("b", &[], "true")], None);
    let gate = sb.path().join("gate");
    std::fs::write(&gate, "").expect("gate file");
    // The first driver waits at its first agent until the test lets it go.
    p.script("a", "write src/a/done yes\n");
    p.script("b", "write src/b/done yes\n");
    let mut first = sb
        .command("git-orch", &p.repo)
        .args(["run", "proj", "--agent", "fake"])
        .env("ORCH_FAILPOINTS", "attempt.agent-started=wait@1")
        .env("ORCH_FAILPOINT_FILE", &gate)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::fs::read_to_string(&gate)
        .unwrap_or_default()
        .is_empty()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the first driver never got there"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut second = sb
        .command("git-orch", &p.repo)
        .args(["run", "proj", "--agent", "fake"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("second run");
    // Read its stderr as it comes: it must say it follows while the first
    // driver is still held at its failpoint.
    let said = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let reader = {
        let said = said.clone();
        let mut err = second.stderr.take().expect("stderr");
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = std::io::Read::read(&mut err, &mut buf) {
                if n == 0 {
                    break;
                }
                said.lock()
                    .expect("lock")
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !said
        .lock()
        .expect("lock")
        .contains("being driven by another process")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the second run never said it follows: {}",
            said.lock().expect("lock")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::remove_file(&gate).expect("release the first driver");
    let second_status = second.wait().expect("second ends");
    reader.join().expect("reader");
    let first_status = first.wait().expect("first ends");
    assert!(first_status.success());
    let text = said.lock().expect("lock").clone();
    assert_eq!(second_status.code(), Some(0), "{text}");
    assert!(text.contains("pid"), "{text}");
    assert!(!text.contains("Resuming run"), "{text}");
    let evs = events(&sb, &p.repo);
    assert_eq!(evs.iter().filter(|e| e["type"] == "run_resumed").count(), 1);
    assert_eq!(evs.iter().filter(|e| e["type"] == "landed").count(), 2);
}

#[test]
fn unapproved_changed_and_dirty_are_refused_before_anything_is_dispatched() {
    let mut sb = Sandbox::new();
    let p = project(&mut sb, &[("a", &[], "true")], None);
    p.script("a", "write src/a/done yes\n");
    // Plan changed after approval.
    let plan_file = sb.path().join("plan.json");
    let text = std::fs::read_to_string(&plan_file).expect("plan");
    std::fs::write(&plan_file, text.replace("Do the work", "Do other work")).expect("plan");
    sb.orch_ok(&p.repo, &["plan", "add", &plan_file.to_string_lossy()]);
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("revision 1"), "{}", stderr(&out));
    // Never approved at all.
    std::fs::write(&plan_file, text.replace("\"proj\"", "\"other\"")).expect("plan");
    sb.orch_ok(&p.repo, &["plan", "add", &plan_file.to_string_lossy()]);
    let out = sb.orch(&p.repo, &["run", "other", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(stderr(&out).contains("no approval"), "{}", stderr(&out));
    // Dirty main worktree without --base.
    sb.orch_ok(&p.repo, &["approve", "proj"]);
    std::fs::write(p.repo.join("README.md"), "changed\n").expect("dirty");
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("uncommitted changes a run would not see: README.md"),
        "{}",
        stderr(&out)
    );
    assert!(
        !events(&sb, &p.repo)
            .iter()
            .any(|e| e["type"] == "run_started"),
        "a refused run recorded a start"
    );
    assert_eq!(
        std::fs::read_to_string(p.repo.join("README.md")).expect("read"),
        "changed\n"
    );
    // An untracked file the subtask owns blocks too, and is named; one
    // that no subtask owns does not.
    std::fs::create_dir_all(p.repo.join("src/a")).expect("dir");
    std::fs::write(p.repo.join("src/a/draft"), "mine\n").expect("owned untracked");
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("src/a/draft (untracked)"),
        "{}",
        stderr(&out)
    );
    std::fs::remove_file(p.repo.join("src/a/draft")).expect("rm");
    // With --base the run starts from the named commit; the person's edit
    // and untracked file do not touch what lands, so it lands beside them
    // and their bytes stay exactly as they were.
    std::fs::write(p.repo.join("untracked.txt"), "mine\n").expect("untracked");
    let out = sb.orch(
        &p.repo,
        &["run", "proj", "--agent", "fake", "--base", "HEAD"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(p.repo.join("README.md")).expect("read"),
        "changed\n"
    );
    assert_eq!(
        std::fs::read_to_string(p.repo.join("untracked.txt")).expect("read"),
        "mine\n"
    );
    assert_eq!(
        std::fs::read_to_string(p.repo.join("src/a/done")).expect("landed"),
        "yes\n"
    );
}

#[test]
fn the_budget_stops_dispatch_with_exit_64() {
    let mut sb = Sandbox::new();
    let p = project(
        &mut sb,
        &[
            ("a", &[], "true"),
            ("b", &["a"], "true"),
            ("c", &["b"], "true"),
        ],
        None,
    );
    for id in ["a", "b", "c"] {
        p.script(id, &format!("write src/{id}/done yes\ncost 1.0\n"));
    }
    let out = sb.orch(
        &p.repo,
        &["run", "proj", "--agent", "fake", "--budget", "1.5"],
    );
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    let s = status_json(&sb, &p.repo);
    assert_eq!(
        task_status(&s, "c"),
        "pending",
        "dispatch went on past the budget"
    );
    assert!(s["cost_usd"].as_f64().expect("cost") >= 1.5);
    assert!(
        events(&sb, &p.repo)
            .iter()
            .any(|e| e["type"] == "run_stopped" && e["reason"] == "budget")
    );
}

#[test]
fn the_circuit_breaker_stops_with_exit_65() {
    let mut sb = Sandbox::new();
    let p = project(
        &mut sb,
        &[("a", &[], "true"), ("b", &[], "true"), ("c", &[], "true")],
        // Budget left when the breaker trips: the task would be retried.
        Some("[orch]\n\tretries = 5\n[breaker]\n\tconsecutiveFailures = 3\n"),
    );
    p.script("default", "exit 1\n");
    for id in ["a", "b", "c"] {
        p.script(id, "exit 1\n");
    }
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake", "--cap", "1"]);
    assert_eq!(out.status.code(), Some(65), "{}", stderr(&out));
    let stop = events(&sb, &p.repo)
        .into_iter()
        .find(|e| e["type"] == "run_stopped")
        .expect("stop event");
    assert_eq!(stop["reason"], "breaker");
    assert!(
        stop["detail"]
            .as_str()
            .expect("detail")
            .contains("agent failures 3"),
        "{stop}"
    );
    // Issue 26: a stopped run retries nothing until it is resumed, and
    // says so: its last frame, status and --json never say "retrying".
    let err = stderr(&out);
    assert!(!err.contains("retrying #"), "{err}");
    assert!(err.contains("stopped #"), "{err}");
    let s = status_json(&sb, &p.repo);
    assert_eq!(task_status(&s, "a"), "stopped", "{s}");
    let table = sb.orch_ok(&p.repo, &["status"]);
    assert!(!table.contains("retrying"), "{table}");
}

#[test]
fn ctrl_c_exits_130_and_the_run_resumes_cleanly() {
    let mut sb = Sandbox::new();
    let p = project(
        &mut sb,
        &[
            ("a", &[], "test -f src/a/done"),
            ("b", &[], "test -f src/b/done"),
        ],
        None,
    );
    // The first attempts work until interrupted; the resumed ones finish.
    for id in ["a", "b"] {
        p.script(&format!("{id}.1"), "hang\n");
        p.script(id, &format!("write src/{id}/done yes\n"));
    }
    let driver = sb
        .command("git-orch", &p.repo)
        .args(["run", "proj", "--agent", "fake"])
        .spawn()
        .expect("run");
    // Interrupt once both agents are at work (their attempts are live).
    let out = common::interrupt_once_started(&sb, &p.repo, driver, 2);
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    let evs = events(&sb, &p.repo);
    assert!(
        evs.iter()
            .any(|e| e["type"] == "run_stopped" && e["reason"] == "interrupted")
    );
    let abandoned = evs
        .iter()
        .filter(|e| e["type"] == "attempt_finished" && e["outcome"] == "abandoned")
        .count();
    assert_eq!(abandoned, 2, "both live attempts were stopped and recorded");
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let s = status_json(&sb, &p.repo);
    assert_eq!(task_status(&s, "a"), "done");
    assert_eq!(task_status(&s, "b"), "done");
}

#[test]
fn a_worktree_that_cannot_be_made_is_abandoned_and_its_branch_removed() {
    let mut sb = Sandbox::new();
    let p = project(
        &mut sb,
        &[("a", &[], "true")],
        Some("[breaker]\n\tconsecutiveFailures = 2\n"),
    );
    p.script("a", "write src/a/done yes\n");
    let blocker = sb.path().join("not-a-dir");
    std::fs::write(&blocker, "file").expect("file");
    sb.git(
        &p.repo,
        &[
            "config",
            "orch.worktreeRoot",
            &blocker.join("wt").to_string_lossy(),
        ],
    );
    // The same failure of git-orch's own work, twice in a row: the run
    // stops (exit 74) instead of retrying it.
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(74), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("2 attempts in a row failed inside git-orch"),
        "{}",
        stderr(&out)
    );
    let evs = events(&sb, &p.repo);
    let abandoned: Vec<_> = evs
        .iter()
        .filter(|e| e["type"] == "attempt_finished" && e["outcome"] == "abandoned")
        .collect();
    assert_eq!(abandoned.len(), 2);
    assert!(
        abandoned[0]["failure"]["reason"]
            .as_str()
            .expect("reason")
            .contains("worktree could not be made")
    );
    assert_eq!(
        sb.git(&p.repo, &["for-each-ref", "refs/heads/orch/"]),
        "",
        "an abandoned attempt's branch was left"
    );
    // The task stayed ready: with a usable root the run finishes.
    sb.git(&p.repo, &["config", "--unset", "orch.worktreeRoot"]);
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn ports_are_exported_and_an_explicit_port_wins() {
    let mut sb = Sandbox::new();
    let p = project(&mut sb, &[("a", &[], "true"), ("b", &[], "true")], None);
    let script = |id: &str| {
        format!("run sh -c \"echo $ORCH_PORT $PORT > src/{id}/ports\"\nwrite src/{id}/done yes\n")
    };
    p.script("a", &script("a"));
    p.script("b", &script("b"));
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let s = status_json(&sb, &p.repo);
    for (i, id) in ["a", "b"].iter().enumerate() {
        let row = &s["tasks"][i];
        // Landed, so the clean checkout of main has it.
        let ports = std::fs::read_to_string(p.repo.join(format!("src/{id}/ports"))).expect("ports");
        let port = row["port"].as_u64().expect("port");
        assert_eq!(ports.trim(), format!("{port} {port}"));
        assert_eq!(port % 10, 0);
    }
    assert_ne!(s["tasks"][0]["port"], s["tasks"][1]["port"]);
    // PORT set by the user is left alone.
    let mut sb2 = Sandbox::new();
    sb2.set_env("PORT", "4242");
    let p2 = project(&mut sb2, &[("a", &[], "true")], None);
    p2.script("a", &script("a"));
    sb2.orch_ok(&p2.repo, &["run", "proj", "--agent", "fake"]);
    let ports = std::fs::read_to_string(p2.repo.join("src/a/ports")).expect("ports");
    assert!(ports.trim().ends_with(" 4242"), "{ports}");
}

#[test]
fn fake_claude_reports_cost_through_its_stream_json() {
    let mut sb = Sandbox::new();
    sb.set_env("FAKE_CLAUDE_COST", "0.25");
    sb.set_env("ANTHROPIC_API_KEY", "sk-fake-key");
    let p = project(&mut sb, &[("a", &[], "true")], None);
    p.script("a", "write src/a/done yes\n");
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "claude"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let s = status_json(&sb, &p.repo);
    assert!(
        (s["cost_usd"].as_f64().expect("cost") - 0.25).abs() < 1e-9,
        "{s}"
    );
    let finished = events(&sb, &p.repo)
        .into_iter()
        .find(|e| e["type"] == "agent_finished")
        .expect("agent event");
    assert!(finished["usage"]["input_tokens"].as_u64().expect("tokens") > 0);
}

#[test]
fn retry_skip_and_cancel_are_recorded_and_obeyed() {
    let mut sb = Sandbox::new();
    let p = project(
        &mut sb,
        &[
            ("a", &[], "test -f src/a/done"),
            ("b", &["a"], "true"),
            ("c", &[], "true"),
        ],
        None,
    );
    sb.git(&p.repo, &["config", "orch.retries", "0"]);
    p.script("a", "exit 1\n");
    p.script("c", "write src/c/done yes\n");
    p.script("b", "write src/b/done yes\n");
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(3));
    let s = status_json(&sb, &p.repo);
    assert_eq!(task_status(&s, "a"), "failed");
    assert_eq!(task_status(&s, "b"), "blocked");
    // A retry reopens the run; the fixed agent now succeeds.
    p.script("a", "write src/a/done yes\n");
    sb.orch_ok(&p.repo, &["retry", "a"]);
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let s = status_json(&sb, &p.repo);
    assert_eq!(task_status(&s, "a"), "done");
    assert_eq!(task_status(&s, "b"), "done");
    let out = sb.orch(&p.repo, &["skip", "nope"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn cleanup_removes_finished_worktrees_and_refuses_dirty_ones() {
    let mut sb = Sandbox::new();
    let p = project(
        &mut sb,
        &[("a", &[], "true"), ("b", &[], "true"), ("c", &[], "true")],
        None,
    );
    sb.git(&p.repo, &["config", "orch.retries", "0"]);
    // Only landed attempts go when the run ends; the rest wait for cleanup.
    sb.git(&p.repo, &["config", "orch.cleanup", "landed"]);
    p.script("a", "write src/a/done yes\n");
    p.script("b", "exit 1\n");
    p.script("c", "exit 1\n");
    assert_eq!(
        sb.orch(&p.repo, &["run", "proj", "--agent", "fake"])
            .status
            .code(),
        Some(3)
    );
    let s = status_json(&sb, &p.repo);
    let wt = |i: usize| s["tasks"][i]["worktree"].as_str().expect("wt").to_owned();
    let (wt_a, wt_b, wt_c) = (wt(0), wt(1), wt(2));
    // The landed attempt's worktree went when the run was archived.
    assert!(!Path::new(&wt_a).exists(), "a landed worktree was kept");
    assert_eq!(s["tasks"][0]["workspace"], "cleaned");
    assert!(Path::new(&wt_b).exists() && Path::new(&wt_c).exists());
    std::fs::write(Path::new(&wt_b).join("scratch"), "uncommitted").expect("dirty");
    let orphan = Path::new(&wt_b).parent().expect("run dir").join("stray");
    std::fs::create_dir_all(&orphan).expect("orphan");
    let branches = sb.git(&p.repo, &["for-each-ref", "refs/heads/orch/"]);
    assert!(!branches.contains("/a/attempt-1"), "{branches}");
    let tips: Vec<String> = branches
        .lines()
        .map(|l| l.split_whitespace().next().expect("sha").to_owned())
        .collect();
    assert_eq!(tips.len(), 2, "{branches}");
    let dry = sb.orch_ok(&p.repo, &["cleanup", "--dry-run"]);
    assert!(dry.contains("would remove"), "{dry}");
    assert!(Path::new(&wt_c).exists());
    assert_eq!(
        sb.git(&p.repo, &["for-each-ref", "refs/heads/orch/"]),
        branches
    );
    let out = sb.orch(&p.repo, &["cleanup", "--task", "b"]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "a dirty worktree must be refused"
    );
    assert!(
        stdout(&out).contains("uncommitted changes"),
        "{}",
        stdout(&out)
    );
    assert!(Path::new(&wt_b).join("scratch").exists());
    let out = sb.orch_ok(&p.repo, &["cleanup"]);
    assert!(out.contains("removed"), "{out}");
    assert!(out.contains("orphan folder"), "{out}");
    assert!(!Path::new(&wt_c).exists());
    assert!(Path::new(&wt_b).exists(), "the dirty one is kept");
    sb.orch_ok(&p.repo, &["cleanup", "--task", "b", "--force"]);
    assert!(!Path::new(&wt_b).exists());
    assert_eq!(
        sb.git(&p.repo, &["for-each-ref", "refs/heads/orch/"]),
        "",
        "the branches go with their worktrees"
    );
    for tip in tips {
        assert_ne!(
            sb.git(&p.repo, &["for-each-ref", "--contains", &tip]),
            "",
            "{tip} must stay reachable"
        );
    }
}

#[test]
fn dry_run_writes_nothing() {
    let mut sb = Sandbox::new();
    let p = project(&mut sb, &[("a", &[], "true"), ("b", &["a"], "true")], None);
    let before = sb.refs(&p.repo);
    let out = sb.orch_ok(&p.repo, &["run", "proj", "--agent", "fake", "--dry-run"]);
    assert!(out.contains("would start a run"), "{out}");
    assert!(
        out.contains("a                        pending    ready now"),
        "{out}"
    );
    assert_eq!(sb.refs(&p.repo), before);
}

#[test]
fn a_repository_without_any_git_identity_works() {
    let mut sb = Sandbox::new();
    sb.identity = false;
    let p = project(&mut sb, &[("a", &[], "test -f src/a/done")], None);
    p.script("a", "write src/a/done yes\ncommit done\n");
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let s = status_json(&sb, &p.repo);
    assert_eq!(task_status(&s, "a"), "done");
}

#[test]
fn a_failed_attempt_that_changed_nothing_leaves_the_landing_note_on_main() {
    let mut sb = Sandbox::new();
    let p = project(
        &mut sb,
        &[
            ("a", &[], "test -f src/a/done"),
            ("b", &["a"], "test -f src/b/done"),
        ],
        Some("[orch]\n    retries = 0\n"),
    );
    p.script("a", "write src/a/done yes\n");
    // b starts from main's tip once a landed, and changes nothing.
    p.script("b", "sleep 0.1\n");
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let note = sb.git(&p.repo, &["notes", "--ref=orch", "show", "main"]);
    assert!(
        note.contains("git-orch landed"),
        "main's note lost its landing: {note}"
    );
    assert!(note.contains("/a/attempt-1"), "{note}");
    assert!(
        !note.contains("/b/attempt-1"),
        "b's record on a commit b did not make: {note}"
    );
}

#[test]
fn a_resumed_run_says_its_config_changed_and_new_closes_it_for_a_fresh_run_that_lands() {
    let mut sb = Sandbox::new();
    // The configuration is wrong: a 1 s timeout for an agent that takes 2.
    let p = project(
        &mut sb,
        &[
            ("a", &[], "test -f src/a/done"),
            ("b", &[], "test -f src/b/done"),
        ],
        Some("[orch]\n\ttimeout = 1s\n\tretries = 5\n[breaker]\n\tconsecutiveFailures = 2\n"),
    );
    p.script("a", "write src/a/done yes\n");
    p.script("b", "sleep 2\nwrite src/b/done yes\n");
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(65), "{}", stderr(&out));
    let first = status_json(&sb, &p.repo)["run"]
        .as_str()
        .expect("run")
        .to_owned();
    // The person fixes the configuration on main.
    std::fs::write(
        p.repo.join(".orch/config"),
        "[orch]\n\ttimeout = 30s\n\tretries = 5\n[breaker]\n\tconsecutiveFailures = 2\n",
    )
    .expect("config");
    sb.git(&p.repo, &["commit", "-qam", "a timeout that fits"]);
    // Resuming keeps the old configuration, and says so with the command
    // that gets the new one.
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(65), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(".orch/config on main changed since run")
            && err.contains("`git orch run proj --new`"),
        "{err}"
    );
    // Skipping a task while no driver runs says so, not "the driver acts".
    let out = sb.orch(&p.repo, &["skip", "b"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("No driver runs it now: `git orch run proj` resumes it"),
        "{}",
        stderr(&out)
    );
    sb.orch_ok(&p.repo, &["retry", "b"]);
    // `--new` closes it (the dry run says so first) and a fresh run from
    // main's tip lands b, carrying a.
    let dry = sb.orch_ok(
        &p.repo,
        &["run", "proj", "--agent", "fake", "--new", "--dry-run"],
    );
    assert!(
        dry.contains(&format!("would close run {first} and start a new run")),
        "{dry}"
    );
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake", "--new"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let s = status_json(&sb, &p.repo);
    assert_ne!(s["run"], first.as_str());
    for t in s["tasks"].as_array().expect("tasks") {
        assert_eq!(t["status"], "done", "{s}");
    }
    let evs = events(&sb, &p.repo);
    let closed = evs
        .iter()
        .find(|e| e["type"] == "run_finished" && e["run_id"] == first.as_str())
        .expect("the old run is finished");
    assert!(
        closed["closed"]
            .as_str()
            .is_some_and(|c| c.contains("--new")),
        "{closed}"
    );
    let landed_a = evs
        .iter()
        .filter(|e| e["type"] == "landed" && e["task"] == "a")
        .count();
    assert_eq!(landed_a, 1, "a is carried, not redone");
}

#[test]
fn a_run_waiting_for_an_approval_resumes_after_it_and_redoes_nothing_that_passed() {
    let mut sb = Sandbox::new();
    let tasks: Vec<(&str, &[&str], &str)> = vec![
        ("a", &[], "test -f .github/workflows/ci.yml"),
        ("b", &[], "test -f src/b/done"),
        ("c", &["a"], "test -f src/c/done"),
    ];
    let p = project(&mut sb, &tasks, None);
    // `a` changes a CI workflow, which it owns by name: its result waits
    // for a person. `b` passes behind it (results land in plan order);
    // `c` needs what `a` lands.
    let plan_file = sb.path().join("plan.json");
    let mut plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan_file).expect("plan")).expect("json");
    plan["subtasks"][0]["owned_globs"] =
        serde_json::json!(["src/a/**", ".github/workflows/ci.yml"]);
    std::fs::write(&plan_file, plan.to_string()).expect("plan");
    sb.orch_ok(&p.repo, &["plan", "add", &plan_file.to_string_lossy()]);
    sb.orch_ok(&p.repo, &["approve", "proj"]);
    p.script("a", "write .github/workflows/ci.yml on: push\n");
    for id in ["b", "c"] {
        p.script(id, &format!("write src/{id}/done yes\n"));
    }
    let first = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(first.status.code(), Some(3), "{}", stderr(&first));
    assert!(
        stderr(&first).contains("wait for a person's approval")
            || stderr(&first).contains("waits for a person's approval"),
        "{}",
        stderr(&first)
    );
    assert!(
        stderr(&first).contains("approve --branch"),
        "{}",
        stderr(&first)
    );
    let s = status_json(&sb, &p.repo);
    assert_eq!(task_status(&s, "a"), "passed");
    assert_eq!(task_status(&s, "b"), "passed", "b waits behind a");
    assert_eq!(task_status(&s, "c"), "pending");
    let run_id = s["run"].as_str().expect("run").to_owned();
    // Running again without an approval changes nothing.
    let again = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(again.status.code(), Some(3), "{}", stderr(&again));
    let branch = events(&sb, &p.repo)
        .into_iter()
        .find(|e| e["type"] == "attempt_created" && e["task"] == "a")
        .and_then(|e| e["branch"].as_str().map(str::to_owned))
        .expect("a's branch");
    sb.orch_ok(&p.repo, &["approve", "--branch", &branch]);
    let last = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(last.status.code(), Some(0), "{}", stderr(&last));
    let log = events(&sb, &p.repo);
    let created = |t: &str| {
        log.iter()
            .filter(|e| e["type"] == "attempt_created" && e["task"] == t)
            .count()
    };
    assert_eq!(
        (created("a"), created("b"), created("c")),
        (1, 1, 1),
        "what passed is landed, not done again"
    );
    assert_eq!(
        log.iter().filter(|e| e["type"] == "run_started").count(),
        1,
        "one run, resumed"
    );
    let s = status_json(&sb, &p.repo);
    assert_eq!(s["run"], run_id.as_str());
    assert_eq!(s["state"], "finished");
    for t in ["a", "b", "c"] {
        assert_eq!(task_status(&s, t), "done", "{t}");
    }
    assert_eq!(
        sb.git(&p.repo, &["show", "main:.github/workflows/ci.yml"]),
        "on: push"
    );
}
