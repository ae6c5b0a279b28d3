//! Link impairments: what a link does to the traffic crossing it, per
//! direction. The kernel shapes a rate (TBF on the sending end of the veth,
//! or CAKE where the file asks for it and the kernel has it);
//! delay, jitter, loss, duplicates, reordering and a queue need the userspace
//! link path (this kernel has no netem): the link becomes two veth pairs
//! through a relay namespace where tunbench's process handles each frame of
//! an impaired direction (`shape::link` has the semantics, netem's).
//!
//! ```toml
//! [[links]]
//! a = "r1:wan"
//! b = "isp:cpe"
//! impairments = { rate = "1G" }                # both directions
//! impairments.b_to_a = { rate = "100M" }       # download slower than upload
//! impairments.shaper = "cake"                  # CAKE instead of TBF
//! ```

mod shaping;

pub use shaping::{Shaper, Shaping, shaping_lines};

use super::kernel::KernelFacts;
use super::{KeyPath, Problem};
use crate::vocab::framing::Framing;

/// One direction's impairments.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Impairment {
    /// Line rate in bit/s (K, M, G suffixes in the file, powers of 1000).
    /// Every frame pays its framing's bytes on the wire, so a 1G Ethernet
    /// link carries 941 Mbit/s of TCP goodput at MTU 1500, the NVR500 study's figure.
    pub rate: Option<u64>,
    /// Microseconds ("20ms", "500us", "1s" in the file).
    pub delay_us: Option<u64>,
    pub jitter_us: Option<u64>,
    /// Percent, 0 to 100.
    pub loss: Option<f64>,
    pub duplicate: Option<f64>,
    pub reorder: Option<f64>,
    /// The relay's queue, in packets or in bytes ("64KB"); 1000 packets
    /// (netem's `limit`) when neither is given, so a flood into a long delay
    /// cannot hold unbounded memory.
    pub queue_packets: Option<u32>,
    pub queue_bytes: Option<u64>,
    /// What the rate counts per frame: `ethernet` when unset, `ethernet-vlan`,
    /// `pppoe` or `none` (vocab::framing has their bytes). The link relay
    /// paces `none`, which TBF cannot charge.
    pub framing: Option<Framing>,
    /// The qdisc that shapes `rate`: TBF when unset. `shaper = "auto"` in the
    /// file is settled here, for the kernel that builds the lab.
    pub rate_shaper: Option<Shaper>,
}

impl Impairment {
    pub fn is_none(&self) -> bool {
        self.rate.is_none() && !self.needs_relay()
    }

    /// Whether the direction needs the userspace link path. On a link that
    /// does, a direction that needs none crosses the relay in the kernel (tc
    /// mirred).
    pub fn needs_relay(&self) -> bool {
        self.relay_paces()
            || self.delay_us.is_some()
            || self.jitter_us.is_some()
            || self.loss.is_some()
            || self.duplicate.is_some()
            || self.reorder.is_some()
            || self.queue_packets.is_some()
            || self.queue_bytes.is_some()
    }

    /// Whether the relay paces the rate: in `framing = "none"`, which the
    /// kernel's TBF cannot charge (see `shaping_lines`); CAKE can.
    pub fn relay_paces(&self) -> bool {
        self.rate.is_some()
            && self.framing == Some(Framing::None)
            && self.rate_shaper != Some(Shaper::Cake)
    }

    /// The queue a direction's rate builds, in bytes, when `queue` is set:
    /// bytes as written, or packets of a full frame (1514 bytes on the veth, a
    /// 1500-byte MTU and the Ethernet header). Without `queue`, TBF holds 50
    /// ms of the rate.
    pub fn rate_queue_bytes(&self) -> Option<u64> {
        self.queue_bytes
            .or(self.queue_packets.map(|n| n as u64 * FULL_FRAME))
    }

