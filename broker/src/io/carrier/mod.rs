//! The carrier layer: what every carrier of BPS streams shares, so that a carrier is only
//! a decoder, an encoder and a way to read and write bytes.
//!
//! Owns, by module: `socket` (the accept loop's next connection with its backoff, the
//! socket options of an accepted connection, the cancellation of a stream's operations in
//! flight and the close hook that arms it, half-close and zero linger), `read` (the read
//! loop: bytes into the stream's `ReadBuffer`, through the carrier's decoder, and every
//! frame through the read gate to the core; the one place a carrier passes the gate) and
//! `write` (the writer task: what the kernel refused to the core's direct vectored write,
//! and everything queued after it, many messages per `writev`, until the stream flushes or
//! resets) and `delimited` (the decoder of the carriers that send frames as they are:
//! length-delimited, TCP and libp2p).
//!
//! The contract a carrier fulfils (TCP in `tcp`, WebSocket in `ws`, libp2p in `p2p`: the
//! same three things and nothing else):
//! - **bytes**: a connection that reads into an owned buffer and writes owned vectors with
//!   a cancel handle (`CancelableAsyncReadRent`/`CancelableAsyncWriteRent`), and a socket
//!   fd the core may write to directly (`Port::attach_socket`);
//! - **a decoder** (`read::Decode`): the next complete frame in the read buffer, and the
//!   answers to what else the carrier reads (a WebSocket ping). The decoder hands nothing
//!   over: the read loop passes each frame through the read gate (`CoreLink::gate`: the
//!   router's pause, the stream's credit, the core's frames in flight) exactly once and
//!   then hands it to the core (`CoreLink::hand_over`), and issues a read only when the
//!   gate lets it (the router's pause, frame memory, the stream's credit);
//! - **an encoder** (`encoding::Encoder`, on the port as its `Framing`): the per-message
//!   header in front of the shared frame, computed once per delivery for every receiver
//!   with the same key. A carrier that sends frames as they are (TCP) has none, and its
//!   deliveries never call one.
//!
//! The carrier starts a stream with `link.admit`, `socket::configure` and `Cancellers::arm`,
//! runs `read::read_loop` and a spawned `write::write_loop`, and ends with `link.ended`; a
//! carrier with no socket (libp2p: a stream is a pair of channels) attaches none to its port,
//! stops its reads through its port's close hook, and runs a writer of its own on the same
//! port calls as `write_loop` (`take_writing`, `wrote`, `return_writing`, `link.written`);
//! how it says goodbye (a FIN, a WebSocket close frame, a reset) is its own, from what the
//! writer reports (`write::WriteEnd`). The flush deadline and the R26 bound are the link's
//! and the port's, the same for every carrier.
//! Never does: know a carrier's bytes, or touch the shard or the machine.

mod delimited;
mod read;
mod socket;
mod write;

pub use delimited::Delimited;
pub use read::{Decode, Decoded, read_loop};
#[cfg(test)]
pub use socket::KEEPALIVE_PROBES;
pub use socket::{Cancellers, accept_next, configure, set_linger_zero, shutdown_write};
pub use write::{WriteEnd, write_loop};
