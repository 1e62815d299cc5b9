//! `iosets top` in a real terminal: a real `iosets serve` on loopback, two jobs writing through
//! the client library with different priority hints, and `iosets top` running in a tmux session
//! whose screen the test reads (`capture-pane`) and to which it sends keys (`send-keys`).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use common::{iosets, node_secret, node_secret_path, scratch, stderr, stdout};
use iosets_client::{BlockingClient, ClientConfig};
use iosets_types::{JobId, Priority};

/// Starts `iosets serve` in `dir` on a free loopback port, serving `dir/root` with the control
/// token in `dir/tok`; returns the child and the address it printed.
fn serve(dir: &Path, root: &str) -> (Child, String) {
    std::fs::create_dir_all(dir.join(root)).unwrap();
    std::fs::write(dir.join("tok"), "secret\n").unwrap();
    common::serve(
        dir,
        &[
            "--root",
            root,
            "--listen",
            "127.0.0.1:0",
            "--token-file",
            "tok",
            "--admin-listen",
            "none",
        ],
    )
}

/// Everything the test started, stopped on drop whatever happened: the writers, the tmux
/// server (and with it `iosets top`), the I/O server, the scratch directory.
struct Rig {
    dir: PathBuf,
    servers: Vec<Child>,
    tmux_socket: Option<String>,
    stop: Arc<AtomicBool>,
    writers: Vec<JoinHandle<u64>>,
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for w in self.writers.drain(..) {
            let _ = w.join();
        }
        if let Some(s) = &self.tmux_socket {
            let _ = Command::new("tmux")
                .args(["-L", s, "kill-server"])
                .stderr(Stdio::null())
                .status();
        }
        for s in &mut self.servers {
            let _ = s.kill();
            let _ = s.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A job writing 64 KiB blocks to its own file with a priority hint, until told to stop or
/// 20000 writes (a bound, should the test hang elsewhere); returns the bytes written.
fn writer(
    addr: String,
    secret: iosets_client::Secret,
    job: u64,
    hint: f64,
    stop: Arc<AtomicBool>,
) -> JoinHandle<u64> {
    thread::spawn(move || {
        let mut cfg = ClientConfig::new(JobId(job));
        cfg.priority = Priority::new(hint);
        cfg.auth = Some(secret);
        let c = BlockingClient::connect_to(&[addr.as_str()], cfg).unwrap();
        let path = format!("/job{job}.dat");
        c.create(&path, 0o644, false).unwrap();
        let block = vec![job as u8; 64 << 10];
        let mut written = 0u64;
        for i in 0..20_000u64 {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            written += c
                .write_at(&path, (i % 64) * (64 << 10), block.clone())
                .unwrap();
            thread::sleep(Duration::from_millis(5));
        }
        written
    })
}

/// `tmux -L SOCKET ARGS`; its standard output.
fn tmux(socket: &str, args: &[&str]) -> std::process::Output {
    Command::new("tmux")
        .args(["-L", socket])
        .args(args)
        .env("TERM", "xterm-256color")
        // Started from inside a tmux session, tmux would refuse to nest.
        .env_remove("TMUX")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// The pane's screen.
fn screen(socket: &str) -> String {
    String::from_utf8_lossy(&tmux(socket, &["capture-pane", "-p", "-t", "top"]).stdout).into_owned()
}

/// The job ids in the jobs table, top to bottom.
fn job_order(screen: &str) -> Vec<u64> {
    screen
        .lines()
        .filter_map(|l| l.strip_prefix('\u{2502}'))
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect()
}

/// The cells of job `job`'s row, if it is on screen.
fn row(screen: &str, job: u64) -> Option<Vec<String>> {
    screen
        .lines()
        .filter_map(|l| l.strip_prefix('\u{2502}'))
        .find(|l| l.split_whitespace().next() == Some(&job.to_string()))
        .map(|l| {
            l.trim_end_matches(['\u{2502}', ' '])
                .split_whitespace()
                .map(str::to_owned)
                .collect()
        })
}

/// Waits, at most `limit`, until `ok(screen)`; panics with the last screen otherwise.
fn wait_for(socket: &str, what: &str, limit: Duration, ok: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + limit;
    loop {
        let s = screen(socket);
        if ok(&s) {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "no {what} within {limit:?}; the screen:\n{s}"
        );
        thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn top_shows_jobs_sorts_on_s_and_quits_on_q_in_a_real_terminal() {
    let tmux_there = Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        tmux_there,
        "tmux is not installed: run scripts/ecosystem-tools.sh (it installs tmux)"
    );
    let dir = scratch("top-tmux");
    let (server, addr) = serve(&dir, "r");
    let stop = Arc::new(AtomicBool::new(false));
    // A second server, killed once the screen is up: it must show as down, the rest going on.
    let (doomed, doomed_addr) = serve(&dir, "r2");
    let mut rig = Rig {
        dir: dir.clone(),
        servers: vec![server, doomed],
        tmux_socket: None,
        stop: stop.clone(),
        writers: Vec::new(),
    };
    // Job 11 hints set 2 (priority 0.01), job 22 set 0 (priority 1): sorted by job id 11 comes
    // first, sorted by set 22 does.
    rig.writers.push(writer(
        addr.clone(),
        node_secret(&dir),
        11,
        0.01,
        stop.clone(),
    ));
    rig.writers.push(writer(
        addr.clone(),
        node_secret(&dir),
        22,
        1.0,
        stop.clone(),
    ));

    let socket = format!("iosets-top-test-{}", std::process::id());
    rig.tmux_socket = Some(socket.clone());
    let status = dir.join("top-status");
    let command = format!(
        "IOSETS_AUTH_FILE='{}' '{}' top --server {addr} --server {doomed_addr} --token-file '{}' --interval 0.25; echo $? > '{}'",
        node_secret_path(&dir).display(),
        env!("CARGO_BIN_EXE_iosets"),
        dir.join("tok").display(),
        status.display()
    );
    let o = tmux(
        &socket,
        &[
            "new-session",
            "-d",
            "-s",
            "top",
            "-x",
            "120",
            "-y",
            "40",
            &command,
        ],
    );
    assert!(o.status.success(), "tmux new-session: {o:?}");

    let limit = Duration::from_secs(30);
    let s = wait_for(
        &socket,
        "two jobs with priorities and bandwidth",
        limit,
        |s| {
            let bw = |j| {
                row(s, j).is_some_and(|r| r.len() > 5 && r[5].parse::<f64>().is_ok_and(|w| w > 0.0))
            };
            job_order(s) == [11, 22] && bw(11) && bw(22)
        },
    );
    assert_eq!(
        row(&s, 11).unwrap()[..4],
        ["11", "2", "0.01", "hint"],
        "{s}"
    );
    assert_eq!(row(&s, 22).unwrap()[..4], ["22", "0", "1", "hint"], "{s}");
    assert!(s.contains("servers 2 up, 0 down"), "{s}");
    assert!(s.contains("sort JOB"), "{s}");

    rig.servers[1].kill().unwrap();
    rig.servers[1].wait().unwrap();
    let s = wait_for(&socket, "the killed server shown down", limit, |s| {
        s.contains("servers 1 up, 1 down") && s.contains(&format!("{doomed_addr} DOWN"))
    });
    assert_eq!(job_order(&s), [11, 22], "the live server's jobs stay:\n{s}");

    assert!(tmux(&socket, &["send-keys", "-t", "top", "s"])
        .status
        .success());
    let s = wait_for(&socket, "rows sorted by set", limit, |s| {
        job_order(s) == [22, 11] && s.contains("sort SET")
    });
    assert!(s.contains("servers 1 up"), "{s}");

    assert!(tmux(&socket, &["send-keys", "-t", "top", "q"])
        .status
        .success());
    let deadline = Instant::now() + limit;
    while tmux(&socket, &["has-session", "-t", "top"])
        .status
        .success()
    {
        assert!(
            Instant::now() < deadline,
            "top still running {limit:?} after q:\n{}",
            screen(&socket)
        );
        thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        std::fs::read_to_string(&status).unwrap().trim(),
        "0",
        "iosets top's exit status"
    );
    stop.store(true, Ordering::Relaxed);
    for w in rig.writers.drain(..) {
        assert!(w.join().unwrap() > 0, "each job wrote");
    }
}

#[test]
fn top_once_prints_a_frame_without_a_terminal_and_fails_when_no_server_answers() {
    let dir = scratch("top-once");
    let (server, addr) = serve(&dir, "r");
    let rig = Rig {
        dir: dir.clone(),
        servers: vec![server],
        tmux_socket: None,
        stop: Arc::new(AtomicBool::new(false)),
        writers: Vec::new(),
    };
    let ctl = iosets(
        &dir,
        &[
            "ctl",
            "--server",
            &addr,
            "--token-file",
            "tok",
            "set-priority",
            "42",
            "0.001",
        ],
    );
    assert!(ctl.status.success(), "{ctl:?}");
    // A port nothing listens on: the second server is down, the frame still comes.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    // One frame of `top` over `servers`, with the token.
    let top_once = |servers: &[&str]| {
        let mut args = vec!["top"];
        for server in servers {
            args.extend(["--server", server]);
        }
        args.extend(["--token-file", "tok", "--once", "--interval", "0.1"]);
        iosets(&dir, &args)
    };
    let o = top_once(&[&addr, &dead]);
    let text = stdout(&o);
    assert!(o.status.success(), "{}{}", text, stderr(&o));
    assert!(text.contains("servers 1 up, 1 down"), "{text}");
    assert!(text.contains(&format!("{dead} DOWN")), "{text}");
    let row: Vec<&str> = text
        .lines()
        .find(|l| l.starts_with("42 "))
        .unwrap_or_else(|| panic!("no job 42:\n{text}"))
        .split_whitespace()
        .collect();
    assert_eq!(row[..4], ["42", "3", "0.001", "control"], "{text}");
    let o = top_once(&[&dead]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no server answered"), "{}", stderr(&o));
    let o = iosets(
        &dir,
        &[
            "top",
            "--server",
            &addr,
            "--token-file",
            "tok",
            "--interval",
            "0",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("--interval 0: expected"),
        "{}",
        stderr(&o)
    );
    drop(rig);
}
