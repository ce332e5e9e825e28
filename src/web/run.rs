//! A run's page: what it runs and where, its task graph coloured by state,
//! a table like `git orch status`, the merge queue (what waits, in which
//! order, each candidate the integration gate judged, batches and
//! bisections, what left the queue and why, what landed) and its latest
//! events. Everything under the title follows the log live.

use maud::{Markup, html};

use super::dag::{self, Node};
use super::error::PageError;
use super::layout::{badge, facts, live, page};
use super::reader::Ctx;
use super::runs::standing_word;
use super::text;
use crate::ids::RunId;
use crate::run::view::{self, RunStanding, Status, TaskRow};
use crate::state::RunState;

/// Events shown at the foot of the page, newest first.
const EVENTS_SHOWN: usize = 30;

/// The run `id`, or a 404.
pub fn load(ctx: &mut Ctx<'_>, id: &str) -> Result<RunState, PageError> {
    let id = RunId::new(id)?;
    ctx.index
        .run(&id)?
        .cloned()
        .ok_or_else(|| PageError::not_found(format!("no run {id} in this repository's log")))
}

/// The whole page.
pub fn render(ctx: &mut Ctx<'_>, id: &str) -> Result<Markup, PageError> {
    let run = load(ctx, id)?;
    let inner = fragment_of(ctx, &run)?;
    let links = ctx.links;
    let here = links.run(run.id.as_str());
    let body = html! {
        h1 { "Run " (run.id) }
        (live(&links.live(&here), inner))
    };
    Ok(page(
        links,
        &format!("run {}", run.id),
        &[(here.clone(), run.id.to_string())],
        body,
    ))
}

/// The part that follows the log.
pub fn fragment(ctx: &mut Ctx<'_>, id: &str) -> Result<Markup, PageError> {
    let run = load(ctx, id)?;
    fragment_of(ctx, &run)
}

fn fragment_of(ctx: &mut Ctx<'_>, run: &RunState) -> Result<Markup, PageError> {
    let rev = crate::run::plan_of(ctx.store, run)?;
    let plan = &rev.plan;
    let rows = view::task_rows(run, plan, crate::clock::now_ms());
    let links = ctx.links;
    let standing = RunStanding::of(run);
    let usage = view::run_usage(run);
    let counts = view::counts(rows.iter().map(|r| &r.status));
    let nodes: Vec<Node> = plan
        .subtasks
        .iter()
        .map(|s| Node {
            id: s.id.to_string(),
            title: s.title.clone(),
            depends_on: s.depends_on.iter().map(|d| d.to_string()).collect(),
            state: rows
                .iter()
                .find(|r| r.task == s.id)
                .map_or("pending", |r| r.status.as_str())
                .to_owned(),
            href: links.task(run.id.as_str(), s.id.as_str()),
        })
        .collect();
    let entries = ctx.index.entries_of(&run.id)?;
    let about = facts(&[
        (
            "plan",
            html! { a href=(links.plan(run.plan_id.as_str(), Some(run.revision))) {
            (run.plan_id) " revision " (run.revision) } " " code { (text::short(&run.plan_hash)) } },
        ),
        (
            "state",
            html! {
                (badge(standing_word(&standing)))
                @if let RunStanding::Stopped { reason, detail } = &standing {
                    " " (reason) ": " (detail)
                }
                @if let Some(why) = &run.closed { " (closed: " (why) ")" }
            },
        ),
        (
            "target",
            html! { (run.target) " from " code { (text::short(&run.base.to_string())) } },
        ),
        (
            "started",
            html! {
                (text::time(run.started_ms))
                @if let Some(p) = &run.by { " by " (p.name) }
            },
        ),
        (
            "tasks",
            html! {
                @for (s, n) in &counts {
                    span class={ "count s-" (s.as_str()) } { (n) " " (s.as_str()) } " "
                }
            },
        ),
        ("cost", html! { (usage.text()) }),
        (
            "settings",
            html! {
                "cap " (run.settings.cap) ", agent " (run.settings.agent)
                ", retries " (run.settings.retries)
                @if run.settings.best_of > 1 { ", best of " (run.settings.best_of) }
                @if let Some(b) = run.settings.budget_usd { ", budget " (crate::agent::price::usd(b)) }
            },
        ),
    ]);
    Ok(html! {
        (about)
        h2 { "Task graph" }
        (dag::svg(&nodes))
        h2 { "Tasks" }
        (table(ctx, run, &rows))
        h2 { "Merge queue" }
        (queue(ctx, run, plan, &rows))
        h2 { "Latest events" }
        ol.events reversed {
            @for e in entries.iter().rev().take(EVENTS_SHOWN) {
                li {
                    span.when { (text::time(e.record.time_ms)) } " "
                    span.kind { (e.record.event.kind()) } " "
                    (crate::gate::masking::mask_text(&e.record.event.summary()))
                }
            }
        }
    })
}

