//! The native C API: a scheduler handle, submit, next, complete, priorities, statistics.

use iosets_types::FileId;
use std::ffi::{c_char, c_void, CStr};
use std::path::Path;
use std::ptr;
use std::sync::Arc;
use std::time::Duration;

use iosets_policy::PolicyError;
use iosets_runtime::{
    BookConfig, Completion, Counted, MonotonicClock, Next, PrioritySource, Scheduler,
};
use iosets_types::{JobId, Op, Outcome, Priority, Request};

use crate::config::parse_options_file;
use crate::error::{fail, iosets_status};
use crate::guard::guard_status;
use crate::table::Table;
use iosets_status::*;

/// The operation of a request, as passed to `iosets_submit` (as an `int32_t`) and reported in
/// [`iosets_batch::op`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(clippy::upper_case_acronyms)]
pub enum iosets_op {
    /// Read `length` bytes at `offset`.
    IOSETS_READ = 0,
    /// Write `length` bytes at `offset`.
    IOSETS_WRITE = 1,
    /// Anything else (metadata, fsync); never merged; may have length 0.
    IOSETS_OTHER = 2,
}

fn op_from_c(op: i32) -> Option<Op> {
    match op {
        0 => Some(Op::Read),
        1 => Some(Op::Write),
        2 => Some(Op::Other),
        _ => None,
    }
}

fn op_to_c(op: Op) -> i32 {
    match op {
        Op::Read => iosets_op::IOSETS_READ as i32,
        Op::Write => iosets_op::IOSETS_WRITE as i32,
        Op::Other | Op::Meta => iosets_op::IOSETS_OTHER as i32,
    }
}

/// The caller's pointer, carried with a request and never dereferenced.
#[repr(transparent)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct UserPtr(pub(crate) *mut c_void);

// SAFETY: the library never dereferences the pointer; it only stores it and gives it back to the
// caller, who decides which thread may use what it points to.
unsafe impl Send for UserPtr {}

/// A dispatched batch waiting for its answer.
struct Outstanding {
    completion: Completion,
    /// The user pointers, one per request, in batch order. The C caller reads them through
    /// [`iosets_batch::users`] until the batch is completed; the vector is never resized while it
    /// is in the table, so its buffer does not move.
    users: Vec<UserPtr>,
}

/// A scheduler: one policy behind the iosets runtime, plus the table of dispatched batches.
///
/// Opaque to C. Created by `iosets_create` or `iosets_create_from_file`, freed by `iosets_destroy`.
pub struct iosets_scheduler {
    sched: Scheduler<UserPtr>,
    /// Dispatched batches by id, so that a C caller can answer a batch by number and answering
    /// twice is an error instead of a use-after-free.
    table: Table<u64, Outstanding>,
}

impl std::fmt::Debug for iosets_scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("iosets_scheduler")
            .field("sched", &self.sched)
            .finish_non_exhaustive()
    }
}

/// One batch handed to a worker by `iosets_next`: a request, or several contiguous requests of one
/// file and operation that the policy merged.
///
/// Ownership: filled in by the library into caller memory. `users` points into the library's
/// memory and stays valid until the batch is answered (`iosets_complete` / `iosets_fail`) or the
/// scheduler is destroyed; do not free it.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct iosets_batch {
    /// The id to answer the batch with (its first request's id, as returned by `iosets_submit`).
    pub id: u64,
    /// The job of the first request.
    pub job: u64,
    /// The file of the batch.
    pub file: u64,
    /// The first byte of the batch.
    pub offset: u64,
    /// The total bytes of all its requests.
    pub length: u64,
    /// The operation, an `iosets_op` value.
    pub op: i32,
    /// The number of original requests in the batch (1 when nothing was merged).
    pub count: usize,
    /// The user pointers given to `iosets_submit`, one per request, in offset order: `count`
    /// entries.
    pub users: *const *mut c_void,
}

