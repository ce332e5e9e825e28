//! `git orch status`: where a run stands, task by task, in the status
//! model's words ([`crate::run::view`]), as a table, as JSON, or watched.

use std::io::IsTerminal;

use clap::Args;

use super::error::CommandError;
use super::exit;
use super::globals::{CommandResult, GlobalArgs, open_store};
use super::output;
use crate::clock::now_ms;
use crate::run;
use crate::run::view::{self, RunStanding, TaskRow};
use crate::state::RunState;

/// Show a run's tasks: state, attempt, agent, elapsed time, tokens, cost,
/// port and why a task is not done, with run totals.
///
/// Without RUN: the newest unfinished run, else the newest run. Tokens and
/// cost an agent did not report are shown as `unknown`, never as zero; a
/// cost estimated from the price table as `~$0.12`, one partly unknown as
/// `$0.12+?`.
/// With --watch the view is redrawn every second until the run ends; it
/// then exits with the code `git orch run` ends that run with (0 all done,
/// 3 some not, 64 budget, 65 circuit breaker, 130 interrupted). `q` (or
/// Ctrl-C) stops watching: exit 0 while the run goes on.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The run id, or a plan id for that plan's newest run (default: the
    /// newest unfinished run, else the newest).
    #[arg(add = super::completions::runs())]
    pub run: Option<String>,
    /// Print the result as JSON on stdout (with --watch: one line per
    /// change).
    #[arg(long)]
    pub json: bool,
    /// Redraw every second until the run ends (exit with its code) or `q`.
    #[arg(long)]
    pub watch: bool,
    /// List every run instead, newest first: id, plan, target, when it
    /// started, whether it finished, and for unfinished runs how many
    /// tasks are done.
    #[arg(long, conflicts_with_all = ["run", "watch"])]
    pub all: bool,
    /// Under each task, every attempt: its agent, state, time, tokens and
    /// cost, and why it did not pass or was not chosen (with --json every
    /// task lists its attempts' usage in `attempt_usage`).
    #[arg(long, conflicts_with = "all")]
    pub attempts: bool,
}

/// The worker claim on a task's latest attempt, if a worker runs it: who
/// holds it and how long since the holder last renewed it.
fn claim_of(run: &RunState, task: &str, attempt: Option<u32>) -> serde_json::Value {
    match run.claim_of(task) {
        Some((commit, c)) if Some(c.attempt) == attempt || attempt.is_none() => {
            let age_ms = (now_ms() - c.renewed_ms).max(0);
            serde_json::json!({
                "commit": commit,
                "writer": c.writer,
                "host": c.host,
                "lease_secs": c.lease_secs,
                "lease_age_ms": age_ms,
                "expired": age_ms > (c.lease_secs as i64) * 1000,
                "took_over_from": c.took_over_from,
            })
        }
        _ => serde_json::Value::Null,
    }
}

/// A run and its rows, as the status model gives them.
pub struct Snapshot {
    pub run: RunState,
    pub rows: Vec<TaskRow>,
}

impl Snapshot {
    pub fn of(store: &crate::store::Store, run: RunState) -> Result<Self, CommandError> {
        let rev = run::plan_of(store, &run)?;
        let rows = view::task_rows(&run, &rev.plan, now_ms());
        Ok(Self { run, rows })
    }

    /// The `--json` value.
    pub fn json(&self) -> serde_json::Value {
        let run = &self.run;
        let tasks: Vec<serde_json::Value> = self
            .rows
            .iter()
            .map(|r| {
                let mut v = serde_json::to_value(r).expect("rows serialise");
                v["claim"] = claim_of(run, r.task.as_str(), r.attempt);
                v
            })
            .collect();
        let usage = view::run_usage(run);
        let standing = RunStanding::of(run);
        serde_json::json!({
            "run": run.id,
            "plan_id": run.plan_id,
            "revision": run.revision,
            "target": run.target,
            "base": run.base,
            "state": standing.label(),
            "standing": standing,
            "exit_code": view::exit_code(run),
            "counts": view::counts(self.rows.iter().map(|r| &r.status))
                .into_iter()
                .map(|(s, n)| (s.as_str().to_owned(), serde_json::json!(n)))
                .collect::<serde_json::Map<_, _>>(),
            "cost_usd": usage.cost_usd,
            "usage": usage,
            "settings": run.settings,
            "summary": run.finished,
            "tasks": tasks,
        })
    }

    /// The table: a title line, column headers, one line per task.
    pub fn lines(&self) -> Vec<String> {
        self.lines_with(false)
    }

