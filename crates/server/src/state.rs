//! What the connections, the workers and the control plane share.

use std::fs::File;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use iosets_proto::Header;
use iosets_runtime::Scheduler;
use parking_lot::Mutex;
use tokio::sync::OwnedSemaphorePermit;

use crate::root::Root;
use crate::throttle::Throttle;
use crate::worker::meta::{MetaOp, META_OPS};
use crate::ServerConfig;

/// What one request holds while it is in the server, from its frame's arrival until its answer
/// is written (or dropped with its connection): one of the connection's request slots, its
/// bytes against the connection's and the server's byte budgets, and a mark on the
/// connection's entry (a connection with requests in flight is never closed as idle).
#[derive(Debug)]
pub(crate) struct Allowance {
    /// Held for its drop: one of the connection's request slots.
    pub(crate) _slot: OwnedSemaphorePermit,
    pub(crate) conn_bytes: Option<OwnedSemaphorePermit>,
    pub(crate) server_bytes: Option<OwnedSemaphorePermit>,
    pub(crate) entry: Option<std::sync::Arc<crate::guard::ConnEntry>>,
}

impl Allowance {
    /// A frame's allowance: one of the connection's request slots, no bytes yet, and the
    /// connection's entry (its frame in flight ends when the allowance drops).
    pub(crate) fn for_frame(
        slot: OwnedSemaphorePermit,
        entry: &std::sync::Arc<crate::guard::ConnEntry>,
    ) -> Allowance {
        entry.touch();
        entry.begin();
        Allowance {
            _slot: slot,
            conn_bytes: None,
            server_bytes: None,
            entry: Some(entry.clone()),
        }
    }

    /// Adds a charge to the connection's byte budget.
    pub(crate) fn add_conn_bytes(&mut self, p: OwnedSemaphorePermit) {
        match &mut self.conn_bytes {
            Some(held) => held.merge(p),
            None => self.conn_bytes = Some(p),
        }
    }

    /// Adds a charge to the server's byte budget.
    pub(crate) fn add_server_bytes(&mut self, p: OwnedSemaphorePermit) {
        match &mut self.server_bytes {
            Some(held) => held.merge(p),
            None => self.server_bytes = Some(p),
        }
    }
}

impl Drop for Allowance {
    fn drop(&mut self) {
        if let Some(e) = &self.entry {
            e.end();
        }
    }
}

/// A request waiting in the scheduler (data or metadata): what to do and where to answer.
#[derive(Debug)]
pub(crate) struct Pending {
    /// The request's header (job, tag, credentials), echoed in the answer.
    pub(crate) header: Header,
    /// What to do.
    pub(crate) op: ScheduledOp,
    /// The connection's writer.
    pub(crate) reply: crate::conn::answers::Answers,
    /// The request's in-flight allowance, travelling with the answer.
    pub(crate) permit: Allowance,
}

/// The operations that go through the scheduler: every file operation. Only the control plane
/// (control, phase ends, the same-host transport's set-up) is answered beside it.
#[derive(Debug)]
pub(crate) enum ScheduledOp {
    /// `pread`.
    Read {
        path: String,
        offset: u64,
        len: u32,
        /// Where the bytes go: into the reply (`None`), or into the connection's shared region
        /// (the same-host transport).
        into: Option<crate::conn::local::Place>,
    },
    /// `pwrite`.
    Write {
        path: String,
        offset: u64,
        data: crate::conn::local::Payload,
    },
    /// `fsync`.
    Fsync { path: String },
    /// A metadata operation (lookup, create, unlink, readdir, …): scheduled like data, as
    /// `Op::Meta` costing `meta_cost_bytes`, completed with no bytes moved.
    Meta(MetaOp),
}

impl ScheduledOp {
    /// The protocol operation.
    pub(crate) fn opcode(&self) -> iosets_proto::OpCode {
        match self {
            ScheduledOp::Read { .. } => iosets_proto::OpCode::Read,
            ScheduledOp::Write { .. } => iosets_proto::OpCode::Write,
            ScheduledOp::Fsync { .. } => iosets_proto::OpCode::Fsync,
            ScheduledOp::Meta(m) => m.opcode(),
        }
    }
}

/// Server-wide counters (the scheduler keeps the conservation counters).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    connections: AtomicU64,
    frames: AtomicU64,
    bad_frames: AtomicU64,
    errors: AtomicU64,
    pub(crate) bytes_read: AtomicU64,
    pub(crate) bytes_written: AtomicU64,
    /// Metadata operations served (successfully or not), per operation of [`META_OPS`].
    meta_served: [AtomicU64; META_OPS.len()],
    /// Calls made to the emulated slow back end (`meta_latency_ms`).
    backend_calls: AtomicU64,
    /// Time the workers were held by the emulated back end, in nanoseconds: the sum of
    /// `calls × meta_latency_ms`, computed, not measured (a sleep may overrun).
    backend_blocked_ns: AtomicU64,
    /// Phases ended because the last connection carrying them closed (`conn::OpenPhases`).
    phases_gone: AtomicU64,
}

