//! Synthetic traces with a known period, for tests and benchmarks.
//!
//! A periodic job alternates compute (no I/O) and I/O phases, as in the IO-SETS model: iteration
//! `i` computes for `(1 - io_fraction)·period` then writes `phase_bytes` in `requests_per_phase`
//! back-to-back requests during `io_fraction·period`. With `jitter = j`, every compute length, I/O
//! length and volume is multiplied by its own `1 + j·u`, `u` uniform in `[-1, 1]`. With
//! `background`, small requests (4 to 256 KiB, about ten per period) arrive as a Poisson process
//! over the whole run. The truth is measured on the generated trace itself: the mean time between
//! consecutive phase starts (the definition of `w_iter`), not the nominal period.
//!
//! Everything is seeded ([`rand_chacha::ChaCha8Rng`]): one spec, one trace, on every platform.

use iosets_types::Nanos;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::event::Event;

/// A periodic job to generate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PeriodicSpec {
    /// Nominal period, seconds.
    pub period_s: f64,
    /// Share of the period spent in I/O, in (0, 1).
    pub io_fraction: f64,
    /// I/O phases.
    pub iterations: usize,
    /// Relative jitter on every phase length and volume, in [0, 1).
    pub jitter: f64,
    /// Whether small random background requests are added.
    pub background: bool,
    /// Nominal bytes of one I/O phase.
    pub phase_bytes: u64,
    /// Requests per I/O phase.
    pub requests_per_phase: usize,
    /// Seed of the generator.
    pub seed: u64,
}

impl PeriodicSpec {
    /// A clean job: I/O 20% of the period, 1 GiB per phase in 32 requests, no jitter, no
    /// background.
    pub fn new(period_s: f64, iterations: usize) -> PeriodicSpec {
        PeriodicSpec {
            period_s,
            io_fraction: 0.2,
            iterations,
            jitter: 0.0,
            background: false,
            phase_bytes: 1 << 30,
            requests_per_phase: 32,
            seed: 1,
        }
    }

    /// Generates the trace.
    pub fn generate(&self) -> SynthTrace {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let mut t = 0.0;
        let mut events = Vec::new();
        let mut phase_starts = Vec::new();
        self.phases_into(&mut rng, &mut t, &mut events, &mut phase_starts);
        if self.background {
            self.background_into(&mut rng, 0.0, t, &mut events);
            events.sort_by_key(|e| (e.start, e.end));
        }
        SynthTrace {
            events,
            phase_starts,
        }
    }

    /// Appends this spec's iterations from `*t` (seconds), moving `*t` to the end of the last
    /// I/O phase.
    fn phases_into(
        &self,
        rng: &mut ChaCha8Rng,
        t: &mut f64,
        events: &mut Vec<Event>,
        phase_starts: &mut Vec<Nanos>,
    ) {
        let j = self.jitter.clamp(0.0, 0.99);
        let vary = |rng: &mut ChaCha8Rng| 1.0 + j * rng.gen_range(-1.0..=1.0);
        let p = self.period_s;
        let reqs = self.requests_per_phase.max(1);
        for _ in 0..self.iterations {
            *t += (1.0 - self.io_fraction) * p * vary(rng);
            let len = self.io_fraction * p * vary(rng);
            let bytes = (self.phase_bytes as f64 * vary(rng)).round() as u64;
            phase_starts.push(Nanos::from_secs_f64(*t));
            let each = bytes / reqs as u64;
            for r in 0..reqs {
                let s = *t + len * r as f64 / reqs as f64;
                let e = *t + len * (r + 1) as f64 / reqs as f64;
                let b = if r + 1 == reqs {
                    bytes - each * (reqs as u64 - 1)
                } else {
                    each
                };
                events.push(Event::from_secs(s, e, b));
            }
            *t += len;
        }
    }

    /// Appends small background requests over `[from, to)` seconds: about ten per period, 4 to
    /// 256 KiB each, at the phases' bandwidth.
    fn background_into(&self, rng: &mut ChaCha8Rng, from: f64, to: f64, events: &mut Vec<Event>) {
        let p = self.period_s;
        let bandwidth = self.phase_bytes as f64 / (self.io_fraction * p);
        let rate = 10.0 / p;
        let mut s = from;
        loop {
            s += -(1.0 - rng.gen::<f64>()).ln() / rate;
            if s >= to {
                break;
            }
            let bytes = rng.gen_range(4096..=262_144u64);
            events.push(Event::from_secs(s, s + bytes as f64 / bandwidth, bytes));
        }
    }
}

