//! Runtime throughput: 4 producer threads and 4 worker threads push `N` requests through one
//! `Scheduler` with trivial work, for `noop` (the baseline), `wfq` and `iosets`. Requests are spread
//! over 64 jobs; for `iosets` the jobs carry priority hints of four sets. Reported as requests/s.
//!
//! `cargo bench -p iosets-runtime --bench throughput`; `bash bench/run.sh runtime` prints the table
//! with each policy's ratio to `noop` from the same run.

use iosets_types::{FileId, JobId};
use std::hint::black_box;
use std::thread;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use iosets_runtime::{Counted, Scheduler};
use iosets_types::{Op, Outcome, Priority, Request};

const PRODUCERS: u64 = 4;
const WORKERS: usize = 4;
const JOBS: u64 = 64;
const N: u64 = 200_000;

/// Pushes `N` requests through a fresh scheduler running `policy` and waits for the last completion.
fn run(policy: &str) {
    let sched: Scheduler<u64> = Scheduler::new(Counted::build(policy, &[]).expect("registered"));
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let sched = sched.clone();
            thread::spawn(move || {
                while let Some(work) = sched.next() {
                    black_box(work.payloads());
                    let bytes = work.batch().bytes();
                    work.complete(Outcome::Done { bytes });
                }
            })
        })
        .collect();
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let sched = sched.clone();
            thread::spawn(move || {
                for i in 0..N / PRODUCERS {
                    let n = p * (N / PRODUCERS) + i;
                    let job = n % JOBS;
                    let mut r = Request::builder(JobId(job), Op::Write)
                        .file(FileId(job))
                        .range(n * 4096, 4096)
                        .build();
                    // Four sets by hint (priorities 1, 0.1, 0.01, 0.001); noop and wfq ignore it.
                    r.priority = Priority::new(10f64.powi(-((job % 4) as i32)));
                    sched.submit(r, n).expect("not shut down");
                }
            })
        })
        .collect();
    for p in producers {
        p.join().expect("producer");
    }
    sched.shutdown();
    for w in workers {
        w.join().expect("worker");
    }
    debug_assert!(sched.check_balance().is_ok());
}

fn throughput(c: &mut Criterion) {
    let mut group = c.benchmark_group("runtime_throughput");
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(4));
    group.throughput(Throughput::Elements(N));
    for policy in ["noop", "wfq", "iosets"] {
        group.bench_with_input(BenchmarkId::new(policy, N), policy, |b, policy| {
            b.iter(|| run(policy))
        });
    }
    group.finish();
}

criterion_group!(benches, throughput);
criterion_main!(benches);
