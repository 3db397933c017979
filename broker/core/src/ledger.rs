//! State shared by every core's machine about peers and the broker as a whole.
//!
//! Owns: `PeerLedger`: the number of live cohorts (R31, broker-wide), each peer's number of
//! live cohorts and the cohorts of each IPv6 prefix's peers together (R32), each peer's
//! connections that have not sent a Join yet, each peer's missed Join deadlines, and the
//! blocklist (R39), all bounded (expired and idle entries are removed; the blocklist and the
//! table of missed deadlines have a maximum size). Also which peers are trusted relays
//! (`limits.trusted_relays`) and their raised bounds: a trusted relay is many clients behind
//! one address, so its per-peer bounds are the `trusted_relay_*` keys, its cohorts are not
//! counted into its IPv6 prefix (an edge must not use up its neighbours' bound), and it is
//! never blocklisted (the offending stream is still reset; docs/LIMITS.md says why).
//! Never does: anything per frame. It is behind one mutex, taken at accept, at Join, when a
//! peer leaves its last stream of a cohort, when a cohort is created or reclaimed, and on a
//! violation or a missed deadline.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Mutex, PoisonError};

use super::action::FullCause;
use super::config::ProtocolConfig;
use super::ids::{IPV6_PEER_PREFIX_BITS, PeerId};
use super::time::Millis;
use super::trust::TrustedRelays;

/// Superseded blocklist expiries tolerated beyond twice the live entries before a sweep.
const EXPIRIES_SLACK: usize = 64;

/// The broker-wide bounds, replaced by `reconfigure`.
#[derive(Clone, Copy, Debug)]
struct Bounds {
    cohorts_max: usize,
    cohorts_per_peer_max: usize,
    cohorts_per_ipv6_prefix_max: usize,
    ipv6_prefix_bits: u32,
    blocklist_entries_max: usize,
    prejoin_connections_per_peer_max: usize,
    join_timeouts_per_peer_max: usize,
    blocklist_join_timeout_ms: u64,
    spectator_sessions_per_peer_max: usize,
    streams_per_peer_per_cohort_max: usize,
    trusted_relay_cohorts_max: usize,
    trusted_relay_streams_per_cohort_max: usize,
    trusted_relay_prejoin_connections_max: usize,
}

impl Bounds {
    fn of(config: &ProtocolConfig) -> Bounds {
        Bounds {
            cohorts_max: config.cohorts_max,
            cohorts_per_peer_max: config.cohorts_per_peer_max,
            cohorts_per_ipv6_prefix_max: config.cohorts_per_ipv6_prefix_max,
            ipv6_prefix_bits: config.ipv6_prefix_bits,
            blocklist_entries_max: config.blocklist_entries_max,
            prejoin_connections_per_peer_max: config.prejoin_connections_per_peer_max,
            join_timeouts_per_peer_max: config.join_timeouts_per_peer_max,
            blocklist_join_timeout_ms: config.blocklist_join_timeout_ms,
            spectator_sessions_per_peer_max: config.spectator_sessions_per_peer_max,
            streams_per_peer_per_cohort_max: config.streams_per_peer_per_cohort_max,
            trusted_relay_cohorts_max: config.trusted_relay_cohorts_max,
            trusted_relay_streams_per_cohort_max: config.trusted_relay_streams_per_cohort_max,
            trusted_relay_prejoin_connections_max: config.trusted_relay_prejoin_connections_max,
        }
    }

    /// R32: the cohorts a trusted relay or another peer may be attached to (a trusted
    /// relay's bound raises the usual one, never lowers it).
    fn cohorts_per_peer(&self, trusted: bool) -> usize {
        raised(
            self.cohorts_per_peer_max,
            self.trusted_relay_cohorts_max,
            trusted,
        )
    }

    /// The connections without a Join a trusted relay or another peer may hold.
    fn prejoin_per_peer(&self, trusted: bool) -> usize {
        raised(
            self.prejoin_connections_per_peer_max,
            self.trusted_relay_prejoin_connections_max,
            trusted,
        )
    }

    /// R33: the streams a trusted relay or another peer may hold in one cohort.
    fn streams_per_cohort(&self, trusted: bool) -> usize {
        raised(
            self.streams_per_peer_per_cohort_max,
            self.trusted_relay_streams_per_cohort_max,
            trusted,
        )
    }
}

/// A per-peer bound: `usual`, or for a trusted relay the larger of it and `trusted_max`.
fn raised(usual: usize, trusted_max: usize, trusted: bool) -> usize {
    if trusted {
        usual.max(trusted_max)
    } else {
        usual
    }
}

