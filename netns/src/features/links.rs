//! Device kinds (WireGuard's among them): each made once in a throwaway namespace, the ones that sit
//! on an interface (macvlan, 802.1Q, ipvlan) on a veth pair made first, as a
//! lab makes them on a host interface.

use super::Feature;
use super::Found;
use super::sandbox::{VETH_INDEX, in_throwaway_namespace, verdict, veth_pair, with_netlink};
use netlink_packet_route::link::{IpVlanMode, LinkMessage, MacVlanMode};
use rtnetlink::{
    Handle, LinkBridge, LinkIpVlan, LinkMacVlan, LinkVeth, LinkVlan, LinkVxlan, LinkWireguard,
};

/// The name of the device a probe makes.
const MADE: &str = "probed";
/// An 802.1Q id and a VXLAN network identifier for the probes.
const VLAN_ID: u16 = 5;
const VNI: u32 = 42;
const VXLAN_PORT: u16 = 4789;

/// Makes one device of `kind` (a device kind of [`Feature`]).
pub(super) fn probe(kind: Feature) -> Found {
    in_throwaway_namespace(move || with_netlink(move |h| async move { make(&h, kind).await }))
}

async fn make(h: &Handle, kind: Feature) -> Found {
    let m = match kind {
        Feature::Veth => LinkVeth::new(MADE, "probed-peer").build(),
        Feature::Bridge => LinkBridge::new(MADE).build(),
        Feature::Vxlan => LinkVxlan::new(MADE, VNI).port(VXLAN_PORT).build(),
        Feature::Wireguard => LinkWireguard::new(MADE).build(),
        Feature::Macvlan | Feature::Vlan | Feature::Ipvlan => {
            if let Err(f) = veth_pair(h).await {
                return f;
            }
            on_interface(kind, VETH_INDEX)
        }
        other => return Found::Unknown(format!("{} is not a device kind", other.name())),
    };
    match h.link().add(m).execute().await {
        Ok(()) => Found::Present,
        Err(e) => verdict(e),
    }
}

/// A device of `kind` on interface `lower`, as a lab makes one on a host
/// interface (netns::apply::links).
fn on_interface(kind: Feature, lower: u32) -> LinkMessage {
    match kind {
        Feature::Macvlan => LinkMacVlan::new(MADE, lower, MacVlanMode::Bridge).build(),
        Feature::Ipvlan => LinkIpVlan::new(MADE, lower, IpVlanMode::L2).build(),
        _ => LinkVlan::new(MADE, lower, VLAN_ID).build(),
    }
}
