//! Set overlap: how often two jobs of one IO-SETS set are in service at once, on any servers.
//!
//! IO-SETS lets one job of a set do I/O at a time. With many servers and no controller, that holds
//! only if every server picks the same job ([`iosets_policy`]'s `order=phase`). This module
//! measures it from the servers' request traces (`iosets serve --trace`): each row's
//! `[dispatch_ns, complete_ns]` is a time the request's job was in service on that server. Traces
//! written since the phase stamps open with their clock's UNIX zero
//! ([`iosets_period::trace::requests::clock_zero`]), so the rows of all servers go on one time
//! line.
//!
//! For each set, **busy** is the time at least one of its jobs is in service on some server, and
//! **overlap** the part of it during which two or more *different* jobs of the set are (requests
//! of one job on several servers at once are that job's stripes, not an overlap). Intervals that
//! only touch (one ends when the other starts) do not overlap. The share is overlap / busy.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use iosets_period::trace::requests::{clock_zero, parse_requests};

/// One request in service: on which server, for which job, when (UNIX-epoch ns), how many bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Service {
    /// The server's index (as the caller numbers them).
    pub server: usize,
    /// The job.
    pub job: u64,
    /// When a worker took it (UNIX-epoch ns).
    pub start_ns: u64,
    /// When its I/O finished (UNIX-epoch ns).
    pub end_ns: u64,
    /// Bytes asked for.
    pub bytes: u64,
}

/// One set's busy time and overlap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetOverlap {
    /// The set (as `set_of` names it).
    pub set: i64,
    /// Time with at least one of the set's jobs in service, ns.
    pub busy_ns: u64,
    /// Time with two or more of the set's jobs in service, ns.
    pub overlap_ns: u64,
}

impl SetOverlap {
    /// Overlap / busy (0 when the set was never busy).
    pub fn share(&self) -> f64 {
        if self.busy_ns == 0 {
            0.0
        } else {
            self.overlap_ns as f64 / self.busy_ns as f64
        }
    }
}

/// Why a trace could not be read for overlap.
#[derive(Debug, thiserror::Error)]
pub enum OverlapError {
    /// The file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The trace.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The trace has no clock origin, so it cannot be compared with other servers' traces.
    #[error(
        "{}: no `# clock_zero_unix_ns=` line before the header (a trace from a server older \
         than the phase stamps): its times cannot be put beside other servers'",
        path.display()
    )]
    NoClockZero {
        /// The trace.
        path: PathBuf,
    },
    /// The trace does not parse.
    #[error("{}: {source}", path.display())]
    Parse {
        /// The trace.
        path: PathBuf,
        /// The error.
        source: iosets_period::Error,
    },
}

