//! `git orch hook <name>`: what the hook shims in hook folders call.
//!
//! Reads git's hook input, asks `crate::hooks` for a verdict and prints it
//! on stderr (which git shows the pusher, prefixed `remote:` for a server
//! hook). A refusal exits 3, a failure to decide exits 1: git treats both
//! as "no".

use std::io::Read;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};

use super::error::CommandError;
use super::exit;
use super::globals::{CommandResult, GlobalArgs};
use super::hooks::hook_error;
use super::output;
use crate::hooks::{Decision, commit, push, receive};
use crate::store::Store;
use crate::store::view::ObjectDirs;

/// Run a git-orch hook (called by the scripts `git orch hooks install`
/// and attempt worktrees install).
#[derive(Debug, Args)]
pub struct HookArgs {
    #[command(subcommand)]
    pub hook: HookCommand,
}

#[derive(Debug, Subcommand)]
pub enum HookCommand {
    /// Refuse a commit whose staged paths leave the owned globs.
    PreCommit {
        /// File with one owned glob per line (default: the globs of the
        /// attempt whose branch is checked out; none outside attempts).
        #[arg(long, value_name = "FILE")]
        owned_globs: Option<PathBuf>,
    },
    /// Refuse pushing a protected branch to commits that do not verify
    /// (refs on stdin as git gives them).
    PrePush {
        /// The remote's name (or URL, when pushing to a URL).
        remote: String,
        /// The remote's URL.
        url: Option<String>,
    },
    /// Server side: refuse rewritten or malformed refs/orch/* state and
    /// protected-branch updates that do not verify (refs on stdin).
    PreReceive,
}

pub fn run(cli: &GlobalArgs, args: &HookArgs) -> CommandResult {
    match &args.hook {
        HookCommand::PreCommit { owned_globs } => pre_commit(cli, owned_globs.as_deref()),
        HookCommand::PrePush { remote, .. } => pre_push(cli, remote),
        HookCommand::PreReceive => pre_receive(cli),
    }
}

/// Hook input: git's ref lines. More than this is not a push.
const MAX_INPUT: u64 = 64 * 1024 * 1024;

fn read_input(hook: &str) -> Result<String, CommandError> {
    let mut bytes = Vec::new();
    std::io::stdin()
        .take(MAX_INPUT + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| CommandError::error(format!("cannot read the {hook} hook's input: {e}")))?;
    if bytes.len() as u64 > MAX_INPUT {
        return Err(CommandError::error(format!(
            "the {hook} hook's input is over {MAX_INPUT} bytes, which is not git's ref list"
        )));
    }
    String::from_utf8(bytes).map_err(|_| {
        CommandError::error(format!(
            "the {hook} hook's input is not text, so it is not git's ref list\nhint: git runs this hook and writes its input itself"
        ))
    })
}

fn pre_push(cli: &GlobalArgs, remote: &str) -> CommandResult {
    let store = Store::discover(&super::globals::start_dir(&cli.directory))?;
    let input = read_input("pre-push")?;
    let lines = push::parse(&store, &input).map_err(hook_error)?;
    let decision = push::decide(store, remote, &lines).map_err(hook_error)?;
    Ok(report("pre-push", &decision))
}

fn pre_receive(cli: &GlobalArgs) -> CommandResult {
    let mut store = Store::discover(&super::globals::start_dir(&cli.directory))?;
    receive::warm_state(&store);
    // git keeps the pushed objects in a quarantine until this hook agrees;
    // gix does not read git's variables for it, so the store is told.
    let object_dir = std::env::var("GIT_OBJECT_DIRECTORY").ok();
    let alternates = std::env::var("GIT_ALTERNATE_OBJECT_DIRECTORIES").ok();
    if let Some(dirs) = ObjectDirs::from_vars(object_dir.as_deref(), alternates.as_deref()) {
        store = store.with_object_dirs(&dirs)?;
    }
    let input = read_input("pre-receive")?;
    let lines = receive::parse(&store, &input).map_err(hook_error)?;
    let decision = receive::decide(store, &lines).map_err(hook_error)?;
    Ok(report("pre-receive", &decision))
}

/// Prints a refusal (nothing when accepted) and picks the exit code.
fn report(hook: &str, decision: &Decision) -> u8 {
    if decision.accepted() {
        return exit::OK;
    }
    let mut hints: Vec<&str> = Vec::new();
    for r in &decision.refusals {
        output::status(&format!("git-orch {hook}: {}: {}", r.reference, r.reason));
        if !hints.contains(&r.hint.as_str()) {
            hints.push(&r.hint);
        }
    }
    for h in hints {
        output::status(&format!("hint: {h}"));
    }
    output::status(&format!(
        "git-orch {hook}: refused ({} problem{}); nothing was updated",
        decision.refusals.len(),
        if decision.refusals.len() == 1 {
            ""
        } else {
            "s"
        }
    ));
    exit::BLOCKED
}

fn pre_commit(cli: &GlobalArgs, globs_file: Option<&Path>) -> CommandResult {
    let dir = super::globals::start_dir(&cli.directory);
    let globs: Vec<String> = match globs_file {
        Some(file) => {
            let text = std::fs::read_to_string(file).map_err(|e| {
                CommandError::error(format!(
                    "cannot read the owned globs {}: {e}",
                    file.display()
                ))
            })?;
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_owned)
                .collect()
        }
        None => {
            let Some(branch) = commit::current_branch(&dir).map_err(hook_error)? else {
                return Ok(exit::OK);
            };
            let store = Store::discover(&dir)?;
            match commit::attempt_globs(&store, &branch).map_err(hook_error)? {
                Some(globs) => globs,
                None => return Ok(exit::OK),
            }
        }
    };
    let outside = commit::outside_paths(&dir, &globs).map_err(hook_error)?;
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
