//! The progress of `run` and `measure` on standard error: on a terminal one
//! line, redrawn in place (indicatif); otherwise (CI, a pipe) one line per
//! finished cell, so a long job shows it is alive without filling a log with
//! redraws.

use crate::measure::runner::Progress;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// The progress line of one command. Clones share the line.
#[derive(Clone)]
pub struct ProgressLine {
    /// On a terminal, the line; else None.
    bar: Option<ProgressBar>,
    started: Instant,
}

impl ProgressLine {
    pub fn on_stderr() -> ProgressLine {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            bar.set_style(ProgressStyle::with_template("{wide_msg}").expect("a valid template"));
            bar
        });
        ProgressLine {
            bar,
            started: Instant::now(),
        }
    }

    /// Where the measurement is: the line rewritten, or a line for a finished cell.
    pub fn show(&self, p: &Progress) {
        let Some(bar) = &self.bar else {
            if p.finished.is_some() {
                eprintln!("{}", finished_line(p, self.started.elapsed()));
            }
            return;
        };
        let left = p.estimated_total.saturating_sub(p.elapsed).as_secs();
        let el = p.elapsed.as_secs();
        bar.set_message(format!(
            "[{}] {} ({}/{}) {} - {}:{:02} elapsed, about {}:{:02} left",
            p.path,
            p.cell,
            p.cell_index + 1,
            p.cells,
            p.step,
            el / 60,
            el % 60,
            left / 60,
            left % 60
        ));
        // Back after a `clear`.
        if bar.is_finished() {
            bar.reset();
        }
    }

    /// Takes the line off the terminal until the next `show`.
    pub fn clear(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// "[fast/raw] IPv4 TCP Sender (1/8): 941 Mbit/s median (best 950), 0:42
/// elapsed": a finished cell, `elapsed` since the command started.
fn finished_line(p: &Progress, elapsed: Duration) -> String {
    let figure = p
        .finished
        .as_ref()
        .map(|c| match &c.measured_with {
            Some(by) => format!(
                "{} (measured once, with {by})",
                crate::report::cell_summary(c)
            ),
            None => crate::report::cell_summary(c),
        })
        .unwrap_or_default();
    let el = elapsed.as_secs();
    format!(
        "[{}] {} ({}/{}): {figure}, {}:{:02} elapsed",
        p.path,
        p.cell.title(),
        p.cell_index + 1,
        p.cells,
        el / 60,
        el % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::results::CellResult;
    use crate::vocab::Cell;

    #[test]
    fn a_finished_cell_is_one_line() {
        let cell = Cell::parse_key("ipv6.tcp.receiver").unwrap();
        let p = Progress {
            path: "fast/raw".into(),
            cell,
            cell_index: 5,
            cells: 8,
            step: "done".into(),
            elapsed: Duration::from_secs(3),
            estimated_total: Duration::from_secs(60),
            finished: Some(CellResult::failed(cell, "refused\nby the server".into())),
        };
        assert_eq!(
            finished_line(&p, Duration::from_secs(125)),
            "[fast/raw] IPv6 TCP Receiver (6/8): failed: refused by the server, 2:05 elapsed"
        );
    }
}
