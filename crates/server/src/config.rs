//! The server's configuration: command-line flags or an `iosets.toml` file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use toml::Spanned;

use crate::settings::{Setting, SETTINGS};
use crate::{HintPolicy, ServerError};

/// Everything `iosets serve` needs.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ServerConfig {
    /// The directory the server serves; no request reaches outside it.
    pub root: PathBuf,
    /// Address to listen on (`host:port`; port 0 picks a free one).
    pub listen: String,
    /// The scheduling policy's registry name (`iosets policies` lists them).
    pub policy: String,
    /// The policy's tunables, `key=value`.
    pub policy_options: Vec<(String, String)>,
    /// Worker threads doing the blocking I/O.
    pub workers: usize,
    /// Threads of the network runtime, which reads and writes the connections' frames and
    /// runs the scheduler's hand-offs (`net_threads`, default 1). Every extra thread adds
    /// wake-ups to a small request's path (a tokio worker that finds work wakes a sibling):
    /// with one, a stat through the mount took 102 µs against 125 µs with two, and 1 MiB
    /// requests moved as much (BENCHMARKS.md, "Small I/O and metadata through the mount").
    /// Raise it on an I/O node whose network outruns one core's copies.
    pub net_threads: usize,
    /// How many data requests (reads, writes) may be in service at once, below `workers`
    /// (`inservice_limit`: `auto`, `off` or a number; default `auto`). A policy orders only what
    /// queues in front of it: with every request in service at once, the device serves them in
    /// its own order and priorities do nothing. `auto` keeps the device's queue short by its
    /// service times (1–2 on a device that serves one request at a time, about 1.5× the lanes
    /// of a parallel one) and never above `workers`; see [`iosets_runtime::inservice`].
    /// Metadata and fsync are not counted.
    pub inservice_limit: iosets_runtime::InServiceLimit,
    /// Emulated device bandwidth in MiB/s (none: the backing store's own speed).
    pub throttle_mib_s: Option<f64>,
    /// The control token; without one, every control request is refused.
    pub token: Option<String>,
    /// Largest frame accepted, in bytes.
    pub max_frame: u32,
    /// A CSV file to record every served request in (job, op, offset, length, and when it
    /// arrived, was dispatched and completed), for analysis and tests.
    pub trace: Option<PathBuf>,
    /// Where the quota rules changed at run time (`iosets ctl rule add`/`del`) are kept so that
    /// they survive a restart: written at each change (atomically: a temporary file fsynced and
    /// renamed, the directory fsynced) before the change is answered, and read at start in place
    /// of the configuration's `[quota]` ([`ServerConfig::load_state`]). `None`: changes last
    /// until the server stops. [`ServerConfig::from_toml_file`] sets it to
    /// [`STATE_FILE_NAME`] beside the configuration when the file does not name one.
    pub state_file: Option<PathBuf>,
    /// Requests one connection may have in the server at once; the server stops reading a
    /// connection's frames at this limit (backpressure), so a client cannot fill its memory.
    pub max_inflight_per_conn: usize,
    /// Detect each job's I/O period and set its Set-10 priority automatically (`priority = auto`).
    pub auto_priority: bool,
    /// Forget a job idle this long (its statistics, meters, detector and automatic priority;
    /// a control-plane priority stays), in seconds. Default 600 (dmClock drops idle clients
    /// after 10 minutes).
    pub forget_idle_s: f64,
    /// With `auto_priority`: every detected period is scaled by a factor drawn uniformly in
    /// `[1 - period_error, 1 + period_error]` before the job's set is chosen (seed 004's
    /// robustness test used 0.5), deterministic from `period_error_seed`, the job and the
    /// estimate's number. In `[0, 1)`; default 0 (periods applied as detected).
    pub period_error: f64,
    /// The seed of `period_error`'s factors (default 0).
    pub period_error_seed: u64,
    /// Jobs the server keeps statistics for at once (the least recently active go first).
    pub max_jobs: usize,
    /// Jobs given their own series in `/metrics` (the most recently active; the others are
    /// summed under `job_id="other"`), so that the page stays small whatever the number of jobs.
    /// In `0..=100000`; default 100.
    pub metrics_max_jobs: usize,
    /// Offer the same-host transport: a Unix-domain socket beside the TCP listener, on which a
    /// client of this node passes a shared memory region once and then moves data through it
    /// without copying it through a socket. Clients find it by asking over TCP. Default on.
    pub local: bool,
    /// The same-host socket's path; `None` (the default): a Linux abstract socket named after
    /// the server (nothing in the file system).
    pub local_socket: Option<PathBuf>,
    /// The largest shared region a same-host client may attach, in MiB (default 1024). Only
    /// address space: memory is used as the client touches its pages.
    pub local_region_max_mib: u64,
    /// Stop gracefully on SIGTERM and SIGINT (the `iosets serve` command sets it).
    pub handle_signals: bool,
    /// What one metadata request (lookup, create, unlink, …) costs in the policy's byte
    /// accounting, in bytes (default 4096, one page; in `1..=1 MiB`). Metadata moves no data,
    /// but at zero cost a create storm would be free under byte-weighted policies (wfq, and
    /// iosets across sets): a page makes it weigh like the smallest data request. Job statistics
    /// still count it as 0 bytes moved.
    pub meta_cost_bytes: u64,
    /// Emulated latency of the metadata back end, in milliseconds per call (default 0: off; at
    /// most 60000). A worker that served a metadata operation is then held for
    /// `calls × meta_latency_ms` before completing it, as a metadata server's threads wait for
    /// congested storage servers (seed 003); `calls` is 1, or the stripe count for operations
    /// that touch every stripe object (create, mknod, symlink, link, rename, unlink).
    pub meta_latency_ms: f64,
    /// The stripe count of a directory without a `user.iosets.stripe_count` extended attribute
    /// (like `lfs setstripe -c N dir`), for `meta_latency_ms` (default 1; in `1..=4096`).
    pub meta_fanout: u32,
    /// Thread quotas, rates and reservations (seed 003, Lustre NRS TBF, Ceph mClock) in front
    /// of the policy: the `[quota]` table of the configuration, `--quota FILE`, or
    /// [`ServerConfig::set_quota_toml`]; changed at run time with `iosets ctl rule`. Thread
    /// percentages are of `workers`. See [`iosets_runtime::quota`].
    pub quota: Option<iosets_runtime::QuotaConfig>,
    /// Share weights of the fair-share tree (`wfq` with `key=account,user,job`): the `[[share]]`
    /// tables of `[quota]` or of the quota file, changed at run time with `iosets ctl share`
    /// and kept in the state file as the rules are. See [`iosets_runtime::share`].
    pub shares: Vec<iosets_runtime::ShareSpec>,
    /// The cluster's shared secret (`auth_file`, `--auth-file`): every TCP and same-host
    /// socket connection, data and control alike, proves it holds it before anything else is
    /// read ([`iosets_proto::auth`]), on loopback too. Without one (the default of
    /// [`ServerConfig::new`]) no TCP client is served unless
    /// [`insecure_loopback`](ServerConfig::insecure_loopback) says otherwise; the same-host
    /// socket then serves root and the server's own user only (`SO_PEERCRED`), and
    /// [`ServerHandle::connect_in_process`](crate::ServerHandle::connect_in_process) always
    /// works. `iosets serve` makes a secret at first start when none is given
    /// ([`iosets_proto::auth::default_path`]).
    pub auth: Option<iosets_proto::auth::Secret>,
    /// Serve clients on this host without any proof (`insecure_loopback`,
    /// `--insecure-loopback`): loopback TCP peers and every same-host socket peer are served
    /// as they come. **Any local user can then act as any user**: the claimed uid and gid of a
    /// request are believed (NFS `AUTH_SYS` on a node every user logs in to). Default off; only
    /// without a secret (with one, every client proves it).
    pub insecure_loopback: bool,
    /// Listen for TCP clients on [`listen`](ServerConfig::listen) (default true). `false`: no
    /// TCP listener and no same-host socket at all; the server is reached only through
    /// [`ServerHandle::connect_in_process`](crate::ServerHandle::connect_in_process), a channel
    /// no other process can use (`iosets mount --local`).
    pub listen_tcp: bool,
    /// Where `GET /metrics` (Prometheus) and `GET /jobs`, `GET /stats` (JSON job and server
    /// statistics) are served over HTTP, apart from the data port (default `127.0.0.1:0`:
    /// loopback, a free port, see [`crate::ServerHandle::admin_addr`]); `None`: nowhere.
    pub admin_listen: Option<String>,
    /// What to do with the priority hints clients put in their requests (default: cap at
    /// [`crate::DEFAULT_HINT_CAP`]).
    pub hints: HintPolicy,
    /// A claim of uid 0 acts as `nobody` (65534:65534) instead of root (`root_squash`,
    /// `--root-squash`; default off). See [`crate::NoCreds`] and the crate's permission model.
    pub root_squash: bool,
    /// What a request without credentials acts as (`no_creds`: `server`, the default, `nobody`
    /// or `refuse`).
    pub no_creds: crate::NoCreds,
    /// Seconds a frame may take to arrive whole once its first byte came (and the handshake of
    /// an authenticating server to complete); a peer trickling a frame is closed after it.
    /// Default 30 (64 MiB in 30 s is 2.2 MiB/s); in `[0.1, 86400]`.
    pub frame_timeout_s: f64,
    /// Seconds a connection may stay silent with no request in flight before it is closed
    /// (default 300; in `[0.1, 86400]`). Clients connect again when they next need to.
    pub idle_timeout_s: f64,
    /// Seconds an answer may wait to be written to a client that does not read its socket
    /// before the connection is closed (default 60; in `[0.1, 86400]`). The request was done
    /// either way.
    pub write_timeout_s: f64,
    /// Connections open at once (TCP and same-host); at the cap the connection idle the
    /// longest is closed for a new one, and if none is idle the new one is refused. `None`
    /// (the default): from the descriptor limit.
    pub max_connections: Option<usize>,
    /// Bytes one connection may have in the server at once: a request counts its frame, and a
    /// read also the data it will answer (default 256 MiB; at least 1 MiB). The server stops
    /// reading the connection at the bound; a single larger request is let in alone.
    pub max_inflight_bytes_per_conn: u64,
    /// Bytes all connections together may have in the server at once, counted the same way
    /// (default 2 GiB; at least 1 MiB).
    pub max_inflight_bytes: u64,
}

