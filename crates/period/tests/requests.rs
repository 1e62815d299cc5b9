//! The request trace: what the writer writes the reader reads back unchanged, the detector finds
//! the period of a periodic request trace, and each kind of malformed trace is refused with an
//! error naming the line and the column.

use iosets_period::trace::{
    parse, parse_requests, read_requests, read_trace, requests::is_request_trace, Format,
    RequestRecord, TraceOp, TraceWriter, REQUEST_HEADER,
};
use iosets_period::{detect, Error, JobId, Nanos};
use iosets_types::FileId;
use proptest::prelude::*;

fn full_record() -> RequestRecord {
    RequestRecord {
        job: JobId(42),
        tag: Some(7),
        op: TraceOp::Write,
        path: Some("dir/with, a comma \"and quotes\"".into()),
        offset: 4096,
        len: 1 << 20,
        arrival: Nanos(1_000),
        dispatch: Some(Nanos(2_000)),
        complete: Some(Nanos(3_000)),
        errno: Some(0),
    }
}

fn write_all(records: &[RequestRecord]) -> String {
    let mut w = TraceWriter::new(Vec::new()).unwrap();
    for r in records {
        w.write(r).unwrap();
    }
    String::from_utf8(w.into_inner().unwrap()).unwrap()
}

#[test]
fn written_records_read_back_unchanged() {
    let minimal = RequestRecord::new(JobId(1), TraceOp::Fsync, 0, 0, Nanos(5));
    let failed = RequestRecord {
        errno: Some(13),
        op: TraceOp::Read,
        ..full_record()
    };
    let records = vec![full_record(), minimal, failed];
    let text = write_all(&records);
    assert_eq!(text.lines().next(), Some(REQUEST_HEADER));
    assert_eq!(text.lines().count(), 4, "{text}");
    assert_eq!(parse_requests(&text).unwrap(), records);
}

#[test]
fn a_header_only_trace_is_written_by_new_and_refused_as_empty() {
    let text = write_all(&[]);
    assert_eq!(text, format!("{REQUEST_HEADER}\n"));
    match parse_requests(&text) {
        Err(e @ Error::Empty { .. }) => {
            assert!(e.to_string().contains("no request after the header"), "{e}")
        }
        other => panic!("expected an empty-trace error, got {other:?}"),
    }
}

#[test]
fn append_continues_a_trace_without_a_second_header() {
    let mut text = write_all(&[full_record()]).into_bytes();
    let mut w = TraceWriter::append(&mut text);
    w.write(&RequestRecord::new(
        JobId(2),
        TraceOp::Read,
        0,
        10,
        Nanos(9),
    ))
    .unwrap();
    w.flush().unwrap();
    drop(w);
    let text = String::from_utf8(text).unwrap();
    assert_eq!(text.matches("arrival_ns").count(), 1, "{text}");
    let back = parse_requests(&text).unwrap();
    assert_eq!(back.len(), 2);
    assert_eq!((back[1].job, back[1].len), (JobId(2), 10));
}

#[test]
fn only_the_required_columns_in_any_order_with_comments_and_blank_lines() {
    let text = "# a hand-written trace\nARRIVAL_NS, len, offset, op, job\n\n10,4096,0,write,1\n# two\n20,4096,4096,read,2\n";
    let r = parse_requests(text).unwrap();
    assert_eq!(r.len(), 2);
    assert_eq!(
        r[0],
        RequestRecord::new(JobId(1), TraceOp::Write, 0, 4096, Nanos(10))
    );
    assert_eq!(
        (r[1].job, r[1].op, r[1].offset),
        (JobId(2), TraceOp::Read, 4096)
    );
    assert_eq!(r[1].file_id(), FileId(2));
}

#[test]
fn empty_optional_fields_are_none() {
    let text = format!("{REQUEST_HEADER}\n1,,write,,0,10,5,,,\n");
    let r = parse_requests(&text).unwrap();
    assert_eq!(
        r[0],
        RequestRecord::new(JobId(1), TraceOp::Write, 0, 10, Nanos(5))
    );
}

/// Expects a parse error at `line` whose message contains every needle.
fn refused(text: &str, line: usize, needles: &[&str]) {
    match parse_requests(text) {
        Err(e @ Error::Parse { line: l, .. }) => {
            let msg = e.to_string();
            assert_eq!(l, line, "{text:?}: {msg}");
            assert!(msg.contains(&format!("line {line}")), "{msg}");
            for n in needles {
                assert!(msg.contains(n), "{text:?}: {msg:?} lacks {n:?}");
            }
        }
        other => panic!("{text:?}: expected a parse error, got {other:?}"),
    }
}

