//! Each job of a trace, detected and mapped to its Set-10 set: what `iosets detect` prints and
//! what the Python bindings' `detect` returns.
//!
//! The detection is this crate's offline detector ([`crate::detect()`], or an [`Analyzer`] with
//! another [`Config`]); the set and priority come from the mapping the caller passes
//! ([`detect_trace`]'s `place`): the front ends pass the policy crate's Set-10 mapping, the code
//! the servers run (a job without a confident period gets seed 004's default priority, 1/50, and
//! a set of its own). This crate depends on `types` only, so it does not name the policy; front
//! ends only choose the inputs and print.

use std::path::{Path, PathBuf};

use crate::detect::{Analyzer, Config, Detection};
use crate::error::{Error, Result};
use crate::event::Mode;
use crate::segment::{segment_with, SegmentConfig};
use crate::trace::{read_trace, Format};
use crate::JobId;
use iosets_types::{Nanos, Priority};

/// Where a mapping of periods to sets puts a job.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Placement {
    /// The set, `None` for a set of its own (a job without a confident period).
    pub set: Option<i32>,
    /// The set's priority.
    pub priority: Priority,
}

/// One behaviour of a job: a time range, what the detector found in it, and where it puts the
/// job.
#[derive(Debug)]
pub struct SegmentReport {
    /// Where the behaviour begins (the trace's clock).
    pub start: Nanos,
    /// Where it ends.
    pub end: Nanos,
    /// What the detector found over `[start, end]`.
    pub detection: Detection,
    /// Its set and priority.
    pub placement: Placement,
}

impl SegmentReport {
    /// The segment as a JSON object: start_s, end_s and the fields of [`JobReport::to_json`]
    /// but the job.
    pub fn to_json(&self) -> serde_json::Value {
        let mut o = self.fields();
        o.insert("start_s".into(), self.start.as_secs_f64().into());
        o.insert("end_s".into(), self.end.as_secs_f64().into());
        o.into()
    }

    /// periodic, period_s, best_period_s, confidence, set, priority, phases, reason.
    fn fields(&self) -> serde_json::Map<String, serde_json::Value> {
        let d = &self.detection;
        let serde_json::Value::Object(o) = serde_json::json!({
            "periodic": d.is_periodic(),
            "period_s": d.period().map(|p| p.as_secs_f64()),
            "best_period_s": d.best().map(|e| e.period.as_secs_f64()),
            "confidence": d.confidence(),
            "set": self.placement.set,
            "priority": self.placement.priority.get(),
            "phases": d.phases(),
            "reason": reason(d),
        }) else {
            unreachable!("a JSON object literal")
        };
        o
    }

    /// Its line of [`DetectReport::table`], named `name`, with `note`.
    fn row(&self, name: &str, note: &str) -> String {
        let d = &self.detection;
        let period = d
            .period()
            .map_or_else(|| "-".to_string(), |p| format!("{:.3}", p.as_secs_f64()));
        let set = self
            .placement
            .set
            .map_or_else(|| "own".to_string(), |s| s.to_string());
        format!(
            "{:<8} {:>12} {:>10.2} {:>5} {:>9} {:>7}  {}\n",
            name,
            period,
            d.confidence(),
            set,
            self.placement.priority.to_string(),
            d.phases(),
            note
        )
    }
}

/// One job's answer.
#[derive(Debug)]
pub struct JobReport {
    /// The job.
    pub job: JobId,
    /// The job's behaviours in time order, split where it changes ([`crate::segment`]); one
    /// when nothing changes or with [`SegmentConfig::off`]. Never empty.
    pub segments: Vec<SegmentReport>,
}

impl JobReport {
    /// The last segment: the behaviour the job ends with (with one segment, the whole trace).
    pub fn last(&self) -> &SegmentReport {
        self.segments
            .last()
            .expect("a job report has at least one segment")
    }

    /// What the detector found in the last segment.
    pub fn detection(&self) -> &Detection {
        &self.last().detection
    }

    /// The last segment's set and priority: the set the servers end the job in.
    pub fn placement(&self) -> &Placement {
        &self.last().placement
    }

    /// The Set-10 set, `None` for a job without a confident period (a set of its own).
    pub fn set(&self) -> Option<i32> {
        self.placement().set
    }

    /// Why the job is not periodic, `None` if it is.
    pub fn reason(&self) -> Option<String> {
        reason(self.detection())
    }

