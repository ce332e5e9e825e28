//! `git orch cleanup`: remove attempt worktrees and branches that are no
//! longer needed, and scratch worktrees a crash left behind.

use clap::Args;

use super::exit;
use super::globals::{CommandResult, GlobalArgs, open_store};
use super::output;
use crate::ids::{RunId, TaskId};
use crate::run;
use crate::run::control::{CleanupAction, CleanupFilter};

/// Remove attempt worktrees and branches no longer needed.
///
/// Removes the worktree and branch of each finished attempt once every
/// commit on it is reachable from refs/orch/keep or another branch, tag or
/// remote-tracking branch: nothing is lost. A branch or worktree holding a
/// commit nothing else reaches (one added by hand, a result that failed
/// the secrets gate) is kept and reported, even with --force. Keeps dirty
/// worktrees, live attempts and results under review unless --force.
/// Also removes scratch worktrees a crashed landing or gate left under
/// .git/orch/scratch/, warm caches' layers under .git/orch/warm/ whose
/// checkout is gone, records worktrees whose folder is gone, removes
/// empty run folders, reports folders no record points to, and runs
/// `git worktree prune`. Runs do this themselves (see `[orch] cleanup`):
/// for a landed attempt as soon as it lands, for the rest when they end.
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

pub fn run(cli: &GlobalArgs, args: &CleanupArgs) -> CommandResult {
    let store = open_store(&cli.directory)?;
    let filter = CleanupFilter {
        run: args.run.as_deref().map(RunId::new).transpose()?,
        task: args.task.as_deref().map(TaskId::new).transpose()?,
        attempt: args.attempt,
        all_completed: args.all_completed,
        landed_only: false,
        force: args.force,
        dry_run: args.dry_run,
        skip_prune: false,
    };
    // Cleanup looks at every run this clone took part in.
    let runs = crate::state::StateIndex::open(&store)?.all_runs()?;
    let live = |r: &RunId| run::control::driver_alive(&store, r).unwrap_or(true);
    let report = run::control::cleanup(&store, &runs, &filter, &live)?;
    let mut out = output::Out::new();
    let verb = |action: &CleanupAction| match action {
        CleanupAction::Removed => "removed".to_owned(),
        CleanupAction::WouldRemove => "would remove".to_owned(),
        CleanupAction::Kept(why) => format!("kept: {why}"),
    };
    let mut kept = 0;
    for c in &report.attempts {
        if matches!(c.action, CleanupAction::Kept(_)) {
            kept += 1;
        }
        let mut what = Vec::new();
        if let Some(p) = &c.worktree {
            what.push(format!("worktree {}", p.display()));
        }
        if let Some(b) = &c.branch {
            what.push(format!("branch {b}"));
        }
        out.line(&format!(
            "{}/{}/attempt-{}  {}  {}",
            c.run,
            c.task,
            c.attempt,
            what.join(", "),
            verb(&c.action)
        ));
    }
    for (p, action) in &report.scratch {
        out.line(&format!(
            "scratch worktree {}  {}",
            p.display(),
            verb(action)
        ));
    }
    // What happened to a folder removed whole.
    let removal = if args.dry_run {
        "would remove"
    } else {
        "removed"
    };
    for p in &report.warm_layers {
        out.line(&format!(
            "warm cache layers {} (their checkout is gone)  {removal}",
            p.display(),
        ));
    }
    for (run, task, n, p) in &report.missing_folders {
        out.line(&format!(
            "{run}/{task}/attempt-{n}: its folder {} was already gone ({})",
            p.display(),
            if args.dry_run {
                "would be recorded cleaned"
            } else {
                "recorded cleaned"
            }
        ));
    }
    for p in &report.empty_folders {
        out.line(&format!("empty folder {}  {removal}", p.display()));
    }
    for p in &report.orphan_folders {
        out.line(&format!(
            "orphan folder (no attempt record): {}  kept: remove it yourself if you do not need it",
            p.display()
        ));
    }
    if report.attempts.is_empty()
        && report.scratch.is_empty()
        && report.warm_layers.is_empty()
        && report.missing_folders.is_empty()
        && report.empty_folders.is_empty()
    {
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
