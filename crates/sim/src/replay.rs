//! Request-level replay: a real policy drives a modelled device on a virtual clock.
//!
//! [`run`] feeds a workload (requests with their `arrival` set) to a [`Counted`] policy and serves
//! what it dispatches on a [`DeviceModel`]. It is a discrete-event simulation: time jumps from one
//! event to the next (an arrival, a policy timer, a batch leaving its latency phase, a batch
//! finishing its transfer). Nothing reads the wall clock or sleeps, so a replay is deterministic: the
//! same policy, workload and device give the same records, bit for bit.
//!
//! # The device model
//! A [`DeviceModel`] has a `bandwidth` in bytes per second, a fixed `latency` per dispatched batch,
//! and `slots`, the number of batches it serves at once.
//!
//! - A batch starts as soon as it is dispatched; the simulator asks the policy for a batch whenever a
//!   slot is free. At most `slots` batches are in service.
//! - A batch first spends `latency` in its slot without moving data (the round trip, the seek),
//!   then transfers its bytes.
//! - The batches transferring at the same moment share the bandwidth equally (processor sharing):
//!   with `k` of them, each moves `bandwidth / k` bytes per second. The sharing is computed exactly,
//!   with an event at every start and finish, not by time-stepping: the simulator keeps the service
//!   `V(t)` that any one transfer has received since the start (it grows at `bandwidth / k(t)`), and
//!   a transfer of `b` bytes started when the service was `V0` ends when `V(t) = V0 + b`.
//! - A batch of merged requests is one device operation: one latency, the sum of the bytes.
//! - Times are whole nanoseconds; a finish time is rounded to the nearest nanosecond.
//!
//! So one request of `b` bytes alone takes `latency + b / bandwidth`; two equal requests started
//! together both end after `latency + 2b / bandwidth`.
//!
//! - Optionally a [`SeekModel`] (a disk head): the device remembers where the last batch it started
//!   ended, `(file, offset)`, and a batch's latency phase grows by the seek to its start: in the same
//!   file `distance × seek_per_gib / 1 GiB`, capped at `max_seek`; in another file `max_seek`. So
//!   sorting and merging pay, as on a disk ([`DeviceModel::hdd`]); without a seek model offsets cost
//!   nothing, as on flash ([`DeviceModel::ssd`]).
//!
//! What the model is not: no read/write asymmetry, no rotational position, no queueing inside the
//! device beyond its slots. It is there to give policies a realistic dispatch rhythm (completions
//! arrive over time, slots fill and free) and the first-order cost of seeking, not to predict a real
//! file system.
//!
//! # What is checked
//! Every request must be dispatched exactly once (alone or merged), only after it was enqueued; every
//! batch is completed through [`Counted::complete`]; at the end the policy's conservation counters
//! must balance. A policy that stops dispatching while requests wait is an error
//! ([`SimError::Stalled`]), never a hang.

use std::collections::HashMap;

use iosets_policy::{Counted, Counters, Dispatch};
use iosets_types::{Batch, ClassId, FileId, JobId, Nanos, Outcome, Priority, Request, RequestId};

use crate::SimError;

/// Consecutive timer wake-ups with nothing in service, nothing arriving and nothing dispatched after
/// which the policy is declared stalled.
pub const MAX_IDLE_WAKEUPS: u64 = 1_000_000;

/// The modelled storage device: bandwidth shared by the batches in service, a fixed latency per
/// batch, a number of parallel slots, optionally a seek cost. See the [module docs](self).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DeviceModel {
    bandwidth: f64,
    latency: Nanos,
    slots: usize,
    seek: Option<SeekModel>,
}

/// The cost of moving a disk head: proportional to the distance inside a file, capped; a full seek
/// between files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeekModel {
    /// Seek time per GiB of distance within a file.
    pub per_gib: Nanos,
    /// The longest seek, and the cost of moving to another file.
    pub max: Nanos,
}

impl SeekModel {
    /// The seek from the head at `from` (file, offset) to `to`; zero when already there.
    pub fn cost(&self, from: Option<(FileId, u64)>, to: (FileId, u64)) -> Nanos {
        match from {
            Some((file, pos)) if file == to.0 => {
                let distance = pos.abs_diff(to.1) as f64 / (1u64 << 30) as f64;
                Nanos((distance * self.per_gib.0 as f64).round() as u64).min(self.max)
            }
            _ => self.max,
        }
    }
}

