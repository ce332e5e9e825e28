//! The first page: every run, newest first, with its plan, state, task
//! counts, cost and tokens; and the stored plans.
//!
//! Runs are listed from the state index's briefs; only the runs of the
//! page shown are loaded (their records, from the cache), so a long
//! history costs one page of runs, not all of them.

use std::collections::HashMap;

use maud::{Markup, html};

use super::error::PageError;
use super::layout::{badge, page};
use super::reader::Ctx;
use super::text;
use crate::plan::revisions::{self, PlanRevision};
use crate::run::view::{self, RunStanding};

/// Runs per page.
pub const PER_PAGE: usize = 50;

/// The list of runs, page `page` (from 1).
pub fn render(ctx: &mut Ctx<'_>, page_no: usize) -> Result<Markup, PageError> {
    let mut briefs = ctx.index.all_briefs_lean()?;
    briefs.sort_by_key(|b| std::cmp::Reverse((b.started_ms, b.id.clone())));
    let pages = briefs.len().div_ceil(PER_PAGE).max(1);
    if page_no == 0 || page_no > pages {
        return Err(PageError::not_found(format!(
            "there is no page {page_no} of runs (there are {pages})"
        )));
    }
    let shown = &briefs[(page_no - 1) * PER_PAGE..briefs.len().min(page_no * PER_PAGE)];
    let mut plans: HashMap<String, Vec<PlanRevision>> = HashMap::new();
    let mut rows = Vec::new();
    for b in shown {
        let Some(run) = ctx.index.run(&b.id)?.cloned() else {
            continue;
        };
        if !plans.contains_key(run.plan_id.as_str()) {
            let revs = revisions::all(ctx.store, &run.plan_id).unwrap_or_default();
            plans.insert(run.plan_id.to_string(), revs);
        }
        let rev = plans[run.plan_id.as_str()]
            .iter()
            .find(|r| r.hash == run.plan_hash);
        let rows_of = rev.map(|r| view::task_rows(&run, &r.plan, crate::clock::now_ms()));
        let counts = rows_of
            .as_ref()
            .map(|rows| view::counts(rows.iter().map(|r| &r.status)))
            .unwrap_or_default();
        rows.push((run, counts));
    }
    let plan_ids = revisions::ids(ctx.store)?;
    let links = ctx.links;
    let body = html! {
        h1 { "Runs" }
        @if briefs.is_empty() {
            p { "No runs yet: " code { "git orch run <plan>" } " starts one." }
        } @else {
            table.runs {
                thead { tr {
                    th { "run" } th { "plan" } th { "target" } th { "started" }
                    th { "state" } th { "tasks" } th { "cost" } th { "tokens" }
                } }
                tbody {
                    @for (run, counts) in &rows {
                        @let standing = RunStanding::of(run);
                        @let usage = view::run_usage(run);
                        tr data-run=(run.id) {
                            td { a href=(links.run(run.id.as_str())) { (run.id) } }
                            td { a href=(links.plan(run.plan_id.as_str(), Some(run.revision))) {
                                (run.plan_id) " r" (run.revision) } }
                            td { (run.target) }
                            td { (text::time(run.started_ms)) }
                            td { (badge(standing_word(&standing))) }
                            td {
                                @for (s, n) in counts {
                                    span class={ "count s-" (s.as_str()) } { (n) " " (s.as_str()) } " "
                                }
                            }
                            td.num { (usage.cost_text()) }
                            td.num { (usage.tokens_cell()) }
                        }
                    }
                }
            }
            @if pages > 1 {
                p.pages {
                    @if page_no > 1 { a href=(links.runs(page_no - 1)) { "newer" } " " }
                    "page " (page_no) " of " (pages)
                    @if page_no < pages { " " a href=(links.runs(page_no + 1)) { "older" } }
                }
            }
        }
        h2 { "Plans" }
        @if plan_ids.is_empty() {
            p { "No stored plans: " code { "git orch plan add <file>" } " stores one." }
        } @else {
            ul.plans {
                @for id in &plan_ids {
                    li { a href=(links.plan(id.as_str(), None)) { (id) } }
                }
            }
        }
    };
    Ok(page(links, "Runs", &[], body))
}

/// `open`, `stopped` or `finished`.
pub fn standing_word(s: &RunStanding) -> &'static str {
    match s {
        RunStanding::Open => "open",
        RunStanding::Stopped { .. } => "stopped",
        RunStanding::Finished => "finished",
    }
}
