//! Best of N: a task runs several attempts at once, every one is gated,
//! one is chosen (gates, then a reviewer, then the smaller diff) and lands,
//! the others are archived with why; the cap, the budget and the retry
//! budget count them as the docs say.

use crate::common;

use common::{Sandbox, events, project, status_json, stderr};

fn judged(evs: &[serde_json::Value]) -> Vec<&serde_json::Value> {
    evs.iter()
        .filter(|e| e["type"] == "candidates_judged")
        .collect()
}

fn task_row<'a>(status: &'a serde_json::Value, task: &str) -> &'a serde_json::Value {
    status["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .find(|t| t["task"] == task)
        .expect("task row")
}

#[test]
fn the_smallest_passing_candidate_lands_and_the_others_are_archived_with_why() {
    let mut sb = Sandbox::new();
    let p = project(&mut sb, &[("a", &[], "test -f src/a/done")], None);
    // 1 fails its verification; 2 and 3 pass, 3 with the smaller change.
    p.script("a.1", "write src/a/other nothing\n");
    p.script(
        "a.2",
        "write src/a/done 'one\\ntwo\\nthree\\nfour\\nfive'\n",
    );
    p.script("a.3", "write src/a/done yes\n");
    let out = sb.orch(
        &p.repo,
        &[
            "run",
            "proj",
            "--agent",
            "fake",
            "--best-of",
            "3",
            "--cap",
            "3",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let evs = events(&sb, &p.repo);
    let created: Vec<_> = evs
        .iter()
        .filter(|e| e["type"] == "attempt_created")
        .collect();
    assert_eq!(created.len(), 3, "three candidates, no more");
    for c in &created {
        assert_eq!(c["candidate"]["round"], 1, "{c}");
        assert_eq!(c["candidate"]["of"], 3, "{c}");
    }
    let j = judged(&evs);
    assert_eq!(j.len(), 1, "one judgement");
    assert_eq!(j[0]["winner"], 3);
    let order: Vec<u64> = j[0]["ranking"]
        .as_array()
        .expect("ranking")
        .iter()
        .map(|r| r["attempt"].as_u64().expect("attempt"))
        .collect();
    assert_eq!(order, [3, 2, 1], "passed first, then the smaller diff");
    // Exactly one landing, the chosen one's work.
    let landed: Vec<_> = evs.iter().filter(|e| e["type"] == "landed").collect();
    assert_eq!(landed.len(), 1);
    assert_eq!(landed[0]["attempt"], 3);
    assert_eq!(sb.git(&p.repo, &["show", "main:src/a/done"]).trim(), "yes");
    assert!(
        sb.git_output(&p.repo, &["cat-file", "-e", "main:src/a/other"])
            .status
            .code()
            != Some(0),
        "a failed candidate's file landed"
    );
    let s = status_json(&sb, &p.repo);
    let row = task_row(&s, "a");
    assert_eq!(row["status"], "done");
    assert_eq!(row["attempt"], 3);
    let cands = row["candidates"].as_array().expect("candidates");
    let state = |n: u64| {
        cands
            .iter()
            .find(|c| c["attempt"] == n)
            .map(|c| {
                (
                    c["state"].as_str().unwrap_or_default().to_owned(),
                    c["why"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .expect("candidate")
    };
    assert_eq!(state(3).0, "chosen");
    let (s2, why2) = state(2);
    assert_eq!(s2, "archived");
    assert!(why2.contains("attempt 3 did it with"), "{why2}");
    let (s1, why1) = state(1);
    assert_eq!(s1, "archived");
    assert!(why1.starts_with("did not pass"), "{why1}");
    // The text view lists the candidates under their task.
    let text = sb.orch_ok(&p.repo, &["status"]);
    let archived: Vec<&str> = text.lines().filter(|l| l.contains("archived")).collect();
    assert_eq!(archived.len(), 2, "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("chosen") && l.contains("#3")),
        "{text}"
    );
}

#[test]
fn a_subtask_names_its_candidate_agents_and_the_winners_agent_is_recorded() {
    let mut sb = Sandbox::new();
    let p = project(
        &mut sb,
        &[("a", &[], "test -f src/a/done")],
        Some("[agent \"other\"]\n\tkind = fake\n"),
    );
    // The plan's own list of candidates: two agents.
    let plan = serde_json::json!({"version": 1, "id": "proj", "instruction": "Do the work",
        "subtasks": [{"id": "a", "title": "Task a", "owned_globs": ["src/a/**"],
        "deliverable": "a done", "verification": "test -f src/a/done",
        "candidates": ["fake", "other"]}]});
    let file = sb.path().join("plan2.json");
    std::fs::write(&file, plan.to_string()).expect("plan");
    sb.orch_ok(&p.repo, &["plan", "add", &file.to_string_lossy()]);
    sb.orch_ok(&p.repo, &["approve", "proj"]);
    p.script("a.1", "write src/a/done 'long\\nlonger\\nlongest'\n");
    p.script("a.2", "write src/a/done short\n");
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let evs = events(&sb, &p.repo);
    // Candidates are created at once, so their records come in any order.
    let agents: std::collections::BTreeMap<u64, &str> = evs
        .iter()
        .filter(|e| e["type"] == "attempt_created")
        .map(|e| {
            (
                e["attempt"].as_u64().expect("attempt"),
                e["agent"].as_str().expect("agent"),
            )
        })
        .collect();
    assert_eq!(agents.into_values().collect::<Vec<_>>(), ["fake", "other"]);
    let j = judged(&evs);
    assert_eq!(j[0]["winner"], 2);
    assert_eq!(j[0]["ranking"][0]["agent"], "other");
    let s = status_json(&sb, &p.repo);
    assert_eq!(task_row(&s, "a")["agent"], "other");
}

#[test]
fn a_round_where_none_passes_counts_once_against_the_retry_budget() {
    let mut sb = Sandbox::new();
    let p = project(
        &mut sb,
        &[("a", &[], "test -f src/a/done")],
        Some("[orch]\n\tretries = 1\n"),
    );
    p.script("a", "write src/a/other nothing\n");
    let out = sb.orch(
        &p.repo,
        &["run", "proj", "--agent", "fake", "--best-of", "2"],
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let evs = events(&sb, &p.repo);
    let created = evs
        .iter()
        .filter(|e| e["type"] == "attempt_created")
        .count();
    // Two rounds of two: the first round failing is one failure, and one
    // retry is allowed.
    assert_eq!(created, 4);
    let j = judged(&evs);
    assert_eq!(j.len(), 2);
    assert!(j.iter().all(|e| e["winner"].is_null()));
    assert_eq!(j[1]["round"], 3);
    let s = status_json(&sb, &p.repo);
    assert_eq!(task_row(&s, "a")["status"], "failed");
    assert!(!evs.iter().any(|e| e["type"] == "landed"));
}

#[test]
fn the_cap_counts_every_candidate() {
    let mut sb = Sandbox::new();
    let p = project(
        &mut sb,
        &[
            ("a", &[], "test -f src/a/done"),
            ("b", &[], "test -f src/b/done"),
        ],
        None,
    );
    // Each agent marks its start, waits (with a deadline) until the other
    // candidate of its task has started too, records how many agents have
    // started and not ended, and marks its end. A third agent running
    // beside a round would be counted.
    let count = sb.path().join("running");
    std::fs::create_dir_all(&count).expect("mkdir");
    for t in ["a", "b"] {
        p.script(
            t,
            &format!(
                "run sh -c 'touch {dir}/$ORCH_TASK.$ORCH_ATTEMPT.start; i=0; while [ $(ls {dir} | grep -c \"^$ORCH_TASK\\..*start\") -lt 2 ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; echo $(( $(ls {dir} | grep -c start) - $(ls {dir} | grep -c end) )) >> {dir}.log; touch {dir}/$ORCH_TASK.$ORCH_ATTEMPT.end'\nwrite src/{t}/done yes\n",
                dir = count.display()
            ),
        );
    }
    let out = sb.orch(
        &p.repo,
        &[
            "run",
            "proj",
            "--agent",
            "fake",
            "--best-of",
            "2",
            "--cap",
            "2",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let seen = std::fs::read_to_string(format!("{}.log", count.display())).expect("log");
    let most = seen
        .lines()
        .filter_map(|l| l.trim().parse::<u32>().ok())
        .max()
        .expect("counts");
    assert!(most <= 2, "more than the cap ran at once: {seen}");
    assert_eq!(judged(&events(&sb, &p.repo)).len(), 2);
}

#[test]
fn a_driver_killed_before_judging_judges_once_when_the_run_resumes() {
    let mut sb = Sandbox::new();
    let p = project(&mut sb, &[("a", &[], "test -f src/a/done")], None);
    p.script("a.1", "write src/a/done 'a\\nb\\nc'\n");
    p.script("a.2", "write src/a/done b\n");
    let out = sb
        .command("git-orch", &p.repo)
        .args(["run", "proj", "--agent", "fake", "--best-of", "2"])
        .env("ORCH_FAILPOINTS", "candidates.judging=kill")
        .output()
        .expect("run");
    assert!(!out.status.success(), "the driver was killed");
    assert!(judged(&events(&sb, &p.repo)).is_empty());
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let evs = events(&sb, &p.repo);
    let j = judged(&evs);
    assert_eq!(j.len(), 1);
    assert_eq!(j[0]["winner"], 2);
    assert_eq!(
        evs.iter()
            .filter(|e| e["type"] == "attempt_created")
            .count(),
        2,
        "the resumed run judged the round instead of running it again"
    );
    assert_eq!(sb.git(&p.repo, &["show", "main:src/a/done"]).trim(), "b");
}

#[test]
fn bad_best_of_input_is_refused_and_nothing_is_written() {
    let mut sb = Sandbox::new();
    let p = project(&mut sb, &[("a", &[], "true")], None);
    let before = sb.refs(&p.repo);
    for bad in [
        vec!["--best-of", "0"],
        vec!["--best-of", "9"],
        vec!["--best-of", "two"],
        vec!["--best-of", "-1"],
        vec!["--best-of", "2", "--start-only"],
    ] {
        let mut args = vec!["run", "proj", "--agent", "fake"];
        args.extend(bad.iter().copied());
        let out = sb.orch(&p.repo, &args);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", stderr(&out));
    }
    // A plan with a candidates list cannot go to workers.
    let plan = serde_json::json!({"version": 1, "id": "proj", "instruction": "Do the work",
        "subtasks": [{"id": "a", "title": "Task a", "owned_globs": ["src/a/**"],
        "deliverable": "a done", "verification": "true", "candidates": ["fake", "fake"]}]});
    let file = sb.path().join("plan2.json");
    std::fs::write(&file, plan.to_string()).expect("plan");
    sb.orch_ok(&p.repo, &["plan", "add", &file.to_string_lossy()]);
    sb.orch_ok(&p.repo, &["approve", "proj"]);
    let before = (before, sb.refs(&p.repo));
    let out = sb.orch(&p.repo, &["run", "proj", "--start-only"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("candidates"), "{}", stderr(&out));
    assert_eq!(sb.refs(&p.repo), before.1, "a refused run wrote state");
    // Hostile candidate lists are refused when the plan is added.
    for bad in [
        serde_json::json!(vec!["fake"; 9]),
        serde_json::json!(["../etc"]),
        serde_json::json!([""]),
        serde_json::json!("fake"),
    ] {
        let plan = serde_json::json!({"version": 1, "id": "proj", "instruction": "Do the work",
            "subtasks": [{"id": "a", "title": "Task a", "owned_globs": ["src/a/**"],
            "deliverable": "a done", "verification": "true", "candidates": bad}]});
        std::fs::write(&file, plan.to_string()).expect("plan");
        let out = sb.orch(&p.repo, &["plan", "add", &file.to_string_lossy()]);
        assert_ne!(out.status.code(), Some(0), "{bad}: accepted");
    }
    assert_eq!(sb.refs(&p.repo), before.1, "a refused plan wrote state");
}

#[test]
fn ctrl_c_during_a_round_costs_no_retry_and_the_rerun_lands_a_winner() {
    let mut sb = Sandbox::new();
    let p = project(
        &mut sb,
        &[("a", &[], "test -f src/a/done")],
        Some("[orch]\n\tretries = 0\n"),
    );
    // The first round's candidates work until they are interrupted.
    p.script("a.1", "hang\n");
    p.script("a.2", "hang\n");
    p.script("a.3", "write src/a/done three\n");
    p.script("a.4", "write src/a/done 'four\\nlines'\n");
    let driver = sb
        .command("git-orch", &p.repo)
        .args(["run", "proj", "--agent", "fake", "--best-of", "2"])
        .spawn()
        .expect("run");
    let out = common::interrupt_once_started(&sb, &p.repo, driver, 2);
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    // With no retries left, a round that cost one would leave the task
    // failed; this one runs a new round and lands.
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let evs = events(&sb, &p.repo);
    let j = judged(&evs);
    assert_eq!(j.len(), 2, "{j:?}");
    assert!(j[0]["winner"].is_null());
    assert_eq!(j[1]["winner"], 3);
    assert_eq!(
        sb.git(&p.repo, &["show", "main:src/a/done"]).trim(),
        "three"
    );
}
