//! The UDP rate search, as the seed did it by hand and RFC 2544 describes it: find
//! the highest offered rate whose receiver-side loss stays within a threshold.
//! Bracket (multiply the rate until a trial fails), then bisect, at most
//! `max_trials` trials. A trial that saw packets out of order is measured again
//! once (the seed's rule). Pure: it proposes rates and is told the outcomes.

use super::model::Trial;

#[derive(Debug, Clone)]
pub struct RateSearch {
    threshold: f64,
    max_trials: usize,
    /// Highest rate that passed, lowest that failed.
    pass: Option<f64>,
    fail: Option<f64>,
    next: f64,
    ceiling: f64,
    /// Stop bisecting when the bracket is this narrow (fraction of the failing rate).
    resolution: f64,
    trials: Vec<Trial>,
    remeasure: Option<f64>,
}

impl RateSearch {
    /// `start`: the first rate tried (bit/s); `ceiling`: never offer more.
    pub fn new(start: f64, ceiling: f64, threshold_percent: f64, max_trials: usize) -> Self {
        RateSearch {
            threshold: threshold_percent,
            max_trials,
            pass: None,
            fail: None,
            next: start.min(ceiling),
            ceiling,
            resolution: 0.05,
            trials: Vec::new(),
            remeasure: None,
        }
    }

    pub fn trials(&self) -> &[Trial] {
        &self.trials
    }

    /// The next rate to try, or None when the search is over.
    pub fn next_rate(&self) -> Option<f64> {
        if let Some(r) = self.remeasure {
            return Some(r);
        }
        if self.trials.len() >= self.max_trials {
            return None;
        }
        match (self.pass, self.fail) {
            (Some(p), Some(f)) if (f - p) / f <= self.resolution => None,
            (Some(p), None) if p >= self.ceiling => None,
            _ => Some(self.next),
        }
    }

    /// The outcome of a trial at `offered` bit/s.
    pub fn record(&mut self, offered: f64, received: f64, lost_percent: f64, out_of_order: u64) {
        let remeasured = self.remeasure.take().is_some();
        self.trials.push(Trial {
            offered_bps: offered,
            received_bps: received,
            lost_percent,
            out_of_order,
            remeasured,
        });
        if out_of_order > 0 && !remeasured && self.trials.len() < self.max_trials {
            self.remeasure = Some(offered);
            return;
        }
        let passed = lost_percent <= self.threshold;
        if passed {
            self.pass = Some(self.pass.map_or(offered, |p| p.max(offered)));
        } else {
            self.fail = Some(self.fail.map_or(offered, |f| f.min(offered)));
        }
        self.next = match (self.pass, self.fail) {
            (Some(p), None) => (p * 4.0).min(self.ceiling),
            (None, Some(f)) => f / 4.0,
            (Some(p), Some(f)) => (p + f) / 2.0,
            (None, None) => self.next,
        };
    }

    /// The sender could offer no more than `rate`: never propose more (the result
    /// is then the sender's limit, not the path's).
    pub fn cap(&mut self, rate: f64) {
        self.ceiling = self.ceiling.min(rate);
        self.next = self.next.min(self.ceiling);
    }

    /// The highest rate that stayed within the loss threshold (None: every trial failed).
    pub fn result(&self) -> Option<f64> {
        self.pass
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path that loses nothing up to `capacity`, and the excess beyond it.
    fn run(capacity: f64, start: f64, threshold: f64) -> RateSearch {
        let mut s = RateSearch::new(start, 100e9, threshold, 8);
        while let Some(r) = s.next_rate() {
            let received = r.min(capacity);
            s.record(r, received, 100.0 * (r - received) / r, 0);
        }
        s
    }

    #[test]
    fn finds_the_knee_within_eight_trials() {
        // 10 % loss allowed: the best rate is capacity / 0.9.
        let s = run(1e9, 100e6, 10.0);
        let best = s.result().unwrap();
        assert!(s.trials().len() <= 8, "{} trials", s.trials().len());
        assert!(best <= 1e9 / 0.9 && best > 0.8 * 1e9 / 0.9, "{best}");
        // Every passing trial really was within the threshold.
        assert!(
            s.trials()
                .iter()
                .filter(|t| t.offered_bps <= best)
                .all(|t| t.lost_percent <= 10.0)
        );
    }

    #[test]
    fn brackets_downwards_when_the_first_rate_fails() {
        let s = run(20e6, 1e9, 1.0);
        let best = s.result().unwrap();
        assert!(best <= 20e6 / 0.99 && best > 10e6, "{best}");
    }

    #[test]
    fn out_of_order_trials_are_measured_again() {
        let mut s = RateSearch::new(100e6, 10e9, 10.0, 8);
        s.record(100e6, 100e6, 0.0, 3);
        assert_eq!(s.next_rate(), Some(100e6), "the same rate again");
        s.record(100e6, 100e6, 0.0, 0);
        assert!(s.trials()[1].remeasured);
        assert_eq!(s.next_rate(), Some(400e6));
    }

    #[test]
    fn a_sender_limit_caps_the_search() {
        let mut s = RateSearch::new(1e9, 100e9, 1.0, 8);
        s.record(1e9, 1e9, 0.0, 0);
        assert_eq!(s.next_rate(), Some(4e9));
        // The sender managed only 3 Gbit/s of the 4 asked, without loss.
        s.cap(3e9);
        s.record(3e9, 3e9, 0.0, 0);
        assert_eq!(s.next_rate(), None);
        assert_eq!(s.result(), Some(3e9));
    }

    #[test]
    fn stops_at_the_ceiling() {
        let s = run(1e12, 1e9, 1.0);
        assert_eq!(s.result(), Some(100e9));
    }
}
