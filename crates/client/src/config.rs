//! The client's settings and the caller's job identity.

use std::time::Duration;

use iosets_types::{JobId, Priority};

use crate::error::ClientError;

/// The default chunk size of the striping layout: 1 MiB.
pub const DEFAULT_CHUNK_SIZE: u64 = 1024 * 1024;

/// The default size of the same-host transport's shared region: 64 MiB.
pub const DEFAULT_LOCAL_REGION: u64 = 64 * 1024 * 1024;

/// The largest chunk size: a chunk travels in one frame, which must stay below the servers'
/// default maximum frame size ([`iosets_proto::DEFAULT_MAX_FRAME`]).
pub const MAX_CHUNK_SIZE: u64 = 64 * 1024 * 1024;

/// The job this process works for, from the environment: `IOSETS_JOB_ID`, else `SLURM_JOB_ID`
/// (what Slurm sets in every job step), parsed as an unsigned integer. `None` if neither is set
/// or parses.
pub fn job_from_env() -> Option<JobId> {
    ["IOSETS_JOB_ID", "SLURM_JOB_ID"].iter().find_map(|var| {
        std::env::var(var)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(JobId)
    })
}

/// How a [`Client`](crate::Client) behaves. Build one with [`ClientConfig::new`] or
/// [`ClientConfig::from_env`] and adjust the public fields.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// The job every request is done for (sent in every frame's header).
    pub job: JobId,
    /// A priority hint sent in every header; the server's control plane overrides it.
    pub priority: Option<Priority>,
    /// Chunk size of the striping layout, bytes (default 1 MiB, at most [`MAX_CHUNK_SIZE`]).
    /// Every client of a file must use the same chunk size and the same server list, in the
    /// same order: the layout is a function of those and the path alone.
    pub chunk_size: u64,
    /// How long to wait for a TCP connection to a server.
    pub connect_timeout: Duration,
    /// How long to wait for one request's response (`None`: forever). A request queued behind
    /// other jobs' I/O on a busy server can wait long; the default is generous (120 s). A timed
    /// out request is not retried: it may still be queued on the server.
    pub request_timeout: Option<Duration>,
    /// How many times an idempotent request is sent again after its connection broke (and how
    /// many times a connection is attempted again before any request is sent).
    pub retries: u32,
    /// The wait before the first retry; it doubles with each further retry, up to
    /// [`max_backoff`](ClientConfig::max_backoff).
    pub backoff: Duration,
    /// The longest wait between two retries.
    pub max_backoff: Duration,
    /// The largest frame accepted from a server (checked on the length prefix, before
    /// allocating).
    pub max_frame: u32,
    /// Use the same-host transport of servers on this host that offer it (default on): their
    /// Unix socket, with a shared memory region through which reads and writes of 64 KiB or
    /// more move without being copied through a socket. Asked for with the first such request;
    /// remote servers, and servers that offer none, stay on TCP.
    pub local: bool,
    /// The shared region's size in bytes (default 64 MiB, at least one chunk): the data of the
    /// requests in flight at once through the same-host transport; more falls back to
    /// travelling in frames. Address space only: memory is used as pages are first touched.
    pub local_region: u64,
    /// Stamp every request with the start of its job's current I/O phase (default on), so that
    /// servers running `iosets` with `order=phase` agree on which job of a set goes first (see
    /// the crate's `phase` module). A job's phase starts with a request after
    /// [`phase_gap`](ClientConfig::phase_gap) without any.
    pub phase_stamps: bool,
    /// The shortest pause between two of a job's requests that ends its I/O phase (default
    /// 100 ms): shorter pauses are gaps inside a phase.
    pub phase_gap: Duration,
    /// The longest a phase keeps its stamp (default 60 s): a job that does I/O without pause
    /// gets a fresh stamp after that long, and so queues behind the phases begun meanwhile.
    pub max_phase: Duration,
    /// The cluster's shared secret, for servers started with one (`--auth-file`): every
    /// connection proves it and checks the server's proof in turn ([`iosets_proto::auth`]).
    /// `None` (the default): no handshake, which such servers refuse. See
    /// [`ClientConfig::auth_from_env`].
    pub auth: Option<iosets_proto::auth::Secret>,
}

/// The environment variable naming the cluster's secret file for clients
/// ([`ClientConfig::auth_from_env`]).
pub const AUTH_FILE_VAR: &str = "IOSETS_AUTH_FILE";

impl ClientConfig {
    /// The defaults for job `job`: no priority hint, 1 MiB chunks, 5 s connect timeout, 120 s
    /// request timeout, 5 retries from 50 ms backoff up to 2 s, the protocol's default maximum
    /// frame, the same-host transport on with a 64 MiB region.
    pub fn new(job: JobId) -> ClientConfig {
        ClientConfig {
            job,
            priority: None,
            chunk_size: DEFAULT_CHUNK_SIZE,
            connect_timeout: Duration::from_secs(5),
            request_timeout: Some(Duration::from_secs(120)),
            retries: 5,
            backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(2),
            max_frame: iosets_proto::DEFAULT_MAX_FRAME,
            local: true,
            local_region: DEFAULT_LOCAL_REGION,
            phase_stamps: true,
            phase_gap: Duration::from_millis(100),
            max_phase: Duration::from_secs(60),
            auth: None,
        }
    }

