//! One `[[measure]]` entry: the cells it measures (families, protocols,
//! directions, streams), how (runs, durations, UDP loss and size, latency
//! probes), and its target, a node or an address outside the lab.

use crate::topology::raw::{RawMeasure, RawTarget};
use crate::topology::resolved::Measurement;
use crate::topology::{KeyPath, Problem, valid_name};
use crate::vocab::target::MeasureTarget;
use crate::vocab::{Direction, Family, Proto};
use std::net::IpAddr;

pub(super) fn measurement(
    m: &RawMeasure,
    at: &KeyPath,
    p: &mut Vec<Problem>,
) -> Option<Measurement> {
    let before = p.len();
    let families = words(
        &m.families,
        &[("ipv4", Family::Ipv4), ("ipv6", Family::Ipv6)],
        &at.key("families"),
        p,
    );
    let protocols = words(
        &m.protocols,
        &[("tcp", Proto::Tcp), ("udp", Proto::Udp)],
        &at.key("protocols"),
        p,
    );
    let directions = words(
        &m.directions,
        &[
            ("sender", Direction::Sender),
            ("receiver", Direction::Receiver),
        ],
        &at.key("directions"),
        p,
    );
    let streams = streams(m, at, p);
    let method = method(m, at, p);
    let ipv4 = address(&m.ipv4, true, &at.key("ipv4"), p);
    let ipv6 = address(&m.ipv6, false, &at.key("ipv6"), p);
    let given = m.families.as_ref().and(families.as_deref());
    let to = target(m, given, at, p);
    // An address target has one family, its own: the default list is that one.
    let families = match (to.as_ref().and_then(MeasureTarget::family), &m.families) {
        (Some(own), None) => Some(vec![own]),
        _ => families,
    };
    let name = m.name.clone().unwrap_or_else(|| "raw".into());
    if !valid_name(&name) {
        p.push(Problem::new(
            &at.key("name"),
            format!("path name \"{name}\" must be 1-32 letters, digits, '-' or '_'"),
        ));
    }
    if p.len() > before {
        return None;
    }
    Some(Measurement {
        name,
        from: m.from.clone(),
        to: to?,
        ipv4,
        ipv6,
        families: families?,
        protocols: protocols?,
        directions: directions?,
        streams,
        runs: method.runs as u32,
        duration: method.duration,
        trial_duration: method.trial_duration,
        udp_loss: method.udp_loss,
        udp_len: method.udp_len as u32,
        latency: m.latency,
        latency_rate: method.latency_rate,
        latency_idle: method.latency_idle,
        scenarios: m.scenarios.clone(),
        at: at.clone(),
    })
}

/// A list of words from `all`, each with its value; absent, every value.
fn words<T: Copy>(
    given: &Option<Vec<String>>,
    all: &[(&str, T)],
    at: &KeyPath,
    p: &mut Vec<Problem>,
) -> Option<Vec<T>> {
    let Some(list) = given else {
        return Some(all.iter().map(|(_, v)| *v).collect());
    };
    if list.is_empty() {
        p.push(Problem::new(
            at,
            "an empty list measures nothing; leave the key out for all",
        ));
        return None;
    }
    let mut out = Vec::new();
    for (i, w) in list.iter().enumerate() {
        match all.iter().find(|(k, _)| k == w) {
            Some((_, v)) => out.push(*v),
            None => {
                let known: Vec<String> = all.iter().map(|(k, _)| format!("\"{k}\"")).collect();
                p.push(Problem::new(
                    &at.index(i),
                    format!("\"{w}\" is not one of {}", known.join(", ")),
                ));
                return None;
            }
        }
    }
    Some(out)
}

/// The stream counts measured (default: one stream).
fn streams(m: &RawMeasure, at: &KeyPath, p: &mut Vec<Problem>) -> Vec<u32> {
    let mut streams = Vec::new();
    for (i, s) in m
        .streams
        .clone()
        .unwrap_or_else(|| vec![1])
        .iter()
        .enumerate()
    {
        if (1..=128).contains(s) {
            streams.push(*s as u32);
        } else {
            p.push(Problem::new(
                &at.key("streams").index(i),
                format!("{s} streams; use 1..=128"),
            ));
        }
    }
    streams
}

/// How each cell is measured, defaults filled in.
struct Method {
    runs: i64,
    duration: f64,
    trial_duration: f64,
    udp_loss: f64,
    udp_len: i64,
    latency_rate: f64,
    latency_idle: f64,
}

