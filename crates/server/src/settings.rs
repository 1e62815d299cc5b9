//! One definition per server setting: its key in `iosets.toml`, its flag of `iosets serve`, its
//! help, how a value is read into a [`ServerConfig`], and how the result is checked.
//!
//! [`SETTINGS`] is the only place a setting is spelled. The file reader
//! ([`ServerConfig::from_toml_str`]) accepts exactly its keys, the command line builds its flags
//! from it (`crates/cli/src/serve_cmd.rs`: names, value names, help, conflicts), and
//! [`ServerConfig::validate`] runs every setting's check. A new setting is one entry here and
//! its field in [`ServerConfig`]; nothing else to copy. (ripgrep keeps its flags the same way, in
//! `crates/core/flags/defs.rs`.)
//!
//! What this is not: the defaults. They stay in [`ServerConfig::new`], which library users and
//! tests call without any file or flag.

use std::path::{Path, PathBuf};

use crate::config::{
    mib_bytes, read_auth_file, read_token_file, MAX_FRAME_LIMIT, MAX_INFLIGHT_BYTES,
    MAX_META_COST_BYTES, MAX_META_LATENCY_MS, MIN_INFLIGHT_BYTES,
};
use crate::ServerConfig;

/// What a setting's value is, and so how a file's value and a flag's text are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `true` or `false`; as a flag, its presence means `true`.
    Switch,
    /// A whole number, at least 0.
    Count,
    /// A number, whole or decimal.
    Number,
    /// Text.
    Text,
    /// A path; in a file, a relative path is taken from the file's directory.
    Path,
    /// Text or a whole number (`inservice_limit`: `auto`, `off` or N).
    Word,
    /// In a file a table of `key = value`s; as a flag, `KEY=VALUE`, repeated.
    Pairs,
    /// In a file a table; as a flag, the path of a file holding that table's keys.
    Table,
}

impl Kind {
    /// What a value of this kind is, for an error naming a value of the wrong type.
    pub fn expected(self) -> &'static str {
        match self {
            Kind::Switch => "true or false",
            Kind::Count => "a whole number (at least 0)",
            Kind::Number => "a number",
            Kind::Text => "a string",
            Kind::Path => "a path (a string)",
            Kind::Word => "a string or a whole number",
            Kind::Pairs | Kind::Table => "a table",
        }
    }
}

/// A value read from the file or a flag, of its setting's [`Kind`], before the setting takes it.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// Of a [`Kind::Switch`].
    Switch(bool),
    /// Of a [`Kind::Count`].
    Count(u64),
    /// Of a [`Kind::Number`].
    Number(f64),
    /// Of a [`Kind::Text`] or a [`Kind::Word`].
    Text(String),
    /// Of a [`Kind::Path`], or a [`Kind::Table`] given as a file.
    Path(PathBuf),
    /// Of a [`Kind::Pairs`].
    Pairs(Vec<(String, String)>),
    /// Of a [`Kind::Table`] given in the file.
    Table(toml::Table),
}

impl Value {
    /// This value as a count that fits `T` (`what` names the setting in the error).
    fn count<T: TryFrom<u64>>(self, what: &str) -> Result<T, String> {
        match self {
            Value::Count(n) => T::try_from(n).map_err(|_| format!("{what} = {n}: too large")),
            other => Err(wrong(what, Kind::Count, &other)),
        }
    }

    fn number(self, what: &str) -> Result<f64, String> {
        match self {
            Value::Number(x) => Ok(x),
            Value::Count(n) => Ok(n as f64),
            other => Err(wrong(what, Kind::Number, &other)),
        }
    }

    fn switch(self, what: &str) -> Result<bool, String> {
        match self {
            Value::Switch(b) => Ok(b),
            other => Err(wrong(what, Kind::Switch, &other)),
        }
    }

    fn text(self, what: &str) -> Result<String, String> {
        match self {
            Value::Text(s) => Ok(s),
            other => Err(wrong(what, Kind::Text, &other)),
        }
    }

    fn path(self, what: &str) -> Result<PathBuf, String> {
        match self {
            Value::Path(p) => Ok(p),
            other => Err(wrong(what, Kind::Path, &other)),
        }
    }
}

/// The reason of a configuration error (without `Display`'s "configuration: ", which the
/// caller's own error adds).
fn reason(e: crate::ServerError) -> String {
    match e {
        crate::ServerError::Config { reason } => reason,
        e => e.to_string(),
    }
}

