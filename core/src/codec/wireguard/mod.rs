//! WireGuard as a codec for the shared driver: boringtun's protocol core
//! (`noise::Tunn`, one per peer) plus what boringtun's own device loop adds
//! around it: cryptokey routing (allowed IPs, longest prefix), finding the peer
//! of an incoming datagram (receiver index, or the initiator's static key for a
//! handshake initiation), endpoint roaming, a rate limiter shared by all peers
//! and reset every second, and timers on the driver's tick.
//!
//! Buffers: boringtun writes into a destination buffer; the codec keeps one
//! scratch buffer and swaps it with the driver's packet, so a packet costs no
//! allocation and no extra copy beyond boringtun's own.

use crate::codec::{Codec, DropReason, Verdict, is_link_scope, outside_allowed};
use boringtun::noise::errors::WireGuardError;
use boringtun::noise::handshake::parse_handshake_anon;
use boringtun::noise::rate_limiter::RateLimiter;
use boringtun::noise::{Packet, Tunn, TunnResult};
use boringtun::x25519::{PublicKey, StaticSecret};
use ipnetwork::IpNetwork;
use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bytes WireGuard adds inside the UDP payload: type, receiver, counter (16)
/// and the Poly1305 tag (16).
pub const DATA_OVERHEAD: usize = 32;
/// A handshake initiation, the largest message boringtun writes on its own.
const HANDSHAKE_INIT_LEN: usize = 148;
/// Handshakes per second before the limiter asks for cookies (boringtun's
/// device uses the same figure).
pub const HANDSHAKE_RATE_LIMIT: u64 = 100;
/// How often a note about the same thing is logged again.
const NOTE_EVERY: Duration = Duration::from_secs(10);

/// One peer as configured.
#[derive(Clone)]
pub struct PeerConfig {
    /// A name for logs and status (the lab node).
    pub name: String,
    pub public: PublicKey,
    pub preshared: Option<[u8; 32]>,
    /// Where to send to before the peer has been heard from.
    pub endpoint: Option<SocketAddr>,
    /// Inner addresses this peer may use and is sent to.
    pub allowed_ips: Vec<IpNetwork>,
    /// Persistent keepalive interval in seconds.
    pub keepalive: Option<u16>,
}

pub struct WireGuardConfig {
    pub private: StaticSecret,
    pub peers: Vec<PeerConfig>,
}

/// A peer's state for `tunbench status` (what `wg show` prints).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct PeerStatus {
    pub name: String,
    pub public_key: String,
    pub endpoint: Option<SocketAddr>,
    pub allowed_ips: Vec<IpNetwork>,
    /// Seconds since the latest handshake; None: never.
    pub latest_handshake_secs: Option<f64>,
    /// Inner bytes sent to and received from this peer.
    pub tx_bytes: u64,
    pub rx_bytes: u64,
    pub handshakes: u64,
}

struct Peer {
    config: PeerConfig,
    tunn: Tunn,
    endpoint: Option<SocketAddr>,
    handshakes: u64,
    /// Time since the latest handshake at the last tick.
    last_since: Option<Duration>,
}

pub struct WireGuard {
    own_private: StaticSecret,
    own_public: PublicKey,
    peers: Vec<Peer>,
    /// Allowed IPs of all peers, longest prefix first: (prefix, peer).
    routes: Vec<(IpNetwork, usize)>,
    limiter: Arc<RateLimiter>,
    next_reset: Option<Instant>,
    scratch: Vec<u8>,
    /// Where packets boringtun queued during a handshake are sealed: up to
    /// 64 KiB, so kept apart from `scratch`, which is swapped into the
    /// driver's batch and would leave a 64 KiB buffer there at every rekey.
    queued_scratch: Vec<u8>,
    /// Packets to send on the codec's own account (handshakes, keepalives,
    /// packets queued during a handshake), handed out through `poll`.
    out: VecDeque<(Verdict, Vec<u8>)>,
    /// What the datapath should log; taken by `take_notes`.
    notes: Vec<String>,
    last_note: Vec<(String, Instant)>,
}

