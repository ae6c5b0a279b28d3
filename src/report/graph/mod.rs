//! The topology as a diagram, as `tunbench graph` prints it and the HTML
//! page embeds it: Graphviz dot, a Mermaid flowchart, or an SVG drawing of
//! its own (no Graphviz needed).

mod dot;
mod drawing;
mod mermaid;

use crate::topology::Topology;
use crate::topology::resolved::Link;
use crate::topology::tunnel::TunnelKind;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GraphFormat {
    Dot,
    Mermaid,
    /// Drawn by tunbench: nodes in columns by their hops from the first host,
    /// links as lines, tunnels dashed.
    Svg,
}

pub fn render(t: &Topology, f: GraphFormat) -> String {
    match f {
        GraphFormat::Dot => dot::dot(t),
        GraphFormat::Mermaid => mermaid::mermaid(t),
        GraphFormat::Svg => drawing::svg(t),
    }
}

/// "mtu 1500", and for a link out of the lab the host interface it leaves by.
fn link_label(l: &Link) -> String {
    match &l.host {
        Some(h) => format!("mtu {}, host {} ({})", l.mtu, h.iface, h.attach),
        None => format!("mtu {}", l.mtu),
    }
}

/// (label, one end, the other) for every softwire (B4 to AFTR) and every
/// VPN session.
fn tunnel_edges(t: &Topology) -> Vec<(String, String, String)> {
    let name = |node: usize| t.nodes[node].name.clone();
    let mut v = Vec::new();
    for tun in &t.tunnels {
        match &tun.kind {
            TunnelKind::Dslite(d) => {
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
                        name(b.node),
                        name(d.aftr.node),
                    ));
                }
            }
            TunnelKind::Esp(_) | TunnelKind::L2tp(_) => {
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
                    name(a.node),
                    name(b.node),
                ));
            }
            TunnelKind::Ikev2(e) => {
                let (a, b) = (&e.overlay.peers[0], &e.overlay.peers[1]);
                v.push((
                    format!("ikev2 {} (strongSwan)", tun.name),
                    name(a.node),
                    name(b.node),
                ));
            }
            TunnelKind::Wireguard(w) => {
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
                            name(a.node),
                            name(b.node),
                        ));
                    }
                }
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::draw::checks::well_formed;

    fn shipped() -> Vec<(String, Topology)> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("topologies");
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "toml") {
                let t = crate::topology::load(&p, crate::topology::kernel::KernelFacts::FULL)
                    .unwrap_or_else(|e| panic!("{p:?}: {e:#}"));
                out.push((p.display().to_string(), t));
            }
        }
        assert!(out.len() >= 5, "{} topologies", out.len());
        out
    }

    /// Every shipped topology drawn: well-formed, a box and a bold name per
    /// node, a line per link and a dashed one per tunnel edge, all inside
    /// the drawing.
    #[test]
    fn every_shipped_topology_is_drawn_whole() {
        for (file, t) in shipped() {
            let svg = render(&t, GraphFormat::Svg);
            let xml = format!("<?xml version=\"1.0\"?>\n{svg}");
            well_formed(&xml).unwrap_or_else(|e| panic!("{file}: {e}\n{svg}"));
            assert_eq!(svg.matches(" rx=\"6\" ").count(), t.nodes.len(), "{file}");
            for n in &t.nodes {
                let name = format!(" font-weight=\"bold\">{}</text>", n.name);
                assert!(svg.contains(&name), "{file}: {}", n.name);
            }
            let edges = tunnel_edges(&t).len();
            assert_eq!(
                svg.matches("<g><title>").count(),
                t.links.len() + edges,
                "{file}"
            );
            assert_eq!(svg.matches("stroke-dasharray").count(), edges, "{file}");
            let size = |attr: &str| -> f64 {
                let at = svg.find(&format!(" {attr}=\"")).unwrap() + attr.len() + 3;
                svg[at..at + svg[at..].find('"').unwrap()].parse().unwrap()
            };
            let (w, h) = (size("width"), size("height"));
            for x in svg.split(" x=\"").skip(1) {
                let x: f64 = x[..x.find('"').unwrap()].parse().unwrap();
                assert!((0.0..w).contains(&x), "{file}: x {x} outside {w}");
            }
            for y in svg.split(" y=\"").skip(1) {
                let y: f64 = y[..y.find('"').unwrap()].parse().unwrap();
                assert!((0.0..h).contains(&y), "{file}: y {y} outside {h}");
            }
        }
    }

    #[test]
    fn tunnels_are_dashed_edges_in_every_format() {
        let (file, t) = shipped()
            .into_iter()
            .find(|(f, _)| f.ends_with("/dslite.toml"))
            .expect("topologies/dslite.toml");
        let edges = tunnel_edges(&t);
        assert!(!edges.is_empty(), "{file}");
        let (label, a, b) = &edges[0];
        assert!(label.starts_with("dslite "), "{label}");
        let dot = render(&t, GraphFormat::Dot);
        assert!(
            dot.contains(&format!(
                "\"{a}\" -- \"{b}\" [style=dashed, label=\"{label}\"];"
            )),
            "{dot}"
        );
        let mermaid = render(&t, GraphFormat::Mermaid);
        let id = |n: &str| n.replace('-', "_");
        assert!(
            mermaid.contains(&format!("{} -.-|\"{label}\"| {}", id(a), id(b))),
            "{mermaid}"
        );
    }
}
