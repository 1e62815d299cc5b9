//! The vocabulary of iosets: the newtypes every other crate speaks.
//!
//! A job is identified by a [`JobId`] (Slurm's job id, or `IOSETS_JOB_ID`), a request by a
//! [`RequestId`] unique within one scheduler, a file by a [`FileId`]. Time is [`Nanos`]: a count of
//! nanoseconds since an origin chosen by whoever drives the scheduler (a real monotonic clock in the
//! server, a virtual clock in the simulator and the tests). A [`Priority`] is a positive, finite
//! weight; IO-SETS gives set `i` the priority `10^-i`.
//!
//! This crate holds data only: no policy, no clock, no I/O. It depends on nothing.
#![deny(missing_docs)]

pub mod hash;

use std::fmt;
use std::ops::{Add, Sub};

/// The job (application) a request belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct JobId(pub u64);

/// A request's identity, unique among the requests one scheduler has seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct RequestId(pub u64);

/// The file a request touches; contiguity and merging are judged per file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct FileId(pub u64);

/// A caller-chosen queue class (for example a tenant, a set, or an AGIOS queue id).
///
/// Weighted fair queuing keys its queues by job unless told to key them by class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ClassId(pub u64);

/// The longest job name (in bytes) a job id is made from ([`JobId::of_name`]).
pub const MAX_JOB_NAME_LEN: usize = 64;

/// The bit set in every job id hashed from a name, and in no numeric one.
pub const HASHED_JOB_BIT: u64 = 1 << 63;

impl JobId {
    /// The job id of a job name, as the mount names jobs: a decimal name below 2^63 is its
    /// number (Slurm's job 42 is `JobId(42)`); any other name of 1 to [`MAX_JOB_NAME_LEN`] bytes
    /// is `fnv1a64(name) | 1 << 63`, so it never equals a numeric id. `None` for an empty or
    /// longer name and for a larger number: never truncated.
    ///
    /// ```
    /// use iosets_types::JobId;
    /// assert_eq!(JobId::of_name("42"), Some(JobId(42)));
    /// assert!(JobId::of_name("dd.1000").unwrap().0 >= 1 << 63);
    /// assert_eq!(JobId::of_name(""), None);
    /// ```
    pub fn of_name(name: &str) -> Option<JobId> {
        if name.is_empty() || name.len() > MAX_JOB_NAME_LEN {
            return None;
        }
        if name.bytes().all(|b| b.is_ascii_digit()) {
            return name
                .parse::<u64>()
                .ok()
                .filter(|&n| n < HASHED_JOB_BIT)
                .map(JobId);
        }
        Some(JobId(hash::fnv1a64(name.as_bytes()) | HASHED_JOB_BIT))
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Display for FileId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Display for ClassId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A point in UNIX time, in nanoseconds: a client's wall clock, as the phase stamps of its
/// requests carry it. A server turns it into its own time base with [`UnixNanos::since`], the
/// one conversion between the two.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct UnixNanos(pub u64);

impl UnixNanos {
    /// Now, by this machine's wall clock (0 before 1970, saturating after 2554).
    pub fn now() -> UnixNanos {
        UnixNanos(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
        )
    }

    /// This instant in a time base whose origin is `zero` (a server's clock zero): a time
    /// before `zero` reads as its origin.
    pub fn since(self, zero: UnixNanos) -> Nanos {
        Nanos(self.0.saturating_sub(zero.0))
    }

    /// `d` earlier (saturating at the epoch).
    pub fn before(self, d: Nanos) -> UnixNanos {
        UnixNanos(self.0.saturating_sub(d.0))
    }
}

/// A point in time or a duration, in nanoseconds since the driver's origin.
///
/// Arithmetic saturates: time never wraps and a difference never goes below zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Nanos(pub u64);

impl Nanos {
    /// Time zero.
    pub const ZERO: Nanos = Nanos(0);
    /// The far future; used for "no deadline".
    pub const MAX: Nanos = Nanos(u64::MAX);

    /// `ms` milliseconds.
    pub const fn from_millis(ms: u64) -> Nanos {
        Nanos(ms.saturating_mul(1_000_000))
    }

    /// `us` microseconds.
    pub const fn from_micros(us: u64) -> Nanos {
        Nanos(us.saturating_mul(1_000))
    }

    /// `s` seconds, rounded to the nearest nanosecond; negative or non-finite input gives zero.
    pub fn from_secs_f64(s: f64) -> Nanos {
        if s.is_finite() && s > 0.0 {
            Nanos((s * 1e9).round().min(u64::MAX as f64) as u64)
        } else {
            Nanos::ZERO
        }
    }

    /// This time in seconds.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }

    /// `self - earlier`, or zero if `earlier` is later.
    pub fn saturating_sub(self, earlier: Nanos) -> Nanos {
        Nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add for Nanos {
    type Output = Nanos;
    fn add(self, rhs: Nanos) -> Nanos {
        Nanos(self.0.saturating_add(rhs.0))
    }
}

impl Sub for Nanos {
    type Output = Nanos;
    fn sub(self, rhs: Nanos) -> Nanos {
        self.saturating_sub(rhs)
    }
}

impl fmt::Display for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.6}s", self.as_secs_f64())
    }
}

/// A scheduling priority: a positive, finite weight. Bigger gets more bandwidth.
///
/// Constructed only through [`Priority::new`], so every `Priority` in the program is valid.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub struct Priority(f64);

impl Priority {
    /// A priority of `value`; `None` unless `value` is finite and strictly positive.
    pub fn new(value: f64) -> Option<Priority> {
        (value.is_finite() && value > 0.0).then_some(Priority(value))
    }

