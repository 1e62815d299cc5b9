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
//! What it is not: a change-point detector. One window is assumed to hold one behaviour; the
//! [`crate::online`] detector chooses the windows.

use std::sync::Arc;

use iosets_types::Nanos;
use rustfft::num_complex::Complex;
use rustfft::{Fft, FftPlanner};

use crate::error::{Error, Result};
use crate::event::Event;

/// Settings of the detector. [`Config::default`] suits offline traces; the online detector uses
/// [`Config::online`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Config {
    /// Bins of the first pass (a power of two, 64 to 2^22).
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
            bins: 1 << 14,
            max_bins: 1 << 20,
            min_confidence: 0.5,
            min_phases: 3,
        }
    }
}

impl Config {
    /// The online detector's settings: fewer bins, so each re-evaluation is cheap (about 1 ms).
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
pub fn detect(events: &[Event]) -> Detection {
    Analyzer::new(Config::default())
        .expect("the default configuration is valid")
        .analyze(events)
}

/// A reusable detector: holds its configuration and FFT plans, so that repeated analyses (the
/// online detector's) do not plan again.
pub struct Analyzer {
    config: Config,
    planner: FftPlanner<f64>,
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
            planner: FftPlanner::new(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
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
        if events.is_empty() {
            return not_periodic(NotPeriodicReason::NoEvents, None);
        }
        if t1 <= t0 || events.iter().all(|e| e.bytes == 0) {
            return not_periodic(NotPeriodicReason::NoActivity, None);
        }
        let mut n = self.config.bins;
        loop {
            let w = (t1.0 - t0.0) as f64 / n as f64;
            let x = bin(events, t0, w, n);
            if x.iter().all(|&v| v <= 0.0) {
                return not_periodic(NotPeriodicReason::NoActivity, None);
            }
            let det = self.analyze_bins(&x, w, clipped_start);
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

    fn analyze_bins(&mut self, x: &[f64], w: f64, clipped_start: bool) -> Detection {
        let n = x.len();
        let mean = x.iter().sum::<f64>() / n as f64;
        let centred: Vec<f64> = x.iter().map(|v| v - mean).collect();
        let peaks = self.spectral_peaks(&centred, 3);
        let acf = self.autocorrelation(&centred);
        let to_nanos = |bins: f64| Nanos((bins * w).round().max(0.0) as u64);
        let spectral_period = peaks.first().map(|&p| to_nanos(p));

        let bursts_at = |scale: Option<f64>| -> Vec<Burst> {
            let bridge = scale.map_or(0.0, |s| 0.05 * s);
            let mut b = bursts(x, bridge);
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

    fn fft(&mut self, len: usize, inverse: bool) -> Arc<dyn Fft<f64>> {
        if inverse {
            self.planner.plan_fft_inverse(len)
        } else {
            self.planner.plan_fft_forward(len)
        }
    }

    /// Periods (in bins) of the `k` strongest local maxima of the power spectrum with at least two
    /// cycles in the window and at least 4 bins per cycle, strongest first.
    fn spectral_peaks(&mut self, x: &[f64], k: usize) -> Vec<f64> {
        let n = x.len();
        let mut buf: Vec<Complex<f64>> = x.iter().map(|&v| Complex::new(v, 0.0)).collect();
        self.fft(n, false).process(&mut buf);
        let mag: Vec<f64> = buf[..=n / 2].iter().map(|c| c.norm()).collect();
        let mut peaks: Vec<(usize, f64)> = (2..n / 4)
            .filter(|&i| mag[i] > 0.0 && mag[i] >= mag[i - 1] && mag[i] >= mag[i + 1])
            .map(|i| (i, mag[i]))
            .collect();
        peaks.sort_by(|a, b| b.1.total_cmp(&a.1));
        peaks
            .iter()
            .take(k)
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

    /// The unbiased, normalised autocorrelation of `x` for lags `0..n`, by FFT.
    fn autocorrelation(&mut self, x: &[f64]) -> Acf {
        let n = x.len();
        let m = 2 * n;
        let mut buf: Vec<Complex<f64>> = Vec::with_capacity(m);
        buf.extend(x.iter().map(|&v| Complex::new(v, 0.0)));
        buf.resize(m, Complex::new(0.0, 0.0));
        self.fft(m, false).process(&mut buf);
        for c in buf.iter_mut() {
            *c = Complex::new(c.norm_sqr(), 0.0);
        }
        self.fft(m, true).process(&mut buf);
        let r0 = buf[0].re / n as f64;
        let rho = if r0 > 0.0 {
            (0..n)
                .map(|l| buf[l].re / (n - l) as f64 / r0)
                .collect::<Vec<_>>()
        } else {
            vec![0.0; n]
        };
        Acf { rho }
    }
}

/// The autocorrelation, usable up to half the window.
struct Acf {
    rho: Vec<f64>,
}

impl Acf {
    fn max_lag(&self) -> f64 {
        (self.rho.len() / 2) as f64
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
        let dip = self.rho[1..k].iter().copied().fold(f64::INFINITY, f64::min);
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

fn not_periodic(reason: NotPeriodicReason, best: Option<Estimate>) -> Detection {
    Detection::NotPeriodic { reason, best }
}

/// Bytes per bin of `events` over `n` bins of `w` nanoseconds from `t0`; events are clipped to
/// the window with their bytes prorated. O(events + n).
pub(crate) fn bin(events: &[Event], t0: Nanos, w: f64, n: usize) -> Vec<f64> {
    let mut x = vec![0.0; n];
    // Rate of events covering whole bins, as differences (added up at the end).
    let mut diff = vec![0.0; n + 1];
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
    for (xi, d) in x.iter_mut().zip(&diff) {
        run += d;
        *xi += run.max(0.0);
    }
    x
}

/// The value `v` such that half of the total of `values` lies in values ≥ `v`.
fn weighted_median(mut values: Vec<f64>) -> f64 {
    values.retain(|v| *v > 0.0);
    values.sort_by(f64::total_cmp);
    let total: f64 = values.iter().sum();
    let mut acc = 0.0;
    for v in values.iter().rev() {
        acc += v;
        if acc >= total / 2.0 {
            return *v;
        }
    }
    0.0
}

/// Bursts of the binned signal: runs of bins above a tenth of the volume-weighted median bin,
/// runs closer than `bridge` bins joined, runs under a tenth of the volume-weighted median burst
/// dropped.
fn bursts(x: &[f64], bridge: f64) -> Vec<Burst> {
    let level = 0.1 * weighted_median(x.to_vec());
    if level <= 0.0 {
        return Vec::new();
    }
    let mut runs: Vec<(usize, usize, f64)> = Vec::new(); // [start, end) in bins, bytes
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
        match runs.last_mut() {
            Some(last) if ((s - last.1) as f64) <= bridge => {
                last.1 = i;
                last.2 += bytes;
            }
            _ => runs.push((s, i, bytes)),
        }
    }
    let typical = weighted_median(runs.iter().map(|r| r.2).collect());
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
