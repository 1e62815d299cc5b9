//! `noop`: requests leave in the order they arrived; nothing is reordered or merged.

use std::collections::VecDeque;

use crate::tunables::TunableSpec;
use crate::{Batch, Dispatch, Nanos, Policy, Request};

/// Registry name.
pub const NAME: &str = "noop";
/// `noop` takes no tunables.
pub const TUNABLES: &[TunableSpec] = &[];

/// First in, first out.
#[derive(Debug, Default)]
pub struct Noop {
    queue: VecDeque<Request>,
}

impl Policy for Noop {
    fn name(&self) -> &'static str {
        NAME
    }

    fn enqueue(&mut self, req: Request, _now: Nanos) {
        self.queue.push_back(req);
    }

    fn dispatch(&mut self, _now: Nanos) -> Dispatch {
        match self.queue.pop_front() {
            Some(r) => Dispatch::Ready(Batch::single(r)),
            None => Dispatch::Idle,
        }
    }

    fn queued(&self) -> usize {
        self.queue.len()
    }

    fn drain(&mut self) -> Vec<Request> {
        self.queue.drain(..).collect()
    }
}
