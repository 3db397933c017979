//! A batch of frames written with one vectored write.
//!
//! Owns the `iovec` array handed to the kernel, the `Bytes` handles that keep the bodies
//! alive while the write is in flight (monoio owns the batch during the call), and the
//! inline prefixes (WebSocket headers) the iovecs point into, in a slice that never moves
//! while the batch holds a message (it is replaced only when the batch is empty, to grow).
//! Handles partial writes by advancing past what the kernel took.
//! Also hands a carrier without a socket (libp2p) the unwritten rest of the next iovec as a
//! `Bytes` sharing the body's allocation (`next_shared`), so such a carrier sends frames
//! without copying them either.
//! Never copies a body: the same `Bytes` a thousand subscribers share goes to the kernel as
//! a pointer.

use bytes::Bytes;

use super::outgoing::{Body, Outgoing, Prefix};

/// The most iovecs one vectored write may carry (Linux's `IOV_MAX`); a message takes its
/// prefix's and one per part (two for a frame behind a header).
pub const IOVECS_MAX: usize = 1024;

/// Messages queued for one stream's next write, with their iovecs.
#[derive(Debug)]
pub struct IoBatch {
    bodies: Vec<Body>,
    /// Fixed at the batch's capacity: iovecs point into it, so it must never reallocate.
    prefixes: Box<[Prefix]>,
    prefixes_used: usize,
    iovecs: Vec<libc::iovec>,
    /// What each iovec points into, in the same order.
    sources: Vec<Source>,
    /// Messages that count as frames (notices, metrics); control frames do not.
    frames: usize,
    /// First iovec not yet fully written.
    start: usize,
}

/// What one iovec points into: an inline prefix, or a part of a body.
#[derive(Clone, Copy, Debug)]
enum Source {
    Prefix(usize),
    Part { body: usize, part: usize },
}

// SAFETY: the iovecs point into `bodies` and `prefixes`, which the batch owns and never
// mutates or moves while a write is in flight (monoio takes the whole batch by value for
// the call; moving the batch moves neither heap allocation).
unsafe impl Send for IoBatch {}

impl IoBatch {
    /// An empty batch with room for `messages` messages.
    pub fn with_capacity(messages: usize) -> Self {
        Self {
            bodies: Vec::with_capacity(messages),
            prefixes: vec![Prefix::NONE; messages].into_boxed_slice(),
            prefixes_used: 0,
            iovecs: Vec::with_capacity(2 * messages),
            sources: Vec::with_capacity(2 * messages),
            frames: 0,
            start: 0,
        }
    }

    /// Makes an empty batch hold at least `messages` messages, growing it to the next power
    /// of two (at most `messages_max`), so a stream's batch is as large as its largest write
    /// so far: an idle stream's stays small, a busy one's is allocated a few times in its
    /// life and then reused. A batch that holds messages is left as it is (its iovecs point
    /// into its prefix slice).
    pub fn reserve(&mut self, messages: usize, messages_max: usize) {
        if self.is_empty() && self.prefixes.len() < messages {
            *self = IoBatch::with_capacity(messages.next_power_of_two().min(messages_max));
        }
    }

    /// Messages of at most two buffers each the batch may still take.
    pub fn room(&self) -> usize {
        (self.prefixes.len() - self.bodies.len()).min((IOVECS_MAX - self.iovecs.len()) / 2)
    }

    /// Whether the batch has a slot and iovecs for `message`.
    pub fn fits(&self, message: &Outgoing) -> bool {
        self.bodies.len() < self.prefixes.len()
            && self.iovecs.len() + message.iovecs() <= IOVECS_MAX
    }

    /// Appends one message that counts as a frame.
    pub fn push(&mut self, message: Outgoing) {
        self.frames += 1;
        self.push_message(message);
    }

    /// Appends one message that counts as a frame if it fits; gives it back otherwise.
    pub fn try_push(&mut self, message: Outgoing) -> Result<(), Outgoing> {
        if !self.fits(&message) {
            return Err(message);
        }
        self.push(message);
        Ok(())
    }

    /// Appends one control message (a WebSocket ping or pong), which counts as no frame.
    pub fn push_control(&mut self, message: Outgoing) {
        self.push_message(message);
    }

