//! Rosters and revocation (R19..R24): an accepted ROSTER replaces the cohort's roster,
//! goes to the fan-out set, revokes the streams of the addresses it dropped and grants the
//! ones it added.
//!
//! Owns: R19 (replacing the roster), R22 (the roster first, at once to named pending and
//! silent streams), R23 (granting), R24 (revoking: the reduced roster with a write notice,
//! the grace, the role R8/R9 give the address) and D11's forgetting of revoked publishers.
//! Never does: check a ROSTER frame (that is `frame` and `validation`) or time the grace
//! (the stream's `Revocation` does, from `on_written`).

use std::sync::Arc;

use bps_proto::{Address, Authorship};
use bps_verify::Verified;
use bytes::Bytes;

use super::Machine;
use super::deadline::{clear_claim_deadline, set_claim_deadline};
use crate::action::{ChunkFacts, CloseReason};
use crate::cohort::Cohort;
use crate::counters::Counter;
use crate::fanout::Targets;
use crate::ids::{CohortSerial, StreamId, WriteNotice};
use crate::stream::{Checked, Revocation, Role};
use crate::time::Millis;

impl Machine {
    /// R19: a verified ROSTER of the admin replaces the cohort's roster and goes to the
    /// fan-out set; under explicit authorship it revokes the addresses it dropped (R24) and
    /// grants the ones it added (R23).
    pub(super) fn accept_roster(
        &mut self,
        now: Millis,
        serial: CohortSerial,
        frame: &Checked,
        entries: &[Address],
        verified: &Verified,
    ) {
        let index = frame.index;
        let framed = frame.frame.bytes().clone();
        let cohort = self.cohorts.live_mut(serial);
        let admin = cohort
            .spec
            .admin
            .expect("ROSTER is accepted only where there is an admin");
        let change = cohort
            .roster
            .replace(index, entries, &admin, framed.clone());
        cohort.last_activity = now;
        self.out.count(&cohort.counters, Counter::AcceptedRoster);
        // Under ALL the roster grants nothing, so nothing is revoked or granted by it.
        let explicit = cohort.authorship() == Authorship::Explicit;
        let mut revoked: Vec<StreamId> = Vec::new();
        if explicit {
            for addr in &change.removed {
                revoked.extend(cohort.streams_by_addr.get(addr).into_iter().flatten());
            }
            revoked.sort_unstable();
            // D11: a late joiner would reject their frames against this roster (R41).
            cohort.forget_publishers(&change.removed);
        }
        // The fan-out set gets it as a delivery; revoked streams get it on their own, with a
        // notice, below.
        let targets = roster_targets(cohort, &admin, &revoked);
        self.out.deliver(
            &cohort.counters,
            framed.clone(),
            targets,
            Arc::new(ChunkFacts::from(verified)),
        );
        for stream_id in revoked {
            self.revoke(now, serial, stream_id, &framed);
        }
        if explicit {
            self.grant(now, serial, &change.added, &framed);
        }
    }

    /// R22, R23: pending and silent streams named by the new roster get it at once; newly
    /// named streams lose any revocation, and newly named silent streams get a fresh claim
    /// deadline (they could not claim before).
    pub(super) fn grant(
        &mut self,
        now: Millis,
        serial: CohortSerial,
        added: &[Address],
        framed: &Bytes,
    ) {
        let cohort = self.cohorts.live(serial);
        let claim_deadline = now.plus_ms(self.config.claim_deadline_ms);
        for addr in &cohort.roster.ordered {
            let newly_named = added.contains(addr);
            for stream_id in cohort.streams_by_addr.get(addr).into_iter().flatten() {
                let stream = self.streams.attached_mut(*stream_id);
                if newly_named {
                    stream.revocation = None;
                    if stream.role == Role::Silent {
                        set_claim_deadline(&mut self.deadlines, *stream_id, stream, claim_deadline);
                    }
                }
                if matches!(stream.role, Role::Pending | Role::Silent) {
                    stream.roster_seen = cohort.roster.version;
                    self.out
                        .send_broadcast(&cohort.counters, *stream_id, framed.clone(), None);
                }
            }
        }
    }

    /// R24: the stream's addr left the roster. It gets the reduced roster with a notice, its
    /// frames are dropped until that is written plus the grace, and it takes the role R8/R9
    /// give its addr.
    pub(super) fn revoke(
        &mut self,
        now: Millis,
        serial: CohortSerial,
        stream_id: StreamId,
        framed: &Bytes,
    ) {
        if !self.end_exemption(serial, stream_id, framed) {
            return;
        }
        let (stream, cohort) = self.streams.with_cohort(&mut self.cohorts, stream_id);
        let role = cohort.audience_role();
        let was_receiving = cohort.fanout.contains(stream_id);
        if stream.role != role {
            cohort.change_role(stream_id, stream, role);
            self.unsettled.push(serial);
        }
        let receiving = cohort.fanout.contains(stream_id);
        if was_receiving
            && !receiving
            && let Some(ring) = cohort.history.as_ref()
        {
            // D11: it had everything live so far; a later entry continues from here.
            stream.history_seen = ring.last_sequence();
        }
        let notice = WriteNotice(self.next_notice);
        self.next_notice += 1;
        stream.revocation = Some(Revocation {
            notice,
            written_at: None,
        });
        stream.roster_seen = cohort.roster.version;
        clear_claim_deadline(stream);
        if role == Role::Silent {
            set_claim_deadline(
                &mut self.deadlines,
                stream_id,
                stream,
                now.plus_ms(self.config.claim_deadline_ms),
            );
        }
        self.out
            .send_broadcast(&cohort.counters, stream_id, framed.clone(), Some(notice));
        // D11: a pending stream that became a spectator entered the fan-out set; the reduced
        // roster is its roster-first delivery (R22), the history follows it.
        if !was_receiving && receiving {
            self.out.backlog(cohort, stream_id, stream);
        }
    }

    /// R30 for a revoked stream that was exempt as pending: it counts from now on, or, with
    /// no room left for it as a reader, leaves after its reduced roster. Returns whether it
    /// stays.
    fn end_exemption(&mut self, serial: CohortSerial, stream_id: StreamId, framed: &Bytes) -> bool {
        let stream = self.streams.attached_mut(stream_id);
        if !stream.exempt {
            return true;
        }
        let cohort = self.cohorts.live_mut(serial);
        if cohort.counted >= self.config.streams_per_cohort_max {
            self.out
                .send_broadcast(&cohort.counters, stream_id, framed.clone(), None);
            self.close_stream(stream_id, Some(CloseReason::RevokedWithoutRoom));
            return false;
        }
        cohort.stop_exemption(stream);
        true
    }
}

/// The fan-out set of a new roster without the admin's streams (R25) and without the
/// revoked streams, which get it on their own with a write notice (R24).
fn roster_targets(cohort: &mut Cohort, admin: &Address, revoked: &[StreamId]) -> Targets {
    let mut targets = cohort.fanout.targets(admin);
    if revoked.iter().any(|id| cohort.fanout.contains(*id)) {
        let mut except: Vec<StreamId> = targets.except.to_vec();
        except.extend(revoked.iter().filter(|id| cohort.fanout.contains(**id)));
        except.sort_unstable();
        except.dedup();
        targets.except = except.into();
    }
    targets
}
