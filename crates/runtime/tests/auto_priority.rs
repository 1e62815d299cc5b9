//! Automatic priorities fed as the server feeds them (issue 14, item 3): a discrete-event run of
//! jobs through a real [`Scheduler`] with a manual clock and a serial emulated device. Each job's
//! processes write (or read) 1 MiB requests back to back, each process with one request in
//! flight, so a phase is many overlapping `[arrival, completion]` requests from 8 streams, then a
//! gap. The book sees exactly what the server's completion path gives it.
//!
//! What is checked: how many phase starts a job needs before its Set-10 set is right, at seed
//! 004's time scales 1/16 to 1/64 (never a wrong set before); read and write phases of one
//! iteration give the iteration's period; short gaps inside a phase; a change of behaviour both
//! ways; `period_error`.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use iosets_policy::set10::SetMapping;
use iosets_runtime::book::{JobBook, Move};
use iosets_runtime::{BookConfig, Clock, Counted, PrioritySource, Scheduler, Work};
use iosets_types::{Batch, FileId, JobId, Nanos, Op, Outcome, Request};

/// A clock the simulation moves.
#[derive(Default)]
struct ManualClock(AtomicU64);

impl Clock for ManualClock {
    fn now(&self) -> Nanos {
        Nanos(self.0.load(Ordering::SeqCst))
    }
}

const MIB: u64 = 1 << 20;

/// One step of a job's script.
#[derive(Clone, Debug)]
enum Step {
    /// No I/O for this long.
    Compute(Nanos),
    /// An I/O phase: stream `i` starts `offsets[i]` after the phase start and moves `mib` MiB in
    /// 1 MiB requests of `op`; with `pause = (k, d)`, every stream waits `d` after its `k`-th
    /// request (a barrier inside the phase). The phase ends when every stream is done.
    Io {
        op: Op,
        mib: u64,
        offsets: Vec<Nanos>,
        pause: Option<(u64, Nanos)>,
    },
}

impl Step {
    fn io(op: Op, streams: usize, mib: u64) -> Step {
        Step::Io {
            op,
            mib,
            offsets: vec![Nanos::ZERO; streams],
            pause: None,
        }
    }
}

/// A job: its steps, run once from `start`.
#[derive(Clone, Debug)]
struct Script {
    job: u64,
    start: Nanos,
    steps: Vec<Step>,
}

impl Script {
    /// `iterations` of compute then one write phase of 8 streams × `mib` MiB.
    fn periodic(job: u64, compute_s: f64, mib: u64, iterations: usize) -> Script {
        let mut steps = Vec::new();
        for _ in 0..iterations {
            steps.push(Step::Compute(Nanos::from_secs_f64(compute_s)));
            steps.push(Step::io(Op::Write, 8, mib));
        }
        Script {
            job,
            start: Nanos::ZERO,
            steps,
        }
    }
}

/// What a run saw of one job.
#[derive(Debug, Default, Clone)]
struct Seen {
    /// When each I/O phase started (the step began).
    phase_starts: Vec<Nanos>,
    /// When each I/O phase ended (its last request completed).
    phase_ends: Vec<Nanos>,
    /// Every change of the job's automatic set: (time, set).
    sets: Vec<(Nanos, i32)>,
    /// Every automatic priority value seen, with its time.
    priorities: Vec<(Nanos, f64)>,
}

