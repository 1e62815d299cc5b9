//! The iosets lab: what measures iosets rather than what iosets is.
//!
//! The `iosets` binary's `demo`, `experiment`, `app` and `soak` subcommands are this crate's
//! entry points ([`demo::run`], [`experiment::run`], [`app::run`], [`soak::run`]); the binary
//! parses their flags (each `…Args` type here) and calls them.
//!
//! - [`seed004`] and [`seed003`]: the seeds' experiments through a real mount, with seed 004's
//!   metrics computed from the applications' own phase logs ([`seed004::phaselog`]);
//! - `random`: random periodic workloads (seed 001's classes) beside the fluid simulator;
//! - [`soak`]: hours of clients, restarts and faults against real servers;
//! - [`app`]: the workload applications (`periodic`, seed 004's IOR; `mdtest`), plain POSIX;
//! - [`demo`]: seed 004's experiment, short, with a verdict;
//! - `rig`: what they all start and stop with — servers and a mount in this process, a server
//!   as a child process, a raw-frame client, the interrupt flag, one plot palette;
//! - [`logsink`]: where the process's log lines go while a run writes its own log file.
//!
//! The devices are emulated (the servers' throttle over tmpfs) and everything shares one
//! machine: the repetitions are how noise is measured.

// Module docs link to the private parts they describe: the lab is not a library API, and
// `cargo doc --document-private-items -p iosets-lab` shows them all.
#![allow(rustdoc::private_intra_doc_links)]

pub mod app;
pub mod demo;
pub mod experiment;
pub mod logsink;
mod random;
mod rig;
pub mod seed003;
pub mod seed004;
pub mod soak;
