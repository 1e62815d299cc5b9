//! Metadata requests are scheduled like data (issue 15): they wait in the policy for a worker,
//! are counted by the conservation counters and the job statistics (as operations, with no
//! bytes), and, with the emulated slow back end, hold the worker `calls × meta_latency_ms`, the
//! calls of a create or unlink being its directory's stripe count. Checked from the server's own
//! counters, trace and `/metrics`, not from wall-clock time.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{create, json, metrics, read, required, Conn, TempDir};
use iosets_proto::{
    Control, JobsReport, OpenFlags, Reply, Request, Response, ServerReport, SetAttr,
};
use iosets_server::{Server, ServerConfig};

const TOKEN: &str = "t";
const STRIPES: &str = "user.iosets.stripe_count";

fn stats(c: &mut Conn) -> ServerReport {
    json(c.control(TOKEN, Control::Stats))
}

/// Sets the stripe-count attribute of a backing directory; `false` if its file system keeps no
/// user attributes (the fan-out cannot be tested there).
fn set_stripes(dir: &Path, value: &[u8]) -> bool {
    match rustix::fs::setxattr(dir, STRIPES, value, rustix::fs::XattrFlags::empty()) {
        Ok(()) => true,
        Err(rustix::io::Errno::NOTSUP) => false,
        Err(e) => panic!("setxattr {}: {e}", dir.display()),
    }
}

fn config(root: &TempDir) -> ServerConfig {
    let mut c = ServerConfig::new(&root.0).with_insecure_loopback();
    c.token = Some(TOKEN.into());
    c
}

struct Row {
    job: u64,
    op: String,
    path: String,
    arrival: u64,
    dispatch: u64,
    complete: u64,
}

fn trace_rows(path: &Path) -> Vec<Row> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .skip(2) // the clock's zero, the header
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            assert_eq!(f[9], "0", "{l}");
            Row {
                job: f[0].parse().unwrap(),
                op: f[2].into(),
                path: f[3].into(),
                arrival: f[6].parse().unwrap(),
                dispatch: f[7].parse().unwrap(),
                complete: f[8].parse().unwrap(),
            }
        })
        .collect()
}

