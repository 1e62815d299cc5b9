//! The iosets client library: how a job's process talks to one or many I/O servers
//! (`iosets serve`).
//!
//! # What it is
//! [`Client`] (async, on tokio) and [`BlockingClient`] (the same operations, blocking, with a
//! small runtime of its own) connect to a list of servers with the caller's job identity
//! ([`JobId`], by default from `IOSETS_JOB_ID`, else `SLURM_JOB_ID`: [`job_from_env`]) and an
//! optional priority hint, both sent in every request's header so each server's scheduler knows
//! whose I/O it is ordering. Operations: [`lookup`](Client::lookup) (stat),
//! [`create`](Client::create), [`open`](Client::open), [`read_at`](Client::read_at),
//! [`write_at`](Client::write_at), [`fsync`](Client::fsync), [`truncate`](Client::truncate),
//! [`unlink`](Client::unlink), [`mkdir`](Client::mkdir), [`rmdir`](Client::rmdir),
//! [`readdir`](Client::readdir), [`rename`](Client::rename), and
//! [`control`](Client::control) (priorities, policy switch, job stats) to one given server.
//!
//! ## Which server gets what
//! - **Data** is striped ([`Layout`]): chunk `k` (default 1 MiB) of path `p` lives on server
//!   `(h(p) + k) mod n`, `h` = FNV-1a 64 of the path's bytes (stable across processes and
//!   versions, unlike `std`'s seeded hasher). Every server writes its chunks at their logical
//!   offsets into the backing file of the same path: with one shared root (servers in front of
//!   one parallel file system, the intended deployment) that file is complete; with separate
//!   roots each server holds a sparse file with its own chunks. A read or write is cut at chunk
//!   boundaries and its pieces are sent to their servers concurrently. Bytes a server's
//!   (sparse) backing file lacks read as zeros up to the logical size.
//! - **Read-only metadata** goes to the path's *home* server `h(p) mod n`: [`readdir`](Client::readdir),
//!   and the attributes of [`lookup`](Client::lookup) — except a regular file's size, which is
//!   the largest size any server reports, since each may hold only a sparse part.
//! - **Namespace changes** (create, open with create or truncate, truncate, unlink, mkdir, rmdir,
//!   rename) go to the home server first, whose answer decides success or error, then to every
//!   other server. The first sketch sends all metadata to the hashed server only; that
//!   cannot work here: a server writes a chunk only into a file that exists *in its own root*,
//!   so with separate roots every server needs the file (and its directories), and a truncate
//!   must cut every server's part. With a shared root the extra requests find the change
//!   already made; the errors that means (`EEXIST` after mkdir, `ENOENT` after unlink, rmdir,
//!   rename) are ignored on the other servers, and an exclusive create is exclusive on the home
//!   server only.
//!
//! ## Connections, retries, timeouts
//! One TCP connection per server, with a writer task and a reader task: many requests are
//! outstanding at once and the server answers them in any order, matched by tag. Frames longer
//! than [`ClientConfig::max_frame`] are refused on their length prefix, before allocating. A
//! broken connection is made anew on the next request. A request whose connection broke while
//! it was outstanding is sent again (up to [`ClientConfig::retries`] times, with doubling
//! backoff) only if it is idempotent ([`Request::is_idempotent`](iosets_proto::Request::is_idempotent):
//! reads, writes at an offset, fsync, lookups, non-exclusive creates...); others (exclusive
//! create, unlink, mkdir, rmdir, rename) fail with [`ClientError::ConnectionLost`], since they
//! may have been carried out. A request that never left (no connection yet) is always retried.
//! A request with no answer within [`ClientConfig::request_timeout`] fails with
//! [`ClientError::Timeout`] and is not retried (it may still be queued behind other jobs' I/O).
//!
//! ## The same-host transport
//! A server on this host (its TCP connection's two ends have one address, or it is loopback)
//! may offer a Unix socket ([`ClientConfig::local`], on by default). With the first read or
//! write of 64 KiB or more to it, the client asks for it over TCP, connects to it (checking that
//! the socket's peer is the process that answered), and passes its shared memory region once
//! (a sealed `memfd`, [`ClientConfig::local_region`] bytes, one for all servers). From then on
//! every request to that server goes on the Unix socket, and reads and writes of 64 KiB or more
//! name a range of the region instead of carrying bytes: the server's worker `pread`s into it
//! or `pwrite`s from it. A read's result is then a view of the region (no copy); a write's bytes
//! are copied into the region once, or not at all when they are there already: fill a
//! [`WriteBuf`] from [`Client::buffer`] to write with one copy in all, the one the server's
//! `pwrite` makes, as a process doing its own I/O would. Requests still go through each
//! server's scheduler exactly as over TCP; when the region is full, data travels in frames.
//!
//! # What it is not
//! Not a POSIX file system: no file handles, no caching, no locking, no consistency between
//! clients beyond what the servers' backing files give. Operations spanning several servers
//! are not atomic: a namespace change that fails on a non-home server after succeeding on the
//! home server is reported as an error and leaves the servers disagreeing. The layout is a
//! function of the path, the chunk size and the ordered server list only: every client of a
//! file must use the same ones (there is no metadata server to ask), and a rename with separate
//! roots leaves the data under the old name's layout ([`Client::rename`]).
//!
//! # Why
//! IO-SETS needs no central controller (seed 004): each server orders its own queue, and the
//! client only has to tag its requests and spread them. Striping makes a job's I/O reach every
//! server, so every scheduling point sees every job.
#![deny(missing_docs)]

mod blocking;
mod client;
mod config;
mod conn;
mod error;
mod layout;
mod phase;
mod served;

pub use blocking::BlockingClient;
pub use client::Client;
pub use client::{Entry, WriteBuf, MAX_NAMES};
pub use config::{
    job_from_env, ClientConfig, AUTH_FILE_VAR, DEFAULT_CHUNK_SIZE, DEFAULT_LOCAL_REGION,
    MAX_CHUNK_SIZE,
};
pub use conn::Connector;
pub use error::ClientError;
pub use iosets_proto::auth::Secret;
pub use iosets_proto::{
    Attr, Control, Creds, DirEntry, FileKind, OpenFlags, Reply, SetAttr, SetTime, Statfs,
};
pub use iosets_types::{JobId, Priority};
pub use layout::{fnv1a64, normalize_path, Layout, Piece};
