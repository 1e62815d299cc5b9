//! The limit on data requests in service: how many batches that move bytes the runtime lets out
//! to the workers at once, fixed or adapted to the device.
//!
//! # Why
//! A policy only acts where requests queue. Once a batch is handed to a worker its order is
//! decided: the device serves what it holds in its own order (a FIFO, an elevator, a PFS's
//! queues), whatever the priorities. With more workers than the clients have requests
//! outstanding, every request goes straight into service and the policy never chooses anything:
//! measured through the mount on a 20 MiB/s server, two jobs of 4 synchronous `dd` writers with
//! priorities 1 and 0.01 split the bytes 50 : 50 with 16 workers, 71 : 29 with 4 (ideal 99 : 1).
//! So the runtime keeps the device's queue short, as BFQ dispatches to the drive one request at
//! a time and Ceph's dmClock queue keeps a bound on the operations it lets into the object store:
//! the rest waits in the policy, where the order is made.
//!
//! # What it limits
//! Batches whose first request is a read or a write (`Op::Read`, `Op::Write`), counted from
//! hand-out to completion. Metadata and fsync (`Op::Other`) are not counted: they do not queue
//! at the data device, and a `stat` must not wait for a data slot. The policy's order is kept:
//! when the limit is reached the runtime still asks the policy, hands out what it gives if that
//! is not data, and parks the first data batch it gives (one, already dispatched) until a slot
//! frees; nothing else is asked of the policy while a batch is parked.
//!
//! # `auto`: the adaptive limit
//! The limit follows the device, like Linux's writeback throttling (`wbt`) and `blk-iolatency`
//! keep a queue depth that holds a latency target, and as TCP Vegas keeps a few packets queued:
//! the service time of each data batch (hand-out to completion) is compared with the shortest
//! seen for batches of its size (sizes in classes of powers of four), which is what the device
//! takes with nothing queued in it. Every window of `max(8, 2 × limit)` data completions:
//! - if their mean ratio to that shortest time is above [`LATENCY_TARGET`] (1.5: requests wait in
//!   the device for half a service time on average), the limit goes down by a quarter (at least
//!   by one, never below 1);
//! - else, if the limit held a batch back during the window, it goes up: doubled until the first
//!   decrease (slow start, from 1), then by one;
//! - at a limit of 1, a window still above the target raises the shortest times by 1/64, so a
//!   device that got slower for good is learnt again (only there: with more in service no batch
//!   shows the unloaded time, and raising them would let the limit drift up).
//!
//! On a device that serves one request at a time (the emulated device, a disk), a second request
//! in service doubles the service time, so the limit stays at 1–2: the policy orders every
//! request. On a device with `k` parallel lanes (an SSD, a PFS with many targets) the service time
//! stays flat up to about `k` and the limit settles near 1.5 `k`: throughput stays the device's,
//! and at most about `k / 2` requests wait in it. It never exceeds the service threads.
//!
//! # Against worker count and client concurrency
//! Workers bound what can be in service; the limit bounds it lower when the device does not
//! need that many. Priorities act when the favoured job has more requests outstanding than the
//! limit leaves in service: a job of `c` synchronous writers has at most `c` requests at the
//! server, and while fewer than `c` of them are in service the rest queue in the policy, ahead
//! of the other jobs. A job with one outstanding request at a time (one synchronous writer)
//! cannot be favoured by any work-conserving order: between its requests the device serves
//! whoever is queued.

use std::fmt;
use std::str::FromStr;

use iosets_types::{Batch, Op};

/// The ratio of service time to the shortest seen for the size above which `auto` lowers the
/// limit, in 256ths (1.5).
pub const LATENCY_TARGET: u64 = 384;
/// The largest ratio one batch counts for, in 256ths (8): one stalled batch (a page-cache flush)
/// moves the window's mean at most this far.
const RATIO_CAP: u64 = 8 * 256;
/// The largest limit, when the service threads are not known.
const UNKNOWN_THREADS_MAX: usize = 4096;
/// Size classes of the shortest service times: powers of four from 1 byte to 1 GiB and beyond.
const CLASSES: usize = 16;

