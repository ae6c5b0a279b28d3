//! Carries out a plan over netlink. Namespaces are made on worker threads (each
//! thread unshares into the new namespace and opens the netlink socket there);
//! everything after that is netlink requests, pipelined: all the ops of a phase
//! are in flight at once across every namespace.

use crate::ops::{HostAttach, Op, Phase, Plan};
use crate::{namespace, sysctl};
use futures::TryStreamExt;
use futures::future::try_join_all;
use netlink_packet_route::address::{AddressAttribute, AddressFlags};
use netlink_packet_route::link::{InfoData, InfoKind, InfoVeth, LinkAttribute, State};
use netlink_packet_route::link::{IpVlanMode, MacVlanMode};
use rtnetlink::{
    Handle, LinkBridge, LinkIpVlan, LinkMacVlan, LinkMessageBuilder, LinkUnspec, LinkVeth,
    LinkVlan, RouteMessageBuilder,
};
use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set from a signal handler; checked between phases and between namespaces.
#[derive(Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst)
    }
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("step {step} of {total}, `{what}`: {reason}")]
    Step {
        step: usize,
        total: usize,
        what: String,
        reason: String,
    },
    #[error("interrupted")]
    Cancelled,
    #[error("namespace {0} was made by someone else while the lab was being built")]
    Taken(String),
}

/// The marker on every lab namespace's lo: ownership is in the kernel object
/// itself, so `clean` can find a lab's namespaces even without its state file.
pub fn marker(lab: &str) -> String {
    format!("tunbench.{lab}")
}

/// Words for a netlink error: "File exists (os error 17)".
pub fn reason(e: rtnetlink::Error) -> String {
    match e {
        rtnetlink::Error::NetlinkError(m) => match m.code {
            Some(c) => io::Error::from_raw_os_error(-c.get()).to_string(),
            None => "unexpected acknowledgement".into(),
        },
        other => other.to_string(),
    }
}

/// The errno of a netlink error, if it is one.
pub(crate) fn errno(e: &rtnetlink::Error) -> Option<i32> {
    match e {
        rtnetlink::Error::NetlinkError(m) => m.code.map(|c| -c.get()),
        _ => None,
    }
}

struct Ns {
    handle: Handle,
    /// Kept open to give veth peers a target (IFLA_NET_NS_FD).
    file: File,
}

/// Devices a plan makes are numbered from here (lo is 1 in every namespace).
const FIRST_LINK_INDEX: u32 = 10;

/// Called after each phase with the phase and how many ops it ran.
pub type Progress<'a> = &'a (dyn Fn(Phase, usize) + Sync);

