//! Documents generated from the clap definitions: the man pages
//! (`git-orch(1)`, `git-orch-run(1)`, `git-orch-plan-check(1)`, …) and the
//! Markdown command reference `docs/cli.md`.
//!
//! It owns only the rendering: it returns text and never touches files or
//! prints, so `install-man`, `debug cli-reference` and the staleness test
//! in tests/it/docs_generated.rs all share one source. The help texts
//! themselves live on each command's args struct.

use clap::builder::StyledStr;
use clap::{Arg, ArgAction, Command};
use clap_mangen::Man;
use clap_mangen::roff::{Roff, bold, roman};

use super::exit;

/// The exit codes, for the man page and the reference.
pub const EXIT_CODES: [(u8, &str); 9] = [
    (exit::OK, "success"),
    (exit::ERROR, "an error, or invalid input"),
    (
        exit::USAGE,
        "a usage error: unknown command, bad or missing arguments",
    ),
    (
        exit::BLOCKED,
        "blocked: blocking plan findings, a failed gate, a conflict or a refused landing",
    ),
    (exit::BUDGET, "the budget is spent"),
    (exit::BREAKER, "the circuit breaker tripped"),
    (
        exit::BROKEN,
        "git-orch cannot do its own work here: the disk is full, or the same failure inside git-orch repeats; fix it and run the same command again to resume",
    ),
    (
        exit::CONFIG,
        "an agent or the sandbox cannot work as configured: an unknown agent, its program missing or hidden by the sandbox, no API key or a refused one, a bad [sandbox] bind, `sandbox = bwrap` where bubblewrap cannot work; nothing is retried; fix what the message names and run the same command again",
    ),
    (
        exit::INTERRUPTED,
        "interrupted by Ctrl-C or SIGTERM; run the same command again to resume",
    ),
];

/// Environment variables git-orch reads for its own output.
pub const ENVIRONMENT: [(&str, &str); 2] = [
    (
        "NO_COLOR",
        "When set to a non-empty value, no colour is used, even on a terminal.",
    ),
    (
        "GIT_ORCH_PROGRESS",
        "How `run` and `merge` show progress on stderr: `tty` (one line per task, \
         redrawn in place), `plain` (one line per event) or `auto` (the default: \
         `tty` when stderr is a terminal).",
    ),
];

/// One man page: its file name (`git-orch-run.1`) and roff text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManPage {
    pub file_name: String,
    pub text: String,
}

/// The whole command tree, built (so subcommands know their full names:
/// display name `git-orch-plan-check`, bin name `git orch plan check`),
/// without clap's `help` subcommand, which has no page of its own.
pub fn command(tree: Command) -> Command {
    let mut cmd = tree.disable_help_subcommand(true);
    cmd.build();
    cmd
}

/// Every documented command, depth first, parents before children.
fn documented(cmd: &Command) -> Vec<&Command> {
    let mut out = vec![cmd];
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        out.extend(documented(sub));
    }
    out
}

fn display_name(cmd: &Command) -> &str {
    cmd.get_display_name().unwrap_or_else(|| cmd.get_name())
}

fn bin_name(cmd: &Command) -> &str {
    cmd.get_bin_name().unwrap_or_else(|| cmd.get_name())
}

/// The name of the page a command's parent has (`git-orch-plan` for
/// `git-orch-plan-check`), if it has a parent.
fn parent_page(root: &Command, cmd: &Command) -> Option<String> {
    let name = display_name(cmd);
    documented(root)
        .into_iter()
        .filter(|c| c.get_subcommands().any(|s| display_name(s) == name))
        .map(|c| display_name(c).to_owned())
        .next()
}

