//! Results for the report tests: [`results`], a small measurement (two paths,
//! raw and wg, TCP and UDP cells, a 6-stream cell only raw has, one failed
//! cell on wg, the cells deliberately out of the NVR500 study's order); [`main_job`],
//! the main job's shape; and both with published figures.

use crate::measure::results::{
    CellResult, Latency, ModelLimit, PathResult, Results, Run, Spread, Trial, UdpSearch,
};
use crate::topology::reference::{PublishedFigure, Reference, Tolerance, Unpredicted};
use crate::vocab::{Cell, Family};

fn cell(key: &str) -> Cell {
    Cell::parse_key(key).expect("fixture cell keys are valid")
}

fn tcp(key: &str, mbit: &[f64]) -> CellResult {
    let runs = mbit
        .iter()
        .map(|m| Run {
            bits_per_second: m * 1e6,
            bytes: (m * 1e6 * 10.0 / 8.0) as u64,
            seconds: 10.0,
            retransmits: Some(3),
            offered_bps: None,
            lost_percent: None,
            jitter_ms: None,
            out_of_order: None,
            sender_limited: false,
            cpu_client: 20.0,
            cpu_server: 30.0,
            intervals_bps: wobble(*m),
            interval_seconds: Some(1.0),
        })
        .collect();
    CellResult::from_runs(cell(key), runs, None)
}

/// Runs of (received Mbit/s, loss %) at `rate` Mbit/s, after `trials` of
/// (offered Mbit/s, loss %).
fn udp(key: &str, rate: f64, trials: &[(f64, f64)], runs: &[(f64, f64)]) -> CellResult {
    let search = UdpSearch {
        loss_threshold_percent: 10.0,
        trial_seconds: Vec::new(),
        confirmation_seconds: Vec::new(),
        start: None,
        trials: trials
            .iter()
            .map(|&(offered, lost)| Trial {
                offered_bps: offered * 1e6,
                received_bps: offered * 1e6 * (1.0 - lost / 100.0),
                lost_percent: lost,
                out_of_order: 0,
                remeasured: false,
                sender_limited: false,
                reordered: false,
            })
            .collect(),
        rate_bps: rate * 1e6,
        confirmations: Vec::new(),
    };
    let runs = runs
        .iter()
        .map(|&(m, lost)| Run {
            bits_per_second: m * 1e6,
            bytes: (m * 1e6 * 10.0 / 8.0) as u64,
            seconds: 10.0,
            retransmits: None,
            offered_bps: Some(rate * 1e6),
            lost_percent: Some(lost),
            jitter_ms: Some(0.05),
            out_of_order: Some(0),
            sender_limited: false,
            cpu_client: 40.0,
            cpu_server: 90.0,
            intervals_bps: wobble(m),
            interval_seconds: Some(1.0),
        })
        .collect();
    CellResult::from_runs(cell(key), runs, Some(search))
}

/// Ten one-second intervals around `mbit`, a slow start and a wobble, in
/// whole bits per second (so they survive a JSON round trip exactly).
fn wobble(mbit: f64) -> Vec<f64> {
    const SHAPE: [f64; 10] = [0.55, 0.9, 1.02, 1.05, 0.98, 1.04, 1.01, 0.97, 1.06, 1.0];
    SHAPE.iter().map(|k| (mbit * 1e6 * k).round()).collect()
}

/// Probes at 100/s with round trips spread around `median` ms, one-way half
/// each way.
pub(crate) fn latency(median: f64) -> Latency {
    // Rounded, so the figures survive a JSON round trip exactly.
    let r = |x: f64| (x * 1e4).round() / 1e4;
    let spread = |m: f64| Spread {
        samples: 1000,
        min: r(m * 0.8),
        median: r(m),
        p90: r(m * 1.3),
        p99: r(m * 1.8),
        max: r(m * 2.5),
        mean: r(m * 1.05),
    };
    Latency {
        rate: 100.0,
        sent: 1000,
        received: 998,
        lost_percent: 0.2,
        reordered: 0,
        rtt_ms: spread(median),
        forward_ms: Some(spread(median / 2.0)),
        reverse_ms: Some(spread(median / 2.0)),
        jitter_ms: r(median / 20.0),
        // Three runs of ten seconds: the queue fills at each run's start.
        series: (0..150)
            .map(|i| {
                let t = i as f64 * 0.2;
                let ramp = (t % 10.0 / 2.0).min(1.0);
                let wobble = 0.2 * ((i % 7) as f64 / 7.0);
                (t as f32, (median * (0.6 + 0.4 * ramp + wobble)) as f32)
            })
            .collect(),
    }
}

