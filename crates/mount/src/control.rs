//! The control directory `MOUNT/.iosets/`: seed 004's configfs, without a kernel module.
//!
//! ```text
//! .iosets/README                 read: who may write what, and what the numbers mean
//! .iosets/policy                 read: the servers' policy
//! .iosets/jobs/<id>/priority     read: "<value> <source>" (control, auto, hint) or "none";
//!                                write a number to set it, "clear" to clear it
//! .iosets/jobs/<id>/stats        read: that job's jobstats (JSON, per server and in total)
//! ```
//!
//! The mount holds the servers' control token; users never see it. Who may write a priority is
//! `may_set`'s answer ([`README`] says it for users): root any job's; another process only its
//! own job's, that job known from the Slurm cgroup it runs in (never from the environment, which
//! the user sets), within the servers' hint cap, as `--self-priority` allows. A refused write is
//! `EACCES`, a value that is neither a finite positive number nor `clear` is `EINVAL`; nothing
//! changes either way, and the mount logs why once per process, job and reason
//! (`Refusals`). The directory is hidden from `readdir` of the root (a backing entry of that
//! name is hidden behind it).

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
/// `.iosets/README`
pub(crate) const README_INO: u64 = BASE + 3;
/// Per-job nodes: `JOB0 + 4·index + {0: directory, 1: priority, 2: stats}`.
const JOB0: u64 = BASE + 16;

/// What a control inode is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Node {
    Dir,
    Jobs,
    Policy,
    Readme,
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
            Node::Policy | Node::Readme | Node::Stats(_) => 0o444,
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
            Node::Readme => README_INO,
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
            README_INO => Some(Node::Readme),
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
        (Node::Dir, "README") => Some(Node::Readme),
        (Node::Jobs, id) => parse_job(id).map(Node::JobDir),
        (Node::JobDir(j), "priority") => Some(Node::Priority(j)),
        (Node::JobDir(j), "stats") => Some(Node::Stats(j)),
        _ => None,
    }
}

/// A job directory's name as a job id ([`crate::ident::job_named`]): the decimal number the
/// servers report, or the job's name as the mount names jobs (`IOSETS_JOB_ID=myjob`,
/// `procname.uid`), so that `.iosets/jobs/myjob/priority` is the same file as
/// `.iosets/jobs/<its number>/priority`.
pub(crate) fn parse_job(name: &str) -> Option<JobId> {
    crate::ident::job_named(name).ok()
}

/// `.iosets/README`, and the control section of `iosets man mount`: who may write what, and
/// what the numbers mean.
pub const README: &str = "\
The iosets control directory (.iosets/ at the root of an iosets mount)

  README                 this text (read-only)
  policy                 the servers' scheduling policy (read-only)
  jobs/<id>/priority     read: \"<value> <source>\" (source: control, auto or hint) or \"none\"
                         write: a number to set the job's priority, \"clear\" to clear it
  jobs/<id>/stats        the job's statistics on every server, as JSON (read-only)
  jobs/<name>/...        the same files of a job named, as the mount names jobs
                         (IOSETS_JOB_ID=myjob, or procname.uid): jobs/myjob/priority is the
                         file of its number. `ls jobs` shows a job by its name when the mount
                         or a server knows it, else by its number

Who may write a priority
  root                   any job's, any value, and clear it.
  any other process      only its own job's, and only when that job is known from the Slurm
                         cgroup the process runs in (job_<id>, set by slurmd). Environment
                         variables (IOSETS_JOB_ID, SLURM_JOB_ID) never decide whose priority a
                         process may change: they only name the job its I/O is attributed to.
                         Never above the servers' hint cap (iosets serve --hints cap=P,
                         default 1); refused when the servers ignore hints.
  The mount's --self-priority switch: `capped` (the default) as above; `any`: a job's own
  processes may set any value; `off`: only root may write.
  A refused write fails with EACCES (Permission denied), changes nothing, and the mount logs
  the reason once per process, job and reason.

The numbers
  A priority is a finite positive number; larger means more of the bandwidth. Between sets of
  jobs, bandwidth is shared in proportion to the priorities; inside an IO-SETS set one job does
  I/O at a time. The Set-10 rule gives a job whose I/O phases start every ~10^i seconds
  priority 10^-i: 1 for a period of ~1 s, 0.1 for ~10 s, 0.01 for ~100 s, 0.001 for ~1000 s.
  Anything else (0, a negative number, nan, inf, text other than \"clear\") fails with EINVAL
  (Invalid argument), changes nothing, and is logged with what is accepted.
  \"clear\" removes a priority set here; the job falls back to its detected (auto) or hinted
  priority, if any.
";

/// Who besides root may set a priority through `.iosets/jobs/<id>/priority` (`--self-priority`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SelfPriority {
    /// Only root.
    Off,
    /// A process of the job (by its Slurm cgroup), at most the servers' hint cap.
    #[default]
    Capped,
    /// A process of the job (by its Slurm cgroup), any value.
    Any,
}

