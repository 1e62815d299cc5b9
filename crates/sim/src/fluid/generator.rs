//! The paper's workload generator, seeded and reproducible.
//!
//! For each group (`count` jobs drawn from one distribution) and each of its jobs:
//! `w ~ N(mean, sd)` truncated to `w > 0` (redrawn until positive), `n = max(1, round(h / w))`
//! iterations, release `~ U[0, w]`, and `u ~ U[0, 1]`. Over all jobs, `α_j = ω · u_j / Σ u` so
//! that `Σ α = ω` (the platform's I/O load). Then `t_cpu = (1 - α) w` and `t_io = α w` (volume
//! `t_io · B`), and every phase gets its own noise: each compute length and each I/O volume is
//! multiplied by `1 + γ`, `γ ~ U[-b, b]` drawn independently.
//!
//! The random stream is ChaCha8 seeded with the given seed; draws happen in a fixed order (groups
//! in order, jobs in order: `w`, release, `u`; then per job and iteration: compute noise, I/O
//! noise), so a generator and a seed always give the same workload.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use super::model::{Job, Window, Workload};
use super::FluidError;

/// One group of jobs whose `w_iter` is drawn from `N(mean, sd)`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GroupSpec {
    /// A name for tables and plots.
    pub name: String,
    /// How many jobs.
    pub count: usize,
    /// Mean of `w_iter` (seconds).
    pub mean: f64,
    /// Standard deviation of `w_iter` (seconds).
    pub sd: f64,
}

/// The paper's generator (see the [module docs](self)).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PaperGenerator {
    /// The bandwidth `B`.
    pub bandwidth: f64,
    /// The horizon `h` (seconds): each job runs about `h / w` iterations.
    pub horizon: f64,
    /// The I/O load `ω = Σ α`, in `(0, 1)`.
    pub omega: f64,
    /// The per-phase noise bound `b`, in `[0, 1)`.
    pub noise: f64,
    /// The measurement window of the generated workloads.
    pub window: Option<Window>,
    /// The groups.
    pub groups: Vec<GroupSpec>,
}

