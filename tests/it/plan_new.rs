//! `git orch plan new --agent`: a lead agent writes the plan, round by
//! round, until it passes the check. The real binary, real git, and the
//! scripted fake lead agents of fixtures/agents/lead/.

use crate::common;

use std::path::{Path, PathBuf};

use common::{Sandbox, json_lines, repo_root, stderr, stdout};

/// The repository the fake leads' plans are written for.
fn project(sb: &Sandbox) -> PathBuf {
    let repo = sb.repo("proj");
    for f in [
        "src/api/mod.rs",
        "src/web/mod.rs",
        "src/cli/mod.rs",
        "docs/index.md",
        "Cargo.toml",
        "Cargo.lock",
    ] {
        let p = repo.join(f);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, format!("{f}\n")).expect("write");
    }
    sb.git(&repo, &["add", "."]);
    sb.git(&repo, &["commit", "-q", "-m", "project"]);
    repo
}

/// A sandbox whose fake agent is the lead of fixtures/agents/lead/<name>.
fn with_lead(name: &str) -> Sandbox {
    let mut sb = Sandbox::new();
    let dir = repo_root().join("fixtures/agents/lead").join(name);
    sb.set_env("FAKE_AGENT_DIR", &dir.to_string_lossy());
    sb
}

fn plan_rounds(sb: &Sandbox, repo: &Path) -> Vec<serde_json::Value> {
    json_lines(&sb.orch_ok(repo, &["log", "--json"]))
        .into_iter()
        .filter(|e| e["type"] == "plan_round")
        .collect()
}

/// Nothing of the user's: no change in the work tree, no linked worktree
/// left behind, no plan stored.
fn assert_untouched(sb: &Sandbox, repo: &Path) {
    assert_eq!(sb.git(repo, &["status", "--porcelain"]), "");
    assert_eq!(
        sb.git(repo, &["worktree", "list", "--porcelain"])
            .lines()
            .filter(|l| l.starts_with("worktree "))
            .count(),
        1,
        "the lead agent's checkout was not removed"
    );
    assert_eq!(
        sb.git(repo, &["for-each-ref", "refs/orch/plans/"]),
        "",
        "a draft is not a stored plan"
    );
}

fn draft_of(out: &str) -> PathBuf {
    let line = out
        .lines()
        .find(|l| l.contains("(draft, not stored yet): "))
        .unwrap_or_else(|| panic!("no draft line in\n{out}"));
    PathBuf::from(
        line.split("(draft, not stored yet): ")
            .nth(1)
            .expect("path"),
    )
}

