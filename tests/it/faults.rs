//! Faults from outside git-orch: a disk that fills up in the middle of a
//! run. (Many machines and a flaky remote: tests/it/workers.rs; git
//! maintenance beside a run and power loss: tests/it/maintenance.rs.)
//!
//! The disk is real: a 50 MB tmpfs that bubblewrap mounts for the test
//! (`--size`), where the repository and its worktrees live while a run
//! fills it.

use crate::common;
use crate::tools;

use std::path::Path;

use common::{Sandbox, json_lines, project};

/// Reads a file the test's script wrote.
fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .trim()
        .to_owned()
}

#[test]
fn a_run_on_a_disk_that_fills_up_stops_at_once_and_resumes_once_space_is_freed() {
    if !tools::bwrap_works(
        "a_run_on_a_disk_that_fills_up_stops_at_once_and_resumes_once_space_is_freed",
    ) {
        return;
    }
    let mut sb = Sandbox::new();
    let ids: Vec<String> = (0..6).map(|i| format!("t{i}")).collect();
    let verify: Vec<String> = ids
        .iter()
        .map(|t| format!("test -f src/{t}/done"))
        .collect();
    let specs: Vec<(&str, &[&str], &str)> = ids
        .iter()
        .zip(&verify)
        .map(|(t, v)| (t.as_str(), &[][..], v.as_str()))
        .collect();
    let p = project(&mut sb, &specs, None);
    let small = sb.path().join("small");
    let out = sb.path().join("out");
    std::fs::create_dir_all(&small).expect("mkdir");
    std::fs::create_dir_all(&out).expect("mkdir");
    // Every agent does its work; t0's first attempt also fills the disk
    // (with a file outside the repository), noting first when it began: a
    // run that stops at once may stop this agent before it could note
    // anything after.
    p.script(
        "default",
        "run sh -c \"mkdir -p src/$ORCH_TASK && echo yes > src/$ORCH_TASK/done\"\n",
    );
    p.script(
        "t0.1",
        &format!(
            "run sh -c \"date +%s%N > {filling}; head -c 100000000 /dev/zero > {fill} 2>/dev/null; true\"\nwrite src/t0/done yes\n",
            fill = small.join("fill").display(),
            filling = out.join("filling").display(),
        ),
    );
    let script = format!(
        r#"set -u
small='{small}'; out='{out}'
cp -a '{repo}' "$small/proj" && cd "$small/proj" || exit 90
git orch run proj --agent fake --cap 2 > "$out/first.out" 2> "$out/first.err"
echo $? > "$out/first.code"
date +%s%N > "$out/stopped"
ps -eo pid,stat,args > "$out/ps"
rm -f "$small/fill"
git orch run proj --agent fake --cap 2 > "$out/second.out" 2> "$out/second.err"
echo $? > "$out/second.code"
git orch status --json > "$out/status.json" 2> "$out/status.err"
git orch log --json > "$out/log.json"
git orch fsck > "$out/fsck.out" 2>&1; echo $? > "$out/fsck.code"
git fsck --full --no-dangling > "$out/gitfsck.out" 2>&1; echo $? > "$out/gitfsck.code"
"#,
        small = small.display(),
        out = out.display(),
        repo = p.repo.display(),
    );
    let status = sb
        .command("bwrap", sb.path())
        .args(["--dev-bind", "/", "/", "--size", "52428800", "--tmpfs"])
        .arg(&small)
        .args(["sh", "-c", &script])
        .status()
        .expect("bwrap runs");
    assert!(status.success(), "the script failed: {status:?}");
    let first_err = read(&out, "first.err");
    // The first run stops by itself, soon after the disk filled, with one
    // clear message and its own exit code.
    assert_eq!(read(&out, "first.code"), "74", "{first_err}");
    assert!(first_err.contains("the disk is full"), "{first_err}");
    assert!(first_err.contains("free space"), "{first_err}");
    let filling: u128 = read(&out, "filling").parse().expect("time");
    let stopped: u128 = read(&out, "stopped").parse().expect("time");
    let took_ms = (stopped - filling) / 1_000_000;
    assert!(
        took_ms < 5_000,
        "stopped {took_ms} ms after the disk began to fill"
    );
    assert!(
        first_err.lines().count() < 60,
        "a flood of output: {} lines\n{first_err}",
        first_err.lines().count()
    );
    // Once space is freed, the same command resumes and lands every task
    // exactly once.
    let second_err = read(&out, "second.err");
    assert_eq!(read(&out, "second.code"), "0", "{second_err}");
    let events = json_lines(&read(&out, "log.json"));
    for t in &ids {
        let landed = events
            .iter()
            .filter(|e| e["type"] == "landed" && e["task"] == t.as_str())
            .count();
        let voided = events
            .iter()
            .filter(|e| e["type"] == "landing_voided" && e["task"] == t.as_str())
            .count();
        assert_eq!(landed - voided, 1, "{t}");
    }
    // No run shows a live task once it has finished.
    let status: serde_json::Value =
        serde_json::from_str(&read(&out, "status.json")).expect("status json");
    for t in status["tasks"].as_array().expect("tasks") {
        assert_eq!(t["status"], "done", "{status}");
    }
    assert_eq!(read(&out, "fsck.code"), "0", "{}", read(&out, "fsck.out"));
    assert_eq!(
        read(&out, "gitfsck.code"),
        "0",
        "{}",
        read(&out, "gitfsck.out")
    );
}

