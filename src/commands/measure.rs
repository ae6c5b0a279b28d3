//! `tunbench measure` (the matrix in a running lab) and `tunbench run` (up, every
//! measurement of the topology, report, down).

use super::progress::ProgressLine;
use super::report::{NO_REFERENCE, OutputArgs, emit};
use super::{bad_input, on_signals, runtime};
use crate::lab;
use crate::plan::Naming;
use crate::topology;
use crate::vocab::target::MeasureTarget;
use anyhow::Result;
use std::io::IsTerminal;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct MeasureArgs {
    pub lab: String,
    /// The node that runs the client.
    #[arg(long)]
    pub from: String,
    /// The node that runs the server (tunbench starts it there), or an iperf3
    /// server outside the lab: ADDRESS, ADDRESS:PORT or `[IPV6]:PORT`, port 5201 by
    /// default. tunbench starts nothing there: `iperf3 -s` or `tunbench server`
    /// must be running and reachable from --from; the address's family is the
    /// only one measured.
    #[arg(long, value_name = "NODE|ADDRESS[:PORT]", value_parser = MeasureTarget::parse)]
    pub to: MeasureTarget,
    /// Target address of a node target (one per family; default: the first the
    /// source reaches). Not with an address target, which is its own address.
    #[arg(long = "to-addr")]
    pub to_addr: Vec<std::net::IpAddr>,
    /// Families to measure [default: ipv4,ipv6; for an address target, its own].
    #[arg(long, value_delimiter = ',')]
    pub families: Option<Vec<String>>,
    #[arg(long, value_delimiter = ',', default_value = "tcp,udp")]
    pub protocols: Vec<String>,
    #[arg(long, value_delimiter = ',', default_value = "sender,receiver")]
    pub directions: Vec<String>,
    /// Parallel streams per cell, e.g. 1,6.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub streams: Vec<u32>,
    /// Runs per cell (the NVR500 study: best of 5).
    #[arg(long, default_value_t = 5)]
    pub runs: u32,
    /// Seconds per run.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Seconds per UDP search trial.
    #[arg(long, default_value_t = 2.0)]
    pub trial_duration: f64,
    /// Highest receiver-side UDP loss, in percent, a rate may have (the NVR500 study: 10).
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
    pub latency: LatencyArgs,
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Latency probes beside the throughput: idle before the cells, then under
/// every cell's runs.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct LatencyArgs {
    /// Measure latency (on by default toward a node; toward a server outside
    /// the lab, round trips only, to a `tunbench server --echo-port 5202` there).
    #[arg(long, conflicts_with = "no_latency")]
    pub latency: bool,
    /// Measure no latency.
    #[arg(long)]
    pub no_latency: bool,
    /// Latency probes per second (1 to 1000).
    #[arg(long, value_name = "N", value_parser = probe_rate)]
    pub latency_rate: Option<f64>,
}

impl LatencyArgs {
    /// On, off, or as the measurement's default (`None`).
    pub fn switch(&self) -> Option<bool> {
        match (self.latency, self.no_latency) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        }
    }
}

/// Probes per second: 1 to 1000.
pub fn probe_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if (1.0..=1000.0).contains(&r) => Ok(r),
        _ => Err(format!("'{s}' probes per second; use 1 to 1000")),
    }
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
    /// Print each scenario's manual step and go on without waiting for Enter
    /// (without it, a run whose scenarios have manual steps needs a terminal).
    #[arg(long)]
    pub yes: bool,
    /// Take a host interface (`host = ...` on a link) even when it carries this
    /// machine's default route or addresses of its own.
    #[arg(long)]
    pub force: bool,
    /// Print the scenarios in order, their manual steps and what each measures;
    /// build nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Measure from this `[hosts.NAME]`'s part of a lab placed on several
    /// hosts, already up (`tunbench up FILE --host NAME` on every host): the
    /// paths whose `from` it holds, after the underlays to the next hosts;
    /// nothing is built or taken down.
    #[arg(long, value_name = "NAME")]
    pub host: Option<String>,
    /// With --host: seconds to wait for every far part to answer.
    #[arg(long, value_name = "SECONDS", default_value_t = 120, requires = "host")]
    pub wait: u64,
    #[command(flatten)]
    pub latency: LatencyArgs,
    #[command(flatten)]
    pub out: OutputArgs,
}

pub fn measure(a: MeasureArgs) -> Result<i32> {
    let spec = spec(&a)?;
    a.out.expectations()?;
    if a.out.expect_reference {
        return Err(bad_input(
            "--expect-reference: `tunbench measure` has no published figures; use `tunbench run` with a topology that has a [reference] section",
        ));
    }
    let running = lab::find(&a.lab)?;
    let spec = match running.state.host {
        Some(_) => crate::measure::part::on_part(&running.topology, spec),
        None => spec,
    };
    let rt = runtime()?;
    let (_, flag) = on_signals(&rt);
    let progress = ProgressLine::on_stderr();
    let r =
        crate::measure::session::measure_lab(&running, &[spec], &flag, &mut |p| progress.show(p));
    progress.clear();
    emit(&r?, &a.out)
}

