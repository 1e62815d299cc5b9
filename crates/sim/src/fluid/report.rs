//! Writers for fluid runs: the per-job table and the side-by-side summary as text, the per-job
//! rows as CSV, everything (workload included) as JSON. Front ends call these rather than format
//! results themselves.

use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;

use serde::Serialize;

use super::session::BoundsReport;
use super::{FluidError, RunResult, Workload};

fn opt(x: Option<f64>, digits: usize) -> String {
    x.map_or_else(|| "-".to_string(), |v| format!("{v:.digits$}"))
}

/// Lays out `rows` under `header`: first column left-aligned, the others right-aligned.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut width: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut l = String::new();
        for (i, (c, w)) in cells.iter().zip(&width).enumerate() {
            if i == 0 {
                let _ = write!(l, "{c:<w$}");
            } else {
                let _ = write!(l, "  {c:>w$}");
            }
        }
        l.trim_end().to_string()
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}",
        line(&header.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    );
    for r in rows {
        let _ = writeln!(out, "{}", line(r));
    }
    out
}

/// One run's table: a line per job — group, `w_iter`, the set and priority of its last I/O phase,
/// iterations done, completion time, `e_cpu` and `e_io` inside the window, stretch, I/O slowdown.
pub fn job_table(workload: &Workload, run: &RunResult) -> String {
    let header = [
        "job",
        "group",
        "w_iter",
        "set",
        "priority",
        "iters",
        "done at",
        "e_cpu",
        "e_io",
        "stretch",
        "io_slowdown",
    ];
    let rows: Vec<Vec<String>> = run
        .jobs
        .iter()
        .enumerate()
        .map(|(i, j)| {
            vec![
                i.to_string(),
                workload
                    .groups
                    .get(j.group)
                    .cloned()
                    .unwrap_or_else(|| j.group.to_string()),
                format!("{:.3}", j.w_iter),
                j.last_set
                    .map_or_else(|| "-".to_string(), |(s, _)| s.to_string()),
                j.last_set
                    .map_or_else(|| "-".to_string(), |(_, p)| format!("{p:.3e}")),
                format!("{}/{}", j.iterations_done, j.iterations),
                opt(j.completion, 3),
                format!("{:.3}", j.work.e_cpu),
                format!("{:.3}", j.work.e_io),
                opt(j.stretch, 4),
                opt(j.io_slowdown, 4),
            ]
        })
        .collect();
    table(&header, &rows)
}

/// The runs' metrics side by side: a line per heuristic.
pub fn summary_table(runs: &[RunResult]) -> String {
    let header = [
        "heuristic",
        "max_stretch",
        "geomean_stretch",
        "io_slowdown",
        "utilization",
        "measured",
        "events",
        "end s",
    ];
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|r| {
            let m = r.metrics;
            vec![
                r.heuristic.to_string(),
                format!("{:.4}", m.max_stretch),
                format!("{:.4}", m.geomean_stretch),
                format!("{:.4}", m.io_slowdown),
                format!("{:.4}", m.utilization),
                format!("{}/{}", m.measured_jobs, r.jobs.len()),
                r.events.to_string(),
                format!("{:.3}", r.end_time),
            ]
        })
        .collect();
    table(&header, &rows)
}

/// Writes a line per (heuristic, job): `heuristic,job,group,w_iter,set,priority,iterations,
/// iterations_done,completion,e_cpu,e_io,stretch,io_slowdown`.
pub fn write_jobs_csv<W: Write>(
    mut out: W,
    workload: &Workload,
    runs: &[RunResult],
) -> std::io::Result<()> {
    writeln!(
        out,
        "heuristic,job,group,w_iter,set,priority,iterations,iterations_done,completion,e_cpu,e_io,stretch,io_slowdown"
    )?;
    let o = |x: Option<f64>| x.map_or_else(String::new, |v| format!("{v:.12}"));
    for r in runs {
        for (i, j) in r.jobs.iter().enumerate() {
            writeln!(
                out,
                "{},{},{},{:.12},{},{},{},{},{},{:.12},{:.12},{},{}",
                r.heuristic,
                i,
                workload.groups.get(j.group).map_or("", String::as_str),
                j.w_iter,
                j.last_set.map_or_else(String::new, |(s, _)| s.to_string()),
                j.last_set.map_or_else(String::new, |(_, p)| format!("{p}")),
                j.iterations,
                j.iterations_done,
                o(j.completion),
                j.work.e_cpu,
                j.work.e_io,
                o(j.stretch),
                o(j.io_slowdown),
            )?;
        }
    }
    out.flush()
}

