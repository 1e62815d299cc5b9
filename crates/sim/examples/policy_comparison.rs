//! Replays one mixed workload through every registered policy on the disk-like and the flash-like
//! device models and prints throughput and queue waits as a Markdown table (BENCHMARKS.md).
//!
//! `cargo run --release -p iosets-sim --example policy_comparison`
//!
//! The workload: 8 jobs, 64 KiB requests, Poisson arrivals at 15 requests/s per job (120/s in all,
//! about what the disk model serves when every request seeks): jobs 1-2 read sequentially (own file),
//! 3-4 read at random offsets of one shared 4 GiB file, 5-6 write sequentially (own file), 7-8 write
//! at random offsets of another shared file; 600 requests per job, seed 1. Then the same requests
//! all queued at t = 0 (backlogged), where throughput shows what sorting and merging buy.

use iosets_policy::{registry::POLICIES, tunables::parse_pairs, Counted};
use iosets_sim::summary::{mean, percentile};
use iosets_sim::{run, DeviceModel};
use iosets_types::{FileId, JobId, RequestId};
use iosets_types::{Nanos, Op, Request};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const JOBS: u64 = 8;
const PER_JOB: u64 = 600;
const SIZE: u64 = 65_536;
const RATE_PER_JOB: f64 = 15.0;

fn workload() -> Vec<Request> {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut reqs = Vec::new();
    for job in 1..=JOBS {
        let mut t = 0.0f64;
        for k in 0..PER_JOB {
            t += -(1.0 - rng.gen::<f64>()).ln() / RATE_PER_JOB;
            let (op, file, offset) = match job {
                1 | 2 => (Op::Read, job, k * SIZE),
                3 | 4 => (Op::Read, 3, rng.gen_range(0..65_536) * SIZE),
                5 | 6 => (Op::Write, job, k * SIZE),
                _ => (Op::Write, 7, rng.gen_range(0..65_536) * SIZE),
            };
            let mut r = Request::builder(JobId(job), op)
                .id(RequestId(reqs.len() as u64))
                .file(FileId(file))
                .range(offset, SIZE)
                .build();
            r.arrival = Nanos::from_secs_f64(t);
            reqs.push(r);
        }
    }
    reqs
}

fn ms(n: Nanos) -> f64 {
    n.0 as f64 / 1e6
}

fn main() {
    let poisson = workload();
    let mut backlogged = poisson.clone();
    for r in &mut backlogged {
        r.arrival = Nanos::ZERO;
    }
    for (arrivals, reqs) in [
        ("Poisson, 120 requests/s", poisson),
        ("backlogged at t = 0", backlogged),
    ] {
        println!("\nArrivals: {arrivals}\n");
        table(&reqs);
    }
}

fn table(reqs: &[Request]) {
    println!("| device | policy | throughput MiB/s | makespan s | mean wait ms | p99 wait ms |");
    println!("|---|---|---|---|---|---|");
    for (dev_name, dev) in [("hdd", DeviceModel::hdd()), ("ssd", DeviceModel::ssd())] {
        for spec in POLICIES {
            let policy = Counted::build(spec.name, &parse_pairs::<&str>(&[]).unwrap()).unwrap();
            let r = run(policy, reqs.to_vec(), dev).expect("replay");
            let mut waits: Vec<Nanos> = r.records.iter().map(|x| x.wait()).collect();
            waits.sort_unstable();
            let (mean, p99) = (mean(&waits), percentile(&waits, 0.99));
            println!(
                "| {dev_name} | {} | {:.1} | {:.1} | {:.1} | {:.1} |",
                spec.name,
                r.throughput() / 1_048_576.0,
                r.makespan().as_secs_f64(),
                ms(mean),
                ms(p99)
            );
        }
    }
}
