//! The real agent CLIs (Claude Code, Codex CLI, Gemini CLI, Aider) driven
//! through `git orch run` against the mock model servers of
//! `tests/it/mock_models`, with each CLI's `.orch/config` recipe taken
//! verbatim from its page in docs/agents/ (only the gateway address
//! `http://127.0.0.1:4000` is replaced by the mock's).
//!
//! The CLIs are found in `GIT_ORCH_E2E_BIN` (folders separated by `:`),
//! else in `~/.cache/git-orch-e2e/npm/bin` and
//! `~/.cache/git-orch-e2e/aider-venv/bin`, where `.ci/run` installs them.
//! Where they are not all installed, these tests are reported as ignored
//! (`src/build.rs` sets `e2e_agent_clis` when they are); under `CI=true`
//! they always run, and a missing CLI fails them.
//!
//! Runs use the default `sandbox = auto`, so where bubblewrap works (CI)
//! every CLI runs in the sandbox.
//!
//! To look at a failing run's logs and the agent's private home, set
//! `E2E_KEEP=<folder>`: each run's log folder is copied there.

use crate::common;
use crate::mock_models;
use crate::tools;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{Project, Sandbox, events, project, status_json, stderr};
use mock_models::{Api, MockServer, Scenario, TURN_USAGE};

/// One CLI under test.
#[derive(Clone, Copy)]
struct Cli {
    name: &'static str,
    program: &'static str,
    api: Api,
    /// The variable holding its API key.
    key: &'static str,
}

const CLAUDE: Cli = Cli {
    name: "claude",
    program: "claude",
    api: Api::Anthropic,
    key: "ANTHROPIC_API_KEY",
};
const CODEX: Cli = Cli {
    name: "codex",
    program: "codex",
    api: Api::OpenAiResponses,
    key: "OPENAI_API_KEY",
};
const GEMINI: Cli = Cli {
    name: "gemini",
    program: "gemini",
    api: Api::Gemini,
    key: "GEMINI_API_KEY",
};
const AIDER: Cli = Cli {
    name: "aider",
    program: "aider",
    api: Api::OpenAiChat,
    key: "OPENAI_API_KEY",
};

/// The gateway address the recipes name, replaced by the mock's.
const GATEWAY: &str = "http://127.0.0.1:4000";

/// The file the scripted tool call writes, inside the task's globs.
const OWNED: &str = "src/a/hello.txt";

