//! Exactly once (ARCHITECTURE.md, invariant 5): no task of an approved plan
//! lands twice on a target unless a person asks for it by name. Reruns
//! continue and never redo; of two simultaneous starts one drives; an
//! attempt that fails inside git-orch ends cleanly; `retry` and `skip`
//! find the run that holds the task.

use crate::common;

use std::path::Path;

use common::{Project, Sandbox, events, project, status_json, stderr};

fn count(evs: &[serde_json::Value], kind: &str, task: &str) -> usize {
    evs.iter()
        .filter(|e| e["type"] == kind && e["task"] == task)
        .count()
}

/// Commits on main, oldest first.
fn main_history(sb: &Sandbox, repo: &Path) -> Vec<String> {
    sb.git(repo, &["rev-list", "--reverse", "main"])
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Five tasks, `e` failing its verification until `src/e/fixed` exists;
/// no retries, so the first run ends with 4 done and 1 failed.
fn four_and_one(sb: &mut Sandbox) -> Project {
    let tasks: Vec<(&str, &[&str], &str)> = vec![
        ("a", &[], "test -f src/a/done"),
        ("b", &[], "test -f src/b/done"),
        ("c", &[], "test -f src/c/done"),
        ("d", &["a"], "test -f src/d/done"),
        ("e", &[], "test -f src/e/fixed"),
    ];
    let p = project(sb, &tasks, Some("[orch]\n\tretries = 0\n"));
    for t in ["a", "b", "c", "d"] {
        p.script(t, &format!("write src/{t}/done once\n"));
    }
    p.script("e", "write src/e/done not yet\n");
    p
}

#[test]
fn rerunning_a_finished_plan_redoes_nothing_that_landed() {
    let mut sb = Sandbox::new();
    let p = four_and_one(&mut sb);
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let first = status_json(&sb, &p.repo)["run"]
        .as_str()
        .expect("run")
        .to_owned();
    let history = main_history(&sb, &p.repo);
    // The agent of `e` now gets it right; the others would write again if
    // they ran (and the test would see it).
    p.script("e", "write src/e/fixed yes\n");
    for t in ["a", "b", "c", "d"] {
        p.script(t, &format!("write src/{t}/done TWICE\n"));
    }
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let s = status_json(&sb, &p.repo);
    let second = s["run"].as_str().expect("run").to_owned();
    assert_ne!(second, first, "a finished run is not reopened");
    for t in s["tasks"].as_array().expect("tasks") {
        assert_eq!(t["status"], "done", "{s}");
    }
    let evs = events(&sb, &p.repo);
    for t in ["a", "b", "c", "d"] {
        assert_eq!(count(&evs, "attempt_created", t), 1, "{t} ran again");
        assert_eq!(count(&evs, "landed", t), 1, "{t} landed again");
        assert_eq!(
            sb.git(&p.repo, &["show", &format!("main:src/{t}/done")]),
            "once"
        );
    }
    assert_eq!(count(&evs, "landed", "e"), 1);
    // The target gained exactly e's one commit.
    let after = main_history(&sb, &p.repo);
    assert_eq!(after.len(), history.len() + 1, "{after:?}");
    assert_eq!(after[..history.len()], history[..]);

    // Now every task landed: a third run has nothing to do and says so.
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("Nothing to do"), "{}", stderr(&out));
    assert!(stderr(&out).contains("--redo"), "{}", stderr(&out));
    assert_eq!(main_history(&sb, &p.repo), after);
    assert_eq!(
        events(&sb, &p.repo)
            .iter()
            .filter(|e| e["type"] == "run_started")
            .count(),
        2
    );
    // Redoing a task takes asking for it by name.
    p.script("b", "write src/b/done redone\n");
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake", "--redo", "b"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let evs = events(&sb, &p.repo);
    assert_eq!(count(&evs, "landed", "b"), 2);
    assert_eq!(count(&evs, "landed", "a"), 1);
    assert_eq!(sb.git(&p.repo, &["show", "main:src/b/done"]), "redone");
    // A task the plan does not have is a usage error, nothing written.
    let before = events(&sb, &p.repo).len();
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake", "--redo", "zz"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("has no task zz"), "{}", stderr(&out));
    assert_eq!(events(&sb, &p.repo).len(), before);
}

#[test]
fn a_revised_plan_carries_the_tasks_whose_definition_did_not_change() {
    let mut sb = Sandbox::new();
    let p = four_and_one(&mut sb);
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    // Revise the plan: e's verification changes, the rest stay.
    let plan_file = sb.path().join("plan.json");
    let text = std::fs::read_to_string(&plan_file).expect("plan");
    std::fs::write(
        &plan_file,
        text.replace("test -f src/e/fixed", "test -f src/e/done"),
    )
    .expect("plan");
    sb.orch_ok(&p.repo, &["plan", "add", &plan_file.to_string_lossy()]);
    sb.orch_ok(&p.repo, &["approve", "proj"]);
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let evs = events(&sb, &p.repo);
    for t in ["a", "b", "c", "d"] {
        assert_eq!(count(&evs, "landed", t), 1, "{t}");
    }
    assert_eq!(count(&evs, "landed", "e"), 1);
}