impl WireGuard {
    pub fn new(config: WireGuardConfig) -> WireGuard {
        let own_public = PublicKey::from(&config.private);
        let limiter = Arc::new(RateLimiter::new(&own_public, HANDSHAKE_RATE_LIMIT));
        let mut routes = Vec::new();
        let peers = config
            .peers
            .into_iter()
            .enumerate()
            .map(|(i, p)| {
                routes.extend(p.allowed_ips.iter().map(|n| (*n, i)));
                Peer {
                    // The index names the peer in the receiver index of every
                    // message sent to us (boringtun shifts it left by 8).
                    tunn: Tunn::new(
                        config.private.clone(),
                        p.public,
                        p.preshared,
                        p.keepalive,
                        i as u32,
                        Some(limiter.clone()),
                    ),
                    endpoint: p.endpoint,
                    config: p,
                    handshakes: 0,
                    last_since: None,
                }
            })
            .collect();
        routes.sort_by_key(|(n, _)| std::cmp::Reverse(n.prefix()));
        WireGuard {
            own_private: config.private,
            own_public,
            peers,
            routes,
            limiter,
            next_reset: None,
            scratch: vec![0; 2048],
            queued_scratch: Vec::new(),
            out: VecDeque::new(),
            notes: Vec::new(),
            last_note: Vec::new(),
        }
    }

    pub fn public_key(&self) -> PublicKey {
        self.own_public
    }

    /// The peer whose allowed IPs hold `addr` (longest prefix).
    fn route(&self, addr: IpAddr) -> Option<usize> {
        self.routes
            .iter()
            .find(|(n, _)| n.contains(addr))
            .map(|(_, i)| *i)
    }

    /// Logs `text` under `key` at most once per NOTE_EVERY.
    fn note(&mut self, key: &str, now: Instant, text: impl FnOnce() -> String) {
        match self.last_note.iter_mut().find(|(k, _)| k == key) {
            Some((_, t)) if now.saturating_duration_since(*t) < NOTE_EVERY => return,
            Some((_, t)) => *t = now,
            None => self.last_note.push((key.to_string(), now)),
        }
        self.notes.push(text());
    }

