//! `twins`: AGIOS' TWINS — a time window per data server (queue id), in round robin.
//!
//! At the I/O-forwarding layer each request names the data server that holds its data (AGIOS's
//! queue id; here the request's class, `None` = 0, taken modulo `queues`). Time is cut into windows
//! of `window_us` (default 1000 µs); each window belongs to one server, servers in turn
//! `0, 1, …, queues-1, 0, …`. During its window only that server's requests are dispatched, in
//! arrival order, one at a time — so servers are accessed one after the other, not all at once.
//! An empty window is not skipped: the scheduler waits for its end (`NotBefore`), as AGIOS does —
//! TWINS is not work-conserving by design. Windows advance lazily: after the device was idle, the next
//! window starts when work is next asked for.

use std::collections::VecDeque;

use crate::tunables::{TunableSpec, Tunables};
use crate::{Batch, Dispatch, Nanos, Policy, PolicyError, Request};

/// Registry name.
pub const NAME: &str = "twins";
/// Tunables of `twins`.
pub const TUNABLES: &[TunableSpec] = &[
    TunableSpec { name: "window_us", default: "1000", help: "window per data server in µs (AGIOS twins_window; 1 .. 60 s)" },
    TunableSpec { name: "queues", default: "1", help: "number of data servers (queue ids 0 .. queues-1; a larger class wraps around), 1 .. 65536" },
];

/// Time windows per data server.
#[derive(Debug)]
pub struct Twins {
    window: Nanos,
    queues: Vec<VecDeque<Request>>,
    current: usize,
    window_start: Option<Nanos>,
    len: usize,
}

impl Twins {
    /// Windows of `window` over `queues` servers (both > 0).
    pub fn new(window: Nanos, queues: usize) -> Twins {
        assert!(window > Nanos::ZERO && queues > 0);
        Twins {
            window,
            queues: vec![VecDeque::new(); queues],
            current: 0,
            window_start: None,
            len: 0,
        }
    }

    pub(crate) fn from_tunables(t: &mut Tunables) -> Result<Twins, PolicyError> {
        let window = Nanos::from_micros(t.u64_in("window_us", 1, 60_000_000)?);
        let queues = t.u64_in("queues", 1, 65_536)? as usize;
        Ok(Twins::new(window, queues))
    }
}

impl Policy for Twins {
    fn name(&self) -> &'static str {
        NAME
    }

    fn enqueue(&mut self, req: Request, _now: Nanos) {
        let q = req
            .class
            .map_or(0, |c| (c.0 % self.queues.len() as u64) as usize);
        self.queues[q].push_back(req);
        self.len += 1;
    }

    fn dispatch(&mut self, now: Nanos) -> Dispatch {
        if self.len == 0 {
            return Dispatch::Idle;
        }
        let start = match self.window_start {
            None => {
                self.current = 0;
                now
            }
            Some(s) if now - s >= self.window => {
                self.current = (self.current + 1) % self.queues.len();
                now
            }
            Some(s) => s,
        };
        self.window_start = Some(start);
        match self.queues[self.current].pop_front() {
            Some(r) => {
                self.len -= 1;
                Dispatch::Ready(Batch::single(r))
            }
            None => Dispatch::NotBefore(start + self.window),
        }
    }

    fn queued(&self) -> usize {
        self.len
    }

    fn drain(&mut self) -> Vec<Request> {
        self.len = 0;
        self.queues.iter_mut().flat_map(|q| q.drain(..)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::request;
    use crate::{ClassId, Op};

    fn r(id: u64, server: u64) -> Request {
        let mut r = request(id, 1, Op::Read, 1, 0, 10);
        r.class = Some(ClassId(server));
        r
    }

    #[test]
    fn each_server_gets_its_window_in_turn_and_empty_windows_wait() {
        // The spec's example: 1 ms windows, 3 servers.
        let mut p = Twins::new(Nanos::from_millis(1), 3);
        p.enqueue(r(1, 1), Nanos::ZERO);
        // Window 0 belongs to server 0, which has nothing: wait for its end.
        assert_eq!(
            p.dispatch(Nanos::ZERO),
            Dispatch::NotBefore(Nanos::from_millis(1))
        );
        let Dispatch::Ready(b) = p.dispatch(Nanos::from_millis(1)) else {
            panic!()
        };
        assert_eq!(b.id().0, 1);
        p.enqueue(r(2, 0), Nanos::from_micros(1200));
        assert_eq!(
            p.dispatch(Nanos::from_micros(1200)),
            Dispatch::NotBefore(Nanos::from_millis(2))
        );
        assert_eq!(
            p.dispatch(Nanos::from_millis(2)),
            Dispatch::NotBefore(Nanos::from_millis(3))
        );
        let Dispatch::Ready(b) = p.dispatch(Nanos::from_millis(3)) else {
            panic!()
        };
        assert_eq!(b.id().0, 2);
    }
}
