//! Datapaths and links end to end, as root in namespaces: the shared TUN
//! driver, routers' slow paths and device models, host limits, terminations,
//! ordering, per-packet overhead, shaping and the link relay's impairments.

#[path = "../common/mod.rs"]
mod common;

mod driver;
mod driver_measure;
mod driver_stall;
mod host_limits;
mod impair;
mod link_relay;
mod ordering;
mod overhead;
mod router;
mod router_model;
mod support;
mod terminations;
mod tun_rs;
mod wire;
mod wire_tunnels;