    /// The weight as a number.
    pub fn get(self) -> f64 {
        self.0
    }

    /// A key that orders and hashes like the value (priorities are positive, so the IEEE bits
    /// order like the numbers).
    pub fn key(self) -> u64 {
        self.0.to_bits()
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Where the priority in force for a job comes from. The precedence is the order of the variants:
/// a control-plane priority beats an automatic one, which beats the hints the job's requests carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PrioritySource {
    /// Set through the runtime's `Scheduler::set_priority` (the control plane, an administrator).
    Control,
    /// Set by the job's period detector (automatic priorities).
    Auto,
    /// Carried by the job's requests (the last hint seen).
    Hint,
}

impl PrioritySource {
    /// `control`, `auto` or `hint`.
    pub fn as_str(self) -> &'static str {
        match self {
            PrioritySource::Control => "control",
            PrioritySource::Auto => "auto",
            PrioritySource::Hint => "hint",
        }
    }
}

impl std::str::FromStr for PrioritySource {
    type Err = String;

    /// `control`, `auto` or `hint`.
    fn from_str(s: &str) -> Result<PrioritySource, String> {
        match s {
            "control" => Ok(PrioritySource::Control),
            "auto" => Ok(PrioritySource::Auto),
            "hint" => Ok(PrioritySource::Hint),
            other => Err(format!(
                "{other:?} is not a priority source: expected control, auto or hint"
            )),
        }
    }
}

impl fmt::Display for PrioritySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a request does to the backing store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Op {
    /// Read `len` bytes at `offset`.
    #[default]
    Read,
    /// Write `len` bytes at `offset`.
    Write,
    /// A data operation that moves no bytes itself, part of a job's I/O phase (an `fsync`):
    /// never merged, counts its `len` (often 0) as bytes.
    Other,
    /// A metadata operation (lookup, stat, readdir, create, unlink, …): never merged, counts its
    /// `len` (its cost in bytes, chosen by the server) as bytes. A policy may order metadata apart
    /// from data: `iosets` never holds it behind another job's I/O phase.
    Meta,
}

impl Op {
    /// The lower-case name used in traces and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Other => "other",
            Op::Meta => "meta",
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Op {
    type Err = String;
    fn from_str(s: &str) -> Result<Op, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "read" | "r" => Ok(Op::Read),
            "write" | "w" => Ok(Op::Write),
            "other" | "o" => Ok(Op::Other),
            "meta" | "m" | "metadata" => Ok(Op::Meta),
            other => Err(format!(
                "unknown operation {other:?}: expected read, write, other or meta"
            )),
        }
    }
}

/// The class of an operation, as the server's metrics (`op` label), its latency series and
/// people see it: [`Op`] named for what it does to the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OpClass {
    /// Reads of file data (`data-read`).
    DataRead,
    /// Writes of file data (`data-write`).
    DataWrite,
    /// Flushes of file data to the device (`data-fsync`).
    DataFsync,
    /// Everything else: lookup, stat, readdir, create, unlink, rename, setattr, open (`meta`).
    Meta,
}

impl OpClass {
    /// The class of `op`.
    pub fn of(op: Op) -> OpClass {
        match op {
            Op::Read => OpClass::DataRead,
            Op::Write => OpClass::DataWrite,
            Op::Other => OpClass::DataFsync,
            Op::Meta => OpClass::Meta,
        }
    }

