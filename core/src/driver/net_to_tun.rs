//! The network -> TUN thread: receives a batch from the tunnel socket, runs
//! the codec over it under one lock, and writes what goes into the TUN,
//! consecutive TCP segments of one flow as one super-packet (one writev,
//! payloads not copied).

use super::config::Fault;
use super::extras::Extras;
use super::offload::{Coalescer, Group, VNET_HDR_LEN};
use super::open::TunQueue;
use super::receiver::Receiver;
use super::sender::Sender;
use super::shared::{IDLE_YIELDS, PACKET_BUF, Shared, sh_due};
use super::stats::{Ctr, Local, record_cpu};
use super::tun;
use super::tun_rs_backend;
use super::tun_write::write_from_network;
use crate::codec::{Codec, DropReason, Verdict};
use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Instant;

pub(super) struct NetToTun {
    pkts: Vec<Vec<u8>>,
    peers: Vec<Option<SocketAddr>>,
    verdicts: Vec<Option<Verdict>>,
    to_tun: Vec<usize>,
    to_net: Vec<(usize, SocketAddr)>,
    receiver: Receiver,
    sender: Sender,
    coalescer: Coalescer,
    iov: Vec<libc::iovec>,
    extras: Extras,
    local: Local,
    /// On a tun-rs queue: its GRO writes, in place of the coalescer's.
    tun_rs: Option<tun_rs_backend::Writer>,
}

impl NetToTun {
    pub(super) fn new<C: Codec>(sh: &Shared<C>, q: &TunQueue) -> NetToTun {
        let receiver = Receiver::new(sh);
        let n = sh.batch.max(receiver.messages);
        NetToTun {
            pkts: (0..n).map(|_| Vec::with_capacity(PACKET_BUF)).collect(),
            peers: Vec::with_capacity(n),
            verdicts: Vec::with_capacity(n),
            to_tun: Vec::with_capacity(n),
            to_net: Vec::with_capacity(n),
            receiver,
            sender: Sender::new(sh),
            coalescer: Coalescer::new(),
            iov: Vec::with_capacity(2 + crate::driver::offload::MAX_COALESCED_SEGMENTS),
            extras: Extras::new(),
            local: Local::new(),
            tun_rs: q.tun_rs().map(|_| tun_rs_backend::Writer::new()),
        }
    }

    pub(super) fn run<C: Codec>(mut self, sh: &Shared<C>, q: &TunQueue, slot: usize) {
        let mut cpu_at = Instant::now();
        let sock = sh.sock.as_ref().expect("only run with a socket").as_fd();
        let mut idle = 0;
        while !sh.stopping() {
            let n = self
                .receiver
                .recv(sh, &mut self.pkts, &mut self.peers, &mut self.local);
            let now = Instant::now();
            if n > 0 || now >= sh_due(sh) {
                self.batch(sh, q, n, now);
            }
            record_cpu(&sh.stats, slot, &mut cpu_at, now, false);
            if n > 0 {
                idle = 0;
            } else if idle < IDLE_YIELDS {
                idle += 1;
                std::thread::yield_now();
            } else {
                self.local.add(Ctr::Waits, 1);
                self.local.flush(&sh.stats);
                sh.wait(sock);
                if sh.fault.is_some() && Fault::strike(&sh.fault, sh.started) {
                    return;
                }
            }
        }
        self.local.flush(&sh.stats);
        record_cpu(&sh.stats, slot, &mut cpu_at, Instant::now(), true);
    }

