//! The frame of every page and the pieces several pages show: a state
//! badge, a table of gate verdicts, a block of (masked) output.
//!
//! Everything goes through maud's `html!`, which escapes every value it
//! splices in; nothing here builds HTML from strings. Output an agent or a
//! gate wrote is masked again on the way out (`gate::masking`), as the
//! terminal shows it, whatever a log from another clone holds.

use maud::{DOCTYPE, Markup, html};

use super::href::Links;
use crate::event::Verdict;
use crate::gate::masking::mask_text;

/// A whole page: `title`, a trail of links back up, and `body`.
pub fn page(links: &Links, title: &str, trail: &[(String, String)], body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="referrer" content="no-referrer";
                title { (title) " · git orch web" }
                link rel="stylesheet" href=(links.asset("style.css"));
                script src=(links.asset("app.js")) defer {}
            }
            body {
                header {
                    nav {
                        a.home href=(links.runs(1)) { "git orch" }
                        @for (href, label) in trail {
                            span.sep { "/" }
                            a href=(href) { (label) }
                        }
                    }
                }
                main { (body) }
                footer { "read-only view of this repository's refs/orch; nothing here changes it" }
            }
        }
    }
}

/// The block of a page that follows the log: replaced whole by what the
/// stream at `stream` sends.
pub fn live(stream: &str, inner: Markup) -> Markup {
    html! {
        div.live data-live=(stream) { (inner) }
    }
}

/// A state as a coloured word.
pub fn badge(state: &str) -> Markup {
    html! { span class={ "badge s-" (state) } { (state) } }
}

/// Output an agent or gate wrote, masked, in a scrolling block.
pub fn output(text: &str) -> Markup {
    html! {
        @if !text.trim().is_empty() {
            pre.output { (mask_text(text)) }
        }
    }
}

/// Gate verdicts: gate, mode, status, what it said, how long, and its
/// output under it.
pub fn verdicts(list: &[Verdict]) -> Markup {
    html! {
        table.verdicts {
            thead { tr { th { "gate" } th { "mode" } th { "verdict" } th { "summary" } th { "time" } } }
            tbody {
                @for v in list {
                    tr data-gate=(v.gate) {
                        td { (v.gate) @if let Some(c) = &v.command { br; code { (mask_text(c)) } } }
                        td { (v.mode.as_str()) }
                        td { (badge(verdict_state(v))) }
                        td { (mask_text(&v.summary)) }
                        td.num { (super::text::duration(v.duration_ms as i64)) }
                    }
                    @if !v.tail.trim().is_empty() {
                        tr.tail { td colspan="5" { (output(&v.tail)) } }
                    }
                }
            }
        }
    }
}

/// A verdict's status as one word; a reused verdict says whether the one
/// it reuses passed.
pub fn verdict_state(v: &Verdict) -> &'static str {
    match (v.status, v.cached_pass) {
        (crate::event::GateStatus::Cached, Some(true)) => "pass",
        (crate::event::GateStatus::Cached, Some(false)) => "fail",
        (s, _) => s.as_str(),
    }
}

/// A definition list of label → value rows.
pub fn facts(rows: &[(&str, Markup)]) -> Markup {
    html! {
        dl.facts {
            @for (label, value) in rows {
                dt { (label) }
                dd { (value) }
            }
        }
    }
}
