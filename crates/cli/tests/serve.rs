//! `iosets serve` and `iosets ctl` as a user runs them: bad flags, control, and SIGTERM under
//! load — every write the client saw acknowledged is in the file afterwards.

use crate::common;

use std::collections::HashMap;
use std::io::Read;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use common::{create_file, fails, fails_each, iosets, recv, scratch, serve, spawn_writes, stdout};
use iosets_proto::{Reply, Response};

fn pattern(job: u64, i: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|k| (job as usize * 131 + i as usize * 7 + k) as u8)
        .collect()
}

const CHUNK: usize = 16 * 1024;
const WRITES: u64 = 400;

/// A fresh directory for a server of these tests: its root `r`, and the control token
/// `secret` in `tok`.
fn server_dir(name: &str) -> PathBuf {
    let dir = scratch(name);
    std::fs::create_dir_all(dir.join("r")).unwrap();
    std::fs::write(dir.join("tok"), "secret\n").unwrap();
    dir
}

/// Runs `iosets ctl --server ADDR --token-file tok ARGS` in `dir` (one of [`server_dir`]).
fn ctl_with_token(dir: &Path, addr: &str, args: &[&str]) -> Output {
    let mut all = vec!["ctl", "--server", addr, "--token-file", "tok"];
    all.extend_from_slice(args);
    iosets(dir, &all)
}

