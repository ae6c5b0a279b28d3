//! One row per (path, cell), every rate in bit/s, for spreadsheets and scripts,
//! written by the `csv` crate (RFC 4180 quoting). A failed cell has empty
//! figures and its error. Where the reference marks calibration or a cell
//! carries a device model's limit, [`MODEL_HEADER`]'s columns follow; where a
//! cell has a wire limit, [`WIRE_HEADER`]'s; where the lab was placed on
//! several hosts, [`HOSTS_HEADER`]'s, last.

use super::cells::{ordered_cells, udp_figure, udp_rate};
use super::reference::{Basis, Comparison, Outcome, compare, published};
use super::wire;
use crate::measure::results::{CellResult, PathResult, Results};

pub(crate) const HEADER: &str = "path,scenario,cell,family,protocol,direction,streams,runs,\
best_bps,median_bps,min_bps,max_bps,udp_rate_bps,lost_percent,udp_received_bps,\
sender_limited,error,idle_rtt_median_ms,rtt_median_ms,rtt_p90_ms,rtt_p99_ms,rtt_max_ms,\
forward_median_ms,reverse_median_ms,probe_lost_percent";

/// The columns about the links' line rates, last, where a cell has a wire
/// limit: the limit, its figure, and whether the line rate predicts the
/// cell (a path through no tunnel, within 1 % of it).
pub(crate) const WIRE_HEADER: &str = "wire_limit,wire_limit_bps,line_rate";

/// A cell's [`WIRE_HEADER`] fields; empty without a wire limit.
fn wire_fields(p: &PathResult, c: &CellResult) -> [String; 3] {
    match &c.wire_limit {
        None => Default::default(),
        Some(l) => [
            l.what.clone(),
            format!("{:.0}", l.bps),
            wire::line_rate(p, c).is_some().to_string(),
        ],
    }
}

/// The columns about hosts, last, where the results have underlays or paths
/// that cross hosts: the hosts the path crosses ("pc -> router -> server"),
/// the tightest underlay on the cell's way (bit/s) and whether the cell's
/// best run reached it (`Results::at_underlay_capacity`).
pub(crate) const HOSTS_HEADER: &str = "hosts,underlay_limit_bps,at_underlay_capacity";

/// A cell's [`HOSTS_HEADER`] fields.
fn hosts_fields(r: &Results, p: &PathResult, c: &CellResult) -> [String; 3] {
    let limit = r.underlay_limit(p, &c.cell);
    [
        p.hosts.join(" -> "),
        limit
            .as_ref()
            .map(|l| format!("{:.0}", l.0))
            .unwrap_or_default(),
        limit
            .map(|_| r.at_underlay_capacity(p, c).is_some().to_string())
            .unwrap_or_default(),
    ]
}

/// The columns about the lab's model, after [`HEADER`]'s where they apply:
/// the published figure, the ratio and verdict, the basis (`calibrated`,
/// `predicted`, or `unpublished` for a cell nobody published: the model's
/// prediction, untested) and the model's ceiling on the cell.
pub(crate) const MODEL_HEADER: &str =
    "published_bps,ratio,within_tolerance,basis,model_limit,model_limit_bps";

