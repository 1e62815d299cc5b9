//! The device model by hand: exact completion times for small cases (bandwidth 1 byte/ns so that
//! bytes and nanoseconds coincide).

use iosets_policy::Counted;
use iosets_sim::{run, DeviceModel, RequestRecord};
use iosets_types::{FileId, JobId, RequestId};
use iosets_types::{Nanos, Op, Request};

/// 1e9 bytes/s = 1 byte per nanosecond.
const ONE_BYTE_PER_NS: f64 = 1e9;

fn req(id: u64, len: u64, arrival: u64) -> Request {
    let mut r = Request::builder(JobId(id), Op::Write)
        .id(RequestId(id))
        .file(FileId(id))
        .range(0, len)
        .build();
    r.arrival = Nanos(arrival);
    r
}

/// Replays `(len, arrival)` requests in arrival order (noop) and returns (dispatch, complete) of
/// each, by request id.
fn times(reqs: &[(u64, u64)], latency: u64, slots: usize) -> Vec<(u64, u64)> {
    let device = DeviceModel::new(ONE_BYTE_PER_NS, Nanos(latency), slots).unwrap();
    let workload = reqs
        .iter()
        .enumerate()
        .map(|(i, &(len, at))| req(i as u64, len, at))
        .collect();
    let result = run(Counted::build("noop", &[]).unwrap(), workload, device).unwrap();
    let mut recs: Vec<RequestRecord> = result.records.clone();
    recs.sort_by_key(|r| r.id);
    recs.iter().map(|r| (r.dispatch.0, r.complete.0)).collect()
}

#[test]
fn one_request_alone_gets_the_full_bandwidth() {
    assert_eq!(times(&[(1000, 0)], 0, 1), vec![(0, 1000)]);
    assert_eq!(times(&[(1000, 0)], 0, 4), vec![(0, 1000)]);
}

#[test]
fn one_mib_at_one_mib_per_second_takes_one_second() {
    let device = DeviceModel::new(1_048_576.0, Nanos::ZERO, 1).unwrap();
    let w = vec![req(1, 1_048_576, 0)];
    let r = run(Counted::build("noop", &[]).unwrap(), w, device).unwrap();
    assert_eq!(r.records[0].complete, Nanos(1_000_000_000));
    assert_eq!(r.makespan(), Nanos(1_000_000_000));
    assert!((r.throughput() - 1_048_576.0).abs() < 1e-6);
}

#[test]
fn two_concurrent_requests_share_the_bandwidth() {
    // Equal: each gets half, both end at 2000.
    assert_eq!(
        times(&[(1000, 0), (1000, 0)], 0, 2),
        vec![(0, 2000), (0, 2000)]
    );
    // Unequal: the small one ends at 2000 (1000 bytes at half rate), the big one moved 1000 by
    // then and moves its last 2000 alone: 4000.
    assert_eq!(
        times(&[(1000, 0), (3000, 0)], 0, 2),
        vec![(0, 2000), (0, 4000)]
    );
    // Staggered: A alone for 500 ns (500 bytes), then both at half rate: A's last 500 bytes take
    // 1000 ns (ends 1500); B has 500 bytes left and ends alone at 2000.
    assert_eq!(
        times(&[(1000, 0), (1000, 500)], 0, 2),
        vec![(0, 1500), (500, 2000)]
    );
}

#[test]
fn latency_adds_to_every_batch() {
    assert_eq!(times(&[(1000, 0)], 500, 1), vec![(0, 1500)]);
    // In series: each pays its latency.
    assert_eq!(
        times(&[(1000, 0), (1000, 0)], 100, 1),
        vec![(0, 1100), (1100, 2200)]
    );
    // In parallel: both wait 500 ns, then share the bandwidth.
    assert_eq!(
        times(&[(1000, 0), (1000, 0)], 500, 2),
        vec![(0, 2500), (0, 2500)]
    );
    // Both wait their latency in parallel, then share: A's 100 bytes at half rate end at 1200;
    // B has moved 100 bytes by then and moves its last 900 alone, ending at 2100.
    assert_eq!(
        times(&[(100, 0), (1000, 0)], 1000, 2),
        vec![(0, 1200), (0, 2100)]
    );
}

#[test]
fn slots_limit_concurrency() {
    // One slot: strictly one after the other.
    assert_eq!(
        times(&[(1000, 0), (1000, 0), (1000, 0)], 0, 1),
        vec![(0, 1000), (1000, 2000), (2000, 3000)]
    );
    // Two slots, three requests: two share until 2000, the third then runs alone.
    assert_eq!(
        times(&[(1000, 0), (1000, 0), (1000, 0)], 0, 2),
        vec![(0, 2000), (0, 2000), (2000, 3000)]
    );
    // Three slots: all three share, each at a third.
    assert_eq!(
        times(&[(1000, 0), (1000, 0), (1000, 0)], 0, 3),
        vec![(0, 3000), (0, 3000), (0, 3000)]
    );
}

#[test]
fn an_idle_device_waits_for_the_next_arrival() {
    assert_eq!(
        times(&[(1000, 0), (1000, 10_000)], 0, 1),
        vec![(0, 1000), (10_000, 11_000)]
    );
}

#[test]
fn total_work_is_conserved_under_sharing() {
    // Whatever the overlap, a busy device moves `bandwidth` bytes per second: 4 requests of 1000
    // bytes, all at 0, 2 slots, no latency: the last completion is at 4000.
    let t = times(&[(1000, 0), (1000, 0), (1000, 0), (1000, 0)], 0, 2);
    assert_eq!(t.iter().map(|x| x.1).max(), Some(4000));
}

#[test]
fn a_batch_in_its_latency_phase_takes_no_bandwidth() {
    // A (2000 bytes) starts at 0 and transfers alone from 100; B arrives at 1100 and waits its
    // latency until 1200. A moved 1100 bytes by then, shares from 1200: its last 900 bytes take
    // 1800 ns (ends 3000); B moved 900 of its 1000 by then and ends alone at 3100.
    assert_eq!(
        times(&[(2000, 0), (1000, 1100)], 100, 2),
        vec![(0, 3000), (1100, 3100)]
    );
}
