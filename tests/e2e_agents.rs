//! The real agent CLIs (Claude Code, Codex CLI, Gemini CLI, Aider) driven
//! through `git orch run` against the mock model servers of
//! `tests/mock_models`, with each CLI's `.orch/config` recipe taken
//! verbatim from its page in docs/agents/ (only the gateway address
//! `http://127.0.0.1:4000` is replaced by the mock's).
//!
//! The CLIs are found in `GIT_ORCH_E2E_BIN` (folders separated by `:`),
//! else in `~/.cache/git-orch-e2e/npm/bin` and
//! `~/.cache/git-orch-e2e/aider-venv/bin`, where `.ci/run` installs them.
//! A missing CLI skips its tests loudly; under `CI=true` it fails them.
//!
//! Runs use the default `sandbox = auto`, so where bubblewrap works (CI)
//! every CLI runs in the sandbox.

mod common;
mod mock_models;
mod tools;

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
        &format!("write {OWNED} from-the-fallback\n"),
    );
    let recipe = doc_block(cli.name, "recipe").replace(GATEWAY, &url);
    let config = format!("{recipe}{extra}");
    let p = project(
        &mut sb,
        &[("a", &[], &format!("test -f {OWNED}"))],
        Some(&config),
    );
    if cli.api == Api::Gemini {
        std::fs::write(
            p.repo.join(".orch/gemini-settings.json"),
            doc_block("gemini", "gemini-settings"),
        )
        .expect("settings");
        sb.git(&p.repo, &["add", "."]);
        sb.git(&p.repo, &["commit", "-q", "-m", "gemini settings"]);
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
    let Some(w) = world(
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
    let (code, err, took) = run(&w, &[]);
    assert_eq!(code, Some(0), "{}: {err}\n{}", cli.name, agent_log(&w));
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
    eprintln!("e2e {}: landed in {took:?}, {turns} turns", cli.name);
}

#[test]
fn claude_lands_and_its_usage_matches_the_mock() {
    lands(CLAUDE, "claude_lands_and_its_usage_matches_the_mock");
}

#[test]
fn codex_lands_and_its_usage_matches_the_mock() {
    lands(CODEX, "codex_lands_and_its_usage_matches_the_mock");
}

#[test]
fn gemini_lands_and_its_usage_matches_the_mock() {
    lands(GEMINI, "gemini_lands_and_its_usage_matches_the_mock");
}

#[test]
fn aider_lands_and_its_usage_matches_the_mock() {
    lands(AIDER, "aider_lands_and_its_usage_matches_the_mock");
}
