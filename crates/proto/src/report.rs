//! The reports control requests return (as JSON text): `iosets ctl jobs` and `iosets ctl stats`.

use iosets_types::PrioritySource;
use serde::{Deserialize, Serialize};

/// Queue-wait percentiles of one job, in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WaitReport {
    /// Requests dispatched.
    pub count: u64,
    /// Mean wait.
    pub mean_us: f64,
    /// Median wait.
    pub p50_us: f64,
    /// 99th-percentile wait.
    pub p99_us: f64,
    /// Longest wait.
    pub max_us: f64,
}

/// One job's line of `iosets ctl jobs` (seed 004's `beegfs-ctl --jobstats`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobReport {
    /// The job id.
    pub job: u64,
    /// The job's name, as its client told it (`IOSETS_JOB_ID`'s value, Slurm's job id,
    /// `procname.uid`), if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The priority in force: the control plane's, else the automatic one, else the last client
    /// hint; none if none.
    pub priority: Option<f64>,
    /// Where the priority came from; `None` without a priority. On the wire (JSON):
    /// `"control"`, `"auto"`, `"hint"` or `"none"`.
    #[serde(with = "source_text")]
    pub priority_source: Option<PrioritySource>,
    /// The IO-SETS set index (priority `10^-set`) when the priority maps to one.
    pub set: Option<i32>,
    /// The job's I/O period in seconds, when automatic priorities detected one.
    #[serde(default)]
    pub period_s: Option<f64>,
    /// Requests completed (successfully or not).
    pub ops: u64,
    /// Bytes read.
    pub bytes_read: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// Requests that failed.
    pub failed: u64,
    /// Bandwidth over the last second, MiB/s (reads and writes).
    pub bw_1s_mib_s: f64,
    /// Bandwidth over the last ten seconds, MiB/s.
    pub bw_10s_mib_s: f64,
    /// Requests waiting in the queue.
    pub queued: u64,
    /// Requests being served.
    pub in_service: u64,
    /// Queue waits.
    pub queue_wait: WaitReport,
    /// The quota rules the job's requests fell under, with how many of its requests each holds
    /// (admitted) and keeps waiting (held); empty without quotas.
    #[serde(default)]
    pub rules: Vec<JobRuleReport>,
    /// The network addresses the job's requests came from, most recent first (at most 4: the
    /// runtime keeps no more per job); empty for requests with no address (same-host or
    /// library callers) and from servers that do not report them.
    #[serde(default)]
    pub peers: Vec<String>,
    /// The same queue waits split by cause (`iosets ctl why`); all zero from a server that
    /// does not split them.
    #[serde(default)]
    pub wait_causes: WaitCausesReport,
}

impl JobReport {
    /// Where the priority came from, as the wire and the tables spell it: `control`, `auto`,
    /// `hint` or `none`.
    pub fn source_name(&self) -> &'static str {
        self.priority_source.map_or("none", PrioritySource::as_str)
    }
}

/// [`JobReport::priority_source`] as text: `"none"` for no source.
mod source_text {
    use iosets_types::PrioritySource;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(
        source: &Option<PrioritySource>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.serialize_str(source.map_or("none", PrioritySource::as_str))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<PrioritySource>, D::Error> {
        let text = String::deserialize(d)?;
        match text.as_str() {
            "none" => Ok(None),
            other => other.parse().map(Some).map_err(serde::de::Error::custom),
        }
    }
}

/// One cause's part of a job's queue waits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CauseReport {
    /// Nanoseconds of wait charged to it.
    pub ns: u64,
    /// Requests that waited some time for it.
    pub requests: u64,
}

/// A job's queue waits (over its completed requests) split by cause, in integer nanoseconds
/// that sum exactly to `wait_ns`. The causes (docs/why.md): `rule` held by a quota rule before
/// the policy saw the request; while queued in the policy with every service thread busy, in
/// proportion to whose requests hold the threads, `device` (the job's own), `exclusivity`
/// (another job of its set), `share` (jobs of other sets); with a thread free, `exclusivity`
/// if another job of its set is in service, else `policy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitCausesReport {
    /// The sum of the measured waits (dispatch − arrival) of the requests counted, ns.
    pub wait_ns: u64,
    /// The requests counted (completed ones).
    pub requests: u64,
    /// Held by a quota rule (thread quota, rate, reservation).
    pub rule: CauseReport,
    /// Behind the job's own requests (every thread busy).
    pub device: CauseReport,
    /// Behind another job of its set.
    pub exclusivity: CauseReport,
    /// Behind jobs of other sets (every thread busy).
    pub share: CauseReport,
    /// A thread free and nothing of its set in service, yet not dispatched.
    pub policy: CauseReport,
}