impl DeviceModel {
    /// A device moving `bandwidth` bytes per second in total, spending `latency` on each batch
    /// before its transfer, serving up to `slots` batches at once.
    ///
    /// `bandwidth` must be finite and > 0, `slots` at least 1.
    pub fn new(bandwidth: f64, latency: Nanos, slots: usize) -> Result<DeviceModel, SimError> {
        if !(bandwidth.is_finite() && bandwidth > 0.0) {
            return Err(SimError::InvalidDevice {
                field: "bandwidth",
                value: bandwidth.to_string(),
                expected: "a finite number of bytes per second > 0",
            });
        }
        if slots == 0 {
            return Err(SimError::InvalidDevice {
                field: "slots",
                value: slots.to_string(),
                expected: "at least 1 batch in service",
            });
        }
        Ok(DeviceModel {
            bandwidth,
            latency,
            slots,
            seek: None,
        })
    }

    /// The same device with a disk head that costs `seek` to move.
    pub fn with_seek(self, seek: SeekModel) -> DeviceModel {
        DeviceModel {
            seek: Some(seek),
            ..self
        }
    }

    /// A disk-like device: 150 MiB/s, 100 µs per operation, one operation at a time, 8 ms per GiB
    /// of distance up to an 8 ms full seek (between files too).
    pub fn hdd() -> DeviceModel {
        DeviceModel::new(150.0 * 1_048_576.0, Nanos::from_micros(100), 1)
            .expect("valid preset")
            .with_seek(SeekModel {
                per_gib: Nanos::from_millis(8),
                max: Nanos::from_millis(8),
            })
    }

    /// A flash-like device: 2 GiB/s, 80 µs per operation, 8 operations at once, no seek cost.
    pub fn ssd() -> DeviceModel {
        DeviceModel::new(2048.0 * 1_048_576.0, Nanos::from_micros(80), 8).expect("valid preset")
    }

    /// The seek model, if the device has a head.
    pub fn seek(&self) -> Option<SeekModel> {
        self.seek
    }

    /// Total bandwidth, bytes per second.
    pub fn bandwidth(&self) -> f64 {
        self.bandwidth
    }

    /// Fixed time each batch spends in its slot before transferring.
    pub fn latency(&self) -> Nanos {
        self.latency
    }

    /// Batches served at once.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// How long a batch of `bytes` takes when it has the device to itself.
    pub fn solo_time(&self, bytes: u64) -> Nanos {
        self.latency + Nanos(ns_for(bytes as f64, self.bandwidth / 1e9))
    }
}

/// What happened to one request of the workload.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RequestRecord {
    /// The request.
    pub id: RequestId,
    /// Its job.
    pub job: JobId,
    /// Its class, if it had one.
    pub class: Option<ClassId>,
    /// Its priority hint, if it had one.
    pub priority: Option<Priority>,
    /// Its length in bytes.
    pub bytes: u64,
    /// Position in dispatch order (0 = dispatched first). Requests merged into one batch get
    /// consecutive positions, in the batch's order.
    pub order: usize,
    /// The batch it was served in (the batch's first request id).
    pub batch: RequestId,
    /// When it was enqueued.
    pub arrival: Nanos,
    /// When its batch was dispatched.
    pub dispatch: Nanos,
    /// When its batch finished.
    pub complete: Nanos,
}

impl RequestRecord {
    /// Time spent queued in the policy: dispatch − arrival.
    pub fn wait(&self) -> Nanos {
        self.dispatch - self.arrival
    }

    /// Time from arrival to completion.
    pub fn response(&self) -> Nanos {
        self.complete - self.arrival
    }
}

/// The outcome of a replay.
#[derive(Clone, Debug)]
pub struct ReplayResult {
    /// The policy's registry name.
    pub policy: &'static str,
    /// The device it ran on.
    pub device: DeviceModel,
    /// One record per request of the workload, in dispatch order (`records[i].order == i`).
    pub records: Vec<RequestRecord>,
    /// Batches dispatched.
    pub batches: u64,
    /// The policy's conservation counters at the end (balanced).
    pub counters: Counters,
}

impl ReplayResult {
    /// Total bytes served.
    pub fn total_bytes(&self) -> u64 {
        self.records.iter().map(|r| r.bytes).sum()
    }

    /// The earliest arrival.
    pub fn first_arrival(&self) -> Nanos {
        self.records
            .iter()
            .map(|r| r.arrival)
            .min()
            .unwrap_or(Nanos::ZERO)
    }