    /// The table; with `attempts`, every attempt under its task (instead
    /// of only the candidates of a best-of-N round).
    pub fn lines_with(&self, attempts: bool) -> Vec<String> {
        let run = &self.run;
        let counts = view::counts(self.rows.iter().map(|r| &r.status))
            .into_iter()
            .map(|(s, n)| format!("{n} {s}"))
            .collect::<Vec<_>>()
            .join(", ");
        let usage = view::run_usage(run);
        let mut lines = vec![
            format!(
                "run {} of plan {} revision {} → {} ({}): {counts}",
                run.id,
                run.plan_id,
                run.revision,
                run.target,
                RunStanding::of(run).label(),
            ),
            format!("cost {}", usage.text()),
        ];
        let task_w = self
            .rows
            .iter()
            .map(|r| r.task.as_str().chars().count())
            .max()
            .unwrap_or(0)
            .clamp(4, 24);
        let agent_w = self
            .rows
            .iter()
            .filter_map(|r| r.agent.as_deref().map(|a| a.chars().count()))
            .max()
            .unwrap_or(0)
            .clamp(5, 16);
        lines.push(
            format!(
                "{:<task_w$}  {:<9}  {:>7}  {:<agent_w$}  {:>7}  {:>15}  {:>8}  {:>5}  DETAIL",
                "TASK", "STATE", "ATTEMPT", "AGENT", "TIME", "TOKENS IN/OUT", "COST", "PORT"
            )
            .trim_end()
            .to_owned(),
        );
        for r in &self.rows {
            let no_attempt = r.attempt.is_none();
            let dash = |s: String| if no_attempt { "-".to_owned() } else { s };
            let mut detail = r.detail().unwrap_or_default().to_owned();
            let held = claim_of(run, r.task.as_str(), r.attempt);
            if held.is_object() && r.status == view::Status::Running {
                let age = held["lease_age_ms"].as_i64().unwrap_or(0) / 1000;
                detail.push_str(&format!(
                    "[{} on {}, renewed {} ago{}]",
                    held["writer"].as_str().unwrap_or("?"),
                    held["host"].as_str().unwrap_or("?"),
                    output::format_duration(age as u64),
                    if held["expired"] == true {
                        ", lease expired"
                    } else {
                        ""
                    }
                ));
            }
            lines.push(
                format!(
                    "{:<task_w$}  {:<9}  {:>7}  {:<agent_w$}  {:>7}  {:>15}  {:>8}  {:>5}  {detail}",
                    r.task.as_str(),
                    r.status.as_str(),
                    r.attempt.map_or("-".into(), |n| format!("#{n}")),
                    r.agent.as_deref().unwrap_or("-"),
                    r.elapsed_ms.map_or("-".into(), |ms| {
                        output::format_duration((ms.max(0) / 1000) as u64)
                    }),
                    r.usage.tokens_cell(),
                    dash(r.usage.cost_text()),
                    r.port.map_or("-".into(), |p| p.to_string()),
                )
                .trim_end()
                .to_owned(),
            );
            if attempts {
                for a in &r.attempt_rows {
                    lines.push(
                        format!(
                            "{:<task_w$}  {:<9}  {:>7}  {:<agent_w$}  {:>7}  {:>15}  {:>8}  {:>5}  {}",
                            "",
                            a.state,
                            format!("#{}", a.attempt),
                            a.agent,
                            a.elapsed_ms.map_or("-".into(), |ms| {
                                output::format_duration((ms.max(0) / 1000) as u64)
                            }),
                            a.usage.tokens_cell(),
                            if a.usage.runs == 0 {
                                "-".to_owned()
                            } else {
                                a.usage.cost_text()
                            },
                            "",
                            a.detail.as_deref().unwrap_or_default()
                        )
                        .trim_end()
                        .to_owned(),
                    );
                }
                continue;
            }
            // The candidates of a best-of-N round, under their task.
            for c in &r.candidates {
                lines.push(
                    format!(
                        "{:<task_w$}  {:<9}  {:>7}  {:<agent_w$}  {}",
                        "",
                        c.state,
                        format!("#{}", c.attempt),
                        c.agent,
                        c.why.as_deref().unwrap_or_default()
                    )
                    .trim_end()
                    .to_owned(),
                );
            }
        }
        lines
    }
}

