use super::super::draw::checks::misplaced;
use super::super::{fixture, views};
use super::*;

fn all_charts() -> Vec<(String, Chart)> {
    let mut out = Vec::new();
    for r in [fixture::main_job(), fixture::results()] {
        for v in views::views(&r) {
            for c in charts(&v) {
                out.push((v.id.clone(), c));
            }
        }
    }
    out
}

#[test]
fn every_view_gets_its_charts() {
    let r = fixture::main_job();
    let kinds: Vec<(String, Vec<ChartKind>)> = views::views(&r)
        .iter()
        .map(|v| (v.id.clone(), charts(v).iter().map(|c| c.kind).collect()))
        .collect();
    use ChartKind::*;
    assert_eq!(kinds[0], ("published".into(), vec![Throughput]));
    for (id, k) in &kinds[1..] {
        assert_eq!(k, &[Throughput, Latency, OverTime], "{id}");
    }
}

#[test]
fn no_two_series_of_a_chart_share_a_colour() {
    for (id, c) in all_charts() {
        let mut seen: Vec<&str> = Vec::new();
        for (label, colour) in &c.colours {
            assert!(
                !seen.contains(&colour.as_str()),
                "{id} {:?}: {label} repeats {colour}",
                c.kind
            );
            assert!(
                c.svg.contains(&format!("fill=\"{colour}\"")),
                "{id}: {colour} not drawn"
            );
            seen.push(colour);
        }
    }
    // The main job's published view: six series, published and measured.
    let r = fixture::main_job();
    let v = &views::views(&r)[0];
    let c = &charts(v)[0];
    assert!(c.colours.len() >= 6, "{:?}", c.colours);
}

#[test]
fn a_path_keeps_its_colour_across_a_views_charts() {
    let r = fixture::main_job();
    let v = views::views(&r)
        .into_iter()
        .find(|v| v.id == "tunnels-fast")
        .unwrap();
    let cs = charts(&v);
    let of = |c: &Chart, label: &str| {
        c.colours
            .iter()
            .find(|(l, _)| l == label)
            .unwrap()
            .1
            .clone()
    };
    let wg = of(&cs[0], "fast/wireguard");
    assert_eq!(of(&cs[1], "fast/wireguard under load"), wg);
    assert_eq!(of(&cs[2], "fast/wireguard"), wg);
    assert_eq!(of(&cs[1], "fast/wireguard idle"), pale(&wg));
}

/// Every label inside the chart; no two straight labels overlap.
fn labels_fit(id: &str, c: &Chart) {
    let faults = misplaced(&c.labels, c.width, c.height);
    assert!(faults.is_empty(), "{id} {:?}: {faults:#?}", c.kind);
}

#[test]
fn labels_fit_inside_and_apart() {
    for (id, c) in all_charts() {
        labels_fit(&id, &c);
    }
    // The widest names a topology might give, and many of them.
    let mut r = fixture::main_job();
    for p in &mut r.paths {
        p.path = format!("{}-with-a-rather-long-name", p.path);
    }
    for v in views::views(&r) {
        for c in charts(&v) {
            labels_fit(&v.id, &c);
        }
    }
}

/// The chart of `kind` in the main job's view `id`.
fn main_job_chart(id: &str, kind: ChartKind) -> Chart {
    let r = fixture::main_job();
    let v = views::views(&r).into_iter().find(|v| v.id == id).unwrap();
    charts(&v).into_iter().find(|c| c.kind == kind).unwrap()
}

#[test]
fn latency_is_drawn_on_a_log_scale_when_idle_and_loaded_lie_apart() {
    let c = main_job_chart("tunnels-fast", ChartKind::Latency);
    assert!(c.svg.contains("log scale"), "idle 0.08 ms, loaded 12-40 ms");
    // Idle and loaded box per path and cell: 4 paths x 8 cells, less the
    // tunnels' missing UDP cells (3 x 4), twice.
    assert_eq!(c.svg.matches("<g><title>").count(), (32 - 12) * 2);
    assert!(c.svg.contains("fast/ikev2 under load, IPv4 TCP Sender: min 17.6, median 22.0, p90 28.6, p99 39.6, max 55.0 ms"));
}

#[test]
fn over_time_draws_a_line_per_path_and_panel() {
    let c = main_job_chart("tunnels-fast", ChartKind::OverTime);
    assert!(c.svg.contains(">IPv4 TCP Sender over time</text>"));
    assert_eq!(c.svg.matches("<g><title>").count(), 4 * 2);
    assert!(c.svg.contains(">RTT ms</text>") && c.svg.contains(">Mbit/s</text>"));
    assert!(c.svg.contains(">30</text>"), "three runs of ten seconds");
}