impl ServerConfig {
    /// The defaults for serving `root`: loopback on a free port, `iosets`, 4 workers, no
    /// throttle, no token (control refused), 64 MiB frames, no trace, no signal handling.
    pub fn new(root: impl Into<PathBuf>) -> ServerConfig {
        ServerConfig {
            root: root.into(),
            listen: "127.0.0.1:0".into(),
            policy: "iosets".into(),
            policy_options: Vec::new(),
            workers: 4,
            net_threads: 1,
            inservice_limit: iosets_runtime::InServiceLimit::Auto,
            throttle_mib_s: None,
            token: None,
            max_frame: iosets_proto::DEFAULT_MAX_FRAME,
            trace: None,
            state_file: None,
            max_inflight_per_conn: 256,
            auto_priority: false,
            forget_idle_s: 600.0,
            period_error: 0.0,
            period_error_seed: 0,
            max_jobs: 16_384,
            metrics_max_jobs: 100,
            local: true,
            local_socket: None,
            local_region_max_mib: 1024,
            handle_signals: false,
            meta_cost_bytes: 4096,
            meta_latency_ms: 0.0,
            meta_fanout: 1,
            quota: None,
            shares: Vec::new(),
            auth: None,
            insecure_loopback: false,
            listen_tcp: true,
            admin_listen: Some("127.0.0.1:0".into()),
            hints: HintPolicy::default(),
            root_squash: false,
            no_creds: crate::NoCreds::Server,
            frame_timeout_s: 30.0,
            idle_timeout_s: 300.0,
            write_timeout_s: 60.0,
            max_connections: None,
            max_inflight_bytes_per_conn: 256 * 1024 * 1024,
            max_inflight_bytes: 2 * 1024 * 1024 * 1024,
        }
    }

