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
//! **The phase's end is sent.** A server keeps the set for the job whose phase is open even
//! when it has none of its requests for a moment (they are all on other servers: the job's
//! processes wait there), so that it does not hand the set to the next job meanwhile. When the
//! job has nothing left in flight through this client for [`END_DELAY`] (a synchronous
//! process's next request comes sooner), the client sends `PhaseEnd` with the stamp to every
//! server the phase touched, and they pass the set on at once. A lost `PhaseEnd` costs the
//! server's `open_hold_ms` of idle set, no more.
//!
//! # Failure cases
//! - **Clock skew between clients.** Stamps of different jobs come from different clocks. All
//!   servers see the same stamps, so they still *agree* on the order; skew only decides which
//!   job goes first when two phases start within the skew of each other (fairness, not
//!   exclusivity).
//! - **Ties.** Equal stamps are ordered by job id on every server.
//! - **One job on many nodes** (an MPI job with a mount per node): each node stamps its own
//!   phase start; a server keys the job by the earliest stamp of its current burst. Nodes' phase
//!   starts are close (the job's ranks start a phase together), so the job keeps one place. Each
//!   node sends its own `PhaseEnd`; a server keeps the job's phase open until every stamp it saw
//!   in the phase has been ended, so the first node done does not pass the set on while the
//!   others still write.
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
use std::time::{Duration, Instant};

use iosets_types::{JobId, UnixNanos};

/// How long a job must have nothing in flight before its phase's end is sent.
pub(crate) const END_DELAY: Duration = Duration::from_millis(2);

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
    /// The phase's stamp.
    stamp: UnixNanos,
    /// When the phase began (for [`PhaseClock::max_phase`]).
    began: Instant,
    /// The servers the phase sent requests to (bit `i`: server `i`; bit 63 also stands for
    /// every server from 63 on).
    servers: u64,
    /// Requests begun so far (tells a later check whether the job did anything since).
    begun: u64,
}

/// A job with nothing in flight: the phase that may be over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Quiet {
    /// The phase's stamp.
    pub(crate) stamp: UnixNanos,
    /// The servers it touched (see [`JobPhase::servers`]).
    pub(crate) servers: u64,
    begun: u64,
}

/// Tracks each job's I/O phase and hands out its stamp.
#[derive(Debug)]
pub(crate) struct PhaseClock {
    gap: Duration,
    max_phase: Duration,
    jobs: Mutex<HashMap<JobId, JobPhase>>,
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

    /// A request of `job` to server `server` starts: its phase's stamp.
    pub(crate) fn begin(&self, job: JobId, server: usize) -> UnixNanos {
        self.begin_at(job, server, Instant::now(), UnixNanos::now())
    }

    fn begin_at(&self, job: JobId, server: usize, now: Instant, unix: UnixNanos) -> UnixNanos {
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
            servers: 0,
            begun: 0,
        };
        let p = jobs.entry(job).or_insert(fresh);
        let idle = p.in_flight == 0 && now.duration_since(p.last_done) > self.gap;
        let endless = now.duration_since(p.began) > self.max_phase;
        if idle || endless {
            *p = fresh;
        }
        p.in_flight += 1;
        p.begun += 1;
        p.servers |= 1u64 << server.min(63);
        p.stamp
    }

    /// A request of `job` that [`begin`](PhaseClock::begin) stamped has finished (answered or
    /// failed). If the job has nothing left in flight, the phase that may be over.
    pub(crate) fn end(&self, job: JobId) -> Option<Quiet> {
        self.end_at(job, Instant::now())
    }

    fn end_at(&self, job: JobId, now: Instant) -> Option<Quiet> {
        let mut jobs = self.lock();
        let p = jobs.get_mut(&job)?;
        p.in_flight = p.in_flight.saturating_sub(1);
        p.last_done = now;
        (p.in_flight == 0).then_some(Quiet {
            stamp: p.stamp,
            servers: p.servers,
            begun: p.begun,
        })
    }

    /// True if `job` has begun nothing since it went `quiet`: its phase is over.
    pub(crate) fn still_quiet(&self, job: JobId, quiet: Quiet) -> bool {
        self.lock()
            .get(&job)
            .is_some_and(|p| p.in_flight == 0 && p.stamp == quiet.stamp && p.begun == quiet.begun)
    }
}

impl Quiet {
    /// The servers, among `n`, the phase touched.
    pub(crate) fn servers(self, n: usize) -> impl Iterator<Item = usize> {
        (0..n).filter(move |&s| self.servers & (1u64 << s.min(63)) != 0)
    }
}

