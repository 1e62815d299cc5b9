//! The event-driven fluid simulation: exact up to float rounding, no time step.
//!
//! Events are the ends of compute phases (a job then asks for I/O), the ends of I/O phases and the
//! edges of the measurement window. Between two events every rate is constant. Whenever the set of
//! phases doing I/O changes, every active phase's bandwidth is recomputed as `B · p_i / Σ p` over the
//! phases currently transferring: the head of each non-empty set, sets served first come first served
//! by the time the job asked for I/O (ties by job index). The next I/O end is then
//! `min_i remaining_i / rate_i`, found by a scan of the active phases — there are at most as many as
//! sets, so the scan is cheap and no error accumulates in a virtual clock.
//!
//! **Bounds on a turn** ([`SimOptions::bounds`], none by default: the paper's rule). The servers'
//! `iosets` policy bounds how long a job holds its set while another job of the set waits
//! ([`TurnBounds`], the policy's own values): past `max_exclusive` the head *yields*, queueing
//! behind the others for the rest of its phase (its turn counts from when it became the head or
//! from when another job began to wait, whichever is later); past `unknown_hold` (counted from
//! the start of its turn, or twice its longest earlier turn in the set if that is longer, at most
//! a minute) the head of the shared new set *outstays* it: it moves, with the rest of its phase,
//! to a set of its own at the same priority, and so do its later phases until it has an
//! estimate. Both are timer events, at most one per set at a time.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap, VecDeque};

use iosets_policy::iosets::{TurnBounds, AUTO_BOUND_MAX};
use iosets_types::Priority;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use super::heuristic::{
    online_estimator, Estimate, EstimatorKind, Heuristic, OnlineEstimator, PeriodEstimator, Placer,
    SetKey,
};
use super::metrics::{JobWork, Metrics};
use super::model::{Window, Workload};
use super::FluidError;

/// Relative tolerance under which an I/O phase's remaining volume counts as done (float rounding
/// of phases that end at the same instant).
const DONE_TOLERANCE: f64 = 1e-12;

/// How to run one simulation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SimOptions {
    /// Seed of the error drawn by `:error=e` heuristics.
    pub seed: u64,
    /// Keep every phase and every constant-rate interval (for tables, checks and tests; costs
    /// memory).
    pub record: bool,
    /// Stop at the end of the window: the metrics are then already known, and the rest of the run
    /// is not simulated (no completion times). Ignored without a window.
    pub stop_at_window_end: bool,
    /// The servers' bounds on a turn while others of the set wait: past `max_exclusive` the
    /// head of a set yields and queues behind the others; past `unknown_hold` the head of the
    /// new set moves to a set of its own. [`TurnBounds::NONE`], the paper's rule, by default.
    pub bounds: TurnBounds,
}

impl Default for SimOptions {
    /// Seed 0, no records, run to the end.
    fn default() -> SimOptions {
        SimOptions {
            seed: 0,
            record: false,
            stop_at_window_end: false,
            bounds: TurnBounds::NONE,
        }
    }
}

/// Compute or I/O.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PhaseKind {
    /// A compute phase: runs at full speed whatever the others do.
    Compute,
    /// An I/O phase: waits for its set, then transfers at its share of `B`.
    Io,
}

/// One phase a job executed (recorded with [`SimOptions::record`]).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct PhaseRecord {
    /// Its iteration, from 0.
    pub iteration: usize,
    /// Compute or I/O.
    pub kind: PhaseKind,
    /// When it began (for I/O: when the job asked for it).
    pub start: f64,
    /// For I/O: when the job's set let it transfer; for compute: `start`.
    pub transfer_start: f64,
    /// When it ended.
    pub end: f64,
    /// For I/O: the volume; for compute: 0.
    pub volume: f64,
    /// For I/O: the volume transferred inside the window.
    pub volume_in_window: f64,
    /// For I/O: the set it joined.
    pub set: Option<SetKey>,
    /// For I/O: its set's priority.
    pub priority: f64,
}

