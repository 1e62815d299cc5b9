//! The AGIOS-compatible shim: AGIOS v2's C interface over an iosets scheduler.
//!
//! Software written for AGIOS (`agios.h` of `francielizanon/agios`, 2019–2020) calls
//! `agios_init(process_request, process_requests, config_file, max_queue_id)`, then
//! `agios_add_request(file_id, type, offset, len, identifier, queue_id)` from any thread; the
//! library calls `process_request(identifier)` back when the policy decides the request goes next
//! (or `process_requests(ids, n)` for an aggregated batch, if given); the caller serves it and
//! calls `agios_release_request(file_id, type, len, offset)`; `agios_exit()` ends it all. This
//! module provides those five functions (and `agios_cancel_request`) with the same signatures, and
//! reads AGIOS's libconfig configuration file (`library_options` group).
//!
//! # How it differs from AGIOS (the full list is in crates/ffi/README.md)
//! - **No spinning.** AGIOS's scheduling thread polls (its sleeps are 0 ns, see the spec). Here the
//!   dispatch threads block in the runtime's `next`, which sleeps on a condition variable until a
//!   request arrives or a policy timer expires: an idle shim uses no CPU.
//! - **Dispatch threads.** AGIOS has one; here `iosets_dispatch_threads` (default 1) threads call
//!   the callbacks. Under `NOOP`, as in AGIOS, the callback runs synchronously inside
//!   `agios_add_request`, on the caller's thread.
//! - **Algorithms** are iosets' policies of the same name (mapping in [`policy_for`]); any iosets
//!   policy name (`wfq`, `iosets`, …) is accepted too, with tunables from `iosets_options`.
//! - **Release** matches the first dispatched request with the same `(file_id, type, offset, len)`,
//!   like AGIOS; a release that matches nothing returns false. Files are identified by a 64-bit
//!   FNV-1a hash of `file_id`.
//! - `agios_cancel_request` is not supported (returns false; the request is still dispatched).
//! - Bad input (NULL `file_id`, unknown type, `len <= 0`, `offset < 0`, `queue_id < 0`, a call
//!   before `agios_init` or after `agios_exit`) returns false instead of crashing.
//! - No trace files, no dynamic algorithm selection, no statistics output.

use std::collections::VecDeque;
use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;

use iosets_runtime::{Completion, Counted, Scheduler, Work};
use iosets_types::hash::fnv1a64;
use iosets_types::hash::IdMap;
use iosets_types::{ClassId, Op, Outcome, Request};

use crate::guard::guard;

mod libconfig;

pub use libconfig::{parse as parse_libconfig, LibconfigError, Value};

/// AGIOS's single-request callback: `void *process_request_user(int64_t req_id)`.
pub type ProcessRequest = unsafe extern "C" fn(i64) -> *mut c_void;
/// AGIOS's batch callback: `void *process_requests_user(int64_t *reqs, int32_t reqnb)`.
pub type ProcessRequests = unsafe extern "C" fn(*mut i64, i32) -> *mut c_void;

/// The configuration file read when `agios_init` gets NULL or "" (AGIOS's `DEFAULT_CONFIGFILE`).
pub const DEFAULT_CONFIG_FILE: &str = "/etc/agios.conf";

/// `RT_READ` of `agios.h`.
pub const RT_READ: i32 = 0;
/// `RT_WRITE` of `agios.h`.
pub const RT_WRITE: i32 = 1;

/// What went wrong in `agios_init` (printed to stderr; AGIOS's interface only returns false).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ShimError {
    /// `default_algorithm` names neither an AGIOS algorithm nor an iosets policy.
    #[error("unknown algorithm {0:?}: expected one of MLF, TO-agg, SJF, aIOLi, TO, SW, NOOP, TWINS, WFQ, or an iosets policy name ({1})")]
    UnknownAlgorithm(String, String),
    /// A setting has the wrong type or an unusable value.
    #[error("library_options.{key}: {problem}")]
    BadSetting {
        /// The key.
        key: &'static str,
        /// What is wrong.
        problem: String,
    },
    /// WFQ's weights file is missing, unreadable or malformed.
    #[error("WFQ weights ({path}): {problem}")]
    WfqWeights {
        /// The `wfq_conf` path.
        path: String,
        /// What is wrong.
        problem: String,
    },
    /// The policy refused its tunables.
    #[error(transparent)]
    Policy(#[from] iosets_policy::PolicyError),
    /// `agios_init` was called while a previous `agios_init` is still active.
    #[error("agios_init called twice without agios_exit")]
    AlreadyInitialised,
    /// `process_request` was NULL.
    #[error("process_request callback is NULL")]
    NoCallback,
}

