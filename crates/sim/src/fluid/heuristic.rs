//! The bandwidth-management heuristics of the IO-SETS paper, and where each puts a job.
//!
//! A heuristic answers, each time a job asks for I/O, two questions: which *set* the job joins
//! (inside a set, one job does I/O at a time, first come first served) and which *priority* the
//! set has (sets share the bandwidth in proportion to their priorities). The six of the paper:
//!
//! | heuristic | sets | priorities |
//! |---|---|---|
//! | `exclusive-fcfs` | one set for all jobs | (irrelevant) |
//! | `fair-share` | one set per job | equal |
//! | `set-10` (`set-<b>`) | Set-b of the job's `w_iter` | `b^-set` |
//! | `set-fairshare` | Set-10 sets | equal |
//! | `share+priority` | one set per job | Set-10 priority `10^-set` |
//! | `clairvoyant` | Set-10 of the mean `w_iter` of the distribution the job was drawn from | `10^-set` |
//!
//! The mapping itself is [`iosets_policy::set10::SetMapping`], the code the server runs.
//!
//! Set-based heuristics read a job's `w_iter` through an [`Estimate`]: known exactly (the mean of
//! its isolated iteration lengths), known with an injected error (each estimate multiplied by
//! `1 + U[-e, e]`, drawn afresh at every I/O phase), or estimated online from the job's own
//! simulated I/O history by a [`PeriodEstimator`] — today [`MeanGap`], the mean gap between the
//! starts of its bursts so far; the `period` crate's online detector can take its place behind
//! the same trait.
//!
//! A job without an estimate yet (online only: before its second burst) gets the mapping's default
//! priority (1/50) and, by the heuristic's [`UnknownPrior`], either joins the one shared "new" set
//! ([`SetKey::New`], `:online`, DESIGN.md's Set-10 mapping and the servers' `unknown=shared`):
//! exclusive among newcomers, first come first served by the time each asked for I/O like any
//! set, so newcomers take turns from their first phase; or gets a set of its own
//! ([`SetKey::Unknown`], `:online:own`, seed 004's prior and the servers' `unknown=own`), so
//! newcomers share the bandwidth and stay in step. Both are kept so that the comparison stays
//! reproducible. (The servers' guard that moves a job still unclassified after many phases out of
//! the new set has no counterpart here: [`MeanGap`] has an estimate from the second burst on.)

use std::fmt;

use iosets_period::starts::PhaseStarts;
use iosets_types::Nanos;
use std::str::FromStr;

use iosets_policy::set10::{Assignment, SetMapping};

use super::FluidError;

/// Every heuristic and suffix with a line saying what it does, for listings (`iosets sim
/// heuristics`, the Python bindings' `heuristics()`); [`CATALOGUE_NOTE`] follows them.
pub const CATALOGUE: [(&str, &str); 11] = [
    ("exclusive-fcfs", "one set for all jobs: one does I/O at a time, first come first served"),
    ("fair-share", "a set per job, equal priorities: B shared equally"),
    ("set-10", "sets round(log10 w_iter), priority 10^-set (the paper's SET-10)"),
    ("set-<b>", "Set-b for any base b > 1, e.g. set-2, set-3.5"),
    ("set-fairshare", "SET-10 sets, equal priorities"),
    ("share+priority", "a set per job, SET-10 priorities"),
    ("clairvoyant", "SET-10 of the mean w_iter of the job's group (the distribution it was drawn from)"),
    (":error=<e>", "suffix for set-<b>, set-fairshare, share+priority: each w_iter estimate × (1 + U[-e, e]), drawn at every I/O phase"),
    (":online", "same, w_iter estimated from the job's own simulated burst starts (mean gap); before the second burst, priority 1/50 in one shared \"new\" set, newcomers taking turns (the servers' unknown=shared)"),
    (":online:own", "same, but before the second burst a set of its own per job, priority 1/50 (seed 004's prior, the servers' unknown=own)"),
    (":online:stamps", "same, w_iter by the servers' rule for phase starts: two intervals within 10%, else the median of three (combines with :own)"),
];

/// The line that follows [`CATALOGUE`] in a listing.
pub const CATALOGUE_NOTE: &str =
    "(set-fairshare, share+priority and clairvoyant also take a base: set-fairshare-2, ...)";

