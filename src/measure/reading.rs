//! A client's report as the measurement records it: a run of a cell, or a
//! trial of the UDP rate search.

use super::results::{Run, Trial};
use crate::engine::params::Protocol;
use crate::engine::report::{DirectionSum, TestReport};

/// The receiver's loss, except that a run in which datagrams were sent and none
/// arrived is 100 % lost (the receiver, seeing no sequence numbers, counts no
/// gaps): a path that swallows every datagram, like one whose MTU they exceed,
/// must fail the search, not pass it.
fn udp_loss(d: &DirectionSum) -> f64 {
    if d.received_bytes == 0 && d.sent_bps > 0.0 {
        100.0
    } else {
        d.lost_percent
    }
}

/// A UDP run at `asked` bit/s as the search and the confirmation judge it. A
/// sender that could not offer the rate asked (under 95 % of it) is said to be
/// limited, and what it did send is the run's offered rate.
pub(super) fn udp_trial(r: &TestReport, asked: f64) -> Trial {
    let d = r.forward();
    let sender_limited = d.sent_bps > 0.0 && d.sent_bps < 0.95 * asked;
    Trial {
        offered_bps: if sender_limited { d.sent_bps } else { asked },
        received_bps: d.arrived_bps(),
        lost_percent: udp_loss(&d),
        out_of_order: d.out_of_order,
        remeasured: false,
        sender_limited,
        reordered: false,
    }
}

pub(super) fn to_run(r: &TestReport, offered: Option<f64>, sender_limited: bool) -> Run {
    let d = r.forward();
    let intervals = receiving_intervals(r);
    let udp = r.protocol == Protocol::Udp;
    Run {
        bits_per_second: d.arrived_bps(),
        bytes: d.received_bytes,
        seconds: d.seconds,
        retransmits: if udp { None } else { d.retransmits },
        offered_bps: offered,
        lost_percent: udp.then_some(udp_loss(&d)),
        jitter_ms: udp.then_some(d.jitter_ms),
        out_of_order: udp.then_some(d.out_of_order),
        sender_limited,
        cpu_client: r.cpu_local.total,
        cpu_server: r.cpu_remote.total,
        interval_seconds: (!intervals.is_empty()).then_some(1.0),
        intervals_bps: intervals,
    }
}

/// The rate per one-second interval at the receiving end, as the client
/// recorded it: a download's (the client receives) or a TCP upload's (what the
/// client sent, which TCP holds to what arrives, give or take the socket
/// buffers). A UDP upload's would be the offered rate, not what arrived: none.
fn receiving_intervals(r: &TestReport) -> Vec<f64> {
    if r.protocol == Protocol::Udp && !r.params.reverse {
        return Vec::new();
    }
    // An interval that begins once a timed test's time is up is a late stop's
    // remainder (the control thread woke after the streams had finished): no
    // second of the test, and a rate of nothing on a chart.
    let over = match r.params.time {
        0 => f64::INFINITY,
        t => f64::from(r.params.omit) + f64::from(t),
    };
    r.intervals
        .iter()
        .filter(|iv| !iv.omitted && iv.end > iv.start && iv.start < over)
        .map(|iv| {
            let bytes: u64 = iv.streams.iter().map(|&(_, b, _)| b).sum();
            bytes as f64 * 8.0 / (iv.end - iv.start)
        })
        .collect()
}
