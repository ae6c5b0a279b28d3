//! The vocabulary of kernel operations a lab is built from. A plan is a list of
//! these, made without side effects and printable as a dry run; `apply` carries it out.

use ipnetwork::IpNetwork;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::IpAddr;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Op {
    /// Create a namespace and write its namespace-wide sysctls before any device
    /// exists, so new devices inherit `conf.default.*`. Brings lo up and marks it
    /// with the lab's name.
    Namespace {
        ns: String,
        /// The altname on lo that says which lab owns the namespace.
        marker: String,
        sysctls: Vec<(String, String)>,
    },
    /// A Linux bridge, up.
    Bridge { ns: String, name: String, mtu: u32 },
    /// A veth pair made directly across two namespaces, this end up. (The kernel
    /// refuses IFF_UP on a peer made in another namespace: ENOTCONN.)
    Veth {
        ns: String,
        name: String,
        peer_ns: String,
        peer_name: String,
        mtu: u32,
    },
    /// A sysctl that names a device, written once the device exists.
    Sysctl {
        ns: String,
        key: String,
        value: String,
    },
    /// Enslave a device to a bridge.
    Port {
        ns: String,
        iface: String,
        bridge: String,
    },
    /// Set a device up.
    Up { ns: String, iface: String },
    Address {
        ns: String,
        iface: String,
        addr: IpNetwork,
    },
    Route {
        ns: String,
        to: IpNetwork,
        via: Option<IpAddr>,
        dev: Option<String>,
        metric: Option<u32>,
    },
}

/// Ops run phase by phase; within a phase they are independent and run at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    Namespaces,
    Links,
    Sysctls,
    Ports,
    Addresses,
    Routes,
}

impl Op {
    pub fn phase(&self) -> Phase {
        match self {
            Op::Namespace { .. } => Phase::Namespaces,
            Op::Bridge { .. } | Op::Veth { .. } => Phase::Links,
            Op::Sysctl { .. } => Phase::Sysctls,
            Op::Port { .. } | Op::Up { .. } => Phase::Ports,
            Op::Address { .. } => Phase::Addresses,
            Op::Route { .. } => Phase::Routes,
        }
    }

    pub fn ns(&self) -> &str {
        match self {
            Op::Namespace { ns, .. }
            | Op::Bridge { ns, .. }
            | Op::Veth { ns, .. }
            | Op::Sysctl { ns, .. }
            | Op::Port { ns, .. }
            | Op::Up { ns, .. }
            | Op::Address { ns, .. }
            | Op::Route { ns, .. } => ns,
        }
    }
}

/// The iproute2 command that would do the same, for dry runs and error messages.
impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Op::Namespace {
                ns,
                marker,
                sysctls,
            } => {
                write!(
                    f,
                    "ip netns add {ns}; ip -n {ns} link set lo up; ip -n {ns} link property add dev lo altname {marker}"
                )?;
                for (k, v) in sysctls {
                    write!(f, "; ip netns exec {ns} sysctl -qw {k}={v}")?;
                }
                Ok(())
            }
            Op::Bridge { ns, name, mtu } => {
                write!(f, "ip -n {ns} link add {name} mtu {mtu} up type bridge")
            }
            Op::Veth {
                ns,
                name,
                peer_ns,
                peer_name,
                mtu,
            } => {
                write!(
                    f,
                    "ip -n {ns} link add {name} mtu {mtu} up type veth peer name {peer_name} netns {peer_ns} mtu {mtu}"
                )
            }
            Op::Sysctl { ns, key, value } => {
                write!(f, "ip netns exec {ns} sysctl -qw {key}={value}")
            }
            Op::Port { ns, iface, bridge } => {
                write!(f, "ip -n {ns} link set {iface} master {bridge}")
            }
            Op::Up { ns, iface } => write!(f, "ip -n {ns} link set {iface} up"),
            Op::Address { ns, iface, addr } => {
                write!(f, "ip -n {ns} addr add {addr} dev {iface}")?;
                if addr.is_ipv6() {
                    write!(f, " nodad")?;
                }
                Ok(())
            }
            Op::Route {
                ns,
                to,
                via,
                dev,
                metric,
            } => {
                write!(f, "ip -n {ns} route add {to}")?;
                if let Some(v) = via {
                    write!(f, " via {v}")?;
                }
                if let Some(d) = dev {
                    write!(f, " dev {d}")?;
                }
                if let Some(m) = metric {
                    write!(f, " metric {m}")?;
                }
                // What rtnetlink installs; a bare `ip route add` would say proto boot.
                write!(f, " proto static")
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub lab: String,
    /// (node, namespace, kind) for the state record.
    pub nodes: Vec<(String, String, String)>,
    pub ops: Vec<Op>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_print_as_the_ip_commands_they_stand_for() {
        let r = Op::Route {
            ns: "l-a".into(),
            to: "2001:2:0:9::/64".parse().unwrap(),
            via: Some("2001:2::1".parse().unwrap()),
            dev: Some("eth0".into()),
            metric: Some(7),
        };
        assert_eq!(
            r.to_string(),
            "ip -n l-a route add 2001:2:0:9::/64 via 2001:2::1 dev eth0 metric 7 proto static"
        );
        assert_eq!(r.phase(), Phase::Routes);
        let a = Op::Address {
            ns: "l-a".into(),
            iface: "eth0".into(),
            addr: "198.18.0.1/24".parse().unwrap(),
        };
        assert_eq!(a.to_string(), "ip -n l-a addr add 198.18.0.1/24 dev eth0");
        let v = Op::Veth {
            ns: "l-a".into(),
            name: "eth0".into(),
            peer_ns: "l-b".into(),
            peer_name: "eth1".into(),
            mtu: 9000,
        };
        assert_eq!(
            v.to_string(),
            "ip -n l-a link add eth0 mtu 9000 up type veth peer name eth1 netns l-b mtu 9000"
        );
        assert!(
            Phase::Namespaces < Phase::Links
                && Phase::Links < Phase::Sysctls
                && Phase::Ports < Phase::Addresses
                && Phase::Addresses < Phase::Routes
        );
    }
}
