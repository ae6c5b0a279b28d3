//! Axes: a scale from figures to a plot's height (linear with round steps,
//! or logarithmic by decades), its gridlines and tick labels.

use super::{Anchor, Canvas, Text, text_width};
use crate::report::sig;
use std::fmt::Write;

/// A plot's edges in the chart's coordinates.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Area {
    pub(crate) left: f64,
    pub(crate) right: f64,
    pub(crate) top: f64,
    pub(crate) bottom: f64,
}

impl Area {
    pub(crate) fn height(&self) -> f64 {
        self.bottom - self.top
    }
}

/// An axis: where a value goes, and the ticks to draw.
pub(crate) enum Scale {
    Linear {
        top: f64,
        step: f64,
    },
    /// Decades from 10^lo to 10^hi.
    Log {
        lo: i32,
        hi: i32,
    },
}

impl Scale {
    pub(crate) fn linear(max: f64) -> Scale {
        let (step, top) = nice_axis(max);
        Scale::Linear { top, step }
    }

    /// Linear, or logarithmic where the figures lie more than `spread`
    /// times apart.
    pub(crate) fn for_values(values: &[f64], spread: f64) -> Scale {
        let max = values.iter().copied().fold(0.0, f64::max);
        let min = values
            .iter()
            .copied()
            .filter(|v| *v > 0.0)
            .fold(f64::INFINITY, f64::min);
        if min.is_finite() && max / min > spread {
            Scale::Log {
                lo: min.log10().floor() as i32,
                hi: (max.log10().ceil() as i32).max(min.log10().floor() as i32 + 1),
            }
        } else {
            Scale::linear(max)
        }
    }

    /// 0 at the axis' foot, 1 at its top.
    pub(crate) fn frac(&self, v: f64) -> f64 {
        match *self {
            Scale::Linear { top, .. } => (v / top).clamp(0.0, 1.0),
            Scale::Log { lo, hi } => {
                let v = v.max(10f64.powi(lo));
                ((v.log10() - f64::from(lo)) / f64::from(hi - lo)).clamp(0.0, 1.0)
            }
        }
    }

    pub(crate) fn ticks(&self) -> Vec<(f64, String)> {
        match *self {
            Scale::Linear { top, step } => {
                let n = (top / step).round() as usize;
                (0..=n)
                    .map(|i| {
                        let v = i as f64 * step;
                        (v, tick(v, step))
                    })
                    .collect()
            }
            Scale::Log { lo, hi } => (lo..=hi)
                .map(|e| {
                    let v = 10f64.powi(e);
                    (v, sig(v, 1))
                })
                .collect(),
        }
    }

    pub(crate) fn is_log(&self) -> bool {
        matches!(self, Scale::Log { .. })
    }

    /// The width of the widest tick label, px.
    pub(crate) fn labels_width(&self) -> f64 {
        self.ticks()
            .iter()
            .map(|(_, l)| text_width(l, 11.0))
            .fold(0.0, f64::max)
    }
}

/// Gridlines and tick labels across `a`, the axis' foot at its bottom, and
/// the unit along the side.
pub(crate) fn y_axis(c: &mut Canvas, s: &Scale, a: Area, unit: &str) {
    let Area {
        left,
        right,
        top,
        bottom,
    } = a;
    for (v, label) in s.ticks() {
        let y = bottom - s.frac(v) * a.height();
        let stroke = if y == bottom { "#888888" } else { "#e3e3e3" };
        let _ = writeln!(
            c.body,
            r#"<line x1="{left:.1}" y1="{y:.1}" x2="{right:.1}" y2="{y:.1}" stroke="{stroke}" stroke-width="1"/>"#
        );
        c.text(
            Text::new(&label, left - 6.0, y + 4.0, 11.0)
                .anchor(Anchor::End)
                .fill("#444444"),
        );
    }
    c.text(
        Text::new(unit, 16.0, (top + bottom) / 2.0, 12.0)
            .anchor(Anchor::Middle)
            .turned(90.0),
    );
}

/// Tick labels under `a` for a linear `s` from its left to its right edge,
/// and the unit under them.
pub(crate) fn x_axis(c: &mut Canvas, s: &Scale, a: Area, unit: &str) {
    for (v, label) in s.ticks() {
        let x = a.left + s.frac(v) * (a.right - a.left);
        c.text(
            Text::new(&label, x, a.bottom + 16.0, 11.0)
                .anchor(Anchor::Middle)
                .fill("#444444"),
        );
    }
    c.text(Text::new(unit, (a.left + a.right) / 2.0, a.bottom + 34.0, 12.0).anchor(Anchor::Middle));
}

/// A tick step of 1, 2, 2.5 or 5 times a power of ten giving about five
/// intervals (four to eight), and the axis top: the first multiple of the step
/// at or above `max`.
pub(crate) fn nice_axis(max: f64) -> (f64, f64) {
    if !(max > 0.0 && max.is_finite()) {
        return (0.2, 1.0);
    }
    let intervals = |step: f64| (max / step - 1e-9).ceil().max(1.0);
    let k = (max / 5.0).log10().floor() as i32;
    let mut best = (f64::INFINITY, 0.0);
    for p in [k - 1, k, k + 1] {
        for m in [1.0, 2.0, 2.5, 5.0] {
            let step = m * 10f64.powi(p);
            let miss = (intervals(step) - 5.0).abs();
            // Ties go to the larger step: fewer, rounder labels.
            if miss < best.0 || (miss == best.0 && step > best.1) {
                best = (miss, step);
            }
        }
    }
    let step = best.1;
    (step, intervals(step) * step)
}

/// A tick label with the decimals its step needs: "0", "2.5", "200".
pub(crate) fn tick(v: f64, step: f64) -> String {
    let decimals = if step >= 1.0 {
        if (step * 2.0).fract() != 0.0 || step.fract() != 0.0 {
            1
        } else {
            0
        }
    } else {
        (-step.log10().floor()) as usize + 1
    };
    let s = format!("{v:.decimals$}");
    // 2.50 -> 2.5, 1.0 -> 1
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_steps() {
        assert_eq!(nice_axis(955.0), (200.0, 1000.0));
        assert_eq!(nice_axis(13.2), (2.5, 15.0));
        assert_eq!(nice_axis(0.4), (0.1, 0.4));
        assert_eq!(nice_axis(0.0), (0.2, 1.0));
        assert_eq!(tick(2.5, 2.5), "2.5");
        assert_eq!(tick(1000.0, 200.0), "1000");
        assert_eq!(tick(0.30000000000000004, 0.1), "0.3");
    }

    #[test]
    fn scales() {
        let s = Scale::for_values(&[0.06, 40.0], 30.0);
        assert!(s.is_log());
        assert_eq!(
            s.ticks().iter().map(|t| t.1.as_str()).collect::<Vec<_>>(),
            ["0.01", "0.1", "1", "10", "100"]
        );
        assert!(!Scale::for_values(&[5.0, 40.0], 30.0).is_log());
    }
}
