//! The topology as a Mermaid flowchart.

use super::{link_label, tunnel_edges};
use crate::topology::{Endpoint, NodeKind, Topology};

pub(super) fn mermaid(t: &Topology) -> String {
    let id = |n: &str| n.replace('-', "_");
    let mut s = String::from("flowchart LR\n");
    for n in &t.nodes {
        let label = format!("{}<br/>{}", n.name, n.kind);
        let (o, c) = match n.kind {
            NodeKind::Host => ("[", "]"),
            NodeKind::Router => ("((", "))"),
            NodeKind::Switch => ("[[", "]]"),
            NodeKind::External => ("{{", "}}"),
        };
        s += &format!("  {}{o}\"{label}\"{c}\n", id(&n.name));
    }
    for l in &t.links {
        let side = |e: &Endpoint| {
            let mut x = e.iface.clone();
            for a in &e.addresses {
                x += &format!(" {a}");
            }
            x
        };
        let via = match &l.host {
            Some(_) => format!(" ({})", link_label(l)),
            None => String::new(),
        };
        s += &format!(
            "  {} ---|\"{} — {}{via}\"| {}\n",
            id(&t.nodes[l.a.node].name),
            side(&l.a),
            side(&l.b),
            id(&t.nodes[l.b.node].name)
        );
    }
    for (label, b4, aftr) in tunnel_edges(t) {
        s += &format!("  {} -.-|\"{label}\"| {}\n", id(&b4), id(&aftr));
    }
    s
}
