//! A pure model of how the lab's kernels will route: connected subnets, static
//! routes, longest prefix match, forwarding on or off, L2 segments through switches.
//! `check` uses it to know which probes must succeed; `validate` uses it to find
//! configurations that can never work.

use super::model::Topology;
use super::tunnel::{B4, Tunnel, TunnelKind};
use super::wireguard::Wireguard;

/// Next-hop interfaces named like this stand for a softwire, not a device.
const SOFTWIRE: &str = "softwire:";

/// What a softwire's NAT44 did to a packet on its way.
#[derive(Debug, Clone, Copy)]
struct Nat {
    b4: usize,
    aftr: usize,
    /// None: an external AFTR whose pool the file does not give; its own
    /// network routes the pool back to it.
    pool: Option<IpAddr>,
}
use ipnetwork::IpNetwork;
use std::net::IpAddr;

/// Where a node sends a packet for some destination.
#[derive(Debug, Clone, PartialEq)]
pub struct NextHop {
    pub iface: String,
    /// None: the destination is on the link itself.
    pub gateway: Option<IpAddr>,
}

pub struct Router<'t> {
    topo: &'t Topology,
    segments: Vec<Vec<(usize, String)>>,
}

impl<'t> Router<'t> {
    pub fn new(topo: &'t Topology) -> Self {
        Router {
            topo,
            segments: topo.segments(),
        }
    }