fn loaded(mut c: CellResult, median: f64) -> CellResult {
    c.latency = Some(latency(median));
    c
}

pub(crate) fn results() -> Results {
    let raw = PathResult {
        path: "raw".into(),
        scenario: None,
        from: "lan1".into(),
        to: "lan2".into(),
        ipv4: Some("192.168.1.2".into()),
        ipv6: Some("2001:db8:1::2".into()),
        cells: vec![
            loaded(tcp("ipv4.tcp.sender.p6", &[941.0, 940.0, 936.0]), 4.0),
            loaded(tcp("ipv6.tcp.sender", &[928.0, 920.0, 925.0]), 3.5),
            udp(
                "ipv4.udp.receiver",
                960.0,
                &[(1000.0, 12.0), (960.0, 0.6)],
                &[(955.0, 0.5), (950.0, 0.6), (948.0, 0.7)],
            ),
            udp(
                "ipv4.udp.sender",
                350.0,
                &[
                    (1000.0, 65.0),
                    (500.0, 30.0),
                    (300.0, 1.0),
                    (400.0, 15.0),
                    (350.0, 4.0),
                ],
                &[(347.0, 0.9), (340.0, 2.9), (330.0, 5.7)],
            ),
            tcp("ipv4.tcp.receiver", &[940.0, 938.0, 936.0]),
            tcp("ipv4.tcp.sender", &[930.0, 941.0, 939.0]),
        ],
        idle_latency: vec![(Family::Ipv4, latency(0.05)), (Family::Ipv6, latency(0.06))],
        tunnel: None,
        hosts: Vec::new(),
        idle_latency_seconds: None,
        same_lab_as: None,
    };
    let wg = PathResult {
        path: "wg".into(),
        scenario: None,
        from: "lan1".into(),
        to: "lan2".into(),
        ipv4: Some("10.9.0.2".into()),
        ipv6: Some("fd00:9::2".into()),
        cells: vec![
            tcp("ipv4.tcp.sender", &[292.0, 290.0, 280.0]),
            tcp("ipv4.tcp.receiver", &[470.0, 469.0, 468.0]),
            udp(
                "ipv4.udp.sender",
                120.0,
                &[(1000.0, 88.0), (120.0, 4.0)],
                &[(118.0, 1.5), (115.0, 4.0), (110.0, 8.3)],
            ),
            udp(
                "ipv4.udp.receiver",
                500.0,
                &[(1000.0, 52.0), (500.0, 5.0)],
                &[(480.0, 3.0), (470.0, 5.0), (460.0, 6.0)],
            ),
            CellResult::failed(
                cell("ipv6.tcp.sender"),
                "connecting to [fd00:9::2]:5201:\nconnection refused".into(),
            ),
        ],
        idle_latency: vec![(Family::Ipv4, latency(0.4))],
        tunnel: None,
        hosts: Vec::new(),
        idle_latency_seconds: None,
        same_lab_as: None,
    };
    Results {
        tool: "tunbench 0.1.0".into(),
        lab: "home".into(),
        topology: Some("nvr500-home.toml".into()),
        started: 1_580_560_200,
        seconds: 512.0,
        runs_per_cell: 3,
        duration_per_run: 10.0,
        paths: vec![raw, wg],
        reference: None,
        notes: Vec::new(),
        host: None,
        underlays: Vec::new(),
        phases: Vec::new(),
    }
}

/// A cell per (key, Mbit/s): TCP the best of three runs a little apart, UDP
/// searched to that rate and received a little below it; each with latency
/// under load of `under_load` ms.
fn cells(rates: &[(&str, f64)], under_load: f64) -> Vec<CellResult> {
    rates
        .iter()
        .map(|&(k, mbit)| {
            let c = if k.contains(".udp.") {
                udp(
                    k,
                    mbit,
                    &[(mbit * 2.0, 40.0), (mbit, 2.0)],
                    &[(mbit * 0.99, 1.0), (mbit * 0.98, 2.0), (mbit * 0.97, 3.0)],
                )
            } else {
                tcp(k, &[mbit, mbit * 0.99, mbit * 0.98])
            };
            loaded(c, under_load)
        })
        .collect()
}

/// The keys of `EVERY` that contain `part`, each at its figure of `mbit`.
fn at<'a>(part: &str, mbit: [f64; 8]) -> Vec<(&'a str, f64)> {
    EVERY
        .iter()
        .copied()
        .zip(mbit)
        .filter(|(k, _)| k.contains(part))
        .collect()
}