pub async fn apply(plan: &Plan, cancel: &Cancel, progress: Progress<'_>) -> Result<(), ApplyError> {
    let total = plan.ops.len();
    let numbered: Vec<(usize, &Op)> = plan
        .ops
        .iter()
        .enumerate()
        .map(|(i, o)| (i + 1, o))
        .collect();
    let fail = |step: usize, op: &Op, reason: String| ApplyError::Step {
        step,
        total,
        what: op.to_string(),
        reason,
    };
    let phase = |p: Phase| {
        numbered
            .iter()
            .filter(move |(_, o)| o.phase() == p)
            .copied()
    };

    // Namespaces, on two worker threads (the machine's cores); each returns the
    // netlink socket it opened inside the namespace.
    let ns_ops: Vec<(usize, Op)> = phase(Phase::Namespaces)
        .map(|(i, o)| (i, o.clone()))
        .collect();
    let workers = 2.min(ns_ops.len()).max(1);
    let mut chunks: Vec<Vec<(usize, Op)>> = vec![Vec::new(); workers];
    for (k, op) in ns_ops.into_iter().enumerate() {
        chunks[k % workers].push(op);
    }
    let mut threads = Vec::new();
    for chunk in chunks {
        let cancel = cancel.clone();
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            let _ = tx.send(make_namespaces(chunk, &cancel));
        });
        threads.push(rx);
    }
    let mut sockets: Vec<(String, RawFd)> = Vec::new();
    let mut first_err = None;
    for rx in threads {
        match rx.await {
            Ok(Ok(v)) => sockets.extend(v),
            Ok(Err(e)) => first_err = first_err.or(Some(e)),
            Err(_) => first_err = first_err.or(Some(NsFail::Thread)),
        }
    }
    if let Some(e) = first_err {
        for (_, fd) in sockets {
            // SAFETY: the fd came from into_raw_fd and is owned by nobody else.
            drop(unsafe { netlink_sys::Socket::from_raw_fd(fd) });
        }
        return Err(match e {
            NsFail::Cancelled => ApplyError::Cancelled,
            NsFail::Thread => ApplyError::Step {
                step: 0,
                total,
                what: "namespace worker".into(),
                reason: "thread panicked".into(),
            },
            NsFail::Step(step, reason) => fail(step, &plan.ops[step - 1], reason),
            NsFail::Taken(ns) => ApplyError::Taken(ns),
        });
    }
    let mut nss: HashMap<String, Ns> = HashMap::new();
    for (name, fd) in sockets {
        // SAFETY: fd is a netlink socket handed over by the worker thread.
        let sock = unsafe { netlink_sys::TokioSocket::from_raw_fd(fd) };
        let (conn, handle, _) = rtnetlink::from_socket(sock);
        tokio::spawn(conn);
        let file = namespace::open(&name).map_err(|e| ApplyError::Step {
            step: 0,
            total,
            what: format!("open namespace {name}"),
            reason: e.to_string(),
        })?;
        nss.insert(name, Ns { handle, file });
    }
    progress(Phase::Namespaces, nss.len());
    check(cancel)?;

    // The host's interfaces, for links made from them: a netlink socket in the
    // namespace this thread is in (the one tunbench runs in), and their indexes.
    let host = if plan.ops.iter().any(|o| matches!(o, Op::HostLink { .. })) {
        let host_fail = |why: String| ApplyError::Step {
            step: 0,
            total,
            what: "reading the host's interfaces".into(),
            reason: why,
        };
        let (_, file) = crate::host::HostNetns::current().map_err(|e| host_fail(e.to_string()))?;
        let handle = crate::socket::handle_in_file(&file).map_err(|e| host_fail(e.to_string()))?;
        let links: Vec<_> = handle
            .link()
            .get()
            .execute()
            .try_collect()
            .await
            .map_err(|e| host_fail(reason(e)))?;
        let index: HashMap<String, u32> = links
            .iter()
            .flat_map(|l| {
                l.attributes.iter().filter_map(|a| match a {
                    LinkAttribute::IfName(n) => Some((n.clone(), l.header.index)),
                    _ => None,
                })
            })
            .collect();
        Some((handle, index))
    } else {
        None
    };

    // lo up (it was marked as it was made), bridges and veths.
    let lo = nss.keys().map(|name| {
        let h = nss[name].handle.clone();
        async move {
            h.link()
                .set(LinkUnspec::new_with_index(1).up().build())
                .execute()
                .await
                .map_err(|e| (0, format!("setting lo up in {name}: {}", reason(e))))
        }
    });
    let links = phase(Phase::Links).enumerate().map(|(k, (step, op))| {
        let nss = &nss;
        // Explicit, distinct ifindexes for the two ends of each veth: when both ends
        // get the same index (each namespace counts from 2), the kernel treats their
        // carrier change as non-urgent and delays it by up to a second
        // (linkwatch_urgent_event compares ifindex with iflink).
        let (index, peer_index) = (
            FIRST_LINK_INDEX + 2 * k as u32,
            FIRST_LINK_INDEX + 1 + 2 * k as u32,
        );
        let host = &host;
        async move {
            let ns = &nss[op.ns()];
            let r = match op {
                Op::HostLink {
                    name,
                    host: iface,
                    attach,
                    mtu,
                    ..
                } => {
                    let Some((h, host_index)) = host else {
                        unreachable!("host handle made for host links")
                    };
                    let Some(&lower) = host_index.get(iface) else {
                        return Err((
                            step,
                            format!("no interface {iface} in the host's namespace"),
                        ));
                    };
                    let fd = ns.file.as_raw_fd();
                    // Made over the host's socket, so IFLA_LINK (and, for a move,
                    // the index) names the host's interface; IFLA_NET_NS_FD puts
                    // the device in the node's namespace.
                    let made = match attach {
                        HostAttach::Macvlan => {
                            let m = LinkMacVlan::new(name, lower, MacVlanMode::Bridge);
                            h.link().add(made_in(m, fd, index, *mtu)).execute().await
                        }
                        HostAttach::Ipvlan => {
                            let m = LinkIpVlan::new(name, lower, IpVlanMode::L2);
                            h.link().add(made_in(m, fd, index, *mtu)).execute().await
                        }
                        HostAttach::Vlan(id) => {
                            let m = LinkVlan::new(name, lower, *id);
                            h.link().add(made_in(m, fd, index, *mtu)).execute().await
                        }
                        // One request: into the node, renamed (the kernel renames
                        // after the move, while it is down), MTU, up.
                        HostAttach::Move => {
                            let m = LinkUnspec::new_with_index(lower)
                                .setns_by_fd(fd)
                                .name(name.clone())
                                .mtu(*mtu)
                                .up()
                                .append_extra_attribute(LinkAttribute::NewIfIndex(index as i32));
                            h.link().set(m.build()).execute().await
                        }
                    };
                    return made.map_err(|e| (step, host_link_reason(*attach, iface, e)));
                }
                Op::Bridge { name, mtu, .. } => {
                    ns.handle
                        .link()
                        .add(LinkBridge::new(name).mtu(*mtu).up().build())
                        .execute()
                        .await
                }
                Op::Veth {
                    name,
                    peer_ns,
                    peer_name,
                    mtu,
                    ..
                } => {
                    let peer = LinkUnspec::new_with_name(peer_name)
                        .setns_by_fd(nss[peer_ns.as_str()].file.as_raw_fd())
                        .index(peer_index)
                        .mtu(*mtu)
                        .build();
                    let msg = LinkMessageBuilder::<LinkVeth>::new_with_info_kind(InfoKind::Veth)
                        .name(name.clone())
                        .index(index)
                        .mtu(*mtu)
                        .up()
                        .set_info_data(InfoData::Veth(InfoVeth::Peer(peer)))
                        .build();
                    ns.handle.link().add(msg).execute().await
                }
                Op::Tun { .. } => return Ok(()),
                _ => unreachable!("phase filter"),
            };
            r.map_err(|e| (step, reason(e)))
        }
    });
    // TUN devices: an ioctl, made on a thread inside the namespace.
    for (step, op) in phase(Phase::Links) {
        if let Op::Tun {
            ns,
            name,
            tap,
            single_queue,
        } = op
        {
            let (name, tap, single) = (name.clone(), *tap, *single_queue);
            namespace::run_in(ns, move || {
                if single {
                    crate::tun::create_with(&name, crate::tun::SINGLE_QUEUE_FLAGS)
                } else {
                    crate::tun::create(&name, tap)
                }
            })
            .map_err(|e| fail(step, op, e.to_string()))?;
        }
    }
    let n_links = phase(Phase::Links).count();
    let (a, b) = futures::join!(try_join_all(lo), try_join_all(links));
    for r in [a.map(|_| ()), b.map(|_| ())] {
        r.map_err(|(step, why)| {
            if step == 0 {
                ApplyError::Step {
                    step: 0,
                    total,
                    what: "namespace setup".into(),
                    reason: why,
                }
            } else {
                fail(step, &plan.ops[step - 1], why)
            }
        })?;
    }
    progress(Phase::Links, n_links);
    check(cancel)?;

    // Interface indexes, one dump per namespace.
    let dumps = nss.iter().map(|(name, ns)| async move {
        let links: Vec<_> = ns
            .handle
            .link()
            .get()
            .execute()
            .try_collect()
            .await
            .map_err(|e| format!("listing links in {name}: {}", reason(e)))?;
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
        Ok::<_, String>((name.clone(), m))
    });
    let index: HashMap<String, HashMap<String, (u32, Vec<u8>)>> = try_join_all(dumps)
        .await
        .map_err(|why| ApplyError::Step {
            step: 0,
            total,
            what: "reading interface indexes".into(),
            reason: why,
        })?
        .into_iter()
        .collect();
    let link = |step: usize, op: &Op, ns: &str, name: &str| {
        index
            .get(ns)
            .and_then(|m| m.get(name))
            .ok_or_else(|| fail(step, op, format!("no interface {name} in namespace {ns}")))
    };
    let ifindex = |step: usize, op: &Op, ns: &str, name: &str| -> Result<u32, ApplyError> {
        link(step, op, ns, name).map(|(i, _)| *i)
    };

    // Sysctls that name a device: on a thread inside each namespace.
    let sysctls: Vec<(usize, &Op)> = phase(Phase::Sysctls).collect();
    for (step, op) in &sysctls {
        if let Op::Sysctl { ns, key, value } = op {
            let (k, v) = (key.clone(), value.clone());
            namespace::run_in(ns, move || sysctl::write(&k, &v))
                .map_err(|e| fail(*step, op, e.to_string()))?;
        }
    }
    progress(Phase::Sysctls, sysctls.len());
    check(cancel)?;

    // The rest is one netlink request per op: all of a phase in flight at once.
    for ph in [Phase::Ports, Phase::Addresses, Phase::Routes] {
        let mut requests = Vec::new();
        for (step, op) in phase(ph) {
            let h = nss[op.ns()].handle.clone();
            let index = |name: &str| ifindex(step, op, op.ns(), name);
            let request = match op {
                Op::Port { iface, bridge, .. } => Request::Link(
                    LinkUnspec::new_with_index(index(iface)?)
                        .controller(index(bridge)?)
                        .build(),
                ),
                Op::Up { iface, .. } => {
                    Request::Link(LinkUnspec::new_with_index(index(iface)?).up().build())
                }
                Op::LinkSet { iface, mtu, .. } => Request::Link(
                    LinkUnspec::new_with_index(index(iface)?)
                        .mtu(*mtu)
                        .up()
                        .build(),
                ),
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
                Op::Blackhole { to, .. } => {
                    let mut m = route_message(*to, None, None, None);
                    m.header.kind = netlink_packet_route::route::RouteType::BlackHole;
                    m.header.scope = netlink_packet_route::route::RouteScope::Universe;
                    Request::Route(m)
                }
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
                        m.attributes
                            .push(netlink_packet_route::rule::RuleAttribute::Iifname(
                                i.clone(),
                            ));
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
                    let mac = link(step, op, op.ns(), peer)?.1.clone();
                    let route = RouteMessageBuilder::<std::net::Ipv4Addr>::new()
                        .destination_prefix(to.network(), to.prefix())
                        .gateway(*gate)
                        .output_interface(oif)
                        .onlink()
                        .table_id(*table)
                        .build();
                    Request::PairRoute {
                        oif,
                        gate: *gate,
                        mac,
                        route,
                    }
                }
                Op::Address { iface, addr, .. } => Request::Address(index(iface)?, *addr),
                Op::Route {
                    to,
                    via,
                    dev,
                    metric,
                    ..
                } => Request::Route(route_message(
                    *to,
                    *via,
                    dev.as_deref().map(index).transpose()?,
                    *metric,
                )),
                _ => continue,
            };
            requests.push(async move { request.send(h).await.map_err(|e| (step, reason(e))) });
        }
        let n = requests.len();
        try_join_all(requests)
            .await
            .map_err(|(step, why)| fail(step, &plan.ops[step - 1], why))?;
        progress(ph, n);
        check(cancel)?;
    }
    // nftables rulesets: `nft -f -` run inside the namespace.
    let rulesets: Vec<(usize, &Op)> = phase(Phase::Firewall).collect();
    for (step, op) in &rulesets {
        match op {
            Op::Nftables { ns, ruleset } => {
                crate::nft::load(ns, ruleset).map_err(|e| fail(*step, op, e))?
            }
            Op::Tc { ns, batch } => crate::tc::run(ns, batch).map_err(|e| fail(*step, op, e))?,
            Op::SteerByFlow { ns, iface } => {
                crate::steer::by_flow(ns, iface).map_err(|e| fail(*step, op, e))?
            }
            _ => {}
        }
    }
    if !rulesets.is_empty() {
        progress(Phase::Firewall, rulesets.len());
    }
    wait_for_carrier(plan, &nss).await;
    Ok(())
}

