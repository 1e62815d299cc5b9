//! The control directory `MOUNT/.iosets/`: seed 004's configfs, without a kernel module.
//!
//! ```text
//! .iosets/policy                 read: the servers' policy
//! .iosets/jobs/<id>/priority     read: "<value> <source>" (control, auto, hint) or "none";
//!                                write a number to set it, "clear" to clear it
//! .iosets/jobs/<id>/stats        read: that job's jobstats (JSON, per server and in total)
//! ```
//!
//! The mount holds the servers' control token; users never see it. Root may set any job's
//! priority, a process its own job's; anyone else gets `EACCES`. A value that is neither a
//! finite positive number nor `clear` is `EINVAL`, and nothing changes. The directory is hidden
//! from `readdir` of the root (a backing entry of that name is hidden behind it).

use iosets_proto::{JobReport, JobsReport, ServerReport};
use iosets_types::JobId;

/// The name of the control directory in the mount's root.
pub const CONTROL_DIR: &str = ".iosets";

/// Control inodes live above this number; the table's counter never gets there.
const BASE: u64 = 1 << 62;
/// `.iosets`
pub(crate) const DIR: u64 = BASE;
/// `.iosets/jobs`
pub(crate) const JOBS: u64 = BASE + 1;
/// `.iosets/policy`
pub(crate) const POLICY: u64 = BASE + 2;
/// Per-job nodes: `JOB0 + 4·index + {0: directory, 1: priority, 2: stats}`.
const JOB0: u64 = BASE + 16;

/// What a control inode is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Node {
    Dir,
    Jobs,
    Policy,
    JobDir(JobId),
    Priority(JobId),
    Stats(JobId),
}

impl Node {
    pub(crate) fn is_dir(self) -> bool {
        matches!(self, Node::Dir | Node::Jobs | Node::JobDir(_))
    }

    /// Permission bits: directories `0555`, priority files `0666` (the mount judges who may
    /// write), the others `0444`.
    pub(crate) fn perm(self) -> u16 {
        match self {
            Node::Dir | Node::Jobs | Node::JobDir(_) => 0o555,
            Node::Priority(_) => 0o666,
            Node::Policy | Node::Stats(_) => 0o444,
        }
    }
}

/// The job ids that have control inodes (append-only: an inode number stays valid).
#[derive(Debug, Default)]
pub(crate) struct JobSlots {
    jobs: Vec<JobId>,
    index: std::collections::HashMap<JobId, u64>,
}

impl JobSlots {
    fn slot(&mut self, job: JobId) -> u64 {
        if let Some(&i) = self.index.get(&job) {
            return i;
        }
        let i = self.jobs.len() as u64;
        self.jobs.push(job);
        self.index.insert(job, i);
        i
    }

    /// The inode of `node`.
    pub(crate) fn ino(&mut self, node: Node) -> u64 {
        match node {
            Node::Dir => DIR,
            Node::Jobs => JOBS,
            Node::Policy => POLICY,
            Node::JobDir(j) => JOB0 + 4 * self.slot(j),
            Node::Priority(j) => JOB0 + 4 * self.slot(j) + 1,
            Node::Stats(j) => JOB0 + 4 * self.slot(j) + 2,
        }
    }

    /// The node of inode `ino`, if it is a control inode.
    pub(crate) fn node(&self, ino: u64) -> Option<Node> {
        match ino {
            DIR => Some(Node::Dir),
            JOBS => Some(Node::Jobs),
            POLICY => Some(Node::Policy),
            i if i >= JOB0 => {
                let job = *self.jobs.get(((i - JOB0) / 4) as usize)?;
                match (i - JOB0) % 4 {
                    0 => Some(Node::JobDir(job)),
                    1 => Some(Node::Priority(job)),
                    2 => Some(Node::Stats(job)),
                    _ => None,
                }
            }
            _ => None,
        }
    }
}

/// Whether `ino` is a control inode.
pub(crate) fn is_control(ino: u64) -> bool {
    ino >= BASE
}

/// The child `name` of control directory `parent`.
pub(crate) fn child(parent: Node, name: &str) -> Option<Node> {
    match (parent, name) {
        (Node::Dir, "jobs") => Some(Node::Jobs),
        (Node::Dir, "policy") => Some(Node::Policy),
        (Node::Jobs, id) => parse_job(id).map(Node::JobDir),
        (Node::JobDir(j), "priority") => Some(Node::Priority(j)),
        (Node::JobDir(j), "stats") => Some(Node::Stats(j)),
        _ => None,
    }
}

/// A job directory's name as a job id (the decimal number the servers report).
pub(crate) fn parse_job(name: &str) -> Option<JobId> {
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    name.parse().ok().map(JobId)
}

/// What a write to a priority file asks for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum PriorityWrite {
    Set(iosets_types::Priority),
    Clear,
}

/// Parses what was written to a priority file: a finite positive number or `clear`, with
/// surrounding white space (the newline of `echo`) ignored. Anything else is `None` (`EINVAL`).
pub(crate) fn parse_priority(data: &[u8]) -> Option<PriorityWrite> {
    let text = std::str::from_utf8(data).ok()?.trim();
    if text == "clear" {
        return Some(PriorityWrite::Clear);
    }
    let v: f64 = text.parse().ok()?;
    iosets_types::Priority::new(v).map(PriorityWrite::Set)
}

