//! What lands is exactly what was gated (ARCHITECTURE.md, invariants 3 and
//! 7): gates judge every commit an attempt made, re-gating never rewrites
//! history's verdict, landed commits read like a careful person's, and a
//! retry carries the previous attempt.

use crate::common;

use std::path::Path;

use common::{Sandbox, events, project, status_json, stderr, stdout};

/// Every object reachable from the refs of `repo` except the local attempt
/// branches (`refs/heads/orch/*`), as raw bytes, joined.
fn reachable_bytes(sb: &Sandbox, repo: &Path, except_attempts: bool) -> Vec<u8> {
    let mut args = vec!["rev-list", "--objects", "--no-object-names"];
    if except_attempts {
        args.push("--exclude=refs/heads/orch/*");
    }
    args.push("--all");
    let listed = sb.git(repo, &args);
    let mut all = Vec::new();
    for oid in listed.lines() {
        let out = sb.git_output(repo, &["cat-file", "-p", oid]);
        all.extend_from_slice(&out.stdout);
    }
    all
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// Drops everything only reflogs keep, then prunes.
fn gc_now(sb: &Sandbox, repo: &Path) {
    sb.git(repo, &["reflog", "expire", "--expire=now", "--all"]);
    sb.git(repo, &["gc", "-q", "--prune=now"]);
}

fn verdict<'a>(evs: &'a [serde_json::Value], gate: &str) -> &'a serde_json::Value {
    evs.iter()
        .find(|e| e["type"] == "gate_verdict" && e["verdict"]["gate"] == gate)
        .map(|e| &e["verdict"])
        .unwrap_or_else(|| panic!("no {gate} verdict"))
}

#[test]
fn a_secret_committed_and_removed_later_fails_and_reaches_no_shared_ref() {
    let mut sb = Sandbox::new();
    let p = project(
        &mut sb,
        &[("a", &[], "test -f src/a/done")],
        Some("[orch]\n\tretries = 0\n"),
    );
    p.script(
        "a",
        "secret src/a/key.txt\ncommit add a key\ndelete src/a/key.txt\nwrite src/a/done yes\ncommit take it out\n",
    );
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let evs = events(&sb, &p.repo);
    let v = verdict(&evs, "secrets");
    assert_eq!(v["status"], "fail", "{v}");
    assert!(
        v["summary"]
            .as_str()
            .expect("summary")
            .contains("removed later"),
        "{v}"
    );
    assert!(evs.iter().all(|e| e["type"] != "landed"));
    // The key as the agent wrote it, found on its own branch.
    let branch_log = sb.git(&p.repo, &["log", "-p", "--all"]);
    let key = regex::Regex::new("AKIA[A-Z0-9]{16}")
        .expect("regex")
        .find(&branch_log)
        .expect("the key is on the attempt branch")
        .as_str()
        .to_owned();
    // Shared through a remote, then everything unreachable pruned.
    let remote = sb.bare("remote.git");
    sb.git(
        &p.repo,
        &["remote", "add", "origin", &remote.to_string_lossy()],
    );
    sb.orch_ok(&p.repo, &["init", "--remote", "origin"]);
    sb.orch_ok(&p.repo, &["sync"]);
    gc_now(&sb, &p.repo);
    assert!(
        contains(&reachable_bytes(&sb, &p.repo, false), &key),
        "the local attempt branch keeps the attempt as it was"
    );
    for r in sb
        .git(&p.repo, &["for-each-ref", "--format=%(refname)"])
        .lines()
    {
        if r.starts_with("refs/heads/orch/") {
            continue;
        }
        let listed = sb.git(&p.repo, &["rev-list", "--objects", "--no-object-names", r]);
        for oid in listed.lines() {
            let out = sb.git_output(&p.repo, &["cat-file", "-p", oid]);
            assert!(
                !contains(&out.stdout, &key),
                "the key is reachable from {r} (object {oid})"
            );
        }
    }
    gc_now(&sb, &remote);
    assert!(
        !contains(&reachable_bytes(&sb, &remote, false), &key),
        "the key reached the remote"
    );
}

