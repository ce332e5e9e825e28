//! `git orch retry | skip | cancel <task>`: a person's decision about one
//! task of a run, recorded for the driver to act on.

use clap::Args;

use super::{Cli, CommandError, CommandResult, exit, open_store, output};
use crate::event::Control;
use crate::ids::TaskId;
use crate::run;

/// Decide about one task of a run (default: the newest unfinished run).
///
/// retry: run it again with a fresh retry budget (reopens a finished run;
/// rerun `git orch run <plan>` to resume it). skip: do not run it;
/// dependents may proceed. cancel: stop its live attempt and do not run it;
/// dependents are blocked.
#[derive(Debug, Args)]
pub struct TaskArgs {
    /// The task id.
    pub task: String,
    /// The run (default: the newest unfinished one).
    #[arg(long, value_name = "RUN")]
    pub run: Option<String>,
}

pub fn run(cli: &Cli, args: &TaskArgs, action: Control) -> CommandResult {
    let store = open_store(&cli.directory)?;
    let task = TaskId::new(&args.task).map_err(|e| CommandError::error(e.to_string()))?;
    let mut index = crate::state::StateIndex::open(&store)?;
    let r = run::pick_run(&mut index, args.run.as_deref())
        .map_err(|e| CommandError::error(e.to_string()))?;
    let by = store
        .config_get("user.name")?
        .unwrap_or_else(|| std::env::var("USER").unwrap_or_else(|_| "unknown".into()));
    run::control::control(&store, &r, &task, action, &by)
        .map_err(|e| CommandError::error(e.to_string()))?;
    output::status(&format!(
        "Recorded {} of {task} in run {}.{}",
        action.as_str(),
        r.id,
        match action {
            Control::Retry => format!(" Resume with `git orch run {}`.", r.plan_id),
            _ => String::new(),
        }
    ));
    Ok(exit::OK)
}
