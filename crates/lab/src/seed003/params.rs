//! What seed 003's experiment runs: the three settings and the scaled workload, checked, and
//! kept beside the runs (`params.json`) so that `--analyze` reads them back.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

/// The heavy job (seed 003's JOB-A, the mdtest run of 6,144 processes).
pub(crate) const HEAVY_JOB: u64 = 1;
/// The light job (seed 003's JOB-B, 768 processes) and its stage-in.
pub(crate) const LIGHT_JOB: u64 = 2;
/// The quota rule of the `on` setting.
pub(crate) const RULE: &str = "compute";
/// Most FUSE threads of one mount (the mount's own limit): one per process of a job.
pub(crate) const MAX_MOUNT_THREADS: u32 = 64;

/// A setting of seed 003's fair-share test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Setting {
    /// The light job alone.
    Reference,
    /// Both jobs, no quota.
    Off,
    /// Both jobs under one thread-quota rule with fair share inside.
    On,
}

impl Setting {
    /// The three, in seed 003's order.
    pub(crate) const ALL: [Setting; 3] = [Setting::Reference, Setting::Off, Setting::On];

    /// Its name (in file names and tables).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Setting::Reference => "reference",
            Setting::Off => "off",
            Setting::On => "on",
        }
    }

    /// The setting named `s`.
    pub(crate) fn parse(s: &str) -> Option<Setting> {
        Setting::ALL.into_iter().find(|x| x.name() == s)
    }

    /// Whether the heavy job runs.
    pub(crate) fn heavy(self) -> bool {
        self != Setting::Reference
    }

    /// Whether the server runs with the quota rule.
    pub(crate) fn quota(self) -> bool {
        self == Setting::On
    }
}

/// The workload and the server of every run.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Params {
    /// `quick` or `full`, `<scale> (changed by flags)` when a flag changed a value of the
    /// scale, `custom` in a `params.json` without it.
    pub(crate) scale: String,
    /// Server worker threads (seed 003's MDS: 24 service threads).
    pub(crate) workers: usize,
    /// Processes of the heavy job.
    pub(crate) heavy_procs: u32,
    /// Processes of the light job (and of its stage-in).
    pub(crate) light_procs: u32,
    /// Files per process and phase, both jobs (mdtest's -n).
    pub(crate) files: u64,
    /// Iterations of the light job (mdtest's -i).
    pub(crate) light_iterations: u32,
    /// Stripe count of the heavy job's directories.
    pub(crate) heavy_stripes: u32,
    /// Stripe count of the light job's directories.
    pub(crate) light_stripes: u32,
    /// The emulated back end's latency per call, ms.
    pub(crate) meta_latency_ms: f64,
    /// Rank directories the stage-in creates.
    pub(crate) stagein_dirs: u64,
    /// A stage-in still running this long is stopped and reported as not completed, s.
    pub(crate) stagein_limit_s: f64,
    /// The light job's mdtest must end within this, s (else the run fails).
    pub(crate) light_limit_s: f64,
    /// The rule's share of the server's threads, percent.
    pub(crate) threads_pct: f64,
    /// A job's ceiling inside the rule when the rule's other jobs are idle, percent.
    pub(crate) job_share_pct: f64,
    /// Milliseconds a thread a job frees is kept for its next request (the quota's `keep_ms`;
    /// 0, seed 003's setting: off).
    pub(crate) keep_ms: f64,
    /// What the quota's rule matches: the two jobs by id in-process; on a test bed the compute
    /// nodes by address (`client=...`, seed 003's compute node group).
    pub(crate) quota_match: String,
    /// How long the heavy job runs before the light job starts, s.
    pub(crate) warmup_s: f64,
}

