//! The server's guard against hostile and unlucky peers: who may connect, how many at once,
//! and a log of every refusal that a flood cannot turn into a flood of log lines.
//!
//! - **Refusals** ([`Refusal`]) are counted by kind (`/metrics`: `iosets_refusals_total`) and
//!   logged with the peer's address at `warn`, at most [`LOG_BURST`] lines per kind every
//!   [`LOG_WINDOW`]; the lines dropped are counted and reported in the next line of that kind.
//! - **Failed proofs** (a wrong cluster secret, a wrong control token) are remembered per peer
//!   address: after [`MAX_FAILURES`] within [`FAILURE_WINDOW`], the address is refused at once,
//!   without a challenge, until the window has passed (the classic defence against guessing;
//!   the table of addresses is bounded).
//! - **Connections** ([`Connections`]) are registered with their last activity, so that at the
//!   connection cap the connection idle the longest is closed to let a new one in (like a web
//!   server's keep-alive eviction): silent connections cannot deny service.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::{Notify, Semaphore};

/// Lines logged per kind of refusal per window, at most.
pub(crate) const LOG_BURST: u32 = 10;
/// The window of [`LOG_BURST`].
pub(crate) const LOG_WINDOW: Duration = Duration::from_secs(10);
/// Failed proofs from one address within [`FAILURE_WINDOW`] after which it is refused at once.
pub(crate) const MAX_FAILURES: u32 = 10;
/// The window of [`MAX_FAILURES`].
pub(crate) const FAILURE_WINDOW: Duration = Duration::from_secs(60);
/// Addresses remembered for failed proofs; when full, the table starts again (a flood from many
/// addresses costs bounded memory, and is still logged and counted).
const MAX_TRACKED: usize = 4096;

/// Why a peer or a request was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Not on loopback, and the server has no cluster secret to authenticate it.
    NotLoopback,
    /// Sent something else than the answer to the challenge.
    AuthMissing,
    /// Its proof of the cluster secret was wrong.
    AuthFailed,
    /// Too many failed proofs from its address lately.
    Blocked,
    /// A control request without the right token (or control disabled).
    ControlToken,
    /// The connection cap was reached and no connection was idle.
    ConnectionCap,
    /// A connection closed because it was idle the longest at the cap.
    Evicted,
    /// A frame did not arrive whole in time (or the handshake).
    FrameTimeout,
    /// A connection stayed silent, nothing in flight, longer than the idle timeout.
    IdleTimeout,
    /// Its answers could not be written in time: it does not read them.
    WriteTimeout,
    /// A frame that could not be decoded, or a response sent to the server.
    BadFrame,
    /// A loopback TCP peer of a server that has no cluster secret and was not told to trust
    /// its host (`insecure_loopback`): it cannot prove anything, so it is not served.
    Unauthenticated,
    /// A same-host socket peer of another user than root or the server's own, on a server
    /// without a cluster secret (checked by `SO_PEERCRED`).
    LocalUser,
}

impl Refusal {
    /// Every kind, in the order of the counters.
    pub(crate) const ALL: [Refusal; 13] = [
        Refusal::NotLoopback,
        Refusal::AuthMissing,
        Refusal::AuthFailed,
        Refusal::Blocked,
        Refusal::ControlToken,
        Refusal::ConnectionCap,
        Refusal::Evicted,
        Refusal::FrameTimeout,
        Refusal::IdleTimeout,
        Refusal::WriteTimeout,
        Refusal::BadFrame,
        Refusal::Unauthenticated,
        Refusal::LocalUser,
    ];

