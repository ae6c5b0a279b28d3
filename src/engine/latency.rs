//! Latency probes, sans-IO (quinn-proto style): a [`Prober`] is told the time,
//! says when its next probe is due and writes it, takes the echoes that come
//! back, and turns what it saw into [`Latency`] statistics. It opens no socket
//! and reads no clock; `engine::probe` is the thin driver with the sockets.
//!
//! Times are nanoseconds of the clock both ends stamp with (CLOCK_MONOTONIC,
//! shared by every namespace of a host: `wire::probe`). From each echo:
//! - round-trip time: arrival minus the probe's send time, less the time the
//!   echo spent in the responder (its send minus receive stamp), as irtt counts
//!   it;
//! - one way out: the responder's receive stamp minus the send time; back: the
//!   arrival minus the responder's send stamp. Meaningful only when both ends
//!   share the clock, which the caller says.
//!
//! Probes are isochronous: the n-th is due at start + n / rate. A prober woken
//! late sends the one due and keeps to the schedule from then on, without a
//! burst to catch up (a burst would queue behind itself and read as delay).

use crate::wire::probe::{Kind, PACKET_LEN, Packet, Repr};
use serde::{Deserialize, Serialize};

/// A latency sample's spread, in milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub samples: u64,
    pub min: f64,
    pub median: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

impl Spread {
    /// The spread of `values` (milliseconds); `None` when there are none.
    /// Percentiles interpolate linearly between the ranks around them.
    pub fn of(values: &[f64]) -> Option<Spread> {
        if values.is_empty() {
            return None;
        }
        let mut v = values.to_vec();
        v.sort_by(|a, b| a.total_cmp(b));
        let at = |q: f64| {
            let x = q * (v.len() - 1) as f64;
            let (lo, hi) = (x.floor() as usize, x.ceil() as usize);
            v[lo] + (v[hi] - v[lo]) * (x - lo as f64)
        };
        Some(Spread {
            samples: v.len() as u64,
            min: v[0],
            median: at(0.5),
            p90: at(0.9),
            p99: at(0.99),
            max: v[v.len() - 1],
            mean: v.iter().sum::<f64>() / v.len() as f64,
        })
    }
}

/// What the latency probes (small isochronous UDP datagrams, echoed by the
/// server) saw over one phase: the path idle, or under one cell's load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// Probes per second.
    pub rate: f64,
    pub sent: u64,
    /// Echoes that came back.
    pub received: u64,
    pub lost_percent: f64,
    /// Probes or echoes that arrived after a later one.
    pub reordered: u64,
    /// Round-trip time.
    pub rtt_ms: Spread,
    /// One-way delay from the measuring node to the target (the upload
    /// direction) and back. Exact in a lab, where every namespace shares one
    /// clock; `None` toward a server outside the lab, where only RTT holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forward_ms: Option<Spread>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reverse_ms: Option<Spread>,
    /// Mean difference between consecutive round trips (RFC 3550's idea,
    /// unsmoothed).
    pub jitter_ms: f64,
    /// (seconds since the phase started, round-trip ms) per probe, thinned to
    /// at most a few hundred points: for charts over time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub series: Vec<(f32, f32)>,
}

/// The most points a [`Latency::series`] keeps.
pub const SERIES_POINTS: usize = 300;

/// One echo, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    pub seq: u32,
    /// When the probe was sent.
    pub sent_ns: u64,
    pub rtt_ns: u64,
    /// Signed: clocks that are not shared can make them negative.
    pub forward_ns: i64,
    pub reverse_ns: i64,
}

/// Why an arriving datagram was not taken as an echo.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ignored {
    /// Not a probe datagram (wrong magic, version or length).
    NotAProbe,
    /// A probe, not an echo (something looped it back unchanged).
    NotAnEcho,
    /// A sequence number this prober never sent.
    Unknown,
    /// The second echo of one probe.
    Duplicate,
    /// Its stamps say it came back before it left.
    Impossible,
}

/// Probes and their echoes, as many phases pooled as were added: what the
/// statistics are made from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Probes {
    pub sent: u64,
    pub reordered: u64,
    pub samples: Vec<Sample>,
}

impl Probes {
    /// Another phase's probes, as if measured in the same one (a cell's runs).
    pub fn pool(&mut self, other: Probes) {
        self.sent += other.sent;
        self.reordered += other.reordered;
        self.samples.extend(other.samples);
    }

