//! What a measurement between two nodes asks for: the cells, the runs, the
//! UDP search's bounds and the latency probes; and the target addresses it
//! resolves to in a lab.

use crate::lab::Running;
use crate::routing::Router;
use crate::vocab::target::MeasureTarget;
use crate::vocab::{Cell, Direction, Family, Proto};
use anyhow::{Result, anyhow, bail};
use std::net::IpAddr;

/// What to measure between two nodes.
#[derive(Debug, Clone, PartialEq)]
pub struct MeasureSpec {
    /// The path's name in reports ("raw" for the plain underlay).
    pub path: String,
    pub scenario: Option<String>,
    pub from: String,
    /// A node of the lab, or an iperf3 server outside it.
    pub to: MeasureTarget,
    pub ipv4: Option<IpAddr>,
    pub ipv6: Option<IpAddr>,
    pub families: Vec<Family>,
    pub protocols: Vec<Proto>,
    pub directions: Vec<Direction>,
    pub streams: Vec<u32>,
    pub runs: u32,
    /// Seconds per run (and per confirmation of a UDP search).
    pub duration: f64,
    /// Seconds per UDP search trial.
    pub trial_duration: f64,
    pub udp_loss_percent: f64,
    pub udp_len: u32,
    /// Trials of the UDP rate search, confirmation runs not counted.
    pub udp_max_trials: usize,
    /// The first rate of every UDP search; None: each cell's predicted
    /// limit, or [`DEFAULT_UDP_START_BPS`] where nothing predicts one.
    pub udp_start_bps: Option<f64>,
    pub udp_ceiling_bps: f64,
    /// The tunbench binary that serves in the target namespace (default: this
    /// executable, when it is tunbench).
    pub server_exe: Option<std::path::PathBuf>,
    /// Latency probes: idle before the cells, then under every cell's runs;
    /// `None` measures none.
    pub latency: Option<LatencySpec>,
    /// A node target's server was started by its part's `up` (a lab placed
    /// on several hosts): it is waited for, never started here.
    pub server_started_by_up: bool,
    /// The client's and the server's clocks are one (one machine) or
    /// declared synchronised (`synchronised_clock` on both hosts): the
    /// probes to a node then give one-way delays.
    pub same_clock: bool,
}

/// How the latency probes run.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencySpec {
    /// Probes per second.
    pub rate: f64,
    /// Seconds of probes alone, per family, before the cells.
    pub idle_seconds: f64,
    /// The echo responder's UDP port.
    pub port: u16,
}

impl Default for LatencySpec {
    fn default() -> Self {
        LatencySpec {
            rate: crate::engine::latency::sockets::DEFAULT_RATE,
            idle_seconds: DEFAULT_IDLE_SECONDS,
            port: crate::engine::latency::sockets::ECHO_PORT,
        }
    }
}

pub use crate::vocab::LATENCY_IDLE_SECONDS as DEFAULT_IDLE_SECONDS;

/// Where a UDP search starts when nothing predicts the cell's limit.
pub const DEFAULT_UDP_START_BPS: f64 = 500e6;

impl MeasureSpec {
    /// The NVR500 study's method: both families, both protocols, both directions, one
    /// stream, best of 5 runs of 10 s, UDP loss within 10 %.
    pub fn seed(from: &str, to: impl Into<MeasureTarget>) -> Self {
        let to: MeasureTarget = to.into();
        MeasureSpec {
            // A server outside the lab runs no tunbench echo responder unless
            // someone started one: probes there only when asked.
            latency: to.node().map(|_| LatencySpec::default()),
            path: "raw".into(),
            scenario: None,
            from: from.into(),
            to,
            ipv4: None,
            ipv6: None,
            families: vec![Family::Ipv4, Family::Ipv6],
            protocols: vec![Proto::Tcp, Proto::Udp],
            directions: vec![Direction::Sender, Direction::Receiver],
            streams: vec![1],
            runs: 5,
            duration: 10.0,
            trial_duration: 2.0,
            udp_loss_percent: 10.0,
            udp_len: 1448,
            udp_max_trials: 8,
            udp_start_bps: None,
            udp_ceiling_bps: 100e9,
            server_exe: None,
            server_started_by_up: false,
            same_clock: true,
        }
    }

