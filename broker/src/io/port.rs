//! One stream's side of the carrier boundary: what its carrier (the TCP connection, a
//! WebSocket session) and its core share about it.
//!
//! Owns: `Port`: the stream's id, peer and transport, how its messages are framed, its home
//! core once the Join went there, its life (open, flushing, resetting) and why it closes,
//! its outbound queue (R26) with the write notices and latency samples keyed by frame
//! sequence, a small slot of control messages (WebSocket pings and pongs) written between
//! frames, its read window (credits), the batch being written, and the wakers of the
//! carrier's reader and writer. A carrier reads
//! frames and hands them to its core, and writes what the port queues; the core queues,
//! credits and closes. Neither side ever touches the other's objects: this is the whole
//! interface.
//! Never does: decide anything about the protocol.
//!
//! Writing has two paths. When the core flushes (at the end of a turn, or of the turns
//! whose writes it coalesced, see `shard`) it writes what it queued on a socket-backed port
//! straight away (`flush_now`, a non-blocking `sendmsg`), so what the kernel refuses is
//! known then and there: R26 is measured against exactly that. Whatever the kernel refused
//! waits in the port's batch for the carrier's writer task, which finishes it
//! asynchronously (and everything queued after it) before the core writes directly again.
//! The writer task is not woken for what the core queues while the core writes itself.
//!
//! The port also owns the stream's history backlog (the retained frames a stream gets when
//! it enters the fan-out set of a history cohort, D11). It is written after what was queued
//! before it (the Ack, the roster) and before anything queued after it, so the seam between
//! it and live traffic loses and duplicates nothing. It is not an R26 matter (R26 is about
//! subscribers that do not keep up with live traffic, not about the size of a backlog): it
//! is held beside the outbound queue, whose bound keeps applying to the live frames queued
//! behind it. A stream holds one unwritten backlog at most: a second one while frames of the
//! first are still waiting means it entered the fan-out set again without reading (only a
//! revocation and a new grant make that possible), and it is reset as a slow consumer, so no
//! cycle of grants can pin frames.
//!
//! What a stream holds is counted in bytes too: everything queued (control messages, the
//! backlog, the outbound queue) and the batch until it is written whole, each message at its
//! wire length. A stream may hold at most `limits.outbound_queue_bytes_max` (backlog
//! included); a message or backlog beyond it is refused and the stream reset as a slow
//! consumer, so a large backlog or large renderings cannot hide behind a frame count. Every
//! change goes to the core's `HeldBytes` too. The port also notes when its bytes last moved
//! (queued into an empty port, or taken by the kernel): a port that holds bytes and has not
//! moved any for `timeouts.write_progress_deadline_ms` is a slow consumer whatever its
//! frame count (the core checks).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::fmt;
use std::os::fd::RawFd;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use super::encoding::{Framing, Renditions};
use super::frame_memory::FrameMemory;
use super::held::HeldBytes;
use super::iovec::IoBatch;
use super::notify::LocalNotify;
use super::outbound::{OutboundQueue, QueueFull, Queued};
use super::outgoing::Outgoing;
pub use crate::labels::Transport;
use crate::limits::PORT_CONTROL_MESSAGES_MAX;
use crate::protocol::CoreId;
use crate::protocol::{CloseReason, PeerId, StreamId, WriteNotice};

/// What a carrier tells its peer as it ends a stream (a WebSocket close frame): a code and
/// its one-line reason. The codes are the carrier's (`ws::close`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Farewell {
    pub code: u16,
    pub reason: String,
}

impl Farewell {
    pub fn new(code: u16, reason: impl Into<String>) -> Farewell {
        Farewell {
            code,
            reason: reason.into(),
        }
    }
}

/// Why a stream closes, for a carrier that tells its peer (a WebSocket close code).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Closing {
    /// The machine closed it.
    Decided(CloseReason),
    /// R26: reset as a slow consumer.
    SlowConsumer,
    /// The broker drains.
    Drain,
    /// No Join within `server.join_deadline_ms`.
    JoinDeadline,
    /// The carrier ended it (a WebSocket fault, an idle session), saying so with this.
    Carrier(Farewell),
}

/// Which control message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlKind {
    Ping,
    Pong,
}

/// Where a stream is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Life {
    Open,
    /// Write what is queued, then close (an Ack refusal, EOS, a drain), within the flush
    /// deadline.
    Flushing,
    /// Close now, dropping what is queued (a TCP reset).
    Resetting,
}

