//! Reports: what a person reads and what a CI checks, all rendered from
//! [`Results`] and nothing else, so `tunbench report RESULTS.json` re-renders a
//! saved measurement exactly as the measuring run would have.
//!
//! - `text`: where each path goes, then one view per question the paths
//!   answer ([`views`]: published vs measured, the model's predictions for
//!   cells nobody published, a path across scenarios, tunnels against the raw
//!   path, IPv4 against IPv6, the other paths), each within
//!   120 columns, then the results' notes.
//! - `md`: the full matrix as GitHub markdown: rows = cells, per path the best,
//!   median and min-max (and for UDP the searched rate and its loss), then
//!   ratio columns `PATH/BASELINE` of the medians; then the published figures
//!   ([`mod@reference`]), the model's predictions where the reference marks
//!   calibration, and the notes.
//! - `csv`: one row per (path, cell), every figure in bit/s; with the
//!   published figure, its basis (calibrated or predicted) and the model's
//!   ceiling where the reference marks calibration or cells carry a ceiling.
//! - `json`: [`Results`] itself; [`load`] reads it back.
//! - `svg`: a grouped bar chart of the medians with min-max whiskers.
//! - `html`: one self-contained page ([`html`]): every view with its charts
//!   ([`chart`]: bars, latency box plots, rate and round trips over time) and
//!   table, the notes, the topology's graph.
//!
//! [`expect`] parses and checks CI expectations (`--expect`);
//! [`reference::check`] is `--expect-reference`.
//!
//! Every rendering ends with a newline.

pub mod chart;
mod csv;
mod draw;
pub mod expect;
pub mod graph;
pub mod html;
mod md;
pub mod reference;
mod svg;
mod table;
pub mod views;
mod wire;

use crate::measure::model::{CellResult, Results, Trial};

use crate::vocab::{Cell, Direction, Family, Proto};
use std::path::{Path, PathBuf};

/// The output formats of `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Format {
    /// One view per question the paths answer, each within 120 columns.
    Text,
    /// The saved form; `tunbench report` reads it back.
    Json,
    /// One row per path and cell, figures in bit/s.
    Csv,
    /// The full matrix as GitHub markdown, then the published figures.
    Md,
    /// A grouped bar chart (cells x paths) of the medians, whiskers for min-max.
    Svg,
    /// One self-contained page: every view's charts and table, the notes, the
    /// topology's graph.
    Html,
}

/// Render `r` in format `f`. `baseline` is the label of the path
/// ([`PathResult::label`](crate::measure::model::PathResult::label)) that ratio
/// columns divide by; the first path when `None`. A baseline that names no path
/// falls back to the first path with a note in the output: check it first with
/// [`baseline_index`] to reject it as bad input.
pub fn render(r: &Results, f: Format, baseline: Option<&str>) -> String {
    match f {
        Format::Text => table::text(r, baseline),
        Format::Md => table::markdown(r, baseline),
        Format::Csv => csv::render(r),
        Format::Json => json(r),
        Format::Svg => svg::render(r),
        Format::Html => html::page(
            r,
            baseline,
            Err("it was not given to this rendering".into()),
        ),
    }
}

/// The index of the baseline path: the path labelled `baseline`, or the first
/// path when `None`. The error names the unknown label and lists the paths.
pub fn baseline_index(r: &Results, baseline: Option<&str>) -> Result<usize, String> {
    match baseline {
        None if r.paths.is_empty() => Err("no paths in the results".to_string()),
        None => Ok(0),
        Some(b) => r
            .paths
            .iter()
            .position(|p| p.label() == b)
            .ok_or_else(|| format!("no path {b}; paths: {}", path_list(r))),
    }
}

fn json(r: &Results) -> String {
    // Results derives Serialize, has no maps and so no non-string keys: this
    // cannot fail (non-finite floats are written as null).
    let mut s = serde_json::to_string_pretty(r).expect("Results always serialises");
    s.push('\n');
    s
}

