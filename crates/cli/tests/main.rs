//! The integration tests of `iosets-cli`, in one test binary: each `tests/<file>.rs` is a module
//! here, its tests named `<file>::<test>` (one file's: `cargo test -p iosets-cli --test tests
//! <file>::`). One executable to build and link instead of one per file, each of which
//! instantiated tokio's and std's generics again and linked its own copy of the dependencies.
//!
//! Kept apart, its own binary (a `[[test]]` in Cargo.toml), because it looks at state of the
//! whole process that the tests here, running at once in one process, would change:
//! - `trust.rs` lists the sockets its own process listens on (`/proc/<pid>/fd` against
//!   `/proc/net/unix`) and expects exactly the one same-host socket (`@iosets-<pid>-…`) of the
//!   server it embeds; the in-process server of `trace_roundtrip.rs` would be a second one. (It
//!   also runs its own binary again, as `nobody`, for its probe test.)

mod common;

mod app_mdtest;
mod app_periodic;
mod cli;
mod conventions;
mod detect;
mod experiment_random;
mod experiment_seed003;
mod experiment_seed004;
mod io_demo;
mod logging;
mod mount;
mod serve;
mod sim;
mod soak;
mod top;
mod trace_roundtrip;
mod why;
