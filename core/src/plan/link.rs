//! The kernel objects of a link with userspace impairments (delay, jitter,
//! loss, duplication, reordering, a queue limit): the link becomes two veth
//! pairs through a relay namespace of its own, so both ends keep their names,
//! addresses and MACs and see one Ethernet segment, as before.
//!
//! ```text
//!  a's ns            relay ns (LAB-link.N)                       b's ns
//!  a.iface ==veth== ra --tc--> tap-ab --(process)--> tap-ab --tc--> rb ==veth== b.iface
//!                     <--tc-- tap-ba <--(process)-- tap-ba <--tc--
//! ```
//!
//! tc on `ra`'s ingress redirects every frame to the egress of TAP `tap-ab`,
//! which the relay process reads; what the process writes back into the TAP
//! arrives on its ingress, whose tc sends it out of `rb`. A direction without
//! userspace impairments goes from `ra` straight to `rb` in the kernel. The
//! relay namespace has IPv6 off, so its interfaces say nothing on the link.
//! The TAPs have no offloads: the kernel segments GSO packets and completes
//! checksums before the process sees them, so every frame is one wire frame.

use crate::topology::{Link, Topology};
use netns::Op;
use std::fmt::Write;

/// The relay's side of `a` and of `b`.
pub const RELAY_A: &str = "ra";
pub const RELAY_B: &str = "rb";
/// The TAP each impaired direction passes through.
pub const TAP_A_TO_B: &str = "tap-ab";
pub const TAP_B_TO_A: &str = "tap-ba";

/// One direction of a link, as the relay process is told it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Way {
    #[value(name = "a_to_b")]
    AToB,
    #[value(name = "b_to_a")]
    BToA,
}

impl Way {
    pub fn name(self) -> &'static str {
        match self {
            Way::AToB => "a_to_b",
            Way::BToA => "b_to_a",
        }
    }

    pub fn tap(self) -> &'static str {
        match self {
            Way::AToB => TAP_A_TO_B,
            Way::BToA => TAP_B_TO_A,
        }
    }

    pub fn impairment(self, l: &Link) -> crate::topology::impair::Impairment {
        match self {
            Way::AToB => l.impairments.a_to_b,
            Way::BToA => l.impairments.b_to_a,
        }
    }
}

/// The relay's pseudo node name (its namespace is the lab's prefix + this).
/// Node names hold no dots, so it never meets a node's.
pub fn relay_node(link: usize) -> String {
    format!("link.{link}")
}

/// Links that go through a relay, with their index.
pub fn relayed(t: &Topology) -> impl Iterator<Item = (usize, &Link)> {
    t.links
        .iter()
        .enumerate()
        .filter(|(_, l)| l.impairments.needs_relay())
}

/// The relay's namespace, IPv6 off so its interfaces stay silent.
pub fn namespace_op(ns: &str, marker: &str) -> Op {
    Op::Namespace {
        ns: ns.into(),
        marker: marker.into(),
        sysctls: vec![
            ("net.ipv6.conf.all.disable_ipv6".into(), "1".into()),
            ("net.ipv6.conf.default.disable_ipv6".into(), "1".into()),
        ],
    }
}

/// The two veth pairs in place of the link's one.
pub fn veth_ops(l: &Link, ns_a: &str, ns_b: &str, relay: &str) -> Vec<Op> {
    vec![
        Op::Veth {
            ns: ns_a.into(),
            name: l.a.iface.clone(),
            peer_ns: relay.into(),
            peer_name: RELAY_A.into(),
            mtu: l.mtu,
        },
        Op::Veth {
            ns: ns_b.into(),
            name: l.b.iface.clone(),
            peer_ns: relay.into(),
            peer_name: RELAY_B.into(),
            mtu: l.mtu,
        },
    ]
}

/// The relay's TAPs, its interfaces up, and the tc redirects between them.
pub fn ops(l: &Link, relay: &str) -> Vec<Op> {
    let mut ops = Vec::new();
    for iface in [RELAY_A, RELAY_B] {
        ops.push(Op::Up {
            ns: relay.into(),
            iface: iface.into(),
        });
    }
    let mut batch = String::new();
    for (way, from, to) in [(Way::AToB, RELAY_A, RELAY_B), (Way::BToA, RELAY_B, RELAY_A)] {
        if way.impairment(l).needs_relay() {
            ops.push(Op::Tun {
                ns: relay.into(),
                name: way.tap().into(),
                tap: true,
                single_queue: false,
            });
            ops.push(Op::LinkSet {
                ns: relay.into(),
                iface: way.tap().into(),
                mtu: l.mtu,
            });
            redirect(&mut batch, from, way.tap());
            redirect(&mut batch, way.tap(), to);
        } else {
            redirect(&mut batch, from, to);
        }
    }
    ops.push(Op::Tc {
        ns: relay.into(),
        batch,
    });
    ops
}

/// Every frame arriving on `from` leaves through `to`.
fn redirect(batch: &mut String, from: &str, to: &str) {
    let _ = writeln!(batch, "qdisc add dev {from} clsact");
    let _ = writeln!(
        batch,
        "filter add dev {from} ingress protocol all prio 1 u32 match u32 0 0 action mirred egress redirect dev {to}"
    );
}
