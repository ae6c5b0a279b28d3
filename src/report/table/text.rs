//! Where each path goes, one line a path, at the top of the text report.

use crate::measure::results::PathResult;
use crate::report::hosts::{Section, TITLE};
use std::fmt::Write;

/// "fast/raw: pc -> server (198.18.1.10, 2001:2:0:1::10)".
pub(crate) fn path_line(p: &PathResult) -> String {
    let mut addrs: Vec<&str> = [&p.ipv4, &p.ipv6]
        .into_iter()
        .flatten()
        .map(String::as_str)
        .collect();
    if addrs.is_empty() {
        addrs.push("no address");
    }
    format!(
        "{}: {} -> {} ({})",
        p.label(),
        p.from,
        p.to,
        addrs.join(", ")
    )
}

/// The underlays between hosts and the hosts each path crosses, ruled like
/// a view.
pub(super) fn hosts_text(s: &Section) -> String {
    let mut out = format!("{TITLE}\n{}\n", "=".repeat(TITLE.len()));
    for line in super::view_text::wrap(&s.legend, super::view_text::WIDTH) {
        let _ = writeln!(out, "{line}");
    }
    out.push('\n');
    for u in &s.underlays {
        let lines = super::view_text::wrap(u, super::view_text::WIDTH - 2);
        let _ = writeln!(out, "{}", lines.join("\n  "));
    }
    if !s.underlays.is_empty() && !s.paths.is_empty() {
        out.push('\n');
    }
    for p in &s.paths {
        let _ = writeln!(out, "{p}");
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::report::{Format, fixture, render};

    #[test]
    fn heading_then_where_each_path_goes() {
        let text = render(&fixture::results(), Format::Text, None);
        assert!(
            text.starts_with(
                "tunbench 0.1.0: lab home (nvr500-home.toml), started 2020-02-01 12:30 UTC, 3 runs x 10 s per cell\n\
                 \n\
                 raw: lan1 -> lan2 (192.168.1.2, 2001:db8:1::2)\n\
                 wg: lan1 -> lan2 (10.9.0.2, fd00:9::2)\n\
                 \n"
            ),
            "{text}"
        );
    }
}
