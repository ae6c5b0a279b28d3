//! One cell measured: N runs of TCP, or for UDP the rate search then its
//! full-length confirmation runs; latency probes pooled over the runs (not
//! the search's trials); and what the lab predicts for the cell beside it.

use super::client_thread::run_client;
use super::reading::{to_run, udp_trial};
use super::results::{CellResult, Latency, ModelLimit, Run, SearchStart, UdpSearch};
use super::search::{Confirmation, RateSearch};
use super::spec::{DEFAULT_UDP_START_BPS, MeasureSpec};
use crate::engine::client::ClientOptions;
use crate::engine::latency::sockets::Phase;
use crate::engine::params::{Protocol, TestParams};
use crate::engine::report::TestReport;
use crate::lab::Running;
use crate::vocab::{Cell, Direction, Proto};
use anyhow::{Result, bail};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What the lab predicts for a cell, whatever the measurement makes of it.
pub(super) struct PredictedLimits {
    /// The device models' tightest ceiling.
    model: Option<ModelLimit>,
    /// What the shaped links let through of the cell's packets: physics'
    /// prediction, beside the models'.
    wire: Option<ModelLimit>,
}

impl PredictedLimits {
    pub(super) fn of(
        lab: &Running,
        from: Option<usize>,
        addr: IpAddr,
        cell: &Cell,
        udp_len: u32,
    ) -> PredictedLimits {
        let model = from.and_then(|f| {
            crate::predict::device_limit::model_limit(&lab.topology, f, addr, cell).map(|l| {
                ModelLimit {
                    what: l.what,
                    bps: l.bps,
                }
            })
        });
        let wire = from.and_then(|f| {
            crate::predict::wire_limit::wire_limit(&lab.topology, f, addr, cell, udp_len).map(|l| {
                ModelLimit {
                    what: l.what,
                    bps: l.bps,
                }
            })
        });
        PredictedLimits { model, wire }
    }

    /// The tighter of the two predictions: a ceiling on the cell's payload
    /// (bit/s, as iperf3 counts it and a trial's received rate is).
    fn tightest(&self) -> Option<&ModelLimit> {
        [self.model.as_ref(), self.wire.as_ref()]
            .into_iter()
            .flatten()
            .min_by(|a, b| a.bps.total_cmp(&b.bps))
    }

    /// `result` with the predictions beside it.
    pub(super) fn on(self, result: CellResult) -> CellResult {
        CellResult {
            model_limit: self.model,
            wire_limit: self.wire,
            ..result
        }
    }
}

/// Where a UDP search starts: at the spec's start if it gives one, else at
/// the rate the tightest prediction makes the answer, else at the default.
/// A path that lets through at most `limit` of payload loses (R - limit) / R
/// of an offer R above it, so the highest offer within the loss threshold is
/// limit / (1 - threshold).
fn search_start(predicted: Option<&ModelLimit>, spec: &MeasureSpec) -> SearchStart {
    let unpredicted = |rate: f64, why: &str| SearchStart {
        rate_bps: rate.min(spec.udp_ceiling_bps),
        predicted_bps: None,
        why: why.into(),
    };
    if let Some(rate) = spec.udp_start_bps {
        return unpredicted(rate, "the measurement's own start");
    }
    let Some(limit) = predicted.filter(|l| l.bps.is_finite() && l.bps > 0.0) else {
        return unpredicted(DEFAULT_UDP_START_BPS, "no prediction: the default start");
    };
    let loss = spec.udp_loss_percent.clamp(0.0, 99.0);
    let knee = limit.bps / (1.0 - loss / 100.0);
    SearchStart {
        rate_bps: knee.min(spec.udp_ceiling_bps),
        predicted_bps: Some(limit.bps),
        why: format!(
            "{}: {:.1} Mbit/s of payload, {:.1} at {loss} % loss",
            limit.what,
            limit.bps / 1e6,
            knee / 1e6
        ),
    }
}

/// The rate search `start` begins: narrowing around a predicted answer, or
/// widening by 4 from a start nothing predicted.
fn rate_search(start: &SearchStart, spec: &MeasureSpec) -> RateSearch {
    let new = match start.predicted_bps {
        Some(_) => RateSearch::predicted,
        None => RateSearch::new,
    };
    new(
        start.rate_bps,
        spec.udp_ceiling_bps,
        spec.udp_loss_percent,
        spec.udp_max_trials,
    )
}

/// The test parameters of every run of `cell`; a UDP run adds its rate.
pub(super) fn base_params(spec: &MeasureSpec, cell: &Cell) -> TestParams {
    TestParams {
        protocol: if cell.protocol == Proto::Udp {
            Protocol::Udp
        } else {
            Protocol::Tcp
        },
        time: spec.duration.ceil().max(1.0) as u32,
        parallel: cell.streams,
        reverse: cell.direction == Direction::Receiver,
        len: if cell.protocol == Proto::Udp {
            spec.udp_len
        } else {
            crate::engine::protocol::DEFAULT_TCP_BLOCK
        },
        ..Default::default()
    }
}

