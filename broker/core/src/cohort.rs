//! One live cohort: the spec it was created for and everything the machine keeps for it.
//!
//! Owns: `Cohort`: its membership (all streams, the fan-out set, streams per address,
//! publisher streams per address in claim order for R29, streams per peer for R33, the R30
//! count and the pending count), its cursors (R27) or dedup window (R28), its roster, its
//! history ring when its spec has `history` (D11), its activity time (R34), since when its
//! fan-out set has been empty (R31) and its counters.
//! Never does: decide roles or emit actions (the machine does); it keeps the bookkeeping of
//! a role change consistent so the bounds and gauges cannot drift.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use bps_proto::{Address, Authorship, CohortKey, RelayId, Spec};

use super::action::Delivered;
use super::config::ProtocolConfig;
use super::counters::CohortCounters;
use super::cursor::CursorTable;
use super::dedup::DedupWindow;
use super::fanout::FanOut;
use super::history::HistoryRing;
use super::ids::{CohortSerial, PeerId, StreamId};
use super::roster::RosterState;
use super::stream::{Role, Stream};
use super::time::Millis;

#[derive(Debug)]
pub(crate) struct Cohort {
    /// Unique per machine for its lifetime (a reclaimed key gets a new serial, R37).
    pub serial: CohortSerial,
    pub key: CohortKey,
    pub spec: Spec,
    pub created: Millis,
    /// The last accepted publisher frame, or the creation (R34).
    pub last_activity: Millis,
    /// The time of this cohort's queued inactivity timer, if one is queued.
    pub inactivity_timer: Option<Millis>,
    /// Since when its fan-out set has been empty (only pending or silent streams), as last
    /// settled by the machine; `None` while anyone receives (R31's idle reclaim).
    pub idle_since: Option<Millis>,
    /// The time of this cohort's queued idle timer, if one is queued.
    pub idle_timer: Option<Millis>,
    /// Edge mode: the end of the linger of a cohort with no stream, while one is queued.
    pub linger_timer: Option<Millis>,
    /// Edge mode: the upstream stream, while the I/O layer has one attached.
    pub upstream: Option<StreamId>,
    /// Edge mode: the relay id of the edge that stream reached, when it named itself.
    pub upstream_root: Option<RelayId>,
    pub members: BTreeSet<StreamId>,
    pub fanout: FanOut,
    pub streams_by_addr: HashMap<Address, Vec<StreamId>>,
    /// Publisher streams per address, oldest claim first (R29).
    pub publishers_by_addr: HashMap<Address, VecDeque<StreamId>>,
    pub streams_by_peer: HashMap<PeerId, usize>,
    /// Of `streams_by_peer`, the anonymous sessions (W11), which R33 does not count.
    pub anonymous_by_peer: HashMap<PeerId, usize>,
    /// The sum of `anonymous_by_peer`: the R30 slots anonymous sessions hold (W11).
    pub anonymous: usize,
    /// Streams counted against R30 (all but those that joined pending).
    pub counted: usize,
    /// Streams currently pending.
    pub pending: usize,
    pub cursors: CursorTable,
    /// Present under implicit authorship only.
    pub dedup: Option<DedupWindow>,
    pub roster: RosterState,
    /// Present when the spec has `history` (D11).
    pub history: Option<HistoryRing>,
    pub counters: Arc<CohortCounters>,
}

impl Cohort {
    pub fn new(
        serial: CohortSerial,
        key: CohortKey,
        spec: Spec,
        now: Millis,
        config: &ProtocolConfig,
    ) -> Self {
        let dedup = (spec.authorship() == Authorship::Implicit)
            .then(|| DedupWindow::new(config.dedup_window_entries));
        let history = spec
            .history
            .then(|| HistoryRing::new(config.history_frames_max, config.history_bytes_max));
        Cohort {
            serial,
            counters: Arc::new(CohortCounters::new(&key, &spec)),
            key,
            spec,
            created: now,
            last_activity: now,
            inactivity_timer: None,
            idle_since: None,
            idle_timer: None,
            linger_timer: None,
            upstream: None,
            upstream_root: None,
            members: BTreeSet::new(),
            fanout: FanOut::default(),
            streams_by_addr: HashMap::new(),
            publishers_by_addr: HashMap::new(),
            streams_by_peer: HashMap::new(),
            anonymous_by_peer: HashMap::new(),
            anonymous: 0,
            counted: 0,
            pending: 0,
            cursors: CursorTable::new(config.cursors_per_cohort_max),
            dedup,
            roster: RosterState::default(),
            history,
        }
    }

    /// D11: retains an accepted DATA frame published under `publisher` (history cohorts only).
    pub fn retain(&mut self, publisher: Address, delivered: Delivered) {
        if let Some(ring) = self.history.as_mut() {
            ring.push(publisher, delivered);
            self.counters.set_history(ring.len(), ring.bytes());
        }
    }

    /// D11: drops the retained frames of addresses a roster revoked (R24).
    pub fn forget_publishers(&mut self, revoked: &[Address]) {
        if let Some(ring) = self.history.as_mut() {
            for publisher in revoked {
                ring.remove_publisher(publisher);
            }
            self.counters.set_history(ring.len(), ring.bytes());
        }
    }

