//! Link impairments: what a link does to the traffic crossing it, per direction.
//!
//! ```toml
//! [[links]]
//! a = "r1:wan"
//! b = "isp:cpe"
//! impairments = { rate = "1G" }                # both directions
//! impairments.b_to_a = { rate = "100M" }       # download slower than upload
//! ```
//!
//! `rate` is the Ethernet line rate in bit/s (K, M, G suffixes, powers of 1000),
//! counting each frame's preamble, inter-frame gap and FCS as a real link does:
//! a 1G link carries 941 Mbit/s of TCP goodput at MTU 1500, the seed's figure.
//! The kernel shapes it (TBF on the sending end of the veth). Delay, jitter,
//! loss, reordering and duplication need a userspace link path (this kernel has
//! no netem), which is not in this version: they are refused by name.

use super::{KeyPath, Problem};

/// One direction's impairments.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Impairment {
    /// Line rate in bit/s.
    pub rate: Option<u64>,
}

impl Impairment {
    pub fn is_none(&self) -> bool {
        self.rate.is_none()
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct LinkImpairments {
    pub a_to_b: Impairment,
    pub b_to_a: Impairment,
}

/// Bytes per frame a real Ethernet link spends beyond what the veth counts
/// (destination MAC to the end of the payload): preamble and start delimiter 8,
/// FCS 4, inter-frame gap 12.
pub const ETHERNET_OVERHEAD: u32 = 24;

/// The slowest and fastest rates a link takes (TBF's rate is 64-bit; beyond
/// 100G a veth would not keep up anyway).
const MIN_RATE: u64 = 8_000;
const MAX_RATE: u64 = 100_000_000_000;

const LATER: &[&str] = &["delay", "jitter", "loss", "reorder", "duplicate", "queue"];

pub fn resolve(v: &toml::Value, at: &KeyPath, p: &mut Vec<Problem>) -> LinkImpairments {
    let mut out = LinkImpairments::default();
    let Some(t) = v.as_table() else {
        p.push(Problem::new(
            at,
            "impairments must be a table, e.g. { rate = \"100M\" }",
        ));
        return out;
    };
    let both = direction(t, at, true, p);
    out.a_to_b = both;
    out.b_to_a = both;
    for (key, slot) in [("a_to_b", &mut out.a_to_b), ("b_to_a", &mut out.b_to_a)] {
        if let Some(d) = t.get(key) {
            let at = at.key(key);
            match d.as_table() {
                Some(dt) => {
                    let own = direction(dt, &at, false, p);
                    if own.rate.is_some() {
                        slot.rate = own.rate;
                    }
                }
                None => p.push(Problem::new(&at, format!("{key} must be a table"))),
            }
        }
    }
    out
}

/// The settings of one table: the link's own (`top`, which may also hold the
/// per-direction tables) or one direction's.
fn direction(
    t: &toml::map::Map<String, toml::Value>,
    at: &KeyPath,
    top: bool,
    p: &mut Vec<Problem>,
) -> Impairment {
    let mut imp = Impairment::default();
    for (k, v) in t {
        let kat = at.key(k);
        match k.as_str() {
            "rate" => imp.rate = rate(v, &kat, p),
            "a_to_b" | "b_to_a" if top => {}
            k if LATER.contains(&k) => p.push(Problem::new(
                &kat,
                format!(
                    "{k} is not supported yet: it needs the userspace link path (this kernel has no netem); only rate is shaped in this version"
                ),
            )),
            _ => p.push(Problem::new(
                &kat,
                format!(
                    "unknown impairment `{k}`; known: rate{}",
                    if top { ", a_to_b, b_to_a" } else { "" }
                ),
            )),
        }
    }
    imp
}

fn rate(v: &toml::Value, at: &KeyPath, p: &mut Vec<Problem>) -> Option<u64> {
    let r = match v {
        toml::Value::String(s) => crate::cli::parse_rate(s).map_err(|e| format!("rate {e}")),
        toml::Value::Integer(i) if *i >= 0 => Ok(*i as u64),
        _ => Err("rate must be a string such as \"100M\" or a number of bit/s".into()),
    };
    match r {
        Ok(r) if (MIN_RATE..=MAX_RATE).contains(&r) => Some(r),
        Ok(r) => {
            p.push(Problem::new(
                at,
                format!("rate {r} bit/s is outside 8K..100G"),
            ));
            None
        }
        Err(e) => {
            p.push(Problem::new(at, e));
            None
        }
    }
}

/// The tc line that shapes a veth end's egress to `rate`: TBF with the Ethernet
/// framing overhead, a queue of 50 ms, and a burst of 5 ms of the rate (at least
/// 32 KB). The burst is what a late TBF timer can make up for: with 16 KB at 50
/// Mbit/s (2.6 ms) a busy 2-core VM lost 6-14 % of the rate to timer latency.
/// A burst above a GSO packet's size also means TBF no longer splits it, and
/// counts the framing overhead once for the whole packet: up to 1.6 % more
/// goodput than a real link, measured +3 % at 50 Mbit/s.
pub fn tbf_line(dev: &str, rate: u64) -> String {
    tbf("add", dev, rate)
}

/// The same for a running lab: takes the place of whatever shapes `dev` now.
pub fn tbf_replace_line(dev: &str, rate: u64) -> String {
    tbf("replace", dev, rate)
}

fn tbf(verb: &str, dev: &str, rate: u64) -> String {
    let burst = (rate / 8 / 200).max(32 * 1024);
    format!(
        "qdisc {verb} dev {dev} root tbf rate {rate}bit burst {burst} latency 50ms overhead {ETHERNET_OVERHEAD}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> (LinkImpairments, Vec<String>) {
        let v: toml::Value = toml::from_str(&format!("x = {s}")).unwrap();
        let mut p = Vec::new();
        let r = resolve(&v["x"], &KeyPath::root().key("impairments"), &mut p);
        (r, p.into_iter().map(|x| x.message).collect())
    }

    #[test]
    fn a_rate_applies_both_ways_and_a_direction_overrides_it() {
        let (r, p) = parse(r#"{ rate = "1G", b_to_a = { rate = "100M" } }"#);
        assert!(p.is_empty(), "{p:?}");
        assert_eq!(r.a_to_b.rate, Some(1_000_000_000));
        assert_eq!(r.b_to_a.rate, Some(100_000_000));
        let (r, _) = parse(r#"{ a_to_b = { rate = 50000000 } }"#);
        assert_eq!((r.a_to_b.rate, r.b_to_a.rate), (Some(50_000_000), None));
    }

    #[test]
    fn what_this_version_cannot_do_is_refused_by_name() {
        let (_, p) = parse(r#"{ rate = "10M", delay = "20ms" }"#);
        assert!(p[0].contains("delay is not supported yet"), "{p:?}");
        let (_, p) = parse(r#"{ b_to_a = { lossy = 1 } }"#);
        assert!(
            p[0].contains("unknown impairment `lossy`; known: rate"),
            "{p:?}"
        );
        let (_, p) = parse(r#"{ rate = "fast" }"#);
        assert!(p[0].contains("is not a number"), "{p:?}");
        let (_, p) = parse(r#"{ rate = "1" }"#);
        assert!(p[0].contains("outside 8K..100G"), "{p:?}");
    }

    #[test]
    fn tbf_counts_the_ethernet_framing() {
        assert_eq!(
            tbf_line("eth0", 1_000_000_000),
            "qdisc add dev eth0 root tbf rate 1000000000bit burst 625000 latency 50ms overhead 24"
        );
        assert!(tbf_line("eth0", 50_000_000).contains("burst 32768 "));
    }
}
