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
    use std::sync::Mutex;

    // The clocks are process-wide: keep these two tests from measuring each other.
    static SERIAL: Mutex<()> = Mutex::new(());

    #[test]
    fn busy_loop_is_busy() {
        let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        // A loaded machine (a build beside the tests) may give this thread
        // less than half a core for a while: three tries.
        let mut u = None;
        for _ in 0..3 {
            let start = CpuSample::now();
            let mut x = 0u64;
            while start.wall.elapsed() < Duration::from_millis(100) {
                for i in 0..10_000u64 {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
                }
            }
            let got = utilization(&start, &CpuSample::now());
            let done = got.total > 50.0;
            u = Some(got);
            if done {
                break;
            }
        }
        let u = u.expect("measured");
        assert!(u.total > 50.0, "{u:?}");
        // Other tests may run on other threads; they add to both readings alike.
        assert!(
            (u.total - (u.user + u.system)).abs() < 0.1 * u.total + 5.0,
            "{u:?}"
        );
    }

    #[test]
    fn sleeping_is_idle() {
        let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        // Other tests in this process can be busy at the same moment; one quiet
        // attempt out of a few shows the measurement is right.
        let mut seen = Vec::new();
        // The library's other unit tests (NAT tables, segmentation) can keep the
        // process busy for a while: look for a quiet moment for up to 5 s.
        for _ in 0..50 {
            let start = CpuSample::now();
            std::thread::sleep(Duration::from_millis(100));
            let u = utilization(&start, &CpuSample::now());
            if u.total < 20.0 {
                return;
            }
            seen.push(u);
        }
        panic!("never idle: {seen:?}");
    }

    #[test]
    fn no_wall_time_is_zero() {
        let s = CpuSample::now();
        assert_eq!(utilization(&s, &s), CpuUtil::default());
    }
}