/// The line under the table that says which other runs are unfinished,
/// when the newest was picked: several plans run at once, and one table
/// must not hide the others.
fn others_unfinished(index: &crate::state::StateIndex, shown: &RunState) -> Option<String> {
    let mut others: Vec<&crate::state::RunBrief> =
        index.open_runs().filter(|b| b.id != shown.id).collect();
    if others.is_empty() {
        return None;
    }
    others.sort_by_key(|b| std::cmp::Reverse(b.started_ms));
    const NAMED: usize = 3;
    let named: Vec<String> = others
        .iter()
        .take(NAMED)
        .map(|b| format!("{} (plan {})", b.id, b.plan_id))
        .collect();
    let more = others.len().saturating_sub(NAMED);
    Some(format!(
        "also unfinished: {}{}; `git orch status <run>` shows one, `git orch status --all` lists every run",
        named.join(", "),
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        }
    ))
}

/// `status --all`: every run, newest first, from the state index's briefs
/// (unfinished runs are loaded for their counts).
fn list_runs(
    store: &crate::store::Store,
    index: &mut crate::state::StateIndex,
    json: bool,
) -> CommandResult {
    let mut briefs = index.all_briefs()?;
    briefs.sort_by_key(|b| std::cmp::Reverse((b.started_ms, b.id.clone())));
    let open = index.unfinished()?;
    let mut out = output::Out::new();
    if briefs.is_empty() && !json {
        out.line("no runs yet: `git orch run <plan>` starts one");
        return Ok(exit::OK);
    }
    let mut rows = Vec::new();
    for b in &briefs {
        let done = match open.get(&b.id) {
            Some(r) => {
                let snap = Snapshot::of(store, r.clone())?;
                let done = snap
                    .rows
                    .iter()
                    .filter(|r| matches!(r.status, view::Status::Done | view::Status::Skipped))
                    .count();
                Some((done, snap.rows.len()))
            }
            None => None,
        };
        rows.push((b, done));
    }
    if json {
        let list: Vec<serde_json::Value> = rows
            .iter()
            .map(|(b, done)| {
                serde_json::json!({
                    "run": b.id,
                    "plan_id": b.plan_id,
                    "target": b.target,
                    "started_ms": b.started_ms,
                    "finished": b.finished,
                    "writer": b.writer,
                    "done": done.map(|d| d.0),
                    "tasks": done.map(|d| d.1),
                })
            })
            .collect();
        out.line(&serde_json::Value::Array(list).to_string());
        return Ok(exit::OK);
    }
    let run_w = rows
        .iter()
        .map(|(b, _)| b.id.as_str().len())
        .max()
        .unwrap_or(3)
        .max(3);
    let plan_w = rows
        .iter()
        .map(|(b, _)| b.plan_id.as_str().chars().count())
        .max()
        .unwrap_or(4)
        .clamp(4, 32);
    out.line(&format!(
        "{:<run_w$}  {:<plan_w$}  {:<16}  {:<20}  STATE",
        "RUN", "PLAN", "TARGET", "STARTED"
    ));
    for (b, done) in rows {
        let state = match done {
            Some((d, n)) => format!("unfinished, {d} of {n} done"),
            None => "finished".to_owned(),
        };
        if !out.line(&format!(
            "{:<run_w$}  {:<plan_w$}  {:<16}  {:<20}  {state}",
            b.id.as_str(),
            b.plan_id.as_str(),
            b.target,
            output::format_time(b.started_ms),
        )) {
            break;
        }
    }
    Ok(exit::OK)
}

/// The terminal of `--watch`: keys without Enter, restored on the way out.
struct Keys {
    saved: Option<libc::termios>,
    /// stdin still gives keys (not at its end).
    open: bool,
}

/// Set by SIGINT while watching: the loop ends and the terminal is
/// restored, instead of the process dying in the middle of a frame.
static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, std::sync::atomic::Ordering::SeqCst);
}

impl Keys {
    fn new() -> Self {
        let mut saved = None;
        // Only in the foreground: a background process changing the
        // terminal would be stopped by SIGTTOU.
        // SAFETY: both only read the process group ids.
        let foreground = unsafe { libc::tcgetpgrp(0) == libc::getpgrp() };
        if std::io::stdin().is_terminal() && foreground {
            // SAFETY: tcgetattr/tcsetattr fill and read a termios struct
            // for fd 0; the handler only stores to an atomic.
            unsafe {
                let mut t: libc::termios = std::mem::zeroed();
                if libc::tcgetattr(0, &mut t) == 0 {
                    let mut raw = t;
                    raw.c_lflag &= !(libc::ICANON | libc::ECHO);
                    raw.c_cc[libc::VMIN] = 0;
                    raw.c_cc[libc::VTIME] = 0;
                    if libc::tcsetattr(0, libc::TCSANOW, &raw) == 0 {
                        saved = Some(t);
                    }
                }
            }
        }
        // SAFETY: installs a handler that only stores to an atomic.
        unsafe {
            libc::signal(
                libc::SIGINT,
                on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t,
            );
        }
        Self { saved, open: true }
    }

