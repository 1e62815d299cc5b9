//! Change points: a trace split where its I/O behaviour changes, and a period per segment.
//!
//! [`detect()`](crate::detect()) assumes one behaviour per window: a job whose checkpoint interval
//! changes part-way, or a solver entering another stage, would get one period for the whole
//! trace — the old one, or "not periodic". [`segment`] finds where the behaviour changes and runs
//! the detector on each part.
//!
//! The method, in order:
//! 1. **Phases**, at any time scale: the union of the events is cut into busy stretches; a
//!    stretch and the next are one phase when the gap between them is under 5% of the longer of
//!    the two, or under the coarsest valley of the gap distribution (a gap value at least twice
//!    the next smaller one) that leaves the phases phase-like: at least three, none idle inside
//!    for more than a fifth of the median time between phase starts (the requests of one phase
//!    with gaps as long as themselves are one phase; phases apart by their compute phases are
//!    not); then a stretch moving under a tenth of the bytes-weighted median volume of the 16
//!    around it is background I/O and dropped. O(n log n) in the events, O(n) when they come
//!    sorted by start, as traces do.
//! 2. **Two series**, one value per phase after the first: the log of the gap before the phase
//!    (the compute phase) and the log of the iteration that ends with it (end of the previous
//!    phase to end of this one). On a log scale ×2 and ÷2 are the same distance at every time
//!    scale.
//! 3. **Change points** by binary segmentation (Scott and Knott, 1974; Killick et al. 2012 give
//!    its cost as O(n log n)): a change in the mean of either series, Gaussian cost, each series
//!    scaled by its noise; the split that lowers a segment's cost the most is kept if it lowers it
//!    by more than [`SegmentConfig::penalty`]` · ln n` per series, and both parts are split
//!    again; at least [`SegmentConfig::min_phases`] phases per segment. The noise is measured on
//!    the differences of consecutive values (their median absolute value), which a change of
//!    level does not inflate. (PELT, the optimal partitioning, was tried first: with one change
//!    in 10,000 phases its pruning keeps most candidates and it took 128 ms against under 1 ms.)
//! 4. **Check**: each segment is detected over its time range ([`Analyzer::analyze_window`]);
//!    neighbours are merged back while neither has a confident period, or both have periods
//!    within [`SegmentConfig::same_period`] of each other (jitter, not a change), or one has a
//!    confident period and the two together have it too. So a trace without a change keeps one
//!    segment, detected exactly as [`detect()`](crate::detect()) detects the whole trace.
//!
//! A segment ends, and the next begins, at the end of the last I/O phase of the old behaviour:
//! the first thing that differs is the compute phase that follows. A job that stops being
//! periodic gets a last segment without a period; a gap without any I/O belongs to the segment
//! whose compute phase it is.
//!
//! What it is not: an online method. The runtime's detector ([`crate::online`]) follows changes
//! as they happen and ends in the last segment's set (tested in the runtime's
//! `auto_priority` tests); this one sees the whole trace at once, so it places each change at the
//! phase where it happened instead of three new periods later.
//!
//! Limits: a phase is told from its pieces by the valleys of the gaps; a job whose phases are
//! themselves made of evenly spaced bursts at a scale close to its period (less than twice apart)
//! may be read at the finer scale.

use std::borrow::Cow;

use iosets_types::Nanos;

use crate::detect::{Analyzer, Config, Detection};
use crate::event::Event;
use crate::Result;

/// Settings of the change-point search.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SegmentConfig {
    /// Whether to look for changes at all; `false` gives one segment, the whole trace.
    pub enabled: bool,
    /// Fewest I/O phases in a segment (the first segment has one more: the phase before its
    /// first gap); at least 3, as a period needs three phase starts to be confirmed.
    pub min_phases: usize,
    /// Cost of a change point, in units of `ln n` (n: phases) times the series' noise: higher
    /// finds fewer changes. Above 0.
    pub penalty: f64,
    /// Neighbouring segments whose periods are within this ratio are one behaviour (jitter):
    /// greater than 1.
    pub same_period: f64,
}

