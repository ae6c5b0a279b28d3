//! `tunbench check`: the reach matrix of a running lab
//! ([`crate::verify::reach_matrix`]), printed as a table (all pairs) or as
//! totals and failures (the other modes). On one host's part of a lab placed
//! on several hosts, the part's nodes probe every address of the lab and the
//! output names the hosts whose nodes it did not probe from.

use crate::lab;
use crate::topology::Topology;
use crate::verify::reach_matrix::{
    self, DEFAULT_SAMPLE, Mode, NeighbourLimit, Probe, ProbedElsewhere, Report,
};
use anyhow::Context;
use std::collections::HashMap;

/// `--mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ModeArg {
    /// all up to 100 nodes, sample above.
    Auto,
    All,
    Segments,
    Sample,
}

/// What `--mode` (and `--sample N`, which alone means sample) ask for in a
/// lab of `built` nodes tunbench made.
fn choose(arg: ModeArg, sample: Option<usize>, seed: u64, built: usize) -> Mode {
    let n = sample.unwrap_or(DEFAULT_SAMPLE);
    match (arg, sample) {
        (ModeArg::All, _) => Mode::All,
        (ModeArg::Segments, _) => Mode::Segments,
        (ModeArg::Sample, _) | (ModeArg::Auto, Some(_)) => Mode::Sample { n, seed },
        (ModeArg::Auto, None) => Mode::auto(built, n, seed),
    }
}

#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    pub lab: String,
    #[arg(long)]
    pub json: bool,
    /// Which probes: all pairs (n^2), each segment's neighbours, or those and a
    /// random sample of routed pairs; auto: all up to 100 nodes, sample above.
    #[arg(long, value_enum, default_value = "auto")]
    pub mode: ModeArg,
    /// Routed pairs a sample draws (default 1000); alone it means --mode sample.
    #[arg(long, value_name = "N")]
    pub sample: Option<usize>,
    /// The sample's seed: the same seed draws the same pairs.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// The command: probe a running lab, print the matrix; exit 1 on any failure.
pub fn check(a: CheckArgs) -> anyhow::Result<i32> {
    let CheckArgs {
        lab: l,
        json,
        mode,
        sample,
        seed,
    } = a;
    let running = lab::find(&l)?;
    let t = &running.topology;
    let part = match &running.state.host {
        Some(h) => Some(t.host_part(h).ok_or_else(|| {
            super::bad_input(format!(
                "lab {l} is host {h}'s part, but the topology it was built from declares no host {h}"
            ))
        })?),
        None => None,
    };
    // The whole lab's count, so that every host of a split lab picks the
    // same mode.
    let built = t.nodes.iter().filter(|n| n.kind.is_built()).count();
    let mode = choose(mode, sample, seed, built);
    let report =
        reach_matrix::run_part(t, &running.naming, mode, part.as_ref()).context("probing")?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render(t, &report));
    }
    Ok(if report.failures().next().is_some() {
        1
    } else {
        0
    })
}

/// In all-pairs mode, the matrix: a row per source, a column per destination
/// node; each cell counts replies over addresses. `!` marks a cell with an
/// address that routing says must answer and did not; `+` one that answered
/// though routing says it cannot. The other modes print the totals, the mode
/// and each failure (a matrix of a thousand columns helps nobody).
pub fn render(t: &Topology, r: &Report) -> String {
    let mut s = if r.mode == Mode::All.name() {
        matrix(t, r)
    } else {
        String::new()
    };
    let total = r.probes.len();
    let ok = r.probes.iter().filter(|p| p.replied).count();
    let expected = r.probes.iter().filter(|p| p.expected()).count();
    let failed = r.failures().count();
    if !s.is_empty() {
        s.push('\n');
    }
    s += &format!(
        "{ok} of {total} addresses answered; routing says {expected} must; {failed} did not.\n"
    );
    if r.mode == Mode::All.name() {
        s += "cells: replies/addresses; - none expected by routing; ! expected but silent; + answered though routing says it cannot\n";
    } else {
        let extra = r
            .probes
            .iter()
            .filter(|p| p.replied && !p.expected())
            .count();
        if extra > 0 {
            s += &format!("{extra} answered though routing says they cannot.\n");
        }
    }
    s += &describe_mode(r);
    if let Some(n) = &r.neighbours {
        s += &neighbour_note(n);
    }
    s += &part_lines(t, r);
    for p in r.failures() {
        let far = far_host(t, r, &p.to)
            .map(|h| format!(", on host {h}"))
            .unwrap_or_default();
        s += &format!(
            "FAIL {} -> {} ({}:{}{far}): no reply\n",
            p.from, p.addr, p.to, p.iface
        );
    }
    s
}

