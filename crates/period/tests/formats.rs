//! Trace readers: each shipped sample (tests/data) is read and its jobs' periods found; each kind
//! of corrupt or empty trace is refused with an error naming the problem and the line; arbitrary
//! bytes never panic a reader.

use std::path::{Path, PathBuf};

use iosets_period::trace::{parse, read_trace, to_ftio_json, Format};
use iosets_period::{detect, Error, JobId};
use proptest::prelude::*;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// Reads a sample, guessing its format, and returns (job, period s, phases) per job.
fn periods(name: &str, expect: Format) -> Vec<(JobId, f64, usize)> {
    let trace = read_trace(&data(name), None).unwrap();
    assert_eq!(trace.format, expect, "{name}");
    trace
        .by_job()
        .into_iter()
        .map(|(job, events)| {
            let det = detect(&events);
            let est = det
                .periodic()
                .unwrap_or_else(|| panic!("{name} job {job}: {det:?}"));
            (job, est.period.as_secs_f64(), est.phases)
        })
        .collect()
}

fn close(got: f64, want: f64) -> bool {
    (got / want - 1.0).abs() < 0.01
}

#[test]
fn csv_and_jsonl_samples_give_each_job_its_period() {
    for (name, format) in [
        ("requests.csv", Format::Csv),
        ("requests.jsonl", Format::Jsonl),
    ] {
        let p = periods(name, format);
        assert_eq!(p.len(), 2, "{name}: {p:?}");
        assert_eq!(p[0].0, JobId(1));
        assert!(close(p[0].1, 12.0) && p[0].2 == 8, "{name}: {p:?}");
        assert_eq!(p[1].0, JobId(2));
        assert!(close(p[1].1, 150.0) && p[1].2 == 5, "{name}: {p:?}");
    }
}

#[test]
fn ftio_sample_gives_its_period() {
    let p = periods("ftio.json", Format::Ftio);
    assert_eq!(p.len(), 1);
    assert!(close(p[0].1, 40.0) && p[0].2 == 10, "{p:?}");
}

#[test]
fn tmio_sample_gives_its_period() {
    let p = periods("tmio.jsonl", Format::Tmio);
    assert!(close(p[0].1, 5.0) && p[0].2 == 8, "{p:?}");
}

#[test]
fn dxt_sample_gives_its_job_and_period_and_counts_posix_only() {
    let p = periods("dxt.txt", Format::Dxt);
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].0, JobId(4242));
    assert!(close(p[0].1, 30.0) && p[0].2 == 6, "{p:?}");
    let trace = read_trace(&data("dxt.txt"), None).unwrap();
    // 2 ranks × 6 phases × 4 calls, POSIX only (the MPI-IO records would double it).
    assert_eq!(trace.events.len(), 48);
}

