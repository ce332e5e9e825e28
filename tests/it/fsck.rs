//! `git orch fsck`: the state checked end to end. Each test builds one
//! kind of damage with plain git (a forged rewrite pushed past a remote
//! without the server hook, a second event at one seq, a record under
//! another blob's name, a hand commit on a protected target, a lost keep
//! ref, an agent without its driver, bad config) and checks that fsck
//! fails naming it and its fix, and that the fix clears it.

use crate::common;

use std::path::Path;

use common::*;

/// The fsck report as JSON, with its exit code.
fn fsck_json(sb: &Sandbox, repo: &Path, extra: &[&str]) -> (Option<i32>, serde_json::Value) {
    let mut args = vec!["fsck", "--json"];
    args.extend_from_slice(extra);
    let out = sb.orch(repo, &args);
    let json = serde_json::from_str(stdout(&out).trim())
        .unwrap_or_else(|e| panic!("fsck --json: {e}\n{}\n{}", stdout(&out), stderr(&out)));
    (out.status.code(), json)
}

/// The findings of one check (`rewrite`, `log`, …) that fail.
fn failing<'a>(report: &'a serde_json::Value, check: &str) -> Vec<&'a serde_json::Value> {
    report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["check"] == check && f["severity"] == "problem" && f["accepted_by"].is_null())
        .collect()
}

/// Asserts fsck is clean (exit 0) and returns its report.
fn assert_clean(sb: &Sandbox, repo: &Path) -> serde_json::Value {
    let (code, report) = fsck_json(sb, repo, &[]);
    assert_eq!(code, Some(0), "fsck should be clean: {report:#}");
    assert_eq!(report["ok"], true);
    report
}

/// This clone's writer id.
fn writer(sb: &Sandbox, repo: &Path) -> String {
    sb.git(repo, &["config", "orch.writerId"])
}

/// The path of seq `seq` in the tree of `tip`.
fn path_of_seq(sb: &Sandbox, repo: &Path, tip: &str, seq: u64) -> String {
    let name = format!("{seq:010}-");
    sb.git(repo, &["ls-tree", "-r", "--name-only", tip])
        .lines()
        .find(|l| l.rsplit('/').next().is_some_and(|n| n.starts_with(&name)))
        .unwrap_or_else(|| panic!("no seq {seq} in {tip}"))
        .to_owned()
}

/// Writes `bytes` as a blob and returns its id.
fn write_blob(sb: &Sandbox, repo: &Path, bytes: &[u8]) -> String {
    let file = sb.path().join("blob.tmp");
    std::fs::write(&file, bytes).expect("write");
    sb.git(repo, &["hash-object", "-w", &file.to_string_lossy()])
}

