//! The marks drawn in a slot of a group: a bar with whiskers and its figure,
//! a box plot. Each is one `<g>` with a tooltip.

use super::{Anchor, Canvas, Text, esc, text_width};
use std::fmt::Write;

/// The size of a bar's figure, px.
const FIGURE_SIZE: f64 = 10.0;

/// Whether every figure fits over a bar `w` wide. A chart labels every bar
/// or none: one with some bars labelled and others not reads as if those
/// were missing.
pub(crate) fn figures_fit<'a>(mut figures: impl Iterator<Item = &'a str>, w: f64) -> bool {
    figures.all(|f| text_width(f, FIGURE_SIZE) <= w)
}

/// A bar standing on `bottom` in the slot from `x`, `w` wide, up to `y`;
/// whiskers from `lo` to `hi` where `whisker`; the figure, if any, above
/// the bar and its whisker. Heights are y coordinates.
pub(crate) struct Bar<'a> {
    pub(crate) x: f64,
    pub(crate) w: f64,
    pub(crate) y: f64,
    pub(crate) lo: f64,
    pub(crate) hi: f64,
    pub(crate) whisker: bool,
    pub(crate) fill: &'a str,
    pub(crate) tip: &'a str,
    pub(crate) figure: Option<&'a str>,
}

pub(crate) fn bar(c: &mut Canvas, bottom: f64, b: Bar) {
    let mid = b.x + b.w / 2.0;
    let _ = write!(
        c.body,
        r#"<g><title>{}</title><rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}"/>"#,
        esc(b.tip),
        b.x + 1.0,
        b.y,
        (b.w - 2.0).max(1.0),
        (bottom - b.y).max(0.0),
        b.fill
    );
    if b.whisker {
        let cap = (b.w * 0.25).max(2.0);
        let (lo, hi) = (b.lo, b.hi);
        let _ = write!(
            c.body,
            r##"<path d="M{mid:.1} {lo:.1}V{hi:.1}M{:.1} {lo:.1}H{:.1}M{:.1} {hi:.1}H{:.1}" stroke="#222222" stroke-width="1.2" fill="none"/>"##,
            mid - cap,
            mid + cap,
            mid - cap,
            mid + cap
        );
    }
    c.raw("</g>");
    if let Some(f) = b.figure {
        c.text(
            Text::new(f, mid, b.hi.min(b.y) - 4.0, FIGURE_SIZE)
                .anchor(Anchor::Middle)
                .fill("#333333"),
        );
    }
}

/// The y coordinates of a box plot's figures.
pub(crate) struct BoxYs {
    pub(crate) min: f64,
    pub(crate) median: f64,
    pub(crate) p90: f64,
    pub(crate) p99: f64,
    pub(crate) max: f64,
}

/// A box plot in the slot from `x`, `w` wide: box from the median to p90,
/// whisker from min to max, a tick at p99.
pub(crate) fn boxplot(c: &mut Canvas, x: f64, w: f64, y: BoxYs, fill: &str, tip: &str) {
    let bx = x + 1.5;
    let w = w - 3.0;
    let mid = bx + w / 2.0;
    let BoxYs {
        min,
        median,
        p90,
        p99,
        max,
    } = y;
    let _ = writeln!(
        c.body,
        r##"<g><title>{}</title><path d="M{mid:.1} {min:.1}V{max:.1}" stroke="#444444" stroke-width="1"/><rect x="{bx:.1}" y="{p90:.1}" width="{w:.1}" height="{:.1}" fill="{fill}" stroke="#333333" stroke-width="0.8"/><path d="M{bx:.1} {median:.1}H{:.1}" stroke="#111111" stroke-width="2"/><path d="M{:.1} {p99:.1}H{:.1}" stroke="#111111" stroke-width="1.2"/></g>"##,
        esc(tip),
        (median - p90).max(1.0),
        bx + w,
        mid - w * 0.35,
        mid + w * 0.35
    );
}
