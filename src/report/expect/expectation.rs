//! What a parsed `--expect` is: the subject (a cell's figure or two paths'
//! ratio), the operator and the value, with the statistic of the runs it reads.

use crate::measure::results::{CellResult, Latency, Spread};
use crate::vocab::Cell;
use std::fmt;

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Ge,
    Gt,
    Le,
    Lt,
    Eq,
}

impl Op {
    pub fn symbol(self) -> &'static str {
        match self {
            Op::Ge => ">=",
            Op::Gt => ">",
            Op::Le => "<=",
            Op::Lt => "<",
            Op::Eq => "==",
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.symbol())
    }
}

/// Which figure of a cell's runs is compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Statistic {
    #[default]
    Median,
    /// The NVR500 study's rule.
    Best,
    Min,
    Max,
}

impl Statistic {
    pub fn word(self) -> &'static str {
        match self {
            Statistic::Median => "median",
            Statistic::Best => "best",
            Statistic::Min => "min",
            Statistic::Max => "max",
        }
    }

    pub fn of(self, c: &CellResult) -> f64 {
        match self {
            Statistic::Median => c.median_bps,
            Statistic::Best => c.best_bps,
            Statistic::Min => c.min_bps,
            Statistic::Max => c.max_bps,
        }
    }
}

/// What an expectation measures.
#[derive(Debug, Clone, PartialEq)]
pub enum Subject {
    /// `CELL` or `PATH:CELL`: one cell's figure in bit/s, on the baseline path
    /// when `path` is `None`.
    Cell {
        path: Option<String>,
        cell: Cell,
        statistic: Statistic,
    },
    /// `A/B` or `A/B:CELL`: A's figure divided by B's, for one cell or for
    /// every cell both paths have.
    Ratio {
        numerator: String,
        denominator: String,
        cell: Option<Cell>,
        statistic: Statistic,
    },
    /// `[PATH:]CELL.latency[.WAY][.STAT]` or `[PATH:]FAMILY.idle.latency...`:
    /// a latency figure in milliseconds.
    Latency {
        path: Option<String>,
        phase: Phase,
        way: Way,
        percentile: Percentile,
    },
}

/// Which latency phase an expectation reads: under one cell's load, or the
/// path idle (probes alone) for one family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Loaded(Cell),
    Idle(crate::vocab::Family),
}

/// Which delay: the round trip, or one way (out to the target, or back).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Way {
    #[default]
    Rtt,
    Forward,
    Reverse,
}

impl Way {
    pub fn word(self) -> &'static str {
        match self {
            Way::Rtt => "rtt",
            Way::Forward => "forward",
            Way::Reverse => "reverse",
        }
    }

    /// This delay's spread in what the probes saw.
    pub fn of(self, l: &Latency) -> Option<&Spread> {
        match self {
            Way::Rtt => Some(&l.rtt_ms),
            Way::Forward => l.forward_ms.as_ref(),
            Way::Reverse => l.reverse_ms.as_ref(),
        }
    }
}

/// Which figure of a latency spread is compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Percentile {
    #[default]
    Median,
    P90,
    P99,
    Max,
    Min,
    Mean,
}

impl Percentile {
    pub const ALL: [Percentile; 6] = [
        Percentile::Median,
        Percentile::P90,
        Percentile::P99,
        Percentile::Max,
        Percentile::Min,
        Percentile::Mean,
    ];

    pub fn word(self) -> &'static str {
        match self {
            Percentile::Median => "median",
            Percentile::P90 => "p90",
            Percentile::P99 => "p99",
            Percentile::Max => "max",
            Percentile::Min => "min",
            Percentile::Mean => "mean",
        }
    }

    pub fn of(self, s: &Spread) -> f64 {
        match self {
            Percentile::Median => s.median,
            Percentile::P90 => s.p90,
            Percentile::P99 => s.p99,
            Percentile::Max => s.max,
            Percentile::Min => s.min,
            Percentile::Mean => s.mean,
        }
    }
}

/// One parsed `--expect`.
#[derive(Debug, Clone, PartialEq)]
pub struct Expectation {
    pub subject: Subject,
    pub op: Op,
    /// bit/s for a cell, a plain number for a ratio, milliseconds for a latency.
    pub value: f64,
    /// How far from `value` `==` still holds: half a unit of the last digit
    /// written.
    pub tolerance: f64,
    /// As written, for messages: `ipv4.tcp.sender >= 500M`.
    pub text: String,
}

impl fmt::Display for Expectation {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(&self.text)
    }
}
