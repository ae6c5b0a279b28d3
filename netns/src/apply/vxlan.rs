//! One end of a cross-host link: a point-to-point VXLAN device, made over the
//! host's netlink socket with the node's namespace as its target. The kernel
//! opens its UDP socket in the namespace the request came from (the host's,
//! where the underlay is) and puts the device in the node's: it is never in
//! the host's namespace, so removing the node's namespace removes it, whatever
//! point a build was killed at.

use super::Ns;
use super::links::{Host, made_in};
use crate::features::Feature;
use crate::netlink::{errno, reason};
use crate::ops::{Op, Plan, vxlan_overhead};
use crate::state::HostNetns;
use futures::TryStreamExt;
use netlink_packet_route::link::{InfoKind, LinkAttribute, LinkInfo};
use rtnetlink::{LinkMessageBuilder, LinkVxlan};
use std::collections::HashMap;
use std::net::IpAddr;
use std::os::fd::AsRawFd;

/// Makes the device of `op` (an `Op::Vxlan`) in the node's namespace `ns`,
/// with index `index`, its MTU, and up.
pub(super) async fn make(host: &Host, ns: &Ns, op: &Op, index: u32) -> Result<(), String> {
    let Op::Vxlan {
        name,
        vni,
        local,
        remote,
        port,
        underlay,
        mtu,
        ..
    } = op
    else {
        unreachable!("not a vxlan: {op:?}")
    };
    let mut b = endpoints(LinkVxlan::new(name, *vni), *local, *remote)?
        .port(*port)
        .learning(false);
    if let Some(u) = underlay {
        let Some(&lower) = host.index.get(u) else {
            return Err(format!(
                "no interface {u} in the host's namespace for the VXLAN underlay"
            ));
        };
        b = b.dev(lower);
    }
    let m = made_in(b, ns.file.as_raw_fd(), index, *mtu);
    host.handle
        .link()
        .add(m)
        .execute()
        .await
        .map_err(|e| refusal(e, *vni, *port))
}

/// Deletes every VXLAN device of namespace `ns`, one request each; how many.
/// Deleting a namespace frees its devices later, from the kernel's work
/// queue, and until then each VXLAN device keeps its VNI and UDP port taken
/// in the host's namespace: an `up` right after `down` would be refused them
/// (EEXIST) on a loaded machine. A device deleted by its own request is gone
/// when the request returns.
pub(crate) async fn remove_all_in(ns: &str) -> std::io::Result<usize> {
    let handle = crate::socket::handle_in(ns)?;
    let links: Vec<_> = handle
        .link()
        .get()
        .execute()
        .try_collect()
        .await
        .map_err(|e| std::io::Error::other(reason(e)))?;
    let mut removed = 0;
    for l in links.iter().filter(|l| is_vxlan(l)) {
        match handle.link().del(l.header.index).execute().await {
            Ok(()) => removed += 1,
            // Gone meanwhile: what was asked.
            Err(e) if errno(&e) == Some(libc::ENODEV) => {}
            Err(e) => return Err(std::io::Error::other(reason(e))),
        }
    }
    Ok(removed)
}

fn is_vxlan(l: &netlink_packet_route::link::LinkMessage) -> bool {
    l.attributes.iter().any(|a| match a {
        LinkAttribute::LinkInfo(infos) => infos
            .iter()
            .any(|i| matches!(i, LinkInfo::Kind(InfoKind::Vxlan))),
        _ => false,
    })
}

