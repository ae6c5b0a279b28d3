//! An external WireGuard implementation as a lab peer: wireguard-go or
//! boringtun-cli, started by this process in its own mount namespace (a
//! private /run, so two labs' UAPI sockets of the same name never meet),
//! attached to the TUN that `up` made, configured through its UAPI socket
//! (<https://www.wireguard.com/xplatform/>), read back every second for
//! status, and stopped when this process is.
//!
//! wireguard-go attaches only to a single-queue TUN and boringtun-cli only
//! to a multi-queue one; `up` makes each the TUN it needs, and sets its MTU
//! (wireguard-go sets none on a TUN it did not make).

use crate::codec::wireguard::PeerStatus;
use crate::endpoint::external::{PrivateRun, find_program, isolate, stop};
use crate::endpoint::wireguard::PeerSetup;
use crate::endpoint::{stopping, write_json};
use crate::topology::tunnel::Tunnel;
use crate::topology::tunnel::implementation::Implementation;
use crate::topology::tunnel::overlay::Overlay;
use crate::vocab::keys::to_base64;
use anyhow::{Context, Result, bail};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const START_WAIT: Duration = Duration::from_secs(10);

fn hex(k: &[u8]) -> String {
    k.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 {
        return None;
    }
    let mut k = [0u8; 32];
    for (i, b) in k.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(k)
}

/// The UAPI `set` request for this peer.
pub fn set_request(s: &PeerSetup) -> String {
    let mut r = format!(
        "set=1\nprivate_key={}\nlisten_port={}\nreplace_peers=true\n",
        hex(&s.private),
        s.listen.port()
    );
    for p in &s.peers {
        r += &format!("public_key={}\n", hex(p.public.as_bytes()));
        if let Some(k) = p.preshared {
            r += &format!("preshared_key={}\n", hex(&k));
        }
        if let Some(e) = p.endpoint {
            r += &format!("endpoint={e}\n");
        }
        r += &format!(
            "persistent_keepalive_interval={}\nreplace_allowed_ips=true\n",
            p.keepalive.unwrap_or(0)
        );
        for a in &p.allowed_ips {
            r += &format!("allowed_ip={a}\n");
        }
    }
    r + "\n"
}

/// One UAPI exchange: the request, then the answer up to its blank line.
fn exchange(sock: &Path, request: &str) -> Result<String> {
    let mut s =
        UnixStream::connect(sock).with_context(|| format!("connecting to {}", sock.display()))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(request.as_bytes())?;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while !out.ends_with(b"\n\n") {
        let n = s.read(&mut buf)?;
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&out).into_owned();
    match text.lines().find_map(|l| l.strip_prefix("errno=")) {
        Some("0") => Ok(text),
        Some(e) => bail!("the UAPI answered errno={e}"),
        None => bail!("no errno in the UAPI answer: {text:?}"),
    }
}

/// The peers of a `get=1` answer, named from `setup`.
pub fn parse_get(text: &str, setup: &PeerSetup, now_unix: f64) -> Vec<PeerStatus> {
    let mut out: Vec<PeerStatus> = Vec::new();
    for line in text.lines() {
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        if k == "public_key" {
            let Some(key) = unhex(v) else { continue };
            let known = setup.peers.iter().find(|p| p.public.as_bytes() == &key);
            out.push(PeerStatus {
                name: known.map(|p| p.name.clone()).unwrap_or_else(|| "?".into()),
                public_key: to_base64(&key),
                endpoint: None,
                allowed_ips: Vec::new(),
                latest_handshake_secs: None,
                tx_bytes: 0,
                rx_bytes: 0,
                handshakes: 0,
            });
            continue;
        }
        let Some(p) = out.last_mut() else { continue };
        match k {
            "endpoint" => p.endpoint = v.parse().ok(),
            "allowed_ip" => p.allowed_ips.extend(v.parse::<ipnetwork::IpNetwork>().ok()),
            "tx_bytes" => p.tx_bytes = v.parse().unwrap_or(0),
            "rx_bytes" => p.rx_bytes = v.parse().unwrap_or(0),
            // wireguard-go gives Unix time, boringtun seconds since.
            "last_handshake_time_sec" => {
                let t: f64 = v.parse().unwrap_or(0.0);
                p.latest_handshake_secs = if t == 0.0 {
                    None
                } else if t > 1e9 {
                    Some((now_unix - t).max(0.0))
                } else {
                    Some(t)
                };
            }
            _ => {}
        }
    }
    out
}

fn now_unix() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn command(imp: Implementation, exe: &Path, dev: &str, w: &Overlay) -> Result<Command> {
    let mut cmd = Command::new(exe);
    match imp {
        Implementation::WireguardGo => {
            // Hides the box that tells to use the kernel module instead.
            cmd.env("WG_PROCESS_FOREGROUND", "1").args(["-f", dev]);
        }
        Implementation::Boringtun => {
            // 2 threads unless the tunnel asks for more queues: the setting
            // the reference figures were measured with.
            let threads = if w.queues > 1 { w.queues } else { 2 };
            // Run as root without a login, it must keep its privileges.
            cmd.args([
                "-f",
                "--disable-drop-privileges",
                "--threads",
                &threads.to_string(),
                dev,
            ]);
        }
        Implementation::Tunbench | Implementation::Kernel => unreachable!("not external"),
    }
    cmd.stdin(Stdio::null());
    // A private /run for the UAPI socket, and no life beyond ours.
    isolate(&mut cmd, PrivateRun::Empty)?;
    Ok(cmd)
}

