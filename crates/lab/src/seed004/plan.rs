//! Seed 004's workload scaled in time, and the configurations it is run under.
//!
//! Seed 004 (§4.2, §5): one high-frequency job (18 s of compute, then 8 processes × 16 MiB,
//! period ≈ 19.2 s at the measured 110 MiB/s) and fifteen low-frequency jobs (360 s, then
//! 8 × 320 MiB, period ≈ 384 s), all started together, metrics over [400 s, 3200 s] after the
//! first application's start. Here every duration is multiplied by a factor `F`: an I/O phase
//! moves what its scaled length moves at the emulated device (whole MiB per process, at least
//! one 1 MiB block each), and the compute phase is the rest of the scaled period, so each job
//! keeps its period and its share of the device when alone.
//!
//! The demo (`iosets demo`) runs the same plan with fewer low-frequency jobs; it lengthens their
//! I/O phases by `15 / low_jobs` (`low_load`) so that the device stays as busy as with fifteen.

use anyhow::{bail, Result};
use iosets_policy::set10::SetMapping;
use iosets_types::Priority;

/// Bytes in a MiB.
pub(crate) const MIB: u64 = 1 << 20;

/// Seed 004's high-frequency job: compute seconds, I/O seconds alone.
const HIGH: (f64, f64) = (18.0, 1.2);
/// Seed 004's low-frequency jobs: compute seconds, I/O seconds alone.
const LOW: (f64, f64) = (360.0, 24.0);
/// Seed 004's metrics window, seconds after the first application's start.
pub(crate) const SEED_WINDOW: (f64, f64) = (400.0, 3200.0);
/// Seed 004's number of low-frequency jobs.
pub(crate) const SEED_LOW_JOBS: usize = 15;
/// How long after `T_end` (seconds, not scaled: it covers the launch of the applications) they
/// stop computing: their last compute phase then runs past `T_end`, and an I/O phase that starts
/// before it is always finished, so every phase inside the window is complete.
const STOP_MARGIN_S: f64 = 1.0;

/// One configuration of the experiment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Config {
    /// `timeorder` on every server: arrival order, the unmodified file system.
    Timeorder,
    /// `iosets` with each job's Set-10 priority written to the mount before it starts.
    Clairvoyant,
    /// `iosets` with priorities the servers detect from the requests they serve.
    Auto,
    /// `auto`, each detected period multiplied by a random factor in [0.5, 1.5].
    AutoError,
}

impl Config {
    /// Every configuration, in the order they are reported.
    pub(crate) const ALL: [Config; 4] = [
        Config::Timeorder,
        Config::Clairvoyant,
        Config::Auto,
        Config::AutoError,
    ];

    /// Its name on the command line and in the outputs.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Config::Timeorder => "timeorder",
            Config::Clairvoyant => "clairvoyant",
            Config::Auto => "auto",
            Config::AutoError => "auto-error",
        }
    }

    /// What it is, in a few words.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Config::Timeorder => "arrival order, the baseline",
            Config::Clairvoyant => "iosets, Set-10 priorities written before the start",
            Config::Auto => "iosets, priorities detected by the servers",
            Config::AutoError => "iosets, detected periods randomly ±50%",
        }
    }

    /// The servers' policy.
    pub(crate) fn policy(self) -> &'static str {
        match self {
            Config::Timeorder => "timeorder",
            _ => "iosets",
        }
    }

    /// The fluid simulator's heuristic that models it (see the module docs of `analysis`):
    /// `timeorder` → `fair-share`; `clairvoyant` → `set-10` (known periods); `auto` →
    /// `set-10:online:stamps`, periods from each job's own phase starts by the servers' rule
    /// (`iosets_period::starts`, the same code), and until then the one shared "new" set at
    /// priority 1/50, as the servers do (`unknown=shared`; seed 004's set of its own per job is
    /// `:own`); `auto-error` → `set-10:error=0.5`, the closest
    /// the simulator has since it cannot combine `:online` with `:error`: the *true* period
    /// times `1 + U[-0.5, 0.5]`, drawn afresh at every I/O phase from the first on (no prior),
    /// where the servers draw one factor per job and behaviour on the *detected* period and use
    /// the shared new set before detection.
    pub(crate) fn heuristic(self) -> &'static str {
        match self {
            Config::Timeorder => "fair-share",
            Config::Clairvoyant => "set-10",
            Config::Auto => "set-10:online:stamps",
            Config::AutoError => "set-10:error=0.5",
        }
    }

    /// Parses a comma-separated list (`timeorder,clairvoyant`), in the order given, each once.
    pub(crate) fn parse_list(list: &str) -> Result<Vec<Config>> {
        let valid = || {
            Config::ALL
                .iter()
                .map(|c| c.name())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut out = Vec::new();
        for name in list.split(',').map(str::trim) {
            let Some(c) = Config::ALL.into_iter().find(|c| c.name() == name) else {
                bail!(
                    "--configs: unknown configuration {name:?}; valid configurations: {}",
                    valid()
                );
            };
            if out.contains(&c) {
                bail!("--configs: {name} is listed twice");
            }
            out.push(c);
        }
        Ok(out)
    }
}