#[test]
fn changing_how_a_task_runs_redoes_nothing_changing_what_it_makes_redoes_it_and_says_why() {
    let mut sb = Sandbox::new();
    let p = four_and_one(&mut sb);
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    // How the tasks run changes: a's and b's retries, c's agent and
    // branch, d's dependency dropped; e's verification is fixed. Only e
    // runs again; agents that did run again would write TWICE.
    for t in ["a", "b", "c", "d"] {
        p.script(t, &format!("write src/{t}/done TWICE\n"));
    }
    p.script("e", "write src/e/fixed yes\n");
    let plan_file = sb.path().join("plan.json");
    let mut plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan_file).expect("plan")).expect("json");
    for sub in plan["subtasks"].as_array_mut().expect("subtasks") {
        match sub["id"].as_str().expect("id") {
            "a" | "b" => sub["retries"] = serde_json::json!(3),
            "c" => {
                sub["agent"] = serde_json::json!("fake");
                sub["branch"] = serde_json::json!("work/c");
            }
            "d" => sub["depends_on"] = serde_json::json!([]),
            _ => {}
        }
    }
    std::fs::write(&plan_file, plan.to_string()).expect("plan");
    sb.orch_ok(&p.repo, &["plan", "add", &plan_file.to_string_lossy()]);
    sb.orch_ok(&p.repo, &["approve", "proj"]);
    let dry = sb.orch_ok(&p.repo, &["run", "proj", "--agent", "fake", "--dry-run"]);
    assert!(!dry.contains("runs again"), "{dry}");
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let evs = events(&sb, &p.repo);
    for t in ["a", "b", "c", "d"] {
        assert_eq!(count(&evs, "attempt_created", t), 1, "{t} ran again");
        assert_eq!(count(&evs, "landed", t), 1, "{t} landed again");
    }
    // What a task makes changes: b's deliverable. The dry run says b
    // runs again and why; the run redoes b alone.
    let mut plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan_file).expect("plan")).expect("json");
    for sub in plan["subtasks"].as_array_mut().expect("subtasks") {
        if sub["id"] == "b" {
            sub["deliverable"] = serde_json::json!("b, and better");
        }
    }
    std::fs::write(&plan_file, plan.to_string()).expect("plan");
    sb.orch_ok(&p.repo, &["plan", "add", &plan_file.to_string_lossy()]);
    sb.orch_ok(&p.repo, &["approve", "proj"]);
    let dry = sb.orch_ok(&p.repo, &["run", "proj", "--agent", "fake", "--dry-run"]);
    let b = dry
        .lines()
        .find(|l| l.trim_start().starts_with("b "))
        .unwrap_or_else(|| panic!("no line for b:\n{dry}"));
    assert!(
        b.contains("runs again: its deliverable changed since run"),
        "{dry}"
    );
    assert_eq!(dry.matches("runs again").count(), 1, "{dry}");
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let evs = events(&sb, &p.repo);
    assert_eq!(count(&evs, "landed", "b"), 2);
    assert_eq!(count(&evs, "landed", "a"), 1);
    assert_eq!(sb.git(&p.repo, &["show", "main:src/b/done"]), "TWICE");
}

#[test]
fn two_runs_of_one_plan_started_at_once_run_each_agent_once_twenty_times() {
    let mut sb = Sandbox::new();
    let tasks: Vec<(&str, &[&str], &str)> = vec![
        ("a", &[], "test -f src/a/done"),
        ("b", &[], "test -f src/b/done"),
    ];
    let p = project(&mut sb, &tasks, None);
    for rep in 0..20 {
        for t in ["a", "b"] {
            p.script(t, &format!("write src/{t}/done rep {rep}\n"));
        }
        let before = events(&sb, &p.repo).len();
        let spawn = || {
            sb.command("git-orch", &p.repo)
                .args(["run", "proj", "--agent", "fake", "--redo-all"])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("run")
        };
        let (one, two) = (spawn(), spawn());
        let (one, two) = (
            one.wait_with_output().expect("one"),
            two.wait_with_output().expect("two"),
        );
        assert_eq!(one.status.code(), Some(0), "rep {rep}: {}", stderr(&one));
        assert_eq!(two.status.code(), Some(0), "rep {rep}: {}", stderr(&two));
        let evs: Vec<serde_json::Value> = events(&sb, &p.repo).split_off(before);
        let kinds = |k: &str| evs.iter().filter(|e| e["type"] == k).count();
        assert_eq!(kinds("run_started"), 1, "rep {rep}: two runs started");
        assert_eq!(kinds("run_resumed"), 1, "rep {rep}: two drivers");
        for t in ["a", "b"] {
            assert_eq!(count(&evs, "attempt_started", t), 1, "rep {rep}: {t}");
            assert_eq!(count(&evs, "landed", t), 1, "rep {rep}: {t}");
            assert_eq!(
                sb.git(&p.repo, &["show", &format!("main:src/{t}/done")]),
                format!("rep {rep}")
            );
        }
    }
}

