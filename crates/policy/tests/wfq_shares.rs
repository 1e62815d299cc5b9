//! Weighted fair queuing shares: seed 000's scenarios (sliding windows of 300 requests), the
//! hand-off of an emptied queue's share, a lone queue, 1%/99% weights, and heavy-tailed sizes from
//! 4 KiB to 4 MiB checked against the exact fluid share.

use crate::common;

use common::{drain_backlog, policy};
use iosets_policy::{Counted, Op, Request};
use rand::distributions::{Distribution, Uniform};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// `n` requests assigned uniformly at random to jobs `1..=queues`, sizes from `size`.
fn random_requests(
    seed: u64,
    n: usize,
    queues: u64,
    mut size: impl FnMut(&mut ChaCha8Rng) -> u64,
) -> Vec<Request> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut offsets = vec![0u64; queues as usize + 1];
    (0..n)
        .map(|i| {
            let job = rng.gen_range(1..=queues);
            let len = size(&mut rng);
            let off = offsets[job as usize];
            offsets[job as usize] += len;
            common::request(i as u64, job, Op::Write, job, off, len)
        })
        .collect()
}

/// A `wfq` policy whose queue `i + 1` has weight `weights[i]`.
fn wfq(weights: &[f64]) -> Counted {
    let opts: Vec<String> = weights
        .iter()
        .enumerate()
        .map(|(i, w)| format!("weight.{}={w}", i + 1))
        .collect();
    policy("wfq", &opts.iter().map(String::as_str).collect::<Vec<_>>())
}

/// For every window of `n` consecutive dispatched requests: the byte share of each job `1..=queues`
/// and, per job, `Some(true)` if it is backlogged through the whole window (it has requests after
/// it), `Some(false)` if it drained before the window, `None` if it drained inside it.
fn windows(order: &[Request], n: usize, queues: usize) -> Vec<(Vec<f64>, Vec<Option<bool>>)> {
    let mut last = vec![0usize; queues + 1];
    for (i, r) in order.iter().enumerate() {
        last[r.job.0 as usize] = i;
    }
    (0..=order.len().saturating_sub(n))
        .map(|a| {
            let mut bytes = vec![0f64; queues + 1];
            for r in &order[a..a + n] {
                bytes[r.job.0 as usize] += r.len as f64;
            }
            let total: f64 = bytes.iter().sum();
            let shares = (1..=queues).map(|q| bytes[q] / total).collect();
            let backlogged = (1..=queues)
                .map(|q| match last[q] {
                    l if l >= a + n => Some(true),
                    l if l < a => Some(false),
                    _ => None,
                })
                .collect();
            (shares, backlogged)
        })
        .collect()
}

/// Checks every window whose backlogged set is exactly `set` (1-based job flags): shares within
/// `tol` of the weights normalised over that set. Returns how many windows were checked.
fn check_windows(order: &[Request], weights: &[f64], set: &[bool], n: usize, tol: f64) -> usize {
    let total: f64 = weights
        .iter()
        .zip(set)
        .filter(|(_, &b)| b)
        .map(|(w, _)| w)
        .sum();
    let mut checked = 0;
    for (i, (shares, backlogged)) in windows(order, n, weights.len()).iter().enumerate() {
        if backlogged.iter().zip(set).any(|(b, s)| *b != Some(*s)) {
            continue;
        }
        checked += 1;
        for q in 0..weights.len() {
            if set[q] {
                let want = weights[q] / total;
                assert!(
                    (shares[q] - want).abs() <= tol,
                    "window {i}: queue {} share {:.4}, want {want:.4} ± {tol}",
                    q + 1,
                    shares[q]
                );
            }
        }
    }
    checked
}

const SEED000_WEIGHTS: [f64; 4] = [500.0, 1000.0, 1500.0, 2000.0];

#[test]
fn seed000_four_queues_share_10_20_30_40_in_every_window() {
    for seed in 0..20 {
        let reqs = random_requests(seed, 1000, 4, |r| r.gen_range(1..=1000));
        let mut p = wfq(&SEED000_WEIGHTS);
        let order = drain_backlog(&mut p, &reqs);
        let checked = check_windows(&order, &SEED000_WEIGHTS, &[true; 4], 300, 0.02);
        assert!(
            checked > 100,
            "seed {seed}: only {checked} windows with all 4 backlogged"
        );
    }
}

#[test]
fn emptied_queue_share_goes_to_the_others_in_proportion() {
    let reqs = random_requests(7, 10_000, 4, |r| r.gen_range(1..=1000));
    let mut p = wfq(&SEED000_WEIGHTS);
    let order = drain_backlog(&mut p, &reqs);
    // The heaviest queue drains first, then the next: check the 3-, 2- and 1-queue phases.
    let [three, two, one] = [
        ([true, true, true, false], 0.02),
        ([true, true, false, false], 0.02),
        ([true, false, false, false], 0.0),
    ]
    .map(|(set, tol)| check_windows(&order, &SEED000_WEIGHTS, &set, 300, tol));
    assert!(
        three > 100 && two > 100 && one > 100,
        "phases seen: {three} {two} {one}"
    );
}

