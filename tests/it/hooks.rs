//! Git hook gates (docs/hooks.md): real git, a real bare remote, real
//! pushes through `git push` with the hooks installed, and git-orch on
//! PATH as `git orch`.

use crate::common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use common::{Project, Sandbox, project, stderr};

/// A project with one task, its `main` published on a bare remote
/// (`origin`) before any hook is installed, and state sharing set up.
fn served(sb: &mut Sandbox) -> (Project, PathBuf) {
    let p = project(sb, &[("t0", &[], "test -f src/t0/done")], None);
    let srv = sb.bare("srv.git");
    sb.git(
        &p.repo,
        &["remote", "add", "origin", &srv.to_string_lossy()],
    );
    sb.git(&p.repo, &["push", "-q", "origin", "main"]);
    sb.orch_ok(&p.repo, &["init", "--remote", "origin"]);
    (p, srv)
}

/// Runs the project's one task to landing on `main`.
fn land(sb: &Sandbox, p: &Project) {
    p.script("t0", "write src/t0/done yes\ncommit t0 work\n");
    sb.orch_ok(&p.repo, &["run", "proj", "--agent", "fake"]);
}

/// A commit made by hand on `main`, returning its id.
fn hand_commit(sb: &Sandbox, repo: &Path, name: &str) -> String {
    std::fs::write(repo.join(name), "by hand\n").expect("write");
    sb.git(repo, &["add", name]);
    sb.git(repo, &["commit", "-q", "-m", &format!("hand-made {name}")]);
    sb.git(repo, &["rev-parse", "HEAD"])
}

/// Runs `program args` in `cwd` with `input` on stdin.
fn with_stdin(sb: &Sandbox, program: &str, cwd: &Path, args: &[&str], input: &[u8]) -> Output {
    let mut child = sb
        .command(program, cwd)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawns");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input)
        .expect("write stdin");
    child.wait_with_output().expect("waits")
}

