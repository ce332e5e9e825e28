//! Exit codes come from the type of the error, and each is what the
//! reference (`docs/cli.md`, "Exit codes") promises, driven through the real
//! binary. The codes a run ends with after working (64 budget, 65 circuit
//! breaker, 130 interrupted) are proven where those situations are built:
//! `tests/it/runs.rs` (`the_budget_stops_dispatch_with_exit_64`,
//! `the_circuit_breaker_stops_with_exit_65`, the SIGINT test) and
//! `tests/it/plan_new.rs`.

use crate::common;

use common::{Sandbox, project, stderr};

/// The stderr of a failure: an `error:` headline, then `caused by:`, then
/// `hint:` lines, in that order.
fn sections(err: &str) -> Vec<&str> {
    err.lines()
        .filter_map(|l| {
            ["error:", "caused by:", "hint:"]
                .into_iter()
                .find(|p| l.starts_with(p))
        })
        .collect()
}

#[test]
fn exit_0_success() {
    let mut sb = Sandbox::new();
    let p = project(&mut sb, &[("a", &[], "true")], None);
    let out = sb.orch(&p.repo, &["plan", "show", "proj"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
}

#[test]
fn exit_1_an_error_with_its_hint_after_it() {
    let mut sb = Sandbox::new();
    let p = project(&mut sb, &[("a", &[], "true")], None);
    // A target branch that does not exist: a typed error with a hint.
    let out = sb.orch(
        &p.repo,
        &["run", "proj", "--agent", "fake", "--target", "nowhere"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("error: the target branch nowhere does not exist"),
        "{err}"
    );
    assert!(
        err.contains("hint: create it, or pass --target <branch>"),
        "{err}"
    );
    assert_eq!(sections(&err), ["error:", "hint:"], "{err}");
    // Nothing was written: no run started.
    let log = sb.orch_ok(&p.repo, &["log", "--json"]);
    assert!(!log.contains("run_started"), "{log}");
}

#[test]
fn exit_1_a_cause_is_shown_under_its_error() {
    let mut sb = Sandbox::new();
    let p = project(&mut sb, &[("a", &[], "true")], None);
    // A project setting that cannot be used, at the base commit.
    std::fs::create_dir_all(p.repo.join(".orch")).expect("mkdir");
    std::fs::write(p.repo.join(".orch/config"), "[orch]\n\tcap = many\n").expect("config");
    sb.git(&p.repo, &["add", ".orch/config"]);
    sb.git(
        &p.repo,
        &[
            "-c",
            "user.name=T",
            "-c",
            "user.email=t@example.com",
            "commit",
            "-qm",
            "bad cap",
        ],
    );
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("cap"), "{err}");
    assert!(err.contains("hint: fix .orch/config"), "{err}");
}

#[test]
fn exit_2_usage_errors() {
    let mut sb = Sandbox::new();
    let p = project(&mut sb, &[("a", &[], "true")], None);
    // clap's own: an unknown flag.
    let out = sb.orch(&p.repo, &["run", "proj", "--no-such-flag"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    // The domain's: a task the plan does not have, with a suggestion first.
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake", "--redo", "b"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("error: plan proj has no task b"), "{err}");
    assert!(
        err.contains("hint: `git orch plan show proj` lists its tasks"),
        "{err}"
    );
    // A --base that names no commit.
    let out = sb.orch(
        &p.repo,
        &["run", "proj", "--agent", "fake", "--base", "no-such-rev"],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("hint: give a branch, tag or commit id"),
        "{err}"
    );
}

#[test]
fn exit_3_blocked_by_an_approval_that_no_longer_binds() {
    let mut sb = Sandbox::new();
    let p = project(&mut sb, &[("a", &[], "true")], None);
    // A new revision voids the approval of the old one.
    let plan = serde_json::json!({"version": 1, "id": "proj", "instruction": "Do other work",
        "subtasks": [{"id": "a", "title": "Task a", "owned_globs": ["src/a/**"],
        "deliverable": "a done", "verification": "true", "depends_on": []}]});
    let file = sb.path().join("plan2.json");
    std::fs::write(&file, plan.to_string()).expect("plan");
    sb.orch_ok(&p.repo, &["plan", "add", &file.to_string_lossy()]);
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("refusing to run"), "{err}");
}

#[test]
fn the_reference_lists_every_exit_code_the_binary_uses() {
    use git_orch::cli::exit;
    let reference =
        std::fs::read_to_string(common::repo_root().join("docs/cli.md")).expect("docs/cli.md");
    let section = reference
        .split("## Exit codes")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("an Exit codes section");
    for code in [
        exit::OK,
        exit::ERROR,
        exit::USAGE,
        exit::BLOCKED,
        exit::BUDGET,
        exit::BREAKER,
        exit::INTERRUPTED,
    ] {
        assert!(
            section.contains(&format!("- `{code}`:")),
            "exit code {code} is not in the reference"
        );
    }
}
