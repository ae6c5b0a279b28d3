//! Command-line arguments and the dispatch to the library. Exit codes: 0 ok,
//! 1 a step, check or expectation failed, 2 bad input (arguments or topology).
//!
//! One module per subcommand (or small family of them), each holding its clap
//! arguments and its body; this file keeps the top-level parser, the dispatch,
//! the exit-code mapping and the helpers several subcommands share.

pub mod check;
pub mod completions;
pub mod datapath;
pub mod doctor;
pub mod exec;
pub mod generate;
pub mod graph;
pub mod hosts;
pub mod impair;
pub mod iperf;
pub mod keys;
pub mod latency;
pub mod lifecycle;
pub mod measure;
pub mod progress;
pub mod report;
pub mod status;
pub mod test;
pub mod validate;

use check::CheckArgs;
use datapath::DatapathArgs;
use exec::ExecArgs;
use generate::GenArgs;
use graph::GraphArgs;
use hosts::HostsArgs;
use impair::ImpairArgs;
use iperf::{ClientArgs, ServerArgs};
use lifecycle::{CleanArgs, DownArgs, UpArgs};
use measure::{MeasureArgs, RunArgs};
use report::ReportArgs;
use status::StatusArgs;
use test::TestArgs;
use validate::ValidateArgs;

use crate::topology::LoadError;
use anyhow::Result;
use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "tunbench",
    version,
    about = "Build network-namespace labs from a topology file and measure raw vs tunneled throughput"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Check topology files; creates nothing (kernel features are probed in a
    /// throwaway namespace). Exit 2 on any error.
    Validate(ValidateArgs),
    /// What this machine and its kernel offer tunbench, tried where nothing
    /// sees it; exit 1 when something every lab needs is missing.
    Doctor(doctor::DoctorArgs),
    /// Build a lab: namespaces, links, bridges, addresses, routes, sysctls.
    Up(UpArgs),
    /// Remove exactly what a lab created. Idempotent.
    Down(DownArgs),
    /// Remove the leftovers of every lab (or of the named ones), even after kill -9.
    Clean(CleanArgs),
    /// Labs, nodes, interfaces, addresses and link state.
    Status(StatusArgs),
    /// Print a new WireGuard private key (base64, like `wg genkey`).
    Keygen,
    /// Read a WireGuard private key on stdin and print its public key (like `wg pubkey`).
    Pubkey,
    /// What a WireGuard device outside a running lab needs to peer with it:
    /// per external peer, its configuration in `wg setconf` form (no private key).
    Keys(keys::KeysArgs),
    /// Run a command inside a node's namespace; its exit code passes through.
    Exec(ExecArgs),
    /// ICMP reachability matrix; exit 1 when an address routing says is reachable is not.
    Check(CheckArgs),
    /// Change a running lab's link impairments without rebuilding it: the link
    /// is named by one of its ends (NODE:IFACE); `out` is the traffic leaving that
    /// end, `in` the traffic arriving at it.
    Impair(ImpairArgs),
    /// The topology as a diagram.
    Graph(GraphArgs),
    /// The machines a placed lab runs on ([hosts]), or --ansible: an Ansible inventory.
    Hosts(HostsArgs),
    /// The NVR500 study's method in a running lab: family x protocol x direction x streams,
    /// N runs each, UDP at the highest rate within a loss threshold.
    Measure(MeasureArgs),
    /// up -> every [[measure]] of the topology -> report -> down (also on Ctrl-C).
    Run(RunArgs),
    /// Latency probes alone between two nodes of a running lab, per family:
    /// round trip, one-way delay each way, jitter, loss, reordering.
    Latency(latency::LatencyArgs),
    /// up -> every [[assert]] of each file (each scenario in turn) -> down; a
    /// line per assertion, --tap, --junit FILE. Exit 1 when any fails.
    Test(TestArgs),
    /// Re-render saved results (from --save or --format json); several
    /// files, the parts one lab's hosts measured, merge into one report.
    Report(ReportArgs),
    /// An iperf3-compatible server (a stock iperf3 client is a valid peer).
    Server(ServerArgs),
    /// An iperf3-compatible client (a stock iperf3 server is a valid peer).
    Client(ClientArgs),
    /// Run one userspace tunnel endpoint, or without --tunnel a userspace
    /// router's slow path, in the current namespace (started by `up`; not for
    /// direct use).
    #[command(hide = true)]
    Datapath(DatapathArgs),
    /// Write a generated topology.
    Gen(GenArgs),
    /// Print the shell completion script for bash, zsh, fish, elvish or powershell.
    Completions(completions::CompletionsArgs),
    /// Write the man pages (tunbench.1, tunbench-SUBCOMMAND.1) into a directory.
    Manpages(completions::ManpagesArgs),
}