    /// This configuration with [`insecure_loopback`](ServerConfig::insecure_loopback) on: every
    /// client on this host is served without a proof (any local user can act as any user).
    /// For tests and single-user machines.
    #[must_use]
    pub fn with_insecure_loopback(mut self) -> ServerConfig {
        self.insecure_loopback = true;
        self
    }

    /// Reads an `iosets.toml`: the keys of [`SETTINGS`](crate::settings::SETTINGS), each at
    /// most once, `[policy_options]` and `[quota]` as tables. Unknown keys are errors; relative
    /// paths are relative to the file's directory.
    pub fn from_toml_file(path: &Path) -> Result<ServerConfig, ServerError> {
        let text = std::fs::read_to_string(path).map_err(|e| ServerError::Config {
            reason: format!("cannot read {}: {e}", path.display()),
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        let mut c = ServerConfig::from_toml_str(&text, base).map_err(|e| match e {
            ServerError::Config { reason } => ServerError::Config {
                reason: format!("{}: {reason}", path.display()),
            },
            e => e,
        })?;
        if c.state_file.is_none() {
            c.state_file = Some(base.join(STATE_FILE_NAME));
        }
        Ok(c)
    }

    /// Reads the state file ([`ServerConfig::state_file`]), if there is one, into `quota`: the
    /// rules changed at run time replace the configuration's. Returns the number of rules read,
    /// `None` without a state file.
    ///
    /// # Errors
    /// [`ServerError::Config`] naming the file and the line or rule at fault (the server does not
    /// start then, and the file is left as it is).
    pub fn load_state(&mut self) -> Result<Option<usize>, ServerError> {
        let Some(path) = self.state_file.clone() else {
            return Ok(None);
        };
        let text = match std::fs::read_to_string(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(ServerError::Config {
                    reason: format!("cannot read state file {}: {e}", path.display()),
                })
            }
            Ok(text) => text,
        };
        self.set_quota_toml(&text).map_err(|e| match e {
            ServerError::Config { reason } => ServerError::Config {
                reason: format!("state file {}: {reason}", path.display()),
            },
            e => e,
        })?;
        Ok(Some(self.quota.as_ref().map_or(0, |q| q.rules.len())))
    }

    /// Parses the TOML text of a configuration; relative paths are taken from `base`. Keys are
    /// read in the file's order, so an error names the first mistake and its line.
    pub fn from_toml_str(text: &str, base: &Path) -> Result<ServerConfig, ServerError> {
        let config_error = |reason: String| ServerError::Config { reason };
        let table: BTreeMap<Spanned<String>, Spanned<toml::Value>> =
            toml::from_str(text).map_err(|e| {
                config_error(match e.span().map(|sp| line_at(text, sp.start)) {
                    Some(l) => format!("line {l}: {}", e.message().trim()),
                    None => e.message().trim().to_string(),
                })
            })?;
        let mut entries: Vec<_> = table.into_iter().collect();
        entries.sort_by_key(|(k, _)| k.span().start);
        let given: BTreeSet<&str> = entries.iter().map(|(k, _)| k.as_ref().as_str()).collect();
        let mut c = ServerConfig::new(PathBuf::new());
        for (key, value) in &entries {
            let line = line_at(text, key.span().start);
            let Some(setting) = Setting::named(key.as_ref()) else {
                let keys: Vec<String> = SETTINGS.iter().map(|s| format!("`{}`", s.key)).collect();
                return Err(config_error(format!(
                    "line {line}: unknown field `{}`, expected one of {}",
                    key.as_ref(),
                    keys.join(", ")
                )));
            };
            if let Some(other) = setting.excludes.filter(|o| given.contains(o)) {
                return Err(config_error(format!(
                    "line {line}: give `{}` or `{other}`, not both",
                    setting.key
                )));
            }
            setting
                .from_toml(value.get_ref().clone(), base)
                .and_then(|v| setting.apply(&mut c, v))
                .map_err(|reason| config_error(format!("line {line}: {reason}")))?;
        }
        if !given.contains("root") {
            return Err(config_error("missing key `root`".into()));
        }
        Ok(c)
    }

    /// Sets the quota rules from the text of a quota file (what `--quota FILE` reads): the
    /// keys of the configuration's `[quota]` table at the top level,
    /// ```toml
    /// job_share_pct = 90
    /// lend = false
    /// [[rule]]
    /// name = "compute"
    /// match = "job={1 2}"
    /// threads_pct = 71
    /// ```
    ///
    /// # Errors
    /// [`ServerError::Config`] naming the line or the rule at fault; the configuration is
    /// unchanged then.
    pub fn set_quota_toml(&mut self, text: &str) -> Result<(), ServerError> {
        let q: iosets_runtime::quota::TomlQuota = toml::from_str(text).map_err(|e| {
            let line = e.span().map(|sp| line_at(text, sp.start));
            ServerError::Config {
                reason: match line {
                    Some(l) => format!("quota, line {l}: {}", e.message().trim()),
                    None => format!("quota: {}", e.message().trim()),
                },
            }
        })?;
        self.set_quota_table(&q, "quota")
    }

    /// [`ServerConfig::set_quota_toml`] on the contents of `path`.
    ///
    /// # Errors
    /// As `set_quota_toml`, the message naming the file.
    pub fn set_quota_file(&mut self, path: &Path) -> Result<(), ServerError> {
        let text = std::fs::read_to_string(path).map_err(|e| ServerError::Config {
            reason: format!("cannot read quota file {}: {e}", path.display()),
        })?;
        self.set_quota_toml(&text).map_err(|e| match e {
            ServerError::Config { reason } => ServerError::Config {
                reason: format!("{}: {reason}", path.display()),
            },
            e => e,
        })
    }

    /// Checks every value (each setting's check in [`SETTINGS`]); the server refuses to start
    /// on any error.
    pub fn validate(&self) -> Result<(), ServerError> {
        for s in SETTINGS {
            s.check(self)
                .map_err(|reason| ServerError::Config { reason })?;
        }
        Ok(())
    }
}

/// The state file's name beside a configuration file ([`ServerConfig::state_file`]).
pub const STATE_FILE_NAME: &str = "iosets-state.toml";

/// The state file's first lines.
const STATE_HEADER: &str =
    "# iosets quota state: the rules and shares in force, written by the server at each \
`iosets ctl rule add`, `rule del` or `share`.\n# Read at start in place of the configuration's \
[quota]; delete this file to go back to the configuration's rules and shares.\n";

/// Writes `quota` (the rules in force) to the state file `path`, durably: a temporary file
/// beside it, fsynced, renamed over it, and the directory fsynced. A crash at any point leaves
/// the old file or the new one, whole.
///
/// # Errors
/// Any failure to write, sync or rename (the old file is then still in place).
pub(crate) fn save_state(
    path: &Path,
    quota: Option<&iosets_runtime::QuotaConfig>,
    shares: &[iosets_runtime::ShareSpec],
) -> std::io::Result<()> {
    use std::io::Write;
    let mut table = quota
        .map(iosets_runtime::quota::TomlQuota::from)
        .unwrap_or_default();
    table.share = shares
        .iter()
        .map(iosets_runtime::share::TomlShare::from)
        .collect();
    let text = toml::to_string(&table).map_err(std::io::Error::other)?;
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other("the state file has no file name"))?;
    let tmp = path.with_file_name(format!(".{}.tmp", name.to_string_lossy()));
    let written = std::fs::File::create(&tmp).and_then(|mut f| {
        f.write_all(STATE_HEADER.as_bytes())?;
        f.write_all(text.as_bytes())?;
        f.sync_all()
    });
    if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, path)) {
        // The old file stays; the half-written one goes.
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::File::open(dir)?.sync_all()
}