impl Counters {
    pub(crate) fn connection_opened(&self) {
        self.connections.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn connection_closed(&self) {
        self.connections.fetch_sub(1, Ordering::Relaxed);
    }
    pub(crate) fn frame(&self) {
        self.frames.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn bad_frame(&self) {
        self.bad_frames.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn error(&self) {
        self.errors.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }
    pub(crate) fn frames(&self) -> u64 {
        self.frames.load(Ordering::Relaxed)
    }
    pub(crate) fn bad_frames(&self) -> u64 {
        self.bad_frames.load(Ordering::Relaxed)
    }
    pub(crate) fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }
    pub(crate) fn phase_gone(&self) {
        self.phases_gone.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn phases_gone(&self) -> u64 {
        self.phases_gone.load(Ordering::Relaxed)
    }
    /// Counts a metadata operation served.
    pub(crate) fn meta_served(&self, op: &MetaOp) {
        self.meta_served[op.index()].fetch_add(1, Ordering::Relaxed);
    }
    /// Metadata operations served, per operation, in the order of [`META_OPS`].
    pub(crate) fn meta_served_by_op(
        &self,
    ) -> impl Iterator<Item = (iosets_proto::OpCode, u64)> + '_ {
        META_OPS
            .iter()
            .zip(&self.meta_served)
            .map(|(&op, n)| (op, n.load(Ordering::Relaxed)))
    }
    /// Counts `calls` to the emulated back end that held a worker `blocked_ns`.
    pub(crate) fn backend_held(&self, calls: u64, blocked_ns: u64) {
        self.backend_calls.fetch_add(calls, Ordering::Relaxed);
        self.backend_blocked_ns
            .fetch_add(blocked_ns, Ordering::Relaxed);
    }
    /// Calls made to the emulated back end.
    pub(crate) fn backend_calls(&self) -> u64 {
        self.backend_calls.load(Ordering::Relaxed)
    }
    /// Nanoseconds the workers were held by the emulated back end (computed from the calls).
    pub(crate) fn backend_blocked_ns(&self) -> u64 {
        self.backend_blocked_ns.load(Ordering::Relaxed)
    }
}

/// The server's shared state.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) config: ServerConfig,
    pub(crate) sched: Scheduler<Pending>,
    pub(crate) root: Root,
    /// How the server spends its file descriptors (the connection cap is `fds.connections`).
    pub(crate) fds: crate::limits::FdBudget,
    pub(crate) throttle: Option<Throttle>,
    pub(crate) counters: Counters,
    pub(crate) start: Instant,
    /// The request trace, when asked for (header written at creation).
    pub(crate) trace: Option<Mutex<iosets_period::trace::TraceWriter<File>>>,
    /// When the scheduler's clock read zero: converts the phase stamps clients send (wall
    /// clock) into the scheduler's time base ([`iosets_types::UnixNanos::since`]), and opens
    /// the trace.
    pub(crate) clock_zero: iosets_types::UnixNanos,
    /// Refusals (counted, logged rate-limited) and failed proofs per address.
    pub(crate) guard: crate::guard::Guard,
    /// The open connections (cap, idle eviction).
    pub(crate) connections: std::sync::Arc<crate::guard::Connections>,
    /// The bytes of every connection's requests in the server (`max_inflight_bytes`).
    pub(crate) inflight_bytes: crate::guard::ByteBudget,
    /// The connection cap in force (`max_connections`, or from the descriptor limit).
    pub(crate) max_connections: usize,
    /// Hints lowered or dropped by the hint policy.
    pub(crate) hints_overridden: AtomicU64,
    /// The admin address (`/metrics`, `/jobs`, `/stats`), if there is one.
    pub(crate) admin: Option<std::net::SocketAddr>,
    /// Held while a rule change is made and written to the state file, so that the file
    /// always holds the rules of the last change.
    pub(crate) state_lock: std::sync::Mutex<()>,
    /// How many open connections carry each job's phase (`conn::OpenPhases`): a phase ends
    /// with the last of them. A client replaces its TCP connection by the same-host socket
    /// after its first large request, in the middle of a phase: that close ends nothing.
    pub(crate) phase_conns:
        Mutex<iosets_types::hash::IdMap<(iosets_types::JobId, iosets_types::UnixNanos), u32>>,
}
