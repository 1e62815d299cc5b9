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

/// An event of a trace, with the job it belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct JobEvent {
    /// The job (0 when the trace does not say).
    pub job: JobId,
    /// The request.
    pub event: Event,
}