/// Counters of a whole scheduler, filled by `iosets_read_stats`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct iosets_stats {
    /// Requests accepted by `iosets_submit`.
    pub submitted: u64,
    /// Requests queued (not yet dispatched).
    pub queued: u64,
    /// Batches dispatched and not yet answered.
    pub batches_in_service: u64,
    /// Original requests in those batches.
    pub requests_in_service: u64,
    /// Requests answered (successfully or not).
    pub completed: u64,
    /// Requests whose batch failed (`iosets_fail`) or was abandoned (destroyed unanswered).
    pub failed: u64,
    /// Batches dispatched since creation.
    pub batches_dispatched: u64,
    /// Requests merged into another request's batch.
    pub merged: u64,
    /// Jobs the scheduler holds statistics for.
    pub jobs: u64,
}

/// One job's statistics, filled by `iosets_read_job_stats`. Waits are dispatch time − submit time, in
/// nanoseconds; p50 and p99 have two significant digits, the others are exact.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct iosets_job_stats {
    /// The job.
    pub job: u64,
    /// Requests answered.
    pub ops: u64,
    /// Bytes moved by completed reads.
    pub bytes_read: u64,
    /// Bytes moved by completed writes.
    pub bytes_written: u64,
    /// Requests failed or abandoned.
    pub failed: u64,
    /// Requests queued.
    pub queued: u64,
    /// Requests in service.
    pub in_service: u64,
    /// Requests dispatched so far (the waits below are over these).
    pub wait_count: u64,
    /// Mean queue wait.
    pub wait_mean_ns: u64,
    /// Median queue wait.
    pub wait_p50_ns: u64,
    /// 99th-percentile queue wait.
    pub wait_p99_ns: u64,
    /// Longest queue wait.
    pub wait_max_ns: u64,
}

/// Borrows a C string as UTF-8.
///
/// # Safety
/// `s` must be NULL or a NUL-terminated string valid for the call.
unsafe fn c_str<'a>(s: *const c_char, what: &str) -> Result<&'a str, iosets_status> {
    if s.is_null() {
        return Err(fail(IOSETS_ERR_NULL, format!("{what} is NULL")));
    }
    // SAFETY: non-NULL, and the caller guarantees NUL termination and validity.
    let bytes = unsafe { CStr::from_ptr(s) };
    bytes
        .to_str()
        .map_err(|_| fail(IOSETS_ERR_BAD_STRING, format!("{what} is not valid UTF-8")))
}

/// Borrows the handle.
///
/// # Safety
/// `s` must be NULL or a handle from `iosets_create*` not yet destroyed.
unsafe fn handle<'a>(s: *const iosets_scheduler) -> Result<&'a iosets_scheduler, iosets_status> {
    // SAFETY: the caller guarantees `s` is NULL or live.
    unsafe { s.as_ref() }.ok_or_else(|| fail(IOSETS_ERR_NULL, "scheduler handle is NULL"))
}

fn policy_status(e: &PolicyError) -> iosets_status {
    match e {
        PolicyError::UnknownPolicy { .. } => IOSETS_ERR_UNKNOWN_POLICY,
        _ => IOSETS_ERR_BAD_OPTION,
    }
}

/// Checks that `out` is not NULL and stores NULL in it, so that a failure leaves no handle
/// there.
///
/// # Safety
/// `out` must be NULL or writable.
unsafe fn clear_out(out: *mut *mut iosets_scheduler) -> Result<(), iosets_status> {
    if out.is_null() {
        return Err(fail(IOSETS_ERR_NULL, "out is NULL"));
    }
    // SAFETY: checked non-NULL; the caller guarantees it is writable.
    unsafe { *out = ptr::null_mut() };
    Ok(())
}

/// Builds a scheduler and stores it in `*out`.
fn create(
    policy: &str,
    pairs: &[(String, String)],
    book: BookConfig,
    out: *mut *mut iosets_scheduler,
) -> iosets_status {
    match Counted::build(policy, pairs) {
        Ok(p) => {
            let s = Box::new(iosets_scheduler {
                sched: Scheduler::with_book(p, Arc::new(MonotonicClock::new()), book),
                table: Table::new(),
            });
            // SAFETY: `out` was checked non-NULL by the caller of this function.
            unsafe { *out = Box::into_raw(s) };
            IOSETS_OK
        }
        Err(e) => fail(policy_status(&e), e.to_string()),
    }
}