/// Parses and checks a time factor: `1/20`, `0.05` or `5e-2`, in (0, 1].
pub(crate) fn parse_scale(text: &str) -> Result<f64> {
    let t = text.trim();
    let num = |s: &str| s.trim().parse::<f64>().ok();
    let value = match t.split_once('/') {
        Some((n, d)) => num(n).zip(num(d)).map(|(n, d)| n / d),
        None => num(t),
    };
    match value {
        Some(f) if f.is_finite() && f > 0.0 && f <= 1.0 => Ok(f),
        Some(f) => bail!(
            "--scale {text}: the time factor must be in (0, 1] (1 is seed 004's own durations), \
             not {f}"
        ),
        None => bail!("--scale {text}: expected a time factor such as 1/20 or 0.05"),
    }
}

/// One kind of job, scaled.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Kind {
    /// Its class: `high` or `low` in seed 004; `high`, `medium` or `low` in a random workload.
    pub(crate) name: &'static str,
    /// How many jobs of this kind run.
    pub(crate) jobs: usize,
    /// Compute seconds per iteration.
    pub(crate) compute_s: f64,
    /// MiB each process writes per I/O phase.
    pub(crate) mib_per_proc: u64,
    /// The period alone (compute + I/O alone), seconds.
    pub(crate) period_s: f64,
    /// Processes (writer threads) per job.
    pub(crate) procs: u32,
    /// When its jobs start, seconds after the launch (0 in seed 004).
    pub(crate) release_s: f64,
}

/// What the experiment's flags ask for, before scaling.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shape {
    /// The time factor `F`.
    pub(crate) scale: f64,
    /// Data servers.
    pub(crate) servers: usize,
    /// The aggregate emulated device, MiB/s (each server gets `device / servers`).
    pub(crate) device_mib_s: f64,
    /// Processes per job.
    pub(crate) procs: u32,
    /// Low-frequency jobs.
    pub(crate) low_jobs: usize,
    /// Factor on the low-frequency jobs' I/O phases (1 for seed 004; the demo's fewer jobs
    /// carry the load of fifteen).
    pub(crate) low_load: f64,
    /// The metrics window, seconds after the first start, unscaled.
    pub(crate) window: (f64, f64),
    /// The `iosets` policy's anticipation, ms.
    pub(crate) hold_idle_ms: u64,
    /// The mount's striping chunk, KiB (the granularity of the requests the servers see).
    pub(crate) chunk_kib: u64,
}

