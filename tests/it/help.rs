//! Help and completion where people look for them: man pages found by
//! `man` and by `git orch --help` (which git turns into `man git-orch`),
//! clap's `git orch help <cmd>` without any man page, and completion
//! scripts for bash (through git's own completion), zsh and fish.
//!
//! Tests that need `man`, git's completion script, `zsh` or `fish` fail
//! under `CI=true` when it is missing (`.ci/run` installs them); elsewhere
//! they say loudly that they skipped (Debian/Ubuntu: `man-db`, `git`,
//! `zsh`, `fish`).

use crate::common;

use std::path::{Path, PathBuf};

use common::{Sandbox, bin_dir, needs, needs_program, stderr, stdout};

#[test]
fn install_man_writes_pages_that_man_finds_through_manpath() {
    if !needs_program("man", "Debian/Ubuntu: apt-get install man-db") {
        return;
    }
    let sb = Sandbox::new();
    let dir = sb.path().join("share/man/man1");
    let out = sb.orch(sb.path(), &["install-man", "--dir", &dir.to_string_lossy()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("Installed"), "{}", stderr(&out));
    for page in ["git-orch.1", "git-orch-run.1", "git-orch-plan-check.1"] {
        assert!(dir.join(page).is_file(), "{page} was not written");
    }
    let manpath = sb.path().join("share/man");
    for page in ["git-orch", "git-orch-plan-check"] {
        let found = sb
            .command("man", sb.path())
            .env("MANPATH", &manpath)
            .args(["-w", page])
            .output()
            .expect("man runs");
        assert!(found.status.success(), "man -w {page}: {}", stderr(&found));
        assert_eq!(
            stdout(&found).trim(),
            dir.join(format!("{page}.1")).to_string_lossy()
        );
    }
    // A stale page of a command that no longer exists goes on reinstall.
    std::fs::write(dir.join("git-orch-gone.1"), ".TH GONE 1\n").expect("write");
    sb.orch_ok(sb.path(), &["install-man", "--dir", &dir.to_string_lossy()]);
    assert!(!dir.join("git-orch-gone.1").exists());
}

/// A prefix like `cargo install`'s: `<prefix>/bin/git-orch`.
fn installed_prefix(sb: &Sandbox) -> PathBuf {
    let prefix = sb.path().join("prefix");
    std::fs::create_dir_all(prefix.join("bin")).expect("mkdir");
    let exe = bin_dir().join("git-orch");
    let dest = prefix.join("bin/git-orch");
    if std::fs::hard_link(&exe, &dest).is_err() {
        std::fs::copy(&exe, &dest).expect("copy the binary");
    }
    prefix
}

fn path_with(bin: &Path) -> String {
    format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display())
}

