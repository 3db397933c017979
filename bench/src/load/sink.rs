//! `bps-bench sink`: a bare relay that speaks just enough BPS to stand in for a broker
//! without verifying anything, to measure the generator's own ceiling (and the practical
//! ceiling of a relay on this machine).
//!
//! Owns: [`Sink`], one thread, one epoll loop. A connection's first frame is a `Join`;
//! it is answered `Ack{OK, 32 random bytes}` and the stream attaches to the cohort of the
//! Join's canonical spec bytes. Every later frame is a `Broadcast`: AUTH is dropped (never
//! delivered, R7); anything else is framed once and queued, as one shared `Bytes`, to every
//! other stream of the cohort (never echo, R25), then flushed with vectored writes. While
//! any queue of a cohort holds more than [`QUEUE_FRAMES_HIGH`] frames, the streams that
//! publish into it are not read (TCP pushes back on the publisher, as a broker's bounded
//! queues do), and reading resumes below [`QUEUE_FRAMES_LOW`]; a stream whose queue still
//! exceeds [`QUEUE_FRAMES_MAX`] is closed (R26).
//!
//! Never: verifies a chunk, checks a challenge, index or role, or keeps any other state:
//! whatever a real broker adds on top of this is the cost of doing its job.

use std::collections::{HashMap, VecDeque};
use std::io::{self, IoSlice, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::Duration;

use bps_proto::{
    Ack, FRAME_BYTES_MAX_DEFAULT, Kind, Status, decode_broadcast, decode_join, encode_frame,
    next_frame,
};
use bytes::{Bytes, BytesMut};
use prost::Message;
use rand::RngCore;

use crate::load::poller::{Interest, Poller, Ready};

/// Frames queued per stream before it is closed (R26 recommends 64; the sink is more
/// patient so it never becomes the bottleneck it is meant to rule out).
pub const QUEUE_FRAMES_MAX: usize = 4096;

/// A cohort queue this long pauses reading its publishers...
pub const QUEUE_FRAMES_HIGH: usize = 256;

/// ...until every queue of the cohort is this short again.
pub const QUEUE_FRAMES_LOW: usize = 64;

const _: () = assert!(QUEUE_FRAMES_LOW < QUEUE_FRAMES_HIGH && QUEUE_FRAMES_HIGH < QUEUE_FRAMES_MAX);

/// Frames per vectored write.
const FRAMES_PER_WRITE: usize = 64;

/// Bytes read per call.
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// The listener's token; streams use their slot number + 1.
const LISTENER: u64 = 0;

#[derive(Debug)]
struct Stream {
    socket: TcpStream,
    inbound: BytesMut,
    outbound: VecDeque<Bytes>,
    /// Bytes of the front frame already written.
    written: usize,
    cohort: Option<Vec<u8>>,
    watching_writes: bool,
    /// Not read while its cohort's queues are long.
    paused: bool,
}

/// The relay (module docs).
#[derive(Debug)]
pub struct Sink {
    listener: TcpListener,
    poller: Poller,
    streams: Vec<Option<Stream>>,
    cohorts: HashMap<Vec<u8>, Vec<usize>>,
    scratch: Vec<u8>,
    dirty: Vec<usize>,
    paused: Vec<usize>,
    /// Frames relayed (deliveries queued).
    pub relayed: u64,
}

impl Sink {
    /// Listens on `address`.
    pub fn bind(address: SocketAddr) -> io::Result<Self> {
        let listener = TcpListener::bind(address)?;
        listener.set_nonblocking(true)?;
        let poller = Poller::new()?;
        poller.add(listener.as_raw_fd(), LISTENER, Interest::Read)?;
        Ok(Self {
            listener,
            poller,
            streams: Vec::new(),
            cohorts: HashMap::new(),
            scratch: vec![0u8; READ_CHUNK_BYTES],
            dirty: Vec::new(),
            paused: Vec::new(),
            relayed: 0,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `stop` returns true (checked every 100 ms).
    pub fn serve(&mut self, stop: &dyn Fn() -> bool) -> io::Result<()> {
        let mut ready: Vec<Ready> = Vec::with_capacity(512);
        while !stop() {
            self.poller.wait(&mut ready, Duration::from_millis(100))?;
            for event in &ready {
                if event.token == LISTENER {
                    self.accept()?;
                    continue;
                }
                let slot = (event.token - 1) as usize;
                if event.readable {
                    self.on_readable(slot);
                }
                if event.writable {
                    self.dirty.push(slot);
                }
            }
            let dirty = std::mem::take(&mut self.dirty);
            for slot in dirty {
                self.flush(slot);
            }
            self.resume_drained();
        }
        Ok(())
    }

    /// The longest queue among the other streams of `slot`'s cohort.
    fn cohort_backlog(&self, slot: usize) -> usize {
        let Some(cohort) = self
            .streams
            .get(slot)
            .and_then(Option::as_ref)
            .and_then(|stream| stream.cohort.as_ref())
        else {
            return 0;
        };
        self.cohorts.get(cohort).map_or(0, |members| {
            members
                .iter()
                .filter(|member| **member != slot)
                .filter_map(|member| self.streams.get(*member).and_then(Option::as_ref))
                .map(|stream| stream.outbound.len())
                .max()
                .unwrap_or(0)
        })
    }

    /// Resumes reading the paused streams whose cohorts drained.
    fn resume_drained(&mut self) {
        let paused = std::mem::take(&mut self.paused);
        for slot in paused {
            if self.cohort_backlog(slot) > QUEUE_FRAMES_LOW {
                self.paused.push(slot);
            } else {
                self.set_paused(slot, false);
            }
        }
    }

    fn set_paused(&mut self, slot: usize, paused: bool) {
        let Some(stream) = self.streams.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        stream.paused = paused;
        let interest = Interest::of(!paused, stream.watching_writes);
        if self
            .poller
            .modify(stream.socket.as_raw_fd(), slot as u64 + 1, interest)
            .is_err()
        {
            self.close(slot);
        } else if paused {
            self.paused.push(slot);
        }
    }

    fn accept(&mut self) -> io::Result<()> {
        loop {
            match self.listener.accept() {
                Ok((socket, _)) => {
                    socket.set_nonblocking(true)?;
                    socket.set_nodelay(true)?;
                    let slot = match self.streams.iter().position(Option::is_none) {
                        Some(slot) => slot,
                        None => {
                            self.streams.push(None);
                            self.streams.len() - 1
                        }
                    };
                    self.poller
                        .add(socket.as_raw_fd(), slot as u64 + 1, Interest::Read)?;
                    self.streams[slot] = Some(Stream {
                        socket,
                        inbound: BytesMut::with_capacity(READ_CHUNK_BYTES),
                        outbound: VecDeque::new(),
                        written: 0,
                        cohort: None,
                        watching_writes: false,
                        paused: false,
                    });
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                // A connection that died before accept: nothing to serve.
                Err(_) => return Ok(()),
            }
        }
    }

    /// One read per wake: the fan-out it causes is flushed before the publisher is read
    /// again, so a publisher faster than the receivers is held back by TCP instead of
    /// filling the queues.
    fn on_readable(&mut self, slot: usize) {
        if self.cohort_backlog(slot) >= QUEUE_FRAMES_HIGH {
            self.set_paused(slot, true);
            return;
        }
        let Some(stream) = self.streams.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        match stream.socket.read(&mut self.scratch) {
            Ok(0) => self.close(slot),
            Ok(read) => {
                stream.inbound.extend_from_slice(&self.scratch[..read]);
                if !self.on_frames(slot) {
                    self.close(slot);
                }
            }
            Err(error)
                if matches!(
                    error.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) => {}
            Err(_) => self.close(slot),
        }
    }

    /// Handles the complete frames of `slot`; false when the stream must close.
    fn on_frames(&mut self, slot: usize) -> bool {
        loop {
            let Some(stream) = self.streams.get_mut(slot).and_then(Option::as_mut) else {
                return false;
            };
            let body = match next_frame(&mut stream.inbound, FRAME_BYTES_MAX_DEFAULT) {
                Ok(Some(body)) => body,
                Ok(None) => return true,
                Err(_) => return false,
            };
            let Some(cohort) = stream.cohort.clone() else {
                let Ok(join) = decode_join(body) else {
                    return false;
                };
                let key = join
                    .cohort
                    .map(|spec| spec.encode_to_vec())
                    .unwrap_or_default();
                let mut challenge = vec![0u8; 32];
                rand::rng().fill_bytes(&mut challenge);
                let ack = encode_frame(&Ack {
                    status: Status::Ok as i32,
                    challenge: Bytes::from(challenge),
                });
                stream.outbound.push_back(ack);
                stream.cohort = Some(key.clone());
                self.cohorts.entry(key).or_default().push(slot);
                self.dirty.push(slot);
                continue;
            };
            let Ok(broadcast) = decode_broadcast(body.clone()) else {
                return false;
            };
            if broadcast.kind == Kind::Auth as i32 {
                continue;
            }
            let mut framed = BytesMut::with_capacity(body.len() + 3);
            prost::encoding::encode_varint(body.len() as u64, &mut framed);
            framed.extend_from_slice(&body);
            let frame = framed.freeze();
            let members = self.cohorts.get(&cohort).cloned().unwrap_or_default();
            let mut overflowing = Vec::new();
            for member in members.into_iter().filter(|member| *member != slot) {
                if let Some(receiver) = self.streams.get_mut(member).and_then(Option::as_mut) {
                    if receiver.outbound.len() >= QUEUE_FRAMES_MAX {
                        overflowing.push(member);
                        continue;
                    }
                    receiver.outbound.push_back(frame.clone());
                    self.relayed += 1;
                    self.dirty.push(member);
                }
            }
            for member in overflowing {
                self.close(member);
            }
        }
    }

    fn flush(&mut self, slot: usize) {
        let Some(stream) = self.streams.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        while !stream.outbound.is_empty() {
            let slices: Vec<IoSlice<'_>> = stream
                .outbound
                .iter()
                .take(FRAMES_PER_WRITE)
                .enumerate()
                .map(|(at, frame)| {
                    IoSlice::new(if at == 0 {
                        &frame[stream.written..]
                    } else {
                        frame
                    })
                })
                .collect();
            match stream.socket.write_vectored(&slices) {
                Ok(0) => return self.close(slot),
                Ok(mut written) => {
                    while written > 0 {
                        let Some(front) = stream.outbound.front() else {
                            break;
                        };
                        let left = front.len() - stream.written;
                        if written >= left {
                            written -= left;
                            stream.written = 0;
                            stream.outbound.pop_front();
                        } else {
                            stream.written += written;
                            written = 0;
                        }
                    }
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => break,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return self.close(slot),
            }
        }
        let want_writes = !stream.outbound.is_empty();
        if want_writes != stream.watching_writes {
            stream.watching_writes = want_writes;
            let interest = Interest::of(!stream.paused, want_writes);
            if self
                .poller
                .modify(stream.socket.as_raw_fd(), slot as u64 + 1, interest)
                .is_err()
            {
                self.close(slot);
            }
        }
    }

    fn close(&mut self, slot: usize) {
        let Some(stream) = self.streams.get_mut(slot).and_then(Option::take) else {
            return;
        };
        // The socket is closed right after; a failed deregistration changes nothing.
        let _ = self.poller.remove(stream.socket.as_raw_fd());
        if let Some(cohort) = stream.cohort
            && let Some(members) = self.cohorts.get_mut(&cohort)
        {
            members.retain(|member| *member != slot);
            if members.is_empty() {
                self.cohorts.remove(&cohort);
            }
        }
    }
}
