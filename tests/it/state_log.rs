//! The event log (ARCHITECTURE.md, invariants 1, 6 and 8): concurrent
//! appends, crashes mid-append, sharing through a remote, gc, and the errors
//! a user sees when the repository is not usable.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use common::{Sandbox, json_lines, stderr, stdout};

fn log_json(sb: &Sandbox, repo: &Path) -> Vec<serde_json::Value> {
    json_lines(&sb.orch_ok(repo, &["log", "--json"]))
}

/// Asserts every writer's seqs are exactly 1..=n, once each.
fn assert_contiguous(events: &[serde_json::Value]) {
    let mut by_writer: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for e in events {
        by_writer
            .entry(e["writer"].as_str().expect("writer").to_owned())
            .or_default()
            .push(e["seq"].as_u64().expect("seq"));
    }
    for (w, mut seqs) in by_writer {
        seqs.sort_unstable();
        let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
        assert_eq!(seqs, expected, "writer {w} has gaps or duplicates");
    }
}

fn markers(events: &[serde_json::Value]) -> Vec<(String, u64)> {
    events
        .iter()
        .filter(|e| e["type"] == "debug_marker")
        .map(|e| {
            (
                e["label"].as_str().expect("label").to_owned(),
                e["n"].as_u64().expect("n"),
            )
        })
        .collect()
}

#[test]
fn eight_processes_appending_at_once_lose_nothing() {
    let sb = Sandbox::new();
    let repo = sb.repo("r");
    sb.orch_ok(&repo, &["init"]);
    let children: Vec<_> = (0..8)
        .map(|i| {
            sb.command("git", &repo)
                .args(["orch", "debug", "append", "--count", "250"])
                .arg(format!("--label=p{i}"))
                .spawn()
                .expect("spawn appender")
        })
        .collect();
    for mut c in children {
        assert!(c.wait().expect("wait").success());
    }
    let events = log_json(&sb, &repo);
    let marks = markers(&events);
    assert_eq!(marks.len(), 2000);
    let unique: BTreeSet<_> = marks.iter().cloned().collect();
    assert_eq!(unique.len(), 2000, "duplicated events");
    for i in 0..8 {
        let label = format!("p{i}");
        let ns: Vec<u64> = marks
            .iter()
            .filter(|(l, _)| *l == label)
            .map(|(_, n)| *n)
            .collect();
        assert_eq!(
            ns,
            (0..250).collect::<Vec<_>>(),
            "{label} lost or reordered events"
        );
    }
    assert_contiguous(&events);
    // One writer per clone: every event carries the same writer id.
    let writers: BTreeSet<_> = events.iter().map(|e| e["writer"].to_string()).collect();
    assert_eq!(writers.len(), 1);
}

#[test]
fn sigkill_in_the_middle_of_appending_leaves_a_readable_log() {
    let sb = Sandbox::new();
    let repo = sb.repo("r");
    sb.orch_ok(&repo, &["init"]);
    let mut expected_before = 1; // the init event
    // Killed exactly between writing an operation's objects and moving
    // the ref, at the 1st, 2nd, 5th, 17th and 40th operation.
    for (trial, nth) in [1u32, 2, 5, 17, 40].into_iter().enumerate() {
        let child = sb
            .command("git-orch", &repo)
            .args(["debug", "append", "--count", "1000000", "--batch", "3"])
            .arg(format!("--label=t{trial}"))
            .env(
                "ORCH_FAILPOINTS",
                format!("append.objects-written=kill@{nth}"),
            )
            .output()
            .expect("appender");
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(child.status.signal(), Some(9), "the failpoint was not hit");
        let events = log_json(&sb, &repo);
        assert!(
            events.len() >= expected_before,
            "events vanished after kill"
        );
        assert_contiguous(&events);
        // Operations are atomic: batches of 3 land whole or not at all.
        let mine = markers(&events)
            .into_iter()
            .filter(|(l, _)| *l == format!("t{trial}"))
            .count();
        assert_eq!(mine % 3, 0, "a torn operation is visible");
        assert_eq!(
            mine,
            3 * (nth as usize - 1),
            "an operation was lost or half kept"
        );
        // The next append succeeds and continues the sequence.
        sb.orch_ok(&repo, &["debug", "append", "--label", "after"]);
        let after = log_json(&sb, &repo);
        assert_eq!(after.len(), events.len() + 1);
        assert_contiguous(&after);
        expected_before = after.len();
    }
}

fn shared_pair(sb: &Sandbox) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let seed = sb.repo("seed");
    let remote = sb.bare("remote.git");
    sb.git(&seed, &["push", "-q", &remote.to_string_lossy(), "main"]);
    let a = sb.clone_of(&remote, "a");
    let b = sb.clone_of(&remote, "b");
    sb.orch_ok(&a, &["init", "--remote", "origin"]);
    sb.orch_ok(&b, &["init", "--remote", "origin"]);
    (remote, a, b)
}

#[test]
fn two_clones_sync_to_the_identical_journal() {
    let sb = Sandbox::new();
    let (_remote, a, b) = shared_pair(&sb);
    sb.orch_ok(&a, &["debug", "append", "--label", "a", "--count", "5"]);
    sb.orch_ok(&b, &["debug", "append", "--label", "b", "--count", "7"]);
    sb.orch_ok(&a, &["sync"]);
    sb.orch_ok(&b, &["sync"]);
    sb.orch_ok(&a, &["sync"]);
    let la = sb.orch_ok(&a, &["log", "--json"]);
    let lb = sb.orch_ok(&b, &["log", "--json"]);
    assert_eq!(la, lb, "clones disagree on the journal");
    let events = json_lines(&la);
    assert_eq!(markers(&events).len(), 12);
    assert_eq!(events.len(), 14, "two init events plus 12 markers");
    // Lamport order: b synced a's events before its own next append, so an
    // event appended by b after syncing sorts after all of a's.
    sb.orch_ok(&b, &["debug", "append", "--label", "b-late"]);
    let lb = log_json(&sb, &b);
    assert_eq!(lb.last().expect("event")["label"], "b-late");
    // A plain `git push`/`git fetch` carries the state too (refspecs from init).
    sb.git(&b, &["push", "-q"]);
    sb.git(&a, &["fetch", "-q"]);
    let la = log_json(&sb, &a);
    assert_eq!(la.last().expect("event")["label"], "b-late");
}

