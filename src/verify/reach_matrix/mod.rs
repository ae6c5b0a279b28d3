//! The reach matrix (`tunbench check`): built nodes send ICMP echoes to the
//! addresses of other nodes from inside their namespaces, and the replies are
//! compared with what the routing model says must work. External nodes are
//! probed, never probing. Which pairs are probed is the [`Mode`]'s choice.
//! On one host's part of a lab placed on several hosts, only the nodes that
//! host holds probe, toward every address of the whole lab (the routing
//! model covers all of it); the other hosts' nodes are listed, not probed.

mod pairs;
mod sweep;

use crate::plan::Naming;
use crate::routing::Router;
use crate::topology::Topology;
use crate::topology::hosts::HostPart;
use ipnetwork::IpNetwork;
use serde::Serialize;
use std::io;
use std::net::IpAddr;

/// One echo from one node to one address of another.
#[derive(Debug, Clone, Serialize)]
pub struct Probe {
    pub from: String,
    pub to: String,
    pub iface: String,
    pub addr: IpAddr,
    /// What the routing model says: None when the echo must succeed, else why not.
    pub unreachable_because: Option<String>,
    pub replied: bool,
}

impl Probe {
    pub fn expected(&self) -> bool {
        self.unreachable_because.is_none()
    }
    /// Routing says it works and it did not.
    pub fn failed(&self) -> bool {
        self.expected() && !self.replied
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub lab: String,
    /// Which probes were sent: "all", "segments" or "sample" (`Mode`).
    pub mode: String,
    /// How many (source, address) pairs the all-pairs mode would probe.
    pub all_pairs: usize,
    /// Some when the lab needs more neighbour entries than the host allows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub neighbours: Option<NeighbourLimit>,
    /// In sample mode, what the sample drew.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampled: Option<Sampled>,
    pub probes: Vec<Probe>,
    /// The host whose part was probed; None: the whole lab, on one machine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// On a host's part: the built nodes other hosts hold, which this check
    /// did not probe from (each host's own `check` does), by host.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub probed_elsewhere: Vec<ProbedElsewhere>,
}

/// A host of the lab other than the one probed, and the nodes it probes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProbedElsewhere {
    pub host: String,
    pub nodes: Vec<String>,
}

impl Report {
    pub fn failures(&self) -> impl Iterator<Item = &Probe> {
        self.probes.iter().filter(|p| p.failed())
    }
}

/// Which probes are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Every node to every address of every other node: n^2.
    All,
    /// Every node to the addresses its neighbours hold on each segment it is on:
    /// every link, address and ARP / ND exchange, but no routed path.
    Segments,
    /// Segments, and `n` random pairs (from the all-pairs set) that routing says
    /// must answer, drawn with `seed` so that a run can be repeated.
    Sample { n: usize, seed: u64 },
}

/// Up to this many built nodes, the automatic mode probes all pairs; above, it samples.
pub const AUTO_ALL_UP_TO: usize = 100;
/// A sample's number of routed pairs unless the caller says otherwise.
pub const DEFAULT_SAMPLE: usize = 1000;

impl Mode {
    /// The automatic choice for a lab of `built` nodes tunbench made: all
    /// pairs up to [`AUTO_ALL_UP_TO`], else a sample of `n` routed pairs.
    pub fn auto(built: usize, n: usize, seed: u64) -> Mode {
        if built <= AUTO_ALL_UP_TO {
            Mode::All
        } else {
            Mode::Sample { n, seed }
        }
    }

    /// The mode as [`Report::mode`] names it.
    pub fn name(&self) -> &'static str {
        match self {
            Mode::All => "all",
            Mode::Segments => "segments",
            Mode::Sample { .. } => "sample",
        }
    }
}

/// This lab's neighbour entries (one per node and neighbour address on a
/// segment) against the host's limit, when they do not fit.
#[derive(Debug, Clone, Serialize)]
pub struct NeighbourLimit {
    pub ipv4: usize,
    pub ipv6: usize,
    pub ipv4_limit: usize,
    pub ipv6_limit: usize,
}

/// What a sample drew.
#[derive(Debug, Clone, Serialize)]
pub struct Sampled {
    pub seed: u64,
    /// Pairs drawn from all pairs.
    pub drawn: usize,
    /// Of those, the ones routing says must answer, which were probed.
    pub must: usize,
}

/// Probes the running lab `t` (its namespaces named by `naming`) in `mode`.
pub fn run(t: &Topology, naming: &Naming, mode: Mode) -> io::Result<Report> {
    run_part(t, naming, mode, None)
}

/// `run` on one host's `part` of a lab placed on several hosts (the whole
/// lab when None): the part's nodes probe every address of the lab.
pub fn run_part(
    t: &Topology,
    naming: &Naming,
    mode: Mode,
    part: Option<&HostPart>,
) -> io::Result<Report> {
    let router = Router::new(t);
    let addresses: Vec<Vec<(String, IpNetwork)>> =
        (0..t.nodes.len()).map(|i| t.node_addresses(i)).collect();
    // External devices answer echoes but cannot be made to send them; nodes
    // on other hosts have no namespace here.
    let sources: Vec<usize> = (0..t.nodes.len())
        .filter(|&s| t.nodes[s].kind.is_built())
        .filter(|s| part.is_none_or(|p| p.nodes.contains(s)))
        .collect();
    let (picked, sampled) = pairs::pick(t, &router, &addresses, &sources, mode);
    let neighbours = pairs::neighbour_limit(t, &addresses, &sources);
    let mut probes: Vec<Probe> = picked
        .iter()
        .map(|&(s, d, k)| {
            let (iface, a) = &addresses[d][k];
            Probe {
                from: t.nodes[s].name.clone(),
                to: t.nodes[d].name.clone(),
                iface: iface.clone(),
                addr: a.ip(),
                unreachable_because: router.echo_works(s, a.ip()).err(),
                replied: false,
            }
        })
        .collect();
    sweep::send_all(t, naming, &sources, &picked, &mut probes)?;
    Ok(Report {
        lab: naming.lab.clone(),
        mode: mode.name().to_string(),
        all_pairs: pairs::all_pairs(&addresses, &sources),
        sampled,
        neighbours,
        probes,
        host: part.map(|p| p.host.clone()),
        probed_elsewhere: part.map_or_else(Vec::new, |p| probed_elsewhere(t, p)),
    })
}

/// The built nodes of `t` that hosts other than `part`'s hold, by host in
/// the order of `[hosts]`.
fn probed_elsewhere(t: &Topology, part: &HostPart) -> Vec<ProbedElsewhere> {
    let Some(pl) = &t.placement else {
        return Vec::new();
    };
    pl.hosts
        .iter()
        .enumerate()
        .filter(|(_, h)| h.name != part.host)
        .map(|(k, h)| ProbedElsewhere {
            host: h.name.clone(),
            nodes: (0..t.nodes.len())
                .filter(|&n| pl.node_host[n] == Some(k) && t.nodes[n].kind.is_built())
                .map(|n| t.nodes[n].name.clone())
                .collect(),
        })
        .filter(|e| !e.nodes.is_empty())
        .collect()
}
