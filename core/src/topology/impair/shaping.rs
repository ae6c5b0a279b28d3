//! What shapes a direction's rate in the kernel, and the tc lines it takes:
//! a TBF pair (the default) or CAKE (`shaper = "cake"`, or `"auto"` where the
//! kernel has it). Either charges every frame its framing's bytes on the wire.

use super::{Impairment, LinkImpairments};
use crate::topology::kernel::{CAKE, KernelFacts};
use crate::topology::{KeyPath, Problem};
use crate::vocab::framing::{ETHERNET_HEADER, Framing};

/// The qdisc that shapes a direction's rate on the sending veth end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Shaper {
    /// A TBF charging each frame its framing, over a TBF that splits GSO
    /// packets into frames (`shaping_lines`).
    #[default]
    Tbf,
    /// CAKE charging each IP packet its framing (`overhead`, `mpu`), GSO
    /// packets split (`split-gso`), with its own flow queues and AQM.
    Cake,
}

/// What the file says of `shaper`: one of the qdiscs, or the best this
/// kernel has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ShaperChoice {
    Is(Shaper),
    /// CAKE where the kernel has it, TBF otherwise.
    Auto,
}

/// `shaper` in table `t` (at `at`), if it is there and valid.
fn shaper_choice(
    t: &toml::map::Map<String, toml::Value>,
    at: &KeyPath,
    p: &mut Vec<Problem>,
) -> Option<(ShaperChoice, KeyPath)> {
    let v = t.get("shaper")?;
    let at = at.key("shaper");
    let choice = match v.as_str() {
        Some("tbf") => ShaperChoice::Is(Shaper::Tbf),
        Some("cake") => ShaperChoice::Is(Shaper::Cake),
        Some("auto") => ShaperChoice::Auto,
        _ => {
            p.push(Problem::new(
                &at,
                format!("shaper {v} is not one of \"tbf\", \"cake\", \"auto\""),
            ));
            return None;
        }
    };
    Some((choice, at))
}

/// Each direction's `rate_shaper` from its own `shaper` or the link's, for
/// kernel `k`: "auto" takes CAKE where `k` has it; "cake" where it has not,
/// or beside a `queue` (CAKE keeps its own), is refused where it is written.
pub(super) fn settle_shapers(
    t: &toml::map::Map<String, toml::Value>,
    at: &KeyPath,
    k: KernelFacts,
    out: &mut LinkImpairments,
    p: &mut Vec<Problem>,
) {
    let link = shaper_choice(t, at, p);
    let mut given = link.as_ref().map(|(_, a)| a.clone());
    // Where "cake" was refused: a link's own shaper is refused once.
    let mut refused = Vec::new();
    for (key, d) in [("a_to_b", &mut out.a_to_b), ("b_to_a", &mut out.b_to_a)] {
        let own = t
            .get(key)
            .and_then(|v| v.as_table())
            .and_then(|dt| shaper_choice(dt, &at.key(key), p));
        let Some((choice, said)) = own.or_else(|| link.clone()) else {
            continue;
        };
        given.get_or_insert_with(|| said.clone());
        let shaper = match choice {
            ShaperChoice::Is(s) => s,
            ShaperChoice::Auto if k.cake => Shaper::Cake,
            ShaperChoice::Auto => Shaper::Tbf,
        };
        let lacking = choice == ShaperChoice::Is(Shaper::Cake) && !k.cake;
        if d.rate.is_some() && lacking && !refused.contains(&said.to_string()) {
            refused.push(said.to_string());
            p.push(Problem::new(
                &said,
                format!(
                    "shaper = \"cake\" needs the kernel's CAKE qdisc, and {}",
                    CAKE.refusal(
                        "use \"tbf\" (the default) or \"auto\" (CAKE where the kernel has it)"
                    )
                ),
            ));
        }
        // Refused whatever this kernel has, so that "auto" never makes a
        // file valid on one machine and invalid on another.
        let queue = d.queue_packets.is_some() || d.queue_bytes.is_some();
        if d.rate.is_some() && queue && choice != ShaperChoice::Is(Shaper::Tbf) {
            p.push(Problem::new(
                &said,
                format!("{key}: `queue` sizes TBF's queue, and CAKE keeps its own (its AQM decides what it holds); remove `queue` or use shaper = \"tbf\""),
            ));
        }
        d.rate_shaper = Some(shaper);
    }
    if let Some(said) = given {
        if out.a_to_b.rate.is_none() && out.b_to_a.rate.is_none() {
            p.push(Problem::new(
                &said,
                "shaper picks what shapes `rate`, and this link has no rate; add one (rate = \"100M\")",
            ));
        }
    }
}