impl ServerConfig {
    /// Checks a quota table and puts its rules and shares in place of the configuration's.
    pub(crate) fn set_quota_table(
        &mut self,
        q: &iosets_runtime::quota::TomlQuota,
        what: &str,
    ) -> Result<(), ServerError> {
        let err = |e: iosets_runtime::RuntimeError| ServerError::Config {
            reason: format!("{what}: {e}"),
        };
        let quota = iosets_runtime::QuotaConfig::from_toml_value(q).map_err(err)?;
        self.shares = q.shares().map_err(err)?;
        self.quota = Some(quota);
        Ok(())
    }
}

/// The largest `meta_cost_bytes` accepted (1 MiB): above it one metadata request would weigh
/// more than a large data request.
pub const MAX_META_COST_BYTES: u64 = 1024 * 1024;

/// The largest `meta_latency_ms` accepted (one minute per call): beyond it a client's request
/// would time out long before the emulation ends.
pub const MAX_META_LATENCY_MS: f64 = 60_000.0;

/// The largest `max_frame` accepted: 512 MiB of data plus the header room (below the length
/// `GET ` would announce, 0x20544547).
pub const MAX_FRAME_LIMIT: u32 = 512 * 1024 * 1024 + 64 * 1024;

/// The smallest in-flight byte bound accepted.
pub const MIN_INFLIGHT_BYTES: u64 = 1024 * 1024;
/// The largest in-flight byte bound accepted (4 TiB, what a semaphore of KiB can count).
pub const MAX_INFLIGHT_BYTES: u64 = 4 * 1024 * 1024 * 1024 * 1024 - 1024;