/// Where a set-based heuristic gets a job's characteristic time `w_iter`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Estimate {
    /// The job's true `w_iter`: the mean of its isolated iteration lengths `t_cpu + t_io`.
    Known,
    /// The true `w_iter` times `1 + U[-error, error]`, drawn afresh at each I/O phase.
    Noisy {
        /// The relative error bound `e`, in `[0, 1)`.
        error: f64,
    },
    /// Estimated online from the job's simulated burst starts (see [`PeriodEstimator`]).
    Online {
        /// Where a job goes before it has an estimate.
        prior: UnknownPrior,
        /// How the burst starts become an estimate.
        estimator: EstimatorKind,
    },
}

/// Which [`PeriodEstimator`] an online heuristic uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum EstimatorKind {
    /// [`MeanGap`], the mean gap between burst starts so far (`:online`, the default).
    #[default]
    MeanGap,
    /// The servers' rule for jobs whose client stamps its phases
    /// ([`iosets_period::starts::PhaseStarts`], the same code: two agreeing intervals, else the
    /// median of three; `:online:stamps`), so the prediction of `iosets experiment seed004`'s
    /// `auto` models what the servers do.
    PhaseStarts,
}

/// Where an online heuristic puts a job that has no estimate yet (see the [module docs](self)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum UnknownPrior {
    /// One shared "new" set for all such jobs, exclusive among them (DESIGN.md's default;
    /// `:online`).
    #[default]
    Shared,
    /// A set of its own per such job (seed 004; `:online:own`).
    Own,
}

/// A heuristic of the IO-SETS paper (see the [module docs](self)).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Heuristic {
    /// One set for every job: one job does I/O at a time, first come first served.
    ExclusiveFcfs,
    /// Every job its own set, equal priorities: the bandwidth is shared equally.
    FairShare,
    /// Set-b: sets and priorities from the Set-b mapping of the job's `w_iter`.
    SetB {
        /// The base `b` (10 for SET-10).
        base: f64,
        /// Where `w_iter` comes from.
        estimate: Estimate,
    },
    /// Set-b sets, equal priorities.
    SetFairShare {
        /// The base `b`.
        base: f64,
        /// Where `w_iter` comes from.
        estimate: Estimate,
    },
    /// A set per job, Set-b priorities.
    SharePriority {
        /// The base `b`.
        base: f64,
        /// Where `w_iter` comes from.
        estimate: Estimate,
    },
    /// Set-b of the mean `w_iter` of the group (distribution) the job was drawn from.
    Clairvoyant {
        /// The base `b`.
        base: f64,
    },
}

impl Heuristic {
    /// SET-10 with known `w_iter`.
    pub const SET10: Heuristic = Heuristic::SetB {
        base: 10.0,
        estimate: Estimate::Known,
    };

    /// The six heuristics of the paper, in its order.
    pub const PAPER: [Heuristic; 6] = [
        Heuristic::ExclusiveFcfs,
        Heuristic::FairShare,
        Heuristic::SET10,
        Heuristic::SetFairShare {
            base: 10.0,
            estimate: Estimate::Known,
        },
        Heuristic::SharePriority {
            base: 10.0,
            estimate: Estimate::Known,
        },
        Heuristic::Clairvoyant { base: 10.0 },
    ];

    /// The base of the Set-b mapping this heuristic uses, if any.
    pub fn base(&self) -> Option<f64> {
        match *self {
            Heuristic::ExclusiveFcfs | Heuristic::FairShare => None,
            Heuristic::SetB { base, .. }
            | Heuristic::SetFairShare { base, .. }
            | Heuristic::SharePriority { base, .. }
            | Heuristic::Clairvoyant { base } => Some(base),
        }
    }

    /// Where this heuristic reads `w_iter` from, if it reads it at all.
    pub fn estimate(&self) -> Option<Estimate> {
        match *self {
            Heuristic::SetB { estimate, .. }
            | Heuristic::SetFairShare { estimate, .. }
            | Heuristic::SharePriority { estimate, .. } => Some(estimate),
            _ => None,
        }
    }

    /// Where a job without an estimate goes: the prior of an online heuristic, else `None` (the
    /// others always have an estimate).
    pub fn unknown_prior(&self) -> Option<UnknownPrior> {
        match self.estimate() {
            Some(Estimate::Online { prior, .. }) => Some(prior),
            _ => None,
        }
    }

