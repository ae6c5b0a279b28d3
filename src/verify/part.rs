//! `[[assert]]` entries on one host's part of a lab placed on several hosts
//! (`tunbench test FILE --host NAME`), the part already up and left up.
//!
//! An assertion is checked on the host that holds every node its check runs
//! in: reach and path MTU in `from` (the echoes go to any node, across
//! hosts), a command in `node`, a tunnel's overhead in both peers (echoes
//! from one, a capture on the other), a throughput cell in both ends of each
//! path it reads (client and server). The other hosts list it as skipped,
//! left to that host. One whose nodes are on several hosts is checked by no
//! part: every host lists it as skipped and says why.

use super::suites::{Event, TestFile};
use super::{Outcome, Suite, Verdict, runs_in};
use crate::lab::{self as labs, Running};
use crate::topology::Topology;
use crate::topology::assertion::{Assertion, Check};
use crate::topology::scenario::Scenario;
use std::collections::BTreeSet;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

/// Where an assertion on a lab placed on several hosts is checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// Every node it runs in is on this host (or it runs in none).
    Here,
    /// Every node it runs in is on this other host.
    Host(String),
    /// Its nodes are on these hosts, several: no part checks it.
    Across(Vec<String>),
}

/// Where `a` of `t` is checked, seen from host `host`.
pub fn place(a: &Assertion, t: &Topology, host: &str) -> Place {
    let Some(pl) = &t.placement else {
        return Place::Here;
    };
    let hosts: BTreeSet<&str> = nodes_of(a, t)
        .iter()
        .filter_map(|n| t.node_index(n))
        .filter_map(|i| pl.node_host[i])
        .map(|h| pl.hosts[h].name.as_str())
        .collect();
    match hosts.len() {
        0 => Place::Here,
        1 if hosts.contains(host) => Place::Here,
        1 => Place::Host(hosts.into_iter().next().unwrap_or_default().to_string()),
        _ => Place::Across(hosts.into_iter().map(String::from).collect()),
    }
}

/// The nodes `a`'s check runs in (external ones included; they have no host).
fn nodes_of(a: &Assertion, t: &Topology) -> Vec<String> {
    match &a.check {
        Check::Reach { from, .. } | Check::PathMtu { from, .. } => vec![from.clone()],
        Check::Command { node, .. } => vec![node.clone()],
        Check::Overhead { tunnel, .. } => t
            .tunnels
            .iter()
            .find(|x| &x.name == tunnel)
            .and_then(|x| x.overlay())
            .map(|w| {
                let near = &w.peers[0];
                let far = w.neighbours(0).first().map(|&k| &w.peers[k]);
                std::iter::once(near)
                    .chain(far)
                    .map(|p| t.nodes[p.node].name.clone())
                    .collect()
            })
            .unwrap_or_default(),
        Check::Throughput { expect, .. } => {
            let Ok(e) = super::expectation(expect) else {
                return Vec::new();
            };
            let (paths, _) = super::paths_of(&e, t);
            t.measurements
                .iter()
                .filter(|m| paths.contains(&m.name))
                .flat_map(|m| std::iter::once(m.from.clone()).chain(m.to.node().map(String::from)))
                .collect()
        }
    }
}

/// Why an assertion placed elsewhere is not checked here, in words.
fn reason(a: &Assertion, t: &Topology, p: &Place) -> String {
    let nodes = nodes_of(a, t);
    let nodes = format!(
        "{} {}",
        if nodes.len() == 1 { "node" } else { "nodes" },
        nodes.join(" and ")
    );
    match p {
        Place::Here => String::new(),
        Place::Host(h) => format!("left to host {h}, which holds {nodes}"),
        Place::Across(hosts) => format!(
            "checked on no host: it runs in {nodes}, on hosts {}, and a part checks only what it holds",
            hosts.join(" and ")
        ),
    }
}

/// A file's lab, up as host `host`'s part, and the variant it runs.
pub struct Part<'a> {
    pub file: &'a TestFile,
    pub scenario: Option<&'a Scenario>,
    pub running: Running,
}

impl Part<'_> {
    fn topology(&self) -> &Topology {
        self.scenario.map_or(&self.file.topology, |s| &s.topology)
    }
}

