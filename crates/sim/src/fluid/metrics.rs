//! The IO-SETS metrics over a window `[T_begin, T_end]` (DESIGN.md, "The simulator's model").
//!
//! For job `j`, `e_j^cpu` and `e_j^io` are the isolated lengths of the work it did inside the
//! window: the part of each compute phase inside the window, and the I/O volume it transferred
//! inside the window divided by the bandwidth `B` (what that volume takes alone). A phase cut by an
//! edge of the window therefore counts for exactly the part of its work done inside it — the fluid
//! simulator knows that part exactly, so it needs neither seed 004's pro-rata estimate nor to drop
//! phases that run past `T_end`. With `e_j = e_j^cpu + e_j^io` and `T = T_end - T_begin`:
//!
//! - stretch `= T / e_j`, reported as its maximum and its geometric mean over the jobs;
//! - I/O slowdown `= geomean_j (T - e_j^cpu) / e_j^io`;
//! - utilization `= Σ_j e_j^cpu / (N · T)`, `N` every job of the workload.
//!
//! A job that did no work inside the window (released after it, or done before it) has no
//! stretch, and one that did no I/O inside it has no I/O slowdown: they are left out of those
//! means (and counted in [`Metrics::measured_jobs`]) rather than given an infinite value.

use serde::Serialize;

use super::model::Window;

/// The work one job did inside the window, as isolated lengths (seconds).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct JobWork {
    /// `e_j^cpu`: compute seconds inside the window.
    pub e_cpu: f64,
    /// `e_j^io`: I/O volume transferred inside the window over `B`.
    pub e_io: f64,
}

impl JobWork {
    /// Its stretch over a window of length `len`: `len / (e_cpu + e_io)`; `None` if it did nothing.
    pub fn stretch(&self, len: f64) -> Option<f64> {
        let e = self.e_cpu + self.e_io;
        (e > 0.0).then(|| len / e)
    }

    /// Its I/O slowdown over a window of length `len`: `(len - e_cpu) / e_io`; `None` if it did
    /// no I/O.
    pub fn io_slowdown(&self, len: f64) -> Option<f64> {
        (self.e_io > 0.0).then(|| (len - self.e_cpu) / self.e_io)
    }
}

/// The four metrics of the paper, over one window.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Metrics {
    /// The largest stretch (lower is better; ≥ 1). NaN when no job worked in the window.
    pub max_stretch: f64,
    /// The geometric mean of the stretches. NaN when no job worked in the window.
    pub geomean_stretch: f64,
    /// The geometric mean of the I/O slowdowns. NaN when no job did I/O in the window.
    pub io_slowdown: f64,
    /// The fraction of the jobs' time spent computing (higher is better; ≤ 1).
    pub utilization: f64,
    /// Jobs that did some work inside the window (those with a stretch).
    pub measured_jobs: usize,
}

fn geomean(xs: impl Iterator<Item = f64>) -> f64 {
    let (mut sum, mut n) = (0.0, 0usize);
    for x in xs {
        sum += x.ln();
        n += 1;
    }
    if n == 0 {
        f64::NAN
    } else {
        (sum / n as f64).exp()
    }
}

impl Metrics {
    /// The metrics of `work` (one entry per job of the workload) over `window`.
    pub fn compute(window: Window, work: &[JobWork]) -> Metrics {
        let len = window.len();
        let stretches = || work.iter().filter_map(|w| w.stretch(len));
        let max_stretch = stretches().fold(f64::NAN, f64::max);
        let cpu: f64 = work.iter().map(|w| w.e_cpu).sum();
        Metrics {
            max_stretch,
            geomean_stretch: geomean(stretches()),
            io_slowdown: geomean(work.iter().filter_map(|w| w.io_slowdown(len))),
            utilization: if work.is_empty() {
                f64::NAN
            } else {
                cpu / (work.len() as f64 * len)
            },
            measured_jobs: stretches().count(),
        }
    }
}

/// The metrics' names, in the order of [`Metrics::values`].
pub const METRIC_NAMES: [&str; 4] = [
    "max_stretch",
    "geomean_stretch",
    "io_slowdown",
    "utilization",
];

impl Metrics {
    /// The four metrics in the order of [`METRIC_NAMES`].
    pub fn values(&self) -> [f64; 4] {
        [
            self.max_stretch,
            self.geomean_stretch,
            self.io_slowdown,
            self.utilization,
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * b.abs().max(1.0)
    }

    #[test]
    fn hand_example_two_jobs() {
        // Window of 100 s. Job A computed 60 s and did 20 s of isolated I/O; job B computed 30 s
        // and did 10 s of I/O.
        let w = Window::new(100.0, 200.0).unwrap();
        let work = [
            JobWork {
                e_cpu: 60.0,
                e_io: 20.0,
            },
            JobWork {
                e_cpu: 30.0,
                e_io: 10.0,
            },
        ];
        let m = Metrics::compute(w, &work);
        // stretches 100/80 = 1.25 and 100/40 = 2.5
        assert!(close(m.max_stretch, 2.5));
        assert!(close(m.geomean_stretch, (1.25f64 * 2.5).sqrt()));
        // I/O slowdowns (100-60)/20 = 2 and (100-30)/10 = 7
        assert!(close(m.io_slowdown, 14f64.sqrt()));
        // (60 + 30) / (2 * 100)
        assert!(close(m.utilization, 0.45));
        assert_eq!(m.measured_jobs, 2);
        assert_eq!(m.values()[3], m.utilization);
    }

    #[test]
    fn idle_jobs_are_left_out_of_the_means_but_count_for_utilization() {
        let w = Window::new(0.0, 10.0).unwrap();
        let work = [
            JobWork {
                e_cpu: 5.0,
                e_io: 5.0,
            },
            JobWork::default(),
            JobWork {
                e_cpu: 4.0,
                e_io: 0.0,
            },
        ];
        let m = Metrics::compute(w, &work);
        assert!(close(m.max_stretch, 2.5));
        assert!(close(m.geomean_stretch, 2.5f64.sqrt()));
        assert!(close(m.io_slowdown, 1.0));
        assert!(close(m.utilization, 9.0 / 30.0));
        assert_eq!(m.measured_jobs, 2);
        let none = Metrics::compute(w, &[JobWork::default()]);
        assert!(none.max_stretch.is_nan() && none.io_slowdown.is_nan());
        assert_eq!(none.utilization, 0.0);
    }

    #[test]
    fn a_job_alone_without_waiting_has_stretch_one() {
        let w = Window::new(0.0, 8.0).unwrap();
        let m = Metrics::compute(
            w,
            &[JobWork {
                e_cpu: 6.0,
                e_io: 2.0,
            }],
        );
        assert_eq!(
            (m.max_stretch, m.geomean_stretch, m.io_slowdown),
            (1.0, 1.0, 1.0)
        );
        assert_eq!(m.utilization, 0.75);
    }
}