#[test]
fn malformed_traces_name_the_line_and_the_column() {
    let h = "job,op,offset,len,arrival_ns,dispatch_ns,complete_ns,errno,tag\n";
    let ok = "1,write,0,10,5,6,7,0,1\n";
    // Missing and unknown columns, at the header's line.
    refused(
        "# c\njob,op,offset,arrival_ns\n1,read,0,5\n",
        2,
        &[
            "missing required column len",
            "job,op,offset,len,arrival_ns",
        ],
    );
    refused(
        "job,op,offset,len,arival_ns\n1,read,0,5,5\n",
        1,
        &["unknown column \"arival_ns\"", REQUEST_HEADER],
    );
    refused(
        "job,op,offset,len,arrival_ns,len\n",
        1,
        &["column \"len\" appears twice"],
    );
    // Bad numbers.
    refused(
        &format!("{h}{ok}1,write,0,ten,5,6,7,0,1\n"),
        3,
        &["column len", "\"ten\" is not a length in bytes"],
    );
    refused(
        &format!("{h}1,write,0,1.5,5,6,7,0,1\n"),
        2,
        &["column len", "\"1.5\""],
    );
    refused(
        &format!("{h}x,write,0,1,5,6,7,0,1\n"),
        2,
        &["column job", "\"x\" is not a job id"],
    );
    refused(
        &format!("{h}1,write,0,1,,6,7,0,1\n"),
        2,
        &["column arrival_ns: empty"],
    );
    refused(
        &format!("{h}1,write,0,1,99999999999999999999,,,0,1\n"),
        2,
        &["column arrival_ns", "out of range"],
    );
    refused(
        &format!("{h}1,write,0,1,5,6,7,0,x\n"),
        2,
        &["column tag", "\"x\" is not a request tag"],
    );
    // Negative values.
    refused(
        &format!("{h}1,write,-4096,1,5,6,7,0,1\n"),
        2,
        &["column offset: -4096 is negative"],
    );
    refused(
        &format!("{h}1,write,0,1,-5,6,7,0,1\n"),
        2,
        &["column arrival_ns: -5 is negative"],
    );
    refused(
        &format!("{h}1,write,0,1,5,6,7,-2,1\n"),
        2,
        &["column errno: -2 is negative"],
    );
    refused(
        &format!("{h}1,write,0,1,5,6,7,0,-1\n"),
        2,
        &["column tag: -1 is negative"],
    );
    refused(
        "job,op,offset,len,arrival_ns,priority\n1,read,0,1,5,1\n",
        1,
        &["unknown column \"priority\""],
    );
    // Times out of order.
    refused(
        &format!("{h}{ok}{ok}1,write,0,1,5,4,7,0,1\n"),
        4,
        &["column dispatch_ns: 4 is before arrival_ns 5"],
    );
    refused(
        &format!("{h}1,write,0,1,5,6,5,0,1\n"),
        2,
        &["column complete_ns: 5 is before dispatch_ns 6"],
    );
    refused(
        "job,op,offset,len,arrival_ns,complete_ns\n1,read,0,1,9,8\n",
        2,
        &["column complete_ns: 8 is before arrival_ns 9"],
    );
    // Unknown operation.
    refused(
        &format!("{h}1,seek,0,1,5,6,7,0,1\n"),
        2,
        &[
            "column op: unknown operation \"seek\"",
            "read, write, fsync or other",
        ],
    );
    refused(
        &format!("{h}1,,0,1,5,6,7,0,1\n"),
        2,
        &["unknown operation \"\""],
    );
    // Field counts.
    refused(
        &format!("{h}{ok}1,write,0,1\n"),
        3,
        &["4 fields where the header has 9"],
    );
    refused(
        &format!("{h}1,write,0,1,5,6,7,0,1,9\n"),
        2,
        &["10 fields where the header has 9"],
    );
    // An unterminated quote runs to the end of the file: an error, not a hang or a panic.
    let _ = parse_requests(&format!("{h}1,\"write,0,1,5,6,7,0,1\n"));
}

#[test]
fn empty_traces_are_refused_as_empty() {
    for text in [
        "",
        "\n\n",
        "# only a comment\n",
        "job,op,offset,len,arrival_ns\n",
    ] {
        match parse_requests(text) {
            Err(e @ Error::Empty { .. }) => assert!(e.to_string().contains("empty"), "{e}"),
            other => panic!("{text:?}: expected an empty-trace error, got {other:?}"),
        }
    }
}

#[test]
fn the_header_tells_a_request_trace_from_the_older_dialects() {
    assert!(is_request_trace("# x\n\njob,op,offset,len,arrival_ns\n"));
    assert!(is_request_trace(REQUEST_HEADER));
    assert!(!is_request_trace("start,end,bytes,job\n"));
    assert!(!is_request_trace("time_s,job,size\n"));
    assert!(!is_request_trace(""));
}

