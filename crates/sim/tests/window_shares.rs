//! Seed 000's sliding-window shares on hand-made dispatch sequences.

use iosets_sim::shares::{window_shares, QueueKey, ShareKey};
use iosets_sim::{RequestRecord, SimError};
use iosets_types::{ClassId, JobId, Nanos, Priority, RequestId};

/// Records in dispatch order: (job, bytes, arrival ns); dispatch time = index × 10 ns.
fn records(seq: &[(u64, u64, u64)]) -> Vec<RequestRecord> {
    seq.iter()
        .enumerate()
        .map(|(i, &(job, bytes, arrival))| RequestRecord {
            id: RequestId(i as u64),
            job: JobId(job),
            class: (job != 3).then_some(ClassId(job % 2)),
            priority: Priority::new(if job == 1 { 0.5 } else { 0.25 }),
            bytes,
            order: i,
            batch: RequestId(i as u64),
            arrival: Nanos(arrival),
            dispatch: Nanos(i as u64 * 10),
            complete: Nanos(i as u64 * 10 + 5),
        })
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

#[test]
fn shares_of_each_window_by_job() {
    // Jobs 1 and 2 alternate 100 and 300 bytes, then job 2 is alone.
    let recs = records(&[
        (1, 100, 0),
        (2, 300, 0),
        (1, 100, 0),
        (2, 300, 0),
        (2, 300, 0),
    ]);
    let s = window_shares(&recs, 2, ShareKey::Job).unwrap();
    assert_eq!(
        s.queues.iter().map(|q| q.queue).collect::<Vec<_>>(),
        vec![QueueKey::Job(JobId(1)), QueueKey::Job(JobId(2))]
    );
    assert_eq!(s.windows.len(), 4);
    let expect = [(0.25, 0.75), (0.25, 0.75), (0.25, 0.75), (0.0, 1.0)];
    for (w, (a, b)) in s.windows.iter().zip(expect) {
        assert!(close(w.shares[0], a) && close(w.shares[1], b), "{w:?}");
        assert_eq!(w.end - w.start, 2);
        assert_eq!(w.time, Nanos((w.end as u64 - 1) * 10));
    }
    // Job 1 drains at index 2; windows [0,2) and [1,3) are backlogged, [2,4) is not (at index 3
    // job 1 has nothing left).
    let flags: Vec<bool> = s.windows.iter().map(|w| w.all_backlogged).collect();
    assert_eq!(flags, vec![true, true, false, false]);
    assert_eq!(
        (s.queues[0].drain_index, s.queues[0].drain_time),
        (2, Nanos(20))
    );
    assert_eq!(
        (
            s.queues[1].drain_index,
            s.queues[1].requests,
            s.queues[1].bytes
        ),
        (4, 3, 900)
    );

    let b = s.backlogged();
    assert_eq!(b[0].windows, 2);
    assert!(close(b[0].mean.unwrap(), 0.25) && close(b[1].mean.unwrap(), 0.75));
    assert!(close(b[0].min.unwrap(), 0.25) && close(b[1].max.unwrap(), 0.75));
    // Dispatches 0..=2 are backlogged: job 1 moved 200 of the 500 bytes.
    assert_eq!(s.busy_dispatches, 3);
    assert!(close(b[0].busy_share.unwrap(), 0.4));
}

#[test]
fn queues_can_be_keyed_by_class_or_priority() {
    let recs = records(&[(1, 100, 0), (2, 100, 0), (3, 200, 0), (1, 100, 0)]);
    let by_class = window_shares(&recs, 4, ShareKey::Class).unwrap();
    let names: Vec<String> = by_class.queues.iter().map(|q| q.queue.column()).collect();
    assert_eq!(names, vec!["class_none", "class_0", "class_1"]);
    assert_eq!(by_class.windows.len(), 1);
    let sh = &by_class.windows[0].shares;
    assert!(
        close(sh[0], 0.4) && close(sh[1], 0.2) && close(sh[2], 0.4),
        "{sh:?}"
    );

    let by_prio = window_shares(&recs, 4, ShareKey::Priority).unwrap();
    let names: Vec<String> = by_prio.queues.iter().map(|q| q.queue.to_string()).collect();
    assert_eq!(names, vec!["priority 0.25", "priority 0.5"]);
    let sh = &by_prio.windows[0].shares;
    assert!(close(sh[0], 0.6) && close(sh[1], 0.4), "{sh:?}");
}

#[test]
fn a_queue_not_yet_arrived_is_not_backlogged() {
    // Job 2's requests arrive at 25 ns: dispatches 0..=2 (at 0, 10, 20) find job 2 absent; at
    // dispatch 5 job 1 has nothing left. Only dispatches 3 and 4 are backlogged.
    let recs = records(&[
        (1, 1, 0),
        (1, 1, 0),
        (1, 1, 0),
        (2, 1, 25),
        (1, 1, 0),
        (2, 1, 25),
    ]);
    let s = window_shares(&recs, 2, ShareKey::Job).unwrap();
    let flags: Vec<bool> = s.windows.iter().map(|w| w.all_backlogged).collect();
    assert_eq!(flags, vec![false, false, false, true, false]);
    assert_eq!(s.busy_dispatches, 2);
}

#[test]
fn fewer_requests_than_a_window_give_no_windows_and_zero_is_refused() {
    let recs = records(&[(1, 1, 0), (2, 1, 0)]);
    assert!(window_shares(&recs, 3, ShareKey::Job)
        .unwrap()
        .windows
        .is_empty());
    assert!(matches!(
        window_shares(&recs, 0, ShareKey::Job),
        Err(SimError::ZeroWindow)
    ));
}
