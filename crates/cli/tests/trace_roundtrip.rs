//! The server's trace feeds `iosets detect` and `iosets replay` unchanged: a real server on
//! loopback records a periodic workload of three jobs, then the trace file it wrote is read by
//! the library readers and by the two commands. Detection finds each job's period within 10%;
//! the replay serves each job exactly the requests the trace holds, which are exactly the
//! requests the clients made.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use iosets_client::{BlockingClient, ClientConfig};
use iosets_period::trace::{read_requests, read_trace, Format, TraceOp};
use iosets_period::{detect, JobId};
use iosets_policy::Counted;
use iosets_server::{Server, ServerConfig};
use iosets_sim::workload::from_records;
use iosets_sim::{run, DeviceModel};

use crate::common;

use common::scratch;

/// One client job: a burst of `WRITES` writes and an fsync every `period`, `bursts` times.
#[derive(Clone, Copy, Debug)]
struct Job {
    id: u64,
    period: Duration,
    /// Delay of the first burst after the common start.
    phase: Duration,
    bursts: u32,
}

const WRITES: u64 = 8;
const SIZE: usize = 64 << 10;

const JOBS: [Job; 3] = [
    Job {
        id: 11,
        period: Duration::from_millis(100),
        phase: Duration::ZERO,
        bursts: 20,
    },
    Job {
        id: 12,
        period: Duration::from_millis(100),
        phase: Duration::from_millis(50),
        bursts: 20,
    },
    Job {
        id: 13,
        period: Duration::from_millis(200),
        phase: Duration::from_millis(25),
        bursts: 10,
    },
];

/// Runs `job` against `addr`; bursts are placed on an absolute schedule from `start`, so a late
/// burst does not shift the later ones.
fn client(addr: std::net::SocketAddr, job: Job, start: Instant) {
    let c = BlockingClient::connect(&[addr], ClientConfig::new(iosets_types::JobId(job.id)))
        .expect("client connects");
    let path = format!("job{}.dat", job.id);
    c.create(&path, 0o644, false).expect("create");
    for k in 0..job.bursts {
        let at = start + job.phase + job.period * k;
        if let Some(wait) = at.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        for i in 0..WRITES {
            let offset = (u64::from(k) * WRITES + i) * SIZE as u64;
            c.write_at(&path, offset, vec![job.id as u8; SIZE])
                .expect("write");
        }
        c.fsync(&path).expect("fsync");
    }
}

/// Serves the periodic workload with a trace; returns the trace's path.
fn record_trace(dir: &Path) -> PathBuf {
    let root = dir.join("root");
    std::fs::create_dir_all(&root).unwrap();
    let trace = dir.join("server-trace.csv");
    let mut cfg = ServerConfig::new(&root).with_insecure_loopback();
    cfg.workers = 2;
    cfg.trace = Some(trace.clone());
    let server = Server::start(cfg).expect("server starts");
    let addr = server.addr();
    let start = Instant::now() + Duration::from_millis(100);
    let clients: Vec<_> = JOBS
        .iter()
        .map(|&job| std::thread::spawn(move || client(addr, job, start)))
        .collect();
    for c in clients {
        c.join().expect("client thread");
    }
    server.shutdown().expect("server stops");
    trace
}

/// Rows per job the clients made: the create of its file (metadata is scheduled and traced
/// too, as `other`), then `WRITES` writes and one fsync per burst.
fn expected_rows() -> BTreeMap<u64, usize> {
    JOBS.iter()
        .map(|j| (j.id, 1 + j.bursts as usize * (WRITES as usize + 1)))
        .collect()
}

fn close(got: f64, want: f64) -> bool {
    (got / want - 1.0).abs() < 0.10
}