/// The table of `git orch status`.
fn table(ctx: &Ctx<'_>, run: &RunState, rows: &[TaskRow]) -> Markup {
    let links = ctx.links;
    html! {
        table.tasks {
            thead { tr {
                th { "task" } th { "state" } th { "attempt" } th { "agent" } th { "time" }
                th { "tokens in/out" } th { "cost" } th { "detail" }
            } }
            tbody {
                @for r in rows {
                    tr data-task=(r.task) data-state=(r.status.as_str()) {
                        td { a href=(links.task(run.id.as_str(), r.task.as_str())) { (r.task) } }
                        td.state { (badge(r.status.as_str())) }
                        td.num {
                            @if let Some(n) = r.attempt {
                                a href=(links.attempt(run.id.as_str(), r.task.as_str(), n)) { "#" (n) }
                            } @else { "-" }
                        }
                        td { (r.agent.as_deref().unwrap_or("-")) }
                        td.num { (r.elapsed_ms.map_or("-".into(), text::duration)) }
                        td.num { (r.usage.tokens_cell()) }
                        td.num { @if r.attempt.is_some() { (r.usage.cost_text()) } @else { "-" } }
                        td.detail { (crate::gate::masking::mask_text(r.detail().unwrap_or_default())) }
                    }
                    @for c in &r.candidates {
                        tr.candidate {
                            td {} td { (badge(&c.state)) }
                            td.num { a href=(links.attempt(run.id.as_str(), r.task.as_str(), c.attempt)) { "#" (c.attempt) } }
                            td { (c.agent) } td {} td {} td {}
                            td.detail { (c.why.as_deref().unwrap_or_default()) }
                        }
                    }
                }
            }
        }
    }
}

/// The merge queue: what waits in landing order, the candidates the
/// integration gate judged (batches, bisections), what left and what
/// landed.
fn queue(ctx: &Ctx<'_>, run: &RunState, plan: &crate::plan::Plan, rows: &[TaskRow]) -> Markup {
    let links = ctx.links;
    let waiting: Vec<(&crate::ids::TaskId, &crate::state::AttemptState)> =
        crate::merge::queue::topo_order(plan)
            .into_iter()
            .filter(|id| {
                rows.iter()
                    .any(|r| r.task == *id && r.status == Status::Passed)
            })
            .filter_map(|id| {
                let (key, t) = run.tasks.get_key_value(&id)?;
                Some((key, t.current()?))
            })
            .collect();
    // A candidate gated right after a failing one holding more attempts,
    // which it starts like, is a step of the bisection of that batch.
    let mut judged = Vec::new();
    for (i, rec) in run.integration.iter().enumerate() {
        let kind = match i.checked_sub(1).map(|p| &run.integration[p]) {
            Some(prev)
                if prev.verdict.blocks()
                    && rec.attempts.len() < prev.attempts.len()
                    && prev.attempts.starts_with(&rec.attempts) =>
            {
                "bisection"
            }
            _ if rec.attempts.len() > 1 => "batch",
            _ => "single",
        };
        judged.push((rec, kind));
    }
    let left: Vec<(&crate::ids::TaskId, &crate::state::AttemptState)> = run
        .attempts()
        .filter(|(_, a)| a.landing_failure.is_some())
        .collect();
    let voided: Vec<&crate::state::Landing> = run.landings.iter().filter(|l| l.voided).collect();
    let landed: Vec<&crate::state::Landing> = run.landings.iter().filter(|l| !l.voided).collect();
    html! {
        h3 { "Waiting to land" }
        @if waiting.is_empty() {
            p.none { "Nothing waits." }
        } @else {
            ol.waiting {
                @for (task, a) in &waiting {
                    li data-task=(task) {
                        a href=(links.task(run.id.as_str(), task.as_str())) { (task) }
                        " attempt " (a.n)
                        @if !a.control_paths().is_empty() {
                            " — changes control path(s) " (a.control_paths().join(", "))
                            ": lands once a person approves its result"
                        }
                    }
                }
            }
        }
        h3 { "Candidates the integration gate judged" }
        @if judged.is_empty() {
            p.none { "None yet." }
        } @else {
            table.candidates {
                thead { tr { th { "candidate" } th { "kind" } th { "attempts" } th { "verdict" } th { "summary" } } }
                tbody {
                    @for (rec, kind) in &judged {
                        tr {
                            td { code { (text::short(&rec.candidate.to_string())) } }
                            td { (kind) @if *kind != "single" { " of " (rec.attempts.len()) } }
                            td { (rec.attempts.join(", ")) }
                            td { (badge(super::layout::verdict_state(&rec.verdict))) }
                            td { (crate::gate::masking::mask_text(&rec.verdict.summary)) }
                        }
                    }
                }
            }
        }
        h3 { "Left the queue" }
        @if left.is_empty() && voided.is_empty() {
            p.none { "Nothing left the queue." }
        } @else {
            ul.left {
                @for (task, a) in &left {
                    li {
                        a href=(links.task(run.id.as_str(), task.as_str())) { (task) }
                        " attempt " (a.n) ": "
                        @if let Some(f) = &a.landing_failure { (f.class.as_str()) ", " (crate::gate::masking::mask_text(&f.reason)) }
                        @if !a.landing_conflicts.is_empty() {
                            " (conflicts in " (a.landing_conflicts.join(", ")) ")"
                        }
                    }
                }
                @for l in &voided {
                    li { (l.task) " attempt " (l.attempt) ": its landing at " code { (text::short(&l.new.to_string())) }
                        " was voided (the target did not move to it); it waited again" }
                }
            }
        }
        h3 { "Landed" }
        @if landed.is_empty() {
            p.none { "Nothing landed yet." }
        } @else {
            table.landed {
                thead { tr { th { "task" } th { "attempt" } th { "target" } th { "commits" } } }
                tbody {
                    @for l in &landed {
                        tr data-task=(l.task) {
                            td { a href=(links.task(run.id.as_str(), l.task.as_str())) { (l.task) } }
                            td.num { "#" (l.attempt) }
                            td { (l.target) " → " a href=(links.commit(&l.new.to_string())) { code { (text::short(&l.new.to_string())) } } }
                            td { @for c in &l.commits { a.commit href=(links.commit(&c.to_string())) { code { (text::short(&c.to_string())) } } " " } }
                        }
                    }
                }
            }
        }
    }
}
