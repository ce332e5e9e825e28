//! Help and completion where people look for them: man pages found by
//! `man` and by `git orch --help` (which git turns into `man git-orch`),
//! clap's `git orch help <cmd>` without any man page, and completion
//! scripts for bash (through git's own completion), zsh and fish.
//!
//! Tests that need `man`, git's completion script, `zsh` or `fish` say so
//! and pass when the program is missing (Debian/Ubuntu: `man-db`, `git`,
//! `zsh`, `fish`).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{Sandbox, bin_dir, stderr, stdout};

fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn skip(why: &str) {
    eprintln!("skipped: {why}");
}

#[test]
fn install_man_writes_pages_that_man_finds_through_manpath() {
    if !have("man") {
        return skip("`man` is not installed (Debian/Ubuntu: apt-get install man-db)");
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
    if !have("man") {
        return skip("`man` is not installed (Debian/Ubuntu: apt-get install man-db)");
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
    for cmd in ["run", "merge", "install-man", "completions"] {
        assert!(text.contains(cmd), "{shell} script does not name {cmd}");
    }
    assert!(
        !text.contains("cli-reference"),
        "{shell} offers hidden commands"
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

/// What bash offers for `line` (completing its last word) through git's
/// completion with ours loaded.
fn bash_offers(sb: &Sandbox, git_completion: &Path, ours: &Path, line: &str) -> Vec<String> {
    let script = format!(
        r#"source {git}
source {ours}
COMP_LINE={line:?}
COMP_POINT=${{#COMP_LINE}}
read -ra COMP_WORDS <<< "$COMP_LINE"
case "$COMP_LINE" in *" ") COMP_WORDS+=("") ;; esac
COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))
__git_wrap__git_main
printf '%s\n' "${{COMPREPLY[@]}}"
"#,
        git = git_completion.display(),
        ours = ours.display(),
    );
    let out = sb
        .command("bash", sb.path())
        .args(["--norc", "--noprofile", "-c", &script])
        .output()
        .expect("bash runs");
    assert!(out.status.success(), "bash: {}", stderr(&out));
    assert!(stderr(&out).is_empty(), "bash said: {}", stderr(&out));
    stdout(&out).lines().map(str::to_owned).collect()
}

#[test]
fn bash_completes_git_orch_through_gits_own_completion() {
    let sb = Sandbox::new();
    let script = completion(&sb, "bash");
    assert!(
        script.contains("_git_orch ()"),
        "no bridge for git's completion"
    );
    syntax_ok(&sb, "bash", &script);
    let Some(git_completion) = git_completion_script() else {
        return skip("git's bash completion script is not installed");
    };
    let ours = sb.path().join("completion.bash");
    let offers = |line: &str| bash_offers(&sb, &git_completion, &ours, line);
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
    assert!(!all.iter().any(|o| o.starts_with("debug")), "{all:?}");
}

#[test]
fn zsh_completion_parses() {
    let sb = Sandbox::new();
    let script = completion(&sb, "zsh");
    assert!(script.starts_with("#compdef git-orch"), "{script}");
    if !have("zsh") {
        return skip("zsh is not installed");
    }
    syntax_ok(&sb, "zsh", &script);
}

#[test]
fn fish_completion_parses() {
    let sb = Sandbox::new();
    let script = completion(&sb, "fish");
    assert!(script.contains("complete -c git-orch"), "{script}");
    if !have("fish") {
        return skip("fish is not installed");
    }
    syntax_ok(&sb, "fish", &script);
    let file = sb.path().join("completion.fish");
    let offers = |line: &str| {
        let out = sb
            .command("fish", sb.path())
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
        ["merge", "rebase", "squash"]
    );
}