    /// Checks the parameters: a base `> 1`, finite; an error in `[0, 1)`.
    pub fn validate(&self) -> Result<(), FluidError> {
        if let Some(b) = self.base() {
            if SetMapping::new(b, iosets_types::Priority::new(1.0).expect("1 > 0")).is_none() {
                return Err(FluidError::UnknownHeuristic {
                    name: self.to_string(),
                    problem: format!("base {b}: expected a finite number > 1"),
                });
            }
        }
        if let Some(Estimate::Noisy { error }) = self.estimate() {
            if !(error.is_finite() && (0.0..1.0).contains(&error)) {
                return Err(FluidError::UnknownHeuristic {
                    name: self.to_string(),
                    problem: format!("error {error}: expected a number in [0, 1)"),
                });
            }
        }
        Ok(())
    }
}

fn fmt_base(b: f64) -> String {
    if b == b.trunc() && b.abs() < 1e15 {
        format!("{}", b as i64)
    } else {
        format!("{b}")
    }
}

impl fmt::Display for Heuristic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let suffix = |b: f64| {
            if b == 10.0 {
                String::new()
            } else {
                format!("-{}", fmt_base(b))
            }
        };
        match *self {
            Heuristic::ExclusiveFcfs => write!(f, "exclusive-fcfs")?,
            Heuristic::FairShare => write!(f, "fair-share")?,
            Heuristic::SetB { base, .. } => write!(f, "set-{}", fmt_base(base))?,
            Heuristic::SetFairShare { base, .. } => write!(f, "set-fairshare{}", suffix(base))?,
            Heuristic::SharePriority { base, .. } => write!(f, "share+priority{}", suffix(base))?,
            Heuristic::Clairvoyant { base } => write!(f, "clairvoyant{}", suffix(base))?,
        }
        match self.estimate() {
            Some(Estimate::Noisy { error }) => write!(f, ":error={error}"),
            Some(Estimate::Online { prior, estimator }) => {
                write!(f, ":online")?;
                if prior == UnknownPrior::Own {
                    write!(f, ":own")?;
                }
                if estimator == EstimatorKind::PhaseStarts {
                    write!(f, ":stamps")?;
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

impl FromStr for Heuristic {
    type Err = FluidError;

    /// Parses the names of the [module docs](self): `exclusive-fcfs`, `fair-share`, `set-<b>`,
    /// `set-fairshare[-<b>]`, `share+priority[-<b>]`, `clairvoyant[-<b>]`, the three `w_iter`
    /// readers optionally followed by `:error=<e>` or `:online`, and `:online` optionally by the
    /// prior for jobs without an estimate, `:own` or `:shared` (the default).
    /// Case-insensitive; `_` may stand for `-`.
    fn from_str(s: &str) -> Result<Heuristic, FluidError> {
        let bad = |problem: String| FluidError::UnknownHeuristic {
            name: s.to_string(),
            problem,
        };
        let lower = s.trim().to_ascii_lowercase().replace('_', "-");
        let mut parts = lower.split(':');
        let name = parts.next().unwrap_or_default();
        let variant = parts.next();
        let options: Vec<&str> = parts.collect();
        let estimate = match variant {
            None => Estimate::Known,
            Some("online") => {
                let (mut prior, mut estimator) = (None, None);
                for o in &options {
                    match *o {
                        "shared" | "own" if prior.is_some() => {
                            return Err(bad(format!("a second prior {o:?} after :online")))
                        }
                        "shared" => prior = Some(UnknownPrior::Shared),
                        "own" => prior = Some(UnknownPrior::Own),
                        "stamps" | "mean-gap" if estimator.is_some() => {
                            return Err(bad(format!("a second estimator {o:?} after :online")))
                        }
                        "stamps" => estimator = Some(EstimatorKind::PhaseStarts),
                        "mean-gap" => estimator = Some(EstimatorKind::MeanGap),
                        _ => {
                            return Err(bad(format!(
                                "unknown option {o:?} after :online: expected a prior (own or \
                                 shared) and/or an estimator (mean-gap or stamps)"
                            )))
                        }
                    }
                }
                Estimate::Online {
                    prior: prior.unwrap_or_default(),
                    estimator: estimator.unwrap_or_default(),
                }
            }
            Some(v @ ("own" | "shared" | "stamps" | "mean-gap")) => {
                return Err(bad(format!(
                    ":{v} is an option of online estimates, so it follows :online \
                     (e.g. set-10:online:{v})"
                )))
            }
            Some(v) => match v.strip_prefix("error=") {
                Some(e) => Estimate::Noisy {
                    error: e
                        .parse()
                        .map_err(|_| bad(format!("error {e:?} is not a number")))?,
                },
                None => return Err(bad(format!("unknown variant {v:?}"))),
            },
        };
        if let (Estimate::Noisy { .. }, Some(p)) = (estimate, options.first()) {
            return Err(bad(format!(
                "unexpected suffix {p:?} after :error: only :online takes options"
            )));
        }
        let parse_base = |rest: &str| -> Result<f64, FluidError> {
            if rest.is_empty() {
                return Ok(10.0);
            }
            let b = rest
                .strip_prefix('-')
                .ok_or_else(|| bad(format!("unexpected {rest:?}")))?;
            b.parse()
                .map_err(|_| bad(format!("base {b:?} is not a number")))
        };
        let h = if name == "exclusive-fcfs" || name == "exclusive" {
            Heuristic::ExclusiveFcfs
        } else if name == "fair-share" || name == "fairshare" {
            Heuristic::FairShare
        } else if let Some(rest) = name.strip_prefix("set-fairshare") {
            Heuristic::SetFairShare {
                base: parse_base(rest)?,
                estimate,
            }
        } else if let Some(rest) = name
            .strip_prefix("share+priority")
            .or_else(|| name.strip_prefix("share-priority"))
        {
            Heuristic::SharePriority {
                base: parse_base(rest)?,
                estimate,
            }
        } else if let Some(rest) = name.strip_prefix("clairvoyant") {
            Heuristic::Clairvoyant {
                base: parse_base(rest)?,
            }
        } else if let Some(b) = name.strip_prefix("set-") {
            Heuristic::SetB {
                base: b
                    .parse()
                    .map_err(|_| bad(format!("base {b:?} is not a number")))?,
                estimate,
            }
        } else {
            return Err(bad("not a heuristic name".to_string()));
        };
        if variant.is_some() && h.estimate().is_none() {
            return Err(bad(format!(
                "{} does not read w_iter, so it takes no :error or :online variant",
                h
            )));
        }
        h.validate()?;
        Ok(h)
    }
}

/// The set a job joins for one I/O phase. Jobs with equal keys take turns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SetKey {
    /// The single set of EXCLUSIVE-FCFS.
    All,
    /// A set of its own (FAIR-SHARE, SHARE+PRIORITY): the job's index.
    Job(u32),
    /// Set `i` of the Set-b mapping.
    Index(i32),
    /// A job with no estimate yet, under the [`UnknownPrior::Own`] prior: a set of its own.
    Unknown(u32),
    /// The one shared set of the jobs with no estimate yet, under the [`UnknownPrior::Shared`]
    /// prior.
    New,
}

impl fmt::Display for SetKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetKey::All => write!(f, "all"),
            SetKey::Job(j) => write!(f, "job{j}"),
            SetKey::Index(i) => write!(f, "S{i}"),
            SetKey::Unknown(j) => write!(f, "new{j}"),
            SetKey::New => write!(f, "new"),
        }
    }
}

