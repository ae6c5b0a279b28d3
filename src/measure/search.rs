//! The UDP rate search, as the NVR500 study did it by hand and RFC 2544 describes it: find
//! the highest offered rate whose receiver-side loss stays within a threshold.
//! Bracket (multiply the rate until a trial fails), then bisect, at most
//! `max_trials` trials. From a default start, the bracket widens by 4 at each
//! step; from a predicted rate (`RateSearch::predicted`), by 1.1 first, so that
//! a right prediction is bracketed by the first two trials and one bisection
//! ends the search, then by more and more (1.1 again, 1.4, 2, 4) as trials
//! show the prediction wrong. Out of order, the NVR500 study's rule whole: "if UDP shows out
//! of order, measure again; if it persists, lower -b". A trial that shows
//! packets out of order (any, `Trial::shows_out_of_order`) is measured again
//! once at the same rate; when the second one shows them too, the reordering
//! persisted and the trial fails at that rate (`Trial::reordered`), as one
//! over the loss threshold does: the search bisects below it, a confirmation
//! steps down. Pure: it proposes rates and is told the outcomes.

use super::results::Trial;

/// How finely the search bisects, and the smallest step down of a
/// confirmation: a fraction of the rate.
const RESOLUTION: f64 = 0.05;

/// The factors the bracket widens by from a default start: the n-th step
/// while every trial so far passed (or failed) multiplies (or divides) by the
/// n-th factor, the last one repeated.
const BLIND_STEPS: &[f64] = &[4.0];

/// The same from a predicted rate. 1.1 is a bracket one bisection closes to
/// `RESOLUTION` (at most (1 + r) / (1 - r)): twice, so that a prediction
/// 10 % off is bracketed by the third trial; then growing toward the
/// default start's 4, for a prediction that is far off.
const PREDICTED_STEPS: &[f64] = &[1.1, 1.1, 1.4, 2.0, 4.0];

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
    /// The factors the bracket widens by, and how many steps it took so far.
    steps: &'static [f64],
    widened: usize,
}

impl RateSearch {
    /// `start`: the first rate tried (bit/s), when nothing predicts the
    /// answer; `ceiling`: never offer more.
    pub fn new(start: f64, ceiling: f64, threshold_percent: f64, max_trials: usize) -> Self {
        RateSearch {
            threshold: threshold_percent,
            max_trials,
            pass: None,
            fail: None,
            next: start.min(ceiling),
            ceiling,
            resolution: RESOLUTION,
            trials: Vec::new(),
            remeasure: None,
            steps: BLIND_STEPS,
            widened: 0,
        }
    }

