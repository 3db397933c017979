//! The receiving side of the generator: one thread per core, each multiplexing its share
//! of the receiving streams over level-triggered epoll.
//!
//! Owns: [`Endpoint`] (one nonblocking stream and how it reads), [`Check`] (how a delivery
//! is checked), the receive loop ([`run`]) and its [`Totals`]. Most streams only count:
//! [`Check::Count`] subscribers and the publishers' own streams (which, under publishers
//! ALL, receive the other publishers' messages, R25) sit in an epoll set of their own that
//! is harvested every 1 to 10 ms ([`COUNT_INTERVAL_MAX`], shorter when a stream holds much):
//! one `recv(MSG_TRUNC)` per ready stream takes everything queued, discarded in the kernel
//! without a copy, and the deliveries are counted as whole frames of the run's one frame
//! length ([`ByteCounter`]); a delivery counts as measured when it completes inside the
//! measurement window, and loss shows at the end as
//! fewer frames than were sent to the stream, a partial frame, or a reset. The sample of
//! subscribers that reads every frame (one read of up to [`READ_BUFFER_BYTES`] per event)
//! handles each delivery in turn:
//! 1. split off the read buffer in place (BPS: varint frames via `bps_proto::peek_frame`;
//!    over WebSocket the same inside each server message, whose header is parsed first and
//!    counted in the delivery's wire bytes; NATS: `MSG` lines), with no copy for the cheap
//!    checks;
//! 2. checked: [`Check::Verify`] runs the client library's [`Subscriber`] (id derivation,
//!    owner recovery and admission, cursors: end to end, R41); [`Check::Bytes`] compares the
//!    frame byte for byte with the frame the publisher signed (a broker may not change a
//!    byte, §1); [`Check::Stamp`] only reads the stamp (NATS, or `sub` mode without the
//!    publisher's frames);
//! 3. timed from its intended send time (open loop) or recorded write time (closed loop)
//!    into the thread's histogram when it falls in the measurement window, and checked for
//!    order against the highest sequence seen from its publisher on this stream.
//!
//! Never: writes to a broker (except NATS `PONG`s), reconnects (a closed stream is counted
//! as a reset and stays closed: reconnecting would hide loss), or blocks on one stream.
//!
//! Measured (docs/BENCHMARKS.md, "Generator receive path"): with counting, the receiving
//! thread's cost per delivery no longer includes a 4 KiB copy and comparison; what is left
//! is mostly the kernel's per-packet work and the acknowledgements each read sends, which
//! the harvest spreads over several frames. Edge-triggered epoll would not help: it needs a
//! second `recv` per event to see `EAGAIN`.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

use bps_proto::{FRAME_BYTES_MAX_DEFAULT, peek_frame};
use bytes::{Bytes, BytesMut};

use crate::load::byte_counter::{ByteCounter, discard};
use crate::load::latency::Latency;
use crate::load::nats::NATS_PING_BYTES;
use crate::load::poller::{Interest, Poller, Ready};
use crate::load::schedule::now_ns;
use crate::load::shared::Shared;
use crate::load::stamp::{Stamp, broadcast_payload};
use crate::load::thread_cpu::{CpuMeter, ThreadCpu};
use crate::load::websocket::{peek_server_frame, pong};
use bps_client::subscriber::{Event, Subscriber};
use bps_ws::codec::Opcode;

/// Read buffer per reading stream: a dozen 4 KiB frames per `read` call, and always room
/// for the largest frame after compaction.
pub const READ_BUFFER_BYTES: usize = 64 * 1024;

const _: () = assert!(READ_BUFFER_BYTES >= 2 * (FRAME_BYTES_MAX_DEFAULT + 16));

/// Reads per ready stream per wake, so one busy stream cannot starve the others.
const READS_PER_WAKE: usize = 4;

/// How long one epoll wait may block before the stop flag is looked at again.
const WAIT_STEP: Duration = Duration::from_millis(20);

/// Counting streams are harvested together, at most this far apart: a few frames pile up
/// per stream in between, so one `recv` takes several and the kernel acknowledges them
/// once, where reading at every readiness event took about one frame per system call.
const COUNT_INTERVAL_MAX: Duration = Duration::from_millis(10);

/// ...and at least this far apart (epoll's timeout is whole milliseconds).
const COUNT_INTERVAL_MIN: Duration = Duration::from_millis(1);

/// A harvest that finds a stream holding this much halves the interval: its socket buffer
/// must never fill, or the server would queue for it and reset it (R26).
const COUNT_BYTES_HIGH: usize = 64 * 1024;

/// A harvest whose fullest stream held less than this doubles the interval.
const COUNT_BYTES_LOW: usize = 16 * 1024;

/// How a subscriber checks each delivery.
#[derive(Debug)]
pub enum Check {
    /// Full end-to-end verification with the client library (R41).
    Verify(Box<Subscriber>),
    /// Byte-for-byte comparison with the published frame.
    Bytes,
    /// The stamp only.
    Stamp,
    /// Bytes only, discarded in the kernel: every delivery is `frame_bytes` on the wire
    /// and carries `payload_bytes`.
    Count {
        /// Wire bytes of one delivery.
        frame_bytes: usize,
        /// Payload bytes of one delivery.
        payload_bytes: usize,
    },
}

/// Which protocol a stream speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// BPS frames.
    Bps,
    /// BPS frames, one per binary message of the broker's native WebSocket endpoint
    /// (server frames are unmasked; the broker's pings are answered by reading streams; a
    /// counting stream cannot see one, and a ping would show as a partial frame, i.e. as
    /// loss, never as a delivery).
    WebSocket,
    /// The NATS text protocol.
    Nats,
}

