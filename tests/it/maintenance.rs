//! Nothing lost, nothing stuck (issue 25): git-orch beside git's own
//! maintenance, and after a crash that loses writes.
//!
//! * `git gc`, `git gc --prune=now`, `git prune`, `git prune
//!   --expire=2.weeks.ago`, `git repack -d`, `git repack -a -d` and
//!   `git maintenance run`, each looped back to back beside a 12-task run
//!   (`beside_a_run_*`): the run succeeds, every task lands exactly once
//!   and both `git orch fsck` and `git fsck --full` are clean.
//!   `ORCH_MAINTENANCE_TRIALS` sets the trials per command (default 1, a
//!   few seconds each); the issue's acceptance is ten of each:
//!   `ORCH_MAINTENANCE_TRIALS=10 cargo test --test it maintenance::beside_a_run`.
//!   `ORCH_MAINTENANCE_TASKS` changes the run's size (default 12).
//! * A prune that runs exactly between an append writing its objects and
//!   moving the log (failpoint `append.objects-written`), and one while a
//!   merge-queue candidate waits to be gated (failpoint `land.built`).
//! * Power loss, simulated by what it leaves on ext4 without fsync: loose
//!   objects and ref files of zero length. Every command says to run
//!   `git orch fsck --repair`, fsck itself runs and names the damage, the
//!   repair restores the clone and says what it restored and what was
//!   lost, and the run then resumes and lands every task exactly once.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use common::*;

/// This clone's writer id.
fn writer(sb: &Sandbox, repo: &Path) -> String {
    sb.git(repo, &["config", "orch.writerId"])
}

/// Where git keeps the loose object `id` of `repo`.
fn loose(repo: &Path, id: &str) -> PathBuf {
    repo.join(".git/objects").join(&id[..2]).join(&id[2..])
}

/// Cuts a file to zero length, as a power loss does to a file whose
/// data never reached the disk while its name did.
fn truncate(path: &Path) {
    assert!(path.is_file(), "{} is not there", path.display());
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    std::fs::File::create(path).expect("truncate");
}

/// How many events of `kind` the log holds for `task`, landings voided
/// later taken off.
fn landed(evs: &[serde_json::Value], task: &str) -> usize {
    let count = |kind: &str| {
        evs.iter()
            .filter(|e| e["type"] == kind && e["task"] == task)
            .count()
    };
    count("landed") - count("landing_voided")
}

/// Asserts every task of `tasks` landed exactly once on `main`.
fn assert_landed_once(sb: &Sandbox, repo: &Path, tasks: &[String], what: &str) {
    let evs = events(sb, repo);
    for t in tasks {
        assert_eq!(landed(&evs, t), 1, "{what}: {t} did not land exactly once");
        assert_eq!(
            sb.git(repo, &["show", &format!("main:src/{t}/done")]),
            "once",
            "{what}"
        );
    }
}

/// `git orch fsck --json`: its exit code and report.
fn fsck_json(sb: &Sandbox, repo: &Path) -> (Option<i32>, serde_json::Value) {
    let out = sb.orch(repo, &["fsck", "--json"]);
    let json = serde_json::from_str(stdout(&out).trim())
        .unwrap_or_else(|e| panic!("fsck --json: {e}\n{}\n{}", stdout(&out), stderr(&out)));
    (out.status.code(), json)
}

/// A project of `n` independent tasks, each writing `src/<t>/done`.
fn tasks_project(sb: &mut Sandbox, n: usize, config: Option<&str>) -> (Project, Vec<String>) {
    let ids: Vec<String> = (0..n).map(|i| format!("t{i:02}")).collect();
    let verify: Vec<String> = ids
        .iter()
        .map(|t| format!("test -f src/{t}/done"))
        .collect();
    let tasks: Vec<(&str, &[&str], &str)> = ids
        .iter()
        .zip(&verify)
        .map(|(t, v)| (t.as_str(), &[][..], v.as_str()))
        .collect();
    let p = project(sb, &tasks, config);
    for t in &ids {
        p.script(t, &format!("write src/{t}/done once\n"));
    }
    (p, ids)
}