/// A peer's missed Join deadlines since its first one in the current window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Strikes {
    first: Millis,
    count: usize,
}

#[derive(Debug)]
struct LedgerState {
    bounds: Bounds,
    trusted: TrustedRelays,
    /// Penalties a trusted relay would have been blocklisted for (violations, claim
    /// timeouts, missed Join deadlines), since start.
    blocklistings_waived: u64,
    cohorts_live: usize,
    peer_cohorts: HashMap<PeerId, usize>,
    /// The sum of `peer_cohorts` over the IPv6 peers of each prefix of `ipv6_prefix_bits`
    /// that are not trusted relays.
    prefix_cohorts: HashMap<u128, usize>,
    blocked_until: HashMap<PeerId, Millis>,
    /// Every blocklist entry with its expiry; entries superseded by a later `block` of the
    /// same peer stay here until they reach the top and are skipped, or until they outnumber
    /// the live entries and are swept.
    expiries: BinaryHeap<Reverse<(Millis, PeerId)>>,
    /// Connections per peer that have not sent their Join yet.
    prejoin: HashMap<PeerId, usize>,
    /// Anonymous spectator sessions per peer (W11).
    anonymous: HashMap<PeerId, usize>,
    /// Missed Join deadlines per peer, and the peers in the order of their first strike
    /// (entries whose strikes were cleared or renewed are skipped when they reach the front).
    strikes: HashMap<PeerId, Strikes>,
    strike_order: VecDeque<(Millis, PeerId)>,
}

/// Broker-wide peer and cohort accounting, shared by all cores through an `Arc`.
#[derive(Debug)]
pub struct PeerLedger {
    state: Mutex<LedgerState>,
}

/// A snapshot of the ledger for the admin view.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct LedgerSnapshot {
    /// Live cohorts on all cores.
    pub cohorts_live: usize,
    /// Peers attached to at least one cohort.
    pub peers_attached: usize,
    /// Blocklisted peers (expired ones may linger until the next ledger call).
    pub peers_blocked: usize,
    /// Connections that have not sent their Join yet, all peers together.
    pub prejoin_connections: usize,
    /// Peers with missed Join deadlines on record.
    pub peers_with_join_timeouts: usize,
    /// Anonymous spectator sessions (W11), all peers together.
    pub anonymous_sessions: usize,
    /// Trusted relays attached to at least one cohort.
    pub trusted_relays_attached: usize,
    /// Cohort attachments of trusted relays, all of them together.
    pub trusted_relay_cohorts: usize,
    /// Blocklistings of trusted relays waived since start.
    pub blocklistings_waived: u64,
}

impl PeerLedger {
    /// An empty ledger enforcing `config`'s broker-wide bounds.
    #[must_use]
    pub fn new(config: &ProtocolConfig) -> Self {
        PeerLedger {
            state: Mutex::new(LedgerState {
                bounds: Bounds::of(config),
                trusted: config.trusted_relays.clone(),
                blocklistings_waived: 0,
                cohorts_live: 0,
                peer_cohorts: HashMap::new(),
                prefix_cohorts: HashMap::new(),
                blocked_until: HashMap::new(),
                expiries: BinaryHeap::new(),
                prejoin: HashMap::new(),
                anonymous: HashMap::new(),
                strikes: HashMap::new(),
                strike_order: VecDeque::new(),
            }),
        }
    }

    /// Applies reloaded bounds. Lowered bounds refuse new entries until the counts are below
    /// them; nothing already admitted is evicted, except blocklist entries beyond the new
    /// maximum (soonest expiry first) and those of peers now trusted. A new `ipv6_prefix_bits`
    /// or a new list of trusted relays regroups the attached peers.
    pub fn reconfigure(&self, config: &ProtocolConfig) {
        let mut state = self.state();
        let regroup = state.bounds.ipv6_prefix_bits != config.ipv6_prefix_bits
            || state.trusted != config.trusted_relays;
        state.bounds = Bounds::of(config);
        state.trusted = config.trusted_relays.clone();
        if regroup {
            Self::regroup(&mut state);
        }
        while state.blocked_until.len() > state.bounds.blocklist_entries_max {
            Self::evict_soonest(&mut state);
        }
    }