/// Folders the CLIs are looked for in.
fn bin_dirs() -> Vec<PathBuf> {
    if let Some(v) = std::env::var_os("GIT_ORCH_E2E_BIN") {
        return std::env::split_paths(&v).collect();
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    let cache = home.join(".cache/git-orch-e2e");
    vec![cache.join("npm/bin"), cache.join("aider-venv/bin")]
}

/// The folder holding `cli`'s program, or a loud skip (a failure in CI).
fn locate(cli: Cli, test: &str) -> Option<PathBuf> {
    let found = bin_dirs()
        .into_iter()
        .find(|d| d.join(cli.program).is_file());
    if found.is_none() {
        tools::missing(
            test,
            &format!(
                "{} is not installed in {:?} (set GIT_ORCH_E2E_BIN or run .ci/run)",
                cli.program,
                bin_dirs()
            ),
        );
    }
    found
}

/// A fenced block of a docs page, after `<!-- e2e: NAME -->`.
fn doc_block(page: &str, name: &str) -> String {
    let path = common::repo_root()
        .join("docs/agents")
        .join(format!("{page}.md"));
    let text = std::fs::read_to_string(&path).expect("docs page");
    let marker = format!("<!-- e2e: {name} -->");
    let after = &text[text
        .find(&marker)
        .unwrap_or_else(|| panic!("{marker} in {}", path.display()))..];
    let start = after.find("```").expect("a fenced block");
    let body = &after[start..];
    let body = &body[body.find('\n').expect("fence line") + 1..];
    body[..body.find("```").expect("closing fence")].to_owned()
}

/// A run's world: the sandbox, the project, the mock.
struct World {
    sb: Sandbox,
    p: Project,
    server: Option<MockServer>,
}

/// Sets up a project with one task `a` owning `src/a/**`, verified by
/// the scripted file, configured with `cli`'s recipe pointing at a mock
/// playing `scenario` (or at `url`), plus `extra` config. A fallback to the
/// offline fake writes the file too.
fn world(
    cli: Cli,
    test: &str,
    scenario: Option<Scenario>,
    url: Option<String>,
    extra: &str,
) -> Option<World> {
    world_of(cli, test, scenario, url, extra, &["a"])
}

/// [`world`] with tasks `ids`, each owning `src/<id>/**` and verified by
/// its own `hello.txt`.
fn world_of(
    cli: Cli,
    test: &str,
    scenario: Option<Scenario>,
    url: Option<String>,
    extra: &str,
    ids: &[&str],
) -> Option<World> {
    let bin = locate(cli, test)?;
    let server = scenario.map(|s| MockServer::start(cli.api, s));
    let url = url.unwrap_or_else(|| server.as_ref().expect("a server or a URL").url());
    let mut sb = Sandbox::new();
    // The real CLI before the fixtures' fakes of the same name.
    sb.set_env(
        "PATH",
        &format!(
            "{}:{}:{}:/usr/local/bin:/usr/bin:/bin",
            bin.display(),
            common::bin_dir().display(),
            common::repo_root().join("fixtures/agents").display()
        ),
    );
    sb.set_env(cli.key, "sk-test-key");
    // The recipe's own sandbox setting (auto), not the harness's `none`.
    sb.set_env("GIT_ORCH_SANDBOX", "");
    // The fallback fake reads its script from the environment, which the
    // sandbox passes (its test folder is hidden).
    sb.set_env(
        "FAKE_AGENT_SCRIPT",
        "run sh -c 'mkdir -p src/$ORCH_TASK && echo from-the-fallback > src/$ORCH_TASK/hello.txt'\n",
    );
    let recipe = doc_block(cli.name, "recipe").replace(GATEWAY, &url);
    let config = format!("{recipe}{extra}");
    let verify: Vec<String> = ids
        .iter()
        .map(|t| format!("test -f src/{t}/hello.txt"))
        .collect();
    let tasks: Vec<(&str, &[&str], &str)> = ids
        .iter()
        .zip(&verify)
        .map(|(t, v)| (*t, &[][..], v.as_str()))
        .collect();
    let p = project(&mut sb, &tasks, Some(&config));
    if cli.api == Api::Gemini {
        // The user's own settings file (the sandbox copies it into the
        // agent's private home).
        let dir = sb.path().join("home/.gemini");
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(
            dir.join("settings.json"),
            doc_block("gemini", "gemini-settings"),
        )
        .expect("settings");
    }
    Some(World { sb, p, server })
}

/// The events of one type.
fn of_type(w: &World, kind: &str) -> Vec<serde_json::Value> {
    events(&w.sb, &w.p.repo)
        .into_iter()
        .filter(|e| e["type"] == kind)
        .collect()
}

/// Runs the plan; returns the exit code, stderr and how long it took.
fn run(w: &World, args: &[&str]) -> (Option<i32>, String, Duration) {
    let start = Instant::now();
    let mut all = vec!["run", "proj"];
    all.extend_from_slice(args);
    let out = w.sb.orch(&w.p.repo, &all);
    (out.status.code(), stderr(&out), start.elapsed())
}

/// The first attempt's agent output, for failure messages.
fn agent_log(w: &World) -> String {
    let logs = w.p.repo.join(".git/orch/logs");
    let mut out = String::new();
    for run in std::fs::read_dir(&logs).into_iter().flatten().flatten() {
        if let Some(keep) = std::env::var_os("E2E_KEEP") {
            // Debugging: keep the attempt's logs and private home.
            let _ = std::process::Command::new("cp")
                .arg("-r")
                .arg(run.path())
                .arg(&keep)
                .status();
        }
        for name in ["agent.out", "agent.err"] {
            let f = run.path().join("a/attempt-1").join(name);
            out.push_str(&format!(
                "--- {name}\n{}\n",
                std::fs::read_to_string(&f).unwrap_or_default()
            ));
        }
    }
    out
}

fn landed(repo: &Path) -> Option<String> {
    std::fs::read_to_string(repo.join(OWNED)).ok()
}

/// Success: the tool call writes the owned file, the work lands and
/// verifies, and the usage recorded is what the mock reported.
fn lands(cli: Cli, test: &str) {
    lands_in(cli, test, "");
}

/// [`lands`] with the sandbox mode `sandbox` ("" for the recipe's own).
fn lands_in(cli: Cli, test: &str, sandbox: &str) {
    lands_in_with(cli, test, sandbox, &[]);
}

/// [`lands_in`] with more environment for the run.
fn lands_in_with(cli: Cli, test: &str, sandbox: &str, env: &[(&str, &str)]) {
    let Some(mut w) = world(
        cli,
        test,
        Some(Scenario::WriteFile {
            path: OWNED.into(),
            content: format!("hello from {}", cli.name),
        }),
        None,
        "",
    ) else {
        return;
    };
    w.sb.set_env("GIT_ORCH_SANDBOX", sandbox);
    for (k, v) in env {
        w.sb.set_env(k, v);
    }
    let (code, err, took) = run(&w, &[]);
    assert_eq!(code, Some(0), "{}: {err}\n{}", cli.name, agent_log(&w));
    let confined = of_type(&w, "attempt_started")[0]["sandbox"].clone();
    if !sandbox.is_empty() {
        assert_eq!(confined, sandbox);
    }
    assert_eq!(
        landed(&w.p.repo).map(|s| s.trim().to_owned()),
        Some(format!("hello from {}", cli.name)),
        "{err}"
    );
    let s = status_json(&w.sb, &w.p.repo);
    assert_eq!(s["tasks"][0]["status"], "done", "{s}");
    let server = w.server.as_ref().expect("server");
    let turns = server.turns() as u64;
    // Tool-calling CLIs take a turn after the tool; Aider edits from one
    // reply.
    let least = if cli.api == Api::OpenAiChat { 1 } else { 2 };
    assert!(turns >= least, "{} made {turns} model turns", cli.name);
    let finished = of_type(&w, "agent_finished");
    let usage = &finished[0]["usage"];
    let log = agent_log(&w);
    assert_eq!(
        usage["input_tokens"],
        turns * TURN_USAGE.0,
        "{usage}\n{log}"
    );
    assert_eq!(usage["output_tokens"], turns * TURN_USAGE.2, "{usage}");
    // Aider prints cache figures only for providers that bill them apart.
    if cli.api != Api::OpenAiChat {
        assert_eq!(usage["cache_read_tokens"], turns * TURN_USAGE.1, "{usage}");
    }
    eprintln!(
        "e2e {}: landed in {took:?} (sandbox {confined}), {turns} turns",
        cli.name
    );
}

#[test]
#[cfg_attr(
    not(e2e_agent_clis),
    ignore = "needs the real agent CLIs: .ci/run installs them"
)]
fn claude_lands_and_its_usage_matches_the_mock() {
    lands(CLAUDE, "claude_lands_and_its_usage_matches_the_mock");
}

