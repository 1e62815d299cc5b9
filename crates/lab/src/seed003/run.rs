//! One run of one setting: the server as a child process (`iosets serve`, so that its CPU time
//! is its own, read from `/proc/PID/stat`), one FUSE mount per job in this process, and the
//! applications as child processes (`iosets app mdtest`).
//!
//! # Sequence
//! 1. The backing directories are made with their stripe counts (`user.iosets.stripe_count`,
//!    as `lfs setstripe -c N dir` before a job starts): the heavy job's rank directories 96,
//!    the light job's and its stage-in directory 4 (seed 003's values, [`Params`]).
//! 2. The server starts (policy timeorder: arrival order; the slow back end; `--quota` in the
//!    `on` setting), then the mounts: one per job, as the jobs of seed 003 ran on different
//!    compute nodes, each with one FUSE thread per process of its job (a FUSE thread serves
//!    one request at a time, so a mount shared by both jobs would queue the light job behind
//!    the heavy one in the client, where no server-side quota reaches) and an attribute and
//!    entry timeout of zero, so that every `stat` and every name lookup (of each component of
//!    a path, too) reaches the server.
//! 3. The heavy job starts (`off`, `on`) and runs `warmup_s`, and until each of its processes
//!    has been served; then the light job's mdtest runs to its end, then its stage-in (stopped
//!    and reported as not completed past `stagein_limit_s`); the heavy job is killed after.
//!    The server's CPU time is read at the start and the end of each of the two.
//! 4. About every quarter of a second (250 ms, checked on 100 ms polls) while the light job's
//!    mdtest runs, the server's job statistics, rules and `/metrics` are read; the snapshot that
//!    shows the most of both jobs is kept (a rule lists a job only while it has requests waiting or in service).
//!
//! Everything a run starts is stopped on every path (errors and Ctrl-C included), in reverse
//! order: applications killed and reaped, mounts unmounted (a mount left behind is detached),
//! the server stopped with SIGTERM and its exit checked (its conservation counters must
//! balance), scratch data removed.

use std::fs::File;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use iosets_client::{BlockingClient, ClientConfig};
use iosets_mount::ident::Source;
use iosets_mount::{MountOptions, Mounted};
use iosets_proto::{Control, Reply};
use iosets_types::JobId;
use serde_json::Value;

use super::params::{Params, Setting, HEAVY_JOB, LIGHT_JOB, RULE};
use crate::rig::child::{ServerProc, ServerSpec};
use crate::rig::{quote, scratch_base, this_program};

/// The control token of a run's server.
const TOKEN: &str = "iosets-seed003";
/// How often the applications and the server are checked.
const POLL: Duration = Duration::from_millis(100);
/// How often the server's statistics are read while the light job runs (a rule lists only the
/// jobs with requests held or admitted at that moment, so often enough to catch a short run).
const SNAPSHOT_EVERY: Duration = Duration::from_millis(250);
/// How often the progress line and the snapshots are looked after.
const TICK: Duration = Duration::from_millis(250);
/// How long the server may take to stop after SIGTERM.
const SERVER_STOP: Duration = Duration::from_secs(30);
/// How long the heavy job may take to be served at all before the run is called failed.
const HEAVY_START: Duration = Duration::from_secs(120);
/// The launcher variables an application would read its rank from: removed, so that the
/// harness's own environment (an MPI or Slurm job) does not change the applications.
const LAUNCHER_VARS: [&str; 9] = [
    "SLURM_JOB_ID",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "PMI_RANK",
    "PMI_SIZE",
    "OMPI_MCA_ess_base_jobid",
    "PMIX_NAMESPACE",
];

/// What a run needs.
#[derive(Debug)]
pub(crate) struct RunSpec<'a> {
    /// The workload.
    pub(crate) params: &'a Params,
    /// The setting.
    pub(crate) setting: Setting,
    /// The repetition, from 1.
    pub(crate) rep: usize,
    /// Where its logs go.
    pub(crate) dir: PathBuf,
    /// Shown before the progress line.
    pub(crate) label: String,
    /// Set by Ctrl-C: stop.
    pub(crate) interrupted: &'a AtomicBool,
    /// Test only: kill a process of the run while the light job's mdtest runs.
    pub(crate) kill: Option<Kill>,
}

/// What `--kill` kills.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Victim {
    /// The server.
    Server,
    /// The heavy job's application.
    Heavy,
    /// The light job's application.
    Light,
}

