//! Offline detection on the synthetic traces of issue 4: periods 10, 64, 100, 384, 640 and 1000 s,
//! I/O 20% of the period, 20 and 5 iterations, jitter 0/10/30/50% on phase lengths and volumes,
//! with and without small background I/O; and aperiodic input.

use iosets_period::synth::{poisson, single_burst, PeriodicSpec};
use iosets_period::{detect, Detection, Event, Nanos, NotPeriodicReason};

const PERIODS: [f64; 6] = [10.0, 64.0, 100.0, 384.0, 640.0, 1000.0];

/// Set-10: `round(log10 w_iter)` (the policy crate's mapping, restated here because this crate
/// must not depend on it).
fn set10(w: f64) -> i32 {
    w.log10().round() as i32
}

fn case(
    period: f64,
    iterations: usize,
    jitter: f64,
    background: bool,
    seed: u64,
) -> (f64, Detection) {
    let spec = PeriodicSpec {
        jitter,
        background,
        seed,
        ..PeriodicSpec::new(period, iterations)
    };
    let trace = spec.generate();
    (trace.true_period_s().unwrap(), detect(&trace.events))
}

fn label(period: f64, iterations: usize, jitter: f64, background: bool) -> String {
    format!("period {period} s, {iterations} iterations, jitter {jitter}, background {background}")
}

#[test]
fn clean_and_10pct_jitter_traces_land_in_their_set() {
    for iterations in [20, 5] {
        for background in [false, true] {
            for jitter in [0.0, 0.1] {
                for period in PERIODS {
                    let (truth, det) = case(period, iterations, jitter, background, 11);
                    let what = label(period, iterations, jitter, background);
                    let est = det.periodic().unwrap_or_else(|| panic!("{what}: {det:?}"));
                    let got = est.period.as_secs_f64();
                    assert_eq!(set10(got), set10(truth), "{what}: {got} vs {truth}");
                    assert!(est.confidence >= 0.5, "{what}: {est:?}");
                    assert_eq!(est.phases, iterations, "{what}: {est:?}");
                }
            }
        }
    }
}

#[test]
fn no_clean_trace_comes_out_at_half_or_double_its_period() {
    for iterations in [20, 5] {
        for background in [false, true] {
            for period in PERIODS {
                let (truth, det) = case(period, iterations, 0.0, background, 3);
                let what = label(period, iterations, 0.0, background);
                let got = det.period().unwrap_or_else(|| panic!("{what}: {det:?}"));
                let ratio = got.as_secs_f64() / truth;
                // Half would be 0.5, double 2: require far better than either.
                assert!((ratio - 1.0).abs() < 0.01, "{what}: ratio {ratio}");
            }
        }
    }
}

#[test]
fn strongly_jittered_traces_keep_a_close_estimate() {
    for iterations in [20, 5] {
        for background in [false, true] {
            for jitter in [0.3, 0.5] {
                for period in PERIODS {
                    let (truth, det) = case(period, iterations, jitter, background, 5);
                    let what = label(period, iterations, jitter, background);
                    let est = det.best().unwrap_or_else(|| panic!("{what}: {det:?}"));
                    let err = (est.period.as_secs_f64() / truth - 1.0).abs();
                    assert!(err < 0.05, "{what}: error {err}");
                    // Jitter lowers the confidence, never above a clean trace's.
                    assert!(est.confidence < 0.9, "{what}: {est:?}");
                }
            }
        }
    }
}

#[test]
fn confidence_falls_with_jitter_and_with_fewer_phases() {
    let conf = |it, j| case(100.0, it, j, false, 2).1.confidence();
    assert!(conf(20, 0.0) > conf(20, 0.1));
    assert!(conf(20, 0.1) > conf(20, 0.3));
    assert!(conf(20, 0.3) > conf(20, 0.5));
    assert!(conf(20, 0.0) > conf(5, 0.0));
    assert!(conf(20, 0.0) > 0.9);
}

#[test]
fn a_single_burst_is_not_periodic() {
    let det = detect(&single_burst(5.0, 64, 1 << 20, 0.01));
    assert!(
        matches!(
            det,
            Detection::NotPeriodic {
                reason: NotPeriodicReason::TooFewPhases { phases: 1 },
                ..
            }
        ),
        "{det:?}"
    );
}

#[test]
fn poisson_arrivals_are_not_periodic_or_have_low_confidence() {
    for seed in 0..12 {
        for (rate, duration) in [(1.0, 0.05), (0.1, 0.5), (20.0, 0.001)] {
            let det = detect(&poisson(300, rate, 1 << 20, duration, seed));
            assert!(!det.is_periodic(), "seed {seed}, rate {rate}: {det:?}");
            assert!(det.confidence() < 0.45, "seed {seed}, rate {rate}: {det:?}");
        }
    }
}

#[test]
fn no_events_or_no_bytes_say_so() {
    assert!(matches!(
        detect(&[]),
        Detection::NotPeriodic {
            reason: NotPeriodicReason::NoEvents,
            best: None
        }
    ));
    let zero = [Event::from_secs(1.0, 2.0, 0), Event::from_secs(5.0, 6.0, 0)];
    assert!(matches!(
        detect(&zero),
        Detection::NotPeriodic {
            reason: NotPeriodicReason::NoActivity,
            ..
        }
    ));
    let instant = [Event::new(Nanos(7), Nanos(7), 100)];
    assert!(!detect(&instant).is_periodic());
}

#[test]
fn two_phases_are_too_few() {
    let (_, det) = case(100.0, 2, 0.0, false, 1);
    assert!(
        matches!(
            det,
            Detection::NotPeriodic {
                reason: NotPeriodicReason::TooFewPhases { phases: 2 },
                ..
            }
        ),
        "{det:?}"
    );
}

#[test]
fn a_missed_phase_does_not_double_the_period() {
    // Drop every request of the 8th phase of a clean 20-phase trace.
    let trace = PeriodicSpec::new(64.0, 20).generate();
    let gap_start = trace.phase_starts[7];
    let gap_end = trace.phase_starts[8];
    let events: Vec<Event> = trace
        .events
        .iter()
        .copied()
        .filter(|e| e.start < gap_start || e.start >= gap_end)
        .collect();
    let det = detect(&events);
    let got = det.best().unwrap().period.as_secs_f64();
    assert!((got / 64.0 - 1.0).abs() < 0.01, "{got}");
    assert_eq!(det.phases(), 19);
}

#[test]
fn short_periods_in_a_long_window_are_binned_finer() {
    // 2000 phases of 1 s: the first pass's 4096 bins give 2 bins per period, so the window is
    // binned again.
    let trace = PeriodicSpec {
        requests_per_phase: 4,
        ..PeriodicSpec::new(1.0, 2000)
    }
    .generate();
    let det = detect(&trace.events);
    let got = det.period().unwrap().as_secs_f64();
    assert!((got - 1.0).abs() < 0.005, "{got}");
}
