//! Join and admission: the first frame of a stream and its answer.
//!
//! Owns: R1..R5 (decoding, validating and answering a Join: OK with a challenge, FULL,
//! REJECTED), the admission bounds R30..R33 and W11's bounds on anonymous sessions, cohort
//! creation (R2, R31, R37), the initial role (R6..R11, W11) and R29 (publisher streams per
//! address), which a Join and a claim both enforce.
//! Never does: check a frame after the Join, or close a stream for anything but R29 (a
//! refused Join is answered and closed here, never attached).

use std::sync::Arc;

use bps_proto::{
    Ack, Address, Frame, Hash, RelayId, Status, ValidJoin, decode_join, encode_frame,
    encode_relayed_ack, validate_join,
};
use bytes::Bytes;
use rand::RngCore;

use super::Machine;
use super::deadline::set_claim_deadline;
use crate::action::{Action, CloseReason, FullCause, RejectCause};
use crate::arrival::Arrival;
use crate::cohort::Cohort;
use crate::config::HistoryPolicy;
use crate::counters::Counter;
use crate::deadlines::DeadlineKey;
use crate::ids::{CohortSerial, PeerId, StreamId};
use crate::stream::{DropWindow, Role, Stream};
use crate::time::Millis;

impl Machine {
    pub(super) fn join(&mut self, now: Millis, arrival: Arrival, stream_id: StreamId, join: Frame) {
        let peer = arrival.peer;
        if self.ledger.is_blocked(peer, now) {
            self.out.registry.add_total(Counter::JoinsBlocked, 1);
            self.out.push(Action::Close {
                stream: stream_id,
                reason: CloseReason::Blocklisted,
            });
            return;
        }
        let valid = match self.valid_join(arrival, &join) {
            Ok(valid) => valid,
            Err(cause) => return self.refuse(stream_id, None, CloseReason::Rejected(cause)),
        };
        let path = match self.edge_admission(arrival, &join, &valid) {
            Ok(edge) if edge.splice => {
                let who = (&valid.spec, &valid.addr);
                return self.splice((stream_id, arrival), &valid.key, who, edge.path);
            }
            Ok(edge) => edge.path,
            Err(cause) => return self.refuse(stream_id, None, CloseReason::Rejected(cause)),
        };
        let serial = match self.cohorts.serial_of(&valid.key) {
            Some(serial) => match self.admit(serial, arrival, &valid.addr) {
                Ok(()) => serial,
                Err(cause) => {
                    return self.refuse(stream_id, Some(serial), CloseReason::Full(cause));
                }
            },
            None => match self.create_cohort(now, arrival, &valid) {
                Ok(serial) => {
                    self.want_upstream(serial, path.clone());
                    serial
                }
                Err(cause) => return self.refuse(stream_id, None, CloseReason::Full(cause)),
            },
        };
        self.attach(now, arrival, stream_id, serial, (valid.addr, path));
    }

    /// R3: a Join this broker takes, or why it is REJECTED: undecodable, invalid (R1), with
    /// history where the policy refuses it (D11), or anonymous for a closed cohort (W11).
    fn valid_join(&self, arrival: Arrival, join: &Frame) -> Result<ValidJoin, RejectCause> {
        let decoded = decode_join(join.body()).map_err(|_| RejectCause::Undecodable)?;
        let valid = validate_join(&decoded).map_err(RejectCause::Invalid)?;
        // D11: history is broker policy (R3 lets it refuse), for creating and attaching Joins.
        if valid.spec.history && self.config.history == HistoryPolicy::Refuse {
            return Err(RejectCause::HistoryRefused);
        }
        // W11: an anonymous session is an audience, which a closed cohort does not have.
        if arrival.anonymous && valid.spec.closed {
            return Err(RejectCause::AnonymousInClosed);
        }
        Ok(valid)
    }