fn wrong(what: &str, kind: Kind, got: &Value) -> String {
    format!("{what}: expected {}, got {got:?}", kind.expected())
}

/// Sets a setting's field from its value.
type Set = fn(&mut ServerConfig, Value) -> Result<(), String>;
/// Checks a setting's field in the whole configuration (after every value is in).
type Check = fn(&ServerConfig) -> Result<(), String>;

/// One server setting. See the module doc.
#[derive(Debug)]
pub struct Setting {
    /// Its key in `iosets.toml`.
    pub key: &'static str,
    /// Its flag of `iosets serve` (without the `--`); `None`: only in the file (a token in a
    /// command line would show in `ps`; the rest are rarely changed).
    pub flag: Option<&'static str>,
    /// What its value is.
    pub kind: Kind,
    /// The placeholder of the flag's value in the help (`N`, `FILE`, …).
    pub value_name: &'static str,
    /// What it does, its unit and its default: the flag's help.
    pub help: &'static str,
    /// A setting it cannot be given with (in one file, or among the flags).
    pub excludes: Option<&'static str>,
    /// Among the flags: a flag it needs.
    pub requires: Option<&'static str>,
    set: Set,
    check: Check,
}

impl Setting {
    /// Puts `value` into `config` (the value's own errors: a file that cannot be read, a word
    /// that means nothing); the ranges are checked later, by [`ServerConfig::validate`].
    ///
    /// # Errors
    /// A message naming the setting and what is wrong with the value.
    pub fn apply(&self, config: &mut ServerConfig, value: Value) -> Result<(), String> {
        (self.set)(config, value)
    }

    /// Checks this setting's field of `config`.
    ///
    /// # Errors
    /// A message naming the setting, its value and the range it must be in.
    pub fn check(&self, config: &ServerConfig) -> Result<(), String> {
        (self.check)(config)
    }

    /// The setting whose key is `key`.
    pub fn named(key: &str) -> Option<&'static Setting> {
        SETTINGS.iter().find(|s| s.key == key)
    }

    /// Reads a TOML value of a file for this setting (`base`: the file's directory).
    ///
    /// # Errors
    /// `invalid type: …` naming the setting and what it expects.
    pub fn from_toml(&self, value: toml::Value, base: &Path) -> Result<Value, String> {
        let wrong_type = |v: &toml::Value| {
            format!(
                "invalid type for `{}`: {} {v}, expected {}",
                self.key,
                v.type_str(),
                self.kind.expected()
            )
        };
        let resolve = |p: PathBuf| if p.is_relative() { base.join(p) } else { p };
        Ok(match (self.kind, value) {
            (Kind::Switch, toml::Value::Boolean(b)) => Value::Switch(b),
            (Kind::Count, toml::Value::Integer(i)) => match u64::try_from(i) {
                Ok(n) => Value::Count(n),
                Err(_) => return Err(format!("{} = {i}: must be at least 0", self.key)),
            },
            (Kind::Number, toml::Value::Integer(i)) => Value::Number(i as f64),
            (Kind::Number, toml::Value::Float(x)) => Value::Number(x),
            (Kind::Text | Kind::Word, toml::Value::String(s)) => Value::Text(s),
            (Kind::Word, toml::Value::Integer(i)) => Value::Text(i.to_string()),
            (Kind::Path, toml::Value::String(s)) => Value::Path(resolve(PathBuf::from(s))),
            (Kind::Pairs, toml::Value::Table(t)) => {
                let mut pairs = Vec::with_capacity(t.len());
                for (k, v) in t {
                    let v = match v {
                        toml::Value::String(s) => s,
                        toml::Value::Integer(i) => i.to_string(),
                        toml::Value::Float(f) => f.to_string(),
                        toml::Value::Boolean(b) => b.to_string(),
                        other => {
                            return Err(format!(
                                "policy option {k}: {other} is not a string or number"
                            ))
                        }
                    };
                    pairs.push((k, v));
                }
                Value::Pairs(pairs)
            }
            (Kind::Table, toml::Value::Table(t)) => Value::Table(t),
            (_, v) => return Err(wrong_type(&v)),
        })
    }
}

/// `key = value` must be at least 1.
fn at_least_one(key: &str, n: usize) -> Result<(), String> {
    if n == 0 {
        return Err(format!("{key} must be at least 1"));
    }
    Ok(())
}

