//! One end of an ESP tunnel as a process (`tunbench datapath`, started by `up`
//! in the end's namespace): the ESP codec on the shared driver, over UDP 4500
//! or a raw protocol-50 socket, with the lab's SA keys.

use super::driver::{DriverConfig, Transport};
use super::endpoint::{Who, serve_with};
use super::esp::{Encap, Esp, EspConfig, KeyMaterial};
use crate::datapath::Job;
use crate::topology::Topology;
use crate::topology::esp::EspTunnel;
use crate::topology::tunnel::Tunnel;
use crate::wgkey::LabKeys;
use anyhow::{Context, Result};
use std::net::SocketAddr;

pub fn run(lab: &str, t: &Topology, tun: &Tunnel, e: &EspTunnel, i: usize) -> Result<()> {
    let w = &e.overlay;
    let j = 1 - i;
    let node = t.nodes[w.peers[i].node].name.clone();
    let other = t.nodes[w.peers[j].node].name.clone();
    let keys = LabKeys::load(lab)?;
    let encap = if e.udp { Encap::Udp } else { Encap::Raw };
    let codec = Esp::new(EspConfig {
        peer: SocketAddr::new(w.peers[j].endpoint, w.peers[j].port),
        encap,
        out_spi: e.spis[j],
        out_key: KeyMaterial(keys.sa(&tun.name, &other)?),
        in_spi: e.spis[i],
        in_key: KeyMaterial(keys.sa(&tun.name, &node)?),
        window: e.window,
        allowed: w.allowed_for(i, j),
    });
    let local = w.peers[i].endpoint;
    let transport = if e.udp {
        Transport::Udp {
            bind: SocketAddr::new(local, w.peers[i].port),
        }
    } else {
        Transport::RawIp {
            local,
            protocol: 50,
        }
    };
    let mut config = DriverConfig::new(tun.tun_name(), transport);
    config.queues = w.queues as usize;
    let stats_path = crate::datapath::stats_path(lab, &Job::Tunnel(tun.name.clone()), &node);
    let who = Who {
        tunnel: &tun.name,
        node: &node,
        role: "esp",
    };
    serve_with(config, codec, &stats_path, who, |d| {
        for n in d.with_codec(|c| c.take_notes()) {
            eprintln!("tunbench datapath: {n}");
        }
    })
    .with_context(|| format!("ESP end {node} of tunnel {}", tun.name))?;
    Ok(())
}
