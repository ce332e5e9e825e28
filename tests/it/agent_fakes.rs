//! The agent adapters against the fake CLIs in `fixtures/agents/`.
//!
//! The fakes refuse any flag the real CLI does not have, so an adapter that
//! drifts from the documented command line fails here; and what the fakes
//! print (the real CLIs' output shapes) must parse into the usage and the
//! availability the pipeline relies on.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use git_orch::agent::{
    AgentKind, AgentSpec, Availability, Invocation, PromptInput, classify_exit, invocation,
    parse_usage,
};

fn agents_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/agents")
}

/// A temp git repository standing in for an attempt's worktree.
fn worktree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let ok = Command::new("git")
        .args(["init", "-q"])
        .current_dir(dir.path())
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .status()
        .expect("git init")
        .success();
    assert!(ok, "git init failed");
    dir
}

/// Runs `inv` in `dir` as the runner will: a clean environment with the
/// fakes first on PATH, stdin from the invocation or /dev/null.
fn run(inv: &Invocation, dir: &Path, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(&inv.program);
    cmd.args(&inv.args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", format!("{}:/usr/bin:/bin", agents_dir().display()))
        .env("HOME", dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "test")
        .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
        .env("GIT_COMMITTER_NAME", "test")
        .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
        .env("ORCH_TASK", "api")
        .env("ORCH_ATTEMPT", "1")
        .envs(inv.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(if inv.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
    let mut child = cmd.spawn().expect("spawn fake agent");
    if let Some(bytes) = &inv.stdin {
        let mut stdin = child.stdin.take().expect("piped stdin");
        stdin.write_all(bytes).expect("write prompt");
    }
    child.wait_with_output().expect("wait")
}

fn tail(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn input<'a>(prompt: &'a str, prompt_file: &'a Path, workdir: &'a Path) -> PromptInput<'a> {
    PromptInput {
        prompt,
        prompt_file,
        workdir,
        task: "api",
        attempt: 1,
    }
}

#[test]
fn claude_adapter_runs_the_fake_and_reads_its_cost() {
    let wt = worktree();
    let mut spec = AgentSpec::builtin("claude").expect("built-in");
    spec.model = Some("opus".into());
    spec.args = vec!["--allowedTools".into(), "Read".into(), "Edit".into()];
    let prompt_file = wt.path().join("../prompt.md");
    let inv = invocation(
        &spec,
        &input("-x: implement the API", &prompt_file, wt.path()),
    );
    let out = run(
        &inv,
        wt.path(),
        &[("FAKE_AGENT_SCRIPT", "write api.txt done")],
    );
    assert!(out.status.success(), "{}", tail(&out));
    assert!(wt.path().join("api.txt").exists(), "the fake agent acted");

    let usage = parse_usage(AgentKind::Claude, &out.stdout);
    assert_eq!(usage.input_tokens, 12 + 1520 + 9800);
    assert_eq!(usage.output_tokens, 345);
    assert_eq!(usage.cost_usd, Some(0.0123));
    assert_eq!(usage.turns, Some(3));
    assert_eq!(usage.is_error, Some(false));
    assert_eq!(
        classify_exit(AgentKind::Claude, out.status.code(), &tail(&out)),
        Availability::Available
    );
}

#[test]
fn claude_long_prompt_goes_through_stdin() {
    let wt = worktree();
    let spec = AgentSpec::builtin("claude").expect("built-in");
    let prompt = "p".repeat(git_orch::agent::MAX_PROMPT_ARG_BYTES + 10);
    let prompt_file = wt.path().join("../prompt.md");
    let inv = invocation(&spec, &input(&prompt, &prompt_file, wt.path()));
    assert!(inv.stdin.is_some());
    let out = run(&inv, wt.path(), &[]);
    assert!(out.status.success(), "{}", tail(&out));
}

#[test]
fn claude_usage_limit_is_rate_limited() {
    let wt = worktree();
    let spec = AgentSpec::builtin("claude").expect("built-in");
    let prompt_file = wt.path().join("../prompt.md");
    let inv = invocation(&spec, &input("implement", &prompt_file, wt.path()));
    let out = run(&inv, wt.path(), &[("FAKE_CLAUDE_RATE_LIMIT", "1")]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        classify_exit(AgentKind::Claude, out.status.code(), &tail(&out)),
        Availability::RateLimited
    );
    assert_eq!(
        parse_usage(AgentKind::Claude, &out.stdout).is_error,
        Some(true)
    );
}

#[test]
fn claude_fake_refuses_flags_the_cli_lacks() {
    let wt = worktree();
    let mut spec = AgentSpec::builtin("claude").expect("built-in");
    spec.args = vec!["--yolo".into()];
    let prompt_file = wt.path().join("../prompt.md");
    let inv = invocation(&spec, &input("implement", &prompt_file, wt.path()));
    let out = run(&inv, wt.path(), &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        tail(&out).contains("unknown option '--yolo'"),
        "{}",
        tail(&out)
    );
}

#[test]
fn codex_adapter_runs_the_fake_and_reads_its_tokens() {
    let wt = worktree();
    let mut spec = AgentSpec::builtin("codex").expect("built-in");
    spec.model = Some("gpt-5-codex".into());
    spec.args = vec!["-c".into(), "model_reasoning_effort=high".into()];
    let prompt_file = wt.path().join("../prompt.md");
    let inv = invocation(
        &spec,
        &input("--implement the API", &prompt_file, wt.path()),
    );
    let out = run(
        &inv,
        wt.path(),
        &[("FAKE_AGENT_SCRIPT", "commit nothing yet")],
    );
    assert!(out.status.success(), "{}", tail(&out));

    let usage = parse_usage(AgentKind::Codex, &out.stdout);
    assert_eq!((usage.input_tokens, usage.output_tokens), (2400, 320));
    assert_eq!(usage.cost_usd, None);
    assert_eq!(usage.turns, Some(1));
    assert_eq!(usage.is_error, Some(false));
}

#[test]
fn codex_long_prompt_goes_through_stdin() {
    let wt = worktree();
    let spec = AgentSpec::builtin("codex").expect("built-in");
    let prompt = "c".repeat(git_orch::agent::MAX_PROMPT_ARG_BYTES + 10);
    let prompt_file = wt.path().join("../prompt.md");
    let inv = invocation(&spec, &input(&prompt, &prompt_file, wt.path()));
    let out = run(&inv, wt.path(), &[]);
    assert!(out.status.success(), "{}", tail(&out));
}

#[test]
fn codex_usage_limit_and_agent_failure() {
    let wt = worktree();
    let spec = AgentSpec::builtin("codex").expect("built-in");
    let prompt_file = wt.path().join("../prompt.md");
    let inv = invocation(&spec, &input("implement", &prompt_file, wt.path()));

    let out = run(&inv, wt.path(), &[("FAKE_CODEX_RATE_LIMIT", "1")]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        classify_exit(AgentKind::Codex, out.status.code(), &tail(&out)),
        Availability::RateLimited
    );

    // A failing agent is available: its failure is for the gates.
    let out = run(&inv, wt.path(), &[("FAKE_AGENT_SCRIPT", "exit 5")]);
    assert_eq!(out.status.code(), Some(5));
    assert_eq!(
        parse_usage(AgentKind::Codex, &out.stdout).is_error,
        Some(true)
    );
    assert_eq!(
        classify_exit(AgentKind::Codex, out.status.code(), &tail(&out)),
        Availability::Available
    );
}

#[test]
fn fake_kind_reports_the_scripted_cost() {
    let wt = worktree();
    let spec = AgentSpec::builtin("fake").expect("built-in");
    let prompt_file = wt.path().join("../prompt.md");
    let inv = invocation(&spec, &input("implement", &prompt_file, wt.path()));
    let out = run(
        &inv,
        wt.path(),
        &[("FAKE_AGENT_SCRIPT", "print working\ncost 0.5")],
    );
    assert!(out.status.success(), "{}", tail(&out));
    let usage = parse_usage(AgentKind::Fake, &out.stdout);
    assert_eq!(usage.cost_usd, Some(0.5));
    assert_eq!((usage.input_tokens, usage.output_tokens), (10, 5));
}

#[test]
fn a_command_template_whose_program_is_missing_is_missing() {
    let wt = worktree();
    let values = std::collections::BTreeMap::from([
        ("kind".to_owned(), vec!["command".to_owned()]),
        (
            "command".to_owned(),
            vec!["no-such-agent-on-path {task}".to_owned()],
        ),
    ]);
    let spec = AgentSpec::from_config("mine", &values).expect("valid");
    let prompt_file = wt.path().join("../prompt.md");
    let inv = invocation(&spec, &input("implement", &prompt_file, wt.path()));
    let out = run(&inv, wt.path(), &[]);
    assert_eq!(out.status.code(), Some(127));
    assert_eq!(
        classify_exit(AgentKind::Command, out.status.code(), &tail(&out)),
        Availability::Missing
    );
}
