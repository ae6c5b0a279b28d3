//! The kernel objects of a DS-Lite softwire's endpoints. A kernel endpoint
//! encapsulates with SRv6 (reduced encapsulation with one segment: IPv6 with
//! next header 4, then IPv4, on the wire) and decapsulates with seg6local
//! End.DX4; an AFTR's NAT44 is nftables. A userspace endpoint gets a
//! persistent TUN that its datapath process attaches to, and the kernel
//! routes the softwire's IPv4 into it.

use crate::topology::Topology;
use crate::topology::tunnel::dslite::{AFTR_SOFTWIRE_V4, B4_SOFTWIRE_V4, Dslite};
use crate::topology::tunnel::{Datapath, Role, Tunnel};
use ipnetwork::IpNetwork;
use netns::Op;
use std::fmt::Write;
use std::net::IpAddr;

/// The routing table holding the decapsulating seg6local route.
pub const DECAP_TABLE: u32 = 4600;
/// Per-softwire return tables at the AFTR: DECAP_TABLE + B4 index + 1.
const RULE_PREF_DECAP: u32 = 100;
/// IPv4 rules: what comes back in on the gate's `swb` end (+ softwire id at the
/// AFTR) goes to the encapsulating table ENCAP_TABLE (+ id).
const RULE_PREF_ENCAP: u32 = 10_000;
/// At the AFTR, replies into softwire id go to the gate by table DECAP_TABLE + id.
const RULE_PREF_SOFTWIRE: u32 = 20_000;
const ENCAP_TABLE: u32 = 4700;
/// The gate's next hop: only a name for the neighbour entry at `swb`'s MAC (from
/// DS-Lite's well-known block; .1 and .2 are the softwire's own addresses).
const GATE: std::net::Ipv4Addr = std::net::Ipv4Addr::new(192, 0, 0, 3);
/// Where `lookup local` moves to so the decapsulation rule can come first.
const LOCAL_RULE_PREF: u32 = 1000;
const MAIN_TABLE: u32 = 254;
/// The TUN's MTU: full-size inner packets reach the codec, which answers DF ones
/// above the softwire MTU with ICMP and sends the others for IPv6 fragmentation.
const TUN_MTU: u32 = 1500;

/// Namespace-wide sysctls an endpoint needs, set when its namespace is made.
pub fn sysctls(t: &Topology, node: usize) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for tun in &t.tunnels {
        for (_, n, dp) in tun.endpoints() {
            if n != node {
                continue;
            }
            match dp {
                // Netfilter hooks for packets that lightweight tunnels decapsulate:
                // NAT44 and the MSS clamp see the inner packet. The kernel makes
                // this one switch for all namespaces once any namespace sets it.
                Datapath::Kernel => {
                    out.push(("net.netfilter.nf_hooks_lwtunnel".into(), "1".into()))
                }
                // The kernel reassembles IPv6 fragments before the raw socket sees
                // them; bound how long an incomplete one is kept (RFC 2473 7.2).
                Datapath::Userspace => out.push(("net.ipv6.ip6frag_time".into(), "5".into())),
            }
        }
    }
    out
}

/// The interface that holds `addr` on `node`.
fn device_of(t: &Topology, node: usize, addr: IpAddr) -> String {
    t.node_addresses(node)
        .into_iter()
        .find(|(_, a)| a.ip() == addr)
        .map(|(d, _)| d)
        .unwrap_or_else(|| "lo".into())
}

pub fn ops(t: &Topology, tun: &Tunnel, ns: &dyn Fn(usize) -> String) -> Vec<Op> {
    let crate::topology::tunnel::TunnelKind::Dslite(d) = &tun.kind else {
        return Vec::new();
    };
    let mut ops = Vec::new();
    for (role, node, dp) in tun.endpoints() {
        let ns = ns(node);
        match dp {
            Datapath::Kernel => kernel(t, tun, d, role, node, &ns, &mut ops),
            Datapath::Userspace => userspace(tun, d, role, &ns, &mut ops),
        }
    }
    ops
}

