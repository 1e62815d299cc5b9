//! Invariants of the fluid simulator on random workloads from the paper's generator: the
//! bandwidth in use never exceeds B and is all of B whenever some job is doing I/O (work
//! conservation); every job gets all its I/O volume; stretches are at least 1; without noise and
//! over the whole run, utilization is at most the paper's bound 1 − ω/N; at most one job per set
//! transfers. All of it with and without the servers' bounds on a turn.

use iosets_sim::fluid::generator::{GroupSpec, PaperGenerator};
use iosets_sim::fluid::{simulate, ExclusiveBound, Heuristic, SimOptions, TurnBounds, Window};
use iosets_types::Nanos;

/// The paper's six heuristics, by name, then variants of them: another base, a noisy estimate
/// and the online estimates.
fn heuristics() -> Vec<String> {
    let variants = [
        "set-2",
        "set-10:error=0.5",
        "set-10:online",
        "set-10:online:own",
        "share+priority:online",
        "share+priority:online:own",
    ];
    let paper = Heuristic::PAPER.iter().map(ToString::to_string);
    paper.chain(variants.map(String::from)).collect()
}

fn generator(noise: f64, omega: f64) -> PaperGenerator {
    let g = |name: &str, count, mean: f64, sd: f64| GroupSpec {
        name: name.to_string(),
        count,
        mean,
        sd,
    };
    PaperGenerator {
        bandwidth: 3.0,
        horizon: 2_000.0,
        omega,
        noise,
        window: None,
        groups: vec![
            g("H", 4, 10.0, 3.0),
            g("M", 3, 100.0, 40.0),
            g("L", 2, 1000.0, 100.0),
        ],
    }
}

#[test]
fn bandwidth_is_conserved_and_every_volume_delivered() {
    for seed in 0..6 {
        let w = generator(0.1, 0.9).generate(seed).unwrap();
        let servers = TurnBounds {
            max_exclusive: ExclusiveBound::Auto,
            unknown_hold: Some(Nanos::from_millis(2000)),
        };
        let runs = heuristics()
            .into_iter()
            .flat_map(|name| [(name.clone(), TurnBounds::NONE), (name, servers)]);
        for (name, bounds) in runs {
            let h: Heuristic = name.parse().unwrap();
            let options = SimOptions {
                seed,
                record: true,
                stop_at_window_end: false,
                bounds,
            };
            let r = simulate(&w, h, options).unwrap();
            let b = w.bandwidth;
            for s in &r.segments {
                assert!(s.total_rate <= b * (1.0 + 1e-12), "{name}: {s:?}");
                if s.jobs_in_io > 0 {
                    assert!(
                        (s.total_rate - b).abs() <= 1e-12 * b,
                        "{name}: idle with I/O waiting: {s:?}"
                    );
                    assert!(s.transferring >= 1);
                } else {
                    assert_eq!(s.transferring, 0);
                }
                assert!(s.transferring <= s.jobs_in_io);
                if name == "exclusive-fcfs" {
                    assert!(s.transferring <= 1, "{s:?}");
                }
            }
            for (job, out) in w.jobs.iter().zip(&r.jobs) {
                let volume: f64 = job.volume.iter().sum();
                assert_eq!(out.iterations_done, job.iterations(), "{name}");
                assert!(out.completion.is_some());
                assert!(
                    (out.delivered - volume).abs() <= 1e-9 * volume,
                    "{name}: delivered {} of {volume}",
                    out.delivered
                );
                // Isolated lengths: no job can finish before its release plus its work alone.
                let alone = job.release + job.cpu.iter().sum::<f64>() + volume / b;
                assert!(
                    out.completion.unwrap() >= alone * (1.0 - 1e-12),
                    "{name} {bounds:?}: {:?} < {alone}",
                    out.completion
                );
                if let Some(s) = out.stretch {
                    assert!(s >= 1.0 - 1e-12, "{name}: stretch {s}");
                }
            }
            assert_eq!(
                r.events as usize,
                2 * w.iterations(),
                "{name}: one event per phase end"
            );
        }
    }
}

