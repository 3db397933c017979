//! The decoder of carriers that send BPS frames as they are (TCP, libp2p): each frame
//! length-delimited, straight out of the read buffer.
//!
//! Owns: `Delimited`, the `Decode` of such carriers, and what an oversize or malformed
//! delimiter means (the link's frame error, and the stream ends as an I/O close).
//! Never does: read a socket or a channel; the carrier's read loop feeds it.

use super::read::{Decode, Decoded};
use crate::io::link::CoreLink;
use crate::io::port::Port;
use crate::io::read_buffer::ReadBuffer;
use crate::protocol::ClosedBy;

/// Length-delimited frames of one stream, at most the link's `frame_bytes_max` each.
pub struct Delimited<'a> {
    link: &'a CoreLink,
    port: &'a Port,
    frame_bytes_max: usize,
}

impl<'a> Delimited<'a> {
    /// The decoder of `port`'s stream on `link`.
    pub fn new(link: &'a CoreLink, port: &'a Port) -> Delimited<'a> {
        Delimited {
            link,
            port,
            frame_bytes_max: link.settings().frame_bytes_max,
        }
    }
}

impl Decode for Delimited<'_> {
    async fn next(&mut self, buffer: &mut ReadBuffer) -> Decoded {
        match buffer.next_frame(self.frame_bytes_max) {
            Ok(Some(frame)) => Decoded::Frame(frame),
            Ok(None) => Decoded::Incomplete,
            Err(error) => {
                self.link.frame_error(self.port, &error);
                Decoded::End(ClosedBy::Io)
            }
        }
    }
}
