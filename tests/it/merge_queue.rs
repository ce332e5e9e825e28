//! The merge queue (ARCHITECTURE.md, invariants 2 and 3): the target only
//! ever moves to a tree that passed the integration gate on top of exactly
//! the old target, without touching a user's files.

use crate::common;

use std::path::Path;

use common::{
    Project, Sandbox, block_landings, events, project, status_json, stderr, stdout,
    unblock_landings,
};

fn tasks(n: usize) -> Vec<(String, String)> {
    (0..n)
        .map(|i| (format!("t{i}"), format!("test -f src/t{i}/done")))
        .collect()
}

fn make(sb: &mut Sandbox, n: usize, config: Option<&str>) -> Project {
    let t = tasks(n);
    let specs: Vec<(&str, &[&str], &str)> = t
        .iter()
        .map(|(id, v)| (id.as_str(), &[][..], v.as_str()))
        .collect();
    project(sb, &specs, config)
}

/// Every commit the target ever pointed to, from its reflog, oldest first.
fn target_history(sb: &Sandbox, repo: &Path) -> Vec<String> {
    let mut v: Vec<String> = sb
        .git(repo, &["reflog", "show", "--format=%H", "refs/heads/main"])
        .lines()
        .map(str::to_owned)
        .collect();
    v.reverse();
    v.dedup();
    v
}

fn landed_events(sb: &Sandbox, repo: &Path) -> Vec<serde_json::Value> {
    events(sb, repo)
        .into_iter()
        .filter(|e| e["type"] == "landed")
        .collect()
}