    /// The label in logs and metrics.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Refusal::NotLoopback => "not_loopback",
            Refusal::AuthMissing => "auth_missing",
            Refusal::AuthFailed => "auth_failed",
            Refusal::Blocked => "blocked",
            Refusal::ControlToken => "control_token",
            Refusal::ConnectionCap => "connection_cap",
            Refusal::Evicted => "evicted_idle",
            Refusal::FrameTimeout => "frame_timeout",
            Refusal::IdleTimeout => "idle_timeout",
            Refusal::WriteTimeout => "write_timeout",
            Refusal::BadFrame => "bad_frame",
            Refusal::Unauthenticated => "unauthenticated",
            Refusal::LocalUser => "local_user",
        }
    }

    /// Its counter's place: the order of [`Refusal::ALL`], which is the declaration order.
    fn index(self) -> usize {
        self as usize
    }
}

#[derive(Debug)]
struct LogWindow {
    start: Instant,
    logged: u32,
    suppressed: u64,
}

/// Refusal counters, the rate-limited log, and the failed-proof table.
#[derive(Debug)]
pub(crate) struct Guard {
    counts: [AtomicU64; Refusal::ALL.len()],
    logs: Mutex<[LogWindow; Refusal::ALL.len()]>,
    failures: Mutex<HashMap<IpAddr, (u32, Instant)>>,
}

impl Default for Guard {
    fn default() -> Guard {
        let now = Instant::now();
        Guard {
            counts: Default::default(),
            logs: Mutex::new(std::array::from_fn(|_| LogWindow {
                start: now,
                logged: 0,
                suppressed: 0,
            })),
            failures: Mutex::new(HashMap::new()),
        }
    }
}

impl Guard {
    /// Counts a refusal and logs it (rate-limited) with the peer and what happened.
    pub(crate) fn refuse(&self, kind: Refusal, peer: Option<IpAddr>, detail: &str) {
        self.counts[kind.index()].fetch_add(1, Ordering::Relaxed);
        let suppressed = {
            let mut logs = self.logs.lock();
            let w = &mut logs[kind.index()];
            let now = Instant::now();
            if now.duration_since(w.start) >= LOG_WINDOW {
                w.start = now;
                w.logged = 0;
            }
            if w.logged >= LOG_BURST {
                w.suppressed += 1;
                return;
            }
            w.logged += 1;
            std::mem::take(&mut w.suppressed)
        };
        let peer = peer.map_or_else(|| "local".to_string(), |p| p.to_string());
        // Closing idle connections is housekeeping, not a threat.
        if matches!(kind, Refusal::IdleTimeout | Refusal::Evicted) {
            tracing::debug!(refusal = kind.as_str(), %peer, suppressed_before = suppressed, "{detail}");
        } else {
            tracing::warn!(refusal = kind.as_str(), %peer, suppressed_before = suppressed, "{detail}");
        }
    }

    /// Refusals of `kind` so far.
    pub(crate) fn count(&self, kind: Refusal) -> u64 {
        self.counts[kind.index()].load(Ordering::Relaxed)
    }

    /// Records a failed proof from `peer`. Same-host peers (a Unix socket, loopback) are not
    /// tracked: blocking them would let one local user lock every other out of the node's
    /// server (a secret of 128 bits or more is not guessed anyway; the failures are counted
    /// and logged all the same).
    pub(crate) fn failed(&self, peer: Option<IpAddr>) {
        let Some(peer) = peer.filter(|p| !p.is_loopback()) else {
            return;
        };
        let now = Instant::now();
        let mut f = self.failures.lock();
        if f.len() >= MAX_TRACKED && !f.contains_key(&peer) {
            f.retain(|_, (_, since)| now.duration_since(*since) < FAILURE_WINDOW);
            if f.len() >= MAX_TRACKED {
                f.clear();
            }
        }
        let e = f.entry(peer).or_insert((0, now));
        if now.duration_since(e.1) >= FAILURE_WINDOW {
            *e = (0, now);
        }
        e.0 += 1;
    }

    /// Whether `peer` failed too many proofs lately.
    pub(crate) fn blocked(&self, peer: Option<IpAddr>) -> bool {
        let Some(peer) = peer else { return false };
        let f = self.failures.lock();
        f.get(&peer)
            .is_some_and(|&(n, since)| n >= MAX_FAILURES && since.elapsed() < FAILURE_WINDOW)
    }
}