/// A commit whose tree is `tip`'s with `removed` gone and `added` (path,
/// blob) in, with `tip`'s message and `parents`: built with a scratch
/// index, as someone rewriting the log by hand would.
fn edit_log_commit(
    sb: &Sandbox,
    repo: &Path,
    tip: &str,
    removed: Option<&str>,
    added: (&str, &str),
    parents: &[&str],
) -> String {
    let index = sb.path().join("forge.index");
    let _ = std::fs::remove_file(&index);
    let with_index = |args: &[&str]| {
        let out = sb
            .command("git", repo)
            .env("GIT_INDEX_FILE", &index)
            .args(args)
            .output()
            .expect("git runs");
        assert!(out.status.success(), "git {args:?}: {}", stderr(&out));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    with_index(&["read-tree", tip]);
    if let Some(path) = removed {
        with_index(&["update-index", "--force-remove", path]);
    }
    with_index(&[
        "update-index",
        "--add",
        "--cacheinfo",
        &format!("100644,{},{}", added.1, added.0),
    ]);
    let tree = with_index(&["write-tree"]);
    let message = sb.git(repo, &["log", "-1", "--format=%B", tip]);
    let mut args = vec!["commit-tree", tree.as_str(), "-m", message.as_str()];
    for p in parents {
        args.push("-p");
        args.push(p);
    }
    sb.git(repo, &args)
}

/// The record at `path` of `tip`, changed: another event at the same seq.
fn forged_record(sb: &Sandbox, repo: &Path, tip: &str, path: &str) -> Vec<u8> {
    let bytes = sb.git(repo, &["cat-file", "blob", &format!("{tip}:{path}")]);
    let mut record: serde_json::Value = serde_json::from_str(&bytes).expect("record");
    record["label"] = serde_json::json!("forged");
    serde_json::to_vec(&record).expect("json")
}

/// A repository with a writer log of three markers in one commit.
fn repo_with_markers(sb: &Sandbox) -> std::path::PathBuf {
    let repo = sb.repo("r");
    sb.orch_ok(&repo, &["init"]);
    sb.orch_ok(
        &repo,
        &[
            "debug", "append", "--label", "genuine", "--count", "3", "--batch", "3",
        ],
    );
    repo
}

#[test]
fn a_forged_rewrite_of_another_writers_log_pushed_past_a_remote_without_the_hook_fails_fsck() {
    let sb = Sandbox::new();
    let seed = sb.repo("seed");
    let remote = sb.bare("remote.git");
    sb.git(&seed, &["push", "-q", &remote.to_string_lossy(), "main"]);
    // The writer: a clone whose log the forger will rewrite.
    let w = sb.clone_of(&remote, "writer");
    sb.orch_ok(&w, &["init", "--remote", "origin"]);
    sb.orch_ok(
        &w,
        &[
            "debug", "append", "--label", "genuine", "--count", "2", "--batch", "2",
        ],
    );
    sb.orch_ok(&w, &["sync"]);
    let wid = writer(&sb, &w);
    let log_ref = format!("refs/orch/log/{wid}");
    // The victim holds the genuine log.
    let v = sb.clone_of(&remote, "victim");
    sb.orch_ok(&v, &["init", "--remote", "origin"]);
    sb.orch_ok(&v, &["sync"]);
    assert_clean(&sb, &v);
    // The forger rewrites the event at seq 1 in place (same path, edited
    // content), recommits and force-pushes: the remote has no hook.
    let f = sb.path().join("forger");
    sb.git(sb.path(), &["init", "-q", &f.to_string_lossy()]);
    sb.git(
        &f,
        &[
            "fetch",
            "-q",
            &remote.to_string_lossy(),
            &format!("{log_ref}:{log_ref}"),
        ],
    );
    let tip = sb.git(&f, &["rev-parse", &log_ref]);
    // Seq 1 is `initialized`; seq 2 the first marker.
    let path = path_of_seq(&sb, &f, &tip, 2);
    let blob = write_blob(&sb, &f, &forged_record(&sb, &f, &tip, &path));
    let parents: Vec<String> = sb
        .git(&f, &["log", "-1", "--format=%P", &tip])
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let parents: Vec<&str> = parents.iter().map(String::as_str).collect();
    let forged = edit_log_commit(&sb, &f, &tip, None, (&path, &blob), &parents);
    sb.git(
        &f,
        &[
            "push",
            "-q",
            "--force",
            &remote.to_string_lossy(),
            &format!("{forged}:{log_ref}"),
        ],
    );
    // The victim syncs it in; fsck fails naming the writer and the seq.
    let out = sb.orch(&v, &["sync"]);
    assert!(
        matches!(out.status.code(), Some(0) | Some(3)),
        "sync: {}",
        stderr(&out)
    );
    let (code, report) = fsck_json(&sb, &v, &[]);
    assert_eq!(code, Some(3), "{report:#}");
    let named: Vec<&serde_json::Value> = report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["subject"] == format!("{wid}:2"))
        .collect();
    assert!(!named.is_empty(), "no finding names {wid}:2: {report:#}");
    // The plain report says the same, with the fix.
    let out = sb.orch(&v, &["fsck"]);
    assert_eq!(out.status.code(), Some(3));
    let text = stdout(&out);
    assert!(text.contains(&format!("{wid}:2")), "{text}");
    assert!(
        text.contains(&format!("git orch fsck --accept-rewrite {wid}:2")),
        "{text}"
    );
}

