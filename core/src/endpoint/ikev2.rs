//! One end of an IKEv2 tunnel as a process (`tunbench datapath`, started by
//! `up` in the end's namespace): it writes charon's configuration into the
//! lab's state (`ikev2-TUNNEL-NODE/`), runs strongSwan's charon with that
//! directory as its /run (charon's pid file is always /var/run/charon.pid,
//! so two instances need two), loads it with swanctl, initiates from end 0, and
//! writes the stats file `up` waits for only once the child SA is INSTALLED.
//! Then it rewrites that file and `sa-TUNNEL-NODE.json` every second from
//! `swanctl --list-sas`, and stops charon when it is stopped.
//!
//! End 0 initiates explicitly: with libipsec, trap policies (start_action =
//! trap) drop packets instead of negotiating; the kernel datapath does the
//! same, so `up` returns with SAs on either.

use crate::endpoint::external::{PrivateRun, cpu_seconds, isolate, stop};
use crate::endpoint::strongswan::{EndAuth, EndConfig, IkeSa, Install, log_tail, parse_list_sas};
use crate::endpoint::{stopping, write_json};
use crate::keys::LabKeys;
use crate::plan::datapath::Job;
use crate::topology::Topology;
use crate::topology::tunnel::Tunnel;
use crate::topology::tunnel::ikev2::{Auth, Ikev2Tunnel, SwanDatapath};
use anyhow::{Context, Result, bail};
use netns::state::LabState;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Lines of charon's log an error quotes.
const LOG_LINES: usize = 15;
/// A marker file: this end's configuration is loaded, so it answers.
const LOADED: &str = "loaded";

/// The directory charon of this end runs in (its /run).
pub fn charon_dir(lab: &str, tunnel: &str, node: &str) -> PathBuf {
    LabState::dir(lab).join(format!("ikev2-{tunnel}-{node}"))
}

pub fn sa_path(lab: &str, tunnel: &str, node: &str) -> PathBuf {
    LabState::dir(lab).join(format!("sa-{tunnel}-{node}.json"))
}

/// What `sa-TUNNEL-NODE.json` holds: the SAs as charon lists them.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct SaFile {
    pub tunnel: String,
    pub node: String,
    pub endpoint: IpAddr,
    pub peer: IpAddr,
    pub charon_pid: u32,
    /// Where ESP happens: "libipsec" or "kernel" (older files: libipsec).
    #[serde(default = "libipsec")]
    pub datapath: String,
    pub ike: Vec<IkeSa>,
}

fn libipsec() -> String {
    SwanDatapath::Libipsec.as_str().into()
}

/// The SA file of every IKEv2 end of a lab.
pub fn sa_files_of(lab: &str) -> Vec<SaFile> {
    crate::endpoint::state_files(lab, "sa-")
        .iter()
        .filter_map(|f| serde_json::from_str(&std::fs::read_to_string(f).ok()?).ok())
        .collect()
}

/// `swanctl --list-sas` for one end, indented for `tunbench status`.
pub fn describe(f: &SaFile) -> String {
    let mut s = format!(
        "  ikev2 {} on {} (strongSwan charon pid {}, {}): {} <-> {}\n",
        f.tunnel, f.node, f.charon_pid, f.datapath, f.endpoint, f.peer
    );
    if f.ike.is_empty() {
        s += "    no IKE SA\n";
    }
    for ike in &f.ike {
        s += &format!(
            "    IKE SA {} {}: {} <-> {}, {}, {} s ago ({})\n",
            ike.name,
            ike.state,
            ike.local,
            ike.remote,
            ike.proposal,
            ike.established_secs,
            if ike.initiator {
                "initiator"
            } else {
                "responder"
            }
        );
        for c in &ike.children {
            s += &format!(
                "      child SA {} {}: {} {}{}, SPIs {} in / {} out, {} === {}, in {} B {} pkts, out {} B {} pkts\n",
                c.name,
                c.state,
                c.mode,
                c.cipher,
                if c.encap { " in UDP" } else { "" },
                c.spi_in,
                c.spi_out,
                c.local_ts.join(","),
                c.remote_ts.join(","),
                c.bytes_in,
                c.packets_in,
                c.bytes_out,
                c.packets_out
            );
        }
    }
    s
}

/// swanctl talking to one charon over its vici socket.
struct Swanctl {
    exe: PathBuf,
    /// strongswan.conf, for swanctl's own plugins.
    conf: PathBuf,
    uri: String,
    /// Where a run's output goes (read back when it ends).
    output: PathBuf,
}

