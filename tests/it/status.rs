//! One status model everywhere: `status` (a table with column headers),
//! `status --json`, `status --watch` and the live view of `run` on a real
//! terminal (a pty made by util-linux `script`) name task states the same
//! way, keep failure reasons on final screens, show tokens and cost an
//! agent did not report as unknown, and `--watch` ends with the run's exit
//! code or on `q`.

use crate::common;

use std::io::{Read, Write};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Project, Sandbox, needs_program, project, stderr, stdout};

/// `good` lands (reporting tokens and cost), `bad` fails its verification
/// with no retry left, `after-bad` depends on it and is blocked.
fn mixed(sb: &mut Sandbox, slow: bool) -> Project {
    let tasks: Vec<(&str, &[&str], &str)> = vec![
        ("good", &[], "test -f src/good/done"),
        ("bad", &[], "false"),
        ("after-bad", &["bad"], "true"),
    ];
    let p = project(sb, &tasks, Some("[orch]\n    retries = 0\n"));
    let pause = if slow { "sleep 1\n" } else { "" };
    p.script(
        "good",
        &format!("{pause}write src/good/done yes\ncost 0.25\n"),
    );
    p.script("bad", &format!("{pause}write src/bad/done yes\n"));
    p.script("after-bad", "write src/after-bad/done yes\n");
    p
}

fn task<'a>(status: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    status["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .find(|t| t["task"] == id)
        .unwrap_or_else(|| panic!("no task {id} in {status}"))
}

/// The row of `id` in `status`'s table.
fn row<'a>(table: &'a str, id: &str) -> &'a str {
    table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(id))
        .unwrap_or_else(|| panic!("no row {id} in:\n{table}"))
}

/// Waits for `child` to exit, at most `secs` seconds.
fn wait(child: &mut Child, secs: u64) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status.code().unwrap_or(-1);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("still running after {secs}s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn text_json_and_the_live_view_name_states_alike_and_keep_reasons() {
    if !needs_program("script", "Debian/Ubuntu: apt-get install bsdutils") {
        return;
    }
    let mut sb = Sandbox::new();
    let p = mixed(&mut sb, false);
    // The live view on a terminal.
    let out = sb
        .command("script", &p.repo)
        .args(["-qfec", "git orch run proj --agent fake", "/dev/null"])
        .env("TERM", "xterm-256color")
        .output()
        .expect("script runs");
    let tty = stdout(&out);
    assert_eq!(out.status.code(), Some(3), "{tty}");
    // The last frame: everything after the last cursor movement up.
    let last = tty.rsplit("\x1b[5A").next().expect("frames");
    let line_of = |id: &str| {
        last.lines()
            .map(|l| l.trim_start_matches("\x1b[2K"))
            .find(|l| l.split_whitespace().next() == Some(id))
            .unwrap_or_else(|| panic!("no row {id} in the last frame:\n{last:?}"))
    };
    assert!(
        last.contains("  TASK ") && last.contains(" STATE "),
        "{last:?}"
    );
    assert!(line_of("good").contains("done"), "{last:?}");
    let bad = line_of("bad");
    assert!(bad.contains("failed"), "{bad:?}");
    assert!(
        bad.contains("retry budget exhausted"),
        "the reason is gone from the final screen: {bad:?}"
    );
    let blocked = line_of("after-bad");
    assert!(blocked.contains("blocked"), "{blocked:?}");
    assert!(blocked.contains("depends on bad"), "{blocked:?}");
    assert!(
        !tty.contains("landed  "),
        "live view names a state `landed`"
    );

    // The table: headers, the same names and reasons, unknown usage.
    let table = sb.orch_ok(&p.repo, &["status"]);
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0].contains("(finished): 1 done, 1 blocked, 1 failed"),
        "{table}"
    );
    // Partly unknown: `bad`'s agent reported nothing.
    assert!(lines[1].contains("cost $0.25+?, 10 in, 5 out"), "{table}");
    for header in [
        "TASK",
        "STATE",
        "ATTEMPT",
        "AGENT",
        "TIME",
        "TOKENS IN/OUT",
        "COST",
        "PORT",
        "DETAIL",
    ] {
        assert!(lines[2].contains(header), "no {header} column:\n{table}");
    }
    let good = row(&table, "good");
    assert!(
        good.contains(" done ") && good.contains("$0.25") && good.contains("10/5"),
        "{good}"
    );
    let bad = row(&table, "bad");
    assert!(bad.contains(" failed "), "{bad}");
    assert!(bad.contains("unknown"), "cost shown as a number: {bad}");
    assert!(!bad.contains("$0.00"), "{bad}");
    assert!(bad.contains("retry budget exhausted"), "{bad}");
    let blocked = row(&table, "after-bad");
    assert!(
        blocked.contains(" blocked ") && blocked.contains("depends on bad"),
        "{blocked}"
    );

    // JSON: the same words, unknown as null, the run's exit code.
    let s: serde_json::Value =
        serde_json::from_str(sb.orch_ok(&p.repo, &["status", "--json"]).trim()).expect("json");
    assert_eq!(s["state"], "finished", "{s}");
    assert_eq!(s["exit_code"], 3, "{s}");
    assert_eq!(s["counts"]["failed"], 1, "{s}");
    assert_eq!(task(&s, "good")["status"], "done");
    assert_eq!(task(&s, "good")["cost_usd"], 0.25);
    assert_eq!(task(&s, "good")["usage"]["input_tokens"], 10);
    assert_eq!(task(&s, "good")["usage"]["cost"], "reported");
    assert_eq!(task(&s, "bad")["status"], "failed");
    assert!(task(&s, "bad")["cost_usd"].is_null(), "{s}");
    assert_eq!(task(&s, "bad")["usage"]["cost"], "unknown", "{s}");
    assert!(
        task(&s, "bad")["failure"]
            .as_str()
            .is_some_and(|f| f.starts_with("retry budget exhausted")),
        "{s}"
    );
    assert_eq!(task(&s, "after-bad")["status"], "blocked");
    assert_eq!(s["cost_usd"], 0.25);
    assert_eq!(s["usage"]["cost"], "partial");
}

