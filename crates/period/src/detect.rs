//! Offline detection: one window of events in, one [`Detection`] out.
//!
//! The method, in order:
//! 1. **Bin** the bandwidth: the window `[t0, t1]` is cut into `n` equal bins (a power of two) and
//!    every event's bytes are spread evenly over its `[start, end]` (O(events + n), whatever the
//!    events' lengths).
//! 2. **Spectrum**: FFT of the mean-removed signal; the strongest peaks (at least two cycles in the
//!    window) give candidate periods, refined between bins by a parabola through the peak.
//! 3. **Autocorrelation** (by FFT, unbiased): every candidate, and its halves, thirds, doubles and
//!    triples, is moved to the nearest true local maximum of the autocorrelation; the *smallest*
//!    lag whose correlation is within 80% of the best wins. A harmonic (half the period) has a low
//!    correlation for any duty cycle under 50% and is dropped; a sub-harmonic (double the period)
//!    correlates as well as the period but is longer and loses.
//! 4. **Bursts**: bins above a tenth of the volume-weighted median bandwidth form bursts; gaps under
//!    5% of the candidate period are bridged and bursts under a tenth of the typical burst volume
//!    (background I/O) are dropped. Bursts closer than 0.4 periods to the previous one are parts of
//!    the same phase. The period is then `w_iter` by its definition: the time between the first
//!    and last phase starts divided by the number of periods between them (an interval of about
//!    `k` periods counts `k`, so a missed phase does not double the estimate).
//! 5. **Confidence** in `[0, 1]`: `n/(n+1) · (0.75·regularity + 0.25·autocorrelation)`, where `n`
//!    is the number of intervals between phases, `regularity` is `1 - CV` of the intervals times
//!    the share of intervals that are one period long times the share of bursts that start a
//!    phase, and `autocorrelation` is the signal's correlation with itself shifted by the period.
//!    A clean 20-phase trace scores 0.95, Poisson arrivals under 0.2.
//!
//! **Long windows** (more than 512 phases, such as 10,000 checkpoints of a long job): the first
//! pass's bins would be coarser than the period, and binning finely enough would cost an FFT of
//! millions of points. The phases are found from the events instead (as [`crate::segment`]
//! finds them: busy stretches, their pieces joined, background dropped), the steps above run on
//! the last 128 phases only, and the period is fitted over every phase start of the window at
//! that sample's period (step 4's rule). The confidence is step 5's, with the sample's
//! autocorrelation.
//!
//! What it is not: a change-point detector. One window is assumed to hold one behaviour; the
//! [`crate::online`] detector chooses the windows.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use iosets_types::Nanos;
use rustfft::num_complex::Complex;
use rustfft::{Fft, FftPlanner};

use crate::error::{Error, Result};
use crate::event::Event;
use crate::segment;

/// Settings of the detector. [`Config::default`] suits offline traces; the online detector uses
/// [`Config::online`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Config {
    /// Bins of the first pass (a power of two, 64 to 2^22). The default, 4096, gives a
    /// 5-period window about 800 bins per period (burst starts are placed to a fraction of a
    /// bin), and is refined when a period spans fewer than 64 bins.
    pub bins: usize,
    /// Upper bound on bins when the first pass finds a period shorter than 64 bins and the window
    /// is binned again, finer (a power of two, at least `bins`, at most 2^22).
    pub max_bins: usize,
    /// Confidence from which a window is called periodic, in (0, 1].
    pub min_confidence: f64,
    /// Phases (I/O bursts) needed before a window is called periodic; at least 2.
    pub min_phases: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            bins: 1 << 12,
            max_bins: 1 << 20,
            min_confidence: 0.5,
            min_phases: 3,
        }
    }
}

impl Config {
    /// The online detector's settings: a lower ceiling on the finer second pass, so that each
    /// re-evaluation stays cheap (well under 1 ms).
    pub fn online() -> Config {
        Config {
            bins: 1 << 12,
            max_bins: 1 << 14,
            ..Config::default()
        }
    }

    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<()> {
        let pow2 = |v: usize| v.is_power_of_two() && (64..=1 << 22).contains(&v);
        if !pow2(self.bins) {
            return Err(Error::InvalidConfig {
                field: "bins",
                value: self.bins.to_string(),
                reason: "expected a power of two from 64 to 4194304",
            });
        }
        if !pow2(self.max_bins) || self.max_bins < self.bins {
            return Err(Error::InvalidConfig {
                field: "max_bins",
                value: self.max_bins.to_string(),
                reason: "expected a power of two from `bins` to 4194304",
            });
        }
        if !(self.min_confidence > 0.0 && self.min_confidence <= 1.0) {
            return Err(Error::InvalidConfig {
                field: "min_confidence",
                value: self.min_confidence.to_string(),
                reason: "expected a number in (0, 1]",
            });
        }
        if self.min_phases < 2 {
            return Err(Error::InvalidConfig {
                field: "min_phases",
                value: self.min_phases.to_string(),
                reason: "expected at least 2 (a period needs two phase starts)",
            });
        }
        Ok(())
    }
}

/// A period estimate with the evidence behind it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    /// The period `w_iter`: mean time between the starts of consecutive I/O phases.
    pub period: Nanos,
    /// How much to trust it, in `[0, 1]` (see the module docs for the formula).
    pub confidence: f64,
    /// I/O phases (bursts) seen in the window.
    pub phases: usize,
    /// `1 - CV` of the intervals between phases, times the share of one-period intervals, in
    /// `[0, 1]`; 0 when no bursts could be told apart.
    pub regularity: f64,
    /// Autocorrelation of the binned bandwidth at a lag of one period, in `[0, 1]` (negative
    /// values clipped).
    pub autocorrelation: f64,
    /// The period of the strongest spectral peak alone (what a bare FFT would report), if any.
    pub spectral_period: Option<Nanos>,
}

