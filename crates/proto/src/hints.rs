//! What a server does with the priority hints clients put in their requests: its `hints`
//! setting, which it also reports to clients (the mount's control directory shows the cap a
//! hint meets). Here, beside the frames, because both ends read it.

use iosets_types::Priority;

/// The default cap of [`HintPolicy::Cap`]: 1, the Set-10 priority of a job whose I/O period is
/// about a second (set 0), the highest seed 004's jobs get.
pub const DEFAULT_HINT_CAP: f64 = 1.0;

/// What the server does with a request's priority hint (any client may send any hint, for any
/// job id: a hint of 1e300 would otherwise take all the bandwidth).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum HintPolicy {
    /// Apply hints as sent.
    Trust,
    /// Apply hints, lowered to at most this priority.
    Cap(Priority),
    /// Drop every hint (priorities come from the control plane and detection only).
    Ignore,
}

impl Default for HintPolicy {
    fn default() -> HintPolicy {
        HintPolicy::Cap(Priority::new(DEFAULT_HINT_CAP).expect("positive"))
    }
}

impl HintPolicy {
    /// The hint to apply for `hint`, and whether it was lowered.
    pub fn apply(self, hint: Option<Priority>) -> (Option<Priority>, bool) {
        match (self, hint) {
            (_, None) | (HintPolicy::Trust, _) => (hint, false),
            (HintPolicy::Ignore, Some(_)) => (None, true),
            (HintPolicy::Cap(cap), Some(h)) if h.get() > cap.get() => (Some(cap), true),
            (HintPolicy::Cap(_), Some(_)) => (hint, false),
        }
    }
}

impl std::fmt::Display for HintPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HintPolicy::Trust => f.write_str("trust"),
            HintPolicy::Ignore => f.write_str("ignore"),
            HintPolicy::Cap(p) => write!(f, "cap={}", p.get()),
        }
    }
}

/// A `hints` setting that is none of `trust`, `ignore` and `cap=P`.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct BadHints(String);

impl std::str::FromStr for HintPolicy {
    type Err = BadHints;
    /// `trust`, `ignore` or `cap=P` (P a positive priority).
    fn from_str(s: &str) -> Result<HintPolicy, BadHints> {
        let bad = || {
            BadHints(format!(
                "hints = {s:?}: must be `trust`, `ignore` or `cap=P` with P a positive number \
                 (the highest priority a hint may ask for; default cap={DEFAULT_HINT_CAP})"
            ))
        };
        match s.trim() {
            "trust" => Ok(HintPolicy::Trust),
            "ignore" => Ok(HintPolicy::Ignore),
            other => {
                let p = other.strip_prefix("cap=").ok_or_else(bad)?;
                let p: f64 = p.trim().parse().map_err(|_| bad())?;
                Priority::new(p).map(HintPolicy::Cap).ok_or_else(bad)
            }
        }
    }
}
