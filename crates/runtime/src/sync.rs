//! The runtime's synchronisation primitives in one place: `parking_lot` and `std` normally, the
//! [loom](https://docs.rs/loom) model checker's under `--cfg loom`.
//!
//! # What it is
//! Every lock, condition variable, atomic and deadline of the runtime ([`crate::Scheduler`] and
//! [`crate::book`]) comes from here: [`Mutex`] and [`MutexGuard`] (parking_lot's surface: `lock`
//! without poisoning, `try_lock` giving an `Option`, [`MutexGuard::unlocked`]), [`Condvar`]
//! (parking_lot's: `wait(&mut guard)`, `wait_until`, `notify_one() -> bool`,
//! `notify_all() -> usize`), the atomics and [`Instant`]. Normally these are re-exports and cost
//! nothing. Under `cfg(loom)` they are adapters over loom's types, so that
//! `crates/runtime-loom/tests/loom_protocol.rs` can explore every interleaving of submit, take, complete, priority
//! change, policy switch and shutdown, and report a lost wake-up as a deadlock.
//!
//! # What it is not
//! Not a general loom port of parking_lot: it gives exactly what the runtime uses. It does not
//! model the runtime's `Arc`s (reference counts are not part of the protocol), the listener's or
//! the caller's own synchronisation, nor [`crate::MonotonicClock`]; a model runs on
//! `model::ModelClock`.
//!
//! # The condition variable under loom, and why its return values are exact
//! The scheduler counts wake-ups: a waker notifies only while some sleeper is not already woken
//! (`waiting > wakes_pending`), adds what `notify_one`/`notify_all` return to `wakes_pending`, and a
//! sleeper whose wait ended by a notification (not a timeout) takes one off. That is exact only
//! with parking_lot's guarantees, which the loom adapter therefore reproduces rather than
//! approximates with loom's std-like `Condvar` (whose notifications return nothing):
//! - no spurious wake-ups: a wait ends only by a notification or by its timeout;
//! - `notify_one` wakes the longest-waiting sleeper that has not timed out and returns whether
//!   there was one; `notify_all` wakes them all and returns how many;
//! - a timed wait reports "timed out" exactly when no notification claimed it first: a sleeper
//!   that times out leaves the queue at once, so a later notification does not count it.
//!
//! Each sleeper is a small event of its own (a loom mutex and condvar around its state: waiting,
//! notified or timed out); the condvar keeps the queue of sleepers. A notifier and a timeout
//! compete for a sleeper under its event's lock, so loom explores both orders. The queue is only
//! touched with the caller's mutex held (a sleeper joins it before releasing the mutex; every
//! notification in the runtime is made under the mutex), so the mutex orders those accesses.
//!
//! # Time under loom
//! Loom has no real time. A model keeps one time, in nanoseconds from 0 at the start of each
//! execution: `model::ModelClock` (the scheduler's [`crate::Clock`] in a model) and [`Instant`]
//! read it; only `model::advance` and a `model::Timer` move it. A timed wait whose deadline has
//! passed times out at once (releasing and taking the mutex again, so a notifier that gets in
//! between still wins); otherwise it sleeps until notified or until the time reaches its deadline.
//!
//! A `model::Timer` is a loom thread that, whenever a timed wait begins, may move the time to the
//! earliest deadline a sleeper still waits for, at whatever point loom chooses: a timer fires at
//! any point of its sleeper's wait, before or after a competing notification, as in a
//! discrete-event simulation. It moves the time a bounded number of times, so that an idle
//! worker's periodic sweep timer cannot make an execution endless. A model without a timer has
//! no timeout at all: a worker sleeping until the job book's next sweep waits like an untimed
//! one, so a lost wake-up cannot hide behind a periodic timer and shows as loom's deadlock error.
//!
//! Why not "any timed wait may time out at any moment": at a time that has not moved, a timeout
//! only sends the worker back to the policy, which answers the same, so the model of a correct
//! scheduler would spin (and hit loom's branch limit), and sleepers would wake for deadlines that
//! have not come, which no clock does. Why time moves only while someone sleeps on a deadline:
//! the scheduler turns a policy's `NotBefore(t)` into a deadline from two clock reads (its
//! [`crate::Clock`], then [`Instant::now`]), and time that passes between the two reads pushes the
//! deadline later by as much. With real time that only delays the timer by the gap; in a model
//! where time moves once and for all it would leave the sleeper a deadline that never comes.

#[cfg(not(loom))]
pub(crate) use parking_lot::{Condvar, Mutex, MutexGuard};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub(crate) use std::time::Instant;

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
#[cfg(loom)]
pub(crate) use model::Instant;
#[cfg(loom)]
pub(crate) use modelled::{Condvar, Mutex, MutexGuard};

