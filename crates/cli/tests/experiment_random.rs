//! `iosets experiment random` as a user runs it, through the real binary and a real FUSE mount:
//! one small random workload under two configurations writes every metric beside both models'
//! predictions, each class's slowdown and the workload itself; `--analyze` reads the same runs
//! back to the same numbers; nonsense flags are refused in one line before anything starts.
//! Checked for what the run writes, never for how long it took.

use crate::common;

use std::time::Duration;

use common::experiment::{self, csv};
use common::{fails, fails_each, scratch};

/// The longest one run of the binary may take here before the test fails.
const RUN_LIMIT: Duration = Duration::from_secs(150);

#[test]
fn one_small_workload_is_measured_beside_both_models_and_analysed_again() {
    if !experiment::fuse_available("one_small_workload") {
        return;
    }
    let dir = scratch("random-small");
    // Periods 0.1 s, 1 s and 10 s; three jobs, one per class; a 10 s window.
    let args = |flag: &'static str| -> Vec<&'static str> {
        let base = [
            "experiment",
            "random",
            "--workloads",
            "1",
            "--first-seed",
            "3",
            "--jobs",
            "3",
            "--scale",
            "1/100",
            "--window-s",
            "10",
            "--configs",
            "timeorder,clairvoyant",
        ];
        base.into_iter().chain([flag, "out"]).collect()
    };
    let (o, pid) = experiment::run_bounded(&dir, &args("--out"), RUN_LIMIT);
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{}\n{stdout}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(experiment::leftover_mounts("iosets-seed004", pid).is_empty());
    let out = dir.join("out");

    let workload = csv(
        &out.join("workloads.csv"),
        "seed,omega,window_begin_s,window_end_s,job,class,period_s,procs,mib_per_proc,\
         compute_s,release_s,set10,peak_mib_s,efficiency",
    );
    assert_eq!(workload.len(), 3, "{workload:?}");
    let classes: Vec<&str> = workload.iter().map(|r| r[5].as_str()).collect();
    assert_eq!(classes, ["high", "medium", "low"]);
    for r in &workload {
        assert_eq!(r[0], "3");
        let procs: u32 = r[7].parse().unwrap();
        assert!((1..=8).contains(&procs), "{r:?}");
        // A job reaches one or both servers of 55 MiB/s each.
        let peak: f64 = r[12].parse().unwrap();
        assert!(peak == 55.0 || peak == 110.0, "{r:?}");
        let efficiency: f64 = r[13].parse().unwrap();
        assert!(efficiency > 0.0 && efficiency <= 1.0, "{r:?}");
    }

    let header = "seed,omega,config,metric,measured,fluid,fluid_diff_pct,writers,writers_diff_pct,\
                  unbounded,unbounded_diff_pct";
    let metrics = csv(&out.join("metrics.csv"), header);
    assert_eq!(metrics.len(), 8, "{metrics:?}");
    for (i, r) in metrics.iter().enumerate() {
        assert_eq!(
            r[2],
            if i < 4 { "timeorder" } else { "clairvoyant" },
            "{r:?}"
        );
        for v in [&r[4], &r[5], &r[7], &r[9]] {
            let v: f64 = v.parse().unwrap();
            assert!(v.is_finite() && v > 0.0, "{r:?}");
        }
    }
    let per_class = csv(
        &out.join("classes.csv"),
        "seed,config,class,measured_io_slowdown,fluid_io_slowdown,writers_io_slowdown,\
         unbounded_io_slowdown",
    );
    assert_eq!(per_class.len(), 6, "{per_class:?}");
    let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    assert!(
        summary.contains("fluid model: timeorder against fair-share: within 10 % on all four")
            && summary.contains("writers model: clairvoyant against set-10")
            && summary.contains("unbounded model: clairvoyant against set-10"),
        "{summary}"
    );
    assert!(stdout.contains("seed 3 timeorder"), "{stdout}");

    // The same runs read again: the same numbers.
    let before = std::fs::read_to_string(out.join("metrics.csv")).unwrap();
    let (o, _) = experiment::run_bounded(&dir, &args("--analyze"), RUN_LIMIT);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        std::fs::read_to_string(out.join("metrics.csv")).unwrap(),
        before
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn nonsense_flags_are_refused_before_anything_starts() {
    let dir = scratch("random-bad");
    let cases: [(&[&str], &[&str]); 7] = [
        (&["--chunk-kib", "1"], &["--chunk-kib 1", "64 to 65536"]),
        (&["--jobs", "2"], &["--jobs 2", "one per class"]),
        (&["--workloads", "0"], &["--workloads 0"]),
        (&["--scale", "2"], &["--scale 2", "(0, 1]"]),
        (&["--window-s", "1"], &["--window-s 1", "low class"]),
        (&["--configs", "fifo"], &["unknown configuration \"fifo\""]),
        (
            &["--scale", "1/100000", "--window-s", "1"],
            &["fills its period"],
        ),
    ];
    fails_each(&dir, &["experiment", "random"], &cases);
    // Nothing was started, so nothing was written.
    assert!(std::fs::read_dir(&dir).unwrap().next().is_none());
    fails(
        &dir,
        &["experiment", "random", "--analyze", "missing"],
        &["--analyze missing", "no such directory"],
    );
}
