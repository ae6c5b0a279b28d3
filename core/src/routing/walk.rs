//! A packet's walk from node to node: delivery, traces, and whether an
//! echo's reply finds its way back (through a softwire's NAT44 too).

use super::tunnels::{Nat, SOFTWIRE};
use super::{Arrival, Hop, KERNEL_DEFAULT_TTL, Router, ipv6_hop_limit};
use std::net::IpAddr;

impl Router<'_> {
    /// The softwire (its index in the topology's tunnels) a packet from `from`
    /// to `dst` crosses, if it is delivered through one.
    pub fn softwire_on_the_way(&self, from: usize, dst: IpAddr) -> Option<usize> {
        self.deliver_nat(from, None, dst).ok()?.1.map(|n| n.tunnel)
    }

    /// Plain delivery without softwires (their own underlay).
    pub(super) fn deliver_underlay(&self, from: usize, dst: IpAddr) -> Result<usize, String> {
        self.deliver_nat(from, None, dst).map(|(n, _)| n)
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
