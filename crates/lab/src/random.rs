//! `iosets experiment random`: the real policies against the fluid simulator on random periodic
//! workloads, through the mount.
//!
//! # The workloads (seed 001's generator, scaled in time)
//! Per workload (seed `s`, ChaCha8): the platform's I/O load `ω ~ U[0.5, 1.2]`; then per job, in
//! order: its class (the first three jobs one of each, the others `U{high, medium, low}`), its
//! period `w ~ N(mean, mean / 10)` with seed 001's means 10 s, 100 s and 1000 s times the time
//! factor, its writer processes `U{1..8}`, its release `~ U[0, min(w, RELEASE_MAX_S)]` and
//! `u ~ U[0, 1]`. Its I/O share is `α = ω · u / Σ u` (at most [`ALPHA_MAX`]), its volume per
//! phase `α · w · B` rounded to whole MiB per process (at least 1 MiB: a job whose volume is
//! smaller than one MiB per process gets fewer processes), and its compute phase the rest of
//! its period. Releases are capped so that a run stays short (seed 001 draws them in `[0, w]`);
//! the metrics window starts after the last release.
//!
//! # What is compared
//! Each workload runs under each configuration ([`Config`]) through the same machinery as seed
//! 004's experiment (`cluster`), and the simulator predicts each on the same workload
//! (`analysis::predict`: timeorder ≈ fair-share, clairvoyant ≈ set-10, auto ≈
//! set-10:online:stamps), with the `iosets` policy's bounds on a turn as the run sets them
//! (the `fluid` and `writers` models) and without (`unbounded`, the paper's rule: a job keeps
//! its set for its whole phase). Per workload and configuration: the four metrics measured and
//! predicted; per class, the I/O slowdown measured and predicted (where the real phases lose
//! time the model does not). The summary counts, over the workloads: measured within 10 % of
//! the simulator on all four metrics, per configuration; where the simulator puts set-10 more
//! than 3 % ahead of fair-share on a metric, clairvoyant ahead of timeorder on it; auto within
//! 5 % of clairvoyant on all four.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use iosets_sim::fluid::generator::standard_normal;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::seed004::analysis::{self, Model, Turns, METRIC_KEYS};
use crate::seed004::plan::{self, Config, Kind, Plan, Shape, MIB};
use crate::seed004::{execute, order_inside_sets, print_exclusions, Outcome, Settings};

/// Seed 001's three profiles: class, mean period (s) at full scale.
const PROFILES: [(&str, f64); 3] = [("high", 10.0), ("medium", 100.0), ("low", 1000.0)];
/// The range of the platform's I/O load `ω`.
const OMEGA: (f64, f64) = (0.5, 1.2);
/// The largest I/O share of one job (its compute phase is at least the rest).
pub(crate) const ALPHA_MAX: f64 = 0.8;
/// Most writer processes per job.
const MAX_PROCS: u32 = 8;
/// The latest release, seconds after the launch (seed 001: up to one period).
const RELEASE_MAX_S: f64 = 2.0;
/// Metrics: measured within this of the simulator counts as faithful.
const FIDELITY: f64 = 0.10;
/// Metrics: auto within this of clairvoyant.
const AUTO_CLOSE: f64 = 0.05;
/// A predicted gain of set-10 over fair-share larger than this must be seen for real.
const GAIN_SEEN: f64 = 0.03;

