//! Online detection: one detector per job, fed the job's completed requests one by one.
//!
//! **Memory** is bounded whatever the run length: requests are folded into *segments* (a start,
//! an end and a byte count) — a request that starts within a small gap of the open segment's end
//! joins it. At most [`OnlineConfig::capacity`] segments are kept. When they would overflow, the
//! gap under which neighbours are joined doubles and the segments are folded again (the gap stays
//! under 1/(4·capacity) of the history, far below any period the history can show); if that is
//! not enough, the oldest quarter is dropped. Once an estimate is confident, history older than
//! [`OnlineConfig::history_periods`] periods is dropped too, so old behaviour fades (but the last
//! [`KEPT_SEGMENTS`] stay, so that a period that grows tenfold still has phases in the history).
//! Across more than [`OnlineConfig::merge_gap`], a request joins only a segment that is not
//! background beside it (a phase's start is not moved back to the small requests before it), and
//! a small request joining a large segment adds its bytes without moving its end (a chain of
//! background requests does not carry a phase over its compute phase into the next one).
//!
//! **Two analyses.** [`OnlineDetector::estimate`] runs the offline analysis ([`crate::detect()`],
//! spectral, robust to background I/O and jitter) on the whole history — and, unless that
//! confirms the current period, on the history split where its behaviour changed
//! ([`crate::segment`], the change points `iosets detect` finds; the last behaviour counts and
//! the history before it is dropped) — *and* the phase analysis below on its most recent
//! segments. [`OnlineDetector::estimate_phases`] runs the phase analysis
//! alone: no spectrum, a few microseconds, cheap enough to run at every new burst.
//!
//! **The phase analysis** reads phases directly off the segments, so that a period is known from
//! the third phase start on (two phase starts give one gap, the third confirms it), whatever the
//! time scale:
//! 1. The last 48 segments; a segment under 1/32 of the largest one is background and ignored
//!    (the newest never is: it may be a phase that has just begun).
//! 2. Candidate thresholds are the gaps between segments that are at least twice the next smaller
//!    gap (valleys of the gap distribution). Under a threshold `θ`, segments joined across gaps
//!    under `θ` form one phase: a phase may hold short gaps (processes reaching a barrier at
//!    different times, a set holder lingering). The coarsest threshold that passes the checks
//!    below wins, so the pieces of one phase are never taken for phases of a shorter period.
//! 3. The intervals between phase starts, newest first, form a *run* while they agree: the longest
//!    at most 1.05 times the shortest for two intervals, 1.12 for three, 1.25 for more (random
//!    arrivals agree so by chance 2.4%, 0.3% and 0.1% of the time). The period is the run's mean
//!    interval (`w_iter` by its definition). It is accepted when every phase of the run is idle
//!    inside for at most 20% of the period in total, its complete phases move within a factor 1.5
//!    of one another's bytes, they are separated by gaps of at least 20% of the period, the
//!    newest phase began within two periods, and one of:
//!    - *start-up*: the run holds every interval of the job's history, or every one but a longer
//!      first one (a first phase stretched by other jobs' I/O), and at least two;
//!    - *change*: at least three intervals, more than 20% away from the current estimate, and no
//!      older interval in the window like them (a new behaviour, not a recurring pattern);
//!    - *steady*: at least four intervals, and every interval of the window (but perhaps a longer
//!      first one).
//! 4. Confidence: `k/(k+1) · (1 - CV)` over the run's `k` intervals.
//!
//! A *change* replaces the current estimate at once and drops the history before the run, so the
//! whole-history analysis sees the new behaviour only: a job whose period goes from 900 s to
//! 90 s, or from 40 s to 400 s, is followed after three of its new periods. Otherwise the
//! whole-history analysis wins when it is confident and agrees with the phase analysis within
//! 20%, the phase analysis when it is the only confident one or disagrees.
//!
//! Limits: three phase starts are little evidence — random arrivals whose first two intervals
//! happen to agree within 5% (about one stream in forty) are taken for a period until the
//! whole-history analysis or a change replaces it; before a job's second phase, a phase cut into three or more evenly spaced pieces looks
//! like a short period (nothing yet tells the pieces from phases); a new period under 1/100 of the
//! current one is not seen, as its gaps fall under the join gap (1% of the current period).
//!
//! **Reads and writes** are separate streams: [`JobDetector`] keeps one detector per direction,
//! so that a job that reads, computes, writes and computes has its iteration's period, not half
//! of it, and a job that only reads is detected like one that only writes.
//!
//! **Cost**: [`OnlineDetector::observe`] is amortised O(1) (a comparison and an addition; a fold
//! of `capacity` segments every `capacity / 4` new ones at worst). [`OnlineDetector::estimate`]
//! runs the offline analysis once over at most `capacity` segments and
//! [`Config::max_bins`](crate::Config::max_bins) bins, and the phase analysis over at most 48
//! segments: bounded, whatever the run length.
//!
//! Time is an argument: the detector reads no clock, so the server, the simulator and the tests
//! drive it alike.

use std::collections::VecDeque;

use iosets_types::Nanos;

use crate::detect::{Analyzer, Config, Detection, Estimate, NotPeriodicReason};
use crate::error::{Error, Result};
use crate::event::Event;
use crate::segment::{segment_window, SegmentConfig};