/// A device made over the host's socket, in the node's namespace `ns_fd`,
/// with its index, MTU, and up.
fn made_in<T>(
    b: LinkMessageBuilder<T>,
    ns_fd: RawFd,
    index: u32,
    mtu: u32,
) -> netlink_packet_route::link::LinkMessage {
    b.setns_by_fd(ns_fd).index(index).mtu(mtu).up().build()
}

/// Words for a host link that failed, naming a driver this kernel lacks (the
/// kernel answers EOPNOTSUPP for a link kind it does not have).
fn host_link_reason(attach: HostAttach, host: &str, e: rtnetlink::Error) -> String {
    match (attach, errno(&e)) {
        (HostAttach::Ipvlan, Some(libc::EOPNOTSUPP)) => {
            "this kernel has no ipvlan driver (CONFIG_IPVLAN); use macvlan or move the interface".into()
        }
        (HostAttach::Vlan(_), Some(libc::EOPNOTSUPP)) => {
            "this kernel has no 802.1Q VLAN driver (CONFIG_VLAN_8021Q); give each LAN its own host interface (macvlan or move)".into()
        }
        (HostAttach::Macvlan, Some(libc::EOPNOTSUPP)) => {
            "this kernel has no macvlan driver (CONFIG_MACVLAN); move the interface instead".into()
        }
        (HostAttach::Macvlan | HostAttach::Ipvlan | HostAttach::Vlan(_), Some(libc::EINVAL)) => {
            format!(
                "{} (a device on {host} may not have a larger MTU than {host} itself)",
                reason(e)
            )
        }
        (HostAttach::Vlan(_), Some(libc::ENETDOWN)) => {
            format!("{host} is down in the host, and a VLAN device needs its interface up")
        }
        _ => reason(e),
    }
}