impl serde::Serialize for SetKey {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Where a heuristic places a job for one I/O phase.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Placement {
    /// The set it joins.
    pub set: SetKey,
    /// The set's priority (a weight > 0).
    pub priority: f64,
}

/// A heuristic made ready to place jobs: its mapping built once.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Placer {
    heuristic: Heuristic,
    mapping: SetMapping,
    /// Where a job without an estimate goes (only online heuristics meet one).
    prior: UnknownPrior,
}

impl Placer {
    pub(crate) fn new(heuristic: Heuristic) -> Result<Placer, FluidError> {
        heuristic.validate()?;
        let mapping = match heuristic.base() {
            Some(b) => SetMapping::new(b, SetMapping::default().assign(None).priority())
                .expect("validated base"),
            None => SetMapping::default(),
        };
        Ok(Placer {
            heuristic,
            mapping,
            prior: heuristic.unknown_prior().unwrap_or_default(),
        })
    }

    /// Places job `job` given its `w_iter` estimate (`None`: no estimate yet) and the mean
    /// `w_iter` of its group (for CLAIRVOYANT).
    pub(crate) fn place(&self, job: u32, w_iter: Option<f64>, class_w_iter: f64) -> Placement {
        let unknown = match self.prior {
            UnknownPrior::Shared => SetKey::New,
            UnknownPrior::Own => SetKey::Unknown(job),
        };
        let set_of = |a: Assignment, equal: bool| match a {
            Assignment::Set { set, priority } => Placement {
                set: SetKey::Index(set),
                priority: if equal { 1.0 } else { priority.get() },
            },
            Assignment::Unknown { priority } => Placement {
                set: unknown,
                priority: if equal { 1.0 } else { priority.get() },
            },
        };
        match self.heuristic {
            Heuristic::ExclusiveFcfs => Placement {
                set: SetKey::All,
                priority: 1.0,
            },
            Heuristic::FairShare => Placement {
                set: SetKey::Job(job),
                priority: 1.0,
            },
            Heuristic::SetB { .. } => set_of(self.mapping.assign(w_iter), false),
            Heuristic::SetFairShare { .. } => set_of(self.mapping.assign(w_iter), true),
            Heuristic::SharePriority { .. } => match self.mapping.assign(w_iter) {
                Assignment::Unknown { priority } if self.prior == UnknownPrior::Shared => {
                    Placement {
                        set: SetKey::New,
                        priority: priority.get(),
                    }
                }
                a => Placement {
                    set: SetKey::Job(job),
                    priority: a.priority().get(),
                },
            },
            Heuristic::Clairvoyant { .. } => set_of(self.mapping.assign(Some(class_w_iter)), false),
        }
    }
}