    /// When the job's behaviour changed: the start of every segment but the first.
    pub fn changes(&self) -> Vec<Nanos> {
        self.segments.iter().skip(1).map(|s| s.start).collect()
    }

    /// A short note for people: empty for a periodic job with one behaviour, else the reason
    /// and the best guess, and the changes of behaviour.
    pub fn note(&self) -> String {
        let mut note = note(self.detection());
        if self.segments.len() > 1 {
            let at: Vec<String> = self
                .changes()
                .iter()
                .map(|t| format!("{:.3}", t.as_secs_f64()))
                .collect();
            let head = format!(
                "{} behaviours, changes at {} s; this line: the last",
                self.segments.len(),
                at.join(", ")
            );
            note = if note.is_empty() {
                head
            } else {
                format!("{head}; {note}")
            };
        }
        note
    }

    /// The job as a JSON object: job, periodic, period_s, best_period_s, confidence, set,
    /// priority, phases, reason (all of the last segment), `changes_s` (when the behaviour
    /// changed, seconds) and `segments` (each as [`SegmentReport::to_json`]).
    pub fn to_json(&self) -> serde_json::Value {
        let segments: Vec<serde_json::Value> =
            self.segments.iter().map(SegmentReport::to_json).collect();
        let changes: Vec<f64> = self.changes().iter().map(|t| t.as_secs_f64()).collect();
        let mut o = self.last().fields();
        o.insert("job".into(), self.job.0.into());
        o.insert("changes_s".into(), changes.into());
        o.insert("segments".into(), segments.into());
        o.into()
    }
}

/// Why a detection is not periodic, `None` if it is.
fn reason(d: &Detection) -> Option<String> {
    match d {
        Detection::Periodic(_) => None,
        Detection::NotPeriodic { reason, .. } => Some(reason.to_string()),
    }
}

/// Empty for a periodic detection, else the reason and the best guess.
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

/// A trace's jobs, detected.
#[derive(Debug)]
pub struct DetectReport {
    /// The trace file.
    pub trace: PathBuf,
    /// The format it was read as.
    pub format: Format,
    /// The events looked at: the reads, the writes or all ([`Mode`]).
    pub mode: Mode,
    /// Why that mode: `--mode` (asked for), `default` (the trace has writes), or `default: the
    /// trace has no write`.
    pub mode_why: &'static str,
    /// Events the mode kept, of all the trace's events.
    pub events_kept: usize,
    /// All the trace's events.
    pub events_total: usize,
    /// One answer per job, by job id.
    pub jobs: Vec<JobReport>,
}

/// Reads the trace at `path` (format recognised from its content when `None`), keeps the events
/// of `mode` (default: the writes, FTIO's default, or every event when the trace has no write)
/// and only `job` if given, splits each job where its behaviour changes (`segments`;
/// [`SegmentConfig::off`]: the whole trace), detects each segment with `config`
/// ([`Config::default`] is `iosets detect`'s), and places it with `place`, given its period in
/// seconds (`None` without a confident one).
///
/// # Errors
/// The trace's read or parse errors; [`Error::NoEventInMode`] if the mode keeps no event;
/// [`Error::NoSuchJob`] if `job` is not in it; [`Error::InvalidConfig`] for a bad `config` or
/// `segments`.
pub fn detect_trace(
    path: &Path,
    format: Option<Format>,
    mode: Option<Mode>,
    job: Option<JobId>,
    config: &Config,
    segments: &SegmentConfig,
    place: &dyn Fn(Option<f64>) -> Placement,
) -> Result<DetectReport> {
    segments.validate()?;
    let mut analyzer = Analyzer::new(*config)?;
    let trace = read_trace(path, format)?;
    let (mode, mode_why) = match mode {
        Some(m) => (m, "--mode"),
        None => match trace.default_mode() {
            Mode::Write => (Mode::Write, "default"),
            m => (m, "default: the trace has no write"),
        },
    };
    let mut jobs = trace.by_job_in(mode);
    let events_kept = jobs.values().map(Vec::len).sum();
    if jobs.is_empty() {
        let c = trace.counts();
        return Err(Error::NoEventInMode {
            mode,
            trace: path.to_path_buf(),
            format: trace.format.name(),
            read: c.read,
            write: c.write,
            other: c.other,
            suggest: if c.write > 0 { "write" } else { "all" },
        });
    }
    if let Some(job) = job {
        if !jobs.contains_key(&job) {
            let known: Vec<String> = jobs.keys().map(|k| k.to_string()).collect();
            return Err(Error::NoSuchJob {
                job,
                trace: path.to_path_buf(),
                known: known.join(", "),
            });
        }
        jobs.retain(|k, _| *k == job);
    }
    let jobs = jobs
        .into_iter()
        .map(|(job, events)| {
            let segments: Vec<SegmentReport> = segment_with(&events, &mut analyzer, segments)
                .expect("validated above")
                .segments
                .into_iter()
                .map(|s| SegmentReport {
                    start: s.start,
                    end: s.end,
                    detection: s.detection,
                    placement: place(s.detection.period().map(|p| p.as_secs_f64())),
                })
                .collect();
            JobReport { job, segments }
        })
        .collect();
    Ok(DetectReport {
        trace: path.to_path_buf(),
        format: trace.format,
        mode,
        mode_why,
        events_kept,
        events_total: trace.events.len(),
        jobs,
    })
}