const EVERY: [&str; 8] = [
    "ipv4.tcp.sender",
    "ipv4.tcp.receiver",
    "ipv4.udp.sender",
    "ipv4.udp.receiver",
    "ipv6.tcp.sender",
    "ipv6.tcp.receiver",
    "ipv6.udp.sender",
    "ipv6.udp.receiver",
];

fn path(scenario: &str, name: &str, to: &str, cells: Vec<CellResult>) -> PathResult {
    let families: Vec<Family> = [Family::Ipv4, Family::Ipv6]
        .into_iter()
        .filter(|f| cells.iter().any(|c| c.cell.family == *f))
        .collect();
    PathResult {
        path: name.into(),
        scenario: Some(scenario.into()),
        from: "pc".into(),
        to: to.into(),
        ipv4: families
            .contains(&Family::Ipv4)
            .then(|| "198.18.1.10".into()),
        ipv6: families
            .contains(&Family::Ipv6)
            .then(|| "2001:2:0:1::10".into()),
        idle_latency: families.iter().map(|f| (*f, latency(0.08))).collect(),
        tunnel: None,
        hosts: Vec::new(),
        idle_latency_seconds: None,
        same_lab_as: None,
        cells,
    }
}

/// The NVR500 study's figures for the raw paths in scenarios none, fast and normal,
/// in [`EVERY`]'s order.
const NONE: [f64; 8] = [941.0, 940.0, 347.0, 955.0, 928.0, 927.0, 325.0, 940.0];
const FAST: [f64; 8] = [824.0, 939.0, 32.7, 525.0, 777.0, 249.0, 22.9, 200.0];
const NORMAL: [f64; 8] = [384.0, 491.0, 29.7, 540.0, 174.0, 234.0, 19.8, 205.0];

/// The main job's shape (topologies/nvr500-home.toml): eleven paths in four
/// scenarios, the NVR500 study's published figures, the tunnels' notes.
pub(crate) fn main_job() -> Results {
    Results {
        tool: "tunbench 0.1.0".into(),
        lab: "home".into(),
        topology: Some("topologies/nvr500-home.toml".into()),
        started: 1_580_560_200,
        seconds: 900.0,
        runs_per_cell: 3,
        duration_per_run: 3.0,
        paths: main_job_paths(),
        reference: Some(main_job_reference()),
        host: None,
        underlays: Vec::new(),
        phases: Vec::new(),
        notes: vec![
            "the NVR500 is a model calibrated from the NVR500 study's figures (profiles/nvr500.toml), not the device".into(),
            "path wireguard crosses WireGuard tunnel vpn (tunbench): 60 bytes per packet over IPv4 (IPv4 20 + UDP 8 + WireGuard 32); inner MTU 1420, TCP MSS 1380 (IPv4) / 1360 (IPv6).".into(),
            "path dslite crosses DS-Lite tunnel transix: 40 bytes per packet over IPv6 (IPv6 40); inner MTU 1460, TCP MSS 1420 (IPv4) / 1400 (IPv6).".into(),
        ],
    }
}

/// The main job's eleven paths: the raw paths at the NVR500 study's figures (but for
/// one cell of fast/raw), round figures for the others.
fn main_job_paths() -> Vec<PathResult> {
    let mut fast_measured = FAST;
    fast_measured[1] = 700.0;
    let vpn = |a: f64, b: f64, c: f64| [a, b, 0.0, 0.0, a * 0.9, c, 0.0, 0.0];
    let softwire = |x: f64| [x, x * 1.1, 30.0, 480.0, 0.0, 0.0, 0.0, 0.0];
    let native = [0.0, 0.0, 0.0, 0.0, 777.0, 249.0, 22.9, 200.0];
    vec![
        path("none", "raw", "server", cells(&at("", NONE), 2.1)),
        path("fast", "raw", "server", cells(&at("", fast_measured), 12.5)),
        path("normal", "raw", "server", cells(&at("", NORMAL), 48.0)),
        path(
            "fast",
            "speedtest",
            "inet",
            cells(
                &[
                    ("ipv6.tcp.receiver", 249.0),
                    ("ipv6.tcp.receiver.p6", 650.0),
                ],
                30.0,
            ),
        ),
        path(
            "fast",
            "wireguard",
            "server",
            cells(&at(".tcp.", vpn(610.0, 640.0, 240.0)), 14.0),
        ),
        path(
            "fast",
            "l2tp-ipsec",
            "server",
            cells(&at(".tcp.", vpn(402.0, 398.0, 235.0)), 15.0),
        ),
        path(
            "fast",
            "ikev2",
            "server",
            cells(&at(".tcp.", vpn(251.0, 248.0, 210.0)), 22.0),
        ),
        path(
            "fast",
            "native-ipv6",
            "inet",
            cells(&at("ipv6", native), 12.0),
        ),
        path(
            "softwire-userspace",
            "native-ipv6",
            "inet",
            cells(&at("ipv6", native), 12.0),
        ),
        path(
            "fast",
            "dslite",
            "inet",
            cells(&at("ipv4", softwire(760.0)), 13.0),
        ),
        path(
            "softwire-userspace",
            "dslite",
            "inet",
            cells(&at("ipv4", softwire(520.0)), 19.0),
        ),
    ]
}

