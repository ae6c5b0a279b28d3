//! Tunnels a router terminates itself (`[terminations.KIND]` of its
//! profile), tied to the tunnels of the topology once both are resolved:
//! which end applies which ceilings, the softwire datapath they need, and
//! what the router's forwarding ceilings must then leave alone. Pure.

use super::implementation::Implementation;
use super::overlay::Overlay;
use super::{Datapath, Role, Tunnel, TunnelKind};
use crate::codec::profile::TerminationModel;
use crate::topology::Problem;
use crate::topology::resolved::Node;
use ipnetwork::IpNetwork;

/// The kind's name as `[tunnels.X] kind` and `[terminations.KIND]` write it.
pub fn kind_name(t: &Tunnel) -> &'static str {
    match t.kind {
        TunnelKind::Dslite(_) => "dslite",
        TunnelKind::Wireguard(_) => "wireguard",
        TunnelKind::Esp(_) => "esp",
        TunnelKind::L2tp(_) => "l2tp",
        TunnelKind::Ikev2(_) => "ikev2",
    }
}

/// The termination ceilings end `role` of `tun` on `node` applies: a B4's
/// for "dslite" (an AFTR terminates no customer's softwire as a device
/// profile sees it), any peer's for its kind.
pub fn of<'n>(tun: &Tunnel, role: Role, node: &'n Node) -> Option<&'n TerminationModel> {
    if matches!(role, Role::Aftr) {
        return None;
    }
    node.terminations.get(kind_name(tun))
}

/// Settles what termination ceilings ask of the tunnels: a B4 whose node
/// has them runs in userspace ("auto" picks it; "kernel" is refused where
/// it is said), a WireGuard end with them runs tunbench's implementation;
/// and a router with forwarding ceilings leaves alone its own traffic and
/// the inner traffic of the tunnels it terminates with ceilings.
pub fn settle(nodes: &mut [Node], tunnels: &mut [Tunnel], p: &mut Vec<Problem>) {
    let mut inner: Vec<(usize, IpNetwork)> = Vec::new();
    for tun in tunnels.iter_mut() {
        let kind = kind_name(tun);
        match &mut tun.kind {
            TunnelKind::Dslite(d) => {
                for b in &mut d.b4s {
                    let n = &nodes[b.node];
                    if !n.terminations.contains_key(kind) {
                        continue;
                    }
                    if b.datapath == Datapath::Kernel {
                        if b.auto {
                            b.datapath = Datapath::Userspace;
                            // Not the kernel's lack: the profile's choice.
                            b.auto = false;
                        } else {
                            let at = b.kernel_at.clone().unwrap_or_else(|| b.at.clone());
                            p.push(Problem::new(
                                &at,
                                format!(
                                    "B4 {}'s profile \"{}\" has termination ceilings for \"dslite\", which tunbench's userspace softwire applies; datapath = \"kernel\" would bypass them: use \"auto\" or \"userspace\"",
                                    n.name,
                                    n.terminations[kind].profile
                                ),
                            ));
                        }
                    }
                    inner.extend(b.routes.iter().map(|r| (b.node, IpNetwork::V4(*r))));
                }
            }
            TunnelKind::Ikev2(_) => {}
            TunnelKind::Wireguard(_) | TunnelKind::Esp(_) | TunnelKind::L2tp(_) => {
                let w = tun_overlay(tun);
                for peer in &w.peers {
                    let n = &nodes[peer.node];
                    if !n.terminations.contains_key(kind) {
                        continue;
                    }
                    if kind == "wireguard" && peer.implementation != Implementation::Tunbench {
                        p.push(Problem::new(
                            &peer.at.key("implementation"),
                            format!(
                                "{}'s profile \"{}\" has termination ceilings for \"wireguard\", which only tunbench's own implementation applies; remove implementation = \"{}\" for this peer",
                                n.name,
                                n.terminations[kind].profile,
                                peer.implementation.as_str()
                            ),
                        ));
                    }
                    for q in &w.peers {
                        for a in q.addresses.iter().chain(&q.allowed_ips) {
                            if let Ok(net) = IpNetwork::new(a.network(), a.prefix()) {
                                inner.push((peer.node, net));
                            }
                        }
                    }
                }
            }
        }
    }
    for (i, n) in nodes.iter_mut().enumerate() {
        if n.host_model.is_some() {
            continue;
        }
        let own: Vec<IpNetwork> = n
            .addresses
            .iter()
            .chain(n.interfaces.iter().flat_map(|x| &x.addresses))
            .filter_map(|a| IpNetwork::new(a.ip(), if a.is_ipv4() { 32 } else { 128 }).ok())
            .collect();
        let Some(m) = n.model.as_mut() else { continue };
        m.bypass = own;
        for (node, net) in &inner {
            if *node == i && !m.bypass.contains(net) {
                m.bypass.push(*net);
            }
        }
    }
}

fn tun_overlay(t: &Tunnel) -> &Overlay {
    t.overlay().expect("a point-to-point kind has an overlay")
}
