//! `tunbench latency`: the latency probes alone between two nodes of a running
//! lab (the idle phase of a measurement, without its throughput cells), per
//! family: round trips, one-way delays each way, jitter, loss, reordering.

use super::measure::probe_rate;
use super::{bad_input, on_signals, runtime};
use crate::engine::latency::stats::{Latency, Spread};
use crate::measure::spec::{LatencySpec, MeasureSpec};
use crate::vocab::Family;
use crate::vocab::target::MeasureTarget;
use anyhow::Result;

#[derive(clap::Args, Debug)]
pub struct LatencyArgs {
    pub lab: String,
    /// The node that sends the probes.
    #[arg(long)]
    pub from: String,
    /// The node that echoes them (tunbench starts its echo responder there), or
    /// a `tunbench server --echo-port` outside the lab: ADDRESS (round trips
    /// only, its clock not being the lab's).
    #[arg(long, value_name = "NODE|ADDRESS", value_parser = MeasureTarget::parse)]
    pub to: MeasureTarget,
    /// Families to probe, e.g. ipv4 [default: ipv4,ipv6; for an address, its own].
    #[arg(long, value_delimiter = ',')]
    pub family: Option<Vec<String>>,
    /// Seconds of probes per family (0.5 to 3600).
    #[arg(long, default_value_t = crate::vocab::LATENCY_IDLE_SECONDS)]
    pub duration: f64,
    /// Probes per second (1 to 1000).
    #[arg(long, default_value_t = crate::vocab::LATENCY_RATE, value_parser = probe_rate)]
    pub rate: f64,
    /// The echo responder's UDP port.
    #[arg(long, default_value_t = crate::vocab::ECHO_PORT)]
    pub port: u16,
    /// Print the figures as JSON (a list of [family, latency]).
    #[arg(long)]
    pub json: bool,
}

pub fn latency(a: LatencyArgs) -> Result<i32> {
    if !(0.5..=3600.0).contains(&a.duration) {
        return Err(bad_input(format!(
            "--duration {}: use 0.5 to 3600 seconds",
            a.duration
        )));
    }
    let families = match (&a.family, a.to.family()) {
        (Some(f), _) => f
            .iter()
            .map(|w| match w.as_str() {
                "ipv4" => Ok(Family::Ipv4),
                "ipv6" => Ok(Family::Ipv6),
                _ => Err(bad_input(format!("--family {w}: use ipv4, ipv6"))),
            })
            .collect::<Result<Vec<_>>>()?,
        (None, Some(own)) => vec![own],
        (None, None) => vec![Family::Ipv4, Family::Ipv6],
    };
    if let (Some(own), Some(f)) = (
        a.to.family(),
        families.iter().find(|f| Some(**f) != a.to.family()),
    ) {
        return Err(bad_input(format!(
            "--family {}: {} is an {} address, the only family probed to it",
            f.word(),
            a.to,
            own.title()
        )));
    }
    let running = crate::lab::find(&a.lab)?;
    // A measurement without cells is its idle phase alone.
    let spec = MeasureSpec {
        path: "latency".into(),
        families: families.clone(),
        protocols: Vec::new(),
        latency: Some(LatencySpec {
            rate: a.rate,
            idle_seconds: a.duration,
            port: a.port,
        }),
        ..MeasureSpec::seed(&a.from, a.to.clone())
    };
    let rt = runtime()?;
    let (_, flag) = on_signals(&rt);
    let p = crate::measure::runner::measure(
        &running,
        &spec,
        &mut Default::default(),
        &flag,
        &mut |_| {},
    )?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&p.idle_latency)?);
    } else {
        print!("{}", text(&p, &a, a.to.node().is_some()));
    }
    // A family not asked for, which the node has no address of, is no failure.
    let has = |f: &Family| match f {
        Family::Ipv4 => p.ipv4.is_some(),
        Family::Ipv6 => p.ipv6.is_some(),
    };
    let silent: Vec<&str> = families
        .iter()
        .filter(|f| a.family.is_some() || has(f))
        .filter(|f| {
            !p.idle_latency
                .iter()
                .any(|(g, l)| g == *f && l.received > 0)
        })
        .map(|f| f.title())
        .collect();
    if !silent.is_empty() {
        eprintln!(
            "tunbench: no echo came back over {} from {} (a node needs an address of that family that {} reaches; a server outside the lab needs `tunbench server --echo-port {}`)",
            silent.join(" and "),
            a.to,
            a.from,
            a.port
        );
        return Ok(1);
    }
    Ok(0)
}

fn text(p: &crate::measure::results::PathResult, a: &LatencyArgs, lab_clock: bool) -> String {
    use crate::report::views::ms;
    let spread = |s: &Spread| {
        format!(
            "median {} ms, p90 {}, p99 {}, max {} (min {})",
            ms(s.median),
            ms(s.p90),
            ms(s.p99),
            ms(s.max),
            ms(s.min)
        )
    };
    let mut out = format!(
        "latency from {} to {}: {} probes/s for {} s per family, probes alone{}\n",
        a.from,
        a.to,
        a.rate,
        a.duration,
        if lab_clock {
            "; one-way delays exact (one clock for every namespace)"
        } else {
            "; round trips only (the target's clock is not the lab's)"
        }
    );
    for (family, l) in &p.idle_latency {
        let addr = match family {
            Family::Ipv4 => p.ipv4.as_deref(),
            Family::Ipv6 => p.ipv6.as_deref(),
        }
        .unwrap_or("-");
        out += &family_text(*family, addr, l, &a.from, &a.to.to_string(), &spread);
    }
    out
}

fn family_text(
    family: Family,
    addr: &str,
    l: &Latency,
    from: &str,
    to: &str,
    spread: &dyn Fn(&Spread) -> String,
) -> String {
    let mut out = format!("{} {addr}\n", family.title());
    if l.received > 0 {
        out += &format!("  RTT            {}\n", spread(&l.rtt_ms));
    }
    if let Some(f) = &l.forward_ms {
        out += &format!("  {from} -> {to}  {}\n", spread(f));
    }
    if let Some(r) = &l.reverse_ms {
        out += &format!("  {to} -> {from}  {}\n", spread(r));
    }
    out += &format!(
        "  jitter {} ms; {} sent, {} back, {} % lost, {} reordered\n",
        crate::report::views::ms(l.jitter_ms),
        l.sent,
        l.received,
        crate::report::percent(l.lost_percent),
        l.reordered
    );
    out
}