/// Per-publisher order tracking on one stream.
#[derive(Debug, Clone, Copy, Default)]
struct Track {
    highest: Option<u64>,
    first_measured: Option<u64>,
    last_measured: Option<u64>,
}

/// How a reading stream checks each frame (the reading kinds of [`Check`]).
#[derive(Debug)]
enum FrameCheck {
    Verify(Box<Subscriber>),
    Bytes,
    Stamp,
}

/// What one subscriber knows, apart from its socket.
#[derive(Debug)]
struct SubState {
    wire: Wire,
    cohort: u32,
    first_publisher: u32,
    check: FrameCheck,
    tracks: Vec<Track>,
}

/// One receiving stream.
#[derive(Debug)]
pub struct Endpoint {
    stream: TcpStream,
    open: bool,
    cohort: u32,
    /// A publisher's own stream: the publisher's global number.
    own_publisher: Option<u32>,
    /// Its deliveries count toward its cohort's closed-loop window.
    feeds_window: bool,
    reader: Reader,
}

/// How an endpoint reads.
#[derive(Debug)]
enum Reader {
    /// Every frame, into a buffer, checked and timed.
    Frames(Frames),
    /// Bytes only (module docs).
    Counter {
        counter: ByteCounter,
        wire: Wire,
        payload_bytes: u64,
        /// Bytes that came with the `Ack`, accounted at the first turn.
        leftover: u64,
    },
}

/// A reading stream's buffer and what its subscriber has seen.
#[derive(Debug)]
struct Frames {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    state: SubState,
}

impl Endpoint {
    /// A joined subscriber stream of cohort `cohort`, whose publishers are the global
    /// numbers `first_publisher .. first_publisher + publishers`, with bytes already read
    /// after the handshake in `leftover`. The socket is switched to nonblocking.
    pub fn new(
        stream: TcpStream,
        leftover: &BytesMut,
        wire: Wire,
        cohort: u32,
        first_publisher: u32,
        publishers: u32,
        check: Check,
    ) -> io::Result<Self> {
        stream.set_nonblocking(true)?;
        let frames = |check: FrameCheck| {
            let mut buf = vec![0u8; READ_BUFFER_BYTES.max(leftover.len())];
            buf[..leftover.len()].copy_from_slice(leftover);
            Reader::Frames(Frames {
                buf,
                start: 0,
                end: leftover.len(),
                state: SubState {
                    wire,
                    cohort,
                    first_publisher,
                    check,
                    tracks: vec![Track::default(); publishers as usize],
                },
            })
        };
        let reader = match check {
            Check::Count {
                frame_bytes,
                payload_bytes,
            } => Reader::Counter {
                counter: ByteCounter::new(frame_bytes),
                wire,
                payload_bytes: payload_bytes as u64,
                leftover: leftover.len() as u64,
            },
            Check::Verify(subscriber) => frames(FrameCheck::Verify(subscriber)),
            Check::Bytes => frames(FrameCheck::Bytes),
            Check::Stamp => frames(FrameCheck::Stamp),
        };
        Ok(Self {
            stream,
            open: true,
            cohort,
            own_publisher: None,
            feeds_window: true,
            reader,
        })
    }

    /// Publisher `publisher`'s own stream in cohort `cohort`, counted like a
    /// [`Check::Count`] subscriber: it receives the cohort's other publishers (R25).
    pub fn publisher_stream(
        stream: TcpStream,
        leftover: &BytesMut,
        cohort: u32,
        publisher: u32,
        frame_bytes: usize,
        payload_bytes: usize,
    ) -> io::Result<Self> {
        let check = Check::Count {
            frame_bytes,
            payload_bytes,
        };
        let mut endpoint = Self::new(stream, leftover, Wire::Bps, cohort, 0, 0, check)?;
        endpoint.own_publisher = Some(publisher);
        endpoint.feeds_window = false;
        Ok(endpoint)
    }

    /// The same subscriber, left out of its cohort's closed-loop window: a counting
    /// stream is read in harvests up to [`COUNT_INTERVAL_MAX`] apart, so where the cohort
    /// has reading subscribers (read at once) the window follows those.
    pub fn outside_window(mut self) -> Self {
        self.feeds_window = false;
        self
    }

    /// Whether this subscriber runs the full verification.
    pub fn verifies(&self) -> bool {
        matches!(
            &self.reader,
            Reader::Frames(Frames {
                state: SubState {
                    check: FrameCheck::Verify(_),
                    ..
                },
                ..
            })
        )
    }

    /// Whether this stream only counts bytes.
    pub fn counts(&self) -> bool {
        matches!(self.reader, Reader::Counter { .. })
    }
}

/// What a counting stream received, for the loss check at the end of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CountedStream {
    /// Its cohort.
    pub cohort: u32,
    /// A publisher's own stream: the publisher (it receives everyone else in the cohort).
    pub own_publisher: Option<u32>,
    /// Whole frames received.
    pub frames: u64,
    /// Bytes of an incomplete last frame.
    pub partial_bytes: u64,
    /// NATS: `PING`s the server sent between the frames (it measures each client's round
    /// trip so, unasked); a counting stream cannot tell their 6 bytes from a frame's, so a
    /// remainder of whole `PING`s is taken for them rather than for a partial frame.
    pub server_pings: u64,
    /// Still open at the end (not reset).
    pub open: bool,
}