/// Why a window was not called periodic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotPeriodicReason {
    /// No event at all.
    NoEvents,
    /// Events, but no byte moved, or all at a single instant.
    NoActivity,
    /// Fewer phases than [`Config::min_phases`].
    TooFewPhases {
        /// Phases seen.
        phases: usize,
    },
    /// A period was found but its confidence is under [`Config::min_confidence`].
    LowConfidence,
}

impl std::fmt::Display for NotPeriodicReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotPeriodicReason::NoEvents => f.write_str("no events"),
            NotPeriodicReason::NoActivity => f.write_str("no bytes moved over a time span"),
            NotPeriodicReason::TooFewPhases { phases } => {
                write!(f, "too few I/O phases ({phases})")
            }
            NotPeriodicReason::LowConfidence => f.write_str("low confidence"),
        }
    }
}

/// The answer for one window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Detection {
    /// A period with a confidence of at least [`Config::min_confidence`].
    Periodic(Estimate),
    /// No trustworthy period; `best` is the best guess when there is one.
    NotPeriodic {
        /// Why.
        reason: NotPeriodicReason,
        /// The best estimate found, under the confidence bar.
        best: Option<Estimate>,
    },
}

impl Detection {
    /// Whether the window is periodic.
    pub fn is_periodic(&self) -> bool {
        matches!(self, Detection::Periodic(_))
    }

    /// The confident estimate, if the window is periodic.
    pub fn periodic(&self) -> Option<&Estimate> {
        match self {
            Detection::Periodic(e) => Some(e),
            Detection::NotPeriodic { .. } => None,
        }
    }

    /// The estimate, confident or not.
    pub fn best(&self) -> Option<&Estimate> {
        match self {
            Detection::Periodic(e) => Some(e),
            Detection::NotPeriodic { best, .. } => best.as_ref(),
        }
    }

    /// The confident period, if any.
    pub fn period(&self) -> Option<Nanos> {
        self.periodic().map(|e| e.period)
    }

    /// The confidence of the best estimate (0 without one).
    pub fn confidence(&self) -> f64 {
        self.best().map_or(0.0, |e| e.confidence)
    }

    /// Phases seen (0 without an estimate).
    pub fn phases(&self) -> usize {
        self.best().map_or(0, |e| e.phases)
    }
}

/// Detects the period of one window of events with the default [`Config`]; the window runs from
/// the first start to the last end.
///
/// Uses one [`Analyzer`] per thread, so that repeated calls reuse its buffers (FFT plans are
/// shared by all analyzers of the process).
pub fn detect(events: &[Event]) -> Detection {
    thread_local! {
        static DEFAULT: RefCell<Option<Analyzer>> = const { RefCell::new(None) };
    }
    let fresh = || Analyzer::new(Config::default()).expect("the default configuration is valid");
    DEFAULT.with(|cell| match cell.try_borrow_mut() {
        Ok(mut slot) => {
            let analyzer = slot.get_or_insert_with(fresh);
            let det = analyzer.analyze(events);
            analyzer.scratch.trim(analyzer.config.bins);
            det
        }
        Err(_) => fresh().analyze(events),
    })
}

/// A reusable detector: holds its configuration and working buffers, so that repeated analyses
/// (the online detector's) allocate nothing. FFT plans are cached for the whole process.
pub struct Analyzer {
    config: Config,
    scratch: Scratch,
}

/// Buffers reused from one analysis to the next.
#[derive(Default)]
struct Scratch {
    /// Binned bandwidth.
    x: Vec<f64>,
    /// Binning differences; then the values of the weighted median.
    tmp: Vec<f64>,
    /// FFT data.
    buf: Vec<Complex<f64>>,
    /// Spectrum of the padded signal, bins `0..=n`.
    spec: Vec<Complex<f64>>,
    /// FFT scratch.
    fft: Vec<Complex<f64>>,
}

impl Scratch {
    /// Frees buffers grown past what `bins` bins need (after a finer second pass).
    fn trim(&mut self, bins: usize) {
        if self.x.capacity() > bins {
            *self = Scratch::default();
        }
    }
}

impl std::fmt::Debug for Analyzer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Analyzer")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// One burst of activity, in bins.
#[derive(Clone, Copy, Debug)]
struct Burst {
    start: f64,
    bytes: f64,
}

/// Bursts fitted to a period scale.
#[derive(Clone, Copy, Debug)]
struct Fit {
    period: f64,
    regularity: f64,
    phases: usize,
}

