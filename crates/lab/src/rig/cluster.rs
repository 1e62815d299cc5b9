//! One run of one configuration: K servers and one FUSE mount in this process, the
//! applications as child processes of this program (`iosets app periodic`), each tagged with its
//! job by `IOSETS_JOB_ID`.
//!
//! Everything a run starts is stopped on every path, errors and interruptions included, in the
//! reverse order: the applications are killed and reaped, the mount is unmounted (and checked:
//! a mount left behind is unmounted lazily), the servers are shut down (their traces flushed),
//! and the data files are removed unless `--keep`.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use iosets_mount::ident::Source;
use iosets_mount::{MountOptions, Mounted};
use iosets_server::{Server, ServerConfig, ServerHandle};

use super::{scratch_base, tail, this_program, unix_now};
use crate::seed004::plan::{Config, Plan};

/// The control token the servers of a run share with its mount.
const TOKEN: &str = "iosets-experiment";
/// I/O worker threads per server (the machine this runs on has few cores).
const WORKERS: usize = 2;
/// FUSE threads of the mount (requests are answered from the client's pool, so these only
/// receive them).
const MOUNT_THREADS: usize = 8;
/// How often the applications are checked and the progress redrawn.
const POLL: Duration = Duration::from_millis(100);
/// Lines of an application's standard error kept in a failure report.
const STDERR_TAIL: usize = 5;

/// `--kill-job ID@SECONDS`: kill one application that long after the launch (the crash test).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct KillJob {
    /// The job.
    pub(crate) job: u64,
    /// Seconds after the launch.
    pub(crate) after_s: f64,
}

impl std::str::FromStr for KillJob {
    type Err = String;

    fn from_str(s: &str) -> Result<KillJob, String> {
        let bad = || format!("{s:?}: expected JOB@SECONDS, e.g. 3@10.5");
        let (job, at) = s.split_once('@').ok_or_else(bad)?;
        let job = job.trim().parse().map_err(|_| bad())?;
        let after_s: f64 = at.trim().parse().map_err(|_| bad())?;
        if !(after_s.is_finite() && after_s >= 0.0) {
            return Err(bad());
        }
        Ok(KillJob { job, after_s })
    }
}

/// What a run needs besides the plan.
#[derive(Debug)]
pub(crate) struct RunSpec<'a> {
    /// The scaled workload.
    pub(crate) plan: &'a Plan,
    /// The configuration.
    pub(crate) config: Config,
    /// The repetition, from 1.
    pub(crate) rep: usize,
    /// Where the phase logs, the traces and the applications' standard errors go.
    pub(crate) dir: PathBuf,
    /// Keep the data files the applications wrote.
    pub(crate) keep: bool,
    /// Kill one application mid-run.
    pub(crate) kill: Option<KillJob>,
    /// The `iosets` policy's `order` inside a set.
    pub(crate) order: &'static str,
    /// Shown before the progress bar.
    pub(crate) label: String,
    /// Set by Ctrl-C: stop the run.
    pub(crate) interrupted: &'a AtomicBool,
}

/// An application that did not end well.
#[derive(Clone, Debug)]
pub(crate) struct Failure {
    /// Its job.
    pub(crate) job: u64,
    /// How it ended.
    pub(crate) status: String,
    /// The last lines of its standard error.
    pub(crate) stderr_tail: Vec<String>,
}

/// What a run left behind.
#[derive(Debug)]
pub(crate) struct RunRecord {
    /// The configuration.
    pub(crate) config: Config,
    /// The repetition, from 1.
    pub(crate) rep: usize,
    /// Where its files are.
    pub(crate) dir: PathBuf,
    /// Every job's phase log.
    pub(crate) logs: Vec<(u64, PathBuf)>,
    /// Each server's request trace, in server order.
    pub(crate) traces: Vec<PathBuf>,
    /// Applications that failed.
    pub(crate) failures: Vec<Failure>,
    /// The data files, when kept.
    pub(crate) kept: Option<PathBuf>,
    /// How long the run took, seconds.
    pub(crate) elapsed_s: f64,
    /// The job ids the servers saw, when a launcher gave its own (Slurm's), each with the plan's
    /// job: `(launcher's id, plan's id)`. Empty when the servers saw the plan's ids.
    pub(crate) job_map: Vec<(u64, u64)>,
}

