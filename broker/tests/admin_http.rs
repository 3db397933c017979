//! The admin HTTP server against a fake backend: every endpoint, paging and sorting of
//! `/cohortz`, 404/405/400/431/408, draining, the reloadable health deadline, and clients
//! that trickle or never read costing nobody else anything.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bps_broker::admin::{AdminBackend, AdminServer};
use std::net::Ipv4Addr;

use bps_broker::budget::MemoryBudget;
use bps_broker::config::BrokerConfig;
use bps_broker::metrics::{
    BrokerGauges, CohortFigures, CohortSeries, CoreMetrics, MetricKind, MetricsSnapshot,
    OtherCohorts, ProtocolMetric,
};
use bps_broker::protocol::{
    CohortLabel, CohortStreams, CohortSummary, PeerId, Role, StreamId, StreamSnapshot,
};
use bps_proto::CohortKey;
use serde_json::Value;

/// A backend whose answers the test controls.
struct Fake {
    pings: Mutex<Vec<bool>>,
    cohorts: Mutex<Option<Vec<CohortSummary>>>,
    ready: AtomicBool,
    last_deadline_ms: AtomicU64,
    core: Arc<CoreMetrics>,
}

impl Fake {
    fn new() -> Arc<Fake> {
        Arc::new(Fake {
            pings: Mutex::new(vec![true, true]),
            cohorts: Mutex::new(Some(Vec::new())),
            ready: AtomicBool::new(true),
            last_deadline_ms: AtomicU64::new(0),
            core: CoreMetrics::new_shared(),
        })
    }
}

impl AdminBackend for Fake {
    fn ping(&self, deadline: Duration) -> Vec<bool> {
        self.last_deadline_ms.store(
            u64::try_from(deadline.as_millis()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        self.pings.lock().expect("lock").clone()
    }

    fn cohorts(&self, _deadline: Duration) -> Option<Vec<CohortSummary>> {
        self.cohorts.lock().expect("lock").clone()
    }

    fn cohort_streams(
        &self,
        key: &CohortKey,
        offset: usize,
        limit: usize,
        _deadline: Duration,
    ) -> Option<Option<CohortStreams>> {
        let cohorts = self.cohorts.lock().expect("lock").clone()?;
        let summary = cohorts
            .into_iter()
            .find(|cohort| cohort.key == key.to_hex());
        Some(summary.map(|summary| {
            CohortStreams {
                streams_total: summary.subscribers,
                offset,
                roster: vec!["11".repeat(20)],
                streams: (offset..summary.subscribers.min(offset + limit))
                    .map(|id| StreamSnapshot {
                        id: StreamId::new(0, id as u64),
                        peer: PeerId::of(Ipv4Addr::LOCALHOST.into()),
                        role: Role::Spectator,
                        addr: "22".repeat(20),
                        joined_ms: 1,
                        revoked: false,
                        frames_held: 0,
                        transport: "tcp",
                        anonymous: false,
                        trusted_relay: false,
                    })
                    .collect(),
                summary,
            }
        }))
    }

    fn metrics(&self) -> MetricsSnapshot {
        MetricsSnapshot {
            driver: "epoll",
            cores: vec![Arc::clone(&self.core)],
            protocol: vec![ProtocolMetric {
                name: "retransmit",
                help: "Retransmits.",
                kind: MetricKind::Counter,
                value: 5,
            }],
            cohorts: CohortFigures {
                shown: vec![CohortSeries {
                    label: CohortLabel {
                        id: "0a20".repeat(4),
                        binding: "mnemonic".to_owned(),
                        admin: "none".to_owned(),
                    },
                    subscribers: 2,
                    counters: vec![("retransmit", 5)],
                    streams_by_role: vec![("spectator", 2)],
                    gauges: vec![],
                }],
                other: OtherCohorts::default(),
            },
            broker: BrokerGauges {
                frame_memory_bytes: 1,
                frame_memory_bytes_max: 2,
                rss_bytes: 3,
                budget: MemoryBudget::of(&BrokerConfig::default(), 1, 1, 1 << 30),
                heartbeats_ms: vec![4],
                core_busy: vec![Some(Duration::from_millis(1250))],
                ready: self.ready.load(Ordering::Relaxed),
                peers: bps_core::LedgerSnapshot {
                    peers_attached: 6,
                    trusted_relays_attached: 1,
                    trusted_relay_cohorts: 7,
                    blocklistings_waived: 8,
                    ..Default::default()
                },
                verify_pool: Some(bps_broker::metrics::VerifyPoolFigures {
                    jobs: 12,
                    batches: 3,
                    ..Default::default()
                }),
                p2p_host: Some(bps_broker::metrics::P2pHostFigures {
                    connections_refused_limit: 2,
                    identity: std::sync::Arc::new(bps_broker::metrics::P2pIdentity {
                        mode: "light",
                        network_id: 10,
                        peer_id: "QmPeer".to_owned(),
                        overlay: "ab".repeat(32),
                    }),
                    ..Default::default()
                }),
            },
        }
    }

    fn ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }
}

fn start(fake: &Arc<Fake>) -> AdminServer {
    let backend: Arc<dyn AdminBackend> = Arc::clone(fake) as Arc<dyn AdminBackend>;
    AdminServer::start(
        SocketAddr::from(([127, 0, 0, 1], 0)),
        backend,
        Duration::from_millis(250),
    )
    .expect("admin server starts")
}

/// Sends raw bytes and returns (status, headers, body).
fn raw(addr: SocketAddr, request: &[u8]) -> (u16, String, String) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    // The server may answer (and close) before taking all of an oversize request.
    let _ = stream.write_all(request);
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let text = String::from_utf8(response).expect("utf-8 response");
    let (head, body) = text.split_once("\r\n\r\n").expect("a response head");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .expect("a status code");
    (status, head.to_owned(), body.to_owned())
}

