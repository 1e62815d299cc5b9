//! `iosets ctl why JOB` against two real servers on loopback: two jobs of one IO-SETS set write
//! through one service thread on each; the job's waits, summed over both servers, split into
//! causes that add up exactly, and the second job of the set waited for exclusivity.

use crate::common;

use std::net::TcpStream;
use std::process::{Child, Command};
use std::thread;
use std::time::Duration;

use common::{create_file, iosets, recv, scratch, spawn_writes, stdout};
use iosets_proto::{Reply, Response};

/// A server started by the test, interrupted when dropped (even if the test fails).
struct Served {
    child: Child,
    addr: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

fn serve(dir: &std::path::Path, root: &str) -> Served {
    std::fs::create_dir_all(dir.join(root)).unwrap();
    let (child, addr) = common::serve(
        dir,
        &[
            "--root",
            root,
            "--listen",
            "127.0.0.1:0",
            "--policy",
            "iosets",
            "--workers",
            "1",
            "--throttle-mib-s",
            "32",
            // Raw frames, without the secret's handshake (`iosets ctl` finds the secret).
            "--insecure-loopback",
            "--token-file",
            "tok",
        ],
    );
    Served { child, addr }
}

const WRITES: u64 = 40;
const CHUNK: usize = 64 * 1024;

/// Job `job` creates its file and pipelines `WRITES` writes to it; returns the writes done.
fn write_job(addr: &str, job: u64) -> u64 {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    create_file(&mut s, 0, job);
    let w = s.try_clone().unwrap();
    let sender = spawn_writes(w, job, WRITES, CHUNK, move |_| vec![job as u8; CHUNK]);
    let mut done = 0;
    while done < WRITES {
        match recv(&mut s) {
            Some((_, Response::Ok(Reply::Written(n)))) if n as usize == CHUNK => done += 1,
            other => panic!("job {job}: unexpected answer {other:?}"),
        }
    }
    assert_eq!(
        sender.join().unwrap(),
        WRITES,
        "job {job}: every write sent"
    );
    done
}

#[test]
fn ctl_why_splits_a_jobs_waits_over_two_servers() {
    let dir = scratch("ctl-why");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("tok"), "secret\n").unwrap();
    let servers = [serve(&dir, "a"), serve(&dir, "b")];
    let ctl = |server_args: &[&str], args: &[&str]| {
        let mut all = vec!["ctl", "--token-file", "tok"];
        for s in server_args {
            all.extend_from_slice(&["--server", s]);
        }
        all.extend_from_slice(args);
        iosets(&dir, &all)
    };
    let both = [servers[0].addr.as_str(), servers[1].addr.as_str()];
    // Jobs 1 and 2 in one IO-SETS set (priority 0.1) on both servers.
    for s in &servers {
        for job in ["1", "2"] {
            let o = ctl(&[s.addr.as_str()], &["set-priority", job, "0.1"]);
            assert!(o.status.success(), "{o:?}");
        }
    }
    let writers: Vec<_> = servers
        .iter()
        .flat_map(|s| [(s.addr.clone(), 1u64), (s.addr.clone(), 2u64)])
        .map(|(addr, job)| thread::spawn(move || write_job(&addr, job)))
        .collect();
    for w in writers {
        assert_eq!(w.join().unwrap(), WRITES);
    }

    let mut exclusivity = 0;
    for job in ["1", "2"] {
        let o = ctl(&both, &["--json", "why", job]);
        assert!(o.status.success(), "{o:?}");
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        let ns = |c: &serde_json::Value, name: &str| c[name]["ns"].as_u64().unwrap();
        let causes = ["rule", "device", "exclusivity", "share", "policy"];
        let servers_part = v["servers"].as_array().unwrap();
        assert_eq!(servers_part.len(), 2, "the job is on both servers: {v}");
        let mut wait = 0;
        for part in servers_part {
            let c = &part["wait_causes"];
            let sum: u64 = causes.iter().map(|n| ns(c, n)).sum();
            assert_eq!(
                sum,
                c["wait_ns"].as_u64().unwrap(),
                "exact on each server: {c}"
            );
            // The create and the writes.
            assert_eq!(c["requests"], WRITES + 1);
            wait += sum;
        }
        let total = &v["total"];
        assert_eq!(
            total["wait_ns"].as_u64().unwrap(),
            wait,
            "summed over servers"
        );
        assert_eq!(total["requests"], 2 * (WRITES + 1));
        assert_eq!(ns(total, "rule"), 0, "no quota rules");
        assert_eq!(ns(total, "share"), 0, "one set only: {total}");
        exclusivity += ns(total, "exclusivity");
    }
    assert!(
        exclusivity > 0,
        "with one thread and one set, a job waited for the other"
    );

    let o = ctl(&both, &["why", "2"]);
    let text = stdout(&o);
    assert!(
        text.starts_with("job 2 over 2 servers: 82 requests waited"),
        "{text}"
    );
    for name in [
        "rule",
        "device",
        "exclusivity",
        "share",
        "policy",
        "verdict: ",
    ] {
        assert!(text.contains(name), "{name} in {text}");
    }
    // Every command takes several servers (issue 28): a report from each.
    let o = ctl(&both, &["jobs"]);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(stdout(&o).matches("== ").count(), 2, "{}", stdout(&o));
    let o = ctl(&both[..1], &["why", "999"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(common::stderr(&o).contains("job 999 is not known"));
    let o = ctl(&both[..1], &["jobs"]);
    assert!(stdout(&o).contains("waited on"), "{}", stdout(&o));
    drop(servers);
    let _ = std::fs::remove_dir_all(&dir);
}