    /// Recounts `prefix_cohorts` from the attached peers, and forgets the blocklist entries
    /// and strikes of trusted relays (their superseded expiries are skipped as usual).
    fn regroup(state: &mut LedgerState) {
        let bits = state.bounds.ipv6_prefix_bits;
        let mut prefix_cohorts: HashMap<u128, usize> = HashMap::new();
        for (peer, count) in &state.peer_cohorts {
            if let Some(prefix) = ipv6_prefix(*peer, bits)
                && !state.trusted.contains(*peer)
            {
                *prefix_cohorts.entry(prefix).or_insert(0) += count;
            }
        }
        state.prefix_cohorts = prefix_cohorts;
        let trusted = &state.trusted;
        state
            .blocked_until
            .retain(|peer, _| !trusted.contains(*peer));
        state.strikes.retain(|peer, _| !trusted.contains(*peer));
    }

    fn state(&self) -> std::sync::MutexGuard<'_, LedgerState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes a slot for a new cohort (R31); false when the broker is full.
    pub fn try_open_cohort(&self) -> bool {
        let mut state = self.state();
        if state.cohorts_live >= state.bounds.cohorts_max {
            return false;
        }
        state.cohorts_live += 1;
        true
    }

    /// Returns a cohort slot taken by `try_open_cohort`.
    ///
    /// # Panics
    /// If no cohort is open.
    pub fn close_cohort(&self) {
        let mut state = self.state();
        assert!(
            state.cohorts_live > 0,
            "closing a cohort that was never opened"
        );
        state.cohorts_live -= 1;
    }

    /// Whether every cohort slot is taken (R31).
    #[must_use]
    pub fn cohorts_full(&self) -> bool {
        let state = self.state();
        state.cohorts_live >= state.bounds.cohorts_max
    }

    /// Counts `peer` into one more cohort (R32): refused at the peer's own bound (a trusted
    /// relay's is `trusted_relay_cohorts_max`), or, for an IPv6 peer that is not a trusted
    /// relay, at the bound of its prefix; a refusal counts nothing.
    pub fn try_enter_cohort(&self, peer: PeerId) -> Result<(), FullCause> {
        let mut state = self.state();
        let bounds = state.bounds;
        let trusted = state.trusted.contains(peer);
        let held = state.peer_cohorts.get(&peer).copied().unwrap_or(0);
        if held >= bounds.cohorts_per_peer(trusted) {
            return Err(FullCause::PeerCohorts);
        }
        let prefix = ipv6_prefix(peer, bounds.ipv6_prefix_bits).filter(|_| !trusted);
        if let Some(prefix) = prefix {
            let count = state.prefix_cohorts.get(&prefix).copied().unwrap_or(0);
            if count >= bounds.cohorts_per_ipv6_prefix_max {
                return Err(FullCause::Ipv6PrefixCohorts);
            }
            state.prefix_cohorts.insert(prefix, count + 1);
        }
        *state.peer_cohorts.entry(peer).or_insert(0) += 1;
        Ok(())
    }

    /// R33: the streams `peer` may hold in one cohort; a trusted relay's is
    /// `trusted_relay_streams_per_cohort_max` (its upstream stream and the publishers it
    /// splices through).
    #[must_use]
    pub fn streams_per_peer_per_cohort_max(&self, peer: PeerId) -> usize {
        let state = self.state();
        state
            .bounds
            .streams_per_cohort(state.trusted.contains(peer))
    }

    /// Whether `peer` is a trusted relay (`limits.trusted_relays`).
    #[must_use]
    pub fn is_trusted(&self, peer: PeerId) -> bool {
        self.state().trusted.contains(peer)
    }

    /// `peer` left its last stream of one cohort.
    ///
    /// # Panics
    /// If `peer` was not counted in any cohort.
    pub fn leave_cohort(&self, peer: PeerId) {
        let mut state = self.state();
        let count = state
            .peer_cohorts
            .get_mut(&peer)
            .expect("peer leaves a cohort it never entered");
        *count -= 1;
        if *count == 0 {
            state.peer_cohorts.remove(&peer);
        }
        let prefix = ipv6_prefix(peer, state.bounds.ipv6_prefix_bits)
            .filter(|_| !state.trusted.contains(peer));
        if let Some(prefix) = prefix {
            let count = state
                .prefix_cohorts
                .get_mut(&prefix)
                .expect("a peer's prefix is counted with it");
            *count -= 1;
            if *count == 0 {
                state.prefix_cohorts.remove(&prefix);
            }
        }
    }

    /// Cohorts `peer` is attached to.
    #[must_use]
    pub fn cohorts_of(&self, peer: PeerId) -> usize {
        self.state().peer_cohorts.get(&peer).copied().unwrap_or(0)
    }

