//! Status codes, their messages, and the per-thread "last error" text.

use std::cell::RefCell;
use std::ffi::{c_char, CString};

/// What a native API call returned. `IOSETS_OK` and the two non-negative outcomes of
/// `iosets_next` are not errors; every negative value is. An `int32_t` in C.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(clippy::upper_case_acronyms)]
pub enum iosets_status {
    /// Success.
    IOSETS_OK = 0,
    /// `iosets_next`: nothing could be handed out before the timeout.
    IOSETS_TIMEOUT = 1,
    /// `iosets_next`: the scheduler is shut down and nothing is left queued.
    IOSETS_SHUTDOWN = 2,
    /// A required pointer argument was NULL.
    IOSETS_ERR_NULL = -1,
    /// No policy of that name (the message lists the valid ones).
    IOSETS_ERR_UNKNOWN_POLICY = -2,
    /// An option was malformed, unknown, repeated or out of range (the message says which).
    IOSETS_ERR_BAD_OPTION = -3,
    /// A request was refused: zero length for a read or write, an unknown operation, or
    /// `offset + length` beyond 2^64.
    IOSETS_ERR_BAD_REQUEST = -4,
    /// `iosets_complete` / `iosets_fail` named a batch that is not in service: never dispatched,
    /// or answered already.
    IOSETS_ERR_NOT_IN_SERVICE = -5,
    /// The scheduler is shut down; no new request is accepted.
    IOSETS_ERR_SHUT_DOWN = -6,
    /// A configuration file could not be read or parsed.
    IOSETS_ERR_CONFIG = -7,
    /// A string argument was not valid UTF-8.
    IOSETS_ERR_BAD_STRING = -8,
    /// A priority was not finite and strictly positive.
    IOSETS_ERR_BAD_PRIORITY = -9,
    /// Statistics were asked for a job the scheduler does not know.
    IOSETS_ERR_UNKNOWN_JOB = -10,
    /// The library panicked inside the call (a bug in iosets); the call had no effect or a partial
    /// one, and the handle should be destroyed.
    IOSETS_ERR_PANIC = -11,
}

impl iosets_status {
    /// The static, NUL-terminated description of this status.
    pub(crate) fn message(self) -> &'static std::ffi::CStr {
        use iosets_status::*;
        match self {
            IOSETS_OK => c"success",
            IOSETS_TIMEOUT => c"nothing to hand out before the timeout",
            IOSETS_SHUTDOWN => c"the scheduler is shut down and empty",
            IOSETS_ERR_NULL => c"a required pointer argument was NULL",
            IOSETS_ERR_UNKNOWN_POLICY => c"unknown policy",
            IOSETS_ERR_BAD_OPTION => c"bad option (malformed, unknown, repeated or out of range)",
            IOSETS_ERR_BAD_REQUEST => {
                c"bad request (zero length, unknown operation, or offset + length overflows)"
            }
            IOSETS_ERR_NOT_IN_SERVICE => {
                c"batch not in service (never dispatched, or already completed)"
            }
            IOSETS_ERR_SHUT_DOWN => c"the scheduler is shut down; no new request is accepted",
            IOSETS_ERR_CONFIG => c"the configuration file could not be read or parsed",
            IOSETS_ERR_BAD_STRING => c"a string argument was not valid UTF-8",
            IOSETS_ERR_BAD_PRIORITY => c"a priority must be finite and > 0",
            IOSETS_ERR_UNKNOWN_JOB => c"no statistics for that job",
            IOSETS_ERR_PANIC => c"internal error: iosets panicked (a bug; please report it)",
        }
    }
}

thread_local! {
    static LAST_ERROR: RefCell<Option<CString>> = const { RefCell::new(None) };
}

/// Records `message` as this thread's last error and returns `status`.
pub(crate) fn fail(status: iosets_status, message: impl Into<String>) -> iosets_status {
    let mut text = message.into().into_bytes();
    text.retain(|&b| b != 0);
    let text = CString::new(text).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = Some(text));
    status
}

/// The description of status code `code`, as a static NUL-terminated string.
///
/// Ownership: the string is static; never free it. An unknown code gives a string saying so.
#[no_mangle]
pub extern "C" fn iosets_strerror(code: i32) -> *const c_char {
    use iosets_status::*;
    const ALL: [iosets_status; 14] = [
        IOSETS_OK,
        IOSETS_TIMEOUT,
        IOSETS_SHUTDOWN,
        IOSETS_ERR_NULL,
        IOSETS_ERR_UNKNOWN_POLICY,
        IOSETS_ERR_BAD_OPTION,
        IOSETS_ERR_BAD_REQUEST,
        IOSETS_ERR_NOT_IN_SERVICE,
        IOSETS_ERR_SHUT_DOWN,
        IOSETS_ERR_CONFIG,
        IOSETS_ERR_BAD_STRING,
        IOSETS_ERR_BAD_PRIORITY,
        IOSETS_ERR_UNKNOWN_JOB,
        IOSETS_ERR_PANIC,
    ];
    // No panic is possible here (a lookup in a constant table), so no boundary is needed.
    ALL.iter()
        .find(|s| **s as i32 == code)
        .map_or(c"unknown iosets status code".as_ptr(), |s| {
            s.message().as_ptr()
        })
}

/// Copies this thread's last error message (the detailed text of the most recent failed call on
/// this thread: which option, which valid choices) into `buf`, truncated to `cap - 1` bytes and
/// NUL-terminated, like `snprintf`.
///
/// Returns the message's full length in bytes, without the NUL; 0 if no call on this thread has
/// failed. `buf` may be NULL when `cap` is 0, to ask for the length. The message is kept until the
/// next failure on this thread; a successful call does not clear it.
///
/// # Safety
/// `buf` must be NULL or point to at least `cap` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn iosets_last_error(buf: *mut c_char, cap: usize) -> usize {
    crate::guard::guard(0, || {
        LAST_ERROR.with(|e| {
            let e = e.borrow();
            let Some(msg) = e.as_ref() else { return 0 };
            let bytes = msg.as_bytes();
            if !buf.is_null() && cap > 0 {
                let n = bytes.len().min(cap - 1);
                // SAFETY: the caller guarantees `buf` holds `cap` bytes; we write n + 1 <= cap.
                unsafe {
                    std::ptr::copy_nonoverlapping(bytes.as_ptr().cast::<c_char>(), buf, n);
                    *buf.add(n) = 0;
                }
            }
            bytes.len()
        })
    })
}
