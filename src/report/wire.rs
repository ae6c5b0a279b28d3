//! The wire limit in reports: what the shaped links' line rates let through of
//! a cell's payload (`CellResult::wire_limit`, from [`crate::predict::wire_limit`]),
//! its figure beside a cell and what sets it in the notes; in the tunnels view
//! the measured figure over it and over the raw path's. A cell of a path
//! without a tunnel within [`LINE_RATE_WITHIN`] of its wire limit is
//! "predicted (line rate)": the formula, not a device model, gives its figure.

use super::cells::{measured_bps, udp_figure};
use super::numbers::mbit;
use crate::measure::results::{CellResult, PathResult};
use crate::vocab::Proto;

/// How near (a fraction) a cell's figure must come to its wire limit to be
/// the line rate's.
pub(crate) const LINE_RATE_WITHIN: f64 = 0.01;

/// What arrived of a cell: TCP's figure (the best run); UDP's received rate
/// in the run its figure came from, never the rate offered.
pub(crate) fn arrived_bps(c: &CellResult) -> f64 {
    match (c.cell.protocol, udp_figure(c)) {
        (Proto::Udp, Some(u)) => u.received,
        _ => measured_bps(c),
    }
}

/// The wire limit of a cell the line rate predicts: on a path through no
/// tunnel, measured (what arrived) within [`LINE_RATE_WITHIN`] of it.
pub(crate) fn line_rate(p: &PathResult, c: &CellResult) -> Option<f64> {
    if p.tunnel.is_some() || c.error.is_some() {
        return None;
    }
    let wire = c.wire_limit.as_ref()?.bps;
    let off = arrived_bps(c) / wire - 1.0;
    (wire > 0.0 && off.abs() <= LINE_RATE_WITHIN + 1e-12).then_some(wire)
}

/// One note per distinct wire limit of `limits`, in their order:
/// "wire limit 941 Mbit/s: 1G ethernet link ...".
pub(crate) fn notes<'a>(
    limits: impl IntoIterator<Item = &'a crate::measure::results::ModelLimit>,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for l in limits {
        let line = format!("wire limit {} Mbit/s: {}", mbit(l.bps), l.what);
        if !out.contains(&line) {
            out.push(line);
        }
    }
    out
}

/// The legend's sentence for the wire limit column.
pub(crate) const LEGEND: &str = "wire limit: the goodput the shaped links' line rates allow the cell's \
     payload (rate x payload / wire bytes per frame, on the tightest link of its way; what sets it is \
     in the notes).";

/// The legend's sentence for the tunnels view's two wire columns.
pub(crate) const TUNNEL_LEGEND: &str = "/wire: the median over the wire limit, what the datapath \
     costs (1.00 is the line rate); wire/raw: the wire limit over the raw path's, what the tunnel's \
     bytes cost on the wire.";

