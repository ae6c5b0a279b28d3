//! The TUN -> network thread: drains a TUN queue into a batch (a TSO/USO
//! super-packet cut into wire-size packets, or kept whole with its virtio
//! header for a codec that takes it so), runs the codec over it under one
//! lock, and sends what the codec says.

use super::config::Fault;
use super::extras::Extras;
use super::offload::{TunRead, VNET_HDR_LEN, check_whole_read, split_tun_read};
use super::open::TunQueue;
use super::sender::Sender;
use super::shared::{IDLE_YIELDS, PACKET_BUF, Shared, sh_due};
use super::split::Splits;
use super::stats::{Ctr, Local, record_cpu};
use super::tun;
use super::tun_rs_backend::{self, Read};
use super::tun_write::{write_framed, write_single};
use crate::codec::{Codec, DropReason, Verdict};
use std::net::SocketAddr;
use std::os::fd::BorrowedFd;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

/// A TUN read holds a virtio header and at most a 64 KiB packet.
const TUN_READ_BUF: usize = VNET_HDR_LEN + 65536;

pub(super) struct TunToNet {
    read: Vec<u8>,
    batch: Batch,
    /// On a tun-rs queue: its reads, in place of `split_tun_read`.
    tun_rs: Option<tun_rs_backend::Reader>,
}

/// The packets read from the TUN queue and what becomes of them.
struct Batch {
    pkts: Vec<Vec<u8>>,
    verdicts: Vec<Verdict>,
    to_net: Vec<(usize, SocketAddr)>,
    sender: Sender,
    extras: Extras,
    splits: Splits,
    local: Local,
}

impl TunToNet {
    pub(super) fn new<C: Codec>(sh: &Shared<C>, q: &TunQueue) -> TunToNet {
        TunToNet {
            tun_rs: q.tun_rs().map(tun_rs_backend::Reader::new),
            read: vec![0; TUN_READ_BUF],
            batch: Batch {
                pkts: (0..sh.batch)
                    .map(|_| Vec::with_capacity(PACKET_BUF))
                    .collect(),
                verdicts: Vec::with_capacity(sh.batch),
                to_net: Vec::with_capacity(sh.batch),
                sender: Sender::new(sh),
                extras: Extras::new(),
                splits: Splits::default(),
                local: Local::new(),
            },
        }
    }

    pub(super) fn run<C: Codec>(mut self, sh: &Shared<C>, q: &TunQueue, slot: usize) {
        let tun = q.fd();
        let mut cpu_at = Instant::now();
        let mut idle = 0;
        while !sh.stopping() {
            let (n, empty) = self.fill(sh, q, tun);
            if n > 0 || empty {
                self.batch.flush(sh, tun, n);
            }
            let now = Instant::now();
            record_cpu(&sh.stats, slot, &mut cpu_at, now, false);
            if empty {
                if n > 0 {
                    idle = 0;
                }
                if idle < IDLE_YIELDS {
                    idle += 1;
                    std::thread::yield_now();
                    continue;
                }
                self.batch.local.add(Ctr::Waits, 1);
                self.batch.local.flush(&sh.stats);
                sh.wait(tun);
                if sh.fault.is_some() && Fault::strike(&sh.fault, sh.started) {
                    return;
                }
            }
        }
        self.batch.local.flush(&sh.stats);
        record_cpu(&sh.stats, slot, &mut cpu_at, Instant::now(), true);
    }

    /// Reads the queue into the batch until it is full or the queue empty
    /// (flushing a full batch midway through a super-packet): how many
    /// packets the batch holds, and whether the queue was found empty.
    #[inline]
    fn fill<C: Codec>(
        &mut self,
        sh: &Shared<C>,
        q: &TunQueue,
        tun: BorrowedFd<'_>,
    ) -> (usize, bool) {
        let mut n = 0;
        loop {
            let empty = if let (Some(dev), Some(rs)) = (q.tun_rs(), self.tun_rs.as_mut()) {
                Self::read_tun_rs(rs, dev, &mut self.batch, sh, tun, &mut n)
            } else {
                self.read_fd(sh, tun, &mut n)
            };
            if empty {
                return (n, true);
            }
            if n >= sh.batch {
                return (n, false);
            }
        }
    }