/// An online estimator of a job's characteristic time from its own simulated I/O history.
///
/// The simulator feeds it the time of each burst start (when the job asks for I/O) and asks for an
/// estimate right after. Implementations must be deterministic.
pub trait PeriodEstimator: fmt::Debug + Send {
    /// The job started an I/O burst at `t` seconds.
    fn observe_burst_start(&mut self, t: f64);
    /// The current estimate of `w_iter` in seconds, if there is one.
    fn estimate(&self) -> Option<f64>;
}

/// The fallback estimator: the mean gap between the job's burst starts so far, `(s_k - s_1)/(k-1)`;
/// no estimate before the second burst.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MeanGap {
    first: f64,
    last: f64,
    count: u64,
}

impl PeriodEstimator for MeanGap {
    fn observe_burst_start(&mut self, t: f64) {
        if self.count == 0 {
            self.first = t;
        }
        self.last = t;
        self.count += 1;
    }

    fn estimate(&self) -> Option<f64> {
        (self.count >= 2).then(|| (self.last - self.first) / (self.count - 1) as f64)
    }
}

/// The estimator of `kind` that an `:online` heuristic gives each job.
pub fn online_estimator(kind: EstimatorKind) -> OnlineEstimator {
    match kind {
        EstimatorKind::MeanGap => OnlineEstimator::MeanGap(MeanGap::default()),
        EstimatorKind::PhaseStarts => OnlineEstimator::PhaseStarts(PhaseStarts::default()),
    }
}

/// One job's online estimator, of either kind.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum OnlineEstimator {
    /// See [`MeanGap`].
    MeanGap(MeanGap),
    /// See [`EstimatorKind::PhaseStarts`]; burst starts are seconds, the estimator's clock is
    /// nanoseconds.
    PhaseStarts(PhaseStarts),
}

impl PeriodEstimator for OnlineEstimator {
    fn observe_burst_start(&mut self, t: f64) {
        match self {
            OnlineEstimator::MeanGap(m) => m.observe_burst_start(t),
            OnlineEstimator::PhaseStarts(p) => {
                p.observe(Nanos::from_secs_f64(t.max(0.0)));
            }
        }
    }