/// Ends a stamped request when dropped, so a cancelled or failed request ends too; when it was
/// the job's last in flight, sends the phase's end after [`END_DELAY`] if nothing followed.
pub(crate) struct Stamped<'a> {
    pub(crate) client: &'a crate::Client,
    pub(crate) clock: &'a PhaseClock,
    pub(crate) job: JobId,
}

impl Drop for Stamped<'_> {
    fn drop(&mut self) {
        let Some(quiet) = self.clock.end(self.job) else {
            return;
        };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let client = self.client.clone();
        rt.spawn(async move {
            tokio::time::sleep(END_DELAY).await;
            client.phase_over(quiet).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// Starts requests of job 1 on `c`, none ending, each `(ms, now, stamp)`: `ms` after the
    /// first, at wall-clock `now`, and checks the phase stamp it gets.
    fn assert_stamps(c: &PhaseClock, cases: &[(u32, u64, u64)]) {
        let t = Instant::now();
        for &(ms, now, stamp) in cases {
            let got = c.begin_at(JobId(1), 0, t + ms * MS, UnixNanos(now)).0;
            assert_eq!(got, stamp, "the request {ms} ms after the first");
        }
    }

    #[test]
    fn a_phase_keeps_its_stamp_until_a_gap() {
        let c = PhaseClock::new(100 * MS, 60_000 * MS);
        let t = Instant::now();
        let j = JobId(7);
        assert_eq!(c.begin_at(j, 0, t, UnixNanos(1_000)).0, 1_000);
        // Overlapping and back-to-back requests keep the stamp.
        assert_eq!(c.begin_at(j, 0, t + MS, UnixNanos(2_000)).0, 1_000);
        c.end_at(j, t + 2 * MS);
        c.end_at(j, t + 3 * MS);
        assert_eq!(
            c.begin_at(j, 0, t + 50 * MS, UnixNanos(3_000)).0,
            1_000,
            "a gap under 100 ms"
        );
        c.end_at(j, t + 60 * MS);
        // A compute phase: the next request starts a new phase.
        assert_eq!(c.begin_at(j, 0, t + 200 * MS, UnixNanos(4_000)).0, 4_000);
        // Other jobs have phases of their own.
        assert_eq!(
            c.begin_at(JobId(8), 0, t + 201 * MS, UnixNanos(5_000)).0,
            5_000
        );
    }

    #[test]
    fn a_request_in_flight_holds_the_phase_open() {
        let c = PhaseClock::new(100 * MS, 60_000 * MS);
        // 500 ms later, with the first request still in flight: the same phase.
        assert_stamps(&c, &[(0, 10, 10), (500, 20, 10)]);
    }

    #[test]
    fn an_endless_phase_is_stamped_anew() {
        let c = PhaseClock::new(100 * MS, 1_000 * MS);
        assert_stamps(
            &c,
            &[(0, 10, 10), (900, 20, 10), (1_100, 30, 30), (1_200, 40, 30)],
        );
    }

    #[test]
    fn the_last_request_in_flight_makes_the_job_quiet() {
        let c = PhaseClock::new(100 * MS, 60_000 * MS);
        let t = Instant::now();
        let j = JobId(4);
        c.begin_at(j, 0, t, UnixNanos(10));
        c.begin_at(j, 2, t, UnixNanos(10));
        assert_eq!(c.end_at(j, t + MS), None, "one still in flight");
        let quiet = c.end_at(j, t + 2 * MS).unwrap();
        assert_eq!(quiet.stamp.0, 10);
        assert_eq!(quiet.servers(3).collect::<Vec<_>>(), [0, 2]);
        assert!(c.still_quiet(j, quiet));
        // A synchronous process's next request: not quiet any more, even once it is done.
        c.begin_at(j, 1, t + 3 * MS, UnixNanos(20));
        assert!(!c.still_quiet(j, quiet));
        let again = c.end_at(j, t + 4 * MS).unwrap();
        assert!(!c.still_quiet(j, quiet) && c.still_quiet(j, again));
        assert_eq!(again.servers(3).collect::<Vec<_>>(), [0, 1, 2]);
    }

    #[test]
    fn idle_entries_are_pruned() {
        let c = PhaseClock::new(100 * MS, 60_000 * MS);
        let t = Instant::now();
        for i in 0..PRUNE_AT as u64 {
            c.begin_at(JobId(i), 0, t, UnixNanos(i));
            c.end_at(JobId(i), t);
        }
        c.begin_at(JobId(u64::MAX), 0, t + 200 * MS, UnixNanos(0));
        assert_eq!(c.lock().len(), 1);
    }
}