/// One stream, as its carrier and its core see it.
pub struct Port {
    pub id: StreamId,
    peer: Cell<PeerId>,
    pub transport: Transport,
    framing: RefCell<Framing>,
    /// A W11 session: its Join carries an addr the broker drew.
    anonymous: Cell<bool>,
    /// A W-API bridge session (JSON, not frames): an edge cannot splice it.
    bridged: Cell<bool>,
    home: Cell<Option<CoreId>>,
    life: Cell<Life>,
    closing: RefCell<Option<Closing>>,
    /// Whether the home core already knows the stream ended (it decided the close, or the
    /// end was reported), so the end needs no report.
    home_knows: Cell<bool>,
    /// Whether the stream holds a pre-Join slot in the peer ledger.
    prejoin: Cell<bool>,
    out: RefCell<OutboundQueue>,
    control: RefCell<VecDeque<(ControlKind, Outgoing)>>,
    /// D11: the history backlog, with what was queued before it; written before `out`.
    backlog: RefCell<VecDeque<Outgoing>>,
    /// Frames queued since the start; notices and latency samples are keyed by this count.
    queued_total: Cell<u64>,
    written_total: Cell<u64>,
    notices: RefCell<VecDeque<(u64, WriteNotice)>>,
    /// One read-to-write sample in flight at a time keeps the cost per frame at a compare.
    sample: Cell<Option<(u64, Instant)>>,
    write_wake: LocalNotify,
    read_wake: LocalNotify,
    /// Frames the reader may still hand to the home core before it must wait.
    credits: Cell<usize>,
    /// How the carrier stops its I/O in flight when the stream flushes or resets.
    on_close: RefCell<Option<CloseHook>>,
    /// The socket the core may write to directly, while the carrier's I/O runs.
    socket: Cell<Option<RawFd>>,
    /// The batch of frames being written: idle and empty in the port, or taken by the
    /// writer task (with what the kernel refused), which then holds the writing.
    batch: RefCell<Option<IoBatch>>,
    /// Whether the writer task holds the writing (the core must not write directly).
    writer_busy: Cell<bool>,
    /// Whether the core queued frames for it since its last flush.
    touched: Cell<bool>,
    /// Bytes queued (control, backlog, outbound queue), and bytes in the batch until it is
    /// written whole; both are in the core's `held` too.
    queued_bytes: Cell<usize>,
    batch_bytes: Cell<usize>,
    queue_bytes_max: usize,
    held: Rc<HeldBytes>,
    /// When the stream's bytes last moved (queued into an empty port, or taken by the
    /// kernel), as the core's turn time.
    moved_at: Cell<Instant>,
}

impl fmt::Debug for Port {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Port")
            .field("id", &self.id)
            .field("peer", &self.peer.get())
            .field("transport", &self.transport)
            .field("home", &self.home.get())
            .field("life", &self.life.get())
            .field("queued", &self.queued())
            .field("held_bytes", &self.held_bytes())
            .field("credits", &self.credits.get())
            .finish_non_exhaustive()
    }
}

/// What one direct write did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flushed {
    /// Frames (and their bytes) now entirely on the wire.
    pub frames: u64,
    pub bytes: u64,
    /// The socket failed (the peer is gone): the stream must be reset.
    pub failed: bool,
}

/// One non-blocking `sendmsg` of the batch's unwritten iovecs.
fn send_now(fd: RawFd, batch: &IoBatch) -> std::io::Result<usize> {
    let iovecs = batch.pending_iovecs();
    // SAFETY: an all-zero msghdr is valid (no name, no control data).
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = iovecs.as_ptr().cast_mut();
    message.msg_iovlen = iovecs.len() as _;
    // SAFETY: `fd` is the port's open socket (cleared before it closes) and the iovecs point
    // into frames the batch keeps alive for the call.
    let sent = unsafe {
        libc::sendmsg(
            fd,
            &raw const message,
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
    usize::try_from(sent).map_err(|_| std::io::Error::last_os_error())
}

/// Why a history backlog was refused: the stream must be reset as a slow consumer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BacklogRefused {
    /// An earlier backlog of `frames` frames is still unwritten (D11).
    Unread { frames: usize },
    /// It would take the stream past `limits.outbound_queue_bytes_max`.
    OverBytes { bytes_max: usize },
}

impl fmt::Display for BacklogRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BacklogRefused::Unread { frames } => write!(
                f,
                "a history backlog arrived with {frames} frames of the last one unwritten"
            ),
            BacklogRefused::OverBytes { bytes_max } => write!(
                f,
                "a history backlog would take the stream past its {bytes_max} queued bytes"
            ),
        }
    }
}

/// The bounds of one stream's outbound queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueBounds {
    /// R26: `limits.outbound_queue_frames_max`.
    pub frames_max: usize,
    /// `limits.outbound_queue_bytes_max`, backlog included.
    pub bytes_max: usize,
}

/// What a carrier does when its stream starts to flush or resets.
pub type CloseHook = Box<dyn Fn(Life)>;

/// Frames written by one completed write, with what they settle.
#[derive(Debug, Default)]
pub struct WriteReport {
    /// Notices whose frames are now on the wire, in order.
    pub notices: Vec<WriteNotice>,
    /// The read-to-write time of the sampled frame, when this write carried it.
    pub sample_us: Option<u64>,
}

