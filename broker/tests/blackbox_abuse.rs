//! The I/O layer under faults and abuse, against the real binary: idle connections that never
//! Join, slow admin clients, peers that never read, a flood towards a thousand subscribers,
//! a flood of fresh keys against the memory budget, a heap kept off transparent huge pages,
//! a core that panics, a stderr that is never read, peers that miss their Join deadline.

mod support;

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, TcpStream};
use std::os::unix::net::UnixDatagram;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use bps_proto::encode_frame;
use support::{Broker, End, Options, Raw, WAIT, explicit, flush, group, key, publish, publisher};

/// Opens `count` connections to the BPS port from `source`.
fn connect_many(broker: &Broker, source: Ipv4Addr, count: usize) -> Vec<Raw> {
    (0..count)
        .map(|_| Raw::connect(broker.listen(), Some(IpAddr::V4(source)), None))
        .collect()
}

/// Polls the counter `name` until it reaches at least `at_least`.
fn wait_at_least(broker: &Broker, name: &str, at_least: u64) -> u64 {
    let deadline = Instant::now() + WAIT;
    loop {
        let value = broker.metric(name);
        if value >= at_least {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "{name} is {value}, never {at_least}\n{}",
            broker.log()
        );
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn idle_connections_that_never_join_from_one_address_leave_room_for_everyone_else() {
    let broker = Broker::start(&[
        "limits.connections_max=64",
        "limits.prejoin_connections_per_peer_max=16",
        "server.join_deadline_ms=60000",
    ]);
    let idle = connect_many(&broker, Ipv4Addr::new(127, 0, 0, 2), 300);
    wait_at_least(&broker, "bps_connections_refused_prejoin_total", 284);
    assert!(broker.metric("bps_connections_open") <= 16);
    // Another address joins and publishes as if nothing happened.
    let admin = key(1);
    let spec = explicit(1, &admin.address(), false);
    let mut spectator = broker.join(&spec, &key(2).address());
    let mut session = broker.join(&spec, &admin.address());
    let mut admin_publisher = publisher(&spec, &admin, &session);
    let sent = publish(&mut admin_publisher, &mut session, &[b"still served"]);
    support::expect_frames(&mut spectator, &support::bodies(&sent));
    drop(idle);
}

#[test]
fn trickling_admin_clients_delay_nobody_and_sigterm_still_exits_in_time() {
    let mut broker = Broker::start(&["server.drain_deadline_ms=3000"]);
    let mut tricklers: Vec<TcpStream> = (0..2)
        .map(|_| TcpStream::connect(broker.admin()).expect("connect"))
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let trickling = {
        let stop = Arc::clone(&stop);
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                for trickler in &mut tricklers {
                    let _ = trickler.write_all(b"G");
                }
                thread::sleep(Duration::from_secs(1));
            }
        })
    };
    for _ in 0..6 {
        let started = Instant::now();
        let (status, _) = broker.get("/healthz");
        assert_eq!(status, 200);
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "/healthz took {:?}",
            started.elapsed()
        );
        thread::sleep(Duration::from_millis(300));
    }
    let signalled = Instant::now();
    broker.signal(libc::SIGTERM);
    let status = broker.wait_exit(Duration::from_secs(8)).expect("exited");
    assert!(status.success(), "{status:?}\n{}", broker.log());
    assert!(signalled.elapsed() < Duration::from_secs(8));
    stop.store(true, Ordering::Relaxed);
    trickling.join().expect("trickler");
}