/// Splits the library's own options (`auto_priority`, `forget_idle_s`) from the policy's tunables.
fn book_options(
    pairs: Vec<(String, String)>,
) -> Result<(BookConfig, Vec<(String, String)>), iosets_status> {
    let mut book = BookConfig::default();
    let mut rest = Vec::with_capacity(pairs.len());
    for (k, v) in pairs {
        match k.as_str() {
            "auto_priority" => {
                let on = v.parse::<bool>().map_err(|_| {
                    fail(
                        IOSETS_ERR_BAD_OPTION,
                        format!("auto_priority: expected true or false, got {v:?}"),
                    )
                })?;
                book = book.auto_priority(on);
            }
            "forget_idle_s" => {
                let s = v
                    .parse::<f64>()
                    .ok()
                    .filter(|s| s.is_finite() && *s > 0.0 && *s <= 1e9)
                    .ok_or_else(|| {
                        fail(
                            IOSETS_ERR_BAD_OPTION,
                            format!("forget_idle_s: expected seconds > 0 (and ≤ 1e9), got {v:?}"),
                        )
                    })?;
                book = book.forget_after(Duration::from_secs_f64(s));
            }
            _ => rest.push((k, v)),
        }
    }
    Ok((book, rest))
}

macro_rules! tri {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(status) => return status,
        }
    };
}

/// Creates a scheduler running policy `policy` (a registered name: noop, timeorder, elevator,
/// deadline, anticipatory, cfq, sjf, mlf, aioli, sw, twins, wfq, iosets; case-insensitive) with
/// `n_options` tunables `options[i]`, each `"key=value"` (e.g. `"weight.1=500"`). Two options are
/// the library's, not the policy's: `auto_priority=true|false` (detect each job's I/O period and
/// give it its Set-10 priority) and `forget_idle_s=SECONDS` (forget a job idle this long; default
/// 600).
///
/// On success stores the new handle in `*out` and returns `IOSETS_OK`; on failure stores NULL (if
/// `out` is not NULL) and returns `IOSETS_ERR_NULL` (`policy`, `out`, `options` with
/// `n_options > 0`, or an option is NULL), `IOSETS_ERR_BAD_STRING`, `IOSETS_ERR_UNKNOWN_POLICY` or
/// `IOSETS_ERR_BAD_OPTION` (malformed, unknown key, repeated key, bad value; nothing is clamped).
/// `iosets_last_error` then says exactly what was wrong and what is accepted.
///
/// Ownership: the strings are borrowed for the call only. The handle belongs to the caller, who
/// frees it with `iosets_destroy`.
///
/// # Safety
/// `policy` must be NULL or a NUL-terminated string; `options` NULL or an array of `n_options`
/// pointers, each NULL or a NUL-terminated string; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn iosets_create(
    policy: *const c_char,
    options: *const *const c_char,
    n_options: usize,
    out: *mut *mut iosets_scheduler,
) -> iosets_status {
    guard_status(|| {
        // SAFETY: the caller's contract on `out`.
        tri!(unsafe { clear_out(out) });
        // SAFETY: the caller's contract on `policy`.
        let name = tri!(unsafe { c_str(policy, "policy") });
        if options.is_null() && n_options > 0 {
            return fail(IOSETS_ERR_NULL, "options is NULL but n_options > 0");
        }
        let mut args = Vec::with_capacity(n_options);
        for i in 0..n_options {
            // SAFETY: `options` holds `n_options` pointers (caller's contract), i < n_options.
            let p = unsafe { *options.add(i) };
            // SAFETY: each option is NULL or a NUL-terminated string (caller's contract).
            args.push(tri!(unsafe { c_str(p, "an option") }));
        }
        let pairs = match iosets_policy::tunables::parse_pairs(&args) {
            Ok(p) => p,
            Err(e) => return fail(IOSETS_ERR_BAD_OPTION, e.to_string()),
        };
        let (book, pairs) = tri!(book_options(pairs));
        create(name, &pairs, book, out)
    })
}

