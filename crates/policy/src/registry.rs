//! Policies by name: the list every front end (CLI, server, C library, simulator) builds from.

use crate::tunables::{TunableSpec, Tunables};
use crate::{
    aioli, anticipatory, cfq, deadline, elevator, iosets, mlf, noop, sjf, sw, timeorder, twins,
    wfq, Policy, PolicyError,
};

/// A registered policy: its name, a one-line summary, its tunables and its constructor.
#[derive(Clone, Copy, Debug)]
pub struct PolicySpec {
    /// The name it is built by.
    pub name: &'static str,
    /// What it does, in one line.
    pub summary: &'static str,
    /// The tunables it accepts.
    pub tunables: &'static [TunableSpec],
    build: fn(&mut Tunables) -> Result<Box<dyn Policy>, PolicyError>,
}

/// Every registered policy, in the order `iosets policies` lists them.
pub const POLICIES: &[PolicySpec] = &[
    PolicySpec {
        name: noop::NAME,
        summary: "arrival order, no reordering, no merging (the baseline)",
        tunables: noop::TUNABLES,
        build: |_| Ok(Box::new(noop::Noop::default())),
    },
    PolicySpec {
        name: timeorder::NAME,
        summary: "arrival order; merge=true merges contiguous requests (AGIOS TO / TO-agg)",
        tunables: timeorder::TUNABLES,
        build: |t| Ok(Box::new(timeorder::TimeOrder::from_tunables(t)?)),
    },
    PolicySpec {
        name: elevator::NAME,
        summary: "sorted by (file, offset), one-way sweeps (C-SCAN), contiguous requests merged",
        tunables: elevator::TUNABLES,
        build: |t| Ok(Box::new(elevator::Elevator::from_tunables(t)?)),
    },
    PolicySpec {
        name: deadline::NAME,
        summary: "Linux deadline: sorted batches, read/write FIFOs with expiry, reads preferred",
        tunables: deadline::TUNABLES,
        build: |t| Ok(Box::new(deadline::Deadline::from_tunables(t)?)),
    },
    PolicySpec {
        name: anticipatory::NAME,
        summary: "deadline plus a short wait after a read for the same job's next nearby read",
        tunables: anticipatory::TUNABLES,
        build: |t| Ok(Box::new(anticipatory::Anticipatory::from_tunables(t)?)),
    },
    PolicySpec {
        name: cfq::NAME,
        summary: "Linux CFQ by job: round robin of time slices, idle window, reads before writes",
        tunables: cfq::TUNABLES,
        build: |t| Ok(Box::new(cfq::Cfq::from_tunables(t)?)),
    },
    PolicySpec {
        name: sjf::NAME,
        summary:
            "AGIOS SJF: the file/direction with the fewest queued bytes first, 16-request merging",
        tunables: sjf::TUNABLES,
        build: |t| Ok(Box::new(sjf::Sjf::from_tunables(t)?)),
    },
    PolicySpec {
        name: mlf::NAME,
        summary: "AGIOS MLF: round robin over files, per-request quanta doubling each visit",
        tunables: mlf::TUNABLES,
        build: |t| Ok(Box::new(mlf::Mlf::from_tunables(t)?)),
    },
    PolicySpec {
        name: aioli::NAME,
        summary:
            "AGIOS aIOLi: FCFS across files by eligible head, offset order inside, adaptive quanta",
        tunables: aioli::TUNABLES,
        build: |t| Ok(Box::new(aioli::Aioli::from_tunables(t)?)),
    },
    PolicySpec {
        name: sw::NAME,
        summary: "AGIOS SW: by (arrival window, application), one application's requests together",
        tunables: sw::TUNABLES,
        build: |t| Ok(Box::new(sw::StaticWindows::from_tunables(t)?)),
    },
    PolicySpec {
        name: twins::NAME,
        summary: "AGIOS TWINS: a time window per data server (class) in round robin",
        tunables: twins::TUNABLES,
        build: |t| Ok(Box::new(twins::Twins::from_tunables(t)?)),
    },
    PolicySpec {
        name: wfq::NAME,
        summary: "weighted fair queuing by bytes among jobs or classes (WF2Q+ virtual time)",
        tunables: wfq::TUNABLES,
        build: |t| Ok(Box::new(wfq::Wfq::from_tunables(t)?)),
    },
    PolicySpec {
        name: iosets::NAME,
        summary: "IO-SETS: one job at a time per set, sets share bytes by priority (WF2Q+)",
        tunables: iosets::TUNABLES,
        build: |t| Ok(Box::new(iosets::IoSets::from_tunables(t)?)),
    },
];

/// The names of every registered policy.
pub fn names() -> Vec<&'static str> {
    POLICIES.iter().map(|p| p.name).collect()
}

/// The spec of the policy called `name`.
pub fn spec(name: &str) -> Result<&'static PolicySpec, PolicyError> {
    POLICIES
        .iter()
        .find(|p| p.name.eq_ignore_ascii_case(name.trim()))
        .ok_or_else(|| PolicyError::UnknownPolicy {
            name: name.to_string(),
            known: names(),
        })
}

/// Builds the policy `name` with `tunables` (`key=value` pairs, see [`crate::tunables::parse_pairs`]).
///
/// An unknown name, an unknown key, a repeated key or a bad value is an error naming the valid
/// choices.
pub fn build(name: &str, tunables: &[(String, String)]) -> Result<Box<dyn Policy>, PolicyError> {
    let spec = spec(name)?;
    let mut t = Tunables::new(spec.name, spec.tunables, tunables)?;
    let policy = (spec.build)(&mut t)?;
    t.finish()?;
    Ok(policy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_policy_builds_with_defaults() {
        for p in POLICIES {
            let built = build(p.name, &[]).unwrap();
            assert_eq!(built.name(), p.name);
        }
    }

    #[test]
    fn unknown_policy_lists_the_valid_ones() {
        let err = build("cfqq", &[]).unwrap_err().to_string();
        for n in names() {
            assert!(err.contains(n), "{err}");
        }
    }

    #[test]
    fn every_default_is_accepted_when_given_explicitly() {
        for p in POLICIES {
            let pairs: Vec<(String, String)> = p
                .tunables
                .iter()
                .filter(|t| t.family_prefix().is_none())
                .map(|t| (t.name.to_string(), t.default.to_string()))
                .collect();
            build(p.name, &pairs).unwrap_or_else(|e| panic!("{}: {e}", p.name));
        }
    }
}