/// A live-stream whose one spectator never reads, with a queue large enough that R26 never
/// resets it (and a byte bound above its 8 MB): the frames wait in the broker for a reader
/// that never comes.
fn stuck_spectator(
    broker: &Broker,
) -> (
    support::Raw,
    bps_client::session::Session,
    bps_client::publisher::Publisher,
) {
    let admin = key(1);
    let spec = explicit(1, &admin.address(), false);
    let mut spectator = Raw::connect(broker.listen(), None, Some(4096));
    let ack = spectator.join(&spec.to_join(&key(2).address()));
    assert_eq!(ack.status, bps_proto::Status::Ok as i32);
    let mut session = broker.join(&spec, &admin.address());
    let mut admin_publisher = publisher(&spec, &admin, &session);
    let payload = vec![7_u8; 4096];
    // More than any socket buffer on loopback holds (tcp_wmem tops out at 4 MiB).
    let payloads: Vec<&[u8]> = (0..2000).map(|_| payload.as_slice()).collect();
    publish(&mut admin_publisher, &mut session, &payloads);
    (spectator, session, admin_publisher)
}

#[test]
fn a_subscriber_that_never_reads_is_closed_within_the_flush_deadline_after_eos() {
    let broker = Broker::start(&[
        "limits.outbound_queue_frames_max=4096",
        "limits.outbound_queue_bytes_max=33554432",
        "timeouts.flush_deadline_ms=1000",
    ]);
    let (_spectator, mut session, mut admin_publisher) = stuck_spectator(&broker);
    // Every chunk accepted first, so what follows the EOS is the flush deadline alone, not
    // the tail of 2 000 verifications on a busy machine.
    broker.wait_metric("bps_accepted_data_total", 2000);
    admin_publisher.enqueue_eos().expect("EOS");
    let eos_sent = Instant::now();
    flush(&mut admin_publisher, &mut session);
    broker.wait_gauge("bps_connections_open", 0);
    assert!(
        eos_sent.elapsed() < Duration::from_secs(4),
        "closed after {:?}",
        eos_sent.elapsed()
    );
    assert_eq!(
        broker.metric("bps_flush_timeouts_total"),
        1,
        "reset at the deadline"
    );
}

#[test]
fn a_subscriber_that_never_reads_does_not_hold_up_sigterm() {
    let mut broker = Broker::start(&[
        "limits.outbound_queue_frames_max=4096",
        "limits.outbound_queue_bytes_max=33554432",
        "timeouts.flush_deadline_ms=1000",
        "server.drain_deadline_ms=20000",
    ]);
    let (_spectator, _session, _publisher) = stuck_spectator(&broker);
    let signalled = Instant::now();
    broker.signal(libc::SIGTERM);
    let status = broker.wait_exit(Duration::from_secs(10)).expect("exited");
    assert!(status.success(), "{status:?}\n{}", broker.log());
    assert!(
        signalled.elapsed() < Duration::from_secs(5),
        "the drain waited {:?} for a peer that never reads",
        signalled.elapsed()
    );
}

/// Reads and counts everything that arrives on `streams` until `stop`.
fn drain(
    streams: Vec<Raw>,
    stop: Arc<AtomicBool>,
    bytes: Arc<AtomicU64>,
) -> thread::JoinHandle<usize> {
    thread::spawn(move || {
        let mut streams: Vec<TcpStream> = streams.into_iter().map(Raw::into_stream).collect();
        for stream in &streams {
            stream.set_nonblocking(true).expect("nonblocking");
        }
        let mut chunk = vec![0_u8; 64 * 1024];
        let mut ended = 0;
        while !stop.load(Ordering::Relaxed) {
            let mut idle = true;
            streams.retain_mut(|stream| match stream.read(&mut chunk) {
                Ok(0) => {
                    ended += 1;
                    false
                }
                Ok(read) => {
                    idle = false;
                    bytes.fetch_add(read as u64, Ordering::Relaxed);
                    true
                }
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => true,
                Err(_) => {
                    ended += 1;
                    false
                }
            });
            if idle {
                thread::sleep(Duration::from_millis(1));
            }
        }
        ended
    })
}