    /// The latest completion.
    pub fn last_completion(&self) -> Nanos {
        self.records
            .iter()
            .map(|r| r.complete)
            .max()
            .unwrap_or(Nanos::ZERO)
    }

    /// From the first arrival to the last completion.
    pub fn makespan(&self) -> Nanos {
        self.last_completion() - self.first_arrival()
    }

    /// Bytes per second over the makespan (0 for an empty or instantaneous replay).
    pub fn throughput(&self) -> f64 {
        let s = self.makespan().as_secs_f64();
        if s > 0.0 {
            self.total_bytes() as f64 / s
        } else {
            0.0
        }
    }
}

/// Nanoseconds to move `bytes` at `rate` bytes per nanosecond, rounded to the nearest.
fn ns_for(bytes: f64, rate: f64) -> u64 {
    let ns = (bytes / rate).round();
    if ns <= 0.0 {
        0
    } else if ns >= u64::MAX as f64 {
        u64::MAX
    } else {
        ns as u64
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    NotArrived,
    Queued,
    Dispatched,
}

#[derive(Clone, Copy, Debug)]
enum Stage {
    /// In its latency phase until this time.
    Latency(Nanos),
    /// Transferring; done when the per-transfer service reaches this many bytes.
    Transfer(f64),
}

#[derive(Debug)]
struct InService {
    id: RequestId,
    bytes: u64,
    /// Indices into the records of its requests.
    records: std::ops::Range<usize>,
    stage: Stage,
}

/// The simulation state between events.
struct Sim<'w> {
    policy: Counted,
    name: &'static str,
    device: DeviceModel,
    workload: &'w [Request],
    index: HashMap<RequestId, usize>,
    state: Vec<State>,
    /// Workload indices by (arrival, position).
    arrivals: Vec<usize>,
    next_arrival: usize,
    records: Vec<RequestRecord>,
    in_service: Vec<InService>,
    /// Service received by any one transfer since the start, in bytes.
    served: f64,
    now: Nanos,
    timer: Option<Nanos>,
    batches: u64,
    /// Where the last batch started ends: the disk head, for the seek model.
    head: Option<(FileId, u64)>,
}

