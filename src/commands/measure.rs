//! `tunbench measure` (the matrix in a running lab) and `tunbench run` (up, every
//! measurement of the topology, report, down), with their progress line.

use super::report::{NO_REFERENCE, OutputArgs, emit};
use super::{bad_input, on_signals, runtime};
use crate::lab;
use crate::plan::Naming;
use crate::topology;
use anyhow::Result;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct MeasureArgs {
    pub lab: String,
    /// The node that runs the client.
    #[arg(long)]
    pub from: String,
    /// The node that runs the server.
    #[arg(long)]
    pub to: String,
    /// Target address (one per family; default: the first the source reaches).
    #[arg(long = "to-addr")]
    pub to_addr: Vec<std::net::IpAddr>,
    #[arg(long, value_delimiter = ',', default_value = "ipv4,ipv6")]
    pub families: Vec<String>,
    #[arg(long, value_delimiter = ',', default_value = "tcp,udp")]
    pub protocols: Vec<String>,
    #[arg(long, value_delimiter = ',', default_value = "sender,receiver")]
    pub directions: Vec<String>,
    /// Parallel streams per cell, e.g. 1,6.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub streams: Vec<u32>,
    /// Runs per cell (the seed: best of 5).
    #[arg(long, default_value_t = 5)]
    pub runs: u32,
    /// Seconds per run.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Seconds per UDP search trial.
    #[arg(long, default_value_t = 2.0)]
    pub trial_duration: f64,
    /// Highest receiver-side UDP loss, in percent, a rate may have (the seed: 10).
    #[arg(long, default_value_t = 10.0)]
    pub udp_loss: f64,
    /// UDP datagram size in bytes.
    #[arg(long, default_value_t = 1448)]
    pub udp_len: u32,
    /// Most trials of the UDP rate search (bracket, then bisect).
    #[arg(long, default_value_t = 8)]
    pub udp_trials: usize,
    /// The path's name in reports.
    #[arg(long, default_value = "raw")]
    pub path: String,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    pub file: PathBuf,
    /// Lab name (default: the topology's `name`).
    #[arg(long)]
    pub name: Option<String>,
    /// Only this `[scenarios.NAME]` (repeat for several, measured in that order).
    #[arg(long)]
    pub scenario: Vec<String>,
    /// Override every measurement's runs per cell.
    #[arg(long)]
    pub runs: Option<u32>,
    /// Override every measurement's seconds per run.
    #[arg(long)]
    pub duration: Option<f64>,
    /// Override every measurement's seconds per UDP search trial.
    #[arg(long)]
    pub trial_duration: Option<f64>,
    #[command(flatten)]
    pub out: OutputArgs,
}

pub fn measure(a: MeasureArgs) -> Result<i32> {
    use crate::measure::runner::MeasureSpec;
    use crate::vocab::{Direction, Family, Proto};
    let families = words(
        &a.families,
        &[("ipv4", Family::Ipv4), ("ipv6", Family::Ipv6)],
        "families",
    )?;
    let protocols = words(
        &a.protocols,
        &[("tcp", Proto::Tcp), ("udp", Proto::Udp)],
        "protocols",
    )?;
    let directions = words(
        &a.directions,
        &[
            ("sender", Direction::Sender),
            ("receiver", Direction::Receiver),
        ],
        "directions",
    )?;
    if a.runs == 0
        || !(1.0..=3600.0).contains(&a.duration)
        || !(1.0..=3600.0).contains(&a.trial_duration)
        || !(0.0..=100.0).contains(&a.udp_loss)
        || a.streams.iter().any(|s| !(1..=128).contains(s))
    {
        return Err(bad_input(
            "--runs must be at least 1, --duration and --trial-duration 1 to 3600 s, --udp-loss 0 to 100, --streams 1 to 128",
        ));
    }
    if a.out.expect_reference {
        return Err(bad_input(
            "--expect-reference: `tunbench measure` has no published figures; use `tunbench run` with a topology that has a [reference] section",
        ));
    }
    let running = lab::find(&a.lab)?;
    let mut spec = MeasureSpec {
        path: a.path.clone(),
        families,
        protocols,
        directions,
        streams: a.streams.clone(),
        runs: a.runs,
        duration: a.duration,
        trial_duration: a.trial_duration,
        udp_loss_percent: a.udp_loss,
        udp_len: a.udp_len,
        udp_max_trials: a.udp_trials.max(1),
        ..MeasureSpec::seed(&a.from, &a.to)
    };
    for addr in &a.to_addr {
        if addr.is_ipv4() {
            spec.ipv4 = Some(*addr);
        } else {
            spec.ipv6 = Some(*addr);
        }
    }
    let rt = runtime()?;
    let (_, flag) = on_signals(&rt);
    let mut progress = progress_line();
    let r = crate::measure::session::measure_lab(&running, &[spec], &flag, &mut progress);
    clear_progress();
    emit(&r?, &a.out)
}

pub fn run(a: RunArgs) -> Result<i32> {
    let t = topology::load(&a.file)?;
    // Said before the lab is built, not after the run.
    if a.out.expect_reference && t.reference.is_none() {
        return Err(bad_input(format!("{NO_REFERENCE} ({})", a.file.display())));
    }
    let lab_name = a.name.clone().unwrap_or_else(|| t.name.clone());
    if !topology::valid_name(&lab_name) {
        return Err(bad_input(format!(
            "lab name \"{lab_name}\" must be 1-32 letters, digits, '-' or '_'"
        )));
    }
    let naming = Naming::new(&lab_name, None);
    let o = crate::measure::session::Overrides {
        runs: a.runs,
        duration: a.duration,
        trial_duration: a.trial_duration,
        scenarios: a.scenario.clone(),
    };
    let rt = runtime()?;
    let (cancel, flag) = on_signals(&rt);
    let mut progress = progress_line();
    let r = rt.block_on(crate::measure::session::run_topology(
        &t,
        &a.file,
        &naming,
        &o,
        &cancel,
        &flag,
        &mut progress,
    ));
    clear_progress();
    emit(&r?, &a.out)
}

fn words<T: Copy>(given: &[String], all: &[(&str, T)], flag: &str) -> Result<Vec<T>> {
    given
        .iter()
        .map(|w| {
            all.iter()
                .find(|(k, _)| k == w)
                .map(|(_, v)| *v)
                .ok_or_else(|| {
                    let known: Vec<&str> = all.iter().map(|(k, _)| *k).collect();
                    bad_input(format!("--{flag} {w}: use {}", known.join(", ")))
                })
        })
        .collect()
}

/// A one-line progress display on standard error, only when it is a terminal.
fn progress_line() -> impl FnMut(&crate::measure::runner::Progress) + Send {
    use std::io::IsTerminal;
    let tty = std::io::stderr().is_terminal();
    move |p| {
        if !tty {
            return;
        }
        let left = p.estimated_total.saturating_sub(p.elapsed).as_secs();
        let el = p.elapsed.as_secs();
        eprint!(
            "\r\x1b[K[{}] {} ({}/{}) {} - {}:{:02} elapsed, about {}:{:02} left",
            p.path,
            p.cell,
            p.cell_index + 1,
            p.cells,
            p.step,
            el / 60,
            el % 60,
            left / 60,
            left % 60
        );
    }
}

fn clear_progress() {
    use std::io::IsTerminal;
    if std::io::stderr().is_terminal() {
        eprint!("\r\x1b[K");
    }
}
