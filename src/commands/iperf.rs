//! `tunbench server` and `client`: the iperf3-compatible engine on the command
//! line, with iperf3's flags and output.

use super::bad_input;
use crate::vocab::units::{parse_rate, parse_size};
use anyhow::{Context, Result};

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
    /// Also answer tunbench's latency probes on this UDP port (tunbench
    /// measure's echo responder, port 5202 beside 5201), for the same
    /// addresses.
    #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    pub echo_port: Option<u16>,
    /// A pipe to wait on before serving (a lab's `up` opens it once it has
    /// recorded this process).
    #[arg(long, hide = true)]
    pub start_gate: Option<i32>,
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

pub fn server(a: ServerArgs) -> Result<i32> {
    if let Some(fd) = a.start_gate {
        crate::lab::datapath::wait_at_start_gate(fd)?;
    }
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
    if let Some(port) = a.echo_port {
        use crate::engine::latency::sockets;
        let sock = sockets::bind_echo(a.bind, port)
            .with_context(|| format!("listening for latency probes on UDP port {port}"))?;
        eprintln!("Answering latency probes on UDP {}", sock.local_addr()?);
        std::thread::Builder::new()
            .name("echo".into())
            .spawn(move || {
                static NEVER: std::sync::atomic::AtomicBool =
                    std::sync::atomic::AtomicBool::new(false);
                if let Err(e) = sockets::serve_echo(sock, &NEVER) {
                    eprintln!("tunbench server: latency echo on port {port}: {e}");
                }
            })
            .context("starting the latency echo thread")?;
    }
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

pub fn client(a: ClientArgs) -> Result<i32> {
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
        abort: None,
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
