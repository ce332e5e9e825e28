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
pub mod exit;
pub mod fsck;
pub mod gate;
pub mod globals;
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

use clap::{CommandFactory, Parser, Subcommand};

pub use error::CommandError;
pub use globals::{CommandResult, GlobalArgs, open_store, scheduler, start_dir};

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
    #[command(flatten)]
    pub global: GlobalArgs,
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

impl Cli {
    /// Whether this command's output goes through the pager on a terminal.
    fn pages(&self) -> bool {
        if self.global.no_pager {
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
    completions::complete_if_asked(Cli::command);
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                exit::USAGE
            } else {
                exit::OK
            };
            let _ = e.print();
            if let Some(hint) =
                suggest::for_usage_error(&e, &std::env::args().collect::<Vec<_>>(), Cli::command())
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
        pager::start(&start_dir(&cli.global.directory))
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
    let g = &cli.global;
    match &cli.command {
        Command::Init(args) => init::run(g, args),
        Command::Plan(args) => plan::run(g, args),
        Command::Approve(args) => approve::run(g, args),
        Command::Run(args) => run::run(g, args),
        Command::Status(args) => status::run(g, args),
        Command::Gate(args) => gate::run(g, args),
        Command::Merge(args) => merge::run(g, args),
        Command::Land(args) => land::run(g, args),
        Command::Verify(args) => verify::run(g, args),
        Command::Retry(args) => task::run(g, args, crate::event::Control::Retry),
        Command::Skip(args) => task::run(g, args, crate::event::Control::Skip),
        Command::Cancel(args) => task::run(g, args, crate::event::Control::Cancel),
        Command::Cleanup(args) => cleanup::run(g, args),
        Command::Fsck(args) => fsck::run(g, args),
        Command::Hook(args) => hook::run(g, args),
        Command::Hooks(args) => hooks::run(g, args),
        Command::Log(args) => log::run(g, args),
        Command::Web(args) => web::run(g, args),
        Command::Sync(args) => sync::run(g, args),
        Command::Worker(args) => worker::run(g, args),
        Command::Agents(args) => agents::run(g, args),
        Command::Completions(args) => completions::run(g, args),
        Command::InstallMan(args) => install_man::run(g, args, Cli::command()),
        Command::Debug(args) => debug::run(g, args, Cli::command()),
        Command::Demo(args) => demo::run(g, args),
        Command::DemoAgent(args) => demo::agent(g, args),
        Command::Supervise(args) => supervise::run(args),
        Command::WarmMount(args) => warm_mount::run(args),
    }
}