/// The NVR500 study's published figures for the raw paths, and the speed test's.
fn main_job_reference() -> Reference {
    let mut figures = Vec::new();
    for (p, f) in [
        ("none/raw", NONE),
        ("fast/raw", FAST),
        ("normal/raw", NORMAL),
    ] {
        for (k, m) in EVERY.iter().zip(f) {
            figures.push(figure(p, k, m));
        }
    }
    figures.push(figure("fast/speedtest", "ipv6.tcp.receiver.p6", 656.69));
    Reference {
        source: Some(
            "the NVR500 study: a Yamaha NVR500 home router, January/February 2020, best of 5 iperf3 runs"
                .into(),
        ),
        tolerance: Tolerance::DEFAULT,
        figures,
        marks_calibration: false,
        unpredicted: Vec::new(),
    }
}

/// The main job as it reads once its reference says what calibrated the
/// NVR500 model: the router's TCP cells per direction and family in fast and
/// normal, and none/raw's IPv4 UDP upload (the server's own limit); every
/// other published figure a prediction, one of them (the single-connection
/// speed test) newly published, one for a path the run did not measure; a
/// figure the lab does not predict; and model ceilings on two cells nobody
/// published.
pub(crate) fn calibrated() -> Results {
    let mut r = main_job();
    let reference = r.reference.as_mut().expect("the main job has a reference");
    reference.marks_calibration = true;
    for f in &mut reference.figures {
        let key = f.cell.key();
        f.calibrated = (f.path == "none/raw" && key == "ipv4.udp.sender")
            || (matches!(f.path.as_str(), "fast/raw" | "normal/raw") && key.contains(".tcp."));
    }
    for (path, key, mbit) in [
        ("fast/speedtest", "ipv6.tcp.receiver", 262.0),
        ("fast/l2tp-server", "ipv4.tcp.sender", 150.0),
    ] {
        reference.figures.push(figure(path, key, mbit));
    }
    reference.unpredicted.push(Unpredicted {
        what: "RBBS multi-session speed test (FLET'S), with or without the NVR500".into(),
        published_bps: 300e6,
        why: "its limit is the NGN's test server, which the lab does not model".into(),
    });
    let limit = |r: &mut Results, label: &str, key: &str, what: &str, bps: f64| {
        let c = r
            .paths
            .iter_mut()
            .find(|p| p.label() == label)
            .and_then(|p| p.cells.iter_mut().find(|c| c.cell.key() == key))
            .expect("the main job has the cell");
        c.model_limit = Some(ModelLimit {
            what: what.into(),
            bps,
        });
    };
    limit(
        &mut r,
        "fast/dslite",
        "ipv4.udp.sender",
        "nvr500 fast path ipv4 udp upload ceiling",
        30.12e6,
    );
    limit(
        &mut r,
        "fast/wireguard",
        "ipv4.tcp.sender",
        "nvr500 fast path ipv4 tcp upload ceiling",
        824e6,
    );
    r
}

/// [`calibrated`] with wire limits: every cell of `none/raw` 0.4 % above
/// what arrived (the line rate's), `fast/raw` on a 1G Ethernet link and
/// `fast/wireguard` on the same link's outer packets.
pub(crate) fn wired() -> Results {
    let mut r = calibrated();
    for p in &mut r.paths {
        let label = p.label();
        for c in &mut p.cells {
            let bps = match label.as_str() {
                "none/raw" => crate::report::wire::arrived_bps(c) * 1.004,
                "fast/raw" => 941.48e6,
                "fast/wireguard" => 901.19e6,
                _ => continue,
            };
            c.wire_limit = Some(ModelLimit {
                what: format!("1G ethernet link pc:eth0 -> sw:p5 ({label})"),
                bps,
            });
        }
    }
    r
}

/// A published figure of `mbit` Mbit/s for path `path`'s cell `key`.
pub(crate) fn figure(path: &str, key: &str, mbit: f64) -> PublishedFigure {
    PublishedFigure {
        path: path.into(),
        cell: cell(key),
        published_bps: mbit * 1e6,
        calibrated: false,
    }
}