fn get(addr: SocketAddr, target: &str) -> (u16, String, String) {
    raw(
        addr,
        format!("GET {target} HTTP/1.1\r\nHost: test\r\n\r\n").as_bytes(),
    )
}

/// A cohort summary with `subscribers` spectators and the canonical key bytes `key`.
fn cohort(key: &[u8], subscribers: usize) -> CohortSummary {
    let key = CohortKey::from_bytes(key.to_vec().into());
    CohortSummary {
        key: key.to_hex(),
        id: "00".repeat(8),
        core: 0,
        topic: "00".repeat(32),
        binding: "FEED_TOPIC".to_owned(),
        admin: Some("11".repeat(20)),
        authorship: "explicit",
        history: false,
        closed: false,
        created_ms: 0,
        last_activity_ms: 0,
        age_ms: 5,
        idle_ms: 5,
        roster_entries: 0,
        roster_cursor: 0,
        cursors: 0,
        dedup_entries: 0,
        history_frames: 0,
        history_bytes: 0,
        subscribers,
        streams: [("spectator", subscribers as u64)].into_iter().collect(),
        peers_total: 1,
        peers: vec!["127.0.0.1".to_owned()],
        counters: [("retransmit", 1)].into_iter().collect(),
    }
}

#[test]
fn metrics_are_prometheus_text() {
    let fake = Fake::new();
    fake.core.frames_in.add(3);
    let server = start(&fake);
    let (status, head, body) = get(server.local_addr(), "/metrics");
    assert_eq!(status, 200);
    assert!(
        head.contains("Content-Type: text/plain; version=0.0.4"),
        "{head}"
    );
    assert!(
        head.contains(&format!("Content-Length: {}", body.len())),
        "{head}"
    );
    assert!(body.contains("bps_driver_info{driver=\"epoll\"} 1\n"));
    assert!(body.contains("bps_frames_in_total 3\n"));
    assert!(body.contains("bps_retransmit_total 5\n"));
    assert!(body.contains("bps_cohort_retransmit_total{cohort=\"0a200a200a200a20\",binding=\"mnemonic\",admin=\"none\"} 5\n"));
    assert!(body.contains("bps_cohort_invalid_roster_total{cohort=\"0a200a200a200a20\",binding=\"mnemonic\",admin=\"none\"} 0\n"));
    assert!(body.contains("bps_core_busy_seconds_total{core=\"0\"} 1.250000\n"));
    assert!(body.contains("bps_ready 1\n"));
    assert!(body.contains("bps_peers_attached 6\n"));
    assert!(body.contains("bps_trusted_relays_attached 1\n"));
    assert!(body.contains("bps_trusted_relay_cohorts 7\n"));
    assert!(body.contains("# TYPE bps_blocklistings_waived_total counter\n"));
    assert!(body.contains("bps_blocklistings_waived_total 8\n"));
    assert!(body.contains("bps_verify_pool_jobs_total 12\n"));
    assert!(body.contains("bps_verify_pool_batches_total 3\n"));
    assert!(body.contains("bps_verify_pool_batch_failures_total 0\n"));
    assert!(body.contains("bps_p2p_host_connections_refused_limit_total 2\n"));
    assert!(body.contains(&format!(
        "bps_p2p_info{{mode=\"light\",network_id=\"10\",peer_id=\"QmPeer\",overlay=\"{}\"}} 1\n",
        "ab".repeat(32)
    )));
    server.stop();
}

