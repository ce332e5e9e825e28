//! `git orch retry | skip | cancel <task>`: a person's decision about one
//! task of a run, recorded for the driver to act on.

use clap::Args;

use super::error::CommandError;
use super::exit;
use super::globals::{CommandResult, GlobalArgs, open_store};
use super::output;
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
    #[arg(add = super::completions::tasks())]
    pub task: String,
    /// The run (default: the unfinished run that has the task).
    #[arg(long, value_name = "RUN", add = super::completions::runs())]
    pub run: Option<String>,
}

pub fn run(cli: &GlobalArgs, args: &TaskArgs, action: Control) -> CommandResult {
    let store = open_store(&cli.directory)?;
    let task = TaskId::new(&args.task)?;
    let mut index = crate::state::StateIndex::open(&store)?;
    let r = match &args.run {
        Some(id) => run::pick_run(&mut index, Some(id))
            .map_err(|e| super::suggest::with_run_hint(e.into(), Some(id), &mut index))?,
        None => {
            let reopen = action == Control::Retry;
            let mut holding = run::control::runs_holding(&store, &mut index, &task, reopen)?;
            match holding.len() {
                0 => {
                    let error = CommandError::error(format!(
                        "no {}run has a task {task}",
                        if reopen { "" } else { "unfinished " }
                    ))
                    .hint("`git orch status` lists the newest run's tasks; name the run with --run <run>");
                    return Err(super::suggest::with_task_hint(
                        error,
                        task.as_str(),
                        &store,
                        &[],
                    ));
                }
                1 => holding.remove(0),
                _ => {
                    let list: Vec<String> = holding
                        .iter()
                        .map(|r| format!("  git orch {} {task} --run {}", action.as_str(), r.id))
                        .collect();
                    return Err(CommandError::with_code(
                        exit::USAGE,
                        format!(
                            "{} runs have a task {task}; say which:\n{}",
                            holding.len(),
                            list.join("\n")
                        ),
                    ));
                }
            }
        }
    };
    let by = store
        .config_get("user.name")?
        .unwrap_or_else(|| std::env::var("USER").unwrap_or_else(|_| "unknown".into()));
    run::control::control(&store, &r, &task, action, &by).map_err(|e| {
        super::suggest::with_task_hint(
            e.into(),
            task.as_str(),
            &store,
            std::slice::from_ref(&r.plan_id),
        )
    })?;
    output::status(&format!(
        "Recorded {} of {task} in run {}.{}",
        action.as_str(),
        r.id,
        match action {
            // Workers work a run for workers; `git orch run` refuses it.
            _ if r.settings.workers => {
                " Publish it with `git orch sync`: workers (`git orch worker`) act on it on their next round."
                    .to_owned()
            }
            Control::Retry => format!(" Resume with `git orch run {}`.", r.plan_id),
            Control::Skip | Control::Cancel if r.finished.is_none() => {
                if run::control::driver_alive(&store, &r.id).unwrap_or(false) {
                    " The run's driver acts on it within a second.".to_owned()
                } else {
                    format!(
                        " No driver runs it now: `git orch run {}` resumes it and acts on it.",
                        r.plan_id
                    )
                }
            }
            _ => String::new(),
        }
    ));
    Ok(exit::OK)
}
