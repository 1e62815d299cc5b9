//! The `JobBook`: everything the runtime keeps per job, fed by the completion path.
//!
//! Per job: counts (requests, bytes each way, failures), bandwidth over the last second and the
//! last ten seconds, one queue-wait histogram, the last priority hint its requests carried, the
//! last few network addresses its requests came from and, with automatic priorities, an online
//! period detector whose confident estimates move the job to its Set-10 set. Per policy and operation: queue-wait and service-time histograms (what
//! `/metrics` exports). Every time is the scheduler's clock.
//!
//! # Automatic priorities
//! Each completed request is fed to the job's [`JobDetector`] as `[arrival, completion]` (reads
//! and writes apart). Two analyses run on the completion path, both bounded:
//! - the **phase check** ([`JobDetector::estimate_phases`], no spectrum, a few microseconds)
//!   whenever a new burst has begun, at most every quarter period (an eighth of the job's age
//!   until a period is known, at most [`MAX_ESTIMATE_INTERVAL`]): a periodic job gets its set
//!   at its third phase start, and a change of behaviour is followed within three of its new
//!   periods, at any time scale;
//! - the **full estimate** (spectral, [`JobDetector::estimate_with`]) at most every
//!   [`BookConfig::estimate_every`], backing off while nothing moves.
//!
//! The job moves when its set changes. With [`BookConfig::period_error`], every estimate's
//! period is scaled by a pseudo-random factor before the set is chosen (seed 004's robustness
//! test): the factor depends only on the seed, the job and the estimate's number, which counts
//! the job's behaviours (it goes up when the detected period moves by more than 20%), so that the
//! set does not flap with each re-estimate of one behaviour.
//!
//! # Memory
//! A job's record is at most [`JOB_RECORD_BYTES`] bytes with detection off (the boxed record,
//! its map slot, its queue-wait histogram at its largest), plus at most [`DETECTOR_BYTES`] with
//! detection on (the detector's segments; the analysis buffers are shared, one set per shard).
//! Typically far less: the histogram holds counters only over the buckets the job's waits
//! reached, and the detector is made at the job's second transfer, so a job that did one
//! request costs about 550 bytes (its wait causes included) (measured: `crates/server/tests/jobs_memory.rs`), and
//! [`crate::Scheduler::book_memory`] reports what is held, allocator rounding included
//! ([`malloc_chunk`]). The peers of a job ([`Peers`]) are a fixed array in the record. The book
//! holds at most [`BookConfig::max_jobs`] records: a new job arriving in a full shard (each
//! holds `max_jobs / 16`) evicts the least recently active eighth of it. A job idle for
//! [`BookConfig::forget_after`] is forgotten (its record dropped, its automatic priority
//! withdrawn; a priority set by the control plane stays).
//!
//! # Locks
//! The book is split in [`SHARDS`] shards by job, each behind its own mutex, taken after the
//! scheduler's lock is released and never while holding it. A priority move found by a detector is
//! applied afterwards under the scheduler's lock alone: priorities have one home (the scheduler's
//! state) and one precedence (control > auto > hint).

use std::mem::size_of;
use std::net::IpAddr;
use std::time::Duration;

use iosets_period::online::{Direction, JobDetector, OnlineConfig};
use iosets_period::starts::PhaseStarts;
use iosets_period::{Analyzer, Config, Event};
use iosets_policy::set10::SetMapping;
use iosets_types::hash::IdMap;
use iosets_types::{Batch, JobId, Nanos, Op, Outcome, Priority};

use crate::stats::{OpLatency, Peers};
use crate::sync::{AtomicUsize, Mutex, Ordering};
use crate::why::{Split, WaitCauses};
use crate::work::moved_bytes;

/// Shards of the book (a power of two).
pub const SHARDS: usize = 16;

/// Longest latency the histograms resolve (one hour); longer ones are recorded as one hour.
use crate::stats::HIGHEST_NS;

/// Segments each direction of a job's detector keeps: each buffer then never grows past 128
/// segments, 256 for a job that both reads and writes.
const DETECTOR_SEGMENTS: usize = 127;

/// Longest time between two phase checks, or two full estimates, of a job's period.
pub const MAX_ESTIMATE_INTERVAL: Nanos = Nanos(64_000_000_000);

/// Most new bursts between two estimates of a settled job: a long-period job is re-estimated
/// every 8 periods at most, not every period.
const MAX_BURSTS_BETWEEN: u64 = 8;

/// The analysis the book runs: coarser than [`Config::online`] (1,024 bins, refined to at most
/// 4,096), four times cheaper, and still 32 bins per period over the 32 periods of history a
/// detector keeps — plenty to tell a period's order of magnitude, which is all Set-10 needs.
fn analysis() -> Config {
    Config {
        bins: 1 << 10,
        max_bins: 1 << 12,
        ..Config::online()
    }
}

/// Bytes of one job's record with detection off, at most: the record (boxed), its slot in its
/// shard's map (a map is at least 7/16 full once it has grown, so a slot of 16 bytes and its
/// control byte cost at most 39 bytes per record), and its queue-wait histogram at its largest
/// ([`WAIT_BUCKETS`] `u32` counters; a histogram is allocated only over the buckets the job's
/// waits reached, so a job whose requests all waited about as long holds a few counters).
pub const JOB_RECORD_BYTES: usize = malloc_chunk(size_of::<JobRecord>())
    + (size_of::<(JobId, Box<JobRecord>)>() + 1) * 16 / 7
    + 1
    + malloc_chunk(WAIT_BUCKETS * 4);

/// Most heap bytes a job's detector holds: two directions of 128 segments of 24 bytes, their
/// detectors' fields, plus its own fields (each allocation rounded up as [`malloc_chunk`] does).
/// A job gets a detector at its second completion that moved bytes (its first is kept in a
/// 64-byte box until then): a job that did one request never holds one.
pub const DETECTOR_BYTES: usize = 2
    * (malloc_chunk((DETECTOR_SEGMENTS + 1) * size_of::<Event>())
        + malloc_chunk(size_of::<iosets_period::online::OnlineDetector>()))
    + malloc_chunk(size_of::<Detect>())
    + 64;

