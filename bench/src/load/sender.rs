//! The publishing side of the generator: one thread per publisher stream, writing
//! presigned frames (or, for NATS, freshly stamped `PUB` messages) on the schedule.
//!
//! Owns: [`Source`] (where a message's bytes come from), [`SendTask`], the send loop
//! ([`run`]) and its [`SendOutcome`]. Open loop: every message whose intended time has
//! come is written, many per `write` when the thread woke late; the thread then sleeps
//! (`ppoll`, 1 µs timer slack) until the next intended time, and the lag between intended
//! and actual write time is recorded. Closed loop: frames are written back to back in
//! batches as fast as the socket takes them (and, with a window, no further ahead of the
//! cohort's average subscriber than the window), and each write time is published for the
//! subscribers' latency. Inbound bytes are read and discarded (a publisher stream under
//! ALL receives the other publishers' messages, R25) so the broker never resets it for a
//! full queue; a NATS `PING` is answered. Warm-up messages already overdue when the
//! thread starts (signing took longer than estimated) are skipped rather than sent in one
//! burst: they are never measured, a burst would only measure the generator, and DATA
//! index gaps are allowed (R27).
//!
//! Never: signs (that happened before `t0`), verifies, or reconnects.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;

use crate::load::latency::{Latency, LatencySummary};
use crate::load::poller::{tighten_timer_slack, wait_fd};
use crate::load::schedule::{Schedule, now_ns};
use crate::load::shared::Shared;
use crate::load::stamp::{Stamp, payload};

/// Messages gathered into one write: measured on this machine, 16 frames per write moved
/// about 4x more 4 KiB messages than one frame per write (ARCHITECTURE.md §2.6).
const FRAMES_PER_WRITE: u64 = 16;

/// Longest sleep between looks at the socket and the clock.
const IDLE_WAIT: Duration = Duration::from_millis(5);

/// Sleep while the closed loop's window is full (deliveries are counted in batches).
const WINDOW_WAIT: Duration = Duration::from_micros(50);

/// Where message bytes come from.
#[derive(Debug, Clone)]
pub enum Source {
    /// BPS: frames signed before the run, by sequence.
    Presigned(Arc<Vec<Bytes>>),
    /// NATS: `PUB <subject> <size>\r\n<payload>\r\n`, stamped at write time.
    Nats {
        /// The cohort's subject.
        subject: String,
        /// Payload bytes.
        size: usize,
        /// The publisher's global number.
        publisher: u32,
        /// Its cohort.
        cohort: u32,
    },
}

impl Source {
    /// Messages available (`None`: unbounded).
    fn limit(&self) -> Option<u64> {
        match self {
            Self::Presigned(frames) => Some(frames.len() as u64),
            Self::Nats { .. } => None,
        }
    }

    /// Appends message `sequence` to `out`; `stamp_ns` is its intended (open loop) or
    /// actual (closed loop, NATS only) send time.
    fn append(&self, sequence: u64, stamp_ns: u64, out: &mut Vec<u8>) {
        match self {
            Self::Presigned(frames) => {
                if let Some(frame) = usize::try_from(sequence).ok().and_then(|at| frames.get(at)) {
                    out.extend_from_slice(frame);
                }
            }
            Self::Nats {
                subject,
                size,
                publisher,
                cohort,
            } => {
                let stamp = Stamp {
                    publisher: *publisher,
                    sequence,
                    intended_ns: stamp_ns,
                    cohort: *cohort,
                };
                let body = payload(&stamp, *size);
                out.extend_from_slice(format!("PUB {subject} {}\r\n", body.len()).as_bytes());
                out.extend_from_slice(&body);
                out.extend_from_slice(b"\r\n");
            }
        }
    }
}

/// One publisher stream's work.
#[derive(Debug)]
pub struct SendTask {
    /// The publisher's global number.
    pub publisher: u32,
    /// The joined (and, if pending, claimed) stream.
    pub stream: TcpStream,
    /// The message bytes.
    pub source: Source,
    /// The pacing.
    pub schedule: Schedule,
    /// No message intended (open) or started (closed) at or after this time is sent.
    pub end_ns: u64,
    /// Give up on a backlog at this time.
    pub deadline_ns: u64,
    /// The publisher's cohort.
    pub cohort: u32,
    /// Closed loop: how many messages the publisher may be ahead of its cohort's average
    /// subscriber (0: no window, only TCP pushes back).
    pub window: u64,
}