/// `mib` MiB in bytes, for an in-flight bound given in MiB (`key` names it in the error): a
/// positive number up to 4 TiB.
pub fn mib_bytes(mib: f64, key: &str) -> Result<u64, ServerError> {
    if !(mib.is_finite() && mib > 0.0 && mib * 1024.0 * 1024.0 <= MAX_INFLIGHT_BYTES as f64) {
        return Err(ServerError::Config {
            reason: format!("{key} = {mib}: must be a positive number of MiB up to 4 TiB"),
        });
    }
    Ok((mib * 1024.0 * 1024.0) as u64)
}

/// Reads the cluster's shared secret (see [`iosets_proto::auth::Secret::from_file`]).
pub fn read_auth_file(path: &Path) -> Result<iosets_proto::auth::Secret, ServerError> {
    iosets_proto::auth::Secret::from_file(path).map_err(|e| ServerError::Config {
        reason: e.to_string(),
    })
}

/// Reads a token from a file (surrounding whitespace removed; empty is an error).
pub fn read_token_file(path: &Path) -> Result<String, ServerError> {
    let t = std::fs::read_to_string(path).map_err(|e| ServerError::Config {
        reason: format!("cannot read token file {}: {e}", path.display()),
    })?;
    let t = t.trim().to_string();
    if t.is_empty() {
        return Err(ServerError::Config {
            reason: format!("token file {} is empty", path.display()),
        });
    }
    Ok(t)
}