/// The bytes the allocator takes for a request of `n` bytes: glibc's chunk (the request plus an
/// 8-byte header, rounded up to 16, at least 32); none for `n` = 0 (no allocation). Other
/// allocators' size classes are of the same order.
pub const fn malloc_chunk(n: usize) -> usize {
    if n == 0 {
        0
    } else {
        let c = (n + 8 + 15) & !15;
        if c < 32 {
            32
        } else {
            c
        }
    }
}

/// Bytes a hash map of capacity `capacity` over entries of `entry` bytes allocates
/// (hashbrown's table: a power-of-two number of slots, 1/8 of them kept free, one control byte
/// per slot and 16 more).
fn map_bytes(capacity: usize, entry: usize) -> usize {
    if capacity == 0 {
        return 0;
    }
    let slots = if capacity < 8 {
        (capacity + 1).next_power_of_two()
    } else {
        (capacity * 8 / 7).next_power_of_two()
    };
    malloc_chunk(slots * (entry + 1) + 16)
}

/// Settings of the book. Build from [`BookConfig::default`] with the setters.
#[derive(Clone, Debug)]
pub struct BookConfig {
    pub(crate) auto_priority: bool,
    pub(crate) forget_after: Duration,
    pub(crate) max_jobs: usize,
    pub(crate) estimate_every: Duration,
    pub(crate) mapping: SetMapping,
    pub(crate) period_error: f64,
    pub(crate) period_error_seed: u64,
}

impl Default for BookConfig {
    /// Automatic priorities off, jobs forgotten after 10 minutes idle (as dmClock drops idle
    /// clients), at most 16,384 jobs, estimates at most once a second per job, Set-10.
    fn default() -> BookConfig {
        BookConfig {
            auto_priority: false,
            forget_after: Duration::from_secs(600),
            max_jobs: 16_384,
            estimate_every: Duration::from_secs(1),
            mapping: SetMapping::default(),
            period_error: 0.0,
            period_error_seed: 0,
        }
    }
}

impl BookConfig {
    /// Detect each job's I/O period and move it to its Set-10 set (priority `10^-set`) when a
    /// confident estimate arrives.
    pub fn auto_priority(mut self, on: bool) -> BookConfig {
        self.auto_priority = on;
        self
    }

    /// Forget a job idle this long (at least 1 ms).
    pub fn forget_after(mut self, idle: Duration) -> BookConfig {
        self.forget_after = idle.max(Duration::from_millis(1));
        self
    }

    /// Keep at most this many jobs (at least [`SHARDS`]).
    pub fn max_jobs(mut self, jobs: usize) -> BookConfig {
        self.max_jobs = jobs.max(SHARDS);
        self
    }

    /// Run the full (spectral) estimate of a job's period at most this often (and only once a new
    /// burst has begun). The cheap phase check is not bound by it (see the module docs).
    pub fn estimate_every(mut self, every: Duration) -> BookConfig {
        self.estimate_every = every;
        self
    }

    /// The period-to-set mapping of automatic priorities.
    pub fn mapping(mut self, mapping: SetMapping) -> BookConfig {
        self.mapping = mapping;
        self
    }

    /// Scale every automatic estimate's period by a factor drawn uniformly in
    /// `[1 - fraction, 1 + fraction]`, deterministic from `(seed, job, estimate number)` (see the
    /// module docs) — seed 004's robustness test used 0.5. `fraction` must be in `[0, 1)`; 0
    /// (the default) applies every period as detected.
    pub fn period_error(mut self, fraction: f64, seed: u64) -> Result<BookConfig, InvalidSetting> {
        if !(0.0..1.0).contains(&fraction) {
            return Err(InvalidSetting {
                name: "period_error",
                value: fraction.to_string(),
                expected: "a fraction in [0, 1) (0.5: each period scaled by 0.5 to 1.5)",
            });
        }
        self.period_error = fraction;
        self.period_error_seed = seed;
        Ok(self)
    }

    /// The error fraction applied to automatic periods, and its seed.
    pub fn period_error_fraction(&self) -> (f64, u64) {
        (self.period_error, self.period_error_seed)
    }

    /// Whether automatic priorities are on.
    pub fn is_auto(&self) -> bool {
        self.auto_priority
    }

    /// How long an idle job is remembered.
    pub fn forget_interval(&self) -> Duration {
        self.forget_after
    }

    /// How often the book looks for idle jobs: an eighth of the forget interval, from 100 ms to
    /// one minute.
    pub fn sweep_interval(&self) -> Duration {
        (self.forget_after / 8).clamp(Duration::from_millis(100), Duration::from_secs(60))
    }
}

/// A [`BookConfig`] setting out of its range.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{name} = {value}: expected {expected}")]
pub struct InvalidSetting {
    /// The setting.
    pub name: &'static str,
    /// The value refused.
    pub value: String,
    /// What it must be.
    pub expected: &'static str,
}