    fn push_message(&mut self, message: Outgoing) {
        assert!(self.fits(&message), "a batch holds at most its capacity");
        if !message.prefix.is_empty() {
            let slot = &mut self.prefixes[self.prefixes_used];
            *slot = message.prefix;
            self.prefixes_used += 1;
            self.iovecs.push(libc::iovec {
                iov_base: slot.as_bytes().as_ptr() as *mut libc::c_void,
                iov_len: slot.as_bytes().len(),
            });
            self.sources.push(Source::Prefix(self.prefixes_used - 1));
        }
        let body = self.bodies.len();
        for (index, part) in message.body.parts().iter().enumerate() {
            if part.is_empty() {
                continue;
            }
            self.iovecs.push(libc::iovec {
                iov_base: part.as_ptr() as *mut libc::c_void,
                iov_len: part.len(),
            });
            self.sources.push(Source::Part { body, part: index });
        }
        self.bodies.push(message.body);
    }

    /// Whether the batch holds no message.
    pub fn is_empty(&self) -> bool {
        self.bodies.is_empty()
    }

    /// Messages in the batch that count as frames.
    pub fn frames(&self) -> usize {
        self.frames
    }

    /// The iovecs not yet fully written, for a direct `sendmsg`.
    pub fn pending_iovecs(&self) -> &[libc::iovec] {
        &self.iovecs[self.start..]
    }

    /// Whether every byte has been written.
    pub fn is_done(&self) -> bool {
        self.start == self.iovecs.len()
    }

    /// Whether some bytes of the batch, but not all, have been written: a message may be
    /// cut in the middle.
    pub fn is_partial(&self) -> bool {
        !self.is_done() && self.remaining_bytes() < self.total_bytes()
    }

    /// Bytes of every message in the batch, written or not.
    pub fn total_bytes(&self) -> usize {
        let prefixes: usize = self.prefixes[..self.prefixes_used]
            .iter()
            .map(|prefix| prefix.as_bytes().len())
            .sum();
        prefixes + self.bodies.iter().map(Body::len).sum::<usize>()
    }

    /// Bytes not yet written.
    pub fn remaining_bytes(&self) -> usize {
        self.iovecs[self.start..]
            .iter()
            .map(|iov| iov.iov_len)
            .sum()
    }

    /// Marks `written` bytes as taken by the kernel.
    pub fn advance(&mut self, mut written: usize) {
        while written > 0 && self.start < self.iovecs.len() {
            let iov = &mut self.iovecs[self.start];
            if written >= iov.iov_len {
                written -= iov.iov_len;
                self.start += 1;
            } else {
                // SAFETY: `written < iov_len`, so the new base stays inside the buffer.
                iov.iov_base = unsafe { iov.iov_base.cast::<u8>().add(written) }.cast();
                iov.iov_len -= written;
                written = 0;
            }
        }
        assert!(
            written == 0,
            "the kernel reported more bytes than were offered"
        );
    }

    /// The unwritten rest of the next iovec, for a carrier that hands over `Bytes` rather
    /// than writing to a socket: a slice of the shared body (no copy), or a copy of the few
    /// bytes of an inline prefix. `None` once every byte was written.
    pub fn next_shared(&self) -> Option<Bytes> {
        let iov = self.iovecs.get(self.start)?;
        match self.sources[self.start] {
            Source::Part { body, part } => {
                let whole = &self.bodies[body].parts()[part];
                Some(whole.slice(whole.len() - iov.iov_len..))
            }
            Source::Prefix(index) => {
                let prefix = self.prefixes[index].as_bytes();
                Some(Bytes::copy_from_slice(
                    &prefix[prefix.len() - iov.iov_len..],
                ))
            }
        }
    }

    /// Empties the batch for reuse, keeping its allocations.
    pub fn clear(&mut self) {
        self.bodies.clear();
        self.iovecs.clear();
        self.sources.clear();
        self.prefixes_used = 0;
        self.frames = 0;
        self.start = 0;
    }
}

// SAFETY: the pointer and count describe `iovecs[start..]`, valid iovec structs over
// memory held alive by `bodies` and `prefixes`; none is touched while the kernel holds them.
unsafe impl monoio::buf::IoVecBuf for IoBatch {
    fn read_iovec_ptr(&self) -> *const libc::iovec {
        self.iovecs[self.start..].as_ptr()
    }

