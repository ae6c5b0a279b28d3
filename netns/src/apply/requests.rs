//! The ports, addresses and routes phases: one netlink request per op, all of
//! a phase in flight at once across every namespace.

use super::messages::{
    blackhole_message, onlink_message, route_message, rule_message, seg6_encap_message,
    seg6local_message,
};
use super::{ApplyError, Namespaces, Steps};
use crate::netlink::reason;
use crate::ops::{Op, Phase};
use futures::TryStreamExt;
use futures::future::try_join_all;
use netlink_packet_route::address::{AddressAttribute, AddressFlags};
use netlink_packet_route::link::{LinkAttribute, LinkMessage};
use netlink_packet_route::route::RouteMessage;
use netlink_packet_route::rule::{RuleAttribute, RuleMessage};
use rtnetlink::{Handle, LinkMessageBuilder, LinkUnspec};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};

/// Every namespace's devices by name, with their index and MAC: read once,
/// after the links phase.
pub(super) struct Devices(HashMap<String, HashMap<String, (u32, Vec<u8>)>>);

impl Devices {
    /// One link dump per namespace, all at once.
    pub(super) async fn read(steps: &Steps<'_>, nss: &Namespaces) -> Result<Devices, ApplyError> {
        let dumps = nss.iter().map(|(name, ns)| async move {
            let links: Vec<LinkMessage> = ns
                .handle
                .link()
                .get()
                .execute()
                .try_collect()
                .await
                .map_err(|e| format!("listing links in {name}: {}", reason(e)))?;
            Ok::<_, String>((name.clone(), by_name(links)))
        });
        let all = try_join_all(dumps)
            .await
            .map_err(|why| steps.setup_fail("reading interface indexes", why))?;
        Ok(Devices(all.into_iter().collect()))
    }

    /// Device `name` of namespace `ns`, which step `step` needs.
    fn get(
        &self,
        steps: &Steps,
        step: usize,
        ns: &str,
        name: &str,
    ) -> Result<&(u32, Vec<u8>), ApplyError> {
        self.0
            .get(ns)
            .and_then(|m| m.get(name))
            .ok_or_else(|| steps.fail(step, format!("no interface {name} in namespace {ns}")))
    }
}

/// (index, MAC) of each device, by name.
fn by_name(links: Vec<LinkMessage>) -> HashMap<String, (u32, Vec<u8>)> {
    let mut m = HashMap::new();
    for l in links {
        let mac = l.attributes.iter().find_map(|a| match a {
            LinkAttribute::Address(mac) => Some(mac.clone()),
            _ => None,
        });
        for a in &l.attributes {
            if let LinkAttribute::IfName(n) = a {
                m.insert(n.clone(), (l.header.index, mac.clone().unwrap_or_default()));
            }
        }
    }
    m
}

/// Send every request of `phase` at once. How many there were.
pub(super) async fn send_phase(
    steps: &Steps<'_>,
    phase: Phase,
    nss: &Namespaces,
    devices: &Devices,
) -> Result<usize, ApplyError> {
    let mut requests = Vec::new();
    for (step, op) in steps.phase(phase) {
        let h = nss[op.ns()].handle.clone();
        let index = |name: &str| devices.get(steps, step, op.ns(), name).map(|d| d.0);
        let mac = |name: &str| devices.get(steps, step, op.ns(), name).map(|d| d.1.clone());
        let Some(request) = request_for(op, index, mac)? else {
            continue;
        };
        requests.push(async move { request.send(h).await.map_err(|e| (step, reason(e))) });
    }
    let n = requests.len();
    try_join_all(requests)
        .await
        .map_err(|(step, why)| steps.fail(step, why))?;
    Ok(n)
}

