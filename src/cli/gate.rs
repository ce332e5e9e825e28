//! `git orch gate <attempt>`: run the gate stack by hand.

use clap::Args;

use super::error::CommandError;
use super::exit;
use super::globals::{CommandResult, GlobalArgs, open_store};
use super::output;
use crate::ids::TaskId;
use crate::run;

/// Run an attempt's gate stack again and print the verdicts.
///
/// ATTEMPT is `<run>/<task>/<n>`, `<task>/<n>` or `<task>` (its latest
/// attempt) of the newest run. Verdicts are recorded; the attempt's outcome
/// does not change. Exit 3 if a blocking gate fails.
#[derive(Debug, Args)]
pub struct GateArgs {
    /// `<run>/<task>/<n>`, `<task>/<n>` or `<task>`.
    #[arg(add = super::completions::tasks())]
    pub attempt: String,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

pub fn run(cli: &GlobalArgs, args: &GateArgs) -> CommandResult {
    let store = open_store(&cli.directory)?;
    let mut index = crate::state::StateIndex::open(&store)?;
    let spec = args
        .attempt
        .trim_start_matches("orch/")
        .replace("/attempt-", "/");
    let parts: Vec<&str> = spec.split('/').collect();
    let (run_id, task, n) = match parts.as_slice() {
        [r, t, n] => (Some(*r), *t, n.parse::<u32>().ok()),
        [t, n] => (None, *t, n.parse::<u32>().ok()),
        [t] => (None, *t, None),
        _ => (None, "", None),
    };
    let bad = || {
        CommandError::with_code(
            exit::USAGE,
            format!(
                "{:?} is not an attempt; use <run>/<task>/<n>, <task>/<n> or <task>",
                args.attempt
            ),
        )
    };
    let task = TaskId::new(task).map_err(|_| bad())?;
    let r = run::pick_run(&mut index, run_id)?;
    let n = match n {
        Some(n) => n,
        None => r
            .tasks
            .get(&task)
            .and_then(|t| t.current())
            .map(|a| a.n)
            .ok_or_else(|| {
                CommandError::error(format!(
                    "{}/{task} has no attempts yet\nhint: `git orch run <plan>` dispatches it; `git orch status {}` shows where the run stands",
                    r.id, r.id
                ))
            })?,
    };
    let runtime = super::globals::scheduler()?;
    let outcome = runtime.block_on(run::control::gate_attempt(store.common_dir(), &r, &task, n))?;
    let mut out = output::Out::new();
    for v in &outcome.verdicts {
        if args.json {
            out.line(&serde_json::to_string(v).expect("verdicts serialise"));
        } else {
            out.line(&format!(
                "{:<14} {:<8} {:<5} {:>6}ms  {}",
                v.gate,
                v.status.as_str(),
                v.mode.as_str(),
                v.duration_ms,
                v.summary
            ));
        }
    }
    Ok(if outcome.failure.is_some() {
        exit::BLOCKED
    } else {
        exit::OK
    })
}