impl Default for SegmentConfig {
    fn default() -> SegmentConfig {
        SegmentConfig {
            enabled: true,
            min_phases: 4,
            penalty: 4.0,
            same_period: 1.3,
        }
    }
}

impl SegmentConfig {
    /// No change-point search: the whole trace is one segment (`iosets detect --segments off`).
    pub fn off() -> SegmentConfig {
        SegmentConfig {
            enabled: false,
            ..SegmentConfig::default()
        }
    }

    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<()> {
        let bad = |field, value: String, reason| {
            Err(crate::Error::InvalidConfig {
                field,
                value,
                reason,
            })
        };
        if self.min_phases < 3 {
            return bad(
                "min_phases",
                self.min_phases.to_string(),
                "expected at least 3 (a period needs three phase starts)",
            );
        }
        if !(self.penalty > 0.0 && self.penalty.is_finite()) {
            return bad(
                "penalty",
                self.penalty.to_string(),
                "expected a finite number above 0",
            );
        }
        if !(self.same_period > 1.0 && self.same_period.is_finite()) {
            return bad(
                "same_period",
                self.same_period.to_string(),
                "expected a finite ratio above 1",
            );
        }
        Ok(())
    }
}

/// One behaviour: a time range of the trace and what the detector found in it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Segment {
    /// Where it begins: the trace's first event for the first segment, else the end of the
    /// previous segment's last I/O phase.
    pub start: Nanos,
    /// Where it ends: the end of its last I/O phase, or the trace's last event for the last
    /// segment.
    pub end: Nanos,
    /// The detector's answer over `[start, end]`.
    pub detection: Detection,
}

/// A trace's segments, in time order; never empty.
#[derive(Clone, Debug, PartialEq)]
pub struct Segmentation {
    /// The segments; each begins where the previous ends.
    pub segments: Vec<Segment>,
}

impl Segmentation {
    /// When the behaviour changed: the start of every segment but the first.
    pub fn changes(&self) -> Vec<Nanos> {
        self.segments.iter().skip(1).map(|s| s.start).collect()
    }

    /// The last segment: the behaviour the trace ends with.
    pub fn last(&self) -> &Segment {
        self.segments
            .last()
            .expect("a segmentation has at least one segment")
    }
}

/// Splits `events` (one job's) where the behaviour changes, with the default detector and
/// [`SegmentConfig::default`]. Never fails: a trace without events is one segment that is not
/// periodic.
pub fn segment(events: &[Event]) -> Segmentation {
    let mut analyzer =
        Analyzer::new(Config::default()).expect("the default configuration is valid");
    segment_with(events, &mut analyzer, &SegmentConfig::default())
        .expect("the default settings are valid")
}

/// Splits `events` where the behaviour changes (see the [module docs](self)), each segment
/// detected with `analyzer`. With one segment its detection is `analyzer.analyze(events)`: the
/// same answer as without segmentation.
///
/// # Errors
/// [`crate::Error::InvalidConfig`] naming the first bad field of `config`.
pub fn segment_with(
    events: &[Event],
    analyzer: &mut Analyzer,
    config: &SegmentConfig,
) -> Result<Segmentation> {
    let start = events.iter().map(|e| e.start).min().unwrap_or(Nanos::ZERO);
    let end = events.iter().map(|e| e.end).max().unwrap_or(start);
    segment_window(events, start, end, false, analyzer, config)
}

