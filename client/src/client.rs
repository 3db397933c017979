//! The terminal client: the loops behind `bps sub`, `bps pub`, `bps roster` and `bps eos`.
//!
//! Owns: driving a stream on any carrier ([`Carried`]) with a [`Subscriber`] (every received frame verified end to
//! end, R41) or a [`Publisher`] (claim, publish, reconnect with re-signing), the R38 backoff
//! between streams, the overall timeout, and the lines printed for each event. Given several
//! brokers, a run starts at its cohort's root by placement and moves along the [`Route`] to
//! the next in rank after a failed connect or, when reconnecting, a lost stream.
//!
//! `bps sub --json` prints one JSON object per line, each with a `kind` (a contract, like
//! the field names):
//! - `joined`: `addr`, `challenge` (hex), once per stream;
//! - `data`: `owner`, `index`, `payload_hex`, `payload_utf8`, and where the feed defines a
//!   next update `next_index` and `next_address` (hex): the SOC address of that
//!   publisher's next update, on the same stream for session feeds (explicit, ALL), the
//!   feed update under implicit FEED_TOPIC (see [`crate::subscriber`], item 5);
//! - `gap`, just before a `data` line whose index is above its publisher's cursor:
//!   `owner`, `expected`, `got` (indices `expected..got` never arrived; a publisher's first
//!   frame, or its first after an eviction, is never a gap). Under implicit FEED_TOPIC the
//!   publisher is the feed writer and its cursor follows the highest index it wrote (see
//!   [`crate::subscriber`], item 4); the other implicit bindings have no gaps;
//! - `evicted`, just after a `data` line whose publisher, new to the full cursor table,
//!   pushed the least recently advanced one out: `owner`, `cursor` (its next index then).
//!   That publisher's cursor restarts, so a retransmit of its older frames could be shown
//!   again;
//! - `roster`: `index`, `publishers`, `next_index`, `next_address` (the admin's next
//!   ROSTER on that stream), and `liveness_fault` when rosters were missed;
//! - `eos`; `dropped`: `reason`.
//!
//! Never: decides what is valid (the subscriber does), signs (the publisher does), or
//! exits the process: every outcome is a value the binary maps to an exit code. A refused
//! Join ends the run with [`ClientError::Refused`] (a FULL root is not failed over: it is the
//! cohort's meeting point); a reset stream is retried after a backoff delay unless
//! reconnecting is off.

use std::io::{self, Write};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::thread;
use std::time::{Duration, Instant};

use bps_proto::{Address, Kind, Spec, Status};
use serde_json::json;

use crate::backoff::Backoff;
use crate::carrier::Carried;
use crate::publisher::{Outgoing, Publisher, Role};
use crate::refusal::Refusal;
use crate::route::Route;
use crate::session::{SessionConfig, SessionError};
use crate::subscriber::{Event, Received, Subscriber};

/// How long a finished stream waits for the broker to close after our last frame.
pub const CLOSE_LINGER: Duration = Duration::from_secs(1);

/// Longest single wait on the socket, so the loops look at their deadlines and inputs.
const POLL_STEP: Duration = Duration::from_millis(200);

/// Wait between looks at stdin while a publisher has nothing else to do.
const INPUT_POLL: Duration = Duration::from_millis(20);

/// Input lines a publisher holds unwritten at most: a burst's worth; beyond it no more lines
/// are taken, so a broker that reads slowly pushes back on the input (the `bps` binary's
/// stdin channel holds as many again) instead of growing memory.
pub const INPUT_LINES_QUEUED_MAX: usize = 256;

/// Why a run ended without success.
#[derive(Debug)]
pub enum ClientError {
    /// The broker answered the Join with FULL or REJECTED (exit code 3); its rendering
    /// names the bound and the setting that moves it.
    Refused(Refusal),
    /// Anything else: a stream error without reconnecting, a timeout, a revocation, the
    /// channel's end for a publisher (exit code 1).
    Failed(String),
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Refused(refusal) => write!(formatter, "join refused: {refusal}"),
            Self::Failed(message) => formatter.write_str(message),
        }
    }
}

impl std::error::Error for ClientError {}

/// Where to connect and how to behave between streams.
#[derive(Debug, Clone)]
pub struct Connection {
    /// The brokers, each `HOST:PORT` (TCP), `ws://HOST:PORT/bps/v1` (WebSocket) or a
    /// multiaddr ending in `/p2p/<peer id>` (libp2p); several are ranked for the cohort by
    /// placement ([`Route`]).
    pub targets: Vec<String>,
    /// The Swarm network a libp2p target's light node is on.
    pub network_id: u64,
    /// Timeouts of each stream.
    pub session: SessionConfig,
    /// Reconnect after a reset (R38 backoff) instead of failing.
    pub reconnect: bool,
    /// Give up after this long.
    pub timeout: Option<Duration>,
}

/// `bps sub`'s options.
#[derive(Debug, Clone)]
pub struct SubOptions {
    /// The cohort.
    pub spec: Spec,
    /// The address to join as (a random one makes a spectator).
    pub addr: Address,
    /// Print JSON lines instead of payload lines.
    pub json: bool,
    /// Stop after this many DATA messages.
    pub count: Option<u64>,
}

/// The terminal's two streams.
#[derive(Debug)]
pub struct Output<O, E> {
    /// Payloads or JSON lines.
    pub out: O,
    /// Notices and warnings.
    pub err: E,
}

impl<O: Write, E: Write> Output<O, E> {
    fn line(&mut self, text: &str) -> io::Result<()> {
        writeln!(self.out, "{text}")?;
        self.out.flush()
    }

    fn note(&mut self, text: &str) {
        // Notices are best effort: a closed stderr must not end a subscription.
        let _ = writeln!(self.err, "{text}");
    }
}

/// How a run that printed to a closed pipe ends: as a success (`bps sub | head -1`).
fn printed(result: io::Result<()>) -> Result<bool, ClientError> {
    match result {
        Ok(()) => Ok(true),
        Err(error) if error.kind() == io::ErrorKind::BrokenPipe => Ok(false),
        Err(error) => Err(ClientError::Failed(format!("stdout: {error}"))),
    }
}

/// A deadline and the R38 schedule shared by the loops.
struct Pacing {
    deadline: Option<Instant>,
    backoff: Backoff,
}

impl Pacing {
    fn new(timeout: Option<Duration>) -> Self {
        Self {
            deadline: timeout.map(|timeout| Instant::now() + timeout),
            backoff: Backoff::new(),
        }
    }

