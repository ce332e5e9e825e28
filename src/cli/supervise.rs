//! `git-orch supervise` (hidden): the per-command supervisor that ends an
//! agent and all its descendants when the git-orch process that started it
//! dies. Started by `process::GroupChild`, never by people; the work is in
//! `process::supervise`.

use std::ffi::OsString;

use clap::Args;

/// Run a command so that it and all its descendants end when the parent
/// process dies (internal).
#[derive(Debug, Args)]
pub struct SuperviseArgs {
    /// The process whose death ends the command.
    #[arg(long)]
    pub parent: u32,
    /// Milliseconds between SIGTERM and SIGKILL for what the command leaves.
    #[arg(long, default_value_t = 3000)]
    pub grace_ms: u64,
    /// The command and its arguments, after `--`.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<OsString>,
}

pub fn run(args: &SuperviseArgs) -> ! {
    let mut command = args.command.clone();
    let program = command.remove(0);
    crate::process::supervise(crate::process::Supervision {
        parent: args.parent,
        grace: std::time::Duration::from_millis(args.grace_ms),
        program,
        args: command,
    })
}