/// How many data batches may be in service at once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InServiceLimit {
    /// No limit beyond the service threads (the runtime's default, and what it did before).
    #[default]
    Off,
    /// At most this many (at least 1).
    Fixed(usize),
    /// Adapted to the device's service times; see the [module documentation](self).
    Auto,
}

impl InServiceLimit {
    /// `Fixed(n)` with `n` checked: at least 1.
    ///
    /// # Errors
    /// A message saying why `n` is refused.
    pub fn fixed(n: usize) -> Result<InServiceLimit, String> {
        if n == 0 {
            return Err("inservice_limit = 0: must be at least 1 (or auto, or off)".into());
        }
        Ok(InServiceLimit::Fixed(n))
    }
}

impl fmt::Display for InServiceLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InServiceLimit::Off => f.write_str("off"),
            InServiceLimit::Fixed(n) => write!(f, "{n}"),
            InServiceLimit::Auto => f.write_str("auto"),
        }
    }
}

impl FromStr for InServiceLimit {
    type Err = String;

    /// `auto`, `off`, or a number of data batches (at least 1).
    fn from_str(s: &str) -> Result<InServiceLimit, String> {
        match s.trim() {
            "auto" => Ok(InServiceLimit::Auto),
            "off" => Ok(InServiceLimit::Off),
            t => match t.parse::<usize>() {
                Ok(n) => InServiceLimit::fixed(n),
                Err(_) => Err(format!(
                    "inservice_limit = {t:?}: expected auto, off or a number of requests (at least 1)"
                )),
            },
        }
    }
}

/// Whether `batch` counts against the limit: it moves data.
pub(crate) fn governed(batch: &Batch) -> bool {
    matches!(batch.head().op, Op::Read | Op::Write)
}

/// The size class of a batch of `bytes`.
fn class(bytes: u64) -> usize {
    // 0 and 1 byte in class 0; then one class per power of four.
    let bits = 64 - bytes.saturating_sub(1).leading_zeros() as usize;
    (bits.div_ceil(2)).min(CLASSES - 1)
}

/// The limit's state, under the scheduler's lock.
#[derive(Debug)]
pub(crate) struct Limiter {
    mode: InServiceLimit,
    /// The limit in force (`usize::MAX` when off).
    limit: usize,
    /// Its ceiling: the service threads.
    max: usize,
    /// Data batches handed out and not completed.
    in_service: usize,
    /// Shortest service time seen per size class, ns (0: none yet).
    floor: [u64; CLASSES],
    /// Completions in the current window and the sum of their ratios (256ths).
    count: u64,
    sum: u64,
    /// Whether the limit held a batch back in the current window.
    limited: bool,
    /// Doubling until the first decrease.
    slow_start: bool,
    /// Changes of the limit since the start.
    changes: u64,
}

impl Default for Limiter {
    fn default() -> Limiter {
        Limiter::new(InServiceLimit::Off, 0)
    }
}

impl Limiter {
    /// A limiter in `mode` for `threads` service threads (0: not known).
    pub(crate) fn new(mode: InServiceLimit, threads: usize) -> Limiter {
        let mut l = Limiter {
            mode,
            limit: usize::MAX,
            max: UNKNOWN_THREADS_MAX,
            in_service: 0,
            floor: [0; CLASSES],
            count: 0,
            sum: 0,
            limited: false,
            slow_start: true,
            changes: 0,
        };
        l.set_threads(threads);
        l.limit = match mode {
            InServiceLimit::Off => usize::MAX,
            InServiceLimit::Fixed(n) => n,
            InServiceLimit::Auto => 1,
        };
        l
    }

