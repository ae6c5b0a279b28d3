//! The TUN -> network thread: drains a TUN queue into a batch (a TSO/USO
//! super-packet cut into wire-size packets), runs the codec over it under one
//! lock, and sends what the codec says.

use super::config::Fault;
use super::extras::Extras;
use super::offload::{TunRead, VNET_HDR_LEN, split_tun_read};
use super::open::TunQueue;
use super::sender::Sender;
use super::shared::{IDLE_YIELDS, PACKET_BUF, Shared, sh_due};
use super::stats::{Ctr, Local, record_cpu};
use super::tun;
use super::tun_rs_backend::{self, Read};
use super::tun_write::write_single;
use crate::codec::{Codec, DropReason, Verdict};
use std::net::SocketAddr;
use std::os::fd::BorrowedFd;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

/// A TUN read holds a virtio header and at most a 64 KiB packet.
const TUN_READ_BUF: usize = VNET_HDR_LEN + 65536;

pub(super) struct TunToNet {
    read: Vec<u8>,
    pkts: Vec<Vec<u8>>,
    verdicts: Vec<Verdict>,
    to_net: Vec<(usize, SocketAddr)>,
    sender: Sender,
    extras: Extras,
    local: Local,
    /// On a tun-rs queue: its reads, in place of `split_tun_read`.
    tun_rs: Option<tun_rs_backend::Reader>,
}

impl TunToNet {
    pub(super) fn new<C: Codec>(sh: &Shared<C>, q: &TunQueue) -> TunToNet {
        TunToNet {
            tun_rs: q.tun_rs().map(tun_rs_backend::Reader::new),
            read: vec![0; TUN_READ_BUF],
            pkts: (0..sh.batch)
                .map(|_| Vec::with_capacity(PACKET_BUF))
                .collect(),
            verdicts: Vec::with_capacity(sh.batch),
            to_net: Vec::with_capacity(sh.batch),
            sender: Sender::new(sh),
            extras: Extras::new(),
            local: Local::new(),
        }
    }

    pub(super) fn run<C: Codec>(mut self, sh: &Shared<C>, q: &TunQueue, slot: usize) {
        let tun = q.fd();
        let mut cpu_at = Instant::now();
        let batch = sh.batch;
        let mut idle = 0;
        while !sh.stopping() {
            let mut n = 0;
            // Whether the queue was found empty (else the batch filled up).
            let mut empty = false;
            loop {
                if let (Some(dev), Some(rs)) = (q.tun_rs(), self.tun_rs.as_mut()) {
                    let k = match rs.read(dev) {
                        Read::Packets(k) => k,
                        Read::Empty => {
                            empty = true;
                            break;
                        }
                        Read::Failed => {
                            self.local.add(Ctr::TunReadErr, 1);
                            std::thread::sleep(Duration::from_millis(10));
                            empty = true;
                            break;
                        }
                        Read::Refused => {
                            self.local.add(Ctr::OffloadErr, 1);
                            continue;
                        }
                    };
                    if k > 1 {
                        self.local.add(Ctr::SegmentedSupers, 1);
                        self.local.add(Ctr::SegmentedPackets, k as u64);
                    }
                    for i in 0..k {
                        if n == batch {
                            Self::flush(
                                &mut self.pkts,
                                &mut self.verdicts,
                                &mut self.to_net,
                                &mut self.sender,
                                &mut self.extras,
                                &mut self.local,
                                sh,
                                tun,
                                n,
                            );
                            n = 0;
                        }
                        rs.take(i, &mut self.pkts[n]);
                        self.local
                            .packet(Ctr::TunRxPackets, Ctr::TunRxBytes, self.pkts[n].len());
                        n += 1;
                    }
                    if n >= batch {
                        break;
                    }
                    continue;
                }
                let len = match tun::read(tun, &mut self.read) {
                    Ok(Some(len)) => len,
                    Ok(None) => {
                        empty = true;
                        break;
                    }
                    Err(_) => {
                        self.local.add(Ctr::TunReadErr, 1);
                        std::thread::sleep(Duration::from_millis(10));
                        empty = true;
                        break;
                    }
                };
                if len >= self.read.len() {
                    // Larger than any packet may be: something is off.
                    self.local.add(Ctr::OffloadErr, 1);
                    continue;
                }
                match split_tun_read(&mut self.read[..len]) {
                    Ok(TunRead::Packet(p)) => {
                        let b = &mut self.pkts[n];
                        b.clear();
                        b.extend_from_slice(p);
                        self.local
                            .packet(Ctr::TunRxPackets, Ctr::TunRxBytes, p.len());
                        n += 1;
                    }
                    Ok(TunRead::Gso(s)) => {
                        self.local.add(Ctr::SegmentedSupers, 1);
                        self.local.add(Ctr::SegmentedPackets, s.count() as u64);
                        for i in 0..s.count() {
                            if n == batch {
                                Self::flush(
                                    &mut self.pkts,
                                    &mut self.verdicts,
                                    &mut self.to_net,
                                    &mut self.sender,
                                    &mut self.extras,
                                    &mut self.local,
                                    sh,
                                    tun,
                                    n,
                                );
                                n = 0;
                            }
                            s.segment_into(i, &mut self.pkts[n]);
                            self.local.packet(
                                Ctr::TunRxPackets,
                                Ctr::TunRxBytes,
                                self.pkts[n].len(),
                            );
                            n += 1;
                        }
                    }
                    Err(_) => self.local.add(Ctr::OffloadErr, 1),
                }
                if n >= batch {
                    break;
                }
            }
            if n > 0 || empty {
                Self::flush(
                    &mut self.pkts,
                    &mut self.verdicts,
                    &mut self.to_net,
                    &mut self.sender,
                    &mut self.extras,
                    &mut self.local,
                    sh,
                    tun,
                    n,
                );
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
                self.local.add(Ctr::Waits, 1);
                self.local.flush(&sh.stats);
                sh.wait(tun);
                if sh.fault.is_some() && Fault::strike(&sh.fault, sh.started) {
                    return;
                }
            }
        }
        self.local.flush(&sh.stats);
        record_cpu(&sh.stats, slot, &mut cpu_at, Instant::now(), true);
    }

    /// Runs the codec over `pkts[..n]` and sends what it says; with n = 0 it
    /// only ticks and drains `poll` when due.
    #[allow(clippy::too_many_arguments)]
    fn flush<C: Codec>(
        pkts: &mut [Vec<u8>],
        verdicts: &mut Vec<Verdict>,
        to_net: &mut Vec<(usize, SocketAddr)>,
        sender: &mut Sender,
        extras: &mut Extras,
        local: &mut Local,
        sh: &Shared<C>,
        tun: BorrowedFd<'_>,
        n: usize,
    ) {
        let now = Instant::now();
        if n == 0 && now < sh_due(sh) {
            local.flush(&sh.stats);
            return;
        }
        if n > 0 {
            local.add(Ctr::TunBatches, 1);
        }
        verdicts.clear();
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
                    for p in pkts[from..n].iter_mut() {
                        verdicts.push(slot.codec.handle_tun(p, now));
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
                Verdict::ToTun => write_single(tun, &pkts[i], local),
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