/// Refuse a plan's VXLAN links that cannot work, before anything is made:
/// endpoints of two families, an underlay interface the host lacks, a link
/// MTU that with VXLAN's overhead exceeds the underlay's MTU (the kernel
/// would lower it silently). Every problem, each naming its link.
pub(crate) async fn preflight(plan: &Plan) -> Result<(), Vec<String>> {
    let links: Vec<&Op> = plan
        .ops
        .iter()
        .filter(|o| matches!(o, Op::Vxlan { .. }))
        .collect();
    if links.is_empty() {
        return Ok(());
    }
    let mtus = host_mtus()
        .await
        .map_err(|e| vec![format!("reading the host's interfaces: {e}")])?;
    let problems: Vec<String> = links
        .into_iter()
        .filter_map(|op| problem(op, &mtus))
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

/// What is wrong with one VXLAN link, given the host's interfaces' MTUs.
fn problem(op: &Op, mtus: &HashMap<String, u32>) -> Option<String> {
    let Op::Vxlan {
        ns,
        name,
        local,
        remote,
        underlay,
        mtu,
        ..
    } = op
    else {
        return None;
    };
    let link = format!("VXLAN link {name} of {ns}");
    if local.is_ipv4() != remote.is_ipv4() {
        return Some(format!(
            "{link}: local {local} and remote {remote} are of different families"
        ));
    }
    let u = underlay.as_ref()?;
    let Some(&under) = mtus.get(u) else {
        return Some(format!(
            "{link}: no interface {u} in the host's namespace for its underlay"
        ));
    };
    let overhead = vxlan_overhead(*remote);
    (mtu + overhead > under).then(|| {
        format!(
            "{link}: MTU {mtu} plus VXLAN's {overhead} bytes exceeds {u}'s MTU {under}; the link's MTU may be at most {}, or {u} needs an MTU of at least {}",
            under.saturating_sub(overhead),
            mtu + overhead
        )
    })
}

/// The MTU of every interface of the namespace this process runs in (the host).
async fn host_mtus() -> std::io::Result<HashMap<String, u32>> {
    let (_, file) = HostNetns::current()?;
    let handle = crate::socket::handle_in_file(&file)?;
    let links: Vec<_> = handle
        .link()
        .get()
        .execute()
        .try_collect()
        .await
        .map_err(|e| std::io::Error::other(reason(e)))?;
    Ok(links
        .iter()
        .filter_map(|l| {
            let name = crate::netlink::link_name(l)?;
            let mtu = l.attributes.iter().find_map(|a| match a {
                LinkAttribute::Mtu(m) => Some(*m),
                _ => None,
            })?;
            Some((name.to_string(), mtu))
        })
        .collect())
}

/// `local` and `remote`: the unicast remote is the device's default
/// destination (IFLA_VXLAN_GROUP with a unicast address), which the kernel
/// installs as the all-zeros forwarding entry: every frame goes to it.
fn endpoints(
    b: LinkMessageBuilder<LinkVxlan>,
    local: IpAddr,
    remote: IpAddr,
) -> Result<LinkMessageBuilder<LinkVxlan>, String> {
    match (local, remote) {
        (IpAddr::V4(l), IpAddr::V4(r)) => Ok(b.local(l).remote(r)),
        (IpAddr::V6(l), IpAddr::V6(r)) => Ok(b.local6(l).remote6(r)),
        _ => Err(format!(
            "VXLAN local {local} and remote {remote} are of different families; the hosts' underlay addresses must both be IPv4 or both IPv6"
        )),
    }
}

/// Words for a VXLAN device the kernel refused: a kernel without the driver
/// answers EOPNOTSUPP for the link kind, named as `tunbench doctor` names it.
/// VNI `vni` and port `port`: two links of a host may not share both.
fn refusal(e: rtnetlink::Error, vni: u32, port: u16) -> String {
    match errno(&e) {
        Some(libc::EOPNOTSUPP) => Feature::Vxlan.unavailable(),
        Some(libc::EEXIST) => format!(
            "{} (a VXLAN device of this host already has VNI {vni} on UDP port {port}: each link needs a VNI of its own)",
            reason(e)
        ),
        _ => reason(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_of_two_families_are_refused_naming_both() {
        let b = LinkVxlan::new("eth1", 100);
        let e = endpoints(
            b,
            "198.18.230.1".parse().unwrap(),
            "2001:2::2".parse().unwrap(),
        )
        .err()
        .unwrap();
        assert!(e.contains("198.18.230.1") && e.contains("2001:2::2"), "{e}");
    }

    fn link(mtu: u32, remote: &str) -> Op {
        Op::Vxlan {
            ns: "xh-n".into(),
            name: "eth1".into(),
            vni: 100,
            local: "198.18.230.1".parse().unwrap(),
            remote: remote.parse().unwrap(),
            port: crate::ops::VXLAN_PORT,
            underlay: Some("u0".into()),
            mtu,
        }
    }

    #[test]
    fn a_link_mtu_that_does_not_fit_the_underlay_names_what_would() {
        let mtus = HashMap::from([("u0".to_string(), 1500)]);
        assert_eq!(problem(&link(1450, "198.18.230.2"), &mtus), None);
        let p = problem(&link(1451, "198.18.230.2"), &mtus).unwrap();
        assert_eq!(
            p,
            "VXLAN link eth1 of xh-n: MTU 1451 plus VXLAN's 50 bytes exceeds u0's MTU 1500; the link's MTU may be at most 1450, or u0 needs an MTU of at least 1501"
        );
        let p = problem(&link(1450, "2001:2::2"), &mtus).unwrap();
        assert!(p.contains("different families"), "{p}");
        let p = problem(&link(1450, "198.18.230.2"), &HashMap::new()).unwrap();
        assert!(p.contains("no interface u0"), "{p}");
    }

    fn kernel_said(errno: i32) -> rtnetlink::Error {
        let mut m = netlink_packet_core::ErrorMessage::default();
        m.code = std::num::NonZeroI32::new(-errno);
        rtnetlink::Error::NetlinkError(m)
    }

    #[test]
    fn a_kernel_without_vxlan_is_named_as_doctor_names_it() {
        let r = refusal(kernel_said(libc::EOPNOTSUPP), 100, 4789);
        assert!(
            r.starts_with("the kernel lacks `vxlan` (VXLAN devices, CONFIG_VXLAN)"),
            "{r}"
        );
        assert!(r.contains("tunbench doctor"), "{r}");
        let r = refusal(kernel_said(libc::EEXIST), 100, 4789);
        assert!(r.contains("VNI 100 on UDP port 4789"), "{r}");
    }
}
