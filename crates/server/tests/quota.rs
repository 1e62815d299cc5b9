//! Quota rules on a real server: thread quotas hold their cap with real workers and the slow
//! metadata back end, rules are added, listed and deleted over the control protocol, rules match
//! on uid and client address, and bad rules are refused naming the rule, changing nothing.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{create, json, metrics, Conn, TempDir};
use iosets_proto::{Control, Creds, JobsReport, Reply, Response, RulesReport, ServerReport};
use iosets_server::{Server, ServerConfig};

const TOKEN: &str = "quota-test";
const EINVAL: i32 = 22;

fn rules(c: &mut Conn) -> RulesReport {
    json(c.control(TOKEN, Control::Rules))
}

fn add(c: &mut Conn, rule: &str, rank: Option<u32>) -> Response {
    c.control(
        TOKEN,
        Control::RuleAdd {
            rule: rule.into(),
            rank,
        },
    )
}

fn config(root: &Path) -> ServerConfig {
    let mut c = ServerConfig::new(root).with_insecure_loopback();
    c.token = Some(TOKEN.into());
    c.policy = "timeorder".into();
    c
}

/// Dispatch times of each job's rows in the server's trace.
fn dispatches(trace: &Path) -> Vec<(u64, u64)> {
    std::fs::read_to_string(trace)
        .unwrap()
        .lines()
        .skip(2)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[0].parse().unwrap(), f[7].parse().unwrap())
        })
        .collect()
}

/// Job 1 sends 8 creates that each hold a worker 40 ms, then job 2 sends 2: how many of job 1's
/// were dispatched before job 2's last one, and the rules' report at the end.
fn heavy_then_light(quota: Option<&str>) -> (usize, RulesReport, JobsReport) {
    let dir = TempDir::new("quota-threads");
    let root = dir.0.join("data");
    std::fs::create_dir_all(&root).unwrap();
    let trace = dir.0.join("trace.csv");
    let mut cfg = config(&root);
    cfg.workers = 4;
    cfg.meta_latency_ms = 40.0;
    cfg.trace = Some(trace.clone());
    if let Some(q) = quota {
        cfg.set_quota_toml(q).unwrap();
    }
    let server = Server::start(cfg).unwrap();
    let mut ctl = Conn::connect(server.addr(), 0);
    let mut heavy = Conn::connect(server.addr(), 1);
    let tags: Vec<u64> = (0..8)
        .map(|i| heavy.send(create(&format!("h{i}"))))
        .collect();
    // Every heavy request is in the server before the light job sends anything.
    let give_up = Instant::now() + Duration::from_secs(30);
    loop {
        let s: ServerReport = json(ctl.control(TOKEN, Control::Stats));
        if s.submitted >= 8 {
            break;
        }
        assert!(Instant::now() < give_up, "the heavy requests never arrived");
        std::thread::sleep(Duration::from_millis(2));
    }
    let mut light = Conn::connect(server.addr(), 2);
    for r in light
        .pipeline(vec![create("l0"), create("l1")])
        .into_values()
    {
        assert!(matches!(r, Response::Ok(_)), "{r:?}");
    }
    for _ in &tags {
        let (_, r) = heavy.recv().unwrap();
        assert!(matches!(r, Response::Ok(_)), "{r:?}");
    }
    let report = rules(&mut ctl);
    let jobs: JobsReport = json(ctl.control(TOKEN, Control::Jobs));
    if quota.is_some() {
        let text = metrics(server.admin_addr().unwrap());
        for line in [
            "iosets_rule_threads{rule=\"heavy\"} 2",
            "iosets_rule_peak_in_service_requests{rule=\"heavy\"} 2",
            "iosets_rule_admitted_total{rule=\"heavy\"} 8",
            "iosets_rule_held_requests{rule=\"heavy\"} 0",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "{line} missing from\n{text}"
            );
        }
    }
    drop(server);
    let rows = dispatches(&trace);
    let last_light = rows.iter().filter(|r| r.0 == 2).map(|r| r.1).max().unwrap();
    let before = rows.iter().filter(|r| r.0 == 1 && r.1 < last_light).count();
    (before, report, jobs)
}

