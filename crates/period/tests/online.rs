//! Online detection: fed event by event (in completion order), the estimate is within 5% after 5
//! periods on clean input, stays there, follows a change of behaviour, keeps bounded memory
//! whatever the run length, and is not confident on aperiodic input.

use iosets_period::online::{OnlineConfig, OnlineDetector};
use iosets_period::synth::{poisson, PeriodicSpec, SynthTrace};
use iosets_period::{Error, Event, Nanos};

fn detector() -> OnlineDetector {
    OnlineDetector::new(OnlineConfig::default()).unwrap()
}

/// A detector that keeps at most `capacity` segments.
fn detector_holding(capacity: usize) -> OnlineDetector {
    let config = OnlineConfig {
        capacity,
        ..OnlineConfig::default()
    };
    OnlineDetector::new(config).unwrap()
}

/// Events in the order the server would see them complete.
fn by_completion(mut events: Vec<Event>) -> Vec<Event> {
    events.sort_by_key(|e| (e.end, e.start));
    events
}

fn rel_err(got: Nanos, want_s: f64) -> f64 {
    (got.as_secs_f64() / want_s - 1.0).abs()
}

/// Feeds every event completed by `until` and returns the index of the next one.
fn feed_until(d: &mut OnlineDetector, events: &[Event], from: usize, until: Nanos) -> usize {
    let mut i = from;
    while i < events.len() && events[i].end <= until {
        d.observe(events[i]);
        i += 1;
    }
    i
}

#[test]
fn within_5pct_after_5_periods_on_clean_input() {
    for period in [10.0, 64.0, 100.0, 384.0, 640.0, 1000.0] {
        for background in [false, true] {
            let trace = PeriodicSpec {
                background,
                ..PeriodicSpec::new(period, 20)
            }
            .generate();
            let events = by_completion(trace.events.clone());
            let mut d = detector();
            let now = trace.phase_starts[0] + Nanos::from_secs_f64(5.0 * period);
            feed_until(&mut d, &events, 0, now);
            let det = d.estimate(now);
            let est = det
                .periodic()
                .unwrap_or_else(|| panic!("period {period}, bg {background}: {det:?}"));
            assert!(
                rel_err(est.period, period) < 0.05,
                "period {period}, bg {background}: {est:?}"
            );
            assert_eq!(d.current(), Some(est));
        }
    }
}

#[test]
fn not_confident_before_three_phases() {
    let trace = PeriodicSpec::new(100.0, 20).generate();
    let events = by_completion(trace.events.clone());
    let mut d = detector();
    // Two phases seen: a period needs more evidence.
    let now = trace.phase_starts[2] - Nanos::from_secs_f64(1.0);
    feed_until(&mut d, &events, 0, now);
    assert!(!d.estimate(now).is_periodic());
    assert!(d.current().is_none());
}

#[test]
fn settles_and_stays_on_a_long_jittered_run() {
    let trace = PeriodicSpec {
        jitter: 0.1,
        background: true,
        ..PeriodicSpec::new(64.0, 300)
    }
    .generate();
    let truth = trace.true_period_s().unwrap();
    let events = by_completion(trace.events.clone());
    let mut d = detector();
    let mut next = 0;
    for (k, start) in trace.phase_starts.iter().enumerate().skip(1) {
        next = feed_until(&mut d, &events, next, *start);
        if k >= 6 && k % 5 == 0 {
            let det = d.estimate(*start);
            let est = det
                .periodic()
                .unwrap_or_else(|| panic!("phase {k}: {det:?}"));
            // Jitter makes a short history's mean differ from the whole run's: 10%.
            assert!(rel_err(est.period, truth) < 0.1, "phase {k}: {est:?}");
        }
    }
    assert!(d.retained() <= d.config().capacity);
}

fn concat(a: &SynthTrace, b: &SynthTrace) -> (Vec<Event>, Nanos) {
    let shift = a.events.iter().map(|e| e.end).max().unwrap();
    let mut events = a.events.clone();
    events.extend(
        b.events
            .iter()
            .map(|e| Event::new(e.start + shift, e.end + shift, e.bytes)),
    );
    (by_completion(events), shift)
}