/// Every man page, the top-level `git-orch.1` first.
pub fn man_pages(tree: Command) -> Vec<ManPage> {
    let root = command(tree);
    let version = root.get_version().unwrap_or_default().to_owned();
    documented(&root)
        .into_iter()
        .map(|cmd| {
            let is_root = std::ptr::eq(cmd, &root);
            let man = Man::new(cmd.clone())
                .source(format!("git-orch {version}"))
                .manual("git-orch Manual");
            let mut buf: Vec<u8> = Vec::new();
            let io = "rendering into memory does not fail";
            man.render_title(&mut buf).expect(io);
            man.render_name_section(&mut buf).expect(io);
            man.render_synopsis_section(&mut buf).expect(io);
            man.render_description_section(&mut buf).expect(io);
            if cmd.get_arguments().any(|a| !a.is_hide_set()) {
                man.render_options_section(&mut buf).expect(io);
            }
            if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
                man.render_subcommands_section(&mut buf).expect(io);
            }
            let mut extra = Roff::default();
            if is_root {
                extra.control("SH", ["EXIT STATUS"]);
                for (code, what) in EXIT_CODES {
                    extra.control("TP", []);
                    extra.text([bold(code.to_string())]);
                    extra.text([roman(what)]);
                }
                extra.control("SH", ["ENVIRONMENT"]);
                for (name, what) in ENVIRONMENT {
                    extra.control("TP", []);
                    extra.text([bold(name)]);
                    extra.text([roman(what)]);
                }
            }
            extra.control("SH", ["SEE ALSO"]);
            let mut see = Vec::new();
            if let Some(parent) = parent_page(&root, cmd) {
                see.push(format!("{parent}(1)"));
                if parent != display_name(&root) {
                    see.push(format!("{}(1)", display_name(&root)));
                }
            }
            see.push("git(1)".to_owned());
            extra.text([roman(see.join(", "))]);
            extra.to_writer(&mut buf).expect(io);
            if is_root {
                man.render_version_section(&mut buf).expect(io);
            }
            ManPage {
                file_name: man.get_filename(),
                text: String::from_utf8(buf).expect("roff output is UTF-8"),
            }
        })
        .collect()
}

/// Escapes Markdown outside `code spans`, so help text such as
/// `refs/orch/plans/<id>` or `src/x/**` shows as written.
fn markdown_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for (i, part) in s.split('`').enumerate() {
        if i > 0 {
            out.push('`');
        }
        if i % 2 == 1 {
            out.push_str(part);
            continue;
        }
        for c in part.chars() {
            if matches!(c, '\\' | '*' | '_' | '<' | '>' | '[' | ']') {
                out.push('\\');
            }
            out.push(c);
        }
    }
    out
}

fn plain(s: Option<&StyledStr>) -> String {
    s.map(|s| s.to_string().trim_end().to_owned())
        .unwrap_or_default()
}

/// `text` ending in a full stop (clap drops the one of a one-line help).
fn sentence(text: String) -> String {
    if text.is_empty() || text.ends_with(['.', '!', '?', ':']) {
        text
    } else {
        text + "."
    }
}

/// `--cap <N>`, `-C <DIR>`, `<PLAN>`, `[RUN]`, `<COMMIT>...`.
fn arg_syntax(arg: &Arg) -> String {
    let value = arg
        .get_value_names()
        .map(|v| v.join(" "))
        .unwrap_or_else(|| arg.get_id().as_str().to_uppercase());
    let many = matches!(arg.get_action(), ArgAction::Append)
        || arg.get_num_args().is_some_and(|n| n.max_values() > 1);
    let dots = if many { "..." } else { "" };
    if arg.is_positional() {
        return if arg.is_required_set() {
            format!("<{value}>{dots}")
        } else {
            format!("[{value}]{dots}")
        };
    }
    let mut names = Vec::new();
    if let Some(s) = arg.get_short() {
        names.push(format!("-{s}"));
    }
    if let Some(l) = arg.get_long() {
        names.push(format!("--{l}"));
    }
    let mut out = names.join(", ");
    if arg.get_action().takes_values() {
        out.push_str(&format!(" <{value}>{dots}"));
    }
    out
}

/// One bullet for an argument: syntax, help, default, possible values.
fn arg_entry(arg: &Arg) -> String {
    let mut text = sentence(markdown_text(&plain(
        arg.get_long_help().or(arg.get_help()),
    )));
    let takes = arg.get_action().takes_values();
    let defaults: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    if takes && !defaults.is_empty() && !arg.is_hide_default_value_set() {
        text.push_str(&format!(" Default: `{}`.", defaults.join(" ")));
    }
    let possible: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|p| !p.is_hide_set())
        .map(|p| format!("`{}`", p.get_name()))
        .collect();
    if takes && !possible.is_empty() && !arg.is_hide_possible_values_set() {
        text.push_str(&format!(" Possible values: {}.", possible.join(", ")));
    }
    if let Some(env) = arg.get_env() {
        text.push_str(&format!(" Environment: `{}`.", env.to_string_lossy()));
    }
    let text = text.trim().replace("\n\n", "\n\n  ").replace('\n', "\n  ");
    format!("- `{}`: {}", arg_syntax(arg), text.trim_end())
}

/// The Markdown anchor GitHub gives a heading `git orch plan check`.
fn anchor(heading: &str) -> String {
    heading.replace(' ', "-")
}

