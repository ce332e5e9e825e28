//! Owned globs with `!` exclusions, end to end: the pre-commit hook of the
//! real binary against the same table of cases the analysis, the scope
//! gate and the server hook are unit-tested with
//! (fixtures/data/ownership-cases.json), and a run whose subtask excludes
//! part of its folder: the scope gate refuses the excluded part, the work
//! inside lands, and the server's hook accepts the landing.

use crate::common;

use std::path::Path;

use common::{Sandbox, json_lines, repo_root, stderr};

/// (globs, path, owned, why) from the shared table.
fn cases() -> Vec<(Vec<String>, String, bool, String)> {
    let text = std::fs::read_to_string(repo_root().join("fixtures/data/ownership-cases.json"))
        .expect("the table");
    let cases: Vec<serde_json::Value> = serde_json::from_str(&text).expect("JSON");
    cases
        .iter()
        .map(|c| {
            (
                c["globs"]
                    .as_array()
                    .expect("globs")
                    .iter()
                    .map(|g| g.as_str().expect("glob").to_owned())
                    .collect(),
                c["path"].as_str().expect("path").to_owned(),
                c["owned"].as_bool().expect("owned"),
                c["why"].as_str().expect("why").to_owned(),
            )
        })
        .collect()
}

#[test]
fn the_pre_commit_hook_follows_the_ownership_table() {
    let sb = Sandbox::new();
    let repo = sb.repo("r");
    let globs_file = sb.path().join("owned-globs");
    for (globs, path, owned, why) in cases() {
        std::fs::write(&globs_file, globs.join("\n")).expect("globs file");
        let file = repo.join(&path);
        std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
        std::fs::write(&file, "x\n").expect("write");
        sb.git(&repo, &["add", "--", &path]);
        let out = sb.orch(
            &repo,
            &[
                "hook",
                "pre-commit",
                "--owned-globs",
                &globs_file.to_string_lossy(),
            ],
        );
        assert_eq!(
            out.status.success(),
            owned,
            "{globs:?} {path} ({why}): {}",
            stderr(&out)
        );
        if !owned {
            assert!(stderr(&out).contains(&path), "{}", stderr(&out));
        }
        sb.git(&repo, &["reset", "-q"]);
        std::fs::remove_file(&file).expect("remove");
    }
}

#[test]
fn a_hook_given_unusable_globs_refuses_the_commit() {
    let sb = Sandbox::new();
    let repo = sb.repo("r");
    let globs_file = sb.path().join("owned-globs");
    std::fs::write(&globs_file, "!src/**\n").expect("globs file");
    std::fs::write(repo.join("a.txt"), "x").expect("write");
    sb.git(&repo, &["add", "a.txt"]);
    let out = sb.orch(
        &repo,
        &[
            "hook",
            "pre-commit",
            "--owned-globs",
            &globs_file.to_string_lossy(),
        ],
    );
    assert!(!out.status.success());
    assert!(stderr(&out).contains("only exclusions"), "{}", stderr(&out));
}

fn commit_all(sb: &Sandbox, repo: &Path, message: &str) {
    sb.git(repo, &["add", "."]);
    sb.git(repo, &["commit", "-q", "-m", message]);
}

#[test]
fn a_run_honours_exclusions_from_scope_gate_to_server_hook() {
    let mut sb = Sandbox::new();
    let repo = sb.repo("proj");
    for f in [
        "src/t0/README",
        "src/t0/keep/README",
        "src/t1/README",
        "src/t2/README",
    ] {
        let p = repo.join(f);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, "x\n").expect("write");
    }
    commit_all(&sb, &repo, "project");
    let srv = sb.bare("srv.git");
    sb.git(&repo, &["remote", "add", "origin", &srv.to_string_lossy()]);
    sb.git(&repo, &["push", "-q", "origin", "main"]);
    sb.orch_ok(&repo, &["init", "--remote", "origin"]);
    sb.orch_ok(&repo, &["-C", "../srv.git", "hooks", "install", "--server"]);
    let plan = serde_json::json!({
        "version": 1, "id": "proj", "instruction": "Do the work",
        "subtasks": [
            {"id": "t0", "title": "t0 but not keep", "owned_globs": ["!src/t0/keep/**", "src/t0/**"],
             "deliverable": "t0", "verification": "test -f src/t0/done"},
            {"id": "t1", "title": "t1", "owned_globs": ["src/t1/**"], "deliverable": "t1",
             "verification": "test -f src/t1/done"},
            {"id": "t2", "title": "t2", "owned_globs": ["src/t2/**"], "deliverable": "t2",
             "verification": "test -f src/t2/done"},
        ]
    });
    let plan_file = sb.path().join("plan.json");
    std::fs::write(&plan_file, plan.to_string()).expect("plan");
    let check = sb.orch_ok(
        &repo,
        &["plan", "check", &plan_file.to_string_lossy(), "--json"],
    );
    let v: serde_json::Value = serde_json::from_str(check.trim()).expect("json");
    assert_eq!(v["blocking"], 0, "{v}");
    sb.orch_ok(&repo, &["plan", "add", &plan_file.to_string_lossy()]);
    sb.orch_ok(&repo, &["approve", "proj"]);
    let scripts = sb.path().join("scripts");
    std::fs::create_dir_all(&scripts).expect("scripts");
    sb.set_env("FAKE_AGENT_DIR", &scripts.to_string_lossy());
    for (name, text) in [
        // Attempt 1 writes into the excluded folder as well.
        (
            "t0.1",
            "write src/t0/done yes\nwrite src/t0/keep/x no\ncommit t0 first\n",
        ),
        ("t0.2", "write src/t0/done yes\ncommit t0 second\n"),
        ("t1", "write src/t1/done yes\ncommit t1\n"),
        ("t2", "write src/t2/done yes\ncommit t2\n"),
    ] {
        std::fs::write(scripts.join(format!("{name}.script")), text).expect("script");
    }
    sb.orch_ok(&repo, &["run", "proj", "--agent", "fake"]);
    let events = json_lines(&sb.orch_ok(&repo, &["log", "--json"]));
    let scope: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| {
            e["type"] == "gate_verdict" && e["task"] == "t0" && e["verdict"]["gate"] == "scope"
        })
        .collect();
    assert_eq!(scope.len(), 2, "{scope:?}");
    assert_eq!(scope[0]["attempt"], 1);
    assert_eq!(scope[0]["verdict"]["status"], "fail");
    assert_eq!(
        scope[0]["verdict"]["details"]["out_of_scope"],
        serde_json::json!(["src/t0/keep/x"])
    );
    assert_eq!(scope[1]["verdict"]["status"], "pass");
    assert!(repo.join("src/t0/done").exists());
    assert!(!repo.join("src/t0/keep/x").exists());
    // The server re-reads every landing with the same matcher and accepts.
    let out = sb.git_output(
        &repo,
        &[
            "push",
            "--atomic",
            "origin",
            "refs/orch/*:refs/orch/*",
            "main",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        sb.git(&srv, &["rev-parse", "main"]),
        sb.git(&repo, &["rev-parse", "main"])
    );
}
