//! Through a real FUSE mount: unmodified programs (`tar`, `diff`, `dd`, `sh`) on files served
//! by real servers on loopback, attributed to their jobs.
//!
//! Needs root and `/dev/fuse` (the test command runs as root and installs `fuse3`); a machine
//! without them skips these tests with a message rather than failing on something they do not
//! test.

use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{fuse_available, jobs_reports, mount, server};
use iosets_client::{Client, ClientConfig, JobId};
use iosets_mount::{MountOptions, Mounted};
use iosets_server::{Server, ServerConfig, ServerHandle};

const TOKEN: &str = "mount-test-token";

/// Servers on loopback (one root each), and a mount of them.
struct Setup {
    dir: tempfile::TempDir,
    servers: Vec<ServerHandle>,
    mount: Option<Mounted>,
}

impl Setup {
    fn new(
        n: usize,
        tweak: impl Fn(&mut ServerConfig),
        mtweak: impl Fn(&mut MountOptions),
    ) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let servers: Vec<_> = (0..n)
            .map(|i| server(&dir.path().join(format!("root{i}")), TOKEN, &tweak))
            .collect();
        let mount = mount(&dir.path().join("mnt"), &servers, TOKEN, mtweak);
        Setup {
            dir,
            servers,
            mount: Some(mount),
        }
    }

    /// `n` servers in front of one root (`root0`, the deployment: I/O nodes in front of one
    /// parallel file system), and a mount of them.
    fn shared(n: usize) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root0");
        let servers: Vec<_> = (0..n).map(|_| server(&root, TOKEN, |_| {})).collect();
        let mount = mount(&dir.path().join("mnt"), &servers, TOKEN, |_| {});
        Setup {
            dir,
            servers,
            mount: Some(mount),
        }
    }

    fn mnt(&self) -> PathBuf {
        self.dir.path().join("mnt")
    }

    fn root(&self, i: usize) -> PathBuf {
        self.dir.path().join(format!("root{i}"))
    }

    fn addrs(&self) -> Vec<std::net::SocketAddr> {
        self.servers.iter().map(|s| s.addr()).collect()
    }

    /// Every server's report of job `job`: (bytes written, bytes read).
    fn job_bytes(&self, job: u64) -> (u64, u64) {
        let (mut w, mut r) = (0, 0);
        for rep in jobs_reports(&self.servers, TOKEN) {
            if let Some(j) = rep.jobs.iter().find(|j| j.job == job) {
                w += j.bytes_written;
                r += j.bytes_read;
            }
        }
        (w, r)
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        if let Some(m) = self.mount.take() {
            let _ = m.unmount();
        }
        for s in self.servers.drain(..) {
            let _ = s.shutdown();
        }
    }
}