/// The `library_options` settings the shim uses, with AGIOS's code defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct ShimConfig {
    /// `default_algorithm` (AGIOS default "SJF").
    pub algorithm: String,
    /// `waiting_time`, ns (MLF / aIOLi waits).
    pub waiting_time_ns: i64,
    /// `aioli_quantum`, bytes.
    pub aioli_quantum: i64,
    /// `mlf_quantum`, bytes.
    pub mlf_quantum: i64,
    /// `SW_window`, ms.
    pub sw_window_ms: i64,
    /// `twins_window`, µs.
    pub twins_window_us: i64,
    /// `wfq_conf`: path of WFQ's weights file.
    pub wfq_conf: Option<String>,
    /// iosets extension `iosets_dispatch_threads` (default 1).
    pub dispatch_threads: i64,
    /// iosets extension `iosets_options`: extra `key=value` tunables, comma-separated.
    pub options: Vec<(String, String)>,
}

impl Default for ShimConfig {
    fn default() -> ShimConfig {
        ShimConfig {
            algorithm: "SJF".to_string(),
            waiting_time_ns: 900_000,
            aioli_quantum: 8192,
            mlf_quantum: 8192,
            sw_window_ms: 1000,
            twins_window_us: 1000,
            wfq_conf: None,
            dispatch_threads: 1,
            options: Vec::new(),
        }
    }
}

impl ShimConfig {
    /// Reads the `library_options` group of a parsed libconfig file; missing keys keep their
    /// defaults (AGIOS reads garbage for them).
    ///
    /// # Errors
    /// A key of the wrong type, or a malformed `iosets_options`.
    pub fn from_settings(settings: &[(String, Value)]) -> Result<ShimConfig, ShimError> {
        let mut c = ShimConfig::default();
        let get = |key: &str| {
            settings
                .iter()
                .rev()
                .find(|(k, _)| k == &format!("library_options.{key}"))
                .map(|(_, v)| v)
        };
        let int = |key: &'static str, dst: &mut i64| -> Result<(), ShimError> {
            match get(key) {
                None => Ok(()),
                Some(Value::Int(i)) => {
                    *dst = *i;
                    Ok(())
                }
                Some(v) => Err(ShimError::BadSetting {
                    key,
                    problem: format!("expected an integer, found {v:?}"),
                }),
            }
        };
        let string = |key: &'static str| -> Result<Option<String>, ShimError> {
            match get(key) {
                None => Ok(None),
                Some(Value::Str(s)) => Ok(Some(s.clone())),
                Some(v) => Err(ShimError::BadSetting {
                    key,
                    problem: format!("expected a string, found {v:?}"),
                }),
            }
        };
        if let Some(a) = string("default_algorithm")? {
            c.algorithm = a;
        }
        int("waiting_time", &mut c.waiting_time_ns)?;
        int("aioli_quantum", &mut c.aioli_quantum)?;
        int("mlf_quantum", &mut c.mlf_quantum)?;
        int("SW_window", &mut c.sw_window_ms)?;
        int("twins_window", &mut c.twins_window_us)?;
        c.wfq_conf = string("wfq_conf")?;
        int("iosets_dispatch_threads", &mut c.dispatch_threads)?;
        if !(1..=256).contains(&c.dispatch_threads) {
            return Err(ShimError::BadSetting {
                key: "iosets_dispatch_threads",
                problem: format!("{} is not in 1 ..= 256", c.dispatch_threads),
            });
        }
        if let Some(opts) = string("iosets_options")? {
            let parts: Vec<&str> = opts
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .collect();
            c.options = iosets_policy::tunables::parse_pairs(&parts)?;
        }
        Ok(c)
    }
}