impl Seen {
    /// The 1-based phase during which `t` falls (0 before the first phase start).
    fn phase_at(&self, t: Nanos) -> usize {
        self.phase_starts.partition_point(|s| *s <= t)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// The job's next step begins.
    Step(usize),
    /// A stream's next request arrives.
    Arrive(usize, usize),
    /// The request in service completes.
    Done,
    /// Ask the scheduler again (it held requests back).
    Poll,
}

struct JobState {
    step: usize,
    /// Requests left per stream in the current I/O phase.
    left: Vec<u64>,
    /// Requests done per stream in the current I/O phase.
    done: Vec<u64>,
    streams_busy: usize,
    next_offset: u64,
}

/// [`run`] of `script` alone on a 110 MiB/s device under `iosets` with automatic priorities
/// ([`auto`]), until `until`.
fn run_alone(script: &Script, until: Nanos) -> (HashMap<u64, Seen>, Scheduler<u64>) {
    run(std::slice::from_ref(script), 110.0, "iosets", auto(), until)
}

/// Runs `scripts` through a scheduler with `policy` and `book` on a serial device of `mib_s`
/// MiB/s until every script is done or `until`. Returns what each job saw, by job id.
fn run(
    scripts: &[Script],
    mib_s: f64,
    policy: &str,
    book: BookConfig,
    until: Nanos,
) -> (HashMap<u64, Seen>, Scheduler<u64>) {
    let clock = Arc::new(ManualClock::default());
    let sched: Scheduler<u64> = Scheduler::with_book(
        Counted::build(policy, &[]).expect("a registered policy"),
        clock.clone(),
        book,
    );
    let service = |bytes: u64| Nanos::from_secs_f64(bytes as f64 / (mib_s * MIB as f64));
    let think = Nanos::from_micros(50);
    let mut heap: BinaryHeap<Reverse<(Nanos, u64, Ev)>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut push = |heap: &mut BinaryHeap<_>, t: Nanos, ev: Ev| {
        seq += 1;
        heap.push(Reverse((t, seq, ev)));
    };
    let mut states: Vec<JobState> = scripts
        .iter()
        .map(|_| JobState {
            step: 0,
            left: Vec::new(),
            done: Vec::new(),
            streams_busy: 0,
            next_offset: 0,
        })
        .collect();
    let mut seen: HashMap<u64, Seen> = scripts.iter().map(|s| (s.job, Seen::default())).collect();
    for (i, s) in scripts.iter().enumerate() {
        push(&mut heap, s.start, Ev::Step(i));
    }
    let mut in_service: Option<Work<u64>> = None;
    let mut queued = 0usize;
    let mut poll_pending = false;
    while let Some(Reverse((t, _, ev))) = heap.pop() {
        if t > until {
            break;
        }
        clock.0.store(t.0, Ordering::SeqCst);
        match ev {
            Ev::Step(j) => {
                let st = &mut states[j];
                match scripts[j].steps.get(st.step) {
                    None => {}
                    Some(Step::Compute(d)) => {
                        st.step += 1;
                        push(&mut heap, t + *d, Ev::Step(j));
                    }
                    Some(Step::Io {
                        mib, offsets, op, ..
                    }) => {
                        let _ = op;
                        st.left = vec![*mib; offsets.len()];
                        st.done = vec![0; offsets.len()];
                        st.streams_busy = offsets.len();
                        seen.get_mut(&scripts[j].job).unwrap().phase_starts.push(t);
                        for (k, off) in offsets.iter().enumerate() {
                            push(&mut heap, t + *off, Ev::Arrive(j, k));
                        }
                    }
                }
            }
            Ev::Arrive(j, k) => {
                let Some(Step::Io { op, .. }) = scripts[j].steps.get(states[j].step) else {
                    unreachable!("a stream arrives inside an I/O step");
                };
                let job = scripts[j].job;
                let st = &mut states[j];
                let req = Request::builder(JobId(job), *op)
                    .file(FileId(job * 64 + k as u64))
                    .range(st.next_offset * MIB, MIB)
                    .build();
                st.next_offset += 2; // never contiguous: no merging
                sched.submit(req, (j as u64) << 8 | k as u64).expect("open");
                queued += 1;
            }
            Ev::Done => {
                let work = in_service.take().expect("a request in service");
                let (j, k) = (
                    (work.payloads()[0] >> 8) as usize,
                    (work.payloads()[0] & 0xff) as usize,
                );
                let bytes = work.batch().bytes();
                work.complete(Outcome::Done { bytes });
                let job = scripts[j].job;
                let Some(Step::Io { pause, .. }) = scripts[j].steps.get(states[j].step) else {
                    unreachable!("a completion inside an I/O step");
                };
                let pause = *pause;
                let st = &mut states[j];
                st.left[k] -= 1;
                st.done[k] += 1;
                if st.left[k] > 0 {
                    let wait = match pause {
                        Some((after, d)) if st.done[k] == after => d,
                        _ => Nanos::ZERO,
                    };
                    push(&mut heap, t + think + wait, Ev::Arrive(j, k));
                } else {
                    st.streams_busy -= 1;
                    if st.streams_busy == 0 {
                        st.step += 1;
                        seen.get_mut(&job).unwrap().phase_ends.push(t);
                        push(&mut heap, t, Ev::Step(j));
                    }
                }
                let s = seen.get_mut(&job).unwrap();
                if let Some(p) = sched.priority(JobId(job)) {
                    if p.source == PrioritySource::Auto {
                        let v = p.value.get();
                        if s.priorities.last().map(|x| x.1) != Some(v) {
                            s.priorities.push((t, v));
                        }
                        let set = (-v.log10()).round() as i32;
                        if s.sets.last().map(|x| x.1) != Some(set) {
                            s.sets.push((t, set));
                        }
                    }
                }
            }
            Ev::Poll => poll_pending = false,
        }
        if in_service.is_none() && queued > 0 {
            match sched.try_next().work() {
                Some(w) => {
                    queued -= w.batch().len();
                    push(&mut heap, t + service(w.batch().bytes()), Ev::Done);
                    in_service = Some(w);
                }
                None if !poll_pending => {
                    poll_pending = true;
                    push(&mut heap, t + Nanos::from_millis(1), Ev::Poll);
                }
                None => {}
            }
        }
    }
    (seen, sched)
}

/// The phase (1-based) during which the job first got `want` as its automatic set, and the
/// automatic sets it had before (wrong ones).
fn first_correct(seen: &Seen, want: i32) -> (Option<usize>, Vec<i32>) {
    let mut wrong = Vec::new();
    for &(t, set) in &seen.sets {
        if set == want {
            return (Some(seen.phase_at(t)), wrong);
        }
        wrong.push(set);
    }
    (None, wrong)
}

fn set_of(period_s: f64) -> i32 {
    SetMapping::default().set_of(period_s).unwrap()
}

/// Seed 004's workload scaled in time by `scale` (volumes too, at least 1 MiB per process):
/// job 0 the high-frequency one (18 s compute, 8 × 16 MiB), jobs 1..=low the low-frequency ones
/// (360 s compute, 8 × 320 MiB), all starting together; with their nominal periods alone on a
/// 110 MiB/s device.
fn seed004(scale: f64, low: u64, iterations: usize) -> Vec<(Script, f64)> {
    let mib = |m: f64| ((m * scale).round() as u64).max(1);
    let hf = Script::periodic(0, 18.0 * scale, mib(16.0), iterations * 20);
    let hf_period = 18.0 * scale + 8.0 * mib(16.0) as f64 / 110.0;
    let mut out = vec![(hf, hf_period)];
    for j in 1..=low {
        let lf = Script::periodic(j, 360.0 * scale, mib(320.0), iterations);
        out.push((lf, 360.0 * scale + 8.0 * mib(320.0) as f64 / 110.0));
    }
    out
}

fn auto() -> BookConfig {
    BookConfig::default().auto_priority(true)
}

const SCALES: [f64; 3] = [1.0 / 16.0, 1.0 / 32.0, 1.0 / 64.0];

#[test]
fn each_kind_alone_gets_its_set_at_its_third_phase_start_and_never_a_wrong_one() {
    for scale in SCALES {
        for (script, period) in seed004(scale, 1, 8) {
            let want = set_of(period);
            let until = Nanos::from_secs_f64(period * 8.5);
            let (seen, sched) = run_alone(&script, until);
            let s = &seen[&script.job];
            let (at, wrong) = first_correct(s, want);
            let what = format!("scale 1/{:.0}, job {}", 1.0 / scale, script.job);
            eprintln!("{what} (period {period:.3} s, set {want}): set at phase {at:?}");
            assert!(wrong.is_empty(), "{what}: wrong sets {wrong:?}");
            assert!(at.is_some_and(|k| k <= 3), "{what}: set at phase {at:?}");
            // Already during the third phase's first requests, not at its end.
            let when = s.sets[0].0;
            assert!(
                when < s.phase_ends[2],
                "{what}: set at {when:?}, phase 3 ended first"
            );
            assert_eq!(
                s.sets.len(),
                1,
                "{what}: the set never moved again: {:?}",
                s.sets
            );
            let p = sched.priority(JobId(script.job)).unwrap();
            assert_eq!(p.source, PrioritySource::Auto);
            sched.check_balance().unwrap();
        }
    }
}

/// All 16 jobs of seed 004 on one device: the low-frequency jobs' first phases are served one
/// after another (or shared), so their first interval is up to twice their period. No job ever
/// gets a wrong set; all but at most one get theirs by their fourth phase start (the first
/// interval is not like the others, so the second and third confirm each other).
#[test]
fn seed004_together_no_wrong_set_and_sets_by_the_fourth_phase() {
    for scale in SCALES {
        let jobs = seed004(scale, 15, 8);
        let scripts: Vec<Script> = jobs.iter().map(|j| j.0.clone()).collect();
        let until = Nanos::from_secs_f64(3200.0 * scale);
        let (seen, sched) = run(&scripts, 110.0, "iosets", auto(), until);
        let mut by_phase = [0usize; 9];
        let mut late = Vec::new();
        for (script, period) in &jobs {
            let s = &seen[&script.job];
            let want = set_of(*period);
            let what = format!("scale 1/{:.0}, job {}", 1.0 / scale, script.job);
            assert!(
                s.sets.iter().all(|&(_, set)| set == want),
                "{what}: sets {:?}, want {want}",
                s.sets
            );
            match first_correct(s, want).0 {
                Some(k) if k <= 4 => by_phase[k] += 1,
                other => late.push((script.job, other)),
            }
        }
        eprintln!(
            "scale 1/{:.0}: jobs with their set at phase 3: {}, at phase 4: {}, later or never: {late:?}",
            1.0 / scale,
            by_phase[3],
            by_phase[4]
        );
        assert!(late.len() <= 1, "scale 1/{:.0}: {late:?}", 1.0 / scale);
        sched.check_balance().unwrap();
    }
}

/// An iteration of read phase, compute, write phase, compute: the detected period is the
/// iteration's (50 s, set 2), not half of it (25 s, set 1); a job that only reads is detected like
/// one that only writes.
#[test]
fn read_and_write_phases_of_one_iteration_give_the_iteration_period() {
    let compute = Nanos::from_secs_f64(24.0);
    let mixed = Script {
        job: 1,
        start: Nanos::ZERO,
        steps: (0..8)
            .flat_map(|_| {
                [
                    Step::io(Op::Read, 8, 14),
                    Step::Compute(compute),
                    Step::io(Op::Write, 8, 14),
                    Step::Compute(compute),
                ]
            })
            .collect(),
    };
    let mut reads = Script::periodic(2, 49.0, 14, 8);
    for step in &mut reads.steps {
        if let Step::Io { op, .. } = step {
            *op = Op::Read;
        }
    }
    let writes = Script::periodic(3, 49.0, 14, 8);
    // 112 MiB alone on 110 MiB/s: 1.02 s of I/O per phase.
    let period = 48.0 + 2.0 * 112.0 / 110.0;
    assert_eq!((set_of(period), set_of(period / 2.0)), (2, 1));
    for script in [mixed, reads, writes] {
        let (seen, sched) = run_alone(&script, Nanos::from_secs_f64(500.0));
        let s = &seen[&script.job];
        assert_eq!(
            s.sets.iter().map(|x| x.1).collect::<Vec<_>>(),
            vec![2],
            "job {}",
            script.job
        );
        let stats = sched.job_stats(JobId(script.job)).unwrap();
        let got = stats.period.unwrap().as_secs_f64();
        assert!(
            (got / period - 1.0).abs() < 0.02,
            "job {}: {got}",
            script.job
        );
        // The reading job is classified as soon as the writing one: at its third phase.
        let starts = if script.job == 1 { 6 } else { 3 };
        let third = s.phase_starts[starts - 1];
        assert!(
            s.sets[0].0 < third + Nanos::from_secs_f64(2.0),
            "job {}",
            script.job
        );
    }
}

/// A phase whose processes start in three groups (the last up to 2.4 s — 10% of the period —
/// after the first group is done), or which stops for 2 s in its middle: one phase, the period
/// the iteration's (set 1), never the spacing of the pieces (set 0).
#[test]
fn short_gaps_inside_a_phase_leave_it_one_phase() {
    let ms = Nanos::from_millis;
    let staggered = Step::Io {
        op: Op::Write,
        mib: 4,
        offsets: vec![
            ms(0),
            ms(0),
            ms(0),
            ms(0),
            ms(0),
            ms(1_500),
            ms(1_500),
            ms(2_400),
        ],
        pause: None,
    };
    let paused = Step::Io {
        op: Op::Write,
        mib: 4,
        offsets: vec![ms(0); 8],
        pause: Some((2, ms(2_000))),
    };
    for (name, io) in [("staggered", staggered), ("paused", paused)] {
        let script = Script {
            job: 7,
            start: Nanos::ZERO,
            steps: (0..8)
                .flat_map(|_| [Step::Compute(Nanos::from_secs_f64(21.0)), io.clone()])
                .collect(),
        };
        let (seen, sched) = run_alone(&script, Nanos::from_secs_f64(300.0));
        let s = &seen[&7];
        let truth = (s.phase_starts[7] - s.phase_starts[0]).as_secs_f64() / 7.0;
        assert_eq!(set_of(truth), 1, "{name}: {truth}");
        assert_eq!(
            s.sets.iter().map(|x| x.1).collect::<Vec<_>>(),
            vec![1],
            "{name}: {:?}",
            s.sets
        );
        assert!(s.phase_at(s.sets[0].0) <= 3, "{name}: {:?}", s.sets);
        let got = sched
            .job_stats(JobId(7))
            .unwrap()
            .period
            .unwrap()
            .as_secs_f64();
        assert!((got / truth - 1.0).abs() < 0.05, "{name}: {got} vs {truth}");
    }
}

/// `iterations` phases of 8 × 2 MiB after `compute_s` each, for every `(compute_s, iterations)`.
fn changing(job: u64, behaviours: &[(f64, usize)]) -> Script {
    let mut steps = Vec::new();
    for &(compute_s, iterations) in behaviours {
        for _ in 0..iterations {
            steps.push(Step::Compute(Nanos::from_secs_f64(compute_s)));
            steps.push(Step::io(Op::Write, 8, 2));
        }
    }
    Script {
        job,
        start: Nanos::ZERO,
        steps,
    }
}

/// A job whose period goes from 40 s to 400 s, or from 900 s to 90 s, is in its new set within
/// four of its new periods, counted from its last phase of the old behaviour, and stays there.
#[test]
fn a_change_of_behaviour_moves_the_job_within_four_new_periods() {
    for (before, after, n_before) in [(40.0, 400.0, 30), (900.0, 90.0, 12)] {
        let script = changing(3, &[(before, n_before), (after, 12)]);
        let (seen, sched) = run(
            &[script],
            110.0,
            "iosets",
            auto(),
            Nanos::from_secs_f64(before * (n_before + 1) as f64 + after * 13.0),
        );
        let s = &seen[&3];
        let io = 16.0 / 110.0;
        let (old, new) = (set_of(before + io), set_of(after + io));
        assert_ne!(old, new);
        // The last phase of the old behaviour starts the first new interval.
        let last_old = s.phase_starts[n_before - 1];
        let new_period = Nanos::from_secs_f64(after + io);
        let sets: Vec<(f64, i32)> = s.sets.iter().map(|&(t, k)| (t.as_secs_f64(), k)).collect();
        let what = format!("{before} -> {after}: sets {sets:?}, change at {last_old:?}");
        assert_eq!(s.sets[0].1, old, "{what}");
        assert!(s.sets[0].0 < last_old, "{what}");
        let moved = s
            .sets
            .iter()
            .find(|&&(t, _)| t > last_old)
            .unwrap_or_else(|| panic!("{what}: never moved"));
        assert_eq!(moved.1, new, "{what}");
        let took = (moved.0 - last_old).as_secs_f64() / new_period.as_secs_f64();
        eprintln!("{before} s -> {after} s: new set after {took:.2} new periods");
        assert!(took <= 4.0, "{what}: {took} new periods");
        assert_eq!(s.sets.last().unwrap().1, new, "{what}");
        assert_eq!(s.sets.len(), 2, "{what}");
        let p = sched.priority(JobId(3)).unwrap();
        assert_eq!(p.source, PrioritySource::Auto);
        assert_eq!(
            p.value,
            SetMapping::default().priority_of_set(new),
            "{what}"
        );
        assert_eq!(sched.job_stats(JobId(3)).unwrap().set, Some(new));
        sched.check_balance().unwrap();
    }
}

/// Records in `book` the 1 MiB request `r`, arrived at `arrival`, as served by `iosets` from
/// `from` to `to`; returns the moves it made.
fn served_mib(book: &JobBook, mut r: Request, arrival: Nanos, from: Nanos, to: Nanos) -> Vec<Move> {
    r.arrival = arrival;
    book.record(
        &Batch::single(r),
        Outcome::Done { bytes: MIB },
        from,
        to,
        "iosets",
    )
}

/// Feeds a [`JobBook`] `phases` phases of `job` every `period` (8 overlapping 1 MiB writes each,
/// as 8 processes do) and returns the moves it made.
fn feed(book: &JobBook, job: u64, period: Nanos, phases: u64) -> Vec<Move> {
    let mut moves = Vec::new();
    for k in 0..phases {
        let start = Nanos(period.0 * (k + 1));
        for i in 0..8u64 {
            let r = Request::builder(JobId(job), Op::Write)
                .file(FileId(job * 64 + i))
                .range(k * MIB, MIB)
                .build();
            let done = start + Nanos::from_millis(10 * (i + 1));
            moves.extend(served_mib(book, r, start, start, done));
        }
    }
    moves
}

#[test]
fn period_error_scales_each_estimate_within_its_bounds() {
    let period = Nanos::from_secs_f64(24.0);
    let book = JobBook::new(auto().period_error(0.5, 7).unwrap());
    let mut ratios = Vec::new();
    for job in 1..=40u64 {
        let moves = feed(&book, job, period, 10);
        assert!(!moves.is_empty(), "job {job} never moved");
        for m in &moves {
            assert_eq!(m.job, JobId(job));
            let detected = m.period.as_secs_f64();
            assert!((detected / 24.0 - 1.0).abs() < 0.01, "{m:?}");
            let r = m.applied.as_secs_f64() / detected;
            assert!((0.5..=1.5).contains(&r), "{m:?}");
            assert_eq!(m.set, set_of(m.applied.as_secs_f64()), "{m:?}");
            // One behaviour, one factor: the job moved once.
            ratios.push(r);
        }
        assert_eq!(moves.len(), 1, "job {job}: {moves:?}");
    }
    // Jobs with the same detected period get different factors, spread over the range.
    ratios.sort_by(f64::total_cmp);
    ratios.dedup();
    assert_eq!(ratios.len(), 40);
    assert!(ratios[0] < 0.7 && ratios[39] > 1.3, "{ratios:?}");
    // The same seed gives the same factors; another seed others.
    let again = JobBook::new(auto().period_error(0.5, 7).unwrap());
    let other = JobBook::new(auto().period_error(0.5, 8).unwrap());
    let a = feed(&again, 1, period, 10)[0].applied;
    let b = feed(&other, 1, period, 10)[0].applied;
    let first = feed(
        &JobBook::new(auto().period_error(0.5, 7).unwrap()),
        1,
        period,
        10,
    )[0];
    assert_eq!(a, first.applied);
    assert_ne!(a, b);
    // Without an error, the applied period is the detected one.
    let plain = feed(&JobBook::new(auto()), 1, period, 10)[0];
    assert_eq!(plain.applied, plain.period);
}

#[test]
fn period_error_out_of_range_is_refused() {
    for bad in [1.2, 1.0, -0.1, f64::NAN, f64::INFINITY] {
        let err = BookConfig::default().period_error(bad, 1).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("period_error") && msg.contains("[0, 1)"),
            "{bad}: {msg}"
        );
    }
    let ok = BookConfig::default().period_error(0.0, 3).unwrap();
    assert_eq!(ok.period_error_fraction(), (0.0, 3));
}

