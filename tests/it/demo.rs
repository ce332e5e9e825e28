//! `git orch demo`: the whole loop on a throwaway repository. The checks
//! read the outcome from the kept repository (events, status, notes, the
//! project's own test suite), not from the demo's narration; and the demo
//! must write nothing outside its folder, need no git identity, and refuse
//! bad input before writing anything.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use common::{Sandbox, events, status_json, stderr, stdout};

const TASKS: [&str; 5] = ["upper", "reverse", "wordcount", "shout", "ci"];

/// Every file and folder under `dir`, relative, sorted.
fn tree(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries {
            let path = e.expect("entry").path();
            out.push(
                path.strip_prefix(root)
                    .expect("under root")
                    .to_string_lossy()
                    .into_owned(),
            );
            if path.is_dir() && !path.is_symlink() {
                walk(root, &path, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// A sandbox without a git identity: the demo must not need one.
fn sandbox() -> Sandbox {
    let mut sb = Sandbox::new();
    sb.identity = false;
    sb
}

/// Events of `kind` for `task`, by attempt.
fn of<'a>(
    events: &'a [serde_json::Value],
    kind: &str,
    task: &str,
) -> impl Iterator<Item = &'a serde_json::Value> {
    events
        .iter()
        .filter(move |e| e["type"] == kind && e["task"] == task)
}

#[test]
fn the_demo_lands_all_five_tasks_from_a_folder_that_is_not_a_repository() {
    let sb = sandbox();
    let elsewhere = sb.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).expect("mkdir");
    assert!(
        !sb.git_output(&elsewhere, &["rev-parse", "--git-dir"])
            .status
            .success(),
        "the test needs a starting folder outside any repository"
    );
    let keep = sb.path().join("demo");
    let out = sb.orch(&elsewhere, &["demo", "--keep", &keep.to_string_lossy()]);
    let text = stdout(&out);
    assert!(
        out.status.success(),
        "demo failed: {}\n{text}",
        stderr(&out)
    );
    // The run's lines follow the log's order: a dependency's landing is
    // shown before its dependent starts.
    let at = |line: &str| {
        text.find(line)
            .unwrap_or_else(|| panic!("no line {line:?} in:\n{text}"))
    };
    assert!(
        at("upper                    attempt 1 landed")
            < at("shout                    attempt 1 started"),
        "{text}"
    );
    for heading in [
        "1. A project",
        "2. A plan",
        "3. An approval",
        "4. A run",
        "5. Status",
        "6. The journal",
        "7. Notes on main",
        "8. The result",
    ] {
        assert!(text.contains(heading), "no {heading:?} in:\n{text}");
    }
    assert!(text.contains("$ git orch run tt-features"), "{text}");

    let project = keep.join("project");
    // Every task is done, read from the log by `status`.
    let status = status_json(&sb, &project);
    assert_eq!(status["state"], "finished", "{status}");
    let done: BTreeMap<String, String> = status["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .map(|t| {
            (
                t["task"].as_str().expect("id").to_owned(),
                t["status"].as_str().expect("status").to_owned(),
            )
        })
        .collect();
    assert_eq!(done.len(), 5, "{status}");
    assert!(done.values().all(|s| s == "done"), "{status}");

    // All five landed through the merge queue, each once.
    let log = events(&sb, &project);
    let landed: Vec<&serde_json::Value> = log.iter().filter(|e| e["type"] == "landed").collect();
    let landed_tasks: BTreeSet<&str> = landed
        .iter()
        .map(|e| e["task"].as_str().expect("task"))
        .collect();
    assert_eq!(landed.len(), 5, "{landed:?}");
    assert_eq!(landed_tasks, TASKS.into_iter().collect());
    assert_eq!(
        log.iter()
            .filter(|e| e["type"] == "integration_verdict")
            .count(),
        5,
        "one integration gate run per landing"
    );

    // reverse: exactly two attempts; the first failed the test gate, naming
    // the failing test; the second passed.
    assert_eq!(of(&log, "attempt_created", "reverse").count(), 2);
    let first_test = of(&log, "gate_verdict", "reverse")
        .find(|e| e["attempt"] == 1 && e["verdict"]["gate"] == "test")
        .expect("the test gate judged reverse's first attempt");
    assert_eq!(first_test["verdict"]["status"], "fail", "{first_test}");
    assert!(
        first_test["verdict"]["details"]["failing_tests"]
            .as_array()
            .expect("failing tests")
            .iter()
            .any(|t| t == "reverse: keeps every character"),
        "{first_test}"
    );
    let finished: Vec<(u64, String)> = of(&log, "attempt_finished", "reverse")
        .map(|e| {
            (
                e["attempt"].as_u64().expect("n"),
                e["outcome"].as_str().expect("outcome").to_owned(),
            )
        })
        .collect();
    assert_eq!(finished, [(1, "failed".into()), (2, "passed".into())]);

    // wordcount: the first attempt wrote README.md and failed the scope
    // gate; the retry stayed in scope and landed.
    assert_eq!(of(&log, "attempt_created", "wordcount").count(), 2);
    let scope = of(&log, "gate_verdict", "wordcount")
        .find(|e| e["attempt"] == 1 && e["verdict"]["gate"] == "scope")
        .expect("the scope gate judged wordcount's first attempt");
    assert_eq!(scope["verdict"]["status"], "fail", "{scope}");
    assert_eq!(
        scope["verdict"]["details"]["out_of_scope"],
        serde_json::json!(["README.md"])
    );
    let wc_landed = landed
        .iter()
        .find(|e| e["task"] == "wordcount")
        .expect("wordcount landed");
    assert_eq!(wc_landed["attempt"], 2);
    // Every other task got it right the first time.
    for task in ["upper", "shout", "ci"] {
        assert_eq!(of(&log, "attempt_created", task).count(), 1, "{task}");
    }
    // README.md on main is the seed's: the out-of-scope edit never landed.
    let readme = sb.git(&project, &["log", "--format=%s", "main", "--", "README.md"]);
    assert_eq!(readme.lines().count(), 1, "{readme}");

    // The landed project works: its own suite passes, run by hand.
    let suite = sb
        .command("sh", &project)
        .arg("test.sh")
        .output()
        .expect("sh runs");
    assert!(suite.status.success(), "{}", stdout(&suite));
    assert!(stdout(&suite).contains("ok 2 - reverse: keeps every character"));
    assert_eq!(sb.git(&project, &["status", "--porcelain"]), "");

    // Every landed commit has its note, naming the attempt it came from.
    for e in &landed {
        let commit = e["new"].as_str().expect("commit");
        let note = sb.git(&project, &["notes", "--ref=orch", "show", commit]);
        let attempt = format!(
            "{}/{}/attempt-{}",
            e["run_id"].as_str().expect("run"),
            e["task"].as_str().expect("task"),
            e["attempt"]
        );
        assert!(note.contains(&attempt), "{note}");
    }

    // Nothing was written outside the demo's folder: not beside it, not in
    // HOME, not where it started.
    let top: Vec<String> = std::fs::read_dir(sb.path())
        .expect("sandbox")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(top, ["demo", "elsewhere", "home"]);
    assert!(tree(&sb.path().join("home")).is_empty());
    assert!(tree(&elsewhere).is_empty());
}