/// Creates a scheduler from the TOML configuration file at `path`: `policy = "NAME"`, optional
/// `auto_priority = true|false` and `forget_idle_s = SECONDS`, and the policy's tunables under
/// `[policy_options]` (see crates/ffi/README.md). A file in the old `key = value` format is
/// refused with a message naming its line.
///
/// Returns as `iosets_create`, plus `IOSETS_ERR_CONFIG` if the file cannot be read, is not valid
/// TOML, has an unknown key or an unusable value (`iosets_last_error` names the line).
///
/// Ownership: `path` is borrowed for the call. The handle belongs to the caller.
///
/// # Safety
/// `path` must be NULL or a NUL-terminated string; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn iosets_create_from_file(
    path: *const c_char,
    out: *mut *mut iosets_scheduler,
) -> iosets_status {
    guard_status(|| {
        // SAFETY: the caller's contract on `out`.
        tri!(unsafe { clear_out(out) });
        // SAFETY: the caller's contract on `path`.
        let path = tri!(unsafe { c_str(path, "path") });
        match parse_options_file(Path::new(path)) {
            Ok(c) => {
                let mut book = BookConfig::default().auto_priority(c.auto_priority);
                if let Some(idle) = c.forget_idle {
                    book = book.forget_after(idle);
                }
                create(&c.policy, &c.options, book, out)
            }
            Err(e) => fail(IOSETS_ERR_CONFIG, e.to_string()),
        }
    })
}

/// Destroys a scheduler. NULL is accepted and ignored.
///
/// Queued requests are dropped without being handed out; batches handed out and not yet answered
/// are counted as abandoned. Their user pointers are not touched: whatever they point to is still
/// the caller's to free.
///
/// Ownership: the handle is freed; no other thread may be using it (call `iosets_shutdown`, join
/// the workers, then destroy). The `users` arrays of unanswered batches are freed.
///
/// # Safety
/// `s` must be NULL or a live handle that no other thread uses during or after the call.
#[no_mangle]
pub unsafe extern "C" fn iosets_destroy(s: *mut iosets_scheduler) {
    crate::guard::guard((), || {
        if s.is_null() {
            return;
        }
        // SAFETY: the caller gives up its live handle, created by Box::into_raw in `create`.
        let s = unsafe { Box::from_raw(s) };
        s.sched.shutdown();
        drop(s.table.drain());
        drop(s);
    });
}

/// Queues a request of job `job` on file `file`: `length` bytes at `offset`, operation `op` (an
/// `iosets_op`), carrying `user` (never dereferenced; given back in the batch). Stores its id in
/// `*id_out` unless `id_out` is NULL. Wakes one waiting worker.
///
/// Returns `IOSETS_OK`, `IOSETS_ERR_NULL` (no handle), `IOSETS_ERR_BAD_REQUEST` (length 0 for a
/// read or write, unknown `op`, `offset + length` > 2^64 − 1) or `IOSETS_ERR_SHUT_DOWN`.
///
/// # Safety
/// `s` must be NULL or live; `id_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn iosets_submit(
    s: *const iosets_scheduler,
    job: u64,
    file: u64,
    offset: u64,
    length: u64,
    op: i32,
    user: *mut c_void,
    id_out: *mut u64,
) -> iosets_status {
    guard_status(|| {
        // SAFETY: the caller's contract on `s`.
        let s = tri!(unsafe { handle(s) });
        let Some(op) = op_from_c(op) else {
            return fail(
                IOSETS_ERR_BAD_REQUEST,
                format!("unknown operation {op}: expected IOSETS_READ (0), IOSETS_WRITE (1) or IOSETS_OTHER (2)"),
            );
        };
        if length == 0 && matches!(op, Op::Read | Op::Write) {
            return fail(
                IOSETS_ERR_BAD_REQUEST,
                format!("a {op} of length 0 is refused (only IOSETS_OTHER may have length 0)"),
            );
        }
        if offset.checked_add(length).is_none() {
            return fail(
                IOSETS_ERR_BAD_REQUEST,
                format!("offset {offset} + length {length} overflows 64 bits"),
            );
        }
        let req = Request::builder(JobId(job), op)
            .file(FileId(file))
            .range(offset, length)
            .build();
        match s.sched.submit(req, UserPtr(user)) {
            Ok(id) => {
                if !id_out.is_null() {
                    // SAFETY: non-NULL and writable (caller's contract).
                    unsafe { *id_out = id.0 };
                }
                IOSETS_OK
            }
            Err(e) => fail(IOSETS_ERR_SHUT_DOWN, e.to_string()),
        }
    })
}

