//! Rate ceilings with queues, sans-IO: packets are offered with the time, and
//! polled out when their departure time has come. The datapath asks for the
//! next deadline and sleeps until it.
//!
//! Two stages, both FIFO tail-drop queues paced in virtual time (a packet's
//! departure is computed from the previous one's, not from when the datapath
//! happened to wake, so late wake-ups cost latency but not rate):
//! 1. per flow (when the class has a flow ceiling): a flow's packets leave at
//!    its rate;
//! 2. per class (when it has an aggregate ceiling): all the class's packets, in
//!    the order they left stage 1, leave at the aggregate rate.
//!
//! A packet's cost is given by the caller in bits (a device model meters
//! transport payload; a link meters the frame). A super-packet is offered
//! whole with the frames it carries and metered as those frames (the `pace`
//! module); it leaves whole when its last frame would, so what the shaper
//! lets out never runs ahead of its frames one at a time.

pub mod link;
mod pace;

use pace::{Admission, Frames, Pace, QueueLimit};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::hash::Hash;
use std::time::{Duration, Instant};

/// One class's ceilings in bit/s; None is no ceiling.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Limits {
    pub aggregate_bps: Option<f64>,
    pub flow_bps: Option<f64>,
}

/// What became of an offered packet.
#[derive(Debug, PartialEq, Eq)]
pub enum Offer {
    /// Within its ceilings now: send it at once (the caller keeps it).
    Pass,
    /// Held; it comes out of `poll`.
    Queued,
    /// Its flow's or class's queue was full.
    Dropped,
}

/// Flows idle this long are forgotten.
const FLOW_IDLE: Duration = Duration::from_secs(10);
/// At most this many flows are tracked; beyond, new flows share one entry.
const MAX_FLOWS: usize = 65_536;

struct Flow {
    pace: Pace,
    last_seen: Instant,
}

/// A held packet, ordered by its time, then by arrival.
struct Held<K> {
    /// When it leaves the stage it waits in: in stage 1 its first frame's
    /// start there (it moves on frame by frame), in stage 2 its last frame's
    /// start in either stage, whichever is later.
    at: Instant,
    /// Its last frame's start in stage 1: it leaves stage 2 no sooner.
    ready: Instant,
    seq: u64,
    class: usize,
    flow: Option<K>,
    frames: Frames,
    /// Its frames counted in its flow's queue (it had to wait for the flow).
    flow_frames: u32,
    packet: Vec<u8>,
}

impl<K> PartialEq for Held<K> {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl<K> Eq for Held<K> {}
impl<K> PartialOrd for Held<K> {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl<K> Ord for Held<K> {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

/// A packet that had to wait for its class: its frames stay counted in the
/// class's queue until its first frame starts, whenever it leaves.
struct ClassWait {
    first: Instant,
    frames: Frames,
    counted: u32,
}

/// Counters in frames (a super-packet counts the frames it carries), for
/// stats and tests.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ShaperCounts {
    pub passed: u64,
    pub queued: u64,
    pub dropped: u64,
}

pub struct Shaper<K: Hash + Eq + Clone> {
    limits: Vec<Limits>,
    classes: Vec<Pace>,
    flows: HashMap<(usize, K), Flow>,
    /// Stage 1: packets waiting for their flow's turn.
    flow_stage: BinaryHeap<Reverse<Held<K>>>,
    /// Stage 2: packets waiting for their class's turn, ready to leave at `at`.
    out: BinaryHeap<Reverse<Held<K>>>,
    /// Per class, how many of its packets are in `out` (due or not): while any
    /// is, a new packet of the class joins them instead of passing.
    waiting: Vec<u32>,
    /// Per class, in the order their first frames start.
    class_waits: Vec<VecDeque<ClassWait>>,
    limit: QueueLimit,
    seq: u64,
    counts: ShaperCounts,
}

impl<K: Hash + Eq + Clone> Shaper<K> {
    /// One entry of `limits` per class. A flow's or class's queue takes a packet
    /// while it holds fewer than `queue_packets`, or while the packet would wait
    /// no longer than `max_wait`: a queue sized in time, as the rate sets it,
    /// with a floor. (Senders hand over TSO bursts of 40-odd packets at once,
    /// which a real link in front of the device would have spread out; a fixed
    /// packet count drops them at high rates.)
    pub fn new(
        limits: Vec<Limits>,
        queue_packets: u32,
        max_wait: Duration,
        now: Instant,
    ) -> Shaper<K> {
        let limits_len = limits.len();
        Shaper {
            classes: limits.iter().map(|_| Pace::new(now)).collect(),
            limits,
            flows: HashMap::new(),
            flow_stage: BinaryHeap::new(),
            out: BinaryHeap::new(),
            waiting: vec![0; limits_len],
            class_waits: (0..limits_len).map(|_| VecDeque::new()).collect(),
            limit: QueueLimit {
                packets: queue_packets.max(1),
                max_wait,
            },
            seq: 0,
            counts: ShaperCounts::default(),
        }
    }

