//! Malformed and oversized frames get an error reply or a closed connection; the server keeps
//! serving everyone else. Metrics answer on the same port.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;

use common::{create, read, write, Conn};
use iosets_proto::{Reply, Response, HEADER_LEN, VERSION};

const EBADMSG: i32 = 74;
const EMSGSIZE: i32 = 90;
const EPROTO: i32 = 71;

fn raw_frame(body: &[u8]) -> Vec<u8> {
    let mut v = (body.len() as u32).to_le_bytes().to_vec();
    v.extend_from_slice(body);
    v
}

#[test]
fn bad_frames_are_answered_and_others_keep_being_served() {
    let (_root, server) = common::serve("malformed", |config| {
        config.max_frame = 1 << 20;
    });
    let mut good = Conn::connect(server.addr(), 7);
    good.ok(create("f"));

    // A frame of the right length but nonsense inside: error reply, connection still usable.
    let mut bad = Conn::connect(server.addr(), 8);
    let mut body = vec![VERSION, 1, 0, 0];
    body.extend_from_slice(&42u64.to_le_bytes()); // tag
    body.extend_from_slice(&8u64.to_le_bytes()); // job
    body.extend_from_slice(&0f64.to_le_bytes()); // priority hint (absent)
    body.extend_from_slice(&[0u8; 8]); // uid, gid (absent)
    body.extend_from_slice(&[0u8; 8]); // phase stamp (absent)
    body.push(200); // unknown op
    bad.stream.write_all(&raw_frame(&body)).unwrap();
    let (tag, resp) = bad.recv().unwrap();
    assert_eq!(tag, 42, "the error echoes the tag it could read");
    assert!(
        matches!(resp, Response::Err { errno: EBADMSG, ref message } if message.contains("operation"))
    );
    // Wrong version, truncated fields, trailing bytes, unknown flags: each answered, none fatal.
    let mut cases = Vec::new();
    let mut v = body.clone();
    v[0] = 9;
    cases.push(v);
    let mut v = body.clone();
    v[HEADER_LEN - 1] = 4; // read, but no fields follow
    cases.push(v);
    let mut v = body.clone();
    v[HEADER_LEN - 1] = 6; // fsync
    v.extend_from_slice(&1u16.to_le_bytes());
    v.extend_from_slice(b"f");
    v.extend_from_slice(b"junk");
    cases.push(v);
    let mut v = body.clone();
    v[2] = 0x80;
    cases.push(v);
    let mut v = body.clone();
    v[1] = 2; // a response sent to the server
    v[HEADER_LEN - 1] = 6;
    v.extend_from_slice(&0i32.to_le_bytes());
    v.push(4);
    cases.push(v);
    for case in &cases {
        bad.stream.write_all(&raw_frame(case)).unwrap();
        let (_, resp) = bad.recv().expect("connection kept open");
        match resp {
            Response::Err { errno, .. } => assert!(errno == EBADMSG || errno == EPROTO),
            r => panic!("{r:?}"),
        }
    }
    // The same connection still works.
    assert!(matches!(
        bad.ok(write("f", 0, b"abc".to_vec())),
        Reply::Written(3)
    ));

    // An oversized length: an error reply, then the connection is closed (it cannot be resynced).
    let mut huge = Conn::connect(server.addr(), 9);
    huge.stream.write_all(&(2u32 << 20).to_le_bytes()).unwrap();
    let (_, resp) = huge.recv().unwrap();
    assert!(matches!(
        resp,
        Response::Err {
            errno: EMSGSIZE,
            ..
        }
    ));
    assert!(
        huge.recv().is_none(),
        "connection closed after an oversized frame"
    );
    // A length shorter than the header: same.
    let mut short = Conn::connect(server.addr(), 10);
    short.stream.write_all(&3u32.to_le_bytes()).unwrap();
    assert!(matches!(short.recv().unwrap().1, Response::Err { .. }));
    assert!(short.recv().is_none());
    // Garbage and a half frame then hang-up: nothing breaks.
    let mut g = TcpStream::connect(server.addr()).unwrap();
    g.write_all(&[0xff; 3]).unwrap();
    drop(g);
    let mut g = TcpStream::connect(server.addr()).unwrap();
    g.write_all(&100u32.to_le_bytes()).unwrap();
    g.write_all(&[1, 2, 3]).unwrap();
    drop(g);

    // The first client never noticed.
    match good.ok(read("f", 0, 10)) {
        Reply::Data(d) => assert_eq!(&d[..], b"abc"),
        r => panic!("{r:?}"),
    }
    // A read larger than a frame can carry is refused, not attempted.
    let (errno, _) = good.errno(read("f", 0, 2 << 20));
    assert_eq!(errno, EMSGSIZE);

    // Metrics on the admin address; the bad frames are counted.
    let admin = server.admin_addr().unwrap();
    let mut http = TcpStream::connect(admin).unwrap();
    http.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    http.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
    assert!(text.contains("# TYPE iosets_queue_wait_seconds histogram"));
    assert!(text.contains("iosets_job_bytes_total{job_id=\"8\",direction=\"write\"} 3"));
    let bad_frames: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("iosets_bad_frames_total "))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(bad_frames, 1 + cases.len() as u64 + 2);
    let mut http = TcpStream::connect(admin).unwrap();
    http.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    let mut text = String::new();
    http.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("HTTP/1.1 404"), "{text}");
    // On the data port, HTTP is pointed to the admin address.
    let mut http = TcpStream::connect(server.addr()).unwrap();
    http.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
    let mut text = String::new();
    http.read_to_string(&mut text).unwrap();
    assert!(
        text.starts_with("HTTP/1.1 421") && text.contains(&format!("http://{admin}/metrics")),
        "{text}"
    );
    let report = server.shutdown().unwrap();
    assert!(report.balanced);
}