/// What one publisher did.
#[derive(Debug, Clone)]
pub struct SendOutcome {
    /// Its global number.
    pub publisher: u32,
    /// Messages written.
    pub sent: u64,
    /// Messages inside the measurement window that were due (open loop) or written
    /// (closed loop): each should reach every subscriber of the cohort.
    pub measured: u64,
    /// Of those, the ones actually written (open loop: fewer when the stream pushed back).
    pub measured_sent: u64,
    /// Closed loop: the presigned messages ran out before the end.
    pub exhausted: bool,
    /// Open loop: messages still unsent at the deadline (the generator or the broker could
    /// not keep up).
    pub backlog: u64,
    /// Open loop: write time minus intended time, µs.
    pub lag: LatencySummary,
    /// Open loop: warm-up messages skipped because they were overdue at the start.
    pub skipped: u64,
    /// The thread ran with real-time priority (open loop only).
    pub realtime: bool,
    /// Why the stream failed, if it did.
    pub error: Option<String>,
}

/// Sends until the schedule's end (and any backlog, until the deadline).
pub fn run(task: SendTask, shared: &Arc<Shared>) -> SendOutcome {
    tighten_timer_slack();
    // An open-loop sender sleeps between messages; as a real-time thread it preempts the
    // receiving threads on its core as soon as a message is due. A closed-loop sender never
    // sleeps for long, so it stays an ordinary thread that cannot starve the receivers.
    let realtime = !task.schedule.is_closed() && become_realtime();
    let mut sender = Sender {
        pending: Vec::with_capacity(64 * 1024),
        written: 0,
        next: 0,
        lag: Latency::new(),
        scratch: vec![0u8; 64 * 1024],
        pong: false,
        written_in_window: 0,
    };
    if !task.schedule.is_closed() {
        let warmup_end = task
            .schedule
            .window(0, shared.measure_from_ns)
            .map_or(0, |range| range.end);
        let overdue = task.schedule.due(now_ns()).unwrap_or(0);
        sender.next = overdue.min(warmup_end).min(sender.total(&task));
    }
    let skipped = sender.next;
    let error = sender
        .drive(&task, shared)
        .err()
        .map(|error| error.to_string());
    let (measured, measured_sent) = match task.schedule {
        Schedule::Open { .. } => task
            .schedule
            .window(shared.measure_from_ns, shared.measure_to_ns)
            .map_or((0, 0), |range| {
                let end = range.end.min(sender.total(&task));
                (
                    end.saturating_sub(range.start),
                    end.min(sender.next).saturating_sub(range.start),
                )
            }),
        Schedule::Closed => (sender.written_in_window, sender.written_in_window),
    };
    SendOutcome {
        publisher: task.publisher,
        sent: sender.next - skipped,
        measured,
        measured_sent,
        exhausted: task.schedule.is_closed()
            && task
                .source
                .limit()
                .is_some_and(|limit| sender.next >= limit),
        backlog: if task.schedule.is_closed() {
            0
        } else {
            sender.total(&task).saturating_sub(sender.next)
        },
        lag: sender.lag.summary(),
        skipped,
        realtime,
        error,
    }
}

/// Asks for SCHED_FIFO at the lowest real-time priority; false when not permitted (the
/// run goes on, and the report says so).
fn become_realtime() -> bool {
    let param = libc::sched_param { sched_priority: 1 };
    // SAFETY: `param` is a valid sched_param for the call; 0 is this thread.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) == 0 }
}

#[derive(Debug)]
struct Sender {
    pending: Vec<u8>,
    written: usize,
    next: u64,
    lag: Latency,
    scratch: Vec<u8>,
    pong: bool,
    /// Closed loop: messages started inside the measurement window.
    written_in_window: u64,
}

