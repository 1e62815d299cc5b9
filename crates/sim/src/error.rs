//! The request-level simulator's error type (the fluid simulator has its own,
//! [`crate::fluid::FluidError`]).

use std::path::PathBuf;

use iosets_policy::PolicyError;
use iosets_types::{Nanos, RequestId};

/// What can go wrong when building a device or a workload, replaying it, or writing its report.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    /// A device parameter is out of range.
    #[error("invalid device: {field} = {value}: {expected}")]
    InvalidDevice {
        /// The parameter (`bandwidth`, `slots`).
        field: &'static str,
        /// The value given, as text.
        value: String,
        /// What would have been accepted.
        expected: &'static str,
    },
    /// A workload generator parameter is out of range or inconsistent.
    #[error("invalid workload spec: {field}: {problem}")]
    InvalidSpec {
        /// The parameter (`jobs`, `size_min`, ...).
        field: &'static str,
        /// What is wrong with it.
        problem: String,
    },
    /// A line of a CSV trace could not be used.
    #[error("trace {}line {line}: {problem}", path.as_ref().map_or_else(String::new, |p| format!("{}, ", p.display())))]
    Csv {
        /// The trace file, when read from one.
        path: Option<PathBuf>,
        /// 1-based line number in the file (the header is line 1).
        line: usize,
        /// What is wrong on that line.
        problem: CsvProblem,
    },
    /// Reading or writing a file failed.
    #[error("{}: {error}", path.as_ref().map_or_else(|| "I/O".to_string(), |p| p.display().to_string()))]
    Io {
        /// The file, when known.
        path: Option<PathBuf>,
        /// The underlying error (shown in this error's message, so not chained as its source).
        error: std::io::Error,
    },
    /// Two requests of the workload share an id.
    #[error("workload has two requests with id {id}")]
    DuplicateRequestId {
        /// The repeated id.
        id: RequestId,
    },
    /// The policy dispatched a request the simulator never gave it (or not yet).
    #[error("policy {policy} dispatched request {id}, which was never enqueued")]
    UnknownRequest {
        /// The policy's name.
        policy: &'static str,
        /// The request id.
        id: RequestId,
    },
    /// The policy dispatched a request a second time.
    #[error("policy {policy} dispatched request {id} twice")]
    DispatchedTwice {
        /// The policy's name.
        policy: &'static str,
        /// The request id.
        id: RequestId,
    },
    /// The policy stopped dispatching while requests were still queued: it answered `Idle` with
    /// nothing in service and nothing left to arrive, or kept deferring with `NotBefore` without
    /// ever dispatching.
    #[error(
        "policy {policy} stalled at t={now}: {queued} requests queued, {in_service} batches in \
         service, {undispatched} requests never dispatched ({reason})"
    )]
    Stalled {
        /// The policy's name.
        policy: &'static str,
        /// Virtual time of the stall.
        now: Nanos,
        /// Requests the policy reports as queued.
        queued: usize,
        /// Batches in service.
        in_service: usize,
        /// Requests of the workload not dispatched.
        undispatched: usize,
        /// Which guard fired.
        reason: &'static str,
    },
    /// The policy refused a completion or its counters do not balance at the end.
    #[error("policy {policy}: {error}")]
    Policy {
        /// The policy's name.
        policy: &'static str,
        /// What it reported (shown in this error's message, so not chained as its source).
        error: PolicyError,
    },
    /// The replay ended with requests never dispatched.
    #[error("policy {policy} never dispatched {missing} requests (first: {first})")]
    NotDispatched {
        /// The policy's name.
        policy: &'static str,
        /// How many.
        missing: usize,
        /// The first of them in workload order.
        first: RequestId,
    },
    /// A share window of zero requests was asked for.
    #[error("window must hold at least one request")]
    ZeroWindow,
    /// Drawing the plot failed.
    #[error("plot {}: {message}", path.display())]
    Plot {
        /// The output file.
        path: PathBuf,
        /// The drawing back end's message.
        message: String,
    },
}

/// What is wrong with one line of a CSV trace (see [`crate::workload::read_csv`]).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CsvProblem {
    /// The file holds no line at all (not even a header).
    #[error("empty file: expected a header line with at least time_s,job,size")]
    Empty,
    /// The header has no data line after it.
    #[error("no requests after the header")]
    NoRequests,
    /// The header names a column this reader does not know.
    #[error("unknown column {name:?}; known columns: time_s, job, size, file, offset, op, class, priority")]
    UnknownColumn {
        /// The name given.
        name: String,
    },
    /// The header names a column twice.
    #[error("column {name:?} appears twice in the header")]
    DuplicateColumn {
        /// The repeated name.
        name: String,
    },
    /// A required column is missing from the header.
    #[error("missing required column {name:?} (required: time_s, job, size)")]
    MissingColumn {
        /// The missing name.
        name: &'static str,
    },
    /// A data line has a different number of fields than the header.
    #[error("expected {expected} fields (as in the header), found {found}")]
    FieldCount {
        /// Fields in the header.
        expected: usize,
        /// Fields on this line.
        found: usize,
    },
    /// A field is not a number of the expected kind.
    #[error("column {column}: bad number {value:?}: expected {expected}")]
    BadNumber {
        /// The column.
        column: &'static str,
        /// The text found.
        value: String,
        /// What would have been accepted.
        expected: &'static str,
    },
    /// `time_s` is negative.
    #[error("column time_s: negative time {value}")]
    NegativeTime {
        /// The value found.
        value: f64,
    },
    /// `op` is not read, write or other.
    #[error("column op: unknown operation {value:?}: expected read, write or other")]
    UnknownOp {
        /// The text found.
        value: String,
    },
    /// `priority` is zero or negative (or not finite).
    #[error("column priority: {value} is not a priority: expected a finite number > 0")]
    BadPriority {
        /// The value found.
        value: f64,
    },
}