impl CountedStream {
    /// Frames missing when `expected` were sent to this stream.
    pub fn missing(&self, expected: u64) -> u64 {
        expected.saturating_sub(self.frames)
    }

    /// Whether the stream fell short of `expected` or ended inside a frame: bytes short of
    /// what was sent (a reset is reported as such besides).
    pub fn is_short(&self, expected: u64) -> bool {
        self.frames < expected || self.partial_bytes > 0
    }
}

/// What one receiving thread counted.
#[derive(Debug, Default)]
pub struct Totals {
    /// Deliveries received (all, warm-up included).
    pub deliveries: u64,
    /// Deliveries of measured messages to the subscribers that read every frame.
    pub measured: u64,
    /// Payload bytes of measured deliveries.
    pub payload_bytes: u64,
    /// Wire bytes of measured deliveries (framing included).
    pub wire_bytes: u64,
    /// Deliveries at or below a sequence already seen from the same publisher.
    pub reordered: u64,
    /// Deliveries that failed their check.
    pub invalid: u64,
    /// Streams the broker closed.
    pub resets: u64,
    /// Per stream and publisher, the span of measured sequences seen (`sub` mode's loss
    /// estimate when the publisher's counts are not known).
    pub measured_span: u64,
    /// The first failure, for the report.
    pub first_error: Option<String>,
    /// Latency of measured deliveries.
    pub latency: Latency,
    /// Deliveries per cohort (all), for the closed loop's window.
    pub cohort_deliveries: Vec<u64>,
    /// Frames completed on counting streams (all, warm-up included).
    pub counted_frames: u64,
    /// Of those, frames completed inside the measurement window.
    pub counted_measured: u64,
    /// Every counting stream, at the end.
    pub counted_streams: Vec<CountedStream>,
    /// The receiving threads' CPU use.
    pub threads: Vec<ThreadCpu>,
}

impl Totals {
    /// Adds another thread's totals.
    pub fn merge(&mut self, other: &Self) {
        self.deliveries += other.deliveries;
        self.measured += other.measured;
        self.payload_bytes += other.payload_bytes;
        self.wire_bytes += other.wire_bytes;
        self.reordered += other.reordered;
        self.invalid += other.invalid;
        self.resets += other.resets;
        self.measured_span += other.measured_span;
        if self.first_error.is_none() {
            self.first_error.clone_from(&other.first_error);
        }
        self.latency.merge(&other.latency);
        self.counted_frames += other.counted_frames;
        self.counted_measured += other.counted_measured;
        self.counted_streams
            .extend_from_slice(&other.counted_streams);
        self.threads.extend(other.threads.iter().cloned());
    }

    fn fail(&mut self, message: impl FnOnce() -> String) {
        self.invalid += 1;
        if self.first_error.is_none() {
            self.first_error = Some(message());
        }
    }
}

/// Counter values already added to the shared atomics.
#[derive(Debug, Default, Clone)]
struct Flushed {
    deliveries: u64,
    measured: u64,
    invalid: u64,
    resets: u64,
    counted_frames: u64,
    cohort_deliveries: Vec<u64>,
}

/// Receives on `endpoints` until `shared.stop` is set; returns what was counted. `index`
/// and `cpu` (the CPU the thread is pinned to) label its CPU figures.
pub fn run(
    mut endpoints: Vec<Endpoint>,
    shared: &Arc<Shared>,
    index: usize,
    cpu: Option<usize>,
) -> io::Result<Totals> {
    let mut meter = CpuMeter::start(shared.measure_from_ns, shared.measure_to_ns);
    let (mut poller, mut counting) = register(&endpoints)?;
    let mut totals = Totals {
        cohort_deliveries: vec![0; shared.cohort_subscribers.len()],
        ..Totals::default()
    };
    let mut flushed = Flushed {
        cohort_deliveries: vec![0; shared.cohort_subscribers.len()],
        ..Flushed::default()
    };
    // Frames that arrived with the Ack are processed before waiting.
    for endpoint in &mut endpoints {
        let now = now_ns();
        endpoint.process(now, shared, &mut totals);
    }
    let mut ready: Vec<Ready> = Vec::new();
    let mut harvest = Harvest::new(now_ns());
    while !shared.stopping() {
        let timeout = WAIT_STEP.min(harvest.due_in(now_ns()));
        poller.wait(&mut ready, timeout)?;
        let now = now_ns();
        meter.tick(now);
        serve(&ready, &mut endpoints, &poller, shared, &mut totals)?;
        if harvest.is_due(now) {
            counting.wait(&mut ready, Duration::ZERO)?;
            let fullest = serve(&ready, &mut endpoints, &counting, shared, &mut totals)?;
            harvest.next(now_ns(), fullest);
        }
        flush(shared, &totals, &mut flushed);
    }
    tally_endpoints(&endpoints, &mut totals);
    flush(shared, &totals, &mut flushed);
    totals
        .threads
        .push(meter.finish("receive", index, cpu, endpoints.len()));
    Ok(totals)
}

/// Registers each endpoint, by its index, with the poller that waits on it: the
/// reading streams' (waited on every step) or the counting streams' (harvested).
fn register(endpoints: &[Endpoint]) -> io::Result<(Poller, Poller)> {
    let poller = Poller::new()?;
    let counting = Poller::new()?;
    for (token, endpoint) in endpoints.iter().enumerate() {
        let set = if endpoint.counts() {
            &counting
        } else {
            &poller
        };
        set.add(endpoint.stream.as_raw_fd(), token as u64, Interest::Read)?;
    }
    Ok((poller, counting))
}