impl Port {
    /// A new open stream with a read window of `credits` frames, an R26 bound of
    /// `bounds.frames_max` and a byte bound of `bounds.bytes_max`, holding its bytes in
    /// `held`.
    pub fn new(
        id: StreamId,
        peer: PeerId,
        transport: Transport,
        bounds: QueueBounds,
        credits: usize,
        held: Rc<HeldBytes>,
    ) -> Self {
        Port {
            id,
            peer: Cell::new(peer),
            transport,
            framing: RefCell::new(Framing::Bare),
            anonymous: Cell::new(false),
            bridged: Cell::new(false),
            home: Cell::new(None),
            life: Cell::new(Life::Open),
            closing: RefCell::new(None),
            home_knows: Cell::new(false),
            prejoin: Cell::new(true),
            out: RefCell::new(OutboundQueue::new(bounds.frames_max)),
            // Allocated when a WebSocket session queues its first ping or pong (never on TCP).
            control: RefCell::new(VecDeque::new()),
            backlog: RefCell::new(VecDeque::new()),
            queued_total: Cell::new(0),
            written_total: Cell::new(0),
            notices: RefCell::new(VecDeque::new()),
            sample: Cell::new(None),
            write_wake: LocalNotify::default(),
            read_wake: LocalNotify::default(),
            credits: Cell::new(credits),
            on_close: RefCell::new(None),
            socket: Cell::new(None),
            batch: RefCell::new(None),
            writer_busy: Cell::new(false),
            touched: Cell::new(false),
            queued_bytes: Cell::new(0),
            batch_bytes: Cell::new(0),
            queue_bytes_max: bounds.bytes_max,
            moved_at: Cell::new(held.turn_at()),
            held,
        }
    }

    // ----- both sides -----

    /// The peer (R32, R33, R39): the remote address, or the one a trusted proxy named.
    pub fn peer(&self) -> PeerId {
        self.peer.get()
    }

    /// The core whose machine owns this stream's cohort, once its Join went there.
    pub fn home(&self) -> Option<CoreId> {
        self.home.get()
    }

    pub fn set_home(&self, core: CoreId) {
        assert!(
            self.home.replace(Some(core)).is_none(),
            "a stream joins once"
        );
    }

    pub fn life(&self) -> Life {
        self.life.get()
    }

    pub fn is_open(&self) -> bool {
        self.life.get() == Life::Open
    }

    /// Whether the home core must still be told that the stream ended.
    pub fn end_unreported(&self) -> bool {
        self.home.get().is_some() && !self.home_knows.get()
    }

    /// The home core knows the stream ended.
    pub fn mark_reported(&self) {
        self.home_knows.set(true);
    }

    /// What this stream gets of a delivery, framed for its carrier.
    pub fn rendition(&self, renditions: &mut Renditions<'_>) -> Option<Outgoing> {
        renditions.of(&self.framing.borrow())
    }

    /// What this stream gets of a frame sent to it alone, framed for its carrier.
    pub fn single(&self, frame: &Bytes, memory: &Arc<FrameMemory>) -> Option<Outgoing> {
        self.framing.borrow().single(frame, memory)
    }

    /// Whether the stream is a W11 anonymous session.
    pub fn is_anonymous(&self) -> bool {
        self.anonymous.get()
    }

    /// Marks the stream a W-API bridge session (before its Join is handed over).
    pub fn set_bridged(&self) {
        self.bridged.set(true);
    }

    /// Whether the stream is a W-API bridge session.
    pub fn is_bridged(&self) -> bool {
        self.bridged.get()
    }

    /// Why the stream closes, once it does and whoever decided it said so.
    pub fn closing(&self) -> Option<Closing> {
        self.closing.borrow().clone()
    }

    /// Records why the stream closes (the first word stands).
    pub fn note_closing(&self, closing: Closing) {
        let mut slot = self.closing.borrow_mut();
        if slot.is_none() {
            *slot = Some(closing);
        }
    }

    /// Takes the stream's pre-Join slot (true once: the caller gives it back to the ledger).
    pub fn leave_prejoin(&self) -> bool {
        self.prejoin.replace(false)
    }

    /// The peer a trusted proxy named, and the pre-Join slot taken for it (the connection
    /// was admitted without one: its peer was not known yet).
    pub fn set_proxied_peer(&self, peer: PeerId) {
        assert!(
            self.home.get().is_none() && !self.prejoin.get(),
            "a proxied peer is named once, before the Join"
        );
        self.peer.set(peer);
        self.prejoin.set(true);
    }

    // ----- the core's side -----