/// Puts thread quotas, rates and reservations in front of the policy (seed 003, Lustre NRS TBF,
/// Ceph mClock; see crates/ffi/README.md). `quota` is the TOML text of a quota file, as
/// `iosets serve --quota` reads it: `job_share_pct`, `lend`, and `[[rule]]` tables with `name`,
/// `match` (keys `job` and `class` apply to C callers; `uid`, `gid` and `client` never match
/// here, the native API does not carry them), `threads_pct`, `rate_ops`, `rate_bytes`,
/// `strict`, `reserve_ops`, `weight`. `threads` is the number of worker threads the caller
/// runs: thread percentages are of it. NULL `quota` removes every rule. Rules change at run
/// time: requests held under a rule that goes fall under the others; nothing is dropped.
///
/// Returns `IOSETS_OK`, `IOSETS_ERR_NULL` (no handle), `IOSETS_ERR_BAD_OPTION` (`threads` is 0)
/// or `IOSETS_ERR_CONFIG` (not TOML, an unknown key, a bad rule: `iosets_last_error` names the
/// line or the rule; nothing is changed).
///
/// # Safety
/// `s` must be NULL or live; `quota` NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn iosets_set_quota(
    s: *const iosets_scheduler,
    quota: *const c_char,
    threads: u32,
) -> iosets_status {
    guard_status(|| {
        // SAFETY: the caller's contract on `s`.
        let s = tri!(unsafe { handle(s) });
        if threads == 0 {
            return fail(
                IOSETS_ERR_BAD_OPTION,
                "threads must be the number of worker threads, at least 1",
            );
        }
        let cfg = if quota.is_null() {
            None
        } else {
            // SAFETY: non-NULL and NUL-terminated (caller's contract).
            let text = tri!(unsafe { c_str(quota, "quota") });
            let table: iosets_runtime::quota::TomlQuota = match toml::from_str(text) {
                Ok(t) => t,
                Err(e) => {
                    let line = e.span().map_or(1, |sp| {
                        text[..sp.start.min(text.len())].lines().count().max(1)
                    });
                    return fail(
                        IOSETS_ERR_CONFIG,
                        format!("quota, line {line}: {}", e.message().trim()),
                    );
                }
            };
            match iosets_runtime::QuotaConfig::from_toml_value(&table) {
                Ok(c) => Some(c),
                Err(e) => return fail(IOSETS_ERR_CONFIG, e.to_string()),
            }
        };
        let old = s.sched.quota();
        if let Err(e) = s.sched.set_service_threads(threads as usize) {
            return fail(IOSETS_ERR_BAD_OPTION, e.to_string());
        }
        match s.sched.set_quota(cfg) {
            Ok(()) => IOSETS_OK,
            Err(e) => {
                // Validated above; should the runtime still refuse, the old rules stay.
                let _ = s.sched.set_quota(old);
                fail(IOSETS_ERR_CONFIG, e.to_string())
            }
        }
    })
}

