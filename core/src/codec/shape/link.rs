//! A link's impairments in one direction, sans-IO: delay, jitter, loss,
//! duplication, reordering and a queue limit, decided per packet as it is
//! offered, with the time passed in and randomness from a seeded generator (so
//! tests replay exactly).
//!
//! Semantics, close to netem's where a network engineer would expect them:
//! - every packet waits `delay` plus a uniform draw from `-jitter..=jitter`
//!   (never below zero), so the mean stays `delay`; as in netem, packets leave
//!   in the order of their times, so a jitter larger than the gap between two
//!   packets reorders them;
//! - `loss` percent of packets are dropped, independently;
//! - `duplicate` percent are sent twice (the copy right behind the original);
//! - `reorder` percent are sent at once, jumping the packets still in the delay
//!   line (so reordering needs a delay, as in netem);
//! - at most `queue_packets` packets (and `queue_bytes` bytes) are held; beyond
//!   that the newest is dropped, as a tail-drop queue would. With neither set,
//!   the line holds at most [`DEFAULT_QUEUE_PACKETS`], netem's default `limit`,
//!   so a flood into a long delay cannot hold unbounded memory.
//!
//! A link's rate is shaped by the kernel (TBF on the sending end) before the
//! packets reach this stage, except in `framing = "none"`, which the kernel
//! cannot charge (its veth frames carry an Ethernet header): then `pace` holds
//! each frame until the wire is free, charged its IP packet, ahead of the delay.

use crate::vocab::framing::Framing;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

/// Packets a delay line holds when no `queue` is set: netem's default `limit`.
pub const DEFAULT_QUEUE_PACKETS: u32 = 1000;

/// One direction's impairments; all zero is a plain wire.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Impairments {
    pub delay: Duration,
    pub jitter: Duration,
    /// Percent, 0..=100.
    pub loss: f64,
    pub duplicate: f64,
    pub reorder: f64,
    pub queue_packets: Option<u32>,
    pub queue_bytes: Option<u64>,
    /// A line rate paced here rather than in the kernel.
    pub pace: Option<Pace>,
}

/// A line rate: each frame leaves when the wire is free, charged its framing's
/// bytes; at most `queue_bytes` of wire time wait, beyond that the newest drops.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pace {
    pub bps: u64,
    pub framing: Framing,
    pub queue_bytes: u64,
}

/// The Ethernet header of the TAP's frames, which no IP packet pays for.
const FRAME_HEADER: usize = 14;

/// What became of an offered packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Send it now (the caller keeps it).
    Pass,
    /// Send it now, twice.
    PassTwice,
    /// Held; it comes out of `poll` (twice when duplicated).
    Held,
    /// Lost on purpose.
    Lost,
    /// The queue was full.
    QueueFull,
}

/// Counters for stats and tests.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LinkCounts {
    pub offered: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub queue_full: u64,
}

/// A held packet, ordered by departure time, then by arrival (so packets of
/// one time, a duplicate and its original above all, keep their order).
struct Held {
    leave: Instant,
    seq: u64,
    packet: Vec<u8>,
}

impl PartialEq for Held {
    fn eq(&self, o: &Self) -> bool {
        (self.leave, self.seq) == (o.leave, o.seq)
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Held {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        #[cfg(test)]
        tests::COMPARISONS.with(|c| c.set(c.get() + 1));
        (self.leave, self.seq).cmp(&(o.leave, o.seq))
    }
}

pub struct LinkShaper {
    imp: Impairments,
    rng: fastrand::Rng,
    /// The delay line: a min-heap on departure time, so a jittered packet
    /// goes in at O(log n), not by a scan of what is held.
    line: BinaryHeap<Reverse<Held>>,
    seq: u64,
    held_bytes: u64,
    counts: LinkCounts,
    /// When the paced wire is free for the next frame.
    wire_free: Option<Instant>,
}

fn percent(rng: &mut fastrand::Rng, p: f64) -> bool {
    p > 0.0 && rng.f64() * 100.0 < p
}

impl LinkShaper {
    pub fn new(imp: Impairments, seed: u64) -> LinkShaper {
        LinkShaper {
            imp,
            rng: fastrand::Rng::with_seed(seed),
            line: BinaryHeap::new(),
            seq: 0,
            held_bytes: 0,
            counts: LinkCounts::default(),
            wire_free: None,
        }
    }

    /// New settings (`tunbench impair` on a running lab); what is held keeps
    /// its departure time.
    pub fn set(&mut self, imp: Impairments) {
        self.imp = imp;
    }

    pub fn counts(&self) -> LinkCounts {
        self.counts
    }

    pub fn held(&self) -> usize {
        self.line.len()
    }