impl std::fmt::Display for SelfPriority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SelfPriority::Off => "off",
            SelfPriority::Capped => "capped",
            SelfPriority::Any => "any",
        })
    }
}

impl std::str::FromStr for SelfPriority {
    type Err = String;
    fn from_str(s: &str) -> Result<SelfPriority, String> {
        match s {
            "off" => Ok(SelfPriority::Off),
            "capped" => Ok(SelfPriority::Capped),
            "any" => Ok(SelfPriority::Any),
            _ => Err(format!(
                "self-priority {s:?}: must be `off` (only root sets priorities), `capped` (a \
                 job's own processes, up to the servers' hint cap; the default) or `any`"
            )),
        }
    }
}

/// The highest priority a non-root process may write, from the servers' `hints` settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Cap {
    /// No cap (every server trusts hints, or `--self-priority any`).
    None,
    /// The lowest cap among the servers.
    At(f64),
    /// A server ignores hints: a user may not raise a priority at all.
    Ignored,
}

impl Cap {
    /// The cap of servers whose `hints` settings are `hints` (a server before the field, an
    /// empty string, has the default cap).
    pub(crate) fn of<'a>(hints: impl IntoIterator<Item = &'a str>) -> Cap {
        use iosets_proto::hints::HintPolicy;
        let mut cap = Cap::None;
        for h in hints {
            let p = h.parse::<HintPolicy>().unwrap_or_default();
            cap = match (cap, p) {
                (Cap::Ignored, _) | (_, HintPolicy::Ignore) => Cap::Ignored,
                (c, HintPolicy::Trust) => c,
                (Cap::None, HintPolicy::Cap(p)) => Cap::At(p.get()),
                (Cap::At(c), HintPolicy::Cap(p)) => Cap::At(c.min(p.get())),
            };
        }
        cap
    }
}

/// Why a priority write was refused (`EACCES`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Refusal {
    /// `--self-priority off`.
    SelfServiceOff,
    /// The caller runs in no Slurm job's cgroup.
    NoSlurmJob,
    /// The caller's Slurm job is another one.
    OtherJob { own: JobId },
    /// Above the servers' hint cap.
    AboveCap { value: f64, cap: f64 },
    /// The servers ignore hints.
    HintsIgnored,
}

impl Refusal {
    /// A small number per kind of reason, for [`Refusals`].
    fn kind(&self) -> u8 {
        match self {
            Refusal::SelfServiceOff => 0,
            Refusal::NoSlurmJob => 1,
            Refusal::OtherJob { .. } => 2,
            Refusal::AboveCap { .. } => 3,
            Refusal::HintsIgnored => 4,
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::SelfServiceOff => f.write_str(
                "self-service priorities are off on this mount (--self-priority off): only root \
                 may set a priority",
            ),
            Refusal::NoSlurmJob => f.write_str(
                "the caller runs in no Slurm job's cgroup: only a process of the job (by its \
                 cgroup) or root may set a job's priority; IOSETS_JOB_ID and other environment \
                 variables do not count",
            ),
            Refusal::OtherJob { own } => write!(
                f,
                "the caller's Slurm job (from its cgroup) is {own}: a process may set its own \
                 job's priority only"
            ),
            Refusal::AboveCap { value, cap } => write!(
                f,
                "{value} is above the servers' hint cap {cap} (iosets serve --hints cap=P): only \
                 root may set more"
            ),
            Refusal::HintsIgnored => f.write_str(
                "the servers ignore priority hints (--hints ignore): only root may set a priority",
            ),
        }
    }
}

/// Whether a process that is not root, whose Slurm job (from its cgroup) is `own`, may write
/// `what` to `target`'s priority file under `mode`, the servers' hints allowing `cap`. Root is
/// not asked: it may write anything.
pub(crate) fn may_set(
    mode: SelfPriority,
    own: Option<JobId>,
    target: JobId,
    what: PriorityWrite,
    cap: Cap,
) -> Result<(), Refusal> {
    if mode == SelfPriority::Off {
        return Err(Refusal::SelfServiceOff);
    }
    match own {
        None => return Err(Refusal::NoSlurmJob),
        Some(own) if own != target => return Err(Refusal::OtherJob { own }),
        Some(_) => {}
    }
    let PriorityWrite::Set(p) = what else {
        // Clearing falls back to the detected or hinted priority, which the servers cap.
        return Ok(());
    };
    match (mode, cap) {
        (SelfPriority::Any, _) | (_, Cap::None) => Ok(()),
        (_, Cap::Ignored) => Err(Refusal::HintsIgnored),
        (_, Cap::At(cap)) if p.get() > cap => Err(Refusal::AboveCap {
            value: p.get(),
            cap,
        }),
        (_, Cap::At(_)) => Ok(()),
    }
}

