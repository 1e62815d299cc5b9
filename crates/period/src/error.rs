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
    /// The trace file could not be read. (The OS error is part of the message, not a
    /// `source()`: printed as a chain it would appear twice.)
    #[error("cannot read trace {}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        error: std::io::Error,
    },
    /// The trace file is empty (or only blank lines).
    #[error("cannot read trace {}: the file is empty", path.display())]
    EmptyFile {
        /// The file.
        path: PathBuf,
    },
    /// No reader could read the file: each reader tried and what it found wrong (one entry when
    /// the format was named or recognised from the content).
    #[error("cannot read trace {}: {}", path.display(), describe(attempts))]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Each reader's error ([`Error::Parse`], [`Error::Decode`] or [`Error::Empty`]), in
        /// the order tried.
        attempts: Vec<Error>,
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
    /// A file that is neither text (at `line`, it is not UTF-8) nor a MessagePack trace.
    #[error(
        "cannot read trace {}: not text (line {line} is not UTF-8; a Darshan log must first be \
         printed with darshan-dxt-parser) nor {}",
        path.display(),
        describe(std::slice::from_ref(msgpack))
    )]
    NotText {
        /// The file.
        path: PathBuf,
        /// The first line that is not UTF-8.
        line: usize,
        /// Why the MessagePack reader refused it.
        msgpack: Box<Error>,
    },
    /// One record of a binary trace (MessagePack) is malformed.
    #[error("{format} trace, record {record} (byte {offset}): {message}")]
    Decode {
        /// The format it was read as.
        format: Format,
        /// 1-based record (top-level value) number.
        record: usize,
        /// Byte offset where the record starts.
        offset: usize,
        /// What is wrong.
        message: String,
    },
    /// A directory was named with a format other than Recorder's, the only one that is a
    /// directory (`recorder2text`'s folder of `<rank>.txt` files).
    #[error(
        "cannot read trace {}: it is a directory, which is read only as Recorder's text output \
         (recorder2text's _text folder of <rank>.txt files), not as {format}",
        path.display()
    )]
    Directory {
        /// The directory.
        path: PathBuf,
        /// The format named.
        format: Format,
    },
    /// The mode asked for keeps no event of the trace.
    #[error(
        "no {mode} event in {} ({format} trace: {read} reads, {write} writes, {other} other); \
         try --mode {suggest}",
        trace.display()
    )]
    NoEventInMode {
        /// The mode.
        mode: crate::Mode,
        /// The trace.
        trace: PathBuf,
        /// Its format's name.
        format: &'static str,
        /// Its reads.
        read: usize,
        /// Its writes.
        write: usize,
        /// Its events of no direction.
        other: usize,
        /// A mode that keeps something.
        suggest: &'static str,
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

impl Error {
    /// The error without its format's name, for a list of attempts: `line 3: ...`.
    fn brief(&self) -> String {
        match self {
            Error::Parse { line, message, .. } => format!("line {line}: {message}"),
            Error::Decode {
                record,
                offset,
                message,
                ..
            } => format!("record {record} (byte {offset}): {message}"),
            Error::Empty { detail, .. } => format!("empty: {detail}"),
            other => other.to_string(),
        }
    }

    /// The format a reader's error is about, if any.
    pub fn format(&self) -> Option<Format> {
        match self {
            Error::Parse { format, .. }
            | Error::Decode { format, .. }
            | Error::Empty { format, .. } => Some(*format),
            _ => None,
        }
    }
}

/// `csv trace, line 3: ...` for one attempt; `not any of csv (line 3: ...), jsonl (...)` for
/// several.
fn describe(attempts: &[Error]) -> String {
    match attempts {
        [] => "no reader was tried".into(),
        [one] => one.to_string(),
        many => {
            let each: Vec<String> = many
                .iter()
                .map(|e| match e.format() {
                    Some(f) => format!("{f} ({})", e.brief()),
                    None => e.to_string(),
                })
                .collect();
            format!(
                "not any of {} (name the format with --format)",
                each.join(", ")
            )
        }
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
