//! Several machines, one remote (ARCHITECTURE.md): workers in separate clones
//! of one bare repository share a run through claim refs, leases and the
//! merge queue's atomic pushes, and nothing else. Invariant 5: every task
//! lands, and is recorded as landed, once.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use common::{Sandbox, json_lines, project, stderr, stdout};

/// A shared remote with a started (not dispatched) run of `n` independent
/// tasks; returns (bare remote, the first clone, run id).
fn shared_run(sb: &mut Sandbox, n: usize) -> (PathBuf, PathBuf, String) {
    let ids: Vec<String> = (0..n).map(|i| format!("t{i}")).collect();
    let verify: Vec<String> = ids
        .iter()
        .map(|t| format!("test -f src/{t}/done"))
        .collect();
    let specs: Vec<(&str, &[&str], &str)> = ids
        .iter()
        .zip(&verify)
        .map(|(t, v)| (t.as_str(), &[][..], v.as_str()))
        .collect();
    let p = project(sb, &specs, None);
    let bare = common::share(sb, &p.repo);
    sb.orch_ok(&p.repo, &["run", "proj", "--start-only"]);
    sb.orch_ok(&p.repo, &["sync"]);
    let run = log(sb, &p.repo)
        .iter()
        .find(|e| e["type"] == "run_started")
        .and_then(|e| e["run_id"].as_str())
        .expect("run started")
        .to_owned();
    (bare, p.repo, run)
}

fn log(sb: &Sandbox, repo: &Path) -> Vec<serde_json::Value> {
    json_lines(&sb.orch_ok(repo, &["log", "--json"]))
}

fn clone(sb: &Sandbox, bare: &Path, name: &str) -> PathBuf {
    let dir = sb.clone_of(bare, name);
    sb.orch_ok(&dir, &["init", "--remote", "origin"]);
    dir
}

/// Starts the binary itself, not through `git orch`: a SIGKILL must reach
/// the worker, not a `git` process that would leave it running.
fn worker(sb: &Sandbox, repo: &Path, extra: &[&str]) -> Child {
    let exe = common::bin_dir().join("git-orch");
    sb.command(&exe.to_string_lossy(), repo)
        .args(["worker", "--remote", "origin", "--poll", "0.2"])
        .args(extra)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("worker starts")
}

fn wait(mut child: Child, limit: Duration) -> std::process::Output {
    let start = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!("worker did not finish in {limit:?}: {}", stderr(&out));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child.wait_with_output().expect("output")
}

