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
//!   dispatch threads are parked on a condition variable while every added request has been
//!   called back: an idle shim uses no CPU.
//! - **Callbacks inline.** A request the policy lets go at once is called back on the thread that
//!   added it (or whose release freed it), inside `agios_add_request` / `agios_release_request`:
//!   no hand-off to another thread, no wake-up. Under `NOOP`, as in AGIOS, every add calls back
//!   its own request before it returns. Requests a policy holds back for a time (aIOLi/MLF waits,
//!   TWINS/SW windows) are called back by a dispatch thread (`iosets_dispatch_threads`, default
//!   1), woken only then.
//! - **Algorithms** are iosets' policies of the same name (mapping in [`policy_for`]); any iosets
//!   policy name (`wfq`, `iosets`, …) is accepted too, with tunables from `iosets_options`.
//! - **Release** matches the first dispatched request with the same `(file_id, type, offset, len)`,
//!   like AGIOS; a release that matches nothing returns false. Files are identified by a 64-bit
//!   FNV-1a hash of `file_id`.
//! - `agios_cancel_request` is not supported (returns false; the request is still dispatched).
//! - Bad input (NULL `file_id`, unknown type, `len <= 0`, `offset < 0`, `queue_id < 0`, a call
//!   before `agios_init` or after `agios_exit`) returns false instead of crashing.
//! - No trace files, no dynamic algorithm selection, no statistics output.
//!
//! # Lanes
//! `NOOP` keeps no state across requests (each add calls its own request back), so it runs
//! eight schedulers side by side, each with its own lock; a thread adds through the
//! lane it was given at its first add (round robin), so threads that add at once do not wait for
//! each other's lock or bounce its state between cores. Every other algorithm orders requests
//! across jobs and runs one scheduler.

use iosets_types::{FileId, JobId};
use std::cell::Cell;
use std::collections::hash_map::Entry;
use std::collections::VecDeque;
use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use iosets_runtime::{Completion, Counted, Next, Scheduler, Work};
use iosets_types::hash::fnv1a64;
use iosets_types::{ClassId, Op, Outcome, Request};
use parking_lot::{Condvar, Mutex, RwLock};

use crate::guard::guard;
use crate::table::Table;

mod algorithms;
mod libconfig;

pub use algorithms::{
    config_agios_default_algorithm, get_algorithm_from_string, get_algorithm_name_from_index,
    index_of as algorithm_index, name_of as algorithm_name, AIOLI_SCHEDULER, IOSETS_POLICY_BASE,
    IO_SCHEDULER_COUNT, MLF_SCHEDULER, NOOP_SCHEDULER, SJF_SCHEDULER, SW_SCHEDULER,
    TOAGG_SCHEDULER, TO_SCHEDULER, TWINS_SCHEDULER, WFQ_SCHEDULER,
};
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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Key {
    file: u64,
    op: Op,
    offset: u64,
    len: u64,
}

impl std::hash::Hash for Key {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        // Whole words only: the id hasher mixes a word in one step (a derived hash would feed the
        // operation's discriminant byte by byte).
        h.write_u64(self.file ^ self.len.rotate_left(32));
        h.write_u64(self.offset ^ (self.op as u64));
    }
}

impl Key {
    fn of(r: &Request) -> Key {
        Key {
            file: r.file.0,
            op: r.op,
            offset: r.offset,
            len: r.len,
        }
    }
}

/// A dispatched batch of several requests: completed when its last request is released.
struct Merged {
    completion: Mutex<Option<Completion>>,
    remaining: AtomicUsize,
    bytes: AtomicU64,
}

/// What a release answers: a one-request batch, or one request of a merged batch.
// A token carries its batch and its requests' wait causes inline (no allocation per batch);
// boxing it here would cost one per released request.
#[allow(clippy::large_enum_variant)]
enum Held {
    Single(Completion),
    Part(Arc<Merged>),
}

/// The handed-out, unreleased requests with one key, oldest first (a release takes the oldest, as
/// AGIOS does). Two at once are rare: the same range handed out again before its release.
struct Dispatched {
    first: Held,
    later: VecDeque<Held>,
}

/// The schedulers `NOOP` runs side by side (see the module documentation).
const NOOP_LANES: usize = 8;

/// The lane the next thread to add is given.
static NEXT_LANE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's lane number (taken at its first add; `usize::MAX`: none yet), reduced
    /// modulo the number of lanes.
    static LANE: Cell<usize> = const { Cell::new(usize::MAX) };
    /// Whether this thread is inside a callback the shim called.
    static IN_CALLBACK: Cell<bool> = const { Cell::new(false) };
    /// Set by an add or release made inside a callback: the dispatching frame below asks the policy
    /// again once the callback returns (instead of recursing into another callback).
    static ASK_AGAIN: Cell<bool> = const { Cell::new(false) };
}

