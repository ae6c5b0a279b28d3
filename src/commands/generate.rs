//! `tunbench gen chain` and `gen star`: generated labs for scale tests and
//! benchmarks. A chain is N nodes in a line, a host at each end and routers in
//! between, with routes so that the two end hosts reach each other; a star is
//! a router with N-1 hosts around it, each on its own link. With `--hosts N`
//! either is placed on N machines (`[hosts.hostK]`), each holding a run of
//! consecutive nodes, and the links between runs cross machines (VXLAN).

use super::bad_input;
use crate::topology;
use anyhow::Context;
use clap::Subcommand;
use std::fmt::Write;
use std::path::PathBuf;

/// The most nodes a generated lab has (/30 links of 198.18.0.0/15 would allow 32,768).
pub const MAX_NODES: usize = 5000;

/// The most machines `--hosts` places a lab on: their underlay addresses are
/// 198.18.230.1 to .254.
pub const MAX_HOSTS: usize = 254;

/// The /24 the machines' underlay addresses come from; the links keep out of it.
const UNDERLAY_NET: &str = "198.18.230";

/// Link i's addresses: .1 and .2 of its IPv4 subnet and `2001:2:0:i::1`/`::2`.
/// Up to 512 links each has a /24 of 198.18.0.0/15 (198.18.i.0/24, readable);
/// more do not fit, so then each has a /30. A lab placed on several hosts
/// takes /30s beyond 230 links, so that 198.18.230.0/24 stays the underlay's.
#[derive(Clone, Copy)]
struct Links {
    narrow: bool,
}

impl Links {
    fn new(links: usize, spread: Option<Spread>) -> Self {
        let widest = if spread.is_some() { 230 } else { 512 };
        Links {
            narrow: links > widest,
        }
    }
    fn prefix(self) -> u8 {
        if self.narrow { 30 } else { 24 }
    }
    fn v4(self, link: usize, host: u8) -> String {
        if self.narrow {
            let base = link * 4;
            format!(
                "198.{}.{}.{}",
                18 + base / 65536,
                (base / 256) % 256,
                base % 256 + host as usize
            )
        } else {
            format!("198.{}.{}.{host}", 18 + link / 256, link % 256)
        }
    }
    fn v4_net(self, link: usize) -> String {
        format!("{}/{}", self.v4(link, 0), self.prefix())
    }
    fn v6(self, link: usize, host: u8) -> String {
        format!("2001:2:0:{link:x}::{host}")
    }
    fn v6_net(self, link: usize) -> String {
        format!("2001:2:0:{link:x}::/64")
    }
    /// The `[[links]]` entry joining port `a` (.1) and port `b` (.2).
    fn entry(self, link: usize, a: &str, b: &str) -> String {
        let p = self.prefix();
        format!(
            "[[links]]\na = {{ port = \"{a}\", ipv4 = \"{}/{p}\", ipv6 = \"{}/64\" }}\nb = {{ port = \"{b}\", ipv4 = \"{}/{p}\", ipv6 = \"{}/64\" }}\n",
            self.v4(link, 1),
            self.v6(link, 1),
            self.v4(link, 2),
            self.v6(link, 2)
        )
    }
    fn describe(self) -> String {
        if self.narrow {
            "Link i is the i-th /30 of 198.18.0.0/15 and 2001:2:0:i::/64".into()
        } else {
            "Link i is 198.{18,19}.x.0/24 and 2001:2:0:i::/64".into()
        }
    }
}

/// A lab's nodes on `hosts` machines, `host1` ... `hostN`: node i of n on
/// host 1 + i * hosts / n, so each holds a run of consecutive nodes (n /
/// hosts of them, give or take one).
#[derive(Clone, Copy, Debug)]
pub struct Spread {
    hosts: usize,
    nodes: usize,
}

impl Spread {
    pub fn new(hosts: usize, nodes: usize) -> Result<Self, String> {
        if hosts == 0 || hosts > MAX_HOSTS || hosts > nodes {
            return Err(format!(
                "--hosts {hosts}: a lab of {nodes} nodes is placed on 1 to {} hosts (each holds a node; at most {MAX_HOSTS})",
                nodes.min(MAX_HOSTS)
            ));
        }
        Ok(Spread { hosts, nodes })
    }

