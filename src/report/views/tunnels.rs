//! The tunnels views ([`ViewKind::Tunnels`]): in one scenario, every path
//! with the same ends (`from`, `to`) as the path named `raw` (the underlay,
//! and `measure --path`'s default name), against it: rate, ratio, the
//! tunnel's bytes per packet where the run's notes say them, latency.

use super::compared::{Compared, Member};
use super::{Column, View, ViewKind};
use crate::measure::results::{PathResult, Results};
use crate::report::wire;
use crate::report::words::words;

/// Per scenario, the paths with the same ends as the one named `raw`, against it.
pub(super) fn tunnels(r: &Results) -> Vec<View> {
    let mut out = Vec::new();
    for (b, raw) in r.paths.iter().enumerate().filter(|(_, p)| p.path == "raw") {
        let others: Vec<usize> = (0..r.paths.len())
            .filter(|&i| {
                let p = &r.paths[i];
                i != b && p.scenario == raw.scenario && p.from == raw.from && p.to == raw.to
            })
            .collect();
        if !others.is_empty() {
            out.push(view(r, b, raw, &others));
        }
    }
    out
}

/// The paths `others` against `raw`, path `b` of the results.
fn view(r: &Results, b: usize, raw: &PathResult, others: &[usize]) -> View {
    let mut members = vec![Member {
        path: b,
        baseline: None,
    }];
    members.extend(others.iter().map(|&i| Member {
        path: i,
        baseline: Some(b),
    }));
    let names: Vec<String> = others.iter().map(|&i| r.paths[i].path.clone()).collect();
    let (id, title, in_scenario) = match &raw.scenario {
        Some(s) => (
            format!("tunnels-{s}"),
            format!("Tunnels against the raw path, scenario {s}"),
            format!(", in scenario {s}"),
        ),
        None => (
            "tunnels".to_string(),
            "Tunnels against the raw path".to_string(),
            String::new(),
        ),
    };
    let who = if names.len() == 1 {
        format!("path {}", names[0])
    } else {
        format!("each of {}", words(&names))
    };
    let mut v = Compared {
        kind: ViewKind::Tunnels,
        id,
        title,
        question: format!(
            "What does {who} cost against the raw path from {} to {}{in_scenario}?",
            raw.from, raw.to
        ),
        members,
        one_scenario: raw.scenario.is_some(),
        legend: vec![format!(
            "Ratios: a path's median divided by {}'s.",
            raw.label()
        )],
    }
    .view(r);
    // What the tunnel's bytes cost and what its datapath costs, apart.
    if let Some(at) = v.columns.iter().position(|c| *c == Column::WireLimit) {
        v.columns
            .splice(at + 1..at + 1, [Column::OfWire, Column::WireOfRaw]);
        v.legend.push(wire::TUNNEL_LEGEND.into());
    }
    v
}

#[cfg(test)]
mod tests {
    use super::super::testing::row;
    use super::super::{Column, Metric, views};
    use crate::report::{Format, fixture, render};

    #[test]
    fn each_tunnel_against_raw_in_its_scenario() {
        let v = views(&fixture::main_job());
        let t = &v[3];
        assert_eq!(t.id, "tunnels-fast");
        let labels: Vec<&str> = t
            .rows
            .iter()
            .filter(|r| r.cell.key() == "ipv4.tcp.sender")
            .map(|r| r.short.as_str())
            .collect();
        assert_eq!(labels, ["raw", "wireguard", "l2tp-ipsec", "ikev2"]);
        // Its bytes per packet where the notes say them.
        let wg = row(t, "fast/wireguard", "ipv4.tcp.sender");
        assert_eq!(wg.figures.overhead_bytes, Some((60, 60)));
        assert_eq!(
            row(t, "fast/ikev2", "ipv4.tcp.sender")
                .figures
                .overhead_bytes,
            None
        );
        assert!((wg.figures.ratio.unwrap() - 610.0 / 824.0).abs() < 1e-9);
        // Latency: idle 0.08 ms, 14 ms under load.
        assert!((wg.figures.increase_ms().unwrap() - (14.0 - 0.08)).abs() < 1e-9);
        assert!(t.columns.contains(&Column::Overhead));
        assert!(t.columns.contains(&Column::IncreaseMs));
        // TCP only beside raw's UDP: raw's UDP rows stay, with no ratio.
        assert!(t.columns.contains(&Column::Udp));
    }