    /// The bounds of an existing cohort (R30, R32, R33, W11); on success the peer is
    /// counted in.
    pub(super) fn admit(
        &self,
        serial: CohortSerial,
        arrival: Arrival,
        addr: &Address,
    ) -> Result<(), FullCause> {
        let cohort = self.cohorts.live(serial);
        let peer = arrival.peer;
        let peer_streams = cohort.streams_of_peer(peer);
        // W11: R33 counts a peer's sessions with an addr of their own. The ledger is asked
        // only past the usual bound, for a trusted relay's raised one.
        let named = peer_streams - cohort.anonymous_of_peer(peer);
        if !arrival.anonymous
            && named >= self.config.streams_per_peer_per_cohort_max
            && named >= self.ledger.streams_per_peer_per_cohort_max(peer)
        {
            return Err(FullCause::PeerStreams);
        }
        match initial_role(cohort, arrival, addr) {
            // R30 exempts pending streams; their own guard bounds what they can hold.
            Role::Pending if cohort.pending >= self.config.pending_streams_per_cohort_max => {
                return Err(FullCause::CohortPendingStreams);
            }
            Role::Pending => {}
            Role::Publisher | Role::Spectator | Role::Silent
                if cohort.counted >= self.config.streams_per_cohort_max =>
            {
                return Err(FullCause::CohortStreams);
            }
            Role::Publisher | Role::Spectator | Role::Silent => {}
        }
        if arrival.anonymous {
            self.admit_anonymous(cohort, peer)?;
        }
        if peer_streams == 0 {
            self.ledger.try_enter_cohort(peer)?;
        }
        if arrival.anonymous && !self.ledger.try_enter_anonymous(peer) {
            if peer_streams == 0 {
                self.ledger.leave_cohort(peer);
            }
            return Err(FullCause::PeerAnonymousSessions);
        }
        Ok(())
    }

    /// W11's bounds of a cohort on anonymous sessions: a few peers cannot fill its R30 slots,
    /// and part of them stays for streams with an address.
    pub(super) fn admit_anonymous(&self, cohort: &Cohort, peer: PeerId) -> Result<(), FullCause> {
        if cohort.anonymous_of_peer(peer) >= self.config.spectator_sessions_per_peer_per_cohort_max
        {
            return Err(FullCause::PeerAnonymousSessionsInCohort);
        }
        if cohort.anonymous >= self.config.spectator_slots_per_cohort() {
            return Err(FullCause::CohortAnonymousSessions);
        }
        Ok(())
    }

    /// A new cohort for a Join with no live match (R2, R31, R37); the peer is counted in.
    pub(super) fn create_cohort(
        &mut self,
        now: Millis,
        arrival: Arrival,
        valid: &ValidJoin,
    ) -> Result<CohortSerial, FullCause> {
        let peer = arrival.peer;
        self.ledger.try_enter_cohort(peer)?;
        let room = self.ledger.try_open_cohort()
            || (self.reclaim_oldest_idle(now) && self.ledger.try_open_cohort());
        if !room {
            self.ledger.leave_cohort(peer);
            return Err(FullCause::Cohorts);
        }
        if arrival.anonymous && !self.ledger.try_enter_anonymous(peer) {
            self.ledger.close_cohort();
            self.ledger.leave_cohort(peer);
            return Err(FullCause::PeerAnonymousSessions);
        }
        let serial = self.cohorts.issue_serial();
        let mut cohort = Cohort::new(serial, valid.key.clone(), valid.spec, now, &self.config);
        self.out
            .registry
            .register(serial.get(), Arc::clone(&cohort.counters));
        self.out.count(&cohort.counters, Counter::CohortsCreated);
        let deadline = now.plus_ms(self.config.inactivity_deadline_ms);
        cohort.inactivity_timer = Some(deadline);
        self.deadlines
            .push(deadline, DeadlineKey::Inactivity(serial));
        self.cohorts.insert(cohort);
        Ok(serial)
    }

    /// Answers FULL or REJECTED and ends the stream (R5).
    pub(super) fn refuse(
        &mut self,
        stream: StreamId,
        serial: Option<CohortSerial>,
        reason: CloseReason,
    ) {
        let (status, counter) = match reason {
            CloseReason::Full(_) => (Status::Full, Counter::JoinsFull),
            _ => (Status::Rejected, Counter::JoinsRejected),
        };
        match serial {
            Some(serial) => {
                let counters = Arc::clone(&self.cohorts.live(serial).counters);
                self.out.count(&counters, counter);
            }
            None => self.out.registry.add_total(counter, 1),
        }
        let ack = encode_frame(&Ack {
            status: status as i32,
            challenge: Bytes::new(),
        });
        self.out.push(Action::Send {
            stream,
            frame: ack,
            notice: None,
        });
        self.out.push(Action::Close { stream, reason });
    }

