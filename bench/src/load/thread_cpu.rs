//! How busy each of the generator's own threads was: the figure that says whether the
//! generator, rather than the server, set the pace of a run.
//!
//! Owns: [`ThreadCpu`] (one sending or receiving thread's CPU time over its life and over the
//! measurement window, in cores: 1.0 = one core fully busy) and [`CpuMeter`], which a
//! thread ticks from its own loop so the window is cut where the thread sees it start and
//! end, read with `CLOCK_THREAD_CPUTIME_ID` (the calling thread's own CPU time).
//!
//! Never: reads another thread's clock, or decides anything from the figures.

use serde::Serialize;

use crate::load::schedule::now_ns;

/// What one generator thread used.
#[derive(Debug, Clone, Serialize, Default, PartialEq)]
pub struct ThreadCpu {
    /// `receive` or `send`.
    pub role: &'static str,
    /// Its number among the threads of its role.
    pub index: usize,
    /// The CPU it was pinned to (`null`: not pinned).
    pub cpu: Option<usize>,
    /// Streams it served.
    pub streams: usize,
    /// CPU seconds over its whole life.
    pub cpu_s: f64,
    /// CPU time over wall time across its whole life (joining excluded, drain included).
    pub busy_cores: f64,
    /// CPU time over wall time inside the measurement window (`null` when the thread did
    /// not live through the whole window).
    pub window_busy_cores: Option<f64>,
}

/// This thread's CPU time so far, nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    let mut spec = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `spec` is a valid timespec for the call; a failure leaves it zero.
    unsafe {
        libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut spec);
    }
    let seconds = u64::try_from(spec.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(spec.tv_nsec).unwrap_or(0);
    seconds * 1_000_000_000 + nanos
}

/// A (wall, CPU) reading, both nanoseconds.
#[derive(Debug, Clone, Copy)]
struct Reading {
    wall_ns: u64,
    cpu_ns: u64,
}

impl Reading {
    fn now() -> Self {
        Self {
            wall_ns: now_ns(),
            cpu_ns: thread_cpu_ns(),
        }
    }
}

/// Cuts one thread's CPU time at the window's edges (module docs).
#[derive(Debug, Clone)]
pub struct CpuMeter {
    measure_from_ns: u64,
    measure_to_ns: u64,
    born: Reading,
    window_start: Option<Reading>,
    window_end: Option<Reading>,
}

impl CpuMeter {
    /// Starts metering the calling thread for a window `[from, to)` of Unix ns.
    pub fn start(measure_from_ns: u64, measure_to_ns: u64) -> Self {
        Self {
            measure_from_ns,
            measure_to_ns,
            born: Reading::now(),
            window_start: None,
            window_end: None,
        }
    }

    /// Called from the thread's loop with the current time: reads the CPU clock only at the
    /// two edges.
    pub fn tick(&mut self, now_ns: u64) {
        if self.window_start.is_none() && now_ns >= self.measure_from_ns {
            self.window_start = Some(Reading::now());
        }
        if self.window_end.is_none() && now_ns >= self.measure_to_ns {
            self.window_end = Some(Reading::now());
        }
    }

    /// The figures, at the end of the thread's life.
    pub fn finish(
        mut self,
        role: &'static str,
        index: usize,
        cpu: Option<usize>,
        streams: usize,
    ) -> ThreadCpu {
        let died = Reading::now();
        self.tick(died.wall_ns);
        let busy = |from: Reading, to: Reading| {
            let wall = to.wall_ns.saturating_sub(from.wall_ns);
            (wall > 0).then(|| to.cpu_ns.saturating_sub(from.cpu_ns) as f64 / wall as f64)
        };
        let window = match (self.window_start, self.window_end) {
            (Some(start), Some(end)) if start.wall_ns <= self.measure_from_ns + WINDOW_SLACK_NS => {
                busy(start, end)
            }
            _ => None,
        };
        let round = |value: f64| crate::load::rounding::round(value, 3);
        ThreadCpu {
            role,
            index,
            cpu,
            streams,
            cpu_s: round(died.cpu_ns.saturating_sub(self.born.cpu_ns) as f64 / 1e9),
            busy_cores: round(busy(self.born, died).unwrap_or(0.0)),
            window_busy_cores: window.map(round),
        }
    }
}

/// A thread that first looked at the clock this long after the window opened did not see
/// the whole window (it started late): its window figure would not be comparable.
const WINDOW_SLACK_NS: u64 = 50_000_000;

#[cfg(test)]
mod tests {
    use super::*;

    /// Spins until this thread has used `nanos` of CPU, ticking `meter` all along.
    fn spin_for(meter: &mut CpuMeter, nanos: u64) {
        let until = thread_cpu_ns() + nanos;
        while thread_cpu_ns() < until {
            meter.tick(now_ns());
        }
    }

    #[test]
    fn the_window_sees_the_spin_and_the_life_also_the_sleep() {
        let now = now_ns();
        // The window closes before the spin ends, so it holds spinning only.
        let mut meter = CpuMeter::start(now, now + 20_000_000);
        spin_for(&mut meter, 40_000_000);
        std::thread::sleep(std::time::Duration::from_millis(40));
        let figures = meter.finish("receive", 3, Some(1), 7);
        assert_eq!(
            (figures.role, figures.index, figures.cpu, figures.streams),
            ("receive", 3, Some(1), 7)
        );
        assert!(figures.cpu_s >= 0.039, "{figures:?}");
        // 40 ms of CPU and 40 ms asleep: at most half a core over the life, however much
        // the spin was preempted (it then took longer than 40 ms of wall time)...
        assert!((0.01..=0.55).contains(&figures.busy_cores), "{figures:?}");
        // ...and a figure for the window, which saw spinning only: some CPU, at most a core.
        // (Whether it exceeds the life's figure depends on how much the scheduler preempted
        // the spin inside the window, so a loaded machine decides that, not the meter.)
        let window = figures
            .window_busy_cores
            .expect("the whole window was seen");
        assert!(window > 0.0 && window <= 1.05, "{figures:?}");
    }

    #[test]
    fn a_thread_that_missed_the_window_start_reports_no_window_figure() {
        let now = now_ns();
        let mut meter = CpuMeter::start(now - 1_000_000_000, now + 1);
        meter.tick(now_ns());
        assert_eq!(meter.finish("send", 0, None, 1).window_busy_cores, None);
    }
}
