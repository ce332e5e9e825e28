//! The command line: the only code that prints.
//!
//! One file per command, each holding its clap args (whose doc comment is the
//! help text) and one `run` function that calls the domain and renders the
//! result. Errors become a [`CommandError`] carrying the exit code of
//! docs/cli.md (exit codes); `main` prints it as `error:` plus `hint:` lines.

pub mod agents;
pub mod approve;
pub mod cleanup;
pub mod completions;
pub mod debug;
pub mod demo;
pub mod error;
pub mod fsck;
pub mod gate;
pub mod hook;
pub mod hooks;
pub mod init;
pub mod install_man;
pub mod land;
pub mod log;
pub mod manual;
pub mod merge;
pub mod output;
pub mod pager;
pub mod plan;
pub mod progress;
pub mod run;
pub mod status;
pub mod suggest;
pub mod supervise;
pub mod sync;
pub mod task;
pub mod verify;
pub mod warm_mount;
pub mod web;
pub mod worker;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

pub use error::CommandError;

use crate::store::Store;

/// Exit codes shared by every command.
pub mod exit {
    pub const OK: u8 = 0;
    pub const ERROR: u8 = 1;
    pub const USAGE: u8 = 2;
    pub const BLOCKED: u8 = 3;
    pub const BUDGET: u8 = 64;
    pub const BREAKER: u8 = 65;
    /// git-orch cannot do its own work here (the disk is full, or the
    /// same internal failure repeats): sysexits' `EX_IOERR`.
    pub const BROKEN: u8 = 74;
    /// An agent or the sandbox cannot work as configured (an unknown
    /// agent, its program missing or hidden, no key or a refused one, a
    /// bad bind): sysexits' `EX_CONFIG`. No retry can fix it.
    pub const CONFIG: u8 = 78;
    pub const INTERRUPTED: u8 = 130;
}

/// Result of a command: an exit code on success (0, or 3 for "ran, found
/// blocking findings"), a [`CommandError`] otherwise.
pub type CommandResult = Result<u8, CommandError>;

