//! What the kernel that will build a lab can do, as far as resolving a topology
//! depends on it: `datapath = "auto"` (a DS-Lite endpoint's default) takes the
//! kernel's softwire where the kernel has SRv6 lightweight tunnels and
//! tunbench's own otherwise, and an explicit `datapath = "kernel"` without them
//! is refused where the file says it; so is an IKEv2 tunnel's
//! `datapath = "kernel"` on a kernel without ESP (xfrm). Likewise a link's
//! `shaper = "auto"` takes CAKE where the kernel has it and TBF otherwise,
//! and `shaper = "cake"` without it is refused.
//!
//! The topology layer never looks at the machine: the layer that does (the lab,
//! the command line) passes these facts to the parse; `KernelFacts::FULL`
//! stands for a kernel that has everything (unit tests, `validate --file-only`).

/// The kernel's abilities a topology's resolution depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelFacts {
    /// seg6 encap.red and seg6local End.DX4 routes (CONFIG_IPV6_SEG6_LWTUNNEL):
    /// the kernel DS-Lite datapath.
    pub seg6_lwtunnel: bool,
    /// xfrm ESP with AES-GCM (CONFIG_XFRM_USER, CONFIG_INET_ESP): strongSwan's
    /// kernel datapath for IKEv2.
    pub xfrm_esp: bool,
    /// WireGuard devices (CONFIG_WIREGUARD): `implementation = "kernel"`.
    pub wireguard: bool,
    /// The CAKE qdisc (CONFIG_NET_SCH_CAKE): a link's `shaper = "cake"`.
    pub cake: bool,
}

impl KernelFacts {
    /// A kernel with everything a lab may ask for.
    pub const FULL: KernelFacts = KernelFacts {
        seg6_lwtunnel: true,
        xfrm_esp: true,
        wireguard: true,
        cake: true,
    };
}

/// What the kernel DS-Lite datapath is made of, named as `tunbench doctor`
/// and every refusal name it.
pub const SEG6: netns::features::Feature = netns::features::Feature::Seg6;

/// What strongSwan's kernel datapath is made of.
pub const XFRM: netns::features::Feature = netns::features::Feature::Xfrm;
/// What a kernel WireGuard peer is made of.
pub const WIREGUARD: netns::features::Feature = netns::features::Feature::Wireguard;

/// What `shaper = "cake"` needs, named as `tunbench doctor` names it.
pub const CAKE: netns::features::Feature = netns::features::Feature::TcCake;
