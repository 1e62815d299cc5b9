//! iosets simulators: replay real policies on a modelled device, and measure who got what.
//!
//! The request-level simulator drives the very policy code the server runs (through
//! [`iosets_policy::Counted`]) on a virtual clock: requests arrive at their times, the policy
//! decides, a [`replay::DeviceModel`] (bandwidth shared by the batches in service, a fixed latency,
//! a number of parallel slots) serves what it dispatches, and completions flow back. It never reads
//! the wall clock or sleeps, so every replay is deterministic and fast.
//!
//! - [`workload`]: the requests to replay, generated from a seeded [`workload::WorkloadSpec`] (seed
//!   000's backlogged random workload and variations) or read from a CSV trace;
//! - [`replay`]: the device model and the event loop, [`replay::run`], which records for every
//!   request when it arrived, was dispatched and completed;
//! - [`shares`]: seed 000's sliding-window byte shares, with each queue's drain point and its share
//!   while every queue is backlogged;
//! - [`summary`]: per-queue weights, expected and measured shares, drain times and waits;
//! - [`report`]: CSV, SVG plot and text table writers, shared by every front end;
//! - [`plan`]: one replay from its inputs (policy, requests, device, share windows) to its
//!   measures, the path every front end (CLI, Python) takes.
//!
//! The second simulator, [`fluid`], is the IO-SETS paper's model: jobs alternating compute and
//! I/O phases, bandwidth shared as a fluid, the paper's heuristics and its four metrics (the one
//! implementation of them: the lab's measurements call it too).
//!
//! What this crate is not: it does not model a real file system's performance (no seeks, caches or
//! read/write asymmetry), and it holds no scheduling logic of its own — every decision comes from the
//! policy under test. Measurements of real runs (phase logs, server traces) are the lab's
//! (`iosets-lab`).
#![deny(missing_docs)]

mod error;
pub mod fluid;
pub mod plan;
pub mod replay;
pub mod report;
pub mod shares;
pub mod summary;
pub mod workload;

pub use error::{CsvProblem, SimError};
pub use replay::{run, DeviceModel, ReplayResult, RequestRecord, SeekModel};
pub use shares::{window_shares, QueueKey, ShareKey, WindowShares};
pub use summary::{expected_weights, Summary};
pub use workload::{read_csv, read_csv_file, WorkloadSpec};