    /// The host (1-based) of node `i`.
    fn host(self, i: usize) -> usize {
        1 + i * self.hosts / self.nodes
    }

    /// The `[hosts.hostK]` tables, with a comment on the placement and how
    /// many of the links cross hosts.
    fn write_hosts(self, s: &mut String, crossings: usize) {
        let _ = writeln!(
            s,
            "# Placed on {} hosts: each holds a run of consecutive nodes; {crossings} links cross hosts (VXLAN).
# Underlay addresses {UNDERLAY_NET}.1 ...: put your machines' own. MTU 1550: 1500-byte links plus VXLAN's 50.",
            self.hosts
        );
        for k in 1..=self.hosts {
            let _ = writeln!(
                s,
                "[hosts.host{k}]\nunderlay = \"{UNDERLAY_NET}.{k}\"\nmtu = 1550\n"
            );
        }
    }

    /// How many links between consecutive nodes (i, i + 1) cross hosts.
    fn chain_crossings(self) -> usize {
        self.hosts - 1
    }

    /// How many of the star's links (hub, node 0, to every other) cross hosts.
    fn star_crossings(self) -> usize {
        (1..self.nodes).filter(|&i| self.host(i) != 1).count()
    }
}

/// `host = "hostK"` for node `i`, when the lab is placed.
fn write_host(s: &mut String, spread: Option<Spread>, i: usize) {
    if let Some(sp) = spread {
        let _ = writeln!(s, "host = \"host{}\"", sp.host(i));
    }
}

/// ` --hosts N` for the header of a placed lab.
fn hosts_flag(spread: Option<Spread>) -> String {
    spread
        .map(|sp| format!(" --hosts {}", sp.hosts))
        .unwrap_or_default()
}

fn check_size(what: &str, nodes: usize) -> Result<(), String> {
    if (2..=MAX_NODES).contains(&nodes) {
        Ok(())
    } else {
        Err(format!(
            "--nodes {nodes}: a {what} has 2 to {MAX_NODES} nodes"
        ))
    }
}

pub fn chain(nodes: usize, name: &str, spread: Option<Spread>) -> Result<String, String> {
    check_size("chain", nodes)?;
    let links = nodes - 1;
    let plan = Links::new(links, spread);
    let node_name = |i: usize| {
        if i == 0 || i == nodes - 1 {
            format!("h{i}")
        } else {
            format!("r{i}")
        }
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# Generated by `tunbench gen chain --nodes {nodes}{}`: h0 - r1 - ... - h{} in a line.",
        hosts_flag(spread),
        nodes - 1
    );
    let _ = writeln!(
        s,
        "# {}; .1 is the left end, .2 the right.",
        plan.describe()
    );
    if nodes > 256 {
        let _ = writeln!(
            s,
            "# Longer than 255 hops: a TTL / hop limit cannot carry a packet end to end."
        );
    }
    let _ = writeln!(
        s,
        "name = \"{name}\"\ndescription = \"chain of {nodes} nodes\"\n"
    );
    if let Some(sp) = spread {
        sp.write_hosts(&mut s, sp.chain_crossings());
    }
    // Packets start with the largest TTL so the ends of a long chain reach each
    // other. IPv6's hop limit is per interface, copied from conf.default when
    // the interface is made (conf.all.hop_limit would change nothing).
    let _ = writeln!(
        s,
        "[defaults.sysctls]\n\"net.ipv4.ip_default_ttl\" = 255\n\"net.ipv6.conf.default.hop_limit\" = 255\n"
    );
    let first = 0usize;
    let last_link = links - 1;
    for i in 0..nodes {
        let kind = if i == 0 || i == nodes - 1 {
            "host"
        } else {
            "router"
        };
        let _ = writeln!(s, "[nodes.{}]\nkind = \"{kind}\"", node_name(i));
        write_host(&mut s, spread, i);
        let mut routes: Vec<(String, String)> = Vec::new();
        if nodes > 2 {
            if i == 0 {
                routes.push(("default".into(), plan.v4(0, 2)));
                routes.push(("default".into(), plan.v6(0, 2)));
            } else if i == nodes - 1 {
                routes.push(("default".into(), plan.v4(last_link, 1)));
                routes.push(("default".into(), plan.v6(last_link, 1)));
            } else {
                // Left: toward h0's subnet; right: toward the last host's subnet.
                if i - 1 != first {
                    routes.push((plan.v4_net(first), plan.v4(i - 1, 1)));
                    routes.push((plan.v6_net(first), plan.v6(i - 1, 1)));
                }
                if i != last_link {
                    routes.push((plan.v4_net(last_link), plan.v4(i, 2)));
                    routes.push((plan.v6_net(last_link), plan.v6(i, 2)));
                }
            }
        }
        write_routes(&mut s, routes);
        s.push('\n');
    }
    for l in 0..links {
        let _ = writeln!(
            s,
            "{}",
            plan.entry(
                l,
                &format!("{}:right", node_name(l)),
                &format!("{}:left", node_name(l + 1))
            )
        );
    }
    Ok(s)
}

