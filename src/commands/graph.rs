//! `tunbench graph`: the topology as Graphviz dot or a Mermaid flowchart.

use crate::topology::{self, NodeKind, Topology};
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Dot,
    Mermaid,
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
    }
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
fn link_label(l: &crate::topology::model::Link) -> String {
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
    let t = topology::load(&file)?;
    print!("{}", render(&t, format));
    Ok(0)
}
