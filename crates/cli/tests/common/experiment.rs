//! Running `iosets experiment …` in tests: bounded in time, and checking that a run left no
//! mount and no scratch directory behind.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Whether this machine can mount FUSE file systems (else why not is printed, for `test`).
pub fn fuse_available(test: &str) -> bool {
    let dev = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
        .is_ok();
    let fusermount = Command::new("fusermount3")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    if !dev {
        eprintln!("{test}: skipped, /dev/fuse cannot be opened");
    } else if !fusermount {
        eprintln!("{test}: skipped, fusermount3 is missing (Debian package fuse3)");
    }
    dev && fusermount
}

/// One `iosets experiment` under test: the tag of its scratch directories and mounts
/// (`iosets-seed003`, see [`leftover_mounts`]) and the longest one run of it may take.
#[derive(Clone, Copy, Debug)]
pub struct Experiment {
    /// The prefix of its scratch directories and mount points.
    pub tag: &'static str,
    /// The longest one run may take before the test fails.
    pub limit: Duration,
}

impl Experiment {
    /// Runs `iosets ARGS` in `dir`, killed if it outlives [`Experiment::limit`]; returns its
    /// output and its process id.
    pub fn run(&self, dir: &Path, args: &[&str]) -> (Output, u32) {
        run_bounded(dir, args, self.limit)
    }

    /// Asserts that the run `pid` left no mount and no scratch directory behind; `case` names
    /// it.
    pub fn assert_nothing_left(&self, pid: u32, case: &str) {
        assert_nothing_left(self.tag, pid, case)
    }
}

/// `s` as a finite number; panics naming `s` otherwise.
pub fn finite(s: &str) -> f64 {
    let v: f64 = s
        .parse()
        .unwrap_or_else(|_| panic!("{s:?} is not a number"));
    assert!(v.is_finite(), "{s}");
    v
}

/// Runs `iosets ARGS` in `dir`, killed if it outlives `limit`; returns its output and its
/// process id.
pub fn run_bounded(dir: &Path, args: &[&str], limit: Duration) -> (Output, u32) {
    let (out, err) = (dir.join("stdout.txt"), dir.join("stderr.txt"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_iosets"))
        .current_dir(dir)
        .args(args)
        .stdin(Stdio::null())
        .stdout(File::create(&out).unwrap())
        .stderr(File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let pid = child.id();
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{args:?} still running after {limit:?}; stdout so far:\n{}",
                std::fs::read_to_string(&out).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let output = Output {
        status,
        stdout: std::fs::read(&out).unwrap(),
        stderr: std::fs::read(&err).unwrap(),
    };
    (output, pid)
}

/// Asserts that the experiment process `pid` left no mount and no scratch directory behind
/// (none of [`leftover_mounts`] and [`leftover_dirs`]); `case` names the run in a failure.
pub fn assert_nothing_left(experiment: &str, pid: u32, case: &str) {
    assert_eq!(
        leftover_mounts(experiment, pid),
        Vec::<String>::new(),
        "{case}"
    );
    assert_eq!(
        leftover_dirs(experiment, pid),
        Vec::<PathBuf>::new(),
        "{case}"
    );
}

/// The mounts the experiment process `pid` made that are still mounted (its mount points are
/// named `<experiment>-<pid>-...`, e.g. `iosets-seed004-1234-...`).
pub fn leftover_mounts(experiment: &str, pid: u32) -> Vec<String> {
    let tag = format!("{experiment}-{pid}-");
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|l| l.contains(&tag))
        .map(str::to_owned)
        .collect()
}

/// The scratch directories of the experiment process `pid` still there: its data roots (on
/// tmpfs or in the temporary directory) and mount points.
pub fn leftover_dirs(experiment: &str, pid: u32) -> Vec<PathBuf> {
    let tag = format!("{experiment}-{pid}-");
    [Path::new("/dev/shm").to_path_buf(), std::env::temp_dir()]
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flatten()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with(&tag))
        .map(|e| e.path())
        .collect()
}

/// A CSV file as rows of fields, after checking its header.
pub fn csv(path: &Path, header: &str) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(header), "{path:?}");
    lines
        .map(|l| l.split(',').map(str::to_owned).collect())
        .collect()
}