    /// Puts `mode` in force, keeping what was learnt of the device and the count in service.
    pub(crate) fn set_mode(&mut self, mode: InServiceLimit) {
        let mut next = Limiter::new(mode, 0);
        next.max = self.max;
        next.in_service = self.in_service;
        next.floor = self.floor;
        if mode == InServiceLimit::Auto && self.mode == InServiceLimit::Auto {
            next.limit = self.limit;
            next.slow_start = self.slow_start;
        }
        next.changes = self.changes + u64::from(next.limit != self.limit);
        *self = next;
    }

    /// The service threads changed (0: not known).
    pub(crate) fn set_threads(&mut self, threads: usize) {
        self.max = if threads == 0 {
            UNKNOWN_THREADS_MAX
        } else {
            threads
        };
        if self.mode == InServiceLimit::Auto {
            self.limit = self.limit.min(self.max);
        }
    }

    pub(crate) fn mode(&self) -> InServiceLimit {
        self.mode
    }

    /// The limit in force; `None` when off.
    pub(crate) fn limit(&self) -> Option<usize> {
        (self.mode != InServiceLimit::Off).then_some(self.limit)
    }

    /// Data batches in service.
    pub(crate) fn in_service(&self) -> usize {
        self.in_service
    }

    /// Changes of the limit since the start.
    pub(crate) fn changes(&self) -> u64 {
        self.changes
    }

    /// Whether another data batch may go into service.
    pub(crate) fn room(&self) -> bool {
        self.in_service < self.limit
    }

    /// The limit held a data batch back.
    pub(crate) fn held_back(&mut self) {
        self.limited = true;
    }

    /// A data batch went into service.
    pub(crate) fn started(&mut self) {
        self.in_service += 1;
    }