#[test]
fn a_prune_between_an_appends_objects_and_its_ref_loses_nothing() {
    let sb = Sandbox::new();
    let repo = sb.repo("r");
    sb.orch_ok(
        &repo,
        &["debug", "append", "--label", "before", "--count", "3"],
    );
    let gate = sb.path().join("gate");
    let held = sb
        .command("git-orch", &repo)
        .args(["debug", "append", "--label", "raced"])
        .env("ORCH_FAILPOINTS", "append.objects-written=wait")
        .env("ORCH_FAILPOINT_FILE", &gate)
        .spawn()
        .expect("append");
    wait_until(
        "the append to write its objects",
        Duration::from_secs(30),
        || gate.exists(),
    );
    // The append's blob, trees and commit exist and nothing reaches them
    // yet: exactly what a prune beside a run deletes.
    let doomed = sb.git(&repo, &["prune", "--dry-run", "--expire=now"]);
    assert!(
        doomed.lines().count() >= 3,
        "the append wrote nothing to prune: {doomed:?}"
    );
    sb.git(&repo, &["prune", "--expire=now"]);
    std::fs::remove_file(&gate).expect("let the append go");
    let out = held.wait_with_output().expect("append ends");
    assert!(out.status.success(), "{}", stderr(&out));
    let labels: Vec<String> = events(&sb, &repo)
        .iter()
        .map(|e| e["label"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(labels, ["before", "before", "before", "raced"]);
    let (code, report) = fsck_json(&sb, &repo);
    assert_eq!(code, Some(0), "{report:#}");
}

/// A landing's candidate is a commit nothing names until it lands; the
/// queue checks it out and gates it for as long as the gates take. Here a
/// failpoint holds the queue just after building it while another task's
/// attempt records its result (so the candidate's objects are no longer
/// this process's newest), past the journal's grace period; then
/// `git prune` runs. Without the pin the prune took the candidate and the
/// landing failed on a missing commit.
#[test]
fn a_prune_while_a_candidate_waits_for_its_gates_loses_nothing() {
    let mut sb = Sandbox::new();
    let (p, ids) = tasks_project(&mut sb, 2, None);
    p.script("t01", "sleep 2\nwrite src/t01/done once\n");
    let gate = sb.path().join("gate");
    let run = sb
        .command("git-orch", &p.repo)
        .args(["run", "proj", "--agent", "fake", "--cap", "2"])
        .env("ORCH_FAILPOINTS", "land.built=wait@1")
        .env("ORCH_FAILPOINT_FILE", &gate)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run");
    wait_until(
        "t00's candidate to be built",
        Duration::from_secs(60),
        || gate.exists(),
    );
    wait_until("t01's attempt to finish", Duration::from_secs(60), || {
        events(&sb, &p.repo)
            .iter()
            .any(|e| e["type"] == "attempt_finished" && e["task"] == "t01")
    });
    // Past the grace period in which the journal writes again what a
    // prune takes.
    std::thread::sleep(Duration::from_millis(2500));
    sb.git(&p.repo, &["prune", "--expire=now"]);
    std::fs::remove_file(&gate).expect("let the queue go");
    let out = run.wait_with_output().expect("run ends");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_landed_once(&sb, &p.repo, &ids, "a prune beside a gated candidate");
    let (code, report) = fsck_json(&sb, &p.repo);
    assert_eq!(code, Some(0), "{report:#}");
    // The pin went with the process.
    assert_eq!(
        sb.git(&p.repo, &["for-each-ref", "refs/orch-pins/"]),
        "",
        "a pin outlived its process"
    );
}

/// A landing killed with its candidate pinned leaves the pin: fsck
/// notes it (it fails nothing), `--repair` removes it, and the run
/// resumes and lands each task once.
#[test]
fn a_pin_left_by_a_killed_landing_is_noted_and_removed() {
    let mut sb = Sandbox::new();
    let (p, ids) = tasks_project(&mut sb, 1, None);
    let killed = sb
        .command("git-orch", &p.repo)
        .args(["run", "proj", "--agent", "fake"])
        .env("ORCH_FAILPOINTS", "land.built=kill@1")
        .output()
        .expect("run");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(killed.status.signal(), Some(9), "{}", stderr(&killed));
    let pins = sb.git(
        &p.repo,
        &["for-each-ref", "--format=%(refname)", "refs/orch-pins/"],
    );
    assert_eq!(pins.lines().count(), 1, "{pins:?}");
    let (_, report) = fsck_json(&sb, &p.repo);
    let noted: Vec<&serde_json::Value> = report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["check"] == "pins")
        .collect();
    assert_eq!(noted.len(), 1, "{report:#}");
    assert_eq!(noted[0]["severity"], "note", "{report:#}");
    assert_eq!(noted[0]["subject"], pins.trim(), "{report:#}");
    let out = sb.orch(&p.repo, &["fsck", "--repair"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("removed {}", pins.trim())),
        "{}",
        stderr(&out)
    );
    assert_eq!(sb.git(&p.repo, &["for-each-ref", "refs/orch-pins/"]), "");
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_landed_once(&sb, &p.repo, &ids, "after the killed landing");
    let (code, report) = fsck_json(&sb, &p.repo);
    assert_eq!(code, Some(0), "{report:#}");
}

/// The target moves between a landing's record and its move (here a
/// person commits on main; beside `git gc` a replaced packed-refs did
/// it): the landing is voided and the person's checkout is left alone,
/// then the next round lands on the new tip. Before, the checkout was
/// moved to the candidate anyway and the next round refused to land
/// over "files you have changed".
#[test]
fn a_target_moved_under_a_landing_leaves_the_checkout_alone() {
    let mut sb = Sandbox::new();
    let (p, ids) = tasks_project(&mut sb, 1, None);
    let gate = sb.path().join("gate");
    let run = sb
        .command("git-orch", &p.repo)
        .args(["run", "proj", "--agent", "fake"])
        .env("ORCH_FAILPOINTS", "land.recorded=wait@1")
        .env("ORCH_FAILPOINT_FILE", &gate)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run");
    wait_until(
        "the landing to be recorded",
        Duration::from_secs(60),
        || gate.exists(),
    );
    std::fs::write(p.repo.join("NOTES.md"), "a person's commit\n").expect("write");
    sb.git(&p.repo, &["add", "NOTES.md"]);
    sb.git(
        &p.repo,
        &[
            "-c",
            "user.name=Person",
            "-c",
            "user.email=person@example.com",
            "commit",
            "-q",
            "-m",
            "a person's commit",
        ],
    );
    std::fs::remove_file(&gate).expect("let the landing go");
    let out = run.wait_with_output().expect("run ends");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_landed_once(&sb, &p.repo, &ids, "after the target moved");
    assert_eq!(
        sb.git(&p.repo, &["status", "--porcelain"]),
        "",
        "the checkout of main is not main"
    );
    let (code, report) = fsck_json(&sb, &p.repo);
    assert_eq!(code, Some(0), "{report:#}");
}

#[test]
fn a_log_tip_whose_objects_are_gone_names_the_ref_and_the_repair() {
    let sb = Sandbox::new();
    let repo = sb.repo("r");
    sb.orch_ok(
        &repo,
        &["debug", "append", "--label", "kept", "--count", "2"],
    );
    sb.orch_ok(&repo, &["debug", "append", "--label", "lost"]);
    let reference = format!("refs/orch/log/{}", writer(&sb, &repo));
    let tip = sb.git(&repo, &["rev-parse", &reference]);
    let before = sb.git(&repo, &["rev-parse", &format!("{tip}^")]);
    // What a prune beside the append did before this fix: the tip commit
    // is gone, the ref still names it.
    std::fs::remove_file(loose(&repo, &tip)).expect("remove the tip commit");
    for args in [&["status"][..], &["log"], &["debug", "append"]] {
        let out = sb.orch(&repo, args);
        assert!(!out.status.success(), "{args:?} succeeded");
        let err = stderr(&out);
        assert!(
            err.contains(&reference),
            "{args:?} does not name the ref: {err}"
        );
        assert!(
            err.contains("git orch fsck --repair"),
            "{args:?} does not name the repair: {err}"
        );
        assert!(!err.contains("could not peel"), "{args:?}: {err}");
    }
    let (code, report) = fsck_json(&sb, &repo);
    assert_eq!(code, Some(3), "{report:#}");
    assert!(report.to_string().contains(&reference), "{report:#}");
    let out = sb.orch(&repo, &["fsck", "--repair"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains(&format!("restored {reference}")) && err.contains(&before[..12]),
        "{err}"
    );
    assert!(err.contains("lost"), "{err}");
    let labels: Vec<String> = events(&sb, &repo)
        .iter()
        .map(|e| e["label"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(labels, ["kept", "kept"]);
    // Appending works again, from the restored tip.
    sb.orch_ok(&repo, &["debug", "append", "--label", "after"]);
    assert_eq!(events(&sb, &repo).len(), 3);
}

/// The commands a person runs on a clone after a crash; each must stop
/// with the way out, not a raw error from deep inside.
fn assert_every_command_names_the_repair(sb: &Sandbox, repo: &Path, what: &str) {
    for args in [
        &["status"][..],
        &["log"],
        &["run", "proj", "--agent", "fake"],
    ] {
        let out = sb.orch(repo, args);
        let err = stderr(&out);
        assert!(!out.status.success(), "{what}: {args:?} succeeded: {err}");
        assert!(
            err.contains("git orch fsck --repair"),
            "{what}: {args:?} does not name the repair: {err}"
        );
    }
    // fsck itself runs and names what is damaged.
    let out = sb.orch(repo, &["fsck"]);
    assert_eq!(out.status.code(), Some(3), "{what}: {}", stderr(&out));
    assert!(
        stdout(&out).contains("--repair"),
        "{what}: {}{}",
        stdout(&out),
        stderr(&out)
    );
}

#[test]
fn power_loss_after_a_run_empty_tip_objects_are_repaired_and_the_run_resumes() {
    let mut sb = Sandbox::new();
    let (p, ids) = tasks_project(&mut sb, 3, None);
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let reference = format!("refs/orch/log/{}", writer(&sb, &p.repo));
    let tip = sb.git(&p.repo, &["rev-parse", &reference]);
    // The newest operation's commit, root tree and event blobs reached
    // the disk as names without data.
    let mut newest = vec![
        tip.clone(),
        sb.git(&p.repo, &["rev-parse", &format!("{tip}^{{tree}}")]),
    ];
    for line in sb
        .git(
            &p.repo,
            &[
                "diff-tree",
                "-r",
                "--no-commit-id",
                &format!("{tip}^"),
                &tip,
            ],
        )
        .lines()
    {
        newest.push(line.split_whitespace().nth(3).expect("blob").to_owned());
    }
    for id in &newest {
        truncate(&loose(&p.repo, id));
    }
    assert_every_command_names_the_repair(&sb, &p.repo, "empty tip objects");
    let (code, report) = fsck_json(&sb, &p.repo);
    assert_eq!(code, Some(3), "{report:#}");
    assert!(report.to_string().contains(&reference), "{report:#}");
    let out = sb.orch(&p.repo, &["fsck", "--repair"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{}{err}", stdout(&out));
    assert!(err.contains(&format!("restored {reference}")), "{err}");
    assert!(err.contains("lost"), "{err}");
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(status_json(&sb, &p.repo)["state"], "finished");
    assert_landed_once(&sb, &p.repo, &ids, "after the repair");
    let (code, report) = fsck_json(&sb, &p.repo);
    assert_eq!(code, Some(0), "{report:#}");
}

/// The issue's crash: a run SIGKILLed just after its second landing moved
/// the target, then what a power loss leaves of the newest writes: the
/// log tip's commit, tree and event blobs of zero length, and the log's
/// and the target's ref files of zero length. fsck --repair restores the
/// clone and names what it restored; the resumed run lands each task
/// exactly once.
#[test]
fn power_loss_after_a_killed_landing_is_repaired_and_each_task_lands_once() {
    let mut sb = Sandbox::new();
    let (p, ids) = tasks_project(&mut sb, 3, None);
    let killed = sb
        .command("git-orch", &p.repo)
        .args(["run", "proj", "--agent", "fake", "--cap", "1"])
        .env("ORCH_FAILPOINTS", "land.moved=kill@2")
        .output()
        .expect("run");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(killed.status.signal(), Some(9), "{}", stderr(&killed));
    let reference = format!("refs/orch/log/{}", writer(&sb, &p.repo));
    let tip = sb.git(&p.repo, &["rev-parse", &reference]);
    let mut newest = vec![
        tip.clone(),
        sb.git(&p.repo, &["rev-parse", &format!("{tip}^{{tree}}")]),
    ];
    for line in sb
        .git(
            &p.repo,
            &[
                "diff-tree",
                "-r",
                "--no-commit-id",
                &format!("{tip}^"),
                &tip,
            ],
        )
        .lines()
    {
        newest.push(line.split_whitespace().nth(3).expect("blob").to_owned());
    }
    for id in &newest {
        truncate(&loose(&p.repo, id));
    }
    for r in [reference.as_str(), "refs/heads/main"] {
        truncate(&p.repo.join(".git").join(r));
    }
    assert_every_command_names_the_repair(&sb, &p.repo, "after a killed landing");
    let out = sb.orch(&p.repo, &["fsck", "--repair"]);
    let err = stderr(&out);
    assert!(
        [Some(0), Some(3)].contains(&out.status.code()),
        "{}{err}",
        stdout(&out)
    );
    for r in [reference.as_str(), "refs/heads/main"] {
        assert!(err.contains(&format!("restored {r}")), "{r}: {err}");
    }
    // Nothing damaged is left. The landing that moved main lost its
    // record with the log's tip: fsck names it and says the resume
    // records it; the scratch checkout is the kill's, for the next run.
    let (_, report) = fsck_json(&sb, &p.repo);
    let main_tip = sb.git(&p.repo, &["rev-parse", "main"]);
    for f in report["findings"].as_array().expect("findings") {
        match f["check"].as_str().unwrap_or_default() {
            "scratch" => {}
            "landings" => {
                assert_eq!(f["subject"], main_tip[..12], "{report:#}");
                assert!(
                    f["message"]
                        .as_str()
                        .unwrap_or_default()
                        .contains("no record is left")
                        && f["fix"]
                            .as_str()
                            .unwrap_or_default()
                            .contains("git orch run proj"),
                    "{report:#}"
                );
            }
            _ => panic!("{report:#}"),
        }
    }
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(status_json(&sb, &p.repo)["state"], "finished");
    assert_landed_once(&sb, &p.repo, &ids, "after the repair");
    // Each task's change is on main once.
    for t in &ids {
        let touching = sb.git(
            &p.repo,
            &["log", "--format=%H", "main", "--", &format!("src/{t}/done")],
        );
        assert_eq!(touching.lines().count(), 1, "{t}: {touching}");
    }
    let (code, report) = fsck_json(&sb, &p.repo);
    assert_eq!(code, Some(0), "{report:#}");
}

#[test]
fn power_loss_mid_run_zero_length_refs_are_repaired_and_the_run_resumes() {
    let mut sb = Sandbox::new();
    let (p, ids) = tasks_project(&mut sb, 3, None);
    let killed = sb
        .command("git-orch", &p.repo)
        .args(["run", "proj", "--agent", "fake", "--cap", "1"])
        .env("ORCH_FAILPOINTS", "attempt.result-recorded=kill@2")
        .output()
        .expect("run");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(killed.status.signal(), Some(9), "{}", stderr(&killed));
    let reference = format!("refs/orch/log/{}", writer(&sb, &p.repo));
    let branches = sb.git(
        &p.repo,
        &["for-each-ref", "--format=%(refname)", "refs/heads/orch/"],
    );
    let branch = branches
        .lines()
        .last()
        .expect("an attempt branch")
        .to_owned();
    for r in [&reference, &branch] {
        truncate(&p.repo.join(".git").join(r));
    }
    assert_every_command_names_the_repair(&sb, &p.repo, "zero-length refs");
    let (code, report) = fsck_json(&sb, &p.repo);
    assert_eq!(code, Some(3), "{report:#}");
    for r in [&reference, &branch] {
        assert!(report.to_string().contains(r.as_str()), "{r}: {report:#}");
    }
    let out = sb.orch(&p.repo, &["fsck", "--repair"]);
    let err = stderr(&out);
    for r in [&reference, &branch] {
        assert!(err.contains(&format!("restored {r}")), "{r}: {err}");
    }
    // What the kill itself left (a scratch checkout, a worktree removed
    // and not yet recorded) is the next run's to settle; nothing damaged
    // remains.
    let (_, report) = fsck_json(&sb, &p.repo);
    for f in report["findings"].as_array().expect("findings") {
        assert!(
            ["scratch", "worktrees"].contains(&f["check"].as_str().unwrap_or_default()),
            "{report:#}"
        );
    }
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_landed_once(&sb, &p.repo, &ids, "after the repair");
    let (code, report) = fsck_json(&sb, &p.repo);
    assert_eq!(code, Some(0), "{report:#}");
}

/// Trials per maintenance command: `ORCH_MAINTENANCE_TRIALS`, default 1.
fn trials() -> usize {
    std::env::var("ORCH_MAINTENANCE_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
}

/// Tasks of the run beside the maintenance: `ORCH_MAINTENANCE_TASKS`,
/// default the issue's 12.
fn maintenance_tasks() -> usize {
    std::env::var("ORCH_MAINTENANCE_TASKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12)
}

/// `git <command>` looped, back to back, beside a run of
/// [`maintenance_tasks`] tasks (four at a time), [`trials`] times: the run
/// succeeds, every task lands exactly once, and `git orch fsck` and
/// `git fsck --full` are clean.
fn looped_beside_a_run(command: &[&str]) {
    for trial in 0..trials() {
        let what = format!("git {} (trial {})", command.join(" "), trial + 1);
        let mut sb = Sandbox::new();
        let (p, ids) = tasks_project(&mut sb, maintenance_tasks(), None);
        let stop = Arc::new(AtomicBool::new(false));
        let rounds = Arc::new(AtomicUsize::new(0));
        let looper = {
            let (stop, rounds) = (stop.clone(), rounds.clone());
            let mut git = sb.command("git", &p.repo);
            git.args(command)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    // Its failures (a lock git-orch holds for a moment)
                    // are git's business; it runs again at once.
                    let _ = git.status();
                    rounds.fetch_add(1, Ordering::SeqCst);
                }
            })
        };
        let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake", "--cap", "4"]);
        let during = rounds.load(Ordering::SeqCst);
        stop.store(true, Ordering::SeqCst);
        looper.join().expect("maintenance loop");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{what}: {}\n{}",
            stderr(&out),
            objects_named(&sb, &p.repo, &stderr(&out))
        );
        assert!(during >= 2, "{what}: the maintenance ran {during} times");
        eprintln!("{what}: {during} rounds beside the run");
        assert_landed_once(&sb, &p.repo, &ids, &what);
        let (code, report) = fsck_json(&sb, &p.repo);
        assert_eq!(
            code,
            Some(0),
            "{what}: {report:#}\n{}\ngit fsck: {}",
            keep_per_git(&sb, &p.repo, &report),
            sb.fsck_failures().join("\n")
        );
        let failures = sb.fsck_failures();
        assert!(failures.is_empty(), "{what}: {}", failures.join("\n"));
    }
}

/// For a failure's message: what git says of each commit an fsck
/// `keep` finding names, so a commit the keep ref lost is told from one
/// git-orch's walk failed to find.
fn keep_per_git(sb: &Sandbox, repo: &Path, report: &serde_json::Value) -> String {
    let mut out = String::new();
    for f in report["findings"].as_array().into_iter().flatten() {
        if f["check"] != "keep" {
            continue;
        }
        let subject = f["subject"].as_str().unwrap_or_default();
        let o = sb.git_output(
            repo,
            &["merge-base", "--is-ancestor", subject, "refs/orch/keep"],
        );
        out.push_str(&format!(
            "git merge-base --is-ancestor {subject} refs/orch/keep: exit {:?}\n",
            o.status.code()
        ));
    }
    out
}

/// For a failure's message: whether each object id `text` names is in
/// the repository (`git cat-file -t`), so a missing object is told from
/// one git-orch failed to see.
fn objects_named(sb: &Sandbox, repo: &Path, text: &str) -> String {
    let mut out = String::new();
    for id in text.split(|c: char| !c.is_ascii_hexdigit()) {
        if id.len() == 40 || id.len() == 64 {
            let o = sb.git_output(repo, &["cat-file", "-t", id]);
            out.push_str(&format!(
                "git cat-file -t {id}: {}{}\n",
                stdout(&o).trim(),
                stderr(&o).trim()
            ));
        }
    }
    out
}

#[test]
fn beside_a_run_git_gc() {
    looped_beside_a_run(&["gc", "--quiet"]);
}

#[test]
fn beside_a_run_git_gc_prune_now() {
    looped_beside_a_run(&["gc", "--prune=now", "--quiet"]);
}

#[test]
fn beside_a_run_git_prune() {
    looped_beside_a_run(&["prune"]);
}

/// The default expiry: it removes empty fan-out folders, also the one gix
/// just made for an object it is about to rename into place.
#[test]
fn beside_a_run_git_prune_expire_two_weeks() {
    looped_beside_a_run(&["prune", "--expire=2.weeks.ago"]);
}

#[test]
fn beside_a_run_git_repack_d() {
    looped_beside_a_run(&["repack", "-d", "-q"]);
}

#[test]
fn beside_a_run_git_repack_a_d() {
    looped_beside_a_run(&["repack", "-a", "-d", "-q"]);
}

#[test]
fn beside_a_run_git_maintenance_run() {
    looped_beside_a_run(&["maintenance", "run", "--quiet"]);
}
