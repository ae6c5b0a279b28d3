//! One WireGuard peer of a lab as a process (`tunbench datapath`, started by
//! `up` in the peer's namespace): tunbench's codec on the shared driver, an
//! external implementation (wireguard-go, boringtun-cli) that this process
//! starts, configures through its UAPI socket, watches and stops, or the
//! kernel's device, which it configures over netlink and watches.
//!
//! Either way it keeps two files in the lab's state: the stats file (`up`
//! waits for it) and `peers-TUNNEL-NODE.json`, which `tunbench status` shows
//! like `wg show`.

use crate::codec::wireguard::{PeerConfig, PeerStatus, WireGuard, WireGuardConfig};
use crate::driver::{DriverConfig, Transport};
use crate::endpoint::{Who, serve_with, write_json};
use crate::keys::LabKeys;
use crate::plan::datapath::Job;
use crate::topology::Topology;
use crate::topology::tunnel::Tunnel;
use crate::topology::tunnel::implementation::Implementation;
use crate::topology::tunnel::overlay::Overlay;
use crate::vocab::keys::{public_of, to_base64};
use anyhow::{Context, Result};
use boringtun::x25519::{PublicKey, StaticSecret};
use std::net::SocketAddr;
use std::path::PathBuf;

/// What `peers-TUNNEL-NODE.json` holds.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct PeersFile {
    pub tunnel: String,
    pub node: String,
    pub implementation: String,
    pub public_key: String,
    pub listen: SocketAddr,
    pub peers: Vec<PeerStatus>,
}

pub fn peers_path(lab: &str, tunnel: &str, node: &str) -> PathBuf {
    netns::state::LabState::dir(lab).join(format!("peers-{tunnel}-{node}.json"))
}

/// The peers file of every WireGuard endpoint of a lab.
pub fn peers_of(lab: &str) -> Vec<PeersFile> {
    crate::endpoint::state_files(lab, "peers-")
        .iter()
        .filter_map(|f| serde_json::from_str(&std::fs::read_to_string(f).ok()?).ok())
        .collect()
}

/// `wg show` for one endpoint, indented for `tunbench status`.
pub fn describe(f: &PeersFile) -> String {
    let mut s = format!(
        "  wireguard {} on {} ({}): public key {}, listening on {}\n",
        f.tunnel, f.node, f.implementation, f.public_key, f.listen
    );
    for p in &f.peers {
        let hs = match p.latest_handshake_secs {
            Some(t) => format!("{t:.0} s ago"),
            None => "never".into(),
        };
        let ips: Vec<String> = p.allowed_ips.iter().map(|n| n.to_string()).collect();
        s += &format!(
            "    peer {} ({}): endpoint {}, allowed ips {}, latest handshake {hs}, transfer {} B received, {} B sent\n",
            p.name,
            p.public_key,
            p.endpoint.map_or("(none)".to_string(), |e| e.to_string()),
            ips.join(", "),
            p.rx_bytes,
            p.tx_bytes
        );
    }
    s
}

/// The configuration peer `i` runs with: its key, and per neighbour the key,
/// endpoint and allowed IPs.
pub struct PeerSetup {
    pub private: [u8; 32],
    pub listen: SocketAddr,
    pub peers: Vec<PeerConfig>,
}

pub fn setup(
    t: &Topology,
    tun: &Tunnel,
    w: &Overlay,
    i: usize,
    keys: &LabKeys,
) -> Result<PeerSetup> {
    let me = &w.peers[i];
    let private = keys.private(&tun.name, &t.nodes[me.node].name)?;
    let preshared = keys.preshared(&tun.name);
    let mut peers = Vec::new();
    for j in w.neighbours(i) {
        let name = t.nodes[w.peers[j].node].name.clone();
        let public = match w.peers[j].public_key {
            // A device outside the lab, given by its public key.
            Some(k) => k,
            None => public_of(&keys.private(&tun.name, &name)?),
        };
        peers.push(PeerConfig {
            name,
            public: PublicKey::from(public),
            preshared,
            endpoint: Some(w.endpoint_of(j)),
            allowed_ips: w.allowed_for(i, j),
            keepalive: w.keepalive,
        });
    }
    Ok(PeerSetup {
        private,
        listen: w.endpoint_of(i),
        peers,
    })
}

pub fn run(lab: &str, t: &Topology, tun: &Tunnel, w: &Overlay, i: usize) -> Result<()> {
    let node = t.nodes[w.peers[i].node].name.clone();
    let keys = LabKeys::load(lab)?;
    let s = setup(t, tun, w, i, &keys)?;
    let stats_path = crate::plan::datapath::stats_path(lab, &Job::Tunnel(tun.name.clone()), &node);
    let peers_path = peers_path(lab, &tun.name, &node);
    let imp = w.peers[i].implementation;
    let mut file = PeersFile {
        tunnel: tun.name.clone(),
        node: node.clone(),
        implementation: imp.as_str().to_string(),
        public_key: to_base64(&public_of(&s.private)),
        listen: s.listen,
        peers: Vec::new(),
    };
    if imp == Implementation::Kernel {
        return crate::endpoint::wg_kernel::run(tun, &s, &stats_path, &mut |peers| {
            file.peers = peers;
            write_json(&peers_path, &file);
        });
    }
    if imp != Implementation::Tunbench {
        return crate::endpoint::wg_external::run(imp, tun, w, &s, &stats_path, &mut |peers| {
            file.peers = peers;
            write_json(&peers_path, &file);
        });
    }
    let mut config = DriverConfig::new(tun.tun_name(), Transport::Udp { bind: s.listen });
    config.queues = w.queues as usize;
    let codec = WireGuard::new(WireGuardConfig {
        private: StaticSecret::from(s.private),
        peers: s.peers,
    });
    let model = crate::plan::datapath::termination(t, tun, crate::topology::tunnel::Role::Peer(i));
    if let Some(m) = model {
        crate::driver::process_log::line(&format!(
            "tunbench datapath: {node} terminates {} with profile {}'s ceilings ({})",
            tun.name,
            m.profile,
            crate::codec::profile::describe_ceilings(&m.ceilings)
        ));
    }
    let codec = crate::codec::terminate::Terminated::new(codec, model, std::time::Instant::now());
    let who = Who {
        tunnel: &tun.name,
        node: &node,
        role: "peer",
    };
    serve_with(config, codec, &stats_path, who, |d| {
        let (notes, status) = d.with_codec(|c| {
            let c = c.inner_mut();
            (c.take_notes(), c.status())
        });
        for n in notes {
            crate::driver::process_log::line(&format!("tunbench datapath: {n}"));
        }
        file.peers = status;
        write_json(&peers_path, &file);
    })
    .with_context(|| format!("WireGuard peer {node} of tunnel {}", tun.name))?;
    Ok(())
}
