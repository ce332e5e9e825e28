//! An attempt's diff against its base, file by file, each file with the
//! scope gate's view of it: owned by the subtask, a pinch point, a control
//! path its globs must name, or out of scope.
//!
//! Blobs are read from the object database (no worktree is needed; the
//! attempt's may be gone). Every line is masked as the gates mask output,
//! so a secret an attempt leaked is not shown here either. Big and binary
//! files are named, not shown.

use maud::{Markup, html};

use super::error::PageError;
use super::layout::{badge, facts, page};
use super::reader::Ctx;
use super::run::load;
use super::text;
use crate::ids::TaskId;
use crate::plan::glob::Ownership;
use crate::store::objects::PathChange;
use crate::store::{Oid, Store};

/// Blobs larger than this are named, not shown.
const SHOWN_BYTES: u64 = 1024 * 1024;
/// Lines of one file's diff shown at most.
const SHOWN_LINES: usize = 3000;

/// How the scope gate sees one changed path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    /// Inside the subtask's owned globs (its `!` exclusions applied).
    pub owned: bool,
    /// A control path that the globs match but do not name: the scope
    /// gate refuses it all the same.
    pub unnamed_control: bool,
    /// A control path.
    pub control: bool,
    /// A pinch point of the base tree's rules.
    pub pinch: bool,
}

impl Scope {
    /// The words the page shows, first the verdict.
    pub fn labels(&self) -> Vec<&'static str> {
        let mut out = vec![if !self.owned {
            "out of scope"
        } else if self.unnamed_control {
            "control path its globs do not name"
        } else {
            "owned"
        }];
        if self.control {
            out.push("control path");
        }
        if self.pinch {
            out.push("pinch point");
        }
        out
    }

    /// Whether the scope gate passes this path.
    pub fn passes(&self) -> bool {
        self.owned && !self.unnamed_control
    }
}

/// The scope of each of `paths` for a subtask owning `owned`, with the
/// pinch points `points` of the base.
pub fn scopes(
    owned: &[String],
    paths: &[String],
    points: &[crate::plan::pinch::PinchPoint],
) -> Vec<Scope> {
    let ownership = Ownership::new(owned).ok();
    paths
        .iter()
        .map(|p| {
            let owned = ownership.as_ref().is_some_and(|o| o.is_owned(p));
            let control = crate::plan::control::control_path(p).is_some();
            let named = ownership
                .as_ref()
                .is_some_and(|o| crate::plan::control::named_by(o.includes(), p));
            Scope {
                owned,
                unnamed_control: owned && control && !named,
                control,
                pinch: points
                    .iter()
                    .any(|pt| pt.unit == *p || p.starts_with(&format!("{}/", pt.unit))),
            }
        })
        .collect()
}

/// The whole page.
pub fn render(ctx: &mut Ctx<'_>, run: &str, task: &str, n: u32) -> Result<Markup, PageError> {
    let state = load(ctx, run)?;
    let task = TaskId::new(task)?;
    let a = state
        .tasks
        .get(&task)
        .and_then(|t| t.attempts.iter().find(|a| a.n == n))
        .cloned()
        .ok_or_else(|| {
            PageError::not_found(format!("run {} has no attempt {n} of {task}", state.id))
        })?;
    let rev = crate::run::plan_of(ctx.store, &state)?;
    let owned = rev
        .plan
        .subtask(task.as_str())
        .map(|s| s.owned_globs.clone())
        .unwrap_or_default();
    let store = ctx.store;
    let links = ctx.links;
    let trail = [
        (links.run(state.id.as_str()), state.id.to_string()),
        (
            links.task(state.id.as_str(), task.as_str()),
            task.to_string(),
        ),
        (
            links.attempt(state.id.as_str(), task.as_str(), n),
            format!("attempt {n}"),
        ),
    ];
    let title = format!("attempt {n} of {task}");
    let Some(result) = &a.result else {
        let body = html! {
            h1 { "Attempt " (n) " of " (task) }
            p.none { "This attempt has no result commit (yet): nothing to compare." }
        };
        return Ok(page(links, &title, &trail, body));
    };
    let (base, head) = (a.base, result.commit);
    let base_info = store.commit_info(base)?;
    let head_info = store.commit_info(head)?;
    let changes = store.diff_trees(base_info.tree, head_info.tree)?;
    let settings = store
        .project_config(Some(base))
        .ok()
        .and_then(|v| crate::config::Settings::from_values(&v).ok())
        .unwrap_or_default();
    let rules = crate::plan::pinch::rules(&settings.pinch_paths, &settings.pinch_ignore);
    let paths: Vec<String> = changes.iter().map(|c| c.path.clone()).collect();
    let points = crate::plan::pinch::present(&paths, &rules);
    let scope = scopes(&owned, &paths, &points);
    let outside = scope.iter().filter(|s| !s.passes()).count();
    let body = html! {
        h1 { "Attempt " (n) " of " (task) }
        (facts(&[
            ("base", html! { code { (text::short(&a.base.to_string())) } }),
            ("result", html! { code { (text::short(&result.commit.to_string())) } " on branch " code { (a.branch) } }),
            ("owned globs", html! { @for g in &owned { code { (g) } " " } }),
            ("scope", html! {
                @if outside == 0 { (badge("pass")) " every changed path is in scope" }
                @else { (badge("fail")) " " (outside) " of " (paths.len()) " changed path(s) out of scope" }
            }),
        ]))
        h2 { (changes.len()) " changed file(s)" }
        ul.files {
            @for (i, (c, s)) in changes.iter().zip(&scope).enumerate() {
                li {
                    a href={ "#f" (i) } { code { (c.path) } }
                    " " @for l in s.labels() { span class={ "scope " (scope_class(l)) } { (l) } " " }
                }
            }
        }
        @for (i, (c, s)) in changes.iter().zip(&scope).enumerate() {
            section.file id={ "f" (i) } data-path=(c.path) data-scope=(s.labels()[0]) {
                h3 {
                    code { (c.path) } " "
                    @for l in s.labels() { span class={ "scope " (scope_class(l)) } { (l) } " " }
                    span.change { (change_word(c)) }
                }
                (file_diff(store, c))
            }
        }
    };
    Ok(page(links, &title, &trail, body))
}

