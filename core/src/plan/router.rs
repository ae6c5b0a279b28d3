//! The kernel objects of a userspace router's slow path (see `crate::codec::slowpath`):
//! the TUN the process attaches to, and on each of the router's interfaces a tc
//! ingress filter that redirects arriving IPv4 and IPv6 into it.

use crate::topology::Topology;
use crate::topology::tunnel::Datapath;
use netns::Op;
use std::fmt::Write;

/// The slow path's TUN in a userspace router's namespace.
pub const SLOWPATH_TUN: &str = "slowpath";

/// Any packet fits: the TUN never limits what the kernel forwards afterwards.
const TUN_MTU: u32 = 65535;

pub fn ops(t: &Topology, node: usize, ns: &str) -> Vec<Op> {
    let n = &t.nodes[node];
    if n.datapath != Datapath::Userspace {
        return Vec::new();
    }
    let mut ops = vec![Op::Tun {
        tap: false,
        single_queue: false,
        ns: ns.into(),
        name: SLOWPATH_TUN.into(),
    }];
    // IPv6 stays on (the kernel must take IPv6 in from the TUN), but without
    // addresses: no link-local, no router solicitations, nothing of its own.
    for (key, value) in [("accept_ra", "0"), ("addr_gen_mode", "1")] {
        ops.push(Op::Sysctl {
            ns: ns.into(),
            key: format!("net.ipv6.conf.{SLOWPATH_TUN}.{key}"),
            value: value.into(),
        });
    }
    ops.push(Op::LinkSet {
        ns: ns.into(),
        iface: SLOWPATH_TUN.into(),
        mtu: TUN_MTU,
    });
    let ifaces: Vec<&str> = n.interfaces.iter().map(|x| x.name.as_str()).collect();
    ops.push(Op::Tc {
        ns: ns.into(),
        batch: redirect_batch(&ifaces),
    });
    ops
}

/// tc lines that send every arriving IPv4 and IPv6 packet of `ifaces` into the
/// slow path, except what must stay on its link: IPv6 to link-local and
/// multicast addresses, and neighbour discovery (ICMPv6 with hop limit 255,
/// which RFC 4861 requires of it). ARP is neither protocol.
/// The exceptions match with a classid and no action: the first matching
/// filter ends classification and the packet goes on as usual (without
/// needing the gact module for `action pass`).
pub fn redirect_batch(ifaces: &[&str]) -> String {
    let mut s = String::new();
    for dev in ifaces {
        let f = format!("filter add dev {dev} ingress");
        let _ = writeln!(s, "qdisc add dev {dev} clsact");
        let _ = writeln!(
            s,
            "{f} prio 1 protocol ipv6 u32 match ip6 dst ff00::/8 classid 1:1"
        );
        let _ = writeln!(
            s,
            "{f} prio 2 protocol ipv6 u32 match ip6 dst fe80::/10 classid 1:1"
        );
        let _ = writeln!(
            s,
            "{f} prio 3 protocol ipv6 u32 match ip6 protocol 58 0xff match u8 255 0xff at 7 classid 1:1"
        );
        for (prio, proto) in [(4, "ipv6"), (5, "ip")] {
            let _ = writeln!(
                s,
                "{f} prio {prio} protocol {proto} u32 match u32 0 0 action mirred egress redirect dev {SLOWPATH_TUN}"
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_interface_gets_its_exceptions_before_the_redirects() {
        let b = redirect_batch(&["eth0", "eth1"]);
        let lines: Vec<&str> = b.lines().collect();
        assert_eq!(lines.len(), 12, "{b}");
        assert_eq!(lines[0], "qdisc add dev eth0 clsact");
        assert!(
            lines[3].contains("match u8 255 0xff at 7 classid 1:1"),
            "{b}"
        );
        assert_eq!(
            lines[5],
            "filter add dev eth0 ingress prio 5 protocol ip u32 match u32 0 0 action mirred egress redirect dev slowpath"
        );
        assert!(lines[6..].iter().all(|l| l.contains("dev eth1")), "{b}");
    }
}