/// `ip route add PREFIX encap seg6 mode encap.red segs SEGMENT dev DEV table T`.
pub(crate) fn seg6_encap_message(
    to: ipnetwork::Ipv4Network,
    segment: std::net::Ipv6Addr,
    oif: u32,
    table: u32,
) -> netlink_packet_route::route::RouteMessage {
    use netlink_packet_route::route::{RouteSeg6IpTunnel, Seg6Header, Seg6Mode};
    // SEG6_IPTUN_MODE_ENCAP_RED: reduced encapsulation, no SRH for one segment.
    const ENCAP_RED: u32 = 3;
    let mut header = Seg6Header::default();
    header.mode = Seg6Mode::Other(ENCAP_RED);
    header.segments = vec![segment];
    RouteMessageBuilder::<std::net::Ipv4Addr>::new()
        .destination_prefix(to.network(), to.prefix())
        .output_interface(oif)
        .table_id(table)
        .scope(netlink_packet_route::route::RouteScope::Link)
        .encap_seg6(vec![RouteSeg6IpTunnel::Seg6(header)])
        .build()
}

/// `ip -6 route add SID/128 encap seg6local action End.DX4 nh4 0.0.0.0 dev DEV table T`:
/// nh4 0.0.0.0 routes the decapsulated packet by its own destination.
pub(crate) fn seg6local_message(
    sid: std::net::Ipv6Addr,
    oif: u32,
    table: u32,
) -> netlink_packet_route::route::RouteMessage {
    use netlink_packet_route::route::{RouteSeg6LocalTunnel, Seg6LocalAction};
    RouteMessageBuilder::<std::net::Ipv6Addr>::new()
        .destination_prefix(sid, 128)
        .output_interface(oif)
        .table_id(table)
        .encap_seg6local(vec![
            RouteSeg6LocalTunnel::Action(Seg6LocalAction::EndDx4),
            RouteSeg6LocalTunnel::Nh4(std::net::Ipv4Addr::UNSPECIFIED),
        ])
        .build()
}

