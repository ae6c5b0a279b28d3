//! One userspace tunnel endpoint as a process (`tunbench datapath`, started by
//! `up` inside the endpoint's namespace): read the topology the lab was built
//! from, build this endpoint's codec, run the shared driver until SIGTERM, and
//! rewrite the stats file every second.

pub mod esp;
pub mod external;
pub mod ikev2;
pub mod relay;
pub mod router;
pub mod strongswan;
pub mod wg_external;
pub mod wg_kernel;
pub mod wireguard;

use crate::codec::Codec;
use crate::codec::dslite::{Aftr, AftrConfig, B4, B4Config, MssClamp, Softwire};
use crate::driver::process_log;
use crate::driver::{self, DriverConfig, StatsSnapshot, Transport};
use crate::plan::datapath::Job;
use crate::topology::Topology;
use crate::topology::tunnel::dslite::Dslite;
use crate::topology::tunnel::{Role, Tunnel, TunnelKind};
use anyhow::{Context, Result};
use std::net::IpAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The test-only fault injection's variable: `panic:THREAD` or `exit:THREAD`.
#[doc(hidden)]
pub const FAULT_ENV: &str = "TUNBENCH_TEST_FAULT";

/// Set by SIGTERM / SIGINT / SIGHUP.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// What the stats file holds: who this is, and the driver's counters.
#[derive(serde::Serialize)]
struct StatsFile<'a> {
    tunnel: &'a str,
    node: &'a str,
    role: &'a str,
    pid: u32,
    #[serde(flatten)]
    stats: &'a StatsSnapshot,
}

/// Writes `value` as JSON to `path`, then renames it into place: a reader
/// never sees half a file. Best effort: a stats file may miss a second.
pub fn write_json(path: &Path, value: &impl serde::Serialize) {
    let tmp = path.with_extension("json.tmp");
    if let Ok(text) = serde_json::to_string_pretty(value) {
        if std::fs::write(&tmp, text).is_ok() {
            let _ = std::fs::rename(&tmp, path);
        }
    }
}

/// Who a datapath process is, for its stats file and log.
#[derive(Debug, Clone, Copy)]
pub struct Who<'a> {
    /// The tunnel, or "-" for a router's slow path.
    pub tunnel: &'a str,
    pub node: &'a str,
    pub role: &'a str,
}

/// Runs the shared driver with `codec` until SIGTERM, SIGINT or SIGHUP,
/// rewriting the stats file every second; returns the last counters.
pub fn serve<C: Codec + 'static>(
    config: DriverConfig,
    codec: C,
    stats_path: &Path,
    who: Who,
) -> Result<StatsSnapshot> {
    serve_with(config, codec, stats_path, who, |_| {})
}

/// `serve`, also handing the running driver to `each` every second.
pub fn serve_with<C: Codec + 'static>(
    mut config: DriverConfig,
    codec: C,
    stats_path: &Path,
    who: Who,
    each: impl FnMut(&driver::Driver<C>),
) -> Result<StatsSnapshot> {
    on_stop_signals();
    process_log::install();
    // Only the tests set this (a thread to kill, `driver::Fault`): no input
    // can kill a driver thread, and they check that a dead one is loud.
    if let Some(f) = netns::test_env::var_os(FAULT_ENV)
        .and_then(|v| v.into_string().ok())
        .and_then(|v| driver::Fault::parse(&v))
    {
        config.fault = Some(f);
    }
    let write = |s: &StatsSnapshot| {
        process_log::enforce();
        let f = StatsFile {
            tunnel: who.tunnel,
            node: who.node,
            role: who.role,
            pid: std::process::id(),
            stats: s,
        };
        write_json(stats_path, &f);
    };
    process_log::line(&format!(
        "tunbench datapath: {} {} on {}: TUN {} <-> {}",
        who.tunnel, who.role, who.node, config.tun, config.transport
    ));
    // The stats file appears once the driver runs: `up` waits for it.
    let last = driver::run_until_with(config, codec, &STOP, Duration::from_secs(1), write, each)
        .with_context(|| {
            format!(
                "running the {} {} datapath on {}",
                who.tunnel, who.role, who.node
            )
        })?;
    process_log::line(&format!(
        "tunbench datapath: stopped; {} packets in from the TUN, {} from the network, {} dropped",
        last.tun_rx.packets,
        last.net_rx.packets,
        last.dropped()
    ));
    Ok(last)
}

/// Files in a lab's state directory named `PREFIX*.json`, sorted.
pub fn state_files(lab: &str, prefix: &str) -> Vec<std::path::PathBuf> {
    let Ok(dir) = std::fs::read_dir(netns::state::LabState::dir(lab)) else {
        return Vec::new();
    };
    let mut files: Vec<std::path::PathBuf> = dir
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix) && n.ends_with(".json"))
        })
        .collect();
    files.sort();
    files
}

