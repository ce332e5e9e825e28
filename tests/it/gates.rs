//! Gates and retries end to end (ARCHITECTURE.md, invariant 7).

use crate::common;

use std::path::Path;

use common::{Project, Sandbox, events, project, status_json, stderr, stdout};

fn verdicts(sb: &Sandbox, repo: &Path, task: &str, attempt: u64) -> Vec<serde_json::Value> {
    events(sb, repo)
        .into_iter()
        .filter(|e| e["type"] == "gate_verdict" && e["task"] == task && e["attempt"] == attempt)
        .map(|e| e["verdict"].clone())
        .collect()
}

fn verdict(sb: &Sandbox, repo: &Path, task: &str, attempt: u64, gate: &str) -> serde_json::Value {
    verdicts(sb, repo, task, attempt)
        .into_iter()
        .rev()
        .find(|v| v["gate"] == gate)
        .unwrap_or_else(|| panic!("no {gate} verdict for {task}#{attempt}"))
}

fn one_task(sb: &mut Sandbox, config: Option<&str>) -> Project {
    let p = project(sb, &[("a", &[], "test -f src/a/done")], config);
    sb.git(&p.repo, &["config", "orch.retries", "0"]);
    p
}

fn run(sb: &Sandbox, p: &Project) -> std::process::Output {
    sb.orch(&p.repo, &["run", &p.plan_id, "--agent", "fake"])
}

#[test]
fn diff_gate() {
    let mut sb = Sandbox::new();
    let p = one_task(&mut sb, None);
    p.script("a", "print nothing to do\n");
    assert_eq!(run(&sb, &p).status.code(), Some(3));
    let v = verdict(&sb, &p.repo, "a", 1, "diff");
    assert_eq!(v["status"], "fail");
    let s = status_json(&sb, &p.repo);
    assert!(
        s["tasks"][0]["failure"]
            .as_str()
            .expect("f")
            .contains("changes nothing")
    );
    let mut sb = Sandbox::new();
    let p = one_task(&mut sb, None);
    p.script("a", "write src/a/done yes\n");
    assert_eq!(run(&sb, &p).status.code(), Some(0));
    assert_eq!(verdict(&sb, &p.repo, "a", 1, "diff")["status"], "pass");
}

#[test]
fn scope_gate_lists_out_of_scope_paths_and_the_hook_refused_the_commit() {
    let mut sb = Sandbox::new();
    let p = one_task(&mut sb, None);
    p.script(
        "a",
        "write src/a/done yes\nwrite README.md changed by the agent\ndelete src/a/README\ncommit sneak it in\n",
    );
    assert_eq!(run(&sb, &p).status.code(), Some(3));
    let v = verdict(&sb, &p.repo, "a", 1, "scope");
    assert_eq!(v["status"], "fail");
    assert_eq!(
        v["details"]["out_of_scope"],
        serde_json::json!(["README.md"])
    );
    // The commit hook in the attempt worktree refused the agent's commit.
    let s = status_json(&sb, &p.repo);
    let run_id = s["run"].as_str().expect("run");
    let log = p
        .repo
        .join(format!(".git/orch/logs/{run_id}/a/attempt-1/agent.err"));
    let err = std::fs::read_to_string(&log).expect("agent log");
    assert!(err.contains("outside the ones this attempt owns"), "{err}");
    assert!(err.contains("README.md"), "{err}");
    let result = result_commit(&sb, &p.repo, 1);
    let subjects = sb.git(&p.repo, &["log", "--format=%s", &format!("main..{result}")]);
    assert!(
        !subjects.contains("sneak it in"),
        "the hook let the commit through: {subjects}"
    );
    // The user's own hooks still run through the chain.
    assert!(!p.repo.join("README.md.orig").exists());
    // Inside scope: pass (deletions of owned files are fine).
    let mut sb = Sandbox::new();
    let p = one_task(&mut sb, None);
    p.script(
        "a",
        "write src/a/done yes\ndelete src/a/README\ncommit fine\n",
    );
    assert_eq!(
        run(&sb, &p).status.code(),
        Some(0),
        "{}",
        stderr(&run(&sb, &p))
    );
    assert_eq!(verdict(&sb, &p.repo, "a", 1, "scope")["status"], "pass");
}