/// As [`segment_with`] over the window `[t0, t1]` of `events`: with one segment its detection is
/// `analyzer.analyze_window(events, t0, t1, clipped_start)` (the online detector's history,
/// whose first burst may be cut by the window). Events outside the window are clipped.
///
/// # Errors
/// [`crate::Error::InvalidConfig`] naming the first bad field of `config`.
pub fn segment_window(
    events: &[Event],
    t0: Nanos,
    t1: Nanos,
    clipped_start: bool,
    analyzer: &mut Analyzer,
    config: &SegmentConfig,
) -> Result<Segmentation> {
    config.validate()?;
    let one = |detection| Segmentation {
        segments: vec![Segment {
            start: t0,
            end: t1,
            detection,
        }],
    };
    if !config.enabled || events.is_empty() || t1 <= t0 {
        return Ok(one(analyzer.analyze_window(events, t0, t1, clipped_start)));
    }
    let sorted = by_start(events);
    let all = phases(&sorted);
    // The whole window, its phases found once for the change points and the detector.
    let whole = |analyzer: &mut Analyzer| {
        one(analyzer.analyze_window_with(events, &sorted, &all, t0, t1, clipped_start))
    };
    // A first phase cut by the window is not a phase start.
    let cut = usize::from(clipped_start && all.first().is_some_and(|p| p.start <= t0.0));
    let phases = &all[cut..];
    let starts = change_points(phases, config);
    if starts.len() <= 1 {
        return Ok(whole(analyzer));
    }
    // Segment k holds phases [starts[k], starts[k+1]); it begins where phase starts[k] - 1 ends.
    let bound = |k: usize| -> Nanos {
        if k == 0 {
            t0
        } else if k >= starts.len() {
            t1
        } else {
            Nanos(phases[starts[k] - 1].end)
        }
    };
    let detect = |analyzer: &mut Analyzer, a: Nanos, b: Nanos| {
        window(analyzer, &sorted, a, b, clipped_start && a == t0)
    };
    let mut parts: Vec<Part> = (0..starts.len())
        .map(|k| Part {
            start: bound(k),
            end: bound(k + 1),
            detection: detect(analyzer, bound(k), bound(k + 1)),
        })
        .collect();
    merge_back(&mut parts, analyzer, &detect, config);
    if parts.len() == 1 {
        return Ok(whole(analyzer));
    }
    Ok(Segmentation {
        segments: parts
            .into_iter()
            .map(|p| Segment {
                start: p.start,
                end: p.end,
                detection: p.detection,
            })
            .collect(),
    })
}

/// A segment being checked.
struct Part {
    start: Nanos,
    end: Nanos,
    detection: Detection,
}

/// The detector's answer over `[t0, t1]` of `sorted` (events sorted by start).
fn window(
    analyzer: &mut Analyzer,
    sorted: &[Event],
    t0: Nanos,
    t1: Nanos,
    clipped_start: bool,
) -> Detection {
    let upto = sorted.partition_point(|e| e.start <= t1);
    let inside: Vec<Event> = sorted[..upto]
        .iter()
        .filter(|e| e.end > t0 || (e.end == t0 && e.start == t0))
        .copied()
        .collect();
    analyzer.analyze_window(&inside, t0, t1, clipped_start)
}

/// Merges neighbouring parts that are one behaviour (step 4 of the module docs) until none is.
fn merge_back(
    parts: &mut Vec<Part>,
    analyzer: &mut Analyzer,
    detect: &dyn Fn(&mut Analyzer, Nanos, Nanos) -> Detection,
    config: &SegmentConfig,
) {
    let ratio = |a: Nanos, b: Nanos| {
        let (a, b) = (a.0.max(1) as f64, b.0.max(1) as f64);
        a.max(b) / a.min(b)
    };
    'again: loop {
        for i in 0..parts.len().saturating_sub(1) {
            let (a, b) = (&parts[i], &parts[i + 1]);
            let merged = match (a.detection.period(), b.detection.period()) {
                (None, None) => None,
                (Some(pa), Some(pb)) if ratio(pa, pb) <= config.same_period => None,
                (Some(_), Some(_)) => continue,
                (Some(p), None) | (None, Some(p)) => {
                    let d = detect(analyzer, a.start, b.end);
                    match d.period() {
                        Some(q) if ratio(p, q) <= config.same_period => Some(d),
                        _ => continue,
                    }
                }
            };
            let (start, end) = (a.start, b.end);
            let detection = merged.unwrap_or_else(|| detect(analyzer, start, end));
            parts[i] = Part {
                start,
                end,
                detection,
            };
            parts.remove(i + 1);
            continue 'again;
        }
        return;
    }
}

