//! `tunbench keygen` and `pubkey`: WireGuard keys as text, like `wg genkey` and
//! `wg pubkey`. `tunbench keys LAB`: what a WireGuard device outside the lab
//! needs to peer with the lab's peers, in the form `wg setconf` reads.

use crate::topology::Topology;
use crate::topology::tunnel::overlay::Overlay;
use crate::topology::tunnel::{Tunnel, TunnelKind};
use crate::vocab::keys::{public_of, to_base64};
use anyhow::{Context, Result};
use std::fmt::Write;

pub fn keygen() -> Result<i32> {
    let k = crate::vocab::keys::generate().context("reading the kernel's random source")?;
    println!("{}", crate::vocab::keys::to_base64(&k));
    Ok(0)
}

pub fn pubkey() -> Result<i32> {
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
        .context("reading a private key on stdin")?;
    let k = crate::vocab::keys::parse(&text).map_err(|e| anyhow::anyhow!("stdin: {e}"))?;
    println!(
        "{}",
        crate::vocab::keys::to_base64(&crate::vocab::keys::public_of(&k))
    );
    Ok(0)
}

#[derive(clap::Args, Debug)]
pub struct KeysArgs {
    /// A running lab.
    pub lab: String,
}

/// Prints, for every WireGuard tunnel of a running lab, the configuration each
/// external peer needs (or, with none, the lab peers' public keys). Never a
/// private key: the lab's stay in its state directory, the device's on it.
pub fn keys(a: KeysArgs) -> Result<i32> {
    let lab = crate::lab::find(&a.lab)?;
    let keys = crate::keys::LabKeys::load(&a.lab)?;
    let t = &lab.topology;
    let mut out = String::new();
    for tun in &t.tunnels {
        let TunnelKind::Wireguard(w) = &tun.kind else {
            continue;
        };
        let mut public = Vec::new();
        for p in &w.peers {
            public.push(match p.public_key {
                Some(k) => k,
                None => public_of(&keys.private(&tun.name, &t.nodes[p.node].name)?),
            });
        }
        let preshared = keys.preshared(&tun.name);
        out += &wireguard_text(t, tun, w, &public, preshared.as_ref());
    }
    if out.is_empty() {
        println!("# lab {} has no WireGuard tunnel", a.lab);
    } else {
        print!("{out}");
    }
    Ok(0)
}

/// The text `keys` prints for one tunnel, given every peer's public key: per
/// external peer, an `[Interface]` and a `[Peer]` per neighbour, as `wg
/// setconf` reads them (a private key added); with no external peer, a
/// `[Peer]` per lab peer.
pub fn wireguard_text(
    t: &Topology,
    tun: &Tunnel,
    w: &Overlay,
    public: &[[u8; 32]],
    preshared: Option<&[u8; 32]>,
) -> String {
    let name = |j: usize| &t.nodes[w.peers[j].node].name;
    let mut s = String::new();
    let peer_block = |s: &mut String, i: Option<usize>, j: usize| {
        let allowed = match i {
            Some(i) => w.allowed_for(i, j),
            None => w.allowed_for(j, j),
        };
        let ips: Vec<String> = allowed.iter().map(|n| n.to_string()).collect();
        let _ = writeln!(s, "\n[Peer]\n# {} ({})", name(j), w.peers[j].runs());
        let _ = writeln!(s, "PublicKey = {}", to_base64(&public[j]));
        if let Some(k) = preshared {
            let _ = writeln!(s, "PresharedKey = {}", to_base64(k));
        }
        let _ = writeln!(s, "Endpoint = {}", w.endpoint_of(j));
        let _ = writeln!(s, "AllowedIPs = {}", ips.join(", "));
        if let Some(k) = w.keepalive {
            let _ = writeln!(s, "PersistentKeepalive = {k}");
        }
    };
    let external: Vec<usize> = (0..w.peers.len())
        .filter(|&i| w.peers[i].external)
        .collect();
    if external.is_empty() {
        let _ = writeln!(
            s,
            "# WireGuard tunnel {}: every peer is in the lab; what a device needs to peer with each",
            tun.name
        );
        for j in 0..w.peers.len() {
            peer_block(&mut s, None, j);
        }
    }
    for e in external {
        let me = &w.peers[e];
        let addrs: Vec<String> = me.addresses.iter().map(|a| a.to_string()).collect();
        let routes: Vec<String> = w.tun_routes(e).iter().map(|n| n.to_string()).collect();
        let _ = writeln!(
            s,
            "# WireGuard tunnel {}: {} is outside the lab; its configuration (wg setconf DEVICE FILE),\n# with the device's own private key, whose public key the topology gives: {}",
            tun.name,
            name(e),
            to_base64(&public[e])
        );
        let _ = writeln!(s, "[Interface]\nListenPort = {}", me.port);
        let _ = writeln!(
            s,
            "# on the device: address {} (MTU {})",
            addrs.join(", "),
            w.mtu
        );
        if !routes.is_empty() {
            let _ = writeln!(s, "# routes into the device: {}", routes.join(", "));
        }
        for j in w.neighbours(e) {
            peer_block(&mut s, Some(e), j);
        }
    }
    s + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_external_peer_gets_a_wg_setconf_block_per_lab_peer() {
        let t = crate::topology::parse_str(
            r#"
name = "k"
[nodes.pc]
kind = "host"
[nodes.rtr]
kind = "external"
[[links]]
a = { port = "pc:eth0", ipv4 = "198.18.11.2/24" }
b = { port = "rtr:lan1", ipv4 = "198.18.11.250/24" }
host = "enp1s0"
[tunnels.wg]
kind = "wireguard"
keepalive = 25
peers = [
  { node = "pc", endpoint = "198.18.11.2", address = "198.18.71.2/24", allowed_ips = ["198.18.72.0/24"] },
  { node = "rtr", endpoint = "198.18.11.250", port = 51821, address = "198.18.71.1/24",
    public_key = "AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA=" },
]
"#,
            std::path::Path::new("k.toml"),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let tun = &t.tunnels[0];
        let w = tun.overlay().unwrap();
        let public = [[7u8; 32], w.peers[1].public_key.unwrap()];
        let text = wireguard_text(&t, tun, w, &public, None);
        for want in [
            "[Interface]\nListenPort = 51821\n",
            "# on the device: address 198.18.71.1/24 (MTU 1420)",
            "[Peer]\n# pc (tunbench)\n",
            &format!("PublicKey = {}\n", to_base64(&[7u8; 32])),
            "Endpoint = 198.18.11.2:51820\n",
            "AllowedIPs = 198.18.71.2/32, 198.18.72.0/24\n",
            "PersistentKeepalive = 25\n",
            "# routes into the device: 198.18.72.0/24",
            "AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA=",
        ] {
            assert!(text.contains(want), "no {want:?} in:\n{text}");
        }
        assert!(!text.contains("PrivateKey"), "{text}");
        assert!(!text.contains("PresharedKey"), "{text}");
    }
}