#[test]
fn metadata_waits_in_the_scheduler_for_the_one_worker() {
    let root = TempDir::new("meta-order");
    let data = root.0.join("data");
    // Prepared on disk, not through the server: the only metadata requests are the test's.
    std::fs::create_dir_all(data.join("slow")).unwrap();
    std::fs::write(data.join("x"), b"0123456789").unwrap();
    // A wide directory makes the first create hold the worker 10 × 50 ms: room for the other
    // job's requests to arrive while it is held.
    let wide = set_stripes(&data.join("slow"), b"10");
    let trace = root.0.join("trace.csv");
    let mut cfg = config(&root);
    cfg.root = data;
    cfg.policy = "noop".into();
    cfg.workers = 1;
    cfg.meta_latency_ms = 50.0;
    cfg.trace = Some(trace.clone());
    let server = Server::start(cfg).unwrap();
    let addr = server.addr();
    let admin = server.admin_addr().unwrap();
    let mut ctl = Conn::connect(addr, 0);
    let before = stats(&mut ctl);

    let mut one = Conn::connect(addr, 1);
    let slow = one.send(create("slow/a"));
    // The create is in service (the one worker is held by the emulated back end) before the
    // other job sends anything.
    let give_up = Instant::now() + Duration::from_secs(30);
    while stats(&mut ctl).in_service == 0 {
        assert!(Instant::now() < give_up, "the create was never dispatched");
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut two = Conn::connect(addr, 2);
    let answers = two.pipeline(vec![create("b"), read("x", 0, 4)]);
    assert_eq!(answers.len(), 2);
    assert!(answers.values().all(|r| matches!(r, Response::Ok(_))));
    let (tag, r) = one.recv().unwrap();
    assert_eq!(tag, slow);
    assert!(matches!(r, Response::Ok(Reply::Entry { .. })), "{r:?}");

    // Every request went through the policy: two metadata requests and one read.
    let after = stats(&mut ctl);
    assert_eq!(after.inserted - before.inserted, 3);
    assert_eq!(after.completed - before.completed, 3);
    assert_eq!(after.submitted - before.submitted, 3);
    let text = metrics(admin);
    let calls = required::<f64>(&text, "iosets_meta_backend_calls_total");
    assert_eq!(calls, if wide { 11.0 } else { 2.0 });
    assert!(text.contains("iosets_queue_wait_seconds_count{policy=\"noop\",op=\"meta\"} 2"));
    assert!(text.contains("iosets_queue_wait_seconds_count{policy=\"noop\",op=\"data-read\"} 1"));
    assert_eq!(
        required::<f64>(&text, "iosets_meta_requests_total{op=\"create\"}"),
        2.0
    );
    let report = server.shutdown().unwrap();
    assert!(report.balanced);

    // The order of service, from the trace (one worker: one request at a time).
    let rows = trace_rows(&trace);
    assert_eq!(rows.len(), 3);
    let ops: Vec<(u64, &str, &str)> = rows
        .iter()
        .map(|r| (r.job, r.op.as_str(), r.path.as_str()))
        .collect();
    assert_eq!(
        ops,
        [(1, "other", "slow/a"), (2, "other", "b"), (2, "read", "x")]
    );
    let (first, create_b, read_x) = (&rows[0], &rows[1], &rows[2]);
    assert!(
        create_b.arrival < first.complete,
        "job 2's create arrived while the worker was held"
    );
    assert!(
        create_b.dispatch >= first.complete,
        "and waited in the scheduler for it"
    );
    assert!(read_x.dispatch >= create_b.complete, "noop: arrival order");
}

#[test]
fn a_job_doing_only_metadata_counts_its_operations_and_no_bytes() {
    let root = TempDir::new("meta-jobstats");
    let server = Server::start(config(&root)).unwrap();
    let addr = server.addr();
    let admin = server.admin_addr().unwrap();
    let mut ctl = Conn::connect(addr, 0);
    let before = stats(&mut ctl);
    let mut c = Conn::connect(addr, 7);
    let ops = vec![
        Request::Mkdir {
            path: "d".into(),
            mode: 0o755,
        },
        create("d/f"),
        Request::Lstat { path: "d/f".into() },
        Request::Lookup { path: "d/f".into() },
        Request::Open {
            path: "d/f".into(),
            flags: OpenFlags(OpenFlags::READ | OpenFlags::WRITE),
        },
        Request::Setattr {
            path: "d/f".into(),
            set: SetAttr {
                mode: Some(0o600),
                ..SetAttr::default()
            },
        },
        Request::Truncate {
            path: "d/f".into(),
            size: 4096,
        },
        Request::Readdir { path: "d".into() },
        Request::Statfs,
        Request::Symlink {
            path: "d/l".into(),
            target: "f".into(),
        },
        Request::Readlink { path: "d/l".into() },
        Request::Link {
            from: "d/f".into(),
            to: "d/h".into(),
        },
        Request::Rename {
            from: "d/f".into(),
            to: "d/g".into(),
        },
        Request::Unlink { path: "d/h".into() },
        Request::Unlink { path: "d/l".into() },
        Request::Unlink { path: "d/g".into() },
        Request::Rmdir { path: "d".into() },
    ];
    let n = ops.len() as u64;
    for op in ops {
        c.ok(op);
    }
    // A failed one is an operation too.
    c.errno(Request::Lookup {
        path: "missing".into(),
    });
    // A bad path is answered at once, never scheduled.
    c.errno(Request::Unlink {
        path: "../escape".into(),
    });

    let after = stats(&mut ctl);
    assert_eq!(after.inserted - before.inserted, n + 1);
    assert_eq!(after.bytes_read + after.bytes_written, 0);
    let jobs: JobsReport = json(ctl.control(TOKEN, Control::Jobs));
    let j = jobs.jobs.iter().find(|j| j.job == 7).unwrap();
    assert_eq!(j.ops, n + 1);
    assert_eq!(j.failed, 1);
    assert_eq!((j.bytes_read, j.bytes_written), (0, 0));
    assert_eq!(j.queue_wait.count, n + 1);
    let text = metrics(admin);
    assert_eq!(
        required::<f64>(&text, "iosets_job_ops_total{job_id=\"7\"}"),
        (n + 1) as f64
    );
    assert_eq!(
        required::<f64>(
            &text,
            "iosets_job_bytes_total{job_id=\"7\",direction=\"write\"}"
        ),
        0.0
    );
    assert_eq!(
        required::<f64>(&text, "iosets_meta_requests_total{op=\"unlink\"}"),
        3.0
    );
    assert_eq!(
        required::<f64>(&text, "iosets_meta_requests_total{op=\"lookup\"}"),
        2.0
    );
    assert_eq!(
        required::<f64>(
            &text,
            "iosets_queue_wait_seconds_count{policy=\"iosets\",op=\"meta\"}"
        ),
        (n + 1) as f64
    );
    // The back end is not emulated: nothing held.
    assert_eq!(
        required::<f64>(&text, "iosets_meta_backend_calls_total"),
        0.0
    );
    assert_eq!(
        required::<f64>(&text, "iosets_meta_backend_blocked_seconds_total"),
        0.0
    );
    assert!(server.shutdown().unwrap().balanced);
}

#[test]
fn creates_and_unlinks_fan_out_to_the_directory_stripe_count() {
    let root = TempDir::new("meta-fanout");
    for d in ["wide", "narrow", "garbled", "zero"] {
        std::fs::create_dir_all(root.0.join(d)).unwrap();
    }
    if !set_stripes(&root.0.join("wide"), b"5") {
        eprintln!("skipped: the temporary directory's file system keeps no user attributes");
        return;
    }
    // Malformed values fall back to meta_fanout (a parser taking the leading digits would
    // read 7).
    set_stripes(&root.0.join("garbled"), b"7 stripes");
    set_stripes(&root.0.join("zero"), b"0");
    let mut cfg = config(&root);
    cfg.meta_latency_ms = 20.0;
    cfg.meta_fanout = 1;
    cfg.workers = 2;
    let server = Server::start(cfg).unwrap();
    let addr = server.addr();
    let admin = server.admin_addr().unwrap();
    let mut c = Conn::connect(addr, 3);
    let held = |admin| {
        let text = metrics(admin);
        (
            required::<f64>(&text, "iosets_meta_backend_calls_total"),
            required::<f64>(&text, "iosets_meta_backend_blocked_seconds_total"),
        )
    };
    let expect = |c: &mut Conn, req: Request, calls: f64, what: &str| {
        let (calls0, secs0) = held(admin);
        c.ok(req);
        let (calls1, secs1) = held(admin);
        assert_eq!(calls1 - calls0, calls, "{what}: calls");
        assert!(
            (secs1 - secs0 - calls * 0.020).abs() < 1e-9,
            "{what}: held {} s, want {calls} x 20 ms",
            secs1 - secs0
        );
    };
    expect(
        &mut c,
        create("wide/a"),
        5.0,
        "create in a 5-stripe directory",
    );
    expect(
        &mut c,
        create("narrow/a"),
        1.0,
        "create in a plain directory",
    );
    expect(&mut c, create("garbled/a"), 1.0, "malformed attribute");
    expect(&mut c, create("zero/a"), 1.0, "zero stripes");
    expect(&mut c, create("a"), 1.0, "create in the root");
    expect(
        &mut c,
        Request::Lookup {
            path: "wide/a".into(),
        },
        1.0,
        "lookup (one call whatever the striping)",
    );
    expect(
        &mut c,
        Request::Mkdir {
            path: "wide/sub".into(),
            mode: 0o755,
        },
        1.0,
        "mkdir (no stripe objects)",
    );
    expect(
        &mut c,
        Request::Rename {
            from: "wide/a".into(),
            to: "narrow/b".into(),
        },
        5.0,
        "rename (the source's directory)",
    );
    expect(
        &mut c,
        Request::Unlink {
            path: "narrow/b".into(),
        },
        1.0,
        "unlink in a plain directory",
    );
    // A failed operation touched no storage object: no call.
    let (calls0, _) = held(admin);
    c.errno(Request::Unlink {
        path: "wide/missing".into(),
    });
    assert_eq!(held(admin).0, calls0, "a failed unlink holds nothing");
    // The service-time series of metadata includes the held time: 17 calls of 20 ms at least.
    let text = metrics(admin);
    let service = required::<f64>(
        &text,
        "iosets_service_seconds_sum{policy=\"iosets\",op=\"meta\"}",
    );
    assert!(service >= 17.0 * 0.020, "metadata service {service} s");
    assert!(server.shutdown().unwrap().balanced);
}

#[test]
fn metadata_knobs_out_of_range_are_config_errors() {
    let root = TempDir::new("meta-config");
    type Set = fn(&mut ServerConfig);
    let cases: [(Set, &str); 6] = [
        (|c| c.meta_latency_ms = -1.0, "meta_latency_ms"),
        (|c| c.meta_latency_ms = f64::NAN, "meta_latency_ms"),
        (|c| c.meta_latency_ms = 60_001.0, "meta_latency_ms"),
        (|c| c.meta_fanout = 0, "meta_fanout"),
        (|c| c.meta_cost_bytes = 0, "meta_cost_bytes"),
        (|c| c.meta_cost_bytes = 2 << 20, "meta_cost_bytes"),
    ];
    for (set, key) in cases {
        let mut cfg = config(&root);
        set(&mut cfg);
        let e = Server::start(cfg).unwrap_err().to_string();
        assert!(e.contains(key), "{e}");
    }
    // The same keys in the TOML file, validated the same way.
    for (text, key) in [
        ("meta_latency_ms = nan", "meta_latency_ms"),
        ("meta_latency_ms = -1.0", "meta_latency_ms"),
        ("meta_fanout = 0", "meta_fanout"),
        ("meta_cost_bytes = 0", "meta_cost_bytes"),
    ] {
        let toml = format!("root = \".\"\n{text}\n");
        let cfg = ServerConfig::from_toml_str(&toml, &root.0).unwrap();
        let e = Server::start(cfg).unwrap_err().to_string();
        assert!(e.contains(key), "{text}: {e}");
    }
    let e = ServerConfig::from_toml_str("root = \".\"\nmeta_fanout = 1.5\n", &root.0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("line 2"), "{e}");
}
