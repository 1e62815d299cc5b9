//! The trace parsers under the stable fuzz loop: every seed of `fuzz/corpus/trace_parse` and
//! mutants of them never panic a reader, errors name a line of the input, and a request trace that
//! reads comes back the same after a write-read round trip (`crates/fuzz-harness/src/trace.rs` says
//! what is checked; `crates/fuzz-harness/src/mutator.rs` how inputs are made).
//!
//! - `seeds_and_mutants_never_panic`: 100,000 inputs, in the test command.
//! - `long_run` (ignored): `IOSETS_FUZZ_INPUTS` inputs (default 10 M), from `scripts/fuzz.sh`.
//! - `write_seed_corpus` (ignored): regenerates the corpus from `tests/data` and the trace
//!   writer (`IOSETS_FUZZ_WRITE_CORPUS=1`, see `fuzz/README.md`).

use iosets_fuzz_harness::mutator::selector_seed;
use iosets_fuzz_harness::trace;
use std::collections::BTreeMap;
use std::path::Path;

use iosets_period::trace::{RequestRecord, TraceOp, TraceWriter};
use iosets_period::{JobId, Nanos};

#[test]
fn every_reader_has_seeds_that_it_reads() {
    trace::TARGET.assert_every_selector_read(&trace::SELECTORS);
}

iosets_fuzz_harness::stable_loop!(trace::TARGET, seeds_and_mutants_never_panic, 100_000);

/// The first `n` lines of a sample of `tests/data`.
fn sample(name: &str, n: usize) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    text.lines().take(n).map(|l| format!("{l}\n")).collect()
}

/// A request trace as the server writes it.
fn written(records: &[RequestRecord], clock_zero: Option<u64>) -> String {
    let mut w = match clock_zero {
        Some(z) => TraceWriter::with_clock_zero(Vec::new(), z).unwrap(),
        None => TraceWriter::new(Vec::new()).unwrap(),
    };
    for r in records {
        w.write(r).unwrap();
    }
    String::from_utf8(w.into_inner().unwrap()).unwrap()
}

