//! What every command shares: the global options (`-C`, `--no-pager`),
//! the result type, and opening the repository and the scheduler. In a
//! file of its own so that the commands name it, not `cli/mod.rs`, which
//! holds the command tree and dispatches to them.

use std::path::PathBuf;

use clap::Args;

use super::error::CommandError;
use crate::store::Store;

/// Result of a command: an exit code on success (0, or 3 for "ran, found
/// blocking findings"), a [`CommandError`] otherwise.
pub type CommandResult = Result<u8, CommandError>;

/// The options every command takes.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Run as if started in this directory.
    #[arg(short = 'C', global = true, value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    pub directory: Option<PathBuf>,
    /// Do not pipe long output (`log`, `plan show`, `plan diff`) into a
    /// pager, even on a terminal.
    #[arg(long, global = true)]
    pub no_pager: bool,
}

/// The directory a command works in, absolute (gix's discovery panics on a
/// relative start such as `-C ../repo.git`).
pub fn start_dir(cli_dir: &Option<PathBuf>) -> PathBuf {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    match cli_dir {
        Some(d) if d.is_relative() => cwd.join(d),
        Some(d) => d.clone(),
        None => cwd,
    }
}

/// The scheduler commands that run agents, gates or landings use: one
/// thread drives; a few do the blocking git work. More blocking threads
/// would not make a 2-core machine faster, only fatter.
pub fn scheduler() -> Result<tokio::runtime::Runtime, CommandError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(4)
        .build()
        .map_err(|e| CommandError::error(format!("cannot start the scheduler: {e}")))
}

/// Opens the repository for a command.
pub fn open_store(cli_dir: &Option<PathBuf>) -> Result<Store, CommandError> {
    Ok(Store::discover(&start_dir(cli_dir))?)
}
