//! One BPS stream over one TCP connection (BPS.md section 2): its reader, its writer and
//! the state the owning core keeps for it.
//!
//! Owns the socket halves, the read buffer, the bounded outbound queue (R26) and the read
//! window (frames handed to the home core and not yet finished). Never decides anything
//! about the protocol: frames go to the home core's state machine as they are, and what
//! comes back is written as it is.
//!
//! Reading: frames are split zero-copy from a buffer that starts small (an idle
//! subscriber holds `READ_BUFFER_IDLE_BYTES`) and doubles while reads fill it, up to
//! `READ_BUFFER_MAX_BYTES`, so publishers read in large gulps and subscribers cost little.
//! Writing: everything queued, up to `write_batch_frames_max`, goes out in one vectored
//! write; a slow subscriber's queue fills and the stream is reset (R26), nobody waits.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::rc::Rc;
use std::time::Instant;

use bps_proto::{Frame, FrameError};
use bytes::{Bytes, BytesMut};
use monoio::buf::IoBufMut;
use monoio::io::{
    CancelHandle, CancelableAsyncReadRent, CancelableAsyncWriteRent, Canceller, OwnedReadHalf,
    OwnedWriteHalf, Splitable,
};
use monoio::net::TcpStream;

use super::iovec::IoBatch;
use super::notify::LocalNotify;
use super::shard::Shard;
use crate::protocol::{CloseReason, ClosedBy, OutboundQueue, PeerId, StreamId, WriteNotice};

/// Read buffer of a stream that is not sending: enough for a Join and a few small frames.
const READ_BUFFER_IDLE_BYTES: usize = 512;
/// Largest read buffer: a publisher's burst of about fifteen 4 KiB frames per read.
const READ_BUFFER_MAX_BYTES: usize = 64 * 1024;

/// Where a connection is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Open,
    /// Flush what is queued, then close (Ack refusals, EOS, drain).
    Flushing,
    /// Close now, dropping what is queued.
    Resetting,
}

/// What the owning core keeps for one connection.
pub struct Conn {
    pub id: StreamId,
    pub peer: PeerId,
    fd: RawFd,
    /// The core whose state machine owns this stream's cohort, once the Join went there.
    home: Cell<Option<usize>>,
    state: Cell<State>,
    /// Whether the home core already knows this stream ended (it decided the close, or an
    /// overflow was reported), so the end needs no report.
    home_knows: Cell<bool>,
    /// Cancel the reader's and the writer's operation in flight. Cancelling instead of a
    /// `shutdown` keeps a reset a reset: the socket closes with linger 0 (RST), no FIN first.
    read_cancel: RefCell<Option<Canceller>>,
    write_cancel: RefCell<Option<Canceller>>,
    read_handle: CancelHandle,
    write_handle: CancelHandle,
    out: RefCell<OutboundQueue>,
    /// Frames queued since start; a notice or a latency sample is keyed by this count.
    queued_total: Cell<u64>,
    written_total: Cell<u64>,
    notices: RefCell<VecDeque<(u64, WriteNotice)>>,
    /// One accept-to-write sample in flight at a time keeps the cost per frame at a compare.
    sample: Cell<Option<(u64, Instant)>>,
    write_wake: LocalNotify,
    read_wake: LocalNotify,
    /// Frames the reader may still hand to the home core before it must wait.
    credits: Cell<usize>,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("id", &self.id)
            .field("peer", &self.peer)
            .field("home", &self.home.get())
            .field("state", &self.state.get())
            .field("queued", &self.out.borrow().len())
            .field("credits", &self.credits.get())
            .finish_non_exhaustive()
    }
}

impl Conn {
    pub fn new(
        id: StreamId,
        peer: PeerId,
        fd: RawFd,
        queue_frames_max: usize,
        credits: usize,
    ) -> Self {
        let read_cancel = Canceller::new();
        let write_cancel = Canceller::new();
        Self {
            id,
            peer,
            fd,
            home: Cell::new(None),
            state: Cell::new(State::Open),
            home_knows: Cell::new(false),
            read_handle: read_cancel.handle(),
            write_handle: write_cancel.handle(),
            read_cancel: RefCell::new(Some(read_cancel)),
            write_cancel: RefCell::new(Some(write_cancel)),
            out: RefCell::new(OutboundQueue::new(queue_frames_max)),
            queued_total: Cell::new(0),
            written_total: Cell::new(0),
            notices: RefCell::new(VecDeque::new()),
            sample: Cell::new(None),
            write_wake: LocalNotify::default(),
            read_wake: LocalNotify::default(),
            credits: Cell::new(credits),
        }
    }

    pub fn home(&self) -> Option<usize> {
        self.home.get()
    }

    pub fn is_open(&self) -> bool {
        self.state.get() == State::Open
    }