/// An interval of constant rates (recorded with [`SimOptions::record`]).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct RateSegment {
    /// Its start.
    pub start: f64,
    /// Its end.
    pub end: f64,
    /// The bandwidth in use, summed over the transferring phases.
    pub total_rate: f64,
    /// Jobs in an I/O phase (transferring or waiting for their set).
    pub jobs_in_io: usize,
    /// Jobs transferring.
    pub transferring: usize,
}

/// What one job did.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JobOutcome {
    /// Its group's index.
    pub group: usize,
    /// Its true characteristic time (mean isolated iteration length), seconds.
    pub w_iter: f64,
    /// Iterations it completed.
    pub iterations_done: usize,
    /// Its number of iterations.
    pub iterations: usize,
    /// When its last I/O phase ended, if the run got that far.
    pub completion: Option<f64>,
    /// Its work inside the window.
    pub work: JobWork,
    /// Its stretch over the window (`None`: no work in the window).
    pub stretch: Option<f64>,
    /// Its I/O slowdown over the window (`None`: no I/O in the window).
    pub io_slowdown: Option<f64>,
    /// Total volume it received, integrated over the rates (equals its total I/O volume when it
    /// completed).
    pub delivered: f64,
    /// The set and priority of its last I/O phase.
    pub last_set: Option<(SetKey, f64)>,
    /// Every phase, with [`SimOptions::record`].
    pub phases: Vec<PhaseRecord>,
}

/// The result of one simulation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunResult {
    /// The heuristic.
    #[serde(serialize_with = "as_display")]
    pub heuristic: Heuristic,
    /// The window the metrics were measured over (the workload's, or `[0, end]`).
    pub window: Window,
    /// When the simulation stopped (the last event, or the window's end).
    pub end_time: f64,
    /// Events processed: phase ends (compute and I/O).
    pub events: u64,
    /// One entry per job.
    pub jobs: Vec<JobOutcome>,
    /// The metrics over the window.
    pub metrics: Metrics,
    /// Constant-rate intervals, with [`SimOptions::record`].
    pub segments: Vec<RateSegment>,
}

fn as_display<S: serde::Serializer>(h: &Heuristic, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(h)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Computing,
    Waiting,
    Transferring,
    Done,
}

#[derive(Debug)]
struct JobState {
    iter: usize,
    mode: Mode,
    /// Compute start, or the time the job asked for I/O.
    phase_start: f64,
    transfer_start: f64,
    volume: f64,
    remaining: f64,
    rate: f64,
    priority: f64,
    set: usize,
    set_key: Option<SetKey>,
    /// Volume of the current I/O phase transferred before `T_begin`.
    done_at_begin: f64,
    /// Volume of the current I/O phase counted inside the window.
    phase_in: f64,
    e_cpu: f64,
    volume_in: f64,
    delivered: f64,
    completion: Option<f64>,
    estimator: OnlineEstimator,
    phases: Vec<PhaseRecord>,
    /// It outstayed the new set: until it has an estimate it gets a set of its own.
    outstayed: bool,
    /// Its longest turn in the new set, of the turns that ended.
    longest_new_turn: f64,
}

/// The turn of the head of one set: since when it holds the set, and since when another job of
/// the set waits (under [`SimOptions::bounds`]).
#[derive(Clone, Copy, Debug, Default)]
struct Turn {
    held_since: f64,
    contended_since: Option<f64>,
}

/// What a bound does to the head of a set when it runs out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expiry {
    /// `max_exclusive`: it queues behind the others.
    Yield,
    /// `unknown_hold`: it leaves the new set for a set of its own.
    Outstay,
}

/// A compute end in the event heap: earliest first, then lowest job index.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Due(f64, u32);

impl Eq for Due {}

impl Ord for Due {
    fn cmp(&self, other: &Due) -> Ordering {
        other.0.total_cmp(&self.0).then(other.1.cmp(&self.1))
    }
}

impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Due) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum WindowState {
    Before,
    Inside,
    After,
}