    /// A data batch of `bytes` completed after `service_ns` in service. Returns the new limit if
    /// it changed.
    pub(crate) fn completed(&mut self, bytes: u64, service_ns: u64) -> Option<usize> {
        self.in_service = self.in_service.saturating_sub(1);
        if self.mode != InServiceLimit::Auto {
            return None;
        }
        let c = class(bytes);
        let service_ns = service_ns.max(1);
        if self.floor[c] == 0 || service_ns < self.floor[c] {
            self.floor[c] = service_ns;
        }
        let ratio = (u128::from(service_ns) * 256 / u128::from(self.floor[c]))
            .min(u128::from(RATIO_CAP)) as u64;
        self.count += 1;
        self.sum += ratio;
        let window = (2 * self.limit).max(8) as u64;
        if self.count < window {
            return None;
        }
        let mean = self.sum / self.count;
        let before = self.limit;
        if mean > LATENCY_TARGET {
            self.limit = (self.limit * 3 / 4).min(self.limit - 1).max(1);
            self.slow_start = false;
        } else if self.limited {
            self.limit = if self.slow_start {
                self.limit.saturating_mul(2)
            } else {
                self.limit + 1
            }
            .min(self.max);
        }
        if self.limit == 1 && mean > LATENCY_TARGET {
            // Alone in service and still late: the device itself got slower (or busier with
            // others' work). Only here may the shortest times rise; above 1 in service no sample
            // shows the unloaded time, and raising them there would let the limit drift up.
            for f in &mut self.floor {
                *f += *f / 64;
            }
        }
        self.count = 0;
        self.sum = 0;
        self.limited = false;
        (self.limit != before).then(|| {
            self.changes += 1;
            self.limit
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_auto_off_and_counts_and_refuses_the_rest() {
        assert_eq!("auto".parse(), Ok(InServiceLimit::Auto));
        assert_eq!(" off ".parse(), Ok(InServiceLimit::Off));
        assert_eq!("3".parse(), Ok(InServiceLimit::Fixed(3)));
        for bad in ["0", "-1", "1.5", "", "many"] {
            let e = bad.parse::<InServiceLimit>().unwrap_err();
            assert!(e.contains("inservice_limit"), "{bad}: {e}");
        }
        for l in [
            InServiceLimit::Auto,
            InServiceLimit::Off,
            InServiceLimit::Fixed(7),
        ] {
            assert_eq!(l.to_string().parse(), Ok(l));
        }
    }

    #[test]
    fn size_classes_are_powers_of_four() {
        assert_eq!(class(0), 0);
        assert_eq!(class(1), 0);
        assert_eq!(class(4), 1);
        assert_eq!(class(5), 2);
        assert_eq!(class(16), 2);
        assert_eq!(class(4096), 6);
        assert_eq!(class(1 << 20), 10);
        assert_eq!(class(u64::MAX), CLASSES - 1);
    }

    /// Drives `l` against a device of `lanes` parallel lanes, each serving a batch in `t` ns,
    /// always backlogged, for `completions` completions; returns the limits seen after each.
    fn drive(l: &mut Limiter, lanes: usize, completions: usize) -> Vec<usize> {
        let t = 50_000_000u64;
        let mut seen = Vec::new();
        for _ in 0..completions {
            // Fill the limit; the backlog is never empty, so the limit binds.
            while l.room() {
                l.started();
            }
            l.held_back();
            // In the steady state of `lanes` FIFO lanes with completions staggered, a batch
            // handed out with n in service waits for n - lanes of them, a lane-th of t each.
            let n = l.in_service();
            let service = t + t * n.saturating_sub(lanes) as u64 / lanes as u64;
            l.completed(1 << 20, service);
            seen.push(l.limit().unwrap());
        }
        seen
    }

    #[test]
    fn auto_keeps_one_or_two_in_service_on_a_serial_device() {
        let mut l = Limiter::new(InServiceLimit::Auto, 16);
        let seen = drive(&mut l, 1, 400);
        assert!(
            seen[100..].iter().all(|&n| (1..=2).contains(&n)),
            "{seen:?}"
        );
        assert!(l.changes() > 2, "it adapts: {seen:?}");
    }

    #[test]
    fn auto_grows_to_the_lanes_of_a_parallel_device_within_the_threads() {
        let mut l = Limiter::new(InServiceLimit::Auto, 64);
        let seen = drive(&mut l, 8, 2000);
        let tail = &seen[1000..];
        assert!(
            tail.iter().all(|&n| (8..=16).contains(&n)),
            "limit on 8 lanes: {tail:?}"
        );
        let mut l = Limiter::new(InServiceLimit::Auto, 4);
        let seen = drive(&mut l, 8, 400);
        assert!(seen.iter().all(|&n| n <= 4), "never above the threads");
        assert_eq!(seen.last(), Some(&4));
    }

    #[test]
    fn auto_does_not_grow_when_the_limit_never_binds() {
        let mut l = Limiter::new(InServiceLimit::Auto, 16);
        for _ in 0..100 {
            l.started();
            l.completed(1 << 20, 1_000_000);
        }
        assert_eq!(l.limit(), Some(1));
    }

    #[test]
    fn a_slower_device_is_learnt_again() {
        let mut l = Limiter::new(InServiceLimit::Auto, 16);
        drive(&mut l, 1, 200);
        // Now every batch takes 4x as long, alone: after the floors age, the limit comes back
        // up to 1-2 rather than staying pinned at 1 with every window "late".
        let mut grew = false;
        for _ in 0..4000 {
            while l.room() {
                l.started();
            }
            l.held_back();
            let n = l.in_service() as u64;
            l.completed(1 << 20, 200_000_000 * n);
            grew |= l.limit() == Some(2);
        }
        assert!(grew, "the limit stayed at 1");
    }

    #[test]
    fn fixed_and_off_do_not_adapt() {
        let mut l = Limiter::new(InServiceLimit::Fixed(3), 16);
        assert_eq!(drive(&mut l, 1, 100).last(), Some(&3));
        let mut l = Limiter::new(InServiceLimit::Off, 16);
        assert_eq!(l.limit(), None);
        for _ in 0..1000 {
            assert!(l.room());
            l.started();
        }
    }
}
