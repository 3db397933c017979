//! D11: history. The ring of accepted DATA a history cohort keeps, the backlog a stream
//! entering its fan-out set gets (after the roster, R22; without its own identity's frames,
//! R25; before live traffic, nothing lost or twice at the seam), the ring's bounds, its end
//! with the cohort, revocation (R24, R41) and the refuse policy (R3).

use std::collections::HashMap;

use bps_proto::{Binding, Spec, Status};
use bps_verify::{VerifyRequest, sign_implicit};
use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::driver::{
    Rig, ack, ack_ok, all, backlog, close, consumed, deliver, explicit, implicit, join_body, key,
    peer, send, send_noticed, sid,
};
use crate::{
    Action, CloseReason, ClosedBy, Counter, HistoryPolicy, ProtocolConfig, RejectCause, StreamId,
    Ticket,
};

fn history(spec: Spec) -> Spec {
    Spec {
        history: true,
        ..spec
    }
}

fn config(edit: impl FnOnce(&mut ProtocolConfig)) -> ProtocolConfig {
    let mut config = ProtocolConfig::default();
    edit(&mut config);
    config
}

/// The ring's gauges in the one live cohort's summary: (frames, bytes).
fn ring(rig: &Rig) -> (usize, usize) {
    let summary = rig.only_cohort();
    (summary.history_frames, summary.history_bytes)
}

fn bytes_of(frames: &[Bytes]) -> usize {
    frames.iter().map(Bytes::len).sum()
}

#[test]
fn d11_the_backlog_comes_after_the_roster_and_before_live_frames() {
    let mut rig = Rig::new();
    let spec = history(explicit(1, &key(1), false));
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    assert_eq!(rig.publish(sid(1), &admin.auth()), vec![consumed(sid(1))]);
    let roster = admin.roster(0, &[key(4).address()]);
    assert_eq!(rig.publish(sid(1), &roster), vec![consumed(sid(1))]);
    let retained: Vec<Bytes> = (0..3)
        .map(|index| admin.data(index, format!("frame {index}").as_bytes()))
        .collect();
    for frame in &retained {
        assert_eq!(rig.publish(sid(1), frame), vec![consumed(sid(1))]);
    }
    assert_eq!(ring(&rig), (3, bytes_of(&retained)));
    // A late spectator: the Ack, the latest roster (R22), the retained frames in order.
    let (late, actions) = rig.join(key(5), &spec, sid(2), peer(2));
    assert_eq!(
        actions,
        vec![
            ack_ok(sid(2), &late.challenge),
            send(sid(2), &roster),
            backlog(sid(2), &retained)
        ]
    );
    // Then live traffic.
    let live = admin.data(3, b"live");
    assert_eq!(
        rig.publish(sid(1), &live),
        vec![consumed(sid(1)), deliver(&live, &[sid(2)])]
    );
    assert_eq!(rig.cohort_count(&spec, Counter::HistoryFramesServed), 3);
    // The roster, the backlog's frames, the live frame.
    assert_eq!(rig.cohort_count(&spec, Counter::Deliveries), 1 + 3 + 1);
    assert_eq!(rig.count(Counter::HistoryFramesServed), 3);
}

#[test]
fn d11_a_cohort_without_history_keeps_nothing() {
    let mut rig = Rig::new();
    let spec = explicit(1, &key(1), false);
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    rig.publish(sid(1), &admin.auth());
    rig.publish(sid(1), &admin.data(0, b"gone"));
    assert_eq!(ring(&rig), (0, 0));
    let (late, actions) = rig.join(key(5), &spec, sid(2), peer(2));
    assert_eq!(actions, vec![ack_ok(sid(2), &late.challenge)]);
}

