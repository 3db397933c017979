//! Fuzz target `frame_decoder`: `bps_proto::next_frame` on a peer's byte stream, read in
//! one buffer and in pieces cut where the input says (layout: `bps_fuzz::frame_input`).
//!
//! Asserts, against a model of the framing built from `varint_reference` (not from the
//! decoder):
//! - the whole-buffer decode yields exactly the model's bodies, then its error or its
//!   "need more", with every body a zero-copy slice at the model's offset and the buffer
//!   advanced by exactly the frame's bytes;
//! - the piecewise decode yields the same sequence, and a "need more" leaves the buffer
//!   untouched;
//! - a declared length above the cap is `TooLarge` as soon as the varint is complete (a
//!   buffer holding only the varint), and no `next_frame` call allocates more than a
//!   buffer-sharing header, so a peer's declared length is never allocated;
//! - re-encoding a body with its minimal varint length gives back the consumed bytes when
//!   the peer's varint was minimal, and the same body after a longer prefix otherwise.

#![no_main]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bps_fuzz::frame_input::FrameInput;
use bps_fuzz::varint_reference::{self, Varint};
use bps_proto::{FrameError, next_frame, peek_frame};
use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;

/// Most bytes one `next_frame` call may allocate: splitting a frame off is zero-copy, so the
/// only allocation is the `bytes` crate's shared-buffer header (a few words) the first time
/// a buffer is split; never anything sized by the peer.
const SPLIT_ALLOCATION_BYTES_MAX: usize = 64;

thread_local! {
    /// Whether allocations are being counted (only around `next_frame` calls).
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    /// Bytes allocated while counting.
    static COUNTED_BYTES: Cell<usize> = const { Cell::new(0) };
}

/// The system allocator, counting the bytes requested while [`COUNTING`] is set.
struct CountingAllocator;

// SAFETY: every call is forwarded unchanged to `System`; the counting touches only
// const-initialised thread-locals, which never allocate.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: the caller's contract for `alloc` is passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: as `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        // SAFETY: as `alloc`; `pointer` and `layout` come from this allocator, i.e. System.
        unsafe { System.realloc(pointer, layout, new_size) }
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        // SAFETY: `pointer` and `layout` come from this allocator, i.e. System.
        unsafe { System.dealloc(pointer, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

fn count(bytes: usize) {
    // `try_with`: allocations during thread teardown are simply not counted.
    let _ = COUNTING.try_with(|counting| {
        if counting.get() {
            let _ = COUNTED_BYTES.try_with(|counted| counted.set(counted.get() + bytes));
        }
    });
}

/// `next_frame`, asserting it allocated at most [`SPLIT_ALLOCATION_BYTES_MAX`].
fn next_frame_counted(
    buf: &mut BytesMut,
    frame_bytes_max: usize,
) -> Result<Option<Bytes>, FrameError> {
    COUNTED_BYTES.with(|counted| counted.set(0));
    COUNTING.with(|counting| counting.set(true));
    let result = next_frame(buf, frame_bytes_max);
    COUNTING.with(|counting| counting.set(false));
    let allocated = COUNTED_BYTES.with(Cell::get);
    assert!(
        allocated <= SPLIT_ALLOCATION_BYTES_MAX,
        "next_frame allocated {allocated} bytes (cap {frame_bytes_max}, result {result:?})"
    );
    result
}

/// One frame as the model reads it at `offset` in the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ModelFrame {
    offset: usize,
    prefix_bytes: usize,
    body_bytes: usize,
}

/// How the model's reading of the stream ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ModelEnd {
    /// A frame (or its length) is incomplete: the decoder must ask for more.
    NeedMore { offset: usize },
    /// The stream breaks the framing at `offset`.
    Error { offset: usize, error: FrameError },
}

