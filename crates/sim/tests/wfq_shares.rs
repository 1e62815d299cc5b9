//! Seed 000's test of weighted fair queuing: 4 queues with weights 1:2:3:4 replayed through `wfq`
//! get 10/20/30/40% of the bytes (±2 points) in every 300-request window where all 4 are
//! backlogged; as queues drain, the others take their share.

use iosets_policy::tunables::parse_pairs;
use iosets_policy::Counted;
use iosets_sim::shares::{window_shares, QueueKey, ShareKey};
use iosets_sim::workload::{Sizes, WorkloadSpec};
use iosets_sim::{expected_weights, run, DeviceModel, Summary};
use iosets_types::{JobId, Nanos};

fn replay(spec: &WorkloadSpec, slots: usize) -> (iosets_sim::ReplayResult, Vec<(String, String)>) {
    let pairs = parse_pairs(&["weight.1=1", "weight.2=2", "weight.3=3", "weight.4=4"]).unwrap();
    let policy = Counted::build("wfq", &pairs).unwrap();
    let device = DeviceModel::new(1024.0 * 1_048_576.0, Nanos::from_micros(20), slots).unwrap();
    (
        run(policy, spec.generate().unwrap(), device).unwrap(),
        pairs,
    )
}

fn check_shares(spec: WorkloadSpec, slots: usize) {
    let (result, pairs) = replay(&spec, slots);
    let shares = window_shares(&result.records, 300, ShareKey::Job).unwrap();
    let busy: Vec<_> = shares.windows.iter().filter(|w| w.all_backlogged).collect();
    assert!(busy.len() > 100, "only {} backlogged windows", busy.len());
    for w in &busy {
        for (q, expect) in [0.1, 0.2, 0.3, 0.4].into_iter().enumerate() {
            let got = w.shares[q];
            assert!(
                (got - expect).abs() <= 0.02,
                "window [{}, {}): job {} got {:.2}%, expected {:.0}% ± 2",
                w.start,
                w.end,
                q + 1,
                got * 100.0,
                expect * 100.0
            );
        }
    }
    // The summary agrees with the weights and the heaviest queue drains first.
    let weights = expected_weights("wfq", &pairs, ShareKey::Job, &result.records);
    let summary = Summary::new(&result, &shares, &weights);
    for (j, expect) in [(1, 0.1), (2, 0.2), (3, 0.3), (4, 0.4)] {
        let q = summary.queue(QueueKey::Job(JobId(j))).unwrap();
        assert!((q.expected_share.unwrap() - expect).abs() < 1e-12);
        assert!((q.window_mean.unwrap() - expect).abs() < 0.01, "{q:?}");
        assert!((q.busy_share.unwrap() - expect).abs() < 0.01, "{q:?}");
    }
    let drains: Vec<u64> = shares.queues.iter().map(|q| q.drain_time.0).collect();
    assert!(
        drains[3] <= drains[2] && drains[2] <= drains[1] && drains[1] <= drains[0],
        "{drains:?}"
    );
}

#[test]
fn seed_000_setting_one_slot() {
    // Seed 000: 1000 requests of 1 to 1000 bytes attributed at random, window 300.
    check_shares(
        WorkloadSpec {
            seed: 7,
            ..WorkloadSpec::new(4, 1000)
        },
        1,
    );
}

#[test]
fn larger_requests_two_slots() {
    let spec = WorkloadSpec {
        sizes: Sizes::Uniform {
            min: 4096,
            max: 1 << 20,
        },
        seed: 2024,
        ..WorkloadSpec::new(4, 4000)
    };
    check_shares(spec, 2);
}

#[test]
fn when_the_heaviest_queue_drains_the_others_share_by_weight() {
    let spec = WorkloadSpec {
        seed: 11,
        ..WorkloadSpec::new(4, 4000)
    };
    let (result, _) = replay(&spec, 1);
    let shares = window_shares(&result.records, 300, ShareKey::Job).unwrap();
    // Windows entirely after job 4 drained and before job 3 did: 1:2:3 → 1/6, 2/6, 3/6.
    let (d4, d3) = (shares.queues[3].drain_index, shares.queues[2].drain_index);
    let mid: Vec<_> = shares
        .windows
        .iter()
        .filter(|w| w.start > d4 && w.end <= d3)
        .collect();
    assert!(!mid.is_empty());
    for w in mid {
        for (q, expect) in [1.0 / 6.0, 2.0 / 6.0, 3.0 / 6.0].into_iter().enumerate() {
            assert!((w.shares[q] - expect).abs() <= 0.03, "{w:?}");
        }
        assert_eq!(w.shares[3], 0.0);
    }
}