/// A failure with its exit code.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Exit {
    pub code: i32,
    pub message: String,
}

fn bad_input(message: impl Into<String>) -> anyhow::Error {
    Exit {
        code: 2,
        message: message.into(),
    }
    .into()
}

pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return code;
        }
    };
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            let code = e.downcast_ref::<Exit>().map(|x| x.code).unwrap_or_else(|| {
                // Bad input: a file that does not load, host interfaces the
                // lab may not take, a cross-host link that cannot be made as
                // written, or a kernel feature this machine lacks.
                if e.downcast_ref::<LoadError>().is_some()
                    || matches!(
                        e.downcast_ref::<netns::LabError>(),
                        Some(
                            netns::LabError::HostRefused(_)
                                | netns::LabError::CrossHost(_)
                                | netns::LabError::Lacking(_)
                        )
                    )
                {
                    2
                } else {
                    1
                }
            });
            let mut msg = format!("tunbench: {e}");
            for cause in e.chain().skip(1) {
                msg += &format!(": {cause}");
            }
            eprintln!("{msg}");
            code
        }
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

pub fn run(cli: Cli) -> Result<i32> {
    match cli.command {
        Command::Validate(a) => validate::validate(a),
        Command::Doctor(a) => doctor::doctor(a),
        Command::Up(a) => lifecycle::up(a),
        Command::Down(a) => lifecycle::down(a),
        Command::Clean(a) => lifecycle::clean(a),
        Command::Status(a) => status::status(a),
        Command::Keygen => keys::keygen(),
        Command::Pubkey => keys::pubkey(),
        Command::Keys(a) => keys::keys(a),
        Command::Exec(a) => exec::exec(a),
        Command::Impair(a) => impair::impair(a),
        Command::Check(a) => check::check(a),
        Command::Graph(a) => graph::graph(a),
        Command::Hosts(a) => hosts::hosts(a),
        Command::Datapath(a) => datapath::datapath(a),
        Command::Server(a) => iperf::server(a),
        Command::Client(a) => iperf::client(a),
        Command::Measure(a) => measure::measure(a),
        Command::Run(a) => measure::run(a),
        Command::Latency(a) => latency::latency(a),
        Command::Report(a) => report::report(a),
        Command::Test(a) => test::test(a),
        Command::Gen(a) => generate::generate(a),
        Command::Completions(a) => completions::completions(a),
        Command::Manpages(a) => completions::manpages(a),
    }
}

/// Ctrl-C, SIGTERM and SIGHUP set these (the up's cancel and the measurement's).
fn on_signals(
    rt: &tokio::runtime::Runtime,
) -> (netns::Cancel, std::sync::Arc<std::sync::atomic::AtomicBool>) {
    let cancel = netns::Cancel::new();
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (c, f) = (cancel.clone(), flag.clone());
    rt.spawn(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut i), Ok(mut te), Ok(mut h)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
            signal(SignalKind::hangup()),
        ) else {
            return;
        };
        tokio::select! { _ = i.recv() => {}, _ = te.recv() => {}, _ = h.recv() => {} }
        c.cancel();
        f.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    (cancel, flag)
}
