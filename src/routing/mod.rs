//! A pure model of how the lab's kernels will route: connected subnets, static
//! routes, longest prefix match, forwarding on or off, L2 segments through switches.
//! `check` uses it to know which probes must succeed; `validate` uses it to find
//! configurations that can never work.

use crate::topology::resolved::Topology;
use crate::topology::tunnel::{B4, Tunnel, TunnelKind};
use crate::topology::wireguard::Wireguard;

/// Next-hop interfaces named like this stand for a softwire, not a device.
const SOFTWIRE: &str = "softwire:";

/// What a softwire's NAT44 did to a packet on its way.
#[derive(Debug, Clone, Copy)]
struct Nat {
    /// The softwire's index in the topology's tunnels.
    tunnel: usize,
    b4: usize,
    /// The softwire's IPv6 endpoints.
    b4_address: std::net::Ipv6Addr,
    aftr: usize,
    aftr_address: std::net::Ipv6Addr,
    /// None: an external AFTR whose pool the file does not give; its own
    /// network routes the pool back to it.
    pool: Option<IpAddr>,
}
use ipnetwork::IpNetwork;
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

/// Where a node sends a packet for some destination.
#[derive(Debug, Clone, PartialEq)]
pub struct NextHop {
    pub iface: String,
    /// None: the destination is on the link itself.
    pub gateway: Option<IpAddr>,
}

/// One node on the way a packet takes, and how it got there.
#[derive(Debug, Clone, PartialEq)]
pub struct Hop {
    pub node: usize,
    /// None at the source; otherwise the link or tunnel it arrived by.
    pub by: Option<Arrival>,
}

/// How a packet reached a node on its way.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arrival {
    /// Over a link (through switches on the way, if any): it arrives on one of
    /// the node's interfaces.
    Link,
    /// Out of a tunnel entered at the hop before: the underlay carried it,
    /// encapsulated, from `outer_src` to `outer_dst` (endpoint addresses).
    Tunnel {
        /// The tunnel's index in the topology's tunnels.
        tunnel: usize,
        outer_src: IpAddr,
        outer_dst: IpAddr,
    },
}

/// The hop limit Linux puts on IPv6 packets a node sends out of `dev`: the
/// device's own `net.ipv6.conf.<dev>.hop_limit`. A device copies it from
/// `conf.default` when it is made (or moved into the namespace), and tunbench
/// writes a namespace's sysctls before it makes any device there, so a lab's
/// devices start with `conf.default`'s value; only `lo` is older. Linux reads
/// `conf.all.hop_limit` only for a device without IPv6 state (none in a lab)
/// and never copies it to existing devices. Checked on Linux 6.18 with veths
/// in namespaces: all=200 left an existing veth at 64 and its pings left with
/// 64; default=150 gave later veths 150; `conf.<dev>`=100 sent 100.
pub fn ipv6_hop_limit(sysctls: &BTreeMap<String, String>, dev: &str) -> u32 {
    let value = |k: &str| sysctls.get(k).and_then(|v| v.parse().ok());
    value(&format!("net.ipv6.conf.{dev}.hop_limit"))
        .or_else(|| {
            if dev == "lo" {
                None
            } else {
                value("net.ipv6.conf.default.hop_limit")
            }
        })
        .unwrap_or(KERNEL_DEFAULT_TTL)
}

/// Linux's default IPv4 TTL and IPv6 hop limit.
const KERNEL_DEFAULT_TTL: u32 = 64;

pub struct Router<'t> {
    topo: &'t Topology,
    segments: Vec<Vec<(usize, String)>>,
    /// (node, device) -> its segment in `segments`.
    segment_of: HashMap<(usize, String), usize>,
    /// Every address of every node, with its device (`Topology::node_addresses`).
    addresses: Vec<Vec<(String, IpNetwork)>>,
    /// Connected prefixes of each node: (prefix, device). Addresses on lo are local only.
    connected: Vec<Vec<(IpNetwork, String)>>,
    /// The WireGuard tunnels each node is a peer of: (tunnel, its kind, peer index).
    wireguard: Vec<Vec<(&'t Tunnel, &'t Wireguard, usize)>>,
    /// The softwires whose B4 each node is: (tunnel name, B4).
    softwires: Vec<Vec<(&'t str, &'t B4)>>,
}

