//! Running the `iosets` binary in tests, shared by every CLI test file.
#![allow(dead_code)]

pub mod experiment;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::{self, JoinHandle};

use iosets_proto::io::read_frame_blocking;
use iosets_proto::{encode, Bytes, Frame, Header, Request, Response, DEFAULT_MAX_FRAME};
use iosets_types::JobId;

/// A fresh, empty directory for one test. Numbered as well as named: the test files share one
/// process (tests/main.rs), and two of them may use the same name at once (`bad`).
pub fn scratch(name: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("iosets-cli-{}-{n}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The launcher variables the app reads: removed so that the host's environment (a Slurm
/// allocation, an MPI job) cannot change what a test sees.
pub const LAUNCHER_VARS: [&str; 11] = [
    "IOSETS_JOB_ID",
    "SLURM_JOB_ID",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_MCA_ess_base_jobid",
    "PMIX_NAMESPACE",
    "PMI_RANK",
    "PMI_SIZE",
    "PMIX_RANK",
];

/// `iosets app KIND ARGS` in `dir`, without the [`LAUNCHER_VARS`] of this process.
pub fn app(dir: &Path, kind: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_iosets"));
    cmd.current_dir(dir).args(["app", kind]).args(args);
    for v in LAUNCHER_VARS {
        cmd.env_remove(v);
    }
    cmd
}

/// The path of file `name` in `folder`, a folder named relative to this crate's directory
/// (e.g. `../../scenarios`), as a command-line argument.
pub fn beside_the_crate(folder: &str, name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(folder)
        .join(name)
        .display()
        .to_string()
}

/// Where a server started by [`serve`] in `dir` keeps the node's default secret (through
/// `IOSETS_AUTH_FILE`: a test never makes `/etc/iosets/secret`).
pub fn node_secret_path(dir: &Path) -> PathBuf {
    dir.join("node.secret")
}

/// The secret a server started by [`serve`] in `dir` made.
pub fn node_secret(dir: &Path) -> iosets_client::Secret {
    iosets_client::Secret::from_file(&node_secret_path(dir)).unwrap()
}

/// Runs `iosets ARGS` in `dir` (finding the node's secret, when a server of `dir` made one, as
/// a client on its node would).
pub fn iosets(dir: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_iosets"));
    cmd.current_dir(dir).args(args);
    // A server started here makes its secret here, never in /etc; `config check` reports on
    // that same place, so that its answer does not depend on this machine's /etc.
    if node_secret_path(dir).exists() || matches!(args.first(), Some(&"serve" | &"config")) {
        cmd.env("IOSETS_AUTH_FILE", node_secret_path(dir));
    } else {
        cmd.env_remove("IOSETS_AUTH_FILE");
    }
    cmd.output().unwrap()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs `iosets ARGS` in `dir` and expects it to succeed (the message gives its standard error
/// and output otherwise); returns its standard output.
pub fn succeeds(dir: &Path, args: &[&str]) -> String {
    let o = iosets(dir, args);
    let out = stdout(&o);
    assert!(o.status.success(), "{args:?}: {}\n{out}", stderr(&o));
    out
}

/// Runs and expects exit code 1 with a one-line message containing every `needle`.
pub fn fails(dir: &Path, args: &[&str], needles: &[&str]) {
    let o = iosets(dir, args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{args:?}: {err} {}", stdout(&o));
    assert_eq!(
        err.trim().lines().count(),
        1,
        "{args:?}: not one line: {err}"
    );
    for n in needles {
        assert!(err.contains(n), "{args:?}: {err:?} lacks {n:?}");
    }
}

/// [`fails`] for each case of a table: the flags given after `command` (e.g. `["experiment",
/// "random"]`), and what the one-line error must contain.
pub fn fails_each(dir: &Path, command: &[&str], cases: &[(&[&str], &[&str])]) {
    for (flags, needles) in cases {
        let args: Vec<&str> = command.iter().chain(flags.iter()).copied().collect();
        fails(dir, &args, needles);
    }
}

/// Starts `iosets serve ARGS` in `dir`; returns the child and the address it printed.
pub fn serve(dir: &Path, args: &[&str]) -> (Child, String) {
    let (child, line) = spawn_server(
        Command::new(env!("CARGO_BIN_EXE_iosets"))
            .current_dir(dir)
            .arg("serve")
            .args(args)
            .env("IOSETS_AUTH_FILE", node_secret_path(dir))
            .stdout(Stdio::piped())
            // Not read by the test: a pipe nobody drains could block the server's logging.
            .stderr(Stdio::null()),
    );
    (child, word_after(&line, "listening on "))
}

/// Spawns `cmd`, an `iosets serve` with its standard output piped, and returns the child and
/// the first line it prints (`listening on ADDR ...`), once it has printed it.
pub fn spawn_server(cmd: &mut Command) -> (Child, String) {
    let mut child = cmd.spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    (child, line)
}

/// The word after `key` in `line` (a server's first line, e.g. its address after
/// `listening on `); panics naming both when `key` is not there.
pub fn word_after(line: &str, key: &str) -> String {
    line.split(key)
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("no {key:?} in {line:?}"))
        .to_string()
}

/// Sends `signal` (`TERM`, `KILL`, ...) to `pid` with kill(1), which must succeed.
pub fn signal(pid: u32, signal: &str) {
    let s = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(s.success(), "kill -{signal} {pid}");
}

/// The wire bytes of request `req` of `job`, tagged `tag`.
pub fn frame(tag: u64, job: u64, req: Request) -> Vec<u8> {
    let h = Header::new(tag, JobId(job));
    encode(&Frame::Request(h, req)).to_vec()
}

/// Creates the file `f{job}` as job `job` with request tag `tag`, and expects it done.
pub fn create_file(s: &mut TcpStream, tag: u64, job: u64) {
    let create = Request::Create {
        path: format!("f{job}"),
        mode: 0o644,
        exclusive: false,
    };
    s.write_all(&frame(tag, job, create)).unwrap();
    assert!(matches!(recv(s), Some((t, Response::Ok(_))) if t == tag));
}

/// Pipelines `count` writes of `chunk` bytes to `f{job}` on `s` as job `job` from a thread of
/// its own: write `i` (from 0) at `i * chunk`, tagged `i + 1`, carries `data(i)`. It stops at the
/// first write the server does not take; its result is the number of writes sent.
pub fn spawn_writes(
    mut s: TcpStream,
    job: u64,
    count: u64,
    chunk: usize,
    data: impl Fn(u64) -> Vec<u8> + Send + 'static,
) -> JoinHandle<u64> {
    thread::spawn(move || {
        for i in 0..count {
            let req = Request::Write {
                path: format!("f{job}"),
                offset: i * chunk as u64,
                data: Bytes::from(data(i)),
            };
            if s.write_all(&frame(i + 1, job, req)).is_err() {
                return i; // the server stopped reading
            }
        }
        count
    })
}

/// The next response on `s` with its tag; `None` when the connection ends or sends garbage.
pub fn recv(s: &mut TcpStream) -> Option<(u64, Response)> {
    match read_frame_blocking(s, DEFAULT_MAX_FRAME).ok()? {
        Frame::Response(h, _, r) => Some((h.tag, r)),
        _ => None,
    }
}