/// Whether `next` joins the segment `last`: always within `base` (the configured merge gap: the
/// pieces of one phase), within `gap` (the period-scaled or folding gap) unless `last` is
/// background beside `next` — a phase's first request must not join the small requests before
/// it, whose start would become the phase's.
fn joins(last: &Event, next: &Event, base: Nanos, gap: Nanos) -> bool {
    next.start <= last.end + base
        || (next.start <= last.end + gap && last.bytes.saturating_mul(8) >= next.bytes)
}

/// Whether `next`, joining `last`, moves its end: background beside `last` joined across more
/// than `base` adds its bytes but does not stretch the phase, else a chain of small requests
/// would carry the segment over the compute phase into the next phase.
fn stretches(last: &Event, next: &Event, base: Nanos) -> bool {
    next.start <= last.end + base || next.bytes.saturating_mul(8) >= last.bytes
}

/// Segments the history keeps however old they are (see [`OnlineConfig::history_periods`]).
/// 32: as many as the 32-period horizon keeps of a job with one segment per phase, so that the
/// steady state's history (and each estimate's cost) stays what the horizon gives; 64 doubled
/// detection's cost per request in `cargo bench -p iosets-runtime --bench book`.
pub const KEPT_SEGMENTS: usize = 32;

/// Settings of an [`OnlineDetector`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OnlineConfig {
    /// The analysis run by each [`OnlineDetector::estimate`]; [`Config::online`] by default.
    pub analysis: Config,
    /// Segments kept, at least 16 (default 1024: 32 KiB per job).
    pub capacity: usize,
    /// Requests closer than this to the open segment join it (default 1 ms). Grows while the
    /// segments overflow; see the module docs.
    pub merge_gap: Nanos,
    /// Once a period `T` is known, requests closer than `merge_fraction·T` join too (default
    /// 0.01), in [0, 0.1].
    pub merge_fraction: f64,
    /// Once a period `T` is known, history older than `history_periods·T` is dropped (default
    /// 32), at least 4; the last [`KEPT_SEGMENTS`] segments are kept whatever their age.
    pub history_periods: f64,
}

impl Default for OnlineConfig {
    fn default() -> OnlineConfig {
        OnlineConfig {
            analysis: Config::online(),
            capacity: 1024,
            merge_gap: Nanos::from_millis(1),
            merge_fraction: 0.01,
            history_periods: 32.0,
        }
    }
}

impl OnlineConfig {
    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<()> {
        self.analysis.validate()?;
        if self.capacity < 16 {
            return Err(Error::InvalidConfig {
                field: "capacity",
                value: self.capacity.to_string(),
                reason: "expected at least 16 segments",
            });
        }
        if !(0.0..=0.1).contains(&self.merge_fraction) {
            return Err(Error::InvalidConfig {
                field: "merge_fraction",
                value: self.merge_fraction.to_string(),
                reason: "expected a fraction of the period in [0, 0.1]",
            });
        }
        if self.history_periods.is_nan() || self.history_periods < 4.0 {
            return Err(Error::InvalidConfig {
                field: "history_periods",
                value: self.history_periods.to_string(),
                reason: "expected at least 4 periods",
            });
        }
        Ok(())
    }
}

/// A job's period detector for the server: see the module docs.
#[derive(Debug)]
pub struct OnlineDetector {
    config: OnlineConfig,
    /// Created at the first [`OnlineDetector::estimate`]; callers holding many detectors share
    /// one through [`OnlineDetector::estimate_with`] instead (its buffers grow to
    /// [`Config::max_bins`](crate::Config::max_bins) bins, about 1 MiB with
    /// [`Config::online`](crate::Config::online)).
    analyzer: Option<Analyzer>,
    /// Sorted by start; the last one is open to new requests.
    segments: VecDeque<Event>,
    /// Current join gap (≥ `config.merge_gap`).
    gap: Nanos,
    /// The latest confident estimate.
    current: Option<Estimate>,
    /// Whether history was ever dropped (the first kept segment may then be a cut phase).
    truncated: bool,
    observed: u64,
    discarded: u64,
    /// Segments ever opened (each a new burst of I/O, or a piece of one).
    opened: u64,
}

