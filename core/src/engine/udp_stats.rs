//! What a UDP stream's receiver counts, with iperf3 3.12's exact semantics
//! (`iperf_udp_recv` in src/iperf_udp.c, `iperf_reset_stats` in src/iperf_api.c), so
//! loss, reordering and jitter agree with an iperf3 peer's report of the same stream.
//!
//! Loss is inferred from the counter alone, in constant space: a forward gap is
//! counted lost at once, and any datagram whose counter is not above the highest seen
//! is "out of order" and cancels one earlier loss. A duplicate therefore counts as
//! out of order and hides a real loss; iperf3 accepts that trade-off.
//!
//! Jitter follows RFC 1889 section 6.3.1 / A.8: with transit = arrival - sent (the
//! two clocks need not agree, only their rates), D = change in transit between
//! consecutive arrivals, and J += (|D| - J) / 16.

use std::time::Duration;

/// One UDP stream's receive-side counters. Feed it every datagram that arrives
/// while the test is running; it reads no clock.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UdpReceiverStats {
    /// Highest counter seen: iperf3's `packet_count`, its receiver's "packets".
    highest: u64,
    /// iperf3's `cnt_error`.
    lost: u64,
    out_of_order: u64,
    /// Since the omit period ended (or the start, with no omit period).
    bytes: u64,
    datagrams: u64,
    /// Seconds.
    jitter: f64,
    /// Seconds; meaningful once a datagram has arrived since the last reset.
    prev_transit: f64,
    omitted_packets: u64,
    omitted_errors: u64,
    omitted_out_of_order: u64,
}

impl UdpReceiverStats {
    pub fn new() -> Self {
        Self::default()
    }

    /// One datagram of `len` bytes carrying `counter`, stamped `sent` by the sender's
    /// clock and received at `arrived` by ours, both as time since that clock's epoch
    /// (CLOCK_MONOTONIC on both sides for iperf3; the epochs may differ).
    pub fn on_datagram(&mut self, counter: u64, sent: Duration, arrived: Duration, len: usize) {
        // iperf3 skips reads of zero bytes before touching any counter, and decides
        // "first datagram" by bytes received being zero; a zero-length call must not
        // disturb either.
        if len == 0 {
            return;
        }
        // iperf3 primes the jitter on the first datagram after the start or the omit
        // reset: it tests `bytes_received == 0`, which the reset also zeroes.
        let first = self.datagrams == 0;
        self.bytes = self.bytes.saturating_add(len as u64);
        self.datagrams += 1;

        if counter > self.highest {
            // Forward; everything skipped between is counted lost for now.
            self.lost = self.lost.saturating_add(counter - 1 - self.highest);
            self.highest = counter;
        } else {
            // Backward or repeated (iperf3 cannot tell a late datagram from a
            // duplicate): it fills one earlier gap.
            self.out_of_order += 1;
            self.lost = self.lost.saturating_sub(1);
        }

        let transit = transit_secs(sent, arrived);
        if first {
            self.prev_transit = transit;
        }
        let d = (transit - self.prev_transit).abs();
        self.prev_transit = transit;
        self.jitter += (d - self.jitter) / 16.0;
    }

    /// The omit period (-O) is over: what iperf3's omit timer does to a receiving
    /// stream. The totals keep counting; what they held now is remembered as omitted
    /// so reports can subtract it. Bytes and datagrams restart from zero, jitter is
    /// zeroed, and the next datagram primes the jitter again as a first one does.
    pub fn end_omit_period(&mut self) {
        self.omitted_packets = self.highest;
        self.omitted_errors = self.lost;
        self.omitted_out_of_order = self.out_of_order;
        self.jitter = 0.0;
        self.bytes = 0;
        self.datagrams = 0;
    }

    /// Highest counter seen (iperf3's receiver `packet_count`), omit period included.
    pub fn packets(&self) -> u64 {
        self.highest
    }

    /// Datagrams counted lost (iperf3's `cnt_error`), omit period included.
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// Datagrams that arrived with a counter not above the highest seen, omit period
    /// included.
    pub fn out_of_order(&self) -> u64 {
        self.out_of_order
    }

    /// Bytes received since the omit period ended.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Datagrams received since the omit period ended.
    pub fn datagrams(&self) -> u64 {
        self.datagrams
    }

    /// RFC 1889 interarrival jitter, seconds (iperf3 reports it ×1000 as `jitter_ms`).
    pub fn jitter_seconds(&self) -> f64 {
        self.jitter
    }

    /// `packets()` when the omit period ended (0 if there was none).
    pub fn omitted_packets(&self) -> u64 {
        self.omitted_packets
    }

    /// `lost()` when the omit period ended.
    pub fn omitted_errors(&self) -> u64 {
        self.omitted_errors
    }

