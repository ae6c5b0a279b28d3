//! The reach matrix (`tunbench check`): built nodes send ICMP echoes to the
//! addresses of other nodes from inside their namespaces, and the replies are
//! compared with what the routing model says must work. External nodes are
//! probed, never probing. Which pairs are probed is the [`Mode`]'s choice.

mod pairs;
mod sweep;

use crate::plan::Naming;
use crate::routing::Router;
use crate::topology::Topology;
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
    let router = Router::new(t);
    let addresses: Vec<Vec<(String, IpNetwork)>> =
        (0..t.nodes.len()).map(|i| t.node_addresses(i)).collect();
    // External devices answer echoes but cannot be made to send them.
    let sources: Vec<usize> = (0..t.nodes.len())
        .filter(|&s| t.nodes[s].kind.is_built())
        .collect();
    let (picked, sampled) = pairs::pick(t, &router, &addresses, &sources, mode);
    let neighbours = pairs::neighbour_limit(t, &addresses);
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
    })
}
