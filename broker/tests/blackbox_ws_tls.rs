//! Black-box: TLS by a reverse proxy, as docs/WEBSOCKET.md configures it. Debian's nginx
//! with a certificate from a throwaway CA (`scripts/nginx-tls` installs and starts it) terminates
//! TLS in front of the real broker; a rustls client speaks `wss://` through it to the native
//! endpoint and the bridge, and the broker sees the peer the proxy names.

mod support;

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use bps_proto::{Hash, Status, encode_frame};
use bytes::Bytes;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use support::{Broker, body_of, explicit, key, publish, publisher};
use tungstenite::client::IntoClientRequest;
use tungstenite::{Message, WebSocket};

type Tls = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// nginx in front of the broker; stopped on drop.
struct Proxy {
    dir: PathBuf,
    port: u16,
    /// The throwaway CA that signed nginx's certificate.
    ca: PathBuf,
}

impl Proxy {
    fn start(broker: &Broker) -> Proxy {
        let dir = std::env::temp_dir().join(format!("bps-nginx-tls-{}", std::process::id()));
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scripts/nginx-tls");
        let output = Command::new(script)
            .arg(broker.ws().to_string())
            .arg(&dir)
            .output()
            .expect("run scripts/nginx-tls");
        assert!(
            output.status.success(),
            "nginx-tls failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let line = BufReader::new(output.stdout.as_slice())
            .lines()
            .map_while(Result::ok)
            .find(|line| line.starts_with("nginx-tls ready"))
            .expect("the ready line");
        let field = |name: &str| {
            line.split_whitespace()
                .find_map(|field| field.strip_prefix(name))
                .expect("a field of the ready line")
                .to_owned()
        };
        Proxy {
            port: field("port=").parse().expect("a port"),
            ca: PathBuf::from(field("ca=")),
            dir,
        }
    }

    /// A `wss://localhost:PORT{target}` session through the proxy, with `headers`.
    fn open(&self, target: &str, headers: &[(&str, &str)]) -> WebSocket<Tls> {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_file(&self.ca).expect("the test CA"))
            .expect("a root");
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
        let name = ServerName::try_from("localhost").expect("a server name");
        let connection =
            rustls::ClientConnection::new(Arc::new(config), name).expect("a TLS connection");
        let tcp = TcpStream::connect(("127.0.0.1", self.port)).expect("connect to nginx");
        tcp.set_read_timeout(Some(support::WAIT)).expect("timeout");
        let mut request = format!("wss://localhost:{}{target}", self.port)
            .into_client_request()
            .expect("a request");
        for (name, value) in headers {
            request.headers_mut().insert(
                tungstenite::http::HeaderName::from_bytes(name.as_bytes()).expect("name"),
                tungstenite::http::HeaderValue::from_str(value).expect("value"),
            );
        }
        let (socket, _) = tungstenite::client(request, rustls::StreamOwned::new(connection, tcp))
            .expect("the upgrade through nginx");
        socket
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scripts/nginx-tls");
        let _ = Command::new(script).arg("--stop").arg(&self.dir).status();
    }
}

/// The next binary message; on a read error, fails with what the broker counted and logged
/// (a delivery not seen in time names where it stopped).
fn recv_binary(socket: &mut WebSocket<Tls>, broker: &Broker) -> Bytes {
    loop {
        let message = socket.read().unwrap_or_else(|error| {
            let metrics = broker.metrics();
            let mut counted: Vec<String> = metrics
                .iter()
                .filter(|(name, value)| **value != 0.0 && !name.contains("_bucket"))
                .map(|(name, value)| format!("{name} {value}"))
                .collect();
            counted.sort();
            panic!(
                "a message: {error}\nmetrics:\n{}\nlog:\n{}",
                counted.join("\n"),
                broker.log()
            )
        });
        match message {
            Message::Binary(bytes) => return bytes,
            Message::Ping(_) | Message::Pong(_) => {}
            other => panic!("expected binary, got {other:?}"),
        }
    }
}

#[test]
fn wss_through_nginx_reaches_both_endpoints_and_names_the_client() {
    let broker = Broker::start(&[
        "ws.trusted_proxies=[\"127.0.0.1\"]",
        "limits.streams_per_peer_per_cohort_max=16",
    ]);
    let proxy = Proxy::start(&broker);
    let admin = key(1);
    let spec = explicit(1, &admin.address(), false);
    // The native endpoint over TLS: Join, Ack, and a delivery byte for byte.
    let mut native = proxy.open("/bps/v1", &[("X-Forwarded-For", "203.0.113.7")]);
    native
        .send(Message::Binary(encode_frame(
            &spec.to_join(&key(2).address()),
        )))
        .expect("send the Join");
    let ack = bps_proto::decode_ack(body_of(&recv_binary(&mut native, &broker))).expect("an Ack");
    assert_eq!(ack.status, Status::Ok as i32);
    let challenge = Hash::try_from(ack.challenge.as_ref()).expect("a challenge");
    assert_ne!(challenge, [0; 32]);
    // The bridge over TLS: a spectator session.
    let topic = hex::encode(spec.topic);
    let admin_hex = hex::encode(admin.address());
    let mut viewer = proxy.open(
        &format!("/pubsub/{topic}?binding=feed_topic&admin={admin_hex}"),
        &[],
    );
    let mut tcp_admin = broker.join(&spec, &admin.address());
    let mut admin_publisher = publisher(&spec, &admin, &tcp_admin);
    let sent = support::bodies(&publish(
        &mut admin_publisher,
        &mut tcp_admin,
        &[b"over tls"],
    ));
    assert_eq!(body_of(&recv_binary(&mut native, &broker)), sent[0]);
    assert_eq!(recv_binary(&mut viewer, &broker).as_ref(), b"over tls");
    // The per-peer bounds see the client nginx named, not the proxy.
    let (status, body) = broker.get(&format!(
        "/cohortz?key={}",
        hex::encode(spec.key().as_bytes())
    ));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"203.0.113.7\""), "{body}");
}