    /// The statistics; `start_ns` is when the phase began (series times count
    /// from it), `one_way` whether the ends share a clock. `None` when nothing
    /// was sent.
    pub fn latency(&self, rate: f64, start_ns: u64, one_way: bool) -> Option<Latency> {
        if self.sent == 0 {
            return None;
        }
        let ms = |ns: f64| ns / 1e6;
        let rtts: Vec<f64> = self.samples.iter().map(|s| ms(s.rtt_ns as f64)).collect();
        let received = self.samples.len() as u64;
        let empty = Spread {
            samples: 0,
            min: 0.0,
            median: 0.0,
            p90: 0.0,
            p99: 0.0,
            max: 0.0,
            mean: 0.0,
        };
        let way = |f: fn(&Sample) -> i64| {
            let v: Vec<f64> = self.samples.iter().map(|s| ms(f(s) as f64)).collect();
            one_way.then(|| Spread::of(&v)).flatten()
        };
        let jitter = if rtts.len() < 2 {
            0.0
        } else {
            rtts.windows(2).map(|w| (w[1] - w[0]).abs()).sum::<f64>() / (rtts.len() - 1) as f64
        };
        let stride = self.samples.len().div_ceil(SERIES_POINTS).max(1);
        let series = self
            .samples
            .iter()
            .step_by(stride)
            .map(|s| {
                (
                    (s.sent_ns.saturating_sub(start_ns) as f64 / 1e9) as f32,
                    ms(s.rtt_ns as f64) as f32,
                )
            })
            .collect();
        Some(Latency {
            rate,
            sent: self.sent,
            received,
            lost_percent: (self.sent.saturating_sub(received)) as f64 / self.sent as f64 * 100.0,
            reordered: self.reordered,
            rtt_ms: Spread::of(&rtts).unwrap_or(empty),
            forward_ms: way(|s| s.forward_ns),
            reverse_ms: way(|s| s.reverse_ns),
            jitter_ms: jitter,
            series,
        })
    }
}

/// The probing side of one phase.
#[derive(Debug)]
pub struct Prober {
    interval_ns: u64,
    start_ns: u64,
    next_due_ns: u64,
    next_seq: u32,
    /// Whether each sequence number sent has had its echo (index: seq).
    answered: Vec<bool>,
    highest_seen: Option<u32>,
    probes: Probes,
}

impl Prober {
    /// Probes at `rate` per second (at least 1, at most 10,000), the first due
    /// at `now_ns`.
    pub fn new(rate: f64, now_ns: u64) -> Prober {
        let rate = rate.clamp(1.0, 10_000.0);
        Prober {
            interval_ns: (1e9 / rate) as u64,
            start_ns: now_ns,
            next_due_ns: now_ns,
            next_seq: 0,
            answered: Vec::new(),
            highest_seen: None,
            probes: Probes::default(),
        }
    }

    /// When the phase began.
    pub fn start_ns(&self) -> u64 {
        self.start_ns
    }

    /// What has been seen so far.
    pub fn probes(&self) -> &Probes {
        &self.probes
    }

    /// When the next probe is due.
    pub fn next_due_ns(&self) -> u64 {
        self.next_due_ns
    }

    /// The next probe into `buf` (at least [`PACKET_LEN`] bytes) if one is due
    /// at `now_ns`; its length.
    pub fn poll_transmit(&mut self, now_ns: u64, buf: &mut [u8]) -> Option<usize> {
        if now_ns < self.next_due_ns || buf.len() < PACKET_LEN {
            return None;
        }
        let r = Repr {
            kind: Kind::Probe,
            seq: self.next_seq,
            client_send_ns: now_ns,
            server_receive_ns: 0,
            server_send_ns: 0,
        };
        r.emit(&mut Packet::new_unchecked(&mut buf[..PACKET_LEN]));
        self.next_seq = self.next_seq.wrapping_add(1);
        self.answered.push(false);
        self.probes.sent += 1;
        // The schedule stays isochronous; one woken more than an interval late
        // starts afresh from now rather than sending a burst.
        self.next_due_ns += self.interval_ns;
        if self.next_due_ns <= now_ns {
            self.next_due_ns = now_ns + self.interval_ns;
        }
        Some(PACKET_LEN)
    }

