//! The server's file descriptors: it lives within RLIMIT_NOFILE, frees an unlinked file's space
//! at once, and fsyncs directories by descriptor at shutdown.
//!
//! One test changes this process's descriptor limit, so the tests of this file run one at a
//! time ([`SERIAL`]).

mod common;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use common::{create, metrics, read, required, write, Conn, TempDir};
use iosets_proto::{Reply, Request, Response};
use iosets_server::{Server, ServerConfig};
use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Puts the descriptor limit back on drop (raising a lowered hard limit needs root; without it
/// the limit stays lowered, which the other tests here live with).
struct RestoreLimit(Rlimit);

impl Drop for RestoreLimit {
    fn drop(&mut self) {
        let _ = setrlimit(
            Resource::Nofile,
            Rlimit {
                current: self.0.current,
                maximum: self.0.maximum,
            },
        );
    }
}

fn assert_all_ok(replies: impl IntoIterator<Item = Response>) {
    for r in replies {
        if let Response::Err { errno, message } = r {
            panic!("a request failed: errno {errno}: {message}");
        }
    }
}

/// D3: at a 1,024-descriptor limit the server used to run out (a 4,096-file cache and one
/// descriptor per dirty file), answering data, metadata and accepts with EMFILE.
#[test]
fn six_thousand_files_at_a_limit_of_1024_descriptors() {
    let _serial = serial();
    let _restore = RestoreLimit(getrlimit(Resource::Nofile));
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(1024),
            maximum: Some(1024),
        },
    )
    .expect("lowering this test's RLIMIT_NOFILE");
    let dir = TempDir::new("fd-limit");
    let server = Server::start(ServerConfig::new(&dir.0).with_insecure_loopback()).unwrap();
    let mut c = Conn::connect(server.addr(), 1);
    const FILES: usize = 6_000;
    let name = |i: usize| format!("f{i:05}");
    // Pipelined 100 at a time; the creates answered before their writes are sent (the
    // workers may serve one connection's requests in any order).
    for batch in (0..FILES).collect::<Vec<_>>().chunks(100) {
        assert_all_ok(
            c.pipeline(batch.iter().map(|&i| create(&name(i))).collect())
                .into_values(),
        );
        let writes = batch
            .iter()
            .map(|&i| write(&name(i), 0, name(i).into_bytes()));
        assert_all_ok(c.pipeline(writes.collect()).into_values());
    }
    // Still serving: a fresh connection, and a file the cache has long evicted.
    let mut fresh = Conn::connect(server.addr(), 2);
    match fresh.ok(read(&name(0), 0, 16)) {
        Reply::Data(d) => assert_eq!(&d[..], name(0).as_bytes()),
        r => panic!("{r:?}"),
    }
    let m = metrics(server.admin_addr().unwrap());
    assert_eq!(required::<u64>(&m, "iosets_fd_limit"), 1024);
    let early = required::<u64>(&m, "iosets_pressure_fsyncs_total{kind=\"file\"}");
    let dirty = required::<u64>(&m, "iosets_dirty_files");
    let cached = required::<u64>(&m, "iosets_open_files_cached");
    assert!(
        dirty < 1024 && cached < 1024,
        "dirty {dirty}, cached {cached}"
    );
    assert_eq!(required::<u64>(&m, "iosets_pressure_fsync_errors_total"), 0);
    drop((c, fresh));
    let report = server.shutdown().unwrap();
    assert_eq!(report.fsynced_files as u64, dirty);
    assert_eq!(
        early + dirty,
        FILES as u64,
        "each file fsynced once, early or at shutdown"
    );
    for i in (0..FILES).step_by(997) {
        assert_eq!(
            std::fs::read(dir.0.join(name(i))).unwrap(),
            name(i).as_bytes()
        );
    }
}

/// A tmpfs mounted for a test, unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Mounts a tmpfs of `size` (as `mount -o size=` spells it) on `dir`, or says why not.
    fn mount(dir: &Path, size: &str) -> Result<Tmpfs, String> {
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output()
            .map_err(|e| format!("running mount: {e}"))?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
        }
        Ok(Tmpfs(dir.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let ok = std::process::Command::new("umount")
            .arg(&self.0)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = std::process::Command::new("umount")
                .arg("-l")
                .arg(&self.0)
                .status();
        }
    }
}

/// Writes `mib` MiB to `path` through `c`, 1 MiB a request; the first failure.
fn write_mib(c: &mut Conn, path: &str, mib: u64) -> Result<(), String> {
    c.ok(create(path));
    for i in 0..mib {
        match c.call(write(path, i << 20, vec![0xa5; 1 << 20])) {
            Response::Ok(_) => {}
            Response::Err { errno, message } => {
                return Err(format!("MiB {i} of {path}: errno {errno}: {message}"))
            }
        }
    }
    Ok(())
}

/// D4: the server kept the descriptor of an unlinked file (dirty set, cache), so its space was
/// not freed while the server ran: on a 20 MiB disk, 15 MiB after an unlinked 15 MiB hit ENOSPC.
#[test]
fn unlink_frees_space_while_the_server_runs() {
    let _serial = serial();
    let dir = TempDir::new("fd-unlink");
    let fs = match Tmpfs::mount(&dir.0, "20m") {
        Ok(fs) => fs,
        Err(why) => {
            println!(
                "skipped: cannot mount a 20 MiB tmpfs on {}: {why}",
                dir.0.display()
            );
            return;
        }
    };
    let server = Server::start(ServerConfig::new(&fs.0).with_insecure_loopback()).unwrap();
    let mut c = Conn::connect(server.addr(), 1);
    write_mib(&mut c, "first", 15).unwrap();
    c.ok(Request::Unlink {
        path: "first".into(),
    });
    write_mib(&mut c, "second", 15).expect("the unlinked file's space is free again");
    drop(c);
    let report = server.shutdown().unwrap();
    assert_eq!(report.fsynced_files, 1, "only `second` has a name");
    drop(fs);
}

/// D5: a clean shutdown failed ("fsync at shutdown: path escapes the server's root") after a
/// directory rename and a symlink swap, because directories were fsynced by a path resolved
/// again at shutdown.
#[test]
fn shutdown_after_a_directory_rename_and_a_symlink_swap_succeeds() {
    let _serial = serial();
    let dir = TempDir::new("fd-swap");
    let server = Server::start(ServerConfig::new(&dir.0).with_insecure_loopback()).unwrap();
    let mut c = Conn::connect(server.addr(), 1);
    c.ok(Request::Mkdir {
        path: "a".into(),
        mode: 0o755,
    });
    c.ok(create("a/f"));
    c.ok(write("a/f", 0, b"data".to_vec()));
    c.ok(Request::Rename {
        from: "a".into(),
        to: "b".into(),
    });
    // Behind the server's back, in the backing directory: `a` now leads out of the root.
    std::os::unix::fs::symlink("/", dir.0.join("a")).unwrap();
    drop(c);
    let report = server
        .shutdown()
        .expect("the shutdown fsyncs every changed directory, wherever it is now");
    assert_eq!(report.fsynced_files, 1);
    assert_eq!(std::fs::read(dir.0.join("b/f")).unwrap(), b"data");
}