    fn expired(&self) -> bool {
        self.deadline
            .is_some_and(|deadline| Instant::now() >= deadline)
    }

    /// `wait`, shortened to the deadline.
    fn bounded(&self, wait: Duration) -> Duration {
        self.deadline.map_or(wait, |deadline| {
            wait.min(deadline.saturating_duration_since(Instant::now()))
        })
    }

    /// Sleeps for the next backoff delay (bounded by the deadline); `false` if the
    /// deadline passed.
    fn back_off<O: Write, E: Write>(&mut self, output: &mut Output<O, E>, why: &str) -> bool {
        let delay = self.backoff.next_delay();
        output.note(&format!(
            "warning: {why}; retrying in {:.1} s",
            delay.as_secs_f64()
        ));
        thread::sleep(self.bounded(delay));
        !self.expired()
    }
}

/// The route of a run's cohort over the connection's brokers.
fn route(connection: &Connection, spec: &Spec) -> Result<Route, ClientError> {
    Route::new(&connection.targets, spec)
        .map_err(|error| ClientError::Failed(format!("--target: {error}")))
}

/// What a warning says of a failed stream: the failure, and where the retry goes when
/// there is somewhere else to go (the route has already moved on).
fn failure(route: &Route, what: &str) -> String {
    if route.fails_over() {
        format!("{what}; next: {}", route.current())
    } else {
        what.to_owned()
    }
}

/// Opens a stream, retrying with backoff on connection errors when allowed, each retry at
/// the next broker of the route.
fn open<O: Write, E: Write>(
    (connection, route): (&Connection, &mut Route),
    spec: &Spec,
    addr: &Address,
    pacing: &mut Pacing,
    output: &mut Output<O, E>,
) -> Result<Option<Carried>, ClientError> {
    loop {
        let joined = Carried::join(
            route.current(),
            (spec, addr),
            connection.session,
            connection.network_id,
        );
        match joined {
            Ok(Ok(session)) => {
                pacing.backoff.reset();
                return Ok(Some(session));
            }
            Ok(Err(refusal)) => {
                if refusal.status == Status::Rejected && spec.history {
                    output.note(
                        "note: a broker that keeps no history rejects --history (D11); \
                         without it the Join names another cohort (R1)",
                    );
                }
                return Err(ClientError::Refused(refusal));
            }
            Err(error) if connection.reconnect => {
                route.advance();
                if !pacing.back_off(output, &failure(route, &error.to_string())) {
                    return Ok(None);
                }
            }
            Err(error) => return Err(ClientError::Failed(error.to_string())),
        }
    }
}

/// How one stream of a run ended (a failure of the whole run is an `Err` beside it).
enum SessionEnd {
    /// The run is over, successfully.
    Over,
    /// The stream was reset.
    Reset(SessionError),
}

/// After a reset, shared by `run_sub` and `run_pub`: without `--reconnect` the run fails
/// with it; with it, the route moves to the next broker, the run backs off and `Ok(true)`
/// opens another stream (`Ok(false)`: the deadline passed meanwhile).
fn reconnect_after<O: Write, E: Write>(
    (connection, route): (&Connection, &mut Route),
    pacing: &mut Pacing,
    output: &mut Output<O, E>,
    reset: &SessionError,
) -> Result<bool, ClientError> {
    if !connection.reconnect {
        return Err(ClientError::Failed(reset.to_string()));
    }
    route.advance();
    let why = failure(route, &format!("stream reset: {reset}"));
    Ok(pacing.back_off(output, &why))
}

/// Runs `bps sub`: joins, verifies and prints every frame until `count` DATA messages, an
/// EOS or the timeout. A timeout is a failure only when `count` was given and not reached.
pub fn run_sub<O: Write, E: Write>(
    connection: &Connection,
    options: &SubOptions,
    output: &mut Output<O, E>,
) -> Result<(), ClientError> {
    let mut subscriber = Subscriber::new(options.spec);
    let mut pacing = Pacing::new(connection.timeout);
    let mut route = route(connection, &options.spec)?;
    let mut received = 0u64;
    if options.count == Some(0) {
        return Ok(());
    }
    loop {
        let Some(session) = open(
            (connection, &mut route),
            &options.spec,
            &options.addr,
            &mut pacing,
            output,
        )?
        else {
            return sub_timed_out(options.count, received);
        };
        if !print_joined(route.current(), options, &session, output)? {
            return Ok(());
        }
        let run = (&mut subscriber, &mut received);
        match sub_session(session, run, options, &pacing, output)? {
            SessionEnd::Over => return Ok(()),
            SessionEnd::Reset(reset) => {
                let at = (connection, &mut route);
                if !reconnect_after(at, &mut pacing, output, &reset)? {
                    return sub_timed_out(options.count, received);
                }
            }
        }
    }
}

/// How `bps sub` ends at its deadline: a failure only when `count` was given and not
/// reached.
fn sub_timed_out(count: Option<u64>, received: u64) -> Result<(), ClientError> {
    match count {
        Some(count) if received < count => Err(ClientError::Failed(format!(
            "timed out with {received} of {count} messages"
        ))),
        _ => Ok(()),
    }
}

/// `bps sub`'s line for a joined stream (JSON on stdout, or a note); `false` if stdout is
/// closed.
fn print_joined<O: Write, E: Write>(
    target: &str,
    options: &SubOptions,
    session: &Carried,
    output: &mut Output<O, E>,
) -> Result<bool, ClientError> {
    if options.json {
        return printed(
            output.line(
                &json!({
                    "kind": "joined",
                    "addr": hex::encode(options.addr),
                    "challenge": hex::encode(session.challenge()),
                })
                .to_string(),
            ),
        );
    }
    output.note(&format!(
        "joined {target} as 0x{}",
        hex::encode(options.addr)
    ));
    Ok(true)
}

