//! Bee's control messages on a libp2p stream: `Incoming` gathers a stream's chunks until a
//! parser of bps-bee finds a whole message at the front, leaving what follows; `Fault` is
//! every way a peer can fail a stream's exchange (each closes that stream alone), with the
//! label the metrics count it under; `headers` is the exchange every stream but the
//! handshake's starts with (the opener writes its headers, we read them and answer empty
//! ones).
//! Never does: time anything (the caller puts a deadline around an exchange) or decide what
//! a message means.

use std::fmt;

use bps_bee::{HandshakeError, ReadError, empty_headers, read_headers};
use bytes::{Bytes, BytesMut};
use tokio::sync::mpsc;

use super::peers::NoHandshake;

/// Why a stream's exchange failed; the stream is reset.
#[derive(Debug)]
pub enum Fault {
    /// Not done within the deadline (`p2p.handshake_deadline_ms`).
    Deadline,
    /// The peer closed or reset the stream, or the connection ended, mid-exchange.
    Ended,
    /// A message was malformed or over bee's cap.
    Read(ReadError),
    /// The handshake's checks refused the peer.
    Handshake(HandshakeError),
    /// The handshake may not start (another runs, too many pending for the IP).
    Refused(NoHandshake),
    /// A BPS stream from a peer whose handshake has not completed.
    NoHandshake,
    /// The broker refused the stream at admission (a bound, the blocklist, a drain).
    Admission,
    /// A connection with no handshake completed or running at the handshake deadline.
    Unhandshaken,
}

impl Fault {
    /// The metrics' reason label.
    pub fn reason(&self) -> &'static str {
        match self {
            Fault::Deadline => "deadline",
            Fault::Ended => "ended",
            Fault::Read(_) => "malformed",
            Fault::Handshake(error) => error.reason(),
            Fault::Refused(refused) => refused.reason(),
            Fault::NoHandshake => "no_handshake",
            Fault::Admission => "admission",
            Fault::Unhandshaken => "unhandshaken",
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Deadline => write!(f, "not done within the deadline"),
            Fault::Ended => write!(f, "the stream ended mid-exchange"),
            Fault::Read(error) => write!(f, "{error}"),
            Fault::Handshake(error) => write!(f, "handshake: {error}"),
            Fault::Refused(refused) => write!(f, "handshake refused: {}", refused.reason()),
            Fault::NoHandshake => write!(f, "a BPS stream before the handshake completed"),
            Fault::Admission => write!(f, "refused at admission"),
            Fault::Unhandshaken => write!(f, "no handshake within the deadline of its connection"),
        }
    }
}

/// A stream's inbound bytes not yet parsed.
#[derive(Debug)]
pub struct Incoming {
    inbound: mpsc::Receiver<Bytes>,
    pub buf: BytesMut,
}

impl Incoming {
    pub fn new(inbound: mpsc::Receiver<Bytes>) -> Incoming {
        Incoming {
            inbound,
            buf: BytesMut::new(),
        }
    }

    /// Appends the next chunk; `Fault::Ended` when the stream ended.
    pub async fn more(&mut self) -> Result<(), Fault> {
        let chunk = self.inbound.recv().await.ok_or(Fault::Ended)?;
        self.buf.extend_from_slice(&chunk);
        Ok(())
    }

    /// The next message `parse` finds at the front, reading as needed.
    pub async fn next<T>(
        &mut self,
        mut parse: impl FnMut(&mut BytesMut) -> Result<Option<T>, ReadError>,
    ) -> Result<T, Fault> {
        loop {
            if let Some(message) = parse(&mut self.buf).map_err(Fault::Read)? {
                return Ok(message);
            }
            self.more().await?;
        }
    }

    /// The channel, and what was read past the last message.
    pub fn into_parts(self) -> (mpsc::Receiver<Bytes>, Bytes) {
        (self.inbound, self.buf.freeze())
    }
}

/// Writes `bytes` on the stream, waiting for room; `Fault::Ended` when it is gone.
pub async fn send(outbound: &mpsc::Sender<Bytes>, bytes: Bytes) -> Result<(), Fault> {
    outbound.send(bytes).await.map_err(|_| Fault::Ended)
}

/// The accepting side of bee's headers exchange: reads the opener's headers (their content
/// is not used: the broker acts on no header) and answers with none.
pub async fn headers(incoming: &mut Incoming, outbound: &mpsc::Sender<Bytes>) -> Result<(), Fault> {
    incoming.next(read_headers).await?;
    send(outbound, empty_headers()).await
}
