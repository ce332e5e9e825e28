//! Attempt branches and worktrees come and go cleanly: when a run ends
//! (`[orch] cleanup`) and on `git orch cleanup` they are removed once every
//! commit on them is kept elsewhere, so nothing is ever lost; a branch
//! holding a commit nothing else reaches stays and is reported; scratch
//! worktrees go when their landing or gate ends, and cleanup sweeps the
//! ones a crash left; empty folders go; `--dry-run` changes nothing.

use crate::common;

use std::path::{Path, PathBuf};

use common::*;

/// `git branch --list 'orch/*'`, one name per line.
fn attempt_branches(sb: &Sandbox, repo: &Path) -> Vec<String> {
    sb.git(
        repo,
        &["branch", "--list", "--format=%(refname:short)", "orch/*"],
    )
    .lines()
    .map(str::to_owned)
    .collect()
}

/// The worktrees `git worktree list` shows.
fn worktrees(sb: &Sandbox, repo: &Path) -> Vec<PathBuf> {
    sb.git(repo, &["worktree", "list", "--porcelain"])
        .lines()
        .filter_map(|l| l.strip_prefix("worktree "))
        .map(PathBuf::from)
        .collect()
}

/// Whether some ref contains `commit`.
fn reachable(sb: &Sandbox, repo: &Path, commit: &str) -> bool {
    !sb.git(repo, &["for-each-ref", "--contains", commit])
        .trim()
        .is_empty()
}

/// Folders under `.git/orch/scratch/`.
fn scratch_folders(repo: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(repo.join(".git/orch/scratch"))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default()
}

/// The folder attempt worktrees go in: `<repo>.orch` beside it.
fn root_of(repo: &Path) -> PathBuf {
    repo.with_file_name(format!(
        "{}.orch",
        repo.file_name().expect("name").to_string_lossy()
    ))
}

/// Everything cleanup could change, for "nothing changed" checks.
fn snapshot(sb: &Sandbox, repo: &Path) -> (String, Vec<PathBuf>, Vec<PathBuf>) {
    let mut folders = Vec::new();
    let mut stack = vec![root_of(repo)];
    while let Some(d) = stack.pop() {
        if let Ok(rd) = std::fs::read_dir(&d) {
            for e in rd.flatten() {
                if e.path().is_dir() && e.file_name() != ".git" {
                    folders.push(e.path());
                    if e.path().parent() == Some(&root_of(repo)) {
                        stack.push(e.path());
                    }
                }
            }
        }
    }
    folders.extend(scratch_folders(repo));
    folders.sort();
    (sb.refs(repo), worktrees(sb, repo), folders)
}

fn fsck_report(sb: &Sandbox, repo: &Path) -> (Option<i32>, serde_json::Value) {
    let out = sb.orch(repo, &["fsck", "--json"]);
    let json = serde_json::from_str(stdout(&out).trim())
        .unwrap_or_else(|e| panic!("fsck --json: {e}\n{}", stderr(&out)));
    (out.status.code(), json)
}