/// On a host's part: which host's nodes probed, which hosts' nodes were left
/// to their own `check`, and how many failures went toward other hosts.
fn part_lines(t: &Topology, r: &Report) -> String {
    let Some(host) = &r.host else {
        return String::new();
    };
    let mut s = format!("host {host}'s part: probes from the nodes it holds only\n");
    if !r.probed_elsewhere.is_empty() {
        let hosts: Vec<String> = r.probed_elsewhere.iter().map(elsewhere).collect();
        s += &format!(
            "probes from nodes on other hosts: run `tunbench check` there: {}\n",
            hosts.join(", ")
        );
    }
    let across = r
        .failures()
        .filter(|p| far_host(t, r, &p.to).is_some())
        .count();
    if across > 0 {
        let port = t.placement.as_ref().map_or(0, |p| p.vxlan_port);
        s += &format!(
            "{across} failed toward nodes on other hosts: is each far host's part up \
             (`tunbench status {}` there) and does the underlay between the hosts pass UDP port {port}?\n",
            r.lab
        );
    }
    s
}

/// `router (nvr)`, or `router (n1, n2, n3 and 997 more)`.
fn elsewhere(e: &ProbedElsewhere) -> String {
    const SHOWN: usize = 3;
    let mut names = e.nodes[..e.nodes.len().min(SHOWN)].join(", ");
    if e.nodes.len() > SHOWN {
        names += &format!(" and {} more", e.nodes.len() - SHOWN);
    }
    format!("{} ({names})", e.host)
}

/// On a host's part, the other host that holds node `node`; None on the
/// part's own nodes, external ones and a lab on one machine.
fn far_host<'a>(t: &'a Topology, r: &Report, node: &str) -> Option<&'a str> {
    let here = r.host.as_deref()?;
    let pl = t.placement.as_ref()?;
    let h = pl.node_host[t.node_index(node)?]?;
    let name = pl.hosts[h].name.as_str();
    (name != here).then_some(name)
}

/// The line that says which probes were sent and how they relate to all pairs.
fn describe_mode(r: &Report) -> String {
    let total = r.probes.len();
    match r.mode.as_str() {
        "all" => format!(
            "mode: all pairs, every node to every address of every other node ({total} probes)\n"
        ),
        "segments" => format!(
            "mode: segments, every node to its neighbours' addresses on each link and switch \
             ({total} of {} pairs; no routed path is probed; --mode all probes every pair)\n",
            r.all_pairs
        ),
        _ => {
            let (seed, drawn, must) = r
                .sampled
                .as_ref()
                .map_or((0, 0, 0), |x| (x.seed, x.drawn, x.must));
            format!(
                "mode: sample, every node to its neighbours on each segment and {must} random pairs \
                 that routing says must answer, found in {drawn} draws (seed {seed}) of the {} pairs \
                 ({total} probes; --mode all probes every pair)\n",
                r.all_pairs
            )
        }
    }
}