    #[test]
    fn a_rate_and_a_latency_series_per_path() {
        let t = &views(&fixture::main_job())[3];
        let labels: Vec<(&str, Metric)> = t
            .series
            .iter()
            .map(|s| (s.label.as_str(), s.metric))
            .collect();
        let mut want = Vec::new();
        for path in [
            "fast/raw",
            "fast/wireguard",
            "fast/l2tp-ipsec",
            "fast/ikev2",
        ] {
            for metric in [Metric::Rate, Metric::IdleRtt, Metric::LoadedRtt] {
                want.push((path, metric));
            }
        }
        assert_eq!(labels, want);
        // A point per category.
        for s in &t.series {
            assert_eq!(s.points.len(), t.categories.len());
        }
        let wg = &t.series[3];
        let idle = t.series[4].points[0].as_ref().unwrap();
        assert_eq!(idle.spread.as_ref().unwrap().median, 0.08);
        let udp = t
            .categories
            .iter()
            .position(|c| c == "IPv4 UDP Sender")
            .unwrap();
        assert_eq!(wg.points[udp], None, "wireguard measured no UDP");
        let p = wg.points[0].as_ref().unwrap();
        assert_eq!(
            (p.value, p.low, p.high),
            (610.0 * 0.99e6, 610.0 * 0.98e6, 610.0e6)
        );
    }

    #[test]
    fn timelines_of_the_first_cell_with_intervals() {
        let v = views(&fixture::main_job());
        let t = &v[3];
        // IPv4 TCP Sender of each path, three runs of ten intervals one after
        // another, and its probes under that load.
        assert_eq!(t.timelines.len(), 4);
        let tl = &t.timelines[1];
        assert_eq!(
            (tl.label.as_str(), tl.cell.key()),
            ("fast/wireguard", "ipv4.tcp.sender".into())
        );
        assert_eq!(tl.rate_bps.len(), 30);
        assert_eq!(tl.rate_bps[29].0, 30.0);
        assert_eq!(tl.rtt_ms.len(), 150);
        assert!(v[0].timelines.is_empty(), "the published view has none");
    }

    #[test]
    fn a_tunnel_view_as_text() {
        let text = render(&fixture::main_job(), Format::Text, None);
        let start = text
            .find("Tunnels against the raw path, scenario fast\n")
            .unwrap();
        let view: Vec<&str> = text[start..].lines().take(16).collect();
        assert_eq!(
            view,
            [
                "Tunnels against the raw path, scenario fast",
                "===========================================",
                "What does each of wireguard, l2tp-ipsec and ikev2 cost against the raw path from pc to server, in scenario fast?",
                "Mbit/s: median of 3 runs; UDP what arrived, at -b: the highest offered rate at which a full-length run kept its loss",
                "within 10 %, with that run's loss.",
                "Ratios: a path's median divided by fast/raw's.",
                "B/pkt: bytes per packet the path's tunnel adds.",
                "Round trips in ms: idle median; under the cell's load median, p99, and the median's increase over idle.",
                "",
                "cell               path        Mbit/s  ratio     -b (loss)  B/pkt  idle  load   p99  +load",
                "IPv4 TCP Sender    raw            816                              0.08  12.5  22.5  +12.4",
                "                   wireguard      604   0.74                   60  0.08  14.0  25.2  +13.9",
                "                   l2tp-ipsec     398   0.49                       0.08  15.0  27.0  +14.9",
                "                   ikev2          248   0.30                       0.08  22.0  39.6  +21.9",
                "IPv4 TCP Receiver  raw            693                              0.08  12.5  22.5  +12.4",
                "                   wireguard      634   0.91                   60  0.08  14.0  25.2  +13.9",
            ]
        );
    }
}