fn sh(script: &str, envs: &[(&str, &str)]) -> std::process::Output {
    let mut c = Command::new("sh");
    c.arg("-c").arg(script);
    c.env_remove("IOSETS_JOB_ID").env_remove("SLURM_JOB_ID");
    for (k, v) in envs {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn ok(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| ((i * 31 + seed as usize) % 251) as u8)
        .collect()
}

fn copy_tree_and_compare(servers: usize) {
    let s = Setup::new(servers, |_| {}, |_| {});
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../crates");
    // A file over several chunks, so the stripes land on every server.
    let big = pattern(3 * 1024 * 1024 + 12345, 7);
    let extra = s.dir.path().join("extra");
    std::fs::create_dir(&extra).unwrap();
    std::fs::write(extra.join("big.bin"), &big).unwrap();
    ok(&sh(
        &format!(
            "tar -C {src} -cf - . | tar -C {mnt} -xf - && tar -C {extra} -cf - . | tar -C {mnt} -xf -",
            src = src.display(),
            mnt = s.mnt().display(),
            extra = extra.display()
        ),
        &[],
    ));
    let out = sh(
        &format!(
            "diff -r {src} {mnt} | grep -v '^Only in {mnt}: big.bin$'",
            src = src.display(),
            mnt = s.mnt().display()
        ),
        &[],
    );
    assert!(
        out.stdout.is_empty(),
        "differences:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(std::fs::read(s.mnt().join("big.bin")).unwrap(), big);
    // The backing files hold the stripes: chunk k of the file is on server (home + k) mod n.
    let layout = iosets_client::Layout::new(iosets_client::DEFAULT_CHUNK_SIZE, servers).unwrap();
    let chunk = iosets_client::DEFAULT_CHUNK_SIZE as usize;
    for (k, part) in big.chunks(chunk).enumerate() {
        let server = layout.server_of("big.bin", k as u64);
        let backing = std::fs::read(s.root(server).join("big.bin")).unwrap();
        assert_eq!(
            &backing[k * chunk..k * chunk + part.len()],
            part,
            "chunk {k}"
        );
    }
    // The same layout as the client library: what one writes, the other reads.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let lib = pattern(2 * chunk + 99, 3);
    rt.block_on(async {
        let c = Client::connect(&s.addrs(), ClientConfig::new(JobId(5)))
            .await
            .unwrap();
        let got = c.read_at("big.bin", 0, big.len() + 10).await.unwrap();
        assert_eq!(&got[..], &big[..]);
        c.create("from-lib", 0o644, false).await.unwrap();
        c.write_at("from-lib", 0, lib.clone()).await.unwrap();
    });
    assert_eq!(std::fs::read(s.mnt().join("from-lib")).unwrap(), lib);
}

#[test]
fn a_source_tree_copied_with_tar_reads_back_identical_on_one_server() {
    if fuse_available() {
        copy_tree_and_compare(1);
    }
}

#[test]
fn a_source_tree_copied_with_tar_reads_back_identical_on_three_servers() {
    if fuse_available() {
        copy_tree_and_compare(3);
    }
}

#[test]
fn programs_are_attributed_to_their_jobs_with_exact_bytes() {
    if !fuse_available() {
        return;
    }
    let s = Setup::new(2, |_| {}, |_| {});
    let m = s.mnt().display().to_string();
    ok(&sh(
        &format!("head -c 100000 /dev/zero > {m}/a"),
        &[("IOSETS_JOB_ID", "101")],
    ));
    ok(&sh(
        &format!("head -c 200000 /dev/zero > {m}/b"),
        &[("IOSETS_JOB_ID", "102")],
    ));
    // Only Slurm's variable.
    ok(&sh(
        &format!("head -c 300000 /dev/zero > {m}/c"),
        &[("SLURM_JOB_ID", "103")],
    ));
    // IOSETS_JOB_ID wins over SLURM_JOB_ID.
    ok(&sh(
        &format!("head -c 1234 /dev/zero > {m}/d"),
        &[("IOSETS_JOB_ID", "104"), ("SLURM_JOB_ID", "105")],
    ));
    // A forked child (a subshell in the background) inherits its parent's job.
    ok(&sh(
        &format!("( head -c 50000 /dev/zero > {m}/e ) & wait; cat {m}/a > /dev/null"),
        &[("IOSETS_JOB_ID", "106")],
    ));
    assert_eq!(s.job_bytes(101), (100_000, 0));
    assert_eq!(s.job_bytes(102), (200_000, 0));
    assert_eq!(s.job_bytes(103), (300_000, 0));
    assert_eq!(s.job_bytes(104), (1234, 0));
    assert_eq!(s.job_bytes(105), (0, 0));
    assert_eq!(s.job_bytes(106), (50_000, 100_000));
    // The control directory lists the jobs the mount saw and reports their stats.
    let listed: Vec<String> = std::fs::read_dir(s.mnt().join(".iosets/jobs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    for j in ["101", "102", "103", "104", "106"] {
        assert!(listed.contains(&j.to_string()), "{j} in {listed:?}");
    }
    let stats = std::fs::read_to_string(s.mnt().join(".iosets/jobs/102/stats")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&stats).unwrap();
    assert_eq!(v["total"]["bytes_written"], 200_000);
    // Hidden from the root's listing, but there.
    let root: Vec<String> = std::fs::read_dir(s.mnt())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(!root.contains(&".iosets".to_string()), "{root:?}");
    assert_eq!(
        std::fs::read_to_string(s.mnt().join(".iosets/policy")).unwrap(),
        "iosets\n"
    );
}

#[test]
fn priorities_written_in_the_control_directory_share_a_throttled_server_ten_to_one() {
    if !fuse_available() {
        return;
    }
    let s = Setup::new(
        1,
        |c| {
            c.throttle_mib_s = Some(48.0);
        },
        |_| {},
    );
    let ctl = s.mnt().join(".iosets/jobs");
    std::fs::write(ctl.join("201/priority"), "10\n").unwrap();
    std::fs::write(ctl.join("202/priority"), "1\n").unwrap();
    assert_eq!(
        std::fs::read_to_string(ctl.join("201/priority")).unwrap(),
        "10 control\n"
    );
    let m = s.mnt().display().to_string();
    // Synchronous writers, more per job than the server has workers, keep both jobs
    // backlogged on the server.
    let mut kids = Vec::new();
    for (job, name) in [("201", "hi"), ("202", "lo")] {
        for k in 0..8 {
            kids.push(
                Command::new("sh")
                    .arg("-c")
                    .arg(format!(
                        "exec dd if=/dev/zero of={m}/{name}{k} bs=1M count=100000 2>/dev/null"
                    ))
                    .env("IOSETS_JOB_ID", job)
                    .spawn()
                    .unwrap(),
            );
        }
    }
    std::thread::sleep(Duration::from_secs(1));
    // Two windows of 5 s. The writers are synchronous (`dd`), so on a loaded machine a window may
    // catch the high-priority job's writers not all backlogged; WFQ is work-conserving and the
    // low job then gets more (seen: 6.7:1, with the code before and after issue 16). One window
    // must show 10:1 ±10 %, and neither may favour the low job beyond 5:1.
    let mut ratios = Vec::new();
    let (mut h0, mut l0) = (s.job_bytes(201).0, s.job_bytes(202).0);
    for _ in 0..2 {
        std::thread::sleep(Duration::from_secs(5));
        let (h1, l1) = (s.job_bytes(201).0, s.job_bytes(202).0);
        let (hi, lo) = ((h1 - h0) as f64, (l1 - l0) as f64);
        eprintln!(
            "5 s window: job 201 {hi} B, job 202 {lo} B, share {:.3} (10:1 is 0.909)",
            hi / (hi + lo)
        );
        assert!(lo > 0.0, "the low-priority job must not starve");
        ratios.push(hi / lo);
        (h0, l0) = (h1, l1);
    }
    for mut k in kids {
        let _ = k.kill();
        let _ = k.wait();
    }
    assert!(
        ratios.iter().any(|r| (9.0..=11.0).contains(r)) && ratios.iter().all(|&r| r >= 5.0),
        "10:1 ±10% expected in one of two windows, got {ratios:.2?}"
    );
}

/// A job named by its environment (`IOSETS_JOB_ID=myjob`) or by `procname.uid` is shown by its
/// name in every server's jobs report, not as a 20-digit hash (issue 31).
#[test]
fn the_servers_know_jobs_by_the_names_the_mount_gave_them() {
    if !fuse_available() {
        return;
    }
    let s = Setup::new(2, |_| {}, |_| {});
    let m = s.mnt().display().to_string();
    ok(&sh(
        &format!("head -c 300000 /dev/zero > {m}/named"),
        &[("IOSETS_JOB_ID", "myjob")],
    ));
    let id = iosets_mount::ident::job_id_of("myjob").unwrap().0;
    for rep in jobs_reports(&s.servers, TOKEN) {
        let j = rep
            .jobs
            .iter()
            .find(|j| j.job == id)
            .expect("the job is known");
        assert_eq!(j.name.as_deref(), Some("myjob"), "{j:?}");
    }
}

/// A job's control files by its name (issue 31: names accepted wherever an id is): the name's
/// directory is the number's.
#[test]
fn a_job_named_in_the_control_directory_is_its_number() {
    if !fuse_available() {
        return;
    }
    let s = Setup::new(1, |_| {}, |_| {});
    let jobs = s.mnt().join(".iosets/jobs");
    std::fs::write(jobs.join("myjob/priority"), "0.25\n").unwrap();
    let id = iosets_mount::ident::job_id_of("myjob").unwrap().0;
    assert_eq!(
        std::fs::read_to_string(jobs.join(format!("{id}/priority"))).unwrap(),
        "0.25 control\n"
    );
    assert_eq!(
        std::fs::read_to_string(jobs.join("myjob/priority")).unwrap(),
        "0.25 control\n"
    );
    std::fs::write(jobs.join("myjob/priority"), "clear\n").unwrap();
    assert_eq!(
        std::fs::read_to_string(jobs.join(format!("{id}/priority"))).unwrap(),
        "none\n"
    );
}

#[test]
fn priority_files_refuse_other_jobs_and_garbage() {
    if !fuse_available() {
        return;
    }
    let s = Setup::new(1, |_| {}, |_| {});
    let p = s.mnt().join(".iosets/jobs/777/priority");
    std::fs::write(&p, "3\n").unwrap();
    // Garbage: EINVAL, nothing changes.
    let e = std::fs::write(&p, "fast please\n").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc_einval()));
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "3 control\n");
    // An unprivileged process of another job: EACCES, nothing changes.
    let other = sh(
        &format!(
            "setpriv --reuid=65534 --regid=65534 --clear-groups bash -c 'echo 9 > {}'",
            p.display()
        ),
        &[("IOSETS_JOB_ID", "555")],
    );
    assert!(!other.status.success());
    assert!(
        String::from_utf8_lossy(&other.stderr).contains("Permission denied"),
        "{}",
        String::from_utf8_lossy(&other.stderr)
    );
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "3 control\n");
    // Nor may it by naming job 777 in its environment (issue 33: only the Slurm cgroup tells
    // a process's own job; tests/priority_rights.rs has the cgroup cases).
    let forged = sh(
        &format!(
            "setpriv --reuid=65534 --regid=65534 --clear-groups bash -c 'echo clear > {p}'",
            p = p.display()
        ),
        &[("IOSETS_JOB_ID", "777")],
    );
    assert!(!forged.status.success());
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "3 control\n");
}

