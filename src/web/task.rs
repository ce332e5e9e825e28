//! A task's page: its subtask as the plan states it, and every attempt side
//! by side (the candidates of a best-of-N round with the judgement and
//! why), each with its agent, model, timing, tokens, cost, gate verdicts
//! with their masked output, what its agent printed last, and the retry
//! context it was given. It follows the log live.

use maud::{Markup, html};

use super::error::PageError;
use super::layout::{badge, facts, live, output, page, verdicts};
use super::reader::Ctx;
use super::run::load;
use super::text;
use crate::event::{CandidateRank, Event};
use crate::ids::TaskId;
use crate::state::{AttemptState, Judged, RunState, TaskState};
use crate::store::log::Entry;

/// The whole page.
pub fn render(ctx: &mut Ctx<'_>, run: &str, task: &str) -> Result<Markup, PageError> {
    let state = load(ctx, run)?;
    let task = TaskId::new(task)?;
    let inner = fragment_of(ctx, &state, &task)?;
    let links = ctx.links;
    let here = links.task(state.id.as_str(), task.as_str());
    let body = html! {
        h1 { "Task " (task) " of run " (state.id) }
        (live(&links.live(&here), inner))
    };
    Ok(page(
        links,
        &format!("{} of run {}", task, state.id),
        &[
            (links.run(state.id.as_str()), state.id.to_string()),
            (here.clone(), task.to_string()),
        ],
        body,
    ))
}

/// The part that follows the log.
pub fn fragment(ctx: &mut Ctx<'_>, run: &str, task: &str) -> Result<Markup, PageError> {
    let state = load(ctx, run)?;
    let task = TaskId::new(task)?;
    fragment_of(ctx, &state, &task)
}

fn fragment_of(ctx: &mut Ctx<'_>, run: &RunState, task: &TaskId) -> Result<Markup, PageError> {
    let rev = crate::run::plan_of(ctx.store, run)?;
    let Some(sub) = rev.plan.subtask(task.as_str()) else {
        return Err(PageError::not_found(format!(
            "run {} has no task {task}",
            run.id
        )));
    };
    let rows = crate::run::view::task_rows(run, &rev.plan, crate::clock::now_ms());
    let row = rows.iter().find(|r| r.task == *task);
    let empty = TaskState::default();
    let t = run.tasks.get(task).unwrap_or(&empty);
    let entries: Vec<Entry> = ctx
        .index
        .entries_of(&run.id)?
        .into_iter()
        .filter(|e| e.record.event.task() == Some(task))
        .collect();
    let retry_from = ctx
        .store
        .project_config(Some(run.base))
        .ok()
        .and_then(|values| crate::config::Settings::from_values(&values).ok())
        .map(|s| s.retry_from)
        .unwrap_or(crate::config::RetryFrom::Auto);
    let links = ctx.links;
    let about = facts(&[
        (
            "state",
            html! {
                (badge(row.map_or("pending", |r| r.status.as_str())))
                @if let Some(d) = row.and_then(|r| r.detail()) { " " (crate::gate::masking::mask_text(d)) }
            },
        ),
        ("title", html! { (sub.title) }),
        (
            "owns",
            html! { @for g in &sub.owned_globs { code { (g) } " " } },
        ),
        (
            "depends on",
            html! {
                @if sub.depends_on.is_empty() { "nothing" }
                @for d in &sub.depends_on { a href=(links.task(run.id.as_str(), d.as_str())) { (d) } " " }
            },
        ),
        ("deliverable", html! { (sub.deliverable) }),
        ("verification", html! { code { (sub.verification) } }),
        (
            "usage",
            html! { @if let Some(r) = row { (r.usage.text()) } @else { "no agent ran" } },
        ),
    ]);
    Ok(html! {
        (about)
        h2 { "Attempts" }
        @if t.attempts.is_empty() {
            p.none {
                @if let Some(c) = &t.carried {
                    "Landed by run " a href=(links.run(c.run.as_str())) { (c.run) }
                    " (attempt " (c.attempt) "); this run does not run it again."
                } @else { "No attempt yet." }
            }
        } @else {
            div.attempts {
                @for a in &t.attempts {
                    (attempt_card(ctx, run, task, t, a, &entries, retry_from))
                }
            }
        }
    })
}

/// The ranking of the round `round` of `task`, from its judgement record.
fn ranking(entries: &[Entry], round: u32) -> Option<&[CandidateRank]> {
    entries.iter().find_map(|e| match &e.record.event {
        Event::CandidatesJudged {
            round: r, ranking, ..
        } if *r == round => Some(ranking.as_slice()),
        _ => None,
    })
}

/// What the agent of attempt `n` printed last (masked when it was
/// recorded, and again here).
fn agent_tail(entries: &[Entry], n: u32) -> Option<(&str, Option<&str>)> {
    entries.iter().find_map(|e| match &e.record.event {
        Event::AgentFinished {
            attempt,
            tail,
            cause,
            ..
        } if *attempt == n => Some((tail.as_str(), cause.as_deref())),
        _ => None,
    })
}