/// One cell under way: what its runs need, and the probes they saw so far.
pub(super) struct CellRun<'a> {
    pub spec: &'a MeasureSpec,
    pub cancel: &'a AtomicBool,
    pub client_ns: &'a str,
    pub cell: Cell,
    pub server: SocketAddr,
    pub base: TestParams,
    /// Latency probes beside the runs: echo address and rate.
    pub probes: Option<(SocketAddr, f64)>,
    /// What the lab predicts for the cell: where a UDP search starts.
    pub predicted: &'a PredictedLimits,
    /// Whether a datapath on the path has died, and which.
    pub dead: &'a dyn Fn() -> Option<String>,
    /// Whether the probes' two ends share a clock (a lab's own server).
    pub one_way: bool,
    /// The runs' probes, pooled.
    pub pooled: Option<Phase>,
}

impl CellRun<'_> {
    /// The cell's result, without its latency (see [`CellRun::latency`]).
    /// `report` says each step as it starts.
    pub(super) fn measure(&mut self, report: &mut dyn FnMut(String)) -> Result<CellResult> {
        match self.cell.protocol {
            Proto::Tcp => self.tcp_runs(report),
            Proto::Udp => self.udp(report),
        }
    }

    /// The latency the runs' probes saw, all of them pooled.
    pub(super) fn latency(self) -> Option<Latency> {
        let one_way = self.one_way;
        let rate = self.spec.latency.as_ref().map_or(0.0, |l| l.rate);
        self.pooled
            .and_then(|p| p.probes.latency(rate, p.start_ns, one_way))
    }

    fn interrupted(&self) -> Result<()> {
        if self.cancel.load(Ordering::Relaxed) {
            bail!("interrupted");
        }
        Ok(())
    }

    /// One run of the client with `params`, probed or not; the probes join
    /// the pool.
    fn client(&mut self, params: TestParams, probed: bool) -> Result<TestReport> {
        let opts = ClientOptions {
            server: self.server,
            bind: None,
            params,
            connect_timeout: Duration::from_secs(5),
            // Per-second records, for the reports' charts over time.
            intervals: true,
            abort: None,
        };
        let probes = if probed { self.probes } else { None };
        let (r, phase) = run_client(self.client_ns, opts, probes, self.dead)?;
        if let Some(p) = phase {
            match self.pooled.as_mut() {
                Some(a) => a.probes.pool(p.probes),
                None => self.pooled = Some(p),
            }
        }
        Ok(r)
    }

    fn tcp_runs(&mut self, report: &mut dyn FnMut(String)) -> Result<CellResult> {
        let mut runs = Vec::new();
        for n in 1..=self.spec.runs {
            self.interrupted()?;
            report(format!("run {n}/{}", self.spec.runs));
            let r = self.client(self.base.clone(), true)?;
            runs.push(to_run(&r, None, false));
        }
        Ok(CellResult::from_runs(self.cell, runs, None))
    }

    /// The search for the highest rate within the loss threshold, then
    /// full-length runs at that rate, each within the threshold or stepped
    /// down until one is.
    fn udp(&mut self, report: &mut dyn FnMut(String)) -> Result<CellResult> {
        let loss = self.spec.udp_loss_percent;
        let start = search_start(self.predicted.tightest(), self.spec);
        let (search, trial_seconds) = self.udp_search(rate_search(&start, self.spec), report)?;
        let mut timed = UdpSearch {
            loss_threshold_percent: loss,
            trials: search.trials().to_vec(),
            rate_bps: 0.0,
            confirmations: Vec::new(),
            trial_seconds,
            confirmation_seconds: Vec::new(),
            start: Some(start),
        };
        let Some(found) = search.result() else {
            let why = format!("loss above {loss} % at every rate tried");
            return Ok(self.udp_failed(timed, why));
        };
        let (confirm, runs, confirmation_seconds) = self.udp_confirm(found, report)?;
        timed.confirmation_seconds = confirmation_seconds;
        let confirmations = confirm.runs().to_vec();
        let Some(rate) = confirm.result() else {
            let tried: Vec<String> = confirmations
                .iter()
                .map(|t| {
                    format!(
                        "{:.0} Mbit/s lost {:.1} %",
                        t.offered_bps / 1e6,
                        t.lost_percent
                    )
                })
                .collect();
            let why = format!(
                "no full-length run kept the loss within {loss} % (the search's trials did, at {:.0} Mbit/s): {}",
                found / 1e6,
                tried.join(", ")
            );
            timed.confirmations = confirmations;
            return Ok(self.udp_failed(timed, why));
        };
        // Only the runs that count: within the rule, not made again.
        let kept: Vec<Run> = runs
            .into_iter()
            .enumerate()
            .filter(|(i, _)| confirm.counts(*i))
            .map(|(_, r)| r)
            .collect();
        Ok(CellResult::from_runs(
            self.cell,
            kept,
            Some(UdpSearch {
                rate_bps: rate,
                confirmations,
                ..timed
            }),
        ))
    }

    /// `search`'s short trials, unprobed, with each one's wall seconds.
    fn udp_search(
        &mut self,
        mut search: RateSearch,
        report: &mut dyn FnMut(String),
    ) -> Result<(RateSearch, Vec<f64>)> {
        let spec = self.spec;
        let trial_time = spec.trial_duration.ceil().max(1.0) as u32;
        let mut seconds = Vec::new();
        while let Some(rate) = search.next_rate() {
            self.interrupted()?;
            report(format!(
                "search trial {} at {:.0} Mbit/s",
                search.trials().len() + 1,
                rate / 1e6
            ));
            let p = TestParams {
                time: trial_time,
                rate: (rate / self.cell.streams as f64) as u64,
                ..self.base.clone()
            };
            let started = Instant::now();
            let t = udp_trial(&self.client(p, false)?, rate);
            seconds.push(started.elapsed().as_secs_f64());
            // A sender that cannot offer the rate asked: what it did send
            // is the trial's rate, and the search goes no higher.
            if t.sender_limited {
                search.cap(t.offered_bps);
            }
            search.record_trial(t);
        }
        Ok((search, seconds))
    }

    /// Full-length runs at the rate `found`, probed, stepping down until
    /// enough keep within the threshold; every run made, in order, with each
    /// one's wall seconds.
    fn udp_confirm(
        &mut self,
        found: f64,
        report: &mut dyn FnMut(String),
    ) -> Result<(Confirmation, Vec<Run>, Vec<f64>)> {
        let spec = self.spec;
        let mut confirm = Confirmation::new(found, spec.runs as usize, spec.udp_loss_percent);
        let mut runs = Vec::new();
        let mut seconds = Vec::new();
        while let Some(rate) = confirm.next_rate() {
            self.interrupted()?;
            let step_down = if rate < found { " (stepped down)" } else { "" };
            report(format!(
                "run {}/{} at {:.0} Mbit/s{step_down}",
                confirm.passing().count() + 1,
                spec.runs,
                rate / 1e6
            ));
            let p = TestParams {
                rate: (rate / self.cell.streams as f64) as u64,
                ..self.base.clone()
            };
            let started = Instant::now();
            let r = self.client(p, true)?;
            seconds.push(started.elapsed().as_secs_f64());
            let t = udp_trial(&r, rate);
            runs.push(to_run(&r, Some(t.offered_bps), t.sender_limited));
            confirm.record(t);
        }
        Ok((confirm, runs, seconds))
    }

    /// A UDP cell that found no rate, with what the search and the
    /// confirmations tried.
    fn udp_failed(&self, search: UdpSearch, why: String) -> CellResult {
        CellResult {
            search: Some(search),
            ..CellResult::failed(self.cell, why)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(bps: f64) -> ModelLimit {
        ModelLimit {
            what: "wire: link wan's 100M".into(),
            bps,
        }
    }

    #[test]
    fn a_udp_search_starts_where_the_tightest_prediction_puts_the_answer() {
        let spec = MeasureSpec::seed("a", "b");
        let predicted = PredictedLimits {
            model: Some(limit(200e6)),
            wire: Some(limit(90e6)),
        };
        let start = search_start(predicted.tightest(), &spec);
        // 90 Mbit/s through, 10 % lost: 100 offered.
        assert_eq!(start.predicted_bps, Some(90e6));
        assert!((start.rate_bps - 100e6).abs() < 1.0, "{}", start.rate_bps);
        assert!(start.why.starts_with("wire: link wan's 100M: 90.0 Mbit/s"));
        // Never above the spec's ceiling.
        let low = MeasureSpec {
            udp_ceiling_bps: 50e6,
            ..spec.clone()
        };
        assert_eq!(search_start(predicted.tightest(), &low).rate_bps, 50e6);
        // A start the measurement gives wins over the prediction.
        let given = MeasureSpec {
            udp_start_bps: Some(26e6),
            ..spec
        };
        let start = search_start(predicted.tightest(), &given);
        assert_eq!((start.rate_bps, start.predicted_bps), (26e6, None));
    }

    #[test]
    fn without_a_prediction_a_udp_search_starts_as_it_always_did() {
        let spec = MeasureSpec::seed("a", "b");
        let none = PredictedLimits {
            model: None,
            wire: None,
        };
        let start = search_start(none.tightest(), &spec);
        assert_eq!(start.predicted_bps, None);
        assert_eq!(start.rate_bps, DEFAULT_UDP_START_BPS);
        let mut search = rate_search(&start, &spec);
        search.record(500e6, 500e6, 0.0, 0);
        assert_eq!(search.next_rate(), Some(2000e6), "widening by 4");
    }
}