/// `iosets experiment random` flags.
#[derive(Debug, Args)]
pub(crate) struct RandomArgs {
    /// Workloads to draw and run.
    #[arg(long, default_value_t = 20)]
    workloads: u64,
    /// The first workload's seed; workload k has seed FIRST + k.
    #[arg(long, value_name = "FIRST", default_value_t = 1)]
    first_seed: u64,
    /// Configurations to run, comma-separated: timeorder, clairvoyant, auto, auto-error.
    #[arg(long, default_value = "timeorder,clairvoyant,auto")]
    configs: String,
    /// Jobs per workload (at least 3: one per class).
    #[arg(long, default_value_t = 8)]
    jobs: usize,
    /// Data servers (1 to 8); each emulates device/K MiB/s.
    #[arg(long, default_value_t = 2)]
    servers: usize,
    /// Time factor on seed 001's periods (10 s, 100 s, 1000 s): the default makes them
    /// 0.2 s, 2 s and 20 s, each 0.2 decades below the edge of its Set-10 set (a period
    /// measured 1.58 times longer than the nominal one, under contention, moves a job up a set).
    #[arg(long, default_value = "1/50", allow_negative_numbers = true)]
    scale: String,
    /// Length of the metrics window, seconds (it starts after the last release).
    #[arg(long, default_value_t = 40.0, allow_negative_numbers = true)]
    window_s: f64,
    /// The aggregate emulated device, MiB/s.
    #[arg(long, default_value_t = 110.0, allow_negative_numbers = true)]
    device_mib_s: f64,
    /// The iosets policy's anticipation, ms (as `experiment seed004 --hold-idle-ms`).
    #[arg(long, default_value_t = 20)]
    hold_idle_ms: u64,
    /// The mount's striping chunk, KiB (64 to 65536): the size of the requests the servers
    /// see for the applications' 1 MiB writes, and how many servers one writer reaches.
    #[arg(long, default_value_t = 1024)]
    chunk_kib: u64,
    /// An option of the `iosets` policy for the clairvoyant and auto configurations, over the
    /// experiment's own (`order`, `hold_idle_ms`); repeatable. The models see the bounds it
    /// sets on a turn (`max_exclusive_ms`, `unknown_hold_ms`) and nothing else.
    #[arg(long = "iosets-opt", value_name = "KEY=VALUE")]
    iosets_opt: Vec<String>,
    /// Output directory (default: ./random-YYYYMMDD-HHMMSS).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Run nothing: analyse again the runs an earlier `--out DIR` left (same flags).
    #[arg(long, value_name = "DIR", conflicts_with = "out")]
    analyze: Option<PathBuf>,
}

/// One drawn workload.
#[derive(Clone, Debug)]
pub(crate) struct Drawn {
    /// Its seed.
    pub(crate) seed: u64,
    /// The load drawn.
    pub(crate) omega_drawn: f64,
    /// The load of the jobs as they run (whole MiB, at least one per process): `Σ t_io / w`.
    pub(crate) omega: f64,
    /// The plan: one kind per job.
    pub(crate) plan: Plan,
}

/// What a workload is drawn from.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Params {
    /// The time factor.
    pub(crate) scale: f64,
    /// Jobs.
    pub(crate) jobs: usize,
    /// Servers.
    pub(crate) servers: usize,
    /// The aggregate device, MiB/s.
    pub(crate) device_mib_s: f64,
    /// The window's length, seconds.
    pub(crate) window_s: f64,
    /// The iosets policy's anticipation.
    pub(crate) hold_idle_ms: u64,
    /// The mount's striping chunk, KiB.
    pub(crate) chunk_kib: u64,
}

impl Params {
    fn check(&self) -> Result<()> {
        if !(3..=32).contains(&self.jobs) {
            bail!(
                "--jobs {}: expected 3 to 32 (one per class at least)",
                self.jobs
            );
        }
        if !(1..=8).contains(&self.servers) {
            bail!("--servers {}: expected 1 to 8", self.servers);
        }
        if !(self.device_mib_s.is_finite() && (1.0..=100_000.0).contains(&self.device_mib_s)) {
            bail!(
                "--device-mib-s {}: expected 1 to 100000 MiB/s",
                self.device_mib_s
            );
        }
        if !(64..=65_536).contains(&self.chunk_kib) {
            bail!("--chunk-kib {}: expected 64 to 65536 KiB", self.chunk_kib);
        }
        let longest = PROFILES[2].1 * self.scale;
        if !(self.window_s.is_finite() && self.window_s >= longest && self.window_s <= 86_400.0) {
            bail!(
                "--window-s {}: expected at least the low class's period ({longest:.2} s at \
                 this --scale) and at most a day",
                self.window_s
            );
        }
        Ok(())
    }
}

