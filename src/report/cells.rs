//! What every format reads from a cell alike: the cells in the NVR500 study's order,
//! a cell's figure as the NVR500 study's table has it, the UDP run that figure came
//! from and how its search stepped down, and a finished cell in a few words.

use super::numbers::{mbit, ms, percent};
use super::words::one_line;
use crate::measure::results::{CellResult, Results, Trial};
use crate::vocab::{Cell, Direction, Family, Proto};

/// A finished cell in a few words, for a progress line: "941 Mbit/s median
/// (best 950)", a UDP cell with its offered rate and loss, latency under
/// load where it was measured, or why the cell failed.
pub fn cell_summary(c: &CellResult) -> String {
    if let Some(e) = &c.error {
        return format!("failed: {}", one_line(e));
    }
    let mut s = match udp_figure(c) {
        Some(u) => format!(
            "{} Mbit/s median at -b {}{} ({} % lost)",
            mbit(c.median_bps),
            mbit(u.offered),
            if u.sender_limited {
                ", sender-limited"
            } else {
                ""
            },
            percent(u.loss)
        ),
        None => format!(
            "{} Mbit/s median (best {})",
            mbit(c.median_bps),
            mbit(c.best_bps)
        ),
    };
    if let Some(l) = &c.latency {
        if l.received == 0 && l.sent > 0 {
            // No round trip to summarise: a 0 would read as a fast path.
            s += &format!(", RTT under load: all {} probes lost", l.sent);
        } else {
            s += &format!(
                ", RTT under load {} ms (p99 {})",
                ms(l.rtt_ms.median),
                ms(l.rtt_ms.p99)
            );
        }
    }
    s
}

/// Every cell of any path, in the NVR500 study's order: IPv4 TCP Sender, IPv4 TCP
/// Receiver, IPv4 UDP Sender, IPv4 UDP Receiver, IPv6 ...; cells with more
/// streams after those with one.
pub(crate) fn ordered_cells(r: &Results) -> Vec<Cell> {
    let mut cells: Vec<Cell> = Vec::new();
    for p in &r.paths {
        for c in &p.cells {
            if !cells.contains(&c.cell) {
                cells.push(c.cell);
            }
        }
    }
    cells.sort_by_key(study_order);
    cells
}

pub(crate) fn study_order(c: &Cell) -> (u32, Family, Proto, Direction) {
    (c.streams, c.family, c.protocol, c.direction)
}

/// A cell's figure as the NVR500 study's table has it: TCP the best run; UDP the
/// highest offered rate whose loss stayed within the threshold (the search's
/// result), or the best run when there was no search.
pub(crate) fn measured_bps(c: &CellResult) -> f64 {
    match c.cell.protocol {
        Proto::Tcp => c.best_bps,
        Proto::Udp => udp_rate(c).filter(|r| *r > 0.0).unwrap_or(c.best_bps),
    }
}

/// The offered rate the UDP runs were made at: the search's result, or the
/// runs' own `-b` when there was no search.
pub(crate) fn udp_rate(c: &CellResult) -> Option<f64> {
    if c.cell.protocol != Proto::Udp {
        return None;
    }
    c.search
        .as_ref()
        .map(|s| s.rate_bps)
        .or_else(|| c.runs.iter().find_map(|r| r.offered_bps))
}

/// The run a UDP cell's figure came from: the rate offered, what arrived,
/// and the receiver-side loss, so no figure stands without what the path
/// carried at it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UdpFigure {
    pub offered: f64,
    pub received: f64,
    pub loss: f64,
    /// The sender could not offer more: the figure is its limit, not the path's.
    pub sender_limited: bool,
}

/// The best run at the cell's rate (the NVR500 study's rule), or, in results that
/// carry no loss in their runs, the search's trial at that rate.
pub(crate) fn udp_figure(c: &CellResult) -> Option<UdpFigure> {
    let rate = udp_rate(c)?;
    let best = c
        .runs
        .iter()
        .filter(|r| r.offered_bps == Some(rate) && r.lost_percent.is_some())
        .max_by(|a, b| a.bits_per_second.total_cmp(&b.bits_per_second));
    if let Some(r) = best {
        return Some(UdpFigure {
            offered: rate,
            received: r.bits_per_second,
            loss: r.lost_percent.unwrap_or_default(),
            sender_limited: r.sender_limited,
        });
    }
    let s = c.search.as_ref()?;
    s.trials
        .iter()
        .rev()
        .find(|t| t.offered_bps == rate)
        .map(|t| UdpFigure {
            offered: rate,
            received: t.received_bps,
            loss: t.lost_percent,
            sender_limited: t.sender_limited,
        })
}

/// What a UDP cell's search and confirmation did beyond their plain runs, for
/// the notes under a report: the search trials failed for reordering that
/// persisted (the search went below them), and the full-length runs over the
/// loss threshold or reordered again, with the rate each stepped down to.
pub(crate) fn step_down_notes(c: &CellResult) -> Vec<String> {
    let Some(s) = &c.search else {
        return Vec::new();
    };
    // "N datagrams out of order, and M again when measured again": the trial
    // before a reordered one is the first measurement at its rate.
    let again = |list: &[Trial], t: &Trial| {
        let i = list.iter().position(|x| std::ptr::eq(x, t)).unwrap_or(0);
        let first = i.checked_sub(1).map_or(0, |j| list[j].out_of_order);
        format!(
            "{} datagrams out of order, and {} again when measured again (the reordering persisted)",
            first, t.out_of_order
        )
    };
    let mut notes: Vec<String> = s
        .trials
        .iter()
        .filter(|t| t.reordered)
        .map(|t| {
            format!(
                "the search trial at {} Mbit/s had {}: it failed there",
                mbit(t.offered_bps),
                again(&s.trials, t)
            )
        })
        .collect();
    notes.extend(s.step_downs().into_iter().map(|(t, next)| {
        let then = match next {
            Some(n) => format!("stepped down to {} Mbit/s", mbit(n)),
            None => "no step-down left".to_string(),
        };
        if t.reordered {
            format!(
                "a full-length run at {} Mbit/s had {}: {then}",
                mbit(t.offered_bps),
                again(&s.confirmations, t)
            )
        } else {
            format!(
                "a full-length run at {} Mbit/s received {} and lost {} % (over {} %): {then}",
                mbit(t.offered_bps),
                mbit(t.received_bps),
                percent(t.lost_percent),
                s.loss_threshold_percent
            )
        }
    }));
    notes
}