#[test]
fn without_keep_the_demo_removes_its_folder_and_leaves_the_repository_it_starts_in_alone() {
    let mut sb = sandbox();
    let tmp = sb.path().join("tmp");
    std::fs::create_dir_all(&tmp).expect("mkdir");
    sb.set_env("TMPDIR", &tmp.to_string_lossy());
    let mine = sb.repo("mine");
    let refs = sb.refs(&mine);
    let config = std::fs::read_to_string(mine.join(".git/config")).expect("config");
    let files = tree(&mine);

    let out = sb.orch(&mine, &["demo"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("removed at the end"));

    assert!(tree(&tmp).is_empty(), "left behind: {:?}", tree(&tmp));
    assert_eq!(sb.refs(&mine), refs);
    assert_eq!(
        std::fs::read_to_string(mine.join(".git/config")).expect("config"),
        config
    );
    assert_eq!(tree(&mine), files);
}

#[test]
fn keep_into_a_folder_that_is_not_empty_is_refused_and_nothing_is_written() {
    let sb = sandbox();
    let keep = sb.path().join("busy");
    std::fs::create_dir_all(&keep).expect("mkdir");
    std::fs::write(keep.join("mine.txt"), "mine\n").expect("write");
    let out = sb.orch(sb.path(), &["demo", "--keep", &keep.to_string_lossy()]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("is not an empty folder"), "{err}");
    assert!(err.contains("hint:"), "{err}");
    assert_eq!(tree(&keep), ["mine.txt"]);
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));
}

