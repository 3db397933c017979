//! Thread CPU clocks: the CPU time each core's thread has used, readable from any thread.
//!
//! Owns: `ThreadCpuClock`, which a core's thread claims once at start (its POSIX per-thread
//! CPU clock) and the scraper reads at scrape time. The core pays nothing per turn: the
//! kernel keeps the clock, so a core blocked in the kernel, idle or stuck, reads exactly what
//! it has used, and `rate()` over it is the core's busy fraction.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

/// No thread has claimed the clock yet.
const UNCLAIMED: i64 = i64::MIN;

/// One thread's CPU clock, claimed by that thread.
#[derive(Debug)]
pub struct ThreadCpuClock {
    clock_id: AtomicI64,
}

impl Default for ThreadCpuClock {
    fn default() -> Self {
        ThreadCpuClock {
            clock_id: AtomicI64::new(UNCLAIMED),
        }
    }
}

impl ThreadCpuClock {
    /// Makes this the clock of the calling thread.
    pub fn claim(&self) {
        let mut clock_id: libc::clockid_t = 0;
        // SAFETY: pthread_self is always valid for the calling thread, and clock_id is a
        // valid place for the answer.
        let status =
            unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &raw mut clock_id) };
        if status == 0 {
            self.clock_id.store(i64::from(clock_id), Ordering::Relaxed);
        }
    }

    /// CPU time the claiming thread has used; `None` before a claim or after it exited.
    pub fn used(&self) -> Option<Duration> {
        let clock_id = self.clock_id.load(Ordering::Relaxed);
        if clock_id == UNCLAIMED {
            return None;
        }
        let clock_id = libc::clockid_t::try_from(clock_id).ok()?;
        let mut time = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: time is a valid timespec to write; a clock of an exited thread is EINVAL.
        if unsafe { libc::clock_gettime(clock_id, &raw mut time) } != 0 {
            return None;
        }
        Some(Duration::new(
            u64::try_from(time.tv_sec).ok()?,
            u32::try_from(time.tv_nsec).ok()?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::ThreadCpuClock;
    use std::sync::Arc;
    use std::sync::mpsc;

    #[test]
    fn an_unclaimed_clock_reads_nothing() {
        assert_eq!(ThreadCpuClock::default().used(), None);
    }

    #[test]
    fn another_thread_reads_what_the_claiming_thread_spent_spinning_and_not_sleeping() {
        let clock = Arc::new(ThreadCpuClock::default());
        let (spun, spun_rx) = mpsc::channel();
        let (done, done_rx) = mpsc::channel::<()>();
        let worker = {
            let clock = Arc::clone(&clock);
            std::thread::spawn(move || {
                clock.claim();
                let start = std::time::Instant::now();
                let mut x = 0u64;
                while start.elapsed() < std::time::Duration::from_millis(200) {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
                spun.send(()).unwrap();
                done_rx.recv().unwrap();
            })
        };
        spun_rx.recv().unwrap();
        let after_spin = clock.used().expect("claimed").as_secs_f64();
        std::thread::sleep(std::time::Duration::from_millis(300));
        let after_sleep = clock.used().expect("still running").as_secs_f64();
        done.send(()).unwrap();
        worker.join().unwrap();
        // The spin used CPU (at least a little even on a loaded machine); the sleep used
        // almost none of the 300 ms that passed.
        assert!(after_spin > 0.001, "spin read {after_spin}");
        assert!(
            after_sleep - after_spin < 0.15,
            "sleep read {}",
            after_sleep - after_spin
        );
    }
}