impl OnlineDetector {
    /// A detector with `config`, validated.
    pub fn new(config: OnlineConfig) -> Result<OnlineDetector> {
        config.validate()?;
        // Checked now, so that creating it later cannot fail.
        Analyzer::new(config.analysis)?;
        Ok(OnlineDetector {
            analyzer: None,
            // Grows with the history: a job seen once holds one segment, not `capacity`.
            segments: VecDeque::new(),
            gap: config.merge_gap,
            current: None,
            truncated: false,
            observed: 0,
            discarded: 0,
            opened: 0,
            config,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &OnlineConfig {
        &self.config
    }

    /// The latest confident estimate, if any (kept until a new confident one replaces it).
    pub fn current(&self) -> Option<&Estimate> {
        self.current.as_ref()
    }

    /// Segments held now (never more than [`OnlineConfig::capacity`]).
    pub fn retained(&self) -> usize {
        self.segments.len()
    }

    /// Requests observed so far.
    pub fn observed(&self) -> u64 {
        self.observed
    }

    /// Segments ever opened: a new one starts when a request begins farther than the join gap
    /// from the last one, so a caller can skip [`OnlineDetector::estimate`] until a new burst
    /// has begun.
    pub fn opened(&self) -> u64 {
        self.opened
    }

    /// Heap bytes held: the segments' buffer, plus the own analyzer's buffers if
    /// [`OnlineDetector::estimate`] created one.
    pub fn heap_bytes(&self) -> usize {
        self.segments.capacity() * std::mem::size_of::<Event>()
            + self.analyzer.as_ref().map_or(0, Analyzer::heap_bytes)
    }

    /// Requests that arrived later than all the history kept, and were dropped.
    pub fn discarded(&self) -> u64 {
        self.discarded
    }

    fn join_gap(&self) -> Nanos {
        let by_period = self.current.map_or(Nanos::ZERO, |e| {
            Nanos((e.period.0 as f64 * self.config.merge_fraction) as u64)
        });
        self.gap.max(by_period)
    }

    /// Takes one completed request into account. Amortised O(1).
    pub fn observe(&mut self, event: Event) {
        self.observed += 1;
        if event.bytes == 0 {
            return;
        }
        let gap = self.join_gap();
        match self.segments.back_mut() {
            None => {
                self.segments.push_back(event);
                self.opened += 1;
            }
            // Across more than the base gap, only into a segment that is not background beside
            // the request: a phase's first request must not join the small requests before it,
            // whose start would become the phase's.
            Some(last)
                if event.start >= last.start && joins(last, &event, self.config.merge_gap, gap) =>
            {
                if stretches(last, &event, self.config.merge_gap) {
                    last.end = last.end.max(event.end);
                }
                last.bytes = last.bytes.saturating_add(event.bytes);
            }
            Some(last) if event.start >= last.start => {
                self.segments.push_back(event);
                self.opened += 1;
            }
            Some(_) => {
                // Completed out of order: credit the segment it started in (or after).
                let i = self.segments.partition_point(|s| s.start <= event.start);
                if i == 0 {
                    let first = &mut self.segments[0];
                    if event.end + gap >= first.start && !self.truncated {
                        first.start = event.start;
                        first.bytes = first.bytes.saturating_add(event.bytes);
                    } else {
                        self.discarded += 1;
                    }
                } else {
                    let s = &mut self.segments[i - 1];
                    s.end = s.end.max(event.end);
                    s.bytes = s.bytes.saturating_add(event.bytes);
                }
            }
        }
        self.forget_old();
        if self.segments.len() > self.config.capacity {
            self.compact();
        }
    }

    /// Drops history older than `history_periods` confident periods.
    fn forget_old(&mut self) {
        let (Some(est), Some(last)) = (self.current, self.segments.back()) else {
            return;
        };
        let keep = Nanos((est.period.0 as f64 * self.config.history_periods) as u64);
        let horizon = last.end - keep;
        // The last KEPT_SEGMENTS stay whatever their age: a period that grows tenfold still has
        // phases enough in the history for its change to be seen.
        while self.segments.len() > KEPT_SEGMENTS
            && self.segments.front().is_some_and(|s| s.end < horizon)
        {
            self.segments.pop_front();
            self.truncated = true;
        }
    }

    /// Folds neighbours under a doubled gap, or drops the oldest quarter.
    fn compact(&mut self) {
        let (Some(first), Some(last)) = (self.segments.front(), self.segments.back()) else {
            return;
        };
        let span = last.end - first.start;
        let limit = Nanos(span.0 / (4 * self.config.capacity as u64));
        let target = self.config.capacity * 3 / 4;
        let mut gap = self.gap;
        while self.segments.len() > target {
            let next = Nanos(gap.0.saturating_mul(2).max(1));
            if next > limit {
                break;
            }
            gap = next;
            let old = std::mem::take(&mut self.segments);
            for s in old {
                match self.segments.back_mut() {
                    // As in `observe`: a phase does not join the background before it.
                    Some(l) if joins(l, &s, self.config.merge_gap, gap) => {
                        if stretches(l, &s, self.config.merge_gap) {
                            l.end = l.end.max(s.end);
                        }
                        l.bytes = l.bytes.saturating_add(s.bytes);
                    }
                    _ => self.segments.push_back(s),
                }
            }
        }
        self.gap = gap;
        while self.segments.len() > target {
            self.segments.pop_front();
            self.truncated = true;
        }
    }

    /// The job's period as of `now`: the whole-history analysis and the phase analysis, chosen
    /// between as the module docs say. A confident answer becomes [`OnlineDetector::current`].
    /// Bounded cost.
    pub fn estimate(&mut self, now: Nanos) -> Detection {
        let mut analyzer = match self.analyzer.take() {
            Some(a) => a,
            None => Analyzer::new(self.config.analysis).expect("checked by OnlineDetector::new"),
        };
        let detection = self.estimate_with(&mut analyzer, now);
        self.analyzer = Some(analyzer);
        detection
    }

    /// As [`OnlineDetector::estimate`], with a caller's analyzer (one shared by many detectors
    /// keeps one set of buffers instead of one per job). The analyzer's own settings are used.
    pub fn estimate_with(&mut self, analyzer: &mut Analyzer, now: Nanos) -> Detection {
        let Some(first) = self.segments.front().map(|s| s.start) else {
            return Detection::NotPeriodic {
                reason: NotPeriodicReason::NoEvents,
                best: None,
            };
        };
        let recent = self.phases(now);
        let end = now.max(first + Nanos(1));
        let truncated = self.truncated;
        let segments = self.segments.make_contiguous();
        // The whole history first: a job whose history confirms its current period (the steady
        // state, most estimates) costs one analysis. Otherwise the history is split where its
        // behaviour changed (the offline change points): its last behaviour is the job's, and
        // what came before it is forgotten.
        let all = analyzer.analyze_window(segments, first, end, truncated);
        let steady = all
            .periodic()
            .is_some_and(|w| self.current.is_some_and(|c| !differ(w.period, c.period)));
        let (whole, split_from) = if steady {
            (all, None)
        } else {
            let split = segment_window(
                segments,
                first,
                end,
                truncated,
                analyzer,
                &SegmentConfig::default(),
            )
            .expect("the default settings are valid");
            let last = split.last();
            let from = (split.segments.len() > 1 && last.detection.is_periodic())
                .then(|| segments.partition_point(|s| s.start < last.start));
            (last.detection, from)
        };
        let chosen = match (whole.periodic(), recent.detection.periodic()) {
            (_, Some(_)) if recent.kind == Kind::Change => {
                self.cut(recent.run_from);
                recent.detection
            }
            (None, Some(_)) => recent.detection,
            (Some(w), Some(r)) if differ(w.period, r.period) => recent.detection,
            _ => whole,
        };
        if recent.kind != Kind::Change {
            if let Some(from) = split_from {
                self.cut(from);
            }
        }
        if let Some(e) = chosen.periodic() {
            self.adopt(*e);
        }
        chosen
    }

    /// The phase analysis alone (see the module docs): no spectrum, at most 48 segments, so cheap
    /// enough to run whenever a new burst begins. Its answer becomes [`OnlineDetector::current`]
    /// when there was none yet, or when it shows a change of behaviour.
    pub fn estimate_phases(&mut self, now: Nanos) -> Detection {
        let recent = self.phases(now);
        if let Some(e) = recent.detection.periodic() {
            if recent.kind == Kind::Change {
                self.cut(recent.run_from);
                self.adopt(*e);
            } else if self.current.is_none() {
                self.adopt(*e);
            }
        }
        recent.detection
    }

    fn adopt(&mut self, e: Estimate) {
        self.current = Some(e);
        self.gap = self.config.merge_gap;
        self.forget_old();
    }

    /// Drops the segments before `from`, which starts a phase (so the history still begins with
    /// a whole phase).
    fn cut(&mut self, from: usize) {
        if from > 0 {
            self.segments.drain(..from.min(self.segments.len()));
            self.truncated = false;
        }
    }

    fn phases(&mut self, now: Nanos) -> Finding {
        let clean = !self.truncated;
        let current = self.current.map(|e| e.period);
        let min_phases = self.config.analysis.min_phases;
        let min_confidence = self.config.analysis.min_confidence;
        let segments = self.segments.make_contiguous();
        recent_phases(segments, clean, now, current, min_phases, min_confidence)
    }

    /// Bytes in the history kept.
    pub fn held_bytes(&self) -> u64 {
        self.segments
            .iter()
            .fold(0u64, |a, s| a.saturating_add(s.bytes))
    }
}

/// Whether two periods differ by more than 20%.
fn differ(a: Nanos, b: Nanos) -> bool {
    (b.as_secs_f64() / a.as_secs_f64().max(1e-12) - 1.0).abs() > 0.2
}

/// Segments the phase analysis reads, newest last.
const PHASE_WINDOW: usize = 48;
/// A segment under `1/BACKGROUND_SHARE` of the window's largest is background I/O.
const BACKGROUND_SHARE: u64 = 32;
/// Thresholds tried, coarsest first.
const MAX_THRESHOLDS: usize = 6;
/// In a run of `k` intervals, the longest is at most `spread(k)` times the shortest: the fewer
/// the intervals, the closer they must agree (random arrivals agree by chance within these
/// bounds about 2.4% of the time for two intervals, 0.3% for three, 0.1% for four).
fn spread(k: usize) -> f64 {
    match k {
        0..=2 => 1.05,
        3 => 1.12,
        _ => RUN_SPREAD,
    }
}
/// The widest spread of a run.
const RUN_SPREAD: f64 = 1.25;
/// The complete phases of a run move at most this factor more bytes than one another.
const VOLUME_SPREAD: f64 = 1.5;
/// Idle time inside one phase, at most, as a share of the period.
const INNER_IDLE: f64 = 0.2;
/// Idle time before a phase of the run, at least, as a share of the period.
const PHASE_GAP: f64 = 0.2;
/// A change differs from the current estimate by more than this share.
const CHANGE: f64 = 0.2;

/// How a phase-analysis answer was reached (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    StartUp,
    Change,
    Steady,
    None,
}

/// A phase-analysis answer.
#[derive(Clone, Copy, Debug)]
struct Finding {
    detection: Detection,
    kind: Kind,
    /// Index in the segments of the run's first phase start.
    run_from: usize,
}

/// One segment the phase analysis keeps.
#[derive(Clone, Copy, Debug)]
struct Piece {
    /// Index in the segments.
    index: usize,
    start: Nanos,
    bytes: u64,
    /// Idle time before it; `None` at the start of a clean history (a phase start whatever the
    /// threshold).
    gap: Option<Nanos>,
}

/// The phase analysis of the module docs over `segments` (sorted by start, the last possibly
/// still growing). `clean`: the first segment is the job's first I/O.
fn recent_phases(
    segments: &[Event],
    clean: bool,
    now: Nanos,
    current: Option<Nanos>,
    min_phases: usize,
    min_confidence: f64,
) -> Finding {
    let none = |reason, best| Finding {
        detection: Detection::NotPeriodic { reason, best },
        kind: Kind::None,
        run_from: 0,
    };
    let n = segments.len();
    if n == 0 {
        return none(NotPeriodicReason::NoEvents, None);
    }
    let from = n - n.min(PHASE_WINDOW);
    let largest = segments[from..].iter().map(|s| s.bytes).max().unwrap_or(0);
    let mut pieces: Vec<Piece> = Vec::with_capacity(n - from);
    let mut prev_end = match from {
        0 if clean => None,
        0 => Some(segments[0].start),
        _ => Some(segments[from - 1].end),
    };
    for (i, s) in segments.iter().enumerate().skip(from) {
        if i + 1 < n && s.bytes.saturating_mul(BACKGROUND_SHARE) < largest {
            continue;
        }
        pieces.push(Piece {
            index: i,
            start: s.start,
            bytes: s.bytes,
            gap: prev_end.map(|e| s.start.saturating_sub(e)),
        });
        prev_end = Some(prev_end.map_or(s.end, |e| e.max(s.end)));
    }
    let at_history_start = from == 0 && clean;

    // Valleys of the gap distribution, coarsest first.
    let mut gaps: Vec<u64> = pieces[1..]
        .iter()
        .filter_map(|p| p.gap.map(|g| g.0))
        .filter(|&g| g > 0)
        .collect();
    gaps.sort_unstable();
    gaps.dedup();
    let mut thresholds: Vec<u64> = Vec::with_capacity(MAX_THRESHOLDS);
    for k in (0..gaps.len()).rev() {
        if k == 0 || gaps[k] >= 2 * gaps[k - 1] {
            thresholds.push(gaps[k]);
            if thresholds.len() == MAX_THRESHOLDS {
                break;
            }
        }
    }

    let mut most_phases = pieces.iter().filter(|p| p.gap.is_none()).count();
    let mut best: Option<Estimate> = None;
    let mut starts: Vec<usize> = Vec::with_capacity(pieces.len());
    for theta in thresholds {
        let theta = Nanos(theta);
        starts.clear();
        starts.extend(
            pieces
                .iter()
                .enumerate()
                .filter(|(_, p)| p.gap.is_none_or(|g| g >= theta))
                .map(|(i, _)| i),
        );
        most_phases = most_phases.max(starts.len());
        if starts.len() < min_phases {
            continue;
        }
        let interval = |j: usize| (pieces[starts[j + 1]].start - pieces[starts[j]].start).0 as f64;
        let intervals = starts.len() - 1;
        // The run: newest intervals first, while they agree within the spread their number
        // allows.
        let (mut run, mut lo, mut hi, mut sum) = (0usize, f64::INFINITY, 0.0f64, 0.0f64);
        let mut longest = 0usize;
        for j in (0..intervals).rev() {
            let v = interval(j);
            let (l, h) = (lo.min(v), hi.max(v));
            if h > RUN_SPREAD * l {
                break;
            }
            (lo, hi, longest) = (l, h, longest + 1);
            if h <= spread(longest) * l {
                run = longest;
            }
        }
        if run + 1 < min_phases || run == 0 {
            continue;
        }
        (lo, hi) = (f64::INFINITY, 0.0);
        for j in intervals - run..intervals {
            let v = interval(j);
            (lo, hi, sum) = (lo.min(v), hi.max(v), sum + v);
        }
        let period = sum / run as f64;
        let var = (intervals - run..intervals)
            .map(|j| (interval(j) - period).powi(2))
            .sum::<f64>()
            / run as f64;
        let regularity = (1.0 - var.sqrt() / period).clamp(0.0, 1.0);
        let estimate = Estimate {
            period: Nanos(period.round() as u64),
            confidence: (run as f64 / (run as f64 + 1.0) * regularity).clamp(0.0, 1.0),
            phases: run + 1,
            regularity,
            autocorrelation: 0.0,
            spectral_period: None,
        };
        // The run's phases: real phases (alike in volume, little idle inside), separated by real
        // gaps, the newest one recent.
        let first = starts.len() - 1 - run;
        let newest = pieces[starts[starts.len() - 1]].start;
        let mut shaped = now.saturating_sub(newest).0 as f64 <= 2.0 * period;
        let (mut least, mut most) = (u64::MAX, 0u64);
        for j in first..starts.len() {
            let end = starts.get(j + 1).copied().unwrap_or(pieces.len());
            let phase = &pieces[starts[j]..end];
            let idle: u64 = phase[1..].iter().map(|p| p.gap.map_or(0, |g| g.0)).sum();
            let before = phase[0].gap.map_or(f64::INFINITY, |g| g.0 as f64);
            if idle as f64 > INNER_IDLE * period || (j > first && before < PHASE_GAP * period) {
                shaped = false;
                break;
            }
            if j + 1 < starts.len() {
                let bytes = phase.iter().fold(0u64, |a, p| a.saturating_add(p.bytes));
                (least, most) = (least.min(bytes), most.max(bytes));
            }
        }
        if !shaped || most as f64 > VOLUME_SPREAD * least as f64 {
            continue;
        }
        // The run holds the window's every interval, but perhaps a longer first one (a first
        // phase stretched by other jobs' I/O, or one cut by the window).
        let whole_window = run == intervals || (run + 1 == intervals && interval(0) > hi);
        // A change first, and a start-up only before any period is known: with the whole history
        // kept, a coarse threshold takes the old behaviour for one long first phase.
        let kind = if run >= 3
            && current.is_some_and(|c| (period / c.0 as f64 - 1.0).abs() > CHANGE)
            && (0..intervals - run).all(|j| {
                let v = interval(j);
                v * RUN_SPREAD < lo || v > hi * RUN_SPREAD
            }) {
            Kind::Change
        } else if whole_window && at_history_start && current.is_none() {
            Kind::StartUp
        } else if whole_window && run >= 4 {
            Kind::Steady
        } else {
            Kind::None
        };
        if kind == Kind::None || estimate.confidence < min_confidence {
            if best.is_none_or(|b| b.confidence < estimate.confidence) {
                best = Some(estimate);
            }
            continue;
        }
        return Finding {
            detection: Detection::Periodic(estimate),
            kind,
            run_from: pieces[starts[first]].index,
        };
    }
    if most_phases < min_phases {
        none(
            NotPeriodicReason::TooFewPhases {
                phases: most_phases,
            },
            best,
        )
    } else {
        none(NotPeriodicReason::LowConfidence, best)
    }
}

/// Which way a request moved its bytes: each direction has its own phases.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// From storage to the job.
    Read,
    /// From the job to storage.
    Write,
}

/// A job's detector with reads and writes apart: one [`OnlineDetector`] per direction, created
/// at the direction's first request. The job's estimate is the confident one, or with both
/// confident, the one of the direction holding more bytes in its history (see the module docs).
#[derive(Debug)]
pub struct JobDetector {
    config: OnlineConfig,
    read: Option<Box<OnlineDetector>>,
    write: Option<Box<OnlineDetector>>,
}

impl JobDetector {
    /// A detector whose directions each use `config`, validated.
    pub fn new(config: OnlineConfig) -> Result<JobDetector> {
        OnlineDetector::new(config)?;
        Ok(JobDetector {
            config,
            read: None,
            write: None,
        })
    }