/// Feeds `job`'s phases as a mount would send them: each phase's requests carry the phase's
/// stamp, and their service is chopped into `pieces` bursts spread over the phase's I/O time
/// `io` (the job waits behind other jobs of its set between them) — what the completion-based
/// detector can take for several short phases.
fn feed_stamped(book: &JobBook, job: u64, starts: &[Nanos], io: Nanos, pieces: u64) -> Vec<Move> {
    let mut moves = Vec::new();
    for (k, &start) in starts.iter().enumerate() {
        for p in 0..pieces {
            let at = start + Nanos(io.0 / pieces * p);
            for i in 0..8u64 {
                let r = Request::builder(JobId(job), Op::Write)
                    .file(FileId(job * 64 + i))
                    .range(k as u64 * MIB, MIB)
                    .phase(Some(start))
                    .build();
                moves.extend(served_mib(
                    book,
                    r,
                    start,
                    at,
                    at + Nanos::from_millis(i + 1),
                ));
            }
        }
    }
    moves
}

#[test]
fn stamped_phases_give_the_period_at_the_third_phase_however_their_service_is_chopped() {
    let book = JobBook::new(auto());
    // Seed 004's low-frequency job at 1/32: a phase every 12 s, each served in 4 pieces over
    // 3 s (waiting behind the other jobs of its set), the first phase late (it waited longest).
    let s = |secs: f64| Nanos::from_secs_f64(secs);
    let starts = [s(11.3), s(24.5), s(36.5), s(48.5), s(60.5)];
    let moves = feed_stamped(&book, 9, &starts[..2], s(3.0), 4);
    assert!(moves.is_empty(), "one interval says nothing: {moves:?}");
    let moves = feed_stamped(&book, 9, &starts[2..3], s(3.0), 4);
    // Intervals 13.2 s and 12 s differ by 10 %: not yet; the third (12 s) settles it.
    let moves = [moves, feed_stamped(&book, 9, &starts[3..], s(3.0), 4)].concat();
    assert_eq!(moves.len(), 1, "{moves:?}");
    assert_eq!(moves[0].set, set_of(12.0));
    assert!(
        (moves[0].period.as_secs_f64() - 12.0).abs() < 0.7,
        "{moves:?}"
    );
    // A change of behaviour (12 s -> 0.6 s) is followed after two intervals of the new one.
    let fast: Vec<Nanos> = (1..=3).map(|k| s(60.5 + 0.6 * k as f64)).collect();
    let moves = feed_stamped(&book, 9, &fast, s(0.05), 1);
    assert_eq!(moves.last().map(|m| m.set), Some(set_of(0.6)), "{moves:?}");
    // The nodes of one job stamp a phase a few ms apart: still one phase.
    let book = JobBook::new(auto());
    let starts: Vec<Nanos> = (0..4)
        .flat_map(|k| [s(12.0 * k as f64), s(12.0 * k as f64 + 0.004)])
        .collect();
    let moves = feed_stamped(&book, 3, &starts, s(1.0), 1);
    assert_eq!(moves.len(), 1, "{moves:?}");
    assert_eq!(moves[0].set, set_of(12.0));
}