    /// Runs the codec over `pkts[..n]`, then writes and sends what it says.
    fn batch<C: Codec>(&mut self, sh: &Shared<C>, q: &TunQueue, n: usize, now: Instant) {
        let tun = q.fd();
        if n > 0 {
            self.local.add(Ctr::NetBatches, 1);
        }
        self.verdicts.clear();
        {
            let mut guard = sh.lock();
            let slot = &mut *guard;
            let (pkts, peers, verdicts, extras, local) = (
                &mut self.pkts,
                &self.peers,
                &mut self.verdicts,
                &mut self.extras,
                &mut self.local,
            );
            // As in TunToNet::flush: a panic drops its own packet only.
            loop {
                let from = verdicts.len();
                let r = catch_unwind(AssertUnwindSafe(|| {
                    for (p, &peer) in pkts[from..n].iter_mut().zip(peers[from..].iter()) {
                        // No peer: a receive error, counted already.
                        verdicts.push(peer.map(|peer| slot.codec.handle_network(peer, p, now)));
                    }
                }));
                if r.is_ok() {
                    break;
                }
                local.add(Ctr::CodecPanic, 1);
                verdicts.push(Some(Verdict::Drop(DropReason::Panicked)));
            }
            let r = catch_unwind(AssertUnwindSafe(|| {
                sh.tick_if_due(slot, now);
                extras.collect(&mut slot.codec, now, crate::codec::Drain::IntoTun, local);
                sh.note_deadline(&slot.codec);
            }));
            if r.is_err() {
                local.add(Ctr::CodecPanic, 1);
            }
        }
        self.to_tun.clear();
        self.to_net.clear();
        for (i, v) in self.verdicts.iter().enumerate() {
            match *v {
                Some(Verdict::ToTun) => self.to_tun.push(i),
                Some(Verdict::ToNetwork(a)) => self.to_net.push((i, a)),
                Some(Verdict::Drop(r)) => self.local.dropped(r),
                // Split answers a super-packet from the TUN, never a datagram.
                Some(Verdict::Split) => self.local.dropped(DropReason::Unsupported),
                Some(Verdict::Queued) | Some(Verdict::Consumed) | None => {}
            }
        }
        if let (Some(dev), Some(w)) = (q.tun_rs(), self.tun_rs.as_mut()) {
            w.write(dev, &self.pkts[..n], &self.to_tun, &mut self.local);
        } else if sh.offloads.tso && self.to_tun.len() > 1 {
            self.coalescer.max_len = sh.segment_into_tun;
            self.coalescer
                .plan(&self.pkts[..n], self.to_tun.iter().copied());
            for gi in 0..self.coalescer.groups().len() {
                let g = self.coalescer.groups()[gi];
                self.write_group(tun, &g, sh.segment_into_tun);
            }
        } else {
            for &i in &self.to_tun {
                write_from_network(tun, &mut self.pkts[i], sh.segment_into_tun, &mut self.local);
            }
        }
        self.sender
            .send(sh, &self.pkts, &self.to_net, &mut self.local);
        self.extras
            .flush(sh, &mut self.sender, tun, &mut self.local);
        self.local.flush(&sh.stats);
    }

    /// One TUN write: a packet alone, or a coalesced group gathered with writev
    /// (the head, then each member's payload; nothing is copied).
    fn write_group(&mut self, tun: BorrowedFd<'_>, g: &Group, cut: Option<usize>) {
        if g.segments() == 1 {
            write_from_network(tun, &mut self.pkts[g.head()], cut, &mut self.local);
            return;
        }
        let hdr = Coalescer::finish_head(g, &mut self.pkts[g.head()]).to_bytes();
        self.iov.clear();
        self.iov.push(libc::iovec {
            iov_base: hdr.as_ptr() as *mut libc::c_void,
            iov_len: VNET_HDR_LEN,
        });
        let head = &self.pkts[g.head()];
        self.iov.push(libc::iovec {
            iov_base: head.as_ptr() as *mut libc::c_void,
            iov_len: head.len(),
        });
        let off = g.payload_offset();
        let mut bytes = head.len();
        for m in self.coalescer.members(g) {
            let p = &self.pkts[m];
            self.iov.push(libc::iovec {
                // SAFETY: members are candidates, longer than their headers.
                iov_base: unsafe { p.as_ptr().add(off) } as *mut libc::c_void,
                iov_len: p.len() - off,
            });
            bytes += p.len();
        }
        match tun::write_iov(tun, &self.iov) {
            Ok(_) => {
                self.local.add(Ctr::TunTxPackets, g.segments() as u64);
                self.local.add(Ctr::TunTxBytes, bytes as u64);
                self.local.add(Ctr::CoalescedSupers, 1);
                self.local.add(Ctr::CoalescedPackets, g.segments() as u64);
            }
            Err(_) => self.local.add(Ctr::TunWriteErr, g.segments() as u64),
        }
    }
}