/// One registered connection.
#[derive(Debug)]
pub(crate) struct ConnEntry {
    /// Milliseconds since the registry's start at the connection's last frame or answer.
    last_active_ms: AtomicU64,
    /// Requests of the connection in the server (read, not yet answered on the socket).
    in_flight: AtomicUsize,
    /// Tells the connection to close (it was idle the longest at the cap).
    pub(crate) evict: Notify,
    start: Instant,
}

impl ConnEntry {
    /// Marks activity now.
    pub(crate) fn touch(&self) {
        let ms = self.start.elapsed().as_millis() as u64;
        self.last_active_ms.store(ms, Ordering::Relaxed);
    }
    /// How long since the last frame or answer.
    pub(crate) fn idle_for(&self) -> Duration {
        let last = Duration::from_millis(self.last_active_ms.load(Ordering::Relaxed));
        self.start.elapsed().saturating_sub(last)
    }
    /// Requests in the server now.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }
    /// A request entered the server.
    pub(crate) fn begin(&self) {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
    }
    /// A request's answer went out (or was dropped).
    pub(crate) fn end(&self) {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.touch();
    }
}

/// The open connections, for the cap and idle eviction.
#[derive(Debug)]
pub(crate) struct Connections {
    start: Instant,
    next: AtomicU64,
    open: Mutex<HashMap<u64, Arc<ConnEntry>>>,
    evicted: AtomicU64,
}

/// A connection's place in the registry; leaving it unregisters.
#[derive(Debug)]
pub(crate) struct Registered {
    id: u64,
    pub(crate) entry: Arc<ConnEntry>,
    registry: Arc<Connections>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.registry.open.lock().remove(&self.id);
    }
}

/// What admitting a connection did.
#[derive(Debug)]
pub(crate) enum Admission {
    /// Admitted (possibly by evicting the connection idle the longest).
    In(Registered),
    /// At the cap with every connection busy: refused.
    Full,
}

impl Connections {
    pub(crate) fn new() -> Arc<Connections> {
        Arc::new(Connections {
            start: Instant::now(),
            next: AtomicU64::new(0),
            open: Mutex::new(HashMap::new()),
            evicted: AtomicU64::new(0),
        })
    }

    /// Open connections.
    pub(crate) fn len(&self) -> usize {
        self.open.lock().len()
    }

    /// Connections closed to make room.
    pub(crate) fn evicted(&self) -> u64 {
        self.evicted.load(Ordering::Relaxed)
    }

    /// Admits a connection under `cap`: at the cap, the connection with nothing in flight that
    /// was active least recently is told to close and the new one comes in; if every connection
    /// has requests in flight, the new one is refused. `busy` connections are never evicted, so
    /// nothing read is left unanswered.
    pub(crate) fn admit(self: &Arc<Connections>, cap: usize) -> Admission {
        let mut open = self.open.lock();
        if open.len() >= cap {
            let victim = open
                .iter()
                .filter(|(_, e)| e.in_flight.load(Ordering::Relaxed) == 0)
                .min_by_key(|(_, e)| e.last_active_ms.load(Ordering::Relaxed))
                .map(|(&id, _)| id);
            match victim.and_then(|id| open.remove(&id)) {
                // Out of the registry now (its slot is the new connection's); it closes as soon
                // as its task sees the notice.
                Some(e) => {
                    e.evict.notify_one();
                    self.evicted.fetch_add(1, Ordering::Relaxed);
                }
                None => return Admission::Full,
            }
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let entry = Arc::new(ConnEntry {
            last_active_ms: AtomicU64::new(self.start.elapsed().as_millis() as u64),
            in_flight: AtomicUsize::new(0),
            evict: Notify::new(),
            start: self.start,
        });
        open.insert(id, entry.clone());
        Admission::In(Registered {
            id,
            entry,
            registry: self.clone(),
        })
    }
}

/// The bytes budgets of in-flight requests, in KiB (a semaphore counts at most `u32` permits
/// per acquisition): one per server, one per connection.
#[derive(Debug)]
pub(crate) struct ByteBudget {
    /// The semaphore.
    pub(crate) sem: Arc<Semaphore>,
    /// Its capacity, KiB.
    pub(crate) kib: u32,
}

impl ByteBudget {
    /// A budget of `bytes` (rounded up to whole KiB, at least one).
    pub(crate) fn new(bytes: u64) -> ByteBudget {
        let kib = u32::try_from(bytes.div_ceil(1024).max(1)).unwrap_or(u32::MAX);
        ByteBudget {
            sem: Arc::new(Semaphore::new(kib as usize)),
            kib,
        }
    }

