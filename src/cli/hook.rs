//! `git orch hook <name>`: what the hook shims in hook folders call.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::{Cli, CommandError, CommandResult, exit, output};
use crate::process::Git;

/// Run a git-orch hook (called by the scripts git-orch installs).
#[derive(Debug, Args)]
pub struct HookArgs {
    #[command(subcommand)]
    pub hook: HookCommand,
}

#[derive(Debug, Subcommand)]
pub enum HookCommand {
    /// Refuse a commit whose staged paths leave the owned globs.
    PreCommit {
        /// File with one owned glob per line.
        #[arg(long, value_name = "FILE")]
        owned_globs: PathBuf,
    },
}

pub fn run(cli: &Cli, args: &HookArgs) -> CommandResult {
    match &args.hook {
        HookCommand::PreCommit { owned_globs } => pre_commit(cli, owned_globs),
    }
}

fn pre_commit(cli: &Cli, globs_file: &PathBuf) -> CommandResult {
    let text = std::fs::read_to_string(globs_file).map_err(|e| {
        CommandError::error(format!(
            "cannot read the owned globs {}: {e}",
            globs_file.display()
        ))
    })?;
    let globs: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect();
    let matchers: Vec<_> = globs
        .iter()
        .filter(|g| crate::plan::glob::compile(g).is_ok())
        .map(|g| crate::plan::glob::matcher(g))
        .collect();
    let dir = super::start_dir(&cli.directory);
    // Every side of every staged change: additions, modifications,
    // deletions and both names of a rename.
    let staged = Git::new(&dir).run(["diff", "--cached", "--name-only", "--no-renames", "-z"])?;
    let outside: Vec<&str> = staged
        .split('\0')
        .filter(|p| !p.is_empty())
        .filter(|p| !matchers.iter().any(|m| m.is_match(p)))
        .collect();
    if outside.is_empty() {
        return Ok(exit::OK);
    }
    output::status(&format!(
        "git-orch: this commit changes files outside the ones this attempt owns ({}):",
        globs.join(", ")
    ));
    for p in &outside {
        output::status(&format!("  {p}"));
    }
    output::status(
        "Unstage them (git restore --staged <path>) and leave them to the subtask that owns them.",
    );
    Ok(exit::ERROR)
}
