//! The read side of a libp2p stream as a monoio connection: `PipeReader` takes the `Bytes`
//! chunks the host's read task sends on the stream's inbound channel and copies them into
//! the buffer the shared read loop offers (the stream's `ReadBuffer`: the one copy any
//! carrier makes, from the kernel or here from the host's chunk), keeping the rest of a
//! chunk larger than the offer for the next read. `CloseSignal` is the carrier's way to stop
//! a read in flight when the port closes (monoio's `CancelHandle` only cancels its own
//! driver's operations, so a channel read watches this instead).
//! Never does: parse a byte, or read from the host's thread (the channel is the boundary).

use std::cell::Cell;
use std::future::poll_fn;
use std::io;
use std::task::Poll;

use bytes::{Buf, Bytes};
use monoio::BufResult;
use monoio::buf::{IoBufMut, IoVecBufMut};
use monoio::io::{AsyncReadRent, CancelHandle, CancelableAsyncReadRent};
use tokio::sync::mpsc;

use crate::io::notify::LocalNotify;

/// Set once when the port starts closing; wakes a read in flight.
#[derive(Debug, Default)]
pub struct CloseSignal {
    closed: Cell<bool>,
    wake: LocalNotify,
}

impl CloseSignal {
    pub fn close(&self) {
        self.closed.set(true);
        self.wake.notify();
    }
}

/// A stream's inbound channel as a reader.
#[derive(Debug)]
pub struct PipeReader {
    inbound: mpsc::Receiver<Bytes>,
    /// What is left of the last chunk (or the bytes after the headers, at the start).
    pending: Bytes,
    closed: std::rc::Rc<CloseSignal>,
}

impl PipeReader {
    pub fn new(
        inbound: mpsc::Receiver<Bytes>,
        leftover: Bytes,
        closed: std::rc::Rc<CloseSignal>,
    ) -> PipeReader {
        PipeReader {
            inbound,
            pending: leftover,
            closed,
        }
    }

    /// Makes `pending` non-empty: `Ok(false)` at the stream's end, an error once closed.
    async fn fill(&mut self) -> io::Result<bool> {
        if !self.pending.is_empty() {
            return Ok(true);
        }
        let next = poll_fn(|cx| {
            if self.closed.closed.get() || self.closed.wake.poll_notified(cx).is_ready() {
                return Poll::Ready(Err(io::Error::from(io::ErrorKind::ConnectionAborted)));
            }
            self.inbound.poll_recv(cx).map(Ok)
        })
        .await?;
        match next {
            Some(chunk) => {
                self.pending = chunk;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Copies what is pending into `[ptr, ptr + room)`; returns the bytes copied.
    fn copy_into(&mut self, ptr: *mut u8, room: usize) -> usize {
        let n = room.min(self.pending.len());
        // SAFETY: the caller's buffer has `room` writable bytes at `ptr` (monoio's
        // `IoBufMut`/`IoVecBufMut` contract) and `pending` is a separate allocation.
        unsafe { std::ptr::copy_nonoverlapping(self.pending.as_ptr(), ptr, n) };
        self.pending.advance(n);
        n
    }

    async fn read_one<T: IoBufMut>(&mut self, mut buf: T) -> BufResult<usize, T> {
        match self.fill().await {
            Ok(true) => {}
            Ok(false) => return (Ok(0), buf),
            Err(error) => return (Err(error), buf),
        }
        let n = self.copy_into(buf.write_ptr(), buf.bytes_total());
        // SAFETY: the first `n` bytes were just written.
        unsafe { buf.set_init(n) };
        (Ok(n), buf)
    }

    async fn read_vectored<T: IoVecBufMut>(&mut self, mut buf: T) -> BufResult<usize, T> {
        match self.fill().await {
            Ok(true) => {}
            Ok(false) => return (Ok(0), buf),
            Err(error) => return (Err(error), buf),
        }
        let mut total = 0;
        for index in 0..buf.write_iovec_len() {
            // SAFETY: `index` is below the iovec count the buffer reports.
            let iov = unsafe { *buf.write_iovec_ptr().add(index) };
            total += self.copy_into(iov.iov_base.cast(), iov.iov_len);
            if self.pending.is_empty() {
                break;
            }
        }
        // SAFETY: the first `total` bytes across the iovecs were just written.
        unsafe { buf.set_init(total) };
        (Ok(total), buf)
    }
}

impl AsyncReadRent for PipeReader {
    fn read<T: IoBufMut>(&mut self, buf: T) -> impl Future<Output = BufResult<usize, T>> {
        self.read_one(buf)
    }

    fn readv<T: IoVecBufMut>(&mut self, buf: T) -> impl Future<Output = BufResult<usize, T>> {
        self.read_vectored(buf)
    }
}

impl CancelableAsyncReadRent for PipeReader {
    /// The handle is not watched: the port's close reaches the read through `CloseSignal`.
    fn cancelable_read<T: IoBufMut>(
        &mut self,
        buf: T,
        _handle: CancelHandle,
    ) -> impl Future<Output = BufResult<usize, T>> {
        self.read_one(buf)
    }

    fn cancelable_readv<T: IoVecBufMut>(
        &mut self,
        buf: T,
        _handle: CancelHandle,
    ) -> impl Future<Output = BufResult<usize, T>> {
        self.read_vectored(buf)
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use super::*;

    #[test]
    fn chunks_arrive_in_order_split_to_the_offer_and_a_close_stops_a_read() {
        let mut runtime = monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
            .enable_timer()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let (tx, rx) = mpsc::channel(4);
            let closed = Rc::new(CloseSignal::default());
            let mut reader = PipeReader::new(rx, Bytes::from_static(b"ab"), Rc::clone(&closed));
            tx.send(Bytes::from_static(b"cdef")).await.expect("room");
            let mut got = Vec::new();
            while got.len() < 6 {
                let (read, buf) = reader.read(Vec::with_capacity(3)).await;
                let n = read.expect("read");
                assert!(n <= 3);
                got.extend_from_slice(&buf[..n]);
            }
            assert_eq!(got, b"abcdef");
            closed.close();
            let (read, _) = reader.read(Vec::with_capacity(3)).await;
            assert!(read.is_err(), "a closed port's read ends");
            drop(tx);
        });
    }
}
