//! Control requests (`iosets ctl`): priorities, policy switch, job and server statistics.
//!
//! Every control request carries the server's token; a server started without one refuses them
//! all (`EACCES`), and a wrong token is refused the same way.

use iosets_policy::set10::SetMapping;
use iosets_proto::{
    CauseReport, Control, HeldReport, HeldTopReport, JobReport, JobRuleReport, JobsReport, Reply,
    RuleReport, RulesReport, ServerReport, WaitCausesReport, WaitReport,
};
use iosets_runtime::{Counted, WaitCause};

use iosets_proto::auth::same_secret;

use crate::guard::Refusal;
use crate::root::FsError;
use crate::state::Shared;

use rustix::io::Errno;

const EACCES: i32 = Errno::ACCESS.raw_os_error();
const EINVAL: i32 = Errno::INVAL.raw_os_error();
const EBUSY: i32 = Errno::BUSY.raw_os_error();
const EIO: i32 = Errno::IO.raw_os_error();

fn refuse(errno: i32, message: impl Into<String>) -> FsError {
    FsError {
        errno,
        message: message.into(),
    }
}

/// Answers one control request from `peer` (`None`: a same-host socket), after checking its
/// token in a time that leaks neither the token nor its length. A refusal is logged
/// (rate-limited) and counts as a failed proof from the peer's address.
pub(crate) fn handle(
    shared: &Shared,
    token: &str,
    ctl: Control,
    peer: Option<std::net::IpAddr>,
) -> Result<Reply, FsError> {
    let refused = |message: &'static str| {
        shared.guard.failed(peer);
        shared.guard.refuse(
            Refusal::ControlToken,
            peer,
            &format!("{message} ({})", ctl.op().as_str()),
        );
        Err(refuse(EACCES, message))
    };
    match &shared.config.token {
        None => {
            return refused(
                "control is disabled: the server was started without a token \
                 (--token-file, or token/token_file in the config)",
            )
        }
        Some(t) if !same_secret(token.as_bytes(), t.as_bytes()) => {
            return refused("control refused: wrong token")
        }
        Some(_) => {}
    }
    match ctl {
        // The runtime keeps each job's priorities by source and applies the one in force
        // (control > auto > hint) under its own lock.
        Control::SetPriority { job, priority } => {
            shared.sched.set_priority(job, Some(priority));
            Ok(Reply::Done)
        }
        Control::ClearPriority { job } => {
            // The automatic priority, if the job has one, is in force again.
            shared.sched.set_priority(job, None);
            Ok(Reply::Done)
        }
        Control::Policy { name, options } => {
            let new = Counted::build(&name, &options).map_err(|e| refuse(EINVAL, e.to_string()))?;
            shared
                .sched
                .switch_policy(new)
                .map_err(|e| refuse(EBUSY, e.to_string()))?;
            tracing::info!(policy = %name, "policy switched");
            Ok(Reply::Done)
        }
        Control::Jobs => Ok(Reply::Json(
            serde_json::to_string(&jobs(shared)).expect("report serialises"),
        )),
        Control::Stats => Ok(Reply::Json(
            serde_json::to_string(&stats(shared)).expect("report serialises"),
        )),
        Control::RuleAdd { rule, rank } => {
            let table: iosets_runtime::quota::TomlRule =
                serde_json::from_str(&rule).map_err(|e| refuse(EINVAL, format!("rule: {e}")))?;
            let spec = table
                .to_spec(0)
                .map_err(|e| refuse(EINVAL, e.to_string()))?;
            let (name, limits, matcher) =
                (spec.name.clone(), spec.limits(), spec.matcher.to_string());
            // A pattern no known job matches is accepted (jobs named later will match it),
            // and said.
            if spec.matcher.has_patterns()
                && !shared
                    .sched
                    .job_names()
                    .iter()
                    .any(|n| spec.matcher.pattern_matches(n))
            {
                tracing::warn!(rule = %name, %matcher, "no job known now matches the rule's job patterns (accepted: jobs named later will)");
            }
            change_state(shared, |sched| {
                sched
                    .add_rule(spec, rank.map(|r| r as usize))
                    .map_err(|e| refuse(EINVAL, e.to_string()))
            })?;
            tracing::info!(rule = %name, %matcher, %limits, "quota rule added");
            Ok(Reply::Done)
        }
        Control::RuleDel { name } => {
            change_state(shared, |sched| {
                sched
                    .remove_rule(&name)
                    .map_err(|e| refuse(EINVAL, e.to_string()))
            })?;
            tracing::info!(rule = %name, "quota rule deleted");
            Ok(Reply::Done)
        }
        Control::Rules => Ok(Reply::Json(
            serde_json::to_string(&rules(shared)).expect("report serialises"),
        )),
        Control::ShareSet { node, weight } => {
            let used = set_share(shared, &node, weight)?;
            match weight {
                Some(w) => tracing::info!(%node, weight = w, used, "share set"),
                None => tracing::info!(%node, used, "share cleared"),
            }
            Ok(Reply::Done)
        }
        Control::JobInfo {
            job,
            account,
            nodes,
        } => {
            shared
                .sched
                .set_job_info(job, account.as_deref(), nodes)
                .map_err(|e| refuse(EINVAL, e.to_string()))?;
            Ok(Reply::Done)
        }
        Control::Shares => Ok(Reply::Json(
            serde_json::to_string(&shares(shared)).expect("report serialises"),
        )),
    }
}

