//! What in tunbench needs each kernel feature, and what it does without it:
//! one row per `netns::features::Feature` (the match is exhaustive, so a new
//! feature cannot go unexplained).

use netns::HostAttach;
use netns::features::{Feature, needed_to_attach};

/// Whether every lab needs it, what needs it, what tunbench does without it.
pub(super) fn role(f: Feature) -> (bool, &'static str, String) {
    let (required, needed_by, without) = match f {
        Feature::Namespaces => (
            true,
            "every lab: each node is a network namespace",
            "no lab can come up",
        ),
        Feature::Veth => (
            true,
            "every lab: each link is a veth pair",
            "no lab can come up",
        ),
        Feature::Bridge => (
            false,
            "switches (`kind = \"switch\"`)",
            "`up` of a lab with a switch fails at the bridge, naming `bridge`, and removes what it built",
        ),
        Feature::Macvlan => {
            return (
                false,
                "a host interface as a macvlan (`host = \"IFACE\"`, the default form)",
                host_link(HostAttach::Macvlan),
            );
        }
        Feature::Vlan => {
            return (
                false,
                "`vlan = N` on a host interface (one NIC, several LANs through a managed switch)",
                host_link(HostAttach::Vlan(1)),
            );
        }
        Feature::Ipvlan => {
            return (
                false,
                "`mode = \"ipvlan\"` on a host interface",
                host_link(HostAttach::Ipvlan),
            );
        }
        Feature::Vxlan => (
            false,
            "links between hosts of a lab placed on several hosts (`[hosts]`): `up --host` makes a VXLAN end for each",
            "`up --host` of a part with a link to another host is refused before anything is built, naming `vxlan`; a lab on one machine runs",
        ),
        Feature::Tun => (
            false,
            "every userspace datapath: DS-Lite, WireGuard, ESP and L2TP ends, userspace routers, impaired links' relays",
            "`up` of such a lab fails at the TUN, naming `tun`, and removes what it built; labs of kernel datapaths only run",
        ),
        Feature::TunUso => (
            false,
            "UDP through a userspace datapath, as super-packets",
            "TCP offloads only: UDP crosses the TUN packet by packet (more CPU per packet)",
        ),
        Feature::Seg6 => (
            false,
            "DS-Lite's kernel datapath (seg6 encap.red at the B4, seg6local End.DX4 at the AFTR)",
            "`datapath = \"auto\"` (the default) runs the softwire in tunbench's userspace datapath, and `validate` says so; `datapath = \"kernel\"` is refused",
        ),
        Feature::NftNat => (
            false,
            "DS-Lite's kernel datapath (the AFTR's NAT44)",
            "`up` of a DS-Lite lab on the kernel datapath fails naming nft's error; `datapath = \"userspace\"` has its own NAT44",
        ),
        Feature::TcTbf => (
            false,
            "`rate` impairments (TBF on the sending veth end)",
            "`up` or `impair` with a rate fails naming tc's error",
        ),
        Feature::TcCake => (
            false,
            "`shaper = \"cake\"` on a link's `rate` (CAKE on the sending veth end)",
            "`validate` and `up` refuse `shaper = \"cake\"`, naming `tc-cake`; `shaper = \"auto\"` and the default shape with TBF",
        ),
        Feature::TcRedirect => (
            false,
            "impaired links (their relay) and userspace routers (their slow path)",
            "`up` of such a lab fails naming tc's error, and removes what it built",
        ),
        Feature::UdpGso => (
            false,
            "sending UDP: measurement streams and UDP tunnels (WireGuard, ESP in UDP, L2TP)",
            "one datagram per message, batched by sendmmsg: the same traffic for more CPU",
        ),
        Feature::UdpGro => (
            false,
            "receiving UDP: measurement streams and UDP tunnels",
            "one datagram per read, batched by recvmmsg: the same traffic for more CPU",
        ),
        Feature::Xfrm => (
            false,
            "IKEv2 tunnels on strongSwan's kernel datapath (`datapath = \"kernel\"`: the kernel's ESP, installed by charon)",
            "`validate` and `up` refuse `datapath = \"kernel\"`, naming `xfrm`; `datapath = \"libipsec\"` (the default) does ESP in charon, in userspace",
        ),
        Feature::Wireguard => (
            false,
            "WireGuard peers with `implementation = \"kernel\"`",
            "`validate` and `up` refuse such a peer naming `wireguard`; tunbench's own implementation (the default), wireguard-go and boringtun run on a TUN",
        ),
    };
    (required, needed_by, without.to_string())
}

/// What `validate` and `up` do with a host link the kernel cannot make: the
/// refusal's own advice (netns::features::needed_to_attach).
fn host_link(attach: HostAttach) -> String {
    match needed_to_attach(attach) {
        Some((f, instead)) => format!(
            "`validate` and `up` refuse that link, naming `{}`; {instead}",
            f.name()
        ),
        None => "nothing changes".into(),
    }
}