/// Why saved results could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("reading results from {}: {error}", path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error(
        "{}:{line}:{column}: not tunbench results: {message} \
         (expected the JSON that `tunbench measure --format json` writes)",
        path.display()
    )]
    Parse {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
}

/// Read results saved with `--format json`.
pub fn load(path: impl AsRef<Path>) -> Result<Results, LoadError> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).map_err(|error| LoadError::Read {
        path: path.to_path_buf(),
        error,
    })?;
    parse_json(&text, path)
}

/// Parse saved results; `path` only names them in errors.
pub fn parse_json(text: &str, path: &Path) -> Result<Results, LoadError> {
    serde_json::from_str(text).map_err(|e| {
        // serde_json appends " at line L column C" to its message; the location
        // is already in front.
        let full = e.to_string();
        let message = match full.rfind(" at line ") {
            Some(i) => full[..i].to_string(),
            None => full,
        };
        LoadError::Parse {
            path: path.to_path_buf(),
            line: e.line(),
            column: e.column(),
            message,
        }
    })
}

/// A finished cell in a few words, for a progress line: "941 Mbit/s median
/// (best 950)", a UDP cell with its offered rate and loss, latency under
/// load where it was measured, or why the cell failed.
pub fn cell_summary(c: &CellResult) -> String {
    if let Some(e) = &c.error {
        return format!("failed: {}", one_line(e));
    }
    let mut s = match udp_figure(c) {
        Some(u) => format!(
            "{} Mbit/s median at -b {}{} ({} % lost)",
            mbit(c.median_bps),
            mbit(u.offered),
            if u.sender_limited {
                ", sender-limited"
            } else {
                ""
            },
            percent(u.loss)
        ),
        None => format!(
            "{} Mbit/s median (best {})",
            mbit(c.median_bps),
            mbit(c.best_bps)
        ),
    };
    if let Some(l) = &c.latency {
        if l.received == 0 && l.sent > 0 {
            // No round trip to summarise: a 0 would read as a fast path.
            s += &format!(", RTT under load: all {} probes lost", l.sent);
        } else {
            s += &format!(
                ", RTT under load {} ms (p99 {})",
                views::ms(l.rtt_ms.median),
                views::ms(l.rtt_ms.p99)
            );
        }
    }
    s
}

// ---- shared by the formats ----

/// Every cell of any path, in the seed's order: IPv4 TCP Sender, IPv4 TCP
/// Receiver, IPv4 UDP Sender, IPv4 UDP Receiver, IPv6 ...; cells with more
/// streams after those with one.
pub(crate) fn ordered_cells(r: &Results) -> Vec<Cell> {
    let mut cells: Vec<Cell> = Vec::new();
    for p in &r.paths {
        for c in &p.cells {
            if !cells.contains(&c.cell) {
                cells.push(c.cell);
            }
        }
    }
    cells.sort_by_key(seed_order);
    cells
}

pub(crate) fn seed_order(c: &Cell) -> (u32, Family, Proto, Direction) {
    (c.streams, c.family, c.protocol, c.direction)
}

pub(crate) fn path_list(r: &Results) -> String {
    if r.paths.is_empty() {
        return "(none)".to_string();
    }
    r.paths
        .iter()
        .map(|p| p.label())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The offered rate the UDP runs were made at: the search's result, or the
/// runs' own `-b` when there was no search.
pub(crate) fn udp_rate(c: &CellResult) -> Option<f64> {
    if c.cell.protocol != Proto::Udp {
        return None;
    }
    c.search
        .as_ref()
        .map(|s| s.rate_bps)
        .or_else(|| c.runs.iter().find_map(|r| r.offered_bps))
}

/// The run a UDP cell's figure came from: the rate offered, what arrived,
/// and the receiver-side loss, so no figure stands without what the path
/// carried at it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UdpFigure {
    pub offered: f64,
    pub received: f64,
    pub loss: f64,
    /// The sender could not offer more: the figure is its limit, not the path's.
    pub sender_limited: bool,
}