impl WaitCausesReport {
    /// Names of the causes, in report order.
    pub const NAMES: [&'static str; 5] = ["rule", "device", "exclusivity", "share", "policy"];

    /// Each cause with its name, in report order.
    pub fn causes(&self) -> [(&'static str, CauseReport); 5] {
        [
            ("rule", self.rule),
            ("device", self.device),
            ("exclusivity", self.exclusivity),
            ("share", self.share),
            ("policy", self.policy),
        ]
    }

    /// The cause named `name`, mutably.
    pub fn cause_mut(&mut self, name: &str) -> Option<&mut CauseReport> {
        match name {
            "rule" => Some(&mut self.rule),
            "device" => Some(&mut self.device),
            "exclusivity" => Some(&mut self.exclusivity),
            "share" => Some(&mut self.share),
            "policy" => Some(&mut self.policy),
            _ => None,
        }
    }

    /// The sum of the causes' nanoseconds (equal to `wait_ns` in a consistent report).
    pub fn causes_ns(&self) -> u64 {
        self.causes()
            .iter()
            .fold(0u64, |a, (_, c)| a.saturating_add(c.ns))
    }

    /// Adds `other` (the same job's waits on another server): a job-wide total.
    pub fn merge(&mut self, other: &WaitCausesReport) {
        self.wait_ns = self.wait_ns.saturating_add(other.wait_ns);
        self.requests = self.requests.saturating_add(other.requests);
        for (name, c) in other.causes() {
            if let Some(mine) = self.cause_mut(name) {
                mine.ns = mine.ns.saturating_add(c.ns);
                mine.requests = mine.requests.saturating_add(c.requests);
            }
        }
    }

    /// The cause with the most nanoseconds, if any wait was counted (ties: the first in
    /// report order).
    pub fn dominant(&self) -> Option<(&'static str, CauseReport)> {
        self.causes().into_iter().filter(|(_, c)| c.ns > 0).fold(
            None,
            |best: Option<(&'static str, CauseReport)>, (n, c)| match best {
                Some((_, b)) if b.ns >= c.ns => best,
                _ => Some((n, c)),
            },
        )
    }
}

/// A job under one quota rule (`iosets ctl jobs`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobRuleReport {
    /// The rule's name.
    pub rule: String,
    /// The job's requests admitted under it and not yet completed.
    pub admitted: u64,
    /// The job's requests held back by it.
    pub held: u64,
    /// Seconds the job's admitted requests waited under it for a thread (since the rule last
    /// saw the job idle).
    #[serde(default)]
    pub held_threads_s: f64,
    /// Seconds they were held by a rate.
    #[serde(default)]
    pub held_rate_s: f64,
}

/// One job or user a rule held: its id (job id or uid) and the seconds held, for a thread and
/// by a rate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HeldReport {
    /// The job id, or the uid.
    pub id: u64,
    /// Seconds its requests waited for a thread.
    pub threads_s: f64,
    /// Seconds they were held by a rate.
    pub rate_s: f64,
}

/// The jobs and users a rule held most (at most 5 each), most first.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HeldTopReport {
    /// Jobs, over the last minute.
    pub jobs_1m: Vec<HeldReport>,
    /// Users, over the last minute.
    pub users_1m: Vec<HeldReport>,
    /// Jobs, over the last hour.
    pub jobs_1h: Vec<HeldReport>,
    /// Users, over the last hour.
    pub users_1h: Vec<HeldReport>,
}