#[test]
fn an_existing_pre_commit_hook_is_chained() {
    let mut sb = Sandbox::new();
    let p = one_task(&mut sb, None);
    let marker = sb.path().join("user-hook-ran");
    let hook = p.repo.join(".git/hooks/pre-commit");
    std::fs::write(
        &hook,
        format!("#!/bin/sh\necho ran >> '{}'\n", marker.display()),
    )
    .expect("hook");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    p.script("a", "write src/a/done yes\ncommit inside scope\n");
    assert_eq!(run(&sb, &p).status.code(), Some(0));
    assert!(marker.exists(), "the user's pre-commit hook did not run");
    assert_eq!(
        std::fs::read_to_string(&hook)
            .expect("hook")
            .lines()
            .count(),
        2,
        "the user's hook was changed"
    );
}

#[test]
fn secrets_gate_and_nothing_reachable_holds_the_secret() {
    let mut sb = Sandbox::new();
    let p = one_task(&mut sb, None);
    let remote = sb.bare("remote.git");
    sb.git(
        &p.repo,
        &["remote", "add", "origin", &remote.to_string_lossy()],
    );
    sb.git(&p.repo, &["push", "-q", "origin", "main"]);
    sb.orch_ok(&p.repo, &["init", "--remote", "origin"]);
    p.script("a", "write src/a/done yes\nsecret src/a/config.ini\n");
    assert_eq!(run(&sb, &p).status.code(), Some(3));
    let v = verdict(&sb, &p.repo, "a", 1, "secrets");
    assert_eq!(v["status"], "fail");
    assert!(
        v["summary"]
            .as_str()
            .expect("summary")
            .contains("src/a/config.ini:1"),
        "{v}"
    );
    // The secret as the fake agent writes it: AKIA + 16 characters.
    let s = status_json(&sb, &p.repo);
    let wt = s["tasks"][0]["worktree"].as_str().expect("wt");
    let file = std::fs::read_to_string(Path::new(wt).join("src/a/config.ini")).expect("file");
    let key = file
        .split_whitespace()
        .find(|w| w.starts_with("AKIA"))
        .expect("key")
        .to_owned();
    assert_eq!(key.len(), 20);
    sb.orch_ok(&p.repo, &["sync"]);
    // Every object reachable from refs/orch/* and refs/notes/*.
    let objects = sb.git(
        &p.repo,
        &[
            "rev-list",
            "--objects",
            "--glob=refs/orch/*",
            "--glob=refs/notes/*",
        ],
    );
    let ids: String = objects
        .lines()
        .map(|l| l.split_whitespace().next().expect("id").to_owned() + "\n")
        .collect();
    let out = sb
        .command("git", &p.repo)
        .args(["cat-file", "--batch"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            let mut stdin = c.stdin.take().expect("stdin");
            let t = std::thread::spawn(move || {
                use std::io::Write;
                stdin.write_all(ids.as_bytes()).expect("ids");
            });
            let o = c.wait_with_output();
            t.join().expect("writer");
            o
        })
        .expect("cat-file");
    let all = String::from_utf8_lossy(&out.stdout);
    assert!(all.len() > 1000, "the scan read the objects");
    assert!(
        !all.contains(&key),
        "the secret is reachable from refs/orch or refs/notes"
    );
    // Nor is it in any log, prompt or record under .git/orch.
    fn scan(dir: &Path, key: &str) {
        for e in std::fs::read_dir(dir).expect("dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                scan(&p, key);
            } else {
                let bytes = std::fs::read(&p).unwrap_or_default();
                assert!(
                    !String::from_utf8_lossy(&bytes).contains(key),
                    "the secret is in {}",
                    p.display()
                );
            }
        }
    }
    scan(&p.repo.join(".git/orch"), &key);
    // The remote got refs/orch/* but not the attempt branch.
    let remote_refs = sb.git(&remote, &["for-each-ref", "--format=%(refname)"]);
    assert!(remote_refs.contains("refs/orch/log/"), "{remote_refs}");
    assert!(!remote_refs.contains("attempt-1"), "{remote_refs}");
    let branch_tip = sb.git(
        &p.repo,
        &[
            "rev-parse",
            &format!("orch/{}/a/attempt-1", s["run"].as_str().expect("run")),
        ],
    );
    let has = sb.git_output(&remote, &["cat-file", "-e", &branch_tip]);
    assert!(
        !has.status.success(),
        "the secret-bearing commit reached the remote"
    );
}

