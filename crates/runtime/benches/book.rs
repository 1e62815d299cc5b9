//! The job book's cost per completed request (issue 13, goal 4: with detection on, at 1,024
//! jobs, it adds at most 100 ns per request), against baselines measured in the same run.
//!
//! `cargo bench -p iosets-runtime --bench book`. Cases, each one request per iteration:
//! - `record/detect_off` and `record/detect_on`: [`JobBook::record`] of a one-request batch;
//! - `cycle/noop`: the whole scheduler cycle (submit, take, complete, which includes the book's
//!   record with detection off) with the `noop` policy, the runtime's cheapest path;
//! - `cycle/noop_detect_on`: the same with automatic priorities on.
//!
//! The workload: 1,024 jobs, each periodic — a burst of `B` contiguous 1 MiB requests of 100 µs
//! every period, periods spread from 1 s to 100 s over the jobs — interleaved in time order, the
//! clock advancing at least 10 µs per request. `B` = 128 is seed 004's high-frequency application
//! (8 processes writing 16 MiB each per phase); `B` = 16 is a stress case (a period estimate
//! costs tens of µs and is amortised over a burst's requests, so small bursts cost the most).

use iosets_types::{FileId, JobId, RequestId};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use iosets_runtime::book::{JobBook, Move};
use iosets_runtime::{BookConfig, Clock, Counted, Scheduler};
use iosets_types::{Batch, Nanos, Op, Outcome, Request};

const JOBS: u64 = 1_024;
const STEP: Nanos = Nanos(10_000);
const SERVICE: Nanos = Nanos(100_000);

/// The request stream: (job, arrival) in time order, long enough to cycle through.
fn stream(len: usize, burst: u64) -> Vec<(u64, Nanos)> {
    // Each job j has period 1 s · 100^(j / JOBS) and starts at a random-ish phase; request k of the
    // stream goes to the job whose burst is due. Simplest faithful form: round-robin over the jobs
    // that are "in a burst", where job j bursts BURST requests every period_j.
    let period = |j: u64| Nanos::from_secs_f64(100f64.powf(j as f64 / JOBS as f64));
    let mut next: Vec<Nanos> = (0..JOBS)
        .map(|j| Nanos((j * 7_919_000_003) % period(j).0))
        .collect();
    let mut out = Vec::with_capacity(len);
    let mut now = Nanos::ZERO;
    let mut left = vec![0u64; JOBS as usize];
    while out.len() < len {
        // The job whose burst is due first (a linear scan: this is set-up, not measured).
        let (j, at) = next
            .iter()
            .enumerate()
            .min_by_key(|(_, t)| **t)
            .map(|(j, t)| (j as u64, *t))
            .expect("jobs");
        now = now.max(at) + STEP;
        out.push((j, now));
        let jl = &mut left[j as usize];
        if *jl == 0 {
            *jl = burst;
        }
        *jl -= 1;
        next[j as usize] = if *jl == 0 {
            at + period(j)
        } else {
            now + SERVICE
        };
    }
    out
}

fn batch(job: u64, arrival: Nanos, n: u64) -> Batch {
    let mut r = Request::builder(JobId(job), Op::Write)
        .id(RequestId(n))
        .file(FileId(job))
        .range(n << 20, 1 << 20)
        .build();
    r.arrival = arrival;
    Batch::single(r)
}

/// Records in `book` request `n` of `job` ([`batch`]) as served at once from `at` for
/// [`SERVICE`]; returns the moves it made.
fn serve(book: &JobBook, job: u64, at: Nanos, n: u64) -> Vec<Move> {
    book.record(
        &batch(job, at, n),
        Outcome::Done { bytes: 1 << 20 },
        at,
        at + SERVICE,
        "noop",
    )
}

fn record(c: &mut Criterion) {
    let mut group = c.benchmark_group("record");
    for (name, auto, burst) in [
        ("detect_off", false, 128),
        ("detect_on_burst128", true, 128),
        ("detect_on_burst16", true, 16),
    ] {
        let events = stream(1 << 20, burst);
        let book = JobBook::new(BookConfig::default().auto_priority(auto));
        // Warm the book: every job known, detectors with history.
        let mut i = 0usize;
        for _ in 0..(1 << 18) {
            let (job, at) = events[i % events.len()];
            serve(&book, job, at, i as u64);
            i += 1;
        }
        // Time keeps moving forward across the cycles through the stream.
        let lap = events.last().expect("events").1 + Nanos::from_secs_f64(100.0);
        group.bench_function(name, |b| {
            b.iter(|| {
                let k = i % events.len();
                let shift = Nanos(lap.0 * (i / events.len()) as u64);
                let (job, at) = events[k];
                let at = at + shift;
                let moves = serve(&book, job, at, i as u64);
                i += 1;
                black_box(moves)
            })
        });
    }
    group.finish();
}

/// A clock the benchmark moves: the stream's time.
#[derive(Default)]
struct StreamClock(AtomicU64);

impl Clock for StreamClock {
    fn now(&self) -> Nanos {
        Nanos(self.0.load(Ordering::Relaxed))
    }
}

fn cycle(c: &mut Criterion) {
    let events = stream(1 << 20, 128);
    let mut group = c.benchmark_group("cycle");
    for (name, auto) in [("noop", false), ("noop_detect_on_burst128", true)] {
        let clock = Arc::new(StreamClock::default());
        let sched: Scheduler<u64> = Scheduler::with_book(
            Counted::build("noop", &[]).expect("registered"),
            clock.clone(),
            BookConfig::default().auto_priority(auto),
        );
        let mut i = 0usize;
        let lap = events.last().expect("events").1 + Nanos::from_secs_f64(100.0);
        let step = |i: usize| {
            let k = i % events.len();
            let (job, at) = events[k];
            let at = at + Nanos(lap.0 * (i / events.len()) as u64);
            clock.0.store(at.0, Ordering::Relaxed);
            sched
                .submit(
                    Request::builder(JobId(job), Op::Write)
                        .file(FileId(job))
                        .range(0, 1 << 20)
                        .build(),
                    i as u64,
                )
                .expect("open");
            let work = sched.try_next().work().expect("noop serves at once");
            clock.0.store((at + SERVICE).0, Ordering::Relaxed);
            black_box(work.complete(Outcome::Done { bytes: 1 << 20 }));
        };
        for _ in 0..(1 << 18) {
            step(i);
            i += 1;
        }
        group.bench_function(name, |b| {
            b.iter(|| {
                step(i);
                i += 1;
            })
        });
    }
    group.finish();
}

criterion_group!(benches, record, cycle);
criterion_main!(benches);
