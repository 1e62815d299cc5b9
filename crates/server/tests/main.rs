//! The integration tests of `iosets-server`, in one test binary: each `tests/<file>.rs` is a module
//! here, its tests named `<file>::<test>` (one file's: `cargo test -p iosets-server --test tests
//! <file>::`). One executable to build and link instead of one per file, each of which
//! instantiated tokio's and std's generics again and linked its own copy of the dependencies.
//!
//! Kept apart, each its own binary (a `[[test]]` in Cargo.toml), because they change or measure
//! state of the whole process that the tests here, running at once in one process, would disturb
//! or be disturbed by:
//! - `announce.rs` sums the process's large anonymous mappings (`/proc/self/maps`), which every
//!   64 MiB buffer of another test's server would add to;
//! - `descriptors.rs` lowers the process's `RLIMIT_NOFILE` to 1,024 (every server started
//!   meanwhile would size its descriptor budget from it, and run out);
//! - `jobs_memory.rs` measures the process's resident memory and its high-water mark.

mod common;

mod confinement;
mod control;
mod dangling;
mod forget;
mod hostile;
mod malformed;
mod meta_scheduled;
mod namespace;
mod open_phases;
mod permissions;
mod prometheus;
mod quota;
mod receiving;
mod scheduling;
mod shares;
