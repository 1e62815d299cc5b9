//! `iosets experiment seed004` as a user runs it, through the real binary and a real FUSE mount:
//! a tiny run of two configurations writes finite metrics, the figures and the comparison with
//! the simulator; bad flags are refused in one line before anything starts; an application
//! killed mid-run is reported and the other jobs are still measured. Checked for what the run
//! writes and prints, never for how long it took.
//!
//! Needs `/dev/fuse` and `fusermount3`; a test that mounts says so and passes without checking
//! anything where they are missing. Every run is bounded (killed past its deadline), and after
//! each one nothing of it may be left mounted.

use crate::common;

use std::time::Duration;

use common::experiment::{self, csv, finite, Experiment};
use common::{fails, fails_each, scratch};

/// Seed 004's scratch tag, and the longest one run of the binary may take here.
const SEED004: Experiment = Experiment {
    tag: "iosets-seed004",
    limit: Duration::from_secs(150),
};
/// A tiny scale: windows of about 11 s, one process per job.
const TINY: [&str; 6] = ["--scale", "1/256", "--procs", "1", "--servers", "2"];

const METRICS_HEADER: &str = "config,rep,servers,max_stretch,geomean_stretch,io_slowdown,\
                              utilization,set_overlap,B,B_source";
const JOBS_HEADER: &str =
    "config,rep,job,kind,io_phases,e_cpu_s,e_io_s,stretch,io_slowdown,excluded";