impl DetectReport {
    /// The first line of the table: the file, its format, the mode and why, the events kept.
    pub fn header(&self) -> String {
        format!(
            "# {}: {} trace, mode {} ({}), {} of {} events\n",
            self.trace.display(),
            self.format,
            self.mode,
            self.mode_why,
            self.events_kept,
            self.events_total
        )
    }

    /// A table for people: a line per job (job, period_s, confidence, set, priority, phases,
    /// note); a job whose behaviour changed has its line (the last behaviour's) followed by a
    /// line per segment, `JOB/K`, with the segment's time range.
    pub fn table(&self) -> String {
        let mut out = format!(
            "{:<8} {:>12} {:>10} {:>5} {:>9} {:>7}  {}\n",
            "job", "period_s", "confidence", "set", "priority", "phases", "note"
        );
        for r in &self.jobs {
            out.push_str(&r.last().row(&r.job.to_string(), &r.note()));
            if r.segments.len() > 1 {
                for (k, seg) in r.segments.iter().enumerate() {
                    let range = format!(
                        "{:.3}-{:.3} s",
                        seg.start.as_secs_f64(),
                        seg.end.as_secs_f64()
                    );
                    let n = note(&seg.detection);
                    let n = if n.is_empty() {
                        range
                    } else {
                        format!("{range}; {n}")
                    };
                    out.push_str(&seg.row(&format!("  {}/{}", r.job, k + 1), &n));
                }
            }
        }
        out
    }

    /// The report as JSON: `{"trace", "format", "mode", "jobs": [...]}`, each job as
    /// [`JobReport::to_json`].
    pub fn to_json(&self) -> serde_json::Value {
        let jobs: Vec<serde_json::Value> = self.jobs.iter().map(JobReport::to_json).collect();
        serde_json::json!({
            "trace": self.trace.display().to_string(),
            "format": self.format.name(),
            "mode": self.mode.name(),
            "jobs": jobs,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A mapping by decade of the period (the servers' Set-10 is the policy crate's).
    fn decade(period_s: Option<f64>) -> Placement {
        let set = period_s.map(|p| p.log10().round() as i32);
        Placement {
            set,
            priority: Priority::new(10f64.powi(-set.unwrap_or(2))).unwrap(),
        }
    }

    fn sample(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data")
            .join(name)
    }

    /// Every job of the `requests.csv` sample, detected with `config`.
    fn detect_sample(config: &Config) -> DetectReport {
        detect_trace(
            &sample("requests.csv"),
            None,
            None,
            None,
            config,
            &SegmentConfig::default(),
            &decade,
        )
        .unwrap()
    }

    #[test]
    fn every_job_gets_a_period_and_a_set() {
        let r = detect_sample(&Config::default());
        assert_eq!(r.jobs.len(), 2);
        for j in &r.jobs {
            assert!(j.detection().is_periodic(), "{}", r.table());
            assert!(j.set().is_some());
            assert_eq!(j.to_json()["job"], j.job.0);
        }
        assert_eq!(r.table().lines().count(), 3);
        let online = detect_sample(&Config::online());
        assert_eq!(online.jobs.len(), 2);
    }

    #[test]
    fn an_unknown_job_lists_the_known_ones() {
        let e = detect_trace(
            &sample("requests.csv"),
            None,
            None,
            Some(JobId(7)),
            &Config::default(),
            &SegmentConfig::default(),
            &decade,
        )
        .unwrap_err();
        assert!(e.to_string().contains("jobs: 1, 2"), "{e}");
    }
}