    /// One read of a tun-rs queue into the batch; whether the queue was empty.
    #[inline]
    fn read_tun_rs<C: Codec>(
        rs: &mut tun_rs_backend::Reader,
        dev: &tun_rs::SyncDevice,
        b: &mut Batch,
        sh: &Shared<C>,
        tun: BorrowedFd<'_>,
        n: &mut usize,
    ) -> bool {
        let k = match rs.read(dev) {
            Read::Packets(k) => k,
            Read::Empty => return true,
            Read::Failed => {
                b.local.add(Ctr::TunReadErr, 1);
                std::thread::sleep(Duration::from_millis(10));
                return true;
            }
            Read::Refused => {
                b.local.add(Ctr::OffloadErr, 1);
                return false;
            }
        };
        if k > 1 {
            b.local.add(Ctr::SegmentedSupers, 1);
            b.local.add(Ctr::SegmentedPackets, k as u64);
        }
        for i in 0..k {
            if *n == sh.batch {
                b.flush(sh, tun, *n);
                *n = 0;
            }
            rs.take(i, &mut b.pkts[*n]);
            b.local
                .packet(Ctr::TunRxPackets, Ctr::TunRxBytes, b.pkts[*n].len());
            if sh.whole {
                // tun-rs has cut it already: a plain packet, all-zero header.
                b.pkts[*n].splice(0..0, [0; VNET_HDR_LEN]);
            }
            *n += 1;
        }
        false
    }

    /// One read of the TUN descriptor into the batch, a super-packet cut
    /// into wire-size packets; whether the queue was empty.
    #[inline]
    fn read_fd<C: Codec>(&mut self, sh: &Shared<C>, tun: BorrowedFd<'_>, n: &mut usize) -> bool {
        let b = &mut self.batch;
        let len = match tun::read(tun, &mut self.read) {
            Ok(Some(len)) => len,
            Ok(None) => return true,
            Err(_) => {
                b.local.add(Ctr::TunReadErr, 1);
                std::thread::sleep(Duration::from_millis(10));
                return true;
            }
        };
        if len >= self.read.len() {
            // Larger than any packet may be: something is off.
            b.local.add(Ctr::OffloadErr, 1);
            return false;
        }
        if sh.whole {
            if take_whole(&self.read[..len], &mut b.pkts[*n], &mut b.local) {
                *n += 1;
            }
            return false;
        }
        match split_tun_read(&mut self.read[..len]) {
            Ok(TunRead::Packet(p)) => {
                let pkt = &mut b.pkts[*n];
                pkt.clear();
                pkt.extend_from_slice(p);
                b.local.packet(Ctr::TunRxPackets, Ctr::TunRxBytes, p.len());
                *n += 1;
            }
            Ok(TunRead::Gso(s)) => {
                b.local.add(Ctr::SegmentedSupers, 1);
                b.local.add(Ctr::SegmentedPackets, s.count() as u64);
                for i in 0..s.count() {
                    if *n == sh.batch {
                        b.flush(sh, tun, *n);
                        *n = 0;
                    }
                    s.segment_into(i, &mut b.pkts[*n]);
                    b.local
                        .packet(Ctr::TunRxPackets, Ctr::TunRxBytes, b.pkts[*n].len());
                    *n += 1;
                }
            }
            Err(_) => b.local.add(Ctr::OffloadErr, 1),
        }
        false
    }
}

/// One TUN read into `pkt` as it is, virtio header and all, for a codec
/// that takes super-packets whole; one whose header makes no sense is
/// dropped (and counted). Whether `pkt` holds it.
#[inline]
fn take_whole(read: &[u8], pkt: &mut Vec<u8>, local: &mut Local) -> bool {
    let frames = match check_whole_read(read) {
        Ok(frames) => frames as u64,
        Err(_) => {
            local.add(Ctr::OffloadErr, 1);
            return false;
        }
    };
    pkt.clear();
    pkt.extend_from_slice(read);
    local.add(Ctr::TunRxPackets, frames);
    local.add(Ctr::TunRxBytes, (read.len() - VNET_HDR_LEN) as u64);
    if read[1] != 0 {
        // A GSO type: a super-packet.
        local.add(Ctr::WholeSupers, 1);
        local.add(Ctr::WholePackets, frames);
    }
    true
}