/// Makes SIGTERM, SIGINT and SIGHUP set the stop flag.
pub fn on_stop_signals() {
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        for s in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::signal(s, on_signal as *const () as libc::sighandler_t);
        }
    }
}

/// Whether a stop signal came.
pub fn stopping() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// Runs the endpoint `role` of tunnel `tun` on `node` of lab `lab`, built
/// from topology `t`, until a stop signal.
pub fn run(lab: &str, t: &Topology, tun: &Tunnel, role: Role, node: &str) -> Result<()> {
    let tunnel = tun.name.as_str();
    let d = match (&tun.kind, role) {
        (TunnelKind::Dslite(d), _) => d,
        (TunnelKind::Wireguard(w), Role::Peer(i)) => {
            return crate::endpoint::wireguard::run(lab, t, tun, w, i);
        }
        (TunnelKind::Esp(e), Role::Peer(i)) => {
            return crate::endpoint::esp::run(lab, t, tun, e, i);
        }
        (TunnelKind::L2tp(l), Role::Peer(i)) => {
            return crate::endpoint::esp::run_l2tp(lab, t, tun, l, i);
        }
        (TunnelKind::Ikev2(e), Role::Peer(i)) => {
            return crate::endpoint::ikev2::run(lab, t, tun, e, i);
        }
        (
            TunnelKind::Wireguard(_)
            | TunnelKind::Esp(_)
            | TunnelKind::L2tp(_)
            | TunnelKind::Ikev2(_),
            _,
        ) => {
            unreachable!("a WireGuard, ESP, L2TP or IKEv2 endpoint is a peer")
        }
    };
    let config = driver_config(tun, d, role);
    let stats_path = crate::plan::datapath::stats_path(lab, &Job::Tunnel(tunnel.to_string()), node);
    let role_name = match role {
        Role::Aftr => "aftr",
        Role::B4(_) => "b4",
        Role::Peer(_) => "peer",
    };
    let who = Who {
        tunnel,
        node,
        role: role_name,
    };
    match role {
        Role::Aftr => {
            let codec = Aftr::new(aftr_config(d)).context("configuring the AFTR")?;
            serve(config, codec, &stats_path, who)?;
        }
        Role::B4(i) => {
            let model = crate::plan::datapath::termination(t, tun, role);
            if let Some(m) = model {
                process_log::line(&format!(
                    "tunbench datapath: B4 {node} terminates {tunnel} with profile {}'s ceilings ({})",
                    m.profile,
                    crate::codec::profile::describe_ceilings(&m.ceilings)
                ));
            }
            let codec = crate::codec::terminate::Terminated::new(
                B4::new(b4_config(d, i)),
                model,
                std::time::Instant::now(),
            );
            serve(config, codec, &stats_path, who)?;
        }
        Role::Peer(_) => unreachable!("handled above"),
    }
    Ok(())
}

fn driver_config(tun: &Tunnel, d: &Dslite, role: Role) -> DriverConfig {
    let local = match role {
        Role::B4(i) => d.b4s[i].address,
        Role::Aftr | Role::Peer(_) => d.aftr.address,
    };
    let mut c = DriverConfig::new(
        tun.tun_name(),
        Transport::RawIp {
            local: IpAddr::V6(local),
            protocol: 4,
        },
    );
    c.queues = d.queues as usize;
    // A kernel peer's GSO super-packets (and GRO's) come off the raw socket
    // whole: back into packets of the softwire's size on the way into the TUN.
    c.segment_into_tun = Some(d.mtu as usize);
    c
}

fn b4_config(d: &Dslite, i: usize) -> B4Config {
    let mut c = B4Config::new(d.aftr.address);
    let _ = i;
    c.inner_mtu = d.mtu.min(u16::MAX as u32) as u16;
    c.mss_clamp = match d.mss {
        Some(m) => MssClamp::Fixed(m),
        None => MssClamp::Off,
    };
    c
}

fn aftr_config(d: &Dslite) -> AftrConfig {
    // Every address of every pool prefix except, in prefixes larger than a /31,
    // the network and broadcast addresses.
    let mut pool = Vec::new();
    for p in &d.aftr.pool {
        for a in p.iter() {
            if p.prefix() < 31 && (a == p.network() || a == p.broadcast()) {
                continue;
            }
            pool.push(a);
        }
    }
    let mut c = AftrConfig::new(d.aftr.address, pool);
    c.inner_mtu = d.mtu.min(u16::MAX as u32) as u16;
    c.max_mappings_per_b4 = d.aftr.max_mappings_per_b4 as usize;
    c.softwires = d
        .b4s
        .iter()
        .map(|b| Softwire {
            b4: b.address,
            prefixes: b.prefixes.clone(),
        })
        .collect();
    c
}