#[test]
fn an_attempt_that_panics_is_recorded_failed_and_the_run_goes_on() {
    let mut sb = Sandbox::new();
    let p = project(&mut sb, &[("a", &[], "test -f src/a/done")], None);
    p.script("a", "write src/a/done yes\n");
    // The first attempt's task panics right after it is recorded.
    let out = sb
        .command("git-orch", &p.repo)
        .args(["run", "proj", "--agent", "fake"])
        .env("ORCH_FAILPOINTS", "attempt.created=panic@1")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let evs = events(&sb, &p.repo);
    let first = evs
        .iter()
        .find(|e| e["type"] == "attempt_finished" && e["attempt"] == 1)
        .expect("attempt 1 ended");
    assert_eq!(first["outcome"], "failed", "{first}");
    assert_eq!(first["failure"]["class"], "internal", "{first}");
    assert!(
        first["failure"]["reason"]
            .as_str()
            .expect("reason")
            .contains("failpoint attempt.created"),
        "{first}"
    );
    // The retry landed it.
    assert_eq!(count(&evs, "landed", "a"), 1);
    assert_eq!(status_json(&sb, &p.repo)["state"], "finished");
}

#[test]
fn retry_and_skip_find_the_run_that_holds_the_task() {
    let mut sb = Sandbox::new();
    let p = project(
        &mut sb,
        &[("a", &[], "test -f src/a/done"), ("b", &[], "false")],
        Some("[orch]\n\tretries = 0\n"),
    );
    p.script("a", "write src/a/done yes\n");
    p.script("b", "write src/b/done yes\n");
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let run = status_json(&sb, &p.repo)["run"]
        .as_str()
        .expect("run")
        .to_owned();
    // The hint names a command that works as printed.
    let hint = format!("git orch retry <task> --run {run}");
    assert!(stderr(&out).contains(&hint), "{}", stderr(&out));
    // Another plan's run is newer, without task b.
    let other = sb.path().join("other.json");
    std::fs::write(
        &other,
        serde_json::json!({"version": 1, "id": "other", "instruction": "x", "subtasks": [
            {"id": "z", "title": "Z", "owned_globs": ["src/z/**"], "deliverable": "z",
             "verification": "true"}
        ]})
        .to_string(),
    )
    .expect("plan");
    sb.orch_ok(&p.repo, &["plan", "add", &other.to_string_lossy()]);
    sb.orch_ok(&p.repo, &["approve", "other"]);
    p.script("z", "write src/z/done yes\n");
    sb.orch_ok(&p.repo, &["run", "other", "--agent", "fake"]);
    // `retry b` finds proj's finished run, not the newest run.
    let out = sb.orch(&p.repo, &["retry", "b"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let retried = events(&sb, &p.repo)
        .into_iter()
        .find(|e| e["type"] == "task_control" && e["action"] == "retry")
        .expect("recorded");
    assert_eq!(retried["run_id"], run.as_str());
    // A task no run has: a clear error, nothing recorded.
    let before = events(&sb, &p.repo).len();
    let out = sb.orch(&p.repo, &["skip", "nope"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no unfinished run has a task nope"),
        "{}",
        stderr(&out)
    );
    assert_eq!(events(&sb, &p.repo).len(), before);
}

#[test]
fn after_ctrl_c_the_interrupted_tasks_show_as_stopped_and_nothing_unjudged_lands() {
    // Ctrl-C while the agent works, and just before the gates run.
    for window in [
        "attempt.agent-started=wait@1",
        "attempt.result-recorded=wait@1",
    ] {
        let mut sb = Sandbox::new();
        let p = project(&mut sb, &[("a", &[], "test -f src/a/done")], None);
        let gate = sb.path().join("gate");
        // Still working when Ctrl-C comes in the first window.
        p.script("a", "hang\n");
        if window.starts_with("attempt.result") {
            p.script("a", "write src/a/done yes\n");
        }
        let mut driver = sb
            .command("git-orch", &p.repo)
            .args(["run", "proj", "--agent", "fake"])
            .env("ORCH_FAILPOINTS", window)
            .env("ORCH_FAILPOINT_FILE", &gate)
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("run");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !gate.exists() {
            assert!(
                std::time::Instant::now() < deadline,
                "{window}: never got there"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        // SIGINT, as Ctrl-C sends; then let the attempt see it.
        let pid = driver.id() as i32;
        assert!(pid > 1);
        // SAFETY: a signal to our own child, a positive pid checked above.
        unsafe {
            libc::kill(pid, libc::SIGINT);
        }
        // The driver records the stop before the attempt goes on.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !events(&sb, &p.repo)
            .iter()
            .any(|e| e["type"] == "run_stopped")
        {
            assert!(
                std::time::Instant::now() < deadline,
                "{window}: no stop recorded"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        std::fs::remove_file(&gate).expect("release");
        let status = driver.wait().expect("driver ends");
        assert_eq!(status.code(), Some(130), "{window}");
        let s = status_json(&sb, &p.repo);
        assert_eq!(s["tasks"][0]["status"], "stopped", "{window}: {s}");
        assert!(
            s["state"].as_str().expect("state").starts_with("stopped"),
            "{window}: {s}"
        );
        // Resuming judges it afresh and lands it once.
        p.script("a", "write src/a/done yes\n");
        let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
        assert_eq!(out.status.code(), Some(0), "{window}: {}", stderr(&out));
        assert_eq!(count(&events(&sb, &p.repo), "landed", "a"), 1, "{window}");
    }
}

/// Two clones sharing one remote start the same plan at the same instant:
/// the start is claimed on the remote by a non-forced push, so one clone
/// runs the plan and the other is told whose run it is (or, if the first
/// already finished, finds nothing to do). Each agent runs once and each
/// task lands once on the remote's target, five times over.
#[test]
fn two_clones_starting_one_plan_at_once_run_it_once() {
    for rep in 0..5 {
        let mut sb = Sandbox::new();
        let tasks: Vec<(&str, &[&str], &str)> = vec![
            ("a", &[], "test -f src/a/done"),
            ("b", &[], "test -f src/b/done"),
        ];
        let p = project(&mut sb, &tasks, None);
        for t in ["a", "b"] {
            p.script(t, &format!("sleep 0.5\nwrite src/{t}/done rep {rep}\n"));
        }
        let bare = sb.bare("remote.git");
        sb.git(
            &p.repo,
            &["remote", "add", "origin", &bare.to_string_lossy()],
        );
        sb.git(&p.repo, &["push", "-q", "origin", "main"]);
        sb.orch_ok(&p.repo, &["init", "--remote", "origin"]);
        sb.orch_ok(&p.repo, &["sync"]);
        let other = sb.clone_of(&bare, "other");
        sb.orch_ok(&other, &["init", "--remote", "origin"]);
        sb.orch_ok(&other, &["sync"]);
        let spawn = |repo: &Path| {
            sb.command("git-orch", repo)
                .args(["run", "proj", "--agent", "fake"])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("run")
        };
        let (one, two) = (spawn(&p.repo), spawn(&other));
        let outs = [
            one.wait_with_output().expect("one"),
            two.wait_with_output().expect("two"),
        ];
        let codes: Vec<Option<i32>> = outs.iter().map(|o| o.status.code()).collect();
        assert!(
            codes.contains(&Some(0)),
            "rep {rep}: nobody ran it: {codes:?}\n{}\n{}",
            stderr(&outs[0]),
            stderr(&outs[1])
        );
        for o in &outs {
            let code = o.status.code();
            assert!(
                code == Some(0)
                    || (code == Some(3)
                        && (stderr(o).contains("started by another clone")
                            || stderr(o).contains("at the same moment"))),
                "rep {rep}: {code:?}: {}",
                stderr(o)
            );
        }
        sb.orch_ok(&p.repo, &["sync"]);
        sb.orch_ok(&other, &["sync"]);
        sb.orch_ok(&p.repo, &["sync"]);
        let evs = events(&sb, &p.repo);
        let kinds = |k: &str| evs.iter().filter(|e| e["type"] == k).count();
        assert_eq!(kinds("run_started"), 1, "rep {rep}: two runs started");
        for t in ["a", "b"] {
            assert_eq!(count(&evs, "attempt_started", t), 1, "rep {rep}: {t}");
            assert_eq!(count(&evs, "landed", t), 1, "rep {rep}: {t}");
        }
        // A driver lands on its own clone's target: between the two
        // clones, each task's commit is there once.
        let landed = format!(
            "{}{}",
            sb.git(&p.repo, &["log", "--format=%s", "main"]),
            sb.git(&other, &["log", "--format=%s", "main"])
        );
        for t in ["a", "b"] {
            assert_eq!(
                landed
                    .lines()
                    .filter(|l| l.contains(&format!("Task {t}")))
                    .count(),
                1,
                "rep {rep}: {t} in:\n{landed}"
            );
        }
    }
}
