//! The fluid simulator on cases small enough to work out by hand: exact completion times (up to
//! float rounding) under each sharing rule, FCFS order inside a set, windows that cut phases, and
//! the online and noisy estimates.

use iosets_sim::fluid::{
    simulate, ExclusiveBound, Heuristic, Job, PhaseKind, PhaseRecord, RunResult, SetKey,
    SimOptions, TurnBounds, Window, Workload,
};
use iosets_types::Nanos;

fn job(release: f64, cpu: &[f64], volume: &[f64], class_w_iter: f64) -> Job {
    Job {
        group: 0,
        release,
        cpu: cpu.to_vec(),
        volume: volume.to_vec(),
        class_w_iter,
        peak: None,
        weight: None,
    }
}

fn workload(bandwidth: f64, window: Option<Window>, jobs: Vec<Job>) -> Workload {
    Workload {
        bandwidth,
        window,
        jobs,
        groups: vec!["g".to_string()],
    }
}

fn run(w: &Workload, h: &str) -> RunResult {
    run_bounded(w, h, TurnBounds::NONE)
}

fn run_bounded(w: &Workload, h: &str, bounds: TurnBounds) -> RunResult {
    let options = SimOptions {
        record: true,
        bounds,
        ..SimOptions::default()
    };
    simulate(w, h.parse().unwrap(), options).unwrap()
}

/// The I/O phases of job `job` in a recorded run, in order.
fn io_of_job(r: &RunResult, job: usize) -> impl Iterator<Item = &PhaseRecord> {
    r.jobs[job]
        .phases
        .iter()
        .filter(|p| p.kind == PhaseKind::Io)
}

/// Equal up to float rounding.
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * b.abs().max(1.0)
}

fn completions(r: &RunResult) -> Vec<f64> {
    r.jobs.iter().map(|j| j.completion.unwrap()).collect()
}

fn assert_times(r: &RunResult, expected: &[f64]) {
    let got = completions(r);
    assert_eq!(got.len(), expected.len());
    for (g, e) in got.iter().zip(expected) {
        assert!(
            close(*g, *e),
            "{}: completions {got:?}, expected {expected:?}",
            r.heuristic
        );
    }
}

#[test]
fn a_job_alone_gets_all_the_bandwidth_under_every_heuristic() {
    // B = 2. Compute 1→4, I/O of 4 units 4→6, compute 6→7, I/O of 2 units 7→8.
    let w = workload(2.0, None, vec![job(1.0, &[3.0, 1.0], &[4.0, 2.0], 3.5)]);
    let variants = [
        "set-2",
        "set-10:error=0.5",
        "set-10:online",
        "set-10:online:own",
    ];
    let paper = Heuristic::PAPER.iter().map(ToString::to_string);
    for h in paper.chain(variants.map(String::from)) {
        let r = run(&w, &h);
        assert_times(&r, &[8.0]);
        let io: Vec<(f64, f64)> = io_of_job(&r, 0)
            .map(|p| (p.transfer_start, p.end))
            .collect();
        assert_eq!(io, vec![(4.0, 6.0), (7.0, 8.0)], "{h}");
        assert!(r
            .segments
            .iter()
            .all(|s| s.transferring == 0 || s.total_rate == 2.0));
        assert_eq!(r.events, 4);
        // Window [0, 8]: 4 s compute, 3 s of I/O, 1 s before release.
        assert!(close(r.metrics.max_stretch, 8.0 / 7.0));
        assert!(close(r.metrics.utilization, 0.5));
    }
}

/// A asks for 4 units at t = 1, B asks for 2 units at t = 2; B = 1.
fn two_jobs() -> Workload {
    workload(
        1.0,
        None,
        vec![job(0.0, &[1.0], &[4.0], 5.0), job(0.0, &[2.0], &[2.0], 4.0)],
    )
}

