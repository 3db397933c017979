//! The publishing side of the generator: threads that each drive a few publisher streams,
//! writing presigned frames (over WebSocket each masked into one message; for NATS, freshly
//! stamped `PUB` messages) on the schedule.
//!
//! Owns: [`Source`] (where a message's bytes come from), [`SendTask`] (one publisher
//! stream), the send loop ([`run`], one thread over its tasks) and its [`SendOutcome`]s.
//! Each turn steps every publisher of the thread, then waits (`ppoll`, 1 µs timer slack)
//! for the earliest one's next intended time, or for a blocked stream to take more. Open
//! loop: every message whose intended time has come is written, many per `write` when the
//! thread woke late, and the lag between intended and actual write time is recorded.
//! Closed loop: frames are written back to back in batches as fast as the socket takes
//! them (and, with a window, no further ahead of the cohort's average subscriber than the
//! window), and each write time is published for the subscribers' latency. A BPS
//! publisher stream is never read here: the receiving threads count what it receives
//! (under ALL, the other publishers' messages, R25), so the broker never resets it for a
//! full queue; a NATS publisher stream is read for `PING` (answered) and `-ERR`. Warm-up
//! messages already overdue when the thread starts (signing took longer than estimated)
//! are skipped rather than sent in one burst: they are never measured, a burst would only
//! measure the generator, and DATA index gaps are allowed (R27).
//!
//! Never: signs (that happened before `t0`, or happens on a [`SignFeed`]'s own thread),
//! verifies, or reconnects.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;

use crate::load::latency::{Latency, LatencySummary};
use crate::load::poller::{PollSet, tighten_timer_slack};
use crate::load::schedule::{Schedule, now_ns};
use crate::load::shared::Shared;
use crate::load::sign_feed::SignFeed;
use crate::load::stamp::{Stamp, payload};
use crate::load::thread_cpu::{CpuMeter, ThreadCpu};
use crate::load::websocket::Masker;

/// Publishers one sending thread drives by default: one `ppoll` over this many sockets
/// stays cheap, and a few threads instead of one per publisher keep a thousand live
/// streams from waking a thousand threads.
pub const PUBLISHERS_PER_SEND_THREAD: usize = 64;

/// Messages gathered into one write: measured on this machine, 16 frames per write moved
/// about 4x more 4 KiB messages than one frame per write (ARCHITECTURE.md §2.6).
const FRAMES_PER_WRITE: u64 = 16;

/// Longest sleep between looks at the socket and the clock.
const IDLE_WAIT: Duration = Duration::from_millis(5);

/// Sleep while the closed loop's window is full (deliveries are counted in batches), per
/// publisher of the thread: a thread of many publishers that woke every 50 µs to look at
/// their windows would take the core from the receiving thread that fills them...
const WINDOW_WAIT: Duration = Duration::from_micros(50);

/// ...so a thread sleeps `WINDOW_WAIT` times its publishers, up to this.
const WINDOW_WAIT_MAX: Duration = Duration::from_millis(1);

