//! A batch of frames written with one vectored write.
//!
//! Owns the `iovec` array handed to the kernel and the `Bytes` handles that keep the
//! memory alive while the write is in flight (monoio owns the batch during the call).
//! Handles partial writes by advancing past what the kernel took. Never copies a frame:
//! the same `Bytes` a thousand subscribers share goes to the kernel as a pointer.

use bytes::Bytes;

/// Frames queued for one stream's next write, with their iovecs.
#[derive(Debug, Default)]
pub struct IoBatch {
    frames: Vec<Bytes>,
    iovecs: Vec<libc::iovec>,
    /// First iovec not yet fully written.
    start: usize,
}

// SAFETY: the iovecs point into `frames`, which the batch owns and never mutates while a
// write is in flight (monoio takes the whole batch by value for the call).
unsafe impl Send for IoBatch {}

impl IoBatch {
    /// An empty batch that keeps room for `frames` handles.
    pub fn with_capacity(frames: usize) -> Self {
        Self {
            frames: Vec::with_capacity(frames),
            iovecs: Vec::with_capacity(frames),
            start: 0,
        }
    }

    /// Appends one frame.
    pub fn push(&mut self, frame: Bytes) {
        self.iovecs.push(libc::iovec {
            iov_base: frame.as_ptr() as *mut libc::c_void,
            iov_len: frame.len(),
        });
        self.frames.push(frame);
    }

    /// Whether the batch holds no frame.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Frames in the batch.
    pub fn frames(&self) -> usize {
        self.frames.len()
    }

    /// The iovecs not yet fully written, for a direct `sendmsg`.
    pub fn pending_iovecs(&self) -> &[libc::iovec] {
        &self.iovecs[self.start..]
    }

    /// Whether every byte has been written.
    pub fn is_done(&self) -> bool {
        self.start == self.iovecs.len()
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
                // SAFETY: `written < iov_len`, so the new base stays inside the frame.
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

    /// Empties the batch for reuse, keeping its allocations.
    pub fn clear(&mut self) {
        self.frames.clear();
        self.iovecs.clear();
        self.start = 0;
    }
}

// SAFETY: the pointer and count describe `iovecs[start..]`, valid iovec structs over
// memory held alive by `frames`; neither vector is touched while the kernel holds them.
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

    #[test]
    fn partial_writes_advance_across_frame_boundaries() {
        let mut batch = IoBatch::with_capacity(3);
        batch.push(Bytes::from_static(b"abc"));
        batch.push(Bytes::from_static(b"defg"));
        batch.push(Bytes::from_static(b"h"));
        assert_eq!(batch.remaining_bytes(), 8);
        batch.advance(2);
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
}
