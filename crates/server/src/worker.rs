//! The I/O workers: OS threads that take batches from the scheduler in the policy's order and do
//! the blocking `pread`/`pwrite`/`fsync`.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use iosets_period::trace::{RequestRecord, TraceOp};
use iosets_proto::{Bytes, Reply};
use iosets_runtime::Completion;
use iosets_types::{Nanos, Outcome};

use crate::root::FsError;
use crate::state::{DataOp, Pending, Shared};
use crate::throttle::Throttle;

/// Serves batches until the scheduler is shut down and empty: I/O, completion, reply. Everything
/// per job (meters, histograms, period detection, priorities) is the runtime's, fed by the
/// completion.
pub(crate) fn run(shared: Arc<Shared>) {
    while let Some(work) = shared.sched.next() {
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
        if shared.trace.is_some() {
            // Stamped before the completion, which may let another job's request be dispatched:
            // a trace then never shows two jobs of one set in service at once when they were not.
            let done = shared.sched.now();
            write_trace(&shared, &completion, &results, done);
        }
        completion.complete(outcome);
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
    use crate::conn::local::Payload;
    let root = &shared.root;
    let (reply, read, written) = match op {
        DataOp::Read {
            path,
            offset,
            len,
            into: None,
        } => {
            let data = root.read(path, *offset, *len)?;
            let n = data.len() as u64;
            (Reply::Data(Bytes::from(data)), n, 0)
        }
        DataOp::Read {
            path,
            offset,
            len,
            into: Some(place),
        } => {
            let n = root.read_into(path, *offset, *len, &place.region, place.at)?;
            (Reply::Placed(n), u64::from(n), 0)
        }
        DataOp::Write {
            path,
            offset,
            data: Payload::Inline(data),
        } => {
            let n = root.write(path, *offset, data)?;
            (Reply::Written(n), 0, u64::from(n))
        }
        DataOp::Write {
            path,
            offset,
            data: Payload::Shared { place, len },
        } => {
            let n = root.write_from(path, *offset, &place.region, place.at, *len)?;
            (Reply::Written(n), 0, u64::from(n))
        }
        DataOp::Fsync { path } => {
            root.fsync(path)?;
            (Reply::Done, 0, 0)
        }
    };
    if read > 0 {
        shared
            .counters
            .bytes_read
            .fetch_add(read, Ordering::Relaxed);
    }
    if written > 0 {
        shared
            .counters
            .bytes_written
            .fetch_add(written, Ordering::Relaxed);
    }
    Ok((reply, read + written))
}

/// One trace row per request of the batch (iosets' request trace, `iosets_period::trace`), every
/// time on the scheduler's clock.
fn write_trace(
    shared: &Shared,
    completion: &Completion,
    results: &[(Pending, Served)],
    done: Nanos,
) {
    let Some(trace) = &shared.trace else { return };
    let dispatched = completion.dispatched_at();
    let mut w = trace.lock();
    for (req, (p, r)) in completion.batch().requests().zip(results) {
        let (path, op, offset, len) = match &p.op {
            DataOp::Read {
                path, offset, len, ..
            } => (path, TraceOp::Read, *offset, u64::from(*len)),
            DataOp::Write { path, offset, data } => {
                (path, TraceOp::Write, *offset, data.len() as u64)
            }
            DataOp::Fsync { path } => (path, TraceOp::Fsync, 0, 0),
        };
        let record = RequestRecord {
            tag: Some(p.header.tag),
            path: Some(path.clone()),
            dispatch: Some(dispatched),
            complete: Some(done),
            errno: Some(r.as_ref().map_or_else(|e| e.errno, |_| 0)),
            ..RequestRecord::new(p.header.job, op, offset, len, req.arrival)
        };
        let _ = w.write(&record);
    }
    let _ = w.flush();
}