#[test]
#[cfg_attr(
    not(e2e_agent_clis),
    ignore = "needs the real agent CLIs: .ci/run installs them"
)]
fn codex_lands_and_its_usage_matches_the_mock() {
    lands(CODEX, "codex_lands_and_its_usage_matches_the_mock");
}

#[test]
#[cfg_attr(
    not(e2e_agent_clis),
    ignore = "needs the real agent CLIs: .ci/run installs them"
)]
fn gemini_lands_and_its_usage_matches_the_mock() {
    lands(GEMINI, "gemini_lands_and_its_usage_matches_the_mock");
}

#[test]
#[cfg_attr(
    not(e2e_agent_clis),
    ignore = "needs the real agent CLIs: .ci/run installs them"
)]
fn aider_lands_and_its_usage_matches_the_mock() {
    lands(AIDER, "aider_lands_and_its_usage_matches_the_mock");
}

// Without the sandbox each CLI runs in its milder permission mode (Claude
// `acceptEdits`, Codex its own `workspace-write` sandbox, Gemini
// `auto_edit`): the edit still goes through.

#[test]
#[cfg_attr(
    not(e2e_agent_clis),
    ignore = "needs the real agent CLIs: .ci/run installs them"
)]
fn claude_lands_without_the_sandbox_in_accept_edits_mode() {
    lands_in(
        CLAUDE,
        "claude_lands_without_the_sandbox_in_accept_edits_mode",
        "none",
    );
}

