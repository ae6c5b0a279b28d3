//! The kernel's WireGuard devices, configured over generic netlink (the
//! "wireguard" family, as `wg set` and `wg show` do): private key, listen
//! port and peers in, peers' endpoints, handshakes and byte counts out.
//!
//! Both calls act in the calling thread's network namespace: a lab's peer
//! process runs inside its node's namespace, where `up` made the device
//! (`Op::Wireguard`).

use ipnetwork::IpNetwork;
use netlink_packet_core::{
    NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST, NetlinkMessage, NetlinkPayload, NetlinkSerializable,
};
use netlink_packet_generic::GenlMessage;
use netlink_packet_generic::ctrl::GenlCtrl;
use netlink_packet_generic::ctrl::GenlCtrlCmd;
use netlink_packet_generic::ctrl::nlas::GenlCtrlAttrs;
use netlink_packet_wireguard::{
    WireguardAddressFamily, WireguardAllowedIp, WireguardAllowedIpAttr, WireguardAttribute,
    WireguardCmd, WireguardDeviceFlags, WireguardMessage, WireguardPeer, WireguardPeerAttribute,
    WireguardPeerFlags,
};
use netlink_sys::{Socket, protocols::NETLINK_GENERIC};
use std::net::SocketAddr;

/// The generic netlink family of the kernel's WireGuard.
const FAMILY: &str = "wireguard";

/// What a device runs with: its key and port, and every peer (those it had
/// before are replaced).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceConfig {
    pub private_key: [u8; 32],
    pub listen_port: u16,
    pub peers: Vec<PeerConfig>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerConfig {
    pub public_key: [u8; 32],
    pub preshared_key: Option<[u8; 32]>,
    pub endpoint: Option<SocketAddr>,
    /// Persistent keepalive in seconds.
    pub keepalive: Option<u16>,
    pub allowed_ips: Vec<IpNetwork>,
}

/// A peer as the device reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerState {
    pub public_key: [u8; 32],
    pub endpoint: Option<SocketAddr>,
    /// The latest handshake in seconds since the Unix epoch; None: none yet.
    pub latest_handshake_unix: Option<i64>,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    pub allowed_ips: Vec<IpNetwork>,
}

/// Why talking to the kernel's WireGuard failed.
#[derive(Debug, thiserror::Error)]
pub enum WireguardError {
    #[error("the kernel has no WireGuard (no generic netlink family \"wireguard\")")]
    NoFamily,
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Reply(String),
}

fn io(what: &str) -> impl FnOnce(std::io::Error) -> WireguardError + '_ {
    move |source| WireguardError::Io {
        what: what.to_string(),
        source,
    }
}

/// Sets device `dev`'s key, port and peers, replacing any it had.
pub fn configure(dev: &str, c: &DeviceConfig) -> Result<(), WireguardError> {
    let mut s = GenlSocket::open()?;
    let family = s.family_id(FAMILY)?.ok_or(WireguardError::NoFamily)?;
    let mut g = GenlMessage::from_payload(set_message(dev, c));
    g.set_resolved_family_id(family);
    s.request(g, NLM_F_REQUEST | NLM_F_ACK, &format!("configuring {dev}"))?;
    Ok(())
}

/// The peers of device `dev` as the kernel reports them now.
pub fn show(dev: &str) -> Result<Vec<PeerState>, WireguardError> {
    let mut s = GenlSocket::open()?;
    let family = s.family_id(FAMILY)?.ok_or(WireguardError::NoFamily)?;
    let mut g = GenlMessage::from_payload(WireguardMessage {
        cmd: WireguardCmd::GetDevice,
        attributes: vec![WireguardAttribute::IfName(dev.to_string())],
    });
    g.set_resolved_family_id(family);
    let replies: Vec<GenlMessage<WireguardMessage>> = s.request(
        g,
        NLM_F_REQUEST | NLM_F_DUMP,
        &format!("reading {dev}'s peers"),
    )?;
    Ok(replies
        .into_iter()
        .flat_map(|r| r.payload.attributes)
        .filter_map(|a| match a {
            WireguardAttribute::Peers(p) => Some(p),
            _ => None,
        })
        .flatten()
        .map(|p| peer_state(&p))
        .collect())
}