/// Job 1: a burst of 8 writes of 1 MiB every 100 ms for 3 s; job 2: every 1 s for 10 s.
fn periodic_trace() -> String {
    let mut records = Vec::new();
    for (job, period_ms, phases) in [(1u64, 100u64, 30u64), (2, 1000, 10)] {
        for k in 0..phases {
            for i in 0..8u64 {
                let arrival = Nanos::from_millis(k * period_ms) + Nanos::from_micros(i * 500);
                let mut r =
                    RequestRecord::new(JobId(job), TraceOp::Write, i << 20, 1 << 20, arrival);
                r.dispatch = Some(arrival);
                r.complete = Some(arrival + Nanos::from_micros(450));
                r.errno = Some(0);
                records.push(r);
            }
        }
    }
    write_all(&records)
}

#[test]
fn detect_reads_a_request_trace_as_csv_and_finds_each_period() {
    let text = periodic_trace();
    let events = parse(&text, Format::Csv).unwrap();
    assert_eq!(events.len(), 8 * 40);
    let dir = std::env::temp_dir().join(format!("iosets-period-requests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // No .csv extension: the header alone tells the format.
    let path = dir.join("server.trace");
    std::fs::write(&path, &text).unwrap();
    let trace = read_trace(&path, None).unwrap();
    assert_eq!(trace.format, Format::Csv);
    assert_eq!(read_requests(&path).unwrap().len(), 8 * 40);
    std::fs::remove_dir_all(&dir).unwrap();
    let jobs = trace.by_job();
    for (job, want_s, phases) in [(1, 0.1, 30), (2, 1.0, 10)] {
        let est = detect(&jobs[&JobId(job)])
            .periodic()
            .copied()
            .unwrap_or_else(|| panic!("job {job} not periodic"));
        let got = est.period.as_secs_f64();
        assert!((got / want_s - 1.0).abs() < 0.01, "job {job}: {got}");
        assert_eq!(est.phases, phases, "job {job}");
    }
}

#[test]
fn detect_needs_completion_times_and_says_so() {
    let text = "job,op,offset,len,arrival_ns,complete_ns\n1,read,0,1,5,6\n1,read,0,1,7,\n";
    match parse(text, Format::Csv) {
        Err(e @ Error::Parse { line: 3, .. }) => {
            assert!(e.to_string().contains("column complete_ns: empty"), "{e}")
        }
        other => panic!("expected a parse error at line 3, got {other:?}"),
    }
    let text = "job,op,offset,len,arrival_ns\n1,read,0,1,5\n";
    match parse(text, Format::Csv) {
        Err(e @ Error::Parse { line: 2, .. }) => {
            assert!(e.to_string().contains("complete_ns"), "{e}")
        }
        other => panic!("expected a parse error at line 2, got {other:?}"),
    }
}

#[test]
fn failed_requests_count_no_bytes_for_detection() {
    let text = "job,op,offset,len,arrival_ns,complete_ns,errno\n1,write,0,100,5,6,5\n1,write,0,100,7,8,0\n";
    let events = parse(text, Format::Csv).unwrap();
    let bytes: Vec<u64> = events.iter().map(|e| e.event.bytes).collect();
    assert_eq!(bytes, [0, 100]);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn mangled_request_traces_never_panic_the_reader(
        cut in 0usize..4000,
        flip in 0usize..4000,
        byte in any::<u8>(),
    ) {
        let mut bytes = periodic_trace().into_bytes();
        bytes.truncate(3000);
        let n = bytes.len();
        bytes[flip % n] = byte;
        bytes.truncate(cut % (n + 1));
        let text = String::from_utf8_lossy(&bytes);
        let _ = parse_requests(&text);
        let _ = parse(&text, Format::Csv);
    }

    #[test]
    fn any_record_round_trips(
        job in any::<u64>(), tag in proptest::option::of(any::<u64>()),
        op in 0usize..4, path in proptest::option::of("[^\u{0}]{1,12}"),
        offset in any::<u64>(), len in any::<u64>(),
        times in proptest::collection::vec(0u64..u64::MAX / 4, 3),
        errno in proptest::option::of(0i32..200),
    ) {
        let op = [TraceOp::Read, TraceOp::Write, TraceOp::Fsync, TraceOp::Other][op];
        let mut r = RequestRecord::new(JobId(job), op, offset, len, Nanos(times[0]));
        r.tag = tag;
        // Surrounding blanks are trimmed by the reader; a path is kept as given otherwise.
        r.path = path.map(|p| p.trim().to_string()).filter(|p| !p.is_empty() && !p.starts_with('#'));
        r.dispatch = Some(Nanos(times[0] + times[1]));
        r.complete = Some(Nanos(times[0] + times[1] + times[2]));
        r.errno = errno;
        let text = write_all(std::slice::from_ref(&r));
        prop_assert_eq!(parse_requests(&text).unwrap(), vec![r]);
    }
}
