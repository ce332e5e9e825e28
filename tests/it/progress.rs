//! Progress of `run` and `merge` as a person sees it: on a real terminal
//! (a pty made by util-linux `script`) one line per task redrawn in place,
//! coloured unless `NO_COLOR` is set; through a pipe plain lines without
//! escape codes; and with `--json` a stdout that parses whatever stderr
//! shows.

use crate::common;

use std::process::Output;

use common::{
    Project, Sandbox, block_landings, needs_program, project, stderr, stdout, unblock_landings,
};

/// Whether util-linux `script` is here (under `CI=true` it must be).
fn have_script() -> bool {
    needs_program("script", "Debian/Ubuntu: apt-get install bsdutils")
}

fn two_slow_tasks(sb: &mut Sandbox) -> Project {
    let tasks: Vec<(&str, &[&str], &str)> = vec![
        ("alpha", &[], "test -f src/alpha/done"),
        ("beta", &[], "test -f src/beta/done"),
    ];
    let p = project(sb, &tasks, None);
    for id in ["alpha", "beta"] {
        // Long enough for several frames while the agents run.
        p.script(id, &format!("sleep 0.8\nwrite src/{id}/done yes\n"));
    }
    p
}

/// Runs `git orch <args>` on a pty; returns everything the terminal got.
fn on_a_pty(sb: &Sandbox, p: &Project, args: &str, colour: bool) -> Output {
    let mut cmd = sb.command("script", &p.repo);
    cmd.args(["-qfec", &format!("git orch {args}"), "/dev/null"])
        .env("TERM", "xterm-256color");
    if colour {
        cmd.env_remove("NO_COLOR");
    }
    cmd.output().expect("script runs")
}

/// Byte offsets of the matches of `pattern` in `hay`.
fn positions(hay: &str, pattern: &str) -> Vec<usize> {
    let re = regex::Regex::new(pattern).expect("regex");
    re.find_iter(hay).map(|m| m.start()).collect()
}

/// Whether `text` holds an SGR sequence (`ESC [ digits;… m`).
fn has_sgr(text: &str) -> bool {
    let re = regex::Regex::new(r"\x1b\[[0-9;]*m").expect("regex");
    re.is_match(text)
}

/// Whether `text` moves the cursor up (`ESC [ n A`).
fn moves_up(text: &str) -> bool {
    let re = regex::Regex::new(r"\x1b\[[0-9]+A").expect("regex");
    re.is_match(text)
}

#[test]
fn on_a_terminal_rows_are_redrawn_in_place_in_colour() {
    if !have_script() {
        return;
    }
    let mut sb = Sandbox::new();
    let p = two_slow_tasks(&mut sb);
    let out = on_a_pty(&sb, &p, "run proj --agent fake --cap 2", true);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}{}", stderr(&out));
    assert!(moves_up(&text), "no cursor movement:\n{text:?}");
    assert!(text.contains("\x1b[2K"), "lines are not cleared:\n{text:?}");
    // Each task's row goes from running to done, redrawn, not appended,
    // under column headers.
    assert!(text.contains("TASK  STATE"), "no column headers:\n{text:?}");
    for task in ["alpha", "beta"] {
        let running = positions(&text, &format!(r"{task} +\x1b\[33mrunning"));
        let landed = positions(&text, &format!(r"{task} +\x1b\[1;32mdone"));
        assert!(!running.is_empty(), "{task} never shown running:\n{text:?}");
        assert!(!landed.is_empty(), "{task} never shown landed:\n{text:?}");
        assert!(running[0] < *landed.last().expect("landed"), "{text:?}");
    }
    // The current step shows while an attempt runs.
    assert!(text.contains("agent fake"), "{text:?}");
    // The final frame stays: the summary line counts both done.
    assert!(text.contains("2 done"), "{text:?}");
    assert!(
        text.contains("Run "),
        "the closing line is missing:\n{text:?}"
    );
    // Plain event lines are not printed on a terminal.
    assert!(!text.contains("attempt 1 started"), "{text:?}");
}

#[test]
fn no_color_on_a_terminal_keeps_the_redraw_and_drops_the_colour() {
    if !have_script() {
        return;
    }
    let mut sb = Sandbox::new();
    let p = two_slow_tasks(&mut sb);
    // The sandbox sets NO_COLOR=1 for every command.
    let out = on_a_pty(&sb, &p, "run proj --agent fake --cap 2", false);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}{}", stderr(&out));
    assert!(moves_up(&text), "no cursor movement:\n{text:?}");
    assert!(!has_sgr(&text), "colour despite NO_COLOR:\n{text:?}");
    assert!(text.contains("running"), "{text:?}");
    assert!(text.contains("done"), "{text:?}");
}

#[test]
fn through_a_pipe_progress_is_plain_lines() {
    let mut sb = Sandbox::new();
    let p = two_slow_tasks(&mut sb);
    // Colour allowed: only the missing terminal keeps it plain.
    let out = sb
        .command("git", &p.repo)
        .args(["orch", "run", "proj", "--agent", "fake", "--cap", "2"])
        .env_remove("NO_COLOR")
        .output()
        .expect("run");
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains('\x1b'), "escape codes in a pipe:\n{err:?}");
    assert!(
        err.contains("alpha                    attempt 1 started (fake)"),
        "{err}"
    );
    assert!(
        err.contains("alpha                    attempt 1: agent fake"),
        "{err}"
    );
    assert!(
        err.contains("alpha                    attempt 1 landed"),
        "{err}"
    );
    assert_eq!(stdout(&out), "", "progress went to stdout");
}

#[test]
fn merge_json_stdout_parses_while_stderr_shows_live_progress() {
    let mut sb = Sandbox::new();
    let p = two_slow_tasks(&mut sb);
    // A dirty checkout of the target keeps `run` from landing.
    block_landings(&p.repo);
    let out = sb.orch(
        &p.repo,
        &[
            "run", "proj", "--agent", "fake", "--cap", "2", "--base", "main",
        ],
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    unblock_landings(&p.repo);
    let out = sb
        .command("git", &p.repo)
        .args(["orch", "merge", "--json"])
        .env("GIT_ORCH_PROGRESS", "tty")
        .env_remove("NO_COLOR")
        .output()
        .expect("merge");
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let report: serde_json::Value =
        serde_json::from_str(stdout(&out).trim()).expect("merge --json prints one JSON value");
    assert_eq!(
        report["landed"].as_array().map(Vec::len),
        Some(2),
        "{report}"
    );
    assert!(moves_up(&err) || err.contains("\x1b[2K"), "{err:?}");
    assert!(err.contains("done"), "{err:?}");
    let status: serde_json::Value =
        serde_json::from_str(sb.orch_ok(&p.repo, &["status", "--json"]).trim())
            .expect("status --json parses");
    assert!(status["tasks"].is_array(), "{status}");
}
