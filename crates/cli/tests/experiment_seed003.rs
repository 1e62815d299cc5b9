//! `iosets experiment seed003` as a user runs it, through the real binary, a real server child
//! and real FUSE mounts: a tiny run of the three settings writes every CSV file and both
//! figures, positive rates, a stage-in time per run, the server's CPU use, and in the `on`
//! run the server's job statistics and `/metrics` show both jobs under the quota rule;
//! `--analyze` recomputes the same files; a run whose server, heavy or light job dies fails
//! naming the run and the log to read, leaving nothing mounted; bad flags are refused in one
//! line. Checked for shapes, never for how fast anything was.
//!
//! The runs need root (the mounts' `allow_other` and the scratch data's extended attributes)
//! and `/dev/fuse`; without them the tests that mount say why and pass without checking.

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::experiment::{self, csv, finite, Experiment};
use common::{fails, fails_each, scratch};

/// Seed 003's scratch tag, and the longest one run of the binary may take here.
const SEED003: Experiment = Experiment {
    tag: "iosets-seed003",
    limit: Duration::from_secs(90),
};
/// A tiny workload: more heavy processes (32) than server workers (24), so that the heavy job
/// fills the server as in seed 003, but a few files each and a short stage-in.
const TINY: [&str; 18] = [
    "--scale",
    "quick",
    "--repeat",
    "1",
    "--heavy-procs",
    "32",
    "--light-procs",
    "4",
    "--files",
    "16",
    "--light-iterations",
    "2",
    "--stagein-dirs",
    "32",
    "--warmup-s",
    "0.5",
    "--stagein-limit-s",
    "30",
];

/// Whether this machine can run the experiment (else the reason is printed).
fn can_mount(test: &str) -> bool {
    let root = std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false);
    if !root {
        eprintln!("{test}: skipped, not running as root");
    }
    root && experiment::fuse_available(test)
}

fn positive(s: &str) -> f64 {
    let v = finite(s);
    assert!(v > 0.0, "{s}");
    v
}

const RUNS_HEADER: &str = "setting,rep,light_create_ops_s,light_stat_ops_s,light_remove_ops_s,\
                           stagein_s,stagein_completed,light_wall_s,server_cpu_s,\
                           server_cpu_pct_core,server_cpu_pct_machine,\
                           stagein_server_cpu_pct_core,light_requests_per_op,heavy_requests_s,\
                           heavy_create_ops_s,heavy_stat_ops_s,heavy_remove_ops_s,snapshot_jobs,\
                           rule_jobs";
const PHASES_HEADER: &str =
    "setting,rep,job,iteration,phase,ranks,ops,start_unix_s,end_unix_s,seconds,ops_per_s";
const MEANS_HEADER: &str = "metric,reference,reference_lower_bound,off,off_lower_bound,on,\
                            on_lower_bound,on_over_off,on_over_reference";