#[test]
fn a_tiny_run_measures_both_configurations_and_draws_them() {
    if !experiment::fuse_available("a_tiny_run_measures_both_configurations_and_draws_them") {
        return;
    }
    let dir = scratch("seed004-tiny");
    // The tiny workload, with `out` as the output (`--out`) or the runs to read (`--analyze`).
    let tiny = |flag: &'static str| -> Vec<&'static str> {
        let workload = ["experiment", "seed004", "--low-jobs", "3"];
        let configs = ["--configs", "timeorder,clairvoyant", flag, "out"];
        workload.into_iter().chain(configs).chain(TINY).collect()
    };
    let (o, pid) = SEED004.run(&dir, &tiny("--out"));
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{stderr}\n{stdout}");
    let out = dir.join("out");

    let metrics = csv(&out.join("metrics.csv"), METRICS_HEADER);
    assert_eq!(metrics.len(), 2, "{metrics:?}");
    for (row, config) in metrics.iter().zip(["timeorder", "clairvoyant"]) {
        assert_eq!(row.len(), 10, "{row:?}");
        assert_eq!(
            (row[0].as_str(), row[1].as_str(), row[2].as_str()),
            (config, "1", "2")
        );
        let [max, geo, slow, util] = [3, 4, 5, 6].map(|i| finite(&row[i]));
        assert!(max >= geo && geo >= 1.0, "{row:?}");
        assert!(slow > 0.0, "{row:?}");
        assert!(util > 0.0 && util <= 1.0, "{row:?}");
        let overlap = finite(&row[7]);
        assert!((0.0..=1.0).contains(&overlap), "{row:?}");
        assert!(finite(&row[8]) > 0.0, "{row:?}");
    }

    // 1 high- and 3 low-frequency jobs per configuration, each with I/O phases and a stretch.
    let jobs = csv(&out.join("jobs.csv"), JOBS_HEADER);
    assert_eq!(jobs.len(), 8, "{jobs:?}");
    for (i, r) in jobs.iter().enumerate() {
        assert_eq!(r[2], (i % 4 + 1).to_string(), "{r:?}");
        assert_eq!(r[3], if i % 4 == 0 { "high" } else { "low" }, "{r:?}");
        assert!(r[4].parse::<u32>().unwrap() > 0, "{r:?}");
        // B is the *median* unshared bandwidth, so a job whose phases all ran faster than
        // the median has a stretch a little under 1 (seen at this tiny scale on a busy host).
        assert!(finite(&r[7]) > 0.9, "{r:?}");
        assert_eq!(r[9], "", "{r:?}");
    }

    // The simulator's prediction beside each of the four metrics of each configuration.
    let sim = csv(
        &out.join("sim.csv"),
        "config,heuristic,metric,predicted,measured_mean,diff_pct",
    );
    assert_eq!(sim.len(), 8, "{sim:?}");
    assert_eq!(
        (sim[0][0].as_str(), sim[0][1].as_str()),
        ("timeorder", "fair-share")
    );
    assert_eq!(
        (sim[4][0].as_str(), sim[4][1].as_str()),
        ("clairvoyant", "set-10")
    );
    for r in &sim {
        finite(&r[3]);
        finite(&r[5]);
    }

    for svg in [
        "box.svg",
        "timeline-timeorder-1.svg",
        "timeline-clairvoyant-1.svg",
    ] {
        let text = std::fs::read_to_string(out.join(svg)).unwrap_or_else(|e| panic!("{svg}: {e}"));
        assert!(text.contains("<svg") && text.contains("</svg>"), "{svg}");
    }
    let timeline = std::fs::read_to_string(out.join("timeline-clairvoyant-1.svg")).unwrap();
    assert!(timeline.contains("server 0") && timeline.contains("server 1"));
    let boxes = std::fs::read_to_string(out.join("box.svg")).unwrap();
    assert!(boxes.contains("clairvoyant") && boxes.contains("I/O slowdown"));

    for needle in [
        "timeorder (arrival order, the baseline)",
        "clairvoyant (iosets, Set-10 priorities written before the start)",
        "max stretch",
        "geomean stretch",
        "utilization",
        "set overlap",
        "verdict: clairvoyant vs timeorder",
        "of 4 metrics",
        "B = ",
    ] {
        assert!(
            stdout.contains(needle),
            "{needle:?} missing from:\n{stdout}"
        );
    }
    SEED004.assert_nothing_left(pid, "the tiny run");

    // --analyze reads the runs back and computes the same numbers, running nothing.
    let before: Vec<String> = ["metrics.csv", "jobs.csv", "sim.csv"]
        .iter()
        .map(|f| std::fs::read_to_string(out.join(f)).unwrap())
        .collect();
    for f in ["metrics.csv", "jobs.csv", "sim.csv"] {
        std::fs::remove_file(out.join(f)).unwrap();
    }
    let again = tiny("--analyze");
    let (o, _) = SEED004.run(&dir, &again);
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{stdout}");
    assert!(!stdout.contains("running"), "{stdout}");
    assert!(stdout.contains("nothing to run (--analyze)"), "{stdout}");
    let after: Vec<String> = ["metrics.csv", "jobs.csv", "sim.csv"]
        .iter()
        .map(|f| std::fs::read_to_string(out.join(f)).unwrap())
        .collect();
    assert_eq!(before, after);
    // Flags that do not match the runs on disk are refused, naming what is missing.
    let servers = |k: &'static str| -> Vec<&str> {
        let at = again.iter().position(|a| *a == "--servers").unwrap() + 1;
        let mut w = again.clone();
        w[at] = k;
        w
    };
    fails(&dir, &servers("3"), &["server2.trace.csv", "--servers 3"]);
    fails(&dir, &servers("1"), &["server1.trace.csv", "more servers"]);
    let mut wrong = again.clone();
    wrong.extend(["--repeat", "2"]);
    fails(&dir, &wrong, &["timeorder-2", "no such run directory"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_crashed_job_is_reported_and_the_others_are_measured() {
    if !experiment::fuse_available("a_crashed_job_is_reported_and_the_others_are_measured") {
        return;
    }
    let dir = scratch("seed004-crash");
    let mut args = vec![
        "experiment",
        "seed004",
        "--low-jobs",
        "2",
        "--configs",
        "timeorder",
        "--kill-job",
        "2@4",
        "--out",
        "out",
    ];
    args.extend(TINY);
    let (o, pid) = SEED004.run(&dir, &args);
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{stderr}\n{stdout}");
    assert!(stdout.contains("job 2 failed: signal: 9"), "{stdout}");
    assert!(stdout.contains("(--kill-job)"), "{stdout}");
    assert!(
        stdout.contains("timeorder #1: job 2 left out of the metrics"),
        "{stdout}"
    );
    let out = dir.join("out");
    let metrics = csv(&out.join("metrics.csv"), METRICS_HEADER);
    assert_eq!(metrics.len(), 1, "{metrics:?}");
    for v in &metrics[0][3..=6] {
        finite(v);
    }
    let jobs = csv(&out.join("jobs.csv"), JOBS_HEADER);
    assert_eq!(jobs.len(), 3, "{jobs:?}");
    for r in &jobs {
        if r[2] == "2" {
            assert_ne!(r[9], "", "the killed job says why it is left out: {r:?}");
            assert_eq!(r[7], "", "{r:?}");
        } else {
            assert_eq!(r[9], "", "{r:?}");
            assert!(
                finite(&r[7]) > 0.9,
                "stretch near or over 1 (B is a median): {r:?}"
            );
        }
    }
    SEED004.assert_nothing_left(pid, "the run with a killed job");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_flags_are_refused_in_one_line() {
    let dir = scratch("seed004-bad");
    let cases: [(&[&str], &[&str]); 9] = [
        (
            &["--configs", "timeorder,bogus"],
            &["\"bogus\"", "timeorder, clairvoyant, auto, auto-error"],
        ),
        (&["--scale", "0"], &["--scale", "(0, 1]"]),
        (&["--scale", "2"], &["--scale", "(0, 1]"]),
        (&["--scale", "-1"], &["--scale", "(0, 1]"]),
        (&["--scale", "fast"], &["--scale fast", "1/20"]),
        // 1/1000 leaves the high-frequency job less than a 1 MiB write per process.
        (&["--scale", "1/1000"], &["1 MiB block", "smallest scale"]),
        (&["--servers", "9"], &["--servers 9", "1 to 8"]),
        (&["--kill-job", "99@1"], &["--kill-job", "no such job"]),
        (
            &["--analyze", "nowhere"],
            &["--analyze nowhere", "no runs/ directory"],
        ),
    ];
    fails_each(&dir, &["experiment", "seed004"], &cases);
    // clap's own refusal: exit 2, naming both flags.
    let o = common::iosets(
        &dir,
        &["experiment", "seed004", "--analyze", ".", "--out", "x"],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--analyze") && err.contains("--out") && err.contains("cannot be used"),
        "{err}"
    );
    // Nothing ran: no output directory was made.
    assert!(std::fs::read_dir(&dir).unwrap().next().is_none());
    let _ = std::fs::remove_dir_all(&dir);
}
