//! Groups of slots (bars, boxes) along the x axis, a group per category,
//! and the categories' labels under them: on one line, on two, or turned
//! where the widest does not fit its group.

use super::axis::{Area, Scale, y_axis};
use super::frame::Frame;
use super::{Anchor, Canvas, LABEL_ANGLE, MIN_PLOT_W, Text, text_width};

/// How wide a slot may be, and whether the gaps between groups widen until
/// the plot is as wide as [`MIN_PLOT_W`].
#[derive(Clone, Copy)]
pub(crate) struct Slots {
    pub(crate) least: f64,
    pub(crate) most: f64,
    pub(crate) fill: bool,
}

/// A group per category that has slots, the slots as wide as the plot's
/// least width allows within the [`Slots`]' bounds, the plot moved right
/// where a turned first label would reach out of the chart.
pub(crate) struct Grouped {
    /// Width of one slot.
    pub(crate) slot: f64,
    gap: f64,
    group_w: Vec<f64>,
    left: f64,
    plot_w: f64,
    plot_h: f64,
    pub(crate) width: f64,
}

impl Grouped {
    /// `counts`: the slots of each category; `plot_h`: the plot's height.
    pub(crate) fn new(
        frame: &Frame,
        categories: &[String],
        counts: &[usize],
        sizes: Slots,
        plot_h: f64,
    ) -> Grouped {
        let mut gap = 18.0;
        let slots: usize = counts.iter().sum();
        let used = counts.iter().filter(|n| **n > 0).count() as f64;
        let slot = ((MIN_PLOT_W - used * gap) / slots.max(1) as f64).clamp(sizes.least, sizes.most);
        if sizes.fill && used > 0.0 {
            gap = f64::max(gap, (MIN_PLOT_W - slots as f64 * slot) / used);
        }
        let group_w: Vec<f64> = counts
            .iter()
            .map(|&n| if n == 0 { 0.0 } else { n as f64 * slot + gap })
            .collect();
        let plot_w: f64 = group_w.iter().sum();
        let mut left = frame.left();
        if let Some(k) = counts.iter().position(|n| *n > 0) {
            left = left.max(turned_reach(&categories[k]) - group_w[k] / 2.0 + 8.0);
        }
        let width = (frame.width(plot_w) + (left - frame.left())).ceil();
        Grouped {
            slot,
            gap,
            group_w,
            left,
            plot_w,
            plot_h,
            width,
        }
    }

    /// The canvas with the head and the y axis drawn, and the plot's area.
    pub(crate) fn start(&self, frame: &Frame, scale: &Scale, unit: &str) -> (Canvas, Area) {
        let mut c = Canvas::new();
        let top = frame.head(&mut c, self.width);
        let area = Area {
            left: self.left,
            right: self.left + self.plot_w,
            top,
            bottom: top + self.plot_h,
        };
        y_axis(&mut c, scale, area, unit);
        (c, area)
    }

    /// (category, x of its first slot) for every group that has slots.
    pub(crate) fn groups(&self) -> Vec<(usize, f64)> {
        let mut x = self.left;
        let mut out = Vec::new();
        for (k, w) in self.group_w.iter().enumerate() {
            if *w > 0.0 {
                out.push((k, x + self.gap / 2.0));
            }
            x += w;
        }
        out
    }

    /// The category labels under the groups; returns the chart's height.
    pub(crate) fn label(&self, c: &mut Canvas, categories: &[String], bottom: f64) -> f64 {
        let labels: Vec<(f64, f64, &str)> = self
            .groups()
            .into_iter()
            .map(|(k, x0)| {
                (
                    x0 - self.gap / 2.0 + self.group_w[k] / 2.0,
                    self.group_w[k],
                    categories[k].as_str(),
                )
            })
            .collect();
        let labels_h = category_labels(c, &labels, bottom);
        (bottom + labels_h + 8.0).ceil()
    }
}

/// Category labels (centre, group width, text) under groups: one line, two,
/// or turned where the widest does not fit its group. Returns the height
/// they take.
fn category_labels(c: &mut Canvas, labels: &[(f64, f64, &str)], bottom: f64) -> f64 {
    let fits = |t: &str, w: f64| text_width(t, 12.0) <= w - 4.0;
    let line = |t, x, y| Text::new(t, x, y, 12.0).anchor(Anchor::Middle);
    if labels.iter().all(|(_, w, t)| fits(t, *w)) {
        for (x, _, t) in labels {
            c.text(line(t, *x, bottom + 18.0));
        }
        return 26.0;
    }
    let split: Vec<(String, String)> = labels.iter().map(|(_, _, t)| two_lines(t)).collect();
    if labels
        .iter()
        .zip(&split)
        .all(|((_, w, _), (a, b))| fits(a, *w) && fits(b, *w))
    {
        for ((x, _, _), (a, b)) in labels.iter().zip(&split) {
            c.text(line(a, *x, bottom + 18.0));
            c.text(line(b, *x, bottom + 33.0));
        }
        return 42.0;
    }
    let mut h: f64 = 0.0;
    for (x, _, t) in labels {
        c.text(
            Text::new(t, *x + 4.0, bottom + 14.0, 12.0)
                .anchor(Anchor::End)
                .turned(LABEL_ANGLE),
        );
        h = h.max(text_width(t, 12.0) * LABEL_ANGLE.to_radians().sin() + 24.0);
    }
    h
}

/// How far left of its group's centre a turned label reaches.
fn turned_reach(first: &str) -> f64 {
    text_width(first, 12.0) * LABEL_ANGLE.to_radians().cos()
}

/// "IPv4 TCP Sender" as "IPv4 TCP" over "Sender": split at the space that
/// leaves the longer line shortest.
fn two_lines(t: &str) -> (String, String) {
    let best = t
        .char_indices()
        .filter(|(_, ch)| *ch == ' ')
        .map(|(i, _)| i)
        .min_by_key(|&i| i.max(t.len() - i - 1));
    match best {
        Some(i) => (t[..i].to_string(), t[i + 1..].to_string()),
        None => (t.to_string(), String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_splits_where_its_longer_line_is_shortest() {
        assert_eq!(
            two_lines("IPv6 TCP Receiver x6"),
            ("IPv6 TCP".into(), "Receiver x6".into())
        );
        assert_eq!(two_lines("one"), ("one".into(), String::new()));
    }
}
