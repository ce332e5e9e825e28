//! `git orch log`: the journal, in global order.

use std::collections::HashSet;
use std::time::Duration;

use clap::Args;

use super::error::CommandError;
use super::exit;
use super::globals::{CommandResult, GlobalArgs, open_store};
use super::output;
use crate::ids::RunId;
use crate::state::StateIndex;
use crate::store::log::{Entry, Problem};

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
    #[arg(long, value_name = "RUN", add = super::completions::runs())]
    pub run: Option<String>,
    /// Only events of this task (of any run, or of --run).
    #[arg(long, value_name = "TASK", add = super::completions::tasks())]
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

/// The events `args` asks for, in global order, and the problems met.
/// Only what is shown is read, plus the state index when filtering: the
/// last N events come from the newest end of each log, one run's events
/// from that run's cached records.
fn select(
    store: &crate::store::Store,
    args: &LogArgs,
) -> Result<(Vec<Entry>, Vec<Problem>), CommandError> {
    let (mut entries, mut problems) = match (&args.run, &args.task, args.limit) {
        (None, None, Some(n)) => {
            let view = store.log_tail(n)?;
            let mut problems = StateIndex::open(store)?.problems().to_vec();
            for p in view.problems {
                if !problems.contains(&p) {
                    problems.push(p);
                }
            }
            (view.entries, problems)
        }
        (None, None, None) => {
            let view = store.read_log()?;
            (view.entries, view.problems)
        }
        (run, _, _) => {
            let mut index = StateIndex::open(store)?;
            let runs: Vec<RunId> = match run {
                Some(r) => vec![RunId::new(r)?],
                None => index.all_briefs()?.into_iter().map(|b| b.id).collect(),
            };
            let mut entries = Vec::new();
            for r in runs {
                entries.extend(index.entries_of(&r)?);
            }
            entries.sort_by(|a, b| a.record.order_key().cmp(&b.record.order_key()));
            (entries, index.problems().to_vec())
        }
    };
    entries.retain(|e| wanted(e, args));
    if let Some(n) = args.limit {
        let skip = entries.len().saturating_sub(n);
        entries.drain(..skip);
    }
    problems.sort_by(|a, b| (&a.reference, a.seq).cmp(&(&b.reference, b.seq)));
    Ok((entries, problems))
}

pub fn run(cli: &GlobalArgs, args: &LogArgs) -> CommandResult {
    let store = open_store(&cli.directory)?;
    let mut out = output::Out::new();
    for (value, what) in [(&args.run, "run"), (&args.task, "task")] {
        if let Some(v) = value {
            crate::ids::check(what, v)?;
        }
    }
    // Where each log stood before reading, for --follow.
    let mut tips: std::collections::BTreeMap<String, crate::store::Oid> =
        store.log_tips()?.into_iter().collect();
    let (entries, problems) = select(&store, args)?;
    for entry in &entries {
        if !out.line(&render(entry, args.json)) {
            return Ok(exit::OK);
        }
    }
    let mut reported: HashSet<String> = HashSet::new();
    let report = |problems: &[Problem], reported: &mut HashSet<String>| {
        for p in problems {
            let line = p.to_string();
            if reported.insert(line.clone()) {
                output::status(&format!("warning: {line}"));
            }
        }
    };
    report(&problems, &mut reported);
    if !args.follow {
        if problems.is_empty() {
            return Ok(exit::OK);
        }
        return Err(CommandError::error(format!(
            "{} unreadable event record(s) in the log; the rest is shown above\nhint: fetch an intact copy from another clone with `git orch sync`, or inspect the blob with `git cat-file -p <blob>`",
            problems.len()
        )));
    }
    out.flush();
    let mut shown: HashSet<crate::store::Oid> = HashSet::new();
    loop {
        std::thread::sleep(Duration::from_millis(250));
        // Only what each log gained since the last look is read.
        let now: std::collections::BTreeMap<String, crate::store::Oid> =
            store.log_tips()?.into_iter().collect();
        let mut found = Vec::new();
        for (name, tip) in &now {
            let old = tips.get(name).copied();
            if old != Some(*tip) {
                found.extend(store.log_changes(name, old, *tip)?.added);
            }
        }
        tips = now;
        found.retain(|f| shown.insert(f.id));
        let (mut fresh, problems) = store.read_found(found);
        fresh.sort_by(|a, b| a.record.order_key().cmp(&b.record.order_key()));
        for entry in fresh.iter().filter(|e| wanted(e, args)) {
            if !out.line(&render(entry, args.json)) {
                return Ok(exit::OK);
            }
        }
        report(&problems, &mut reported);
        if !out.flush() {
            return Ok(exit::OK);
        }
    }
}