    /// Log lines since the last call (the datapath prints them).
    pub fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }

    pub fn status(&self) -> Vec<PeerStatus> {
        self.peers
            .iter()
            .map(|p| {
                let (since, tx, rx, _, _) = p.tunn.stats();
                PeerStatus {
                    name: p.config.name.clone(),
                    public_key: crate::vocab::keys::to_base64(p.config.public.as_bytes()),
                    endpoint: p.endpoint,
                    allowed_ips: p.config.allowed_ips.clone(),
                    latest_handshake_secs: since.map(|d| d.as_secs_f64()),
                    tx_bytes: tx as u64,
                    rx_bytes: rx as u64,
                    handshakes: p.handshakes,
                }
            })
            .collect()
    }

    fn ensure_scratch(&mut self, len: usize) {
        let need = (len + DATA_OVERHEAD).max(HANDSHAKE_INIT_LEN);
        if self.scratch.len() < need {
            self.scratch.resize(need, 0);
        }
    }

    /// Which peer an incoming datagram is for.
    fn peer_of(
        &mut self,
        from: SocketAddr,
        datagram: &[u8],
        now: Instant,
    ) -> Result<usize, Verdict> {
        let packet = Tunn::parse_incoming_packet(datagram).map_err(|_| {
            Verdict::Drop(if datagram.len() < 32 {
                DropReason::Truncated
            } else {
                DropReason::Malformed
            })
        })?;
        let index = match packet {
            Packet::HandshakeInit(ref init) => {
                if self.peers.len() == 1 {
                    return Ok(0);
                }
                // Several peers: the initiator's static key says which. The
                // MAC and the rate limit come first, before the DH it costs.
                let mut cookie = [0u8; 64];
                match self
                    .limiter
                    .verify_packet(Some(from.ip()), datagram, &mut cookie)
                {
                    Ok(_) => {}
                    Err(TunnResult::WriteToNetwork(c)) => {
                        // Under load: a cookie reply instead of the DH.
                        self.send_later(from, c);
                        return Err(Verdict::Consumed);
                    }
                    Err(TunnResult::Err(e)) => {
                        return Err(Verdict::Drop(self.reason(e, from, now)));
                    }
                    Err(_) => return Err(Verdict::Drop(DropReason::Malformed)),
                }
                let half = parse_handshake_anon(&self.own_private, &self.own_public, init)
                    .map_err(|e| Verdict::Drop(self.reason(e, from, now)))?;
                match self
                    .peers
                    .iter()
                    .position(|p| p.config.public.as_bytes() == &half.peer_static_public)
                {
                    Some(i) => return Ok(i),
                    None => {
                        let key = crate::vocab::keys::to_base64(&half.peer_static_public);
                        self.note("unknown-key", now, || {
                            format!("handshake initiation from {from} with public key {key}, which is no peer of this endpoint: dropped")
                        });
                        return Err(Verdict::Drop(DropReason::UnknownPeer));
                    }
                }
            }
            Packet::HandshakeResponse(ref r) => r.receiver_idx,
            Packet::PacketCookieReply(ref r) => r.receiver_idx,
            Packet::PacketData(ref d) => d.receiver_idx,
        };
        let i = (index >> 8) as usize;
        if i < self.peers.len() {
            Ok(i)
        } else {
            Err(Verdict::Drop(DropReason::UnknownPeer))
        }
    }

    /// The drop reason for a boringtun error, with a log line where a user
    /// needs one (a wrong key shows only as failed handshakes).
    fn reason(&mut self, e: WireGuardError, from: SocketAddr, now: Instant) -> DropReason {
        use WireGuardError as E;
        match e {
            E::InvalidMac => {
                let own = crate::vocab::keys::to_base64(self.own_public.as_bytes());
                self.note("mac", now, || format!("a handshake from {from} failed its MAC check: the sender does not have this endpoint's public key ({own}); dropped"));
                DropReason::Unauthentic
            }
            E::InvalidAeadTag | E::InvalidTai64nTimestamp => {
                self.note("aead", now, || {
                    format!(
                        "a packet from {from} failed decryption (wrong key, or altered): dropped"
                    )
                });
                DropReason::Unauthentic
            }
            E::WrongKey => {
                self.note("wrong-key", now, || format!("handshake from {from} is signed by a static key that is not the configured peer's: dropped"));
                DropReason::Unauthentic
            }
            E::WrongTai64nTimestamp => DropReason::Replayed,
            E::DuplicateCounter | E::InvalidCounter => DropReason::Replayed,
            E::NoCurrentSession | E::ConnectionExpired | E::WrongIndex => DropReason::NoSession,
            E::UnderLoad => DropReason::RateLimited,
            E::IncorrectPacketLength | E::DestinationBufferTooSmall => DropReason::Truncated,
            E::InvalidPacket | E::WrongPacketType => DropReason::Malformed,
            E::UnexpectedPacket => DropReason::Unsupported,
            E::LockFailed => DropReason::Unsupported,
        }
    }

    /// Queues a copy of `data` to go out to `to` through `poll`.
    fn send_later(&mut self, to: SocketAddr, data: &[u8]) {
        self.out.push_back((Verdict::ToNetwork(to), data.to_vec()));
    }

    /// After a handshake message: packets boringtun queued while it waited.
    fn drain_queued(&mut self, i: usize) {
        let Some(to) = self.peers[i].endpoint else {
            return;
        };
        // Queued packets may be as long as the TUN's MTU allows.
        self.queued_scratch
            .resize(u16::MAX as usize + DATA_OVERHEAD, 0);
        let tunn = &mut self.peers[i].tunn;
        while let TunnResult::WriteToNetwork(d) =
            tunn.decapsulate(None, &[], &mut self.queued_scratch)
        {
            self.out.push_back((Verdict::ToNetwork(to), d.to_vec()));
        }
    }
}

impl Codec for WireGuard {
    fn handle_tun(&mut self, packet: &mut Vec<u8>, now: Instant) -> Verdict {
        let Some(dst) = Tunn::dst_address(packet) else {
            return Verdict::Drop(DropReason::Malformed);
        };
        let Some(i) = self.route(dst) else {
            return Verdict::Drop(if is_link_scope(packet) {
                DropReason::LinkScope
            } else {
                DropReason::NoRoute
            });
        };
        let Some(to) = self.peers[i].endpoint else {
            let name = self.peers[i].config.name.clone();
            self.note("no-endpoint", now, || {
                format!("no endpoint known for peer {name} yet: packet to {dst} dropped")
            });
            return Verdict::Drop(DropReason::NoRoute);
        };
        self.ensure_scratch(packet.len());
        let mut out = std::mem::take(&mut self.scratch);
        let verdict = match self.peers[i].tunn.encapsulate(packet, &mut out) {
            TunnResult::WriteToNetwork(d) => Some(d.len()),
            TunnResult::Done => None,
            TunnResult::Err(e) => {
                self.scratch = out;
                return Verdict::Drop(self.reason(e, to, now));
            }
            _ => None,
        };
        match verdict {
            Some(n) => {
                // boringtun writes from the start of the buffer it is given.
                out.truncate(n);
                std::mem::swap(packet, &mut out);
                self.scratch = out;
                Verdict::ToNetwork(to)
            }
            None => {
                // Queued inside boringtun until the handshake completes.
                self.scratch = out;
                Verdict::Consumed
            }
        }
    }