#[test]
fn two_different_events_at_one_seq_fail_fsck_until_a_person_accepts_them() {
    let sb = Sandbox::new();
    let repo = repo_with_markers(&sb);
    let wid = writer(&sb, &repo);
    let log_ref = format!("refs/orch/log/{wid}");
    assert_clean(&sb, &repo);
    // What a sync that keeps both versions leaves: the genuine event and
    // another one at seq 2 (seq 1 is `initialized`), each under its own blob's name.
    let tip = sb.git(&repo, &["rev-parse", &log_ref]);
    let path = path_of_seq(&sb, &repo, &tip, 2);
    let blob = write_blob(&sb, &repo, &forged_record(&sb, &repo, &tip, &path));
    let other = format!("ev/00/00/0000000002-{}.json", &blob[..8]);
    let both = edit_log_commit(&sb, &repo, &tip, None, (&other, &blob), &[&tip]);
    sb.git(&repo, &["update-ref", &log_ref, &both, &tip]);
    let (code, report) = fsck_json(&sb, &repo, &[]);
    assert_eq!(code, Some(3), "{report:#}");
    let rewrites = failing(&report, "rewrite");
    assert_eq!(rewrites.len(), 1, "{report:#}");
    assert_eq!(rewrites[0]["subject"], format!("{wid}:2"));
    let message = rewrites[0]["message"].as_str().expect("message");
    assert!(message.contains(&blob[..12]), "{message}");
    // Both events stay readable.
    let markers = events(&sb, &repo)
        .into_iter()
        .filter(|e| e["type"] == "debug_marker" && e["seq"] == 2)
        .count();
    assert_eq!(markers, 2, "both versions of seq 2 are read");
    // Accepting names exactly this; afterwards it is listed, not failing.
    let before = sb.refs(&repo);
    let out = sb.orch(&repo, &["fsck", "--accept-rewrite", &format!("{wid}:3")]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("finds no rewrite"),
        "{}",
        stderr(&out)
    );
    assert_eq!(sb.refs(&repo), before, "a refused accept writes nothing");
    let out = sb.orch(&repo, &["fsck", "--accept-rewrite", &format!("{wid}:2")]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("accepted"), "{}", stdout(&out));
    let report = assert_clean(&sb, &repo);
    assert_eq!(report["accepted"], 1, "{report:#}");
    let accepted = events(&sb, &repo)
        .into_iter()
        .find(|e| e["type"] == "finding_accepted")
        .expect("a finding_accepted event");
    assert_eq!(accepted["finding"]["kind"], "rewrite");
    assert_eq!(accepted["finding"]["seq"], 2);
    // A third version at the same seq is a new finding.
    let tip = sb.git(&repo, &["rev-parse", &log_ref]);
    let mut third: serde_json::Value =
        serde_json::from_slice(&forged_record(&sb, &repo, &both, &path)).expect("json");
    third["label"] = serde_json::json!("third");
    let blob3 = write_blob(&sb, &repo, &serde_json::to_vec(&third).expect("json"));
    let path3 = format!("ev/00/00/0000000002-{}.json", &blob3[..8]);
    let three = edit_log_commit(&sb, &repo, &tip, None, (&path3, &blob3), &[&tip]);
    sb.git(&repo, &["update-ref", &log_ref, &three, &tip]);
    let (code, report) = fsck_json(&sb, &repo, &[]);
    assert_eq!(code, Some(3), "{report:#}");
    assert_eq!(failing(&report, "rewrite").len(), 1, "{report:#}");
}

#[test]
fn a_record_under_another_blobs_name_is_reported_as_corruption() {
    let sb = Sandbox::new();
    let repo = repo_with_markers(&sb);
    let wid = writer(&sb, &repo);
    let log_ref = format!("refs/orch/log/{wid}");
    let tip = sb.git(&repo, &["rev-parse", &log_ref]);
    let path = path_of_seq(&sb, &repo, &tip, 3);
    // Same path, other content: the file name no longer names its blob.
    let bytes = sb.git(&repo, &["cat-file", "blob", &format!("{tip}:{path}")]);
    let mut record: serde_json::Value = serde_json::from_str(&bytes).expect("record");
    record["label"] = serde_json::json!("edited");
    let blob = write_blob(&sb, &repo, &serde_json::to_vec(&record).expect("json"));
    let forged = edit_log_commit(&sb, &repo, &tip, None, (&path, &blob), &[&tip]);
    sb.git(&repo, &["update-ref", &log_ref, &forged, &tip]);
    let (code, report) = fsck_json(&sb, &repo, &[]);
    assert_eq!(code, Some(3), "{report:#}");
    let corrupt = failing(&report, "log");
    assert_eq!(corrupt.len(), 1, "{report:#}");
    let message = corrupt[0]["message"].as_str().expect("message");
    assert!(message.contains("corrupt record"), "{message}");
    assert!(message.contains(&log_ref), "names the ref: {message}");
    assert!(message.contains(&path), "names the path: {message}");
    assert_eq!(corrupt[0]["subject"], format!("{wid}:3"));
    assert!(
        corrupt[0]["fix"]
            .as_str()
            .expect("fix")
            .contains(&format!("git log -p {log_ref} -- {path}")),
        "{report:#}"
    );
}