#[test]
fn a_lead_agent_fixes_its_plan_from_the_findings() {
    let sb = with_lead("fixes");
    let repo = project(&sb);
    let out = sb.orch(
        &repo,
        &["plan", "new", "Build the thing", "--agent", "fake"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    // Saved outside the work tree, shown like `plan show` with its check.
    let draft = draft_of(&text);
    assert!(
        draft.starts_with(repo.join(".git/orch/drafts")),
        "{}",
        draft.display()
    );
    let saved: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&draft).expect("draft")).expect("JSON");
    let fixed: serde_json::Value = serde_json::from_slice(
        &std::fs::read(repo_root().join("fixtures/agents/lead/fixed.json")).expect("fixture"),
    )
    .expect("JSON");
    assert_eq!(saved, fixed, "the second round's plan is the result");
    for needle in [
        "api: Build the API",
        "  owns: src/**, !src/web/**, !src/cli/**",
        "0 blocking",
        "independent: 3 (api, web, cli)",
        "fan-out: 3 agents can start at once",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
    // Two rounds in the log: the overlap found, then fixed.
    let rounds = plan_rounds(&sb, &repo);
    assert_eq!(rounds.len(), 2, "{rounds:?}");
    assert_eq!(rounds[0]["round"], 1);
    assert_eq!(rounds[0]["outcome"], "blocked");
    assert_eq!(rounds[0]["blocking"], 2);
    assert!(
        rounds[0]["problems"][0]
            .as_str()
            .expect("problem")
            .contains("[ownership-overlap]"),
        "{rounds:?}"
    );
    assert_eq!(rounds[1]["outcome"], "passed");
    assert_eq!(rounds[1]["session"], rounds[0]["session"]);
    assert_eq!(rounds[1]["plan_id"], "build-the-thing");
    assert_eq!(rounds[1]["draft"], draft.to_string_lossy().as_ref());
    assert_eq!(rounds[1]["usage"]["cost_usd"], 0.02);
    assert_eq!(rounds[0]["base"], sb.git(&repo, &["rev-parse", "HEAD"]));
    assert_untouched(&sb, &repo);
    // The exact commands it prints store and approve it.
    let add = text
        .lines()
        .find(|l| l.trim_start().starts_with("git orch plan add "))
        .expect("plan add command");
    let approve = text
        .lines()
        .find(|l| l.trim_start().starts_with("git orch approve "))
        .expect("approve command");
    for command in [add, approve] {
        let out = sb
            .command("sh", &repo)
            .args(["-c", command.trim()])
            .output()
            .expect("sh");
        assert!(out.status.success(), "{command}: {}", stderr(&out));
    }
    sb.orch_ok(&repo, &["approve", "verify", "build-the-thing"]);
}

#[test]
fn a_lead_agent_that_never_fixes_it_exits_1_and_keeps_the_draft() {
    let sb = with_lead("never-fixes");
    let repo = project(&sb);
    let out = sb.orch(
        &repo,
        &[
            "plan",
            "new",
            "Build the thing",
            "--agent",
            "fake",
            "--rounds",
            "2",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("does not pass the check after 2 round(s)"),
        "{err}"
    );
    assert!(err.contains("the draft is kept at"), "{err}");
    let text = stdout(&out);
    assert!(text.contains("blocking (2):"), "findings shown: {text}");
    assert!(text.contains("[ownership-overlap]"), "{text}");
    let draft = draft_of(&text);
    let kept: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&draft).expect("draft kept")).expect("JSON");
    assert_eq!(
        kept["subtasks"][0]["owned_globs"],
        serde_json::json!(["src/**"])
    );
    let rounds = plan_rounds(&sb, &repo);
    let outcomes: Vec<&str> = rounds
        .iter()
        .map(|r| r["outcome"].as_str().expect("outcome"))
        .collect();
    assert_eq!(outcomes, ["blocked", "blocked"]);
    assert_untouched(&sb, &repo);
}

