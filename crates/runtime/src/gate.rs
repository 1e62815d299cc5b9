//! The quota gate: governed requests wait here until their rule lets them have a service thread,
//! then go into the ordering policy.
//!
//! # Model
//! A request a rule governs ([`crate::quota`]) is **held** in its job's FIFO under that rule. It
//! is **admitted** (handed to the policy) when a thread is promised to it: at most `N` governed
//! requests are admitted at once (`N` = the service threads), a rule's at most its thread cap,
//! one job's at most its ceiling, and its job's rate buckets must hold a token. An admitted
//! request stays counted against its rule until it completes, so a rule never has more requests
//! in service than its cap (the admitted count bounds the in-service count; both are kept).
//! Requests no rule governs pass straight to the policy.
//!
//! Which held request goes when a thread frees, in four phases (mClock's, with seed 003's
//! thread shares): (1) jobs under their **reservation**, earliest reservation tag first;
//! (2) within every limit, the job holding the fewest threads relative to its rule's **weight**
//! (so the jobs of a rule share its threads evenly: seed 003's fair share); (3) if nothing is
//! eligible and a thread is idle, a job over a **soft** rate; (4) with `lend`, a job over its
//! rule's thread cap or its ceiling (never over a strict rate). Phases 3 and 4 need an idle
//! thread (nothing queued in the policy and fewer than `N` batches in service).
//!
//! # What it is not
//! Pure bookkeeping: no lock, no clock (time is passed in), no thread. The scheduler owns it
//! under its lock, tells it about submissions, dispatches and completions, and enqueues what it
//! admits into the policy.

use std::collections::{BTreeSet, VecDeque};

use iosets_types::hash::IdMap;
use iosets_types::{JobId, Nanos, Request, RequestId};

use crate::held::{Blocked, HeldLog, HeldNs, HeldTop};
use crate::quota::{OpClass, Origin, QuotaConfig, RateScope, RuleSpec};

/// How long a rate bucket may bank idle time: a job may burst this much of its rate.
const BURST_S: f64 = 0.1;

/// A token bucket: `rate` tokens per second, at most `depth` banked.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    rate: f64,
    depth: f64,
    tokens: f64,
    at: Nanos,
}

impl Bucket {
    /// A full bucket of `rate` per second (depth: `BURST_S` of the rate, at least `min_depth`).
    fn new(rate: f64, min_depth: f64, now: Nanos) -> Bucket {
        let depth = (rate * BURST_S).max(min_depth);
        Bucket {
            rate,
            depth,
            tokens: depth,
            at: now,
        }
    }

    fn refill(&mut self, now: Nanos) {
        if now > self.at {
            let dt = (now - self.at).as_secs_f64();
            self.tokens = (self.tokens + dt * self.rate).min(self.depth);
            self.at = now;
        }
    }

    /// Whether a request may go: one whole token (operations), or a bucket not in debt (bytes:
    /// a large request takes its bytes and leaves the bucket negative, so the long-run rate is
    /// exact whatever the request sizes).
    fn ready(&self, need_whole: bool) -> bool {
        if need_whole {
            self.tokens >= 1.0 - 1e-9
        } else {
            self.tokens > 0.0
        }
    }

    /// When [`Bucket::ready`] turns true.
    fn ready_at(&self, need_whole: bool) -> Nanos {
        let target = if need_whole { 1.0 } else { 1e-6 };
        let missing = (target - self.tokens).max(0.0);
        self.at + Nanos::from_secs_f64(missing / self.rate) + Nanos(1)
    }

    fn full(&self, now: Nanos) -> bool {
        let mut b = *self;
        b.refill(now);
        b.tokens >= b.depth - 1e-9
    }
}

#[derive(Debug)]
struct Held {
    req: Request,
    origin: Origin,
    /// What the request costs against an ops/s rate ([`QuotaConfig::op_cost`]).
    cost: f64,
    /// Its job's and its rule's rate-blocked totals when it was held ([`Blocked::at`]).
    marks: (u64, u64),
}

/// Rate buckets: operations (cost-weighted) and bytes per second, either or both, and the
/// time they had no token.
#[derive(Clone, Copy, Debug, Default)]
struct Rates {
    ops: Option<Bucket>,
    bytes: Option<Bucket>,
    blocked: Blocked,
}