#[test]
fn d11_an_all_member_gets_the_backlog_at_its_join_without_its_own_frames_r25() {
    let mut rig = Rig::new();
    let spec = history(all(2, &key(1)));
    let first = rig.joined(key(2), &spec, sid(1), peer(1));
    let second = rig.joined(key(3), &spec, sid(2), peer(2));
    let a0 = first.data(0, b"a0");
    let b0 = second.data(0, b"b0");
    let a1 = first.data(1, b"a1");
    assert_eq!(
        rig.publish(sid(1), &a0),
        vec![consumed(sid(1)), deliver(&a0, &[sid(2)])]
    );
    assert_eq!(
        rig.publish(sid(2), &b0),
        vec![consumed(sid(2)), deliver(&b0, &[sid(1)])]
    );
    assert_eq!(
        rig.publish(sid(1), &a1),
        vec![consumed(sid(1)), deliver(&a1, &[sid(2)])]
    );
    // The first member on a second stream: only the other member's frames.
    let (again, actions) = rig.join(key(2), &spec, sid(3), peer(3));
    assert_eq!(
        actions,
        vec![
            ack_ok(sid(3), &again.challenge),
            backlog(sid(3), std::slice::from_ref(&b0))
        ]
    );
    // A newcomer: everything, in acceptance order.
    let (newcomer, actions) = rig.join(key(4), &spec, sid(4), peer(4));
    assert_eq!(
        actions,
        vec![
            ack_ok(sid(4), &newcomer.challenge),
            backlog(sid(4), &[a0.clone(), b0.clone(), a1.clone()])
        ]
    );
    // Under ALL a roster grants nothing, so it removes nothing from the ring.
    let admin = rig.joined(key(1), &spec, sid(5), peer(5));
    let roster = admin.roster(0, &[first.addr]);
    rig.publish(sid(5), &roster);
    rig.publish(sid(5), &admin.roster(1, &[]));
    assert_eq!(ring(&rig), (3, bytes_of(&[a0, b0, a1])));
}

#[test]
fn d11_an_implicit_publisher_gets_the_backlog_at_its_join() {
    let mut rig = Rig::new();
    let spec = history(implicit([3; 32], Binding::Mnemonic));
    rig.joined(key(2), &spec, sid(1), peer(1));
    let frames: Vec<Bytes> = (0..2_u8)
        .map(|n| sign_implicit(&key(2), &[n; 32], None, b"m").frame)
        .collect();
    for frame in &frames {
        assert_eq!(rig.publish(sid(1), frame), vec![consumed(sid(1))]);
    }
    let (other, actions) = rig.join(key(3), &spec, sid(2), peer(2));
    assert_eq!(
        actions,
        vec![ack_ok(sid(2), &other.challenge), backlog(sid(2), &frames)]
    );
    // The publisher's own reconnect gets none of its own frames (R25).
    let (own, actions) = rig.join(key(2), &spec, sid(3), peer(3));
    assert_eq!(actions, vec![ack_ok(sid(3), &own.challenge)]);
}

#[test]
fn d11_a_pending_stream_gets_the_backlog_at_its_claim_after_its_roster() {
    let mut rig = Rig::new();
    let spec = history(explicit(3, &key(1), true));
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    rig.publish(sid(1), &admin.auth());
    let roster = admin.roster(0, &[key(4).address()]);
    assert_eq!(rig.publish(sid(1), &roster), vec![consumed(sid(1))]);
    let a0 = admin.data(0, b"a0");
    assert_eq!(rig.publish(sid(1), &a0), vec![consumed(sid(1))]);
    // Pending: the roster naming it at once, nothing else (R6, R22).
    let (member, actions) = rig.join(key(4), &spec, sid(2), peer(2));
    assert_eq!(
        actions,
        vec![ack_ok(sid(2), &member.challenge), send(sid(2), &roster)]
    );
    let a1 = admin.data(1, b"a1");
    assert_eq!(rig.publish(sid(1), &a1), vec![consumed(sid(1))]);
    // A silent stranger gets nothing (R9).
    let (_, actions) = rig.join(key(9), &spec, sid(3), peer(3));
    assert!(
        !actions
            .iter()
            .any(|action| matches!(action, Action::Backlog { .. })),
        "{actions:?}"
    );
    // The claim enters the fan-out set: it has the roster, so the history comes alone.
    assert_eq!(
        rig.publish(sid(2), &member.auth()),
        vec![consumed(sid(2)), backlog(sid(2), &[a0, a1])]
    );
    let a2 = admin.data(2, b"a2");
    assert_eq!(
        rig.publish(sid(1), &a2),
        vec![consumed(sid(1)), deliver(&a2, &[sid(2)])]
    );
}