    /// The configuration of each direction.
    pub fn config(&self) -> &OnlineConfig {
        &self.config
    }

    /// The detector of `direction`, if that direction has seen a request.
    pub fn direction(&self, direction: Direction) -> Option<&OnlineDetector> {
        match direction {
            Direction::Read => self.read.as_deref(),
            Direction::Write => self.write.as_deref(),
        }
    }

    /// Takes one completed request of `direction` into account. Amortised O(1).
    pub fn observe(&mut self, direction: Direction, event: Event) {
        let slot = match direction {
            Direction::Read => &mut self.read,
            Direction::Write => &mut self.write,
        };
        slot.get_or_insert_with(|| {
            Box::new(OnlineDetector::new(self.config).expect("checked by JobDetector::new"))
        })
        .observe(event);
    }

    /// Segments ever opened, over both directions (see [`OnlineDetector::opened`]).
    pub fn opened(&self) -> u64 {
        self.both().map(OnlineDetector::opened).sum()
    }

    /// Heap bytes held by both directions.
    pub fn heap_bytes(&self) -> usize {
        self.both()
            .map(|d| std::mem::size_of::<OnlineDetector>() + d.heap_bytes())
            .sum()
    }

    /// The job's latest confident estimate and its direction: the only direction with one, or
    /// the one holding more bytes in its history (writes on a tie).
    pub fn current(&self) -> Option<(Direction, Estimate)> {
        let read = self.read.as_deref().and_then(|d| d.current().copied());
        let write = self.write.as_deref().and_then(|d| d.current().copied());
        match (read, write) {
            (Some(r), Some(w)) => {
                let (rb, wb) = (
                    self.read.as_deref().map_or(0, OnlineDetector::held_bytes),
                    self.write.as_deref().map_or(0, OnlineDetector::held_bytes),
                );
                Some(if rb > wb {
                    (Direction::Read, r)
                } else {
                    (Direction::Write, w)
                })
            }
            (Some(r), None) => Some((Direction::Read, r)),
            (None, Some(w)) => Some((Direction::Write, w)),
            (None, None) => None,
        }
    }

