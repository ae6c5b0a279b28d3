//! What this kernel can do that a lab may ask for, found by trying it where
//! nothing can see: in a network namespace of a thread's own (unshared, never
//! named), which the kernel frees when the thread ends. Nothing in the host's
//! namespace changes.
//!
//! Kernels differ in what they were built with. A lab that needs a missing
//! piece is refused naming it the way `tunbench doctor` names it (one table,
//! [`Feature`]), not with a bare errno: before anything is built where the
//! piece can be known up front (seg6 for DS-Lite, the drivers of host links),
//! else where the kernel refuses it.

mod links;
mod sandbox;
mod seg6;
mod tools;
mod tun;
mod udp;
mod xfrm;

pub use sandbox::in_throwaway_namespace;

use std::sync::OnceLock;

/// One thing a lab may need from the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Feature {
    Namespaces,
    Veth,
    Bridge,
    Macvlan,
    Vlan,
    Ipvlan,
    Vxlan,
    Tun,
    TunUso,
    Seg6,
    NftNat,
    TcTbf,
    TcCake,
    TcRedirect,
    UdpGso,
    UdpGro,
    Xfrm,
    Wireguard,
}

/// What trying a feature found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// The kernel did it.
    Present,
    /// The kernel refused it as something it does not have; what it said.
    Absent(String),
    /// The probe could not tell (no privileges, a program missing); why.
    Unknown(String),
}

/// Where every refusal for want of a feature sends the reader.
pub const SEE_DOCTOR: &str = "`tunbench doctor` lists what this kernel offers";

impl Feature {
    pub const ALL: [Feature; 18] = [
        Feature::Namespaces,
        Feature::Veth,
        Feature::Bridge,
        Feature::Macvlan,
        Feature::Vlan,
        Feature::Ipvlan,
        Feature::Vxlan,
        Feature::Tun,
        Feature::TunUso,
        Feature::Seg6,
        Feature::NftNat,
        Feature::TcTbf,
        Feature::TcCake,
        Feature::TcRedirect,
        Feature::UdpGso,
        Feature::UdpGro,
        Feature::Xfrm,
        Feature::Wireguard,
    ];

    /// The feature's name in `tunbench doctor` and in every refusal.
    pub fn name(self) -> &'static str {
        self.row().0
    }

    /// What it is, in a few words.
    pub fn what(self) -> &'static str {
        self.row().1
    }

    /// The kernel build option(s) that give it, or the release that has it.
    pub fn requires(self) -> &'static str {
        self.row().2
    }

    /// (name, what, requires).
    fn row(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Feature::Namespaces => ("netns", "network namespaces", "CONFIG_NET_NS"),
            Feature::Veth => ("veth", "veth pairs", "CONFIG_VETH"),
            Feature::Bridge => ("bridge", "Linux bridges", "CONFIG_BRIDGE"),
            Feature::Macvlan => ("macvlan", "macvlan devices", "CONFIG_MACVLAN"),
            Feature::Vlan => ("vlan", "802.1Q VLAN devices", "CONFIG_VLAN_8021Q"),
            Feature::Ipvlan => ("ipvlan", "ipvlan devices", "CONFIG_IPVLAN"),
            Feature::Vxlan => ("vxlan", "VXLAN devices", "CONFIG_VXLAN"),
            Feature::Tun => (
                "tun",
                "multi-queue TUN/TAP with virtio-net headers, TSO and checksum offload",
                "CONFIG_TUN",
            ),
            Feature::TunUso => (
                "tun-uso",
                "UDP segmentation offload on TUN (TUN_F_USO4/6)",
                "Linux 6.2",
            ),
            Feature::Seg6 => (
                "seg6",
                "SRv6 lightweight tunnels: seg6 and seg6local routes",
                "CONFIG_IPV6_SEG6_LWTUNNEL",
            ),
            Feature::NftNat => (
                "nft-nat",
                "nftables NAT: snat and masquerade",
                "CONFIG_NF_TABLES, CONFIG_NFT_NAT",
            ),
            Feature::TcTbf => ("tc-tbf", "the TBF qdisc", "CONFIG_NET_SCH_TBF"),
            Feature::TcCake => ("tc-cake", "the CAKE qdisc", "CONFIG_NET_SCH_CAKE"),
            Feature::TcRedirect => (
                "tc-redirect",
                "tc clsact, u32 filters and mirred redirects",
                "CONFIG_NET_SCH_INGRESS, CONFIG_NET_CLS_U32, CONFIG_NET_ACT_MIRRED",
            ),
            Feature::UdpGso => (
                "udp-gso",
                "UDP segmentation offload (UDP_SEGMENT)",
                "Linux 4.18",
            ),
            Feature::UdpGro => ("udp-gro", "UDP receive offload (UDP_GRO)", "Linux 5.0"),
            Feature::Xfrm => (
                "xfrm",
                "kernel ESP: xfrm states and policies, AES-GCM (rfc4106)",
                "CONFIG_XFRM_USER, CONFIG_INET_ESP, CONFIG_INET6_ESP, CONFIG_CRYPTO_GCM",
            ),
            Feature::Wireguard => (
                "wireguard",
                "the kernel's WireGuard devices",
                "CONFIG_WIREGUARD (Linux 5.6)",
            ),
        }
    }

    /// "the kernel lacks `vlan` (802.1Q VLAN devices, CONFIG_VLAN_8021Q)".
    pub fn lacking(self) -> String {
        format!(
            "the kernel lacks `{}` ({}, {})",
            self.name(),
            self.what(),
            self.requires()
        )
    }

    /// A refusal for want of this feature: what is missing, what to do
    /// instead, and where to see the rest.
    pub fn refusal(self, instead: &str) -> String {
        format!("{}; {instead}; {SEE_DOCTOR}", self.lacking())
    }

    /// The same with nothing to do instead.
    pub fn unavailable(self) -> String {
        format!("{}; {SEE_DOCTOR}", self.lacking())
    }

    /// Tries the feature now, in a throwaway namespace.
    pub fn probe(self) -> Found {
        match self {
            Feature::Namespaces => sandbox::in_throwaway_namespace(|| Found::Present),
            Feature::Veth
            | Feature::Bridge
            | Feature::Macvlan
            | Feature::Vlan
            | Feature::Ipvlan
            | Feature::Vxlan
            | Feature::Wireguard => links::probe(self),
            Feature::Tun => tun::probe_tun(),
            Feature::TunUso => tun::probe_uso(),
            Feature::Seg6 => seg6::probe(),
            Feature::NftNat => tools::probe_nft_nat(),
            Feature::TcTbf => tools::probe_tbf(),
            Feature::TcCake => tools::probe_cake(),
            Feature::TcRedirect => tools::probe_redirect(),
            Feature::UdpGso => udp::probe_gso(),
            Feature::UdpGro => udp::probe_gro(),
            Feature::Xfrm => xfrm::probe(),
        }
    }

    /// What the probe found, tried once per process.
    pub fn found(self) -> &'static Found {
        static FOUND: [OnceLock<Found>; Feature::ALL.len()] =
            [const { OnceLock::new() }; Feature::ALL.len()];
        FOUND[self as usize].get_or_init(|| self.probe())
    }

    /// Whether this kernel has it for certain (probed once per process).
    pub fn available(self) -> bool {
        *self.found() == Found::Present
    }

    /// Whether this kernel said it has it not: a probe that could not tell
    /// (no privileges) is not a refusal.
    pub fn known_absent(self) -> bool {
        matches!(self.found(), Found::Absent(_))
    }
}

