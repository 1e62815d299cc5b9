//! `iosets app periodic`: the phase log it writes, its files, its errors, and one rank per process
//! under `mpirun`.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use iosets_lab::seed004::phaselog::{
    merge_ranks, parse_phase_log, read_phase_log, PhaseKind, PhaseRow,
};

const MIB: u64 = 1 << 20;

/// The app's arguments that every test gives: `--dir DIR --procs PROCS --compute SECONDS
/// --write-mib MIB --iterations ITERATIONS`, in that order.
fn periodic_args<'a>(
    dir: &'a str,
    procs: &'a str,
    compute: &'a str,
    write_mib: &'a str,
    iterations: &'a str,
) -> Vec<&'a str> {
    vec![
        "--dir",
        dir,
        "--procs",
        procs,
        "--compute",
        compute,
        "--write-mib",
        write_mib,
        "--iterations",
        iterations,
    ]
}

fn app(dir: &Path, args: &[&str]) -> Command {
    common::app(dir, "periodic", args)
}

/// Waits for `child` at most `limit` (a guard against a hang, not a measure), killing it then.
fn wait_at_most(child: &mut Child, limit: Duration) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn output_within(mut cmd: Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_at_most(&mut child, limit);
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// Rows in log order must alternate compute, io for iterations 0, 1, ... and never overlap.
fn assert_ordered(rows: &[PhaseRow]) {
    for pair in rows.windows(2) {
        assert!(pair[1].start >= pair[0].end, "overlapping phases: {pair:?}");
    }
    for (i, r) in rows.iter().enumerate() {
        let kind = if i % 2 == 0 {
            PhaseKind::Compute
        } else {
            PhaseKind::Io
        };
        assert_eq!((r.iteration, r.kind), ((i / 2) as u32, kind), "{rows:?}");
    }
}

#[test]
fn the_phase_log_has_one_row_per_phase_and_the_files_their_volume() {
    let dir = common::scratch("app-periodic");
    let data = dir.join("data");
    std::fs::create_dir(&data).unwrap();
    let log = dir.join("job77.csv");
    let mut args = periodic_args(data.to_str().unwrap(), "2", "0.05", "2", "3");
    args.extend(["--fsync", "--log", log.to_str().unwrap(), "--job", "77"]);
    let out = output_within(app(&dir, &args), Duration::from_secs(60));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        out.stdout.is_empty(),
        "the log went to the file: {}",
        text(&out.stdout)
    );

    let raw = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        raw.lines().next(),
        Some("job,rank,iteration,kind,start_unix_s,end_unix_s,bytes")
    );
    let rows = read_phase_log(&log).unwrap();
    assert_eq!(rows.len(), 6, "{raw}");
    assert_ordered(&rows);
    for r in &rows {
        assert_eq!((r.job, r.rank), (77, 0));
        match r.kind {
            PhaseKind::Compute => {
                assert_eq!(r.bytes, 0);
                // The sleep lasted at least --compute (6 decimals in the log).
                assert!(r.end - r.start >= 0.05 - 1e-6, "{r:?}");
            }
            PhaseKind::Io => assert_eq!(r.bytes, 2 * 2 * MIB, "{r:?}"),
        }
    }
    // Six decimals on every time.
    for line in raw.lines().skip(1) {
        let fields: Vec<&str> = line.split(',').collect();
        for t in &fields[4..6] {
            assert_eq!(t.split('.').nth(1).map(str::len), Some(6), "{line}");
        }
    }
    for p in 0..2 {
        let f = data.join(format!("job77.r0.p{p}"));
        assert_eq!(
            std::fs::metadata(&f).unwrap().len(),
            2 * MIB,
            "{}",
            f.display()
        );
    }
    let jobs = merge_ranks(&rows);
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].phases.len(), 6);

    // A second run of another job appends to the same log without a second header.
    let mut again = periodic_args(data.to_str().unwrap(), "2", "0", "1", "1");
    again.extend(["--log", log.to_str().unwrap(), "--job", "78"]);
    let out = output_within(app(&dir, &again), Duration::from_secs(60));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let raw = std::fs::read_to_string(&log).unwrap();
    assert_eq!(raw.matches("job,rank").count(), 1, "{raw}");
    let jobs = merge_ranks(&read_phase_log(&log).unwrap());
    assert_eq!(
        jobs.iter()
            .map(|j| (j.job, j.phases.len()))
            .collect::<Vec<_>>(),
        [(77, 6), (78, 2)]
    );
}

