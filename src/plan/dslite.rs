//! The kernel objects of a DS-Lite softwire's endpoints.
//!
//! kernel datapath (no ip6tnl on this kernel): SRv6 reduced encapsulation with one
//! segment puts exactly IPv6 (next header 4) + IPv4 on the wire, and seg6local
//! End.DX4 takes it off again. The endpoint address is one of the node's own, so a
//! rule placed before `lookup local` steers protocol-4 packets to it into the
//! decapsulating route while everything else (ping, ND) stays local.
//! NAT44 at a kernel AFTR is nftables: each softwire's outer packets get a mark
//! (B4 index + 1) before decapsulation (nf_hooks_lwtunnel keeps it through End.DX4),
//! the inner connection gets that number as its original-direction conntrack zone,
//! so two B4s with the same inner 5-tuple are two connections, and replies go back
//! into the right softwire by the connection's mark and a policy rule.
//!
//! userspace datapath: a persistent TUN the datapath process attaches to; the
//! kernel routes the softwire's IPv4 into it.

use crate::topology::Topology;
use crate::topology::tunnel::{AFTR_SOFTWIRE_V4, B4_SOFTWIRE_V4, Datapath, Dslite, Role, Tunnel};
use ipnetwork::IpNetwork;
use netns::Op;
use std::fmt::Write;
use std::net::IpAddr;

/// The routing table holding the decapsulating seg6local route.
pub const DECAP_TABLE: u32 = 4600;
/// Per-softwire return tables at the AFTR: DECAP_TABLE + B4 index + 1.
const RULE_PREF_DECAP: u32 = 100;
const RULE_PREF_SOFTWIRE: u32 = 200;
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
    let crate::topology::tunnel::TunnelKind::Dslite(d) = &tun.kind;
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
    };
    let dev = device_of(t, node, IpAddr::V6(own));
    ops.push(Op::Address {
        ns: ns.into(),
        iface: "lo".into(),
        addr: IpNetwork::new(IpAddr::V4(softwire_v4), 32).expect("/32"),
    });
    ops.push(Op::LocalRuleAt {
        ns: ns.into(),
        pref: LOCAL_RULE_PREF,
    });
    ops.push(Op::Rule {
        ns: ns.into(),
        v6: true,
        pref: RULE_PREF_DECAP,
        to: Some(IpNetwork::new(IpAddr::V6(own), 128).expect("/128")),
        ipproto: Some(4),
        fwmark: None,
        table: DECAP_TABLE,
    });
    ops.push(Op::Seg6Local {
        ns: ns.into(),
        sid: own,
        dev: dev.clone(),
        table: DECAP_TABLE,
    });
    match role {
        Role::B4(i) => {
            for r in &d.b4s[i].routes {
                ops.push(Op::Seg6Encap {
                    ns: ns.into(),
                    to: *r,
                    segment: d.aftr.address,
                    dev: dev.clone(),
                    table: MAIN_TABLE,
                });
            }
            if let Some(mss) = d.mss {
                ops.push(Op::Nftables {
                    ns: ns.into(),
                    ruleset: b4_ruleset(&tun.name, mss),
                });
            }
        }
        Role::Aftr => {
            for (i, b) in d.b4s.iter().enumerate() {
                let id = i as u32 + 1;
                ops.push(Op::Rule {
                    ns: ns.into(),
                    v6: false,
                    pref: RULE_PREF_SOFTWIRE + id,
                    to: None,
                    ipproto: None,
                    fwmark: Some(id),
                    table: DECAP_TABLE + id,
                });
                ops.push(Op::Seg6Encap {
                    ns: ns.into(),
                    to: "0.0.0.0/0".parse().expect("default"),
                    segment: b.address,
                    dev: dev.clone(),
                    table: DECAP_TABLE + id,
                });
            }
            for p in &d.aftr.pool {
                ops.push(Op::Blackhole {
                    ns: ns.into(),
                    to: IpNetwork::V4(*p),
                });
            }
            ops.push(Op::Nftables {
                ns: ns.into(),
                ruleset: aftr_ruleset(&tun.name, d),
            });
        }
    }
}

fn userspace(tun: &Tunnel, d: &Dslite, role: Role, ns: &str, ops: &mut Vec<Op>) {
    let dev = tun.tun_name();
    ops.push(Op::Tun {
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

/// nftables table names carry the tunnel so a reader of `nft list ruleset` knows
/// whose rules they are.
fn table_name(tunnel: &str) -> String {
    format!("tunbench_{}", tunnel.replace('-', "_"))
}

/// The B4 clamps the MSS of SYNs both ways (prerouting sees the LAN side and,
/// with nf_hooks_lwtunnel, the decapsulated side): seg6's forwarding path skips
/// the IPv4 MTU check, so TCP must never send more than the softwire carries.
fn b4_ruleset(tunnel: &str, mss: u16) -> String {
    format!(
        "table ip {t} {{\n  chain clamp {{\n    type filter hook prerouting priority mangle; policy accept;\n    tcp flags & (syn | rst) == syn tcp option maxseg size > {mss} tcp option maxseg size set {mss}\n  }}\n}}\n",
        t = table_name(tunnel)
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
    // Inner packets: only the B4's own prefixes, each softwire its own zone.
    let _ = writeln!(
        s,
        "  chain inner {{\n    type filter hook prerouting priority raw; policy accept;"
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
            include_str!("../../tests/dslite/two-b4.toml"),
            std::path::Path::new("two-b4.toml"),
        )
        .unwrap();
        let tun = &t.tunnels[0];
        let crate::topology::tunnel::TunnelKind::Dslite(d) = &tun.kind;
        let r = aftr_ruleset(&tun.name, d);
        assert!(r.contains("2001:2:0:a1::2 : 1, 2001:2:0:a2::2 : 2"), "{r}");
        assert!(r.contains("meta mark 2 ct original zone set 2"), "{r}");
        assert!(r.contains("snat ip to 198.18.31.1"), "{r}");
    }
}