impl Swanctl {
    /// Runs `swanctl ARGS --uri URI`: whether it succeeded, and what it said.
    /// A stop signal ends it: `--initiate` may wait for seconds.
    fn run(&self, args: &[&str]) -> Result<(bool, String)> {
        let out = std::fs::File::create(&self.output)
            .with_context(|| format!("creating {}", self.output.display()))?;
        // The long --uri: -u means --uninstall.
        let mut child = Command::new(&self.exe)
            .args(args)
            .args(["--uri", &self.uri])
            .env("STRONGSWAN_CONF", &self.conf)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("running {}", self.exe.display()))?;
        let status = loop {
            if let Some(st) = child.try_wait()? {
                break st;
            }
            if stopping() {
                let _ = child.kill();
                let _ = child.wait();
                bail!("stopped while running swanctl {}", args.join(" "));
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let text = std::fs::read_to_string(&self.output).unwrap_or_default();
        Ok((status.success(), text))
    }

    fn list_sas(&self) -> Vec<IkeSa> {
        match self.run(&["--list-sas", "--raw", "--noblock"]) {
            Ok((true, out)) => parse_list_sas(&out),
            _ => Vec::new(),
        }
    }
}

/// Writes a file only root can read (it may hold the pre-shared key).
fn write_private(path: &Path, text: &str) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .with_context(|| format!("writing {}", path.display()))
}

/// What one end needs to know while it runs.
struct End<'a> {
    lab: &'a str,
    tunnel: &'a str,
    node: String,
    peer_node: String,
    initiator: bool,
    /// The peer's underlay address, for messages.
    peer_endpoint: IpAddr,
    timeout: Duration,
    dir: PathBuf,
    swanctl: Swanctl,
    datapath: SwanDatapath,
}