/// The factor in `[1 - fraction, 1 + fraction]` of estimate `number` of `job`: a hash of
/// `(seed, job, number)` (SplitMix64's finaliser) mapped to `[0, 1)`.
fn error_factor(fraction: f64, seed: u64, job: JobId, number: u64) -> f64 {
    let mix = |mut z: u64| {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let h = mix(mix(mix(seed ^ 0x9e37_79b9_7f4a_7c15) ^ job.0) ^ number);
    let u = (h >> 11) as f64 / (1u64 << 53) as f64;
    1.0 + fraction * (2.0 * u - 1.0)
}

/// Bandwidth over the last second (ten 100 ms slots) and the last ten seconds (ten 1 s slots).
#[derive(Debug, Clone, Default)]
struct Meter {
    fast: [u64; 10],
    /// Absolute 100 ms slot of the newest `fast` entry.
    fast_at: u64,
    slow: [u64; 10],
    /// Absolute 1 s slot of the newest `slow` entry.
    slow_at: u64,
}

const FAST_NS: u64 = 100_000_000;
const SLOW_NS: u64 = 1_000_000_000;

impl Meter {
    fn add(&mut self, now: Nanos, bytes: u64) {
        Meter::push(&mut self.fast, &mut self.fast_at, now.0 / FAST_NS, bytes);
        Meter::push(&mut self.slow, &mut self.slow_at, now.0 / SLOW_NS, bytes);
    }

    fn push(ring: &mut [u64; 10], at: &mut u64, slot: u64, bytes: u64) {
        if slot > *at {
            // Clear the slots skipped since the newest one (all of them after ten).
            let skipped = (slot - *at).min(10);
            for s in slot + 1 - skipped..=slot {
                ring[(s % 10) as usize] = 0;
            }
            *at = slot;
        }
        // A completion stamped a little in the past (another thread's clock read) still counts.
        if *at - slot < 10 {
            ring[(slot % 10) as usize] += bytes;
        }
    }

    fn sum(ring: &[u64; 10], at: u64, slot: u64) -> u64 {
        (0..10u64)
            .filter_map(|i| at.checked_sub(i))
            .filter(|&s| s + 10 > slot && s <= slot)
            .map(|s| ring[(s % 10) as usize])
            .sum()
    }

    /// Bytes per second over the last second and the last ten, at `now` (over the time since the
    /// clock started, when shorter).
    fn rates(&self, now: Nanos) -> (f64, f64) {
        let elapsed = (now.0 as f64 / 1e9).max(1e-3);
        let one = Meter::sum(&self.fast, self.fast_at, now.0 / FAST_NS) as f64 / elapsed.min(1.0);
        let ten = Meter::sum(&self.slow, self.slow_at, now.0 / SLOW_NS) as f64 / elapsed.min(10.0);
        (one, ten)
    }
}

/// Significant bits of the queue-wait histograms: 8 buckets per power of two.
const WAIT_SUB_BITS: u32 = 3;
const WAIT_SUB: u64 = 1 << WAIT_SUB_BITS;

/// Buckets of a queue-wait histogram from 0 to one hour (318).
pub const WAIT_BUCKETS: usize = wait_bucket(HIGHEST_NS) + 1;

/// The bucket of a wait of `ns` nanoseconds: one per value below 8 ns, then 8 per power of two
/// (a bucket's width is at most 1/8 of its lowest value).
const fn wait_bucket(ns: u64) -> usize {
    if ns < WAIT_SUB {
        ns as usize
    } else {
        let octave = 63 - ns.leading_zeros();
        let sub = (ns >> (octave - WAIT_SUB_BITS)) & (WAIT_SUB - 1);
        (WAIT_SUB + (octave - WAIT_SUB_BITS) as u64 * WAIT_SUB + sub) as usize
    }
}

/// The lowest value of bucket `i` and its width.
fn wait_bucket_range(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < WAIT_SUB {
        (i, 1)
    } else {
        let shift = (i - WAIT_SUB) / WAIT_SUB;
        let sub = (i - WAIT_SUB) % WAIT_SUB;
        ((WAIT_SUB + sub) << shift, 1 << shift)
    }
}

/// One job's queue waits: a log-linear histogram (8 buckets per power of two, from 0 to
/// [`HIGHEST_NS`]; longer waits are counted as that) whose `u32` counters are allocated only
/// from the lowest to the highest bucket reached. A quantile is the middle of its bucket: within
/// 1/16 of the true value. Counters saturate at `u32::MAX` (4 billion waits in one bucket).
#[derive(Debug, Default)]
struct WaitHistogram {
    /// The bucket of `counts[0]`.
    first: u16,
    counts: Box<[u32]>,
}

impl WaitHistogram {
    fn record(&mut self, ns: u64) {
        let i = wait_bucket(ns.min(HIGHEST_NS));
        let first = usize::from(self.first);
        if self.counts.is_empty() {
            self.first = i as u16;
            self.counts = Box::new([1]);
            return;
        }
        let end = first + self.counts.len();
        if i < first || i >= end {
            // Widen to cover `i` (at most WAIT_BUCKETS times over a job's life).
            let (lo, hi) = (i.min(first), (i + 1).max(end));
            let mut counts = vec![0u32; hi - lo].into_boxed_slice();
            counts[first - lo..end - lo].copy_from_slice(&self.counts);
            self.counts = counts;
            self.first = lo as u16;
        }
        let c = &mut self.counts[i - usize::from(self.first)];
        *c = c.saturating_add(1);
    }

    /// The wait at quantile `q` (0 to 1): the middle of the bucket holding it; 0 when empty.
    fn quantile(&self, q: f64) -> u64 {
        let total: u64 = self.counts.iter().map(|&c| u64::from(c)).sum();
        if total == 0 {
            return 0;
        }
        let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0;
        for (k, &c) in self.counts.iter().enumerate() {
            seen += u64::from(c);
            if seen >= rank {
                let (lo, width) = wait_bucket_range(usize::from(self.first) + k);
                return lo + (width - 1) / 2;
            }
        }
        unreachable!("the rank is at most the total")
    }

    /// Heap bytes held.
    fn heap_bytes(&self) -> usize {
        malloc_chunk(self.counts.len() * size_of::<u32>())
    }
}

/// A job's period detection.
#[derive(Debug)]
struct Detect {
    detector: JobDetector,
    /// When the job's first request completed.
    since: Nanos,
    /// No phase check before this.
    next_check: Nanos,
    /// Segments opened at the last phase check: no new burst, no check.
    opened_at_check: u64,
    next_estimate: Nanos,
    /// Time to the next estimate: doubles after each estimate that moves nothing (up to
    /// [`MAX_ESTIMATE_INTERVAL`]), back to [`BookConfig::estimate_every`] after a move.
    interval: Nanos,
    /// New bursts needed before the next estimate: doubles with `interval` (up to
    /// [`MAX_BURSTS_BETWEEN`]), back to one after a move.
    bursts: u64,
    /// Segments opened at the last estimate: no new burst, no new estimate.
    opened_at_estimate: u64,
    /// The detected period.
    period: Option<Nanos>,
    /// The period the set was chosen from (the detected one, scaled with a period error).
    applied: Option<Nanos>,
    /// The estimate's number (see the module docs) and the detected period its factor was drawn
    /// for.
    number: u64,
    drawn_for: Option<Nanos>,
    set: Option<i32>,
    /// The phase starts its client stamped, when its requests carry stamps
    /// ([`iosets_types::Request::phase`]; the period from them, [`PhaseStarts`], replaces the
    /// completion-based detector for such a job): reads' and writes' apart (an iteration
    /// "read, compute, write, compute" has two stamped phases; each direction's stamps come
    /// once per iteration).
    stamps: [PhaseStarts; 2],
}

/// A job's first completion that moved bytes, kept until its second gives it a detector (most
/// of the jobs a server sees may do a single request: they never hold one).
#[derive(Debug)]
struct FirstEvent {
    direction: Direction,
    event: Event,
    stamp: Option<Nanos>,
    now: Nanos,
}

/// A job's period detection, allocated as it is needed.
#[derive(Debug, Default)]
enum Detection {
    /// No completion that moved bytes yet.
    #[default]
    None,
    /// One.
    First(Box<FirstEvent>),
    /// The detector, from the second on.
    On(Box<Detect>),
}

impl Detection {
    fn detect(&self) -> Option<&Detect> {
        match self {
            Detection::On(d) => Some(d),
            _ => None,
        }
    }

    /// Heap bytes held (each allocation as the allocator rounds it, [`malloc_chunk`]).
    fn heap_bytes(&self) -> usize {
        match self {
            Detection::None => 0,
            Detection::First(_) => malloc_chunk(size_of::<FirstEvent>()),
            Detection::On(d) => malloc_chunk(size_of::<Detect>()) + d.detector.heap_bytes(),
        }
    }
}

/// One job's record.
#[derive(Debug)]
pub(crate) struct JobRecord {
    ops: u64,
    bytes_read: u64,
    bytes_written: u64,
    failed: u64,
    last_active: Nanos,
    meter: Meter,
    wait: WaitHistogram,
    wait_sum: u64,
    wait_max: u64,
    causes: WaitCauses,
    hint: Option<Priority>,
    peers: Peers,
    detect: Detection,
}

impl JobRecord {
    fn new(now: Nanos) -> JobRecord {
        JobRecord {
            ops: 0,
            bytes_read: 0,
            bytes_written: 0,
            failed: 0,
            last_active: now,
            meter: Meter::default(),
            wait: WaitHistogram::default(),
            wait_sum: 0,
            wait_max: 0,
            causes: WaitCauses::default(),
            hint: None,
            peers: Peers::default(),
            detect: Detection::None,
        }
    }

    /// Heap bytes the record holds besides itself.
    fn heap_bytes(&self) -> usize {
        self.wait.heap_bytes() + self.detect.heap_bytes()
    }
}

/// What the book reports about one job (merged by the scheduler with its queue counts).
#[derive(Clone, Copy, Debug)]
pub(crate) struct BookEntry {
    pub(crate) ops: u64,
    pub(crate) bytes_read: u64,
    pub(crate) bytes_written: u64,
    pub(crate) failed: u64,
    pub(crate) last_active: Nanos,
    pub(crate) bandwidth: (f64, f64),
    pub(crate) wait: crate::stats::WaitSummary,
    pub(crate) causes: WaitCauses,
    pub(crate) hint: Option<Priority>,
    pub(crate) period: Option<Nanos>,
    pub(crate) set: Option<i32>,
    pub(crate) peers: Peers,
}

struct Shard {
    jobs: IdMap<JobId, Box<JobRecord>>,
    latency: Vec<OpLatency>,
    /// The analysis buffers this shard's detectors share.
    analyzer: Option<Analyzer>,
    evicted: u64,
    /// Records removed as idle (counted under the lock that removes them, so that a reader never
    /// sees a record gone and not yet counted).
    forgotten: u64,
}

/// A set change found by a detector, for the scheduler to apply.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct Move {
    /// The job.
    pub job: JobId,
    /// Its new Set-10 set.
    pub set: i32,
    /// The set's priority.
    pub priority: Priority,
    /// The period detected.
    pub period: Nanos,
    /// The period the set was chosen from: [`Move::period`] scaled by the period error (equal
    /// to it without one).
    pub applied: Nanos,
}