pub fn run(
    imp: Implementation,
    tun: &Tunnel,
    w: &Overlay,
    setup: &PeerSetup,
    stats_path: &Path,
    each: &mut dyn FnMut(Vec<PeerStatus>),
) -> Result<()> {
    crate::endpoint::on_stop_signals();
    let (program, origin) = imp.program().expect("external");
    let Some(exe) = find_program(program) else {
        bail!(
            "{program} is not installed (PATH: {}); it comes from {origin}",
            std::env::var("PATH").unwrap_or_default()
        );
    };
    let dev = tun.tun_name();
    let mut child = command(imp, &exe, &dev, w)?
        .spawn()
        .with_context(|| format!("starting {}", exe.display()))?;
    let result = supervise(&mut child, imp, &dev, setup, stats_path, each);
    stop(&mut child, Duration::from_secs(3));
    result
}

fn supervise(
    child: &mut Child,
    imp: Implementation,
    dev: &str,
    setup: &PeerSetup,
    stats_path: &Path,
    each: &mut dyn FnMut(Vec<PeerStatus>),
) -> Result<()> {
    let sock = PathBuf::from(format!(
        "/proc/{}/root/run/wireguard/{dev}.sock",
        child.id()
    ));
    let t0 = Instant::now();
    // The socket's file appears at bind(), before the program listens on it
    // (a connection then is refused): ready once one is taken.
    while UnixStream::connect(&sock).is_err() {
        if let Some(st) = child.try_wait()? {
            bail!(
                "{} exited ({st}) before it opened its UAPI socket; its output is above",
                imp.as_str()
            );
        }
        if t0.elapsed() > START_WAIT || stopping() {
            bail!(
                "{} took no connection on its UAPI socket {} within {} s",
                imp.as_str(),
                sock.display(),
                START_WAIT.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    exchange(&sock, &set_request(setup))
        .with_context(|| format!("configuring {} through its UAPI", imp.as_str()))?;
    eprintln!(
        "tunbench datapath: {} on {dev} configured, {} peer(s)",
        imp.as_str(),
        setup.peers.len()
    );
    let pid = std::process::id();
    let started = Instant::now();
    loop {
        let peers = exchange(&sock, "get=1\n\n")
            .map(|t| parse_get(&t, setup, now_unix()))
            .unwrap_or_default();
        let (rx, tx) = peers
            .iter()
            .fold((0, 0), |(r, t), p| (r + p.rx_bytes, t + p.tx_bytes));
        each(peers);
        write_json(
            stats_path,
            &serde_json::json!({
                "role": "peer", "pid": pid, "implementation": imp.as_str(),
                "child_pid": child.id(), "uptime_seconds": started.elapsed().as_secs_f64(),
                "tun_rx": { "packets": 0, "bytes": tx }, "net_rx": { "packets": 0, "bytes": rx },
            }),
        );
        for _ in 0..50 {
            if stopping() {
                return Ok(());
            }
            if let Some(st) = child.try_wait()? {
                bail!("{} exited ({st})", imp.as_str());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::wireguard::PeerConfig;
    use boringtun::x25519::PublicKey;

    fn setup() -> PeerSetup {
        PeerSetup {
            private: [1; 32],
            listen: "198.18.0.1:51820".parse().unwrap(),
            peers: vec![PeerConfig {
                name: "b".into(),
                public: PublicKey::from([2; 32]),
                preshared: Some([3; 32]),
                endpoint: Some("198.18.0.2:51821".parse().unwrap()),
                allowed_ips: vec![
                    "198.19.0.2/32".parse().unwrap(),
                    "2001:2:0:ff::2/128".parse().unwrap(),
                ],
                keepalive: Some(25),
            }],
        }
    }

    #[test]
    fn set_request_follows_the_uapi() {
        let r = set_request(&setup());
        let o = "01".repeat(32);
        let want = format!(
            "set=1\nprivate_key={o}\nlisten_port=51820\nreplace_peers=true\npublic_key={}\npreshared_key={}\nendpoint=198.18.0.2:51821\npersistent_keepalive_interval=25\nreplace_allowed_ips=true\nallowed_ip=198.19.0.2/32\nallowed_ip=2001:2:0:ff::2/128\n\n",
            "02".repeat(32),
            "03".repeat(32)
        );
        assert_eq!(r, want);
    }

    #[test]
    fn get_answers_of_both_implementations_parse() {
        let key = "02".repeat(32);
        // wireguard-go: Unix time.
        let go = format!(
            "private_key={}\nlisten_port=51820\npublic_key={key}\nendpoint=198.18.0.2:51821\nlast_handshake_time_sec=1796259766\nlast_handshake_time_nsec=4\ntx_bytes=431\nrx_bytes=230\nallowed_ip=198.19.0.2/32\nerrno=0\n\n",
            "01".repeat(32)
        );
        let p = parse_get(&go, &setup(), 1796259776.0);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].name, "b");
        assert_eq!(p[0].latest_handshake_secs, Some(10.0));
        assert_eq!((p[0].tx_bytes, p[0].rx_bytes), (431, 230));
        assert_eq!(p[0].endpoint, Some("198.18.0.2:51821".parse().unwrap()));
        // boringtun: seconds since; and no handshake yet at all.
        let bt = format!(
            "own_public_key=ab\nlisten_port=51820\npublic_key={key}\nlast_handshake_time_sec=7\nrx_bytes=1\ntx_bytes=2\nerrno=0\n\n"
        );
        assert_eq!(
            parse_get(&bt, &setup(), 0.0)[0].latest_handshake_secs,
            Some(7.0)
        );
        let none = format!("public_key={key}\nrx_bytes=0\nerrno=0\n\n");
        assert_eq!(
            parse_get(&none, &setup(), 0.0)[0].latest_handshake_secs,
            None
        );
    }
}
