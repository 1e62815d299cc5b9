use iosets_policy::PolicyError;

/// What can go wrong when driving a [`crate::Scheduler`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// [`crate::Scheduler::shutdown`] was called: no new request is accepted. The payload given to
    /// `submit` was dropped.
    #[error("the scheduler is shut down; no new request is accepted")]
    ShutDown,
    /// A policy handed to [`crate::Scheduler::switch_policy`] already holds requests of its own.
    #[error("policy {policy} cannot take over: it already holds {queued} queued and {in_flight} in-service requests")]
    PolicyNotEmpty {
        /// The policy's name.
        policy: &'static str,
        /// Requests it holds queued.
        queued: usize,
        /// Batches it holds in service.
        in_flight: usize,
    },
    /// A policy instance's own conservation check failed.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// A quota rule set was refused (see [`crate::quota::QuotaConfig::validate`]); nothing was
    /// changed.
    #[error("quota rule `{rule}`: {reason}")]
    Quota {
        /// The rule at fault (`*` for a setting of the whole set).
        rule: String,
        /// Why.
        reason: String,
    },
    /// A share weight or a job's account was refused (see [`crate::share`]); nothing was
    /// changed.
    #[error("share `{node}`: {reason}")]
    Share {
        /// The node of the tree at fault (`level=name`), or the job.
        node: String,
        /// Why.
        reason: String,
    },
    /// An in-service limit was refused (see [`crate::InServiceLimit`]); nothing was changed.
    #[error("{reason}")]
    InService {
        /// Why.
        reason: String,
    },
    /// A setting that may change only while the scheduler holds no request was asked to change
    /// while it held some; nothing was changed.
    #[error(
        "{setting} can change only while no request is queued, held or in service ({busy} are)"
    )]
    NotIdle {
        /// The setting.
        setting: &'static str,
        /// Requests queued or held, and batches in service, at the time.
        busy: usize,
    },
    /// The runtime's own bookkeeping disagrees with the policies' (see
    /// [`crate::Scheduler::check_balance`]).
    #[error("runtime bookkeeping does not balance: {what}: expected {expected}, found {found}")]
    Unbalanced {
        /// Which quantity disagrees.
        what: &'static str,
        /// The value the policies report.
        expected: u64,
        /// The value the runtime holds.
        found: u64,
    },
}