impl Params {
    /// The values of a scale: `full` is seed 003's workload with the back end's latency scaled
    /// (see [`super`]); `quick` is smaller and takes about a minute per repetition.
    pub(crate) fn of_scale(scale: &str) -> Result<Params> {
        let full = Params {
            scale: "full".into(),
            workers: 24,
            heavy_procs: 64,
            light_procs: 8,
            files: 100,
            light_iterations: 3,
            heavy_stripes: 96,
            light_stripes: 4,
            meta_latency_ms: 1.0,
            stagein_dirs: 1024,
            stagein_limit_s: 300.0,
            light_limit_s: 1800.0,
            threads_pct: 71.0,
            job_share_pct: 90.0,
            keep_ms: 0.0,
            quota_match: format!("job={{{HEAVY_JOB} {LIGHT_JOB}}}"),
            warmup_s: 2.0,
        };
        match scale {
            "full" => Ok(full),
            "quick" => Ok(Params {
                scale: "quick".into(),
                files: 20,
                meta_latency_ms: 0.5,
                stagein_dirs: 256,
                stagein_limit_s: 60.0,
                light_limit_s: 600.0,
                warmup_s: 1.0,
                ..full
            }),
            other => bail!("--scale {other:?}: expected quick or full"),
        }
    }

    /// Checks every value.
    pub(crate) fn check(&self) -> Result<()> {
        // The quota file as the server reads it (its rule's match included).
        let mut cfg = iosets_server::ServerConfig::new(".");
        if let Err(e) = cfg.set_quota_toml(&self.quota_toml()) {
            bail!("--quota-match {:?}: {e}", self.quota_match);
        }
        if !(self.keep_ms.is_finite() && (0.0..=1000.0).contains(&self.keep_ms)) {
            bail!(
                "--keep-ms {}: expected milliseconds in [0, 1000]",
                self.keep_ms
            );
        }
        if !(1..=1024).contains(&self.workers) {
            bail!("--workers {}: expected 1 to 1024", self.workers);
        }
        for (flag, n) in [
            ("--heavy-procs", self.heavy_procs),
            ("--light-procs", self.light_procs),
        ] {
            if !(1..=MAX_MOUNT_THREADS).contains(&n) {
                bail!(
                    "{flag} {n}: expected 1 to {MAX_MOUNT_THREADS} (one FUSE thread of the job's \
                     mount per process)"
                );
            }
        }
        if !(1..=1_000_000).contains(&self.files) {
            bail!("--files {}: expected 1 to 1000000", self.files);
        }
        if !(1..=1000).contains(&self.light_iterations) {
            bail!(
                "--light-iterations {}: expected 1 to 1000",
                self.light_iterations
            );
        }
        for (flag, n) in [
            ("--heavy-stripes", self.heavy_stripes),
            ("--light-stripes", self.light_stripes),
        ] {
            if !(1..=4096).contains(&n) {
                bail!("{flag} {n}: expected 1 to 4096 (the server's limit)");
            }
        }
        if !(self.meta_latency_ms.is_finite() && self.meta_latency_ms > 0.0)
            || self.meta_latency_ms > 1000.0
        {
            bail!(
                "--meta-latency-ms {}: expected more than 0 and at most 1000 (the experiment \
                 needs a slow back end)",
                self.meta_latency_ms
            );
        }
        if !(1..=1_000_000).contains(&self.stagein_dirs) {
            bail!(
                "--stagein-dirs {}: expected 1 to 1000000",
                self.stagein_dirs
            );
        }
        for (flag, v) in [
            ("--stagein-limit-s", self.stagein_limit_s),
            ("--light-limit-s", self.light_limit_s),
        ] {
            if !(v.is_finite() && (1.0..=86_400.0).contains(&v)) {
                bail!("{flag} {v}: expected 1 to 86400 seconds");
            }
        }
        if !(self.warmup_s.is_finite() && (0.0..=600.0).contains(&self.warmup_s)) {
            bail!("--warmup-s {}: expected 0 to 600 seconds", self.warmup_s);
        }
        if self.rule_threads() == 0 {
            bail!(
                "{}% of {} workers is no thread: the rule would stop both jobs",
                self.threads_pct,
                self.workers
            );
        }
        Ok(())
    }