/// Takes the next batch to serve, for a worker thread, and describes it in `*out`.
///
/// `timeout_ms` < 0 waits as long as it takes; 0 does not wait; > 0 waits at most that many
/// milliseconds. Waiting uses no CPU (a condition variable; timers of policies that hold requests
/// back are honoured).
///
/// Returns `IOSETS_OK` (a batch is in `*out`: answer it exactly once with `iosets_complete` or
/// `iosets_fail`), `IOSETS_TIMEOUT`, `IOSETS_SHUTDOWN` (shut down and nothing left queued: the
/// worker should exit) or `IOSETS_ERR_NULL`.
///
/// # Safety
/// `s` must be NULL or live; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn iosets_next(
    s: *const iosets_scheduler,
    timeout_ms: i64,
    out: *mut iosets_batch,
) -> iosets_status {
    guard_status(|| {
        // SAFETY: the caller's contract on `s`.
        let s = tri!(unsafe { handle(s) });
        if out.is_null() {
            return fail(IOSETS_ERR_NULL, "out is NULL");
        }
        let next = match timeout_ms {
            t if t < 0 => match s.sched.next() {
                Some(w) => Next::Work(w),
                None => Next::Shutdown,
            },
            0 => s.sched.try_next(),
            t => s
                .sched
                .next_timeout(Duration::from_millis(t.unsigned_abs())),
        };
        let work = match next {
            Next::Work(w) => w,
            Next::TimedOut => return IOSETS_TIMEOUT,
            Next::Shutdown => return IOSETS_SHUTDOWN,
        };
        let (users, completion) = work.into_parts();
        let batch = completion.batch();
        let head = batch.head();
        let id = batch.id().0;
        let desc = iosets_batch {
            id,
            job: head.job.0,
            file: head.file.0,
            offset: head.offset,
            length: batch.bytes(),
            op: op_to_c(head.op),
            count: batch.len(),
            // UserPtr is repr(transparent) over *mut c_void; the buffer does not move when the
            // vector is moved into the table.
            users: users.as_ptr().cast::<*mut c_void>(),
        };
        // SAFETY: checked non-NULL; writable by the caller's contract.
        unsafe { out.write(desc) };
        let old = s.table.insert(id, Outstanding { completion, users });
        debug_assert!(old.is_none(), "batch ids are unique");
        IOSETS_OK
    })
}

fn answer(s: *const iosets_scheduler, id: u64, outcome: Outcome) -> iosets_status {
    // SAFETY: the exported callers pass their caller's `s` on, under the same contract.
    let s = tri!(unsafe { handle(s) });
    match s.table.remove(&id) {
        Some(o) => {
            o.completion.complete(outcome);
            drop(o.users);
            IOSETS_OK
        }
        None => fail(
            IOSETS_ERR_NOT_IN_SERVICE,
            format!("batch {id} is not in service (never dispatched, or already answered)"),
        ),
    }
}

/// Answers batch `id` as served, `bytes` moved in all (a short transfer shortens its last
/// requests). Frees the batch's `users` array.
///
/// Returns `IOSETS_OK`, `IOSETS_ERR_NULL` or `IOSETS_ERR_NOT_IN_SERVICE` (never dispatched, or
/// answered already: answering twice is an error, not a crash).
///
/// # Safety
/// `s` must be NULL or live.
#[no_mangle]
pub unsafe extern "C" fn iosets_complete(
    s: *const iosets_scheduler,
    id: u64,
    bytes: u64,
) -> iosets_status {
    guard_status(|| answer(s, id, Outcome::Done { bytes }))
}

/// Answers batch `id` as failed with OS error `errno_value` (> 0, e.g. `EIO`); every request of it
/// counts as failed. Frees the batch's `users` array.
///
/// Returns as `iosets_complete`, plus `IOSETS_ERR_BAD_REQUEST` if `errno_value <= 0` (the batch
/// stays in service).
///
/// # Safety
/// `s` must be NULL or live.
#[no_mangle]
pub unsafe extern "C" fn iosets_fail(
    s: *const iosets_scheduler,
    id: u64,
    errno_value: i32,
) -> iosets_status {
    guard_status(|| {
        if errno_value <= 0 {
            return fail(
                IOSETS_ERR_BAD_REQUEST,
                format!("errno_value must be > 0, got {errno_value}"),
            );
        }
        answer(s, id, Outcome::Failed { errno: errno_value })
    })
}