/// `--kill ROLE@SECONDS`: SIGKILL the server, the heavy or the light job that long after the
/// light job's mdtest started (the failure tests).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Kill {
    /// Whom.
    pub(crate) victim: Victim,
    /// Seconds after the light job's start.
    pub(crate) after_s: f64,
}

impl std::str::FromStr for Kill {
    type Err = String;

    fn from_str(s: &str) -> Result<Kill, String> {
        let bad = || format!("{s:?}: expected server|heavy|light@SECONDS, e.g. server@0.5");
        let (who, at) = s.split_once('@').ok_or_else(bad)?;
        let victim = match who.trim() {
            "server" => Victim::Server,
            "heavy" => Victim::Heavy,
            "light" => Victim::Light,
            _ => return Err(bad()),
        };
        let after_s: f64 = at.trim().parse().map_err(|_| bad())?;
        if !(after_s.is_finite() && after_s >= 0.0) {
            return Err(bad());
        }
        Ok(Kill { victim, after_s })
    }
}

/// What a run measured besides the applications' logs (`run.csv`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Measured {
    /// The light job's mdtest, wall seconds (from its start to its exit).
    pub(crate) light_wall_s: f64,
    /// The server's CPU seconds (user + system) over it.
    pub(crate) light_cpu_s: f64,
    /// The heavy job's requests the server completed over it (its job statistics' `ops`; 0
    /// in `reference`).
    pub(crate) heavy_requests: u64,
    /// The light job's requests the server completed over it (every lookup and attribute
    /// read the kernel sends besides the operation itself).
    pub(crate) light_requests: u64,
    /// The stage-in, wall seconds.
    pub(crate) stagein_wall_s: f64,
    /// The server's CPU seconds over it.
    pub(crate) stagein_cpu_s: f64,
    /// Whether the stage-in ended within its limit.
    pub(crate) stagein_completed: bool,
    /// The machine's cores.
    pub(crate) cores: usize,
}

impl Measured {
    /// `run.csv`'s text.
    fn to_csv(&self, setting: Setting, rep: usize) -> String {
        format!(
            "key,value\nsetting,{}\nrep,{rep}\nlight_wall_s,{:.6}\nlight_cpu_s,{:.6}\n\
             heavy_requests,{}\nlight_requests,{}\nstagein_wall_s,{:.6}\nstagein_cpu_s,{:.6}\n\
             stagein_completed,{}\ncores,{}\n",
            setting.name(),
            self.light_wall_s,
            self.light_cpu_s,
            self.heavy_requests,
            self.light_requests,
            self.stagein_wall_s,
            self.stagein_cpu_s,
            self.stagein_completed,
            self.cores
        )
    }

    /// Reads `run.csv` from a run's directory.
    pub(crate) fn load(dir: &Path) -> Result<Measured> {
        let p = dir.join("run.csv");
        let text =
            std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
        let get = |k: &str| -> Result<&str> {
            text.lines()
                .filter_map(|l| l.split_once(','))
                .find(|(key, _)| *key == k)
                .map(|(_, v)| v.trim())
                .ok_or_else(|| anyhow!("{}: no {k} line", p.display()))
        };
        let f = |k: &str| -> Result<f64> {
            let v = get(k)?;
            v.parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| anyhow!("{}: {k} = {v:?} is not a number >= 0", p.display()))
        };
        Ok(Measured {
            light_wall_s: f("light_wall_s")?,
            light_cpu_s: f("light_cpu_s")?,
            heavy_requests: f("heavy_requests")? as u64,
            light_requests: f("light_requests")? as u64,
            stagein_wall_s: f("stagein_wall_s")?,
            stagein_cpu_s: f("stagein_cpu_s")?,
            stagein_completed: match get("stagein_completed")? {
                "true" => true,
                "false" => false,
                v => bail!("{}: stagein_completed = {v:?}", p.display()),
            },
            cores: f("cores")? as usize,
        })
    }
}

/// The server's CPU seconds so far (user + system, all its threads) from `/proc/PID/stat`.
pub(crate) fn cpu_seconds(pid: u32) -> Result<f64> {
    let p = format!("/proc/{pid}/stat");
    let text = std::fs::read_to_string(&p).with_context(|| format!("reading {p}"))?;
    // The command name is in parentheses and may hold spaces: count the fields after it.
    let after = text
        .rfind(')')
        .map(|i| &text[i + 1..])
        .ok_or_else(|| anyhow!("{p}: no command name"))?;
    let f: Vec<&str> = after.split_whitespace().collect();
    // Fields 14 and 15 of proc(5) (utime, stime), 3 being the first after the name.
    let ticks = |i: usize| -> Result<u64> {
        f.get(i)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| anyhow!("{p}: field {} is not a tick count", i + 3))
    };
    let hz = rustix::param::clock_ticks_per_second().max(1);
    Ok((ticks(11)? + ticks(12)?) as f64 / hz as f64)
}