#[test]
fn placeholders_warn_by_default_and_block_when_the_plan_says_so() {
    let mut sb = Sandbox::new();
    let p = one_task(&mut sb, None);
    p.script("a", "write src/a/done \"TODO: finish this\"\n");
    assert_eq!(
        run(&sb, &p).status.code(),
        Some(0),
        "a warning must not block"
    );
    let v = verdict(&sb, &p.repo, "a", 1, "placeholders");
    assert_eq!(v["status"], "warn");
    assert_eq!(v["mode"], "warn");
    // The same as a blocking gate, set in the approved plan.
    let mut sb = Sandbox::new();
    let p = one_task(&mut sb, None);
    let plan_file = sb.path().join("plan.json");
    let mut plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan_file).expect("plan")).expect("json");
    plan["gates"] = serde_json::json!({"placeholders": {"mode": "block"}});
    std::fs::write(&plan_file, plan.to_string()).expect("plan");
    sb.orch_ok(&p.repo, &["plan", "add", &plan_file.to_string_lossy()]);
    sb.orch_ok(&p.repo, &["approve", "proj"]);
    p.script("a", "write src/a/done \"TODO: finish this\"\n");
    assert_eq!(run(&sb, &p).status.code(), Some(3));
    assert_eq!(
        verdict(&sb, &p.repo, "a", 1, "placeholders")["status"],
        "fail"
    );
}

#[test]
fn skip_mode_does_not_block_and_config_command_gates_run() {
    let mut sb = Sandbox::new();
    let p = one_task(
        &mut sb,
        Some(
            "[gate \"scope\"]\n\tmode = skip\n[gate \"lint\"]\n\trun = test -f src/a/done\n\tmode = warn\n[gate \"build\"]\n\trun = exit 4\n\tmode = warn\n",
        ),
    );
    p.script("a", "write src/a/done yes\nwrite elsewhere.txt outside\n");
    assert_eq!(run(&sb, &p).status.code(), Some(0));
    assert_eq!(verdict(&sb, &p.repo, "a", 1, "scope")["status"], "skipped");
    assert_eq!(verdict(&sb, &p.repo, "a", 1, "lint")["status"], "pass");
    let b = verdict(&sb, &p.repo, "a", 1, "build");
    assert_eq!(b["status"], "warn");
    assert_eq!(b["details"]["exit"], 4);
}

#[test]
fn a_failing_test_reaches_the_next_attempt_by_name() {
    let mut sb = Sandbox::new();
    let p = project(
        &mut sb,
        &[(
            "a",
            &[],
            "if test -f src/a/fixed; then echo 'test cart::total ... ok'; else echo 'test cart::total ... FAILED'; exit 101; fi",
        )],
        None,
    );
    p.script("a.1", "write src/a/code first try\n");
    p.script(
        "a.2",
        "require-retry-mention cart::total\ncopy-retry-context src/a/seen.json\nwrite src/a/fixed yes\n",
    );
    let out = run(&sb, &p);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let s = status_json(&sb, &p.repo);
    assert_eq!(s["tasks"][0]["attempts"], 2);
    // The passing attempt landed, and the clean checkout of main moved on.
    let seen: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(p.repo.join("src/a/seen.json")).expect("context file"),
    )
    .expect("json");
    assert_eq!(seen["failures"][0]["gate"], "verification");
    assert_eq!(
        seen["failures"][0]["failing_tests"],
        serde_json::json!(["cart::total"])
    );
    assert_eq!(seen["attempt"], 1);
}

#[test]
fn the_same_tree_gated_twice_reuses_the_verdict() {
    let mut sb = Sandbox::new();
    let counter = sb.path().join("counter");
    let verify = format!("echo ran >> '{}'; test -f src/a/done", counter.display());
    let p = project(&mut sb, &[("a", &[], verify.as_str())], None);
    // Attempt 1 does the work but the agent crashes; attempt 2 produces the
    // very same tree.
    p.script("a.1", "write src/a/done yes\nexit 1\n");
    p.script("a.2", "write src/a/done yes\n");
    let out = run(&sb, &p);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v1 = verdict(&sb, &p.repo, "a", 1, "verification");
    let v2 = verdict(&sb, &p.repo, "a", 2, "verification");
    assert_eq!(v1["status"], "pass");
    assert_eq!(v2["status"], "cached");
    assert_eq!(v2["cached_pass"], true);
    assert_eq!(
        std::fs::read_to_string(&counter)
            .expect("counter")
            .lines()
            .count(),
        1
    );
    // By hand: cached again, the command does not run.
    let out = sb.orch_ok(&p.repo, &["gate", "a"]);
    assert!(
        out.lines()
            .any(|l| l.starts_with("verification") && l.contains("cached")),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(&counter)
            .expect("counter")
            .lines()
            .count(),
        1
    );
}