impl Rates {
    fn new(ops: Option<f64>, bytes: Option<f64>, now: Nanos) -> Rates {
        Rates {
            ops: ops.map(|r| Bucket::new(r, 1.0, now)),
            bytes: bytes.map(|r| Bucket::new(r, 1.0, now)),
            blocked: Blocked::default(),
        }
    }

    fn full(&self, now: Nanos) -> bool {
        self.ops.is_none_or(|b| b.full(now)) && self.bytes.is_none_or(|b| b.full(now))
    }

    /// Takes `ops` and `bytes` (they may go into debt); a bucket left without a token is
    /// blocked until it has one again.
    fn take(&mut self, ops: f64, bytes: f64, now: Nanos) {
        if let Some(b) = self.ops.as_mut() {
            b.refill(now);
            b.tokens -= ops;
        }
        if let Some(b) = self.bytes.as_mut() {
            b.refill(now);
            b.tokens -= bytes;
        }
        if let Some(until) = self.ready_at() {
            self.blocked.block(now, until);
        }
    }

    /// Whether the next request may go (`soft_ok`: soft rates may be exceeded).
    fn ok(&mut self, now: Nanos, soft_ok: bool, strict: bool) -> bool {
        if soft_ok && !strict {
            return true;
        }
        let ops = self.ops.as_mut().is_none_or(|b| {
            b.refill(now);
            b.ready(true)
        });
        let bytes = self.bytes.as_mut().is_none_or(|b| {
            b.refill(now);
            b.ready(false)
        });
        ops && bytes
    }

    fn ready_at(&self) -> Option<Nanos> {
        let a = self
            .ops
            .filter(|b| !b.ready(true))
            .map(|b| b.ready_at(true));
        let b = self
            .bytes
            .filter(|b| !b.ready(false))
            .map(|b| b.ready_at(false));
        match (a, b) {
            (Some(x), Some(y)) => Some(x.max(y)),
            (x, y) => x.or(y),
        }
    }
}

/// One job under one rule.
#[derive(Debug)]
struct JobQ {
    held: VecDeque<Held>,
    /// Admitted and not yet completed.
    admitted: usize,
    /// Its key's tie-breaker in `RuleState::waiting` (set when it starts waiting: first come,
    /// first served among equals).
    since: u64,
    /// Its own rates (a rule's rates per job); none under a rule-wide rate.
    rates: Rates,
    /// Time its admitted requests were held: (for a thread, by a rate), while it is known.
    held_ns: HeldNs,
    /// mClock's reservation tag: when the job may next go ahead of the weights.
    r_tag: Nanos,
    /// Threads the job freed and keeps for its next requests (`keep_ms`), still counted as
    /// admitted, until `kept_until`.
    kept: usize,
    kept_until: Nanos,
}

impl JobQ {
    fn idle(&self, now: Nanos) -> bool {
        self.held.is_empty() && self.admitted == 0 && self.kept == 0 && self.rates.full(now)
    }
}

/// Charges an admitted request to its job's rate buckets, its rule's shared ones and its
/// job's reservation tag.
fn charge(
    q: &mut JobQ,
    shared: &mut Rates,
    req: &Request,
    cost: f64,
    now: Nanos,
    reserve_ops: Option<f64>,
) {
    q.rates.take(cost, req.len as f64, now);
    shared.take(cost, req.len as f64, now);
    if let Some(res) = reserve_ops {
        let step = Nanos::from_secs_f64(1.0 / res);
        q.r_tag = q.r_tag.max(now.saturating_sub(step)) + step;
    }
}

/// Splits the wait of `held`, admitted at `now`, into (for a thread, by a rate) and records it
/// for its job and rule.
fn account(q: &mut JobQ, shared: &Rates, log: &mut HeldLog, held: &Held, now: Nanos) {
    let wait = now.0.saturating_sub(held.req.arrival.0);
    let own = q.rates.blocked.at(now).saturating_sub(held.marks.0);
    let rule = shared.blocked.at(now).saturating_sub(held.marks.1);
    let rate = own.max(rule).min(wait);
    let split = (wait - rate, rate);
    q.held_ns.0 += split.0;
    q.held_ns.1 += split.1;
    log.add(now, held.req.job.0, held.origin.uid, split);
}

