//! `sw`: AGIOS' static windows (SW; Song et al.'s "time window" scheduler).
//!
//! Time is cut into windows of `window_ms` (default 1000 ms; AGIOS recommends 1 s for disks and
//! 250 ms for SSDs). Queued requests are served by `(window of arrival, application)`: every request
//! of an earlier window goes before any of a later one, and inside a window the requests of one
//! application go together, applications in id order, each in arrival order. The application is the
//! job (AGIOS passes it as the request's queue id). Like AGIOS, SW does not hold requests until a
//! window closes: with no backlog each request leaves on arrival. No merging, no timers.
//!
//! This is AGIOS' intended order. AGIOS' own code computes the sort key but never stores it on the
//! request, so its actual order is undefined; we follow the documented one.

use std::collections::BTreeMap;

use crate::tunables::{TunableSpec, Tunables};
use crate::{Batch, Dispatch, Nanos, Policy, PolicyError, Request};

/// Registry name.
pub const NAME: &str = "sw";
/// Tunables of `sw`.
pub const TUNABLES: &[TunableSpec] = &[TunableSpec {
    name: "window_ms",
    default: "1000",
    help: "window length in ms (AGIOS SW_window; 1 .. 1 day)",
}];

/// Static windows.
#[derive(Debug)]
pub struct StaticWindows {
    window: Nanos,
    /// (window index, job, arrival sequence) → request.
    queue: BTreeMap<(u64, u64, u64), Request>,
    seq: u64,
}

impl StaticWindows {
    /// Windows of `window` (> 0).
    pub fn new(window: Nanos) -> StaticWindows {
        assert!(window > Nanos::ZERO);
        StaticWindows {
            window,
            queue: BTreeMap::new(),
            seq: 0,
        }
    }

    pub(crate) fn from_tunables(t: &mut Tunables) -> Result<StaticWindows, PolicyError> {
        Ok(StaticWindows::new(Nanos::from_millis(t.u64_in(
            "window_ms",
            1,
            86_400_000,
        )?)))
    }
}

impl Policy for StaticWindows {
    fn name(&self) -> &'static str {
        NAME
    }

    fn enqueue(&mut self, req: Request, now: Nanos) {
        self.seq += 1;
        self.queue
            .insert((now.0 / self.window.0, req.job.0, self.seq), req);
    }

    fn dispatch(&mut self, _now: Nanos) -> Dispatch {
        match self.queue.pop_first() {
            Some((_, r)) => Dispatch::Ready(Batch::single(r)),
            None => Dispatch::Idle,
        }
    }

    fn queued(&self) -> usize {
        self.queue.len()
    }

    fn drain(&mut self) -> Vec<Request> {
        std::mem::take(&mut self.queue).into_values().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::request;
    use crate::Op;

    #[test]
    fn one_application_per_window_together_windows_in_order() {
        // The spec's example, W = 1 s: a1(app1, 0.1 s) b0(app0, 0.2) e1(app1, 0.3) c1(app1, 1.1) d0(app0, 1.2).
        let mut p = StaticWindows::new(Nanos::from_millis(1000));
        for (id, job, ms) in [
            (1, 1, 100),
            (2, 0, 200),
            (3, 1, 300),
            (4, 1, 1100),
            (5, 0, 1200),
        ] {
            p.enqueue(request(id, job, Op::Read, 1, 0, 10), Nanos::from_millis(ms));
        }
        let mut order = Vec::new();
        while let Dispatch::Ready(b) = p.dispatch(Nanos::from_millis(1300)) {
            order.push(b.id().0);
        }
        assert_eq!(order, vec![2, 1, 3, 5, 4]); // b0, a1, e1, d0, c1
    }
}