    /// Blocklists `peer` at `now` until `until` (a later entry for the same peer wins if it is
    /// longer). A trusted relay is never blocklisted: false then, and the waiver is counted.
    pub fn block(&self, peer: PeerId, now: Millis, until: Millis) -> bool {
        let mut state = self.state();
        if state.trusted.contains(peer) {
            state.blocklistings_waived += 1;
            return false;
        }
        Self::expire(&mut state, now);
        let current = state.blocked_until.get(&peer).copied();
        if current.is_some_and(|current| current >= until) {
            return true;
        }
        if current.is_none() && state.blocked_until.len() >= state.bounds.blocklist_entries_max {
            Self::evict_soonest(&mut state);
        }
        state.blocked_until.insert(peer, until);
        state.expiries.push(Reverse((until, peer)));
        if state.expiries.len() > 2 * state.blocked_until.len() + EXPIRIES_SLACK {
            let live = &state.blocked_until;
            let kept: Vec<Reverse<(Millis, PeerId)>> = state
                .expiries
                .iter()
                .filter(|Reverse((until, peer))| live.get(peer) == Some(until))
                .copied()
                .collect();
            state.expiries = kept.into();
        }
        true
    }

    /// Counts one more connection of `peer` that has not sent its Join; false when the peer
    /// already holds `prejoin_connections_per_peer_max` of them
    /// (`trusted_relay_prejoin_connections_max` for a trusted relay).
    pub fn try_enter_prejoin(&self, peer: PeerId) -> bool {
        let mut state = self.state();
        let max = state.bounds.prejoin_per_peer(state.trusted.contains(peer));
        let count = state.prejoin.entry(peer).or_insert(0);
        if *count >= max {
            return false;
        }
        *count += 1;
        true
    }

    /// A connection counted by `try_enter_prejoin` sent its Join or closed.
    ///
    /// # Panics
    /// If `peer` has no such connection.
    pub fn leave_prejoin(&self, peer: PeerId) {
        let mut state = self.state();
        let count = state
            .prejoin
            .get_mut(&peer)
            .expect("peer leaves a pre-Join slot it never took");
        *count -= 1;
        if *count == 0 {
            state.prejoin.remove(&peer);
        }
    }

    /// Counts one more anonymous spectator session of `peer` (W11); false when it already
    /// holds `spectator_sessions_per_peer_max` of them.
    pub fn try_enter_anonymous(&self, peer: PeerId) -> bool {
        let mut state = self.state();
        let max = state.bounds.spectator_sessions_per_peer_max;
        let count = state.anonymous.entry(peer).or_insert(0);
        if *count >= max {
            return false;
        }
        *count += 1;
        true
    }

    /// A session counted by `try_enter_anonymous` ended.
    ///
    /// # Panics
    /// If `peer` has no such session.
    pub fn leave_anonymous(&self, peer: PeerId) {
        let mut state = self.state();
        let count = state
            .anonymous
            .get_mut(&peer)
            .expect("peer leaves an anonymous session it never entered");
        *count -= 1;
        if *count == 0 {
            state.anonymous.remove(&peer);
        }
    }

    /// `peer` missed a Join deadline at `now`. At `join_timeouts_per_peer_max` strikes within
    /// one `blocklist_join_timeout_ms` it is blocklisted for that long; the time it is blocked
    /// until is returned then. A trusted relay collects no strikes: the late connection was
    /// reset, and its address is every client of the edge.
    pub fn note_join_timeout(&self, peer: PeerId, now: Millis) -> Option<Millis> {
        let mut state = self.state();
        let bounds = state.bounds;
        if bounds.blocklist_join_timeout_ms == 0 {
            return None;
        }
        if state.trusted.contains(peer) {
            state.blocklistings_waived += 1;
            return None;
        }
        Self::forget_stale_strikes(&mut state, now);
        let strikes = match state.strikes.get(&peer).copied() {
            Some(strikes) => Strikes {
                count: strikes.count + 1,
                ..strikes
            },
            None => {
                if state.strikes.len() >= bounds.blocklist_entries_max {
                    Self::forget_oldest_strike(&mut state);
                }
                state.strike_order.push_back((now, peer));
                Strikes {
                    first: now,
                    count: 1,
                }
            }
        };
        if strikes.count < bounds.join_timeouts_per_peer_max {
            state.strikes.insert(peer, strikes);
            return None;
        }
        state.strikes.remove(&peer);
        drop(state);
        let until = now.plus_ms(bounds.blocklist_join_timeout_ms);
        self.block(peer, now, until).then_some(until)
    }

    fn forget_stale_strikes(state: &mut LedgerState, now: Millis) {
        let window = state.bounds.blocklist_join_timeout_ms;
        while let Some((first, peer)) = state.strike_order.front().copied() {
            let current = state.strikes.get(&peer).map(|strikes| strikes.first);
            if current == Some(first) && first.plus_ms(window) > now {
                return;
            }
            state.strike_order.pop_front();
            if current == Some(first) {
                state.strikes.remove(&peer);
            }
        }
    }

