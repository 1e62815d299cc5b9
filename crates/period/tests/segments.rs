//! Change points (issue 32): a job whose period changes once or twice (×10, ÷10, ×2), with jitter
//! up to 30% and background I/O, is split where it changes and each part gets its own period;
//! a trace without a change keeps one segment, detected exactly as before.

use iosets_period::segment::{segment, segment_with, SegmentConfig};
use iosets_period::synth::{changing, poisson, single_burst, PeriodicSpec};
use iosets_period::{detect, Analyzer, Config, Event, Nanos};

/// Behaviours with these periods (seconds), 15 iterations each.
fn behaviours(periods: &[f64], jitter: f64, background: bool) -> Vec<PeriodicSpec> {
    periods
        .iter()
        .map(|&p| PeriodicSpec {
            jitter,
            background,
            ..PeriodicSpec::new(p, 15)
        })
        .collect()
}

const CHANGES: [&[f64]; 7] = [
    &[10.0, 100.0],
    &[100.0, 10.0],
    &[64.0, 128.0],
    &[640.0, 320.0],
    &[10.0, 100.0, 10.0],
    &[100.0, 10.0, 20.0],
    &[40.0, 400.0, 800.0],
];

#[test]
fn each_change_is_found_within_a_period_and_each_part_gets_its_period() {
    let mut worst_period = 0.0f64;
    let mut worst_change = 0.0f64;
    for periods in CHANGES {
        for jitter in [0.0, 0.1, 0.3] {
            for background in [false, true] {
                for seed in 1..=3 {
                    let truth = changing(&behaviours(periods, jitter, background), seed);
                    let got = segment(&truth.trace.events);
                    let what = format!(
                        "periods {periods:?}, jitter {jitter}, background {background}, seed {seed}: {:?}",
                        got.segments
                    );
                    assert_eq!(got.segments.len(), periods.len(), "{what}");
                    for (k, s) in got.segments.iter().enumerate() {
                        let want = truth.true_period_s(k).unwrap();
                        let est = s
                            .detection
                            .periodic()
                            .unwrap_or_else(|| panic!("segment {k} not periodic: {what}"));
                        let err = (est.period.as_secs_f64() / want - 1.0).abs();
                        worst_period = worst_period.max(err);
                        assert!(err <= 0.05, "segment {k}: {err:.3} off {want}: {what}");
                    }
                    for (k, (&at, &real)) in got.changes().iter().zip(&truth.changes).enumerate() {
                        // One period of the shorter behaviour on either side.
                        let period = truth
                            .true_period_s(k)
                            .unwrap()
                            .min(truth.true_period_s(k + 1).unwrap());
                        let off = (at.as_secs_f64() - real.as_secs_f64()).abs() / period;
                        worst_change = worst_change.max(off);
                        assert!(off <= 1.0, "change {k} {off:.2} periods off: {what}");
                    }
                    // Segments tile the trace.
                    for w in got.segments.windows(2) {
                        assert_eq!(w[0].end, w[1].start, "{what}");
                    }
                }
            }
        }
    }
    eprintln!(
        "worst period error {:.2}%, worst change {:.2} periods",
        worst_period * 100.0,
        worst_change
    );
}

const PERIODS: [f64; 6] = [10.0, 64.0, 100.0, 384.0, 640.0, 1000.0];

/// Every trace of the accuracy set (`tests/synthetic.rs`, `bench/period_accuracy.sh`) and the
/// aperiodic ones: one segment, and the same answer as `detect` on the whole trace.
#[test]
fn no_segment_is_found_where_nothing_changes() {
    let mut traces: Vec<(String, Vec<Event>)> = Vec::new();
    for iterations in [20, 5] {
        for background in [false, true] {
            for jitter in [0.0, 0.1, 0.3, 0.5] {
                for period in PERIODS {
                    for seed in [3, 5, 11] {
                        let spec = PeriodicSpec {
                            jitter,
                            background,
                            seed,
                            ..PeriodicSpec::new(period, iterations)
                        };
                        traces.push((format!("{spec:?}"), spec.generate().events));
                    }
                }
            }
        }
    }
    for seed in 1..=4 {
        traces.push((
            format!("poisson 400 seed {seed}"),
            poisson(400, 2.0, 1 << 20, 0.05, seed),
        ));
        traces.push((
            format!("poisson 2000 seed {seed}"),
            poisson(2000, 0.1, 1 << 24, 1.0, seed),
        ));
    }
    traces.push(("one burst".into(), single_burst(5.0, 64, 1 << 20, 0.01)));
    traces.push(("nothing".into(), Vec::new()));
    for (what, events) in &traces {
        let got = segment(events);
        assert_eq!(got.segments.len(), 1, "{what}: {:?}", got.segments);
        assert_eq!(got.segments[0].detection, detect(events), "{what}");
        assert!(got.changes().is_empty());
    }
}