impl Sim<'_> {
    fn transfers(&self) -> usize {
        self.in_service
            .iter()
            .filter(|b| matches!(b.stage, Stage::Transfer(_)))
            .count()
    }

    /// Bytes per nanosecond each transfer receives now (`None` when nothing transfers).
    fn rate(&self) -> Option<f64> {
        let k = self.transfers();
        (k > 0).then(|| self.device.bandwidth / 1e9 / k as f64)
    }

    /// The in-service batch that finishes its transfer first (earliest dispatched among ties) and
    /// the nanoseconds until it does.
    fn next_finish(&self) -> Option<(usize, u64)> {
        let rate = self.rate()?;
        let (pos, target) = self
            .in_service
            .iter()
            .enumerate()
            .filter_map(|(i, b)| match b.stage {
                Stage::Transfer(t) => Some((i, t)),
                Stage::Latency(_) => None,
            })
            .min_by(|a, b| a.1.total_cmp(&b.1))?;
        Some((pos, ns_for(target - self.served, rate)))
    }

    /// Moves batches whose latency ended and completes transfers that end now. True if any
    /// batch completed.
    fn finish_due(&mut self) -> Result<bool, SimError> {
        for b in &mut self.in_service {
            if let Stage::Latency(until) = b.stage {
                if until <= self.now {
                    b.stage = Stage::Transfer(self.served + b.bytes as f64);
                }
            }
        }
        let mut any = false;
        while let Some((pos, 0)) = self.next_finish() {
            let done = self.in_service.remove(pos);
            if let Stage::Transfer(target) = done.stage {
                self.served = self.served.max(target);
            }
            for r in &mut self.records[done.records] {
                r.complete = self.now;
            }
            self.policy
                .complete(done.id, Outcome::Done { bytes: done.bytes }, self.now)
                .map_err(|error| SimError::Policy {
                    policy: self.name,
                    error,
                })?;
            any = true;
        }
        Ok(any)
    }

    /// Enqueues every request that has arrived by now. True if any did.
    fn admit_arrivals(&mut self) -> bool {
        let mut any = false;
        while let Some(&i) = self.arrivals.get(self.next_arrival) {
            let req = self.workload[i];
            if req.arrival > self.now {
                break;
            }
            self.state[i] = State::Queued;
            self.policy.enqueue(req, self.now);
            self.next_arrival += 1;
            any = true;
        }
        any
    }

    /// Asks the policy for batches while a slot is free. True if any was dispatched.
    fn dispatch_free_slots(&mut self) -> Result<bool, SimError> {
        self.timer = None;
        let mut any = false;
        while self.in_service.len() < self.device.slots {
            match self.policy.dispatch(self.now) {
                Dispatch::Ready(batch) => {
                    self.start(batch)?;
                    any = true;
                }
                Dispatch::NotBefore(t) => {
                    // A timer in the past or now would have us ask again at once, forever.
                    self.timer = Some(t.max(self.now + Nanos(1)));
                    break;
                }
                Dispatch::Idle => break,
            }
        }
        Ok(any)
    }

    fn start(&mut self, batch: Batch) -> Result<(), SimError> {
        let first = self.records.len();
        for req in batch.requests() {
            let &i = self.index.get(&req.id).ok_or(SimError::UnknownRequest {
                policy: self.name,
                id: req.id,
            })?;
            match self.state[i] {
                State::Queued => {}
                State::NotArrived => {
                    return Err(SimError::UnknownRequest {
                        policy: self.name,
                        id: req.id,
                    })
                }
                State::Dispatched => {
                    return Err(SimError::DispatchedTwice {
                        policy: self.name,
                        id: req.id,
                    })
                }
            }
            self.state[i] = State::Dispatched;
            let orig = &self.workload[i];
            self.records.push(RequestRecord {
                id: orig.id,
                job: orig.job,
                class: orig.class,
                priority: orig.priority,
                bytes: orig.len,
                order: self.records.len(),
                batch: batch.id(),
                arrival: orig.arrival,
                dispatch: self.now,
                complete: self.now,
            });
        }
        let bytes = batch.bytes();
        let target = (batch.head().file, batch.head().offset);
        let seek = self
            .device
            .seek
            .map_or(Nanos::ZERO, |s| s.cost(self.head, target));
        self.head = Some((batch.head().file, batch.end()));
        let setup = self.device.latency + seek;
        let stage = if setup > Nanos::ZERO {
            Stage::Latency(self.now + setup)
        } else {
            Stage::Transfer(self.served + bytes as f64)
        };
        self.in_service.push(InService {
            id: batch.id(),
            bytes,
            records: first..self.records.len(),
            stage,
        });
        self.batches += 1;
        Ok(())
    }

    /// The time of the next event, if any.
    fn next_event(&self) -> Option<Nanos> {
        let arrival = self
            .arrivals
            .get(self.next_arrival)
            .map(|&i| self.workload[i].arrival);
        let latency = self.in_service.iter().filter_map(|b| match b.stage {
            Stage::Latency(t) => Some(t),
            Stage::Transfer(_) => None,
        });
        let finish = self.next_finish().map(|(_, dt)| self.now + Nanos(dt));
        arrival
            .into_iter()
            .chain(self.timer)
            .chain(latency)
            .chain(finish)
            .min()
    }

    /// Moves the clock to `t`, crediting the service the transfers received meanwhile.
    fn advance(&mut self, t: Nanos) {
        if let Some(rate) = self.rate() {
            self.served += (t - self.now).0 as f64 * rate;
        }
        self.now = t;
    }

    fn stalled(&self, reason: &'static str) -> SimError {
        SimError::Stalled {
            policy: self.name,
            now: self.now,
            queued: self.policy.queued(),
            in_service: self.in_service.len(),
            undispatched: self.workload.len() - self.records.len(),
            reason,
        }
    }
}

