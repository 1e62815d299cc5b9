//! The panic boundary: no Rust panic may unwind into C.

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::{fail, iosets_status};

/// Runs `f`, returning `on_panic` if it panics (the panic message has already been printed by the
/// panic hook). `AssertUnwindSafe` is right here: after a panic the caller gets an error and is told
/// to destroy the handle; no half-updated state is observed by safe code (the runtime's locks are
/// parking_lot's, which do not poison, and its state is consistent at every unlock).
pub(crate) fn guard<R>(on_panic: R, f: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(on_panic)
}

/// [`guard`] for functions returning a status: a panic becomes `IOSETS_ERR_PANIC` with a message.
pub(crate) fn guard_status(f: impl FnOnce() -> iosets_status) -> iosets_status {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(s) => s,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            fail(
                iosets_status::IOSETS_ERR_PANIC,
                format!("iosets panicked: {what}"),
            )
        }
    }
}
