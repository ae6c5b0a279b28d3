//! One stage of a shaper: a FIFO tail-drop queue paced in virtual time, which
//! takes a super-packet whole but meters it as the frames it carries.
//!
//! Offered one at a time, the N frames of a super-packet would start at
//! `start`, `start + step`, ... (`step`: one frame's bits at the stage's rate),
//! each counted as waiting until its start, and each dropped on its own when
//! the queue is full. Taken whole, the super-packet starts with its first
//! frame and moves the stage's clock by all N; the frames behind the first
//! stay counted as waiting until their own starts (the `Ghost`), so later
//! packets find the queue as long as they would have. A super-packet the queue
//! would take only part of is not taken: its caller offers its frames one by
//! one.

use std::time::{Duration, Instant};

/// The frames of the last super-packet to leave the stage whole that, one at
/// a time, would still be waiting: frame `k` (1..=n) until `first + k * step`.
/// The stage's packets leave in order, each after the last one's frames have
/// had their time, so one such record per stage is all there is to keep.
#[derive(Debug, Clone, Copy, Default)]
struct Ghost {
    first: Option<Instant>,
    step: Duration,
    n: u32,
}

impl Ghost {
    fn pending(&self, now: Instant) -> u32 {
        let Some(first) = self.first else {
            return 0;
        };
        if self.step.is_zero() {
            return 0;
        }
        let gone = now.saturating_duration_since(first).as_nanos() / self.step.as_nanos();
        u128::from(self.n).saturating_sub(gone) as u32
    }
}

/// What a stage would do with an offered packet of one or more frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Admission {
    /// All of it, its first frame starting at this time.
    Take(Instant),
    /// The queue is full for its first frame: every frame would be dropped.
    Drop,
    /// Some frames would be taken, the first starting at this time, and the
    /// rest dropped.
    Partial(Instant),
}

/// The time `bits` take at `bps`.
pub(super) fn bits_time(bits: f64, bps: f64) -> Duration {
    Duration::from_secs_f64(bits / bps)
}

/// A packet of `frames` frames costing `bits` in all.
#[derive(Debug, Clone, Copy)]
pub(super) struct Frames {
    pub(super) n: u32,
    pub(super) bits: f64,
}

impl Frames {
    #[cfg(test)]
    pub(super) fn one(bits: f64) -> Frames {
        Frames { n: 1, bits }
    }

    fn step(&self, bps: f64) -> Duration {
        bits_time(self.bits / f64::from(self.n.max(1)), bps)
    }

    /// When its last frame starts, its first starting at `start`: the packet
    /// leaves whole then, so no byte of it is out sooner than the frames one
    /// at a time would be (a burst of all of them at `start` would pass up to
    /// a whole super-packet more than the rate in any span).
    pub(super) fn last_start(&self, start: Instant, bps: f64) -> Instant {
        start + self.step(bps) * (self.n.max(1) - 1)
    }
}

/// A stage's queue limits: a queue takes a frame while it holds fewer than
/// `packets`, or while the frame would wait no longer than `max_wait`.
#[derive(Debug, Clone, Copy)]
pub(super) struct QueueLimit {
    pub(super) packets: u32,
    pub(super) max_wait: Duration,
}

#[derive(Debug)]
pub(super) struct Pace {
    /// When the stage is free for the next frame (virtual time).
    free_at: Instant,
    /// Frames of packets waiting in this stage.
    queued: u32,
    ghost: Ghost,
}

impl Pace {
    pub(super) fn new(now: Instant) -> Pace {
        Pace {
            free_at: now,
            queued: 0,
            ghost: Ghost::default(),
        }
    }

    /// Frames waiting at `now`, those of super-packets gone ahead included.
    fn waiting(&self, now: Instant) -> u32 {
        self.queued + self.ghost.pending(now)
    }

