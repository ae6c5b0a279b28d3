//! Sending the reach matrix's echoes: every source inside its namespace, a
//! few threads each taking batches of sources, every echo of a batch in
//! flight at once and resent to the silent ones in later rounds.

use super::Probe;
use super::pairs::Pair;
use crate::plan::Naming;
use crate::topology::Topology;
use crate::verify::icmp::{Answer, EchoSocket, thread_ident};
use crate::wire::icmp_echo::Family;
use std::collections::{HashSet, VecDeque};
use std::io;
use std::net::IpAddr;
use std::time::{Duration, Instant};

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
/// Each probing socket's buffers: room for thousands of echoes in flight.
const SOCKET_BUFFER: usize = 4 << 20;
/// What every echo carries.
const PAYLOAD: &[u8] = b"tunbench";

/// One node's probes: the addresses it echoes and those that must answer.
struct Source {
    node: usize,
    ns: String,
    targets: Vec<IpAddr>,
    must: HashSet<IpAddr>,
}

/// Sends the echoes of `picked` (one per entry of `probes`, in its order)
/// and marks the probes that got their reply.
pub fn send_all(
    t: &Topology,
    naming: &Naming,
    sources: &[usize],
    picked: &[Pair],
    probes: &mut [Probe],
) -> io::Result<()> {
    // Which probes each source sends, in the order of `probes`.
    let mut by_source: Vec<Vec<usize>> = vec![Vec::new(); t.nodes.len()];
    for (i, &(s, _, _)) in picked.iter().enumerate() {
        by_source[s].push(i);
    }
    let jobs: Vec<Source> = sources
        .iter()
        .filter(|&&s| !by_source[s].is_empty())
        .map(|&s| source(s, naming.namespace(&t.nodes[s].name), &by_source[s], probes))
        .collect();
    for (node, replied) in probe_sources(jobs)? {
        for &i in &by_source[node] {
            probes[i].replied = replied.contains(&probes[i].addr);
        }
    }
    Ok(())
}

/// Node `node`'s distinct targets among `probes[mine]`, in order.
fn source(node: usize, ns: String, mine: &[usize], probes: &[Probe]) -> Source {
    let mut targets = Vec::new();
    let mut seen = HashSet::new();
    let mut must = HashSet::new();
    for &i in mine {
        let p = &probes[i];
        if seen.insert(p.addr) {
            targets.push(p.addr);
        }
        if p.expected() {
            must.insert(p.addr);
        }
    }
    Source {
        node,
        ns,
        targets,
        must,
    }
}

/// Probes every source inside its namespace, on a few threads (a thread per
/// node runs out of descriptors and time on labs of thousands). Returns, per
/// source node, the addresses that replied.
fn probe_sources(jobs: Vec<Source>) -> io::Result<Vec<(usize, HashSet<IpAddr>)>> {
    let workers = jobs.len().min(WORKERS);
    let mut shares: Vec<Vec<Source>> = (0..workers).map(|_| Vec::new()).collect();
    for (i, j) in jobs.into_iter().enumerate() {
        shares[i % workers].push(j);
    }
    let threads: Vec<_> = shares
        .into_iter()
        .map(|share| std::thread::spawn(move || probe_share(share)))
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

/// One thread's sources, a batch at a time.
fn probe_share(share: Vec<Source>) -> io::Result<Vec<(usize, HashSet<IpAddr>)>> {
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
}

/// A source's two echo sockets, made inside its namespace.
struct Sockets {
    v4: EchoSocket,
    v6: EchoSocket,
}

impl Sockets {
    fn new() -> io::Result<Self> {
        let v4 = EchoSocket::open(Family::V4)?;
        let v6 = EchoSocket::open(Family::V6)?;
        Ok(Sockets {
            v4: v4.replies_only(SOCKET_BUFFER),
            v6: v6.replies_only(SOCKET_BUFFER),
        })
    }

    fn send(&self, addr: IpAddr, ident: u16, seq: u16) -> io::Result<usize> {
        let sock = if addr.is_ipv4() { &self.v4 } else { &self.v6 };
        sock.send(addr, ident, seq, PAYLOAD)
    }
}

/// Echo every target of every source, resending to the silent ones each round,
/// until all that must answer have (after one full round for the others).
/// Returns who replied, per source.
fn probe_batch(batch: &[Source], socks: &[Sockets]) -> io::Result<Vec<HashSet<IpAddr>>> {
    let mut replied: Vec<HashSet<IpAddr>> = batch.iter().map(|_| HashSet::new()).collect();
    let ident = thread_ident();
    let done = |replied: &[HashSet<IpAddr>]| {
        batch
            .iter()
            .zip(replied)
            .all(|(src, r)| src.must.is_subset(r))
    };
    for wait in ROUNDS {
        round(batch, socks, ident, wait, &mut replied, &done)?;
        if done(&replied) {
            break;
        }
    }
    Ok(replied)
}

/// One round: an echo to every target not yet heard from, then replies read
/// until all that must answer have or `wait` has passed since the last send.
///
/// A packet toward a neighbour not yet resolved waits in the kernel's ARP / ND
/// queue and holds the socket's send buffer meanwhile: a node with a thousand
/// neighbours fills it after a few hundred sends (EAGAIN). Sends that do not
/// go out are tried again as replies free the buffer, and a round's wait runs
/// from its last send.
fn round(
    batch: &[Source],
    socks: &[Sockets],
    ident: u16,
    wait: Duration,
    replied: &mut [HashSet<IpAddr>],
    done: &dyn Fn(&[HashSet<IpAddr>]) -> bool,
) -> io::Result<()> {
    // Per source, the targets still to send to in this round.
    let mut queue: Vec<VecDeque<usize>> = batch
        .iter()
        .zip(replied.iter())
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
                match sock.send(src.targets[i], ident, i as u16) {
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
            for sock in [&sock.v4, &sock.v6] {
                while let Some(h) = sock.recv()? {
                    if h.answer != Answer::Reply || h.ident != ident {
                        continue;
                    }
                    progress = true;
                    if src.targets.get(h.seq as usize) == Some(&h.from) {
                        replied.insert(h.from);
                    }
                }
            }
        }
        let sent_all = queue.iter().all(|q| q.is_empty());
        if done(replied) || (sent_all && last_send.elapsed() >= wait) {
            return Ok(());
        }
        if !progress {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}