#[test]
fn five_independent_tasks_land_in_order_with_linear_history() {
    let mut sb = Sandbox::new();
    let p = make(&mut sb, 5, None);
    for i in 0..5 {
        p.script(
            &format!("t{i}"),
            &format!("write src/t{i}/done yes\ncommit t{i} work\n"),
        );
    }
    // All five pass before the queue may land (the checkout of main is
    // dirty meanwhile); then they land in the plan's order, whatever order
    // they passed in.
    block_landings(&p.repo);
    let out = sb.orch(
        &p.repo,
        &[
            "run", "proj", "--agent", "fake", "--cap", "5", "--base", "main",
        ],
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    unblock_landings(&p.repo);
    let out = sb.orch(&p.repo, &["merge"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let landed: Vec<String> = landed_events(&sb, &p.repo)
        .iter()
        .map(|e| e["task"].as_str().expect("task").to_owned())
        .collect();
    assert_eq!(landed, ["t0", "t1", "t2", "t3", "t4"], "plan order");
    // Linear, one commit per task (squash, the default), in plan order.
    assert_eq!(sb.git(&p.repo, &["rev-list", "--merges", "main"]), "");
    let subjects = sb.git(
        &p.repo,
        &["log", "--reverse", "--format=%s", "main~5..main"],
    );
    assert_eq!(
        subjects.lines().collect::<Vec<_>>(),
        ["Task t0", "Task t1", "Task t2", "Task t3", "Task t4"]
    );
    // The clean checkout of main was fast-forwarded.
    assert_eq!(sb.git(&p.repo, &["status", "--porcelain"]), "");
    for i in 0..5 {
        assert!(p.repo.join(format!("src/t{i}/done")).exists());
    }
    // Each landed commit verifies.
    let out = sb.orch(&p.repo, &["verify", "main~5..main"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(stdout(&out).lines().count(), 5);
}

#[test]
fn each_strategy_does_what_it_promises() {
    for strategy in ["squash", "merge", "rebase"] {
        let mut sb = Sandbox::new();
        let p = make(
            &mut sb,
            2,
            Some(&format!("[orch]\n\tmergeStrategy = {strategy}\n")),
        );
        for i in 0..2 {
            p.script(
                &format!("t{i}"),
                &format!("write src/t{i}/done yes\ncommit t{i} work\n"),
            );
        }
        // Commits written in another time zone, long ago, by someone else.
        sb.set_env("GIT_AUTHOR_NAME", "Zoe Agent");
        sb.set_env("GIT_AUTHOR_EMAIL", "zoe@example.com");
        sb.set_env("GIT_AUTHOR_DATE", "1399417800 +0200");
        let base = sb.git(&p.repo, &["rev-parse", "main"]);
        let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake", "--cap", "1"]);
        assert_eq!(out.status.code(), Some(0), "{strategy}: {}", stderr(&out));
        let first_parent = sb.git(
            &p.repo,
            &["rev-list", "--first-parent", &format!("{base}..main")],
        );
        assert_eq!(
            first_parent.lines().count(),
            2,
            "{strategy}: one commit per task"
        );
        let tip_msg = sb.git(&p.repo, &["log", "-1", "--format=%B", "main"]);
        let parents = sb.git(&p.repo, &["log", "-1", "--format=%P", "main"]);
        match strategy {
            "squash" | "merge" => {
                assert!(tip_msg.starts_with("Task t1"), "{strategy}: {tip_msg}");
                assert!(tip_msg.contains("Orch-Task: t1"), "{strategy}: {tip_msg}");
                assert!(tip_msg.contains("Orch-Plan-Hash: blake3:"), "{tip_msg}");
                let want = if strategy == "squash" { 1 } else { 2 };
                assert_eq!(parents.split_whitespace().count(), want, "{strategy}");
            }
            _ => {
                // The agent's own commit, as it wrote it; no empty commit
                // of git-orch's on top.
                assert_eq!(tip_msg.trim(), "t1 work", "{tip_msg}");
                assert_eq!(parents.split_whitespace().count(), 1);
            }
        }
        if strategy == "rebase" {
            // Each commit keeps its author, date and time zone.
            let author = sb.git(
                &p.repo,
                &["log", "-1", "--format=%an <%ae> %ad", "--date=raw", "main"],
            );
            assert_eq!(author, "Zoe Agent <zoe@example.com> 1399417800 +0200");
        }
        let out = sb.orch(&p.repo, &["verify", "main"]);
        assert_eq!(out.status.code(), Some(0), "{strategy}: {}", stdout(&out));
    }
}

#[test]
fn green_alone_red_together_never_reaches_the_target() {
    let mut sb = Sandbox::new();
    let gate = "! (test -f src/t0/done && test -f src/t1/clash)";
    let p = make(
        &mut sb,
        2,
        Some(&format!("[integration]\n\trun = \"{gate}\"\n")),
    );
    p.script("t0", "write src/t0/done yes\n");
    // t1 alone is fine, together with t0 it breaks the integration gate; its
    // retry (which sees t0 on the target) does it another way.
    p.script("t1.1", "write src/t1/done yes\nwrite src/t1/clash yes\n");
    p.script(
        "t1.2",
        "require-retry-mention integration\nwrite src/t1/done yes\n",
    );
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake", "--cap", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let failed: Vec<_> = events(&sb, &p.repo)
        .into_iter()
        .filter(|e| e["type"] == "landing_failed")
        .collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["task"], "t1");
    assert_eq!(failed[0]["attempt"], 1);
    // The retry started from the target that already had t0 (a failed
    // landing never continues the attempt's old worktree).
    let created = events(&sb, &p.repo)
        .into_iter()
        .find(|e| e["type"] == "attempt_created" && e["task"] == "t1" && e["attempt"] == 2)
        .expect("retry");
    let t0_landed = landed_events(&sb, &p.repo)
        .into_iter()
        .find(|e| e["task"] == "t0")
        .expect("t0 landed");
    assert_eq!(created["base"], t0_landed["new"]);
    // Every tree the target ever pointed to passes the gate.
    for c in target_history(&sb, &p.repo) {
        let has = |path: &str| {
            sb.git_output(&p.repo, &["cat-file", "-e", &format!("{c}:{path}")])
                .status
                .success()
        };
        assert!(
            !(has("src/t0/done") && has("src/t1/clash")),
            "{c} would fail the gate"
        );
    }
}

#[test]
fn a_textual_conflict_never_reaches_the_target_and_the_retry_sees_the_file() {
    let mut sb = Sandbox::new();
    let p = make(&mut sb, 1, None);
    let repo = p.repo.display().to_string();
    // While the agent works, someone commits to the same file on main.
    p.script(
        "t0.1",
        &format!(
            "write src/t0/README agent line\nrun sh -c \"cd '{repo}' && echo human line > src/t0/README && git -c user.name=H -c user.email=h@example.com commit -qam human\"\nwrite src/t0/done yes\n"
        ),
    );
    p.script(
        "t0.2",
        "require-retry-mention src/t0/README\nappend src/t0/README agent line\nwrite src/t0/done yes\n",
    );
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let failed = events(&sb, &p.repo)
        .into_iter()
        .find(|e| e["type"] == "landing_failed")
        .expect("a conflict");
    assert_eq!(failed["conflicts"], serde_json::json!(["src/t0/README"]));
    assert!(
        failed["hunks"][0]
            .as_str()
            .expect("hunk")
            .contains("<<<<<<<")
    );
    for c in target_history(&sb, &p.repo) {
        let out = sb.git_output(&p.repo, &["grep", "-c", "-e", "<<<<<<<", &c, "--", "."]);
        assert!(stdout(&out).is_empty(), "markers reached the target at {c}");
    }
    // The human's line survived; the agent's was added after it.
    let readme = std::fs::read_to_string(p.repo.join("src/t0/README")).expect("readme");
    assert_eq!(readme, "human line\nagent line\n");
}

#[test]
fn an_external_push_during_landing_is_kept_and_the_candidate_regated() {
    let mut sb = Sandbox::new();
    let marker = sb.path().join("pushed");
    let repo_dir = sb.path().join("proj");
    let gate = format!(
        "if [ ! -f '{m}' ]; then touch '{m}'; git -C '{r}' -c user.name=H -c user.email=h@example.com commit -q --allow-empty -m external; fi; true",
        m = marker.display(),
        r = repo_dir.display()
    );
    // Quoted: `;` starts a comment in git-config syntax.
    let p = make(
        &mut sb,
        1,
        Some(&format!("[integration]\n\trun = \"{gate}\"\n")),
    );
    p.script("t0", "write src/t0/done yes\n");
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let log = sb.git(&p.repo, &["log", "--format=%s", "main"]);
    assert!(
        log.contains("external"),
        "the external commit was lost: {log}"
    );
    let verdicts: Vec<_> = events(&sb, &p.repo)
        .into_iter()
        .filter(|e| e["type"] == "integration_verdict")
        .collect();
    assert_eq!(verdicts.len(), 2, "the rebuilt candidate was gated again");
    assert_ne!(verdicts[0]["candidate"], verdicts[1]["candidate"]);
    let landed = landed_events(&sb, &p.repo);
    assert_eq!(landed.len(), 1);
    assert_eq!(landed[0]["new"], verdicts[1]["candidate"]);
    let external = sb.git(&p.repo, &["log", "--format=%H", "--grep=external", "main"]);
    assert_eq!(landed[0]["old"].as_str(), Some(external.as_str()));
}

#[test]
fn a_batch_of_8_with_one_culprit_lands_7_with_fewer_gate_runs() {
    let mut sb = Sandbox::new();
    let counter = sb.path().join("gate-runs");
    let gate = format!("echo run >> '{}'; ! test -f src/t5/bad", counter.display());
    // Landing as they pass: the attempts after the culprit land in the
    // same merge (in plan order they would wait for the culprit's retry).
    let p = make(
        &mut sb,
        8,
        Some(&format!(
            "[orch]\n\tlandingOrder = passed\n[integration]\n\trun = \"{gate}\"\n"
        )),
    );
    for i in 0..8 {
        let extra = if i == 5 { "write src/t5/bad yes\n" } else { "" };
        p.script(
            &format!("t{i}.1"),
            &format!("write src/t{i}/done yes\n{extra}"),
        );
        p.script(&format!("t{i}.2"), &format!("write src/t{i}/done again\n"));
    }
    // Keep the queue from landing while the attempts run: the target's
    // checkout is dirty, so every attempt passes and waits.
    block_landings(&p.repo);
    let out = sb.orch(
        &p.repo,
        &[
            "run", "proj", "--agent", "fake", "--cap", "8", "--base", "main",
        ],
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    unblock_landings(&p.repo);
    let dry = sb.orch_ok(&p.repo, &["merge", "--dry-run", "--batch", "8"]);
    assert!(dry.starts_with("8 attempt(s)"), "{dry}");
    let out = sb.orch(&p.repo, &["merge", "--batch", "8", "--json"]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "the culprit could not land: {}",
        stderr(&out)
    );
    let report: serde_json::Value = serde_json::from_str(stdout(&out).trim()).expect("json");
    assert_eq!(report["landed"].as_array().expect("landed").len(), 7);
    assert_eq!(report["failed"][0][0], "t5/1");
    let runs = std::fs::read_to_string(&counter)
        .expect("counter")
        .lines()
        .count();
    assert!(
        runs < 8,
        "{runs} gate runs; landing one by one would take 8"
    );
    // The culprit is retried from the new target and lands.
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let s = status_json(&sb, &p.repo);
    assert!(
        s["tasks"]
            .as_array()
            .expect("tasks")
            .iter()
            .all(|t| t["status"] == "done")
    );
    assert_eq!(s["tasks"][5]["attempts"], 2);
}

#[test]
fn a_landing_killed_in_each_crash_window_never_leaves_a_landed_commit_without_its_record() {
    let mut sb = Sandbox::new();
    let p = make(&mut sb, 3, Some("[integration]\n\trun = sleep 0.3\n"));
    for i in 0..3 {
        p.script(&format!("t{i}"), &format!("write src/t{i}/done yes\n"));
    }
    block_landings(&p.repo);
    assert_eq!(
        sb.orch(
            &p.repo,
            &["run", "proj", "--agent", "fake", "--base", "main"]
        )
        .status
        .code(),
        Some(3)
    );
    unblock_landings(&p.repo);
    let start = sb.git(&p.repo, &["rev-parse", "main"]);
    let check = |sb: &Sandbox| {
        let tip = sb.git(&p.repo, &["rev-parse", "main"]);
        let landed = landed_events(sb, &p.repo);
        // Either main did not move, or where it is was recorded.
        assert!(
            tip == start || landed.iter().any(|e| e["new"] == tip.as_str()),
            "main is at {tip} without a landing record"
        );
        // No attempt landed twice.
        let mut seen = std::collections::BTreeSet::new();
        for e in &landed {
            assert!(
                seen.insert((e["task"].to_string(), e["attempt"].to_string())),
                "landed twice"
            );
        }
    };
    // Each landing's crash windows, hit exactly by named failpoints where
    // `git orch merge` kills itself: while writing the record, between the
    // record and the target's move, and between that and the checkout's.
    // (A landing's first append is its record: the passing integration
    // verdict is written with it.)
    for window in [
        "append.objects-written=kill@1",
        "land.recorded=kill@1",
        "land.moved=kill@1",
        "land.recorded=kill@1",
    ] {
        let merge = sb
            .command("git-orch", &p.repo)
            .args(["merge"])
            .env("ORCH_FAILPOINTS", window)
            .output()
            .expect("merge");
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            merge.status.signal(),
            Some(9),
            "{window}: {}",
            stderr(&merge)
        );
        check(&sb);
    }
    let out = sb.orch(&p.repo, &["merge"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    check(&sb);
    assert_eq!(landed_events(&sb, &p.repo).len(), 3);
}

#[test]
fn verify_accepts_landings_and_refuses_the_rest() {
    let mut sb = Sandbox::new();
    let p = make(&mut sb, 1, None);
    p.script("t0", "write src/t0/done yes\n");
    sb.orch_ok(&p.repo, &["run", "proj", "--agent", "fake"]);
    let out = sb.orch(&p.repo, &["verify", "main", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let v: serde_json::Value = serde_json::from_str(stdout(&out).trim()).expect("json");
    assert_eq!(v["ok"], true);
    assert_eq!(v["task"], "t0");
    // A commit made by hand.
    std::fs::write(p.repo.join("hand.txt"), "by hand\n").expect("write");
    sb.git(&p.repo, &["add", "hand.txt"]);
    sb.git(&p.repo, &["commit", "-q", "-m", "by hand"]);
    let out = sb.orch(&p.repo, &["verify", "HEAD"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(stdout(&out).contains("made by hand"), "{}", stdout(&out));
    // Forged records: a landing from a run whose approval does not match
    // (an unapproved plan, and a plan changed after approval).
    let store = git_orch::store::Store::open(&p.repo).expect("store");
    let runs_json = common::json_lines(&sb.orch_ok(&p.repo, &["log", "--json"]));
    let started = runs_json
        .iter()
        .find(|e| e["type"] == "run_started")
        .expect("run");
    let approval = started["approval"].as_str().expect("approval").to_owned();
    let plan_hash = started["plan_hash"].as_str().expect("hash").to_owned();
    let revise_commit = {
        sb.orch_ok(&p.repo, &["approve", "proj", "--revise", "--note", "no"]);
        sb.git(&p.repo, &["rev-parse", "refs/orch/approvals/proj"])
    };
    for (name, approval_commit, hash, expect) in [
        (
            "unapproved",
            revise_commit.as_str(),
            plan_hash.as_str(),
            "not an approval",
        ),
        (
            "changed",
            approval.as_str(),
            "blake3:0000",
            "changed after approval",
        ),
    ] {
        std::fs::write(p.repo.join(format!("{name}.txt")), name).expect("write");
        sb.git(&p.repo, &["add", "."]);
        sb.git(&p.repo, &["commit", "-q", "-m", name]);
        let commit = sb.git(&p.repo, &["rev-parse", "HEAD"]);
        let run_id = git_orch::ids::RunId::new(format!("forged-{name}")).expect("id");
        let task = git_orch::ids::TaskId::new("t0").expect("id");
        let settings: git_orch::event::RunSettings =
            serde_json::from_value(started["settings"].clone()).expect("settings");
        store
            .append(vec![
                git_orch::event::Event::RunStarted {
                    run_id: run_id.clone(),
                    plan_id: git_orch::ids::PlanId::new("proj").expect("id"),
                    revision: 1,
                    plan_hash: hash.to_owned(),
                    approval: approval_commit.parse().expect("hex"),
                    target: "main".into(),
                    base: commit.parse().expect("hex"),
                    settings,
                    carried: Default::default(),
                    by: None,
                },
                git_orch::event::Event::Landed {
                    run_id,
                    task,
                    attempt: 1,
                    target: "main".into(),
                    old: commit.parse().expect("hex"),
                    new: commit.parse().expect("hex"),
                    strategy: "rebase".into(),
                    commits: vec![commit.parse().expect("hex")],
                },
            ])
            .expect("append");
        let out = sb.orch(&p.repo, &["verify", &commit]);
        assert_eq!(out.status.code(), Some(3), "{name}: {}", stdout(&out));
        assert!(stdout(&out).contains(expect), "{name}: {}", stdout(&out));
    }
}

#[test]
fn a_dirty_checked_out_target_is_refused_and_the_users_files_are_untouched() {
    let mut sb = Sandbox::new();
    let p = make(&mut sb, 1, None);
    p.script("t0", "write src/t0/done yes\n");
    // The user edits a tracked file and has an untracked file at the very
    // path the agent creates.
    std::fs::write(p.repo.join("README.md"), b"mine, unsaved\n").expect("edit");
    std::fs::create_dir_all(p.repo.join("src/t0")).expect("dir");
    std::fs::write(p.repo.join("src/t0/done"), b"my own\x00bytes").expect("untracked");
    let before = sb.git(&p.repo, &["rev-parse", "main"]);
    let out = sb.orch(
        &p.repo,
        &["run", "proj", "--agent", "fake", "--base", "main"],
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    // The refusal names the path in the way, not the unrelated edit.
    assert!(
        stderr(&out).contains("src/t0/done (untracked)"),
        "the refusal says why: {}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("README.md"), "{}", stderr(&out));
    assert_eq!(sb.git(&p.repo, &["rev-parse", "main"]), before, "not moved");
    assert_eq!(
        std::fs::read(p.repo.join("README.md")).expect("read"),
        b"mine, unsaved\n"
    );
    assert_eq!(
        std::fs::read(p.repo.join("src/t0/done")).expect("read"),
        b"my own\x00bytes"
    );
    assert!(landed_events(&sb, &p.repo).is_empty());
}

#[test]
fn a_landing_beside_unrelated_edits_and_untracked_files_lands_and_keeps_them() {
    let mut sb = Sandbox::new();
    let p = make(&mut sb, 1, None);
    p.script("t0", "write src/t0/done landed\n");
    // Unrelated to the landing: an edited tracked file, a staged new file
    // and an untracked one.
    std::fs::write(p.repo.join("README.md"), b"mine, unsaved\n").expect("edit");
    std::fs::write(p.repo.join("staged.txt"), b"staged\n").expect("staged");
    sb.git(&p.repo, &["add", "staged.txt"]);
    std::fs::write(p.repo.join("notes.txt"), b"my notes\x00").expect("untracked");
    let out = sb.orch(
        &p.repo,
        &["run", "proj", "--agent", "fake", "--base", "main"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(landed_events(&sb, &p.repo).len(), 1);
    // The checkout followed the target (the landed file is there) and the
    // person's bytes are as they were.
    assert_eq!(
        std::fs::read_to_string(p.repo.join("src/t0/done")).expect("landed file"),
        "landed\n"
    );
    assert_eq!(
        std::fs::read(p.repo.join("README.md")).expect("read"),
        b"mine, unsaved\n"
    );
    assert_eq!(
        std::fs::read(p.repo.join("notes.txt")).expect("read"),
        b"my notes\x00"
    );
    let status = sb.git(&p.repo, &["status", "--porcelain"]);
    assert_eq!(
        status.lines().collect::<Vec<_>>(),
        [" M README.md", "A  staged.txt", "?? notes.txt"],
        "{status}"
    );
}

/// Two tasks whose attempts passed and wait in the queue; returns the run.
fn two_waiting(sb: &mut Sandbox) -> (Project, String) {
    let p = make(sb, 2, None);
    for i in 0..2 {
        p.script(&format!("t{i}"), &format!("write src/t{i}/done yes\n"));
    }
    // The dirty checkout of main keeps the queue from landing.
    block_landings(&p.repo);
    let out = sb.orch(
        &p.repo,
        &[
            "run", "proj", "--agent", "fake", "--cap", "2", "--base", "main",
        ],
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    unblock_landings(&p.repo);
    let run = status_json(sb, &p.repo)["run"]
        .as_str()
        .expect("run")
        .to_owned();
    (p, run)
}

#[test]
fn an_interrupted_landing_is_completed_by_the_next_one() {
    let mut sb = Sandbox::new();
    let (p, run) = two_waiting(&mut sb);
    let tip = sb.git(&p.repo, &["rev-parse", "main"]);
    let tree = sb.git(&p.repo, &["rev-parse", "main^{tree}"]);
    let made = sb.git(
        &p.repo,
        &["commit-tree", &tree, "-p", &tip, "-m", "candidate"],
    );
    // A process recorded t0's landing on main and was killed before main
    // moved: the next landing completes it.
    let store = git_orch::store::Store::open(&p.repo).expect("store");
    let landed = |task: &str, old: &str, new: &str| git_orch::event::Event::Landed {
        run_id: git_orch::ids::RunId::new(run.clone()).expect("id"),
        task: git_orch::ids::TaskId::new(task).expect("id"),
        attempt: 1,
        target: "main".into(),
        old: old.parse().expect("hex"),
        new: new.parse().expect("hex"),
        strategy: "rebase".into(),
        commits: vec![new.parse().expect("hex")],
    };
    store
        .append(vec![landed("t0", &tip, &made)])
        .expect("append");
    let out = sb.orch(&p.repo, &["merge"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let history = target_history(&sb, &p.repo);
    assert_eq!(history[history.len() - 2], made, "rolled forward first");
    assert_eq!(sb.git(&p.repo, &["status", "--porcelain"]), "");
}

#[test]
fn a_landing_record_whose_target_moved_elsewhere_is_voided_and_lands_again() {
    let mut sb = Sandbox::new();
    let (p, run) = two_waiting(&mut sb);
    let tree = sb.git(&p.repo, &["rev-parse", "main^{tree}"]);
    let elsewhere = sb.git(&p.repo, &["commit-tree", &tree, "-m", "elsewhere"]);
    let never = sb.git(
        &p.repo,
        &["commit-tree", &tree, "-p", &elsewhere, "-m", "never"],
    );
    // Killed between recording t1's landing and moving main, and main is
    // no longer where that landing started.
    let store = git_orch::store::Store::open(&p.repo).expect("store");
    store
        .append(vec![git_orch::event::Event::Landed {
            run_id: git_orch::ids::RunId::new(run).expect("id"),
            task: git_orch::ids::TaskId::new("t1").expect("id"),
            attempt: 1,
            target: "main".into(),
            old: elsewhere.parse().expect("hex"),
            new: never.parse().expect("hex"),
            strategy: "rebase".into(),
            commits: vec![never.parse().expect("hex")],
        }])
        .expect("append");
    let out = sb.orch(&p.repo, &["merge"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let voided: Vec<_> = events(&sb, &p.repo)
        .into_iter()
        .filter(|e| e["type"] == "landing_voided")
        .collect();
    assert_eq!(voided.len(), 1);
    assert_eq!(voided[0]["task"], "t1");
    assert!(!target_history(&sb, &p.repo).contains(&never));
    for i in 0..2 {
        sb.git(&p.repo, &["cat-file", "-e", &format!("main:src/t{i}/done")]);
    }
    // verify no longer accepts the voided commit.
    let out = sb.orch(&p.repo, &["verify", &never]);
    assert_eq!(out.status.code(), Some(3), "{}", stdout(&out));
}

#[test]
fn the_kept_scratch_worktree_holds_exactly_each_candidate_and_goes_when_the_merge_ends() {
    let mut sb = Sandbox::new();
    // The gate leaves an untracked file, an ignored one and an edit behind
    // and refuses to run where any of them is: a scratch worktree kept from
    // one landing to the next must be put back to exactly the candidate.
    let gate = "test ! -e junk && test ! -e build.out && test -z \\\"$(git status --porcelain)\\\" && touch junk build.out && echo changed >> README.md";
    let p = make(
        &mut sb,
        3,
        Some(&format!("[integration]\n\trun = \"{gate}\"\n")),
    );
    std::fs::write(p.repo.join(".gitignore"), "build.out\n").expect("ignore");
    sb.git(&p.repo, &["add", ".gitignore"]);
    sb.git(&p.repo, &["commit", "-q", "-m", "ignore build output"]);
    for i in 0..3 {
        p.script(&format!("t{i}"), &format!("write src/t{i}/done yes\n"));
    }
    block_landings(&p.repo);
    let out = sb.orch(
        &p.repo,
        &[
            "run", "proj", "--agent", "fake", "--cap", "3", "--base", "main",
        ],
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    unblock_landings(&p.repo);
    let out = sb.orch(&p.repo, &["merge"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(landed_events(&sb, &p.repo).len(), 3, "{}", stderr(&out));
    // The queue's scratch worktree went with the command, and git forgot it.
    let scratch = p.repo.join(".git/orch/scratch");
    let left: Vec<_> = std::fs::read_dir(&scratch)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.path().is_dir())
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
    let listed = sb.git(&p.repo, &["worktree", "list", "--porcelain"]);
    assert!(!listed.contains("orch/scratch"), "{listed}");
}

#[test]
fn two_runs_of_one_plan_land_in_the_same_order_whatever_order_the_agents_finish() {
    let order = |sb: &Sandbox, repo: &Path| -> Vec<String> {
        landed_events(sb, repo)
            .iter()
            .map(|e| e["task"].as_str().expect("task").to_owned())
            .collect()
    };
    let mut orders = Vec::new();
    // The later a task is in the plan, the sooner its agent finishes.
    for _ in 0..2 {
        let mut sb = Sandbox::new();
        let p = make(&mut sb, 4, None);
        for i in 0..4 {
            p.script(
                &format!("t{i}"),
                &format!("sleep 0.{}\nwrite src/t{i}/done yes\n", 8 - 2 * i),
            );
        }
        let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake", "--cap", "4"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        orders.push(order(&sb, &p.repo));
        let subjects = sb.git(
            &p.repo,
            &["log", "--format=%s", "--reverse", "HEAD~4..HEAD"],
        );
        assert_eq!(subjects, "Task t0\nTask t1\nTask t2\nTask t3", "{subjects}");
    }
    assert_eq!(orders[0], ["t0", "t1", "t2", "t3"]);
    assert_eq!(orders[0], orders[1]);
}
