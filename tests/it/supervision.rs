//! Agents never outlive their driver (ARCHITECTURE.md, invariant 5, issue 12): when `git
//! orch run` or `git orch worker` dies by SIGKILL, its agents and all their
//! descendants end within a few seconds, with or without the sandbox —
//! including a grandchild that left the agent's process group with
//! `setsid`, which no `killpg` reaches.

use crate::common;
use crate::tools;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use common::{Sandbox, project, stderr};

const MARKER: &str = "FAKE_TEST_MARKER";

/// The agent: a child and a setsid grandchild that ignore SIGTERM, then
/// hang.
const FAMILY: &str = "spawn-family\nhang\n";

/// Starts the binary itself (not through `git orch`, so the SIGKILL
/// reaches the driver rather than a `git` wrapper).
fn start(sb: &Sandbox, repo: &Path, args: &[&str]) -> Child {
    let exe = common::bin_dir().join("git-orch");
    sb.command(&exe.to_string_lossy(), repo)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("git-orch starts")
}

/// Kills `driver` with SIGKILL once every agent (each with a child and a
/// grandchild) runs, then requires every marked process to be gone within
/// 5 seconds.
fn kill_9_leaves_nothing(mut driver: Child, marker: &str, agents: usize) {
    // Each agent is the fake's bash, its child and its grandchild.
    let started = tools::wait_until(Duration::from_secs(60), || {
        tools::with_env(MARKER, marker).len() >= 3 * agents
            || driver.try_wait().expect("poll driver").is_some()
    });
    if driver.try_wait().expect("poll driver").is_some() {
        let out = driver.wait_with_output().expect("output");
        tools::kill_marked(MARKER, marker);
        panic!("the driver ended before its agents ran: {}", stderr(&out));
    }
    assert!(started, "the agents did not start");
    let before = tools::with_env(MARKER, marker);
    driver.kill().expect("SIGKILL the driver");
    driver.wait().expect("reap the driver");
    let gone = tools::wait_until(Duration::from_secs(5), || {
        tools::with_env(MARKER, marker).is_empty()
    });
    let left = tools::with_env(MARKER, marker);
    tools::kill_marked(MARKER, marker);
    assert!(
        gone,
        "processes of the agents outlived their driver by 5 s: {left:?} (of {before:?})"
    );
}

#[test]
fn kill_9_of_the_driver_ends_its_agents_and_all_their_descendants() {
    let mut sb = Sandbox::new();
    let marker = tools::marker();
    sb.set_env(MARKER, &marker);
    let p = project(&mut sb, &[("a", &[], "true"), ("b", &[], "true")], None);
    p.script("default", FAMILY);
    let driver = start(&sb, &p.repo, &["run", "proj", "--agent", "fake"]);
    kill_9_leaves_nothing(driver, &marker, 2);
}

#[test]
fn kill_9_of_the_driver_ends_sandboxed_agents_too() {
    if !tools::bwrap_works("kill_9_of_the_driver_ends_sandboxed_agents_too") {
        return;
    }
    let mut sb = Sandbox::new();
    let marker = tools::marker();
    sb.set_env(MARKER, &marker);
    sb.set_env("GIT_ORCH_SANDBOX", "bwrap");
    // The sandbox hides the test's folder: the script comes in the
    // environment.
    sb.set_env("FAKE_AGENT_SCRIPT", FAMILY);
    let p = project(&mut sb, &[("a", &[], "true")], None);
    let driver = start(&sb, &p.repo, &["run", "proj", "--agent", "fake"]);
    kill_9_leaves_nothing(driver, &marker, 1);
}

#[test]
fn kill_9_of_a_worker_ends_its_agents() {
    let mut sb = Sandbox::new();
    let marker = tools::marker();
    sb.set_env(MARKER, &marker);
    let p = project(&mut sb, &[("a", &[], "true")], None);
    p.script("default", FAMILY);
    common::share(&sb, &p.repo);
    sb.orch_ok(&p.repo, &["run", "proj", "--agent", "fake", "--start-only"]);
    sb.orch_ok(&p.repo, &["sync"]);
    let worker = start(
        &sb,
        &p.repo,
        &["worker", "--remote", "origin", "--poll", "0.2"],
    );
    kill_9_leaves_nothing(worker, &marker, 1);
}