impl<'t> Router<'t> {
    /// Everything a lookup needs is gathered here once, so that a probe costs
    /// the hops it crosses and not the size of the lab (check asks for n^2 probes).
    pub fn new(topo: &'t Topology) -> Self {
        let segments = topo.segments();
        let mut segment_of = HashMap::new();
        for (i, seg) in segments.iter().enumerate() {
            for k in seg {
                segment_of.insert(k.clone(), i);
            }
        }
        let n = topo.nodes.len();
        let addresses: Vec<_> = (0..n).map(|i| topo.node_addresses(i)).collect();
        let connected = addresses
            .iter()
            .map(|addrs| {
                addrs
                    .iter()
                    .filter(|(dev, _)| dev != "lo")
                    .filter_map(|(dev, a)| {
                        IpNetwork::new(a.network(), a.prefix())
                            .ok()
                            .map(|net| (net, dev.clone()))
                    })
                    .collect()
            })
            .collect();
        let mut wireguard = vec![Vec::new(); n];
        let mut softwires = vec![Vec::new(); n];
        for t in &topo.tunnels {
            if let Some(w) = t.overlay() {
                for (i, p) in w.peers.iter().enumerate() {
                    if let Some(v) = wireguard.get_mut(p.node) {
                        v.push((t, w, i));
                    }
                }
            }
            if let TunnelKind::Dslite(d) = &t.kind {
                for b in &d.b4s {
                    if let Some(v) = softwires.get_mut(b.node) {
                        v.push((t.name.as_str(), b));
                    }
                }
            }
        }
        Router {
            topo,
            segments,
            segment_of,
            addresses,
            connected,
            wireguard,
            softwires,
        }
    }

    /// The kernel's choice for `dst` on `node`: longest prefix, connected before
    /// static at equal length, then the lower metric.
    pub fn lookup(&self, node: usize, dst: IpAddr) -> Option<NextHop> {
        let mut best: Option<(u8, u32, NextHop)> = None;
        let mut offer = |len: u8, metric: u32, nh: NextHop| {
            let better = match &best {
                None => true,
                Some((bl, bm, _)) => len > *bl || (len == *bl && metric < *bm),
            };
            if better {
                best = Some((len, metric, nh));
            }
        };
        let connected = &self.connected[node];
        for (net, dev) in connected {
            if net.contains(dst) {
                offer(
                    net.prefix(),
                    0,
                    NextHop {
                        iface: dev.clone(),
                        gateway: None,
                    },
                );
            }
        }
        for r in &self.topo.nodes[node].routes {
            if !r.to.contains(dst) {
                continue;
            }
            let iface = match (&r.dev, r.via) {
                (Some(d), _) => Some(d.clone()),
                (None, Some(gw)) => connected
                    .iter()
                    .find(|(n, _)| n.contains(gw))
                    .map(|(_, d)| d.clone()),
                (None, None) => None,
            };
            if let Some(iface) = iface {
                offer(
                    r.to.prefix(),
                    r.metric.unwrap_or(1).max(1),
                    NextHop {
                        iface,
                        gateway: r.via,
                    },
                );
            }
        }
        for &(tunnel, w, i) in self.wireguard_peers(node) {
            for r in w.tun_routes(i) {
                if r.contains(dst) {
                    offer(
                        r.prefix(),
                        1,
                        NextHop {
                            iface: tunnel.tun_name(),
                            gateway: None,
                        },
                    );
                }
            }
        }
        for &(tunnel, b4) in self.softwires_from(node) {
            for r in &b4.routes {
                if matches!(dst, IpAddr::V4(v) if r.contains(v)) {
                    offer(
                        r.prefix(),
                        0,
                        NextHop {
                            iface: format!("{SOFTWIRE}{tunnel}"),
                            gateway: None,
                        },
                    );
                }
            }
        }
        best.map(|(_, _, nh)| nh)
    }

