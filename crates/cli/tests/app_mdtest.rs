//! `iosets app mdtest` on a plain directory, as a user runs it: the rows it logs (one per rank,
//! iteration and phase, each with the files of one rank), what it leaves behind (nothing of an
//! mdtest run, exactly N directories of a stage-in), its failures (the path and the errno) and
//! its refusals.

use crate::common;

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use common::{fails, scratch};

const HEADER: &str = "job,rank,iteration,phase,start_unix_s,end_unix_s,ops";

/// Runs `iosets app mdtest ARGS` in `dir` with `env`, killed (and failing the test) after 60 s.
fn mdtest(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = common::app(dir, "mdtest", args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{args:?}: still running after 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// A row of the log.
#[derive(Debug)]
struct Row {
    job: u64,
    rank: u32,
    iteration: u32,
    phase: String,
    start: f64,
    end: f64,
    ops: u64,
}

fn rows(text: &str) -> Vec<Row> {
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(HEADER), "{text}");
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            assert_eq!(f.len(), 7, "{l}");
            Row {
                job: f[0].parse().unwrap(),
                rank: f[1].parse().unwrap(),
                iteration: f[2].parse().unwrap(),
                phase: f[3].to_string(),
                start: f[4].parse().unwrap(),
                end: f[5].parse().unwrap(),
                ops: f[6].parse().unwrap(),
            }
        })
        .collect()
}

/// Names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn every_rank_logs_every_phase_of_every_iteration_and_leaves_nothing() {
    let dir = scratch("mdtest-rows");
    let work = dir.join("work");
    std::fs::create_dir(&work).unwrap();
    let o = mdtest(
        &dir,
        &[
            "--dir", "work", "--procs", "3", "-n", "7", "-i", "2", "--job", "42", "--log",
            "log.csv",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let log = rows(&std::fs::read_to_string(dir.join("log.csv")).unwrap());
    // ranks × iterations × 3 phases.
    assert_eq!(log.len(), 3 * 2 * 3);
    for rank in 0..3 {
        for iteration in 0..2 {
            for phase in ["create", "stat", "remove"] {
                let n = log
                    .iter()
                    .filter(|r| r.rank == rank && r.iteration == iteration && r.phase == phase)
                    .count();
                assert_eq!(n, 1, "rank {rank} iteration {iteration} {phase}");
            }
        }
    }
    for r in &log {
        assert_eq!((r.job, r.ops), (42, 7), "{r:?}");
        assert!(r.end >= r.start, "{r:?}");
    }
    // A barrier ends each phase: no rank starts a phase before every rank ended the one before.
    let order = ["create", "stat", "remove"];
    for iteration in 0..2u32 {
        for k in 0..3 {
            let (this, next) = (
                (iteration, order[k]),
                if k == 2 {
                    (iteration + 1, order[0])
                } else {
                    (iteration, order[k + 1])
                },
            );
            let ends = log
                .iter()
                .filter(|r| (r.iteration, r.phase.as_str()) == this)
                .map(|r| r.end)
                .fold(f64::NEG_INFINITY, f64::max);
            let starts = log
                .iter()
                .filter(|r| (r.iteration, r.phase.as_str()) == next)
                .map(|r| r.start)
                .fold(f64::INFINITY, f64::min);
            assert!(
                starts >= ends,
                "{this:?} ends at {ends}, {next:?} starts at {starts}"
            );
        }
    }
    // Every file removed, and the rank directories the run made with them.
    assert!(names(&work).is_empty(), "{:?}", names(&work));
    // The summary on stdout, as mdtest prints it.
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("File creation") && out.contains("File removal"),
        "{out}"
    );
}