/// Run coding agents in parallel, the git way.
///
/// Plans of subtasks with sole file ownership, content-hashed approvals,
/// one worktree per attempt, gates on every result, and a serial merge queue.
/// All state lives in git under refs/orch/*.
#[derive(Debug, Parser)]
#[command(
    name = "git-orch",
    bin_name = "git orch",
    version,
    max_term_width = 100
)]
pub struct Cli {
    /// Run as if started in this directory.
    #[arg(short = 'C', global = true, value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    pub directory: Option<PathBuf>,
    /// Do not pipe long output (`log`, `plan show`, `plan diff`) into a
    /// pager, even on a terminal.
    #[arg(long, global = true)]
    pub no_pager: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    Init(init::InitArgs),
    Plan(plan::PlanArgs),
    Approve(approve::ApproveArgs),
    Run(run::RunArgs),
    Status(status::StatusArgs),
    Gate(gate::GateArgs),
    Merge(merge::MergeArgs),
    Land(land::LandArgs),
    Verify(verify::VerifyArgs),
    #[command(about = "Run a task again with a fresh retry budget")]
    Retry(task::TaskArgs),
    #[command(about = "Skip a task: do not run it; its dependents may proceed")]
    Skip(task::TaskArgs),
    #[command(about = "Cancel a task: stop its live attempt and do not run it again")]
    Cancel(task::TaskArgs),
    Cleanup(cleanup::CleanupArgs),
    Fsck(fsck::FsckArgs),
    Hook(hook::HookArgs),
    Hooks(hooks::HooksArgs),
    Log(log::LogArgs),
    Web(web::WebArgs),
    Sync(sync::SyncArgs),
    Worker(worker::WorkerArgs),
    Agents(agents::AgentsArgs),
    Demo(demo::DemoArgs),
    Completions(completions::CompletionsArgs),
    InstallMan(install_man::InstallManArgs),
    #[command(hide = true)]
    Debug(debug::DebugArgs),
    #[command(hide = true)]
    DemoAgent(demo::DemoAgentArgs),
    #[command(hide = true)]
    Supervise(supervise::SuperviseArgs),
    #[command(hide = true)]
    WarmMount(warm_mount::WarmMountArgs),
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

impl Cli {
    /// Whether this command's output goes through the pager on a terminal.
    fn pages(&self) -> bool {
        if self.no_pager {
            return false;
        }
        match &self.command {
            Command::Log(args) => !args.follow,
            Command::Plan(p) => matches!(
                p.command,
                plan::PlanCommand::Show(_) | plan::PlanCommand::Diff(_)
            ),
            _ => false,
        }
    }
}

/// Parses arguments, runs the command and returns the process exit code.
pub fn main() -> u8 {
    // A shell asking for completions gets them and nothing runs.
    completions::complete_if_asked();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                exit::USAGE
            } else {
                exit::OK
            };
            let _ = e.print();
            if let Some(hint) = suggest::for_usage_error(&e, &std::env::args().collect::<Vec<_>>())
            {
                eprintln!("hint: {hint}");
            }
            return code;
        }
    };
    if let Command::Supervise(args) = &cli.command {
        supervise::run(args);
    }
    // Single-threaded still, as a user namespace needs.
    if let Command::WarmMount(args) = &cli.command {
        warm_mount::run(args);
    }
    // Agents, gates and setup commands run under this binary's supervisor,
    // so none outlives this process.
    if let Ok(exe) = std::env::current_exe() {
        crate::process::use_supervisor(exe);
    }
    let pager = if cli.pages() {
        pager::start(&start_dir(&cli.directory))
    } else {
        None
    };
    let mut code = match dispatch(&cli) {
        Ok(code) => code,
        Err(e) => {
            output::print_error(&e.render());
            e.code
        }
    };
    // A prune beside this command may still be taking objects it wrote:
    // they are checked (and written again) until that cannot happen.
    if let Err(e) = crate::store::durable::settle_all() {
        output::print_error(&CommandError::from(e).render());
        if code == exit::OK {
            code = exit::ERROR;
        }
    }
    // Output cut short by anything but a reader that went away (a full
    // disk) is a failure, whatever the command thought.
    if let Some(e) = output::take_write_error() {
        output::print_error(&format!(
            "could not write the output: {e}\nhint: what was printed is incomplete"
        ));
        if code == exit::OK {
            code = exit::ERROR;
        }
    }
    if let Some(p) = pager {
        p.wait();
    }
    code
}

fn dispatch(cli: &Cli) -> CommandResult {
    match &cli.command {
        Command::Init(args) => init::run(cli, args),
        Command::Plan(args) => plan::run(cli, args),
        Command::Approve(args) => approve::run(cli, args),
        Command::Run(args) => run::run(cli, args),
        Command::Status(args) => status::run(cli, args),
        Command::Gate(args) => gate::run(cli, args),
        Command::Merge(args) => merge::run(cli, args),
        Command::Land(args) => land::run(cli, args),
        Command::Verify(args) => verify::run(cli, args),
        Command::Retry(args) => task::run(cli, args, crate::event::Control::Retry),
        Command::Skip(args) => task::run(cli, args, crate::event::Control::Skip),
        Command::Cancel(args) => task::run(cli, args, crate::event::Control::Cancel),
        Command::Cleanup(args) => cleanup::run(cli, args),
        Command::Fsck(args) => fsck::run(cli, args),
        Command::Hook(args) => hook::run(cli, args),
        Command::Hooks(args) => hooks::run(cli, args),
        Command::Log(args) => log::run(cli, args),
        Command::Web(args) => web::run(cli, args),
        Command::Sync(args) => sync::run(cli, args),
        Command::Worker(args) => worker::run(cli, args),
        Command::Agents(args) => agents::run(cli, args),
        Command::Completions(args) => completions::run(cli, args),
        Command::InstallMan(args) => install_man::run(cli, args),
        Command::Debug(args) => debug::run(cli, args),
        Command::Demo(args) => demo::run(cli, args),
        Command::DemoAgent(args) => demo::agent(cli, args),
        Command::Supervise(args) => supervise::run(args),
        Command::WarmMount(args) => warm_mount::run(args),
    }
}
