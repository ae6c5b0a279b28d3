//! The matrix before it is laid out as markdown (`--format md`): the heading
//! line, then rows = cells and per path best, median, min-max (and the UDP
//! rate with its loss), CPU, the latency probes' round trips where they ran,
//! and the ratio columns, with their footnotes and legend. The text report
//! prints views instead ([`crate::report::views`]).

use crate::measure::results::{CellResult, PathResult, Results};
use crate::report::baseline_index;
use crate::report::cells::{loss_within, ordered_cells, step_down_notes, udp_figure};
use crate::report::hosts;
use crate::report::numbers::{mbit, ms, percent, utc};
use crate::report::words::one_line;
use crate::vocab::{Cell, Family, Proto};
use std::fmt::Write;

/// The table before it is laid out: rows = cells; per path best, median,
/// min-max (and the UDP rate with its loss when any cell is UDP); then one ratio
/// column per non-baseline path.
pub(super) struct Matrix {
    /// Column names with the path in front ("raw best"); the first is the cell.
    pub(super) long_columns: Vec<String>,
    pub(super) rows: Vec<Vec<String>>,
    /// Footnotes: the errors of failed cells, referenced as `failed [n]`.
    pub(super) notes: Vec<String>,
    /// What the figures are, in one sentence per line.
    pub(super) legend: Vec<String>,
}

pub(super) fn matrix(r: &Results, baseline: Option<&str>) -> Matrix {
    let mut legend = Vec::new();
    let base = match baseline_index(r, baseline) {
        Ok(i) => i,
        Err(e) => {
            if baseline.is_some() {
                legend.push(format!("Baseline: {e}; using the first path."));
            }
            0
        }
    };
    let cells = ordered_cells(r);
    let shape = Shape::of(r, &cells, base);
    let mut notes = Vec::new();
    let mut across_family = false;
    let rows = cells
        .iter()
        .map(|c| {
            let mut row = vec![c.title()];
            for p in &r.paths {
                row.extend(shape.path_figures(r, p, c, &mut notes));
            }
            row.extend(shape.ratios(r, c, &mut across_family));
            row
        })
        .collect();
    legend.extend(shape.legend(r, across_family));
    Matrix {
        long_columns: shape.columns(r),
        rows,
        notes,
        legend,
    }
}

/// Which path the ratios divide by, and which columns each path gets.
struct Shape {
    base: usize,
    /// The paths with a ratio column, in the results' order.
    others: Vec<usize>,
    /// A UDP figure's column, when any cell is UDP.
    with_udp: bool,
    /// Round trips where the latency probes ran: idle, under the cell's
    /// load, and that load's p99.
    with_latency: bool,
    /// What the links' line rates allow, where the run recorded it.
    with_wire: bool,
}

impl Shape {
    fn of(r: &Results, cells: &[Cell], base: usize) -> Shape {
        let cell_results = || r.paths.iter().flat_map(|p| &p.cells);
        Shape {
            base,
            others: (0..r.paths.len()).filter(|&i| i != base).collect(),
            with_udp: cells.iter().any(|c| c.protocol == Proto::Udp),
            with_latency: r.paths.iter().any(|p| !p.idle_latency.is_empty())
                || cell_results().any(|c| c.latency.is_some()),
            with_wire: cell_results().any(|c| c.wire_limit.is_some()),
        }
    }

    /// Column names with the path in front ("raw best"), then a ratio
    /// column per other path ("wg/raw"); the first is the cell.
    fn columns(&self, r: &Results) -> Vec<String> {
        let mut names: Vec<&str> = vec!["best", "median", "min-max"];
        if self.with_udp {
            names.push("-b / rcvd (loss)");
        }
        names.push("cpu c/s");
        if self.with_latency {
            names.push(RTT_COLUMN);
        }
        if self.with_wire {
            names.push(WIRE_COLUMN);
        }
        let mut columns = vec!["cell".to_string()];
        for p in &r.paths {
            for n in &names {
                columns.push(format!("{} {n}", p.label()));
            }
        }
        for &i in &self.others {
            let base = r.paths[self.base].label();
            columns.push(format!("{}/{base}", r.paths[i].label()));
        }
        columns
    }