    /// What the relay's shaper does with the direction.
    pub fn shaper(&self) -> crate::codec::shape::link::Impairments {
        let us = |v: Option<u64>| std::time::Duration::from_micros(v.unwrap_or(0));
        crate::codec::shape::link::Impairments {
            delay: us(self.delay_us),
            jitter: us(self.jitter_us),
            loss: self.loss.unwrap_or(0.0),
            duplicate: self.duplicate.unwrap_or(0.0),
            reorder: self.reorder.unwrap_or(0.0),
            queue_packets: self.queue_packets,
            queue_bytes: self.queue_bytes,
            pace: self.rate.filter(|_| self.relay_paces()).map(|bps| {
                crate::codec::shape::link::Pace {
                    bps,
                    framing: Framing::None,
                    queue_bytes: self.rate_queue_bytes().unwrap_or(bps / 8 / 20),
                }
            }),
        }
    }

    /// Takes every setting `over` has.
    pub fn overlay(&mut self, over: &Impairment) {
        macro_rules! take {
            ($($f:ident),*) => { $( if over.$f.is_some() { self.$f = over.$f; } )* };
        }
        take!(
            rate,
            delay_us,
            jitter_us,
            loss,
            duplicate,
            reorder,
            queue_packets,
            queue_bytes,
            framing,
            rate_shaper
        );
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LinkImpairments {
    pub a_to_b: Impairment,
    pub b_to_a: Impairment,
}

impl LinkImpairments {
    /// Whether the link goes through a relay namespace.
    pub fn needs_relay(&self) -> bool {
        self.a_to_b.needs_relay() || self.b_to_a.needs_relay()
    }
}

/// Bytes of a full frame as the veth (and TBF) counts it: a 1500-byte packet
/// and its 14-byte Ethernet header.
const FULL_FRAME: u64 = 1514;

/// The slowest and fastest rates a link takes (TBF's rate is 64-bit; beyond
/// 100G a veth would not keep up anyway).
const MIN_RATE: u64 = 8_000;
const MAX_RATE: u64 = 100_000_000_000;

/// The longest delay or jitter a link takes.
const MAX_DELAY_US: u64 = 10_000_000;

const KNOWN: &str = "rate, framing, delay, jitter, loss, duplicate, reorder, queue, shaper";

/// A link's `impairments` for a kernel of abilities `k` (which `shaper`
/// depends on).
pub fn resolve(
    v: &toml::Value,
    at: &KeyPath,
    k: KernelFacts,
    p: &mut Vec<Problem>,
) -> LinkImpairments {
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
                    slot.overlay(&own);
                }
                None => p.push(Problem::new(&at, format!("{key} must be a table"))),
            }
        }
    }
    shaping::settle_shapers(t, at, k, &mut out, p);
    for (key, d) in [("a_to_b", &out.a_to_b), ("b_to_a", &out.b_to_a)] {
        if d.reorder.is_some_and(|r| r > 0.0)
            && d.delay_us.unwrap_or(0) == 0
            && d.jitter_us.unwrap_or(0) == 0
        {
            p.push(Problem::new(
                at,
                format!("{key}: reorder needs a delay (or jitter): reordered packets are the ones sent ahead of the delayed rest, as in netem"),
            ));
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
            "framing" => imp.framing = framing(v, &kat, p),
            "delay" => imp.delay_us = duration_us(v, &kat, p),
            "jitter" => imp.jitter_us = duration_us(v, &kat, p),
            "loss" => imp.loss = percent(v, &kat, p),
            "duplicate" => imp.duplicate = percent(v, &kat, p),
            "reorder" => imp.reorder = percent(v, &kat, p),
            "queue" => queue(v, &kat, &mut imp, p),
            // Settled once both directions are known (`shaping::settle_shapers`).
            "shaper" => {}
            "a_to_b" | "b_to_a" if top => {}
            _ => p.push(Problem::new(
                &kat,
                format!(
                    "unknown impairment `{k}`; known: {KNOWN}{}",
                    if top { ", a_to_b, b_to_a" } else { "" }
                ),
            )),
        }
    }
    imp
}