#[test]
fn a_file_outside_the_owned_globs_touched_and_reverted_fails_the_scope_gate() {
    let mut sb = Sandbox::new();
    let p = project(
        &mut sb,
        &[("a", &[], "test -f src/a/done")],
        Some("[orch]\n\tretries = 0\n"),
    );
    // README.md holds "hello\n"; the agent changes it and puts it back,
    // going around the attempt's pre-commit hook, which would refuse it.
    p.script(
        "a",
        "write README.md changed\nrun git add -A\nrun git commit --no-verify -q -m touch\nwrite README.md hello\nwrite src/a/done yes\ncommit put it back\n",
    );
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let evs = events(&sb, &p.repo);
    let v = verdict(&evs, "scope");
    assert_eq!(v["status"], "fail", "{v}");
    let summary = v["summary"].as_str().expect("summary");
    assert!(summary.contains("README.md (in commit"), "{summary}");
    assert!(summary.contains("reverted later"), "{summary}");
    assert!(evs.iter().all(|e| e["type"] != "landed"));
}

#[test]
fn re_gating_a_dependent_attempt_after_landing_changes_no_verdict_of_history() {
    let mut sb = Sandbox::new();
    let p = project(
        &mut sb,
        &[
            ("a", &[], "test -f src/a/done"),
            ("b", &["a"], "test -f src/b/done"),
        ],
        None,
    );
    p.script("a", "write src/a/done yes\n");
    p.script("b", "write src/b/done yes\n");
    sb.orch_ok(&p.repo, &["run", "proj", "--agent", "fake"]);
    let before = status_json(&sb, &p.repo);
    let verify = |sb: &Sandbox| {
        let out = sb.orch(&p.repo, &["verify", "main~2..main", "--json"]);
        assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
        for l in stdout(&out).lines() {
            let v: serde_json::Value = serde_json::from_str(l).expect("json");
            assert_eq!(v["ok"], true, "{v}");
        }
    };
    verify(&sb);
    let verdicts_before = events(&sb, &p.repo)
        .iter()
        .filter(|e| e["type"] == "gate_verdict")
        .count();
    // b started after a landed: its base is not the run's base.
    let out = sb.orch(&p.repo, &["gate", "b/1", "--json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    for l in stdout(&out).lines() {
        let v: serde_json::Value = serde_json::from_str(l).expect("verdict");
        assert_ne!(v["status"], "fail", "re-gating found a false failure: {v}");
    }
    let evs = events(&sb, &p.repo);
    assert!(
        evs.iter().filter(|e| e["type"] == "gate_verdict").count() > verdicts_before,
        "the re-gate's verdicts are recorded"
    );
    verify(&sb);
    let after = status_json(&sb, &p.repo);
    assert_eq!(before["tasks"], after["tasks"]);
}

#[test]
fn landed_commits_read_like_a_careful_persons_and_none_is_empty() {
    let mut sb = Sandbox::new();
    let p = project(
        &mut sb,
        &[
            ("a", &[], "test -f src/a/done"),
            ("b", &[], "test -f src/b/done"),
        ],
        None,
    );
    // One agent leaves its work uncommitted; the other commits it in two
    // commits of its own.
    p.script("a", "write src/a/done yes\n");
    p.script(
        "b",
        "write src/b/done half\ncommit b: first half\nwrite src/b/done yes\ncommit b: second half\n",
    );
    let before = sb.git(&p.repo, &["rev-parse", "main"]);
    sb.orch_ok(&p.repo, &["run", "proj", "--agent", "fake"]);
    let landed: Vec<String> = sb
        .git(
            &p.repo,
            &["rev-list", "--reverse", &format!("{before}..main")],
        )
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(landed.len(), 2, "one commit per subtask: {landed:?}");
    for (c, task) in landed.iter().zip(["a", "b"]) {
        let text = sb.git(
            &p.repo,
            &["log", "-1", "--format=%s%n%an <%ae>%n%cn <%ce>%n%b", c],
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], format!("Task {task}"), "{text}");
        assert_eq!(lines[1], "Test Author <author@example.com>", "{text}");
        assert_eq!(lines[2], "Test Author <author@example.com>", "{text}");
        assert!(
            text.contains(&format!("{task} done")),
            "deliverable: {text}"
        );
        assert!(text.contains("Orch-Plan: proj revision 1"), "{text}");
        assert!(text.contains("Orch-Plan-Hash: blake3:"), "{text}");
        assert!(text.contains(&format!("Orch-Task: {task}")), "{text}");
        assert!(text.contains("Orch-Attempt: 1"), "{text}");
        assert!(text.contains("Orch-Approved-By: "), "{text}");
        assert!(text.contains("Co-authored-by: fake"), "{text}");
        assert!(!text.contains("orch: result of"), "{text}");
        // Never an empty commit.
        let changed = sb.git_output(&p.repo, &["diff-tree", "--quiet", &format!("{c}^"), c]);
        assert_eq!(changed.status.code(), Some(1), "{c} changes nothing");
    }
}