fn libc_einval() -> i32 {
    22
}

#[test]
fn an_unprivileged_user_owns_what_it_creates_and_cannot_read_others_private_files() {
    if !fuse_available() {
        return;
    }
    let s = Setup::new(1, |_| {}, |_| {});
    let m = s.mnt();
    std::fs::create_dir(m.join("home")).unwrap();
    ok(&sh(&format!("chown 65534:65534 {}/home", m.display()), &[]));
    std::fs::write(m.join("secret"), "root only\n").unwrap();
    ok(&sh(&format!("chmod 600 {}/secret", m.display()), &[]));
    let out = sh(
        &format!(
            "setpriv --reuid=65534 --regid=65534 --clear-groups sh -c \
             'mkdir {m}/home/d && echo mine > {m}/home/d/f && chmod 640 {m}/home/d/f && cat {m}/home/d/f'",
            m = m.display()
        ),
        &[],
    );
    ok(&out);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "mine\n");
    let backing = std::fs::metadata(s.root(0).join("home/d/f")).unwrap();
    assert_eq!((backing.uid(), backing.gid()), (65534, 65534));
    assert_eq!(backing.mode() & 0o7777, 0o640);
    let dir = std::fs::metadata(s.root(0).join("home/d")).unwrap();
    assert_eq!(dir.uid(), 65534);
    let denied = sh(
        &format!(
            "setpriv --reuid=65534 --regid=65534 --clear-groups cat {}/secret",
            m.display()
        ),
        &[],
    );
    assert!(!denied.status.success());
    assert!(String::from_utf8_lossy(&denied.stderr).contains("Permission denied"));
    // Nor write in root's directory.
    let denied = sh(
        &format!(
            "setpriv --reuid=65534 --regid=65534 --clear-groups touch {}/intruder",
            m.display()
        ),
        &[],
    );
    assert!(!denied.status.success());
    assert!(!s.root(0).join("intruder").exists());
}

