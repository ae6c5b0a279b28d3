//! Super-packets a codec that takes them whole answered `Verdict::Split` for
//! (a device model would drop part of one): cut into wire packets, each
//! handed to the codec in its place behind an all-zero virtio header, and
//! their verdicts carried out in the batch's order.

use super::offload::vnet_header::VirtioNetHdr;
use super::offload::{Segmenter, VNET_HDR_LEN};
use super::stats::{Ctr, Local};
use super::tun_write::write_framed;
use crate::codec::{Codec, DropReason, Verdict};
use std::os::fd::BorrowedFd;
use std::time::Instant;

/// Spare piece buffers kept between batches.
const SPARE: usize = 64;

#[derive(Default)]
pub(super) struct Splits {
    /// Per piece: the batch index of its super-packet, its verdict, and the
    /// piece itself (virtio header first).
    pieces: Vec<(usize, Verdict, Vec<u8>)>,
    spare: Vec<Vec<u8>>,
    cut: Vec<u8>,
}

impl Splits {
    /// Cuts `framed` (batch index `i`) into wire packets and offers each to
    /// the codec. One that cannot be cut is dropped as an offload error.
    pub(super) fn offer<C: Codec>(
        &mut self,
        codec: &mut C,
        i: usize,
        framed: &[u8],
        now: Instant,
        local: &mut Local,
    ) {
        let segmenter =
            VirtioNetHdr::parse(framed).and_then(|h| Segmenter::new(&h, &framed[VNET_HDR_LEN..]));
        let Ok(s) = segmenter else {
            local.add(Ctr::OffloadErr, 1);
            return;
        };
        local.add(Ctr::SegmentedSupers, 1);
        local.add(Ctr::SegmentedPackets, s.count() as u64);
        for k in 0..s.count() {
            s.segment_into(k, &mut self.cut);
            let mut piece = self.spare.pop().unwrap_or_default();
            piece.clear();
            piece.extend_from_slice(&[0; VNET_HDR_LEN]);
            piece.extend_from_slice(&self.cut);
            let v = match codec.handle_tun(&mut piece, now) {
                // A wire packet is never cut again.
                Verdict::Split => Verdict::Drop(DropReason::Unsupported),
                v => v,
            };
            self.pieces.push((i, v, piece));
        }
    }

    /// Carries out the verdicts of the pieces of batch index `i` (the first
    /// not yet settled): writes, drops, or lets go those the codec kept.
    pub(super) fn settle(&mut self, i: usize, tun: BorrowedFd<'_>, local: &mut Local) {
        let k = self.pieces.iter().take_while(|p| p.0 == i).count();
        for (_, v, piece) in self.pieces.drain(..k) {
            match v {
                Verdict::ToTun => write_framed(tun, &piece, local),
                Verdict::Drop(r) => local.dropped(r),
                // No socket: a codec that takes super-packets whole runs on
                // the TUN alone.
                Verdict::ToNetwork(_) | Verdict::Split => local.dropped(DropReason::Unsupported),
                Verdict::Queued | Verdict::Consumed => {}
            }
            if piece.capacity() > 0 && self.spare.len() < SPARE {
                self.spare.push(piece);
            }
        }
    }
}
