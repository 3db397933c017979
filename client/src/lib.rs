//! `bps_client`: the client side of BPS — a client library and the `bps` chunk tool and
//! terminal client.
//!
//! Owns: command-line hex and key arguments ([`hexarg`]), the cohort spec as flags
//! ([`spec`]), one stream with its handshake ([`session`]) over TCP or the WebSocket
//! carrier of the native `ws://…/bps/v1` endpoint ([`websocket`]), or over libp2p as a
//! Swarm light node ([`bee_node`]: the host, bee's handshake, pubsub streams;
//! [`bee_session`]: BPS on such a stream), any of them chosen by target ([`carrier`]), the publishing state
//! machine with claim, index sequences and signing ([`publisher`]), what a refused Join
//! means: the bound and the setting that moves it ([`refusal`]), end-to-end verification
//! of received frames ([`subscriber`]) with its bounded tables ([`cursor_table`],
//! [`dedup_window`]), the R38 reconnect schedule ([`backoff`]), which broker of a list a
//! run connects to, by placement, and where it fails over to ([`route`]), the chunk
//! tool's reports ([`inspect`]) and the terminal client's loops ([`client`]).
//!
//! Never: broker internals. Everything here speaks to a broker only through the wire
//! (`bps_proto`) and checks chunks only through `bps_verify`, exactly as any other client
//! implementation would.

pub mod backoff;
pub mod bee_node;
pub mod bee_session;
pub mod carrier;
pub mod client;
pub mod cursor_table;
pub mod dedup_window;
pub mod hexarg;
pub mod inspect;
pub mod publisher;
pub mod refusal;
pub mod route;
pub mod session;
pub mod spec;
pub mod subscriber;
#[cfg(test)]
mod testkit;
pub mod websocket;