fn matrix(t: &Topology, r: &Report) -> String {
    let dsts: Vec<&str> = (0..t.nodes.len())
        .filter(|&i| !t.node_addresses(i).is_empty())
        .map(|i| t.nodes[i].name.as_str())
        .collect();
    // (from, to) -> its probes, gathered once: a cell must not scan every probe.
    let mut cells: HashMap<(&str, &str), Vec<&Probe>> = HashMap::new();
    for p in &r.probes {
        cells
            .entry((p.from.as_str(), p.to.as_str()))
            .or_default()
            .push(p);
    }
    let w0 = t
        .nodes
        .iter()
        .map(|n| n.name.len())
        .max()
        .unwrap_or(4)
        .max(9);
    let wc = dsts.iter().map(|d| d.len()).max().unwrap_or(5).max(6);
    let mut s = format!("{:<w0$}", "from \\ to");
    for d in &dsts {
        s += &format!(" {d:>wc$}");
    }
    s.push('\n');
    // On a host's part, rows only for the nodes probed from here.
    let elsewhere: std::collections::HashSet<&str> = r
        .probed_elsewhere
        .iter()
        .flat_map(|e| e.nodes.iter().map(String::as_str))
        .collect();
    for src in t
        .nodes
        .iter()
        .filter(|n| !elsewhere.contains(&n.name.as_str()))
    {
        s += &format!("{:<w0$}", src.name);
        for d in &dsts {
            let cell: &[&Probe] = cells
                .get(&(src.name.as_str(), *d))
                .map_or(&[], |v| v.as_slice());
            let text = if src.name == *d {
                "·".to_string()
            } else {
                let ok = cell.iter().filter(|p| p.replied).count();
                let mark = if cell.iter().any(|p| p.failed()) {
                    "!"
                } else if cell.iter().any(|p| p.replied && !p.expected()) {
                    "+"
                } else {
                    ""
                };
                if ok == 0 && cell.iter().all(|p| !p.expected()) {
                    format!("-{mark}")
                } else {
                    format!("{ok}/{}{mark}", cell.len())
                }
            };
            s += &format!(" {text:>wc$}");
        }
        s.push('\n');
    }
    s
}

/// The note that says the host's neighbour tables are too small for the lab,
/// and how to make them larger.
fn neighbour_note(n: &NeighbourLimit) -> String {
    let want = n.ipv4.max(n.ipv6).next_power_of_two() * 2;
    format!(
        "note: this lab needs {} IPv4 and {} IPv6 neighbour (ARP / ND) entries, but the kernel \
         keeps at most {} and {} for all namespaces together (net.ipv4/ipv6.neigh.default.gc_thresh3, \
         host-wide, which tunbench does not change): neighbours past that stay unresolved and \
         their probes unanswered. To raise it on this machine: sysctl -w \
         net.ipv4.neigh.default.gc_thresh3={want} net.ipv6.neigh.default.gc_thresh3={want} \
         net.ipv4.neigh.default.gc_thresh2={want} net.ipv6.neigh.default.gc_thresh2={want}\n",
        n.ipv4, n.ipv6, n.ipv4_limit, n.ipv6_limit
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::reach_matrix::AUTO_ALL_UP_TO;

    #[test]
    fn another_host_names_a_few_of_its_nodes() {
        let e = |n: usize| ProbedElsewhere {
            host: "router".into(),
            nodes: (1..=n).map(|k| format!("r{k}")).collect(),
        };
        assert_eq!(elsewhere(&e(1)), "router (r1)");
        assert_eq!(elsewhere(&e(3)), "router (r1, r2, r3)");
        assert_eq!(elsewhere(&e(1000)), "router (r1, r2, r3 and 997 more)");
    }

    #[test]
    fn auto_probes_all_pairs_up_to_the_limit_and_samples_above() {
        let auto = |built| choose(ModeArg::Auto, None, 1, built);
        assert_eq!(auto(2), Mode::All);
        assert_eq!(auto(AUTO_ALL_UP_TO), Mode::All);
        assert_eq!(
            auto(AUTO_ALL_UP_TO + 1),
            Mode::Sample {
                n: DEFAULT_SAMPLE,
                seed: 1
            }
        );
        assert_eq!(choose(ModeArg::All, None, 1, 5000), Mode::All);
        assert_eq!(choose(ModeArg::Segments, Some(9), 1, 5), Mode::Segments);
        // --sample alone asks for a sample, also in a small lab.
        assert_eq!(
            choose(ModeArg::Auto, Some(9), 7, 5),
            Mode::Sample { n: 9, seed: 7 }
        );
    }
}
