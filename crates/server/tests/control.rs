//! Control needs the token; bad policy names and values are errors; a policy switch under load
//! loses nothing; job statistics report what was done.

use crate::common;

use std::thread;

use common::{create, json, write, Conn, TempDir};
use iosets_proto::{Control, JobsReport, Reply, Response, ServerReport};
use iosets_server::{Server, ServerConfig};
use iosets_types::JobId;

const EACCES: i32 = 13;
const EINVAL: i32 = 22;

#[test]
fn control_without_a_token_is_refused() {
    let root = TempDir::new("notoken");
    let server = Server::start(ServerConfig::new(&root.0).with_insecure_loopback()).unwrap();
    let mut c = Conn::connect(server.addr(), 1);
    for op in [
        Control::Jobs,
        Control::Stats,
        Control::ClearPriority { job: JobId(1) },
    ] {
        match c.control("", op) {
            Response::Err { errno, message } => {
                assert_eq!(errno, EACCES);
                assert!(message.contains("without a token"), "{message}");
            }
            r => panic!("{r:?}"),
        }
    }
}

#[test]
fn wrong_token_bad_policy_and_bad_values_are_errors() {
    let (root, server) = common::serve("badctl", |config| {
        config.token = Some("s3cret".into());
    });
    let mut c = Conn::connect(server.addr(), 1);
    for token in ["", "s3cre", "s3cret!", "S3CRET"] {
        let r = c.control(token, Control::Stats);
        assert!(
            matches!(r, Response::Err { errno: EACCES, .. }),
            "{token}: {r:?}"
        );
    }
    let r = c.control(
        "s3cret",
        Control::Policy {
            name: "nosuch".into(),
            options: vec![],
        },
    );
    match r {
        Response::Err { errno, message } => {
            assert_eq!(errno, EINVAL);
            assert!(message.contains("valid policies"), "{message}");
        }
        r => panic!("{r:?}"),
    }
    for (k, v) in [
        ("default_weight", "0"),
        ("nosuch", "1"),
        ("default_weight", "x"),
    ] {
        let r = c.control(
            "s3cret",
            Control::Policy {
                name: "wfq".into(),
                options: vec![(k.into(), v.into())],
            },
        );
        assert!(
            matches!(r, Response::Err { errno: EINVAL, .. }),
            "{k}={v}: {r:?}"
        );
    }
    let stats: ServerReport = json(c.control("s3cret", Control::Stats));
    assert_eq!(stats.policy, "iosets", "a refused switch changes nothing");
    assert_eq!(stats.switches, 0);
    // Unknown policy at start is an error too.
    let mut bad = ServerConfig::new(&root.0).with_insecure_loopback();
    bad.policy = "fastest".into();
    assert!(Server::start(bad)
        .unwrap_err()
        .to_string()
        .contains("fastest"));
    let mut bad = ServerConfig::new(&root.0).with_insecure_loopback();
    bad.throttle_mib_s = Some(-1.0);
    assert!(Server::start(bad).is_err());
}