#[test]
fn two_jobs_under_fair_share() {
    // A alone 1→2 (3 left); both at 1/2 until B's 2 units are done at 6 (A has 1 left); A alone
    // until 7.
    let r = run(&two_jobs(), "fair-share");
    assert_times(&r, &[7.0, 6.0]);
    let rates: Vec<(f64, f64, usize)> = r
        .segments
        .iter()
        .filter(|s| s.transferring > 0)
        .map(|s| (s.start, s.end, s.transferring))
        .collect();
    assert_eq!(rates, vec![(1.0, 2.0, 1), (2.0, 6.0, 2), (6.0, 7.0, 1)]);
}

#[test]
fn a_job_takes_no_more_than_its_peak_and_leaves_the_rest_to_the_others() {
    // A's writers reach 1/4 of B. Alone 1→2 at 1/4 (3.75 left); from 2 fair share would give
    // it 1/2, it takes 1/4 and B gets 3/4: B's 2 units done at 2 + 8/3; A alone again at 1/4
    // after that, 3.75 - (8/3)/4 = 3.0833… left, done 12.333… later.
    let mut w = two_jobs();
    w.jobs[0].peak = Some(0.25);
    let r = run(&w, "fair-share");
    let b_done = 2.0 + 8.0 / 3.0;
    let a_left = 3.75 - (8.0 / 3.0) * 0.25;
    assert_times(&r, &[b_done + a_left / 0.25, b_done]);
    // A peak above every share changes nothing.
    let mut w = two_jobs();
    w.jobs[0].peak = Some(1.0);
    assert_times(&run(&w, "fair-share"), &[7.0, 6.0]);
    // Nonsense peaks are refused.
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let mut w = two_jobs();
        w.jobs[1].peak = Some(bad);
        let e = simulate(&w, "fair-share".parse().unwrap(), SimOptions::default()).unwrap_err();
        assert!(e.to_string().contains("peak"), "{e}");
    }
}

#[test]
fn under_fair_share_a_job_gets_its_weight_in_shares_and_other_heuristics_ignore_it() {
    // B weighs 3: from 2 it gets 3/4, its 2 units done at 2 + 8/3; A (3 units left at 2) gets
    // 1/4 meanwhile, 3 - 2/3 = 7/3 left, then alone at 1.
    let mut w = two_jobs();
    w.jobs[1].weight = Some(3.0);
    let b_done = 2.0 + 8.0 / 3.0;
    let a_left = 3.0 - (8.0 / 3.0) * 0.25;
    assert_times(&run(&w, "fair-share"), &[b_done + a_left, b_done]);
    // Exclusive FCFS does not look at weights.
    assert_times(&run(&w, "exclusive-fcfs"), &[5.0, 7.0]);
    let mut bad = two_jobs();
    bad.jobs[0].weight = Some(0.0);
    let e = simulate(&bad, "fair-share".parse().unwrap(), SimOptions::default()).unwrap_err();
    assert!(e.to_string().contains("weight"), "{e}");
}

#[test]
fn two_jobs_under_exclusive_fcfs() {
    // A asked first: 1→5 alone; B waits from 2 and transfers 5→7.
    let r = run(&two_jobs(), "exclusive-fcfs");
    assert_times(&r, &[5.0, 7.0]);
    let b_io = r.jobs[1].phases[1];
    assert_eq!((b_io.start, b_io.transfer_start, b_io.end), (2.0, 5.0, 7.0));
}

/// B (w_iter 41, set 2, priority 1/100) asks for 40 units at 1; A (w_iter 6, set 1, priority
/// 1/10) asks for 4 units at 2; B = 1.
fn ten_to_one() -> Workload {
    workload(
        1.0,
        None,
        vec![
            job(0.0, &[2.0], &[4.0], 6.0),
            job(0.0, &[1.0], &[40.0], 41.0),
        ],
    )
}

