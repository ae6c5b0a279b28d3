//! What a measurement measures to: a node of the lab, in whose namespace
//! tunbench starts its own server, or an iperf3 server outside any lab, given
//! by address and port, which tunbench only connects to.

use super::Family;
use serde::Serialize;
use std::fmt;
use std::net::{IpAddr, SocketAddr};

/// iperf3's port, and the one an address target has when none is given.
pub const DEFAULT_PORT: u16 = 5201;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum MeasureTarget {
    /// A node of the lab: tunbench runs its server there.
    Node(String),
    /// An iperf3 server tunbench did not start (a real machine, a device under
    /// test, a namespace someone else built).
    Address { address: IpAddr, port: u16 },
}

impl MeasureTarget {
    /// The node's name, for a node target.
    pub fn node(&self) -> Option<&str> {
        match self {
            MeasureTarget::Node(n) => Some(n),
            MeasureTarget::Address { .. } => None,
        }
    }

    /// The only family an address target has.
    pub fn family(&self) -> Option<Family> {
        match self {
            MeasureTarget::Node(_) => None,
            MeasureTarget::Address { address, .. } => Some(Family::of(*address)),
        }
    }

    /// Where the server listens, for an address target.
    pub fn socket_addr(&self) -> Option<SocketAddr> {
        match self {
            MeasureTarget::Node(_) => None,
            MeasureTarget::Address { address, port } => Some(SocketAddr::new(*address, *port)),
        }
    }

    /// A target as the command line takes it: a node name, or an address with
    /// an optional port (`198.18.200.2`, `198.18.200.2:5201`, `2001:2::2`,
    /// `[2001:2::2]:5201`).
    pub fn parse(s: &str) -> Result<MeasureTarget, String> {
        let address = |address: IpAddr, port: u16| -> Result<MeasureTarget, String> {
            if port == 0 {
                return Err(format!("{s}: port 0; give a port from 1 to 65535"));
            }
            if let Some(why) = address_problem(address) {
                return Err(format!("{s}: {why}"));
            }
            Ok(MeasureTarget::Address { address, port })
        };
        if let Ok(a) = s.parse::<SocketAddr>() {
            return address(a.ip(), a.port());
        }
        if let Ok(a) = s.parse::<IpAddr>() {
            return address(a, DEFAULT_PORT);
        }
        if let Some(inner) = s.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
            if let Ok(a) = inner.parse::<IpAddr>() {
                return address(a, DEFAULT_PORT);
            }
        }
        let node_like = !s.is_empty()
            && s.bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_');
        if node_like {
            Ok(MeasureTarget::Node(s.to_string()))
        } else {
            Err(format!(
                "\"{s}\" is neither a node name nor an address: give NODE, ADDRESS, ADDRESS:PORT or [IPV6]:PORT"
            ))
        }
    }
}

/// Why `a` cannot be the address of a server to measure to, if it cannot.
pub fn address_problem(a: IpAddr) -> Option<String> {
    if a.is_unspecified() {
        Some(format!(
            "{a} is the unspecified address; give the server's own"
        ))
    } else if a.is_multicast() || a == IpAddr::from([255, 255, 255, 255]) {
        Some(format!(
            "{a} is a multicast or broadcast address; give the server's own"
        ))
    } else if a.is_loopback() {
        Some(format!(
            "{a} is a loopback address: the measuring node itself; give the server's own"
        ))
    } else {
        None
    }
}

impl From<&str> for MeasureTarget {
    fn from(node: &str) -> MeasureTarget {
        MeasureTarget::Node(node.to_string())
    }
}

/// A node by its name; an address as `198.18.200.2:5201` or `[2001:2::2]:5201`.
impl fmt::Display for MeasureTarget {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            MeasureTarget::Node(n) => f.write_str(n),
            MeasureTarget::Address { address, port } => {
                write!(f, "{}", SocketAddr::new(*address, *port))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_as_the_command_line_writes_them() {
        let a = |s: &str| MeasureTarget::parse(s).map(|t| t.to_string());
        assert_eq!(a("server").unwrap(), "server");
        assert_eq!(
            MeasureTarget::parse("pc-1"),
            Ok(MeasureTarget::Node("pc-1".into()))
        );
        assert_eq!(a("198.18.200.2").unwrap(), "198.18.200.2:5201");
        assert_eq!(a("198.18.200.2:7000").unwrap(), "198.18.200.2:7000");
        assert_eq!(a("2001:2:0:c8::2").unwrap(), "[2001:2:0:c8::2]:5201");
        assert_eq!(a("[2001:2:0:c8::2]").unwrap(), "[2001:2:0:c8::2]:5201");
        assert_eq!(a("[2001:2:0:c8::2]:5202").unwrap(), "[2001:2:0:c8::2]:5202");
        assert_eq!(
            MeasureTarget::parse("198.18.200.2:5201")
                .unwrap()
                .socket_addr(),
            Some("198.18.200.2:5201".parse().unwrap())
        );
        for bad in [
            "198.18.200.2:0",
            "198.18.200.2:70000",
            "198.18.300.2",
            "0.0.0.0",
            "127.0.0.1:5201",
            "[::1]:5201",
            "224.0.0.1",
            "",
            "a.b",
        ] {
            assert!(MeasureTarget::parse(bad).is_err(), "{bad}");
        }
        assert!(
            MeasureTarget::parse("198.18.200.2:0")
                .unwrap_err()
                .contains("port 0")
        );
    }

    #[test]
    fn a_node_serialises_as_its_name_and_an_address_as_a_table() {
        let n = serde_json::to_string(&MeasureTarget::from("server")).unwrap();
        assert_eq!(n, "\"server\"");
        let a = serde_json::to_string(&MeasureTarget::parse("198.18.200.2").unwrap()).unwrap();
        assert_eq!(a, r#"{"address":"198.18.200.2","port":5201}"#);
    }
}