    /// [`OnlineDetector::estimate_with`] on each direction; returns [`JobDetector::current`].
    pub fn estimate_with(
        &mut self,
        analyzer: &mut Analyzer,
        now: Nanos,
    ) -> Option<(Direction, Estimate)> {
        for d in self.both_mut() {
            d.estimate_with(analyzer, now);
        }
        self.current()
    }

    /// [`OnlineDetector::estimate_phases`] on each direction; returns [`JobDetector::current`].
    pub fn estimate_phases(&mut self, now: Nanos) -> Option<(Direction, Estimate)> {
        for d in self.both_mut() {
            d.estimate_phases(now);
        }
        self.current()
    }

    fn both(&self) -> impl Iterator<Item = &OnlineDetector> + '_ {
        self.read
            .as_deref()
            .into_iter()
            .chain(self.write.as_deref())
    }

    fn both_mut(&mut self) -> impl Iterator<Item = &mut OnlineDetector> + '_ {
        self.read
            .as_deref_mut()
            .into_iter()
            .chain(self.write.as_deref_mut())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::{poisson, PeriodicSpec};

    fn detector() -> OnlineDetector {
        OnlineDetector::new(OnlineConfig::default()).unwrap()
    }

    /// Events in the order they complete.
    fn by_completion(mut events: Vec<Event>) -> Vec<Event> {
        events.sort_by_key(|e| (e.end, e.start));
        events
    }