/// One I/O phase found in the events: `[start, end]` (nanoseconds) and its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Phase {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) bytes: u64,
}

/// `events` sorted by start: borrowed when they already are (traces usually are).
pub(crate) fn by_start(events: &[Event]) -> Cow<'_, [Event]> {
    if events.windows(2).all(|w| w[0].start <= w[1].start) {
        Cow::Borrowed(events)
    } else {
        let mut v = events.to_vec();
        v.sort_unstable_by_key(|e| e.start);
        Cow::Owned(v)
    }
}

/// The I/O phases of `sorted` (events sorted by start): step 1 of the module docs.
pub(crate) fn phases(sorted: &[Event]) -> Vec<Phase> {
    // Busy stretches: the union of the events.
    let mut busy: Vec<Phase> = Vec::new();
    for e in sorted {
        match busy.last_mut() {
            Some(p) if e.start.0 <= p.end => {
                p.end = p.end.max(e.end.0);
                p.bytes += e.bytes;
            }
            _ => busy.push(Phase {
                start: e.start.0,
                end: e.end.0,
                bytes: e.bytes,
            }),
        }
    }
    // The scale of a phase: the coarsest valley of the gap distribution under which the
    // stretches joined are phase-like, else none (only the 5% rule).
    let mut joined = Vec::new();
    for theta in valleys(&busy).into_iter().chain([0]) {
        let (groups, idle) = join(&busy, theta);
        if theta == 0 || phase_like(&groups, &idle) {
            joined = groups;
            break;
        }
    }
    // Background: far below the typical phase volume (first against the whole trace, which
    // removes most of it cheaply, then against the neighbours, so that a behaviour moving much
    // less per phase than another is not taken for background).
    let global = weighted_median(joined.iter().map(|p| p.bytes).collect());
    joined.retain(|p| p.bytes.saturating_mul(1000) >= global && p.bytes > 0);
    const AROUND: usize = 8;
    let keep: Vec<bool> = (0..joined.len())
        .map(|i| {
            let lo = i.saturating_sub(AROUND);
            let hi = (i + AROUND + 1).min(joined.len());
            let local = weighted_median(joined[lo..hi].iter().map(|p| p.bytes).collect());
            joined[i].bytes.saturating_mul(10) >= local
        })
        .collect();
    let mut k = keep.iter();
    joined.retain(|_| *k.next().unwrap_or(&true));
    joined
}

/// Valleys tried, at most.
const MAX_VALLEYS: usize = 6;

/// Candidate gaps under which stretches are pieces of one phase, coarsest first: each gap value
/// at least twice the next smaller one (a valley of the gap distribution).
fn valleys(busy: &[Phase]) -> Vec<u64> {
    let mut gaps: Vec<u64> = busy.windows(2).map(|w| w[1].start - w[0].end).collect();
    gaps.sort_unstable();
    gaps.dedup();
    let mut out = Vec::new();
    for k in (1..gaps.len()).rev() {
        if gaps[k] >= 2 * gaps[k - 1].max(1) {
            out.push(gaps[k]);
            if out.len() == MAX_VALLEYS {
                break;
            }
        }
    }
    out
}

/// `busy` joined across gaps under `theta`, and across a gap under 5% of the longer neighbour
/// (the pieces of one phase); with each group's idle time inside.
fn join(busy: &[Phase], theta: u64) -> (Vec<Phase>, Vec<u64>) {
    let mut groups: Vec<Phase> = Vec::with_capacity(busy.len());
    let mut idle: Vec<u64> = Vec::with_capacity(busy.len());
    for s in busy {
        match (groups.last_mut(), idle.last_mut()) {
            (Some(p), Some(i))
                if s.start - p.end < theta
                    || (s.start - p.end) * 20 < (p.end - p.start).max(s.end - s.start) =>
            {
                *i += s.start - p.end;
                p.end = p.end.max(s.end);
                p.bytes += s.bytes;
            }
            _ => {
                groups.push(*s);
                idle.push(0);
            }
        }
    }
    (groups, idle)
}

