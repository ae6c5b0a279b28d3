//! This process's CPU use over a test, as iperf3 3.12 reports it (`cpu_util` in
//! src/iperf_util.c): CPU time over wall-clock time, in percent of one core, so a
//! process busy on several cores reports more than 100.
//!
//! iperf3 takes its baseline when the test's streams are set up (the client just
//! after connecting, the server once all streams are accepted) and its end sample
//! when the test ends; the omit period is not excluded.

use std::time::{Duration, Instant};

/// A reading of this process's CPU clocks and the wall clock.
#[derive(Debug, Clone, Copy)]
pub struct CpuSample {
    /// getrusage(RUSAGE_SELF) `ru_utime`, all threads.
    user: Duration,
    /// getrusage(RUSAGE_SELF) `ru_stime`, all threads.
    system: Duration,
    /// CLOCK_PROCESS_CPUTIME_ID: what glibc's clock(3) reads, which is what iperf3's
    /// total uses (not user + system).
    process: Duration,
    wall: Instant,
}

/// CPU use between two samples, percent of one core.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub struct CpuUtil {
    pub total: f64,
    pub user: f64,
    pub system: f64,
}

impl CpuSample {
    pub fn now() -> CpuSample {
        let wall = Instant::now();
        // SAFETY: both calls only write the struct passed to them, which lives on
        // this stack frame. RUSAGE_SELF and CLOCK_PROCESS_CPUTIME_ID are always valid
        // on Linux, so they cannot fail; a zeroed reading stands in if they ever do.
        let (ru, ts) = unsafe {
            let mut ru: libc::rusage = std::mem::zeroed();
            if libc::getrusage(libc::RUSAGE_SELF, &mut ru) != 0 {
                ru = std::mem::zeroed();
            }
            let mut ts: libc::timespec = std::mem::zeroed();
            if libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) != 0 {
                ts = std::mem::zeroed();
            }
            (ru, ts)
        };
        CpuSample {
            user: timeval(ru.ru_utime),
            system: timeval(ru.ru_stime),
            process: Duration::new(
                ts.tv_sec.max(0) as u64,
                ts.tv_nsec.clamp(0, 999_999_999) as u32,
            ),
            wall,
        }
    }
}

fn timeval(tv: libc::timeval) -> Duration {
    Duration::new(tv.tv_sec.max(0) as u64, 0)
        + Duration::from_micros(tv.tv_usec.clamp(0, 999_999) as u64)
}

/// CPU used between `start` and `end` over the wall time between them, in percent:
/// total from the process CPU clock, user and system from getrusage, as iperf3
/// computes them. All zero when no wall time passed (iperf3 would divide by zero).
pub fn utilization(start: &CpuSample, end: &CpuSample) -> CpuUtil {
    let wall = end.wall.saturating_duration_since(start.wall).as_secs_f64();
    if wall <= 0.0 {
        return CpuUtil::default();
    }
    let pct = |a: Duration, b: Duration| b.saturating_sub(a).as_secs_f64() / wall * 100.0;
    CpuUtil {
        total: pct(start.process, end.process),
        user: pct(start.user, end.user),
        system: pct(start.system, end.system),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(user_ms: u64, system_ms: u64, process_ms: u64, wall: Instant) -> CpuSample {
        CpuSample {
            user: Duration::from_millis(user_ms),
            system: Duration::from_millis(system_ms),
            process: Duration::from_millis(process_ms),
            wall,
        }
    }

    #[test]
    fn utilization_is_cpu_time_over_wall_time_per_clock() {
        let t0 = Instant::now();
        let start = sample(1_000, 500, 1_500, t0);
        // 2 s of wall time: 1.5 s of user, 0.5 s of system, 2.1 s of process time.
        let end = sample(2_500, 1_000, 3_600, t0 + Duration::from_secs(2));
        let u = utilization(&start, &end);
        assert!((u.total - 105.0).abs() < 1e-9, "{u:?}");
        assert!((u.user - 75.0).abs() < 1e-9, "{u:?}");
        assert!((u.system - 25.0).abs() < 1e-9, "{u:?}");
        // Nothing used: zero; no wall time: zero rather than a division by it.
        assert_eq!(
            utilization(
                &start,
                &sample(1_000, 500, 1_500, t0 + Duration::from_secs(1))
            ),
            CpuUtil::default()
        );
        assert_eq!(utilization(&start, &start), CpuUtil::default());
    }

    /// The clocks read this process: work shows on the process clock and in
    /// getrusage alike, however long the machine takes to give it the CPU.
    #[test]
    fn the_clocks_count_this_process_work() {
        let start = CpuSample::now();
        let want = Duration::from_millis(50);
        let mut x = 0u64;
        let mut end = start;
        while end.process.saturating_sub(start.process) < want {
            assert!(
                start.wall.elapsed() < Duration::from_secs(60),
                "the process clock never counted {want:?} of work"
            );
            for i in 0..10_000u64 {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
            }
            end = CpuSample::now();
        }
        let process = end.process - start.process;
        let rusage = (end.user + end.system).saturating_sub(start.user + start.system);
        // Other threads of a test process add to both clocks alike; getrusage
        // counts in microseconds, sampled at the scheduler's tick.
        let off = process.abs_diff(rusage);
        assert!(
            off <= process / 5 + Duration::from_millis(10),
            "process clock {process:?}, getrusage {rusage:?}"
        );
    }
}
