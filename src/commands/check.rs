//! `tunbench check`: every node sends ICMP echo to every address of every other
//! node (raw sockets inside each namespace, no ping binary), and the replies are
//! compared with what the routing model says must work. External nodes are
//! probed, never probing.

use crate::lab;
use crate::plan::Naming;
use crate::topology::Topology;
use crate::topology::routing::Router;
use crate::wire::icmp_echo::{Family, Kind, Packet, Repr};
use anyhow::Context;
use serde::Serialize;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::collections::BTreeSet;
use std::io;
use std::mem::MaybeUninit;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

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
    pub probes: Vec<Probe>,
}

impl Report {
    pub fn failures(&self) -> impl Iterator<Item = &Probe> {
        self.probes.iter().filter(|p| p.failed())
    }
}

/// Waits between rounds: the first packets toward a neighbour wait for ARP / ND.
const ROUNDS: [Duration; 3] = [
    Duration::from_millis(300),
    Duration::from_millis(700),
    Duration::from_millis(1500),
];

pub fn run(t: &Topology, naming: &Naming) -> io::Result<Report> {
    let router = Router::new(t);
    let mut probes = Vec::new();
    // External devices answer echoes but cannot be made to send them.
    for (s, src) in t
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.kind.is_built())
    {
        for (d, dst) in t.nodes.iter().enumerate() {
            if s == d {
                continue;
            }
            for (iface, a) in t.node_addresses(d) {
                probes.push(Probe {
                    from: src.name.clone(),
                    to: dst.name.clone(),
                    iface,
                    addr: a.ip(),
                    unreachable_because: router.echo_works(s, a.ip()).err(),
                    replied: false,
                });
            }
        }
    }
    // One thread per source node, each inside that node's namespace.
    let mut threads = Vec::new();
    for src in t.nodes.iter().filter(|n| n.kind.is_built()) {
        let ns = naming.namespace(&src.name);
        let targets: Vec<IpAddr> = probes
            .iter()
            .filter(|p| p.from == src.name)
            .map(|p| p.addr)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let must: BTreeSet<IpAddr> = probes
            .iter()
            .filter(|p| p.from == src.name && p.expected())
            .map(|p| p.addr)
            .collect();
        let name = src.name.clone();
        threads.push(std::thread::spawn(
            move || -> io::Result<(String, BTreeSet<IpAddr>)> {
                netns::namespace::enter(&ns)?;
                Ok((name, probe_all(&targets, &must)?))
            },
        ));
    }
    for th in threads {
        let (name, replied) = th
            .join()
            .map_err(|_| io::Error::other("probe thread panicked"))??;
        for p in probes.iter_mut().filter(|p| p.from == name) {
            p.replied = replied.contains(&p.addr);
        }
    }
    Ok(Report {
        lab: naming.lab.clone(),
        probes,
    })
}