/// A kernel endpoint: decapsulation, the MTU gate, and its role's routes
/// (B4) or softwires with NAT44 (AFTR).
fn kernel(
    t: &Topology,
    tun: &Tunnel,
    d: &Dslite,
    role: Role,
    node: usize,
    ns: &str,
    ops: &mut Vec<Op>,
) {
    let (own, softwire_v4) = match role {
        Role::Aftr => (d.aftr.address, AFTR_SOFTWIRE_V4),
        Role::B4(i) => (d.b4s[i].address, B4_SOFTWIRE_V4),
        Role::Peer(_) => return,
    };
    let (gate_in, gate_out) = gate_names(&tun.name);
    let e = KernelEndpoint {
        ns,
        dev: device_of(t, node, IpAddr::V6(own)),
        gate_in,
        gate_out,
    };
    ops.push(Op::Address {
        ns: ns.into(),
        iface: "lo".into(),
        addr: IpNetwork::new(IpAddr::V4(softwire_v4), 32).expect("/32"),
    });
    e.decapsulation(own, ops);
    e.gate(d.mtu, ops);
    match role {
        Role::B4(i) => {
            for r in &d.b4s[i].routes {
                ops.push(e.route_into_gate(*r, MAIN_TABLE));
            }
            e.encapsulate(ops, None, d.aftr.address);
            ops.push(Op::Nftables {
                ns: ns.into(),
                ruleset: b4_ruleset(&tun.name, d.mss),
            });
        }
        Role::Peer(_) => {}
        Role::Aftr => e.aftr(tun, d, ops),
    }
}

/// A kernel endpoint's namespace, its underlay device (the one holding its
/// softwire address) and its MTU gate's two ends.
struct KernelEndpoint<'a> {
    ns: &'a str,
    dev: String,
    gate_in: String,
    gate_out: String,
}

impl KernelEndpoint<'_> {
    /// The endpoint address is one of the node's own, so a rule placed before
    /// `lookup local` steers protocol-4 packets to it into the decapsulating
    /// route while everything else (ping, ND) stays local.
    fn decapsulation(&self, own: std::net::Ipv6Addr, ops: &mut Vec<Op>) {
        let ns = self.ns;
        ops.push(Op::LocalRuleAt {
            ns: ns.into(),
            pref: LOCAL_RULE_PREF,
        });
        ops.push(Op::Rule {
            ns: ns.into(),
            v6: true,
            pref: RULE_PREF_DECAP,
            iif: None,
            to: Some(IpNetwork::new(IpAddr::V6(own), 128).expect("/128")),
            ipproto: Some(4),
            fwmark: None,
            table: DECAP_TABLE,
        });
        ops.push(Op::Seg6Local {
            ns: ns.into(),
            sid: own,
            dev: self.dev.clone(),
            table: DECAP_TABLE,
        });
    }

    /// The MTU gate. seg6 encapsulates a forwarded packet from the route's
    /// input hook, before ip_forward, so the kernel would neither check the
    /// IPv4 MTU (no ICMP fragmentation needed) nor decrement the TTL, and
    /// ip6_forward drops the too-big IPv6 packet. So IPv4 is first routed into
    /// the softwire through a veth pair inside the namespace (`swa-T` ->
    /// `swb-T`, MTU = the softwire's): ip_forward does the router's work on
    /// `swa-T`, and a rule `iif swb-T` sends what comes back in to the
    /// encapsulating route. A DF-clear packet is fragmented as IPv4 there:
    /// ip6_forward never fragments a forwarded packet, so the kernel datapath
    /// cannot fragment after encapsulation (RFC 2473 7.2); the userspace
    /// datapath does.
    fn gate(&self, mtu: u32, ops: &mut Vec<Op>) {
        ops.push(Op::Veth {
            ns: self.ns.into(),
            name: self.gate_in.clone(),
            peer_ns: self.ns.into(),
            peer_name: self.gate_out.clone(),
            mtu,
        });
        ops.push(Op::Up {
            ns: self.ns.into(),
            iface: self.gate_out.clone(),
        });
        // What the endpoint itself sends (192.0.0.x, the AFTR's replies) comes back
        // in on `swb` with a local source address: not a martian here.
        ops.push(Op::Sysctl {
            ns: self.ns.into(),
            key: format!("net.ipv4.conf.{}.accept_local", self.gate_out),
            value: "1".into(),
        });
    }

    /// A route into the gate: ip_forward checks the MTU on its way out of `swa`.
    fn route_into_gate(&self, to: ipnetwork::Ipv4Network, table: u32) -> Op {
        Op::PairRoute {
            ns: self.ns.into(),
            to,
            gate: GATE,
            dev: self.gate_in.clone(),
            peer: self.gate_out.clone(),
            table,
        }
    }

    /// What comes back in on `swb` (softwire `id` at the AFTR, by the mark)
    /// is encapsulated toward `segment`.
    fn encapsulate(&self, ops: &mut Vec<Op>, id: Option<u32>, segment: std::net::Ipv6Addr) {
        let table = ENCAP_TABLE + id.unwrap_or(0);
        ops.push(Op::Rule {
            ns: self.ns.into(),
            v6: false,
            pref: RULE_PREF_ENCAP + id.unwrap_or(0),
            iif: Some(self.gate_out.clone()),
            to: None,
            ipproto: None,
            fwmark: id,
            table,
        });
        ops.push(Op::Seg6Encap {
            ns: self.ns.into(),
            to: default_route(),
            segment,
            dev: self.dev.clone(),
            table,
        });
    }

    /// At the AFTR, each softwire's outer packets get a mark (B4 index + 1)
    /// before decapsulation (nf_hooks_lwtunnel keeps it through End.DX4), the
    /// inner connection gets that number as its original-direction conntrack
    /// zone, so two B4s with the same inner 5-tuple are two connections, and
    /// replies go back into the right softwire by the connection's mark and a
    /// policy rule. The pool's unused addresses are blackholed.
    fn aftr(&self, tun: &Tunnel, d: &Dslite, ops: &mut Vec<Op>) {
        for (i, b) in d.b4s.iter().enumerate() {
            let id = i as u32 + 1;
            ops.push(Op::Rule {
                ns: self.ns.into(),
                v6: false,
                pref: RULE_PREF_SOFTWIRE + id,
                iif: None,
                to: None,
                ipproto: None,
                fwmark: Some(id),
                table: DECAP_TABLE + id,
            });
            ops.push(self.route_into_gate(default_route(), DECAP_TABLE + id));
            self.encapsulate(ops, Some(id), b.address);
        }
        for p in &d.aftr.pool {
            ops.push(Op::Blackhole {
                ns: self.ns.into(),
                to: IpNetwork::V4(*p),
            });
        }
        ops.push(Op::Nftables {
            ns: self.ns.into(),
            ruleset: aftr_ruleset(&tun.name, d),
        });
    }
}

