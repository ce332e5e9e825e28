//! `git orch cleanup`: remove attempt worktrees that are no longer needed.

use clap::Args;

use super::{Cli, CommandError, CommandResult, exit, open_store, output};
use crate::ids::{RunId, TaskId};
use crate::run;
use crate::run::control::{CleanupAction, CleanupFilter};

/// Remove attempt worktrees no longer needed.
///
/// Refuses dirty worktrees, live attempts and results under review unless
/// --force. Never deletes a branch or a result commit. Reports folders no
/// record points to and records whose folder is gone, then runs
/// `git worktree prune`.
#[derive(Debug, Args)]
pub struct CleanupArgs {
    /// Only attempts of this run.
    #[arg(long, value_name = "RUN", add = super::completions::runs())]
    pub run: Option<String>,
    /// Only attempts of this task (of any run, or of --run).
    #[arg(long, value_name = "TASK", add = super::completions::tasks())]
    pub task: Option<String>,
    /// Only the attempt with this number (of --task).
    #[arg(long, value_name = "N", requires = "task")]
    pub attempt: Option<u32>,
    /// Only attempts whose task is done, skipped or cancelled.
    #[arg(long)]
    pub all_completed: bool,
    /// Remove dirty, live and under-review worktrees too.
    #[arg(long)]
    pub force: bool,
    /// Say what would be removed; remove nothing.
    #[arg(long)]
    pub dry_run: bool,
}

pub fn run(cli: &Cli, args: &CleanupArgs) -> CommandResult {
    let store = open_store(&cli.directory)?;
    let filter = CleanupFilter {
        run: args
            .run
            .as_deref()
            .map(RunId::new)
            .transpose()
            .map_err(|e| CommandError::error(e.to_string()))?,
        task: args
            .task
            .as_deref()
            .map(TaskId::new)
            .transpose()
            .map_err(|e| CommandError::error(e.to_string()))?,
        attempt: args.attempt,
        all_completed: args.all_completed,
        landed_only: false,
        force: args.force,
        dry_run: args.dry_run,
    };
    // Cleanup looks at every run this clone took part in.
    let runs = crate::state::StateIndex::open(&store)?.all_runs()?;
    let live = |r: &RunId| run::control::driver_alive(&store, r).unwrap_or(true);
    let report = run::control::cleanup(&store, &runs, &filter, &live)
        .map_err(|e| CommandError::error(e.to_string()))?;
    let mut out = output::Out::new();
    let mut kept = 0;
    for (run, task, n, path, action) in &report.worktrees {
        let what = match action {
            CleanupAction::Removed => "removed".to_owned(),
            CleanupAction::WouldRemove => "would remove".to_owned(),
            CleanupAction::Kept(why) => {
                kept += 1;
                format!("kept: {why}")
            }
        };
        out.line(&format!(
            "{run}/{task}/attempt-{n}  {}  {what}",
            path.display()
        ));
    }
    for p in &report.orphan_folders {
        out.line(&format!(
            "orphan folder (no attempt record): {}",
            p.display()
        ));
    }
    for (run, task, n, p) in &report.missing_folders {
        out.line(&format!(
            "{run}/{task}/attempt-{n}: its folder {} is gone (recorded, not cleaned by git-orch)",
            p.display()
        ));
    }
    if report.worktrees.is_empty() {
        output::status("Nothing to clean up.");
    }
    // Refusing an attempt the user named is a refusal; keeping some while
    // sweeping many is the normal case.
    let targeted = args.task.is_some() || args.attempt.is_some();
    Ok(if kept > 0 && targeted {
        exit::BLOCKED
    } else {
        exit::OK
    })
}