/// Echo every target, resending to the silent ones each round, until all that
/// `must` answer have (after one full round for the others). Returns who replied.
fn probe_all(targets: &[IpAddr], must: &BTreeSet<IpAddr>) -> io::Result<BTreeSet<IpAddr>> {
    let mut replied = BTreeSet::new();
    if targets.is_empty() {
        return Ok(replied);
    }
    let v4 = Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::ICMPV4))?;
    let v6 = Socket::new(Domain::IPV6, Type::RAW, Some(Protocol::ICMPV6))?;
    for s in [&v4, &v6] {
        s.set_nonblocking(true)?;
    }
    // Identifier: the thread's id, so concurrent checks of one lab do not mix.
    let ident = (nix::unistd::gettid().as_raw() & 0xffff) as u16;
    let payload = *b"tunbench";
    for wait in ROUNDS {
        for (i, &addr) in targets.iter().enumerate() {
            if replied.contains(&addr) {
                continue;
            }
            let family = if addr.is_ipv4() {
                Family::V4
            } else {
                Family::V6
            };
            let repr = Repr {
                family,
                kind: Kind::Request,
                ident,
                seq: i as u16,
                data_len: payload.len(),
            };
            let mut buf = [0u8; 16];
            repr.emit(
                &mut Packet::new_unchecked(&mut buf[..repr.buffer_len()]),
                &payload,
            );
            let sock = if addr.is_ipv4() { &v4 } else { &v6 };
            // No route: the kernel says so at once; the target just stays silent.
            let _ = sock.send_to(
                &buf[..repr.buffer_len()],
                &SockAddr::from(SocketAddr::new(addr, 0)),
            );
        }
        let until = Instant::now() + wait;
        while Instant::now() < until && !must.is_subset(&replied) {
            let mut got = false;
            for (sock, family) in [(&v4, Family::V4), (&v6, Family::V6)] {
                while let Some((from, seq)) = recv_reply(sock, family, ident)? {
                    got = true;
                    if targets.get(seq as usize) == Some(&from) {
                        replied.insert(from);
                    }
                }
            }
            if !got {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        if must.is_subset(&replied) {
            break;
        }
    }
    Ok(replied)
}

/// One echo reply with our identifier, if one is waiting.
fn recv_reply(sock: &Socket, family: Family, ident: u16) -> io::Result<Option<(IpAddr, u16)>> {
    loop {
        let mut buf = [MaybeUninit::<u8>::uninit(); 1500];
        let (n, from) = match sock.recv_from(&mut buf) {
            Ok(x) => x,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
            Err(e) => return Err(e),
        };
        // SAFETY: recv_from initialised the first n bytes.
        let bytes: &[u8] = unsafe { std::slice::from_raw_parts(buf.as_ptr() as *const u8, n) };
        let Some(from) = from.as_socket().map(|s| s.ip()) else {
            continue;
        };
        // Raw IPv4 sockets deliver the IP header too; skip it (IHL words).
        let icmp = match family {
            Family::V4 => match bytes.first() {
                Some(b) => bytes.get(((b & 0x0f) as usize) * 4..).unwrap_or(&[]),
                None => continue,
            },
            Family::V6 => bytes,
        };
        let Ok(p) = Packet::new_checked(icmp) else {
            continue;
        };
        match Repr::parse(&p, family) {
            Ok(r) if r.kind == Kind::Reply && r.ident == ident => return Ok(Some((from, r.seq))),
            _ => continue,
        }
    }
}

/// The matrix: a row per source, a column per destination node; each cell counts
/// replies over addresses. `!` marks a cell with an address that routing says
/// must answer and did not; `+` one that answered though routing says it cannot.
pub fn render(t: &Topology, r: &Report) -> String {
    let dsts: Vec<&str> = t
        .nodes
        .iter()
        .filter(|n| {
            !t.node_addresses(t.node_index(&n.name).unwrap_or(0))
                .is_empty()
        })
        .map(|n| n.name.as_str())
        .collect();
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
    for src in &t.nodes {
        s += &format!("{:<w0$}", src.name);
        for d in &dsts {
            let cell: Vec<&Probe> = r
                .probes
                .iter()
                .filter(|p| p.from == src.name && p.to == *d)
                .collect();
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
    let total = r.probes.len();
    let ok = r.probes.iter().filter(|p| p.replied).count();
    let expected = r.probes.iter().filter(|p| p.expected()).count();
    let failed = r.failures().count();
    s += &format!(
        "\n{ok} of {total} addresses answered; routing says {expected} must; {failed} did not.\n"
    );
    s += "cells: replies/addresses; - none expected by routing; ! expected but silent; + answered though routing says it cannot\n";
    for p in r.failures() {
        s += &format!(
            "FAIL {} -> {} ({}:{}): no reply\n",
            p.from, p.addr, p.to, p.iface
        );
    }
    s
}

#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    pub lab: String,
    #[arg(long)]
    pub json: bool,
}

/// The command: probe a running lab, print the matrix; exit 1 on any failure.
pub fn check(a: CheckArgs) -> anyhow::Result<i32> {
    let CheckArgs { lab: l, json } = a;
    let running = lab::find(&l)?;
    let report = run(&running.topology, &running.naming).context("probing")?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render(&running.topology, &report));
    }
    Ok(if report.failures().next().is_some() {
        1
    } else {
        0
    })
}