/// One stream of `bps sub`: receives, verifies and prints until a count, an EOS, the
/// deadline or a reset. `received` counts DATA messages across streams.
fn sub_session<O: Write, E: Write>(
    mut session: Carried,
    (subscriber, received): (&mut Subscriber, &mut u64),
    options: &SubOptions,
    pacing: &Pacing,
    output: &mut Output<O, E>,
) -> Result<SessionEnd, ClientError> {
    // The run ends at a count, an EOS or the deadline; how the close goes no longer
    // matters then, so `finish` errors are ignored below.
    loop {
        if pacing.expired() {
            let _ = session.finish(Duration::ZERO);
            return sub_timed_out(options.count, *received).map(|()| SessionEnd::Over);
        }
        let body = match session.recv(pacing.bounded(POLL_STEP)) {
            Ok(Some(body)) => body,
            Ok(None) => continue,
            Err(error) => return Ok(SessionEnd::Reset(error)),
        };
        let outcome = subscriber.receive(body);
        if !printed(print_received(&outcome, options.json, output))? {
            return Ok(SessionEnd::Over);
        }
        match outcome.event {
            Event::Data { .. } => {
                *received += 1;
                if options.count.is_some_and(|count| *received >= count) {
                    let _ = session.finish(Duration::ZERO);
                    return Ok(SessionEnd::Over);
                }
            }
            Event::Eos => {
                let _ = session.finish(Duration::ZERO);
                return Ok(SessionEnd::Over);
            }
            Event::Roster { .. } | Event::Dropped { .. } => {}
        }
    }
}

/// Prints what one received frame became: JSON lines on stdout ([`received_json`]), or the
/// payload as a line on stdout and everything else on stderr.
fn print_received<O: Write, E: Write>(
    received: &Received,
    json_lines: bool,
    output: &mut Output<O, E>,
) -> io::Result<()> {
    if let Event::Roster { gap: Some(gap), .. } = &received.event {
        output.note(&format!("warning: liveness fault: roster {gap}"));
    }
    if json_lines {
        return received_json(received)
            .iter()
            .try_for_each(|line| output.line(line));
    }
    if let (Some(gap), Event::Data { owner, .. }) = (&received.gap, &received.event) {
        output.note(&format!("gap: 0x{}: {gap}", hex::encode(owner)));
    }
    match &received.event {
        Event::Data { payload, .. } => output.line(&String::from_utf8_lossy(payload))?,
        Event::Roster {
            index, publishers, ..
        } => {
            let names: Vec<String> = publishers.iter().map(hex::encode).collect();
            output.note(&format!("roster {index}: [{}]", names.join(", ")));
        }
        Event::Eos => output.note("eos: the admin ended the channel"),
        Event::Dropped { reason } => output.note(&format!("dropped: {reason}")),
    }
    if let Some(evicted) = &received.evicted {
        output.note(&format!(
            "note: cursor table full: forgot 0x{} at index {}; its older frames could be \
             shown again",
            hex::encode(evicted.owner),
            evicted.cursor
        ));
    }
    Ok(())
}

/// The JSON lines `bps sub --json` prints for one received frame (module docs), in order:
/// a `gap` line if the DATA skipped indices, the event's own line (with `next_index` and
/// `next_address` where the feed defines a next update), an `evicted` line if the DATA
/// pushed a cursor out of the table.
pub fn received_json(received: &Received) -> Vec<String> {
    let mut lines = Vec::with_capacity(3);
    if let (Some(gap), Event::Data { owner, .. }) = (&received.gap, &received.event) {
        lines.push(
            json!({
                "kind": "gap",
                "owner": hex::encode(owner),
                "expected": gap.expected,
                "got": gap.got,
            })
            .to_string(),
        );
    }
    let mut line = event_json(&received.event);
    if let Some(next) = &received.next {
        line["next_index"] = json!(next.index);
        line["next_address"] = json!(hex::encode(next.address));
    }
    lines.push(line.to_string());
    if let Some(evicted) = &received.evicted {
        lines.push(
            json!({
                "kind": "evicted",
                "owner": hex::encode(evicted.owner),
                "cursor": evicted.cursor,
            })
            .to_string(),
        );
    }
    lines
}

/// The JSON line of a verdict.
fn event_json(event: &Event) -> serde_json::Value {
    match event {
        Event::Data {
            owner,
            index,
            payload,
        } => json!({
            "kind": "data",
            "owner": hex::encode(owner),
            "index": index,
            "payload_hex": hex::encode(payload),
            "payload_utf8": String::from_utf8_lossy(payload),
        }),
        Event::Roster {
            index,
            publishers,
            gap,
        } => {
            let names: Vec<String> = publishers.iter().map(hex::encode).collect();
            let mut line = json!({ "kind": "roster", "index": index, "publishers": names });
            if let Some(gap) = gap {
                line["liveness_fault"] = json!(format!("roster index gap: {gap}"));
            }
            line
        }
        Event::Eos => json!({ "kind": "eos" }),
        Event::Dropped { reason } => json!({ "kind": "dropped", "reason": reason.to_string() }),
    }
}

/// `bps pub`'s (and `roster`'s, `eos`'s) pacing.
#[derive(Debug, Clone, Copy, Default)]
pub struct PubOptions {
    /// At most this many frames per second.
    pub rate: Option<f64>,
}

/// Runs a publisher: joins as its key, claims when pending (AUTH at index 0), writes the
/// queue and then every line from `lines` (if any) until the queue is empty and `lines` is
/// closed, printing one JSON line per frame written. A reset re-joins (backoff) and the
/// unwritten publications are signed again under the new stream's challenge.
pub fn run_pub<O: Write, E: Write>(
    connection: &Connection,
    options: PubOptions,
    publisher: Publisher,
    lines: Option<Receiver<Vec<u8>>>,
    output: &mut Output<O, E>,
) -> Result<(), ClientError> {
    let spec = *publisher.spec();
    let mut run = PubRun {
        addr: publisher.addr(),
        subscriber: Subscriber::new(spec),
        publisher,
        lines,
        interval: options
            .rate
            .filter(|rate| *rate > 0.0)
            .map(|rate| Duration::from_secs_f64(1.0 / rate)),
        next_send: Instant::now(),
        eos_written: false,
    };
    let mut pacing = Pacing::new(connection.timeout);
    let mut route = route(connection, &spec)?;
    loop {
        let at = (connection, &mut route);
        let Some(session) = open(at, &spec, &run.addr, &mut pacing, output)? else {
            return Err(run.timed_out());
        };
        run.publisher.begin_session(*session.challenge());
        run.announce(route.current(), output);
        match run.session(session, &pacing, output)? {
            SessionEnd::Over => return Ok(()),
            SessionEnd::Reset(reset) => {
                run.publisher.end_session();
                let at = (connection, &mut route);
                if !reconnect_after(at, &mut pacing, output, &reset)? {
                    return Err(run.timed_out());
                }
            }
        }
    }
}