    /// Waits up to `timeout` for a key; returns whether it was `q`.
    fn wait_for_q(&mut self, timeout: std::time::Duration) -> bool {
        if !self.open {
            std::thread::sleep(timeout);
            return false;
        }
        let mut fds = libc::pollfd {
            fd: 0,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd for fd 0; read into a local buffer.
        let ready = unsafe { libc::poll(&mut fds, 1, timeout.as_millis() as libc::c_int) };
        if ready <= 0 {
            return false;
        }
        let mut buf = [0u8; 64];
        let n = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            // The end of stdin (a pipe, /dev/null): no more keys.
            self.open = false;
            if n == 0 && self.saved.is_none() {
                std::thread::sleep(timeout);
            }
            return false;
        }
        buf[..n as usize].iter().any(|b| matches!(b, b'q' | b'Q'))
    }
}

impl Drop for Keys {
    fn drop(&mut self) {
        if let Some(t) = &self.saved {
            // SAFETY: restores the settings read in `new`.
            unsafe {
                libc::tcsetattr(0, libc::TCSANOW, t);
            }
        }
    }
}

pub fn run(cli: &GlobalArgs, args: &StatusArgs) -> CommandResult {
    let store = open_store(&cli.directory)?;
    let mut index = crate::state::StateIndex::open(&store)?;
    let pick = |index: &mut crate::state::StateIndex| {
        let r = run::pick_run(index, args.run.as_deref())
            .map_err(|e| super::suggest::with_run_hint(e.into(), args.run.as_deref(), index))?;
        Snapshot::of(&store, r)
    };
    if args.all {
        return list_runs(&store, &mut index, args.json);
    }
    if !args.watch {
        let snap = pick(&mut index)?;
        let lines = if args.json {
            vec![snap.json().to_string()]
        } else {
            let mut lines = snap.lines_with(args.attempts);
            if args.run.is_none() {
                lines.extend(others_unfinished(&index, &snap.run));
            }
            lines
        };
        let mut out = output::Out::new();
        for l in lines {
            if !out.line(&l) {
                break;
            }
        }
        return Ok(exit::OK);
    }
    // Watch one run: the one picked now, even when a newer one starts.
    let first = pick(&mut index)?;
    let run_id = first.run.id.clone();
    let fixed = Some(run_id.to_string());
    let terminal = std::io::stdout().is_terminal() && !args.json;
    let mut keys = Keys::new();
    let mut out = output::Out::new();
    let mut last: Vec<String> = Vec::new();
    let mut snap = first;
    loop {
        let lines = if args.json {
            vec![snap.json().to_string()]
        } else {
            snap.lines_with(args.attempts)
        };
        if lines != last {
            if terminal {
                // Home, each line cleared to its end, the rest below cleared.
                let mut frame = String::from("\x1b[H");
                for l in &lines {
                    frame.push_str(l);
                    frame.push_str("\x1b[K\n");
                }
                frame.push_str("\x1b[J");
                if last.is_empty() {
                    frame.insert_str(0, "\x1b[2J");
                }
                if !out.line(frame.trim_end_matches('\n')) {
                    return Ok(exit::OK);
                }
            } else {
                if !args.json && !last.is_empty() {
                    out.line("");
                }
                for l in &lines {
                    if !out.line(l) {
                        return Ok(exit::OK);
                    }
                }
            }
            if !out.flush() {
                return Ok(exit::OK);
            }
            last = lines;
        }
        if let Some(code) = view::exit_code(&snap.run) {
            return Ok(code);
        }
        if keys.wait_for_q(std::time::Duration::from_secs(1)) {
            return Ok(exit::OK);
        }
        if INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst) {
            return Ok(exit::INTERRUPTED);
        }
        index.refresh(&store)?;
        let r = run::pick_run(&mut index, fixed.as_deref())?;
        snap = Snapshot::of(&store, r)?;
    }
}

/// The usage of `run` for people: `$0.12, 12.3k in, 1.1k out` (`unknown`
/// rather than `$0.00` where no agent reported a cost).
pub fn run_usage_text(run: &RunState) -> String {
    view::run_usage(run).text()
}
