//! The vocabulary of kernel operations a lab is built from. A plan is a list of
//! these, made without side effects and printable as a dry run; `apply` carries it out.

use ipnetwork::IpNetwork;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::{IpAddr, Ipv6Addr};

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
    /// A persistent multi-queue TUN with virtio-net headers, for a userspace
    /// datapath process to attach to later; routes can point at it at once.
    /// With `tap`, a TAP (Ethernet frames) instead.
    Tun {
        ns: String,
        name: String,
        #[serde(default)]
        tap: bool,
        /// One queue, no virtio header: for programs that attach that way
        /// (wireguard-go); the kernel refuses a queue whose multi-queue flag
        /// differs from the device's.
        #[serde(default)]
        single_queue: bool,
    },
    /// A kernel WireGuard device, down and unconfigured: its peer process
    /// gives it keys and peers over generic netlink (crate::wireguard), and
    /// `LinkSet` its MTU.
    Wireguard { ns: String, name: String },
    /// Set a device's MTU and bring it up.
    LinkSet { ns: String, iface: String, mtu: u32 },
    /// IPv4 route into an SRv6 reduced encapsulation with one segment: on the
    /// wire exactly IPv6 (next header 4) + the IPv4 packet, no SRH.
    Seg6Encap {
        ns: String,
        to: ipnetwork::Ipv4Network,
        segment: Ipv6Addr,
        dev: String,
        table: u32,
    },
    /// seg6local End.DX4 for `sid`: decapsulate and route the inner IPv4 packet.
    Seg6Local {
        ns: String,
        sid: Ipv6Addr,
        dev: String,
        table: u32,
    },
    /// A blackhole route (nothing un-NATed to a pool loops back out).
    Blackhole { ns: String, to: IpNetwork },
    /// Move the IPv6 `lookup local` rule from priority 0 to `pref`, so rules
    /// before it can steer packets addressed to a local address.
    LocalRuleAt { ns: String, pref: u32 },
    /// A policy routing rule.
    Rule {
        ns: String,
        v6: bool,
        pref: u32,
        /// Packets that came in on this device only.
        iif: Option<String>,
        to: Option<IpNetwork>,
        ipproto: Option<u8>,
        fwmark: Option<u32>,
        table: u32,
    },
    /// An IPv4 route out of `dev`, one end of a veth pair whose other end `peer`
    /// is in the same namespace, so routed packets come straight back in on
    /// `peer`: `ip route add TO via GATE dev DEV onlink table T` with GATE a
    /// permanent neighbour at `peer`'s MAC. GATE is never a local address (the
    /// kernel refuses a local gateway); it only names the next hop.
    PairRoute {
        ns: String,
        to: ipnetwork::Ipv4Network,
        gate: std::net::Ipv4Addr,
        dev: String,
        peer: String,
        table: u32,
    },
    /// An nftables ruleset loaded with `nft -f -` inside the namespace.
    Nftables { ns: String, ruleset: String },
    /// Traffic-control commands (`tc -batch -` lines) in a namespace, once the
    /// devices they name exist and are up.
    Tc { ns: String, batch: String },
    /// Receive packet steering by flow hash on a device (crate::steer): one
    /// flow stays on one CPU, so a veth behind a rate's TBF keeps its order.
    SteerByFlow { ns: String, iface: String },
    /// The node's device `name` in namespace `ns`, made from the interface `host`
    /// of the namespace tunbench runs in (the host), with this MTU and up. A
    /// macvlan, ipvlan or VLAN device is made directly in `ns` and goes with it;
    /// a moved interface is given back, with its host state, by `down`/`clean`.
    HostLink {
        ns: String,
        name: String,
        host: String,
        attach: HostAttach,
        mtu: u32,
    },
    /// One end of a link whose far end is on another host: a point-to-point
    /// VXLAN device made over the host's netlink socket directly into the
    /// node's namespace `ns` as `name` (`ip link add NAME netns NS type vxlan`),
    /// so its UDP socket stays in the host's namespace, on the underlay, and
    /// the device is never in the host's namespace itself: deleting `ns`
    /// removes it. No learning, no multicast group: `remote` is the default
    /// destination (the kernel's all-zeros forwarding entry). Up.
    Vxlan {
        ns: String,
        name: String,
        vni: u32,
        /// This host's underlay address, and the far host's (one family).
        local: IpAddr,
        remote: IpAddr,
        /// The UDP destination port (4789 by default).
        port: u16,
        /// The host interface the underlay packets leave by, when bound.
        underlay: Option<String>,
        mtu: u32,
    },
}