/// The tc lines that shape a veth end's egress to `rate` in `framing` with
/// its shaper (`tbf_lines`, `cake_lines`): every frame is charged its bytes
/// on the wire, never a GSO super-packet once.
pub fn shaping_lines(s: &Shaping<'_>, verb: &str) -> String {
    match s.shaper {
        Shaper::Tbf => tbf_lines(s, verb),
        Shaper::Cake => cake_lines(s, verb),
    }
}

/// The TBF pair:
///
/// - The root TBF holds the rate. It charges each packet its length on the
///   veth (Ethernet header included) plus the framing's further bytes, at least
///   the framing's smallest frame (TBF's `overhead` and `mpu`). Its burst, 10
///   ms of the rate and at least two frames, absorbs a busy machine's timer
///   latency, and adds at most 10 ms of the rate to what a test measures.
/// - Its child is a TBF too, at a rate no veth reaches, with a burst of one
///   frame of the link's MTU: TBF splits a GSO packet larger than its burst
///   into the frames it becomes, so the root meters frames. Its queue is the
///   link's: 50 ms of the rate, or `queue_bytes`.
fn tbf_lines(s: &Shaping<'_>, verb: &str) -> String {
    let frame = s.mtu + ETHERNET_HEADER + 4;
    let burst = (s.rate / 8 / 100).max(2 * u64::from(frame));
    let framing = s.framing;
    // TBF counts what the veth counts, header included, and its overhead cannot
    // be negative: `none` is paced by the relay instead (Impairment::relay_paces).
    let overhead = framing.beyond_ip().saturating_sub(ETHERNET_HEADER);
    let queue = s.queue_bytes.unwrap_or(s.rate / 8 / 20 + burst);
    format!(
        "qdisc {verb} dev {dev} root handle 1: tbf rate {rate}bit burst {burst} latency 50ms overhead {overhead} mpu {mpu}\n\
         qdisc {verb} dev {dev} parent 1:1 handle 10: tbf rate {SEGMENTER_RATE} burst {frame} limit {queue}\n",
        dev = s.dev,
        rate = s.rate,
        mpu = framing.min_wire(),
    )
}

/// CAKE in place of the TBF pair: `overhead` and `mpu` are the framing's, so
/// each frame is charged its IP packet plus the framing's bytes, at least the
/// smallest frame (CAKE counts from the IP header once `overhead` is given,
/// which lets it charge `none` too); `split-gso` meters the frames a GSO
/// packet becomes. Its queue, flow isolation and AQM are CAKE's own. It has
/// no bucket: a frame leaves when the frames before it have had their time.
fn cake_lines(s: &Shaping<'_>, verb: &str) -> String {
    format!(
        "qdisc {verb} dev {dev} root handle 1: cake bandwidth {rate}bit overhead {overhead} mpu {mpu} split-gso\n",
        dev = s.dev,
        rate = s.rate,
        overhead = s.framing.beyond_ip(),
        mpu = s.framing.min_wire(),
    )
}

/// One shaped direction: the veth end, its rate, framing, MTU and queue, and
/// the qdisc that shapes it.
#[derive(Debug, Clone, Copy)]
pub struct Shaping<'a> {
    pub dev: &'a str,
    pub rate: u64,
    pub framing: Framing,
    pub mtu: u32,
    pub queue_bytes: Option<u64>,
    pub shaper: Shaper,
}