fn rule_message(
    v6: bool,
    pref: u32,
    to: Option<ipnetwork::IpNetwork>,
    ipproto: Option<u8>,
    fwmark: Option<u32>,
    table: u32,
) -> netlink_packet_route::rule::RuleMessage {
    use netlink_packet_route::rule::{RuleAction, RuleAttribute, RuleMessage};
    use netlink_packet_route::{AddressFamily, IpProtocol};
    let mut m = RuleMessage::default();
    m.header.family = if v6 {
        AddressFamily::Inet6
    } else {
        AddressFamily::Inet
    };
    m.header.action = RuleAction::ToTable;
    // Tables above 255 go in FRA_TABLE; the header says RT_TABLE_UNSPEC.
    m.header.table = 0;
    m.attributes.push(RuleAttribute::Table(table));
    m.attributes.push(RuleAttribute::Priority(pref));
    if let Some(to) = to {
        m.header.dst_len = to.prefix();
        m.attributes.push(RuleAttribute::Destination(to.ip()));
    }
    if let Some(p) = ipproto {
        m.attributes
            .push(RuleAttribute::IpProtocol(IpProtocol::from(p as i32)));
    }
    if let Some(mark) = fwmark {
        m.attributes.push(RuleAttribute::FwMark(mark));
    }
    m
}

