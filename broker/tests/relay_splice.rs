//! Black-box: publishers at an edge (docs/SCALING.md, "Publishers at an edge"). A root and
//! edges run as separate `bps-broker` processes on loopback; a stream that may publish joins
//! an edge, which splices it to the root: the challenge in its Ack is the root's, the root
//! verifies its frames, and they reach subscribers at the root and at every edge.

mod support;

use bps_client::session::Session;
use bps_client::subscriber::{Event, Subscriber};
use bps_proto::{Address, Spec};
use support::{
    Broker, bodies, expect_closed, expect_data, expect_frames, expect_roster, explicit, group, key,
    publish, publisher, recv, relay,
};

/// A root of a test tree (`support::relay::TREE`: it trusts loopback as its edges).
fn root() -> Broker {
    relay::root(&[])
}

/// An edge whose upstream is `root`.
fn edge_of(root: &Broker) -> Broker {
    relay::edge(&[root.listen()], &[])
}

/// A subscriber of `spec` at `broker` under `addr`, with its verifier.
fn subscriber_at(broker: &Broker, spec: &Spec, addr: &Address) -> (Session, Subscriber) {
    (broker.join(spec, addr), Subscriber::new(*spec))
}

#[test]
fn a_publisher_at_an_edge_signs_under_the_roots_challenge_and_reaches_everyone() {
    let root = root();
    let edge = edge_of(&root);
    let admin = key(1);
    let spec = explicit(1, &admin.address(), false);
    let (mut at_edge, mut verify_edge) = subscriber_at(&edge, &spec, &key(3).address());
    let (mut at_root, mut verify_root) = subscriber_at(&root, &spec, &key(4).address());
    edge.wait_gauge("bps_relay_upstreams_attached", 1);

    let mut session = edge.join(&spec, &admin.address());
    let mut admin_publisher = publisher(&spec, &admin, &session);
    let sent = bodies(&publish(
        &mut admin_publisher,
        &mut session,
        &[b"one", b"two"],
    ));
    for (session, verifier) in [
        (&mut at_edge, &mut verify_edge),
        (&mut at_root, &mut verify_root),
    ] {
        expect_frames(session, &sent);
        for (index, (body, payload)) in sent.iter().zip([&b"one"[..], b"two"]).enumerate() {
            expect_data(
                verifier,
                body.clone(),
                &admin.address(),
                index as u64,
                payload,
            );
        }
    }
    // The root verified the claim and both frames against the challenge it gave the stream:
    // it saw three Joins (the edge's upstream, its own subscriber, the spliced admin).
    root.assert_metrics(&[("bps_joins_ok_total", 3), ("bps_accepted_data_total", 2)]);
    edge.assert_metrics(&[
        ("bps_relay_splices_total", 1),
        ("bps_relay_splices_open", 1),
    ]);
    // Frames under another challenge are the root's to drop (R15): a fresh publisher's
    // claim and its DATA.
    let mut stranger = publisher(&spec, &admin, &session);
    stranger.begin_session([0x77; 32]);
    publish(&mut stranger, &mut session, &[b"stale"]);
    root.wait_metric("bps_wrong_challenge_total", 2);
    // Everything the admin sent passed the edge: two claims and three DATA.
    edge.assert_metrics(&[("bps_relay_spliced_frames_total", 5)]);
    drop(session);
    edge.wait_gauge("bps_relay_splices_open", 0);
}

#[test]
fn an_all_group_chat_works_with_members_at_the_root_and_at_two_edges() {
    let root = root();
    let (west, east) = (edge_of(&root), edge_of(&root));
    let spec = group(2, &key(1).address());
    let members = [key(5), key(6), key(7)];
    let brokers = [&root, &west, &east];
    let mut sessions: Vec<_> = members
        .iter()
        .zip(brokers)
        .map(|(member, broker)| broker.join(&spec, &member.address()))
        .collect();
    let mut said = Vec::new();
    for (member, session) in members.iter().zip(sessions.iter_mut()) {
        let mut writer = publisher(&spec, member, session);
        said.push(bodies(&publish(
            &mut writer,
            session,
            &[member.address().as_slice()],
        )));
    }
    // Each member gets every other member's message, verified end to end, and never its own
    // (R25): the root fans out to the spliced streams as to its own.
    for (position, session) in sessions.iter_mut().enumerate() {
        let mut verifier = Subscriber::new(spec);
        let mut owners: Vec<Address> = (0..members.len() - 1)
            .map(|_| match verifier.on_frame(recv(session)) {
                Event::Data { owner, payload, .. } => {
                    assert_eq!(payload.as_ref(), owner.as_slice());
                    owner
                }
                other => panic!("member {position} saw {other:?}"),
            })
            .collect();
        owners.sort_unstable();
        let mut others: Vec<Address> = members
            .iter()
            .enumerate()
            .filter(|(index, _)| *index != position)
            .map(|(_, member)| member.address())
            .collect();
        others.sort_unstable();
        assert_eq!(owners, others, "member {position}");
        support::expect_nothing(session);
    }
    assert_eq!(said.iter().map(Vec::len).sum::<usize>(), 3);
    west.assert_metrics(&[("bps_relay_splices_total", 1)]);
    east.assert_metrics(&[("bps_relay_splices_total", 1)]);
}

#[test]
fn a_spectator_a_roster_names_at_an_edge_is_ended_and_its_rejoin_is_spliced() {
    let root = root();
    let edge = edge_of(&root);
    let admin = key(1);
    let named = key(4);
    let spec = explicit(3, &admin.address(), false);
    let (mut watcher, mut verify_watcher) = subscriber_at(&root, &spec, &key(9).address());
    let mut spectator = edge.join(&spec, &named.address());
    edge.wait_gauge("bps_relay_upstreams_attached", 1);

    let mut admin_session = root.join(&spec, &admin.address());
    let mut admin_publisher = publisher(&spec, &admin, &admin_session);
    admin_publisher
        .enqueue_roster(&[named.address()])
        .expect("a roster of one");
    support::flush(&mut admin_publisher, &mut admin_session);
    // The edge delivers the roster naming it, then ends the stream (R8 at an edge).
    let roster = recv(&mut spectator);
    assert_eq!(
        expect_roster(&mut Subscriber::new(spec), roster.clone()),
        vec![named.address()]
    );
    expect_closed(&mut spectator);
    assert_eq!(
        expect_roster(&mut verify_watcher, recv(&mut watcher)),
        vec![named.address()]
    );
    // Its rejoin at the edge is spliced: it claims and publishes under the root's challenge.
    let mut rejoined = edge.join(&spec, &named.address());
    let mut writer = publisher(&spec, &named, &rejoined);
    // R22, R23: the root gives the pending stream the roster naming it at once, through the
    // splice, and only then may it claim.
    let granted = expect_roster(&mut Subscriber::new(spec), recv(&mut rejoined));
    writer.on_roster(&granted);
    let sent = bodies(&publish(&mut writer, &mut rejoined, &[b"granted"]));
    let body = recv(&mut watcher);
    assert_eq!(body, sent[0]);
    expect_data(&mut verify_watcher, body, &named.address(), 0, b"granted");
    edge.assert_metrics(&[("bps_relay_splices_total", 1)]);
}