#[test]
fn stamped_read_and_write_phases_give_the_iteration_period() {
    // Each 50 s iteration: a read phase at 0, a write phase at 20 s, each stamped.
    let book = JobBook::new(auto());
    let s = |secs: f64| Nanos::from_secs_f64(secs);
    let mut moves = Vec::new();
    for k in 0..4 {
        for (offset, op) in [(0.0, Op::Read), (20.0, Op::Write)] {
            let start = s(50.0 * k as f64 + offset);
            let r = Request::builder(JobId(5), op)
                .file(FileId(5))
                .range(0, MIB)
                .phase(Some(start))
                .build();
            moves.extend(served_mib(&book, r, start, start, start + s(0.01)));
        }
    }
    assert!(!moves.is_empty());
    assert!(moves.iter().all(|m| m.set == set_of(50.0)), "{moves:?}");
}

/// The two changes of behaviour, through the stamped path the mount uses: a job whose
/// period goes from 40 s to 400 s, or from 900 s to 90 s, is moved to its new set at its second
/// new interval, and only once.
#[test]
fn stamped_changes_of_behaviour_move_the_job_at_the_second_new_interval() {
    let s = |secs: f64| Nanos::from_secs_f64(secs);
    for (before, after) in [(40.0, 400.0), (900.0, 90.0)] {
        let book = JobBook::new(auto());
        let old: Vec<Nanos> = (0..6).map(|k| s(before * k as f64)).collect();
        let moves = feed_stamped(&book, 4, &old, s(2.0), 3);
        assert_eq!(moves.len(), 1, "{before} s: {moves:?}");
        assert_eq!(moves[0].set, set_of(before), "{before} s: {moves:?}");
        let last_old = before * 5.0;
        let new: Vec<Nanos> = (1..=4).map(|k| s(last_old + after * k as f64)).collect();
        // One new interval: the median of the last three is still the old period.
        let first = feed_stamped(&book, 4, &new[..1], s(2.0), 3);
        assert!(first.is_empty(), "{before} -> {after}: {first:?}");
        // The second agrees with the first: the new period.
        let second = feed_stamped(&book, 4, &new[1..2], s(2.0), 3);
        assert_eq!(second.len(), 1, "{before} -> {after}: {second:?}");
        assert_eq!(second[0].set, set_of(after), "{before} -> {after}");
        assert!((second[0].period.as_secs_f64() / after - 1.0).abs() < 0.01);
        // And it stays there.
        let rest = feed_stamped(&book, 4, &new[2..], s(2.0), 3);
        assert!(rest.is_empty(), "{before} -> {after}: {rest:?}");
    }
}

