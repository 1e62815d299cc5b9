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

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

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
    /// A frame holding more than its share of the server's bytes while others waited
    /// received nothing for a second.
    FrameStalled,
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
    pub(crate) const ALL: [Refusal; 14] = [
        Refusal::NotLoopback,
        Refusal::AuthMissing,
        Refusal::AuthFailed,
        Refusal::Blocked,
        Refusal::ControlToken,
        Refusal::ConnectionCap,
        Refusal::Evicted,
        Refusal::FrameTimeout,
        Refusal::FrameStalled,
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
            Refusal::FrameStalled => "frame_stalled",
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
///
/// # Frames being received: charged as their bytes arrive, a share each
/// A large frame is charged to the server's budget a step ([`RECEIVE_STEP_KIB`]) at a time,
/// just ahead of its bytes, never on its announced length: a connection holds at most one step
/// beyond what it has received, so connections that announce 64 MiB frames and send nothing
/// hold 64 KiB each, not the server's budget. What frames being received may hold is bounded
/// three ways (issue 27):
///
/// - **A reserve for requests already read.** Frames being received hold at most the budget
///   less an eighth ([`ByteBudget::reserve_kib`]): the small requests of other clients, charged
///   once decoded, always find room beside them.
/// - **The oldest frame goes first.** The frame that started receiving first may always take
///   its next step (up to its whole length, or the whole budget for a frame larger than it);
///   every other one shares what is left once the reserve and a whole largest frame
///   ([`ByteBudget::others_kib`]) are set aside. So one frame can always complete, whatever the
///   others hold: receiving never deadlocks, as charging the whole announced length up front
///   never did.
/// - **A share each while others wait.** Among the other frames, one may hold at most
///   `max(one step, others_kib / their number)` while another frame under its share waits for
///   room; with nobody waiting, a frame may take more (the budget is not left idle).
/// - **Held bytes must keep coming.** Bytes received cannot be given back, so while another
///   frame waits for room, a frame that holds more than its share, or the oldest (which goes
///   first), and receives nothing for a second is closed ([`crate::conn`]: refusal
///   `frame_stalled`), as a connection whose answers make no progress under byte pressure is.
///   A frame waiting for room while holding no more than its share does not count that wait
///   against its frame timeout; one holding more does.
///
/// Small frames (64 KiB at most) are read first and charged once decoded, as before.
#[derive(Debug)]
pub(crate) struct ByteBudget {
    /// The semaphore.
    pub(crate) sem: Arc<Semaphore>,
    /// Its capacity, KiB.
    pub(crate) kib: u32,
    /// The largest frame, KiB, at most the capacity: what the oldest frame may need.
    frame_kib: u64,
    /// The frames being received.
    receiving: Mutex<Receivers>,
    /// Told when a frame stops receiving or stops waiting: waiters look again.
    changed: Notify,
}

/// A step of a frame being received, KiB: the server's budget is taken this much at a time,
/// ahead of the bytes (the frame reader's buffer grows by as much).
pub(crate) const RECEIVE_STEP_KIB: u64 = 64;

/// The frames being received, by ticket (the order they started in).
#[derive(Debug, Default)]
struct Receivers {
    next: u64,
    /// KiB each holds; the first is the oldest.
    held: BTreeMap<u64, u64>,
    /// Their sum.
    total: u64,
    /// Frames under their share waiting for room now.
    waiting: usize,
    /// Frames waiting for room now, under their share or not.
    blocked: usize,
}

impl ByteBudget {
    /// A budget of `bytes` (rounded up to whole KiB, at least one), for frames up to its whole
    /// size.
    pub(crate) fn new(bytes: u64) -> ByteBudget {
        let kib = u32::try_from(bytes.div_ceil(1024).max(1)).unwrap_or(u32::MAX);
        ByteBudget {
            sem: Arc::new(Semaphore::new(kib as usize)),
            kib,
            frame_kib: u64::from(kib),
            receiving: Mutex::new(Receivers::default()),
            changed: Notify::new(),
        }
    }

    /// A budget of `bytes` for frames of at most `max_frame` bytes (the server's).
    pub(crate) fn with_max_frame(bytes: u64, max_frame: u32) -> ByteBudget {
        let mut b = ByteBudget::new(bytes);
        b.frame_kib = u64::from(max_frame).div_ceil(1024).min(u64::from(b.kib));
        b
    }

    /// Whether nine tenths or more of the budget is in use.
    pub(crate) fn pressed(&self) -> bool {
        self.used_kib() * 10 >= u64::from(self.kib) * 9
    }

    /// KiB in use now.
    pub(crate) fn used_kib(&self) -> u64 {
        u64::from(self.kib) - self.sem.available_permits() as u64
    }

    /// KiB frames being received never hold: an eighth of the budget, for requests read whole.
    pub(crate) fn reserve_kib(&self) -> u64 {
        u64::from(self.kib) / 8
    }

    /// KiB the frames being received other than the oldest may hold together: the budget less
    /// the reserve and a whole largest frame (0 when the budget is smaller: then frames are
    /// received one at a time).
    pub(crate) fn others_kib(&self) -> u64 {
        u64::from(self.kib).saturating_sub(self.reserve_kib() + self.frame_kib)
    }

    /// Starts receiving a frame: its charges go through the returned handle.
    pub(crate) fn receive(&self) -> Receiving<'_> {
        let mut r = self.receiving.lock();
        let ticket = r.next;
        r.next += 1;
        r.held.insert(ticket, 0);
        Receiving {
            budget: self,
            ticket,
            kib: 0,
            permit: None,
        }
    }

    /// The frames being received now: (how many, KiB they hold, KiB the largest holds).
    pub(crate) fn receiving(&self) -> (usize, u64, u64) {
        let r = self.receiving.lock();
        let largest = r.held.values().copied().max().unwrap_or(0);
        (r.held.len(), r.total, largest)
    }

    /// A frame's share while others wait: one step at least, else an equal part of
    /// [`ByteBudget::others_kib`] among the frames other than the oldest.
    fn share(&self, r: &Receivers) -> u64 {
        let others = (r.held.len().saturating_sub(1)).max(1) as u64;
        (self.others_kib() / others).max(RECEIVE_STEP_KIB)
    }

    /// Whether the frame `ticket`, holding `held` KiB, may take `want` more now, and whether it
    /// would then hold more than its share.
    fn may_take(&self, r: &Receivers, ticket: u64, held: u64, want: u64) -> (bool, bool) {
        let mut order = r.held.iter();
        let oldest = order.next();
        if oldest.is_some_and(|(&t, _)| t == ticket) {
            return (true, false);
        }
        let others = r.total - oldest.map_or(0, |(_, &k)| k);
        let over = held + want > self.share(r);
        let room = others + want <= self.others_kib();
        (room && (!over || r.waiting == 0), over)
    }
}

