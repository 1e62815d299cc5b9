//! The wire decoder under the stable fuzz loop: every seed of `fuzz/corpus/wire_decode` and mutants
//! of them never panic the decoder, and every frame that decodes survives a round trip
//! (`crates/fuzz-harness/src/wire.rs` says what is checked; `crates/fuzz-harness/src/mutator.rs`
//! how inputs are made).
//!
//! - `seeds_and_mutants_never_panic_and_round_trip`: 200,000 inputs, in the test command.
//! - `long_run` (ignored): `IOSETS_FUZZ_INPUTS` inputs (default 10 M), from `scripts/fuzz.sh`.
//! - `write_seed_corpus` (ignored): regenerates the corpus from the property tests' strategies
//!   (`IOSETS_FUZZ_WRITE_CORPUS=1`, see `fuzz/README.md`).

use crate::strategies;

use iosets_fuzz_harness::wire;
use std::collections::BTreeMap;

use iosets_proto::{
    decode, encode, Bytes, Control, Frame, Header, OpCode, Request, Response, DEFAULT_MAX_FRAME,
};
use iosets_types::{JobId, Priority};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;

#[test]
fn every_seed_is_a_valid_frame_stream() {
    let corpus = wire::TARGET.corpus();
    assert!(corpus.len() >= 60, "only {} seeds", corpus.len());
    for (i, seed) in corpus.iter().enumerate() {
        assert!(wire::wire_decode(seed), "seed {i} does not decode");
    }
}

iosets_fuzz_harness::stable_loop!(
    wire::TARGET,
    seeds_and_mutants_never_panic_and_round_trip,
    200_000
);

/// A header with every optional field, or none.
fn headers() -> [Header; 2] {
    [
        Header::new(1, JobId(7)),
        Header {
            tag: u64::MAX,
            job: JobId(u64::MAX),
            priority: Priority::new(0.001),
            creds: Some(iosets_proto::Creds::new(1000, 100)),
            phase: Some(iosets_types::UnixNanos(1_764_000_000_000_000_000)),
            elsewhere: Some(iosets_proto::Elsewhere {
                ops: 3,
                bytes: 1 << 20,
            }),
        },
    ]
}

/// The seed corpus: up to three frames of each request operation and of each response shape
/// drawn from the property tests' strategies (deterministic runner), the control requests those
/// do not draw, and a stream of two frames.
fn seed_frames() -> BTreeMap<String, Vec<u8>> {
    let mut runner = TestRunner::deterministic();
    let mut out = BTreeMap::new();
    let add = |name: String, frame: &Frame, out: &mut BTreeMap<String, Vec<u8>>| {
        for i in 0..3 {
            let key = format!("{name}-{i}");
            if let std::collections::btree_map::Entry::Vacant(slot) = out.entry(key) {
                slot.insert(encode(frame).to_vec());
                return;
            }
        }
    };
    let strategy = (strategies::header(), strategies::request());
    for _ in 0..400 {
        let (h, r) = strategy.new_tree(&mut runner).expect("a value").current();
        let shared = matches!(r, Request::ReadShared { .. } | Request::WriteShared { .. });
        let name = format!(
            "req-{}{}",
            r.op().as_str(),
            if shared { "-shared" } else { "" }
        );
        add(name, &Frame::Request(h, r), &mut out);
    }
    let strategy = (strategies::header(), strategies::response());
    let ops = [OpCode::Lookup, OpCode::Read, OpCode::Readdir, OpCode::Jobs];
    for i in 0..200 {
        let (h, r) = strategy.new_tree(&mut runner).expect("a value").current();
        let shape = match &r {
            Response::Err { .. } => "err".to_owned(),
            Response::Ok(reply) => {
                let debug = format!("{reply:?}");
                debug
                    .split(|c: char| !c.is_ascii_alphanumeric())
                    .next()
                    .unwrap_or("reply")
                    .to_ascii_lowercase()
            }
        };
        add(
            format!("resp-{shape}"),
            &Frame::Response(h, ops[i % ops.len()], r),
            &mut out,
        );
    }
    let [plain, full] = headers();
    let controls = [
        Control::RuleAdd {
            rule: "name=a match=job=1 threads=50".into(),
            rank: Some(0),
        },
        Control::RuleAdd {
            rule: "r".into(),
            rank: None,
        },
        Control::RuleDel { name: "a".into() },
        Control::Rules,
        Control::ShareSet {
            node: "account=physics".into(),
            weight: Some(3.0),
        },
        Control::JobInfo {
            job: JobId(42),
            account: Some("physics".into()),
            nodes: Some(4),
        },
        Control::Shares,
    ];
    for op in controls {
        let name = format!("req-{}", op.op().as_str());
        add(
            name,
            &Frame::Request(
                plain,
                Request::Control {
                    token: "secret".into(),
                    op,
                },
            ),
            &mut out,
        );
    }
    add(
        "req-phase_end".into(),
        &Frame::Request(full, Request::PhaseEnd),
        &mut out,
    );
    add(
        "req-job_name".into(),
        &Frame::Request(
            full,
            Request::JobName {
                name: "dd.1000".into(),
            },
        ),
        &mut out,
    );
    let mut stream = encode(&Frame::Request(
        full,
        Request::Write {
            path: "dir/file".into(),
            offset: 4096,
            data: Bytes::from_static(b"0123456789abcdef"),
        },
    ))
    .to_vec();
    stream.extend(
        encode(&Frame::Request(
            plain,
            Request::Fsync {
                path: "dir/file".into(),
            },
        ))
        .to_vec(),
    );
    out.insert("stream-write-fsync".into(), stream);
    out
}

#[test]
fn seed_frames_decode_as_generated() {
    for (name, bytes) in seed_frames() {
        if name.starts_with("stream") {
            continue;
        }
        assert!(bytes.len() < DEFAULT_MAX_FRAME as usize);
        assert!(decode(Bytes::from(bytes[4..].to_vec())).is_ok(), "{name}");
    }
}

#[test]
#[ignore = "writes fuzz/corpus/wire_decode: IOSETS_FUZZ_WRITE_CORPUS=1"]
fn write_seed_corpus() {
    wire::TARGET.write_seeds(seed_frames());
}
