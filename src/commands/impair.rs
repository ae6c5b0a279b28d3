//! `tunbench impair`: a running lab's link impairments changed in place, the
//! link named by one of its ends.

use super::bad_input;
use crate::lab;
use crate::vocab::units::{parse_percent, parse_rate};
use anyhow::Result;

#[derive(clap::Args, Debug)]
pub struct ImpairArgs {
    pub lab: String,
    /// One end of the link, as in the topology file: NODE:IFACE.
    pub end: String,
    /// Line rate in bit/s (K, M, G suffixes), as `impairments.rate`, counted in
    /// the framing the topology gives the direction (Ethernet by default).
    #[arg(long, value_parser = parse_rate, conflicts_with = "clear")]
    pub rate: Option<u64>,
    /// Delay ("20ms", "500us"), on a direction built with the userspace link path.
    #[arg(long, value_parser = crate::topology::impair::parse_duration_us)]
    pub delay: Option<u64>,
    /// Jitter, as delay.
    #[arg(long, value_parser = crate::topology::impair::parse_duration_us)]
    pub jitter: Option<u64>,
    /// Loss, percent.
    #[arg(long, value_parser = parse_percent)]
    pub loss: Option<f64>,
    /// Duplication, percent.
    #[arg(long, value_parser = parse_percent)]
    pub duplicate: Option<f64>,
    /// Reordering, percent (needs a delay).
    #[arg(long, value_parser = parse_percent)]
    pub reorder: Option<f64>,
    /// Queue limit in packets.
    #[arg(long)]
    pub queue: Option<u32>,
    /// Remove the rate shaping (set --delay 0ms, --loss 0 ... to undo the rest).
    #[arg(long)]
    pub clear: bool,
    #[arg(long, value_enum, default_value = "both")]
    pub direction: crate::lab::impair::Direction,
}

pub fn impair(a: ImpairArgs) -> Result<i32> {
    let ImpairArgs {
        lab: l,
        end,
        rate,
        delay,
        jitter,
        loss,
        duplicate,
        reorder,
        queue,
        clear,
        direction,
    } = a;
    let relay = crate::topology::impair::Impairment {
        rate: None,
        delay_us: delay,
        jitter_us: jitter,
        loss,
        duplicate,
        reorder,
        queue_packets: queue,
        queue_bytes: None,
        framing: None,
        rate_shaper: None,
    };
    if !clear && rate.is_none() && !relay.needs_relay() {
        return Err(bad_input(
            "nothing to change: give --rate, --delay, --jitter, --loss, --duplicate, --reorder, --queue or --clear",
        ));
    }
    let running = lab::find(&l)?;
    let change = crate::lab::impair::Change {
        rate: if clear { Some(None) } else { rate.map(Some) },
        relay,
        clear_relay: false,
    };
    let done = crate::lab::impair::apply(&running, &end, direction, &change).map_err(|e| {
        if e.downcast_ref::<crate::lab::impair::BadEnd>().is_some() {
            bad_input(e.to_string())
        } else {
            e
        }
    })?;
    for line in done {
        println!("{line}");
    }
    Ok(0)
}