/// Everything about a `sim run`, as JSON.
#[derive(Debug, Serialize)]
pub struct RunReport<'a> {
    /// The scenario's name.
    pub scenario: &'a str,
    /// The swept variable and the value it was run at, if any.
    pub at: Option<(&'a str, f64)>,
    /// The seed the workload and the noisy estimates were drawn with.
    pub seed: u64,
    /// The workload, every phase of every job.
    pub workload: &'a Workload,
    /// The bounds on a turn the runs had (`null`: none, the paper's rule).
    pub bounds: Option<BoundsReport>,
    /// One result per heuristic.
    pub runs: &'a [RunResult],
}

impl RunReport<'_> {
    /// Writes it as JSON to `path`.
    pub fn save_json(&self, path: &Path) -> Result<(), FluidError> {
        let io = |error| FluidError::Io {
            path: path.to_path_buf(),
            error,
        };
        let f = std::fs::File::create(path).map_err(io)?;
        let mut w = std::io::BufWriter::new(f);
        serde_json::to_writer(&mut w, self).map_err(|e| FluidError::Json {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        w.flush().map_err(io)
    }
}

/// [`write_jobs_csv`] to the file at `path`.
pub fn save_jobs_csv(
    path: &Path,
    workload: &Workload,
    runs: &[RunResult],
) -> Result<(), FluidError> {
    let io = |error| FluidError::Io {
        path: path.to_path_buf(),
        error,
    };
    let f = std::fs::File::create(path).map_err(io)?;
    write_jobs_csv(std::io::BufWriter::new(f), workload, runs).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fluid::{simulate, Heuristic, Job, SimOptions};

    /// A job of `group` released at 0, of one iteration: `cpu` seconds, then `volume`.
    fn job(group: usize, cpu: f64, volume: f64, class_w_iter: f64) -> Job {
        Job {
            group,
            release: 0.0,
            cpu: vec![cpu],
            volume: vec![volume],
            class_w_iter,
            peak: None,
            weight: None,
        }
    }

    #[test]
    fn tables_and_csv_show_each_job_and_heuristic() {
        let w = Workload {
            bandwidth: 1.0,
            window: None,
            jobs: vec![job(0, 1.0, 4.0, 5.0), job(1, 2.0, 2.0, 4.0)],
            groups: vec!["a".into(), "b".into()],
        };
        let runs: Vec<RunResult> = [Heuristic::FairShare, Heuristic::ExclusiveFcfs]
            .into_iter()
            .map(|h| simulate(&w, h, SimOptions::default()).unwrap())
            .collect();
        let t = job_table(&w, &runs[0]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("job  group"));
        // Fair share: job 0 done at 7, job 1 at 6 (see the hand cases).
        assert!(
            lines[1].contains("7.000") && lines[1].contains("job0"),
            "{t}"
        );
        assert!(lines[2].contains("6.000"), "{t}");
        let s = summary_table(&runs);
        assert!(s.lines().nth(1).unwrap().starts_with("fair-share"));
        assert!(s.lines().nth(2).unwrap().starts_with("exclusive-fcfs"));
        let mut csv = Vec::new();
        write_jobs_csv(&mut csv, &w, &runs).unwrap();
        let csv = String::from_utf8(csv).unwrap();
        assert_eq!(csv.lines().count(), 1 + 4);
        assert!(csv
            .lines()
            .nth(1)
            .unwrap()
            .starts_with("fair-share,0,a,5.0"));
        let report = RunReport {
            scenario: "t",
            at: None,
            seed: 1,
            workload: &w,
            bounds: None,
            runs: &runs,
        };
        let v = serde_json::to_value(&report).unwrap();
        assert!(v["bounds"].is_null(), "the paper's rule: {}", v["bounds"]);
        assert_eq!(v["runs"][1]["heuristic"], "exclusive-fcfs");
        assert_eq!(v["runs"][1]["jobs"][1]["completion"], 7.0);
        assert_eq!(v["workload"]["jobs"][0]["volume"][0], 4.0);
    }
}