impl<'a> Shaping<'a> {
    /// How `imp` shapes `dev` on a link of `mtu`, if it has a rate the kernel
    /// shapes (not one the relay paces).
    pub fn of(dev: &'a str, imp: &Impairment, mtu: u32) -> Option<Shaping<'a>> {
        if imp.relay_paces() {
            return None;
        }
        Some(Shaping {
            dev,
            rate: imp.rate?,
            framing: imp.framing.unwrap_or_default(),
            mtu,
            queue_bytes: imp.rate_queue_bytes(),
            shaper: imp.rate_shaper.unwrap_or_default(),
        })
    }
}

/// The segmenting TBF's rate: far above what a veth carries, so it never holds
/// a frame back for long.
const SEGMENTER_RATE: &str = "4000gbit";

#[cfg(test)]
mod tests {
    use super::super::resolve;
    use super::*;

    /// `impairments = s` for a kernel of abilities `k`: the problems whole.
    fn parse_for(s: &str, k: KernelFacts) -> (LinkImpairments, Vec<Problem>) {
        let v: toml::Value = toml::from_str(&format!("x = {s}")).unwrap();
        let mut p = Vec::new();
        let r = resolve(&v["x"], &KeyPath::root().key("impairments"), k, &mut p);
        (r, p)
    }

    const NO_CAKE: KernelFacts = KernelFacts {
        cake: false,
        ..KernelFacts::FULL
    };

    fn parse(s: &str) -> (LinkImpairments, Vec<String>) {
        let (r, p) = parse_for(s, KernelFacts::FULL);
        (r, p.into_iter().map(|x| x.message).collect())
    }