impl Batch {
    /// Runs the codec over `pkts[..n]` and sends what it says; with n = 0 it
    /// only ticks and drains `poll` when due.
    fn flush<C: Codec>(&mut self, sh: &Shared<C>, tun: BorrowedFd<'_>, n: usize) {
        let Batch {
            pkts,
            verdicts,
            to_net,
            sender,
            extras,
            splits,
            local,
        } = self;
        let now = Instant::now();
        if n == 0 && now < sh_due(sh) {
            local.flush(&sh.stats);
            return;
        }
        if n > 0 {
            local.add(Ctr::TunBatches, 1);
        }
        verdicts.clear();
        splits.clear();
        {
            let mut slot = sh.lock();
            let slot = &mut *slot;
            // One catch_unwind per batch; a verdict is pushed as each packet
            // is decided, so after a panic the packet at `verdicts.len()` is
            // the one that panicked: it alone is dropped, and the batch goes
            // on after it (never again over the packets already handled, which
            // the codec may have rewritten or counted).
            loop {
                let from = verdicts.len();
                let r = catch_unwind(AssertUnwindSafe(|| {
                    for (i, p) in pkts.iter_mut().enumerate().take(n).skip(from) {
                        let v = slot.codec.handle_tun(p, now);
                        if v == Verdict::Split {
                            // Its pieces meet the codec in its place, ahead
                            // of the packets behind it.
                            splits.offer(&mut slot.codec, i, p, now, local);
                        }
                        verdicts.push(v);
                    }
                }));
                if r.is_ok() {
                    break;
                }
                local.add(Ctr::CodecPanic, 1);
                verdicts.push(Verdict::Drop(DropReason::Panicked));
            }
            let r = catch_unwind(AssertUnwindSafe(|| {
                sh.tick_if_due(slot, now);
                extras.collect(
                    &mut slot.codec,
                    now,
                    crate::codec::Drain::IntoNetwork,
                    local,
                );
                sh.note_deadline(&slot.codec);
            }));
            if r.is_err() {
                local.add(Ctr::CodecPanic, 1);
            }
        }
        to_net.clear();
        for (i, v) in verdicts.iter().enumerate() {
            match *v {
                Verdict::ToNetwork(a) => to_net.push((i, a)),
                Verdict::ToTun if sh.whole => write_framed(tun, &pkts[i], local),
                Verdict::ToTun => write_single(tun, &pkts[i], local),
                Verdict::Split => splits.settle(i, tun, local),
                Verdict::Drop(r) => local.dropped(r),
                Verdict::Queued => {
                    if let Some(b) = extras.spare.pop() {
                        pkts[i] = b;
                    }
                }
                Verdict::Consumed => {}
            }
        }
        sender.send(sh, pkts, to_net, local);
        extras.flush(sh, sender, tun, local);
        local.flush(&sh.stats);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::offload::test_packets::{Tcp, pattern, tso_read};

    #[test]
    fn a_read_is_taken_whole_and_a_malformed_one_dropped_and_counted() {
        let payload = pattern(4000);
        let t = Tcp {
            payload: &payload,
            ..Tcp::default()
        };
        let good = tso_read(&t, 1448);
        let mut bad = good.clone();
        bad[4..6].copy_from_slice(&0u16.to_ne_bytes()); // GSO size 0
        let mut local = Local::new();
        let mut pkt = Vec::new();
        assert!(!take_whole(&bad, &mut pkt, &mut local));
        assert!(!take_whole(
            &good[..VNET_HDR_LEN + 30],
            &mut pkt,
            &mut local
        ));
        assert_eq!(local.get(Ctr::OffloadErr), 2);
        assert!(pkt.is_empty());
        // The next read is taken as ever: header and all, 3 wire packets.
        assert!(take_whole(&good, &mut pkt, &mut local));
        assert_eq!(pkt, good);
        assert_eq!(local.get(Ctr::TunRxPackets), 3);
        assert_eq!(local.get(Ctr::WholeSupers), 1);
        assert_eq!(local.get(Ctr::WholePackets), 3);
    }
}