#[test]
fn priorities_ten_to_one() {
    // B alone 1→2 (39 left). Then A gets 10/11 and B 1/11: A's 4 units take 4.4 s, so A ends at
    // 6.4 while B moves 0.4 (38.6 left); B alone ends at 45.
    for h in ["set-10", "share+priority", "clairvoyant"] {
        let r = run(&ten_to_one(), h);
        assert_times(&r, &[6.4, 45.0]);
        let mid = r.segments.iter().find(|s| s.start == 2.0).unwrap();
        assert!(close(mid.end, 6.4) && close(mid.total_rate, 1.0));
    }
    // Same sets, equal priorities: A gets 1/2, its 4 units take 8 s.
    assert_times(&run(&ten_to_one(), "set-fairshare"), &[10.0, 45.0]);
    // One set: B holds it 1→41, then A 41→45.
    assert_times(&run(&ten_to_one(), "exclusive-fcfs"), &[45.0, 41.0]);
}

#[test]
fn sets_and_priorities_are_the_paper_s() {
    let r = run(&ten_to_one(), "set-10");
    let (a_set, a_p) = r.jobs[0].last_set.unwrap();
    let (b_set, b_p) = r.jobs[1].last_set.unwrap();
    assert_eq!((a_set, b_set), (SetKey::Index(1), SetKey::Index(2)));
    assert!(close(a_p, 0.1) && close(b_p, 0.01));
    let r = run(&ten_to_one(), "share+priority");
    assert_eq!(r.jobs[0].last_set.unwrap().0, SetKey::Job(0));
}

#[test]
fn a_set_serves_its_three_jobs_first_come_first_served() {
    // All in Set-10's set 1 (w_iter 13 to 15); they ask at 11 (job 2), 12 (job 0), 13 (job 1) for
    // 2 units each; B = 1.
    let w = workload(
        1.0,
        None,
        vec![
            job(0.0, &[12.0], &[2.0], 14.0),
            job(0.0, &[13.0], &[2.0], 15.0),
            job(0.0, &[11.0], &[2.0], 13.0),
        ],
    );
    for h in ["set-10", "set-fairshare", "clairvoyant"] {
        let r = run(&w, h);
        assert_times(&r, &[15.0, 17.0, 13.0]);
        let starts: Vec<f64> = r.jobs.iter().map(|j| j.phases[1].transfer_start).collect();
        assert_eq!(starts, vec![13.0, 15.0, 11.0], "{h}");
        assert!(r
            .jobs
            .iter()
            .all(|j| j.last_set.unwrap().0 == SetKey::Index(1)));
    }
    // Fair-share instead: all three share.
    let r = run(&w, "fair-share");
    assert!(r.segments.iter().any(|s| s.transferring == 3));
}

#[test]
fn simultaneous_requests_are_served_by_job_index() {
    let w = workload(
        1.0,
        None,
        vec![job(0.0, &[1.0], &[1.0], 2.0), job(0.0, &[1.0], &[1.0], 2.0)],
    );
    assert_times(&run(&w, "exclusive-fcfs"), &[2.0, 3.0]);
    // Phases that end at the same instant end together, with one event each.
    let r = run(&w, "fair-share");
    assert_times(&r, &[3.0, 3.0]);
    assert_eq!(r.events, 4);
}

#[test]
fn a_window_counts_the_part_of_each_phase_inside_it() {
    // Alone, B = 1: compute 0→4, I/O 4→6, compute 6→10, I/O 10→12. Window [5, 11]: 1 unit of the
    // first I/O, all of the second compute, 1 unit of the second I/O.
    let w = workload(
        1.0,
        Some(Window::new(5.0, 11.0).unwrap()),
        vec![job(0.0, &[4.0, 4.0], &[2.0, 2.0], 6.0)],
    );
    let r = run(&w, "fair-share");
    let work = r.jobs[0].work;
    assert!(close(work.e_cpu, 4.0) && close(work.e_io, 2.0), "{work:?}");
    assert!(close(r.metrics.max_stretch, 1.0));
    assert!(close(r.metrics.io_slowdown, 1.0));
    assert!(close(r.metrics.utilization, 4.0 / 6.0));
    let io: Vec<f64> = io_of_job(&r, 0).map(|p| p.volume_in_window).collect();
    assert_eq!(io, vec![1.0, 1.0]);
    assert_times(&r, &[12.0]);
}