#[test]
fn healthz_and_the_watchdog_keep_up_while_a_publisher_floods_a_thousand_subscribers() {
    let dir = tempdir();
    let socket_path = dir.join("notify.sock");
    let notify = UnixDatagram::bind(&socket_path).expect("notify socket");
    notify
        .set_read_timeout(Some(Duration::from_millis(100)))
        .expect("timeout");
    let socket_text = socket_path.to_str().expect("utf-8 path").to_owned();
    let broker = Broker::start_options(&Options {
        sets: &[
            "limits.streams_per_peer_per_cohort_max=2000",
            "limits.streams_per_cohort_max=2000",
        ],
        env: &[
            ("NOTIFY_SOCKET", &socket_text),
            ("WATCHDOG_USEC", "1000000"),
        ],
        watchdog_pid: true,
        ..Options::default()
    });
    let admin = key(1);
    let spec = explicit(1, &admin.address(), false);
    let subscribers: Vec<Raw> = (0..1000_u32)
        .map(|n| {
            let mut raw = broker.raw();
            let mut addr = [0_u8; 20];
            addr[..4].copy_from_slice(&(n + 1).to_be_bytes());
            let ack = raw.join(&spec.to_join(&addr));
            assert_eq!(ack.status, bps_proto::Status::Ok as i32, "subscriber {n}");
            raw
        })
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let received = Arc::new(AtomicU64::new(0));
    let mut drainers = Vec::new();
    let mut subscribers = subscribers;
    while !subscribers.is_empty() {
        let take = subscribers.len().min(250);
        let part: Vec<Raw> = subscribers.drain(..take).collect();
        drainers.push(drain(part, Arc::clone(&stop), Arc::clone(&received)));
    }
    let mut session = broker.join(&spec, &admin.address());
    let mut admin_publisher = publisher(&spec, &admin, &session);
    flush(&mut admin_publisher, &mut session);
    let flooding = {
        let stop = Arc::clone(&stop);
        thread::spawn(move || {
            let payload = vec![3_u8; 1024];
            while !stop.load(Ordering::Relaxed) {
                for _ in 0..32 {
                    admin_publisher
                        .enqueue_data(bytes::Bytes::copy_from_slice(&payload))
                        .expect("queue");
                }
                flush(&mut admin_publisher, &mut session);
            }
        })
    };
    let started = Instant::now();
    let mut pets = Vec::new();
    let mut buffer = [0_u8; 256];
    while started.elapsed() < Duration::from_secs(6) {
        let asked = Instant::now();
        let (status, body) = broker.get("/healthz");
        assert_eq!(status, 200, "{body}");
        assert!(
            asked.elapsed() < Duration::from_secs(1),
            "/healthz took {:?}",
            asked.elapsed()
        );
        while let Ok(read) = notify.recv(&mut buffer) {
            if String::from_utf8_lossy(&buffer[..read]).contains("WATCHDOG=1") {
                pets.push(Instant::now());
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    flooding.join().expect("publisher");
    for drainer in drainers {
        drainer.join().expect("drainer");
    }
    assert!(
        received.load(Ordering::Relaxed) > 10 << 20,
        "the flood flowed"
    );
    assert!(
        pets.len() >= 8,
        "watchdog petted {} times in 6 s",
        pets.len()
    );
    let widest = pets
        .windows(2)
        .map(|pair| pair[1] - pair[0])
        .max()
        .unwrap_or_default();
    assert!(widest < Duration::from_secs(1), "watchdog gap {widest:?}");
}

#[test]
fn a_flood_of_fresh_keys_stays_within_the_memory_budget_and_a_reader_is_never_reset() {
    const BUDGET_BYTES: u64 = 768 << 20;
    let budget = format!("limits.memory_bytes_max={BUDGET_BYTES}");
    let broker = Broker::start_options(&Options {
        sets: &[
            &budget,
            "limits.connections_max=2048",
            "limits.frame_memory_bytes_max=67108864",
            "limits.streams_per_peer_per_cohort_max=1000",
            "verify.workers=1",
        ],
        ..Options::default()
    });
    let admin = key(1);
    let spec = group(1, &admin.address());
    let stop = Arc::new(AtomicBool::new(false));
    let received = Arc::new(AtomicU64::new(0));
    let mut member = broker.raw();
    let ack = member.join(&spec.to_join(&key(250).address()));
    assert_eq!(ack.status, bps_proto::Status::Ok as i32);
    let reader = drain(vec![member], Arc::clone(&stop), Arc::clone(&received));
    let received_by_publishers = Arc::new(AtomicU64::new(0));
    // 300 fresh keys in six threads; every publisher is a member too (ALL) and reads what
    // the others publish, so nobody is a slow consumer.
    let publishers: Vec<thread::JoinHandle<()>> = (0..6_u8)
        .map(|group_n| {
            let target = broker.target();
            let stop = Arc::clone(&stop);
            let received = Arc::clone(&received_by_publishers);
            thread::spawn(move || flood_as_fresh_keys(&target, &spec, group_n, (&stop, &received)))
        })
        .collect();
    let started = Instant::now();
    let mut rss_max = 0;
    while started.elapsed() < Duration::from_secs(8) {
        rss_max = rss_max.max(broker.metric("bps_rss_bytes"));
        thread::sleep(Duration::from_millis(200));
    }
    stop.store(true, Ordering::Relaxed);
    for publisher in publishers {
        let _ = publisher.join();
    }
    let worst_case = broker.metric("bps_memory_worst_case_bytes");
    assert!(worst_case <= BUDGET_BYTES);
    assert!(
        rss_max <= BUDGET_BYTES,
        "RSS reached {rss_max} bytes, budget {BUDGET_BYTES}"
    );
    // Publisher-members that cannot read 300 streams' worth may be reset (R26); the member
    // that reads everything never is.
    assert!(broker.metric("bps_accepted_data_total") > 300);
    let ended = reader.join().expect("reader");
    assert_eq!(
        ended,
        0,
        "the reading member's stream stayed open: resets {} slack {} received {}\n{}",
        broker.metric("bps_queue_resets_total"),
        broker.metric("bps_queue_slack_total"),
        received.load(Ordering::Relaxed),
        broker.log()
    );
    assert!(received.load(Ordering::Relaxed) > 0);
}

/// Fifty publishers with keys of their own, one thread: each joins, then all publish 4 KiB
/// frames round-robin until `stop`, their incoming deliveries drained by another thread.
fn flood_as_fresh_keys(
    target: &str,
    spec: &bps_proto::Spec,
    group_n: u8,
    (stop, received): (&Arc<AtomicBool>, &Arc<AtomicU64>),
) {
    let mut streams = Vec::new();
    let mut readers = Vec::new();
    for n in 0..50_u8 {
        let publisher_key = fresh_key(u16::from(group_n) * 50 + u16::from(n));
        let session = match bps_client::session::Session::join(
            target,
            spec,
            &publisher_key.address(),
            support::session_config(),
        ) {
            Ok(bps_client::session::JoinOutcome::Joined(session)) => session,
            other => panic!("publisher join: {:?}", other.err()),
        };
        let publisher = publisher(spec, &publisher_key, &session);
        let (stream, _) = session.into_parts();
        readers.push(stream.try_clone().expect("clone"));
        streams.push((stream, publisher));
    }
    let reading = drain(
        readers.into_iter().map(Raw::from_stream).collect(),
        Arc::clone(stop),
        Arc::clone(received),
    );
    let payload = vec![9_u8; 4096];
    'flood: while !stop.load(Ordering::Relaxed) {
        for (stream, publisher) in &mut streams {
            publisher
                .enqueue_data(bytes::Bytes::copy_from_slice(&payload))
                .expect("queue");
            while let Some(outgoing) = publisher.next_frame().expect("sign") {
                if stream.write_all(&outgoing.signed.frame).is_err() {
                    break 'flood;
                }
                publisher.mark_sent();
            }
        }
    }
    let _ = reading.join();
}

#[test]
fn a_core_that_panics_ends_the_whole_process() {
    let mut broker = Broker::start_options(&Options {
        env: &[(bps_broker::io::PANIC_CORE_ENV, "1")],
        ..Options::default()
    });
    let status = broker
        .wait_exit(Duration::from_secs(10))
        .unwrap_or_else(|| {
            panic!(
                "a broker with a dead core is still running\n{}",
                broker.log()
            )
        });
    assert!(!status.success(), "{status:?}");
    assert!(
        broker.log().contains("core 1 panics as asked"),
        "{}",
        broker.log()
    );
}

/// `THP_enabled` of a process's status: 0 once it disabled transparent huge pages.
fn thp_enabled(pid: i32) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("THP_enabled:"))
        .expect("a kernel that reports THP_enabled")
        .trim()
        .to_owned()
}