/// The best run at the cell's rate (the seed's rule), or, in results that
/// carry no loss in their runs, the search's trial at that rate.
pub(crate) fn udp_figure(c: &CellResult) -> Option<UdpFigure> {
    let rate = udp_rate(c)?;
    let best = c
        .runs
        .iter()
        .filter(|r| r.offered_bps == Some(rate) && r.lost_percent.is_some())
        .max_by(|a, b| a.bits_per_second.total_cmp(&b.bits_per_second));
    if let Some(r) = best {
        return Some(UdpFigure {
            offered: rate,
            received: r.bits_per_second,
            loss: r.lost_percent.unwrap_or_default(),
            sender_limited: r.sender_limited,
        });
    }
    let s = c.search.as_ref()?;
    s.trials
        .iter()
        .rev()
        .find(|t| t.offered_bps == rate)
        .map(|t| UdpFigure {
            offered: rate,
            received: t.received_bps,
            loss: t.lost_percent,
            sender_limited: t.sender_limited,
        })
}

/// What a UDP cell's search and confirmation did beyond their plain runs, for
/// the notes under a report: the search trials failed for reordering that
/// persisted (the search went below them), and the full-length runs over the
/// loss threshold or reordered again, with the rate each stepped down to.
pub(crate) fn step_down_notes(c: &CellResult) -> Vec<String> {
    let Some(s) = &c.search else {
        return Vec::new();
    };
    // "N datagrams out of order, and M again when measured again": the trial
    // before a reordered one is the first measurement at its rate.
    let again = |list: &[Trial], t: &Trial| {
        let i = list.iter().position(|x| std::ptr::eq(x, t)).unwrap_or(0);
        let first = i.checked_sub(1).map_or(0, |j| list[j].out_of_order);
        format!(
            "{} datagrams out of order, and {} again when measured again (the reordering persisted)",
            first, t.out_of_order
        )
    };
    let mut notes: Vec<String> = s
        .trials
        .iter()
        .filter(|t| t.reordered)
        .map(|t| {
            format!(
                "the search trial at {} Mbit/s had {}: it failed there",
                mbit(t.offered_bps),
                again(&s.trials, t)
            )
        })
        .collect();
    notes.extend(s.step_downs().into_iter().map(|(t, next)| {
        let then = match next {
            Some(n) => format!("stepped down to {} Mbit/s", mbit(n)),
            None => "no step-down left".to_string(),
        };
        if t.reordered {
            format!(
                "a full-length run at {} Mbit/s had {}: {then}",
                mbit(t.offered_bps),
                again(&s.confirmations, t)
            )
        } else {
            format!(
                "a full-length run at {} Mbit/s received {} and lost {} % (over {} %): {then}",
                mbit(t.offered_bps),
                mbit(t.received_bps),
                percent(t.lost_percent),
                s.loss_threshold_percent
            )
        }
    }));
    notes
}

/// " within N %": the UDP loss threshold of the run's rate searches, for
/// legends; empty when no cell searched.
pub(crate) fn loss_within(r: &Results) -> String {
    r.paths
        .iter()
        .flat_map(|p| &p.cells)
        .find_map(|c| c.search.as_ref())
        .map(|s| format!(" within {} %", s.loss_threshold_percent))
        .unwrap_or_default()
}

/// `x` rounded to `digits` significant digits, written without exponent and
/// with no more decimals than those digits need: 941, 32.7, 12400, 0.123.
pub(crate) fn sig(x: f64, digits: u32) -> String {
    if !x.is_finite() {
        return "?".to_string();
    }
    if x == 0.0 {
        return "0".to_string();
    }
    let magnitude = |v: f64| v.abs().log10().floor() as i32;
    let step = 10f64.powi(magnitude(x) - digits as i32 + 1);
    let rounded = (x / step).round() * step;
    let decimals = (digits as i32 - 1 - magnitude(rounded)).max(0) as usize;
    format!("{rounded:.decimals$}")
}

/// The seed's unit: Mbit/s to three significant digits.
pub(crate) fn mbit(bps: f64) -> String {
    sig(bps / 1e6, 3)
}