/// The next event: when it happens, and when each kind of event is due (a kind is due now when its
/// time is `<= at`).
#[derive(Clone, Copy, Debug)]
struct Next {
    at: f64,
    /// The earliest I/O end.
    io_end: f64,
    /// The phase that ends first (it ends at `io_end` even if rounding leaves a sliver).
    first_done: Option<u32>,
    /// The next window edge.
    mark: f64,
    /// The earliest end of a bounded turn.
    bound: f64,
}

/// The simulation state between events; [`simulate`] runs its steps in order until nothing is
/// left to happen.
struct Sim<'w> {
    workload: &'w Workload,
    heuristic: Heuristic,
    record: bool,
    placer: Placer,
    estimate: Option<Estimate>,
    /// The bandwidth `B`.
    b: f64,
    /// Each job's true `w_iter`.
    w_true: Vec<f64>,
    /// The window, `[0, ∞)` without one.
    clip: Window,
    stop_at_end: bool,
    rng: ChaCha8Rng,
    js: Vec<JobState>,
    /// Compute ends.
    heap: BinaryHeap<Due>,
    /// Set → its index in `queues`.
    slots: HashMap<SetKey, usize>,
    /// Per set, the jobs in an I/O phase in arrival order; the head transfers.
    queues: Vec<VecDeque<u32>>,
    /// Per set, its key and its head's turn.
    keys: Vec<SetKey>,
    turns: Vec<Turn>,
    bounds: TurnBounds,
    /// The transferring jobs (the heads of the non-empty sets).
    active: Vec<u32>,
    /// Jobs in an I/O phase (transferring or waiting for their set).
    in_io: usize,
    /// `active` changed since the rates were computed.
    dirty: bool,
    segments: Vec<RateSegment>,
    events: u64,
    now: f64,
    state: WindowState,
    finished: usize,
}