#[test]
fn the_heap_stays_off_transparent_huge_pages_unless_mimalloc_is_told_otherwise() {
    let broker = Broker::start_options(&Options::default());
    assert_eq!(thp_enabled(broker.pid()), "0");
    // The operator's own choice, through mimalloc's option, is left alone.
    let allowed = Broker::start_options(&Options {
        env: &[("MIMALLOC_ALLOW_THP", "1")],
        ..Options::default()
    });
    let ours = thp_enabled(std::process::id().try_into().expect("pid fits"));
    assert_eq!(thp_enabled(allowed.pid()), ours);
}

#[test]
fn a_stderr_nobody_reads_never_stalls_a_core() {
    let broker = Broker::start_options(&Options {
        sets: &["log.level=debug", "log.peer_lines_per_s_max=1000000"],
        stderr_unread_after_start: true,
        ..Options::default()
    });
    // Thousands of peer-triggered lines: far more than a pipe buffer holds.
    for _ in 0..3000 {
        let mut garbage = broker.raw();
        let _ = garbage.send(&[0xff; 16]);
        let _ = garbage.expect_end();
    }
    let (status, _) = broker.get("/healthz");
    assert_eq!(status, 200);
    let admin = key(1);
    let spec = explicit(1, &admin.address(), false);
    let mut spectator = broker.join(&spec, &key(2).address());
    let mut session = broker.join(&spec, &admin.address());
    let mut admin_publisher = publisher(&spec, &admin, &session);
    let sent = publish(
        &mut admin_publisher,
        &mut session,
        &[b"logging never blocks"],
    );
    support::expect_frames(&mut spectator, &support::bodies(&sent));
}