#[test]
fn set_based_heuristics_transfer_at_most_one_job_per_set() {
    let w = generator(0.1, 0.8).generate(11).unwrap();
    for name in [
        "set-10",
        "set-fairshare",
        "clairvoyant",
        "set-10:online",
        "set-10:online:own",
        "set-fairshare:online",
        "share+priority:online",
    ] {
        let options = SimOptions {
            record: true,
            ..SimOptions::default()
        };
        let r = simulate(&w, name.parse().unwrap(), options).unwrap();
        // Every I/O interval of two jobs of the same set is disjoint.
        let mut by_set: std::collections::BTreeMap<_, Vec<(f64, f64)>> = Default::default();
        for j in &r.jobs {
            for p in j.phases.iter().filter(|p| p.set.is_some()) {
                by_set
                    .entry(p.set.unwrap())
                    .or_default()
                    .push((p.transfer_start, p.end));
            }
        }
        for (set, mut spans) in by_set {
            spans.sort_by(|a, b| a.0.total_cmp(&b.0));
            for pair in spans.windows(2) {
                assert!(pair[0].1 <= pair[1].0 + 1e-9, "{name} {set}: {pair:?}");
            }
        }
    }
}

#[test]
fn utilization_respects_the_paper_bound_without_noise() {
    for seed in 0..5 {
        for omega in [0.3, 0.8] {
            let g = generator(0.0, omega);
            let w = g.generate(seed).unwrap();
            let n = w.jobs.len() as f64;
            for name in heuristics() {
                let r = simulate(&w, name.parse().unwrap(), SimOptions::default()).unwrap();
                let bound = 1.0 - omega / n;
                assert!(
                    r.metrics.utilization <= bound + 1e-12,
                    "{name} seed {seed}: utilization {} > {bound}",
                    r.metrics.utilization
                );
                assert!(r.metrics.max_stretch >= 1.0);
                assert!(r.metrics.io_slowdown >= 1.0 - 1e-12);
            }
        }
    }
}

#[test]
fn stopping_at_the_window_end_changes_no_metric() {
    let mut g = generator(0.1, 0.8);
    g.window = Some(Window::new(300.0, 1500.0).unwrap());
    let w = g.generate(5).unwrap();
    for name in heuristics() {
        let h: Heuristic = name.parse().unwrap();
        let full = simulate(&w, h, SimOptions::default()).unwrap();
        let cut = simulate(
            &w,
            h,
            SimOptions {
                stop_at_window_end: true,
                ..SimOptions::default()
            },
        )
        .unwrap();
        assert_eq!(cut.end_time, 1500.0);
        assert!(cut.events < full.events);
        for (a, b) in full.metrics.values().iter().zip(cut.metrics.values()) {
            assert!((a - b).abs() <= 1e-9 * a.abs(), "{name}: {a} vs {b}");
        }
    }
}

#[test]
fn set10_beats_fair_share_on_the_three_profile_mix() {
    // The paper's headline on one mid-sweep workload (nH = 20, 20 M, 20 L): SET-10 gives a lower
    // max stretch and a higher utilization than FAIR-SHARE, and EXCLUSIVE-FCFS starves the short
    // jobs (the worst max stretch).
    let g = |name: &str, count, mean: f64| GroupSpec {
        name: name.to_string(),
        count,
        mean,
        sd: mean / 10.0,
    };
    let gen = PaperGenerator {
        bandwidth: 1.0,
        horizon: 6_000.0,
        omega: 0.8,
        noise: 0.1,
        window: Some(Window::new(1_800.0, 4_200.0).unwrap()),
        groups: vec![g("H", 20, 10.0), g("M", 20, 100.0), g("L", 20, 1000.0)],
    };
    let w = gen.generate(1).unwrap();
    let m = |h: &str| {
        simulate(&w, h.parse().unwrap(), SimOptions::default())
            .unwrap()
            .metrics
    };
    let (set10, fair, excl) = (m("set-10"), m("fair-share"), m("exclusive-fcfs"));
    assert!(set10.max_stretch < fair.max_stretch, "{set10:?} {fair:?}");
    assert!(set10.utilization > fair.utilization, "{set10:?} {fair:?}");
    assert!(excl.max_stretch > set10.max_stretch, "{excl:?} {set10:?}");
}
