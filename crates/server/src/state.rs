//! What the connections, the workers and the control plane share.

use std::fs::File;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use iosets_proto::{Encoded, Header};
use iosets_runtime::Scheduler;
use parking_lot::Mutex;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::OwnedSemaphorePermit;

use crate::root::Root;
use crate::throttle::Throttle;
use crate::ServerConfig;

/// An answer on its way to a connection's writer, with the connection's in-flight allowance,
/// given back once the answer is written to the socket (so backpressure bounds the answers
/// waiting to be sent too).
pub(crate) type Outgoing = (Encoded, Option<OwnedSemaphorePermit>);

/// A data request waiting in the scheduler: what to do and where to answer.
#[derive(Debug)]
pub(crate) struct Pending {
    pub(crate) header: Header,
    pub(crate) op: DataOp,
    pub(crate) reply: UnboundedSender<Outgoing>,
    /// The connection's in-flight allowance, travelling with the answer.
    pub(crate) permit: OwnedSemaphorePermit,
}

/// The operations that go through the scheduler.
#[derive(Debug)]
pub(crate) enum DataOp {
    Read {
        path: String,
        offset: u64,
        len: u32,
        /// Where the bytes go: into the reply (`None`), or into the connection's shared region
        /// (the same-host transport).
        into: Option<crate::conn::local::Place>,
    },
    Write {
        path: String,
        offset: u64,
        data: crate::conn::local::Payload,
    },
    Fsync {
        path: String,
    },
}

impl DataOp {
    /// The protocol operation.
    pub(crate) fn opcode(&self) -> iosets_proto::OpCode {
        match self {
            DataOp::Read { .. } => iosets_proto::OpCode::Read,
            DataOp::Write { .. } => iosets_proto::OpCode::Write,
            DataOp::Fsync { .. } => iosets_proto::OpCode::Fsync,
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
}

/// The server's shared state.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) config: ServerConfig,
    pub(crate) sched: Scheduler<Pending>,
    pub(crate) root: Root,
    pub(crate) throttle: Option<Throttle>,
    pub(crate) counters: Counters,
    pub(crate) start: Instant,
    /// The request trace, when asked for (header written at creation).
    pub(crate) trace: Option<Mutex<iosets_period::trace::TraceWriter<File>>>,
    /// The UNIX-epoch nanosecond at which the scheduler's clock read zero: converts the phase
    /// stamps clients send (wall clock) into the scheduler's time base, and opens the trace.
    pub(crate) clock_zero_unix_ns: u64,
}