/// One quota rule's line of `iosets ctl rule list`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RuleReport {
    /// Its position (rules are tried in order; the first that matches governs a request).
    pub rank: u32,
    /// Its name.
    pub name: String,
    /// What it matches.
    #[serde(rename = "match")]
    pub matcher: String,
    /// Its limits (`threads=71% rate=100ops/s …`).
    pub limits: String,
    /// Service threads it may hold, if it has a thread quota.
    pub threads: Option<u64>,
    /// Threads one of its jobs may hold, if it has a thread quota.
    pub job_ceiling: Option<u64>,
    /// Requests admitted and not completed.
    pub admitted: u64,
    /// Requests in service now.
    pub in_service: u64,
    /// Requests held back.
    pub held: u64,
    /// The most requests it had in service at once (lent threads apart).
    pub peak_in_service: u64,
    /// Requests that fell under it.
    pub matched_total: u64,
    /// Requests admitted.
    pub admitted_total: u64,
    /// Admitted on lent capacity.
    pub lent_total: u64,
    /// Admitted by a reservation.
    pub reserved_total: u64,
    /// Admitted on a thread kept for their job (`keep_ms`).
    #[serde(default)]
    pub kept_total: u64,
    /// Completed.
    pub completed_total: u64,
    /// Jobs with requests admitted or held.
    pub jobs: Vec<u64>,
    /// Seconds its admitted requests waited for a thread (its cap, a job's ceiling, every
    /// thread busy), since the rule was added.
    #[serde(default)]
    pub held_threads_s: f64,
    /// Seconds they were held by a rate (no token in their job's or the rule's bucket).
    #[serde(default)]
    pub held_rate_s: f64,
    /// Who it held most over the last minute and hour.
    #[serde(default)]
    pub top: HeldTopReport,
}

/// One share weight of the fair-share tree.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShareReport {
    /// The node, `level=name`.
    pub node: String,
    /// Its weight among its siblings.
    pub weight: f64,
}

/// What the control plane told of a job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobInfoReport {
    /// The job.
    pub job: u64,
    /// Its account.
    pub account: Option<String>,
    /// Its node count.
    pub nodes: Option<u32>,
}

/// The answer to `iosets ctl share list`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SharesReport {
    /// The active policy.
    pub policy: String,
    /// The levels of its fair-share tree, top first (`account`, `user`, `job`); empty if it
    /// has none and the shares wait for one to be switched in.
    pub levels: Vec<String>,
    /// The share weights, in the order they were given (a node not listed weighs 1).
    pub shares: Vec<ShareReport>,
    /// Jobs with an account or node count, by job id.
    pub jobs: Vec<JobInfoReport>,
}

/// The answer to `iosets ctl rule list`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RulesReport {
    /// The service threads the percentages apply to.
    pub threads: u64,
    /// A job's ceiling inside its rule, percent.
    pub job_share_pct: f64,
    /// Whether idle threads are lent.
    pub lend: bool,
    /// Milliseconds a freed thread is kept for the job that freed it (0: off).
    #[serde(default)]
    pub keep_ms: f64,
    /// The rules, in order.
    pub rules: Vec<RuleReport>,
}

/// The answer to `iosets ctl jobs`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobsReport {
    /// The active policy.
    pub policy: String,
    /// One line per job the server knows, by job id.
    pub jobs: Vec<JobReport>,
}