#[test]
#[cfg_attr(
    not(e2e_agent_clis),
    ignore = "needs the real agent CLIs: .ci/run installs them"
)]
fn codex_lands_without_the_sandbox_in_its_own_workspace_write_sandbox() {
    // Codex refuses to set up its own sandbox's helpers under /tmp, where
    // the test's home folder is: its home goes elsewhere for this test.
    let home = tempfile::Builder::new()
        .prefix("codex-home-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("codex home");
    lands_in_with(
        CODEX,
        "codex_lands_without_the_sandbox_in_its_own_workspace_write_sandbox",
        "none",
        &[("CODEX_HOME", &home.path().to_string_lossy())],
    );
}

#[test]
#[cfg_attr(
    not(e2e_agent_clis),
    ignore = "needs the real agent CLIs: .ci/run installs them"
)]
fn gemini_lands_without_the_sandbox_in_auto_edit_mode() {
    lands_in(
        GEMINI,
        "gemini_lands_without_the_sandbox_in_auto_edit_mode",
        "none",
    );
}

#[test]
#[cfg_attr(
    not(e2e_agent_clis),
    ignore = "needs the real agent CLIs: .ci/run installs them"
)]
fn aider_lands_without_the_sandbox() {
    lands_in(AIDER, "aider_lands_without_the_sandbox", "none");
}

/// The config that makes an unavailable agent hand over to the offline
/// fake at once, with no retries of the task itself.
const FALLBACK: &str = "[orch]\n    fallback = fake\n    retries = 0\n";

/// The agent's first attempt, its `agent_finished` event and its
/// `attempt_finished` event.
fn first_attempt(w: &World) -> (serde_json::Value, serde_json::Value) {
    let agent = of_type(w, "agent_finished")
        .into_iter()
        .find(|e| e["attempt"] == 1)
        .expect("attempt 1 ran an agent");
    let finished = of_type(w, "attempt_finished")
        .into_iter()
        .find(|e| e["attempt"] == 1)
        .expect("attempt 1 finished");
    (agent, finished)
}

/// An agent the provider refuses (or cannot be reached) is found
/// unavailable from its output within seconds, not at its timeout; the
/// cause is kept; the fallback agent lands the task.
fn falls_back(cli: Cli, test: &str, scenario: Option<Scenario>, url: Option<String>, expect: &str) {
    let Some(w) = world(cli, test, scenario, url, FALLBACK) else {
        return;
    };
    let (code, err, took) = run(&w, &[]);
    assert_eq!(code, Some(0), "{}: {err}\n{}", cli.name, agent_log(&w));
    assert_eq!(
        landed(&w.p.repo).map(|s| s.trim().to_owned()),
        Some("from-the-fallback".to_owned()),
        "{err}"
    );
    let (agent, finished) = first_attempt(&w);
    let why = agent["unavailable"].as_str().unwrap_or_default();
    assert!(
        why.contains(expect),
        "{}: unavailable {why:?}, expected {expect:?}\n{}",
        cli.name,
        agent_log(&w)
    );
    let ms = agent["duration_ms"].as_u64().expect("duration");
    assert!(ms < 60_000, "{}: took {ms} ms to give up", cli.name);
    assert_eq!(finished["failure"]["class"], "unavailable", "{finished}");
    let reason = finished["failure"]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains(&format!("agent {} unavailable", cli.name)),
        "{reason}"
    );
    let s = status_json(&w.sb, &w.p.repo);
    assert_eq!(s["tasks"][0]["status"], "done", "{s}");
    assert_eq!(s["tasks"][0]["agent"], "fake", "{s}");
    eprintln!(
        "e2e {} {expect}: gave up after {ms} ms ({why}); run took {took:?}",
        cli.name
    );
}