/// Sets (`Some`) or clears (`None`) the share weight of `node` and keeps the shares in the
/// state file. Returns whether the active policy's tree uses the node's level.
fn set_share(shared: &Shared, node: &str, weight: Option<f64>) -> Result<bool, FsError> {
    let invalid = |e: String| refuse(EINVAL, e);
    let (level, key, _) = iosets_runtime::share::parse_node(node).map_err(invalid)?;
    let spec = weight
        .map(|w| iosets_runtime::ShareSpec::parse(node, w))
        .transpose()
        .map_err(invalid)?;
    let mut used = false;
    change_state(shared, |sched| {
        let mut shares = sched.shares();
        let at = shares.iter().position(|s| s.level == level && s.key == key);
        match (spec, at) {
            (Some(spec), Some(i)) => shares[i] = spec,
            (Some(spec), None) => shares.push(spec),
            (None, Some(i)) => {
                shares.remove(i);
            }
            (None, None) => {
                return Err(invalid(format!(
                    "share `{node}`: no weight is set for it (it weighs 1)"
                )))
            }
        }
        used = sched
            .set_shares(shares)
            .map_err(|e| invalid(e.to_string()))?;
        Ok(())
    })?;
    Ok(used)
}

/// The share weights and the jobs' accounts (`iosets ctl share list`).
pub(crate) fn shares(shared: &Shared) -> iosets_proto::SharesReport {
    iosets_proto::SharesReport {
        policy: shared.sched.policy_name().into(),
        levels: shared
            .sched
            .share_levels()
            .iter()
            .map(|l| l.as_str().to_owned())
            .collect(),
        shares: shared
            .sched
            .shares()
            .iter()
            .map(|s| iosets_proto::ShareReport {
                node: s.node(),
                weight: s.weight,
            })
            .collect(),
        jobs: shared
            .sched
            .job_infos()
            .into_iter()
            .map(|(job, account, nodes)| iosets_proto::JobInfoReport {
                job: job.0,
                account,
                nodes,
            })
            .collect(),
    }
}

