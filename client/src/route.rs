//! Which broker a run connects to: the brokers of `--target`, ranked for the run's cohort by
//! placement ([`bps_proto::placement`], docs/SCALING.md "Placement"), and the one it is on.
//!
//! Owns: [`parse_targets`] (the comma-separated list of `--target`), [`Route`] (the ranked
//! list and the current position: the root first, then after each failed connect or lost
//! stream the next in rank, wrapping around). One target is a route of one, which is where
//! every retry goes, exactly as before lists.
//!
//! Never: connects or waits; the terminal client's loops do, with their backoff.

use bps_proto::{PlacementError, Spec, broker_name, placement};

/// The brokers of a `--target` value: its comma-separated entries, each trimmed as a
/// placement name is ([`broker_name`]). One target without a comma is a list of one.
pub fn parse_targets(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(|entry| broker_name(entry).to_owned())
        .collect()
}

/// A run's brokers in rank order for its cohort, and the one it uses now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    ranked: Vec<String>,
    current: usize,
}

impl Route {
    /// The route of `spec`'s cohort over `targets`, starting at its root; an empty list,
    /// an empty entry or one given twice is an error.
    pub fn new(targets: &[String], spec: &Spec) -> Result<Self, PlacementError> {
        let ranked = placement::rank(targets, &spec.key())?
            .into_iter()
            .map(|position| broker_name(&targets[position]).to_owned())
            .collect();
        Ok(Self { ranked, current: 0 })
    }

    /// The broker to connect to now.
    pub fn current(&self) -> &str {
        &self.ranked[self.current]
    }

    /// Moves to the next broker in rank, after the last back to the root; returns it.
    pub fn advance(&mut self) -> &str {
        self.current = (self.current + 1) % self.ranked.len();
        self.current()
    }

    /// Every broker, root first.
    pub fn ranked(&self) -> &[String] {
        &self.ranked
    }

    /// More than one broker to fail over between.
    pub fn fails_over(&self) -> bool {
        self.ranked.len() > 1
    }
}

#[cfg(test)]
mod tests {
    use bps_proto::{Binding, rank};

    use super::*;

    fn spec() -> Spec {
        Spec {
            topic: [0x42; 32],
            binding: Binding::Mnemonic,
            admin: None,
            all: false,
            history: false,
            closed: false,
        }
    }

    #[test]
    fn a_single_target_is_a_route_of_one_that_stays_put() {
        assert_eq!(parse_targets("127.0.0.1:1637"), ["127.0.0.1:1637"]);
        assert_eq!(
            parse_targets("ws://b:1639/bps/v1"),
            ["ws://b:1639/bps/v1"],
            "a URL is one target"
        );
        let peer = "QmXsDEewFMvFiKTonkRG2Sy2AeH6eFt2eZqdNq3ddP8Kpp";
        let multiaddr = format!("/ip4/127.0.0.1/tcp/1634/p2p/{peer}");
        assert_eq!(
            parse_targets(&format!(" {multiaddr} ,b:1637")),
            [multiaddr.as_str(), "b:1637"],
            "a libp2p multiaddr is one target, ranked beside the others"
        );
        let mut route = Route::new(&parse_targets("127.0.0.1:1637"), &spec()).expect("valid");
        assert!(!route.fails_over());
        assert_eq!(route.current(), "127.0.0.1:1637");
        assert_eq!(route.advance(), "127.0.0.1:1637");
    }

    #[test]
    fn a_list_is_ranked_by_placement_and_wraps_around() {
        let targets = parse_targets("a:1, b:2 ,c:3");
        assert_eq!(targets, ["a:1", "b:2", "c:3"]);
        let order: Vec<&str> = rank(&targets, &spec().key())
            .expect("valid")
            .into_iter()
            .map(|position| targets[position].as_str())
            .collect();
        let mut route = Route::new(&targets, &spec()).expect("valid");
        assert_eq!(route.ranked(), order);
        assert_eq!(route.current(), order[0]);
        assert_eq!(route.advance(), order[1]);
        assert_eq!(route.advance(), order[2]);
        assert_eq!(route.advance(), order[0], "wraps around to the root");
    }

    #[test]
    fn a_bad_list_is_an_error() {
        for bad in ["a:1,,b:2", "a:1,a:1", ""] {
            assert!(Route::new(&parse_targets(bad), &spec()).is_err(), "{bad:?}");
        }
    }
}
