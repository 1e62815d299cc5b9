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
    let Error::Unreadable { attempts, .. } = &err else {
        panic!("{err}");
    };
    assert!(
        matches!(
            attempts[..],
            [Error::Parse {
                format: Format::Ftio,
                line: 1,
                ..
            }]
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
    refused("[1, 2]", Format::Ftio, 1, "expected a JSON object");
    refused("{\"b\": [1]}", Format::Ftio, 1, "b without t");
    refused(
        "{\"x\": [1]}",
        Format::Ftio,
        1,
        "no bandwidth: expected a mode section",
    );
    refused(
        "{\"t\": [1, 2],\n \"b\": [1]}",
        Format::Ftio,
        2,
        "t has 2 samples but b has 1",
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
    let Error::Unreadable { attempts, .. } = &err else {
        panic!("{err}");
    };
    // Every reader was tried, each once.
    assert_eq!(attempts.len(), Format::ALL.len(), "{err}");
    assert!(err.to_string().contains("--format"), "{err}");
    let binary = dir.join("log.darshan");
    std::fs::write(&binary, b"# DXT\n\xff\xfe\x00binary").unwrap();
    let err = read_trace(&binary, Some(Format::Dxt)).unwrap_err();
    assert!(err.to_string().contains("line 2: not UTF-8"), "{err}");
    let err = read_trace(&binary, None).unwrap_err();
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
    fn mangled_fixtures_never_panic_a_reader(
        which in 0usize..FIXTURES.len(),
        cut in 0usize..40000,
        flip in 0usize..40000,
        byte in any::<u8>(),
    ) {
        let (name, format) = FIXTURES[which];
        let mut bytes = std::fs::read(fixture(name)).unwrap();
        let n = bytes.len();
        bytes[flip % n] = byte;
        bytes.truncate(cut % (n + 1));
        if let Ok(events) = parse_bytes(&bytes, format) {
            let evs: Vec<_> = events.iter().map(|e| e.event).collect();
            let _ = detect(&evs);
        }
        let _ = Format::sniff(&bytes);
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

// ---- Fixtures of each format FTIO users have (tests/fixtures, see its README.md) ----

use iosets_period::trace::{parse_bytes, Trace};
use iosets_period::{Direction, Event, Mode};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Reads a fixture, recognising its format from the content, and checks the format.
fn read_fixture(name: &str, format: Format) -> Trace {
    let trace = read_trace(&fixture(name), None).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(trace.format, format, "{name}");
    trace
}

/// The one job's detection in `mode`: `Some((period s, phases))` if periodic.
fn detected(trace: &Trace, mode: Mode) -> Option<(f64, usize)> {
    let jobs = trace.by_job_in(mode);
    assert_eq!(jobs.len(), 1, "{mode}: {jobs:?}");
    let events = jobs.into_values().next().unwrap();
    detect(&events)
        .periodic()
        .map(|e| (e.period.as_secs_f64(), e.phases))
}

fn assert_period(trace: &Trace, mode: Mode, want: f64, phases: usize) {
    let got = detected(trace, mode);
    assert!(
        got.is_some_and(|(p, n)| close(p, want) && n == phases),
        "{:?} {mode}: got {got:?}, want {want} s x {phases}",
        trace.format
    );
}

/// The two rhythms of the `tmio-mixed` fixtures: writes every 10 s (8 phases), reads every 7 s
/// (9); mixed, they hide each other: no confident period.
fn assert_mixed_rhythms(trace: &Trace) {
    assert_period(trace, Mode::Write, 10.0, 8);
    assert_period(trace, Mode::Read, 7.0, 9);
    assert_eq!(detected(trace, Mode::All), None);
}

#[test]
fn tmio_jsonl_mixes_reads_and_writes_and_each_mode_finds_its_period() {
    let t = read_fixture("tmio-mixed.jsonl", Format::Tmio);
    let c = t.counts();
    // 2 ranks x 9 read phases x 2 requests; 2 x 8 x 2 writes. Rank-level samples are used.
    assert_eq!((c.read, c.write, c.unspecified), (36, 32, 0), "{c:?}");
    assert_eq!(t.default_mode(), Mode::Write);
    assert_mixed_rhythms(&t);
}

#[test]
fn tmio_msgpack_holds_the_same_phases_as_the_jsonl() {
    let m = read_fixture("tmio-mixed.msgpack", Format::TmioMsgpack);
    let j = read_fixture("tmio-mixed.jsonl", Format::Tmio);
    assert_eq!(m.counts(), j.counts());
    let bytes = |t: &Trace, d| -> u64 {
        t.events
            .iter()
            .filter(|e| e.dir == d)
            .map(|e| e.event.bytes)
            .sum()
    };
    assert_eq!(bytes(&m, Direction::Write), bytes(&j, Direction::Write));
    assert_mixed_rhythms(&m);
}

#[test]
fn tmio_offline_json_reads_per_request_samples() {
    let t = read_fixture("tmio-offline.json", Format::TmioJson);
    // b_ind is preferred: 2 ranks x 6 phases x 2 rank samples x 2 requests each.
    assert_eq!(t.counts().write, 48);
    assert_eq!(t.default_mode(), Mode::Write);
    assert_period(&t, Mode::Write, 20.0, 6);
    assert!(t.by_job_in(Mode::Read).is_empty());
}

#[test]
fn tmio_collective_json_from_ftio_examples_is_read() {
    // FTIO's examples/tmio/ior/collective/test.json: 73 reads of 1536 ranks within 50 ms.
    let t = read_fixture("tmio-collective-test.json", Format::Ftio);
    assert_eq!(t.counts().read, 73);
    assert_eq!(t.default_mode(), Mode::All);
    assert_eq!(detected(&t, Mode::Read), None);
}

#[test]
fn ftio_application_level_json_gives_its_period() {
    let t = read_fixture("ftio-app.json", Format::Ftio);
    assert_eq!(t.counts().write, 10);
    assert_period(&t, Mode::Write, 4.0, 10);
    // FTIO's own example: one burst, 1 to 8 s, stepping 1, 2, 5, 2, 1 GB/s.
    let t = read_fixture("ftio-custom-app.json", Format::Ftio);
    let bytes: u64 = t.events.iter().map(|e| e.event.bytes).sum();
    assert_eq!(
        bytes,
        1_000_000_000 + 2 * 2_000_000_000 + 2 * 5_000_000_000 + 2_000_000_000 + 1_000_000_000
    );
    assert_eq!(detected(&t, Mode::Write), None);
}

#[test]
fn ftio_rank_level_json_from_ftio_examples_is_read() {
    // FTIO's examples/custom/JSON/custom.json: 4 ranks x 8 phases, back to back: the I/O never
    // pauses, so there is one phase and no period by gaps.
    let t = read_fixture("ftio-custom-rank.json", Format::Ftio);
    assert_eq!(t.counts().write, 32);
    let first = t.events[0].event;
    assert_eq!(first.start, iosets_period::Nanos::from_secs_f64(0.060111));
    assert_eq!(
        first.bytes,
        (18854940.934542f64 * (2.840750 - 0.060111)).round() as u64
    );
    assert_eq!(detected(&t, Mode::Write), None);
}

#[test]
fn gekkofs_json_times_are_microseconds() {
    let t = read_fixture("gekkofs.json", Format::Gekko);
    assert_eq!(t.events.len(), 32);
    assert!(t.events.iter().all(|e| e.event.bytes == 16 << 20));
    assert_period(&t, Mode::All, 2.0, 8);
    // FTIO's examples/API/gekkoFs/JSON/write_..._x0025_60871.json: 180 requests, 10 phases.
    let t = read_fixture("gekkofs-x0025.json", Format::Gekko);
    assert_eq!(t.events.len(), 180);
    let got = detected(&t, Mode::All).unwrap();
    assert!((got.0 - 50.0).abs() < 1.0 && got.1 == 10, "{got:?}");
}

#[test]
fn ftio_txt_pattern_gives_its_period() {
    let t = read_fixture("ftio.txt", Format::FtioTxt);
    assert_eq!(t.events.len(), 16);
    assert_period(&t, Mode::All, 0.5, 8);
    // FTIO's examples/custom/txt/2.txt: I/O (1000 MiB/s) from 10 to 15 ms, 30 to 35, 50 to 55;
    // the other samples have no bandwidth.
    let t = read_fixture("ftio-2.txt", Format::FtioTxt);
    assert_period(&t, Mode::All, 0.02, 3);
}

#[test]
fn dxt_as_darshan_prints_it_counts_posix_and_keeps_directions() {
    let t = read_fixture("dxt-real.txt", Format::Dxt);
    let c = t.counts();
    // POSIX only: 2 ranks x (6 x 3 writes + 20 reads); the MPI-IO records are the same calls.
    assert_eq!((c.write, c.read), (36, 40), "{c:?}");
    assert!(t.events.iter().all(|e| e.job == JobId(777)));
    assert_eq!(t.default_mode(), Mode::Write);
    assert_period(&t, Mode::Write, 30.0, 6);
    // The input is read once, in 20 requests 0.2 s apart.
    assert_period(&t, Mode::Read, 0.2, 20);
}

#[test]
fn content_decides_the_format_not_the_name() {
    let dir = std::env::temp_dir().join(format!("iosets-period-sniff-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, format) in [
        ("tmio-mixed.jsonl", Format::Tmio),
        ("tmio-mixed.msgpack", Format::TmioMsgpack),
        ("tmio-offline.json", Format::TmioJson),
        ("ftio-app.json", Format::Ftio),
        ("gekkofs.json", Format::Gekko),
        ("ftio.txt", Format::FtioTxt),
        ("dxt-real.txt", Format::Dxt),
        ("recorder/_text/0.txt", Format::Recorder),
        ("recorder-2.2.txt", Format::Recorder),
        ("metric-proxy.msgpack", Format::MetricProxy),
    ] {
        let renamed = dir.join("trace.csv");
        std::fs::copy(fixture(name), &renamed).unwrap();
        assert_eq!(read_trace(&renamed, None).unwrap().format, format, "{name}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Each fixture, and its corruptions: empty, cut, garbage appended, a byte flipped.
const FIXTURES: [(&str, Format); 15] = [
    ("tmio-mixed.jsonl", Format::Tmio),
    ("tmio-mixed.msgpack", Format::TmioMsgpack),
    ("tmio-offline.json", Format::TmioJson),
    ("tmio-collective-test.json", Format::Ftio),
    ("ftio-app.json", Format::Ftio),
    ("ftio-custom-app.json", Format::Ftio),
    ("ftio-custom-rank.json", Format::Ftio),
    ("gekkofs.json", Format::Gekko),
    ("gekkofs-x0025.json", Format::Gekko),
    ("ftio.txt", Format::FtioTxt),
    ("ftio-2.txt", Format::FtioTxt),
    ("dxt-real.txt", Format::Dxt),
    ("recorder/_text/0.txt", Format::Recorder),
    ("recorder-2.2.txt", Format::Recorder),
    ("metric-proxy.msgpack", Format::MetricProxy),
];

#[test]
fn corrupt_fixtures_are_typed_errors() {
    for (name, format) in FIXTURES {
        let bytes = std::fs::read(fixture(name)).unwrap();
        let refused = |b: &[u8], what: &str| match parse_bytes(b, format) {
            Err(
                Error::Parse { format: f, .. }
                | Error::Decode { format: f, .. }
                | Error::Empty { format: f, .. },
            ) => {
                assert_eq!(f, format, "{name} {what}")
            }
            other => panic!("{name} {what}: expected a typed error, got {other:?}"),
        };
        refused(b"", "empty");
        // Cut in the middle of a record: every format here ends records with `]`, `}`, a value
        // or a MessagePack item that the cut leaves incomplete.
        let cut = match format {
            Format::Dxt => bytes.len() - 8, // "  139823" cut off a record line's middle
            _ => bytes.len() / 2 + 1,
        };
        if format != Format::Dxt {
            refused(&bytes[..cut], "cut");
        }
        let mut garbage = bytes.clone();
        garbage.extend_from_slice(b"\n@@ garbage @@\n");
        if format != Format::TmioMsgpack {
            refused(&garbage, "garbage appended");
        }
        refused(&[0xc1, 0xff, 0x00, 0x13], "binary garbage");
    }
}

// ---- Recorder's text output and the metric proxy's MessagePack export ----

const MIB: u64 = 1 << 20;

#[test]
fn recorder_text_folder_gives_its_period_and_directions() {
    // The Recorder trace folder (whose _text holds recorder2text's output) is named.
    let t = read_trace(&fixture("recorder"), None).unwrap();
    assert_eq!(t.format, Format::Recorder);
    let c = t.counts();
    // Per rank: read, pread64, readv, fread of the input; 6 phases of pwrite64, pwrite,
    // write, writev, fwrite (the MPI_File_write_at over the pwrites is not counted again).
    assert_eq!((c.read, c.write, c.other, c.unspecified), (8, 60, 0, 0));
    let bytes: u64 = t.events.iter().map(|e| e.event.bytes).sum();
    assert_eq!(bytes, 68 * 4 * MIB);
    assert_eq!(t.events[0].event, Event::from_secs(0.2, 0.4, 4 * MIB));
    assert_eq!(t.events[0].dir, Direction::Read);
    assert_eq!(t.events[4].event, Event::from_secs(6.4, 6.72, 4 * MIB));
    assert_eq!(t.events[4].dir, Direction::Write);
    assert_eq!(t.default_mode(), Mode::Write);
    assert_period(&t, Mode::Write, 8.0, 6);
    // The _text folder itself, and one rank's file, read the same events.
    assert_eq!(read_trace(&fixture("recorder/_text"), None).unwrap(), t);
    let rank1 = read_fixture("recorder/_text/1.txt", Format::Recorder);
    assert_eq!(rank1.events[..], t.events[34..]);
}

#[test]
fn recorder_before_2_3_puts_the_result_before_the_function() {
    let t = read_fixture("recorder-2.2.txt", Format::Recorder);
    assert_eq!(t.counts().write, 15);
    assert_eq!(
        t.events.iter().map(|e| e.event.bytes).sum::<u64>(),
        15 * MIB
    );
    assert_period(&t, Mode::Write, 3.0, 5);
}

#[test]
fn corrupt_recorder_names_the_line() {
    const F: Format = Format::Recorder;
    let ok = "0.1 0.2 open 0 0 ( /f 0 0 )\n";
    refused(
        &format!("{ok}0.3 0.4 write 0 0 ( /f %p 4096\n"),
        F,
        2,
        "not closed",
    );
    refused(
        &format!("{ok}0.3 0.4 write 0 0 /f %p 4096\n"),
        F,
        2,
        "no argument list",
    );
    refused(
        "0.3 x write 0 0 ( /f %p 1 )\n",
        F,
        1,
        "end \"x\" is not a number",
    );
    refused(
        "0.3 0.4 write 0 ( /f %p 1 )\n",
        F,
        1,
        "before the arguments",
    );
    refused(
        "0.3 0.4 write 0 0 ( /f %p )\n",
        F,
        1,
        "write has 3 arguments",
    );
    refused(
        "0.3 0.4 pwrite 0 0 ( /f %p -5 0 )\n",
        F,
        1,
        "count \"-5\" is not a whole number",
    );
    refused(
        "0.3 0.4 fwrite 0 0 ( %p 4294967296 4294967296 /f )\n",
        F,
        1,
        "overflows",
    );
    refused("0.5 0.4 read 0 0 ( /f %p 1 )\n", F, 1, "before start");
    refused("hello world\n", F, 1, "no argument list");
    empty(ok, F);
}

#[test]
fn a_recorder_folder_names_the_rank_file_and_line_at_fault() {
    let dir = std::env::temp_dir().join(format!("iosets-period-recorder-{}", std::process::id()));
    let text = dir.join("_text");
    std::fs::create_dir_all(&text).unwrap();
    let err = read_trace(&dir, None).unwrap_err();
    assert!(
        matches!(&err, Error::Unreadable { attempts, .. }
            if matches!(attempts[..], [Error::Empty { format: Format::Recorder, .. }])),
        "{err}"
    );
    assert!(err.to_string().contains("<rank>.txt"), "{err}");

    let write = "0.1 0.2 write 0 0 ( /f %p 10 )\n";
    std::fs::write(text.join("0.txt"), write).unwrap();
    std::fs::write(
        text.join("1.txt"),
        format!("{write}0.3 0.4 read 0 0 ( /f %p ten )\n"),
    )
    .unwrap();
    std::fs::write(text.join("notes.md"), "not a rank file\n").unwrap();
    let err = read_trace(&dir, None).unwrap_err();
    let Error::Unreadable { path, attempts } = &err else {
        panic!("{err}");
    };
    assert!(path.ends_with("_text/1.txt"), "{err}");
    assert!(
        matches!(
            attempts[..],
            [Error::Parse {
                format: Format::Recorder,
                line: 2,
                ..
            }]
        ),
        "{err}"
    );
    assert!(err.to_string().contains("count \"ten\""), "{err}");

    std::fs::write(text.join("1.txt"), write).unwrap();
    let t = read_trace(&dir, Some(Format::Recorder)).unwrap();
    assert_eq!(t.events.len(), 2);
    let err = read_trace(&dir, Some(Format::Csv)).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Directory {
                format: Format::Csv,
                ..
            }
        ),
        "{err}"
    );

    let open = "0.1 0.2 open 0 0 ( /f 0 0 )\n";
    std::fs::write(text.join("0.txt"), open).unwrap();
    std::fs::write(text.join("1.txt"), open).unwrap();
    let err = read_trace(&dir, None).unwrap_err();
    assert!(err.to_string().contains("no read or write call"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn metric_proxy_byte_counters_give_their_period() {
    let t = read_fixture("metric-proxy.msgpack", Format::MetricProxy);
    let c = t.counts();
    assert_eq!((c.read, c.write, c.other, c.unspecified), (1, 12, 0, 0));
    let bytes = |dir| -> u64 {
        t.events
            .iter()
            .filter(|e| e.dir == dir)
            .map(|e| e.event.bytes)
            .sum()
    };
    assert_eq!(bytes(Direction::Write), 12 * 32 * MIB);
    assert_eq!(bytes(Direction::Read), 64 * MIB);
    // The counter rises by 32 MiB between the samples at 8.002 s and 9.0 s.
    assert_eq!(t.events[0].event, Event::from_secs(8.002, 9.0, 32 * MIB));
    assert_period(&t, Mode::Write, 10.0, 6);
}

#[test]
fn metric_proxy_without_byte_counters_says_which_metrics_it_has() {
    // FTIO's examples/API/proxy/trace_export.msgpack: one CPU usage gauge, no I/O counter.
    let bytes = std::fs::read(fixture("metric-proxy-ftio-example.msgpack")).unwrap();
    assert_eq!(Format::sniff(&bytes), Some(Format::MetricProxy));
    match parse_bytes(&bytes, Format::MetricProxy) {
        Err(e @ Error::Empty { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("proxy_cpu_usage_percent"), "{msg}");
            assert!(msg.contains("total___strace___size___write"), "{msg}");
        }
        other => panic!("expected an empty-trace error, got {other:?}"),
    }
}

#[test]
fn corrupt_metric_proxy_is_a_decode_error_naming_the_sample() {
    use serde_json::json;
    const F: Format = Format::MetricProxy;
    let w = "total___strace___size___write";
    let message = |series: serde_json::Value| json!({"argv": [], "metrics": {"infos": false, "metrics": {w: series}}, "disable_parallel": true});
    let encode = |v: &serde_json::Value| rmp_serde::to_vec_named(v).unwrap();
    // The whole message, with `infos: false` as the proxy sends one metric, and the bare export.
    let good = json!([[0.0, 0], [1.0, 100], [2.0, 100], [3.0, 250]]);
    for v in [
        message(good.clone()),
        json!({"infos": {}, "metrics": {w: good}}),
    ] {
        let ev = parse_bytes(&encode(&v), F).unwrap();
        let got: Vec<u64> = ev.iter().map(|e| e.event.bytes).collect();
        assert_eq!(got, [100, 150]);
    }
    let decode_err = |bytes: &[u8], record: usize, needle: &str| match parse_bytes(bytes, F) {
        Err(e @ Error::Decode { record: r, .. }) => {
            assert_eq!(r, record, "{e}");
            assert!(e.to_string().contains(needle), "{e} lacks {needle:?}");
        }
        other => panic!("expected a decode error with {needle:?}, got {other:?}"),
    };
    let cases = [
        (
            json!([[0.0, 100], [1.0, 50]]),
            "sample 1: the total falls from 100 to 50",
        ),
        (json!([[0.0, 1], [1.0]]), "sample 1 is [1.0], not a pair"),
        (json!([[2.0, 1], [1.0, 5]]), "sample 1: time 1 s is before"),
        (json!([[0.0, -1]]), "sample 0: value -1 is not a byte count"),
        (json!({"t": 1}), "expected a series of [t, value] pairs"),
    ];
    for (series, needle) in cases {
        decode_err(&encode(&message(series)), 1, needle);
    }
    decode_err(&encode(&json!([1, 2])), 1, "expected a metric proxy export");
    decode_err(&encode(&json!({"argv": []})), 1, "no \"metrics\" field");
    let mut trailing = encode(&message(json!([[0.0, 0], [1.0, 1]])));
    trailing.extend_from_slice(&[0x90]);
    decode_err(&trailing, 2, "1 bytes after the message");
}