/// Makes a change of rules or shares with `change` and, with a state file, writes the rules
/// and shares in force to it before the change is answered: a change that cannot be kept is
/// undone and refused (`EIO`), so that nothing acknowledged is lost at the next restart.
fn change_state(
    shared: &Shared,
    change: impl FnOnce(&iosets_runtime::Scheduler<crate::state::Pending>) -> Result<(), FsError>,
) -> Result<(), FsError> {
    let _one_at_a_time = shared.state_lock.lock().unwrap_or_else(|e| e.into_inner());
    let (quota_before, shares_before) = (shared.sched.quota(), shared.sched.shares());
    change(&shared.sched)?;
    let Some(path) = &shared.config.state_file else {
        return Ok(());
    };
    let (quota, shares) = (shared.sched.quota(), shared.sched.shares());
    if let Err(e) = crate::config::save_state(path, quota.as_ref(), &shares) {
        let undone = shared
            .sched
            .set_quota(quota_before)
            .and_then(|()| shared.sched.set_shares(shares_before).map(drop));
        tracing::error!(state_file = %path.display(), error = %e, "a change of rules or shares could not be kept: undone");
        return Err(refuse(
            EIO,
            format!(
                "state file {}: {e}; the change is undone{}",
                path.display(),
                match undone {
                    Ok(()) => String::new(),
                    Err(u) => format!(" (undoing failed too: {u})"),
                }
            ),
        ));
    }
    Ok(())
}