    /// Path `p`'s figures for cell `c`, as many as [`Shape::columns`] names
    /// per path; a failed cell's error and a UDP figure's step-downs go to
    /// `notes`, referenced by number. A best run at the underlay's capacity
    /// is marked ([`crate::report::hosts::MARK`]).
    fn path_figures(
        &self,
        r: &Results,
        p: &PathResult,
        c: &Cell,
        notes: &mut Vec<String>,
    ) -> Vec<String> {
        let cr = p.cell(c);
        let mut figures = match cr {
            None => vec!["-".to_string(); 3],
            Some(cr) => match &cr.error {
                Some(e) => {
                    notes.push(format!("{} {}: {}", p.label(), c.title(), one_line(e)));
                    vec![
                        format!("failed [{}]", notes.len()),
                        String::new(),
                        String::new(),
                    ]
                }
                None => vec![
                    format!("{}{}", mbit(cr.best_bps), hosts::mark(r, p, cr)),
                    mbit(cr.median_bps),
                    format!("{}-{}", mbit(cr.min_bps), mbit(cr.max_bps)),
                ],
            },
        };
        let measured = cr.filter(|cr| cr.error.is_none());
        if self.with_udp {
            let figure = measured.and_then(|cr| udp_column(p, cr, notes));
            figures.push(figure.unwrap_or_default());
        }
        // CPU of the client and the server, so a limit of the ends shows.
        figures.push(
            cr.filter(|cr| !cr.runs.is_empty())
                .map(cpu)
                .unwrap_or_default(),
        );
        if self.with_latency {
            figures.push(round_trips(p, c));
        }
        if self.with_wire {
            let limit = cr.and_then(|cr| cr.wire_limit.as_ref());
            figures.push(limit.map(|l| mbit(l.bps)).unwrap_or_default());
        }
        figures
    }

    /// The other paths' medians over the baseline's for cell `c`, "-" where
    /// either has none. A baseline that measures only the other family
    /// (native IPv6 against IPv4 over a softwire, the NVR500 study's DS-Lite
    /// comparison) is compared with its cell of the same protocol, direction
    /// and streams, marked `*` (and `across_family` set).
    fn ratios(&self, r: &Results, c: &Cell, across_family: &mut bool) -> Vec<String> {
        let (of_base, across) = match r.paths.get(self.base) {
            Some(p) => match p.cell(c) {
                Some(b) => (Some(b), false),
                None if !p.cells.iter().any(|x| x.cell.family == c.family) => {
                    let other = Cell {
                        family: match c.family {
                            Family::Ipv4 => Family::Ipv6,
                            Family::Ipv6 => Family::Ipv4,
                        },
                        ..*c
                    };
                    (p.cell(&other), true)
                }
                None => (None, false),
            },
            None => (None, false),
        };
        self.others
            .iter()
            .map(|&i| match (r.paths[i].cell(c), of_base) {
                (Some(a), Some(b))
                    if a.error.is_none() && b.error.is_none() && b.median_bps > 0.0 =>
                {
                    *across_family |= across;
                    format!(
                        "{:.2}{}",
                        a.median_bps / b.median_bps,
                        if across { "*" } else { "" }
                    )
                }
                _ => "-".to_string(),
            })
            .collect()
    }

    /// What the figures are, one sentence a line.
    fn legend(&self, r: &Results, across_family: bool) -> Vec<String> {
        let runs = r.runs_per_cell;
        let mut legend = vec![format!(
            "Mbit/s: best of {runs} run{} (the NVR500 study's rule), median, min-max.",
            if runs == 1 { "" } else { "s" }
        )];
        if self.with_udp {
            let threshold = loss_within(r);
            legend.push(format!(
                "UDP: received rate; -b / rcvd (loss): the figure, the highest offered rate at which a full-length run kept its receiver-side loss{threshold}, then what that run received and lost."
            ));
            let limited = r
                .paths
                .iter()
                .flat_map(|p| &p.cells)
                .filter(|c| c.error.is_none())
                .any(|c| udp_figure(c).is_some_and(|f| f.sender_limited));
            if limited {
                legend.push(
                    "s: the sender could not offer more; that figure is the sending end's limit, not the path's."
                        .to_string(),
                );
            }
        }
        legend.push(
            "cpu c/s: median CPU use of the client and the server, percent of one core."
                .to_string(),
        );
        if self.with_latency {
            legend.push(format!(
                "{RTT_COLUMN}: the latency probes' median round trip with the path idle (that family's), under the cell's load, and that load's p99."
            ));
        }
        if self.with_wire {
            legend.push(format!(
                "{WIRE_COLUMN}: what the shaped links' line rates allow the cell's payload (rate x payload / wire bytes per frame on the tightest link of its way)."
            ));
        }
        let base = || r.paths[self.base].label();
        if !self.others.is_empty() {
            legend.push(format!("Ratios: a path's median divided by {}'s.", base()));
        }
        if across_family {
            legend.push(format!(
                "*: {} measures only the other family; divided by its cell of the same protocol and direction (IPv4 over a softwire against native IPv6).",
                base()
            ));
        }
        legend
    }
}