#[test]
fn missed_join_deadlines_count_towards_the_blocklist() {
    let broker = Broker::start(&[
        "server.join_deadline_ms=200",
        "limits.join_timeouts_per_peer_max=2",
        "timeouts.blocklist_join_timeout_ms=60000",
    ]);
    let source = Ipv4Addr::new(127, 0, 0, 5);
    let mut idle = connect_many(&broker, source, 2);
    for raw in &mut idle {
        assert!(matches!(raw.expect_end().0, End::Reset | End::Eof));
    }
    wait_at_least(&broker, "bps_join_timeouts_total", 2);
    let mut refused = Raw::connect(broker.listen(), Some(IpAddr::V4(source)), None);
    let _ = refused.send(&encode_frame(
        &explicit(1, &key(1).address(), false).to_join(&key(2).address()),
    ));
    let (end, frames) = refused.expect_end();
    assert!(
        frames.is_empty(),
        "a blocklisted peer gets no Ack ({end:?})"
    );
    wait_at_least(&broker, "bps_connections_refused_blocklist_total", 1);
    // The blocklisting itself is counted once, apart from the protocol's R39 entries.
    assert_eq!(broker.metric("bps_join_timeout_blocklistings_total"), 1);
    // Other peers are not affected.
    let spec = explicit(1, &key(1).address(), false);
    let _spectator = broker.join(&spec, &key(2).address());
}

/// The `index`-th of many distinct keys (beyond the 255 of `support::key`).
fn fresh_key(index: u16) -> bps_verify::SigningKey {
    let mut secret = [0x5a_u8; 32];
    secret[30..].copy_from_slice(&(index + 1).to_be_bytes());
    bps_verify::SigningKey::from_bytes(&secret).expect("a valid key")
}

/// A fresh directory for the test's sockets.
fn tempdir() -> std::path::PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos());
    let dir = std::env::temp_dir().join(format!("bps-abuse-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}