/// Replays `workload` through `policy` on `device`; see the [module docs](self).
///
/// Each request's `arrival` says when it is enqueued; request ids must be unique. Returns one
/// [`RequestRecord`] per request, in dispatch order.
///
/// # Errors
/// [`SimError::DuplicateRequestId`] for a bad workload; [`SimError::UnknownRequest`],
/// [`SimError::DispatchedTwice`], [`SimError::Stalled`], [`SimError::NotDispatched`] or
/// [`SimError::Policy`] when the policy breaks its contract.
pub fn run(
    policy: Counted,
    workload: Vec<Request>,
    device: DeviceModel,
) -> Result<ReplayResult, SimError> {
    let mut index = HashMap::with_capacity(workload.len());
    for (i, r) in workload.iter().enumerate() {
        if index.insert(r.id, i).is_some() {
            return Err(SimError::DuplicateRequestId { id: r.id });
        }
    }
    let mut arrivals: Vec<usize> = (0..workload.len()).collect();
    arrivals.sort_by_key(|&i| (workload[i].arrival, i));
    let name = policy.name();
    let mut sim = Sim {
        policy,
        name,
        device,
        workload: &workload,
        index,
        state: vec![State::NotArrived; workload.len()],
        arrivals,
        next_arrival: 0,
        records: Vec::with_capacity(workload.len()),
        in_service: Vec::with_capacity(device.slots),
        served: 0.0,
        now: Nanos::ZERO,
        timer: None,
        batches: 0,
        head: None,
    };

    let mut idle_wakeups = 0u64;
    loop {
        let completed = sim.finish_due()?;
        let arrived = sim.admit_arrivals();
        let dispatched = sim.dispatch_free_slots()?;
        let done = sim.next_arrival == workload.len()
            && sim.in_service.is_empty()
            && sim.records.len() == workload.len();
        if done {
            break;
        }
        if completed || arrived || dispatched || !sim.in_service.is_empty() {
            idle_wakeups = 0;
        } else {
            idle_wakeups += 1;
            if idle_wakeups > MAX_IDLE_WAKEUPS {
                return Err(sim.stalled("kept answering NotBefore without dispatching"));
            }
        }
        match sim.next_event() {
            Some(t) => sim.advance(t),
            None => {
                return Err(sim.stalled("answered Idle with nothing in service or due to arrive"))
            }
        }
    }

    sim.policy
        .check_balance()
        .map_err(|error| SimError::Policy {
            policy: name,
            error,
        })?;
    if let Some(i) = sim.state.iter().position(|s| *s != State::Dispatched) {
        let missing = sim
            .state
            .iter()
            .filter(|s| **s != State::Dispatched)
            .count();
        return Err(SimError::NotDispatched {
            policy: name,
            missing,
            first: workload[i].id,
        });
    }
    Ok(ReplayResult {
        policy: name,
        device,
        records: sim.records,
        batches: sim.batches,
        counters: sim.policy.counters(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use iosets_types::Op;

    fn noop() -> Counted {
        Counted::build("noop", &[]).unwrap()
    }

    #[test]
    fn device_rejects_bad_parameters() {
        assert!(DeviceModel::new(0.0, Nanos::ZERO, 1).is_err());
        assert!(DeviceModel::new(-1.0, Nanos::ZERO, 1).is_err());
        assert!(DeviceModel::new(f64::NAN, Nanos::ZERO, 1).is_err());
        assert!(DeviceModel::new(1e9, Nanos::ZERO, 0).is_err());
        assert!(DeviceModel::new(1e9, Nanos::ZERO, 1).is_ok());
    }

    #[test]
    fn solo_time_is_latency_plus_transfer() {
        let d = DeviceModel::new(1e9, Nanos(250), 4).unwrap();
        assert_eq!(d.solo_time(1000), Nanos(1250));
    }

    #[test]
    fn empty_workload_is_an_empty_result() {
        let d = DeviceModel::new(1e9, Nanos::ZERO, 1).unwrap();
        let r = run(noop(), Vec::new(), d).unwrap();
        assert!(r.records.is_empty());
        assert_eq!(r.makespan(), Nanos::ZERO);
    }

    #[test]
    fn zero_byte_requests_finish_at_once() {
        let d = DeviceModel::new(1e9, Nanos::ZERO, 1).unwrap();
        let w = vec![
            Request::builder(JobId(1), Op::Other)
                .id(RequestId(1))
                .file(FileId(1))
                .build(),
            Request::builder(JobId(1), Op::Other)
                .id(RequestId(2))
                .file(FileId(1))
                .build(),
        ];
        let r = run(noop(), w, d).unwrap();
        assert_eq!(r.records.len(), 2);
        assert!(r.records.iter().all(|x| x.complete == Nanos::ZERO));
    }

    #[test]
    fn duplicate_ids_are_rejected() {
        let d = DeviceModel::new(1e9, Nanos::ZERO, 1).unwrap();
        let w = vec![
            Request::builder(JobId(1), Op::Read)
                .id(RequestId(1))
                .file(FileId(1))
                .range(0, 1)
                .build(),
            Request::builder(JobId(2), Op::Read)
                .id(RequestId(1))
                .file(FileId(2))
                .range(0, 1)
                .build(),
        ];
        assert!(matches!(
            run(noop(), w, d),
            Err(SimError::DuplicateRequestId { .. })
        ));
    }
}