    /// Answers OK with a fresh challenge (R4) and attaches the stream in its initial role,
    /// with the relay path its Join carried (edge mode).
    pub(super) fn attach(
        &mut self,
        now: Millis,
        arrival: Arrival,
        stream_id: StreamId,
        serial: CohortSerial,
        (addr, relay_path): (Address, Vec<RelayId>),
    ) {
        let challenge = self.answer_ok(stream_id, !relay_path.is_empty());
        let cohort = self.cohorts.live_mut(serial);
        let role = initial_role(cohort, arrival, &addr);
        let mut stream = joined_stream(now, arrival, serial, addr, challenge, role);
        stream.relay_path = relay_path;
        cohort.attach(stream_id, &stream);
        self.unsettled.push(serial);
        self.out.count(&cohort.counters, Counter::JoinsOk);
        if matches!(role, Role::Pending | Role::Silent) {
            set_claim_deadline(
                &mut self.deadlines,
                stream_id,
                &mut stream,
                now.plus_ms(self.config.claim_deadline_ms),
            );
        }
        // R22: the latest roster goes first to a stream entering the fan-out set, and at once
        // to a pending or silent stream it names; never to the admin's streams (D5).
        let roster_due = !cohort.is_admin(&addr)
            && match role {
                Role::Spectator | Role::Publisher => true,
                Role::Pending | Role::Silent => cohort.roster.names(&addr),
            };
        if roster_due && let Some(frame) = cohort.roster.latest.clone() {
            stream.roster_seen = cohort.roster.version;
            self.out
                .send_broadcast(&cohort.counters, stream_id, frame, None);
        }
        // D11: a stream entering the fan-out set gets the history after the roster.
        if matches!(role, Role::Spectator | Role::Publisher) {
            self.out.backlog(cohort, stream_id, &mut stream);
        }
        self.streams.insert(stream_id, stream);
        if role == Role::Publisher {
            self.enforce_publisher_streams(serial, &addr);
        }
    }

    /// R4: the OK answer to a Join, with a fresh challenge, which it returns. An edge names
    /// itself in its OK to another edge's Join (`relayed`: it carried a relay path), so that
    /// the edge below can refuse a loop (docs/PROTOCOL.md §10).
    fn answer_ok(&mut self, stream: StreamId, relayed: bool) -> Hash {
        let mut challenge: Hash = [0; 32];
        self.rng.fill_bytes(&mut challenge);
        let ack = Ack {
            status: Status::Ok as i32,
            challenge: Bytes::copy_from_slice(&challenge),
        };
        let ack = match self.config.edge {
            Some(edge) if relayed => encode_relayed_ack(&ack, &edge.relay_id),
            _ => encode_frame(&ack),
        };
        self.out.push(Action::Send {
            stream,
            frame: ack,
            notice: None,
        });
        challenge
    }

    /// R29: an address holds at most `publisher_streams_per_address_max` publisher streams
    /// in a cohort; the oldest claims are reset.
    pub(super) fn enforce_publisher_streams(&mut self, serial: CohortSerial, addr: &Address) {
        loop {
            let cohort = self.cohorts.live(serial);
            let Some(publishers) = cohort.publishers_by_addr.get(addr) else {
                return;
            };
            if publishers.len() <= self.config.publisher_streams_per_address_max {
                return;
            }
            let oldest = publishers[0];
            let counters = Arc::clone(&cohort.counters);
            self.out.count(&counters, Counter::Superseded);
            self.close_stream(oldest, Some(CloseReason::Superseded));
        }
    }
}

/// The role a new stream gets: R6..R11 for a declared addr; an anonymous session is a
/// spectator under every authorship (W11: it receives and never publishes).
fn initial_role(cohort: &Cohort, arrival: Arrival, addr: &Address) -> Role {
    if arrival.anonymous {
        Role::Spectator
    } else {
        cohort.initial_role(addr)
    }
}

/// A stream as its Join attaches it: in its initial role, nothing read, nothing sent yet.
fn joined_stream(
    now: Millis,
    arrival: Arrival,
    serial: CohortSerial,
    addr: Address,
    challenge: Hash,
    role: Role,
) -> Stream {
    Stream {
        peer: arrival.peer,
        anonymous: arrival.anonymous,
        carrier: arrival.carrier,
        cohort: serial,
        addr,
        challenge,
        role,
        exempt: role == Role::Pending,
        proven: false,
        joined_at: now,
        claim_deadline: None,
        claim_timer: None,
        revocation: None,
        roster_seen: 0,
        history_seen: 0,
        in_flight: Default::default(),
        backlog: Default::default(),
        drops: DropWindow::default(),
        relay_path: Vec::new(),
    }
}