/// At the end of the run: each open reading stream's span of measured sequences (what
/// `sub` mode estimates loss from) and each counting stream's tally.
fn tally_endpoints(endpoints: &[Endpoint], totals: &mut Totals) {
    for endpoint in endpoints {
        match &endpoint.reader {
            Reader::Frames(frames) if endpoint.open => {
                for track in &frames.state.tracks {
                    if let (Some(first), Some(last)) = (track.first_measured, track.last_measured) {
                        totals.measured_span += last - first + 1;
                    }
                }
            }
            Reader::Frames(_) => {}
            Reader::Counter { counter, wire, .. } => {
                let partial = counter.partial_bytes();
                let pings = partial / NATS_PING_BYTES;
                let (partial_bytes, server_pings) =
                    if *wire == Wire::Nats && partial % NATS_PING_BYTES == 0 {
                        (0, pings)
                    } else {
                        (partial, 0)
                    };
                totals.counted_streams.push(CountedStream {
                    cohort: endpoint.cohort,
                    own_publisher: endpoint.own_publisher,
                    frames: counter.frames(),
                    partial_bytes,
                    server_pings,
                    open: endpoint.open,
                });
            }
        }
    }
}

/// Reads every endpoint `ready` names from `set` (closing deregisters it: the stream stays
/// closed, module docs); returns the most bytes one counting stream took.
fn serve(
    ready: &[Ready],
    endpoints: &mut [Endpoint],
    set: &Poller,
    shared: &Shared,
    totals: &mut Totals,
) -> io::Result<usize> {
    let mut fullest = 0;
    for event in ready {
        let Some(endpoint) = usize::try_from(event.token)
            .ok()
            .and_then(|token| endpoints.get_mut(token))
        else {
            continue;
        };
        if event.readable && endpoint.open {
            fullest = fullest.max(endpoint.on_readable(shared, totals));
            if !endpoint.open {
                set.remove(endpoint.stream.as_raw_fd())?;
            }
        }
    }
    Ok(fullest)
}

/// When the counting streams are read next, and how far apart (module docs).
#[derive(Debug, Clone, Copy)]
struct Harvest {
    at_ns: u64,
    interval: Duration,
}

impl Harvest {
    fn new(now_ns: u64) -> Self {
        Self {
            at_ns: now_ns,
            interval: COUNT_INTERVAL_MIN,
        }
    }

    fn is_due(&self, now_ns: u64) -> bool {
        now_ns >= self.at_ns
    }

    /// Time to the next harvest, rounded up to epoll's whole milliseconds.
    fn due_in(&self, now_ns: u64) -> Duration {
        let nanos = self.at_ns.saturating_sub(now_ns);
        Duration::from_millis(nanos.div_ceil(1_000_000))
    }

    /// Schedules the next harvest after one that found at most `fullest` bytes on a stream.
    fn next(&mut self, now_ns: u64, fullest: usize) {
        self.interval = if fullest >= COUNT_BYTES_HIGH {
            (self.interval / 2).max(COUNT_INTERVAL_MIN)
        } else if fullest < COUNT_BYTES_LOW {
            (self.interval * 2).min(COUNT_INTERVAL_MAX)
        } else {
            self.interval
        };
        self.at_ns = now_ns + self.interval.as_nanos() as u64;
    }
}

fn flush(shared: &Shared, totals: &Totals, flushed: &mut Flushed) {
    Shared::add(&shared.delivered, totals.deliveries - flushed.deliveries);
    Shared::add(
        &shared.delivered_measured,
        totals.measured - flushed.measured,
    );
    Shared::add(&shared.invalid, totals.invalid - flushed.invalid);
    Shared::add(&shared.resets, totals.resets - flushed.resets);
    Shared::add(
        &shared.counted_frames,
        totals.counted_frames - flushed.counted_frames,
    );
    for ((counter, total), done) in shared
        .cohort_delivered
        .iter()
        .zip(&totals.cohort_deliveries)
        .zip(&mut flushed.cohort_deliveries)
    {
        Shared::add(counter, total - *done);
        *done = *total;
    }
    flushed.deliveries = totals.deliveries;
    flushed.measured = totals.measured;
    flushed.invalid = totals.invalid;
    flushed.resets = totals.resets;
    flushed.counted_frames = totals.counted_frames;
}

impl Endpoint {
    /// Reads what is ready; returns the bytes a counting stream took (0 for the others).
    fn on_readable(&mut self, shared: &Shared, totals: &mut Totals) -> usize {
        let window = self.feeds_window.then_some(self.cohort);
        let (result, taken) = match &mut self.reader {
            Reader::Frames(frames) => (frames.on_readable(&self.stream, shared, totals), 0),
            Reader::Counter {
                counter,
                payload_bytes,
                ..
            } => match discard(self.stream.as_raw_fd()) {
                Ok(0) => (Err("the broker closed a stream".to_owned()), 0),
                Ok(bytes) => {
                    let frames = counter.add(bytes as u64);
                    let sizes = (*payload_bytes, counter.frame_bytes());
                    account_counted(frames, sizes, window, shared, totals);
                    (Ok(()), bytes)
                }
                Err(error)
                    if matches!(
                        error.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                    ) =>
                {
                    (Ok(()), 0)
                }
                Err(error) => (Err(format!("stream error: {error}")), 0),
            },
        };
        if let Err(reason) = result {
            self.close(totals, || reason);
        }
        taken
    }

