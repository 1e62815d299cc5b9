//! `iosets detect TRACE [--format F] [--mode read|write|all] [--job J] [--segments on|off]
//! [--json]`: each job's I/O period, confidence, Set-10 set and priority, and the number of I/O
//! phases seen; a job whose behaviour changes part-way is split where it changes, a line per
//! behaviour (`--segments off`: one period for the whole trace).
//!
//! The trace's format is recognised from its content (`--format` overrides); `--mode` keeps the
//! reads, the writes or both before detection (default: writes, FTIO's default, or all events
//! when the trace has no write). The first line says the format and mode used.
//!
//! The detection is `iosets_period::report`; the Set-10 mapping is the policy crate's, the code
//! the servers run (a job without a confident period gets seed 004's default priority, 1/50,
//! and a set of its own). This module only parses
//! flags, calls and prints. The server's own trace
//! (`iosets serve --trace FILE`) is read as it is: each request is an event from its arrival to
//! its completion.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use iosets_period::report::{detect_trace, Placement};
use iosets_period::segment::SegmentConfig;
use iosets_period::trace::Format;
use iosets_period::{Config, Error, JobId, Mode};
use iosets_policy::set10::SetMapping;

/// Arguments of `iosets detect`.
#[derive(Debug, Args)]
pub struct DetectArgs {
    /// The trace: iosets' request trace (CSV, the server's --trace file; see
    /// docs/trace-format.md) or JSON Lines requests; TMIO JSON Lines, JSON or MessagePack;
    /// FTIO's custom JSON (rank or application level) or text pattern; GekkoFS daemon JSON;
    /// Darshan DXT text (darshan-dxt-parser output); Recorder text (recorder2text output: a
    /// directory is read as its _text folder of `<rank>.txt` files); the metric proxy's
    /// MessagePack export. The format is recognised from the content.
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,
    /// The trace's format, if its content does not tell: csv, jsonl, tmio-jsonl, tmio-json,
    /// ftio-json, gekkofs-json, ftio-txt, dxt, recorder, tmio-msgpack or metric-proxy.
    #[arg(long, value_name = "F")]
    pub format: Option<String>,
    /// Which events to look at: read, write or all. Default: write (FTIO's default) if the
    /// trace has writes, else all. Events whose direction the trace does not say count in
    /// every mode.
    #[arg(long, value_name = "MODE")]
    pub mode: Option<String>,
    /// Only this job.
    #[arg(long, value_name = "J")]
    pub job: Option<u64>,
    /// Split each job where its I/O behaviour changes (a checkpoint interval changed, a solver
    /// entering another stage) and give each part its period, set and time range: on (the
    /// default) or off (one period for the whole trace). A job without a change gets the same
    /// line either way.
    #[arg(long, value_name = "on|off", default_value = "on", value_parser = on_off, action = clap::ArgAction::Set)]
    pub segments: bool,
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
    let mode = args
        .mode
        .as_deref()
        .map(str::parse::<Mode>)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--mode: {e}"))?;
    // The library's errors name the file and what each reader found: no context added, so
    // every error is one line.
    let report = detect_trace(
        &args.trace,
        format,
        mode,
        args.job.map(JobId),
        &Config::default(),
        &if args.segments {
            SegmentConfig::default()
        } else {
            SegmentConfig::off()
        },
        &set10,
    )
    .map_err(|e| match e {
        Error::NoSuchJob { .. } => {
            anyhow::anyhow!("--job {}: {e}", args.job.unwrap_or_default())
        }
        e => anyhow::Error::new(e),
    })?;
    if args.json {
        println!("{}", report.to_json());
    } else {
        print!("{}{}", report.header(), report.table());
    }
    Ok(())
}

/// The servers' Set-10 mapping of a period (seconds; `None` without a confident one).
fn set10(period_s: Option<f64>) -> Placement {
    let a = SetMapping::default().assign(period_s);
    Placement {
        set: a.set(),
        priority: a.priority(),
    }
}

/// `on` or `off`.
fn on_off(s: &str) -> std::result::Result<bool, String> {
    match s {
        "on" => Ok(true),
        "off" => Ok(false),
        other => Err(format!("expected on or off, not {other:?}")),
    }
}