fn write_routes(s: &mut String, routes: Vec<(String, String)>) {
    if routes.is_empty() {
        return;
    }
    let _ = writeln!(s, "routes = [");
    for (to, via) in routes {
        let _ = writeln!(s, "  {{ to = \"{to}\", via = \"{via}\" }},");
    }
    let _ = writeln!(s, "]");
}

/// A star: router `hub` in the middle, hosts h1 ... h{N-1} around it, host i on
/// link i-1 (the hub holds .1, the host .2) with its default route via the hub.
/// Placed on hosts, the hub is on host1 with the first leaves.
pub fn star(nodes: usize, name: &str, spread: Option<Spread>) -> Result<String, String> {
    check_size("star", nodes)?;
    let links = nodes - 1;
    let plan = Links::new(links, spread);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# Generated by `tunbench gen star --nodes {nodes}{}`: router hub with hosts h1 ... h{links} around it.",
        hosts_flag(spread)
    );
    let _ = writeln!(
        s,
        "# {}; the hub is .1, host i+1 is .2 of link i.",
        plan.describe()
    );
    let _ = writeln!(
        s,
        "name = \"{name}\"\ndescription = \"star of {nodes} nodes\"\n"
    );
    if let Some(sp) = spread {
        sp.write_hosts(&mut s, sp.star_crossings());
    }
    let _ = writeln!(s, "[nodes.hub]\nkind = \"router\"");
    write_host(&mut s, spread, 0);
    s.push('\n');
    for l in 0..links {
        let _ = writeln!(s, "[nodes.h{}]\nkind = \"host\"", l + 1);
        write_host(&mut s, spread, l + 1);
        write_routes(
            &mut s,
            vec![
                ("default".into(), plan.v4(l, 1)),
                ("default".into(), plan.v6(l, 1)),
            ],
        );
        s.push('\n');
    }
    for l in 0..links {
        let _ = writeln!(
            s,
            "{}",
            plan.entry(l, &format!("hub:h{}", l + 1), &format!("h{}:eth0", l + 1))
        );
    }
    Ok(s)
}

#[derive(clap::Args, Debug)]
pub struct GenArgs {
    #[command(subcommand)]
    pub what: GenWhat,
}

#[derive(Subcommand, Debug)]
pub enum GenWhat {
    /// A chain: host - router - ... - host, IPv4 and IPv6, routes end to end.
    Chain(GenOpts),
    /// A star: a router with N-1 hosts around it, IPv4 and IPv6, each host's
    /// default route via the router.
    Star(GenOpts),
}

#[derive(clap::Args, Debug)]
pub struct GenOpts {
    #[arg(long)]
    nodes: usize,
    /// The topology's (and so the lab's) name.
    #[arg(long)]
    name: Option<String>,
    /// Place the nodes on N machines, host1 ... hostN (underlay 198.18.230.K,
    /// MTU 1550), each holding a run of consecutive nodes; the links between
    /// runs cross hosts.
    #[arg(long, value_name = "N")]
    hosts: Option<usize>,
    /// Write here instead of standard output.
    #[arg(short, long)]
    output: Option<PathBuf>,
}

/// Nodes, a name and a placement to the topology's text, or why not.
type Generator = fn(usize, &str, Option<Spread>) -> Result<String, String>;

