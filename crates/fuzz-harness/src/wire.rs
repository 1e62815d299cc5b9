//! The wire decoder's fuzz check (`wire_decode`): what a server's connection does with bytes
//! from the network, and the properties every decoded frame must have.
//!
//! Shared by the `cargo fuzz` target and the stable loop in `crates/proto/tests/fuzz_corpus.rs`.

use std::os::fd::OwnedFd;
use std::sync::{Arc, OnceLock};

use iosets_proto::local::{PeerRegion, Region};
use iosets_proto::{
    decode, encode, frame_len, Bytes, Frame, Request, DEFAULT_MAX_FRAME, HEADER_LEN,
};

/// The target as the tests run it (`fuzz/corpus/wire_decode`, inputs up to 4096 bytes).
pub const TARGET: crate::mutator::Target = crate::mutator::Target {
    name: "wire_decode",
    dict: DICT,
    max_len: 4096,
    check: wire_decode,
};

/// Tokens worth inserting into frames: the version byte, flag words, operation codes near the
/// ends of their range, and lengths at a boundary.
pub const DICT: &[&[u8]] = &[
    &[3],
    &[1],
    &[2],
    &[0x1f, 0],
    &[0x20, 0],
    &[0xff, 0xff],
    &[0xff, 0xff, 0xff, 0xff],
    &[0, 0, 0, 0x80],
    &[0, 0, 0xf0, 0x7f, 0, 0, 0, 0],
    &[0, 0, 0xf8, 0x7f, 0, 0, 0, 0],
    &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xef, 0x7f],
    &[0xc0, 0x80],
    &[0xed, 0xa0, 0x80],
];

/// The region length the same-host checks map (one page short of 1 MiB: not a power of two).
const REGION_LEN: usize = (1 << 20) - 4096;

/// A fresh descriptor of a client's region of [`REGION_LEN`] bytes (a sealed memfd, created once).
fn region_fd() -> OwnedFd {
    static REGION: OnceLock<Arc<Region>> = OnceLock::new();
    REGION
        .get_or_init(|| Region::create(REGION_LEN).expect("a memfd region for the fuzz target"))
        .fd()
        .try_clone_to_owned()
        .expect("dup of the region's descriptor")
}

/// That region as the server maps it ([`PeerRegion::attach`]), once.
fn peer_region() -> &'static PeerRegion {
    static PEER: OnceLock<PeerRegion> = OnceLock::new();
    PEER.get_or_init(|| {
        PeerRegion::attach(region_fd(), REGION_LEN as u64, 1 << 30)
            .expect("attach of a sealed region")
    })
}

/// Feeds `data` to the decoder as a connection would: frame after frame, the 4-byte length
/// checked by [`frame_len`] before the body is taken; and, if the prefix does not announce the
/// rest of the input exactly, the rest decoded as one frame anyway (the decoder must survive a
/// body of any length). Returns whether a frame decoded.
///
/// # Panics
/// If a decoded frame breaks a property: it re-encodes to a frame of the same length that
/// decodes to the same value and re-encodes to the same bytes; a shared-region range the
/// server's check accepts lies inside the region.
pub fn wire_decode(data: &[u8]) -> bool {
    let mut accepted = false;
    let mut rest = data;
    let mut first = true;
    while let Some(prefix) = rest.get(..4) {
        let prefix: [u8; 4] = [prefix[0], prefix[1], prefix[2], prefix[3]];
        let len = match frame_len(prefix, DEFAULT_MAX_FRAME) {
            Ok(len) => len,
            Err(_) => break,
        };
        assert!((HEADER_LEN..=DEFAULT_MAX_FRAME as usize).contains(&len));
        let Some(body) = rest.get(4..4 + len) else {
            break;
        };
        if first && len != data.len() - 4 {
            accepted |= check_body(&data[4..]);
        }
        first = false;
        accepted |= check_body(body);
        rest = &rest[4 + len..];
    }
    if first && data.len() >= 4 {
        accepted |= check_body(&data[4..]);
    }
    accepted
}

/// Decodes one frame body and checks the properties of what it decodes to.
fn check_body(body: &[u8]) -> bool {
    let Ok(frame) = decode(Bytes::copy_from_slice(body)) else {
        return false;
    };
    round_trip(body, &frame);
    if let Frame::Request(_, req) = &frame {
        same_host(req);
    }
    true
}

/// `decode(encode(f)) == f` for a frame `f` decoded from `body`, at the same length; and the
/// encoding is canonical (a second round gives the same bytes). The bytes themselves may differ
/// from `body`: a header field whose flag is clear (priority, credentials, phase stamp) is
/// read and ignored, and encoded as zeros.
fn round_trip(body: &[u8], frame: &Frame) {
    let enc = encode(frame).to_vec();
    assert_eq!(
        enc.len(),
        body.len() + 4,
        "re-encoding changed the frame's length: {frame:?}"
    );
    let len = frame_len([enc[0], enc[1], enc[2], enc[3]], u32::MAX);
    assert_eq!(len, Ok(body.len()), "re-encoded length prefix");
    let again = decode(Bytes::copy_from_slice(&enc[4..]))
        .unwrap_or_else(|e| panic!("a re-encoded frame does not decode ({e}): {frame:?}"));
    assert_eq!(&again, frame, "the round trip changed the frame");
    assert_eq!(
        encode(&again).to_vec(),
        enc,
        "the encoding is not canonical"
    );
}

/// What the server does with a request's untrusted same-host fields: a shared read's or
/// write's `(at, len)` is checked against the mapped region, an attach's announced length
/// against the descriptor's.
fn same_host(req: &Request) {
    match *req {
        Request::ReadShared { at, len, .. } | Request::WriteShared { at, len, .. } => {
            let region = peer_region();
            let inside = at
                .checked_add(u64::from(len))
                .is_some_and(|end| end <= region.len());
            match region.check(at, u64::from(len)) {
                Ok(start) => {
                    assert!(
                        inside,
                        "check accepted {len} bytes at {at} outside the region"
                    );
                    assert_eq!(start as u64, at);
                }
                Err(_) => assert!(
                    !inside,
                    "check refused {len} bytes at {at} inside the region"
                ),
            }
        }
        Request::AttachRegion { len } => {
            let got = PeerRegion::attach(region_fd(), len, 1 << 30);
            assert_eq!(
                got.is_ok(),
                len == REGION_LEN as u64,
                "attach of a {REGION_LEN}-byte region announced as {len} bytes"
            );
        }
        _ => {}
    }
}