#[test]
fn a_thread_quota_keeps_threads_free_for_other_jobs() {
    // Without a quota the heavy job takes all 4 workers and the light job waits behind it.
    let (before, report, _) = heavy_then_light(None);
    assert!(report.rules.is_empty());
    assert!(
        before >= 4,
        "{before} heavy requests dispatched before the light job's"
    );
    // With 50 % of 4 workers the heavy job holds 2 (its ceiling inside the rule: 90 % of 2 = 1
    // unless the rule says 100 %), and the light job's creates go at once.
    let q =
        "job_share_pct = 100\n[[rule]]\nname = \"heavy\"\nmatch = \"job=1\"\nthreads_pct = 50\n";
    let (before, report, jobs) = heavy_then_light(Some(q));
    assert!(
        before <= 2,
        "{before} heavy requests dispatched before the light job's"
    );
    let r = &report.rules[0];
    assert_eq!(
        (r.name.as_str(), r.threads, r.job_ceiling),
        ("heavy", Some(2), Some(2))
    );
    assert_eq!(r.peak_in_service, 2, "the rule held exactly its 2 workers");
    assert_eq!(
        (r.matched_total, r.admitted_total, r.completed_total),
        (8, 8, 8)
    );
    assert_eq!((r.held, r.admitted, r.in_service), (0, 0, 0));
    assert_eq!(report.threads, 4);
    // Both jobs are in the job statistics, the light one under no rule.
    let light = jobs.jobs.iter().find(|j| j.job == 2).unwrap();
    assert_eq!(light.ops, 2);
    assert!(light.rules.is_empty());
}

#[test]
fn rules_are_added_listed_and_deleted_at_run_time() {
    let dir = TempDir::new("quota-ctl");
    let server = Server::start(config(&dir.0)).unwrap();
    let mut c = Conn::connect(server.addr(), 7);
    assert!(rules(&mut c).rules.is_empty());
    let ok = |r: Response| assert!(matches!(r, Response::Ok(Reply::Done)), "{r:?}");
    ok(add(
        &mut c,
        r#"{"name":"meta","match":"class=meta","threads_pct":25}"#,
        None,
    ));
    ok(add(
        &mut c,
        r#"{"name":"tbf","match":"job={7 8}","rate_ops":1000,"strict":true}"#,
        Some(0),
    ));
    let r = rules(&mut c);
    let names: Vec<&str> = r.rules.iter().map(|x| x.name.as_str()).collect();
    assert_eq!(names, ["tbf", "meta"]);
    assert_eq!(r.rules[0].matcher, "job={7 8}");
    assert_eq!(r.rules[0].limits, "rate=1000ops/s strict");
    assert_eq!(r.rules[1].threads, Some(1));
    // Job 7's create falls under `tbf` (first match), not `meta`.
    c.ok(create("a"));
    let r = rules(&mut c);
    assert_eq!((r.rules[0].matched_total, r.rules[1].matched_total), (1, 0));
    ok(c.control(TOKEN, Control::RuleDel { name: "tbf".into() }));
    c.ok(create("b"));
    let r = rules(&mut c);
    assert_eq!(r.rules.len(), 1);
    assert_eq!(r.rules[0].matched_total, 1);
}

fn refused(r: Response, rule: &str, needle: &str) {
    match r {
        Response::Err { errno, message } => {
            assert_eq!(errno, EINVAL, "{message}");
            assert!(
                message.contains(&format!("`{rule}`")) && message.contains(needle),
                "{message}"
            );
        }
        r => panic!("{r:?}"),
    }
}