macro_rules! unavailable_tests {
    ($($name:ident: $cli:expr, $scenario:expr, $url:expr, $expect:expr;)*) => {$(
        #[test]
        #[cfg_attr(not(e2e_agent_clis), ignore = "needs the real agent CLIs: .ci/run installs them")]
        fn $name() {
            falls_back($cli, stringify!($name), $scenario, $url, $expect);
        }
    )*};
}

unavailable_tests! {
    claude_401_falls_back_at_once: CLAUDE, Some(Scenario::Status(401)), None, "credentials were refused";
    codex_401_falls_back_at_once: CODEX, Some(Scenario::Status(401)), None, "credentials were refused";
    gemini_401_falls_back_at_once: GEMINI, Some(Scenario::Status(401)), None, "credentials were refused";
    aider_401_falls_back_at_once: AIDER, Some(Scenario::Status(401)), None, "credentials were refused";
    claude_429_falls_back_within_seconds: CLAUDE, Some(Scenario::Status(429)), None, "rate limited";
    codex_429_falls_back_within_seconds: CODEX, Some(Scenario::Status(429)), None, "rate limited";
    gemini_429_falls_back_within_seconds: GEMINI, Some(Scenario::Status(429)), None, "rate limited";
    aider_429_falls_back_within_seconds: AIDER, Some(Scenario::Status(429)), None, "rate limited";
    claude_529_falls_back_within_seconds: CLAUDE, Some(Scenario::Status(529)), None, "overloaded";
    codex_503_falls_back_within_seconds: CODEX, Some(Scenario::Status(503)), None, "overloaded";
    gemini_503_falls_back_within_seconds: GEMINI, Some(Scenario::Status(503)), None, "overloaded";
    aider_503_falls_back_within_seconds: AIDER, Some(Scenario::Status(503)), None, "overloaded";
    claude_server_down_falls_back: CLAUDE, None, Some(mock_models::dead_url()), "could not be reached";
    codex_server_down_falls_back: CODEX, None, Some(mock_models::dead_url()), "could not be reached";
    gemini_server_down_falls_back: GEMINI, None, Some(mock_models::dead_url()), "could not be reached";
    aider_server_down_falls_back: AIDER, None, Some(mock_models::dead_url()), "could not be reached";
}

/// A server that stops answering after the tool call: the agent is killed
/// at its own timeout (named in the reason), and the usage of the turn it
/// finished is recorded.
fn times_out(cli: Cli, test: &str) {
    let extra = format!(
        "[orch]\n    retries = 0\n[agent \"{}\"]\n    timeout = 20\n",
        cli.name
    );
    let Some(w) = world(
        cli,
        test,
        Some(Scenario::HangAfterTool {
            path: OWNED.into(),
            content: "written before the hang".into(),
        }),
        None,
        &extra,
    ) else {
        return;
    };
    let (code, err, took) = run(&w, &[]);
    assert_eq!(code, Some(3), "{}: {err}\n{}", cli.name, agent_log(&w));
    let (agent, finished) = first_attempt(&w);
    assert_eq!(agent["timed_out"], true, "{agent}");
    assert_eq!(finished["failure"]["class"], "timeout", "{finished}");
    let reason = finished["failure"]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains(&format!("agent {} ran past its timeout of 20s", cli.name)),
        "{reason}"
    );
    let usage = &agent["usage"];
    assert_eq!(
        usage["input_tokens"],
        TURN_USAGE.0,
        "{usage}\n{}",
        agent_log(&w)
    );
    assert_eq!(
        usage["output_tokens"],
        TURN_USAGE.2,
        "{usage}\n{}",
        agent_log(&w)
    );
    assert!(took < Duration::from_secs(90), "{took:?}");
    eprintln!("e2e {} hang: timed out, run took {took:?}", cli.name);
}

