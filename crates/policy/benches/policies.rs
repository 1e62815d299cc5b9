//! Cost of one enqueue + dispatch (+ the completion that frees the request) with 10,000 requests
//! queued, spread over 1, 64 or 1,024 active jobs, for every core policy. `noop` is the baseline
//! measured in the same run; BENCHMARKS.md reports the ratios.
//!
//! `cargo bench -p iosets-policy --bench policies`

use iosets_types::{FileId, JobId, RequestId};
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use iosets_policy::{Counted, Dispatch, Nanos, Op, Outcome, Priority, Request};

const QUEUED: u64 = 10_000;

/// A request of job `i % jobs`; for `iosets`, jobs fall into sets 0.1 and 0.01 or a set of their own.
fn request(i: u64, jobs: u64) -> Request {
    let job = (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 17) % jobs;
    let mut r = Request::builder(JobId(job), Op::Write)
        .id(RequestId(i))
        .file(FileId(job))
        .range(i * 4096, 4096 + (i % 7) * 512)
        .build();
    r.priority = match job % 3 {
        0 => Priority::new(0.1),
        1 => Priority::new(0.01),
        _ => None,
    };
    r
}

fn setup(name: &str, opts: &[&str], jobs: u64) -> (Counted, u64) {
    let pairs = iosets_policy::tunables::parse_pairs(opts).unwrap();
    let mut p = Counted::build(name, &pairs).unwrap();
    for i in 0..QUEUED {
        p.enqueue(request(i, jobs), Nanos(i * 1000));
    }
    (p, QUEUED)
}

/// One measured step: enqueue request `next` at `now`, dispatch, complete what was dispatched.
fn cycle(p: &mut Counted, next: u64, jobs: u64, now: Nanos) {
    p.enqueue(request(next, jobs), now);
    if let Dispatch::Ready(batch) = p.dispatch(now) {
        let id = batch.id();
        let bytes = black_box(batch).bytes();
        p.complete(id, Outcome::Done { bytes }, now).unwrap();
    }
}

fn enqueue_dispatch(c: &mut Criterion) {
    let mut g = c.benchmark_group("enqueue_dispatch_10k_queued");
    g.measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1));
    let policies: &[(&str, &[&str])] = &[
        ("noop", &[]),
        ("timeorder", &["merge=true"]),
        ("wfq", &[]),
        ("iosets", &[]),
    ];
    for &jobs in &[1u64, 64, 1024] {
        for &(name, opts) in policies {
            let (mut p, mut next) = setup(name, opts, jobs);
            g.bench_with_input(BenchmarkId::new(name, jobs), &jobs, |b, &jobs| {
                b.iter(|| {
                    cycle(&mut p, next, jobs, Nanos(next));
                    next += 1;
                });
            });
            assert!(p.check_balance().is_ok());
        }
    }
    g.finish();
}

/// Every registered policy at 64 jobs, 10,000 queued; time advances 1 µs per request so that
/// time-based policies (slices, windows, expiries) run through their cycles. `cfq` runs without its
/// idle window (`slice_idle_ms=0`): with completions at once the window would only stall the loop.
fn every_policy(c: &mut Criterion) {
    let mut g = c.benchmark_group("every_policy_10k_queued_64_jobs");
    g.measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500));
    for spec in iosets_policy::registry::POLICIES {
        let opts: &[&str] = if spec.name == "cfq" {
            &["slice_idle_ms=0"]
        } else {
            &[]
        };
        let (mut p, mut next) = setup(spec.name, opts, 64);
        g.bench_function(BenchmarkId::new(spec.name, 64), |b| {
            b.iter(|| {
                cycle(&mut p, next, 64, Nanos(next * 1000));
                next += 1;
            });
        });
        assert!(p.check_balance().is_ok());
        assert!(
            p.queued() < 2 * QUEUED as usize,
            "{} fell behind: {} queued",
            spec.name,
            p.queued()
        );
    }
    g.finish();
}

/// Completions are done after this many requests, outside the timed region. One: holding
/// completions back blocks `iosets`' sets (exclusivity waits for them), its dispatches then answer
/// `Idle` cheaply and the queue grows — a flattering, unfaithful measure.
const COMPLETE_EVERY: u64 = 1;