#[test]
fn unsupported_operations_answer_enotsup_not_silence() {
    if !fuse_available() {
        return;
    }
    let s = Setup::new(3, |_| {}, |_| {});
    let m = s.mnt();
    std::fs::write(m.join("a"), "x").unwrap();
    // Hard links over several servers.
    let e = std::fs::hard_link(m.join("a"), m.join("b")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(95), "{e}");
    assert!(!m.join("b").exists());
    // Extended attributes: set, get and list each fail with ENOTSUP (95), asked through
    // Debian's python3 (no xattr tool needs to be installed).
    let out = sh(
        &format!(
            "/usr/bin/python3 -c '
import errno, os, sys
p = sys.argv[1]
for f in (lambda: os.setxattr(p, \"user.x\", b\"1\"), lambda: os.getxattr(p, \"user.x\"), lambda: os.listxattr(p)):
    try:
        f()
        print(\"succeeded\")
    except OSError as e:
        print(e.errno)
' {}/a",
            m.display()
        ),
        &[],
    );
    ok(&out);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "95\n95\n95\n");
}

#[test]
fn hard_links_symlinks_and_special_files_work_on_one_server() {
    if !fuse_available() {
        return;
    }
    let s = Setup::new(1, |_| {}, |_| {});
    let m = s.mnt();
    std::fs::write(m.join("a"), "data").unwrap();
    std::fs::hard_link(m.join("a"), m.join("b")).unwrap();
    let (a, b) = (
        std::fs::metadata(m.join("a")).unwrap(),
        std::fs::metadata(m.join("b")).unwrap(),
    );
    assert_eq!(a.ino(), b.ino());
    assert_eq!(a.nlink(), 2);
    std::os::unix::fs::symlink("a", m.join("l")).unwrap();
    assert_eq!(std::fs::read_link(m.join("l")).unwrap(), Path::new("a"));
    assert_eq!(std::fs::read_to_string(m.join("l")).unwrap(), "data");
    ok(&sh(&format!("mkfifo {}/fifo", m.display()), &[]));
    assert!(std::fs::symlink_metadata(s.root(0).join("fifo"))
        .unwrap()
        .file_type()
        .is_fifo_like());
    std::fs::rename(m.join("a"), m.join("c")).unwrap();
    assert_eq!(std::fs::read_to_string(m.join("c")).unwrap(), "data");
    assert_eq!(std::fs::metadata(m.join("c")).unwrap().ino(), a.ino());
    // Times and modes as set.
    ok(&sh(
        &format!(
            "touch -d '2001-02-03 04:05:06' {}/c && chmod 4755 {}/c",
            m.display(),
            m.display()
        ),
        &[],
    ));
    let c = std::fs::metadata(m.join("c")).unwrap();
    assert_eq!(c.mode() & 0o7777, 0o4755);
    assert_eq!(c.mtime(), 981_173_106 - local_offset_s());
    let st = Command::new("stat").arg("-f").arg(&m).output().unwrap();
    ok(&st);
}

/// Regression: four threads each making and removing directories in their own directory got
/// EEXIST and ESTALE. A removed directory's backing inode number came back for another thread's
/// new directory before the mount had taken the old one out of its inode table, so the new
/// directory was given the old one's inode, which the kernel still held.
#[test]
fn concurrent_mkdir_and_rmdir_in_separate_directories_never_fail() {
    if !fuse_available() {
        return;
    }
    let s = Setup::new(1, |_| {}, |o| o.attr_ttl = Duration::ZERO);
    let m = s.mnt();
    let failures: Vec<String> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let dir = m.join(format!("t{t}"));
                scope.spawn(move || {
                    std::fs::create_dir(&dir).unwrap();
                    let mut failed = Vec::new();
                    for i in 0..400 {
                        let d = dir.join(format!("d{i}"));
                        if let Err(e) =
                            std::fs::create_dir(&d).and_then(|()| std::fs::remove_dir(&d))
                        {
                            failed.push(format!("{}: {e}", d.display()));
                        }
                    }
                    failed
                })
            })
            .collect();
        threads
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    assert!(
        failures.is_empty(),
        "{} of 1600 failed: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    for t in 0..4 {
        assert_eq!(
            std::fs::read_dir(s.root(0).join(format!("t{t}")))
                .unwrap()
                .count(),
            0
        );
    }
}