/// The seed corpus: for each reader, the shipped samples (their first lines) and small texts
/// in each dialect; request traces from the trace writer, with every optional column, none,
/// paths that need quoting, and columns reordered.
fn seeds() -> BTreeMap<String, String> {
    let mut full = RequestRecord::new(JobId(3), TraceOp::Write, 4096, 1 << 20, Nanos(1_000));
    full.tag = Some(17);
    full.path = Some("dir/a,b \"q\".dat".into());
    full.dispatch = Some(Nanos(1_500));
    full.complete = Some(Nanos(9_000));
    full.errno = Some(0);
    let mut failed = RequestRecord::new(JobId(u64::MAX), TraceOp::Read, 0, 0, Nanos(u64::MAX));
    failed.complete = Some(Nanos(u64::MAX));
    failed.errno = Some(5);
    let fsync = RequestRecord::new(JobId(0), TraceOp::Fsync, 0, 0, Nanos(0));
    let other = RequestRecord {
        complete: Some(Nanos(20)),
        ..RequestRecord::new(JobId(9), TraceOp::Other, 1, 2, Nanos(10))
    };
    let requests = written(&[full.clone(), failed.clone(), other.clone()], None);
    let requests_zero = written(&[full.clone(), fsync], Some(1_764_000_000_000_000_000));
    let completed = written(&[full, failed, other], Some(5));
    let minimal = "job,op,offset,len,arrival_ns\n1,read,0,4096,10\n1,WRITE,4096,4096,20\n";
    let cr = minimal.replace('\n', "\r");
    let reordered = "# a comment\n\nArrival_ns , LEN,offset,op,job,complete_ns\n\
                     10,4096,0,read,1,30\n\n# between\n20,0,0,fsync,2,\n";
    let seconds = "start,end,bytes,job\n0.5,1.5,1048576,1\n2,2.25,4096,2\n";
    let seconds_free = "# old dialect\nbytes, end_s ,start_s\n100,2.0,1.0\n0,3,3\n";
    let jsonl = "{\"start\": 1.0, \"end\": 2.0, \"bytes\": 4096, \"job\": 2}\n\
                 # comment\n{\"start\": 3, \"end\": 3.5, \"bytes\": 0}\n";
    let ftio =
        "{\n  \"t\": [0.0, 1.0, 2.5, 4.0],\n  \"b\": [1000.0, 0.0, 2e6, 0.0],\n  \"job\": 4\n}\n";
    let tmio_rank = "{\"write_async_t\": {\"bandwidth\": {\"b_rank_avr\": [1e6, 2e6], \
                     \"t_rank_s\": [0.0, 1.0], \"t_rank_e\": [0.5, 1.25]}}}\n";
    let dxt = "# DXT, file_id: 1, file_name: /a\n# jobid: 12\n\
               X_POSIX 0 write 0 0 1048576 0.1000 0.2000\n\
               X_MPIIO 0 read 1 1048576 4096 0.3 0.4 [OST 3]\n";

    let mut out = BTreeMap::new();
    let mut add = |sel: u8, name: &str, text: &str| {
        let (_, reader) = trace::SELECTORS[usize::from(sel - b'0')];
        out.insert(format!("{}-{reader}-{name}", sel as char), text.to_owned());
    };
    add(b'0', "requests", &requests);
    add(b'0', "reordered", reordered);
    add(b'0', "seconds", seconds);
    add(b'0', "seconds-free", seconds_free);
    add(b'0', "sample", &sample("requests.csv", 20));
    add(b'0', "completed", &completed);
    add(b'1', "small", jsonl);
    add(b'1', "sample", &sample("requests.jsonl", 12));
    add(b'2', "small", ftio);
    add(b'2', "sample", &sample("ftio.json", 1));
    add(b'3', "rank", tmio_rank);
    add(b'3', "sample", &sample("tmio.jsonl", 4));
    add(b'4', "small", dxt);
    add(b'4', "sample", &sample("dxt.txt", 30));
    add(b'5', "requests", &requests);
    add(b'5', "clock-zero", &requests_zero);
    add(b'5', "minimal", minimal);
    add(b'5', "reordered", reordered);
    add(b'5', "cr-line-ends", &cr);
    add(
        b'5',
        "comment-cr",
        "# note\r1,read,0\njob,op,offset,len,arrival_ns\n1,read,0,1,2\n",
    );
    add(b'0', "cr-line-ends", &cr);
    add(b'6', "csv", &completed);
    add(b'6', "seconds", seconds);
    add(b'6', "jsonl", jsonl);
    add(b'6', "ftio", ftio);
    add(b'6', "tmio", &sample("tmio.jsonl", 2));
    add(b'6', "dxt", dxt);
    out
}

#[test]
#[ignore = "writes fuzz/corpus/trace_parse: IOSETS_FUZZ_WRITE_CORPUS=1"]
fn write_seed_corpus() {
    let seeds = seeds().into_iter().map(|(name, text)| {
        let bytes = selector_seed(&name, &text);
        (name, bytes)
    });
    trace::TARGET.write_seeds(seeds);
}

/// Regression (found by this loop): a request trace whose lines end in a lone `\r` was read by
/// `parse_requests` (the CSV reader ends records there) but not recognized by
/// `is_request_trace` (it split lines at `\n` only), so `detect` read it as the older seconds
/// dialect and refused its header. Splitting at `\r` too was not it either: a `#` comment runs
/// to the `\n` for the CSV reader. `is_request_trace` now finds the header with that reader.
#[test]
fn request_trace_with_cr_line_ends_is_recognized() {
    use iosets_period::trace::requests::is_request_trace;
    use iosets_period::trace::{parse, parse_requests, Format};

    let text = "job,op,offset,len,complete_ns,arrival_ns\r\
                1,read,0,4096,20,10\r1,write,4096,4096,30,20\r";
    assert!(is_request_trace(text));
    assert_eq!(parse_requests(text).unwrap().len(), 2);
    let events = parse(text, Format::Csv).unwrap();
    assert_eq!(events.len(), 2);
    assert_eq!(events[1].event.bytes, 4096);
    let commented = "# note\r1,read,0\njob,op,offset,len,arrival_ns\n1,read,0,1,2\n";
    assert!(is_request_trace(commented));
    assert_eq!(parse_requests(commented).unwrap().len(), 1);
}