/// How long an active dispatch thread waits in the runtime before it checks whether anything is
/// still undelivered (and parks if not). Policy timers and completions wake it earlier.
const ACTIVE_RECHECK: Duration = Duration::from_micros(500);

/// The dispatch threads' parking place: they sleep here, using no CPU, while every request added
/// has been called back; an add or release that leaves requests the policy holds back (a timer, a
/// set waiting for a completion) wakes one.
#[derive(Default)]
struct Park {
    state: Mutex<ParkState>,
    cv: Condvar,
    /// A copy of `state.alarm`, read without the lock: an alarm already raised needs no other.
    alarm: AtomicBool,
}

#[derive(Default)]
struct ParkState {
    alarm: bool,
    parked: usize,
    stop: bool,
}

/// Counts of the slow paths, printed at `agios_exit` when `IOSETS_AGIOS_STATS=1`.
#[derive(Default)]
struct SlowPaths {
    alarms: AtomicU64,
    wakeups: AtomicU64,
    dispatcher_batches: AtomicU64,
}

/// One scheduler with what goes with it. Aligned so that two lanes' counters never share a
/// cache line.
#[repr(align(128))]
struct Lane {
    sched: Scheduler<i64>,
    /// Held while a NOOP add submits and takes: the request taken is the one just added.
    noop_gate: Mutex<()>,
    /// Requests added to this lane and not yet handed to a callback.
    undelivered: AtomicUsize,
}

impl Lane {
    fn new(policy: Counted) -> Lane {
        let sched = Scheduler::new(policy);
        // AGIOS's interface shows no statistics: the wait-cause split would be work for nobody.
        // (It cannot be refused: a new scheduler holds no request.)
        let _ = sched.set_wait_causes(false);
        Lane {
            sched,
            noop_gate: Mutex::new(()),
            undelivered: AtomicUsize::new(0),
        }
    }
}

