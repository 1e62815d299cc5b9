//! The client's error type.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

/// Why a client operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The server did the operation and it failed with a POSIX errno (`ENOENT`, `EEXIST`, ...).
    #[error("{server}: {message} (errno {errno})")]
    Errno {
        /// The errno (positive).
        errno: i32,
        /// The server's message.
        message: String,
        /// The server that answered.
        server: SocketAddr,
    },
    /// No connection to the server could be made (after the retries).
    #[error("cannot connect to {server}: {source}")]
    Connect {
        /// The server.
        server: SocketAddr,
        /// Why.
        source: io::Error,
    },
    /// The connection broke while the request was outstanding. The request may or may not have
    /// been carried out; it was not retried (it is not idempotent, or the retries ran out).
    #[error("connection to {server} lost: {reason}")]
    ConnectionLost {
        /// The server.
        server: SocketAddr,
        /// What broke.
        reason: String,
    },
    /// No response came within the request timeout. The request may still be carried out.
    #[error("{server}: no response within {after:?}")]
    Timeout {
        /// The server.
        server: SocketAddr,
        /// The timeout.
        after: Duration,
    },
    /// The server sent something the protocol does not allow here (a frame that does not
    /// decode, a reply of the wrong kind); the connection is closed.
    #[error("protocol error with {server}: {reason}")]
    Protocol {
        /// The server.
        server: SocketAddr,
        /// What was wrong.
        reason: String,
    },
    /// A server's pieces of a striped operation do not add up (a short write).
    #[error("{server}: short {op}: {done} of {expected} bytes at offset {offset}")]
    Short {
        /// The server.
        server: SocketAddr,
        /// The operation.
        op: &'static str,
        /// Where.
        offset: u64,
        /// Bytes asked for.
        expected: u64,
        /// Bytes done.
        done: u64,
    },
    /// A path the client refuses before sending it (`..`, NUL).
    #[error("invalid path {path:?}: {reason}")]
    InvalidPath {
        /// The path as given.
        path: String,
        /// Why.
        reason: String,
    },
    /// A `host:port` could not be resolved.
    #[error("cannot resolve {addr:?}: {reason}")]
    Resolve {
        /// The address as given.
        addr: String,
        /// Why.
        reason: String,
    },
    /// A bad configuration value or argument (no servers, zero chunk size, unknown server).
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The operation cannot be done with this set of servers (a hard link over several
    /// servers: the layout is a function of the name).
    #[error("not supported: {0}")]
    Unsupported(String),
    /// The blocking client could not start its runtime.
    #[error("cannot start the client runtime: {0}")]
    Runtime(io::Error),
    /// The cluster-secret handshake failed: the secrets differ, the server has none, or it
    /// asked for one the client was not given.
    #[error("authentication with {server} failed: {reason}")]
    Auth {
        /// The server.
        server: SocketAddr,
        /// What went wrong.
        reason: String,
    },
}

impl ClientError {
    /// The errno a server answered with, if this is an [`Errno`](ClientError::Errno) error.
    pub fn errno(&self) -> Option<i32> {
        match self {
            ClientError::Errno { errno, .. } => Some(*errno),
            _ => None,
        }
    }

    /// The closest [`io::ErrorKind`]: the errno's kind for server errors (`NotFound` for
    /// `ENOENT`, `AlreadyExists` for `EEXIST`, ...), and the transport's otherwise.
    pub fn kind(&self) -> io::ErrorKind {
        match self {
            ClientError::Errno { errno, .. } => io::Error::from_raw_os_error(*errno).kind(),
            ClientError::Connect { source, .. } => source.kind(),
            ClientError::ConnectionLost { .. } => io::ErrorKind::ConnectionAborted,
            ClientError::Timeout { .. } => io::ErrorKind::TimedOut,
            ClientError::Protocol { .. } | ClientError::Short { .. } => io::ErrorKind::InvalidData,
            ClientError::InvalidPath { .. } | ClientError::Config(_) => io::ErrorKind::InvalidInput,
            ClientError::Resolve { .. } => io::ErrorKind::NotFound,
            ClientError::Unsupported(_) => io::ErrorKind::Unsupported,
            ClientError::Runtime(e) => e.kind(),
            ClientError::Auth { .. } => io::ErrorKind::PermissionDenied,
        }
    }
}

impl From<ClientError> for io::Error {
    fn from(e: ClientError) -> io::Error {
        match e {
            ClientError::Errno { errno, .. } => io::Error::from_raw_os_error(errno),
            ClientError::Connect { source, .. } | ClientError::Runtime(source) => source,
            other => io::Error::new(other.kind(), other),
        }
    }
}