    pub fn counts(&self) -> ShaperCounts {
        self.counts
    }

    /// Packets held in either stage.
    pub fn held(&self) -> usize {
        self.flow_stage.len() + self.out.len()
    }

    /// Offers a packet of class `class` (an index into the limits) and flow
    /// `flow`, costing `bits`. On `Queued` the shaper has taken the packet's
    /// contents (the vector is left empty).
    pub fn offer(
        &mut self,
        now: Instant,
        class: usize,
        flow: K,
        bits: f64,
        packet: &mut Vec<u8>,
    ) -> Offer {
        self.offer_frames(now, class, flow, 1, bits, packet)
            .unwrap_or(Offer::Dropped)
    }

    /// `offer` for a super-packet of `frames` wire packets costing `bits` in
    /// all, metered as those frames one at a time would be. None when a queue
    /// would take only part of it: nothing has changed, and the caller offers
    /// its frames one by one instead.
    pub fn offer_frames(
        &mut self,
        now: Instant,
        class: usize,
        flow: K,
        frames: u32,
        bits: f64,
        packet: &mut Vec<u8>,
    ) -> Option<Offer> {
        let Some(limits) = self.limits.get(class).copied() else {
            return Some(Offer::Pass);
        };
        let f = Frames {
            n: frames.max(1),
            bits,
        };
        // Stage-1 packets due by now enter stage 2 before this one.
        self.advance(now);
        // When its first frame reaches stage 2, and the earliest it may
        // leave: when its last frame has left stage 1.
        let (mut at, mut ready) = (now, now);
        if let Some(rate) = limits.flow_bps {
            let key = (class, flow.clone());
            if !self.flows.contains_key(&key) && self.flows.len() >= MAX_FLOWS {
                return Some(self.dropped(f));
            }
            let fresh = Pace::new(now);
            let pace = self.flows.get(&key).map_or(&fresh, |fl| &fl.pace);
            let start = match pace.admit(now, now, f, rate, self.limit) {
                Admission::Drop => return Some(self.dropped(f)),
                Admission::Partial(_) => return None,
                Admission::Take(start) => start,
            };
            if start <= now {
                // Through the flow stage at once: the class must take it
                // whole too before either stage counts it.
                let class_admission = self.class_admission(class, now, now, f);
                if matches!(class_admission, Some(Admission::Partial(_))) {
                    return None;
                }
            }
            let fl = self.flows.entry(key).or_insert(Flow {
                pace: fresh,
                last_seen: now,
            });
            fl.last_seen = now;
            let flow_frames = fl.pace.take(start, now, f, rate);
            let leave = f.last_start(start, rate);
            if start > now {
                let times = (start, leave);
                self.hold_for_flow(times, class, flow, f, flow_frames, packet);
                return Some(Offer::Queued);
            }
            (at, ready) = (start, leave);
        } else if matches!(
            self.class_admission(class, at, now, f),
            Some(Admission::Partial(_))
        ) {
            return None;
        }
        Some(self.pass_or_hold(class, (at, ready), now, f, packet))
    }

    fn dropped(&mut self, f: Frames) -> Offer {
        self.counts.dropped += u64::from(f.n);
        Offer::Dropped
    }

    /// Holds a packet in stage 1 until its first frame starts (`times.0`);
    /// its last starts at `times.1`.
    fn hold_for_flow(
        &mut self,
        (at, ready): (Instant, Instant),
        class: usize,
        flow: K,
        frames: Frames,
        flow_frames: u32,
        packet: &mut Vec<u8>,
    ) {
        self.seq += 1;
        self.flow_stage.push(Reverse(Held {
            at,
            ready,
            seq: self.seq,
            class,
            flow: Some(flow),
            frames,
            flow_frames,
            packet: std::mem::take(packet),
        }));
        self.counts.queued += u64::from(frames.n);
    }