/// Draws workload `seed` (see the [module docs](self)).
pub(crate) fn draw(seed: u64, p: Params) -> Result<Drawn> {
    p.check()?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let omega_drawn = rng.gen_range(OMEGA.0..=OMEGA.1);
    struct Job {
        class: usize,
        w: f64,
        procs: u32,
        release: f64,
        u: f64,
    }
    let mut jobs = Vec::with_capacity(p.jobs);
    for i in 0..p.jobs {
        let class = if i < PROFILES.len() {
            i
        } else {
            rng.gen_range(0..PROFILES.len())
        };
        let mean = PROFILES[class].1 * p.scale;
        let w = loop {
            let w = mean * (1.0 + 0.1 * standard_normal(&mut rng));
            if w > 0.0 {
                break w;
            }
        };
        let procs = rng.gen_range(1..=MAX_PROCS);
        let release = rng.gen::<f64>() * w.min(RELEASE_MAX_S);
        let u = rng.gen::<f64>();
        jobs.push(Job {
            class,
            w,
            procs,
            release,
            u,
        });
    }
    let sum_u: f64 = jobs.iter().map(|j| j.u).sum::<f64>().max(f64::MIN_POSITIVE);
    let first = jobs.iter().map(|j| j.release).fold(f64::INFINITY, f64::min);
    let device = p.device_mib_s * MIB as f64;
    let mut kinds = Vec::with_capacity(jobs.len());
    let mut omega = 0.0;
    for j in &jobs {
        let alpha = (omega_drawn * j.u / sum_u).min(ALPHA_MAX);
        let mib = alpha * j.w * device / MIB as f64;
        // Whole MiB per process, at least one: fewer processes when the volume is small.
        let procs = j.procs.min(mib.floor().max(1.0) as u32);
        let per_proc = (mib / f64::from(procs)).round().max(1.0) as u64;
        let io_alone = (per_proc * u64::from(procs) * MIB) as f64 / device;
        let compute = j.w - io_alone;
        if compute <= 0.0 {
            bail!(
                "workload {seed}: a {}-class job's I/O phase ({io_alone:.3} s alone, whole \
                 MiB per process) fills its period ({:.3} s): use a larger --scale",
                PROFILES[j.class].0,
                j.w
            );
        }
        omega += io_alone / j.w;
        kinds.push(Kind {
            name: PROFILES[j.class].0,
            jobs: 1,
            compute_s: compute,
            mib_per_proc: per_proc,
            period_s: j.w,
            procs,
            release_s: j.release - first,
        });
    }
    let last = kinds.iter().map(|k| k.release_s).fold(0.0, f64::max);
    let begin = last + 1.0;
    let shape = Shape {
        scale: p.scale,
        servers: p.servers,
        device_mib_s: p.device_mib_s,
        procs: MAX_PROCS,
        low_jobs: kinds.iter().filter(|k| k.name == "low").count(),
        low_load: 1.0,
        window: (begin, begin + p.window_s),
        hold_idle_ms: p.hold_idle_ms,
        chunk_kib: p.chunk_kib,
    };
    let plan = Plan::of_kinds(shape, kinds, (begin, begin + p.window_s));
    Ok(Drawn {
        seed,
        omega_drawn,
        omega,
        plan,
    })
}

/// The simulator's models, in the order of [`Compared::predicted`]: the fluid and the writers
/// model (`analysis::Model`) of the policies as the runs set them, the `iosets` policy's bounds
/// on a turn included (`analysis::Turns::Policy`); and the writers model under the paper's rule,
/// a job keeping its set for its whole phase (`unbounded`, `analysis::Turns::Paper`).
pub(crate) const MODELS: [&str; 3] = ["fluid", "writers", "unbounded"];

/// The efficiency of a phase alone over every run of `o`: the median, over the phases that
/// shared the device with no other job's, of what they moved over their job's writers' peak
/// (`analysis::writers_peak`); 1 when no phase ran alone. At most 1.
pub(crate) fn efficiency(plan: &Plan, o: &Outcome) -> f64 {
    let (servers, chunk) = (plan.shape.servers, plan.shape.chunk_kib * 1024);
    let device = plan.device_bytes_s();
    let ratios: Vec<f64> = o
        .logs
        .iter()
        .flat_map(|l| {
            crate::seed004::phaselog::unshared_bandwidths_of_jobs(&l.jobs)
                .into_iter()
                .filter_map(|(i, bw)| {
                    let job = l.jobs[i].job;
                    let kind = plan.kind_of(job)?;
                    Some(bw / analysis::writers_peak(job, kind, servers, chunk, device))
                })
        })
        .filter(|r| r.is_finite() && *r > 0.0)
        .collect();
    crate::seed004::phaselog::median(&ratios).map_or(1.0, |m| m.min(1.0))
}