/// Whether `groups` look like I/O phases: at least three not far below the typical volume (a
/// thousandth: as the first background filter of [`phases`], so that a few groups that joined
/// many phases do not hide the phases), none of them idle inside for more than a fifth of the median time between their starts (a
/// threshold that joins phases across their compute phases fails this).
fn phase_like(groups: &[Phase], idle: &[u64]) -> bool {
    let typical = weighted_median(groups.iter().map(|p| p.bytes).collect());
    let real: Vec<(u64, u64)> = groups
        .iter()
        .zip(idle)
        .filter(|(p, _)| p.bytes.saturating_mul(1000) >= typical)
        .map(|(p, &i)| (p.start, i))
        .collect();
    if real.len() < 3 {
        return false;
    }
    let mut intervals: Vec<u64> = real.windows(2).map(|w| w[1].0 - w[0].0).collect();
    let mid = intervals.len() / 2;
    let median = *intervals.select_nth_unstable(mid).1;
    real.iter().all(|&(_, i)| i.saturating_mul(5) <= median)
}

/// The value at which half the total of `v` is reached, counting each value by its size (the
/// volume a typical byte belongs to); 0 for an empty `v`.
fn weighted_median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    let total: u128 = v.iter().map(|&b| u128::from(b)).sum();
    let mut sum = 0u128;
    for b in v {
        sum += u128::from(b);
        if 2 * sum >= total {
            return b;
        }
    }
    0
}

/// The phase index where each segment begins (the first is 0): steps 2 and 3 of the module
/// docs.
fn change_points(phases: &[Phase], config: &SegmentConfig) -> Vec<usize> {
    // Value j describes phase j + 1: the gap before it and the iteration ending with it.
    let m = phases.len().saturating_sub(1);
    let min_len = config.min_phases;
    if m < 2 * min_len {
        return vec![0];
    }
    let ln = |d: u64| (d.max(1) as f64).ln();
    let gap: Vec<f64> = phases
        .windows(2)
        .map(|w| ln(w[1].start - w[0].end))
        .collect();
    let iteration: Vec<f64> = phases.windows(2).map(|w| ln(w[1].end - w[0].end)).collect();
    let series = [Series::new(&gap), Series::new(&iteration)];
    let cost = |a: usize, b: usize| series.iter().map(|s| s.cost(a, b)).sum::<f64>();
    let pen = config.penalty * (m as f64).ln() * series.len() as f64;
    // Values [a, b) form a segment; a segment starting at value b begins with phase b + 1.
    binary_segmentation(m, min_len, pen, cost)
        .into_iter()
        .map(|b| if b == 0 { 0 } else { b + 1 })
        .collect()
}

/// One series of values, scaled by its noise, with prefix sums for O(1) segment costs.
struct Series {
    sum: Vec<f64>,
    sum_sq: Vec<f64>,
}

impl Series {
    /// The floor on the noise: a clean series (every interval alike) must not make every tiny
    /// rounding difference a change.
    const MIN_SIGMA: f64 = 0.01;

    fn new(values: &[f64]) -> Series {
        // σ from the median absolute difference of consecutive values: for Gaussian noise
        // |x_{i+1} - x_i| has median 0.6745·√2·σ, and a few changes of level do not move it.
        let mut diffs: Vec<f64> = values.windows(2).map(|w| (w[1] - w[0]).abs()).collect();
        let mid = diffs.len() / 2;
        let median = if diffs.is_empty() {
            0.0
        } else {
            *diffs.select_nth_unstable_by(mid, f64::total_cmp).1
        };
        let sigma = (median / (0.6745 * std::f64::consts::SQRT_2)).max(Series::MIN_SIGMA);
        let mut sum = Vec::with_capacity(values.len() + 1);
        let mut sum_sq = Vec::with_capacity(values.len() + 1);
        let (mut s, mut q) = (0.0, 0.0);
        sum.push(0.0);
        sum_sq.push(0.0);
        for &v in values {
            let v = v / sigma;
            s += v;
            q += v * v;
            sum.push(s);
            sum_sq.push(q);
        }
        Series { sum, sum_sq }
    }