    fn room_for(&self, len: usize, copies: usize) -> bool {
        let packets = self.line.len() + copies;
        let bytes = self.held_bytes + (len * copies) as u64;
        let packet_limit = match (self.imp.queue_packets, self.imp.queue_bytes) {
            (None, None) => Some(DEFAULT_QUEUE_PACKETS),
            (q, _) => q,
        };
        packet_limit.is_none_or(|q| packets <= q as usize)
            && self.imp.queue_bytes.is_none_or(|q| bytes <= q)
    }

    /// Decides one packet's fate; on `Held` the shaper has taken its contents.
    pub fn offer(&mut self, now: Instant, packet: &mut Vec<u8>) -> Fate {
        self.counts.offered += 1;
        if percent(&mut self.rng, self.imp.loss) {
            self.counts.lost += 1;
            return Fate::Lost;
        }
        let twice = percent(&mut self.rng, self.imp.duplicate);
        if twice {
            self.counts.duplicated += 1;
        }
        let depart = match self.paced(now, packet.len()) {
            Some(t) => t,
            None => {
                self.counts.queue_full += 1;
                return Fate::QueueFull;
            }
        };
        let delayed = !self.imp.delay.is_zero() || !self.imp.jitter.is_zero();
        if delayed && depart <= now && percent(&mut self.rng, self.imp.reorder) {
            // Jumps the line: leaves now, ahead of what is held.
            self.counts.reordered += 1;
            return if twice { Fate::PassTwice } else { Fate::Pass };
        }
        if !delayed && depart <= now && self.line.is_empty() {
            return if twice { Fate::PassTwice } else { Fate::Pass };
        }
        let copies = if twice { 2 } else { 1 };
        if !self.room_for(packet.len(), copies) {
            self.counts.queue_full += 1;
            return Fate::QueueFull;
        }
        let mut wait = self.imp.delay.as_secs_f64();
        if !self.imp.jitter.is_zero() {
            let j = self.imp.jitter.as_secs_f64();
            wait += (self.rng.f64() * 2.0 - 1.0) * j;
        }
        let leave = depart + Duration::from_secs_f64(wait.max(0.0));
        let p = std::mem::take(packet);
        self.held_bytes += (p.len() * copies) as u64;
        if twice {
            self.hold(leave, p.clone());
        }
        self.hold(leave, p);
        Fate::Held
    }

    /// When a frame of `len` bytes offered `now` leaves the paced wire (now
    /// when nothing paces), or None when the wire's queue is full.
    fn paced(&mut self, now: Instant, len: usize) -> Option<Instant> {
        let Some(p) = self.imp.pace else {
            return Some(now);
        };
        let free = self.wire_free.filter(|&t| t > now).unwrap_or(now);
        let waiting = (free - now).as_secs_f64() * p.bps as f64 / 8.0;
        if waiting > p.queue_bytes as f64 {
            return None;
        }
        let ip_len = len.saturating_sub(FRAME_HEADER) as u32;
        let bits = f64::from(p.framing.wire_bytes(ip_len)) * 8.0;
        self.wire_free = Some(free + Duration::from_secs_f64(bits / p.bps as f64));
        Some(free)
    }

    fn hold(&mut self, leave: Instant, packet: Vec<u8>) {
        self.seq += 1;
        self.line.push(Reverse(Held {
            leave,
            seq: self.seq,
            packet,
        }));
    }

    /// The next held packet whose time has come.
    pub fn poll(&mut self, now: Instant) -> Option<Vec<u8>> {
        if self.line.peek().is_none_or(|h| h.0.leave > now) {
            return None;
        }
        let Reverse(h) = self.line.pop()?;
        self.held_bytes -= h.packet.len() as u64;
        Some(h.packet)
    }