/// Every setting of the server, in the order of `iosets serve --help`.
pub static SETTINGS: &[Setting] = &[
    Setting {
        key: "root",
        flag: Some("root"),
        kind: Kind::Path,
        value_name: "DIR",
        help: "The directory to serve; no request reaches outside it.",
        excludes: None,
        requires: None,
        set: |c, v| v.path("root").map(|x| c.root = x),
        check: |c| {
            if !c.root.is_dir() {
                return Err(format!("root {} is not a directory", c.root.display()));
            }
            Ok(())
        },
    },
    Setting {
        key: "listen",
        flag: Some("listen"),
        kind: Kind::Text,
        value_name: "ADDR",
        help: "Address to listen on (host:port; port 0 picks a free port, printed at start).",
        excludes: None,
        requires: None,
        set: |c, v| v.text("listen").map(|x| c.listen = x),
        check: |_| Ok(()),
    },
    Setting {
        key: "policy",
        flag: Some("policy"),
        kind: Kind::Text,
        value_name: "POLICY",
        help: "Scheduling policy (see `iosets policies`); default iosets.",
        excludes: None,
        requires: None,
        set: |c, v| v.text("policy").map(|x| c.policy = x),
        check: |_| Ok(()),
    },
    Setting {
        key: "policy_options",
        flag: Some("policy-opt"),
        kind: Kind::Pairs,
        value_name: "KEY=VALUE",
        help: "A policy tunable, KEY=VALUE; repeat for several (in the file: a \
               [policy_options] table).",
        excludes: None,
        requires: None,
        set: |c, v| match v {
            Value::Pairs(p) => {
                c.policy_options = p;
                Ok(())
            }
            other => Err(wrong("policy_options", Kind::Pairs, &other)),
        },
        check: |_| Ok(()),
    },
    Setting {
        key: "workers",
        flag: Some("workers"),
        kind: Kind::Count,
        value_name: "N",
        help: "Worker threads doing the blocking I/O (default 4).",
        excludes: None,
        requires: None,
        set: |c, v| v.count("workers").map(|x| c.workers = x),
        check: |c| {
            if c.workers == 0 || c.workers > 1024 {
                return Err(format!("workers = {}: must be 1..=1024", c.workers));
            }
            Ok(())
        },
    },
    Setting {
        key: "net_threads",
        flag: Some("net-threads"),
        kind: Kind::Count,
        value_name: "N",
        help: "Threads of the network runtime (default 1): each extra one adds wake-ups to a \
               small request's path; raise it where the network outruns one core's copies.",
        excludes: None,
        requires: None,
        set: |c, v| v.count("net_threads").map(|x| c.net_threads = x),
        check: |c| {
            if c.net_threads == 0 || c.net_threads > 64 {
                return Err(format!("net_threads = {}: must be 1..=64", c.net_threads));
            }
            Ok(())
        },
    },
    Setting {
        key: "inservice_limit",
        flag: Some("inservice-limit"),
        kind: Kind::Word,
        value_name: "auto|off|N",
        help: "Data requests (reads, writes) in service at once: `auto` (the default: adapted \
               to the device's service times, so that requests queue in the policy and \
               priorities act), `off` (up to --workers), or a number in 1..=workers. Metadata \
               and fsync are not counted.",
        excludes: None,
        requires: None,
        set: |c, v| {
            v.text("inservice_limit")?
                .parse()
                .map(|x| c.inservice_limit = x)
        },
        check: |c| {
            if let iosets_runtime::InServiceLimit::Fixed(n) = c.inservice_limit {
                if n == 0 || n > c.workers {
                    return Err(format!(
                        "inservice_limit = {n}: must be in 1..={} (the workers), or auto, or off",
                        c.workers
                    ));
                }
            }
            Ok(())
        },
    },
    Setting {
        key: "throttle_mib_s",
        flag: Some("throttle-mib-s"),
        kind: Kind::Number,
        value_name: "MIB_S",
        help: "Emulate a device of this bandwidth, MiB/s (emulation: the I/O is done, then the \
               worker waits until it would have finished on such a device).",
        excludes: None,
        requires: None,
        set: |c, v| {
            v.number("throttle_mib_s")
                .map(|x| c.throttle_mib_s = Some(x))
        },
        check: |c| match c.throttle_mib_s {
            Some(r) if !(r.is_finite() && (0.001..=1e9).contains(&r)) => {
                Err(format!("throttle = {r} MiB/s: must be in [0.001, 1e9]"))
            }
            _ => Ok(()),
        },
    },
    Setting {
        key: "token",
        flag: None,
        kind: Kind::Text,
        value_name: "TOKEN",
        help: "The control token itself (without a token, control requests are refused).",
        excludes: Some("token_file"),
        requires: None,
        set: |c, v| v.text("token").map(|x| c.token = Some(x)),
        check: |c| match &c.token {
            Some(t) if t.trim().is_empty() => Err("the control token is empty".into()),
            _ => Ok(()),
        },
    },
    Setting {
        key: "token_file",
        flag: Some("token-file"),
        kind: Kind::Path,
        value_name: "FILE",
        help: "File holding the control token (without a token, control requests are refused).",
        excludes: Some("token"),
        requires: None,
        set: |c, v| {
            c.token = Some(read_token_file(&v.path("token_file")?).map_err(reason)?);
            Ok(())
        },
        check: |_| Ok(()),
    },
    Setting {
        key: "max_frame_mib",
        flag: None,
        kind: Kind::Number,
        value_name: "MIB",
        help: "Largest frame accepted, in MiB (default 64; in (0, 512]).",
        excludes: None,
        requires: None,
        set: |c, v| {
            let m = v.number("max_frame_mib")?;
            if !(m.is_finite() && m > 0.0 && m <= 512.0) {
                return Err(format!("max_frame_mib = {m}: must be in (0, 512]"));
            }
            c.max_frame = (m * 1024.0 * 1024.0) as u32;
            Ok(())
        },
        check: |c| {
            if (c.max_frame as usize) < iosets_proto::HEADER_LEN + 4096 {
                return Err(format!("max frame of {} bytes is too small", c.max_frame));
            }
            // Larger, and a frame's length prefix could read "GET ", which the port's metrics
            // endpoint claims.
            if c.max_frame > MAX_FRAME_LIMIT {
                return Err(format!(
                    "max frame of {} bytes is above the limit of {MAX_FRAME_LIMIT}",
                    c.max_frame
                ));
            }
            Ok(())
        },
    },
    Setting {
        key: "trace",
        flag: Some("trace"),
        kind: Kind::Path,
        value_name: "FILE.csv",
        help: "Record every served request into this CSV file.",
        excludes: None,
        requires: None,
        set: |c, v| v.path("trace").map(|x| c.trace = Some(x)),
        check: |_| Ok(()),
    },
    Setting {
        key: "state_file",
        flag: Some("state-file"),
        kind: Kind::Path,
        value_name: "FILE.toml",
        help: "Keep the quota rules changed at run time (`iosets ctl rule add/del`) in this file, \
               written at each change and read at start in place of the configuration's \
               [quota], so that they survive a restart (default with --config: \
               iosets-state.toml beside the configuration; without: not kept).",
        excludes: None,
        requires: None,
        set: |c, v| v.path("state_file").map(|x| c.state_file = Some(x)),
        check: |_| Ok(()),
    },
    Setting {
        key: "max_inflight_per_conn",
        flag: None,
        kind: Kind::Count,
        value_name: "N",
        help: "Requests one connection may have in the server at once (default 256).",
        excludes: None,
        requires: None,
        set: |c, v| {
            v.count("max_inflight_per_conn")
                .map(|x| c.max_inflight_per_conn = x)
        },
        check: |c| at_least_one("max_inflight_per_conn", c.max_inflight_per_conn),
    },
    Setting {
        key: "auto_priority",
        flag: Some("auto-priority"),
        kind: Kind::Switch,
        value_name: "",
        help: "Detect each job's I/O period from its requests and give it its Set-10 priority \
               (control-plane priorities always win).",
        excludes: None,
        requires: None,
        set: |c, v| v.switch("auto_priority").map(|x| c.auto_priority = x),
        check: |_| Ok(()),
    },
    Setting {
        key: "forget_idle_s",
        flag: Some("forget-idle-s"),
        kind: Kind::Number,
        value_name: "SECONDS",
        help: "Forget a job idle this long, in seconds (its statistics, detector and automatic \
               priority; a control-plane priority stays). Default 600.",
        excludes: None,
        requires: None,
        set: |c, v| v.number("forget_idle_s").map(|x| c.forget_idle_s = x),
        check: |c| {
            if !(c.forget_idle_s.is_finite() && (0.001..=1e7).contains(&c.forget_idle_s)) {
                return Err(format!(
                    "forget_idle_s = {}: must be in [0.001, 1e7] seconds",
                    c.forget_idle_s
                ));
            }
            Ok(())
        },
    },
    Setting {
        key: "period_error",
        flag: Some("period-error"),
        kind: Kind::Number,
        value_name: "F",
        help: "With --auto-priority: scale every detected period by a factor drawn uniformly in \
               [1-F, 1+F] before choosing the job's set (seed 004's robustness test: 0.5); F in \
               [0, 1).",
        excludes: None,
        requires: None,
        set: |c, v| v.number("period_error").map(|x| c.period_error = x),
        check: |c| {
            if !(0.0..1.0).contains(&c.period_error) {
                return Err(format!(
                    "period_error = {}: must be a fraction in [0, 1) (0.5: each detected period \
                     scaled by 0.5 to 1.5)",
                    c.period_error
                ));
            }
            Ok(())
        },
    },
    Setting {
        key: "period_error_seed",
        flag: Some("period-error-seed"),
        kind: Kind::Count,
        value_name: "N",
        help: "The seed of --period-error's factors (default 0).",
        excludes: None,
        requires: Some("period_error"),
        set: |c, v| {
            v.count("period_error_seed")
                .map(|x| c.period_error_seed = x)
        },
        check: |_| Ok(()),
    },
    Setting {
        key: "max_jobs",
        flag: Some("max-jobs"),
        kind: Kind::Count,
        value_name: "N",
        help: "Jobs to keep statistics for at once; the least recently active go first \
               (default 16384).",
        excludes: None,
        requires: None,
        set: |c, v| v.count("max_jobs").map(|x| c.max_jobs = x),
        check: |c| {
            if !(16..=100_000_000).contains(&c.max_jobs) {
                return Err(format!(
                    "max_jobs = {}: must be in 16..=100000000",
                    c.max_jobs
                ));
            }
            Ok(())
        },
    },
    Setting {
        key: "metrics_max_jobs",
        flag: Some("metrics-max-jobs"),
        kind: Kind::Count,
        value_name: "N",
        help: "Jobs with their own series in /metrics (default 100; the others are summed under \
               job_id=\"other\").",
        excludes: None,
        requires: None,
        set: |c, v| v.count("metrics_max_jobs").map(|x| c.metrics_max_jobs = x),
        check: |c| {
            if c.metrics_max_jobs > 100_000 {
                return Err(format!(
                    "metrics_max_jobs = {}: must be in 0..=100000 (jobs with their own series in \
                     /metrics; the others are summed under job_id=\"other\")",
                    c.metrics_max_jobs
                ));
            }
            Ok(())
        },
    },
    Setting {
        key: "local",
        flag: None,
        kind: Kind::Switch,
        value_name: "",
        help: "Offer the same-host transport (shared memory through a Unix socket; default on).",
        excludes: None,
        requires: None,
        set: |c, v| v.switch("local").map(|x| c.local = x),
        check: |_| Ok(()),
    },
    Setting {
        key: "local_socket",
        flag: None,
        kind: Kind::Path,
        value_name: "PATH",
        help: "The same-host socket's path (default: an abstract socket named after the server).",
        excludes: None,
        requires: None,
        set: |c, v| v.path("local_socket").map(|x| c.local_socket = Some(x)),
        check: |c| match &c.local_socket {
            Some(p) if p.as_os_str().is_empty() || p.as_os_str().len() > 107 => Err(format!(
                "local_socket {}: a Unix socket path must have 1 to 107 bytes",
                p.display()
            )),
            _ => Ok(()),
        },
    },
    Setting {
        key: "local_region_max_mib",
        flag: None,
        kind: Kind::Count,
        value_name: "MIB",
        help: "The largest shared region a same-host client may attach, in MiB (default 1024).",
        excludes: None,
        requires: None,
        set: |c, v| {
            v.count("local_region_max_mib")
                .map(|x| c.local_region_max_mib = x)
        },
        check: |c| {
            if !(1..=65_536).contains(&c.local_region_max_mib) {
                return Err(format!(
                    "local_region_max_mib = {}: must be in 1..=65536",
                    c.local_region_max_mib
                ));
            }
            Ok(())
        },
    },
    Setting {
        key: "meta_cost_bytes",
        flag: Some("meta-cost-bytes"),
        kind: Kind::Count,
        value_name: "BYTES",
        help: "What one metadata request weighs in the policy's byte accounting, in bytes \
               (default 4096; 1 to 1 MiB): metadata is scheduled like a small request, but \
               moves no data.",
        excludes: None,
        requires: None,
        set: |c, v| v.count("meta_cost_bytes").map(|x| c.meta_cost_bytes = x),
        check: |c| {
            if !(1..=MAX_META_COST_BYTES).contains(&c.meta_cost_bytes) {
                return Err(format!(
                    "meta_cost_bytes = {}: must be in 1..={MAX_META_COST_BYTES} (what one \
                     metadata request weighs in the policy's byte accounting)",
                    c.meta_cost_bytes
                ));
            }
            Ok(())
        },
    },
    Setting {
        key: "meta_latency_ms",
        flag: Some("meta-latency-ms"),
        kind: Kind::Number,
        value_name: "MS",
        help: "Emulate a slow metadata back end: hold the worker MS milliseconds per back-end \
               call after a metadata operation (create, unlink, link, rename, symlink, mknod: \
               one call per stripe; others: one). Default 0 (off); at most 60000.",
        excludes: None,
        requires: None,
        set: |c, v| v.number("meta_latency_ms").map(|x| c.meta_latency_ms = x),
        check: |c| {
            if !(c.meta_latency_ms.is_finite()
                && (0.0..=MAX_META_LATENCY_MS).contains(&c.meta_latency_ms))
            {
                return Err(format!(
                    "meta_latency_ms = {}: must be a number of milliseconds in [0, \
                     {MAX_META_LATENCY_MS}] (0: no emulated metadata back end)",
                    c.meta_latency_ms
                ));
            }
            Ok(())
        },
    },
    Setting {
        key: "meta_fanout",
        flag: Some("meta-fanout"),
        kind: Kind::Count,
        value_name: "N",
        help: "The stripe count of a directory without a user.iosets.stripe_count attribute, \
               for --meta-latency-ms (default 1; 1 to 4096).",
        excludes: None,
        requires: None,
        set: |c, v| v.count("meta_fanout").map(|x| c.meta_fanout = x),
        check: |c| {
            if !(1..=crate::worker::meta::MAX_FANOUT).contains(&c.meta_fanout) {
                return Err(format!(
                    "meta_fanout = {}: must be a stripe count in 1..={}",
                    c.meta_fanout,
                    crate::worker::meta::MAX_FANOUT
                ));
            }
            Ok(())
        },
    },
    Setting {
        key: "quota",
        flag: Some("quota"),
        kind: Kind::Table,
        value_name: "FILE",
        help: "Thread quotas, rates and reservations: a TOML file of `[[rule]]` tables (name, \
               match, threads_pct, rate_ops, rate_bytes, strict, reserve_ops, weight), \
               `[[share]]` tables of the fair-share tree (node, weight) and the settings \
               job_share_pct and lend; replaces the configuration's `[quota]`. Change at run \
               time with `iosets ctl rule` and `iosets ctl share`.",
        excludes: None,
        requires: None,
        set: |c, v| match v {
            Value::Table(t) => {
                let q = toml::Value::Table(t)
                    .try_into()
                    .map_err(|e: toml::de::Error| format!("[quota]: {}", e.message().trim()))?;
                c.set_quota_table(&q, "[quota]").map_err(reason)
            }
            Value::Path(p) => c.set_quota_file(&p).map_err(reason),
            other => Err(wrong("quota", Kind::Table, &other)),
        },
        check: |c| {
            iosets_runtime::share::check_shares(&c.shares).map_err(|e| format!("quota: {e}"))?;
            match &c.quota {
                Some(q) => q.validate().map_err(|e| format!("quota: {e}")),
                None => Ok(()),
            }
        },
    },
    Setting {
        key: "auth_file",
        flag: Some("auth-file"),
        kind: Kind::Path,
        value_name: "FILE",
        help: "The cluster's shared secret file (like BeeGFS's connAuthFile; mode 600): every \
               client, on loopback too, must prove it holds the same secret. Without it (and \
               without --insecure-loopback) the node's default secret is used, made at the \
               first start: $IOSETS_AUTH_FILE, else /etc/iosets/secret for root, else \
               ~/.local/state/iosets/secret; `iosets mount`, `ctl` and `top` find it there.",
        excludes: Some("insecure_loopback"),
        requires: None,
        set: |c, v| {
            c.auth = Some(read_auth_file(&v.path("auth_file")?).map_err(reason)?);
            // The two exclude each other: a secret given (a flag over a file's
            // insecure_loopback) is the one that holds.
            c.insecure_loopback = false;
            Ok(())
        },
        check: |_| Ok(()),
    },
    Setting {
        key: "insecure_loopback",
        flag: Some("insecure-loopback"),
        kind: Kind::Switch,
        value_name: "",
        help: "Serve every client on this host without a proof (no secret): any local user can \
               act as any user, since the uid a request claims is believed. For a single-user \
               machine.",
        excludes: Some("auth_file"),
        requires: None,
        set: |c, v| {
            v.switch("insecure_loopback")
                .map(|x| c.insecure_loopback = x)
        },
        check: |c| {
            if c.insecure_loopback && c.auth.is_some() {
                return Err(
                    "insecure_loopback with a cluster secret (auth_file): with a secret every \
                     client proves it, on loopback too; drop one of them"
                        .into(),
                );
            }
            Ok(())
        },
    },
    Setting {
        key: "admin_listen",
        flag: Some("admin-listen"),
        kind: Kind::Text,
        value_name: "ADDR",
        help: "Where to serve GET /metrics, /jobs and /stats over HTTP (default 127.0.0.1:0, \
               printed at start; `none`: nowhere). Never the data port.",
        excludes: None,
        requires: None,
        set: |c, v| {
            let a = v.text("admin_listen")?;
            c.admin_listen = match a.as_str() {
                "" | "none" => None,
                _ => Some(a),
            };
            Ok(())
        },
        check: |c| match &c.admin_listen {
            Some(a) if a.parse::<std::net::SocketAddr>().is_err() && !a.contains(':') => Err(
                format!("admin_listen = {a:?}: must be host:port (e.g. 127.0.0.1:9464)"),
            ),
            _ => Ok(()),
        },
    },
    Setting {
        key: "hints",
        flag: Some("hints"),
        kind: Kind::Text,
        value_name: "POLICY",
        help: "Clients' priority hints: trust, ignore, or cap=P (the highest priority a hint may \
               ask; default cap=1, the Set-10 priority of a 1 s I/O period).",
        excludes: None,
        requires: None,
        set: |c, v| {
            c.hints = v
                .text("hints")?
                .parse()
                .map_err(|e: iosets_proto::hints::BadHints| e.to_string())?;
            Ok(())
        },
        check: |_| Ok(()),
    },
    Setting {
        key: "root_squash",
        flag: Some("root-squash"),
        kind: Kind::Switch,
        value_name: "",
        help: "A client's claim of uid 0 acts as nobody (65534:65534), as NFS's root_squash. \
               Requests that carry a user's credentials are done as that user (the server must \
               run as root).",
        excludes: None,
        requires: None,
        set: |c, v| v.switch("root_squash").map(|x| c.root_squash = x),
        check: |_| Ok(()),
    },
    Setting {
        key: "no_creds",
        flag: Some("no-creds"),
        kind: Kind::Text,
        value_name: "server|nobody|refuse",
        help: "What a request carrying no user's credentials acts as: server (this server's \
               user, the default), nobody, or refuse (EACCES).",
        excludes: None,
        requires: None,
        set: |c, v| v.text("no_creds")?.parse().map(|x| c.no_creds = x),
        check: |_| Ok(()),
    },
    Setting {
        key: "frame_timeout_s",
        flag: Some("frame-timeout-s"),
        kind: Kind::Number,
        value_name: "SECONDS",
        help: "Seconds a frame may take to arrive whole once started (default 30).",
        excludes: None,
        requires: None,
        set: |c, v| v.number("frame_timeout_s").map(|x| c.frame_timeout_s = x),
        check: |c| seconds("frame_timeout_s", c.frame_timeout_s),
    },
    Setting {
        key: "idle_timeout_s",
        flag: Some("idle-timeout-s"),
        kind: Kind::Number,
        value_name: "SECONDS",
        help: "Seconds a connection may stay silent with nothing in flight (default 300).",
        excludes: None,
        requires: None,
        set: |c, v| v.number("idle_timeout_s").map(|x| c.idle_timeout_s = x),
        check: |c| seconds("idle_timeout_s", c.idle_timeout_s),
    },
    Setting {
        key: "write_timeout_s",
        flag: Some("write-timeout-s"),
        kind: Kind::Number,
        value_name: "SECONDS",
        help: "Seconds an answer may wait for a client that does not read (default 60).",
        excludes: None,
        requires: None,
        set: |c, v| v.number("write_timeout_s").map(|x| c.write_timeout_s = x),
        check: |c| seconds("write_timeout_s", c.write_timeout_s),
    },
    Setting {
        key: "max_connections",
        flag: Some("max-connections"),
        kind: Kind::Count,
        value_name: "N",
        help: "Connections at once (default: from the descriptor limit); at the cap the \
               longest-idle connection is closed for a new one.",
        excludes: None,
        requires: None,
        set: |c, v| {
            v.count("max_connections")
                .map(|x| c.max_connections = Some(x))
        },
        check: |c| match c.max_connections {
            Some(n) => at_least_one("max_connections", n),
            None => Ok(()),
        },
    },
    Setting {
        key: "max_inflight_mib_per_conn",
        flag: Some("max-inflight-mib-per-conn"),
        kind: Kind::Number,
        value_name: "MIB",
        help: "MiB of requests (frames and read data) one connection may have in the server \
               (default 256).",
        excludes: None,
        requires: None,
        set: |c, v| {
            let key = "max_inflight_mib_per_conn";
            c.max_inflight_bytes_per_conn = mib_bytes(v.number(key)?, key).map_err(reason)?;
            Ok(())
        },
        check: |c| inflight_bytes("max_inflight_bytes_per_conn", c.max_inflight_bytes_per_conn),
    },
    Setting {
        key: "max_inflight_mib",
        flag: Some("max-inflight-mib"),
        kind: Kind::Number,
        value_name: "MIB",
        help: "MiB of requests all connections together may have in the server (default 2048).",
        excludes: None,
        requires: None,
        set: |c, v| {
            let key = "max_inflight_mib";
            c.max_inflight_bytes = mib_bytes(v.number(key)?, key).map_err(reason)?;
            Ok(())
        },
        check: |c| inflight_bytes("max_inflight_bytes", c.max_inflight_bytes),
    },
];

