//! A small measurement for the report tests: two paths, raw and wg, TCP and UDP
//! cells, a 6-stream cell only raw has, and one failed cell on wg. The cells are
//! deliberately out of the seed's order.

use crate::measure::model::{
    CellResult, Latency, PathResult, Results, Run, Spread, Trial, UdpSearch,
};
use crate::vocab::Family;

use crate::vocab::Cell;

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
            intervals_bps: vec![m * 1e6; 10],
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
        trials: trials
            .iter()
            .map(|&(offered, lost)| Trial {
                offered_bps: offered * 1e6,
                received_bps: offered * 1e6 * (1.0 - lost / 100.0),
                lost_percent: lost,
                out_of_order: 0,
                remeasured: false,
                sender_limited: false,
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
            intervals_bps: Vec::new(),
            interval_seconds: None,
        })
        .collect();
    CellResult::from_runs(cell(key), runs, Some(search))
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
        series: (0..100)
            .map(|i| {
                (
                    i as f32 * 0.1,
                    (median * (1.0 + 0.2 * ((i % 7) as f64 / 7.0))) as f32,
                )
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
    }
}
