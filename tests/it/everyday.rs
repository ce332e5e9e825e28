//! Everyday use: approving twice records nothing, `init` says what to do
//! next, long output goes through git's pager on a terminal, a full disk
//! is an error, mistyped ids get a "did you mean", and every flag has help
//! that names the config key behind its default.

use crate::common;

use clap::CommandFactory;
use common::{Sandbox, json_lines, needs_program, project, stderr, stdout};

#[test]
fn approving_an_approved_plan_again_records_nothing_unless_asked() {
    let mut sb = Sandbox::new();
    let p = project(&mut sb, &[("a", &[], "true")], None);
    let count = |sb: &Sandbox| {
        json_lines(&sb.orch_ok(&p.repo, &["log", "--json"]))
            .iter()
            .filter(|e| e["type"] == "approval_recorded")
            .count()
    };
    assert_eq!(count(&sb), 1, "the project helper approved once");
    let refs = sb.refs(&p.repo);
    let out = sb.orch(&p.repo, &["approve", "proj"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("already approved"),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("--again"), "{}", stderr(&out));
    assert_eq!(count(&sb), 1);
    assert_eq!(sb.refs(&p.repo), refs, "nothing written");
    sb.orch_ok(&p.repo, &["approve", "proj", "--again"]);
    assert_eq!(count(&sb), 2);
}

#[test]
fn init_prints_the_next_steps() {
    let sb = Sandbox::new();
    let repo = sb.repo("r");
    let out = sb.orch(&repo, &["init"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("Next:"), "{err}");
    for step in [
        "git orch demo",
        "git orch plan new",
        "git orch run <plan>",
        "init --remote",
    ] {
        assert!(err.contains(step), "{step} missing:\n{err}");
    }
    // Again: nothing changes, and the steps are still there.
    let out = sb.orch(&repo, &["init"]);
    assert!(stderr(&out).contains("nothing changed"), "{}", stderr(&out));
    assert!(stderr(&out).contains("Next:"), "{}", stderr(&out));
}

/// Runs `git orch <args>` on a pty; returns what the terminal got.
fn on_a_pty(sb: &Sandbox, repo: &std::path::Path, args: &str, env: &[(&str, &str)]) -> String {
    let mut cmd = sb.command("script", repo);
    cmd.args(["-qfec", &format!("git orch {args}"), "/dev/null"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("script runs");
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    stdout(&out)
}

#[test]
fn long_output_goes_through_gits_pager_on_a_terminal_only() {
    if !needs_program("script", "Debian/Ubuntu: apt-get install bsdutils") {
        return;
    }
    let sb = Sandbox::new();
    let repo = sb.repo("r");
    sb.orch_ok(&repo, &["init"]);
    let pager = [("GIT_PAGER", "echo LESS=$LESS; sed s/^/PAGED:/")];
    let paged = on_a_pty(&sb, &repo, "log", &pager);
    assert!(paged.contains("LESS=FRX"), "{paged:?}");
    assert!(paged.contains("PAGED:"), "{paged:?}");
    assert!(paged.contains("initialized"), "{paged:?}");
    // --no-pager, before or after the command.
    for args in ["--no-pager log", "log --no-pager"] {
        let plain = on_a_pty(&sb, &repo, args, &pager);
        assert!(!plain.contains("PAGED:"), "{args}: {plain:?}");
        assert!(plain.contains("initialized"), "{args}: {plain:?}");
    }
    // core.pager when GIT_PAGER is not set; LESS as the user has it.
    sb.git(&repo, &["config", "core.pager", "sed s/^/CORE:/"]);
    let core = on_a_pty(&sb, &repo, "log", &[("LESS", "-R")]);
    assert!(core.contains("CORE:"), "{core:?}");
    // Through a pipe: never a pager.
    let out = sb
        .command("git", &repo)
        .args(["orch", "log"])
        .env("GIT_PAGER", "sed s/^/PAGED:/")
        .output()
        .expect("log");
    assert!(!stdout(&out).contains("PAGED:"), "{}", stdout(&out));
    assert!(stdout(&out).contains("initialized"));
}

#[test]
fn a_full_disk_is_an_error_not_a_silent_truncation() {
    let sb = Sandbox::new();
    let repo = sb.repo("r");
    sb.orch_ok(&repo, &["init"]);
    for args in [&["log"][..], &["completions", "bash"], &["log", "--json"]] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full");
        let out = sb
            .command("git", &repo)
            .arg("orch")
            .args(args)
            .stdout(full)
            .output()
            .expect("runs");
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("could not write the output"),
            "{args:?}: {}",
            stderr(&out)
        );
        assert!(
            stderr(&out).contains("No space left on device"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    // A reader that goes away early is not an error.
    let out = sb
        .command("sh", &repo)
        .args(["-c", "git orch completions bash | head -1 >/dev/null"])
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stderr(&out), "");
}

#[test]
fn mistyped_plan_run_and_task_ids_get_a_did_you_mean() {
    let mut sb = Sandbox::new();
    let p = project(
        &mut sb,
        &[("max-line-length", &[], "true"), ("api", &[], "true")],
        None,
    );
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["approve", "porj"], "did you mean plan `proj`?"),
        (vec!["plan", "show", "prj"], "did you mean plan `proj`?"),
        (vec!["plan", "check", "proj-"], "did you mean plan `proj`?"),
        (vec!["run", "porj"], "did you mean plan `proj`?"),
        (vec!["approve", "verify", "Proj"], "plan id"),
        (
            vec!["run", "proj", "--redo", "max-line-lenght", "--dry-run"],
            "did you mean task `max-line-length`?",
        ),
        (
            vec!["retry", "max-line-lenght"],
            "did you mean task `max-line-length`?",
        ),
    ];
    for (args, says) in cases {
        let out = sb.orch(&p.repo, &args);
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
    // Runs: after one exists.
    common::share(&sb, &p.repo);
    sb.orch_ok(&p.repo, &["run", "proj", "--start-only"]);
    let id = json_lines(&sb.orch_ok(&p.repo, &["log", "--json"]))
        .iter()
        .find(|e| e["type"] == "run_started")
        .and_then(|e| e["run_id"].as_str().map(str::to_owned))
        .expect("run");
    let typo = format!("{}x", id);
    for args in [vec!["status", typo.as_str()], vec!["merge", typo.as_str()]] {
        let out = sb.orch(&p.repo, &args);
        assert!(!out.status.success(), "{args:?}");
        assert!(
            stderr(&out).contains(&format!("did you mean run `{id}`?")),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn every_flag_and_argument_has_help() {
    fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            if arg.is_hide_set() || id == "help" || id == "version" {
                continue;
            }
            if arg
                .get_help()
                .is_none_or(|h| h.to_string().trim().is_empty())
            {
                missing.push(format!("{path} {id}"));
            }
        }
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            walk(sub, &format!("{path} {}", sub.get_name()), missing);
        }
    }
    let mut missing = Vec::new();
    walk(&git_orch::cli::Cli::command(), "git orch", &mut missing);
    assert!(missing.is_empty(), "no help text:\n{}", missing.join("\n"));
}

#[test]
fn help_names_the_config_key_behind_each_default() {
    let sb = Sandbox::new();
    for (cmd, keys) in [
        ("worker", &["orch.remote", "orch.cap"][..]),
        (
            "run",
            &["orch.cap", "orch.agent", "orch.target", "orch.timeout"],
        ),
        ("merge", &["orch.mergeStrategy", "orch.mergeBatch"]),
        ("land", &["orch.target", "orch.mergeStrategy"]),
        ("sync", &["orch.remote"]),
    ] {
        let help = sb.orch_ok(sb.path(), &[cmd, "--help"]);
        for key in keys {
            assert!(
                help.contains(key),
                "`{cmd} --help` does not name {key}:\n{help}"
            );
        }
    }
}
