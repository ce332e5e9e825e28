//! `git orch land <branch>`: a person's branch through the merge queue,
//! with an approval bound to the branch's exact tree
//! (`git orch approve --branch`). What lands is gated and recorded so that
//! `verify` and the server's pre-receive hook accept it; an unapproved
//! branch, or one changed after approval, is refused with exit 3, and
//! hostile names are refused with nothing written.

use crate::common;

use std::path::{Path, PathBuf};

use common::{Sandbox, json_lines, stderr, stdout};

/// A repository whose integration gate needs `hotfix.txt` to say `fixed`,
/// initialised, with a branch `hotfix` (one commit adding it) and `main`
/// checked out.
fn repo_with_hotfix(sb: &Sandbox) -> PathBuf {
    let repo = sb.repo("r");
    std::fs::create_dir_all(repo.join(".orch")).expect("mkdir");
    std::fs::write(
        repo.join(".orch/config"),
        "[integration]\n    run = grep -q fixed hotfix.txt\n",
    )
    .expect("config");
    sb.git(&repo, &["add", "."]);
    sb.git(&repo, &["commit", "-q", "-m", "gate config"]);
    sb.orch_ok(&repo, &["init"]);
    sb.git(&repo, &["checkout", "-q", "-b", "hotfix"]);
    commit(sb, &repo, "hotfix.txt", "fixed\n", "Fix the thing");
    sb.git(&repo, &["checkout", "-q", "main"]);
    repo
}

fn commit(sb: &Sandbox, repo: &Path, file: &str, text: &str, message: &str) -> String {
    std::fs::write(repo.join(file), text).expect("write");
    sb.git(repo, &["add", file]);
    sb.git(repo, &["commit", "-q", "-m", message]);
    sb.git(repo, &["rev-parse", "HEAD"])
}

fn events(sb: &Sandbox, repo: &Path, kind: &str) -> Vec<serde_json::Value> {
    json_lines(&sb.orch_ok(repo, &["log", "--json"]))
        .into_iter()
        .filter(|e| e["type"] == kind)
        .collect()
}