/// A rate in the unit that suits it: "412.3 Mbit/s", "12.43 Gbit/s".
pub(crate) fn rate(bps: f64, digits: u32) -> String {
    let (v, unit) = rate_unit(bps.abs());
    format!("{} {unit}", sig(bps / v, digits))
}

/// The divisor and name of the unit that suits a rate of `bps`.
pub(crate) fn rate_unit(bps: f64) -> (f64, &'static str) {
    if bps >= 1e9 {
        (1e9, "Gbit/s")
    } else if bps >= 1e6 {
        (1e6, "Mbit/s")
    } else if bps >= 1e3 {
        (1e3, "Kbit/s")
    } else {
        (1.0, "bit/s")
    }
}

/// A percentage: one decimal, more when it is small ("17.5", "0.042").
pub(crate) fn percent(p: f64) -> String {
    if p != 0.0 && p.abs() < 0.1 {
        sig(p, 2)
    } else {
        format!("{p:.1}")
    }
}

/// An error message on one line.
pub(crate) fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Unix seconds as a UTC date and time: "2020-02-01 12:30 UTC".
pub(crate) fn utc(unix: u64) -> String {
    let days = (unix / 86_400) as i64;
    let secs = unix % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        secs / 3600,
        secs % 3600 / 60
    )
}