#[test]
#[cfg_attr(
    not(e2e_agent_clis),
    ignore = "needs the real agent CLIs: .ci/run installs them"
)]
fn claude_hanging_after_a_tool_call_times_out_with_its_partial_usage() {
    times_out(
        CLAUDE,
        "claude_hanging_after_a_tool_call_times_out_with_its_partial_usage",
    );
}

#[test]
#[cfg_attr(
    not(e2e_agent_clis),
    ignore = "needs the real agent CLIs: .ci/run installs them"
)]
fn codex_hanging_after_a_tool_call_times_out_with_its_partial_usage() {
    times_out(
        CODEX,
        "codex_hanging_after_a_tool_call_times_out_with_its_partial_usage",
    );
}

#[test]
#[cfg_attr(
    not(e2e_agent_clis),
    ignore = "needs the real agent CLIs: .ci/run installs them"
)]
fn gemini_hanging_after_a_tool_call_times_out_with_its_partial_usage() {
    times_out(
        GEMINI,
        "gemini_hanging_after_a_tool_call_times_out_with_its_partial_usage",
    );
}

#[test]
#[cfg_attr(
    not(e2e_agent_clis),
    ignore = "needs the real agent CLIs: .ci/run installs them"
)]
fn aider_hanging_after_its_edit_times_out_with_its_partial_usage() {
    times_out(
        AIDER,
        "aider_hanging_after_its_edit_times_out_with_its_partial_usage",
    );
}

/// A tool call that writes outside the owned globs: the scope gate fails
/// the attempt, names the path, and nothing lands.
fn out_of_scope(cli: Cli, test: &str) {
    let Some(w) = world(
        cli,
        test,
        Some(Scenario::WriteFile {
            path: "src/b/evil.txt".into(),
            content: "not mine".into(),
        }),
        None,
        "[orch]\n    retries = 0\n",
    ) else {
        return;
    };
    let (code, err, _) = run(&w, &[]);
    assert_eq!(code, Some(3), "{}: {err}\n{}", cli.name, agent_log(&w));
    let (_, finished) = first_attempt(&w);
    assert_eq!(finished["failure"]["class"], "scope", "{finished}");
    let reason = finished["failure"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("src/b/evil.txt"), "{reason}");
    assert!(!w.p.repo.join("src/b/evil.txt").exists());
}

#[test]
#[cfg_attr(
    not(e2e_agent_clis),
    ignore = "needs the real agent CLIs: .ci/run installs them"
)]
fn claude_writing_outside_its_globs_fails_the_scope_gate() {
    out_of_scope(
        CLAUDE,
        "claude_writing_outside_its_globs_fails_the_scope_gate",
    );
}

#[test]
#[cfg_attr(
    not(e2e_agent_clis),
    ignore = "needs the real agent CLIs: .ci/run installs them"
)]
fn codex_writing_outside_its_globs_fails_the_scope_gate() {
    out_of_scope(
        CODEX,
        "codex_writing_outside_its_globs_fails_the_scope_gate",
    );
}

#[test]
#[cfg_attr(
    not(e2e_agent_clis),
    ignore = "needs the real agent CLIs: .ci/run installs them"
)]
fn gemini_writing_outside_its_globs_fails_the_scope_gate() {
    out_of_scope(
        GEMINI,
        "gemini_writing_outside_its_globs_fails_the_scope_gate",
    );
}

