//! What the detector consumes: one I/O request's start, end and size.

use iosets_types::{JobId, Nanos};

/// One completed I/O request (or an interval of constant bandwidth): `bytes` moved between
/// `start` and `end`. The detector spreads the bytes evenly over `[start, end]`; an event with
/// `end == start` counts as an instantaneous transfer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Event {
    /// When the request started.
    pub start: Nanos,
    /// When it completed; never before `start` (constructors sort the two).
    pub end: Nanos,
    /// Bytes moved.
    pub bytes: u64,
}

impl Event {
    /// An event from `start` to `end`; the two are swapped if given in the wrong order.
    pub fn new(start: Nanos, end: Nanos, bytes: u64) -> Event {
        if end < start {
            Event {
                start: end,
                end: start,
                bytes,
            }
        } else {
            Event { start, end, bytes }
        }
    }

    /// An event from times in seconds (see [`Nanos::from_secs_f64`] for rounding).
    pub fn from_secs(start_s: f64, end_s: f64, bytes: u64) -> Event {
        Event::new(
            Nanos::from_secs_f64(start_s),
            Nanos::from_secs_f64(end_s),
            bytes,
        )
    }

    /// The event's duration.
    pub fn duration(&self) -> Nanos {
        self.end - self.start
    }
}

/// Which way an event's bytes went, as its trace says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Direction {
    /// A read.
    Read,
    /// A write.
    Write,
    /// Neither (an fsync, or an iosets request traced as `other`).
    Other,
    /// The trace does not say (FTIO's bare bandwidth JSON, the seconds CSV without an `op`
    /// column, ...): such an event counts in every [`Mode`].
    #[default]
    Unspecified,
}

/// Which events a detection looks at (`iosets detect --mode`). TMIO and Darshan traces mix
/// reads and writes; a job that reads its input once and writes a checkpoint every 10 s shows
/// its period clearly only in its writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Reads (and events whose direction the trace does not say).
    Read,
    /// Writes (and events whose direction the trace does not say). FTIO's default
    /// (`--mode write_sync`).
    Write,
    /// Every event.
    All,
}

impl Mode {
    /// Every mode's name, as accepted by `str::parse`.
    pub const NAMES: &'static [&'static str] = &["read", "write", "all"];

    /// The mode's name.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Read => "read",
            Mode::Write => "write",
            Mode::All => "all",
        }
    }

    /// True if an event going `dir` counts in this mode.
    pub fn keeps(self, dir: Direction) -> bool {
        match (self, dir) {
            (Mode::All, _) | (_, Direction::Unspecified) => true,
            (Mode::Read, d) => d == Direction::Read,
            (Mode::Write, d) => d == Direction::Write,
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Mode {
    type Err = String;

    /// A mode by its name; FTIO's `read_sync`/`write_sync`/`read_async`/`write_async` name its
    /// direction.
    fn from_str(s: &str) -> Result<Mode, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "read" | "r" | "read_sync" | "read_async" => Ok(Mode::Read),
            "write" | "w" | "write_sync" | "write_async" => Ok(Mode::Write),
            "all" | "both" => Ok(Mode::All),
            _ => Err(format!(
                "unknown mode {s:?}: expected {}",
                Mode::NAMES.join(", ")
            )),
        }
    }
}

/// An event of a trace, with the job it belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct JobEvent {
    /// The job (0 when the trace does not say).
    pub job: JobId,
    /// The request.
    pub event: Event,
    /// Read, write, or what the trace says.
    pub dir: Direction,
}
