//! The kernel's WireGuard as a lab peer: `up` made the device (named as the
//! TUN of tunbench's own peer would be, with its MTU, addresses and routes);
//! this process gives it the lab's keys and the peers over generic netlink,
//! reads them back every second for status and the stats file, and leaves the
//! device to go with the namespace at `down`.

use crate::codec::wireguard::PeerStatus;
use crate::endpoint::wireguard::PeerSetup;
use crate::endpoint::{stopping, write_json};
use crate::topology::tunnel::Tunnel;
use crate::vocab::keys::to_base64;
use anyhow::{Context, Result};
use netns::wireguard::{DeviceConfig, PeerConfig, PeerState};
use std::path::Path;
use std::time::{Duration, Instant};

/// What the device is told: the setup of tunbench's own peer, as netlink has it.
pub fn device_config(s: &PeerSetup) -> DeviceConfig {
    DeviceConfig {
        private_key: s.private,
        listen_port: s.listen.port(),
        peers: s
            .peers
            .iter()
            .map(|p| PeerConfig {
                public_key: *p.public.as_bytes(),
                preshared_key: p.preshared,
                endpoint: p.endpoint,
                keepalive: p.keepalive,
                allowed_ips: p.allowed_ips.clone(),
            })
            .collect(),
    }
}

/// The device's peers named from `setup`, as `status` shows them.
pub fn statuses(states: &[PeerState], setup: &PeerSetup, now_unix: i64) -> Vec<PeerStatus> {
    states
        .iter()
        .map(|st| PeerStatus {
            name: setup
                .peers
                .iter()
                .find(|p| p.public.as_bytes() == &st.public_key)
                .map(|p| p.name.clone())
                .unwrap_or_else(|| "?".into()),
            public_key: to_base64(&st.public_key),
            endpoint: st.endpoint,
            allowed_ips: st.allowed_ips.clone(),
            latest_handshake_secs: st
                .latest_handshake_unix
                .map(|t| (now_unix - t).max(0) as f64),
            tx_bytes: st.tx_bytes,
            rx_bytes: st.rx_bytes,
            handshakes: 0,
        })
        .collect()
}

fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

pub fn run(
    tun: &Tunnel,
    setup: &PeerSetup,
    stats_path: &Path,
    each: &mut dyn FnMut(Vec<PeerStatus>),
) -> Result<()> {
    crate::endpoint::on_stop_signals();
    let dev = tun.tun_name();
    netns::wireguard::configure(&dev, &device_config(setup))
        .with_context(|| format!("configuring the kernel's WireGuard device {dev}"))?;
    eprintln!(
        "tunbench datapath: the kernel's WireGuard on {dev} configured, {} peer(s)",
        setup.peers.len()
    );
    let (pid, started) = (std::process::id(), Instant::now());
    loop {
        let peers = match netns::wireguard::show(&dev) {
            Ok(states) => statuses(&states, setup, now_unix()),
            Err(e) => {
                eprintln!("tunbench datapath: reading {dev}: {e}");
                Vec::new()
            }
        };
        let (rx, tx) = peers
            .iter()
            .fold((0, 0), |(r, t), p| (r + p.rx_bytes, t + p.tx_bytes));
        each(peers);
        // The stats file's shape is the external implementations' (`up`
        // waits for it; status and reports read the implementation).
        write_json(
            stats_path,
            &serde_json::json!({
                "role": "peer", "pid": pid, "implementation": "kernel",
                "uptime_seconds": started.elapsed().as_secs_f64(),
                "tun_rx": { "packets": 0, "bytes": tx }, "net_rx": { "packets": 0, "bytes": rx },
            }),
        );
        for _ in 0..50 {
            if stopping() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::wireguard::PeerConfig as CodecPeer;
    use boringtun::x25519::PublicKey;

    fn setup() -> PeerSetup {
        PeerSetup {
            private: [1; 32],
            listen: "198.18.70.1:51820".parse().unwrap(),
            peers: vec![CodecPeer {
                name: "b".into(),
                public: PublicKey::from([2; 32]),
                preshared: Some([3; 32]),
                endpoint: Some("198.18.70.2:51821".parse().unwrap()),
                allowed_ips: vec!["198.18.71.2/32".parse().unwrap()],
                keepalive: Some(25),
            }],
        }
    }

    #[test]
    fn the_device_gets_the_peer_setup_of_tunbench_own_peer() {
        let c = device_config(&setup());
        assert_eq!((c.private_key, c.listen_port), ([1; 32], 51820));
        let p = &c.peers[0];
        assert_eq!(p.public_key, [2; 32]);
        assert_eq!(p.preshared_key, Some([3; 32]));
        assert_eq!(p.endpoint, Some("198.18.70.2:51821".parse().unwrap()));
        assert_eq!(p.keepalive, Some(25));
        assert_eq!(p.allowed_ips, vec!["198.18.71.2/32".parse().unwrap()]);
    }

    #[test]
    fn the_kernel_account_is_named_from_the_setup() {
        let st = PeerState {
            public_key: [2; 32],
            endpoint: Some("198.18.70.2:51821".parse().unwrap()),
            latest_handshake_unix: Some(1_000),
            rx_bytes: 5,
            tx_bytes: 7,
            allowed_ips: vec![],
        };
        let s = statuses(&[st.clone()], &setup(), 1_010);
        assert_eq!(s[0].name, "b");
        assert_eq!(s[0].latest_handshake_secs, Some(10.0));
        assert_eq!((s[0].rx_bytes, s[0].tx_bytes), (5, 7));
        let never = PeerState {
            public_key: [9; 32],
            latest_handshake_unix: None,
            ..st
        };
        let s = statuses(&[never], &setup(), 1_010);
        assert_eq!(
            (s[0].name.as_str(), s[0].latest_handshake_secs),
            ("?", None)
        );
    }
}