#[test]
fn policy_switch_under_load_loses_nothing_and_jobstats_add_up() {
    let (root, server) = common::serve("switch", |config| {
        config.token = Some("t".into());
        config.throttle_mib_s = Some(10.0);
        config.workers = 2;
    });
    let addr = server.addr();
    let mut ctl = Conn::connect(addr, 0);
    ctl.ok(create("shared"));
    ctl.set_priority("t", 3, 0.1);

    const PER_JOB: u64 = 300;
    let writers: Vec<_> = (1..=3u64)
        .map(|job| {
            thread::spawn(move || {
                let mut c = Conn::connect(addr, job);
                let reqs = (0..PER_JOB)
                    .map(|i| write("shared", (job * PER_JOB + i) * 4096, vec![job as u8; 4096]))
                    .collect();
                let answers = c.pipeline(reqs);
                answers
                    .values()
                    .filter(|r| matches!(r, Response::Ok(Reply::Written(4096))))
                    .count() as u64
            })
        })
        .collect();
    // Switch back and forth while the writes are queued.
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while json::<ServerReport>(ctl.control("t", Control::Stats)).queued < 100 {
        assert!(
            std::time::Instant::now() < give_up,
            "the writes never queued up"
        );
        thread::sleep(std::time::Duration::from_millis(1));
    }
    for name in ["wfq", "timeorder", "iosets", "noop", "iosets"] {
        let r = ctl.control(
            "t",
            Control::Policy {
                name: name.into(),
                options: vec![],
            },
        );
        assert_eq!(r, Response::Ok(Reply::Done), "{name}");
        thread::sleep(std::time::Duration::from_millis(5));
    }
    let acked: u64 = writers.into_iter().map(|w| w.join().unwrap()).sum();
    assert_eq!(acked, 3 * PER_JOB, "every write answered successfully");

    let stats: ServerReport = json(ctl.control("t", Control::Stats));
    assert_eq!(stats.switches, 5);
    assert!(
        stats.withdrawn > 0,
        "the switches moved queued requests: {stats:?}"
    );
    assert!(stats.balanced);
    // The writes, and the create of their file (metadata is scheduled too).
    assert_eq!(stats.completed, 3 * PER_JOB + 1);
    assert_eq!(stats.inserted - stats.withdrawn, 3 * PER_JOB + 1);
    assert_eq!(stats.bytes_written, 3 * PER_JOB * 4096);
    let jobs: JobsReport = json(ctl.control("t", Control::Jobs));
    assert_eq!(jobs.policy, "iosets");
    for job in 1..=3u64 {
        let j = jobs.jobs.iter().find(|j| j.job == job).unwrap();
        assert_eq!(j.ops, PER_JOB);
        assert_eq!(j.bytes_written, PER_JOB * 4096);
        assert_eq!(j.queued + j.in_service, 0);
        assert_eq!(j.queue_wait.count, PER_JOB);
        // Through five policy switches, the waits split by cause add up exactly.
        assert_eq!(j.wait_causes.requests, PER_JOB);
        assert_eq!(j.wait_causes.causes_ns(), j.wait_causes.wait_ns, "{j:?}");
        assert!(j.wait_causes.wait_ns > 0, "the writes queued up");
    }
    let j3 = jobs.jobs.iter().find(|j| j.job == 3).unwrap();
    assert_eq!(
        (j3.priority, j3.set, j3.source_name()),
        (Some(0.1), Some(1), "control")
    );
    // The data is all there.
    let data = std::fs::read(root.0.join("shared")).unwrap();
    for job in 1..=3u64 {
        let start = (job * PER_JOB * 4096) as usize;
        assert!(data[start..start + (PER_JOB * 4096) as usize]
            .iter()
            .all(|b| *b == job as u8));
    }
    let r = ctl.control("t", Control::ClearPriority { job: JobId(3) });
    assert_eq!(r, Response::Ok(Reply::Done));
    let jobs: JobsReport = json(ctl.control("t", Control::Jobs));
    assert_eq!(
        jobs.jobs.iter().find(|j| j.job == 3).unwrap().priority,
        None
    );
    assert!(server.shutdown().unwrap().balanced);
}

#[test]
fn automatic_priorities_follow_the_detected_period_and_control_wins() {
    let (_root, server) = common::serve("auto", |config| {
        config.token = Some("t".into());
        config.auto_priority = true;
    });
    let addr = server.addr();
    let mut ctl = Conn::connect(addr, 0);
    ctl.ok(create("a"));
    ctl.ok(create("b"));
    ctl.set_priority("t", 2, 0.01);
    // Jobs 1 and 2: a burst of 4 writes every 250 ms (period 0.25 s → Set-10 set -1,
    // priority 10), for 4 s.
    let bursts: Vec<_> = [(1u64, "a"), (2, "b")]
        .into_iter()
        .map(|(job, path)| {
            thread::spawn(move || {
                let mut c = Conn::connect(addr, job);
                let start = std::time::Instant::now();
                for k in 0..16u32 {
                    let due = start + std::time::Duration::from_millis(250 * u64::from(k));
                    if let Some(wait) = due.checked_duration_since(std::time::Instant::now()) {
                        thread::sleep(wait);
                    }
                    let reqs = (0..4u64)
                        .map(|i| write(path, i * 65536, vec![1; 65536]))
                        .collect();
                    for r in c.pipeline(reqs).values() {
                        assert!(matches!(r, Response::Ok(Reply::Written(65536))));
                    }
                }
            })
        })
        .collect();
    for b in bursts {
        b.join().unwrap();
    }
    let jobs: JobsReport = json(ctl.control("t", Control::Jobs));
    let j1 = jobs.jobs.iter().find(|j| j.job == 1).unwrap();
    assert_eq!(j1.source_name(), "auto", "{j1:?}");
    assert_eq!((j1.set, j1.priority), (Some(-1), Some(10.0)), "{j1:?}");
    let j2 = jobs.jobs.iter().find(|j| j.job == 2).unwrap();
    assert_eq!(
        (j2.source_name(), j2.priority),
        ("control", Some(0.01)),
        "a control-plane priority is never overwritten"
    );
    server.shutdown().unwrap();
}