    #[test]
    fn tbf_charges_each_frame_its_framing() {
        let imp = |s: &str| parse(s).0.a_to_b;
        let shaped = |s: &str| {
            let i = imp(s);
            shaping_lines(&Shaping::of("eth0", &i, 1500).unwrap(), "add")
        };
        assert_eq!(
            shaped(r#"{ rate = "1G" }"#),
            "qdisc add dev eth0 root handle 1: tbf rate 1000000000bit burst 1250000 latency 50ms overhead 24 mpu 84\n\
             qdisc add dev eth0 parent 1:1 handle 10: tbf rate 4000gbit burst 1518 limit 7500000\n"
        );
        assert!(shaped(r#"{ rate = "50M" }"#).contains("burst 62500 "));
        assert!(shaped(r#"{ rate = "1M" }"#).contains("burst 3036 "));
        assert!(shaped(r#"{ rate = "50M", framing = "pppoe" }"#).contains(" overhead 32 mpu 84\n"));
        assert!(
            shaped(r#"{ rate = "50M", framing = "ethernet-vlan" }"#)
                .contains(" overhead 28 mpu 84\n")
        );
        // A queue is the rate's queue: 1000 full frames instead of 50 ms.
        let line = shaped(r#"{ rate = "100M", queue = 1000 }"#);
        assert!(line.contains(" limit 1514000\n"), "{line}");
        let (r, _) = parse(r#"{ queue = "64KB" }"#);
        assert_eq!(r.b_to_a.rate_queue_bytes(), Some(64_000));
        assert!(Shaping::of("eth0", &imp(r#"{ delay = 5 }"#), 1500).is_none());
    }

    #[test]
    fn cake_charges_each_frame_its_framing_and_splits_gso() {
        let shaped = |s: &str| {
            let i = parse(s).0.a_to_b;
            shaping_lines(&Shaping::of("eth0", &i, 1500).unwrap(), "add")
        };
        assert_eq!(
            shaped(r#"{ rate = "20M", shaper = "cake" }"#),
            "qdisc add dev eth0 root handle 1: cake bandwidth 20000000bit overhead 38 mpu 84 split-gso\n"
        );
        for (framing, tail) in [
            ("ethernet-vlan", " overhead 42 mpu 84 split-gso\n"),
            ("pppoe", " overhead 46 mpu 84 split-gso\n"),
            // CAKE counts from the IP header: raw IP is its own packet.
            ("none", " overhead 0 mpu 0 split-gso\n"),
        ] {
            let line = shaped(&format!(
                r#"{{ rate = "1G", shaper = "cake", framing = "{framing}" }}"#
            ));
            assert!(line.ends_with(tail), "{framing}: {line}");
        }
        // The default and "tbf" are the TBF pair.
        assert!(shaped(r#"{ rate = "20M" }"#).contains(" tbf rate 20000000bit "));
        assert!(shaped(r#"{ rate = "20M", shaper = "tbf" }"#).contains(" tbf rate 20000000bit "));
    }

    #[test]
    fn cake_shapes_framing_none_in_the_kernel_where_tbf_needs_the_relay() {
        let (r, p) = parse(r#"{ rate = "20M", framing = "none", b_to_a = { shaper = "cake" } }"#);
        assert!(p.is_empty(), "{p:?}");
        assert!(r.a_to_b.relay_paces() && r.a_to_b.needs_relay());
        assert!(!r.b_to_a.relay_paces() && !r.b_to_a.needs_relay());
        assert_eq!(
            (r.a_to_b.rate_shaper, r.b_to_a.rate_shaper),
            (None, Some(Shaper::Cake))
        );
    }

    #[test]
    fn auto_takes_cake_where_the_kernel_has_it_and_tbf_elsewhere() {
        let text = r#"{ rate = "20M", shaper = "auto", a_to_b = { shaper = "tbf" } }"#;
        let (r, p) = parse_for(text, KernelFacts::FULL);
        assert!(p.is_empty(), "{p:?}");
        assert_eq!(r.a_to_b.rate_shaper, Some(Shaper::Tbf), "a direction's own");
        assert_eq!(r.b_to_a.rate_shaper, Some(Shaper::Cake));
        let (r, p) = parse_for(text, NO_CAKE);
        assert!(p.is_empty(), "{p:?}");
        assert_eq!(r.b_to_a.rate_shaper, Some(Shaper::Tbf));
    }

    #[test]
    fn cake_without_the_kernels_cake_is_refused_where_the_file_says_it() {
        let (_, p) = parse_for(r#"{ rate = "20M", b_to_a = { shaper = "cake" } }"#, NO_CAKE);
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].at.to_string(), "impairments.b_to_a.shaper");
        assert_eq!(
            p[0].message,
            "shaper = \"cake\" needs the kernel's CAKE qdisc, and the kernel lacks `tc-cake` \
             (the CAKE qdisc, CONFIG_NET_SCH_CAKE); use \"tbf\" (the default) or \"auto\" \
             (CAKE where the kernel has it); `tunbench doctor` lists what this kernel offers"
        );
        // Said once for the link: refused once, where it is said.
        let (_, p) = parse_for(
            r#"{ a_to_b = { rate = "20M" }, b_to_a = { rate = "8M" }, shaper = "cake" }"#,
            NO_CAKE,
        );
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].at.to_string(), "impairments.shaper");
    }

    #[test]
    fn a_shaper_that_cannot_work_is_refused_by_name() {
        for (text, at, want) in [
            (
                r#"{ rate = "20M", shaper = "htb" }"#,
                "impairments.shaper",
                r#"shaper "htb" is not one of "tbf", "cake", "auto""#,
            ),
            (
                r#"{ delay = "5ms", shaper = "cake" }"#,
                "impairments.shaper",
                "this link has no rate",
            ),
            (
                r#"{ rate = "20M", b_to_a = { shaper = "auto", queue = 100 } }"#,
                "impairments.b_to_a.shaper",
                "b_to_a: `queue` sizes TBF's queue, and CAKE keeps its own",
            ),
        ] {
            // Whatever the kernel has: a file valid on one is valid on all.
            for k in [KernelFacts::FULL, NO_CAKE] {
                let (_, p) = parse_for(text, k);
                assert!(
                    p.iter()
                        .any(|x| x.at.to_string() == at && x.message.contains(want)),
                    "{text} ({k:?}): {p:?}"
                );
            }
        }
        let (_, p) = parse(r#"{ rate = "20M", queue = 100, shaper = "tbf" }"#);
        assert!(p.is_empty(), "a TBF's queue: {p:?}");
    }
}