    /// Queues one frame (R26; nothing is queued for a stream that is closing).
    pub fn enqueue(
        &self,
        message: Outgoing,
        notice: Option<WriteNotice>,
        read_at: Option<Instant>,
    ) -> Result<Queued, QueueFull> {
        if !self.is_open() {
            return Ok(Queued::Within);
        }
        let bytes = message.len();
        if self.held_bytes() + bytes > self.queue_bytes_max {
            return Err(QueueFull::OverBytes {
                bytes_max: self.queue_bytes_max,
            });
        }
        let placed = self.out.borrow_mut().push(message)?;
        self.queue_bytes(bytes);
        let sequence = self.queued_total.get() + 1;
        self.queued_total.set(sequence);
        if let Some(notice) = notice {
            self.notices.borrow_mut().push_back((sequence, notice));
        }
        if let Some(at) = read_at
            && self.sample.get().is_none()
        {
            self.sample.set(Some((sequence, at)));
        }
        self.wake_writer_unless_core_writes();
        Ok(placed)
    }

    /// D11: queues a history backlog after everything queued so far (which moves ahead of it)
    /// and before anything queued later, outside the R26 bound; `Err` when an earlier
    /// backlog is still unwritten (the stream must be reset, see the module documentation).
    pub fn enqueue_backlog(&self, frames: Vec<Outgoing>) -> Result<(), BacklogRefused> {
        if !self.is_open() {
            return Ok(());
        }
        let mut backlog = self.backlog.borrow_mut();
        if !backlog.is_empty() {
            return Err(BacklogRefused::Unread {
                frames: backlog.len(),
            });
        }
        let bytes = frames.iter().map(Outgoing::len).sum::<usize>();
        if self.held_bytes() + bytes > self.queue_bytes_max {
            return Err(BacklogRefused::OverBytes {
                bytes_max: self.queue_bytes_max,
            });
        }
        self.out.borrow_mut().drain_into(usize::MAX, |frame| {
            backlog.push_back(frame);
            Ok(())
        });
        self.queued_total
            .set(self.queued_total.get() + frames.len() as u64);
        backlog.extend(frames);
        drop(backlog);
        self.queue_bytes(bytes);
        self.wake_writer_unless_core_writes();
        Ok(())
    }

    /// Bytes this stream holds: queued, and in its batch until written whole.
    pub fn held_bytes(&self) -> usize {
        self.queued_bytes.get() + self.batch_bytes.get()
    }

    /// When this stream's bytes last moved, if it holds any.
    pub fn held_since_moved(&self) -> Option<Instant> {
        (self.held_bytes() > 0).then(|| self.moved_at.get())
    }

    /// `bytes` more are queued.
    fn queue_bytes(&self, bytes: usize) {
        if self.held_bytes() == 0 {
            self.moved_at.set(self.held.turn_at());
        }
        self.queued_bytes.set(self.queued_bytes.get() + bytes);
        self.held.add(bytes);
    }

    /// What was queued (`queued`) and what was in the batch (`batch`) is no longer held.
    fn release_bytes(&self, queued: usize, batch: usize) {
        self.queued_bytes.set(self.queued_bytes.get() - queued);
        self.batch_bytes.set(self.batch_bytes.get() - batch);
        self.held.release(queued + batch);
    }

    /// The batch was written whole (or dropped): its bytes are no longer held.
    fn batch_done(&self) {
        self.release_bytes(0, self.batch_bytes.get());
    }

    /// The kernel took bytes of this stream's batch.
    fn moved(&self) {
        self.moved_at.set(self.held.turn_at());
    }

    /// The home core finished one of this stream's frames.
    pub fn credit(&self) {
        self.credits.set(self.credits.get() + 1);
        self.read_wake.notify();
    }

    /// Stops reading and writes what is queued, then closes (the flush deadline is the
    /// core's).
    pub fn flush_and_close(&self) {
        if self.life.get() != Life::Open {
            return;
        }
        self.life.set(Life::Flushing);
        self.read_wake.notify();
        self.write_wake.notify();
        self.tell_carrier(Life::Flushing);
    }

    /// Drops what is queued and closes with a reset.
    pub fn reset(&self) {
        if self.life.get() == Life::Resetting {
            return;
        }
        self.life.set(Life::Resetting);
        self.out.borrow_mut().clear();
        self.control.borrow_mut().clear();
        self.backlog.borrow_mut().clear();
        self.release_bytes(self.queued_bytes.get(), 0);
        self.read_wake.notify();
        self.write_wake.notify();
        self.tell_carrier(Life::Resetting);
    }

    /// The core writes what it queues on a socket-backed port itself (`flush_now`), unless
    /// the writer task holds the writing; waking the writer task otherwise would let it take
    /// frames the core holds back for a coalesced write.
    fn wake_writer_unless_core_writes(&self) {
        if self.socket.get().is_none() || self.writer_busy.get() {
            self.write_wake.notify();
        }
    }

    /// Frames queued (backlog and outbound queue), for gauges.
    pub fn queued(&self) -> usize {
        self.backlog.borrow().len() + self.out.borrow().len()
    }

