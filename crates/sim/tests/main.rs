//! The integration tests of `iosets-sim`, in one test binary: each `tests/<file>.rs` is a module
//! here, its tests named `<file>::<test>` (one file's: `cargo test -p iosets-sim --test tests
//! <file>::`). One executable to build and link instead of one per file, each of which
//! instantiated tokio's and std's generics again and linked its own copy of the dependencies.
//!
//! Every file of `tests/` is here: none changes or measures state of the whole process.

mod contract;
mod csv_trace;
mod device_model;
mod fluid_hand_cases;
mod fluid_invariants;
mod generator;
mod iosets_exclusive;
mod request_trace;
mod seek_model;
mod wfq_shares;
mod window_shares;