#[test]
fn healthz_follows_the_pings_and_the_reloadable_deadline() {
    let fake = Fake::new();
    let server = start(&fake);
    let (status, _, body) = get(server.local_addr(), "/healthz");
    assert_eq!((status, body.as_str()), (200, "ok\n"));
    assert_eq!(fake.last_deadline_ms.load(Ordering::Relaxed), 250);

    *fake.pings.lock().expect("lock") = vec![true, false, true, false];
    server.set_healthz_deadline(Duration::from_millis(40));
    let (status, _, body) = get(server.local_addr(), "/healthz");
    assert_eq!(status, 503);
    assert!(body.contains("1,3"), "{body}");
    assert_eq!(fake.last_deadline_ms.load(Ordering::Relaxed), 40);
}

#[test]
fn readyz_is_503_when_draining_or_not_ready() {
    let fake = Fake::new();
    let server = start(&fake);
    assert_eq!(get(server.local_addr(), "/readyz").0, 200);
    fake.ready.store(false, Ordering::Relaxed);
    assert_eq!(get(server.local_addr(), "/readyz").0, 503);
    assert!(
        get(server.local_addr(), "/metrics")
            .2
            .contains("bps_ready 0\n")
    );
    fake.ready.store(true, Ordering::Relaxed);
    assert!(
        get(server.local_addr(), "/metrics")
            .2
            .contains("bps_ready 1\n")
    );
    server.set_draining();
    let (status, _, body) = get(server.local_addr(), "/readyz");
    assert_eq!((status, body.as_str()), (503, "draining\n"));
    assert!(
        get(server.local_addr(), "/metrics")
            .2
            .contains("bps_ready 0\n")
    );
}

#[test]
fn cohortz_sorts_by_subscribers_and_pages() {
    let fake = Fake::new();
    let cohorts: Vec<CohortSummary> = (0..120_u16)
        .map(|index| cohort(&index.to_be_bytes(), usize::from(index % 7)))
        .collect();
    *fake.cohorts.lock().expect("lock") = Some(cohorts);
    let server = start(&fake);

    let (status, head, body) = get(server.local_addr(), "/cohortz");
    assert_eq!(status, 200);
    assert!(head.contains("Content-Type: application/json"), "{head}");
    let page: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(page["cohorts_total"], 120);
    assert_eq!(page["offset"], 0);
    assert_eq!(page["limit"], 50);
    let listed = page["cohorts"].as_array().expect("array");
    assert_eq!(listed.len(), 50);
    let counts: Vec<u64> = listed
        .iter()
        .map(|cohort| cohort["subscribers"].as_u64().expect("count"))
        .collect();
    assert!(
        counts.windows(2).all(|pair| pair[0] >= pair[1]),
        "{counts:?}"
    );
    assert_eq!(counts[0], 6);
    assert_eq!(listed[0]["key"], "0006");
    assert_eq!(listed[0]["binding"], "FEED_TOPIC");
    assert_eq!(listed[0]["age_ms"], 5);
    assert!(
        listed[0].get("roster").is_none(),
        "summaries carry no lists"
    );

    // Pages do not overlap and together list every cohort once.
    let mut seen = Vec::new();
    for offset in (0..120).step_by(40) {
        let (_, _, body) = get(
            server.local_addr(),
            &format!("/cohortz?limit=40&offset={offset}&sort=subscribers"),
        );
        let page: Value = serde_json::from_str(&body).expect("json");
        assert_eq!(page["limit"], 40);
        for cohort in page["cohorts"].as_array().expect("array") {
            seen.push(cohort["key"].as_str().expect("key").to_owned());
        }
    }
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 120);

    let (_, _, body) = get(server.local_addr(), "/cohortz?offset=500");
    let page: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(page["cohorts"].as_array().expect("array").len(), 0);
    assert_eq!(page["cohorts_total"], 120);

    let (_, _, body) = get(server.local_addr(), "/cohortz?limit=100000");
    let page: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(page["limit"], 1000);
}