#[test]
fn a_window_cutting_shared_transfers_counts_what_moved_inside() {
    // Fair share of two_jobs(): A transfers at 1/2 during [2, 6] and at 1 during [6, 7]; B at 1/2
    // during [2, 6]. Window [3, 6.5]: A moved 1.5 + 0.5 = 2 units, B 1.5 units.
    let mut w = two_jobs();
    w.window = Some(Window::new(3.0, 6.5).unwrap());
    for stop in [false, true] {
        let options = SimOptions {
            stop_at_window_end: stop,
            ..SimOptions::default()
        };
        let r = simulate(&w, Heuristic::FairShare, options).unwrap();
        let (a, b) = (r.jobs[0].work, r.jobs[1].work);
        assert!(close(a.e_io, 2.0) && close(b.e_io, 1.5), "{a:?} {b:?}");
        assert_eq!((a.e_cpu, b.e_cpu), (0.0, 0.0));
        assert!(close(r.metrics.max_stretch, 3.5 / 1.5));
        assert!(close(
            r.metrics.geomean_stretch,
            (1.75f64 * (3.5 / 1.5)).sqrt()
        ));
        assert!(close(r.metrics.io_slowdown, (1.75f64 * (3.5 / 1.5)).sqrt()));
        assert_eq!(r.metrics.utilization, 0.0);
        if stop {
            assert_eq!(r.end_time, 6.5);
            assert_eq!(r.jobs[0].completion, None);
            assert_eq!(r.jobs[1].completion, Some(6.0));
        } else {
            assert_times(&r, &[7.0, 6.0]);
        }
    }
}

#[test]
fn a_window_cutting_a_compute_phase_counts_its_inside_part() {
    // Alone, B = 1, released at 2: compute 2→12, I/O 12→13. Window [10, 20]: 2 s compute, 1 s I/O;
    // the job is done at 13 so its stretch is 10 / 3.
    let w = workload(
        1.0,
        Some(Window::new(10.0, 20.0).unwrap()),
        vec![job(2.0, &[10.0], &[1.0], 11.0)],
    );
    let r = run(&w, "set-10");
    assert!(close(r.jobs[0].work.e_cpu, 2.0) && close(r.jobs[0].work.e_io, 1.0));
    assert!(close(r.metrics.max_stretch, 10.0 / 3.0));
    assert!(close(r.metrics.io_slowdown, 8.0));
    assert!(close(r.metrics.utilization, 0.2));
}

#[test]
fn online_estimates_start_with_the_default_priority() {
    // Alone: asks for I/O at 9, 19, 29 (period 10). First burst: no estimate, a set of its own at
    // priority 1/50 (seed 004's prior); then mean gaps of 10 s: set 1, priority 1/10.
    let w = workload(1.0, None, vec![job(0.0, &[9.0; 3], &[1.0; 3], 10.0)]);
    let r = run(&w, "set-10:online:own");
    let sets: Vec<(Option<SetKey>, f64)> = io_of_job(&r, 0).map(|p| (p.set, p.priority)).collect();
    assert_eq!(sets[0], (Some(SetKey::Unknown(0)), 0.02));
    assert_eq!(sets[1].0, Some(SetKey::Index(1)));
    assert!(close(sets[2].1, 0.1));
    // The shared prior: the same, but the first burst joins the one new set.
    let r = run(&w, "set-10:online");
    let sets: Vec<(Option<SetKey>, f64)> = io_of_job(&r, 0).map(|p| (p.set, p.priority)).collect();
    assert_eq!(sets[0], (Some(SetKey::New), 0.02));
    assert_eq!(sets[1].0, Some(SetKey::Index(1)));
    assert!(close(sets[2].1, 0.1));
}

/// The I/O phases of `r` that ran in a set matching `in_set`: (job, asked, transfer start, end).
fn io_phases(r: &RunResult, in_set: impl Fn(SetKey) -> bool) -> Vec<(usize, f64, f64, f64)> {
    let mut out = Vec::new();
    for (j, job) in r.jobs.iter().enumerate() {
        for p in &job.phases {
            if p.kind == PhaseKind::Io && p.set.is_some_and(&in_set) {
                out.push((j, p.start, p.transfer_start, p.end));
            }
        }
    }
    out
}