/// The legend's sentence for a basis of "predicted (line rate)".
pub(crate) const LINE_RATE_LEGEND: &str = "predicted (line rate X): a path through no tunnel whose \
     figure (UDP: what arrived) is within 1 % of its wire limit X, which the line rate alone predicts.";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::results::ModelLimit;
    use crate::report::views::testing::row;
    use crate::report::views::{Column, Metric, views};
    use crate::report::{Format, fixture, render};
    use crate::vocab::Cell;

    /// The published view: the wire limit beside each cell, and the raw
    /// cells the line rate predicts marked so (a calibrated one stays so).
    #[test]
    fn the_published_view_marks_the_line_rates_cells() {
        let r = fixture::wired();
        let v = views(&r);
        let p = &v[0];
        assert!(p.columns.contains(&Column::WireLimit) && p.columns.contains(&Column::Basis));
        let tcp = row(p, "none/raw", "ipv4.tcp.sender");
        let wire = tcp.figures.wire_limit.as_ref().unwrap().bps;
        assert_eq!(
            Column::Basis.text(tcp),
            format!("predicted (line rate {})", mbit(wire))
        );
        assert_eq!(Column::WireLimit.text(tcp), mbit(wire));
        assert_eq!(
            Column::Basis.text(row(p, "none/raw", "ipv4.udp.sender")),
            "calibrated"
        );
        assert_eq!(
            Column::Basis.text(row(p, "fast/raw", "ipv4.tcp.sender")),
            "calibrated"
        );
        assert!(
            p.notes
                .iter()
                .any(|n| n.contains("1G ethernet link pc:eth0 -> sw:p5 (none/raw)"))
        );
        assert!(p.legend.iter().any(|l| l.starts_with("wire limit:")));
        let md = render(&r, Format::Md, None);
        assert!(md.contains("predicted (line rate "), "{md}");
        assert!(md.contains("none/raw wire limit"), "{md}");
        let csv = render(&r, Format::Csv, None);
        assert!(
            csv.lines()
                .next()
                .unwrap()
                .ends_with(",wire_limit,wire_limit_bps,line_rate")
        );
        // fast/raw's IPv4 TCP upload (824 of 941) is the router's, not the line's.
        assert!(csv.contains(",941480000,false\n"), "{csv}");
        assert!(csv.contains("(none/raw),944764000,true\n"), "{csv}");
    }

    /// The tunnels view: what WireGuard's bytes cost on the wire (wire/raw)
    /// apart from what its datapath costs (/wire).
    #[test]
    fn the_tunnels_view_sets_bytes_and_datapath_apart() {
        let v = views(&fixture::wired());
        let t = v.iter().find(|v| v.id == "tunnels-fast").unwrap();
        let at = t
            .columns
            .iter()
            .position(|c| *c == Column::WireLimit)
            .unwrap();
        assert_eq!(
            t.columns[at + 1..at + 3],
            [Column::OfWire, Column::WireOfRaw]
        );
        let wg = row(t, "fast/wireguard", "ipv4.tcp.sender");
        assert_eq!(Column::WireLimit.text(wg), "901");
        assert_eq!(Column::WireOfRaw.text(wg), "0.96");
        let median = wg.figures.rate_bps.unwrap();
        assert_eq!(Column::OfWire.text(wg), format!("{:.2}", median / 901.19e6));
        let raw = row(t, "fast/raw", "ipv4.tcp.sender");
        assert_eq!(Column::WireOfRaw.text(raw), "");
    }

    /// Charts plot a UDP cell at what arrived; the table keeps the offered
    /// rate beside it.
    #[test]
    fn a_udp_cell_is_plotted_at_what_arrived() {
        let r = fixture::calibrated();
        let v = views(&r);
        for view in &v[..2] {
            for x in view.rows.iter().filter(|x| x.figures.udp.is_some()) {
                let u = x.figures.udp.unwrap();
                assert!(u.received < u.offered, "the fixture loses some");
                let s = view
                    .series
                    .iter()
                    .find(|s| s.label == x.label && s.metric == Metric::Rate)
                    .unwrap();
                let p = s.points[x.category].as_ref().unwrap();
                assert_eq!(p.value, u.received, "{} {}", x.label, x.cell.key());
                assert!(Column::Measured.text(x).starts_with(&mbit(u.offered)));
            }
        }
    }

    #[test]
    fn a_raw_cell_within_one_percent_of_its_wire_limit_is_the_line_rates() {
        let mut r = fixture::results();
        let p = &mut r.paths[0];
        assert!(p.tunnel.is_none());
        let tcp = Cell::parse_key("ipv4.tcp.sender").unwrap();
        let c = p.cells.iter_mut().find(|c| c.cell == tcp).unwrap();
        let best = c.best_bps;
        c.wire_limit = Some(ModelLimit {
            what: "1G ethernet link a:eth0 -> b:eth0".into(),
            bps: best * 1.009,
        });
        assert_eq!(line_rate(p, p.cell(&tcp).unwrap()), Some(best * 1.009));
        let c = p.cells.iter_mut().find(|c| c.cell == tcp).unwrap();
        c.wire_limit.as_mut().unwrap().bps = best * 1.02;
        assert_eq!(line_rate(p, p.cell(&tcp).unwrap()), None);
        // UDP counts what arrived: 347 of the 350 offered.
        let udp = Cell::parse_key("ipv4.udp.sender").unwrap();
        let c = p.cells.iter_mut().find(|c| c.cell == udp).unwrap();
        c.wire_limit = Some(ModelLimit {
            what: "w".into(),
            bps: 348e6,
        });
        assert_eq!(arrived_bps(p.cell(&udp).unwrap()), 347e6);
        assert_eq!(line_rate(p, p.cell(&udp).unwrap()), Some(348e6));
        let limits = [
            ModelLimit {
                what: "x".into(),
                bps: 941.48e6,
            },
            ModelLimit {
                what: "x".into(),
                bps: 941.48e6,
            },
        ];
        assert_eq!(notes(&limits), ["wire limit 941 Mbit/s: x"]);
    }
}