/// A UDP cell's figure: "350 / 347 (0.9 %)", "s" after a sender-limited
/// rate, and a footnote number where its search stepped down.
fn udp_column(p: &PathResult, cr: &CellResult, notes: &mut Vec<String>) -> Option<String> {
    let f = udp_figure(cr)?;
    let mut s = format!(
        "{}{} / {} ({} %)",
        mbit(f.offered),
        if f.sender_limited { "s" } else { "" },
        mbit(f.received),
        percent(f.loss)
    );
    let steps = step_down_notes(cr);
    if !steps.is_empty() {
        notes.push(format!(
            "{} {}: {}",
            p.label(),
            cr.cell.title(),
            steps.join("; ")
        ));
        s += &format!(" [{}]", notes.len());
    }
    Some(s)
}

const RTT_COLUMN: &str = "RTT ms idle / load / p99";
const WIRE_COLUMN: &str = "wire limit";

/// "0.22 / 2.28 / 4.63"; "-" for a figure the probes did not give.
fn round_trips(p: &PathResult, c: &Cell) -> String {
    let idle = p
        .idle_latency
        .iter()
        .find(|(f, _)| *f == c.family)
        .map(|(_, l)| ms(l.rtt_ms.median));
    let loaded = p
        .cell(c)
        .filter(|cr| cr.error.is_none())
        .and_then(|cr| cr.latency.as_ref());
    if idle.is_none() && loaded.is_none() {
        return String::new();
    }
    let dash = || "-".to_string();
    format!(
        "{} / {} / {}",
        idle.unwrap_or_else(dash),
        loaded.map(|l| ms(l.rtt_ms.median)).unwrap_or_else(dash),
        loaded.map(|l| ms(l.rtt_ms.p99)).unwrap_or_else(dash)
    )
}

fn cpu(cr: &CellResult) -> String {
    let median = |mut v: Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    let c = median(cr.runs.iter().map(|r| r.cpu_client).collect());
    let s = median(cr.runs.iter().map(|r| r.cpu_server).collect());
    format!("{c:.0}/{s:.0}")
}

/// The first line of text and markdown: what was measured, where, when.
pub(crate) fn heading(r: &Results) -> String {
    let mut h = format!("{}: lab {}", r.tool, r.lab);
    if let Some(t) = &r.topology {
        let _ = write!(h, " ({t})");
    }
    if r.started != 0 {
        let _ = write!(h, ", started {}", utc(r.started));
    }
    let _ = write!(
        h,
        ", {} run{} x {} s per cell",
        r.runs_per_cell,
        if r.runs_per_cell == 1 { "" } else { "s" },
        r.duration_per_run
    );
    h
}

#[cfg(test)]
pub(super) mod tests {
    use crate::report::{Format, fixture, render};

    /// The markdown table's row for `title`, its non-empty cells unescaped.
    fn row(md: &str, title: &str) -> Vec<String> {
        let line = md
            .lines()
            .find(|l| l.starts_with(&format!("| {title} ")))
            .unwrap_or_else(|| panic!("no row {title} in\n{md}"));
        line.trim_matches('|')
            .split(" | ")
            .map(|s| s.trim().replace('\\', ""))
            .filter(|s| !s.is_empty())
            .collect()
    }