    /// The threads the rule may hold: floor(workers × threads_pct / 100), as the server
    /// computes it.
    pub(crate) fn rule_threads(&self) -> usize {
        (self.workers as f64 * self.threads_pct / 100.0 + 1e-9).floor() as usize
    }

    /// The quota file of the `on` setting.
    pub(crate) fn quota_toml(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "# seed 003's fair-share test: one rule over jobs {HEAVY_JOB} and {LIGHT_JOB} ({})",
            self.quota_match
        );
        let _ = writeln!(s, "job_share_pct = {}", self.job_share_pct);
        let _ = writeln!(s, "lend = false");
        if self.keep_ms > 0.0 {
            let _ = writeln!(s, "keep_ms = {}", self.keep_ms);
        }
        let _ = writeln!(s, "[[rule]]");
        let _ = writeln!(s, "name = \"{RULE}\"");
        let _ = writeln!(s, "match = \"{}\"", self.quota_match);
        let _ = writeln!(s, "threads_pct = {}", self.threads_pct);
        s
    }

    /// Lines describing the workload, for the start of the output.
    pub(crate) fn describe(&self) -> Vec<String> {
        vec![
            format!(
                "server: one `iosets serve` child process, policy timeorder (arrival order), {} \
                 workers, back end \
                 {} ms per call (create/unlink: one call per stripe, other operations one)",
                self.workers, self.meta_latency_ms
            ),
            format!(
                "heavy job {HEAVY_JOB}: {} processes, mdtest -n {} repeated until the light job \
                 is done, directories of stripe count {}",
                self.heavy_procs, self.files, self.heavy_stripes
            ),
            format!(
                "light job {LIGHT_JOB}: {} processes, mdtest -n {} -i {}, directories of stripe \
                 count {}; then its stage-in: {} rank directories (stopped after {} s)",
                self.light_procs,
                self.files,
                self.light_iterations,
                self.light_stripes,
                self.stagein_dirs,
                self.stagein_limit_s
            ),
            format!(
                "on: rule {RULE:?} matches {} with {}% of the threads \
                 ({} of {}), fair share inside, a job up to {}% of them when the other is idle, \
                 no lending{}",
                self.quota_match,
                self.threads_pct,
                self.rule_threads(),
                self.workers,
                self.job_share_pct,
                if self.keep_ms > 0.0 {
                    format!(", a freed thread kept {} ms for its job", self.keep_ms)
                } else {
                    String::new()
                }
            ),
        ]
    }

    /// The values as `params.json` holds them.
    fn to_json(&self) -> Value {
        json!({
            "scale": self.scale,
            "workers": self.workers,
            "heavy_procs": self.heavy_procs,
            "light_procs": self.light_procs,
            "files": self.files,
            "light_iterations": self.light_iterations,
            "heavy_stripes": self.heavy_stripes,
            "light_stripes": self.light_stripes,
            "meta_latency_ms": self.meta_latency_ms,
            "stagein_dirs": self.stagein_dirs,
            "stagein_limit_s": self.stagein_limit_s,
            "light_limit_s": self.light_limit_s,
            "threads_pct": self.threads_pct,
            "job_share_pct": self.job_share_pct,
            "keep_ms": self.keep_ms,
            "quota_match": self.quota_match,
            "warmup_s": self.warmup_s,
        })
    }

    /// Writes `params.json` into `dir`.
    pub(crate) fn save(&self, dir: &Path) -> Result<()> {
        let p = dir.join("params.json");
        let text = serde_json::to_string_pretty(&self.to_json()).context("encoding params")?;
        std::fs::write(&p, text + "\n").with_context(|| format!("writing {}", p.display()))
    }

    /// Reads `params.json` from `dir`.
    pub(crate) fn load(dir: &Path) -> Result<Params> {
        let p = dir.join("params.json");
        let text = std::fs::read_to_string(&p).with_context(|| {
            format!(
                "reading {} (written by `iosets experiment seed003 --out DIR`)",
                p.display()
            )
        })?;
        let v: Value =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", p.display()))?;
        let bad = |k: &str| anyhow::anyhow!("{}: {k} missing or not a number", p.display());
        let u = |k: &str| v.get(k).and_then(Value::as_u64).ok_or_else(|| bad(k));
        let f = |k: &str| v.get(k).and_then(Value::as_f64).ok_or_else(|| bad(k));
        let u32_of =
            |k: &str| -> Result<u32> { u(k).and_then(|x| u32::try_from(x).map_err(|_| bad(k))) };
        let params = Params {
            scale: v
                .get("scale")
                .and_then(Value::as_str)
                .unwrap_or("custom")
                .to_string(),
            workers: usize::try_from(u("workers")?).map_err(|_| bad("workers"))?,
            heavy_procs: u32_of("heavy_procs")?,
            light_procs: u32_of("light_procs")?,
            files: u("files")?,
            light_iterations: u32_of("light_iterations")?,
            heavy_stripes: u32_of("heavy_stripes")?,
            light_stripes: u32_of("light_stripes")?,
            meta_latency_ms: f("meta_latency_ms")?,
            stagein_dirs: u("stagein_dirs")?,
            stagein_limit_s: f("stagein_limit_s")?,
            light_limit_s: f("light_limit_s")?,
            threads_pct: f("threads_pct")?,
            job_share_pct: f("job_share_pct")?,
            // Absent from the runs made before the setting existed: off.
            keep_ms: v.get("keep_ms").and_then(Value::as_f64).unwrap_or(0.0),
            // Absent from the runs made before the setting existed: the two jobs by id.
            quota_match: v.get("quota_match").and_then(Value::as_str).map_or_else(
                || format!("job={{{HEAVY_JOB} {LIGHT_JOB}}}"),
                str::to_string,
            ),
            warmup_s: f("warmup_s")?,
        };
        params
            .check()
            .with_context(|| format!("{}: a value is out of range", p.display()))?;
        Ok(params)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_and_checks() {
        let full = Params::of_scale("full").unwrap();
        full.check().unwrap();
        assert_eq!(full.rule_threads(), 17);
        assert_eq!((full.heavy_procs, full.light_procs), (64, 8));
        let quick = Params::of_scale("quick").unwrap();
        quick.check().unwrap();
        assert!(quick.files < full.files);
        let e = Params::of_scale("huge").unwrap_err().to_string();
        assert!(e.contains("quick or full"), "{e}");
        for (p, needle) in [
            (
                Params {
                    heavy_procs: 65,
                    ..full.clone()
                },
                "--heavy-procs 65",
            ),
            (
                Params {
                    files: 0,
                    ..full.clone()
                },
                "--files 0",
            ),
            (
                Params {
                    meta_latency_ms: 0.0,
                    ..full.clone()
                },
                "--meta-latency-ms 0",
            ),
            (
                Params {
                    workers: 1,
                    ..full.clone()
                },
                "no thread",
            ),
        ] {
            let e = p.check().unwrap_err().to_string();
            assert!(e.contains(needle), "{e}");
        }
    }

    #[test]
    fn params_round_trip_and_the_quota_file_says_what_seed_003_did() {
        let dir = std::env::temp_dir().join(format!("iosets-s003-params-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = Params {
            scale: "custom".into(),
            files: 7,
            ..Params::of_scale("quick").unwrap()
        };
        p.save(&dir).unwrap();
        assert_eq!(Params::load(&dir).unwrap(), p);
        let q = p.quota_toml();
        assert!(q.contains("match = \"job={1 2}\""), "{q}");
        assert!(
            q.contains("threads_pct = 71") && q.contains("job_share_pct = 90"),
            "{q}"
        );
        let _ = std::fs::remove_dir_all(&dir);
        assert!(Params::load(&dir).is_err());
    }
}
