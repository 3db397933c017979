//! The bytes a carrier read from its socket and has not turned into frames yet.
//!
//! Owns: `ReadBuffer`: a buffer that starts small (an idle subscriber holds
//! `READ_BUFFER_IDLE_BYTES`) and doubles while reads fill it, up to `READ_BUFFER_MAX_BYTES`,
//! so publishers read in large gulps and subscribers cost little; growth beyond the idle
//! size is charged to frame memory (and not taken when memory is full), and every read into
//! a grown buffer is reserved there first (see `FrameMemory`). Frames are copied out of it
//! into charged allocations of their own, so the buffer is reused and never pinned.
//! Never does: I/O (the carrier reads into `spare()` and reports `filled`), or judge bytes.

use std::sync::Arc;

use bps_proto::{Frame, FrameError};
use bytes::{Buf, BytesMut};

use super::frame_memory::FrameMemory;
use crate::limits::READ_BUFFER_IDLE_BYTES;

/// Largest read buffer: a publisher's burst of about fifteen 4 KiB frames per read.
pub const READ_BUFFER_MAX_BYTES: usize = 64 * 1024;

/// One carrier's unparsed input; see the module documentation.
#[derive(Debug)]
pub struct ReadBuffer {
    buffer: BytesMut,
    /// The capacity aimed for, by the growth policy.
    capacity: usize,
    /// Bytes of `capacity` beyond the idle size, charged to frame memory.
    grown: usize,
    /// Bytes reserved for the read in flight.
    reserved: usize,
    memory: Arc<FrameMemory>,
}

impl ReadBuffer {
    pub fn new(memory: Arc<FrameMemory>) -> ReadBuffer {
        ReadBuffer {
            buffer: BytesMut::with_capacity(READ_BUFFER_IDLE_BYTES),
            capacity: READ_BUFFER_IDLE_BYTES,
            grown: 0,
            reserved: 0,
            memory,
        }
    }

    /// Makes room for the next read and returns how many bytes it may read: the whole spare
    /// capacity of a grown buffer when frame memory has room to reserve it, else an
    /// idle-sized read (which the memory budget counts per connection).
    pub fn prepare(&mut self) -> usize {
        assert_eq!(self.reserved, 0, "a read is prepared once");
        if self.buffer.capacity() - self.buffer.len() < READ_BUFFER_IDLE_BYTES
            || self.buffer.capacity() < self.capacity
        {
            self.buffer
                .reserve(self.capacity.max(READ_BUFFER_IDLE_BYTES));
        }
        let spare = self.buffer.capacity() - self.buffer.len();
        if self.grown == 0 || spare <= READ_BUFFER_IDLE_BYTES {
            return spare;
        }
        if self.memory.try_reserve(spare) {
            self.reserved = spare;
            return spare;
        }
        READ_BUFFER_IDLE_BYTES
    }

    /// The buffer with its spare capacity, for the read (monoio writes from `len()` on).
    pub fn take(&mut self) -> BytesMut {
        std::mem::take(&mut self.buffer)
    }

    /// The buffer back after a read of `read` bytes out of `offered`; adjusts the growth
    /// policy (a read that filled what it was offered asks for a larger buffer).
    pub fn put_back(&mut self, buffer: BytesMut, read: usize, offered: usize) {
        self.buffer = buffer;
        if read == offered {
            self.grow();
        } else if read < self.capacity / 4 {
            self.shrink();
        }
    }

    /// Gives back the read's reservation (call after the frames of the read are split off).
    pub fn settle(&mut self) {
        if self.reserved > 0 {
            self.memory.release(self.reserved);
            self.reserved = 0;
        }
        if self.buffer.is_empty() && self.buffer.capacity() > self.capacity {
            self.buffer = BytesMut::with_capacity(self.capacity);
        }
    }

    /// The bytes read and not consumed yet, for a carrier that parses its own framing (a
    /// WebSocket session's decoder consumes from the front).
    pub fn unparsed(&mut self) -> &mut BytesMut {
        &mut self.buffer
    }

    /// The next whole frame, copied into a charged allocation of its own; `None` when it has
    /// not fully arrived.
    pub fn next_frame(&mut self, frame_bytes_max: usize) -> Result<Option<Frame>, FrameError> {
        let Some(header) = bps_proto::peek_frame(&self.buffer, frame_bytes_max)? else {
            return Ok(None);
        };
        let total = header.total_bytes();
        if self.buffer.len() < total {
            return Ok(None);
        }
        let bytes = self.memory.frame(&self.buffer[..total]);
        self.buffer.advance(total);
        Ok(Some(Frame::from_header(bytes, header)))
    }