#[test]
fn d11_a_stream_that_leaves_the_fanout_and_enters_again_gets_only_what_it_missed() {
    let mut rig = Rig::new();
    let spec = history(explicit(4, &key(1), true));
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    rig.publish(sid(1), &admin.auth());
    let granted = admin.roster(0, &[key(4).address()]);
    rig.publish(sid(1), &granted);
    let member = rig.joined(key(4), &spec, sid(2), peer(2));
    rig.publish(sid(2), &member.auth());
    let a0 = admin.data(0, b"a0");
    assert_eq!(
        rig.publish(sid(1), &a0),
        vec![consumed(sid(1)), deliver(&a0, &[sid(2)])]
    );
    // Revoked in a closed cohort: silent, out of the fan-out set (R24, R9).
    rig.publish(sid(1), &admin.roster(1, &[]));
    assert_eq!(rig.role_of(&spec, sid(2)), Some("silent"));
    let a1 = admin.data(1, b"a1");
    assert_eq!(rig.publish(sid(1), &a1), vec![consumed(sid(1))]);
    // Granted again, it claims on the same stream: only a1 comes, a0 it had live.
    let regranted = admin.roster(2, &[key(4).address()]);
    assert_eq!(
        rig.publish(sid(1), &regranted),
        vec![consumed(sid(1)), send(sid(2), &regranted)]
    );
    assert_eq!(
        rig.publish(sid(2), &member.auth()),
        vec![consumed(sid(2)), backlog(sid(2), &[a1])]
    );
}

#[test]
fn d11_a_revoked_publishers_frames_leave_the_ring_r24_r41() {
    let mut rig = Rig::new();
    let spec = history(explicit(5, &key(1), false));
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    rig.publish(sid(1), &admin.auth());
    rig.publish(sid(1), &admin.roster(0, &[key(4).address()]));
    let member = rig.joined(key(4), &spec, sid(2), peer(2));
    rig.publish(sid(2), &member.auth());
    let p0 = member.data(0, b"p0");
    let a0 = admin.data(0, b"a0");
    let p1 = member.data(1, b"p1");
    for (stream, frame) in [(sid(2), &p0), (sid(1), &a0), (sid(2), &p1)] {
        rig.publish(stream, frame);
    }
    assert_eq!(ring(&rig), (3, bytes_of(&[p0, a0.clone(), p1])));
    let reduced = admin.roster(1, &[]);
    rig.publish(sid(1), &reduced);
    assert_eq!(ring(&rig), (1, a0.len()));
    // A late joiner gets the roster that no longer names the member, and only the admin's.
    let (late, actions) = rig.join(key(6), &spec, sid(3), peer(3));
    assert_eq!(
        actions,
        vec![
            ack_ok(sid(3), &late.challenge),
            send(sid(3), &reduced),
            backlog(sid(3), &[a0])
        ]
    );
}