fn default_route() -> ipnetwork::Ipv4Network {
    "0.0.0.0/0".parse().expect("default")
}

fn userspace(tun: &Tunnel, d: &Dslite, role: Role, ns: &str, ops: &mut Vec<Op>) {
    let dev = tun.tun_name();
    ops.push(Op::Tun {
        tap: false,
        single_queue: false,
        ns: ns.into(),
        name: dev.clone(),
    });
    ops.push(Op::LinkSet {
        ns: ns.into(),
        iface: dev.clone(),
        mtu: TUN_MTU.max(d.mtu),
    });
    // The codec sources ICMP errors from the softwire address the TUN holds:
    // accept_local lets the kernel take them back in. And no IPv6 on the TUN (no
    // link-local, router solicitations or MLD reports for the codec to drop).
    for (k, v) in [("ipv4", "accept_local", "1"), ("ipv6", "disable_ipv6", "1")]
        .map(|(fam, key, v)| (format!("net.{fam}.conf.{dev}.{key}"), v))
    {
        ops.push(Op::Sysctl {
            ns: ns.into(),
            key: k,
            value: v.into(),
        });
    }
    let (softwire_v4, routes) = match role {
        Role::Aftr => (AFTR_SOFTWIRE_V4, d.aftr.pool.clone()),
        Role::B4(i) => (B4_SOFTWIRE_V4, d.b4s[i].routes.clone()),
        Role::Peer(_) => return,
    };
    ops.push(Op::Address {
        ns: ns.into(),
        iface: dev.clone(),
        addr: IpNetwork::new(IpAddr::V4(softwire_v4), 32).expect("/32"),
    });
    for r in routes {
        ops.push(Op::Route {
            ns: ns.into(),
            to: IpNetwork::V4(r),
            via: None,
            dev: Some(dev.clone()),
            metric: None,
        });
    }
}

