//! The integration tests of `iosets-runtime`, in one test binary: each `tests/<file>.rs` is a module
//! here, its tests named `<file>::<test>` (one file's: `cargo test -p iosets-runtime --test tests
//! <file>::`). One executable to build and link instead of one per file, each of which
//! instantiated tokio's and std's generics again and linked its own copy of the dependencies.
//!
//! Kept apart, each its own binary (a `[[test]]` in Cargo.toml):
//! - `book_memory.rs` measures the process's resident memory while a job book fills: anything
//!   another test allocated meanwhile would count as the book's;
//! - `loom_protocol.rs` is built only under `--cfg loom` (an empty binary otherwise), by
//!   `scripts/test.sh` with `--test loom_protocol` in its own target directory.

mod common;

mod auto_priority;
mod book;
mod dropped_token;
mod exactly_once_under_load;
mod fuzz_corpus;
mod inservice;
mod iosets_exclusivity;
mod not_before_timer;
mod quota;
mod shutdown;
mod switch_policy;
mod token_outlives_scheduler;
mod wakeups;
mod why;
