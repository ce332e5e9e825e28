//! A plan's task graph as an SVG picture: one column per wave (a task
//! stands right of everything it depends on), one box per task coloured by
//! its state, an arrow per dependency. Laid out here, on the server, so the
//! page needs no script to draw it.

use std::collections::BTreeMap;

use maud::{Markup, html};

/// One task of the graph.
#[derive(Debug, Clone)]
pub struct Node {
    pub id: String,
    pub title: String,
    pub depends_on: Vec<String>,
    /// Its state, one word (`done`, `running`, …): the box's colour.
    pub state: String,
    pub href: String,
}

const BOX_W: i64 = 170;
const BOX_H: i64 = 40;
const GAP_X: i64 = 60;
const GAP_Y: i64 = 16;
const PAD: i64 = 8;

/// Each node's column: 0 for a task with no dependency, else one more than
/// its deepest dependency. Dependencies on unknown ids are ignored, and a
/// cycle (which a stored plan cannot have) stops deepening at the number
/// of nodes.
pub fn columns(nodes: &[Node]) -> Vec<usize> {
    let index: BTreeMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.id.as_str(), i))
        .collect();
    let mut col = vec![0usize; nodes.len()];
    for _ in 0..nodes.len() {
        let mut changed = false;
        for (i, n) in nodes.iter().enumerate() {
            let want = n
                .depends_on
                .iter()
                .filter_map(|d| index.get(d.as_str()))
                .map(|&j| col[j] + 1)
                .max()
                .unwrap_or(0)
                .min(nodes.len());
            if want != col[i] {
                col[i] = want;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    col
}

/// The picture of `nodes`.
pub fn svg(nodes: &[Node]) -> Markup {
    let col = columns(nodes);
    let mut rows_in: BTreeMap<usize, usize> = BTreeMap::new();
    let mut place: Vec<(i64, i64)> = Vec::with_capacity(nodes.len());
    for c in &col {
        let row = rows_in.entry(*c).or_default();
        place.push((
            PAD + *c as i64 * (BOX_W + GAP_X),
            PAD + *row as i64 * (BOX_H + GAP_Y),
        ));
        *row += 1;
    }
    let columns_used = rows_in.len().max(1) as i64;
    let rows_used = rows_in.values().copied().max().unwrap_or(1).max(1) as i64;
    let width = 2 * PAD + columns_used * BOX_W + (columns_used - 1) * GAP_X;
    let height = 2 * PAD + rows_used * BOX_H + (rows_used - 1) * GAP_Y;
    let at: BTreeMap<&str, (i64, i64)> = nodes
        .iter()
        .zip(&place)
        .map(|(n, p)| (n.id.as_str(), *p))
        .collect();
    html! {
        svg.dag xmlns="http://www.w3.org/2000/svg" role="img"
            aria-label="task graph" width=(width) height=(height)
            viewBox={ "0 0 " (width) " " (height) } {
            defs {
                marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5"
                    markerWidth="7" markerHeight="7" orient="auto-start-reverse" {
                    path d="M 0 0 L 10 5 L 0 10 z" {}
                }
            }
            @for (n, (x, y)) in nodes.iter().zip(&place) {
                @for d in &n.depends_on {
                    @if let Some((dx, dy)) = at.get(d.as_str()) {
                        @let (x1, y1) = (dx + BOX_W, dy + BOX_H / 2);
                        @let (x2, y2) = (*x, y + BOX_H / 2);
                        path.edge marker-end="url(#arrow)"
                            d={ "M " (x1) " " (y1) " C " ((x1 + x2) / 2) " " (y1) ", "
                                ((x1 + x2) / 2) " " (y2) ", " (x2) " " (y2) } {}
                    }
                }
            }
            @for (n, (x, y)) in nodes.iter().zip(&place) {
                a href=(n.href) data-node=(n.id) {
                    title { (n.id) ": " (n.title) " (" (n.state) ")" }
                    rect class={ "node s-" (n.state) } x=(x) y=(y) width=(BOX_W) height=(BOX_H) rx="6" {}
                    text x=(x + 10) y=(y + 17) { (clip(&n.id, 22)) }
                    text.state x=(x + 10) y=(y + 32) { (n.state) }
                }
            }
        }
    }
}

/// `s` cut to `n` characters, with an ellipsis when cut.
fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        let mut out: String = s.chars().take(n - 1).collect();
        out.push('…');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, deps: &[&str]) -> Node {
        Node {
            id: id.into(),
            title: format!("<b>{id}</b>"),
            depends_on: deps.iter().map(|d| d.to_string()).collect(),
            state: "pending".into(),
            href: format!("/t/{id}"),
        }
    }

    #[test]
    fn a_task_stands_right_of_its_deepest_dependency() {
        let nodes = [
            node("d", &["b", "c"]),
            node("a", &[]),
            node("b", &["a"]),
            node("c", &["a", "ghost"]),
            node("e", &[]),
        ];
        assert_eq!(columns(&nodes), vec![2, 0, 1, 1, 0]);
    }

    #[test]
    fn a_cycle_ends_instead_of_looping() {
        let nodes = [node("a", &["b"]), node("b", &["a"])];
        assert!(columns(&nodes).iter().all(|c| *c <= 2));
    }

    #[test]
    fn titles_are_escaped_in_the_picture() {
        let out = svg(&[node("a", &[]), node("b", &["a"])]).into_string();
        assert!(out.contains("&lt;b&gt;a&lt;/b&gt;"), "{out}");
        assert!(!out.contains("<b>"), "{out}");
        assert_eq!(out.matches("class=\"edge\"").count(), 1, "{out}");
    }
}
