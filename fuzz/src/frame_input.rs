//! The `frame_decoder` target's input: a frame cap, the places where the stream is cut into
//! reads, and the stream.
//!
//! Layout: `cap (u16 LE) ‖ cut count (1 byte) ‖ cuts (u16 LE each) ‖ stream`. A cap of
//! [`CAP_UNLIMITED`] stands for `usize::MAX` (the cap under which only the frame's own size
//! limits it); a cut is reduced modulo `stream.len() + 1`. Owns: parsing and encoding that
//! layout. Never: decodes frames.

use crate::reader::Reader;

/// The cap value that means `usize::MAX`.
pub const CAP_UNLIMITED: u16 = u16::MAX;

/// One parsed `frame_decoder` input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameInput<'a> {
    /// The `frame_bytes_max` handed to the decoder.
    pub frame_bytes_max: usize,
    /// Where reads end, ascending, without repeats, each in `0..=stream.len()`.
    pub cuts: Vec<usize>,
    /// The bytes a peer sends.
    pub stream: &'a [u8],
}

impl<'a> FrameInput<'a> {
    /// Reads the layout; every byte string is an input.
    pub fn parse(input: &'a [u8]) -> Self {
        let mut reader = Reader::new(input);
        let cap = reader.u16_le();
        let cut_count = reader.byte();
        let raw_cuts: Vec<u16> = (0..cut_count).map(|_| reader.u16_le()).collect();
        let stream = reader.rest();
        let mut cuts: Vec<usize> = raw_cuts
            .into_iter()
            .map(|cut| usize::from(cut) % (stream.len() + 1))
            .collect();
        cuts.sort_unstable();
        cuts.dedup();
        Self {
            frame_bytes_max: if cap == CAP_UNLIMITED {
                usize::MAX
            } else {
                usize::from(cap)
            },
            cuts,
            stream,
        }
    }
}

/// The input bytes for a cap, cuts and a stream (at most 255 cuts).
pub fn encode(cap: u16, cuts: &[u16], stream: &[u8]) -> Vec<u8> {
    let cut_count = u8::try_from(cuts.len()).expect("at most 255 cuts");
    let mut input = cap.to_le_bytes().to_vec();
    input.push(cut_count);
    for cut in cuts {
        input.extend_from_slice(&cut.to_le_bytes());
    }
    input.extend_from_slice(stream);
    input
}
