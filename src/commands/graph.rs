//! `tunbench graph`: the topology as Graphviz dot, a Mermaid flowchart, or an
//! SVG drawing of its own (no Graphviz needed: the HTML report embeds it).

use crate::topology::{self, NodeKind, Topology};
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Dot,
    Mermaid,
    /// Drawn by tunbench: nodes in columns by their hops from the first host,
    /// links as lines, tunnels dashed.
    Svg,
}

fn addrs(a: &[ipnetwork::IpNetwork]) -> String {
    a.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join("\\n")
}

pub fn render(t: &Topology, f: Format) -> String {
    match f {
        Format::Dot => dot(t),
        Format::Mermaid => mermaid(t),
        Format::Svg => svg(t),
    }
}

/// Nodes in columns by their hops from the first host (where measurements
/// usually start; each further part of the graph after the last column), a box per node with its
/// name, kind and addresses; links as lines with their interfaces, softwires
/// and VPN sessions dashed with their name.
fn svg(t: &Topology) -> String {
    use crate::report::chart::text_width;
    use crate::report::xml_escape as esc;
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
        let mut queue = std::collections::VecDeque::from([start]);
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
    let lines = |i: usize| {
        let nd = &t.nodes[i];
        let mut v = vec![nd.name.clone(), format!("({})", nd.kind)];
        v.extend(nd.addresses.iter().map(|a| a.to_string()));
        v
    };
    let box_w = (0..n)
        .flat_map(lines)
        .map(|l| text_width(&l, 11.0))
        .fold(90.0, f64::max)
        + 16.0;
    let box_h = |i: usize| lines(i).len() as f64 * 14.0 + 10.0;
    let (col_gap, row_gap, margin) = (110.0, 28.0, 20.0);
    // Each node's top-left corner, rows stacked per column.
    let mut pos = vec![(0.0, 0.0); n];
    let mut col_y = vec![margin + 24.0; next.max(1)];
    for i in 0..n {
        let c = column[i];
        pos[i] = (margin + c as f64 * (box_w + col_gap), col_y[c]);
        col_y[c] += box_h(i) + row_gap;
    }
    let width = (margin * 2.0 + next.max(1) as f64 * (box_w + col_gap) - col_gap).ceil();
    let height = (col_y.iter().copied().fold(0.0, f64::max) + margin).ceil();
    let centre = |i: usize| (pos[i].0 + box_w / 2.0, pos[i].1 + box_h(i) / 2.0);
    let mut s = format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" version="1.1" class="topology" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="Helvetica, Arial, sans-serif" role="img"><title>{}</title><rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>
<text x="{margin}" y="22" font-size="14" font-weight="bold" fill="#222222">{}</text>
"##,
        esc(&t.name),
        esc(t.description.as_deref().unwrap_or(&t.name))
    );
    let edge = |s: &mut String, a: usize, b: usize, label: &str, dashed: bool| {
        let ((x1, y1), (x2, y2)) = (centre(a), centre(b));
        let dash = if dashed {
            r#" stroke-dasharray="6 4""#
        } else {
            ""
        };
        let colour = if dashed { "#D55E00" } else { "#888888" };
        s.push_str(&format!(
            r#"<g><title>{}</title><line x1="{x1:.1}" y1="{y1:.1}" x2="{x2:.1}" y2="{y2:.1}" stroke="{colour}" stroke-width="1.5"{dash}/></g>
"#,
            esc(label)
        ));
    };
    for l in &t.links {
        let label = format!(
            "{}:{} -- {}:{} ({})",
            t.nodes[l.a.node].name,
            l.a.iface,
            t.nodes[l.b.node].name,
            l.b.iface,
            link_label(l)
        );
        edge(&mut s, l.a.node, l.b.node, &label, false);
    }
    let index = |name: &str| t.nodes.iter().position(|x| x.name == name);
    for (label, a, b) in tunnel_edges(t) {
        if let (Some(a), Some(b)) = (index(&a), index(&b)) {
            edge(&mut s, a, b, &label, true);
        }
    }
    for i in 0..n {
        let (x, y) = pos[i];
        let fill = match t.nodes[i].kind {
            NodeKind::Host => "#e8f1fa",
            NodeKind::Router => "#fdf0d9",
            NodeKind::Switch => "#e5f5ee",
            NodeKind::External => "#f3e6ef",
        };
        s.push_str(&format!(
            r##"<rect x="{x:.1}" y="{y:.1}" width="{box_w:.1}" height="{:.1}" rx="6" fill="{fill}" stroke="#555555"/>
"##,
            box_h(i)
        ));
        for (k, line) in lines(i).iter().enumerate() {
            let (size, weight) = if k == 0 {
                (12, r#" font-weight="bold""#)
            } else {
                (11, "")
            };
            s.push_str(&format!(
                r##"<text x="{:.1}" y="{:.1}" font-size="{size}" text-anchor="middle" fill="#222222"{weight}>{}</text>
"##,
                x + box_w / 2.0,
                y + 17.0 + k as f64 * 14.0,
                esc(line)
            ));
        }
    }
    s.push_str("</svg>\n");
    s
}

