//! `iosets detect TRACE [--format F] [--job J] [--json]`: each job's I/O period, confidence,
//! Set-10 set and priority, and the number of I/O phases seen.
//!
//! The detection and the Set-10 mapping are `iosets_period::report` (a job without a confident
//! period gets seed 004's default priority, 1/50, and a set of its own). This module only parses
//! flags, calls and prints. The server's own trace
//! (`iosets serve --trace FILE`) is read as it is: each request is an event from its arrival to
//! its completion.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use iosets_period::report::detect_trace;
use iosets_period::trace::Format;
use iosets_period::{Config, Error, JobId};

/// Arguments of `iosets detect`.
#[derive(Debug, Args)]
pub struct DetectArgs {
    /// The trace: iosets' request trace (CSV, the server's --trace file; see
    /// docs/trace-format.md) or JSON Lines requests, FTIO bandwidth JSON, TMIO JSON Lines, or
    /// Darshan DXT text (darshan-dxt-parser output).
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,
    /// The trace's format: csv, jsonl, ftio, tmio or dxt (default: guessed from the file name
    /// and first lines).
    #[arg(long, value_name = "F")]
    pub format: Option<String>,
    /// Only this job.
    #[arg(long, value_name = "J")]
    pub job: Option<u64>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Runs `iosets detect`.
pub fn run(args: &DetectArgs) -> Result<()> {
    let format = args
        .format
        .as_deref()
        .map(str::parse::<Format>)
        .transpose()?;
    let report = detect_trace(&args.trace, format, args.job.map(JobId), &Config::default())
        .map_err(|e| match e {
            Error::NoSuchJob { .. } => {
                anyhow::anyhow!("--job {}: {e}", args.job.unwrap_or_default())
            }
            e => anyhow::Error::new(e).context(format!("reading {}", args.trace.display())),
        })?;
    if args.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.table());
    }
    Ok(())
}