#[test]
fn d11_a_pending_stream_a_reduced_roster_makes_a_spectator_gets_the_backlog_after_it() {
    let mut rig = Rig::new();
    let spec = history(explicit(6, &key(1), false));
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    rig.publish(sid(1), &admin.auth());
    rig.publish(sid(1), &admin.roster(0, &[key(4).address()]));
    rig.joined(key(4), &spec, sid(2), peer(2));
    let a0 = admin.data(0, b"a0");
    assert_eq!(rig.publish(sid(1), &a0), vec![consumed(sid(1))]);
    let reduced = admin.roster(1, &[]);
    let actions = rig.publish(sid(1), &reduced);
    assert_eq!(rig.role_of(&spec, sid(2)), Some("spectator"));
    // The first notice the machine issues goes with the reduced roster (R24).
    let roster_then_history = [send_noticed(sid(2), &reduced, 0), backlog(sid(2), &[a0])];
    assert!(
        actions
            .windows(2)
            .any(|pair| pair == roster_then_history.as_slice()),
        "{actions:?}"
    );
}

#[test]
fn d11_the_ring_is_bounded_by_frames() {
    let mut rig = Rig::with_config(config(|config| config.history_frames_max = 3));
    let spec = history(explicit(1, &key(1), false));
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    rig.publish(sid(1), &admin.auth());
    let frames: Vec<Bytes> = (0..5).map(|index| admin.data(index, b"frame")).collect();
    for frame in &frames {
        rig.publish(sid(1), frame);
    }
    assert_eq!(ring(&rig), (3, bytes_of(&frames[2..])));
    let (late, actions) = rig.join(key(5), &spec, sid(2), peer(2));
    assert_eq!(
        actions,
        vec![
            ack_ok(sid(2), &late.challenge),
            backlog(sid(2), &frames[2..])
        ]
    );
}

#[test]
fn d11_the_ring_is_bounded_by_bytes_and_always_keeps_the_newest_frame() {
    let bytes_max = 10_000;
    let mut rig = Rig::with_config(config(|config| config.history_bytes_max = bytes_max));
    let spec = history(explicit(1, &key(1), false));
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    rig.publish(sid(1), &admin.auth());
    let frames: Vec<Bytes> = (0..4).map(|index| admin.data(index, &[7; 4_000])).collect();
    for frame in &frames {
        rig.publish(sid(1), frame);
    }
    // Two frames of about 4.1 KB fit in 10 000 bytes, three do not.
    assert!(bytes_of(&frames[2..]) <= bytes_max && bytes_of(&frames[1..]) > bytes_max);
    assert_eq!(ring(&rig), (2, bytes_of(&frames[2..])));
    let (late, actions) = rig.join(key(5), &spec, sid(2), peer(2));
    assert_eq!(
        actions,
        vec![
            ack_ok(sid(2), &late.challenge),
            backlog(sid(2), &frames[2..])
        ]
    );
    // At the least bound allowed (the largest frame read), the newest frame always fits.
    let least = ProtocolConfig::default().largest_frame_bytes();
    rig.machine
        .reconfigure(config(|config| config.history_bytes_max = least));
    let full = admin.data(4, &[9; 4_096]);
    rig.publish(sid(1), &full);
    assert_eq!(ring(&rig), (1, full.len()));
}

#[test]
fn d11_lowered_bounds_apply_to_existing_rings_at_a_reload() {
    let mut rig = Rig::new();
    let spec = history(explicit(1, &key(1), false));
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    rig.publish(sid(1), &admin.auth());
    let frames: Vec<Bytes> = (0..6).map(|index| admin.data(index, b"frame")).collect();
    for frame in &frames {
        rig.publish(sid(1), frame);
    }
    rig.machine
        .reconfigure(config(|config| config.history_frames_max = 2));
    assert_eq!(ring(&rig), (2, bytes_of(&frames[4..])));
}

/// Whether the machine holds no handle on any of `frames` any more.
fn released(frames: &[Bytes]) -> bool {
    frames.iter().all(Bytes::is_unique)
}

