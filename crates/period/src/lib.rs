//! I/O period detection: a job's characteristic time `w_iter` — the mean time between the starts
//! of its consecutive I/O phases — from its requests or from a trace, offline and online.
//!
//! IO-SETS places each job in a set by the order of magnitude of `w_iter` (Set-10:
//! `set = round(log10 w_iter)`). Seed 004 ran the FTIO tool beside every application to find it;
//! this crate finds it inside iosets.
//!
//! - [`detect()`] / [`Analyzer`]: one window of [`Event`]s in, one [`Detection`] out — a period with
//!   a confidence in `[0, 1]`, or "not periodic" with the reason. The method (binned bandwidth,
//!   FFT, candidates checked against the autocorrelation and the gaps between I/O bursts, so that
//!   neither half nor double the period is reported) is described in [`detect`](mod@detect).
//! - [`online::OnlineDetector`]: one per job in the server; `observe(event)` is amortised O(1)
//!   and memory is bounded whatever the run length; `estimate(now)` re-runs the analysis on a
//!   bounded summary of the recent past and follows a change of behaviour.
//! - [`trace`]: readers for iosets' own request traces (CSV, JSON Lines), FTIO's bandwidth-step
//!   JSON, TMIO's JSON Lines and Darshan DXT text (`darshan-dxt-parser` output). A corrupt or
//!   empty trace is an [`Error`] naming the problem and the line.
//! - [`segment`]: a trace split where its behaviour changes (change points by binary segmentation over the
//!   phases' gaps and iterations), each segment detected; one segment when nothing changes.
//! - [`synth`]: seeded synthetic traces with a known period, for tests and benchmarks.
//! - [`report`]: each job of a trace detected and mapped to its Set-10 set and priority (what
//!   `iosets detect` and the Python bindings' `detect` give).
//!
//! What it is not: a scheduler. It only measures; the runtime decides what to do with an estimate
//! (DESIGN.md: move the job to its Set-10 set when a confident estimate arrives). It reads no
//! clock: time is always an argument. Among iosets crates it depends on `iosets-types`, and on
//! `iosets-policy` only for [`report`]'s Set-10 mapping (the servers' code, not a copy).
#![deny(missing_docs)]

pub mod detect;
pub mod error;
pub mod event;
pub mod online;
pub mod report;
pub mod segment;
pub mod starts;
pub mod synth;
pub mod trace;

pub use detect::{detect, Analyzer, Config, Detection, Estimate, NotPeriodicReason};
pub use error::{Error, Result};
pub use event::{Direction, Event, JobEvent, Mode};
pub use iosets_types::{JobId, Nanos};
