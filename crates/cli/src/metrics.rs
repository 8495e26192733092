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
    let line = String::from_utf8_lossy(&head);
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
    let mut resp = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if method != "HEAD" {
        resp.extend_from_slice(body.as_bytes());
    }
    s.write_all(&resp)?;
    s.flush()
}