/// A registered policy name and its `key=value` tunables.
pub type PolicyChoice = (&'static str, Vec<(String, String)>);

/// The iosets policy and tunables for `config`'s algorithm, given `agios_init`'s `max_queue_id`.
///
/// | AGIOS | iosets |
/// |---|---|
/// | `NOOP` | `noop` (dispatched inside `agios_add_request`, as AGIOS does) |
/// | `TO` | `timeorder` |
/// | `TO-agg` | `timeorder merge=true` |
/// | `SJF` | `sjf` |
/// | `MLF` | `mlf quantum_bytes=mlf_quantum waiting_time_us=waiting_time/1000` |
/// | `aIOLi` | `aioli quantum_bytes=aioli_quantum waiting_time_us=waiting_time/1000` |
/// | `SW` | `sw window_ms=SW_window` (queue_id is the application) |
/// | `TWINS` | `twins window_us=twins_window queues=max_queue_id+1` (queue_id is the server) |
/// | `WFQ` | `wfq key=class weight.<q>=<weight q from wfq_conf>` (queue_id is the queue) |
///
/// # Errors
/// An unknown algorithm, or a WFQ weights file that cannot be used.
pub fn policy_for(config: &ShimConfig, max_queue_id: i32) -> Result<PolicyChoice, ShimError> {
    let kv = |k: &str, v: String| (k.to_string(), v);
    let wait_us = ((config.waiting_time_ns.max(0) + 500) / 1000).to_string();
    let (name, mut pairs): (&'static str, Vec<(String, String)>) = match config.algorithm.as_str() {
        "NOOP" => ("noop", vec![]),
        "TO" => ("timeorder", vec![]),
        "TO-agg" => ("timeorder", vec![kv("merge", "true".into())]),
        "SJF" => ("sjf", vec![]),
        "MLF" => (
            "mlf",
            vec![
                kv("quantum_bytes", config.mlf_quantum.to_string()),
                kv("waiting_time_us", wait_us),
            ],
        ),
        "aIOLi" => (
            "aioli",
            vec![
                kv("quantum_bytes", config.aioli_quantum.to_string()),
                kv("waiting_time_us", wait_us),
            ],
        ),
        "SW" => ("sw", vec![kv("window_ms", config.sw_window_ms.to_string())]),
        "TWINS" => (
            "twins",
            vec![
                kv("window_us", config.twins_window_us.to_string()),
                kv("queues", (i64::from(max_queue_id.max(0)) + 1).to_string()),
            ],
        ),
        "WFQ" => {
            let path = config
                .wfq_conf
                .clone()
                .ok_or_else(|| ShimError::WfqWeights {
                    path: "(none)".into(),
                    problem: "WFQ needs library_options.wfq_conf, the weights file".into(),
                })?;
            let weights = read_wfq_weights(&path, max_queue_id)?;
            let mut pairs = vec![kv("key", "class".into())];
            for (q, w) in weights.iter().enumerate() {
                pairs.push((format!("weight.{q}"), w.to_string()));
            }
            ("wfq", pairs)
        }
        other => {
            let spec = iosets_policy::registry::POLICIES
                .iter()
                .find(|p| p.name == other)
                .ok_or_else(|| {
                    ShimError::UnknownAlgorithm(
                        other.to_string(),
                        iosets_policy::registry::names().join(", "),
                    )
                })?;
            (spec.name, vec![])
        }
    };
    pairs.extend(config.options.iter().cloned());
    Ok((name, pairs))
}

/// Reads WFQ's weights file as AGIOS does: whitespace-separated integers, one per queue id, exactly
/// `max_queue_id` of them, each > 0 (bytes of service per round; iosets uses them as weights).
fn read_wfq_weights(path: &str, max_queue_id: i32) -> Result<Vec<u64>, ShimError> {
    let err = |problem: String| ShimError::WfqWeights {
        path: path.to_string(),
        problem,
    };
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    let want = usize::try_from(max_queue_id)
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| err(format!("WFQ needs max_queue_id > 0, got {max_queue_id}")))?;
    let mut weights = Vec::with_capacity(want);
    for tok in text.split_whitespace().take(want) {
        let w: i64 = tok
            .parse()
            .map_err(|_| err(format!("{tok:?} is not an integer")))?;
        if w <= 0 {
            return Err(err(format!("weight {w} is not > 0")));
        }
        weights.push(w.unsigned_abs());
    }
    if weights.len() < want {
        return Err(err(format!(
            "{} weights for {want} queues (max_queue_id)",
            weights.len()
        )));
    }
    Ok(weights)
}