/// Everything a run has started; [`Live::stop`] (or dropping it) stops it all.
#[derive(Debug, Default)]
struct Live {
    /// Applications, by name (`heavy`, `light`, `stagein`).
    apps: Vec<(&'static str, Child)>,
    /// Mount points, with their mounts once mounted.
    mounts: Vec<(PathBuf, Option<Mounted>)>,
    /// The server, until it is stopped (or found dead).
    server: Option<ServerProc>,
    /// The control connection to the server.
    control: Option<BlockingClient>,
    /// The data root and the token: removed at the end.
    scratch: Option<PathBuf>,
}

impl Live {
    /// Kills the applications, unmounts, stops the server (checking how it exits), removes the
    /// scratch data. Idempotent; returns the first error.
    fn stop(&mut self) -> Result<()> {
        for (_, c) in &mut self.apps {
            if matches!(c.try_wait(), Ok(None)) {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
        self.apps.clear();
        let mut first: Option<anyhow::Error> = None;
        for (mountpoint, m) in &mut self.mounts {
            if let Some(m) = m.take() {
                if let Err(e) = m.unmount() {
                    first.get_or_insert(anyhow::Error::new(e).context("unmounting"));
                }
            }
            if iosets_mount::mounted_at(mountpoint).is_some() {
                if let Err(e) = iosets_mount::umount(mountpoint) {
                    first.get_or_insert(anyhow::Error::new(e).context("unmounting"));
                }
            }
            if iosets_mount::mounted_at(mountpoint).is_none() {
                let _ = std::fs::remove_dir(mountpoint.as_path());
            }
        }
        self.mounts.clear();
        self.control = None;
        if let Some(mut s) = self.server.take() {
            if let Err(e) = stop_server(&mut s) {
                first.get_or_insert(e);
            }
        }
        if let Some(dir) = self.scratch.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
        first.map_or(Ok(()), Err)
    }

    /// The application `name`, if started.
    fn app(&mut self, name: &str) -> Option<&mut Child> {
        self.apps
            .iter_mut()
            .find(|(n, _)| *n == name)
            .map(|(_, c)| c)
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// Makes `dir` with the stripe count `stripes`.
fn striped_dir(dir: &Path, stripes: u32) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    rustix::fs::setxattr(
        dir,
        "user.iosets.stripe_count",
        stripes.to_string().as_bytes(),
        rustix::fs::XattrFlags::empty(),
    )
    .map_err(|e| {
        anyhow!(
            "setting user.iosets.stripe_count on {}: {e} (the scratch file system must keep \
             user extended attributes)",
            dir.display()
        )
    })
}

/// The run's secret file in `scratch` (made at its first use, mode 0600).
fn secret_file(scratch: &Path) -> PathBuf {
    scratch.join("secret")
}

/// The run's secret (see [`secret_file`]).
fn run_secret(scratch: &Path) -> Result<iosets_proto::auth::Secret> {
    let path = secret_file(scratch);
    let (secret, _) = iosets_proto::auth::Secret::load_or_create(&path)
        .with_context(|| format!("the run's secret {}", path.display()))?;
    Ok(secret)
}

/// SIGTERM, then the exit within [`SERVER_STOP`] (SIGKILL past it); a server that does not exit
/// 0 (its counters unbalanced, or a crash) is an error naming its log.
fn stop_server(s: &mut ServerProc) -> Result<()> {
    let status = s.stop(SERVER_STOP)?;
    if !status.success() {
        bail!(
            "the server exited with {status} when stopped; see {}{}",
            s.stderr.display(),
            quote(&s.stderr)
        );
    }
    Ok(())
}

/// The server's flags of every setting, but the quota, the token and the secret: arrival order,
/// seed 003's workers, the emulated back end.
pub(crate) fn server_flags(p: &Params) -> Vec<String> {
    vec![
        "--policy".into(),
        "timeorder".into(),
        "--workers".into(),
        p.workers.to_string(),
        "--meta-latency-ms".into(),
        p.meta_latency_ms.to_string(),
        "--meta-fanout".into(),
        "1".into(),
    ]
}

/// Starts `iosets serve` (output in the run's `server.stdout` and `server.stderr`).
fn start_server(spec: &RunSpec<'_>, root: &Path, scratch: &Path) -> Result<ServerProc> {
    let p = spec.params;
    let token = scratch.join("token");
    std::fs::write(&token, format!("{TOKEN}\n"))
        .with_context(|| format!("writing {}", token.display()))?;
    run_secret(scratch)?;
    let mut flags = server_flags(p);
    flags.extend([
        "--token-file".into(),
        token.display().to_string(),
        // The run's own secret (made in its scratch directory): its mounts and control
        // client prove it, nobody else on the node can.
        "--auth-file".into(),
        secret_file(scratch).display().to_string(),
    ]);
    if spec.setting.quota() {
        let q = spec.dir.join("quota.toml");
        std::fs::write(&q, p.quota_toml()).with_context(|| format!("writing {}", q.display()))?;
        flags.extend(["--quota".into(), q.display().to_string()]);
    }
    ServerSpec {
        root: root.to_path_buf(),
        logs: spec.dir.clone(),
        name: "server".into(),
        flags,
        nofile: None,
        metrics: None,
    }
    .start_as("127.0.0.1:0", "server")
}

/// Mounts the server for one job's processes.
fn mount(
    spec: &RunSpec<'_>,
    addr: &str,
    secret: &iosets_proto::auth::Secret,
    mountpoint: &Path,
    threads: u32,
) -> Result<Mounted> {
    if iosets_mount::mounted_at(mountpoint).is_some() {
        bail!(
            "{} is already a mount point; run `iosets umount {}`",
            mountpoint.display(),
            mountpoint.display()
        );
    }
    std::fs::create_dir_all(mountpoint)
        .with_context(|| format!("creating the mount point {}", mountpoint.display()))?;
    let p = spec.params;
    let mut opts = MountOptions::new(mountpoint);
    opts.servers = vec![addr.to_string()];
    opts.token = Some(TOKEN.into());
    opts.auth = Some(secret.clone());
    opts.threads = threads as usize;
    // Every stat and every name lookup must reach the server (the metadata server is what is
    // measured): the kernel keeps no attribute or entry.
    opts.attr_ttl = Duration::ZERO;
    // A request may wait behind the heavy job for long: bound it by the run.
    opts.timeout = Duration::from_secs_f64(p.light_limit_s + p.stagein_limit_s + 60.0);
    // The job comes from IOSETS_JOB_ID only (inside a Slurm job every application would
    // otherwise share the harness's job).
    opts.ident.sources = vec![Source::Env];
    opts.ident.env_vars = vec!["IOSETS_JOB_ID".into()];
    iosets_mount::mount(opts).with_context(|| format!("mounting on {}", mountpoint.display()))
}

/// Starts `iosets app mdtest ARGS` for `job` in `mountpoint`, logging to `DIR/<name>.csv`.
fn spawn_app(
    spec: &RunSpec<'_>,
    name: &str,
    job: u64,
    mountpoint: &Path,
    args: &[String],
) -> Result<Child> {
    let log = spec.dir.join(format!("{name}.csv"));
    let _ = std::fs::remove_file(&log);
    let out = File::create(spec.dir.join(format!("{name}.stdout")))
        .with_context(|| format!("creating {name}.stdout in {}", spec.dir.display()))?;
    let err = File::create(spec.dir.join(format!("{name}.stderr")))
        .with_context(|| format!("creating {name}.stderr in {}", spec.dir.display()))?;
    let mut cmd = Command::new(this_program()?);
    cmd.args(["app", "mdtest", "--dir"])
        .arg(mountpoint)
        .args(args)
        .args(["--job", &job.to_string()])
        .arg("--log")
        .arg(&log)
        .env("IOSETS_JOB_ID", job.to_string());
    for v in LAUNCHER_VARS {
        cmd.env_remove(v);
    }
    cmd.stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .with_context(|| format!("starting the {name} application"))
}

/// A snapshot of the server's view: job statistics, rules, `/metrics`.
#[derive(Debug, Default)]
struct Snapshot {
    /// `iosets ctl jobs --json`.
    jobs: String,
    /// `iosets ctl rule list --json`.
    rules: String,
    /// `GET /metrics`.
    metrics: String,
    /// (jobs of the experiment listed, jobs of the experiment under the rule).
    score: (usize, usize),
}

impl Snapshot {
    /// Reads the three from the server (`/metrics` from its admin address `admin`), and
    /// scores what they show.
    fn take(client: &BlockingClient, admin: &str) -> Result<Snapshot> {
        let json = |op: Control| -> Result<String> {
            match client.control(0, TOKEN, op)? {
                Reply::Json(t) => Ok(t),
                other => bail!("unexpected control reply {other:?}"),
            }
        };
        let jobs = json(Control::Jobs)?;
        let rules = json(Control::Rules)?;
        let metrics = http_get_metrics(admin)?;
        let v: Value = serde_json::from_str(&jobs).context("parsing the job statistics")?;
        let listed = v
            .get("jobs")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let ours = |j: &Value| {
            j.get("job")
                .and_then(Value::as_u64)
                .is_some_and(|id| id == HEAVY_JOB || id == LIGHT_JOB)
                && j.get("ops").and_then(Value::as_u64).unwrap_or(0) > 0
        };
        let ruled = |j: &Value| {
            j.get("rules")
                .and_then(Value::as_array)
                .is_some_and(|r| r.iter().any(|x| x.get("rule") == Some(&Value::from(RULE))))
        };
        let score = (
            listed.iter().filter(|j| ours(j)).count(),
            listed.iter().filter(|j| ours(j) && ruled(j)).count(),
        );
        Ok(Snapshot {
            jobs,
            rules,
            metrics,
            score,
        })
    }

    /// Writes them as `snapshot-jobs.json`, `snapshot-rules.json`, `snapshot-metrics.txt`.
    fn save(&self, dir: &Path) -> Result<()> {
        for (name, text) in [
            ("snapshot-jobs.json", &self.jobs),
            ("snapshot-rules.json", &self.rules),
            ("snapshot-metrics.txt", &self.metrics),
        ] {
            let p = dir.join(name);
            std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?;
        }
        Ok(())
    }
}

/// `GET /metrics` from the server's admin address.
fn http_get_metrics(addr: &str) -> Result<String> {
    let mut s = TcpStream::connect(addr).with_context(|| format!("connecting to {addr}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: iosets\r\n\r\n")?;
    let mut text = String::new();
    s.read_to_string(&mut text)
        .context("reading the server's /metrics")?;
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow!("/metrics: no HTTP header end"))?;
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        bail!(
            "/metrics answered {:?}",
            head.lines().next().unwrap_or_default()
        );
    }
    Ok(body.to_string())
}

/// Rows in a log so far (its header apart).
fn rows_logged(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|t| t.lines().skip(1).filter(|l| !l.trim().is_empty()).count())
        .unwrap_or(0)
}

/// How a waited-for application ended.
enum Ended {
    /// It exited by itself (or was killed by someone else).
    Exited(ExitStatus),
    /// Killed at its limit.
    Limit,
}

/// Runs one setting once. The logs and `run.csv` are in `spec.dir` after.
pub(crate) fn run_one(spec: &RunSpec<'_>) -> Result<Measured> {
    std::fs::create_dir_all(&spec.dir)
        .with_context(|| format!("creating {}", spec.dir.display()))?;
    for stale in ["run.csv", "snapshot-jobs.json", "snapshot-rules.json"] {
        let _ = std::fs::remove_file(spec.dir.join(stale));
    }
    // The mount's log lines go to the run's directory, not between the command's own lines.
    let _log = crate::logsink::to_file(&spec.dir.join("log.txt"))?;
    let mut live = Live::default();
    let result = run_in(spec, &mut live);
    let stopped = live.stop();
    let measured = match (result, stopped) {
        (Ok(m), Ok(())) => m,
        (Ok(_), Err(e)) => return Err(e.context("stopping the run")),
        (Err(e), Ok(())) => return Err(e),
        (Err(e), Err(s)) => bail!("{e:#} (and stopping the run failed: {s:#})"),
    };
    let p = spec.dir.join("run.csv");
    std::fs::write(&p, measured.to_csv(spec.setting, spec.rep))
        .with_context(|| format!("writing {}", p.display()))?;
    Ok(measured)
}

/// The run, with everything it starts recorded in `live` (stopped by the caller).
fn run_in(spec: &RunSpec<'_>, live: &mut Live) -> Result<Measured> {
    let p = spec.params;
    let tag = format!(
        "iosets-seed003-{}-{}-{}",
        std::process::id(),
        spec.setting.name(),
        spec.rep
    );
    let scratch = scratch_base().join(&tag);
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).with_context(|| format!("creating {}", scratch.display()))?;
    live.scratch = Some(scratch.clone());
    let root = scratch.join("root");
    if spec.setting.heavy() {
        for r in 0..p.heavy_procs {
            striped_dir(&root.join(format!("{HEAVY_JOB}.r{r}")), p.heavy_stripes)?;
        }
    }
    for r in 0..p.light_procs {
        striped_dir(&root.join(format!("{LIGHT_JOB}.r{r}")), p.light_stripes)?;
    }
    striped_dir(&root.join(format!("stagein.{LIGHT_JOB}")), p.light_stripes)?;