#[test]
fn a_rank_directory_made_beforehand_is_used_and_kept() {
    let dir = scratch("mdtest-existing");
    std::fs::create_dir_all(dir.join("7.r0")).unwrap();
    let o = mdtest(
        &dir,
        &[
            "--dir", ".", "--procs", "2", "--files", "4", "--log", "log.csv",
        ],
        &[("IOSETS_JOB_ID", "7")],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let log = rows(&std::fs::read_to_string(dir.join("log.csv")).unwrap());
    assert_eq!(log.len(), 2 * 3);
    assert!(
        log.iter().all(|r| r.job == 7),
        "the job comes from IOSETS_JOB_ID"
    );
    // The directory made beforehand stays (empty); the one the run made is gone.
    assert!(names(&dir.join("7.r0")).is_empty());
    assert!(!dir.join("7.r1").exists());
}

#[test]
fn the_log_goes_to_stdout_without_log() {
    let dir = scratch("mdtest-stdout");
    let o = mdtest(
        &dir,
        &["--dir", ".", "--procs", "2", "-n", "3", "--job", "5"],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let log = rows(&String::from_utf8_lossy(&o.stdout));
    assert_eq!(log.len(), 2 * 3);
}

#[test]
fn mkdirs_makes_exactly_n_directories_split_over_the_processes() {
    let dir = scratch("mdtest-mkdirs");
    let o = mdtest(
        &dir,
        &[
            "--dir", ".", "--procs", "3", "--mkdirs", "10", "--job", "9", "--log", "s.csv",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let made = names(&dir.join("stagein.9"));
    assert_eq!(made.len(), 10, "{made:?}");
    for k in 0..10 {
        assert!(made.contains(&format!("rank{k}")), "{made:?}");
        assert!(dir.join("stagein.9").join(format!("rank{k}")).is_dir());
    }
    let log = rows(&std::fs::read_to_string(dir.join("s.csv")).unwrap());
    assert_eq!(log.len(), 3);
    assert!(log.iter().all(|r| r.phase == "mkdir" && r.iteration == 0));
    let mut ops: Vec<u64> = log.iter().map(|r| r.ops).collect();
    ops.sort_unstable();
    // 10 over 3 processes: 3, 3, 4.
    assert_eq!(ops, vec![3, 3, 4]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("t_E - t_S"), "{out}");
    // Again: the directories exist, the stage-in fails naming one and EEXIST.
    fails(
        &dir,
        &[
            "app", "mdtest", "--dir", ".", "--procs", "1", "--mkdirs", "2", "--job", "9",
        ],
        &["stagein.9/rank", "EEXIST"],
    );
}

#[test]
fn a_create_that_fails_names_the_path_and_the_errno() {
    let dir = scratch("mdtest-eexist");
    std::fs::create_dir_all(dir.join("3.r1")).unwrap();
    std::fs::write(dir.join("3.r1").join("file.mdtest.1.2"), b"").unwrap();
    let o = mdtest(
        &dir,
        &[
            "--dir", ".", "--procs", "2", "-n", "5", "--job", "3", "--log", "l.csv",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    for needle in [
        "rank 1",
        "create",
        "3.r1/file.mdtest.1.2",
        "errno 17, EEXIST",
    ] {
        assert!(err.contains(needle), "{err:?} lacks {needle:?}");
    }
    // The failed phase is not logged.
    let log = rows(&std::fs::read_to_string(dir.join("l.csv")).unwrap());
    assert!(
        log.iter().all(|r| r.phase != "create" || r.rank != 1),
        "{log:?}"
    );
}

#[test]
fn stop_at_in_the_past_runs_no_phase() {
    let dir = scratch("mdtest-stop");
    let o = mdtest(
        &dir,
        &[
            "--dir",
            ".",
            "--procs",
            "2",
            "-n",
            "3",
            "-i",
            "5",
            "--job",
            "1",
            "--stop-at",
            "1",
            "--log",
            "l.csv",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(rows(&std::fs::read_to_string(dir.join("l.csv")).unwrap()).is_empty());
    // The rank directories it made, still empty, are gone.
    assert_eq!(names(&dir), vec!["l.csv".to_string()]);
}

#[test]
fn bad_flags_are_refused_in_one_line() {
    let dir = scratch("mdtest-flags");
    let base = ["app", "mdtest", "--dir", ".", "--job", "1"];
    let with = |extra: &[&'static str]| -> Vec<&str> {
        base.iter().copied().chain(extra.iter().copied()).collect()
    };
    fails(&dir, &with(&["--procs", "0", "-n", "1"]), &["--procs 0"]);
    fails(&dir, &with(&["--procs", "1", "-n", "0"]), &["--files 0"]);
    fails(
        &dir,
        &with(&["--procs", "1", "--mkdirs", "0"]),
        &["--mkdirs 0"],
    );
    fails(
        &dir,
        &with(&["--procs", "1", "-n", "1", "-i", "0"]),
        &["--iterations 0"],
    );
    fails(
        &dir,
        &with(&["--procs", "1", "--mkdirs", "3", "-i", "2"]),
        &["one stage-in"],
    );
    fails(
        &dir,
        &[
            "app", "mdtest", "--dir", "missing", "--procs", "1", "-n", "1", "--job", "1",
        ],
        &["--dir missing", "no such directory"],
    );
    // A log that is another app's.
    std::fs::write(dir.join("other.csv"), "job,rank,iteration,kind\n").unwrap();
    fails(
        &dir,
        &with(&["--procs", "1", "-n", "1", "--log", "other.csv"]),
        &["not an mdtest log"],
    );
    // clap refuses --files with --mkdirs, and neither given.
    let o = mdtest(&dir, &["--dir", ".", "--procs", "1", "--job", "1"], &[]);
    assert_eq!(o.status.code(), Some(2));
    let o = mdtest(
        &dir,
        &["--dir", ".", "--procs", "1", "-n", "2", "--mkdirs", "2"],
        &[],
    );
    assert_eq!(o.status.code(), Some(2));
}
