//! The cost of resolving a FUSE caller's job (`iosets_mount::ident`) on the real `/proc`, for
//! this bench thread's own tid: cold (cache cleared before every call: all sources read), warm
//! (cached, checked by a pidfd poll, the default; alone, and with another thread resolving the
//! same tid at the same time), warm with the start-time check (the fallback
//! for kernels before 6.9 and beyond the pidfd budget), and as baselines measured in the same run
//! a `HashMap` look-up returning the same answer and the pidfd poll alone.
//!
//! Run: `cargo bench -p iosets-mount --bench ident`.

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use iosets_mount::ident::{IdentConfig, JobResolver, Resolved, ReuseCheck};
use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::fs::OFlags;
use rustix::process::{pidfd_open, PidfdFlags};

fn resolver(reuse_check: ReuseCheck) -> JobResolver {
    // The bench process has no job variable, so it resolves to `<comm>.<uid>`: give those
    // answers the full ttl so that the warm runs never expire.
    let ttl = Duration::from_secs(30);
    let cfg = IdentConfig {
        ttl,
        fallback_ttl: ttl,
        reuse_check,
        ..IdentConfig::default()
    };
    JobResolver::new(cfg).unwrap()
}

fn bench_resolve(c: &mut Criterion) {
    let tid = rustix::thread::gettid().as_raw_nonzero().get() as u32;
    let uid = rustix::process::getuid().as_raw();
    let mut group = c.benchmark_group("ident");

    let pidfd_resolver = resolver(ReuseCheck::Pidfd);
    let answer = pidfd_resolver.resolve(tid, uid);
    group.bench_function("baseline_hashmap_get_clone", |b| {
        let map: HashMap<u32, Resolved> = [(tid, answer.clone())].into_iter().collect();
        b.iter(|| map.get(black_box(&tid)).cloned())
    });
    group.bench_function("baseline_pidfd_poll", |b| {
        let thread = PidfdFlags::from_bits_retain(OFlags::EXCL.bits());
        let fd = pidfd_open(rustix::thread::gettid(), thread).unwrap();
        b.iter(|| {
            let mut fds = [PollFd::new(&fd, PollFlags::IN)];
            poll(&mut fds, Some(&Timespec::default())).unwrap()
        })
    });
    group.bench_function("warm_pidfd", |b| {
        b.iter(|| pidfd_resolver.resolve(black_box(tid), uid))
    });
    group.bench_function("warm_pidfd_contended", |b| {
        // Another thread resolves the same tid meanwhile (same shard, same entry), on the
        // other core: what two FUSE threads opening files of one process cost each other.
        let stop = AtomicBool::new(false);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    black_box(pidfd_resolver.resolve(tid, uid));
                }
            });
            b.iter(|| pidfd_resolver.resolve(black_box(tid), uid));
            stop.store(true, Ordering::Relaxed);
        });
    });
    let start_time_resolver = resolver(ReuseCheck::StartTime);
    start_time_resolver.resolve(tid, uid);
    group.bench_function("warm_start_time", |b| {
        b.iter(|| start_time_resolver.resolve(black_box(tid), uid))
    });
    group.bench_function("cold_pidfd", |b| {
        b.iter_batched(
            || pidfd_resolver.clear(),
            |()| pidfd_resolver.resolve(black_box(tid), uid),
            BatchSize::PerIteration,
        )
    });
    group.finish();

    for (name, resolver) in [
        ("pidfd", &pidfd_resolver),
        ("start_time", &start_time_resolver),
    ] {
        eprintln!("{name}: answer {answer:?}; {:?}", resolver.stats());
    }
}

criterion_group!(benches, bench_resolve);
criterion_main!(benches);