#[test]
fn a_diverged_writer_ref_is_merged_keeping_both_sides() {
    let sb = Sandbox::new();
    let (_remote, a, _b) = shared_pair(&sb);
    sb.orch_ok(
        &a,
        &["debug", "append", "--label", "common", "--count", "2"],
    );
    sb.orch_ok(&a, &["sync"]);
    // A copied .git: the same writer id now writes in two places.
    let copy = sb.path().join("a-copy");
    let status = std::process::Command::new("cp")
        .args(["-a", &a.to_string_lossy(), &copy.to_string_lossy()])
        .status()
        .expect("cp");
    assert!(status.success());
    sb.orch_ok(&a, &["debug", "append", "--label", "left", "--count", "3"]);
    sb.orch_ok(
        &copy,
        &["debug", "append", "--label", "right", "--count", "4"],
    );
    sb.orch_ok(&a, &["sync"]);
    let out = sb.orch(&copy, &["sync"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("--new-writer"), "{}", stderr(&out));
    sb.orch_ok(&a, &["sync"]);
    let la = sb.orch_ok(&a, &["log", "--json"]);
    let lc = sb.orch_ok(&copy, &["log", "--json"]);
    assert_eq!(la, lc);
    let marks = markers(&json_lines(&la));
    for (label, n) in [("common", 2), ("left", 3), ("right", 4)] {
        assert_eq!(
            marks.iter().filter(|(l, _)| l == label).count(),
            n,
            "{label} events lost in the merge"
        );
    }
    // Giving the copy its own id ends the divergence.
    sb.orch_ok(&copy, &["init", "--new-writer"]);
    sb.orch_ok(&copy, &["debug", "append", "--label", "own"]);
    let events = log_json(&sb, &copy);
    let writer_of = |label: &str| {
        events
            .iter()
            .find(|e| e["label"] == label)
            .map(|e| e["writer"].as_str().expect("w").to_owned())
            .expect("event")
    };
    assert_ne!(writer_of("own"), writer_of("common"));
    assert_eq!(events.last().expect("event")["label"], "own");
}

#[test]
fn a_server_ref_rewound_by_force_push_loses_nothing_locally() {
    let sb = Sandbox::new();
    let (remote, a, b) = shared_pair(&sb);
    sb.orch_ok(&a, &["debug", "append", "--label", "x", "--count", "6"]);
    sb.orch_ok(&a, &["sync"]);
    sb.orch_ok(&b, &["sync"]);
    sb.orch_ok(&a, &["sync"]);
    let writer = sb.git(&a, &["config", "orch.writerId"]);
    let log_ref = format!("refs/orch/log/{writer}");
    let before = sb.orch_ok(&a, &["log", "--json"]);
    // Someone rewinds the server's copy of a's log by three commits.
    sb.git(&remote, &["update-ref", &log_ref, &format!("{log_ref}~3")]);
    // b sees its copy of a's log go backwards: reported, nothing dropped.
    let out = sb.orch(&b, &["sync"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("writer {writer}")),
        "{}",
        stderr(&out)
    );
    sb.orch_ok(&a, &["sync"]);
    assert_eq!(sb.orch_ok(&a, &["log", "--json"]), before);
    assert_eq!(sb.orch_ok(&b, &["log", "--json"]), before);
    // The server holds the full log again.
    assert_eq!(
        sb.git(&remote, &["rev-parse", &log_ref]),
        sb.git(&a, &["rev-parse", &log_ref])
    );
}

#[test]
fn gc_and_pack_refs_lose_nothing_and_change_no_output() {
    let sb = Sandbox::new();
    let repo = sb.repo("r");
    sb.orch_ok(&repo, &["init"]);
    sb.orch_ok(&repo, &["debug", "append", "--count", "40", "--batch", "4"]);
    // A commit referenced only by the keep ref.
    sb.git(&repo, &["checkout", "-q", "-b", "scratch"]);
    std::fs::write(repo.join("kept.txt"), "kept\n").expect("write");
    sb.git(&repo, &["add", "kept.txt"]);
    sb.git(&repo, &["commit", "-q", "-m", "kept"]);
    let kept = sb.git(&repo, &["rev-parse", "HEAD"]);
    sb.git(&repo, &["checkout", "-q", "main"]);
    {
        let store = git_orch::store::Store::open(&repo).expect("open");
        let id = store.parse_oid(&kept).expect("oid");
        store.keep(&[id], "test").expect("keep");
    }
    sb.git(&repo, &["branch", "-q", "-D", "scratch"]);
    let before = sb.orch_ok(&repo, &["log", "--json"]);
    sb.git(
        &repo,
        &[
            "-c",
            "gc.reflogExpire=now",
            "-c",
            "gc.reflogExpireUnreachable=now",
            "gc",
            "-q",
            "--prune=now",
        ],
    );
    sb.git(&repo, &["pack-refs", "--all"]);
    assert_eq!(sb.orch_ok(&repo, &["log", "--json"]), before);
    assert_eq!(sb.git(&repo, &["cat-file", "-t", &kept]), "commit");
    // Appending still works with packed refs, and continues the sequence.
    sb.orch_ok(&repo, &["debug", "append"]);
    let events = log_json(&sb, &repo);
    assert_eq!(events.len(), json_lines(&before).len() + 1);
    assert_contiguous(&events);
}

#[test]
fn works_from_a_linked_worktree_and_in_a_bare_repository() {
    let sb = Sandbox::new();
    let repo = sb.repo("r");
    let wt = sb.path().join("wt");
    sb.git(
        &repo,
        &["worktree", "add", "-q", &wt.to_string_lossy(), "-b", "side"],
    );
    sb.orch_ok(&wt, &["debug", "append", "--label", "from-worktree"]);
    let events = log_json(&sb, &repo);
    assert_eq!(markers(&events), vec![("from-worktree".to_owned(), 0)]);
    assert!(
        repo.join(".git/orch/lock").exists(),
        "lock lives in the common dir"
    );
    let bare = sb.bare("b.git");
    sb.orch_ok(&bare, &["init"]);
    sb.orch_ok(&bare, &["debug", "append", "--label", "bare"]);
    assert_eq!(markers(&log_json(&sb, &bare)).len(), 1);
}

#[test]
fn init_is_idempotent() {
    let sb = Sandbox::new();
    let (_remote, a, _b) = shared_pair(&sb);
    let config_before = sb.git(&a, &["config", "--local", "--list"]);
    let events_before = log_json(&sb, &a).len();
    let out = sb.orch(&a, &["init", "--remote", "origin"]);
    assert!(out.status.success());
    assert!(stderr(&out).contains("nothing changed"), "{}", stderr(&out));
    assert_eq!(sb.git(&a, &["config", "--local", "--list"]), config_before);
    assert_eq!(log_json(&sb, &a).len(), events_before);
    let fetch = sb.git(&a, &["config", "--get-all", "remote.origin.fetch"]);
    assert_eq!(
        fetch.matches("refs/orch-remotes/origin").count(),
        1,
        "{fetch}"
    );
    let push = sb.git(&a, &["config", "--get-all", "remote.origin.push"]);
    assert_eq!(
        push.lines().collect::<Vec<_>>(),
        ["refs/orch/*:refs/orch/*", "HEAD"]
    );
    assert_eq!(sb.git(&a, &["config", "core.logAllRefUpdates"]), "always");
}

#[test]
fn log_limit_and_a_closed_pipe() {
    let sb = Sandbox::new();
    let repo = sb.repo("r");
    sb.orch_ok(&repo, &["debug", "append", "--count", "10"]);
    let last3 = json_lines(&sb.orch_ok(&repo, &["log", "--json", "--limit", "3"]));
    assert_eq!(
        last3
            .iter()
            .map(|e| e["n"].as_u64().expect("n"))
            .collect::<Vec<_>>(),
        [7, 8, 9]
    );
    let human = sb.orch_ok(&repo, &["log"]);
    assert_eq!(human.lines().count(), 10);
    assert!(human.lines().all(|l| l.contains("debug_marker")), "{human}");
    // `git orch log | head -1` exits 0 although the reader went away early.
    sb.orch_ok(
        &repo,
        &["debug", "append", "--count", "3000", "--batch", "500"],
    );
    let mut child = sb
        .command("git-orch", &repo)
        .arg("log")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("log");
    {
        use std::io::BufRead;
        let mut first = String::new();
        let mut reader = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        reader.read_line(&mut first).expect("one line");
        assert!(first.contains("debug_marker"));
    }
    assert!(
        child.wait().expect("wait").success(),
        "a closed pipe is not an error"
    );
}

#[test]
fn log_follow_prints_new_events() {
    let sb = Sandbox::new();
    let repo = sb.repo("r");
    sb.orch_ok(&repo, &["debug", "append", "--label", "first"]);
    let mut child = sb
        .command("git-orch", &repo)
        .args(["log", "--json", "--follow"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("follow");
    // Lines as the follower prints them, read on a thread so that the test
    // waits for each one with a deadline instead of sleeping.
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in reader.lines().map_while(Result::ok) {
            let label = json_lines(&line)[0]["label"].as_str().map(str::to_owned);
            if tx.send(label).is_err() {
                break;
            }
        }
    });
    let next = || {
        rx.recv_timeout(Duration::from_secs(20))
            .expect("a followed line")
    };
    assert_eq!(next().as_deref(), Some("first"));
    sb.orch_ok(&repo, &["debug", "append", "--label", "second"]);
    assert_eq!(next().as_deref(), Some("second"));
    child.kill().expect("stop follow");
    child.wait().expect("reap follow");
}

fn assert_refused(out: &std::process::Output, needles: &[&str]) {
    assert_eq!(out.status.code(), Some(1), "stderr: {}", stderr(out));
    let err = stderr(out);
    for n in needles {
        assert!(err.contains(n), "expected {n:?} in: {err}");
    }
}

#[test]
fn not_a_repository_is_refused_clearly() {
    let sb = Sandbox::new();
    let dir = sb.path().join("plain");
    std::fs::create_dir_all(&dir).expect("dir");
    for args in [&["log"][..], &["init"], &["debug", "append"]] {
        let out = sb.orch(&dir, args);
        assert_refused(&out, &["not a git repository", "hint:", "git init"]);
    }
    assert_eq!(
        std::fs::read_dir(&dir).expect("ls").count(),
        0,
        "wrote files"
    );
}

/// `GIT_CEILING_DIRECTORIES` means what it means to git: a ceiling that is
/// not above the working folder is ignored, one above it stops the search
/// before it reaches the ceiling itself, entries are compared with the
/// symlink-free working folder (resolved themselves, except after an empty
/// entry), relative entries are ignored. git orch finds a repository
/// exactly where `git rev-parse` does.
#[test]
fn ceiling_directories_stop_the_search_as_they_stop_git() {
    let sb = Sandbox::new();
    let root = sb.path().canonicalize().expect("canonical temp dir");
    let repo = root.join("top/repo");
    std::fs::create_dir_all(repo.join("sub/deep")).expect("dirs");
    std::fs::create_dir_all(root.join("other")).expect("dir");
    sb.git(&repo, &["init", "-q", "-b", "main"]);
    std::os::unix::fs::symlink(root.join("top"), root.join("link")).expect("symlink");
    let p = |rel: &str| root.join(rel).to_string_lossy().into_owned();
    let cases: Vec<(String, String)> = vec![
        // A folder that does not contain the repository.
        (p("other"), p("top/repo/sub")),
        // A folder above the repository.
        (p("top"), p("top/repo/sub")),
        // The repository's own folder, from below it and from it.
        (p("top/repo"), p("top/repo/sub")),
        (p("top/repo"), p("top/repo")),
        (p("top/repo/sub"), p("top/repo/sub/deep")),
        // Through a symlink: resolved, unless after an empty entry.
        (p("link/repo"), p("top/repo/sub")),
        (format!(":{}", p("link/repo")), p("top/repo/sub")),
        ("relative".into(), p("top/repo/sub")),
        (
            format!("{}:{}", p("other"), p("top/repo")),
            p("top/repo/sub"),
        ),
    ];
    let mut found = 0;
    for (ceiling, cwd) in &cases {
        let git = sb
            .command("git", Path::new(cwd))
            .env("GIT_CEILING_DIRECTORIES", ceiling)
            .args(["rev-parse", "--show-toplevel"])
            .output()
            .expect("git runs");
        let orch = sb
            .command("git", Path::new(cwd))
            .env("GIT_CEILING_DIRECTORIES", ceiling)
            .args(["orch", "log"])
            .output()
            .expect("git orch runs");
        assert_eq!(
            orch.status.success(),
            git.status.success(),
            "GIT_CEILING_DIRECTORIES={ceiling} in {cwd}: git says {:?}{:?}, git orch says {:?}",
            stdout(&git).trim(),
            stderr(&git).trim(),
            stderr(&orch).trim()
        );
        if git.status.success() {
            found += 1;
        } else {
            assert!(
                stderr(&orch).contains("not a git repository"),
                "{}",
                stderr(&orch)
            );
        }
    }
    // Both outcomes are covered (the git on this machine agrees).
    assert!(found >= 3 && found < cases.len(), "{found} found");
}

#[test]
fn a_reftable_repository_is_refused_clearly() {
    let sb = Sandbox::new();
    let dir = sb.path().join("rt");
    let out = sb.git_output(
        sb.path(),
        &[
            "init",
            "-q",
            "--ref-format=reftable",
            &dir.to_string_lossy(),
        ],
    );
    if !out.status.success() {
        eprintln!("this git cannot make reftable repositories; skipping");
        return;
    }
    for args in [&["log"][..], &["init"], &["debug", "append"]] {
        let out = sb.orch(&dir, args);
        assert_refused(&out, &["reftable", "git refs migrate"]);
    }
    assert!(!dir.join(".git/orch").exists(), "wrote state");
}

#[test]
fn a_corrupt_event_is_reported_with_ref_and_seq_and_the_rest_stays_readable() {
    let sb = Sandbox::new();
    let repo = sb.repo("r");
    sb.orch_ok(&repo, &["debug", "append", "--count", "3"]);
    let writer = sb.git(&repo, &["config", "orch.writerId"]);
    let log_ref = format!("refs/orch/log/{writer}");
    // Replace the blob of seq 2 with garbage, by hand, as a damaged copy would.
    let listing = sb.git(&repo, &["ls-tree", "-r", &log_ref]);
    let line = listing
        .lines()
        .find(|l| l.contains("/0000000002-"))
        .expect("seq 2 entry");
    let path = line.split('\t').nth(1).expect("path");
    let bad = sb
        .command("git", &repo)
        .args(["hash-object", "-w", "--stdin"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().expect("stdin").write_all(b"{not json")?;
            c.wait_with_output()
        })
        .expect("hash-object");
    let bad = String::from_utf8_lossy(&bad.stdout).trim().to_owned();
    let index = sb.path().join("tmp-index");
    let idx = index.to_string_lossy().to_string();
    let with_index = |args: &[&str]| {
        let out = sb
            .command("git", &repo)
            .env("GIT_INDEX_FILE", &idx)
            .args(args)
            .output()
            .expect("git");
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out).trim().to_owned()
    };
    with_index(&["read-tree", &log_ref]);
    with_index(&[
        "update-index",
        "--cacheinfo",
        &format!("100644,{bad},{path}"),
    ]);
    let tree = with_index(&["write-tree"]);
    let msg = sb.git(&repo, &["log", "-1", "--format=%B", &log_ref]);
    let commit = sb
        .command("git", &repo)
        .args(["commit-tree", &tree, "-p", &log_ref, "-m", &msg])
        .output()
        .expect("commit-tree");
    let commit = stdout(&commit).trim().to_owned();
    sb.git(&repo, &["update-ref", &log_ref, &commit]);

    let refs_before = sb.refs(&repo);
    let out = sb.orch(&repo, &["log", "--json"]);
    assert_refused(&out, &[&log_ref, "seq 2", "hint:", "git orch sync"]);
    let shown = json_lines(&stdout(&out));
    assert_eq!(
        shown
            .iter()
            .map(|e| e["seq"].as_u64().expect("seq"))
            .collect::<Vec<_>>(),
        [1, 3],
        "the readable events are still shown"
    );
    assert_eq!(sb.refs(&repo), refs_before, "reading wrote something");
}

