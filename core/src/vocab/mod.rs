//! The vocabulary every layer shares: address families, transport protocols,
//! directions and cells of the measurement matrix; rates and sizes as people
//! write them (`units`); keys as text (`keys`); the programs tunbench runs and
//! the Debian packages that have them (`programs`); what a measurement measures
//! to, a lab node or an address outside any lab (`target`).

pub mod count;
pub mod framing;
pub mod keys;
pub mod programs;
pub mod target;
pub mod units;

use serde::{Deserialize, Serialize};
use std::fmt;

/// Latency probes per second by default: irtt's and flent's 10 ms interval.
pub const LATENCY_RATE: f64 = 100.0;
/// Seconds of probes alone per family before a path's cells (RRUL's idle
/// phase).
pub const LATENCY_IDLE_SECONDS: f64 = 2.0;
/// The echo responder's UDP port by default, beside iperf3's 5201.
pub const ECHO_PORT: u16 = 5202;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    Ipv4,
    Ipv6,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Proto {
    Tcp,
    Udp,
}

/// The NVR500 study's words: "sender" is the iperf3 client sending (upload), "receiver"
/// is `-R` (download).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Sender,
    Receiver,
}

/// One cell of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Cell {
    pub family: Family,
    pub protocol: Proto,
    pub direction: Direction,
    pub streams: u32,
}

impl Cell {
    /// `ipv4.tcp.sender`, or `ipv6.tcp.receiver.p6` for 6 streams.
    pub fn key(&self) -> String {
        let mut k = format!(
            "{}.{}.{}",
            self.family.word(),
            self.protocol.word(),
            self.direction.word()
        );
        if self.streams != 1 {
            k += &format!(".p{}", self.streams);
        }
        k
    }

    pub fn parse_key(s: &str) -> Option<Cell> {
        let parts: Vec<&str> = s.split('.').collect();
        if parts.len() != 3 && parts.len() != 4 {
            return None;
        }
        let family = match parts[0] {
            "ipv4" => Family::Ipv4,
            "ipv6" => Family::Ipv6,
            _ => return None,
        };
        let protocol = match parts[1] {
            "tcp" => Proto::Tcp,
            "udp" => Proto::Udp,
            _ => return None,
        };
        let direction = match parts[2] {
            "sender" => Direction::Sender,
            "receiver" => Direction::Receiver,
            _ => return None,
        };
        let streams = match parts.get(3) {
            None => 1,
            Some(p) => p.strip_prefix('p')?.parse().ok().filter(|n| *n >= 1)?,
        };
        Some(Cell {
            family,
            protocol,
            direction,
            streams,
        })
    }

    /// Why `key` is not a cell key: the first part that is wrong, and what it
    /// could be.
    pub fn key_problem(key: &str) -> String {
        Cell::parts_problem(&key.split('.').collect::<Vec<_>>(), key)
    }

    /// The same for a key already split at its dots; `written` names it.
    pub fn parts_problem(parts: &[&str], written: &str) -> String {
        if parts.len() != 3 && parts.len() != 4 {
            format!("'{written}' is not a cell")
        } else if !matches!(parts[0], "ipv4" | "ipv6") {
            format!(
                "unknown family '{}' in '{written}' (ipv4 or ipv6)",
                parts[0]
            )
        } else if !matches!(parts[1], "tcp" | "udp") {
            format!(
                "unknown protocol '{}' in '{written}' (tcp or udp)",
                parts[1]
            )
        } else if !matches!(parts[2], "sender" | "receiver") {
            format!(
                "unknown direction '{}' in '{written}' (sender or receiver)",
                parts[2]
            )
        } else {
            format!(
                "bad stream count '{}' in '{written}' (p2, p6, ...; one stream has none)",
                parts.get(3).copied().unwrap_or_default()
            )
        }
    }

    /// The NVR500 study's own words: "IPv4 TCP Sender".
    pub fn title(&self) -> String {
        let mut t = format!(
            "{} {} {}",
            self.family.title(),
            match self.protocol {
                Proto::Tcp => "TCP",
                Proto::Udp => "UDP",
            },
            match self.direction {
                Direction::Sender => "Sender",
                Direction::Receiver => "Receiver",
            }
        );
        if self.streams != 1 {
            t += &format!(" x{}", self.streams);
        }
        t
    }
}

impl fmt::Display for Cell {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(&self.key())
    }
}

impl Family {
    pub fn word(self) -> &'static str {
        match self {
            Family::Ipv4 => "ipv4",
            Family::Ipv6 => "ipv6",
        }
    }

    /// "IPv4", "IPv6": as sentences write it.
    pub fn title(self) -> &'static str {
        match self {
            Family::Ipv4 => "IPv4",
            Family::Ipv6 => "IPv6",
        }
    }

    pub fn of(a: std::net::IpAddr) -> Family {
        if a.is_ipv4() {
            Family::Ipv4
        } else {
            Family::Ipv6
        }
    }
}
impl Proto {
    pub fn word(self) -> &'static str {
        match self {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
        }
    }
}
impl Direction {
    pub fn word(self) -> &'static str {
        match self {
            Direction::Sender => "sender",
            Direction::Receiver => "receiver",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cell_keys_round_trip() {
        let c = Cell {
            family: Family::Ipv6,
            protocol: Proto::Tcp,
            direction: Direction::Receiver,
            streams: 6,
        };
        assert_eq!(c.key(), "ipv6.tcp.receiver.p6");
        assert_eq!(Cell::parse_key("ipv6.tcp.receiver.p6"), Some(c));
        let one = Cell { streams: 1, ..c };
        assert_eq!(one.key(), "ipv6.tcp.receiver");
        assert_eq!(Cell::parse_key("ipv6.tcp.receiver"), Some(one));
        assert_eq!(one.title(), "IPv6 TCP Receiver");
        for bad in [
            "ipv5.tcp.sender",
            "ipv4.tcp",
            "ipv4.tcp.sender.p0",
            "ipv4.tcp.sender.x2",
            "ipv4.sctp.sender",
        ] {
            assert_eq!(Cell::parse_key(bad), None, "{bad}");
        }
    }
}
