//! The SVG drawing every chart and graph of the report shares: a canvas that
//! writes text and records the box each text covers ([`Canvas`]), escaping,
//! one width estimate for text without a font file, colours, axes
//! ([`axis`]), the frame of title, subtitle and legend ([`frame`]), groups of
//! bars or boxes along an axis ([`grouped`]) and the marks drawn in them
//! ([`marks`]). Hand-written SVG 1.1: no script, no font file, no stylesheet.

pub(crate) mod axis;
#[cfg(test)]
pub(crate) mod checks;
pub(crate) mod colour;
pub(crate) mod frame;
pub(crate) mod grouped;
pub(crate) mod marks;

use std::fmt::Write;

pub(crate) const FONT: &str = "Helvetica, Arial, sans-serif";
/// Estimated advance of a character in units of the font size: wider than
/// Helvetica's average, so an estimate errs toward room to spare.
const CHAR_EM: f64 = 0.6;
/// The least width of a chart's plot.
pub(crate) const MIN_PLOT_W: f64 = 560.0;
/// Room right of a chart's plot.
pub(crate) const RIGHT: f64 = 24.0;
/// How far turned labels are turned, degrees counter-clockwise.
pub(crate) const LABEL_ANGLE: f64 = 40.0;

/// The estimated width of `t` at `size` px.
pub(crate) fn text_width(t: &str, size: f64) -> f64 {
    t.chars().count() as f64 * size * CHAR_EM
}

/// Text safe in XML content and in double-quoted attributes.
pub(crate) fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            // Control characters are not allowed in XML 1.0 at all.
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => o.push(' '),
            c => o.push(c),
        }
    }
    o
}

/// The pieces joined with "; " into lines of at most about `chars` characters.
pub(crate) fn wrap(pieces: &[String], chars: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for p in pieces {
        match lines.last_mut() {
            Some(l) if l.len() + 2 + p.len() <= chars => {
                l.push_str("; ");
                l.push_str(p);
            }
            _ => lines.push(p.clone()),
        }
    }
    lines
}

/// Where a text's anchor point lies along it.
#[derive(Clone, Copy)]
pub(crate) enum Anchor {
    Start,
    Middle,
    End,
}

/// The box a text is estimated to cover, in the chart's coordinates.
#[derive(Debug, Clone, PartialEq)]
pub struct TextBox {
    pub x0: f64,
    pub y0: f64,
    pub x1: f64,
    pub y1: f64,
    pub text: String,
    /// Rotated texts' boxes are the rotated box's bounds: neighbours'
    /// bounds overlap where the texts do not, so only straight ones are
    /// checked against each other.
    pub rotated: bool,
}

impl TextBox {
    pub fn overlaps(&self, o: &TextBox) -> bool {
        self.x0 < o.x1 && o.x0 < self.x1 && self.y0 < o.y1 && o.y0 < self.y1
    }
}

/// One text to draw: where, how large, and how it looks. Starts at its
/// point, dark grey, upright.
#[derive(Clone, Copy)]
pub(crate) struct Text<'a> {
    text: &'a str,
    x: f64,
    y: f64,
    size: f64,
    anchor: Anchor,
    fill: &'a str,
    bold: bool,
    angle: f64,
    tip: Option<&'a str>,
}

impl<'a> Text<'a> {
    pub(crate) fn new(text: &'a str, x: f64, y: f64, size: f64) -> Text<'a> {
        Text {
            text,
            x,
            y,
            size,
            anchor: Anchor::Start,
            fill: "#222222",
            bold: false,
            angle: 0.0,
            tip: None,
        }
    }

    pub(crate) fn anchor(self, anchor: Anchor) -> Self {
        Text { anchor, ..self }
    }

    pub(crate) fn fill(self, fill: &'a str) -> Self {
        Text { fill, ..self }
    }

    pub(crate) fn bold(self) -> Self {
        Text { bold: true, ..self }
    }

    /// Turned `angle` degrees counter-clockwise about its point.
    pub(crate) fn turned(self, angle: f64) -> Self {
        Text { angle, ..self }
    }

    /// A tooltip on the text.
    pub(crate) fn tip(self, tip: &'a str) -> Self {
        Text {
            tip: Some(tip),
            ..self
        }
    }

    /// The box the text covers: its box in its own frame (x along the
    /// baseline, y down), turned and moved into the chart's.
    fn area(&self) -> TextBox {
        let w = text_width(self.text, self.size) * if self.bold { 1.1 } else { 1.0 };
        let (s0, s1) = match self.anchor {
            Anchor::Start => (0.0, w),
            Anchor::Middle => (-w / 2.0, w / 2.0),
            Anchor::End => (-w, 0.0),
        };
        let (sin, cos) = (-self.angle).to_radians().sin_cos();
        let size = self.size;
        let corners = [
            (s0, -0.8 * size),
            (s1, -0.8 * size),
            (s0, 0.25 * size),
            (s1, 0.25 * size),
        ]
        .map(|(a, b)| (self.x + a * cos - b * sin, self.y + a * sin + b * cos));
        let fold = |f: fn(f64, f64) -> f64, pick: fn(&(f64, f64)) -> f64, init: f64| {
            corners.iter().map(pick).fold(init, f)
        };
        TextBox {
            x0: fold(f64::min, |c| c.0, f64::INFINITY),
            x1: fold(f64::max, |c| c.0, f64::NEG_INFINITY),
            y0: fold(f64::min, |c| c.1, f64::INFINITY),
            y1: fold(f64::max, |c| c.1, f64::NEG_INFINITY),
            text: self.text.to_string(),
            rotated: self.angle != 0.0,
        }
    }
}

/// An SVG body being drawn and the box of every text in it.
pub(crate) struct Canvas {
    pub(crate) body: String,
    pub(crate) labels: Vec<TextBox>,
}

impl Canvas {
    pub(crate) fn new() -> Canvas {
        Canvas {
            body: String::new(),
            labels: Vec::new(),
        }
    }