#[test]
fn a_stale_ref_lock_is_named_with_the_fix() {
    let sb = Sandbox::new();
    let repo = sb.repo("r");
    sb.orch_ok(&repo, &["debug", "append"]);
    let writer = sb.git(&repo, &["config", "orch.writerId"]);
    let lock = repo.join(format!(".git/refs/orch/log/{writer}.lock"));
    std::fs::write(&lock, "").expect("lock");
    let before = sb.refs(&repo);
    let out = sb.orch(&repo, &["debug", "append"]);
    assert_refused(&out, &["lock file", &lock.to_string_lossy(), "rm '"]);
    assert_eq!(sb.refs(&repo), before);
    std::fs::remove_file(&lock).expect("rm");
    sb.orch_ok(&repo, &["debug", "append"]);
}

#[test]
fn sync_refuses_an_unknown_or_option_like_remote() {
    let sb = Sandbox::new();
    let repo = sb.repo("r");
    for remote in ["nope", "--upload-pack=touch /tmp/x", "../x"] {
        let out = sb.orch(&repo, &["sync", "--", remote]);
        assert_refused(&out, &["not a configured remote", "git remote add"]);
    }
    let out = sb.orch(&repo, &["init", "--remote", "nope"]);
    assert_refused(&out, &["not a configured remote"]);
}

