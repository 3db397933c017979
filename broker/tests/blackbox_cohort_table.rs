//! Black-box: the cohort table cannot be filled from one IPv6 site (R32 per IPv6 prefix), and
//! a full table makes room by reclaiming cohorts nobody receives from (R31, idle reclaim),
//! never a cohort with a subscriber.
//!
//! The IPv6 test needs many source addresses of one /48: it creates a network namespace
//! (`ip netns`, root only) whose loopback owns two /48s as local routes, and runs the broker
//! and every client connection inside it (a thread enters the namespace with `setns`; the
//! broker, spawned from that thread, starts in it). `ip` is iproute2 (scripts/install-deps).

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv6Addr, SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use bps_proto::{Ack, Spec, Status};
use support::{
    Broker, Raw, WAIT, bodies, eventually, expect_frames, explicit, flush, key, publish, publisher,
};

/// The broker's idle reclaim time in the reclaim test: long enough that the FULL before it
/// is certain on a loaded machine, short enough to keep the test quick.
const IDLE_RECLAIM_MS: u64 = 10_000;
/// Overall deadline for the broker to make room once the idle time has passed.
const ROOM_WAIT: Duration = Duration::from_secs(60);
/// Pause between two creating Joins while waiting for room.
const RETRY_PAUSE: Duration = Duration::from_millis(250);

fn is_ok(ack: &Ack) -> bool {
    ack.status == Status::Ok as i32 && ack.challenge.len() == 32
}

fn is_full(ack: &Ack) -> bool {
    ack.status == Status::Full as i32 && ack.challenge.is_empty()
}

/// A Join of `spec` as key `n`'s address on a connection of its own from 127.0.0.1.
fn join_raw(broker: &Broker, spec: &Spec, n: u8) -> (Ack, Raw) {
    let mut raw = broker.raw();
    let ack = raw.join(&spec.to_join(&key(n).address()));
    (ack, raw)
}

#[test]
fn r31_a_full_table_reclaims_idle_cohorts_and_never_one_with_a_subscriber() {
    let idle_reclaim = format!("timeouts.idle_cohort_reclaim_ms={IDLE_RECLAIM_MS}");
    let broker = Broker::start(&[
        "limits.cohorts_max=4",
        "limits.cohorts_per_peer_max=64",
        // Pending streams must outlive the idle time, or R35 would end them first.
        "timeouts.claim_deadline_ms=600000",
        &idle_reclaim,
    ]);
    let admin = key(1);
    // A live cohort: a subscriber and a publisher that has claimed.
    let live = explicit(1, &admin.address(), false);
    let mut subscriber = broker.join(&live, &key(10).address());
    let mut admin_session = broker.join(&live, &admin.address());
    let mut admin_publisher = publisher(&live, &admin, &admin_session);
    assert_eq!(
        flush(&mut admin_publisher, &mut admin_session).len(),
        1,
        "AUTH"
    );
    broker.wait_metric("bps_claims_total", 1);
    // Three idle cohorts: each holds only its admin's pending stream, so nobody receives.
    let idle_since = Instant::now();
    let mut idle_streams: Vec<Raw> = (2..=4)
        .map(|topic| {
            let (ack, raw) = join_raw(&broker, &explicit(topic, &admin.address(), false), 1);
            assert!(is_ok(&ack), "{ack:?}");
            raw
        })
        .collect();
    // The table is full and no cohort has been idle long enough: a creating Join is FULL.
    let (ack, _) = join_raw(&broker, &explicit(5, &admin.address(), false), 11);
    assert!(
        idle_since.elapsed() < Duration::from_millis(IDLE_RECLAIM_MS),
        "the machine was too slow to probe before the idle time"
    );
    assert!(is_full(&ack), "{ack:?}\n{}", broker.log());
    broker.assert_metrics(&[
        ("bps_cohorts_live", 4),
        ("bps_cohorts_reclaimed_idle_total", 0),
    ]);
    // Once they have been idle long enough, each creating Join finds room (on its own core
    // at once, or after the other core shed one at its next look), up to the three idle
    // cohorts. The new cohorts have a subscriber each.
    let mut created = Vec::new();
    for topic in 5..=7 {
        let spec = explicit(topic, &admin.address(), false);
        let started = Instant::now();
        let session = loop {
            let (ack, raw) = join_raw(&broker, &spec, 12);
            if is_ok(&ack) {
                break raw;
            }
            assert!(is_full(&ack), "{ack:?}");
            assert!(
                started.elapsed() < ROOM_WAIT,
                "no room for cohort {topic} within {ROOM_WAIT:?}\n{}",
                broker.log()
            );
            thread::sleep(RETRY_PAUSE);
        };
        assert!(
            idle_since.elapsed() >= Duration::from_millis(IDLE_RECLAIM_MS),
            "room before the idle time"
        );
        created.push(session);
    }
    broker.wait_metric("bps_cohorts_reclaimed_idle_total", 3);
    // Each idle cohort's pending stream was reset.
    for raw in &mut idle_streams {
        raw.expect_end();
    }
    // Every cohort now has a subscriber: past the idle time again, the table stays full.
    thread::sleep(Duration::from_millis(2 * IDLE_RECLAIM_MS));
    let (ack, _) = join_raw(&broker, &explicit(8, &admin.address(), false), 13);
    assert!(is_full(&ack), "{ack:?}");
    broker.assert_metrics(&[
        ("bps_cohorts_live", 4),
        ("bps_cohorts_reclaimed_idle_total", 3),
    ]);
    // The live cohort was never touched: its subscriber still gets the publisher's frames.
    let sent = bodies(&publish(
        &mut admin_publisher,
        &mut admin_session,
        &[b"still live"],
    ));
    expect_frames(&mut subscriber, &sent);
    drop(created);
}