    /// A datagram that arrived at `now_ns`.
    pub fn handle_echo(&mut self, now_ns: u64, datagram: &[u8]) -> Result<(), Ignored> {
        let p = Packet::new_checked(datagram).map_err(|_| Ignored::NotAProbe)?;
        let r = Repr::parse(&p).map_err(|_| Ignored::NotAProbe)?;
        if r.kind != Kind::Echo {
            return Err(Ignored::NotAnEcho);
        }
        let Some(answered) = self.answered.get_mut(r.seq as usize) else {
            return Err(Ignored::Unknown);
        };
        if *answered {
            return Err(Ignored::Duplicate);
        }
        let held = r.server_send_ns.saturating_sub(r.server_receive_ns);
        let total = now_ns
            .checked_sub(r.client_send_ns)
            .filter(|t| *t >= held)
            .ok_or(Ignored::Impossible)?;
        *answered = true;
        if self.highest_seen.is_some_and(|h| r.seq < h) {
            self.probes.reordered += 1;
        } else {
            self.highest_seen = Some(r.seq);
        }
        self.probes.samples.push(Sample {
            seq: r.seq,
            sent_ns: r.client_send_ns,
            rtt_ns: total - held,
            forward_ns: r.server_receive_ns as i64 - r.client_send_ns as i64,
            reverse_ns: now_ns as i64 - r.server_send_ns as i64,
        });
        Ok(())
    }

    /// Everything seen; probes without an echo by now count as lost.
    pub fn finish(self) -> Probes {
        self.probes
    }
}