/// [`results`] with published figures: raw within and out of
/// tolerance, UDP compared on its searched rate, a 6-stream cell, a cell
/// the run did not measure, a path it did not measure, and wg's failed cell.
pub(crate) fn with_reference() -> Results {
    let mut r = results();
    r.reference = Some(Reference {
        source: Some("the NVR500 study, best of 5".into()),
        tolerance: Tolerance::DEFAULT,
        figures: vec![
            figure("raw", "ipv4.udp.sender", 347.0),
            figure("raw", "ipv4.tcp.sender", 941.0),
            figure("raw", "ipv4.tcp.receiver", 790.0),
            figure("raw", "ipv4.udp.receiver", 955.0),
            figure("raw", "ipv4.tcp.sender.p6", 656.69),
            figure("raw", "ipv6.udp.receiver", 940.0),
            figure("wg", "ipv4.tcp.sender", 300.0),
            figure("wg", "ipv6.tcp.sender", 280.0),
            figure("gre", "ipv4.tcp.sender", 500.0),
        ],
        marks_calibration: false,
        unpredicted: Vec::new(),
    });
    r
}

/// [`with_reference`] marked: raw's IPv4 TCP cells (one
/// within tolerance, one out) and a cell the run did not measure were
/// calibrated from; the rest are predictions. A figure the lab does not
/// predict, and a model ceiling on a cell nobody published.
pub(crate) fn with_calibration() -> Results {
    let mut r = with_reference();
    let reference = r.reference.as_mut().unwrap();
    reference.marks_calibration = true;
    for f in &mut reference.figures {
        f.calibrated = f.path == "raw"
            && matches!(
                f.cell.key().as_str(),
                "ipv4.tcp.sender" | "ipv4.tcp.receiver" | "ipv6.udp.receiver"
            );
    }
    reference.unpredicted.push(Unpredicted {
        what: "RBBS speed test".into(),
        published_bps: 300e6,
        why: "its limit is the NGN's test server".into(),
    });
    let udp = &mut r.paths[1].cells[2];
    assert_eq!(udp.cell.key(), "ipv4.udp.sender");
    udp.model_limit = Some(ModelLimit {
        what: "router fast path ipv4 udp upload ceiling".into(),
        bps: 29.43e6,
    });
    r
}

/// An underlay between two hosts; `None` for a direction that failed.
pub(crate) fn underlay(
    from: &str,
    to: &str,
    upload_mbit: Option<f64>,
    download_mbit: Option<f64>,
) -> crate::measure::results::UnderlayResult {
    let address = |h: &str| match h {
        "pc" => "198.18.230.1",
        "router" => "198.18.230.2",
        _ => "198.18.230.3",
    };
    let failed = upload_mbit.is_none() || download_mbit.is_none();
    crate::measure::results::UnderlayResult {
        from_host: from.into(),
        to_host: to.into(),
        from_address: address(from).into(),
        to_address: address(to).into(),
        upload_bps: upload_mbit.map(|m| m * 1e6),
        download_bps: download_mbit.map(|m| m * 1e6),
        seconds: 5.0,
        error: failed.then(|| format!("connecting to {}:5201: connection refused", address(to))),
    }
}

/// [`results`] placed on three hosts: both paths cross pc, router and server;
/// the underlay from router to server carries 1000 Mbit/s, so raw's TCP
/// sender cells (941 and 928 best) reach it; pc to server failed.
pub(crate) fn placed() -> Results {
    let mut r = results();
    for p in &mut r.paths {
        p.hosts = vec!["pc".into(), "router".into(), "server".into()];
    }
    r.underlays = vec![
        underlay("pc", "router", Some(9400.0), Some(9300.0)),
        underlay("router", "server", Some(1000.0), Some(2000.0)),
        underlay("pc", "server", None, None),
    ];
    r
}

/// [`placed`] as the parts of its hosts measured it: pc measured raw, router
/// wg, server no path; each measured the underlays it reaches.
pub(crate) fn placed_parts() -> [Results; 3] {
    let whole = placed();
    let part = |host: &str, paths: &[usize], underlays: &[usize]| Results {
        host: Some(host.into()),
        paths: paths.iter().map(|&i| whole.paths[i].clone()).collect(),
        underlays: underlays
            .iter()
            .map(|&i| whole.underlays[i].clone())
            .collect(),
        ..whole.clone()
    };
    let mut router = part("router", &[1], &[1, 0]);
    router.started += 600;
    [
        part("pc", &[0], &[0, 1, 2]),
        router,
        part("server", &[], &[]),
    ]
}
