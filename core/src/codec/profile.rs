//! Device profiles, resolved: what a router's device model and a host's limits
//! are once a topology names a profile (`profiles/NAME.toml`, built in, or a
//! file next to the topology). The datapath reads only these types.
//!
//! A router model's classes are (direction, family, protocol). A ceiling entry
//! with a field left out applies to every class it matches, each on its own;
//! where entries overlap, the tightest rate wins.

use crate::vocab::{Family, Proto};
use ipnetwork::IpNetwork;
use serde::{Deserialize, Serialize};

/// Direction through a router, seen from its LAN side (the NVR500 study's words: upload
/// is the iperf3 client on the LAN sending, download is `-R`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Way {
    Upload,
    Download,
}

/// One ceiling of a router model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ceiling {
    /// None: both directions.
    pub direction: Option<Way>,
    /// None: both families.
    pub family: Option<Family>,
    /// None: TCP, UDP and anything else.
    pub protocol: Option<Proto>,
    /// All flows of a class together, bit/s of transport payload: TCP or UDP
    /// payload for those (what iperf3 counts), the IP payload for any other
    /// protocol.
    pub aggregate_bps: Option<u64>,
    /// Each flow (5-tuple) of a class on its own, bit/s of transport payload
    /// (as `aggregate_bps`).
    pub flow_bps: Option<u64>,
}

impl Ceiling {
    /// Whether this entry holds the class (a field left out matches all).
    pub fn matches(&self, way: Way, family: Family, protocol: Option<Proto>) -> bool {
        self.direction.is_none_or(|d| d == way)
            && self.family.is_none_or(|f| f == family)
            && self.protocol.is_none_or(|p| Some(p) == protocol)
    }
}

/// Which way a packet to `dst` crosses a router whose LAN side is `lan`.
pub fn way_to(lan: &[IpNetwork], dst: std::net::IpAddr) -> Way {
    if lan.iter().any(|n| n.contains(dst)) {
        Way::Download
    } else {
        Way::Upload
    }
}

/// A router's device model: the ceilings of one mode of one profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceModel {
    /// The profile's name (`nvr500`).
    pub profile: String,
    /// The mode chosen (`fast`, `normal`).
    pub mode: String,
    pub description: Option<String>,
    /// Destinations on the router's LAN side: packets to them travel
    /// `Download`, every other forwarded packet `Upload`.
    pub lan: Vec<IpNetwork>,
    pub ceilings: Vec<Ceiling>,
    /// Packets a class (and a flow) may hold waiting before it drops.
    pub queue_packets: u32,
    /// Sources and destinations whose packets the forwarding ceilings leave
    /// alone: the router's own addresses (what is for the router itself is not
    /// forwarded) and the inner traffic of tunnels it terminates with
    /// ceilings of their own (a `TerminationModel` already meters it).
    #[serde(default)]
    pub bypass: Vec<IpNetwork>,
}

/// What a router's own end of a tunnel gets through (`[terminations.KIND]`
/// of its profile): ceilings on the inner packets, applied by the end's
/// userspace datapath, whichever mode the router forwards in.
///
/// Directions are seen from the router's LAN, as its forwarding ceilings
/// are: for a DS-Lite B4, upload is what it encapsulates toward the AFTR;
/// for a VPN kind the router is the server its LAN-side clients reach, so
/// upload is what it decapsulates from them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TerminationModel {
    /// The profile's name (`nvr500`).
    pub profile: String,
    /// The tunnel kind (`l2tp`, `dslite`).
    pub kind: String,
    pub description: Option<String>,
    /// Metered as forwarding ceilings are: transport payload of the inner
    /// packets.
    pub ceilings: Vec<Ceiling>,
    pub queue_packets: u32,
}

impl TerminationModel {
    /// The direction of the inner packets the end reads from its TUN (to
    /// encapsulate): upload at a B4, download at a VPN server.
    pub fn tun_way(&self) -> Way {
        if self.kind == "dslite" {
            Way::Upload
        } else {
            Way::Download
        }
    }
}

/// A host's limits from a host profile (the NVR500 study blames its server's own UDP
/// receive path for its low UDP upload figures). They run as a device model in
/// the host's own slow path: the kernel's policers cannot do it (nftables'
/// byte limit keeps a second's worth in its bucket, and its packet limit sees
/// a UDP GSO super-packet as one), and there is no tc police or ifb here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostModel {
    pub profile: String,
    pub description: Option<String>,
    /// UDP arriving for the host beyond this is lost (bit/s of UDP payload).
    pub udp_receive_ipv4_bps: Option<u64>,
    pub udp_receive_ipv6_bps: Option<u64>,
}

/// What a host holds waiting before it drops: about a socket buffer's worth.
const HOST_QUEUE_PACKETS: u32 = 256;

impl HostModel {
    /// The limits as a device model: one UDP aggregate per family, whichever
    /// way the packet goes (only what arrives for the host passes through).
    pub fn device_model(&self) -> DeviceModel {
        let ceilings = [
            (Family::Ipv4, self.udp_receive_ipv4_bps),
            (Family::Ipv6, self.udp_receive_ipv6_bps),
        ]
        .into_iter()
        .filter_map(|(family, bps)| {
            bps.map(|b| Ceiling {
                direction: None,
                family: Some(family),
                protocol: Some(Proto::Udp),
                aggregate_bps: Some(b),
                flow_bps: None,
            })
        })
        .collect();
        DeviceModel {
            profile: self.profile.clone(),
            mode: "host".into(),
            description: self.description.clone(),
            lan: Vec::new(),
            ceilings,
            queue_packets: HOST_QUEUE_PACKETS,
            bypass: Vec::new(),
        }
    }
}

/// Ceilings in a line, for logs and notes: `upload ipv4 350M, download 100M`.
pub fn describe_ceilings(c: &[crate::codec::profile::Ceiling]) -> String {
    c.iter()
        .map(|c| {
            let mut s = Vec::new();
            s.push(match c.direction {
                Some(Way::Upload) => "upload",
                Some(Way::Download) => "download",
                None => "both ways",
            });
            let f;
            if let Some(fam) = c.family {
                f = format!("{fam:?}").to_lowercase();
                s.push(&f);
            }
            let pr;
            if let Some(p) = c.protocol {
                pr = format!("{p:?}").to_lowercase();
                s.push(&pr);
            }
            let a = c
                .aggregate_bps
                .map(|b| format!("aggregate {} Mbit/s", b as f64 / 1e6));
            let fl = c
                .flow_bps
                .map(|b| format!("flow {} Mbit/s", b as f64 / 1e6));
            let rates: Vec<String> = a.into_iter().chain(fl).collect();
            format!("{} {}", s.join(" "), rates.join(" "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}