    /// Handles what came with the `Ack`, before the first wait.
    fn process(&mut self, now: u64, shared: &Shared, totals: &mut Totals) {
        let result = match &mut self.reader {
            Reader::Frames(frames) => frames.process(now, &self.stream, shared, totals),
            Reader::Counter {
                counter,
                payload_bytes,
                leftover,
                ..
            } => {
                let frames = counter.add(std::mem::take(leftover));
                let sizes = (*payload_bytes, counter.frame_bytes());
                let window = self.feeds_window.then_some(self.cohort);
                account_counted(frames, sizes, window, shared, totals);
                Ok(())
            }
        };
        if let Err(reason) = result {
            self.close(totals, || reason);
        }
    }

    fn close(&mut self, totals: &mut Totals, reason: impl FnOnce() -> String) {
        self.open = false;
        totals.resets += 1;
        if totals.first_error.is_none() {
            totals.first_error = Some(reason());
        }
    }
}

/// Counts `frames` just completed on a counting stream, each of `(payload, wire)` bytes:
/// measured when they complete inside the window; also toward the closed-loop window of
/// cohort `window_of`, if any.
fn account_counted(
    frames: u64,
    (payload_bytes, frame_bytes): (u64, u64),
    window_of: Option<u32>,
    shared: &Shared,
    totals: &mut Totals,
) {
    if frames == 0 {
        return;
    }
    totals.counted_frames += frames;
    if shared.measured(now_ns()) {
        totals.counted_measured += frames;
        totals.payload_bytes += frames * payload_bytes;
        totals.wire_bytes += frames * frame_bytes;
    }
    if let Some(count) =
        window_of.and_then(|cohort| totals.cohort_deliveries.get_mut(cohort as usize))
    {
        *count += frames;
    }
}

impl Frames {
    fn on_readable(
        &mut self,
        stream: &TcpStream,
        shared: &Shared,
        totals: &mut Totals,
    ) -> Result<(), String> {
        let mut stream = stream;
        for _ in 0..READS_PER_WAKE {
            if self.end == self.buf.len() {
                self.compact();
            }
            match stream.read(&mut self.buf[self.end..]) {
                Ok(0) => return Err("the broker closed a subscriber stream".to_owned()),
                Ok(read) => {
                    self.end += read;
                    let full = self.end == self.buf.len();
                    self.process(now_ns(), stream, shared, totals)?;
                    if !full {
                        return Ok(());
                    }
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(format!("subscriber stream error: {error}")),
            }
        }
        Ok(())
    }

    /// Moves the unprocessed bytes to the front of the buffer.
    fn compact(&mut self) {
        self.buf.copy_within(self.start..self.end, 0);
        self.end -= self.start;
        self.start = 0;
    }

    /// Handles every complete message in the buffer; `now` is when its bytes arrived.
    fn process(
        &mut self,
        now: u64,
        stream: &TcpStream,
        shared: &Shared,
        totals: &mut Totals,
    ) -> Result<(), String> {
        match self.state.wire {
            Wire::Bps => self.process_bps(now, shared, totals)?,
            Wire::WebSocket => self.process_ws(now, stream, shared, totals)?,
            Wire::Nats => self.process_nats(now, stream, shared, totals)?,
        }
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.buf.len() - self.start < FRAME_BYTES_MAX_DEFAULT + 16 {
            self.compact();
        }
        Ok(())
    }

    fn process_bps(
        &mut self,
        now: u64,
        shared: &Shared,
        totals: &mut Totals,
    ) -> Result<(), String> {
        while self.start < self.end {
            let available = &self.buf[self.start..self.end];
            let header = match peek_frame(available, FRAME_BYTES_MAX_DEFAULT) {
                Ok(Some(header)) => header,
                Ok(None) => break,
                Err(error) => return Err(format!("bad frame from the broker: {error}")),
            };
            let total = header.total_bytes();
            if total > available.len() {
                break;
            }
            let body = &available[header.prefix_bytes..total];
            self.state.on_bps(body, total as u64, now, shared, totals);
            self.start += total;
        }
        Ok(())
    }

    /// Every whole WebSocket message in the buffer: each binary one must be exactly one BPS
    /// frame, checked in place like a TCP frame; pings are answered after the batch.
    fn process_ws(
        &mut self,
        now: u64,
        stream: &TcpStream,
        shared: &Shared,
        totals: &mut Totals,
    ) -> Result<(), String> {
        let mut pongs = Vec::new();
        while self.start < self.end {
            let available = &self.buf[self.start..self.end];
            let Some(frame) = peek_server_frame(available)? else {
                break;
            };
            let total = frame.total_bytes();
            if total > available.len() {
                break;
            }
            let payload = &available[frame.header_bytes..total];
            match frame.opcode {
                Opcode::Binary => {
                    let body = bps_body(payload)?;
                    self.state.on_bps(body, total as u64, now, shared, totals);
                }
                Opcode::Ping => pongs.extend_from_slice(&pong(payload)),
                Opcode::Pong => {}
                Opcode::Close => return Err(close_error(payload)),
                Opcode::Text | Opcode::Continuation => {
                    return Err(format!(
                        "a {:?} message on the native endpoint",
                        frame.opcode
                    ));
                }
            }
            self.start += total;
        }
        if !pongs.is_empty() {
            // A few bytes into an empty send buffer; a full one means the stream is dead.
            let mut stream = stream;
            stream
                .write_all(&pongs)
                .map_err(|error| format!("WebSocket pong: {error}"))?;
        }
        Ok(())
    }

    fn process_nats(
        &mut self,
        now: u64,
        stream: &TcpStream,
        shared: &Shared,
        totals: &mut Totals,
    ) -> Result<(), String> {
        let mut pong = false;
        while self.start < self.end {
            let available = &self.buf[self.start..self.end];
            let Some(line_end) = available.windows(2).position(|pair| pair == b"\r\n") else {
                break;
            };
            let line = &available[..line_end];
            if let Some(header) = line.strip_prefix(b"MSG ") {
                let length = nats_payload_length(header).ok_or_else(|| {
                    format!("bad NATS MSG line {:?}", String::from_utf8_lossy(line))
                })?;
                let total = line_end + 2 + length + 2;
                if total > available.len() {
                    break;
                }
                let payload = &available[line_end + 2..line_end + 2 + length];
                self.state
                    .on_payload(payload, total as u64, now, shared, totals);
                self.start += total;
                continue;
            }
            if line == b"PING" {
                pong = true;
            } else if line.starts_with(b"-ERR") {
                return Err(format!("NATS error: {}", String::from_utf8_lossy(line)));
            }
            self.start += line_end + 2;
        }
        if pong {
            // Six bytes into an empty send buffer; a full one means the stream is dead anyway.
            let mut stream = stream;
            stream
                .write_all(b"PONG\r\n")
                .map_err(|error| format!("NATS PONG: {error}"))?;
        }
        Ok(())
    }
}

/// The payload length, the last field of `MSG <subject> <sid> [reply-to] <#bytes>`.
fn nats_payload_length(header: &[u8]) -> Option<usize> {
    let last = header
        .split(|byte| *byte == b' ')
        .rfind(|field| !field.is_empty())?;
    std::str::from_utf8(last).ok()?.parse().ok()
}

impl SubState {
    fn on_bps(
        &mut self,
        body: &[u8],
        wire_bytes: u64,
        now: u64,
        shared: &Shared,
        totals: &mut Totals,
    ) {
        let checked = match &mut self.check {
            FrameCheck::Verify(subscriber) => verified(
                subscriber.on_frame(Bytes::copy_from_slice(body)),
                shared,
                totals,
            ),
            FrameCheck::Bytes => compared(body, shared, totals),
            FrameCheck::Stamp => {
                match broadcast_payload(body) {
                    Ok(payload) => self.on_payload(payload, wire_bytes, now, shared, totals),
                    Err(error) => totals.fail(|| error.to_string()),
                }
                return;
            }
        };
        if let Some((stamp, payload_bytes)) = checked {
            self.account(stamp, payload_bytes, wire_bytes, now, shared, totals);
        }
    }