/// Where message bytes come from.
#[derive(Debug)]
pub enum Source {
    /// BPS: frames signed before the run, by sequence.
    Presigned(Arc<Vec<Bytes>>),
    /// BPS: frames signed during the run, a bounded distance ahead (`--sign-ahead`).
    Fed(SignFeed),
    /// BPS over the WebSocket endpoint: the same frames, each masked into one binary
    /// message as it is copied into the write buffer (a fresh key each).
    PresignedWs(Arc<Vec<Bytes>>, Masker),
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
            Self::Presigned(frames) | Self::PresignedWs(frames, _) => Some(frames.len() as u64),
            Self::Fed(feed) => Some(feed.count()),
            Self::Nats { .. } => None,
        }
    }

    /// Appends message `sequence` to `out`; `stamp_ns` is its intended (open loop) or
    /// actual (closed loop, NATS only) send time. Fails when a feed stopped signing.
    fn append(&self, sequence: u64, stamp_ns: u64, out: &mut Vec<u8>) -> io::Result<()> {
        match self {
            Self::Presigned(frames) => {
                if let Some(frame) = usize::try_from(sequence).ok().and_then(|at| frames.get(at)) {
                    out.extend_from_slice(frame);
                }
            }
            Self::Fed(feed) => {
                out.extend_from_slice(&feed.frame(sequence).map_err(io::Error::other)?)
            }
            Self::PresignedWs(frames, masker) => {
                if let Some(frame) = usize::try_from(sequence).ok().and_then(|at| frames.get(at)) {
                    masker.append(sequence, frame, out);
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
        Ok(())
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
    /// Messages written (started).
    pub sent: u64,
    /// Messages written completely: what its cohort's other streams must have received.
    pub written: u64,
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

/// What one sending thread did.
#[derive(Debug, Clone)]
pub struct SendThread {
    /// One outcome per task, in task order.
    pub outcomes: Vec<SendOutcome>,
    /// The thread's CPU use.
    pub cpu: ThreadCpu,
}

/// When a publisher wants the thread back.
#[derive(Debug, Clone, Copy)]
struct Wake {
    /// Unix ns (now: at once).
    at_ns: u64,
    /// Its stream is blocked on a full send buffer.
    write: bool,
    /// Its stream is read here (NATS).
    read: bool,
}

/// Sends `tasks` until each schedule's end (and any backlog, until its deadline); `index`
/// and `cpu` label the thread's CPU figures.
pub fn run(
    tasks: Vec<SendTask>,
    shared: &Arc<Shared>,
    index: usize,
    cpu: Option<usize>,
) -> SendThread {
    tighten_timer_slack();
    let mut meter = CpuMeter::start(shared.measure_from_ns, shared.measure_to_ns);
    // An open-loop sender sleeps between messages; as a real-time thread it preempts the
    // receiving threads on its core as soon as a message is due. A closed-loop sender never
    // sleeps for long, so it stays an ordinary thread that cannot starve the receivers.
    let realtime = tasks.iter().any(|task| !task.schedule.is_closed()) && become_realtime();
    let streams = tasks.len();
    let mut lanes: Vec<Lane> = tasks
        .into_iter()
        .map(|task| Lane::new(task, shared))
        .collect();
    let mut scratch = vec![0u8; INBOUND_READ_BYTES];
    let window_wait =
        (WINDOW_WAIT * u32::try_from(lanes.len()).unwrap_or(u32::MAX)).min(WINDOW_WAIT_MAX);
    let mut poll = PollSet::new();
    let mut slots: Vec<usize> = Vec::with_capacity(lanes.len());
    loop {
        let now = now_ns();
        meter.tick(now);
        let mut earliest: Option<u64> = None;
        poll.clear();
        slots.clear();
        for (at, lane) in lanes.iter_mut().enumerate() {
            let Some(wake) = lane.turn(now, shared, window_wait, &mut scratch) else {
                continue;
            };
            earliest = Some(earliest.map_or(wake.at_ns, |earliest| earliest.min(wake.at_ns)));
            if wake.write || wake.read {
                poll.push(lane.task.stream.as_raw_fd(), wake.read, wake.write);
                slots.push(at);
            }
        }
        let Some(earliest) = earliest else {
            break;
        };
        let timeout = Duration::from_nanos(earliest.saturating_sub(now_ns())).min(IDLE_WAIT);
        if poll.is_empty() && timeout.is_zero() {
            continue;
        }
        if let Err(error) = poll.wait(timeout) {
            for lane in lanes.iter_mut().filter(|lane| !lane.done) {
                lane.fail(&error);
            }
            break;
        }
        for (slot, at) in slots.iter().enumerate() {
            let (readable, writable) = poll.readiness(slot);
            if let Some(lane) = lanes.get_mut(*at) {
                lane.readable |= readable;
                lane.writable |= writable;
            }
        }
    }
    let outcomes = lanes
        .into_iter()
        .map(|lane| lane.outcome(shared, realtime))
        .collect();
    SendThread {
        outcomes,
        cpu: meter.finish("send", index, cpu, streams),
    }
}

/// Bytes read per call from a NATS publisher stream (only `PING`s and errors arrive).
const INBOUND_READ_BYTES: usize = 16 * 1024;

/// Asks for SCHED_FIFO at the lowest real-time priority; false when not permitted (the
/// run goes on, and the report says so).
fn become_realtime() -> bool {
    let param = libc::sched_param { sched_priority: 1 };
    // SAFETY: `param` is a valid sched_param for the call; 0 is this thread.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) == 0 }
}

/// One publisher stream inside a sending thread.
#[derive(Debug)]
struct Lane {
    task: SendTask,
    pending: Vec<u8>,
    /// Bytes of `pending` already written.
    written_bytes: usize,
    /// The next sequence to append.
    next: u64,
    /// The sequence of the first message in `pending`.
    batch_start: u64,
    lag: Latency,
    pong: bool,
    /// Closed loop: messages started inside the measurement window.
    written_in_window: u64,
    /// Warm-up messages skipped at the start.
    skipped: u64,
    /// Readiness seen by the last wait (both at the start).
    readable: bool,
    writable: bool,
    done: bool,
    error: Option<String>,
}

impl Lane {
    fn new(task: SendTask, shared: &Shared) -> Self {
        let mut lane = Self {
            task,
            pending: Vec::with_capacity(64 * 1024),
            written_bytes: 0,
            next: 0,
            batch_start: 0,
            lag: Latency::new(),
            pong: false,
            written_in_window: 0,
            skipped: 0,
            readable: true,
            writable: true,
            done: false,
            error: None,
        };
        if let Err(error) = lane.task.stream.set_nonblocking(true) {
            lane.fail(&error);
        }
        if !lane.task.schedule.is_closed() {
            let warmup_end = lane
                .task
                .schedule
                .window(0, shared.measure_from_ns)
                .map_or(0, |range| range.end);
            let overdue = lane.task.schedule.due(now_ns()).unwrap_or(0);
            lane.next = overdue.min(warmup_end).min(lane.total());
        }
        lane.skipped = lane.next;
        lane.batch_start = lane.next;
        lane
    }

    fn fail(&mut self, error: &io::Error) {
        self.done = true;
        if self.error.is_none() {
            self.error = Some(error.to_string());
        }
    }

    /// Messages this task should send in all (open loop: those intended before the end).
    fn total(&self) -> u64 {
        let task = &self.task;
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

    /// One turn: write what is due; `None` once the task is done. A full closed-loop
    /// window is looked at again after `window_wait`.
    fn turn(
        &mut self,
        now: u64,
        shared: &Shared,
        window_wait: Duration,
        scratch: &mut [u8],
    ) -> Option<Wake> {
        if self.done {
            return None;
        }
        match self.step(now, shared, window_wait, scratch) {
            Ok(Some(wake)) => Some(wake),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(error) => {
                self.fail(&error);
                None
            }
        }
    }

    fn step(
        &mut self,
        now: u64,
        shared: &Shared,
        window_wait: Duration,
        scratch: &mut [u8],
    ) -> io::Result<Option<Wake>> {
        if now >= self.task.deadline_ns {
            return Ok(None);
        }
        let total = self.total();
        if self.pending.is_empty() {
            self.fill(now, total, shared)?;
        }
        if self.pong {
            self.pending.extend_from_slice(b"PONG\r\n");
            self.pong = false;
        }
        if !self.pending.is_empty() && self.writable {
            self.write_pending()?;
        }
        let nats = matches!(self.task.source, Source::Nats { .. });
        if nats && self.readable {
            self.drain_inbound(scratch)?;
        }
        let finished = match self.task.schedule {
            Schedule::Open { .. } => self.next >= total,
            Schedule::Closed => self.next >= total || now >= self.task.end_ns,
        };
        if finished && self.pending.is_empty() {
            return Ok(None);
        }
        let blocked = !self.pending.is_empty();
        let window_full = shared
            .window_limit(self.task.cohort, self.task.window)
            .is_some_and(|limit| self.next >= limit);
        let idle = now + IDLE_WAIT.as_nanos() as u64;
        let at_ns = match self.task.schedule.intended_ns(self.next) {
            _ if blocked => idle,
            Some(next_at) => next_at.min(idle),
            None if window_full => now + window_wait.as_nanos() as u64,
            None => now,
        };
        Ok(Some(Wake {
            at_ns,
            write: blocked,
            read: nats,
        }))
    }

    /// Appends the messages due now (at most one batch) to `pending`.
    fn fill(&mut self, now: u64, total: u64, shared: &Shared) -> io::Result<()> {
        let task = &self.task;
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
        let published = shared.publishers.get(task.publisher as usize);
        self.batch_start = self.next;
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
            task.source.append(sequence, stamp_ns, &mut self.pending)?;
        }
        Shared::add(&shared.published, batch_end.saturating_sub(self.next));
        self.next = self.next.max(batch_end);
        Ok(())
    }

    fn write_pending(&mut self) -> io::Result<()> {
        let mut stream = &self.task.stream;
        while self.written_bytes < self.pending.len() {
            match stream.write(&self.pending[self.written_bytes..]) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::WriteZero,
                        "publisher stream closed",
                    ));
                }
                Ok(count) => self.written_bytes += count,
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    self.writable = false;
                    return Ok(());
                }
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
        self.pending.clear();
        self.written_bytes = 0;
        self.batch_start = self.next;
        Ok(())
    }

    fn drain_inbound(&mut self, scratch: &mut [u8]) -> io::Result<()> {
        let mut stream = &self.task.stream;
        loop {
            match stream.read(scratch) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the server closed the publisher stream",
                    ));
                }
                Ok(count) => {
                    let inbound = &scratch[..count];
                    if inbound.windows(6).any(|window| window == b"PING\r\n") {
                        self.pong = true;
                    }
                    if inbound.starts_with(b"-ERR") {
                        return Err(io::Error::other(format!(
                            "NATS error: {}",
                            String::from_utf8_lossy(inbound).trim_end()
                        )));
                    }
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    self.readable = false;
                    return Ok(());
                }
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
    }

    fn outcome(self, shared: &Shared, realtime: bool) -> SendOutcome {
        let total = self.total();
        let task = &self.task;
        let (measured, measured_sent) = match task.schedule {
            Schedule::Open { .. } => task
                .schedule
                .window(shared.measure_from_ns, shared.measure_to_ns)
                .map_or((0, 0), |range| {
                    let end = range.end.min(total);
                    (
                        end.saturating_sub(range.start),
                        end.min(self.next).saturating_sub(range.start),
                    )
                }),
            Schedule::Closed => (self.written_in_window, self.written_in_window),
        };
        let written_through = if self.pending.is_empty() {
            self.next
        } else {
            self.batch_start
        };
        SendOutcome {
            publisher: task.publisher,
            sent: self.next - self.skipped,
            written: written_through - self.skipped,
            measured,
            measured_sent,
            exhausted: task.schedule.is_closed()
                && task.source.limit().is_some_and(|limit| self.next >= limit),
            backlog: if task.schedule.is_closed() {
                0
            } else {
                total.saturating_sub(self.next)
            },
            lag: self.lag.summary(),
            skipped: self.skipped,
            realtime,
            error: self.error,
        }
    }
}