/// One configuration of one workload: measured and predicted.
#[derive(Clone, Debug)]
pub(crate) struct Compared {
    /// The configuration.
    pub(crate) config: Config,
    /// The four metrics measured, when the run gave them.
    pub(crate) measured: Option<[f64; 4]>,
    /// The four metrics the simulator predicts, per model of [`MODELS`].
    pub(crate) predicted: [Option<[f64; 4]>; 3],
    /// Per class: (class, measured mean I/O slowdown, predicted mean I/O slowdown per model).
    pub(crate) classes: Vec<(&'static str, f64, [f64; 3])>,
    /// The writers model's efficiency ([`efficiency`]).
    pub(crate) efficiency: f64,
}

impl Compared {
    /// Whether every metric is within `FIDELITY` of model `m`'s prediction.
    pub(crate) fn faithful(&self, m: usize) -> bool {
        match (self.measured, self.predicted[m]) {
            (Some(m), Some(p)) => m
                .iter()
                .zip(&p)
                .all(|(m, p)| ((m - p) / p).abs() <= FIDELITY),
            _ => false,
        }
    }
}

/// `(a - b) / b`.
fn rel(a: f64, b: f64) -> f64 {
    (a - b) / b
}

/// Whether metric `i` of `a` is better than `b` by more than `by` (stretches and slowdown
/// lower, utilization higher).
fn ahead(i: usize, a: f64, b: f64, by: f64) -> bool {
    if i == 3 {
        rel(a, b) > by
    } else {
        rel(a, b) < -by
    }
}

/// The comparison of every configuration of one workload's outcome.
pub(crate) fn compare(plan: &Plan, o: &Outcome) -> Vec<Compared> {
    let device = plan.device_bytes_s();
    let jobs = plan.jobs();
    let window = plan.window.1 - plan.window.0;
    let eta = efficiency(plan, o);
    let writers = Model::Writers { efficiency: eta };
    let models = [
        (Model::Fluid, Turns::Policy),
        (writers, Turns::Policy),
        (writers, Turns::Paper),
    ];
    o.configs
        .iter()
        .map(|&config| {
            let run = o.metrics.iter().find(|m| m.config == config);
            let measured = run.and_then(|m| m.values());
            let sims = models.map(|(model, turns)| {
                analysis::predict_jobs(plan, config, o.bandwidth.bytes_s, device, model, turns).ok()
            });
            let mut classes = Vec::new();
            for class in plan.classes() {
                let mut m = Vec::new();
                let mut s = [Vec::new(), Vec::new(), Vec::new()];
                for (i, &(job, kind)) in jobs.iter().enumerate() {
                    if kind.name != class {
                        continue;
                    }
                    if let Some(Ok(metrics)) = run.map(|r| &r.metrics) {
                        if let Some(j) = metrics.jobs.iter().find(|j| j.job == job) {
                            if j.io_slowdown.is_finite() {
                                m.push(j.io_slowdown);
                            }
                        }
                    }
                    for (sim, s) in sims.iter().zip(&mut s) {
                        if let Some(x) = sim.as_ref().and_then(|(_, w)| w[i].io_slowdown(window)) {
                            s.push(x);
                        }
                    }
                }
                let mean = |xs: &[f64]| analysis::spread(xs).0;
                classes.push((class, mean(&m), s.map(|s| mean(&s))));
            }
            Compared {
                config,
                measured,
                predicted: sims.map(|s| s.map(|(v, _)| v)),
                classes,
                efficiency: eta,
            }
        })
        .collect()
}

/// The summary's counts over every workload.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    /// Per configuration: workloads compared, and those within `FIDELITY` on all four metrics,
    /// per model of [`MODELS`].
    pub(crate) faithful: Vec<(Config, usize, [usize; 3])>,
    /// Per model: workloads where it puts set-10 ahead of fair-share by more than 3 % on some
    /// metric, and those where clairvoyant is measured ahead of timeorder on every such metric.
    pub(crate) gains: [(usize, usize); 3],
    /// Workloads with auto and clairvoyant, and those where auto is within 5 % on all four.
    pub(crate) auto_close: (usize, usize),
}

