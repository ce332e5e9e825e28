//! `git orch status`: where a run stands, task by task.

use clap::Args;

use super::{Cli, CommandError, CommandResult, exit, open_store, output};
use crate::run;
use crate::state::{AttemptState, RunState, TaskStatus};

/// Tokens and cost of `attempts`, as JSON: the token counts summed; the
/// cost summed where known, with `cost` saying whether it is `reported` by
/// the agents, `estimated` from the price table, `partial` (some agents
/// reported nothing and their model has no price) or `unknown` (none did),
/// which is not the same as `$0.00`.
fn usage<'a>(attempts: impl Iterator<Item = &'a AttemptState>) -> serde_json::Value {
    let (mut input, mut output, mut cache_read, mut cache_write) = (0u64, 0u64, 0u64, 0u64);
    let (mut known, mut unknown, mut estimated) = (0usize, 0usize, 0usize);
    let mut cost = 0.0;
    for run in attempts.filter_map(|a| a.agent_run.as_ref()) {
        let u = &run.usage;
        input += u.input_tokens;
        output += u.output_tokens;
        cache_read += u.cache_read_tokens;
        cache_write += u.cache_write_tokens;
        match u.cost_usd {
            Some(c) => {
                known += 1;
                cost += c;
                if u.cost_source.as_deref() == Some("estimated") {
                    estimated += 1;
                }
            }
            None => unknown += 1,
        }
    }
    let kind = match (known, unknown, estimated) {
        (0, 0, _) => "none",
        (0, _, _) => "unknown",
        (_, u, _) if u > 0 => "partial",
        (_, _, e) if e > 0 => "estimated",
        _ => "reported",
    };
    serde_json::json!({
        "input_tokens": input,
        "output_tokens": output,
        "cache_read_tokens": cache_read,
        "cache_write_tokens": cache_write,
        "cost_usd": if kind == "unknown" { serde_json::Value::Null } else { serde_json::json!(cost) },
        "cost": kind,
    })
}

/// The cost and tokens of `run` for people: `$0.12, 12.3k in, 1.1k out`
/// (`unknown` rather than `$0.00` where no agent reported a cost).
pub fn run_usage_text(run: &RunState) -> String {
    let u = usage(run.attempts().map(|(_, a)| a));
    format!("{}, {}", cost_text(&u), tokens_text(&u))
}

/// A cost for people: `$0.12`, `~$0.12` (estimated), `$0.12+?` (some
/// unknown), `unknown`.
fn cost_text(u: &serde_json::Value) -> String {
    let usd = u["cost_usd"].as_f64().unwrap_or(0.0);
    match u["cost"].as_str() {
        Some("unknown") => "unknown".to_owned(),
        Some("partial") => format!("${usd:.2}+?"),
        Some("estimated") => format!("~${usd:.2}"),
        _ => format!("${usd:.2}"),
    }
}