    /// Whether the probes give one-way delays: toward a node whose clock is
    /// ours (or synchronised with it); a server outside the lab gives round
    /// trips only.
    /// The path's name in progress reports and notes: its scenario's
    /// before it, if any ("fast/raw").
    pub fn label(&self) -> String {
        match &self.scenario {
            Some(s) => format!("{s}/{}", self.path),
            None => self.path.clone(),
        }
    }

    pub fn one_way(&self) -> bool {
        self.to.node().is_some() && self.same_clock
    }

    /// The addresses measured to: the ones given for a node target, the
    /// target's own for an address.
    pub fn target_ips(&self) -> Vec<IpAddr> {
        match &self.to {
            MeasureTarget::Node(_) => [self.ipv4, self.ipv6].into_iter().flatten().collect(),
            MeasureTarget::Address { address, .. } => vec![*address],
        }
    }

    /// Every cell, in the NVR500 study's order: family, protocol, direction, then streams.
    pub fn cells(&self) -> Vec<Cell> {
        let mut v = Vec::new();
        for &streams in &self.streams {
            for &family in &self.families {
                for &protocol in &self.protocols {
                    for &direction in &self.directions {
                        v.push(Cell {
                            family,
                            protocol,
                            direction,
                            streams,
                        });
                    }
                }
            }
        }
        v
    }

    /// Seconds the whole measurement should take, for progress estimates.
    pub fn estimated_seconds(&self) -> f64 {
        let idle = self
            .latency
            .as_ref()
            .map_or(0.0, |l| (l.idle_seconds + 0.3) * self.families.len() as f64);
        idle + self
            .cells()
            .iter()
            .map(|c| match c.protocol {
                Proto::Tcp => self.runs as f64 * (self.duration + 0.3),
                Proto::Udp => {
                    self.runs as f64 * (self.duration + 0.3)
                        // A search that starts from the lab's prediction takes
                        // 3-4 trials, one without up to all of them.
                        + self.udp_max_trials as f64 * 0.5 * (self.trial_duration + 0.3)
                }
            })
            .sum::<f64>()
    }
}

/// The target address of each family: for a node, the one given, or the first
/// address of the target node that routing says the source reaches; for an
/// address outside the lab, that address, its family's only one.
pub fn target_addresses(
    lab: &Running,
    spec: &MeasureSpec,
) -> Result<(Option<IpAddr>, Option<IpAddr>)> {
    let t = &lab.topology;
    let from = t
        .node_index(&spec.from)
        .ok_or_else(|| anyhow!("lab {} has no node \"{}\"", lab.naming.lab, spec.from))?;
    let to_name = match &spec.to {
        MeasureTarget::Node(n) => n,
        MeasureTarget::Address { address, .. } => {
            if spec.ipv4.is_some() || spec.ipv6.is_some() {
                bail!(
                    "a target address is given for {}, which is an address itself",
                    spec.to
                );
            }
            let own = Family::of(*address);
            if let Some(f) = spec.families.iter().find(|f| **f != own) {
                bail!(
                    "{} cannot be measured to {}, an {} address",
                    f.word(),
                    spec.to,
                    own.title()
                );
            }
            return Ok(if address.is_ipv4() {
                (Some(*address), None)
            } else {
                (None, Some(*address))
            });
        }
    };
    let to = t
        .node_index(to_name)
        .ok_or_else(|| anyhow!("lab {} has no node \"{to_name}\"", lab.naming.lab))?;
    if from == to {
        bail!("--from and --to are the same node \"{}\"", spec.from);
    }
    let router = Router::new(t);
    let owned = t.node_addresses(to);
    let pick = |v4: bool, given: Option<IpAddr>| -> Result<Option<IpAddr>> {
        if let Some(a) = given {
            if !owned.iter().any(|(_, n)| n.ip() == a) {
                bail!("{a} is not an address of node \"{to_name}\"");
            }
            return Ok(Some(a));
        }
        Ok(owned
            .iter()
            .map(|(_, n)| n.ip())
            .filter(|a| a.is_ipv4() == v4)
            .find(|a| router.echo_works(from, *a).is_ok()))
    };
    Ok((pick(true, spec.ipv4)?, pick(false, spec.ipv6)?))
}
