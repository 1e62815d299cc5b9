//! Who may set a priority through `MOUNT/.iosets/jobs/<id>/priority` (issue 33 item 3), through a
//! real FUSE mount, as a real second user (`nobody`, by `setpriv`): root may set any job's; any
//! other process only its own job's, that job known from a Slurm cgroup (`job_<id>` below a
//! `slurm_*` component), never from `IOSETS_JOB_ID`, and never above the servers' hint cap. A
//! refused write is EACCES, changes nothing, and is logged once with its reason.
//!
//! Needs root, `/dev/fuse` and `setpriv`; the cgroup cases also need a writable cgroup v1
//! `freezer` or cgroup v2 hierarchy. What cannot run here is skipped with a message.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex, OnceLock};

use iosets_mount::control::SelfPriority;
use iosets_mount::Mounted;
use iosets_server::{HintPolicy, ServerHandle};

// Shared with the tests of tests/main.rs; this binary uses the servers and the mount only.
#[allow(dead_code)]
mod common;

const TOKEN: &str = "priority-rights-token";

/// Everything the mount logged in this test binary (one subscriber for all its tests).
fn log() -> Arc<Mutex<Vec<u8>>> {
    static LOG: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOG.get_or_init(|| {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let sink = buf.clone();
        let _ = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || Sink(sink.clone()))
            .try_init();
        buf
    })
    .clone()
}

struct Sink(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Sink {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn logged(needle: &str) -> usize {
    let text = String::from_utf8_lossy(&log().lock().unwrap()).into_owned();
    text.lines().filter(|l| l.contains(needle)).count()
}

fn available() -> bool {
    let ok = Path::new("/dev/fuse").exists()
        && rustix::process::geteuid().is_root()
        && Path::new("/usr/bin/setpriv").exists();
    if !ok {
        eprintln!("skipped: needs root, /dev/fuse and setpriv (a real second user)");
    }
    ok
}

struct Setup {
    dir: tempfile::TempDir,
    server: Option<ServerHandle>,
    mount: Option<Mounted>,
}

impl Setup {
    fn new(hints: HintPolicy, self_priority: SelfPriority) -> Setup {
        log();
        let dir = tempfile::tempdir().unwrap();
        let server = common::server(&dir.path().join("root"), TOKEN, |cfg| cfg.hints = hints);
        let mount = common::mount(
            &dir.path().join("mnt"),
            std::slice::from_ref(&server),
            TOKEN,
            |opts| opts.self_priority = self_priority,
        );
        Setup {
            dir,
            server: Some(server),
            mount: Some(mount),
        }
    }

    fn priority(&self, job: u64) -> PathBuf {
        self.dir
            .path()
            .join(format!("mnt/.iosets/jobs/{job}/priority"))
    }

    fn read(&self, job: u64) -> String {
        std::fs::read_to_string(self.priority(job)).unwrap()
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        if let Some(m) = self.mount.take() {
            let _ = m.unmount();
        }
        if let Some(s) = self.server.take() {
            let _ = s.shutdown();
        }
    }
}

/// A Slurm-like cgroup `…/slurm_iosets_test_<pid>/uid_65534/job_<job>/step_0` that a process
/// can be moved into (as slurmd does), removed on drop; `None` when no hierarchy is writable.
struct SlurmCgroup {
    top: PathBuf,
    leaf: PathBuf,
}

impl SlurmCgroup {
    fn new(job: u64) -> Option<SlurmCgroup> {
        for base in [
            "/sys/fs/cgroup/freezer",
            "/sys/fs/cgroup/unified",
            "/sys/fs/cgroup",
        ] {
            let base = Path::new(base);
            if !base.join("cgroup.procs").exists() {
                continue;
            }
            let top = base.join(format!("slurm_iosets_test_{}_{job}", std::process::id()));
            let leaf = top.join(format!("uid_65534/job_{job}/step_0"));
            if std::fs::create_dir_all(&leaf).is_ok() && leaf.join("cgroup.procs").exists() {
                return Some(SlurmCgroup { top, leaf });
            }
            let _ = std::fs::remove_dir(&top);
        }
        eprintln!("skipped the cgroup cases: no writable cgroup hierarchy to make a Slurm-like job cgroup");
        None
    }
}

impl Drop for SlurmCgroup {
    fn drop(&mut self) {
        // Leaf first; the processes put in it have exited.
        let mut p = self.leaf.clone();
        while p.starts_with(&self.top) {
            let _ = std::fs::remove_dir(&p);
            if !p.pop() {
                break;
            }
        }
    }
}

/// Runs `echo VALUE > FILE` as `nobody` (bash, whose message names the errno: dash says "I/O
/// error" for any failed write) with `IOSETS_JOB_ID=env_job`, inside `cgroup` if given
/// (moved there by root first, as slurmd moves a job's tasks).
fn nobody_writes(value: &str, file: &Path, env_job: &str, cgroup: Option<&SlurmCgroup>) -> Output {
    let write = format!(
        "setpriv --reuid=65534 --regid=65534 --clear-groups bash -c 'echo {value} > {}'",
        file.display()
    );
    let script = match cgroup {
        Some(cg) => format!(
            "echo $$ > {}/cgroup.procs && exec {write}",
            cg.leaf.display()
        ),
        None => format!("exec {write}"),
    };
    Command::new("sh")
        .arg("-c")
        .arg(script)
        .env_remove("SLURM_JOB_ID")
        .env("IOSETS_JOB_ID", env_job)
        .output()
        .unwrap()
}

fn refused(out: &Output, what: &str) {
    assert!(!out.status.success(), "{what}: the write succeeded");
    let err = String::from_utf8_lossy(&out.stderr);
    if !err.contains("Permission denied") {
        let text = String::from_utf8_lossy(&log().lock().unwrap()).into_owned();
        panic!("{what}: {err}\nthe mount's log:\n{text}");
    }
}

fn written(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_forged_environment_another_job_and_a_value_above_the_cap_are_refused_and_change_nothing() {
    if !available() {
        return;
    }
    let s = Setup::new(HintPolicy::default(), SelfPriority::Capped);
    std::fs::write(s.priority(5), "0.5\n").unwrap();
    assert_eq!(s.read(5), "0.5 control\n");
    // The two writes: `nobody`, in no Slurm job, naming the job by its environment.
    refused(
        &nobody_writes("1000000", &s.priority(5), "5", None),
        "forged IOSETS_JOB_ID=5",
    );
    refused(
        &nobody_writes("1e9", &s.priority(77), "77", None),
        "forged IOSETS_JOB_ID=77",
    );
    assert_eq!(s.read(5), "0.5 control\n");
    assert_eq!(s.read(77), "none\n");
    assert!(logged("refused (EACCES): the caller runs in no Slurm job's cgroup") >= 1);
    if let Some(cg) = SlurmCgroup::new(5) {
        // In job 5's cgroup: not job 6's priority, not above the cap (1), even with the
        // environment naming job 6.
        std::fs::write(s.priority(6), "0.01\n").unwrap();
        refused(
            &nobody_writes("0.5", &s.priority(6), "6", Some(&cg)),
            "another job's priority",
        );
        refused(
            &nobody_writes("1000000", &s.priority(5), "5", Some(&cg)),
            "above the cap",
        );
        assert_eq!(s.read(6), "0.01 control\n");
        assert_eq!(s.read(5), "0.5 control\n");
        assert!(logged("is 5: a process may set its own job's priority only") >= 1);
        assert!(logged("1000000 is above the servers' hint cap 1") >= 1);
        // Its own job, within the cap: allowed.
        written(
            &nobody_writes("0.25", &s.priority(5), "6", Some(&cg)),
            "own job within the cap",
        );
        assert_eq!(s.read(5), "0.25 control\n");
        written(
            &nobody_writes("1", &s.priority(5), "5", Some(&cg)),
            "own job at the cap",
        );
        assert_eq!(s.read(5), "1 control\n");
    }
    // Root may set any job's priority, above any cap.
    std::fs::write(s.priority(77), "1e9\n").unwrap();
    assert_eq!(s.read(77), "1000000000 control\n");
    // A bad value: EINVAL, nothing changes, logged with what is accepted.
    let e = std::fs::write(s.priority(77), "fast please\n").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(22));
    assert_eq!(s.read(77), "1000000000 control\n");
    assert!(logged("\"fast please\" is not accepted; write a finite positive number") >= 1);
}

#[test]
fn a_refusal_is_logged_once_per_process_job_and_reason() {
    if !available() {
        return;
    }
    let s = Setup::new(HintPolicy::default(), SelfPriority::Capped);
    let file = s.priority(4242);
    // One process, the same refused write five times.
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "sh",
            "-c",
        ])
        .arg(format!(
            "n=0; for i in 1 2 3 4 5; do echo 3 > {} 2>/dev/null || n=$((n+1)); done; echo $n",
            file.display()
        ))
        .env("IOSETS_JOB_ID", "4242")
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "5",
        "five refusals"
    );
    assert_eq!(logged("jobs/4242/priority refused (EACCES)"), 1);
    assert_eq!(s.read(4242), "none\n");
}