/// A publisher's run across its streams: what it publishes, what it has seen of the
/// cohort, its input, and its pacing (`next_send` carries over a reset).
struct PubRun {
    addr: Address,
    publisher: Publisher,
    subscriber: Subscriber,
    lines: Option<Receiver<Vec<u8>>>,
    /// The time between frames at `--rate`.
    interval: Option<Duration>,
    next_send: Instant,
    /// Our EOS is written: the broker ends the cohort and closes this stream too.
    eos_written: bool,
}

/// What a due send did.
enum Sending {
    /// Nothing was due, or nothing queued.
    Idle,
    /// A frame went out.
    Sent,
    /// The session ended (a reset, or stdout closed).
    Ended(SessionEnd),
}

impl PubRun {
    fn timed_out(&self) -> ClientError {
        ClientError::Failed(format!(
            "timed out with {} publications unwritten",
            self.publisher.queued()
        ))
    }

    /// The notes for a joined stream.
    fn announce<O: Write, E: Write>(&self, target: &str, output: &mut Output<O, E>) {
        let addr = hex::encode(self.addr);
        output.note(&format!("joined {target} as 0x{addr}"));
        if self.publisher.role() == Some(Role::AwaitingRoster) {
            output.note(&format!("waiting for a roster naming 0x{addr}"));
        }
    }

    /// One stream: take the broker's frames and the input, send what is due, wait; until
    /// everything is written and the input closed, or a reset.
    fn session<O: Write, E: Write>(
        &mut self,
        mut session: Carried,
        pacing: &Pacing,
        output: &mut Output<O, E>,
    ) -> Result<SessionEnd, ClientError> {
        loop {
            if pacing.expired() {
                return Err(self.timed_out());
            }
            if let Err(error) = self.take_broker_frames(&mut session)? {
                return Ok(self.ended_by(error));
            }
            let input_open = take_lines(&mut self.lines, &mut self.publisher, output);
            let now = Instant::now();
            match self.send_due(&mut session, now, output)? {
                Sending::Sent => continue,
                Sending::Ended(end) => return Ok(end),
                Sending::Idle => {}
            }
            let publishing = self.publisher.role() == Some(Role::Publisher);
            if publishing && self.publisher.queued() == 0 && !input_open {
                return session
                    .finish(CLOSE_LINGER)
                    .map(|()| SessionEnd::Over)
                    .map_err(|error| ClientError::Failed(error.to_string()));
            }
            let wait = if publishing && self.publisher.queued() > 0 {
                self.next_send.saturating_duration_since(now)
            } else if input_open {
                INPUT_POLL
            } else {
                POLL_STEP
            };
            match session.recv(pacing.bounded(wait)) {
                Ok(Some(body)) => apply(&mut self.subscriber, &mut self.publisher, body)?,
                Ok(None) => {}
                Err(error) => return Ok(self.ended_by(error)),
            }
        }
    }

    /// How a stream that failed with `error` ended: once our EOS and everything before it
    /// is written, the broker's close (EOF, not a reset) is the cohort ending as asked,
    /// which may reach us before our own close; anything else is a reset.
    fn ended_by(&self, error: SessionError) -> SessionEnd {
        let ended_as_asked = self.eos_written
            && self.publisher.queued() == 0
            && matches!(error, SessionError::Closed);
        if ended_as_asked {
            SessionEnd::Over
        } else {
            SessionEnd::Reset(error)
        }
    }

    /// Everything the broker sent: rosters grant or revoke, the rest is not ours. The
    /// inner `Err` is a reset; an EOS or a revocation ends the run.
    fn take_broker_frames(
        &mut self,
        session: &mut Carried,
    ) -> Result<Result<(), SessionError>, ClientError> {
        match drain(session, &mut self.subscriber, &mut self.publisher) {
            Ok(Drained::Open) => {}
            Ok(Drained::Eos) => {
                return Err(ClientError::Failed(
                    "the admin ended the channel (EOS)".to_owned(),
                ));
            }
            Err(error) => return Ok(Err(error)),
        }
        if self.publisher.role() == Some(Role::Revoked) {
            return Err(ClientError::Failed(format!(
                "revoked: the roster no longer names 0x{}",
                hex::encode(self.addr)
            )));
        }
        Ok(Ok(()))
    }

    /// Sends the next publication if `now` is past the pace and one is ready.
    fn send_due<O: Write, E: Write>(
        &mut self,
        session: &mut Carried,
        now: Instant,
        output: &mut Output<O, E>,
    ) -> Result<Sending, ClientError> {
        if now < self.next_send {
            return Ok(Sending::Idle);
        }
        let outgoing = self
            .publisher
            .next_frame()
            .map_err(|error| ClientError::Failed(error.to_string()))?;
        let Some(outgoing) = outgoing else {
            return Ok(Sending::Idle);
        };
        if let Err(error) = session.send(&outgoing.signed.frame) {
            return Ok(Sending::Ended(SessionEnd::Reset(error)));
        }
        self.publisher.mark_sent();
        self.eos_written |= outgoing.kind == Kind::Eos;
        if !printed(output.line(&outgoing_json(&outgoing, &self.addr)))? {
            return Ok(Sending::Ended(SessionEnd::Over));
        }
        if let Some(interval) = self.interval {
            self.next_send = now + interval;
        }
        Ok(Sending::Sent)
    }
}

enum Drained {
    Open,
    Eos,
}

/// Handles every frame already received, without waiting.
fn drain(
    session: &mut Carried,
    subscriber: &mut Subscriber,
    publisher: &mut Publisher,
) -> Result<Drained, SessionError> {
    while let Some(body) = session.recv(Duration::ZERO)? {
        if apply(subscriber, publisher, body).is_err() {
            return Ok(Drained::Eos);
        }
    }
    Ok(Drained::Open)
}

/// Verifies one received frame; a roster goes to the publisher, and so does the roster in
/// force when the broker sends it again first on a new stream (R22): it grants that stream
/// (R23) although the subscriber drops it as a retransmit. `Err` on EOS.
fn apply(
    subscriber: &mut Subscriber,
    publisher: &mut Publisher,
    body: bytes::Bytes,
) -> Result<(), ClientError> {
    let event = subscriber.on_frame(body);
    if subscriber.repeats_roster_in_force(&event) {
        publisher.on_roster(subscriber.roster());
    }
    match event {
        Event::Roster { publishers, .. } => {
            publisher.on_roster(&publishers);
            Ok(())
        }
        Event::Eos => Err(ClientError::Failed(
            "the admin ended the channel (EOS)".to_owned(),
        )),
        Event::Data { .. } | Event::Dropped { .. } => Ok(()),
    }
}