#[test]
fn a_tripped_breaker_ends_the_driver_once_its_attempts_end_and_lands_what_passed() {
    let mut sb = Sandbox::new();
    let ids: Vec<String> = (0..16).map(|i| format!("t{i}")).collect();
    let verify: Vec<String> = ids
        .iter()
        .map(|t| format!("test -f src/{t}/done"))
        .collect();
    let specs: Vec<(&str, &[&str], &str)> = ids
        .iter()
        .zip(&verify)
        .map(|(t, v)| (t.as_str(), &[][..], v.as_str()))
        .collect();
    let p = project(
        &mut sb,
        &specs,
        Some(
            // Landing as they pass: what passed before the stop lands
            // even when a task before it in the plan never will in this run.
            "[orch]\n    retries = 3\n    landingOrder = passed\n[breaker]\n    totalRetries = 3\n    consecutiveFailures = 50\n    consecutiveEmpty = 50\n",
        ),
    );
    // Even tasks pass; odd ones never do their work, so they retry until
    // the breaker's retry total trips.
    for (i, t) in ids.iter().enumerate() {
        let script = if i % 2 == 0 {
            format!("sleep 0.2\nwrite src/{t}/done yes\n")
        } else {
            format!("sleep 0.2\nwrite src/{t}/other yes\n")
        };
        p.script(t, &script);
    }
    let exe = common::bin_dir().join("git-orch");
    let mut child = sb
        .command(&exe.to_string_lossy(), &p.repo)
        .args(["run", "proj", "--agent", "fake", "--cap", "4"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run starts");
    let start = std::time::Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > std::time::Duration::from_secs(120) {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!("the driver did not end by itself: {}", common::stderr(&out));
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let out = child.wait_with_output().expect("output");
    assert_eq!(out.status.code(), Some(65), "{}", common::stderr(&out));
    // Whatever passed before or while it stopped has landed.
    let events = json_lines(&sb.orch_ok(&p.repo, &["log", "--json"]));
    let passed: Vec<(String, u64)> = events
        .iter()
        .filter(|e| e["type"] == "attempt_finished" && e["outcome"] == "passed")
        .map(|e| {
            (
                e["task"].as_str().expect("task").to_owned(),
                e["attempt"].as_u64().expect("n"),
            )
        })
        .collect();
    assert!(!passed.is_empty(), "nothing passed");
    for (task, n) in &passed {
        assert!(
            events.iter().any(|e| e["type"] == "landed"
                && e["task"] == task.as_str()
                && e["attempt"].as_u64() == Some(*n)),
            "{task}/{n} passed and never landed\n{}",
            common::stderr(&out)
        );
    }
}