    fn read_iovec_len(&self) -> usize {
        self.iovecs.len() - self.start
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    fn unwritten(batch: &IoBatch) -> Vec<u8> {
        batch.iovecs[batch.start..]
            .iter()
            .flat_map(|iov| {
                // SAFETY: test-only view of memory the batch keeps alive.
                unsafe { std::slice::from_raw_parts(iov.iov_base.cast::<u8>(), iov.iov_len) }
                    .to_vec()
            })
            .collect()
    }

    fn bare(body: &'static [u8]) -> Outgoing {
        Outgoing::bare(Bytes::from_static(body))
    }

    #[test]
    fn partial_writes_advance_across_frame_boundaries() {
        let mut batch = IoBatch::with_capacity(3);
        batch.push(bare(b"abc"));
        batch.push(bare(b"defg"));
        batch.push(bare(b"h"));
        assert_eq!(batch.remaining_bytes(), 8);
        assert!(!batch.is_partial());
        batch.advance(2);
        assert!(batch.is_partial());
        assert_eq!(unwritten(&batch), b"cdefgh");
        batch.advance(3);
        assert_eq!(unwritten(&batch), b"fgh");
        assert!(!batch.is_done());
        batch.advance(3);
        assert!(batch.is_done());
        batch.clear();
        assert!(batch.is_done());
        assert!(batch.is_empty());
        assert_eq!(batch.remaining_bytes(), 0);
    }

    #[test]
    fn next_shared_slices_the_shared_body_from_where_the_writes_stopped() {
        let body = Bytes::from_static(b"abcdef");
        let mut batch = IoBatch::with_capacity(2);
        batch.push(Outgoing::new(Prefix::of(&[0x82, 6]), body.clone()));
        batch.push(bare(b"gh"));
        assert_eq!(batch.next_shared().as_deref(), Some(&b"\x82\x06"[..]));
        batch.advance(3);
        let rest = batch.next_shared().expect("the body's rest");
        assert_eq!(&rest[..], b"bcdef");
        assert_eq!(rest.as_ptr(), body[1..].as_ptr(), "a slice, not a copy");
        batch.advance(rest.len());
        assert_eq!(batch.next_shared().as_deref(), Some(&b"gh"[..]));
        batch.advance(2);
        assert!(batch.next_shared().is_none());
    }

    #[test]
    fn prefixes_go_before_their_bodies_and_control_messages_count_as_no_frame() {
        let mut batch = IoBatch::with_capacity(3);
        batch.push(Outgoing::new(
            Prefix::of(&[0x82, 3]),
            Bytes::from_static(b"abc"),
        ));
        batch.push_control(Outgoing::new(Prefix::of(&[0x8a, 0]), Bytes::new()));
        batch.push(bare(b"de"));
        assert_eq!(batch.room(), 0);
        assert_eq!(batch.frames(), 2);
        assert_eq!(unwritten(&batch), b"\x82\x03abc\x8a\x00de");
        // Moving the batch (as monoio does for a write) keeps the prefixes where the iovecs
        // point.
        let moved = std::convert::identity(batch);
        assert_eq!(unwritten(&moved), b"\x82\x03abc\x8a\x00de");
    }

    #[test]
    fn an_empty_batch_grows_to_the_write_in_powers_of_two_and_a_full_one_never_moves() {
        let mut batch = IoBatch::with_capacity(0);
        assert_eq!(batch.room(), 0, "an idle stream's batch holds nothing");
        batch.reserve(3, 66);
        assert_eq!(batch.prefixes.len(), 4);
        batch.reserve(2, 66);
        assert_eq!(batch.prefixes.len(), 4, "never shrinks");
        batch.reserve(65, 66);
        assert_eq!(batch.prefixes.len(), 66, "at most the largest write");
        let mut batch = IoBatch::with_capacity(1);
        batch.push(Outgoing::new(
            Prefix::of(&[0x82, 1]),
            Bytes::from_static(b"a"),
        ));
        batch.reserve(8, 66);
        assert_eq!(
            batch.prefixes.len(),
            1,
            "its iovecs point into its prefixes"
        );
        assert_eq!(unwritten(&batch), b"\x82\x01a");
    }
}