/// Queues the lines already read from stdin while fewer than [`INPUT_LINES_QUEUED_MAX`]
/// publications wait; `false` once stdin is closed and drained.
fn take_lines<O: Write, E: Write>(
    lines: &mut Option<Receiver<Vec<u8>>>,
    publisher: &mut Publisher,
    output: &mut Output<O, E>,
) -> bool {
    let Some(receiver) = lines.as_ref() else {
        return false;
    };
    while publisher.queued() < INPUT_LINES_QUEUED_MAX {
        match receiver.try_recv() {
            Ok(line) => {
                if let Err(error) = publisher.enqueue_data(line) {
                    output.note(&format!("warning: line not published: {error}"));
                }
            }
            Err(TryRecvError::Empty) => return true,
            Err(TryRecvError::Disconnected) => {
                *lines = None;
                return false;
            }
        }
    }
    true
}

/// The JSON line printed for a written frame.
pub fn outgoing_json(outgoing: &Outgoing, owner: &Address) -> String {
    json!({
        "kind": outgoing.kind.as_str_name().to_ascii_lowercase(),
        "index": outgoing.index,
        "id": hex::encode(outgoing.id),
        "owner": hex::encode(owner),
        "address": hex::encode(outgoing.address),
        "payload_len": outgoing.payload_len,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::net::TcpListener;

    use bps_proto::{
        Ack, Binding, Broadcast, FRAME_BYTES_MAX_DEFAULT, Hash, Kind, decode_broadcast,
        encode_frame, encode_roster, next_frame, session_chunk_id,
    };
    use bps_verify::{SigningKey, SocRef, sign_broadcast};
    use bytes::{Bytes, BytesMut};

    use super::*;
    use crate::publisher::PublisherConfig;
    use crate::subscriber::SubscriberLimits;

    const TOPIC: Hash = [0x42; 32];

    /// What a scripted peer does on one connection: read the Join, answer `ack`, write
    /// `frames`, then read Broadcasts until `read` of them arrived (then close) or EOF.
    struct Script {
        ack: Ack,
        frames: Vec<Bytes>,
        read: Option<usize>,
    }

    fn ok(challenge: Hash) -> Ack {
        Ack {
            status: Status::Ok as i32,
            challenge: Bytes::copy_from_slice(&challenge),
        }
    }

    fn read_frame(stream: &mut std::net::TcpStream, buf: &mut BytesMut) -> Option<Bytes> {
        loop {
            if let Some(body) = next_frame(buf, FRAME_BYTES_MAX_DEFAULT).expect("frame") {
                return Some(body);
            }
            let mut chunk = [0u8; 4096];
            match stream.read(&mut chunk) {
                Ok(0) | Err(_) => return None,
                Ok(read) => buf.extend_from_slice(&chunk[..read]),
            }
        }
    }

    /// A peer that plays `scripts`, one per connection, and returns what each one read.
    fn peer(scripts: Vec<Script>) -> (String, thread::JoinHandle<Vec<Vec<Broadcast>>>) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let target = listener.local_addr().expect("addr").to_string();
        (target, peer_on(listener, scripts))
    }

    /// [`peer`] on a listener the test already holds.
    fn peer_on(
        listener: TcpListener,
        scripts: Vec<Script>,
    ) -> thread::JoinHandle<Vec<Vec<Broadcast>>> {
        thread::spawn(move || {
            let mut streams = Vec::new();
            for script in scripts {
                let (mut stream, _) = listener.accept().expect("accept");
                let mut buf = BytesMut::new();
                read_frame(&mut stream, &mut buf).expect("join");
                stream.write_all(&encode_frame(&script.ack)).expect("ack");
                for frame in &script.frames {
                    stream.write_all(frame).expect("frame");
                }
                let mut read = Vec::new();
                while script.read.is_none_or(|limit| read.len() < limit) {
                    match read_frame(&mut stream, &mut buf) {
                        Some(body) => read.push(decode_broadcast(body).expect("broadcast")),
                        None => break,
                    }
                }
                streams.push(read);
            }
            streams
        })
    }

    fn connection(target: String, reconnect: bool) -> Connection {
        Connection {
            targets: vec![target],
            network_id: crate::bee_node::DEFAULT_NETWORK_ID,
            session: SessionConfig::default(),
            reconnect,
            timeout: Some(Duration::from_secs(20)),
        }
    }

    fn key(byte: u8) -> SigningKey {
        SigningKey::from_bytes(&[byte; 32]).expect("key")
    }

    fn explicit(admin: &SigningKey) -> Spec {
        Spec {
            topic: TOPIC,
            binding: Binding::FeedTopic,
            admin: Some(admin.address()),
            all: false,
            history: false,
            closed: false,
        }
    }

    fn terminal() -> Output<Vec<u8>, Vec<u8>> {
        Output {
            out: Vec::new(),
            err: Vec::new(),
        }
    }

    fn lines(bytes: &[u8]) -> Vec<serde_json::Value> {
        String::from_utf8_lossy(bytes)
            .lines()
            .map(|line| serde_json::from_str(line).expect("json line"))
            .collect()
    }

    #[test]
    fn pub_claims_then_publishes_and_closes_cleanly() {
        let admin = key(1);
        let (target, peer) = peer(vec![Script {
            ack: ok([7; 32]),
            frames: Vec::new(),
            read: None,
        }]);
        let config = PublisherConfig {
            data_index_start: 3,
            ..PublisherConfig::default()
        };
        let mut publisher = Publisher::new(explicit(&admin), admin.clone(), config).expect("fits");
        publisher.enqueue_data(&b"one"[..]).expect("data");
        publisher.enqueue_data(&b"two"[..]).expect("data");
        let mut output = terminal();
        run_pub(
            &connection(target, false),
            PubOptions::default(),
            publisher,
            None,
            &mut output,
        )
        .expect("published");
        let read = peer.join().expect("peer").remove(0);
        let kinds: Vec<(i32, u64)> = read.iter().map(|frame| (frame.kind, frame.index)).collect();
        assert_eq!(
            kinds,
            [
                (Kind::Auth as i32, 0),
                (Kind::Data as i32, 3),
                (Kind::Data as i32, 4)
            ]
        );
        let printed = lines(&output.out);
        assert_eq!(printed.len(), 3);
        assert_eq!(printed[0]["kind"], "auth");
        assert_eq!(printed[1]["kind"], "data");
        assert_eq!(printed[1]["index"], 3);
        assert_eq!(printed[1]["owner"], hex::encode(admin.address()));
        assert_eq!(printed[2]["payload_len"], 3);
    }

    /// The broker ends the cohort after our EOS and closes our stream too, possibly before
    /// the client has closed it: that is the run succeeding.
    #[test]
    fn eos_then_the_brokers_close_is_a_success() {
        let admin = key(1);
        let (target, peer) = peer(vec![Script {
            ack: ok([7; 32]),
            frames: Vec::new(),
            read: Some(2),
        }]);
        let mut publisher =
            Publisher::new(explicit(&admin), admin, PublisherConfig::default()).expect("fits");
        publisher.enqueue_eos().expect("eos");
        let mut output = terminal();
        run_pub(
            &connection(target, false),
            PubOptions::default(),
            publisher,
            None,
            &mut output,
        )
        .expect("the cohort ended as asked");
        let read = peer.join().expect("peer").remove(0);
        let kinds: Vec<i32> = read.iter().map(|frame| frame.kind).collect();
        assert_eq!(kinds, [Kind::Auth as i32, Kind::Eos as i32]);
    }

    #[test]
    fn r41_pub_resigns_queued_frames_under_the_new_stream_after_a_reset() {
        let admin = key(1);
        let (target, peer) = peer(vec![
            Script {
                ack: ok([1; 32]),
                frames: Vec::new(),
                read: Some(2),
            },
            Script {
                ack: ok([2; 32]),
                frames: Vec::new(),
                read: None,
            },
        ]);
        let mut publisher =
            Publisher::new(explicit(&admin), admin, PublisherConfig::default()).expect("fits");
        for payload in [&b"a"[..], b"b", b"c"] {
            publisher.enqueue_data(payload).expect("data");
        }
        let mut output = terminal();
        run_pub(
            &connection(target, true),
            PubOptions { rate: Some(10.0) },
            publisher,
            None,
            &mut output,
        )
        .expect("published");
        let streams = peer.join().expect("peer");
        let first: Vec<(i32, u64)> = streams[0].iter().map(|f| (f.kind, f.index)).collect();
        assert_eq!(first, [(Kind::Auth as i32, 0), (Kind::Data as i32, 0)]);
        for frame in &streams[1] {
            let kind = bps_proto::kind_from_i32(frame.kind).expect("known");
            let id = *SocRef::parse(&frame.soc).expect("soc").id;
            assert_eq!(frame.challenge.as_ref(), &[2; 32]);
            assert_eq!(id, session_chunk_id(kind, TOPIC, [2; 32], frame.index));
        }
        let second: Vec<(i32, u64)> = streams[1].iter().map(|f| (f.kind, f.index)).collect();
        assert_eq!(second[0], (Kind::Auth as i32, 0));
        assert_eq!(second.last(), Some(&(Kind::Data as i32, 2)));
        assert!(
            String::from_utf8_lossy(&output.err).contains("stream reset"),
            "the reset is reported"
        );
    }

    #[test]
    fn pub_takes_input_lines_only_up_to_the_bound() {
        let admin = key(1);
        let mut publisher =
            Publisher::new(explicit(&admin), admin, PublisherConfig::default()).expect("fits");
        let (sender, receiver) = std::sync::mpsc::channel();
        for line in 0..INPUT_LINES_QUEUED_MAX + 10 {
            sender.send(line.to_be_bytes().to_vec()).expect("send");
        }
        drop(sender);
        let mut lines = Some(receiver);
        let mut output = terminal();
        assert!(take_lines(&mut lines, &mut publisher, &mut output));
        assert_eq!(publisher.queued(), INPUT_LINES_QUEUED_MAX);
        assert!(take_lines(&mut lines, &mut publisher, &mut output));
        assert_eq!(
            publisher.queued(),
            INPUT_LINES_QUEUED_MAX,
            "full: none taken"
        );
        // The claim and eleven publications are written: room for the last ten lines.
        publisher.begin_session([1; 32]);
        for _ in 0..12 {
            publisher.next_frame().expect("signs").expect("a frame");
            publisher.mark_sent();
        }
        assert!(
            !take_lines(&mut lines, &mut publisher, &mut output),
            "input ended"
        );
        assert_eq!(publisher.queued(), INPUT_LINES_QUEUED_MAX - 1);
        assert!(lines.is_none());
    }

    #[test]
    fn r22_r23_the_roster_in_force_sent_again_grants_a_rostered_publisher_on_its_new_stream() {
        let admin = key(1);
        let member = key(2);
        // The broker keeps the latest ROSTER frame and sends it, byte for byte, as the one
        // pre-claim delivery of every stream whose addr it names (R22): the same index twice.
        let grant = sign_broadcast(
            &admin,
            Kind::Roster,
            &TOPIC,
            &[9; 32],
            4,
            &encode_roster(&[member.address()]),
        );
        let (target, peer) = peer(vec![
            Script {
                ack: ok([1; 32]),
                frames: vec![grant.frame.clone()],
                read: Some(2),
            },
            Script {
                ack: ok([2; 32]),
                frames: vec![grant.frame],
                read: None,
            },
        ]);
        let mut publisher =
            Publisher::new(explicit(&admin), member, PublisherConfig::default()).expect("fits");
        for payload in [&b"a"[..], b"b", b"c"] {
            publisher.enqueue_data(payload).expect("data");
        }
        let quick = Connection {
            timeout: Some(Duration::from_secs(10)),
            ..connection(target, true)
        };
        let mut output = terminal();
        run_pub(
            &quick,
            PubOptions { rate: Some(10.0) },
            publisher,
            None,
            &mut output,
        )
        .expect("published on the second stream");
        let streams = peer.join().expect("peer");
        let first: Vec<(i32, u64)> = streams[0].iter().map(|f| (f.kind, f.index)).collect();
        assert_eq!(first, [(Kind::Auth as i32, 0), (Kind::Data as i32, 0)]);
        let second: Vec<(i32, u64)> = streams[1].iter().map(|f| (f.kind, f.index)).collect();
        assert_eq!(second[0], (Kind::Auth as i32, 0), "claims after the repeat");
        assert_eq!(second.last(), Some(&(Kind::Data as i32, 2)));
        for frame in &streams[1] {
            assert_eq!(frame.challenge.as_ref(), &[2; 32]);
        }
    }

    #[test]
    fn sub_verifies_prints_and_stops_at_eos() {
        let admin = key(1);
        let roster = sign_broadcast(
            &admin,
            Kind::Roster,
            &TOPIC,
            &[3; 32],
            0,
            &encode_roster(&[[9; 20]]),
        );
        let data = sign_broadcast(&admin, Kind::Data, &TOPIC, &[3; 32], 5, b"hello");
        let forged = sign_broadcast(&key(2), Kind::Data, &TOPIC, &[3; 32], 6, b"spam");
        let eos = sign_broadcast(&admin, Kind::Eos, &TOPIC, &[3; 32], 0, b"");
        let (target, peer) = peer(vec![Script {
            ack: ok([8; 32]),
            frames: vec![roster.frame, data.frame, forged.frame, eos.frame],
            read: None,
        }]);
        let options = SubOptions {
            spec: explicit(&admin),
            addr: [4; 20],
            json: true,
            count: None,
        };
        let mut output = terminal();
        run_sub(&connection(target, false), &options, &mut output).expect("eos");
        peer.join().expect("peer");
        let printed = lines(&output.out);
        let kinds: Vec<&str> = printed
            .iter()
            .map(|line| line["kind"].as_str().expect("kind"))
            .collect();
        assert_eq!(kinds, ["joined", "roster", "data", "dropped", "eos"]);
        assert_eq!(printed[1]["publishers"][0], hex::encode([9u8; 20]));
        assert_eq!(printed[2]["owner"], hex::encode(admin.address()));
        assert_eq!(printed[2]["index"], 5);
        assert_eq!(printed[2]["payload_hex"], hex::encode(b"hello"));
        assert_eq!(printed[2]["payload_utf8"], "hello");
        assert!(
            printed[3]["reason"]
                .as_str()
                .expect("reason")
                .contains("neither the admin nor rostered")
        );
    }

    #[test]
    fn sub_json_reports_gaps_and_next_addresses() {
        let admin = key(1);
        let challenge = [3; 32];
        let signed =
            |index: u64| sign_broadcast(&admin, Kind::Data, &TOPIC, &challenge, index, b"m");
        let eos = sign_broadcast(&admin, Kind::Eos, &TOPIC, &challenge, 0, b"");
        let (target, peer) = peer(vec![Script {
            ack: ok([8; 32]),
            frames: vec![signed(0).frame, signed(1).frame, signed(5).frame, eos.frame],
            read: None,
        }]);
        let options = SubOptions {
            spec: explicit(&admin),
            addr: [4; 20],
            json: true,
            count: None,
        };
        let mut output = terminal();
        run_sub(&connection(target, false), &options, &mut output).expect("eos");
        peer.join().expect("peer");
        let printed = lines(&output.out);
        let kinds: Vec<&str> = printed
            .iter()
            .map(|line| line["kind"].as_str().expect("kind"))
            .collect();
        assert_eq!(kinds, ["joined", "data", "data", "gap", "data", "eos"]);
        let owner = hex::encode(admin.address());
        assert_eq!(printed[3]["owner"], owner);
        assert_eq!(
            (&printed[3]["expected"], &printed[3]["got"]),
            (&2.into(), &5.into())
        );
        // Where the admin's next DATA on that stream will be, from the chunk it would sign.
        for (line, index) in [(&printed[1], 1u64), (&printed[2], 2), (&printed[4], 6)] {
            let upcoming = signed(index).chunk;
            let address = bps_proto::keccak256(&[&upcoming[..32], &admin.address()[..]].concat());
            assert_eq!(line["next_index"], index);
            assert_eq!(line["next_address"], hex::encode(address));
        }
        assert!(
            printed[5].get("next_address").is_none(),
            "nothing after EOS"
        );
    }

    #[test]
    fn received_json_reports_an_evicted_cursor_after_the_data() {
        let admin = key(1);
        let cohort = Spec {
            binding: Binding::Mnemonic,
            all: true,
            ..explicit(&admin)
        };
        let limits = SubscriberLimits {
            cursors_max: 1,
            ..SubscriberLimits::default()
        };
        let mut subscriber = Subscriber::with_limits(cohort, limits);
        let first = sign_broadcast(&key(2), Kind::Data, &TOPIC, &[1; 32], 4, b"a");
        let second = sign_broadcast(&key(3), Kind::Data, &TOPIC, &[1; 32], 0, b"b");
        assert_eq!(
            received_json(&subscriber.receive_broadcast(&first.broadcast)).len(),
            1
        );
        let printed: Vec<serde_json::Value> =
            received_json(&subscriber.receive_broadcast(&second.broadcast))
                .iter()
                .map(|line| serde_json::from_str(line).expect("json"))
                .collect();
        assert_eq!(printed.len(), 2);
        assert_eq!(printed[0]["kind"], "data");
        assert_eq!(printed[0]["owner"], hex::encode(key(3).address()));
        assert_eq!(printed[1]["kind"], "evicted");
        assert_eq!(printed[1]["owner"], hex::encode(key(2).address()));
        assert_eq!(printed[1]["cursor"], 5);
        // Plain output tells the same on stderr and keeps stdout for payloads.
        let third = sign_broadcast(&key(2), Kind::Data, &TOPIC, &[1; 32], 0, b"c");
        let mut output = terminal();
        print_received(
            &subscriber.receive_broadcast(&third.broadcast),
            false,
            &mut output,
        )
        .expect("printed");
        assert_eq!(String::from_utf8_lossy(&output.out), "c\n");
        assert!(String::from_utf8_lossy(&output.err).contains("cursor table full"));
    }

    #[test]
    fn sub_plain_prints_payload_lines_and_stops_at_count() {
        let admin = key(1);
        let frames = (0..3)
            .map(|index| {
                sign_broadcast(
                    &admin,
                    Kind::Data,
                    &TOPIC,
                    &[3; 32],
                    index,
                    format!("m{index}").as_bytes(),
                )
                .frame
            })
            .collect();
        let (target, peer) = peer(vec![Script {
            ack: ok([8; 32]),
            frames,
            read: None,
        }]);
        let options = SubOptions {
            spec: explicit(&admin),
            addr: [4; 20],
            json: false,
            count: Some(2),
        };
        let mut output = terminal();
        run_sub(&connection(target, false), &options, &mut output).expect("count");
        peer.join().expect("peer");
        assert_eq!(String::from_utf8_lossy(&output.out), "m0\nm1\n");
    }

    #[test]
    fn refused_join_ends_the_run() {
        let admin = key(1);
        for status in [Status::Full, Status::Rejected] {
            let (target, peer) = peer(vec![Script {
                ack: Ack {
                    status: status as i32,
                    challenge: Bytes::new(),
                },
                frames: Vec::new(),
                read: None,
            }]);
            let options = SubOptions {
                spec: explicit(&admin),
                addr: [4; 20],
                json: false,
                count: None,
            };
            let error =
                run_sub(&connection(target, true), &options, &mut terminal()).expect_err("refused");
            assert!(matches!(&error, ClientError::Refused(got) if *got == Refusal::new(status)));
            assert_eq!(
                error.to_string(),
                format!("join refused: {}", Refusal::new(status))
            );
            peer.join().expect("peer");
        }
    }

    #[test]
    fn sub_without_reconnect_fails_on_a_reset_and_times_out_with_count() {
        let admin = key(1);
        let (target, peer) = peer(vec![Script {
            ack: ok([8; 32]),
            frames: Vec::new(),
            read: Some(0),
        }]);
        let options = SubOptions {
            spec: explicit(&admin),
            addr: [4; 20],
            json: false,
            count: Some(1),
        };
        let error =
            run_sub(&connection(target, false), &options, &mut terminal()).expect_err("reset");
        assert_eq!(error.to_string(), "the broker closed the stream");
        peer.join().expect("peer");

        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let target = listener.local_addr().expect("addr").to_string();
        let holder = thread::spawn(move || {
            let (mut stream, _) = listener.accept().expect("accept");
            let mut buf = BytesMut::new();
            read_frame(&mut stream, &mut buf).expect("join");
            stream.write_all(&encode_frame(&ok([8; 32]))).expect("ack");
            read_frame(&mut stream, &mut buf)
        });
        let quick = Connection {
            timeout: Some(Duration::from_millis(300)),
            ..connection(target, false)
        };
        let error = run_sub(&quick, &options, &mut terminal()).expect_err("timeout");
        assert_eq!(error.to_string(), "timed out with 0 of 1 messages");
        assert!(holder.join().expect("holder").is_none());
    }
    /// `count` loopback listeners and the `--target` list of their addresses: the list in
    /// the order given, the listeners in `spec`'s rank order (root first).
    fn ranked_listeners(count: usize, spec: &Spec) -> (Vec<String>, Vec<TcpListener>) {
        let listeners: Vec<TcpListener> = (0..count)
            .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind"))
            .collect();
        let targets: Vec<String> = listeners
            .iter()
            .map(|listener| listener.local_addr().expect("addr").to_string())
            .collect();
        let order = bps_proto::rank(&targets, &spec.key()).expect("a valid list");
        let mut slots: Vec<Option<TcpListener>> = listeners.into_iter().map(Some).collect();
        let ranked = order
            .iter()
            .map(|&position| slots[position].take().expect("each once"))
            .collect();
        (targets, ranked)
    }

    fn address(listener: &TcpListener) -> String {
        listener.local_addr().expect("addr").to_string()
    }

    /// The brokers the run joined, in order, from its notes.
    fn joined(err: &[u8]) -> Vec<String> {
        String::from_utf8_lossy(err)
            .lines()
            .filter_map(|line| line.strip_prefix("joined "))
            .map(|rest| rest.split(' ').next().unwrap_or_default().to_owned())
            .collect()
    }

    fn ended_by_eos(admin: &SigningKey) -> Script {
        let eos = sign_broadcast(admin, Kind::Eos, &TOPIC, &[3; 32], 0, b"");
        Script {
            ack: ok([8; 32]),
            frames: vec![eos.frame],
            read: None,
        }
    }

    fn reset_after_ack() -> Script {
        Script {
            ack: ok([8; 32]),
            frames: Vec::new(),
            read: Some(0),
        }
    }

    #[test]
    fn a_target_list_starts_at_the_root_and_a_failed_connect_moves_to_the_next_in_rank() {
        let admin = key(1);
        let spec = explicit(&admin);
        let (targets, mut ranked) = ranked_listeners(3, &spec);
        let last = ranked.pop().expect("third");
        let second = ranked.pop().expect("second");
        let root = ranked.pop().expect("root");
        let (root_address, second_address) = (address(&root), address(&second));
        // The root is down: its port refuses connections.
        drop(root);
        let peer = peer_on(second, vec![ended_by_eos(&admin)]);
        let options = SubOptions {
            spec,
            addr: [4; 20],
            json: false,
            count: None,
        };
        let list = Connection {
            targets,
            ..connection(String::new(), true)
        };
        let mut output = terminal();
        run_sub(&list, &options, &mut output).expect("eos at the second");
        peer.join().expect("peer");
        let notes = String::from_utf8_lossy(&output.err).into_owned();
        assert!(
            notes.contains(&format!("cannot connect to {root_address}")),
            "{notes}"
        );
        assert!(
            notes.contains(&format!("next: {second_address}")),
            "{notes}"
        );
        assert_eq!(joined(&output.err), [second_address]);
        last.set_nonblocking(true).expect("nonblocking");
        assert!(
            last.accept()
                .is_err_and(|e| e.kind() == io::ErrorKind::WouldBlock),
            "the third in rank was never tried"
        );
    }

    #[test]
    fn a_lost_stream_moves_to_the_next_in_rank_and_wraps_around_to_the_root() {
        let admin = key(1);
        let spec = explicit(&admin);
        let (targets, mut ranked) = ranked_listeners(2, &spec);
        let second = ranked.pop().expect("second");
        let root = ranked.pop().expect("root");
        let expected = [address(&root), address(&second), address(&root)];
        let root = peer_on(root, vec![reset_after_ack(), ended_by_eos(&admin)]);
        let second = peer_on(second, vec![reset_after_ack()]);
        let options = SubOptions {
            spec,
            addr: [4; 20],
            json: false,
            count: None,
        };
        let list = Connection {
            targets,
            ..connection(String::new(), true)
        };
        let mut output = terminal();
        run_sub(&list, &options, &mut output).expect("eos back at the root");
        root.join().expect("root");
        second.join().expect("second");
        assert_eq!(joined(&output.err), expected);
    }

    #[test]
    fn a_list_that_cannot_be_ranked_fails_the_run() {
        let list = Connection {
            targets: vec!["a:1".to_owned(), "a:1".to_owned()],
            ..connection(String::new(), true)
        };
        let options = SubOptions {
            spec: explicit(&key(1)),
            addr: [4; 20],
            json: false,
            count: None,
        };
        let error = run_sub(&list, &options, &mut terminal()).expect_err("a duplicate");
        assert_eq!(
            error.to_string(),
            "--target: broker a:1 is in the list twice"
        );
    }
}