#[test]
fn the_servers_trace_feeds_detect_and_replay_unchanged() {
    let dir = scratch("trace-roundtrip");
    let trace = record_trace(&dir);

    // The trace holds exactly the clients' requests, each with its times and errno 0.
    let records = read_requests(&trace).expect("the server's trace reads as a request trace");
    let mut rows: BTreeMap<u64, usize> = BTreeMap::new();
    for r in &records {
        *rows.entry(r.job.0).or_default() += 1;
        assert_eq!(r.errno, Some(0), "{r:?}");
        assert!(r.dispatch.is_some() && r.complete.is_some(), "{r:?}");
        assert_eq!(
            r.path.as_deref(),
            Some(format!("job{}.dat", r.job.0).as_str())
        );
        match r.op {
            TraceOp::Write => assert_eq!(r.len, SIZE as u64),
            // The fsyncs, and the create of the file (metadata, traced as `other`).
            TraceOp::Fsync | TraceOp::Other => assert_eq!(r.len, 0),
            op => panic!("the clients made no {op}: {r:?}"),
        }
    }
    assert_eq!(rows, expected_rows());

    // detect, through the library: each job's period within 10%.
    let t = read_trace(&trace, None).unwrap();
    assert_eq!(t.format, Format::Csv);
    let jobs = t.by_job();
    assert_eq!(jobs.len(), JOBS.len());
    for job in JOBS {
        let det = detect(&jobs[&JobId(job.id)]);
        let est = det
            .periodic()
            .unwrap_or_else(|| panic!("job {}: {det:?}", job.id));
        let (got, want) = (est.period.as_secs_f64(), job.period.as_secs_f64());
        assert!(close(got, want), "job {}: {got} s, want {want} s", job.id);
    }

    // replay, through the library: every job gets exactly its rows.
    let result = run(
        Counted::build("iosets", &[]).unwrap(),
        from_records(&records),
        DeviceModel::ssd(),
    )
    .expect("replay");
    let mut served: BTreeMap<u64, usize> = BTreeMap::new();
    for r in &result.records {
        *served.entry(r.job.0).or_default() += 1;
    }
    assert_eq!(served, expected_rows());

    // The same file through the binary: `iosets detect --json`.
    let p = trace.display().to_string();
    let json = common::succeeds(&dir, &["detect", &p, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["format"], "csv");
    for job in JOBS {
        let j = v["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["job"] == job.id)
            .unwrap_or_else(|| panic!("no job {} in {v}", job.id));
        assert_eq!(j["periodic"], true, "{j}");
        let got = j["period_s"].as_f64().unwrap();
        assert!(close(got, job.period.as_secs_f64()), "job {}: {j}", job.id);
    }

    // And `iosets replay --trace`: the table's `reqs` column per job.
    let out = common::succeeds(
        &dir,
        &[
            "replay", "--policy", "iosets", "--trace", &p, "--window", "10",
        ],
    );
    let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    // "win mean", "win min", "win max" are two words each in the header, one cell in a row.
    let reqs = header.iter().position(|c| *c == "reqs").unwrap() - 3 + 1;
    let mut table: BTreeMap<u64, usize> = BTreeMap::new();
    for line in out.lines().filter(|l| l.starts_with("job ")) {
        let cells: Vec<&str> = line.split_whitespace().collect();
        table.insert(cells[1].parse().unwrap(), cells[reqs].parse().unwrap());
    }
    assert_eq!(table, expected_rows(), "{out}");
    let total: usize = expected_rows().values().sum();
    assert!(
        out.contains(&format!("policy iosets: {total} requests")),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_malformed_request_trace_fails_both_commands_with_its_line_and_column() {
    let dir = scratch("trace-malformed");
    let head = "job,tag,op,path,offset,len,arrival_ns,dispatch_ns,complete_ns,errno\n";
    let ok = "1,1,write,a,0,10,5,6,7,0\n";
    let cases = [
        (
            "len.csv",
            format!("{head}{ok}1,2,write,a,0,ten,5,6,7,0\n"),
            "line 3",
            "column len",
        ),
        (
            "op.csv",
            format!("{head}1,2,seek,a,0,1,5,6,7,0\n"),
            "line 2",
            "unknown operation \"seek\"",
        ),
        (
            "neg.csv",
            format!("{head}{ok}{ok}1,2,write,a,0,1,-5,6,7,0\n"),
            "line 4",
            "column arrival_ns: -5 is negative",
        ),
        (
            "order.csv",
            format!("{head}1,2,write,a,0,1,5,6,4,0\n"),
            "line 2",
            "column complete_ns: 4 is before dispatch_ns 6",
        ),
        (
            "missing.csv",
            "job,op,len,arrival_ns\n1,write,1,5\n".to_string(),
            "line 1",
            "missing required column offset",
        ),
        (
            "empty.csv",
            head.to_string(),
            "empty csv trace",
            "no request after the header",
        ),
    ];
    for (name, text, a, b) in &cases {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        let p = path.display().to_string();
        common::fails(&dir, &["detect", &p], &[name, a, b]);
        common::fails(&dir, &["replay", "--trace", &p], &[name, a, b]);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