#[test]
fn segments_off_is_the_whole_trace() {
    let truth = changing(&behaviours(&[10.0, 100.0], 0.1, false), 1);
    let events = &truth.trace.events;
    let mut analyzer = Analyzer::new(Config::default()).unwrap();
    let off = segment_with(events, &mut analyzer, &SegmentConfig::off()).unwrap();
    assert_eq!(off.segments.len(), 1);
    assert_eq!(off.segments[0].detection, detect(events));
    assert_eq!(off.segments[0].start, events[0].start);
    assert_eq!(segment(events).segments.len(), 2);
    // Bad settings are refused, naming the field.
    let bad = SegmentConfig {
        min_phases: 0,
        ..SegmentConfig::default()
    };
    let e = segment_with(events, &mut analyzer, &bad).unwrap_err();
    assert!(e.to_string().contains("min_phases"), "{e}");
}

/// A job that stops being periodic: its last segment has no period, and the periodic part keeps
/// its own.
#[test]
fn a_job_that_turns_aperiodic_ends_in_a_segment_without_a_period() {
    let periodic = PeriodicSpec::new(50.0, 20).generate();
    let end = periodic.events.iter().map(|e| e.end).max().unwrap();
    let mut events = periodic.events.clone();
    events.extend(
        poisson(300, 0.2, 1 << 30, 1.0, 9)
            .into_iter()
            .map(|e| Event::new(e.start + end, e.end + end, e.bytes)),
    );
    let got = segment(&events);
    assert_eq!(got.segments.len(), 2, "{:?}", got.segments);
    let first = got.segments[0].detection.period().expect("periodic part");
    assert!((first.as_secs_f64() / 50.0 - 1.0).abs() < 0.05, "{first:?}");
    assert!(!got.last().detection.is_periodic(), "{:?}", got.last());
    let at = got.changes()[0];
    assert!(at <= end + Nanos::from_secs_f64(50.0) && at + Nanos::from_secs_f64(50.0) >= end);
}

/// Unsorted input gives the answer sorted input gives.
#[test]
fn event_order_does_not_matter() {
    let truth = changing(&behaviours(&[100.0, 10.0], 0.3, true), 2);
    let sorted = segment(&truth.trace.events);
    let mut shuffled = truth.trace.events.clone();
    shuffled.reverse();
    let got = segment(&shuffled);
    assert_eq!(got.changes(), sorted.changes());
    assert_eq!(got.segments.len(), 2);
}