#[test]
fn without_log_the_rows_go_to_stdout_and_odd_blocks_write_the_exact_volume() {
    let dir = common::scratch("app-stdout");
    let mut args = periodic_args(".", "1", "0", "1", "2");
    args.extend(["--block-kib", "300", "--job", "5"]);
    let out = output_within(app(&dir, &args), Duration::from_secs(60));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("job,rank,iteration,kind,start_unix_s,end_unix_s,bytes\n"));
    let rows = parse_phase_log(&stdout).unwrap();
    assert_eq!(rows.len(), 4, "{stdout}");
    assert_ordered(&rows);
    assert_eq!(rows[1].bytes, MIB);
    assert_eq!(
        std::fs::metadata(dir.join("job5.r0.p0")).unwrap().len(),
        MIB
    );
}

#[test]
fn the_job_id_comes_from_the_environment() {
    let dir = common::scratch("app-env");
    let args = periodic_args(".", "1", "0", "1", "1");
    let mut cmd = app(&dir, &args);
    cmd.env("IOSETS_JOB_ID", "4242");
    let out = output_within(cmd, Duration::from_secs(60));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let rows = parse_phase_log(&text(&out.stdout)).unwrap();
    assert!(rows.iter().all(|r| r.job == 4242), "{rows:?}");
    assert!(dir.join("job4242.r0.p0").exists());
}

#[test]
fn stop_at_cuts_a_compute_phase_and_never_an_io_phase() {
    let dir = common::scratch("app-stop");
    let stop_at = unix_now() + 0.5;
    let stop = format!("{stop_at:.6}");
    let mut args = periodic_args(".", "2", "0.2", "1", "1000");
    args.extend(["--job", "3", "--stop-at", &stop]);
    let out = output_within(app(&dir, &args), Duration::from_secs(60));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let rows = parse_phase_log(&text(&out.stdout)).unwrap();
    assert_ordered(&rows);
    let last = rows.last().unwrap();
    assert_eq!(last.kind, PhaseKind::Compute, "{rows:?}");
    // Cut at --stop-at, logged with its real end.
    assert!(last.end >= stop_at - 1e-6, "{last:?} vs {stop_at}");
    assert!(
        last.end - last.start <= 0.2 + 1e-6 || last.start >= stop_at,
        "{last:?}"
    );
    // Every I/O phase was started before --stop-at and completed: 2 MiB each.
    for r in rows.iter().filter(|r| r.kind == PhaseKind::Io) {
        assert!(
            r.start < stop_at && r.end.is_finite() && r.bytes == 2 * MIB,
            "{r:?}"
        );
    }
    assert!(rows.len() < 2000);
}

#[test]
fn release_delays_the_first_compute_phase_and_logs_nothing_before_it() {
    let dir = common::scratch("app-release");
    let launched = unix_now();
    let mut args = periodic_args(".", "1", "0.05", "1", "2");
    args.extend(["--job", "5", "--release", "0.4"]);
    let out = output_within(app(&dir, &args), Duration::from_secs(60));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let rows = parse_phase_log(&text(&out.stdout)).unwrap();
    assert_ordered(&rows);
    // Two iterations, a compute and an I/O phase each: the release is not a phase.
    assert_eq!(rows.len(), 4, "{rows:?}");
    assert_eq!(rows[0].kind, PhaseKind::Compute);
    assert!(
        rows[0].start >= launched + 0.4,
        "{:?} vs {launched}",
        rows[0]
    );
}