    fn on_payload(
        &mut self,
        payload: &[u8],
        wire_bytes: u64,
        now: u64,
        shared: &Shared,
        totals: &mut Totals,
    ) {
        match Stamp::decode(payload) {
            Ok(stamp) => self.account(stamp, payload.len() as u64, wire_bytes, now, shared, totals),
            Err(error) => totals.fail(|| error.to_string()),
        }
    }

    fn account(
        &mut self,
        stamp: Stamp,
        payload_bytes: u64,
        wire_bytes: u64,
        now: u64,
        shared: &Shared,
        totals: &mut Totals,
    ) {
        let local = stamp.publisher.checked_sub(self.first_publisher);
        let track = local.and_then(|local| self.tracks.get_mut(local as usize));
        let (Some(track), true) = (track, stamp.cohort == self.cohort) else {
            return totals.fail(|| {
                format!(
                    "delivery from publisher {} of cohort {} on a stream of cohort {}",
                    stamp.publisher, stamp.cohort, self.cohort
                )
            });
        };
        totals.deliveries += 1;
        if let Some(count) = totals.cohort_deliveries.get_mut(self.cohort as usize) {
            *count += 1;
        }
        match track.highest {
            Some(highest) if stamp.sequence <= highest => totals.reordered += 1,
            _ => track.highest = Some(stamp.sequence),
        }
        let sent = shared
            .publishers
            .get(stamp.publisher as usize)
            .and_then(|publisher| publisher.sent_at(stamp.sequence, stamp.intended_ns))
            .or((stamp.intended_ns != 0).then_some(stamp.intended_ns));
        if let Some(sent) = sent
            && shared.measured(sent)
        {
            totals.measured += 1;
            totals.payload_bytes += payload_bytes;
            totals.wire_bytes += wire_bytes;
            totals.latency.record_ns(now.saturating_sub(sent));
            track.first_measured = Some(
                track
                    .first_measured
                    .map_or(stamp.sequence, |first| first.min(stamp.sequence)),
            );
            track.last_measured = Some(
                track
                    .last_measured
                    .map_or(stamp.sequence, |last| last.max(stamp.sequence)),
            );
        }
    }
}

/// A verifying subscriber's delivery: its stamp and payload bytes when it verified and
/// its DATA index carries the stamp's sequence; otherwise the failure is counted.
fn verified(event: Event, shared: &Shared, totals: &mut Totals) -> Option<(Stamp, u64)> {
    match event {
        Event::Data { payload, index, .. } => {
            let stamp = match Stamp::decode(&payload) {
                Ok(stamp) => stamp,
                Err(error) => {
                    totals.fail(|| error.to_string());
                    return None;
                }
            };
            let expected = shared
                .publishers
                .get(stamp.publisher as usize)
                .and_then(|publisher| publisher.base_index)
                .map(|base| base.wrapping_add(stamp.sequence));
            if expected.is_some_and(|expected| expected != index) {
                totals.fail(|| {
                    format!(
                        "DATA index {index} does not carry sequence {}",
                        stamp.sequence
                    )
                });
                return None;
            }
            Some((stamp, payload.len() as u64))
        }
        Event::Dropped { reason } => {
            totals.fail(|| format!("verification failed: {reason}"));
            None
        }
        other => {
            totals.fail(|| format!("unexpected delivery: {other:?}"));
            None
        }
    }
}

/// A byte-checking subscriber's delivery: its stamp and payload bytes when it is the
/// published frame byte for byte; otherwise the failure is counted.
fn compared(body: &[u8], shared: &Shared, totals: &mut Totals) -> Option<(Stamp, u64)> {
    let decoded = broadcast_payload(body)
        .map_err(|error| error.to_string())
        .and_then(|payload| {
            Stamp::decode(payload)
                .map(|stamp| (stamp, payload.len() as u64))
                .map_err(|error| error.to_string())
        });
    let (stamp, payload_bytes) = match decoded {
        Ok(decoded) => decoded,
        Err(error) => {
            totals.fail(|| error);
            return None;
        }
    };
    let published = shared
        .publishers
        .get(stamp.publisher as usize)
        .and_then(|publisher| publisher.frames.get(usize::try_from(stamp.sequence).ok()?));
    match published {
        Some(frame) if frame.len() >= body.len() && frame[frame.len() - body.len()..] == *body => {
            Some((stamp, payload_bytes))
        }
        Some(_) => {
            totals.fail(|| {
                format!(
                    "delivery of publisher {} sequence {} differs from the published frame",
                    stamp.publisher, stamp.sequence
                )
            });
            None
        }
        None => {
            totals.fail(|| {
                format!(
                    "delivery names publisher {} sequence {}, which was never published",
                    stamp.publisher, stamp.sequence
                )
            });
            None
        }
    }
}

/// The BPS frame body inside one binary WebSocket message, which must hold exactly one
/// frame.
fn bps_body(payload: &[u8]) -> Result<&[u8], String> {
    match peek_frame(payload, FRAME_BYTES_MAX_DEFAULT) {
        Ok(Some(header)) if header.total_bytes() == payload.len() => {
            Ok(&payload[header.prefix_bytes..])
        }
        Ok(_) => Err(format!(
            "a {}-byte WebSocket message that is not exactly one BPS frame",
            payload.len()
        )),
        Err(error) => Err(format!("bad frame from the broker: {error}")),
    }
}

/// What a Close from the broker said: its code and reason.
fn close_error(payload: &[u8]) -> String {
    let code = payload
        .first_chunk::<2>()
        .map(|code| u16::from_be_bytes(*code));
    let reason = String::from_utf8_lossy(payload.get(2..).unwrap_or_default());
    format!(
        "the broker closed a WebSocket session: {} {reason}",
        code.map_or("without a code".to_owned(), |code| code.to_string())
    )
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;
    use std::sync::atomic::Ordering;
    use std::time::Instant;

    use super::*;

    fn socket_pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let writer = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (reader, _) = listener.accept().expect("accept");
        (writer, reader)
    }

