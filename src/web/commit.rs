//! A landed commit's provenance: what `git orch verify` says of it (landed
//! by git-orch from which run, task and attempt, under which approval, its
//! gates and the integration gate passed), with links to them, and the
//! note git-orch keeps on it.

use maud::{Markup, html};

use super::error::PageError;
use super::layout::{badge, facts, page};
use super::reader::Ctx;
use super::text;

/// The page of commit `hex` (a full object id).
pub fn render(ctx: &mut Ctx<'_>, hex: &str) -> Result<Markup, PageError> {
    if !text::is_object_id(hex) {
        return Err(PageError::bad_request(format!(
            "{hex:?} is not a full commit id"
        )));
    }
    let store = ctx.store;
    let id = store
        .parse_oid(hex)
        .map_err(|_| PageError::bad_request(format!("{hex:?} is not a commit id")))?;
    let info = store
        .commit_info(id)
        .map_err(|_| PageError::not_found(format!("no commit {hex} in this repository")))?;
    let require_signed = store
        .config_get("orch.requireSignedApprovals")?
        .is_some_and(|v| v == "true");
    let v = crate::merge::verify::verify_with(store, ctx.index, &[id], require_signed)?
        .into_iter()
        .next()
        .ok_or_else(|| PageError::internal("verify gave no answer"))?;
    let note = store.note(id)?;
    let links = ctx.links;
    let subject = info.message.lines().next().unwrap_or_default().to_owned();
    let body = html! {
        h1 { "Commit " code { (text::short(hex)) } }
        p.verdict data-ok=(v.ok) {
            (badge(if v.ok { "verified" } else { "not-verified" })) " " (v.reason)
        }
        (facts(&[
            ("commit", html! { code { (hex) } }),
            ("subject", html! { (subject) }),
            ("author", html! { (info.author_name) " at " (text::time(info.author_time * 1000)) }),
            ("run", html! {
                @if let Some(r) = &v.run { a href=(links.run(r)) { (r) } } @else { "-" }
            }),
            ("task", html! {
                @match (&v.run, &v.task, v.attempt) {
                    (Some(r), Some(t), Some(n)) => {
                        a href=(links.task(r, t)) { (t) } ", "
                        a href=(links.attempt(r, t, n)) { "attempt " (n) }
                    }
                    _ => { "-" }
                }
            }),
            ("branch", html! { (v.branch.as_deref().unwrap_or("-")) }),
        ]))
        @if let Some(n) = note {
            h2 { "Note (refs/notes/orch)" }
            pre.output { (crate::gate::masking::mask_text(&n)) }
        }
    };
    Ok(page(
        links,
        &format!("commit {}", text::short(hex)),
        &[(links.commit(hex), format!("commit {}", text::short(hex)))],
        body,
    ))
}