/// Counts `results` (each workload's comparisons).
pub(crate) fn tally(results: &[(Drawn, Vec<Compared>)]) -> Tally {
    let mut t = Tally::default();
    let configs: Vec<Config> = results
        .first()
        .map(|(_, c)| c.iter().map(|c| c.config).collect())
        .unwrap_or_default();
    for c in configs {
        let of = results
            .iter()
            .filter_map(|(_, cs)| cs.iter().find(|x| x.config == c));
        let n = of.clone().count();
        let ok = [0, 1, 2].map(|m| of.clone().filter(|x| x.faithful(m)).count());
        t.faithful.push((c, n, ok));
    }
    for (_, cs) in results {
        let get = |c: Config| cs.iter().find(|x| x.config == c);
        if let (Some(to), Some(cl)) = (get(Config::Timeorder), get(Config::Clairvoyant)) {
            for (m, gains) in t.gains.iter_mut().enumerate() {
                let (Some(pf), Some(ps), Some(mt), Some(mc)) =
                    (to.predicted[m], cl.predicted[m], to.measured, cl.measured)
                else {
                    continue;
                };
                let promised: Vec<usize> = (0..4)
                    .filter(|&i| ahead(i, ps[i], pf[i], GAIN_SEEN))
                    .collect();
                if !promised.is_empty() {
                    gains.0 += 1;
                    if promised.iter().all(|&i| ahead(i, mc[i], mt[i], 0.0)) {
                        gains.1 += 1;
                    }
                }
            }
        }
        if let (Some(cl), Some(au)) = (get(Config::Clairvoyant), get(Config::Auto)) {
            if let (Some(mc), Some(ma)) = (cl.measured, au.measured) {
                t.auto_close.0 += 1;
                if ma
                    .iter()
                    .zip(&mc)
                    .all(|(a, c)| rel(*a, *c).abs() <= AUTO_CLOSE)
                {
                    t.auto_close.1 += 1;
                }
            }
        }
    }
    t
}

/// The CSV of every metric of every configuration of every workload, beside both models.
pub(crate) fn metrics_csv(results: &[(Drawn, Vec<Compared>)]) -> String {
    let mut out = String::from(
        "seed,omega,config,metric,measured,fluid,fluid_diff_pct,writers,writers_diff_pct,\
         unbounded,unbounded_diff_pct\n",
    );
    for (d, cs) in results {
        for c in cs {
            for (i, key) in METRIC_KEYS.iter().enumerate() {
                let m = c.measured.map_or(f64::NAN, |v| v[i]);
                let _ = write!(
                    out,
                    "{},{:.4},{},{key},{m:.4}",
                    d.seed,
                    d.omega,
                    c.config.name()
                );
                for p in c.predicted {
                    let p = p.map_or(f64::NAN, |v| v[i]);
                    let _ = write!(out, ",{p:.4},{:.2}", rel(m, p) * 100.0);
                }
                out.push('\n');
            }
        }
    }
    out
}

/// The CSV of each class's mean I/O slowdown, measured and per model.
pub(crate) fn classes_csv(results: &[(Drawn, Vec<Compared>)]) -> String {
    let mut out = String::from(
        "seed,config,class,measured_io_slowdown,fluid_io_slowdown,writers_io_slowdown,\
         unbounded_io_slowdown\n",
    );
    for (d, cs) in results {
        for c in cs {
            for &(class, m, [f, w, u]) in &c.classes {
                let _ = writeln!(
                    out,
                    "{},{},{class},{m:.4},{f:.4},{w:.4},{u:.4}",
                    d.seed,
                    c.config.name()
                );
            }
        }
    }
    out
}

/// The CSV of every job of every workload.
pub(crate) fn workloads_csv(results: &[(Drawn, Vec<Compared>)]) -> String {
    let mut out = String::from(
        "seed,omega,window_begin_s,window_end_s,job,class,period_s,procs,mib_per_proc,compute_s,\
         release_s,set10,peak_mib_s,efficiency\n",
    );
    for (d, cs) in results {
        let eta = cs.first().map_or(f64::NAN, |c| c.efficiency);
        let (servers, device) = (d.plan.shape.servers, d.plan.device_bytes_s());
        for (job, k) in d.plan.jobs() {
            let _ = writeln!(
                out,
                "{},{:.4},{:.4},{:.4},{job},{},{:.4},{},{},{:.4},{:.4},{},{:.1},{eta:.3}",
                d.seed,
                d.omega,
                d.plan.window.0,
                d.plan.window.1,
                k.name,
                k.period_s,
                k.procs,
                k.mib_per_proc,
                k.compute_s,
                k.release_s,
                d.plan.set10(k).0,
                analysis::writers_peak(job, k, servers, d.plan.shape.chunk_kib * 1024, device)
                    / MIB as f64
            );
        }
    }
    out
}