    fn rel(got: Nanos, want_s: f64) -> f64 {
        (got.as_secs_f64() / want_s - 1.0).abs()
    }

    /// Feeds `events` one by one, running the phase check after each; returns, per event, the
    /// current estimate's period.
    fn phase_checked(d: &mut OnlineDetector, events: &[Event]) -> Vec<Option<Nanos>> {
        events
            .iter()
            .map(|e| {
                d.observe(*e);
                d.estimate_phases(e.end);
                d.current().map(|c| c.period)
            })
            .collect()
    }

    #[test]
    fn the_phase_check_knows_the_period_at_the_third_phase_start_at_any_scale() {
        for period in [0.3, 1.2, 6.0, 24.0, 384.0, 3600.0] {
            let trace = PeriodicSpec::new(period, 8).generate();
            let events = by_completion(trace.events.clone());
            let mut d = detector();
            let seen = phase_checked(&mut d, &events);
            for (e, p) in events.iter().zip(&seen) {
                let third = trace.phase_starts[2];
                match p {
                    None => assert!(e.start < third, "{period}: none at {e:?}"),
                    Some(p) => {
                        assert!(e.start >= third, "{period}: {p:?} before the third phase");
                        assert!(rel(*p, period) < 0.01, "{period}: {p:?}");
                    }
                }
            }
        }
    }