/// What the gate counts per rule (its conservation counters and gauges).
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct RuleStats {
    /// The rule's name.
    pub name: String,
    /// Its match, in canonical text form.
    pub matcher: String,
    /// Its limits, in text form (`threads=71% rate=100ops/s …`).
    pub limits: String,
    /// The threads it may hold (its cap), if it has a thread quota.
    pub threads: Option<usize>,
    /// The most threads one job of it may hold, if it has a thread quota.
    pub job_ceiling: Option<usize>,
    /// Requests held, waiting for the rule to admit them.
    pub held: u64,
    /// Requests admitted and not yet completed (queued in the policy or in service).
    pub admitted: u64,
    /// Requests in service now.
    pub in_service: u64,
    /// The most requests it ever had in service at once, outside lent threads.
    pub peak_in_service: u64,
    /// Requests that ever fell under the rule.
    pub matched_total: u64,
    /// Requests admitted, since the rule was added.
    pub admitted_total: u64,
    /// Of those, admitted on a lent thread or beyond a soft rate.
    pub lent_total: u64,
    /// Of those, admitted by their job's reservation.
    pub reserved_total: u64,
    /// Of those, admitted on a thread kept for their job (`keep_ms`).
    pub kept_total: u64,
    /// Requests completed (admitted under the rule).
    pub completed_total: u64,
    /// Bytes of the requests admitted.
    pub admitted_bytes_total: u64,
    /// Nanoseconds its admitted requests waited for a thread (its cap, a job's ceiling, every
    /// thread busy), since the rule was added.
    pub held_threads_ns: u64,
    /// Nanoseconds its admitted requests were held by a rate (no token in their job's bucket
    /// or the rule's), since the rule was added.
    pub held_rate_ns: u64,
    /// The jobs and users it held most over the last minute and hour.
    pub top: HeldTop,
    /// Every job the rule knows, with its admitted and held counts.
    pub jobs: Vec<RuleJob>,
}

/// One job under a rule, as [`RuleStats`] lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RuleJob {
    /// The job.
    pub job: JobId,
    /// Its requests admitted and not yet completed.
    pub admitted: u64,
    /// Its requests held.
    pub held: u64,
    /// Nanoseconds its admitted requests waited for a thread under the rule, while the rule
    /// has known it (since its last idle time).
    pub held_threads_ns: u64,
    /// Nanoseconds they were held by a rate.
    pub held_rate_ns: u64,
}

#[derive(Debug)]
struct RuleState {
    spec: RuleSpec,
    cap: Option<usize>,
    job_cap: usize,
    weight: f64,
    admitted: usize,
    in_service: usize,
    /// Of those in service, the ones on lent threads (not counted in the peak).
    lent_in_service: usize,
    held: usize,
    jobs: IdMap<JobId, JobQ>,
    /// The rule's rates shared by all its jobs (`rate_scope = rule`); none per job then.
    shared: Rates,
    /// Who it held and why.
    log: HeldLog,
    /// Jobs with held requests, fewest admitted first.
    waiting: BTreeSet<(usize, u64, JobId)>,
    stats: RuleStats,
}

impl RuleState {
    fn new(spec: RuleSpec, threads: usize, job_share_pct: f64) -> RuleState {
        let cap = spec
            .threads_pct
            .map(|p| ((threads as f64 * p / 100.0 + 1e-9).floor() as usize).max(1));
        let job_cap = cap.map_or(usize::MAX, |c| {
            ((c as f64 * job_share_pct / 100.0 + 1e-9).floor() as usize).max(1)
        });
        let weight = spec.weight.unwrap_or(1.0);
        let shared = if spec.rate_scope == RateScope::Rule {
            Rates::new(spec.rate_ops, spec.rate_bytes, Nanos::ZERO)
        } else {
            Rates::default()
        };
        RuleState {
            cap,
            job_cap,
            weight,
            admitted: 0,
            in_service: 0,
            lent_in_service: 0,
            held: 0,
            jobs: IdMap::default(),
            shared,
            log: HeldLog::default(),
            waiting: BTreeSet::new(),
            stats: RuleStats::default(),
            spec,
        }
    }

    /// Reconfigures in place (same name): the counts carry over.
    fn respec(&mut self, spec: RuleSpec, threads: usize, job_share_pct: f64, now: Nanos) {
        let fresh = RuleState::new(spec, threads, job_share_pct);
        self.cap = fresh.cap;
        self.job_cap = fresh.job_cap;
        self.weight = fresh.weight;
        // A bucket whose rate did not change keeps its tokens (and its debt).
        let (ops, bytes, scope) = (
            fresh.spec.rate_ops,
            fresh.spec.rate_bytes,
            fresh.spec.rate_scope,
        );
        let same = (
            self.spec.rate_ops,
            self.spec.rate_bytes,
            self.spec.rate_scope,
        ) == (ops, bytes, scope);
        if !same {
            let per_job = scope == RateScope::Job;
            for q in self.jobs.values_mut() {
                q.rates = if per_job {
                    Rates::new(ops, bytes, now)
                } else {
                    Rates::default()
                };
            }
            self.shared = if per_job {
                Rates::default()
            } else {
                Rates::new(ops, bytes, now)
            };
        }
        self.spec = fresh.spec;
    }

