//! Which (source, address) pairs the reach matrix probes, in each mode, and
//! whether the host's neighbour tables can hold what they need.

use super::{Mode, NeighbourLimit, Sampled};
use crate::routing::Router;
use crate::topology::Topology;
use ipnetwork::IpNetwork;
use std::collections::{BTreeSet, HashSet};

/// (source node, destination node, index in the destination's addresses).
pub type Pair = (usize, usize, usize);

/// The most pairs a sample draws before it settles for fewer than it was asked.
const MAX_DRAWS: usize = 200_000;

/// How many (source, address) pairs the all-pairs mode probes.
pub fn all_pairs(addresses: &[Vec<(String, IpNetwork)>], sources: &[usize]) -> usize {
    sources
        .iter()
        .map(|&s| {
            (0..addresses.len())
                .filter(|&d| d != s)
                .map(|d| addresses[d].len())
                .sum::<usize>()
        })
        .sum()
}

/// The pairs `mode` probes, in all-pairs order, and what a sample drew.
pub fn pick(
    t: &Topology,
    router: &Router,
    addresses: &[Vec<(String, IpNetwork)>],
    sources: &[usize],
    mode: Mode,
) -> (Vec<Pair>, Option<Sampled>) {
    match mode {
        Mode::All => {
            let mut picked = Vec::new();
            for &s in sources {
                for d in (0..t.nodes.len()).filter(|&d| d != s) {
                    picked.extend((0..addresses[d].len()).map(|k| (s, d, k)));
                }
            }
            (picked, None)
        }
        Mode::Segments => (neighbours_on_segments(t, addresses, sources), None),
        Mode::Sample { n, seed } => {
            let mut picked = neighbours_on_segments(t, addresses, sources);
            let (extra, drawn) = sample_routed(t, router, addresses, sources, &picked, n, seed);
            let sampled = Sampled {
                seed,
                drawn,
                must: extra.len(),
            };
            picked.extend(extra);
            picked.sort_unstable();
            (picked, Some(sampled))
        }
    }
}

/// The kernel keeps ARP and ND entries in one table per family for all
/// namespaces together, of at most `gc_thresh3` entries (1024 by default), a
/// host-wide setting that tunbench leaves alone: a lab with more
/// neighbours than that cannot resolve them all, and probes past the limit go
/// unanswered ("neighbor table overflow" in the kernel log). Some when this lab
/// alone (its nodes among `sources`, those on this machine) needs more than
/// the limit.
pub fn neighbour_limit(
    t: &Topology,
    addresses: &[Vec<(String, IpNetwork)>],
    sources: &[usize],
) -> Option<NeighbourLimit> {
    let on_segments = neighbours_on_segments(t, addresses, sources);
    let need = |v4: bool| {
        on_segments
            .iter()
            .filter(|&&(_, d, k)| addresses[d][k].1.is_ipv4() == v4)
            .count()
    };
    let limit = |key: &str| {
        netns::sysctl::read(key)
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
    };
    let n = NeighbourLimit {
        ipv4: need(true),
        ipv6: need(false),
        ipv4_limit: limit("net.ipv4.neigh.default.gc_thresh3")?,
        ipv6_limit: limit("net.ipv6.neigh.default.gc_thresh3")?,
    };
    (n.ipv4 > n.ipv4_limit || n.ipv6 > n.ipv6_limit).then_some(n)
}

/// Up to `n` random pairs, none of them in `have`, that routing says must
/// answer. Drawn uniformly from all pairs and kept when the model says so, at
/// most `MAX_DRAWS` draws (the model costs a walk along the path; all pairs of
/// a big lab would take minutes). Returns them and how many pairs were drawn.
fn sample_routed(
    t: &Topology,
    router: &Router,
    addresses: &[Vec<(String, IpNetwork)>],
    sources: &[usize],
    have: &[Pair],
    n: usize,
    seed: u64,
) -> (Vec<Pair>, usize) {
    let have: HashSet<&Pair> = have.iter().collect();
    let flat: Vec<(usize, usize)> = (0..t.nodes.len())
        .flat_map(|d| (0..addresses[d].len()).map(move |k| (d, k)))
        .collect();
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut tried = HashSet::new();
    let mut out = Vec::new();
    let space = sources.len() * flat.len();
    let mut misses = 0usize;
    if flat.is_empty() || sources.is_empty() {
        return (out, 0);
    }
    while out.len() < n && tried.len() < MAX_DRAWS.min(space) && misses < 8 * MAX_DRAWS {
        let s = sources[rng.usize(..sources.len())];
        let (d, k) = flat[rng.usize(..flat.len())];
        if d == s || !tried.insert((s, d, k)) {
            misses += 1;
            continue;
        }
        if have.contains(&(s, d, k)) {
            continue;
        }
        if router.echo_works(s, addresses[d][k].1.ip()).is_ok() {
            out.push((s, d, k));
        }
    }
    (out, tried.len())
}

/// Each of `sources` (built nodes) to every address its neighbours hold on
/// the devices that share a segment with it (a link's other end, a switch's
/// other ports and bridge).
fn neighbours_on_segments(
    t: &Topology,
    addresses: &[Vec<(String, IpNetwork)>],
    sources: &[usize],
) -> Vec<Pair> {
    let sources: HashSet<usize> = sources.iter().copied().collect();
    let mut out = BTreeSet::new();
    for seg in t.segments() {
        for (s, _) in seg.iter().filter(|(s, _)| sources.contains(s)) {
            for (d, dev) in seg.iter().filter(|(d, _)| d != s) {
                for (k, (on, _)) in addresses[*d].iter().enumerate() {
                    if on == dev {
                        out.insert((*s, *d, k));
                    }
                }
            }
        }
    }
    out.into_iter().collect()
}
