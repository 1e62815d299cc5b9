//! `iosets mount` and `iosets umount` as a user runs them, through the real binary: bad input
//! is refused with nothing left mounted; a signal during writes keeps every acknowledged write
//! and leaves the mount point usable; a `kill -9` is cleaned up by `iosets umount`; `--daemon`
//! detaches and ends with its unmount; `--help` names the options.
//!
//! Needs root (or a working `fusermount3`) and `/dev/fuse`; a test that mounts says so and
//! passes without checking anything where `/dev/fuse` cannot be opened.
//!
//! Every test is bounded: each wait has a deadline, and a [`Mount`] guard kills the mount
//! process and unmounts its mount point on every path, so a failing test leaves nothing behind.

use crate::common;

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use common::{scratch, signal};

const BIN: &str = env!("CARGO_BIN_EXE_iosets");
/// `ENOTCONN` on Linux: what a FUSE mount whose process died answers.
const ENOTCONN: i32 = 107;
/// `EIO` on Linux: what a request the mount's timeout ended answers.
const EIO: i32 = 5;
/// How long a mount may take to appear.
const MOUNT_DEADLINE: Duration = Duration::from_secs(20);
/// How long a command that should fail at once may run before the test gives up on it.
const QUICK: Duration = Duration::from_secs(10);

/// Whether this machine can mount FUSE file systems at all.
fn fuse_available(test: &str) -> bool {
    let ok = OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
        .is_ok();
    if !ok {
        eprintln!("{test}: skipped, /dev/fuse cannot be opened");
    }
    ok
}

/// The mount points of this mount namespace (`/proc/self/mountinfo`, octal escapes undone),
/// with their file system types.
fn mounts() -> Vec<(PathBuf, String)> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    text.lines()
        .filter_map(|l| {
            let fields: Vec<&str> = l.split(' ').collect();
            let dash = fields.iter().position(|f| *f == "-")?;
            Some((
                PathBuf::from(unescape(fields.get(4)?)),
                fields.get(dash + 1)?.to_string(),
            ))
        })
        .collect()
}

fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(u8::is_ascii_digit) {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The type of what is mounted at `point` (an absolute, canonical path), if anything.
fn mounted(point: &Path) -> Option<String> {
    mounts()
        .into_iter()
        .rev()
        .find(|(p, _)| p == point)
        .map(|(_, t)| t)
}

/// A scratch directory (canonical path), removed at the end unless something is still mounted
/// under it (then it is left, and said so, rather than deleting through a mount).
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = scratch(&format!("mount-{name}"));
        Scratch(std::fs::canonicalize(dir).unwrap())
    }

    /// A new empty directory in it.
    fn dir(&self, name: &str) -> PathBuf {
        let d = self.0.join(name);
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if mounts().iter().any(|(p, _)| p.starts_with(&self.0)) {
            eprintln!(
                "leaving {}: something is still mounted in it",
                self.0.display()
            );
            return;
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What a bounded run of the binary gave.
#[derive(Debug)]
struct Ran {
    status: ExitStatus,
    stdout: String,
    stderr: String,
    took: Duration,
}

impl Ran {
    fn code(&self) -> Option<i32> {
        self.status.code()
    }
}

static RUNS: AtomicUsize = AtomicUsize::new(0);

/// Waits for `child` until `limit`; `None` if it is still running then.
fn wait_until(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return Some(s);
        }
        if Instant::now() > deadline {
            return None;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `iosets ARGS` in `dir` with its output in files (not pipes: a background process it
/// starts must not hold the test's pipes open), killed and failed past `limit`.
fn run(dir: &Path, args: &[&str], limit: Duration) -> Ran {
    let n = RUNS.fetch_add(1, Ordering::Relaxed);
    let out = dir.join(format!(".run{n}.out"));
    let err = dir.join(format!(".run{n}.err"));
    let start = Instant::now();
    let mut child = Command::new(BIN)
        .current_dir(dir)
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let status = wait_until(&mut child, limit);
    let took = start.elapsed();
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    let Some(status) = status else {
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "iosets {args:?} still running after {limit:?}; stderr: {}",
            read(&err)
        );
    };
    let ran = Ran {
        status,
        stdout: read(&out),
        stderr: read(&err),
        took,
    };
    let _ = std::fs::remove_file(out);
    let _ = std::fs::remove_file(err);
    ran
}

/// Runs and expects exit code 1 with a one-line message containing every `needle`.
fn fails(dir: &Path, args: &[&str], needles: &[&str]) -> Ran {
    let r = run(dir, args, QUICK);
    assert_eq!(r.code(), Some(1), "{args:?}: {r:?}");
    assert_eq!(
        r.stderr.trim().lines().count(),
        1,
        "{args:?}: not one line: {}",
        r.stderr
    );
    for n in needles {
        assert!(r.stderr.contains(n), "{args:?}: {:?} lacks {n:?}", r.stderr);
    }
    r
}

/// Whether process `pid` has ended (gone, or a zombie nobody reaped yet).
fn ended(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name, which is in parentheses.
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().next())
            .is_some_and(|state| state == "Z" || state == "X"),
        Err(_) => true,
    }
}

/// A mount point under test, and the process serving it, if any. Dropping it kills that
/// process and unmounts the point if it is still mounted, so no path out of a test leaves a
/// mount behind.
struct Mount {
    point: PathBuf,
    child: Option<Child>,
    /// The background process of `--daemon`, which is not our child.
    daemon: Option<u32>,
    log: PathBuf,
}

impl Mount {
    /// Only watches `point`: whatever gets mounted there is unmounted at the end.
    fn watch(point: &Path) -> Mount {
        Mount {
            point: point.to_path_buf(),
            child: None,
            daemon: None,
            log: PathBuf::new(),
        }
    }

    /// Starts `iosets mount POINT ARGS` in the foreground, its output in `log`.
    fn start(dir: &Path, point: &Path, args: &[&str], log: &Path) -> Mount {
        let file = std::fs::File::create(log).unwrap();
        let child = Command::new(BIN)
            .current_dir(dir)
            .arg("mount")
            .arg(point)
            .args(args)
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap();
        Mount {
            point: point.to_path_buf(),
            child: Some(child),
            daemon: None,
            log: log.to_path_buf(),
        }
    }

    /// Starts `iosets mount POINT --local ROOT` as [`Mount::start`] does, and waits until the
    /// point is mounted.
    fn local(dir: &Path, point: &Path, root: &Path, log: &Path) -> Mount {
        let mut m = Mount::start(dir, point, &["--local", root.to_str().unwrap()], log);
        m.wait_mounted();
        m
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().expect("a mount process").id()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the point is mounted (deadline [`MOUNT_DEADLINE`]); fails if the mount
    /// process exits first.
    fn wait_mounted(&mut self) {
        let deadline = Instant::now() + MOUNT_DEADLINE;
        while mounted(&self.point).is_none() {
            if let Some(s) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("the mount exited ({s}) before mounting: {}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "not mounted after {MOUNT_DEADLINE:?}: {}",
                self.log()
            );
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the mount process to exit, up to `limit`.
    fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        wait_until(self.child.as_mut().unwrap(), limit)
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            if c.try_wait().ok().flatten().is_none() {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
        if let Some(pid) = self.daemon {
            let ours = std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains("iosets"));
            if ours && !ended(pid) {
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
                let deadline = Instant::now() + Duration::from_secs(5);
                while !ended(pid) && Instant::now() < deadline {
                    thread::sleep(Duration::from_millis(20));
                }
            }
        }
        if mounted(&self.point).is_some() {
            // Not `run`: no panic while unwinding.
            if let Ok(mut c) = Command::new(BIN)
                .arg("umount")
                .arg(&self.point)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
            {
                if wait_until(&mut c, Duration::from_secs(10)).is_none() {
                    let _ = c.kill();
                    let _ = c.wait();
                }
            }
        }
        if mounted(&self.point).is_some() {
            let _ = Command::new("umount").arg("-l").arg(&self.point).status();
        }
    }
}

#[test]
fn mount_refuses_a_missing_or_non_directory_mount_point() {
    let s = Scratch::new("bad-points");
    let root = s.dir("root");
    let missing = s.0.join("missing");
    let file = s.0.join("file");
    std::fs::write(&file, b"not a directory").unwrap();
    let _g = (Mount::watch(&missing), Mount::watch(&file));
    let root = root.to_str().unwrap();
    fails(
        &s.0,
        &["mount", missing.to_str().unwrap(), "--local", root],
        &["mount point", "does not exist"],
    );
    fails(
        &s.0,
        &["mount", file.to_str().unwrap(), "--local", root],
        &["mount point", "not a directory"],
    );
    assert_eq!(mounted(&missing), None);
    assert_eq!(mounted(&file), None);
    assert!(!missing.exists(), "the mount created its mount point");
    assert_eq!(std::fs::read(&file).unwrap(), b"not a directory");
}

#[test]
fn mount_refuses_a_point_already_mounted() {
    if !fuse_available("mount_refuses_a_point_already_mounted") {
        return;
    }
    let s = Scratch::new("twice");
    let (root, point) = (s.dir("root"), s.dir("mnt"));
    let mut first = Mount::local(&s.0, &point, &root, &s.0.join("first.log"));
    std::fs::write(point.join("before"), b"1").unwrap();
    let other = s.dir("root2");
    fails(
        &s.0,
        &[
            "mount",
            point.to_str().unwrap(),
            "--local",
            other.to_str().unwrap(),
        ],
        &["mount point", "already mounted (fuse)"],
    );
    // Still exactly one mount there, still the first one, still serving.
    let there = mounts().iter().filter(|(p, _)| *p == point).count();
    assert_eq!(there, 1, "mounts at {}", point.display());
    assert_eq!(std::fs::read(point.join("before")).unwrap(), b"1");
    assert_eq!(std::fs::read(root.join("before")).unwrap(), b"1");
    assert_eq!(std::fs::read_dir(&other).unwrap().count(), 0);
    signal(first.pid(), "TERM");
    let status = first.wait_exit(Duration::from_secs(10));
    assert!(
        status.is_some_and(|s| s.success()),
        "{status:?}: {}",
        first.log()
    );
    assert_eq!(mounted(&point), None);
}

#[test]
fn mount_fails_within_the_timeout_when_servers_do_not_answer() {
    let s = Scratch::new("no-servers");
    let point = s.dir("mnt");
    let _g = Mount::watch(&point);
    let p = point.to_str().unwrap();
    // Nothing listening: refused at once.
    let r = fails(
        &s.0,
        &["mount", p, "--servers", "127.0.0.1:1", "--timeout", "3"],
        &["127.0.0.1:1", "cannot connect"],
    );
    assert!(r.took < Duration::from_secs(3), "took {:?}", r.took);
    assert_eq!(mounted(&point), None);
    // Listening but never answering (the kernel accepts, nobody reads): the timeout.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap().to_string();
    let r = fails(
        &s.0,
        &["mount", p, "--servers", &addr, "--timeout", "1"],
        &[&addr, "no response within 1s"],
    );
    assert!(
        r.took >= Duration::from_secs(1) && r.took < Duration::from_secs(4),
        "took {:?}",
        r.took
    );
    assert_eq!(mounted(&point), None);
    assert_eq!(std::fs::read_dir(&point).unwrap().count(), 0);
}

/// A child process killed when the test ends, stopped or not (SIGKILL ends a stopped process).
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_frozen_server_gives_eio_within_the_timeout_and_serves_again_when_thawed() {
    if !fuse_available("a_frozen_server_gives_eio_within_the_timeout_and_serves_again_when_thawed")
    {
        return;
    }
    let s = Scratch::new("frozen-server");
    let (root, point) = (s.dir("root"), s.dir("mnt"));
    let (server, addr) = common::serve(
        &s.0,
        &["--root", root.to_str().unwrap(), "--listen", "127.0.0.1:0"],
    );
    let server = KillOnDrop(server);
    let secret = common::node_secret_path(&s.0);
    let mut m = Mount::start(
        &s.0,
        &point,
        &[
            "--servers",
            &addr,
            "--auth-file",
            secret.to_str().unwrap(),
            "--timeout",
            "2",
        ],
        &s.0.join("mount.log"),
    );
    m.wait_mounted();
    std::fs::write(point.join("f"), b"before the freeze").unwrap();
    // The connection stays open and the server reads nothing: only the mount's one timeout
    // can end the request.
    signal(server.0.id(), "STOP");
    let frozen = std::fs::read(point.join("f"));
    let thawed = {
        signal(server.0.id(), "CONT");
        std::fs::read(point.join("f"))
    };
    let e = frozen.expect_err("a read answered by a stopped server");
    assert_eq!(e.raw_os_error(), Some(EIO), "{e}: {}", m.log());
    assert_eq!(thawed.unwrap(), b"before the freeze", "{}", m.log());
}

#[test]
fn mount_refuses_bad_options() {
    let s = Scratch::new("bad-options");
    let (root, point) = (s.dir("root"), s.dir("mnt"));
    let _g = Mount::watch(&point);
    let (r, p) = (root.to_str().unwrap(), point.to_str().unwrap());
    fails(
        &s.0,
        &["mount", p],
        &["give either servers (--servers ADDR,...) or a local root (--local DIR)"],
    );
    fails(
        &s.0,
        &["mount", p, "--local", r, "--threads", "0"],
        &["threads must be between 1 and 64, not 0"],
    );
    fails(
        &s.0,
        &["mount", p, "--local", r, "--threads", "65"],
        &["threads must be between 1 and 64, not 65"],
    );
    for n in ["0", "65"] {
        fails(
            &s.0,
            &["mount", p, "--local", r, "--net-threads", n],
            &[&format!("net threads must be between 1 and 64, not {n}")],
        );
    }
    for t in [
        "--timeout=-1",
        "--timeout=0",
        "--timeout=nan",
        "--timeout=1e9",
    ] {
        fails(
            &s.0,
            &["mount", p, "--local", r, t],
            &["--timeout must be a number of seconds in (0, 86400]"],
        );
    }
    // `--timeout -1` (with a space) reaches the same validation.
    fails(
        &s.0,
        &["mount", p, "--local", r, "--timeout", "-1"],
        &["--timeout must be a number of seconds in (0, 86400]"],
    );
    fails(
        &s.0,
        &["mount", p, "--local", r, "--job-source", "bogus"],
        &[
            "unknown job id source \"bogus\"",
            "valid: cgroup, env, procname-uid",
        ],
    );
    let both = run(
        &s.0,
        &["mount", p, "--local", r, "--servers", "127.0.0.1:1"],
        QUICK,
    );
    assert_eq!(both.code(), Some(2), "{both:?}");
    assert!(both.stderr.contains("cannot be used with"), "{both:?}");
    assert_eq!(mounted(&point), None);
    assert_eq!(std::fs::read_dir(&root).unwrap().count(), 0);
}

#[test]
fn umount_refuses_what_is_not_an_iosets_mount() {
    let s = Scratch::new("umount-bad");
    let empty = s.dir("empty");
    fails(
        &s.0,
        &["umount", empty.to_str().unwrap()],
        &["mount point", "nothing is mounted there"],
    );
    fails(
        &s.0,
        &["umount", s.0.join("missing").to_str().unwrap()],
        &["nothing is mounted there"],
    );
    assert_eq!(mounted(Path::new("/proc")).as_deref(), Some("proc"));
    fails(
        &s.0,
        &["umount", "/proc"],
        &[
            "mount point /proc",
            "not a FUSE mount (proc); refusing to unmount it",
        ],
    );
    assert_eq!(mounted(Path::new("/proc")).as_deref(), Some("proc"));
    assert!(Path::new("/proc/self/mountinfo").exists());
}

/// 64 KiB, the block the writer writes.
const BLOCK: usize = 64 * 1024;

fn block(i: u64) -> Vec<u8> {
    vec![(i % 251) as u8; BLOCK]
}

/// Sets the flag when dropped: stops the writer thread on every path.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[test]
fn sigterm_during_writes_keeps_every_acknowledged_write() {
    if !fuse_available("sigterm_during_writes_keeps_every_acknowledged_write") {
        return;
    }
    let s = Scratch::new("sigterm-writes");
    let (root, point) = (s.dir("root"), s.dir("mnt"));
    let mut m = Mount::local(&s.0, &point, &root, &s.0.join("mount.log"));
    // Open once, write 64 KiB blocks until a write fails, counting those that succeeded. Paced
    // (1 ms between writes) so a mount that never stops does not fill the disk.
    let written = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let _stop = StopOnDrop(stop.clone());
    let (tx, rx) = mpsc::channel::<Result<Option<std::io::Error>, std::io::Error>>();
    {
        let (written, stop, path) = (written.clone(), stop.clone(), point.join("f"));
        thread::spawn(move || {
            let r = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(path)
                .map(|mut f| {
                    let mut i = 0;
                    loop {
                        if stop.load(Ordering::Relaxed) {
                            return None;
                        }
                        if let Err(e) = f.write_all(&block(i)) {
                            return Some(e);
                        }
                        written.fetch_add(1, Ordering::SeqCst);
                        i += 1;
                        thread::sleep(Duration::from_millis(1));
                    }
                });
            let _ = tx.send(r);
        });
    }
    thread::sleep(Duration::from_secs(1));
    let before = written.load(Ordering::SeqCst);
    assert!(before > 0, "no write succeeded in 1 s: {}", m.log());
    signal(m.pid(), "TERM");
    let status = m.wait_exit(Duration::from_secs(10));
    let after = written.load(Ordering::SeqCst);
    assert!(
        status.is_some(),
        "the mount did not exit within 10 s of SIGTERM while a file was open for writing \
         ({before} writes before the signal, {after} by now; mounted: {:?}); log:\n{}",
        mounted(&point),
        m.log()
    );
    let status = status.unwrap();
    assert!(status.success(), "mount exit {status}: {}", m.log());
    let end = rx.recv_timeout(Duration::from_secs(5));
    let n = written.load(Ordering::SeqCst);
    match &end {
        Ok(Ok(Some(e))) => eprintln!("writer: {n} writes, then {e} ({:?})", e.raw_os_error()),
        other => panic!("the writer did not end with a failed write: {other:?}"),
    }
    // Every write that returned success is in the root, in order.
    let mut data = Vec::new();
    std::fs::File::open(root.join("f"))
        .unwrap()
        .read_to_end(&mut data)
        .unwrap();
    assert!(
        data.len() as u64 >= n * BLOCK as u64,
        "{} bytes in the root, {n} blocks of {BLOCK} acknowledged",
        data.len()
    );
    for i in 0..n {
        let at = i as usize * BLOCK;
        assert!(
            data[at..at + BLOCK] == block(i)[..],
            "acknowledged block {i} of {n} differs in the root"
        );
    }
    // The mount point is an ordinary, usable directory again.
    assert_eq!(mounted(&point), None);
    let listed = std::fs::read_dir(&point).map(|d| d.count());
    assert!(matches!(listed, Ok(0)), "{listed:?}");
    assert!(std::fs::metadata(&point).unwrap().is_dir());
}

#[test]
fn signals_when_idle_unmount_and_exit() {
    if !fuse_available("signals_when_idle_unmount_and_exit") {
        return;
    }
    let s = Scratch::new("signals-idle");
    let (root, point) = (s.dir("root"), s.dir("mnt"));
    for sig in ["TERM", "INT", "HUP"] {
        let mut m = Mount::local(&s.0, &point, &root, &s.0.join(format!("{sig}.log")));
        std::fs::write(point.join(sig), sig).unwrap();
        signal(m.pid(), sig);
        let status = m.wait_exit(Duration::from_secs(10));
        assert!(
            status.is_some_and(|s| s.success()),
            "SIG{sig}: {status:?}: {}",
            m.log()
        );
        assert!(m.log().contains(&format!("SIG{sig}")), "{}", m.log());
        assert_eq!(mounted(&point), None, "SIG{sig}");
        assert_eq!(std::fs::read_to_string(root.join(sig)).unwrap(), sig);
        assert_eq!(std::fs::read_dir(&point).unwrap().count(), 0);
    }
}

#[test]
fn kill_9_leaves_a_dead_mount_that_umount_clears() {
    if !fuse_available("kill_9_leaves_a_dead_mount_that_umount_clears") {
        return;
    }
    let s = Scratch::new("kill9");
    let (root, point) = (s.dir("root"), s.dir("mnt"));
    let r = root.to_str().unwrap();
    let mut m = Mount::local(&s.0, &point, &root, &s.0.join("mount.log"));
    std::fs::write(point.join("kept"), b"kept").unwrap();
    signal(m.pid(), "KILL");
    let status = m.wait_exit(Duration::from_secs(10)).expect("killed");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    assert_eq!(mounted(&point).as_deref(), Some("fuse"), "still listed");
    let dead = std::fs::metadata(&point);
    let enotconn = dead
        .as_ref()
        .err()
        .is_some_and(|e| e.raw_os_error() == Some(ENOTCONN));
    if !enotconn {
        eprintln!("metadata of a dead FUSE mount gave {dead:?}, not ENOTCONN");
    }
    let again = run(
        &s.0,
        &["mount", point.to_str().unwrap(), "--local", r],
        QUICK,
    );
    assert_eq!(again.code(), Some(1), "{again:?}");
    if enotconn {
        let hint = format!("run `iosets umount {}`", point.display());
        assert!(
            again.stderr.contains("a dead FUSE mount is there") && again.stderr.contains(&hint),
            "{again:?}"
        );
    }
    let um = run(&s.0, &["umount", point.to_str().unwrap()], QUICK);
    assert_eq!(um.code(), Some(0), "{um:?}");
    assert_eq!(mounted(&point), None);
    assert_eq!(std::fs::read_dir(&point).unwrap().count(), 0);
    assert!(std::fs::metadata(&point).unwrap().is_dir());
    assert_eq!(std::fs::read(root.join("kept")).unwrap(), b"kept");
}

/// `iosets umount mnt/` (a relative path as tab completion gives it) on a dead mount.
#[test]
fn umount_finds_a_dead_mount_named_relative_with_a_slash() {
    if !fuse_available("umount_finds_a_dead_mount_named_relative_with_a_slash") {
        return;
    }
    let s = Scratch::new("kill9-relative");
    let (root, point) = (s.dir("root"), s.dir("mnt"));
    let mut m = Mount::local(&s.0, &point, &root, &s.0.join("mount.log"));
    signal(m.pid(), "KILL");
    m.wait_exit(Duration::from_secs(10)).expect("killed");
    let um = run(&s.0, &["umount", "mnt/"], QUICK);
    assert_eq!(um.code(), Some(0), "{um:?}");
    assert_eq!(mounted(&point), None);
}

#[test]
fn daemon_detaches_once_mounted_and_ends_with_umount() {
    if !fuse_available("daemon_detaches_once_mounted_and_ends_with_umount") {
        return;
    }
    let s = Scratch::new("daemon");
    let (root, point) = (s.dir("root"), s.dir("mnt"));
    let log = s.0.join("daemon.log");
    let mut g = Mount::watch(&point);
    let r = run(
        &s.0,
        &[
            "mount",
            point.to_str().unwrap(),
            "--local",
            root.to_str().unwrap(),
            "--daemon",
            "--log",
            log.to_str().unwrap(),
        ],
        MOUNT_DEADLINE,
    );
    let pid: Option<u32> = r
        .stderr
        .split("(pid ")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok());
    g.daemon = pid;
    assert_eq!(r.code(), Some(0), "{r:?}");
    let pid = pid.unwrap_or_else(|| panic!("no pid in {:?}", r.stderr));
    // Mounted when the parent returns, and served by the background process.
    assert_eq!(mounted(&point).as_deref(), Some("fuse"), "{r:?}");
    assert!(!ended(pid), "the background process {pid} is gone");
    assert!(
        r.stderr.contains(&format!("log {}", log.display())),
        "{r:?}"
    );
    std::fs::write(point.join("through"), b"written through the mount").unwrap();
    assert_eq!(
        std::fs::read(root.join("through")).unwrap(),
        b"written through the mount"
    );
    let um = run(&s.0, &["umount", point.to_str().unwrap()], QUICK);
    assert_eq!(um.code(), Some(0), "{um:?}");
    assert_eq!(mounted(&point), None);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ended(pid) {
        assert!(
            Instant::now() < deadline,
            "the background process {pid} still runs 10 s after the unmount; log:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        thread::sleep(Duration::from_millis(20));
    }
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("mounted on"), "{text}");
    assert!(text.contains("unmounted from outside"), "{text}");
    assert_eq!(std::fs::read_dir(&point).unwrap().count(), 0);
}

#[test]
fn mount_help_lists_the_options() {
    let s = Scratch::new("help");
    let r = run(&s.0, &["mount", "--help"], QUICK);
    assert_eq!(r.code(), Some(0), "{r:?}");
    for flag in [
        "--servers",
        "--local",
        "--cache",
        "--timeout",
        "--job-source",
        "--threads",
        "--daemon",
        "--log",
        "--token-file",
    ] {
        assert!(
            r.stdout.contains(flag),
            "{flag} missing from:\n{}",
            r.stdout
        );
    }
    let r = run(&s.0, &["umount", "--help"], QUICK);
    assert_eq!(r.code(), Some(0), "{r:?}");
    assert!(r.stdout.contains("MOUNTPOINT"), "{}", r.stdout);
}
