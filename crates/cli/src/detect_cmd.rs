//! `iosets detect TRACE [--format F] [--mode read|write|all] [--job J] [--json]`: each job's I/O
//! period, confidence, Set-10 set and priority, and the number of I/O phases seen.
//!
//! The trace's format is recognised from its content (`--format` overrides); `--mode` keeps the
//! reads, the writes or both before detection (default: writes, FTIO's default, or all events
//! when the trace has no write). The first line says the format and mode used.
//!
//! The detection is `iosets-period`'s offline detector; the set and priority are the policy
//! crate's Set-10 mapping (a job without a confident period gets seed 004's default priority,
//! 1/50, and a set of its own). This module only reads, calls and prints. The server's own trace
//! (`iosets serve --trace FILE`) is read as it is: each request is an event from its arrival to
//! its completion.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;

use iosets_period::trace::{read_trace, Format};
use iosets_period::{detect, Detection, JobId, Mode};
use iosets_policy::set10::{Assignment, SetMapping};

/// Arguments of `iosets detect`.
#[derive(Debug, Args)]
pub struct DetectArgs {
    /// The trace: iosets' request trace (CSV, the server's --trace file; see
    /// docs/trace-format.md) or JSON Lines requests; TMIO JSON Lines, JSON or MessagePack;
    /// FTIO's custom JSON (rank or application level) or text pattern; GekkoFS daemon JSON;
    /// Darshan DXT text (darshan-dxt-parser output). The format is recognised from the content.
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,
    /// The trace's format, if its content does not tell: csv, jsonl, tmio-jsonl, tmio-json,
    /// ftio-json, gekkofs-json, ftio-txt, dxt or tmio-msgpack.
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
    let mode = args
        .mode
        .as_deref()
        .map(str::parse::<Mode>)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--mode: {e}"))?;
    // The library's error names the file and what each reader found: no context added.
    let trace = read_trace(&args.trace, format)?;
    let (mode, why) = match mode {
        Some(m) => (m, "--mode"),
        None => {
            let m = trace.default_mode();
            (
                m,
                if m == Mode::Write {
                    "default"
                } else {
                    "default: the trace has no write"
                },
            )
        }
    };
    let mut jobs = trace.by_job_in(mode);
    if jobs.is_empty() {
        let c = trace.counts();
        bail!(
            "no {mode} event in {} ({} trace: {} reads, {} writes, {} other); try --mode {}",
            args.trace.display(),
            trace.format,
            c.read,
            c.write,
            c.other,
            if c.write > 0 { "write" } else { "all" }
        );
    }
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
    let events: usize = trace.events.iter().filter(|e| mode.keeps(e.dir)).count();
    if args.json {
        println!("{}", to_json(&args.trace, trace.format, mode, &rows));
    } else {
        println!(
            "# {}: {} trace, mode {mode} ({why}), {events} of {} events",
            args.trace.display(),
            trace.format,
            trace.events.len()
        );
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

fn to_json(path: &std::path::Path, format: Format, mode: Mode, rows: &[Row]) -> String {
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
        "mode": mode.name(),
        "jobs": jobs,
    })
    .to_string()
}
