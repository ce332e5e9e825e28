//! `git orch hooks install | uninstall`: put git-orch's git hooks in place,
//! or take them away again.

use clap::{Args, Subcommand};

use super::error::CommandError;
use super::exit;
use super::globals::{CommandResult, GlobalArgs, open_store, start_dir};
use super::output;
use crate::hooks::install::{self, Hook, Uninstalled};

/// Install or remove the git hooks that make git enforce git-orch's rules.
///
/// The hooks go in the folder git uses (core.hooksPath is honoured). A hook
/// already there is kept as <name>.orch-chained and runs first; uninstall
/// puts it back byte for byte. See docs/hooks.md.
#[derive(Debug, Args)]
pub struct HooksArgs {
    #[command(subcommand)]
    pub action: HooksAction,
}

#[derive(Debug, Subcommand)]
pub enum HooksAction {
    /// Install the hooks (installing again is harmless).
    ///
    /// Without options, in a clone: a pre-push hook that refuses pushing a
    /// protected branch (orch.protect; default orch.target, else main and
    /// master) to commits `git orch verify` rejects. With --server, in a
    /// bare repository: a pre-receive hook that refuses deleting or
    /// rewriting refs/orch/*, malformed state, and protected-branch updates
    /// that do not verify against the log pushed with them.
    Install {
        /// Install the server's pre-receive hook (in a bare repository).
        #[arg(long, conflicts_with = "worktree")]
        server: bool,
        /// Also install a pre-commit hook that keeps commits made by hand
        /// in attempt worktrees inside the attempt's owned globs (agents
        /// get this check without it).
        #[arg(long)]
        worktree: bool,
    },
    /// Remove git-orch's hooks and put back the hooks they chained.
    Uninstall {
        /// Remove the server's pre-receive hook.
        #[arg(long)]
        server: bool,
    },
}

pub fn run(cli: &GlobalArgs, args: &HooksArgs) -> CommandResult {
    // Opening the store first gives the clear "not a git repository" error
    // before anything is written.
    let store = open_store(&cli.directory)?;
    let server = match &args.action {
        HooksAction::Install { server, .. } | HooksAction::Uninstall { server } => *server,
    };
    if server && !store.is_bare() {
        return Err(CommandError::with_code(
            exit::USAGE,
            "--server hooks go in the server's bare repository, and this one has a working tree\nhint: run `git orch hooks install --server` in the bare repository your clones push to; in a clone, run it without --server",
        ));
    }
    if !server && store.is_bare() {
        return Err(CommandError::with_code(
            exit::USAGE,
            "this is a bare repository, where the client's pre-push hook never runs\nhint: use `git orch hooks install --server` for the server's pre-receive hook",
        ));
    }
    let dir = install::hooks_dir(&start_dir(&cli.directory)).map_err(hook_error)?;
    match &args.action {
        HooksAction::Install { worktree, .. } => {
            let exe = std::env::current_exe().map_err(|e| {
                CommandError::error(format!("cannot find the path of this git-orch binary: {e}"))
            })?;
            let mut hooks = vec![if server {
                Hook::PreReceive
            } else {
                Hook::PrePush
            }];
            if *worktree {
                hooks.push(Hook::PreCommit);
            }
            for hook in hooks {
                let done = install::install(&dir, hook, &exe).map_err(hook_error)?;
                let chained = done
                    .chained
                    .as_ref()
                    .map(|c| format!("; the hook that was there runs first, from {}", c.display()))
                    .unwrap_or_default();
                output::status(&format!(
                    "{} {} hook at {}{chained}.",
                    if done.changed {
                        "Installed the"
                    } else {
                        "Already installed: the"
                    },
                    hook.name(),
                    done.path.display()
                ));
            }
        }
        HooksAction::Uninstall { .. } => {
            let hooks: &[Hook] = if server {
                &[Hook::PreReceive]
            } else {
                &[Hook::PrePush, Hook::PreCommit]
            };
            for &hook in hooks {
                match install::uninstall(&dir, hook).map_err(hook_error)? {
                    Uninstalled::Restored { path } => output::status(&format!(
                        "Removed the {} hook; the earlier hook is back at {}.",
                        hook.name(),
                        path.display()
                    )),
                    Uninstalled::Removed { path } => output::status(&format!(
                        "Removed the {} hook at {}.",
                        hook.name(),
                        path.display()
                    )),
                    Uninstalled::Absent { path } => {
                        if hook != Hook::PreCommit {
                            output::status(&format!(
                                "No git-orch {} hook at {}; nothing to do.",
                                hook.name(),
                                path.display()
                            ));
                        }
                    }
                }
            }
        }
    }
    Ok(exit::OK)
}

/// A hook failure as a command error.
pub fn hook_error(e: crate::hooks::HookError) -> CommandError {
    e.into()
}