impl Analyzer {
    /// A detector with `config`, validated.
    pub fn new(config: Config) -> Result<Analyzer> {
        config.validate()?;
        Ok(Analyzer {
            config,
            scratch: Scratch::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Heap bytes held by the reusable buffers (they grow to what the largest analysis needed).
    pub fn heap_bytes(&self) -> usize {
        let s = &self.scratch;
        (s.x.capacity() + s.tmp.capacity()) * std::mem::size_of::<f64>()
            + (s.buf.capacity() + s.spec.capacity() + s.fft.capacity())
                * std::mem::size_of::<Complex<f64>>()
    }

    /// Detects the period of `events` over the window from the first start to the last end.
    pub fn analyze(&mut self, events: &[Event]) -> Detection {
        let Some(t0) = events.iter().map(|e| e.start).min() else {
            return not_periodic(NotPeriodicReason::NoEvents, None);
        };
        let t1 = events.iter().map(|e| e.end).max().unwrap_or(t0);
        self.analyze_window(events, t0, t1, false)
    }

    /// Detects the period of the part of `events` inside `[t0, t1]` (events are clipped, their
    /// bytes prorated). With `clipped_start`, a burst touching `t0` is taken as cut by the window
    /// and its start is not used as a phase start.
    pub fn analyze_window(
        &mut self,
        events: &[Event],
        t0: Nanos,
        t1: Nanos,
        clipped_start: bool,
    ) -> Detection {
        if let Some(det) = idle_window(events, t0, t1) {
            return det;
        }
        if let Some(det) = self.analyze_long(events, t0, t1, clipped_start) {
            return det;
        }
        self.analyze_binned(events, t0, t1, clipped_start)
    }

    /// [`Analyzer::analyze_window`] of `events` with their phases already found:
    /// [`segment::phases`] of `sorted` (`events` sorted by start), none removed. The answer is
    /// the same; a long window does not find its phases again.
    pub(crate) fn analyze_window_with(
        &mut self,
        events: &[Event],
        sorted: &[Event],
        phases: &[segment::Phase],
        t0: Nanos,
        t1: Nanos,
        clipped_start: bool,
    ) -> Detection {
        if let Some(det) = idle_window(events, t0, t1) {
            return det;
        }
        // No need of analyze_long's bound: a window of no more than LONG_WINDOW phases gets
        // `None` from long_from too.
        if let Some(det) = self.long_from(sorted, phases, t0, t1, clipped_start) {
            return det;
        }
        self.analyze_binned(events, t0, t1, clipped_start)
    }

    /// The binned analysis (steps 1 to 5 of the module docs) of `[t0, t1]`.
    fn analyze_binned(
        &mut self,
        events: &[Event],
        t0: Nanos,
        t1: Nanos,
        clipped_start: bool,
    ) -> Detection {
        let mut n = self.config.bins;
        loop {
            let w = (t1.0 - t0.0) as f64 / n as f64;
            let mut x = std::mem::take(&mut self.scratch.x);
            bin_into(events, t0, w, n, &mut x, &mut self.scratch.tmp);
            if x.iter().all(|&v| v <= 0.0) {
                self.scratch.x = x;
                return not_periodic(NotPeriodicReason::NoActivity, None);
            }
            let det = self.analyze_bins(&x, w, clipped_start);
            self.scratch.x = x;
            // Too coarse for this period: bin again, finer, once.
            if let Some(e) = det.best() {
                let period_bins = e.period.0 as f64 / w;
                if period_bins < 64.0 && n < self.config.max_bins {
                    let want = (n as f64 * 256.0 / period_bins.max(1.0)).min(1e9) as usize;
                    let next = want.next_power_of_two().min(self.config.max_bins);
                    if next > n {
                        n = next;
                        continue;
                    }
                }
            }
            return det;
        }
    }

    /// A window of more than [`LONG_WINDOW`] phases (see the module docs, "Long windows"), or
    /// `None` for a shorter one.
    fn analyze_long(
        &mut self,
        events: &[Event],
        t0: Nanos,
        t1: Nanos,
        clipped_start: bool,
    ) -> Option<Detection> {
        if events.len() <= LONG_WINDOW {
            return None;
        }
        // A cheap bound first, for events sorted by start (as traces come): the busy stretches,
        // of which the phases are joined.
        let mut stretches = 0usize;
        let mut sorted = true;
        let (mut start, mut end) = (Nanos::ZERO, None::<Nanos>);
        for e in events {
            sorted &= e.start >= start;
            start = e.start;
            match end {
                Some(x) if e.start <= x => end = Some(x.max(e.end)),
                _ => {
                    stretches += 1;
                    end = Some(e.end);
                }
            }
        }
        if sorted && stretches <= LONG_WINDOW {
            return None;
        }
        let sorted = if sorted {
            std::borrow::Cow::Borrowed(events)
        } else {
            segment::by_start(events)
        };
        let phases = segment::phases(&sorted);
        self.long_from(&sorted, &phases, t0, t1, clipped_start)
    }

    /// The long path over `phases` ([`segment::phases`] of `sorted`, `events` sorted by start),
    /// or `None` if no more than [`LONG_WINDOW`] of them start in `[t0, t1]`.
    fn long_from(
        &mut self,
        sorted: &[Event],
        phases: &[segment::Phase],
        t0: Nanos,
        t1: Nanos,
        clipped_start: bool,
    ) -> Option<Detection> {
        let mut phases: Vec<segment::Phase> = phases
            .iter()
            .filter(|p| p.start >= t0.0 && p.start <= t1.0)
            .copied()
            .collect();
        if clipped_start && phases.first().is_some_and(|p| p.start <= t0.0) {
            phases.remove(0);
        }
        if phases.len() <= LONG_WINDOW {
            return None;
        }
        // The shape: the usual analysis over the last SAMPLE_PHASES phases.
        let from = Nanos(phases[phases.len() - SAMPLE_PHASES].start);
        let upto = sorted.partition_point(|e| e.start <= t1);
        let recent: Vec<Event> = sorted[..upto]
            .iter()
            .filter(|e| e.end > from)
            .copied()
            .collect();
        let sample = self.analyze_window(&recent, from, t1, true);
        let Some(shape) = sample.best().copied() else {
            return Some(sample);
        };
        // The period: every phase start of the window fitted at the sample's period.
        let bursts: Vec<Burst> = phases
            .iter()
            .map(|p| Burst {
                start: (p.start - t0.0) as f64,
                bytes: p.bytes as f64,
            })
            .collect();
        let mut fit = fit(&bursts, shape.period.0 as f64)?;
        for _ in 0..3 {
            match self::fit(&bursts, fit.period) {
                Some(next) if (next.period - fit.period).abs() > 1e-9 * fit.period => fit = next,
                _ => break,
            }
        }
        let intervals = (fit.phases - 1) as f64;
        let rho = shape.autocorrelation;
        let estimate = Estimate {
            period: Nanos(fit.period.round() as u64),
            confidence: (intervals / (intervals + 1.0)
                * (REGULARITY_WEIGHT * fit.regularity + (1.0 - REGULARITY_WEIGHT) * rho))
                .clamp(0.0, 1.0),
            phases: fit.phases,
            regularity: fit.regularity,
            autocorrelation: rho,
            spectral_period: shape.spectral_period,
        };
        Some(if estimate.phases < self.config.min_phases {
            not_periodic(
                NotPeriodicReason::TooFewPhases {
                    phases: estimate.phases,
                },
                Some(estimate),
            )
        } else if estimate.confidence < self.config.min_confidence {
            not_periodic(NotPeriodicReason::LowConfidence, Some(estimate))
        } else {
            Detection::Periodic(estimate)
        })
    }

    fn analyze_bins(&mut self, x: &[f64], w: f64, clipped_start: bool) -> Detection {
        let n = x.len();
        self.spectrum(x);
        let peaks = spectral_peaks(&self.scratch.spec, 3);
        let acf = self.autocorrelation();
        let to_nanos = |bins: f64| Nanos((bins * w).round().max(0.0) as u64);
        let spectral_period = peaks.first().map(|&p| to_nanos(p));

        // The threshold and the runs above it do not depend on the scale: found once.
        let runs = runs(x, &mut self.scratch.tmp);
        let bursts_at = |scale: Option<f64>| -> Vec<Burst> {
            let bridge = scale.map_or(0.0, |s| 0.05 * s);
            let mut b = bursts(x, &runs, bridge);
            if clipped_start && b.first().is_some_and(|f| f.start < 1.0) {
                b.remove(0);
            }
            b
        };
        let first_bursts = bursts_at(peaks.first().copied());
        let median_interval = median_interval(&first_bursts);

        // Candidates: spectral peaks and the burst spacing, with their harmonics and
        // sub-harmonics, each moved to the autocorrelation's local maximum.
        let mut bases: Vec<f64> = peaks.clone();
        bases.extend(median_interval);
        let mut scored: Vec<(f64, f64)> = Vec::new();
        for &b in &bases {
            for m in [1.0, 0.5, 1.0 / 3.0, 2.0, 3.0] {
                if let Some(c) = acf.refine(b * m) {
                    scored.push(c);
                }
            }
        }
        let best_rho = scored.iter().map(|c| c.1).fold(f64::NEG_INFINITY, f64::max);
        let acf_period = if best_rho > 0.05 {
            scored
                .iter()
                .filter(|c| c.1 >= 0.8 * best_rho)
                .map(|c| c.0)
                .fold(None, |m: Option<f64>, l| Some(m.map_or(l, |m| m.min(l))))
        } else {
            None
        };

        // Fit the bursts at each plausible scale; keep the most confident.
        let mut best: Option<Estimate> = None;
        fn consider(best: &mut Option<Estimate>, est: Estimate) {
            match best {
                Some(b) if b.confidence >= est.confidence => {}
                _ => *best = Some(est),
            }
        }
        let mut scales: Vec<f64> = Vec::new();
        scales.extend(acf_period);
        scales.extend(median_interval);
        for &scale in &scales {
            let b = bursts_at(Some(scale));
            let Some(mut fit) = fit(&b, scale) else {
                continue;
            };
            // Refit at the fitted period until it settles: a first scale off by 15% can count a
            // long (jittered) interval as two periods.
            for _ in 0..3 {
                match self::fit(&b, fit.period) {
                    Some(next) if (next.period - fit.period).abs() > 1e-9 * fit.period => {
                        fit = next
                    }
                    _ => break,
                }
            }
            let rho = acf.at(fit.period).unwrap_or(0.0).clamp(0.0, 1.0);
            let intervals = (fit.phases - 1) as f64;
            let confidence = (intervals / (intervals + 1.0)
                * (REGULARITY_WEIGHT * fit.regularity + (1.0 - REGULARITY_WEIGHT) * rho))
                .clamp(0.0, 1.0);
            consider(
                &mut best,
                Estimate {
                    period: to_nanos(fit.period),
                    confidence,
                    phases: fit.phases,
                    regularity: fit.regularity,
                    autocorrelation: rho,
                    spectral_period,
                },
            );
        }
        // Activity that never falls silent (no burst stands out at all): the autocorrelation
        // alone. A single burst is not that: it is one phase.
        if best.is_none() && first_bursts.is_empty() {
            if let Some(p) = acf_period {
                let rho = acf.at(p).unwrap_or(0.0).clamp(0.0, 1.0);
                let cycles = (n as f64 / p).floor() - 1.0;
                let f = if cycles > 0.0 {
                    cycles / (cycles + 1.0)
                } else {
                    0.0
                };
                consider(
                    &mut best,
                    Estimate {
                        period: to_nanos(p),
                        confidence: (f * rho).clamp(0.0, 1.0),
                        phases: (n as f64 / p).floor() as usize,
                        regularity: 0.0,
                        autocorrelation: rho,
                        spectral_period,
                    },
                );
            }
        }
        match best {
            None => not_periodic(
                NotPeriodicReason::TooFewPhases {
                    phases: first_bursts.len(),
                },
                None,
            ),
            Some(e) if e.phases < self.config.min_phases => not_periodic(
                NotPeriodicReason::TooFewPhases { phases: e.phases },
                Some(e),
            ),
            Some(e) if e.confidence < self.config.min_confidence => {
                not_periodic(NotPeriodicReason::LowConfidence, Some(e))
            }
            Some(e) => Detection::Periodic(e),
        }
    }

    /// The spectrum of the mean-removed `x` zero-padded to `2n` (`n = x.len()`), bins `0..=n`,
    /// into `scratch.spec`. Its even bins are the spectrum of `x` itself.
    fn spectrum(&mut self, x: &[f64]) {
        let n = x.len();
        let mean = x.iter().sum::<f64>() / n as f64;
        let s = &mut self.scratch;
        // The real signal of length 2n, packed two by two into n complex values.
        s.buf.clear();
        s.buf.extend(
            x.chunks_exact(2)
                .map(|p| Complex::new(p[0] - mean, p[1] - mean)),
        );
        s.buf.resize(n, Complex::new(0.0, 0.0));
        let plan = RealFft::get(2 * n);
        plan.forward(&mut s.buf, &mut s.spec, n + 1, &mut s.fft);
    }

    /// The unbiased, normalised autocorrelation of the signal of [`Analyzer::spectrum`] for lags
    /// `0..=n/2 + 1`: the inverse transform of the power spectrum (the spectrum of the signal
    /// padded to `2n`, so that no lag wraps around).
    fn autocorrelation(&mut self) -> Acf {
        let s = &mut self.scratch;
        let n = s.spec.len() - 1;
        let max_lag = n / 2;
        let lags = (max_lag + 2).min(n);
        // The power spectrum of the 2n-long signal is real and even: P[2n - k] = P[k]. Its
        // (inverse) transform is a forward one of a real signal, packed as above.
        let power = |k: usize| s.spec[if k <= n { k } else { 2 * n - k }].norm_sqr();
        s.buf.clear();
        s.buf
            .extend((0..n).map(|k| Complex::new(power(2 * k), power(2 * k + 1))));
        let plan = RealFft::get(2 * n);
        let mut r = std::mem::take(&mut s.spec);
        plan.forward(&mut s.buf, &mut r, lags, &mut s.fft);
        let r0 = r[0].re / n as f64;
        let rho = if r0 > 0.0 {
            (0..lags)
                .map(|l| r[l].re / (n - l) as f64 / r0)
                .collect::<Vec<_>>()
        } else {
            vec![0.0; lags]
        };
        s.spec = r;
        Acf::new(rho, max_lag)
    }
}

/// Periods (in bins) of the `k` strongest local maxima of the power spectrum with at least two
/// cycles in the window and at least 4 bins per cycle, strongest first. `spec` is the spectrum of
/// the signal padded to twice its length `n`: bin `i` of the signal's own spectrum is `spec[2i]`.
fn spectral_peaks(spec: &[Complex<f64>], k: usize) -> Vec<f64> {
    let n = spec.len() - 1;
    let mag: Vec<f64> = (0..=n / 4).map(|i| spec[2 * i].norm_sqr().sqrt()).collect();
    // The k strongest, ties to the lowest bin.
    let mut top: Vec<(usize, f64)> = Vec::with_capacity(k + 1);
    for i in 2..n / 4 {
        let m = mag[i];
        if !(m > 0.0 && m >= mag[i - 1] && m >= mag[i + 1]) {
            continue;
        }
        if top.len() == k && top.last().is_some_and(|t| t.1 >= m) {
            continue;
        }
        let at = top.partition_point(|t| t.1 >= m);
        top.insert(at, (i, m));
        top.truncate(k);
    }
    top.iter()
        .map(|&(i, _)| {
            let (a, b, c) = (mag[i - 1], mag[i], mag[i + 1]);
            let den = a - 2.0 * b + c;
            let d = if den.abs() > f64::EPSILON * b {
                (0.5 * (a - c) / den).clamp(-0.5, 0.5)
            } else {
                0.0
            };
            n as f64 / (i as f64 + d)
        })
        .collect()
}

/// A forward FFT of real signals of length `m` (even), as a complex FFT of length `m/2` of the
/// signal's values packed two by two, and an untangling pass.
struct RealFft {
    /// The complex FFT, of length `m/2`.
    fft: Arc<dyn Fft<f64>>,
    /// `e^{-2πik/m}` for `k` in `0..m/2`.
    twiddles: Vec<Complex<f64>>,
}

impl RealFft {
    /// The plan for length `m`, planned once per process.
    fn get(m: usize) -> Arc<RealFft> {
        static PLANS: OnceLock<Mutex<HashMap<usize, Arc<RealFft>>>> = OnceLock::new();
        let mut plans = PLANS
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        plans
            .entry(m)
            .or_insert_with(|| {
                let h = m / 2;
                Arc::new(RealFft {
                    fft: FftPlanner::new().plan_fft_forward(h),
                    twiddles: (0..h)
                        .map(|k| {
                            let (s, c) =
                                (-2.0 * std::f64::consts::PI * k as f64 / m as f64).sin_cos();
                            Complex::new(c, s)
                        })
                        .collect(),
                })
            })
            .clone()
    }

    /// Bins `0..count` (`count <= m/2 + 1`) of the spectrum of the real signal packed in `buf`
    /// (`z[j] = x[2j] + i·x[2j+1]`, `m/2` values, overwritten) into `out`.
    fn forward(
        &self,
        buf: &mut [Complex<f64>],
        out: &mut Vec<Complex<f64>>,
        count: usize,
        scratch: &mut Vec<Complex<f64>>,
    ) {
        let h = buf.len();
        debug_assert_eq!(h, self.twiddles.len());
        scratch.resize(self.fft.get_inplace_scratch_len(), Complex::new(0.0, 0.0));
        self.fft.process_with_scratch(buf, scratch);
        // Z[k] = E[k] + i·O[k], E and O the spectra of the even and odd samples;
        // X[k] = E[k] + e^{-2πik/m}·O[k].
        let count = count.min(h + 1);
        out.clear();
        out.reserve(count);
        // k = 0 and k = h: Z[h] = Z[0], twiddles 1 and -1.
        let z0 = buf[0];
        out.push(Complex::new(z0.re + z0.im, 0.0));
        let inner = count.saturating_sub(1).min(h - 1);
        out.extend(
            buf[1..=inner]
                .iter()
                .zip(buf[h - inner..h].iter().rev())
                .zip(&self.twiddles[1..=inner])
                .map(|((&z, &zr), &w)| {
                    let zc = zr.conj();
                    let e = (z + zc) * 0.5;
                    let o = (z - zc) * Complex::new(0.0, -0.5);
                    e + w * o
                }),
        );
        if count == h + 1 {
            out.push(Complex::new(z0.re - z0.im, 0.0));
        }
    }
}

/// The autocorrelation, usable up to half the window.
struct Acf {
    /// Lags `0..=max_lag + 1` (fewer in windows under 4 bins).
    rho: Vec<f64>,
    /// `dip[i]`: the least of `rho[1..=i]` (`dip[0]` unused).
    dip: Vec<f64>,
    max_lag: usize,
}

impl Acf {
    fn new(rho: Vec<f64>, max_lag: usize) -> Acf {
        let mut low = f64::INFINITY;
        let dip = rho
            .iter()
            .enumerate()
            .map(|(i, &r)| {
                if i > 0 {
                    low = low.min(r);
                }
                low
            })
            .collect();
        Acf { rho, dip, max_lag }
    }

    fn max_lag(&self) -> f64 {
        self.max_lag as f64
    }

    /// The correlation at a fractional lag (linear interpolation), if within half the window.
    fn at(&self, lag: f64) -> Option<f64> {
        if !(lag >= 1.0 && lag <= self.max_lag()) {
            return None;
        }
        let i = lag.floor() as usize;
        let f = lag - i as f64;
        let a = self.rho[i];
        let b = self.rho.get(i + 1).copied().unwrap_or(a);
        Some(a + f * (b - a))
    }

    /// The local maximum of the correlation within ±15% of `lag`, refined by a parabola; `None`
    /// if the lag is out of range, if the maximum sits on the search border (no peak: the short
    /// lags of a smooth signal), or if no dip precedes it.
    fn refine(&self, lag: f64) -> Option<(f64, f64)> {
        if !(lag >= 2.0 && lag <= self.max_lag()) {
            return None;
        }
        let lo = ((lag * 0.85).floor() as usize).max(1);
        let hi = ((lag * 1.15).ceil() as usize).min(self.max_lag() as usize);
        if hi <= lo + 1 {
            return None;
        }
        let (mut k, mut best) = (lo, f64::NEG_INFINITY);
        for (i, &r) in self.rho.iter().enumerate().take(hi + 1).skip(lo) {
            if r > best {
                (k, best) = (i, r);
            }
        }
        if k == lo || k == hi {
            return None;
        }
        // A period's correlation peak follows a dip.
        let dip = self.dip[k - 1];
        if dip > best - 0.1 {
            return None;
        }
        let (a, b, c) = (self.rho[k - 1], self.rho[k], self.rho[k + 1]);
        let den = a - 2.0 * b + c;
        let d = if den < 0.0 {
            (0.5 * (a - c) / den).clamp(-0.5, 0.5)
        } else {
            0.0
        };
        Some((k as f64 + d, b))
    }
}

/// Weight of the regularity of phase starts in the confidence; the rest is the autocorrelation,
/// which jitter blurs (0.3 at 30% jitter) while the spacing of phases stays regular.
const REGULARITY_WEIGHT: f64 = 0.75;

/// Windows with more phases than this take the long path (module docs, "Long windows"): the
/// first pass's 4,096 bins give such a period under 8 bins.
const LONG_WINDOW: usize = 512;

/// Phases at the end of a long window that the usual analysis looks at.
const SAMPLE_PHASES: usize = 128;

/// The answer for a window with nothing to analyse (no event, no byte, no time), if it is one.
fn idle_window(events: &[Event], t0: Nanos, t1: Nanos) -> Option<Detection> {
    if events.is_empty() {
        return Some(not_periodic(NotPeriodicReason::NoEvents, None));
    }
    if t1 <= t0 || events.iter().all(|e| e.bytes == 0) {
        return Some(not_periodic(NotPeriodicReason::NoActivity, None));
    }
    None
}

fn not_periodic(reason: NotPeriodicReason, best: Option<Estimate>) -> Detection {
    Detection::NotPeriodic { reason, best }
}

/// Bytes per bin of `events` over `n` bins of `w` nanoseconds from `t0`; events are clipped to
/// the window with their bytes prorated. O(events + n).
#[cfg(test)]
pub(crate) fn bin(events: &[Event], t0: Nanos, w: f64, n: usize) -> Vec<f64> {
    let mut x = Vec::new();
    bin_into(events, t0, w, n, &mut x, &mut Vec::new());
    x
}

/// [`bin`] into `x`, with `diff` as working space.
fn bin_into(events: &[Event], t0: Nanos, w: f64, n: usize, x: &mut Vec<f64>, diff: &mut Vec<f64>) {
    x.clear();
    x.resize(n, 0.0);
    // Rate of events covering whole bins, as differences (added up at the end).
    diff.clear();
    diff.resize(n + 1, 0.0);
    let nf = n as f64;
    for e in events {
        if e.bytes == 0 {
            continue;
        }
        let s = (e.start.0 as f64 - t0.0 as f64) / w;
        let t = (e.end.0 as f64 - t0.0 as f64) / w;
        let bytes = e.bytes as f64;
        if t <= s {
            // Instantaneous.
            if (0.0..=nf).contains(&s) {
                x[(s as usize).min(n - 1)] += bytes;
            }
            continue;
        }
        let rate = bytes / (t - s); // bytes per bin
        let (cs, ct) = (s.max(0.0), t.min(nf));
        if ct <= cs {
            continue;
        }
        let (i0, i1) = (cs as usize, (ct as usize).min(n - 1));
        if i0 >= n {
            continue;
        }
        if i0 == i1 {
            x[i0] += rate * (ct - cs);
            continue;
        }
        x[i0] += rate * ((i0 + 1) as f64 - cs);
        x[i1] += rate * (ct - i1 as f64);
        diff[i0 + 1] += rate;
        diff[i1] -= rate;
    }
    let mut run = 0.0;
    for (xi, d) in x.iter_mut().zip(diff.iter()) {
        run += d;
        *xi += run.max(0.0);
    }
}

/// The value `v` such that half of the total of `values` lies in values ≥ `v`.
#[cfg(test)]
fn weighted_median(mut values: Vec<f64>) -> f64 {
    weighted_median_in(&mut values)
}

/// [`weighted_median`] of `values`, reordered in place. Expected O(len): a selection, not a sort.
fn weighted_median_in(values: &mut Vec<f64>) -> f64 {
    values.retain(|v| *v > 0.0);
    let half = values.iter().sum::<f64>() / 2.0;
    // The answer is the largest v with sum(values ≥ v) ≥ half. `acc` sums the values above `s`.
    let mut acc = 0.0;
    let mut s = &mut values[..];
    let mut least = 0.0;
    while s.len() > 16 {
        let len = s.len();
        let p = median3(s[0], s[len / 2], s[len - 1]);
        // Three ways: s[..gt] > p, s[gt..lt] == p, s[lt..] < p.
        let (mut gt, mut i, mut lt) = (0, 0, len);
        while i < lt {
            if s[i] > p {
                s.swap(gt, i);
                gt += 1;
                i += 1;
            } else if s[i] < p {
                lt -= 1;
                s.swap(i, lt);
            } else {
                i += 1;
            }
        }
        let above: f64 = s[..gt].iter().sum();
        if acc + above >= half {
            s = &mut s[..gt];
            continue;
        }
        let equal: f64 = s[gt..lt].iter().sum();
        if acc + above + equal >= half {
            return p;
        }
        acc += above + equal;
        least = p;
        s = &mut s[lt..];
    }
    s.sort_unstable_by(|a, b| b.total_cmp(a));
    for v in s.iter() {
        acc += v;
        if acc >= half {
            return *v;
        }
    }
    // Only by rounding: the least value.
    s.last().copied().unwrap_or(least)
}

fn median3(a: f64, b: f64, c: f64) -> f64 {
    a.max(b).min(a.min(b).max(c))
}

/// Runs of bins above a tenth of the volume-weighted median bin: `[start, end)` and bytes. `tmp`
/// is working space.
fn runs(x: &[f64], tmp: &mut Vec<f64>) -> Vec<(usize, usize, f64)> {
    tmp.clear();
    tmp.extend_from_slice(x);
    let level = 0.1 * weighted_median_in(tmp);
    let mut runs = Vec::new();
    if level <= 0.0 {
        return runs;
    }
    let mut i = 0;
    while i < x.len() {
        if x[i] < level {
            i += 1;
            continue;
        }
        let s = i;
        let mut bytes = 0.0;
        while i < x.len() && x[i] >= level {
            bytes += x[i];
            i += 1;
        }
        runs.push((s, i, bytes));
    }
    runs
}

/// Bursts of the binned signal `x` from its [`runs`]: runs closer than `bridge` bins joined, runs
/// under a tenth of the volume-weighted median burst dropped.
fn bursts(x: &[f64], raw: &[(usize, usize, f64)], bridge: f64) -> Vec<Burst> {
    let mut runs: Vec<(usize, usize, f64)> = Vec::new(); // [start, end) in bins, bytes
    for &(s, e, bytes) in raw {
        match runs.last_mut() {
            Some(last) if ((s - last.1) as f64) <= bridge => {
                last.1 = e;
                last.2 += bytes;
            }
            _ => runs.push((s, e, bytes)),
        }
    }
    let typical = weighted_median_in(&mut runs.iter().map(|r| r.2).collect());
    runs.into_iter()
        .filter(|r| r.2 >= 0.1 * typical)
        .map(|(s, e, bytes)| {
            // Sub-bin start: a phase of steady bandwidth that starts a fraction f into bin s
            // fills 1-f of it.
            let mut start = s as f64;
            if e > s + 1 && x[s + 1] > 0.0 && x[s] <= x[s + 1] {
                start += 1.0 - x[s] / x[s + 1];
            }
            Burst { start, bytes }
        })
        .collect()
}

fn median_interval(bursts: &[Burst]) -> Option<f64> {
    let mut d: Vec<f64> = bursts
        .windows(2)
        .map(|w| w[1].start - w[0].start)
        .filter(|d| *d > 0.0)
        .collect();
    if d.is_empty() {
        return None;
    }
    d.sort_by(f64::total_cmp);
    Some(d[d.len() / 2])
}

/// Fits burst starts to a period near `scale` (bins): starts closer than 0.4·scale to the
/// previous phase are part of it; an interval of `k - 0.25` scales or more (k ≥ 2) counts `k`
/// periods, so that phases missed by the burst detector do not stretch the period, while the
/// long intervals of a strongly jittered job (up to 1.75 periods) still count one.
fn fit(bursts: &[Burst], scale: f64) -> Option<Fit> {
    if scale.is_nan() || scale <= 0.0 {
        return None;
    }
    let mut starts: Vec<f64> = Vec::with_capacity(bursts.len());
    for b in bursts {
        debug_assert!(b.bytes > 0.0);
        match starts.last() {
            Some(&last) if b.start - last < 0.4 * scale => {}
            _ => starts.push(b.start),
        }
    }
    if starts.len() < 2 {
        return None;
    }
    let intervals: Vec<f64> = starts.windows(2).map(|w| w[1] - w[0]).collect();
    let ks: Vec<f64> = intervals
        .iter()
        .map(|d| (d / scale + 0.25).floor().max(1.0))
        .collect();
    let total_k: f64 = ks.iter().sum();
    let period = (starts[starts.len() - 1] - starts[0]) / total_k;
    let per: Vec<f64> = intervals.iter().zip(&ks).map(|(d, k)| d / k).collect();
    let var = per.iter().map(|p| (p - period).powi(2)).sum::<f64>() / per.len() as f64;
    let cv = var.sqrt() / period;
    let singles = ks.iter().filter(|&&k| k == 1.0).count() as f64 / ks.len() as f64;
    // Bursts folded into a phase are evidence against a clean period (Poisson arrivals can always
    // be folded into something regular-looking).
    let kept = starts.len() as f64 / bursts.len() as f64;
    Some(Fit {
        period,
        regularity: ((1.0 - cv) * singles * kept).clamp(0.0, 1.0),
        phases: starts.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binning_conserves_bytes_and_spreads_evenly() {
        let ev = [
            Event::new(Nanos(0), Nanos(1000), 1000),
            Event::new(Nanos(250), Nanos(250), 7),
            Event::new(Nanos(500), Nanos(2500), 400), // half outside
        ];
        let x = bin(&ev, Nanos(0), 100.0, 10);
        for (i, v) in x.iter().enumerate() {
            let expect = 100.0 + if i == 2 { 7.0 } else { 0.0 } + if i >= 5 { 20.0 } else { 0.0 };
            assert!((v - expect).abs() < 1e-9, "bin {i}: {v} != {expect}");
        }
    }

    #[test]
    fn weighted_median_follows_the_bytes() {
        // Many small values, few big ones holding most bytes: the big ones win.
        let mut v = vec![1.0; 100];
        v.extend([1000.0, 1000.0]);
        assert_eq!(weighted_median(v), 1000.0);
        assert_eq!(weighted_median(vec![]), 0.0);
    }

    #[test]
    fn fit_counts_a_missed_phase_as_two_periods() {
        let b = |s: f64| Burst {
            start: s,
            bytes: 1.0,
        };
        let bursts = [b(0.0), b(10.0), b(30.0), b(40.0), b(41.0)];
        let f = fit(&bursts, 10.0).unwrap();
        assert!((f.period - 10.0).abs() < 1e-9);
        assert_eq!(f.phases, 4);
        assert!(f.regularity < 0.7);
    }

    #[test]
    fn real_fft_matches_the_complex_fft() {
        for m in [4usize, 64, 96] {
            let x: Vec<f64> = (0..m)
                .map(|i| ((i * 37 % 11) as f64).sin() + i as f64 * 0.1)
                .collect();
            let mut full: Vec<Complex<f64>> = x.iter().map(|&v| Complex::new(v, 0.0)).collect();
            FftPlanner::new().plan_fft_forward(m).process(&mut full);
            let mut buf: Vec<Complex<f64>> = x
                .chunks_exact(2)
                .map(|p| Complex::new(p[0], p[1]))
                .collect();
            let mut out = Vec::new();
            RealFft::get(m).forward(&mut buf, &mut out, m / 2 + 1, &mut Vec::new());
            assert_eq!(out.len(), m / 2 + 1);
            for k in 0..=m / 2 {
                assert!((full[k] - out[k]).norm() < 1e-9, "m {m}, bin {k}");
            }
        }
    }

    #[test]
    fn autocorrelation_matches_the_direct_sum() {
        let x: Vec<f64> = (0..128)
            .map(|i| {
                if i % 23 < 5 {
                    10.0 + (i % 3) as f64
                } else {
                    (i % 7) as f64 * 0.1
                }
            })
            .collect();
        let n = x.len();
        let mean = x.iter().sum::<f64>() / n as f64;
        let c: Vec<f64> = x.iter().map(|v| v - mean).collect();
        let r = |l: usize| (0..n - l).map(|i| c[i] * c[i + l]).sum::<f64>() / (n - l) as f64;
        let mut a = Analyzer::new(Config::default()).unwrap();
        a.spectrum(&x);
        let acf = a.autocorrelation();
        assert_eq!(acf.max_lag, n / 2);
        assert_eq!(acf.rho.len(), n / 2 + 2);
        for l in 0..acf.rho.len() {
            assert!((acf.rho[l] - r(l) / r(0)).abs() < 1e-9, "lag {l}");
            let dip = acf.rho[1..=l.max(1)]
                .iter()
                .copied()
                .fold(f64::INFINITY, f64::min);
            assert_eq!(acf.dip[l.max(1)], dip);
        }
    }

    #[test]
    fn weighted_median_by_selection_equals_the_sorted_scan() {
        let sorted = |mut v: Vec<f64>| {
            v.retain(|x| *x > 0.0);
            v.sort_by(f64::total_cmp);
            let total: f64 = v.iter().sum();
            let mut acc = 0.0;
            for x in v.iter().rev() {
                acc += x;
                if acc >= total / 2.0 {
                    return *x;
                }
            }
            0.0
        };
        let mut seed = 7u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as f64 / (1u64 << 31) as f64
        };
        for len in [0usize, 1, 2, 5, 17, 100, 1000, 5000] {
            for kind in 0..3 {
                let v: Vec<f64> = (0..len)
                    .map(|_| match kind {
                        0 => next(),
                        1 => (next() * 5.0).floor(), // many ties and zeros
                        _ => next().powi(8) * 1e9,   // heavy tail
                    })
                    .collect();
                assert_eq!(
                    weighted_median(v.clone()),
                    sorted(v),
                    "len {len}, kind {kind}"
                );
            }
        }
    }

    #[test]
    fn config_rejects_bad_values() {
        let bad = [
            Config {
                bins: 100,
                ..Config::default()
            },
            Config {
                max_bins: 1 << 10,
                ..Config::default()
            },
            Config {
                min_confidence: 0.0,
                ..Config::default()
            },
            Config {
                min_confidence: f64::NAN,
                ..Config::default()
            },
            Config {
                min_phases: 1,
                ..Config::default()
            },
        ];
        for c in bad {
            assert!(
                matches!(c.validate(), Err(Error::InvalidConfig { .. })),
                "{c:?}"
            );
        }
        Config::default().validate().unwrap();
        Config::online().validate().unwrap();
    }
}
