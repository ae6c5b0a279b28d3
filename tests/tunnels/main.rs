//! Tunnels end to end, as root in namespaces: WireGuard, ESP, L2TP/IPsec,
//! IKEv2 (strongSwan), DS-Lite, and tunnels to peers outside the lab.

#[path = "../common/mod.rs"]
mod common;

mod dslite;
mod esp;
mod external_tunnels;
mod ikev2;
mod l2tp;
mod wireguard;