/// The summary, one line per count.
pub(crate) fn summary(t: &Tally) -> String {
    let mut out = String::new();
    for (m, model) in MODELS.iter().enumerate() {
        for (c, n, ok) in &t.faithful {
            let _ = writeln!(
                out,
                "{model} model: {} against {}: within {:.0} % on all four metrics in {} of \
                 {n} workloads",
                c.name(),
                c.heuristic(),
                FIDELITY * 100.0,
                ok[m]
            );
        }
        let _ = writeln!(
            out,
            "{model} model: set-10 predicted > {:.0} % ahead of fair-share on some metric in {} \
             workloads; clairvoyant measured ahead of timeorder on every such metric in {}",
            GAIN_SEEN * 100.0,
            t.gains[m].0,
            t.gains[m].1
        );
    }
    if t.auto_close.0 > 0 {
        let _ = writeln!(
            out,
            "auto within {:.0} % of clairvoyant on all four metrics in {} of {} workloads",
            AUTO_CLOSE * 100.0,
            t.auto_close.1,
            t.auto_close.0
        );
    }
    out
}

/// One line per configuration of a workload: each metric measured, and its difference from
/// each model's prediction.
fn workload_lines(d: &Drawn, cs: &[Compared]) -> String {
    let mut out = String::new();
    for c in cs {
        let _ = write!(out, "  seed {} {:<11}", d.seed, c.config.name());
        for (i, key) in ["max", "geo", "slow", "util"].iter().enumerate() {
            let m = c.measured.map_or(f64::NAN, |v| v[i]);
            let [f, w, u] = c.predicted.map(|p| p.map_or(f64::NAN, |v| v[i]));
            let _ = write!(
                out,
                "  {key} {m:.3} (fluid {:+.0}%, writers {:+.0}%, unbounded {:+.0}%)",
                rel(m, f) * 100.0,
                rel(m, w) * 100.0,
                rel(m, u) * 100.0
            );
        }
        out.push('\n');
    }
    out
}

/// `--iosets-opt KEY=VALUE`s, checked against the policy's tunables before anything runs.
fn iosets_options(given: &[String]) -> Result<Vec<(String, String)>> {
    let bad = |e: iosets_policy::PolicyError| anyhow::anyhow!("--iosets-opt: {e}");
    let options = iosets_policy::tunables::parse_pairs(given).map_err(bad)?;
    iosets_policy::registry::build("iosets", &options).map_err(bad)?;
    Ok(options)
}