    /// A search from `predicted`, the rate (bit/s) expected to be the answer:
    /// tried first, then 1.1 times higher or lower (the bracket, when the
    /// prediction is right), then wider.
    pub fn predicted(
        predicted: f64,
        ceiling: f64,
        threshold_percent: f64,
        max_trials: usize,
    ) -> Self {
        RateSearch {
            steps: PREDICTED_STEPS,
            ..RateSearch::new(predicted, ceiling, threshold_percent, max_trials)
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
        self.record_trial(Trial {
            offered_bps: offered,
            received_bps: received,
            lost_percent,
            out_of_order,
            remeasured: false,
            sender_limited: false,
            reordered: false,
        });
    }

    /// The outcome of a trial (`remeasured` and `reordered` are set here).
    pub fn record_trial(&mut self, mut trial: Trial) {
        let remeasured = self.remeasure.take().is_some();
        trial.remeasured = remeasured;
        trial.reordered = remeasured && trial.shows_out_of_order();
        let offered = trial.offered_bps;
        let out_of_order = trial.shows_out_of_order();
        let passed = trial.passes(self.threshold);
        self.trials.push(trial);
        // Out of trials, a first reordering cannot be measured again: judged
        // by its loss alone (the confirmation runs still hold the figure to
        // the whole rule).
        if out_of_order && !remeasured && self.trials.len() < self.max_trials {
            self.remeasure = Some(offered);
            return;
        }
        if passed {
            self.pass = Some(self.pass.map_or(offered, |p| p.max(offered)));
        } else {
            self.fail = Some(self.fail.map_or(offered, |f| f.min(offered)));
        }
        self.next = match (self.pass, self.fail) {
            (Some(p), None) => (p * self.widen()).min(self.ceiling),
            (None, Some(f)) => f / self.widen(),
            (Some(p), Some(f)) => (p + f) / 2.0,
            (None, None) => self.next,
        };
    }

    /// The factor of the bracket's next widening step, counted.
    fn widen(&mut self) -> f64 {
        let step = self.steps[self.widened.min(self.steps.len() - 1)];
        self.widened += 1;
        step
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

/// Step-downs a confirmation may take before the cell is given up.
pub const MAX_STEP_DOWNS: usize = 6;

/// The full-length runs at the rate a search found, each held to the search's
/// own rule. Short trials can overshoot (a queue that swallows a one-second
/// trial's excess overflows in a longer run), so a run whose loss is over the
/// threshold steps the rate down and is made again; a cell none of whose runs
/// passes has no figure. A run with packets out of order is made again once at
/// the same rate; when that one has packets out of order too, the reordering
/// persisted: it fails and steps the rate down as loss does (the NVR500 study's rule).
/// Pure: it proposes rates and is told the outcomes.
#[derive(Debug, Clone)]
pub struct Confirmation {
    threshold: f64,
    rate: f64,
    wanted: usize,
    steps_left: usize,
    runs: Vec<Trial>,
    remeasure: bool,
    given_up: bool,
}

impl Confirmation {
    /// `wanted` runs within `threshold_percent` loss, starting at `rate` bit/s.
    pub fn new(rate: f64, wanted: usize, threshold_percent: f64) -> Self {
        Confirmation {
            threshold: threshold_percent,
            rate,
            wanted,
            steps_left: MAX_STEP_DOWNS,
            runs: Vec::new(),
            remeasure: false,
            given_up: false,
        }
    }

    /// The rate of the next run, or None when enough runs passed or the
    /// step-downs are spent.
    pub fn next_rate(&self) -> Option<f64> {
        // A run to be made again comes first: the one it stands for does not
        // count yet.
        (!self.given_up && (self.remeasure || self.passing().count() < self.wanted))
            .then_some(self.rate)
    }

    /// The outcome of the run just made (`remeasured` and `reordered` are set
    /// here).
    pub fn record(&mut self, mut run: Trial) {
        run.remeasured = std::mem::take(&mut self.remeasure);
        run.reordered = run.remeasured && run.shows_out_of_order();
        let (offered, received, ooo, passed) = (
            run.offered_bps,
            run.received_bps,
            run.shows_out_of_order(),
            run.passes(self.threshold),
        );
        let first_try = !run.remeasured;
        self.runs.push(run);
        if ooo && first_try {
            self.remeasure = true;
        } else if !passed {
            if self.steps_left == 0 {
                self.given_up = true;
            } else {
                self.steps_left -= 1;
                self.rate = step_down(self.rate.min(offered), received, self.threshold);
            }
        }
    }

    /// Every run made, in order, the ones over the threshold and the ones
    /// made again included.
    pub fn runs(&self) -> &[Trial] {
        &self.runs
    }

    /// The runs that count: within the threshold and not made again.
    pub fn passing(&self) -> impl Iterator<Item = &Trial> {
        (0..self.runs.len())
            .filter(|i| self.counts(*i))
            .map(|i| &self.runs[i])
    }

    /// Whether run `i` counts: within the threshold and not made again.
    pub fn counts(&self, i: usize) -> bool {
        let superseded = self.runs.get(i + 1).is_some_and(|n| n.remeasured)
            || (self.remeasure && i + 1 == self.runs.len());
        self.runs
            .get(i)
            .is_some_and(|t| !superseded && t.passes(self.threshold))
    }

    /// The cell's figure: the highest offered rate of a passing run (None:
    /// none passed).
    pub fn result(&self) -> Option<f64> {
        self.passing().map(|t| t.offered_bps).reduce(f64::max)
    }
}

/// The rate after a run at `rate` that failed (too much loss, or reordering
/// that persisted) and received `received`: the
/// rate at which that much received would be exactly the threshold's loss,
/// but at least the search's resolution (5 %) and at most 50 % lower than
/// `rate`.
fn step_down(rate: f64, received: f64, threshold: f64) -> f64 {
    let at_threshold = received / (1.0 - threshold.min(99.0) / 100.0);
    at_threshold.clamp(0.5 * rate, (1.0 - RESOLUTION) * rate)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_at(offered: f64, received: f64) -> Trial {
        Trial {
            offered_bps: offered,
            received_bps: received,
            lost_percent: 100.0 * (offered - received) / offered,
            out_of_order: 0,
            remeasured: false,
            sender_limited: false,
            reordered: false,
        }
    }

    #[test]
    fn a_confirmation_within_the_rule_keeps_the_rate() {
        let mut c = Confirmation::new(500e6, 3, 10.0);
        for _ in 0..3 {
            assert_eq!(c.next_rate(), Some(500e6));
            c.record(run_at(500e6, 480e6));
        }
        assert_eq!(c.next_rate(), None);
        assert_eq!(c.result(), Some(500e6));
        assert_eq!(c.passing().count(), 3);
    }

    #[test]
    fn an_overshot_rate_steps_down_until_a_run_passes() {
        // The search found 1110 Mbit/s on a line that carries 992: 10.6 % loss.
        let mut c = Confirmation::new(1110e6, 2, 10.0);
        c.record(run_at(1110e6, 992e6));
        let next = c.next_rate().unwrap();
        assert!(next <= 0.95 * 1110e6, "{next}");
        // 5 % lower: 1054, which the line carries within the threshold.
        c.record(run_at(next, 992e6));
        c.record(run_at(next, 992e6));
        assert_eq!(c.next_rate(), None);
        assert_eq!(c.result(), Some(next));
        assert_eq!(c.runs().len(), 3);
        assert_eq!(c.passing().count(), 2);
    }

    #[test]
    fn a_far_overshoot_steps_by_what_the_run_received() {
        let mut c = Confirmation::new(1000e6, 1, 10.0);
        c.record(run_at(1000e6, 600e6));
        // 600 received is 10 % loss at 667.
        let next = c.next_rate().unwrap();
        assert!((next - 600e6 / 0.9).abs() < 1.0, "{next}");
        c.record(run_at(next, 100e6));
        // Never more than halved in one step.
        assert_eq!(c.next_rate(), Some(next / 2.0));
    }

    #[test]
    fn a_cell_that_never_passes_has_no_figure() {
        let mut c = Confirmation::new(100e6, 3, 1.0);
        while let Some(r) = c.next_rate() {
            c.record(run_at(r, r * 0.9));
        }
        assert_eq!(c.runs().len(), MAX_STEP_DOWNS + 1);
        assert_eq!(c.result(), None);
    }

    #[test]
    fn out_of_order_runs_are_made_again_and_only_the_second_counts() {
        let mut c = Confirmation::new(100e6, 1, 10.0);
        // Out of order and over the threshold: made again at the same rate.
        c.record(Trial {
            out_of_order: 2,
            ..run_at(100e6, 80e6)
        });
        assert_eq!(c.next_rate(), Some(100e6));
        c.record(run_at(100e6, 95e6));
        assert!(c.runs()[1].remeasured);
        assert_eq!(c.next_rate(), None);
        assert_eq!(c.result(), Some(100e6));
        assert!(!c.counts(0) && c.counts(1));
    }

    #[test]
    fn reordering_that_persists_in_a_confirmation_steps_the_rate_down() {
        let mut c = Confirmation::new(875e6, 2, 10.0);
        let reordered = |offered: f64, n: u64| Trial {
            out_of_order: n,
            ..run_at(offered, offered)
        };
        // Out of order, within the loss threshold: made again at once.
        c.record(reordered(875e6, 1225));
        assert_eq!(c.next_rate(), Some(875e6));
        // Out of order again: the reordering persisted, the run fails there.
        c.record(reordered(875e6, 5321));
        assert!(c.runs()[1].remeasured && c.runs()[1].reordered);
        assert!(!c.counts(0) && !c.counts(1));
        let lower = c.next_rate().unwrap();
        assert!((lower - 0.95 * 875e6).abs() < 1.0, "5 % lower: {lower}");
        // Clean below: those runs count and the figure is the lower rate.
        c.record(run_at(lower, lower));
        c.record(run_at(lower, lower));
        assert_eq!(c.next_rate(), None);
        assert_eq!(c.result(), Some(lower));
        // A reordering that never goes away leaves no figure.
        let mut c = Confirmation::new(100e6, 1, 10.0);
        while let Some(r) = c.next_rate() {
            c.record(reordered(r, 10));
        }
        assert_eq!(c.result(), None);
        assert_eq!(c.runs().len(), 2 * (MAX_STEP_DOWNS + 1));
    }

    #[test]
    fn reordering_once_then_a_clean_run_keeps_the_rate() {
        let mut c = Confirmation::new(500e6, 1, 10.0);
        c.record(Trial {
            out_of_order: 40,
            ..run_at(500e6, 500e6)
        });
        c.record(run_at(500e6, 500e6));
        assert!(!c.runs()[1].reordered);
        assert_eq!(c.result(), Some(500e6));
    }

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
    fn a_clean_remeasurement_passes_the_trial() {
        let mut s = RateSearch::new(100e6, 10e9, 10.0, 8);
        s.record(100e6, 100e6, 0.0, 3);
        s.record(100e6, 100e6, 0.0, 0);
        assert!(!s.trials()[1].reordered);
        assert_eq!(s.result(), Some(100e6), "it passed at 100");
    }

    #[test]
    fn reordering_that_persists_fails_the_search_trial_and_the_search_goes_below() {
        let mut s = RateSearch::new(100e6, 10e9, 10.0, 8);
        // Passes at 100; at 400 out of order twice, without loss.
        s.record(100e6, 100e6, 0.0, 0);
        assert_eq!(s.next_rate(), Some(400e6));
        s.record(400e6, 400e6, 0.0, 50);
        assert_eq!(s.next_rate(), Some(400e6), "measured again");
        s.record(400e6, 400e6, 0.0, 60);
        assert!(s.trials()[2].reordered && !s.trials()[2].passes(10.0));
        // Failed at 400: bisect between 100 and 400.
        assert_eq!(s.next_rate(), Some(250e6));
        s.record(250e6, 250e6, 0.0, 0);
        assert_eq!(s.result(), Some(250e6));
        // Reordered at every rate, the first time only, the search is not lowered.
        let mut s = RateSearch::new(100e6, 10e9, 10.0, 8);
        s.record(100e6, 100e6, 0.0, 5);
        s.record(100e6, 100e6, 0.0, 0);
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

    /// A simulated path: what gets through is at most `capacity`, the
    /// sender offers at most `sender`, and above `reorders_above` every
    /// trial shows datagrams out of order.
    struct SimPath {
        capacity: f64,
        sender: f64,
        reorders_above: f64,
    }

    impl SimPath {
        fn of(capacity: f64) -> SimPath {
            SimPath {
                capacity,
                sender: f64::INFINITY,
                reorders_above: f64::INFINITY,
            }
        }

        /// The trial at `asked` bit/s, as `udp_trial` reads one.
        fn trial(&self, asked: f64) -> Trial {
            let offered = asked.min(self.sender);
            let received = offered.min(self.capacity);
            Trial {
                out_of_order: u64::from(offered > self.reorders_above),
                sender_limited: offered < 0.95 * asked,
                ..run_at(offered, received)
            }
        }

        /// `s` run to its end, as `udp_search` drives it.
        fn search(&self, mut s: RateSearch) -> RateSearch {
            while let Some(r) = s.next_rate() {
                let t = self.trial(r);
                if t.sender_limited {
                    s.cap(t.offered_bps);
                }
                s.record_trial(t);
            }
            s
        }

        /// Today's search from 500 Mbit/s, and one from a prediction of
        /// `capacity` times `error`, at 10 % loss.
        fn both(&self, error: f64) -> (RateSearch, RateSearch) {
            let old = self.search(RateSearch::new(500e6, 100e9, 10.0, 8));
            let knee = self.capacity * error / 0.9;
            let new = self.search(RateSearch::predicted(knee, 100e9, 10.0, 8));
            (old, new)
        }
    }

    /// Capacities from 5 Mbit/s to 20 Gbit/s, none a round multiple of
    /// another.
    fn capacities() -> impl Iterator<Item = f64> {
        (0..24).map(|i| 5e6 * 1.43f64.powi(i))
    }

    /// The answer on a path of `capacity` at 10 % loss.
    fn knee(capacity: f64) -> f64 {
        capacity / 0.9
    }

    #[test]
    fn a_right_prediction_is_bracketed_by_the_first_two_trials() {
        for c in capacities() {
            let (old, new) = SimPath::of(c).both(1.0);
            let found = new.result().unwrap();
            assert!(new.trials().len() <= 3, "{c}: {:?}", new.trials());
            // One passes and one fails among the first two.
            let [a, b] = [&new.trials()[0], &new.trials()[1]];
            assert_ne!(a.passes(10.0), b.passes(10.0), "{c}");
            assert!(found <= knee(c) && found >= (1.0 - RESOLUTION) * knee(c));
            assert!(found >= (1.0 - RESOLUTION) * old.result().unwrap(), "{c}");
        }
    }

    #[test]
    fn a_prediction_within_ten_percent_takes_at_most_four_trials() {
        for c in capacities() {
            for error in [0.9, 0.93, 0.97, 1.03, 1.07, 1.1] {
                let (_, new) = SimPath::of(c).both(error);
                let found = new.result().unwrap();
                assert!(new.trials().len() <= 4, "{c} x {error}: {:?}", new.trials());
                assert!(found <= knee(c) && found >= (1.0 - RESOLUTION) * knee(c));
            }
        }
    }

    /// Today's search and one from a prediction `error` times the capacity,
    /// over every capacity: the found rates agree within the resolution (or
    /// the new one is nearer the answer), and the new search takes at most
    /// two trials more than today's; the trials in all, before and after.
    fn agrees_with_today(error: f64) -> (usize, usize) {
        let (mut before, mut after) = (0, 0);
        for c in capacities() {
            let (old, new) = SimPath::of(c).both(error);
            let (o, n) = (old.result().unwrap(), new.result().unwrap());
            assert!(n <= knee(c), "{c} x {error}: {n} over the answer");
            assert!(n >= (1.0 - RESOLUTION) * o, "{c} x {error}: {n}, today {o}");
            assert!(new.trials().len() <= 8, "{c} x {error}");
            assert!(
                new.trials().len() <= old.trials().len() + 2,
                "{c} x {error}"
            );
            before += old.trials().len();
            after += new.trials().len();
        }
        (before, after)
    }

    #[test]
    fn a_wrong_prediction_finds_what_today_finds() {
        // Right, 20 % high, 50 % low (and 50 % high).
        let (before, right) = agrees_with_today(1.0);
        assert!(right * 2 < before, "{right} trials, today {before}");
        let (before, high) = agrees_with_today(1.2);
        assert!(high < before, "{high} trials, today {before}");
        for error in [0.5, 1.5] {
            agrees_with_today(error);
        }
    }

    #[test]
    fn without_a_prediction_the_search_is_todays() {
        let path = SimPath::of(180e6);
        let today = path.search(RateSearch::new(500e6, 100e9, 10.0, 8));
        let rates: Vec<f64> = today.trials().iter().map(|t| t.offered_bps).collect();
        assert_eq!(&rates[..3], &[500e6, 125e6, 312.5e6], "x4, then bisection");
    }

    #[test]
    fn a_sender_slower_than_the_prediction_ends_the_search_at_its_limit() {
        let path = SimPath {
            sender: 2e9,
            ..SimPath::of(9e9)
        };
        let (old, new) = path.both(1.0);
        assert_eq!(new.trials().len(), 1, "{:?}", new.trials());
        assert!(new.trials()[0].sender_limited);
        assert_eq!(new.result(), Some(2e9));
        assert_eq!(old.result(), Some(2e9));
    }

    #[test]
    fn reordering_below_the_prediction_is_found_as_today() {
        // Datagrams out of order above 70 % of the answer, at every trial:
        // both searches end below that, within the resolution of each other.
        for c in capacities() {
            let path = SimPath {
                reorders_above: 0.7 * knee(c),
                ..SimPath::of(c)
            };
            let (old, new) = path.both(1.0);
            // Today's may spend its trials before any passes.
            let n = new.result().unwrap();
            let o = old.result().unwrap_or(0.0);
            // A last trial cannot be measured again: judged by its loss alone.
            assert!(n <= (1.0 + RESOLUTION) * 0.7 * knee(c), "{c}: {n}");
            let in_order = o.min(0.7 * knee(c));
            assert!(
                n >= (1.0 - 2.0 * RESOLUTION) * in_order,
                "{c}: {n}, today {o}"
            );
            assert!(new.trials().len() <= 8, "{c}");
        }
    }
}
