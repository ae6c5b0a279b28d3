//! One end of an ESP tunnel (tunnel mode) or of an L2TP tunnel (L2TP/PPP in
//! UDP 1701, bare or in ESP transport mode) as a process: `tunbench datapath`,
//! started by `up` in the end's namespace, runs the codec on the shared
//! driver with the lab's SA keys.

use crate::codec::esp::{Encap, Esp, EspConfig, KeyMaterial};
use crate::codec::esp_transport;
use crate::codec::l2tp::{L2tp, L2tpConfig};
use crate::codec::terminate::Terminated;
use crate::driver::{DriverConfig, Transport};
use crate::endpoint::{Who, serve_with};
use crate::keys::LabKeys;
use crate::plan::datapath::Job;
use crate::topology::Topology;
use crate::topology::tunnel::esp::EspTunnel;
use crate::topology::tunnel::keys::Sas;
use crate::topology::tunnel::l2tp::L2tpTunnel;
use crate::topology::tunnel::overlay::Overlay;
use crate::topology::tunnel::{Role, Tunnel};
use anyhow::{Context, Result};
use std::net::SocketAddr;

/// The SA pair of end `i` (out to the other end, in to this one).
fn sa_config(
    lab: &str,
    t: &Topology,
    tun: &Tunnel,
    w: &Overlay,
    sas: &Sas,
    i: usize,
) -> Result<EspConfig> {
    let j = 1 - i;
    let keys = LabKeys::load(lab)?;
    let name = |k: usize| &t.nodes[w.peers[k].node].name;
    Ok(EspConfig {
        peer: SocketAddr::new(w.peers[j].endpoint, w.peers[j].port),
        encap: if sas.udp { Encap::Udp } else { Encap::Raw },
        out_spi: sas.spis[j],
        out_key: KeyMaterial(keys.sa(&tun.name, name(j))?),
        in_spi: sas.spis[i],
        in_key: KeyMaterial(keys.sa(&tun.name, name(i))?),
        window: sas.window,
        allowed: w.allowed_for(i, j),
    })
}

/// End `i`'s socket: UDP on its peer port, or raw protocol 50 (port 0).
fn transport(w: &Overlay, i: usize) -> Transport {
    let p = &w.peers[i];
    if p.port == 0 {
        Transport::RawIp {
            local: p.endpoint,
            protocol: 50,
        }
    } else {
        Transport::Udp {
            bind: SocketAddr::new(p.endpoint, p.port),
        }
    }
}

/// End `i` of a point-to-point tunnel of lab `lab`.
struct End<'a> {
    lab: &'a str,
    t: &'a Topology,
    tun: &'a Tunnel,
    w: &'a Overlay,
    i: usize,
}

/// Runs `codec` for an end until the lab stops it, passing on what the
/// codec has to say (`notes`) to the log.
fn serve<C: crate::codec::Codec + 'static>(
    end: End,
    role: &str,
    codec: C,
    mut notes: impl FnMut(&mut C) -> Vec<String>,
) -> Result<()> {
    let End { lab, t, tun, w, i } = end;
    let node = t.nodes[w.peers[i].node].name.clone();
    let model = crate::plan::datapath::termination(t, tun, Role::Peer(i));
    if let Some(m) = model {
        crate::driver::process_log::line(&format!(
            "tunbench datapath: {node} terminates {} with profile {}'s ceilings ({})",
            tun.name,
            m.profile,
            crate::codec::profile::describe_ceilings(&m.ceilings)
        ));
    }
    let codec = Terminated::new(codec, model, std::time::Instant::now());
    let mut config = DriverConfig::new(tun.tun_name(), transport(w, i));
    config.queues = w.queues as usize;
    let stats_path = crate::plan::datapath::stats_path(lab, &Job::Tunnel(tun.name.clone()), &node);
    let who = Who {
        tunnel: &tun.name,
        node: &node,
        role,
    };
    serve_with(config, codec, &stats_path, who, |d| {
        for n in d.with_codec(|c| notes(c.inner_mut())) {
            crate::driver::process_log::line(&format!("tunbench datapath: {n}"));
        }
    })
    .with_context(|| format!("{role} end {node} of tunnel {}", tun.name))?;
    Ok(())
}

pub fn run(lab: &str, t: &Topology, tun: &Tunnel, e: &EspTunnel, i: usize) -> Result<()> {
    let w = &e.overlay;
    let codec = Esp::new(sa_config(lab, t, tun, w, &e.sas, i)?);
    let end = End { lab, t, tun, w, i };
    serve(end, "esp", codec, Esp::take_notes)
}

pub fn run_l2tp(lab: &str, t: &Topology, tun: &Tunnel, l: &L2tpTunnel, i: usize) -> Result<()> {
    let w = &l.overlay;
    let j = 1 - i;
    let l2tp = L2tp::new(L2tpConfig {
        peer: SocketAddr::new(w.peers[j].endpoint, crate::wire::l2tp::PORT),
        peer_tunnel: l.ids[j].0,
        peer_session: l.ids[j].1,
        tunnel: l.ids[i].0,
        session: l.ids[i].1,
        sequence: l.sequence,
        allowed: w.allowed_for(i, j),
    });
    let end = End { lab, t, tun, w, i };
    match &l.ipsec {
        None => serve(end, "l2tp", l2tp, |_| Vec::new()),
        Some(sas) => {
            let codec = esp_transport::Transport::new(
                &sa_config(lab, t, tun, w, sas, i)?,
                w.peers[i].endpoint,
                crate::wire::l2tp::PORT,
                l2tp,
            );
            serve(end, "l2tp/ipsec", codec, |c| c.take_notes())
        }
    }
}