/// The retry context attempt `a` was given: rebuilt from the log as the
/// driver built it, from the task's state before `a` began.
fn retry_context(
    run: &RunState,
    task: &TaskId,
    t: &TaskState,
    a: &AttemptState,
    from: crate::config::RetryFrom,
) -> Option<String> {
    let mut before = run.clone();
    let mut earlier = t.clone();
    earlier.attempts.retain(|x| x.n < a.n);
    // A round judged after `a` began was not known to it.
    if let Some(c) = a.candidate {
        earlier.rounds.retain(|r, _| *r < c.round);
    }
    before.tasks.insert(task.clone(), earlier);
    crate::run::schedule::retry_context(&before, task, from).map(|c| c.render())
}

#[allow(clippy::too_many_arguments)]
fn attempt_card(
    ctx: &Ctx<'_>,
    run: &RunState,
    task: &TaskId,
    t: &TaskState,
    a: &AttemptState,
    entries: &[Entry],
    from: crate::config::RetryFrom,
) -> Markup {
    let links = ctx.links;
    let state = match (&a.judged, a.outcome) {
        _ if a.landed.is_some() => "landed",
        (_, None) => "running",
        (Some(Judged::Archived(_)), _) => "archived",
        (Some(Judged::Chosen), _) => "chosen",
        (None, Some(o)) => o.as_str(),
    };
    let usage = a.agent_run.as_ref().map(|r| &r.usage);
    let start = a.started.map_or(a.created_ms, |s| s.time_ms);
    let rank = a.candidate.and_then(|c| {
        ranking(entries, c.round).and_then(|r| {
            r.iter()
                .position(|x| x.attempt == a.n)
                .map(|i| (i + 1, &r[i]))
        })
    });
    let retry = retry_context(run, task, t, a, from);
    html! {
        section.attempt data-attempt=(a.n) data-state=(state) {
            h3 {
                a href=(links.attempt(run.id.as_str(), task.as_str(), a.n)) { "Attempt " (a.n) }
                " " (badge(state))
            }
            (facts(&[
                ("agent", html! { (a.agent) }),
                ("model", html! { (usage.and_then(|u| u.model.as_deref()).unwrap_or("not reported")) }),
                ("created", html! { (text::time(a.created_ms)) }),
                ("took", html! {
                    @if let Some(end) = a.finished_ms { (text::duration(end - start)) }
                    @else if a.started.is_some() { "running for " (text::duration(crate::clock::now_ms() - start)) }
                    @else { "not started" }
                }),
                ("tokens", html! {
                    @match usage {
                        Some(u) if u.input_tokens + u.output_tokens > 0 => {
                            (text::tokens(u.input_tokens)) " in, " (text::tokens(u.output_tokens)) " out"
                        }
                        Some(_) => { "not reported" }
                        None => { "-" }
                    }
                }),
                ("cost", html! {
                    @match usage.map(|u| (u.cost_usd, u.cost_source.as_deref())) {
                        Some((Some(c), Some("estimated"))) => { "~" (crate::agent::price::usd(c)) }
                        Some((Some(c), _)) => { (crate::agent::price::usd(c)) }
                        Some((None, _)) => { "unknown" }
                        None => { "-" }
                    }
                }),
                ("branch", html! { code { (a.branch) } @if a.branch_removed { " (removed)" } }),
                ("base", html! { code { (text::short(&a.base.to_string())) } }),
                ("result", html! {
                    @if let Some(r) = &a.result {
                        a href=(links.attempt(run.id.as_str(), task.as_str(), a.n)) { code { (text::short(&r.commit.to_string())) } }
                        " (" (r.changed) " paths changed)"
                    } @else { "none" }
                }),
            ]))
            @if let Some(c) = a.candidate {
                div.judgement {
                    h4 { "Candidate of round " (c.round) " (" (c.of) " candidates)" }
                    @match &a.judged {
                        Some(Judged::Chosen) => { p { "Chosen to land." } }
                        Some(Judged::Archived(why)) => { p { "Not chosen: " (why) } }
                        None => { p { "Not judged yet." } }
                    }
                    @if let Some((place, r)) = rank {
                        p {
                            "Ranked " (place) ": " (r.why)
                            @if let Some(d) = r.decided_by { " (decided by " (format!("{d:?}").to_lowercase()) ")" }
                            "; passed gates: " (if r.passed { "yes" } else { "no" })
                            ", reviewer: " (if r.reviewer_ok { "ok" } else { "rejected" })
                            ", " (r.changed_lines) " lines changed"
                        }
                    }
                }
            }
            @if let Some(f) = a.effective_failure() {
                p.failure { (badge(f.class.as_str())) " " (crate::gate::masking::mask_text(&f.reason)) }
            }
            @if !a.verdicts.is_empty() {
                h4 { "Gate verdicts" }
                (verdicts(&a.verdicts))
            }
            @if !a.regated.is_empty() {
                h4 { "Verdicts of a later " code { "git orch gate" } }
                (verdicts(&a.regated))
            }
            @if !a.landing_verdicts.is_empty() {
                h4 { "Integration verdicts when it tried to land" }
                (verdicts(&a.landing_verdicts))
            }
            @if !a.landing_hunks.is_empty() {
                h4 { "Conflicting hunks" }
                (output(&a.landing_hunks.join("\n")))
            }
            @if let Some((tail, cause)) = agent_tail(entries, a.n) {
                h4 { "What the agent printed last" }
                @if let Some(c) = cause { p.cause { (crate::gate::masking::mask_text(c)) } }
                (output(tail))
            }
            @if let Some(ctx_text) = &retry {
                h4 { "Retry context it was given" }
                (output(ctx_text))
            }
        }
    }
}
