//! `bps_bench`: the `bps-bench` load generator ([`load`]): publishers that sign,
//! subscribers that verify or compare, HdrHistogram reports and the NATS side-by-side.
//!
//! Never: broker internals. It drives a broker only through the client library
//! (`bps_client`) and the wire, exactly as any other client would.

pub mod load;
