//! Helpers for the unit tests of the policies (compiled only under `cfg(test)`).

use crate::{FileId, JobId, Op, Request, RequestId};

/// A request `id` by `job` of `len` bytes at `offset` in `file`, with no class, priority or phase.
pub(crate) fn request(id: u64, job: u64, op: Op, file: u64, offset: u64, len: u64) -> Request {
    Request::builder(JobId(job), op)
        .id(RequestId(id))
        .file(FileId(file))
        .range(offset, len)
        .build()
}