/// What a model needs from the runtime beyond its public API: the clock and the passage of time.
#[cfg(loom)]
pub mod model {
    use std::fmt;
    use std::sync::Arc;
    use std::time::Duration;

    use iosets_types::Nanos;
    use loom::sync::atomic::{AtomicU64, Ordering};

    use super::modelled::{Sleeper, Wake};
    use crate::Clock;

    /// The model's time and the timed sleepers waiting for it (one per loom execution).
    struct Time {
        now: AtomicU64,
        /// Timed sleepers with their deadlines; a sleeper woken otherwise stays until its deadline
        /// passes and the claim fails.
        timers: std::sync::Mutex<Vec<(u64, Arc<Sleeper>)>>,
        /// Rung at every timed wait, for a [`Timer`] to notice.
        bell: loom::sync::Mutex<Bell>,
        bell_cv: loom::sync::Condvar,
    }

    #[derive(Default)]
    struct Bell {
        /// Timed waits registered since the execution began.
        rung: u64,
        stopped: bool,
    }

    loom::lazy_static! {
        static ref TIME: Time = Time {
            now: AtomicU64::new(0),
            timers: std::sync::Mutex::new(Vec::new()),
            bell: loom::sync::Mutex::new(Bell::default()),
            bell_cv: loom::sync::Condvar::new(),
        };
    }

    /// The model's time, in nanoseconds since the execution began.
    pub(crate) fn now() -> u64 {
        TIME.now.load(Ordering::SeqCst)
    }

    /// Moves the model's time forward by `by` and times out every sleeper whose deadline is now
    /// past (unless a notification reached it first). Returns how many it timed out.
    pub fn advance(by: Duration) -> usize {
        let by = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        let now = TIME.now.fetch_add(by, Ordering::SeqCst).saturating_add(by);
        fire(now)
    }

    /// Times out the sleepers whose deadline is at or before `now`.
    fn fire(now: u64) -> usize {
        let due: Vec<Arc<Sleeper>> = {
            let mut timers = lock_timers();
            let (due, pending): (Vec<_>, Vec<_>) = timers.drain(..).partition(|(d, _)| *d <= now);
            *timers = pending;
            due.into_iter().map(|(_, s)| s).collect()
        };
        // Claims take loom locks: never with the (non-loom) timer list locked.
        due.iter().filter(|s| s.claim(Wake::TimedOut)).count()
    }

    fn lock_timers() -> std::sync::MutexGuard<'static, Vec<(u64, Arc<Sleeper>)>> {
        TIME.timers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers `sleeper` to time out at `deadline`; returns false (and registers nothing) if
    /// the deadline has already passed. Reads the time with a read-modify-write, so that it sees
    /// every earlier [`advance`]; no loom operation separates the read from the registration, so an
    /// `advance` either comes first (and the deadline is seen as past) or finds the sleeper.
    pub(super) fn register(deadline: Instant, sleeper: &Arc<Sleeper>) -> bool {
        let time = &*TIME;
        let now = time.now.fetch_add(0, Ordering::SeqCst);
        if deadline.0 <= now {
            return false;
        }
        lock_timers().push((deadline.0, Arc::clone(sleeper)));
        let mut bell = time.bell.lock().unwrap_or_else(|e| e.into_inner());
        bell.rung += 1;
        time.bell_cv.notify_all();
        true
    }

    /// A model thread that lets time pass: each time a thread starts a timed wait, it may (at any
    /// point loom chooses) move the time to the earliest deadline a sleeper still waits for,
    /// timing that sleeper out. Time moves only while someone sleeps on a deadline, as in a
    /// discrete-event simulation; at most `max_jumps` times, so that an idle worker's periodic
    /// timer cannot make an execution endless; and only to deadlines at most `horizon` ahead, so
    /// that a far timer (the job book's sweep, a minute away) cannot stand in for a wake-up the
    /// protocol owes.
    #[derive(Debug)]
    pub struct Timer {
        thread: loom::thread::JoinHandle<usize>,
    }

    impl Timer {
        /// Starts the timer thread (one of loom's threads: count it in a model's budget).
        pub fn spawn(max_jumps: usize, horizon: Duration) -> Timer {
            let horizon = u64::try_from(horizon.as_nanos()).unwrap_or(u64::MAX);
            Timer {
                thread: loom::thread::spawn(move || run_timer(max_jumps, horizon)),
            }
        }

