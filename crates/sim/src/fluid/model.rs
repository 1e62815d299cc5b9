//! The fluid model's inputs: jobs as lists of phases, the platform's bandwidth and the
//! measurement window.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::FluidError;

/// The interval `[begin, end]` (seconds) over which the metrics are measured.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Window {
    /// `T_begin`.
    pub begin: f64,
    /// `T_end`.
    pub end: f64,
}

impl Window {
    /// `[begin, end]`; an error unless `0 ≤ begin < end`, both finite.
    pub fn new(begin: f64, end: f64) -> Result<Window, FluidError> {
        if !(begin.is_finite() && end.is_finite() && begin >= 0.0 && begin < end) {
            return Err(FluidError::invalid(
                "platform.window",
                format!("[{begin}, {end}]"),
                "expected [begin, end] with 0 ≤ begin < end",
            ));
        }
        Ok(Window { begin, end })
    }

    /// Its length `T_end - T_begin`.
    pub fn len(&self) -> f64 {
        self.end - self.begin
    }

    /// Length of the part of `[start, end]` inside the window.
    pub fn overlap(&self, start: f64, end: f64) -> f64 {
        (end.min(self.end) - start.max(self.begin)).max(0.0)
    }
}

/// One job: a release time, then `n` iterations of compute (`cpu[i]` seconds) followed by I/O
/// (`volume[i]` units of data, taking `volume[i] / B` seconds alone).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Job {
    /// The group (scenario `[[group]]` or generator group) it belongs to.
    pub group: usize,
    /// When it starts its first compute phase (seconds).
    pub release: f64,
    /// Compute lengths, one per iteration (seconds).
    pub cpu: Vec<f64>,
    /// I/O volumes, one per iteration (same unit as the bandwidth times seconds).
    pub volume: Vec<f64>,
    /// The mean `w_iter` of the distribution (group) the job was drawn from: what CLAIRVOYANT sees.
    pub class_w_iter: f64,
    /// The most bandwidth its I/O phases can take (volume per second), when its own writers
    /// limit it below `B` (e.g. one synchronous writer reaching one of several servers at a
    /// time); `None`: all of `B`. A heuristic's share above it goes to the other transferring
    /// jobs, in proportion to their priorities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak: Option<f64>,
    /// Its weight under `fair-share` (default 1): arrival order serves each outstanding request
    /// in turn, so a job of `n` synchronous writers gets `n` shares. Other heuristics ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<f64>,
}

impl Job {
    /// The number of iterations.
    pub fn iterations(&self) -> usize {
        self.cpu.len()
    }

    /// Its characteristic time with bandwidth `b`: the mean isolated iteration length
    /// `Σ (t_cpu + volume/b) / n` (seconds).
    pub fn w_iter(&self, b: f64) -> f64 {
        let total: f64 = self.cpu.iter().sum::<f64>() + self.volume.iter().sum::<f64>() / b;
        total / self.iterations() as f64
    }
}

/// A complete fluid workload: the platform and the jobs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// The bandwidth `B` of the shared storage (volume per second).
    pub bandwidth: f64,
    /// The measurement window; `None` means `[0, end of the run]`.
    pub window: Option<Window>,
    /// The jobs, numbered by their index.
    pub jobs: Vec<Job>,
    /// The group names, indexed by [`Job::group`].
    pub groups: Vec<String>,
}

impl Workload {
    /// Checks every number: bandwidth finite and > 0, at least one job, every job with at least
    /// one iteration, times and volumes finite and ≥ 0, releases finite and ≥ 0.
    pub fn validate(&self) -> Result<(), FluidError> {
        if !(self.bandwidth.is_finite() && self.bandwidth > 0.0) {
            return Err(FluidError::invalid(
                "platform.bandwidth",
                self.bandwidth,
                "expected a finite number > 0",
            ));
        }
        if self.jobs.is_empty() {
            return Err(FluidError::NoJobs {
                context: "the workload lists no job".to_string(),
            });
        }
        if let Some(w) = self.window {
            Window::new(w.begin, w.end)?;
        }
        for (j, job) in self.jobs.iter().enumerate() {
            let field = |what: &str| format!("job {j} (group {}) {what}", job.group);
            if job.group >= self.groups.len() {
                return Err(FluidError::invalid(
                    field("group"),
                    job.group,
                    format!("expected a group index < {}", self.groups.len()),
                ));
            }
            if job.cpu.is_empty() || job.cpu.len() != job.volume.len() {
                return Err(FluidError::invalid(
                    field("iterations"),
                    format!(
                        "{} compute and {} I/O phases",
                        job.cpu.len(),
                        job.volume.len()
                    ),
                    "expected at least one iteration, as many compute as I/O phases",
                ));
            }
            if let Some(weight) = job.weight.filter(|w| !(w.is_finite() && *w > 0.0)) {
                return Err(FluidError::invalid(
                    field("weight"),
                    weight,
                    "expected a finite weight > 0",
                ));
            }
            if let Some(peak) = job.peak.filter(|p| !(p.is_finite() && *p > 0.0)) {
                return Err(FluidError::invalid(
                    field("peak"),
                    peak,
                    "expected a finite bandwidth > 0",
                ));
            }
            if !(job.release.is_finite() && job.release >= 0.0) {
                return Err(FluidError::invalid(
                    field("release"),
                    job.release,
                    "expected a finite time ≥ 0",
                ));
            }
            for (what, xs) in [("t_cpu", &job.cpu), ("volume", &job.volume)] {
                if let Some(x) = xs.iter().find(|x| !(x.is_finite() && **x >= 0.0)) {
                    return Err(FluidError::invalid(
                        field(what),
                        x,
                        "expected a finite number ≥ 0",
                    ));
                }
            }
            if !(job.class_w_iter.is_finite() && job.class_w_iter > 0.0) {
                return Err(FluidError::invalid(
                    field("class w_iter"),
                    job.class_w_iter,
                    "expected a finite number > 0",
                ));
            }
        }
        Ok(())
    }