/// A timeout `t` named `key` is in `[0.1, 86400]` seconds.
fn seconds(key: &str, t: f64) -> Result<(), String> {
    if !(t.is_finite() && (0.1..=86_400.0).contains(&t)) {
        return Err(format!("{key} = {t}: must be in [0.1, 86400] seconds"));
    }
    Ok(())
}

/// An in-flight byte bound `b` named `key` is from 1 MiB to 4 TiB.
fn inflight_bytes(key: &str, b: u64) -> Result<(), String> {
    if !(MIN_INFLIGHT_BYTES..=MAX_INFLIGHT_BYTES).contains(&b) {
        return Err(format!(
            "{key} = {b} bytes: must be from 1 MiB to 4 TiB (requests' frames and read data a \
             connection, or the server, may hold at once)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_flags_are_unique_and_spelled_alike() {
        let mut keys = std::collections::BTreeSet::new();
        let mut flags = std::collections::BTreeSet::new();
        for s in SETTINGS {
            assert!(keys.insert(s.key), "{} twice", s.key);
            if let Some(f) = s.flag {
                assert!(flags.insert(f), "--{f} twice");
                // A flag is its key with dashes, but for the repeated --policy-opt.
                if s.kind != Kind::Pairs {
                    assert_eq!(f, s.key.replace('_', "-"), "{}", s.key);
                }
            }
            for other in [s.excludes, s.requires].into_iter().flatten() {
                assert!(Setting::named(other).is_some(), "{}: {other}?", s.key);
            }
            if let Some(e) = s.excludes {
                assert_eq!(
                    Setting::named(e).unwrap().excludes,
                    Some(s.key),
                    "{}",
                    s.key
                );
            }
            assert!(
                s.help.ends_with('.') || s.help.ends_with(')'),
                "{}: {}",
                s.key,
                s.help
            );
        }
        assert_eq!(SETTINGS.len(), 39);
    }

    #[test]
    fn a_value_of_the_wrong_kind_is_an_error_not_a_panic() {
        let mut c = ServerConfig::new("/");
        for s in SETTINGS {
            let odd = match s.kind {
                Kind::Switch => Value::Count(1),
                _ => Value::Switch(true),
            };
            let e = s.apply(&mut c, odd).unwrap_err();
            assert!(
                e.contains(s.key) || e.contains("expected"),
                "{}: {e}",
                s.key
            );
        }
    }
}