/// The frames of `stream` under `frame_bytes_max`, by the framing rules alone.
fn model(stream: &[u8], frame_bytes_max: usize) -> (Vec<ModelFrame>, ModelEnd) {
    let mut frames = Vec::new();
    let mut offset = 0;
    loop {
        let (declared, prefix_bytes) = match varint_reference::decode(&stream[offset..]) {
            Varint::Incomplete => return (frames, ModelEnd::NeedMore { offset }),
            Varint::TooLong => {
                let error = FrameError::VarintTooLong;
                return (frames, ModelEnd::Error { offset, error });
            }
            Varint::Overflow => {
                let error = FrameError::VarintOverflow;
                return (frames, ModelEnd::Error { offset, error });
            }
            Varint::Value { value, bytes } => (value, bytes),
        };
        // Too large: above the cap, or a frame whose total size no usize can hold.
        let fits = u128::from(declared) <= frame_bytes_max as u128
            && u128::from(declared) + prefix_bytes as u128 <= usize::MAX as u128;
        if !fits {
            let error = FrameError::TooLarge {
                bytes: declared,
                max: frame_bytes_max,
            };
            return (frames, ModelEnd::Error { offset, error });
        }
        let body_bytes = declared as usize;
        if stream.len() - offset - prefix_bytes < body_bytes {
            return (frames, ModelEnd::NeedMore { offset });
        }
        frames.push(ModelFrame {
            offset,
            prefix_bytes,
            body_bytes,
        });
        offset += prefix_bytes + body_bytes;
    }
}

/// What one `next_frame` loop saw: the bodies, then the error if one ended it.
#[derive(Debug)]
struct Decoded {
    bodies: Vec<Bytes>,
    error: Option<FrameError>,
    left_over: Vec<u8>,
}

/// Decodes `stream` from one buffer, checking every body against the model frame and its
/// place in the buffer.
fn decode_whole(stream: &[u8], frame_bytes_max: usize, frames: &[ModelFrame]) -> Decoded {
    let mut buf = BytesMut::from(stream);
    let base = buf.as_ptr() as usize;
    let mut bodies = Vec::new();
    loop {
        match next_frame_counted(&mut buf, frame_bytes_max) {
            Ok(Some(body)) => {
                let frame = frames
                    .get(bodies.len())
                    .unwrap_or_else(|| panic!("body {} beyond the model", bodies.len()));
                let body_start = frame.offset + frame.prefix_bytes;
                assert_eq!(body.len(), frame.body_bytes);
                assert_eq!(
                    body.as_ptr() as usize,
                    base + body_start,
                    "a zero-copy slice"
                );
                assert_eq!(buf.len(), stream.len() - body_start - frame.body_bytes);
                bodies.push(body);
            }
            Ok(None) => {
                return Decoded {
                    bodies,
                    error: None,
                    left_over: buf.to_vec(),
                };
            }
            Err(error) => {
                return Decoded {
                    bodies,
                    error: Some(error),
                    left_over: buf.to_vec(),
                };
            }
        }
    }
}

/// Decodes `stream` fed as reads that end at `cuts` (then at the end), as a connection
/// would: after each read, frames until "need more" or an error, which ends the stream.
fn decode_in_pieces(stream: &[u8], cuts: &[usize], frame_bytes_max: usize) -> Decoded {
    let mut buf = BytesMut::new();
    let mut bodies = Vec::new();
    let mut read_start = 0;
    for &read_end in cuts.iter().chain([&stream.len()]) {
        buf.extend_from_slice(&stream[read_start..read_end]);
        read_start = read_end;
        loop {
            let before = (buf.as_ptr() as usize, buf.len());
            match next_frame_counted(&mut buf, frame_bytes_max) {
                Ok(Some(body)) => bodies.push(body),
                Ok(None) => {
                    assert_eq!(
                        (buf.as_ptr() as usize, buf.len()),
                        before,
                        "need-more consumes nothing"
                    );
                    break;
                }
                Err(error) => {
                    assert_eq!(buf.len(), before.1, "an error consumes nothing");
                    return Decoded {
                        bodies,
                        error: Some(error),
                        left_over: buf.to_vec(),
                    };
                }
            }
        }
    }
    Decoded {
        bodies,
        error: None,
        left_over: buf.to_vec(),
    }
}

