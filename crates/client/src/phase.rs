//! Phase stamps: the client's half of IO-SETS' exclusivity across servers.
//!
//! # The rule
//! Inside an IO-SETS set only one job may do I/O at a time, and a job's file is striped over many
//! servers that never talk to each other. If each server picked "the job whose requests reached
//! *me* first", two servers would sometimes pick two different jobs of one set, and both jobs
//! would wait for their slower half. So the client stamps every request with the start of its
//! job's current **I/O phase** (UNIX-epoch nanoseconds of the client's clock), the same stamp on
//! every request of that phase to every server. Each server orders the jobs of a set by
//! `(stamp, job id)` (`iosets` with `order=phase`), and gives the set to a job with an earlier
//! stamp as soon as one of its requests arrives. Every server then serves the same job first:
//! the one whose phase began earliest. Nothing is exchanged between servers.
//!
//! A phase begins with a request of a job that has nothing in flight through this client and
//! whose last request finished more than [`ClientConfig::phase_gap`](crate::ClientConfig) ago
//! (a compute phase in between); every request until then carries the same stamp.
//!
//! # Failure cases
//! - **Clock skew between clients.** Stamps of different jobs come from different clocks. All
//!   servers see the same stamps, so they still *agree* on the order; skew only decides which
//!   job goes first when two phases start within the skew of each other (fairness, not
//!   exclusivity).
//! - **Ties.** Equal stamps are ordered by job id on every server.
//! - **One job on many nodes** (an MPI job with a mount per node): each node stamps its own
//!   phase start; a server keys the job by the earliest stamp of its current burst. Nodes' phase
//!   starts are close (the job's ranks start a phase together), so the job keeps one place.
//! - **A phase that never ends** (a job streaming without pause): after
//!   [`ClientConfig::max_phase`](crate::ClientConfig) the client stamps it anew, so it queues
//!   behind the phases that began meanwhile, on every server at once. A client that lies (an old
//!   stamp forever) is bounded by the server: the policy treats a stamp older than its
//!   `max_phase_age_ms` as that age.
//! - **A lost or late request.** A server that has not yet seen the earlier job's requests
//!   serves a later one; when they arrive it hands the set back after the requests in service
//!   finish. The overlap lasts one request.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use iosets_types::JobId;

/// Entries kept before idle ones are dropped (an idle entry means the same as no entry: the
/// job's next request starts a phase).
const PRUNE_AT: usize = 4096;

/// One job's current phase as this client sees it.
#[derive(Clone, Copy, Debug)]
struct JobPhase {
    /// Requests of the job in flight through this client.
    in_flight: u32,
    /// When its last request finished (or, while one is in flight, the phase began).
    last_done: Instant,
    /// The phase's stamp, UNIX-epoch ns.
    stamp: u64,
    /// When the phase began (for [`PhaseClock::max_phase`]).
    began: Instant,
}

/// Tracks each job's I/O phase and hands out its stamp.
#[derive(Debug)]
pub(crate) struct PhaseClock {
    gap: Duration,
    max_phase: Duration,
    jobs: Mutex<HashMap<JobId, JobPhase>>,
}

/// Now in UNIX-epoch nanoseconds (0 before 1970, saturating after 2554).
fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

impl PhaseClock {
    pub(crate) fn new(gap: Duration, max_phase: Duration) -> PhaseClock {
        PhaseClock {
            gap,
            max_phase,
            jobs: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<JobId, JobPhase>> {
        self.jobs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A request of `job` starts: its phase's stamp.
    pub(crate) fn begin(&self, job: JobId) -> u64 {
        self.begin_at(job, Instant::now(), unix_ns())
    }

    fn begin_at(&self, job: JobId, now: Instant, unix: u64) -> u64 {
        let mut jobs = self.lock();
        if jobs.len() >= PRUNE_AT {
            let gap = self.gap;
            jobs.retain(|_, p| p.in_flight > 0 || now.duration_since(p.last_done) <= gap);
        }
        let fresh = JobPhase {
            in_flight: 0,
            last_done: now,
            stamp: unix,
            began: now,
        };
        let p = jobs.entry(job).or_insert(fresh);
        let idle = p.in_flight == 0 && now.duration_since(p.last_done) > self.gap;
        let endless = now.duration_since(p.began) > self.max_phase;
        if idle || endless {
            *p = fresh;
        }
        p.in_flight += 1;
        p.stamp
    }

    /// A request of `job` that [`begin`](PhaseClock::begin) stamped has finished (answered or
    /// failed).
    pub(crate) fn end(&self, job: JobId) {
        self.end_at(job, Instant::now());
    }

    fn end_at(&self, job: JobId, now: Instant) {
        if let Some(p) = self.lock().get_mut(&job) {
            p.in_flight = p.in_flight.saturating_sub(1);
            p.last_done = now;
        }
    }
}

/// Ends a stamped request when dropped, so a cancelled or failed request ends too.
pub(crate) struct Stamped<'a> {
    pub(crate) clock: &'a PhaseClock,
    pub(crate) job: JobId,
}

impl Drop for Stamped<'_> {
    fn drop(&mut self) {
        self.clock.end(self.job);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_phase_keeps_its_stamp_until_a_gap() {
        let c = PhaseClock::new(100 * MS, 60_000 * MS);
        let t = Instant::now();
        let j = JobId(7);
        assert_eq!(c.begin_at(j, t, 1_000), 1_000);
        // Overlapping and back-to-back requests keep the stamp.
        assert_eq!(c.begin_at(j, t + MS, 2_000), 1_000);
        c.end_at(j, t + 2 * MS);
        c.end_at(j, t + 3 * MS);
        assert_eq!(
            c.begin_at(j, t + 50 * MS, 3_000),
            1_000,
            "a gap under 100 ms"
        );
        c.end_at(j, t + 60 * MS);
        // A compute phase: the next request starts a new phase.
        assert_eq!(c.begin_at(j, t + 200 * MS, 4_000), 4_000);
        // Other jobs have phases of their own.
        assert_eq!(c.begin_at(JobId(8), t + 201 * MS, 5_000), 5_000);
    }

    #[test]
    fn a_request_in_flight_holds_the_phase_open() {
        let c = PhaseClock::new(100 * MS, 60_000 * MS);
        let t = Instant::now();
        let j = JobId(1);
        assert_eq!(c.begin_at(j, t, 10), 10);
        // 500 ms later, with the first request still in flight: the same phase.
        assert_eq!(c.begin_at(j, t + 500 * MS, 20), 10);
    }

    #[test]
    fn an_endless_phase_is_stamped_anew() {
        let c = PhaseClock::new(100 * MS, 1_000 * MS);
        let t = Instant::now();
        let j = JobId(1);
        assert_eq!(c.begin_at(j, t, 10), 10);
        assert_eq!(c.begin_at(j, t + 900 * MS, 20), 10);
        assert_eq!(c.begin_at(j, t + 1_100 * MS, 30), 30);
        assert_eq!(c.begin_at(j, t + 1_200 * MS, 40), 30);
    }

    #[test]
    fn idle_entries_are_pruned() {
        let c = PhaseClock::new(100 * MS, 60_000 * MS);
        let t = Instant::now();
        for i in 0..PRUNE_AT as u64 {
            c.begin_at(JobId(i), t, i);
            c.end_at(JobId(i), t);
        }
        c.begin_at(JobId(u64::MAX), t + 200 * MS, 0);
        assert_eq!(c.lock().len(), 1);
    }
}
