//! Virtual routers' userspace datapath (the slow path): every forwarded packet
//! passes through tunbench's own process in the router's namespace.
//!
//! The bump in the wire: tc on each of the router's interfaces redirects
//! arriving IPv4 and IPv6 (not ARP, not link-local or multicast IPv6, not
//! neighbour discovery) into a TUN, the process reads each packet and writes it
//! back, and the kernel takes it in from the TUN and forwards it as usual. So
//! the kernel still does the router's own work once per packet (route lookup,
//! TTL / hop limit, ICMP time exceeded, fragmentation needed, packet too big),
//! and the per-packet work a device model adds lives in the process.
//!
//! The slow path's codec: checks each packet is IP and hands it back to the
//! kernel, counting per family; with a device model, the model's ceilings hold
//! packets back (handed back through `poll` when their time comes) or drop
//! them. Sans-IO like the tunnel codecs, so the shared driver runs it (TUN
//! only, no socket). It takes the kernel's TSO/USO super-packets whole
//! (`Codec::takes_super_packets`): each buffer starts with the virtio-net
//! header it was read with, and goes back with it, so the kernel forwards a
//! super-packet as one; a model meters one as the wire packets it carries.

use crate::codec::device_model::DeviceShaper;
use crate::codec::profile::DeviceModel;
use crate::codec::shape::Offer;
use crate::codec::vnet_header::{VNET_HDR_LEN, VirtioNetHdr};
use crate::codec::{Codec, DropReason, Verdict};
use std::net::SocketAddr;
use std::time::Instant;

/// Wire packets passed back per family (a super-packet counts the packets it
/// carries), for the stats and the tests.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub ipv4: u64,
    pub ipv6: u64,
}

#[derive(Default)]
pub struct SlowPath {
    counts: Counts,
    model: Option<DeviceShaper>,
}

impl SlowPath {
    pub fn new() -> SlowPath {
        SlowPath::default()
    }

    /// A slow path that applies a device model's ceilings.
    pub fn with_model(model: &DeviceModel, now: Instant) -> SlowPath {
        SlowPath {
            counts: Counts::default(),
            model: Some(DeviceShaper::new(model, now)),
        }
    }

    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// What the model makes of a packet of `frames` wire packets; None: it
    /// would drop part of a super-packet, which must come again cut.
    fn meter(&mut self, packet: &mut Vec<u8>, frames: usize, now: Instant) -> Option<Verdict> {
        let Some(m) = self.model.as_mut() else {
            return Some(Verdict::ToTun);
        };
        let frames = u32::try_from(frames).unwrap_or(u32::MAX);
        Some(match m.offer_frames(now, packet, VNET_HDR_LEN, frames)? {
            Offer::Pass => Verdict::ToTun,
            Offer::Queued => Verdict::Queued,
            Offer::Dropped => Verdict::Drop(DropReason::QueueFull),
        })
    }
}

const IPV4_MIN_HEADER: usize = 20;
const IPV6_HEADER: usize = 40;

/// The wire packets behind a buffer from the driver (its virtio-net header,
/// then the IP packet), or why it is dropped.
fn frames(buf: &[u8]) -> Result<usize, DropReason> {
    let hdr = VirtioNetHdr::parse(buf).map_err(|_| DropReason::Truncated)?;
    let ip = &buf[VNET_HDR_LEN..];
    let Some(first) = ip.first() else {
        return Err(DropReason::Truncated);
    };
    match first >> 4 {
        4 if ip.len() >= IPV4_MIN_HEADER => {}
        6 if ip.len() >= IPV6_HEADER => {}
        4 | 6 => return Err(DropReason::Truncated),
        _ => return Err(DropReason::Malformed),
    }
    hdr.frames(ip).ok_or(DropReason::Malformed)
}

impl Codec for SlowPath {
    fn takes_super_packets(&self) -> bool {
        true
    }

    fn handle_tun(&mut self, packet: &mut Vec<u8>, now: Instant) -> Verdict {
        let n = match frames(packet) {
            Ok(n) => n,
            Err(why) => return Verdict::Drop(why),
        };
        let v6 = packet[VNET_HDR_LEN] >> 4 == 6;
        let Some(verdict) = self.meter(packet, n, now) else {
            return Verdict::Split;
        };
        if v6 {
            self.counts.ipv6 += n as u64;
        } else {
            self.counts.ipv4 += n as u64;
        }
        verdict
    }

    fn poll(&mut self, now: Instant) -> Option<(Verdict, Vec<u8>)> {
        self.model.as_mut()?.poll(now).map(|p| (Verdict::ToTun, p))
    }

    fn deadline(&self) -> Option<Instant> {
        self.model.as_ref()?.deadline()
    }

    fn tick(&mut self, now: Instant) {
        if let Some(m) = self.model.as_mut() {
            m.expire(now);
        }
    }

    /// The slow path has no socket; nothing arrives here.
    fn handle_network(&mut self, _: SocketAddr, _: &mut Vec<u8>, _: Instant) -> Verdict {
        Verdict::Drop(DropReason::UnknownPeer)
    }
}

#[cfg(test)]
mod tests;