/// The scaled experiment.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    /// The shape it was made from (`procs` and `low_jobs` are seed 004's; a random workload
    /// gives each kind its own).
    pub(crate) shape: Shape,
    /// The kinds of job, in the order of their ids: seed 004's high-frequency job then its
    /// low-frequency ones; a random workload's jobs, one kind each.
    pub(crate) kinds: Vec<Kind>,
    /// The metrics window, seconds after the first application's start.
    pub(crate) window: (f64, f64),
    /// When the applications stop computing, seconds after their launch.
    pub(crate) stop_after_s: f64,
    /// Options of the `iosets` policy given on the command line, over the experiment's own
    /// (`experiment random --iosets-opt`): for the clairvoyant and auto configurations.
    pub(crate) iosets_options: Vec<(String, String)>,
}

impl Plan {
    /// Scales seed 004 by `shape`; a clear error when the scale cannot hold the workload.
    pub(crate) fn new(shape: Shape) -> Result<Plan> {
        let Shape {
            scale: f,
            servers,
            device_mib_s: device,
            procs,
            low_jobs,
            low_load,
            window,
            ..
        } = shape;
        if !(1..=8).contains(&servers) {
            bail!("--servers {servers}: expected 1 to 8");
        }
        if !(device.is_finite() && (1.0..=100_000.0).contains(&device)) {
            bail!("--device-mib-s {device}: expected 1 to 100000 MiB/s");
        }
        if !(1..=64).contains(&procs) {
            bail!("--procs {procs}: expected 1 to 64 processes per job");
        }
        if !(1..=64).contains(&low_jobs) {
            bail!("--low-jobs {low_jobs}: expected 1 to 64");
        }
        let kind = |name: &'static str, jobs: usize, (cpu, io): (f64, f64), load: f64| {
            let period = (cpu + io) * f;
            let io_s = io * load * f;
            let exact = io_s * device / f64::from(procs);
            let mib = exact.round();
            if mib < 1.0 {
                let min_f = 0.5 * f64::from(procs) / (io * load * device);
                bail!(
                    "--scale {f}: the {name}-frequency job's I/O phase ({io_s:.3} s at \
                     {device} MiB/s over {procs} processes) would move {exact:.2} MiB per \
                     process, less than one 1 MiB block; the smallest scale for this workload \
                     is {min_f:.4} (1/{:.0}), or use fewer --procs",
                    (1.0 / min_f).floor()
                );
            }
            let alone = mib * f64::from(procs) / device;
            let compute = period - alone;
            if compute <= 0.0 {
                bail!(
                    "--scale {f}: the {name}-frequency job's I/O phase rounded to whole MiB \
                     ({alone:.3} s alone) fills its whole scaled period ({period:.3} s)"
                );
            }
            Ok(Kind {
                name,
                jobs,
                compute_s: compute,
                mib_per_proc: mib as u64,
                period_s: period,
                procs,
                release_s: 0.0,
            })
        };
        let high = kind("high", 1, HIGH, 1.0)?;
        let low = kind("low", low_jobs, LOW, low_load)?;
        let window = (window.0 * f, window.1 * f);
        if window.1 - window.0 < low.period_s {
            bail!(
                "--scale {f}: the metrics window ({:.2} s) would hold less than one \
                 low-frequency phase (period {:.2} s)",
                window.1 - window.0,
                low.period_s
            );
        }
        Ok(Plan::of_kinds(shape, vec![high, low], window))
    }

    /// A plan of `kinds` (ids in their order, from 1), measured over `window` (seconds after
    /// the launch, already scaled).
    pub(crate) fn of_kinds(shape: Shape, kinds: Vec<Kind>, window: (f64, f64)) -> Plan {
        Plan {
            shape,
            kinds,
            window,
            stop_after_s: window.1 + STOP_MARGIN_S,
            iosets_options: Vec::new(),
        }
    }

    /// Seed 004's high-frequency job (the first kind).
    #[cfg(test)]
    pub(crate) fn high(&self) -> Kind {
        self.kinds[0]
    }

    /// Seed 004's low-frequency jobs (the last kind).
    pub(crate) fn low(&self) -> Kind {
        self.kinds[self.kinds.len() - 1]
    }

    /// Every job, ids from 1 in the order of the kinds: in seed 004, id 1 is the
    /// high-frequency job, 2.. the low-frequency ones.
    pub(crate) fn jobs(&self) -> Vec<(u64, Kind)> {
        self.kinds
            .iter()
            .flat_map(|&k| std::iter::repeat_n(k, k.jobs))
            .zip(1u64..)
            .map(|(k, id)| (id, k))
            .collect()
    }

    /// The kind of job `id`.
    pub(crate) fn kind_of(&self, job: u64) -> Option<Kind> {
        self.jobs()
            .into_iter()
            .find(|&(j, _)| j == job)
            .map(|(_, k)| k)
    }

    /// The distinct class names of the kinds, in order of first appearance.
    pub(crate) fn classes(&self) -> Vec<&'static str> {
        let mut out: Vec<&'static str> = Vec::new();
        for k in &self.kinds {
            if !out.contains(&k.name) {
                out.push(k.name);
            }
        }
        out
    }

    /// The aggregate device, bytes/s.
    pub(crate) fn device_bytes_s(&self) -> f64 {
        self.shape.device_mib_s * MIB as f64
    }

    /// Bytes one I/O phase of `kind` moves (all processes).
    pub(crate) fn phase_bytes(&self, kind: Kind) -> u64 {
        kind.mib_per_proc * u64::from(kind.procs) * MIB
    }

    /// An I/O phase of `kind` alone on the device, seconds.
    pub(crate) fn io_alone_s(&self, kind: Kind) -> f64 {
        self.phase_bytes(kind) as f64 / self.device_bytes_s()
    }

    /// The Set-10 set and priority of `kind` from its known period (the mapping the servers
    /// and the simulator use: set `round(log10 w_iter)`, priority `10^-set`).
    pub(crate) fn set10(&self, kind: Kind) -> (i32, Priority) {
        let m = SetMapping::default();
        let set = m
            .set_of(kind.period_s)
            .expect("periods are finite and positive");
        (set, m.priority_of_set(set))
    }

    /// Iterations each job is given: more than fit before the stop (the stop ends them).
    pub(crate) fn iterations(&self, kind: Kind) -> u64 {
        ((self.stop_after_s - kind.release_s).max(0.0) / kind.period_s).ceil() as u64 + 2
    }

    /// How long one run is expected to take, seconds: until the stop, plus the longest phase
    /// that may still be running then.
    pub(crate) fn expected_run_s(&self) -> f64 {
        let longest = self.kinds.iter().map(|&k| self.io_alone_s(k));
        self.stop_after_s + longest.fold(0.0, f64::max)
    }

    /// The latest a run may take before its applications are killed: time for every job's
    /// last phase to finish one after the other, twice over.
    pub(crate) fn run_deadline_s(&self) -> f64 {
        let all: f64 = self
            .kinds
            .iter()
            .map(|&k| self.io_alone_s(k) * k.jobs as f64)
            .sum();
        self.stop_after_s + 30.0 + 2.0 * all
    }

    /// A line per kind for the outputs (seed 004's two kinds; the low-frequency ones'
    /// lengthening by the demo's `low_load`).
    pub(crate) fn describe(&self) -> Vec<String> {
        let last = self.kinds.len() - 1;
        self.kinds
            .iter()
            .enumerate()
            .map(|(i, &k)| {
                (
                    k,
                    if i == last && i > 0 {
                        self.shape.low_load
                    } else {
                        1.0
                    },
                )
            })
            .map(|(k, load)| {
                let (set, p) = self.set10(k);
                format!(
                    "{} {}-frequency job{}: compute {:.3} s, write {} MiB × {} process{} + \
                     fsync ({:.3} s alone){}; period {:.3} s -> Set-10 set {set}, priority {}",
                    k.jobs,
                    k.name,
                    if k.jobs == 1 { "" } else { "s" },
                    k.compute_s,
                    k.mib_per_proc,
                    k.procs,
                    if k.procs == 1 { "" } else { "es" },
                    self.io_alone_s(k),
                    if load == 1.0 {
                        String::new()
                    } else {
                        format!(" (I/O lengthened ×{load:.2})")
                    },
                    k.period_s,
                    p.get()
                )
            })
            .collect()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The shape of the tests: seed 004's at `scale`, on 2 servers of 55 MiB/s.
    pub(crate) fn shape(scale: f64) -> Shape {
        Shape {
            scale,
            servers: 2,
            device_mib_s: 110.0,
            procs: 8,
            low_jobs: 15,
            low_load: 1.0,
            window: SEED_WINDOW,
            hold_idle_ms: 20,
            chunk_kib: 1024,
        }
    }

    #[test]
    fn full_scale_is_seed_004() {
        let p = Plan::new(shape(1.0)).unwrap();
        // 1.2 s × 110 MiB/s / 8 = 16.5 -> 17 MiB; 24 s -> 330 MiB per process.
        assert_eq!(p.high().mib_per_proc, 17);
        assert_eq!(p.low().mib_per_proc, 330);
        assert!((p.high().period_s - 19.2).abs() < 1e-9);
        assert!((p.low().period_s - 384.0).abs() < 1e-9);
        assert!((p.high().compute_s + p.io_alone_s(p.high()) - 19.2).abs() < 1e-9);
        assert_eq!(p.window, (400.0, 3200.0));
        assert_eq!(p.jobs().len(), 16);
        assert_eq!(p.set10(p.high()).0, 1);
        assert_eq!(p.set10(p.low()).0, 3);
    }

    #[test]
    fn scaled_volumes_are_whole_mib_and_compute_fills_the_period() {
        let p = Plan::new(shape(1.0 / 20.0)).unwrap();
        // 0.06 s × 110 / 8 = 0.825 -> 1 MiB; 1.2 s × 110 / 8 = 16.5 -> 17 MiB.
        assert_eq!(p.high().mib_per_proc, 1);
        assert_eq!(p.low().mib_per_proc, 17);
        assert!((p.low().compute_s - (19.2 - 17.0 * 8.0 / 110.0)).abs() < 1e-9);
        assert_eq!(p.window, (20.0, 160.0));
        assert!(p.stop_after_s > p.window.1);
        // The two kinds stay in different sets at any scale (their periods differ by 20×).
        assert_ne!(p.set10(p.high()).0, p.set10(p.low()).0);
        assert!(p.iterations(p.high()) as f64 * p.high().period_s > p.stop_after_s);
    }

    #[test]
    fn impossible_scales_name_their_bound() {
        let e = Plan::new(shape(1.0 / 64.0)).unwrap_err().to_string();
        assert!(e.contains("less than one 1 MiB block"), "{e}");
        assert!(e.contains("smallest scale"), "{e}");
        // With one process per job the same scale is fine.
        let mut s = shape(1.0 / 64.0);
        s.procs = 1;
        assert!(Plan::new(s).is_ok());
        let mut s = shape(1.0 / 20.0);
        s.window = (400.0, 700.0);
        let e = Plan::new(s).unwrap_err().to_string();
        assert!(e.contains("less than one low-frequency phase"), "{e}");
        for bad in ["0", "2", "-1", "1/0", "nan", "x", "1/x", ""] {
            assert!(parse_scale(bad).is_err(), "{bad}");
        }
        assert!(parse_scale("0").unwrap_err().to_string().contains("(0, 1]"));
        assert_eq!(parse_scale("1/20").unwrap(), 0.05);
        assert_eq!(parse_scale(" 0.25 ").unwrap(), 0.25);
    }

    #[test]
    fn configurations_parse_in_order_and_refuse_unknown_names() {
        assert_eq!(
            Config::parse_list("clairvoyant,timeorder").unwrap(),
            vec![Config::Clairvoyant, Config::Timeorder]
        );
        let e = Config::parse_list("timeorder,bogus")
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"bogus\""), "{e}");
        assert!(
            e.contains("timeorder, clairvoyant, auto, auto-error"),
            "{e}"
        );
        assert!(Config::parse_list("auto,auto").is_err());
    }
}