#[test]
fn git_orch_dash_dash_help_shows_the_page_installed_beside_the_binary() {
    if !needs_program("man", "Debian/Ubuntu: apt-get install man-db") {
        return;
    }
    let mut sb = Sandbox::new();
    let prefix = installed_prefix(&sb);
    sb.set_env("PATH", &path_with(&prefix.join("bin")));
    sb.set_env("MANPAGER", "cat");
    sb.set_env("PAGER", "cat");
    sb.set_env("MANWIDTH", "80");
    // The default directory: <dir of the executable>/../share/man/man1.
    let out = sb.orch(sb.path(), &["install-man"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(prefix.join("share/man/man1/git-orch-run.1").is_file());
    // man-db maps a PATH entry <p>/bin to <p>/share/man: no MANPATH needed.
    let out = sb.orch(sb.path(), &["--help"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{}{}", text, stderr(&out));
    assert!(text.contains("git-orch-run(1)"), "{text}");
    assert!(text.contains("EXIT STATUS"), "{text}");
    let out = sb.orch(sb.path(), &["run", "--help"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{}{}", text, stderr(&out));
    assert!(text.contains("git orch run"), "{text}");
    assert!(text.contains("--cap"), "{text}");
}

#[test]
fn clap_help_works_without_man_pages() {
    let sb = Sandbox::new();
    let out = sb.orch_ok(sb.path(), &["help", "run"]);
    assert!(out.contains("Usage: git orch run"), "{out}");
    assert!(out.contains("--cap <N>"), "{out}");
    let out = sb.orch_ok(sb.path(), &["help", "plan", "check"]);
    assert!(out.contains("Usage: git orch plan check"), "{out}");
    let out = sb.orch_ok(sb.path(), &["run", "-h"]);
    assert!(out.contains("Usage: git orch run"), "{out}");
    let out = sb.orch_ok(sb.path(), &["help"]);
    for cmd in ["install-man", "completions", "run", "merge"] {
        assert!(out.contains(cmd), "{cmd} missing from:\n{out}");
    }
    assert!(!out.contains("debug"), "hidden commands show:\n{out}");
}

fn completion(sb: &Sandbox, shell: &str) -> String {
    let text = sb.orch_ok(sb.path(), &["completions", shell]);
    assert!(!text.trim().is_empty(), "{shell} script is empty");
    assert!(
        text.contains("GIT_ORCH_COMPLETE"),
        "{shell} script is not dynamic"
    );
    text
}

fn syntax_ok(sb: &Sandbox, shell: &str, script: &str) {
    let file = sb.path().join(format!("completion.{shell}"));
    std::fs::write(&file, script).expect("write script");
    let out = sb
        .command(shell, sb.path())
        .arg("-n")
        .arg(&file)
        .output()
        .expect("shell runs");
    assert!(
        out.status.success(),
        "{shell} -n: {}{}",
        stdout(&out),
        stderr(&out)
    );
}

/// A repository with plan `proj` (tasks `alpha` and `beta`) and plan
/// `other-plan` (task `gamma`), for completing ids.
fn repo_with_plans(sb: &mut Sandbox) -> PathBuf {
    let tasks: Vec<(&str, &[&str], &str)> = vec![("alpha", &[], "true"), ("beta", &[], "true")];
    let p = common::project(sb, &tasks, None);
    let other = serde_json::json!({"version": 1, "id": "other-plan", "instruction": "Other work",
        "subtasks": [{"id": "gamma", "title": "Gamma", "owned_globs": ["src/gamma/**"],
        "deliverable": "gamma", "verification": "true"}]});
    let file = sb.path().join("other.json");
    std::fs::write(&file, other.to_string()).expect("plan");
    sb.orch_ok(&p.repo, &["plan", "add", &file.to_string_lossy()]);
    p.repo
}

/// Where git's bash completion lives on common systems.
fn git_completion_script() -> Option<PathBuf> {
    [
        "/usr/share/bash-completion/completions/git",
        "/usr/share/git-core/contrib/completion/git-completion.bash",
        "/usr/share/git/completion/git-completion.bash",
        "/etc/bash_completion.d/git",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.is_file())
}

/// What bash offers for `line` (completing its last word) in `cwd`:
/// through git's completion when the line starts with `git`, else through
/// the function registered for `git-orch`.
fn bash_offers(
    sb: &Sandbox,
    cwd: &Path,
    git_completion: &Path,
    ours: &Path,
    line: &str,
) -> Vec<String> {
    let call = if line.starts_with("git-orch") {
        "_clap_complete_git_orch git-orch \"${COMP_WORDS[COMP_CWORD]}\" \"${COMP_WORDS[COMP_CWORD-1]}\""
    } else {
        "__git_wrap__git_main"
    };
    let script = format!(
        r#"source {git}
source {ours}
COMP_LINE={line:?}
COMP_POINT=${{#COMP_LINE}}
COMP_TYPE=9
read -ra COMP_WORDS <<< "$COMP_LINE"
case "$COMP_LINE" in *" ") COMP_WORDS+=("") ;; esac
COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))
{call}
printf '%s\n' "${{COMPREPLY[@]}}"
"#,
        git = git_completion.display(),
        ours = ours.display(),
    );
    let out = sb
        .command("bash", cwd)
        .args(["--norc", "--noprofile", "-c", &script])
        .output()
        .expect("bash runs");
    assert!(out.status.success(), "bash: {}", stderr(&out));
    assert!(stderr(&out).is_empty(), "bash said: {}", stderr(&out));
    stdout(&out).lines().map(str::to_owned).collect()
}

#[test]
fn bash_completes_plan_and_task_ids_through_gits_own_completion() {
    let mut sb = Sandbox::new();
    let script = completion(&sb, "bash");
    assert!(
        script.contains("_git_orch ()"),
        "no bridge for git's completion"
    );
    syntax_ok(&sb, "bash", &script);
    let Some(git_completion) = git_completion_script() else {
        needs(
            false,
            "git's bash completion script",
            "Debian/Ubuntu: apt-get install git bash-completion",
        );
        return;
    };
    let repo = repo_with_plans(&mut sb);
    let ours = sb.path().join("completion.bash");
    let offers = |line: &str| bash_offers(&sb, &repo, &git_completion, &ours, line);
    assert_eq!(offers("git orch ru"), ["run "]);
    assert_eq!(offers("git orch plan ch"), ["check "]);
    assert_eq!(offers("git orch merge --stra"), ["--strategy "]);
    assert_eq!(
        offers("git orch merge --strategy "),
        ["rebase ", "merge ", "squash "]
    );
    assert_eq!(offers("git -C . orch inst"), ["install-man "]);
    let all = offers("git orch ");
    assert!(all.contains(&"status ".to_owned()), "{all:?}");
    assert!(all.contains(&"land ".to_owned()), "{all:?}");
    assert!(!all.iter().any(|o| o.starts_with("debug")), "{all:?}");
    // Ids from the repository.
    assert_eq!(offers("git orch approve pr"), ["proj "]);
    let approve = offers("git orch approve ");
    for id in ["other-plan ", "proj "] {
        assert!(approve.contains(&id.to_owned()), "{approve:?}");
    }
    assert_eq!(offers("git orch run proj --redo al"), ["alpha "]);
    assert_eq!(
        offers("git orch run proj --redo "),
        ["alpha ", "beta "],
        "only the named plan's tasks"
    );
    assert_eq!(offers("git orch retry ga"), ["gamma "]);
    assert_eq!(offers("git orch run proj --agent cl"), ["claude "]);
    // And `git-orch` itself.
    assert_eq!(offers("git-orch approve pr"), ["proj"]);
    assert_eq!(offers("git-orch skip be"), ["beta"]);
}

#[test]
fn completion_outside_a_repository_offers_no_ids_and_no_errors() {
    let sb = Sandbox::new();
    let out = sb
        .command("git-orch", sb.path())
        .env("GIT_ORCH_COMPLETE", "fish")
        .args(["--", "git-orch", "approve", ""])
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stderr(&out), "");
    // Subcommands and flags, and nothing else.
    let text = stdout(&out);
    let offered: Vec<&str> = text
        .lines()
        .map(|l| l.split('\t').next().unwrap_or_default())
        .collect();
    assert!(offered.contains(&"verify"), "{offered:?}");
    assert!(
        offered
            .iter()
            .all(|o| *o == "verify" || *o == "help" || o.starts_with('-')),
        "{offered:?}"
    );
}

/// Runs an interactive zsh on a pty (zsh's own `zpty`) with the
/// completion system and our `_git-orch` in `$fpath`, types `line` and a
/// TAB, and returns the command line the completion left.
fn zsh_completes(sb: &Sandbox, cwd: &Path, fpath: &Path, line: &str) -> String {
    let script = format!(
        r#"zmodload zsh/zpty zsh/zselect
zpty z zsh -f -i
zpty -w z 'PS1="> "; fpath=({fpath} $fpath); autoload -Uz compinit; compinit -u -D; print READY$((6*7))'
integer i
local out chunk
for (( i = 0; i < 400; i++ )); do
  zpty -rt z chunk && out+=$chunk
  [[ $out == *READY42* ]] && break
  zselect -t 2
done
zpty -w -n z {line:?}$'\t'
zpty -w z $'\C-aprint -r -- X$((1+1))Y:'
out=""
for (( i = 0; i < 400; i++ )); do
  zpty -rt z chunk && out+=$chunk
  [[ $out == *X2Y:*$'\n'* ]] && break
  zselect -t 2
done
zpty -d z
local after=${{out#*X2Y:}}
print -r -- "${{after%%$'\r'*}}"
"#,
        fpath = fpath.display(),
    );
    let out = sb
        .command("zsh", cwd)
        .args(["-f", "-c", &script])
        .output()
        .expect("zsh runs");
    assert!(out.status.success(), "zsh: {}", stderr(&out));
    stdout(&out).trim().to_owned()
}

#[test]
fn zsh_completes_plan_and_task_ids_through_gits_own_completion() {
    let mut sb = Sandbox::new();
    let script = completion(&sb, "zsh");
    assert!(script.starts_with("#compdef git-orch"), "{script}");
    if !needs_program("zsh", "Debian/Ubuntu: apt-get install zsh") {
        return;
    }
    syntax_ok(&sb, "zsh", &script);
    // Installed as the guide says: `_git-orch` in a directory of $fpath.
    let fpath = sb.path().join("zfunc");
    std::fs::create_dir_all(&fpath).expect("mkdir");
    std::fs::write(fpath.join("_git-orch"), &script).expect("write");
    let repo = repo_with_plans(&mut sb);
    let done = |line: &str| zsh_completes(&sb, &repo, &fpath, line);
    assert_eq!(done("git orch approve pr"), "git orch approve proj");
    assert_eq!(
        done("git orch run proj --redo al"),
        "git orch run proj --redo alpha"
    );
    assert_eq!(done("git orch sta"), "git orch status");
    assert_eq!(done("git-orch cancel ga"), "git-orch cancel gamma");
}

#[test]
fn fish_completes_plan_and_task_ids_through_gits_own_completion() {
    let mut sb = Sandbox::new();
    let script = completion(&sb, "fish");
    assert!(script.contains("complete --keep-order"), "{script}");
    if !needs_program("fish", "Debian/Ubuntu: apt-get install fish") {
        return;
    }
    syntax_ok(&sb, "fish", &script);
    let repo = repo_with_plans(&mut sb);
    let file = sb.path().join("completion.fish");
    let offers = |line: &str| {
        let out = sb
            .command("fish", &repo)
            .args(["--no-config", "-c"])
            .arg(format!("source {}; complete -C {line:?}", file.display()))
            .output()
            .expect("fish runs");
        assert!(out.status.success(), "fish: {}", stderr(&out));
        stdout(&out)
            .lines()
            .map(|l| l.split('\t').next().unwrap_or_default().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(offers("git orch ru"), ["run"]);
    assert_eq!(offers("git-orch plan ch"), ["check"]);
    assert_eq!(
        offers("git -C . orch merge --strategy "),
        ["rebase", "merge", "squash"]
    );
    assert_eq!(offers("git orch approve pr"), ["proj"]);
    assert_eq!(offers("git-orch approve pr"), ["proj"]);
    assert_eq!(offers("git orch run proj --redo al"), ["alpha"]);
    assert_eq!(offers("git -C . orch skip be"), ["beta"]);
}

#[test]
fn a_mistyped_command_or_option_gets_the_nearest_one() {
    let sb = Sandbox::new();
    let dir = sb.path();
    for (args, hint) in [
        (&["rn"][..], "hint: did you mean `git orch run`?"),
        (&["show"][..], "hint: did you mean `git orch plan show`?"),
        (&["ls"][..], "hint: did you mean `git orch status --all`?"),
        (
            &["run", "--cpa", "2", "p"][..],
            "hint: did you mean `--cap` (see `git orch run -h`)?",
        ),
    ] {
        let out = sb.orch(dir, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(hint), "{args:?}: {}", stderr(&out));
    }
    // Nothing near: no guess.
    let out = sb.orch(dir, &["zzzzzzzz"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!stderr(&out).contains("did you mean"), "{}", stderr(&out));
}