    /// `s` as it is, on a line of its own.
    pub(crate) fn raw(&mut self, s: &str) {
        self.body.push_str(s);
        self.body.push('\n');
    }

    pub(crate) fn text(&mut self, t: Text) {
        self.labels.push(t.area());
        let anchor = match t.anchor {
            Anchor::Start => "start",
            Anchor::Middle => "middle",
            Anchor::End => "end",
        };
        let weight = if t.bold { r#" font-weight="bold""# } else { "" };
        let (x, y) = (t.x, t.y);
        let place = if t.angle == 0.0 {
            format!(r#"x="{x:.1}" y="{y:.1}""#)
        } else {
            format!(
                r#"transform="translate({x:.1} {y:.1}) rotate({:.0})""#,
                -t.angle
            )
        };
        let tip = t
            .tip
            .map(|tip| format!("<title>{}</title>", esc(tip)))
            .unwrap_or_default();
        let _ = writeln!(
            self.body,
            r#"<text {place} font-size="{}" text-anchor="{anchor}" fill="{}"{weight}>{tip}{}</text>"#,
            t.size,
            t.fill,
            esc(t.text)
        );
    }

    /// The finished `<svg>` element, `width` by `height` on white, with
    /// `attributes` (each with its leading space) and a title.
    pub(crate) fn finish(self, attributes: &str, width: f64, height: f64, title: &str) -> Drawing {
        let mut svg = String::new();
        let _ = writeln!(
            svg,
            r##"<svg xmlns="http://www.w3.org/2000/svg" version="1.1"{attributes} width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="{FONT}" role="img"><title>{}</title><rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>"##,
            esc(title)
        );
        svg.push_str(&self.body);
        svg.push_str("</svg>\n");
        Drawing {
            svg,
            width,
            height,
            labels: self.labels,
        }
    }
}

/// A finished drawing: its `<svg>` element, its size, its texts' boxes.
pub(crate) struct Drawing {
    pub(crate) svg: String,
    pub(crate) width: f64,
    pub(crate) height: f64,
    pub(crate) labels: Vec<TextBox>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checker_sees_overlap() {
        let a = TextBox {
            x0: 0.0,
            y0: 0.0,
            x1: 10.0,
            y1: 10.0,
            text: "a".into(),
            rotated: false,
        };
        let b = TextBox {
            x0: 9.0,
            y0: 5.0,
            x1: 20.0,
            y1: 12.0,
            ..a.clone()
        };
        let c = TextBox {
            x0: 10.0,
            ..b.clone()
        };
        assert!(a.overlaps(&b) && !a.overlaps(&c));
        // A turned label's box is where the text goes: down and left of its
        // anchor for an end-anchored label turned 40 degrees.
        let mut cv = Canvas::new();
        cv.text(
            Text::new("IPv4 TCP Sender", 100.0, 50.0, 12.0)
                .anchor(Anchor::End)
                .turned(40.0),
        );
        let l = &cv.labels[0];
        let w = text_width("IPv4 TCP Sender", 12.0);
        assert!(
            (l.x0 - (100.0 - w * 40f64.to_radians().cos())).abs() < 10.0,
            "{l:?}"
        );
        assert!(l.y1 > 50.0 + w * 40f64.to_radians().sin() - 1.0, "{l:?}");
    }

    #[test]
    fn text_is_escaped_with_its_tip() {
        let mut c = Canvas::new();
        c.text(Text::new("a<b", 1.0, 2.0, 10.0).tip("x & y").turned(90.0));
        assert_eq!(
            c.body,
            "<text transform=\"translate(1.0 2.0) rotate(-90)\" font-size=\"10\" text-anchor=\"start\" \
             fill=\"#222222\"><title>x &amp; y</title>a&lt;b</text>\n"
        );
        assert_eq!(esc("\u{1}'\""), " &apos;&quot;");
    }
}
