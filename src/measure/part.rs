//! One host's share of a lab placed on several hosts (`run --host`): the
//! paths whose source it holds, measured once every far part answers and
//! after the underlays its packets leave by; the results say which hosts
//! each path crossed, so a report can flag a cell at the underlay's capacity.

use super::client_thread::between_tests;
use super::results::{Results, UnderlayResult};
use super::runner::Progress;
use super::session::{Overrides, measure_lab, spec_of};
use super::spec::{MeasureSpec, target_addresses};
use crate::engine::client::{self, ClientOptions};
use crate::engine::params::TestParams;
use crate::lab::Running;
use crate::lab::servers::{NODE_PORT, UNDERLAY_PORT};
use crate::routing::Router;
use crate::topology::Topology;
use anyhow::{Context, Result, anyhow, bail};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Seconds of each underlay measurement, each way.
pub const UNDERLAY_SECONDS: u32 = 3;

/// How the part's run goes: how long far parts have to answer.
pub struct PartRun<'a> {
    pub lab: &'a Running,
    pub overrides: &'a Overrides,
    pub wait: Duration,
    pub cancel: &'a AtomicBool,
}

/// `spec` as measured from a host's part: the target node's server is the one
/// its part's `up` started, and its clock is ours only on the same host or
/// where both hosts declare theirs synchronised.
pub fn on_part(t: &Topology, spec: MeasureSpec) -> MeasureSpec {
    let Some(pl) = &t.placement else { return spec };
    let Some(to) = spec.to.node().and_then(|n| t.node_index(n)) else {
        return spec;
    };
    let host = |n: Option<usize>| n.and_then(|n| pl.node_host[n]).map(|h| &pl.hosts[h]);
    let (a, b) = (host(t.node_index(&spec.from)), host(Some(to)));
    let same_clock = match (a, b) {
        (Some(a), Some(b)) => a.name == b.name || (a.synchronised_clock && b.synchronised_clock),
        _ => true,
    };
    MeasureSpec {
        server_started_by_up: true,
        same_clock,
        ..spec
    }
}