/// The keys of one `/cohortz?sort=key` page and its `next` cursor.
fn key_page(server: &AdminServer, after: Option<&str>) -> (Vec<String>, Option<String>) {
    let cursor = after.map_or(String::new(), |after| format!("&after={after}"));
    let (status, _, body) = get(
        server.local_addr(),
        &format!("/cohortz?sort=key&limit=40{cursor}"),
    );
    assert_eq!(status, 200, "{body}");
    let page: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(page["sort"], "key");
    let keys = page["cohorts"]
        .as_array()
        .expect("array")
        .iter()
        .map(|cohort| cohort["key"].as_str().expect("key").to_owned())
        .collect();
    (keys, page["next"].as_str().map(str::to_owned))
}

#[test]
fn cohortz_pages_by_key_cursor_and_cohorts_that_come_and_go_shift_nothing() {
    let fake = Fake::new();
    let all: Vec<CohortSummary> = (0..120_u16)
        .map(|index| cohort(&(index * 2).to_be_bytes(), usize::from(index % 7)))
        .collect();
    *fake.cohorts.lock().expect("lock") = Some(all.clone());
    let server = start(&fake);
    let (first, next) = key_page(&server, None);
    assert_eq!(first.len(), 40);
    assert!(first.windows(2).all(|pair| pair[0] < pair[1]), "{first:?}");
    let next = next.expect("more pages");
    assert_eq!(next, first[39]);
    // Between pages, ten cohorts of the first page end and ten new ones appear before the
    // cursor: with offsets the next page would skip ten cohorts; with the cursor it does not.
    let mut changed: Vec<CohortSummary> = all[10..].to_vec();
    changed.extend((0..10_u16).map(|index| cohort(&(index * 2 + 1).to_be_bytes(), 1)));
    *fake.cohorts.lock().expect("lock") = Some(changed);
    let mut seen = first.clone();
    let mut cursor = Some(next);
    while let Some(after) = cursor {
        let (keys, next) = key_page(&server, Some(&after));
        assert!(
            keys.iter().all(|key| *key > after),
            "{keys:?} after {after}"
        );
        seen.extend(keys);
        cursor = next;
    }
    let expected: Vec<String> = all.iter().map(|cohort| cohort.key.clone()).collect();
    assert_eq!(
        seen, expected,
        "every cohort that lived throughout, once, in order"
    );
    let (status, _, _) = get(server.local_addr(), "/cohortz?after=00");
    assert_eq!(status, 400);
}

#[test]
fn cohortz_rejects_bad_parameters_and_reports_slow_cores() {
    let fake = Fake::new();
    let server = start(&fake);
    for target in [
        "/cohortz?limit=x",
        "/cohortz?offset=-2",
        "/cohortz?sort=name",
        "/cohortz?key=xyz",
    ] {
        assert_eq!(get(server.local_addr(), target).0, 400, "{target}");
    }
    *fake.cohorts.lock().expect("lock") = None;
    assert_eq!(get(server.local_addr(), "/cohortz").0, 503);
}