        /// Stops the timer thread; returns how many times it moved the time.
        pub fn stop(self) -> usize {
            {
                let mut bell = TIME.bell.lock().unwrap_or_else(|e| e.into_inner());
                bell.stopped = true;
                TIME.bell_cv.notify_all();
            }
            self.thread.join().expect("the timer thread does not panic")
        }
    }

    fn run_timer(max_jumps: usize, horizon: u64) -> usize {
        let mut jumps = 0;
        while jumps < max_jumps {
            // The bell is read before the timers are scanned: a timed wait that starts after the
            // scan rings after this read, and the wait below sees it.
            let seen = {
                let bell = TIME.bell.lock().unwrap_or_else(|e| e.into_inner());
                if bell.stopped {
                    break;
                }
                bell.rung
            };
            if let Some(deadline) = earliest_pending(horizon) {
                let now = TIME.now.fetch_max(deadline, Ordering::SeqCst).max(deadline);
                fire(now);
                jumps += 1;
                continue;
            }
            let mut bell = TIME.bell.lock().unwrap_or_else(|e| e.into_inner());
            while !bell.stopped && bell.rung == seen {
                bell = TIME.bell_cv.wait(bell).unwrap_or_else(|e| e.into_inner());
            }
        }
        jumps
    }

    /// The earliest deadline, at most `horizon` from now, of a sleeper that still waits.
    fn earliest_pending(horizon: u64) -> Option<u64> {
        let armed: Vec<(u64, Arc<Sleeper>)> = lock_timers().clone();
        let limit = TIME
            .now
            .fetch_add(0, Ordering::SeqCst)
            .saturating_add(horizon);
        armed
            .iter()
            .filter(|&&(d, _)| d <= limit)
            .filter(|(_, s)| s.is_waiting())
            .map(|&(d, _)| d)
            .min()
    }

    /// A point on the model's time line (what `std::time::Instant` is in a model).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
    pub struct Instant(u64);

    impl Instant {
        /// The model's current time.
        pub fn now() -> Instant {
            Instant(now())
        }

        /// `self + by`, if representable.
        pub fn checked_add(self, by: Duration) -> Option<Instant> {
            let by = u64::try_from(by.as_nanos()).ok()?;
            self.0.checked_add(by).map(Instant)
        }
    }

    /// The scheduler's [`Clock`] in a model: the model's time, moved only by [`advance`] and
    /// [`Timer`].
    #[derive(Clone, Copy, Default)]
    pub struct ModelClock;

    impl fmt::Debug for ModelClock {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("ModelClock").field("now", &now()).finish()
        }
    }

    impl Clock for ModelClock {
        fn now(&self) -> Nanos {
            Nanos(now())
        }
    }
}

/// The loom adapters (see the module documentation).
#[cfg(loom)]
mod modelled {
    use std::collections::VecDeque;
    use std::fmt;
    use std::ops::{Deref, DerefMut};
    use std::sync::Arc;

    use super::model::{self, Instant};