/// The answer to `iosets ctl stats`: the server's totals and the conservation counters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerReport {
    /// The active policy.
    pub policy: String,
    /// Seconds since the server started.
    pub uptime_s: f64,
    /// Worker threads doing the I/O.
    pub workers: usize,
    /// The emulated device's bandwidth, if throttled.
    pub throttle_mib_s: Option<f64>,
    /// Open client connections.
    pub connections: u64,
    /// Frames received, over all connections.
    pub frames: u64,
    /// Frames refused as malformed.
    pub bad_frames: u64,
    /// Requests answered with an error.
    pub errors: u64,
    /// Requests submitted to the scheduler.
    pub submitted: u64,
    /// Conservation counter: requests inserted into a policy (again after a switch).
    pub inserted: u64,
    /// Conservation counter: requests merged into another's batch.
    pub merged: u64,
    /// Conservation counter: batches dispatched.
    pub dispatched: u64,
    /// Conservation counter: requests completed.
    pub completed: u64,
    /// Conservation counter: requests failed.
    pub failed: u64,
    /// Conservation counter: requests withdrawn by a policy switch.
    pub withdrawn: u64,
    /// Requests queued now.
    pub queued: u64,
    /// Requests in service now.
    pub in_service: u64,
    /// Whether the counters balance.
    pub balanced: bool,
    /// Policy switches so far.
    pub switches: u64,
    /// Bytes read from the backing store.
    pub bytes_read: u64,
    /// Bytes written to the backing store.
    pub bytes_written: u64,
    /// Jobs the runtime's job book remembers now.
    #[serde(default)]
    pub jobs_known: u64,
    /// Bytes the job book's records hold (bounded by `max_jobs` records).
    #[serde(default)]
    pub job_book_bytes: u64,
    /// Jobs forgotten after being idle for the forget interval.
    #[serde(default)]
    pub jobs_forgotten: u64,
    /// Job records dropped to keep the book within `max_jobs`.
    #[serde(default)]
    pub jobs_evicted: u64,
    /// What the server does with priority hints (`hints`: `trust`, `ignore`, `cap=P`); the mount
    /// holds a user's own priority writes to the same cap. Empty from a server before it.
    #[serde(default)]
    pub hints: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn causes(ns: [u64; 5]) -> WaitCausesReport {
        let mut r = WaitCausesReport::default();
        for (name, n) in WaitCausesReport::NAMES.iter().zip(ns) {
            *r.cause_mut(name).unwrap() = CauseReport { ns: n, requests: 1 };
        }
        r.wait_ns = r.causes_ns();
        r.requests = 1;
        r
    }

    /// A job's line as a server from before wait causes wrote it, with `priority` and
    /// `priority_source` as given (JSON).
    fn old_job_line(priority: &str, source: &str) -> String {
        format!(
            r#"{{"job":4,"priority":{priority},"priority_source":"{source}","set":null,"ops":1,
            "bytes_read":0,"bytes_written":8,"failed":0,"bw_1s_mib_s":0.0,"bw_10s_mib_s":0.0,
            "queued":0,"in_service":0,"queue_wait":{{"count":1,"mean_us":1.0,"p50_us":1.0,
            "p99_us":1.0,"max_us":1.0}}}}"#
        )
    }

    #[test]
    fn a_job_line_without_wait_causes_still_parses() {
        // A server from before wait causes: the field is absent.
        let old = old_job_line("null", "none");
        let j: JobReport = serde_json::from_str(&old).unwrap();
        assert_eq!(j.wait_causes, WaitCausesReport::default());
        let mut back = serde_json::to_value(&j).unwrap();
        back["wait_causes"] = serde_json::to_value(causes([1, 2, 3, 4, 5])).unwrap();
        let j: JobReport = serde_json::from_value(back).unwrap();
        assert_eq!(
            j.wait_causes.exclusivity,
            CauseReport { ns: 3, requests: 1 }
        );
    }

    #[test]
    fn the_priority_source_travels_as_its_name_and_unknown_names_are_refused() {
        let old = old_job_line("0.5", "auto");
        let mut j: JobReport = serde_json::from_str(&old).unwrap();
        assert_eq!(j.priority_source, Some(PrioritySource::Auto));
        for (source, name) in [
            (None, "none"),
            (Some(PrioritySource::Control), "control"),
            (Some(PrioritySource::Auto), "auto"),
            (Some(PrioritySource::Hint), "hint"),
        ] {
            j.priority_source = source;
            assert_eq!(j.source_name(), name);
            let v = serde_json::to_value(&j).unwrap();
            assert_eq!(v["priority_source"], name);
            let back: JobReport = serde_json::from_value(v).unwrap();
            assert_eq!(back.priority_source, source);
        }
        let bad = old.replace("\"auto\"", "\"admin\"");
        let e = serde_json::from_str::<JobReport>(&bad).unwrap_err();
        assert!(e.to_string().contains("not a priority source"), "{e}");
    }

    #[test]
    fn merged_causes_add_up_and_name_the_dominant_one() {
        let mut a = causes([0, 10, 0, 5, 0]);
        a.merge(&causes([1, 0, 30, 0, 0]));
        assert_eq!(a.wait_ns, 46);
        assert_eq!(a.causes_ns(), 46);
        assert_eq!(a.requests, 2);
        assert_eq!(
            a.dominant().map(|(n, c)| (n, c.ns)),
            Some(("exclusivity", 30))
        );
        assert_eq!(WaitCausesReport::default().dominant(), None);
    }
}