/// See the module documentation. The [`crate::Scheduler`] holds one and feeds it every
/// completion; it is public so that other drivers (and the benchmarks) can use it alone.
pub struct JobBook {
    config: BookConfig,
    shards: Box<[Mutex<Shard>]>,
    per_shard: usize,
    /// Records held, over all shards.
    count: AtomicUsize,
}

impl JobBook {
    /// An empty book.
    pub fn new(config: BookConfig) -> JobBook {
        let shards = (0..SHARDS)
            .map(|_| {
                Mutex::new(Shard {
                    jobs: IdMap::default(),
                    latency: Vec::new(),
                    analyzer: None,
                    evicted: 0,
                    forgotten: 0,
                })
            })
            .collect();
        JobBook {
            per_shard: config.max_jobs.div_ceil(SHARDS),
            config,
            shards,
            count: AtomicUsize::new(0),
        }
    }

    /// Its settings.
    pub fn config(&self) -> &BookConfig {
        &self.config
    }

    fn shard(&self, job: JobId) -> &Mutex<Shard> {
        // The id hasher's mixer, so that sequential job ids spread over the shards.
        use std::hash::{BuildHasher, BuildHasherDefault};
        let h = BuildHasherDefault::<iosets_types::hash::IdHasher>::default().hash_one(job.0);
        &self.shards[(h as usize) & (SHARDS - 1)]
    }