/// The text of `jobs/<id>/priority` from every server's jobs report: `"<value> <source>"`
/// when the servers agree (or only some know the job), one line per server otherwise, `none`
/// when no server has a priority for it.
pub(crate) fn priority_text(job: JobId, reports: &[(String, JobsReport)]) -> String {
    let seen: Vec<(&str, &JobReport)> = reports
        .iter()
        .filter_map(|(addr, r)| {
            r.jobs
                .iter()
                .find(|j| j.job == job.0)
                .map(|j| (addr.as_str(), j))
        })
        .collect();
    let with: Vec<(&str, f64, &str)> = seen
        .iter()
        .filter_map(|(a, j)| j.priority.map(|p| (*a, p, j.priority_source.as_str())))
        .collect();
    match with.first() {
        None => "none\n".to_string(),
        Some((_, p, src)) if with.iter().all(|(_, q, s)| q == p && s == src) => {
            format!("{p} {src}\n")
        }
        Some(_) => with
            .iter()
            .map(|(a, p, s)| format!("{p} {s} {a}\n"))
            .collect(),
    }
}

/// The text of `jobs/<id>/stats`: the job's report from each server, and the totals.
pub(crate) fn stats_text(job: JobId, reports: &[(String, JobsReport)]) -> String {
    let mut per_server = Vec::new();
    let (mut ops, mut read, mut written, mut failed) = (0u64, 0u64, 0u64, 0u64);
    let (mut bw1, mut bw10) = (0f64, 0f64);
    let mut causes = iosets_proto::WaitCausesReport::default();
    for (addr, r) in reports {
        if let Some(j) = r.jobs.iter().find(|j| j.job == job.0) {
            causes.merge(&j.wait_causes);
            ops += j.ops;
            read += j.bytes_read;
            written += j.bytes_written;
            failed += j.failed;
            bw1 += j.bw_1s_mib_s;
            bw10 += j.bw_10s_mib_s;
            per_server.push(serde_json::json!({ "server": addr, "report": j }));
        }
    }
    let v = serde_json::json!({
        "job": job.0,
        "total": {
            "ops": ops,
            "bytes_read": read,
            "bytes_written": written,
            "failed": failed,
            "bw_1s_mib_s": bw1,
            "bw_10s_mib_s": bw10,
            "wait_causes": causes,
        },
        "servers": per_server,
    });
    format!("{}\n", serde_json::to_string_pretty(&v).unwrap_or_default())
}

/// The text of `policy`: the policy of each server (one line when they agree).
pub(crate) fn policy_text(reports: &[(String, ServerReport)]) -> String {
    match reports.first() {
        None => "unknown\n".into(),
        Some((_, first)) if reports.iter().all(|(_, r)| r.policy == first.policy) => {
            format!("{}\n", first.policy)
        }
        Some(_) => reports
            .iter()
            .map(|(a, r)| format!("{} {a}\n", r.policy))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priority_writes_parse_numbers_and_clear_only() {
        assert_eq!(
            parse_priority(b"10\n"),
            Some(PriorityWrite::Set(
                iosets_types::Priority::new(10.0).unwrap()
            ))
        );
        assert_eq!(parse_priority(b" clear \n"), Some(PriorityWrite::Clear));
        for bad in [&b"abc"[..], b"-1", b"0", b"nan", b"inf", b"", b"\xff"] {
            assert_eq!(parse_priority(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn control_inodes_round_trip() {
        let mut s = JobSlots::default();
        for n in [
            Node::Dir,
            Node::Jobs,
            Node::Policy,
            Node::JobDir(JobId(7)),
            Node::Priority(JobId(7)),
            Node::Stats(JobId(u64::MAX)),
        ] {
            let ino = s.ino(n);
            assert!(is_control(ino));
            assert_eq!(s.node(ino), Some(n));
        }
        assert_eq!(child(Node::Jobs, "12"), Some(Node::JobDir(JobId(12))));
        assert_eq!(child(Node::Jobs, "x12"), None);
        assert_eq!(child(Node::Jobs, "+12"), None);
    }

    #[test]
    fn stats_sum_the_wait_causes_over_the_servers() {
        let line = |job: u64, device: u64, share: u64| -> JobReport {
            let v = serde_json::json!({
                "job": job, "priority": null, "priority_source": "none", "set": null,
                "ops": 2, "bytes_read": 0, "bytes_written": 8, "failed": 0,
                "bw_1s_mib_s": 0.0, "bw_10s_mib_s": 0.0, "queued": 0, "in_service": 0,
                "queue_wait": {"count": 2, "mean_us": 0.0, "p50_us": 0.0, "p99_us": 0.0,
                               "max_us": 0.0},
                "wait_causes": {
                    "wait_ns": device + share, "requests": 2,
                    "rule": {"ns": 0, "requests": 0},
                    "device": {"ns": device, "requests": 1},
                    "exclusivity": {"ns": 0, "requests": 0},
                    "share": {"ns": share, "requests": 1},
                    "policy": {"ns": 0, "requests": 0}
                }
            });
            serde_json::from_value(v).unwrap()
        };
        let report = |jobs: Vec<JobReport>| JobsReport {
            policy: "iosets".into(),
            jobs,
        };
        let reports = vec![
            (
                "a:1".to_string(),
                report(vec![line(5, 10, 20), line(6, 1, 1)]),
            ),
            ("b:1".to_string(), report(vec![line(5, 3, 4)])),
        ];
        let v: serde_json::Value = serde_json::from_str(&stats_text(JobId(5), &reports)).unwrap();
        let total = &v["total"]["wait_causes"];
        assert_eq!(total["wait_ns"], 37);
        assert_eq!(total["device"]["ns"], 13);
        assert_eq!(total["share"]["ns"], 24);
        assert_eq!(total["share"]["requests"], 2);
        assert_eq!(v["servers"][1]["report"]["wait_causes"]["device"]["ns"], 3);
    }
}
