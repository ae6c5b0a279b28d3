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

/// Keeps a piece's buffer for the next one, up to `SPARE` of them.
fn recycle(spare: &mut Vec<Vec<u8>>, piece: Vec<u8>) {
    if piece.capacity() > 0 && spare.len() < SPARE {
        spare.push(piece);
    }
}

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

    /// Forgets pieces left from a batch cut short by a panic.
    pub(super) fn clear(&mut self) {
        for (_, _, piece) in self.pieces.drain(..) {
            recycle(&mut self.spare, piece);
        }
    }

    /// Carries out the verdicts of the pieces of batch index `i` (the first
    /// not yet settled): writes, drops, or lets go those the codec kept.
    pub(super) fn settle(&mut self, i: usize, tun: BorrowedFd<'_>, local: &mut Local) {
        // Pieces of one before it whose offer a panic cut short go unwritten.
        let stale = self.pieces.iter().take_while(|p| p.0 < i).count();
        for (_, _, piece) in self.pieces.drain(..stale) {
            recycle(&mut self.spare, piece);
        }
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
            recycle(&mut self.spare, piece);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::profile::{Ceiling, DeviceModel};
    use crate::codec::slowpath::SlowPath;
    use crate::driver::offload::test_packets::{Tcp, ip_ok, l4_ok, pattern, tso_read};
    use std::os::fd::AsFd;
    use std::time::Duration;

    #[test]
    fn a_split_super_packet_is_offered_as_its_wire_packets_in_order() {
        // 8 Mbit/s of payload for everything: 1000 bytes a millisecond;
        // queues of 2, or up to 20 ms of waiting.
        let m = DeviceModel {
            profile: "t".into(),
            mode: "m".into(),
            description: None,
            lan: vec!["198.18.253.1/32".parse().unwrap()],
            ceilings: vec![Ceiling {
                direction: None,
                family: None,
                protocol: None,
                aggregate_bps: Some(8_000_000),
                flow_bps: None,
            }],
            queue_packets: 2,
            bypass: vec![],
        };
        let t0 = Instant::now();
        let mut codec = SlowPath::with_model(&m, t0);
        let read = |frames: usize| {
            let payload = pattern(frames * 1000);
            tso_read(
                &Tcp {
                    payload: &payload,
                    ..Tcp::default()
                },
                1000,
            )
        };
        // 19 frames keep the class busy to 19 ms (they leave whole at 18, as
        // the last starts); 4 more would start at 19 to 22 ms, the last two
        // past the 20 ms the queue allows.
        assert_eq!(codec.handle_tun(&mut read(19), t0), Verdict::Queued);
        let four = read(4);
        assert_eq!(codec.handle_tun(&mut four.clone(), t0), Verdict::Split);
        let mut local = Local::new();
        let mut splits = Splits::default();
        splits.offer(&mut codec, 7, &four, t0, &mut local);
        let full = Verdict::Drop(DropReason::QueueFull);
        let verdicts: Vec<Verdict> = splits.pieces.iter().map(|p| p.1).collect();
        assert_eq!(verdicts, [Verdict::Queued, Verdict::Queued, full, full]);
        assert_eq!(local.get(Ctr::SegmentedPackets), 4);
        for (i, _, piece) in &splits.pieces[2..] {
            assert_eq!(*i, 7);
            assert_eq!(piece[..VNET_HDR_LEN], [0; VNET_HDR_LEN]);
            let ip = &piece[VNET_HDR_LEN..];
            assert_eq!(ip.len(), 20 + 32 + 1000);
            assert!(ip_ok(ip) && l4_ok(ip), "a wire packet with its checksums");
        }
        let null = std::fs::File::create("/dev/null").unwrap();
        splits.settle(7, null.as_fd(), &mut local);
        assert!(splits.pieces.is_empty());
        assert_eq!(local.drops_of(DropReason::QueueFull), 2);
        // The 19 come out at 18 ms, the queued two at 19 and 20, in order.
        let polled: Vec<usize> = (0..=21)
            .flat_map(|ms| {
                std::iter::from_fn(|| codec.poll(t0 + Duration::from_millis(ms)))
                    .map(move |_| ms as usize)
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(polled, [18, 19, 20]);
    }
}