fn method(m: &RawMeasure, at: &KeyPath, p: &mut Vec<Problem>) -> Method {
    let runs = m.runs.unwrap_or(5);
    if !(1..=100).contains(&runs) {
        p.push(Problem::new(
            &at.key("runs"),
            format!("runs = {runs}; use 1..=100"),
        ));
    }
    let secs = |v: Option<f64>, d: f64, key: &str, p: &mut Vec<Problem>| {
        let v = v.unwrap_or(d);
        if !(1.0..=3600.0).contains(&v) {
            p.push(Problem::new(
                &at.key(key),
                format!("{key} = {v} s; use 1 to 3600 seconds"),
            ));
        }
        v
    };
    let duration = secs(m.duration, 10.0, "duration", p);
    let trial_duration = secs(m.trial_duration, 2.0, "trial_duration", p);
    let udp_loss = m.udp_loss.unwrap_or(10.0);
    if !(0.0..=100.0).contains(&udp_loss) {
        p.push(Problem::new(
            &at.key("udp_loss"),
            format!("udp_loss = {udp_loss} %; use 0 to 100"),
        ));
    }
    let udp_len = m.udp_len.unwrap_or(1448);
    if !(16..=65507).contains(&udp_len) {
        p.push(Problem::new(
            &at.key("udp_len"),
            format!("udp_len = {udp_len} bytes; use 16..=65507"),
        ));
    }
    let latency_rate = m.latency_rate.unwrap_or(crate::vocab::LATENCY_RATE);
    if !(1.0..=1000.0).contains(&latency_rate) {
        p.push(Problem::new(
            &at.key("latency_rate"),
            format!("latency_rate = {latency_rate} probes per second; use 1 to 1000"),
        ));
    }
    let latency_idle = m.latency_idle.unwrap_or(crate::vocab::LATENCY_IDLE_SECONDS);
    if !(0.5..=60.0).contains(&latency_idle) {
        p.push(Problem::new(
            &at.key("latency_idle"),
            format!("latency_idle = {latency_idle} s; use 0.5 to 60 seconds"),
        ));
    }
    Method {
        runs,
        duration,
        trial_duration,
        udp_loss,
        udp_len,
        latency_rate,
        latency_idle,
    }
}

/// `ipv4` or `ipv6`: which of the target node's addresses to measure to.
fn address(v: &Option<String>, v4: bool, at: &KeyPath, p: &mut Vec<Problem>) -> Option<IpAddr> {
    let s = v.as_ref()?;
    match s.parse::<IpAddr>() {
        Ok(a) if a.is_ipv4() == v4 => Some(a),
        _ => {
            p.push(Problem::new(
                at,
                format!(
                    "\"{s}\" is not an {} address (no prefix length here)",
                    if v4 { "IPv4" } else { "IPv6" }
                ),
            ));
            None
        }
    }
}

/// `to`: a node's name as written (validate checks the node), or an address
/// outside the lab, whose family is then the only one measured and which
/// `ipv4` and `ipv6` cannot redirect.
fn target(
    m: &RawMeasure,
    families: Option<&[Family]>,
    at: &KeyPath,
    p: &mut Vec<Problem>,
) -> Option<MeasureTarget> {
    let (address, port) = match &m.to {
        RawTarget::Node(n) => return Some(MeasureTarget::Node(n.clone())),
        RawTarget::Address { address, port } => (address, port),
    };
    let before = p.len();
    let tat = at.key("to");
    let address = match address.parse::<IpAddr>() {
        Ok(a) => match crate::vocab::target::address_problem(a) {
            Some(why) => {
                p.push(Problem::new(&tat.key("address"), why));
                None
            }
            None => Some(a),
        },
        Err(_) => {
            p.push(Problem::new(
                &tat.key("address"),
                format!(
                    "\"{address}\" is not an IPv4 or IPv6 address (no prefix length, no port: give the port as port = 5201)"
                ),
            ));
            None
        }
    };
    let port = match port {
        None => crate::vocab::target::DEFAULT_PORT,
        Some(n) if (1..=65535).contains(n) => *n as u16,
        Some(n) => {
            p.push(Problem::new(
                &tat.key("port"),
                format!("port {n}; give the server's port, 1 to 65535 (iperf3's is 5201)"),
            ));
            0
        }
    };
    let address = address?;
    let own = Family::of(address);
    for (key, given) in [("ipv4", &m.ipv4), ("ipv6", &m.ipv6)] {
        if given.is_some() {
            p.push(Problem::new(
                &at.key(key),
                format!(
                    "{key} chooses among a node's addresses; the target is the address {address} itself (leave {key} out)"
                ),
            ));
        }
    }
    for (i, f) in families.unwrap_or_default().iter().enumerate() {
        if *f != own {
            p.push(Problem::new(
                &at.key("families").index(i),
                format!(
                    "\"{}\" cannot be measured to {address}, an {} address; list only \"{}\" (or leave families out)",
                    f.word(),
                    own.title(),
                    own.word()
                ),
            ));
        }
    }
    (p.len() == before).then_some(MeasureTarget::Address { address, port })
}
