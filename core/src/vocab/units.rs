//! Rates, sizes and percentages as people write them ("100M", "128K", "1.5%").

/// "128K", "1M", "2G": 1024-based, as iperf3 reads sizes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    parse_scaled(s, 1024)
}

/// A percentage 0..=100, for impairments.
pub fn parse_percent(s: &str) -> Result<f64, String> {
    let x: f64 = s
        .trim()
        .trim_end_matches('%')
        .trim()
        .parse()
        .map_err(|_| format!("\"{s}\" is not a percentage such as 1.5"))?;
    if !(0.0..=100.0).contains(&x) {
        return Err(format!("{x} % is outside 0..100"));
    }
    Ok(x)
}

/// "100M", "1G": 1000-based, as iperf3 reads rates.
pub fn parse_rate(s: &str) -> Result<u64, String> {
    parse_scaled(s, 1000)
}

fn parse_scaled(s: &str, k: u64) -> Result<u64, String> {
    let t = s.trim();
    let (num, mul) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], k),
        Some('m' | 'M') => (&t[..t.len() - 1], k * k),
        Some('g' | 'G') => (&t[..t.len() - 1], k * k * k),
        Some('t' | 'T') => (&t[..t.len() - 1], k * k * k * k),
        _ => (t, 1),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("\"{s}\" is not a number with an optional K, M, G or T suffix"))?;
    if v.is_nan() || v < 0.0 || !v.is_finite() {
        return Err(format!("\"{s}\" must not be negative"));
    }
    Ok((v * mul as f64).round() as u64)
}
