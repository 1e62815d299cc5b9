//! The Set-10 mapping of IO-SETS (Boito et al., TPDS 2023), generalised to any base (Set-b).
//!
//! A job's characteristic time `w_iter` is the mean time between the starts of consecutive I/O
//! phases, in seconds. Set-10 puts it in set `i = round(log10 w_iter)` — the order of magnitude of its
//! period — and gives the set priority `p_i = 10^-i`: frequent, short I/O gets most of the bandwidth.
//! With base `b`, `i = round(log_b w_iter)` and `p_i = b^-i`.
//!
//! A job with no estimate yet gets a set of its own and a default priority (seed 004 uses 1/50).

use iosets_types::Priority;

/// The priority seed 004 gives a job before its period is known: 1/50.
pub const DEFAULT_PRIORITY: f64 = 0.02;

/// Where the Set-b mapping puts a job.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Assignment {
    /// The job has an estimate: set `set`, priority `base^-set`.
    Set {
        /// The set index, `round(log_b w_iter)`.
        set: i32,
        /// The set's priority.
        priority: Priority,
    },
    /// No estimate yet: a set of its own with the default priority.
    Unknown {
        /// The default priority.
        priority: Priority,
    },
}

impl Assignment {
    /// The priority, whichever the case.
    pub fn priority(&self) -> Priority {
        match *self {
            Assignment::Set { priority, .. } | Assignment::Unknown { priority } => priority,
        }
    }

    /// The set, `None` for a job without an estimate (a set of its own).
    pub fn set(&self) -> Option<i32> {
        match *self {
            Assignment::Set { set, .. } => Some(set),
            Assignment::Unknown { .. } => None,
        }
    }
}

/// The Set-b mapping: a base and the default priority for jobs without an estimate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SetMapping {
    base: f64,
    default_priority: Priority,
}

impl Default for SetMapping {
    /// Set-10 with seed 004's default priority of 1/50.
    fn default() -> SetMapping {
        SetMapping {
            base: 10.0,
            default_priority: Priority::new(DEFAULT_PRIORITY).expect("positive"),
        }
    }
}

impl SetMapping {
    /// Set-`base`; `None` unless `base > 1` and finite.
    pub fn new(base: f64, default_priority: Priority) -> Option<SetMapping> {
        (base.is_finite() && base > 1.0).then_some(SetMapping {
            base,
            default_priority,
        })
    }

    /// The base `b`.
    pub fn base(&self) -> f64 {
        self.base
    }

    /// The set of a job whose period is `w_iter_secs`: `round(log_b w_iter)`; `None` unless the
    /// period is finite and positive.
    pub fn set_of(&self, w_iter_secs: f64) -> Option<i32> {
        if !(w_iter_secs.is_finite() && w_iter_secs > 0.0) {
            return None;
        }
        let i = (w_iter_secs.ln() / self.base.ln()).round();
        Some(i.clamp(i32::MIN as f64, i32::MAX as f64) as i32)
    }

    /// The priority of set `set`: `b^-set`. Jobs of one set get bit-identical priorities.
    pub fn priority_of_set(&self, set: i32) -> Priority {
        let p = self.base.powi(-set);
        Priority::new(p).unwrap_or_else(|| {
            // b^-set overflowed to infinity or underflowed to zero: saturate to the extreme finite
            // priorities, which still order the sets correctly.
            Priority::new(if set < 0 { f64::MAX } else { f64::MIN_POSITIVE }).expect("finite > 0")
        })
    }

    /// The set whose priority is exactly `priority` (`b^-set`, within rounding), if any: the
    /// inverse of [`SetMapping::priority_of_set`], for showing which set a priority given by
    /// hand stands for.
    pub fn set_of_priority(&self, priority: f64) -> Option<i32> {
        if !(priority.is_finite() && priority > 0.0) {
            return None;
        }
        let i = (-priority.ln() / self.base.ln()).round();
        if !i.is_finite() || i.abs() > 300.0 {
            return None;
        }
        let p = self.priority_of_set(i as i32).get();
        ((p - priority).abs() <= 1e-9 * p).then_some(i as i32)
    }

    /// Maps a job's period estimate (seconds), or its absence, to a set and priority.
    pub fn assign(&self, w_iter_secs: Option<f64>) -> Assignment {
        match w_iter_secs.and_then(|w| self.set_of(w)) {
            Some(set) => Assignment::Set {
                set,
                priority: self.priority_of_set(set),
            },
            None => Assignment::Unknown {
                priority: self.default_priority,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set10_boundaries_follow_the_paper() {
        let m = SetMapping::default();
        // log10 in [0.5, 1.5) -> set 1: w_iter from ~3.16 s to ~31.6 s.
        assert_eq!(m.set_of(4.0), Some(1));
        assert_eq!(m.set_of(31.0), Some(1));
        assert_eq!(m.set_of(32.0), Some(2));
        assert_eq!(m.set_of(316.0), Some(2));
        assert_eq!(m.set_of(317.0), Some(3));
        assert_eq!(m.set_of(64.0), Some(2));
        assert_eq!(m.set_of(640.0), Some(3));
        assert_eq!(m.set_of(0.5), Some(0));
        assert_eq!(m.set_of(0.0), None);
        assert_eq!(m.set_of(f64::NAN), None);
    }

    #[test]
    fn a_sets_priority_maps_back_to_the_set() {
        let m = SetMapping::default();
        for set in -5..=5 {
            assert_eq!(m.set_of_priority(m.priority_of_set(set).get()), Some(set));
        }
        for p in [0.02, 0.3, 0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert_eq!(m.set_of_priority(p), None, "{p}");
        }
        let two = SetMapping::new(2.0, Priority::new(0.5).unwrap()).unwrap();
        assert_eq!(two.set_of_priority(0.25), Some(2));
    }

    #[test]
    fn priorities_decrease_by_the_base() {
        let m = SetMapping::default();
        assert_eq!(m.priority_of_set(1).get(), 0.1);
        assert!((m.priority_of_set(2).get() - 0.01).abs() < 1e-15);
        assert_eq!(m.priority_of_set(0).get(), 1.0);
        let b2 = SetMapping::new(2.0, Priority::new(0.5).unwrap()).unwrap();
        assert_eq!(b2.set_of(64.0), Some(6));
        assert_eq!(b2.priority_of_set(6).get(), 1.0 / 64.0);
    }

    #[test]
    fn same_set_same_priority_bits() {
        let m = SetMapping::default();
        let a = m.assign(Some(40.0)).priority();
        let b = m.assign(Some(200.0)).priority();
        assert_eq!(a.key(), b.key());
    }

    #[test]
    fn no_estimate_gets_the_default() {
        let m = SetMapping::default();
        assert_eq!(
            m.assign(None),
            Assignment::Unknown {
                priority: Priority::new(0.02).unwrap()
            }
        );
        assert!(SetMapping::new(1.0, Priority::new(1.0).unwrap()).is_none());
    }

    #[test]
    fn extreme_sets_saturate_but_stay_ordered() {
        let m = SetMapping::default();
        assert!(m.priority_of_set(-400).get() > m.priority_of_set(-300).get() / 2.0);
        assert!(m.priority_of_set(400).get() > 0.0);
    }
}
