//! `iosets demo`: seed 004's experiment on two real servers, through the client library.
//! Checked for what it prints and writes, not for the numbers (one run on a shared machine).

use crate::common;

use common::{fails_each, iosets, scratch, stderr, stdout};

#[test]
fn quick_demo_runs_every_configuration_and_writes_csv() {
    let dir = scratch("io-demo");
    let o = iosets(
        &dir,
        &[
            "demo",
            "--quick",
            "--low-jobs",
            "2",
            "--auto",
            "--out",
            "out",
        ],
    );
    let out = stdout(&o);
    assert!(o.status.success(), "{}\n{out}", stderr(&o));
    for needle in [
        "policy timeorder",
        "policy iosets (",
        "policy iosets-auto (",
        "Set-10 set -1, priority 10",
        "verdict: iosets (Set-10) vs timeorder",
        "verdict: iosets (automatic priorities) vs timeorder",
        "max stretch",
        "geomean stretch",
        "I/O slowdown",
        "utilization",
        "verdict: ",
    ] {
        assert!(out.contains(needle), "{needle:?} missing from:\n{out}");
    }
    // The metrics table: four rows, three finite values each.
    for name in [
        "max stretch",
        "geomean stretch",
        "I/O slowdown",
        "utilization",
    ] {
        let line = out
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no {name} row in {out}"));
        let values: Vec<f64> = line[line.find(name).unwrap() + name.len()..]
            .split_whitespace()
            .map(|v| v.parse().unwrap())
            .collect();
        assert_eq!(values.len(), 3, "{line}");
        assert!(values.iter().all(|v| v.is_finite() && *v > 0.0), "{line}");
    }

    let jobs = std::fs::read_to_string(dir.join("out/io-demo-jobs.csv")).unwrap();
    let mut lines = jobs.lines();
    assert_eq!(
        lines.next(),
        Some(
            "policy,job,kind,io_phases,mean_io_phase_s,alone_io_phase_s,e_cpu_s,e_io_s,stretch,\
             io_slowdown"
        )
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    // 1 high-frequency + 2 low-frequency jobs, under each configuration.
    assert_eq!(rows.len(), 9, "{jobs}");
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r.len(), 10, "{r:?}");
        assert_eq!(r[0], ["timeorder", "iosets", "iosets-auto"][i / 3]);
        assert_eq!(r[2], if i % 3 == 0 { "high" } else { "low" });
        // Every job computed inside the window, so it has a stretch.
        let e_cpu: f64 = r[6].parse().unwrap();
        let stretch: f64 = r[8].parse().unwrap();
        assert!(e_cpu > 0.0 && stretch.is_finite(), "{r:?}");
    }
    // The high-frequency job finished write phases under every configuration.
    for r in [&rows[0], &rows[3], &rows[6]] {
        assert!(r[3].parse::<u32>().unwrap() > 0, "{r:?}");
    }
    let metrics = std::fs::read_to_string(dir.join("out/io-demo-metrics.csv")).unwrap();
    assert!(metrics.starts_with("policy,max_stretch,geomean_stretch,io_slowdown,utilization\n"));
    assert_eq!(metrics.lines().count(), 4, "{metrics}");
    // Only its own lines: the servers' and the mount's log lines are in each run's log.txt.
    let err = stderr(&o);
    for noise in [" INFO ", " WARN ", "Failed to umount"] {
        assert!(
            !out.contains(noise) && !err.contains(noise),
            "{noise:?} in:\n{out}\n{err}"
        );
    }
    for run in ["timeorder-1", "clairvoyant-1", "auto-1"] {
        let log = std::fs::read_to_string(dir.join("out/runs").join(run).join("log.txt")).unwrap();
        assert!(
            log.contains("serving") && log.contains("mounted"),
            "{run}: {log}"
        );
    }
    // A legend of the columns; --quick gives no verdict, and says why.
    assert!(
        out.contains("I/O slow =") && out.contains("e_cpu ="),
        "{out}"
    );
    assert!(!out.contains("better on"), "{out}");
    assert!(out.contains("none from --quick"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn demo_refuses_bad_flags_in_one_line() {
    let dir = scratch("io-demo-bad");
    let cases: [(&[&str], &[&str]); 2] = [
        (&["--low-jobs", "0"], &["--low-jobs", "1 to 32"]),
        (&["--throttle-mib-s", "0.1"], &["--throttle-mib-s", "MiB/s"]),
    ];
    fails_each(&dir, &["demo"], &cases);
    let _ = std::fs::remove_dir_all(&dir);
}
