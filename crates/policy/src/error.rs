use crate::Counters;
use iosets_types::RequestId;

/// What can go wrong when building or driving a policy.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// No policy of that name is registered.
    #[error("unknown policy {name:?}; valid policies: {}", known.join(", "))]
    UnknownPolicy {
        /// The name asked for.
        name: String,
        /// Every registered name.
        known: Vec<&'static str>,
    },
    /// The policy has no tunable of that name.
    #[error("policy {policy}: unknown tunable {key:?}; valid tunables: {}", if known.is_empty() { "(none)".to_string() } else { known.join(", ") })]
    UnknownTunable {
        /// The policy being built.
        policy: &'static str,
        /// The key given.
        key: String,
        /// The tunables the policy accepts.
        known: Vec<&'static str>,
    },
    /// A tunable's value could not be used.
    #[error("policy {policy}: bad value {value:?} for {key}: expected {expected}")]
    BadValue {
        /// The policy being built.
        policy: &'static str,
        /// The tunable.
        key: String,
        /// The value given.
        value: String,
        /// What would have been accepted.
        expected: String,
    },
    /// A tunable was given twice.
    #[error("policy {policy}: tunable {key:?} given twice")]
    Duplicate {
        /// The policy being built.
        policy: &'static str,
        /// The repeated key.
        key: String,
    },
    /// A tunable argument was not of the form `key=value`.
    #[error("malformed tunable {arg:?}: expected key=value")]
    Malformed {
        /// The argument given.
        arg: String,
    },
    /// `complete` named a batch that is not in service (never dispatched, or completed already).
    #[error("request {id} is not in service (never dispatched, or already completed)")]
    NotInService {
        /// The id given.
        id: RequestId,
    },
    /// The conservation counters do not match the policy's queues.
    #[error("counters do not balance: {counters:?}, policy holds {queued} queued and {in_flight} in service")]
    Unbalanced {
        /// The counters.
        counters: Counters,
        /// Queue length reported by the policy.
        queued: usize,
        /// Batches the wrapper holds as in service.
        in_flight: usize,
    },
}