/// How long a logged refusal keeps the same (process, job, reason) quiet.
pub(crate) const REFUSAL_LOG_INTERVAL: std::time::Duration = std::time::Duration::from_secs(60);
/// The most (process, job, reason) triples remembered; past it, expired ones are dropped, and
/// if none has expired, new triples are counted but not logged until one does.
const REFUSALS_KEPT: usize = 4096;

/// Which refusals were logged lately: a write refused again for the same process, job and
/// reason within [`REFUSAL_LOG_INTERVAL`] is not logged again (a loop of `echo` must not flood
/// the log), only counted.
#[derive(Debug, Default)]
pub(crate) struct Refusals {
    last: std::collections::HashMap<(u32, u64, u8), std::time::Instant>,
    /// Refusals not logged because one like it was.
    pub(crate) quiet: u64,
}

impl Refusals {
    /// Whether to log a refusal of `kind` (a [`Refusal`]'s, or 255 for a malformed value) for
    /// process `pid` and `job` at `now`; remembers it if so.
    pub(crate) fn should_log(
        &mut self,
        pid: u32,
        job: JobId,
        kind: u8,
        now: std::time::Instant,
    ) -> bool {
        let key = (pid, job.0, kind);
        if let Some(t) = self.last.get(&key) {
            if now.duration_since(*t) < REFUSAL_LOG_INTERVAL {
                self.quiet += 1;
                return false;
            }
        }
        if self.last.len() >= REFUSALS_KEPT && !self.last.contains_key(&key) {
            self.last
                .retain(|_, t| now.duration_since(*t) < REFUSAL_LOG_INTERVAL);
            if self.last.len() >= REFUSALS_KEPT {
                self.quiet += 1;
                return false;
            }
        }
        self.last.insert(key, now);
        true
    }

    /// Logs (once, see [`Refusals::should_log`]) that `pid`, running as `uid`, was refused a
    /// write to `job`'s priority.
    pub(crate) fn refused(&mut self, pid: u32, uid: u32, job: JobId, why: &Refusal) {
        if self.should_log(pid, job, why.kind(), std::time::Instant::now()) {
            tracing::warn!(
                pid,
                uid,
                job = %job,
                "write to .iosets/jobs/{job}/priority refused (EACCES): {why}"
            );
        }
    }

    /// Logs (once) that `pid` wrote a value that is not accepted to `job`'s priority.
    pub(crate) fn malformed(&mut self, pid: u32, uid: u32, job: JobId, data: &[u8]) {
        if self.should_log(pid, job, 255, std::time::Instant::now()) {
            let shown: String = String::from_utf8_lossy(data).chars().take(64).collect();
            tracing::warn!(
                pid,
                uid,
                job = %job,
                "write to .iosets/jobs/{job}/priority refused (EINVAL): {:?} is not accepted; \
                 write a finite positive number (Set-10: 10^-i for a job whose I/O period is \
                 about 10^i s, e.g. 1 for ~1 s, 0.01 for ~100 s) or `clear`",
                shown.trim()
            );
        }
    }
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
        .filter_map(|(a, j)| j.priority.map(|p| (*a, p, j.source_name())))
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
    fn a_job_directory_is_its_number_or_its_name() {
        assert_eq!(parse_job("42"), Some(JobId(42)));
        let named = crate::ident::job_id_of("dd.1000").unwrap();
        assert_eq!(parse_job("dd.1000"), Some(named));
        // The number `ls` and the servers show for the name is the same directory.
        assert_eq!(parse_job(&named.0.to_string()), Some(named));
        assert_eq!(
            child(Node::Jobs, "myjob"),
            parse_job("myjob").map(Node::JobDir)
        );
        assert_eq!(parse_job(""), None);
        assert_eq!(parse_job(&"x".repeat(10_000)), None);
    }

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

    fn set(v: f64) -> PriorityWrite {
        PriorityWrite::Set(iosets_types::Priority::new(v).unwrap())
    }