    /// What the class's queue would do with `f` reaching it at `at`; None
    /// when the class has no aggregate ceiling.
    fn class_admission(
        &self,
        class: usize,
        at: Instant,
        now: Instant,
        f: Frames,
    ) -> Option<Admission> {
        let rate = self.limits[class].aggregate_bps?;
        Some(self.classes[class].admit(at, now, f, rate, self.limit))
    }

    /// A packet offered now reaching stage 2 at `times.0` and done with stage
    /// 1 at `times.1`, after `class_admission` said it is not `Partial`:
    /// passed, held or dropped.
    fn pass_or_hold(
        &mut self,
        class: usize,
        (at, ready): (Instant, Instant),
        now: Instant,
        f: Frames,
        packet: &mut Vec<u8>,
    ) -> Offer {
        let Some(leave) = self.enter_class(class, at, now, f) else {
            return self.dropped(f);
        };
        let leave = leave.max(ready);
        // Within its ceilings now, and none of its class is held: it may
        // leave at once. A packet of the class still held, even one whose
        // time has come, has not been sent yet (the datapath hands the due
        // ones out through `poll`, after the packets it offered in the same
        // batch): passing now would put this packet ahead of it, and a
        // flow's packets would leave out of order.
        if leave <= now && self.waiting[class] == 0 {
            self.counts.passed += u64::from(f.n);
            return Offer::Pass;
        }
        self.seq += 1;
        self.waiting[class] += 1;
        self.out.push(Reverse(Held {
            at: leave,
            ready,
            seq: self.seq,
            class,
            flow: None,
            frames: f,
            flow_frames: 0,
            packet: std::mem::take(packet),
        }));
        self.counts.queued += u64::from(f.n);
        Offer::Queued
    }

    /// A packet reaching stage 2 at `at`: when its last frame starts there,
    /// or None when the queue is full for its first frame. One the queue
    /// would take only in part, taken whole here:
    /// a packet already held through its flow's stage cannot be cut any more
    /// (a difference of one super-packet's frames, where a flow ceiling and an
    /// aggregate one both bind).
    fn enter_class(
        &mut self,
        class: usize,
        at: Instant,
        now: Instant,
        f: Frames,
    ) -> Option<Instant> {
        let Some(rate) = self.limits[class].aggregate_bps else {
            return Some(at);
        };
        let c = &mut self.classes[class];
        let first = match c.admit(at, now, f, rate, self.limit) {
            Admission::Drop => return None,
            Admission::Take(first) | Admission::Partial(first) => first,
        };
        let counted = c.take(first, now, f, rate);
        if counted > 0 {
            self.class_waits[class].push_back(ClassWait {
                first,
                frames: f,
                counted,
            });
        }
        Some(f.last_start(first, rate))
    }

    /// Ends the wait, in their classes' queues, of the packets whose first
    /// frame has started by `now`.
    fn end_class_waits(&mut self, now: Instant) {
        for (class, waits) in self.class_waits.iter_mut().enumerate() {
            while waits.front().is_some_and(|w| w.first <= now) {
                let Some(w) = waits.pop_front() else { break };
                let rate = self.limits[class].aggregate_bps.unwrap_or(f64::INFINITY);
                self.classes[class].release(w.counted, w.first, w.frames, rate);
            }
        }
    }

    /// Moves stage-1 packets whose flow turn has come into stage 2.
    fn advance(&mut self, now: Instant) {
        self.end_class_waits(now);
        while self.flow_stage.peek().is_some_and(|h| h.0.at <= now) {
            let Reverse(mut h) = self.flow_stage.pop().unwrap();
            let rate = self.limits[h.class].flow_bps.unwrap_or(f64::INFINITY);
            if let Some(f) = h
                .flow
                .take()
                .and_then(|k| self.flows.get_mut(&(h.class, k)))
            {
                f.pace.release(h.flow_frames, h.at, h.frames, rate);
            }
            match self.enter_class(h.class, h.at, now, h.frames) {
                None => self.counts.dropped += u64::from(h.frames.n),
                Some(leave) => {
                    h.at = leave.max(h.ready);
                    self.waiting[h.class] += 1;
                    self.out.push(Reverse(h));
                }
            }
        }
    }

    /// The next packet whose time has come.
    pub fn poll(&mut self, now: Instant) -> Option<Vec<u8>> {
        self.advance(now);
        if self.out.peek().is_none_or(|h| h.0.at > now) {
            return None;
        }
        let Reverse(h) = self.out.pop().unwrap();
        self.waiting[h.class] = self.waiting[h.class].saturating_sub(1);
        Some(h.packet)
    }