/// The command: a generated topology to a file or standard output.
pub fn generate(a: GenArgs) -> anyhow::Result<i32> {
    let (make, what, o): (Generator, _, _) = match a.what {
        GenWhat::Chain(o) => (chain, "chain", o),
        GenWhat::Star(o) => (star, "star", o),
    };
    let name = o.name.unwrap_or_else(|| what.to_string());
    if !topology::valid_name(&name) {
        return Err(bad_input(format!(
            "--name \"{name}\" must be 1-32 letters, digits, '-' or '_'"
        )));
    }
    let spread = o
        .hosts
        .map(|h| Spread::new(h, o.nodes))
        .transpose()
        .map_err(bad_input)?;
    let text = make(o.nodes, &name, spread).map_err(bad_input)?;
    match o.output {
        Some(p) => std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?,
        None => print!("{text}"),
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::Router;
    use crate::topology::parse_str;
    use std::path::Path;

    #[test]
    fn chains_validate_and_ends_reach_each_other() {
        for n in [2, 3, 5, 100, 255] {
            let text = chain(n, "c", None).unwrap();
            let t =
                parse_str(&text, Path::new("chain.toml")).unwrap_or_else(|e| panic!("{n}: {e}"));
            assert_eq!(t.nodes.len(), n);
            let r = Router::new(&t);
            let (h0, hn) = (
                t.node_index("h0").unwrap(),
                t.node_index(&format!("h{}", n - 1)).unwrap(),
            );
            for a in t.node_addresses(hn) {
                assert_eq!(
                    r.echo_works(h0, a.1.ip()),
                    Ok(()),
                    "chain {n}: h0 -> {}",
                    a.1
                );
            }
        }
    }

    #[test]
    fn longer_than_the_ttl_is_known_unreachable() {
        let t = parse_str(&chain(300, "c", None).unwrap(), Path::new("chain.toml")).unwrap();
        let r = Router::new(&t);
        let e = r.echo_works(0, "198.19.42.2".parse().unwrap()).unwrap_err();
        assert!(e.contains("TTL"), "{e}");
    }

    #[test]
    fn out_of_range_is_an_error() {
        assert!(chain(1, "c", None).is_err());
        assert!(chain(MAX_NODES + 1, "c", None).is_err());
        assert!(star(1, "s", None).is_err());
        assert!(star(MAX_NODES + 1, "s", None).is_err());
    }

    #[test]
    fn stars_validate_and_every_host_reaches_every_other() {
        for n in [2, 3, 50, 600] {
            let t = parse_str(&star(n, "s", None).unwrap(), Path::new("star.toml"))
                .unwrap_or_else(|e| panic!("{n}: {e}"));
            assert_eq!(t.nodes.len(), n);
            let r = Router::new(&t);
            let h1 = t.node_index("h1").unwrap();
            let last = t.node_index(&format!("h{}", n - 1)).unwrap();
            for (_, a) in t.node_addresses(last) {
                assert_eq!(r.echo_works(h1, a.ip()), Ok(()), "star {n}: h1 -> {a}");
            }
        }
    }

    #[test]
    fn more_than_512_links_take_a_30_each() {
        let text = chain(1000, "c", None).unwrap();
        let t = parse_str(&text, Path::new("chain.toml")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(t.links.len(), 999);
        // Link 998: the 998th /30, 198.18.15.152/30.
        assert!(text.contains("ipv4 = \"198.18.15.153/30\""), "{text}");
        let r = Router::new(&t);
        // Link 200 (198.18.3.32/30) joins r200 (.33) and r201 (.34).
        let r200 = t.node_index("r200").unwrap();
        assert_eq!(r.echo_works(r200, "198.18.3.34".parse().unwrap()), Ok(()));
        assert_eq!(
            r.echo_works(r200, "2001:2:0:c8::2".parse().unwrap()),
            Ok(())
        );
        // 998 routers are more than any TTL carries.
        let e = r
            .echo_works(0, "198.18.15.154".parse().unwrap())
            .unwrap_err();
        assert!(e.contains("TTL"), "{e}");
    }

    /// The lines of `text` that are a link's end, with its addresses.
    fn link_addresses(text: &str) -> Vec<&str> {
        text.lines().filter(|l| l.contains("port = ")).collect()
    }

    #[test]
    fn a_chain_on_hosts_holds_runs_and_crosses_between_them() {
        let spread = Spread::new(5, 5000).unwrap();
        let text = chain(5000, "c", Some(spread)).unwrap();
        let t = parse_str(&text, Path::new("chain.toml")).unwrap_or_else(|e| panic!("{e}"));
        let pl = t.placement.as_ref().expect("placed");
        assert_eq!(pl.hosts.len(), 5);
        assert_eq!(pl.hosts[2].underlay.to_string(), "198.18.230.3");
        assert_eq!(pl.hosts[2].mtu, 1550);
        // Links 999, 1999, ... join the last node of one run to the first of the next.
        let crossing: Vec<usize> = pl.crossings.iter().map(|c| c.link).collect();
        assert_eq!(crossing, [999, 1999, 2999, 3999]);
        assert!(text.contains("4 links cross hosts"), "{}", &text[..400]);
        let name = |i: usize| match i {
            0 | 4999 => format!("h{i}"),
            _ => format!("r{i}"),
        };
        for (k, ends) in [(1, 1), (2, 2), (3, 2), (4, 2), (5, 1)] {
            let part = t.host_part(&format!("host{k}")).unwrap();
            let mut held: Vec<String> = part
                .nodes
                .iter()
                .map(|&n| t.nodes[n].name.clone())
                .collect();
            let mut run: Vec<String> = ((k - 1) * 1000..k * 1000).map(name).collect();
            held.sort();
            run.sort();
            assert_eq!(held, run, "host{k}");
            assert_eq!(part.ends.len(), ends, "host{k}");
        }
        // The links keep out of the underlay's 198.18.230.0/24.
        assert!(
            !link_addresses(&text)
                .iter()
                .any(|l| l.contains("198.18.230.")),
            "a link in the underlay's /24"
        );
    }

    #[test]
    fn placed_labs_keep_their_links_out_of_the_underlay_net() {
        // 299 links: /24s unplaced (link 230 is 198.18.230.0/24), /30s placed.
        let alone = chain(300, "c", None).unwrap();
        assert!(
            link_addresses(&alone)
                .iter()
                .any(|l| l.contains("198.18.230."))
        );
        let placed = chain(300, "c", Some(Spread::new(2, 300).unwrap())).unwrap();
        assert!(
            !link_addresses(&placed)
                .iter()
                .any(|l| l.contains("198.18.230.")),
            "a link in the underlay's /24"
        );
        assert!(placed.contains("/30\""), "placed links take /30s");
    }

    #[test]
    fn a_star_on_hosts_keeps_its_hub_on_the_first() {
        let text = star(10, "s", Some(Spread::new(3, 10).unwrap())).unwrap();
        let t = parse_str(&text, Path::new("star.toml")).unwrap_or_else(|e| panic!("{e}"));
        let pl = t.placement.as_ref().expect("placed");
        // hub, h1, h2, h3 on host1 (index 0), h4..h6 on host2, h7..h9 on host3.
        for (node, host) in [
            ("hub", 0),
            ("h3", 0),
            ("h4", 1),
            ("h6", 1),
            ("h7", 2),
            ("h9", 2),
        ] {
            let n = t.node_index(node).unwrap();
            assert_eq!(pl.node_host[n], Some(host), "{node}");
        }
        assert_eq!(pl.crossings.len(), 6);
        assert!(text.contains("6 links cross hosts"), "{text}");
        let r = Router::new(&t);
        let (h1, h9) = (t.node_index("h1").unwrap(), t.node_index("h9").unwrap());
        for (_, a) in t.node_addresses(h9) {
            assert_eq!(r.echo_works(h1, a.ip()), Ok(()), "h1 -> {a}");
        }
    }

    #[test]
    fn hosts_out_of_range_are_an_error() {
        for (hosts, nodes) in [(0, 10), (11, 10), (MAX_HOSTS + 1, 5000)] {
            let e = Spread::new(hosts, nodes).unwrap_err();
            assert!(e.starts_with(&format!("--hosts {hosts}:")), "{e}");
        }
        assert!(Spread::new(10, 10).is_ok());
        assert!(Spread::new(MAX_HOSTS, 5000).is_ok());
        assert!(Spread::new(1, 2).is_ok());
    }
}