    fn under_cap(&self) -> bool {
        self.cap.is_none_or(|c| self.admitted < c)
    }

    fn job_q(&mut self, job: JobId, now: Nanos) -> &mut JobQ {
        let rates = if self.spec.rate_scope == RateScope::Job {
            Rates::new(self.spec.rate_ops, self.spec.rate_bytes, now)
        } else {
            Rates::default()
        };
        self.jobs.entry(job).or_insert_with(|| JobQ {
            held: VecDeque::new(),
            admitted: 0,
            since: 0,
            rates,
            held_ns: (0, 0),
            r_tag: now,
            kept: 0,
            kept_until: Nanos::ZERO,
        })
    }
}

/// Where an admitted request is counted.
#[derive(Clone, Copy, Debug)]
struct Slot {
    rule: usize,
    job: JobId,
    lent: bool,
    in_service: bool,
}

/// How a request was admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Reservation,
    Share,
    Lent,
}

/// The gate. See the [module documentation](self).
#[derive(Debug)]
pub(crate) struct Gate {
    cfg: QuotaConfig,
    threads: usize,
    rules: Vec<RuleState>,
    slots: IdMap<RequestId, Slot>,
    admitted: usize,
    held: usize,
    seq: u64,
    /// The earliest time a job blocked only by its rate can go, or a kept thread is given
    /// back, as of the last pump.
    timer: Option<Nanos>,
    /// Threads kept for the jobs that freed them (counted in `admitted`), and those jobs.
    kept: usize,
    keepers: Vec<(usize, JobId)>,
}

impl Gate {
    /// A gate applying `cfg` (already validated) over `threads` service threads.
    pub(crate) fn new(cfg: QuotaConfig, threads: usize) -> Gate {
        let threads = threads.max(1);
        let rules = cfg
            .rules
            .iter()
            .map(|s| RuleState::new(s.clone(), threads, cfg.job_share_pct))
            .collect();
        Gate {
            cfg,
            threads,
            rules,
            slots: IdMap::default(),
            admitted: 0,
            held: 0,
            seq: 0,
            timer: None,
            kept: 0,
            keepers: Vec::new(),
        }
    }

    /// The same gate over `threads` service threads (the caps follow at the next
    /// [`Gate::reconfigure`]).
    pub(crate) fn with_threads(mut self, threads: usize) -> Gate {
        self.threads = threads.max(1);
        self
    }

    pub(crate) fn config(&self) -> &QuotaConfig {
        &self.cfg
    }

    pub(crate) fn threads(&self) -> usize {
        self.threads
    }

    /// Requests held.
    pub(crate) fn held(&self) -> usize {
        self.held
    }

    /// The rate timer of the last pump: when a held request blocked by a rate may go.
    pub(crate) fn timer(&self) -> Option<Nanos> {
        self.timer
    }

    /// The rule governing a request of `req`'s job and operation from `origin`, if any.
    pub(crate) fn classify(&self, req: &Request, origin: &Origin) -> Option<usize> {
        let class = OpClass::of(req.op);
        self.rules
            .iter()
            .position(|r| r.spec.matcher.matches(req.job, class, origin))
    }