/// "20ms", "500us", "1.5s", or a number of milliseconds.
pub fn parse_duration_us(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, scale) = if let Some(n) = s.strip_suffix("us") {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix("ms") {
        (n, 1e3)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1e6)
    } else {
        return Err(format!("\"{s}\" needs a unit: us, ms or s (\"20ms\")"));
    };
    let x: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("\"{s}\" is not a duration such as \"20ms\""))?;
    if !x.is_finite() || x < 0.0 {
        return Err(format!("\"{s}\" is negative"));
    }
    Ok((x * scale).round() as u64)
}

fn duration_us(v: &toml::Value, at: &KeyPath, p: &mut Vec<Problem>) -> Option<u64> {
    let r = match v {
        toml::Value::String(s) => parse_duration_us(s),
        toml::Value::Integer(i) if *i >= 0 => Ok(*i as u64 * 1000),
        toml::Value::Float(f) if *f >= 0.0 => Ok((f * 1000.0).round() as u64),
        _ => Err(
            "must be a duration such as \"20ms\" (a bare number is milliseconds), not negative"
                .into(),
        ),
    };
    match r {
        Ok(us) if us <= MAX_DELAY_US => Some(us),
        Ok(us) => {
            p.push(Problem::new(
                at,
                format!(
                    "{} ms is more than the 10 s a link may hold a packet",
                    us / 1000
                ),
            ));
            None
        }
        Err(e) => {
            p.push(Problem::new(at, e));
            None
        }
    }
}

fn percent(v: &toml::Value, at: &KeyPath, p: &mut Vec<Problem>) -> Option<f64> {
    let x = match v {
        toml::Value::Integer(i) => *i as f64,
        toml::Value::Float(f) => *f,
        toml::Value::String(s) => match s.trim().trim_end_matches('%').trim().parse::<f64>() {
            Ok(x) => x,
            Err(_) => {
                p.push(Problem::new(
                    at,
                    format!("\"{s}\" is not a percentage such as 1.5"),
                ));
                return None;
            }
        },
        _ => {
            p.push(Problem::new(at, "must be a percentage such as 1.5"));
            return None;
        }
    };
    if !(0.0..=100.0).contains(&x) || !x.is_finite() {
        p.push(Problem::new(at, format!("{x} % is outside 0..100")));
        return None;
    }
    Some(x)
}

/// `queue = 100` (packets) or `queue = "64KB"` (bytes; K, M: powers of 1000).
fn queue(v: &toml::Value, at: &KeyPath, imp: &mut Impairment, p: &mut Vec<Problem>) {
    match v {
        toml::Value::Integer(i) if *i >= 1 && *i <= 1_000_000 => {
            imp.queue_packets = Some(*i as u32)
        }
        toml::Value::String(s) => {
            let t = s.trim();
            let (num, scale) = if let Some(n) = t.strip_suffix("MB") {
                (n, 1_000_000.0)
            } else if let Some(n) = t.strip_suffix("KB") {
                (n, 1000.0)
            } else if let Some(n) = t.strip_suffix('B') {
                (n, 1.0)
            } else {
                (t, 0.0)
            };
            match num.trim().parse::<f64>() {
                Ok(x) if scale > 0.0 && x * scale >= 1500.0 => {
                    imp.queue_bytes = Some((x * scale) as u64)
                }
                Ok(_) if scale > 0.0 => p.push(Problem::new(
                    at,
                    format!("queue \"{s}\" holds not even one 1500-byte frame"),
                )),
                _ => p.push(Problem::new(
                    at,
                    format!(
                        "queue \"{s}\" must be packets (100) or bytes with B, KB or MB (\"64KB\")"
                    ),
                )),
            }
        }
        _ => p.push(Problem::new(
            at,
            "queue must be a number of packets (1..1000000) or bytes such as \"64KB\"",
        )),
    }
}

