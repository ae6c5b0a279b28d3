//! The ICMP errors a codec generates itself ("fragmentation needed" for a
//! packet over the inner MTU with DF set), queued for `poll` and rate limited
//! so a flood of oversized packets cannot turn into a flood of errors.

use std::collections::VecDeque;
use std::net::Ipv4Addr;
use std::time::Instant;

use crate::codec::Verdict;
use crate::wire::icmpv4_error;
use crate::wire::ipv4;

/// ICMP errors waiting for `poll`; more are counted and not built.
const ICMP_QUEUE_LEN: usize = 64;
/// ICMP errors a codec builds per second, with a burst of `ICMP_BURST`
/// (RFC 1812 section 4.3.2.8; Linux's icmp_msgs_per_sec and _burst defaults).
const ICMP_PER_SEC: u64 = 1000;
pub(super) const ICMP_BURST: u64 = 50;

/// A token bucket for generated ICMP errors.
#[derive(Debug)]
struct RateLimit {
    tokens: u64,
    last: Option<Instant>,
}

impl RateLimit {
    fn new() -> Self {
        RateLimit {
            tokens: ICMP_BURST,
            last: None,
        }
    }

    fn allow(&mut self, now: Instant) -> bool {
        let last = *self.last.get_or_insert(now);
        let elapsed_ms = now.saturating_duration_since(last).as_millis() as u64;
        let earned = elapsed_ms.saturating_mul(ICMP_PER_SEC) / 1000;
        if earned > 0 {
            self.tokens = (self.tokens + earned).min(ICMP_BURST);
            self.last = Some(now);
        }
        if self.tokens == 0 {
            return false;
        }
        self.tokens -= 1;
        true
    }
}

/// The ICMP errors a codec generated, waiting for `poll`.
#[derive(Debug)]
pub(super) struct IcmpErrors {
    pending: VecDeque<Vec<u8>>,
    limit: RateLimit,
    ident: u16,
    pub(super) sent: u64,
    pub(super) suppressed: u64,
}

impl IcmpErrors {
    pub(super) fn new() -> Self {
        IcmpErrors {
            pending: VecDeque::new(),
            limit: RateLimit::new(),
            ident: 0,
            sent: 0,
            suppressed: 0,
        }
    }

    /// Queues "fragmentation needed" about `original` (passed `check_ipv4`) from
    /// `src`, unless the rules or the rate limit forbid it.
    pub(super) fn frag_needed(&mut self, original: &[u8], mtu: u16, src: Ipv4Addr, now: Instant) {
        let orig = ipv4::Packet::new_unchecked(original);
        if !icmpv4_error::may_report(&orig)
            || self.pending.len() >= ICMP_QUEUE_LEN
            || !self.limit.allow(now)
        {
            self.suppressed += 1;
            return;
        }
        let mut buf = vec![0u8; icmpv4_error::MAX_PACKET_LEN];
        let n = icmpv4_error::emit_frag_needed(&orig, mtu, src, self.ident, &mut buf);
        buf.truncate(n);
        self.ident = self.ident.wrapping_add(1);
        self.sent += 1;
        self.pending.push_back(buf);
    }

    pub(super) fn pop(&mut self) -> Option<(Verdict, Vec<u8>)> {
        self.pending.pop_front().map(|b| (Verdict::ToTun, b))
    }
}
