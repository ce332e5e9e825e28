//! Usage everywhere (issue 16): tokens per attempt, task and run in
//! `status` and `status --json`; a cost that is `unknown` (not $0.00) when
//! an agent reports none and its model has no price; an estimate from the
//! price table otherwise, so `--budget` stops agents that report no cost.

use crate::common;

use common::{Sandbox, events, project, status_json, stderr, stdout};

/// The fake Codex reports 2400 input tokens (1800 cached) and 320 output
/// tokens per attempt, and no cost.
fn codex_project(sb: &mut Sandbox, config: &str) -> common::Project {
    sb.set_env("OPENAI_API_KEY", "sk-test");
    let p = project(sb, &[("a", &[], "test -f src/a/done")], Some(config));
    p.script("a", "write src/a/done yes\n");
    p
}

#[test]
fn tokens_are_shown_and_an_unpriced_cost_is_unknown_not_zero() {
    let mut sb = Sandbox::new();
    // A model no price table knows.
    let p = codex_project(&mut sb, "[agent \"codex\"]\n    model = house-model-7\n");
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "codex"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("finished: 1 of 1 tasks done, 1 attempts"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("unknown, 2.4k in, 320 out"),
        "{}",
        stderr(&out)
    );
    let s = status_json(&sb, &p.repo);
    let u = &s["usage"];
    assert_eq!(u["input_tokens"], 2400);
    assert_eq!(u["output_tokens"], 320);
    assert_eq!(u["cache_read_tokens"], 1800);
    assert_eq!(u["cost"], "unknown");
    assert!(u["cost_usd"].is_null(), "{u}");
    // The run's summary says the same, not 0.0.
    assert!(s["summary"]["cost_usd"].is_null(), "{s}");
    assert!(s["cost_usd"].is_null(), "{s}");
    let task = &s["tasks"][0];
    assert_eq!(task["usage"]["input_tokens"], 2400);
    assert_eq!(task["attempt_usage"][0]["usage"]["model"], "house-model-7");
    assert!(task["attempt_usage"][0]["usage"].get("cost_usd").is_none());
    let text = stdout(&sb.orch(&p.repo, &["status"]));
    assert!(text.contains("cost unknown, 2.4k in, 320 out"), "{text}");
    assert!(text.contains("unknown"), "{text}");
    assert!(text.contains("2.4k/320"), "{text}");
}

#[test]
fn a_priced_model_gets_an_estimate_that_the_budget_stops() {
    let mut sb = Sandbox::new();
    // gpt-5 is in the built-in table: 600 plain input tokens at $1.25/M,
    // 1800 cached at $0.125/M, 320 output at $10/M.
    let p = codex_project(&mut sb, "[agent \"codex\"]\n    model = gpt-5\n");
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "codex"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let s = status_json(&sb, &p.repo);
    let expected = (600.0 * 1.25 + 1800.0 * 0.125 + 320.0 * 10.0) / 1e6;
    let cost = s["usage"]["cost_usd"].as_f64().expect("estimated");
    assert!((cost - expected).abs() < 1e-9, "{cost} vs {expected}");
    assert_eq!(s["usage"]["cost"], "estimated");
    let finished = events(&sb, &p.repo)
        .into_iter()
        .find(|e| e["type"] == "agent_finished")
        .expect("agent event");
    assert_eq!(finished["usage"]["cost_source"], "estimated");
    assert_eq!(finished["usage"]["model"], "gpt-5");

    // A config price overrides the table, and the budget sees it.
    let mut sb = Sandbox::new();
    let p = codex_project(
        &mut sb,
        "[orch]\n    retries = 3\n[agent \"codex\"]\n    model = gpt-5\n[price \"gpt-5\"]\n    input = 1000\n    output = 1000\n",
    );
    // The first attempt fails its verification, costs about $2.7 and
    // spends a $1 budget: no second attempt starts.
    p.script("a", "write src/a/other x\n");
    let out = sb.orch(
        &p.repo,
        &["run", "proj", "--agent", "codex", "--budget", "1"],
    );
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    let attempts = events(&sb, &p.repo)
        .iter()
        .filter(|e| e["type"] == "attempt_created")
        .count();
    assert_eq!(attempts, 1);
}

#[test]
fn reported_costs_stay_reported() {
    let mut sb = Sandbox::new();
    let p = project(&mut sb, &[("a", &[], "true")], None);
    p.script("a", "write src/a/done yes\ncost 0.5\n");
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let s = status_json(&sb, &p.repo);
    assert_eq!(s["usage"]["cost"], "reported");
    assert_eq!(s["usage"]["cost_usd"], 0.5);
    assert_eq!(s["usage"]["input_tokens"], 10);
    let text = stdout(&sb.orch(&p.repo, &["status"]));
    assert!(text.contains("cost $0.50, 10 in, 5 out"), "{text}");
}