/// What each run of the `probe` gate saw of git-orch's variables, one
/// block per run.
fn probe_runs(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .split("--\n")
        .filter(|b| !b.is_empty())
        .map(str::to_owned)
        .collect()
}

fn count_lines(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |s| s.lines().count())
}

#[test]
fn git_orch_gate_gives_a_gate_the_runs_environment_and_reuses_a_verdict_only_on_the_same_inputs() {
    let mut sb = Sandbox::new();
    let counter = sb.path().join("counter");
    let log = sb.path().join("probe.log");
    let verify = format!("echo ran >> '{}'; test -f src/a/done", counter.display());
    // `probe` writes down the variables it was given and ends in an error,
    // which is never cached: it runs every time the stack does.
    let probe = format!(
        "[gate \"probe\"]\n\trun = \"{{ env | grep -E '^(ORCH_|PORT=)' | sort; echo --; }} >> '{}'; exit 127\"\n\tmode = warn\n",
        log.display()
    );
    let p = project(&mut sb, &[("a", &[], verify.as_str())], Some(&probe));
    p.script("a", "write src/a/done yes\n");
    let out = run(&sb, &p);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // The run judged the result once (its landing reused that verdict).
    assert_eq!(count_lines(&counter), 1);
    let seen = probe_runs(&log);
    assert_eq!(seen.len(), 1, "{seen:?}");
    for var in [
        "ORCH_RUN=",
        "ORCH_PLAN=proj",
        "ORCH_TASK=a",
        "ORCH_ATTEMPT=1",
        "ORCH_OWNED_GLOBS=",
        "ORCH_BASE=",
        "ORCH_PORT=",
        "ORCH_AGENT=fake",
        "ORCH_PROMPT_FILE=",
        "PORT=",
    ] {
        assert!(
            seen[0].lines().any(|l| l.starts_with(var)),
            "{var} missing: {}",
            seen[0]
        );
    }
    // By hand, with the run's inputs: the same environment, the verdict
    // reused.
    let out = sb.orch_ok(&p.repo, &["gate", "a"]);
    assert!(
        out.lines()
            .any(|l| l.starts_with("verification") && l.contains("cached")),
        "{out}"
    );
    assert_eq!(count_lines(&counter), 1);
    let seen = probe_runs(&log);
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(
        seen[1], seen[0],
        "git orch gate gave the gate another environment"
    );
    // A port of the person's choosing is an input the gate sees: the
    // verdict made without it is not reused, the command runs.
    let by_hand = |port: Option<&str>| {
        let mut cmd = sb.command("git", &p.repo);
        cmd.args(["orch", "gate", "a"]);
        if let Some(port) = port {
            cmd.env("PORT", port);
        }
        let out = cmd.output().expect("git orch gate runs");
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
    };
    let out = by_hand(Some("4711"));
    assert_eq!(count_lines(&counter), 2, "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("verification") && l.contains("pass") && !l.contains("cached")),
        "{out}"
    );
    let seen = probe_runs(&log);
    assert!(seen[2].lines().any(|l| l == "PORT=4711"), "{}", seen[2]);
    // Each verdict is reused by a gate with its own inputs, and only by it.
    by_hand(None);
    assert_eq!(count_lines(&counter), 2);
    let out = by_hand(Some("4711"));
    assert_eq!(count_lines(&counter), 2, "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("verification") && l.contains("cached")),
        "{out}"
    );
}

