//! `iosets experiment`: seeds' experiments end to end, through a real mount, with unmodified
//! POSIX applications.
//!
//! # `iosets experiment seed004`
//! Seed 004's experiment (its §4–5), scaled in time ([`plan`](crate::seed004::plan)): per
//! repetition and configuration (`plan::Config`), K servers on loopback in this process, each
//! throttled to `device / K` MiB/s so that results compare across K, one FUSE mount over them, and
//! one `iosets app periodic` process per job writing through the mount
//! ([`rig::cluster`](crate::rig::cluster)). The metrics come from the applications' own phase logs
//! exactly as seed 004 §4.3 computes them, beside the fluid simulator's prediction for the same
//! workload ([`analysis`](crate::seed004::analysis)); the outputs are CSV files, seed 004's Figure
//! 4 as a box plot, a timeline per run of each job's bandwidth on each server, and a table per
//! configuration ([`report`](crate::seed004::report)).
//!
//! # `iosets experiment seed003`
//! Seed 003's thread-quota test (a metadata-heavy job against a light one and its stage-in, with
//! and without a quota on the server's threads) through a real mount: see
//! [`seed003`](crate::seed003).
//!
//! # What it is not
//! Not a benchmark of the servers: the device is emulated (the servers' throttle, data on
//! tmpfs), compute phases are sleeps, and everything shares the machine it runs on; the
//! repetitions are how noise is measured.

use anyhow::Result;
use clap::{Args, Subcommand};

use crate::seed004;

/// `iosets experiment` flags.
#[derive(Debug, Args)]
pub struct ExperimentArgs {
    #[command(subcommand)]
    which: Which,
}

#[derive(Debug, Subcommand)]
enum Which {
    /// Seed 004's experiment through the mount: 1 high-frequency and 15 low-frequency jobs
    /// under timeorder, clairvoyant, auto and auto-error, scaled in time.
    Seed004(seed004::Seed004Args),
    /// Seed 003's thread quotas through the mount: a metadata-heavy job (mdtest, 64
    /// processes, stripe count 96) against a light one (8 processes, stripe count 4) and its
    /// stage-in, alone (reference), without (off) and with (on) a 71 % thread quota.
    Seed003(crate::seed003::Seed003Args),
    /// Random periodic workloads (seed 001's three classes of period, 1 to 8 writers per job,
    /// I/O load 0.5 to 1.2) through the mount under timeorder, clairvoyant and auto, each
    /// beside the fluid simulator's prediction for the same workload.
    Random(crate::random::RandomArgs),
}

/// `iosets experiment`.
pub fn run(args: &ExperimentArgs) -> Result<()> {
    match &args.which {
        Which::Seed004(a) => seed004::seed004(a),
        Which::Seed003(a) => crate::seed003::seed003(a),
        Which::Random(a) => crate::random::random(a),
    }
}