    /// Sum of squared deviations from their mean of values `[a, b)`.
    fn cost(&self, a: usize, b: usize) -> f64 {
        let n = (b - a) as f64;
        let s = self.sum[b] - self.sum[a];
        (self.sum_sq[b] - self.sum_sq[a] - s * s / n).max(0.0)
    }
}

/// Binary segmentation over values `0..m`: the starts of the segments (the first is 0). The
/// split of a segment that lowers its cost the most is kept if it lowers it by more than `pen`,
/// every part at least `min_len` values long, and both parts are split again in turn. O(m) per
/// level of splits with prefix sums.
fn binary_segmentation(
    m: usize,
    min_len: usize,
    pen: f64,
    cost: impl Fn(usize, usize) -> f64,
) -> Vec<usize> {
    let mut starts = vec![0];
    let mut todo = vec![(0, m)];
    while let Some((a, b)) = todo.pop() {
        if b - a < 2 * min_len {
            continue;
        }
        let whole = cost(a, b);
        let (mut gain, mut at) = (0.0, 0);
        for t in a + min_len..=b - min_len {
            let g = whole - cost(a, t) - cost(t, b);
            if g > gain {
                (gain, at) = (g, t);
            }
        }
        if gain > pen {
            starts.push(at);
            todo.push((a, at));
            todo.push((at, b));
        }
    }
    starts.sort_unstable();
    starts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(s: f64, e: f64, b: u64) -> Event {
        Event::from_secs(s, e, b)
    }

    #[test]
    fn pieces_of_a_phase_join_and_background_drops() {
        // Two phases of four pieces 1 ms apart, a small background request between them.
        let mut events = Vec::new();
        for start in [10.0, 20.0] {
            for k in 0..4 {
                let s = start + k as f64 * 0.5;
                events.push(ev(s, s + 0.499, 1 << 20));
            }
        }
        events.push(ev(15.0, 15.001, 4096));
        events.sort_by_key(|e| e.start);
        let p = phases(&events);
        assert_eq!(p.len(), 2, "{p:?}");
        assert_eq!(p[0].bytes, 4 << 20);
        assert_eq!(p[1].start, Nanos::from_secs_f64(20.0).0);
    }

    #[test]
    fn binary_segmentation_finds_one_step_and_none_in_flat_noise() {
        let values: Vec<f64> = (0..40)
            .map(|i| if i < 20 { 1.0 } else { 2.0 } + 0.01 * ((i * 7 % 5) as f64 - 2.0))
            .collect();
        let s = Series::new(&values);
        assert_eq!(
            binary_segmentation(40, 4, 4.0 * 40f64.ln(), |a, b| s.cost(a, b)),
            vec![0, 20]
        );
        let flat: Vec<f64> = (0..40).map(|i| 0.05 * ((i * 7 % 5) as f64 - 2.0)).collect();
        let s = Series::new(&flat);
        assert_eq!(
            binary_segmentation(40, 4, 4.0 * 40f64.ln(), |a, b| s.cost(a, b)),
            vec![0]
        );
    }

    #[test]
    fn bad_settings_name_their_field() {
        for (c, field) in [
            (
                SegmentConfig {
                    min_phases: 2,
                    ..SegmentConfig::default()
                },
                "min_phases",
            ),
            (
                SegmentConfig {
                    penalty: 0.0,
                    ..SegmentConfig::default()
                },
                "penalty",
            ),
            (
                SegmentConfig {
                    same_period: 1.0,
                    ..SegmentConfig::default()
                },
                "same_period",
            ),
        ] {
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains(field), "{e}");
        }
        assert!(SegmentConfig::default().validate().is_ok());
    }
}