fn dot(t: &Topology) -> String {
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
    // Softwires: a dashed edge from each B4 to its AFTR, over the IPv6 underlay.
    for (label, b4, aftr) in tunnel_edges(t) {
        s += &format!("  \"{b4}\" -- \"{aftr}\" [style=dashed, label=\"{label}\"];\n");
    }
    s += "}\n";
    s
}

/// (label, one end, the other) for every softwire (B4 to AFTR) and every
/// WireGuard session.
fn tunnel_edges(t: &Topology) -> Vec<(String, String, String)> {
    let mut v = Vec::new();
    for tun in &t.tunnels {
        let d = match &tun.kind {
            crate::topology::tunnel::TunnelKind::Dslite(d) => d,
            crate::topology::tunnel::TunnelKind::Esp(_)
            | crate::topology::tunnel::TunnelKind::L2tp(_) => {
                use crate::codec::overhead::Encapsulation;
                let (kind, how) = match tun.encapsulation() {
                    Encapsulation::Esp { udp } => ("esp", if udp { "udp" } else { "raw" }),
                    Encapsulation::L2tpIpsec { udp: true, .. } => ("l2tp", "ipsec, udp"),
                    Encapsulation::L2tpIpsec { udp: false, .. } => ("l2tp", "ipsec, raw"),
                    _ => ("l2tp", "bare"),
                };
                let w = tun.overlay().expect("an overlay");
                let (a, b) = (&w.peers[0], &w.peers[1]);
                v.push((
                    format!("{kind} {} ({how})", tun.name),
                    t.nodes[a.node].name.clone(),
                    t.nodes[b.node].name.clone(),
                ));
                continue;
            }
            crate::topology::tunnel::TunnelKind::Ikev2(e) => {
                let w = &e.overlay;
                let (a, b) = (&w.peers[0], &w.peers[1]);
                v.push((
                    format!("ikev2 {} (strongSwan)", tun.name),
                    t.nodes[a.node].name.clone(),
                    t.nodes[b.node].name.clone(),
                ));
                continue;
            }
            crate::topology::tunnel::TunnelKind::Wireguard(w) => {
                for i in 0..w.peers.len() {
                    for j in w.neighbours(i).into_iter().filter(|&j| j > i) {
                        let (a, b) = (&w.peers[i], &w.peers[j]);
                        let imp = if a.runs() == b.runs() {
                            a.runs().to_string()
                        } else {
                            format!("{}/{}", a.runs(), b.runs())
                        };
                        v.push((
                            format!("wireguard {} ({imp})", tun.name),
                            t.nodes[a.node].name.clone(),
                            t.nodes[b.node].name.clone(),
                        ));
                    }
                }
                continue;
            }
        };
        let aftr_dp = if d.aftr.external {
            "external"
        } else {
            d.aftr.datapath.as_str()
        };
        for b in &d.b4s {
            let dp = if b.datapath.as_str() == aftr_dp {
                aftr_dp.to_string()
            } else {
                format!("{}/{aftr_dp}", b.datapath.as_str())
            };
            v.push((
                format!("dslite {} ({dp})", tun.name),
                t.nodes[b.node].name.clone(),
                t.nodes[d.aftr.node].name.clone(),
            ));
        }
    }
    v
}

/// "mtu 1500", and for a link out of the lab the host interface it leaves by.
fn link_label(l: &crate::topology::resolved::Link) -> String {
    match &l.host {
        Some(h) => format!("mtu {}, host {} ({})", l.mtu, h.iface, h.attach),
        None => format!("mtu {}", l.mtu),
    }
}

fn mermaid(t: &Topology) -> String {
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
        let side = |e: &crate::topology::Endpoint| {
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

#[derive(clap::Args, Debug)]
pub struct GraphArgs {
    pub file: PathBuf,
    #[arg(long, value_enum, default_value = "dot")]
    pub format: Format,
}

/// The command: load the file, print the diagram.
pub fn graph(a: GraphArgs) -> anyhow::Result<i32> {
    let GraphArgs { file, format } = a;
    let t = topology::load(&file, crate::lab::this_kernel())?;
    print!("{}", render(&t, format));
    Ok(0)
}