    /// Whether nine tenths or more of the budget is in use.
    pub(crate) fn pressed(&self) -> bool {
        self.used_kib() * 10 >= u64::from(self.kib) * 9
    }

    /// KiB in use now.
    pub(crate) fn used_kib(&self) -> u64 {
        u64::from(self.kib) - self.sem.available_permits() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_the_cap_the_longest_idle_connection_goes_and_busy_ones_stay() {
        let c = Connections::new();
        let Admission::In(a) = c.admit(2) else {
            panic!()
        };
        std::thread::sleep(Duration::from_millis(5));
        let Admission::In(b) = c.admit(2) else {
            panic!()
        };
        b.entry.touch();
        // `a` is idle the longest: it is evicted for `x`.
        let Admission::In(x) = c.admit(2) else {
            panic!()
        };
        assert_eq!(c.evicted(), 1);
        assert_eq!(c.len(), 2);
        drop(a);
        assert_eq!(c.len(), 2, "an evicted entry is already out");
        // Both busy: the next is refused.
        b.entry.begin();
        x.entry.begin();
        assert!(matches!(c.admit(2), Admission::Full));
        x.entry.end();
        assert!(matches!(c.admit(2), Admission::In(_)));
        drop((b, x));
        assert_eq!(c.len(), 0);
    }

    #[test]
    fn every_kind_has_its_own_counter() {
        for (i, k) in Refusal::ALL.iter().enumerate() {
            assert_eq!(k.index(), i, "{}", k.as_str());
        }
    }

    #[test]
    fn failures_block_an_address_and_logging_is_counted() {
        let g = Guard::default();
        let p: Option<IpAddr> = Some("10.0.0.7".parse().unwrap());
        for _ in 0..MAX_FAILURES - 1 {
            g.failed(p);
        }
        assert!(!g.blocked(p));
        g.failed(p);
        assert!(g.blocked(p));
        assert!(!g.blocked(Some("10.0.0.8".parse().unwrap())));
        assert!(!g.blocked(None), "same-host peers are not tracked");
        let lo: Option<IpAddr> = Some("127.0.0.1".parse().unwrap());
        for _ in 0..2 * MAX_FAILURES {
            g.failed(lo);
        }
        assert!(!g.blocked(lo), "nor loopback");
        for _ in 0..100 {
            g.refuse(Refusal::AuthFailed, p, "wrong proof");
        }
        assert_eq!(g.count(Refusal::AuthFailed), 100);
        assert_eq!(g.count(Refusal::Blocked), 0);
    }

    #[test]
    fn byte_budgets_count_whole_kib() {
        let b = ByteBudget::new(64 * 1024 * 1024 + 1);
        assert_eq!(b.kib, 65537);
        assert_eq!(b.used_kib(), 0);
        let p = b.sem.clone().try_acquire_many_owned(10).unwrap();
        assert_eq!(b.used_kib(), 10);
        drop(p);
        assert_eq!(ByteBudget::new(0).kib, 1);
    }
}