    fn estimate(&self) -> Option<f64> {
        match self {
            OnlineEstimator::MeanGap(m) => m.estimate(),
            OnlineEstimator::PhaseStarts(p) => p.estimate().map(Nanos::as_secs_f64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for name in [
            "exclusive-fcfs",
            "fair-share",
            "set-10",
            "set-2",
            "set-fairshare",
            "share+priority",
            "clairvoyant",
            "set-10:error=0.5",
            "set-10:online",
            "set-10:online:own",
            "set-fairshare:online",
            "share+priority-2:online:own",
            "share+priority-2:error=0.1",
            "clairvoyant-3",
            "set-2.5",
        ] {
            let h: Heuristic = name.parse().unwrap();
            assert_eq!(h.to_string(), name);
        }
        for (h, name) in Heuristic::PAPER.iter().zip([
            "exclusive-fcfs",
            "fair-share",
            "set-10",
            "set-fairshare",
            "share+priority",
            "clairvoyant",
        ]) {
            assert_eq!(h.to_string(), name);
        }
    }

    #[test]
    fn bad_names_say_why() {
        let msg = |s: &str| s.parse::<Heuristic>().unwrap_err().to_string();
        assert!(msg("set-1").contains("expected a finite number > 1"));
        assert!(msg("set-ten").contains("base \"ten\""));
        assert!(msg("round-robin").contains("not a heuristic name"));
        assert!(msg("fair-share:online").contains("takes no :error"));
        assert!(msg("set-10:error=1.5").contains("[0, 1)"));
        assert!(msg("set-10:guess").contains("unknown variant"));
    }

    #[test]
    fn the_online_prior_is_a_suffix_shared_by_default() {
        let prior = |s: &str| s.parse::<Heuristic>().unwrap().unknown_prior();
        assert_eq!(prior("set-10:online"), Some(UnknownPrior::Shared));
        assert_eq!(prior("set-10:online:shared"), Some(UnknownPrior::Shared));
        assert_eq!(prior("SET_10:Online:OWN"), Some(UnknownPrior::Own));
        assert_eq!(prior("set-fairshare:online:own"), Some(UnknownPrior::Own));
        assert_eq!(prior("share+priority:online"), Some(UnknownPrior::Shared));
        assert_eq!(prior("set-10"), None);
        assert_eq!(prior("set-10:error=0.5"), None);
        // The explicit default prints as the plain name.
        assert_eq!(
            "set-10:online:shared"
                .parse::<Heuristic>()
                .unwrap()
                .to_string(),
            "set-10:online"
        );
        let msg = |s: &str| s.parse::<Heuristic>().unwrap_err().to_string();
        let m = msg("set-10:online:mine");
        assert!(
            m.contains("\"set-10:online:mine\"") && m.contains("unknown option \"mine\""),
            "{m}"
        );
        assert!(msg("set-10:own").contains("follows :online"));
        assert!(msg("set-10:shared").contains("set-10:online:shared"));
        assert!(msg("set-10:error=0.5:own").contains("only :online takes options"));
        assert!(msg("set-10:online:own:x").contains("unknown option \"x\""));
        assert!(msg("set-10:online:own:shared").contains("a second prior"));
        assert!(msg("set-10:online:stamps:mean-gap").contains("a second estimator"));
        assert!(msg("set-10:stamps").contains("follows :online"));
        assert!(msg("fair-share:online:own").contains("takes no :error or :online"));
        assert!(msg("clairvoyant:online:own").contains("takes no :error or :online"));
    }

    #[test]
    fn the_estimator_is_an_option_of_online_mean_gap_by_default() {
        let kind = |s: &str| match s.parse::<Heuristic>().unwrap().estimate() {
            Some(Estimate::Online { estimator, .. }) => Some(estimator),
            _ => None,
        };
        assert_eq!(kind("set-10:online"), Some(EstimatorKind::MeanGap));
        assert_eq!(
            kind("set-10:online:stamps"),
            Some(EstimatorKind::PhaseStarts)
        );
        assert_eq!(
            kind("set-10:online:stamps:own"),
            Some(EstimatorKind::PhaseStarts)
        );
        assert_eq!(kind("set-10"), None);
        for (name, printed) in [
            ("set-10:online:stamps", "set-10:online:stamps"),
            ("set-10:stamps", ""),
            ("set-10:online:stamps:own", "set-10:online:own:stamps"),
            ("set-10:online:mean-gap", "set-10:online"),
        ] {
            match name.parse::<Heuristic>() {
                Ok(h) => assert_eq!(h.to_string(), printed, "{name}"),
                Err(_) => assert_eq!(printed, "", "{name}"),
            }
        }
        // Seed 004's last newcomer: its first interval (37.5 s, it waited behind fourteen
        // others) puts mean-gap in set 2 at its second burst; the phase starts wait for a
        // second interval.
        let mut gap = online_estimator(EstimatorKind::MeanGap);
        let mut starts = online_estimator(EstimatorKind::PhaseStarts);
        for t in [18.0, 55.5] {
            gap.observe_burst_start(t);
            starts.observe_burst_start(t);
        }
        assert_eq!(gap.estimate(), Some(37.5));
        assert_eq!(starts.estimate(), None);
        for t in [74.7, 93.9] {
            gap.observe_burst_start(t);
            starts.observe_burst_start(t);
        }
        assert!((starts.estimate().unwrap() - 19.2).abs() < 1e-6);
        assert!((gap.estimate().unwrap() - 25.3).abs() < 1e-6);
    }

    #[test]
    fn placements_follow_the_paper_table() {
        let place = |h: Heuristic, w: Option<f64>| Placer::new(h).unwrap().place(3, w, 1000.0);
        assert_eq!(place(Heuristic::ExclusiveFcfs, Some(10.0)).set, SetKey::All);
        assert_eq!(
            place(Heuristic::FairShare, Some(10.0)),
            Placement {
                set: SetKey::Job(3),
                priority: 1.0
            }
        );
        let p = place(Heuristic::SET10, Some(64.0));
        assert_eq!(p.set, SetKey::Index(2));
        assert!((p.priority - 0.01).abs() < 1e-18);
        let p = place(Heuristic::PAPER[3], Some(64.0));
        assert_eq!((p.set, p.priority), (SetKey::Index(2), 1.0));
        let p = place(Heuristic::PAPER[4], Some(64.0));
        assert_eq!(p.set, SetKey::Job(3));
        assert!((p.priority - 0.01).abs() < 1e-18);
        // Clairvoyant ignores the job's own w_iter and uses its group's.
        let p = place(Heuristic::PAPER[5], Some(64.0));
        assert_eq!((p.set, p.priority), (SetKey::Index(3), 0.001));
    }

    #[test]
    fn jobs_without_an_estimate_go_where_the_prior_says() {
        let place = |h: &str, job: u32, w: Option<f64>| {
            Placer::new(h.parse().unwrap())
                .unwrap()
                .place(job, w, 1000.0)
        };
        // Shared: every newcomer in the one new set, priority 1/50.
        for job in [3, 4] {
            assert_eq!(
                place("set-10:online", job, None),
                Placement {
                    set: SetKey::New,
                    priority: 0.02
                }
            );
        }
        // Own (seed 004): a set of its own each, priority 1/50.
        assert_eq!(
            place("set-10:online:own", 3, None),
            Placement {
                set: SetKey::Unknown(3),
                priority: 0.02
            }
        );
        assert_eq!(place("set-10:online:own", 4, None).set, SetKey::Unknown(4));
        // Equal priorities stay equal for newcomers too.
        assert_eq!(
            place("set-fairshare:online", 3, None),
            Placement {
                set: SetKey::New,
                priority: 1.0
            }
        );
        // SHARE+PRIORITY: the new set under the shared prior; its own set as before under :own.
        assert_eq!(place("share+priority:online", 3, None).set, SetKey::New);
        assert_eq!(
            place("share+priority:online:own", 3, None),
            Placement {
                set: SetKey::Job(3),
                priority: 0.02
            }
        );
        // With an estimate the prior plays no part.
        for h in ["set-10:online", "set-10:online:own"] {
            assert_eq!(place(h, 3, Some(64.0)).set, SetKey::Index(2));
        }
        assert_eq!(
            place("share+priority:online", 3, Some(64.0)).set,
            SetKey::Job(3)
        );
    }

    #[test]
    fn mean_gap_needs_two_bursts() {
        let mut m = online_estimator(EstimatorKind::MeanGap);
        assert_eq!(m.estimate(), None);
        m.observe_burst_start(5.0);
        assert_eq!(m.estimate(), None);
        m.observe_burst_start(15.0);
        assert_eq!(m.estimate(), Some(10.0));
        m.observe_burst_start(35.0);
        assert_eq!(m.estimate(), Some(15.0));
    }
}
