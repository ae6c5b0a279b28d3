//! A column of a view's table: its header, its alignment, and how it writes
//! a row's figure.

use super::{Row, Verdict};
use crate::report::numbers::{ceiling, mbit, ms, percent, plain};
use crate::report::reference::Basis;

/// A column of a view's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    /// The cell's title ("IPv4 TCP Sender"), printed where it changes.
    Cell,
    /// The path, printed where it changes in the published view.
    Path,
    Published,
    /// The NVR500 study's figure, UDP with what its run received and lost.
    Measured,
    /// Median Mbit/s.
    Rate,
    Ratio,
    Verdict,
    /// `calibrated` or `predicted`.
    Basis,
    /// The device-model ceiling that limits the cell: what it is and its rate.
    LimitedBy,
    /// The wire limit's Mbit/s.
    WireLimit,
    /// The rate over the wire limit: what the datapath costs.
    OfWire,
    /// The wire limit over the baseline's: what a tunnel's bytes cost.
    WireOfRaw,
    /// UDP: offered rate (loss).
    Udp,
    Overhead,
    IdleMs,
    LoadedMs,
    LoadedP99Ms,
    IncreaseMs,
}

impl Column {
    pub fn header(self) -> &'static str {
        match self {
            Column::Cell => "cell",
            Column::Path => "path",
            Column::Published => "published",
            Column::Measured => "measured",
            Column::Rate => "Mbit/s",
            Column::Ratio => "ratio",
            Column::Verdict => "tolerance",
            Column::Basis => "basis",
            Column::LimitedBy => "limited by",
            Column::WireLimit => "wire limit",
            Column::OfWire => "/wire",
            Column::WireOfRaw => "wire/raw",
            Column::Udp => "-b (loss)",
            Column::Overhead => "B/pkt",
            Column::IdleMs => "idle",
            Column::LoadedMs => "load",
            Column::LoadedP99Ms => "p99",
            Column::IncreaseMs => "+load",
        }
    }

    /// Text columns are left-aligned; figures right-aligned.
    pub fn left(self) -> bool {
        matches!(
            self,
            Column::Cell | Column::Path | Column::Verdict | Column::Basis | Column::LimitedBy
        )
    }

    /// The row's value in this column as the text report writes it; a failed
    /// cell's rate is "failed" (the layout adds its footnote).
    pub fn text(self, row: &Row) -> String {
        let f = &row.figures;
        let opt = |v: Option<String>| v.unwrap_or_default();
        match self {
            Column::Cell => row.cell.title(),
            Column::Path => row.short.clone(),
            Column::Published => opt(f.published_bps.map(|b| plain(b / 1e6))),
            Column::Measured => match (&f.verdict, f.rate_bps) {
                (Some(Verdict::NotMeasured | Verdict::Failed), _) | (_, None) => "-".into(),
                (_, Some(bps)) => match &f.udp {
                    Some(u) => format!(
                        "{}{}{} ({} rcvd, {} % lost)",
                        mbit(bps),
                        underlay_mark(f),
                        if u.sender_limited {
                            " sender-limited"
                        } else {
                            ""
                        },
                        mbit(u.received),
                        percent(u.loss)
                    ),
                    None => format!("{}{}", mbit(bps), underlay_mark(f)),
                },
            },
            Column::Rate => match (&f.failed, f.rate_bps) {
                (Some(_), _) => "failed".into(),
                (None, Some(b)) => format!("{}{}", mbit(b), underlay_mark(f)),
                (None, None) => "-".into(),
            },
            Column::Ratio => match f.ratio {
                Some(x) if x.is_finite() => {
                    format!("{x:.2}{}", if f.across_family { "*" } else { "" })
                }
                Some(_) => "?".into(),
                None if row.baseline.is_some() || f.published_bps.is_some() => "-".into(),
                None => String::new(),
            },
            Column::Verdict => match &f.verdict {
                None => String::new(),
                Some(Verdict::Within) => "ok".into(),
                Some(Verdict::Out(d)) => format!("OUT ({d} %)"),
                Some(Verdict::NotMeasured) => "not measured".into(),
                Some(Verdict::Failed) => "failed".into(),
            },
            Column::Basis => match (f.basis, f.line_rate) {
                (Some(Basis::Calibrated), _) | (_, None) => opt(f.basis.map(|b| b.word().into())),
                (_, Some(w)) => format!("predicted (line rate {})", mbit(w)),
            },
            Column::LimitedBy => opt(f
                .model_limit
                .as_ref()
                .map(|l| format!("{} {}", l.what, ceiling(l.bps)))),
            Column::WireLimit => opt(f.wire_limit.as_ref().map(|l| mbit(l.bps))),
            Column::OfWire => opt(f.wire_limit.as_ref().and_then(|l| {
                let rate = f.rate_bps.filter(|_| f.failed.is_none())?;
                Some(format!("{:.2}", rate / l.bps))
            })),
            Column::WireOfRaw => opt(f
                .wire_limit
                .as_ref()
                .and_then(|l| Some(format!("{:.2}", l.bps / f.baseline_wire_bps?)))),
            Column::Udp => opt(f.udp.filter(|_| f.failed.is_none()).map(|u| {
                format!(
                    "{}{} ({} %)",
                    mbit(u.offered),
                    if u.sender_limited { "s" } else { "" },
                    percent(u.loss)
                )
            })),
            Column::Overhead => opt(f.overhead_bytes.map(|(lo, hi)| {
                if lo == hi {
                    lo.to_string()
                } else {
                    format!("{lo}-{hi}")
                }
            })),
            Column::IdleMs => opt(f.idle_rtt.as_ref().map(|s| ms(s.median))),
            Column::LoadedMs => opt(f.loaded_rtt.as_ref().map(|s| ms(s.median))),
            Column::LoadedP99Ms => opt(f.loaded_rtt.as_ref().map(|s| ms(s.p99))),
            Column::IncreaseMs => opt(f.increase_ms().map(|d| {
                let s = ms(d.abs());
                if d < 0.0 {
                    format!("-{s}")
                } else {
                    format!("+{s}")
                }
            })),
        }
    }
}

/// [`crate::report::hosts::MARK`] after a rate that reached the underlay's
/// capacity.
fn underlay_mark(f: &super::Figures) -> &'static str {
    if f.at_underlay {
        crate::report::hosts::MARK
    } else {
        ""
    }
}