/// The SET_DEVICE request for `c`: what `wg set DEV private-key ...
/// listen-port ... peer ...` sends, with REPLACE_PEERS.
pub fn set_message(dev: &str, c: &DeviceConfig) -> WireguardMessage {
    let peers = c
        .peers
        .iter()
        .map(|p| {
            let mut a = vec![
                WireguardPeerAttribute::PublicKey(p.public_key),
                WireguardPeerAttribute::Flags(WireguardPeerFlags::ReplaceAllowedIps),
            ];
            if let Some(k) = p.preshared_key {
                a.push(WireguardPeerAttribute::PresharedKey(k));
            }
            if let Some(e) = p.endpoint {
                a.push(WireguardPeerAttribute::Endpoint(e));
            }
            a.push(WireguardPeerAttribute::PersistentKeepalive(
                p.keepalive.unwrap_or(0),
            ));
            a.push(WireguardPeerAttribute::AllowedIps(
                p.allowed_ips.iter().map(allowed_ip).collect(),
            ));
            WireguardPeer(a)
        })
        .collect();
    WireguardMessage {
        cmd: WireguardCmd::SetDevice,
        attributes: vec![
            WireguardAttribute::IfName(dev.to_string()),
            WireguardAttribute::Flags(WireguardDeviceFlags::ReplacePeers),
            WireguardAttribute::PrivateKey(c.private_key),
            WireguardAttribute::ListenPort(c.listen_port),
            WireguardAttribute::Peers(peers),
        ],
    }
}

fn allowed_ip(n: &IpNetwork) -> WireguardAllowedIp {
    let family = if n.is_ipv4() {
        WireguardAddressFamily::Ipv4
    } else {
        WireguardAddressFamily::Ipv6
    };
    WireguardAllowedIp(vec![
        WireguardAllowedIpAttr::Family(family),
        WireguardAllowedIpAttr::IpAddr(n.network()),
        WireguardAllowedIpAttr::Cidr(n.prefix()),
    ])
}

fn peer_state(p: &WireguardPeer) -> PeerState {
    let mut s = PeerState::default();
    for a in &p.0 {
        match a {
            WireguardPeerAttribute::PublicKey(k) => s.public_key = *k,
            WireguardPeerAttribute::Endpoint(e) => s.endpoint = Some(*e),
            WireguardPeerAttribute::LastHandshake(t) if t.seconds > 0 => {
                s.latest_handshake_unix = Some(t.seconds)
            }
            WireguardPeerAttribute::RxBytes(b) => s.rx_bytes = *b,
            WireguardPeerAttribute::TxBytes(b) => s.tx_bytes = *b,
            WireguardPeerAttribute::AllowedIps(ips) => {
                s.allowed_ips.extend(ips.iter().filter_map(network_of))
            }
            _ => {}
        }
    }
    s
}

fn network_of(a: &WireguardAllowedIp) -> Option<IpNetwork> {
    let ip = a.0.iter().find_map(|x| match x {
        WireguardAllowedIpAttr::IpAddr(ip) => Some(*ip),
        _ => None,
    })?;
    let cidr = a.0.iter().find_map(|x| match x {
        WireguardAllowedIpAttr::Cidr(c) => Some(*c),
        _ => None,
    })?;
    IpNetwork::new(ip, cidr).ok()
}

/// A blocking generic netlink socket in the calling thread's namespace.
struct GenlSocket {
    socket: Socket,
    seq: u32,
}

impl GenlSocket {
    fn open() -> Result<Self, WireguardError> {
        let mut socket = Socket::new(NETLINK_GENERIC).map_err(io("opening a netlink socket"))?;
        socket.bind_auto().map_err(io("binding a netlink socket"))?;
        Ok(GenlSocket { socket, seq: 0 })
    }

