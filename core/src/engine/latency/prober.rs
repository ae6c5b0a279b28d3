//! Latency probes, sans-IO (quinn-proto style): a [`Prober`] is told the time,
//! says when its next probe is due and writes it, takes the echoes that come
//! back, and hands what it saw over as [`Probes`] (`stats` makes the figures).
//! It opens no socket and reads no clock; `sockets` is the thin driver. Times
//! are nanoseconds of the clock both ends stamp with (CLOCK_MONOTONIC, shared
//! by every namespace of a host: `wire::probe`).

use super::stats::{Probes, Sample};
use crate::wire::probe::{Kind, PACKET_LEN, Packet, Repr};

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
    /// at `now_ns`; its length. Probes are isochronous: the n-th is due at
    /// start + n / rate. A prober woken late sends the one due and keeps to the
    /// schedule from then on, without a burst to catch up (a burst would queue
    /// behind itself and read as delay).
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

    /// A datagram that arrived at `now_ns`. From an echo: the round-trip time
    /// is the arrival minus the probe's send time, less the time the echo spent
    /// in the responder (its send minus receive stamp), as irtt counts it; one
    /// way out is the responder's receive stamp minus the send time, back the
    /// arrival minus the responder's send stamp (meaningful only when both ends
    /// share the clock, which `Probes::latency` is told).
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
    use super::super::stats::SERIES_POINTS;
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
    fn jitter_and_a_thinned_series() {
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