    /// Records a completed batch: every request's bytes, wait and service, and its job's
    /// detector. Returns the set changes to apply (rare; empty without automatic priorities).
    ///
    /// A book fed this way (without the scheduler) keeps no wait causes: their split is the
    /// scheduler's ([`crate::why`]).
    pub fn record(
        &self,
        batch: &Batch,
        outcome: Outcome,
        dispatched_at: Nanos,
        now: Nanos,
        policy: &'static str,
    ) -> Vec<Move> {
        self.record_split(batch, outcome, dispatched_at, now, policy, &[])
    }

    /// [`JobBook::record`] with each request's wait split by cause (`splits`, in batch order;
    /// empty: none kept).
    pub(crate) fn record_split(
        &self,
        batch: &Batch,
        outcome: Outcome,
        dispatched_at: Nanos,
        now: Nanos,
        policy: &'static str,
        splits: &[Split],
    ) -> Vec<Move> {
        let mut moves = Vec::new();
        let service = now - dispatched_at;
        for (i, (req, moved)) in moved_bytes(batch, outcome).enumerate() {
            let wait = dispatched_at - req.arrival;
            let mut shard = self.shard(req.job).lock();
            let shard = &mut *shard;
            match shard
                .latency
                .iter_mut()
                .find(|l| l.op == req.op && l.policy == policy)
            {
                Some(l) => l.record(wait, service),
                None => {
                    let mut l = OpLatency::new(policy, req.op);
                    l.record(wait, service);
                    shard.latency.push(l);
                }
            }
            let rec = self.record_of(&mut shard.jobs, &mut shard.evicted, req.job, now);
            rec.ops += 1;
            rec.last_active = rec.last_active.max(now);
            if req.priority.is_some() {
                rec.hint = req.priority;
            }
            rec.wait.record(wait.0);
            rec.wait_sum = rec.wait_sum.saturating_add(wait.0);
            rec.wait_max = rec.wait_max.max(wait.0);
            if let Some(split) = splits.get(i) {
                debug_assert_eq!(
                    split.iter().sum::<u64>(),
                    wait.0,
                    "a split sums to its wait"
                );
                rec.causes.add(split);
            }
            if !outcome.is_ok() {
                rec.failed += 1;
                continue;
            }
            match req.op {
                Op::Read => rec.bytes_read += moved,
                Op::Write => rec.bytes_written += moved,
                Op::Other | Op::Meta => {}
            }
            rec.meter.add(now, moved);
            if self.config.auto_priority && moved > 0 {
                let direction = match req.op {
                    Op::Read => Direction::Read,
                    Op::Write | Op::Other | Op::Meta => Direction::Write,
                };
                let event = Event::new(req.arrival, now, moved);
                // The current completion goes to the detector unless it is the job's first.
                let detect_now = match std::mem::take(&mut rec.detect) {
                    Detection::None => {
                        rec.detect = Detection::First(Box::new(FirstEvent {
                            direction,
                            event,
                            stamp: req.phase,
                            now,
                        }));
                        false
                    }
                    Detection::First(first) => {
                        // The detector sees the first completion as it would have then.
                        let first = *first;
                        let m = self.detect(
                            rec,
                            &mut shard.analyzer,
                            req.job,
                            (first.direction, first.event, first.stamp),
                            first.now,
                        );
                        moves.extend(m);
                        true
                    }
                    on @ Detection::On(_) => {
                        rec.detect = on;
                        true
                    }
                };
                if detect_now {
                    let m = self.detect(
                        rec,
                        &mut shard.analyzer,
                        req.job,
                        (direction, event, req.phase),
                        now,
                    );
                    moves.extend(m);
                }
            }
        }
        moves
    }