    #[test]
    fn a_stepped_down_or_sender_limited_udp_figure_says_so() {
        use crate::measure::results::Trial;
        use crate::vocab::Cell;
        let mut r = fixture::results();
        let c = r.paths[0]
            .cells
            .iter_mut()
            .find(|c| c.cell == Cell::parse_key("ipv4.udp.sender").unwrap())
            .unwrap();
        let run = |offered: f64, received: f64| Trial {
            offered_bps: offered * 1e6,
            received_bps: received * 1e6,
            lost_percent: 100.0 * (offered - received) / offered,
            out_of_order: 0,
            remeasured: false,
            sender_limited: false,
            reordered: false,
        };
        // The search found 400; a full-length run there lost 15 %, so 350.
        let s = c.search.as_mut().unwrap();
        s.confirmations = vec![run(400.0, 340.0), run(350.0, 347.0)];
        c.runs[0].sender_limited = true;
        let text = render(&r, Format::Md, None);
        assert_eq!(
            row(&text, "IPv4 UDP Sender")[4],
            "350s / 347 (0.9 %) [1]",
            "{text}"
        );
        assert!(
            text.contains("\n- \\[1\\] raw IPv4 UDP Sender: a full-length run at 400 Mbit/s received 340 and lost 15.0 % (over 10 %): stepped down to 350 Mbit/s\n"),
            "{text}"
        );
        assert!(
            text.contains("\ns: the sender could not offer more;"),
            "{text}"
        );
        assert!(!render(&fixture::results(), Format::Md, None).contains("\ns: "));
    }

    #[test]
    fn a_figure_lowered_for_persisting_reordering_says_so_in_every_format() {
        use crate::measure::results::Trial;
        use crate::vocab::Cell;
        let mut r = fixture::results();
        let c = r.paths[0]
            .cells
            .iter_mut()
            .find(|c| c.cell == Cell::parse_key("ipv4.udp.sender").unwrap())
            .unwrap();
        let run = |offered: f64, ooo: u64, remeasured: bool| Trial {
            offered_bps: offered * 1e6,
            received_bps: offered * 1e6,
            lost_percent: 0.0,
            out_of_order: ooo,
            remeasured,
            sender_limited: false,
            reordered: remeasured && ooo > 0,
        };
        // 400 reordered twice in the search (it bisected below), and at 350 a
        // full-length run reordered twice, so 332.
        let s = c.search.as_mut().unwrap();
        s.trials = vec![
            run(100.0, 0, false),
            run(400.0, 12, false),
            run(400.0, 30, true),
            run(350.0, 0, false),
        ];
        s.confirmations = vec![
            run(350.0, 1225, false),
            run(350.0, 5321, true),
            run(332.0, 0, false),
        ];
        let search_note = "the search trial at 400 Mbit/s had 12 datagrams out of order, and 30 again when measured again (the reordering persisted): it failed there";
        let run_note = "a full-length run at 350 Mbit/s had 1225 datagrams out of order, and 5321 again when measured again (the reordering persisted): stepped down to 332 Mbit/s";
        for format in [Format::Md, Format::Text, Format::Html] {
            // Text wraps its notes at 120 columns.
            let text = render(&r, format, None)
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            for note in [search_note, run_note] {
                assert!(text.contains(note), "{format:?} lacks \"{note}\":\n{text}");
            }
        }
        // Reordering once, then a clean run: nothing to say.
        let c = r.paths[0]
            .cells
            .iter_mut()
            .find(|c| c.cell == Cell::parse_key("ipv4.udp.sender").unwrap())
            .unwrap();
        let s = c.search.as_mut().unwrap();
        s.trials = vec![run(400.0, 12, false), run(400.0, 0, true)];
        s.confirmations = vec![run(350.0, 3, false), run(350.0, 0, true)];
        assert!(!render(&r, Format::Md, None).contains("out of order"));
    }

    #[test]
    fn matrix_rows_ratios_udp_and_failures() {
        let text = render(&without_probes(fixture::results()), Format::Md, None);
        assert_eq!(
            row(&text, "IPv4 TCP Sender"),
            [
                "IPv4 TCP Sender",
                "941",
                "939",
                "930-941",
                "20/30",
                "292",
                "290",
                "280-292",
                "20/30",
                "0.31"
            ]
        );
        assert_eq!(
            row(&text, "IPv4 TCP Receiver"),
            [
                "IPv4 TCP Receiver",
                "940",
                "938",
                "936-940",
                "20/30",
                "470",
                "469",
                "468-470",
                "20/30",
                "0.50"
            ]
        );
        assert_eq!(
            row(&text, "IPv4 UDP Sender"),
            [
                "IPv4 UDP Sender",
                "347",
                "340",
                "330-347",
                "350 / 347 (0.9 %)",
                "40/90",
                "118",
                "115",
                "110-118",
                "120 / 118 (1.5 %)",
                "40/90",
                "0.34"
            ]
        );
        assert_eq!(
            row(&text, "IPv6 TCP Sender"),
            [
                "IPv6 TCP Sender",
                "928",
                "925",
                "920-928",
                "20/30",
                "failed [1]",
                "-"
            ]
        );
        assert_eq!(
            row(&text, "IPv4 TCP Sender x6"),
            [
                "IPv4 TCP Sender x6",
                "941",
                "940",
                "936-941",
                "20/30",
                "-",
                "-",
                "-",
                "-"
            ]
        );
        assert!(text.contains(
            "\n- \\[1\\] wg IPv6 TCP Sender: connecting to \\[fd00:9::2\\]:5201: connection refused\n"
        ));
        assert!(text.contains("Ratios: a path's median divided by raw's.\n"));
        assert!(text.contains("loss within 10 %"));
    }