/// Sets job `job`'s priority (a weight: finite, > 0; bigger gets more bandwidth) in the policy,
/// overriding the hints its requests carry; for `iosets` it also places the job in the set of that
/// priority. Stores in `*applied` (unless NULL) whether the active policy uses priorities (`wfq`,
/// `iosets`); other policies remember it but ignore it.
///
/// Returns `IOSETS_OK`, `IOSETS_ERR_NULL` or `IOSETS_ERR_BAD_PRIORITY`.
///
/// # Safety
/// `s` must be NULL or live; `applied` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn iosets_set_priority(
    s: *const iosets_scheduler,
    job: u64,
    priority: f64,
    applied: *mut bool,
) -> iosets_status {
    guard_status(|| {
        // SAFETY: the caller's contract on `s`.
        let s = tri!(unsafe { handle(s) });
        let Some(p) = Priority::new(priority) else {
            return fail(
                IOSETS_ERR_BAD_PRIORITY,
                format!("priority {priority} is not finite and > 0"),
            );
        };
        let known = s.sched.set_priority(JobId(job), Some(p));
        if !applied.is_null() {
            // SAFETY: non-NULL and writable (caller's contract).
            unsafe { *applied = known };
        }
        IOSETS_OK
    })
}

/// Clears a priority set by `iosets_set_priority`: the job goes back to its requests' hints or the
/// policy's default. Clearing a job that had none is fine.
///
/// Returns `IOSETS_OK` or `IOSETS_ERR_NULL`.
///
/// # Safety
/// `s` must be NULL or live.
#[no_mangle]
pub unsafe extern "C" fn iosets_clear_priority(
    s: *const iosets_scheduler,
    job: u64,
) -> iosets_status {
    guard_status(|| {
        // SAFETY: the caller's contract on `s`.
        let s = tri!(unsafe { handle(s) });
        s.sched.set_priority(JobId(job), None);
        IOSETS_OK
    })
}

/// Where the priority in force for a job comes from, as reported by `iosets_job_priority`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(clippy::upper_case_acronyms)]
pub enum iosets_priority_source {
    /// The job has no priority: the policy's default applies.
    IOSETS_PRIORITY_NONE = 0,
    /// Set by `iosets_set_priority` (it wins over the others).
    IOSETS_PRIORITY_CONTROL = 1,
    /// Set automatically from the job's detected period (`auto_priority`).
    IOSETS_PRIORITY_AUTO = 2,
    /// The last hint its requests carried.
    IOSETS_PRIORITY_HINT = 3,
}

/// Stores in `*value` the priority in force for job `job` and in `*source` (an
/// `iosets_priority_source`, unless `source` is NULL) where it comes from: the control plane
/// (`iosets_set_priority`), else the automatic priority (config `auto_priority = true`), else
/// the last hint. A job without one gets `IOSETS_PRIORITY_NONE` and `*value` = 0.
///
/// Returns `IOSETS_OK` or `IOSETS_ERR_NULL` (no handle, or `value` is NULL).
///
/// # Safety
/// `s` must be NULL or live; `value` NULL or writable; `source` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn iosets_job_priority(
    s: *const iosets_scheduler,
    job: u64,
    value: *mut f64,
    source: *mut i32,
) -> iosets_status {
    guard_status(|| {
        // SAFETY: the caller's contract on `s`.
        let s = tri!(unsafe { handle(s) });
        if value.is_null() {
            return fail(IOSETS_ERR_NULL, "value is NULL");
        }
        use iosets_priority_source::*;
        let (v, from) = match s.sched.priority(JobId(job)) {
            None => (0.0, IOSETS_PRIORITY_NONE),
            Some(p) => (
                p.value.get(),
                match p.source {
                    PrioritySource::Control => IOSETS_PRIORITY_CONTROL,
                    PrioritySource::Auto => IOSETS_PRIORITY_AUTO,
                    _ => IOSETS_PRIORITY_HINT,
                },
            ),
        };
        // SAFETY: checked non-NULL; writable by the caller's contract.
        unsafe { value.write(v) };
        if !source.is_null() {
            // SAFETY: non-NULL and writable (caller's contract).
            unsafe { source.write(from as i32) };
        }
        IOSETS_OK
    })
}