    /// When `poll` next has something (None: nothing held).
    pub fn deadline(&self) -> Option<Instant> {
        let a = self.flow_stage.peek().map(|h| h.0.at);
        let b = self.out.peek().map(|h| h.0.at);
        match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Forgets idle flows.
    pub fn expire(&mut self, now: Instant) {
        self.flows
            .retain(|_, f| !f.pace.idle() || now.duration_since(f.last_seen) < FLOW_IDLE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BITS: f64 = 12_000.0; // a 1500-byte packet

    /// Offers `flows` flows, each at `offered_bps`, for `secs` simulated seconds
    /// in 100 us steps, polling as it goes; the delivered rate per flow over
    /// the last half (past the queue filling).
    fn simulate(
        limits: Limits,
        flows: usize,
        offered_bps: f64,
        secs: f64,
    ) -> (Vec<f64>, ShaperCounts) {
        let t0 = Instant::now();
        let mut s: Shaper<usize> = Shaper::new(vec![limits], 100, Duration::ZERO, t0);
        let step = Duration::from_micros(100);
        let steps = (secs / step.as_secs_f64()) as usize;
        let mut credit = vec![0.0; flows];
        let mut got = vec![0.0; flows];
        let count_from = steps / 2;
        for i in 0..steps {
            let now = t0 + step * i as u32;
            for (f, c) in credit.iter_mut().enumerate() {
                *c += offered_bps * step.as_secs_f64();
                while *c >= BITS {
                    *c -= BITS;
                    let mut p = vec![f as u8; 1500];
                    if s.offer(now, 0, f, BITS, &mut p) == Offer::Pass && i >= count_from {
                        got[f] += BITS;
                    }
                }
            }
            while let Some(p) = s.poll(now) {
                if i >= count_from {
                    got[p[0] as usize] += BITS;
                }
            }
        }
        let window = secs - count_from as f64 * step.as_secs_f64();
        (got.iter().map(|b| b / window).collect(), s.counts())
    }

    fn near(x: f64, want: f64, tol: f64) -> bool {
        (x - want).abs() <= want * tol
    }

    #[test]
    fn an_aggregate_ceiling_holds_the_rate_and_drops_the_excess() {
        let l = Limits {
            aggregate_bps: Some(100e6),
            flow_bps: None,
        };
        let (r, c) = simulate(l, 2, 100e6, 1.0);
        let total: f64 = r.iter().sum();
        assert!(near(total, 100e6, 0.02), "{total}");
        assert!(c.dropped > 0, "twice the rate offered: the queue overflows");
    }

    #[test]
    fn under_the_ceiling_everything_passes_at_once() {
        let l = Limits {
            aggregate_bps: Some(100e6),
            flow_bps: Some(60e6),
        };
        let (r, c) = simulate(l, 1, 40e6, 0.5);
        assert!(near(r[0], 40e6, 0.02), "{r:?}");
        assert_eq!((c.queued, c.dropped), (0, 0));
    }

    #[test]
    fn a_flow_ceiling_gives_each_flow_f_and_all_of_them_at_most_the_aggregate() {
        let l = Limits {
            aggregate_bps: Some(250e6),
            flow_bps: Some(100e6),
        };
        // One flow: F.
        let (r, _) = simulate(l, 1, 400e6, 1.0);
        assert!(near(r[0], 100e6, 0.02), "{r:?}");
        // Two flows: 2F < A.
        let (r, _) = simulate(l, 2, 400e6, 1.0);
        for x in &r {
            assert!(near(*x, 100e6, 0.02), "{r:?}");
        }
        // Four flows: min(A, 4F) = A. (Shared as a tail-drop FIFO shares
        // among unresponsive senders: not alike, but each gets some.)
        let (r, _) = simulate(l, 4, 400e6, 1.0);
        let total: f64 = r.iter().sum();
        assert!(near(total, 250e6, 0.02), "{total}");
        assert!(r.iter().all(|x| *x > 0.0 && *x <= 100.1e6), "{r:?}");
    }

    #[test]
    fn held_packets_keep_their_order_and_the_deadline_says_when() {
        let t0 = Instant::now();
        let l = Limits {
            aggregate_bps: Some(12e6), // a 1500-byte packet per ms
            flow_bps: None,
        };
        let mut s: Shaper<u8> = Shaper::new(vec![l], 10, Duration::ZERO, t0);
        assert_eq!(s.deadline(), None);
        for i in 0..3u8 {
            let mut p = vec![i];
            let want = if i == 0 { Offer::Pass } else { Offer::Queued };
            assert_eq!(s.offer(t0, 0, 0, BITS, &mut p), want);
        }
        assert_eq!(s.held(), 2);
        assert_eq!(s.deadline(), Some(t0 + Duration::from_millis(1)));
        assert_eq!(s.poll(t0), None, "not yet");
        assert_eq!(s.poll(t0 + Duration::from_millis(1)), Some(vec![1]));
        // Late: both are due, in order.
        let late = t0 + Duration::from_millis(5);
        assert_eq!(s.poll(late), None.or(Some(vec![2])));
        assert_eq!(s.poll(late), None);
        assert_eq!(s.deadline(), None);
    }

    #[test]
    fn a_packet_never_passes_one_of_its_class_still_held() {
        let t0 = Instant::now();
        let ms = Duration::from_millis(1);
        for flow_bps in [None, Some(24e6)] {
            let l = Limits {
                aggregate_bps: Some(12e6), // a 1500-byte packet per ms
                flow_bps,
            };
            let mut s: Shaper<u8> = Shaper::new(vec![l], 10, Duration::ZERO, t0);
            assert_eq!(s.offer(t0, 0, 0, BITS, &mut vec![0]), Offer::Pass);
            assert_eq!(s.offer(t0, 0, 0, BITS, &mut vec![1]), Offer::Queued);
            // Packet 1 was due at 1 ms and the datapath has not polled it yet
            // (it offers a batch first, then polls): at 3 ms the class is free,
            // but packet 2 must leave behind packet 1, not ahead of it.
            let late = t0 + 3 * ms;
            assert_eq!(
                s.offer(late, 0, 0, BITS, &mut vec![2]),
                Offer::Queued,
                "flow ceiling {flow_bps:?}"
            );
            assert_eq!(s.poll(late), Some(vec![1]));
            assert_eq!(s.poll(late), Some(vec![2]));
            assert_eq!(s.poll(late), None);
            // Nothing held: the next one passes again.
            assert_eq!(
                s.offer(late + 2 * ms, 0, 0, BITS, &mut vec![3]),
                Offer::Pass
            );
            // Another class is no reason to wait.
            let mut s: Shaper<u8> = Shaper::new(vec![l, l], 10, Duration::ZERO, t0);
            s.offer(t0, 0, 0, BITS, &mut vec![0]);
            assert_eq!(s.offer(t0, 0, 0, BITS, &mut vec![1]), Offer::Queued);
            assert_eq!(s.offer(late, 1, 0, BITS, &mut vec![9]), Offer::Pass);
        }
    }

    #[test]
    fn a_super_packet_never_runs_ahead_of_its_frames_one_at_a_time() {
        // 12 Mbit/s: a 1500-byte frame a millisecond. However the stages
        // bind, what has left by any time is at most the rate since the first
        // frame's start and one frame: physics for a serial link.
        let t0 = Instant::now();
        let ms = Duration::from_millis(1);
        for (aggregate_bps, flow_bps) in [
            (Some(12e6), None),
            (None, Some(12e6)),
            (Some(12e6), Some(24e6)),
        ] {
            let l = Limits {
                aggregate_bps,
                flow_bps,
            };
            let mut s: Shaper<u8> = Shaper::new(vec![l], 100, Duration::ZERO, t0);
            let mut out = Vec::new();
            for (i, n) in [(0u8, 4u32), (1, 1), (2, 3)] {
                let mut p = vec![i];
                let o = s.offer_frames(t0, 0, 0, n, BITS * f64::from(n), &mut p);
                if o == Some(Offer::Pass) {
                    out.push((t0, n));
                }
            }
            let mut t = t0;
            while t <= t0 + 20 * ms {
                while let Some(p) = s.poll(t) {
                    out.push((t, [4, 1, 3][p[0] as usize]));
                }
                t += Duration::from_micros(50);
            }
            let mut sent = 0;
            for (at, n) in &out {
                sent += n;
                let allowed = at.duration_since(t0).as_secs_f64() * 1000.0 + 1.0;
                assert!(
                    f64::from(sent) <= allowed + 1e-9,
                    "{l:?}: {sent} frames out by {at:?}: {out:?}"
                );
            }
            assert_eq!(sent, 8, "{l:?}: every frame out: {out:?}");
            // The four frames leave as the fourth would start; the last
            // packet as its third frame would, at 7 ms.
            assert_eq!(out[0], (t0 + 3 * ms, 4), "{l:?}");
            assert!(
                out[2].0 >= t0 + 7 * ms && out[2].0 < t0 + 7 * ms + Duration::from_micros(100),
                "{l:?}: {out:?}"
            );
        }
    }

    #[test]
    fn a_held_super_packet_counts_in_its_queue_as_its_frames_would() {
        // 12 Mbit/s, a frame a millisecond; a queue of 4 frames. One frame
        // leaves at once, then four start at 1, 2, 3 and 4 ms and leave
        // together at 4. At 2.5 ms two of them have started: two wait, so two
        // more frames fit, and a third does not, as with frames one by one.
        let t0 = Instant::now();
        let l = Limits {
            aggregate_bps: Some(12e6),
            flow_bps: None,
        };
        let mut s: Shaper<u8> = Shaper::new(vec![l], 4, Duration::ZERO, t0);
        assert_eq!(s.offer(t0, 0, 0, BITS, &mut vec![0]), Offer::Pass);
        let four = s.offer_frames(t0, 0, 0, 4, 4.0 * BITS, &mut vec![1]);
        assert_eq!(four, Some(Offer::Queued));
        let later = t0 + Duration::from_micros(2500);
        let outcomes: Vec<Offer> = (2..5)
            .map(|i| s.offer(later, 0, 0, BITS, &mut vec![i]))
            .collect();
        assert_eq!(outcomes, [Offer::Queued, Offer::Queued, Offer::Dropped]);
        assert_eq!(s.poll(later), None, "the four leave at 4 ms");
        let ms = Duration::from_millis(1);
        assert_eq!(s.poll(t0 + 4 * ms), Some(vec![1]));
        assert_eq!(s.poll(t0 + 6 * ms), Some(vec![2]));
        assert_eq!(s.poll(t0 + 6 * ms), Some(vec![3]));
    }

    #[test]
    fn a_full_queue_drops_and_a_class_without_limits_passes() {
        let t0 = Instant::now();
        let l = Limits {
            aggregate_bps: Some(1e6),
            flow_bps: None,
        };
        let mut s: Shaper<u8> = Shaper::new(vec![l, Limits::default()], 2, Duration::ZERO, t0);
        let outcomes: Vec<Offer> = (0..5)
            .map(|_| s.offer(t0, 0, 0, BITS, &mut vec![0]))
            .collect();
        assert_eq!(
            outcomes,
            [
                Offer::Pass,
                Offer::Queued,
                Offer::Queued,
                Offer::Dropped,
                Offer::Dropped
            ]
        );
        assert_eq!(s.offer(t0, 1, 0, BITS, &mut vec![0]), Offer::Pass);
        assert_eq!(
            s.offer(t0, 7, 0, BITS, &mut vec![0]),
            Offer::Pass,
            "no such class"
        );
    }

    #[test]
    fn a_queue_past_its_packets_still_takes_what_leaves_within_the_wait() {
        let t0 = Instant::now();
        let l = Limits {
            aggregate_bps: Some(12e6), // a 1500-byte packet per ms
            flow_bps: None,
        };
        // 2 packets, or up to 5 ms of waiting.
        let mut s: Shaper<u8> = Shaper::new(vec![l], 2, Duration::from_millis(5), t0);
        let outcomes: Vec<Offer> = (0..8)
            .map(|_| s.offer(t0, 0, 0, BITS, &mut vec![0]))
            .collect();
        assert_eq!(outcomes[0], Offer::Pass);
        assert!(
            outcomes[1..6].iter().all(|o| *o == Offer::Queued),
            "{outcomes:?}"
        );
        assert_eq!(outcomes[6..], [Offer::Dropped, Offer::Dropped]);
    }

    #[test]
    fn idle_flows_are_forgotten() {
        let t0 = Instant::now();
        let l = Limits {
            aggregate_bps: None,
            flow_bps: Some(1e9),
        };
        let mut s: Shaper<u8> = Shaper::new(vec![l], 2, Duration::ZERO, t0);
        s.offer(t0, 0, 1, BITS, &mut vec![0]);
        assert_eq!(s.flows.len(), 1);
        s.expire(t0 + Duration::from_secs(5));
        assert_eq!(s.flows.len(), 1);
        s.expire(t0 + FLOW_IDLE + Duration::from_secs(1));
        assert_eq!(s.flows.len(), 0);
    }
}
