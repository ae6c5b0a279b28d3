//! The tunnels a packet may enter on its way: WireGuard and the other
//! point-to-point kinds (their peers' allowed IPs), and DS-Lite softwires
//! (to the AFTR, with its NAT44).

use super::{Arrival, Router};
use crate::topology::tunnel::dslite::B4;
use crate::topology::tunnel::overlay::Overlay;
use crate::topology::tunnel::{Tunnel, TunnelKind};
use std::net::IpAddr;

/// Next-hop interfaces named like this stand for a softwire, not a device.
pub(super) const SOFTWIRE: &str = "softwire:";

/// What a softwire's NAT44 did to a packet on its way.
#[derive(Debug, Clone, Copy)]
pub(super) struct Nat {
    /// The softwire's index in the topology's tunnels.
    pub(super) tunnel: usize,
    pub(super) b4: usize,
    /// The softwire's IPv6 endpoints.
    pub(super) b4_address: std::net::Ipv6Addr,
    pub(super) aftr: usize,
    pub(super) aftr_address: std::net::Ipv6Addr,
    /// None: an external AFTR whose pool the file does not give; its own
    /// network routes the pool back to it.
    pub(super) pool: Option<IpAddr>,
}

impl<'t> Router<'t> {
    /// The WireGuard tunnels `node` is a peer of: (tunnel, its kind, peer index).
    pub(super) fn wireguard_peers(&self, node: usize) -> &[(&'t Tunnel, &'t Overlay, usize)] {
        &self.wireguard[node]
    }

    /// A packet that peer `node` sends into WireGuard device `iface` comes out
    /// of the neighbour whose allowed IPs hold `dst`, if the underlay delivers.
    pub(super) fn through_wireguard(
        &self,
        node: usize,
        iface: &str,
        src: Option<IpAddr>,
        dst: IpAddr,
    ) -> Option<Result<(usize, Arrival), String>> {
        let &(tun, w, i) = self
            .wireguard_peers(node)
            .iter()
            .find(|(t, _, _)| t.tun_name() == iface)?;
        let tunnel = self
            .topo
            .tunnels
            .iter()
            .position(|t| std::ptr::eq(t, tun))
            .unwrap_or(0);
        let Some(j) = w.peer_for(i, dst) else {
            return Some(Err(format!(
                "{dst} is in no allowed IPs of a peer of {} in tunnel {}",
                self.topo.nodes[node].name, tun.name
            )));
        };
        let there = w.peers[j].node;
        // IKEv2's ends are strongSwan's: its policies pick the source (the
        // inner address on lo), which the route lookup here does not see.
        let src = src.filter(|_| !matches!(tun.kind, TunnelKind::Ikev2(_)));
        if let Some(src) = src {
            if !w.allowed_for(j, i).iter().any(|n| n.contains(src)) {
                return Some(Err(format!(
                    "{} drops what {} sends it through tunnel {} from {src}: not in the allowed IPs of {}",
                    self.topo.nodes[there].name,
                    self.topo.nodes[node].name,
                    tun.name,
                    self.topo.nodes[node].name
                )));
            }
        }
        Some(
            self.deliver_underlay(node, w.peers[j].endpoint)
                .map_err(|e| {
                    format!(
                        "WireGuard {}: the underlay to {} fails: {e}",
                        tun.name, w.peers[j].endpoint
                    )
                })
                .and_then(|n| {
                    if n == there {
                        Ok((
                            there,
                            Arrival::Tunnel {
                                tunnel,
                                outer_src: w.peers[i].endpoint,
                                outer_dst: w.peers[j].endpoint,
                            },
                        ))
                    } else {
                        Err(format!(
                            "WireGuard {}: {} is not held by the peer",
                            tun.name, w.peers[j].endpoint
                        ))
                    }
                }),
        )
    }

    /// The softwires whose B4 is `node`: (tunnel name, B4).
    pub(super) fn softwires_from(&self, node: usize) -> &[(&'t str, &'t B4)] {
        &self.softwires[node]
    }

    /// A packet that a B4 sends into softwire `tunnel` comes out of the AFTR,
    /// if the IPv6 underlay between the two delivers.
    pub(super) fn through_softwire(
        &self,
        node: usize,
        tunnel: &str,
    ) -> Result<(usize, Nat), String> {
        let (index, t) = self
            .topo
            .tunnels
            .iter()
            .enumerate()
            .find(|(_, t)| t.name == tunnel)
            .ok_or_else(|| format!("no tunnel {tunnel}"))?;
        let TunnelKind::Dslite(d) = &t.kind else {
            return Err(format!("{tunnel} is no softwire"));
        };
        let there = self
            .deliver_underlay(node, IpAddr::V6(d.aftr.address))
            .map_err(|e| format!("softwire {tunnel}: the IPv6 underlay to the AFTR fails: {e}"))?;
        let pool = d.aftr.pool.first().map(|p| {
            IpAddr::V4(if p.prefix() == 32 {
                p.ip()
            } else {
                p.nth(1).unwrap_or(p.ip())
            })
        });
        if pool.is_none() && !d.aftr.external {
            return Err(format!("softwire {tunnel} has an empty pool"));
        }
        let b4 = d.b4s.iter().find(|b| b.node == node).ok_or_else(|| {
            format!(
                "{} is no B4 of softwire {tunnel}",
                self.topo.nodes[node].name
            )
        })?;
        Ok((
            there,
            Nat {
                tunnel: index,
                b4: node,
                b4_address: b4.address,
                aftr: there,
                aftr_address: d.aftr.address,
                pool,
            },
        ))
    }
}