    /// Marks the port as queued to; true the first time since its last flush.
    pub fn touch(&self) -> bool {
        !self.touched.replace(true)
    }

    /// Writes what is queued straight to the socket, without blocking, when the writer task
    /// does not hold the writing: one batch of up to `frames_max` frames. What the kernel
    /// refuses is left for the writer task (which this wakes).
    pub fn flush_now(&self, frames_max: usize) -> Flushed {
        self.touched.set(false);
        let mut flushed = Flushed::default();
        let Some(fd) = self.socket.get() else {
            return flushed;
        };
        if self.writer_busy.get() || self.life.get() == Life::Resetting {
            return flushed;
        }
        let Some(mut batch) = self.batch.borrow_mut().take() else {
            return flushed;
        };
        self.fill(&mut batch, frames_max);
        if batch.is_empty() {
            *self.batch.borrow_mut() = Some(batch);
            return flushed;
        }
        let offered = batch.remaining_bytes();
        match send_now(fd, &batch) {
            Ok(sent) => {
                batch.advance(sent);
                self.moved();
            }
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => {
                *self.batch.borrow_mut() = Some(batch);
                flushed.failed = true;
                return flushed;
            }
        }
        if batch.is_done() {
            flushed.frames = batch.frames() as u64;
            flushed.bytes = offered as u64;
            batch.clear();
            self.batch_done();
            self.out.borrow_mut().wrote(false);
            if self.has_more() {
                // More than one batch was queued: the writer task takes the rest.
                self.writer_busy.set(true);
                self.write_wake.notify();
            }
        } else {
            // The kernel refused the rest: the writer task finishes it when the socket
            // takes bytes again.
            self.out.borrow_mut().wrote(true);
            self.writer_busy.set(true);
            self.write_wake.notify();
        }
        *self.batch.borrow_mut() = Some(batch);
        flushed
    }

    // ----- the carrier's side -----

    /// How the carrier stops its I/O in flight when the stream flushes or resets.
    pub fn set_on_close(&self, on_close: CloseHook) {
        *self.on_close.borrow_mut() = Some(on_close);
    }

    /// The carrier's I/O is over: closing the stream needs nothing from it any more, and
    /// nobody may write to its socket.
    pub fn clear_on_close(&self) {
        self.on_close.borrow_mut().take();
        self.socket.set(None);
    }

    /// How the core frames what it queues for this stream, and whether it is a W11
    /// anonymous session (set by the carrier before it hands the Join over).
    pub fn set_framing(&self, framing: Framing, anonymous: bool) {
        *self.framing.borrow_mut() = framing;
        self.anonymous.set(anonymous);
    }

    /// The socket the core may write to directly, and an empty batch for the writes, which
    /// `fill` grows to what is written (set when the carrier starts).
    pub fn attach_socket(&self, fd: RawFd) {
        self.socket.set(Some(fd));
        *self.batch.borrow_mut() = Some(IoBatch::with_capacity(0));
    }

    /// For the writer task: the batch to write next (what the kernel refused earlier, or up
    /// to `frames_max` queued frames), now held by the writer; `None` when there is nothing
    /// to write.
    pub fn take_writing(&self, frames_max: usize) -> Option<IoBatch> {
        let mut batch = self
            .batch
            .borrow_mut()
            .take()
            .unwrap_or_else(|| IoBatch::with_capacity(0));
        if batch.is_done() {
            batch.clear();
            self.batch_done();
            self.fill(&mut batch, frames_max);
        }
        if batch.is_empty() {
            *self.batch.borrow_mut() = Some(batch);
            self.writer_busy.set(false);
            return None;
        }
        self.writer_busy.set(true);
        Some(batch)
    }

    /// For the writer task: the batch back once written; the core writes directly again
    /// when nothing more is queued.
    pub fn return_writing(&self, mut batch: IoBatch) {
        batch.clear();
        self.batch_done();
        *self.batch.borrow_mut() = Some(batch);
        if !self.has_more() {
            self.writer_busy.set(false);
        }
    }

    /// Queues a control message, written before the next frame; a newer one of the same
    /// kind replaces an unwritten one. Nothing is queued on a closing stream.
    pub fn push_control(&self, kind: ControlKind, message: Outgoing) {
        if !self.is_open() {
            return;
        }
        let mut control = self.control.borrow_mut();
        let mut replaced = 0;
        control.retain(|(queued, unwritten)| {
            let same = *queued == kind;
            if same {
                replaced += unwritten.len();
            }
            !same
        });
        let bytes = message.len();
        control.push_back((kind, message));
        drop(control);
        self.release_bytes(replaced, 0);
        self.queue_bytes(bytes);
        self.write_wake.notify();
    }