#[test]
fn the_agents_subject_is_used_when_configured_and_it_made_one_commit() {
    let mut sb = Sandbox::new();
    let p = project(
        &mut sb,
        &[("a", &[], "test -f src/a/done")],
        Some("[land]\n\tagentSubject = true\n\tbody = Deliverable: {deliverable}\n"),
    );
    p.script(
        "a",
        "write src/a/done yes\ncommit \"a: write the done file\"\n",
    );
    sb.orch_ok(&p.repo, &["run", "proj", "--agent", "fake"]);
    let text = sb.git(&p.repo, &["log", "-1", "--format=%s%n%b", "main"]);
    assert!(text.starts_with("a: write the done file\n"), "{text}");
    assert!(text.contains("Deliverable: a done"), "{text}");
}

#[test]
fn a_retry_after_a_test_failure_continues_the_previous_result_and_sees_its_diff() {
    let mut sb = Sandbox::new();
    // The test prints colour, as test runners do on a terminal.
    let p = project(
        &mut sb,
        &[(
            "a",
            &[],
            "printf '\\033[31mFAILED\\033[0m: src/a/fixed missing\\n'; test -f src/a/fixed",
        )],
        None,
    );
    p.script("a.1", "write src/a/work first attempt work\n");
    // The retry finds the first attempt's file in its worktree and the
    // first attempt's diff in its prompt.
    p.script(
        "a.2",
        "run test -f src/a/work\nrequire-retry-mention \"first attempt work\"\nwrite src/a/fixed yes\n",
    );
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let evs = events(&sb, &p.repo);
    let second = evs
        .iter()
        .find(|e| e["type"] == "attempt_created" && e["attempt"] == 2)
        .expect("a retry");
    let first_result = evs
        .iter()
        .find(|e| e["type"] == "attempt_result" && e["attempt"] == 1)
        .expect("first result");
    assert_eq!(second["start"], first_result["commit"], "{second}");
    // Both files landed, in one commit.
    assert_eq!(
        sb.git(&p.repo, &["show", "main:src/a/work"]),
        "first attempt work"
    );
    // No terminal escape anywhere the failure was stored or shown.
    let run = status_json(&sb, &p.repo)["run"]
        .as_str()
        .expect("run")
        .to_owned();
    let prompts = p.repo.join(".git/orch/prompts").join(&run);
    for f in ["a-2.md", "a-2.retry.json"] {
        let text = std::fs::read_to_string(prompts.join(f)).expect("stored context");
        assert!(!text.contains('\u{1b}'), "{f}: {text:?}");
        assert!(text.contains("FAILED: src/a/fixed missing"), "{f}: {text}");
    }
    let log = sb.orch_ok(&p.repo, &["log", "--json"]);
    assert!(!log.contains("\\u001b"), "an escape reached the log");
    let notes = sb.git(&p.repo, &["log", "--notes=orch", "--all", "--format=%N"]);
    assert!(!notes.contains('\u{1b}'), "{notes:?}");
}

#[test]
fn a_retry_after_a_scope_failure_starts_clean_from_the_base() {
    let mut sb = Sandbox::new();
    let p = project(&mut sb, &[("a", &[], "test -f src/a/done")], None);
    p.script("a.1", "write README.md not mine\nwrite src/a/done yes\n");
    // The retry must not find the first attempt's out-of-scope edit.
    p.script(
        "a.2",
        "run grep -qx hello README.md\nwrite src/a/done yes\n",
    );
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let evs = events(&sb, &p.repo);
    let second = evs
        .iter()
        .find(|e| e["type"] == "attempt_created" && e["attempt"] == 2)
        .expect("a retry");
    assert!(second.get("start").is_none(), "{second}");
}