    /// Holds `req` under rule `rule`.
    pub(crate) fn hold(&mut self, rule: usize, req: Request, origin: Origin, now: Nanos) {
        self.seq += 1;
        let seq = self.seq;
        let r = &mut self.rules[rule];
        r.stats.matched_total += 1;
        let job = req.job;
        let reserve = r.spec.reserve_ops;
        let cost = f64::from(self.cfg.op_cost.of(origin.op));
        // Service the job had from other servers counts against the rule's shared rates too.
        if origin.elsewhere_ops > 0 || origin.elsewhere_bytes > 0 {
            r.shared.take(
                origin.elsewhere_ops as f64,
                origin.elsewhere_bytes as f64,
                now,
            );
        }
        let rule_mark = r.shared.blocked.at(now);
        let q = r.job_q(job, now);
        let first = q.held.is_empty();
        if first {
            q.since = seq;
            // Idleness banks no reservation credit (dmClock re-anchors a returning client).
            if q.admitted == 0 && q.r_tag < now {
                q.r_tag = now;
            }
        }
        // Service the job had from other servers counts against its rates and reservation here
        // (dmClock's delta): job-wide limits with no central controller.
        if origin.elsewhere_ops > 0 || origin.elsewhere_bytes > 0 {
            q.rates.take(
                origin.elsewhere_ops as f64,
                origin.elsewhere_bytes as f64,
                now,
            );
            if let Some(res) = reserve {
                let step = Nanos::from_secs_f64(origin.elsewhere_ops as f64 / res);
                q.r_tag = q.r_tag + step;
            }
        }
        // Charged once: a request classified again after a rule change keeps no delta.
        let origin = Origin {
            elsewhere_ops: 0,
            elsewhere_bytes: 0,
            ..origin
        };
        let marks = (q.rates.blocked.at(now), rule_mark);
        q.held.push_back(Held {
            req,
            origin,
            cost,
            marks,
        });
        let key = (q.admitted, q.since, job);
        if first {
            r.waiting.insert(key);
        }
        r.held += 1;
        self.held += 1;
    }

    /// Admits what the rules allow at `now`, calling `admit` for each request in order.
    /// `idle_threads`: threads with nothing to do (for lending). Sets the rate timer.
    pub(crate) fn pump(&mut self, now: Nanos, idle_threads: usize, admit: &mut dyn FnMut(Request)) {
        self.timer = None;
        if self.kept > 0 {
            self.release_kept(now, false);
            self.take_kept(now, admit);
        }
        if self.held == 0 {
            self.timer = self.keep_timer();
            return;
        }
        let mut idle = idle_threads;
        while self.admitted < self.threads || idle > 0 {
            let bounded = self.admitted < self.threads;
            let pick = if bounded {
                self.pick_reserved(now)
                    .map(|p| (p, Phase::Reservation))
                    .or_else(|| self.pick_share(now, false).map(|p| (p, Phase::Share)))
            } else {
                None
            };
            let pick = pick.or_else(|| {
                (idle > 0)
                    .then(|| self.pick_share(now, true).map(|p| (p, Phase::Lent)))
                    .flatten()
            });
            let Some(((rule, job), phase)) = pick else {
                break;
            };
            let req = self.take(rule, job, now, phase);
            idle = idle.saturating_sub(1);
            admit(req);
        }
        if self.held > 0 {
            self.timer = self.rate_timer();
        }
        if let Some(k) = self.keep_timer() {
            self.timer = Some(self.timer.map_or(k, |t| t.min(k)));
        }
    }

    /// When the first kept thread is given back.
    fn keep_timer(&self) -> Option<Nanos> {
        self.keepers
            .iter()
            .filter_map(|&(r, j)| self.rules[r].jobs.get(&j))
            .filter(|q| q.kept > 0)
            .map(|q| q.kept_until)
            .min()
    }

    /// Gives back the threads kept past their time (all of them with `all`).
    fn release_kept(&mut self, now: Nanos, all: bool) {
        let mut i = 0;
        while i < self.keepers.len() {
            let (r, j) = self.keepers[i];
            let rule = &mut self.rules[r];
            let Some(q) = rule.jobs.get_mut(&j) else {
                self.keepers.swap_remove(i);
                continue;
            };
            if q.kept > 0 && !all && q.kept_until > now {
                i += 1;
                continue;
            }
            let n = q.kept;
            let old = (q.admitted, q.since, j);
            q.kept = 0;
            q.admitted -= n;
            if !q.held.is_empty() {
                rule.waiting.remove(&old);
                rule.waiting.insert((q.admitted, q.since, j));
            } else if q.idle(now) {
                rule.jobs.remove(&j);
            }
            rule.admitted -= n;
            self.admitted -= n;
            self.kept -= n;
            self.keepers.swap_remove(i);
        }
    }

