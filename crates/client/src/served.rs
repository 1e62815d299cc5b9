//! How much of each job other servers served: what a request tells its server so that rates
//! and reservations hold job-wide (Ceph dmClock's `delta`).
//!
//! For each job and server the client keeps the service the job received from the *other*
//! servers since its last request to this one: every completion from server `t` adds one
//! request and its bytes to every other server's count, and a request to server `s` carries
//! and resets `s`'s count. A server charges it to the job's rate buckets and reservation before
//! the request itself, so N servers each limiting a job to R together limit it to R, with no
//! controller between them.
//!
//! Bounded: at most [`MAX_JOBS`] jobs are followed; beyond that the counts start over (a
//! server then under-charges by what it was not told, once). With one server there is nothing
//! to tell and nothing is kept.

use std::collections::HashMap;
use std::sync::Mutex;

use iosets_proto::Elsewhere;
use iosets_types::JobId;

/// Jobs followed at once.
pub(crate) const MAX_JOBS: usize = 65_536;

/// The counts of every job, per server.
#[derive(Debug)]
pub(crate) struct Served {
    servers: usize,
    jobs: Mutex<HashMap<JobId, Vec<Elsewhere>>>,
}

impl Served {
    /// Counts for `servers` servers; `None` for one (nothing to tell).
    pub(crate) fn new(servers: usize) -> Option<Served> {
        (servers > 1).then(|| Served {
            servers,
            jobs: Mutex::new(HashMap::new()),
        })
    }

    /// What the next request of `job` to server `server` carries; its count starts over.
    pub(crate) fn take(&self, job: JobId, server: usize) -> Option<Elsewhere> {
        let mut jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
        let counts = jobs.get_mut(&job)?;
        let e = std::mem::take(counts.get_mut(server)?);
        (e != Elsewhere::default()).then_some(e)
    }

    /// Server `server` completed a request of `job` that moved `bytes`.
    pub(crate) fn record(&self, job: JobId, server: usize, bytes: u64) {
        let mut jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
        if jobs.len() >= MAX_JOBS && !jobs.contains_key(&job) {
            jobs.clear();
        }
        let counts = jobs
            .entry(job)
            .or_insert_with(|| vec![Elsewhere::default(); self.servers]);
        for (s, c) in counts.iter_mut().enumerate() {
            if s != server {
                c.ops = c.ops.saturating_add(1);
                c.bytes = c.bytes.saturating_add(bytes);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_server_hears_what_the_others_served_since_its_last_request() {
        assert!(Served::new(1).is_none());
        let s = Served::new(3).unwrap();
        let j = JobId(7);
        assert_eq!(s.take(j, 0), None);
        s.record(j, 1, 100);
        s.record(j, 1, 100);
        s.record(j, 2, 50);
        s.record(j, 0, 10);
        // Server 0 heard nothing yet: 3 requests, 250 bytes elsewhere.
        assert_eq!(s.take(j, 0), Some(Elsewhere { ops: 3, bytes: 250 }));
        assert_eq!(s.take(j, 0), None, "told once");
        assert_eq!(s.take(j, 1), Some(Elsewhere { ops: 2, bytes: 60 }));
        assert_eq!(s.take(j, 2), Some(Elsewhere { ops: 3, bytes: 210 }));
        // Another job's counts are its own.
        assert_eq!(s.take(JobId(8), 0), None);
        assert_eq!(s.take(j, 9), None);
    }
}