#[test]
fn start_at_counts_the_release_from_the_given_time_not_the_start() {
    let dir = common::scratch("app-start-at");
    // One second ahead: counted from the process's start, the release would end about a
    // second before the first phase this asks for.
    let origin = unix_now() + 1.0;
    let origin_arg = format!("{origin:.6}");
    let mut args = periodic_args(".", "1", "0.05", "1", "1");
    args.extend(["--job", "6", "--release", "0.2", "--start-at", &origin_arg]);
    let out = output_within(app(&dir, &args), Duration::from_secs(60));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let rows = parse_phase_log(&text(&out.stdout)).unwrap();
    assert!(rows[0].start >= origin + 0.2, "{:?} vs {origin}", rows[0]);
    // An origin in the past is the plan's launch having been too slow: refused.
    let mut late = periodic_args(".", "1", "0", "1", "1");
    let past = format!("{:.3}", unix_now() - 30.0);
    late.extend(["--job", "6", "--start-at", &past]);
    let out = output_within(app(&dir, &late), Duration::from_secs(60));
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("--start-at"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn ranks_with_a_barrier_start_each_io_phase_together() {
    let dir = common::scratch("app-barrier");
    let meet = dir.join("meet");
    std::fs::create_dir_all(&meet).unwrap();
    let meet_arg = meet.to_str().unwrap();
    // Rank 1 is released 0.4 s after rank 0; with the barrier, rank 0's first I/O phase waits
    // for rank 1's compute phase to end, and so on at every iteration.
    let rank = |r: &str, release: &str| {
        let mut args = periodic_args(".", "1", "0.05", "1", "3");
        args.extend([
            "--job",
            "7",
            "--release",
            release,
            "--barrier-dir",
            meet_arg,
        ]);
        let mut cmd = app(&dir, &args);
        cmd.env("SLURM_PROCID", r).env("SLURM_NTASKS", "2");
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd.spawn().unwrap()
    };
    let r0 = rank("0", "0");
    let r1 = rank("1", "0.4");
    let outs: Vec<Output> = [r0, r1]
        .into_iter()
        .map(|mut c| {
            wait_at_most(&mut c, Duration::from_secs(60));
            c.wait_with_output().unwrap()
        })
        .collect();
    for o in &outs {
        assert!(o.status.success(), "{}", text(&o.stderr));
    }
    let rows: Vec<Vec<PhaseRow>> = outs
        .iter()
        .map(|o| parse_phase_log(&text(&o.stdout)).unwrap())
        .collect();
    let io = |r: usize, it: u32| {
        rows[r]
            .iter()
            .find(|x| x.kind == PhaseKind::Io && x.iteration == it)
            .unwrap_or_else(|| panic!("rank {r} iteration {it}: {:?}", rows[r]))
            .start
    };
    let compute_start = |r: usize, it: u32| {
        rows[r]
            .iter()
            .find(|x| x.kind == PhaseKind::Compute && x.iteration == it)
            .unwrap()
            .start
    };
    for it in 0..3 {
        // Neither rank starts an I/O phase before the other has done its compute phase.
        assert!(io(0, it) >= compute_start(1, it) + 0.05, "{rows:?}");
        assert!(io(1, it) >= compute_start(0, it) + 0.05, "{rows:?}");
    }
    // The barrier's files of the last iterations only are left.
    assert!(std::fs::read_dir(&meet).unwrap().count() <= 4);
}

#[test]
fn bad_flags_fail_with_a_message() {
    let dir = common::scratch("app-bad");
    let file = dir.join("plain-file");
    std::fs::write(&file, b"x").unwrap();
    let base = |dir: &str, procs: &str, compute: &str, mib: &str| -> Vec<String> {
        let mut args = periodic_args(dir, procs, compute, mib, "1");
        args.extend(["--job", "1"]);
        args.iter().map(|s| s.to_string()).collect()
    };
    let cases: Vec<(Vec<String>, &str)> = vec![
        (base(".", "0", "1", "1"), "--procs 0"),
        (base(".", "1", "-1", "1"), "--compute -1"),
        (base(".", "1", "NaN", "1"), "--compute NaN"),
        (base(".", "1", "1", "0"), "--write-mib 0"),
        (base("missing-dir", "1", "1", "1"), "no such directory"),
        (
            base(file.to_str().unwrap(), "1", "1", "1"),
            "not a directory",
        ),
        // Nobody, not even root, creates files in /proc.
        (
            base("/proc", "1", "0", "1"),
            "creating data file /proc/job1.r0.p0",
        ),
        (
            [
                base(".", "1", "1", "1"),
                vec!["--block-kib".into(), "0".into()],
            ]
            .concat(),
            "--block-kib 0",
        ),
        (
            [
                base(".", "1", "1", "1"),
                vec!["--stop-at".into(), "inf".into()],
            ]
            .concat(),
            "--stop-at inf",
        ),
    ];
    for (args, needle) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = output_within(app(&dir, &args), Duration::from_secs(60));
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(
            err.trim().lines().count(),
            1,
            "{args:?}: not one line: {err}"
        );
        assert!(err.contains(needle), "{args:?}: {err:?} lacks {needle:?}");
    }
    // The /proc case names the errno.
    let out = output_within(
        app(
            &dir,
            &base("/proc", "1", "0", "1")
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        ),
        Duration::from_secs(60),
    );
    assert!(
        text(&out.stderr).contains("(errno "),
        "{}",
        text(&out.stderr)
    );
    // A job id that is not a number.
    let mut cmd = app(&dir, &periodic_args(".", "1", "0", "1", "1"));
    cmd.env("IOSETS_JOB_ID", "x1");
    let out = output_within(cmd, Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("IOSETS_JOB_ID=\"x1\" is not a job id"));
    // Missing flags: clap's usage error.
    let out = output_within(app(&dir, &["--dir", "."]), Duration::from_secs(60));
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("--procs"),
        "{}",
        text(&out.stderr)
    );
}