/// The measurement `measure`'s arguments ask for, once they are checked.
fn spec(a: &MeasureArgs) -> Result<crate::measure::spec::MeasureSpec> {
    use crate::measure::spec::MeasureSpec;
    use crate::vocab::{Direction, Family, Proto};
    let families = match (&a.families, a.to.family()) {
        (Some(f), _) => words(
            f,
            &[("ipv4", Family::Ipv4), ("ipv6", Family::Ipv6)],
            "families",
        )?,
        (None, Some(own)) => vec![own],
        (None, None) => vec![Family::Ipv4, Family::Ipv6],
    };
    if let Some(own) = a.to.family() {
        if !a.to_addr.is_empty() {
            return Err(bad_input(format!(
                "--to-addr chooses among a node's addresses; --to {} is an address itself (leave --to-addr out)",
                a.to
            )));
        }
        if let Some(f) = families.iter().find(|f| **f != own) {
            return Err(bad_input(format!(
                "--families {}: {} is an {} address, the only family measured to it",
                f.word(),
                a.to,
                own.title()
            )));
        }
    }
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
        ..MeasureSpec::seed(&a.from, a.to.clone())
    };
    let on = a.latency.switch().unwrap_or(a.to.node().is_some());
    spec.latency = on.then(|| crate::measure::spec::LatencySpec {
        rate: a.latency.latency_rate.unwrap_or(crate::vocab::LATENCY_RATE),
        ..Default::default()
    });
    for addr in &a.to_addr {
        if addr.is_ipv4() {
            spec.ipv4 = Some(*addr);
        } else {
            spec.ipv6 = Some(*addr);
        }
    }
    Ok(spec)
}

pub fn run(a: RunArgs) -> Result<i32> {
    let t = topology::load(&a.file, crate::lab::this_kernel())?;
    a.out.expectations()?;
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
    if let Some(host) = &a.host {
        return run_part(&a, &t, host, &lab_name);
    }
    let o = overrides(&a);
    let text = std::fs::read_to_string(&a.file)
        .map_err(|e| bad_input(format!("reading {}: {e}", a.file.display())))?;
    let scenarios = crate::measure::session::selected_scenarios(&text, &a.file, &a.scenario)
        .map_err(|e| bad_input(e.to_string()))?;
    if a.dry_run {
        print!("{}", dry_run(&t, &scenarios, &o));
        return Ok(0);
    }
    // Said before anything is built: a run that would wait for Enter where
    // nobody can press it.
    if !a.yes && !std::io::stdin().is_terminal() {
        if let Some(s) = scenarios.iter().find(|s| s.manual.is_some()) {
            return Err(bad_input(format!(
                "scenario {} has a manual step (\"{}\") and standard input is not a terminal to confirm it on: run from a terminal, or give --yes to print each step and go on without waiting",
                s.name,
                s.manual.as_deref().unwrap_or_default()
            )));
        }
    }
    let rt = runtime()?;
    let (cancel, flag) = on_signals(&rt);
    let progress = ProgressLine::on_stderr();
    let mut manual = manual_step(a.yes, flag.clone(), Some(progress.clone()));
    let r = rt.block_on(crate::measure::session::run_topology(
        &t,
        &a.file,
        &naming,
        &o,
        &cancel,
        &flag,
        &mut |p| progress.show(p),
        &mut manual,
    ));
    progress.clear();
    emit(&r?, &a.out)
}

fn overrides(a: &RunArgs) -> crate::measure::session::Overrides {
    crate::measure::session::Overrides {
        runs: a.runs,
        duration: a.duration,
        trial_duration: a.trial_duration,
        scenarios: a.scenario.clone(),
        force: a.force,
        latency: a.latency.switch(),
        latency_rate: a.latency.latency_rate,
    }
}