    fn counting(reader: TcpStream, frame_bytes: usize) -> Endpoint {
        let check = Check::Count {
            frame_bytes,
            payload_bytes: frame_bytes - 10,
        };
        Endpoint::new(reader, &BytesMut::new(), Wire::Bps, 0, 0, 1, check).expect("endpoint")
    }

    /// Runs one receiving thread over `endpoints` (the whole run is the measurement
    /// window) until `done` says so, then stops it.
    fn receive(endpoints: Vec<Endpoint>, done: impl Fn(&Shared) -> bool) -> Totals {
        let now = now_ns();
        let shared = Arc::new(Shared::new(now, now + 60_000_000_000, Vec::new(), vec![2]));
        let thread_shared = Arc::clone(&shared);
        let handle = std::thread::spawn(move || run(endpoints, &thread_shared, 0, None));
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done(&shared) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        shared.stop.store(true, Ordering::Relaxed);
        handle.join().expect("receiver").expect("no I/O error")
    }

    #[test]
    fn counting_streams_count_whole_frames_and_show_loss_and_resets() {
        const FRAME: usize = 300;
        // Stream A gets 3 frames in uneven writes and stays open; stream B gets 2.5 frames
        // and is closed by its peer (a reset, with bytes short of a frame).
        let (mut writer_a, reader_a) = socket_pair();
        let (mut writer_b, reader_b) = socket_pair();
        let endpoints = vec![counting(reader_a, FRAME), counting(reader_b, FRAME)];
        let frames_a = vec![1u8; 3 * FRAME];
        let writing = std::thread::spawn(move || {
            for piece in frames_a.chunks(128) {
                writer_a.write_all(piece).expect("write a");
                std::thread::sleep(Duration::from_millis(2));
            }
            writer_b
                .write_all(&[2u8; 2 * FRAME + FRAME / 2])
                .expect("write b");
            drop(writer_b);
            writer_a
        });
        let totals = receive(endpoints, |shared| {
            shared.counted_frames.load(Ordering::Relaxed) >= 5
                && shared.resets.load(Ordering::Relaxed) >= 1
        });
        let _writer_a = writing.join().expect("writer");
        assert_eq!(totals.counted_frames, 5);
        assert_eq!(totals.counted_measured, 5, "all inside the window");
        assert_eq!(totals.wire_bytes, 5 * FRAME as u64);
        assert_eq!(totals.payload_bytes, 5 * (FRAME as u64 - 10));
        assert_eq!(totals.cohort_deliveries, [5], "subscribers feed the window");
        assert_eq!(totals.resets, 1);
        assert_eq!(totals.latency.count(), 0, "counting streams are not timed");
        let mut streams = totals.counted_streams.clone();
        streams.sort_by_key(|stream| stream.frames);
        let (b, a) = (streams[0], streams[1]);
        assert_eq!((a.frames, a.partial_bytes, a.open), (3, 0, true));
        assert_eq!(a.server_pings, 0);
        assert!(!a.is_short(3) && a.missing(3) == 0);
        assert!(a.is_short(4), "a fourth frame sent would be missing");
        assert_eq!(
            (b.frames, b.partial_bytes, b.open),
            (2, FRAME as u64 / 2, false)
        );
        assert!(b.is_short(3));
        assert_eq!(b.missing(3), 1);
        assert!(
            b.is_short(2),
            "ending inside a frame is short even when the count adds up"
        );
        assert_eq!(totals.threads.len(), 1);
        assert_eq!(totals.threads[0].streams, 2);
    }