impl Sender {
    /// Messages this task should send in all (open loop: those intended before the end).
    fn total(&self, task: &SendTask) -> u64 {
        let scheduled = match task.schedule {
            Schedule::Open { .. } => task
                .schedule
                .window(0, task.end_ns)
                .map_or(0, |range| range.end),
            Schedule::Closed => u64::MAX,
        };
        task.source
            .limit()
            .map_or(scheduled, |limit| scheduled.min(limit))
    }

    fn drive(&mut self, task: &SendTask, shared: &Shared) -> io::Result<()> {
        task.stream.set_nonblocking(true)?;
        let published = shared.publishers.get(task.publisher as usize);
        let total = self.total(task);
        let mut stream = &task.stream;
        loop {
            let now = now_ns();
            if now >= task.deadline_ns {
                return Ok(());
            }
            if self.pending.is_empty() {
                let target = match task.schedule {
                    Schedule::Open { .. } => task.schedule.due(now).unwrap_or(0).min(total),
                    Schedule::Closed if now >= task.end_ns => self.next,
                    Schedule::Closed => (self.next + FRAMES_PER_WRITE).min(total).min(
                        shared
                            .window_limit(task.cohort, task.window)
                            .unwrap_or(u64::MAX),
                    ),
                };
                let batch_end = target.min(self.next + FRAMES_PER_WRITE);
                for sequence in self.next..batch_end {
                    let stamp_ns = match task.schedule.intended_ns(sequence) {
                        Some(intended) => {
                            self.lag.record_ns(now.saturating_sub(intended));
                            intended
                        }
                        None => {
                            if shared.measured(now) {
                                self.written_in_window += 1;
                            }
                            if let Some(slot) = published.and_then(|publisher| {
                                publisher.sent_ns.get(usize::try_from(sequence).ok()?)
                            }) {
                                slot.store(now, Ordering::Release);
                            }
                            now
                        }
                    };
                    task.source.append(sequence, stamp_ns, &mut self.pending);
                }
                Shared::add(&shared.published, batch_end.saturating_sub(self.next));
                self.next = self.next.max(batch_end);
            }
            if self.pong {
                self.pending.extend_from_slice(b"PONG\r\n");
                self.pong = false;
            }
            self.write_pending(&mut stream)?;
            self.drain_inbound(&mut stream, matches!(task.source, Source::Nats { .. }))?;
            let finished = match task.schedule {
                Schedule::Open { .. } => self.next >= total,
                Schedule::Closed => self.next >= total || now >= task.end_ns,
            };
            if finished && self.pending.is_empty() {
                return Ok(());
            }
            let blocked = !self.pending.is_empty();
            let window_full = shared
                .window_limit(task.cohort, task.window)
                .is_some_and(|limit| self.next >= limit);
            let wait = match task.schedule.intended_ns(self.next) {
                _ if blocked => IDLE_WAIT,
                Some(next_at) => {
                    Duration::from_nanos(next_at.saturating_sub(now_ns())).min(IDLE_WAIT)
                }
                None if window_full => WINDOW_WAIT,
                None => Duration::ZERO,
            };
            if blocked || !wait.is_zero() {
                wait_fd(task.stream.as_raw_fd(), blocked, wait)?;
            }
        }
    }

    fn write_pending(&mut self, stream: &mut &TcpStream) -> io::Result<()> {
        while self.written < self.pending.len() {
            match stream.write(&self.pending[self.written..]) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::WriteZero,
                        "publisher stream closed",
                    ));
                }
                Ok(count) => self.written += count,
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
        self.pending.clear();
        self.written = 0;
        Ok(())
    }

    fn drain_inbound(&mut self, stream: &mut &TcpStream, nats: bool) -> io::Result<()> {
        loop {
            match stream.read(&mut self.scratch) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the server closed the publisher stream",
                    ));
                }
                Ok(count) => {
                    let inbound = &self.scratch[..count];
                    if nats && inbound.windows(6).any(|window| window == b"PING\r\n") {
                        self.pong = true;
                    }
                    if nats && inbound.starts_with(b"-ERR") {
                        return Err(io::Error::other(format!(
                            "NATS error: {}",
                            String::from_utf8_lossy(inbound).trim_end()
                        )));
                    }
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
    }
}