/// VXLAN's UDP port (IANA, RFC 7348).
pub const VXLAN_PORT: u16 = 4789;

/// What VXLAN adds to each packet of a link on the underlay: the inner
/// Ethernet header (14), VXLAN (8), UDP (8) and the outer IP header (20 for
/// IPv4, 40 for IPv6). A link's MTU plus this must fit the underlay's MTU.
pub fn vxlan_overhead(underlay: IpAddr) -> u32 {
    match underlay {
        IpAddr::V4(_) => 50,
        IpAddr::V6(_) => 70,
    }
}

/// How a node's device is made from a host interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HostAttach {
    /// A macvlan in bridge mode: its own MAC on the host interface's segment.
    Macvlan,
    /// An ipvlan in l2 mode: the host interface's MAC, its own addresses.
    Ipvlan,
    /// An 802.1Q sub-interface with this VLAN id (1..=4094).
    Vlan(u16),
    /// The host interface itself, moved into the node and renamed.
    Move,
}

impl fmt::Display for HostAttach {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            HostAttach::Macvlan => write!(f, "macvlan"),
            HostAttach::Ipvlan => write!(f, "ipvlan"),
            HostAttach::Vlan(id) => write!(f, "vlan {id}"),
            HostAttach::Move => write!(f, "moved"),
        }
    }
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
    Firewall,
}

impl Op {
    pub fn phase(&self) -> Phase {
        match self {
            Op::Namespace { .. } => Phase::Namespaces,
            Op::Bridge { .. } | Op::Veth { .. } | Op::HostLink { .. } | Op::Vxlan { .. } => {
                Phase::Links
            }
            Op::Sysctl { .. } => Phase::Sysctls,
            Op::Port { .. } | Op::Up { .. } => Phase::Ports,
            Op::Address { .. } => Phase::Addresses,
            Op::Route { .. }
            | Op::Seg6Encap { .. }
            | Op::Seg6Local { .. }
            | Op::Blackhole { .. }
            | Op::LocalRuleAt { .. }
            | Op::Rule { .. }
            | Op::PairRoute { .. } => Phase::Routes,
            Op::Tun { .. } | Op::Wireguard { .. } => Phase::Links,
            Op::LinkSet { .. } => Phase::Ports,
            Op::Nftables { .. } | Op::Tc { .. } | Op::SteerByFlow { .. } => Phase::Firewall,
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
            | Op::Route { ns, .. }
            | Op::Tun { ns, .. }
            | Op::Wireguard { ns, .. }
            | Op::LinkSet { ns, .. }
            | Op::Seg6Encap { ns, .. }
            | Op::Seg6Local { ns, .. }
            | Op::Blackhole { ns, .. }
            | Op::LocalRuleAt { ns, .. }
            | Op::Rule { ns, .. }
            | Op::PairRoute { ns, .. }
            | Op::Nftables { ns, .. }
            | Op::Tc { ns, .. }
            | Op::SteerByFlow { ns, .. }
            | Op::HostLink { ns, .. }
            | Op::Vxlan { ns, .. } => ns,
        }
    }
}

/// The iproute2 command that would do the same, for dry runs and error messages.
impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Op::Namespace { .. } | Op::Sysctl { .. } | Op::Address { .. } => {
                self.fmt_namespace_setting(f)
            }
            Op::Bridge { .. }
            | Op::Veth { .. }
            | Op::Tun { .. }
            | Op::Wireguard { .. }
            | Op::HostLink { .. }
            | Op::Port { .. }
            | Op::Up { .. }
            | Op::LinkSet { .. } => self.fmt_link(f),
            Op::Vxlan { .. } => self.fmt_vxlan(f),
            Op::Route { .. }
            | Op::Seg6Encap { .. }
            | Op::Seg6Local { .. }
            | Op::Blackhole { .. }
            | Op::PairRoute { .. } => self.fmt_route(f),
            Op::LocalRuleAt { .. } | Op::Rule { .. } => self.fmt_rule(f),
            Op::Nftables { .. } | Op::Tc { .. } | Op::SteerByFlow { .. } => self.fmt_tool(f),
        }
    }
}