#[test]
fn a_tiny_run_of_the_three_settings_measures_and_draws_them() {
    if !can_mount("a_tiny_run_of_the_three_settings_measures_and_draws_them") {
        return;
    }
    let dir = scratch("seed003-tiny");
    let mut args = vec!["experiment", "seed003", "--out", "out"];
    args.extend(TINY);
    let (o, pid) = SEED003.run(&dir, &args);
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{stderr}\n{stdout}");
    SEED003.assert_nothing_left(pid, "the tiny run");
    let out = dir.join("out");

    let runs = csv(&out.join("runs.csv"), RUNS_HEADER);
    assert_eq!(runs.len(), 3, "{runs:?}");
    for (r, setting) in runs.iter().zip(["reference", "off", "on"]) {
        assert_eq!(r.len(), 19, "{r:?}");
        assert_eq!((r[0].as_str(), r[1].as_str()), (setting, "1"));
        // The light job's three rates, the stage-in (completed: 32 directories in 30 s), the
        // wall time and the server's CPU.
        for i in [2, 3, 4, 5, 7, 9, 10] {
            positive(&r[i]);
        }
        // Every file operation reaches the server (no attribute cache): at least one request.
        assert!(positive(&r[12]) >= 1.0, "{r:?}");
        assert_eq!(r[6], "true", "{r:?}");
        // The heavy job is served in off and on (none in reference).
        if setting == "reference" {
            assert_eq!(r[13], "0.000000", "{r:?}");
            assert!(r[14].is_empty(), "{r:?}");
        } else {
            positive(&r[13]);
        }
        let listed: Vec<&str> = r[17].split(' ').collect();
        assert!(listed.contains(&"2"), "{r:?}");
        assert_eq!(listed.contains(&"1"), setting != "reference", "{r:?}");
        // Only the on run has a rule, with both jobs under it.
        let ruled = if setting == "on" { "1 2" } else { "" };
        assert_eq!(r[18], ruled, "{r:?}");
    }

    // Every phase of the light job (2 iterations × 3 phases) and its stage-in, per run.
    let phases = csv(&out.join("phases.csv"), PHASES_HEADER);
    for setting in ["reference", "off", "on"] {
        let light: Vec<&Vec<String>> = phases
            .iter()
            .filter(|p| p[0] == setting && p[2] == "2")
            .collect();
        assert_eq!(light.len(), 2 * 3 + 1, "{setting}: {light:?}");
        for p in &light {
            let (ranks, ops) = (p[5].as_str(), p[6].as_str());
            if p[4] == "mkdir" {
                assert_eq!((ranks, ops), ("4", "32"), "{p:?}");
            } else {
                assert_eq!((ranks, ops), ("4", "64"), "{p:?}");
            }
            positive(&p[10]);
        }
    }

    let means = csv(&out.join("means.csv"), MEANS_HEADER);
    let keys: Vec<&str> = means.iter().map(|m| m[0].as_str()).collect();
    assert_eq!(
        keys,
        [
            "light_create_ops_s",
            "light_stat_ops_s",
            "light_remove_ops_s",
            "stagein_s",
            "server_cpu_pct_core"
        ]
    );
    for m in &means {
        for i in [1, 3, 5, 7, 8] {
            positive(&m[i]);
        }
    }

    for svg in ["seed003-rates.svg", "seed003-stagein.svg"] {
        let text = std::fs::read_to_string(out.join(svg)).unwrap_or_else(|e| panic!("{svg}: {e}"));
        assert!(text.contains("<svg") && text.contains("</svg>"), "{svg}");
        assert!(text.contains("reference") && text.contains("off"), "{svg}");
    }

    // Each run's own files: the applications' logs, the server's output, the snapshot.
    for run in ["reference-1", "off-1", "on-1"] {
        let d = out.join("runs").join(run);
        for f in [
            "light.csv",
            "stagein.csv",
            "server.stderr",
            "server.stdout",
            "run.csv",
            "snapshot-jobs.json",
            "snapshot-rules.json",
            "snapshot-metrics.txt",
        ] {
            assert!(d.join(f).is_file(), "{run}/{f} missing");
        }
        assert_eq!(d.join("heavy.csv").is_file(), run != "reference-1", "{run}");
        assert_eq!(d.join("quota.toml").is_file(), run == "on-1", "{run}");
    }
    // The on run: the server's metrics show both jobs and the rule's 17 threads of 24.
    let metrics = std::fs::read_to_string(out.join("runs/on-1/snapshot-metrics.txt")).unwrap();
    for needle in [
        "iosets_job_ops_total{job_id=\"1\"",
        "iosets_job_ops_total{job_id=\"2\"",
        "iosets_rule_threads{rule=\"compute\"} 17",
    ] {
        assert!(
            metrics.contains(needle),
            "{needle:?} not in the on run's /metrics"
        );
    }
    let rules = std::fs::read_to_string(out.join("runs/on-1/snapshot-rules.json")).unwrap();
    assert!(
        rules.contains("\"compute\"") && rules.contains("job={1 2}"),
        "{rules}"
    );

    for needle in [
        "light job's mdtest",
        "stage-in",
        "server CPU",
        "on/off",
        "on/reference",
    ] {
        assert!(
            stdout.contains(needle),
            "{needle:?} missing from:\n{stdout}"
        );
    }
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("goal: ")).count(),
        4,
        "{stdout}"
    );
    for l in stdout.lines().filter(|l| l.starts_with("goal: ")) {
        assert!(
            l.ends_with("— MET") || l.ends_with("— NOT MET") || l.ends_with("— UNDECIDED"),
            "{l}"
        );
    }

    // --analyze reads the runs back and writes the same files, running nothing.
    let files = [
        "runs.csv",
        "phases.csv",
        "means.csv",
        "seed003-rates.svg",
        "seed003-stagein.svg",
    ];
    let before: Vec<String> = files
        .iter()
        .map(|f| std::fs::read_to_string(out.join(f)).unwrap())
        .collect();
    for f in files {
        std::fs::remove_file(out.join(f)).unwrap();
    }
    let (o, _) = SEED003.run(&dir, &["experiment", "seed003", "--analyze", "out"]);
    let again = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{again}");
    assert!(again.contains("nothing run"), "{again}");
    assert!(!again.contains("running"), "{again}");
    let after: Vec<String> = files
        .iter()
        .map(|f| std::fs::read_to_string(out.join(f)).unwrap())
        .collect();
    assert_eq!(before, after);
    // A run missing on disk is named.
    std::fs::remove_file(out.join("runs/off-1/light.csv")).unwrap();
    fails(
        &dir,
        &["experiment", "seed003", "--analyze", "out"],
        &["off-1/light.csv"],
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_run_whose_server_or_job_dies_fails_naming_it_and_cleans_up() {
    if !can_mount("a_run_whose_server_or_job_dies_fails_naming_it_and_cleans_up") {
        return;
    }
    for (kill, run, needles) in [
        (
            "server@0",
            "run reference repetition 1",
            ["the server exited", "reference-1/server.stderr"],
        ),
        (
            "light@0",
            "run reference repetition 1",
            ["the light job's mdtest failed", "reference-1/light.stderr"],
        ),
        (
            "heavy@0",
            "run off repetition 1",
            ["the heavy job (job 1) ended", "off-1/heavy.stderr"],
        ),
    ] {
        let dir = scratch(&format!("seed003-kill-{}", &kill[..kill.len() - 2]));
        let mut args = vec!["experiment", "seed003", "--kill", kill, "--out", "out"];
        args.extend(TINY);
        let (o, pid) = SEED003.run(&dir, &args);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(1), "{kill}: {err}");
        let last = err.trim().lines().last().unwrap_or_default().to_string();
        assert!(last.contains(run), "{kill}: {last}");
        for n in needles {
            assert!(last.contains(n), "{kill}: {last:?} lacks {n:?}");
        }
        SEED003.assert_nothing_left(pid, kill);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn bad_flags_are_refused_in_one_line() {
    let dir = scratch("seed003-bad");
    let cases: [(&[&str], &[&str]); 6] = [
        (&["--repeat", "0"], &["--repeat 0", "1 to 100"]),
        (&["--scale", "huge"], &["--scale \"huge\"", "quick or full"]),
        (&["--heavy-procs", "65"], &["--heavy-procs 65", "1 to 64"]),
        (&["--meta-latency-ms", "0"], &["--meta-latency-ms 0"]),
        (&["--files", "0"], &["--files 0"]),
        (
            &["--analyze", "nowhere"],
            &["--analyze nowhere", "no runs/ directory"],
        ),
    ];
    fails_each(&dir, &["experiment", "seed003"], &cases);
    // A directory with runs/ but not what --out writes.
    std::fs::create_dir_all(dir.join("half/runs")).unwrap();
    fails(
        &dir,
        &["experiment", "seed003", "--analyze", "half"],
        &["params.json"],
    );
    Params::write_quick(&dir.join("half"));
    fails(
        &dir,
        &["experiment", "seed003", "--analyze", "half"],
        &["no run of the reference setting"],
    );
    // clap's own refusal: exit 2, naming both flags.
    let o = common::iosets(
        &dir,
        &[
            "experiment",
            "seed003",
            "--analyze",
            "half",
            "--repeat",
            "2",
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--analyze") && err.contains("--repeat"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `params.json` as `--out` writes it, for the refusal tests.
struct Params;

impl Params {
    fn write_quick(dir: &Path) {
        std::fs::write(
            dir.join("params.json"),
            r#"{"scale":"quick","workers":24,"heavy_procs":64,"light_procs":8,"files":20,
                "light_iterations":3,"heavy_stripes":96,"light_stripes":4,
                "meta_latency_ms":0.5,"stagein_dirs":256,"stagein_limit_s":60.0,
                "light_limit_s":600.0,"threads_pct":71.0,"job_share_pct":90.0,"warmup_s":1.0}"#,
        )
        .unwrap();
    }
}