    /// Queues one frame. At the bound the stream is reset and `false` comes back (R26).
    pub fn enqueue(
        &self,
        frame: Bytes,
        notice: Option<WriteNotice>,
        read_at: Option<Instant>,
    ) -> bool {
        if !self.is_open() {
            return true;
        }
        if self.out.borrow_mut().push(frame).is_err() {
            self.reset();
            return false;
        }
        let seq = self.queued_total.get() + 1;
        self.queued_total.set(seq);
        if let Some(notice) = notice {
            self.notices.borrow_mut().push_back((seq, notice));
        }
        if let Some(at) = read_at
            && self.sample.get().is_none()
        {
            self.sample.set(Some((seq, at)));
        }
        self.write_wake.notify();
        true
    }

    /// The home core finished one of this stream's frames.
    pub fn credit(&self) {
        self.credits.set(self.credits.get() + 1);
        self.read_wake.notify();
    }

    /// Closes as the home core decided: flush first or reset.
    pub fn close_by_home(&self, reason: CloseReason) {
        self.home_knows.set(true);
        if reason.graceful() {
            self.flush_and_close();
        } else {
            self.reset();
        }
    }

    /// Stops reading, writes what is queued, then closes.
    pub fn flush_and_close(&self) {
        if self.state.get() != State::Open {
            return;
        }
        self.state.set(State::Flushing);
        cancel(&self.read_cancel);
        self.read_wake.notify();
        self.write_wake.notify();
    }

    /// The stream's end was already reported to the home core.
    pub fn mark_reported(&self) {
        self.home_knows.set(true);
    }

    /// Drops what is queued and closes with a TCP reset.
    pub fn reset(&self) {
        if self.state.get() == State::Resetting {
            return;
        }
        self.state.set(State::Resetting);
        self.out.borrow_mut().clear();
        set_linger_zero(self.fd);
        cancel(&self.read_cancel);
        cancel(&self.write_cancel);
        self.read_wake.notify();
        self.write_wake.notify();
    }
}

/// Runs one accepted connection to its end, then tells the shard.
pub async fn run(shard: Rc<Shard>, conn: Rc<Conn>, stream: TcpStream) {
    let (mut reader, writer) = stream.into_split();
    let writer_task = monoio::spawn(write_loop(Rc::clone(&shard), Rc::clone(&conn), writer));
    let cause = read_loop(&shard, &conn, &mut reader).await;
    if conn.is_open() {
        match cause {
            // The peer finished sending: what is queued for it still goes out.
            ClosedBy::Peer => conn.flush_and_close(),
            ClosedBy::Io | ClosedBy::QueueOverflow => conn.reset(),
        }
    }
    let writer = writer_task.await;
    // A write half dropped alone sends a FIN (monoio shuts it down); the whole socket closes
    // as its linger setting says, so a reset reaches the peer as a TCP reset.
    drop(reader.reunite(writer));
    let report = if conn.home_knows.get() {
        None
    } else {
        Some(cause)
    };
    shard.connection_ended(&conn, report);
}

async fn read_loop(shard: &Shard, conn: &Conn, reader: &mut OwnedReadHalf<TcpStream>) -> ClosedBy {
    let frame_bytes_max = shard.settings().frame_bytes_max;
    let mut buffer = BytesMut::with_capacity(READ_BUFFER_IDLE_BYTES);
    let mut capacity = READ_BUFFER_IDLE_BYTES;
    loop {
        loop {
            match split_frame(&mut buffer, frame_bytes_max) {
                Ok(Some(frame)) => {
                    if !hand_over(shard, conn, frame).await {
                        return ClosedBy::Peer;
                    }
                }
                Ok(None) => break,
                Err(error) => {
                    // Costs this stream and nothing else: no blocklist for a framing fault.
                    shard.note_frame_error(conn, &error);
                    return ClosedBy::Io;
                }
            }
        }
        if !conn.is_open() {
            return ClosedBy::Peer;
        }
        shard.wait_unpaused().await;
        if buffer.capacity() - buffer.len() < READ_BUFFER_IDLE_BYTES {
            buffer.reserve(capacity);
        }
        let (filled, total) = (buffer.len(), buffer.capacity());
        let spare_before = total - filled;
        // Append after what is buffered: monoio's `read` into a bare `BytesMut` writes from
        // its start, which would overwrite a partial frame left from the previous read.
        let (result, back) = reader
            .cancelable_read(buffer.slice_mut(filled..total), conn.read_handle.clone())
            .await;
        buffer = back.into_inner();
        match result {
            Ok(0) => {
                // A half-close ends the stream, but what the peer sent before it counts.
                wait_consumed(conn, shard.settings().frames_in_flight_per_stream_max).await;
                return ClosedBy::Peer;
            }
            Ok(read) => {
                shard.metrics().bytes_in.add(read as u64);
                if read == spare_before {
                    capacity = (capacity * 2).min(READ_BUFFER_MAX_BYTES);
                } else if buffer.is_empty() || read < capacity / 4 {
                    capacity = READ_BUFFER_IDLE_BYTES.max(capacity / 2);
                }
            }
            Err(_) => return ClosedBy::Io,
        }
        if buffer.is_empty() && buffer.capacity() > capacity {
            buffer = BytesMut::with_capacity(capacity);
        }
    }
}