    /// Moves control messages, then up to `frames_max` queued frames (the backlog first), into
    /// an empty batch (control messages go between whole messages only: the batch is empty),
    /// grown first to hold them.
    fn fill(&self, batch: &mut IoBatch, frames_max: usize) {
        let waiting = self.control.borrow().len() + self.queued().min(frames_max);
        batch.reserve(waiting, frames_max + PORT_CONTROL_MESSAGES_MAX);
        let mut moved = 0;
        for (_, message) in self.control.borrow_mut().drain(..) {
            moved += message.len();
            batch.push_control(message);
        }
        let mut take = |message: Outgoing| {
            let bytes = message.len();
            batch.try_push(message)?;
            moved += bytes;
            Ok(())
        };
        let mut frames = 0;
        let mut backlog = self.backlog.borrow_mut();
        while frames < frames_max {
            let Some(message) = backlog.pop_front() else {
                break;
            };
            if let Err(refused) = take(message) {
                backlog.push_front(refused);
                break;
            }
            frames += 1;
        }
        if backlog.is_empty() {
            self.out.borrow_mut().drain_into(frames_max - frames, take);
        }
        drop(backlog);
        self.release_bytes(moved, 0);
        self.batch_bytes.set(self.batch_bytes.get() + moved);
        self.held.add(moved);
    }

    /// Whether anything waits to be written after the current batch.
    fn has_more(&self) -> bool {
        self.queued() > 0 || !self.control.borrow().is_empty()
    }

    /// Whether the batch being written (by the writer or left by a direct write) stopped
    /// in the middle of a message.
    pub fn mid_message(&self) -> bool {
        self.batch
            .borrow()
            .as_ref()
            .is_some_and(IoBatch::is_partial)
    }

    /// A write of `frames` frames completed (`partial`: the kernel took less than offered,
    /// and the rest is being written still, see `OutboundQueue::wrote`).
    pub fn wrote(&self, partial: bool) {
        self.out.borrow_mut().wrote(partial);
        self.moved();
    }

    /// `frames` more frames are entirely on the wire: the notices and the sample they settle.
    pub fn written(&self, frames: u64) -> WriteReport {
        let written = self.written_total.get() + frames;
        self.written_total.set(written);
        let mut report = WriteReport::default();
        if let Some((sequence, at)) = self.sample.get()
            && sequence <= written
        {
            report.sample_us = Some(micros_since(at));
            self.sample.set(None);
        }
        let mut notices = self.notices.borrow_mut();
        while notices
            .front()
            .is_some_and(|(sequence, _)| *sequence <= written)
        {
            if let Some((_, notice)) = notices.pop_front() {
                report.notices.push(notice);
            }
        }
        report
    }

    /// Takes one read-window credit; false when none is left.
    pub fn take_credit(&self) -> bool {
        let credits = self.credits.get();
        if credits == 0 {
            return false;
        }
        self.credits.set(credits - 1);
        true
    }

    /// Credits left.
    pub fn credits(&self) -> usize {
        self.credits.get()
    }

    /// Completes at the next credit or close.
    pub async fn read_changed(&self) {
        self.read_wake.notified().await;
    }

    /// Completes at the next queued frame or close.
    pub async fn write_changed(&self) {
        self.write_wake.notified().await;
    }

    fn tell_carrier(&self, life: Life) {
        if let Some(on_close) = self.on_close.borrow().as_ref() {
            on_close(life);
        }
    }
}

impl Drop for Port {
    /// A closed stream holds nothing any more.
    fn drop(&mut self) {
        self.held.release(self.held_bytes());
    }
}