/// Writes a blob, returning its id.
fn blob(sb: &Sandbox, repo: &Path, bytes: &[u8]) -> String {
    let out = with_stdin(sb, "git", repo, &["hash-object", "-w", "--stdin"], bytes);
    assert!(out.status.success(), "{}", stderr(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Writes a tree from `git mktree` lines.
fn mktree(sb: &Sandbox, repo: &Path, lines: &[String]) -> String {
    let mut input = lines.join("\n");
    input.push('\n');
    let out = with_stdin(sb, "git", repo, &["mktree"], input.as_bytes());
    assert!(out.status.success(), "{}", stderr(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A log commit made by hand, whose tree holds one file at `path`
/// (`a/b/c`) with `bytes`, and git-orch's trailers.
fn hand_log_commit(sb: &Sandbox, repo: &Path, path: &str, bytes: &[u8]) -> String {
    let id = blob(sb, repo, bytes);
    let mut parts: Vec<&str> = path.split('/').collect();
    let file = parts.pop().expect("a file name");
    let mut tree = mktree(sb, repo, &[format!("100644 blob {id}\t{file}")]);
    while let Some(dir) = parts.pop() {
        tree = mktree(sb, repo, &[format!("040000 tree {tree}\t{dir}")]);
    }
    sb.git(
        repo,
        &[
            "commit-tree",
            &tree,
            "-m",
            "1 event: forged\n\nOrch-Writer: badbadbadbad\nOrch-Seq: 1\nOrch-Clock: 1\nOrch-Events: 1\nOrch-Type: debug_marker\nOrch-Format: 1",
        ],
    )
}

fn ok(out: &Output) -> bool {
    out.status.success()
}

fn writer(sb: &Sandbox, repo: &Path) -> String {
    sb.git(repo, &["config", "orch.writerId"])
}

#[test]
fn a_landing_pushed_with_its_log_passes_both_hooks() {
    let mut sb = Sandbox::new();
    let (p, srv) = served(&mut sb);
    // A relative -C works (gix's discovery needs an absolute start).
    sb.orch_ok(
        &p.repo,
        &["-C", "../srv.git", "hooks", "install", "--server"],
    );
    assert!(srv.join("hooks/pre-receive").exists());
    sb.orch_ok(&p.repo, &["hooks", "install"]);
    land(&sb, &p);
    // The queue's way: the log that records the landing, the plan and its
    // approval, and the target, in one atomic push.
    let out = sb.git_output(
        &p.repo,
        &[
            "push",
            "--atomic",
            "origin",
            "refs/orch/*:refs/orch/*",
            "main",
        ],
    );
    assert!(ok(&out), "{}", stderr(&out));
    assert_eq!(
        sb.git(&srv, &["rev-parse", "main"]),
        sb.git(&p.repo, &["rev-parse", "main"])
    );
    let w = writer(&sb, &p.repo);
    assert_eq!(
        sb.git(&srv, &["rev-parse", &format!("refs/orch/log/{w}")]),
        sb.git(&p.repo, &["rev-parse", &format!("refs/orch/log/{w}")])
    );
}

#[test]
fn a_landing_pushed_after_sync_is_accepted_and_the_servers_own_hook_still_runs() {
    let mut sb = Sandbox::new();
    let (p, srv) = served(&mut sb);
    // The server already has a pre-receive hook; it keeps seeing every push.
    let seen = sb.path().join("server-saw");
    std::fs::write(
        srv.join("hooks/pre-receive"),
        format!(
            "#!/bin/sh
cat >> '{}'
",
            seen.display()
        ),
    )
    .expect("hook");
    set_mode(&srv.join("hooks/pre-receive"), 0o755);
    sb.orch_ok(&srv, &["hooks", "install", "--server"]);
    land(&sb, &p);
    sb.orch_ok(&p.repo, &["sync"]);
    let out = sb.git_output(&p.repo, &["push", "origin", "main"]);
    assert!(ok(&out), "{}", stderr(&out));
    let main = sb.git(&p.repo, &["rev-parse", "main"]);
    assert_eq!(sb.git(&srv, &["rev-parse", "main"]), main);
    let saw = std::fs::read_to_string(&seen).expect("the server's hook ran");
    assert!(saw.contains(&format!(" {main} refs/heads/main")), "{saw}");
    assert!(saw.contains(" refs/orch/log/"), "{saw}");
    sb.orch_ok(&srv, &["hooks", "uninstall", "--server"]);
    assert!(!srv.join("hooks/pre-receive.orch-chained").exists());
    assert!(
        std::fs::read_to_string(srv.join("hooks/pre-receive"))
            .expect("restored")
            .contains("cat >>")
    );
}

#[test]
fn the_server_refuses_a_hand_made_commit_on_the_target_and_its_deletion() {
    let mut sb = Sandbox::new();
    let (p, srv) = served(&mut sb);
    sb.orch_ok(&srv, &["hooks", "install", "--server"]);
    let before = sb.refs(&srv);
    let commit = hand_commit(&sb, &p.repo, "hand.txt");
    // Even pushed together with the whole log, a commit no landing
    // records is refused, and so is everything else in the push.
    let out = sb.git_output(
        &p.repo,
        &["push", "origin", "refs/orch/*:refs/orch/*", "main"],
    );
    assert!(!ok(&out));
    let err = stderr(&out);
    assert!(err.contains(&commit[..12]), "{err}");
    assert!(err.contains("is not a verified git-orch landing"), "{err}");
    assert!(err.contains("made by hand"), "{err}");
    assert!(err.contains("hint: land changes through git-orch"), "{err}");
    assert_eq!(sb.refs(&srv), before, "all or nothing");
    // Deleting or rewinding the protected branch is refused too.
    let out = sb.git_output(&p.repo, &["push", "origin", ":main"]);
    assert!(!ok(&out));
    assert!(
        stderr(&out).contains("may not be deleted"),
        "{}",
        stderr(&out)
    );
    // Feature branches are not the hook's business.
    let out = sb.git_output(&p.repo, &["push", "origin", "main:feature/x"]);
    assert!(ok(&out), "{}", stderr(&out));
}

/// A landing whose content leaves the owned globs of the subtask it
/// landed, while the log says that subtask's scope gate passed: the server
/// re-reads the content and refuses it. Judged from the server's state
/// cache (kept warm from its real refs before each push) plus what the
/// push adds, and again with no cache at all.
#[test]
fn the_server_refuses_a_landing_whose_content_leaves_the_owned_globs() {
    use git_orch::event::Event;
    let mut sb = Sandbox::new();
    let (p, srv) = served(&mut sb);
    sb.orch_ok(&srv, &["hooks", "install", "--server"]);
    land(&sb, &p);
    let push = [
        "push",
        "--atomic",
        "origin",
        "refs/orch/*:refs/orch/*",
        "main",
    ];
    let out = sb.git_output(&p.repo, &push);
    assert!(ok(&out), "{}", stderr(&out));
    assert!(
        srv.join("orch/state/index.json").is_file(),
        "the server keeps its state cache warm"
    );
    let status = common::status_json(&sb, &p.repo);
    let run = git_orch::ids::RunId::new(status["run"].as_str().expect("run")).expect("id");
    let old = sb.git(&p.repo, &["rev-parse", "main"]);
    // A commit changing a path t0 does not own, recorded as t0's landing.
    let forged = hand_commit(&sb, &p.repo, "outside.txt");
    let store = git_orch::store::Store::open(&p.repo).expect("store");
    store
        .append(vec![Event::Landed {
            run_id: run,
            task: git_orch::ids::TaskId::new("t0").expect("id"),
            attempt: 1,
            target: "main".into(),
            old: old.parse().expect("hex"),
            new: forged.parse().expect("hex"),
            strategy: "rebase".into(),
            commits: vec![forged.parse().expect("hex")],
        }])
        .expect("append");
    for cache in ["warm", "deleted"] {
        if cache == "deleted" {
            std::fs::remove_dir_all(srv.join("orch/state")).expect("rm cache");
        }
        let before = sb.refs(&srv);
        let out = sb.git_output(&p.repo, &push);
        assert!(!ok(&out), "{cache} cache: accepted");
        let err = stderr(&out);
        assert!(err.contains(&forged[..12]), "{cache} cache: {err}");
        assert!(
            err.contains("outside their owned globs (outside.txt)"),
            "{cache} cache: {err}"
        );
        assert_eq!(sb.refs(&srv), before, "all or nothing");
    }
}

#[test]
fn the_server_refuses_rewinding_or_deleting_orch_refs() {
    let mut sb = Sandbox::new();
    let (p, srv) = served(&mut sb);
    sb.orch_ok(&p.repo, &["sync"]);
    sb.orch_ok(&srv, &["hooks", "install", "--server"]);
    let before = sb.refs(&srv);
    let w = writer(&sb, &p.repo);
    let log = format!("refs/orch/log/{w}");
    let out = sb.git_output(&p.repo, &["push", "origin", &format!("+{log}~1:{log}")]);
    assert!(!ok(&out));
    assert!(
        stderr(&out).contains("does not descend from it"),
        "{}",
        stderr(&out)
    );
    for gone in [log.as_str(), "refs/orch/plans/proj"] {
        let out = sb.git_output(&p.repo, &["push", "origin", &format!(":{gone}")]);
        assert!(!ok(&out), "{gone}");
        assert!(
            stderr(&out).contains("would lose git-orch state"),
            "{}",
            stderr(&out)
        );
    }
    // A tracking copy is never pushed: on a server it would feed unchecked
    // events to verify.
    let out = sb.git_output(
        &p.repo,
        &[
            "push",
            "origin",
            &format!("{log}:refs/orch-remotes/x/log/{w}"),
        ],
    );
    assert!(!ok(&out));
    assert!(stderr(&out).contains("never pushed"), "{}", stderr(&out));
    // A ref under refs/orch/ must hold a commit.
    let tree = sb.git(&p.repo, &["rev-parse", "main^{tree}"]);
    let out = sb.git_output(
        &p.repo,
        &["push", "origin", &format!("{tree}:refs/orch/keep")],
    );
    assert!(!ok(&out));
    assert!(
        stderr(&out).contains("must point at a commit"),
        "{}",
        stderr(&out)
    );
    assert_eq!(sb.refs(&srv), before);
}

#[test]
fn the_server_refuses_malformed_events() {
    let mut sb = Sandbox::new();
    let (p, srv) = served(&mut sb);
    sb.orch_ok(&srv, &["hooks", "install", "--server"]);
    let before = sb.refs(&srv);
    let cases: Vec<(&str, String, Vec<u8>, &str)> = vec![
        (
            "garbage",
            "ev/00/00/0000000001-00000000.json".into(),
            b"this is not json".to_vec(),
            "is not JSON",
        ),
        (
            "oversize",
            "ev/00/00/0000000001-00000000.json".into(),
            vec![b'x'; 1024 * 1024 + 1],
            "an event may be at most 1048576 bytes",
        ),
        (
            "outside",
            "notes/readme.txt".into(),
            b"hello".to_vec(),
            "outside ev/",
        ),
        (
            "future",
            "ev/00/00/0000000001-00000000.json".into(),
            br#"{"version":9,"writer":"badbadbadbad","seq":1,"clock":1,"time_ms":0,"type":"debug_marker","label":"x","n":1}"#.to_vec(),
            "format version 9",
        ),
    ];
    for (name, path, bytes, expect) in cases {
        let commit = hand_log_commit(&sb, &p.repo, &path, &bytes);
        let out = sb.git_output(
            &p.repo,
            &[
                "push",
                "origin",
                &format!("{commit}:refs/orch/log/badbadbadbad"),
            ],
        );
        assert!(!ok(&out), "{name}");
        assert!(stderr(&out).contains(expect), "{name}: {}", stderr(&out));
        assert_eq!(sb.refs(&srv), before, "{name}");
    }
    // A well-formed record in the wrong place is refused too: its name must
    // say its seq and blob.
    let record = br#"{"version":1,"writer":"badbadbadbad","seq":1,"clock":1,"time_ms":0,"type":"debug_marker","label":"x","n":1}"#;
    let commit = hand_log_commit(&sb, &p.repo, "ev/00/00/0000000007-00000000.json", record);
    let out = sb.git_output(
        &p.repo,
        &[
            "push",
            "origin",
            &format!("{commit}:refs/orch/log/badbadbadbad"),
        ],
    );
    assert!(!ok(&out));
    assert!(
        stderr(&out).contains("which belongs at ev/00/00/0000000001-"),
        "{}",
        stderr(&out)
    );
    // A record whose clock is above the ceiling (2^53 - 1), in its place,
    // is refused: every clone would sort it after all else, for ever.
    let hostile = br#"{"version":1,"writer":"badbadbadbad","seq":1,"clock":18446744073709551615,"time_ms":0,"type":"debug_marker","label":"x","n":1}"#;
    let id = blob(&sb, &p.repo, hostile);
    let path = format!("ev/00/00/0000000001-{}.json", &id[..8]);
    let commit = hand_log_commit(&sb, &p.repo, &path, hostile);
    let out = sb.git_output(
        &p.repo,
        &[
            "push",
            "origin",
            &format!("{commit}:refs/orch/log/badbadbadbad"),
        ],
    );
    assert!(!ok(&out));
    assert!(
        stderr(&out).contains("above the ceiling"),
        "{}",
        stderr(&out)
    );
    assert_eq!(sb.refs(&srv), before);
    // The same record where git-orch would put it is accepted.
    let id = blob(&sb, &p.repo, record);
    let path = format!("ev/00/00/0000000001-{}.json", &id[..8]);
    let commit = hand_log_commit(&sb, &p.repo, &path, record);
    let out = sb.git_output(
        &p.repo,
        &[
            "push",
            "origin",
            &format!("{commit}:refs/orch/log/badbadbadbad"),
        ],
    );
    assert!(ok(&out), "{}", stderr(&out));
}

#[test]
fn the_client_refuses_pushing_an_unverified_target_and_nothing_else() {
    let mut sb = Sandbox::new();
    let (p, srv) = served(&mut sb);
    sb.orch_ok(&p.repo, &["hooks", "install"]);
    // State refs and feature branches pass.
    let out = sb.git_output(&p.repo, &["push", "origin", "refs/orch/*:refs/orch/*"]);
    assert!(ok(&out), "{}", stderr(&out));
    sb.git(&p.repo, &["checkout", "-q", "-b", "feature"]);
    hand_commit(&sb, &p.repo, "feature.txt");
    let out = sb.git_output(&p.repo, &["push", "origin", "feature"]);
    assert!(ok(&out), "{}", stderr(&out));
    // The target, moved by hand, does not.
    sb.git(&p.repo, &["checkout", "-q", "main"]);
    let before = sb.git(&srv, &["rev-parse", "main"]);
    let commit = hand_commit(&sb, &p.repo, "hand.txt");
    let out = sb.git_output(&p.repo, &["push", "origin", "main"]);
    assert!(!ok(&out));
    let err = stderr(&out);
    assert!(err.contains("git-orch pre-push: refs/heads/main"), "{err}");
    assert!(err.contains(&commit[..12]), "{err}");
    assert!(err.contains("hand-made hand.txt"), "{err}");
    assert!(
        err.contains("hint: land changes on a protected branch"),
        "{err}"
    );
    assert_eq!(sb.git(&srv, &["rev-parse", "main"]), before);
    // A landed target passes.
    sb.git(&p.repo, &["reset", "-q", "--hard", "HEAD~1"]);
    land(&sb, &p);
    let out = sb.git_output(&p.repo, &["push", "origin", "main"]);
    assert!(ok(&out), "{}", stderr(&out));
}

#[test]
fn protection_follows_orch_protect() {
    let mut sb = Sandbox::new();
    let (p, _srv) = served(&mut sb);
    sb.orch_ok(&p.repo, &["hooks", "install"]);
    sb.git(&p.repo, &["config", "--add", "orch.protect", "release/*"]);
    sb.git(&p.repo, &["config", "--add", "orch.protect", "stable"]);
    // main is no longer protected; release/* and stable are.
    hand_commit(&sb, &p.repo, "hand.txt");
    let out = sb.git_output(&p.repo, &["push", "origin", "main"]);
    assert!(ok(&out), "{}", stderr(&out));
    for target in ["main:release/1.0", "main:stable"] {
        let out = sb.git_output(&p.repo, &["push", "origin", target]);
        assert!(!ok(&out), "{target}");
        assert!(
            stderr(&out).contains("hand-made hand.txt"),
            "{}",
            stderr(&out)
        );
    }
}

#[test]
fn install_chains_an_existing_hook_twice_over_and_uninstall_restores_it() {
    let mut sb = Sandbox::new();
    let (p, _srv) = served(&mut sb);
    let hooks = p.repo.join(".git/hooks");
    let seen = sb.path().join("seen");
    let original = format!(
        "#!/bin/sh\n# the user's own hook\necho \"$1\" >> '{}'\ncat >> '{}'\n",
        seen.display(),
        seen.display()
    );
    std::fs::write(hooks.join("pre-push"), &original).expect("hook");
    set_mode(&hooks.join("pre-push"), 0o750);
    sb.orch_ok(&p.repo, &["hooks", "install"]);
    let out = sb.orch(&p.repo, &["hooks", "install"]);
    assert!(ok(&out));
    assert!(
        stderr(&out).contains("Already installed"),
        "{}",
        stderr(&out)
    );
    let chained = hooks.join("pre-push.orch-chained");
    assert_eq!(
        std::fs::read_to_string(&chained).expect("chained"),
        original
    );
    assert!(
        !std::fs::read_to_string(&chained)
            .expect("chained")
            .contains("git-orch-shim"),
        "never chains itself"
    );
    // The user's hook still runs, first, with the same stdin.
    sb.git(&p.repo, &["checkout", "-q", "-b", "feature"]);
    hand_commit(&sb, &p.repo, "feature.txt");
    let out = sb.git_output(&p.repo, &["push", "origin", "feature"]);
    assert!(ok(&out), "{}", stderr(&out));
    let log = std::fs::read_to_string(&seen).expect("the user's hook ran");
    assert!(log.starts_with("origin\n"), "{log}");
    assert!(log.contains("refs/heads/feature "), "{log}");
    // The chained hook failing stops the push.
    std::fs::write(&chained, "#!/bin/sh\necho nope >&2\nexit 7\n").expect("hook");
    hand_commit(&sb, &p.repo, "feature2.txt");
    let out = sb.git_output(&p.repo, &["push", "origin", "feature"]);
    assert!(!ok(&out));
    assert!(stderr(&out).contains("nope"));
    std::fs::write(&chained, &original).expect("hook");
    set_mode(&chained, 0o750);
    // Uninstall puts it back byte for byte, with its mode.
    sb.orch_ok(&p.repo, &["hooks", "uninstall"]);
    assert_eq!(
        std::fs::read_to_string(hooks.join("pre-push")).expect("restored"),
        original
    );
    assert_eq!(mode(&hooks.join("pre-push")), 0o750);
    assert!(!chained.exists());
    // Without an earlier hook, uninstall removes ours.
    std::fs::remove_file(hooks.join("pre-push")).expect("rm");
    sb.orch_ok(&p.repo, &["hooks", "install"]);
    assert!(hooks.join("pre-push").exists());
    sb.orch_ok(&p.repo, &["hooks", "uninstall"]);
    assert!(!hooks.join("pre-push").exists());
    let out = sb.orch(&p.repo, &["hooks", "uninstall"]);
    assert!(ok(&out));
    assert!(stderr(&out).contains("nothing to do"), "{}", stderr(&out));
}

#[test]
fn install_honours_core_hooks_path() {
    let mut sb = Sandbox::new();
    let (p, srv) = served(&mut sb);
    sb.git(&p.repo, &["config", "core.hooksPath", "githooks"]);
    sb.orch_ok(&p.repo, &["hooks", "install"]);
    let shim = p.repo.join("githooks/pre-push");
    assert!(shim.exists());
    assert!(!p.repo.join(".git/hooks/pre-push").exists());
    let before = sb.git(&srv, &["rev-parse", "main"]);
    hand_commit(&sb, &p.repo, "hand.txt");
    let out = sb.git_output(&p.repo, &["push", "origin", "main"]);
    assert!(!ok(&out), "git runs the hook from core.hooksPath");
    assert_eq!(sb.git(&srv, &["rev-parse", "main"]), before);
    sb.orch_ok(&p.repo, &["hooks", "uninstall"]);
    assert!(!shim.exists());
}

#[test]
fn the_worktree_hook_keeps_hand_made_attempt_commits_in_scope() {
    let mut sb = Sandbox::new();
    let (p, _srv) = served(&mut sb);
    sb.orch_ok(&p.repo, &["hooks", "install", "--worktree"]);
    assert!(p.repo.join(".git/hooks/pre-commit").exists());
    // Runs here keep their attempt branches for the person to finish.
    sb.git(&p.repo, &["config", "orch.cleanup", "never"]);
    land(&sb, &p);
    // A person finishes the attempt by hand in its worktree, on its branch.
    let created = common::events(&sb, &p.repo)
        .into_iter()
        .find(|e| e["type"] == "attempt_created" && e["task"] == "t0" && e["attempt"] == 1)
        .expect("t0's attempt 1");
    let worktree = PathBuf::from(created["worktree"].as_str().expect("worktree"));
    let branch = created["branch"].as_str().expect("branch");
    assert_eq!(
        sb.git(&worktree, &["symbolic-ref", "--short", "HEAD"]),
        branch
    );
    std::fs::write(worktree.join("outside.txt"), "x").expect("write");
    sb.git(&worktree, &["add", "outside.txt"]);
    let out = sb.git_output(&worktree, &["commit", "-q", "-m", "out of scope"]);
    assert!(!ok(&out));
    assert!(stderr(&out).contains("outside.txt"), "{}", stderr(&out));
    sb.git(&worktree, &["reset", "-q"]);
    std::fs::write(worktree.join("src/t0/more"), "x").expect("write");
    sb.git(&worktree, &["add", "src/t0/more"]);
    let out = sb.git_output(&worktree, &["commit", "-q", "-m", "in scope"]);
    assert!(ok(&out), "{}", stderr(&out));
    // Outside attempt worktrees it accepts at once.
    hand_commit(&sb, &p.repo, "anything.txt");
    sb.orch_ok(&p.repo, &["hooks", "uninstall"]);
    assert!(!p.repo.join(".git/hooks/pre-commit").exists());
}

#[test]
fn hostile_input_gets_a_clear_error_and_changes_nothing() {
    let mut sb = Sandbox::new();
    let (p, srv) = served(&mut sb);
    for (dir, args) in [
        (&srv, vec!["orch", "hook", "pre-receive"]),
        (&p.repo, vec!["orch", "hook", "pre-push", "origin", "url"]),
    ] {
        for input in [
            &b"garbage\n"[..],
            b"0000 1111 refs/heads/main\n",
            b"a b c d e f\n",
            b"\xff\xfe\x00\x01\n",
        ] {
            let out = with_stdin(&sb, "git", dir, &args, input);
            assert_eq!(out.status.code(), Some(1), "{args:?} {input:?}");
            let err = stderr(&out);
            assert!(err.starts_with("error: "), "{err}");
            assert!(err.contains("hook's input"), "{err}");
        }
    }
    // No input at all is a push of nothing.
    let out = with_stdin(&sb, "git", &srv, &["orch", "hook", "pre-receive"], b"");
    assert!(ok(&out), "{}", stderr(&out));
    // An unknown hook name is a usage error.
    let out = sb.orch(&p.repo, &["hook", "post-checkout"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("post-checkout"), "{}", stderr(&out));
    // Installing outside a repository, or in the wrong kind, writes nothing.
    let empty = sb.path().join("not-a-repo");
    std::fs::create_dir_all(&empty).expect("mkdir");
    let out = sb.orch(&empty, &["hooks", "install"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("not a git repository"),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read_dir(&empty).expect("ls").count(), 0);
    let before = std::fs::read_dir(srv.join("hooks")).expect("ls").count();
    let out = sb.orch(&srv, &["hooks", "install"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--server"), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_dir(srv.join("hooks")).expect("ls").count(),
        before
    );
    let out = sb.orch(&p.repo, &["hooks", "install", "--server"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!p.repo.join(".git/hooks/pre-receive").exists());
    assert!(!p.repo.join(".git/hooks/pre-push").exists());
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).expect("meta").permissions().mode() & 0o777
}