/// `run --host`: this host's paths in its part, already up.
fn run_part(a: &RunArgs, t: &topology::Topology, host: &str, lab_name: &str) -> Result<i32> {
    if t.placement.is_none() {
        return Err(bad_input(format!(
            "--host {host}: {} declares no [hosts]; it is one machine's lab, run without --host",
            a.file.display()
        )));
    }
    if t.host_part(host).is_none() {
        return Err(bad_input(format!(
            "--host {host}: {} declares no [hosts.{host}]",
            a.file.display()
        )));
    }
    if !a.scenario.is_empty() || a.dry_run || a.force {
        return Err(bad_input(
            "--host measures the part as `up --host` built it: --scenario, --dry-run and --force belong to that `up`",
        ));
    }
    let not_up = || {
        bad_input(format!(
            "lab {lab_name} is not up on this machine as host {host}'s part; bring it up first: tunbench up {} --host {host}",
            a.file.display()
        ))
    };
    let running = lab::find(lab_name).map_err(|_| not_up())?;
    if running.state.host.as_deref() != Some(host) {
        return Err(not_up());
    }
    let rt = runtime()?;
    let (_, flag) = on_signals(&rt);
    let progress = ProgressLine::on_stderr();
    let o = overrides(a);
    let part = crate::measure::part::PartRun {
        lab: &running,
        overrides: &o,
        wait: std::time::Duration::from_secs(a.wait),
        cancel: &flag,
    };
    let r = part.measure(
        &mut |line| {
            progress.clear();
            eprintln!("{line}");
        },
        &mut |p| progress.show(p),
    );
    progress.clear();
    emit(&r?, &a.out)
}

/// `run --dry-run`: each scenario in the order `run` takes them, its manual
/// step and the paths it measures.
fn dry_run(
    t: &topology::Topology,
    scenarios: &[topology::scenario::Scenario],
    o: &crate::measure::session::Overrides,
) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let paths = |out: &mut String, t: &topology::Topology, scenario: Option<&str>| {
        for m in &t.measurements {
            let s = crate::measure::session::spec_of(m, o);
            let label = match scenario {
                Some(sc) => format!("{sc}/{}", s.path),
                None => s.path.clone(),
            };
            let words = |v: &[&str]| v.join(",");
            let _ = writeln!(
                out,
                "  measure {label}: {} -> {}{}, {} x {} x {}, streams {}, {} run(s) of {} s",
                s.from,
                s.to,
                if s.to.node().is_some() {
                    ""
                } else {
                    " (outside the lab: no server started)"
                },
                words(&s.families.iter().map(|f| f.word()).collect::<Vec<_>>()),
                words(&s.protocols.iter().map(|p| p.word()).collect::<Vec<_>>()),
                words(&s.directions.iter().map(|d| d.word()).collect::<Vec<_>>()),
                s.streams
                    .iter()
                    .map(|n| n.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
                s.runs,
                s.duration
            );
        }
    };
    if scenarios.is_empty() {
        let _ = writeln!(out, "lab {}", t.name);
        paths(&mut out, t, None);
    }
    for s in scenarios {
        let _ = writeln!(
            out,
            "scenario {}{}",
            s.name,
            s.description
                .as_ref()
                .map(|d| format!(" ({d})"))
                .unwrap_or_default()
        );
        if let Some(step) = &s.manual {
            let _ = writeln!(out, "  manual step (run waits for Enter, or --yes): {step}");
        }
        paths(&mut out, &s.topology, Some(&s.name));
    }
    out.push_str("nothing built; `tunbench up FILE --scenario NAME --dry-run` prints a scenario's kernel operations\n");
    out
}

/// A scenario's manual step, said on standard error once its lab is up
/// (the `progress` line taken off first); then Enter on the terminal, or
/// with `yes` nothing. Ctrl-C meanwhile (`cancel`) ends the wait as an
/// interruption, which takes the lab down.
pub(super) fn manual_step(
    yes: bool,
    cancel: std::sync::Arc<std::sync::atomic::AtomicBool>,
    progress: Option<ProgressLine>,
) -> impl FnMut(&str, &str) -> Result<()> + Send {
    move |scenario, step| {
        if let Some(p) = &progress {
            p.clear();
        }
        eprintln!("scenario {scenario}, manual step: {step}");
        if yes {
            eprintln!("(--yes: going on)");
            return Ok(());
        }
        eprintln!("press Enter once it is done (Ctrl-C takes the lab down)");
        // The read blocks, so it has a thread of its own; Ctrl-C is seen here.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = tx.send(std::io::stdin().read_line(&mut line));
        });
        loop {
            if cancel.load(std::sync::atomic::Ordering::SeqCst) {
                anyhow::bail!(
                    "interrupted while waiting for the manual step of scenario {scenario}"
                );
            }
            match rx.recv_timeout(std::time::Duration::from_millis(100)) {
                Ok(Ok(n)) if n > 0 => return Ok(()),
                Ok(Ok(_)) => anyhow::bail!(
                    "standard input ended while waiting for the manual step of scenario {scenario}"
                ),
                Ok(Err(e)) => anyhow::bail!(
                    "reading standard input while waiting for the manual step of scenario {scenario}: {e}"
                ),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    anyhow::bail!("the thread reading standard input ended")
                }
            }
        }
    }
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