/// Pairs of phases of different jobs whose transfers overlap for a positive time.
fn overlapping_transfers(phases: &[(usize, f64, f64, f64)]) -> usize {
    let mut n = 0;
    for (i, a) in phases.iter().enumerate() {
        for b in &phases[i + 1..] {
            if a.0 != b.0 && a.2.max(b.2) < a.3.min(b.3) {
                n += 1;
            }
        }
    }
    n
}

#[test]
fn newcomers_take_turns_in_the_shared_set_and_share_with_own_sets() {
    // B = 1, three jobs, each computing then writing 4 units, three times; they ask for their
    // first I/O at 1, 1.5 and 2. None has an estimate before its second burst.
    let w = workload(
        1.0,
        None,
        vec![
            job(0.0, &[1.0, 30.0, 30.0], &[4.0; 3], 35.0),
            job(0.0, &[1.5, 30.0, 30.0], &[4.0; 3], 35.0),
            job(0.0, &[2.0, 30.0, 30.0], &[4.0; 3], 35.0),
        ],
    );
    // Shared: one new set, first come first served: 1→5, 5→9, 9→13 (each waited for the one
    // before), never two newcomers transferring at once.
    let r = run(&w, "set-10:online");
    let new = io_phases(&r, |k| k == SetKey::New);
    assert_eq!(new.len(), 3, "{new:?}");
    let firsts: Vec<(f64, f64)> = new.iter().map(|p| (p.2, p.3)).collect();
    for (got, want) in firsts.iter().zip([(1.0, 5.0), (5.0, 9.0), (9.0, 13.0)]) {
        assert!(close(got.0, want.0) && close(got.1, want.1), "{firsts:?}");
    }
    assert_eq!(new.iter().filter(|p| p.2 > p.1).count(), 2, "{new:?}");
    assert_eq!(overlapping_transfers(&new), 0, "{new:?}");
    // Every later phase has an estimate: out of the new set.
    for j in &r.jobs {
        for p in j
            .phases
            .iter()
            .filter(|p| p.kind == PhaseKind::Io && p.iteration > 0)
        {
            assert!(matches!(p.set, Some(SetKey::Index(_))), "{p:?}");
        }
    }
    // Own (seed 004): a set each, so the three share B and overlap pairwise: 1→1.5 alone,
    // 1.5→2 at 1/2 each, 2→11.75 at 1/3 each, 11.75→12.75 at 1/2, 12.75→13 alone.
    let r = run(&w, "set-10:online:own");
    let own = io_phases(&r, |k| matches!(k, SetKey::Unknown(_)));
    assert_eq!(own.len(), 3, "{own:?}");
    assert!(own.iter().all(|p| p.2 == p.1), "none waits: {own:?}");
    assert_eq!(overlapping_transfers(&own), 3, "{own:?}");
    let ends: Vec<f64> = own.iter().map(|p| p.3).collect();
    for (got, want) in ends.iter().zip([11.75, 12.75, 13.0]) {
        assert!(close(*got, want), "{ends:?}");
    }
}

#[test]
fn online_estimates_see_the_slowed_down_period() {
    // Job 0 (isolated w_iter 2 s: set 0) computes 1 s then writes 1 unit, three times; job 1 asks
    // at 0.5 for 30 units. Both start without an estimate, in sets of their own at priority 1/50
    // (seed 004's prior), so they share: job 0's first unit takes 2 s and its second burst starts
    // later than in isolation. Its first estimate is that observed gap, and its set follows it.
    let w = workload(
        1.0,
        None,
        vec![
            job(0.0, &[1.0, 1.0, 1.0], &[1.0, 1.0, 1.0], 2.0),
            job(0.0, &[0.5], &[30.0], 30.5),
        ],
    );
    let r = run(&w, "set-10:online:own");
    let second = io_of_job(&r, 0).nth(1).unwrap();
    let gap = second.start - 1.0;
    // 1→3 at half the bandwidth, then 1 s of compute.
    assert!(close(gap, 3.0));
    let expected_set = (gap.log10()).round() as i32;
    assert_eq!(second.set, Some(SetKey::Index(expected_set)));
    let known = run(&w, "set-10");
    assert_eq!(known.jobs[0].last_set.unwrap().0, SetKey::Index(0));
}

