//! The rate of W5 POSTs per peer (`ws.service_posts_per_peer_per_s`), all cores together.
//!
//! Owns: `PostRate`, one token bucket per peer that posted lately (a burst of the rate, then
//! the rate), in a table of at most `POST_RATE_PEERS_MAX` peers behind one mutex, taken once
//! per POST before its body is read.
//! Never does: answer (the service endpoint turns a refusal into 429 with `Retry-After`).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use crate::limits::POST_RATE_PEERS_MAX;
use crate::protocol::PeerId;

/// Units of one token: the refill is `per_s` tokens per second, counted in microseconds.
const UNITS_PER_TOKEN: u64 = 1_000_000;

/// One peer's bucket at `at`.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    units: u64,
    at: Instant,
}

/// Token buckets per peer.
#[derive(Debug)]
pub struct PostRate {
    per_s: u64,
    peers: Mutex<HashMap<PeerId, Bucket>>,
}

impl PostRate {
    /// Buckets of `per_s` tokens refilled at `per_s` a second (`per_s` ≥ 1, validated).
    #[must_use]
    pub fn new(per_s: u32) -> PostRate {
        PostRate {
            per_s: u64::from(per_s.max(1)),
            peers: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one token of `peer`'s bucket at `now`; false when it has none left (or the
    /// table is full of peers that posted within the last second).
    pub fn try_take(&self, peer: PeerId, now: Instant) -> bool {
        let capacity = self.per_s * UNITS_PER_TOKEN;
        let mut peers = self.peers.lock().unwrap_or_else(PoisonError::into_inner);
        if !peers.contains_key(&peer) && peers.len() >= POST_RATE_PEERS_MAX {
            peers.retain(|_, bucket| self.refilled(*bucket, now) < capacity);
            if peers.len() >= POST_RATE_PEERS_MAX {
                return false;
            }
        }
        let units = peers
            .get(&peer)
            .map_or(capacity, |bucket| self.refilled(*bucket, now));
        if units < UNITS_PER_TOKEN {
            return false;
        }
        peers.insert(
            peer,
            Bucket {
                units: units - UNITS_PER_TOKEN,
                at: now,
            },
        );
        true
    }

    /// The units `bucket` holds at `now`, at most a full bucket.
    fn refilled(&self, bucket: Bucket, now: Instant) -> u64 {
        let elapsed_us =
            u64::try_from(now.saturating_duration_since(bucket.at).as_micros()).unwrap_or(u64::MAX);
        bucket
            .units
            .saturating_add(elapsed_us.saturating_mul(self.per_s))
            .min(self.per_s * UNITS_PER_TOKEN)
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};
    use std::time::Duration;

    use super::*;

    fn peer(n: u32) -> PeerId {
        PeerId::of(IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + n)))
    }

    #[test]
    fn a_peer_gets_a_burst_of_the_rate_then_the_rate() {
        let rate = PostRate::new(2);
        let start = Instant::now();
        assert!(rate.try_take(peer(1), start));
        assert!(rate.try_take(peer(1), start));
        assert!(!rate.try_take(peer(1), start), "the burst is the rate");
        assert!(
            rate.try_take(peer(2), start),
            "another peer has its own bucket"
        );
        let half = start + Duration::from_millis(500);
        assert!(
            rate.try_take(peer(1), half),
            "one token back after 1/rate s"
        );
        assert!(!rate.try_take(peer(1), half));
        let later = start + Duration::from_secs(60);
        assert!(rate.try_take(peer(1), later));
        assert!(rate.try_take(peer(1), later));
        assert!(
            !rate.try_take(peer(1), later),
            "a bucket never holds more than the rate"
        );
    }

    #[test]
    fn the_table_forgets_refilled_buckets_and_refuses_beyond_its_bound() {
        let rate = PostRate::new(1);
        let start = Instant::now();
        for n in 0..u32::try_from(POST_RATE_PEERS_MAX).expect("small") {
            assert!(rate.try_take(peer(n), start));
        }
        let newcomer = peer(1 << 20);
        assert!(
            !rate.try_take(newcomer, start),
            "full of peers that just posted"
        );
        let later = start + Duration::from_secs(2);
        assert!(
            rate.try_take(newcomer, later),
            "their buckets refilled and went"
        );
    }
}