struct Shim {
    /// One scheduler, or [`NOOP_LANES`] under NOOP.
    lanes: Box<[Lane]>,
    /// Handed-out, unreleased requests by key.
    out: Table<Key, Dispatched>,
    single: ProcessRequest,
    multi: Option<ProcessRequests>,
    /// NOOP: every add calls its own request back before it returns (AGIOS's NOOP does).
    noop: bool,
    /// Whether the policy was last seen holding requests back (then releases ask it again).
    holding: AtomicBool,
    park: Park,
    slow: SlowPaths,
    stop: AtomicBool,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Shim {
    /// The lane this thread adds through.
    fn lane(&self) -> &Lane {
        if self.lanes.len() == 1 {
            return &self.lanes[0];
        }
        let i = LANE.with(|l| {
            if l.get() == usize::MAX {
                l.set(NEXT_LANE.fetch_add(1, Ordering::Relaxed));
            }
            l.get()
        });
        &self.lanes[i % self.lanes.len()]
    }

    /// Requests added and not yet handed to a callback, over every lane.
    fn undelivered(&self) -> usize {
        self.lanes
            .iter()
            .map(|l| l.undelivered.load(Ordering::Acquire))
            .sum()
    }

    /// Records a batch `lane` dispatched for release, then calls the user's callbacks (outside
    /// every lock: they may release at once, or add).
    fn deliver(&self, lane: &Lane, work: Work<i64>) {
        let (mut ids, completion) = work.into_parts();
        let batch = completion.batch();
        lane.undelivered.fetch_sub(batch.len(), Ordering::AcqRel);
        if batch.len() == 1 {
            let key = Key::of(batch.head());
            self.hold(key, Held::Single(completion));
        } else {
            let keys: Vec<Key> = batch.requests().map(Key::of).collect();
            let merged = Arc::new(Merged {
                remaining: AtomicUsize::new(keys.len()),
                bytes: AtomicU64::new(0),
                completion: Mutex::new(Some(completion)),
            });
            for key in keys {
                self.hold(key, Held::Part(Arc::clone(&merged)));
            }
        }
        let outer = IN_CALLBACK.with(|c| c.replace(true));
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
        IN_CALLBACK.with(|c| c.set(outer));
    }

    fn hold(&self, key: Key, held: Held) {
        self.out.with(&key, |m| match m.entry(key) {
            Entry::Occupied(mut e) => e.get_mut().later.push_back(held),
            Entry::Vacant(v) => {
                v.insert(Dispatched {
                    first: held,
                    later: VecDeque::new(),
                });
            }
        });
    }

    /// Hands out, on this thread, what the policy lets go now: one batch, and another each time a
    /// callback on this thread added or released something. If the policy holds requests back,
    /// wakes a dispatch thread to wait for them.
    fn pump(&self) {
        if IN_CALLBACK.with(Cell::get) {
            // Inside a callback: the frame that called it asks again when it returns.
            ASK_AGAIN.with(|a| a.set(true));
            return;
        }
        let mut held_back = false;
        for lane in self.lanes.iter() {
            loop {
                match lane.sched.try_next() {
                    Next::Work(w) => self.deliver(lane, w),
                    Next::TimedOut => {
                        held_back = true;
                        break;
                    }
                    Next::Shutdown => return,
                }
                if !ASK_AGAIN.with(|a| a.replace(false)) {
                    break;
                }
            }
        }
        if held_back {
            self.nothing_to_go();
        }
    }

    /// The policy let nothing go: if it holds requests back, a dispatch thread watches them.
    fn nothing_to_go(&self) {
        let held = self.undelivered() > 0;
        self.holding.store(held, Ordering::Relaxed);
        if held {
            self.alarm();
        }
    }

    /// Makes sure a dispatch thread watches the requests the policy holds back.
    fn alarm(&self) {
        if self.park.alarm.load(Ordering::Acquire) {
            return;
        }
        let mut st = self.park.state.lock();
        st.alarm = true;
        self.park.alarm.store(true, Ordering::Release);
        self.slow.alarms.fetch_add(1, Ordering::Relaxed);
        if st.parked > 0 {
            self.park.cv.notify_one();
        }
    }

    /// Adds a request; under NOOP calls it back before returning.
    fn add(&self, req: Request, identifier: i64) -> bool {
        let lane = self.lane();
        lane.undelivered.fetch_add(1, Ordering::AcqRel);
        if self.noop {
            let taken = {
                let _gate = lane.noop_gate.lock();
                match lane.sched.submit_and_try_next(req, identifier) {
                    Ok(next) => next,
                    Err(_) => {
                        lane.undelivered.fetch_sub(1, Ordering::AcqRel);
                        return false;
                    }
                }
            };
            match taken {
                Next::Work(w) => self.deliver(lane, w),
                // NOOP never holds a request back; should it, a dispatch thread serves it.
                Next::TimedOut => self.alarm(),
                Next::Shutdown => {}
            }
            return true;
        }
        if IN_CALLBACK.with(Cell::get) {
            // Inside a callback: queue only; the frame that called it asks again when it returns.
            if lane.sched.submit(req, identifier).is_err() {
                lane.undelivered.fetch_sub(1, Ordering::AcqRel);
                return false;
            }
            ASK_AGAIN.with(|a| a.set(true));
            return true;
        }
        // Queued and, when the policy lets something go at once, handed out: one lock, one
        // clock read.
        match lane.sched.submit_and_try_next(req, identifier) {
            Err(_) => {
                lane.undelivered.fetch_sub(1, Ordering::AcqRel);
                return false;
            }
            Ok(Next::Work(w)) => {
                self.deliver(lane, w);
                if ASK_AGAIN.with(|a| a.replace(false)) {
                    self.pump();
                }
            }
            Ok(Next::TimedOut) => self.nothing_to_go(),
            Ok(Next::Shutdown) => {}
        }
        true
    }

    fn release(&self, key: Key) -> bool {
        let held = self.out.with(&key, |m| {
            let slot = m.get_mut(&key)?;
            match slot.later.pop_front() {
                Some(next) => Some(std::mem::replace(&mut slot.first, next)),
                None => m.remove(&key).map(|d| d.first),
            }
        });
        let Some(held) = held else {
            return false;
        };
        match held {
            Held::Single(c) => c.complete(Outcome::Done { bytes: key.len }),
            Held::Part(m) => {
                m.bytes.fetch_add(key.len, Ordering::AcqRel);
                if m.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
                    let bytes = m.bytes.load(Ordering::Acquire);
                    if let Some(c) = m.completion.lock().take() {
                        c.complete(Outcome::Done { bytes });
                    }
                }
            }
        }
        // A completion can let held requests go (IO-SETS releases a set, a CFQ slice ends).
        if self.holding.load(Ordering::Relaxed) {
            self.pump();
        }
        true
    }

