//! Counting deliveries from bytes alone, for the subscribers that do not read their frames.
//!
//! Owns: [`ByteCounter`] (every delivery of a stream has one known frame length, so the
//! deliveries are the whole frames in the bytes received; a partial frame stays counted as
//! bytes until its last byte arrives) and [`discard`], which takes the bytes queued on a TCP
//! socket and throws them away inside the kernel without copying them to user space
//! (`recv` with `MSG_TRUNC`, `man 7 tcp`: "the received bytes of data are discarded rather
//! than passed back in a caller-supplied buffer"). One `discard` per readiness event takes
//! everything queued, whatever the number of frames.
//!
//! Never: looks at the bytes (the kernel never hands them over). Loss is found by the
//! caller: fewer whole frames than were sent to the stream, bytes left over, or a reset.

use std::io;
use std::os::fd::RawFd;

/// Most bytes one [`discard`] may take: far above any socket receive buffer, so a single
/// call empties the queue.
pub const DISCARD_BYTES_MAX: usize = 1 << 30;

/// Discards up to [`DISCARD_BYTES_MAX`] bytes queued on the TCP socket `fd` without copying
/// them, and says how many there were (0: the peer closed). Never blocks.
pub fn discard(fd: RawFd) -> io::Result<usize> {
    // SAFETY: with MSG_TRUNC a TCP socket never writes to the buffer (man 7 tcp), so a null
    // pointer is never dereferenced; the kernel only range-checks it, and the call takes
    // no other memory.
    let result = unsafe {
        libc::recv(
            fd,
            std::ptr::null_mut(),
            DISCARD_BYTES_MAX,
            libc::MSG_TRUNC | libc::MSG_DONTWAIT,
        )
    };
    usize::try_from(result).map_err(|_| io::Error::last_os_error())
}

/// Whole frames in the bytes of one stream (module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ByteCounter {
    frame_bytes: u64,
    bytes: u64,
    frames: u64,
}

impl ByteCounter {
    /// A counter for frames of `frame_bytes` bytes each (at least 1).
    pub fn new(frame_bytes: usize) -> Self {
        assert!(frame_bytes > 0, "a frame has at least one byte");
        Self {
            frame_bytes: frame_bytes as u64,
            bytes: 0,
            frames: 0,
        }
    }

    /// Takes `bytes` more bytes; returns the frames they completed.
    pub fn add(&mut self, bytes: u64) -> u64 {
        self.bytes += bytes;
        let frames = self.bytes / self.frame_bytes;
        let completed = frames - self.frames;
        self.frames = frames;
        completed
    }

    /// Whole frames so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Bytes so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Bytes of a frame not yet complete.
    pub fn partial_bytes(&self) -> u64 {
        self.bytes % self.frame_bytes
    }

    /// The length of every frame.
    pub fn frame_bytes(&self) -> u64 {
        self.frame_bytes
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;
    use std::time::{Duration, Instant};

    use super::*;

    #[test]
    fn frames_split_across_reads_count_once_they_are_whole() {
        let mut counter = ByteCounter::new(4300);
        assert_eq!(counter.add(100), 0, "a partial frame is only bytes");
        assert_eq!((counter.frames(), counter.partial_bytes()), (0, 100));
        assert_eq!(counter.add(4199), 0, "one byte short");
        assert_eq!(counter.add(1), 1, "the last byte completes it");
        assert_eq!(counter.add(3 * 4300 + 17), 3, "several frames in one read");
        assert_eq!(counter.partial_bytes(), 17);
        assert_eq!(counter.add(4283), 1);
        assert_eq!(
            (counter.frames(), counter.bytes(), counter.partial_bytes()),
            (5, 5 * 4300, 0)
        );
    }

    fn socket_pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let client = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (server, _) = listener.accept().expect("accept");
        (client, server)
    }

    /// Discards until `want` bytes were taken or 5 s passed; returns what was taken.
    fn discard_until(fd: RawFd, want: usize) -> usize {
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut taken = 0;
        while taken < want && Instant::now() < deadline {
            match discard(fd) {
                Ok(0) => break,
                Ok(count) => taken += count,
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(error) => panic!("discard: {error}"),
            }
        }
        taken
    }

    #[test]
    fn msg_trunc_discards_tcp_bytes_in_the_kernel_on_this_kernel() {
        let (mut writer, mut reader) = socket_pair();
        let fd = reader.as_raw_fd();
        assert_eq!(
            discard(fd).map_err(|error| error.kind()),
            Err(io::ErrorKind::WouldBlock),
            "nothing queued: never blocks"
        );
        // Three 4300-byte frames of 0xaa, written in uneven pieces.
        let frames = vec![0xaa_u8; 3 * 4300];
        for piece in frames.chunks(1000) {
            writer.write_all(piece).expect("write");
        }
        let mut counter = ByteCounter::new(4300);
        let taken = discard_until(fd, frames.len());
        assert_eq!(taken, frames.len(), "every queued byte was taken");
        assert_eq!(counter.add(taken as u64), 3);
        // The discarded bytes are gone, not peeked: the next read sees only what follows.
        writer.write_all(b"next").expect("write");
        let mut next = [0u8; 4];
        reader.read_exact(&mut next).expect("read");
        assert_eq!(&next, b"next");
        // A closed peer reads as 0 bytes, after the last queued ones.
        writer.write_all(&[0xbb; 10]).expect("write");
        drop(writer);
        assert_eq!(discard_until(fd, 10), 10);
        assert_eq!(discard(fd).expect("EOF"), 0);
    }

    #[test]
    fn one_discard_takes_far_more_than_a_frame() {
        let (mut writer, reader) = socket_pair();
        let burst = vec![0x55_u8; 256 * 1024];
        let writing = std::thread::spawn(move || writer.write_all(&burst).expect("write"));
        std::thread::sleep(Duration::from_millis(50));
        let first = discard_until(reader.as_raw_fd(), 1);
        assert!(first > 16 * 1024, "one call took {first} bytes");
        assert_eq!(
            first + discard_until(reader.as_raw_fd(), 256 * 1024 - first),
            256 * 1024
        );
        writing.join().expect("writer");
    }
}