    /// D11: applies reloaded ring bounds to this cohort's ring.
    pub fn bound_history(&mut self, config: &ProtocolConfig) {
        if let Some(ring) = self.history.as_mut() {
            ring.set_bounds(config.history_frames_max, config.history_bytes_max);
            self.counters.set_history(ring.len(), ring.bytes());
        }
    }

    pub fn authorship(&self) -> Authorship {
        self.spec.authorship()
    }

    pub fn is_admin(&self, addr: &Address) -> bool {
        self.spec.admin.as_ref() == Some(addr)
    }

    /// The role a new stream declaring `addr` gets (R6, R8, R9, R10, R11).
    pub fn initial_role(&self, addr: &Address) -> Role {
        match self.authorship() {
            Authorship::Implicit | Authorship::All => Role::Publisher,
            Authorship::Explicit if self.is_admin(addr) || self.roster.names(addr) => Role::Pending,
            Authorship::Explicit if self.spec.closed => Role::Silent,
            Authorship::Explicit => Role::Spectator,
        }
    }

    /// The role R8/R9 give an address that is neither the admin's nor rostered.
    pub fn audience_role(&self) -> Role {
        if self.spec.closed {
            Role::Silent
        } else {
            Role::Spectator
        }
    }

    /// Streams `peer` holds here.
    pub fn streams_of_peer(&self, peer: PeerId) -> usize {
        self.streams_by_peer.get(&peer).copied().unwrap_or(0)
    }

    /// Anonymous sessions `peer` holds here.
    pub fn anonymous_of_peer(&self, peer: PeerId) -> usize {
        self.anonymous_by_peer.get(&peer).copied().unwrap_or(0)
    }

    /// Adds a stream in its initial role. Returns true when it is its peer's first here.
    pub fn attach(&mut self, id: StreamId, stream: &Stream) -> bool {
        assert_eq!(
            stream.cohort, self.serial,
            "stream attached to another cohort"
        );
        assert!(self.members.insert(id), "stream {id} attached twice");
        self.streams_by_addr
            .entry(stream.addr)
            .or_default()
            .push(id);
        let peer_streams = self.streams_by_peer.entry(stream.peer).or_insert(0);
        *peer_streams += 1;
        let first_of_peer = *peer_streams == 1;
        if stream.anonymous {
            *self.anonymous_by_peer.entry(stream.peer).or_insert(0) += 1;
            self.anonymous += 1;
        }
        if !stream.exempt {
            self.counted += 1;
        }
        self.enter_role(id, &stream.addr, stream.role);
        first_of_peer
    }

    /// Removes a stream. Returns true when it was its peer's last here.
    pub fn detach(&mut self, id: StreamId, stream: &Stream) -> bool {
        assert!(
            self.members.remove(&id),
            "stream {id} detached but not attached"
        );
        self.leave_role(id, &stream.addr, stream.role);
        if !stream.exempt {
            self.counted -= 1;
        }
        let same_addr = self
            .streams_by_addr
            .get_mut(&stream.addr)
            .expect("streams of the address");
        same_addr.retain(|other| *other != id);
        if same_addr.is_empty() {
            self.streams_by_addr.remove(&stream.addr);
        }
        if stream.anonymous {
            let anonymous = self
                .anonymous_by_peer
                .get_mut(&stream.peer)
                .expect("anonymous sessions of the peer");
            *anonymous -= 1;
            if *anonymous == 0 {
                self.anonymous_by_peer.remove(&stream.peer);
            }
            self.anonymous -= 1;
        }
        let peer_streams = self
            .streams_by_peer
            .get_mut(&stream.peer)
            .expect("streams of the peer");
        *peer_streams -= 1;
        if *peer_streams == 0 {
            self.streams_by_peer.remove(&stream.peer);
            return true;
        }
        false
    }

    /// Moves an attached stream to `role`, keeping fan-out, publisher lists and gauges in step.
    pub fn change_role(&mut self, id: StreamId, stream: &mut Stream, role: Role) {
        self.leave_role(id, &stream.addr, stream.role);
        stream.role = role;
        self.enter_role(id, &stream.addr, role);
    }

    /// Counts an exempt stream against R30 from now on.
    pub fn stop_exemption(&mut self, stream: &mut Stream) {
        assert!(stream.exempt, "stream is not exempt");
        stream.exempt = false;
        self.counted += 1;
    }

    fn enter_role(&mut self, id: StreamId, addr: &Address, role: Role) {
        self.counters.enter_role(role);
        match role {
            Role::Pending => self.pending += 1,
            Role::Publisher => {
                self.fanout.insert(id, *addr);
                self.publishers_by_addr
                    .entry(*addr)
                    .or_default()
                    .push_back(id);
            }
            Role::Spectator => self.fanout.insert(id, *addr),
            Role::Silent => {}
        }
    }

    fn leave_role(&mut self, id: StreamId, addr: &Address, role: Role) {
        self.counters.leave_role(role);
        match role {
            Role::Pending => self.pending -= 1,
            Role::Publisher => {
                self.fanout.remove(id);
                let publishers = self
                    .publishers_by_addr
                    .get_mut(addr)
                    .expect("publisher streams of the address");
                publishers.retain(|other| *other != id);
                if publishers.is_empty() {
                    self.publishers_by_addr.remove(addr);
                }
            }
            Role::Spectator => self.fanout.remove(id),
            Role::Silent => {}
        }
    }
}