    pub fn deadline(&self) -> Option<Instant> {
        self.line.peek().map(|h| h.0.leave)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(imp: Impairments, n: usize, gap: Duration) -> (Vec<(u32, Duration)>, LinkCounts) {
        let t0 = Instant::now();
        let mut s = LinkShaper::new(imp, 7);
        let mut out = Vec::new();
        let mut sent_at = Vec::new();
        for i in 0..n as u32 {
            let now = t0 + gap * i;
            sent_at.push(now);
            let mut p = i.to_be_bytes().to_vec();
            match s.offer(now, &mut p) {
                Fate::Pass => out.push((i, Duration::ZERO)),
                Fate::PassTwice => {
                    out.push((i, Duration::ZERO));
                    out.push((i, Duration::ZERO));
                }
                _ => {}
            }
            while let Some(p) = s.poll(now) {
                let id = u32::from_be_bytes(p[..4].try_into().unwrap());
                out.push((id, now - sent_at[id as usize]));
            }
        }
        let end = t0 + gap * n as u32 + Duration::from_secs(10);
        while let Some(p) = s.poll(end) {
            let id = u32::from_be_bytes(p[..4].try_into().unwrap());
            out.push((id, Duration::MAX));
        }
        (out, s.counts())
    }

    #[test]
    fn a_paced_wire_charges_each_frame_its_ip_packet_and_bounds_its_queue() {
        // 1 Mbit/s in framing none: a 1514-byte frame (IP 1500) takes 12 ms.
        let imp = Impairments {
            pace: Some(Pace {
                bps: 1_000_000,
                framing: Framing::None,
                queue_bytes: 4_500,
            }),
            ..Default::default()
        };
        let t0 = Instant::now();
        let mut s = LinkShaper::new(imp, 1);
        let mut fates = Vec::new();
        for _ in 0..6 {
            fates.push(s.offer(t0, &mut vec![0; 1514]));
        }
        // The first leaves at once; the fourth finds 36 ms of wire time
        // (4,500 bytes) ahead and waits; the fifth would find 6,000 and drops.
        assert_eq!(
            fates,
            [
                Fate::Pass,
                Fate::Held,
                Fate::Held,
                Fate::Held,
                Fate::QueueFull,
                Fate::QueueFull
            ]
        );
        let ms = |n: u64| t0 + Duration::from_millis(n);
        assert_eq!(s.deadline(), Some(ms(12)));
        assert!(s.poll(ms(11)).is_none());
        assert!(s.poll(ms(12)).is_some());
        assert!(s.poll(ms(23)).is_none());
        assert!(s.poll(ms(24)).is_some());
        assert_eq!(s.deadline(), Some(ms(36)));
        // Ethernet framing charges 38 bytes more: 1538 bytes, 12.304 ms.
        let mut e = LinkShaper::new(
            Impairments {
                pace: Some(Pace {
                    bps: 1_000_000,
                    framing: Framing::Ethernet,
                    queue_bytes: 100_000,
                }),
                ..Default::default()
            },
            1,
        );
        e.offer(t0, &mut vec![0; 1514]);
        e.offer(t0, &mut vec![0; 1514]);
        assert_eq!(e.deadline(), Some(t0 + Duration::from_micros(12_304)));
    }

    #[test]
    fn nothing_set_is_a_plain_wire() {
        let (out, c) = run(Impairments::default(), 1000, Duration::from_micros(10));
        assert_eq!(out.len(), 1000);
        assert!(
            out.iter()
                .enumerate()
                .all(|(i, (id, d))| *id == i as u32 && d.is_zero())
        );
        assert_eq!(c.lost + c.duplicated + c.reordered + c.queue_full, 0);
    }

    #[test]
    fn delay_holds_each_packet_in_order_and_jitter_spreads_it() {
        let imp = Impairments {
            delay: Duration::from_millis(20),
            jitter: Duration::from_millis(5),
            ..Default::default()
        };
        // Without jitter, order is kept.
        let fixed = Impairments {
            jitter: Duration::ZERO,
            ..imp
        };
        let (out, _) = run(fixed, 2_000, Duration::from_micros(100));
        assert_eq!(out.len(), 2_000);
        assert!(out.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(
            out.iter().filter(|x| x.1 != Duration::MAX).all(|x| {
                x.1 >= Duration::from_millis(20) && x.1 < Duration::from_micros(20_100)
            })
        );
        // Polled every 100 us: a packet leaves within 100 us of its time.
        let (out, _) = run(imp, 20_000, Duration::from_micros(100));
        assert_eq!(out.len(), 20_000);
        let done: Vec<f64> = out
            .iter()
            .filter(|x| x.1 != Duration::MAX)
            .map(|x| x.1.as_secs_f64() * 1e3)
            .collect();
        let mean = done.iter().sum::<f64>() / done.len() as f64;
        let (lo, hi) = done
            .iter()
            .fold((f64::MAX, 0f64), |(a, b), x| (a.min(*x), b.max(*x)));
        assert!((mean - 20.0).abs() < 1.0, "mean {mean} ms");
        assert!(lo >= 15.0 && hi <= 25.2, "{lo}..{hi} ms");
        assert!(hi - lo > 5.0, "jitter spreads the delay: {lo}..{hi}");
    }

    #[test]
    fn loss_duplication_and_reordering_happen_at_their_rates() {
        let imp = Impairments {
            delay: Duration::from_millis(1),
            loss: 1.0,
            duplicate: 2.0,
            reorder: 5.0,
            ..Default::default()
        };
        let n = 100_000;
        let (out, c) = run(imp, n, Duration::from_micros(50));
        let rate = |x: u64| x as f64 * 100.0 / n as f64;
        assert!((0.9..=1.1).contains(&rate(c.lost)), "loss {}", rate(c.lost));
        assert!(
            (1.8..=2.2).contains(&rate(c.duplicated)),
            "dup {}",
            rate(c.duplicated)
        );
        // Reordering is drawn from what was not lost.
        assert!(
            (4.6..=5.4).contains(&rate(c.reordered)),
            "reorder {}",
            rate(c.reordered)
        );
        assert_eq!(out.len() as u64, n as u64 - c.lost + c.duplicated);
        let late = out.windows(2).filter(|w| w[1].0 < w[0].0).count();
        assert!(late > 0, "reordered packets arrive ahead of older ones");
    }

    #[test]
    fn a_full_queue_drops_the_newest() {
        let imp = Impairments {
            delay: Duration::from_millis(10),
            queue_packets: Some(3),
            ..Default::default()
        };
        let t0 = Instant::now();
        let mut s = LinkShaper::new(imp, 1);
        let fates: Vec<Fate> = (0..5).map(|_| s.offer(t0, &mut vec![0; 100])).collect();
        assert_eq!(
            fates,
            [
                Fate::Held,
                Fate::Held,
                Fate::Held,
                Fate::QueueFull,
                Fate::QueueFull
            ]
        );
        assert_eq!(s.deadline(), Some(t0 + Duration::from_millis(10)));
        let bytes = Impairments {
            queue_packets: None,
            queue_bytes: Some(250),
            ..imp
        };
        let mut s = LinkShaper::new(bytes, 1);
        let fates: Vec<Fate> = (0..3).map(|_| s.offer(t0, &mut vec![0; 100])).collect();
        assert_eq!(fates, [Fate::Held, Fate::Held, Fate::QueueFull]);
        assert_eq!(
            s.poll(t0 + Duration::from_millis(10)).map(|p| p.len()),
            Some(100)
        );
        assert_eq!(s.held(), 1);
    }

    #[test]
    fn a_flood_into_a_long_delay_holds_at_most_the_default_queue() {
        let imp = Impairments {
            delay: Duration::from_secs(2),
            ..Default::default()
        };
        let t0 = Instant::now();
        let mut s = LinkShaper::new(imp, 1);
        let n = 100_000;
        for i in 0..n {
            let now = t0 + Duration::from_micros(i);
            s.offer(now, &mut vec![0; 1500]);
            assert_eq!(s.poll(now), None, "nothing is due within the flood");
        }
        assert_eq!(s.held(), DEFAULT_QUEUE_PACKETS as usize);
        assert_eq!(s.counts().queue_full, n - u64::from(DEFAULT_QUEUE_PACKETS));
        // A byte limit alone is the user's bound: no packet default on top.
        let bytes = Impairments {
            queue_bytes: Some(3_000_000),
            ..imp
        };
        let mut s = LinkShaper::new(bytes, 1);
        for _ in 0..3000 {
            s.offer(t0, &mut vec![0; 1000]);
        }
        assert_eq!(s.held(), 3000);
    }

    thread_local! {
        /// Comparisons of held packets made by this thread: the work the
        /// delay line does, counted rather than timed.
        pub(super) static COMPARISONS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }

    #[test]
    fn a_wide_jitter_over_a_long_line_inserts_without_scanning_it() {
        // Every packet lands at a random place in a line of up to 200k: a
        // scan per insertion is some 10^10 comparisons; a heap, at most
        // log2(n) + 1 per packet.
        let imp = Impairments {
            delay: Duration::from_secs(5),
            jitter: Duration::from_secs(5),
            queue_packets: Some(1_000_000),
            ..Default::default()
        };
        let t0 = Instant::now();
        let mut s = LinkShaper::new(imp, 3);
        let n = 200_000u32;
        COMPARISONS.with(|c| c.set(0));
        for i in 0..n {
            s.offer(
                t0 + Duration::from_nanos(u64::from(i)),
                &mut i.to_be_bytes().to_vec(),
            );
        }
        let made = COMPARISONS.with(|c| c.get());
        let bound = u64::from(n) * (u64::from(n.ilog2()) + 2);
        assert!(made <= bound, "{made} comparisons for {n} insertions");
        let mut last = t0;
        let end = t0 + Duration::from_secs(11);
        let mut out = 0;
        while let Some(d) = s.deadline() {
            assert!(d >= last, "packets leave in the order of their times");
            last = d;
            assert!(s.poll(end).is_some());
            out += 1;
        }
        assert_eq!(out, n);
    }
}
