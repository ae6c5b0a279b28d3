//! `tunbench check`: every node sends ICMP echo to every address of every other
//! node (raw sockets inside each namespace, no ping binary), and the replies are
//! compared with what the routing model says must work. External nodes are
//! probed, never probing.

use crate::lab;
use crate::plan::Naming;
use crate::routing::Router;
use crate::socket::{gso, icmp};
use crate::topology::Topology;
use crate::wire::icmp_echo::{Family, Kind, Packet, Repr};
use anyhow::Context;
use ipnetwork::IpNetwork;
use serde::Serialize;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::collections::{BTreeSet, HashMap, HashSet};
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

/// Which probes `check` sends.
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

/// Up to this many built nodes, `--mode auto` probes all pairs; above, it samples.
pub const AUTO_ALL_UP_TO: usize = 100;
/// `--mode sample`'s number of routed pairs unless `--sample` says otherwise.
pub const DEFAULT_SAMPLE: usize = 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ModeArg {
    /// all up to 100 nodes, sample above.
    Auto,
    All,
    Segments,
    Sample,
}

impl Mode {
    /// What `--mode` (and `--sample N`, which alone means sample) ask for in a
    /// lab of `built` nodes tunbench made.
    pub fn choose(arg: ModeArg, sample: Option<usize>, seed: u64, built: usize) -> Mode {
        let n = sample.unwrap_or(DEFAULT_SAMPLE);
        match (arg, sample) {
            (ModeArg::All, _) => Mode::All,
            (ModeArg::Segments, _) => Mode::Segments,
            (ModeArg::Sample, _) | (ModeArg::Auto, Some(_)) => Mode::Sample { n, seed },
            (ModeArg::Auto, None) if built <= AUTO_ALL_UP_TO => Mode::All,
            (ModeArg::Auto, None) => Mode::Sample { n, seed },
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Mode::All => "all",
            Mode::Segments => "segments",
            Mode::Sample { .. } => "sample",
        }
    }
}

/// Waits between rounds: the first packets toward a neighbour wait for ARP / ND.
const ROUNDS: [Duration; 3] = [
    Duration::from_millis(300),
    Duration::from_millis(700),
    Duration::from_millis(1500),
];

/// Probing threads; each enters the namespaces of its sources in turn.
const WORKERS: usize = 16;
/// Sources a thread probes at once (two raw sockets each): WORKERS x BATCH x 2
/// descriptors at most, well under the usual limit of 1024.
const BATCH: usize = 16;

pub fn run(t: &Topology, naming: &Naming, mode: Mode) -> io::Result<Report> {
    let router = Router::new(t);
    let addresses: Vec<Vec<(String, IpNetwork)>> =
        (0..t.nodes.len()).map(|i| t.node_addresses(i)).collect();
    // External devices answer echoes but cannot be made to send them.
    let sources: Vec<usize> = (0..t.nodes.len())
        .filter(|&s| t.nodes[s].kind.is_built())
        .collect();
    let all_pairs: usize = sources
        .iter()
        .map(|&s| {
            (0..t.nodes.len())
                .filter(|&d| d != s)
                .map(|d| addresses[d].len())
                .sum::<usize>()
        })
        .sum();
    let probe = |s: usize, d: usize, k: usize| {
        let (iface, a) = &addresses[d][k];
        Probe {
            from: t.nodes[s].name.clone(),
            to: t.nodes[d].name.clone(),
            iface: iface.clone(),
            addr: a.ip(),
            unreachable_because: router.echo_works(s, a.ip()).err(),
            replied: false,
        }
    };
    // (source, destination node, index in its addresses), in all-pairs order.
    let mut picked: Vec<(usize, usize, usize)> = Vec::new();
    let mut sampled = None;
    match mode {
        Mode::All => {
            for &s in &sources {
                for d in (0..t.nodes.len()).filter(|&d| d != s) {
                    picked.extend((0..addresses[d].len()).map(|k| (s, d, k)));
                }
            }
        }
        Mode::Segments | Mode::Sample { .. } => {
            picked = neighbours_on_segments(t, &addresses);
            if let Mode::Sample { n, seed } = mode {
                let (extra, drawn) =
                    sample_routed(t, &router, &addresses, &sources, &picked, n, seed);
                sampled = Some(Sampled {
                    seed,
                    drawn,
                    must: extra.len(),
                });
                picked.extend(extra);
                picked.sort_unstable();
            }
        }
    }
    let neighbours = neighbour_limit(&neighbours_on_segments(t, &addresses), &addresses);
    let mut probes: Vec<Probe> = picked.iter().map(|&(s, d, k)| probe(s, d, k)).collect();
    // Which probes each source sends, in the order of `probes`.
    let mut by_source: Vec<Vec<usize>> = vec![Vec::new(); t.nodes.len()];
    for (i, &(s, _, _)) in picked.iter().enumerate() {
        by_source[s].push(i);
    }
    let jobs: Vec<Source> = sources
        .iter()
        .filter(|&&s| !by_source[s].is_empty())
        .map(|&s| {
            let mut targets = Vec::new();
            let mut seen = HashSet::new();
            let mut must = HashSet::new();
            for &i in &by_source[s] {
                let p = &probes[i];
                if seen.insert(p.addr) {
                    targets.push(p.addr);
                }
                if p.expected() {
                    must.insert(p.addr);
                }
            }
            Source {
                node: s,
                ns: naming.namespace(&t.nodes[s].name),
                targets,
                must,
            }
        })
        .collect();
    for (node, replied) in probe_sources(jobs)? {
        for &i in &by_source[node] {
            probes[i].replied = replied.contains(&probes[i].addr);
        }
    }
    Ok(Report {
        lab: naming.lab.clone(),
        mode: mode.name().to_string(),
        all_pairs,
        sampled,
        neighbours,
        probes,
    })
}