/// The offline change points and the servers' online detector agree (issue 32): a trace of a job
/// whose period changes once or twice, replayed request by request through a [`JobBook`] as the
/// server's completion path feeds it (each request from its start to its end), ends in the set
/// of the last segment that `iosets detect` finds in the same trace.
#[test]
fn a_replayed_trace_ends_in_the_set_of_its_last_offline_segment() {
    use iosets_period::segment::segment;
    use iosets_period::synth::{changing, PeriodicSpec};
    for periods in [
        &[10.0, 100.0][..],
        &[100.0, 10.0],
        &[40.0, 400.0, 40.0],
        &[900.0, 90.0],
    ] {
        for jitter in [0.1, 0.3] {
            for background in [false, true] {
                let specs: Vec<PeriodicSpec> = periods
                    .iter()
                    .map(|&p| PeriodicSpec {
                        jitter,
                        background,
                        ..PeriodicSpec::new(p, 12)
                    })
                    .collect();
                let truth = changing(&specs, 4);
                let mut events = truth.trace.events.clone();
                let offline = segment(&events);
                let what = format!("periods {periods:?}, jitter {jitter}, background {background}");
                assert_eq!(offline.segments.len(), periods.len(), "{what}");
                let last = offline.last().detection.period().expect("periodic");
                let want = set_of(last.as_secs_f64());
                assert_eq!(want, set_of(*periods.last().unwrap()), "{what}");
                events.sort_by_key(|e| e.end);
                let book = JobBook::new(auto());
                let mut moves = Vec::new();
                for (i, e) in events.iter().enumerate() {
                    let r = Request::builder(JobId(7), Op::Write)
                        .file(FileId(1))
                        .range(i as u64 * MIB, e.bytes.max(1))
                        .arrival(e.start)
                        .build();
                    moves.extend(book.record(
                        &Batch::single(r),
                        Outcome::Done { bytes: e.bytes },
                        e.start,
                        e.end,
                        "iosets",
                    ));
                }
                let sets: Vec<i32> = moves.iter().map(|m| m.set).collect();
                assert_eq!(sets.last(), Some(&want), "{what}: online moves {sets:?}");
            }
        }
    }
}