/// Exactly the measure: the time of enqueue + dispatch per request, the completion done
/// outside the timed region right after. Each sample includes one `Instant::now()` pair (a few tens
/// of ns), so this errs on the slow side; `enqueue_dispatch` above times the completion too.
fn enqueue_dispatch_only(c: &mut Criterion) {
    let mut g = c.benchmark_group("enqueue_dispatch_only_10k_queued");
    g.measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1));
    for &jobs in &[1u64, 64, 1024] {
        for name in ["noop", "wfq", "iosets"] {
            let (mut p, mut next) = setup(name, &[], jobs);
            let mut done = Vec::with_capacity(COMPLETE_EVERY as usize);
            g.bench_with_input(BenchmarkId::new(name, jobs), &jobs, |b, &jobs| {
                b.iter_custom(|iters| {
                    let mut timed = Duration::ZERO;
                    let mut left = iters;
                    while left > 0 {
                        let n = left.min(COMPLETE_EVERY);
                        let start = Instant::now();
                        for _ in 0..n {
                            let now = Nanos(next);
                            p.enqueue(request(next, jobs), now);
                            next += 1;
                            if let Dispatch::Ready(batch) = p.dispatch(now) {
                                done.push((batch.id(), black_box(batch).bytes()));
                            }
                        }
                        timed += start.elapsed();
                        for (id, bytes) in done.drain(..) {
                            p.complete(id, Outcome::Done { bytes }, Nanos(next))
                                .unwrap();
                        }
                        left -= n;
                    }
                    timed
                });
            });
            assert!(p.check_balance().is_ok());
            assert!(
                p.queued() < 2 * QUEUED as usize,
                "{name} fell behind: {} queued",
                p.queued()
            );
        }
    }
    g.finish();
}

/// The fair-share tree against flat WFQ and flat IO-SETS (issue 31): 1,024 jobs of 32 users in 8
/// accounts, 10,000 requests queued, one enqueue + dispatch + completion per step; `wfq/flat`
/// and `iosets/flat` are the baselines of the same run.
///
/// `cargo bench -p iosets-policy --bench policies -- fairshare`
fn fairshare(c: &mut Criterion) {
    use iosets_policy::fairshare::{account_key, JobInfo};
    const JOBS: u64 = 1024;
    let mut g = c.benchmark_group("fairshare_10k_queued_1024_jobs");
    g.measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1));
    let with_user = |i: u64| {
        let mut r = request(i, JOBS);
        r.user = Some((r.job.0 % 32) as u32);
        r
    };
    for (policy, label, key) in [
        ("wfq", "flat", "job"),
        ("wfq", "user-then-job", "user-then-job"),
        ("wfq", "account-user-job", "account,user,job"),
        ("iosets", "flat", "set"),
        ("iosets", "account-set", "account,set"),
        ("iosets", "account-user-set", "account,user,set"),
    ] {
        let pairs = iosets_policy::tunables::parse_pairs(&[format!("key={key}")]).unwrap();
        let mut p = Counted::build(policy, &pairs).unwrap();
        for job in 0..JOBS {
            let info = JobInfo {
                account: Some(account_key(&format!("account{}", job % 8))),
                nodes: None,
            };
            p.set_job_info(JobId(job), info, Nanos::ZERO);
        }
        for i in 0..QUEUED {
            p.enqueue(with_user(i), Nanos(i * 1000));
        }
        let mut next = QUEUED;
        g.bench_function(BenchmarkId::new(policy, label), |b| {
            b.iter(|| {
                let now = Nanos(next);
                p.enqueue(with_user(next), now);
                if let Dispatch::Ready(batch) = p.dispatch(now) {
                    let id = batch.id();
                    let bytes = black_box(batch).bytes();
                    p.complete(id, Outcome::Done { bytes }, now).unwrap();
                }
                next += 1;
            });
        });
        assert!(p.check_balance().is_ok());
    }
    g.finish();
}

criterion_group!(
    benches,
    enqueue_dispatch,
    enqueue_dispatch_only,
    every_policy,
    fairshare
);
criterion_main!(benches);
