//! `bps_broker`: the BPS broker appliance as a library (the `bps-broker` binary wires it).
//!
//! Owns: the I/O layer ([`io`]) and the operations around it (config, metrics, admin HTTP,
//! lifecycle), and three leaves they all import: [`limits`] (the sizing constants),
//! [`labels`] (the label values of the metrics) and [`edge`] (this process's relay identity). No module imports back into a module that
//! imports it (`scripts/check-structure` checks it). The protocol rules live in `bps_core`, re-exported here as [`protocol`].
//! Never does: protocol rules; every protocol decision is `bps_core::Machine`'s.

pub mod edge;
pub mod io;
pub mod labels;
pub mod limits;

pub use bps_core as protocol;

// ops modules
pub mod admin;
pub mod budget;
pub mod cli;
pub mod config;
pub mod lifecycle;
pub mod metrics;
pub mod top;
