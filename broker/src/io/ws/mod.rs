//! The WebSocket carrier: BPS streams as WebSocket sessions on a listener of their own
//! (docs/PROTOCOL.md §9; the endpoint reference is docs/WEBSOCKET.md).
//!
//! Owns, by module: `connection` (the accept loop, the request head, the peer behind a
//! trusted proxy, `Origin`, routing and the refusals before the upgrade), `session` (an
//! upgraded session: reader, writer, keepalive, close handshake), `bridge_session` (what a
//! SWIP-60 bridge session keeps), `rendition` (what the core queues, framed per receiver
//! without copying the shared frame), `service` (the W5 POST) and `close` (the table of
//! close codes).
//! A session is a stream like a TCP connection: the same port, the same link gates, the same
//! machine, bounds, counters and drain; only the bytes differ.
//!
//! Written here rather than taken from a crate: the sessions themselves. The WebSocket
//! crates that exist (tungstenite and its async wrappers) own the socket and the write
//! path, which would cost the zero-copy fan-out (one shared frame behind a per-message
//! header, many messages per vectored write) and monoio's owned-buffer I/O. RFC 6455
//! framing, the upgrade and the bridge's formats are pure functions in `bps_ws`; HTTP heads
//! are parsed by `httparse` and the accept key is `sha1` + `base64` there.
//! Never does: decide a protocol question.

mod bridge_session;
mod close;
mod connection;
mod rendition;
mod service;
mod session;
mod statics;

use bps_ws::TrustedProxies;
use std::sync::Arc;

use crate::config::WsConfig;

pub use connection::accept_loop;
pub use statics::StaticFiles;

/// What the WebSocket carrier needs from the configuration, fixed at start.
#[derive(Clone, Debug)]
pub struct WsSettings {
    pub allowed_origins: Vec<String>,
    pub trusted_proxies: TrustedProxies,
    pub ping_interval_ms: u64,
    pub idle_deadline_ms: u64,
    /// What `ws.static_dir` holds.
    pub statics: Arc<StaticFiles>,
}

impl WsSettings {
    pub fn of(config: &WsConfig, statics: Arc<StaticFiles>) -> WsSettings {
        WsSettings {
            allowed_origins: config.allowed_origins.clone(),
            trusted_proxies: config.trusted_proxy_ranges(),
            ping_interval_ms: config.ping_interval_ms,
            idle_deadline_ms: config.idle_deadline_ms,
            statics,
        }
    }
}