trait FifoLike {
    fn is_fifo_like(&self) -> bool;
}

impl FifoLike for std::fs::FileType {
    fn is_fifo_like(&self) -> bool {
        use std::os::unix::fs::FileTypeExt;
        self.is_fifo()
    }
}

/// The local time zone's offset, as `touch -d` reads a local time.
fn local_offset_s() -> i64 {
    let out = Command::new("date").arg("+%z").output().unwrap();
    let z = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let sign = if z.starts_with('-') { -1 } else { 1 };
    let h: i64 = z[1..3].parse().unwrap_or(0);
    let mm: i64 = z[3..5].parse().unwrap_or(0);
    sign * (h * 3600 + mm * 60)
}

#[test]
fn a_dead_server_gives_eio_in_bounded_time_and_a_restarted_one_works_again() {
    if !fuse_available() {
        return;
    }
    let mut s = Setup::new(1, |_| {}, |o| o.timeout = Duration::from_secs(3));
    let m = s.mnt();
    std::fs::write(m.join("f"), "before").unwrap();
    let addr = s.servers[0].addr();
    s.servers.pop().unwrap().shutdown().unwrap();
    let started = Instant::now();
    // The open (its lookup may go to the server) or the write fails with EIO.
    let e = std::fs::OpenOptions::new()
        .write(true)
        .open(m.join("f"))
        .and_then(|mut f| f.write_all(b"during"))
        .unwrap_err();
    assert_eq!(e.raw_os_error(), Some(5), "EIO expected: {e}");
    eprintln!("EIO after {:?}", started.elapsed());
    // The same address again: new I/O works.
    let mut cfg = ServerConfig::new(s.root(0)).with_insecure_loopback();
    cfg.listen = addr.to_string();
    cfg.token = Some(TOKEN.into());
    s.servers.push(Server::start(cfg).unwrap());
    std::fs::write(m.join("f"), "after").unwrap();
    assert_eq!(std::fs::read_to_string(m.join("f")).unwrap(), "after");
}

