//! Loom models of the scheduler's lock and wake-up protocol: submit, take, complete, priority
//! change, policy switch, shutdown, a dropped token and policy timers, interleaved every way loom
//! finds. The small models are explored without a preemption bound (every interleaving); the
//! others with at most 3 preemptions per execution (2 for the four-thread models with a timer),
//! or `LOOM_MAX_PREEMPTIONS`. `scripts/test.sh` runs them as
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS=true \
//!     cargo test -p iosets-runtime-loom --release --test loom_protocol --target-dir target/loom
//! ```
//!
//! (its own target directory, as every dependency is built again under `--cfg loom`, and its own
//! crate, so that the runtime's benches' and property tests' dependencies are not; debug
//! assertions on, for the scheduler's own check that no more wakes are pending than sleepers).
//!
//! What each model shows:
//! - **No lost wake-up.** Threads block in [`Scheduler::next`] (and the main thread in
//!   [`Scheduler::wait_idle`] or a join) *before* any shutdown: a wake-up lost with work queued
//!   leaves them asleep, which loom reports as a deadlock. (Shutting down first would wake the
//!   sleeper and hide the loss.) The model's time moves only through a model timer thread, and
//!   only as far as its horizon, so no far timer can rescue a lost wake-up (see `src/sync.rs`).
//! - **No double completion.** The listener's ledger holds every request exactly once with its
//!   outcome, the payloads come back exactly once, and [`Scheduler::check_balance`] holds.
//!
//! Each model keeps to 2–4 threads and 1–3 requests: loom's cost grows exponentially with both.
//! Each one fails if the wake-up it is named after is removed from the scheduler (checked by
//! hand, one mutation at a time).
#![cfg(loom)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use iosets_runtime::model::{self, ModelClock};
use iosets_runtime::{CompletionEvent, Counted, Next, Scheduler, Work};
use iosets_types::{FileId, JobId, Op, Outcome, Priority, Request};
use loom::thread::{self, JoinHandle};

/// Bytes of every request.
const LEN: u64 = 4096;

/// Runs `f` under loom with at most `LOOM_MAX_PREEMPTIONS` preemptions per execution (3 when
/// unset), and prints how many executions loom explored.
fn check<F>(f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    check_bounded(3, f);
}

/// As [`check`], with at most `preemptions` when `LOOM_MAX_PREEMPTIONS` is unset (the models with
/// a timer thread have four threads: a bound of 3 costs them minutes instead of seconds).
fn check_bounded<F>(preemptions: usize, f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(preemptions);
    }
    run(builder, f);
}

/// Runs `f` under loom with no preemption bound: every interleaving (for the small models).
fn check_every_interleaving<F>(f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = None;
    run(builder, f);
}

fn run<F>(builder: loom::model::Builder, f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    let executions = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&executions);
    let started = std::time::Instant::now();
    builder.check(move || {
        counted.fetch_add(1, Ordering::Relaxed);
        f();
    });
    eprintln!(
        "{} executions (preemption bound {:?}) in {:.1} s",
        executions.load(Ordering::Relaxed),
        builder.preemption_bound,
        started.elapsed().as_secs_f64()
    );
}

/// Every completion event, in the order the listener saw them. The listener runs on the
/// completing thread outside the scheduler's lock; a plain mutex suffices to record (it is never
/// held across a loom operation).
#[derive(Clone, Default)]
struct Ledger(Arc<StdMutex<Vec<CompletionEvent>>>);

impl Ledger {
    fn attach(&self, sched: &Scheduler<u32>) {
        let events = Arc::clone(&self.0);
        sched.set_listener(move |e: &CompletionEvent| events.lock().unwrap().push(*e));
    }

    /// (request id, outcome) of every event, by request id.
    fn by_request(&self) -> Vec<(u64, Outcome)> {
        let mut out: Vec<(u64, Outcome)> = self
            .0
            .lock()
            .unwrap()
            .iter()
            .map(|e| (e.id.0, e.outcome))
            .collect();
        out.sort_by_key(|&(id, _)| id);
        out
    }
}