/// Long traces (the detector's long-window path): 4,000 phases at 10 s then 4,000 at 100 s, and
/// 10,000 at 10 s; 10% jitter, background I/O.
#[test]
fn long_traces_keep_their_periods_and_their_change() {
    let spec = |p: f64, n: usize| PeriodicSpec {
        jitter: 0.1,
        background: true,
        requests_per_phase: 4,
        ..PeriodicSpec::new(p, n)
    };
    let truth = changing(&[spec(10.0, 4_000), spec(100.0, 4_000)], 3);
    let got = segment(&truth.trace.events);
    assert_eq!(got.segments.len(), 2, "{:?}", got.segments);
    for (k, s) in got.segments.iter().enumerate() {
        let want = truth.true_period_s(k).unwrap();
        let est = s.detection.periodic().expect("periodic");
        assert!(
            (est.period.as_secs_f64() / want - 1.0).abs() < 0.01,
            "{k}: {est:?} vs {want}"
        );
        assert!(est.phases.abs_diff(4_000) <= 1, "{est:?}");
    }
    let off = (got.changes()[0].as_secs_f64() - truth.changes[0].as_secs_f64()).abs();
    assert!(off <= 10.0, "change {off} s off");
    // Whole, the two behaviours blend into one wrong period: what segments are for.
    let whole = detect(&truth.trace.events);
    assert!(whole.period().is_none_or(|p| {
        let p = p.as_secs_f64();
        (p / 10.0 - 1.0).abs() > 0.05 && (p / 100.0 - 1.0).abs() > 0.05
    }));

    let one = changing(&[spec(10.0, 10_000)], 4);
    let det = detect(&one.trace.events);
    let est = det.periodic().expect("periodic");
    let want = one.true_period_s(0).unwrap();
    assert!(
        (est.period.as_secs_f64() / want - 1.0).abs() < 0.001,
        "{est:?} vs {want}"
    );
    let whole = segment(&one.trace.events);
    assert_eq!(whole.segments.len(), 1);
    // The phases found once for the change points serve the long path too: the same answer.
    assert_eq!(whole.segments[0].detection, det);
}

/// Phases made of eight 1 ms requests 1 ms apart (a comb: gaps as long as the requests), every
/// 100 ms, then every 1 s: the combs are phases, not the requests in them.
#[test]
fn a_phase_of_spaced_requests_is_one_phase() {
    let mut events = Vec::new();
    let mut t = 0.0;
    for (period, phases) in [(0.1, 20), (1.0, 20)] {
        for _ in 0..phases {
            for r in 0..8 {
                let s = t + r as f64 * 0.002;
                events.push(Event::from_secs(s, s + 0.001, 1 << 20));
            }
            t += period;
        }
    }
    let got = segment(&events);
    assert_eq!(got.segments.len(), 2, "{:?}", got.segments);
    let periods: Vec<f64> = got
        .segments
        .iter()
        .map(|s| s.detection.period().expect("periodic").as_secs_f64())
        .collect();
    assert!((periods[0] / 0.1 - 1.0).abs() < 0.02, "{periods:?}");
    assert!((periods[1] / 1.0 - 1.0).abs() < 0.02, "{periods:?}");
    // The 21st comb is followed by the first 1 s gap: the last phase of the old behaviour.
    assert_eq!(got.segments[0].detection.phases(), 21);
    assert_eq!(got.segments[1].detection.phases(), 19);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 256, ..Default::default() })]

    /// Any events, in any order: no panic; the segments tile the trace in time order; with one
    /// segment the answer is `detect`'s; the online detector's window form agrees on a tail.
    #[test]
    fn any_events_give_segments_that_tile_the_trace(
        raw in proptest::collection::vec((0u64..1u64 << 40, 0u64..1u64 << 32, 0u64..1u64 << 30), 0..400),
    ) {
        let events: Vec<Event> = raw
            .iter()
            .map(|&(s, d, b)| Event::new(Nanos(s), Nanos(s + d), b))
            .collect();
        let got = segment(&events);
        proptest::prop_assert!(!got.segments.is_empty());
        for w in got.segments.windows(2) {
            proptest::prop_assert_eq!(w[0].end, w[1].start);
            proptest::prop_assert!(w[0].start < w[1].start);
        }
        if got.segments.len() == 1 {
            proptest::prop_assert_eq!(got.segments[0].detection, detect(&events));
        }
        if let (Some(first), Some(last)) = (
            events.iter().map(|e| e.start).min(),
            events.iter().map(|e| e.end).max(),
        ) {
            proptest::prop_assert_eq!(got.segments[0].start, first);
            proptest::prop_assert_eq!(got.last().end, last);
            let mut analyzer = Analyzer::new(Config::online()).unwrap();
            let mid = Nanos(first.0 / 2 + last.0 / 2);
            let w = iosets_period::segment::segment_window(
                &events, mid, last, true, &mut analyzer, &SegmentConfig::default(),
            ).unwrap();
            proptest::prop_assert_eq!(w.segments[0].start, mid);
            proptest::prop_assert_eq!(w.last().end, last);
        }
    }
}
