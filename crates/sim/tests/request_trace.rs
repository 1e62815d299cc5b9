//! Replaying iosets' request trace (the server's `--trace` file): every row becomes one request
//! with the row's job, file, offset, length, operation and arrival, and the replay serves each
//! job exactly the requests and bytes the trace holds.

use std::collections::BTreeMap;

use iosets_period::trace::{parse_requests, RequestRecord, TraceOp, TraceWriter};
use iosets_policy::Counted;
use iosets_sim::workload::from_records;
use iosets_sim::{run, DeviceModel};
use iosets_types::hash::fnv1a64;
use iosets_types::{FileId, JobId, Nanos, Op, RequestId};

/// Three jobs, each a burst of writes every `period` ms, an fsync closing each burst, and one
/// failed read: what a server's trace holds.
fn server_like_trace() -> String {
    let mut w = TraceWriter::new(Vec::new()).unwrap();
    let mut tag = 0;
    for (job, period_ms) in [(1u64, 100u64), (2, 250), (3, 500)] {
        let path = format!("job{job}/data");
        for k in 0..(1000 / period_ms) {
            let start = Nanos::from_millis(k * period_ms);
            for i in 0..4u64 {
                tag += 1;
                let arrival = start + Nanos::from_micros(i * 10);
                let mut r =
                    RequestRecord::new(JobId(job), TraceOp::Write, i << 16, 1 << 16, arrival);
                r.tag = Some(tag);
                r.path = Some(path.clone());
                r.dispatch = Some(arrival + Nanos(500));
                r.complete = Some(arrival + Nanos::from_micros(40));
                r.errno = Some(0);
                w.write(&r).unwrap();
            }
            let mut f = RequestRecord::new(
                JobId(job),
                TraceOp::Fsync,
                0,
                0,
                start + Nanos::from_micros(50),
            );
            f.path = Some(path.clone());
            f.errno = Some(0);
            w.write(&f).unwrap();
        }
    }
    let mut bad = RequestRecord::new(JobId(3), TraceOp::Read, 0, 4096, Nanos::from_millis(999));
    bad.path = Some("missing".into());
    bad.errno = Some(2);
    w.write(&bad).unwrap();
    String::from_utf8(w.into_inner().unwrap()).unwrap()
}

#[test]
fn each_row_becomes_one_request_with_its_fields() {
    let records = parse_requests(&server_like_trace()).unwrap();
    let work = from_records(&records);
    assert_eq!(work.len(), records.len());
    for (i, (req, rec)) in work.iter().zip(&records).enumerate() {
        assert_eq!(req.id, RequestId(i as u64));
        assert_eq!(
            (req.job, req.offset, req.len, req.arrival),
            (rec.job, rec.offset, rec.len, rec.arrival)
        );
        let path = rec.path.as_deref().unwrap();
        assert_eq!(req.file, FileId(fnv1a64(path.as_bytes())));
        let op = match rec.op {
            TraceOp::Read => Op::Read,
            TraceOp::Write => Op::Write,
            TraceOp::Fsync => Op::Other,
            TraceOp::Other => Op::Meta,
        };
        assert_eq!(req.op, op);
        assert_eq!((req.class, req.priority), (None, None));
    }
}

#[test]
fn rows_without_a_path_are_files_of_their_job() {
    let text = "job,op,offset,len,arrival_ns\n5,write,0,10,0\n6,read,0,10,0\n";
    let work = from_records(&parse_requests(text).unwrap());
    assert_eq!(work[0].file, FileId(5));
    assert_eq!(work[1].file, FileId(6));
}

#[test]
fn the_replay_serves_each_job_the_requests_and_bytes_of_the_trace() {
    let records = parse_requests(&server_like_trace()).unwrap();
    let mut want: BTreeMap<JobId, (usize, u64)> = BTreeMap::new();
    for r in &records {
        let e = want.entry(r.job).or_default();
        e.0 += 1;
        e.1 += r.len;
    }
    for policy in ["noop", "wfq", "iosets"] {
        let result = run(
            Counted::build(policy, &[]).unwrap(),
            from_records(&records),
            DeviceModel::ssd(),
        )
        .unwrap();
        let mut got: BTreeMap<JobId, (usize, u64)> = BTreeMap::new();
        for r in &result.records {
            let e = got.entry(r.job).or_default();
            e.0 += 1;
            e.1 += r.bytes;
        }
        assert_eq!(got, want, "{policy}");
        // Every request is served after it arrived, at the trace's arrival time.
        let arrivals: BTreeMap<RequestId, Nanos> = from_records(&records)
            .iter()
            .map(|r| (r.id, r.arrival))
            .collect();
        for r in &result.records {
            assert_eq!(r.arrival, arrivals[&r.id], "{policy}");
            assert!(r.dispatch >= r.arrival, "{policy}: {r:?}");
        }
    }
}