/// The requests served in the trace at `path` (written by server number `server`), on the UNIX
/// time line. Rows without a dispatch or completion time (never served) are skipped.
///
/// # Errors
/// [`OverlapError`]: unreadable file, no clock origin, malformed trace.
pub fn services_from_trace(path: &Path, server: usize) -> Result<Vec<Service>, OverlapError> {
    let text = std::fs::read_to_string(path).map_err(|source| OverlapError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let zero = clock_zero(&text).ok_or_else(|| OverlapError::NoClockZero {
        path: path.to_path_buf(),
    })?;
    let rows = parse_requests(&text).map_err(|source| OverlapError::Parse {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(rows
        .iter()
        .filter_map(|r| {
            let (d, c) = (r.dispatch?.0, r.complete?.0);
            Some(Service {
                server,
                job: r.job.0,
                start_ns: zero.saturating_add(d),
                end_ns: zero.saturating_add(c),
                bytes: r.len,
            })
        })
        .collect())
}

/// Each set's busy time and overlap, sets in increasing order. `set_of` names a job's set; jobs
/// it names none for are left out.
pub fn set_overlap(services: &[Service], set_of: &dyn Fn(u64) -> Option<i64>) -> Vec<SetOverlap> {
    // Per set: (time, +1 start / -1 end, job); ends sort before starts at the same time.
    let mut events: HashMap<i64, Vec<(u64, i8, u64)>> = HashMap::new();
    for s in services {
        let Some(set) = set_of(s.job) else {
            continue;
        };
        if s.end_ns <= s.start_ns {
            continue;
        }
        let e = events.entry(set).or_default();
        e.push((s.start_ns, 1, s.job));
        e.push((s.end_ns, -1, s.job));
    }
    let mut out: Vec<SetOverlap> = events
        .into_iter()
        .map(|(set, mut ev)| {
            ev.sort_unstable();
            let mut in_service: HashMap<u64, u32> = HashMap::new();
            let (mut busy, mut overlap, mut last) = (0u64, 0u64, 0u64);
            for (t, delta, job) in ev {
                let jobs = in_service.len();
                if jobs >= 1 {
                    busy += t - last;
                }
                if jobs >= 2 {
                    overlap += t - last;
                }
                last = t;
                if delta > 0 {
                    *in_service.entry(job).or_insert(0) += 1;
                } else if let Some(n) = in_service.get_mut(&job) {
                    *n -= 1;
                    if *n == 0 {
                        in_service.remove(&job);
                    }
                }
            }
            SetOverlap {
                set,
                busy_ns: busy,
                overlap_ns: overlap,
            }
        })
        .collect();
    out.sort_unstable_by_key(|o| o.set);
    out
}

/// The sets' busy time and overlap added up (the share over all sets is overlap / busy).
pub fn total(sets: &[SetOverlap]) -> SetOverlap {
    SetOverlap {
        set: i64::MIN,
        busy_ns: sets.iter().map(|s| s.busy_ns).sum(),
        overlap_ns: sets.iter().map(|s| s.overlap_ns).sum(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(server: usize, job: u64, start_ns: u64, end_ns: u64) -> Service {
        Service {
            server,
            job,
            start_ns,
            end_ns,
            bytes: 1,
        }
    }

    #[test]
    fn stripes_of_one_job_do_not_overlap_but_two_jobs_do() {
        let set = |job: u64| Some(if job < 10 { 1 } else { 2 });
        let s = [
            // Job 1 on two servers at once: its stripes, no overlap.
            svc(0, 1, 0, 100),
            svc(1, 1, 10, 110),
            // Job 2 (same set) starts on server 0 at 100, while job 1 is still on server 1
            // until 110: 10 ns of overlap; then alone until 200.
            svc(0, 2, 100, 200),
            // Job 11 (another set) overlaps everything: not counted against set 1.
            svc(1, 11, 0, 300),
        ];
        let o = set_overlap(&s, &set);
        assert_eq!(
            o,
            [
                SetOverlap {
                    set: 1,
                    busy_ns: 200,
                    overlap_ns: 10
                },
                SetOverlap {
                    set: 2,
                    busy_ns: 300,
                    overlap_ns: 0
                },
            ]
        );
        assert!((o[0].share() - 0.05).abs() < 1e-12);
        let t = total(&o);
        assert_eq!((t.busy_ns, t.overlap_ns), (500, 10));
    }

    #[test]
    fn touching_intervals_and_gaps_count_nothing() {
        let s = [svc(0, 1, 0, 10), svc(1, 2, 10, 20), svc(0, 3, 30, 40)];
        let o = set_overlap(&s, &|_| Some(0));
        assert_eq!((o[0].busy_ns, o[0].overlap_ns), (30, 0));
        assert_eq!(o[0].share(), 0.0);
        // Jobs left out by `set_of` are ignored.
        assert!(set_overlap(&s, &|_| None).is_empty());
    }

    #[test]
    fn traces_go_on_one_time_line() {
        let dir = std::env::temp_dir().join(format!("iosets-overlap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let a = dir.join("a.csv");
        let b = dir.join("b.csv");
        // Server a's clock started at UNIX 1,000, b's at 1,050: b's request at 0..50 is
        // 1,050..1,100, right after a's 1,000..1,050 + overlapping a's second request.
        std::fs::write(
            &a,
            "# clock_zero_unix_ns=1000\njob,op,offset,len,arrival_ns,dispatch_ns,complete_ns\n\
             1,write,0,8,0,0,50\n1,write,8,8,60,60,120\n2,write,0,8,0,0,\n",
        )
        .unwrap();
        std::fs::write(
            &b,
            "# clock_zero_unix_ns=1050\njob,op,offset,len,arrival_ns,dispatch_ns,complete_ns\n\
             2,write,0,8,0,0,50\n",
        )
        .unwrap();
        let mut s = services_from_trace(&a, 0).unwrap();
        assert_eq!(s.len(), 2, "the unserved row is skipped");
        s.extend(services_from_trace(&b, 1).unwrap());
        assert_eq!((s[2].start_ns, s[2].end_ns), (1_050, 1_100));
        let o = set_overlap(&s, &|_| Some(7));
        // Busy 1,000..1,120 minus nothing; overlap 1,060..1,100.
        assert_eq!((o[0].busy_ns, o[0].overlap_ns), (120, 40));
        let c = dir.join("c.csv");
        std::fs::write(&c, "job,op,offset,len,arrival_ns\n1,write,0,1,0\n").unwrap();
        let err = services_from_trace(&c, 0).unwrap_err();
        assert!(err.to_string().contains("clock_zero_unix_ns"), "{err}");
        assert!(services_from_trace(&dir.join("missing.csv"), 0).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