/// One netlink request, built ahead so a phase's requests can all be in flight.
enum Request {
    Link(netlink_packet_route::link::LinkMessage),
    Address(u32, ipnetwork::IpNetwork),
    Route(netlink_packet_route::route::RouteMessage),
    Rule(netlink_packet_route::rule::RuleMessage),
    /// Add `lookup local` at this priority, then delete it at priority 0.
    LocalRuleAt(u32),
    /// The gateway's permanent neighbour entry, then the route through it.
    PairRoute {
        oif: u32,
        gate: std::net::Ipv4Addr,
        mac: Vec<u8>,
        route: netlink_packet_route::route::RouteMessage,
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
                use netlink_packet_route::rule::RuleAttribute;
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

fn route_message(
    to: ipnetwork::IpNetwork,
    via: Option<IpAddr>,
    oif: Option<u32>,
    metric: Option<u32>,
) -> netlink_packet_route::route::RouteMessage {
    use netlink_packet_route::route::RouteAttribute;
    let mut m = match (to, via) {
        (ipnetwork::IpNetwork::V4(n), via) => {
            let b = RouteMessageBuilder::<std::net::Ipv4Addr>::new()
                .destination_prefix(n.network(), n.prefix());
            match via {
                Some(IpAddr::V4(g)) => b.gateway(g),
                _ => b,
            }
            .build()
        }
        (ipnetwork::IpNetwork::V6(n), via) => {
            let b = RouteMessageBuilder::<std::net::Ipv6Addr>::new()
                .destination_prefix(n.network(), n.prefix());
            match via {
                Some(IpAddr::V6(g)) => b.gateway(g),
                _ => b,
            }
            .build()
        }
    };
    if via.is_none() {
        // On-link, as `ip route add PREFIX dev X` makes it.
        m.header.scope = netlink_packet_route::route::RouteScope::Link;
    }
    if let Some(i) = oif {
        m.attributes.push(RouteAttribute::Oif(i));
    }
    if let Some(p) = metric {
        m.attributes.push(RouteAttribute::Priority(p));
    }
    m
}

/// How long `apply` waits for every veth to be operationally up: this, or
/// `CARRIER_WAIT_PER_LINK` per link when that is longer (a lab of thousands of
/// links gives the kernel's link watcher thousands of devices to work through).
const CARRIER_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
const CARRIER_WAIT_PER_LINK: std::time::Duration = std::time::Duration::from_millis(10);

/// A veth carries traffic only once the kernel's link watcher has seen its carrier
/// and given it a real qdisc (until then it drops), which can lag `up` by up to a
/// second. Wait for that, so a lab is usable the moment `up` returns; a device that
/// never comes up is left for `check` to report.
async fn wait_for_carrier(plan: &Plan, nss: &HashMap<String, Ns>) {
    let mut want: HashMap<&str, Vec<&str>> = HashMap::new();
    for op in &plan.ops {
        if let Op::Veth {
            ns,
            name,
            peer_ns,
            peer_name,
            ..
        } = op
        {
            want.entry(ns).or_default().push(name);
            want.entry(peer_ns).or_default().push(peer_name);
        }
        if let Op::HostLink { ns, name, .. } = op {
            want.entry(ns).or_default().push(name);
        }
    }
    let links = want.values().map(|d| d.len()).sum::<usize>() / 2;
    let deadline =
        tokio::time::Instant::now() + CARRIER_WAIT.max(CARRIER_WAIT_PER_LINK * links as u32);
    while !want.is_empty() && tokio::time::Instant::now() < deadline {
        let polls = want.iter().map(|(ns, devs)| async move {
            let links: Vec<_> = nss[*ns]
                .handle
                .link()
                .get()
                .execute()
                .try_collect()
                .await
                .unwrap_or_default();
            let up: Vec<String> = links
                .iter()
                .filter(|l| {
                    l.attributes
                        .iter()
                        .any(|a| matches!(a, LinkAttribute::OperState(State::Up)))
                })
                .filter_map(|l| {
                    l.attributes.iter().find_map(|a| {
                        if let LinkAttribute::IfName(n) = a {
                            Some(n.clone())
                        } else {
                            None
                        }
                    })
                })
                .collect();
            (*ns, devs.iter().all(|d| up.iter().any(|u| u == d)))
        });
        let mut late = Vec::new();
        for (ns, done) in futures::future::join_all(polls).await {
            if done {
                want.remove(ns);
            } else {
                late.push(ns);
            }
        }
        // Ask each device still waiting for its link state the way ethtool
        // does: the kernel then handles that device's pending link event at
        // once, instead of in its next batch (the link watcher takes a batch
        // of devices, then waits up to a second before the next; thousands of
        // veths once took 20 s to come up).
        let files: Vec<(File, Vec<String>)> = late
            .iter()
            .filter_map(|ns| {
                let f = nss[*ns].file.try_clone().ok()?;
                Some((f, want[*ns].iter().map(|d| d.to_string()).collect()))
            })
            .collect();
        if !files.is_empty() {
            let _ = tokio::task::spawn_blocking(move || sync_link_state(files)).await;
        }
        // A dump per namespace still waiting: with many devices, poll less often.
        // Every 5 ms on a chain of 2,000 nodes, the dumps took the CPU the link
        // watcher needed, and 5 s passed with links still down; every 50 ms,
        // the last carrier came up 0.08 s after the routes.
        if !want.is_empty() {
            let devices: usize = want.values().map(|d| d.len()).sum();
            let pause = if devices > 100 { 50 } else { 5 };
            tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
        }
    }
}

/// ETHTOOL_GLINK on each device, from inside its namespace (one thread that
/// enters each in turn). The answer does not matter: asking makes the kernel
/// bring the device's carrier state up to date (linkwatch_sync_dev).
fn sync_link_state(namespaces: Vec<(File, Vec<String>)>) {
    const ETHTOOL_GLINK: u32 = 0x0000000a;
    #[repr(C)]
    struct EthtoolValue {
        cmd: u32,
        data: u32,
    }
    #[repr(C)]
    struct IfReq {
        name: [u8; libc::IFNAMSIZ],
        data: *mut EthtoolValue,
        _pad: [u8; 16],
    }
    let _ = std::thread::spawn(move || {
        for (file, devices) in namespaces {
            if nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET).is_err() {
                continue;
            }
            // SAFETY: a plain socket call; the fd is closed below.
            let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) };
            if fd < 0 {
                continue;
            }
            for dev in devices {
                let mut value = EthtoolValue {
                    cmd: ETHTOOL_GLINK,
                    data: 0,
                };
                let mut req = IfReq {
                    name: [0; libc::IFNAMSIZ],
                    data: &mut value,
                    _pad: [0; 16],
                };
                let n = dev.len().min(libc::IFNAMSIZ - 1);
                req.name[..n].copy_from_slice(&dev.as_bytes()[..n]);
                // SAFETY: SIOCETHTOOL reads the ifreq and the ethtool_value it
                // points to, both alive for the call.
                unsafe { libc::ioctl(fd, libc::SIOCETHTOOL, &mut req as *mut IfReq) };
            }
            // SAFETY: fd came from socket() above.
            unsafe { libc::close(fd) };
        }
    })
    .join();
}