impl Op {
    /// A namespace, a sysctl, an address.
    fn fmt_namespace_setting(&self, f: &mut fmt::Formatter) -> fmt::Result {
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
            Op::Sysctl { ns, key, value } => {
                write!(f, "ip netns exec {ns} sysctl -qw {key}={value}")
            }
            Op::Address { ns, iface, addr } => {
                write!(f, "ip -n {ns} addr add {addr} dev {iface}")?;
                if addr.is_ipv6() {
                    write!(f, " nodad")?;
                }
                Ok(())
            }
            _ => unreachable!("not a namespace setting: {self:?}"),
        }
    }

    /// A device made, set up, or enslaved.
    fn fmt_link(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Op::Bridge { ns, name, mtu } => {
                write!(f, "ip -n {ns} link add {name} mtu {mtu} up type bridge")
            }
            Op::Veth {
                ns,
                name,
                peer_ns,
                peer_name,
                mtu,
            } => write!(
                f,
                "ip -n {ns} link add {name} mtu {mtu} up type veth peer name {peer_name} netns {peer_ns} mtu {mtu}"
            ),
            Op::Tun {
                ns,
                name,
                tap,
                single_queue,
            } => write!(
                f,
                "ip -n {ns} tuntap add dev {name} mode {}{}",
                if *tap { "tap" } else { "tun" },
                if *single_queue {
                    ""
                } else {
                    " multi_queue vnet_hdr"
                }
            ),
            Op::Wireguard { ns, name } => write!(f, "ip -n {ns} link add {name} type wireguard"),
            Op::HostLink {
                ns,
                name,
                host,
                attach,
                mtu,
            } => fmt_host_link(f, ns, name, host, *attach, *mtu),
            Op::Port { ns, iface, bridge } => {
                write!(f, "ip -n {ns} link set {iface} master {bridge}")
            }
            Op::Up { ns, iface } => write!(f, "ip -n {ns} link set {iface} up"),
            Op::LinkSet { ns, iface, mtu } => {
                write!(f, "ip -n {ns} link set {iface} mtu {mtu} up")
            }
            _ => unreachable!("not a link: {self:?}"),
        }
    }

    /// A route, as rtnetlink installs it (proto static).
    fn fmt_route(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
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
            Op::Seg6Encap {
                ns,
                to,
                segment,
                dev,
                table,
            } => write!(
                f,
                "ip -n {ns} route add {to} encap seg6 mode encap.red segs {segment} dev {dev} table {table} proto static"
            ),
            Op::Seg6Local {
                ns,
                sid,
                dev,
                table,
            } => write!(
                f,
                "ip -n {ns} -6 route add {sid}/128 encap seg6local action End.DX4 nh4 0.0.0.0 dev {dev} table {table} proto static"
            ),
            Op::Blackhole { ns, to } => {
                write!(f, "ip -n {ns} route add blackhole {to} proto static")
            }
            Op::PairRoute {
                ns,
                to,
                gate,
                dev,
                peer,
                table,
            } => write!(
                f,
                "ip -n {ns} neigh replace {gate} lladdr $(ip -n {ns} -br link show {peer} | awk '{{print $3}}') dev {dev} nud permanent; ip -n {ns} route add {to} via {gate} dev {dev} onlink table {table} proto static"
            ),
            _ => unreachable!("not a route: {self:?}"),
        }
    }

    /// A policy routing rule.
    fn fmt_rule(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Op::LocalRuleAt { ns, pref } => write!(
                f,
                "ip -n {ns} -6 rule add pref {pref} lookup local; ip -n {ns} -6 rule del pref 0 lookup local"
            ),
            Op::Rule {
                ns,
                v6,
                pref,
                iif,
                to,
                ipproto,
                fwmark,
                table,
            } => {
                let family = if *v6 { "-6" } else { "-4" };
                write!(f, "ip -n {ns} {family} rule add pref {pref}")?;
                if let Some(i) = iif {
                    write!(f, " iif {i}")?;
                }
                if let Some(t) = to {
                    write!(f, " to {t}")?;
                }
                if let Some(p) = ipproto {
                    write!(f, " ipproto {p}")?;
                }
                if let Some(m) = fwmark {
                    write!(f, " fwmark {m}")?;
                }
                write!(f, " lookup {table}")
            }
            _ => unreachable!("not a rule: {self:?}"),
        }
    }

    /// A program or sysfs write run inside the namespace.
    fn fmt_tool(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Op::Nftables { ns, ruleset } => {
                write!(f, "ip netns exec {ns} nft -f - <<'EOF'\n{ruleset}EOF")
            }
            Op::Tc { ns, batch } => {
                write!(f, "ip netns exec {ns} tc -batch - <<'EOF'\n{batch}EOF")
            }
            Op::SteerByFlow { ns, iface } => write!(
                f,
                "ip netns exec {ns} sh -c 'for q in /sys/class/net/{iface}/queues/rx-*; do echo ALL_CPUS_MASK > $q/rps_cpus; done'"
            ),
            _ => unreachable!("not a tool: {self:?}"),
        }
    }
}