/// `iosets experiment random`.
pub(crate) fn random(a: &RandomArgs) -> Result<()> {
    let configs = Config::parse_list(&a.configs)?;
    let scale = plan::parse_scale(&a.scale)?;
    if !(1..=1000).contains(&a.workloads) {
        bail!("--workloads {}: expected 1 to 1000", a.workloads);
    }
    let params = Params {
        scale,
        jobs: a.jobs,
        servers: a.servers,
        device_mib_s: a.device_mib_s,
        window_s: a.window_s,
        hold_idle_ms: a.hold_idle_ms,
        chunk_kib: a.chunk_kib,
    };
    let options = iosets_options(&a.iosets_opt)?;
    let drawn = (0..a.workloads)
        .map(|k| {
            let mut d = draw(a.first_seed + k, params)?;
            d.plan.iosets_options.clone_from(&options);
            Ok(d)
        })
        .collect::<Result<Vec<_>>>()?;
    let out = match (&a.analyze, &a.out) {
        (Some(dir), _) => {
            if !dir.is_dir() {
                bail!(
                    "--analyze {}: no such directory (give one an earlier `iosets experiment \
                     random --out DIR` wrote)",
                    dir.display()
                );
            }
            dir.clone()
        }
        (None, Some(dir)) => dir.clone(),
        (None, None) => PathBuf::from(format!("random-{}", crate::rig::timestamp())),
    };
    let per_run = drawn
        .iter()
        .map(|d| d.plan.expected_run_s() + 3.0)
        .sum::<f64>()
        * configs.len() as f64;
    println!(
        "iosets experiment random: {} workload{} of {} jobs (seed 001's three classes, periods \
         {:.2} s / {:.2} s / {:.2} s), {} server{} of {:.1} MiB/s, through one mount",
        a.workloads,
        if a.workloads == 1 { "" } else { "s" },
        a.jobs,
        PROFILES[0].1 * scale,
        PROFILES[1].1 * scale,
        PROFILES[2].1 * scale,
        a.servers,
        if a.servers == 1 { "" } else { "s" },
        a.device_mib_s / a.servers as f64
    );
    println!(
        "  configurations: {}{}; {}; output {}",
        configs
            .iter()
            .map(|c| c.name())
            .collect::<Vec<_>>()
            .join(", "),
        options
            .iter()
            .map(|(k, v)| format!(" {k}={v}"))
            .collect::<String>(),
        if a.analyze.is_some() {
            "nothing to run (--analyze)".to_string()
        } else {
            format!("about {:.0} minutes in all", per_run / 60.0)
        },
        out.display()
    );
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let mut results = Vec::new();
    for d in drawn {
        let dir = out.join(format!("w{}", d.seed));
        println!(
            "workload seed {}: ω {:.2} (drawn {:.2}), window [{:.1} s, {:.1} s]; {}",
            d.seed,
            d.omega,
            d.omega_drawn,
            d.plan.window.0,
            d.plan.window.1,
            d.plan
                .jobs()
                .iter()
                .map(|(j, k)| format!("{j}:{}×{}", &k.name[..1], k.procs))
                .collect::<Vec<_>>()
                .join(" ")
        );
        if a.analyze.is_some() && !dir.join("runs").is_dir() {
            bail!(
                "--analyze: {} has no runs/ (same --first-seed and --workloads?)",
                dir.display()
            );
        }
        let settings = Settings {
            plan: d.plan.clone(),
            configs: configs.clone(),
            repeat: 1,
            out: dir,
            keep: false,
            kill: None,
            analyze: a.analyze.is_some(),
            order: order_inside_sets(),
        };
        let o = execute(&settings)?;
        print_exclusions(&o);
        let cs = compare(&d.plan, &o);
        println!(
            "  B {:.1} MiB/s; a phase alone moved {:.0} % of its writers' peak (median)",
            o.bandwidth.bytes_s / MIB as f64,
            cs.first().map_or(f64::NAN, |c| c.efficiency) * 100.0
        );
        print!("{}", workload_lines(&d, &cs));
        results.push((d, cs));
    }
    let t = tally(&results);
    let text = summary(&t);
    println!();
    print!("{text}");
    let write = |name: &str, body: String| -> Result<PathBuf> {
        let path = out.join(name);
        std::fs::write(&path, body).with_context(|| format!("writing {}", path.display()))?;
        Ok(path)
    };
    let written = [
        write("metrics.csv", metrics_csv(&results))?,
        write("classes.csv", classes_csv(&results))?,
        write("workloads.csv", workloads_csv(&results))?,
        write("summary.txt", text)?,
    ];
    println!("wrote:");
    for w in written {
        println!("  {}", w.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iosets_options_are_checked_before_anything_runs() {
        let ok = iosets_options(&["unknown_hold_ms=60000".into(), " order = phase".into()]);
        assert_eq!(
            ok.unwrap(),
            vec![
                ("unknown_hold_ms".to_string(), "60000".to_string()),
                ("order".to_string(), "phase".to_string())
            ]
        );
        for bad in [
            "unknown_hold_ms",
            "=3",
            "no_such_knob=1",
            "unknown_hold_ms=soon",
        ] {
            let err = iosets_options(&[bad.into()]).unwrap_err().to_string();
            assert!(err.starts_with("--iosets-opt"), "{bad}: {err}");
        }
        let twice = [
            "unknown_hold_ms=1".to_string(),
            "unknown_hold_ms=2".to_string(),
        ];
        let err = iosets_options(&twice).unwrap_err().to_string();
        assert!(
            err.starts_with("--iosets-opt") && err.contains("unknown_hold_ms"),
            "{err}"
        );
    }

    fn params() -> Params {
        Params {
            scale: 1.0 / 50.0,
            jobs: 8,
            servers: 2,
            device_mib_s: 110.0,
            window_s: 40.0,
            hold_idle_ms: 20,
            chunk_kib: 1024,
        }
    }

    #[test]
    fn a_seed_always_draws_the_same_workload_of_three_classes() {
        let a = draw(7, params()).unwrap();
        let b = draw(7, params()).unwrap();
        assert_eq!(a.plan.kinds, b.plan.kinds);
        assert_ne!(draw(8, params()).unwrap().plan.kinds, a.plan.kinds);
        assert_eq!(a.plan.classes(), vec!["high", "medium", "low"]);
        assert_eq!(a.plan.jobs().len(), 8);
    }

    #[test]
    fn jobs_keep_their_periods_whole_mib_and_the_drawn_load() {
        for seed in 1..=50 {
            let d = draw(seed, params()).unwrap();
            assert!((OMEGA.0..=OMEGA.1).contains(&d.omega_drawn));
            let b = d.plan.device_bytes_s();
            let mut releases = Vec::new();
            for (_, k) in d.plan.jobs() {
                assert!((1..=MAX_PROCS).contains(&k.procs), "{k:?}");
                assert!(k.mib_per_proc >= 1, "{k:?}");
                let io = d.plan.phase_bytes(k) as f64 / b;
                assert!((k.compute_s + io - k.period_s).abs() < 1e-9, "{k:?}");
                assert!(k.compute_s > 0.0);
                releases.push(k.release_s);
                // Its set is its class's: periods keep their order of magnitude.
                let set = d.plan.set10(k).0;
                let want = match k.name {
                    "high" => -1,
                    "medium" => 0,
                    _ => 1,
                };
                assert!((set - want).abs() <= 1, "{k:?} in set {set}");
            }
            // Releases start at 0 and end before the window.
            assert_eq!(releases.iter().copied().fold(f64::INFINITY, f64::min), 0.0);
            assert!(releases.iter().all(|&r| r < d.plan.window.0));
            // Rounding to whole MiB moves the load, but not far above what was drawn (the
            // smallest phases round up to 1 MiB per process).
            assert!(d.omega > 0.3 && d.omega < d.omega_drawn + 0.6, "{d:?}");
        }
    }

    #[test]
    fn nonsense_parameters_are_refused_with_their_flag() {
        let mut p = params();
        p.jobs = 2;
        assert!(draw(1, p).unwrap_err().to_string().contains("--jobs 2"));
        let mut p = params();
        p.window_s = 3.0;
        assert!(draw(1, p).unwrap_err().to_string().contains("--window-s 3"));
        let mut p = params();
        p.window_s = f64::NAN;
        assert!(draw(1, p).is_err());
        let mut p = params();
        p.servers = 0;
        assert!(draw(1, p).unwrap_err().to_string().contains("--servers 0"));
        // A time factor so small that a phase of whole MiB fills a period.
        let mut p = params();
        p.scale = 1.0 / 4000.0;
        p.window_s = 10.0;
        assert!(draw(1, p)
            .unwrap_err()
            .to_string()
            .contains("fills its period"));
    }

    fn compared(config: Config, measured: [f64; 4], predicted: [f64; 4]) -> Compared {
        Compared {
            config,
            measured: Some(measured),
            predicted: [Some(predicted), None, None],
            classes: Vec::new(),
            efficiency: 1.0,
        }
    }

    #[test]
    fn the_tally_counts_fidelity_gains_and_auto() {
        let d = draw(1, params()).unwrap();
        let fair = [2.0, 1.5, 3.0, 0.5];
        let set10 = [1.5, 1.4, 2.95, 0.52];
        let good = vec![
            compared(Config::Timeorder, [2.1, 1.5, 3.0, 0.5], fair),
            compared(Config::Clairvoyant, [1.6, 1.45, 2.9, 0.52], set10),
            compared(Config::Auto, [1.62, 1.45, 2.9, 0.52], set10),
        ];
        // Clairvoyant no better than timeorder on max stretch, where the simulator promised
        // 25 %; auto 20 % off.
        let bad = vec![
            compared(Config::Timeorder, [2.1, 1.5, 3.0, 0.5], fair),
            compared(Config::Clairvoyant, [2.2, 1.45, 2.9, 0.52], set10),
            compared(Config::Auto, [2.64, 1.45, 2.9, 0.52], set10),
        ];
        let t = tally(&[(d.clone(), good), (d, bad)]);
        assert_eq!(t.faithful[0], (Config::Timeorder, 2, [2, 0, 0]));
        assert_eq!(t.faithful[1], (Config::Clairvoyant, 2, [1, 0, 0]));
        assert_eq!(t.gains, [(2, 1), (0, 0), (0, 0)]);
        assert_eq!(t.auto_close, (2, 1));
        let s = summary(&t);
        assert!(
            s.contains(
                "fluid model: clairvoyant against set-10: within 10 % on all four metrics in 1 of 2"
            ),
            "{s}"
        );
    }
}
