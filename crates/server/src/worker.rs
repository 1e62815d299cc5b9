//! The I/O workers: OS threads that take batches from the scheduler in the policy's order and do
//! the blocking `pread`/`pwrite`/`fsync`.

use std::io::Write;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use iosets_proto::{Bytes, Reply};
use iosets_types::Outcome;

use crate::root::FsError;
use crate::state::{DataOp, Pending, PrioritySource, Shared};
use crate::throttle::Throttle;

/// Serves batches until the scheduler is shut down and empty.
pub(crate) fn run(shared: Arc<Shared>) {
    while let Some(work) = shared.sched.next() {
        let dispatched = Instant::now();
        let policy = shared.sched.policy_name();
        let (payloads, completion) = work.into_parts();
        let mut results = Vec::with_capacity(payloads.len());
        let mut device_bytes = 0u64;
        for p in payloads {
            let r = serve(&shared, &p.op);
            if let Ok((_, moved)) = &r {
                device_bytes += moved;
            }
            results.push((p, r));
        }
        if let Some(t) = &shared.throttle {
            if device_bytes > 0 {
                Throttle::wait(t.reserve(device_bytes));
            }
        }
        let outcome = match results.iter().find_map(|(_, r)| r.as_ref().err()) {
            Some(e) => Outcome::Failed { errno: e.errno },
            None => Outcome::Done {
                bytes: device_bytes,
            },
        };
        // Stamped before the completion, which may let another job's request be dispatched:
        // a trace then never shows two jobs of one set in service at once when they were not.
        let done = Instant::now();
        completion.complete(outcome);
        record(&shared, policy, &results, dispatched, done);
        for (p, r) in results {
            let op = p.op.opcode();
            let r = r.map(|(reply, _)| reply);
            // A closed connection drops the answer; the work is done either way.
            crate::conn::reply(&p.reply, Some(p.permit), &shared, p.header, op, r);
        }
    }
}

type Served = Result<(Reply, u64), FsError>;

fn serve(shared: &Shared, op: &DataOp) -> Served {
    match op {
        DataOp::Read { path, offset, len } => {
            let data = shared.root.read(path, *offset, *len)?;
            let n = data.len() as u64;
            shared.counters.bytes_read.fetch_add(n, Ordering::Relaxed);
            Ok((Reply::Data(Bytes::from(data)), n))
        }
        DataOp::Write { path, offset, data } => {
            let n = shared.root.write(path, *offset, data)?;
            shared
                .counters
                .bytes_written
                .fetch_add(u64::from(n), Ordering::Relaxed);
            Ok((Reply::Written(n), u64::from(n)))
        }
        DataOp::Fsync { path } => {
            shared.root.fsync(path)?;
            Ok((Reply::Done, 0))
        }
    }
}

fn record(
    shared: &Shared,
    policy: &'static str,
    results: &[(Pending, Served)],
    dispatched: Instant,
    done: Instant,
) {
    {
        let mut meters = shared.meters.lock();
        // Every served request counts as activity (an fsync moves no bytes but keeps its job
        // from being forgotten as idle).
        for (p, r) in results {
            meters.add(p.header.job, done, r.as_ref().map_or(0, |(_, n)| *n));
        }
    }
    {
        let mut h = shared.histograms.lock();
        for (p, _) in results {
            let e = h
                .by_policy
                .entry((policy, p.op.opcode().as_str()))
                .or_default();
            e.0.record(
                dispatched
                    .saturating_duration_since(p.received)
                    .as_secs_f64(),
            );
            e.1.record(done.saturating_duration_since(dispatched).as_secs_f64());
        }
    }
    if let Some(auto) = &shared.auto {
        let mut moves = Vec::new();
        {
            let mut auto = auto.lock();
            for (p, r) in results {
                if let Ok((_, n)) = r {
                    if *n > 0 {
                        moves.extend(auto.observe(p.header.job, p.received, done, *n));
                    }
                }
            }
        }
        for m in moves {
            let mut prios = shared.priorities.lock();
            if matches!(prios.get(&m.job), Some((_, PrioritySource::Control))) {
                continue; // the control plane's word is final
            }
            // Under the priorities lock, so a concurrent control request cannot be overwritten.
            shared.sched.set_priority(m.job, Some(m.priority));
            prios.insert(m.job, (m.priority.get(), PrioritySource::Auto));
            tracing::info!(job = %m.job, period_s = m.period_s, set = m.set, "automatic priority");
        }
    }
    if let Some(trace) = &shared.trace {
        let ns = |t: Instant| t.saturating_duration_since(shared.start).as_nanos();
        let mut w = trace.lock();
        for (p, r) in results {
            let (path, offset, len) = match &p.op {
                DataOp::Read { path, offset, len } => (path, *offset, u64::from(*len)),
                DataOp::Write { path, offset, data } => (path, *offset, data.len() as u64),
                DataOp::Fsync { path } => (path, 0, 0),
            };
            let op = p.op.opcode().as_str();
            let _ = writeln!(
                w,
                "{},{},{},{:?},{},{},{},{},{},{}",
                p.header.job,
                p.header.tag,
                op,
                path,
                offset,
                len,
                ns(p.received),
                ns(dispatched),
                ns(done),
                r.as_ref().map_or_else(|e| e.errno, |_| 0)
            );
        }
        let _ = w.flush();
    }
}

/// The trace file's header line.
pub(crate) const TRACE_HEADER: &str =
    "job,tag,op,path,offset,len,arrival_ns,dispatch_ns,complete_ns,errno";