    let server = start_server(spec, &root, &scratch)?;
    let secret = run_secret(&scratch)?;
    let addr = server.addr.to_string();
    let admin = server.metrics.clone();
    let server_pid = server.pid();
    live.server = Some(server);
    let mnt = |job: u64| std::env::temp_dir().join(format!("{tag}-job{job}"));
    let light_mnt = mnt(LIGHT_JOB);
    live.mounts.push((light_mnt.clone(), None));
    live.mounts.last_mut().expect("pushed").1 =
        Some(mount(spec, &addr, &secret, &light_mnt, p.light_procs)?);
    let mut cfg = ClientConfig::new(JobId(0));
    cfg.retries = 0;
    cfg.connect_timeout = Duration::from_secs(5);
    cfg.auth = Some(secret.clone());
    live.control = Some(
        BlockingClient::connect_to(&[addr.as_str()], cfg)
            .context("connecting to the server's control port")?,
    );

    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{elapsed_precise}] {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.set_prefix(spec.label.clone());
    bar.enable_steady_tick(Duration::from_millis(500));

    if spec.setting.heavy() {
        let heavy_mnt = mnt(HEAVY_JOB);
        live.mounts.push((heavy_mnt.clone(), None));
        live.mounts.last_mut().expect("pushed").1 =
            Some(mount(spec, &addr, &secret, &heavy_mnt, p.heavy_procs)?);
        let args = vec![
            "--procs".to_string(),
            p.heavy_procs.to_string(),
            "--files".into(),
            p.files.to_string(),
            "--iterations".into(),
            u32::MAX.to_string(),
        ];
        let child = spawn_app(spec, "heavy", HEAVY_JOB, &heavy_mnt, &args)?;
        live.apps.push(("heavy", child));
        bar.set_message("heavy job warming up");
        warm_up(spec, live)?;
    }

    // The light job's mdtest.
    let args = vec![
        "--procs".to_string(),
        p.light_procs.to_string(),
        "--files".into(),
        p.files.to_string(),
        "--iterations".into(),
        p.light_iterations.to_string(),
    ];
    let heavy0 = ops_now(live, HEAVY_JOB)?;
    let light0 = ops_now(live, LIGHT_JOB)?;
    let cpu0 = cpu_seconds(server_pid)?;
    let t0 = Instant::now();
    let child = spawn_app(spec, "light", LIGHT_JOB, &light_mnt, &args)?;
    live.apps.push(("light", child));
    let phases = (p.light_iterations * 3) as usize;
    let light_log = spec.dir.join("light.csv");
    let mut best: Option<Snapshot> = None;
    let mut snapshot_error: Option<anyhow::Error> = None;
    let mut last_snapshot = Instant::now();
    let ended = wait_for(spec, live, "light", p.light_limit_s, &mut |live| {
        let done = rows_logged(&light_log) / p.light_procs as usize;
        bar.set_message(format!("light job's mdtest: {done}/{phases} phases done"));
        if last_snapshot.elapsed() >= SNAPSHOT_EVERY {
            last_snapshot = Instant::now();
            let client = live.control.as_ref().expect("connected");
            match Snapshot::take(client, &admin) {
                Ok(s) => {
                    if best.as_ref().is_none_or(|b| s.score >= b.score) {
                        best = Some(s);
                    }
                }
                Err(e) => {
                    snapshot_error.get_or_insert(e);
                }
            }
        }
    })?;
    let light_wall_s = t0.elapsed().as_secs_f64();
    let light_cpu_s = cpu_seconds(server_pid)? - cpu0;
    let heavy_requests = ops_now(live, HEAVY_JOB)?.saturating_sub(heavy0);
    let light_requests = ops_now(live, LIGHT_JOB)?.saturating_sub(light0);
    match ended {
        Ended::Exited(st) if st.success() => {}
        Ended::Exited(st) => bail!(
            "the light job's mdtest failed ({st}); see {}{}",
            spec.dir.join("light.stderr").display(),
            quote(&spec.dir.join("light.stderr"))
        ),
        Ended::Limit => bail!(
            "the light job's mdtest did not end within {} s (--light-limit-s); see {}",
            p.light_limit_s,
            light_log.display()
        ),
    }
    // One last look if the run was shorter than a snapshot period.
    if best.is_none() {
        let client = live.control.as_ref().expect("connected");
        match Snapshot::take(client, &admin) {
            Ok(s) => best = Some(s),
            Err(e) => {
                snapshot_error.get_or_insert(e);
            }
        }
    }
    match best {
        Some(s) => s.save(&spec.dir)?,
        None => {
            let e = snapshot_error.unwrap_or_else(|| anyhow!("no snapshot taken"));
            return Err(e.context("reading the server's job statistics"));
        }
    }

    // The stage-in.
    bar.set_message("stage-in");
    let args = vec![
        "--procs".to_string(),
        p.light_procs.to_string(),
        "--mkdirs".into(),
        p.stagein_dirs.to_string(),
    ];
    let cpu0 = cpu_seconds(server_pid)?;
    let t0 = Instant::now();
    let child = spawn_app(spec, "stagein", LIGHT_JOB, &light_mnt, &args)?;
    live.apps.push(("stagein", child));
    let ended = wait_for(spec, live, "stagein", p.stagein_limit_s, &mut |_| {
        bar.set_message(format!(
            "stage-in: {:.0} s (stopped at {} s)",
            t0.elapsed().as_secs_f64(),
            p.stagein_limit_s
        ));
    })?;
    let stagein_wall_s = t0.elapsed().as_secs_f64();
    let stagein_cpu_s = cpu_seconds(server_pid)? - cpu0;
    let stagein_completed = match ended {
        Ended::Exited(st) if st.success() => true,
        Ended::Exited(st) => bail!(
            "the stage-in failed ({st}); see {}{}",
            spec.dir.join("stagein.stderr").display(),
            quote(&spec.dir.join("stagein.stderr"))
        ),
        Ended::Limit => false,
    };
    bar.finish_and_clear();
    Ok(Measured {
        light_wall_s,
        light_cpu_s,
        heavy_requests,
        light_requests,
        stagein_wall_s,
        stagein_cpu_s,
        stagein_completed,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
    })
}

/// Waits until the heavy job has run `warmup_s` and every one of its processes can have been
/// served (its operations at the server at least its process count).
fn warm_up(spec: &RunSpec<'_>, live: &mut Live) -> Result<()> {
    let p = spec.params;
    let t0 = Instant::now();
    loop {
        check_running(spec, live, None)?;
        let elapsed = t0.elapsed();
        if elapsed.as_secs_f64() >= p.warmup_s
            && ops_now(live, HEAVY_JOB)? >= u64::from(p.heavy_procs)
        {
            return Ok(());
        }
        if elapsed > HEAVY_START {
            bail!(
                "the heavy job was not served within {} s; see {}",
                HEAVY_START.as_secs(),
                spec.dir.join("heavy.stderr").display()
            );
        }
        std::thread::sleep(POLL);
    }
}

/// A job's operations in a job-statistics report (0 if it is not listed).
fn job_ops(jobs_json: &str, job: u64) -> Result<u64> {
    let v: Value = serde_json::from_str(jobs_json).context("parsing the job statistics")?;
    Ok(v.get("jobs")
        .and_then(Value::as_array)
        .and_then(|a| {
            a.iter()
                .find(|j| j.get("job").and_then(Value::as_u64) == Some(job))
        })
        .and_then(|j| j.get("ops").and_then(Value::as_u64))
        .unwrap_or(0))
}

/// A job's operations the server has completed so far.
fn ops_now(live: &Live, job: u64) -> Result<u64> {
    let client = live.control.as_ref().expect("connected");
    match client.control(0, TOKEN, Control::Jobs)? {
        Reply::Json(t) => job_ops(&t, job),
        other => bail!("unexpected control reply {other:?}"),
    }
}

/// Fails if the run was interrupted, the server exited, or the heavy job (other than
/// `awaited`) ended: it must run until the light job is done.
fn check_running(spec: &RunSpec<'_>, live: &mut Live, awaited: Option<&str>) -> Result<()> {
    if spec.interrupted.load(Ordering::Relaxed) {
        bail!("interrupted");
    }
    if let Some(s) = live.server.as_mut() {
        if let Some(st) = s.exited() {
            // Reported here: stopping the run has no server left to stop.
            let stderr = s.stderr.clone();
            live.server = None;
            bail!(
                "the server exited ({st}) during the run; see {}{}",
                stderr.display(),
                quote(&stderr)
            );
        }
    }
    if awaited != Some("heavy") {
        if let Some(h) = live.app("heavy") {
            if let Some(st) = h.try_wait().context("checking the heavy job")? {
                let err = spec.dir.join("heavy.stderr");
                bail!(
                    "the heavy job (job {HEAVY_JOB}) ended ({st}) before the light job was \
                     done; see {}{}",
                    err.display(),
                    quote(&err)
                );
            }
        }
    }
    Ok(())
}

/// Waits for application `name`, checking the rest ([`check_running`]) and calling `tick`
/// every [`TICK`]; kills it at `limit_s`.
fn wait_for(
    spec: &RunSpec<'_>,
    live: &mut Live,
    name: &str,
    limit_s: f64,
    tick: &mut dyn FnMut(&mut Live),
) -> Result<Ended> {
    let t0 = Instant::now();
    let limit = Duration::from_secs_f64(limit_s);
    let mut last_tick = Instant::now();
    let mut kill = spec.kill.filter(|_| name == "light");
    loop {
        if let Some(k) = kill.filter(|k| t0.elapsed().as_secs_f64() >= k.after_s) {
            let victim = match k.victim {
                Victim::Server => {
                    if let Some(s) = live.server.as_mut() {
                        let _ = s.kill9();
                    }
                    None
                }
                Victim::Heavy => live.app("heavy"),
                Victim::Light => live.app("light"),
            };
            if let Some(c) = victim {
                let _ = c.kill();
            }
            kill = None;
        }
        check_running(spec, live, Some(name))?;
        let app = live.app(name).expect("started");
        if let Some(st) = app
            .try_wait()
            .with_context(|| format!("waiting for the {name} application"))?
        {
            return Ok(Ended::Exited(st));
        }
        if t0.elapsed() > limit {
            let _ = app.kill();
            let _ = app.wait();
            return Ok(Ended::Limit);
        }
        if last_tick.elapsed() >= TICK {
            last_tick = Instant::now();
            tick(live);
        }
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_cpu_time() {
        // Burn a little CPU so that at least one tick is counted.
        let t = Instant::now();
        let mut x = 0u64;
        while t.elapsed() < Duration::from_millis(50) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        assert_ne!(x, 1);
        let s = cpu_seconds(std::process::id()).unwrap();
        assert!(s > 0.0, "{s}");
        assert!(cpu_seconds(u32::MAX).is_err());
    }

    #[test]
    fn kills_parse() {
        assert_eq!(
            "server@0.5".parse::<Kill>().unwrap(),
            Kill {
                victim: Victim::Server,
                after_s: 0.5
            }
        );
        assert_eq!("light@0".parse::<Kill>().unwrap().victim, Victim::Light);
        for bad in ["server", "disk@1", "heavy@-1", "heavy@nan", "@1"] {
            assert!(bad.parse::<Kill>().is_err(), "{bad}");
        }
    }

    #[test]
    fn run_files_round_trip() {
        let m = Measured {
            light_wall_s: 12.5,
            light_cpu_s: 3.25,
            heavy_requests: 1234,
            light_requests: 5678,
            stagein_wall_s: 300.0,
            stagein_cpu_s: 1.0,
            stagein_completed: false,
            cores: 2,
        };
        let dir = std::env::temp_dir().join(format!("iosets-s003-run-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("run.csv"), m.to_csv(Setting::Off, 2)).unwrap();
        assert_eq!(Measured::load(&dir).unwrap(), m);
        std::fs::write(dir.join("run.csv"), "key,value\nlight_wall_s,x\n").unwrap();
        assert!(Measured::load(&dir).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn operations_are_read_from_the_job_statistics() {
        let j = r#"{"policy":"timeorder","jobs":[{"job":2,"ops":5},{"job":1,"ops":70}]}"#;
        assert_eq!(job_ops(j, 1).unwrap(), 70);
        assert_eq!(job_ops(j, 2).unwrap(), 5);
        assert_eq!(
            job_ops(r#"{"policy":"timeorder","jobs":[]}"#, 1).unwrap(),
            0
        );
        assert!(job_ops("not json", 1).is_err());
    }
}