/// The kernel keeps ARP and ND entries in one table per family for all
/// namespaces together, of at most `gc_thresh3` entries (1024 by default), a
/// host-wide setting that tunbench leaves alone: a lab with more
/// neighbours than that cannot resolve them all, and probes past the limit go
/// unanswered ("neighbor table overflow" in the kernel log). Some when this lab
/// alone needs more than the limit.
fn neighbour_limit(
    on_segments: &[(usize, usize, usize)],
    addresses: &[Vec<(String, IpNetwork)>],
) -> Option<NeighbourLimit> {
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

/// This lab's neighbour entries (one per node and neighbour address on a
/// segment) against the host's limit, when they do not fit.
#[derive(Debug, Clone, Serialize)]
pub struct NeighbourLimit {
    pub ipv4: usize,
    pub ipv6: usize,
    pub ipv4_limit: usize,
    pub ipv6_limit: usize,
}

impl NeighbourLimit {
    fn describe(&self) -> String {
        let want = self.ipv4.max(self.ipv6).next_power_of_two() * 2;
        format!(
            "note: this lab needs {} IPv4 and {} IPv6 neighbour (ARP / ND) entries, but the kernel \
             keeps at most {} and {} for all namespaces together (net.ipv4/ipv6.neigh.default.gc_thresh3, \
             host-wide, which tunbench does not change): neighbours past that stay unresolved and \
             their probes unanswered. To raise it on this machine: sysctl -w \
             net.ipv4.neigh.default.gc_thresh3={want} net.ipv6.neigh.default.gc_thresh3={want} \
             net.ipv4.neigh.default.gc_thresh2={want} net.ipv6.neigh.default.gc_thresh2={want}\n",
            self.ipv4, self.ipv6, self.ipv4_limit, self.ipv6_limit
        )
    }
}

/// Up to `n` random (source, destination, address) pairs, none of them in
/// `have`, that routing says must answer. Drawn uniformly from all pairs and
/// kept when the model says so, at most `MAX_DRAWS` draws (the model costs a
/// walk along the path; all pairs of a big lab would take minutes). Returns
/// them and how many pairs were drawn.
fn sample_routed(
    t: &Topology,
    router: &Router,
    addresses: &[Vec<(String, IpNetwork)>],
    sources: &[usize],
    have: &[(usize, usize, usize)],
    n: usize,
    seed: u64,
) -> (Vec<(usize, usize, usize)>, usize) {
    let have: HashSet<&(usize, usize, usize)> = have.iter().collect();
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

/// The most pairs a sample draws before it settles for fewer than it was asked.
const MAX_DRAWS: usize = 200_000;

/// What a sample drew.
#[derive(Debug, Clone, Serialize)]
pub struct Sampled {
    pub seed: u64,
    /// Pairs drawn from all pairs.
    pub drawn: usize,
    /// Of those, the ones routing says must answer, which were probed.
    pub must: usize,
}

/// Each built node to every address its neighbours hold on the devices that
/// share a segment with it (a link's other end, a switch's other ports and
/// bridge): (source, destination, index in the destination's addresses).
fn neighbours_on_segments(
    t: &Topology,
    addresses: &[Vec<(String, IpNetwork)>],
) -> Vec<(usize, usize, usize)> {
    let mut out = BTreeSet::new();
    for seg in t.segments() {
        for (s, _) in seg.iter().filter(|(s, _)| t.nodes[*s].kind.is_built()) {
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

/// One node's probes: the addresses it echoes and those that must answer.
struct Source {
    node: usize,
    ns: String,
    targets: Vec<IpAddr>,
    must: HashSet<IpAddr>,
}

/// Probes every source inside its namespace, on a few threads (a thread per
/// node ran out of descriptors and time on labs of thousands). Returns, per
/// source node, the addresses that replied.
fn probe_sources(jobs: Vec<Source>) -> io::Result<Vec<(usize, HashSet<IpAddr>)>> {
    let workers = jobs.len().min(WORKERS);
    let mut shares: Vec<Vec<Source>> = (0..workers).map(|_| Vec::new()).collect();
    for (i, j) in jobs.into_iter().enumerate() {
        shares[i % workers].push(j);
    }
    let threads: Vec<_> = shares
        .into_iter()
        .map(|share| {
            std::thread::spawn(move || -> io::Result<Vec<(usize, HashSet<IpAddr>)>> {
                let mut out = Vec::new();
                let mut share = share.into_iter().peekable();
                while share.peek().is_some() {
                    let batch: Vec<Source> = share.by_ref().take(BATCH).collect();
                    let mut open = Vec::new();
                    for src in &batch {
                        netns::namespace::enter(&src.ns)?;
                        open.push(Sockets::new()?);
                    }
                    let replied = probe_batch(&batch, &open)?;
                    out.extend(batch.iter().map(|s| s.node).zip(replied));
                }
                Ok(out)
            })
        })
        .collect();
    let mut all = Vec::new();
    for th in threads {
        all.extend(
            th.join()
                .map_err(|_| io::Error::other("probe thread panicked"))??,
        );
    }
    Ok(all)
}

/// Each probing socket's buffers: room for thousands of echoes in flight.
const SOCKET_BUFFER: usize = 4 << 20;

/// A source's raw ICMP sockets, made inside its namespace.
struct Sockets {
    v4: Socket,
    v6: Socket,
}

impl Sockets {
    fn new() -> io::Result<Self> {
        let v4 = Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::ICMPV4))?;
        let v6 = Socket::new(Domain::IPV6, Type::RAW, Some(Protocol::ICMPV6))?;
        for (s, is_v6) in [(&v4, false), (&v6, true)] {
            s.set_nonblocking(true)?;
            // Best effort: a node that a thousand others probe at once still
            // keeps its own replies.
            icmp::echo_replies_only(s, is_v6);
            gso::set_buffers(s, SOCKET_BUFFER);
        }
        Ok(Sockets { v4, v6 })
    }
}

/// Echo every target of every source, resending to the silent ones each round,
/// until all that must answer have (after one full round for the others).
/// Returns who replied, per source.
///
/// A packet toward a neighbour not yet resolved waits in the kernel's ARP / ND
/// queue and holds the socket's send buffer meanwhile: a node with a thousand
/// neighbours fills it after a few hundred sends (EAGAIN). Sends that do not
/// go out are tried again as replies free the buffer, and a round's wait runs
/// from its last send.
fn probe_batch(batch: &[Source], socks: &[Sockets]) -> io::Result<Vec<HashSet<IpAddr>>> {
    let mut replied: Vec<HashSet<IpAddr>> = batch.iter().map(|_| HashSet::new()).collect();
    // Identifier: the thread's id, so concurrent checks of one lab do not mix.
    let ident = (nix::unistd::gettid().as_raw() & 0xffff) as u16;
    let done = |replied: &[HashSet<IpAddr>]| {
        batch
            .iter()
            .zip(replied)
            .all(|(src, r)| src.must.is_subset(r))
    };
    for wait in ROUNDS {
        // Per source, the targets still to send to in this round.
        let mut queue: Vec<std::collections::VecDeque<usize>> = batch
            .iter()
            .zip(&replied)
            .map(|(src, r)| {
                (0..src.targets.len())
                    .filter(|&i| !r.contains(&src.targets[i]))
                    .collect()
            })
            .collect();
        let mut last_send = Instant::now();
        loop {
            let mut progress = false;
            for ((src, sock), queue) in batch.iter().zip(socks).zip(queue.iter_mut()) {
                while let Some(&i) = queue.front() {
                    match send_echo(sock, src.targets[i], ident, i as u16) {
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        // No route and the like: the kernel says so at once; the
                        // target just stays silent.
                        _ => {
                            queue.pop_front();
                            progress = true;
                            last_send = Instant::now();
                        }
                    }
                }
            }
            for ((src, sock), replied) in batch.iter().zip(socks).zip(replied.iter_mut()) {
                for (sock, family) in [(&sock.v4, Family::V4), (&sock.v6, Family::V6)] {
                    while let Some((from, seq)) = recv_reply(sock, family, ident)? {
                        progress = true;
                        if src.targets.get(seq as usize) == Some(&from) {
                            replied.insert(from);
                        }
                    }
                }
            }
            let sent_all = queue.iter().all(|q| q.is_empty());
            if done(&replied) || (sent_all && last_send.elapsed() >= wait) {
                break;
            }
            if !progress {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        if done(&replied) {
            break;
        }
    }
    Ok(replied)
}

/// One ICMP echo request to `addr` with identifier `ident` and sequence `seq`.
fn send_echo(sock: &Sockets, addr: IpAddr, ident: u16, seq: u16) -> io::Result<usize> {
    let payload = *b"tunbench";
    let family = if addr.is_ipv4() {
        Family::V4
    } else {
        Family::V6
    };
    let repr = Repr {
        family,
        kind: Kind::Request,
        ident,
        seq,
        data_len: payload.len(),
    };
    let mut buf = [0u8; 16];
    repr.emit(
        &mut Packet::new_unchecked(&mut buf[..repr.buffer_len()]),
        &payload,
    );
    let sock = if addr.is_ipv4() { &sock.v4 } else { &sock.v6 };
    sock.send_to(
        &buf[..repr.buffer_len()],
        &SockAddr::from(SocketAddr::new(addr, 0)),
    )
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
        s += &n.describe();
    }
    for p in r.failures() {
        s += &format!(
            "FAIL {} -> {} ({}:{}): no reply\n",
            p.from, p.addr, p.to, p.iface
        );
    }
    s
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
    for src in &t.nodes {
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
    let built = t.nodes.iter().filter(|n| n.kind.is_built()).count();
    let mode = Mode::choose(mode, sample, seed, built);
    let report = run(t, &running.naming, mode).context("probing")?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_probes_all_pairs_up_to_the_limit_and_samples_above() {
        let auto = |built| Mode::choose(ModeArg::Auto, None, 1, built);
        assert_eq!(auto(2), Mode::All);
        assert_eq!(auto(AUTO_ALL_UP_TO), Mode::All);
        assert_eq!(
            auto(AUTO_ALL_UP_TO + 1),
            Mode::Sample {
                n: DEFAULT_SAMPLE,
                seed: 1
            }
        );
        assert_eq!(Mode::choose(ModeArg::All, None, 1, 5000), Mode::All);
        assert_eq!(
            Mode::choose(ModeArg::Segments, Some(9), 1, 5),
            Mode::Segments
        );
        // --sample alone asks for a sample, also in a small lab.
        assert_eq!(
            Mode::choose(ModeArg::Auto, Some(9), 7, 5),
            Mode::Sample { n: 9, seed: 7 }
        );
    }
}