    fn forget_oldest_strike(state: &mut LedgerState) {
        while let Some((first, peer)) = state.strike_order.pop_front() {
            if state.strikes.get(&peer).map(|strikes| strikes.first) == Some(first) {
                state.strikes.remove(&peer);
                return;
            }
        }
    }

    /// Whether `peer` is blocklisted at `now`.
    pub fn is_blocked(&self, peer: PeerId, now: Millis) -> bool {
        let mut state = self.state();
        Self::expire(&mut state, now);
        state
            .blocked_until
            .get(&peer)
            .is_some_and(|until| *until > now)
    }

    /// Counts for the admin view.
    #[must_use]
    pub fn snapshot(&self) -> LedgerSnapshot {
        let state = self.state();
        let trusted: Vec<usize> = state
            .peer_cohorts
            .iter()
            .filter(|(peer, _)| state.trusted.contains(**peer))
            .map(|(_, count)| *count)
            .collect();
        LedgerSnapshot {
            cohorts_live: state.cohorts_live,
            peers_attached: state.peer_cohorts.len(),
            peers_blocked: state.blocked_until.len(),
            prejoin_connections: state.prejoin.values().sum(),
            peers_with_join_timeouts: state.strikes.len(),
            anonymous_sessions: state.anonymous.values().sum(),
            trusted_relays_attached: trusted.len(),
            trusted_relay_cohorts: trusted.iter().sum(),
            blocklistings_waived: state.blocklistings_waived,
        }
    }

    fn expire(state: &mut LedgerState, now: Millis) {
        while let Some(Reverse((until, peer))) = state.expiries.peek().copied() {
            if until > now {
                break;
            }
            state.expiries.pop();
            if state.blocked_until.get(&peer) == Some(&until) {
                state.blocked_until.remove(&peer);
            }
        }
    }

    fn evict_soonest(state: &mut LedgerState) {
        while let Some(Reverse((until, peer))) = state.expiries.pop() {
            if state.blocked_until.get(&peer) == Some(&until) {
                state.blocked_until.remove(&peer);
                return;
            }
        }
    }
}