    /// Reads a workload written as JSON (the `workload` object of `iosets sim run --json`, or a
    /// file of the same shape) and checks it.
    pub fn load_json(path: &Path) -> Result<Workload, FluidError> {
        let text = std::fs::read_to_string(path).map_err(|error| FluidError::Io {
            path: path.to_path_buf(),
            error,
        })?;
        let w: Workload = serde_json::from_str(&text).map_err(|e| FluidError::Parse {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        w.validate()?;
        Ok(w)
    }

    /// The total number of iterations of all jobs.
    pub fn iterations(&self) -> usize {
        self.jobs.iter().map(Job::iterations).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_job() -> Workload {
        Workload {
            bandwidth: 2.0,
            window: None,
            jobs: vec![Job {
                group: 0,
                release: 0.0,
                cpu: vec![1.0, 3.0],
                volume: vec![2.0, 6.0],
                class_w_iter: 4.0,
                peak: None,
                weight: None,
            }],
            groups: vec!["a".to_string()],
        }
    }

    #[test]
    fn w_iter_is_the_mean_isolated_iteration() {
        let w = one_job();
        // (1 + 2/2) and (3 + 6/2): mean of 2 and 6.
        assert_eq!(w.jobs[0].w_iter(w.bandwidth), 4.0);
        assert_eq!(w.iterations(), 2);
    }

    #[test]
    fn json_round_trip_and_errors() {
        let dir = std::env::temp_dir().join(format!("iosets-fluid-model-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("w.json");
        std::fs::write(&p, serde_json::to_string(&one_job()).unwrap()).unwrap();
        assert_eq!(Workload::load_json(&p).unwrap(), one_job());
        std::fs::write(
            &p,
            r#"{"bandwidth": 1, "window": null, "jobs": [], "groups": []}"#,
        )
        .unwrap();
        assert!(Workload::load_json(&p)
            .unwrap_err()
            .to_string()
            .contains("no jobs"));
        std::fs::write(
            &p,
            r#"{"bandwidth": 1, "windows": null, "jobs": [], "groups": []}"#,
        )
        .unwrap();
        let e = Workload::load_json(&p).unwrap_err().to_string();
        assert!(e.contains("unknown field `windows`"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn window_overlap() {
        let w = Window::new(10.0, 20.0).unwrap();
        assert_eq!(w.overlap(0.0, 5.0), 0.0);
        assert_eq!(w.overlap(5.0, 15.0), 5.0);
        assert_eq!(w.overlap(12.0, 14.0), 2.0);
        assert_eq!(w.overlap(18.0, 30.0), 2.0);
        assert_eq!(w.overlap(0.0, 30.0), 10.0);
        assert!(Window::new(5.0, 5.0).is_err());
        assert!(Window::new(-1.0, 5.0).is_err());
    }

    #[test]
    fn bad_workloads_name_the_problem() {
        let mut w = one_job();
        w.bandwidth = -1.0;
        assert!(w
            .validate()
            .unwrap_err()
            .to_string()
            .contains("platform.bandwidth = -1"));
        let mut w = one_job();
        w.jobs.clear();
        assert!(w.validate().unwrap_err().to_string().contains("no jobs"));
        let mut w = one_job();
        w.jobs[0].volume[1] = f64::NAN;
        assert!(w.validate().unwrap_err().to_string().contains("volume"));
        let mut w = one_job();
        w.jobs[0].cpu.pop();
        assert!(w.validate().unwrap_err().to_string().contains("iterations"));
        assert!(one_job().validate().is_ok());
    }
}