impl PartRun<'_> {
    /// Wait for the far parts, measure the underlays, then the cells.
    pub fn measure(
        &self,
        say: &mut dyn FnMut(&str),
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<Results> {
        let (t, lab) = (&self.lab.topology, self.lab);
        let host = lab.state.host.clone().ok_or_else(|| {
            anyhow!(
                "lab {} was built whole on this machine, not as one host's part",
                lab.naming.lab
            )
        })?;
        let part = t
            .host_part(&host)
            .ok_or_else(|| anyhow!("the lab's topology declares no host {host}"))?;
        let all: Vec<MeasureSpec> = t
            .measurements
            .iter()
            .map(|m| on_part(t, spec_of(m, self.overrides)))
            .collect();
        let ways: Vec<Vec<String>> = all.iter().map(|s| self.way(s)).collect();
        let mine: Vec<usize> = (0..all.len())
            .filter(|&i| {
                t.node_index(&all[i].from)
                    .is_some_and(|n| part.nodes.contains(&n))
            })
            .collect();
        let hops = underlay_hops(&host, &ways);
        let mut far: Vec<String> = far_hosts(&host, mine.iter().map(|&i| &ways[i]));
        far.extend(
            hops.iter()
                .filter(|h| !far.contains(h))
                .cloned()
                .collect::<Vec<_>>(),
        );
        say(&format!(
            "host {host}: waiting up to {} s for host(s) {} to answer",
            self.wait.as_secs(),
            if far.is_empty() {
                "none".into()
            } else {
                far.join(", ")
            }
        ));
        let deadline = Instant::now() + self.wait;
        for h in &far {
            self.wait_for_underlay(h, deadline)?;
        }
        for &i in &mine {
            self.wait_for_node_server(&all[i], &ways[i], deadline)?;
        }
        let mut underlays = Vec::new();
        for to in hops {
            self.interrupted()?;
            say(&format!(
                "host {host}: measuring the underlay to host {to} (TCP, {UNDERLAY_SECONDS} s each way)"
            ));
            underlays.push(self.measure_underlay(&host, &to)?);
        }
        let specs: Vec<MeasureSpec> = mine.iter().map(|&i| all[i].clone()).collect();
        let mut r = measure_lab(lab, &specs, self.cancel, progress)?;
        for (p, &i) in r.paths.iter_mut().zip(&mine) {
            p.hosts = ways[i].clone();
        }
        r.notes.extend(part_notes(t, &all, &ways, &mine));
        // A part that measures no path states the file's method all the same,
        // so the parts of one lab agree on it.
        if let Some(first) = all.first().filter(|_| specs.is_empty()) {
            r.runs_per_cell = first.runs;
            r.duration_per_run = first.duration;
        }
        r.host = Some(host);
        r.underlays = underlays;
        r.reference = t.reference.clone();
        Ok(r)
    }

    fn interrupted(&self) -> Result<()> {
        if self.cancel.load(Ordering::Relaxed) {
            bail!("interrupted");
        }
        Ok(())
    }

    /// The hosts a path's packets cross, by its first target address.
    fn way(&self, spec: &MeasureSpec) -> Vec<String> {
        let t = &self.lab.topology;
        let (Some(from), Ok((v4, v6))) =
            (t.node_index(&spec.from), target_addresses(self.lab, spec))
        else {
            return Vec::new();
        };
        v4.or(v6)
            .map(|a| Router::new(t).hosts_on_the_way(from, a))
            .unwrap_or_default()
    }

    /// Wait until host `name`'s underlay server answers from here: its part
    /// is up, and the underlay carries packets both ways.
    fn wait_for_underlay(&self, name: &str, deadline: Instant) -> Result<()> {
        let at = SocketAddr::new(self.underlay_of(name)?, UNDERLAY_PORT);
        answered(None, at, deadline, self.cancel).map_err(|e| {
            anyhow!(
                "host {name}'s part does not answer: nothing accepted a connection at {at} (its underlay measurement server, which `tunbench up FILE --host {name}` starts) within {} s ({e}); bring that part up first",
                self.wait.as_secs()
            )
        })
    }

    /// Wait until the target node's server answers through the lab.
    fn wait_for_node_server(
        &self,
        spec: &MeasureSpec,
        way: &[String],
        deadline: Instant,
    ) -> Result<()> {
        let Some(to) = spec.to.node() else {
            return Ok(());
        };
        let (v4, v6) = target_addresses(self.lab, spec)?;
        let ns = self.lab.naming.namespace(&spec.from);
        for addr in [v4, v6].into_iter().flatten() {
            let at = SocketAddr::new(addr, NODE_PORT);
            answered(Some(&ns), at, deadline, self.cancel).map_err(|e| {
                anyhow!(
                    "path {}: node {to}'s measurement server at {at} does not answer from node {} within {} s ({e}), though every host's underlay does; the way crosses hosts {}: is each part up with the same file, and its datapaths running (`tunbench status` there)?",
                    spec.path,
                    spec.from,
                    self.wait.as_secs(),
                    way.join(" -> ")
                )
            })?;
        }
        Ok(())
    }

    fn underlay_of(&self, name: &str) -> Result<std::net::IpAddr> {
        self.lab
            .topology
            .placement
            .as_ref()
            .and_then(|pl| pl.hosts.iter().find(|h| h.name == name))
            .map(|h| h.underlay)
            .ok_or_else(|| anyhow!("the topology declares no host {name}"))
    }

    /// TCP, one stream, each way between the two hosts' underlay addresses,
    /// from this host's own namespace (not the lab's).
    fn measure_underlay(&self, from: &str, to: &str) -> Result<UnderlayResult> {
        let (a, b) = (self.underlay_of(from)?, self.underlay_of(to)?);
        let started = Instant::now();
        let one_way = |reverse: bool| -> Result<f64, String> {
            let opts = ClientOptions {
                server: SocketAddr::new(b, UNDERLAY_PORT),
                bind: Some(a),
                params: TestParams {
                    time: UNDERLAY_SECONDS,
                    reverse,
                    ..Default::default()
                },
                connect_timeout: Duration::from_secs(5),
                intervals: false,
                abort: None,
            };
            // The server answers "busy" while it still ends the test before
            // (the other direction's): try again for a moment then.
            let until = Instant::now() + Duration::from_secs(5);
            loop {
                match client::run(&opts) {
                    Err(e) if between_tests(&e) && Instant::now() < until => {
                        std::thread::sleep(Duration::from_millis(50))
                    }
                    r => {
                        return r
                            .map(|r| r.forward().arrived_bps())
                            .map_err(|e| e.to_string());
                    }
                }
            }
        };
        let (up, down) = (one_way(false), one_way(true));
        let error = match (&up, &down) {
            (Err(e), _) => Some(format!("{from} -> {to}: {e}")),
            (_, Err(e)) => Some(format!("{to} -> {from}: {e}")),
            _ => None,
        };
        Ok(UnderlayResult {
            from_host: from.into(),
            to_host: to.into(),
            from_address: a.to_string(),
            to_address: b.to_string(),
            upload_bps: up.ok(),
            download_bps: down.ok(),
            seconds: started.elapsed().as_secs_f64(),
            error,
        })
    }
}

/// Connect to `at` from namespace `ns` (None: this one) until something
/// accepts, or the deadline passes (the last error then).
fn answered(
    ns: Option<&str>,
    at: SocketAddr,
    deadline: Instant,
    cancel: &AtomicBool,
) -> Result<()> {
    let ns = ns.map(str::to_string);
    std::thread::scope(|s| {
        s.spawn(|| -> Result<()> {
            if let Some(ns) = &ns {
                netns::namespace::enter(ns).with_context(|| format!("entering namespace {ns}"))?;
            }
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                let attempt = left.clamp(Duration::from_millis(200), Duration::from_secs(2));
                match std::net::TcpStream::connect_timeout(&at, attempt) {
                    Ok(_) => return Ok(()),
                    Err(e) if Instant::now() >= deadline => bail!("{e}"),
                    Err(_) if cancel.load(Ordering::Relaxed) => bail!("interrupted"),
                    Err(_) => std::thread::sleep(Duration::from_millis(200)),
                }
            }
        })
        .join()
        .map_err(|_| anyhow!("the thread waiting for a server panicked"))?
    })
}

