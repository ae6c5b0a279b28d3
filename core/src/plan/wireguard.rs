//! The kernel objects of a WireGuard peer: a persistent TUN with the tunnel's
//! MTU and the peer's inner addresses (added with the node's other addresses,
//! `Topology::node_addresses`), and a route per allowed prefix of each
//! neighbour into it. The datapath process (`tunbench datapath`) attaches to
//! the TUN: tunbench's driver, or the external implementation it runs, which
//! needs the TUN made the way it attaches (wireguard-go: one plain queue).
//! A peer the kernel runs gets the kernel's WireGuard device in the TUN's
//! place, under the same name, with the same MTU, addresses and routes; its
//! process gives it keys and peers. ESP ends are made alike; IKEv2 ends need
//! nothing here.

use crate::topology::Topology;
use crate::topology::tunnel::implementation::Implementation;
use crate::topology::tunnel::{Tunnel, TunnelKind};
use netns::Op;

pub fn ops(_t: &Topology, tun: &Tunnel, ns: &dyn Fn(usize) -> String) -> Vec<Op> {
    let Some(w) = tun.overlay() else {
        return Vec::new();
    };
    // charon makes the routes (table 220) itself, into kernel-libipsec's TUN
    // or over the underlay to the kernel's xfrm; the inner addresses are on
    // lo with the node's own.
    if matches!(tun.kind, TunnelKind::Ikev2(_)) {
        return Vec::new();
    }
    let dev = tun.tun_name();
    let mut ops = Vec::new();
    // A peer on an external node is the device's own: nothing is made for it.
    for (i, p) in w.peers.iter().enumerate().filter(|(_, p)| !p.external) {
        let ns = ns(p.node);
        ops.push(match p.implementation {
            Implementation::Kernel => Op::Wireguard {
                ns: ns.clone(),
                name: dev.clone(),
            },
            imp => Op::Tun {
                ns: ns.clone(),
                name: dev.clone(),
                tap: false,
                single_queue: imp == Implementation::WireguardGo,
            },
        });
        ops.push(Op::LinkSet {
            ns: ns.clone(),
            iface: dev.clone(),
            mtu: w.mtu,
        });
        if !p.addresses.iter().any(|a| a.is_ipv6()) {
            ops.push(Op::Sysctl {
                ns: ns.clone(),
                key: format!("net.ipv6.conf.{dev}.disable_ipv6"),
                value: "1".into(),
            });
        }
        for to in w.tun_routes(i) {
            ops.push(Op::Route {
                ns: ns.clone(),
                to,
                via: None,
                dev: Some(dev.clone()),
                metric: None,
            });
        }
    }
    ops
}