#[test]
fn cohortz_with_a_key_pages_that_cohorts_streams() {
    let fake = Fake::new();
    *fake.cohorts.lock().expect("lock") = Some(vec![cohort(&[0x0a, 0x20], 25), cohort(&[1], 1)]);
    let server = start(&fake);
    let (status, _, body) = get(server.local_addr(), "/cohortz?key=0a20&offset=10&limit=10");
    assert_eq!(status, 200, "{body}");
    let page: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(page["cohort"]["key"], "0a20");
    assert_eq!(page["streams_total"], 25);
    assert_eq!(page["offset"], 10);
    let streams = page["streams"].as_array().expect("array");
    assert_eq!(streams.len(), 10);
    assert_eq!(streams[0]["id"], 10);
    assert_eq!(streams[0]["role"], "spectator");
    assert_eq!(page["roster"][0], "11".repeat(20));
    assert_eq!(get(server.local_addr(), "/cohortz?key=0b").0, 404);
}

#[test]
fn trickling_and_non_reading_clients_do_not_delay_healthz_and_stop_does_not_wait() {
    let fake = Fake::new();
    let server = start(&fake);
    let addr = server.local_addr();
    // Two clients trickle a request one byte at a time; two more never read a response.
    let mut tricklers: Vec<TcpStream> = (0..2)
        .map(|_| TcpStream::connect(addr).expect("connect"))
        .collect();
    let mut readers: Vec<TcpStream> = (0..2)
        .map(|_| TcpStream::connect(addr).expect("connect"))
        .collect();
    for reader in &mut readers {
        reader
            .write_all(b"GET /metrics HTTP/1.1\r\n\r\n")
            .expect("request");
    }
    let done = std::sync::Arc::new(AtomicBool::new(false));
    let trickling = {
        let done = std::sync::Arc::clone(&done);
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                for trickler in &mut tricklers {
                    let _ = trickler.write_all(b"G");
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    for _ in 0..5 {
        let started = std::time::Instant::now();
        assert_eq!(get(addr, "/healthz").0, 200);
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
    }
    let started = std::time::Instant::now();
    server.stop();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "stop waited {:?}",
        started.elapsed()
    );
    done.store(true, Ordering::Relaxed);
    trickling.join().expect("trickler");
    drop(readers);
}

#[test]
fn unknown_paths_methods_and_malformed_requests() {
    let fake = Fake::new();
    let server = start(&fake);
    let addr = server.local_addr();
    assert_eq!(get(addr, "/").0, 404);
    assert_eq!(get(addr, "/metricsx").0, 404);
    let (status, head, _) = raw(addr, b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
    assert_eq!(status, 405);
    assert!(head.contains("Allow: GET"), "{head}");
    assert_eq!(raw(addr, b"HEAD /healthz HTTP/1.1\r\n\r\n").0, 405);
    assert_eq!(raw(addr, b"DELETE /nowhere HTTP/1.1\r\n\r\n").0, 404);
    assert_eq!(raw(addr, b"GARBAGE\r\n\r\n").0, 400);
    assert_eq!(raw(addr, b"GET /metrics SPDY/3\r\n\r\n").0, 400);
}

#[test]
fn oversize_request_heads_are_refused() {
    let fake = Fake::new();
    let server = start(&fake);
    let mut request = b"GET /metrics HTTP/1.1\r\n".to_vec();
    while request.len() <= 9 * 1024 {
        request.extend_from_slice(b"X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
    }
    request.extend_from_slice(b"\r\n");
    assert_eq!(raw(server.local_addr(), &request).0, 431);
    // The server is still fine afterwards.
    assert_eq!(get(server.local_addr(), "/healthz").0, 200);
}

#[test]
fn a_silent_client_times_out_without_blocking_others() {
    let fake = Fake::new();
    let server = start(&fake);
    let addr = server.local_addr();
    let mut silent = TcpStream::connect(addr).expect("connect");
    silent
        .write_all(b"GET /healthz HTTP/1.1\r\n")
        .expect("partial head");
    // Another client is served while the silent one waits for its deadline.
    assert_eq!(get(addr, "/healthz").0, 200);
    silent
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut response = String::new();
    let _ = silent.read_to_string(&mut response);
    assert!(response.starts_with("HTTP/1.1 408 "), "{response}");
}

#[test]
fn stopping_releases_the_port() {
    let fake = Fake::new();
    let server = start(&fake);
    let addr = server.local_addr();
    server.stop();
    assert!(TcpStream::connect(addr).is_err());
}
