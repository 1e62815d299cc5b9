//! The `iosets` binary end to end: the demo, replays of a trace and of a generated workload, the
//! policy list, and a one-line error naming the problem for each bad input.

use crate::common;

use common::{fails, fails_each, iosets, scratch, stderr, succeeds};

const TRACE: &str = "time_s,job,size,op\n0,1,4096,write\n0,2,8192,write\n0.001,1,4096,write\n\
                     0.001,2,4096,read\n0.002,1,65536,write\n";

#[test]
fn demo_wfq_prints_the_four_shares_and_writes_csv_and_svg() {
    let dir = scratch("demo");
    let out = succeeds(&dir, &["demo-wfq"]);
    for (job, expect) in [(1, "10.0%"), (2, "20.0%"), (3, "30.0%"), (4, "40.0%")] {
        let line = out
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("job {job} ")))
            .unwrap_or_else(|| panic!("no line for job {job} in {out}"));
        let cells: Vec<&str> = line.split_whitespace().collect();
        // queue (2 words), weight, expected, measured, min, max, drained at (2), request #
        assert_eq!(cells[3], expect, "{line}");
        let measured: f64 = cells[4].trim_end_matches('%').parse().unwrap();
        let expected: f64 = expect.trim_end_matches('%').parse().unwrap();
        assert!((measured - expected).abs() < 1.0, "{line}");
    }
    let csv = std::fs::read_to_string(dir.join("out/demo-shares.csv")).unwrap();
    assert!(csv.starts_with("window_start,window_end,time_s,job_1,job_2,job_3,job_4\n"));
    assert_eq!(csv.lines().count(), 1 + 4000 - 300 + 1);
    let svg = std::fs::read_to_string(dir.join("out/demo-shares.svg")).unwrap();
    assert!(svg.contains("<svg") && svg.contains("job 4 (expected 40.0%)"));
    assert!(
        out.contains("out/demo-shares.csv") && out.contains("out/demo-shares.svg"),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn replay_of_a_csv_trace_prints_the_summary_and_writes_files() {
    let dir = scratch("trace");
    std::fs::write(dir.join("t.csv"), TRACE).unwrap();
    let out = succeeds(
        &dir,
        &[
            "replay",
            "--policy",
            "wfq",
            "--opt",
            "weight.1=3",
            "--trace",
            "t.csv",
            "--window",
            "2",
            "--csv",
            "s.csv",
            "--plot",
            "s.svg",
            "--slots",
            "2",
            "--latency-us",
            "10",
        ],
    );
    assert!(out.contains("job 1") && out.contains("job 2"), "{out}");
    assert!(out.contains("policy wfq: 5 requests"), "{out}");
    // weight.1=3, job 2 has the default 1: 75% / 25%.
    assert!(out.contains("75.0%") && out.contains("25.0%"), "{out}");
    let csv = std::fs::read_to_string(dir.join("s.csv")).unwrap();
    assert!(
        csv.starts_with("window_start,window_end,time_s,job_1,job_2\n0,2,"),
        "{csv}"
    );
    assert_eq!(csv.lines().count(), 1 + 4);
    assert!(std::fs::read_to_string(dir.join("s.svg"))
        .unwrap()
        .contains("<svg"));

    let quiet = iosets(&dir, &["replay", "--trace", "t.csv", "--quiet"]);
    assert!(quiet.status.success() && quiet.stdout.is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn replay_of_a_generated_workload_through_iosets() {
    let dir = scratch("gen");
    let out = succeeds(
        &dir,
        &[
            "replay",
            "--policy",
            "iosets",
            "--jobs",
            "3",
            "--requests",
            "600",
            "--size-min",
            "4KiB",
            "--size-max",
            "4MiB",
            "--sizes",
            "heavy",
            "--assign",
            "roundrobin",
            "--rate",
            "2000",
            "--priorities",
            "0.1,0.1,0.01",
            "--seed",
            "3",
            "--slots",
            "2",
            "--share-by",
            "priority",
            "--window",
            "100",
        ],
    );
    assert!(
        out.contains("priority 0.1") && out.contains("priority 0.01"),
        "{out}"
    );
    assert!(out.contains("policy iosets: 600 requests"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn policies_lists_every_policy_with_its_tunables() {
    let out = succeeds(&std::env::temp_dir(), &["policies"]);
    for p in iosets_policy::registry::POLICIES {
        assert!(out.contains(p.name) && out.contains(p.summary), "{out}");
        for t in p.tunables {
            assert!(
                out.contains(t.name) && out.contains(t.help),
                "{} {}: {out}",
                p.name,
                t.name
            );
        }
    }
}

#[test]
fn unknown_policy_lists_the_valid_ones() {
    let mut needles = vec!["unknown policy", "cfqq"];
    let names = iosets_policy::registry::names();
    needles.extend(names.iter().copied());
    fails(
        &std::env::temp_dir(),
        &["replay", "--policy", "cfqq", "--requests", "10"],
        &needles,
    );
}

#[test]
fn bad_tunables_are_errors() {
    for (opt, needles) in [
        ("weight.1=-1", ["weight.1", "bad value"]),
        ("nosuch=1", ["unknown tunable", "nosuch"]),
        ("weight", ["malformed", "key=value"]),
    ] {
        let args = ["replay", "--opt", opt, "--requests", "10"];
        fails(&std::env::temp_dir(), &args, &needles);
    }
}

#[test]
fn bad_device_and_measurement_flags_are_errors() {
    for (flag, value, needle) in [
        ("--slots", "0", "slots"),
        ("--bandwidth-mib-s", "0", "bandwidth"),
        ("--bandwidth-mib-s", "-5", "bandwidth"),
        ("--latency-us", "-1", "latency"),
        ("--window", "0", "--window"),
    ] {
        let args = ["replay", flag, value, "--requests", "10"];
        fails(&std::env::temp_dir(), &args, &[needle]);
    }
}

#[test]
fn bad_workload_flags_are_errors() {
    let cases: [(&[&str], &[&str]); 5] = [
        (
            &["--size-min", "2MiB", "--size-max", "1MiB"],
            &["size_min", "size_max"],
        ),
        (
            &["--jobs", "3", "--priorities", "0.1,0.2"],
            &["priorities", "3 jobs"],
        ),
        (
            &["--jobs", "2", "--priorities", "0.1,0"],
            &["--priorities", "0"],
        ),
        (&["--rate", "-3"], &["rate"]),
        (&["--jobs", "0"], &["jobs"]),
    ];
    fails_each(&std::env::temp_dir(), &["replay"], &cases);
}

#[test]
fn unreadable_or_malformed_traces_are_errors() {
    let dir = scratch("badtrace");
    for (name, text) in [
        ("bad.csv", "time_s,job,size\n0,1,10\n0,one,10\n"),
        ("neg.csv", "time_s,job,size,priority\n0,1,10,1\n0,1,10,-1\n"),
        ("empty.csv", ""),
    ] {
        std::fs::write(dir.join(name), text).unwrap();
    }
    fails_each(
        &dir,
        &["replay", "--trace"],
        &[
            (&["missing.csv"], &["missing.csv", "reading the trace"]),
            (&["bad.csv"], &["bad.csv", "line 3", "job", "\"one\""]),
            (&["neg.csv"], &["line 3", "priority"]),
            (&["empty.csv"], &["line 1", "empty"]),
        ],
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn clap_rejects_unknown_flags_and_mixed_sources() {
    let tmp = std::env::temp_dir();
    let o = iosets(&tmp, &["replay", "--frobnicate"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--frobnicate"));
    let o = iosets(&tmp, &["replay", "--trace", "t.csv", "--jobs", "3"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("cannot be used with"), "{}", stderr(&o));
    let o = iosets(&tmp, &["replay", "--sizes", "zipf"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("uniform") && stderr(&o).contains("heavy"));
}

#[test]
fn device_presets_and_seek_flags() {
    let dir = scratch("device");
    let gen = ["--jobs", "4", "--requests", "400", "--quiet"];
    for preset in ["hdd", "ssd"] {
        let mut args = vec!["replay", "--policy", "elevator", "--device", preset];
        args.extend(gen);
        succeeds(&dir, &args);
    }
    let mut args = vec!["replay", "--seek-ms-per-gib", "8", "--max-seek-ms", "8"];
    args.extend(gen);
    succeeds(&dir, &args);
    // A preset with a device flag, half of the seek pair, a negative seek: clear errors.
    let o = iosets(&dir, &["replay", "--device", "hdd", "--slots", "2"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("cannot be used with"), "{}", stderr(&o));
    let o = iosets(&dir, &["replay", "--seek-ms-per-gib", "8"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--max-seek-ms"), "{}", stderr(&o));
    fails(
        &dir,
        &["replay", "--seek-ms-per-gib", "-1", "--max-seek-ms", "8"],
        &["--seek-ms-per-gib -1"],
    );
    let o = iosets(&dir, &["replay", "--device", "floppy"]);
    assert_eq!(o.status.code(), Some(2));
}
