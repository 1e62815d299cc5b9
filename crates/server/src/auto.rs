//! `priority = auto`: each job's I/O period is detected from its completed requests and the job is
//! moved to its Set-10 set (priority `10^-set`) when a confident estimate arrives — DESIGN.md's
//! online mode, what seed 004 did with FTIO writing priorities into configfs.
//!
//! Every completed read or write (from its arrival to its completion, in the server's time) feeds
//! the job's [`OnlineDetector`] (bounded memory, amortised O(1)). At most once per second per job
//! the detector is asked for an estimate (a bounded analysis, about 0.1 ms). A confident period
//! `w` gives set `round(log10 w)`; when that differs from the job's current automatic set, the
//! scheduler is told the new priority. A priority given through the control plane always wins
//! and is never overwritten; an automatic one overrides client hints.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use iosets_period::online::{OnlineConfig, OnlineDetector};
use iosets_period::{Detection, Event};
use iosets_policy::set10::SetMapping;
use iosets_types::{JobId, Nanos, Priority};

/// How often a job's period is re-estimated.
const EVERY: Duration = Duration::from_secs(1);

#[derive(Debug)]
struct JobDetector {
    detector: OnlineDetector,
    next_estimate: Instant,
    set: Option<i32>,
}

/// The detectors of every job.
#[derive(Debug)]
pub(crate) struct AutoPriorities {
    origin: Instant,
    mapping: SetMapping,
    jobs: HashMap<JobId, JobDetector>,
}

/// A change to apply: `job` now belongs to `set` with `priority`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Move {
    pub(crate) job: JobId,
    pub(crate) set: i32,
    pub(crate) priority: Priority,
    pub(crate) period_s: f64,
}

impl AutoPriorities {
    pub(crate) fn new(origin: Instant) -> AutoPriorities {
        AutoPriorities {
            origin,
            mapping: SetMapping::new(10.0, Priority::new(0.02).expect("positive"))
                .expect("base 10"),
            jobs: HashMap::new(),
        }
    }

    fn nanos(&self, t: Instant) -> Nanos {
        Nanos(t.saturating_duration_since(self.origin).as_nanos() as u64)
    }

    /// Feeds one completed request of `job`; returns a move when its set changed.
    pub(crate) fn observe(
        &mut self,
        job: JobId,
        arrival: Instant,
        done: Instant,
        bytes: u64,
    ) -> Option<Move> {
        let (start, end) = (self.nanos(arrival), self.nanos(done));
        let entry = self.jobs.entry(job).or_insert_with(|| JobDetector {
            detector: OnlineDetector::new(OnlineConfig::default())
                .expect("default config is valid"),
            next_estimate: done + EVERY,
            set: None,
        });
        entry.detector.observe(Event::new(start, end, bytes));
        if done < entry.next_estimate {
            return None;
        }
        entry.next_estimate = done + EVERY;
        let Detection::Periodic(est) = entry.detector.estimate(end) else {
            return None;
        };
        let period_s = est.period.0 as f64 / 1e9;
        let set = self.mapping.set_of(period_s)?;
        if entry.set == Some(set) {
            return None;
        }
        entry.set = Some(set);
        Some(Move {
            job,
            set,
            priority: self.mapping.priority_of_set(set),
            period_s,
        })
    }

    /// Forgets `job`'s history.
    pub(crate) fn forget(&mut self, job: JobId) {
        self.jobs.remove(&job);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_periodic_job_is_moved_to_its_set_once() {
        let t0 = Instant::now();
        let mut auto = AutoPriorities::new(t0);
        let mut moves = Vec::new();
        // Job 1: a 0.2 s burst every 20 s (set 1), 12 periods, 10 requests per burst.
        for k in 0..12u64 {
            for r in 0..10u64 {
                let a = t0 + Duration::from_millis(k * 20_000 + r * 20);
                let d = a + Duration::from_millis(20);
                moves.extend(auto.observe(JobId(1), a, d, 1 << 20));
            }
        }
        assert_eq!(moves.len(), 1, "{moves:?}");
        let m = moves[0];
        assert_eq!((m.job, m.set), (JobId(1), 1));
        assert!((m.period_s - 20.0).abs() < 1.0, "{m:?}");
        assert_eq!(m.priority.get(), 0.1);
    }
}