/// A history live-stream with `frames` accepted and one spectator (stream 2).
fn retaining_cohort(rig: &mut Rig) -> (super::driver::Client, Vec<Bytes>) {
    let spec = history(explicit(1, &key(1), false));
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    rig.publish(sid(1), &admin.auth());
    rig.joined(key(5), &spec, sid(2), peer(2));
    let frames: Vec<Bytes> = (0..3).map(|index| admin.data(index, b"kept")).collect();
    for frame in &frames {
        rig.publish(sid(1), frame);
    }
    assert!(!released(&frames), "the ring holds the frames");
    (admin, frames)
}

#[test]
fn d11_eos_frees_the_ring() {
    let mut rig = Rig::new();
    let (admin, frames) = retaining_cohort(&mut rig);
    let eos = admin.eos();
    assert_eq!(
        rig.publish(sid(1), &eos),
        vec![
            consumed(sid(1)),
            deliver(&eos, &[sid(2)]),
            close(sid(1), CloseReason::EndOfStream),
            close(sid(2), CloseReason::EndOfStream),
        ]
    );
    assert!(released(&frames));
    assert!(rig.machine.counters().live_cohorts().is_empty());
}

#[test]
fn d11_inactivity_and_the_last_stream_leaving_free_the_ring() {
    let mut rig = Rig::new();
    let (_, frames) = retaining_cohort(&mut rig);
    rig.tick_at(30_000);
    let actions = rig.tick_at(600_000);
    assert!(
        actions.contains(&close(sid(2), CloseReason::Inactive)),
        "{actions:?}"
    );
    assert!(released(&frames));

    let mut rig = Rig::new();
    let (_, frames) = retaining_cohort(&mut rig);
    rig.closed(sid(1), ClosedBy::Peer);
    assert!(
        !released(&frames),
        "the cohort lives while a stream is attached"
    );
    rig.closed(sid(2), ClosedBy::Io);
    assert_eq!(rig.machine.cohort_count(), 0);
    assert!(released(&frames));
}

#[test]
fn d11_refuse_rejects_every_history_join_and_attached_streams_carry_on() {
    let mut rig = Rig::new();
    let spec = history(explicit(8, &key(1), false));
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    rig.publish(sid(1), &admin.auth());
    let roster = admin.roster(0, &[key(4).address()]);
    rig.publish(sid(1), &roster);
    let a0 = admin.data(0, b"a0");
    rig.publish(sid(1), &a0);
    rig.joined(key(5), &spec, sid(2), peer(2));
    let member = rig.joined(key(4), &spec, sid(3), peer(3));

    rig.machine.reconfigure(config(|config| {
        config.history = HistoryPolicy::Refuse;
    }));
    let refused = |stream: StreamId| {
        vec![
            ack(stream, Status::Rejected),
            close(stream, CloseReason::Rejected(RejectCause::HistoryRefused)),
        ]
    };
    // Attaching to the live history cohort, and creating another.
    let attaching = join_body(&spec, &key(6).address());
    assert_eq!(rig.join_raw(peer(6), sid(6), attaching), refused(sid(6)));
    let creating = join_body(&history(explicit(9, &key(1), false)), &key(6).address());
    assert_eq!(rig.join_raw(peer(6), sid(7), creating), refused(sid(7)));
    assert_eq!(rig.count(Counter::JoinsRejected), 2);
    assert_eq!(rig.machine.cohort_count(), 1);
    // A spec without history is not affected.
    rig.joined(key(6), &explicit(9, &key(1), false), sid(8), peer(6));

    // Streams attached before carry on: live frames, and the history at a claim.
    let a1 = admin.data(1, b"a1");
    assert_eq!(
        rig.publish(sid(1), &a1),
        vec![consumed(sid(1)), deliver(&a1, &[sid(2)])]
    );
    assert_eq!(
        rig.publish(sid(3), &member.auth()),
        vec![consumed(sid(3)), backlog(sid(3), &[a0, a1])]
    );

    rig.machine.reconfigure(ProtocolConfig::default());
    rig.joined(key(7), &spec, sid(9), peer(7));
}

