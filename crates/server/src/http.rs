//! A minimal HTTP/1.x responder for `GET /metrics` on the server's port: one request per
//! connection, then close. Anything but `GET /metrics` gets a 404; an over-long request a 431;
//! a request head not sent within 10 s closes the connection.

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
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

/// Answers one HTTP request whose first four bytes (`GET `) were already read.
pub(crate) async fn serve(shared: &Shared, mut stream: TcpStream) {
    let head = read_head(&mut stream).await;
    let Some(head) = head else { return };
    // `head` starts after "GET ": "/metrics HTTP/1.1\r\n...".
    let target = head.split_whitespace().next().unwrap_or("");
    let (status, body, ctype) = if head.is_empty() {
        (
            "431 Request Header Fields Too Large",
            String::new(),
            "text/plain",
        )
    } else if target == "/metrics" || target.starts_with("/metrics?") {
        (
            "200 OK",
            crate::metrics::render(shared),
            "text/plain; version=0.0.4; charset=utf-8",
        )
    } else {
        (
            "404 Not Found",
            "only /metrics is served here\n".into(),
            "text/plain",
        )
    };
    let resp = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(resp.as_bytes()).await;
    let _ = stream.shutdown().await;
}
