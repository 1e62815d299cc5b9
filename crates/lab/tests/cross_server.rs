//! Exclusivity inside an IO-SETS set across servers (issue 14): two servers that never talk to
//! each other, three jobs of one set writing striped files through the client library, which
//! stamps each request with its job's phase start. With `order=phase` no two jobs of the set are
//! ever in service at once on any server, checked from the servers' own traces.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use iosets_client::{Client, ClientConfig, JobId, Priority};
use iosets_lab::seed004::overlap::{services_from_trace, set_overlap};
use iosets_server::{Server, ServerConfig};

const KIB: usize = 1024;
/// Bytes each job writes (its one I/O phase), in 256 KiB requests striped over both servers.
const PHASE: usize = 4 * 1024 * KIB;
const REQUEST: usize = 256 * KIB;
/// Requests each job keeps in flight (seed 004's jobs are 8 processes with one each).
const WINDOW: usize = 8;

fn start(
    root: &std::path::Path,
    trace: std::path::PathBuf,
    order: &str,
) -> iosets_server::ServerHandle {
    let mut cfg = ServerConfig::new(root).with_insecure_loopback();
    cfg.policy = "iosets".into();
    cfg.policy_options = vec![
        ("order".into(), order.into()),
        // Covers the spread of a job's last requests over the two servers.
        ("hold_idle_ms".into(), "300".into()),
    ];
    cfg.workers = 2;
    cfg.throttle_mib_s = Some(32.0);
    cfg.trace = Some(trace);
    Server::start(cfg).unwrap()
}

/// Job `job` writes its phase: the part on server 1 at once, the part on server 0 after
/// `delay` (a slow network path), each with `WINDOW / 2` requests in flight; returns the bytes
/// written.
async fn phase(client: Client, job: u64, delay: Duration) -> u64 {
    let path = Arc::new(format!("job{job}.dat"));
    let layout = client.layout();
    let halves = [1, 0].map(|server| {
        let offsets: Vec<u64> = (0..PHASE / REQUEST)
            .map(|k| (k * REQUEST) as u64)
            .filter(|&off| layout.server_of(&path, off / layout.chunk_size()) == server)
            .collect();
        let (client, path) = (client.clone(), path.clone());
        let wait = if server == 0 { delay } else { Duration::ZERO };
        tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            let block = Bytes::from(vec![job as u8; REQUEST]);
            let mut tasks = tokio::task::JoinSet::new();
            let mut todo = offsets.into_iter();
            let mut written = 0;
            loop {
                while tasks.len() < WINDOW / 2 {
                    let Some(off) = todo.next() else { break };
                    let (c, p, b) = (client.clone(), path.clone(), block.clone());
                    tasks.spawn(async move { c.write_at(&p, off, b).await.unwrap() });
                }
                match tasks.join_next().await {
                    Some(n) => written += n.unwrap(),
                    None => return written,
                }
            }
        })
    });
    let mut written = 0;
    for h in halves {
        written += h.await.unwrap();
    }
    written
}

/// Runs three jobs of one set (priority hint 0.1) and one of another (0.01) through two servers;
/// returns each set's (busy, overlap) in ns and the bytes in the traces.
///
/// Job 1 starts first and holds the set on both servers. Job 2 starts 20 ms later, but its part
/// on server 0 is held up until 60 ms; job 3 starts at 40 ms on both. So server 0 sees job 3 before
/// job 2 and server 1 job 2 before job 3: by arrival, when job 1 is done, server 0 picks job 3 and
/// server 1 job 2, and both run at once.
fn run(order: &str) -> (Vec<(i64, u64, u64)>, u64) {
    let root = TempDir::new("cross");
    let traces: Vec<_> = (0..2)
        .map(|i| root.0.join(format!("trace{i}.csv")))
        .collect();
    let data = root.0.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let servers: Vec<_> = traces
        .iter()
        .map(|t| start(&data, t.clone(), order))
        .collect();
    let addrs: Vec<_> = servers.iter().map(|s| s.addr()).collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let written: u64 = rt.block_on(async {
        let mut tasks = Vec::new();
        let mut clients = Vec::new();
        // The files are created by a set-up job in a set of its own: metadata is scheduled
        // too, and a create of a set's job would make the job hold its set (lingering) before
        // the phases the test is about begin.
        let mut setup = ClientConfig::new(JobId(100));
        setup.priority = Priority::new(1.0);
        setup.local = false;
        let setup = Client::connect(&addrs, setup).await.unwrap();
        for job in [1, 2, 3, 9] {
            setup
                .create(&format!("job{job}.dat"), 0o644, false)
                .await
                .unwrap();
        }
        drop(setup);
        for (job, p) in [(1, 0.1), (2, 0.1), (3, 0.1), (9, 0.01)] {
            let mut cfg = ClientConfig::new(JobId(job));
            cfg.priority = Priority::new(p);
            cfg.local = false;
            let client = Client::connect(&addrs, cfg).await.unwrap();
            clients.push((client, job));
        }
        let ms = Duration::from_millis;
        for ((client, job), (start, delay)) in
            clients.into_iter().zip([(0, 0), (20, 40), (20, 0), (0, 0)])
        {
            tokio::time::sleep(ms(start)).await;
            tasks.push(tokio::spawn(phase(client, job, ms(delay))));
        }
        let mut total = 0;
        for t in tasks {
            total += t.await.unwrap();
        }
        total
    });
    drop(rt);
    for s in servers {
        s.shutdown().unwrap();
    }
    let mut services = Vec::new();
    for (i, t) in traces.iter().enumerate() {
        services.extend(services_from_trace(t, i).unwrap());
    }
    assert_eq!(written, 4 * PHASE as u64);
    let traced: u64 = services.iter().map(|s| s.bytes).sum();
    let sets = set_overlap(&services, &|job| Some(if job == 9 { 2 } else { 1 }));
    (
        sets.iter()
            .map(|s| (s.set, s.busy_ns, s.overlap_ns))
            .collect(),
        traced,
    )
}

#[test]
fn with_phase_order_two_jobs_of_a_set_are_never_in_service_at_once() {
    let (sets, traced) = run("phase");
    // Every byte written is in the traces (nothing served off the books).
    assert_eq!(traced, 4 * PHASE as u64);
    let set1 = sets.iter().find(|s| s.0 == 1).unwrap();
    assert!(set1.1 > 0, "the set was busy: {sets:?}");
    assert_eq!(
        set1.2, 0,
        "two jobs of set 1 were in service at once: {sets:?}"
    );
}

#[test]
fn by_arrival_two_servers_pick_different_jobs_of_a_set() {
    // The same run by arrival order: this is what the phase stamps fix (and shows the check
    // above can fail).
    let (sets, _) = run("arrival");
    let set1 = sets.iter().find(|s| s.0 == 1).unwrap();
    assert!(set1.2 > 0, "no overlap by arrival order: {sets:?}");
}

/// A directory of its own under the temporary directory, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    /// A fresh directory: the tests run in parallel, each gets its own.
    fn new(name: &str) -> TempDir {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p =
            std::env::temp_dir().join(format!("iosets-lab-test-{}-{name}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
