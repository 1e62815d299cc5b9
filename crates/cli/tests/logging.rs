//! `iosets serve` logs (issue 16, D6): JSON lines on standard error with `--log-format json`,
//! every refusal with the peer's address, a bad RUST_LOG refused; SIGTERM exits 0.

use crate::common;

use std::io::Write;
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{scratch, signal, spawn_server, word_after};
use iosets_proto::{encode, Control, Frame, Header, Request};
use iosets_types::JobId;

#[test]
fn json_logs_name_every_refusal_and_its_peer() {
    let dir = scratch("logging");
    std::fs::write(dir.join("token"), "right-token\n").unwrap();
    let (child, line) = spawn_server(
        Command::new(env!("CARGO_BIN_EXE_iosets"))
            .current_dir(&dir)
            .args([
                "--log-format",
                "json",
                "serve",
                "--root",
                ".",
                "--listen",
                "127.0.0.1:0",
                "--token-file",
                "token",
                "--insecure-loopback",
            ])
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let addr = word_after(&line, "listening on ");
    // A control request with a wrong token, and a frame that does not decode.
    let mut s = TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let h = Header::new(1, JobId(0));
    let ctl = encode(&Frame::Request(
        h,
        Request::Control {
            token: "wrong".into(),
            op: Control::Stats,
        },
    ));
    s.write_all(&ctl.head).unwrap();
    let mut bad = 48u32.to_le_bytes().to_vec();
    bad.extend_from_slice(&[9u8; 48]);
    s.write_all(&bad).unwrap();
    let mut answers = [0u8; 64];
    let _ = std::io::Read::read(&mut s, &mut answers);
    std::thread::sleep(Duration::from_millis(300));
    drop(s);
    // SIGTERM: a clean stop exits 0.
    signal(child.id(), "TERM");
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "exit {:?}", out.status);
    let err = String::from_utf8_lossy(&out.stderr);
    let events: Vec<serde_json::Value> = err
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let field = |e: &serde_json::Value, k: &str| e["fields"][k].as_str().map(str::to_string);
    let has = |refusal: &str| {
        events.iter().any(|e| {
            field(e, "refusal").as_deref() == Some(refusal)
                && field(e, "peer").as_deref() == Some("127.0.0.1")
                && e["level"] == "WARN"
        })
    };
    assert!(has("control_token"), "{err}");
    assert!(has("bad_frame"), "{err}");
    assert!(
        events
            .iter()
            .any(|e| field(e, "message").as_deref() == Some("SIGTERM: stopping gracefully")),
        "{err}"
    );
    assert!(
        events
            .iter()
            .any(|e| field(e, "message").as_deref() == Some("serving")),
        "{err}"
    );
}

#[test]
fn a_bad_log_filter_or_format_is_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_iosets"))
        .arg("policies")
        .env("RUST_LOG", "==nonsense[")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("RUST_LOG"));
    let out = Command::new(env!("CARGO_BIN_EXE_iosets"))
        .args(["--log-format", "xml", "policies"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("xml"));
}
