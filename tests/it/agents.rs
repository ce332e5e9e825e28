//! `git orch agents`: which agent CLIs are installed, whether each passes
//! its preflight (with the fix), and the sandbox state; and the runner's
//! use of the same preflight (an agent that cannot work is skipped for the
//! fallback, with the fix in the reason).

use crate::common;

use common::{Sandbox, project, status_json, stderr, stdout};

fn survey(sb: &Sandbox, dir: &std::path::Path, args: &[&str]) -> (Option<i32>, serde_json::Value) {
    let mut all = vec!["agents", "--json"];
    all.extend_from_slice(args);
    let out = sb.orch(dir, &all);
    let v = serde_json::from_str(stdout(&out).trim())
        .unwrap_or_else(|e| panic!("bad JSON ({e}): {}{}", stdout(&out), stderr(&out)));
    (out.status.code(), v)
}

fn agent<'a>(v: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    v["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .find(|a| a["name"] == name)
        .unwrap_or_else(|| panic!("no agent {name} in {v}"))
}

#[test]
fn agents_lists_the_clis_their_problems_and_the_fix() {
    let sb = Sandbox::new();
    // The fixtures' fake claude and codex are on PATH; gemini and aider
    // are not.
    let (code, v) = survey(&sb, sb.path(), &[]);
    assert_eq!(code, Some(0));
    let names: Vec<&str> = v["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .map(|a| a["name"].as_str().expect("name"))
        .collect();
    assert_eq!(names, ["claude", "codex", "gemini", "aider"]);
    let claude = agent(&v, "claude");
    assert_eq!(claude["installed"], true);
    assert_eq!(claude["findings"][0]["severity"], "error");
    assert!(
        claude["findings"][0]["fix"]
            .as_str()
            .expect("fix")
            .contains("ANTHROPIC_API_KEY"),
        "{claude}"
    );
    let gemini = agent(&v, "gemini");
    assert_eq!(gemini["installed"], false);
    // The tests run with GIT_ORCH_SANDBOX=none.
    assert_eq!(v["sandbox"]["in_force"], "none");
    assert_eq!(v["sandbox"]["requested"], "none");

    // Human output: one line per agent, the fix under each problem.
    let out = sb.orch(sb.path(), &["agents"]);
    let text = stdout(&out);
    assert!(
        text.starts_with("sandbox: no sandbox (sandbox = none)"),
        "{text}"
    );
    assert!(text.contains("gemini     gemini"), "{text}");
    assert!(text.contains("not installed"), "{text}");
    assert!(
        text.contains("fix: install Gemini CLI: npm install -g @google/gemini-cli"),
        "{text}"
    );
}

#[test]
fn a_key_in_the_environment_makes_claude_ready_and_a_named_agent_that_cannot_work_exits_3() {
    let mut sb = Sandbox::new();
    sb.set_env("ANTHROPIC_API_KEY", "sk-test");
    let (code, v) = survey(&sb, sb.path(), &["claude"]);
    assert_eq!(code, Some(0), "{v}");
    assert!(
        agent(&v, "claude")["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .all(|f| f["severity"] != "error"),
        "{v}"
    );
    let (code, _) = survey(&sb, sb.path(), &["codex"]);
    assert_eq!(code, Some(3));
    let out = sb.orch(sb.path(), &["agents", "nosuch"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no agent named \"nosuch\""),
        "{}",
        stderr(&out)
    );
}

#[test]
fn configured_sections_and_sandbox_settings_are_shown() {
    let mut sb = Sandbox::new();
    let p = project(
        &mut sb,
        &[("a", &[], "true")],
        Some(
            "[sandbox]\n    network = false\n[agent \"gw\"]\n    kind = codex\n    passEnv = MY_GATEWAY_*\n",
        ),
    );
    sb.set_env("GIT_ORCH_SANDBOX", "");
    let (_, v) = survey(&sb, &p.repo, &[]);
    assert_eq!(agent(&v, "gw")["kind"], "codex");
    assert_eq!(v["sandbox"]["requested"], "auto");
    assert_eq!(v["sandbox"]["network"], false);
}

#[test]
fn a_run_skips_an_agent_that_fails_its_preflight_for_the_fallback() {
    let mut sb = Sandbox::new();
    // claude has no key here: the run falls back to the fake at once.
    let p = project(
        &mut sb,
        &[("a", &[], "test -f src/a/done")],
        Some("[orch]\n    fallback = fake\n"),
    );
    p.script("a", "write src/a/done yes\n");
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "claude"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(
            "warning: agent claude cannot work here: Claude Code has no API key and no login"
        ),
        "{err}"
    );
    let s = status_json(&sb, &p.repo);
    assert_eq!(s["tasks"][0]["status"], "done");
    assert_eq!(s["tasks"][0]["agent"], "fake");
}

#[test]
fn an_agents_own_error_is_the_cause_in_the_failure_notes_and_the_retry_context() {
    let mut sb = Sandbox::new();
    let p = project(&mut sb, &[("a", &[], "test -f src/a/done")], None);
    p.script(
        "a.1",
        "write src/a/partial half\neprint \"fatal: the model refused the request: context too long\"\nexit 1\n",
    );
    // The retry is told why, and proves it.
    p.script(
        "a.2",
        "require-retry-mention \"context too long\"\nwrite src/a/done yes\n",
    );
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let evs = common::events(&sb, &p.repo);
    let first = evs
        .iter()
        .find(|e| e["type"] == "attempt_finished" && e["attempt"] == 1)
        .expect("attempt 1");
    assert_eq!(
        first["failure"]["reason"],
        "agent fake exited 1: fatal: the model refused the request: context too long"
    );
    let agent = evs
        .iter()
        .find(|e| e["type"] == "agent_finished" && e["attempt"] == 1)
        .expect("agent 1");
    assert_eq!(
        agent["cause"],
        "fatal: the model refused the request: context too long"
    );
    // The note on attempt 1's result commit (its partial work) says it too.
    // Its branch went when the run ended; the cleanup recorded the tip.
    let tip = evs
        .iter()
        .find(|e| e["type"] == "attempt_branch_removed" && e["attempt"] == 1)
        .and_then(|e| e["tip"].as_str())
        .expect("attempt 1's branch was cleaned up")
        .to_owned();
    let note = sb.git(&p.repo, &["notes", "--ref=orch", "show", &tip]);
    assert!(note.contains("context too long"), "{note}");
}