/// Each file's lab, which must be up here as host `host`'s part (built by
/// `up FILE --host NAME`, in `scenario` when one is given); in words, why
/// not. Nothing is checked until every file's part is found.
pub fn find<'a>(
    files: &'a [TestFile],
    scenario: Option<&str>,
    host: &str,
) -> Result<Vec<Part<'a>>, String> {
    let mut parts = Vec::new();
    for f in files {
        let file = f.file.display();
        let Some(pl) = &f.topology.placement else {
            return Err(format!(
                "--host {host}: {file} declares no [hosts]; it is one machine's lab: `tunbench test {file}` brings it up, checks it and takes it down"
            ));
        };
        if pl.host_index(host).is_none() {
            let hosts: Vec<&str> = pl.hosts.iter().map(|h| h.name.as_str()).collect();
            return Err(format!(
                "--host {host}: {file} declares no such host; its hosts: {}",
                hosts.join(", ")
            ));
        }
        let up = format!("tunbench up {file} --host {host} --name {}", f.lab);
        let running = labs::find(&f.lab).map_err(|e| {
            format!("{e}: bring host {host}'s part up first with `{up}`, then test it")
        })?;
        match running.state.host.as_deref() {
            Some(h) if h == host => {}
            Some(h) => {
                return Err(format!(
                    "lab {} on this machine is host {h}'s part, not host {host}'s; pass --host {h}",
                    f.lab
                ));
            }
            None => {
                return Err(format!(
                    "lab {} on this machine is a whole lab, not host {host}'s part (`{up}` builds one); test it without --host",
                    f.lab
                ));
            }
        }
        let scenario = scenario.and_then(|s| f.scenarios.iter().find(|x| x.name == s));
        parts.push(Part {
            file: f,
            scenario,
            running,
        });
    }
    Ok(parts)
}

/// Checks, in each part, the assertions of its variant placed on `host`;
/// the others are skipped verdicts that name where they are checked. The
/// parts stay up.
pub fn run(
    parts: &[Part],
    host: &str,
    cancel: &AtomicBool,
    on: &mut (dyn FnMut(Event) + Send),
) -> Vec<Suite> {
    let mut suites = Vec::new();
    for p in parts {
        let started = Instant::now();
        let scenario = p.scenario.map(|s| s.name.clone());
        let t = p.topology();
        let todo: Vec<&Assertion> = t
            .assertions
            .iter()
            .filter(|a| runs_in(a, scenario.as_deref()))
            .collect();
        let name = Suite::name_of(&p.file.file, scenario.as_deref());
        on(Event::Suite {
            name: &name,
            lab: &format!("{}, host {host}'s part", p.file.lab),
        });
        let skip = |a: &Assertion| match place(a, t, host) {
            Place::Here => None,
            elsewhere => Some(reason(a, t, &elsewhere)),
        };
        let verdicts =
            super::run::assertions_where(&p.running, &todo, t, cancel, &skip, &mut |v| {
                on(Event::Verdict {
                    suite: &name,
                    verdict: v,
                })
            });
        suites.push(Suite {
            file: p.file.file.clone(),
            scenario,
            lab: p.file.lab.clone(),
            verdicts,
            seconds: started.elapsed().as_secs_f64(),
            error: None,
        });
    }
    suites
}

/// A verdict of an assertion not checked here, and why.
pub(super) fn skipped(a: &Assertion, t: &Topology, why: String) -> Verdict {
    Verdict {
        name: a.name.clone(),
        kind: a.check.kind(),
        outcome: Outcome::Skipped,
        measured: why,
        expected: super::run::expected(a, t),
        seconds: 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// home-split.toml (pc, nvr and server on hosts pc, router and server)
    /// and an assertion of each kind.
    fn split() -> Topology {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("topologies");
        let text = std::fs::read_to_string(dir.join("home-split.toml")).unwrap();
        let more = r#"
[[assert]]
name = "nvr-forwards"
kind = "command"
node = "nvr"
run = ["sysctl", "net.ipv4.ip_forward"]

[[assert]]
name = "server-reaches-pc"
kind = "reach"
from = "server"
to = "pc"
family = "ipv6"

[[assert]]
name = "wg-fast"
kind = "throughput"
expect = "wireguard:ipv4.tcp.sender >= 20M"

[[assert]]
name = "wg-overhead"
kind = "overhead"
tunnel = "wg"
"#;
        crate::topology::parse_str(&(text + more), &dir.join("home-split.toml")).unwrap()
    }

    #[test]
    fn each_kind_is_checked_where_its_nodes_are() {
        let t = split();
        let at = |name: &str, host: &str| {
            let a = t.assertions.iter().find(|a| a.name == name).unwrap();
            place(a, &t, host)
        };
        assert_eq!(at("pc-reaches-server-ipv4", "pc"), Place::Here);
        assert_eq!(at("tunnel-mtu-ipv4", "router"), Place::Host("pc".into()));
        assert_eq!(at("nvr-forwards", "router"), Place::Here);
        assert_eq!(at("nvr-forwards", "server"), Place::Host("router".into()));
        assert_eq!(at("server-reaches-pc", "pc"), Place::Host("server".into()));
        let across = Place::Across(vec!["pc".into(), "server".into()]);
        assert_eq!(at("wg-fast", "pc"), across);
        assert_eq!(at("wg-overhead", "router"), across);
        let a = t.assertions.iter().find(|a| a.name == "wg-fast").unwrap();
        assert_eq!(
            reason(a, &t, &across),
            "checked on no host: it runs in nodes pc and server, on hosts pc and server, and a part checks only what it holds"
        );
    }
}
