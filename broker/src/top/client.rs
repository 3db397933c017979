//! The scrape client: one plain HTTP/1.1 GET on the broker's admin address.
//!
//! Owns: [`AdminClient`] (the address and the deadline of every request) and the reading of
//! one `Connection: close` response: status line, `Content-Length`, body.
//! Never does: keep connections alive, follow redirects, speak chunked encoding or TLS. The
//! admin server answers every request with `Content-Length` and closes (admin.rs), and it
//! listens on loopback or a private address, so none of these is needed.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Largest response read: `/cohortz` at its largest page (1000 cohorts with their peers)
/// is a few MiB; anything far beyond is not the admin server.
pub const RESPONSE_BYTES_MAX: usize = 64 * 1024 * 1024;

/// The broker's admin endpoints, asked with a deadline per request.
#[derive(Clone, Debug)]
pub struct AdminClient {
    /// `HOST:PORT` as given; resolved at every request, so a restarted broker on a new
    /// address behind the same name is found again.
    admin: String,
    /// Time one request may take in all: connect, send, and read the whole response.
    deadline: Duration,
}

impl AdminClient {
    /// A client for the admin address `admin` (`HOST:PORT`).
    #[must_use]
    pub fn new(admin: &str, deadline: Duration) -> AdminClient {
        AdminClient {
            admin: admin.to_owned(),
            deadline,
        }
    }

    /// The admin address as given.
    #[must_use]
    pub fn admin(&self) -> &str {
        &self.admin
    }

    /// `GET path`: the body of a 200 answer.
    ///
    /// # Errors
    /// A sentence saying what failed: resolving, connecting, a timeout, a status other
    /// than 200 (with the first line of the body), or a response that is not HTTP.
    pub fn get(&self, path: &str) -> Result<String, String> {
        let started = Instant::now();
        let addrs: Vec<SocketAddr> = self
            .admin
            .to_socket_addrs()
            .map_err(|error| format!("cannot resolve {}: {error}", self.admin))?
            .collect();
        let mut last_error = format!("{} resolves to no address", self.admin);
        for addr in addrs {
            match self.get_from(addr, path, started) {
                Ok(body) => return Ok(body),
                Err(error) => last_error = error,
            }
        }
        Err(last_error)
    }

    fn get_from(&self, addr: SocketAddr, path: &str, started: Instant) -> Result<String, String> {
        let left = |what: &str| {
            self.deadline
                .checked_sub(started.elapsed())
                .filter(|left| !left.is_zero())
                .ok_or_else(|| {
                    format!(
                        "GET {path} on {addr}: no answer within {:?} ({what})",
                        self.deadline
                    )
                })
        };
        let mut stream = TcpStream::connect_timeout(&addr, left("connecting")?)
            .map_err(|error| format!("cannot connect to {addr}: {error}"))?;
        let io_error = |error: std::io::Error| format!("GET {path} on {addr}: {error}");
        stream
            .set_write_timeout(Some(left("sending")?))
            .map_err(io_error)?;
        stream
            .write_all(
                format!(
                    "GET {path} HTTP/1.1\r\nHost: {}\r\nUser-Agent: bps-broker-top\r\nConnection: close\r\n\r\n",
                    self.admin
                )
                .as_bytes(),
            )
            .map_err(io_error)?;
        let mut response = Vec::new();
        let mut chunk = [0_u8; 64 * 1024];
        loop {
            stream
                .set_read_timeout(Some(left("reading")?))
                .map_err(io_error)?;
            match stream.read(&mut chunk) {
                Ok(0) => break,
                Ok(read) => {
                    response.extend_from_slice(&chunk[..read]);
                    if response.len() > RESPONSE_BYTES_MAX {
                        return Err(format!(
                            "GET {path} on {addr}: response larger than {RESPONSE_BYTES_MAX} bytes"
                        ));
                    }
                }
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(error) => return Err(io_error(error)),
            }
        }
        let body =
            parse_response(&response).map_err(|error| format!("GET {path} on {addr}: {error}"))?;
        Ok(body)
    }
}

/// The body of a complete `Connection: close` response, when its status is 200.
fn parse_response(response: &[u8]) -> Result<String, String> {
    let text = String::from_utf8_lossy(response);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or("the answer is not an HTTP response")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or_default();
    let status: u16 = parts
        .next()
        .and_then(|status| status.parse().ok())
        .filter(|_| version.starts_with("HTTP/1."))
        .ok_or_else(|| format!("not an HTTP status line: {status_line:?}"))?;
    let length = lines
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .map(|(_, value)| value.trim().parse::<usize>())
        .transpose()
        .map_err(|_| "a bad Content-Length".to_owned())?;
    let body = match length {
        Some(length) if length > body.len() => {
            return Err(format!(
                "the response ended after {} of {length} body bytes",
                body.len()
            ));
        }
        Some(length) => &body[..length],
        None => body,
    };
    if status != 200 {
        let reason = body.lines().next().unwrap_or_default();
        return Err(format!("answered {status}: {reason}"));
    }
    Ok(body.to_owned())
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;
    use std::thread;

    use super::*;

    #[test]
    fn reads_the_body_of_a_200_and_names_other_statuses() {
        let ok = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello";
        assert_eq!(parse_response(ok), Ok("hello".to_owned()));
        let unavailable =
            b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 9\r\n\r\ndraining\n";
        assert_eq!(
            parse_response(unavailable),
            Err("answered 503: draining".to_owned())
        );
        assert!(parse_response(b"SSH-2.0-OpenSSH\r\n\r\n").is_err());
        assert!(parse_response(b"no head at all").is_err());
        let short = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc";
        assert!(parse_response(short).is_err_and(|error| error.contains("3 of 10")));
    }

    #[test]
    fn gets_from_a_real_socket_and_reports_a_closed_port() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let server = thread::spawn(move || {
            let (mut stream, _) = listener.accept().expect("accept");
            let mut head = Vec::new();
            let mut byte = [0_u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                stream.read_exact(&mut byte).expect("read the request");
                head.push(byte[0]);
            }
            stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
                .expect("answer");
            String::from_utf8(head).expect("ascii request")
        });
        let client = AdminClient::new(&addr.to_string(), Duration::from_secs(30));
        assert_eq!(client.get("/metrics"), Ok("ok".to_owned()));
        let request = server.join().expect("server");
        assert!(
            request.starts_with("GET /metrics HTTP/1.1\r\n"),
            "{request}"
        );

        // Nothing listens on a port just released.
        let closed = TcpListener::bind("127.0.0.1:0").expect("bind");
        let closed_addr = closed.local_addr().expect("addr");
        drop(closed);
        let error = AdminClient::new(&closed_addr.to_string(), Duration::from_secs(30))
            .get("/metrics")
            .expect_err("nothing listens");
        assert!(error.contains("cannot connect"), "{error}");
        let error = AdminClient::new("no port here", Duration::from_secs(30))
            .get("/metrics")
            .expect_err("not an address");
        assert!(error.contains("cannot resolve"), "{error}");
    }
}