/// Requests the servers completed for job `job`.
fn job_ops(s: &Setup, job: u64) -> u64 {
    jobs_reports(&s.servers, TOKEN)
        .iter()
        .flat_map(|rep| rep.jobs.iter().filter(|j| j.job == job))
        .map(|j| j.ops)
        .sum()
}

/// A create in a directory costs the kernel's lookup of the name and the create itself; an
/// unlink, its lookup and the unlink: the directory's attributes, which the kernel drops at
/// each change and asks for before the next one, come with the change's answer (before they
/// were a third request each: 3 per create, 3 per unlink).
/// Job `job` creates `n` empty files `d/f1..fn` through the mount, a directory made for them:
/// returns `d` and the requests the servers counted for the job.
fn create_files(s: &Setup, job: u64, n: u64) -> (String, u64) {
    let d = s.mnt().join("d");
    std::fs::create_dir(&d).unwrap();
    let d = d.display().to_string();
    let job_s = job.to_string();
    ok(&sh(
        &format!("for i in $(seq {n}); do : > {d}/f$i; done"),
        &[("IOSETS_JOB_ID", &job_s)],
    ));
    (d, job_ops(s, job))
}

/// Job `job` removes `d/f1..fn` through the mount: returns the requests counted for the job
/// meanwhile.
fn remove_files(s: &Setup, job: u64, d: &str, n: u64) -> u64 {
    let before = job_ops(s, job);
    let job_s = job.to_string();
    ok(&sh(
        &format!("for i in $(seq {n}); do rm {d}/f$i; done"),
        &[("IOSETS_JOB_ID", &job_s)],
    ));
    assert_eq!(std::fs::read_dir(d).unwrap().count(), 0);
    job_ops(s, job) - before
}

#[test]
fn creates_and_unlinks_in_a_directory_take_two_requests_each() {
    if !fuse_available() {
        return;
    }
    let s = Setup::new(1, |_| {}, |_| {});
    let n = 200;
    let (d, created) = create_files(&s, 301, n);
    let removed = remove_files(&s, 301, &d, n);
    // A few more for the directory's own lookups (its name's cache lasts `attr_ttl`).
    let bound = 2 * n + n / 4;
    assert!(
        (2 * n..=bound).contains(&created),
        "{created} requests for {n} creates (2 each, at most {bound})"
    );
    assert!(
        removed <= bound,
        "{removed} requests for {n} unlinks (at most 2 each, {bound})"
    );
}

/// Over two servers, the kernel's lookup of a name the mount holds no inode for asks the
/// name's home server alone, and the other only when the name is a file: a create costs that
/// lookup and the create on both servers (3 requests, not 4); an unlink, whose name the mount
/// holds, its lookup and the unlink on both (4). A file made through another mount is seen
/// with the size of every server's part (the second-mount test checks a 3 MiB file).
#[test]
fn over_two_servers_a_new_names_lookup_asks_its_home_server_alone() {
    if !fuse_available() {
        return;
    }
    let s = Setup::new(2, |_| {}, |_| {});
    let n = 100;
    let (d, created) = create_files(&s, 303, n);
    // A few more for the directory's own lookups (its name's cache lasts `attr_ttl`).
    let bound = 3 * n + n / 4;
    assert!(
        (3 * n..=bound).contains(&created),
        "{created} requests for {n} creates over 2 servers (3 each, at most {bound})"
    );
    // Each file is a file of both servers, and a stat after the cache sees its size.
    ok(&sh(
        &format!("head -c 5000 /dev/zero > {d}/f1"),
        &[("IOSETS_JOB_ID", "303")],
    ));
    std::thread::sleep(Duration::from_millis(1_200));
    assert_eq!(std::fs::metadata(format!("{d}/f1")).unwrap().len(), 5000);
    remove_files(&s, 303, &d, n);
}