/// The request that carries out `op`, given its namespace's device indexes
/// and MACs by name; None for an op of no request.
fn request_for(
    op: &Op,
    index: impl Fn(&str) -> Result<u32, ApplyError>,
    mac: impl Fn(&str) -> Result<Vec<u8>, ApplyError>,
) -> Result<Option<Request>, ApplyError> {
    let link = |m: LinkMessageBuilder<LinkUnspec>| Request::Link(m.build());
    let request = match op {
        Op::Port { iface, bridge, .. } => {
            link(LinkUnspec::new_with_index(index(iface)?).controller(index(bridge)?))
        }
        Op::Up { iface, .. } => link(LinkUnspec::new_with_index(index(iface)?).up()),
        Op::LinkSet { iface, mtu, .. } => {
            link(LinkUnspec::new_with_index(index(iface)?).mtu(*mtu).up())
        }
        Op::Address { iface, addr, .. } => Request::Address(index(iface)?, *addr),
        Op::Route {
            to,
            via,
            dev,
            metric,
            ..
        } => {
            let oif = dev.as_deref().map(&index).transpose()?;
            Request::Route(route_message(*to, *via, oif, *metric))
        }
        Op::Seg6Encap {
            to,
            segment,
            dev,
            table,
            ..
        } => Request::Route(seg6_encap_message(*to, *segment, index(dev)?, *table)),
        Op::Seg6Local {
            sid, dev, table, ..
        } => Request::Route(seg6local_message(*sid, index(dev)?, *table)),
        Op::Blackhole { to, .. } => Request::Route(blackhole_message(*to)),
        Op::LocalRuleAt { pref, .. } => Request::LocalRuleAt(*pref),
        Op::Rule {
            v6,
            pref,
            iif,
            to,
            ipproto,
            fwmark,
            table,
            ..
        } => {
            let mut m = rule_message(*v6, *pref, *to, *ipproto, *fwmark, *table);
            if let Some(i) = iif {
                m.attributes.push(RuleAttribute::Iifname(i.clone()));
            }
            Request::Rule(m)
        }
        Op::PairRoute {
            to,
            gate,
            dev,
            peer,
            table,
            ..
        } => {
            let oif = index(dev)?;
            Request::PairRoute {
                oif,
                gate: *gate,
                mac: mac(peer)?,
                route: onlink_message(*to, *gate, oif, *table),
            }
        }
        _ => return Ok(None),
    };
    Ok(Some(request))
}

/// One netlink request, built ahead so a phase's requests can all be in flight.
enum Request {
    Link(LinkMessage),
    Address(u32, ipnetwork::IpNetwork),
    Route(RouteMessage),
    Rule(RuleMessage),
    /// Add `lookup local` at this priority, then delete it at priority 0.
    LocalRuleAt(u32),
    /// The gateway's permanent neighbour entry, then the route through it.
    PairRoute {
        oif: u32,
        gate: Ipv4Addr,
        mac: Vec<u8>,
        route: RouteMessage,
    },
}

impl Request {
    async fn send(self, h: Handle) -> Result<(), rtnetlink::Error> {
        match self {
            Request::Link(m) => h.link().set(m).execute().await,
            Request::Address(index, addr) => {
                let mut req = h.address().add(index, addr.ip(), addr.prefix());
                if addr.is_ipv6() {
                    // Usable at once: no duplicate address detection in a lab we own.
                    req.message_mut()
                        .attributes
                        .push(AddressAttribute::Flags(AddressFlags::Nodad));
                }
                req.execute().await
            }
            Request::Route(m) => h.route().add(m).execute().await,
            Request::PairRoute {
                oif,
                gate,
                mac,
                route,
            } => {
                // Replace: several routes (and tables) share one gateway entry.
                h.neighbours()
                    .add(oif, IpAddr::V4(gate))
                    .link_layer_address(&mac)
                    .replace()
                    .execute()
                    .await?;
                h.route().add(route).execute().await
            }
            Request::Rule(m) => {
                let mut req = h.rule().add();
                *req.message_mut() = m;
                req.execute().await
            }
            Request::LocalRuleAt(pref) => {
                const RT_TABLE_LOCAL: u32 = 255;
                let local = |pref: u32| {
                    let mut m = rule_message(true, pref, None, None, None, RT_TABLE_LOCAL);
                    m.attributes
                        .retain(|a| !matches!(a, RuleAttribute::Priority(0)));
                    m
                };
                let mut add = h.rule().add();
                *add.message_mut() = local(pref);
                add.execute().await?;
                h.rule().del(local(0)).execute().await
            }
        }
    }
}