    /// Phase 0: a job that kept threads and has requests again takes them first.
    fn take_kept(&mut self, now: Nanos, admit: &mut dyn FnMut(Request)) {
        let mut i = 0;
        while i < self.keepers.len() {
            let (r, j) = self.keepers[i];
            loop {
                let rule = &mut self.rules[r];
                let Some(q) = rule.jobs.get_mut(&j) else {
                    break;
                };
                if q.kept == 0 || q.held.is_empty() {
                    break;
                }
                // A kept thread does not lift the job's rates: a request over its rate waits
                // for its token (or for the keep to end) like any other.
                if !q.rates.ok(now, false, true) || !rule.shared.ok(now, false, true) {
                    break;
                }
                let held = q.held.pop_front().expect("checked non-empty");
                account(q, &rule.shared, &mut rule.log, &held, now);
                let req = held.req;
                q.kept -= 1;
                charge(
                    q,
                    &mut rule.shared,
                    &req,
                    held.cost,
                    now,
                    rule.spec.reserve_ops,
                );
                if q.held.is_empty() {
                    rule.waiting.remove(&(q.admitted, q.since, j));
                }
                rule.held -= 1;
                rule.stats.admitted_total += 1;
                rule.stats.admitted_bytes_total += req.len;
                rule.stats.kept_total += 1;
                self.held -= 1;
                self.kept -= 1;
                self.slots.insert(
                    req.id,
                    Slot {
                        rule: r,
                        job: j,
                        lent: false,
                        in_service: false,
                    },
                );
                admit(req);
            }
            let done = self.rules[r].jobs.get(&j).is_none_or(|q| q.kept == 0);
            if done {
                self.keepers.swap_remove(i);
            } else {
                i += 1;
            }
        }
    }

    /// Phase 1: the job under its reservation with the earliest tag, within every limit.
    fn pick_reserved(&mut self, now: Nanos) -> Option<(usize, JobId)> {
        let mut best: Option<(Nanos, usize, JobId)> = None;
        for (ri, r) in self.rules.iter_mut().enumerate() {
            if r.spec.reserve_ops.is_none() || !r.under_cap() {
                continue;
            }
            let (job_cap, strict) = (r.job_cap, r.spec.strict);
            for &(_, _, j) in &r.waiting {
                let q = r.jobs.get_mut(&j).expect("a waiting job has a queue");
                if q.r_tag > now
                    || q.admitted >= job_cap
                    || !q.rates.ok(now, false, strict)
                    || !r.shared.ok(now, false, strict)
                {
                    continue;
                }
                if best.is_none_or(|(t, _, _)| q.r_tag < t) {
                    best = Some((q.r_tag, ri, j));
                }
            }
        }
        best.map(|(_, r, j)| (r, j))
    }

    /// Phase 2 (`lend` false) or phases 3–4 (`lend` true): the eligible job holding the fewest
    /// threads for its rule's weight.
    fn pick_share(&mut self, now: Nanos, lend: bool) -> Option<(usize, JobId)> {
        let lend_threads = lend && self.cfg.lend;
        let mut best: Option<(f64, u64, usize, JobId)> = None;
        for (ri, r) in self.rules.iter_mut().enumerate() {
            if r.held == 0 || (!lend_threads && !r.under_cap()) {
                continue;
            }
            let (job_cap, strict, weight) = (r.job_cap, r.spec.strict, r.weight);
            for &(admitted, since, j) in &r.waiting {
                if !lend_threads && admitted >= job_cap {
                    // Ordered by admitted count: no later job is under the ceiling either.
                    break;
                }
                let q = r.jobs.get_mut(&j).expect("a waiting job has a queue");
                if !q.rates.ok(now, lend, strict) || !r.shared.ok(now, lend, strict) {
                    continue;
                }
                let key = admitted as f64 / weight;
                if best.is_none_or(|(k, s, _, _)| key < k || (key == k && since < s)) {
                    best = Some((key, since, ri, j));
                }
                break;
            }
        }
        best.map(|(_, _, r, j)| (r, j))
    }