#[test]
fn three_workers_share_twelve_tasks_each_executed_exactly_once() {
    let mut sb = Sandbox::new();
    let stamps = sb.path().join("stamps");
    let (bare, a, run) = shared_run(&mut sb, 12);
    let scripts = sb.path().join("scripts");
    std::fs::write(
        scripts.join("default.script"),
        format!(
            "stamp {} ran\nsleep 0.2\nrun sh -c \"mkdir -p src/$ORCH_TASK && echo yes > src/$ORCH_TASK/done\"\n",
            stamps.display()
        ),
    )
    .expect("script");
    let b = clone(&sb, &bare, "b");
    let c = clone(&sb, &bare, "c");
    let args = [
        "--agent",
        "fake",
        "--cap",
        "2",
        "--until-done",
        "--lease",
        "20",
    ];
    let workers: Vec<Child> = [&a, &b, &c].iter().map(|r| worker(&sb, r, &args)).collect();
    for w in workers {
        let out = wait(w, Duration::from_secs(240));
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    // Every task ran exactly once, wherever it ran.
    let stamped = std::fs::read_to_string(&stamps).expect("stamps");
    let mut tasks: Vec<&str> = stamped
        .lines()
        .map(|l| l.split_whitespace().nth(1).expect("task"))
        .collect();
    tasks.sort_unstable();
    let mut expected: Vec<String> = (0..12).map(|i| format!("t{i}")).collect();
    expected.sort_unstable();
    assert_eq!(tasks, expected, "{stamped}");
    // Work was shared: more than one clone ran attempts.
    let writers: std::collections::BTreeSet<String> = log(&sb, &a)
        .iter()
        .filter(|e| e["type"] == "attempt_created")
        .map(|e| e["writer"].as_str().expect("writer").to_owned())
        .collect();
    assert!(writers.len() > 1, "one worker did everything: {writers:?}");
    // All landed on the remote's main, and every clone tells the same story.
    for r in [&a, &b, &c] {
        sb.orch_ok(r, &["sync"]);
    }
    let journals: Vec<String> = [&a, &b, &c]
        .iter()
        .map(|r| sb.orch_ok(r, &["log", "--json"]))
        .collect();
    assert_eq!(journals[0], journals[1]);
    assert_eq!(journals[0], journals[2]);
    let landed = log(&sb, &a)
        .iter()
        .filter(|e| e["type"] == "landed")
        .count();
    assert_eq!(landed, 12);
    for i in 0..12 {
        sb.git(&bare, &["cat-file", "-e", &format!("main:src/t{i}/done")]);
    }
    let status: serde_json::Value =
        serde_json::from_str(sb.orch_ok(&b, &["status", &run, "--json"]).trim()).expect("json");
    assert!(
        status["tasks"]
            .as_array()
            .expect("tasks")
            .iter()
            .all(|t| t["status"] == "done" && t["attempts"] == 1),
        "{status}"
    );
    // Every landing on the remote verifies.
    sb.git(&b, &["fetch", "-q", "origin"]);
    let out = sb.orch(&b, &["verify", "origin/main~12..origin/main"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    // Every landing reached refs/orch/keep, whoever landed it: fsck finds
    // nothing to collect, nothing to repair, in any clone.
    for r in [&a, &b, &c] {
        let out = sb.orch(r, &["fsck"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}: {}{}",
            r.display(),
            stdout(&out),
            stderr(&out)
        );
    }
}

#[test]
fn a_killed_workers_claim_is_taken_over_after_its_lease() {
    let mut sb = Sandbox::new();
    let (bare, a, run) = shared_run(&mut sb, 2);
    let scripts = sb.path().join("scripts");
    std::fs::write(scripts.join("t0.1.script"), "hang\n").expect("script");
    std::fs::write(scripts.join("t0.2.script"), "write src/t0/done yes\n").expect("script");
    std::fs::write(scripts.join("t1.script"), "write src/t1/done yes\n").expect("script");
    // The remote enforces the rules: landings must verify.
    let bare_str = bare.to_string_lossy().into_owned();
    sb.orch_ok(&a, &["-C", &bare_str, "hooks", "install", "--server"]);
    // Worker A claims t0 and hangs in it.
    let dead = worker(&sb, &a, &["--agent", "fake", "--cap", "1", "--lease", "2"]);
    let start = Instant::now();
    let pgid = loop {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "t0 never started"
        );
        let started = sb
            .orch(&bare, &["log", "--json"])
            .stdout
            .split(|b| *b == b'\n')
            .filter_map(|l| serde_json::from_slice::<serde_json::Value>(l).ok())
            .find(|e| e["type"] == "attempt_started" && e["task"] == "t0");
        if let Some(e) = started {
            break e["pgid"].as_u64().expect("pgid") as i32;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    // Status shows who holds the task and how fresh the lease is.
    let held: serde_json::Value =
        serde_json::from_str(sb.orch_ok(&bare, &["status", &run, "--json"]).trim()).expect("json");
    let claim = &held["tasks"][0]["claim"];
    assert!(claim["writer"].is_string(), "{held}");
    assert_eq!(claim["lease_secs"], 2);
    assert!(claim["lease_age_ms"].as_i64().expect("age") < 10_000);
    // SIGKILL the worker; its agent would live on on that machine, so stop
    // it too (a group id we read from the log, checked > 1).
    let mut dead = dead;
    dead.kill().expect("kill -9");
    let _ = dead.wait();
    assert!(pgid > 1);
    unsafe {
        libc::killpg(pgid, libc::SIGKILL);
    }
    // Worker B finds the claim, waits out the lease, takes over. Its clone
    // has the client hooks too: its landing pushes must pass them.
    let b = clone(&sb, &bare, "b");
    sb.orch_ok(&b, &["hooks", "install"]);
    let out = wait(
        worker(
            &sb,
            &b,
            &[
                "--agent",
                "fake",
                "--cap",
                "2",
                "--lease",
                "2",
                "--until-done",
            ],
        ),
        Duration::from_secs(120),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("taken over"), "{}", stderr(&out));
    let events = log(&sb, &b);
    let t0_ends: Vec<(u64, String)> = events
        .iter()
        .filter(|e| e["type"] == "attempt_finished" && e["task"] == "t0")
        .map(|e| {
            (
                e["attempt"].as_u64().expect("n"),
                e["outcome"].as_str().expect("outcome").to_owned(),
            )
        })
        .collect();
    assert_eq!(
        t0_ends,
        [(1, "abandoned".to_owned()), (2, "passed".to_owned())]
    );
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "landed" && e["task"] == "t0" && e["attempt"] == 2)
    );
    assert!(
        events.iter().any(|e| e["type"] == "claimed"
            && e["what"] == "t0"
            && e["took_over_from"].is_string())
    );
    // The claim ref moved forward only: two holders, one history.
    let claims = sb.git(
        &bare,
        &["rev-list", "--count", &format!("refs/orch/claims/{run}/t0")],
    );
    assert_eq!(claims, "2");
    let status = sb.orch_ok(&b, &["status", &run]);
    assert!(status.contains("done"), "{status}");
}

#[test]
fn a_worker_refuses_bad_options_and_unknown_remotes() {
    let mut sb = Sandbox::new();
    let (_, a, _) = shared_run(&mut sb, 1);
    let before = sb.refs(&a);
    for args in [
        vec!["--remote", "nosuch", "--once"],
        vec!["--remote", "--upload-pack=evil", "--once"],
        vec!["--remote", "origin", "--poll", "0"],
        vec!["--remote", "origin", "--lease", "0"],
    ] {
        let out = sb.orch(&a, &[&["worker"][..], &args].concat());
        assert_ne!(out.status.code(), Some(0), "{args:?}");
        assert!(!stderr(&out).is_empty(), "{args:?}: says why");
    }
    assert_eq!(sb.refs(&a), before, "nothing written");
}

#[test]
fn a_worker_whose_claim_was_taken_stops_its_attempt() {
    let mut sb = Sandbox::new();
    let (bare, a, run) = shared_run(&mut sb, 1);
    let scripts = sb.path().join("scripts");
    std::fs::write(scripts.join("t0.script"), "sleep 60\n").expect("script");
    let mut holder = worker(&sb, &a, &["--agent", "fake", "--cap", "1", "--lease", "30"]);
    let start = Instant::now();
    let claim_ref = format!("refs/orch/claims/{run}/t0");
    while sb
        .orch(&bare, &["log", "--json"])
        .stdout
        .split(|b| *b == b'\n')
        .filter_map(|l| serde_json::from_slice::<serde_json::Value>(l).ok())
        .all(|e| e["type"] != "attempt_started")
    {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "t0 never started"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Another machine (with a clock far ahead, say) decides the lease ran
    // out and claims t0 on top of the holder's claim.
    let b = clone(&sb, &bare, "b");
    sb.orch_ok(&b, &["sync"]);
    let store = git_orch::store::Store::open(&b).expect("store");
    let previous = store
        .tracked("origin", &claim_ref)
        .expect("read")
        .expect("claimed");
    let mut claim = store.read_claim(previous).expect("claim");
    claim.attempt += 1;
    claim.writer = "someone-else".into();
    let commit = store.write_claim(&claim, Some(previous)).expect("write");
    assert_eq!(
        store
            .push_atomic("origin", &[(commit, claim_ref.clone())])
            .expect("push"),
        git_orch::store::remote::Pushed::Accepted
    );
    // The holder notices within a few rounds and stops its attempt.
    let start = Instant::now();
    loop {
        let ended = sb
            .orch_ok(&a, &["log", "--json"])
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .any(|e| e["type"] == "attempt_finished" && e["task"] == "t0");
        if ended {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the attempt kept running under a lost claim"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = holder.kill();
    let out = holder.wait_with_output().expect("output");
    assert!(
        stderr(&out).contains("another worker took the claim"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_run_whose_approval_was_withdrawn_is_not_worked() {
    let mut sb = Sandbox::new();
    let (bare, a, run) = shared_run(&mut sb, 2);
    sb.orch_ok(&a, &["approve", "proj", "--revise", "--note", "not yet"]);
    sb.orch_ok(&a, &["sync"]);
    let b = clone(&sb, &bare, "b");
    let out = wait(
        worker(&sb, &b, &["--agent", "fake", "--once"]),
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("run {run}: not working it here")),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        stderr(&out).matches("not working it here").count(),
        1,
        "said once"
    );
    let claims = sb.git(&bare, &["for-each-ref", "refs/orch/claims/"]);
    assert_eq!(claims, "", "nothing claimed");
}

#[test]
fn a_worker_takes_its_remote_and_cap_from_config() {
    let mut sb = Sandbox::new();
    let (_bare, a, _run) = shared_run(&mut sb, 5);
    let scripts = sb.path().join("scripts");
    std::fs::write(
        scripts.join("default.script"),
        "run sh -c \"mkdir -p src/$ORCH_TASK && echo yes > src/$ORCH_TASK/done\"\n",
    )
    .expect("script");
    // `init --remote origin` set orch.remote; the cap is the project's.
    sb.git(&a, &["config", "orch.cap", "3"]);
    let exe = common::bin_dir().join("git-orch");
    let out = sb
        .command(&exe.to_string_lossy(), &a)
        .args(["worker", "--agent", "fake", "--once", "--poll", "0.2"])
        .output()
        .expect("worker runs");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("Worker on origin (cap 3,"),
        "{}",
        stderr(&out)
    );
    let me = sb.git(&a, &["config", "orch.writerId"]);
    let claims: Vec<serde_json::Value> = log(&sb, &a)
        .into_iter()
        .filter(|e| e["type"] == "claimed" && e["what"] != "_queue" && e["writer"] == me.as_str())
        .collect();
    assert_eq!(
        claims.len(),
        3,
        "one round claims up to the cap: {claims:?}"
    );
    // Without a remote anywhere: a usage error that says how to set one.
    let lone = sb.repo("lone");
    let out = sb
        .command(&exe.to_string_lossy(), &lone)
        .args(["worker", "--once"])
        .output()
        .expect("worker runs");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("orch.remote"), "{}", stderr(&out));
}

#[test]
fn a_driver_on_a_synced_clone_leaves_the_workers_run_and_its_live_attempts_alone() {
    let mut sb = Sandbox::new();
    let (bare, a, run) = shared_run(&mut sb, 1);
    let scripts = sb.path().join("scripts");
    // The worker's agent runs until the test has looked.
    let gate = sb.path().join("agent-may-finish");
    std::fs::write(
        scripts.join("default.script"),
        format!(
            "run sh -c \"while test ! -f '{}'; do sleep 0.05; done\"\nwrite src/t0/done yes\n",
            gate.display()
        ),
    )
    .expect("script");
    let b = clone(&sb, &bare, "b");
    let w = worker(&sb, &b, &["--agent", "fake", "--until-done"]);
    // Wait for the worker's attempt to be running, seen from a.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        sb.orch_ok(&a, &["sync"]);
        if log(&sb, &a)
            .iter()
            .any(|e| e["type"] == "attempt_started" && e["run_id"] == run.as_str())
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the worker never started its agent"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let alive = || !git_orch::process::find_by_env(&[("ORCH_RUN", run.as_str())]).is_empty();
    assert!(alive(), "the worker's agent is not running");
    // A `git orch run` of the plan on the starting clone does not drive
    // the workers' run: it says so, and touches nothing.
    let out = sb.orch(&a, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("worked by workers"),
        "{}",
        stderr(&out)
    );
    assert!(alive(), "the driver killed the worker's agent");
    sb.orch_ok(&a, &["sync"]);
    assert!(
        !log(&sb, &a)
            .iter()
            .any(|e| e["type"] == "attempt_finished" && e["outcome"] == "abandoned"),
        "an attempt of the worker was abandoned"
    );
    std::fs::write(&gate, "").expect("let the agent finish");
    let out = wait(w, Duration::from_secs(120));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// Three workers on one bare remote, thirty runs: every run finishes with
/// each task landed once. The runs go in three rows of ten, each row one
/// run after another on its own remote, the rows side by side: this is the
/// suite's longest test, and it comes last.
#[test]
fn three_workers_land_every_task_of_thirty_runs_exactly_once() {
    let reps: usize = std::env::var("ORCH_WORKER_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let rows = 3;
    let rows: Vec<_> = (0..rows)
        .map(|i| {
            let n = reps / rows + usize::from(i < reps % rows);
            std::thread::spawn(move || three_workers_land_runs_in_a_row(n))
        })
        .collect();
    for row in rows {
        if let Err(panic) = row.join() {
            std::panic::resume_unwind(panic);
        }
    }
}

/// `reps` runs of three tasks, one after another, each worked through by
/// three workers on one bare remote until it is done.
fn three_workers_land_runs_in_a_row(reps: usize) {
    if reps == 0 {
        return;
    }
    let mut sb = Sandbox::new();
    let (bare, a, _first) = shared_run(&mut sb, 3);
    let scripts = sb.path().join("scripts");
    std::fs::write(
        scripts.join("default.script"),
        "run sh -c \"mkdir -p src/$ORCH_TASK && echo $ORCH_RUN > src/$ORCH_TASK/done\"\n",
    )
    .expect("script");
    let b = clone(&sb, &bare, "b");
    let c = clone(&sb, &bare, "c");
    let args = ["--agent", "fake", "--cap", "2", "--until-done"];
    for rep in 0..reps {
        if rep > 0 {
            sb.orch_ok(&a, &["sync"]);
            sb.orch_ok(&a, &["run", "proj", "--start-only", "--redo-all"]);
            sb.orch_ok(&a, &["sync"]);
        }
        let run = log(&sb, &a)
            .iter()
            .rev()
            .find(|e| e["type"] == "run_started")
            .and_then(|e| e["run_id"].as_str())
            .expect("run")
            .to_owned();
        let workers: Vec<Child> = [&a, &b, &c].iter().map(|r| worker(&sb, r, &args)).collect();
        for w in workers {
            let out = wait(w, Duration::from_secs(120));
            assert_eq!(out.status.code(), Some(0), "rep {rep}: {}", stderr(&out));
        }
        sb.orch_ok(&a, &["sync"]);
        let evs = log(&sb, &a);
        for t in ["t0", "t1", "t2"] {
            let landed = evs
                .iter()
                .filter(|e| e["type"] == "landed" && e["run_id"] == run.as_str() && e["task"] == t)
                .count();
            let voided = evs
                .iter()
                .filter(|e| {
                    e["type"] == "landing_voided" && e["run_id"] == run.as_str() && e["task"] == t
                })
                .count();
            assert_eq!(
                landed - voided,
                1,
                "rep {rep}: {t} landed {landed}, voided {voided}"
            );
            assert_eq!(
                sb.git(&bare, &["show", &format!("main:src/{t}/done")]),
                run,
                "rep {rep}"
            );
        }
        assert!(
            evs.iter()
                .any(|e| e["type"] == "run_finished" && e["run_id"] == run.as_str()),
            "rep {rep}: the run did not finish"
        );
    }
}

/// The commit the newest `landed` event of `run` moved the target to.
fn landed_commit(sb: &Sandbox, repo: &Path, run: &str) -> String {
    log(sb, repo)
        .iter()
        .rev()
        .find(|e| e["type"] == "landed" && e["run_id"] == run)
        .and_then(|e| e["new"].as_str())
        .unwrap_or_else(|| panic!("run {run} landed nothing"))
        .to_owned()
}

#[test]
fn a_worker_never_completes_or_voids_another_clones_landing() {
    let mut sb = Sandbox::new();
    let (bare, a, run) = shared_run(&mut sb, 1);
    let scripts = sb.path().join("scripts");
    std::fs::write(scripts.join("t0.script"), "write src/t0/done yes\n").expect("script");
    std::fs::write(scripts.join("x.script"), "write other/done yes\n").expect("script");
    // Clone A runs a second plan with its own driver and lands it on its
    // own main, without pushing main; its log (and so the landing's
    // record) reaches the remote with `sync`.
    std::fs::create_dir_all(a.join("other")).expect("mkdir");
    std::fs::write(a.join("other/README"), "other\n").expect("write");
    sb.git(&a, &["add", "other"]);
    sb.git(&a, &["commit", "-q", "-m", "other"]);
    let plan = serde_json::json!({"version": 1, "id": "other", "instruction": "Other work",
        "subtasks": [{"id": "x", "title": "X", "owned_globs": ["other/**"],
            "deliverable": "x done", "verification": "test -f other/done", "depends_on": []}]});
    let plan_file = sb.path().join("other.json");
    std::fs::write(&plan_file, plan.to_string()).expect("plan");
    sb.orch_ok(&a, &["plan", "add", &plan_file.to_string_lossy()]);
    sb.orch_ok(&a, &["approve", "other"]);
    let out = sb.orch(&a, &["run", "other", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out)
            .contains("main has 2 commits that origin/main does not: `git push origin main`"),
        "the run says what is left to push: {}",
        stderr(&out)
    );
    let other_run = log(&sb, &a)
        .iter()
        .find(|e| e["type"] == "run_started" && e["plan_id"] == "other")
        .and_then(|e| e["run_id"].as_str())
        .expect("run")
        .to_owned();
    let a_landed = landed_commit(&sb, &a, &other_run);
    sb.orch_ok(&a, &["sync"]);
    // Clone B's worker lands the workers' run from the remote's main.
    let b = clone(&sb, &bare, "b");
    let out = wait(
        worker(&sb, &b, &["--agent", "fake", "--once"]),
        Duration::from_secs(120),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    landed_commit(&sb, &b, &run);
    // A's landing is A's: never voided, never pushed by B.
    let voided: Vec<serde_json::Value> = log(&sb, &b)
        .into_iter()
        .filter(|e| e["type"] == "landing_voided")
        .collect();
    assert!(voided.is_empty(), "{voided:?}");
    let on_remote = sb
        .command("git", &bare)
        .args(["merge-base", "--is-ancestor", &a_landed, "main"])
        .status()
        .expect("git");
    assert!(!on_remote.success(), "B pushed A's unpublished landing");
    // Back in A, its landing still verifies.
    sb.orch_ok(&a, &["sync"]);
    let out = sb.orch(&a, &["verify", &a_landed]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn a_run_for_workers_starts_only_from_a_published_base() {
    let mut sb = Sandbox::new();
    let p = project(&mut sb, &[("t0", &[], "true")], None);
    // No remote at all: nothing to share the run through.
    let before = sb.refs(&p.repo);
    let out = sb.orch(&p.repo, &["run", "proj", "--start-only"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("init --remote"), "{}", stderr(&out));
    assert_eq!(sb.refs(&p.repo), before, "a refused start wrote state");
    // A remote, and a commit on main nobody pushed.
    common::share(&sb, &p.repo);
    std::fs::write(p.repo.join("src/t0/local"), "local\n").expect("write");
    sb.git(&p.repo, &["add", "src/t0/local"]);
    sb.git(&p.repo, &["commit", "-q", "-m", "local only"]);
    let before = sb.refs(&p.repo);
    let out = sb.orch(&p.repo, &["run", "proj", "--start-only"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("push `main` first (`git push origin main`)"),
        "{}",
        stderr(&out)
    );
    // Only remote-tracking copies may change: a start syncs first, to see
    // other clones' runs, and fetches the remote's main.
    let own = |refs: String| -> Vec<String> {
        refs.lines()
            .filter(|l| !l.starts_with("refs/remotes/") && !l.starts_with("refs/orch-remotes/"))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(
        own(sb.refs(&p.repo)),
        own(before),
        "a refused start wrote state"
    );
    // Pushed, it starts, published at once: the next step is the workers,
    // not a sync.
    sb.git(&p.repo, &["push", "-q", "origin", "main"]);
    let out = sb.orch(&p.repo, &["run", "proj", "--start-only"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("is recorded and published to origin")
            && stderr(&out).contains("`git orch worker --remote origin`")
            && !stderr(&out).contains("git orch sync"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_driver_run_with_push_publishes_its_landings_and_their_records() {
    let mut sb = Sandbox::new();
    let p = project(&mut sb, &[("t0", &[], "test -f src/t0/done")], None);
    p.script("t0", "write src/t0/done yes\n");
    // --push needs a remote to push to.
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake", "--push"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("init --remote"), "{}", stderr(&out));
    let bare = common::share(&sb, &p.repo);
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake", "--push"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("Pushed main to origin"),
        "{}",
        stderr(&out)
    );
    let tip = sb.git(&p.repo, &["rev-parse", "main"]);
    assert_eq!(sb.git(&bare, &["rev-parse", "main"]), tip);
    // Another clone verifies the landing from the records alone.
    let b = clone(&sb, &bare, "b");
    sb.orch_ok(&b, &["sync"]);
    let out = sb.orch(&b, &["verify", &tip]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn a_worker_until_done_fails_when_its_run_ended_with_failed_tasks() {
    let mut sb = Sandbox::new();
    let (_bare, a, run) = shared_run(&mut sb, 2);
    let scripts = sb.path().join("scripts");
    std::fs::write(scripts.join("t0.script"), "write src/t0/done yes\n").expect("script");
    // t1's agent never does its work: every attempt fails its gate.
    std::fs::write(scripts.join("t1.script"), "write src/t1/other yes\n").expect("script");
    let out = wait(
        worker(&sb, &a, &["--agent", "fake", "--until-done"]),
        Duration::from_secs(180),
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("run {run} ended with 1 done, 1 failed")),
        "{}",
        stderr(&out)
    );
    // A retry of a workers' run names what works for it.
    let out = sb.orch(&a, &["retry", "t1", "--run", &run]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let said = stderr(&out);
    assert!(said.contains("git orch worker"), "{said}");
    assert!(
        !said.contains("git orch run"),
        "a hint that cannot work: {said}"
    );
}

/// Waits until `writer` (in the clone `repo`) has started an attempt and
/// returns the process groups of the attempts it started (each > 1).
fn started_by(sb: &Sandbox, repo: &Path, writer: &str) -> Vec<i32> {
    let start = Instant::now();
    loop {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "{writer} never started an attempt"
        );
        let started: Vec<i32> = log(sb, repo)
            .iter()
            .filter(|e| e["type"] == "attempt_started" && e["writer"] == writer)
            .filter_map(|e| e["pgid"].as_i64())
            .filter_map(|p| i32::try_from(p).ok())
            .filter(|p| *p > 1)
            .collect();
        if !started.is_empty() {
            return started;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The ref lock files in `git_dir`: `packed-refs.lock` and any
/// `refs/**/*.lock`.
fn ref_locks(git_dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let packed = git_dir.join("packed-refs.lock");
    if packed.exists() {
        out.push(packed);
    }
    let mut folders = vec![git_dir.join("refs")];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "lock") {
                out.push(path);
            }
        }
    }
    out
}

/// Stops (`SIGSTOP`) or resumes (`SIGCONT`) one process, by its own pid:
/// a worker frozen as a machine that hangs would be.
fn signal(child: &Child, sig: libc::c_int) {
    let pid = i32::try_from(child.id()).expect("pid");
    assert!(pid > 1);
    // SAFETY: a signal to one process this test started.
    assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
}

#[test]
fn workers_outlive_a_flaky_remote_and_a_killed_and_a_frozen_worker() {
    let mut sb = Sandbox::new();
    let (bare, a, run) = shared_run(&mut sb, 12);
    let scripts = sb.path().join("scripts");
    std::fs::write(
        scripts.join("default.script"),
        "sleep 0.3\nrun sh -c \"mkdir -p src/$ORCH_TASK && echo yes > src/$ORCH_TASK/done\"\n",
    )
    .expect("script");
    // The remote refuses 30% of all pushes (claims, landings, syncs) in
    // its pre-receive hook, before git-orch's own server hook, which it
    // chains.
    let flaky = bare.join("hooks/pre-receive");
    std::fs::write(
        &flaky,
        "#!/bin/sh\ncat >/dev/null\nr=$(od -An -N1 -tu1 /dev/urandom | tr -d ' ')\nif [ \"$r\" -lt 77 ]; then echo 'flaky: try again later' >&2; exit 1; fi\nexit 0\n",
    )
    .expect("hook");
    let mut perms = std::fs::metadata(&flaky).expect("meta").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&flaky, perms).expect("chmod");
    let bare_str = bare.to_string_lossy().into_owned();
    sb.orch_ok(&a, &["-C", &bare_str, "hooks", "install", "--server"]);
    let b = clone(&sb, &bare, "b");
    let c = clone(&sb, &bare, "c");
    let args = [
        "--agent",
        "fake",
        "--cap",
        "2",
        "--until-done",
        "--lease",
        "3",
    ];
    // C starts first and is killed (SIGKILL) once it has started an
    // attempt; its agents go with it (their group, read from the log,
    // checked > 1).
    let mut wc = worker(&sb, &c, &args);
    let c_writer = sb.git(&c, &["config", "orch.writerId"]);
    for pgid in started_by(&sb, &c, &c_writer) {
        // SAFETY: a group id the log recorded for C's own agents.
        unsafe { libc::killpg(pgid, libc::SIGKILL) };
    }
    wc.kill().expect("kill -9");
    let _ = wc.wait();
    // Killed in the middle of a ref update, C leaves its lock file, which
    // stops every later update there (git's own and git-orch's, which
    // names it): a person removes it as the message says, once git's
    // maintenance, which C may have started, is done.
    let git_dir = c.join(".git");
    common::wait_until_quiet(&[
        git_dir.join("objects/maintenance.lock"),
        git_dir.join("gc.pid"),
    ]);
    for lock in ref_locks(&git_dir) {
        eprintln!("the kill left {}", lock.display());
        std::fs::remove_file(&lock).expect("remove the lock");
    }
    let wa = worker(&sb, &a, &args);
    let wb = worker(&sb, &b, &args);
    // B freezes in the middle of an attempt, past its lease, and wakes up;
    // the remote is out of reach for 5 seconds meanwhile.
    let b_writer = sb.git(&b, &["config", "orch.writerId"]);
    started_by(&sb, &b, &b_writer);
    signal(&wb, libc::SIGSTOP);
    let away = sb.path().join("remote.away");
    std::fs::rename(&bare, &away).expect("remote goes away");
    std::thread::sleep(Duration::from_secs(5));
    std::fs::rename(&away, &bare).expect("remote comes back");
    std::thread::sleep(Duration::from_secs(2));
    signal(&wb, libc::SIGCONT);
    // Every worker left ends by itself.
    for (name, w) in [("a", wa), ("b", wb)] {
        let out = wait(w, Duration::from_secs(400));
        assert_eq!(
            out.status.code(),
            Some(0),
            "worker {name}: {}",
            stderr(&out)
        );
    }
    // Every task landed exactly once, in every clone's view of the log.
    std::fs::remove_file(bare.join("hooks/pre-receive.orch-chained")).expect("calm remote");
    for r in [&a, &b, &c] {
        sb.orch_ok(r, &["sync"]);
    }
    for r in [&a, &b, &c] {
        let events = log(&sb, r);
        for i in 0..12 {
            let task = format!("t{i}");
            let landed: Vec<&serde_json::Value> = events
                .iter()
                .filter(|e| {
                    e["type"] == "landed"
                        && e["run_id"] == run.as_str()
                        && e["task"] == task.as_str()
                })
                .collect();
            let voided = events
                .iter()
                .filter(|e| e["type"] == "landing_voided" && e["task"] == task.as_str())
                .count();
            assert_eq!(
                landed.len() - voided,
                1,
                "{}: {task} landed {landed:?}",
                r.display()
            );
        }
        let out = sb.orch(r, &["fsck"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}: {}{}",
            r.display(),
            stdout(&out),
            stderr(&out)
        );
    }
    for i in 0..12 {
        sb.git(&bare, &["cat-file", "-e", &format!("main:src/t{i}/done")]);
    }
}

#[test]
fn a_lander_frozen_past_its_lease_never_publishes_a_second_landing() {
    let mut sb = Sandbox::new();
    let (bare, a, run) = shared_run(&mut sb, 1);
    let commits: u32 = sb
        .git(&bare, &["rev-list", "--count", "main"])
        .parse()
        .expect("count");
    let scripts = sb.path().join("scripts");
    std::fs::write(scripts.join("t0.script"), "write src/t0/done yes\n").expect("script");
    // B runs t0 and stops exactly where its landing would publish; there
    // it freezes, past its 2-second lease.
    let b = clone(&sb, &bare, "b");
    let (wb, at) = worker_stopping_at(
        &sb,
        &b,
        &["--agent", "fake", "--until-done", "--lease", "2"],
        "land.publish",
    );
    signal(&wb, libc::SIGSTOP);
    // A takes the queue over once B's lease runs out, and lands t0.
    let out = wait(
        worker(
            &sb,
            &a,
            &["--agent", "fake", "--until-done", "--lease", "2"],
        ),
        Duration::from_secs(120),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // B wakes up where it stopped: it must not publish.
    std::fs::remove_file(&at).expect("release the failpoint");
    signal(&wb, libc::SIGCONT);
    let out = wait(wb, Duration::from_secs(120));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("taken over"), "{}", stderr(&out));
    for r in [&a, &b] {
        sb.orch_ok(r, &["sync"]);
        let landed = log(&sb, r)
            .iter()
            .filter(|e| e["type"] == "landed" && e["run_id"] == run.as_str())
            .count();
        assert_eq!(landed, 1, "{}", r.display());
    }
    let after: u32 = sb
        .git(&bare, &["rev-list", "--count", "main"])
        .parse()
        .expect("count");
    assert_eq!(after, commits + 1, "one landing on the remote's main");
}

/// Starts a worker armed with one failpoint (`<failpoint>=wait`) and
/// waits until it stands there: the worker, and the file whose removal
/// lets it go on.
fn worker_stopping_at(
    sb: &Sandbox,
    repo: &Path,
    extra: &[&str],
    failpoint: &str,
) -> (Child, PathBuf) {
    let at = sb.path().join(format!("failpoint-{failpoint}"));
    let exe = common::bin_dir().join("git-orch");
    let child = sb
        .command(&exe.to_string_lossy(), repo)
        .args(["worker", "--remote", "origin", "--poll", "0.2"])
        .args(extra)
        .env("ORCH_FAILPOINTS", format!("{failpoint}=wait"))
        .env("ORCH_FAILPOINT_FILE", &at)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("worker starts");
    let start = Instant::now();
    while !at.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "never reached {failpoint}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    (child, at)
}

/// B reads the queue while A, whose lease ran out, is about to publish
/// t0's landing; A publishes (nobody claimed the queue since), then B
/// claims it and lands from its older view of the log. The target then
/// holds A's landing of t0, which B took for a landing of its own whose
/// record a crash had lost, and recorded a second time.
#[test]
fn a_landing_published_after_the_queue_was_read_is_never_recorded_twice() {
    let mut sb = Sandbox::new();
    let (bare, a, run) = shared_run(&mut sb, 1);
    let scripts = sb.path().join("scripts");
    std::fs::write(scripts.join("t0.script"), "write src/t0/done yes\n").expect("script");
    let args = ["--agent", "fake", "--until-done", "--lease", "2"];
    let (wa, at_a) = worker_stopping_at(&sb, &a, &args, "land.publish");
    signal(&wa, libc::SIGSTOP);
    // B reaches the failpoint only once it found A's claim free: past
    // A's lease.
    let b = clone(&sb, &bare, "b");
    let (wb, at_b) = worker_stopping_at(&sb, &b, &args, "worker.claim-queue");
    std::fs::remove_file(&at_a).expect("release A");
    signal(&wa, libc::SIGCONT);
    let out = wait(wa, Duration::from_secs(120));
    assert_eq!(out.status.code(), Some(0), "A: {}", stderr(&out));
    std::fs::remove_file(&at_b).expect("release B");
    let out = wait(wb, Duration::from_secs(120));
    assert_eq!(out.status.code(), Some(0), "B: {}", stderr(&out));
    for r in [&a, &b] {
        sb.orch_ok(r, &["sync"]);
        let landed: Vec<serde_json::Value> = log(&sb, r)
            .into_iter()
            .filter(|e| e["type"] == "landed" && e["run_id"] == run.as_str())
            .collect();
        assert_eq!(landed.len(), 1, "{}: {landed:?}", r.display());
    }
}

#[test]
fn a_worker_once_whose_landing_is_refused_ends_and_says_it_once() {
    let mut sb = Sandbox::new();
    let (bare, _a, _run) = shared_run(&mut sb, 1);
    let scripts = sb.path().join("scripts");
    std::fs::write(scripts.join("t0.script"), "write src/t0/done yes\n").expect("script");
    let b = clone(&sb, &bare, "b");
    // An untracked file in B's checkout where the landing would write.
    common::block_landings(&b);
    let out = wait(
        worker(&sb, &b, &["--agent", "fake", "--once"]),
        Duration::from_secs(120),
    );
    let said = stderr(&out);
    let refusals = said.matches("not working it here").count();
    assert!(
        (1..=2).contains(&refusals),
        "the refusal said {refusals} times: {said}"
    );
    common::unblock_landings(&b);
}
