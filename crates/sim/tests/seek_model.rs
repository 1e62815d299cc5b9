//! The seek-aware device: exact seek costs on hand cases, and seed 002's observation — sorting and
//! merging pay on a disk, and make no difference on flash.

use iosets_policy::{tunables::parse_pairs, Counted};
use iosets_sim::{run, DeviceModel, SeekModel};
use iosets_types::{FileId, Nanos, Op, Request};
use iosets_types::{JobId, RequestId};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn policy(name: &str, opts: &[&str]) -> Counted {
    Counted::build(name, &parse_pairs(opts).unwrap()).unwrap()
}

#[test]
fn seek_cost_is_distance_within_a_file_and_full_between_files() {
    let s = SeekModel {
        per_gib: Nanos::from_millis(8),
        max: Nanos::from_millis(8),
    };
    let f = FileId(1);
    assert_eq!(
        s.cost(None, (f, 0)),
        Nanos::from_millis(8),
        "no known head: full seek"
    );
    assert_eq!(s.cost(Some((f, 100)), (f, 100)), Nanos::ZERO);
    assert_eq!(s.cost(Some((f, 0)), (f, 512 << 20)), Nanos::from_millis(4));
    assert_eq!(
        s.cost(Some((f, 3 << 30)), (f, 0)),
        Nanos::from_millis(8),
        "capped"
    );
    assert_eq!(s.cost(Some((FileId(2), 0)), (f, 0)), Nanos::from_millis(8));
}

#[test]
fn a_replay_pays_the_seek_to_each_batch_start() {
    // 1 byte/ns, no latency, 1 slot; seeks of 1 ms per GiB up to 10 ms.
    let dev = DeviceModel::new(1e9, Nanos::ZERO, 1)
        .unwrap()
        .with_seek(SeekModel {
            per_gib: Nanos::from_millis(1),
            max: Nanos::from_millis(10),
        });
    let reqs = vec![
        Request::builder(JobId(1), Op::Read)
            .id(RequestId(1))
            .file(FileId(1))
            .range(0, 1000)
            .build(),
        Request::builder(JobId(1), Op::Read)
            .id(RequestId(2))
            .file(FileId(1))
            .range(1000, 1000)
            .build(), // contiguous: no seek
        Request::builder(JobId(1), Op::Read)
            .id(RequestId(3))
            .file(FileId(1))
            .range(1 << 30, 1000)
            .build(), // ~1 GiB away: ~1 ms
    ];
    let r = run(policy("noop", &[]), reqs, dev).unwrap();
    let done: Vec<u64> = r.records.iter().map(|x| x.complete.0).collect();
    let first = 10_000_000 + 1000; // full seek (no head yet) + transfer
    let second = first + 1000;
    let third = second + 1_000_000 - 1 + 1000; // distance 2^30 - 2000 bytes ≈ 1 ms
    assert_eq!(done[0], first);
    assert_eq!(done[1], second);
    assert!(
        (done[2] as i64 - third as i64).abs() <= 2,
        "{} vs {third}",
        done[2]
    );
}

/// Random 64 KiB reads over 4 files of 4 GiB by 8 jobs, all queued at once.
fn random_reads(n: u64) -> Vec<Request> {
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    (0..n)
        .map(|i| {
            let file = rng.gen_range(1..=4);
            Request::builder(JobId(rng.gen_range(1..=8)), Op::Read)
                .id(RequestId(i))
                .file(FileId(file))
                .range(rng.gen_range(0..65_536) * 65_536, 65_536)
                .build()
        })
        .collect()
}

#[test]
fn sorting_pays_on_a_disk_and_not_on_flash() {
    let reqs = random_reads(4000);
    let thr = |p: Counted, dev| run(p, reqs.clone(), dev).unwrap().throughput();
    let (noop_hdd, elevator_hdd) = (
        thr(policy("noop", &[]), DeviceModel::hdd()),
        thr(policy("elevator", &[]), DeviceModel::hdd()),
    );
    assert!(
        elevator_hdd > 3.0 * noop_hdd,
        "hdd: elevator {elevator_hdd:.0} B/s vs noop {noop_hdd:.0}"
    );
    // Sorting alone (no merging) makes no difference on flash, and still pays on the disk.
    let noop_ssd = thr(policy("noop", &[]), DeviceModel::ssd());
    let sorted_ssd = thr(
        policy("elevator", &["max_merge_bytes=0"]),
        DeviceModel::ssd(),
    );
    let ratio = sorted_ssd / noop_ssd;
    assert!(
        (0.97..=1.03).contains(&ratio),
        "ssd: sorted/noop = {ratio:.3}"
    );
    let sorted_hdd = thr(
        policy("elevator", &["max_merge_bytes=0"]),
        DeviceModel::hdd(),
    );
    assert!(
        sorted_hdd > 3.0 * noop_hdd,
        "hdd: sorting alone {sorted_hdd:.0} vs noop {noop_hdd:.0}"
    );
}