/// A file unlinked while open keeps its bytes for the open descriptor under a hidden name, and
/// its last close removes that name (the one release that talks to the servers; every other
/// is answered on the FUSE thread). Over two servers in front of one root, as deployed, and
/// over two with separate roots, where each server renames its own part: the descriptor's
/// reads and writes then follow the old name's layout (before, it read zeros past a byte).
#[test]
fn the_last_close_of_a_file_unlinked_while_open_removes_its_hidden_name() {
    use std::io::{Read, Seek, SeekFrom};
    if !fuse_available() {
        return;
    }
    for (s, roots) in [(Setup::shared(2), 1), (Setup::new(2, |_| {}, |_| {}), 2)] {
        let names = || -> Vec<Vec<String>> {
            (0..roots)
                .map(|i| {
                    let mut v: Vec<String> = std::fs::read_dir(s.root(i))
                        .unwrap()
                        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                        .collect();
                    v.sort();
                    v
                })
                .collect()
        };
        let before = names();
        let p = s.mnt().join("held");
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&p)
            .unwrap();
        // 3 MiB: chunks on both servers, half written before the unlink, half after.
        let data: Vec<u8> = (0..3 << 20).map(|i| (i % 251) as u8).collect();
        f.write_all(&data[..3 << 19]).unwrap();
        std::fs::remove_file(&p).unwrap();
        assert!(!p.exists());
        f.write_all(&data[3 << 19..]).unwrap();
        // Another file's close answers at once and removes nothing.
        std::fs::write(s.mnt().join("other"), b"x").unwrap();
        std::fs::remove_file(s.mnt().join("other")).unwrap();
        for (i, n) in names().iter().enumerate() {
            assert_eq!(
                n.len(),
                before[i].len() + 1,
                "{roots} root(s), root {i}: {n:?}"
            );
        }
        f.seek(SeekFrom::Start(0)).unwrap();
        let mut back = Vec::new();
        f.read_to_end(&mut back).unwrap();
        let first_bad = back.iter().zip(&data).position(|(a, b)| a != b);
        assert!(
            back == data,
            "{roots} root(s): the open descriptor reads {} bytes of {}, first difference at {first_bad:?}",
            back.len(),
            data.len()
        );
        drop(f);
        // The kernel sends the release after close(2) returns, without waiting for it.
        let deadline = Instant::now() + Duration::from_secs(10);
        while names() != before && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(names(), before, "{roots} root(s): the hidden name is gone");
    }
}

/// A name that is not there is kept by the kernel as a negative entry for `attr_ttl`: a `stat`
/// of a new name and then its create ask the servers twice (the lookup and the create), not
/// four times (two lookups of the stats, the create's own lookup, the create).
#[test]
fn a_missing_name_is_asked_for_once_within_attr_ttl() {
    if !fuse_available() {
        return;
    }
    // A long cache, so that the loop below stays within it however slow the machine is.
    let s = Setup::new(1, |_| {}, |o| o.attr_ttl = Duration::from_secs(30));
    let d = s.mnt().join("d");
    std::fs::create_dir(&d).unwrap();
    let d = d.display().to_string();
    let env = [("IOSETS_JOB_ID", "302")];
    let n = 100;
    ok(&sh(
        &format!(
            "for i in $(seq {n}); do test -e {d}/f$i && exit 3; test -e {d}/f$i && exit 4; : > {d}/f$i; done"
        ),
        &env,
    ));
    let asked = job_ops(&s, 302);
    assert_eq!(std::fs::read_dir(&d).unwrap().count() as u64, n);
    let bound = 2 * n + n / 4;
    assert!(
        (2 * n..=bound).contains(&asked),
        "{asked} requests for {n} stats, stats again and creates (2 each, at most {bound})"
    );
    // Made behind the mount's back (in the server's root): not seen while the negative entry
    // lasts is allowed, but an unlink and a create through the mount are seen at once.
    ok(&sh(
        &format!("rm {d}/f1 && test ! -e {d}/f1 && : > {d}/f1 && test -e {d}/f1"),
        &env,
    ));
}