/// The other hosts on the ways of this host's paths, in order of first sight.
fn far_hosts<'a>(host: &str, ways: impl Iterator<Item = &'a Vec<String>>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for h in ways.flatten() {
        if h != host && !out.contains(h) {
            out.push(h.clone());
        }
    }
    out
}

/// The underlays this host measures: every hop from it to the next host on
/// the way of any path of the file (its own or another host's), so each hop
/// is measured once, by the host its packets leave first.
fn underlay_hops(host: &str, ways: &[Vec<String>]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for way in ways {
        for w in way.windows(2) {
            if w[0] == host && !out.contains(&w[1]) {
                out.push(w[1].clone());
            }
        }
    }
    out
}

/// What a part's results say besides the cells: the hosts each path crosses,
/// the paths other hosts measure, and latency across hosts' clocks.
fn part_notes(
    t: &Topology,
    all: &[MeasureSpec],
    ways: &[Vec<String>],
    mine: &[usize],
) -> Vec<String> {
    let mut out = Vec::new();
    for &i in mine {
        let s = &all[i];
        if ways[i].len() > 1 {
            out.push(format!(
                "path {} crosses hosts {} (VXLAN over each underlay between them).",
                s.path,
                ways[i].join(" -> ")
            ));
        }
        if s.latency.is_some() && s.to.node().is_some() && ways[i].len() > 1 {
            out.push(if s.same_clock {
                format!(
                    "path {}: one-way delays between hosts {} and {} rest on their clocks, which the file declares synchronised (synchronised_clock): any offset between them is in every one-way figure.",
                    s.path,
                    ways[i][0],
                    ways[i][ways[i].len() - 1]
                )
            } else {
                format!(
                    "path {}: latency across hosts {} and {} is round trips only: one-way delays need both hosts' clocks declared synchronised (synchronised_clock = true under [hosts.NAME]).",
                    s.path,
                    ways[i][0],
                    ways[i][ways[i].len() - 1]
                )
            });
        }
    }
    // The same words on every host, so a merge keeps one copy.
    let by_host: Vec<String> = all
        .iter()
        .map(|s| {
            let on = t
                .node_index(&s.from)
                .and_then(|n| t.placement.as_ref()?.node_host[n])
                .and_then(|h| t.placement.as_ref().map(|pl| pl.hosts[h].name.clone()))
                .unwrap_or_else(|| "none".into());
            format!("{} from host {on}", s.path)
        })
        .collect();
    if !by_host.is_empty() {
        out.push(format!(
            "each host measures the paths whose source it holds: {}.",
            by_host.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ways(list: &[&[&str]]) -> Vec<Vec<String>> {
        list.iter()
            .map(|w| w.iter().map(|h| h.to_string()).collect())
            .collect()
    }

    /// Each hop is measured by the host its packets leave first.
    #[test]
    fn each_underlay_hop_is_measured_by_the_host_it_leaves() {
        let w = ways(&[&["pc", "router", "server"], &["pc", "router", "server"]]);
        assert_eq!(underlay_hops("pc", &w), ["router"]);
        assert_eq!(underlay_hops("router", &w), ["server"]);
        assert!(underlay_hops("server", &w).is_empty());
        assert_eq!(far_hosts("pc", w.iter()), ["router", "server"]);
    }

    /// On one host the clock is shared; across hosts only where both declare
    /// theirs synchronised.
    #[test]
    fn one_way_delays_across_hosts_need_both_clocks_declared_synchronised() {
        let file = concat!(env!("CARGO_MANIFEST_DIR"), "/topologies/home-split.toml");
        let text = std::fs::read_to_string(file).unwrap();
        let load =
            |text: &str| crate::topology::parse_str(text, std::path::Path::new(file)).unwrap();
        let spec = |t: &Topology| on_part(t, spec_of(&t.measurements[0], &Overrides::default()));
        let t = load(&text);
        let s = spec(&t);
        assert!(s.server_started_by_up && !s.same_clock && !s.one_way());
        let synced = text.replace("mtu = 1550\n", "mtu = 1550\nsynchronised_clock = true\n");
        assert!(spec(&load(&synced)).one_way());
        let one = text
            .replace("mtu = 1550\n", "mtu = 1550\nsynchronised_clock = true\n")
            .replacen("synchronised_clock = true\n", "", 1);
        assert!(
            !spec(&load(&one)).one_way(),
            "the pc's host did not declare it"
        );
    }
}
