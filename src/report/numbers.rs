//! How the reports write numbers: significant digits, rates in their unit,
//! percentages, milliseconds, published figures, model ceilings and dates.

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

/// The NVR500 study's unit: Mbit/s to three significant digits.
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

/// Milliseconds to three significant digits at most, two decimals at most:
/// "0.05", "3.50", "41.2", "120".
pub(crate) fn ms(x: f64) -> String {
    if !x.is_finite() {
        "?".into()
    } else if x < 10.0 {
        format!("{x:.2}")
    } else if x < 100.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.0}")
    }
}

/// A number as a topology file writes it: no exponent, no trailing zeros
/// ("941", "656.69", "32.7").
pub(crate) fn plain(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A model's ceiling as its profile would write it: four significant digits
/// without trailing zeros ("29.43 Mbit/s", "824 Mbit/s").
pub(crate) fn ceiling(bps: f64) -> String {
    let (v, unit) = rate_unit(bps.abs());
    let n = sig(bps / v, 4);
    let n = if n.contains('.') {
        n.trim_end_matches('0').trim_end_matches('.')
    } else {
        &n
    };
    format!("{n} {unit}")
}

/// Unix seconds as a UTC date and time: "2020-02-01 12:30 UTC". Past the
/// calendar's range (year 262143) the seconds themselves.
pub(crate) fn utc(unix: u64) -> String {
    use chrono::{Datelike, Timelike};
    let Some(t) = i64::try_from(unix)
        .ok()
        .and_then(|s| chrono::DateTime::from_timestamp(s, 0))
    else {
        return format!("{unix} s after 1970 UTC");
    };
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02} UTC",
        t.year(),
        t.month(),
        t.day(),
        t.hour(),
        t.minute()
    )
}

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
    fn milliseconds_published_figures_and_ceilings() {
        assert_eq!(
            [ms(0.05), ms(3.5), ms(41.23), ms(120.4), ms(f64::NAN)],
            ["0.05", "3.50", "41.2", "120", "?"]
        );
        assert_eq!(
            [plain(941.0), plain(656.69), plain(32.7)],
            ["941", "656.69", "32.7"]
        );
        assert_eq!(ceiling(29.43e6), "29.43 Mbit/s");
        assert_eq!(ceiling(824e6), "824 Mbit/s");
        assert_eq!(ceiling(1.5e9), "1.5 Gbit/s");
    }

    #[test]
    fn dates_in_utc() {
        assert_eq!(utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc(1_580_560_200), "2020-02-01 12:30 UTC");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00 UTC");
        // Years past 9999 in full, without a sign.
        assert_eq!(utc(253_402_300_800), "10000-01-01 00:00 UTC");
    }
}