/// A scheduler around `policy` (with `tunables`) on the model's clock, and its ledger.
fn scheduler(policy: &str, tunables: &[(&str, &str)]) -> (Scheduler<u32>, Ledger) {
    let tunables: Vec<(String, String)> = tunables
        .iter()
        .map(|&(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let policy = Counted::build(policy, &tunables).expect("registered policy");
    let sched = Scheduler::with_clock(policy, Arc::new(ModelClock));
    let ledger = Ledger::default();
    ledger.attach(&sched);
    (sched, ledger)
}

/// A write of [`LEN`] bytes by `job`, carrying the IO-SETS hint `priority` if any (jobs with the
/// same hint share a set: one of them at a time).
fn request(job: u64, priority: Option<f64>) -> Request {
    request_at(job, 0, priority)
}

/// As [`request`], at slot `slot` of the job's file (slots are not contiguous: never merged).
fn request_at(job: u64, slot: u64, priority: Option<f64>) -> Request {
    Request::builder(JobId(job), Op::Write)
        .file(FileId(job))
        .range(2 * slot * LEN, LEN)
        .priority(priority.and_then(Priority::new))
        .build()
}

fn done() -> Outcome {
    Outcome::Done { bytes: LEN }
}

/// Serves until shutdown; returns the payloads of the batches served, in order.
fn serve(sched: &Scheduler<u32>) -> Vec<u32> {
    let mut served = Vec::new();
    while let Some(work) = sched.next() {
        served.extend(work.complete(done()));
    }
    served
}

fn spawn_serve(sched: &Scheduler<u32>) -> JoinHandle<Vec<u32>> {
    let sched = sched.clone();
    thread::spawn(move || serve(&sched))
}

/// Takes exactly one batch (blocking) and completes it.
fn spawn_take_one(sched: &Scheduler<u32>) -> JoinHandle<Vec<u32>> {
    let sched = sched.clone();
    thread::spawn(move || {
        let work = sched.next().expect("a batch before shutdown");
        work.complete(done())
    })
}

fn join<T: 'static>(h: JoinHandle<T>) -> T {
    h.join().expect("a model thread panicked")
}

fn sorted(mut v: Vec<u32>) -> Vec<u32> {
    v.sort_unstable();
    v
}

/// The ledger holds requests 1..=n, each once, each with `outcome`.
fn assert_each_once(ledger: &Ledger, n: u64, outcome: Outcome) {
    let expected: Vec<(u64, Outcome)> = (1..=n).map(|id| (id, outcome)).collect();
    assert_eq!(
        ledger.by_request(),
        expected,
        "every request completed once"
    );
}

/// Requests 1..=n were each completed once, done, and the scheduler's books balance.
fn assert_all_done(sched: &Scheduler<u32>, ledger: &Ledger, n: u64) {
    assert_each_once(ledger, n, done());
    sched.check_balance().unwrap();
}

/// `noop` with one data batch in service at a time.
fn one_slot_noop() -> (Scheduler<u32>, Ledger) {
    let (sched, ledger) = scheduler("noop", &[]);
    sched
        .set_inservice_limit(iosets_runtime::InServiceLimit::Fixed(1))
        .unwrap();
    (sched, ledger)
}

/// Switches `sched` to `noop`.
fn switch_to_noop(sched: &Scheduler<u32>) {
    sched
        .switch_policy(Counted::build("noop", &[]).unwrap())
        .unwrap();
}

/// After one policy switch: requests 1 and 2 completed once each, the books balance, and the
/// retired instance is gone with no completion refused.
fn assert_switched_once(sched: &Scheduler<u32>, ledger: &Ledger) {
    assert_all_done(sched, ledger, 2);
    let stats = sched.stats();
    assert_eq!(
        (
            stats.switches,
            stats.rejected_completions,
            stats.retired_policies
        ),
        (1, 0, 0)
    );
    assert_eq!(stats.counters.completed, 2, "each batch completed once");
}

/// (1) Two producers submit, one worker takes and completes.
#[test]
fn two_producers_one_worker_complete_each_request_once() {
    check(|| {
        let (sched, ledger) = scheduler("noop", &[]);
        let producers: Vec<_> = [1u32, 2]
            .into_iter()
            .map(|p| {
                let sched = sched.clone();
                thread::spawn(move || {
                    sched.submit(request(u64::from(p), None), p).unwrap();
                })
            })
            .collect();
        let worker = spawn_serve(&sched);
        producers.into_iter().for_each(join);
        // A wake-up lost with a request queued: the worker and this thread both sleep (deadlock).
        sched.wait_idle();
        sched.shutdown();
        assert_eq!(sorted(join(worker)), [1, 2]);
        assert_all_done(&sched, &ledger, 2);
        let stats = sched.stats();
        assert_eq!((stats.submitted, stats.total_ops()), (2, 2));
    });
}

/// (2a) Two jobs of one IO-SETS set: the second can go only once the first completes. Two
/// workers take one batch each, so only the first one's completion can wake the one blocked
/// behind it; the second request is submitted concurrently.
#[test]
fn a_completion_wakes_the_worker_blocked_behind_it() {
    check(|| {
        let (sched, ledger) = scheduler("iosets", &[]);
        sched.submit(request(1, Some(0.5)), 1).unwrap();
        let producer = {
            let sched = sched.clone();
            thread::spawn(move || {
                sched.submit(request(2, Some(0.5)), 2).unwrap();
            })
        };
        let workers = [spawn_take_one(&sched), spawn_take_one(&sched)];
        join(producer);
        let served: Vec<u32> = workers.into_iter().flat_map(join).collect();
        assert_eq!(served.len(), 2);
        assert_eq!(sorted(served), [1, 2]);
        assert_all_done(&sched, &ledger, 2);
    });
}

/// Submits two requests of one IO-SETS set and takes the first: the second is blocked behind it
/// until it completes, and a worker is started to take the second.
fn one_in_service_one_blocked() -> (Scheduler<u32>, Ledger, Work<u32>, JoinHandle<Vec<u32>>) {
    let (sched, ledger) = scheduler("iosets", &[]);
    sched.submit(request(1, Some(0.5)), 1).unwrap();
    sched.submit(request(2, Some(0.5)), 2).unwrap();
    let first = sched.try_next().work().expect("job 1 goes at once");
    assert_eq!(first.payloads(), [1]);
    let blocked = spawn_take_one(&sched);
    (sched, ledger, first, blocked)
}

/// (2b) A priority change moves the blocked job to another set: the worker blocked behind the
/// first job (still in service) is woken by the change itself and serves it.
#[test]
fn a_priority_change_wakes_the_worker_blocked_behind_another_job() {
    check_every_interleaving(|| {
        let (sched, ledger, first, blocked) = one_in_service_one_blocked();
        let control = {
            let sched = sched.clone();
            thread::spawn(move || {
                assert!(sched.set_priority(JobId(2), Priority::new(0.01)));
            })
        };
        // Job 1 stays in service until job 2 is served: only the change can release job 2.
        assert_eq!(join(blocked), [2]);
        join(control);
        first.complete(done());
        assert_all_done(&sched, &ledger, 2);
        let job2 = sched.job_stats(JobId(2)).expect("job 2 known");
        assert_eq!(job2.priority.map(|p| p.value), Priority::new(0.01));
    });
}

/// (2c) A policy switch (iosets to noop) while a producer submits and a worker serves: queued
/// requests move to the new policy, a batch in service completes against the old instance, each
/// request exactly once, and the old instance is dropped once its last batch completes.
#[test]
fn a_policy_switch_moves_queued_requests_and_completes_in_service_ones_once() {
    check(|| {
        let (sched, ledger) = scheduler("iosets", &[]);
        sched.submit(request(1, Some(0.5)), 1).unwrap();
        let producer = {
            let sched = sched.clone();
            thread::spawn(move || {
                sched.submit(request(2, Some(0.5)), 2).unwrap();
            })
        };
        let worker = spawn_serve(&sched);
        let control = {
            let sched = sched.clone();
            thread::spawn(move || {
                switch_to_noop(&sched);
            })
        };
        join(producer);
        join(control);
        sched.wait_idle();
        sched.shutdown();
        assert_eq!(sorted(join(worker)), [1, 2]);
        assert_switched_once(&sched, &ledger);
        assert_eq!(sched.stats().policy, "noop");
    });
}

/// (2d) A policy switch while one job's batch is in service and another's is blocked behind it:
/// the blocked request moves to the new policy (noop) and its worker is woken by the switch; the
/// batch in service then completes against the retired instance, once.
#[test]
fn a_policy_switch_wakes_the_worker_blocked_in_the_old_policy() {
    check_every_interleaving(|| {
        let (sched, ledger, first, blocked) = one_in_service_one_blocked();
        switch_to_noop(&sched);
        assert_eq!(join(blocked), [2], "the switch releases job 2");
        assert_eq!(sched.stats().retired_policies, 1);
        first.complete(done());
        assert_switched_once(&sched, &ledger);
    });
}

/// (3) Two workers blocked in `next` and a shutdown: both return, after the one queued request
/// is served.
#[test]
fn shutdown_releases_every_blocked_worker() {
    check(|| {
        let (sched, ledger) = scheduler("noop", &[]);
        let workers = [spawn_serve(&sched), spawn_serve(&sched)];
        sched.submit(request(1, None), 1).unwrap();
        sched.shutdown();
        let served: Vec<u32> = workers.into_iter().flat_map(join).collect();
        assert_eq!(served, [1]);
        assert_each_once(&ledger, 1, done());
        assert!(sched.next().is_none());
        sched.check_balance().unwrap();
    });
}

/// (3b) Shutdown while a request is still queued behind a batch in service: the workers that
/// went back to sleep (nothing could go yet) return once the last queued request is handed out.
#[test]
fn shutdown_with_blocked_work_releases_every_worker_once_the_queue_drains() {
    check(|| {
        let (sched, ledger) = scheduler("iosets", &[]);
        sched.submit(request(1, Some(0.5)), 1).unwrap();
        sched.submit(request(2, Some(0.5)), 2).unwrap();
        let first = sched.try_next().work().expect("job 1 goes at once");
        let workers = [spawn_serve(&sched), spawn_serve(&sched)];
        sched.shutdown();
        first.complete(done());
        let served: Vec<u32> = workers.into_iter().flat_map(join).collect();
        assert_eq!(served, [2]);
        assert_all_done(&sched, &ledger, 2);
    });
}

/// (3c) A worker that takes a batch while more is queued passes the wake-up on: one completion
/// releases two requests of the next job, and two workers must both be woken. Each worker holds
/// its batch (completes nothing) until both are taken, so no later completion can stand in for
/// the passed-on wake-up.
#[test]
fn a_worker_that_takes_a_batch_with_more_queued_passes_the_wake_on() {
    check_every_interleaving(|| {
        let (sched, ledger) = scheduler("iosets", &[]);
        sched.submit(request(1, Some(0.5)), 1).unwrap();
        sched.submit(request_at(2, 0, Some(0.5)), 2).unwrap();
        sched.submit(request_at(2, 1, Some(0.5)), 3).unwrap();
        let first = sched.try_next().work().expect("job 1 goes at once");
        let takers: Vec<JoinHandle<Work<u32>>> = (0..2)
            .map(|_| {
                let sched = sched.clone();
                thread::spawn(move || sched.next().expect("a batch before shutdown"))
            })
            .collect();
        first.complete(done());
        let taken: Vec<Work<u32>> = takers.into_iter().map(join).collect();
        let served: Vec<u32> = taken.into_iter().flat_map(|w| w.complete(done())).collect();
        assert_eq!(sorted(served), [2, 3]);
        assert_all_done(&sched, &ledger, 3);
    });
}

/// (4) A completion token dropped unanswered on another thread fails its batch as abandoned,
/// exactly once, and (IO-SETS) wakes the worker blocked behind it.
#[test]
fn a_token_dropped_on_another_thread_is_abandoned_once() {
    check_every_interleaving(|| {
        let (sched, ledger, first, blocked) = one_in_service_one_blocked();
        let (payloads, token) = first.into_parts();
        assert_eq!(payloads, [1]);
        let dropper = thread::spawn(move || drop(token));
        assert_eq!(join(blocked), [2]);
        join(dropper);
        assert_eq!(
            ledger.by_request(),
            [(1, Outcome::Abandoned), (2, done())],
            "the dropped batch abandoned once, the other done once"
        );
        sched.check_balance().unwrap();
        let stats = sched.stats();
        assert_eq!((stats.total_ops(), stats.total_failed()), (2, 1));
        assert_eq!(stats.counters.failed, 1);
    });
}

/// (5) Timers: with `hold_idle_ms`, the first job of a set lingers after its completion and the
/// policy answers `NotBefore(end of linger)`; the worker sleeps on that timer. A timer thread
/// moves the time to a sleeper's deadline at any point while it sleeps, before or after a
/// notification; the second request is served once, after the first.
#[test]
fn a_policy_timer_that_fires_at_any_point_is_not_lost() {
    check_bounded(2, || {
        let (sched, ledger) = scheduler("iosets", &[("hold_idle_ms", "1")]);
        let timer = model::Timer::spawn(3, Duration::from_millis(10));
        sched.submit(request(1, Some(0.5)), 1).unwrap();
        let worker = spawn_serve(&sched);
        sched.submit(request(2, Some(0.5)), 2).unwrap();
        sched.wait_idle();
        let jumps = timer.stop();
        assert!(
            (1..=3).contains(&jumps),
            "the linger needs time to pass: {jumps} jumps"
        );
        sched.shutdown();
        assert_eq!(join(worker), [1, 2], "one job at a time, in order");
        assert_all_done(&sched, &ledger, 2);
    });
}

/// (6) Wake counts stay exact when a timed wait ends as a notification is sent: after serving a
/// request, the worker sleeps until the job book's next sweep (a timed wait); the timer may fire it
/// at any point, in particular just before a policy switch notifies every sleeper. A sleeper that
/// timed out must not be counted as woken: if it were, the count of pending wakes would stay one
/// too high and the next submit would not wake the worker (a lost wake-up, here a deadlock since
/// the timer moves time once only).
#[test]
fn a_timed_out_sleeper_is_not_counted_as_woken() {
    check_bounded(2, || {
        let (sched, ledger) = scheduler("noop", &[]);
        // The sweep is a minute away: the timer may move time that far, once.
        let timer = model::Timer::spawn(1, Duration::from_secs(60));
        let worker = spawn_serve(&sched);
        sched.submit(request(1, None), 1).unwrap();
        sched.wait_idle();
        switch_to_noop(&sched);
        sched.submit(request(2, None), 2).unwrap();
        sched.wait_idle();
        timer.stop();
        sched.shutdown();
        assert_eq!(join(worker), [1, 2]);
        assert_all_done(&sched, &ledger, 2);
    });
}

/// (7) A worker that gives up on its own deadline (`next_timeout`) while it watches the policy's
/// timer hands the timer on: the other worker, asleep without a deadline of its own, is woken to
/// watch it. The first job lingers (`hold_idle_ms`) after its completion, so the second can go
/// only once the linger ends; the timer moves time only to deadlines within 10 ms, never to the
/// book's sweep a minute away, so nothing else would wake the second worker.
#[test]
fn a_worker_leaving_on_its_deadline_hands_the_policy_timer_on() {
    check_bounded(2, || {
        let (sched, ledger) = scheduler("iosets", &[("hold_idle_ms", "1")]);
        sched.submit(request(1, Some(0.5)), 1).unwrap();
        sched.submit(request(2, Some(0.5)), 2).unwrap();
        let first = sched.try_next().work().expect("job 1 goes at once");
        assert_eq!(first.complete(done()), [1]);
        let timer = model::Timer::spawn(3, Duration::from_millis(10));
        let impatient = {
            let sched = sched.clone();
            thread::spawn(
                move || match sched.next_timeout(Duration::from_micros(500)) {
                    Next::Work(work) => work.complete(done()),
                    Next::TimedOut => Vec::new(),
                    Next::Shutdown => panic!("not shut down yet"),
                },
            )
        };
        let patient = {
            let sched = sched.clone();
            thread::spawn(move || sched.next().map_or_else(Vec::new, |w| w.complete(done())))
        };
        let early = join(impatient);
        if early.is_empty() {
            // Only the patient worker can serve job 2, and only once woken for the timer.
            assert_eq!(join(patient), [2]);
        } else {
            assert_eq!(early, [2]);
            sched.shutdown();
            assert_eq!(join(patient), Vec::<u32>::new());
        }
        timer.stop();
        assert_all_done(&sched, &ledger, 2);
    });
}

/// (in service a) The limit on data in service: with one slot, the second write waits behind the
/// first even with a worker free; the first one's completion, on another thread, must wake the
/// worker blocked behind the limit (the policy is not asked while the limit is reached).
#[test]
fn a_completion_that_frees_a_data_slot_wakes_the_worker_blocked_behind_the_limit() {
    check_every_interleaving(|| {
        let (sched, ledger) = one_slot_noop();
        sched.submit(request_at(1, 0, None), 1).unwrap();
        sched.submit(request_at(1, 1, None), 2).unwrap();
        let first = sched
            .try_next()
            .work()
            .expect("the first write goes at once");
        let blocked = spawn_take_one(&sched);
        let completer = thread::spawn(move || first.complete(done()));
        assert_eq!(join(completer), [1]);
        assert_eq!(join(blocked), [2]);
        assert_all_done(&sched, &ledger, 2);
    });
}

/// (in service b) A metadata request arriving while the data slot is taken makes a worker ask
/// the policy, which parks the write ahead of it; the completion of the write in service must
/// wake a worker for the parked batch, and then the metadata request goes.
#[test]
fn a_parked_batch_is_handed_out_when_the_slot_frees() {
    check(|| {
        let (sched, ledger) = one_slot_noop();
        sched.submit(request_at(1, 0, None), 1).unwrap();
        let first = sched
            .try_next()
            .work()
            .expect("the first write goes at once");
        sched.submit(request_at(1, 1, None), 2).unwrap();
        let producer = {
            let sched = sched.clone();
            thread::spawn(move || {
                sched
                    .submit(Request::builder(JobId(1), Op::Other).build(), 3)
                    .unwrap();
            })
        };
        let worker = spawn_serve(&sched);
        join(producer);
        first.complete(done());
        sched.wait_idle();
        sched.shutdown();
        assert_eq!(join(worker), [2, 3], "noop's order is kept");
        assert_eq!(ledger.by_request().len(), 3);
        sched.check_balance().unwrap();
    });
}