    /// `job`'s record among a shard's `jobs`, made (room made first, in a full shard, counted
    /// in its `evicted`) if it has none.
    fn record_of<'s>(
        &self,
        jobs: &'s mut IdMap<JobId, Box<JobRecord>>,
        evicted: &mut u64,
        job: JobId,
        now: Nanos,
    ) -> &'s mut JobRecord {
        if !jobs.contains_key(&job) {
            if jobs.len() >= self.per_shard {
                let n = evict_oldest(jobs);
                *evicted += n;
                self.count.fetch_sub(n as usize, Ordering::Relaxed);
            }
            self.count.fetch_add(1, Ordering::Relaxed);
        }
        jobs.entry(job)
            .or_insert_with(|| Box::new(JobRecord::new(now)))
    }

    /// A request of `job` came from `addr`: it is first among the job's peers (see
    /// [`Peers`]). A job seen for the first time gets its record now (active at `now`).
    pub(crate) fn note_peer(&self, job: JobId, addr: IpAddr, now: Nanos) {
        let mut shard = self.shard(job).lock();
        if let Some(rec) = shard.jobs.get_mut(&job) {
            // The common case: the job is known and its peer is the latest one.
            rec.peers.note(addr);
            return;
        }
        let shard = &mut *shard;
        self.record_of(&mut shard.jobs, &mut shard.evicted, job, now)
            .peers
            .note(addr);
    }

    fn detect(
        &self,
        rec: &mut JobRecord,
        analyzer: &mut Option<Analyzer>,
        job: JobId,
        (direction, event, stamp): (Direction, Event, Option<Nanos>),
        now: Nanos,
    ) -> Option<Move> {
        let every = Nanos(u64::try_from(self.config.estimate_every.as_nanos()).unwrap_or(u64::MAX));
        if !matches!(rec.detect, Detection::On(_)) {
            let config = OnlineConfig {
                analysis: analysis(),
                capacity: DETECTOR_SEGMENTS,
                ..OnlineConfig::default()
            };
            rec.detect = Detection::On(Box::new(Detect {
                detector: JobDetector::new(config).expect("constant detector settings"),
                since: now,
                next_check: now,
                opened_at_check: 0,
                next_estimate: now + every,
                interval: every,
                bursts: 1,
                opened_at_estimate: 0,
                period: None,
                applied: None,
                number: 0,
                drawn_for: None,
                set: None,
                stamps: [PhaseStarts::default(); 2],
            }));
        }
        let Detection::On(d) = &mut rec.detect else {
            unreachable!("set just above")
        };
        if let Some(stamp) = stamp {
            // The client stamps its phases: their starts say the period, the completions
            // need no analysis.
            let period = d.stamps[direction as usize].observe(stamp)?;
            return self.place(d, job, period, now, every);
        }
        if d.stamps.iter().any(PhaseStarts::seen) {
            return None;
        }
        d.detector.observe(direction, event);
        let opened = d.detector.opened();
        let found = if now >= d.next_check && opened > d.opened_at_check {
            // A new burst: the phase check (cheap), at most every quarter period.
            let found = d.detector.estimate_phases(now);
            let wait = match found {
                Some((_, e)) => Nanos(e.period.0 / 4),
                None => Nanos((now - d.since).0 / 8),
            };
            d.next_check = now + wait.min(MAX_ESTIMATE_INTERVAL);
            d.opened_at_check = opened;
            found
        } else if now >= d.next_estimate && opened >= d.opened_at_estimate + d.bursts {
            // The full estimate, at most once per `interval` and once enough new bursts have
            // begun: a job streaming without pause, or between bursts, costs nothing. Backs off
            // until something moves: a job whose set is settled (or that is not periodic) is
            // re-estimated less and less often.
            d.next_estimate = now + d.interval;
            d.interval =
                Nanos(d.interval.0.saturating_mul(2)).min(MAX_ESTIMATE_INTERVAL.max(every));
            d.bursts = (d.bursts * 2).min(MAX_BURSTS_BETWEEN);
            d.opened_at_estimate = opened;
            let analyzer = analyzer.get_or_insert_with(|| {
                Analyzer::new(d.detector.config().analysis).expect("checked by the detector")
            });
            d.detector.estimate_with(analyzer, now)
        } else {
            return None;
        };
        let (_, est) = found?;
        self.place(d, job, est.period, now, every)
    }

    /// The job's period is `period` now: its set, and a move if that changed.
    fn place(
        &self,
        d: &mut Detect,
        job: JobId,
        period: Nanos,
        now: Nanos,
        every: Nanos,
    ) -> Option<Move> {
        d.period = Some(period);
        // A new behaviour (or the first): a new error factor.
        if d.drawn_for.is_some_and(|p| changed(p, period)) {
            d.number += 1;
            d.drawn_for = Some(period);
        }
        d.drawn_for.get_or_insert(period);
        let applied = if self.config.period_error > 0.0 {
            let f = error_factor(
                self.config.period_error,
                self.config.period_error_seed,
                job,
                d.number,
            );
            Nanos::from_secs_f64(period.as_secs_f64() * f)
        } else {
            period
        };
        d.applied = Some(applied);
        let set = self.config.mapping.set_of(applied.as_secs_f64())?;
        if d.set == Some(set) {
            return None;
        }
        d.set = Some(set);
        d.interval = every;
        d.bursts = 1;
        d.next_estimate = d.next_estimate.min(now + every);
        Some(Move {
            job,
            set,
            priority: self.config.mapping.priority_of_set(set),
            period,
            applied,
        })
    }

    /// The book's view of `job`.
    pub(crate) fn entry(&self, job: JobId, now: Nanos) -> Option<BookEntry> {
        self.shard(job).lock().jobs.get(&job).map(|r| view(r, now))
    }

    /// Every job's view, unsorted, turned into `T` by `f` as it is read (so that the caller
    /// holds one copy of them, not two).
    pub(crate) fn entries<T>(&self, now: Nanos, f: impl Fn(JobId, &BookEntry) -> T) -> Vec<T> {
        let mut out = Vec::with_capacity(self.count());
        for s in self.shards.iter() {
            let s = s.lock();
            out.reserve(s.jobs.len());
            out.extend(s.jobs.iter().map(|(&j, r)| f(j, &view(r, now))));
        }
        out
    }

    /// Jobs known (read without locking).
    pub fn count(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// Records dropped to make room since the start.
    pub(crate) fn evicted(&self) -> u64 {
        self.shards.iter().map(|s| s.lock().evicted).sum()
    }

    /// Records removed as idle (or by request) since the start.
    pub(crate) fn forgotten(&self) -> u64 {
        self.shards.iter().map(|s| s.lock().forgotten).sum()
    }

    /// The latency histograms merged over the shards, one per (policy, operation).
    pub(crate) fn latency(&self) -> Vec<OpLatency> {
        let mut out: Vec<OpLatency> = Vec::new();
        for s in self.shards.iter() {
            let s = s.lock();
            for l in &s.latency {
                match out
                    .iter_mut()
                    .find(|o| o.op == l.op && o.policy == l.policy)
                {
                    Some(o) => o.merge(l),
                    None => out.push(l.clone()),
                }
            }
        }
        out.sort_by(|a, b| (a.policy, a.op).cmp(&(b.policy, b.op)));
        out
    }

    /// Jobs whose last activity is at or before `cutoff`.
    pub(crate) fn idle_since(&self, cutoff: Nanos) -> Vec<JobId> {
        let mut out = Vec::new();
        for s in self.shards.iter() {
            let s = s.lock();
            out.extend(
                s.jobs
                    .iter()
                    .filter(|(_, r)| r.last_active <= cutoff)
                    .map(|(&j, _)| j),
            );
        }
        out
    }

    /// Removes `job` if it is still idle since `cutoff`; returns whether it was removed.
    pub(crate) fn remove_if_idle(&self, job: JobId, cutoff: Nanos) -> bool {
        let mut s = self.shard(job).lock();
        if s.jobs.get(&job).is_some_and(|r| r.last_active <= cutoff) {
            s.jobs.remove(&job);
            s.forgotten += 1;
            self.count.fetch_sub(1, Ordering::Relaxed);
            if s.jobs.len() < s.jobs.capacity() / 4 {
                s.jobs.shrink_to_fit();
            }
            true
        } else {
            false
        }
    }

    /// Removes `job` whatever its state; returns its view.
    pub(crate) fn remove(&self, job: JobId, now: Nanos) -> Option<BookEntry> {
        let mut s = self.shard(job).lock();
        let r = s.jobs.remove(&job)?;
        s.forgotten += 1;
        self.count.fetch_sub(1, Ordering::Relaxed);
        drop(s);
        Some(view(&r, now))
    }

    /// Whether `job` has a record.
    pub(crate) fn contains(&self, job: JobId) -> bool {
        self.shard(job).lock().jobs.contains_key(&job)
    }

    /// Bytes held by the job records (the figure the memory bound documents): each shard's map
    /// table, each record's allocation and what it holds (histogram, detector), every
    /// allocation rounded up as the allocator does ([`malloc_chunk`]).
    pub(crate) fn job_bytes(&self) -> usize {
        let mut total = 0;
        for s in self.shards.iter() {
            let s = s.lock();
            total += map_bytes(s.jobs.capacity(), size_of::<(JobId, Box<JobRecord>)>());
            total += s.jobs.len() * malloc_chunk(size_of::<JobRecord>());
            total += s.jobs.values().map(|r| r.heap_bytes()).sum::<usize>();
        }
        total
    }
}