#[test]
fn plain_output_ends_with_what_is_not_done_and_why() {
    let mut sb = Sandbox::new();
    let p = mixed(&mut sb, false);
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let err = stderr(&out);
    let tail: Vec<&str> = err.lines().rev().take(4).collect();
    let tail = tail.join("\n");
    assert!(
        tail.contains("bad                      failed #1: retry budget exhausted"),
        "{err}"
    );
    assert!(
        tail.contains("after-bad                blocked: depends on bad"),
        "{err}"
    );
}

#[test]
fn watch_ends_with_the_runs_exit_code() {
    let mut sb = Sandbox::new();
    let p = mixed(&mut sb, true);
    let mut run = sb
        .command("git", &p.repo)
        .args(["orch", "run", "proj", "--agent", "fake"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run starts");
    // Watch as soon as the run exists.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !sb.orch(&p.repo, &["status", "--json"]).status.success() {
        assert!(Instant::now() < deadline, "the run never appeared");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut watch = sb
        .command("git", &p.repo)
        .args(["orch", "status", "--watch", "--json"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("watch starts");
    let code = wait(&mut watch, 120);
    let mut text = String::new();
    watch
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut text)
        .expect("read");
    assert_eq!(wait(&mut run, 120), 3);
    assert_eq!(code, 3, "watch did not end with the run's code:\n{text}");
    let frames = common::json_lines(&text);
    let last = frames.last().expect("a frame");
    assert_eq!(last["exit_code"], 3, "{last}");
    assert_eq!(last["state"], "finished", "{last}");
    // A run that is over already: one frame and the code at once.
    let out = sb.orch(&p.repo, &["status", "--watch"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stdout(&out).contains("TASK"), "{}", stdout(&out));
}

#[test]
fn watch_on_a_terminal_stops_on_q() {
    if !needs_program("script", "Debian/Ubuntu: apt-get install bsdutils") {
        return;
    }
    let mut sb = Sandbox::new();
    let p = mixed(&mut sb, false);
    // Recorded, and nothing drives it: it stays open.
    common::share(&sb, &p.repo);
    sb.orch_ok(&p.repo, &["run", "proj", "--agent", "fake", "--start-only"]);
    let mut watch = sb
        .command("script", &p.repo)
        .args(["-qfec", "git orch status --watch", "/dev/null"])
        .env("TERM", "xterm-256color")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("script runs");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let reader = {
        let seen = seen.clone();
        let mut out = watch.stdout.take().expect("stdout");
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = out.read(&mut buf) {
                if n == 0 {
                    break;
                }
                seen.lock().expect("lock").extend_from_slice(&buf[..n]);
            }
        })
    };
    let text = || String::from_utf8_lossy(&seen.lock().expect("lock")).into_owned();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !text().contains("after-bad") {
        assert!(Instant::now() < deadline, "no frame: {:?}", text());
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut stdin = watch.stdin.take().expect("stdin");
    stdin.write_all(b"q").expect("type q");
    stdin.flush().expect("flush");
    let code = wait(&mut watch, 30);
    drop(stdin);
    reader.join().expect("reader");
    let shown = text();
    assert_eq!(code, 0, "{shown:?}");
    assert!(shown.contains("(open)"), "{shown:?}");
    assert!(shown.contains("pending"), "{shown:?}");
    assert!(shown.contains("TASK"), "{shown:?}");
}

#[test]
fn other_unfinished_runs_are_named_under_the_table_and_all_lists_every_run() {
    let mut sb = Sandbox::new();
    let p = project(&mut sb, &[("a", &[], "true"), ("b", &[], "true")], None);
    p.script("default", "write src/a/done yes\n");
    p.script("b", "write src/b/done yes\n");
    let other = serde_json::json!({"version": 1, "id": "other", "instruction": "more",
        "subtasks": [{"id": "b", "title": "B", "owned_globs": ["src/b/**"],
                      "deliverable": "b", "verification": "true"}]});
    let file = sb.path().join("other.json");
    std::fs::write(&file, other.to_string()).expect("plan");
    sb.orch_ok(&p.repo, &["plan", "add", &file.to_string_lossy()]);
    sb.orch_ok(&p.repo, &["approve", "other"]);
    // Two runs killed while landing: both unfinished. (The second starts
    // although the first left its checkout half moved: run finishes the
    // move first instead of calling the landed file uncommitted work.)
    for plan in ["proj", "other"] {
        let out = sb
            .command("git", &p.repo)
            .args(["orch", "run", plan, "--agent", "fake"])
            .env("ORCH_FAILPOINTS", "land.moved=kill")
            .output()
            .expect("runs");
        assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    let all = common::json_lines(&sb.orch_ok(&p.repo, &["status", "--all", "--json"]));
    let runs = all[0].as_array().expect("a list").clone();
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert_eq!(runs[0]["plan_id"], "other", "newest first: {runs:?}");
    assert!(runs.iter().all(|r| r["finished"] == false), "{runs:?}");
    let proj = runs[1]["run"].as_str().expect("id").to_owned();
    // A plan id names that plan's newest run.
    let by_plan = common::json_lines(&sb.orch_ok(&p.repo, &["status", "proj", "--json"]));
    assert_eq!(by_plan[0]["run"], proj.as_str());
    // Without a run: the newest, and a line naming the other.
    let table = sb.orch_ok(&p.repo, &["status"]);
    assert!(
        table.starts_with("run ") && table.contains("of plan other"),
        "{table}"
    );
    let also = table
        .lines()
        .find(|l| l.starts_with("also unfinished:"))
        .unwrap_or_else(|| panic!("no line naming the other run:\n{table}"));
    assert!(also.contains(&format!("{proj} (plan proj)")), "{also}");
    // Resumed to its end, proj is no longer named; the list says finished.
    sb.orch_ok(&p.repo, &["run", "proj", "--agent", "fake"]);
    let table = sb.orch_ok(&p.repo, &["status"]);
    assert!(!table.contains("also unfinished"), "{table}");
    let list = sb.orch_ok(&p.repo, &["status", "--all"]);
    let lines: Vec<&str> = list.lines().collect();
    assert!(lines[0].starts_with("RUN"), "{list}");
    let proj_line = lines
        .iter()
        .find(|l| l.starts_with(&proj))
        .expect("proj listed");
    assert!(proj_line.ends_with("finished"), "{list}");
    let other_line = lines
        .iter()
        .find(|l| l.contains(" other "))
        .expect("other listed");
    assert!(other_line.contains("unfinished, "), "{list}");
    // --all takes no run.
    let out = sb.orch(&p.repo, &["status", "--all", &proj]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}