    #[test]
    fn harvests_spread_out_while_streams_hold_little_and_close_up_when_one_holds_much() {
        let mut harvest = Harvest::new(0);
        assert!(harvest.is_due(0));
        harvest.next(0, 100);
        assert_eq!(
            harvest.interval,
            COUNT_INTERVAL_MIN * 2,
            "little queued: wait longer"
        );
        for _ in 0..10 {
            harvest.next(0, 100);
        }
        assert_eq!(
            harvest.interval, COUNT_INTERVAL_MAX,
            "never longer than the maximum"
        );
        assert_eq!(harvest.due_in(0), COUNT_INTERVAL_MAX);
        harvest.next(0, COUNT_BYTES_LOW);
        assert_eq!(
            harvest.interval, COUNT_INTERVAL_MAX,
            "between the marks: unchanged"
        );
        harvest.next(0, COUNT_BYTES_HIGH);
        assert_eq!(
            harvest.interval,
            COUNT_INTERVAL_MAX / 2,
            "a full stream: sooner"
        );
        for _ in 0..10 {
            harvest.next(1_000, COUNT_BYTES_HIGH);
        }
        assert_eq!(harvest.interval, COUNT_INTERVAL_MIN);
        assert!(!harvest.is_due(1_000) && harvest.is_due(1_000 + 1_000_000));
        assert_eq!(
            harvest.due_in(1_001),
            Duration::from_millis(1),
            "rounded up to 1 ms"
        );
    }

    #[test]
    fn a_publisher_stream_counts_but_does_not_feed_the_subscribers_window() {
        let (mut writer, reader) = socket_pair();
        let endpoint =
            Endpoint::publisher_stream(reader, &BytesMut::from(&[7u8; 150][..]), 0, 3, 100, 90)
                .expect("endpoint");
        assert!(endpoint.counts() && !endpoint.verifies());
        writer.write_all(&[7u8; 250]).expect("write");
        let totals = receive(vec![endpoint], |shared| {
            shared.counted_frames.load(Ordering::Relaxed) >= 4
        });
        assert_eq!(
            totals.counted_frames, 4,
            "150 bytes with the Ack + 250 after"
        );
        assert_eq!(totals.cohort_deliveries, [0]);
        assert_eq!(totals.counted_streams[0].own_publisher, Some(3));
        assert_eq!(totals.counted_streams[0].partial_bytes, 0);
        // A counting subscriber left out of the window counts all the same.
        let (mut writer, reader) = socket_pair();
        let endpoint = counting(reader, 100).outside_window();
        writer.write_all(&[7u8; 200]).expect("write");
        let totals = receive(vec![endpoint], |shared| {
            shared.counted_frames.load(Ordering::Relaxed) >= 2
        });
        assert_eq!((totals.counted_frames, totals.cohort_deliveries[0]), (2, 0));
    }

    #[test]
    fn a_nats_counting_stream_takes_a_remainder_of_whole_pings_for_pings() {
        let nats = |reader| {
            let check = Check::Count {
                frame_bytes: 100,
                payload_bytes: 80,
            };
            Endpoint::new(reader, &BytesMut::new(), Wire::Nats, 0, 0, 1, check).expect("endpoint")
        };
        let (mut pinged, reader_a) = socket_pair();
        let (mut truncated, reader_b) = socket_pair();
        pinged.write_all(&[b'm'; 200]).expect("write");
        pinged.write_all(b"PING\r\n").expect("write");
        truncated.write_all(&[b'm'; 207]).expect("write");
        let totals = receive(vec![nats(reader_a), nats(reader_b)], |shared| {
            shared.counted_frames.load(Ordering::Relaxed) >= 4
        });
        let mut streams = totals.counted_streams.clone();
        streams.sort_by_key(|stream| stream.partial_bytes);
        assert_eq!(
            (
                streams[0].frames,
                streams[0].partial_bytes,
                streams[0].server_pings
            ),
            (2, 0, 1)
        );
        assert!(!streams[0].is_short(2));
        assert_eq!(
            (
                streams[1].frames,
                streams[1].partial_bytes,
                streams[1].server_pings
            ),
            (2, 7, 0)
        );
        assert!(
            streams[1].is_short(2),
            "7 bytes are no whole PING: a partial frame"
        );
    }
}