#[test]
fn a_reviewer_gate_blocks_on_a_fail_verdict_and_must_be_independent() {
    let mut sb = Sandbox::new();
    let review = sb.path().join("review.sh");
    std::fs::write(
        &review,
        "printf '%s' '{\"verdict\":\"fail\",\"findings\":[{\"path\":\"src/a/done\",\"line\":1,\"message\":\"not done well\"}]}' > \"$ORCH_REVIEW_FILE\"\n",
    )
    .expect("script");
    let config = format!(
        "[agent \"reviewer\"]\n\tkind = command\n\tcommand = sh {}\n[gate \"review\"]\n\tagent = reviewer\n",
        review.display()
    );
    let p = one_task(&mut sb, Some(&config));
    p.script("a", "write src/a/done yes\n");
    assert_eq!(run(&sb, &p).status.code(), Some(3));
    let v = verdict(&sb, &p.repo, "a", 1, "review");
    assert_eq!(v["status"], "fail", "{v}");
    assert_eq!(v["details"]["findings"][0]["message"], "not done well");
    // The reviewer may not be the agent that wrote the attempt.
    let mut sb = Sandbox::new();
    let p = one_task(&mut sb, Some("[gate \"review\"]\n\tagent = fake\n"));
    p.script("a", "write src/a/done yes\n");
    assert_eq!(run(&sb, &p).status.code(), Some(3));
    let v = verdict(&sb, &p.repo, "a", 1, "review");
    assert_eq!(v["status"], "error");
    assert!(
        v["summary"].as_str().expect("s").contains("independent"),
        "{v}"
    );
}

#[test]
fn a_reviewer_gate_passes_on_a_pass_verdict_and_the_attempt_lands() {
    let mut sb = Sandbox::new();
    let review = sb.path().join("review.sh");
    std::fs::write(
        &review,
        "printf '%s' '{\"verdict\":\"pass\",\"findings\":[]}' > \"$ORCH_REVIEW_FILE\"\n",
    )
    .expect("script");
    let config = format!(
        "[agent \"reviewer\"]\n\tkind = command\n\tcommand = sh {}\n[gate \"review\"]\n\tagent = reviewer\n",
        review.display()
    );
    let p = one_task(&mut sb, Some(&config));
    p.script("a", "write src/a/done yes\n");
    let out = run(&sb, &p);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = verdict(&sb, &p.repo, "a", 1, "review");
    assert_eq!(v["status"], "pass", "{v}");
    assert_eq!(v["mode"], "block", "{v}");
    // The reviewer really ran: its pass is what let the attempt through.
    assert_eq!(
        verdicts(&sb, &p.repo, "a", 1).last().expect("verdicts")["gate"],
        "review",
        "the reviewer runs last"
    );
    let s = status_json(&sb, &p.repo);
    assert_eq!(s["tasks"][0]["status"], "done", "{s}");
    assert_eq!(
        std::fs::read_to_string(p.repo.join("src/a/done")).expect("landed file"),
        "yes\n"
    );
}

/// The result commit of `a`'s attempt `n`, as its `attempt_result` event
/// names it (the attempt's branch goes when the run ends).
fn result_commit(sb: &Sandbox, repo: &std::path::Path, n: u64) -> String {
    events(sb, repo)
        .into_iter()
        .find(|e| e["type"] == "attempt_result" && e["task"] == "a" && e["attempt"] == n)
        .and_then(|e| e["commit"].as_str().map(str::to_owned))
        .expect("a result commit")
}

#[test]
fn verdicts_are_notes_on_the_result_commit() {
    let mut sb = Sandbox::new();
    let p = one_task(&mut sb, None);
    p.script("a", "write src/a/done yes\n");
    assert_eq!(run(&sb, &p).status.code(), Some(0));
    let result = result_commit(&sb, &p.repo, 1);
    let log = sb.git(&p.repo, &["log", "-1", "--notes=orch", &result]);
    assert!(log.contains("Notes (orch):"), "{log}");
    assert!(log.contains("verification   pass"), "{log}");
    assert!(log.contains("outcome: passed"), "{log}");
    // The result commit is kept reachable for gc.
    let kept = sb.git(&p.repo, &["rev-list", "refs/orch/keep"]);
    assert!(kept.contains(&result));
    // A clean result passes every built-in gate, each in its default mode.
    for (gate, mode) in [
        ("diff", "block"),
        ("scope", "block"),
        ("secrets", "block"),
        ("placeholders", "warn"),
        ("verification", "block"),
    ] {
        let v = verdict(&sb, &p.repo, "a", 1, gate);
        assert_eq!(v["status"], "pass", "{gate}: {v}");
        assert_eq!(v["mode"], mode, "{gate}: {v}");
    }
    let out = sb.orch(&p.repo, &["gate", "a", "--json"]);
    assert!(out.status.success());
    for l in stdout(&out).lines() {
        serde_json::from_str::<serde_json::Value>(l).expect("verdict json");
    }
}