    /// A mutex with parking_lot's surface over loom's (whose poisoning is ignored, as parking_lot
    /// has none).
    pub(crate) struct Mutex<T> {
        inner: loom::sync::Mutex<T>,
    }

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Mutex<T> {
            Mutex {
                inner: loom::sync::Mutex::new(value),
            }
        }

        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            MutexGuard {
                mutex: self,
                guard: Some(self.raw_lock()),
            }
        }

        pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
            let guard = match self.inner.try_lock() {
                Ok(g) => g,
                Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => return None,
            };
            Some(MutexGuard {
                mutex: self,
                guard: Some(guard),
            })
        }

        pub(crate) fn get_mut(&mut self) -> &mut T {
            self.inner.get_mut().unwrap_or_else(|e| e.into_inner())
        }

        fn raw_lock(&self) -> loom::sync::MutexGuard<'_, T> {
            self.inner.lock().unwrap_or_else(|e| e.into_inner())
        }
    }

    impl<T> fmt::Debug for Mutex<T> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("Mutex").finish_non_exhaustive()
        }
    }

    /// A held [`Mutex`]; it can be released for a while ([`MutexGuard::unlocked`], a condvar
    /// wait), which is why it keeps its mutex beside loom's guard.
    pub(crate) struct MutexGuard<'a, T> {
        mutex: &'a Mutex<T>,
        /// `None` only while released.
        guard: Option<loom::sync::MutexGuard<'a, T>>,
    }

    impl<T> MutexGuard<'_, T> {
        /// Runs `f` with the mutex released, then takes it again.
        pub(crate) fn unlocked<F, U>(s: &mut Self, f: F) -> U
        where
            F: FnOnce() -> U,
        {
            s.guard = None;
            let out = f();
            s.guard = Some(s.mutex.raw_lock());
            out
        }
    }

    impl<T> Deref for MutexGuard<'_, T> {
        type Target = T;
        fn deref(&self) -> &T {
            self.guard.as_deref().expect("the guard holds its mutex")
        }
    }

    impl<T> DerefMut for MutexGuard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            self.guard
                .as_deref_mut()
                .expect("the guard holds its mutex")
        }
    }

    /// How a sleeper's wait ended, if it has.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(crate) enum Wake {
        Waiting,
        Notified,
        TimedOut,
    }

    /// One waiting thread: its state behind a loom mutex, and a loom condvar it sleeps on.
    pub(crate) struct Sleeper {
        state: loom::sync::Mutex<Wake>,
        cv: loom::sync::Condvar,
    }

    impl Sleeper {
        fn new() -> Arc<Sleeper> {
            Arc::new(Sleeper {
                state: loom::sync::Mutex::new(Wake::Waiting),
                cv: loom::sync::Condvar::new(),
            })
        }

        /// Whether the wait has not ended yet.
        pub(crate) fn is_waiting(&self) -> bool {
            *self.state.lock().unwrap_or_else(|e| e.into_inner()) == Wake::Waiting
        }

        /// Ends the wait with `how` if it has not ended yet; returns whether this call ended it.
        pub(crate) fn claim(&self, how: Wake) -> bool {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            if *state != Wake::Waiting {
                return false;
            }
            *state = how;
            self.cv.notify_one();
            true
        }

        /// Blocks until the wait has ended; returns how.
        fn sleep(&self) -> Wake {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            while *state == Wake::Waiting {
                state = self.cv.wait(state).unwrap_or_else(|e| e.into_inner());
            }
            *state
        }
    }

    /// Whether a timed wait ended by its deadline.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(crate) struct WaitTimeoutResult(bool);

    impl WaitTimeoutResult {
        pub(crate) fn timed_out(self) -> bool {
            self.0
        }
    }

    /// A condition variable with parking_lot's guarantees (see the module documentation).
    pub(crate) struct Condvar {
        /// Sleepers in arrival order; ones that timed out are skipped (and dropped) by notifiers.
        queue: std::sync::Mutex<VecDeque<Arc<Sleeper>>>,
    }

    impl Condvar {
        pub(crate) fn new() -> Condvar {
            Condvar {
                queue: std::sync::Mutex::new(VecDeque::new()),
            }
        }

        pub(crate) fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
            let sleeper = self.enqueue();
            Self::sleep(guard, &sleeper);
        }

        pub(crate) fn wait_until<T>(
            &self,
            guard: &mut MutexGuard<'_, T>,
            deadline: Instant,
        ) -> WaitTimeoutResult {
            let sleeper = self.enqueue();
            let pending = model::register(deadline, &sleeper);
            if !pending {
                // The deadline has passed: the mutex is released and taken again (as parking_lot
                // does), and a notifier that gets in between still wins.
                let out = MutexGuard::unlocked(guard, || sleeper.claim(Wake::TimedOut));
                let how = if out { Wake::TimedOut } else { sleeper.sleep() };
                return WaitTimeoutResult(how == Wake::TimedOut);
            }
            WaitTimeoutResult(Self::sleep(guard, &sleeper) == Wake::TimedOut)
        }

        pub(crate) fn notify_one(&self) -> bool {
            while let Some(sleeper) = self.pop() {
                if sleeper.claim(Wake::Notified) {
                    return true;
                }
            }
            false
        }

        pub(crate) fn notify_all(&self) -> usize {
            let all: Vec<Arc<Sleeper>> = self.lock_queue().drain(..).collect();
            all.iter().filter(|s| s.claim(Wake::Notified)).count()
        }

        fn enqueue(&self) -> Arc<Sleeper> {
            let sleeper = Sleeper::new();
            self.lock_queue().push_back(Arc::clone(&sleeper));
            sleeper
        }

        fn pop(&self) -> Option<Arc<Sleeper>> {
            self.lock_queue().pop_front()
        }

        /// The queue's lock is never held across a loom operation (loom runs its threads on one OS
        /// thread, so a switch with it held would block that thread).
        fn lock_queue(&self) -> std::sync::MutexGuard<'_, VecDeque<Arc<Sleeper>>> {
            self.queue.lock().unwrap_or_else(|e| e.into_inner())
        }

        fn sleep<T>(guard: &mut MutexGuard<'_, T>, sleeper: &Sleeper) -> Wake {
            MutexGuard::unlocked(guard, || sleeper.sleep())
        }
    }

    impl fmt::Debug for Condvar {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("Condvar").finish_non_exhaustive()
        }
    }
}
