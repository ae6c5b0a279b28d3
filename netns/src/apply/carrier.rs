//! The last step of `apply`: wait until every veth and host link carries
//! traffic.
//!
//! A veth carries traffic only once the kernel's link watcher has seen its
//! carrier and given it a real qdisc (until then it drops), which can lag `up`
//! by up to a second. Waiting makes a lab usable the moment `up` returns; a
//! device that never comes up is left for `check` to report.

use super::Namespaces;
use crate::netlink::link_name;
use crate::ops::{Op, Plan};
use futures::TryStreamExt;
use netlink_packet_route::link::{LinkAttribute, LinkMessage, State};
use std::collections::HashMap;
use std::fs::File;
use std::time::Duration;

/// How long `apply` waits for every veth to be operationally up: this, or
/// `CARRIER_WAIT_PER_LINK` per link when that is longer (a lab of thousands of
/// links gives the kernel's link watcher thousands of devices to work through).
const CARRIER_WAIT: Duration = Duration::from_secs(5);
const CARRIER_WAIT_PER_LINK: Duration = Duration::from_millis(10);

pub(super) async fn wait_for_carrier(plan: &Plan, nss: &Namespaces) {
    let mut want = devices_with_carrier(plan);
    let links = want.values().map(|d| d.len()).sum::<usize>() / 2;
    let deadline =
        tokio::time::Instant::now() + CARRIER_WAIT.max(CARRIER_WAIT_PER_LINK * links as u32);
    while !want.is_empty() && tokio::time::Instant::now() < deadline {
        let late = drop_namespaces_up(&mut want, nss).await;
        nudge(&late, &want, nss).await;
        // A dump per namespace still waiting: with many devices, poll less
        // often, or the dumps take the CPU the link watcher needs.
        if !want.is_empty() {
            let devices: usize = want.values().map(|d| d.len()).sum();
            let pause = if devices > 100 { 50 } else { 5 };
            tokio::time::sleep(Duration::from_millis(pause)).await;
        }
    }
}

/// The devices to wait for, by namespace: both ends of each veth, and each
/// device made from a host interface.
fn devices_with_carrier(plan: &Plan) -> HashMap<&str, Vec<&str>> {
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
    want
}

/// One link dump per namespace still waiting: those whose devices are all up
/// leave `want`; the others are returned.
async fn drop_namespaces_up<'a>(
    want: &mut HashMap<&'a str, Vec<&'a str>>,
    nss: &Namespaces,
) -> Vec<&'a str> {
    let polls = want.iter().map(|(ns, devs)| async move {
        let links: Vec<LinkMessage> = nss[*ns]
            .handle
            .link()
            .get()
            .execute()
            .try_collect()
            .await
            .unwrap_or_default();
        let up: Vec<&str> = links
            .iter()
            .filter(|l| {
                l.attributes
                    .iter()
                    .any(|a| matches!(a, LinkAttribute::OperState(State::Up)))
            })
            .filter_map(link_name)
            .collect();
        (*ns, devs.iter().all(|d| up.contains(d)))
    });
    let mut late = Vec::new();
    for (ns, done) in futures::future::join_all(polls).await {
        if done {
            want.remove(ns);
        } else {
            late.push(ns);
        }
    }
    late
}

/// Ask each device still waiting for its link state the way ethtool does: the
/// kernel then handles that device's pending link event at once, instead of
/// in its next batch (the link watcher takes a batch of devices, then waits up
/// to a second before the next).
async fn nudge(late: &[&str], want: &HashMap<&str, Vec<&str>>, nss: &Namespaces) {
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
