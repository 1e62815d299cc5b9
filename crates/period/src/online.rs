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
//! **Cost**: [`OnlineDetector::observe`] is amortised O(1) (a comparison and an addition; a fold
//! of `capacity` segments every `capacity / 4` new ones at worst). [`OnlineDetector::estimate`]
//! runs the offline analysis ([`crate::detect()`]) twice — on the whole history and on its most
//! recent quarter — each over at most `capacity` segments and
//! [`Config::max_bins`](crate::Config::max_bins) bins: bounded, whatever the run length.
//!
//! **Change of behaviour**: the recent quarter wins when it is confident and disagrees with the
//! whole history by more than 20% (or the whole history is not confident any more): a job that
//! switches from a 10 s to a 100 s period is followed once a few of the new periods fit in that
//! quarter.
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

    /// The job's period as of `now`: the analysis of the whole history kept, unless its most
    /// recent quarter confidently says otherwise (see the module docs). A confident answer
    /// becomes [`OnlineDetector::current`]. Bounded cost.
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
        let end = now.max(first + Nanos(1));
        let truncated = self.truncated;
        let segments = self.segments.make_contiguous();
        let whole = analyzer.analyze_window(segments, first, end, truncated);
        let recent_start = end - Nanos((end - first).0 / 4);
        let from = segments.partition_point(|s| s.end < recent_start);
        let recent = analyzer.analyze_window(&segments[from..], recent_start, end, true);
        let chosen = match (whole.periodic(), recent.periodic()) {
            (None, Some(_)) => recent,
            (Some(w), Some(r))
                if (r.period.as_secs_f64() / w.period.as_secs_f64() - 1.0).abs() > 0.2 =>
            {
                recent
            }
            _ => whole,
        };
        if let Some(e) = chosen.periodic() {
            self.current = Some(*e);
            self.gap = self.config.merge_gap;
            self.forget_old();
        }
        chosen
    }
}