    /// Random arrivals: the phase check is confident only where three phase starts cannot tell
    /// (the first few requests' intervals agreeing by chance), in a few streams out of a hundred,
    /// never later in a stream.
    #[test]
    fn the_phase_check_is_rarely_fooled_by_aperiodic_input_and_only_at_its_start() {
        let (mut streams, mut fooled) = (0, 0);
        for seed in 0..100 {
            for (rate, duration) in [(0.5, 0.1), (5.0, 0.01), (0.05, 2.0)] {
                let events = by_completion(poisson(300, rate, 1 << 20, duration, seed));
                let mut d = detector();
                let seen = phase_checked(&mut d, &events);
                streams += 1;
                if let Some(i) = seen.iter().position(Option::is_some) {
                    fooled += 1;
                    assert!(
                        i < 8,
                        "seed {seed}, rate {rate}: at request {i}: {:?}",
                        d.current()
                    );
                }
            }
        }
        eprintln!("{fooled} of {streams} random streams taken for periodic");
        assert!(fooled * 100 <= 4 * streams, "{fooled} of {streams}");
    }

    #[test]
    fn jitter_and_background_never_give_a_wrong_period() {
        for seed in 0..10 {
            for (jitter, background) in [(0.1, false), (0.0, true), (0.1, true)] {
                let trace = PeriodicSpec {
                    jitter,
                    background,
                    seed,
                    ..PeriodicSpec::new(24.0, 30)
                }
                .generate();
                let truth = trace.true_period_s().unwrap();
                let events = by_completion(trace.events.clone());
                let mut d = detector();
                for p in phase_checked(&mut d, &events).into_iter().flatten() {
                    assert!(
                        rel(p, truth) < 0.15,
                        "seed {seed}, {jitter}, {background}: {p:?}"
                    );
                }
                assert!(d.current().is_some(), "seed {seed}, {jitter}, {background}");
            }
        }
    }

    /// Phases of 8 × 1 MiB requests, in `groups` (offset from the phase start, requests),
    /// every `period` from `from`, `count` times.
    fn grouped(from: f64, period: f64, count: usize, groups: &[(f64, usize)]) -> Vec<Event> {
        let mut out = Vec::new();
        for k in 0..count {
            let t = from + k as f64 * period;
            for &(offset, requests) in groups {
                for r in 0..requests {
                    let s = t + offset + r as f64 * 0.01;
                    out.push(Event::from_secs(s, s + 0.01, 1 << 20));
                }
            }
        }
        out
    }