/// The quota rules in force with their counters (`iosets ctl rule list`).
pub(crate) fn rules(shared: &Shared) -> RulesReport {
    let cfg = shared.sched.quota().unwrap_or_default();
    RulesReport {
        threads: shared.config.workers as u64,
        job_share_pct: cfg.job_share_pct,
        lend: cfg.lend,
        keep_ms: cfg.keep_ms,
        rules: shared
            .sched
            .rules()
            .into_iter()
            .enumerate()
            .map(|(i, r)| RuleReport {
                rank: i as u32,
                name: r.name,
                matcher: r.matcher,
                limits: r.limits,
                threads: r.threads.map(|t| t as u64),
                job_ceiling: r.job_ceiling.map(|t| t as u64),
                admitted: r.admitted,
                in_service: r.in_service,
                held: r.held,
                peak_in_service: r.peak_in_service,
                matched_total: r.matched_total,
                admitted_total: r.admitted_total,
                lent_total: r.lent_total,
                reserved_total: r.reserved_total,
                kept_total: r.kept_total,
                completed_total: r.completed_total,
                jobs: r.jobs.iter().map(|j| j.job.0).collect(),
                held_threads_s: secs(r.held_threads_ns),
                held_rate_s: secs(r.held_rate_ns),
                top: HeldTopReport {
                    jobs_1m: held(&r.top.jobs_1m),
                    users_1m: held(&r.top.users_1m),
                    jobs_1h: held(&r.top.jobs_1h),
                    users_1h: held(&r.top.users_1h),
                },
            })
            .collect(),
    }
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// A rule's top list for its report.
fn held(top: &[(u64, (u64, u64))]) -> Vec<HeldReport> {
    top.iter()
        .map(|&(id, (threads, rate))| HeldReport {
            id,
            threads_s: secs(threads),
            rate_s: secs(rate),
        })
        .collect()
}

/// The Set-10 index of a priority, if it is one of Set-10's (`10^-i`).
pub(crate) fn set_of(priority: f64) -> Option<i32> {
    SetMapping::default().set_of_priority(priority)
}

/// One line per known job (linear in the number of jobs: the rules' jobs are grouped once).
pub(crate) fn jobs(shared: &Shared) -> JobsReport {
    let stats = shared.sched.stats();
    // Which rules each job's requests fall under now.
    let mut by_job: std::collections::BTreeMap<u64, Vec<JobRuleReport>> = Default::default();
    for r in &stats.rules {
        for j in &r.jobs {
            by_job.entry(j.job.0).or_default().push(JobRuleReport {
                rule: r.name.clone(),
                admitted: j.admitted,
                held: j.held,
                held_threads_s: secs(j.held_threads_ns),
                held_rate_s: secs(j.held_rate_ns),
            });
        }
    }
    let names = shared.sched.names_of(stats.jobs.iter().map(|j| j.job));
    let us = |ns: u64| ns as f64 / 1e3;
    let mib = |b: f64| b / (1024.0 * 1024.0);
    let jobs = stats
        .jobs
        .iter()
        .zip(names)
        .map(|(j, name)| {
            let priority = j.priority.map(|p| p.value.get());
            JobReport {
                job: j.job.0,
                name,
                priority,
                priority_source: j.priority.map(|p| p.source),
                set: j.set.or_else(|| priority.and_then(set_of)),
                period_s: j.period.map(|p| p.as_secs_f64()),
                ops: j.ops,
                bytes_read: j.bytes_read,
                bytes_written: j.bytes_written,
                failed: j.failed,
                bw_1s_mib_s: mib(j.bandwidth.0),
                bw_10s_mib_s: mib(j.bandwidth.1),
                queued: j.queued,
                in_service: j.in_service,
                queue_wait: WaitReport {
                    count: j.queue_wait.count,
                    mean_us: us(j.queue_wait.mean_ns),
                    p50_us: us(j.queue_wait.p50_ns),
                    p99_us: us(j.queue_wait.p99_ns),
                    max_us: us(j.queue_wait.max_ns),
                },
                rules: by_job.remove(&j.job.0).unwrap_or_default(),
                peers: j.peers.iter().map(|a| a.to_string()).collect(),
                wait_causes: wait_causes(j),
            }
        })
        .collect();
    JobsReport {
        policy: stats.policy.into(),
        jobs,
    }
}

/// `j`'s queue waits split by cause, for its report.
fn wait_causes(j: &iosets_runtime::JobStats) -> WaitCausesReport {
    let mut r = WaitCausesReport {
        wait_ns: j.queue_wait.sum_ns,
        requests: j.queue_wait.count,
        ..WaitCausesReport::default()
    };
    for cause in WaitCause::ALL {
        if let Some(c) = r.cause_mut(cause.as_str()) {
            *c = CauseReport {
                ns: j.wait_causes.ns(cause),
                requests: j.wait_causes.requests(cause),
            };
        }
    }
    r
}

pub(crate) fn stats(shared: &Shared) -> ServerReport {
    use std::sync::atomic::Ordering::Relaxed;
    let s = shared.sched.stats();
    let c = &s.counters;
    let (book_bytes, book_jobs) = shared.sched.book_memory();
    ServerReport {
        policy: s.policy.into(),
        uptime_s: shared.start.elapsed().as_secs_f64(),
        workers: shared.config.workers,
        throttle_mib_s: shared.config.throttle_mib_s,
        connections: shared.counters.connections(),
        frames: shared.counters.frames(),
        bad_frames: shared.counters.bad_frames(),
        errors: shared.counters.errors(),
        submitted: s.submitted,
        inserted: c.inserted,
        merged: c.merged,
        dispatched: c.dispatched,
        completed: c.completed,
        failed: c.failed,
        withdrawn: c.withdrawn,
        queued: s.queued as u64,
        in_service: s.requests_in_service,
        balanced: shared.sched.check_balance().is_ok(),
        switches: s.switches,
        bytes_read: shared.counters.bytes_read.load(Relaxed),
        bytes_written: shared.counters.bytes_written.load(Relaxed),
        jobs_known: book_jobs as u64,
        job_book_bytes: book_bytes as u64,
        jobs_forgotten: s.forgotten_jobs,
        jobs_evicted: s.evicted_jobs,
        hints: shared.config.hints.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set10_priorities_map_to_their_set() {
        assert_eq!(set_of(1.0), Some(0));
        assert_eq!(set_of(0.1), Some(1));
        assert_eq!(set_of(0.01), Some(2));
        assert_eq!(set_of(10.0), Some(-1));
        assert_eq!(set_of(0.3), None);
    }
}