#[test]
fn self_priority_off_leaves_priorities_to_root_and_ignore_leaves_no_cap_to_raise() {
    if !available() {
        return;
    }
    let Some(cg) = SlurmCgroup::new(9) else {
        return;
    };
    let off = Setup::new(HintPolicy::default(), SelfPriority::Off);
    refused(
        &nobody_writes("0.1", &off.priority(9), "9", Some(&cg)),
        "--self-priority off",
    );
    assert_eq!(off.read(9), "none\n");
    assert!(logged("self-service priorities are off on this mount") >= 1);
    drop(off);
    let any = Setup::new(HintPolicy::default(), SelfPriority::Any);
    written(
        &nobody_writes("1000", &any.priority(9), "9", Some(&cg)),
        "--self-priority any, own job",
    );
    assert_eq!(any.read(9), "1000 control\n");
    drop(any);
    let ignored = Setup::new(HintPolicy::Ignore, SelfPriority::Capped);
    refused(
        &nobody_writes("0.1", &ignored.priority(9), "9", Some(&cg)),
        "servers ignore hints",
    );
    assert!(logged("the servers ignore priority hints") >= 1);
}

#[test]
fn the_readme_says_who_may_write_what_and_is_read_only() {
    if !available() {
        return;
    }
    let s = Setup::new(HintPolicy::default(), SelfPriority::Capped);
    let readme = s.dir.path().join("mnt/.iosets/README");
    let text = std::fs::read_to_string(&readme).unwrap();
    assert_eq!(text, iosets_mount::control::README);
    for needle in [
        "root",
        "Slurm",
        "IOSETS_JOB_ID",
        "cap=P",
        "10^-i",
        "EACCES",
        "EINVAL",
    ] {
        assert!(text.contains(needle), "README lacks {needle:?}");
    }
    let names: Vec<String> = std::fs::read_dir(s.dir.path().join("mnt/.iosets"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.contains(&"README".to_string()), "{names:?}");
    let e = std::fs::write(&readme, "mine").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(13));
    assert_eq!(std::fs::read_to_string(&readme).unwrap(), text);
}