#[cfg(test)]
pub(crate) mod fixture;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn significant_digits_like_the_seed() {
        for (x, want) in [
            (941.4, "941"),
            (32.71, "32.7"),
            (12_431.0, "12400"),
            (0.1234, "0.123"),
            (99.96, "100"),
            (30.0, "30.0"),
            (5.0, "5.00"),
            (0.0, "0"),
            (f64::NAN, "?"),
        ] {
            assert_eq!(sig(x, 3), want, "{x}");
        }
        assert_eq!(mbit(941e6), "941");
        assert_eq!(rate(412.3e6, 4), "412.3 Mbit/s");
        assert_eq!(rate(12.431e9, 4), "12.43 Gbit/s");
        assert_eq!(rate(950.0, 3), "950 bit/s");
        assert_eq!(percent(17.54), "17.5");
        assert_eq!(percent(0.042), "0.042");
        assert_eq!(percent(0.0), "0.0");
    }

    #[test]
    fn cells_in_the_seeds_order() {
        let r = fixture::results();
        let keys: Vec<String> = ordered_cells(&r).iter().map(|c| c.key()).collect();
        assert_eq!(
            keys,
            [
                "ipv4.tcp.sender",
                "ipv4.tcp.receiver",
                "ipv4.udp.sender",
                "ipv4.udp.receiver",
                "ipv6.tcp.sender",
                "ipv4.tcp.sender.p6",
            ]
        );
        let c = |f, p, d, s| Cell {
            family: f,
            protocol: p,
            direction: d,
            streams: s,
        };
        let mut v = [
            c(Family::Ipv6, Proto::Udp, Direction::Receiver, 1),
            c(Family::Ipv4, Proto::Tcp, Direction::Sender, 6),
            c(Family::Ipv6, Proto::Tcp, Direction::Sender, 1),
            c(Family::Ipv4, Proto::Udp, Direction::Receiver, 1),
        ];
        v.sort_by_key(seed_order);
        let titles: Vec<String> = v.iter().map(|c| c.title()).collect();
        assert_eq!(
            titles,
            [
                "IPv4 UDP Receiver",
                "IPv6 TCP Sender",
                "IPv6 UDP Receiver",
                "IPv4 TCP Sender x6"
            ]
        );
    }

    #[test]
    fn udp_rate_and_loss() {
        let r = fixture::results();
        let c = r.paths[0]
            .cell(&Cell::parse_key("ipv4.udp.sender").unwrap())
            .unwrap();
        assert_eq!(udp_rate(c), Some(350e6));
        // The best run at that rate: 347 received, 0.9 % lost.
        assert_eq!(
            udp_figure(c),
            Some(UdpFigure {
                offered: 350e6,
                received: 347e6,
                loss: 0.9,
                sender_limited: false
            })
        );
        // No loss in the runs: the search's trial at the final rate.
        let mut bare = c.clone();
        for run in &mut bare.runs {
            run.lost_percent = None;
        }
        assert_eq!(udp_figure(&bare).unwrap().loss, 4.0);
        assert_eq!(udp_figure(&bare).unwrap().received, 350e6 * 0.96);
        let tcp = r.paths[0]
            .cell(&Cell::parse_key("ipv4.tcp.sender").unwrap())
            .unwrap();
        assert_eq!((udp_rate(tcp), udp_figure(tcp)), (None, None));
    }

    #[test]
    fn a_finished_cell_in_a_few_words() {
        let r = fixture::results();
        let cell = |p: usize, k: &str| r.paths[p].cell(&Cell::parse_key(k).unwrap()).unwrap();
        assert_eq!(
            cell_summary(cell(0, "ipv4.tcp.sender")),
            "939 Mbit/s median (best 941)"
        );
        assert_eq!(
            cell_summary(cell(0, "ipv4.udp.sender")),
            "340 Mbit/s median at -b 350 (0.9 % lost)"
        );
        assert_eq!(
            cell_summary(cell(0, "ipv6.tcp.sender")),
            "925 Mbit/s median (best 928), RTT under load 3.50 ms (p99 6.30)"
        );
        assert_eq!(
            cell_summary(cell(1, "ipv6.tcp.sender")),
            "failed: connecting to [fd00:9::2]:5201: connection refused"
        );
        // Probes that all went unanswered say so, not a round trip of 0.
        let mut lost = cell(0, "ipv6.tcp.sender").clone();
        let l = lost.latency.as_mut().unwrap();
        l.received = 0;
        let sent = l.sent;
        assert_eq!(
            cell_summary(&lost),
            format!("925 Mbit/s median (best 928), RTT under load: all {sent} probes lost")
        );
    }

    #[test]
    fn dates_in_utc() {
        assert_eq!(utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc(1_580_560_200), "2020-02-01 12:30 UTC");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00 UTC");
    }

    #[test]
    fn json_round_trips() {
        let r = fixture::results();
        let s = render(&r, Format::Json, None);
        assert!(s.ends_with("}\n"));
        let back = parse_json(&s, Path::new("r.json")).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn load_names_the_file_and_the_problem() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.json");
        let e = load(&missing).unwrap_err().to_string();
        assert!(e.starts_with("reading results from "), "{e}");
        assert!(e.contains("missing.json"), "{e}");

        let iperf = dir.path().join("iperf3.json");
        std::fs::write(&iperf, "{\n  \"start\": {}\n}\n").unwrap();
        let e = load(&iperf).unwrap_err().to_string();
        assert!(
            e.contains("iperf3.json:3:1: not tunbench results: missing field `tool`"),
            "{e}"
        );
        assert!(e.contains("tunbench measure --format json"), "{e}");

        let broken = dir.path().join("broken.json");
        std::fs::write(&broken, "{\"tool\": ").unwrap();
        let e = load(&broken).unwrap_err().to_string();
        assert!(
            e.contains("broken.json:1:9: not tunbench results: EOF"),
            "{e}"
        );

        let good = dir.path().join("good.json");
        std::fs::write(&good, render(&fixture::results(), Format::Json, None)).unwrap();
        assert_eq!(load(&good).unwrap(), fixture::results());
    }

    #[test]
    fn baseline_by_label() {
        let r = fixture::results();
        assert_eq!(baseline_index(&r, None), Ok(0));
        assert_eq!(baseline_index(&r, Some("wg")), Ok(1));
        assert_eq!(
            baseline_index(&r, Some("gre")),
            Err("no path gre; paths: raw, wg".to_string())
        );
    }
}

#[cfg(test)]
mod print_for_a_look {
    #[test]
    #[ignore]
    fn print() {
        let r = super::fixture::results();
        for f in [super::Format::Text, super::Format::Md, super::Format::Csv] {
            println!("=====\n{}", super::render(&r, f, None));
        }
    }
}
