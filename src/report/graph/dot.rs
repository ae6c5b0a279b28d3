//! The topology in Graphviz dot.

use super::{link_label, tunnel_edges};
use crate::topology::{NodeKind, Topology};

fn addrs(a: &[ipnetwork::IpNetwork]) -> String {
    a.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join("\\n")
}

pub(super) fn dot(t: &Topology) -> String {
    let mut s = format!(
        "graph \"{}\" {{\n  graph [label=\"{}\", labelloc=t];\n  node [fontname=\"monospace\"];\n  edge [fontname=\"monospace\", fontsize=9];\n",
        t.name,
        t.description
            .as_deref()
            .unwrap_or(&t.name)
            .replace('"', "'")
    );
    for n in &t.nodes {
        let shape = match n.kind {
            NodeKind::Host => "box",
            NodeKind::Router => "ellipse",
            NodeKind::Switch => "box3d",
            NodeKind::External => "hexagon",
        };
        let mut label = format!("{}\\n({})", n.name, n.kind);
        if !n.addresses.is_empty() {
            label += &format!("\\n{}", addrs(&n.addresses));
        }
        s += &format!("  \"{}\" [shape={shape}, label=\"{label}\"];\n", n.name);
    }
    for l in &t.links {
        let (a, b) = (&t.nodes[l.a.node].name, &t.nodes[l.b.node].name);
        let mut tail = l.a.iface.clone();
        if !l.a.addresses.is_empty() {
            tail += &format!("\\n{}", addrs(&l.a.addresses));
        }
        let mut head = l.b.iface.clone();
        if !l.b.addresses.is_empty() {
            head += &format!("\\n{}", addrs(&l.b.addresses));
        }
        s += &format!(
            "  \"{a}\" -- \"{b}\" [taillabel=\"{tail}\", headlabel=\"{head}\", label=\"{}\"];\n",
            link_label(l)
        );
    }
    // Tunnels: a dashed edge between their ends (a B4 and its AFTR, VPN peers).
    for (label, b4, aftr) in tunnel_edges(t) {
        s += &format!("  \"{b4}\" -- \"{aftr}\" [style=dashed, label=\"{label}\"];\n");
    }
    s += "}\n";
    s
}