impl Op {
    /// A VXLAN device made into a node's namespace.
    fn fmt_vxlan(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let Op::Vxlan {
            ns,
            name,
            vni,
            local,
            remote,
            port,
            underlay,
            mtu,
        } = self
        else {
            unreachable!("not a vxlan: {self:?}")
        };
        write!(
            f,
            "ip link add {name} netns {ns} mtu {mtu} type vxlan id {vni} local {local} remote {remote} dstport {port} nolearning"
        )?;
        if let Some(u) = underlay {
            write!(f, " dev {u}")?;
        }
        write!(f, "; ip -n {ns} link set {name} up")
    }
}

/// A device made from a host interface, or the interface moved.
fn fmt_host_link(
    f: &mut fmt::Formatter,
    ns: &str,
    name: &str,
    host: &str,
    attach: HostAttach,
    mtu: u32,
) -> fmt::Result {
    let kind = match attach {
        HostAttach::Macvlan => "macvlan mode bridge".to_string(),
        HostAttach::Ipvlan => "ipvlan mode l2".to_string(),
        HostAttach::Vlan(id) => format!("vlan id {id}"),
        HostAttach::Move => {
            return write!(
                f,
                "ip link set {host} netns {ns}; ip -n {ns} link set {host} name {name} mtu {mtu} up"
            );
        }
    };
    write!(
        f,
        "ip link add link {host} name {name} netns {ns} mtu {mtu} type {kind}; ip -n {ns} link set {name} up"
    )
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub lab: String,
    /// The host whose part of a lab placed on several hosts this plan
    /// builds; None: the whole lab, on this machine.
    pub host: Option<String>,
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
        let h = |attach| Op::HostLink {
            ns: "l-a".into(),
            name: "eth0".into(),
            host: "enp3s0".into(),
            attach,
            mtu: 1500,
        };
        assert_eq!(
            h(HostAttach::Macvlan).to_string(),
            "ip link add link enp3s0 name eth0 netns l-a mtu 1500 type macvlan mode bridge; ip -n l-a link set eth0 up"
        );
        assert_eq!(
            h(HostAttach::Ipvlan).to_string(),
            "ip link add link enp3s0 name eth0 netns l-a mtu 1500 type ipvlan mode l2; ip -n l-a link set eth0 up"
        );
        assert_eq!(
            h(HostAttach::Vlan(11)).to_string(),
            "ip link add link enp3s0 name eth0 netns l-a mtu 1500 type vlan id 11; ip -n l-a link set eth0 up"
        );
        assert_eq!(
            h(HostAttach::Move).to_string(),
            "ip link set enp3s0 netns l-a; ip -n l-a link set enp3s0 name eth0 mtu 1500 up"
        );
        assert_eq!(h(HostAttach::Move).phase(), Phase::Links);
        let x = Op::Vxlan {
            ns: "l-a".into(),
            name: "eth1".into(),
            vni: 100,
            local: "198.18.230.1".parse().unwrap(),
            remote: "198.18.230.2".parse().unwrap(),
            port: VXLAN_PORT,
            underlay: Some("eth0".into()),
            mtu: 1450,
        };
        assert_eq!(
            x.to_string(),
            "ip link add eth1 netns l-a mtu 1450 type vxlan id 100 local 198.18.230.1 remote 198.18.230.2 dstport 4789 nolearning dev eth0; ip -n l-a link set eth1 up"
        );
        assert_eq!((x.phase(), x.ns()), (Phase::Links, "l-a"));
        let w = Op::Wireguard {
            ns: "l-a".into(),
            name: "wg-x".into(),
        };
        assert_eq!(w.to_string(), "ip -n l-a link add wg-x type wireguard");
        assert_eq!((w.phase(), w.ns()), (Phase::Links, "l-a"));
        let j = serde_json::to_string(&HostAttach::Vlan(11)).unwrap();
        assert_eq!(
            serde_json::from_str::<HostAttach>(&j).unwrap(),
            HostAttach::Vlan(11)
        );
        assert!(
            Phase::Namespaces < Phase::Links
                && Phase::Links < Phase::Sysctls
                && Phase::Ports < Phase::Addresses
                && Phase::Addresses < Phase::Routes
        );
    }
}