#[test]
fn sigterm_under_load_keeps_every_acknowledged_write() {
    let dir = scratch("sigterm");
    std::fs::create_dir_all(dir.join("root")).unwrap();
    // 8 MiB/s: 4 jobs × 400 × 16 KiB = 25 MiB would take 3 s, so SIGTERM lands mid-run.
    let (mut child, addr) = serve(
        &dir,
        &[
            "--root",
            "root",
            "--listen",
            "127.0.0.1:0",
            "--throttle-mib-s",
            "8",
            // Raw frames, without the secret's handshake.
            "--insecure-loopback",
        ],
    );
    let mut setup = TcpStream::connect(&addr).unwrap();
    for job in 1..=4u64 {
        create_file(&mut setup, job, job);
    }
    let acks = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (1..=4u64)
        .map(|job| {
            let addr = addr.clone();
            let acks = acks.clone();
            thread::spawn(move || {
                let mut s = TcpStream::connect(&addr).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
                let w = s.try_clone().unwrap();
                let sender = spawn_writes(w, job, WRITES, CHUNK, move |i| pattern(job, i, CHUNK));
                // Tags of the writes acknowledged as fully written.
                let mut acked = Vec::new();
                let mut answers = HashMap::new();
                while let Some((tag, r)) = recv(&mut s) {
                    if matches!(r, Response::Ok(Reply::Written(n)) if n as usize == CHUNK) {
                        acked.push(tag - 1);
                        acks.fetch_add(1, Ordering::Relaxed);
                    }
                    answers.insert(tag, r);
                }
                let _ = sender.join();
                acked
            })
        })
        .collect();
    // Signal as soon as the writes are flowing: the run needs 3 s of emulated device time.
    while acks.load(Ordering::Relaxed) < 50 {
        thread::sleep(Duration::from_millis(5));
    }
    common::signal(child.id(), "TERM");
    let status = child.wait().unwrap();
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert_eq!(status.code(), Some(0), "serve exit: {out}");
    assert!(
        out.contains("stopped;") && out.contains("balanced"),
        "{out}"
    );
    // Every file written was fsynced on the way out (the page cache alone would pass the
    // content checks below).
    let fsynced: usize = out
        .split(" files fsynced")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no fsync count in {out}"));
    assert_eq!(fsynced, 4, "{out}");
    let mut total = 0;
    for (job, c) in (1..=4u64).zip(clients) {
        let acked = c.join().unwrap();
        let data = std::fs::read(dir.join(format!("root/f{job}"))).unwrap();
        for &i in &acked {
            let at = (i as usize) * CHUNK;
            assert!(
                data.len() >= at + CHUNK && data[at..at + CHUNK] == pattern(job, i, CHUNK)[..],
                "job {job}: acknowledged write {i} is not on disk"
            );
        }
        total += acked.len();
    }
    assert!(total > 0, "some writes were acknowledged before the signal");
    // The server reads at most 256 requests per connection ahead (backpressure), so the signal
    // arrived with writes not yet read: those were never acknowledged, and that is allowed.
    assert!(
        total < 4 * WRITES as usize,
        "the signal arrived while writes were still coming ({total} acknowledged)"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn serve_and_ctl_refuse_bad_input() {
    let dir = scratch("serve-bad");
    fails(&dir, &["serve"], &["--root"]);
    fails(&dir, &["serve", "--root", "nowhere"], &["not a directory"]);
    std::fs::create_dir_all(dir.join("r")).unwrap();
    std::fs::write(dir.join("open.key"), "0123456789abcdef0123456789abcdef").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        let p = dir.join("short.key");
        std::fs::write(&p, "short").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    std::fs::write(dir.join("empty-token"), "  \n").unwrap();
    fails(
        &dir,
        &["serve", "--root", "r", "--policy", "fastest"],
        &["fastest", "valid policies"],
    );
    fails(
        &dir,
        &["serve", "--root", "r", "--throttle-mib-s=-3"],
        &["throttle"],
    );
    fails(
        &dir,
        &[
            "serve",
            "--root",
            "r",
            "--policy",
            "wfq",
            "--policy-opt",
            "default_weight=-1",
        ],
        &["default_weight"],
    );
    // One flag's bad value: the workers and network threads, the address, the bounds, the hint policy, the admin
    // address and the cluster secret (issue 16), the token file.
    for (flag, value, needle) in [
        ("--workers", "0", "workers"),
        ("--net-threads", "0", "net_threads = 0: must be 1..=64"),
        ("--net-threads", "65", "net_threads = 65: must be 1..=64"),
        ("--listen", "256.0.0.1:1", "binding"),
        ("--hints", "maybe", "hints"),
        ("--hints", "cap=0", "hints"),
        ("--max-inflight-mib", "0", "max-inflight-mib"),
        (
            "--max-inflight-mib-per-conn",
            "-3",
            "max-inflight-mib-per-conn",
        ),
        ("--idle-timeout-s", "0", "idle_timeout_s"),
        ("--frame-timeout-s", "nan", "frame_timeout_s"),
        ("--max-connections", "0", "max_connections"),
        ("--admin-listen", "256.0.0.1:1", "admin address"),
        ("--auth-file", "no-such-file", "no-such-file"),
        ("--auth-file", "open.key", "must not be readable"),
        ("--auth-file", "short.key", "16"),
        ("--forget-idle-s", "0", "forget_idle_s"),
        ("--forget-idle-s", "nan", "forget_idle_s"),
        ("--max-jobs", "3", "max_jobs"),
        ("--token-file", "empty-token", "empty"),
    ] {
        fails(&dir, &["serve", "--root", "r", flag, value], &[needle]);
    }
    std::fs::write(dir.join("bad.toml"), "root = \"r\"\nworkerz = 2\n").unwrap();
    fails(&dir, &["serve", "--config", "bad.toml"], &["workerz"]);
    // ctl: no token, nobody listening, bad priority.
    fails(
        &dir,
        &["ctl", "--server", "127.0.0.1:1", "jobs"],
        &["IOSETS_TOKEN"],
    );
    std::fs::write(dir.join("tok"), "secret\n").unwrap();
    let cases: [(&[&str], &[&str]); 2] = [
        (&["jobs"], &["cannot connect"]),
        (&["set-priority", "1", "0"], &["priority"]),
    ];
    let ctl = ["ctl", "--server", "127.0.0.1:1", "--token-file", "tok"];
    fails_each(&dir, &ctl, &cases);
}

#[test]
fn ctl_drives_a_running_server() {
    let dir = server_dir("serve-ctl");
    std::fs::write(
        dir.join("iosets.toml"),
        "root = \"r\"\nlisten = \"127.0.0.1:0\"\npolicy = \"wfq\"\ntoken_file = \"tok\"\n",
    )
    .unwrap();
    let (mut child, addr) = serve(&dir, &["--config", "iosets.toml"]);
    let ctl = |args: &[&str]| ctl_with_token(&dir, &addr, args);
    let o = ctl(&["set-priority", "42", "0.01"]);
    assert!(o.status.success(), "{o:?}");
    let o = ctl(&["jobs"]);
    let text = stdout(&o);
    assert!(text.contains("policy: wfq"), "{text}");
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("42 "))
        .unwrap();
    assert!(line.contains("0.01") && line.contains("control"), "{line}");
    assert!(ctl(&["policy", "iosets", "max_exclusive_ms=100"])
        .status
        .success());
    let o = ctl(&["stats"]);
    let text = stdout(&o);
    assert!(text.contains("policy            iosets"), "{text}");
    assert!(text.contains("policy switches   1"), "{text}");
    assert!(text.contains("balance           ok"), "{text}");
    let o = ctl(&["--json", "stats"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["switches"], 1);
    let o = ctl(&["policy", "nosuch"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(common::stderr(&o).contains("unknown policy"));
    let o = iosets(
        &dir,
        &[
            "ctl",
            "--server",
            &addr,
            "--token-file",
            "iosets.toml",
            "jobs",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "a wrong token is refused");
    assert!(common::stderr(&o).contains("wrong token"));
    stopped_cleanly(&mut child);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ctl_rule_adds_lists_and_deletes_quota_rules() {
    let dir = server_dir("serve-rule");
    std::fs::write(
        dir.join("quota.toml"),
        "job_share_pct = 50\n[[rule]]\nname = \"compute\"\nmatch = \"job={1 2}\"\nthreads_pct = 71\n",
    )
    .unwrap();
    let (mut child, addr) = serve(
        &dir,
        &[
            "--root",
            "r",
            "--listen",
            "127.0.0.1:0",
            "--workers",
            "24",
            "--token-file",
            "tok",
            "--quota",
            "quota.toml",
        ],
    );
    let ctl = |args: &[&str]| ctl_with_token(&dir, &addr, args);
    let o = ctl(&["rule", "list"]);
    let text = stdout(&o);
    assert!(text.contains("24 service threads"), "{text}");
    let line = text.lines().find(|l| l.contains("compute")).unwrap();
    // 71 % of 24 threads: 17.
    assert!(
        line.contains("job={1 2}") && line.contains(" 17 "),
        "{line}"
    );
    for args in [
        &[
            "rule",
            "add",
            "gio",
            "client=10.0.0.0/8",
            "--threads",
            "29%",
        ][..],
        &[
            "rule",
            "add",
            "tbf",
            "uid=1000 class=data-write",
            "--rate-bytes",
            "100M",
            "--strict",
            "--rank",
            "0",
        ],
    ] {
        let o = ctl(args);
        assert!(o.status.success(), "{args:?}: {o:?}");
    }
    let o = ctl(&["--json", "rule", "list"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let names: Vec<&str> = v["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["tbf", "compute", "gio"]);
    assert_eq!(v["rules"][0]["limits"], "rate=104857600B/s strict");
    assert_eq!(v["rules"][2]["threads"], 6);
    // Refused: over 100 % in total, a bad flag value, an unknown rule; nothing changes.
    for (args, needle) in [
        (
            &["rule", "add", "x", "job=3", "--threads", "1"][..],
            "over 100",
        ),
        (
            &["rule", "add", "y", "job=3", "--threads", "lots"][..],
            "not a percentage",
        ),
        (
            &["rule", "add", "z", "job=3", "--rate-bytes", "fast"][..],
            "not a byte rate",
        ),
        (&["rule", "del", "nosuch"][..], "`nosuch`"),
        (
            &["rule", "add", "w", "cidr=1.2.3.4"][..],
            "unknown match key",
        ),
        (
            &[
                "rule",
                "add",
                "u",
                "user=no-such-user-iosets",
                "--rate",
                "5",
            ][..],
            "no user `no-such-user-iosets` on this server",
        ),
    ] {
        let o = ctl(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(common::stderr(&o).contains(needle), "{args:?}: {o:?}");
    }
    assert!(ctl(&["rule", "del", "tbf"]).status.success());
    let text = stdout(&ctl(&["rule", "list"]));
    assert!(!text.contains("tbf") && text.contains("gio"), "{text}");
    // A user by name: looked up on the server, kept as the uid.
    let o = ctl(&["rule", "add", "adm", "user=root class=meta", "--rate", "50"]);
    assert!(o.status.success(), "{o:?}");
    let text = stdout(&ctl(&["rule", "list"]));
    assert!(text.contains("uid=0 class=meta"), "{text}");
    stopped_cleanly(&mut child);
    // A quota file with a bad rule stops the server at start, naming the file and the rule.
    std::fs::write(
        dir.join("bad.toml"),
        "[[rule]]\nname = \"b\"\nmatch = \"client=10.0.0.1/8\"\nthreads_pct = 5\n",
    )
    .unwrap();
    let o = iosets(&dir, &["serve", "--root", "r", "--quota", "bad.toml"]);
    assert_eq!(o.status.code(), Some(1));
    let err = common::stderr(&o);
    assert!(err.contains("bad.toml") && err.contains("`b`"), "{err}");
    let o = iosets(&dir, &["serve", "--root", "r", "--quota", "missing.toml"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(common::stderr(&o).contains("missing.toml"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The names of the rules `iosets ctl rule list` gives, in rank order.
fn rule_names(dir: &Path, addr: &str) -> Vec<String> {
    let o = ctl_with_token(dir, addr, &["--json", "rule", "list"]);
    assert!(o.status.success(), "{o:?}");
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    v["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_string())
        .collect()
}

/// Rules added and deleted with `iosets ctl rule` are kept in the state file (issue 31, item 3):
/// there after SIGTERM and a restart, and after `kill -9` and a restart; a corrupt state file
/// stops the server at start naming its line, and is left as it is; a change that cannot be
/// written is undone and refused.
#[test]
fn rules_changed_at_run_time_survive_a_restart() {
    let dir = server_dir("serve-state");
    let args = [
        "--root",
        "r",
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "8",
        "--token-file",
        "tok",
        "--state-file",
        "state.toml",
    ];
    let (mut child, addr) = serve(&dir, &args);
    for add in [
        &[
            "rule",
            "add",
            "gio",
            "client=10.0.0.0/8",
            "--threads",
            "25%",
        ][..],
        &[
            "rule",
            "add",
            "tbf",
            "uid=1000 class=data-write",
            "--rate-bytes",
            "100M",
            "--strict",
            "--rank",
            "0",
        ],
        &[
            "rule",
            "add",
            "md",
            "class=meta",
            "--rate",
            "500",
            "--per-rule",
        ],
        &["share", "set", "account=physics", "3"],
        &["share", "set", "user=root", "2"],
    ] {
        let o = ctl_with_token(&dir, &addr, add);
        assert!(o.status.success(), "{add:?}: {o:?}");
    }
    assert_eq!(rule_names(&dir, &addr), ["tbf", "gio", "md"]);
    let shares = |addr: &str| -> Vec<(String, f64)> {
        let o = ctl_with_token(&dir, addr, &["--json", "share", "list"]);
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        v["shares"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["node"].as_str().unwrap().to_owned(),
                    s["weight"].as_f64().unwrap(),
                )
            })
            .collect()
    };
    let both = vec![
        ("account=physics".to_string(), 3.0),
        ("user=root".to_string(), 2.0),
    ];
    assert_eq!(shares(&addr), both);
    let text = std::fs::read_to_string(dir.join("state.toml")).unwrap();
    assert!(
        text.contains("name = \"tbf\"") && text.contains("strict = true"),
        "{text}"
    );

    // SIGTERM, restart: the same rules, in the same order, with the same limits.
    common::signal(child.id(), "TERM");
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let (mut child, addr) = serve(&dir, &args);
    assert_eq!(rule_names(&dir, &addr), ["tbf", "gio", "md"]);
    let o = ctl_with_token(&dir, &addr, &["--json", "rule", "list"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["rules"][0]["limits"], "rate=104857600B/s strict");
    assert_eq!(v["rules"][1]["threads"], 2);
    assert_eq!(v["rules"][2]["limits"], "rate=500ops/s per-rule");
    assert_eq!(shares(&addr), both, "the shares too");

    // A deletion, then kill -9: the deletion is kept too.
    assert!(ctl_with_token(&dir, &addr, &["rule", "del", "tbf"])
        .status
        .success());
    assert!(
        ctl_with_token(&dir, &addr, &["share", "clear", "account=physics"])
            .status
            .success()
    );
    common::signal(child.id(), "KILL");
    let _ = child.wait();
    let (mut child, addr) = serve(&dir, &args);
    assert_eq!(rule_names(&dir, &addr), ["gio", "md"]);
    assert_eq!(shares(&addr), [("user=root".to_string(), 2.0)]);
    // Bad input changes nothing: a weight of 0 (refused by ctl itself), an unknown user.
    for bad in [
        &["share", "set", "account=physics", "0"][..],
        &["share", "set", "user=no-such-user-iosets", "2"],
        &["share", "set", "physics", "2"],
    ] {
        let o = ctl_with_token(&dir, &addr, bad);
        // 1 for a refusal, 2 for a usage error caught by ctl itself.
        assert!(matches!(o.status.code(), Some(1 | 2)), "{bad:?}: {o:?}");
        assert!(!common::stderr(&o).is_empty());
    }
    assert_eq!(shares(&addr), [("user=root".to_string(), 2.0)]);
    stopped_cleanly(&mut child);

    // A corrupt state file: the server does not start, and names the file and the line.
    let corrupt = "[[rule]]\nname = \"x\"\nmatch = \"job=1\"\nthreads_pct = \"lots\"\n";
    std::fs::write(dir.join("state.toml"), corrupt).unwrap();
    let o = iosets(
        &dir,
        &["serve"].iter().chain(&args).copied().collect::<Vec<_>>(),
    );
    assert_eq!(o.status.code(), Some(1));
    let err = common::stderr(&o);
    assert!(
        err.contains("state file state.toml") && err.contains("line 4"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("state.toml")).unwrap(),
        corrupt
    );

    // A state file that cannot be written: the change is undone and refused.
    let no_dir = [
        "--root",
        "r",
        "--listen",
        "127.0.0.1:0",
        "--token-file",
        "tok",
        "--state-file",
        "missing/state.toml",
    ];
    let (mut child, addr) = serve(&dir, &no_dir);
    let o = ctl_with_token(
        &dir,
        &addr,
        &["rule", "add", "gio", "job=3", "--threads", "10%"],
    );
    assert_eq!(o.status.code(), Some(1));
    let err = common::stderr(&o);
    assert!(
        err.contains("missing/state.toml") && err.contains("the change is undone"),
        "{err}"
    );
    assert!(rule_names(&dir, &addr).is_empty());
    stopped_cleanly(&mut child);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `iosets ctl` takes a job's name wherever it takes its id, hashed as the mount hashes it.
#[test]
fn ctl_takes_a_job_by_name() {
    let dir = server_dir("serve-job-name");
    let (mut child, addr) = serve(
        &dir,
        &[
            "--root",
            "r",
            "--listen",
            "127.0.0.1:0",
            "--token-file",
            "tok",
        ],
    );
    let ctl = |args: &[&str]| ctl_with_token(&dir, &addr, args);
    let id = iosets_mount::ident::job_id_of("dd.1000").unwrap().0;
    assert!(ctl(&["set-priority", "dd.1000", "0.25"]).status.success());
    let o = ctl(&["--json", "jobs"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let job = v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["job"].as_u64() == Some(id))
        .unwrap_or_else(|| panic!("no job {id}: {v}"));
    assert_eq!(job["priority"], 0.25);
    assert_eq!(job["priority_source"], "control");
    let o = ctl(&["why", "dd.1000"]);
    assert!(o.status.success(), "{o:?}");
    assert!(stdout(&o).starts_with(&format!("job {id}:")), "{o:?}");
    assert!(ctl(&["clear-priority", "dd.1000"]).status.success());
    let o = ctl(&["set-priority", &"x".repeat(5000), "1"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    stopped_cleanly(&mut child);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ctl_acts_on_every_server_given_and_names_a_dead_one() {
    let dir = scratch("serve-ctl-many");
    std::fs::write(dir.join("tok"), "secret\n").unwrap();
    let mut servers = Vec::new();
    for i in 0..2 {
        let root = format!("r{i}");
        std::fs::create_dir_all(dir.join(&root)).unwrap();
        servers.push(serve(
            &dir,
            &[
                "--root",
                &root,
                "--listen",
                "127.0.0.1:0",
                "--token-file",
                "tok",
            ],
        ));
    }
    let (a, b) = (servers[0].1.clone(), servers[1].1.clone());
    // The options after the command, as `top` takes them.
    let o = iosets(
        &dir,
        &[
            "ctl",
            "set-priority",
            "42",
            "0.01",
            "--server",
            &a,
            "--server",
            &b,
            "--token-file",
            "tok",
        ],
    );
    assert!(o.status.success(), "{o:?}");
    assert_eq!(stdout(&o), format!("ok: {a}\nok: {b}\n"));
    // Each server's report, under its name; as JSON, one line per server.
    // ctl over both servers, the options first.
    let both = |args: &[&str]| {
        let mut all = vec!["ctl", "--server", &a, "--server", &b, "--token-file", "tok"];
        all.extend_from_slice(args);
        iosets(&dir, &all)
    };
    let o = both(&["jobs"]);
    let text = stdout(&o);
    assert!(
        text.contains(&format!("== {a}")) && text.contains(&format!("== {b}")),
        "{text}"
    );
    assert_eq!(text.matches("control").count(), 2, "{text}");
    let o = both(&["--json", "jobs"]);
    let lines: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[1]["server"], b.as_str());
    assert!(lines[1]["report"]["jobs"].is_array());
    // A dead server among them: the others are still asked, the dead one is named, exit 1; its
    // cause is said once.
    let o = iosets(
        &dir,
        &[
            "ctl",
            "--server",
            &a,
            "--server",
            "127.0.0.1:1",
            "--token-file",
            "tok",
            "clear-priority",
            "42",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(stdout(&o).contains(&format!("ok: {a}")));
    let err = common::stderr(&o);
    assert!(err.contains("error: 127.0.0.1:1: cannot connect"), "{err}");
    assert!(err.contains("1 of 2 servers failed"), "{err}");
    assert_eq!(
        err.to_lowercase().matches("connection refused").count(),
        1,
        "{err}"
    );
    // No server at all: an error, not a hang.
    let o = iosets(&dir, &["ctl", "--token-file", "tok", "jobs"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(common::stderr(&o).contains("ctl needs --server"));
    for (mut child, _) in servers {
        stopped_cleanly(&mut child);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Stops a server with SIGINT, as a terminal's Ctrl-C does; it must exit 0.
fn stopped_cleanly(child: &mut std::process::Child) {
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(0));
}
