//! The frame around a plot: title, subtitle and legend above it, room for
//! the y axis' labels left of it.

use super::{Canvas, RIGHT, Text, text_width, wrap};
use std::fmt::Write;

/// Title, subtitle and legend over a plot.
pub(crate) struct Frame {
    pub(crate) title: String,
    /// Pieces of the subtitle, joined into lines that fit the width.
    pub(crate) subtitle: Vec<String>,
    /// Each legend entry and its colour.
    pub(crate) legend: Vec<(String, String)>,
    /// Width of the y axis' tick labels, px.
    pub(crate) ticks_w: f64,
    pub(crate) title_size: f64,
}

impl Frame {
    /// A frame with the title at the page charts' size.
    pub(crate) fn new(
        title: String,
        subtitle: Vec<String>,
        legend: Vec<(String, String)>,
        ticks_w: f64,
    ) -> Frame {
        Frame {
            title,
            subtitle,
            legend,
            ticks_w,
            title_size: 15.0,
        }
    }

    /// Left edge of the plot.
    pub(crate) fn left(&self) -> f64 {
        (self.ticks_w + 40.0).max(64.0)
    }

    /// The chart's width for a plot `plot_w` wide.
    pub(crate) fn width(&self, plot_w: f64) -> f64 {
        let legend_w = self
            .legend
            .iter()
            .map(|(l, _)| legend_item_w(l))
            .fold(0.0, f64::max);
        let text_w = self
            .subtitle
            .iter()
            .map(|s| text_width(s, 12.0))
            .chain([text_width(&self.title, self.title_size) * 1.1])
            .fold(legend_w, f64::max)
            .min(900.0);
        (self.left() + plot_w.max(text_w) + RIGHT).ceil()
    }

    /// Draws the title, the subtitle (wrapped to the width) and the legend;
    /// returns the y where the plot may start.
    pub(crate) fn head(&self, c: &mut Canvas, width: f64) -> f64 {
        let left = self.left();
        let mut y = self.title_size + 9.0;
        c.text(Text::new(&self.title, left, y, self.title_size).bold());
        let chars = ((width - left - RIGHT) / text_width("x", 12.0)) as usize;
        for (n, line) in wrap(&self.subtitle, chars).iter().enumerate() {
            // The first line clears the title, the others follow 16 px apart.
            y += if n == 0 { self.title_size + 1.0 } else { 16.0 };
            c.text(Text::new(line, left, y, 12.0).fill("#555555"));
        }
        y += 12.0;
        let mut x = left;
        let mut row_y = y;
        for (label, colour) in &self.legend {
            let w = legend_item_w(label);
            if x + w > width - RIGHT && x > left {
                x = left;
                row_y += 20.0;
            }
            let _ = writeln!(
                c.body,
                r#"<rect x="{x:.1}" y="{row_y:.1}" width="12" height="12" fill="{colour}" stroke="{colour}"/>"#
            );
            c.text(Text::new(label, x + 17.0, row_y + 10.5, 12.0));
            x += w;
        }
        row_y + if self.legend.is_empty() { 0.0 } else { 20.0 } + 16.0
    }
}

fn legend_item_w(label: &str) -> f64 {
    17.0 + text_width(label, 12.0) + 18.0
}