/// The responder's side: turn a probe that arrived at `received_ns` into its
/// echo in place (the same length), stamped as sent at `send_ns`; its length,
/// or `None` for a datagram that is not a probe (never answered: the responder
/// is no reflector).
pub fn echo_in_place(buf: &mut [u8], received_ns: u64, send_ns: u64) -> Option<usize> {
    let p = Packet::new_checked(&buf[..]).ok()?;
    if p.kind() != Some(Kind::Probe) {
        return None;
    }
    let mut p = Packet::new_unchecked(&mut buf[..]);
    p.set_kind(Kind::Echo);
    p.set_server_receive_ns(received_ns);
    p.set_server_send_ns(send_ns);
    Some(buf.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// Sends what is due at `now`, returning the probes' bytes.
    fn due(p: &mut Prober, now: u64) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut buf = [0u8; 128];
        while let Some(n) = p.poll_transmit(now, &mut buf) {
            out.push(buf[..n].to_vec());
        }
        out
    }

    /// The responder's echo of `probe`, held there `held` ns.
    fn echo(mut probe: Vec<u8>, at: u64, held: u64) -> Vec<u8> {
        let n = echo_in_place(&mut probe, at, at + held).unwrap();
        probe.truncate(n);
        probe
    }

    #[test]
    fn probes_keep_their_schedule_and_never_burst() {
        let mut p = Prober::new(100.0, 1000 * MS);
        assert_eq!(due(&mut p, 1000 * MS).len(), 1);
        assert_eq!(p.next_due_ns(), 1010 * MS);
        assert!(due(&mut p, 1009 * MS).is_empty());
        // Woken 2 ms late: one probe, and the schedule keeps its phase.
        assert_eq!(due(&mut p, 1012 * MS).len(), 1);
        assert_eq!(p.next_due_ns(), 1020 * MS);
        // Woken 55 ms late: one probe, not five, and a fresh schedule from now.
        assert_eq!(due(&mut p, 1075 * MS).len(), 1);
        assert_eq!(p.next_due_ns(), 1085 * MS);
        assert_eq!(p.finish().sent, 3);
    }

    #[test]
    fn round_trips_and_one_way_delays_from_the_stamps() {
        // 3 ms out, 0.5 ms in the responder, 7 ms back.
        let mut p = Prober::new(10.0, 0);
        for i in 0..10u64 {
            let t = i * 100 * MS;
            for probe in due(&mut p, t) {
                let e = echo(probe, t + 3 * MS, MS / 2);
                p.handle_echo(t + 3 * MS + MS / 2 + 7 * MS, &e).unwrap();
            }
        }
        let l = p.finish().latency(10.0, 0, true).unwrap();
        assert_eq!((l.sent, l.received, l.lost_percent), (10, 10, 0.0));
        assert_eq!(l.rtt_ms.median, 10.0);
        assert_eq!(l.forward_ms.as_ref().unwrap().median, 3.0);
        assert_eq!(l.reverse_ms.as_ref().unwrap().max, 7.0);
        assert_eq!(l.jitter_ms, 0.0);
        assert_eq!(l.series.len(), 10);
        assert_eq!(l.series[3], (0.3, 10.0));
        // Without a shared clock there is no one-way figure.
        let mut p = Prober::new(10.0, 0);
        let probe = due(&mut p, 0).pop().unwrap();
        p.handle_echo(4 * MS, &echo(probe, 2 * MS, 0)).unwrap();
        let l = p.finish().latency(10.0, 0, false).unwrap();
        assert_eq!((l.forward_ms, l.reverse_ms), (None, None));
        assert_eq!(l.rtt_ms.max, 4.0);
    }

    #[test]
    fn loss_reordering_duplicates_and_strangers() {
        let mut p = Prober::new(1000.0, 0);
        let mut probes = Vec::new();
        for i in 0..5u64 {
            probes.extend(due(&mut p, i * MS));
        }
        let e: Vec<Vec<u8>> = probes.into_iter().map(|b| echo(b, 10 * MS, 0)).collect();
        // 0, 2, 1 (late), 4; 3 lost; 2 again (duplicate).
        for i in [0, 2, 1, 4] {
            p.handle_echo(20 * MS, &e[i]).unwrap();
        }
        assert_eq!(p.handle_echo(21 * MS, &e[2]), Err(Ignored::Duplicate));
        assert_eq!(p.handle_echo(21 * MS, b"hello"), Err(Ignored::NotAProbe));
        let mut stranger = e[0].clone();
        stranger[8..12].copy_from_slice(&99u32.to_be_bytes());
        assert_eq!(p.handle_echo(21 * MS, &stranger), Err(Ignored::Unknown));
        let mut unechoed = e[0].clone();
        unechoed[5] = 1;
        assert_eq!(p.handle_echo(21 * MS, &unechoed), Err(Ignored::NotAnEcho));
        // An echo that says it came back before it left.
        let mut p2 = Prober::new(1.0, 50 * MS);
        let b = due(&mut p2, 50 * MS).pop().unwrap();
        assert_eq!(
            p2.handle_echo(40 * MS, &echo(b, 45 * MS, 0)),
            Err(Ignored::Impossible)
        );
        let l = p.finish().latency(1000.0, 0, true).unwrap();
        assert_eq!((l.sent, l.received, l.reordered), (5, 4, 1));
        assert_eq!(l.lost_percent, 20.0);
    }

    #[test]
    fn percentiles_jitter_and_a_thinned_series() {
        let s = Spread::of(&[5.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
        assert_eq!((s.min, s.median, s.max, s.mean), (1.0, 3.0, 5.0, 3.0));
        assert!((s.p90 - 4.6).abs() < 1e-9, "{}", s.p90);
        assert!((s.p99 - 4.96).abs() < 1e-9, "{}", s.p99);
        assert_eq!(Spread::of(&[]), None);
        // 1000 probes at 1 ms, RTT alternating 1 and 3 ms: jitter 2 ms.
        let mut p = Prober::new(1000.0, 0);
        for i in 0..1000u64 {
            let t = i * MS;
            for b in due(&mut p, t) {
                let rtt = if i % 2 == 0 { MS } else { 3 * MS };
                p.handle_echo(t + rtt, &echo(b, t + rtt / 2, 0)).unwrap();
            }
        }
        let l = p.finish().latency(1000.0, 0, true).unwrap();
        assert_eq!(l.jitter_ms, 2.0);
        assert!(l.series.len() <= SERIES_POINTS && l.series.len() >= 250);
        assert_eq!(l.rtt_ms.samples, 1000);
    }

    #[test]
    fn pooled_phases_add_up_and_nothing_sent_is_no_figure() {
        let phase = |rtt: u64| {
            let mut p = Prober::new(100.0, 0);
            let b = due(&mut p, 0).pop().unwrap();
            due(&mut p, 10 * MS); // a second probe, lost
            p.handle_echo(rtt, &echo(b, rtt / 2, 0)).unwrap();
            p.finish()
        };
        let mut all = phase(2 * MS);
        all.pool(phase(4 * MS));
        let l = all.latency(100.0, 0, true).unwrap();
        assert_eq!((l.sent, l.received, l.lost_percent), (4, 2, 50.0));
        assert_eq!(l.rtt_ms.median, 3.0);
        assert_eq!(Probes::default().latency(100.0, 0, true), None);
    }

    #[test]
    fn the_responder_answers_probes_only() {
        let mut p = Prober::new(1.0, 0);
        let mut b = due(&mut p, 0).pop().unwrap();
        assert_eq!(echo_in_place(&mut b, 5, 6), Some(PACKET_LEN));
        // An echo is not answered again (no loops between two responders).
        assert_eq!(echo_in_place(&mut b, 7, 8), None);
        assert_eq!(echo_in_place(&mut b"not a probe".to_vec(), 1, 2), None);
    }
}
