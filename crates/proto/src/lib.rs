//! The iosets wire protocol: how clients talk to an I/O server (`iosets serve`).
//!
//! # What it is
//! Versioned, length-prefixed binary frames over a byte stream (TCP). Every frame is
//!
//! ```text
//! u32  length of everything after this field (≤ the receiver's maximum frame size)
//! u8   protocol version (VERSION)
//! u8   kind: 1 = request, 2 = response
//! u16  flags: bit 0 = a priority hint is present, bit 1 = caller credentials are present,
//!             bit 2 = a read's or write's data is in the shared region (same-host transport),
//!             bit 3 = a phase stamp is present, bit 4 = service elsewhere is present,
//!             bit 5 = supplementary groups are present (only with bit 1)
//! u64  request tag (chosen by the client, echoed by the server)
//! u64  job id
//! f64  priority hint (meaningful only with flag bit 0)
//! u32  caller uid, u32 caller gid (meaningful only with flag bit 1)
//! u64  phase stamp: when the job's current I/O phase started, UNIX-epoch ns of the client's
//!      clock (meaningful only with flag bit 3)
//! u32  ops, u64 bytes served by the job's other servers (only with flag bit 4)
//! u8   group count (1 to 16), then that many u32 supplementary group ids (only with flag bit 5)
//! u8   operation code
//! ...  body (depends on the kind and the operation)
//! ```
//!
//! all integers little-endian, strings as `u16` length + UTF-8 bytes, bulk data as `u32` length +
//! bytes. A response echoes the request's tag, job and operation; its body starts with an `i32`
//! status: 0, then the operation's reply, or a positive errno, then a message string.
//!
//! The receiver reads the 4-byte length first and checks it against its maximum **before**
//! allocating ([`frame_len`]); [`decode`] then parses the frame from one contiguous buffer. Bulk
//! data (a write's payload, a read's reply) is a [`Bytes`] slice of that buffer: no second copy.
//! Encoding writes the header and the small fields into a `Vec` and leaves the bulk data apart
//! ([`Encoded`]) so a sender can write both without concatenating them.
//!
//! # The same-host transport
//! A client on the server's own node may ask over TCP which Unix socket the server listens on
//! ([`Request::LocalTransport`]), connect to it, and pass a shared memory region once
//! ([`Request::AttachRegion`], its descriptor alongside). Its reads and writes then name a range
//! of that region instead of carrying the bytes ([`Request::ReadShared`],
//! [`Request::WriteShared`], flag bit 2): the server's workers `pread` into it and `pwrite` from
//! it directly. [`local`] has the region and the descriptor passing; the frames are the same.
//!
//! A frame's first four bytes can never be `GET ` as long as the maximum frame stays below that
//! length (0x20544547, about 517 MiB; the server refuses larger maximums), so a server can tell an
//! HTTP request (its metrics endpoint) from a protocol frame on the same port.
//!
//! # What it is not
//! No connection state, and no I/O but the same-host transport's primitives ([`local`]): this
//! crate turns values into bytes and back. Control
//! replies that are reports (job stats, server stats) travel as JSON text ([`JobsReport`],
//! [`ServerReport`]) because they are read by people and scripts, not on the data path.
//!
//! # Invariants
//! - Decoding never panics, on any input: every read is bounds-checked and every malformed
//!   frame is a [`ProtoError`] (a property test feeds arbitrary bytes).
//! - `decode(encode(m)) == m` for every message (property-tested).
#![deny(missing_docs)]

pub mod auth;
mod codec;
pub mod hints;
pub mod io;
pub mod local;
mod message;
mod report;

pub use bytes::Bytes;
pub use codec::{decode, encode, frame_len, Encoded, Frame};
pub use message::{
    Attr, Control, Creds, DirEntry, Elsewhere, FileKind, Groups, Header, Kind, OpCode, OpenFlags,
    Reply, Request, Response, SetAttr, SetTime, Statfs,
};
pub use report::{
    CauseReport, HeldReport, HeldTopReport, JobInfoReport, JobReport, JobRuleReport, JobsReport,
    RuleReport, RulesReport, ServerReport, ShareReport, SharesReport, WaitCausesReport, WaitReport,
};

/// The protocol version this crate speaks. A frame of another version is refused.
pub const VERSION: u8 = 5;

/// The default maximum frame size: 64 MiB of data plus room for the header.
pub const DEFAULT_MAX_FRAME: u32 = 64 * 1024 * 1024 + 64 * 1024;

/// The length of the fixed header that follows the length prefix.
pub const HEADER_LEN: usize = 1 + 1 + 2 + 8 + 8 + 8 + 4 + 4 + 8 + 1;

/// Why a frame could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtoError {
    /// The length prefix announces more than the receiver accepts.
    #[error("frame of {len} bytes exceeds the maximum of {max} bytes")]
    TooLarge {
        /// The announced length.
        len: u32,
        /// The receiver's maximum.
        max: u32,
    },
    /// The frame ends before a field it announces.
    #[error("frame truncated: needed {needed} more bytes for {field}")]
    Truncated {
        /// The field being read.
        field: &'static str,
        /// How many bytes were missing.
        needed: usize,
    },
    /// The frame is of a protocol version this side does not speak.
    #[error("unsupported protocol version {0} (this side speaks {VERSION})")]
    Version(u8),
    /// The kind byte is neither request nor response.
    #[error("unknown frame kind {0}")]
    Kind(u8),
    /// The operation code is not one of the protocol's.
    #[error("unknown operation code {0}")]
    Op(u8),
    /// A field holds a value outside its domain.
    #[error("invalid {field}: {reason}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// Bytes remain after the last field of the frame.
    #[error("{0} unexpected bytes after the end of the frame")]
    Trailing(usize),
}
