//! Chart colours: a different one for every series, and a paler twin.

/// Okabe-Ito's colours (told apart by colour-blind readers; yellow left out,
/// it vanishes on white), then Paul Tol's muted ones; beyond those, hues a
/// golden angle apart.
const PALETTE: [&str; 12] = [
    "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#555555", "#882255",
    "#44AA99", "#999933", "#332288", "#AA4499",
];

/// The `i`th colour of a chart: a different one for every `i`.
pub(crate) fn colour(i: usize) -> String {
    match PALETTE.get(i) {
        Some(c) => (*c).to_string(),
        None => {
            let k = i - PALETTE.len();
            let hue = (k as f64 * 137.508) % 360.0;
            let light = [0.36, 0.5, 0.62][k % 3];
            hsl(hue, 0.6 + 0.1 * ((k / 3) % 3) as f64, light)
        }
    }
}

/// `c` mixed half with white: the paler twin a published figure or an idle
/// round trip takes beside its path's own colour.
pub(crate) fn pale(c: &str) -> String {
    let v = u32::from_str_radix(c.trim_start_matches('#'), 16).unwrap_or(0);
    let mix = |shift: u32| {
        let x = f64::from((v >> shift) & 0xff);
        (x + (255.0 - x) * 0.55).round() as u32
    };
    format!("#{:02X}{:02X}{:02X}", mix(16), mix(8), mix(0))
}

fn hsl(h: f64, s: f64, l: f64) -> String {
    let c = (1.0 - (2.0 * l - 1.0).abs()) * s;
    let x = c * (1.0 - ((h / 60.0) % 2.0 - 1.0).abs());
    let (r, g, b) = match (h / 60.0) as u32 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    let m = l - c / 2.0;
    let byte = |v: f64| ((v + m) * 255.0).round().clamp(0.0, 255.0) as u32;
    format!("#{:02X}{:02X}{:02X}", byte(r), byte(g), byte(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn far_more_colours_than_the_palette_holds_all_differ() {
        let many: Vec<String> = (0..60).map(colour).collect();
        let pales: Vec<String> = many.iter().map(|c| pale(c)).collect();
        for (i, a) in many.iter().chain(&pales).enumerate() {
            for b in many.iter().chain(&pales).skip(i + 1) {
                assert_ne!(a, b);
            }
        }
        assert_eq!(pale("#000000"), "#8C8C8C");
    }
}