    /// Moves `job`'s oldest held request under `rule` to admitted.
    fn take(&mut self, rule: usize, job: JobId, now: Nanos, phase: Phase) -> Request {
        self.seq += 1;
        let seq = self.seq;
        let r = &mut self.rules[rule];
        let q = r.jobs.get_mut(&job).expect("picked job has a queue");
        let old_key = (q.admitted, q.since, job);
        let held = q.held.pop_front().expect("picked job holds a request");
        account(q, &r.shared, &mut r.log, &held, now);
        let req = held.req;
        q.admitted += 1;
        if r.spec.rate_scope == RateScope::Rule {
            // The rule's tokens go round its jobs: the one served goes behind the others that
            // hold as many threads (with first-come order kept, the first job would take every
            // token of a shared rate).
            q.since = seq;
        }
        charge(q, &mut r.shared, &req, held.cost, now, r.spec.reserve_ops);
        let new_key = (q.admitted, q.since, job);
        let still = !q.held.is_empty();
        r.waiting.remove(&old_key);
        if still {
            r.waiting.insert(new_key);
        }
        r.admitted += 1;
        r.held -= 1;
        let lent = phase == Phase::Lent;
        let s = &mut r.stats;
        s.admitted_total += 1;
        s.admitted_bytes_total += req.len;
        match phase {
            Phase::Reservation => s.reserved_total += 1,
            Phase::Lent => s.lent_total += 1,
            Phase::Share => {}
        }
        self.held -= 1;
        self.admitted += 1;
        self.slots.insert(
            req.id,
            Slot {
                rule,
                job,
                lent,
                in_service: false,
            },
        );
        req
    }

    /// When the first held request blocked only by a rate may go.
    fn rate_timer(&self) -> Option<Nanos> {
        let mut t: Option<Nanos> = None;
        for r in &self.rules {
            if r.held == 0 || (r.spec.rate_ops.is_none() && r.spec.rate_bytes.is_none()) {
                continue;
            }
            let shared = r.shared.ready_at();
            for &(_, _, j) in &r.waiting {
                let own = r.jobs.get(&j).and_then(|q| q.rates.ready_at());
                let at = match (own, shared) {
                    (Some(x), Some(y)) => Some(x.max(y)),
                    (x, y) => x.or(y),
                };
                if let Some(at) = at {
                    t = Some(t.map_or(at, |x| x.min(at)));
                }
            }
        }
        t
    }

    /// The policy dispatched request `id`: count it in service under its rule.
    pub(crate) fn dispatched(&mut self, id: RequestId) {
        let Some(slot) = self.slots.get_mut(&id) else {
            return;
        };
        slot.in_service = true;
        let r = &mut self.rules[slot.rule];
        r.in_service += 1;
        if slot.lent {
            r.lent_in_service += 1;
        } else {
            let own = (r.in_service - r.lent_in_service) as u64;
            r.stats.peak_in_service = r.stats.peak_in_service.max(own);
        }
    }

    /// Request `id` completed: its thread goes back to its rule. Returns whether it was
    /// governed.
    pub(crate) fn completed(&mut self, id: RequestId, now: Nanos) -> bool {
        let Some(slot) = self.slots.remove(&id) else {
            return false;
        };
        let keep = Nanos::from_secs_f64(self.cfg.keep_ms / 1e3);
        let r = &mut self.rules[slot.rule];
        if slot.in_service {
            r.in_service -= 1;
            if slot.lent {
                r.lent_in_service -= 1;
            }
        }
        r.stats.completed_total += 1;
        // Kept for the job's next request if it has none waiting while others of its rule do.
        if keep > Nanos::ZERO && !slot.lent && !r.waiting.is_empty() {
            if let Some(q) = r.jobs.get_mut(&slot.job) {
                if q.held.is_empty() {
                    if q.kept == 0 {
                        self.keepers.push((slot.rule, slot.job));
                    }
                    q.kept += 1;
                    q.kept_until = now + keep;
                    self.kept += 1;
                    return true;
                }
            }
        }
        self.admitted -= 1;
        r.admitted -= 1;
        if let Some(q) = r.jobs.get_mut(&slot.job) {
            let old = (q.admitted, q.since, slot.job);
            q.admitted -= 1;
            if !q.held.is_empty() {
                r.waiting.remove(&old);
                r.waiting.insert((q.admitted, q.since, slot.job));
            } else if q.idle(now) {
                r.jobs.remove(&slot.job);
            }
        }
        true
    }

    /// Forgets the jobs with nothing held or admitted and full buckets.
    pub(crate) fn forget_idle(&mut self, now: Nanos) {
        for r in &mut self.rules {
            r.jobs.retain(|_, q| !q.idle(now));
        }
    }

