//! The integration tests of `iosets-period`, in one test binary: each `tests/<file>.rs` is a module
//! here, its tests named `<file>::<test>` (one file's: `cargo test -p iosets-period --test tests
//! <file>::`). One executable to build and link instead of one per file, each of which
//! instantiated tokio's and std's generics again and linked its own copy of the dependencies.
//!
//! Every file of `tests/` is here: none changes or measures state of the whole process.

mod formats;
mod fuzz_corpus;
mod online;
mod requests;
mod segments;
mod synthetic;