#[test]
fn noisy_estimates_move_jobs_between_sets_reproducibly() {
    // w_iter = 100 (set 2); with error 0.9 the estimate spans [10, 190]: sets 1 and 2.
    let w = workload(1.0, None, vec![job(0.0, &[99.0; 200], &[1.0; 200], 100.0)]);
    let r = run(&w, "set-10:error=0.9");
    let sets: std::collections::BTreeSet<SetKey> =
        r.jobs[0].phases.iter().filter_map(|p| p.set).collect();
    assert_eq!(
        sets.into_iter().collect::<Vec<_>>(),
        vec![SetKey::Index(1), SetKey::Index(2)]
    );
    // Alone, its placement does not change its times.
    assert_times(&r, &[20_000.0]);
    let again = run(&w, "set-10:error=0.9");
    assert_eq!(r.jobs[0].phases, again.jobs[0].phases);
    // Error 0.3 keeps it in [70, 130]: always set 2.
    let r = run(&w, "set-10:error=0.3");
    assert!(r.jobs[0]
        .phases
        .iter()
        .filter_map(|p| p.set)
        .all(|s| s == SetKey::Index(2)));
}

/// Two jobs of one set (clairvoyant puts both in set 1, priority 0.1), B = 1: job 0 asks at 1
/// for 30 units, job 1 at 2 for 5.
fn a_long_and_a_short_phase() -> Workload {
    workload(
        1.0,
        None,
        vec![
            job(0.0, &[1.0], &[30.0], 10.0),
            job(0.0, &[2.0], &[5.0], 10.0),
        ],
    )
}

#[test]
fn a_holder_past_max_exclusive_yields_and_queues_behind_the_others() {
    let w = a_long_and_a_short_phase();
    // The paper's rule: job 0 holds its set for its whole phase, 1→31; job 1 then 31→36.
    assert_times(&run(&w, "clairvoyant"), &[31.0, 36.0]);
    // The servers' default (auto: 1 s / 0.1 = 10 s from when job 1 began to wait, at 2): job 0
    // yields at 12 with 19 units left; job 1 12→17; job 0 again 17→36.
    let auto = TurnBounds {
        max_exclusive: ExclusiveBound::Auto,
        unknown_hold: None,
    };
    let r = run_bounded(&w, "clairvoyant", auto);
    assert_times(&r, &[36.0, 17.0]);
    let first = io_of_job(&r, 1).next().unwrap();
    assert!(close(first.transfer_start, 12.0), "{first:?}");
    // A fixed 4 s bound: turns take turns. Job 0 2→6 (25 left); job 1 6→10 (1 left); job 0
    // 10→14 (21 left); job 1 14→15, done; job 0 15→36.
    let fixed = TurnBounds {
        max_exclusive: ExclusiveBound::Fixed(Nanos::from_millis(4000)),
        unknown_hold: None,
    };
    let r = run_bounded(&w, "clairvoyant", fixed);
    assert_times(&r, &[36.0, 15.0]);
    // Job 0's phase keeps its first transfer start through its yields.
    assert!(close(io_of_job(&r, 0).next().unwrap().transfer_start, 1.0));
}