/// Why a frame's step was not taken.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum StepEnd {
    /// It waited for room past its deadline while holding more than its share.
    TimedOut,
}

/// One frame being received: what it holds of the server's budget. Dropping it (the
/// connection closed mid-frame) gives its bytes back; [`Receiving::finish`] hands them to the
/// request once the frame is whole.
#[derive(Debug)]
pub(crate) struct Receiving<'a> {
    budget: &'a ByteBudget,
    ticket: u64,
    /// KiB held (taken from the semaphore).
    kib: u64,
    permit: Option<OwnedSemaphorePermit>,
}

/// A frame marked as waiting for room (`under`: under its share); unmarked on drop (also when
/// the wait is cancelled).
struct Waiting<'a> {
    budget: &'a ByteBudget,
    under: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut r = self.budget.receiving.lock();
        r.blocked -= 1;
        if self.under {
            r.waiting -= 1;
        }
        // With nobody under its share waiting, frames over theirs may go on: they look again.
        // (Only then: a wake-up on every unmark would have the waiters wake each other.)
        let last = self.under && r.waiting == 0;
        drop(r);
        if last {
            self.budget.changed.notify_waiters();
        }
    }
}

impl Receiving<'_> {
    /// Bytes of a frame of `len` bytes that may be read now: what it holds, or all of it once
    /// it holds its whole length (or the whole budget, for a frame larger than the budget).
    pub(crate) fn covered(&self, len: usize) -> usize {
        if self.kib >= self.need_kib(len) {
            len
        } else {
            (self.kib * 1024) as usize
        }
    }

    /// KiB a frame of `len` bytes holds once whole.
    fn need_kib(&self, len: usize) -> u64 {
        (len as u64)
            .div_ceil(1024)
            .min(u64::from(self.budget.kib))
            .max(1)
    }

    /// Takes the next step of a frame of `len` bytes: waits for its turn (the rules of
    /// [`ByteBudget`]), then for the bytes in the budget. Answers how long it waited for
    /// reasons that are not its own (under its share, or for the budget), which the caller
    /// does not count against the frame's timeout; a wait while over its share ends at
    /// `deadline` ([`StepEnd::TimedOut`]). Cancelled only when its connection ends.
    pub(crate) async fn step(
        &mut self,
        len: usize,
        deadline: tokio::time::Instant,
    ) -> Result<Duration, StepEnd> {
        let want =
            (self.need_kib(len) - self.kib.min(self.need_kib(len))).clamp(1, RECEIVE_STEP_KIB);
        let budget = self.budget;
        let mut excused = Duration::ZERO;
        loop {
            let notified = budget.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let (under, counted) = {
                let mut r = budget.receiving.lock();
                let (ok, over) = budget.may_take(&r, self.ticket, self.kib, want);
                if ok {
                    // Counted now, before the bytes are in hand: two frames can never pass the
                    // gate on the same room.
                    r.total += want;
                    *r.held.entry(self.ticket).or_insert(0) += want;
                    break;
                }
                r.blocked += 1;
                if !over {
                    r.waiting += 1;
                }
                (!over, self.kib > budget.share(&r))
            };
            let _mark = Waiting { budget, under };
            let since = tokio::time::Instant::now();
            if counted {
                tokio::select! {
                    _ = notified => {}
                    _ = tokio::time::sleep_until(deadline) => return Err(StepEnd::TimedOut),
                }
            } else {
                notified.await;
                excused += since.elapsed();
            }
        }
        let since = tokio::time::Instant::now();
        let n = u32::try_from(want).unwrap_or(u32::MAX);
        // The semaphore is never closed.
        if let Ok(p) = budget.sem.clone().acquire_many_owned(n).await {
            match &mut self.permit {
                Some(held) => held.merge(p),
                None => self.permit = Some(p),
            }
            self.kib += want;
        }
        Ok(excused + since.elapsed())
    }

    /// Whether another frame waits for room while this one holds more than its share, or is
    /// the oldest (which goes first): receiving nothing then holds the others up.
    pub(crate) fn crowding(&self) -> bool {
        let r = self.budget.receiving.lock();
        let oldest = r.held.keys().next() == Some(&self.ticket);
        r.blocked > 0 && (oldest || self.kib > self.budget.share(&r))
    }

    /// The frame is whole: its bytes go to the request read from it.
    pub(crate) fn finish(mut self) -> Option<OwnedSemaphorePermit> {
        self.permit.take()
    }
}