#[test]
fn follows_a_change_of_behaviour_both_ways() {
    for (before, after) in [(10.0, 100.0), (100.0, 10.0), (64.0, 640.0)] {
        let a = PeriodicSpec::new(before, 40).generate();
        let b = PeriodicSpec {
            seed: 2,
            ..PeriodicSpec::new(after, 40)
        }
        .generate();
        let (events, shift) = concat(&a, &b);
        let mut d = detector();
        let mut next = 0;
        // Settled on the first behaviour...
        next = feed_until(&mut d, &events, next, shift);
        let first = d.estimate(shift);
        assert!(
            rel_err(first.period().unwrap(), before) < 0.05,
            "{before}: {first:?}"
        );
        // ... then on the second, estimating every phase as the server might.
        let mut settled_at = None;
        for (k, start) in b.phase_starts.iter().enumerate() {
            let now = *start + shift;
            next = feed_until(&mut d, &events, next, now);
            let det = d.estimate(now);
            let ok = det.period().is_some_and(|p| rel_err(p, after) < 0.05);
            match (ok, settled_at) {
                (true, None) => settled_at = Some(k),
                (false, Some(s)) if k > s + 2 => panic!("{before}->{after}: lost at {k}: {det:?}"),
                _ => {}
            }
        }
        let k = settled_at.unwrap_or_else(|| panic!("{before}->{after}: never followed"));
        assert!(
            k <= 20,
            "{before}->{after}: followed only after {k} new periods"
        );
        assert!(rel_err(d.current().unwrap().period, after) < 0.05);
    }
}

#[test]
fn memory_stays_bounded_over_a_long_run() {
    let mut d = detector_holding(256);
    // 5000 phases of 2 s, 8 requests each, plus background: 40 000+ requests.
    let trace = PeriodicSpec {
        background: true,
        requests_per_phase: 8,
        ..PeriodicSpec::new(2.0, 5000)
    }
    .generate();
    let events = by_completion(trace.events.clone());
    let mut most = 0;
    for (i, e) in events.iter().enumerate() {
        d.observe(*e);
        most = most.max(d.retained());
        if i % 5000 == 4999 {
            let _ = d.estimate(e.end);
        }
    }
    assert!(most <= 256, "held {most} segments");
    let end = events.last().unwrap().end;
    let est = d.estimate(end);
    assert!(rel_err(est.period().unwrap(), 2.0) < 0.05, "{est:?}");
    assert_eq!(d.observed(), events.len() as u64);
}

#[test]
fn without_an_estimate_memory_is_bounded_too() {
    let mut d = detector_holding(64);
    for e in poisson(20_000, 5.0, 4096, 0.001, 9) {
        d.observe(e);
        assert!(d.retained() <= 64);
    }
}

#[test]
fn aperiodic_stream_is_not_confident() {
    for seed in 0..5 {
        let events = poisson(400, 0.5, 1 << 20, 0.1, seed);
        let mut d = detector();
        for e in &events {
            d.observe(*e);
        }
        let det = d.estimate(events.last().unwrap().end);
        assert!(!det.is_periodic(), "seed {seed}: {det:?}");
        assert!(d.current().is_none());
    }
}

#[test]
fn out_of_order_completions_give_the_same_answer() {
    let trace = PeriodicSpec::new(100.0, 12).generate();
    // Reverse every run of 8 requests: late completions within a phase.
    let mut events = trace.events.clone();
    for chunk in events.chunks_mut(8) {
        chunk.reverse();
    }
    let mut d = detector();
    for e in &events {
        d.observe(*e);
    }
    let det = d.estimate(events.iter().map(|e| e.end).max().unwrap());
    assert!(rel_err(det.period().unwrap(), 100.0) < 0.01, "{det:?}");
    assert_eq!(det.phases(), 12);
}

#[test]
fn empty_detector_says_no_events() {
    let mut d = detector();
    assert!(!d.estimate(Nanos(5)).is_periodic());
    d.observe(Event::from_secs(1.0, 2.0, 0));
    assert_eq!(d.retained(), 0);
}

#[test]
fn bad_settings_are_refused() {
    let bad = [
        OnlineConfig {
            capacity: 3,
            ..OnlineConfig::default()
        },
        OnlineConfig {
            merge_fraction: 0.5,
            ..OnlineConfig::default()
        },
        OnlineConfig {
            history_periods: 1.0,
            ..OnlineConfig::default()
        },
    ];
    for c in bad {
        let err = OnlineDetector::new(c).unwrap_err();
        assert!(matches!(err, Error::InvalidConfig { .. }), "{err}");
    }
}
