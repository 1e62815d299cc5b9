//! Who a quota rule held, and why: the time each admitted request waited in the quota gate,
//! split into the part its rates held it (its job's bucket, or its rule's shared one, had no
//! token) and the part it waited for a thread (the rule's cap, its job's ceiling, every
//! thread busy), summed per rule and kept per job and per user over the last minute and the
//! last hour, so that `iosets ctl rule list`, `iosets top` and `/metrics` can answer "who hit
//! the limit" (the Stanford Oak question) with bounded memory.
//!
//! # How the split is made
//! A rate bucket that a charge leaves without a token stays so until it refills to one; the
//! gate keeps the union of those intervals as a running total per bucket (`Blocked`), so a
//! request held from `a` to `b` was held by a rate for `Blocked::at(b) - Blocked::at(a)` (the
//! larger of its job's and its rule's), and for a thread the rest of `b - a`.
//!
//! # Bounds
//! Two rings of slots: 12 slots of 5 s (the last minute) and 60 of 1 min (the last hour). A slot
//! keeps at most [`SLOT_KEYS`] jobs and as many users; beyond that the time goes to the slot's
//! "others". Each rule thus holds at most 72 × 2 × 128 entries.

use std::collections::VecDeque;

use iosets_types::hash::IdMap;
use iosets_types::Nanos;

/// The most jobs (and users) one slot keeps apart.
pub const SLOT_KEYS: usize = 128;
/// How many of the most held jobs and users a report lists.
pub const TOP_N: usize = 5;

const FINE: u64 = 5_000_000_000;
const FINE_SLOTS: usize = 12;
const COARSE: u64 = 60_000_000_000;
const COARSE_SLOTS: usize = 60;

/// The union of the intervals a bucket had no token, as a running total.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Blocked {
    /// Nanoseconds blocked before the current interval.
    base: u64,
    start: Nanos,
    end: Nanos,
}

impl Blocked {
    /// The bucket has no token from `from` until `until`.
    pub(crate) fn block(&mut self, from: Nanos, until: Nanos) {
        if until <= from {
            return;
        }
        if from <= self.end {
            self.end = self.end.max(until);
            self.start = self.start.min(from);
        } else {
            self.base += self.end.0 - self.start.0;
            self.start = from;
            self.end = until;
        }
    }

    /// Nanoseconds blocked up to `t`.
    pub(crate) fn at(&self, t: Nanos) -> u64 {
        let t = t.0.clamp(self.start.0, self.end.0);
        self.base + (t - self.start.0)
    }
}

/// Held time by cause: (waiting for a thread, held by a rate), nanoseconds.
pub(crate) type HeldNs = (u64, u64);

/// One who's time in a slot.
#[derive(Debug, Default)]
struct Slot {
    index: u64,
    jobs: IdMap<u64, HeldNs>,
    users: IdMap<u64, HeldNs>,
    /// Time of jobs, and of users, past the slot's bound.
    other_jobs: HeldNs,
    other_users: HeldNs,
}

impl Slot {
    fn add(map: &mut IdMap<u64, HeldNs>, others: &mut HeldNs, key: u64, held: HeldNs) {
        let full = map.len() >= SLOT_KEYS;
        match map.get_mut(&key) {
            Some(v) => {
                v.0 += held.0;
                v.1 += held.1;
            }
            None if full => {
                others.0 += held.0;
                others.1 += held.1;
            }
            None => {
                map.insert(key, held);
            }
        }
    }
}

/// A ring of slots of `width` nanoseconds, the last `len` kept.
#[derive(Debug)]
struct Ring {
    width: u64,
    len: usize,
    slots: VecDeque<Slot>,
}

impl Ring {
    fn new(width: u64, len: usize) -> Ring {
        Ring {
            width,
            len,
            slots: VecDeque::new(),
        }
    }

    fn add(&mut self, now: Nanos, job: u64, user: Option<u32>, held: HeldNs) {
        let index = now.0 / self.width;
        if self.slots.back().is_none_or(|s| s.index != index) {
            self.slots.push_back(Slot {
                index,
                ..Slot::default()
            });
        }
        self.trim(index);
        let slot = self.slots.back_mut().expect("just pushed");
        Slot::add(&mut slot.jobs, &mut slot.other_jobs, job, held);
        if let Some(u) = user {
            Slot::add(&mut slot.users, &mut slot.other_users, u64::from(u), held);
        }
    }

    fn trim(&mut self, index: u64) {
        while self
            .slots
            .front()
            .is_some_and(|s| s.index + self.len as u64 <= index)
        {
            self.slots.pop_front();
        }
    }