    /// The secret in the file `IOSETS_AUTH_FILE` names, if the variable is set (and not empty).
    ///
    /// # Errors
    /// [`ClientError::Config`] when the file cannot be read or is not a usable secret (too
    /// short, readable by other users).
    pub fn auth_from_env() -> Result<Option<iosets_proto::auth::Secret>, ClientError> {
        match std::env::var_os(AUTH_FILE_VAR) {
            Some(p) if !p.is_empty() => iosets_proto::auth::Secret::from_file(p.as_ref())
                .map(Some)
                .map_err(|e| ClientError::Config(format!("{AUTH_FILE_VAR}: {e}"))),
            _ => Ok(None),
        }
    }

    /// This node's secret for the current user, as `iosets mount`, `ctl` and `top` find it
    /// without a flag: the file `IOSETS_AUTH_FILE` names, else the default place
    /// ([`iosets_proto::auth::default_path`]: `/etc/iosets/secret` for root, a state directory
    /// for another user) when a file is there, where `iosets serve` made it. `None` when
    /// there is none.
    ///
    /// # Errors
    /// [`ClientError::Config`] when the file named or found cannot be read or is not a usable
    /// secret.
    pub fn auth_default() -> Result<Option<iosets_proto::auth::Secret>, ClientError> {
        if let Some(s) = ClientConfig::auth_from_env()? {
            return Ok(Some(s));
        }
        let Ok(path) = iosets_proto::auth::default_path() else {
            return Ok(None);
        };
        match std::fs::symlink_metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            _ => iosets_proto::auth::Secret::from_file(&path)
                .map(Some)
                .map_err(|e| ClientError::Config(format!("the node's default secret: {e}"))),
        }
    }

    /// The defaults with the job from [`job_from_env`], or job 0 when the environment names
    /// none.
    pub fn from_env() -> ClientConfig {
        ClientConfig::new(job_from_env().unwrap_or_default())
    }

    pub(crate) fn validate(&self) -> Result<(), ClientError> {
        if self.chunk_size == 0 || self.chunk_size > MAX_CHUNK_SIZE {
            return Err(ClientError::Config(format!(
                "chunk size {} bytes: expected 1..={MAX_CHUNK_SIZE}",
                self.chunk_size
            )));
        }
        // A read reply of one chunk must fit in a frame.
        let needed = self.chunk_size + 4096;
        if u64::from(self.max_frame) < needed {
            return Err(ClientError::Config(format!(
                "max frame {} bytes is below one chunk ({} bytes) plus headers",
                self.max_frame, self.chunk_size
            )));
        }
        if self.local && !(self.chunk_size..=1 << 40).contains(&self.local_region) {
            return Err(ClientError::Config(format!(
                "local region {} bytes: expected one chunk ({} bytes) to 1 TiB",
                self.local_region, self.chunk_size
            )));
        }
        if self.connect_timeout.is_zero() || self.request_timeout.is_some_and(|t| t.is_zero()) {
            return Err(ClientError::Config("timeouts must be positive".into()));
        }
        if self.phase_stamps && (self.phase_gap.is_zero() || self.max_phase <= self.phase_gap) {
            return Err(ClientError::Config(format!(
                "phase gap {:?} and max phase {:?}: expected 0 < gap < max phase",
                self.phase_gap, self.max_phase
            )));
        }
        Ok(())
    }

    /// The wait before retry number `attempt` (0-based).
    pub(crate) fn backoff_for(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.min(16)).unwrap_or(u32::MAX);
        self.backoff
            .checked_mul(factor)
            .unwrap_or(self.max_backoff)
            .min(self.max_backoff)
    }
}

impl Default for ClientConfig {
    /// [`ClientConfig::from_env`].
    fn default() -> ClientConfig {
        ClientConfig::from_env()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let c = ClientConfig::new(JobId(1));
        let waits: Vec<u128> = (0..8).map(|a| c.backoff_for(a).as_millis()).collect();
        assert_eq!(waits, vec![50, 100, 200, 400, 800, 1600, 2000, 2000]);
        assert_eq!(c.backoff_for(u32::MAX), c.max_backoff);
    }

    #[test]
    fn bad_values_are_refused() {
        let mut c = ClientConfig::new(JobId(1));
        assert!(c.validate().is_ok());
        c.chunk_size = 0;
        assert!(c.validate().is_err());
        c.chunk_size = MAX_CHUNK_SIZE + 1;
        assert!(c.validate().is_err());
        c.chunk_size = 1 << 20;
        c.max_frame = 1 << 20;
        assert!(c.validate().is_err());
        let mut c = ClientConfig::new(JobId(1));
        c.local_region = c.chunk_size - 1;
        assert!(c.validate().is_err());
        c.local = false;
        assert!(c.validate().is_ok(), "no region without the transport");
        let mut c = ClientConfig::new(JobId(1));
        c.phase_gap = Duration::ZERO;
        assert!(c.validate().is_err());
        c.phase_gap = c.max_phase;
        assert!(c.validate().is_err());
        c.phase_stamps = false;
        assert!(c.validate().is_ok(), "no gap without stamps");
    }
}