/// A job that changes behaviour: each spec's iterations in turn (their `seed`s are not used:
/// the whole trace draws from `seed`), with background I/O where a spec asks for it. A behaviour
/// begins with its first compute phase, at the end of the previous behaviour's last I/O phase.
pub fn changing(behaviours: &[PeriodicSpec], seed: u64) -> ChangingTrace {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut t = 0.0;
    let mut events = Vec::new();
    let mut phase_starts = Vec::new();
    let mut parts = Vec::new();
    let mut changes = Vec::new();
    let mut spans = Vec::new();
    for (k, spec) in behaviours.iter().enumerate() {
        if k > 0 {
            changes.push(Nanos::from_secs_f64(t));
        }
        let (from, first) = (t, phase_starts.len());
        spec.phases_into(&mut rng, &mut t, &mut events, &mut phase_starts);
        parts.push(first..phase_starts.len());
        spans.push((from, t));
    }
    for (spec, &(from, to)) in behaviours.iter().zip(&spans) {
        if spec.background {
            spec.background_into(&mut rng, from, to, &mut events);
        }
    }
    events.sort_by_key(|e| (e.start, e.end));
    ChangingTrace {
        trace: SynthTrace {
            events,
            phase_starts,
        },
        parts,
        changes,
    }
}

/// A generated trace of several behaviours and its ground truth.
#[derive(Clone, Debug, PartialEq)]
pub struct ChangingTrace {
    /// The events and every phase start.
    pub trace: SynthTrace,
    /// The phases (indices into `trace.phase_starts`) of each behaviour.
    pub parts: Vec<std::ops::Range<usize>>,
    /// When each behaviour after the first began: the end of the previous one's last I/O phase.
    pub changes: Vec<Nanos>,
}

impl ChangingTrace {
    /// The true `w_iter` of behaviour `k`, seconds: mean time between its consecutive phase
    /// starts; `None` with fewer than two phases.
    pub fn true_period_s(&self, k: usize) -> Option<f64> {
        let starts = &self.trace.phase_starts[self.parts.get(k)?.clone()];
        let (first, last) = (starts.first()?, starts.last()?);
        (starts.len() >= 2).then(|| (*last - *first).as_secs_f64() / (starts.len() - 1) as f64)
    }
}

/// A generated trace and its ground truth.
#[derive(Clone, Debug, PartialEq)]
pub struct SynthTrace {
    /// The requests, sorted by start.
    pub events: Vec<Event>,
    /// When each I/O phase started.
    pub phase_starts: Vec<Nanos>,
}

impl SynthTrace {
    /// The true `w_iter` of this trace, seconds: mean time between consecutive phase starts;
    /// `None` with fewer than two phases.
    pub fn true_period_s(&self) -> Option<f64> {
        let (first, last) = (self.phase_starts.first()?, self.phase_starts.last()?);
        let n = self.phase_starts.len();
        (n >= 2).then(|| (*last - *first).as_secs_f64() / (n - 1) as f64)
    }
}

/// Aperiodic input: `count` requests of `bytes` each, arriving as a Poisson process at
/// `rate_per_s`, each lasting `duration_s`.
pub fn poisson(
    count: usize,
    rate_per_s: f64,
    bytes: u64,
    duration_s: f64,
    seed: u64,
) -> Vec<Event> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut t = 0.0;
    (0..count)
        .map(|_| {
            t += -(1.0 - rng.gen::<f64>()).ln() / rate_per_s;
            Event::from_secs(t, t + duration_s, bytes)
        })
        .collect()
}

/// Aperiodic input: one I/O burst of `requests` back-to-back requests of `bytes` each, from
/// `start_s`, each lasting `request_s`.
pub fn single_burst(start_s: f64, requests: usize, bytes: u64, request_s: f64) -> Vec<Event> {
    (0..requests)
        .map(|i| {
            let s = start_s + i as f64 * request_s;
            Event::from_secs(s, s + request_s, bytes)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_trace_has_the_nominal_shape() {
        let t = PeriodicSpec::new(100.0, 20).generate();
        assert_eq!(t.events.len(), 20 * 32);
        assert_eq!(t.phase_starts.len(), 20);
        assert!((t.true_period_s().unwrap() - 100.0).abs() < 1e-6);
        assert!((t.phase_starts[0].as_secs_f64() - 80.0).abs() < 1e-6);
        let bytes: u64 = t.events.iter().map(|e| e.bytes).sum();
        assert_eq!(bytes, 20 << 30);
    }

    #[test]
    fn jitter_and_background_change_the_trace_deterministically() {
        let spec = PeriodicSpec {
            jitter: 0.3,
            background: true,
            ..PeriodicSpec::new(10.0, 20)
        };
        let (a, b) = (spec.generate(), spec.generate());
        assert_eq!(a, b);
        assert!(a.events.len() > 20 * 32 + 100);
        let p = a.true_period_s().unwrap();
        assert!((p - 10.0).abs() < 2.0 && p != 10.0, "{p}");
    }
}