/// Refuses new requests from now on (`iosets_submit` returns `IOSETS_ERR_SHUT_DOWN`). Workers keep
/// receiving what is queued; once the queue is empty every `iosets_next` returns `IOSETS_SHUTDOWN`,
/// including the ones blocked at the time of the call. Calling it twice is fine.
///
/// Returns `IOSETS_OK` or `IOSETS_ERR_NULL`.
///
/// # Safety
/// `s` must be NULL or live.
#[no_mangle]
pub unsafe extern "C" fn iosets_shutdown(s: *const iosets_scheduler) -> iosets_status {
    guard_status(|| {
        // SAFETY: the caller's contract on `s`.
        let s = tri!(unsafe { handle(s) });
        s.sched.shutdown();
        IOSETS_OK
    })
}

/// Fills `*out` with the scheduler's counters (a consistent snapshot).
///
/// Returns `IOSETS_OK` or `IOSETS_ERR_NULL`.
///
/// # Safety
/// `s` must be NULL or live; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn iosets_read_stats(
    s: *const iosets_scheduler,
    out: *mut iosets_stats,
) -> iosets_status {
    guard_status(|| {
        // SAFETY: the caller's contract on `s`.
        let s = tri!(unsafe { handle(s) });
        if out.is_null() {
            return fail(IOSETS_ERR_NULL, "out is NULL");
        }
        let st = s.sched.stats();
        let stats = iosets_stats {
            submitted: st.submitted,
            queued: st.queued as u64,
            batches_in_service: st.in_flight as u64,
            requests_in_service: st.requests_in_service,
            completed: st.total_ops(),
            failed: st.total_failed(),
            batches_dispatched: st.counters.dispatched,
            merged: st.counters.merged,
            jobs: st.jobs.len() as u64,
        };
        // SAFETY: checked non-NULL; writable by the caller's contract.
        unsafe { out.write(stats) };
        IOSETS_OK
    })
}

/// Fills `*out` with job `job`'s statistics.
///
/// Returns `IOSETS_OK`, `IOSETS_ERR_NULL` or `IOSETS_ERR_UNKNOWN_JOB` (no request of that job was
/// ever submitted).
///
/// # Safety
/// `s` must be NULL or live; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn iosets_read_job_stats(
    s: *const iosets_scheduler,
    job: u64,
    out: *mut iosets_job_stats,
) -> iosets_status {
    guard_status(|| {
        // SAFETY: the caller's contract on `s`.
        let s = tri!(unsafe { handle(s) });
        if out.is_null() {
            return fail(IOSETS_ERR_NULL, "out is NULL");
        }
        let st = s.sched.stats();
        let Some(j) = st.job(JobId(job)) else {
            return fail(IOSETS_ERR_UNKNOWN_JOB, format!("job {job} is not known"));
        };
        let js = iosets_job_stats {
            job,
            ops: j.ops,
            bytes_read: j.bytes_read,
            bytes_written: j.bytes_written,
            failed: j.failed,
            queued: j.queued,
            in_service: j.in_service,
            wait_count: j.queue_wait.count,
            wait_mean_ns: j.queue_wait.mean_ns,
            wait_p50_ns: j.queue_wait.p50_ns,
            wait_p99_ns: j.queue_wait.p99_ns,
            wait_max_ns: j.queue_wait.max_ns,
        };
        // SAFETY: checked non-NULL; writable by the caller's contract.
        unsafe { out.write(js) };
        IOSETS_OK
    })
}

/// Checks every conservation invariant of the scheduler (requests are queued, in service or
/// completed, never lost or duplicated; counters balance). For tests and shutdown checks.
///
/// Returns `IOSETS_OK`, `IOSETS_ERR_NULL`, or `IOSETS_ERR_PANIC` with the broken invariant in
/// `iosets_last_error` (a bug in iosets).
///
/// # Safety
/// `s` must be NULL or live.
#[no_mangle]
pub unsafe extern "C" fn iosets_check_balance(s: *const iosets_scheduler) -> iosets_status {
    guard_status(|| {
        // SAFETY: the caller's contract on `s`.
        let s = tri!(unsafe { handle(s) });
        match s.sched.check_balance() {
            Ok(()) => IOSETS_OK,
            Err(e) => fail(IOSETS_ERR_PANIC, e.to_string()),
        }
    })
}

/// The library's version, e.g. `"0.1.0"`. Static; never free it.
#[no_mangle]
pub extern "C" fn iosets_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}
