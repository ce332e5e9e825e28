//! A plan's page: its revisions, the revision shown (its subtasks), the
//! analysis `git orch plan check` makes of it against its target (waves,
//! findings such as ownership overlaps, serial subtasks, pinch points),
//! the latest decision on it with the hash it is bound to and whether it
//! still holds, and the runs of the plan.

use maud::{Markup, html};

use super::error::PageError;
use super::layout::{badge, facts, page};
use super::reader::Ctx;
use super::text;
use crate::ids::PlanId;
use crate::plan::Severity;
use crate::plan::revisions;

/// The page of plan `id` at revision `rev` (default: the newest).
pub fn render(ctx: &mut Ctx<'_>, id: &str, rev: Option<u32>) -> Result<Markup, PageError> {
    let id = PlanId::new(id)?;
    let all = revisions::all(ctx.store, &id)?;
    if all.is_empty() {
        return Err(PageError::not_found(format!("no stored plan {id}")));
    }
    let shown = match rev {
        Some(n) => all
            .iter()
            .find(|r| r.revision == n)
            .ok_or_else(|| PageError::not_found(format!("plan {id} has no revision {n}")))?,
        None => all.iter().max_by_key(|r| r.revision).expect("not empty"),
    };
    let review = crate::approval::review(ctx.store, &shown.plan, None)
        .map_err(|e| PageError::internal(e.to_string()))?;
    let decision = crate::approval::latest(ctx.store, &id)?;
    let require_signed = ctx
        .store
        .config_get("orch.requireSignedApprovals")?
        .is_some_and(|v| v == "true");
    let index = &mut *ctx.index;
    let verdict = crate::approval::verify(ctx.store, &id, require_signed, &mut |c| {
        index
            .decision_recorded(&c.to_string(), &id)
            .unwrap_or(false)
    })?;
    let mut runs: Vec<crate::state::RunBrief> = ctx
        .index
        .all_briefs_lean()?
        .into_iter()
        .filter(|b| b.plan_id == id)
        .collect();
    runs.sort_by_key(|b| std::cmp::Reverse(b.started_ms));
    let links = ctx.links;
    let a = &review.analysis;
    let explain = verdict.explain();
    let body = html! {
        h1 { "Plan " (id) " revision " (shown.revision) }
        (facts(&[
            ("instruction", html! { (shown.plan.instruction) }),
            ("hash", html! { code { (shown.hash) } }),
            ("commit", html! { code { (text::short(&shown.commit.to_string())) } }),
            ("target", html! { (shown.plan.target.as_deref().unwrap_or("the run's target")) }),
            ("revisions", html! {
                @for r in &all {
                    @if r.revision == shown.revision { strong { (r.revision) } " " }
                    @else { a href=(links.plan(id.as_str(), Some(r.revision))) { (r.revision) } " " }
                }
            }),
        ]))
        h2 { "Approval" }
        @match &decision {
            None => { p.none { "No decision recorded." } }
            Some(d) => {
                (facts(&[
                    ("decision", html! { (badge(match d.approval.decision {
                        crate::event::Decision::Approve => "approved",
                        crate::event::Decision::Revise => "revise",
                    })) " by " (d.approval.approver) " at " (text::time(d.approval.time_ms)) }),
                    ("revision", html! { (d.approval.revision) }),
                    ("bound to hash", html! { code { (d.approval.plan_hash) } }),
                    ("commit", html! { code { (d.commit.to_string()) } @if d.signed { " (signed)" } }),
                    ("note", html! { (d.approval.note.as_deref().unwrap_or("-")) }),
                ]))
            }
        }
        p.verdict {
            (badge(if verdict.is_valid() { "valid" } else { "not-valid" })) " "
            @for (i, line) in explain.lines().enumerate() {
                @if i > 0 { br; span.hint { (line) } } @else { (line) }
            }
        }
        h2 { "Subtasks" }
        table.subtasks {
            thead { tr { th { "id" } th { "title" } th { "owns" } th { "after" } th { "verification" } } }
            tbody {
                @for s in &shown.plan.subtasks {
                    tr data-task=(s.id) {
                        td { (s.id) @if s.serial_only { " (serial)" } }
                        td { (s.title) }
                        td { @for g in &s.owned_globs { code { (g) } " " } }
                        td { @for d in &s.depends_on { (d) " " } }
                        td { code { (s.verification) } }
                    }
                }
            }
        }
        h2 { "Analysis" }
        p { "Checked against " (review.base_name)
            @if let Some(b) = review.base { " (" code { (text::short(&b.to_string())) } ")" }
            ": " (a.paths_checked) " paths; " (a.blocking()) " blocking, " (a.warnings()) " warning(s)." }
        @if !a.waves.is_empty() {
            h3 { "Waves" }
            ol.waves { @for w in &a.waves { li { (w.join(", ")) } } }
        }
        @if !a.serial.is_empty() { p { "Serial: " (a.serial.join(", ")) } }
        p { "Independent: " (a.independent.len()) @if !a.independent.is_empty() { " (" (a.independent.join(", ")) ")" } }
        @if !a.findings.is_empty() {
            h3 { "Findings" }
            ul.findings {
                @for f in &a.findings {
                    li data-code=(f.code) {
                        (badge(match f.severity {
                            Severity::Blocking => "blocking",
                            Severity::Warning => "warning",
                            Severity::Info => "info",
                        }))
                        " " code { (f.code) } " " (f.message)
                    }
                }
            }
        }
        @if !a.pinch_points.is_empty() {
            h3 { "Pinch points (" (a.pinch_points.len()) ")" }
            ul.pinch {
                @for p in a.pinch_points.iter().take(100) { li { code { (p.unit) } " " (p.kind.describe()) } }
            }
        }
        h2 { "Runs of this plan" }
        @if runs.is_empty() { p.none { "None." } }
        ul.runs {
            @for b in &runs {
                li { a href=(links.run(b.id.as_str())) { (b.id) } " started " (text::time(b.started_ms))
                    " " (badge(if b.finished { "finished" } else { "open" })) }
            }
        }
    };
    Ok(page(
        links,
        &format!("plan {id}"),
        &[(links.plan(id.as_str(), None), format!("plan {id}"))],
        body,
    ))
}