    /// The most held jobs (`users` false) or users over the ring's window ending at `now`.
    fn top(&self, now: Nanos, users: bool) -> Vec<(u64, HeldNs)> {
        let index = now.0 / self.width;
        let mut sum: IdMap<u64, HeldNs> = IdMap::default();
        for s in &self.slots {
            if s.index + self.len as u64 <= index {
                continue;
            }
            for (&k, v) in if users { &s.users } else { &s.jobs } {
                let e = sum.entry(k).or_default();
                e.0 += v.0;
                e.1 += v.1;
            }
        }
        let mut all: Vec<(u64, HeldNs)> = sum.into_iter().collect();
        all.sort_unstable_by(|a, b| {
            (b.1 .0 + b.1 .1)
                .cmp(&(a.1 .0 + a.1 .1))
                .then(a.0.cmp(&b.0))
        });
        all.truncate(TOP_N);
        all
    }
}

/// One rule's held time: totals, and per job and user over the last minute and hour.
#[derive(Debug)]
pub(crate) struct HeldLog {
    /// Since the rule was added.
    pub(crate) total: HeldNs,
    minute: Ring,
    hour: Ring,
}

impl Default for HeldLog {
    fn default() -> HeldLog {
        HeldLog {
            total: (0, 0),
            minute: Ring::new(FINE, FINE_SLOTS),
            hour: Ring::new(COARSE, COARSE_SLOTS),
        }
    }
}

impl HeldLog {
    /// A request of `job` from `user` was admitted at `now` after being held `held`.
    pub(crate) fn add(&mut self, now: Nanos, job: u64, user: Option<u32>, held: HeldNs) {
        if held == (0, 0) {
            return;
        }
        self.total.0 += held.0;
        self.total.1 += held.1;
        self.minute.add(now, job, user, held);
        self.hour.add(now, job, user, held);
    }

    /// The most held jobs and users over the last minute and the last hour, as of `now`.
    pub(crate) fn top(&self, now: Nanos) -> HeldTop {
        HeldTop {
            jobs_1m: self.minute.top(now, false),
            users_1m: self.minute.top(now, true),
            jobs_1h: self.hour.top(now, false),
            users_1h: self.hour.top(now, true),
        }
    }
}

/// The most held jobs and users of a rule: (job id or uid, (thread ns, rate ns)), most first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HeldTop {
    /// Jobs, over the last minute.
    pub jobs_1m: Vec<(u64, (u64, u64))>,
    /// Users, over the last minute.
    pub users_1m: Vec<(u64, (u64, u64))>,
    /// Jobs, over the last hour.
    pub jobs_1h: Vec<(u64, (u64, u64))>,
    /// Users, over the last hour.
    pub users_1h: Vec<(u64, (u64, u64))>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn blocked_time_is_the_union_of_the_intervals() {
        let mut b = Blocked::default();
        b.block(Nanos(10), Nanos(20));
        b.block(Nanos(15), Nanos(30)); // overlaps: [10, 30]
        assert_eq!(b.at(Nanos(25)), 15);
        b.block(Nanos(40), Nanos(50));
        assert_eq!(b.at(Nanos(35)), 20);
        assert_eq!(b.at(Nanos(45)), 25);
        assert_eq!(b.at(Nanos(100)), 30);
        b.block(Nanos(60), Nanos(60)); // empty: nothing
        assert_eq!(b.at(Nanos(100)), 30);
    }

    #[test]
    fn the_top_lists_follow_their_windows_and_stay_bounded() {
        let mut log = HeldLog::default();
        // Job 1 held 3 s by rates at t = 0; job 2 held 1 s for threads at t = 50 s; 300 other
        // jobs 1 ms each at t = 100 s (beyond a slot's bound: counted as others).
        log.add(Nanos(0), 1, Some(1000), (0, 3 * S));
        log.add(Nanos(50 * S), 2, Some(1001), (S, 0));
        for j in 0..300 {
            log.add(Nanos(100 * S), 100 + j, Some(2000), (1_000_000, 0));
        }
        assert_eq!(log.total, (S + 300_000_000, 3 * S));
        let at = log.top(Nanos(100 * S));
        // The last minute (100 s: slots from 45 s on) has job 2, not job 1.
        assert_eq!(at.jobs_1m[0], (2, (S, 0)));
        assert!(at.jobs_1m.iter().all(|&(j, _)| j != 1));
        assert_eq!(at.users_1m, [(1001, (S, 0)), (2000, (300_000_000, 0))]);
        // The last hour has job 1 first.
        assert_eq!(at.jobs_1h[0], (1, (0, 3 * S)));
        assert_eq!(at.jobs_1h.len(), TOP_N);
        // An hour later, job 1 is out of the hour too.
        let later = log.top(Nanos(3_700 * S));
        assert!(later.jobs_1h.iter().all(|&(j, _)| j != 1));
        let slot = log.hour.slots.back().unwrap();
        assert_eq!(slot.jobs.len(), SLOT_KEYS);
        assert_eq!(slot.other_jobs, (172_000_000, 0));
    }
}