/// What each stream received of DATA (backlogs and live deliveries, in action order).
#[derive(Default)]
struct Received {
    frames: HashMap<StreamId, Vec<Bytes>>,
    verifications: Vec<(Ticket, VerifyRequest)>,
    publisher_in_flight: usize,
}

impl Received {
    fn take(&mut self, actions: Vec<Action>) {
        for action in actions {
            match action {
                Action::Deliver { frame, targets, .. } => {
                    for stream in targets.iter() {
                        self.frames.entry(stream).or_default().push(frame.clone());
                    }
                }
                Action::Backlog { stream, frames } => {
                    self.frames
                        .entry(stream)
                        .or_default()
                        .extend(frames.into_iter().map(|delivered| delivered.frame));
                }
                Action::Verify { ticket, request } => self.verifications.push((ticket, request)),
                Action::Consumed { .. } => self.publisher_in_flight -= 1,
                _ => {}
            }
        }
    }
}

/// One seeded run: the admin publishes with many frames in flight, whose verification
/// results come back in random order, while spectators join in between. A witness in the
/// fan-out set from the start sees every accepted frame live: the acceptance order. Every
/// late spectator must receive exactly the frames the ring held at its entry, then every
/// later one, none lost and none twice.
fn seam_round(seed: u64) {
    let frames_max = 8;
    let mut rig = Rig::with_config(config(|config| config.history_frames_max = frames_max));
    let spec = history(explicit(1, &key(1), false));
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    rig.publish(sid(1), &admin.auth());
    let witness = sid(2);
    rig.joined(key(2), &spec, witness, peer(2));
    let window = ProtocolConfig::default().frames_in_flight_per_stream_max;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut received = Received::default();
    let mut entries: Vec<(StreamId, usize)> = Vec::new();
    let mut next_index = 0;
    for _ in 0..300 {
        match rng.random_range(0..10) {
            0..4 if received.publisher_in_flight < window => {
                let frame = admin.data(next_index, &next_index.to_be_bytes());
                next_index += 1;
                received.publisher_in_flight += 1;
                let actions = rig.feed(sid(1), &frame);
                received.take(actions);
            }
            4..8 if !received.verifications.is_empty() => {
                let position = rng.random_range(0..received.verifications.len());
                let (ticket, request) = received.verifications.swap_remove(position);
                rig.machine
                    .on_verified(rig.now, ticket, bps_verify::verify(&request));
                let actions = rig.drain();
                received.take(actions);
            }
            8..10 if entries.len() < 40 => {
                let n = u8::try_from(entries.len()).expect("a few spectators") + 10;
                let stream = sid(u64::from(n));
                let seen = received.frames.get(&witness).map_or(0, Vec::len);
                entries.push((stream, seen));
                let (_, actions) = rig.join(key(n), &spec, stream, peer(n));
                received.take(actions);
            }
            _ => {}
        }
    }
    while let Some((ticket, request)) = received.verifications.pop() {
        rig.machine
            .on_verified(rig.now, ticket, bps_verify::verify(&request));
        let actions = rig.drain();
        received.take(actions);
    }
    assert!(rig.all_consumed());
    let accepted = received.frames.remove(&witness).unwrap_or_default();
    assert_eq!(accepted.len() as u64, next_index, "every frame is accepted");
    assert_eq!(rig.count(Counter::AcceptedData), next_index);
    for (stream, seen) in entries {
        let got = received.frames.remove(&stream).unwrap_or_default();
        let retained_from = seen.saturating_sub(frames_max);
        assert_eq!(
            got,
            accepted[retained_from..],
            "seed {seed}: stream {stream} entered after {seen} accepted frames"
        );
    }
}

#[test]
fn d11_the_seam_loses_and_duplicates_nothing_under_publications_during_attach() {
    for seed in 0..4 {
        seam_round(seed);
    }
}