    /// A dispatch thread: parked while nothing is held back; when alarmed, serves the runtime
    /// (policy timers, completions) until every added request has been called back.
    fn dispatch_loop(&self) {
        loop {
            {
                let mut st = self.park.state.lock();
                while !st.alarm && !st.stop {
                    st.parked += 1;
                    self.park.cv.wait(&mut st);
                    st.parked -= 1;
                }
                if st.stop {
                    return;
                }
                st.alarm = false;
                self.park.alarm.store(false, Ordering::Release);
            }
            self.slow.wakeups.fetch_add(1, Ordering::Relaxed);
            // With several lanes, each is waited on in turn for its share of the recheck.
            let wait = ACTIVE_RECHECK / u32::try_from(self.lanes.len()).unwrap_or(u32::MAX);
            loop {
                let mut delivered = false;
                for lane in self.lanes.iter() {
                    if self.stop.load(Ordering::Acquire) {
                        return;
                    }
                    match lane.sched.next_timeout(wait) {
                        Next::Work(work) => {
                            if self.stop.load(Ordering::Acquire) {
                                // agios_exit: AGIOS drops what is queued without calling back.
                                return;
                            }
                            self.slow.dispatcher_batches.fetch_add(1, Ordering::Relaxed);
                            self.deliver(lane, work);
                            ASK_AGAIN.with(|a| a.set(false));
                            delivered = true;
                        }
                        Next::TimedOut => {}
                        Next::Shutdown => return,
                    }
                }
                if !delivered && self.undelivered() == 0 {
                    break;
                }
            }
        }
    }

    /// Stops the dispatch threads and waits for them.
    fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        for lane in self.lanes.iter() {
            lane.sched.shutdown();
        }
        {
            let mut st = self.park.state.lock();
            st.stop = true;
            self.park.cv.notify_all();
        }
        let threads = std::mem::take(&mut *self.threads.lock());
        for t in threads {
            let _ = t.join();
        }
        if std::env::var_os("IOSETS_AGIOS_STATS").is_some_and(|v| v == "1") {
            eprintln!(
                "iosets (agios shim): {} alarms, {} dispatch-thread wake-ups, {} batches called back by a dispatch thread",
                self.slow.alarms.load(Ordering::Relaxed),
                self.slow.wakeups.load(Ordering::Relaxed),
                self.slow.dispatcher_batches.load(Ordering::Relaxed),
            );
        }
    }
}

/// The initialised shim. Every call holds a read lock for its whole length (recursive, so that a
/// callback may call in again), so `agios_exit`'s write lock waits for calls and callbacks in
/// progress on any thread.
static SHIM: RwLock<Option<Arc<Shim>>> = RwLock::new(None);

/// Runs `f` with the initialised shim, or returns `otherwise` when there is none.
fn with_shim<R>(otherwise: R, f: impl FnOnce(&Shim) -> R) -> R {
    let guard = SHIM.read_recursive();
    match guard.as_deref() {
        Some(shim) => f(shim),
        None => otherwise,
    }
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
    let noop = name == "noop";
    let lanes = if noop { NOOP_LANES } else { 1 };
    let lanes = (0..lanes)
        .map(|_| Counted::build(name, &pairs).map(Lane::new))
        .collect::<Result<Box<[Lane]>, _>>()?;
    let mut slot = SHIM.write();
    if slot.is_some() {
        return Err(ShimError::AlreadyInitialised);
    }
    let shim = Arc::new(Shim {
        lanes,
        out: Table::new(),
        single,
        multi,
        noop,
        holding: AtomicBool::new(false),
        park: Park::default(),
        slow: SlowPaths::default(),
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
                *shim.threads.lock() = threads;
                shim.stop();
                return Err(ShimError::BadSetting {
                    key: "iosets_dispatch_threads",
                    problem: format!("cannot start a dispatch thread: {e}"),
                });
            }
        }
    }
    *shim.threads.lock() = threads;
    *slot = Some(shim);
    if let Some(index) = algorithms::index_of(&config.algorithm) {
        algorithms::set_default_algorithm(index);
    }
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

/// `agios_exit`: waits for calls and callbacks in progress on every thread, stops the dispatch
/// threads (requests still queued are dropped without a callback, as in AGIOS) and frees
/// everything. It must not be called from inside a callback. Calling it when not initialised does
/// nothing.
#[no_mangle]
pub extern "C" fn agios_exit() {
    guard((), || {
        if IN_CALLBACK.with(Cell::get) {
            eprintln!("iosets (agios shim): agios_exit called from inside a callback; ignored");
            return;
        }
        let Some(shim) = SHIM.write().take() else {
            return;
        };
        shim.stop();
        // Unreleased batches are completed as abandoned when their tokens drop with the table.
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
        let mut req = Request::builder(JobId(queue), op)
            .file(FileId(fnv1a64(name)))
            .range(offset, len)
            .build();
        req.class = Some(ClassId(queue));
        with_shim(false, |shim| shim.add(req, identifier))
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
        let key = Key {
            file: fnv1a64(name),
            op,
            offset,
            len,
        };
        with_shim(false, |shim| shim.release(key))
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