fn check(c: &Cancel) -> Result<(), ApplyError> {
    if c.is_cancelled() {
        Err(ApplyError::Cancelled)
    } else {
        Ok(())
    }
}

enum NsFail {
    Cancelled,
    Thread,
    Step(usize, String),
    Taken(String),
}

/// Add the lab's marker to lo (index 1) as an altname, over a netlink socket of
/// the namespace, waiting for the kernel's answer.
fn mark_lo(sock: &netlink_sys::Socket, marker: &str) -> io::Result<()> {
    use netlink_packet_core::{
        NLM_F_ACK, NLM_F_APPEND, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REQUEST, NetlinkMessage,
        NetlinkPayload,
    };
    use netlink_packet_route::RouteNetlinkMessage;
    use netlink_packet_route::link::{LinkMessage, Prop};
    let mut m = LinkMessage::default();
    m.header.index = 1;
    m.attributes
        .push(LinkAttribute::PropList(vec![Prop::AltIfName(
            marker.to_string(),
        )]));
    let mut req = NetlinkMessage::from(RouteNetlinkMessage::NewLinkProp(m));
    req.header.flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_EXCL | NLM_F_CREATE | NLM_F_APPEND;
    req.header.sequence_number = 1;
    req.finalize();
    let mut out = vec![0; req.buffer_len()];
    req.serialize(&mut out);
    sock.send(&out, 0)?;
    let mut buf = vec![0u8; 8192];
    let n = sock.recv(&mut &mut buf[..], 0)?;
    let answer = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&buf[..n])
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
    match answer.payload {
        NetlinkPayload::Error(e) if e.code.is_some() => Err(e.to_io()),
        _ => Ok(()),
    }
}