    fn grow(&mut self) {
        let target = (self.capacity * 2).min(READ_BUFFER_MAX_BYTES);
        let more = target - self.capacity;
        if more > 0 && self.memory.try_reserve(more) {
            self.capacity = target;
            self.grown += more;
        }
    }

    fn shrink(&mut self) {
        let target = (self.capacity / 2).max(READ_BUFFER_IDLE_BYTES);
        let less = self.capacity - target;
        if less > 0 {
            self.capacity = target;
            self.grown -= less;
            self.memory.release(less);
        }
    }
}

impl Drop for ReadBuffer {
    fn drop(&mut self) {
        self.memory.release(self.grown + self.reserved);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bps_proto::{Ack, Frame, FrameError};
    use bytes::BufMut;

    use super::ReadBuffer;
    use crate::io::frame_memory::FrameMemory;
    use crate::io::lane::Doorbell;
    use crate::limits::READ_BUFFER_IDLE_BYTES;

    fn memory(bytes_max: usize) -> Arc<FrameMemory> {
        Arc::new(FrameMemory::new(
            bytes_max,
            vec![Arc::new(Doorbell::default())].into(),
        ))
    }

    /// Simulates one read of `data` into the buffer.
    fn read(buffer: &mut ReadBuffer, data: &[u8]) {
        let offered = buffer.prepare();
        assert!(data.len() <= offered);
        let mut bytes = buffer.take();
        bytes.put_slice(data);
        buffer.put_back(bytes, data.len(), offered);
    }

    #[test]
    fn frames_split_across_reads_come_out_whole_and_charged() {
        let memory = memory(1 << 20);
        let mut buffer = ReadBuffer::new(Arc::clone(&memory));
        let frame = Frame::encode(&Ack {
            status: 1,
            challenge: vec![9; 32].into(),
        });
        let wire = [frame.bytes().as_ref(), frame.bytes().as_ref()].concat();
        for cut in 0..wire.len() {
            let mut frames = Vec::new();
            for piece in [&wire[..cut], &wire[cut..]] {
                read(&mut buffer, piece);
                while let Some(next) = buffer.next_frame(1024).expect("valid") {
                    frames.push(next);
                }
                buffer.settle();
            }
            assert_eq!(frames, vec![frame.clone(), frame.clone()], "cut at {cut}");
            assert_eq!(memory.used(), 2 * frame.len() + grown(&buffer));
            drop(frames);
            assert_eq!(memory.used(), grown(&buffer));
        }
    }

    fn grown(buffer: &ReadBuffer) -> usize {
        buffer.grown
    }

    #[test]
    fn an_oversize_length_is_refused_before_it_arrives() {
        let mut buffer = ReadBuffer::new(memory(1 << 20));
        read(&mut buffer, &[0xff, 0x7f]);
        assert_eq!(
            buffer.next_frame(1024),
            Err(FrameError::TooLarge {
                bytes: 16383,
                max: 1024
            })
        );
    }

    #[test]
    fn growth_is_charged_taken_only_with_room_and_given_back() {
        let memory = memory(READ_BUFFER_IDLE_BYTES * 4);
        let mut buffer = ReadBuffer::new(Arc::clone(&memory));
        read(&mut buffer, &[0; READ_BUFFER_IDLE_BYTES]);
        assert_eq!(memory.used(), READ_BUFFER_IDLE_BYTES, "doubled, charged");
        buffer.buffer.clear();
        buffer.settle();
        // A grown buffer's read is reserved; without room for that it reads an idle slice.
        let filler = memory.frame(&[0; READ_BUFFER_IDLE_BYTES * 3]);
        assert_eq!(buffer.prepare(), READ_BUFFER_IDLE_BYTES);
        assert_eq!(
            memory.used(),
            READ_BUFFER_IDLE_BYTES * 4,
            "nothing reserved"
        );
        drop(filler);
        let offered = buffer.prepare();
        assert!(offered > READ_BUFFER_IDLE_BYTES);
        assert_eq!(
            memory.used(),
            READ_BUFFER_IDLE_BYTES + offered,
            "the read is reserved"
        );
        let bytes = buffer.take();
        buffer.put_back(bytes, 0, offered);
        buffer.settle();
        drop(buffer);
        assert_eq!(memory.used(), 0);
    }
}