#[test]
#[cfg_attr(
    not(e2e_agent_clis),
    ignore = "needs the real agent CLIs: .ci/run installs them"
)]
fn aider_writing_outside_its_globs_fails_the_scope_gate() {
    out_of_scope(
        AIDER,
        "aider_writing_outside_its_globs_fails_the_scope_gate",
    );
}

/// A stream that breaks off with garbage: every CLI reports a lost
/// connection (Claude: "Connection to the API was lost (ECONNRESET)",
/// Codex: "stream disconnected before completion", Gemini: a JSON syntax
/// error talking to the API, Aider: LiteLLM's "Connection error"), so the
/// agent counts as unreachable and the fallback lands the task.
fn malformed(cli: Cli, test: &str) -> Option<(serde_json::Value, serde_json::Value, World)> {
    let w = world(cli, test, Some(Scenario::Malformed), None, FALLBACK)?;
    let (code, err, took) = run(&w, &[]);
    assert_eq!(code, Some(0), "{}: {err}\n{}", cli.name, agent_log(&w));
    let (agent, finished) = first_attempt(&w);
    assert_eq!(finished["failure"]["class"], "unavailable", "{finished}");
    let reason = finished["failure"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("could not be reached"), "{reason}");
    assert_eq!(
        landed(&w.p.repo).map(|s| s.trim().to_owned()),
        Some("from-the-fallback".into())
    );
    eprintln!(
        "e2e {} malformed: {} / {} after {} ms; run took {took:?}",
        cli.name, finished["failure"]["class"], finished["failure"]["reason"], agent["duration_ms"]
    );
    Some((agent, finished, w))
}

#[test]
#[cfg_attr(
    not(e2e_agent_clis),
    ignore = "needs the real agent CLIs: .ci/run installs them"
)]
fn claude_malformed_stream() {
    malformed(CLAUDE, "claude_malformed_stream");
}

#[test]
#[cfg_attr(
    not(e2e_agent_clis),
    ignore = "needs the real agent CLIs: .ci/run installs them"
)]
fn codex_malformed_stream() {
    malformed(CODEX, "codex_malformed_stream");
}

#[test]
#[cfg_attr(
    not(e2e_agent_clis),
    ignore = "needs the real agent CLIs: .ci/run installs them"
)]
fn gemini_malformed_stream() {
    malformed(GEMINI, "gemini_malformed_stream");
}

#[test]
#[cfg_attr(
    not(e2e_agent_clis),
    ignore = "needs the real agent CLIs: .ci/run installs them"
)]
fn aider_malformed_stream() {
    malformed(AIDER, "aider_malformed_stream");
}

/// A refused key makes the agent unavailable for the rest of the run: the
/// next task goes straight to the fallback, with no second try.
#[test]
#[cfg_attr(
    not(e2e_agent_clis),
    ignore = "needs the real agent CLIs: .ci/run installs them"
)]
fn a_refused_key_is_not_tried_again_in_the_run() {
    let Some(w) = world_of(
        CLAUDE,
        "a_refused_key_is_not_tried_again_in_the_run",
        Some(Scenario::Status(401)),
        None,
        &format!("{FALLBACK}    cap = 1\n"),
        &["a", "b"],
    ) else {
        return;
    };
    let (code, err, _) = run(&w, &[]);
    assert_eq!(code, Some(0), "{err}");
    let created: Vec<(String, String)> = of_type(&w, "attempt_created")
        .iter()
        .map(|e| {
            (
                e["task"].as_str().unwrap_or("").to_owned(),
                e["agent"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    let claude_runs = created.iter().filter(|(_, a)| a == "claude").count();
    assert_eq!(claude_runs, 1, "claude was tried again: {created:?}");
    let s = status_json(&w.sb, &w.p.repo);
    assert!(
        s["tasks"]
            .as_array()
            .expect("tasks")
            .iter()
            .all(|t| t["status"] == "done"),
        "{s}"
    );
}
