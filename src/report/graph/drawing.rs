//! The topology drawn as SVG: nodes in columns by their hops from the first
//! host (where measurements usually start; each further part of the graph
//! after the last column), a box per node with its name, kind and
//! addresses; links as lines with their interfaces, softwires and VPN
//! sessions dashed with their name.

use super::{link_label, tunnel_edges};
use crate::report::draw::{Anchor, Canvas, Text, esc, text_width};
use crate::topology::{NodeKind, Topology};
use std::collections::VecDeque;
use std::fmt::Write;

const COL_GAP: f64 = 110.0;
const ROW_GAP: f64 = 28.0;
const MARGIN: f64 = 20.0;

/// Where each node's box goes.
struct Layout {
    /// Each node's top-left corner.
    pos: Vec<(f64, f64)>,
    box_w: f64,
    box_h: Vec<f64>,
    width: f64,
    height: f64,
}

impl Layout {
    fn centre(&self, i: usize) -> (f64, f64) {
        (
            self.pos[i].0 + self.box_w / 2.0,
            self.pos[i].1 + self.box_h[i] / 2.0,
        )
    }
}

pub(super) fn svg(t: &Topology) -> String {
    let lines: Vec<Vec<String>> = (0..t.nodes.len()).map(|i| node_lines(t, i)).collect();
    let at = layout(t, &lines);
    let mut c = Canvas::new();
    c.raw(&format!(
        r##"<text x="{MARGIN}" y="22" font-size="14" font-weight="bold" fill="#222222">{}</text>"##,
        esc(t.description.as_deref().unwrap_or(&t.name))
    ));
    for l in &t.links {
        let label = format!(
            "{}:{} -- {}:{} ({})",
            t.nodes[l.a.node].name,
            l.a.iface,
            t.nodes[l.b.node].name,
            l.b.iface,
            link_label(l)
        );
        edge(&mut c, &at, (l.a.node, l.b.node), &label, false);
    }
    let index = |name: &str| t.nodes.iter().position(|x| x.name == name);
    for (label, a, b) in tunnel_edges(t) {
        if let (Some(a), Some(b)) = (index(&a), index(&b)) {
            edge(&mut c, &at, (a, b), &label, true);
        }
    }
    for (i, node_lines) in lines.iter().enumerate() {
        node(&mut c, &at, i, t.nodes[i].kind, node_lines);
    }
    c.finish(r#" class="topology""#, at.width, at.height, &t.name)
        .svg
}

/// A node's name, kind and addresses, a line each.
fn node_lines(t: &Topology, i: usize) -> Vec<String> {
    let nd = &t.nodes[i];
    let mut v = vec![nd.name.clone(), format!("({})", nd.kind)];
    v.extend(nd.addresses.iter().map(|a| a.to_string()));
    v
}

/// Every node's column: its hops from the first host, then from the first
/// node of each part of the graph not reached yet, after the last column.
/// Returns the columns and how many there are.
fn columns(t: &Topology) -> (Vec<usize>, usize) {
    let n = t.nodes.len();
    let mut column = vec![usize::MAX; n];
    let mut next = 0;
    let first_host = t
        .nodes
        .iter()
        .position(|x| x.kind == NodeKind::Host)
        .unwrap_or(0);
    let order = std::iter::once(first_host).chain((0..n).filter(|&i| i != first_host));
    for start in order {
        if column[start] != usize::MAX {
            continue;
        }
        column[start] = next;
        let mut queue = VecDeque::from([start]);
        while let Some(i) = queue.pop_front() {
            for l in &t.links {
                let other = match (l.a.node == i, l.b.node == i) {
                    (true, _) => l.b.node,
                    (_, true) => l.a.node,
                    _ => continue,
                };
                if column[other] == usize::MAX {
                    column[other] = column[i] + 1;
                    queue.push_back(other);
                }
            }
        }
        next = column
            .iter()
            .filter(|c| **c != usize::MAX)
            .max()
            .map_or(0, |m| m + 1);
    }
    (column, next)
}

/// Boxes as wide as the widest line, stacked per column.
fn layout(t: &Topology, lines: &[Vec<String>]) -> Layout {
    let (column, columns) = columns(t);
    let box_w = lines
        .iter()
        .flatten()
        .map(|l| text_width(l, 11.0))
        .fold(90.0, f64::max)
        + 16.0;
    let box_h: Vec<f64> = lines.iter().map(|l| l.len() as f64 * 14.0 + 10.0).collect();
    let mut pos = vec![(0.0, 0.0); lines.len()];
    let mut col_y = vec![MARGIN + 24.0; columns.max(1)];
    for (i, &c) in column.iter().enumerate() {
        pos[i] = (MARGIN + c as f64 * (box_w + COL_GAP), col_y[c]);
        col_y[c] += box_h[i] + ROW_GAP;
    }
    let width = (MARGIN * 2.0 + columns.max(1) as f64 * (box_w + COL_GAP) - COL_GAP).ceil();
    let height = (col_y.iter().copied().fold(0.0, f64::max) + MARGIN).ceil();
    Layout {
        pos,
        box_w,
        box_h,
        width,
        height,
    }
}

/// A line between the centres of nodes `a` and `b`, with `label` as its
/// tooltip: grey, or dashed orange for a tunnel.
fn edge(c: &mut Canvas, at: &Layout, (a, b): (usize, usize), label: &str, dashed: bool) {
    let ((x1, y1), (x2, y2)) = (at.centre(a), at.centre(b));
    let dash = if dashed {
        r#" stroke-dasharray="6 4""#
    } else {
        ""
    };
    let colour = if dashed { "#D55E00" } else { "#888888" };
    let _ = writeln!(
        c.body,
        r#"<g><title>{}</title><line x1="{x1:.1}" y1="{y1:.1}" x2="{x2:.1}" y2="{y2:.1}" stroke="{colour}" stroke-width="1.5"{dash}/></g>"#,
        esc(label)
    );
}

/// Node `i`'s box, filled by its kind, and its lines: the name in bold.
fn node(c: &mut Canvas, at: &Layout, i: usize, kind: NodeKind, lines: &[String]) {
    let (x, y) = at.pos[i];
    let fill = match kind {
        NodeKind::Host => "#e8f1fa",
        NodeKind::Router => "#fdf0d9",
        NodeKind::Switch => "#e5f5ee",
        NodeKind::External => "#f3e6ef",
    };
    let _ = writeln!(
        c.body,
        r##"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" rx="6" fill="{fill}" stroke="#555555"/>"##,
        at.box_w, at.box_h[i]
    );
    for (k, line) in lines.iter().enumerate() {
        let text = Text::new(
            line,
            x + at.box_w / 2.0,
            y + 17.0 + k as f64 * 14.0,
            if k == 0 { 12.0 } else { 11.0 },
        )
        .anchor(Anchor::Middle);
        c.text(if k == 0 { text.bold() } else { text });
    }
}
