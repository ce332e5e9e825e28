//! A fresh user's first hour (issue 26), with the real binary as they would
//! have it: git-orch downloaded into a folder under /tmp and an agent script
//! beside it, the sandbox left at `auto` (bubblewrap here). The demo passes,
//! a command agent under /tmp lands, `git orch agents` tells the truth; and
//! every permanent mistake (a missing program, an unknown agent, a missing
//! key, a bind that would show the home folder) ends the run in under two
//! seconds with one message, its fix and exit 78, before anything is
//! written. A refused key at the first attempt with no fallback (issue 30)
//! ends the run in seconds with no attempt abandoned and none retried.

use crate::common;
use crate::tools;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{Sandbox, events, project, status_json, stderr, stdout};

/// The most a permanent mistake may take to end a run.
const FAST: Duration = Duration::from_secs(2);

/// git-orch linked (or copied) into `dir`.
fn git_orch_in(dir: &Path) {
    std::fs::create_dir_all(dir).expect("mkdir");
    let to = dir.join("git-orch");
    let from = common::bin_dir().join("git-orch");
    if std::fs::hard_link(&from, &to).is_err() {
        std::fs::copy(&from, &to).expect("copy git-orch");
    }
}

fn executable(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// A new user's machine: git-orch in `<tmp>/bin`, a command agent script
/// in `<tmp>/tools`, both first on PATH with the fake CLIs (the fake
/// `claude` stands for an installed Claude Code with no key), and the
/// sandbox as the settings say (`auto` by default).
fn machine() -> (Sandbox, PathBuf) {
    let mut sb = Sandbox::new();
    assert!(
        sb.path().starts_with("/tmp"),
        "the test needs a folder under /tmp"
    );
    let bin = sb.path().join("bin");
    git_orch_in(&bin);
    let agent = sb.path().join("tools/my-agent");
    executable(
        &agent,
        "#!/bin/sh\nset -e\necho \"done by my-agent\" > \"src/$1/done\"\ngit add -A\ngit commit -q -m \"$1: my-agent's own commit\"\n",
    );
    sb.set_env(
        "PATH",
        &format!(
            "{}:{}:{}",
            bin.display(),
            common::repo_root().join("fixtures/agents").display(),
            common::system_bin().display()
        ),
    );
    sb.set_env("GIT_ORCH_SANDBOX", "");
    (sb, agent)
}

/// `git orch <args>` in `repo`, timed.
fn timed(sb: &Sandbox, repo: &Path, args: &[&str]) -> (std::process::Output, Duration) {
    let start = Instant::now();
    let out = sb.orch(repo, args);
    (out, start.elapsed())
}

/// A run that must stop before anything is written: exit 78 fast, one
/// error and its fix, no run recorded, no ref moved.
fn refused_before_anything(
    sb: &Sandbox,
    repo: &Path,
    args: &[&str],
    what: &str,
    says: &str,
    fix: &str,
) -> Duration {
    let before = sb.refs(repo);
    let (out, took) = timed(sb, repo, args);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(78), "{what}: {err}");
    assert!(took < FAST, "{what} took {took:?}");
    assert_eq!(err.matches("error:").count(), 1, "{what}: {err}");
    assert!(err.contains(says), "{what}: {err}");
    assert_eq!(err.matches(fix).count(), 1, "{what}: the fix once\n{err}");
    assert!(!err.contains("attempt"), "{what}: {err}");
    assert_eq!(sb.refs(repo), before, "{what}: something was written");
    eprintln!("first hour: {what} ended the run in {took:?}");
    took
}

fn set_config(sb: &Sandbox, repo: &Path, config: &str) {
    std::fs::write(repo.join(".orch/config"), config).expect("config");
    sb.git(repo, &["commit", "-qam", "config"]);
}

