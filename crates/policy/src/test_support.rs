//! Helpers for the unit tests of the policies (compiled only under `cfg(test)`).

use crate::{Dispatch, FileId, JobId, Nanos, Op, Policy, Request, RequestId};

/// A request `id` by `job` of `len` bytes at `offset` in `file`, with no class, priority or phase.
pub(crate) fn request(id: u64, job: u64, op: Op, file: u64, offset: u64, len: u64) -> Request {
    Request::builder(JobId(job), op)
        .id(RequestId(id))
        .file(FileId(file))
        .range(offset, len)
        .build()
}

/// The head request of the batch `p` dispatches at `now`; panics, saying what `p` answered,
/// unless a batch is ready.
pub(crate) fn head_at(p: &mut (impl Policy + ?Sized), now: Nanos) -> Request {
    match p.dispatch(now) {
        Dispatch::Ready(b) => *b.head(),
        other => panic!("expected a batch, got {other:?}"),
    }
}
