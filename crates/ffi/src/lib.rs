//! `libiosets`: the iosets scheduler as a C library.
//!
//! # What it is
//! Two C interfaces over one [`iosets_runtime::Scheduler`]:
//! - the **native API** (`include/iosets.h`, generated from this crate by cbindgen): a scheduler is
//!   created from a policy name and `key=value` options (or a config file), the caller's producer
//!   threads submit requests carrying a user pointer, the caller's worker threads take batches with
//!   a blocking `iosets_next` and answer each batch once with `iosets_complete` or `iosets_fail`;
//! - an **AGIOS-compatible shim** (`include/agios.h`, module [`agios`]): `agios_init`,
//!   `agios_add_request`, `agios_release_request`, `agios_cancel_request`, `agios_exit` with AGIOS
//!   v2's signatures, its configuration file and its callbacks, so that software written for AGIOS
//!   links against libiosets instead.
//!
//! # What it is not
//! It makes no scheduling decision (the policy does) and does no I/O (the caller does). The native
//! API spawns no thread: workers are the caller's. The shim calls the user back on the adding (or
//! releasing) thread whenever the policy lets a request go at once, and keeps dispatch threads,
//! parked without CPU, for requests a policy holds back for a time (AGIOS's thread polls).
//!
//! # Why it looks like this (FFI discipline)
//! - **Opaque handles.** C sees `iosets_scheduler *` only; its layout is private.
//! - **Every pointer is checked for NULL**, every string for UTF-8, every number for range; bad input
//!   returns an error code ([`iosets_status`]) and records a message for [`iosets_last_error`]. It
//!   never aborts the host process.
//! - **A panic boundary on every exported function**: a Rust panic is caught and turned into
//!   `IOSETS_ERR_PANIC` (or a NULL / zero return where the function has no status).
//! - **Batches are answered by id.** A dispatched batch is kept in a table until its id is completed,
//!   so completing twice or completing an unknown id is an error code, not a use-after-free.
//! - **Ownership** is written in the header next to every function: strings passed in are borrowed
//!   for the call; the user pointer is never dereferenced, only carried; the `users` array in an
//!   [`iosets_batch`] belongs to the library and lives until the batch is completed.
//!
//! Concurrency: every function except [`iosets_destroy`] may be called from any thread at any time
//! on a live handle. The locks are the runtime's, plus one sharded table (module `table`) of what
//! was handed out, which exists only because C names things by number: batches by id in the
//! native API, requests by `(file, type, offset, len)` in the shim.
#![deny(missing_docs)]
#![allow(non_camel_case_types)]

pub mod agios;
mod config;
mod error;
mod guard;
mod native;
mod table;

pub use config::{parse_options_file, ConfigError, FileConfig};
pub use error::{iosets_last_error, iosets_status, iosets_strerror};
pub use native::*;