    /// What the stage would do with `f` reaching it at `at` (no later than
    /// `now`), frame by frame: frame `k` starts `k` steps after the first and
    /// finds the frames before it that had to wait still in the queue. The
    /// test only grows with `k`, so the first and last frames decide.
    pub(super) fn admit(
        &self,
        at: Instant,
        now: Instant,
        f: Frames,
        bps: f64,
        limit: QueueLimit,
    ) -> Admission {
        let start = self.free_at.max(at);
        let step = f.step(bps);
        let waiting = self.waiting(now);
        let dropped = |k: u32| {
            let start_k = start + step * k;
            // The frames before k that waited: all of them, or all but the
            // first when it left at once.
            let before = if start > now || step.is_zero() {
                k
            } else {
                k.saturating_sub(1)
            };
            start_k > now && waiting + before >= limit.packets && start_k - now > limit.max_wait
        };
        if dropped(0) {
            Admission::Drop
        } else if dropped(f.n.max(1) - 1) {
            Admission::Partial(start)
        } else {
            Admission::Take(start)
        }
    }

    /// Takes `f`, admitted to start at `start`: the stage is busy with it for
    /// all its bits. Returns the frames counted as waiting (to `release`
    /// later); a packet starting at once waits for nothing, but the frames
    /// behind its first would have, and are counted until their time.
    pub(super) fn take(&mut self, start: Instant, now: Instant, f: Frames, bps: f64) -> u32 {
        self.free_at = start + bits_time(f.bits, bps);
        if start > now {
            self.queued += f.n;
            f.n
        } else {
            self.leave(start, f, bps);
            0
        }
    }

    /// A packet that waited here with `counted` frames leaves the stage at
    /// `start` (its first frame's start).
    pub(super) fn release(&mut self, counted: u32, start: Instant, f: Frames, bps: f64) {
        self.queued = self.queued.saturating_sub(counted);
        self.leave(start, f, bps);
    }

    fn leave(&mut self, start: Instant, f: Frames, bps: f64) {
        if f.n > 1 {
            self.ghost = Ghost {
                first: Some(start),
                step: f.step(bps),
                n: f.n - 1,
            };
        }
    }

    /// Whether frames still wait here (an idle flow is forgotten only when none).
    pub(super) fn idle(&self) -> bool {
        self.queued == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn frames_behind_the_first_count_as_waiting_until_their_time() {
        let t0 = Instant::now();
        // 12 Mbit/s: a 12000-bit frame a millisecond.
        let bps = 12e6;
        let mut p = Pace::new(t0);
        let four = Frames {
            n: 4,
            bits: 48_000.0,
        };
        let limit = QueueLimit {
            packets: 100,
            max_wait: Duration::ZERO,
        };
        assert_eq!(p.admit(t0, t0, four, bps, limit), Admission::Take(t0));
        assert_eq!(p.take(t0, t0, four, bps), 0, "it left at once");
        for (ms, waiting) in [(0, 3), (1, 2), (2, 1), (3, 0), (9, 0)] {
            assert_eq!(p.waiting(t0 + MS * ms), waiting, "at {ms} ms");
        }
        // The next one starts when the four are through, and waits.
        assert_eq!(
            p.admit(t0, t0, four, bps, limit),
            Admission::Take(t0 + 4 * MS)
        );
        assert_eq!(p.take(t0 + 4 * MS, t0, four, bps), 4);
        assert_eq!(p.waiting(t0), 7);
        p.release(4, t0 + 4 * MS, four, bps);
        assert_eq!(p.waiting(t0 + 4 * MS), 3);
        assert!(p.idle());
    }

    #[test]
    fn a_queue_full_for_the_first_frame_drops_all_and_for_the_last_part() {
        let t0 = Instant::now();
        let bps = 12e6;
        let limit = QueueLimit {
            packets: 5,
            max_wait: Duration::ZERO,
        };
        let mut p = Pace::new(t0);
        let one = Frames::one(12_000.0);
        for _ in 0..4 {
            if let Admission::Take(s) = p.admit(t0, t0, one, bps, limit) {
                p.take(s, t0, one, bps);
            }
        }
        // 3 waiting (the first left at once): room for 2 more frames.
        assert_eq!(p.waiting(t0), 3);
        let two = Frames {
            n: 2,
            bits: 24_000.0,
        };
        let three = Frames {
            n: 3,
            bits: 36_000.0,
        };
        assert!(matches!(
            p.admit(t0, t0, two, bps, limit),
            Admission::Take(_)
        ));
        assert!(matches!(
            p.admit(t0, t0, three, bps, limit),
            Admission::Partial(_)
        ));
        p.queued = 5;
        assert_eq!(p.admit(t0, t0, one, bps, limit), Admission::Drop);
    }
}