    /// The id of family `name`; None: the kernel has no such family.
    fn family_id(&mut self, name: &str) -> Result<Option<u16>, WireguardError> {
        let g = GenlMessage::from_payload(GenlCtrl {
            cmd: GenlCtrlCmd::GetFamily,
            nlas: vec![GenlCtrlAttrs::FamilyName(name.to_string())],
        });
        match self.request(g, NLM_F_REQUEST, &format!("looking up family {name}")) {
            Ok(replies) => Ok(replies
                .iter()
                .flat_map(|r| r.payload.nlas.iter())
                .find_map(|a| match a {
                    GenlCtrlAttrs::FamilyId(id) => Some(*id),
                    _ => None,
                })),
            Err(WireguardError::Io { source, .. })
                if source.raw_os_error() == Some(libc::ENOENT) =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Sends `g` and reads the replies up to the acknowledgement, the end of
    /// a dump, or the one answer of a plain request.
    fn request<F>(
        &mut self,
        g: GenlMessage<F>,
        flags: u16,
        what: &str,
    ) -> Result<Vec<GenlMessage<F>>, WireguardError>
    where
        F: netlink_packet_generic::GenlFamily + Clone + std::fmt::Debug + PartialEq + Eq,
        GenlMessage<F>: NetlinkSerializable
            + netlink_packet_core::NetlinkDeserializable
            + Clone
            + std::fmt::Debug
            + PartialEq
            + Eq,
    {
        self.seq += 1;
        let mut m = NetlinkMessage::from(g);
        m.header.flags = flags;
        m.header.sequence_number = self.seq;
        m.finalize();
        let mut buf = vec![0u8; m.buffer_len()];
        m.serialize(&mut buf);
        self.socket.send(&buf, 0).map_err(io(what))?;
        let (dump, ack) = (flags & NLM_F_DUMP != 0, flags & NLM_F_ACK != 0);
        let mut out = Vec::new();
        loop {
            let (bytes, _) = self.socket.recv_from_full().map_err(io(what))?;
            let mut at = 0;
            while at < bytes.len() {
                let reply = NetlinkMessage::<GenlMessage<F>>::deserialize(&bytes[at..])
                    .map_err(|e| WireguardError::Reply(format!("{what}: {e}")))?;
                let len = reply.header.length as usize;
                match reply.payload {
                    NetlinkPayload::Done(_) => return Ok(out),
                    NetlinkPayload::Error(e) => match e.code {
                        None => return Ok(out),
                        Some(c) => {
                            return Err(WireguardError::Io {
                                what: what.to_string(),
                                source: std::io::Error::from_raw_os_error(-c.get()),
                            });
                        }
                    },
                    NetlinkPayload::InnerMessage(g) => {
                        out.push(g);
                        if !dump && !ack {
                            return Ok(out);
                        }
                    }
                    _ => {}
                }
                if len == 0 {
                    break;
                }
                at += (len + 3) & !3;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netlink_packet_core::Emitable;

    fn config() -> DeviceConfig {
        DeviceConfig {
            private_key: [1; 32],
            listen_port: 51820,
            peers: vec![PeerConfig {
                public_key: [2; 32],
                preshared_key: Some([3; 32]),
                endpoint: Some("198.18.70.2:51820".parse().unwrap()),
                keepalive: None,
                allowed_ips: vec![
                    "198.18.71.2/32".parse().unwrap(),
                    "2001:2:0:71::/64".parse().unwrap(),
                ],
            }],
        }
    }

    /// The request names the device, replaces its peers, and carries every
    /// key, the port, the endpoint and each allowed prefix.
    #[test]
    fn the_set_request_carries_the_whole_configuration() {
        let m = set_message("wg-x", &config());
        assert_eq!(m.cmd, WireguardCmd::SetDevice);
        let a = &m.attributes;
        assert!(a.contains(&WireguardAttribute::IfName("wg-x".into())));
        assert!(a.contains(&WireguardAttribute::Flags(
            WireguardDeviceFlags::ReplacePeers
        )));
        assert!(a.contains(&WireguardAttribute::PrivateKey([1; 32])));
        assert!(a.contains(&WireguardAttribute::ListenPort(51820)));
        let Some(WireguardAttribute::Peers(peers)) = a.last() else {
            panic!("no peers in {a:?}");
        };
        let p = &peers[0].0;
        assert!(p.contains(&WireguardPeerAttribute::PublicKey([2; 32])));
        assert!(p.contains(&WireguardPeerAttribute::PresharedKey([3; 32])));
        assert!(p.contains(&WireguardPeerAttribute::Endpoint(
            "198.18.70.2:51820".parse().unwrap()
        )));
        // Read back as the kernel would report it: the same prefixes.
        assert_eq!(
            peer_state(&peers[0]).allowed_ips,
            config().peers[0].allowed_ips
        );
        // And it encodes: the generic netlink header and every attribute.
        let g = GenlMessage::from_payload(m);
        assert!(Emitable::buffer_len(&g) > 4 + 32 + 32 + 32);
    }
}