/// Invariant 8: once the attempt branches and worktrees are gone and the
/// reflogs expired, `git gc --prune=now` still loses nothing the log names.
#[test]
fn gc_after_deleting_attempt_branches_loses_nothing_the_log_names() {
    let mut sb = Sandbox::new();
    let p = one_task(&mut sb, None);
    p.script("a", "write src/a/done yes\ncommit the work\n");
    let out = run(&sb, &p);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let log_before = sb.orch_ok(&p.repo, &["log", "--json"]);
    let evs = events(&sb, &p.repo);
    let mut named: Vec<String> = Vec::new();
    for e in &evs {
        match e["type"].as_str() {
            Some("attempt_result") => {
                named.push(e["commit"].as_str().expect("commit").to_owned());
            }
            Some("landed") => {
                named.push(e["new"].as_str().expect("new").to_owned());
                for c in e["commits"].as_array().expect("commits") {
                    named.push(c.as_str().expect("commit").to_owned());
                }
            }
            _ => {}
        }
    }
    assert!(
        evs.iter().any(|e| e["type"] == "landed"),
        "the run did not land"
    );
    assert!(named.len() >= 3, "{named:?}");
    // Remove everything git-orch made that keeps commits alive by accident:
    // worktrees (their HEADs), attempt branches and reflogs.
    // The run's end already removed the attempt's branch (everything on it
    // is kept); whatever attempt branch is left goes by hand.
    sb.orch_ok(&p.repo, &["cleanup", "--all-completed", "--force"]);
    let branches = sb.git(
        &p.repo,
        &["for-each-ref", "refs/heads/orch/", "--format=%(refname)"],
    );
    for r in branches.lines() {
        sb.git(&p.repo, &["update-ref", "-d", r]);
    }
    // The merge queue's scratch worktree (recreated when needed) holds the
    // landed tip detached; remove it too, so only refs can keep commits.
    for l in sb
        .git(&p.repo, &["worktree", "list", "--porcelain"])
        .lines()
    {
        if let Some(wt) = l.strip_prefix("worktree ")
            && wt.contains("/.git/orch/scratch/")
        {
            sb.git(&p.repo, &["worktree", "remove", "--force", wt]);
        }
    }
    sb.git(&p.repo, &["worktree", "prune"]);
    assert_eq!(
        sb.git(&p.repo, &["worktree", "list", "--porcelain"])
            .lines()
            .filter(|l| l.starts_with("worktree "))
            .count(),
        1,
        "a worktree besides the user's survived: {}",
        sb.git(&p.repo, &["worktree", "list"])
    );
    sb.git(
        &p.repo,
        &[
            "-c",
            "gc.reflogExpire=now",
            "-c",
            "gc.reflogExpireUnreachable=now",
            "reflog",
            "expire",
            "--all",
            "--expire=now",
        ],
    );
    sb.git(&p.repo, &["gc", "-q", "--prune=now"]);
    for c in &named {
        let has = sb.git_output(&p.repo, &["cat-file", "-e", &format!("{c}^{{commit}}")]);
        assert!(has.status.success(), "gc dropped {c}, which the log names");
    }
    assert_eq!(sb.orch_ok(&p.repo, &["log", "--json"]), log_before);
    let out = sb.orch(&p.repo, &["verify", "main"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    // The landing note on main, and the verdict note on the result commit.
    let run_id = status_json(&sb, &p.repo)["run"]
        .as_str()
        .expect("run")
        .to_owned();
    let note = sb.git(&p.repo, &["log", "--notes=orch", "-1", "main"]);
    assert!(
        note.contains(&format!("git-orch landed {run_id}/a/attempt-1 on main")),
        "{note}"
    );
    let result = evs
        .iter()
        .find(|e| e["type"] == "attempt_result")
        .and_then(|e| e["commit"].as_str())
        .expect("result commit");
    let note = sb.git(&p.repo, &["log", "--notes=orch", "-1", result]);
    assert!(note.contains("verification   pass"), "{note}");
    assert!(note.contains("outcome: passed"), "{note}");
}
