//! 100,000 job ids through a server, then idle: the job book stays within `max_jobs` records,
//! `/metrics` stays bounded, and after the forget interval the book is empty again.

use crate::common;

use std::time::{Duration, Instant};

use common::{create, metrics, required, write, Conn};
use iosets_proto::{Control, Reply, Response, ServerReport};
use iosets_runtime::book::{DETECTOR_BYTES, JOB_RECORD_BYTES};

const TOKEN: &str = "forget-test";
const JOBS: u64 = 100_000;
const MAX_JOBS: usize = 4_096;

fn stats(c: &mut Conn) -> ServerReport {
    match c.control(TOKEN, Control::Stats) {
        Response::Ok(Reply::Json(t)) => serde_json::from_str(&t).unwrap(),
        r => panic!("{r:?}"),
    }
}

#[test]
fn a_hundred_thousand_jobs_leave_nothing_behind() {
    let (_root, server) = common::serve("forget", |config| {
        config.token = Some(TOKEN.into());
        config.auto_priority = true;
        config.forget_idle_s = 1.0;
        config.max_jobs = MAX_JOBS;
    });
    let mut c = Conn::connect(server.addr(), 1);
    c.ok(create("f"));
    // One 1-byte write per job, pipelined 200 at a time.
    let mut job = 1;
    while job <= JOBS {
        let tags: Vec<u64> = (0..200)
            .take_while(|i| job + i <= JOBS)
            .map(|i| {
                c.job = job + i;
                c.send(write("f", 0, vec![7]))
            })
            .collect();
        for _ in &tags {
            let (_, r) = c.recv().expect("answer");
            assert!(matches!(r, Response::Ok(Reply::Written(1))), "{r:?}");
        }
        job += tags.len() as u64;
    }
    c.job = 1;

    let busy = stats(&mut c);
    // One write per job id, and the create of their file (metadata is scheduled too).
    assert_eq!(busy.completed, JOBS + 1);
    assert!(
        busy.jobs_known as usize <= MAX_JOBS,
        "{} jobs remembered",
        busy.jobs_known
    );
    assert_eq!(
        busy.jobs_known + busy.jobs_evicted + busy.jobs_forgotten,
        JOBS
    );
    let bound = MAX_JOBS * (JOB_RECORD_BYTES + DETECTOR_BYTES);
    assert!(
        (busy.job_book_bytes as usize) <= bound,
        "{} bytes > {bound}",
        busy.job_book_bytes
    );
    let text = metrics(server.admin_addr().unwrap());
    let job_lines = text.lines().filter(|l| l.contains("{job_id=\"")).count();
    let listed = required::<u64>(&text, "iosets_jobs_in_metrics");
    assert_eq!(listed, 100, "metrics_max_jobs' default");
    assert_eq!(required::<u64>(&text, "iosets_jobs_known"), busy.jobs_known);
    // Nineteen series per listed job at most (ops, 2 bytes, failed, queued, in service, 5 wait
    // causes, 2 bandwidths, 2 quantiles + sum + count of the wait summary, priority, set,
    // period), and the others' sums under job_id="other".
    assert!(
        job_lines as u64 <= 19 * (listed + 1),
        "{job_lines} per-job lines"
    );
    assert!(text.len() < 1 << 20, "{} bytes of metrics", text.len());

    // Idle: after the forget interval the book is empty, whatever the number of jobs seen.
    let deadline = Instant::now() + Duration::from_secs(60);
    let idle = loop {
        let s = stats(&mut c);
        if s.jobs_known == 0 || Instant::now() > deadline {
            break s;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(idle.jobs_known, 0, "jobs still remembered: {idle:?}");
    assert!(
        idle.job_book_bytes <= 64 * 1024,
        "{} bytes left",
        idle.job_book_bytes
    );
    assert_eq!(idle.jobs_forgotten + idle.jobs_evicted, JOBS);
    assert!(idle.balanced);
    let text = metrics(server.admin_addr().unwrap());
    assert_eq!(required::<u64>(&text, "iosets_jobs_in_metrics"), 0);
    assert_eq!(required::<u64>(&text, "iosets_jobs_known"), 0);
    server.shutdown().unwrap();
}