impl std::fmt::Debug for JobBook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobBook")
            .field("jobs", &self.count())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Whether a detected period moved by more than 20% (a new behaviour).
fn changed(from: Nanos, to: Nanos) -> bool {
    (to.as_secs_f64() / from.as_secs_f64().max(1e-12) - 1.0).abs() > 0.2
}

/// Drops the least recently active eighth of `jobs`; returns how many.
fn evict_oldest(jobs: &mut IdMap<JobId, Box<JobRecord>>) -> u64 {
    let mut ages: Vec<(Nanos, JobId)> = jobs.iter().map(|(&j, r)| (r.last_active, j)).collect();
    let n = (ages.len() / 8).max(1);
    ages.select_nth_unstable(n - 1);
    for (_, j) in &ages[..n] {
        jobs.remove(j);
    }
    n as u64
}

fn view(r: &JobRecord, now: Nanos) -> BookEntry {
    let count = r.ops;
    let wait = if count == 0 {
        crate::stats::WaitSummary::default()
    } else {
        crate::stats::WaitSummary {
            count,
            sum_ns: r.wait_sum,
            mean_ns: r.wait_sum / count,
            p50_ns: r.wait.quantile(0.5).min(r.wait_max),
            p99_ns: r.wait.quantile(0.99).min(r.wait_max),
            max_ns: r.wait_max,
        }
    };
    let detect = r.detect.detect();
    BookEntry {
        ops: r.ops,
        bytes_read: r.bytes_read,
        bytes_written: r.bytes_written,
        failed: r.failed,
        last_active: r.last_active,
        bandwidth: r.meter.rates(now),
        wait,
        causes: r.causes,
        hint: r.hint,
        period: detect.and_then(|d| d.period),
        set: detect.and_then(|d| d.set),
        peers: r.peers,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meter_windows_sum_the_right_slots() {
        let mut m = Meter::default();
        let mib = 1 << 20;
        // 1 MiB in each of the first 20 slots of 100 ms (2 s).
        for i in 0..20u64 {
            m.add(Nanos::from_millis(i * 100 + 50), mib);
        }
        let (one, ten) = m.rates(Nanos::from_millis(1_950));
        assert_eq!(one, 10.0 * mib as f64);
        // 20 MiB over the 1.95 s elapsed so far.
        assert!((ten - 20.0 * mib as f64 / 1.95).abs() < 1e-3, "{ten}");
        let (one, ten) = m.rates(Nanos::from_millis(6_950));
        assert_eq!(one, 0.0);
        assert!((ten - 20.0 * mib as f64 / 6.95).abs() < 1e-3, "{ten}");
        assert_eq!(m.rates(Nanos::from_millis(30_000)), (0.0, 0.0));
        // A late completion (stamped before the newest slot) still counts, in its own slot.
        m.add(Nanos::from_millis(30_000), 1);
        m.add(Nanos::from_millis(29_950), 2);
        assert_eq!(m.rates(Nanos::from_millis(30_050)).0, 3.0);
    }

    #[test]
    fn error_factors_are_uniform_in_their_range_and_deterministic() {
        let mut buckets = [0u32; 10];
        for job in 0..2_000u64 {
            for number in 0..5u64 {
                let f = error_factor(0.5, 11, JobId(job), number);
                assert!((0.5..1.5).contains(&f), "{f}");
                assert_eq!(f, error_factor(0.5, 11, JobId(job), number));
                buckets[((f - 0.5) * 10.0) as usize] += 1;
            }
        }
        // 10,000 draws, 1,000 expected per tenth of the range.
        for (i, b) in buckets.iter().enumerate() {
            assert!(
                (850..1150).contains(b),
                "bucket {i}: {b} of 10000 ({buckets:?})"
            );
        }
        assert_ne!(
            error_factor(0.5, 11, JobId(1), 0),
            error_factor(0.5, 12, JobId(1), 0)
        );
        assert_ne!(
            error_factor(0.5, 11, JobId(1), 0),
            error_factor(0.5, 11, JobId(1), 1)
        );
        assert_eq!(error_factor(0.0, 11, JobId(1), 0), 1.0);
    }

    #[test]
    fn wait_buckets_tile_the_range_each_at_most_an_eighth_wide() {
        assert_eq!(WAIT_BUCKETS, 318);
        let mut next = 0;
        for i in 0..WAIT_BUCKETS {
            let (lo, width) = wait_bucket_range(i);
            assert_eq!(lo, next, "bucket {i} starts where {} ends", i.max(1) - 1);
            assert!(
                lo < 8 || width * 8 <= lo,
                "bucket {i}: {width} wide at {lo}"
            );
            assert_eq!(wait_bucket(lo), i);
            assert_eq!(wait_bucket(lo + width - 1), i);
            next = lo + width;
        }
        assert!(next > HIGHEST_NS);
    }

    /// Log-uniform waits from 1 ns to 10 s (a fixed pseudo-random sequence).
    fn waits(n: usize, seed: u64) -> Vec<u64> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                let u = (x >> 11) as f64 / (1u64 << 53) as f64;
                10f64.powf(u * 10.0) as u64
            })
            .collect()
    }

    #[test]
    fn wait_quantiles_are_within_a_sixteenth() {
        for (n, seed) in [(1, 1), (2, 2), (17, 3), (1_000, 4), (20_000, 5)] {
            let mut h = WaitHistogram::default();
            let mut v = waits(n, seed);
            for &w in &v {
                h.record(w);
            }
            v.sort_unstable();
            for q in [0.0, 0.5, 0.9, 0.99, 1.0] {
                let exact = v[((q * n as f64).ceil() as usize).clamp(1, n) - 1];
                let got = h.quantile(q);
                assert!(
                    got.abs_diff(exact) * 16 <= exact.max(1),
                    "n {n}, q {q}: {got} for {exact}"
                );
            }
        }
        assert_eq!(WaitHistogram::default().quantile(0.5), 0);
        // Past the longest resolved wait: counted as that.
        let mut h = WaitHistogram::default();
        h.record(u64::MAX);
        assert_eq!(h.counts.len(), 1);
        assert_eq!(usize::from(h.first), WAIT_BUCKETS - 1);
    }

    #[test]
    fn a_wait_histogram_holds_only_the_buckets_reached() {
        let mut h = WaitHistogram::default();
        assert_eq!(h.heap_bytes(), 0);
        for _ in 0..1_000 {
            h.record(50_000);
        }
        assert_eq!(h.counts.len(), 1);
        assert_eq!(h.heap_bytes(), 32);
        // 50 µs to 100 µs: the buckets from [49,152, 53,248) to [98,304, 106,496).
        h.record(100_000);
        assert_eq!(h.counts.len(), 9);
        // Down to [36,864, 40,960).
        h.record(40_000);
        assert_eq!(h.counts.len(), 12);
        assert_eq!(h.counts.iter().map(|&c| u64::from(c)).sum::<u64>(), 1_002);
        // 50,000 ns is in [49,152, 53,248): its middle.
        assert_eq!(h.quantile(0.5), 49_152 + 2_047);
        for w in waits(10_000, 9) {
            h.record(w);
        }
        assert!(h.counts.len() <= WAIT_BUCKETS);
        assert!(h.heap_bytes() <= malloc_chunk(WAIT_BUCKETS * 4));
    }

    #[test]
    fn peers_keep_four_most_recent_first() {
        let a = |i: u8| IpAddr::from([127, 0, 0, i]);
        let mut p = Peers::default();
        assert!(p.is_empty());
        p.note(a(1));
        p.note(a(1));
        assert_eq!(p.iter().collect::<Vec<_>>(), vec![a(1)]);
        p.note(a(2));
        p.note(a(3));
        p.note(a(1));
        assert_eq!(p.iter().collect::<Vec<_>>(), vec![a(1), a(3), a(2)]);
        p.note(a(4));
        p.note(a(5));
        assert_eq!(p.iter().collect::<Vec<_>>(), vec![a(5), a(4), a(1), a(3)]);
        assert_eq!(p.len(), 4);
        p.note(a(3));
        assert_eq!(p.iter().collect::<Vec<_>>(), vec![a(3), a(5), a(4), a(1)]);
    }

    #[test]
    fn a_job_gets_its_detector_at_its_second_transfer() {
        let book = JobBook::new(BookConfig::default().auto_priority(true));
        let write = |job: u64, at: u64| {
            let req = iosets_types::Request::builder(JobId(job), Op::Write)
                .range(0, 4096)
                .build();
            let batch = Batch::single(req);
            book.record(
                &batch,
                Outcome::Done { bytes: 4096 },
                Nanos(at),
                Nanos(at + 1_000),
                "noop",
            );
        };
        let detector = |job: u64| {
            let s = book.shard(JobId(job)).lock();
            match &s.jobs[&JobId(job)].detect {
                Detection::None => "none",
                Detection::First(_) => "first",
                Detection::On(_) => "on",
            }
        };
        write(1, 1_000);
        assert_eq!(detector(1), "first");
        let one = book.job_bytes();
        write(1, 2_000_000);
        assert_eq!(detector(1), "on");
        assert!(
            book.job_bytes() > one + 500,
            "{} then {one}",
            book.job_bytes()
        );
        assert!(book.job_bytes() <= one + DETECTOR_BYTES);
    }

    #[test]
    fn eviction_drops_the_oldest_eighth() {
        let mut jobs = IdMap::default();
        for j in 0..64u64 {
            jobs.insert(JobId(j), Box::new(JobRecord::new(Nanos(1_000 - j))));
        }
        assert_eq!(evict_oldest(&mut jobs), 8);
        assert_eq!(jobs.len(), 56);
        for j in 56..64u64 {
            assert!(
                !jobs.contains_key(&JobId(j)),
                "job {j} was among the oldest"
            );
        }
    }
}