/// On a worker thread of its own: each namespace is made by unsharing into it,
/// so the thread ends up inside the last one and is never reused.
fn make_namespaces(ops: Vec<(usize, Op)>, cancel: &Cancel) -> Result<Vec<(String, RawFd)>, NsFail> {
    let mut out = Vec::new();
    let result = (|| {
        for (step, op) in ops {
            if cancel.is_cancelled() {
                return Err(NsFail::Cancelled);
            }
            let Op::Namespace {
                ns,
                sysctls,
                marker,
                ..
            } = op
            else {
                continue;
            };
            namespace::create_here(&ns).map_err(|e| {
                if e.kind() == io::ErrorKind::AlreadyExists {
                    NsFail::Taken(ns.clone())
                } else {
                    NsFail::Step(step, e.to_string())
                }
            })?;
            // Marked at once: `down` removes only namespaces that carry the lab's
            // marker, so one made but unmarked when `up` dies would be left behind.
            let marked = netlink_sys::Socket::new(netlink_sys::protocols::NETLINK_ROUTE)
                .map_err(|e| NsFail::Step(step, format!("netlink socket: {e}")))
                .and_then(|sock| {
                    mark_lo(&sock, &marker)
                        .map_err(|e| NsFail::Step(step, format!("marking lo in {ns}: {e}")))?;
                    Ok(sock)
                });
            let sock = match marked {
                Ok(sock) => sock,
                Err(e) => {
                    // Made here a moment ago, so ours, though `down` could not tell.
                    let _ = namespace::delete(&ns);
                    return Err(e);
                }
            };
            for (k, v) in &sysctls {
                sysctl::write(k, v)
                    .map_err(|e| NsFail::Step(step, format!("sysctl {k}={v}: {e}")))?;
            }
            out.push((ns, sock.into_raw_fd()));
        }
        Ok(())
    })();
    match result {
        Ok(()) => Ok(out),
        Err(e) => {
            for (_, fd) in out {
                // SAFETY: fd came from into_raw_fd above.
                drop(unsafe { netlink_sys::Socket::from_raw_fd(fd) });
            }
            Err(e)
        }
    }
}
