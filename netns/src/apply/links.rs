//! The links phase: lo up in every namespace, bridges, veths, devices made
//! from the host's interfaces, VXLAN devices on the host's underlay, and TUN
//! devices.

use super::{ApplyError, Namespaces, Ns, Steps};
use crate::features::Feature;
use crate::netlink::{errno, reason};
use crate::ops::{HostAttach, Op, Phase};
use crate::state::HostNetns;
use futures::TryStreamExt;
use futures::future::try_join_all;
use netlink_packet_route::link::{InfoData, InfoKind, InfoVeth, LinkAttribute};
use netlink_packet_route::link::{IpVlanMode, MacVlanMode};
use rtnetlink::{
    Handle, LinkBridge, LinkIpVlan, LinkMacVlan, LinkMessageBuilder, LinkUnspec, LinkVeth,
    LinkVlan, LinkWireguard,
};
use std::collections::HashMap;
use std::os::fd::{AsRawFd, RawFd};

/// Devices a plan makes are numbered from here (lo is 1 in every namespace).
const FIRST_LINK_INDEX: u32 = 10;

/// The host's interfaces, for links made from them: a netlink socket in the
/// namespace this thread is in (the one tunbench runs in), and their indexes.
pub(super) struct Host {
    pub(super) handle: Handle,
    pub(super) index: HashMap<String, u32>,
}

/// The host's side, when the plan makes links from host interfaces.
pub(super) async fn read_host(steps: &Steps<'_>) -> Result<Option<Host>, ApplyError> {
    if !steps
        .plan
        .ops
        .iter()
        .any(|o| matches!(o, Op::HostLink { .. } | Op::Vxlan { .. }))
    {
        return Ok(None);
    }
    let host_fail = |why: String| steps.setup_fail("reading the host's interfaces", why);
    let (_, file) = HostNetns::current().map_err(|e| host_fail(e.to_string()))?;
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
    Ok(Some(Host { handle, index }))
}

/// Make every link of the plan, and set lo up everywhere. How many link ops ran.
pub(super) async fn make_all(
    steps: &Steps<'_>,
    nss: &Namespaces,
    host: Option<&Host>,
) -> Result<usize, ApplyError> {
    make_tuns(steps)?;
    let lo = nss.iter().map(|(name, ns)| lo_up(name, &ns.handle));
    let links = steps
        .phase(Phase::Links)
        .enumerate()
        .map(|(k, (step, op))| make_link(step, op, k, nss, host));
    let (a, b) = futures::join!(try_join_all(lo), try_join_all(links));
    for r in [a.map(|_| ()), b.map(|_| ())] {
        r.map_err(|(step, why)| {
            if step == 0 {
                steps.setup_fail("namespace setup", why)
            } else {
                steps.fail(step, why)
            }
        })?;
    }
    Ok(steps.phase(Phase::Links).count())
}

/// lo up (it was marked as it was made); failures are step 0.
async fn lo_up(name: &str, h: &Handle) -> Result<(), (usize, String)> {
    h.link()
        .set(LinkUnspec::new_with_index(1).up().build())
        .execute()
        .await
        .map_err(|e| (0, format!("setting lo up in {name}: {}", reason(e))))
}

/// TUN devices: an ioctl, made on a thread inside the namespace.
fn make_tuns(steps: &Steps) -> Result<(), ApplyError> {
    for (step, op) in steps.phase(Phase::Links) {
        if let Op::Tun {
            ns,
            name,
            tap,
            single_queue,
        } = op
        {
            let (name, tap, single) = (name.clone(), *tap, *single_queue);
            crate::namespace::run_in(ns, move || {
                if single {
                    crate::tun::create_with(&name, crate::tun::SINGLE_QUEUE_FLAGS)
                } else {
                    crate::tun::create(&name, tap)
                }
            })
            .map_err(|e| {
                // No clone device: a kernel without the TUN driver.
                if e.kind() == std::io::ErrorKind::NotFound {
                    steps.fail(step, format!("{e}: {}", Feature::Tun.unavailable()))
                } else {
                    steps.fail(step, e.to_string())
                }
            })?;
        }
    }
    Ok(())
}