#[test]
fn a_new_users_first_hour_with_everything_under_tmp() {
    if !tools::bwrap_works("a_new_users_first_hour_with_everything_under_tmp") {
        return;
    }
    let (mut sb, agent) = machine();

    // The demo, from a folder that is no repository.
    let elsewhere = sb.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).expect("mkdir");
    let (out, took) = timed(&sb, &elsewhere, &["demo"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(
        stdout(&out).contains("sandbox: bubblewrap sandbox per attempt"),
        "the demo's run was not confined: {}",
        stdout(&out)
    );
    eprintln!("first hour: the demo passed in {took:?}");

    // Their own project, with their own agent from the scratch folder.
    let config = format!(
        "[orch]\n    agent = mine\n[agent \"mine\"]\n    kind = command\n    command = {} {{task}}\n",
        agent.display()
    );
    let p = project(
        &mut sb,
        &[
            ("a", &[], "test -f src/a/done"),
            ("b", &[], "test -f src/b/done"),
        ],
        Some(&config),
    );
    let out = sb.orch(&p.repo, &["agents", "mine"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stdout(&out).contains("ready"), "{}", stdout(&out));
    let out = sb.orch(&p.repo, &["run", "proj"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let s = status_json(&sb, &p.repo);
    for t in s["tasks"].as_array().expect("tasks") {
        assert_eq!(t["status"], "done", "{s}");
        assert_eq!(t["attempts"], 1, "its own commit failed: {s}");
    }
    assert_eq!(
        std::fs::read_to_string(p.repo.join("src/a/done")).expect("landed"),
        "done by my-agent\n"
    );
    let confined: Vec<serde_json::Value> = events(&sb, &p.repo)
        .into_iter()
        .filter(|e| e["type"] == "attempt_started")
        .map(|e| e["sandbox"].clone())
        .collect();
    assert_eq!(confined, ["bwrap", "bwrap"]);

    // Now every permanent mistake, each on a plan not run yet.
    let plan2 = sb.path().join("plan2.json");
    std::fs::write(
        &plan2,
        serde_json::json!({"version": 1, "id": "next", "instruction": "More", "subtasks": [
            {"id": "a", "title": "A again", "owned_globs": ["src/a/**"], "deliverable": "a", "verification": "true"},
            {"id": "b", "title": "B again", "owned_globs": ["src/b/**"], "deliverable": "b", "verification": "true"},
        ]})
        .to_string(),
    )
    .expect("plan");
    sb.orch_ok(&p.repo, &["plan", "add", &plan2.to_string_lossy()]);
    sb.orch_ok(&p.repo, &["approve", "next"]);

    set_config(
        &sb,
        &p.repo,
        "[orch]\n    agent = mine\n[agent \"mine\"]\n    kind = command\n    command = no-such-agent {task}\n",
    );
    refused_before_anything(
        &sb,
        &p.repo,
        &["run", "next"],
        "a missing program",
        "agent mine cannot work here: no-such-agent not found on PATH",
        "hint: install it, or fix `command` in [agent \"mine\"] of .orch/config",
    );
    set_config(&sb, &p.repo, &config);
    refused_before_anything(
        &sb,
        &p.repo,
        &["run", "next", "--agent", "w"],
        "an unknown agent",
        "agent w cannot work here: no agent named \"w\"",
        "define `[agent \"w\"]` in .orch/config",
    );
    refused_before_anything(
        &sb,
        &p.repo,
        &["run", "next", "--agent", "claude"],
        "a missing key",
        "agent claude cannot work here: Claude Code has no API key and no login",
        "set ANTHROPIC_API_KEY",
    );
    set_config(
        &sb,
        &p.repo,
        &format!("{config}[sandbox]\n    bind = {}\n", sb.path().display()),
    );
    refused_before_anything(
        &sb,
        &p.repo,
        &["run", "next"],
        "a bind that holds the home folder",
        &format!(
            "[sandbox] bind = {}: it holds the home folder",
            sb.path().display()
        ),
        "hint: bind only the folders agents need inside it",
    );
    set_config(
        &sb,
        &p.repo,
        &format!("{config}[sandbox]\n    roBind = /no/such/folder\n"),
    );
    refused_before_anything(
        &sb,
        &p.repo,
        &["run", "next"],
        "a bind that does not exist",
        "[sandbox] roBind = /no/such/folder: /no/such/folder cannot be used",
        "hint: create it, or remove the line from .orch/config",
    );
    // `git orch agents` says the same before any run: no agent is ready
    // while the sandbox cannot be made.
    let out = sb.orch(&p.repo, &["agents", "mine"]);
    assert_eq!(out.status.code(), Some(3), "{}", stdout(&out));
    assert!(
        stdout(&out).contains(
            "problem: runs are refused here: [sandbox] roBind = /no/such/folder: /no/such/folder cannot be used"
        ),
        "{}",
        stdout(&out)
    );
    // The demo with the key missing stops before it writes anything too.
    let keep = sb.path().join("demo-claude");
    let (out, took) = timed(
        &sb,
        &elsewhere,
        &[
            "demo",
            "--agent",
            "claude",
            "--keep",
            &keep.to_string_lossy(),
        ],
    );
    assert_eq!(out.status.code(), Some(78), "{}", stderr(&out));
    assert!(took < FAST, "{took:?}");
    assert!(
        stderr(&out).contains("agent claude cannot work here: Claude Code has no API key"),
        "{}",
        stderr(&out)
    );
    assert!(!keep.exists());
}

/// Issue 30: the only agent's key is refused at the first attempt (a 401
/// the fake reports as Claude Code does). No attempt is retried, none is
/// abandoned: each task that started has one failed attempt, the run ends
/// within seconds with exit 78, and its status says stopped, for the fix.
#[test]
fn a_refused_key_with_no_fallback_ends_the_run_at_once() {
    let mut sb = Sandbox::new();
    let p = project(
        &mut sb,
        &[("a", &[], "true"), ("b", &[], "true"), ("c", &[], "true")],
        None,
    );
    p.script(
        "default",
        "print '{\"type\":\"system\",\"subtype\":\"api_retry\",\"attempt\":1,\"error_status\":401,\"error\":\"authentication_failed\"}'\nhang\n",
    );
    let (out, took) = timed(
        &sb,
        &p.repo,
        &["run", "proj", "--agent", "fake", "--cap", "2"],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(78), "{err}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    eprintln!("a refused key with no fallback ended the run in {took:?}");
    assert!(err.contains("its credentials were refused"), "{err}");
    // (The provider's own words may say Claude Code was retrying; the
    // task is not.)
    assert!(!err.contains("retrying #"), "{err}");
    let evs = events(&sb, &p.repo);
    let ended: Vec<&serde_json::Value> = evs
        .iter()
        .filter(|e| e["type"] == "attempt_finished")
        .collect();
    assert!(!ended.is_empty());
    assert_eq!(
        evs.iter()
            .filter(|e| e["type"] == "attempt_created")
            .count(),
        ended.len()
    );
    for e in &ended {
        assert_eq!(e["outcome"], "failed", "{e}");
        assert_eq!(e["failure"]["class"], "config", "{e}");
        assert_eq!(e["attempt"], 1, "retried: {e}");
    }
    let stop = evs
        .iter()
        .find(|e| e["type"] == "run_stopped")
        .expect("stopped");
    assert_eq!(stop["reason"], "config");
    let s = status_json(&sb, &p.repo);
    assert_eq!(s["exit_code"], 78, "{s}");
    for t in s["tasks"].as_array().expect("tasks") {
        assert!(t["status"] == "stopped" || t["status"] == "pending", "{s}");
    }
    // Once the key works, the same command resumes: the tasks run again
    // with their whole retry budget.
    for id in ["a", "b", "c"] {
        p.script(id, &format!("write src/{id}/done yes\n"));
    }
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// A program the preflight cannot see into (a template running `sh -c`)
/// turns out missing when its attempt starts (exit 127): the task is not
/// retried and the run stops at once with exit 78.
#[test]
fn a_program_missing_at_the_first_attempt_stops_the_run_without_retries() {
    let mut sb = Sandbox::new();
    let p = project(
        &mut sb,
        &[("a", &[], "true")],
        Some(
            "[orch]\n    agent = mine\n[agent \"mine\"]\n    kind = command\n    command = sh -c 'exec no-such-inner-agent'\n",
        ),
    );
    let (out, took) = timed(&sb, &p.repo, &["run", "proj"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(78), "{err}");
    assert!(took < FAST, "took {took:?}");
    let created = events(&sb, &p.repo)
        .iter()
        .filter(|e| e["type"] == "attempt_created")
        .count();
    assert_eq!(created, 1, "{err}");
    assert!(err.contains("its program is missing"), "{err}");
}
