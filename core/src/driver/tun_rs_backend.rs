//! A second TUN backend, the tun-rs crate, chosen at driver start with
//! `TUNBENCH_TUN=tun-rs` so the two can be compared in one run
//! (bench/before-after.sh). The default stays tunbench's own (`tun`, `offload`).
//! Only the TUN reads and the writes of what comes from the network go through
//! tun-rs; codec verdicts back into the TUN and the extras are written as on
//! our path, on the same descriptor. A TAP (a link's relay) or a driver with
//! offloads off keeps our path: tun-rs splits and coalesces IP packets only, and
//! without IFF_VNET_HDR its framing would differ from the rest of the driver's.
//! `StatsSnapshot::tun_backend` says which backend a driver runs on.

use super::config::DriverError;
use super::shared::PACKET_BUF;
use super::stats::{Ctr, Local};
use super::tun::{Offloads, TunError, ioctl_error, must_exist, set_vnet_hdr_size};
use serde::{Deserialize, Serialize};
use std::io;
use std::os::fd::AsFd;
use tun_rs::{DeviceBuilder, GROTable, IDEAL_BATCH_SIZE, SyncDevice, VIRTIO_NET_HDR_LEN};

/// Which code moves packets between a TUN queue and the driver's buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum TunBackend {
    /// `tun` and `offload`: tunbench's own (the default).
    #[default]
    #[serde(rename = "tunbench")]
    Tunbench,
    /// The tun-rs crate's `recv_multiple` / `send_multiple`.
    #[serde(rename = "tun-rs")]
    TunRs,
}

impl TunBackend {
    /// The environment variable that chooses the backend.
    pub const ENV: &'static str = "TUNBENCH_TUN";

    pub fn name(self) -> &'static str {
        match self {
            TunBackend::Tunbench => "tunbench",
            TunBackend::TunRs => "tun-rs",
        }
    }

    /// `TUNBENCH_TUN`: unset or empty or `tunbench` for ours, `tun-rs` for
    /// tun-rs; anything else is refused, naming the known values.
    pub fn from_env() -> Result<TunBackend, DriverError> {
        match std::env::var(Self::ENV) {
            Err(std::env::VarError::NotPresent) => Ok(TunBackend::Tunbench),
            Ok(v) if v.is_empty() || v == "tunbench" => Ok(TunBackend::Tunbench),
            Ok(v) if v == "tun-rs" => Ok(TunBackend::TunRs),
            Ok(v) => Err(DriverError::Config(format!(
                "{}={v:?}: known backends are tunbench (the default) and tun-rs",
                Self::ENV
            ))),
            Err(e) => Err(DriverError::Config(format!("{}: {e}", Self::ENV))),
        }
    }
}

/// Attaches `queues` queues (at least one) of the existing TUN `name` in the
/// calling thread's namespace through tun-rs, nonblocking, with 10-byte virtio
/// headers and offloads on.
///
/// `DeviceBuilder::build_sync` opens /dev/net/tun and TUNSETIFFs the lab's
/// persistent device by name (the kernel attaches a queue to an existing
/// device when the flags match), then sets the same TSO/checksum (and USO where
/// the kernel has it) offloads as `tun::Tun::attach`; `try_clone` attaches the
/// further queues. `SyncDevice::from_fd` is no way in: it refuses a descriptor
/// with IFF_VNET_HDR, so tun-rs opens its own.
pub(super) fn attach(name: &str, queues: usize) -> Result<(Vec<SyncDevice>, Offloads), TunError> {
    must_exist(name)?;
    let err = |what| ioctl_error(name, what);
    // inherit_enable_state: the lab brought the device up; tun-rs is not to
    // touch its link state (nor, without address-management, its addresses).
    let first = DeviceBuilder::new()
        .name(name)
        .multi_queue(true)
        .offload(true)
        .inherit_enable_state()
        .build_sync()
        .map_err(err("attaching with tun-rs (DeviceBuilder::build_sync)"))?;
    let mut devs = Vec::with_capacity(queues.max(1));
    devs.push(first);
    while devs.len() < queues.max(1) {
        let q = devs[0]
            .try_clone()
            .map_err(err("attaching a further queue with tun-rs (try_clone)"))?;
        devs.push(q);
    }
    for d in &devs {
        // The header size is the device's and outlives a process: a previous
        // user may have changed it; tun-rs assumes 10.
        set_vnet_hdr_size(d.as_fd()).map_err(err("setting the virtio header size"))?;
        d.set_nonblocking(true)
            .map_err(err("making the queue nonblocking"))?;
    }
    let offloads = Offloads {
        csum: devs[0].tcp_gso(),
        tso: devs[0].tcp_gso(),
        uso: devs[0].udp_gso(),
    };
    Ok((devs, offloads))
}

/// What one `recv_multiple` gave.
pub(super) enum Read {
    /// This many packets are staged (more than one: a super-packet cut up).
    Packets(usize),
    /// The queue is empty.
    Empty,
    /// The read itself failed.
    Failed,
    /// tun-rs refused what it read (a malformed header or super-packet).
    Refused,
}

