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
//! - **One interval decides where waiting cannot have moved the set**
//!   ([`PhaseStarts::estimate_by`]). A period is the time between phase starts when the phase
//!   runs alone: the compute between two phases plus the phase's time alone. So the first
//!   interval bounds it on both sides. It is at most the interval (the phase may have waited),
//!   and at least the compute time, the interval less the phase as measured (the time from its
//!   start to the last end of its requests seen, [`PhaseStarts::finished`]). When both bounds
//!   map to one set, that set is the job's, and it is known one interval earlier than by
//!   agreement. It is worth a whole window for a job of long period. A tenth of the interval
//!   is taken off the lower bound as well: a server sees only its own requests' ends, and the
//!   phase may end later on another server. Seed 004's newcomer above (37.5 s, of which about
//!   15 s is compute) has bounds in sets 1 and 2: it waits for agreement, as before.
//!
//! What it is not: a detector for streams without phase starts (traces, the C library's
//! requests); that is [`crate::online`]'s job.

use iosets_types::Nanos;

/// Phase starts closer than this are one phase.
pub const SAME_PHASE: Nanos = Nanos(20_000_000);

/// Intervals kept: the rule reads the last three.
const KEPT: usize = 3;

/// The starts of one job's phases so far, and its period from them (see the
/// [module docs](self)). 88 bytes, no allocation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PhaseStarts {
    last: Option<Nanos>,
    /// The last end seen of a request of the phase that began at `last`.
    end: Option<Nanos>,
    /// The first interval's compute time (the interval less its phase as measured), once the
    /// first phase's end was seen before the second began.
    first_compute: Option<Nanos>,
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
        if self.count == 0 {
            self.first_compute = self.end.map(|end| interval.saturating_sub(end - *last));
        }
        *last = start;
        self.end = None;
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

    /// A request of the phase that began at `start` ended at `at`: the phase lasted at least
    /// until then. Ends of an earlier phase's late requests are ignored.
    pub fn finished(&mut self, start: Nanos, at: Nanos) {
        let Some(last) = self.last else { return };
        if start + SAME_PHASE < last || start > last + SAME_PHASE || at < last {
            return;
        }
        self.end = Some(self.end.map_or(at, |end| end.max(at)));
    }

    /// [`PhaseStarts::estimate`], or with a single interval, that interval when the period's
    /// bounds from it fall in one set by `set_of` (the [module docs](self)' last rule).
    pub fn estimate_by(&self, set_of: impl Fn(Nanos) -> Option<i32>) -> Option<Nanos> {
        if self.count != 1 {
            return self.estimate();
        }
        let interval = self.recent(1);
        let lower = self.first_compute?.saturating_sub(Nanos(interval.0 / 10));
        if lower == Nanos::ZERO {
            return None;
        }
        let set = set_of(interval)?;
        (set_of(lower) == Some(set)).then_some(interval)
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
        assert_eq!(std::mem::size_of::<PhaseStarts>(), 88);
    }

    /// Set-10's `round(log10 w)`, as the servers map periods.
    fn set10(n: Nanos) -> Option<i32> {
        let secs = n.as_secs_f64();
        (secs > 0.0).then(|| secs.log10().round() as i32)
    }

    #[test]
    fn one_interval_decides_when_compute_and_interval_are_in_one_set() {
        // The random workloads' low class: a 20 s period, a phase of 2 s that waited to 4 s.
        let mut p = PhaseStarts::default();
        p.observe(s(1.0));
        p.finished(s(1.0), s(3.0));
        p.finished(s(1.0), s(5.0));
        p.finished(s(1.0), s(4.0));
        assert_eq!(p.estimate_by(set10), None, "no interval yet");
        assert_eq!(p.observe(s(21.0)), None, "agreement needs two");
        // Bounds 20 - 4 - 2 = 14 s and 20 s: both set 1.
        assert_eq!(p.estimate_by(set10), Some(s(20.0)));
        // The second interval takes over as before.
        p.finished(s(21.0), s(22.0));
        assert_eq!(p.observe(s(41.4)), Some(s(20.2)));
        assert_eq!(p.estimate_by(set10), Some(s(20.2)));
    }

    #[test]
    fn a_first_phase_stretched_across_a_set_does_not_decide_alone() {
        // Seed 004's last newcomer: 37.5 s (set 2) of which its first phase took 22 s: the
        // compute, 15.5 s, is in set 1.
        let mut p = PhaseStarts::default();
        p.observe(s(18.0));
        p.finished(s(18.0), s(40.0));
        p.observe(s(55.5));
        assert_eq!(p.estimate_by(set10), None);
        // Without a seen end there is no lower bound at all.
        let mut q = PhaseStarts::default();
        q.observe(s(0.0));
        q.observe(s(20.0));
        assert_eq!(q.estimate_by(set10), None);
        // A compute time near the set's edge loses it to the margin: 20 s less a 16.7 s phase
        // is 3.3 s (set 1, from 3.16 s), less the margin 1.3 s (set 0).
        let mut r = PhaseStarts::default();
        r.observe(s(0.0));
        r.finished(s(0.0), s(16.7));
        r.observe(s(20.0));
        assert_eq!(r.estimate_by(set10), None);
    }

    #[test]
    fn ends_of_other_phases_do_not_count() {
        let mut p = PhaseStarts::default();
        p.finished(s(0.0), s(1.0));
        p.observe(s(10.0));
        // A late request of an older phase, and an end before the phase began.
        p.finished(s(2.0), s(19.0));
        p.finished(s(10.0), s(9.0));
        p.observe(s(30.0));
        assert_eq!(p.estimate_by(set10), None, "no end of the phase seen");
        let mut q = PhaseStarts::default();
        q.observe(s(10.0));
        // A start within SAME_PHASE is the same phase (another node's stamp).
        q.finished(s(10.015), s(12.0));
        q.observe(s(30.0));
        assert_eq!(q.estimate_by(set10), Some(s(20.0)));
    }
}