/// docs/cli.md: every command and subcommand with its description, usage,
/// arguments and options.
pub fn cli_reference(tree: Command) -> String {
    let root = command(tree);
    let commands = documented(&root);
    let mut md = String::new();
    md.push_str("# Command reference\n\n");
    md.push_str(
        "<!-- Generated from the clap definitions in src/cli/ by\n     \
         `GIT_ORCH_BLESS=1 cargo test --test it docs_generated`; do not edit by hand. -->\n\n",
    );
    md.push_str(
        "Every command prints a summary with `-h` and its full text with \
         `git orch help <command>`. `git orch <command> --help` opens the \
         command's man page once the pages are installed (`git orch \
         install-man`). `-C <DIR>` works with every command: run as if \
         started in DIR.\n\n",
    );
    for cmd in &commands[1..] {
        let depth = bin_name(cmd).split(' ').count() - 3;
        md.push_str(&format!(
            "{}- [{}](#{}): {}\n",
            "  ".repeat(depth),
            bin_name(cmd),
            anchor(bin_name(cmd)),
            markdown_text(&plain(cmd.get_about()))
        ));
    }
    md.push_str("\n## Exit codes\n\n");
    for (code, what) in EXIT_CODES {
        md.push_str(&format!("- `{code}`: {what}\n"));
    }
    md.push_str("\n## Environment\n\n");
    for (name, what) in ENVIRONMENT {
        md.push_str(&format!("- `{name}`: {what}\n"));
    }
    for cmd in commands {
        let mut cmd_mut = cmd.clone();
        let usage = cmd_mut.render_usage().to_string();
        let nested = bin_name(cmd).split(' ').count() > 3;
        md.push_str(&format!(
            "\n{} {}\n\n",
            if nested { "###" } else { "##" },
            bin_name(cmd)
        ));
        let about = sentence(plain(cmd.get_long_about().or(cmd.get_about())));
        if !about.is_empty() {
            md.push_str(&markdown_text(&about));
            md.push_str("\n\n");
        }
        md.push_str(&format!("```text\n{usage}\n```\n"));
        let is_root = std::ptr::eq(cmd, &root);
        let shown: Vec<&Arg> = cmd
            .get_arguments()
            .filter(|a| !a.is_hide_set())
            .filter(|a| !matches!(a.get_id().as_str(), "help" | "version"))
            .filter(|a| is_root || !a.is_global_set())
            .collect();
        let positionals: Vec<&&Arg> = shown.iter().filter(|a| a.is_positional()).collect();
        let options: Vec<&&Arg> = shown.iter().filter(|a| !a.is_positional()).collect();
        if !positionals.is_empty() {
            md.push_str("\nArguments:\n\n");
            for a in positionals {
                md.push_str(&arg_entry(a));
                md.push('\n');
            }
        }
        if !options.is_empty() {
            md.push_str("\nOptions:\n\n");
            for a in options {
                md.push_str(&arg_entry(a));
                md.push('\n');
            }
        }
        let subs: Vec<&Command> = cmd.get_subcommands().filter(|s| !s.is_hide_set()).collect();
        if !subs.is_empty() && !is_root {
            md.push_str("\nCommands:\n\n");
            for s in subs {
                md.push_str(&format!(
                    "- [{}](#{}): {}\n",
                    s.get_name(),
                    anchor(bin_name(s)),
                    markdown_text(&plain(s.get_about()))
                ));
            }
        }
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_visible_command_has_a_page_named_after_its_path() {
        let pages = man_pages(<crate::cli::Cli as clap::CommandFactory>::command());
        let names: Vec<&str> = pages.iter().map(|p| p.file_name.as_str()).collect();
        assert_eq!(names[0], "git-orch.1");
        for want in [
            "git-orch-run.1",
            "git-orch-plan-check.1",
            "git-orch-install-man.1",
        ] {
            assert!(names.contains(&want), "{want} missing from {names:?}");
        }
        assert!(
            !names
                .iter()
                .any(|n| n.contains("debug") || n.contains("help"))
        );
        let check = pages
            .iter()
            .find(|p| p.file_name == "git-orch-plan-check.1")
            .expect("plan check page");
        assert!(
            check.text.contains("git\\-orch\\-plan(1)"),
            "{}",
            check.text
        );
    }

    #[test]
    fn markdown_escapes_outside_code_only() {
        assert_eq!(
            markdown_text("refs/orch/plans/<id> and `a <b> *c*`"),
            "refs/orch/plans/\\<id\\> and `a <b> *c*`"
        );
    }
}
