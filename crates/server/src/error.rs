//! The server's errors.

/// Why the server could not start or stop cleanly.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// A configuration value is wrong.
    #[error("configuration: {reason}")]
    Config {
        /// What is wrong.
        reason: String,
    },
    /// The policy name or one of its tunables is wrong.
    #[error(transparent)]
    Policy(#[from] iosets_policy::PolicyError),
    /// Binding the listen address or opening the root failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A thread of the server panicked or the shutdown did not complete.
    #[error("server failure: {0}")]
    Internal(String),
}