    #[test]
    fn pieces_of_one_phase_with_gaps_of_a_tenth_of_the_period_are_one_phase() {
        // Three groups: the last 2.4 s (10% of 24 s) after the first, gaps 1.4 s and 0.8 s.
        let events = grouped(5.0, 24.0, 10, &[(0.0, 4), (1.5, 2), (2.4, 2)]);
        let mut d = detector();
        let seen = phase_checked(&mut d, &events);
        for p in seen.iter().flatten() {
            assert!(rel(*p, 24.0) < 0.01, "{p:?}");
        }
        assert!(rel(d.current().unwrap().period, 24.0) < 0.01);
        // The spectral analysis agrees once it runs.
        let det = d.estimate(events.last().unwrap().end);
        assert!(rel(det.period().unwrap(), 24.0) < 0.02, "{det:?}");
    }

    /// A job following `before` for `n` phases then `after`: the number of new periods after
    /// its last old phase start at which the phase check follows.
    fn follows(before: f64, after: f64, n: usize) -> f64 {
        let old = grouped(0.0, before, n, &[(0.0, 8)]);
        let last_old = (n - 1) as f64 * before;
        let new = grouped(last_old + after, after, 8, &[(0.0, 8)]);
        let events: Vec<Event> = old.into_iter().chain(new).collect();
        let mut d = detector();
        let mut moved = None;
        for (e, p) in events.iter().zip(phase_checked(&mut d, &events)) {
            let Some(p) = p else {
                let third = 2.0 * before + 0.01;
                assert!(e.start.as_secs_f64() < third, "{before}: none at {e:?}");
                continue;
            };
            if e.start.as_secs_f64() < last_old + after {
                assert!(
                    rel(p, before) < 0.01,
                    "{before} -> {after}: {p:?} too early"
                );
            } else if rel(p, after) < 0.01 {
                moved.get_or_insert(e.start.as_secs_f64());
            } else {
                assert!(moved.is_none(), "{before} -> {after}: lost at {e:?}: {p:?}");
            }
        }
        let moved = moved.unwrap_or_else(|| panic!("{before} -> {after}: never followed"));
        (moved - last_old) / after
    }

    #[test]
    fn a_change_of_behaviour_is_followed_after_three_new_periods_both_ways() {
        for (before, after, n) in [
            (40.0, 400.0, 40),
            (900.0, 90.0, 12),
            (10.0, 100.0, 40),
            (100.0, 10.0, 20),
            (0.3, 3.0, 40),
        ] {
            let k = follows(before, after, n);
            assert!(k <= 3.01, "{before} -> {after}: after {k} new periods");
        }
    }

    #[test]
    fn reads_and_writes_of_one_iteration_give_the_iteration_period() {
        // Iteration of 50 s: reads at 0, writes at 25 (alike: together they repeat every 25 s).
        let reads = grouped(1.0, 50.0, 8, &[(0.0, 8)]);
        let writes = grouped(26.0, 50.0, 8, &[(0.0, 8)]);
        let mut events: Vec<(Direction, Event)> = reads
            .iter()
            .map(|e| (Direction::Read, *e))
            .chain(writes.iter().map(|e| (Direction::Write, *e)))
            .collect();
        events.sort_by_key(|(_, e)| (e.end, e.start));
        let mut apart = JobDetector::new(OnlineConfig::default()).unwrap();
        let mut together = detector();
        for (dir, e) in &events {
            apart.observe(*dir, *e);
            apart.estimate_phases(e.end);
            together.observe(*e);
            together.estimate_phases(e.end);
        }
        let (dir, est) = apart.current().unwrap();
        assert!(rel(est.period, 50.0) < 0.01, "{est:?}");
        assert_eq!(dir, Direction::Write, "a tie goes to writes");
        // Not telling the directions apart gives half the iteration.
        assert!(rel(together.current().unwrap().period, 25.0) < 0.01);

        // Reads only: as writes only.
        let mut r = JobDetector::new(OnlineConfig::default()).unwrap();
        let mut w = JobDetector::new(OnlineConfig::default()).unwrap();
        for e in &reads {
            r.observe(Direction::Read, *e);
            r.estimate_phases(e.end);
            w.observe(Direction::Write, *e);
            w.estimate_phases(e.end);
        }
        let (rd, re) = r.current().unwrap();
        let (wd, we) = w.current().unwrap();
        assert_eq!((rd, wd), (Direction::Read, Direction::Write));
        assert_eq!(re, we);
        assert!(w.direction(Direction::Read).is_none());
        assert!(r.heap_bytes() > 0 && r.opened() == 8);
    }

    #[test]
    fn the_direction_with_more_bytes_wins() {
        // Writes every 20 s, big; reads every 300 s, small: the writes' period.
        let writes = grouped(1.0, 20.0, 30, &[(0.0, 8)]);
        let reads = grouped(2.0, 300.0, 3, &[(0.0, 2)]);
        let mut d = JobDetector::new(OnlineConfig::default()).unwrap();
        let mut all: Vec<(Direction, Event)> = writes
            .iter()
            .map(|e| (Direction::Write, *e))
            .chain(reads.iter().map(|e| (Direction::Read, *e)))
            .collect();
        all.sort_by_key(|(_, e)| e.end);
        let mut analyzer = Analyzer::new(Config::online()).unwrap();
        for (dir, e) in &all {
            d.observe(*dir, *e);
        }
        let (dir, est) = d
            .estimate_with(&mut analyzer, all.last().unwrap().1.end)
            .unwrap();
        assert_eq!(dir, Direction::Write);
        assert!(rel(est.period, 20.0) < 0.02, "{est:?}");
    }
}