fn scope_class(label: &str) -> &'static str {
    match label {
        "owned" => "owned",
        "out of scope" => "outside",
        "pinch point" => "pinch",
        _ => "control",
    }
}

fn change_word(c: &PathChange) -> &'static str {
    match (c.old, c.new) {
        (None, _) => "added",
        (_, None) => "deleted",
        _ => "modified",
    }
}

/// The text of a blob for the diff, or why it is not shown.
fn blob_text(store: &Store, id: Option<Oid>) -> Result<Result<String, &'static str>, PageError> {
    let Some(id) = id else {
        return Ok(Ok(String::new()));
    };
    if store.object_size(id)? > SHOWN_BYTES {
        return Ok(Err("too large to show"));
    }
    let bytes = store.read_blob(id)?;
    if bytes[..bytes.len().min(8000)].contains(&0) {
        return Ok(Err("binary"));
    }
    Ok(Ok(String::from_utf8_lossy(&bytes).into_owned()))
}

/// One file's hunks, every line masked.
fn file_diff(store: &Store, c: &PathChange) -> Markup {
    if c.submodule {
        return html! { p.none { "submodule: "
        code { (c.old.map(|o| o.to_string()).unwrap_or_default()) } " → "
        code { (c.new.map(|o| o.to_string()).unwrap_or_default()) } } };
    }
    let (old, new) = match (blob_text(store, c.old), blob_text(store, c.new)) {
        (Ok(Ok(o)), Ok(Ok(n))) => (o, n),
        (Ok(Err(why)), _) | (_, Ok(Err(why))) => {
            return html! { p.none { "Not shown: " (why) "." } };
        }
        (Err(e), _) | (_, Err(e)) => return html! { p.none { "Not shown: " (e.message) } },
    };
    let diff = similar::TextDiff::from_lines(&old, &new);
    let mask = crate::gate::masking::line_filter();
    let mut shown = 0usize;
    let mut cut = 0usize;
    let mut hunks = Vec::new();
    for group in diff.grouped_ops(3) {
        let mut lines = Vec::new();
        for op in &group {
            for change in diff.iter_changes(op) {
                if shown >= SHOWN_LINES {
                    cut += 1;
                    continue;
                }
                shown += 1;
                let (class, sign) = match change.tag() {
                    similar::ChangeTag::Insert => ("add", "+"),
                    similar::ChangeTag::Delete => ("del", "-"),
                    similar::ChangeTag::Equal => ("ctx", " "),
                };
                let text = change.value().trim_end_matches(['\n', '\r']);
                lines.push((
                    class,
                    sign,
                    mask(text),
                    change.old_index(),
                    change.new_index(),
                ));
            }
        }
        hunks.push(lines);
    }
    html! {
        @if c.symlink { p.none { "symbolic link (its target is the text)" } }
        @for hunk in &hunks {
            table.diff {
                @for (class, sign, text, o, n) in hunk {
                    tr class=(class) {
                        td.ln { (o.map(|x| (x + 1).to_string()).unwrap_or_default()) }
                        td.ln { (n.map(|x| (x + 1).to_string()).unwrap_or_default()) }
                        td.code { span.sign { (sign) } (text) }
                    }
                }
            }
        }
        @if cut > 0 { p.none { "… " (cut) " more line(s) not shown." } }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scope_view_matches_the_gate_s_rules() {
        let owned = vec!["src/a/**".to_owned(), "!src/a/vendor/**".to_owned()];
        let paths: Vec<String> = [
            "src/a/x.rs",
            "src/a/vendor/y.rs",
            "src/b/z.rs",
            "src/a/.github/workflows/ci.yml",
        ]
        .map(String::from)
        .to_vec();
        let s = scopes(&owned, &paths, &[]);
        assert_eq!(s[0].labels(), ["owned"]);
        assert_eq!(s[1].labels(), ["out of scope"]);
        assert_eq!(s[2].labels(), ["out of scope"]);
        assert!(s[0].passes() && !s[1].passes() && !s[2].passes());
        let points = [crate::plan::pinch::PinchPoint {
            unit: "src/a".into(),
            kind: crate::plan::pinch::PinchKind::Custom,
        }];
        assert!(scopes(&owned, &paths, &points)[0].pinch);
    }
}
