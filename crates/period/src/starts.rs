//! A job's period from the starts of its I/O phases, when something reports them.
//!
//! The mount's client stamps every request with the start of its job's current I/O phase (the
//! same stamp on every server, `iosets_client`'s phase stamps); a server sees those stamps
//! whatever its queue does to the requests: a phase whose service is chopped into pieces, or
//! that waits behind other jobs, still has one stamp. The period is then the time between
//! consecutive phase starts, with no spectral analysis at all. The runtime's `JobBook` uses
//! [`PhaseStarts`] for every job whose requests carry stamps, and the fluid simulator uses the
//! same code for its `:online:stamps` heuristics, so that its prediction of `auto` models
//! what the servers do.
//!
//! # The rule
//! - Starts closer than [`SAME_PHASE`] to the last one are the same phase (the nodes of one job
//!   stamp a phase a few ms apart); an older start is a late request of an earlier phase.
//! - Two consecutive intervals that agree within 10% give their mean.
//! - Otherwise, from three intervals on, the median of the last three: one odd interval (a
//!   first phase that waited behind fifteen others) never decides alone.
//! - A change of behaviour shows after two intervals of the new one (they agree).
//!
//! What it is not: a detector for streams without phase starts (traces, the C library's
//! requests); that is [`crate::online`]'s job.

use iosets_types::Nanos;

/// Phase starts closer than this are one phase.
pub const SAME_PHASE: Nanos = Nanos(20_000_000);

/// Intervals kept: the rule reads the last three.
const KEPT: usize = 3;

/// The starts of one job's phases so far, and its period from them (see the
/// [module docs](self)). 56 bytes, no allocation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PhaseStarts {
    last: Option<Nanos>,
    /// The last intervals, newest at `(next + KEPT - 1) % KEPT`.
    intervals: [Nanos; KEPT],
    next: usize,
    count: u64,
}

impl PhaseStarts {
    /// A phase start was seen at `start` (a stamp, or a burst's start). Returns the period when
    /// `start` begins a new phase and the intervals so far give one.
    pub fn observe(&mut self, start: Nanos) -> Option<Nanos> {
        let last = self.last.get_or_insert(start);
        if start <= *last + SAME_PHASE {
            // The same phase, or an older one's request finishing late.
            return None;
        }
        let interval = start - *last;
        *last = start;
        self.intervals[self.next] = interval;
        self.next = (self.next + 1) % KEPT;
        self.count += 1;
        self.estimate()
    }

    /// The period the intervals so far give, if any.
    pub fn estimate(&self) -> Option<Nanos> {
        if self.count < 2 {
            return None;
        }
        let mut two = [self.recent(1), self.recent(2)].map(|n| n.0);
        two.sort_unstable();
        if two[1] as f64 <= two[0] as f64 * 1.1 {
            return Some(Nanos((two[0] + two[1]) / 2));
        }
        if self.count < 3 {
            return None;
        }
        let mut three = [self.recent(1), self.recent(2), self.recent(3)].map(|n| n.0);
        three.sort_unstable();
        Some(Nanos(three[1]))
    }

    /// Whether any start was seen.
    pub fn seen(&self) -> bool {
        self.last.is_some()
    }

    /// The `i`-th newest interval, from 1.
    fn recent(&self, i: usize) -> Nanos {
        self.intervals[(self.next + KEPT - i) % KEPT]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(secs: f64) -> Nanos {
        Nanos::from_secs_f64(secs)
    }

    fn feed(p: &mut PhaseStarts, starts: &[f64]) -> Vec<Option<Nanos>> {
        starts.iter().map(|&t| p.observe(s(t))).collect()
    }

    #[test]
    fn two_agreeing_intervals_give_their_mean() {
        let mut p = PhaseStarts::default();
        let got = feed(&mut p, &[10.0, 30.0, 50.5]);
        assert_eq!(got[..2], [None, None]);
        assert_eq!(got[2], Some(s(20.25)));
        assert_eq!(p.estimate(), Some(s(20.25)));
    }

    #[test]
    fn one_odd_interval_never_decides_alone() {
        // Seed 004 at 1/20: the last of fifteen newcomers starts its second phase 37.5 s after
        // its first (it waited behind the others), then every 19.2 s.
        let mut p = PhaseStarts::default();
        let got = feed(&mut p, &[18.0, 55.5, 74.7, 93.9]);
        assert_eq!(
            got[..3],
            [None, None, None],
            "37.5 s and 19.2 s disagree: {got:?}"
        );
        let period = got[3].expect("two intervals of 19.2 s agree").as_secs_f64();
        assert!((period - 19.2).abs() < 1e-6, "{period}");
        // A later odd interval (one phase delayed) is outvoted by the two before it.
        p.observe(s(93.9 + 30.0));
        let period = p.estimate().unwrap().as_secs_f64();
        assert!((period - 19.2).abs() < 1e-6, "{period}");
    }

    #[test]
    fn starts_within_same_phase_and_late_ones_are_one_phase() {
        let mut p = PhaseStarts::default();
        feed(&mut p, &[0.0, 0.004, 12.0, 12.019, 11.5, 24.0]);
        assert_eq!(p.estimate(), Some(s(12.0)));
        assert!(p.seen());
        assert!(!PhaseStarts::default().seen());
    }

    #[test]
    fn it_is_as_small_as_its_docs_say() {
        assert_eq!(std::mem::size_of::<PhaseStarts>(), 56);
    }
}
