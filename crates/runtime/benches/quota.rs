//! What the quota gate costs per request, against the same scheduler without it, in one run.
//!
//! `cargo bench -p iosets-runtime --bench quota`. Each iteration is one whole cycle of one
//! request (submit, take, complete) with the `noop` policy, the runtime's cheapest path, and
//! 64 jobs taking turns:
//! - `cycle/no_quota`: no rules (the baseline);
//! - `cycle/threads_1_rule`: one thread-quota rule governing every request (seed 003's setting);
//! - `cycle/threads_16_rules`: 16 rules, the request matching the last (classification tries
//!   the rules in order: the cost grows with the rules before the one that matches);
//! - `cycle/rate_1_rule`: one rule with an ops/s and a bytes/s bucket per job (far above the
//!   offered load, so nothing waits: the cost of the bookkeeping, not of waiting).

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use iosets_runtime::quota::{Match, QuotaConfig, RuleSpec};
use iosets_runtime::{Clock, Counted, Next, Origin, Scheduler};
use iosets_types::{FileId, JobId, Nanos, Op, Outcome, Request};

/// A clock moved by the benchmark: 10 µs per request.
#[derive(Default)]
struct Ticks(AtomicU64);

impl Clock for Ticks {
    fn now(&self) -> Nanos {
        Nanos(self.0.load(Ordering::Relaxed))
    }
}

fn scheduler(quota: Option<QuotaConfig>) -> (Scheduler<u64>, Arc<Ticks>) {
    let clock = Arc::new(Ticks::default());
    let sched = Scheduler::with_clock(Counted::build("noop", &[]).unwrap(), clock.clone());
    sched.set_service_threads(24).unwrap();
    sched.set_quota(quota).unwrap();
    (sched, clock)
}

fn rules(n: usize, threads: bool, rates: bool) -> QuotaConfig {
    let rules = (0..n)
        .map(|i| {
            // Rules before the last match jobs the benchmark never sends.
            let m = if i + 1 == n {
                Match::all()
            } else {
                Match::parse(&format!("job={}", 1_000_000 + i)).unwrap()
            };
            let mut r = RuleSpec::new(format!("r{i}"), m);
            if threads {
                r.threads_pct = Some(if i + 1 == n { 50.0 } else { 1.0 });
            }
            if rates {
                r.rate_ops = Some(1e12);
                r.rate_bytes = Some(1e15);
            }
            r
        })
        .collect();
    QuotaConfig {
        rules,
        ..QuotaConfig::default()
    }
}

fn cycle(c: &mut Criterion) {
    let mut g = c.benchmark_group("cycle");
    let cases: [(&str, Option<QuotaConfig>); 4] = [
        ("no_quota", None),
        ("threads_1_rule", Some(rules(1, true, false))),
        ("threads_16_rules", Some(rules(16, true, false))),
        ("rate_1_rule", Some(rules(1, false, true))),
    ];
    for (name, quota) in cases {
        let (sched, clock) = scheduler(quota);
        let origin = Origin::default();
        let mut i = 0u64;
        g.bench_function(name, |b| {
            b.iter(|| {
                i += 1;
                clock.0.fetch_add(10_000, Ordering::Relaxed);
                let req = Request::builder(JobId(i % 64), Op::Other)
                    .file(FileId(i % 64))
                    .range(0, 4096)
                    .build();
                sched.submit_from(req, &origin, i).unwrap();
                match sched.try_next() {
                    Next::Work(w) => {
                        black_box(w.payloads());
                        w.complete(Outcome::Done { bytes: 0 });
                    }
                    _ => panic!("a request under quota was not handed out"),
                }
            })
        });
        sched.check_balance().unwrap();
    }
    g.finish();
}

criterion_group!(benches, cycle);
criterion_main!(benches);
