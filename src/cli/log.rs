//! `git orch log`: the journal, in global order.

use std::collections::HashSet;
use std::time::Duration;

use clap::Args;

use super::{Cli, CommandError, CommandResult, exit, open_store, output};
use crate::store::log::Entry;

/// Show the event journal of every clone known here, in global order.
///
/// The order is (clock, writer, seq): the same on every clone that holds the
/// same events. Unreadable records are reported on stderr with their ref and
/// seq; the rest is still shown, and the exit code is 1.
#[derive(Debug, Args)]
pub struct LogArgs {
    /// One JSON record per line (NDJSON) instead of human lines.
    #[arg(long)]
    pub json: bool,
    /// Keep running and print new events as they arrive.
    #[arg(long)]
    pub follow: bool,
    /// Show only the last N events.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Only events of this run.
    #[arg(long, value_name = "RUN")]
    pub run: Option<String>,
    /// Only events of this task (of any run, or of --run).
    #[arg(long, value_name = "TASK")]
    pub task: Option<String>,
}

/// Whether `entry` passes the --run/--task filters.
fn wanted(entry: &Entry, args: &LogArgs) -> bool {
    let e = &entry.record.event;
    args.run
        .as_deref()
        .is_none_or(|r| e.run_id().is_some_and(|x| x.as_str() == r))
        && args
            .task
            .as_deref()
            .is_none_or(|t| e.task().is_some_and(|x| x.as_str() == t))
}

fn render(entry: &Entry, json: bool) -> String {
    let r = &entry.record;
    if json {
        serde_json::to_string(r).expect("records always serialise")
    } else {
        format!(
            "{}  {}  {:<20} {}",
            output::format_time(r.time_ms),
            r.writer,
            r.event.kind(),
            r.event.summary()
        )
    }
}

pub fn run(cli: &Cli, args: &LogArgs) -> CommandResult {
    let store = open_store(&cli.directory)?;
    let mut out = output::Out::new();
    for (value, what) in [(&args.run, "run"), (&args.task, "task")] {
        if let Some(v) = value {
            crate::ids::check(what, v).map_err(|e| CommandError::error(e.to_string()))?;
        }
    }
    let view = store.read_log()?;
    let selected: Vec<&Entry> = view.entries.iter().filter(|e| wanted(e, args)).collect();
    let skip = args.limit.map_or(0, |n| selected.len().saturating_sub(n));
    let mut shown: HashSet<_> = HashSet::new();
    for entry in &selected[skip..] {
        if !out.line(&render(entry, args.json)) {
            return Ok(exit::OK);
        }
    }
    shown.extend(view.entries.iter().map(|e| e.id));
    let mut reported: HashSet<String> = HashSet::new();
    let report = |problems: &[crate::store::log::Problem], reported: &mut HashSet<String>| {
        for p in problems {
            let line = p.to_string();
            if reported.insert(line.clone()) {
                output::status(&format!("warning: {line}"));
            }
        }
    };
    report(&view.problems, &mut reported);
    if !args.follow {
        if view.problems.is_empty() {
            return Ok(exit::OK);
        }
        return Err(CommandError::error(format!(
            "{} unreadable event record(s) in the log; the rest is shown above\nhint: fetch an intact copy from another clone with `git orch sync`, or inspect the blob with `git cat-file -p <blob>`",
            view.problems.len()
        )));
    }
    out.flush();
    loop {
        std::thread::sleep(Duration::from_millis(250));
        let view = store.read_log()?;
        for entry in view.entries.iter().filter(|e| wanted(e, args)) {
            if shown.insert(entry.id) && !out.line(&render(entry, args.json)) {
                return Ok(exit::OK);
            }
        }
        report(&view.problems, &mut reported);
        if !out.flush() {
            return Ok(exit::OK);
        }
    }
}
