//! What the latency probes saw and its statistics: each echo's [`Sample`],
//! a phase's [`Probes`] (pooled across phases), and the [`Latency`] figures
//! made from them, round trips and one-way delays as [`Spread`]s.

use serde::{Deserialize, Serialize};

/// A latency sample's spread, in milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub samples: u64,
    pub min: f64,
    pub median: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

impl Spread {
    /// The spread of `values` (milliseconds); `None` when there are none.
    /// Percentiles interpolate linearly between the ranks around them.
    pub fn of(values: &[f64]) -> Option<Spread> {
        if values.is_empty() {
            return None;
        }
        let mut v = values.to_vec();
        v.sort_by(|a, b| a.total_cmp(b));
        let at = |q: f64| {
            let x = q * (v.len() - 1) as f64;
            let (lo, hi) = (x.floor() as usize, x.ceil() as usize);
            v[lo] + (v[hi] - v[lo]) * (x - lo as f64)
        };
        Some(Spread {
            samples: v.len() as u64,
            min: v[0],
            median: at(0.5),
            p90: at(0.9),
            p99: at(0.99),
            max: v[v.len() - 1],
            mean: v.iter().sum::<f64>() / v.len() as f64,
        })
    }
}

/// What the latency probes (small isochronous UDP datagrams, echoed by the
/// server) saw over one phase: the path idle, or under one cell's load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// Probes per second.
    pub rate: f64,
    pub sent: u64,
    /// Echoes that came back.
    pub received: u64,
    pub lost_percent: f64,
    /// Probes or echoes that arrived after a later one.
    pub reordered: u64,
    /// Round-trip time.
    pub rtt_ms: Spread,
    /// One-way delay from the measuring node to the target (the upload
    /// direction) and back. Exact in a lab, where every namespace shares one
    /// clock; `None` toward a server outside the lab, where only RTT holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forward_ms: Option<Spread>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reverse_ms: Option<Spread>,
    /// Mean difference between consecutive round trips (RFC 3550's idea,
    /// unsmoothed).
    pub jitter_ms: f64,
    /// (seconds since the phase started, round-trip ms) per probe, thinned to
    /// at most a few hundred points: for charts over time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub series: Vec<(f32, f32)>,
}

/// The most points a [`Latency::series`] keeps.
pub const SERIES_POINTS: usize = 300;

/// One echo, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    pub seq: u32,
    /// When the probe was sent.
    pub sent_ns: u64,
    pub rtt_ns: u64,
    /// Signed: clocks that are not shared can make them negative.
    pub forward_ns: i64,
    pub reverse_ns: i64,
}

/// Probes and their echoes, as many phases pooled as were added: what the
/// statistics are made from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Probes {
    pub sent: u64,
    pub reordered: u64,
    pub samples: Vec<Sample>,
}

impl Probes {
    /// Another phase's probes, as if measured in the same one (a cell's runs).
    pub fn pool(&mut self, other: Probes) {
        self.sent += other.sent;
        self.reordered += other.reordered;
        self.samples.extend(other.samples);
    }

    /// The statistics; `start_ns` is when the phase began (series times count
    /// from it), `one_way` whether the ends share a clock. `None` when nothing
    /// was sent.
    pub fn latency(&self, rate: f64, start_ns: u64, one_way: bool) -> Option<Latency> {
        if self.sent == 0 {
            return None;
        }
        let ms = |ns: f64| ns / 1e6;
        let rtts: Vec<f64> = self.samples.iter().map(|s| ms(s.rtt_ns as f64)).collect();
        let received = self.samples.len() as u64;
        let empty = Spread {
            samples: 0,
            min: 0.0,
            median: 0.0,
            p90: 0.0,
            p99: 0.0,
            max: 0.0,
            mean: 0.0,
        };
        let way = |f: fn(&Sample) -> i64| {
            let v: Vec<f64> = self.samples.iter().map(|s| ms(f(s) as f64)).collect();
            one_way.then(|| Spread::of(&v)).flatten()
        };
        let jitter = if rtts.len() < 2 {
            0.0
        } else {
            rtts.windows(2).map(|w| (w[1] - w[0]).abs()).sum::<f64>() / (rtts.len() - 1) as f64
        };
        let stride = self.samples.len().div_ceil(SERIES_POINTS).max(1);
        let series = self
            .samples
            .iter()
            .step_by(stride)
            .map(|s| {
                (
                    (s.sent_ns.saturating_sub(start_ns) as f64 / 1e9) as f32,
                    ms(s.rtt_ns as f64) as f32,
                )
            })
            .collect();
        Some(Latency {
            rate,
            sent: self.sent,
            received,
            lost_percent: (self.sent.saturating_sub(received)) as f64 / self.sent as f64 * 100.0,
            reordered: self.reordered,
            rtt_ms: Spread::of(&rtts).unwrap_or(empty),
            forward_ms: way(|s| s.forward_ns),
            reverse_ms: way(|s| s.reverse_ns),
            jitter_ms: jitter,
            series,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate_between_ranks() {
        let s = Spread::of(&[5.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
        assert_eq!((s.min, s.median, s.max, s.mean), (1.0, 3.0, 5.0, 3.0));
        assert!((s.p90 - 4.6).abs() < 1e-9, "{}", s.p90);
        assert!((s.p99 - 4.96).abs() < 1e-9, "{}", s.p99);
        assert_eq!(Spread::of(&[]), None);
    }
}