/// The file of a run directory that maps a launcher's job ids to the plan's: a header line
/// `plan_job,launcher_job`, then one line per job. A test bed's driver writes it
/// (`scripts/cluster-seed004.sh`); [`recorded`] reads it.
pub(crate) const JOB_MAP: &str = "launcher-jobs.csv";

/// Reads a run's [`JOB_MAP`], if it has one.
fn read_job_map(dir: &Path) -> Result<Vec<(u64, u64)>> {
    let path = dir.join(JOB_MAP);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(anyhow::Error::new(e).context(format!("reading {}", path.display()))),
    };
    let mut lines = text.lines();
    if lines.next().map(str::trim) != Some("plan_job,launcher_job") {
        bail!(
            "{}: expected the header line plan_job,launcher_job",
            path.display()
        );
    }
    let mut map: Vec<(u64, u64)> = Vec::new();
    for (i, line) in lines.enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let bad = || {
            anyhow::anyhow!(
                "{} line {}: expected PLAN_JOB,LAUNCHER_JOB, got {line:?}",
                path.display(),
                i + 2
            )
        };
        let (plan, launcher) = line.split_once(',').ok_or_else(bad)?;
        let plan: u64 = plan.trim().parse().map_err(|_| bad())?;
        let launcher: u64 = launcher.trim().parse().map_err(|_| bad())?;
        if map.iter().any(|&(l, p)| l == launcher || p == plan) {
            bail!(
                "{} line {}: job {plan} or {launcher} is mapped twice",
                path.display(),
                i + 2
            );
        }
        map.push((launcher, plan));
    }
    Ok(map)
}

/// Everything a run has started; [`Live::stop`] (or dropping it) stops it all.
#[derive(Debug)]
struct Live {
    children: Vec<(u64, Child)>,
    mount: Option<Mounted>,
    mountpoint: PathBuf,
    servers: Vec<ServerHandle>,
    root: PathBuf,
    keep: bool,
}

impl Live {
    /// Kills the applications still running, unmounts, stops the servers, removes the data
    /// unless kept and the mount point. Idempotent; returns the first error.
    fn stop(&mut self) -> Result<()> {
        for (_, c) in &mut self.children {
            if matches!(c.try_wait(), Ok(None)) {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
        self.children.clear();
        let mut first: Option<anyhow::Error> = None;
        if let Some(m) = self.mount.take() {
            if let Err(e) = m.unmount() {
                first.get_or_insert(anyhow::Error::new(e).context("unmounting"));
            }
        }
        // The session may end without the kernel's mount going away: check, and detach it.
        if iosets_mount::mounted_at(&self.mountpoint).is_some() {
            if let Err(e) = iosets_mount::umount(&self.mountpoint) {
                first.get_or_insert(anyhow::Error::new(e).context("unmounting"));
            }
        }
        if iosets_mount::mounted_at(&self.mountpoint).is_none() {
            let _ = std::fs::remove_dir(&self.mountpoint);
        }
        for s in self.servers.drain(..) {
            match s.shutdown() {
                Ok(r) if !r.balanced => {
                    first.get_or_insert(anyhow::anyhow!(
                        "a server's conservation counters did not balance at shutdown"
                    ));
                }
                Ok(_) => {}
                Err(e) => {
                    first.get_or_insert(anyhow::Error::new(e).context("stopping a server"));
                }
            }
        }
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.root);
        }
        first.map_or(Ok(()), Err)
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// The servers' policy knobs of one run, as `iosets serve` flags (the in-process servers of
/// [`run_one`] get the same through [`server_config`]; `--print-plan` gives them to a test bed's
/// servers): the policy and its options, the emulated device's share of one server, the
/// workers, and the period detection of the auto configurations.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Knobs {
    /// `--policy`.
    pub(crate) policy: &'static str,
    /// `--policy-opt KEY=VALUE`s.
    pub(crate) options: Vec<(String, String)>,
    /// `--throttle-mib-s`.
    pub(crate) throttle_mib_s: f64,
    /// `--workers`.
    pub(crate) workers: usize,
    /// `--auto-priority`.
    pub(crate) auto_priority: bool,
    /// `--period-error` and `--period-error-seed`, when set.
    pub(crate) period_error: Option<(f64, u64)>,
}

impl Knobs {
    /// The knobs of `config`'s repetition `rep` under `plan`, with `order` inside the sets.
    pub(crate) fn of(plan: &Plan, config: Config, rep: usize, order: &'static str) -> Knobs {
        let policy = config.policy();
        let options = if policy == "iosets" {
            let given = |k: &str| plan.iosets_options.iter().any(|(g, _)| g == k);
            let mut options: Vec<(String, String)> = [
                ("order", order.to_string()),
                ("hold_idle_ms", plan.shape.hold_idle_ms.to_string()),
            ]
            .into_iter()
            .filter(|(k, _)| !given(k))
            .map(|(k, v)| (k.to_string(), v))
            .collect();
            options.extend(plan.iosets_options.iter().cloned());
            options
        } else {
            Vec::new()
        };
        Knobs {
            policy,
            options,
            throttle_mib_s: plan.shape.device_mib_s / plan.shape.servers as f64,
            workers: WORKERS,
            auto_priority: matches!(config, Config::Auto | Config::AutoError),
            period_error: (config == Config::AutoError).then_some((0.5, rep as u64)),
        }
    }

