//! What a link's line rate counts: the bytes each IP packet costs on the wire
//! in a link's framing, and the goodput a rate carries (line rate x payload /
//! wire bytes per frame).
//!
//! | framing | beyond the IP packet | smallest frame on the wire |
//! |---|---|---|
//! | `ethernet` | 38: preamble and SFD 8, header 14, FCS 4, gap 12 | 84 |
//! | `ethernet-vlan` | 42: an 802.1Q tag more | 84 |
//! | `pppoe` | 46: PPPoE 6 and PPP 2 inside Ethernet | 84 |
//! | `none` | 0: raw IP, a tunnel's inner view | 0 |

use serde::{Deserialize, Serialize};
use std::fmt;

/// A link's framing; Ethernet unless the topology says otherwise.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Framing {
    #[default]
    Ethernet,
    EthernetVlan,
    Pppoe,
    None,
}

/// Ethernet's header (destination, source, type), which a veth counts in each
/// frame's length.
pub const ETHERNET_HEADER: u32 = 14;

impl Framing {
    pub const ALL: [Framing; 4] = [
        Framing::Ethernet,
        Framing::EthernetVlan,
        Framing::Pppoe,
        Framing::None,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Framing::Ethernet => "ethernet",
            Framing::EthernetVlan => "ethernet-vlan",
            Framing::Pppoe => "pppoe",
            Framing::None => "none",
        }
    }

    pub fn parse(s: &str) -> Option<Framing> {
        Framing::ALL.into_iter().find(|f| f.name() == s)
    }

    /// Bytes the wire spends on a frame beyond the IP packet it carries.
    pub fn beyond_ip(self) -> u32 {
        match self {
            Framing::Ethernet => 38,
            Framing::EthernetVlan => 42,
            Framing::Pppoe => 46,
            Framing::None => 0,
        }
    }

    /// The fewest bytes a frame takes on the wire (Ethernet's 64-byte minimum
    /// frame with its preamble and gap).
    pub fn min_wire(self) -> u32 {
        match self {
            Framing::None => 0,
            _ => 84,
        }
    }

    /// Bytes on the wire for one IP packet of `ip_len` bytes.
    pub fn wire_bytes(self, ip_len: u32) -> u32 {
        (ip_len + self.beyond_ip()).max(self.min_wire())
    }

    /// Goodput in bit/s of a link of `rate` bit/s carrying `payload` bytes in
    /// each IP packet of `ip_len` bytes.
    pub fn goodput(self, rate: f64, payload: u32, ip_len: u32) -> f64 {
        rate * f64::from(payload) / f64::from(self.wire_bytes(ip_len))
    }
}

impl fmt::Display for Framing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gigabit_ethernet_carries_the_study_wired_figures() {
        let e = Framing::Ethernet;
        // TCP with timestamps at MTU 1500: 1448 B (IPv4) or 1428 B (IPv6) of
        // payload per 1538 B on the wire.
        assert_eq!(e.wire_bytes(1500), 1538);
        assert!((e.goodput(1e9, 1448, 1500) / 1e6 - 941.48).abs() < 0.01);
        assert!((e.goodput(1e9, 1428, 1500) / 1e6 - 928.48).abs() < 0.01);
        // iperf3's UDP datagrams filling the MTU.
        assert!((e.goodput(1e9, 1472, 1500) / 1e6 - 957.09).abs() < 0.01);
        assert!((e.goodput(1e9, 1452, 1500) / 1e6 - 944.08).abs() < 0.01);
    }

    #[test]
    fn small_frames_pay_the_minimum_and_other_framings_their_bytes() {
        assert_eq!(Framing::Ethernet.wire_bytes(28), 84);
        assert_eq!(Framing::Ethernet.wire_bytes(46), 84);
        assert_eq!(Framing::Ethernet.wire_bytes(47), 85);
        assert_eq!(Framing::EthernetVlan.wire_bytes(1500), 1542);
        assert_eq!(Framing::Pppoe.wire_bytes(1492), 1538);
        assert_eq!(Framing::None.wire_bytes(28), 28);
        for f in Framing::ALL {
            assert_eq!(Framing::parse(f.name()), Some(f));
        }
        assert_eq!(Framing::parse("Ethernet"), None);
    }
}