#[test]
fn bad_rules_are_refused_naming_the_rule_and_change_nothing() {
    let dir = TempDir::new("quota-bad");
    let mut cfg = config(&dir.0);
    cfg.set_quota_toml("[[rule]]\nname = \"a\"\nmatch = \"job=1\"\nthreads_pct = 71\n")
        .unwrap();
    let server = Server::start(cfg).unwrap();
    let mut c = Conn::connect(server.addr(), 1);
    let before = rules(&mut c);
    for (rule, name, needle) in [
        (
            r#"{"name":"b","match":"job=2","threads_pct":30}"#,
            "b",
            "over 100",
        ),
        (
            r#"{"name":"c","match":"color=red","threads_pct":1}"#,
            "c",
            "unknown match key",
        ),
        (
            r#"{"name":"d","match":"client=10.0.0.1/8","rate_ops":5}"#,
            "d",
            "host bits",
        ),
        (
            r#"{"name":"e","match":"client=300.1.1.1","rate_ops":5}"#,
            "e",
            "not an address",
        ),
        (
            r#"{"name":"a","match":"job=9","rate_ops":5}"#,
            "a",
            "exists",
        ),
        (
            r#"{"name":"f","match":"job=1","rate_ops":5}"#,
            "f",
            "never applies",
        ),
        (r#"{"name":"g","match":"job=3"}"#, "g", "no limit"),
        (
            r#"{"name":"h","match":"job=3","rate_ops":5,"reserve_ops":9}"#,
            "h",
            "above",
        ),
        (
            r#"{"name":"i","match":"job=3","threads_pct":150}"#,
            "i",
            "(0, 100]",
        ),
    ] {
        refused(add(&mut c, rule, None), name, needle);
    }
    // Not a rule at all.
    for rule in [
        r#"{"name":"x","match":"*","colour":1}"#,
        "not json",
        r#"{"name":"y"}"#,
    ] {
        match add(&mut c, rule, None) {
            Response::Err { errno, message } => assert_eq!(errno, EINVAL, "{message}"),
            r => panic!("{rule}: {r:?}"),
        }
    }
    match c.control(TOKEN, Control::RuleDel { name: "zz".into() }) {
        Response::Err { errno, message } => {
            assert_eq!(errno, EINVAL);
            assert!(message.contains("`zz`"), "{message}");
        }
        r => panic!("{r:?}"),
    }
    assert_eq!(rules(&mut c), before, "a refused change changed nothing");
    // Without the token: refused like every control request.
    assert!(matches!(
        c.control("wrong", Control::Rules),
        Response::Err { errno: 13, .. }
    ));
}

#[test]
fn bad_quota_files_are_config_errors_naming_the_rule() {
    let root = TempDir::new("quota-cfg");
    for (text, needle) in [
        (
            "[[rule]]\nname = \"a\"\nmatch = \"job=1\"\nthreads = 5\n",
            "unknown field `threads`",
        ),
        (
            "[[rule]]\nname = \"a\"\nthreads_pct = 5\n",
            "`a`: has no `match`",
        ),
        (
            "[[rule]]\nname = \"a\"\nmatch = \"uid=x\"\nthreads_pct = 5\n",
            "`a`",
        ),
        ("job_share_pct = 0\n", "job_share_pct"),
        ("[[rule]]\nmatch = \"*\"\nthreads_pct = 5\n", "a rule name"),
    ] {
        let mut cfg = config(&root.0);
        let e = cfg.set_quota_toml(text).unwrap_err().to_string();
        assert!(e.contains(needle), "{text}: {e}");
        assert!(cfg.quota.is_none());
    }
    // The same table inside a server configuration.
    let e = ServerConfig::from_toml_str(
        "root = \"/tmp\"\n[quota]\nlend = true\n[[quota.rule]]\nname = \"m\"\nmatch = \"class=bulk\"\nthreads_pct = 5\n",
        Path::new("/"),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("`m`") && e.contains("classes"), "{e}");
    let c = ServerConfig::from_toml_str(
        "root = \"/tmp\"\n[quota]\nlend = true\n[[quota.rule]]\nname = \"m\"\nmatch = \"class=meta\"\nthreads_pct = 5\n",
        Path::new("/"),
    )
    .unwrap();
    let q = c.quota.unwrap();
    assert!(q.lend);
    assert_eq!(q.rules[0].name, "m");
}

#[test]
fn rules_match_on_the_callers_uid_and_address() {
    let dir = TempDir::new("quota-origin");
    // Alice and Bob create files in the root: the server does their requests as them (issue 33).
    std::fs::set_permissions(&dir.0, std::os::unix::fs::PermissionsExt::from_mode(0o1777)).unwrap();
    let mut cfg = config(&dir.0);
    cfg.set_quota_toml(concat!(
        "[[rule]]\nname = \"remote\"\nmatch = \"client=10.0.0.0/8\"\nthreads_pct = 10\n",
        "[[rule]]\nname = \"alice\"\nmatch = \"uid=4242 class=meta\"\nthreads_pct = 10\n",
        "[[rule]]\nname = \"local\"\nmatch = \"client=127.0.0.0/8\"\nthreads_pct = 10\n",
    ))
    .unwrap();
    let server = Server::start(cfg).unwrap();
    let mut alice = Conn::connect(server.addr(), 1);
    alice.creds = Some(Creds::new(4242, 100));
    alice.ok(create("a"));
    let mut bob = Conn::connect(server.addr(), 2);
    bob.creds = Some(Creds::new(1000, 100));
    bob.ok(create("b"));
    let r = rules(&mut bob);
    let matched: Vec<(&str, u64)> = r
        .rules
        .iter()
        .map(|x| (x.name.as_str(), x.matched_total))
        .collect();
    // Alice's create is hers; Bob's falls through to the loopback rule; nothing is remote.
    assert_eq!(matched, [("remote", 0), ("alice", 1), ("local", 1)]);
}

#[test]
fn rules_changed_under_load_lose_no_acknowledged_request() {
    let dir = TempDir::new("quota-load");
    let mut cfg = config(&dir.0);
    cfg.workers = 4;
    cfg.policy = "iosets".into();
    cfg.set_quota_toml(
        "[[rule]]\nname = \"perm\"\nmatch = \"job={1 2 3 4} class=meta\"\nthreads_pct = 20\n",
    )
    .unwrap();
    let server = Server::start(cfg).unwrap();
    let addr = server.addr();
    let clients: Vec<_> = (1..=4u64)
        .map(|job| {
            std::thread::spawn(move || {
                let mut c = Conn::connect(addr, job);
                c.ok(create(&format!("f{job}")));
                for round in 0..50u64 {
                    // 8 pipelined writes, then a stat-like lookup: data and metadata.
                    let reqs = (0..8u64)
                        .map(|i| {
                            let at = (round * 8 + i) * 8;
                            common::write(&format!("f{job}"), at, at.to_le_bytes().to_vec())
                        })
                        .collect();
                    for r in c.pipeline(reqs).into_values() {
                        assert!(matches!(r, Response::Ok(Reply::Written(8))), "{r:?}");
                    }
                    c.ok(iosets_proto::Request::Lookup {
                        path: format!("f{job}"),
                    });
                }
            })
        })
        .collect();
    let mut ctl = Conn::connect(addr, 0);
    // Rules come and go for as long as the clients run (and at least 60 times).
    let mut i = 0u32;
    while i < 60 || clients.iter().any(|c| !c.is_finished()) {
        let rule = format!(
            r#"{{"name":"r{}","match":"job={}","threads_pct":20,"rate_ops":2000}}"#,
            i % 3,
            i % 5
        );
        let _ = add(&mut ctl, &rule, Some(0));
        if i % 2 == 1 {
            let _ = ctl.control(
                TOKEN,
                Control::RuleDel {
                    name: format!("r{}", (i + 1) % 3),
                },
            );
        }
        i += 1;
    }
    let matched: u64 = rules(&mut ctl).rules.iter().map(|r| r.matched_total).sum();
    assert!(
        i >= 60 && matched > 0,
        "{i} changes, {matched} requests under rules"
    );
    for c in clients {
        c.join().unwrap();
    }
    // Every write is in its file, where it was written.
    for job in 1..=4u64 {
        let bytes = std::fs::read(dir.0.join(format!("f{job}"))).unwrap();
        assert_eq!(bytes.len(), 50 * 8 * 8);
        for (k, word) in bytes.chunks(8).enumerate() {
            assert_eq!(u64::from_le_bytes(word.try_into().unwrap()), k as u64 * 8);
        }
    }
    let s: ServerReport = json(ctl.control(TOKEN, Control::Stats));
    assert!(s.balanced);
    assert_eq!((s.queued, s.in_service), (0, 0));
    let report = rules(&mut ctl);
    for r in &report.rules {
        assert_eq!((r.held, r.admitted), (0, 0), "{r:?}");
    }
    // The permanent rule governed metadata all along, rules coming and going before it.
    let perm = report.rules.iter().find(|r| r.name == "perm").unwrap();
    assert!(perm.matched_total > 0);
    assert_eq!(perm.admitted_total, perm.completed_total);
}