/// The IPv6 prefix of `bits` an IPv6 peer lies in, as a number; none for an IPv4 peer or
/// one named by its overlay.
fn ipv6_prefix(peer: PeerId, bits: u32) -> Option<u128> {
    match peer.ip()? {
        IpAddr::V4(_) => None,
        IpAddr::V6(v6) => {
            // Validation keeps `bits` in 16..=64; the clamp keeps a bad value from panicking.
            let bits = bits.min(IPV6_PEER_PREFIX_BITS);
            Some(u128::from(v6) & u128::MAX.checked_shl(128 - bits).unwrap_or(0))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use super::PeerLedger;
    use crate::action::FullCause;
    use crate::config::ProtocolConfig;
    use crate::ids::PeerId;
    use crate::time::Millis;

    fn peer(last: u8) -> PeerId {
        PeerId::of(IpAddr::V4(Ipv4Addr::new(10, 0, 0, last)))
    }

    #[test]
    fn prejoin_connections_are_capped_per_peer() {
        let ledger = PeerLedger::new(&ProtocolConfig {
            prejoin_connections_per_peer_max: 2,
            ..ProtocolConfig::default()
        });
        assert!(ledger.try_enter_prejoin(peer(1)));
        assert!(ledger.try_enter_prejoin(peer(1)));
        assert!(!ledger.try_enter_prejoin(peer(1)));
        assert!(ledger.try_enter_prejoin(peer(2)));
        ledger.leave_prejoin(peer(1));
        assert!(ledger.try_enter_prejoin(peer(1)));
        assert_eq!(ledger.snapshot().prejoin_connections, 3);
    }

    #[test]
    fn missed_join_deadlines_blocklist_at_the_threshold() {
        let ledger = PeerLedger::new(&ProtocolConfig {
            join_timeouts_per_peer_max: 3,
            blocklist_join_timeout_ms: 1_000,
            ..ProtocolConfig::default()
        });
        assert_eq!(ledger.note_join_timeout(peer(1), Millis(0)), None);
        assert_eq!(ledger.note_join_timeout(peer(1), Millis(10)), None);
        assert_eq!(ledger.note_join_timeout(peer(2), Millis(10)), None);
        assert_eq!(
            ledger.note_join_timeout(peer(1), Millis(20)),
            Some(Millis(1_020))
        );
        assert!(ledger.is_blocked(peer(1), Millis(21)));
        assert!(!ledger.is_blocked(peer(2), Millis(21)));
        // Strikes older than the window are forgotten.
        assert_eq!(ledger.note_join_timeout(peer(2), Millis(2_000)), None);
        assert_eq!(ledger.note_join_timeout(peer(2), Millis(2_001)), None);
        assert_eq!(ledger.snapshot().peers_with_join_timeouts, 1);
    }

    #[test]
    fn the_strike_table_is_bounded() {
        let ledger = PeerLedger::new(&ProtocolConfig {
            blocklist_entries_max: 2,
            join_timeouts_per_peer_max: 2,
            ..ProtocolConfig::default()
        });
        for last in 1..=5 {
            assert_eq!(ledger.note_join_timeout(peer(last), Millis(0)), None);
        }
        assert_eq!(ledger.snapshot().peers_with_join_timeouts, 2);
        // The oldest were forgotten: peer 1 starts over, peer 5 reaches the threshold.
        assert_eq!(ledger.note_join_timeout(peer(1), Millis(1)), None);
        assert!(ledger.note_join_timeout(peer(5), Millis(1)).is_some());
    }

    #[test]
    fn superseded_blocklist_expiries_are_swept() {
        let ledger = PeerLedger::new(&ProtocolConfig::default());
        for until in 1..=1_000 {
            ledger.block(peer(1), Millis(0), Millis(until));
        }
        let state = ledger.state();
        assert_eq!(state.blocked_until.len(), 1);
        assert!(state.expiries.len() <= 2 + super::EXPIRIES_SLACK + 1);
    }

    #[test]
    fn cohort_slots_are_bounded_broker_wide() {
        let ledger = PeerLedger::new(&ProtocolConfig {
            cohorts_max: 2,
            ..ProtocolConfig::default()
        });
        assert!(ledger.try_open_cohort());
        assert!(ledger.try_open_cohort());
        assert!(!ledger.try_open_cohort());
        ledger.close_cohort();
        assert!(ledger.try_open_cohort());
        assert_eq!(ledger.snapshot().cohorts_live, 2);
    }

    #[test]
    fn peer_cohorts_are_bounded_and_forgotten_at_zero() {
        let ledger = PeerLedger::new(&ProtocolConfig {
            cohorts_per_peer_max: 2,
            ..ProtocolConfig::default()
        });
        assert_eq!(ledger.try_enter_cohort(peer(1)), Ok(()));
        assert_eq!(ledger.try_enter_cohort(peer(1)), Ok(()));
        assert_eq!(
            ledger.try_enter_cohort(peer(1)),
            Err(FullCause::PeerCohorts)
        );
        assert_eq!(ledger.try_enter_cohort(peer(2)), Ok(()));
        ledger.leave_cohort(peer(1));
        ledger.leave_cohort(peer(1));
        assert_eq!(ledger.cohorts_of(peer(1)), 0);
        assert_eq!(ledger.snapshot().peers_attached, 1);
    }

    fn v6_peer(text: &str) -> PeerId {
        PeerId::of(text.parse().expect("literal address"))
    }

    #[test]
    fn ipv6_prefixes_are_bounded_and_regrouped_on_reload() {
        let config = ProtocolConfig {
            cohorts_per_ipv6_prefix_max: 2,
            ..ProtocolConfig::default()
        };
        let ledger = PeerLedger::new(&config);
        assert_eq!(ledger.try_enter_cohort(v6_peer("2001:db8:1:1::1")), Ok(()));
        assert_eq!(ledger.try_enter_cohort(v6_peer("2001:db8:1:2::1")), Ok(()));
        assert_eq!(
            ledger.try_enter_cohort(v6_peer("2001:db8:1:3::1")),
            Err(FullCause::Ipv6PrefixCohorts)
        );
        // A refusal counted nothing; another /48 and IPv4 are not affected.
        assert_eq!(ledger.cohorts_of(v6_peer("2001:db8:1:3::1")), 0);
        assert_eq!(ledger.try_enter_cohort(v6_peer("2001:db8:2:1::1")), Ok(()));
        assert_eq!(ledger.try_enter_cohort(peer(1)), Ok(()));
        ledger.leave_cohort(v6_peer("2001:db8:1:1::1"));
        assert_eq!(ledger.try_enter_cohort(v6_peer("2001:db8:1:3::1")), Ok(()));
        // As /32s, both /48s are one prefix holding three.
        ledger.reconfigure(&ProtocolConfig {
            ipv6_prefix_bits: 32,
            cohorts_per_ipv6_prefix_max: 4,
            ..config
        });
        assert_eq!(ledger.try_enter_cohort(v6_peer("2001:db8:3::1")), Ok(()));
        assert_eq!(
            ledger.try_enter_cohort(v6_peer("2001:db8:4::1")),
            Err(FullCause::Ipv6PrefixCohorts)
        );
        for text in [
            "2001:db8:1:2::1",
            "2001:db8:2:1::1",
            "2001:db8:1:3::1",
            "2001:db8:3::1",
        ] {
            ledger.leave_cohort(v6_peer(text));
        }
        ledger.leave_cohort(peer(1));
        assert!(ledger.state().prefix_cohorts.is_empty());
    }

    #[test]
    fn blocklist_expires_and_keeps_the_longer_entry() {
        let ledger = PeerLedger::new(&ProtocolConfig::default());
        ledger.block(peer(1), Millis(0), Millis(100));
        ledger.block(peer(1), Millis(0), Millis(50));
        assert!(ledger.is_blocked(peer(1), Millis(99)));
        assert!(!ledger.is_blocked(peer(1), Millis(100)));
        assert_eq!(ledger.snapshot().peers_blocked, 0);
        ledger.block(peer(2), Millis(0), Millis(10));
        ledger.block(peer(2), Millis(0), Millis(30));
        assert!(ledger.is_blocked(peer(2), Millis(20)));
    }

    #[test]
    fn blocklist_is_bounded_by_dropping_the_soonest_expiry() {
        let ledger = PeerLedger::new(&ProtocolConfig {
            blocklist_entries_max: 2,
            ..ProtocolConfig::default()
        });
        ledger.block(peer(1), Millis(0), Millis(300));
        ledger.block(peer(2), Millis(0), Millis(100));
        ledger.block(peer(3), Millis(0), Millis(200));
        assert_eq!(ledger.snapshot().peers_blocked, 2);
        assert!(ledger.is_blocked(peer(1), Millis(1)));
        assert!(!ledger.is_blocked(peer(2), Millis(1)));
        assert!(ledger.is_blocked(peer(3), Millis(1)));
    }

    #[test]
    fn reconfigure_applies_new_bounds_to_new_entries() {
        let ledger = PeerLedger::new(&ProtocolConfig {
            cohorts_max: 1,
            ..ProtocolConfig::default()
        });
        assert!(ledger.try_open_cohort());
        assert!(!ledger.try_open_cohort());
        ledger.block(peer(1), Millis(0), Millis(10));
        ledger.block(peer(2), Millis(0), Millis(20));
        ledger.reconfigure(&ProtocolConfig {
            cohorts_max: 2,
            blocklist_entries_max: 1,
            ..ProtocolConfig::default()
        });
        assert!(ledger.try_open_cohort());
        assert!(!ledger.is_blocked(peer(1), Millis(1)));
        assert!(ledger.is_blocked(peer(2), Millis(1)));
    }

    fn trusting(entries: &[&str], config: ProtocolConfig) -> ProtocolConfig {
        ProtocolConfig {
            trusted_relays: crate::trust::TrustedRelays::parse(entries).expect("valid prefixes"),
            ..config
        }
    }

    #[test]
    fn a_trusted_relay_gets_the_raised_cohort_bound_and_its_neighbours_do_not() {
        let ledger = PeerLedger::new(&trusting(
            &["10.0.0.1/32"],
            ProtocolConfig {
                cohorts_per_peer_max: 2,
                trusted_relay_cohorts_max: 5,
                ..ProtocolConfig::default()
            },
        ));
        for _ in 0..5 {
            assert_eq!(ledger.try_enter_cohort(peer(1)), Ok(()));
        }
        assert_eq!(
            ledger.try_enter_cohort(peer(1)),
            Err(FullCause::PeerCohorts),
            "refused at the raised bound, with R32's cause"
        );
        assert_eq!(ledger.cohorts_of(peer(1)), 5);
        assert_eq!(ledger.try_enter_cohort(peer(2)), Ok(()));
        assert_eq!(ledger.try_enter_cohort(peer(2)), Ok(()));
        assert_eq!(
            ledger.try_enter_cohort(peer(2)),
            Err(FullCause::PeerCohorts)
        );
        let snapshot = ledger.snapshot();
        assert_eq!(snapshot.trusted_relays_attached, 1);
        assert_eq!(snapshot.trusted_relay_cohorts, 5);
        assert_eq!(snapshot.peers_attached, 2);
    }

    #[test]
    fn a_trusted_bound_below_the_usual_one_does_not_lower_it() {
        let ledger = PeerLedger::new(&trusting(
            &["10.0.0.0/24"],
            ProtocolConfig {
                cohorts_per_peer_max: 3,
                trusted_relay_cohorts_max: 1,
                streams_per_peer_per_cohort_max: 4,
                trusted_relay_streams_per_cohort_max: 1,
                ..ProtocolConfig::default()
            },
        ));
        for _ in 0..3 {
            assert_eq!(ledger.try_enter_cohort(peer(1)), Ok(()));
        }
        assert_eq!(ledger.streams_per_peer_per_cohort_max(peer(1)), 4);
    }

    #[test]
    fn a_trusted_ipv6_relay_is_outside_its_prefix_bound() {
        let ledger = PeerLedger::new(&trusting(
            &["2001:db8:1:1::10"],
            ProtocolConfig {
                cohorts_per_ipv6_prefix_max: 2,
                trusted_relay_cohorts_max: 8,
                ..ProtocolConfig::default()
            },
        ));
        // Another address of the edge's /64 is the same peer.
        for _ in 0..8 {
            assert_eq!(ledger.try_enter_cohort(v6_peer("2001:db8:1:1::99")), Ok(()));
        }
        // The neighbours in the edge's /48 still have their whole prefix bound, and only it.
        assert_eq!(ledger.try_enter_cohort(v6_peer("2001:db8:1:2::1")), Ok(()));
        assert_eq!(ledger.try_enter_cohort(v6_peer("2001:db8:1:3::1")), Ok(()));
        assert_eq!(
            ledger.try_enter_cohort(v6_peer("2001:db8:1:4::1")),
            Err(FullCause::Ipv6PrefixCohorts)
        );
        ledger.leave_cohort(v6_peer("2001:db8:1:1::10"));
        assert_eq!(ledger.state().prefix_cohorts.values().sum::<usize>(), 2);
    }

    #[test]
    fn a_trusted_relay_is_never_blocklisted() {
        let ledger = PeerLedger::new(&trusting(
            &["10.0.0.1"],
            ProtocolConfig {
                join_timeouts_per_peer_max: 1,
                ..ProtocolConfig::default()
            },
        ));
        assert!(!ledger.block(peer(1), Millis(0), Millis(100)));
        assert!(!ledger.is_blocked(peer(1), Millis(1)));
        assert_eq!(ledger.note_join_timeout(peer(1), Millis(2)), None);
        assert!(!ledger.is_blocked(peer(1), Millis(3)));
        assert_eq!(ledger.snapshot().blocklistings_waived, 2);
        assert_eq!(ledger.snapshot().peers_with_join_timeouts, 0);
        // Its untrusted neighbour is blocklisted at its first miss.
        assert!(ledger.note_join_timeout(peer(2), Millis(2)).is_some());
        assert!(ledger.is_blocked(peer(2), Millis(3)));
    }

    #[test]
    fn a_trusted_relay_may_hold_more_connections_before_its_join() {
        let ledger = PeerLedger::new(&trusting(
            &["10.0.0.1"],
            ProtocolConfig {
                prejoin_connections_per_peer_max: 1,
                trusted_relay_prejoin_connections_max: 3,
                ..ProtocolConfig::default()
            },
        ));
        for _ in 0..3 {
            assert!(ledger.try_enter_prejoin(peer(1)));
        }
        assert!(!ledger.try_enter_prejoin(peer(1)));
        assert!(ledger.try_enter_prejoin(peer(2)));
        assert!(!ledger.try_enter_prejoin(peer(2)));
    }

    #[test]
    fn reload_of_the_trusted_list_regroups_and_lifts_blocklisting() {
        let config = ProtocolConfig {
            cohorts_per_ipv6_prefix_max: 4,
            ..ProtocolConfig::default()
        };
        let ledger = PeerLedger::new(&config);
        let edge = v6_peer("2001:db8:1:1::10");
        assert_eq!(ledger.try_enter_cohort(edge), Ok(()));
        assert_eq!(ledger.try_enter_cohort(edge), Ok(()));
        assert!(ledger.block(edge, Millis(0), Millis(1_000)));
        ledger.reconfigure(&trusting(&["2001:db8:1:1::/64"], config.clone()));
        assert!(ledger.is_trusted(edge));
        assert!(!ledger.is_blocked(edge, Millis(1)));
        assert!(ledger.state().prefix_cohorts.is_empty());
        ledger.leave_cohort(edge);
        // Untrusted again: its remaining cohort counts into its prefix, and leaves it.
        ledger.reconfigure(&config);
        assert_eq!(ledger.state().prefix_cohorts.values().sum::<usize>(), 1);
        ledger.leave_cohort(edge);
        assert!(ledger.state().prefix_cohorts.is_empty());
    }
}