/// Two mounts of the same servers (two compute nodes): what one creates, changes, renames or
/// removes, the other sees once `attr_ttl` has passed since the change (docs: the mount's
/// coherence bound), for files and directories, over two servers.
#[test]
fn a_second_mount_sees_the_first_ones_changes_within_attr_ttl() {
    if !fuse_available() {
        return;
    }
    let ttl = Duration::from_millis(300);
    let s = Setup::new(2, |_| {}, |o| o.attr_ttl = ttl);
    let other = mount(&s.dir.path().join("mnt2"), &s.servers, TOKEN, |o| {
        o.attr_ttl = ttl
    });
    let (a, b) = (s.mnt(), s.dir.path().join("mnt2"));
    let settle = || std::thread::sleep(ttl + Duration::from_millis(200));
    let read = |p: &Path| std::fs::read(p).ok();
    // B looks first (and keeps what it saw), then A changes.
    assert!(read(&b.join("x")).is_none());
    std::fs::write(a.join("x"), b"one").unwrap();
    settle();
    assert_eq!(read(&b.join("x")).as_deref(), Some(&b"one"[..]));
    // A change of contents and size (over two chunks' servers: 3 MiB).
    let big: Vec<u8> = (0..3 << 20).map(|i| (i % 251) as u8).collect();
    std::fs::write(a.join("x"), &big).unwrap();
    settle();
    assert_eq!(
        std::fs::metadata(b.join("x")).unwrap().len(),
        big.len() as u64
    );
    assert!(read(&b.join("x")).unwrap() == big);
    // A change of mode.
    std::fs::set_permissions(a.join("x"), std::fs::Permissions::from_mode(0o640)).unwrap();
    settle();
    assert_eq!(
        std::fs::metadata(b.join("x")).unwrap().mode() & 0o777,
        0o640
    );
    // A rename, into a directory B has listed.
    std::fs::create_dir(a.join("d")).unwrap();
    settle();
    assert_eq!(std::fs::read_dir(b.join("d")).unwrap().count(), 0);
    std::fs::rename(a.join("x"), a.join("d/y")).unwrap();
    settle();
    assert!(read(&b.join("x")).is_none());
    assert!(read(&b.join("d/y")).unwrap() == big);
    let names: Vec<_> = std::fs::read_dir(b.join("d"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["y"]);
    // A removal of the file and its directory.
    std::fs::remove_file(a.join("d/y")).unwrap();
    std::fs::remove_dir(a.join("d")).unwrap();
    settle();
    assert!(read(&b.join("d/y")).is_none());
    assert!(!b.join("d").exists());
    // And the other way round: B makes, A sees.
    std::fs::write(b.join("z"), b"from b").unwrap();
    settle();
    assert_eq!(read(&a.join("z")).as_deref(), Some(&b"from b"[..]));
    other.unmount().unwrap();
}

/// `ls -l` of a directory is one listing with attributes per server (READDIRPLUS), not a lookup
/// per entry: 200 entries over two servers, listed after the kernel's cache expired, take a
/// handful of requests (before: the listing and two lstats per entry, 401), and show each
/// file's size as its parts on both servers make it.
#[test]
fn ls_l_asks_each_server_once_not_once_per_entry() {
    if !fuse_available() {
        return;
    }
    let ttl = Duration::from_millis(300);
    let s = Setup::new(2, |_| {}, |o| o.attr_ttl = ttl);
    let d = s.mnt().join("d");
    std::fs::create_dir(&d).unwrap();
    let n = 200;
    for i in 0..n {
        std::fs::write(d.join(format!("f{i:03}")), vec![b'x'; i]).unwrap();
    }
    // One file over both servers' chunks.
    std::fs::write(d.join("f000"), vec![7u8; 3 << 20]).unwrap();
    std::thread::sleep(ttl + Duration::from_millis(200));
    let before = job_ops(&s, 303);
    let out = sh(
        &format!("ls -l --time-style=+ {}", d.display()),
        &[("IOSETS_JOB_ID", "303")],
    );
    ok(&out);
    let asked = job_ops(&s, 303) - before;
    let text = String::from_utf8_lossy(&out.stdout);
    let sizes: Vec<(String, u64)> = text
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[f.len() - 1].to_string(), f[4].parse().unwrap())
        })
        .collect();
    assert_eq!(sizes.len(), n, "{text}");
    assert_eq!(sizes[0], ("f000".to_string(), 3 << 20));
    for (i, (name, size)) in sizes.iter().enumerate().skip(1) {
        assert_eq!(
            (name.as_str(), *size),
            (format!("f{i:03}").as_str(), i as u64)
        );
    }
    assert!(
        asked <= 8,
        "{asked} requests for ls -l of {n} entries over 2 servers (at most 8)"
    );
}