/// The gate's two ends: routes send into `swa-T`, packets come back on `swb-T`
/// (tunnel names are short enough for `tun-T`, the same length).
fn gate_names(tunnel: &str) -> (String, String) {
    (format!("swa-{tunnel}"), format!("swb-{tunnel}"))
}

/// nftables table names carry the tunnel so a reader of `nft list ruleset` knows
/// whose rules they are.
fn table_name(tunnel: &str) -> String {
    format!("tunbench_{}", tunnel.replace('-', "_"))
}

/// The B4 clamps the MSS of SYNs both ways (prerouting sees the LAN side and,
/// with nf_hooks_lwtunnel, the decapsulated side), so TCP fits the softwire
/// without a round of path MTU discovery. Conntrack, if anything in the
/// namespace turns it on, skips the gate's return end.
fn b4_ruleset(tunnel: &str, mss: Option<u16>) -> String {
    let mut s = format!("table ip {} {{\n", table_name(tunnel));
    s += &gate_chain(tunnel);
    if let Some(mss) = mss {
        let _ = writeln!(
            s,
            "  chain clamp {{\n    type filter hook prerouting priority mangle; policy accept;\n    tcp flags & (syn | rst) == syn tcp option maxseg size > {mss} tcp option maxseg size set {mss}\n  }}"
        );
    }
    s += "}\n";
    s + &reassembly_table(tunnel)
}

/// seg6local decapsulates without reassembling (End.DX4 sees next header 44 and
/// drops), so IPv6 fragments of the softwire (RFC 2473 7.2) need conntrack's
/// IPv6 defragmentation, which runs once any conntrack expression is loaded in
/// the namespace (the AFTR's NAT44 has them). At the B4 it is turned on for IPv6
/// only, and everything but fragments skips it.
fn reassembly_table(tunnel: &str) -> String {
    format!(
        "table ip6 {} {{\n  chain unfragmented {{\n    type filter hook prerouting priority -450; policy accept;\n    ip6 nexthdr != ipv6-frag notrack\n  }}\n  chain reassemble {{\n    type filter hook prerouting priority raw; policy accept;\n    ct state untracked accept\n  }}\n}}\n",
        table_name(tunnel)
    )
}

/// Packets back in on the gate's `swb` end are untracked, before conntrack's
/// defragmentation (priority -400) can reassemble what the gate fragmented.
fn gate_chain(tunnel: &str) -> String {
    format!(
        "  chain gate {{\n    type filter hook prerouting priority -450; policy accept;\n    iifname \"{}\" notrack\n  }}\n",
        gate_names(tunnel).1
    )
}