    /// `out_of_order()` when the omit period ended.
    pub fn omitted_out_of_order(&self) -> u64 {
        self.omitted_out_of_order
    }

    /// Percent lost after the omit period, as iperf3's receiver summary computes it:
    /// 100 * (lost - omitted_errors) / (packets - omitted_packets), 0 when no packets
    /// came after the omit period. With no omit period this is 100 * lost / packets.
    /// Reordering after the omit period can take `lost` below `omitted_errors`; iperf3
    /// then reports a negative loss, and so does this.
    pub fn lost_percent(&self) -> f64 {
        let packets = self.highest - self.omitted_packets;
        if packets == 0 {
            return 0.0;
        }
        100.0 * (self.lost as f64 - self.omitted_errors as f64) / packets as f64
    }
}

/// |arrived - sent| in seconds at microsecond resolution, as iperf3 computes it: both
/// times are whole microseconds there (the wire carries microseconds; the receiver's
/// clock is read as `tv_nsec / 1000`), and its time difference is always positive, so
/// a sender clock ahead of ours gives the same transit as one behind by as much.
fn transit_secs(sent: Duration, arrived: Duration) -> f64 {
    let (s, a) = (sent.as_micros(), arrived.as_micros());
    let us = a.abs_diff(s);
    (us / 1_000_000) as f64 + (us % 1_000_000) as f64 / 1_000_000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEN: usize = 1460;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    /// Datagram `counter`, sent at `counter` ms and arriving `delay_ms` later.
    fn feed(s: &mut UdpReceiverStats, counter: u64, delay_ms: u64) {
        s.on_datagram(counter, ms(counter), ms(counter + delay_ms), LEN);
    }

    #[test]
    fn in_order_stream() {
        let mut s = UdpReceiverStats::new();
        for c in 1..=100 {
            feed(&mut s, c, 5);
        }
        assert_eq!(s.packets(), 100);
        assert_eq!(s.datagrams(), 100);
        assert_eq!(s.bytes(), 100 * LEN as u64);
        assert_eq!(s.lost(), 0);
        assert_eq!(s.out_of_order(), 0);
        assert_eq!(s.lost_percent(), 0.0);
        assert_eq!(s.jitter_seconds(), 0.0);
    }

    #[test]
    fn empty_stream() {
        let s = UdpReceiverStats::new();
        assert_eq!((s.packets(), s.lost(), s.datagrams()), (0, 0, 0));
        assert_eq!(s.lost_percent(), 0.0);
    }

    #[test]
    fn gap_counts_as_loss() {
        let mut s = UdpReceiverStats::new();
        for c in [1, 2, 3, 7, 8] {
            feed(&mut s, c, 5);
        }
        assert_eq!(s.packets(), 8);
        assert_eq!(s.lost(), 3);
        assert_eq!(s.datagrams(), 5);
        assert_eq!(s.lost_percent(), 100.0 * 3.0 / 8.0);
    }

    #[test]
    fn first_datagrams_lost() {
        // The receiver expects counter 1 first: starting at 4 means 3 lost.
        let mut s = UdpReceiverStats::new();
        feed(&mut s, 4, 5);
        assert_eq!((s.packets(), s.lost()), (4, 3));
    }

    #[test]
    fn reordered_pair() {
        let mut s = UdpReceiverStats::new();
        for c in [1, 2, 4, 3, 5] {
            feed(&mut s, c, 5);
        }
        assert_eq!(s.packets(), 5);
        assert_eq!(s.lost(), 0, "3 was counted lost at 4, then found");
        assert_eq!(s.out_of_order(), 1);
        assert_eq!(s.datagrams(), 5);
    }

    #[test]
    fn duplicates_are_out_of_order_and_hide_a_loss() {
        let mut s = UdpReceiverStats::new();
        feed(&mut s, 1, 5);
        feed(&mut s, 1, 5);
        assert_eq!((s.lost(), s.out_of_order()), (0, 1), "loss stays at zero");
        feed(&mut s, 3, 5); // 2 lost
        feed(&mut s, 3, 5); // duplicated in the network
        assert_eq!(s.packets(), 3);
        assert_eq!(s.lost(), 0, "the duplicate cancels the real loss of 2");
        assert_eq!(s.out_of_order(), 2);
        assert_eq!(s.datagrams(), 4);
    }

    #[test]
    fn first_datagram_primes_jitter() {
        // However large the first transit, it is not a change: D = 0.
        let mut s = UdpReceiverStats::new();
        s.on_datagram(1, ms(0), ms(5_000), LEN);
        assert_eq!(s.jitter_seconds(), 0.0);
        s.on_datagram(2, ms(1), ms(5_017), LEN); // transit +16 ms
        assert!((s.jitter_seconds() - 0.001).abs() < 1e-12);
    }

    #[test]
    fn jitter_converges_to_zero_on_constant_delay() {
        let mut s = UdpReceiverStats::new();
        for c in 1..=20 {
            feed(&mut s, c, if c % 2 == 0 { 1 } else { 3 });
        }
        assert!(s.jitter_seconds() > 0.001);
        for c in 21..=500 {
            feed(&mut s, c, 7);
        }
        assert!(s.jitter_seconds() < 1e-9, "{}", s.jitter_seconds());
    }

    #[test]
    fn jitter_on_alternating_delays() {
        // Transit alternates 1 ms / 3 ms, so |D| = 2 ms from the second datagram on:
        // J_n = 2 ms * (1 - (15/16)^(n-1)).
        let mut s = UdpReceiverStats::new();
        let n = 200;
        for c in 1..=n {
            feed(&mut s, c, if c % 2 == 0 { 1 } else { 3 });
        }
        let expected = 0.002 * (1.0 - (15.0f64 / 16.0).powi(n as i32 - 1));
        assert!(
            (s.jitter_seconds() - expected).abs() < 1e-12,
            "{} vs {expected}",
            s.jitter_seconds()
        );
        assert!((s.jitter_seconds() - 0.002).abs() < 1e-8);
    }

    #[test]
    fn sender_clock_ahead_of_ours() {
        // Monotonic clocks on two hosts: the sender's epoch may be later, so sent >
        // arrived. iperf3 takes the absolute difference; a constant offset is still
        // no jitter.
        let mut s = UdpReceiverStats::new();
        for c in 1..=10u64 {
            s.on_datagram(c, ms(1_000_000 + c), ms(c + 4), LEN);
        }
        assert_eq!(s.jitter_seconds(), 0.0);
    }

    #[test]
    fn microsecond_resolution() {
        // Sub-microsecond differences vanish, as on iperf3's wire.
        let mut s = UdpReceiverStats::new();
        s.on_datagram(1, Duration::from_nanos(0), Duration::from_nanos(1_000), LEN);
        s.on_datagram(2, Duration::from_nanos(0), Duration::from_nanos(1_999), LEN);
        assert_eq!(s.jitter_seconds(), 0.0);
    }

    #[test]
    fn zero_length_is_ignored() {
        let mut s = UdpReceiverStats::new();
        s.on_datagram(5, ms(0), ms(1), 0);
        assert_eq!(s, UdpReceiverStats::new());
    }

    #[test]
    fn omit_reset() {
        let mut s = UdpReceiverStats::new();
        for c in [1, 2, 5, 4, 6] {
            feed(&mut s, c, 1 + c % 3);
        }
        assert_eq!((s.packets(), s.lost(), s.out_of_order()), (6, 1, 1));
        assert!(s.jitter_seconds() > 0.0);

        s.end_omit_period();
        assert_eq!(s.omitted_packets(), 6);
        assert_eq!(s.omitted_errors(), 1);
        assert_eq!(s.omitted_out_of_order(), 1);
        assert_eq!((s.bytes(), s.datagrams()), (0, 0));
        assert_eq!(s.jitter_seconds(), 0.0);
        // Totals carry on.
        assert_eq!((s.packets(), s.lost(), s.out_of_order()), (6, 1, 1));
        assert_eq!(s.lost_percent(), 0.0);

        // The first datagram after the reset primes the jitter again: a transit of
        // 50 ms against 1 to 3 ms before is no change.
        feed(&mut s, 7, 50);
        assert_eq!(s.jitter_seconds(), 0.0);
        assert_eq!((s.bytes(), s.datagrams()), (LEN as u64, 1));
        feed(&mut s, 8, 50);
        feed(&mut s, 11, 50); // 9 and 10 lost
        assert_eq!(s.jitter_seconds(), 0.0);
        assert_eq!((s.packets(), s.lost()), (11, 3));
        // After the omit period: 5 packets (7..=11), 2 lost.
        assert_eq!(s.lost_percent(), 100.0 * 2.0 / 5.0);
    }

    #[test]
    fn reordering_after_omit_can_make_loss_negative() {
        // 3 is lost during the omit period and turns up after it: iperf3 counts the
        // recovery against post-omit loss and reports it below zero.
        let mut s = UdpReceiverStats::new();
        for c in [1, 2, 4] {
            feed(&mut s, c, 1);
        }
        s.end_omit_period();
        for c in [3, 5, 6, 7, 8] {
            feed(&mut s, c, 1);
        }
        assert_eq!((s.packets(), s.lost(), s.omitted_errors()), (8, 0, 1));
        assert_eq!(s.lost_percent(), -25.0);
    }
}