impl<'w> Sim<'w> {
    fn new(
        workload: &'w Workload,
        heuristic: Heuristic,
        options: SimOptions,
    ) -> Result<Sim<'w>, FluidError> {
        workload.validate()?;
        let placer = Placer::new(heuristic)?;
        let estimator = match heuristic.estimate() {
            Some(Estimate::Online { estimator, .. }) => estimator,
            _ => EstimatorKind::default(),
        };
        let b = workload.bandwidth;
        let (begin, end) = workload
            .window
            .map_or((0.0, f64::INFINITY), |w| (w.begin, w.end));
        let js = workload
            .jobs
            .iter()
            .map(|j| JobState {
                iter: 0,
                mode: Mode::Computing,
                phase_start: j.release,
                transfer_start: 0.0,
                volume: 0.0,
                remaining: 0.0,
                rate: 0.0,
                priority: 1.0,
                set: 0,
                set_key: None,
                done_at_begin: 0.0,
                phase_in: 0.0,
                e_cpu: 0.0,
                volume_in: 0.0,
                delivered: 0.0,
                completion: None,
                estimator: online_estimator(estimator),
                phases: Vec::new(),
                outstayed: false,
                longest_new_turn: 0.0,
            })
            .collect();
        let heap = workload
            .jobs
            .iter()
            .enumerate()
            .map(|(i, j)| Due(j.release + j.cpu[0], i as u32))
            .collect();
        Ok(Sim {
            workload,
            heuristic,
            record: options.record,
            placer,
            estimate: heuristic.estimate(),
            b,
            w_true: workload.jobs.iter().map(|j| j.w_iter(b)).collect(),
            clip: Window { begin, end },
            stop_at_end: options.stop_at_window_end && workload.window.is_some(),
            rng: ChaCha8Rng::seed_from_u64(options.seed),
            js,
            heap,
            slots: HashMap::new(),
            queues: Vec::new(),
            keys: Vec::new(),
            turns: Vec::new(),
            bounds: options.bounds,
            active: Vec::new(),
            in_io: 0,
            dirty: false,
            segments: Vec::new(),
            events: 0,
            now: 0.0,
            state: if begin <= 0.0 {
                WindowState::Inside
            } else {
                WindowState::Before
            },
            finished: 0,
        })
    }

    /// Shares `B` among the transferring phases, `B · p_i / Σ p`, if they changed.
    fn update_rates(&mut self) {
        if !self.dirty {
            return;
        }
        // Shares in proportion to the priorities; a job whose share is above its peak takes its
        // peak, and what it leaves is shared again among the others (water filling).
        let jobs = &self.workload.jobs;
        let js = &mut self.js;
        let mut open: Vec<u32> = self.active.clone();
        let mut left = self.b;
        loop {
            let sum_p: f64 = open.iter().map(|&j| js[j as usize].priority).sum();
            let per_priority = left / sum_p;
            let capped: Vec<u32> = open
                .iter()
                .copied()
                .filter(|&j| {
                    let share = per_priority * js[j as usize].priority;
                    jobs[j as usize].peak.is_some_and(|p| p < share)
                })
                .collect();
            if capped.is_empty() {
                for &j in &open {
                    let s = &mut js[j as usize];
                    s.rate = per_priority * s.priority;
                }
                break;
            }
            for &j in &capped {
                let peak = jobs[j as usize].peak.unwrap_or(f64::INFINITY);
                js[j as usize].rate = peak;
                left -= peak;
            }
            open.retain(|j| !capped.contains(j));
            if open.is_empty() {
                break;
            }
        }
        self.dirty = false;
    }

    /// The time until the first transferring phase ends, and that phase (a scan: at most one
    /// phase per set transfers).
    fn next_io_end(&self) -> (f64, Option<u32>) {
        let mut dt_io = f64::INFINITY;
        let mut first_done = None;
        for &j in &self.active {
            let s = &self.js[j as usize];
            let dt = s.remaining / s.rate;
            if dt < dt_io {
                dt_io = dt;
                first_done = Some(j);
            }
        }
        (dt_io, first_done)
    }

    /// The next event, or `None` when nothing is left to happen: no event at all, or every job
    /// done and no window edge before the metrics are final.
    fn next_event(&self) -> Option<Next> {
        let (dt_io, first_done) = self.next_io_end();
        let io_end = self.now + dt_io.max(0.0);
        let cpu_end = self.heap.peek().map_or(f64::INFINITY, |d| d.0);
        let mark = match self.state {
            WindowState::Before => self.clip.begin,
            WindowState::Inside => self.clip.end,
            WindowState::After => f64::INFINITY,
        };
        // A turn can be past its bound when another job begins to wait (the new set's bound
        // counts from the turn's start): it ends now. Without bounds, no scan.
        let bound = if self.bounds == TurnBounds::NONE {
            f64::INFINITY
        } else {
            (0..self.queues.len())
                .filter_map(|slot| self.expiry(slot))
                .map(|(t, _)| t.max(self.now))
                .fold(f64::INFINITY, f64::min)
        };
        let at = io_end.min(cpu_end).min(mark).min(bound);
        if at == f64::INFINITY {
            return None;
        }
        if self.finished == self.js.len() && self.state != WindowState::Before {
            // Everyone is done and nothing happens before the end of the window.
            return None;
        }
        Some(Next {
            at,
            io_end,
            first_done,
            mark,
            bound,
        })
    }

    /// Moves the clock to `t`: the transferring phases receive their rate times the elapsed time.
    fn advance(&mut self, t: f64) {
        debug_assert!(t >= self.now, "the clock goes back: {} → {t}", self.now);
        let dt = t - self.now;
        if dt > 0.0 {
            let mut total = 0.0;
            for &j in &self.active {
                let s = &mut self.js[j as usize];
                let d = s.rate * dt;
                s.remaining -= d;
                s.delivered += d;
                total += s.rate;
            }
            if self.record {
                self.segments.push(RateSegment {
                    start: self.now,
                    end: t,
                    total_rate: total,
                    jobs_in_io: self.in_io,
                    transferring: self.active.len(),
                });
            }
        }
        self.now = t;
    }

    /// Crosses the window edge at `now`: at `T_begin` the I/O already done stops counting, at
    /// `T_end` the I/O done inside is counted. True if the run stops here (at `T_end`, with
    /// [`SimOptions::stop_at_window_end`]).
    fn cross_window_edge(&mut self) -> bool {
        match self.state {
            WindowState::Before => {
                for &j in &self.active {
                    let s = &mut self.js[j as usize];
                    s.done_at_begin = (s.volume - s.remaining).max(0.0);
                }
                self.state = if self.clip.end <= self.now {
                    WindowState::After
                } else {
                    WindowState::Inside
                };
                false
            }
            WindowState::Inside => {
                for s in self.js.iter_mut() {
                    if matches!(s.mode, Mode::Waiting | Mode::Transferring) {
                        let inside = (s.volume - s.remaining.max(0.0)) - s.done_at_begin;
                        s.volume_in += inside;
                        s.phase_in = inside;
                        s.done_at_begin = s.volume;
                    }
                }
                self.state = WindowState::After;
                self.stop_at_end
            }
            WindowState::After => false,
        }
    }

    /// Ends the I/O phases that are done now (`first_done`, and any other within rounding):
    /// each passes its set to the next job queued in it and starts its next compute phase.
    fn end_transfers(&mut self, first_done: Option<u32>) {
        let mut k = 0;
        while k < self.active.len() {
            let j = self.active[k];
            let s = &self.js[j as usize];
            if Some(j) == first_done || s.remaining <= DONE_TOLERANCE * s.volume {
                self.active.swap_remove(k);
                self.end_transfer(j);
            } else {
                k += 1;
            }
        }
    }

    /// Job `j`'s I/O phase ends now.
    fn end_transfer(&mut self, j: u32) {
        let now = self.now;
        self.events += 1;
        self.in_io -= 1;
        self.dirty = true;
        let job = &self.workload.jobs[j as usize];
        let s = &mut self.js[j as usize];
        s.remaining = 0.0;
        if self.state == WindowState::Inside {
            let inside = s.volume - s.done_at_begin;
            s.volume_in += inside;
            s.phase_in = inside;
        }
        if self.record {
            let in_window = s.phase_in;
            s.phases.push(PhaseRecord {
                iteration: s.iter,
                kind: PhaseKind::Io,
                start: s.phase_start,
                transfer_start: s.transfer_start,
                end: now,
                volume: s.volume,
                volume_in_window: in_window,
                set: s.set_key,
                priority: s.priority,
            });
        }
        let slot = s.set;
        self.end_turn(slot, j);
        let popped = self.queues[slot].pop_front();
        debug_assert_eq!(popped, Some(j));
        self.next_head(slot);
        let s = &mut self.js[j as usize];
        s.iter += 1;
        if s.iter == job.iterations() {
            s.mode = Mode::Done;
            s.completion = Some(now);
            self.finished += 1;
        } else {
            s.mode = Mode::Computing;
            s.phase_start = now;
            self.heap.push(Due(now + job.cpu[s.iter], j));
        }
    }

    /// Ends the compute phases due now: each job asks for I/O.
    fn end_computes(&mut self) {
        while let Some(&Due(t, j)) = self.heap.peek() {
            if t > self.now {
                break;
            }
            self.heap.pop();
            self.start_io(j);
        }
    }

    /// Job `j`'s compute phase ends now: the heuristic places its I/O phase in a set, where it
    /// transfers at once if the set was empty, else queues.
    fn start_io(&mut self, j: u32) {
        let now = self.now;
        self.events += 1;
        let job = &self.workload.jobs[j as usize];
        let s = &mut self.js[j as usize];
        s.e_cpu += self.clip.overlap(s.phase_start, now);
        if self.record {
            s.phases.push(PhaseRecord {
                iteration: s.iter,
                kind: PhaseKind::Compute,
                start: s.phase_start,
                transfer_start: s.phase_start,
                end: now,
                volume: 0.0,
                volume_in_window: 0.0,
                set: None,
                priority: 0.0,
            });
        }
        let w = match self.estimate {
            None => None,
            Some(Estimate::Known) => Some(self.w_true[j as usize]),
            Some(Estimate::Noisy { error }) => {
                let f = if error > 0.0 {
                    1.0 + self.rng.gen_range(-error..=error)
                } else {
                    1.0
                };
                Some(self.w_true[j as usize] * f)
            }
            Some(Estimate::Online { .. }) => {
                s.estimator.observe_burst_start(now);
                s.estimator.estimate()
            }
        };
        let mut place = self.placer.place(j, w, job.class_w_iter);
        if s.outstayed && place.set == SetKey::New {
            place.set = SetKey::Unknown(j);
        }
        s.phase_start = now;
        s.volume = job.volume[s.iter];
        s.remaining = s.volume;
        s.done_at_begin = if self.state == WindowState::After {
            s.volume
        } else {
            0.0
        };
        s.phase_in = 0.0;
        s.priority = match self.heuristic {
            Heuristic::FairShare => place.priority * job.weight.unwrap_or(1.0),
            _ => place.priority,
        };
        s.mode = Mode::Waiting;
        self.in_io += 1;
        self.join(j, place.set);
    }

    /// The slot of set `key`, made if need be.
    fn slot_of(&mut self, key: SetKey) -> usize {
        let next_slot = self.queues.len();
        let slot = *self.slots.entry(key).or_insert(next_slot);
        if slot == self.queues.len() {
            self.queues.push(VecDeque::new());
            self.keys.push(key);
            self.turns.push(Turn::default());
        }
        slot
    }

    /// Job `j`, in an I/O phase, queues in set `key` now; it transfers at once if the set was
    /// empty.
    fn join(&mut self, j: u32, key: SetKey) {
        let now = self.now;
        let slot = self.slot_of(key);
        let s = &mut self.js[j as usize];
        s.set_key = Some(key);
        s.set = slot;
        self.queues[slot].push_back(j);
        if self.queues[slot].len() == 1 {
            self.next_head(slot);
            self.dirty = true;
        } else {
            let turn = &mut self.turns[slot];
            turn.contended_since.get_or_insert(now);
        }
    }

    /// The head of set `slot`, if any, takes its turn now.
    fn next_head(&mut self, slot: usize) {
        let now = self.now;
        if let Some(&next) = self.queues[slot].front() {
            let t = &mut self.js[next as usize];
            t.mode = Mode::Transferring;
            // A job back from a yield keeps its phase's first transfer start.
            if t.remaining == t.volume {
                t.transfer_start = now;
            }
            self.turns[slot] = Turn {
                held_since: now,
                contended_since: (self.queues[slot].len() > 1).then_some(now),
            };
            self.active.push(next);
        }
    }

    /// Job `j`'s turn at the head of set `slot` ends now: a turn in the new set is remembered.
    fn end_turn(&mut self, slot: usize, j: u32) {
        if self.keys[slot] == SetKey::New {
            let len = self.now - self.turns[slot].held_since;
            let s = &mut self.js[j as usize];
            s.longest_new_turn = s.longest_new_turn.max(len);
        }
    }

    /// When the turn of the head of set `slot` runs out under the bounds, and what then happens;
    /// `None` while nobody else in the set waits, or without bounds.
    fn expiry(&self, slot: usize) -> Option<(f64, Expiry)> {
        let queue = &self.queues[slot];
        if queue.len() < 2 {
            return None;
        }
        let head = &self.js[*queue.front()? as usize];
        let turn = self.turns[slot];
        let yields = Priority::new(head.priority)
            .and_then(|p| self.bounds.max_exclusive.of(p))
            .map(|b| {
                // Another job waits, so the turn is contended, never before it began.
                let since = turn.contended_since.unwrap_or(turn.held_since);
                (since + b.as_secs_f64(), Expiry::Yield)
            });
        let outstays = self
            .bounds
            .unknown_hold
            .filter(|_| self.keys[slot] == SetKey::New)
            .map(|hold| {
                let longest = (2.0 * head.longest_new_turn).min(AUTO_BOUND_MAX.as_secs_f64());
                let bound = hold.as_secs_f64().max(longest);
                (turn.held_since + bound, Expiry::Outstay)
            });
        match (yields, outstays) {
            (Some(y), Some(o)) => Some(if o.0 <= y.0 { o } else { y }),
            (y, o) => y.or(o),
        }
    }

    /// Ends the turns that ran out by now (see the [module docs](self)).
    fn expire_turns(&mut self) {
        let now = self.now;
        for slot in 0..self.queues.len() {
            while let Some((at, what)) = self.expiry(slot) {
                if at > now {
                    break;
                }
                let head = self.queues[slot]
                    .pop_front()
                    .expect("a set with a turn has a head");
                self.end_turn(slot, head);
                let k = self
                    .active
                    .iter()
                    .position(|&a| a == head)
                    .expect("the head transfers");
                self.active.swap_remove(k);
                self.dirty = true;
                match what {
                    Expiry::Yield => {
                        self.js[head as usize].mode = Mode::Waiting;
                        self.queues[slot].push_back(head);
                    }
                    Expiry::Outstay => {
                        self.js[head as usize].outstayed = true;
                        self.join(head, SetKey::Unknown(head));
                    }
                }
                self.next_head(slot);
            }
        }
    }

    /// The outcome per job and the metrics over the window, once the run has stopped.
    fn into_result(mut self) -> RunResult {
        let now = self.now;
        // Compute phases still running when the simulation stopped count up to the stop.
        for s in self.js.iter_mut() {
            if s.mode == Mode::Computing {
                s.e_cpu += self.clip.overlap(s.phase_start, now);
            }
        }
        let workload = self.workload;
        let window = workload.window.unwrap_or(Window {
            begin: 0.0,
            end: now.max(f64::MIN_POSITIVE),
        });
        let work: Vec<JobWork> = self
            .js
            .iter()
            .map(|s| JobWork {
                e_cpu: s.e_cpu,
                e_io: s.volume_in / self.b,
            })
            .collect();
        let metrics = Metrics::compute(window, &work);
        let len = window.len();
        let jobs = self
            .js
            .into_iter()
            .zip(&workload.jobs)
            .zip(work)
            .zip(self.w_true)
            .map(|(((s, job), work), w_iter)| JobOutcome {
                group: job.group,
                w_iter,
                iterations_done: s.iter,
                iterations: job.iterations(),
                completion: s.completion,
                work,
                stretch: work.stretch(len),
                io_slowdown: work.io_slowdown(len),
                delivered: s.delivered,
                last_set: s.set_key.map(|k| (k, s.priority)),
                phases: s.phases,
            })
            .collect();
        RunResult {
            heuristic: self.heuristic,
            window,
            end_time: now,
            events: self.events,
            jobs,
            metrics,
            segments: self.segments,
        }
    }
}

/// Simulates `workload` under `heuristic`: from event to event, each step of `Sim` in turn —
/// rates, next event, clock, window edge, I/O ends, compute ends — until nothing is left to happen.
///
/// # Errors
/// [`FluidError`] if the workload or the heuristic is invalid.
pub fn simulate(
    workload: &Workload,
    heuristic: Heuristic,
    options: SimOptions,
) -> Result<RunResult, FluidError> {
    let mut sim = Sim::new(workload, heuristic, options)?;
    loop {
        sim.update_rates();
        let Some(next) = sim.next_event() else {
            break;
        };
        sim.advance(next.at);
        if next.mark <= sim.now && sim.cross_window_edge() {
            break;
        }
        if next.io_end <= sim.now {
            sim.end_transfers(next.first_done);
        }
        sim.end_computes();
        if next.bound <= sim.now {
            sim.expire_turns();
        }
    }
    Ok(sim.into_result())
}