/// A 1 MiB tmpfs: a 2 MiB phase runs out of space mid-phase. Needs the right to mount (root);
/// skipped with a message otherwise.
#[test]
fn an_io_error_mid_phase_names_the_file_and_errno_and_logs_the_unfinished_phase() {
    let dir = common::scratch("app-enospc");
    let small = dir.join("small");
    std::fs::create_dir(&small).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
        .arg(&small)
        .output();
    match mounted {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            eprintln!(
                "skipped: cannot mount a small tmpfs ({})",
                text(&o.stderr).trim()
            );
            return;
        }
        Err(e) => {
            eprintln!("skipped: no mount command ({e})");
            return;
        }
    }
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _guard = Unmount(small.clone());
    let log = dir.join("log.csv");
    let mut args = periodic_args(small.to_str().unwrap(), "1", "0", "2", "2");
    args.extend(["--fsync", "--job", "6", "--log", log.to_str().unwrap()]);
    let out = output_within(app(&dir, &args), Duration::from_secs(60));
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("{}/job6.r0.p0", small.display())),
        "{err}"
    );
    assert!(err.contains("errno 28, ENOSPC"), "{err}");
    assert!(err.contains("iteration 0"), "{err}");
    let rows = read_phase_log(&log).unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[1].kind, PhaseKind::Io);
    assert_eq!(rows[1].end, f64::INFINITY, "the failed phase has no end");
    assert!(rows[1].bytes < 2 * MIB, "{:?}", rows[1]);
}

#[test]
fn sigterm_ends_it_promptly() {
    let dir = common::scratch("app-sigterm");
    let log = dir.join("log.csv");
    let mut args = periodic_args(".", "1", "300", "1", "2");
    args.extend(["--job", "1", "--log", log.to_str().unwrap()]);
    let mut child = app(&dir, &args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The log is opened (its header written) before the first compute phase.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !log.exists() {
        assert!(Instant::now() < deadline, "no log after 30 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    common::signal(child.id(), "TERM");
    // In its 300 s compute phase: it must end long before that.
    let status = wait_at_most(&mut child, Duration::from_secs(30));
    assert!(!status.success(), "{status:?}");
    assert!(read_phase_log(&log).unwrap().is_empty());
}

/// Under `mpirun -np 2`, each rank is one process: rows for ranks 0 and 1 of one job (Open MPI's
/// job id, shared by the ranks), merged into one job. Skipped when `mpirun` is missing.
#[test]
fn under_mpirun_each_rank_logs_and_the_ranks_merge_into_one_job() {
    let found = Command::new("mpirun")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !found.is_ok_and(|s| s.success()) {
        eprintln!("skipped: no mpirun on PATH (Debian: apt-get install openmpi-bin)");
        return;
    }
    let dir = common::scratch("app-mpirun");
    let log = dir.join("log.csv");
    let mut cmd = Command::new("mpirun");
    cmd.current_dir(&dir)
        .args(["--allow-run-as-root", "--oversubscribe", "-np", "2"])
        .arg(env!("CARGO_BIN_EXE_iosets"))
        .args(["app", "periodic"])
        .args(periodic_args(".", "2", "0.05", "1", "2"))
        .args(["--fsync", "--log", log.to_str().unwrap()]);
    for v in ["IOSETS_JOB_ID", "SLURM_JOB_ID"] {
        cmd.env_remove(v);
    }
    let out = output_within(cmd, Duration::from_secs(120));
    assert!(
        out.status.success(),
        "{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let rows = read_phase_log(&log).unwrap();
    assert_eq!(rows.len(), 8, "{rows:?}");
    for rank in 0..2 {
        let mine: Vec<PhaseRow> = rows.iter().filter(|r| r.rank == rank).copied().collect();
        assert_eq!(mine.len(), 4, "rank {rank}: {rows:?}");
        assert_ordered(&mine);
    }
    let raw = std::fs::read_to_string(&log).unwrap();
    assert_eq!(raw.matches("job,rank").count(), 1, "{raw}");
    let jobs = merge_ranks(&rows);
    assert_eq!(jobs.len(), 1, "both ranks under one job: {rows:?}");
    let job = jobs[0].job;
    assert_eq!(jobs[0].phases.len(), 4);
    for p in jobs[0].phases.iter().filter(|p| p.kind == PhaseKind::Io) {
        assert_eq!(p.bytes, 2 * 2 * MIB, "2 ranks x 2 processes x 1 MiB: {p:?}");
        assert!(p.end.is_finite());
    }
    for rank in 0..2 {
        for p in 0..2 {
            let f = dir.join(format!("job{job}.r{rank}.p{p}"));
            assert_eq!(std::fs::metadata(&f).unwrap().len(), MIB, "{}", f.display());
        }
    }
}
