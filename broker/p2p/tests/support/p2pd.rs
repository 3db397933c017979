//! A client of the go-libp2p daemon `p2pd` (an independent libp2p, as bee runs go-libp2p)
//! over its control socket: protobuf messages, varint-delimited, on a unix socket. Shared by
//! the tests that need a foreign libp2p (bps-p2p's interop test, the broker's end-to-end
//! test with p2pd playing bee), each including this file as a module.
//!
//! Owns: the daemon protocol's messages the tests use, [`Daemon`] (a running p2pd with a
//! P-256 identity like bee's, killed when dropped), and the requests: identify, connect,
//! open a stream, register a stream handler. Never: decides what a stream carries.
//! Streams are ended by dropping them, never by a half-close: p2pd resets a stream whose
//! other side half-closes, which is p2pd's behaviour, not a fault.
#![allow(dead_code)] // every including test uses a different subset

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use bps_p2p::{Multiaddr, PeerId, Protocol};
use prost::Message;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{UnixListener, UnixStream},
};

/// How long p2pd may take to bring up its control socket: generous, the machine is shared.
pub const START_DEADLINE: Duration = Duration::from_secs(60);

/// The daemon protocol's messages (p2pd.proto of go-libp2p-daemon; field numbers as there,
/// proto2 `required` fields written as optional ones).
pub mod pb {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Request {
        #[prost(int32, optional, tag = "1")]
        pub r#type: Option<i32>,
        #[prost(message, optional, tag = "2")]
        pub connect: Option<ConnectRequest>,
        #[prost(message, optional, tag = "3")]
        pub stream_open: Option<StreamOpenRequest>,
        #[prost(message, optional, tag = "4")]
        pub stream_handler: Option<StreamHandlerRequest>,
    }
    pub const IDENTIFY: i32 = 0;
    pub const CONNECT: i32 = 1;
    pub const STREAM_OPEN: i32 = 2;
    pub const STREAM_HANDLER: i32 = 3;

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ConnectRequest {
        #[prost(bytes = "vec", optional, tag = "1")]
        pub peer: Option<Vec<u8>>,
        #[prost(bytes = "vec", repeated, tag = "2")]
        pub addrs: Vec<Vec<u8>>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct StreamOpenRequest {
        #[prost(bytes = "vec", optional, tag = "1")]
        pub peer: Option<Vec<u8>>,
        #[prost(string, repeated, tag = "2")]
        pub proto: Vec<String>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct StreamHandlerRequest {
        #[prost(bytes = "vec", optional, tag = "1")]
        pub addr: Option<Vec<u8>>,
        #[prost(string, repeated, tag = "2")]
        pub proto: Vec<String>,
        #[prost(bool, optional, tag = "3")]
        pub balanced: Option<bool>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Response {
        #[prost(int32, optional, tag = "1")]
        pub r#type: Option<i32>,
        #[prost(message, optional, tag = "2")]
        pub error: Option<ErrorResponse>,
        #[prost(message, optional, tag = "3")]
        pub stream_info: Option<StreamInfo>,
        #[prost(message, optional, tag = "4")]
        pub identify: Option<IdentifyResponse>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ErrorResponse {
        #[prost(string, optional, tag = "1")]
        pub msg: Option<String>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct StreamInfo {
        #[prost(bytes = "vec", optional, tag = "1")]
        pub peer: Option<Vec<u8>>,
        #[prost(bytes = "vec", optional, tag = "2")]
        pub addr: Option<Vec<u8>>,
        #[prost(string, optional, tag = "3")]
        pub proto: Option<String>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct IdentifyResponse {
        #[prost(bytes = "vec", optional, tag = "1")]
        pub id: Option<Vec<u8>>,
        #[prost(bytes = "vec", repeated, tag = "2")]
        pub addrs: Vec<Vec<u8>>,
    }
}

/// The security transport p2pd offers (its only one, so a connection must use it).
#[derive(Debug, Clone, Copy)]
pub enum Security {
    Noise,
    Tls,
}

/// The p2pd binary the test runs: `P2PD`, as `scripts/p2pd` prints it.
pub fn binary() -> PathBuf {
    PathBuf::from(std::env::var_os("P2PD").expect("P2PD=<path of p2pd>: run scripts/p2p-interop"))
}

/// A running p2pd, killed when dropped.
pub struct Daemon {
    child: Child,
    pub control: PathBuf,
    pub peer: PeerId,
    /// Its TCP listening address on 127.0.0.1.
    pub addr: Multiaddr,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Daemon {
    /// Starts p2pd in `dir` (short: a unix socket path has at most 107 bytes) with only
    /// `security`, listening on 127.0.0.1, under a P-256 key as bee's, in the key file
    /// format both sides share.
    pub async fn start(binary: &Path, dir: &Path, security: Security) -> Daemon {
        let key_path = dir.join("p2pd.key");
        let (key, _) = bps_p2p::load_or_create(&key_path).unwrap();
        let control = dir.join("control.sock");
        let (noise, tls) = match security {
            Security::Noise => ("-noise=true", "-tls=false"),
            Security::Tls => ("-noise=false", "-tls=true"),
        };
        let child = Command::new(binary)
            .arg(format!("-listen=/unix{}", control.display()))
            .args([
                "-hostAddrs=/ip4/127.0.0.1/tcp/0",
                noise,
                tls,
                "-relay=false",
                "-q",
            ])
            .arg(format!("-id={}", key_path.display()))
            .stdin(Stdio::null())
            .spawn()
            .expect("p2pd did not start");
        // Owned from here, so a failure below still kills it.
        let mut daemon = Daemon {
            child,
            control,
            peer: key.public().to_peer_id(),
            addr: Multiaddr::empty(),
        };
        let waited = tokio::time::timeout(START_DEADLINE, async {
            while UnixStream::connect(&daemon.control).await.is_err() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        waited.await.expect("p2pd's control socket never came up");
        let identify = daemon.request(request(pb::IDENTIFY)).await.0;
        let identify = identify.identify.expect("no identify answer");
        let peer = PeerId::from_bytes(&identify.id.unwrap()).unwrap();
        assert_eq!(
            peer, daemon.peer,
            "p2pd runs with the P-256 key it was given"
        );
        daemon.addr = identify
            .addrs
            .into_iter()
            .filter_map(|a| Multiaddr::try_from(a).ok())
            .find(|a| a.to_string().contains("/tcp/"))
            .expect("p2pd listens on no TCP address");
        daemon
    }

    /// Sends one request on a new control connection and returns the answer and the
    /// connection (a stream's bytes follow on it after STREAM_OPEN).
    pub async fn request(&self, request: pb::Request) -> (pb::Response, UnixStream) {
        let mut conn = UnixStream::connect(&self.control).await.unwrap();
        conn.write_all(&request.encode_length_delimited_to_vec())
            .await
            .unwrap();
        let response: pb::Response = read_delimited(&mut conn).await;
        if let Some(error) = &response.error {
            panic!("p2pd refused {request:?}: {error:?}");
        }
        (response, conn)
    }

    /// p2pd dials `peer` at `addr`; returns once the connection is up.
    pub async fn connect(&self, peer: PeerId, addr: &Multiaddr) {
        let connect = pb::ConnectRequest {
            peer: Some(peer.to_bytes()),
            addrs: vec![addr.to_vec()],
        };
        self.request(pb::Request {
            connect: Some(connect),
            ..request(pb::CONNECT)
        })
        .await;
    }

    /// p2pd opens a `protocol` stream to `peer`; its bytes flow on the returned connection.
    pub async fn open_stream(&self, peer: PeerId, protocol: &str) -> UnixStream {
        let open = pb::StreamOpenRequest {
            peer: Some(peer.to_bytes()),
            proto: vec![protocol.into()],
        };
        let (response, conn) = self
            .request(pb::Request {
                stream_open: Some(open),
                ..request(pb::STREAM_OPEN)
            })
            .await;
        assert_eq!(
            response.stream_info.and_then(|i| i.proto).as_deref(),
            Some(protocol)
        );
        conn
    }

    /// Registers `protocols` with p2pd: every stream a peer opens on one of them arrives as
    /// a connection on the returned listener (at `path`), its [`pb::StreamInfo`] first.
    pub async fn handle(&self, path: &Path, protocols: &[&str]) -> UnixListener {
        let listener = UnixListener::bind(path).unwrap();
        let addr = Multiaddr::empty().with(Protocol::Unix(path.display().to_string().into()));
        let handler = pb::StreamHandlerRequest {
            addr: Some(addr.to_vec()),
            proto: protocols.iter().map(|p| (*p).to_owned()).collect(),
            balanced: Some(false),
        };
        self.request(pb::Request {
            stream_handler: Some(handler),
            ..request(pb::STREAM_HANDLER)
        })
        .await;
        listener
    }
}

/// A request of `kind` with no body yet.
fn request(kind: i32) -> pb::Request {
    pb::Request {
        r#type: Some(kind),
        ..Default::default()
    }
}

/// The next stream p2pd hands to a handler's `listener`: its protocol and its bytes.
pub async fn accept_stream(listener: &UnixListener) -> (String, UnixStream) {
    let (mut conn, _) = listener.accept().await.unwrap();
    let info: pb::StreamInfo = read_delimited(&mut conn).await;
    (info.proto.unwrap_or_default(), conn)
}

/// One varint-delimited message of the control protocol.
pub async fn read_delimited<M: Message + Default>(conn: &mut UnixStream) -> M {
    let mut len: u64 = 0;
    for shift in (0..64).step_by(7) {
        let byte = conn.read_u8().await.unwrap();
        len |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            break;
        }
    }
    let mut body = vec![0; usize::try_from(len).unwrap()];
    conn.read_exact(&mut body).await.unwrap();
    M::decode(body.as_slice()).unwrap()
}