/// The fsck check every test ends with (see `tests/it/common`) really fails on
/// a repository with a missing object, as the keep ref once was.
#[test]
fn the_end_of_test_fsck_check_catches_a_missing_tree() {
    let sb = Sandbox::new();
    let repo = sb.repo("r");
    assert!(sb.fsck_failures().is_empty(), "{:?}", sb.fsck_failures());
    // A commit naming a tree that was never written, like the keep ref's
    // commits did with the empty tree.
    let missing = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";
    let mut child = sb
        .command("git", &repo)
        .args([
            "hash-object",
            "-t",
            "commit",
            "--literally",
            "-w",
            "--stdin",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("hash-object");
    use std::io::Write;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(
            format!("tree {missing}\nauthor a <a@b> 0 +0000\ncommitter a <a@b> 0 +0000\n\nx\n")
                .as_bytes(),
        )
        .expect("write");
    let out = child.wait_with_output().expect("hash-object ends");
    let commit = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    sb.git(&repo, &["update-ref", "refs/orch/keep", &commit]);
    let failures = sb.fsck_failures();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(failures[0].contains(missing), "{}", failures[0]);
    // Put it right so this test's own end-of-test check passes.
    sb.git(&repo, &["update-ref", "-d", "refs/orch/keep"]);
    sb.git(&repo, &["reflog", "expire", "--expire=now", "--all"]);
    sb.git(&repo, &["prune", "--expire=now"]);
}

/// Forges a rewrite of `writer`'s log in `repo`: the event at seq 2 (the
/// first after `init`) gets
/// other content at the same path, recommitted on the same parents, and
/// force-pushed to `remote`'s copy (the push's output is returned).
fn forge_first_event(sb: &Sandbox, repo: &Path, writer: &str) -> std::process::Output {
    let log_ref = format!("refs/orch/log/{writer}");
    let listing = sb.git(repo, &["ls-tree", "-r", &log_ref]);
    let (entry, path) = listing
        .lines()
        .map(|l| l.split_once('\t').expect("ls-tree line"))
        .find(|(_, p)| p.contains("/0000000002-"))
        .expect("seq 2");
    let blob = entry.split_whitespace().nth(2).expect("blob id");
    let genuine = sb.git(repo, &["cat-file", "-p", blob]);
    let forged = genuine.replace("\"genuine\"", "\"forged\"");
    assert_ne!(forged, genuine);
    let forged_file = sb.path().join("forged.json");
    std::fs::write(&forged_file, &forged).expect("write");
    let forged_blob = sb.git(repo, &["hash-object", "-w", &forged_file.to_string_lossy()]);
    // Rebuild the tip's tree with the forged blob at the same path.
    let index = sb.path().join("forge.index");
    let env_index = [("GIT_INDEX_FILE", index.to_string_lossy().into_owned())];
    let git_with = |args: &[&str]| {
        let out = sb
            .command("git", repo)
            .envs(env_index.iter().map(|(k, v)| (*k, v.as_str())))
            .args(args)
            .output()
            .expect("git");
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    git_with(&["read-tree", &log_ref]);
    git_with(&[
        "update-index",
        "--cacheinfo",
        &format!("100644,{forged_blob},{path}"),
    ]);
    let tree = git_with(&["write-tree"]);
    let message = sb.git(repo, &["log", "-1", "--format=%B", &log_ref]);
    let parent = sb.git(repo, &["rev-parse", &format!("{log_ref}^")]);
    let commit = sb.git(repo, &["commit-tree", &tree, "-p", &parent, "-m", &message]);
    sb.git_output(
        repo,
        &[
            "push",
            "-q",
            "--force",
            "origin",
            &format!("{commit}:{log_ref}"),
        ],
    )
}

#[test]
fn another_writers_rewritten_log_is_kept_beside_the_original_and_reported() {
    let sb = Sandbox::new();
    let (_remote, a, b) = shared_pair(&sb);
    sb.orch_ok(
        &a,
        &["debug", "append", "--label", "genuine", "--count", "2"],
    );
    sb.orch_ok(&a, &["sync"]);
    sb.orch_ok(&b, &["sync"]);
    let writer = sb.git(&a, &["config", "orch.writerId"]);
    // Someone rewrites a's first event and force-pushes it.
    let pushed = forge_first_event(&sb, &a, &writer);
    assert!(pushed.status.success(), "{}", stderr(&pushed));
    let out = sb.orch(&b, &["sync"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let text = stderr(&out);
    assert!(text.contains(&format!("writer {writer}")), "{text}");
    assert!(text.contains("both versions are kept"), "{text}");
    // Both events are there to read, the genuine one and the forgery.
    let events = log_json(&sb, &b);
    let labels: Vec<&str> = events
        .iter()
        .filter(|e| e["writer"] == writer.as_str() && e["seq"] == 2)
        .map(|e| e["label"].as_str().expect("label"))
        .collect();
    assert_eq!(labels.len(), 2, "{events:?}");
    assert!(
        labels.contains(&"genuine") && labels.contains(&"forged"),
        "{labels:?}"
    );
}

#[test]
fn with_the_server_hook_a_rewrite_never_reaches_the_remote() {
    let sb = Sandbox::new();
    let (remote, a, b) = shared_pair(&sb);
    sb.orch_ok(&remote, &["hooks", "install", "--server"]);
    sb.orch_ok(
        &a,
        &["debug", "append", "--label", "genuine", "--count", "2"],
    );
    sb.orch_ok(&a, &["sync"]);
    let writer = sb.git(&a, &["config", "orch.writerId"]);
    let pushed = forge_first_event(&sb, &a, &writer);
    assert!(!pushed.status.success(), "the hook let a rewrite in");
    assert!(
        stderr(&pushed).contains("does not descend"),
        "{}",
        stderr(&pushed)
    );
    let out = sb.orch(&b, &["sync"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = log_json(&sb, &b);
    assert!(events.iter().all(|e| e["label"] != "forged"));
}

/// Repository config is read NUL-separated: a value spanning lines (a
/// prompt preamble, a gate command) stays one value, an empty value stays
/// an empty value, and what follows is not mistaken for another key.
#[test]
fn repository_settings_with_newlines_are_read_whole() {
    let sb = Sandbox::new();
    let repo = sb.repo("cfg");
    sb.git(
        &repo,
        &["config", "orch.promptPreamble", "line one\norch.cap 99"],
    );
    sb.git(&repo, &["config", "--add", "orch.multi", "first\nsecond"]);
    sb.git(&repo, &["config", "--add", "orch.multi", ""]);
    let store = git_orch::store::Store::open(&repo).expect("open");
    let values = store.project_config(None).expect("config");
    let orch = values
        .sections
        .iter()
        .find(|s| s.name == "orch" && s.subsection.is_none())
        .expect("an [orch] section");
    assert_eq!(
        orch.values.get("promptpreamble").map(Vec::as_slice),
        Some(&["line one\norch.cap 99".to_owned()][..])
    );
    assert!(!orch.values.contains_key("cap"), "{:?}", orch.values);
    assert_eq!(
        store.config_get_all("orch.multi").expect("get-all"),
        ["first\nsecond", ""]
    );
}

/// A record of `writer` at `seq` with `clock`, as bytes: a debug marker
/// whose label is `label`.
fn record_bytes(writer: &str, seq: u64, clock: u64, label: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "version": 1, "writer": writer, "seq": seq, "clock": clock,
        "time_ms": 1_767_225_600_000_i64, "type": "debug_marker", "label": label, "n": seq,
    }))
    .expect("json")
}

/// Writes `records` (the bytes of each, seqs from 1) as one commit of a
/// new log at `reference`, with plain git but in every way as git-orch
/// writes one (its committer, trailers, paths): what a hostile clone can
/// make and send. Returns the commit.
fn forge_log(sb: &Sandbox, repo: &Path, reference: &str, records: &[Vec<u8>]) -> String {
    let writer = reference.rsplit('/').next().expect("writer");
    let index = sb.path().join("forge-log.index");
    let _ = std::fs::remove_file(&index);
    let git_with = |args: &[&str]| {
        let out = sb
            .command("git", repo)
            .env("GIT_INDEX_FILE", &index)
            .env("GIT_COMMITTER_NAME", "git-orch")
            .env("GIT_COMMITTER_EMAIL", "git-orch@localhost")
            .args(args)
            .output()
            .expect("git");
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let mut last: Option<serde_json::Value> = None;
    for (i, bytes) in records.iter().enumerate() {
        let seq = i as u64 + 1;
        let file = sb.path().join("forged-record.json");
        std::fs::write(&file, bytes).expect("write");
        let blob = sb.git(repo, &["hash-object", "-w", &file.to_string_lossy()]);
        let path = format!(
            "ev/{:02x}/{:02x}/{seq:010}-{}.json",
            seq >> 16,
            (seq >> 8) & 0xff,
            &blob[..8]
        );
        git_with(&[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("100644,{blob},{path}"),
        ]);
        last = serde_json::from_slice(bytes).ok();
    }
    let tree = git_with(&["write-tree"]);
    let clock = last.as_ref().and_then(|r| r["clock"].as_u64()).unwrap_or(1);
    let message = format!(
        "forged\n\nOrch-Writer: {writer}\nOrch-Seq: {}\nOrch-Clock: {clock}\nOrch-Events: {}\nOrch-Type: debug_marker\nOrch-Format: 1\n",
        records.len(),
        records.len()
    );
    let commit = git_with(&["commit-tree", &tree, "-m", &message]);
    sb.git(repo, &["update-ref", reference, &commit, ""]);
    commit
}

/// Another clone's log whose clock is `u64::MAX` (the largest a record can
/// say): appends here neither wrap the clock (a debug build would panic on
/// the overflow) nor sort before it; readers and fsck report the record by
/// ref, seq and path, and skip it.
#[test]
fn a_foreign_clock_at_u64_max_neither_wraps_nor_reorders_the_log() {
    let sb = Sandbox::new();
    let repo = sb.repo("r");
    sb.orch_ok(
        &repo,
        &["debug", "append", "--label", "before", "--count", "2"],
    );
    let hostile = "refs/orch/log/f0f0f0f0f0f0";
    forge_log(
        &sb,
        &repo,
        hostile,
        &[record_bytes("f0f0f0f0f0f0", 1, u64::MAX, "forged")],
    );
    let out = sb.orch(
        &repo,
        &["debug", "append", "--label", "after", "--count", "2"],
    );
    assert!(out.status.success(), "append failed: {}", stderr(&out));
    let out = sb.orch(&repo, &["log", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stderr(&out);
    assert!(
        text.contains(hostile) && text.contains("seq 1") && text.contains("clock"),
        "{text}"
    );
    let events = json_lines(&stdout(&out));
    let labels: Vec<&str> = events
        .iter()
        .map(|e| e["label"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(labels, ["before", "before", "after", "after"], "{events:?}");
    let clocks: Vec<u64> = events
        .iter()
        .map(|e| e["clock"].as_u64().expect("clock"))
        .collect();
    assert!(clocks.windows(2).all(|w| w[0] < w[1]), "{clocks:?}");
    assert!(clocks.iter().all(|c| *c < 1 << 53), "{clocks:?}");
    // The newest entries of each log, read alone, say the same.
    let out = sb.orch(&repo, &["log", "--limit", "2", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let tail = json_lines(&stdout(&out));
    assert!(tail.iter().all(|e| e["label"] == "after"), "{tail:?}");
    // fsck names the record and fails.
    let out = sb.orch(&repo, &["fsck"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stdout(&out).contains("f0f0f0f0f0f0"), "{}", stdout(&out));
}

/// The size limit of one event record (the server hook's, 1 MiB).
const MAX_EVENT_BYTES: usize = 1024 * 1024;

/// A record of `writer` at `seq` just over the size limit, its label made
/// of hex digits that do not compress (so its loose object is as large).
fn oversized_record(writer: &str, seq: u64) -> Vec<u8> {
    let mut label = String::with_capacity(MAX_EVENT_BYTES + 64);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    while label.len() <= MAX_EVENT_BYTES {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        label.push_str(&format!("{x:016x}"));
    }
    let bytes = record_bytes(writer, seq, seq, &label);
    assert!(bytes.len() > MAX_EVENT_BYTES);
    bytes
}

/// The loose object file of `id` in `repo`.
fn loose_object(repo: &Path, id: &str) -> std::path::PathBuf {
    repo.join(".git/objects").join(&id[..2]).join(&id[2..])
}

/// An event over the size limit in a log of this clone: every reader
/// (`log`, `log --limit`, the state index) skips it and says why from the
/// object's header alone (its loose object is cut short here, so reading
/// it whole would fail differently), and fsck reports it.
#[test]
fn an_event_over_the_size_limit_is_skipped_unread_and_reported_by_fsck() {
    let sb = Sandbox::new();
    let repo = sb.repo("r");
    sb.orch_ok(
        &repo,
        &["debug", "append", "--label", "own", "--count", "2"],
    );
    let writer = "f1f1f1f1f1f1";
    let reference = format!("refs/orch/log/{writer}");
    let big = oversized_record(writer, 2);
    let commit = forge_log(
        &sb,
        &repo,
        &reference,
        &[record_bytes(writer, 1, 1, "small"), big.clone()],
    );
    let listing = sb.git(&repo, &["ls-tree", "-r", &commit]);
    let blob = listing
        .lines()
        .find(|l| l.contains("/0000000002-"))
        .and_then(|l| l.split_whitespace().nth(2))
        .expect("seq 2")
        .to_owned();
    // Cut the object short: its header stays readable, its content not.
    let file = loose_object(&repo, &blob);
    let whole = std::fs::read(&file).expect("loose object");
    assert!(whole.len() > MAX_EVENT_BYTES / 2, "{}", whole.len());
    let mut perms = std::fs::metadata(&file).expect("meta").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o644);
    std::fs::set_permissions(&file, perms).expect("chmod");
    std::fs::write(&file, &whole[..4096]).expect("truncate");

    for args in [&["log", "--json"][..], &["log", "--limit", "5", "--json"]] {
        let out = sb.orch(&repo, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        let text = stderr(&out);
        assert!(
            text.contains(&reference) && text.contains("seq 2"),
            "{args:?}: {text}"
        );
        assert!(
            text.contains("at most 1048576 bytes") && !text.contains("cannot be read"),
            "{args:?}: {text}"
        );
        let labels: Vec<String> = json_lines(&stdout(&out))
            .iter()
            .map(|e| e["label"].as_str().unwrap_or("").to_owned())
            .collect();
        assert!(labels.contains(&"small".to_owned()), "{labels:?}");
        assert!(labels.iter().all(|l| l.len() < 100), "{args:?}");
    }
    // The state index reads through the same reader.
    let _ = sb.orch(&repo, &["status"]);
    let index = std::fs::read_to_string(repo.join(".git/orch/state/index.json")).expect("index");
    assert!(
        index.contains("at most 1048576 bytes") && !index.contains("cannot be read"),
        "{index}"
    );
    let out = sb.orch(&repo, &["fsck", "--json"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_str(stdout(&out).trim()).expect("json");
    let found = report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .any(|f| {
            f["check"] == "log"
                && f["subject"] == format!("{writer}:2").as_str()
                && f["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("at most 1048576 bytes"))
        });
    assert!(found, "{report:#}");
    // Whole again, for the end-of-test `git fsck`.
    std::fs::remove_file(&file).expect("rm");
    std::fs::write(&file, &whole).expect("restore");
}

/// `sync` never takes in a remote log whose new events exceed the size
/// limit: it says which writer's log and why, writes nothing for it (not
/// even the tracking copy), takes in everything else, and still pushes
/// this clone's own log.
#[test]
fn sync_refuses_a_remote_log_with_an_event_over_the_size_limit() {
    let sb = Sandbox::new();
    let (remote, a, b) = shared_pair(&sb);
    sb.orch_ok(&a, &["debug", "append", "--label", "a", "--count", "2"]);
    sb.orch_ok(&a, &["sync"]);
    let writer = "f2f2f2f2f2f2";
    let reference = format!("refs/orch/log/{writer}");
    forge_log(
        &sb,
        &a,
        &reference,
        &[
            record_bytes(writer, 1, 1, "small"),
            oversized_record(writer, 2),
        ],
    );
    sb.git(&a, &["push", "-q", "origin", &reference]);
    let tracking = format!("refs/orch-remotes/origin/log/{writer}");
    for round in 0..2 {
        sb.orch_ok(&b, &["debug", "append", "--label", "b"]);
        let out = sb.orch(&b, &["sync"]);
        assert_eq!(
            out.status.code(),
            Some(3),
            "round {round}: {}",
            stderr(&out)
        );
        let text = stderr(&out);
        assert!(
            text.contains(writer) && text.contains("1048576"),
            "round {round}: {text}"
        );
        for r in [&reference, &tracking] {
            let shown = sb.git_output(&b, &["rev-parse", "--verify", "-q", r]);
            assert!(!shown.status.success(), "round {round}: {r} was written");
        }
        // Everything else came in, and b's own log went out.
        let labels: Vec<String> = log_json(&sb, &b)
            .iter()
            .map(|e| e["label"].as_str().unwrap_or("").to_owned())
            .collect();
        assert_eq!(labels.iter().filter(|l| *l == "a").count(), 2, "{labels:?}");
        let own = format!("refs/orch/log/{}", sb.git(&b, &["config", "orch.writerId"]));
        assert_eq!(
            sb.git(&remote, &["rev-parse", &own]),
            sb.git(&b, &["rev-parse", &own]),
            "round {round}"
        );
    }
}

/// `args` run twice: with the state cache as it is, then with none (the
/// one full read): both must succeed and print the same.
fn same_as_without_cache(sb: &Sandbox, repo: &Path, args: &[&str]) -> String {
    let cached = sb.orch(repo, args);
    assert!(
        cached.status.success(),
        "{args:?} with the cache failed: {}",
        stderr(&cached)
    );
    std::fs::remove_dir_all(repo.join(".git/orch/state")).expect("rm state");
    let fresh = sb.orch_ok(repo, args);
    // Times since a running task started are the only difference allowed.
    let timeless = |text: &str| -> Vec<serde_json::Value> {
        fn strip(v: &mut serde_json::Value) {
            match v {
                serde_json::Value::Object(m) => {
                    m.remove("elapsed_ms");
                    m.values_mut().for_each(strip);
                }
                serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
                _ => {}
            }
        }
        let mut values = json_lines(text);
        values.iter_mut().for_each(strip);
        values
    };
    assert_eq!(
        timeless(&stdout(&cached)),
        timeless(&fresh),
        "{args:?}: the cache is stale"
    );
    fresh
}

/// A writer's log ref set back by hand (backward, sideways, and to a
/// commit while the one the cache was built from is gone from the
/// object database): every command still works and shows the log as it
/// is now, exactly as without the cache.
#[test]
fn the_state_cache_follows_a_log_ref_moved_back_or_sideways_by_hand() {
    let mut sb = Sandbox::new();
    let p = common::project(&mut sb, &[("a", &[], "true"), ("b", &[], "true")], None);
    p.script("a", "write src/a/done yes\n");
    p.script("b", "write src/b/done yes\n");
    sb.orch_ok(&p.repo, &["run", "proj", "--agent", "fake"]);
    let repo = &p.repo;
    let writer = sb.git(repo, &["config", "orch.writerId"]);
    let log_ref = format!("refs/orch/log/{writer}");
    let run = common::status_json(&sb, repo)["run"]
        .as_str()
        .expect("run id")
        .to_owned();
    let reads: [&[&str]; 3] = [
        &["status", "--json"],
        &["status", &run, "--json"],
        &["log", "--run", &run, "--json"],
    ];
    let tip = sb.git(repo, &["rev-parse", &log_ref]);
    // Backward: the run's last events are gone.
    sb.orch_ok(repo, &["status"]);
    sb.git(repo, &["update-ref", &log_ref, &format!("{tip}~3"), &tip]);
    for args in reads {
        same_as_without_cache(&sb, repo, args);
    }
    // Sideways: new commits on an older one, the cache at the newer.
    sb.orch_ok(repo, &["status"]);
    sb.git(repo, &["update-ref", &log_ref, &format!("{tip}~6")]);
    sb.orch_ok(repo, &["debug", "append", "--label", "sideways"]);
    for args in reads {
        same_as_without_cache(&sb, repo, args);
    }
    // The cached tip's objects lost: set back, pruned, then appended to.
    sb.orch_ok(repo, &["status"]);
    let cached = sb.git(repo, &["rev-parse", &log_ref]);
    sb.git(repo, &["update-ref", &log_ref, &format!("{tip}~8")]);
    sb.git(
        repo,
        &[
            "-c",
            "gc.reflogExpire=now",
            "-c",
            "gc.reflogExpireUnreachable=now",
            "gc",
            "-q",
            "--prune=now",
        ],
    );
    let gone = sb.git_output(repo, &["cat-file", "-e", &cached]);
    assert!(!gone.status.success(), "{cached} is still there");
    sb.orch_ok(repo, &["debug", "append", "--label", "after-loss"]);
    for args in reads {
        same_as_without_cache(&sb, repo, args);
    }
    // And with the reset ref pointing where the cache's tip was lost.
    sb.orch_ok(repo, &["status"]);
    let cached = sb.git(repo, &["rev-parse", &log_ref]);
    sb.git(repo, &["update-ref", &log_ref, &format!("{cached}~1")]);
    sb.git(
        repo,
        &[
            "-c",
            "gc.reflogExpire=now",
            "-c",
            "gc.reflogExpireUnreachable=now",
            "gc",
            "-q",
            "--prune=now",
        ],
    );
    for args in reads {
        same_as_without_cache(&sb, repo, args);
    }
}

/// The files of the state cache (`.git/orch/state/<sub>`), by name.
fn cache_files(repo: &Path, sub: &str) -> BTreeSet<String> {
    std::fs::read_dir(repo.join(".git/orch/state").join(sub))
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Time passes for the state cache: every file in it is made an hour old.
fn age_cache(repo: &Path) {
    let then = std::time::SystemTime::now() - Duration::from_secs(3600);
    for sub in ["runs", "catalog"] {
        for name in cache_files(repo, sub) {
            let path = repo.join(".git/orch/state").join(sub).join(name);
            std::fs::File::options()
                .write(true)
                .open(&path)
                .and_then(|f| f.set_modified(then))
                .expect("age a cache file");
        }
    }
}

/// The bytes of every file under `dir`.
fn bytes_under(dir: &Path) -> u64 {
    let mut total = 0;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let meta = e.metadata().expect("metadata");
        total += if meta.is_dir() {
            bytes_under(&e.path())
        } else {
            meta.len()
        };
    }
    total
}

/// A long run and many saves after it leave the state cache holding what
/// its index names and nothing else once the grace for readers of older
/// indexes has passed: one file per run, the named catalog shards. fsck
/// reports its size.
#[test]
fn a_long_run_leaves_the_state_cache_holding_only_what_its_index_names() {
    let mut sb = Sandbox::new();
    let tasks: Vec<String> = (0..12).map(|i| format!("t{i}")).collect();
    let specs: Vec<(&str, &[&str], &str)> = tasks
        .iter()
        .map(|t| (t.as_str(), &[][..], "true"))
        .collect();
    let p = common::project(&mut sb, &specs, None);
    for t in &tasks {
        p.script(t, &format!("write src/{t}/done yes\n"));
    }
    sb.orch_ok(&p.repo, &["run", "proj", "--agent", "fake"]);
    let repo = &p.repo;
    let run = common::status_json(&sb, repo)["run"]
        .as_str()
        .expect("run id")
        .to_owned();
    // Many saves, each of a changed run.
    for t in tasks.iter().take(8) {
        sb.orch_ok(repo, &["skip", t, "--run", &run]);
        sb.orch_ok(repo, &["status", &run]);
    }
    // The grace for readers of older indexes passes; the next save (of
    // an event of no run) cleans up.
    age_cache(repo);
    sb.orch_ok(repo, &["debug", "append"]);
    sb.orch_ok(repo, &["status", &run]);
    let runs = cache_files(repo, "runs");
    assert_eq!(runs.len(), 1, "one run, one run file: {runs:?}");
    let index: serde_json::Value = serde_json::from_slice(
        &std::fs::read(repo.join(".git/orch/state/index.json")).expect("index"),
    )
    .expect("index json");
    let named: BTreeSet<String> = index["shards"]
        .as_object()
        .expect("shards")
        .values()
        .map(|v| v.as_str().expect("name").to_owned())
        .collect();
    assert_eq!(cache_files(repo, "catalog"), named);
    // fsck says how large the cache is, in words and in JSON.
    let bytes = bytes_under(&repo.join(".git/orch/state"));
    let out = sb.orch(repo, &["fsck", "--json"]);
    let report: serde_json::Value = serde_json::from_str(stdout(&out).trim()).expect("json");
    let cache = &report["checked"]["state_cache"];
    assert_eq!(cache["runs"], 1, "{report:#}");
    // fsck itself may save nothing; the size is what it saw.
    assert_eq!(cache["bytes"].as_u64(), Some(bytes), "{report:#}");
    let out = sb.orch(repo, &["fsck"]);
    assert!(stderr(&out).contains("state cache"), "{}", stderr(&out));
}

/// A reader that loaded the cache's index just before a cleanup removed
/// the files it names reads the state as it is, not an error: it reads the
/// newest index again.
#[test]
fn a_reader_whose_cache_files_were_cleaned_up_meanwhile_reads_correct_state() {
    let mut sb = Sandbox::new();
    let p = common::project(&mut sb, &[("a", &[], "true"), ("b", &[], "true")], None);
    p.script("a", "write src/a/done yes\n");
    p.script("b", "write src/b/done yes\n");
    sb.orch_ok(&p.repo, &["run", "proj", "--agent", "fake"]);
    let repo = &p.repo;
    let run = common::status_json(&sb, repo)["run"]
        .as_str()
        .expect("run id")
        .to_owned();
    sb.orch_ok(repo, &["status", &run]);
    let named_then = cache_files(repo, "runs");
    // A reader stops right after loading the index.
    let marker = sb.path().join("failpoint");
    let reader = sb
        .command("git", repo)
        .args(["orch", "status", &run, "--json"])
        .env("ORCH_FAILPOINTS", "state.index-read=wait@1")
        .env("ORCH_FAILPOINT_FILE", &marker)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("reader");
    common::wait_until(
        "the reader to load the index",
        Duration::from_secs(30),
        || marker.exists(),
    );
    // Meanwhile the run changes twice, and the grace passes between.
    sb.orch_ok(repo, &["retry", "a", "--run", &run]);
    sb.orch_ok(repo, &["status", &run]);
    age_cache(repo);
    sb.orch_ok(repo, &["skip", "b", "--run", &run]);
    sb.orch_ok(repo, &["status", &run]);
    let now = cache_files(repo, "runs");
    assert!(
        named_then.is_disjoint(&now),
        "the reader's files were not cleaned up: {named_then:?} {now:?}"
    );
    std::fs::remove_file(&marker).expect("release the reader");
    let out = reader.wait_with_output().expect("reader");
    assert!(out.status.success(), "the reader failed: {}", stderr(&out));
    let read = stdout(&out);
    assert!(read.contains("\"state\":\"open\""), "{read}");
    // What it printed is the state as it is now.
    std::fs::remove_dir_all(repo.join(".git/orch/state")).expect("rm");
    let fresh = sb.orch_ok(repo, &["status", &run, "--json"]);
    let without_times = |text: &str| {
        let mut v: serde_json::Value = serde_json::from_str(text.trim()).expect("json");
        for t in v["tasks"].as_array_mut().expect("tasks") {
            t.as_object_mut().expect("task").remove("elapsed_ms");
        }
        v
    };
    assert_eq!(without_times(&read), without_times(&fresh));
}