    /// `data-read`, `data-write`, `data-fsync` or `meta`.
    pub fn as_str(self) -> &'static str {
        match self {
            OpClass::DataRead => "data-read",
            OpClass::DataWrite => "data-write",
            OpClass::DataFsync => "data-fsync",
            OpClass::Meta => "meta",
        }
    }
}

impl fmt::Display for OpClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One I/O request as the scheduler sees it: metadata only, never the data.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Request {
    /// Unique within the scheduler.
    pub id: RequestId,
    /// The job that issued it.
    pub job: JobId,
    /// A class chosen by the caller, for policies that key queues by class.
    pub class: Option<ClassId>,
    /// The file it touches.
    pub file: FileId,
    /// Byte offset in the file.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
    /// Read, write or other.
    pub op: Op,
    /// The priority the client attached (IO-SETS' Set-10 priority), if any.
    pub priority: Option<Priority>,
    /// The user id of the caller, when the request carries credentials (a fair-share tree's
    /// `user` level).
    pub user: Option<u32>,
    /// When it reached the scheduler; set by whoever enqueues it.
    pub arrival: Nanos,
    /// When the job's current I/O phase started, as the client saw it, in the scheduler's time
    /// base (the server converts the client's wall-clock stamp): every server that receives a
    /// request of that phase sees the same stamp, so `iosets` with `order=phase` picks the same
    /// job of a set on every server. `None`: no stamp (the policy uses the arrival time).
    pub phase: Option<Nanos>,
}

impl Request {
    /// A request of `job` doing `op`, to complete with the builder's setters: by default file 0,
    /// offset 0, length 0, no class, no priority hint, id 0 and arrival zero (the runtime numbers
    /// a submitted request and stamps its arrival itself; simulators and tests set both).
    ///
    /// ```
    /// use iosets_types::{FileId, JobId, Op, Priority, Request};
    /// let r = Request::builder(JobId(7), Op::Write)
    ///     .file(FileId(3))
    ///     .range(4096, 1 << 20)
    ///     .priority(Priority::new(0.1))
    ///     .build();
    /// assert_eq!((r.job, r.file, r.offset, r.len), (JobId(7), FileId(3), 4096, 1 << 20));
    /// ```
    pub fn builder(job: JobId, op: Op) -> RequestBuilder {
        RequestBuilder(Request {
            id: RequestId(0),
            job,
            class: None,
            file: FileId(0),
            offset: 0,
            len: 0,
            op,
            priority: None,
            user: None,
            arrival: Nanos::ZERO,
            phase: None,
        })
    }

    /// The first byte past the request.
    pub fn end(&self) -> u64 {
        self.offset.saturating_add(self.len)
    }
}

/// Builds a [`Request`]; see [`Request::builder`]. Every field has its own typed setter, so a
/// job id cannot be passed where a file id or an offset is meant.
#[derive(Clone, Copy, Debug)]
#[must_use]
pub struct RequestBuilder(Request);

impl RequestBuilder {
    /// The file touched.
    pub fn file(mut self, file: FileId) -> RequestBuilder {
        self.0.file = file;
        self
    }

    /// `len` bytes from `offset`.
    pub fn range(mut self, offset: u64, len: u64) -> RequestBuilder {
        self.0.offset = offset;
        self.0.len = len;
        self
    }

    /// A class, for policies that key queues by class.
    pub fn class(mut self, class: ClassId) -> RequestBuilder {
        self.0.class = Some(class);
        self
    }

    /// The priority hint (IO-SETS' Set-10 priority) the client attached, if any.
    pub fn priority(mut self, priority: Option<Priority>) -> RequestBuilder {
        self.0.priority = priority;
        self
    }

    /// The caller's user id, if the request carries credentials.
    pub fn user(mut self, user: Option<u32>) -> RequestBuilder {
        self.0.user = user;
        self
    }

    /// The request's id (for drivers that number requests themselves: simulators, tests).
    pub fn id(mut self, id: RequestId) -> RequestBuilder {
        self.0.id = id;
        self
    }

    /// When the request arrived (for drivers that stamp it themselves).
    pub fn arrival(mut self, arrival: Nanos) -> RequestBuilder {
        self.0.arrival = arrival;
        self
    }

    /// The start of the job's current I/O phase, in the scheduler's time base (see
    /// [`Request::phase`]).
    pub fn phase(mut self, phase: Option<Nanos>) -> RequestBuilder {
        self.0.phase = phase;
        self
    }