    #[test]
    fn only_the_jobs_own_cgroup_within_the_cap_may_set_its_priority() {
        let five = JobId(5);
        let capped = SelfPriority::Capped;
        assert_eq!(
            may_set(capped, Some(five), five, set(0.5), Cap::At(1.0)),
            Ok(())
        );
        assert_eq!(
            may_set(capped, Some(five), five, set(1.0), Cap::At(1.0)),
            Ok(()),
            "the cap itself is allowed"
        );
        assert_eq!(
            may_set(capped, None, five, set(0.5), Cap::At(1.0)),
            Err(Refusal::NoSlurmJob)
        );
        assert_eq!(
            may_set(capped, Some(JobId(6)), five, set(0.5), Cap::At(1.0)),
            Err(Refusal::OtherJob { own: JobId(6) })
        );
        assert_eq!(
            may_set(capped, Some(five), five, set(1e6), Cap::At(1.0)),
            Err(Refusal::AboveCap {
                value: 1e6,
                cap: 1.0
            })
        );
        assert_eq!(
            may_set(capped, Some(five), five, set(1e6), Cap::Ignored),
            Err(Refusal::HintsIgnored)
        );
        assert_eq!(
            may_set(capped, Some(five), five, set(1e6), Cap::None),
            Ok(())
        );
        assert_eq!(
            may_set(capped, Some(five), five, PriorityWrite::Clear, Cap::At(1.0)),
            Ok(())
        );
        assert_eq!(
            may_set(SelfPriority::Any, Some(five), five, set(1e6), Cap::At(1.0)),
            Ok(())
        );
        assert_eq!(
            may_set(SelfPriority::Any, None, five, set(0.5), Cap::None),
            Err(Refusal::NoSlurmJob)
        );
        assert_eq!(
            may_set(SelfPriority::Off, Some(five), five, set(0.5), Cap::None),
            Err(Refusal::SelfServiceOff)
        );
        for r in [
            Refusal::NoSlurmJob,
            Refusal::OtherJob { own: JobId(6) },
            Refusal::AboveCap {
                value: 1e6,
                cap: 1.0,
            },
        ] {
            assert!(r.to_string().len() > 40, "{r}");
        }
        assert!(Refusal::NoSlurmJob.to_string().contains("IOSETS_JOB_ID"));
    }

    #[test]
    fn the_cap_is_the_lowest_among_the_servers() {
        assert_eq!(Cap::of(["cap=1", "cap=0.1"]), Cap::At(0.1));
        assert_eq!(Cap::of(["trust", "cap=2"]), Cap::At(2.0));
        assert_eq!(Cap::of(["trust", "trust"]), Cap::None);
        assert_eq!(Cap::of(["cap=1", "ignore"]), Cap::Ignored);
        // A server from before the field: the default cap.
        assert_eq!(
            Cap::of([""]),
            Cap::At(iosets_proto::hints::DEFAULT_HINT_CAP)
        );
    }

    #[test]
    fn a_refusal_is_logged_once_per_process_job_and_reason_per_interval() {
        let mut r = Refusals::default();
        let t0 = std::time::Instant::now();
        assert!(r.should_log(10, JobId(5), 1, t0));
        assert!(!r.should_log(10, JobId(5), 1, t0 + std::time::Duration::from_secs(1)));
        assert!(r.should_log(10, JobId(5), 2, t0), "another reason");
        assert!(r.should_log(11, JobId(5), 1, t0), "another process");
        assert!(r.should_log(10, JobId(6), 1, t0), "another job");
        assert!(r.should_log(10, JobId(5), 1, t0 + REFUSAL_LOG_INTERVAL));
        assert_eq!(r.quiet, 1);
        // Bounded: past REFUSALS_KEPT live triples, new ones are counted, not remembered.
        let mut r = Refusals::default();
        for pid in 0..REFUSALS_KEPT as u32 {
            assert!(r.should_log(pid, JobId(1), 0, t0));
        }
        assert!(!r.should_log(u32::MAX, JobId(1), 0, t0));
        assert_eq!(r.last.len(), REFUSALS_KEPT);
        assert!(r.should_log(u32::MAX, JobId(1), 0, t0 + REFUSAL_LOG_INTERVAL));
        assert_eq!(r.last.len(), 1);
    }

    #[test]
    fn self_priority_values_parse_and_print() {
        for v in ["off", "capped", "any"] {
            assert_eq!(v.parse::<SelfPriority>().unwrap().to_string(), v);
        }
        assert!("on"
            .parse::<SelfPriority>()
            .unwrap_err()
            .contains("`capped`"));
    }

    #[test]
    fn control_inodes_round_trip() {
        let mut s = JobSlots::default();
        for n in [
            Node::Dir,
            Node::Jobs,
            Node::Policy,
            Node::Readme,
            Node::JobDir(JobId(7)),
            Node::Priority(JobId(7)),
            Node::Stats(JobId(u64::MAX)),
        ] {
            let ino = s.ino(n);
            assert!(is_control(ino));
            assert_eq!(s.node(ino), Some(n));
        }
        assert_eq!(child(Node::Jobs, "12"), Some(Node::JobDir(JobId(12))));
        // Any other name is a job's name (as IOSETS_JOB_ID names it).
        let named = |n: &str| Some(Node::JobDir(crate::ident::job_id_of(n).unwrap()));
        assert_eq!(child(Node::Jobs, "x12"), named("x12"));
        assert_eq!(child(Node::Jobs, "+12"), named("+12"));
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