/// The model's verdict on just the varint at `offset`: a length above the cap is refused
/// with no body byte present; otherwise the varint alone is a frame only if its body is
/// empty.
fn check_length_alone(
    stream: &[u8],
    offset: usize,
    frame_bytes_max: usize,
    expected: Option<FrameError>,
) {
    let Varint::Value { value, bytes } = varint_reference::decode(&stream[offset..]) else {
        return;
    };
    let varint = &stream[offset..offset + bytes];
    let mut buf = BytesMut::from(varint);
    let result = next_frame_counted(&mut buf, frame_bytes_max);
    match expected {
        Some(error) => {
            assert_eq!(result, Err(error));
            assert_eq!(peek_frame(varint, frame_bytes_max), Err(error));
        }
        None if value == 0 => assert_eq!(result, Ok(Some(Bytes::new()))),
        None => {
            assert_eq!(result, Ok(None));
            let header = peek_frame(varint, frame_bytes_max)
                .expect("a length within the cap")
                .expect("a complete varint");
            assert_eq!(
                (header.prefix_bytes, header.body_bytes as u64),
                (bytes, value)
            );
        }
    }
}

/// Re-encoding a body with its minimal varint length gives back the consumed bytes if the
/// peer's varint was minimal; otherwise the peer used a longer prefix for the same body.
fn check_reencoding(stream: &[u8], frame: &ModelFrame, body: &[u8]) {
    let consumed = &stream[frame.offset..frame.offset + frame.prefix_bytes + frame.body_bytes];
    let mut reencoded = Vec::new();
    prost::encoding::encode_varint(body.len() as u64, &mut reencoded);
    let minimal_prefix_bytes = reencoded.len();
    reencoded.extend_from_slice(body);
    if frame.prefix_bytes == minimal_prefix_bytes {
        assert_eq!(reencoded, consumed);
    } else {
        assert!(frame.prefix_bytes > minimal_prefix_bytes);
        assert_eq!(
            &reencoded[minimal_prefix_bytes..],
            &consumed[frame.prefix_bytes..]
        );
    }
}

fuzz_target!(|input: &[u8]| {
    let input = FrameInput::parse(input);
    let (stream, cap) = (input.stream, input.frame_bytes_max);
    let (frames, end) = model(stream, cap);

    let whole = decode_whole(stream, cap, &frames);
    assert_eq!(whole.bodies.len(), frames.len());
    for (frame, body) in frames.iter().zip(&whole.bodies) {
        let body_start = frame.offset + frame.prefix_bytes;
        assert_eq!(
            &body[..],
            &stream[body_start..body_start + frame.body_bytes]
        );
        check_reencoding(stream, frame, body);
    }
    let (end_offset, end_error) = match end {
        ModelEnd::NeedMore { offset } => (offset, None),
        ModelEnd::Error { offset, error } => (offset, Some(error)),
    };
    assert_eq!(whole.error, end_error);
    assert_eq!(whole.left_over, &stream[end_offset..]);

    // A connection stops reading at an error, so the pieces may have left bytes unread.
    let pieces = decode_in_pieces(stream, &input.cuts, cap);
    let cuts = &input.cuts;
    assert_eq!(pieces.bodies, whole.bodies, "cut at {cuts:?}");
    assert_eq!(pieces.error, whole.error, "cut at {cuts:?}");
    if whole.error.is_some() {
        assert!(
            whole.left_over.starts_with(&pieces.left_over),
            "cut at {cuts:?}"
        );
    } else {
        assert_eq!(pieces.left_over, whole.left_over, "cut at {cuts:?}");
    }

    for frame in &frames {
        check_length_alone(stream, frame.offset, cap, None);
    }
    check_length_alone(stream, end_offset, cap, end_error);
});