    #[test]
    fn another_baseline_turns_the_ratios() {
        let text = render(&fixture::results(), Format::Md, Some("wg"));
        let r = row(&text, "IPv4 TCP Sender");
        assert_eq!(r.last().map(String::as_str), Some("3.24"), "{text}");
        assert!(text.contains("raw/wg"));
        let text = render(&fixture::results(), Format::Md, Some("gre"));
        assert!(text.contains("Baseline: no path gre; paths: raw, wg; using the first path."));
        assert!(text.contains("wg/raw"));
    }

    #[test]
    fn a_baseline_of_the_other_family_is_compared_across_families() {
        use crate::vocab::Family;
        let mut r = fixture::results();
        // raw: native IPv6 only; wg: IPv4 only (a softwire's path).
        r.paths[0].cells.retain(|c| c.cell.family == Family::Ipv6);
        r.paths[1].cells.retain(|c| c.cell.family == Family::Ipv4);
        let text = render(&r, Format::Md, None);
        let v4 = row(&text, "IPv4 TCP Sender");
        assert!(v4.last().is_some_and(|x| x.ends_with('*')), "{text}");
        assert!(
            text.contains("\n*: raw measures only the other family"),
            "{text}"
        );
        let v6 = row(&text, "IPv6 TCP Sender");
        assert_eq!(v6.last().map(String::as_str), Some("-"), "{text}");
    }

    #[test]
    fn one_path_has_no_ratio_columns() {
        let mut r = without_probes(fixture::results());
        r.paths.truncate(1);
        let text = render(&r, Format::Md, None);
        assert!(!text.contains("ratio"), "{text}");
        assert_eq!(
            row(&text, "IPv4 TCP Sender"),
            ["IPv4 TCP Sender", "941", "939", "930-941", "20/30"]
        );
        r.paths.clear();
        assert!(render(&r, Format::Md, None).ends_with("\nno paths measured\n"));
        assert!(render(&r, Format::Text, None).ends_with("\nno paths measured\n"));
    }

    #[test]
    fn round_trips_get_a_column_where_the_probes_ran() {
        use crate::report::fixture;
        let mut r = fixture::main_job();
        let p = &mut r.paths[0];
        let label = p.label();
        let c = p.cells[0].cell;
        let idle = p
            .idle_latency
            .iter()
            .find(|(f, _)| *f == c.family)
            .map(|(_, l)| l.rtt_ms.median)
            .expect("the fixture's idle round trips");
        let loaded = p.cells[0]
            .latency
            .clone()
            .expect("the fixture's loaded ones");
        let md = render(&r, Format::Md, None);
        assert!(
            md.contains(&format!("| {label} RTT ms idle / load / p99 ")),
            "{md}"
        );
        let want = format!(
            "{} / {} / {}",
            crate::report::numbers::ms(idle),
            crate::report::numbers::ms(loaded.rtt_ms.median),
            crate::report::numbers::ms(loaded.rtt_ms.p99)
        );
        assert!(
            md.lines()
                .any(|l| l.starts_with(&format!("| {} ", c.title())) && l.contains(&want)),
            "no {want} in\n{md}"
        );
        assert!(
            md.contains("\nRTT ms idle / load / p99: the latency probes'"),
            "{md}"
        );
        // Results without probes (saved before there were any) have no such column.
        assert!(!render(&without_probes(r), Format::Md, None).contains("RTT ms"));
    }

    /// Results as saved before the latency probes: no round-trip column.
    pub(in crate::report::table) fn without_probes(
        mut r: crate::measure::results::Results,
    ) -> crate::measure::results::Results {
        for p in &mut r.paths {
            p.idle_latency.clear();
            for c in &mut p.cells {
                c.latency = None;
            }
        }
        r
    }
}