#[test]
fn after_a_run_no_attempt_branch_or_worktree_is_left_and_every_tip_stays_reachable() {
    let mut sb = Sandbox::new();
    let p = project(
        &mut sb,
        &[("a", &[], "true"), ("b", &[], "test -f src/b/done")],
        None,
    );
    sb.git(&p.repo, &["config", "orch.retries", "1"]);
    // a commits its own work; b's first attempt fails its verification
    // and the second lands.
    p.script("a", "write src/a/done yes\ncommit a by the agent\n");
    p.script("b.1", "write src/b/other no\n");
    p.script("b.2", "write src/b/done yes\n");
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let log = events(&sb, &p.repo);
    let removed: Vec<String> = log
        .iter()
        .filter(|e| e["type"] == "attempt_branch_removed")
        .map(|e| e["tip"].as_str().expect("tip").to_owned())
        .collect();
    assert_eq!(removed.len(), 3, "a/1, b/1 and b/2 were cleaned up");
    let results: Vec<String> = log
        .iter()
        .filter(|e| e["type"] == "attempt_result")
        .map(|e| e["commit"].as_str().expect("commit").to_owned())
        .collect();
    assert_eq!(results.len(), 3);
    assert_eq!(attempt_branches(&sb, &p.repo), Vec::<String>::new());
    assert_eq!(worktrees(&sb, &p.repo), vec![p.repo.clone()]);
    assert!(
        scratch_folders(&p.repo).is_empty(),
        "the landing's scratch worktree went"
    );
    assert!(!root_of(&p.repo).exists(), "empty folders went");
    for tip in removed.iter().chain(&results) {
        assert!(reachable(&sb, &p.repo, tip), "{tip} must stay reachable");
    }
    // Nothing is left for cleanup, and the state is whole.
    let out = sb.orch(&p.repo, &["cleanup"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stdout(&out), "");
    assert!(
        stderr(&out).contains("Nothing to clean up."),
        "{}",
        stderr(&out)
    );
    let (code, report) = fsck_report(&sb, &p.repo);
    assert_eq!(code, Some(0), "{report:#}");
    // A gate run by hand on a cleaned attempt uses a scratch worktree,
    // which goes when the gate ends.
    let out = sb.orch(&p.repo, &["gate", "a"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(scratch_folders(&p.repo).is_empty());
    assert_eq!(worktrees(&sb, &p.repo), vec![p.repo.clone()]);
}

#[test]
fn a_hand_made_commit_keeps_its_attempt_branch_and_dry_run_changes_nothing() {
    let mut sb = Sandbox::new();
    let p = project(&mut sb, &[("a", &[], "true"), ("b", &[], "true")], None);
    sb.git(&p.repo, &["config", "orch.retries", "0"]);
    sb.git(&p.repo, &["config", "orch.cleanup", "never"]);
    p.script("a", "write src/a/done yes\n");
    p.script("b", "write src/b/done yes\nexit 1\n");
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let branches = attempt_branches(&sb, &p.repo);
    assert_eq!(
        branches.len(),
        2,
        "cleanup = never keeps them: {branches:?}"
    );
    let b_branch = branches
        .iter()
        .find(|b| b.contains("/b/"))
        .expect("b's branch")
        .clone();
    assert_eq!(worktrees(&sb, &p.repo).len(), 3);
    let s = status_json(&sb, &p.repo);
    let b_worktree = PathBuf::from(s["tasks"][1]["worktree"].as_str().expect("b's worktree"));
    // A person adds a commit of their own on b's attempt branch.
    std::fs::write(b_worktree.join("src/b/mine"), "by hand\n").expect("write");
    sb.git(&b_worktree, &["add", "src/b/mine"]);
    sb.git(&b_worktree, &["commit", "-q", "-m", "my own fix"]);
    let hand = sb.git(&b_worktree, &["rev-parse", "HEAD"]);
    // A dry run says what would go and changes nothing.
    let before = snapshot(&sb, &p.repo);
    let dry = sb.orch_ok(&p.repo, &["cleanup", "--dry-run"]);
    assert!(dry.contains("would remove"), "{dry}");
    assert!(dry.contains(&hand[..12]), "{dry}");
    assert_eq!(
        snapshot(&sb, &p.repo),
        before,
        "--dry-run changed something"
    );
    // Cleanup takes a's and keeps b's, forced or not.
    for args in [vec!["cleanup"], vec!["cleanup", "--force"]] {
        let out = sb.orch_ok(&p.repo, &args);
        assert!(out.contains("kept: it holds commit"), "{out}");
        assert!(out.contains("nothing else reaches"), "{out}");
        assert_eq!(attempt_branches(&sb, &p.repo), vec![b_branch.clone()]);
        assert_eq!(
            worktrees(&sb, &p.repo),
            vec![p.repo.clone(), b_worktree.clone()]
        );
    }
    // fsck reports it, with the fix.
    let (code, report) = fsck_report(&sb, &p.repo);
    assert_eq!(code, Some(3), "{report:#}");
    let found: Vec<&serde_json::Value> = report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["check"] == "branches")
        .collect();
    assert_eq!(found.len(), 1, "{report:#}");
    assert_eq!(found[0]["subject"], b_branch);
    assert!(
        found[0]["message"]
            .as_str()
            .expect("message")
            .contains(&hand[..12]),
        "{report:#}"
    );
    // Once the person keeps the commit on a branch of theirs, it goes.
    sb.git(&p.repo, &["branch", "my-fix", &b_branch]);
    let out = sb.orch_ok(&p.repo, &["cleanup"]);
    assert!(out.contains("removed"), "{out}");
    assert_eq!(attempt_branches(&sb, &p.repo), Vec::<String>::new());
    assert_eq!(worktrees(&sb, &p.repo), vec![p.repo.clone()]);
    assert!(!root_of(&p.repo).exists(), "empty folders went");
    assert!(reachable(&sb, &p.repo, &hand));
    let (code, report) = fsck_report(&sb, &p.repo);
    assert_eq!(code, Some(0), "{report:#}");
}

#[test]
fn a_result_that_failed_the_secrets_gate_is_never_kept_and_its_branch_stays() {
    let mut sb = Sandbox::new();
    let p = project(&mut sb, &[("a", &[], "true")], None);
    sb.git(&p.repo, &["config", "orch.retries", "0"]);
    p.script("a", "secret src/a/key.txt\n");
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let result = events(&sb, &p.repo)
        .into_iter()
        .find(|e| e["type"] == "attempt_result")
        .expect("a result")["commit"]
        .as_str()
        .expect("commit")
        .to_owned();
    // Not kept by refs/orch/* (which sharing pushes) ...
    assert_eq!(
        sb.git(
            &p.repo,
            &["for-each-ref", "--contains", &result, "refs/orch/"]
        ),
        ""
    );
    // ... so its branch stays, and says why.
    assert_eq!(attempt_branches(&sb, &p.repo).len(), 1);
    let out = sb.orch_ok(&p.repo, &["cleanup"]);
    assert!(out.contains("failed the secrets gate"), "{out}");
    assert_eq!(attempt_branches(&sb, &p.repo).len(), 1);
    // fsck notes it but does not fail on it.
    let (code, report) = fsck_report(&sb, &p.repo);
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(report["notes"], 1, "{report:#}");
}

#[test]
fn a_scratch_worktree_a_crashed_landing_left_is_reported_and_swept_by_cleanup() {
    let mut sb = Sandbox::new();
    let p = project(&mut sb, &[("a", &[], "true")], None);
    p.script("a", "write src/a/done yes\n");
    let out = sb
        .command("git", &p.repo)
        .args(["orch", "run", "proj", "--agent", "fake"])
        .env("ORCH_FAILPOINTS", "land.recorded=kill@1")
        .output()
        .expect("runs");
    assert!(!out.status.success(), "the driver was killed");
    let left = scratch_folders(&p.repo);
    assert_eq!(left.len(), 1, "the landing's scratch worktree is left");
    let (code, report) = fsck_report(&sb, &p.repo);
    assert_eq!(code, Some(3), "{report:#}");
    assert!(
        report["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .any(|f| f["check"] == "scratch" && f["fix"] == "`git orch cleanup` removes it"),
        "{report:#}"
    );
    let dry = sb.orch_ok(&p.repo, &["cleanup", "--dry-run"]);
    assert!(dry.contains("scratch worktree"), "{dry}");
    assert_eq!(scratch_folders(&p.repo), left);
    let out = sb.orch_ok(&p.repo, &["cleanup"]);
    assert!(out.contains("scratch worktree"), "{out}");
    assert!(scratch_folders(&p.repo).is_empty());
    assert!(
        !worktrees(&sb, &p.repo)
            .iter()
            .any(|w| w.starts_with(p.repo.join(".git")))
    );
    // The run resumes, lands and ends clean.
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(worktrees(&sb, &p.repo), vec![p.repo.clone()]);
    let (code, report) = fsck_report(&sb, &p.repo);
    assert_eq!(code, Some(0), "{report:#}");
}

/// Adds and approves plan `id` with tasks (id, verification), each owning
/// `src/<task>/**`.
fn add_plan(sb: &Sandbox, repo: &Path, id: &str, tasks: &[(&str, &str)]) {
    let subtasks: Vec<serde_json::Value> = tasks
        .iter()
        .map(|(t, verify)| {
            serde_json::json!({
                "id": t, "title": format!("Task {t}"), "owned_globs": [format!("src/{t}/**")],
                "deliverable": format!("{t} done"), "verification": verify,
            })
        })
        .collect();
    let plan = serde_json::json!({"version": 1, "id": id, "instruction": "More work", "subtasks": subtasks});
    let file = sb.path().join(format!("{id}.json"));
    std::fs::write(&file, plan.to_string()).expect("plan");
    sb.orch_ok(repo, &["plan", "add", &file.to_string_lossy()]);
    sb.orch_ok(repo, &["approve", id]);
}

#[test]
fn six_runs_with_retries_leave_no_attempt_branch_worktree_or_folder() {
    // The report in issue 14: six small runs left 41 `orch/*` branches.
    let mut sb = Sandbox::new();
    let p = project(&mut sb, &[("a", &[], "true")], None);
    sb.git(&p.repo, &["config", "orch.retries", "1"]);
    for i in 1..=6 {
        let (x, y) = (format!("r{i}x"), format!("r{i}y"));
        add_plan(
            &sb,
            &p.repo,
            &format!("p{i}"),
            &[(&x, "true"), (&y, &format!("test -f src/{y}/done"))],
        );
        p.script(&x, &format!("write src/{x}/done yes\n"));
        // y's first attempt fails its verification; the retry lands.
        p.script(&format!("{y}.1"), &format!("write src/{y}/other no\n"));
        p.script(&format!("{y}.2"), &format!("write src/{y}/done yes\n"));
        let out = sb.orch(&p.repo, &["run", &format!("p{i}"), "--agent", "fake"]);
        assert_eq!(out.status.code(), Some(0), "run {i}: {}", stderr(&out));
        assert_eq!(
            attempt_branches(&sb, &p.repo),
            Vec::<String>::new(),
            "after run {i}"
        );
        assert_eq!(
            worktrees(&sb, &p.repo),
            vec![p.repo.clone()],
            "after run {i}"
        );
    }
    let log = events(&sb, &p.repo);
    let tips: Vec<String> = log
        .iter()
        .filter(|e| e["type"] == "attempt_branch_removed")
        .map(|e| e["tip"].as_str().expect("tip").to_owned())
        .collect();
    assert_eq!(tips.len(), 18, "three attempts in each of six runs");
    for tip in &tips {
        assert!(reachable(&sb, &p.repo, tip), "{tip} must stay reachable");
    }
    assert!(scratch_folders(&p.repo).is_empty());
    assert!(!root_of(&p.repo).exists(), "empty folders went");
    // Every task landed: the history holds all twelve.
    for i in 1..=6 {
        assert!(p.repo.join(format!("src/r{i}x/done")).exists());
        assert!(p.repo.join(format!("src/r{i}y/done")).exists());
    }
    // `git gc --prune=now` loses nothing that state refers to.
    sb.git(&p.repo, &["gc", "-q", "--prune=now"]);
    let (code, report) = fsck_report(&sb, &p.repo);
    assert_eq!(code, Some(0), "{report:#}");
}

#[test]
fn cleanup_landed_removes_only_landed_attempts_when_the_run_ends() {
    let mut sb = Sandbox::new();
    let p = project(&mut sb, &[("a", &[], "true"), ("b", &[], "true")], None);
    sb.git(&p.repo, &["config", "orch.retries", "0"]);
    sb.git(&p.repo, &["config", "orch.cleanup", "landed"]);
    p.script("a", "write src/a/done yes\n");
    p.script("b", "write src/b/done yes\nexit 1\n");
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    // a landed: its branch and worktree went; b failed: both stay.
    let branches = attempt_branches(&sb, &p.repo);
    assert_eq!(branches.len(), 1, "{branches:?}");
    assert!(branches[0].contains("/b/"), "{branches:?}");
    assert_eq!(worktrees(&sb, &p.repo).len(), 2);
    // `git orch cleanup` takes b's too (its result is kept).
    let out = sb.orch_ok(&p.repo, &["cleanup"]);
    assert!(out.contains("removed"), "{out}");
    assert_eq!(attempt_branches(&sb, &p.repo), Vec::<String>::new());
    assert_eq!(worktrees(&sb, &p.repo), vec![p.repo.clone()]);
    assert!(!root_of(&p.repo).exists(), "empty folders went");
    let (code, report) = fsck_report(&sb, &p.repo);
    assert_eq!(code, Some(0), "{report:#}");
}

#[test]
fn a_landed_attempt_is_cleaned_up_while_the_run_goes_on() {
    let mut sb = Sandbox::new();
    let p = project(&mut sb, &[("a", &[], "true"), ("b", &[], "true")], None);
    p.script("a", "write src/a/done yes\n");
    // b works until the test puts `src/b/go` in its worktree.
    p.script(
        "b",
        "run sh -c \"while [ ! -e src/b/go ]; do sleep 0.02; done\"\nwrite src/b/done yes\n",
    );
    let mut run = sb
        .command("git-orch", &p.repo)
        .args(["run", "proj", "--agent", "fake", "--cap", "2"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run");
    // The folders under the worktree root: a live attempt's worktree is
    // no linked worktree of the repository until its agent is gone.
    let attempt_worktrees = |_: &Sandbox| -> Vec<PathBuf> {
        let mut found = Vec::new();
        for run in std::fs::read_dir(root_of(&p.repo))
            .into_iter()
            .flatten()
            .flatten()
        {
            for w in std::fs::read_dir(run.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                found.push(w.path());
            }
        }
        found
    };
    let cleaned = |sb: &Sandbox| -> Vec<String> {
        events(sb, &p.repo)
            .into_iter()
            .filter(|e| e["type"] == "landed" || e["type"] == "workspace_cleaned")
            .map(|e| {
                format!(
                    "{} {}",
                    e["type"].as_str().unwrap_or(""),
                    e["task"].as_str().unwrap_or("")
                )
            })
            .collect()
    };
    // a lands while b still works, and its branch and worktree go then,
    // not when the run ends; the cleanup is recorded once it is done.
    wait_until(
        "a's branch and worktree to go, and their cleanup recorded, while b works",
        std::time::Duration::from_secs(60),
        || {
            let branches = attempt_branches(&sb, &p.repo);
            let trees = attempt_worktrees(&sb);
            branches.len() == 1
                && branches[0].contains("/b/")
                && trees.len() == 1
                && trees[0].ends_with("b-1")
                && cleaned(&sb).iter().any(|c| c == "workspace_cleaned a")
        },
    );
    assert!(run.try_wait().expect("wait").is_none(), "the run goes on");
    assert_eq!(cleaned(&sb), ["landed a", "workspace_cleaned a"]);
    let b = attempt_worktrees(&sb).remove(0);
    std::fs::write(b.join("src/b/go"), "").expect("let b finish");
    assert_eq!(run.wait().expect("run").code(), Some(0));
    assert_eq!(attempt_branches(&sb, &p.repo), Vec::<String>::new());
    assert_eq!(worktrees(&sb, &p.repo), vec![p.repo.clone()]);
    let (code, report) = fsck_report(&sb, &p.repo);
    assert_eq!(code, Some(0), "{report:#}");
}
