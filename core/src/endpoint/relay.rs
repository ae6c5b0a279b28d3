//! A link's userspace path (`plan::link` builds its kernel side): one process
//! per impaired direction, in the link's relay namespace, runs the shared
//! driver on that direction's TAP with a codec that holds, drops, copies or
//! reorders each Ethernet frame as `shape::link` decides.

use crate::codec::shape::link::{Fate, Impairments, LinkShaper};
use crate::codec::{Codec, DropReason, Verdict};
use crate::driver::{DriverConfig, Transport};
use crate::endpoint::{Who, serve_with};
use crate::plan::datapath::Job;
use crate::plan::link::Way;
use anyhow::{Result, bail};
use std::net::SocketAddr;
use std::time::Instant;

/// The codec: frames from the TAP go back into it, now, later, twice or never.
pub struct LinkRelay {
    shaper: LinkShaper,
    /// A duplicate waiting to follow its original out.
    copy: Option<Vec<u8>>,
}

impl LinkRelay {
    pub fn new(imp: Impairments, seed: u64) -> LinkRelay {
        LinkRelay {
            shaper: LinkShaper::new(imp, seed),
            copy: None,
        }
    }

    /// New settings (`tunbench impair` on a running lab).
    pub fn set(&mut self, imp: Impairments) {
        self.shaper.set(imp);
    }
}

/// Where `tunbench impair` leaves a relay direction's new settings (the
/// topology's `Impairment`, as JSON); the relay process looks every second.
pub fn settings_path(lab: &str, link: usize, way: Way) -> std::path::PathBuf {
    netns::state::LabState::dir(lab).join(format!(
        "relay-{}.{}.json",
        crate::plan::link::relay_node(link),
        way.name()
    ))
}

/// The settings a relay direction runs with now: the last `tunbench impair`,
/// or the topology's.
pub fn current(
    lab: &str,
    link: usize,
    way: Way,
    l: &crate::topology::Link,
) -> crate::topology::impair::Impairment {
    std::fs::read_to_string(settings_path(lab, link, way))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_else(|| way.impairment(l))
}

impl Codec for LinkRelay {
    fn handle_tun(&mut self, frame: &mut Vec<u8>, now: Instant) -> Verdict {
        match self.shaper.offer(now, frame) {
            Fate::Pass => Verdict::ToTun,
            Fate::PassTwice => {
                self.copy = Some(frame.clone());
                Verdict::ToTun
            }
            Fate::Held => Verdict::Queued,
            Fate::Lost => Verdict::Drop(DropReason::Lost),
            Fate::QueueFull => Verdict::Drop(DropReason::QueueFull),
        }
    }

    /// A relay has no socket; nothing arrives here.
    fn handle_network(&mut self, _: SocketAddr, _: &mut Vec<u8>, _: Instant) -> Verdict {
        Verdict::Drop(DropReason::UnknownPeer)
    }

    fn poll(&mut self, now: Instant) -> Option<(Verdict, Vec<u8>)> {
        if let Some(c) = self.copy.take() {
            return Some((Verdict::ToTun, c));
        }
        self.shaper.poll(now).map(|f| (Verdict::ToTun, f))
    }

    fn deadline(&self) -> Option<Instant> {
        if self.copy.is_some() {
            return Some(Instant::now());
        }
        self.shaper.deadline()
    }
}

/// A seed of the lab, link and direction: the same lab replays the same
/// losses; another lab draws others.
fn seed(lab: &str, link: usize, way: Way) -> u64 {
    // FNV-1a.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in lab.bytes().chain(link.to_le_bytes()).chain([way as u8]) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// `tunbench datapath --lab LAB --node link.N --way a_to_b`, started by `up`
/// in the relay namespace, until SIGTERM.
pub fn run(lab: &str, t: &crate::topology::Topology, node: &str, way: Way) -> Result<()> {
    let Some(i) = node
        .strip_prefix("link.")
        .and_then(|n| n.parse::<usize>().ok())
    else {
        bail!("{node} is no link relay (link.N)");
    };
    let Some(l) = t.links.get(i) else {
        bail!("lab {lab} has no link {i}");
    };
    let imp = way.impairment(l);
    if !imp.needs_relay() {
        bail!(
            "link {i} of lab {lab} has no userspace impairment {}",
            way.name()
        );
    }
    let mut config = DriverConfig::new(way.tap(), Transport::TunOnly);
    config.tap = true;
    // Whole wire frames: the kernel segments and checksums before the TAP.
    config.offloads = false;
    let job = Job::Link(way);
    let stats = crate::plan::datapath::stats_path(lab, &job, node);
    let who = Who {
        tunnel: "-",
        node,
        role: way.name(),
    };
    let settings = settings_path(lab, i, way);
    let mut seen = None;
    serve_with(
        config,
        LinkRelay::new(imp.shaper(), seed(lab, i, way)),
        &stats,
        who,
        |d| {
            let mtime = std::fs::metadata(&settings).and_then(|m| m.modified()).ok();
            if mtime.is_some() && mtime != seen {
                seen = mtime;
                let new = current(lab, i, way, l);
                d.with_codec(|c| c.set(new.shaper()));
                crate::driver::process_log::line(&format!(
                    "tunbench datapath: new settings {new:?}"
                ));
            }
        },
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_duplicate_follows_its_original_and_a_held_frame_comes_back_in_time() {
        let t0 = Instant::now();
        let imp = Impairments {
            duplicate: 100.0,
            ..Default::default()
        };
        let mut r = LinkRelay::new(imp, 1);
        let mut f = vec![1, 2, 3];
        assert_eq!(r.handle_tun(&mut f, t0), Verdict::ToTun);
        assert!(r.deadline().is_some());
        assert_eq!(r.poll(t0), Some((Verdict::ToTun, vec![1, 2, 3])));
        assert_eq!(r.poll(t0), None);
        let imp = Impairments {
            delay: Duration::from_millis(5),
            ..Default::default()
        };
        let mut r = LinkRelay::new(imp, 1);
        let mut f = vec![9];
        assert_eq!(r.handle_tun(&mut f, t0), Verdict::Queued);
        assert_eq!(r.deadline(), Some(t0 + Duration::from_millis(5)));
        assert_eq!(r.poll(t0), None);
        assert_eq!(
            r.poll(t0 + Duration::from_millis(5)),
            Some((Verdict::ToTun, vec![9]))
        );
        let mut r = LinkRelay::new(
            Impairments {
                loss: 100.0,
                ..Default::default()
            },
            1,
        );
        assert_eq!(
            r.handle_tun(&mut vec![0], t0),
            Verdict::Drop(DropReason::Lost)
        );
    }

    #[test]
    fn seeds_differ_by_lab_link_and_direction() {
        let s = seed("a", 0, Way::AToB);
        assert_eq!(s, seed("a", 0, Way::AToB));
        assert_ne!(s, seed("b", 0, Way::AToB));
        assert_ne!(s, seed("a", 1, Way::AToB));
        assert_ne!(s, seed("a", 0, Way::BToA));
    }
}