fn aftr_ruleset(tunnel: &str, d: &Dslite) -> String {
    let mut elements = Vec::new();
    for (i, b) in d.b4s.iter().enumerate() {
        elements.push(format!("{} : {}", b.address, i + 1));
    }
    let mut s = String::new();
    let _ = writeln!(s, "table inet {} {{", table_name(tunnel));
    let _ = writeln!(
        s,
        "  map softwires {{\n    type ipv6_addr : mark\n    elements = {{ {} }}\n  }}",
        elements.join(", ")
    );
    // Outer packets: mark by B4 (the mark survives End.DX4); unknown B4s dropped.
    let _ = writeln!(
        s,
        "  chain outer {{\n    type filter hook prerouting priority -400; policy accept;\n    ip6 daddr {a} ip6 nexthdr 4 meta mark set ip6 saddr map @softwires\n    ip6 daddr {a} ip6 nexthdr 4 meta mark 0 drop\n  }}",
        a = d.aftr.address
    );
    s += &gate_chain(tunnel);
    // Inner packets: only the B4's own prefixes, each softwire its own zone. The
    // gate's return end carries what this already saw once.
    let _ = writeln!(
        s,
        "  chain inner {{\n    type filter hook prerouting priority raw; policy accept;\n    iifname \"{}\" accept",
        gate_names(tunnel).1
    );
    for (i, b) in d.b4s.iter().enumerate() {
        let id = i + 1;
        let mut allowed = vec![B4_SOFTWIRE_V4.to_string()];
        allowed.extend(b.prefixes.iter().map(|p| p.to_string()));
        let _ = writeln!(
            s,
            "    meta nfproto ipv4 meta mark {id} ip saddr != {{ {} }} drop\n    meta nfproto ipv4 meta mark {id} ct original zone set {id}",
            allowed.join(", ")
        );
    }
    let _ = writeln!(s, "  }}");
    // The softwire is remembered on the connection; replies are marked with it so
    // the policy rule sends them back into the same softwire.
    let _ = writeln!(
        s,
        "  chain remember {{\n    type filter hook prerouting priority mangle; policy accept;\n    meta nfproto ipv4 ct state new meta mark != 0 ct mark set meta mark\n    meta nfproto ipv4 ct direction original meta mark set 0\n    meta nfproto ipv4 ct direction reply meta mark set ct mark\n  }}"
    );
    let _ = writeln!(
        s,
        "  chain local_replies {{\n    type route hook output priority mangle; policy accept;\n    meta nfproto ipv4 ct direction reply meta mark set ct mark\n  }}"
    );
    let pool = d
        .aftr
        .pool
        .first()
        .map(|p| {
            if p.prefix() == 32 {
                p.ip().to_string()
            } else {
                format!("{}-{}", p.network(), p.broadcast())
            }
        })
        .unwrap_or_default();
    let _ = writeln!(
        s,
        "  chain nat44 {{\n    type nat hook postrouting priority srcnat; policy accept;\n    meta nfproto ipv4 ct mark != 0 ct direction original snat ip to {pool}\n  }}"
    );
    let _ = writeln!(s, "}}");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aftr_ruleset_keys_nat_by_softwire() {
        let t = crate::topology::parse_str(
            include_str!("../../../tests/fixtures/dslite/two-b4.toml"),
            std::path::Path::new("two-b4.toml"),
        )
        .unwrap();
        let tun = &t.tunnels[0];
        let crate::topology::tunnel::TunnelKind::Dslite(d) = &tun.kind else {
            unreachable!()
        };
        let r = aftr_ruleset(&tun.name, d);
        assert!(r.contains("2001:2:0:a1::2 : 1, 2001:2:0:a2::2 : 2"), "{r}");
        assert!(r.contains("meta mark 2 ct original zone set 2"), "{r}");
        assert!(r.contains("snat ip to 198.18.31.1"), "{r}");
    }

    /// A kernel endpoint routes IPv4 into the softwire through its MTU gate, and
    /// only what comes back in on the gate is encapsulated.
    #[test]
    fn kernel_endpoints_route_through_the_mtu_gate() {
        let t = crate::topology::parse_str(
            include_str!("../../../tests/fixtures/dslite/two-b4.toml"),
            std::path::Path::new("two-b4.toml"),
        )
        .unwrap();
        let ops = ops(&t, &t.tunnels[0], &|n| format!("l-{}", t.nodes[n].name));
        let lines: Vec<String> = ops.iter().map(|o| o.to_string()).collect();
        let has = |needle: &str| {
            assert!(
                lines.iter().any(|l| l.contains(needle)),
                "no `{needle}` in:\n{}",
                lines.join("\n")
            )
        };
        has(
            "ip -n l-b4a link add swa-sw mtu 1460 up type veth peer name swb-sw netns l-b4a mtu 1460",
        );
        has("ip -n l-b4a route add 0.0.0.0/0 via 192.0.0.3 dev swa-sw onlink table 254");
        has("ip -n l-b4a -4 rule add pref 10000 iif swb-sw lookup 4700");
        has(
            "ip -n l-b4a route add 0.0.0.0/0 encap seg6 mode encap.red segs 2001:2:0:a0::2 dev wan table 4700",
        );
        has("ip -n l-aftr -4 rule add pref 20002 fwmark 2 lookup 4602");
        has("ip -n l-aftr route add 0.0.0.0/0 via 192.0.0.3 dev swa-sw onlink table 4602");
        has("ip -n l-aftr -4 rule add pref 10002 iif swb-sw fwmark 2 lookup 4702");
        has(
            "ip -n l-aftr route add 0.0.0.0/0 encap seg6 mode encap.red segs 2001:2:0:a2::2 dev ngn table 4702",
        );
        assert!(
            !lines
                .iter()
                .any(|l| l.contains("encap seg6") && l.contains("table 254")),
            "an encapsulating route in main bypasses the gate:\n{}",
            lines.join("\n")
        );
    }
}