#[test]
fn a_newcomer_past_the_new_sets_bound_moves_to_a_set_of_its_own_for_good() {
    // B = 1. Job 0 asks at 1 for 30 units, then at 1 after that for 30 more; job 1 asks at 2 for
    // 4, then 1 after that for 1. Phase starts give no estimate before a third phase.
    let w = workload(
        1.0,
        None,
        vec![
            job(0.0, &[1.0, 1.0], &[30.0, 30.0], 35.0),
            job(0.0, &[2.0, 1.0], &[4.0, 1.0], 35.0),
        ],
    );
    let h = "set-10:online:stamps";
    // Without the bound: job 0 holds the new set 1→31, job 1 31→35; job 0, back at 32, 35→65;
    // job 1, back at 36, 65→66.
    assert_times(&run(&w, h), &[65.0, 66.0]);
    // unknown_hold 2 s, from the start of job 0's turn (1): at 3 job 0 (28 left) moves to a set
    // of its own at 1/50, like the new set's: 0.5 each until job 1 ends at 11 (job 0: 24 left),
    // job 0 alone to 12 (23), 0.5 each while job 1's second phase (in the new set) runs 12→14
    // (job 0: 22), alone to 36; its second phase, still without an estimate, in its own set
    // again, 37→67.
    let hold = TurnBounds {
        max_exclusive: ExclusiveBound::Off,
        unknown_hold: Some(Nanos::from_millis(2000)),
    };
    let r = run_bounded(&w, h, hold);
    assert_times(&r, &[67.0, 14.0]);
    let sets0: Vec<Option<SetKey>> = io_of_job(&r, 0).map(|p| p.set).collect();
    let sets1: Vec<Option<SetKey>> = io_of_job(&r, 1).map(|p| p.set).collect();
    assert_eq!(sets0, [Some(SetKey::Unknown(0)); 2]);
    assert_eq!(sets1, [Some(SetKey::New); 2]);
    // A bound longer than the phase changes nothing.
    let long = TurnBounds {
        max_exclusive: ExclusiveBound::Off,
        unknown_hold: Some(Nanos::from_millis(60_000)),
    };
    assert_times(&run_bounded(&w, h, long), &[65.0, 66.0]);
}

#[test]
fn a_newcomer_that_held_the_new_set_long_before_may_hold_it_twice_as_long() {
    // B = 1. Job 0 alone first: 3 units 1→4 (a turn of 3 s, nobody waiting). Then job 1 asks at
    // 4.5 for 20 and holds the new set; job 0 asks at 5 for 2.5 and waits. Job 1's first turn
    // is bounded by 2 s: at 6.5 it moves out. Job 0 then holds; job 1's later phases are not
    // in the new set. Job 0's own second turn may last 2 × 3 = 6 s before it would move.
    let w = workload(
        1.0,
        None,
        vec![
            job(0.0, &[1.0, 1.0, 100.0], &[3.0, 2.5, 1.0], 50.0),
            job(0.0, &[4.5, 100.0], &[20.0, 1.0], 50.0),
            job(0.0, &[6.8, 100.0], &[8.0, 1.0], 50.0),
        ],
    );
    let hold = TurnBounds {
        max_exclusive: ExclusiveBound::Off,
        unknown_hold: Some(Nanos::from_millis(2000)),
    };
    let r = run_bounded(&w, "set-10:online:stamps", hold);
    let p0: Vec<&PhaseRecord> = io_of_job(&r, 0).collect();
    let p1: Vec<&PhaseRecord> = io_of_job(&r, 1).collect();
    assert_eq!(p1[0].set, Some(SetKey::Unknown(1)), "{p1:?}");
    // Job 0 holds the new set from 6.5 with job 2 waiting from 6.8: a 2 s bound would move it at
    // 8.5, its earlier 3 s turn lets it hold to 12.5; its 2.5 units at 1/2 (beside job 1) are
    // done at 11.5, so it stays in the new set and ends there.
    assert_eq!(p0[1].set, Some(SetKey::New), "{p0:?}");
    assert!(
        close(p0[1].transfer_start, 6.5) && close(p0[1].end, 11.5),
        "{p0:?}"
    );
    let p2: Vec<&PhaseRecord> = io_of_job(&r, 2).collect();
    assert_eq!(p2[0].set, Some(SetKey::New), "{p2:?}");
    assert!(close(p2[0].transfer_start, p0[1].end), "{p0:?} {p2:?}");
}