/// " within N %": the UDP loss threshold of the run's rate searches, for
/// legends; empty when no cell searched.
pub(crate) fn loss_within(r: &Results) -> String {
    r.paths
        .iter()
        .flat_map(|p| &p.cells)
        .find_map(|c| c.search.as_ref())
        .map(|s| format!(" within {} %", s.loss_threshold_percent))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;

    #[test]
    fn cells_in_the_study_order() {
        let r = fixture::results();
        let keys: Vec<String> = ordered_cells(&r).iter().map(|c| c.key()).collect();
        assert_eq!(
            keys,
            [
                "ipv4.tcp.sender",
                "ipv4.tcp.receiver",
                "ipv4.udp.sender",
                "ipv4.udp.receiver",
                "ipv6.tcp.sender",
                "ipv4.tcp.sender.p6",
            ]
        );
        let c = |f, p, d, s| Cell {
            family: f,
            protocol: p,
            direction: d,
            streams: s,
        };
        let mut v = [
            c(Family::Ipv6, Proto::Udp, Direction::Receiver, 1),
            c(Family::Ipv4, Proto::Tcp, Direction::Sender, 6),
            c(Family::Ipv6, Proto::Tcp, Direction::Sender, 1),
            c(Family::Ipv4, Proto::Udp, Direction::Receiver, 1),
        ];
        v.sort_by_key(study_order);
        let titles: Vec<String> = v.iter().map(|c| c.title()).collect();
        assert_eq!(
            titles,
            [
                "IPv4 UDP Receiver",
                "IPv6 TCP Sender",
                "IPv6 UDP Receiver",
                "IPv4 TCP Sender x6"
            ]
        );
    }

    #[test]
    fn udp_rate_and_loss() {
        let r = fixture::results();
        let c = r.paths[0]
            .cell(&Cell::parse_key("ipv4.udp.sender").unwrap())
            .unwrap();
        assert_eq!(udp_rate(c), Some(350e6));
        // The best run at that rate: 347 received, 0.9 % lost.
        assert_eq!(
            udp_figure(c),
            Some(UdpFigure {
                offered: 350e6,
                received: 347e6,
                loss: 0.9,
                sender_limited: false
            })
        );
        // No loss in the runs: the search's trial at the final rate.
        let mut bare = c.clone();
        for run in &mut bare.runs {
            run.lost_percent = None;
        }
        assert_eq!(udp_figure(&bare).unwrap().loss, 4.0);
        assert_eq!(udp_figure(&bare).unwrap().received, 350e6 * 0.96);
        let tcp = r.paths[0]
            .cell(&Cell::parse_key("ipv4.tcp.sender").unwrap())
            .unwrap();
        assert_eq!((udp_rate(tcp), udp_figure(tcp)), (None, None));
    }

    #[test]
    fn a_finished_cell_in_a_few_words() {
        let r = fixture::results();
        let cell = |p: usize, k: &str| r.paths[p].cell(&Cell::parse_key(k).unwrap()).unwrap();
        assert_eq!(
            cell_summary(cell(0, "ipv4.tcp.sender")),
            "939 Mbit/s median (best 941)"
        );
        assert_eq!(
            cell_summary(cell(0, "ipv4.udp.sender")),
            "340 Mbit/s median at -b 350 (0.9 % lost)"
        );
        assert_eq!(
            cell_summary(cell(0, "ipv6.tcp.sender")),
            "925 Mbit/s median (best 928), RTT under load 3.50 ms (p99 6.30)"
        );
        assert_eq!(
            cell_summary(cell(1, "ipv6.tcp.sender")),
            "failed: connecting to [fd00:9::2]:5201: connection refused"
        );
        // Probes that all went unanswered say so, not a round trip of 0.
        let mut lost = cell(0, "ipv6.tcp.sender").clone();
        let l = lost.latency.as_mut().unwrap();
        l.received = 0;
        let sent = l.sent;
        assert_eq!(
            cell_summary(&lost),
            format!("925 Mbit/s median (best 928), RTT under load: all {sent} probes lost")
        );
    }

    #[test]
    fn the_study_figure_of_a_cell() {
        let r = fixture::results();
        let udp = r.paths[0].cells[3].clone();
        assert_eq!(udp.cell.key(), "ipv4.udp.sender");
        // UDP is the searched rate (350), not the best run (347).
        assert_eq!(measured_bps(&udp), 350e6);
        // Without a search, a UDP cell's figure is its best run.
        let mut bare = udp;
        bare.search = None;
        for run in &mut bare.runs {
            run.offered_bps = None;
        }
        assert_eq!(measured_bps(&bare), 347e6);
        let tcp = r.paths[0].cells[5].clone();
        assert_eq!(tcp.cell.key(), "ipv4.tcp.sender");
        assert_eq!(measured_bps(&tcp), 941e6);
    }
}