/// A standard normal draw (Box–Muller), consuming two draws of `rng`.
pub fn standard_normal(rng: &mut ChaCha8Rng) -> f64 {
    let u1 = 1.0 - rng.gen::<f64>(); // (0, 1]
    let u2 = rng.gen::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

impl PaperGenerator {
    /// Checks every parameter and that at least one job would be drawn.
    pub fn validate(&self) -> Result<(), FluidError> {
        let positive = |field: &str, x: f64| {
            if x.is_finite() && x > 0.0 {
                Ok(())
            } else {
                Err(FluidError::invalid(
                    field,
                    x,
                    "expected a finite number > 0",
                ))
            }
        };
        positive("platform.bandwidth", self.bandwidth)?;
        positive("platform.horizon", self.horizon)?;
        if !(self.omega > 0.0 && self.omega < 1.0) {
            return Err(FluidError::invalid(
                "generator.omega",
                self.omega,
                "expected a load in (0, 1)",
            ));
        }
        if !(self.noise.is_finite() && (0.0..1.0).contains(&self.noise)) {
            return Err(FluidError::invalid(
                "generator.noise",
                self.noise,
                "expected a bound in [0, 1)",
            ));
        }
        for (i, g) in self.groups.iter().enumerate() {
            positive(&format!("generator.group[{i}].mean"), g.mean)?;
            if !(g.sd.is_finite() && g.sd >= 0.0) {
                return Err(FluidError::invalid(
                    format!("generator.group[{i}].sd"),
                    g.sd,
                    "expected a finite number ≥ 0",
                ));
            }
        }
        if self.groups.iter().all(|g| g.count == 0) {
            return Err(FluidError::NoJobs {
                context: "every generator group has count 0".to_string(),
            });
        }
        Ok(())
    }

    /// Draws one workload with `seed`.
    pub fn generate(&self, seed: u64) -> Result<Workload, FluidError> {
        self.validate()?;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        struct Drawn {
            group: usize,
            w: f64,
            release: f64,
            u: f64,
        }
        let mut drawn = Vec::new();
        for (gi, g) in self.groups.iter().enumerate() {
            for _ in 0..g.count {
                let w = loop {
                    let w = g.mean + g.sd * standard_normal(&mut rng);
                    if w > 0.0 {
                        break w;
                    }
                };
                let release = rng.gen::<f64>() * w;
                let u = rng.gen::<f64>();
                drawn.push(Drawn {
                    group: gi,
                    w,
                    release,
                    u,
                });
            }
        }
        let sum_u: f64 = drawn.iter().map(|d| d.u).sum();
        let b = self.noise;
        let noise = |rng: &mut ChaCha8Rng| {
            if b > 0.0 {
                1.0 + rng.gen_range(-b..=b)
            } else {
                1.0
            }
        };
        let jobs = drawn
            .iter()
            .map(|d| {
                // All u = 0 has probability zero; share the load equally then.
                let alpha = if sum_u > 0.0 {
                    self.omega * d.u / sum_u
                } else {
                    self.omega / drawn.len() as f64
                };
                let n = ((self.horizon / d.w).round() as usize).max(1);
                let (t_cpu, t_io) = ((1.0 - alpha) * d.w, alpha * d.w);
                let mut cpu = Vec::with_capacity(n);
                let mut volume = Vec::with_capacity(n);
                for _ in 0..n {
                    cpu.push(t_cpu * noise(&mut rng));
                    volume.push(t_io * self.bandwidth * noise(&mut rng));
                }
                Job {
                    group: d.group,
                    release: d.release,
                    cpu,
                    volume,
                    class_w_iter: self.groups[d.group].mean,
                    peak: None,
                    weight: None,
                }
            })
            .collect();
        let workload = Workload {
            bandwidth: self.bandwidth,
            window: self.window,
            jobs,
            groups: self.groups.iter().map(|g| g.name.clone()).collect(),
        };
        workload.validate()?;
        Ok(workload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn three_profile(n_h: usize) -> PaperGenerator {
        let g = |name: &str, count, mean: f64| GroupSpec {
            name: name.to_string(),
            count,
            mean,
            sd: mean / 10.0,
        };
        PaperGenerator {
            bandwidth: 1.0,
            horizon: 20_000.0,
            omega: 0.8,
            noise: 0.0,
            window: None,
            groups: vec![
                g("H", n_h, 10.0),
                g("M", 20, 100.0),
                g("L", 40 - n_h, 1000.0),
            ],
        }
    }

    #[test]
    fn loads_sum_to_omega_and_phases_follow_w() {
        let w = three_profile(10).generate(7).unwrap();
        assert_eq!(w.jobs.len(), 60);
        let alpha_sum: f64 = w
            .jobs
            .iter()
            .map(|j| j.volume[0] / w.bandwidth / (j.cpu[0] + j.volume[0] / w.bandwidth))
            .sum();
        assert!((alpha_sum - 0.8).abs() < 1e-12, "{alpha_sum}");
        for j in &w.jobs {
            let wj = j.cpu[0] + j.volume[0];
            assert!(j.release >= 0.0 && j.release <= wj);
            assert_eq!(j.iterations(), ((20_000.0 / wj).round() as usize).max(1));
            // No noise: every iteration identical.
            assert!(j.cpu.iter().all(|&c| c == j.cpu[0]));
        }
        assert_eq!(w.jobs.iter().filter(|j| j.group == 0).count(), 10);
        assert_eq!(w.jobs[0].class_w_iter, 10.0);
        assert_eq!(w.jobs[59].class_w_iter, 1000.0);
    }

    #[test]
    fn same_seed_same_workload_other_seed_other_workload() {
        let g = three_profile(5);
        assert_eq!(g.generate(1).unwrap(), g.generate(1).unwrap());
        assert_ne!(g.generate(1).unwrap(), g.generate(2).unwrap());
    }

    #[test]
    fn noise_stays_within_its_bound() {
        let mut g = three_profile(3);
        g.noise = 0.1;
        let w = g.generate(3).unwrap();
        let j = &w.jobs[0];
        let base_total = j.cpu.iter().sum::<f64>() / j.iterations() as f64;
        for &c in &j.cpu {
            assert!(c >= base_total * 0.85 && c <= base_total * 1.15);
        }
        assert!(j.cpu.iter().any(|&c| c != j.cpu[0]));
    }

    #[test]
    fn bad_generators_name_the_problem() {
        let mut g = three_profile(1);
        g.omega = 1.2;
        assert!(g
            .generate(1)
            .unwrap_err()
            .to_string()
            .contains("generator.omega = 1.2"));
        let mut g = three_profile(1);
        g.groups[1].mean = -3.0;
        assert!(g
            .generate(1)
            .unwrap_err()
            .to_string()
            .contains("group[1].mean"));
        let mut g = three_profile(1);
        for gr in &mut g.groups {
            gr.count = 0;
        }
        assert!(g.generate(1).unwrap_err().to_string().contains("no jobs"));
        let mut g = three_profile(1);
        g.bandwidth = -5.0;
        assert!(g
            .generate(1)
            .unwrap_err()
            .to_string()
            .contains("platform.bandwidth = -5"));
    }
}
