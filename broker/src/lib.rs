//! `bps_broker`: the BPS broker appliance as a library (the `bps-broker` binary wires it).
//!
//! Owns: [`protocol`], the I/O-free protocol state machine (BPS.md section 5).
//! Never does: protocol rules outside [`protocol`].

pub mod io;
pub mod protocol;

// ops modules
pub mod admin;
pub mod cli;
pub mod config;
pub mod lifecycle;
pub mod metrics;
