//! Per-job bandwidth over the last second and the last ten seconds (`iosets ctl jobs`).
//!
//! Bytes are counted in 100 ms slots on a ring of 100 slots. The last-second figure sums the slot
//! being filled and the nine before it and divides by the time they cover (one second, or less
//! right after the server started), so it moves smoothly rather than once a second.

use std::collections::HashMap;
use std::time::Instant;

use iosets_types::JobId;

const SLOT_MS: u64 = 100;
const SLOTS: usize = 100;

#[derive(Debug, Clone)]
struct Ring {
    /// When the job last moved bytes.
    last: Instant,
    /// Bytes per slot; `slot_of[i]` says which absolute slot `bytes[i]` belongs to.
    bytes: [u64; SLOTS],
    slot_of: [u64; SLOTS],
}

impl Ring {
    fn new(now: Instant) -> Ring {
        Ring {
            last: now,
            bytes: [0; SLOTS],
            slot_of: [u64::MAX; SLOTS],
        }
    }

    fn add(&mut self, slot: u64, bytes: u64) {
        let i = (slot % SLOTS as u64) as usize;
        if self.slot_of[i] != slot {
            self.slot_of[i] = slot;
            self.bytes[i] = 0;
        }
        self.bytes[i] += bytes;
    }

    /// Bytes in the `n` slots ending with `slot`.
    fn sum(&self, slot: u64, n: u64) -> u64 {
        (slot.saturating_sub(n - 1)..=slot)
            .map(|s| {
                let i = (s % SLOTS as u64) as usize;
                if self.slot_of[i] == s {
                    self.bytes[i]
                } else {
                    0
                }
            })
            .sum()
    }
}

/// Bandwidth meters of every job.
#[derive(Debug)]
pub struct Meters {
    origin: Instant,
    jobs: HashMap<JobId, Ring>,
}

impl Meters {
    /// Empty meters starting now.
    pub fn new() -> Meters {
        Meters {
            origin: Instant::now(),
            jobs: HashMap::new(),
        }
    }

    fn slot(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.origin).as_millis() as u64 / SLOT_MS
    }

    /// Counts `bytes` moved for `job` at `at`.
    pub fn add(&mut self, job: JobId, at: Instant, bytes: u64) {
        let slot = self.slot(at);
        let ring = self.jobs.entry(job).or_insert_with(|| Ring::new(at));
        ring.last = ring.last.max(at);
        ring.add(slot, bytes);
    }

    /// `job`'s bandwidth in MiB/s over the last second and the last ten seconds, at `now`.
    pub fn bandwidth(&self, job: JobId, now: Instant) -> (f64, f64) {
        let Some(ring) = self.jobs.get(&job) else {
            return (0.0, 0.0);
        };
        let slot = self.slot(now);
        let elapsed = now.saturating_duration_since(self.origin).as_secs_f64();
        let rate = |n: u64| {
            let span = (n as f64 * SLOT_MS as f64 / 1000.0).min(elapsed.max(1e-3));
            ring.sum(slot, n) as f64 / span / (1024.0 * 1024.0)
        };
        (rate(10), rate(100))
    }

    /// Removes and returns the jobs that moved no byte since `before`.
    pub fn take_idle(&mut self, before: Instant) -> Vec<JobId> {
        let idle: Vec<JobId> = self
            .jobs
            .iter()
            .filter(|(_, r)| r.last < before)
            .map(|(j, _)| *j)
            .collect();
        for j in &idle {
            self.jobs.remove(j);
        }
        idle
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn windows_sum_the_right_slots() {
        let mut m = Meters::new();
        let t0 = m.origin;
        let mib = 1024 * 1024;
        // 1 MiB in each of the first 20 slots (2 s).
        for i in 0..20 {
            m.add(JobId(1), t0 + Duration::from_millis(i * 100 + 50), mib);
        }
        let now = t0 + Duration::from_millis(1_950);
        let (one, ten) = m.bandwidth(JobId(1), now);
        assert!((one - 10.0).abs() < 1e-9, "{one}");
        // 20 MiB over the 1.95 s elapsed so far.
        assert!((ten - 20.0 / 1.95).abs() < 1e-9, "{ten}");
        // 5 s later nothing in the last second.
        let (one, _) = m.bandwidth(JobId(1), now + Duration::from_secs(5));
        assert_eq!(one, 0.0);
        assert_eq!(m.bandwidth(JobId(2), now), (0.0, 0.0));
    }
}