pub(crate) fn render(r: &Results) -> String {
    let reference = r.reference.as_ref();
    let cells = || r.paths.iter().flat_map(|p| &p.cells);
    let model =
        reference.is_some_and(|x| x.marks_calibration) || cells().any(|c| c.model_limit.is_some());
    let wired = cells().any(|c| c.wire_limit.is_some());
    let placed = !r.underlays.is_empty() || r.paths.iter().any(|p| !p.hosts.is_empty());
    let comparisons = reference.map(|x| compare(r, x)).unwrap_or_default();
    let mut header: Vec<&str> = HEADER.split(',').collect();
    if model {
        header.extend(MODEL_HEADER.split(','));
    }
    if wired {
        header.extend(WIRE_HEADER.split(','));
    }
    if placed {
        header.extend(HOSTS_HEADER.split(','));
    }
    let mut out = csv::Writer::from_writer(Vec::new());
    out.write_record(&header).expect(WRITES);
    let order = ordered_cells(r);
    for p in &r.paths {
        let mut cells: Vec<_> = p.cells.iter().collect();
        cells.sort_by_key(|c| order.iter().position(|o| *o == c.cell));
        for c in cells {
            let mut record = cell_fields(p, c).to_vec();
            if model {
                record.extend(model_fields(r, &comparisons, p, c));
            }
            if wired {
                record.extend(wire_fields(p, c));
            }
            if placed {
                record.extend(hosts_fields(r, p, c));
            }
            out.write_record(&record).expect(WRITES);
        }
    }
    let bytes = out.into_inner().expect(WRITES);
    String::from_utf8(bytes).expect("the fields are strings")
}

/// Why writing a record cannot fail: into memory, every record with the
/// header's number of fields.
const WRITES: &str = "records of the header's length write to memory";

/// A cell's [`HEADER`] fields; a failed cell has empty figures and its error.
fn cell_fields(p: &PathResult, c: &CellResult) -> [String; 25] {
    let ok = c.error.is_none();
    let bps = |v: f64| if ok { format!("{v:.0}") } else { String::new() };
    // The run the UDP figure came from: its loss and what it received.
    let figure = udp_figure(c).filter(|_| ok);
    let idle = p
        .idle_latency
        .iter()
        .find(|(f, _)| *f == c.cell.family)
        .map(|(_, l)| l);
    let loaded = c.latency.as_ref();
    [
        p.path.clone(),
        p.scenario.clone().unwrap_or_default(),
        c.cell.key(),
        c.cell.family.word().to_string(),
        c.cell.protocol.word().to_string(),
        c.cell.direction.word().to_string(),
        c.cell.streams.to_string(),
        c.runs.len().to_string(),
        bps(c.best_bps),
        bps(c.median_bps),
        bps(c.min_bps),
        bps(c.max_bps),
        udp_rate(c)
            .filter(|_| ok)
            .map(|v| format!("{v:.0}"))
            .unwrap_or_default(),
        figure.map(|f| f.loss.to_string()).unwrap_or_default(),
        figure
            .map(|f| format!("{:.0}", f.received))
            .unwrap_or_default(),
        figure
            .map(|f| f.sender_limited.to_string())
            .unwrap_or_default(),
        c.error.clone().unwrap_or_default(),
        // Latency: idle on the cell's family, then under its load.
        idle.map(|l| ms(l.rtt_ms.median)).unwrap_or_default(),
        loaded.map(|l| ms(l.rtt_ms.median)).unwrap_or_default(),
        loaded.map(|l| ms(l.rtt_ms.p90)).unwrap_or_default(),
        loaded.map(|l| ms(l.rtt_ms.p99)).unwrap_or_default(),
        loaded.map(|l| ms(l.rtt_ms.max)).unwrap_or_default(),
        loaded
            .and_then(|l| l.forward_ms.as_ref())
            .map(|s| ms(s.median))
            .unwrap_or_default(),
        loaded
            .and_then(|l| l.reverse_ms.as_ref())
            .map(|s| ms(s.median))
            .unwrap_or_default(),
        loaded
            .map(|l| l.lost_percent.to_string())
            .unwrap_or_default(),
    ]
}