fn framing(v: &toml::Value, at: &KeyPath, p: &mut Vec<Problem>) -> Option<Framing> {
    let found = v.as_str().and_then(Framing::parse);
    if found.is_none() {
        let known: Vec<_> = Framing::ALL.iter().map(|f| f.name()).collect();
        p.push(Problem::new(
            at,
            format!("framing {v} is none of {}", known.join(", ")),
        ));
    }
    found
}

fn rate(v: &toml::Value, at: &KeyPath, p: &mut Vec<Problem>) -> Option<u64> {
    let r = match v {
        toml::Value::String(s) => {
            crate::vocab::units::parse_rate(s).map_err(|e| format!("rate {e}"))
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> (LinkImpairments, Vec<String>) {
        let v: toml::Value = toml::from_str(&format!("x = {s}")).unwrap();
        let mut p = Vec::new();
        let r = resolve(
            &v["x"],
            &KeyPath::root().key("impairments"),
            KernelFacts::FULL,
            &mut p,
        );
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
    fn delay_loss_and_the_rest_parse_and_a_direction_overrides_them() {
        let (r, p) = parse(
            r#"{ delay = "20ms", jitter = "500us", loss = 1, b_to_a = { delay = 5, duplicate = "2 %", reorder = 0.5, queue = "64KB" }, a_to_b = { queue = 100 } }"#,
        );
        assert!(p.is_empty(), "{p:?}");
        assert_eq!(r.a_to_b.delay_us, Some(20_000));
        assert_eq!(r.a_to_b.jitter_us, Some(500));
        assert_eq!(r.a_to_b.loss, Some(1.0));
        assert_eq!(r.a_to_b.queue_packets, Some(100));
        assert_eq!(r.b_to_a.delay_us, Some(5_000));
        assert_eq!(r.b_to_a.loss, Some(1.0), "the link's own setting stays");
        assert_eq!(r.b_to_a.duplicate, Some(2.0));
        assert_eq!(r.b_to_a.queue_bytes, Some(64_000));
        assert!(r.needs_relay());
        let (r, _) = parse(r#"{ rate = "1G" }"#);
        assert!(!r.needs_relay(), "rate alone stays in the kernel");
    }

    #[test]
    fn impossible_values_are_refused_by_name() {
        for (text, want) in [
            (r#"{ loss = 101 }"#, "101 % is outside 0..100"),
            (r#"{ loss = -1 }"#, "outside 0..100"),
            (r#"{ delay = "20" }"#, "needs a unit"),
            (r#"{ delay = "-5ms" }"#, "negative"),
            (r#"{ delay = "11s" }"#, "more than the 10 s"),
            (r#"{ queue = "1KB" }"#, "not even one"),
            (r#"{ queue = 0 }"#, "queue must be"),
            (r#"{ reorder = 5 }"#, "reorder needs a delay"),
        ] {
            let (_, p) = parse(text);
            assert!(p.iter().any(|m| m.contains(want)), "{text}: {p:?}");
        }
        let (_, p) = parse(r#"{ b_to_a = { lossy = 1 } }"#);
        assert!(
            p[0].contains("unknown impairment `lossy`; known: rate, framing, delay"),
            "{p:?}"
        );
        let (_, p) = parse(r#"{ rate = "fast" }"#);
        assert!(p[0].contains("is not a number"), "{p:?}");
        let (_, p) = parse(r#"{ rate = "1" }"#);
        assert!(p[0].contains("outside 8K..100G"), "{p:?}");
    }

    #[test]
    fn framing_is_one_of_four_and_a_direction_has_its_own() {
        let (r, p) = parse(r#"{ rate = "1G", framing = "pppoe", b_to_a = { framing = "none" } }"#);
        assert!(p.is_empty(), "{p:?}");
        assert_eq!(r.a_to_b.framing, Some(Framing::Pppoe));
        assert_eq!(r.b_to_a.framing, Some(Framing::None));
        let (_, p) = parse(r#"{ framing = "atm" }"#);
        assert_eq!(
            p,
            [r#"framing "atm" is none of ethernet, ethernet-vlan, pppoe, none"#]
        );
    }
}