/// Waits until the home core has finished every frame handed over (or closed the stream).
async fn wait_consumed(conn: &Conn, window: usize) {
    while conn.is_open() && conn.home.get().is_some() && conn.credits.get() < window {
        conn.read_wake.notified().await;
    }
}

/// Gives one frame to the home core, waiting for read-window credit first. `false` when
/// the stream closed meanwhile.
async fn hand_over(shard: &Shard, conn: &Conn, body: Frame) -> bool {
    shard.metrics().frames_in.inc();
    match conn.home.get() {
        None => {
            let home = shard.home_of_join(&body);
            conn.home.set(Some(home));
            shard.send_join(home, conn, body);
            true
        }
        Some(home) => {
            while conn.credits.get() == 0 {
                if !conn.is_open() {
                    return false;
                }
                shard.metrics().read_paused.inc();
                conn.read_wake.notified().await;
            }
            if !conn.is_open() {
                return false;
            }
            conn.credits.set(conn.credits.get() - 1);
            shard.send_frame(home, conn.id, body);
            true
        }
    }
}

/// Writes until the stream closes; hands the write half back so the socket closes whole.
async fn write_loop(
    shard: Rc<Shard>,
    conn: Rc<Conn>,
    mut writer: OwnedWriteHalf<TcpStream>,
) -> OwnedWriteHalf<TcpStream> {
    let batch_frames_max = shard.settings().write_batch_frames_max;
    let mut batch = IoBatch::with_capacity(batch_frames_max);
    loop {
        if conn.state.get() == State::Resetting {
            return writer;
        }
        conn.out
            .borrow_mut()
            .drain_into(batch_frames_max, |frame| batch.push(frame));
        if batch.frames() == 0 {
            if conn.state.get() == State::Flushing {
                shutdown(conn.fd, libc::SHUT_WR);
                return writer;
            }
            conn.write_wake.notified().await;
            continue;
        }
        let frames = batch.frames() as u64;
        let bytes = batch.remaining_bytes() as u64;
        while !batch.is_done() {
            let (result, back) = writer
                .cancelable_writev(batch, conn.write_handle.clone())
                .await;
            batch = back;
            shard.metrics().writes.inc();
            match result {
                Ok(0) | Err(_) => {
                    conn.reset();
                    return writer;
                }
                Ok(written) => batch.advance(written),
            }
        }
        batch.clear();
        let metrics = shard.metrics();
        metrics.frames_out.add(frames);
        metrics.bytes_out.add(bytes);
        metrics.frames_per_write.record(frames);
        let written = conn.written_total.get() + frames;
        conn.written_total.set(written);
        if let Some((seq, at)) = conn.sample.get()
            && seq <= written
        {
            metrics.accept_to_write_us.record(micros(at));
            conn.sample.set(None);
        }
        loop {
            let front = conn.notices.borrow().front().copied();
            match front {
                Some((seq, notice)) if seq <= written => {
                    conn.notices.borrow_mut().pop_front();
                    shard.report_written(&conn, notice);
                }
                _ => break,
            }
        }
    }
}

/// The next whole frame at the front of `buffer`, or `None` when it is not complete yet.
fn split_frame(buffer: &mut BytesMut, frame_bytes_max: usize) -> Result<Option<Frame>, FrameError> {
    let Some(header) = bps_proto::peek_frame(buffer, frame_bytes_max)? else {
        return Ok(None);
    };
    if buffer.len() < header.total_bytes() {
        return Ok(None);
    }
    let bytes = buffer.split_to(header.total_bytes()).freeze();
    Ok(Some(Frame::from_header(bytes, header)))
}

fn micros(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_micros()).unwrap_or(u64::MAX)
}

fn cancel(slot: &RefCell<Option<Canceller>>) {
    if let Some(canceller) = slot.borrow_mut().take() {
        // The handles share the cancelled state; the fresh canceller returned is not needed.
        drop(canceller.cancel());
    }
}

fn shutdown(fd: RawFd, how: libc::c_int) {
    // SAFETY: `fd` is this connection's socket, open until both halves are dropped, which
    // happens only after the reader and writer ended. ENOTCONN after a peer reset is fine.
    unsafe {
        libc::shutdown(fd, how);
    }
}

fn set_linger_zero(fd: RawFd) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: valid socket fd (see `shutdown`) and a correctly sized option value.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&raw const linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}
