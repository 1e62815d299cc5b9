//! The I/O workers: OS threads that take batches from the scheduler in the policy's order and do
//! the blocking `pread`/`pwrite`/`fsync` and the metadata operations ([`meta`]), then hold the
//! thread for the emulated device (`throttle_mib_s`) or the emulated metadata back end
//! (`meta_latency_ms`) before completing the batch, so that a held thread counts as in service.

pub(crate) mod meta;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use iosets_period::trace::{RequestRecord, TraceOp};
use iosets_proto::{Bytes, Reply};
use iosets_runtime::Completion;
use iosets_types::{Nanos, Outcome};

use crate::root::FsError;
use crate::state::{Pending, ScheduledOp, Shared};
use crate::throttle::Throttle;

/// Serves batches until the scheduler is shut down and empty: I/O, completion, reply. Everything
/// per job (meters, histograms, period detection, priorities) is the runtime's, fed by the
/// completion.
pub(crate) fn run(shared: Arc<Shared>) {
    while let Some(work) = shared.sched.next() {
        let (payloads, completion) = work.into_parts();
        let mut results = Vec::with_capacity(payloads.len());
        let mut device_bytes = 0u64;
        let mut backend_calls = 0u64;
        for p in payloads {
            let r = serve(&shared, &p);
            if let Ok(s) = &r {
                device_bytes += s.moved;
                backend_calls += u64::from(s.backend_calls);
            }
            results.push((p, r));
        }
        if let Some(t) = &shared.throttle {
            if device_bytes > 0 {
                Throttle::wait(t.reserve(device_bytes));
            }
        }
        if backend_calls > 0 {
            hold_for_backend(&shared, backend_calls);
        }
        // Metadata moves no bytes (its scheduling cost is not data): the job's statistics count
        // the operation, not `meta_cost_bytes`.
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
            let r = r.map(|s| s.reply);
            // A closed connection drops the answer; the work is done either way.
            crate::conn::reply(&p.reply, Some(p.permit), &shared, p.header, op, r);
        }
    }
}

/// What serving one request did.
#[derive(Debug)]
struct Served {
    /// The answer.
    reply: Reply,
    /// Bytes moved to or from the backing store.
    moved: u64,
    /// Calls the operation makes to the emulated metadata back end (0 when it is off).
    backend_calls: u32,
}

type Answer = Result<Served, FsError>;

fn serve(shared: &Shared, p: &Pending) -> Answer {
    use crate::conn::local::Payload;
    // Done as the user the request claims (checked by the kernel), see `access`.
    let rules = crate::access::Rules {
        root_squash: shared.config.root_squash,
        no_creds: shared.config.no_creds,
        can_switch: crate::access::can_switch(),
    };
    crate::access::enter(rules.acting(p.header.creds)?)?;
    let root = &shared.root;
    let (reply, read, written) = match &p.op {
        ScheduledOp::Read {
            path,
            offset,
            len,
            into: None,
        } => {
            let data = root.read(path, *offset, *len)?;
            let n = data.len() as u64;
            (Reply::Data(Bytes::from(data)), n, 0)
        }
        ScheduledOp::Read {
            path,
            offset,
            len,
            into: Some(place),
        } => {
            let n = root.read_into(path, *offset, *len, &place.region, place.at)?;
            (Reply::Placed(n), u64::from(n), 0)
        }
        ScheduledOp::Write {
            path,
            offset,
            data: Payload::Inline(data),
        } => {
            let n = root.write(path, *offset, data)?;
            (Reply::Written(n), 0, u64::from(n))
        }
        ScheduledOp::Write {
            path,
            offset,
            data: Payload::Shared { place, len },
        } => {
            let n = root.write_from(path, *offset, &place.region, place.at, *len)?;
            (Reply::Written(n), 0, u64::from(n))
        }
        ScheduledOp::Fsync { path } => {
            root.fsync(path)?;
            (Reply::Done, 0, 0)
        }
        ScheduledOp::Meta(op) => return serve_meta(shared, p, op),
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
    Ok(Served {
        reply,
        moved: read + written,
        backend_calls: 0,
    })
}

/// A metadata operation, and its calls to the emulated back end if there is one. A failed
/// operation makes none: it found out locally (the name exists, the directory is missing)
/// without touching the storage objects whose wait the emulation stands for.
fn serve_meta(shared: &Shared, p: &Pending, op: &meta::MetaOp) -> Answer {
    shared.counters.meta_served(op);
    let reply = op.serve(&shared.root, p.header.creds)?;
    let config = &shared.config;
    // The stripe-count attribute is read only when the back end is emulated: no cost otherwise.
    let backend_calls = if config.meta_latency_ms > 0.0 {
        crate::access::as_server(|| Ok(op.backend_calls(&shared.root, config.meta_fanout)))?
    } else {
        0
    };
    Ok(Served {
        reply,
        moved: 0,
        backend_calls,
    })
}

/// Holds this worker for `calls × meta_latency_ms`, as a metadata server's thread waits for
/// congested storage servers (seed 003), and counts it. The count is the computed time, not the
/// measured sleep (which the OS may stretch), so it is exact and testable.
fn hold_for_backend(shared: &Shared, calls: u64) {
    let ns = (calls as f64 * shared.config.meta_latency_ms * 1e6).round();
    // Validation bounds it: 4096 calls × 60 s per call fits a u64 of nanoseconds many times.
    let ns = ns as u64;
    std::thread::sleep(Duration::from_nanos(ns));
    shared.counters.backend_held(calls, ns);
}

/// One trace row per request of the batch (iosets' request trace, `iosets_period::trace`), every
/// time on the scheduler's clock. A metadata operation is a row of op `other` (the trace format
/// has no metadata operation) with its target path (the source of a rename or link, `.` for
/// statfs), offset 0 and length 0: it moves no data, so a period detector reading the trace
/// sees no bytes from it (its scheduling cost, `meta_cost_bytes`, is not recorded).
fn write_trace(
    shared: &Shared,
    completion: &Completion,
    results: &[(Pending, Answer)],
    done: Nanos,
) {
    let Some(trace) = &shared.trace else { return };
    let dispatched = completion.dispatched_at();
    let mut w = trace.lock();
    for (req, (p, r)) in completion.batch().requests().zip(results) {
        let (path, op, offset, len) = match &p.op {
            ScheduledOp::Read {
                path, offset, len, ..
            } => (path.as_str(), TraceOp::Read, *offset, u64::from(*len)),
            ScheduledOp::Write { path, offset, data } => {
                (path.as_str(), TraceOp::Write, *offset, data.len() as u64)
            }
            ScheduledOp::Fsync { path } => (path.as_str(), TraceOp::Fsync, 0, 0),
            ScheduledOp::Meta(m) => (m.target(), TraceOp::Other, 0, 0),
        };
        let record = RequestRecord {
            tag: Some(p.header.tag),
            path: Some(path.to_string()),
            dispatch: Some(dispatched),
            complete: Some(done),
            errno: Some(r.as_ref().map_or_else(|e| e.errno, |_| 0)),
            ..RequestRecord::new(p.header.job, op, offset, len, req.arrival)
        };
        let _ = w.write(&record);
    }
    let _ = w.flush();
}