    /// The WireGuard tunnels `node` is a peer of: (tunnel, its kind, peer index).
    fn wireguard_peers(&self, node: usize) -> &[(&'t Tunnel, &'t Wireguard, usize)] {
        &self.wireguard[node]
    }

    /// A packet that peer `node` sends into WireGuard device `iface` comes out
    /// of the neighbour whose allowed IPs hold `dst`, if the underlay delivers.
    fn through_wireguard(
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
    fn softwires_from(&self, node: usize) -> &[(&'t str, &'t B4)] {
        &self.softwires[node]
    }

    /// A packet that a B4 sends into softwire `tunnel` comes out of the AFTR,
    /// if the IPv6 underlay between the two delivers.
    fn through_softwire(&self, node: usize, tunnel: &str) -> Result<(usize, Nat), String> {
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

    /// The softwire (its index in the topology's tunnels) a packet from `from`
    /// to `dst` crosses, if it is delivered through one.
    pub fn softwire_on_the_way(&self, from: usize, dst: IpAddr) -> Option<usize> {
        self.deliver_nat(from, None, dst).ok()?.1.map(|n| n.tunnel)
    }

    /// Plain delivery without softwires (their own underlay).
    fn deliver_underlay(&self, from: usize, dst: IpAddr) -> Result<usize, String> {
        self.deliver_nat(from, None, dst).map(|(n, _)| n)
    }

    fn owns(&self, node: usize, addr: IpAddr) -> bool {
        self.addresses[node].iter().any(|(_, a)| a.ip() == addr)
    }

    /// Which node on the segment of (node, iface) answers ARP/ND for `addr`.
    fn neighbour(&self, node: usize, iface: &str, addr: IpAddr) -> Option<usize> {
        let seg = &self.segments[*self.segment_of.get(&(node, iface.to_string()))?];
        seg.iter()
            .map(|(n, _)| *n)
            .find(|&n| n != node && self.owns(n, addr))
    }

    /// Follows a packet from `from` to `dst` hop by hop. Ok(node that holds dst), or
    /// the reason it is dropped.
    pub fn deliver(&self, from: usize, dst: IpAddr) -> Result<usize, String> {
        self.deliver_nat(from, None, dst).map(|(n, _)| n)
    }

    /// `deliver` for a packet from source `src`: a tunnel end drops what comes
    /// from a source outside its peer's allowed IPs, as the codecs do.
    fn deliver_from(&self, from: usize, src: IpAddr, dst: IpAddr) -> Result<usize, String> {
        self.deliver_nat(from, Some(src), dst).map(|(n, _)| n)
    }

    /// Like `deliver`, and says whether a softwire's NAT44 rewrote the source on
    /// the way (the reply then goes to the pool address and back through the
    /// softwire).
    fn deliver_nat(
        &self,
        from: usize,
        src: Option<IpAddr>,
        dst: IpAddr,
    ) -> Result<(usize, Option<Nat>), String> {
        self.follow(from, src, dst, None)
    }

    /// The way a packet from `from` to `dst` takes: the source first, then each
    /// node it reaches, the one that holds `dst` last (switches, which only
    /// bridge, are not hops). Err: the reason it is dropped.
    pub fn trace(&self, from: usize, dst: IpAddr) -> Result<Vec<Hop>, String> {
        let mut hops = Vec::new();
        self.follow(from, None, dst, Some(&mut hops))?;
        Ok(hops)
    }

    /// `deliver_nat`, recording each node reached in `trace` if given.
    fn follow(
        &self,
        from: usize,
        src: Option<IpAddr>,
        dst: IpAddr,
        mut trace: Option<&mut Vec<Hop>>,
    ) -> Result<(usize, Option<Nat>), String> {
        let name = |n: usize| self.topo.nodes[n].name.clone();
        let mut nat = None;
        let ttl = self.initial_ttl(from, dst)?;
        let mut cur = from;
        let mut by = None;
        // `hop` is how many links the packet has crossed; a router forwards only
        // while the TTL it received is above 1.
        for hop in 0..=ttl {
            if let Some(t) = trace.as_deref_mut() {
                t.push(Hop { node: cur, by });
            }
            if self.owns(cur, dst) {
                return Ok((cur, nat));
            }
            if hop >= ttl {
                return Err(format!(
                    "more than {} routers: the TTL / hop limit {ttl} of {} runs out",
                    ttl - 1,
                    name(from)
                ));
            }
            if cur != from && !self.topo.nodes[cur].forwarding {
                return Err(format!("{} does not forward", name(cur)));
            }
            let nh = self
                .lookup(cur, dst)
                .ok_or_else(|| format!("{} has no route to {dst}", name(cur)))?;
            if let Some(tunnel) = nh.iface.strip_prefix(SOFTWIRE) {
                let (there, n) = self.through_softwire(cur, tunnel)?;
                by = Some(Arrival::Tunnel {
                    tunnel: n.tunnel,
                    outer_src: IpAddr::V6(n.b4_address),
                    outer_dst: IpAddr::V6(n.aftr_address),
                });
                nat = Some(n);
                cur = there;
                continue;
            }
            // A NAT44 on the way rewrote the source: the softwire checks its own.
            let src = if nat.is_some() { None } else { src };
            if let Some(r) = self.through_wireguard(cur, &nh.iface, src, dst) {
                let (there, arrival) = r?;
                by = Some(arrival);
                cur = there;
                continue;
            }
            let target = nh.gateway.unwrap_or(dst);
            cur = self.neighbour(cur, &nh.iface, target).ok_or_else(|| {
                format!("nothing on {}:{} answers for {target}", name(cur), nh.iface)
            })?;
            by = Some(Arrival::Link);
        }
        Err(format!("the TTL of {} runs out toward {dst}", name(from)))
    }

    /// The TTL / hop limit a node's own packets toward `dst` start with: IPv4's
    /// is the namespace's `ip_default_ttl`, IPv6's that of the device the packet
    /// leaves by (`ipv6_hop_limit`). Err when the node has no route at all.
    fn initial_ttl(&self, node: usize, dst: IpAddr) -> Result<u32, String> {
        let sysctls = &self.topo.nodes[node].sysctls;
        if dst.is_ipv4() {
            return Ok(sysctls
                .get("net.ipv4.ip_default_ttl")
                .and_then(|v| v.parse().ok())
                .unwrap_or(KERNEL_DEFAULT_TTL));
        }
        if self.owns(node, dst) {
            return Ok(ipv6_hop_limit(sysctls, "lo"));
        }
        let nh = self
            .lookup(node, dst)
            .ok_or_else(|| format!("{} has no route to {dst}", self.topo.nodes[node].name))?;
        Ok(ipv6_hop_limit(sysctls, &nh.iface))
    }

    /// The source address `node` uses toward `dst`: an address of the egress
    /// interface, else, into a tunnel, the node's inner address (charon's
    /// routes for IKEv2, whose inner addresses sit on `lo`, carry it as their
    /// `src`), else any address of the family on the node.
    pub fn source_for(&self, node: usize, dst: IpAddr) -> Option<IpAddr> {
        let nh = self.lookup(node, dst)?;
        let addrs = &self.addresses[node];
        let same = |a: &IpNetwork| a.is_ipv4() == dst.is_ipv4();
        let inner = || {
            self.wireguard_peers(node)
                .iter()
                .filter(|(t, _, _)| t.tun_name() == nh.iface)
                .find_map(|(_, w, i)| w.peers[*i].addresses.iter().find(|a| same(a)))
                .map(|a| a.ip())
        };
        addrs
            .iter()
            .find(|(d, a)| *d == nh.iface && same(a))
            .map(|(_, a)| a.ip())
            .or_else(inner)
            .or_else(|| addrs.iter().find(|(_, a)| same(a)).map(|(_, a)| a.ip()))
    }

    /// Whether an ICMP echo from `from` to `dst` gets its reply.
    pub fn echo_works(&self, from: usize, dst: IpAddr) -> Result<(), String> {
        let src = self
            .source_for(from, dst)
            .ok_or_else(|| format!("{} has no route to {dst}", self.topo.nodes[from].name))?;
        let (there, nat) = self.deliver_nat(from, Some(src), dst)?;
        let Some(nat) = nat else {
            return self
                .deliver_from(there, dst, src)
                .map(|_| ())
                .map_err(|e| format!("no way back: {e}"));
        };
        // NAT44: the reply goes to the pool, which the AFTR holds; it then leaves
        // through the softwire to the B4 and on to the original source. An
        // external AFTR's network routes its own pool when the file does not
        // say what it is.
        if let Some(pool) = nat.pool {
            let at_aftr = self
                .deliver_to_pool(there, pool, nat.aftr)
                .map_err(|e| format!("no way back to the NAT44 pool {pool}: {e}"))?;
            debug_assert_eq!(at_aftr, nat.aftr);
        }
        self.deliver_from(nat.b4, dst, src)
            .map(|_| ())
            .map_err(|e| format!("no way back from the B4: {e}"))
    }

    /// Follow a reply to a pool address until it reaches the AFTR that owns it.
    fn deliver_to_pool(&self, from: usize, pool: IpAddr, aftr: usize) -> Result<usize, String> {
        let mut cur = from;
        for _ in 0..64 {
            if cur == aftr {
                return Ok(cur);
            }
            let name = &self.topo.nodes[cur].name;
            let nh = self
                .lookup(cur, pool)
                .ok_or_else(|| format!("{name} has no route to {pool}"))?;
            let Some(gw) = nh.gateway else {
                return Err(format!("{name} expects {pool} on {} itself", nh.iface));
            };
            cur = self
                .neighbour(cur, &nh.iface, gw)
                .ok_or_else(|| format!("nothing on {name}:{} answers for {gw}", nh.iface))?;
        }
        Err(format!("a loop toward {pool}"))
    }
}

#[cfg(test)]
mod tests {
    use crate::topology::parse_str;
    use std::path::Path;

    const RIM: &str = r#"
name = "rim"
[nodes.a]
kind = "host"
routes = [{ to = "default", via = "198.18.1.1" }]
[nodes.r]
kind = "router"
[nodes.b]
kind = "host"
routes = [{ to = "198.18.1.0/24", via = "198.18.2.1" }]
[nodes.c]
kind = "host"
[[links]]
a = { port = "a:eth0", ipv4 = "198.18.1.2/24" }
b = { port = "r:eth0", ipv4 = "198.18.1.1/24" }
[[links]]
a = { port = "r:eth1", ipv4 = "198.18.2.1/24" }
b = { port = "b:eth0", ipv4 = "198.18.2.2/24" }
[[links]]
a = { port = "r:eth2", ipv4 = "198.18.3.1/24" }
b = { port = "c:eth0", ipv4 = "198.18.3.2/24" }
"#;

    #[test]
    fn echo_needs_a_way_there_and_back() {
        let t = parse_str(RIM, Path::new("rim.toml")).unwrap();
        let r = super::Router::new(&t);
        let (a, b, c) = (
            t.node_index("a").unwrap(),
            t.node_index("b").unwrap(),
            t.node_index("c").unwrap(),
        );
        assert_eq!(r.echo_works(a, "198.18.2.2".parse().unwrap()), Ok(()));
        assert_eq!(r.echo_works(b, "198.18.1.2".parse().unwrap()), Ok(()));
        // c has no route back to a's subnet.
        let e = r.echo_works(a, "198.18.3.2".parse().unwrap()).unwrap_err();
        assert!(
            e.contains("no way back") && e.contains("c has no route"),
            "{e}"
        );
        // b has no route to c's subnet at all.
        assert!(r.echo_works(b, "198.18.3.2".parse().unwrap()).is_err());
        // The router reaches everything on its own links, and c answers its neighbour.
        assert_eq!(
            r.echo_works(t.node_index("r").unwrap(), "198.18.3.2".parse().unwrap()),
            Ok(())
        );
        assert_eq!(r.echo_works(c, "198.18.3.1".parse().unwrap()), Ok(()));
        // A host does not forward: c cannot reach a at all through anything.
        assert!(
            r.echo_works(c, "198.18.1.2".parse().unwrap())
                .unwrap_err()
                .contains("c has no route")
        );
    }

    /// A trace lists the source, each router and the destination's holder,
    /// each with how it got there; a dropped packet is the reason.
    #[test]
    fn a_trace_names_every_hop_and_how_it_was_reached() {
        use super::{Arrival, Hop};
        let t = parse_str(RIM, Path::new("rim.toml")).unwrap();
        let r = super::Router::new(&t);
        let n = |s: &str| t.node_index(s).unwrap();
        assert_eq!(
            r.trace(n("a"), "198.18.2.2".parse().unwrap()),
            Ok(vec![
                Hop {
                    node: n("a"),
                    by: None
                },
                Hop {
                    node: n("r"),
                    by: Some(Arrival::Link)
                },
                Hop {
                    node: n("b"),
                    by: Some(Arrival::Link)
                },
            ])
        );
        let e = r.trace(n("b"), "198.18.3.2".parse().unwrap()).unwrap_err();
        assert!(e.contains("b has no route"), "{e}");
    }

    /// A WireGuard peer and a DS-Lite AFTR outside the lab: the inner
    /// addresses of the external peer are reached through the tunnel, and IPv4
    /// beyond the external AFTR through the softwire, on to what its links and
    /// routes reach.
    #[test]
    fn external_tunnel_ends_carry_the_path() {
        let t = parse_str(
            r#"
name = "xt"
[nodes.client]
kind = "host"
routes = [{ to = "default", via = "198.18.21.1" }]
[nodes.b4]
kind = "router"
routes = [{ to = "default", via = "2001:2:0:11::250" }]
[nodes.aftr]
kind = "external"
addresses = ["2001:2:0:200::1/128"]
[nodes.web]
kind = "external"
[[links]]
a = { port = "client:eth0", ipv4 = "198.18.21.2/24" }
b = { port = "b4:lan", ipv4 = "198.18.21.1/24" }
[[links]]
a = { port = "b4:wan", ipv4 = "198.18.11.2/24", ipv6 = "2001:2:0:11::2/64" }
b = { port = "aftr:lan1", ipv4 = "198.18.11.250/24", ipv6 = "2001:2:0:11::250/64" }
host = "enp1s0"
[[links]]
a = { port = "aftr:inet", ipv4 = "198.18.50.1/24" }
b = { port = "web:eth0", ipv4 = "198.18.50.10/24" }
[tunnels.transix]
kind = "dslite"
aftr = { node = "aftr", address = "2001:2:0:200::1" }
b4 = { node = "b4", address = "2001:2:0:11::2", prefixes = ["198.18.21.0/24"] }
[tunnels.wg]
kind = "wireguard"
peers = [
  { node = "b4", endpoint = "198.18.11.2", address = "198.18.71.2/24" },
  { node = "aftr", endpoint = "198.18.11.250", address = "198.18.71.1/24",
    allowed_ips = ["198.18.72.0/24"], public_key = "AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA=" },
]
"#,
            Path::new("xt.toml"),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let r = super::Router::new(&t);
        let n = |s: &str| t.node_index(s).unwrap();
        // IPv4 beyond the AFTR, through the softwire; the AFTR's own network
        // routes the replies back (no pool given).
        assert_eq!(
            r.echo_works(n("client"), "198.18.50.10".parse().unwrap()),
            Ok(())
        );
        assert_eq!(
            r.echo_works(n("b4"), "198.18.50.1".parse().unwrap()),
            Ok(())
        );
        assert_eq!(
            r.lookup(n("client"), "198.18.50.10".parse().unwrap())
                .unwrap()
                .iface,
            "eth0"
        );
        assert_eq!(
            r.lookup(n("b4"), "198.18.50.10".parse().unwrap())
                .unwrap()
                .iface,
            "softwire:transix"
        );
        // The external peer's inner address, through WireGuard.
        assert_eq!(
            r.echo_works(n("b4"), "198.18.71.1".parse().unwrap()),
            Ok(())
        );
        assert_eq!(
            r.lookup(n("b4"), "198.18.72.9".parse().unwrap())
                .unwrap()
                .iface,
            "wg-wg"
        );
        // Nothing is built for the external ends.
        let plan = crate::plan::plan(&t, &crate::plan::Naming::new("xt", None));
        let text: Vec<String> = plan.ops.iter().map(|o| o.to_string()).collect();
        assert!(
            text.iter()
                .all(|o| !o.contains("xt-aftr") && !o.contains("xt-web"))
        );
        assert!(
            text.iter()
                .any(|o| o.contains("encap seg6 mode encap.red segs 2001:2:0:200::1 dev wan"))
        );
        let jobs = crate::plan::datapath::jobs(&t);
        assert_eq!(
            jobs,
            [(
                crate::plan::datapath::Job::Tunnel("wg".into()),
                "b4".to_string()
            )]
        );
    }

    /// a - r1 - r2 - b over IPv6: a's packets cross two routers, so they need a
    /// hop limit of 3; the reply from b the same.
    fn line(a_sysctls: &str) -> String {
        format!(
            r#"
name = "hl"
[nodes.a]
kind = "host"
routes = [{{ to = "default", via = "2001:2:0:1::1" }}]
sysctls = {{ {a_sysctls} }}
[nodes.r1]
kind = "router"
routes = [{{ to = "2001:2:0:3::/64", via = "2001:2:0:2::2" }}]
[nodes.r2]
kind = "router"
routes = [{{ to = "2001:2:0:1::/64", via = "2001:2:0:2::1" }}]
[nodes.b]
kind = "host"
routes = [{{ to = "default", via = "2001:2:0:3::1" }}]
[[links]]
a = {{ port = "a:eth0", ipv6 = "2001:2:0:1::2/64" }}
b = {{ port = "r1:eth0", ipv6 = "2001:2:0:1::1/64" }}
[[links]]
a = {{ port = "r1:eth1", ipv6 = "2001:2:0:2::1/64" }}
b = {{ port = "r2:eth0", ipv6 = "2001:2:0:2::2/64" }}
[[links]]
a = {{ port = "r2:eth1", ipv6 = "2001:2:0:3::1/64" }}
b = {{ port = "b:eth0", ipv6 = "2001:2:0:3::2/64" }}
"#
        )
    }

    #[test]
    fn ipv6_hop_limit_is_the_interfaces_own_copied_from_default() {
        let m = |kv: &[(&str, &str)]| -> std::collections::BTreeMap<String, String> {
            kv.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        // conf.all is never what a lab's interface uses.
        let all = m(&[("net.ipv6.conf.all.hop_limit", "255")]);
        assert_eq!(super::ipv6_hop_limit(&all, "eth0"), 64);
        // conf.default is copied into every interface made after it is written.
        let default = m(&[("net.ipv6.conf.default.hop_limit", "255")]);
        assert_eq!(super::ipv6_hop_limit(&default, "eth0"), 255);
        // ... but lo exists before any sysctl of the namespace is written.
        assert_eq!(super::ipv6_hop_limit(&default, "lo"), 64);
        // The interface's own setting wins.
        let own = m(&[
            ("net.ipv6.conf.default.hop_limit", "255"),
            ("net.ipv6.conf.eth0.hop_limit", "7"),
        ]);
        assert_eq!(super::ipv6_hop_limit(&own, "eth0"), 7);
        assert_eq!(super::ipv6_hop_limit(&own, "eth1"), 255);
    }

    #[test]
    fn echo_dies_when_the_egress_interfaces_hop_limit_runs_out() {
        let echo = |sysctls: &str| {
            let t =
                parse_str(&line(sysctls), Path::new("hl.toml")).unwrap_or_else(|e| panic!("{e}"));
            let r = super::Router::new(&t);
            r.echo_works(t.node_index("a").unwrap(), "2001:2:0:3::2".parse().unwrap())
        };
        assert_eq!(echo(""), Ok(()));
        let e = echo(r#""net.ipv6.conf.default.hop_limit" = "2""#).unwrap_err();
        assert!(e.contains("hop limit 2 of a runs out"), "{e}");
        assert_eq!(echo(r#""net.ipv6.conf.default.hop_limit" = "3""#), Ok(()));
        // Per interface: eth0 is the way out, so its own value counts.
        let e = echo(
            r#""net.ipv6.conf.default.hop_limit" = "255", "net.ipv6.conf.eth0.hop_limit" = "2""#,
        )
        .unwrap_err();
        assert!(e.contains("runs out"), "{e}");
        assert_eq!(
            echo(
                r#""net.ipv6.conf.default.hop_limit" = "2", "net.ipv6.conf.eth0.hop_limit" = "3""#
            ),
            Ok(())
        );
    }

    #[test]
    fn setting_conf_all_hop_limit_is_refused_with_what_to_set_instead() {
        let e = parse_str(
            &line(r#""net.ipv6.conf.all.hop_limit" = "255""#),
            Path::new("hl.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("hl.toml:") && e.contains("set \"net.ipv6.conf.default.hop_limit\""),
            "{e}"
        );
    }

    /// A tunnel end drops inner packets from sources outside its peer's
    /// allowed IPs (the codecs' `spoofed`): the home topology's server on
    /// LAN2 reaches the PC's end of the NVR500's L2TP/IPsec tunnel only from
    /// its address behind it, 198.18.94.10, never from its LAN2 address.
    #[test]
    fn a_tunnel_end_refuses_sources_outside_its_peers_allowed_ips() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/topologies/nvr500-home.toml"
        ))
        .unwrap();
        let t = parse_str(&text, Path::new("home.toml")).unwrap_or_else(|e| panic!("{e}"));
        let r = super::Router::new(&t);
        let n = |name: &str| t.node_index(name).unwrap();
        let pc_inner = "198.18.94.2".parse().unwrap();
        let e = r.echo_works(n("server"), pc_inner).unwrap_err();
        assert!(
            e.contains("pc drops what nvr500 sends it through tunnel nvr500-l2tp from 198.18.1.10"),
            "{e}"
        );
        // From the PC through the tunnel to the server's address behind it.
        r.echo_works(n("pc"), "198.18.94.10".parse().unwrap())
            .unwrap_or_else(|e| panic!("{e}"));
        // The IKEv2 end's source is its inner address, as strongSwan picks it.
        r.echo_works(n("server"), "198.18.93.2".parse().unwrap())
            .unwrap_or_else(|e| panic!("{e}"));
    }
}