/// A cell's [`MODEL_HEADER`] fields: its published figure with the ratio
/// and verdict, its basis, and the model's ceiling on it.
fn model_fields(
    r: &Results,
    comparisons: &[Comparison],
    p: &PathResult,
    c: &CellResult,
) -> [String; 6] {
    let reference = r.reference.as_ref();
    let figure = reference.and_then(|x| published(x, &p.label(), &c.cell));
    let compared = figure.and_then(|f| {
        comparisons
            .iter()
            .find(|x| std::ptr::eq(x.figure, f))
            .map(|x| &x.outcome)
    });
    let (ratio, within) = match compared {
        Some(Outcome::Measured { ratio, within, .. }) => {
            (format!("{ratio:.4}"), within.to_string())
        }
        _ => (String::new(), String::new()),
    };
    let basis = match (figure, reference) {
        (Some(f), Some(x)) => Basis::of(x, f).map(Basis::word).unwrap_or_default(),
        (None, Some(x)) if x.marks_calibration => "unpublished",
        _ => "",
    };
    let limit = c.model_limit.as_ref();
    [
        figure
            .map(|f| format!("{:.0}", f.published_bps))
            .unwrap_or_default(),
        ratio,
        within,
        basis.to_string(),
        limit.map(|l| l.what.clone()).unwrap_or_default(),
        limit.map(|l| format!("{:.0}", l.bps)).unwrap_or_default(),
    ]
}

/// Milliseconds to the microsecond.
fn ms(v: f64) -> String {
    format!("{v:.3}")
}

#[cfg(test)]
mod tests {
    use super::super::{Format, fixture, render};
    use super::*;

    /// A small RFC 4180 reader, to check that what we write reads back.
    fn parse(csv: &str) -> Vec<Vec<String>> {
        let mut rows = Vec::new();
        let mut row = Vec::new();
        let mut field = String::new();
        let mut quoted = false;
        let mut chars = csv.chars().peekable();
        while let Some(ch) = chars.next() {
            match (quoted, ch) {
                (true, '"') if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                (true, '"') => quoted = false,
                (true, c) => field.push(c),
                (false, '"') => quoted = true,
                (false, ',') => row.push(std::mem::take(&mut field)),
                (false, '\n') => {
                    row.push(std::mem::take(&mut field));
                    rows.push(std::mem::take(&mut row));
                }
                (false, c) => field.push(c),
            }
        }
        assert!(field.is_empty() && row.is_empty(), "no newline at the end");
        rows
    }

    #[test]
    fn header_and_rows() {
        let csv = render(&fixture::results(), Format::Csv, None);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(
            lines[0],
            "path,scenario,cell,family,protocol,direction,streams,runs,best_bps,median_bps,min_bps,max_bps,udp_rate_bps,lost_percent,udp_received_bps,sender_limited,error,idle_rtt_median_ms,rtt_median_ms,rtt_p90_ms,rtt_p99_ms,rtt_max_ms,forward_median_ms,reverse_median_ms,probe_lost_percent"
        );
        assert_eq!(
            lines[1],
            "raw,,ipv4.tcp.sender,ipv4,tcp,sender,1,3,941000000,939000000,930000000,941000000,,,,,,0.050,,,,,,,"
        );
        assert_eq!(
            lines[3],
            "raw,,ipv4.udp.sender,ipv4,udp,sender,1,3,347000000,340000000,330000000,347000000,350000000,0.9,347000000,false,,0.050,,,,,,,"
        );
        assert_eq!(
            lines[6],
            "raw,,ipv4.tcp.sender.p6,ipv4,tcp,sender,6,3,941000000,940000000,936000000,941000000,,,,,,0.050,4.000,5.200,7.200,10.000,2.000,2.000,0.2"
        );
        // The failed cell: no figures, its error quoted because of the line break.
        assert_eq!(
            lines[11],
            "wg,,ipv6.tcp.sender,ipv6,tcp,sender,1,0,,,,,,,,,\"connecting to [fd00:9::2]:5201:"
        );
        let rows = parse(&csv);
        assert_eq!(rows.len(), 1 + 6 + 5);
        assert!(rows.iter().all(|r| r.len() == 25));
        assert_eq!(
            rows[11][16],
            "connecting to [fd00:9::2]:5201:\nconnection refused"
        );
    }