/// The `k`th op of the links phase, step `step`.
async fn make_link(
    step: usize,
    op: &Op,
    k: usize,
    nss: &Namespaces,
    host: Option<&Host>,
) -> Result<(), (usize, String)> {
    let ns = &nss[op.ns()];
    // Explicit, distinct ifindexes for the two ends of each veth: when both ends
    // get the same index (each namespace counts from 2), the kernel treats their
    // carrier change as non-urgent and delays it by up to a second
    // (linkwatch_urgent_event compares ifindex with iflink).
    let index = FIRST_LINK_INDEX + 2 * k as u32;
    let peer_index = index + 1;
    let made = match op {
        Op::HostLink {
            name,
            host: iface,
            attach,
            mtu,
            ..
        } => {
            let host = host.expect("host handle made for host links");
            return make_host_link(host, ns, name, iface, *attach, *mtu, index)
                .await
                .map_err(|why| (step, why));
        }
        Op::Vxlan { .. } => {
            let host = host.expect("host handle made for VXLAN links");
            return super::vxlan::make(host, ns, op, index)
                .await
                .map_err(|why| (step, why));
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
        Op::Wireguard { name, .. } => {
            let m = LinkWireguard::new(name).index(index).build();
            ns.handle.link().add(m).execute().await
        }
        Op::Tun { .. } => return Ok(()),
        _ => unreachable!("phase filter"),
    };
    made.map_err(|e| (step, device_reason(op, e)))
}

/// Words for a bridge or veth pair that failed: a kind this kernel lacks is
/// named as `tunbench doctor` names it.
fn device_reason(op: &Op, e: rtnetlink::Error) -> String {
    let feature = match op {
        Op::Bridge { .. } => Feature::Bridge,
        Op::Wireguard { .. } => Feature::Wireguard,
        _ => Feature::Veth,
    };
    if errno(&e) == Some(libc::EOPNOTSUPP) {
        feature.unavailable()
    } else {
        reason(e)
    }
}

/// Made over the host's socket, so IFLA_LINK (and, for a move, the index)
/// names the host's interface `iface`; IFLA_NET_NS_FD puts the device in the
/// node's namespace `ns` as `name`, with `index`.
async fn make_host_link(
    host: &Host,
    ns: &Ns,
    name: &str,
    iface: &str,
    attach: HostAttach,
    mtu: u32,
    index: u32,
) -> Result<(), String> {
    let Some(&lower) = host.index.get(iface) else {
        return Err(format!("no interface {iface} in the host's namespace"));
    };
    let h = &host.handle;
    let fd = ns.file.as_raw_fd();
    let made = match attach {
        HostAttach::Macvlan => {
            let m = LinkMacVlan::new(name, lower, MacVlanMode::Bridge);
            h.link().add(made_in(m, fd, index, mtu)).execute().await
        }
        HostAttach::Ipvlan => {
            let m = LinkIpVlan::new(name, lower, IpVlanMode::L2);
            h.link().add(made_in(m, fd, index, mtu)).execute().await
        }
        HostAttach::Vlan(id) => {
            let m = LinkVlan::new(name, lower, id);
            h.link().add(made_in(m, fd, index, mtu)).execute().await
        }
        // One request: into the node, renamed (the kernel renames after the
        // move, while it is down), MTU, up.
        HostAttach::Move => {
            let m = LinkUnspec::new_with_index(lower)
                .setns_by_fd(fd)
                .name(name.to_string())
                .mtu(mtu)
                .up()
                .append_extra_attribute(LinkAttribute::NewIfIndex(index as i32));
            h.link().set(m.build()).execute().await
        }
    };
    made.map_err(|e| host_link_reason(attach, iface, e))
}

/// A device made over the host's socket, in the node's namespace `ns_fd`,
/// with its index, MTU, and up.
pub(super) fn made_in<T>(
    b: LinkMessageBuilder<T>,
    ns_fd: RawFd,
    index: u32,
    mtu: u32,
) -> netlink_packet_route::link::LinkMessage {
    b.setns_by_fd(ns_fd).index(index).mtu(mtu).up().build()
}

/// Words for a host link that failed, naming a driver this kernel lacks (the
/// kernel answers EOPNOTSUPP for a link kind it does not have) as
/// `tunbench doctor` names it.
fn host_link_reason(attach: HostAttach, host: &str, e: rtnetlink::Error) -> String {
    if let (Some((feature, instead)), Some(libc::EOPNOTSUPP)) =
        (crate::features::needed_to_attach(attach), errno(&e))
    {
        return feature.refusal(instead);
    }
    match (attach, errno(&e)) {
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