impl End<'_> {
    fn log(&self) -> PathBuf {
        self.dir.join("charon.log")
    }

    /// An error that quotes the end of charon's log.
    fn failure(&self, what: String) -> anyhow::Error {
        anyhow::anyhow!(
            "{what}; charon's log ({}) ends:\n{}",
            self.log().display(),
            log_tail(&self.log(), LOG_LINES)
        )
    }

    /// Waits for `ready`, failing when charon ends, the deadline passes or a
    /// stop signal comes.
    fn wait_for(
        &self,
        charon: &mut Child,
        deadline: Instant,
        what: &str,
        mut ready: impl FnMut() -> bool,
    ) -> Result<()> {
        loop {
            if ready() {
                return Ok(());
            }
            if let Some(st) = charon.try_wait()? {
                return Err(self.failure(format!("charon exited ({st}) while {what}")));
            }
            if stopping() {
                bail!("stopped while {what}");
            }
            if Instant::now() > deadline {
                return Err(self.failure(format!(
                    "timed out after {} s (the tunnel's timeout) {what}",
                    self.timeout.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn installed(&self) -> bool {
        self.swanctl.list_sas().iter().any(|ike| {
            ike.children
                .iter()
                .any(|c| c.name == self.tunnel && c.state == "INSTALLED")
        })
    }

    /// Loads the configuration, initiates from end 0, and waits until the
    /// child SA is INSTALLED.
    fn negotiate(&self, charon: &mut Child, deadline: Instant) -> Result<()> {
        let vici = self.dir.join("charon.vici");
        self.wait_for(charon, deadline, "waiting for charon's vici socket", || {
            vici.exists()
        })?;
        let conf = self.dir.join("swanctl.conf");
        let (ok, out) = self
            .swanctl
            .run(&["--load-all", "--file", &conf.to_string_lossy()])?;
        if !ok {
            return Err(self.failure(format!("swanctl --load-all failed: {}", out.trim())));
        }
        std::fs::write(self.dir.join(LOADED), b"")?;
        if self.initiator {
            let peer = charon_dir(self.lab, self.tunnel, &self.peer_node).join(LOADED);
            self.wait_for(
                charon,
                deadline,
                &format!("waiting for {} to load its configuration", self.peer_node),
                || peer.exists(),
            )?;
            let left = deadline.saturating_duration_since(Instant::now());
            let secs = left.as_secs().max(1).to_string();
            let (ok, out) = self.swanctl.run(&[
                "--initiate",
                "--child",
                self.tunnel,
                "--timeout",
                &secs,
                "--loglevel",
                "0",
            ])?;
            if !ok {
                return Err(self.failure(format!(
                    "no IKE and child SA with {} at {} within {secs} s, the rest of the tunnel's timeout of {} s ({})",
                    self.peer_node,
                    self.peer_endpoint,
                    self.timeout.as_secs(),
                    out.lines().last().unwrap_or("").trim()
                )));
            }
        }
        self.wait_for(
            charon,
            deadline,
            "waiting for the child SA to be INSTALLED",
            || self.installed(),
        )
    }

    /// Rewrites the stats and SA files every second until stopped.
    fn supervise(&self, charon: &mut Child, endpoints: (IpAddr, IpAddr)) -> Result<()> {
        let stats_path = crate::plan::datapath::stats_path(
            self.lab,
            &Job::Tunnel(self.tunnel.to_string()),
            &self.node,
        );
        let sa_path = sa_path(self.lab, self.tunnel, &self.node);
        let started = Instant::now();
        crate::driver::process_log::line(&format!(
            "tunbench datapath: ikev2 {} on {}: child SA INSTALLED (charon pid {}, {})",
            self.tunnel,
            self.node,
            charon.id(),
            self.datapath.as_str()
        ));
        loop {
            let ike = self.swanctl.list_sas();
            let child = ike
                .iter()
                .flat_map(|s| s.children.iter())
                .find(|c| c.name == self.tunnel);
            let (bo, po, bi, pi) = child.map_or((0, 0, 0, 0), |c| {
                (c.bytes_out, c.packets_out, c.bytes_in, c.packets_in)
            });
            // The SA file first: `up` returns once the stats file exists.
            write_json(
                &sa_path,
                &SaFile {
                    tunnel: self.tunnel.to_string(),
                    node: self.node.clone(),
                    endpoint: endpoints.0,
                    peer: endpoints.1,
                    charon_pid: charon.id(),
                    datapath: self.datapath.as_str().into(),
                    ike,
                },
            );
            write_json(
                &stats_path,
                &serde_json::json!({
                    "tunnel": self.tunnel, "node": self.node, "role": "ikev2",
                    "pid": std::process::id(), "child_pid": charon.id(),
                    "uptime_seconds": started.elapsed().as_secs_f64(),
                    "cpu_seconds": cpu_seconds(charon.id()).unwrap_or(0.0),
                    "tun_rx": { "packets": po, "bytes": bo },
                    "net_rx": { "packets": pi, "bytes": bi },
                    "drops": {},
                }),
            );
            // charon appends to its log for as long as the lab runs.
            crate::driver::process_log::cap_file(&self.log(), crate::driver::process_log::LOG_CAP);
            crate::driver::process_log::enforce();
            for _ in 0..50 {
                if stopping() {
                    return Ok(());
                }
                if let Some(st) = charon.try_wait()? {
                    return Err(self.failure(format!("charon exited ({st})")));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

pub fn run(lab: &str, t: &Topology, tun: &Tunnel, e: &Ikev2Tunnel, i: usize) -> Result<()> {
    crate::endpoint::on_stop_signals();
    crate::driver::process_log::install();
    let install = Install::find(false).map_err(anyhow::Error::msg)?;
    let w = &e.overlay;
    let j = 1 - i;
    let node = t.nodes[w.peers[i].node].name.clone();
    let peer_node = t.nodes[w.peers[j].node].name.clone();
    let keys = LabKeys::load(lab)?;
    let dir = charon_dir(lab, &tun.name, &node);
    // A directory of its own, fresh: it becomes charon's /run.
    let _ = std::fs::remove_dir_all(&dir);
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .with_context(|| format!("creating {}", dir.display()))?;
    }
    let config = EndConfig {
        name: tun.name.clone(),
        local_id: node.clone(),
        remote_id: peer_node.clone(),
        local_addr: w.peers[i].endpoint,
        remote_addr: w.peers[j].endpoint,
        local_ts: w.allowed_for(j, i),
        remote_ts: w.allowed_for(i, j),
        proposals: e.proposals.clone(),
        esp_proposals: e.esp_proposals.clone(),
        auth: match e.auth {
            Auth::Psk => EndAuth::Psk(keys.psk_hex(&tun.name)?.to_string()),
            Auth::Cert => {
                // Where swanctl --load-all looks, beside swanctl.conf.
                let (ca, mine) = keys.certificates(&tun.name, &node)?;
                for sub in ["x509ca", "x509", "ecdsa"] {
                    std::fs::create_dir(dir.join(sub))?;
                }
                let cert = format!("{node}.pem");
                write_private(&dir.join("x509ca/ca.pem"), ca)?;
                write_private(&dir.join("x509").join(&cert), &mine.cert)?;
                write_private(&dir.join("ecdsa").join(format!("{node}.key")), &mine.key)?;
                EndAuth::Cert(cert)
            }
        },
    };
    let conf = dir.join("strongswan.conf");
    write_private(
        &conf,
        &crate::endpoint::strongswan::strongswan_conf(e.datapath),
    )?;
    write_private(
        &dir.join("swanctl.conf"),
        &crate::endpoint::strongswan::swanctl_conf(&config),
    )?;
    let end = End {
        lab,
        tunnel: &tun.name,
        node: node.clone(),
        peer_node,
        initiator: i == 0,
        peer_endpoint: w.peers[j].endpoint,
        timeout: Duration::from_secs(e.timeout_secs as u64),
        dir: dir.clone(),
        datapath: e.datapath,
        swanctl: Swanctl {
            exe: install.swanctl.clone(),
            conf,
            uri: format!("unix://{}", dir.join("charon.vici").display()),
            output: dir.join("swanctl.out"),
        },
    };
    let deadline = Instant::now() + end.timeout;
    let mut cmd = Command::new(&install.charon);
    // As charon sees it: this directory is its /run.
    cmd.env("STRONGSWAN_CONF", "/run/strongswan.conf")
        .stdin(Stdio::null());
    isolate(&mut cmd, PrivateRun::Directory(&dir))?;
    let mut charon = cmd
        .spawn()
        .with_context(|| format!("starting {}", install.charon.display()))?;
    let result = end
        .negotiate(&mut charon, deadline)
        .and_then(|_| end.supervise(&mut charon, (w.peers[i].endpoint, w.peers[j].endpoint)));
    // charon sends its DELETEs and removes its routes on SIGTERM; `down`
    // gives this process 2 s in all.
    stop(&mut charon, Duration::from_millis(1500));
    result.with_context(|| format!("IKEv2 end {node} of tunnel {}", tun.name))
}