fn micros_since(at: Instant) -> u64 {
    u64::try_from(at.elapsed().as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::net::{IpAddr, Ipv4Addr};
    use std::rc::Rc;

    use bytes::Bytes;

    use super::{BacklogRefused, Life, Port, QueueBounds, Transport};
    use crate::io::held::HeldBytes;
    use crate::io::outbound::{QueueFull, Queued};
    use crate::io::outgoing::Outgoing;
    use crate::protocol::{PeerId, StreamId};

    fn port() -> Port {
        port_in(Rc::default(), 1 << 20)
    }

    /// A port holding its bytes in `held`, with an R26 bound of 2 frames and `bytes_max`.
    fn port_in(held: Rc<HeldBytes>, bytes_max: usize) -> Port {
        let bounds = QueueBounds {
            frames_max: 2,
            bytes_max,
        };
        Port::new(
            StreamId::new(0, 1),
            PeerId::of(IpAddr::V4(Ipv4Addr::LOCALHOST)),
            Transport::Tcp,
            bounds,
            1,
            held,
        )
    }

    #[test]
    fn a_closing_port_takes_nothing_and_tells_its_carrier() {
        let port = port();
        let told = Rc::new(Cell::new(None));
        let seen = Rc::clone(&told);
        port.set_on_close(Box::new(move |life| seen.set(Some(life))));
        port.enqueue(Outgoing::bare(Bytes::from_static(b"a")), None, None)
            .expect("room");
        port.flush_and_close();
        assert_eq!(port.life(), Life::Flushing);
        assert_eq!(told.get(), Some(Life::Flushing));
        assert_eq!(
            port.enqueue(Outgoing::bare(Bytes::from_static(b"b")), None, None),
            Ok(Queued::Within)
        );
        assert_eq!(port.queued(), 1);
        port.reset();
        assert_eq!(told.get(), Some(Life::Resetting));
        assert_eq!(port.queued(), 0);
    }

    #[test]
    fn notices_and_samples_settle_when_their_frame_is_written() {
        let port = port();
        let notice = crate::protocol::WriteNotice(3);
        port.enqueue(
            Outgoing::bare(Bytes::from_static(b"a")),
            None,
            Some(std::time::Instant::now()),
        )
        .expect("room");
        port.enqueue(Outgoing::bare(Bytes::from_static(b"b")), Some(notice), None)
            .expect("room");
        let first = port.written(1);
        assert!(first.sample_us.is_some());
        assert!(first.notices.is_empty());
        let second = port.written(1);
        assert_eq!(second.notices, vec![notice]);
        assert!(second.sample_us.is_none());
    }

    #[test]
    fn the_writer_task_is_woken_only_for_what_the_core_does_not_write_itself() {
        use std::os::fd::AsRawFd;
        use std::task::{Context, Waker};
        let mut cx = Context::from_waker(Waker::noop());
        let frame = |bytes: &'static [u8]| Outgoing::bare(Bytes::from_static(bytes));
        let detached = port();
        detached.enqueue(frame(b"a"), None, None).expect("room");
        assert!(
            detached.write_wake.poll_notified(&mut cx).is_ready(),
            "without a socket the writer task writes"
        );
        let port = port();
        let (ours, _peer) = std::os::unix::net::UnixStream::pair().expect("socket pair");
        port.attach_socket(ours.as_raw_fd());
        port.enqueue(frame(b"a"), None, None).expect("room");
        assert!(
            port.write_wake.poll_notified(&mut cx).is_pending(),
            "the core writes it at its flush, however long that waits"
        );
        let batch = port.take_writing(64).expect("the frame to write");
        port.enqueue(frame(b"b"), None, None).expect("room");
        assert!(
            port.write_wake.poll_notified(&mut cx).is_ready(),
            "a writer task that holds the writing goes on with what follows"
        );
        port.return_writing(batch);
    }

    /// Everything the peer end of `port`'s socket has received so far.
    fn read_all(peer: &mut std::os::unix::net::UnixStream) -> Vec<u8> {
        use std::io::Read;
        peer.set_nonblocking(true).expect("non-blocking");
        let mut got = Vec::new();
        let mut chunk = [0_u8; 256];
        while let Ok(read) = peer.read(&mut chunk) {
            if read == 0 {
                break;
            }
            got.extend_from_slice(&chunk[..read]);
        }
        got
    }

    #[test]
    fn a_backlog_goes_after_what_was_queued_before_what_follows_and_outside_r26() {
        use std::os::fd::AsRawFd;
        let port = port();
        let (ours, mut peer) = std::os::unix::net::UnixStream::pair().expect("socket pair");
        port.attach_socket(ours.as_raw_fd());
        for frame in [b"a", b"b"] {
            port.enqueue(Outgoing::bare(Bytes::from_static(frame)), None, None)
                .expect("room");
        }
        // Four frames against an R26 bound of 2: neither refused nor counted.
        let backlog =
            [b"w", b"x", b"y", b"z"].map(|frame| Outgoing::bare(Bytes::from_static(frame)));
        assert_eq!(port.enqueue_backlog(backlog.to_vec()), Ok(()));
        let notice = crate::protocol::WriteNotice(9);
        assert_eq!(
            port.enqueue(Outgoing::bare(Bytes::from_static(b"c")), Some(notice), None),
            Ok(Queued::Within)
        );
        assert_eq!(port.queued(), 7);
        let flushed = port.flush_now(64);
        assert_eq!((flushed.frames, flushed.failed), (7, false));
        assert_eq!(read_all(&mut peer), b"abwxyzc");
        // The notice is keyed by the order of writing: the seventh frame.
        assert!(port.written(6).notices.is_empty());
        assert_eq!(port.written(1).notices, vec![notice]);
    }

    #[test]
    fn a_second_backlog_while_the_first_is_unwritten_is_refused() {
        let port = port();
        let frame = || vec![Outgoing::bare(Bytes::from_static(b"x"))];
        assert_eq!(port.enqueue_backlog(frame()), Ok(()));
        assert_eq!(
            port.enqueue_backlog(frame()),
            Err(BacklogRefused::Unread { frames: 1 })
        );
        let batch = port.take_writing(8).expect("the backlog to write");
        assert_eq!(batch.frames(), 1);
        port.return_writing(batch);
        assert_eq!(port.enqueue_backlog(frame()), Ok(()));
        port.reset();
        assert_eq!(port.queued(), 0);
    }

    #[test]
    fn the_kernel_refusing_bytes_makes_a_full_queue_a_slow_consumer() {
        let port = port();
        port.enqueue(Outgoing::bare(Bytes::from_static(b"a")), None, None)
            .expect("room");
        port.enqueue(Outgoing::bare(Bytes::from_static(b"b")), None, None)
            .expect("room");
        assert_eq!(
            port.enqueue(Outgoing::bare(Bytes::from_static(b"c")), None, None),
            Ok(Queued::InSlack)
        );
        port.wrote(true);
        assert_eq!(
            port.enqueue(Outgoing::bare(Bytes::from_static(b"d")), None, None),
            Err(QueueFull::SlowConsumer { frames_max: 2 })
        );
        assert!(port.take_credit());
        assert!(!port.take_credit());
        port.credit();
        assert_eq!(port.credits(), 1);
    }

    #[test]
    fn held_bytes_count_queue_backlog_and_batch_until_written_and_go_with_the_port() {
        use std::os::fd::AsRawFd;
        let held = Rc::new(HeldBytes::default());
        let port = port_in(Rc::clone(&held), 1 << 20);
        assert_eq!(port.held_since_moved(), None, "an empty port holds nothing");
        port.enqueue(Outgoing::bare(Bytes::from_static(b"abc")), None, None)
            .expect("room");
        let backlog = vec![Outgoing::bare(Bytes::from_static(b"wxyz"))];
        port.enqueue_backlog(backlog).expect("room");
        assert_eq!((port.held_bytes(), held.total()), (7, 7));
        assert!(port.held_since_moved().is_some());
        // In the writer's batch, still held until written whole.
        let batch = port.take_writing(8).expect("frames to write");
        assert_eq!((port.held_bytes(), held.total()), (7, 7));
        port.return_writing(batch);
        assert_eq!((port.held_bytes(), held.total()), (0, 0));
        // Written directly by the core.
        let (ours, _peer) = std::os::unix::net::UnixStream::pair().expect("socket pair");
        port.attach_socket(ours.as_raw_fd());
        port.enqueue(Outgoing::bare(Bytes::from_static(b"de")), None, None)
            .expect("room");
        assert_eq!(held.total(), 2);
        assert_eq!(port.flush_now(8).frames, 1);
        assert_eq!(held.total(), 0);
        // What a port holds when it goes is released with it.
        port.enqueue(Outgoing::bare(Bytes::from_static(b"fgh")), None, None)
            .expect("room");
        drop(port);
        assert_eq!(held.total(), 0);
    }

    #[test]
    fn a_message_or_backlog_past_the_bytes_bound_is_refused_and_a_reset_releases_all() {
        let held = Rc::new(HeldBytes::default());
        let port = port_in(Rc::clone(&held), 10);
        port.enqueue(Outgoing::bare(Bytes::from_static(b"123456")), None, None)
            .expect("room");
        assert_eq!(
            port.enqueue(Outgoing::bare(Bytes::from_static(b"12345")), None, None),
            Err(QueueFull::OverBytes { bytes_max: 10 })
        );
        let backlog = vec![Outgoing::bare(Bytes::from_static(b"12345"))];
        assert_eq!(
            port.enqueue_backlog(backlog),
            Err(BacklogRefused::OverBytes { bytes_max: 10 })
        );
        assert_eq!(port.queued(), 1, "nothing refused was queued");
        port.enqueue(Outgoing::bare(Bytes::from_static(b"1234")), None, None)
            .expect("exactly at the bound");
        assert_eq!(held.total(), 10);
        port.reset();
        assert_eq!((port.held_bytes(), held.total()), (0, 0));
    }

    #[test]
    fn control_messages_are_held_like_frames_and_a_replaced_one_is_released() {
        use crate::io::outgoing::Prefix;
        let held = Rc::new(HeldBytes::default());
        let port = port_in(Rc::clone(&held), 1 << 20);
        let pong = |payload: &'static [u8]| {
            Outgoing::new(Prefix::of(&[0x8a, 3]), Bytes::from_static(payload))
        };
        port.push_control(super::ControlKind::Pong, pong(b"abc"));
        port.push_control(super::ControlKind::Pong, pong(b"xyz"));
        assert_eq!(held.total(), 5, "the newer pong replaced the older one");
        port.enqueue(Outgoing::bare(Bytes::from_static(b"frame")), None, None)
            .expect("room");
        let batch = port.take_writing(8).expect("the pong and the frame");
        assert_eq!((batch.frames(), held.total()), (1, 10));
        port.return_writing(batch);
        assert_eq!((port.held_bytes(), held.total()), (0, 0));
    }
}