    /// The request.
    pub fn build(self) -> Request {
        self.0
    }
}

/// What one dispatch hands to a worker: a request, or several contiguous requests merged into one.
///
/// The batch is identified by its first request's id; `complete` takes that id. Every original
/// request stays visible so that each is answered exactly once.
#[derive(Clone, Debug, PartialEq)]
pub struct Batch {
    head: Request,
    merged: Vec<Request>,
}

impl Batch {
    /// A batch of one request.
    pub fn single(req: Request) -> Batch {
        Batch {
            head: req,
            merged: Vec::new(),
        }
    }

    /// Appends a request contiguous with the batch (same file and operation, starting at
    /// [`Batch::end`]).
    pub fn push_merged(&mut self, req: Request) {
        debug_assert_eq!(req.file, self.head.file);
        debug_assert_eq!(req.offset, self.end());
        self.merged.push(req);
    }

    /// The id used to complete the batch: its first request's id.
    pub fn id(&self) -> RequestId {
        self.head.id
    }

    /// The first request.
    pub fn head(&self) -> &Request {
        &self.head
    }

    /// Number of original requests in the batch (1 when nothing was merged).
    pub fn len(&self) -> usize {
        1 + self.merged.len()
    }

    /// Always false: a batch holds at least one request.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The original requests, in offset order.
    pub fn requests(&self) -> impl Iterator<Item = &Request> + '_ {
        std::iter::once(&self.head).chain(self.merged.iter())
    }

    /// Total bytes of all requests.
    pub fn bytes(&self) -> u64 {
        self.requests().map(|r| r.len).sum()
    }

    /// First byte past the last request.
    pub fn end(&self) -> u64 {
        self.merged.last().unwrap_or(&self.head).end()
    }

    /// The original requests, by value.
    pub fn into_requests(self) -> Vec<Request> {
        let mut v = Vec::with_capacity(self.len());
        v.push(self.head);
        v.extend(self.merged);
        v
    }
}

/// How a dispatched batch ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Served; `bytes` were moved.
    Done {
        /// Bytes actually read or written.
        bytes: u64,
    },
    /// Not served: the I/O failed with this OS error number.
    Failed {
        /// An errno value (`EIO` = 5 when nothing more precise is known).
        errno: i32,
    },
    /// Not served: the worker dropped the completion token without answering.
    Abandoned,
}

impl Outcome {
    /// True for [`Outcome::Done`].
    pub fn is_ok(self) -> bool {
        matches!(self, Outcome::Done { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priority_rejects_non_positive_and_non_finite() {
        assert!(Priority::new(0.0).is_none());
        assert!(Priority::new(-1.0).is_none());
        assert!(Priority::new(f64::NAN).is_none());
        assert!(Priority::new(f64::INFINITY).is_none());
        assert_eq!(Priority::new(0.1).map(Priority::get), Some(0.1));
    }

    #[test]
    fn priority_key_orders_like_value() {
        let a = Priority::new(0.01).unwrap();
        let b = Priority::new(0.1).unwrap();
        assert!(a.key() < b.key());
    }

    #[test]
    fn nanos_saturate() {
        assert_eq!(Nanos(5) - Nanos(7), Nanos::ZERO);
        assert_eq!(Nanos::MAX + Nanos(1), Nanos::MAX);
        assert_eq!(Nanos::from_secs_f64(-3.0), Nanos::ZERO);
        assert_eq!(Nanos::from_secs_f64(1.5), Nanos(1_500_000_000));
    }

    #[test]
    fn batch_accounts_every_request() {
        let req = |id, offset, len| {
            Request::builder(JobId(1), Op::Write)
                .id(RequestId(id))
                .file(FileId(1))
                .range(offset, len)
                .build()
        };
        let mut b = Batch::single(req(1, 0, 10));
        b.push_merged(req(2, 10, 5));
        assert_eq!(b.len(), 2);
        assert_eq!(b.bytes(), 15);
        assert_eq!(b.end(), 15);
        assert_eq!(b.id(), RequestId(1));
        let ids: Vec<u64> = b.into_requests().iter().map(|r| r.id.0).collect();
        assert_eq!(ids, vec![1, 2]);
    }

    #[test]
    fn op_parses_names() {
        assert_eq!("WRITE".parse::<Op>(), Ok(Op::Write));
        assert!("seek".parse::<Op>().is_err());
    }
}
