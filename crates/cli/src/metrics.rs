//! `-x metrics=ADDR:PORT`: serves the aggregations at `http://ADDR:PORT/metrics` in the OpenMetrics
//! text format while tracing runs. The main loop publishes a snapshot of the text after each
//! aggregation snapshot; a thread of its own answers scrapes from the latest one, one connection at
//! a time with short timeouts, so a slow or vanished scraper never stops or slows tracing.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dtrace_consumer::oformat::openmetrics::CONTENT_TYPE;

/// How long a scraper may take to send its request or read the answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest request head read.
const MAX_REQUEST: usize = 8192;

/// The serving thread's handle: where snapshots are published.
pub struct MetricsServer {
    latest: Arc<Mutex<Arc<String>>>,
    addr: std::net::SocketAddr,
}

impl MetricsServer {
    /// Binds `addr` (`HOST:PORT`) and starts serving an empty exposition.
    pub fn start(addr: &str) -> Result<MetricsServer, String> {
        let listener = TcpListener::bind(addr).map_err(|e| format!("{addr}: {e}"))?;
        let local = listener.local_addr().map_err(|e| format!("{addr}: {e}"))?;
        let latest = Arc::new(Mutex::new(Arc::new(String::from("# EOF\n"))));
        let shared = latest.clone();
        std::thread::Builder::new()
            .name("dtrace-metrics".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    let Ok(stream) = conn else { continue };
                    let text = match shared.lock() {
                        Ok(t) => t.clone(),
                        Err(p) => p.into_inner().clone(),
                    };
                    // A scraper's failure is its own: nothing to report, nothing to stop.
                    let _ = answer(stream, &text);
                }
            })
            .map_err(|e| format!("{addr}: {e}"))?;
        Ok(MetricsServer {
            latest,
            addr: local,
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// Publishes a new exposition.
    pub fn publish(&self, text: String) {
        let text = Arc::new(text);
        match self.latest.lock() {
            Ok(mut t) => *t = text,
            Err(p) => *p.into_inner() = text,
        }
    }
}

/// What a request head (outside bytes, possibly garbage) asks for: the status, content type and
/// body of the answer, and whether the body is sent (not for `HEAD`): the exposition `text` for
/// `GET`/`HEAD /metrics` (any query ignored), 404 for other paths, 405 for other methods.
fn route<'a>(head: &[u8], text: &'a str) -> (&'static str, &'static str, &'a str, bool) {
    let line = String::from_utf8_lossy(head);
    let mut parts = line.lines().next().unwrap_or("").split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let (status, ctype, body) = match (method, path) {
        ("GET" | "HEAD", "/metrics") => ("200 OK", CONTENT_TYPE, text),
        ("GET" | "HEAD", _) => ("404 Not Found", "text/plain", "not found; try /metrics\n"),
        _ => (
            "405 Method Not Allowed",
            "text/plain",
            "only GET and HEAD\n",
        ),
    };
    (status, ctype, body, method != "HEAD")
}

/// Reads one request head and answers it: the exposition for `GET`/`HEAD /metrics`, 404 for other
/// paths, 405 for other methods.
fn answer(mut s: TcpStream, text: &str) -> std::io::Result<()> {
    s.set_read_timeout(Some(CLIENT_TIMEOUT))?;
    s.set_write_timeout(Some(CLIENT_TIMEOUT))?;
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_REQUEST {
        let n = s.read(&mut buf)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let (status, ctype, body, with_body) = route(&head, text);
    let mut resp = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if with_body {
        resp.extend_from_slice(body.as_bytes());
    }
    s.write_all(&resp)?;
    s.flush()
}

#[cfg(test)]
mod tests {
    use super::route;

    #[test]
    fn requests_are_routed() {
        let r = route(b"GET /metrics?x=1 HTTP/1.1\r\nHost: h\r\n\r\n", "# EOF\n");
        assert_eq!(r.0, "200 OK");
        assert_eq!(r.2, "# EOF\n");
        assert!(r.3);
        assert!(!route(b"HEAD /metrics HTTP/1.0\r\n\r\n", "t").3);
        assert_eq!(route(b"GET / HTTP/1.1\r\n\r\n", "t").0, "404 Not Found");
        assert_eq!(
            route(b"POST /metrics HTTP/1.1\r\n", "t").0,
            "405 Method Not Allowed"
        );
        assert_eq!(route(b"", "t").0, "405 Method Not Allowed");
    }

    /// Garbage request heads (random and mutated) never panic.
    #[test]
    fn random_request_heads_never_panic() {
        let mut r = dtrace_testkit::XorShift(0x5eed);
        let seed = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n".to_vec();
        for i in 0..5000 {
            let mut head = if i % 2 == 0 { seed.clone() } else { Vec::new() };
            let n = (r.next() % 64) as usize;
            for _ in 0..n {
                let b = r.next() as u8;
                match r.next() % 3 {
                    0 if !head.is_empty() => {
                        let at = (r.next() as usize) % head.len();
                        head[at] = b;
                    }
                    _ => head.push(b),
                }
            }
            let _ = route(&head, "# EOF\n");
        }
    }
}