#[test]
fn a_named_format_overrides_the_guess() {
    let t = read_trace(&data("requests.csv"), Some(Format::Csv)).unwrap();
    assert_eq!(t.format, Format::Csv);
    let err = read_trace(&data("requests.csv"), Some(Format::Ftio)).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Parse {
                format: Format::Ftio,
                line: 1,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn ftio_json_written_by_us_reads_back_with_the_same_period() {
    let trace = read_trace(&data("requests.csv"), None).unwrap();
    let job1 = trace.by_job().remove(&JobId(1)).unwrap();
    let events: Vec<_> = parse(&to_ftio_json(&job1), Format::Ftio)
        .unwrap()
        .into_iter()
        .map(|e| e.event)
        .collect();
    assert!(close(detect(&events).period().unwrap().as_secs_f64(), 12.0));
}

/// Expects a parse error at `line` whose message contains `needle`.
fn refused(text: &str, format: Format, line: usize, needle: &str) {
    match parse(text, format) {
        Err(e @ Error::Parse { line: l, .. }) => {
            let msg = e.to_string();
            assert_eq!(l, line, "{msg}");
            assert!(msg.contains(needle), "{msg:?} lacks {needle:?}");
            assert!(msg.contains(&format!("line {line}")), "{msg}");
        }
        other => panic!("{format} {text:?}: expected a parse error, got {other:?}"),
    }
}

fn empty(text: &str, format: Format) {
    match parse(text, format) {
        Err(e @ Error::Empty { .. }) => assert!(e.to_string().contains("empty"), "{e}"),
        other => panic!("{format} {text:?}: expected an empty-trace error, got {other:?}"),
    }
}

#[test]
fn corrupt_csv_names_the_line() {
    let h = "start,end,bytes,job\n";
    refused(
        &format!("{h}1,2,10,1\n1,x,10,1\n"),
        Format::Csv,
        3,
        "end \"x\" is not a number",
    );
    refused(
        &format!("{h}1,2,10\n"),
        Format::Csv,
        2,
        "3 fields where the header has 4",
    );
    refused(
        &format!("{h}3,2,10,1\n"),
        Format::Csv,
        2,
        "end 2 is before start 3",
    );
    refused(
        &format!("{h}-1,2,10,1\n"),
        Format::Csv,
        2,
        "start -1 is not a time",
    );
    refused(&format!("{h}NaN,2,10,1\n"), Format::Csv, 2, "not a time");
    refused(
        &format!("{h}1,2,-10,1\n"),
        Format::Csv,
        2,
        "bytes \"-10\" is not a whole number",
    );
    refused(
        &format!("{h}1,1e300,10,1\n"),
        Format::Csv,
        2,
        "out of range",
    );
    refused(
        "time,size\n1,2\n",
        Format::Csv,
        1,
        "lacks start, end or bytes",
    );
    empty("", Format::Csv);
    empty(h, Format::Csv);
    empty("# only a comment\n", Format::Csv);
}

#[test]
fn corrupt_jsonl_names_the_line() {
    let ok = r#"{"start": 1, "end": 2, "bytes": 10}"#;
    refused(
        &format!("{ok}\n{{\"start\": 1\n"),
        Format::Jsonl,
        2,
        "not a request record",
    );
    refused(
        &format!("{ok}\n{{\"start\": 1, \"end\": 2}}\n"),
        Format::Jsonl,
        2,
        "bytes",
    );
    refused(
        r#"{"start": 5, "end": 2, "bytes": 1}"#,
        Format::Jsonl,
        1,
        "before start",
    );
    empty("\n\n", Format::Jsonl);
}

#[test]
fn corrupt_ftio_json_names_the_problem() {
    refused("{\"t\": [1, 2,\n", Format::Ftio, 2, "not JSON");
    refused("[1, 2]", Format::Ftio, 1, "expected an object");
    refused("{\"b\": [1]}", Format::Ftio, 1, "missing the \"t\" array");
    refused(
        "{\"t\": [1, 2],\n \"b\": [1]}",
        Format::Ftio,
        2,
        "\"t\" has 2 samples but \"b\" has 1",
    );
    refused(
        "{\"t\": [1, \"x\"], \"b\": [1, 0]}",
        Format::Ftio,
        1,
        "t[1] = \"x\" is not a number",
    );
    refused(
        "{\"t\": [2, 1], \"b\": [1, 0]}",
        Format::Ftio,
        1,
        "t[1] = 1 is before t[0] = 2",
    );
    refused(
        "{\"t\": [1, 2], \"b\": [-1, 0]}",
        Format::Ftio,
        1,
        "b[0] = -1 is not a bandwidth",
    );
    empty("", Format::Ftio);
    empty("{\"t\": [], \"b\": []}", Format::Ftio);
    empty("{\"t\": [1, 2], \"b\": [0, 0]}", Format::Ftio);
}

#[test]
fn corrupt_tmio_names_the_line() {
    refused(
        "{\"write_sync\": {}}\n",
        Format::Tmio,
        1,
        "no \"bandwidth\"",
    );
    refused(
        "{\"io_time\": {}}\n{\"write_sync\": {\"bandwidth\": {\"b_ind\": [1, 2], \"t_ind_s\": [0], \"t_ind_e\": [1]}}}\n",
        Format::Tmio,
        2,
        "b_ind has 2 values",
    );
    refused("[]\n", Format::Tmio, 1, "not a JSON object");
    refused("not json\n", Format::Tmio, 1, "not a JSON object");
    empty("{\"io_time\": {\"delta_t_agg\": 1}}\n", Format::Tmio);
}

#[test]
fn corrupt_dxt_names_the_line() {
    let h = "# jobid: 7\n# Module    Rank  Wt/Rd  Segment          Offset       Length    Start(s)      End(s)\n";
    refused(
        &format!("{h} X_POSIX 0 write 0 0 10 1.0\n"),
        Format::Dxt,
        3,
        "8 fields",
    );
    refused(
        &format!("{h} X_POSIX 0 write 0 0 ten 1.0 2.0\n"),
        Format::Dxt,
        3,
        "length \"ten\"",
    );
    refused(
        &format!("{h} X_POSIX 0 seek 0 0 10 1.0 2.0\n"),
        Format::Dxt,
        3,
        "neither read nor write",
    );
    refused(
        &format!("{h} X_POSIX 0 write 0 0 10 2.0 1.0\n"),
        Format::Dxt,
        3,
        "before start",
    );
    refused(
        &format!("{h}garbage here\n"),
        Format::Dxt,
        3,
        "expected a DXT record",
    );
    refused("# jobid: abc\n", Format::Dxt, 1, "jobid \"abc\"");
    empty(h, Format::Dxt);
}

#[test]
fn files_that_cannot_be_read_or_recognised_say_so() {
    let dir = std::env::temp_dir().join(format!("iosets-period-formats-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let missing = dir.join("missing.csv");
    let err = read_trace(&missing, None).unwrap_err();
    assert!(
        matches!(err, Error::Io { .. }) && err.to_string().contains("missing.csv"),
        "{err}"
    );
    let odd = dir.join("trace.bin");
    std::fs::write(&odd, "hello\nworld\n").unwrap();
    let err = read_trace(&odd, None).unwrap_err();
    assert!(matches!(err, Error::UnknownContent { .. }), "{err}");
    assert!(err.to_string().contains("--format"), "{err}");
    let binary = dir.join("log.darshan");
    std::fs::write(&binary, b"# DXT\n\xff\xfe\x00binary").unwrap();
    let err = read_trace(&binary, Some(Format::Dxt)).unwrap_err();
    assert!(err.to_string().contains("line 2: not UTF-8"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic_a_reader(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let text = String::from_utf8_lossy(&bytes);
        for name in Format::NAMES {
            let format: Format = name.parse().unwrap();
            let _ = parse(&text, format);
        }
    }

    #[test]
    fn mangled_samples_never_panic_a_reader(
        which in 0usize..5,
        cut in 0usize..4000,
        flip in 0usize..4000,
        byte in any::<u8>(),
    ) {
        let (name, format) = [
            ("requests.csv", Format::Csv),
            ("requests.jsonl", Format::Jsonl),
            ("ftio.json", Format::Ftio),
            ("tmio.jsonl", Format::Tmio),
            ("dxt.txt", Format::Dxt),
        ][which];
        let mut bytes = std::fs::read(data(name)).unwrap();
        let n = bytes.len();
        bytes[flip % n] = byte;
        bytes.truncate(cut % (n + 1));
        let text = String::from_utf8_lossy(&bytes);
        if let Ok(events) = parse(&text, format) {
            let evs: Vec<_> = events.iter().map(|e| e.event).collect();
            let _ = detect(&evs);
        }
    }
}