    fn handle_network(&mut self, peer: SocketAddr, packet: &mut Vec<u8>, now: Instant) -> Verdict {
        let i = match self.peer_of(peer, packet, now) {
            Ok(i) => i,
            Err(v) => return v,
        };
        self.ensure_scratch(packet.len());
        let mut out = std::mem::take(&mut self.scratch);
        enum Next {
            Tun(usize, IpAddr),
            Net(usize),
            Done,
            Err(WireGuardError),
        }
        let next = match self.peers[i]
            .tunn
            .decapsulate(Some(peer.ip()), packet, &mut out)
        {
            TunnResult::WriteToTunnelV4(d, src) => Next::Tun(d.len(), src.into()),
            TunnResult::WriteToTunnelV6(d, src) => Next::Tun(d.len(), src.into()),
            TunnResult::WriteToNetwork(d) => Next::Net(d.len()),
            TunnResult::Done => Next::Done,
            TunnResult::Err(e) => Next::Err(e),
        };
        let verdict = match next {
            Next::Tun(n, src) => {
                // Cryptokey routing: the inner source must be one this peer may use.
                if self.route(src) != Some(i) {
                    let reason = outside_allowed(&out[..n]);
                    self.scratch = out;
                    if reason == DropReason::LinkScope {
                        return Verdict::Drop(reason);
                    }
                    let name = self.peers[i].config.name.clone();
                    self.note("spoofed", now, || {
                        format!(
                            "peer {name} sent a packet from {src}, outside its allowed IPs: dropped"
                        )
                    });
                    return Verdict::Drop(DropReason::Spoofed);
                }
                self.peers[i].endpoint = Some(peer);
                out.truncate(n);
                std::mem::swap(packet, &mut out);
                Verdict::ToTun
            }
            Next::Net(n) => {
                // A handshake response or a cookie (or a keepalive after a
                // response): answer, then send what waited for the session.
                out.truncate(n);
                std::mem::swap(packet, &mut out);
                if !matches!(
                    Tunn::parse_incoming_packet(&out),
                    Ok(Packet::PacketCookieReply(_))
                ) {
                    self.peers[i].endpoint = Some(peer);
                }
                Verdict::ToNetwork(peer)
            }
            Next::Done => {
                self.peers[i].endpoint = Some(peer);
                Verdict::Consumed
            }
            Next::Err(e) => {
                self.scratch = out;
                return Verdict::Drop(self.reason(e, peer, now));
            }
        };
        self.scratch = out;
        if !matches!(verdict, Verdict::ToTun) {
            self.drain_queued(i);
        }
        verdict
    }

    fn poll(&mut self, _now: Instant) -> Option<(Verdict, Vec<u8>)> {
        self.out.pop_front()
    }

    fn tick(&mut self, now: Instant) {
        // One limiter for all peers: its count restarts every second.
        if self.next_reset.is_none_or(|t| now >= t) {
            self.limiter.reset_count();
            self.next_reset = Some(now + Duration::from_secs(1));
        }
        for i in 0..self.peers.len() {
            self.ensure_scratch(0);
            let mut dst = std::mem::take(&mut self.scratch);
            let send = match self.peers[i].tunn.update_timers(&mut dst) {
                TunnResult::WriteToNetwork(d) => Some(d.to_vec()),
                _ => None,
            };
            self.scratch = dst;
            if let (Some(d), Some(to)) = (send, self.peers[i].endpoint) {
                self.send_later(to, &d);
            }
            // A handshake completed since the last tick when the time since
            // the latest one went down (or appeared).
            let since = self.peers[i].tunn.time_since_last_handshake();
            let p = &mut self.peers[i];
            if let Some(s) = since {
                if p.last_since.is_none_or(|l| s < l) {
                    p.handshakes += 1;
                }
            }
            p.last_since = since;
        }
    }
}

impl std::fmt::Debug for WireGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.debug_struct("WireGuard")
            .field("peers", &self.peers.len())
            .finish()
    }
}

#[cfg(test)]
mod tests;