#[test]
fn garbage_from_the_lead_agent_is_refused_and_kept_for_a_look() {
    let sb = with_lead("garbage");
    let repo = project(&sb);
    let out = sb.orch(
        &repo,
        &[
            "plan",
            "new",
            "Build the thing",
            "--agent",
            "fake",
            "--rounds",
            "2",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stdout(&out).contains("not valid JSON"), "{}", stdout(&out));
    let rounds = plan_rounds(&sb, &repo);
    assert_eq!(rounds.len(), 2);
    assert!(
        rounds.iter().all(|r| r["outcome"] == "invalid"),
        "{rounds:?}"
    );
    assert!(rounds.iter().all(|r| r.get("plan_id").is_none()));
    let draft = PathBuf::from(rounds[1]["draft"].as_str().expect("draft"));
    assert!(
        std::fs::read_to_string(draft)
            .expect("kept")
            .starts_with("This is not a plan.")
    );
    assert_untouched(&sb, &repo);
}

#[test]
fn the_lead_agent_reads_a_checkout_and_cannot_touch_the_work_tree() {
    let sb = with_lead("stray");
    let repo = project(&sb);
    let before = std::fs::read_to_string(repo.join("src/api/mod.rs")).expect("read");
    let out = sb.orch(
        &repo,
        &["plan", "new", "Build the thing", "--agent", "fake"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("changed 2 file(s) of its read-only checkout"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("src/api/mod.rs")).expect("read"),
        before
    );
    assert!(!repo.join("new-file.txt").exists());
    let rounds = plan_rounds(&sb, &repo);
    assert_eq!(rounds[0]["stray"], 2);
    assert_untouched(&sb, &repo);
}

#[test]
fn the_prompt_is_the_brief_and_names_the_plan_file() {
    let mut sb = Sandbox::new();
    let repo = project(&sb);
    let seen = sb.path().join("seen");
    std::fs::create_dir_all(&seen).expect("mkdir");
    // A lead that records its prompt and environment, then writes nothing.
    sb.set_env(
        "FAKE_AGENT_SCRIPT",
        &format!(
            "run sh -c 'cp \"$ORCH_PROMPT_FILE\" {0}/prompt; printf %s \"$ORCH_PLAN_FILE\" > {0}/plan-file; pwd > {0}/cwd'",
            seen.display()
        ),
    );
    let out = sb.orch(
        &repo,
        &[
            "plan",
            "new",
            "Build the thing",
            "--agent",
            "fake",
            "--rounds",
            "1",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("you wrote no plan"),
        "{}",
        stdout(&out)
    );
    let prompt = std::fs::read_to_string(seen.join("prompt")).expect("prompt");
    let plan_file = std::fs::read_to_string(seen.join("plan-file")).expect("plan file");
    let cwd = std::fs::read_to_string(seen.join("cwd")).expect("cwd");
    assert!(prompt.contains("Instruction: Build the thing"), "{prompt}");
    assert!(prompt.contains(&plan_file), "the brief names {plan_file}");
    assert!(prompt.contains("## The plan format"), "{prompt}");
    assert!(prompt.contains("  - Cargo.lock (lockfile)"), "{prompt}");
    // The agent ran in a checkout of its own beside the repository (not
    // in the work tree, and not under .git, where some agents refuse to
    // write the plan file).
    let cwd = PathBuf::from(cwd.trim());
    let root = repo.with_file_name(format!(
        "{}.orch",
        repo.file_name().expect("name").to_string_lossy()
    ));
    assert!(cwd.starts_with(root.join(".lead")), "{}", cwd.display());
    assert!(
        !root.join(".lead").exists(),
        "the checkout goes when the session ends"
    );
    assert!(Path::new(&plan_file).starts_with(&cwd), "{plan_file}");
    assert_eq!(plan_rounds(&sb, &repo)[0]["outcome"], "missing");
    assert_untouched(&sb, &repo);
}

#[test]
fn out_is_checked_before_the_agent_runs() {
    let sb = with_lead("fixes");
    let repo = project(&sb);
    let existing = sb.path().join("existing.json");
    std::fs::write(&existing, "mine\n").expect("write");
    let refs_before = sb.refs(&repo);
    for (out_path, why) in [
        (
            repo.join(".git/plan.json"),
            "inside the repository's git folder",
        ),
        (repo.join(".git/config"), "already exists"),
        (existing.clone(), "already exists"),
        (sb.path().join("no/such/dir/plan.json"), "does not exist"),
    ] {
        let out = sb.orch(
            &repo,
            &[
                "plan",
                "new",
                "Build the thing",
                "--agent",
                "fake",
                "--out",
                &out_path.to_string_lossy(),
            ],
        );
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}: {}",
            out_path.display(),
            stderr(&out)
        );
        assert!(
            stderr(&out).contains(why),
            "{}: {}",
            out_path.display(),
            stderr(&out)
        );
    }
    assert_eq!(std::fs::read_to_string(&existing).expect("read"), "mine\n");
    assert_eq!(sb.refs(&repo), refs_before, "nothing was written");
    assert!(!repo.join(".git/orch/lead").exists(), "no agent ran");
    // Outside the work tree: saved there, quietly.
    let outside = sb.path().join("plan.json");
    let out = sb.orch(
        &repo,
        &[
            "plan",
            "new",
            "Build the thing",
            "--agent",
            "fake",
            "--out",
            &outside.to_string_lossy(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("inside the work tree"));
    assert_eq!(draft_of(&stdout(&out)), outside);
    // Inside the work tree (relative to it): saved, with a note on `run`.
    let out = sb.orch(
        &repo,
        &[
            "plan",
            "new",
            "Build the thing",
            "--agent",
            "fake",
            "--out",
            "plan.json",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(repo.join("plan.json").exists());
    assert!(
        stderr(&out).contains("inside the work tree and not ignored"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn usage_errors_exit_2() {
    let sb = Sandbox::new();
    let repo = project(&sb);
    for args in [
        &["plan", "new"][..],
        &["plan", "new", "x", "--out", "p.json"],
        &["plan", "new", "x", "--agent", "fake", "--rounds", "0"],
        &["plan", "new", "x", "--rounds", "2"],
        &["plan", "new", "--skeleton", "--agent", "fake"],
        &["plan", "new", "  "],
    ] {
        let out = sb.orch(&repo, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    }
    let out = sb.orch(
        &repo,
        &["plan", "new", "x", "--agent", "fake", "--budget", "-1"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn an_unknown_or_missing_agent_is_refused_before_anything_runs() {
    let sb = Sandbox::new();
    let repo = project(&sb);
    let out = sb.orch(&repo, &["plan", "new", "x", "--agent", "nobody"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no agent named \"nobody\""),
        "{}",
        stderr(&out)
    );
    std::fs::create_dir_all(repo.join(".orch")).expect("mkdir");
    std::fs::write(
        repo.join(".orch/config"),
        "[agent \"ghost\"]\n\tkind = claude\n\tprogram = /nonexistent/claude\n",
    )
    .expect("write");
    sb.git(&repo, &["add", "."]);
    sb.git(&repo, &["commit", "-q", "-m", "config"]);
    let out = sb.orch(&repo, &["plan", "new", "x", "--agent", "ghost"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("is not on PATH"), "{}", stderr(&out));
    assert!(plan_rounds(&sb, &repo).is_empty());
    assert!(!repo.join(".git/orch/lead").exists());
}

#[test]
fn the_budget_stops_before_another_round() {
    let sb = with_lead("fixes");
    let repo = project(&sb);
    let out = sb.orch(
        &repo,
        &[
            "plan",
            "new",
            "Build the thing",
            "--agent",
            "fake",
            "--budget",
            "0.005",
        ],
    );
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("stopped after 1 round(s): $0.01 reported"),
        "{}",
        stderr(&out)
    );
    assert_eq!(plan_rounds(&sb, &repo).len(), 1);
    assert!(
        stderr(&out).contains("the draft is kept at"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_lead_agent_that_hangs_is_stopped_at_the_timeout() {
    let mut sb = Sandbox::new();
    let repo = project(&sb);
    sb.set_env("FAKE_AGENT_SCRIPT", "hang");
    let start = std::time::Instant::now();
    let out = sb.orch(
        &repo,
        &[
            "plan",
            "new",
            "x",
            "--agent",
            "fake",
            "--rounds",
            "1",
            "--timeout",
            "1",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(start.elapsed() < std::time::Duration::from_secs(30));
    let rounds = plan_rounds(&sb, &repo);
    assert_eq!(rounds[0]["outcome"], "agent_failed");
    assert_eq!(rounds[0]["timed_out"], true);
    assert_untouched(&sb, &repo);
}

#[test]
fn ctrl_c_stops_the_lead_agent_records_the_round_and_exits_130() {
    let mut sb = Sandbox::new();
    let repo = project(&sb);
    let started = sb.path().join("started");
    sb.set_env(
        "FAKE_AGENT_SCRIPT",
        &format!("stamp {} lead\nhang\n", started.display()),
    );
    let child = sb
        .command("git-orch", &repo)
        .args(["plan", "new", "x", "--agent", "fake"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("plan new");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !started.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the lead agent never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: a positive pid of our own child; SIGINT is what Ctrl-C sends.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    let rounds = plan_rounds(&sb, &repo);
    assert_eq!(rounds.len(), 1);
    assert_eq!(rounds[0]["outcome"], "interrupted");
    assert_untouched(&sb, &repo);
}

#[test]
fn the_skeleton_is_a_plan_in_natural_key_order() {
    let sb = Sandbox::new();
    let repo = sb.repo("r");
    let text = sb.orch_ok(&repo, &["plan", "new", "--skeleton", "Add a checkout flow"]);
    let v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(v["id"], "add-a-checkout-flow");
    let keys: Vec<usize> = ["\"version\"", "\"id\"", "\"instruction\"", "\"subtasks\""]
        .iter()
        .map(|k| text.find(k).expect("key"))
        .collect();
    assert!(keys.windows(2).all(|w| w[0] < w[1]), "{text}");
    let file = sb.path().join("skeleton.json");
    std::fs::write(&file, &text).expect("write");
    let out = sb.orch(&repo, &["plan", "check", &file.to_string_lossy()]);
    // A valid plan (not exit 1) that cannot be approved as it is: its
    // first verification describes a command instead of being one.
    assert_eq!(
        out.status.code(),
        Some(3),
        "the skeleton is a valid plan that blocks until edited: {}",
        stderr(&out)
    );
    assert!(
        stdout(&out).contains("first-piece's verification")
            && stdout(&out).contains("reads as a description"),
        "{}",
        stdout(&out)
    );
}
