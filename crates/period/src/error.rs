//! The one error type of the crate.

use std::path::PathBuf;

use crate::trace::Format;

/// Everything that can go wrong while reading a trace or configuring a detector.
///
/// Parse errors name the format and, where there is one, the line (1-based) and what was wrong
/// with it, so that a user can fix the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The trace file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The trace holds no I/O event at all (an empty file, a header only, only zero-length
    /// bandwidth steps, ...).
    #[error("empty {format} trace: {detail}")]
    Empty {
        /// The format it was read as.
        format: Format,
        /// What was missing.
        detail: String,
    },
    /// One line (or, for whole-document formats, one place) of the trace is malformed.
    #[error("{format} trace, line {line}: {message}")]
    Parse {
        /// The format it was read as.
        format: Format,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A format name that no reader answers to.
    #[error("unknown trace format {name:?}: expected one of {}", Format::NAMES.join(", "))]
    UnknownFormat {
        /// The name given.
        name: String,
    },
    /// No format was given and the file's name and first lines did not tell which it is.
    #[error(
        "cannot tell the format of {}: name it with --format ({})",
        path.display(),
        Format::NAMES.join(", ")
    )]
    UnknownContent {
        /// The file.
        path: PathBuf,
    },
    /// A job asked for is not in the trace.
    #[error("no such job in {} (jobs: {known})", trace.display())]
    NoSuchJob {
        /// The job asked for.
        job: crate::JobId,
        /// The trace.
        trace: PathBuf,
        /// The trace's jobs, comma-separated.
        known: String,
    },
    /// A detector setting out of its range.
    #[error("invalid detector setting {field} = {value}: {reason}")]
    InvalidConfig {
        /// The setting's name.
        field: &'static str,
        /// The rejected value, printed.
        value: String,
        /// The accepted range.
        reason: &'static str,
    },
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