    #[test]
    fn fields_quoted_where_they_must_be() {
        let mut r = fixture::results();
        r.paths[0].scenario = Some("fast, default".into());
        r.paths[0].path = "say \"raw\"".into();
        r.paths[1].cells[4].error = Some("x\r\ny".into());
        let csv = render(&r, Format::Csv, None);
        assert!(
            csv.contains("\n\"say \"\"raw\"\"\",\"fast, default\",ipv4.tcp.sender,"),
            "{csv}"
        );
        assert!(csv.contains(",\"x\r\ny\","), "{csv}");
        let rows = parse(&csv);
        assert_eq!(rows[1][..2], ["say \"raw\"", "fast, default"]);
        assert_eq!(rows[11][16], "x\r\ny");
    }

    #[test]
    fn model_columns_where_the_reference_marks_calibration() {
        let csv = render(&fixture::calibrated(), Format::Csv, None);
        let rows = parse(&csv);
        let header = format!("{HEADER},{MODEL_HEADER}");
        assert_eq!(rows[0].join(","), header);
        let n = header.split(',').count();
        assert!(
            rows.iter().all(|r| r.len() == n),
            "every row has {n} fields"
        );
        let find = |path: &str, scenario: &str, key: &str| {
            rows.iter()
                .find(|r| r[0] == path && r[1] == scenario && r[2] == key)
                .unwrap_or_else(|| panic!("no row {scenario}/{path} {key}"))[n - 6..]
                .join(",")
        };
        // Calibrated within, calibrated out, a prediction, and cells nobody
        // published with and without a model ceiling.
        assert_eq!(
            find("raw", "fast", "ipv4.tcp.sender"),
            "824000000,1.0000,true,calibrated,,"
        );
        assert_eq!(
            find("raw", "fast", "ipv4.tcp.receiver"),
            "939000000,0.7455,false,calibrated,,"
        );
        assert_eq!(
            find("speedtest", "fast", "ipv6.tcp.receiver"),
            "262000000,0.9504,true,predicted,,"
        );
        assert_eq!(
            find("dslite", "fast", "ipv4.udp.sender"),
            ",,,unpublished,nvr500 fast path ipv4 udp upload ceiling,30120000"
        );
        assert_eq!(
            find("dslite", "fast", "ipv4.udp.receiver"),
            ",,,unpublished,,"
        );

        // A reference that does not mark calibration keeps the old columns;
        // a model ceiling alone brings them, with no basis.
        let mut r = fixture::main_job();
        assert_eq!(render(&r, Format::Csv, None).lines().next(), Some(HEADER));
        r.paths[0].cells[0].model_limit = Some(crate::measure::results::ModelLimit {
            what: "host, receive".into(),
            bps: 941e6,
        });
        let rows = parse(&render(&r, Format::Csv, None));
        assert_eq!(rows[0].join(","), header);
        assert_eq!(
            rows[1][n - 6..].join("|"),
            "941000000|1.0000|true||host, receive|941000000"
        );
    }

    /// Where the lab was placed on several hosts, its columns come last:
    /// the hosts crossed, the underlay's limit and whether the cell reached it.
    #[test]
    fn hosts_columns_where_the_lab_was_placed() {
        let rows = parse(&render(&fixture::placed(), Format::Csv, None));
        assert_eq!(rows[0].join(","), format!("{HEADER},{HOSTS_HEADER}"));
        assert!(rows.iter().all(|r| r.len() == 28));
        let tail = |i: usize| rows[i][25..].join("|");
        // raw ipv4.tcp.sender (best 941) against router -> server's 1000.
        assert_eq!(rows[1][..3].join(","), "raw,,ipv4.tcp.sender");
        assert_eq!(tail(1), "pc -> router -> server|1000000000|true");
        // Its receiver against server -> router's 2000.
        assert_eq!(rows[2][2], "ipv4.tcp.receiver");
        assert_eq!(tail(2), "pc -> router -> server|2000000000|false");
        // A failed cell is not at the underlay's capacity.
        assert_eq!(rows[11][..3].join(","), "wg,,ipv6.tcp.sender");
        assert_eq!(tail(11), "pc -> router -> server|1000000000|false");
    }
}