    /// Replaces the rules by `cfg` (validated). A rule of the same name keeps its counts and
    /// in-service requests; a rule that goes drops its counts (its admitted requests complete
    /// unaccounted). Every held request is classified again under the new rules: the ones no
    /// rule governs any more are returned, for the policy.
    pub(crate) fn reconfigure(&mut self, cfg: QuotaConfig, now: Nanos) -> Vec<Request> {
        // Kept threads go back first: the rules they were kept under may change.
        self.release_kept(now, true);
        let mut old: Vec<RuleState> = std::mem::take(&mut self.rules);
        let mut held: Vec<Held> = Vec::new();
        for r in &mut old {
            for q in r.jobs.values_mut() {
                held.extend(q.held.drain(..));
            }
            r.waiting.clear();
            r.held = 0;
        }
        // Held requests go back in arrival order.
        held.sort_by_key(|h| h.req.id);
        let mut remap: IdMap<usize, usize> = IdMap::default();
        for spec in &cfg.rules {
            let state = match old.iter().position(|r| r.spec.name == spec.name) {
                Some(i) => {
                    let mut r = std::mem::replace(
                        &mut old[i],
                        RuleState::new(spec.clone(), self.threads, cfg.job_share_pct),
                    );
                    remap.insert(i, self.rules.len());
                    r.respec(spec.clone(), self.threads, cfg.job_share_pct, now);
                    r
                }
                None => RuleState::new(spec.clone(), self.threads, cfg.job_share_pct),
            };
            self.rules.push(state);
        }
        // Slots of rules that went are dropped; the others follow their rule's new index.
        let mut gone = 0usize;
        self.slots.retain(|_, s| match remap.get(&s.rule) {
            Some(&n) => {
                s.rule = n;
                true
            }
            None => {
                gone += 1;
                false
            }
        });
        self.admitted -= gone;
        self.cfg = cfg;
        self.held = 0;
        let mut free = Vec::new();
        for h in held {
            match self.classify(&h.req, &h.origin) {
                Some(rule) => {
                    // Not counted again as matched: it was counted when it arrived.
                    self.hold(rule, h.req, h.origin, now);
                    self.rules[rule].stats.matched_total -= 1;
                }
                None => free.push(h.req),
            }
        }
        free
    }

    /// Every rule's counters and gauges, its top lists as of `now`.
    pub(crate) fn stats(&self, now: Nanos) -> Vec<RuleStats> {
        self.rules
            .iter()
            .map(|r| {
                let mut s = r.stats.clone();
                s.name = r.spec.name.clone();
                s.matcher = r.spec.matcher.to_string();
                s.limits = r.spec.limits();
                s.threads = r.cap;
                s.job_ceiling = r.cap.map(|_| r.job_cap);
                s.held = r.held as u64;
                s.admitted = r.admitted as u64;
                s.in_service = r.in_service as u64;
                (s.held_threads_ns, s.held_rate_ns) = r.log.total;
                s.top = r.log.top(now);
                let mut jobs: Vec<RuleJob> = r
                    .jobs
                    .iter()
                    .filter(|(_, q)| q.admitted > 0 || !q.held.is_empty())
                    .map(|(&job, q)| RuleJob {
                        job,
                        admitted: q.admitted as u64,
                        held: q.held.len() as u64,
                        held_threads_ns: q.held_ns.0,
                        held_rate_ns: q.held_ns.1,
                    })
                    .collect();
                jobs.sort_unstable_by_key(|j| j.job);
                s.jobs = jobs;
                s
            })
            .collect()
    }

    /// Checks the gate's own bookkeeping: held and admitted counts agree with the queues and
    /// the slots. Returns what disagrees.
    pub(crate) fn check(&self) -> Result<(), (&'static str, u64, u64)> {
        let held: usize = self.rules.iter().map(|r| r.held).sum();
        if held != self.held {
            return Err((
                "requests held by the quota gate",
                self.held as u64,
                held as u64,
            ));
        }
        let queued: usize = self
            .rules
            .iter()
            .flat_map(|r| r.jobs.values())
            .map(|q| q.held.len())
            .sum();
        if queued != self.held {
            return Err(("quota gate queues", self.held as u64, queued as u64));
        }
        if self.slots.len() + self.kept != self.admitted {
            return Err((
                "requests admitted by the quota gate (and threads kept)",
                self.admitted as u64,
                (self.slots.len() + self.kept) as u64,
            ));
        }
        for (i, r) in self.rules.iter().enumerate() {
            let kept: usize = r.jobs.values().map(|q| q.kept).sum();
            let n = self.slots.values().filter(|s| s.rule == i).count() + kept;
            if n != r.admitted {
                return Err(("a rule's admitted requests", r.admitted as u64, n as u64));
            }
        }
        Ok(())
    }
}