/// The feature a node's device made from a host interface needs, and what the
/// topology can do without it.
pub fn needed_to_attach(attach: crate::HostAttach) -> Option<(Feature, &'static str)> {
    use crate::HostAttach;
    match attach {
        HostAttach::Macvlan => Some((
            Feature::Macvlan,
            "move the interface into the lab instead (`move = true`)",
        )),
        HostAttach::Ipvlan => Some((
            Feature::Ipvlan,
            "use a macvlan (`mode = \"macvlan\"`) or move the interface (`move = true`)",
        )),
        HostAttach::Vlan(_) => Some((
            Feature::Vlan,
            "give each LAN a host interface of its own (a macvlan or `move = true`)",
        )),
        HostAttach::Move => None,
    }
}

/// Every feature tried at once, each on a thread of its own: the slowest
/// probe's time, not their sum.
pub fn probe_all() -> Vec<(Feature, Found)> {
    std::thread::scope(|s| {
        let running: Vec<_> = Feature::ALL
            .iter()
            .map(|&f| (f, s.spawn(move || f.found().clone())))
            .collect();
        running
            .into_iter()
            .map(|(f, h)| {
                let found = h
                    .join()
                    .unwrap_or_else(|_| Found::Unknown("the probe panicked".into()));
                (f, found)
            })
            .collect()
    })
}

/// Whether the kernel does ESP itself (xfrm with AES-GCM): strongSwan's
/// kernel datapath. Probed once per process.
pub fn xfrm_esp() -> bool {
    Feature::Xfrm.available()
}

/// Whether the CAKE qdisc can shape a veth end, as `shaper = "cake"` on a
/// link's rate asks. Probed once per process.
pub fn cake() -> bool {
    Feature::TcCake.available()
}

/// Whether routes with seg6 (encap.red) and seg6local (End.DX4) encapsulation
/// can be made: the kernel DS-Lite datapath's B4 and AFTR. Probed once per
/// process.
pub fn seg6_lwtunnel() -> bool {
    Feature::Seg6.available()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_in_table_order() {
        let mut names: Vec<&str> = Feature::ALL.iter().map(|f| f.name()).collect();
        for (i, f) in Feature::ALL.iter().enumerate() {
            assert_eq!(*f as usize, i, "{f:?} is not at its own index in ALL");
        }
        names.sort();
        names.dedup();
        assert_eq!(names.len(), Feature::ALL.len());
    }

    #[test]
    fn a_refusal_names_the_feature_its_option_and_doctor() {
        let r = Feature::Vlan.refusal("give each LAN its own host interface");
        assert_eq!(
            r,
            "the kernel lacks `vlan` (802.1Q VLAN devices, CONFIG_VLAN_8021Q); give each LAN its own host interface; `tunbench doctor` lists what this kernel offers"
        );
    }
}
