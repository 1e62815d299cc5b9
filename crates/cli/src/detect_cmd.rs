//! `iosets detect TRACE [--format F] [--job J] [--json]`: each job's I/O period, confidence,
//! Set-10 set and priority, and the number of I/O phases seen.
//!
//! The detection is `iosets-period`'s offline detector; the set and priority are the policy
//! crate's Set-10 mapping (a job without a confident period gets seed 004's default priority,
//! 1/50, and a set of its own). This module only reads, calls and prints. The server's own trace
//! (`iosets serve --trace FILE`) is read as it is: each request is an event from its arrival to
//! its completion.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;

use iosets_period::trace::{read_trace, Format};
use iosets_period::{detect, Detection, JobId};
use iosets_policy::set10::{Assignment, SetMapping};

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

/// One job's answer.
#[derive(Debug)]
struct Row {
    job: JobId,
    detection: Detection,
    assignment: Assignment,
}

/// Runs `iosets detect`.
pub fn run(args: &DetectArgs) -> Result<()> {
    let format = args
        .format
        .as_deref()
        .map(str::parse::<Format>)
        .transpose()?;
    let trace = read_trace(&args.trace, format)
        .with_context(|| format!("reading {}", args.trace.display()))?;
    let mut jobs = trace.by_job();
    if let Some(j) = args.job {
        let job = JobId(j);
        if !jobs.contains_key(&job) {
            let known: Vec<String> = jobs.keys().map(|k| k.to_string()).collect();
            bail!(
                "--job {j}: no such job in {} (jobs: {})",
                args.trace.display(),
                known.join(", ")
            );
        }
        jobs.retain(|k, _| *k == job);
    }
    let mapping = SetMapping::default();
    let rows: Vec<Row> = jobs
        .into_iter()
        .map(|(job, events)| {
            let detection = detect(&events);
            let assignment = mapping.assign(detection.period().map(|p| p.as_secs_f64()));
            Row {
                job,
                detection,
                assignment,
            }
        })
        .collect();
    if args.json {
        println!("{}", to_json(&args.trace, trace.format, &rows));
    } else {
        print!("{}", table(&rows));
    }
    Ok(())
}

fn set_of(a: &Assignment) -> Option<i32> {
    match a {
        Assignment::Set { set, .. } => Some(*set),
        Assignment::Unknown { .. } => None,
    }
}

fn note(d: &Detection) -> String {
    match d {
        Detection::Periodic(_) => String::new(),
        Detection::NotPeriodic { reason, best } => match best {
            Some(b) => format!(
                "not periodic: {reason} (best guess {:.3} s)",
                b.period.as_secs_f64()
            ),
            None => format!("not periodic: {reason}"),
        },
    }
}

fn table(rows: &[Row]) -> String {
    let mut out = format!(
        "{:<8} {:>12} {:>10} {:>5} {:>9} {:>7}  {}\n",
        "job", "period_s", "confidence", "set", "priority", "phases", "note"
    );
    for r in rows {
        let d = &r.detection;
        let period = d
            .period()
            .map_or_else(|| "-".to_string(), |p| format!("{:.3}", p.as_secs_f64()));
        let set = set_of(&r.assignment).map_or_else(|| "own".to_string(), |s| s.to_string());
        out.push_str(&format!(
            "{:<8} {:>12} {:>10.2} {:>5} {:>9} {:>7}  {}\n",
            r.job.to_string(),
            period,
            d.confidence(),
            set,
            r.assignment.priority().to_string(),
            d.phases(),
            note(d)
        ));
    }
    out
}

fn to_json(path: &std::path::Path, format: Format, rows: &[Row]) -> String {
    let jobs: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            let d = &r.detection;
            let reason = match d {
                Detection::Periodic(_) => None,
                Detection::NotPeriodic { reason, .. } => Some(reason.to_string()),
            };
            serde_json::json!({
                "job": r.job.0,
                "periodic": d.is_periodic(),
                "period_s": d.period().map(|p| p.as_secs_f64()),
                "best_period_s": d.best().map(|e| e.period.as_secs_f64()),
                "confidence": d.confidence(),
                "set": set_of(&r.assignment),
                "priority": r.assignment.priority().get(),
                "phases": d.phases(),
                "reason": reason,
            })
        })
        .collect();
    serde_json::json!({
        "trace": path.display().to_string(),
        "format": format.name(),
        "jobs": jobs,
    })
    .to_string()
}