#[test]
fn bad_input_gets_a_clear_error_and_writes_nothing() {
    let sb = Sandbox::new();
    let repo = repo_with_markers(&sb);
    let before = sb.refs(&repo);
    for (args, code, says) in [
        (vec!["fsck", "--bogus"], 2, "unexpected argument"),
        (
            vec!["fsck", "--accept-rewrite", "nocolon"],
            2,
            "<writer>:<seq>",
        ),
        (vec!["fsck", "--accept-rewrite", "abc:0"], 2, "from 1"),
        (vec!["fsck", "--accept-rewrite", "../x:1"], 2, "invalid"),
        (vec!["fsck", "--accept-rewrite", "ABC:1"], 2, "upper-case"),
        (vec!["fsck", "--accept-rewrite", ":1"], 2, "invalid"),
        (vec!["fsck", "--accept-rewrite", "abc:"], 2, "is not a seq"),
        (
            vec!["fsck", "--accept-rewrite", "abc:-1"],
            2,
            "is not a seq",
        ),
        (
            vec!["fsck", "--accept-rewrite", "abc: 1"],
            2,
            "is not a seq",
        ),
        (
            vec!["fsck", "--accept-rewrite", "abc:99999999999999999999999"],
            2,
            "is not a seq",
        ),
        (vec!["fsck", "--accept-rewrite", "a b:1"], 2, "invalid"),
        (vec!["fsck", "--accept-rewrite=-abc:1"], 2, "invalid"),
        (
            vec!["fsck", "--accept-rewrite", "abc:1"],
            1,
            "finds no rewrite",
        ),
        (
            vec!["fsck", "--accept-commit=-x"],
            2,
            "may not start with '-'",
        ),
        (
            vec!["fsck", "--accept-commit", "HEAD:nope"],
            1,
            "is not a commit",
        ),
        (
            vec!["fsck", "--accept-commit", "nope"],
            1,
            "is not a commit",
        ),
        (
            vec!["fsck", "--accept-commit", "HEAD"],
            1,
            "finds no unverified commit",
        ),
        (
            vec!["fsck", "--accept-commit", "HEAD", "--accept-rewrite", "a:1"],
            2,
            "cannot be used with",
        ),
    ] {
        let out = sb.orch(&repo, &args);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
        assert_eq!(stdout(&out), "", "{args:?}");
    }
    assert_eq!(sb.refs(&repo), before, "nothing was written");
    let elsewhere = sb.path().join("not-a-repo");
    std::fs::create_dir_all(&elsewhere).expect("mkdir");
    let out = sb.orch(&elsewhere, &["fsck"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("not a git repository"),
        "{}",
        stderr(&out)
    );
    assert!(!elsewhere.join(".git").exists());
}

#[test]
fn a_hand_commit_on_a_protected_target_after_a_landing_fails_until_accepted() {
    let mut sb = Sandbox::new();
    let p = project(&mut sb, &[("a", &[], "true")], None);
    p.script("a", "write src/a/done yes\n");
    sb.orch_ok(&p.repo, &["run", "proj", "--agent", "fake"]);
    let report = assert_clean(&sb, &p.repo);
    assert_eq!(report["checked"]["targets"][0], "refs/heads/main");
    assert_eq!(report["checked"]["commits_verified"], 1);
    // A commit straight onto main, past every hook.
    std::fs::write(p.repo.join("hotfix"), "by hand\n").expect("write");
    sb.git(&p.repo, &["add", "hotfix"]);
    sb.git(&p.repo, &["commit", "-q", "-m", "hotfix by hand"]);
    let commit = sb.git(&p.repo, &["rev-parse", "HEAD"]);
    let (code, report) = fsck_json(&sb, &p.repo, &[]);
    assert_eq!(code, Some(3), "{report:#}");
    let landings = failing(&report, "landings");
    assert_eq!(landings.len(), 1, "{report:#}");
    assert_eq!(landings[0]["subject"], commit[..12]);
    assert!(
        landings[0]["fix"]
            .as_str()
            .expect("fix")
            .contains(&format!("--accept-commit {}", &commit[..12])),
        "{report:#}"
    );
    let out = sb.orch(&p.repo, &["fsck", "--accept-commit", &commit[..12]]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report = assert_clean(&sb, &p.repo);
    assert_eq!(report["accepted"], 1);
}

#[test]
fn a_lost_keep_ref_is_reported_and_repair_keeps_what_records_point_at() {
    let mut sb = Sandbox::new();
    let p = project(&mut sb, &[("a", &[], "true"), ("b", &[], "true")], None);
    p.script("default", "write src/a/done yes\n");
    p.script("b", "write src/b/done yes\n");
    sb.orch_ok(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_clean(&sb, &p.repo);
    let keep = sb.git(&p.repo, &["rev-parse", "refs/orch/keep"]);
    sb.git(&p.repo, &["update-ref", "-d", "refs/orch/keep", &keep]);
    let (code, report) = fsck_json(&sb, &p.repo, &[]);
    assert_eq!(code, Some(3), "{report:#}");
    let missing = failing(&report, "keep");
    // Two results, two landed candidates (a landed commit is its candidate).
    assert!(missing.len() >= 2, "{report:#}");
    assert!(
        missing
            .iter()
            .all(|f| f["fix"].as_str().expect("fix").contains("--repair")),
        "{report:#}"
    );
    let out = sb.orch(&p.repo, &["fsck", "--repair"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("repair: kept"), "{}", stderr(&out));
    assert_clean(&sb, &p.repo);
}

#[test]
fn a_landing_whose_note_lost_its_record_is_reported_and_repair_writes_it_again() {
    let mut sb = Sandbox::new();
    let p = project(&mut sb, &[("a", &[], "true"), ("b", &["a"], "true")], None);
    p.script("default", "write src/a/done yes\n");
    p.script("b", "write src/b/done yes\n");
    sb.orch_ok(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_clean(&sb, &p.repo);
    // Both landings' records are there; one note is replaced by hand (an
    // older git-orch, or `git notes add -f`), the other removed.
    let tip = sb.git(&p.repo, &["rev-parse", "main"]);
    let before = sb.git(&p.repo, &["rev-parse", "main~1"]);
    let note = sb.git(&p.repo, &["notes", "--ref=orch", "show", &tip]);
    assert!(
        note.contains("git-orch landed") && note.contains("/b/attempt-1"),
        "{note}"
    );
    sb.git(
        &p.repo,
        &[
            "notes",
            "--ref=orch",
            "add",
            "-f",
            "-m",
            "git-orch attempt x/y/attempt-1",
            &tip,
        ],
    );
    sb.git(&p.repo, &["notes", "--ref=orch", "remove", &before]);
    let (code, report) = fsck_json(&sb, &p.repo, &[]);
    // Reported with its repair; derived data, so a note, not a failure.
    assert_eq!(code, Some(0), "{report:#}");
    let lost: Vec<&serde_json::Value> = report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["check"] == "notes" && f["severity"] == "note")
        .collect();
    assert_eq!(lost.len(), 2, "{report:#}");
    assert!(
        lost.iter()
            .all(|f| f["fix"].as_str().expect("fix").contains("--repair")),
        "{report:#}"
    );
    let out = sb.orch(&p.repo, &["fsck", "--repair"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("repair: wrote the record"),
        "{}",
        stderr(&out)
    );
    let report = assert_clean(&sb, &p.repo);
    assert!(
        !report["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .any(|f| f["check"] == "notes"),
        "{report:#}"
    );
    // The record is back beside the one put there by hand, not instead.
    let note = sb.git(&p.repo, &["notes", "--ref=orch", "show", &tip]);
    assert!(note.contains("/b/attempt-1 on main"), "{note}");
    assert!(note.contains("git-orch attempt x/y/attempt-1"), "{note}");
    let note = sb.git(&p.repo, &["notes", "--ref=orch", "show", &before]);
    assert!(note.contains("/a/attempt-1 on main"), "{note}");
}

#[test]
fn an_agent_process_without_its_driver_is_found_by_its_variables() {
    use std::os::unix::process::CommandExt;
    let mut sb = Sandbox::new();
    let p = project(&mut sb, &[("a", &[], "true")], None);
    p.script("a", "write src/a/done yes\n");
    sb.orch_ok(&p.repo, &["run", "proj", "--agent", "fake"]);
    let status = status_json(&sb, &p.repo);
    let run = status["run"].as_str().expect("run").to_owned();
    assert_clean(&sb, &p.repo);
    // A process of attempt 1 of `a` whose driver is gone: its parent is
    // this test, not git-orch. It leads a group of its own.
    let mut orphan = sb
        .command("sleep", &p.repo)
        .arg("300")
        .env("ORCH_RUN", &run)
        .env("ORCH_TASK", "a")
        .env("ORCH_ATTEMPT", "1")
        .process_group(0)
        .spawn()
        .expect("sleep starts");
    let pgid = orphan.id();
    assert!(pgid > 1);
    // /proc shows the environment once exec is done: poll with a deadline.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let report = loop {
        let (code, report) = fsck_json(&sb, &p.repo, &[]);
        if code == Some(3) || std::time::Instant::now() > deadline {
            break report;
        }
    };
    let found = failing(&report, "processes");
    let _ = orphan.kill();
    let _ = orphan.wait();
    assert_eq!(found.len(), 1, "{report:#}");
    assert_eq!(found[0]["subject"], format!("group {pgid}"));
    let message = found[0]["message"].as_str().expect("message");
    assert!(message.contains(&format!("{run}/a/attempt-1")), "{message}");
    assert!(
        found[0]["fix"]
            .as_str()
            .expect("fix")
            .contains(&format!("kill -TERM -- -{pgid}")),
        "{report:#}"
    );
    assert_clean(&sb, &p.repo);
}

#[test]
fn a_checkout_a_landing_left_half_moved_is_reported_and_repair_finishes_it() {
    let mut sb = Sandbox::new();
    let p = project(&mut sb, &[("a", &[], "true")], None);
    p.script("a", "write src/a/done yes\n");
    let old = sb.git(&p.repo, &["rev-parse", "HEAD"]);
    // The driver dies right after moving main, before moving the
    // checkout: its index and files are still those of the old tip.
    let out = sb
        .command("git", &p.repo)
        .args(["orch", "run", "proj", "--agent", "fake"])
        .env("ORCH_FAILPOINTS", "land.moved=kill")
        .output()
        .expect("runs");
    assert!(!out.status.success(), "the driver was killed");
    let new = sb.git(&p.repo, &["rev-parse", "main"]);
    assert_ne!(old, new, "main moved");
    assert!(!p.repo.join("src/a/done").exists());
    assert_ne!(sb.git(&p.repo, &["status", "--porcelain"]), "");
    let (code, report) = fsck_json(&sb, &p.repo, &[]);
    assert_eq!(code, Some(3), "{report:#}");
    let found = failing(&report, "checkouts");
    assert_eq!(found.len(), 1, "{report:#}");
    assert_eq!(found[0]["subject"], p.repo.display().to_string());
    assert!(
        found[0]["fix"]
            .as_str()
            .expect("fix")
            .contains(&format!("read-tree -m -u {old} {new}")),
        "{report:#}"
    );
    let out = sb.orch(&p.repo, &["fsck", "--repair"]);
    assert!(
        stderr(&out).contains("repair: settled 1 checkout move"),
        "{}",
        stderr(&out)
    );
    assert!(p.repo.join("src/a/done").exists(), "the checkout moved");
    assert_eq!(sb.git(&p.repo, &["status", "--porcelain"]), "");
    let (_, report) = fsck_json(&sb, &p.repo, &[]);
    assert!(failing(&report, "checkouts").is_empty(), "{report:#}");
    // What else the crash left (the landing's scratch worktree) goes with
    // cleanup; then the state is whole.
    sb.orch_ok(&p.repo, &["cleanup"]);
    assert_clean(&sb, &p.repo);
}

#[test]
fn configuration_that_does_not_parse_is_a_finding() {
    let sb = Sandbox::new();
    let repo = repo_with_markers(&sb);
    sb.git(&repo, &["config", "orch.cleanup", "sometimes"]);
    let (code, report) = fsck_json(&sb, &repo, &[]);
    assert_eq!(code, Some(3), "{report:#}");
    let found = failing(&report, "config");
    assert_eq!(found.len(), 1, "{report:#}");
    assert!(
        found[0]["message"]
            .as_str()
            .expect("message")
            .contains("\"sometimes\" is not finished, landed or never"),
        "{report:#}"
    );
    sb.git(&repo, &["config", "--unset", "orch.cleanup"]);
    std::fs::create_dir_all(repo.join(".orch")).expect("mkdir");
    std::fs::write(repo.join(".orch/config"), "[orch\n cap = 2\n").expect("write");
    sb.git(&repo, &["add", ".orch/config"]);
    sb.git(&repo, &["commit", "-q", "-m", "broken config"]);
    let (code, report) = fsck_json(&sb, &repo, &[]);
    assert_eq!(code, Some(3), "{report:#}");
    assert_eq!(failing(&report, "config").len(), 1, "{report:#}");
}