/// A dispatched request as AGIOS's release names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Key {
    file: u64,
    op: Op,
    offset: u64,
    len: u64,
}

/// A dispatched batch whose requests are being released one by one.
struct Pending {
    completion: Completion,
    remaining: usize,
    bytes: u64,
}

/// Dispatched, unreleased requests of the files hashing to one shard.
///
/// `by_key` holds the oldest dispatched batch for each key; later batches with the same key (rare:
/// the same range dispatched again before its release) wait in `dups`, oldest first.
#[derive(Default)]
struct Shard {
    by_key: IdMap<Key, u64>,
    dups: IdMap<Key, VecDeque<u64>>,
    batches: IdMap<u64, Pending>,
}

const SHARDS: usize = 16;

struct Shim {
    sched: Scheduler<i64>,
    shards: Box<[Mutex<Shard>]>,
    single: ProcessRequest,
    multi: Option<ProcessRequests>,
    inline_dispatch: bool,
    stop: AtomicBool,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Shim {
    fn shard(&self, file: u64) -> &Mutex<Shard> {
        &self.shards[(file as usize) & (SHARDS - 1)]
    }

    /// Records a dispatched batch for release, then calls the user's callbacks.
    fn deliver(&self, work: Work<i64>) {
        let (mut ids, completion) = work.into_parts();
        let batch = completion.batch();
        let id = batch.id().0;
        let file = batch.head().file.0;
        {
            let mut shard = self.shard(file).lock().unwrap_or_else(|p| p.into_inner());
            for r in batch.requests() {
                let key = Key {
                    file: r.file.0,
                    op: r.op,
                    offset: r.offset,
                    len: r.len,
                };
                if let Some(_older) = shard.by_key.get(&key) {
                    shard.dups.entry(key).or_default().push_back(id);
                } else {
                    shard.by_key.insert(key, id);
                }
            }
            let remaining = batch.len();
            shard.batches.insert(
                id,
                Pending {
                    completion,
                    remaining,
                    bytes: 0,
                },
            );
        }
        // The callbacks run outside every lock: they may call agios_release_request at once.
        match (self.multi, ids.len()) {
            (Some(multi), n) if n > 1 => {
                let n = i32::try_from(n).unwrap_or(i32::MAX);
                // SAFETY: a C function pointer given to agios_init; `ids` holds `n` values and
                // outlives the call.
                unsafe { multi(ids.as_mut_ptr(), n) };
            }
            _ => {
                for &i in &ids {
                    // SAFETY: a C function pointer given to agios_init.
                    unsafe { (self.single)(i) };
                }
            }
        }
    }

    fn release(&self, key: Key) -> bool {
        let mut guard = self
            .shard(key.file)
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let shard = &mut *guard;
        let Some(id) = shard.by_key.remove(&key) else {
            return false;
        };
        if let Some(later) = shard.dups.get_mut(&key) {
            if let Some(next) = later.pop_front() {
                shard.by_key.insert(key, next);
            }
            if later.is_empty() {
                shard.dups.remove(&key);
            }
        }
        let done = {
            let p = shard
                .batches
                .get_mut(&id)
                .expect("every keyed request has its batch");
            p.remaining -= 1;
            p.bytes += key.len;
            p.remaining == 0
        };
        if !done {
            return true;
        }
        let p = shard.batches.remove(&id).expect("present above");
        drop(guard);
        p.completion.complete(Outcome::Done { bytes: p.bytes });
        true
    }

    fn dispatch_loop(&self) {
        while let Some(work) = self.sched.next() {
            if self.stop.load(Ordering::Acquire) {
                // agios_exit: AGIOS drops what is queued without calling back.
                drop(work);
                break;
            }
            self.deliver(work);
        }
    }
}

static SHIM: RwLock<Option<Arc<Shim>>> = RwLock::new(None);

fn current() -> Option<Arc<Shim>> {
    SHIM.read().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Reads the configuration file at `path` (AGIOS's rule: unreadable or unparsable means defaults,
/// with a message on stderr).
fn load_config(path: &str) -> Result<ShimConfig, ShimError> {
    match std::fs::read_to_string(path) {
        Err(e) => {
            eprintln!("iosets (agios shim): cannot read {path}: {e}; using AGIOS's defaults (SJF)");
            Ok(ShimConfig::default())
        }
        Ok(text) => match parse_libconfig(&text) {
            Err(e) => {
                eprintln!("iosets (agios shim): {path}: {e}; using AGIOS's defaults (SJF)");
                Ok(ShimConfig::default())
            }
            Ok(settings) => ShimConfig::from_settings(&settings),
        },
    }
}

fn init(
    single: Option<ProcessRequest>,
    multi: Option<ProcessRequests>,
    path: &str,
    max_queue_id: i32,
) -> Result<(), ShimError> {
    let single = single.ok_or(ShimError::NoCallback)?;
    let config = load_config(path)?;
    let (name, pairs) = policy_for(&config, max_queue_id)?;
    let policy = Counted::build(name, &pairs)?;
    let mut slot = SHIM.write().unwrap_or_else(|p| p.into_inner());
    if slot.is_some() {
        return Err(ShimError::AlreadyInitialised);
    }
    let shim = Arc::new(Shim {
        sched: Scheduler::new(policy),
        shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
        single,
        multi,
        inline_dispatch: name == "noop",
        stop: AtomicBool::new(false),
        threads: Mutex::new(Vec::new()),
    });
    let mut threads = Vec::new();
    for i in 0..config.dispatch_threads {
        let s = Arc::clone(&shim);
        let t = std::thread::Builder::new()
            .name(format!("iosets-agios-{i}"))
            .spawn(move || {
                // A panic here is a bug in iosets; it must not unwind into nothing useful.
                if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.dispatch_loop()))
                    .is_err()
                {
                    eprintln!("iosets (agios shim): dispatch thread panicked; it stopped");
                }
            });
        match t {
            Ok(t) => threads.push(t),
            Err(e) => {
                shim.stop.store(true, Ordering::Release);
                shim.sched.shutdown();
                for t in threads {
                    let _ = t.join();
                }
                return Err(ShimError::BadSetting {
                    key: "iosets_dispatch_threads",
                    problem: format!("cannot start a dispatch thread: {e}"),
                });
            }
        }
    }
    *shim.threads.lock().unwrap_or_else(|p| p.into_inner()) = threads;
    *slot = Some(shim);
    Ok(())
}

/// Borrows a C string.
///
/// # Safety
/// `s` must be NULL or NUL-terminated.
unsafe fn bytes<'a>(s: *const c_char) -> Option<&'a [u8]> {
    // SAFETY: non-NULL checked; NUL-terminated by the caller's contract.
    (!s.is_null()).then(|| unsafe { CStr::from_ptr(s) }.to_bytes())
}

/// `agios_init`: reads the configuration file (`config_file`, or `/etc/agios.conf` when NULL or
/// empty), builds the policy and starts the dispatch thread(s). Returns false (with a message on
/// stderr) when the algorithm is unknown, a setting is unusable, `process_request_user` is NULL, or
/// the shim is already initialised.
///
/// # Safety
/// `config_file` must be NULL or NUL-terminated; the callbacks must be NULL or valid functions that
/// do not unwind (no C++ exception, no longjmp) out of the call.
#[no_mangle]
pub unsafe extern "C" fn agios_init(
    process_request_user: Option<ProcessRequest>,
    process_requests_user: Option<ProcessRequests>,
    config_file: *mut c_char,
    max_queue_id: i32,
) -> bool {
    guard(false, || {
        // SAFETY: the caller's contract on `config_file`.
        let path = match unsafe { bytes(config_file) } {
            None | Some([]) => DEFAULT_CONFIG_FILE.to_string(),
            Some(b) => String::from_utf8_lossy(b).into_owned(),
        };
        match init(
            process_request_user,
            process_requests_user,
            &path,
            max_queue_id,
        ) {
            Ok(()) => true,
            Err(e) => {
                eprintln!("iosets (agios shim): agios_init failed: {e}");
                false
            }
        }
    })
}

/// `agios_exit`: stops the dispatch threads (requests still queued are dropped without a callback,
/// as in AGIOS) and frees everything. Waits for callbacks in progress to return, so it must not be
/// called from inside a callback. Calling it when not initialised does nothing.
#[no_mangle]
pub extern "C" fn agios_exit() {
    guard((), || {
        let Some(shim) = SHIM.write().unwrap_or_else(|p| p.into_inner()).take() else {
            return;
        };
        shim.stop.store(true, Ordering::Release);
        shim.sched.shutdown();
        let threads = std::mem::take(&mut *shim.threads.lock().unwrap_or_else(|p| p.into_inner()));
        for t in threads {
            let _ = t.join();
        }
        // Unreleased batches are completed as abandoned when their tokens drop with the shards.
        drop(shim);
    });
}

fn op_of(kind: i32) -> Option<Op> {
    match kind {
        RT_READ => Some(Op::Read),
        RT_WRITE => Some(Op::Write),
        _ => None,
    }
}

/// `agios_add_request`: queues a request; `identifier` comes back in the callback. `queue_id` is the
/// application (SW), the server (TWINS) or the queue (WFQ); give 0 otherwise. Returns false for a
/// NULL `file_id`, a type other than `RT_READ`/`RT_WRITE`, `len <= 0`, `offset < 0`, `queue_id < 0`,
/// or when the shim is not initialised.
///
/// # Safety
/// `file_id` must be NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn agios_add_request(
    file_id: *mut c_char,
    r#type: i32,
    offset: i64,
    len: i64,
    identifier: i64,
    queue_id: i32,
) -> bool {
    guard(false, || {
        // SAFETY: the caller's contract on `file_id`.
        let Some(name) = (unsafe { bytes(file_id) }) else {
            return false;
        };
        let (Some(op), Ok(offset), Ok(len), Ok(queue)) = (
            op_of(r#type),
            u64::try_from(offset),
            u64::try_from(len),
            u64::try_from(queue_id),
        ) else {
            return false;
        };
        // AGIOS's offsets are int64_t: the end must fit too.
        if len == 0
            || offset
                .checked_add(len)
                .is_none_or(|end| end > i64::MAX as u64)
        {
            return false;
        }
        let Some(shim) = current() else {
            return false;
        };
        let mut req = Request::new(0, queue, fnv1a64(name), offset, len, op);
        req.class = Some(ClassId(queue));
        if shim.sched.submit(req, identifier).is_err() {
            return false;
        }
        if shim.inline_dispatch {
            // AGIOS NOOP: the request is handed out inside agios_add_request.
            if let Some(work) = shim.sched.try_next().work() {
                shim.deliver(work);
            }
        }
        true
    })
}

/// `agios_release_request`: the caller has served the request `(file_id, type, offset, len)`.
/// Matches the first dispatched, unreleased request with those values (as AGIOS does). Returns
/// false if none matches, on bad input, or when not initialised.
///
/// # Safety
/// `file_id` must be NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn agios_release_request(
    file_id: *mut c_char,
    r#type: i32,
    len: i64,
    offset: i64,
) -> bool {
    guard(false, || {
        // SAFETY: the caller's contract on `file_id`.
        let Some(name) = (unsafe { bytes(file_id) }) else {
            return false;
        };
        let (Some(op), Ok(offset), Ok(len)) =
            (op_of(r#type), u64::try_from(offset), u64::try_from(len))
        else {
            return false;
        };
        let Some(shim) = current() else {
            return false;
        };
        shim.release(Key {
            file: fnv1a64(name),
            op,
            offset,
            len,
        })
    })
}

/// `agios_cancel_request`: not supported by this shim; always returns false and the request is
/// still dispatched. (AGIOS's own cancel does not find requests under TWINS or WFQ and returns true
/// anyway.)
///
/// # Safety
/// None needed; the arguments are not read.
#[no_mangle]
pub unsafe extern "C" fn agios_cancel_request(
    _file_id: *mut c_char,
    _type: i32,
    _len: i64,
    _offset: i64,
) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(text: &str) -> ShimConfig {
        ShimConfig::from_settings(&parse_libconfig(text).unwrap()).unwrap()
    }

    #[test]
    fn agios_names_map_to_iosets_policies() {
        for (alg, policy) in [
            ("NOOP", "noop"),
            ("TO", "timeorder"),
            ("TO-agg", "timeorder"),
            ("SJF", "sjf"),
            ("MLF", "mlf"),
            ("aIOLi", "aioli"),
            ("SW", "sw"),
            ("TWINS", "twins"),
            ("iosets", "iosets"),
        ] {
            let c = settings(&format!(
                "library_options: {{ default_algorithm = \"{alg}\"; }};"
            ));
            let (name, pairs) = policy_for(&c, 4).unwrap();
            assert_eq!(name, policy, "{alg}");
            Counted::build(name, &pairs).unwrap_or_else(|e| panic!("{alg}: {e}"));
        }
    }

    #[test]
    fn unknown_algorithm_is_an_error() {
        let c = settings("library_options = { default_algorithm = \"sjf\"; };");
        assert!(policy_for(&c, 1).is_ok(), "iosets' lower-case name");
        let c = settings("library_options = { default_algorithm = \"FIFO\"; };");
        assert!(matches!(
            policy_for(&c, 1),
            Err(ShimError::UnknownAlgorithm(..))
        ));
    }

    #[test]
    fn agios_conf_example_is_read() {
        let c = settings(
            r#"
            # AGIOS's example file, abridged
            library_options:
            {
                trace = false;
                trace_file_prefix = "/tmp/agios_tracefile";
                default_algorithm = "TWINS";
                waiting_time = 900000;
                aioli_quantum = 65536;
                mlf_quantum = 8192;
                SW_window = 1000; // ms
                twins_window = 2000; /* us */
                iosets_dispatch_threads = 2;
            };
            "#,
        );
        assert_eq!(c.algorithm, "TWINS");
        assert_eq!(c.twins_window_us, 2000);
        assert_eq!(c.dispatch_threads, 2);
        let (name, pairs) = policy_for(&c, 3).unwrap();
        assert_eq!(name, "twins");
        assert!(pairs.contains(&("queues".to_string(), "4".to_string())));
        assert!(pairs.contains(&("window_us".to_string(), "2000".to_string())));
    }

    #[test]
    fn wfq_reads_exactly_max_queue_id_positive_weights() {
        let dir = std::env::temp_dir().join(format!("iosets-wfq-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good.conf");
        std::fs::write(&good, "8192 4096\n 99").unwrap();
        let bad = dir.join("bad.conf");
        std::fs::write(&bad, "8192 0").unwrap();
        assert_eq!(
            read_wfq_weights(good.to_str().unwrap(), 2).unwrap(),
            vec![8192, 4096]
        );
        assert!(read_wfq_weights(good.to_str().unwrap(), 4).is_err());
        assert!(read_wfq_weights(bad.to_str().unwrap(), 2).is_err());
        assert!(read_wfq_weights(good.to_str().unwrap(), 0).is_err());
        let c = ShimConfig {
            algorithm: "WFQ".into(),
            wfq_conf: Some(good.to_str().unwrap().into()),
            ..ShimConfig::default()
        };
        let (name, pairs) = policy_for(&c, 2).unwrap();
        assert_eq!(name, "wfq");
        Counted::build(name, &pairs).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
