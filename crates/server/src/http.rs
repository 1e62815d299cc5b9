//! A minimal HTTP/1.x responder on the server's admin address (`admin_listen`, loopback by
//! default, apart from the data port): `GET /metrics` (Prometheus text), `GET /jobs` (the job
//! statistics, JSON, as `iosets ctl jobs --json`) and `GET /stats` (server statistics, JSON); one
//! request per connection, then close. Anything else gets a 404, another method a 405, an
//! over-long request a 431; a request head not sent within 10 s closes the connection. An HTTP
//! request on the data port is answered 421 with the admin address.

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::state::Shared;

const MAX_REQUEST: usize = 8192;
/// How long a client may take to send its request head.
const READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The request head (request line and headers), read through a limit of [`MAX_REQUEST`] bytes
/// and within [`READ_TIMEOUT`]; `Some("")` if it is longer, `None` if the peer went away or was
/// too slow.
async fn read_head<R: AsyncRead + Unpin>(rd: R) -> Option<String> {
    let mut rd = BufReader::new(rd.take(MAX_REQUEST as u64 + 1));
    let read = async {
        let mut head = String::new();
        loop {
            let mut line = String::new();
            let n = rd.read_line(&mut line).await.ok()?;
            head.push_str(&line);
            if head.len() > MAX_REQUEST {
                return Some(String::new());
            }
            if n == 0 {
                return None;
            }
            if line == "\r\n" || line == "\n" {
                return Some(head);
            }
        }
    };
    tokio::time::timeout(READ_TIMEOUT, read)
        .await
        .ok()
        .flatten()
}

/// Answers one HTTP request on the admin address.
pub(crate) async fn serve_admin(shared: &Shared, mut stream: TcpStream) {
    let mut method = [0u8; 4];
    let got = tokio::time::timeout(READ_TIMEOUT, stream.read_exact(&mut method)).await;
    if !matches!(got, Ok(Ok(_))) {
        return;
    }
    if &method != b"GET " {
        let _ = respond(
            &mut stream,
            "405 Method Not Allowed",
            "only GET is served here\n",
            "text/plain",
        )
        .await;
        return;
    }
    let head = read_head(&mut stream).await;
    let Some(head) = head else { return };
    // `head` starts after "GET ": "/metrics HTTP/1.1\r\n...".
    let target = head.split_whitespace().next().unwrap_or("");
    let path = target.split('?').next().unwrap_or("");
    let json = |v: String| ("200 OK", v, "application/json");
    let (status, body, ctype) = if head.is_empty() {
        (
            "431 Request Header Fields Too Large",
            String::new(),
            "text/plain",
        )
    } else {
        match path {
            "/metrics" => (
                "200 OK",
                crate::metrics::render(shared),
                "text/plain; version=0.0.4; charset=utf-8",
            ),
            "/jobs" => json(
                serde_json::to_string(&crate::control::jobs(shared)).expect("report serialises"),
            ),
            "/stats" => json(
                serde_json::to_string(&crate::control::stats(shared)).expect("report serialises"),
            ),
            _ => (
                "404 Not Found",
                "served here: /metrics, /jobs, /stats\n".into(),
                "text/plain",
            ),
        }
    };
    let _ = respond(&mut stream, status, &body, ctype).await;
}

/// Answers an HTTP request that came to the data port: the admin address is elsewhere.
pub(crate) async fn misdirected<W: AsyncWrite + Unpin>(shared: &Shared, wr: &mut W) {
    let body = match shared.admin {
        Some(a) => format!(
            "metrics and job statistics are served on the admin address: http://{a}/metrics\n"
        ),
        None => "this server has no admin address (admin_listen)\n".to_string(),
    };
    let _ = tokio::time::timeout(
        READ_TIMEOUT,
        respond(wr, "421 Misdirected Request", &body, "text/plain"),
    )
    .await;
}

async fn respond<W: AsyncWrite + Unpin>(
    w: &mut W,
    status: &str,
    body: &str,
    ctype: &str,
) -> std::io::Result<()> {
    let resp = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    w.write_all(resp.as_bytes()).await?;
    w.write_all(body.as_bytes()).await?;
    w.shutdown().await
}