/// The line (from 1) of byte `offset` of `text`: a span that starts a line is on that line, not
/// the one before.
fn line_at(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_line_at_fault() {
        let d = std::env::temp_dir();
        let d = d.display();
        // An unknown key, a wrong type, a bad quota rule: each on line 3 (the unknown key's span
        // starts its line, which used to be reported as the line before).
        for (text, want) in [
            (
                format!("root = \"{d}\"\nworkers = 2\nbogus = 1\n"),
                "line 3: unknown field `bogus`",
            ),
            (
                format!("root = \"{d}\"\n\nworkers = \"x\"\n"),
                "line 3: invalid type",
            ),
            (
                format!("root = \"{d}\"\n# a comment\n[bogus]\n"),
                "line 3: unknown field `bogus`",
            ),
        ] {
            let e = ServerConfig::from_toml_str(&text, Path::new("."))
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{text:?}: {e}");
        }
        let mut c = ServerConfig::new(Path::new("/"));
        let e = c
            .set_quota_toml("[[rule]]\nname = \"a\"\nnosuch = 1\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("quota, line 3"), "{e}");
        assert_eq!(line_at("", 0), 1);
        assert_eq!(line_at("a\nb", 99), 2);
    }

    #[test]
    fn a_value_error_names_its_line_and_excluded_pairs_are_refused() {
        for (text, want) in [
            (
                "root = \"x\"\nworkers = 2\nmax_frame_mib = 900\n",
                "line 3: max_frame_mib = 900: must be in (0, 512]",
            ),
            (
                "root = \"x\"\n\nmeta_fanout = -1\n",
                "line 3: meta_fanout = -1: must be at least 0",
            ),
            (
                "root = \"x\"\ntoken = \"t\"\ntoken_file = \"t.key\"\n",
                "line 2: give `token` or `token_file`, not both",
            ),
            (
                "auth_file = \"k\"\ninsecure_loopback = true\nroot = \"x\"\n",
                "line 1: give `auth_file` or `insecure_loopback`, not both",
            ),
            (
                "root = \"x\"\nhints = 3\n",
                "line 2: invalid type for `hints`: integer 3, expected a string",
            ),
            ("workers = 2\n", "missing key `root`"),
        ] {
            let e = ServerConfig::from_toml_str(text, Path::new("/srv"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn inservice_limit_is_auto_off_or_a_count_within_the_workers() {
        let dir = std::env::temp_dir();
        let d = dir.display();
        assert_eq!(
            ServerConfig::new(&dir).inservice_limit,
            iosets_runtime::InServiceLimit::Auto
        );
        for (v, want) in [
            ("\"auto\"", iosets_runtime::InServiceLimit::Auto),
            ("\"off\"", iosets_runtime::InServiceLimit::Off),
            ("3", iosets_runtime::InServiceLimit::Fixed(3)),
            ("\"2\"", iosets_runtime::InServiceLimit::Fixed(2)),
        ] {
            let c = ServerConfig::from_toml_str(
                &format!("root = \"{d}\"\ninservice_limit = {v}\n"),
                Path::new("."),
            )
            .unwrap();
            assert_eq!(c.inservice_limit, want, "{v}");
            c.validate().unwrap();
        }
        for bad in ["0", "-1", "\"many\"", "1.5", "true"] {
            let e = ServerConfig::from_toml_str(
                &format!("root = \"{d}\"\ninservice_limit = {bad}\n"),
                Path::new("."),
            )
            .unwrap_err()
            .to_string();
            assert!(e.contains("inservice_limit"), "{bad}: {e}");
        }
        let mut c = ServerConfig::new(&dir);
        c.workers = 4;
        c.inservice_limit = iosets_runtime::InServiceLimit::Fixed(5);
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("inservice_limit = 5: must be in 1..=4"), "{e}");
    }

    #[test]
    fn toml_with_options_and_unknown_key() {
        let c = ServerConfig::from_toml_str(
            "root = \"data\"\npolicy = \"wfq\"\nworkers = 2\nthrottle_mib_s = 50\ntoken = \"s\"\n[policy_options]\ndefault_weight = 2\n",
            Path::new("/srv"),
        )
        .unwrap();
        assert_eq!(c.root, PathBuf::from("/srv/data"));
        assert_eq!(c.policy, "wfq");
        assert_eq!(
            c.policy_options,
            vec![("default_weight".into(), "2".into())]
        );
        assert_eq!(c.throttle_mib_s, Some(50.0));
        let e = ServerConfig::from_toml_str("root = \"x\"\nworkerz = 3\n", Path::new("."));
        assert!(e.unwrap_err().to_string().contains("workerz"));
        let e = ServerConfig::from_toml_str("listen = \"x\"\n", Path::new("."));
        assert!(e.unwrap_err().to_string().contains("root"));
    }

    #[test]
    fn period_error_keys_and_their_range() {
        let c = ServerConfig::from_toml_str("root = \"x\"\n", Path::new("/srv")).unwrap();
        assert_eq!((c.period_error, c.period_error_seed), (0.0, 0));
        let c = ServerConfig::from_toml_str(
            "root = \"x\"\nauto_priority = true\nperiod_error = 0.5\nperiod_error_seed = 42\n",
            Path::new("/srv"),
        )
        .unwrap();
        assert_eq!((c.period_error, c.period_error_seed), (0.5, 42));
        let mut c = ServerConfig::new(std::env::temp_dir());
        c.period_error = 0.5;
        c.validate().unwrap();
        for bad in [1.2, 1.0, -0.5, f64::NAN] {
            c.period_error = bad;
            let e = c.validate().unwrap_err().to_string();
            assert!(
                e.contains("period_error") && e.contains("[0, 1)"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn metadata_keys_and_their_range() {
        let c = ServerConfig::from_toml_str("root = \"x\"\n", Path::new("/srv")).unwrap();
        assert_eq!(
            (c.meta_cost_bytes, c.meta_latency_ms, c.meta_fanout),
            (4096, 0.0, 1)
        );
        let c = ServerConfig::from_toml_str(
            "root = \"x\"\nmeta_cost_bytes = 512\nmeta_latency_ms = 2.5\nmeta_fanout = 12\n",
            Path::new("/srv"),
        )
        .unwrap();
        assert_eq!(
            (c.meta_cost_bytes, c.meta_latency_ms, c.meta_fanout),
            (512, 2.5, 12)
        );
        let e = ServerConfig::from_toml_str("root = \"x\"\nmeta_fanout = -1\n", Path::new("."));
        assert!(e.is_err());
        let mut c = ServerConfig::new(std::env::temp_dir());
        c.meta_latency_ms = 60_000.0;
        c.meta_fanout = 4096;
        c.meta_cost_bytes = 1024 * 1024;
        c.validate().unwrap();
        for bad in [-1.0, f64::NAN, f64::INFINITY, 60_000.5] {
            c.meta_latency_ms = bad;
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains("meta_latency_ms"), "{bad}: {e}");
        }
        c.meta_latency_ms = 0.0;
        for bad in [0, 4097] {
            c.meta_fanout = bad;
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains("meta_fanout"), "{bad}: {e}");
        }
        c.meta_fanout = 1;
        for bad in [0, 1024 * 1024 + 1] {
            c.meta_cost_bytes = bad;
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains("meta_cost_bytes"), "{bad}: {e}");
        }
    }

    #[test]
    fn metrics_max_jobs_key_and_its_range() {
        let c = ServerConfig::from_toml_str("root = \"x\"\n", Path::new("/srv")).unwrap();
        assert_eq!(c.metrics_max_jobs, 100);
        let c =
            ServerConfig::from_toml_str("root = \"x\"\nmetrics_max_jobs = 0\n", Path::new("/srv"))
                .unwrap();
        assert_eq!(c.metrics_max_jobs, 0);
        let mut c = ServerConfig::new(std::env::temp_dir());
        c.metrics_max_jobs = 100_000;
        c.validate().unwrap();
        c.metrics_max_jobs = 100_001;
        let e = c.validate().unwrap_err().to_string();
        assert!(
            e.contains("metrics_max_jobs") && e.contains("0..=100000"),
            "{e}"
        );
    }

    #[test]
    fn root_squash_and_no_creds_keys() {
        let c = ServerConfig::from_toml_str(
            "root = \"x\"\nroot_squash = true\nno_creds = \"refuse\"\n",
            Path::new("/etc"),
        )
        .unwrap();
        assert!(c.root_squash);
        assert_eq!(c.no_creds, crate::NoCreds::Refuse);
        let d = ServerConfig::from_toml_str("root = \"x\"\n", Path::new("/etc")).unwrap();
        assert!(!d.root_squash);
        assert_eq!(d.no_creds, crate::NoCreds::Server);
        let e = ServerConfig::from_toml_str("root = \"x\"\nno_creds = \"root\"\n", Path::new("/"))
            .unwrap_err();
        assert!(e.to_string().contains("`nobody`"), "{e}");
    }

    #[test]
    fn bounds_hints_admin_and_secret_keys() {
        let c = ServerConfig::from_toml_str("root = \"x\"\n", Path::new("/srv")).unwrap();
        assert_eq!(c.hints, HintPolicy::default());
        assert_eq!(c.admin_listen.as_deref(), Some("127.0.0.1:0"));
        assert!(c.auth.is_none() && c.max_connections.is_none());
        let dir = std::env::temp_dir().join(format!("iosets-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let key = dir.join("cluster.key");
        std::fs::write(&key, "0123456789abcdef0123456789abcdef\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        let c = ServerConfig::from_toml_str(
            "root = \"x\"\nauth_file = \"cluster.key\"\nadmin_listen = \"none\"\nhints = \"cap=0.1\"\n\
             frame_timeout_s = 5\nidle_timeout_s = 60\nwrite_timeout_s = 10\nmax_connections = 100\n\
             max_inflight_mib_per_conn = 16\nmax_inflight_mib = 64.5\n",
            &dir,
        )
        .unwrap();
        assert!(c.auth.is_some() && c.admin_listen.is_none());
        assert_eq!(c.hints.to_string(), "cap=0.1");
        assert_eq!(
            (c.frame_timeout_s, c.idle_timeout_s, c.write_timeout_s),
            (5.0, 60.0, 10.0)
        );
        assert_eq!(c.max_connections, Some(100));
        assert_eq!(c.max_inflight_bytes_per_conn, 16 << 20);
        assert_eq!(c.max_inflight_bytes, 129 << 19);
        std::fs::remove_dir_all(&dir).unwrap();
        for bad in [
            "hints = \"all\"",
            "max_inflight_mib = 0",
            "auth_file = \"missing.key\"",
        ] {
            let text = format!("root = \"x\"\n{bad}\n");
            assert!(
                ServerConfig::from_toml_str(&text, Path::new("/nonexistent")).is_err(),
                "{bad}"
            );
        }
        let mut c = ServerConfig::new(std::env::temp_dir());
        c.validate().unwrap();
        c.idle_timeout_s = 0.0;
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("idle_timeout_s"));
        c.idle_timeout_s = 300.0;
        c.max_inflight_bytes = 1000;
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("max_inflight_bytes"));
        c.max_inflight_bytes = 1 << 30;
        c.admin_listen = Some("nonsense".into());
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("admin_listen"));
    }

    #[test]
    fn same_host_transport_keys() {
        let c = ServerConfig::from_toml_str("root = \"x\"\n", Path::new("/srv")).unwrap();
        assert!(c.local && c.local_socket.is_none());
        let c = ServerConfig::from_toml_str(
            "root = \"x\"\nlocal = false\nlocal_socket = \"run/io.sock\"\nlocal_region_max_mib = 64\n",
            Path::new("/srv"),
        )
        .unwrap();
        assert!(!c.local);
        assert_eq!(c.local_socket, Some(PathBuf::from("/srv/run/io.sock")));
        assert_eq!(c.local_region_max_mib, 64);
        let mut c = ServerConfig::new(std::env::temp_dir());
        c.local_region_max_mib = 0;
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("local_region_max_mib"));
        c.local_region_max_mib = 1;
        c.local_socket = Some(PathBuf::from("x".repeat(200)));
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("local_socket"));
    }
}
