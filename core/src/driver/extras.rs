//! The packets a codec emits on its own (`poll()`: queued packets released,
//! handshakes, keepalives), collected under the codec's lock and sent after
//! it, by both directions alike; and the spare buffers a holding codec's
//! batch slots are refilled from.

use super::sender::Sender;
use super::shared::Shared;
use super::stats::Local;
use super::tun_write::{write_framed, write_single};
use crate::codec::{Codec, Drain, Verdict};
use std::net::SocketAddr;
use std::os::fd::BorrowedFd;
use std::time::Instant;

/// Buffers `Extras` keeps for reuse at most.
const SPARE_BUFFERS: usize = 256;

/// Outputs of `poll()` and their sending, shared by both directions.
pub(super) struct Extras {
    bufs: Vec<Vec<u8>>,
    to_net: Vec<(usize, SocketAddr)>,
    to_tun: Vec<usize>,
    /// Sent buffers kept for reuse: a codec that holds packets (`Queued`)
    /// takes the driver's buffers and gives them back through `poll`, so
    /// the batch slots it emptied are refilled from here, not allocated.
    pub(super) spare: Vec<Vec<u8>>,
}

impl Extras {
    pub(super) fn new() -> Extras {
        Extras {
            bufs: Vec::new(),
            to_net: Vec::new(),
            to_tun: Vec::new(),
            spare: Vec::new(),
        }
    }

    /// Drains the codec's own packets for the thread `drain`; the caller
    /// holds the lock.
    pub(super) fn collect<C: Codec>(
        &mut self,
        codec: &mut C,
        now: Instant,
        drain: Drain,
        local: &mut Local,
    ) {
        while let Some((v, buf)) = codec.poll_for(now, drain) {
            match v {
                Verdict::ToNetwork(a) => {
                    self.to_net.push((self.bufs.len(), a));
                    self.bufs.push(buf);
                }
                Verdict::ToTun => {
                    self.to_tun.push(self.bufs.len());
                    self.bufs.push(buf);
                }
                Verdict::Drop(r) => local.dropped(r),
                // Split answers an offered super-packet, never a poll.
                Verdict::Split => local.dropped(crate::codec::DropReason::Unsupported),
                Verdict::Queued | Verdict::Consumed => {}
            }
        }
    }

    pub(super) fn flush<C: Codec>(
        &mut self,
        sh: &Shared<C>,
        sender: &mut Sender,
        tun: BorrowedFd<'_>,
        local: &mut Local,
    ) {
        if self.bufs.is_empty() {
            return;
        }
        for &i in &self.to_tun {
            if sh.whole {
                write_framed(tun, &self.bufs[i], local);
            } else {
                write_single(tun, &self.bufs[i], local);
            }
        }
        sender.send(sh, &self.bufs, &self.to_net, local);
        self.to_net.clear();
        self.to_tun.clear();
        for mut b in self.bufs.drain(..) {
            if self.spare.len() < SPARE_BUFFERS {
                b.clear();
                self.spare.push(b);
            }
        }
    }
}