    /// Connected prefixes of a node: (prefix, device). Addresses on lo are local only.
    fn connected(&self, node: usize) -> Vec<(IpNetwork, String)> {
        let mut v = Vec::new();
        for (dev, a) in self.topo.node_addresses(node) {
            if dev == "lo" {
                continue;
            }
            if let Ok(net) = IpNetwork::new(a.network(), a.prefix()) {
                v.push((net, dev));
            }
        }
        v
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
        let connected = self.connected(node);
        for (net, dev) in &connected {
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
        for (tunnel, w, i) in self.wireguard_peers(node) {
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
        for (tunnel, b4) in self.softwires_from(node) {
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
    fn wireguard_peers(&self, node: usize) -> Vec<(&'t Tunnel, &'t Wireguard, usize)> {
        let mut v = Vec::new();
        for t in &self.topo.tunnels {
            if let Some(w) = t.overlay() {
                if let Some(i) = w.peers.iter().position(|p| p.node == node) {
                    v.push((t, w, i));
                }
            }
        }
        v
    }

    /// A packet that peer `node` sends into WireGuard device `iface` comes out
    /// of the neighbour whose allowed IPs hold `dst`, if the underlay delivers.
    fn through_wireguard(
        &self,
        node: usize,
        iface: &str,
        dst: IpAddr,
    ) -> Option<Result<usize, String>> {
        let (tun, w, i) = self
            .wireguard_peers(node)
            .into_iter()
            .find(|(t, _, _)| t.tun_name() == iface)?;
        let Some(j) = w.peer_for(i, dst) else {
            return Some(Err(format!(
                "{dst} is in no allowed IPs of a peer of {} in tunnel {}",
                self.topo.nodes[node].name, tun.name
            )));
        };
        let there = w.peers[j].node;
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
                        Ok(there)
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
    fn softwires_from(&self, node: usize) -> Vec<(&'t str, &'t B4)> {
        let mut v = Vec::new();
        for t in &self.topo.tunnels {
            let TunnelKind::Dslite(d) = &t.kind else {
                continue;
            };
            for b in &d.b4s {
                if b.node == node {
                    v.push((t.name.as_str(), b));
                }
            }
        }
        v
    }

    /// A packet that a B4 sends into softwire `tunnel` comes out of the AFTR,
    /// if the IPv6 underlay between the two delivers.
    fn through_softwire(&self, node: usize, tunnel: &str) -> Result<(usize, Nat), String> {
        let t = self
            .topo
            .tunnels
            .iter()
            .find(|t| t.name == tunnel)
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
        Ok((
            there,
            Nat {
                b4: node,
                aftr: there,
                pool,
            },
        ))
    }

    /// Plain delivery without softwires (their own underlay).
    fn deliver_underlay(&self, from: usize, dst: IpAddr) -> Result<usize, String> {
        self.deliver_nat(from, dst).map(|(n, _)| n)
    }

    fn owns(&self, node: usize, addr: IpAddr) -> bool {
        self.topo
            .node_addresses(node)
            .iter()
            .any(|(_, a)| a.ip() == addr)
    }

    /// Which node on the segment of (node, iface) answers ARP/ND for `addr`.
    fn neighbour(&self, node: usize, iface: &str, addr: IpAddr) -> Option<usize> {
        let seg = self
            .segments
            .iter()
            .find(|s| s.iter().any(|(n, i)| *n == node && i == iface))?;
        seg.iter()
            .map(|(n, _)| *n)
            .find(|&n| n != node && self.owns(n, addr))
    }

    /// Follows a packet from `from` to `dst` hop by hop. Ok(node that holds dst), or
    /// the reason it is dropped.
    pub fn deliver(&self, from: usize, dst: IpAddr) -> Result<usize, String> {
        self.deliver_nat(from, dst).map(|(n, _)| n)
    }

    /// Like `deliver`, and says whether a softwire's NAT44 rewrote the source on
    /// the way (the reply then goes to the pool address and back through the
    /// softwire).
    fn deliver_nat(&self, from: usize, dst: IpAddr) -> Result<(usize, Option<Nat>), String> {
        let name = |n: usize| self.topo.nodes[n].name.clone();
        let mut nat = None;
        let ttl = self.initial_ttl(from, dst);
        let mut cur = from;
        // `hop` is how many links the packet has crossed; a router forwards only
        // while the TTL it received is above 1.
        for hop in 0..=ttl {
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
                nat = Some(n);
                cur = there;
                continue;
            }
            if let Some(r) = self.through_wireguard(cur, &nh.iface, dst) {
                cur = r?;
                continue;
            }
            let target = nh.gateway.unwrap_or(dst);
            cur = self.neighbour(cur, &nh.iface, target).ok_or_else(|| {
                format!("nothing on {}:{} answers for {target}", name(cur), nh.iface)
            })?;
        }
        Err(format!("the TTL of {} runs out toward {dst}", name(from)))
    }

    /// The TTL / hop limit a node's own packets start with (kernel default 64).
    fn initial_ttl(&self, node: usize, dst: IpAddr) -> u32 {
        let key = if dst.is_ipv4() {
            "net.ipv4.ip_default_ttl"
        } else {
            "net.ipv6.conf.all.hop_limit"
        };
        self.topo.nodes[node]
            .sysctls
            .get(key)
            .and_then(|v| v.parse().ok())
            .unwrap_or(64)
    }

    /// The source address `node` uses toward `dst`: an address of the egress
    /// interface, else any address of the family on the node.
    pub fn source_for(&self, node: usize, dst: IpAddr) -> Option<IpAddr> {
        let nh = self.lookup(node, dst)?;
        let addrs = self.topo.node_addresses(node);
        let same = |a: &IpNetwork| a.is_ipv4() == dst.is_ipv4();
        addrs
            .iter()
            .find(|(d, a)| *d == nh.iface && same(a))
            .or_else(|| addrs.iter().find(|(_, a)| same(a)))
            .map(|(_, a)| a.ip())
    }

    /// Whether an ICMP echo from `from` to `dst` gets its reply.
    pub fn echo_works(&self, from: usize, dst: IpAddr) -> Result<(), String> {
        let src = self
            .source_for(from, dst)
            .ok_or_else(|| format!("{} has no route to {dst}", self.topo.nodes[from].name))?;
        let (there, nat) = self.deliver_nat(from, dst)?;
        let Some(nat) = nat else {
            return self
                .deliver(there, src)
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
        self.deliver(nat.b4, src)
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
}