/// A network namespace for one test, deleted when dropped.
struct Netns {
    name: String,
}

impl Netns {
    /// Creates the namespace with loopback up and `prefixes` routed to it as local.
    fn create(prefixes: &[&str]) -> Netns {
        let name = format!("bps-cohorts-{}", std::process::id());
        run(&["ip", "netns", "add", &name]);
        let netns = Netns { name };
        netns.exec(&["ip", "link", "set", "lo", "up"]);
        // A local route makes the prefix's addresses local; binding to one of them without
        // an address on an interface needs this (per namespace).
        netns.exec(&["sh", "-c", "echo 1 > /proc/sys/net/ipv6/ip_nonlocal_bind"]);
        for prefix in prefixes {
            netns.exec(&["ip", "-6", "route", "add", "local", prefix, "dev", "lo"]);
        }
        netns
    }

    fn exec(&self, command: &[&str]) {
        let mut full = vec!["ip", "netns", "exec", &self.name];
        full.extend_from_slice(command);
        run(&full);
    }

    /// Moves the calling thread into the namespace (processes it spawns start there too).
    fn enter(&self) {
        let path = format!("/var/run/netns/{}", self.name);
        let file = std::fs::File::open(&path).unwrap_or_else(|error| panic!("{path}: {error}"));
        let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
        // SAFETY: `fd` is an open namespace file for the duration of the call.
        let status = unsafe { libc::setns(fd, libc::CLONE_NEWNET) };
        assert_eq!(status, 0, "setns: {}", std::io::Error::last_os_error());
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

fn run(command: &[&str]) {
    let output = Command::new(command[0])
        .args(&command[1..])
        .output()
        .unwrap_or_else(|error| panic!("{command:?}: {error}"));
    assert!(
        output.status.success(),
        "{command:?} failed (the IPv6 test needs root for ip netns): {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The broker inside the namespace, listening on [::1]; killed when dropped.
struct V6Broker {
    child: Child,
    listen: SocketAddr,
    admin: SocketAddr,
}

impl V6Broker {
    fn start(sets: &[&str]) -> V6Broker {
        let mut command = Command::new(env!("CARGO_BIN_EXE_bps-broker"));
        command.env_remove("RUST_LOG").args([
            "--listen",
            "[::1]:0",
            "--admin-listen",
            "127.0.0.1:0",
            "--ws-listen",
            "127.0.0.1:0",
            "--cores",
            "2",
        ]);
        for set in sets {
            command.args(["--set", set]);
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn bps-broker");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, rx) = mpsc::channel();
        // Reads on to the end, so the broker never blocks on a full pipe.
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(addrs) = listening(&line) {
                    let _ = tx.send(addrs);
                }
            }
        });
        let (listen, admin) = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("the broker printed its listening line");
        V6Broker {
            child,
            listen,
            admin,
        }
    }

    /// A Join of `spec` from `source`; the stream stays open with the answer.
    fn join_from(&self, source: Ipv6Addr, spec: &Spec, n: u8) -> (Ack, Raw) {
        let socket = socket2::Socket::new(socket2::Domain::IPV6, socket2::Type::STREAM, None)
            .expect("socket");
        socket
            .bind(&SocketAddr::new(IpAddr::V6(source), 0).into())
            .expect("bind the source address");
        socket
            .connect_timeout(&self.listen.into(), Duration::from_secs(5))
            .expect("connect");
        let stream: TcpStream = socket.into();
        stream.set_write_timeout(Some(WAIT)).expect("write timeout");
        let mut raw = Raw::from_stream(stream);
        let ack = raw.join(&spec.to_join(&key(n).address()));
        (ack, raw)
    }

    /// One counter or gauge without labels from /metrics.
    fn metric(&self, name: &str) -> u64 {
        let mut stream = TcpStream::connect_timeout(&self.admin, Duration::from_secs(2))
            .expect("connect to the admin port");
        stream.set_read_timeout(Some(WAIT)).expect("read timeout");
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
            .expect("send the request");
        let mut text = String::new();
        stream.read_to_string(&mut text).expect("read /metrics");
        text.lines()
            .find_map(|line| {
                line.strip_prefix(name)?
                    .strip_prefix(' ')?
                    .parse::<f64>()
                    .ok()
            })
            .map(|value| value as u64)
            .unwrap_or_else(|| panic!("no {name} in /metrics"))
    }
}

impl Drop for V6Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn listening(line: &str) -> Option<(SocketAddr, SocketAddr)> {
    let rest = line.strip_prefix("bps-broker listening ")?;
    let field = |prefix: &str| {
        rest.split_whitespace()
            .find_map(|field| field.strip_prefix(prefix)?.parse().ok())
    };
    Some((field("listen=")?, field("admin=")?))
}

/// Host `::1` of /64 number `n` of the /48 `2001:db8:site::`.
fn source(site: u16, n: u16) -> Ipv6Addr {
    Ipv6Addr::new(0x2001, 0xdb8, site, n, 0, 0, 0, 1)
}

#[test]
fn r32_the_slash_64s_of_one_ipv6_slash_48_share_one_cohort_bound() {
    let netns = Netns::create(&["2001:db8:1::/48", "2001:db8:2::/48"]);
    // setns moves only the calling thread: the whole test runs on one that entered.
    let outcome = thread::scope(|scope| {
        scope
            .spawn(|| {
                netns.enter();
                slash_48_bound_inside_the_namespace();
            })
            .join()
    });
    drop(netns);
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

fn slash_48_bound_inside_the_namespace() {
    let broker = V6Broker::start(&[
        "limits.cohorts_per_ipv6_prefix_max=4",
        "limits.ipv6_prefix_bits=48",
    ]);
    let admin = key(1).address();
    // Four /64s of the /48 take four cohorts, one each: the prefix's bound.
    let mut held: Vec<Raw> = (1..=4)
        .map(|n| {
            let (ack, raw) = broker.join_from(source(1, n), &explicit(n as u8, &admin, false), 10);
            assert!(is_ok(&ack), "/64 number {n}: {ack:?}");
            raw
        })
        .collect();
    // A fifth /64 of the same /48, within its own per-peer bound, is refused: creating...
    let (ack, _) = broker.join_from(source(1, 5), &explicit(5, &admin, false), 10);
    assert!(is_full(&ack), "{ack:?}");
    // ...and attaching alike.
    let (ack, _) = broker.join_from(source(1, 5), &explicit(1, &admin, false), 11);
    assert!(is_full(&ack), "{ack:?}");
    assert_eq!(broker.metric("bps_cohorts_live"), 4);
    // Another /48 is another site.
    let (ack, _other_site) = broker.join_from(source(2, 1), &explicit(5, &admin, false), 10);
    assert!(is_ok(&ack), "{ack:?}");
    // A /64 of the first /48 leaving its cohort makes room for another of them.
    drop(held.remove(0));
    let _room = eventually("room in the /48 once a /64 left", || {
        let (ack, raw) = broker.join_from(source(1, 5), &explicit(6, &admin, false), 10);
        if is_ok(&ack) {
            return Some(raw);
        }
        assert!(is_full(&ack), "{ack:?}");
        thread::sleep(RETRY_PAUSE);
        None
    });
    // Cohort 1 went with its only stream (R36): 2, 3, 4, 5 and 6 are live.
    assert_eq!(broker.metric("bps_cohorts_live"), 5);
}
