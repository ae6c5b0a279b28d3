//! Command-line arguments and the dispatch to the library. Exit codes: 0 ok,
//! 1 a step, check or expectation failed, 2 bad input (arguments or topology).

pub mod check;
pub mod generate;
pub mod graph;

use crate::lab;
use crate::plan::Naming;
use crate::topology::{self, LoadError};

use crate::vocab::units::{parse_percent, parse_rate, parse_size};
use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use std::path::PathBuf;

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
    /// Check topology files without touching the kernel. Exit 2 on any error.
    Validate {
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Build a lab: namespaces, links, bridges, addresses, routes, sysctls.
    Up {
        file: PathBuf,
        /// Lab name (default: the topology's `name`); namespaces are LAB-NODE.
        #[arg(long)]
        name: Option<String>,
        /// Namespace name prefix instead of "LAB-".
        #[arg(long)]
        prefix: Option<String>,
        /// Print the operations as ip(8) commands and build nothing.
        #[arg(long)]
        dry_run: bool,
        /// Build this `[scenarios.NAME]` variant of the file.
        #[arg(long)]
        scenario: Option<String>,
    },
    /// Remove exactly what a lab created. Idempotent.
    Down {
        /// A lab name, or the topology file it was built from.
        lab: String,
    },
    /// Remove the leftovers of every lab (or of the named ones), even after kill -9.
    Clean { labs: Vec<String> },
    /// Labs, nodes, interfaces, addresses and link state.
    Status {
        lab: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Print a new WireGuard private key (base64, like `wg genkey`).
    Keygen,
    /// Read a WireGuard private key on stdin and print its public key (like `wg pubkey`).
    Pubkey,
    /// Run a command inside a node's namespace; its exit code passes through.
    Exec {
        lab: String,
        node: String,
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// ICMP reachability matrix; exit 1 when an address routing says is reachable is not.
    Check {
        lab: String,
        #[arg(long)]
        json: bool,
    },
    /// Change a running lab's link impairments without rebuilding it: the link
    /// is named by one of its ends (NODE:IFACE); `out` is the traffic leaving that
    /// end, `in` the traffic arriving at it.
    Impair {
        lab: String,
        /// One end of the link, as in the topology file: NODE:IFACE.
        end: String,
        /// Line rate in bit/s (K, M, G suffixes), as `impairments.rate`.
        #[arg(long, value_parser = parse_rate, conflicts_with = "clear")]
        rate: Option<u64>,
        /// Delay ("20ms", "500us"), on a direction built with the userspace link path.
        #[arg(long, value_parser = crate::topology::impair::parse_duration_us)]
        delay: Option<u64>,
        /// Jitter, as delay.
        #[arg(long, value_parser = crate::topology::impair::parse_duration_us)]
        jitter: Option<u64>,
        /// Loss, percent.
        #[arg(long, value_parser = parse_percent)]
        loss: Option<f64>,
        /// Duplication, percent.
        #[arg(long, value_parser = parse_percent)]
        duplicate: Option<f64>,
        /// Reordering, percent (needs a delay).
        #[arg(long, value_parser = parse_percent)]
        reorder: Option<f64>,
        /// Queue limit in packets.
        #[arg(long)]
        queue: Option<u32>,
        /// Remove the rate shaping (set --delay 0ms, --loss 0 ... to undo the rest).
        #[arg(long)]
        clear: bool,
        #[arg(long, value_enum, default_value = "both")]
        direction: crate::lab::impair::Direction,
    },
    /// The topology as a diagram.
    Graph {
        file: PathBuf,
        #[arg(long, value_enum, default_value = "dot")]
        format: graph::Format,
    },
    /// The seed's method in a running lab: family x protocol x direction x streams,
    /// N runs each, UDP at the highest rate within a loss threshold.
    Measure(MeasureArgs),
    /// up -> every [[measure]] of the topology -> report -> down (also on Ctrl-C).
    Run(RunArgs),
    /// Re-render saved results (from --save or --format json).
    Report {
        file: PathBuf,
        #[command(flatten)]
        out: OutputArgs,
    },
    /// An iperf3-compatible server (a stock iperf3 client is a valid peer).
    Server(ServerArgs),
    /// An iperf3-compatible client (a stock iperf3 server is a valid peer).
    Client(ClientArgs),
    /// Run one userspace tunnel endpoint, or without --tunnel a userspace
    /// router's slow path, in the current namespace (started by `up`; not for
    /// direct use).
    #[command(hide = true)]
    Datapath {
        #[arg(long)]
        lab: String,
        #[arg(long)]
        tunnel: Option<String>,
        #[arg(long)]
        node: String,
        /// A link relay's direction (node `link.N`).
        #[arg(long, value_enum)]
        way: Option<crate::plan::link::Way>,
        /// The read end of the pipe `up` opens once it has recorded this
        /// process (see datapath.rs); without it the process starts at once.
        #[arg(long)]
        start_gate: Option<i32>,
    },
    /// Write a generated topology.
    Gen {
        #[command(subcommand)]
        what: GenWhat,
    },
}

#[derive(clap::Args, Debug, Clone)]
pub struct OutputArgs {
    #[arg(long, value_enum, default_value = "text")]
    pub format: crate::report::Format,
    /// Write the report here instead of standard output.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Also save the results as JSON here (for `tunbench report`).
    #[arg(long)]
    pub save: Option<PathBuf>,
    /// The path ratio columns divide by (default: the first).
    #[arg(long)]
    pub baseline: Option<String>,
    /// A CI expectation, e.g. 'ipv4.tcp.sender >= 500M' or 'wg/raw >= 0.2' (medians);
    /// any that fails makes the exit code 1. Repeatable.
    #[arg(long = "expect")]
    pub expect: Vec<String>,
    /// Exit 1 when a cell the topology's [reference] publishes a figure for was
    /// measured outside the tolerance (or failed); 2 when there are no published
    /// figures to check.
    #[arg(long)]
    pub expect_reference: bool,
}

/// The error of `--expect-reference` on results without published figures.
const NO_REFERENCE: &str = "--expect-reference: no published figures to check against; \
     add a [reference] section to the topology";

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

#[derive(clap::Args, Debug)]
pub struct ServerArgs {
    /// Port for control and data.
    #[arg(short, long, default_value_t = crate::engine::protocol::DEFAULT_PORT)]
    pub port: u16,
    /// Listen on this address only.
    #[arg(short = 'B', long)]
    pub bind: Option<std::net::IpAddr>,
    /// Serve one test, then exit.
    #[arg(short = '1', long)]
    pub one_off: bool,
    /// Print each test as iperf3 -J JSON.
    #[arg(short = 'J', long)]
    pub json: bool,
    /// Seconds to wait for each client message outside the test proper.
    #[arg(long, default_value_t = 30)]
    pub idle_timeout: u64,
    /// The most parallel streams (-P) a test may ask for; --bidir opens twice as
    /// many. Each stream holds a thread and a socket with its buffers.
    #[arg(long, default_value_t = crate::engine::protocol::MAX_STREAMS, value_parser = clap::value_parser!(u32).range(1..=crate::engine::protocol::MAX_STREAMS as i64))]
    pub max_streams: u32,
    /// The longest test (-t plus -O) in seconds; also how long a test that ends by
    /// bytes (-n) may run.
    #[arg(long, default_value_t = crate::engine::protocol::MAX_TIME as u32, value_parser = clap::value_parser!(u32).range(1..=crate::engine::protocol::MAX_TIME))]
    pub max_duration: u32,
    /// The most interval records (streams times seconds) a test may make, about 24
    /// bytes each: the default bounds them to 6 MB (e.g. -P 128 -t 1900).
    #[arg(long, default_value_t = 250_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_interval_records: u64,
    /// The largest socket buffer (-w) a test may ask for, in bytes; the kernel grants
    /// at most the namespace's net.core.rmem_max / wmem_max below it.
    #[arg(long, default_value_t = crate::engine::protocol::MAX_WINDOW, value_parser = parse_window)]
    pub max_window: u32,
}

#[derive(clap::Args, Debug)]
pub struct ClientArgs {
    /// The server's address.
    pub host: std::net::IpAddr,
    #[arg(short, long, default_value_t = crate::engine::protocol::DEFAULT_PORT)]
    pub port: u16,
    /// UDP instead of TCP.
    #[arg(short, long)]
    pub udp: bool,
    /// Seconds to transmit.
    #[arg(short, long, default_value_t = 10)]
    pub time: u32,
    /// Bytes to transmit instead of a time (K/M/G suffixes, 1024-based).
    #[arg(short = 'n', long, value_parser = parse_size)]
    pub bytes: Option<u64>,
    /// Parallel streams.
    #[arg(short = 'P', long, default_value_t = 1)]
    pub parallel: u32,
    /// The server sends (download).
    #[arg(short = 'R', long)]
    pub reverse: bool,
    /// Both send at once.
    #[arg(long)]
    pub bidir: bool,
    /// Seconds at the start not counted.
    #[arg(short = 'O', long, default_value_t = 0)]
    pub omit: u32,
    /// Bytes per write or datagram (default 128K for TCP, 1460 for UDP).
    #[arg(short = 'l', long, value_parser = parse_size)]
    pub length: Option<u64>,
    /// Target rate per stream in bit/s (K/M/G suffixes, 1000-based); 0 = unlimited.
    /// UDP defaults to 1M, like iperf3.
    #[arg(short = 'b', long, value_parser = parse_rate)]
    pub bitrate: Option<u64>,
    /// 64-bit UDP packet counters.
    #[arg(long)]
    pub udp_counters_64bit: bool,
    /// Local address to send from.
    #[arg(short = 'B', long)]
    pub bind: Option<std::net::IpAddr>,
    /// Print iperf3 -J JSON.
    #[arg(short = 'J', long)]
    pub json: bool,
}

/// A socket buffer size (K/M suffixes, 1024-based), 1 up to iperf3's largest.
fn parse_window(s: &str) -> Result<u32, String> {
    let max = crate::engine::protocol::MAX_WINDOW;
    match parse_size(s)? {
        0 => Err("a window of 0 bytes".into()),
        w if w > max as u64 => Err(format!("{w} bytes is more than {max} (iperf3's largest)")),
        w => Ok(w as u32),
    }
}

#[derive(Subcommand, Debug)]
pub enum GenWhat {
    /// A chain: host - router - ... - host, IPv4 and IPv6, routes end to end.
    Chain {
        #[arg(long)]
        nodes: usize,
        /// The topology's (and so the lab's) name.
        #[arg(long, default_value = "chain")]
        name: String,
        /// Write here instead of standard output.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
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
                if e.downcast_ref::<LoadError>().is_some() {
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

/// Each lab's problems on stderr, one a line naming the lab; exit code 1 if any.
fn report_problems(removed: &[netns::Removed]) -> i32 {
    let mut code = 0;
    for r in removed {
        for p in &r.problems {
            eprintln!("tunbench: lab {}: {p}", r.lab);
            code = 1;
        }
    }
    code
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

pub fn run(cli: Cli) -> Result<i32> {
    match cli.command {
        Command::Validate { files } => {
            let mut bad = 0;
            for f in &files {
                match topology::load(f) {
                    Ok(t) => println!(
                        "{}: ok ({} nodes, {} links)",
                        f.display(),
                        t.nodes.len(),
                        t.links.len()
                    ),
                    Err(e) => {
                        bad += 1;
                        eprintln!("{e}");
                    }
                }
            }
            Ok(if bad > 0 { 2 } else { 0 })
        }
        Command::Up {
            file,
            name,
            prefix,
            dry_run,
            scenario,
        } => {
            let mut t = topology::load(&file)?;
            let mut text = std::fs::read_to_string(&file)
                .with_context(|| format!("reading {}", file.display()))?;
            if let Some(want) = &scenario {
                let all = topology::scenario::scenarios_str(&text, &file)
                    .map_err(|e| bad_input(e.to_string()))?;
                let names: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
                let Some(s) = all.iter().find(|s| &s.name == want) else {
                    return Err(bad_input(format!(
                        "{} has no scenario \"{want}\"{}",
                        file.display(),
                        if names.is_empty() {
                            String::new()
                        } else {
                            format!("; its scenarios: {}", names.join(", "))
                        }
                    )));
                };
                t = s.topology.clone();
                text = s.text.clone();
            }
            let lab_name = name.unwrap_or_else(|| t.name.clone());
            if !topology::valid_name(&lab_name) {
                return Err(bad_input(format!(
                    "lab name \"{lab_name}\" must be 1-32 letters, digits, '-' or '_'"
                )));
            }
            if let Some(p) = &prefix {
                if !p
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(&c))
                    || p.len() > 32
                {
                    return Err(bad_input(format!(
                        "prefix \"{p}\" must be at most 32 letters, digits, '-', '_' or '.'"
                    )));
                }
            }
            let naming = Naming::new(&lab_name, prefix.as_deref());
            if dry_run {
                for op in crate::plan::plan(&t, &naming).ops {
                    println!("{op}");
                }
                return Ok(0);
            }
            let rt = runtime()?;
            let (cancel, _) = on_signals(&rt);
            let s = rt.block_on(lab::up_text(&t, &file, &text, &naming, &cancel))?;
            println!(
                "lab {} is up: {} namespaces, {} links, {} addresses, {} routes in {:.3} s",
                s.lab,
                s.namespaces,
                s.links,
                s.addresses,
                s.routes,
                s.elapsed.as_secs_f64()
            );
            Ok(0)
        }
        Command::Down { lab: arg } => {
            let name = lab::lab_name_of(&arg)?;
            let r = runtime()?.block_on(netns::down(&name))?;
            if r.found {
                println!(
                    "lab {name} is down: removed {} namespaces, stopped {} processes",
                    r.namespaces.len(),
                    r.processes
                );
            } else {
                println!("lab {name} is not up; nothing to remove");
            }
            Ok(report_problems(std::slice::from_ref(&r)))
        }
        Command::Clean { labs } => {
            let rt = runtime()?;
            let removed = if labs.is_empty() {
                rt.block_on(netns::clean())
            } else {
                labs.iter()
                    .map(|l| {
                        rt.block_on(netns::down(l))
                            .unwrap_or_else(|e| netns::Removed {
                                lab: l.clone(),
                                found: true,
                                problems: vec![e.to_string()],
                                ..Default::default()
                            })
                    })
                    .collect()
            };
            let mut any = false;
            for r in removed.iter().filter(|r| r.found) {
                any = true;
                println!(
                    "{}: removed {} namespaces, stopped {} processes",
                    r.lab,
                    r.namespaces.len(),
                    r.processes
                );
            }
            if !any {
                println!("nothing to clean");
            }
            Ok(report_problems(&removed))
        }
        Command::Status { lab: which, json } => status(which, json),
        Command::Keygen => {
            let k = crate::vocab::keys::generate().context("reading the kernel's random source")?;
            println!("{}", crate::vocab::keys::to_base64(&k));
            Ok(0)
        }
        Command::Pubkey => {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
                .context("reading a private key on stdin")?;
            let k = crate::vocab::keys::parse(&text).map_err(|e| anyhow::anyhow!("stdin: {e}"))?;
            println!(
                "{}",
                crate::vocab::keys::to_base64(&crate::vocab::keys::public_of(&k))
            );
            Ok(0)
        }
        Command::Exec {
            lab: l,
            node,
            command,
        } => exec(&l, &node, &command),
        Command::Impair {
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
        } => {
            let relay = crate::topology::impair::Impairment {
                rate: None,
                delay_us: delay,
                jitter_us: jitter,
                loss,
                duplicate,
                reorder,
                queue_packets: queue,
                queue_bytes: None,
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
            let done =
                crate::lab::impair::apply(&running, &end, direction, &change).map_err(|e| {
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
        Command::Check { lab: l, json } => {
            let running = lab::find(&l)?;
            let report = check::run(&running.topology, &running.naming).context("probing")?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{}", check::render(&running.topology, &report));
            }
            Ok(if report.failures().next().is_some() {
                1
            } else {
                0
            })
        }
        Command::Graph { file, format } => {
            let t = topology::load(&file)?;
            print!("{}", graph::render(&t, format));
            Ok(0)
        }
        Command::Datapath {
            lab,
            tunnel,
            node,
            way,
            start_gate,
        } => {
            crate::lab::datapath::run(&lab, tunnel.as_deref(), way, &node, start_gate)?;
            Ok(0)
        }
        Command::Server(a) => {
            let opts = crate::engine::server::ServerOptions {
                bind: a.bind,
                port: a.port,
                one_off: a.one_off,
                idle_timeout: std::time::Duration::from_secs(a.idle_timeout),
                limits: crate::engine::params::ServerLimits {
                    max_streams: a.max_streams,
                    max_duration: a.max_duration,
                    max_interval_records: a.max_interval_records,
                    max_window: a.max_window,
                },
            };
            let server = crate::engine::server::Server::bind(opts)
                .with_context(|| format!("listening on port {}", a.port))?;
            eprintln!("Server listening on {}", server.local_addr()?);
            let json = a.json;
            server.serve(move |outcome| match outcome {
                Ok(r) if json => println!(
                    "{}",
                    serde_json::to_string_pretty(&r.to_json()).unwrap_or_default()
                ),
                Ok(r) => print!("Accepted connection from {}\n{}", r.remote, r.to_text()),
                Err(e) => eprintln!("tunbench server: {e}"),
            })?;
            Ok(0)
        }
        Command::Client(a) => client(a),
        Command::Measure(a) => measure(a),
        Command::Run(a) => run_file(a),
        Command::Report { file, out } => {
            let r = crate::report::load(&file).map_err(|e| bad_input(e.to_string()))?;
            emit(&r, &out)
        }
        Command::Gen {
            what:
                GenWhat::Chain {
                    nodes,
                    name,
                    output,
                },
        } => {
            if !topology::valid_name(&name) {
                return Err(bad_input(format!(
                    "--name \"{name}\" must be 1-32 letters, digits, '-' or '_'"
                )));
            }
            let text = generate::chain(nodes, &name).map_err(bad_input)?;
            match output {
                Some(p) => {
                    std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?
                }
                None => print!("{text}"),
            }
            Ok(0)
        }
    }
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

/// Render, save, check expectations: exit 1 when one fails.
fn emit(r: &crate::measure::model::Results, out: &OutputArgs) -> Result<i32> {
    let expectations = out
        .expect
        .iter()
        .map(|e| {
            crate::report::expect::parse(e).map_err(|m| bad_input(format!("--expect '{e}': {m}")))
        })
        .collect::<Result<Vec<_>>>()?;
    crate::report::baseline_index(r, out.baseline.as_deref())
        .map_err(|m| bad_input(format!("--baseline: {m}")))?;
    if out.expect_reference && r.reference.is_none() {
        return Err(bad_input(NO_REFERENCE));
    }
    if let Some(p) = &out.save {
        std::fs::write(p, serde_json::to_string_pretty(r)?)
            .with_context(|| format!("saving results to {}", p.display()))?;
    }
    let text = crate::report::render(r, out.format, out.baseline.as_deref());
    match &out.output {
        Some(p) => std::fs::write(p, &text).with_context(|| format!("writing {}", p.display()))?,
        None => print!("{text}"),
    }
    let mut failures =
        crate::report::expect::check_with_baseline(r, &expectations, out.baseline.as_deref());
    if out.expect_reference {
        failures.extend(crate::report::reference::check(r));
    }
    for f in &failures {
        eprintln!("tunbench: expectation failed: {f}");
    }
    Ok(if failures.is_empty() { 0 } else { 1 })
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

fn measure(a: MeasureArgs) -> Result<i32> {
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

fn run_file(a: RunArgs) -> Result<i32> {
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

fn client(a: ClientArgs) -> Result<i32> {
    use crate::engine::params::{Protocol, TestParams};
    use crate::engine::protocol;
    let protocol = if a.udp { Protocol::Udp } else { Protocol::Tcp };
    let len = match a.length {
        Some(l) => l,
        None if a.udp => 1460,
        None => protocol::DEFAULT_TCP_BLOCK as u64,
    };
    let (lo, hi) = if a.udp {
        (
            protocol::MIN_UDP_BLOCK as u64,
            protocol::MAX_UDP_BLOCK as u64,
        )
    } else {
        (1, protocol::MAX_BLOCK as u64)
    };
    if !(lo..=hi).contains(&len) {
        return Err(bad_input(format!(
            "-l {len}: {} blocks are {lo}..={hi} bytes",
            protocol.as_str()
        )));
    }
    if !(1..=protocol::MAX_STREAMS).contains(&a.parallel) {
        return Err(bad_input(format!(
            "-P {}: 1..={} streams",
            a.parallel,
            protocol::MAX_STREAMS
        )));
    }
    if a.reverse && a.bidir {
        return Err(bad_input("-R and --bidir cannot be combined"));
    }
    let params = TestParams {
        protocol,
        omit: a.omit,
        time: if a.bytes.is_some() { 0 } else { a.time },
        bytes: a.bytes.unwrap_or(0),
        parallel: a.parallel,
        reverse: a.reverse,
        bidir: a.bidir,
        len: len as u32,
        rate: a
            .bitrate
            .unwrap_or(if a.udp { protocol::DEFAULT_UDP_RATE } else { 0 }),
        udp_counters_64bit: a.udp_counters_64bit,
        ..Default::default()
    };
    let opts = crate::engine::client::ClientOptions {
        server: std::net::SocketAddr::new(a.host, a.port),
        bind: a.bind,
        params,
        connect_timeout: std::time::Duration::from_secs(5),
        intervals: true,
    };
    if !a.json {
        println!("Connecting to host {}, port {}", a.host, a.port);
    }
    let r = crate::engine::client::run(&opts)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r.to_json())?);
    } else {
        print!("{}", r.to_text());
        println!("\niperf Done.");
    }
    Ok(0)
}

fn status(which: Option<String>, json: bool) -> Result<i32> {
    let named = which.is_some();
    let labs = match which {
        Some(l) => vec![l],
        None => netns::LabState::lab_names(),
    };
    let rt = runtime()?;
    let mut out = Vec::new();
    // One lab's unreadable record does not hide the others: each is reported, and
    // the exit code says some were.
    let mut unreadable = 0;
    for l in &labs {
        let state = match netns::LabState::load(l) {
            Ok(Some(s)) => s,
            Ok(None) if named => anyhow::bail!("no lab named {l} is up"),
            // A directory without a record yet: an `up` that is just starting.
            Ok(None) => continue,
            Err(e) if named => return Err(e.into()),
            Err(e) => {
                unreadable += 1;
                eprintln!("tunbench: lab {l}: unreadable record: {e}");
                continue;
            }
        };
        let mut nodes = Vec::new();
        for n in &state.nodes {
            let devices = if netns::namespace::exists(&n.namespace) {
                rt.block_on(netns::inspect::devices(&n.namespace))
                    .unwrap_or_default()
            } else {
                Vec::new()
            };
            nodes.push(serde_json::json!({ "node": n.node, "namespace": n.namespace, "kind": n.kind, "present": netns::namespace::exists(&n.namespace), "devices": devices }));
        }
        let running = crate::lab::find(l).ok();
        // The record says "up" once the namespaces are built; whether the
        // datapaths run is asked of /proc now.
        let (health, status_word) = match &running {
            Some(r) => {
                let h = crate::lab::liveness::health(l, &r.topology, &state);
                let w = crate::lab::liveness::lab_status(l, &state, &h);
                (h, serde_json::json!(w))
            }
            None => (Vec::new(), serde_json::json!(state.status)),
        };
        let datapaths = match &running {
            Some(_) => health.iter().map(|h| datapath_entry(l, h)).collect(),
            None => crate::lab::datapath::stats_of(l),
        };
        // A dead endpoint's peers or SAs are its last words, not the present.
        let dead = |tunnel: &str, node: &str| {
            health.iter().any(|h| {
                matches!(h.liveness, crate::lab::liveness::Liveness::Dead(_))
                    && h.node == node
                    && h.job == crate::lab::datapath::Job::Tunnel(tunnel.to_string())
            })
        };
        let mut wireguard = crate::endpoint::wireguard::peers_of(l);
        wireguard.retain(|f| !dead(&f.tunnel, &f.node));
        let mut ikev2 = crate::endpoint::ikev2::sa_files_of(l);
        ikev2.retain(|f| !dead(&f.tunnel, &f.node));
        let tunnels: Vec<serde_json::Value> = running
            .as_ref()
            .map(|r| {
                r.topology
                    .tunnels
                    .iter()
                    .map(|t| serde_json::json!({ "name": t.name, "sizes": t.sizes() }))
                    .collect()
            })
            .unwrap_or_default();
        out.push(serde_json::json!({ "lab": l, "status": status_word, "topology": state.topology, "created": state.created, "nodes": nodes, "processes": state.processes, "tunnels": tunnels, "datapaths": datapaths, "wireguard": wireguard, "ikev2": ikev2 }));
    }
    let code = if unreadable > 0 { 1 } else { 0 };
    if json {
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(code);
    }
    if out.is_empty() && unreadable == 0 {
        println!("no labs are up");
    }
    for l in &out {
        println!(
            "lab {} ({}), {} nodes, from {}",
            l["lab"].as_str().unwrap_or(""),
            l["status"].as_str().unwrap_or(""),
            l["nodes"].as_array().map(|a| a.len()).unwrap_or(0),
            l["topology"].as_str().unwrap_or("?")
        );
        for n in l["nodes"].as_array().into_iter().flatten() {
            let present = if n["present"].as_bool() == Some(true) {
                ""
            } else {
                "  (namespace missing)"
            };
            println!(
                "  {} [{}] ns {}{present}",
                n["node"].as_str().unwrap_or(""),
                n["kind"].as_str().unwrap_or(""),
                n["namespace"].as_str().unwrap_or("")
            );
            for d in n["devices"].as_array().into_iter().flatten() {
                let addrs: Vec<&str> = d["addresses"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|a| a.as_str())
                    .filter(|a| !a.starts_with("fe80:") && *a != "127.0.0.1/8" && *a != "::1/128")
                    .collect();
                let master = d["master"]
                    .as_str()
                    .map(|m| format!(" master {m}"))
                    .unwrap_or_default();
                println!(
                    "    {:<15} {:<8} {:<14} mtu {:<5}{master} {}",
                    d["name"].as_str().unwrap_or(""),
                    d["kind"].as_str().unwrap_or(""),
                    format!(
                        "{}{}",
                        if d["up"].as_bool() == Some(true) {
                            "UP/"
                        } else {
                            "DOWN/"
                        },
                        d["state"].as_str().unwrap_or("")
                    ),
                    d["mtu"],
                    addrs.join(" ")
                );
            }
        }
        if let Ok(r) = crate::lab::find(l["lab"].as_str().unwrap_or("")) {
            for t in &r.topology.tunnels {
                let s = t.sizes();
                println!(
                    "  tunnel {} ({}): {}",
                    t.name,
                    s.encapsulation,
                    s.describe()
                );
            }
        }
        for d in l["datapaths"].as_array().into_iter().flatten() {
            let pid = d["pid"]
                .as_i64()
                .map(|p| format!(" (pid {p})"))
                .unwrap_or_default();
            match d["state"].as_str() {
                Some("dead") => println!(
                    "  {}{pid} is dead: {}",
                    d["datapath"].as_str().unwrap_or("?"),
                    d["reason"].as_str().unwrap_or("?")
                ),
                Some("starting") => println!(
                    "  {}{pid} is starting",
                    d["datapath"].as_str().unwrap_or("?")
                ),
                _ => println!("  {}", crate::lab::datapath::describe(d)),
            }
        }
        for w in l["wireguard"].as_array().into_iter().flatten() {
            if let Ok(f) = serde_json::from_value(w.clone()) {
                print!("{}", crate::endpoint::wireguard::describe(&f));
            }
        }
        for s in l["ikev2"].as_array().into_iter().flatten() {
            if let Ok(f) = serde_json::from_value(s.clone()) {
                print!("{}", crate::endpoint::ikev2::describe(&f));
            }
        }
    }
    Ok(code)
}

/// One datapath in `status --json`: a running one's counters (from its stats
/// file), a dead one's reason and never its last counters.
fn datapath_entry(lab: &str, h: &crate::lab::liveness::DatapathHealth) -> serde_json::Value {
    use crate::lab::liveness::Liveness;
    let mut v = serde_json::json!({
        "datapath": h.job.label(&h.node),
        "what": h.job.describe(&h.node),
        "node": h.node,
        "pid": h.pid,
    });
    if let crate::lab::datapath::Job::Tunnel(t) = &h.job {
        v["tunnel"] = serde_json::json!(t);
    }
    match &h.liveness {
        Liveness::Running => {
            let stats = std::fs::read(crate::lab::datapath::stats_path(lab, &h.job, &h.node))
                .ok()
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok());
            if let Some(serde_json::Value::Object(m)) = stats {
                v = serde_json::Value::Object(m);
            }
            v["datapath"] = h.job.label(&h.node).into();
            v["state"] = "running".into();
        }
        Liveness::Starting => v["state"] = "starting".into(),
        Liveness::Dead(reason) => {
            v["state"] = "dead".into();
            v["reason"] = reason.as_str().into();
        }
    }
    v
}

/// Enter the node's namespace (and a private mount namespace with the node's own
/// /sys, as `ip netns exec` does), then become the command.
fn exec(l: &str, node: &str, command: &[String]) -> Result<i32> {
    use std::os::unix::process::CommandExt;
    let state =
        netns::LabState::load(l)?.ok_or_else(|| anyhow::anyhow!("no lab named {l} is up"))?;
    let Some(rec) = state.nodes.iter().find(|n| n.node == node) else {
        let names: Vec<&str> = state.nodes.iter().map(|n| n.node.as_str()).collect();
        return Err(bad_input(format!(
            "lab {l} has no node \"{node}\"; its nodes: {}",
            names.join(", ")
        )));
    };
    netns::namespace::enter(&rec.namespace)
        .with_context(|| format!("entering namespace {}", rec.namespace))?;
    remount_sys();
    let err = std::process::Command::new(&command[0])
        .args(&command[1..])
        .exec();
    Err(Exit {
        code: 127,
        message: format!("running {}: {err}", command[0]),
    }
    .into())
}

/// Best effort: a /sys that shows the namespace's devices. Failure leaves the host's.
fn remount_sys() {
    use nix::mount::{MntFlags, MsFlags, mount, umount2};
    if nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS).is_err() {
        return;
    }
    let _ = mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_SLAVE | MsFlags::MS_REC,
        None::<&str>,
    );
    if umount2("/sys", MntFlags::MNT_DETACH).is_ok() {
        let _ = mount(
            Some("sysfs"),
            "/sys",
            Some("sysfs"),
            MsFlags::empty(),
            None::<&str>,
        );
    }
}
