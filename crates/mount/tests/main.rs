//! The integration tests of `iosets-mount`, in one test binary: each `tests/<file>.rs` is a module
//! here, its tests named `<file>::<test>` (one file's: `cargo test -p iosets-mount --test tests
//! <file>::`). One executable to build and link instead of one per file, each of which
//! instantiated tokio's and std's generics again and linked its own copy of the dependencies.
//!
//! Kept apart, its own binary (a `[[test]]` in Cargo.toml), because it changes state of the whole
//! process that the tests here, running at once in one process, would feel or disturb:
//! - `priority_rights.rs` installs the process's global tracing subscriber and counts the lines
//!   logged by every mount in the process (a refusal must be logged exactly once); the mounts of
//!   the other files would log into it, and `ident.rs` counts warnings under its own subscriber.

mod common;
mod ident;
mod mount;
mod priority_dd;
mod safe_default;