/// A token count for people: `345`, `12.3k`, `1.5M`.
fn short(n: u64) -> String {
    match n {
        0..=999 => n.to_string(),
        1_000..=999_999 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

/// Tokens for people: `12.3k in, 1.1k out`.
fn tokens_text(u: &serde_json::Value) -> String {
    format!(
        "{} in, {} out",
        short(u["input_tokens"].as_u64().unwrap_or(0)),
        short(u["output_tokens"].as_u64().unwrap_or(0))
    )
}

/// Tokens in a table cell: `12.3k/1.1k` (in/out), `-` when none.
fn short_tokens(u: &serde_json::Value) -> String {
    let (i, o) = (
        u["input_tokens"].as_u64().unwrap_or(0),
        u["output_tokens"].as_u64().unwrap_or(0),
    );
    if i == 0 && o == 0 {
        "-".to_owned()
    } else {
        format!("{}/{}", short(i), short(o))
    }
}

/// Show a run's tasks: state, attempt, agent, elapsed time, cost,
/// worktree and port, with run totals.
///
/// Without RUN: the newest unfinished run, else the newest run.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The run id.
    pub run: Option<String>,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Refresh every second until interrupted.
    #[arg(long)]
    pub watch: bool,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default()
}

/// The status rows of a run, as JSON values (shared by human and JSON
/// output).
pub fn rows(
    store: &crate::store::Store,
    run: &RunState,
) -> Result<Vec<serde_json::Value>, CommandError> {
    let rev = run::plan_of(store, run).map_err(|e| CommandError::error(e.to_string()))?;
    let blocked = run::schedule::blocked_tasks(run, &rev.plan);
    let mut out = Vec::new();
    for sub in &rev.plan.subtasks {
        let t = run.tasks.get(&sub.id);
        let retries = run::retries_for(run, sub);
        let mut status = t
            .map_or(TaskStatus::Pending, |t| t.status(retries))
            .as_str()
            .to_owned();
        if status == "pending" && blocked.contains(&sub.id) {
            status = "blocked".into();
        }
        let last = t.and_then(|t| t.attempts.last());
        let elapsed_ms = last.map(|a| {
            let start = a.started.map_or(a.created_ms, |s| s.time_ms);
            a.finished_ms.unwrap_or_else(now_ms) - start
        });
        let gate = last.and_then(|a| {
            a.verdicts
                .iter()
                .find(|v| v.blocks())
                .or(a.verdicts.last())
                .map(|v| format!("{} {}", v.gate, v.status.as_str()))
        });
        out.push(serde_json::json!({
            "task": sub.id,
            "status": status,
            "attempt": last.map(|a| a.n),
            "attempts": t.map_or(0, |t| t.attempts.len()),
            "agent": last.map(|a| a.agent.clone()),
            "elapsed_ms": elapsed_ms,
            "cost_usd": t.map_or(0.0, |t| t.cost()),
            "usage": usage(t.into_iter().flat_map(|t| t.attempts.iter())),
            "attempt_usage": t.map_or_else(Vec::new, |t| t
                .attempts
                .iter()
                .filter_map(|a| a.agent_run.as_ref().map(|r| serde_json::json!({
                    "attempt": a.n,
                    "agent": a.agent,
                    "usage": r.usage,
                })))
                .collect()),
            "worktree": last.map(|a| a.worktree.clone()),
            "workspace": last.map(|a| a.workspace()),
            "port": last.map(|a| a.port),
            "gate": gate,
            "failure": last.and_then(|a| a.failure.as_ref().map(|f| {
                if status == "failed" {
                    format!("retry budget exhausted: {}", f.reason)
                } else {
                    f.reason.clone()
                }
            })),
            "writer": last.map(|a| a.writer.to_string()),
            "claim": claim_of(run, sub.id.as_str(), last.map(|a| a.n)),
        }));
    }
    Ok(out)
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

fn render(
    store: &crate::store::Store,
    run: &RunState,
    json: bool,
) -> Result<Vec<String>, CommandError> {
    let rows = rows(store, run)?;
    let state = match (&run.finished, &run.stopped) {
        (Some(_), _) => "finished".to_owned(),
        (None, Some((reason, _))) => format!("stopped ({})", reason.as_str()),
        (None, None) => "open".to_owned(),
    };
    if json {
        let v = serde_json::json!({
            "run": run.id,
            "plan_id": run.plan_id,
            "revision": run.revision,
            "target": run.target,
            "base": run.base,
            "state": state,
            "cost_usd": run.cost(),
            "usage": usage(run.attempts().map(|(_, a)| a)),
            "settings": run.settings,
            "summary": run.finished,
            "tasks": rows,
        });
        return Ok(vec![v.to_string()]);
    }
    let total = usage(run.attempts().map(|(_, a)| a));
    let mut lines = vec![format!(
        "run {} of plan {} revision {} → {} ({state}), cost {}, {}",
        run.id,
        run.plan_id,
        run.revision,
        run.target,
        cost_text(&total),
        tokens_text(&total)
    )];
    for r in &rows {
        let held = &r["claim"];
        let holder = if held.is_object() && matches!(r["status"].as_str(), Some("running")) {
            let age = held["lease_age_ms"].as_i64().unwrap_or(0) / 1000;
            format!(
                "  [{} on {}, renewed {} ago{}]",
                held["writer"].as_str().unwrap_or("?"),
                held["host"].as_str().unwrap_or("?"),
                output::format_duration(age as u64),
                if held["expired"] == true {
                    ", lease expired"
                } else {
                    ""
                }
            )
        } else {
            String::new()
        };
        let s = |k: &str| {
            r[k].as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| "-".into())
        };
        let elapsed = r["elapsed_ms"].as_i64().map_or("-".into(), |ms| {
            output::format_duration((ms.max(0) / 1000) as u64)
        });
        lines.push(format!(
            "  {:<22} {:<9} {:>3} {:<8} {:>7} {:>8} {:>13} {:<6} {}",
            s("task"),
            s("status"),
            r["attempt"]
                .as_u64()
                .map_or("-".into(), |n| format!("#{n}")),
            s("agent"),
            elapsed,
            cost_text(&r["usage"]),
            short_tokens(&r["usage"]),
            r["port"].as_u64().map_or("-".into(), |p| p.to_string()),
            match (&r["failure"], &r["gate"]) {
                (serde_json::Value::String(f), _) => f.clone(),
                (_, serde_json::Value::String(g)) => g.clone(),
                _ => String::new(),
            } + &holder
        ));
    }
    Ok(lines)
}

pub fn run(cli: &Cli, args: &StatusArgs) -> CommandResult {
    let store = open_store(&cli.directory)?;
    let mut index = crate::state::StateIndex::open(&store)?;
    loop {
        index.refresh(&store)?;
        let r = run::pick_run(&mut index, args.run.as_deref())
            .map_err(|e| CommandError::error(e.to_string()))?;
        let lines = render(&store, &r, args.json)?;
        let mut out = output::Out::new();
        if args.watch && std::io::IsTerminal::is_terminal(&std::io::stdout()) {
            // Clear the screen between frames on a terminal only.
            out.line("\x1b[2J\x1b[H");
        }
        for l in lines {
            if !out.line(&l) {
                return Ok(exit::OK);
            }
        }
        if !args.watch {
            return Ok(exit::OK);
        }
        out.flush();
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}
