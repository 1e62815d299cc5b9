//! Where the scheduler's `now` comes from.

use std::fmt;
use std::time::Instant;

use iosets_types::Nanos;

/// A source of time for a [`crate::Scheduler`]: nanoseconds since an origin, never decreasing.
///
/// The scheduler reads the clock at every submit, dispatch and completion, and converts a policy's
/// `NotBefore(t)` into a real-time wait of `t - now`. A custom clock must therefore advance with real
/// time (an offset or a coarser tick is fine); a frozen clock makes a timer-gated worker re-check
/// every `t - now` of real time until the clock moves.
pub trait Clock: Send + Sync {
    /// The current time.
    fn now(&self) -> Nanos;
}

/// The real monotonic clock: nanoseconds since the clock was created.
#[derive(Clone, Copy)]
pub struct MonotonicClock {
    origin: Instant,
}

impl MonotonicClock {
    /// A clock whose zero is now.
    pub fn new() -> MonotonicClock {
        MonotonicClock {
            origin: Instant::now(),
        }
    }

    /// The instant this clock calls zero.
    pub fn origin(&self) -> Instant {
        self.origin
    }
}

impl Default for MonotonicClock {
    fn default() -> MonotonicClock {
        MonotonicClock::new()
    }
}

impl fmt::Debug for MonotonicClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MonotonicClock")
            .field("now", &self.now())
            .finish()
    }
}

impl Clock for MonotonicClock {
    fn now(&self) -> Nanos {
        Nanos(u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }
}