/// The TUN -> network side: reads through `recv_multiple` (one read, a
/// super-packet cut by tun-rs) into staged buffers that are then swapped into
/// the driver's packet buffers (no copy), in place of `offload::split_tun_read`.
/// The queue is nonblocking and waited on in the driver's own poll(2), no
/// async runtime.
pub(super) struct Reader {
    read: Vec<u8>,
    bufs: Vec<Vec<u8>>,
    sizes: Vec<usize>,
    /// Every staged buffer is this long before a read (tun-rs writes into
    /// the slice, it does not grow a Vec).
    buf_len: usize,
    /// Buffers swapped out since the last read, to be made `buf_len` again.
    taken: usize,
}

impl Reader {
    pub(super) fn new(dev: &SyncDevice) -> Reader {
        let mtu = dev.mtu().map(usize::from).unwrap_or(0);
        let buf_len = PACKET_BUF.max(mtu);
        Reader {
            read: vec![0; VIRTIO_NET_HDR_LEN + 65536],
            bufs: (0..IDEAL_BATCH_SIZE).map(|_| vec![0; buf_len]).collect(),
            sizes: vec![0; IDEAL_BATCH_SIZE],
            buf_len,
            taken: 0,
        }
    }

    pub(super) fn read(&mut self, dev: &SyncDevice) -> Read {
        for b in &mut self.bufs[..self.taken] {
            b.resize(self.buf_len, 0);
        }
        self.taken = 0;
        loop {
            match dev.recv_multiple(&mut self.read, &mut self.bufs, &mut self.sizes, 0) {
                Ok(n) => return Read::Packets(n),
                Err(e) => match e.kind() {
                    io::ErrorKind::WouldBlock => return Read::Empty,
                    io::ErrorKind::Interrupted => continue,
                    _ if e.raw_os_error().is_some() => return Read::Failed,
                    _ => return Read::Refused,
                },
            }
        }
    }

    /// Staged packet `i` into `into` (the two buffers change places).
    pub(super) fn take(&mut self, i: usize, into: &mut Vec<u8>) {
        std::mem::swap(into, &mut self.bufs[i]);
        into.truncate(self.sizes[i]);
        self.taken = self.taken.max(i + 1);
    }
}

/// The network -> TUN side: `send_multiple` with tun-rs's GRO table, in
/// place of `offload::Coalescer`. It needs each packet behind 10 bytes of
/// headroom in a buffer with room for a whole super-packet (it coalesces by
/// appending payloads to the head), so packets are copied into such buffers
/// (ours gathers them with writev, nothing copied). It writes each packet it
/// did not coalesce with a zero virtio header, so an inner checksum a kernel
/// peer left partial is not completed (`offload::partial_checksum_for_tun`
/// does that on our path; tunbench's own peers always send complete checksums).
pub(super) struct Writer {
    bufs: Vec<Vec<u8>>,
    gro: GROTable,
}

impl Writer {
    pub(super) fn new() -> Writer {
        Writer {
            bufs: Vec::new(),
            gro: GROTable::new(),
        }
    }

    /// Writes `pkts[i]` for each i in `to_tun`, coalesced where tun-rs can.
    pub(super) fn write(
        &mut self,
        dev: &SyncDevice,
        pkts: &[Vec<u8>],
        to_tun: &[usize],
        local: &mut Local,
    ) {
        let k = to_tun.len();
        if k == 0 {
            return;
        }
        while self.bufs.len() < k {
            // tun-rs coalesces into a head only within its capacity (it never
            // grows one): room for a 64 KiB super-packet and twice the
            // headroom, as its coalescing checks. With less it writes every
            // packet alone.
            self.bufs
                .push(Vec::with_capacity(2 * VIRTIO_NET_HDR_LEN + 65536));
        }
        let mut bytes = 0;
        for (b, &i) in self.bufs.iter_mut().zip(to_tun) {
            b.clear();
            b.resize(VIRTIO_NET_HDR_LEN, 0);
            b.extend_from_slice(&pkts[i]);
            bytes += pkts[i].len();
        }
        let bufs = &mut self.bufs[..k];
        match dev.send_multiple(&mut self.gro, bufs, VIRTIO_NET_HDR_LEN) {
            Ok(_) => {
                local.add(Ctr::TunTxPackets, k as u64);
                local.add(Ctr::TunTxBytes, bytes as u64);
                // A head tun-rs coalesced into carries a GSO type (byte 1 of
                // its header); the packets it took in left theirs zero.
                let (mut supers, mut joined) = (0, 0);
                for b in bufs.iter() {
                    if b[1] != 0 {
                        let gso_size = u16::from_le_bytes([b[4], b[5]]).max(1) as usize;
                        let hdr_len = u16::from_le_bytes([b[2], b[3]]) as usize;
                        supers += 1;
                        joined += (b.len() - VIRTIO_NET_HDR_LEN)
                            .saturating_sub(hdr_len)
                            .div_ceil(gso_size);
                    }
                }
                local.add(Ctr::CoalescedSupers, supers);
                local.add(Ctr::CoalescedPackets, joined as u64);
            }
            // tun-rs goes on after a failed write and returns the last error:
            // which packets were lost is not known, so one error is counted.
            Err(_) => local.add(Ctr::TunWriteErr, 1),
        }
    }
}