#[test]
fn an_unknown_agent_is_refused_before_anything_is_written() {
    let sb = sandbox();
    let keep = sb.path().join("demo");
    let out = sb.orch(
        sb.path(),
        &[
            "demo",
            "--agent",
            "nosuchagent",
            "--keep",
            &keep.to_string_lossy(),
        ],
    );
    // The configuration exit code: who writes the code cannot work.
    assert_eq!(out.status.code(), Some(78));
    let err = stderr(&out);
    assert!(err.contains("no agent named \"nosuchagent\""), "{err}");
    assert!(err.contains("drop --agent"), "{err}");
    assert!(!keep.exists());
}

#[test]
fn a_missing_agent_program_names_the_agent_and_how_to_install_it() {
    let sb = sandbox();
    let probe = sb
        .command("sh", sb.path())
        .args(["-c", "command -v gemini"])
        .output();
    if probe.is_ok_and(|o| o.status.success()) {
        eprintln!("gemini is installed here; nothing to test");
        return;
    }
    let keep = sb.path().join("demo");
    let out = sb.orch(
        sb.path(),
        &[
            "demo",
            "--agent",
            "gemini",
            "--keep",
            &keep.to_string_lossy(),
        ],
    );
    assert_eq!(out.status.code(), Some(78));
    let err = stderr(&out);
    assert!(err.contains("agent gemini runs `gemini`"), "{err}");
    assert!(err.contains("npm install -g @google/gemini-cli"), "{err}");
    assert!(err.contains("drop --agent"), "{err}");
    assert!(!keep.exists());
}

/// `--agent claude` runs the same plan with that agent (here the offline
/// fake `claude` of fixtures/agents, scripted to do every task right).
#[test]
fn another_agent_runs_the_same_plan_without_scripted_mistakes() {
    let mut sb = sandbox();
    let scripts = sb.path().join("scripts");
    std::fs::create_dir_all(&scripts).expect("mkdir");
    let function = |name: &str, body: &str, expected: &str, call: &str| {
        format!(
            "write src/{name}.sh '{name}() {{ {body}; }}'\n\
             write tests/test_{name}.sh '. ./tests/lib.sh\\ncheck {name} \"{expected}\" \"$({call})\"\\nfinish'\n"
        )
    };
    for (task, script) in [
        (
            "upper",
            function("upper", r#"echo "$1" | tr a-z A-Z"#, "HI", "upper hi"),
        ),
        (
            "reverse",
            function(
                "reverse",
                r#"r=$1; o=; while [ -n "$r" ]; do t=${r#?}; o=${r%"$t"}$o; r=$t; done; echo "$o""#,
                "ih",
                "reverse hi",
            ),
        ),
        (
            "wordcount",
            function(
                "wordcount",
                r##"echo "$1" | wc -w | tr -d " ""##,
                "2",
                r#"wordcount "a b""#,
            ),
        ),
        (
            "shout",
            function("shout", r#"echo "$(upper "$1")!""#, "HI!", "shout hi"),
        ),
        ("ci", "write ci/check.sh 'sh test.sh'\n".to_owned()),
    ] {
        std::fs::write(scripts.join(format!("{task}.script")), script).expect("script");
    }
    sb.set_env("FAKE_AGENT_DIR", &scripts.to_string_lossy());
    // The fake stands in for a Claude Code with a key: the preflight asks.
    sb.set_env("ANTHROPIC_API_KEY", "sk-fake-key");
    let keep = sb.path().join("demo");
    let out = sb.orch(
        sb.path(),
        &[
            "demo",
            "--agent",
            "claude",
            "--keep",
            &keep.to_string_lossy(),
        ],
    );
    assert!(out.status.success(), "{}\n{}", stderr(&out), stdout(&out));
    assert!(stdout(&out).contains("$ git orch run tt-features --agent claude"));
    let project = keep.join("project");
    let log = events(&sb, &project);
    for task in TASKS {
        let created: Vec<&serde_json::Value> = of(&log, "attempt_created", task).collect();
        assert_eq!(created.len(), 1, "{task}: {created:?}");
        assert_eq!(created[0]["agent"], "claude", "{}", created[0]);
    }
    assert_eq!(log.iter().filter(|e| e["type"] == "landed").count(), 5);
}

#[test]
fn the_demo_agent_is_hidden_from_help() {
    let sb = sandbox();
    // `git orch --help` would ask git for a man page; ask the binary.
    let out = sb
        .command("git-orch", sb.path())
        .arg("--help")
        .output()
        .expect("git-orch runs");
    let help = stdout(&out);
    assert!(help.contains("demo"), "{help}");
    assert!(!help.contains("demo-agent"), "{help}");
}