#[test]
fn an_approved_branch_lands_through_the_queue_and_verify_accepts_it() {
    let sb = Sandbox::new();
    let repo = repo_with_hotfix(&sb);
    let before = sb.git(&repo, &["rev-parse", "main"]);
    // Not approved yet: refused, nothing moves.
    let out = sb.orch(&repo, &["land", "hotfix"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("not approved"), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("git orch approve --branch hotfix"),
        "{}",
        stderr(&out)
    );
    assert_eq!(sb.git(&repo, &["rev-parse", "main"]), before);
    // Approve it; approving the same tree again records nothing.
    let out = sb.orch(&repo, &["approve", "--branch", "hotfix"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("git orch land hotfix"),
        "{}",
        stderr(&out)
    );
    let again = sb.orch(&repo, &["approve", "--branch", "hotfix"]);
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(
        stderr(&again).contains("already approved"),
        "{}",
        stderr(&again)
    );
    assert_eq!(events(&sb, &repo, "branch_approved").len(), 1);
    // Land: gated, recorded, the target and its checkout moved.
    let out = sb.orch(&repo, &["land", "hotfix", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let landed: serde_json::Value = serde_json::from_str(stdout(&out).trim()).expect("json");
    let main = sb.git(&repo, &["rev-parse", "main"]);
    assert_eq!(landed["new"], main.as_str());
    assert_eq!(landed["old"], before.as_str());
    assert_eq!(landed["strategy"], "rebase");
    assert_eq!(landed["verdicts"][0]["status"], "pass", "{landed}");
    assert_eq!(
        std::fs::read_to_string(repo.join("hotfix.txt")).expect("checkout moved"),
        "fixed\n"
    );
    assert_eq!(
        sb.git(&repo, &["log", "-1", "--format=%s", "main"]),
        "Fix the thing"
    );
    let record = &events(&sb, &repo, "branch_landed")[0];
    assert_eq!(record["branch"], "hotfix");
    assert_eq!(record["new"], main.as_str());
    // verify accepts every commit the landing added, by its record.
    let out = sb.orch(&repo, &["verify", &format!("{before}..main"), "--json"]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let checks = json_lines(&stdout(&out));
    assert_eq!(checks.len(), 1, "{checks:?}");
    assert_eq!(checks[0]["ok"], true, "{checks:?}");
    assert_eq!(checks[0]["branch"], "hotfix");
    // Landing it again: nothing to land.
    let out = sb.orch(&repo, &["land", "hotfix"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("nothing to land"), "{}", stderr(&out));
}

#[test]
fn a_branch_changed_after_approval_or_failing_the_gate_is_refused_with_exit_3() {
    let sb = Sandbox::new();
    let repo = repo_with_hotfix(&sb);
    sb.orch_ok(&repo, &["approve", "--branch", "hotfix"]);
    // One more commit after the approval: another tree.
    sb.git(&repo, &["checkout", "-q", "hotfix"]);
    commit(&sb, &repo, "extra.txt", "sneaked in\n", "Sneak");
    sb.git(&repo, &["checkout", "-q", "main"]);
    let before = sb.refs(&repo);
    let out = sb.orch(&repo, &["land", "hotfix"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("changed after it was approved"),
        "{}",
        stderr(&out)
    );
    assert_eq!(sb.refs(&repo), before, "nothing moved");
    assert!(events(&sb, &repo, "branch_landed").is_empty());
    // Approved again, but the integration gate fails on the candidate.
    sb.git(&repo, &["checkout", "-q", "hotfix"]);
    commit(&sb, &repo, "hotfix.txt", "broken\n", "Break it");
    sb.git(&repo, &["checkout", "-q", "main"]);
    sb.orch_ok(&repo, &["approve", "--branch", "hotfix"]);
    let main = sb.git(&repo, &["rev-parse", "main"]);
    let out = sb.orch(&repo, &["land", "hotfix"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the integration gate failed"),
        "{}",
        stderr(&out)
    );
    assert_eq!(sb.git(&repo, &["rev-parse", "main"]), main);
    assert!(events(&sb, &repo, "branch_landed").is_empty());
}

#[test]
fn hostile_branch_names_are_refused_and_write_nothing() {
    let sb = Sandbox::new();
    let repo = repo_with_hotfix(&sb);
    sb.git(&repo, &["tag", "v1", "hotfix"]);
    let refs = sb.refs(&repo);
    let log = sb.orch_ok(&repo, &["log", "--json"]);
    for (args, code, says) in [
        (vec!["land", "--", "--force"], 2, "reads as an option"),
        (vec!["land", "refs/tags/v1"], 1, "only local branches"),
        (
            vec!["land", "refs/remotes/origin/main"],
            1,
            "only local branches",
        ),
        (vec!["land", "bad..name"], 1, "not a valid branch name"),
        (vec!["land", "nosuch"], 1, "no branch nosuch"),
        (
            vec!["land", "hotfix", "--target", "hotfix"],
            2,
            "land on itself",
        ),
        (vec!["approve", "--branch=-x"], 2, "reads as an option"),
        (
            vec!["approve", "--branch", "refs/tags/v1"],
            1,
            "only local branches",
        ),
    ] {
        let out = sb.orch(&repo, &args);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
    assert_eq!(sb.refs(&repo), refs, "a refused command wrote refs");
    assert_eq!(sb.orch_ok(&repo, &["log", "--json"]), log, "events written");
}

#[test]
fn the_server_hook_accepts_a_hand_landing_pushed_with_its_log() {
    let sb = Sandbox::new();
    let repo = repo_with_hotfix(&sb);
    let srv = sb.bare("srv.git");
    sb.git(&repo, &["remote", "add", "origin", &srv.to_string_lossy()]);
    sb.git(&repo, &["push", "-q", "origin", "main"]);
    sb.orch_ok(&repo, &["init", "--remote", "origin"]);
    sb.orch_ok(&srv, &["hooks", "install", "--server"]);
    // The branch itself pushed onto main by hand: refused.
    let out = sb.git_output(&repo, &["push", "origin", "hotfix:main"]);
    assert!(!out.status.success(), "a hand-made push went through");
    assert!(
        stderr(&out).contains("is not a verified git-orch landing"),
        "{}",
        stderr(&out)
    );
    // Approved and landed: accepted with its log.
    sb.orch_ok(&repo, &["approve", "--branch", "hotfix"]);
    sb.orch_ok(&repo, &["land", "hotfix"]);
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