impl Drop for Receiving<'_> {
    fn drop(&mut self) {
        let mut r = self.budget.receiving.lock();
        if let Some(k) = r.held.remove(&self.ticket) {
            r.total -= k;
        }
        drop(r);
        self.budget.changed.notify_waiters();
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

    /// Runs `f` to its end or for 200 ms: `None` if it was still waiting.
    async fn within<T>(f: impl std::future::Future<Output = T>) -> Option<T> {
        tokio::time::timeout(Duration::from_millis(200), f)
            .await
            .ok()
    }

    #[tokio::test]
    async fn frames_being_received_share_what_the_oldest_and_the_reserve_leave() {
        // 1 MiB, frames of 256 KiB: 128 KiB reserved, 640 KiB for the frames after the oldest.
        let b = ByteBudget::with_max_frame(1 << 20, 256 << 10);
        assert_eq!((b.reserve_kib(), b.others_kib()), (128, 640));
        let far = tokio::time::Instant::now() + Duration::from_secs(60);
        let len = 1 << 20; // larger than a frame may be here: the budget's clamp is not hit
        let (mut oldest, mut second, mut third) = (b.receive(), b.receive(), b.receive());
        // Nobody waits: the second may take all the others' room, past its share (320 KiB).
        for _ in 0..10 {
            within(second.step(len, far)).await.unwrap().unwrap();
        }
        assert_eq!(b.receiving(), (3, 640, 640));
        assert!(!second.crowding());
        // The third finds no room: it waits (under its share), and the second, over its
        // share while the third waits, may take no more and is crowding.
        let mut third_step = Box::pin(third.step(len, far));
        assert!(within(&mut third_step).await.is_none());
        assert!(within(second.step(len, far)).await.is_none());
        assert!(second.crowding());
        assert!(
            oldest.crowding(),
            "the oldest goes first: it must keep receiving"
        );
        // The oldest always goes on: up to a whole frame beside the others.
        for _ in 0..4 {
            within(oldest.step(len, far)).await.unwrap().unwrap();
        }
        assert_eq!(b.receiving().1, 640 + 256);
        assert!(b.used_kib() <= u64::from(b.kib));
        // The second's connection closes: the third gets its step.
        drop(second);
        within(&mut third_step).await.unwrap().unwrap();
        drop(third_step);
        assert_eq!(b.receiving(), (2, 256 + 64, 256));
        // Whole frames hand their bytes on; nothing is left counted as receiving.
        let p = oldest.finish().unwrap();
        assert_eq!(p.num_permits(), 256);
        drop(third);
        assert_eq!(b.receiving(), (0, 0, 0));
        drop(p);
        assert_eq!(b.used_kib(), 0);
    }

    #[tokio::test]
    async fn a_frame_over_its_share_waits_no_longer_than_its_deadline() {
        let b = ByteBudget::with_max_frame(1 << 20, 256 << 10);
        let far = tokio::time::Instant::now() + Duration::from_secs(60);
        let (_oldest, mut a, mut waiter) = (b.receive(), b.receive(), b.receive());
        for _ in 0..10 {
            within(a.step(1 << 20, far)).await.unwrap().unwrap();
        }
        let mut waiting = Box::pin(waiter.step(1 << 20, far));
        assert!(within(&mut waiting).await.is_none());
        // Over its share while another waits: its wait ends at its deadline, counted.
        let soon = tokio::time::Instant::now() + Duration::from_millis(50);
        assert_eq!(
            within(a.step(1 << 20, soon)).await,
            Some(Err(StepEnd::TimedOut))
        );
        // A wait under the share is reported as not the frame's doing.
        drop(a);
        let excused = within(&mut waiting).await.unwrap().unwrap();
        assert!(excused >= Duration::from_millis(200), "{excused:?}");
    }

    #[test]
    fn a_budget_smaller_than_two_frames_receives_one_frame_at_a_time() {
        let b = ByteBudget::with_max_frame(1 << 20, 1 << 20);
        assert_eq!(b.others_kib(), 0);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            let far = tokio::time::Instant::now() + Duration::from_secs(60);
            let (mut first, mut second) = (b.receive(), b.receive());
            assert!(within(second.step(4096, far)).await.is_none());
            within(first.step(4096, far)).await.unwrap().unwrap();
            drop(first);
            within(second.step(4096, far)).await.unwrap().unwrap();
            assert_eq!(second.covered(4096), 4096);
        });
    }
}