    /// As `iosets serve` flags.
    pub(crate) fn flags(&self) -> Vec<String> {
        let mut f = vec!["--policy".to_string(), self.policy.to_string()];
        for (k, v) in &self.options {
            f.extend(["--policy-opt".to_string(), format!("{k}={v}")]);
        }
        f.extend([
            "--throttle-mib-s".to_string(),
            format!("{:.6}", self.throttle_mib_s),
            "--workers".to_string(),
            self.workers.to_string(),
        ]);
        if self.auto_priority {
            f.push("--auto-priority".into());
        }
        if let Some((e, seed)) = self.period_error {
            f.extend([
                "--period-error".to_string(),
                e.to_string(),
                "--period-error-seed".to_string(),
                seed.to_string(),
            ]);
        }
        f
    }
}

fn server_config(
    spec: &RunSpec<'_>,
    root: PathBuf,
    trace: PathBuf,
    secret: &iosets_proto::auth::Secret,
) -> ServerConfig {
    let k = Knobs::of(spec.plan, spec.config, spec.rep, spec.order);
    let mut cfg = ServerConfig::new(root);
    // The run's own secret: the servers serve its mount only.
    cfg.auth = Some(secret.clone());
    cfg.policy = k.policy.into();
    cfg.policy_options = k.options;
    cfg.workers = k.workers;
    cfg.throttle_mib_s = Some(k.throttle_mib_s);
    cfg.token = Some(TOKEN.into());
    cfg.trace = Some(trace);
    cfg.auto_priority = k.auto_priority;
    if let Some((e, seed)) = k.period_error {
        cfg.period_error = e;
        cfg.period_error_seed = seed;
    }
    cfg
}

/// Writes each job's Set-10 priority into the mount's control directory.
fn write_priorities(plan: &Plan, mountpoint: &Path) -> Result<()> {
    for (job, kind) in plan.jobs() {
        let (_, p) = plan.set10(kind);
        let path = mountpoint
            .join(iosets_mount::control::CONTROL_DIR)
            .join("jobs")
            .join(job.to_string())
            .join("priority");
        std::fs::write(&path, format!("{}\n", p.get()))
            .with_context(|| format!("writing job {job}'s priority to {}", path.display()))?;
    }
    Ok(())
}

/// Starts one application.
fn spawn_app(plan: &Plan, job: u64, mountpoint: &Path, dir: &Path, stop_at: f64) -> Result<Child> {
    let kind = plan.kind_of(job).expect("a job of the plan");
    let exe = this_program()?;
    let err = File::create(dir.join(format!("job{job}.stderr")))
        .with_context(|| format!("creating job {job}'s stderr file in {}", dir.display()))?;
    Command::new(exe)
        .args(["app", "periodic", "--dir"])
        .arg(mountpoint)
        .args(["--procs", &kind.procs.to_string()])
        .args(["--compute", &format!("{:.6}", kind.compute_s)])
        .args(["--release", &format!("{:.6}", kind.release_s)])
        .args(["--write-mib", &kind.mib_per_proc.to_string()])
        .args(["--iterations", &plan.iterations(kind).to_string()])
        .arg("--fsync")
        .arg("--log")
        .arg(dir.join(format!("job{job}.csv")))
        .args(["--job", &job.to_string()])
        .args(["--stop-at", &format!("{stop_at:.6}")])
        .env("IOSETS_JOB_ID", job.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err)
        .spawn()
        .with_context(|| format!("starting job {job}'s application"))
}

/// I/O phases logged so far (rows of any rank), per class, in the order of `plan.classes()`.
fn phases_done(plan: &Plan, dir: &Path) -> Vec<(&'static str, usize)> {
    let mut done: Vec<(&'static str, usize)> = plan.classes().into_iter().map(|c| (c, 0)).collect();
    for (job, kind) in plan.jobs() {
        let n = std::fs::read_to_string(dir.join(format!("job{job}.csv")))
            .map(|t| t.lines().filter(|l| l.contains(",io,")).count())
            .unwrap_or(0);
        if let Some(d) = done.iter_mut().find(|(c, _)| *c == kind.name) {
            d.1 += n;
        }
    }
    done
}

fn progress_bar(spec: &RunSpec<'_>) -> ProgressBar {
    let expected = spec.plan.expected_run_s().ceil() as u64;
    let bar = ProgressBar::new(expected);
    let style = ProgressStyle::with_template(
        "{prefix} [{elapsed_precise}] {bar:30} {pos}/{len} s expected  {msg}",
    )
    .map(|s| s.progress_chars("=> "))
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_prefix(spec.label.clone());
    bar
}

/// Runs one configuration once.
pub(crate) fn run_one(spec: &RunSpec<'_>) -> Result<RunRecord> {
    let plan = spec.plan;
    let name = format!("{}-{}", spec.config.name(), spec.rep);
    std::fs::create_dir_all(&spec.dir)
        .with_context(|| format!("creating {}", spec.dir.display()))?;
    // The servers' and the mount's log lines go to the run's directory, not between the
    // command's own lines.
    let _log = crate::logsink::to_file(&spec.dir.join("log.txt"))?;
    let tag = format!("iosets-seed004-{}-{name}", std::process::id());
    let root = scratch_base().join(&tag);
    let mountpoint = std::env::temp_dir().join(format!("{tag}-mnt"));
    let _ = std::fs::remove_dir_all(&root);
    if iosets_mount::mounted_at(&mountpoint).is_some() {
        bail!(
            "{} is already a mount point; run `iosets umount {}`",
            mountpoint.display(),
            mountpoint.display()
        );
    }
    std::fs::create_dir_all(&mountpoint)
        .with_context(|| format!("creating the mount point {}", mountpoint.display()))?;
    let mut live = Live {
        children: Vec::new(),
        mount: None,
        mountpoint: mountpoint.clone(),
        servers: Vec::new(),
        root: root.clone(),
        keep: spec.keep,
    };
    let mut traces = Vec::new();
    let secret = iosets_proto::auth::Secret::random().context("a secret for the run")?;
    for i in 0..plan.shape.servers {
        let server_root = root.join(format!("server{i}"));
        std::fs::create_dir_all(&server_root)
            .with_context(|| format!("creating {}", server_root.display()))?;
        let trace = spec.dir.join(format!("server{i}.trace.csv"));
        let cfg = server_config(spec, server_root, trace.clone(), &secret);
        let h = Server::start(cfg)
            .with_context(|| format!("starting server {i} ({})", spec.config.policy()))?;
        traces.push(trace);
        live.servers.push(h);
    }
    let mut opts = MountOptions::new(&mountpoint);
    opts.servers = live.servers.iter().map(|s| s.addr().to_string()).collect();
    opts.token = Some(TOKEN.into());
    opts.auth = Some(secret);
    opts.threads = MOUNT_THREADS;
    opts.chunk_size = plan.shape.chunk_kib * 1024;
    // A request may wait for whole phases of other jobs (timeorder with every job in I/O, or a
    // set's turn): bound it by the run, not by the interactive default.
    opts.timeout = Duration::from_secs_f64(plan.run_deadline_s() + 30.0);
    // The job comes from IOSETS_JOB_ID only: inside a Slurm job every application would
    // otherwise share the harness's cgroup job.
    opts.ident.sources = vec![Source::Env];
    opts.ident.env_vars = vec!["IOSETS_JOB_ID".into()];
    live.mount = Some(iosets_mount::mount(opts).context("mounting the servers")?);
    if spec.config == Config::Clairvoyant {
        write_priorities(plan, &mountpoint)?;
    }

    let logs: Vec<(u64, PathBuf)> = plan
        .jobs()
        .iter()
        .map(|&(job, _)| (job, spec.dir.join(format!("job{job}.csv"))))
        .collect();
    for (_, log) in &logs {
        let _ = std::fs::remove_file(log);
    }
    let launch = Instant::now();
    let stop_at = unix_now() + plan.stop_after_s;
    for &(job, _) in &plan.jobs() {
        let child = spawn_app(plan, job, &mountpoint, &spec.dir, stop_at)?;
        live.children.push((job, child));
    }

    let bar = progress_bar(spec);
    let deadline = launch + Duration::from_secs_f64(plan.run_deadline_s());
    let mut killed = spec.kill.is_none();
    let mut ended: Vec<(u64, std::process::ExitStatus)> = Vec::new();
    let mut last_count = Instant::now() - Duration::from_secs(1);
    let mut overdue = false;
    while ended.len() < live.children.len() {
        if spec.interrupted.load(Ordering::Relaxed) {
            bar.abandon();
            live.stop()?;
            bail!("interrupted");
        }
        let now = Instant::now();
        if !killed {
            let k = spec.kill.expect("a kill is asked for");
            if now.duration_since(launch).as_secs_f64() >= k.after_s {
                if let Some((_, c)) = live.children.iter_mut().find(|(j, _)| *j == k.job) {
                    let _ = c.kill();
                }
                killed = true;
            }
        }
        if now > deadline {
            overdue = true;
            for (_, c) in &mut live.children {
                if matches!(c.try_wait(), Ok(None)) {
                    let _ = c.kill();
                }
            }
        }
        for (job, c) in &mut live.children {
            if ended.iter().any(|(j, _)| j == job) {
                continue;
            }
            if let Some(status) = c.try_wait().context("waiting for an application")? {
                ended.push((*job, status));
            }
        }
        if now.duration_since(last_count) >= Duration::from_secs(1) {
            let done = phases_done(plan, &spec.dir)
                .iter()
                .map(|(c, n)| format!("{c} {n}"))
                .collect::<Vec<_>>()
                .join(", ");
            bar.set_message(format!(
                "I/O phases done: {done}; {} of {} jobs running",
                live.children.len() - ended.len(),
                live.children.len()
            ));
            last_count = now;
        }
        bar.set_position(now.duration_since(launch).as_secs());
        std::thread::sleep(POLL);
    }
    let elapsed_s = launch.elapsed().as_secs_f64();
    bar.finish_and_clear();
    let kept = spec.keep.then(|| root.clone());
    live.stop()?;

    let mut failures = Vec::new();
    ended.sort_by_key(|(j, _)| *j);
    for (job, status) in ended {
        if status.success() {
            continue;
        }
        let how = if overdue {
            format!(
                "{status}, killed at the run's deadline ({:.0} s)",
                plan.run_deadline_s()
            )
        } else if spec.kill.is_some_and(|k| k.job == job) {
            format!("{status} (--kill-job)")
        } else {
            status.to_string()
        };
        failures.push(Failure {
            job,
            status: how,
            stderr_tail: tail(&spec.dir.join(format!("job{job}.stderr")), STDERR_TAIL),
        });
    }
    Ok(RunRecord {
        config: spec.config,
        rep: spec.rep,
        dir: spec.dir.clone(),
        logs,
        traces,
        failures,
        kept,
        elapsed_s,
        job_map: Vec::new(),
    })
}

/// A run made earlier, read back from `dir` (a previous `--out DIR`'s `runs/<config>-<rep>/`)
/// for `--analyze`: its phase logs and its servers' traces; nothing is run. How the
/// applications exited is not kept on disk, so `failures` is empty: a job that crashed shows
/// in its phase log as a phase that never ended and is left out of the metrics with that reason.
pub(crate) fn recorded(plan: &Plan, config: Config, rep: usize, dir: PathBuf) -> Result<RunRecord> {
    if !dir.is_dir() {
        bail!(
            "{}: no such run directory (expected one per configuration and repetition, as              --out wrote them)",
            dir.display()
        );
    }
    let traces: Vec<PathBuf> = (0..plan.shape.servers)
        .map(|i| dir.join(format!("server{i}.trace.csv")))
        .collect();
    if let Some(missing) = traces.iter().find(|t| !t.is_file()) {
        bail!(
            "{}: missing; the run was made with fewer servers than --servers {} says",
            missing.display(),
            plan.shape.servers
        );
    }
    let extra = dir.join(format!("server{}.trace.csv", plan.shape.servers));
    if extra.is_file() {
        bail!(
            "{}: the run was made with more servers than --servers {} says",
            extra.display(),
            plan.shape.servers
        );
    }
    let logs = plan
        .jobs()
        .iter()
        .map(|&(job, _)| (job, dir.join(format!("job{job}.csv"))))
        .collect();
    let job_map = read_job_map(&dir)?;
    Ok(RunRecord {
        config,
        rep,
        dir,
        logs,
        traces,
        failures: Vec::new(),
        kept: None,
        elapsed_s: 0.0,
        job_map,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kill_job_parses() {
        assert_eq!(
            "3@10.5".parse::<KillJob>().unwrap(),
            KillJob {
                job: 3,
                after_s: 10.5
            }
        );
        for bad in ["3", "@1", "x@1", "3@-1", "3@nan", "3@"] {
            assert!(bad.parse::<KillJob>().is_err(), "{bad}");
        }
    }

    #[test]
    fn options_given_on_the_command_line_reach_iosets_and_override_the_experiments() {
        use crate::seed004::plan::{tests::shape, Config, Plan};
        let mut plan = Plan::new(shape(1.0 / 20.0)).unwrap();
        let base = Knobs::of(&plan, Config::Auto, 1, "phase");
        assert_eq!(
            base.options,
            vec![
                ("order".to_string(), "phase".to_string()),
                ("hold_idle_ms".to_string(), "20".to_string())
            ]
        );
        plan.iosets_options = vec![
            ("unknown_hold_ms".into(), "60000".into()),
            ("hold_idle_ms".into(), "0".into()),
        ];
        let k = Knobs::of(&plan, Config::Clairvoyant, 1, "phase");
        assert_eq!(
            k.options,
            vec![
                ("order".to_string(), "phase".to_string()),
                ("unknown_hold_ms".to_string(), "60000".to_string()),
                ("hold_idle_ms".to_string(), "0".to_string())
            ]
        );
        assert!(k
            .flags()
            .join(" ")
            .contains("--policy-opt unknown_hold_ms=60000"));
        // Not for arrival order.
        assert!(Knobs::of(&plan, Config::Timeorder, 1, "phase")
            .options
            .is_empty());
    }

    #[test]
    fn a_launchers_job_map_is_read_and_bad_ones_are_refused() {
        let dir = std::env::temp_dir().join(format!("iosets-jobmap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(read_job_map(&dir).unwrap(), vec![]);
        std::fs::write(dir.join(JOB_MAP), "plan_job,launcher_job\n1,41\n2,40\n").unwrap();
        assert_eq!(read_job_map(&dir).unwrap(), vec![(41, 1), (40, 2)]);
        for (text, needle) in [
            ("1,41\n", "header"),
            ("plan_job,launcher_job\n1;41\n", "line 2"),
            ("plan_job,launcher_job\n1,41\n2,41\n", "twice"),
            ("plan_job,launcher_job\n1,41\n1,42\n", "twice"),
        ] {
            std::fs::write(dir.join(JOB_MAP), text).unwrap();
            let e = read_job_map(&dir).unwrap_err().to_string();
            assert!(e.contains(needle), "{text:?}: {e}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
