//! The error type of the fluid simulator: bad workloads, bad scenario files, failed writes.

use std::path::PathBuf;

/// What can go wrong when building a fluid workload, reading a scenario, running a sweep or
/// writing its results.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FluidError {
    /// A workload, platform or generator parameter is out of range.
    #[error("{field} = {value}: {expected}")]
    Invalid {
        /// The parameter, as a dotted path (`platform.bandwidth`, `group[1].t_io`, ...).
        field: String,
        /// The value given, as text.
        value: String,
        /// What would have been accepted.
        expected: String,
    },
    /// The workload holds no job.
    #[error("no jobs: {context}")]
    NoJobs {
        /// Where the jobs should have come from.
        context: String,
    },
    /// A heuristic name could not be parsed.
    #[error("unknown heuristic {name:?}: {problem}; known: exclusive-fcfs, fair-share, set-<base> (e.g. set-10), set-fairshare, share+priority, clairvoyant, optionally followed by :error=<e>, :online (jobs without an estimate share one new set) or :online:own (a set of their own, seed 004)")]
    UnknownHeuristic {
        /// The name given.
        name: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A scenario file could not be parsed (syntax, unknown key, wrong type).
    #[error("{}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message, with line and column and the offending key.
        message: String,
    },
    /// An expression in a scenario (`"40 - nH"`) could not be evaluated.
    #[error("{field}: bad expression {text:?}: {problem}")]
    Expression {
        /// The field holding the expression.
        field: String,
        /// The expression.
        text: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The scenario has a swept variable but no value was given for it, or a value was given for a
    /// scenario without one.
    #[error("{0}")]
    Sweep(String),
    /// Reading or writing a file failed.
    #[error("{}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error (shown in this error's message, so not chained as its source).
        error: std::io::Error,
    },
    /// Encoding results as JSON failed.
    #[error("{}: JSON: {message}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// The encoder's message.
        message: String,
    },
    /// Drawing a plot failed.
    #[error("plot {}: {message}", path.display())]
    Plot {
        /// The output file.
        path: PathBuf,
        /// The drawing back end's message.
        message: String,
    },
}

impl FluidError {
    /// An [`FluidError::Invalid`] for `field` holding `value`.
    pub(crate) fn invalid(
        field: impl Into<String>,
        value: impl std::fmt::Display,
        expected: impl Into<String>,
    ) -> FluidError {
        FluidError::Invalid {
            field: field.into(),
            value: value.to_string(),
            expected: expected.into(),
        }
    }
}