#[test]
fn one_queue_alone_gets_everything_whatever_its_weight() {
    for w in [0.001, 1.0, 500.0] {
        let reqs = random_requests(3, 10_000, 1, |r| r.gen_range(1..=1000));
        let mut p = wfq(&[w]);
        let order = drain_backlog(&mut p, &reqs);
        let ids: Vec<u64> = order.iter().map(|r| r.id.0).collect();
        assert_eq!(
            ids,
            (0..10_000).collect::<Vec<u64>>(),
            "a lone queue keeps arrival order"
        );
    }
}

#[test]
fn one_percent_against_ninety_nine_percent() {
    let reqs = random_requests(11, 10_000, 2, |r| r.gen_range(1..=1000));
    let mut p = wfq(&[100.0, 9900.0]);
    let order = drain_backlog(&mut p, &reqs);
    let mut checked = 0;
    for (shares, backlogged) in windows(&order, 300, 2) {
        if backlogged[1] == Some(true) {
            checked += 1;
            assert!(
                shares[1] >= 0.98,
                "heavy queue got {:.4} while backlogged",
                shares[1]
            );
        }
    }
    assert!(checked > 4000, "{checked}");
}

/// Bounded Pareto sizes between 4 KiB and 4 MiB (shape 1.1): most requests small, a few 1000×
/// larger.
fn heavy_tailed(r: &mut ChaCha8Rng) -> u64 {
    let (lo, hi, a): (f64, f64, f64) = (4096.0, 4.0 * 1024.0 * 1024.0, 1.1);
    let u: f64 = Uniform::new(0.0, 1.0).sample(r);
    let x = (-(u * hi.powf(a) - u * lo.powf(a) - hi.powf(a)) / (hi.powf(a) * lo.powf(a)))
        .powf(-1.0 / a);
    x.round().clamp(lo, hi) as u64
}

#[test]
fn heavy_tailed_sizes_stay_within_one_request_of_the_fluid_share() {
    let weights = [1.0, 2.0, 3.0, 4.0];
    for seed in 0..5 {
        // Demand in proportion to the weights, so that all four stay backlogged most of the run.
        let mut reqs = random_requests(100 + seed, 20_000, 10, heavy_tailed);
        for r in &mut reqs {
            r.job.0 = match r.job.0 {
                1 => 1,
                2..=3 => 2,
                4..=6 => 3,
                _ => 4,
            };
        }
        let max_len = reqs.iter().map(|r| r.len).max().unwrap() as f64;
        assert!(max_len / reqs.iter().map(|r| r.len).min().unwrap() as f64 > 500.0);
        let mut p = wfq(&weights);
        let order = drain_backlog(&mut p, &reqs);

        // Remaining requests per queue: a queue is backlogged while it has some left.
        let mut left = [0usize; 5];
        for r in &order {
            left[r.job.0 as usize] += 1;
        }
        let mut got = [0f64; 5];
        let mut ideal = [0f64; 5];
        for (k, r) in order.iter().enumerate() {
            let backlogged: Vec<usize> = (1..=4).filter(|&q| left[q] > 0).collect();
            let w: f64 = backlogged.iter().map(|&q| weights[q - 1]).sum();
            for &q in &backlogged {
                ideal[q] += r.len as f64 * weights[q - 1] / w;
            }
            got[r.job.0 as usize] += r.len as f64;
            left[r.job.0 as usize] -= 1;
            for &q in &backlogged {
                let lag = (got[q] - ideal[q]).abs();
                assert!(lag <= max_len, "seed {seed} step {k}: queue {q} is {lag} bytes from its fluid share (max request {max_len})");
            }
        }

        // Byte windows of 256 MiB while all four are backlogged: shares within ±3 points.
        let window = 256.0 * 1024.0 * 1024.0;
        let mut last = [0usize; 5];
        for (i, r) in order.iter().enumerate() {
            last[r.job.0 as usize] = i;
        }
        let all_end = (1..=4).map(|q| last[q]).min().unwrap();
        let mut checked = 0;
        for a in 0..all_end {
            let mut bytes = [0f64; 5];
            let mut total = 0.0;
            let mut b = a;
            while b < all_end && total < window {
                bytes[order[b].job.0 as usize] += order[b].len as f64;
                total += order[b].len as f64;
                b += 1;
            }
            if total < window {
                break;
            }
            checked += 1;
            for q in 1..=4 {
                let share = bytes[q] / total;
                let want = weights[q - 1] / 10.0;
                assert!(
                    (share - want).abs() <= 0.03,
                    "seed {seed} window at {a}: queue {q} share {share:.4}, want {want}"
                );
            }
        }
        assert!(checked > 300, "seed {seed}: only {checked} byte windows");
    }
}
