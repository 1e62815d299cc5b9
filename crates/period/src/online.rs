//! Online detection: one detector per job, fed the job's completed requests one by one.
//!
//! **Memory** is bounded whatever the run length: requests are folded into *segments* (a start,
//! an end and a byte count) — a request that starts within a small gap of the open segment's end
//! joins it. At most [`OnlineConfig::capacity`] segments are kept. When they would overflow, the
//! gap under which neighbours are joined doubles and the segments are folded again (the gap stays
//! under 1/(4·capacity) of the history, far below any period the history can show); if that is
//! not enough, the oldest quarter is dropped. Once an estimate is confident, history older than
//! [`OnlineConfig::history_periods`] periods is dropped too, so old behaviour fades.
//!
//! **Two analyses.** [`OnlineDetector::estimate`] runs the offline analysis ([`crate::detect()`],
//! spectral, robust to background I/O and jitter) on the whole history, *and* the phase analysis
//! below on its most recent segments. [`OnlineDetector::estimate_phases`] runs the phase analysis
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
//! 3. The intervals between phase starts, newest first, form a *run* while the longest is at most
//!    1.25 times the shortest (at most 8). The period is the run's mean interval (`w_iter` by
//!    its definition). It is accepted when every phase of the run is idle inside for at most 20%
//!    of the period in total, its phases are separated by gaps of at least 20% of it, the newest
//!    phase began within two periods, and one of:
//!    - *start-up*: the run holds every interval of the job's history, or every one but the
//!      first (a first phase stretched by other jobs' I/O), and at least two;
//!    - *change*: at least three intervals, more than 20% away from the current estimate, and no
//!      older interval in the window like them (a new behaviour, not a recurring pattern);
//!    - *steady*: at least four intervals.
//! 4. Confidence: `k/(k+1) · (1 - CV)` over the run's `k` intervals.
//!
//! A *change* replaces the current estimate at once and drops the history before the run, so the
//! whole-history analysis sees the new behaviour only: a job whose period goes from 900 s to
//! 90 s, or from 40 s to 400 s, is followed after three of its new periods. Otherwise the
//! whole-history analysis wins when it is confident and agrees with the phase analysis within
//! 20%, the phase analysis when it is the only confident one or disagrees.
//!
//! Limits: before a job's second phase, a phase cut into three or more evenly spaced pieces looks
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
    /// 32), at least 4.
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
            Some(last) if event.start >= last.start && event.start <= last.end + gap => {
                last.end = last.end.max(event.end);
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
        while self.segments.len() > 1 && self.segments.front().is_some_and(|s| s.end < horizon) {
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
                    Some(l) if s.start <= l.end + gap => {
                        l.end = l.end.max(s.end);
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
        let whole = analyzer.analyze_window(segments, first, end, truncated);
        let chosen = match (whole.periodic(), recent.detection.periodic()) {
            (_, Some(_)) if recent.kind == Kind::Change => {
                self.cut(recent.run_from);
                recent.detection
            }
            (None, Some(_)) => recent.detection,
            (Some(w), Some(r)) if differ(w.period, r.period) => recent.detection,
            _ => whole,
        };
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
/// Longest run of intervals averaged.
const MAX_RUN: usize = 8;
/// In a run, the longest interval is at most this times the shortest.
const RUN_SPREAD: f64 = 1.25;
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
        // The run: newest intervals first, while they agree.
        let (mut run, mut lo, mut hi, mut sum) = (0usize, f64::INFINITY, 0.0f64, 0.0f64);
        for j in (0..intervals).rev() {
            let v = interval(j);
            let (l, h) = (lo.min(v), hi.max(v));
            if run == MAX_RUN || h > RUN_SPREAD * l {
                break;
            }
            (lo, hi, sum, run) = (l, h, sum + v, run + 1);
        }
        if run + 1 < min_phases || run == 0 {
            continue;
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
        // The run's phases: real phases, separated by real gaps, the newest one recent.
        let first = starts.len() - 1 - run;
        let newest = pieces[starts[starts.len() - 1]].start;
        let mut shaped = now.saturating_sub(newest).0 as f64 <= 2.0 * period;
        for j in first..starts.len() {
            let end = starts.get(j + 1).copied().unwrap_or(pieces.len());
            let idle: u64 = pieces[starts[j] + 1..end]
                .iter()
                .map(|p| p.gap.map_or(0, |g| g.0))
                .sum();
            let before = pieces[starts[j]].gap.map_or(f64::INFINITY, |g| g.0 as f64);
            if idle as f64 > INNER_IDLE * period || (j > first && before < PHASE_GAP * period) {
                shaped = false;
                break;
            }
        }
        if !shaped {
            continue;
        }
        let kind = if at_history_start && run + 1 >= intervals {
            Kind::StartUp
        } else if run >= 3
            && current.is_some_and(|c| (period / c.0 as f64 - 1.0).abs() > CHANGE)
            && (0..intervals - run).all(|j| {
                let v = interval(j);
                v * RUN_SPREAD < lo || v > hi * RUN_SPREAD
            })
        {
            Kind::Change
        } else if run >= 4 {
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
