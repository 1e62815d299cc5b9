//! The server in the Prometheus ecosystem (issue 17): its `/metrics` page passes
//! `promtool check metrics`; Debian's `prometheus` scrapes a running server and a PromQL query
//! over its HTTP API returns a job's byte rate, consistent with what the job wrote; the example
//! scrape configuration passes `promtool check config`; and every metric the Grafana dashboard
//! queries is one the server exports.
//!
//! `prometheus` and `promtool` come from Debian's `prometheus` package (installed by
//! `scripts/ecosystem-tools.sh`); without them these tests fail, saying so.

use crate::common;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{metrics, Conn, TempDir};
use iosets_client::{BlockingClient, ClientConfig, JobId, Priority};
use iosets_server::{Server, ServerConfig, ServerHandle};

/// The control token of the tests' servers.
const TOKEN: &str = "prom";
/// The job whose writes the tests follow.
const JOB: u64 = 7;
/// Its writes: this many bytes each, over a file of `FILE_BLOCKS` of them (rewritten in turn,
/// so the test's disk use stays small).
const BLOCK: usize = 32 * 1024;
const FILE_BLOCKS: u64 = 32;
/// The server's bandwidth cap: keeps the job's rate steady, whatever the machine's load, so a
/// rate over a few seconds means something.
const THROTTLE_MIB_S: f64 = 2.0;
/// Prometheus' rate window, in seconds (five scrapes at the 1 s interval).
const WINDOW_S: u64 = 5;
/// How long the whole scrape test may take before it fails.
const DEADLINE: Duration = Duration::from_secs(60);

/// The repository's `deploy/` directory.
fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

/// Where a Prometheus tool is, or a failure naming the script that installs it.
fn tool(name: &str) -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    });
    found.unwrap_or_else(|| {
        panic!(
            "`{name}` not found on PATH: install Debian's prometheus package with \
             `bash scripts/ecosystem-tools.sh` (or apt-get install prometheus)"
        )
    })
}

/// A server with an admin address, a bandwidth cap and one quota rule (so that every family
/// of the exposition has series).
fn server(root: &TempDir) -> ServerHandle {
    let mut cfg = ServerConfig::new(&root.0).with_insecure_loopback();
    cfg.token = Some(TOKEN.into());
    cfg.throttle_mib_s = Some(THROTTLE_MIB_S);
    cfg.set_quota_toml("[[rule]]\nname = \"writers\"\nmatch = \"job=7\"\nthreads_pct = 50\n")
        .unwrap();
    Server::start(cfg).unwrap()
}

/// A client of job [`JOB`] with a priority hint (so that the priority series exists).
fn client(server: &ServerHandle) -> BlockingClient {
    let mut cfg = ClientConfig::new(JobId(JOB));
    cfg.priority = Priority::new(0.5);
    BlockingClient::connect_to(&[server.addr().to_string()], cfg).unwrap()
}

/// The body of `/metrics` (the HTTP head cut off).
fn exposition(admin: SocketAddr) -> String {
    let page = metrics(admin);
    let (_, body) = page.split_once("\r\n\r\n").expect("an HTTP head");
    body.to_string()
}

/// `GET path` over HTTP/1.0 (the peer closes after the answer, with no chunked encoding):
/// the status code and body.
fn http_get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok((status, body.to_string()))
}

/// `s` percent-encoded for a URL query (everything but RFC 3986's unreserved characters).
fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Seconds since the UNIX epoch.
fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// A Prometheus server scraping one target, killed and reaped on drop.
struct Prometheus {
    child: Child,
    addr: SocketAddr,
    log: PathBuf,
    /// Its configuration, storage and log; removed after the process is gone.
    _dir: TempDir,
}

impl Prometheus {
    /// Starts `prometheus` scraping `target` every second, with its storage in a temporary
    /// directory and its web API on a free loopback port.
    fn start(target: SocketAddr) -> Prometheus {
        let bin = tool("prometheus");
        let dir = TempDir::new("prometheus");
        let config = dir.0.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: iosets\n    static_configs:\n      \
                 - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        // A free port: bound by the kernel, released, then given to prometheus.
        let addr = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let log = dir.0.join("prometheus.log");
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(bin)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.0.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("starting prometheus");
        Prometheus {
            child,
            addr,
            log,
            _dir: dir,
        }
    }

    /// The last lines of its log, for a failure message.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// Fails with `what` and the log's tail.
    fn fail(&self, what: &str) -> ! {
        panic!("{what}\n--- prometheus log (tail) ---\n{}", self.log_tail())
    }

    /// Waits until it answers `/-/ready`, or fails at `deadline` (or if it exits).
    fn wait_ready(&mut self, deadline: Instant) {
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                self.fail(&format!("prometheus exited: {status}"));
            }
            if matches!(http_get(self.addr, "/-/ready"), Ok((200, _))) {
                return;
            }
            if Instant::now() > deadline {
                self.fail("prometheus not ready in time");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The instant-vector result of `query` evaluated at `time` (UNIX seconds): each series'
    /// labels and value.
    fn query(&self, query: &str, time: f64) -> Vec<(serde_json::Value, f64)> {
        let path = format!("/api/v1/query?query={}&time={time:.3}", url_encode(query));
        let (status, body) = match http_get(self.addr, &path) {
            Ok(r) => r,
            Err(e) => self.fail(&format!("querying {query}: {e}")),
        };
        let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_else(|e| {
            self.fail(&format!("{query}: HTTP {status}, not JSON ({e}): {body}"))
        });
        if v["status"] != "success" || v["data"]["resultType"] != "vector" {
            self.fail(&format!("{query}: HTTP {status}: {body}"));
        }
        v["data"]["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let value = r["value"][1].as_str().unwrap().parse().unwrap();
                (r["metric"].clone(), value)
            })
            .collect()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Job [`JOB`] writing [`BLOCK`]s one after the other until stopped, logging (UNIX time,
/// bytes written so far) after each write.
struct Writer {
    stop: Arc<AtomicBool>,
    log: Arc<Mutex<Vec<(f64, u64)>>>,
    thread: Option<std::thread::JoinHandle<u64>>,
}

impl Writer {
    fn start(client: BlockingClient) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let log = Arc::new(Mutex::new(vec![(unix_now(), 0)]));
        let (s, l) = (stop.clone(), log.clone());
        let thread = std::thread::spawn(move || {
            client.create("rate.dat", 0o644, false).unwrap();
            let block = vec![0x5a; BLOCK];
            let mut written = 0u64;
            for k in 0u64.. {
                if s.load(Ordering::Relaxed) {
                    break;
                }
                let off = (k % FILE_BLOCKS) * BLOCK as u64;
                written += client.write_at("rate.dat", off, block.clone()).unwrap();
                l.lock().unwrap().push((unix_now(), written));
            }
            written
        });
        Writer {
            stop,
            log,
            thread: Some(thread),
        }
    }

    /// Bytes written by UNIX time `t` (as of the last write logged at or before it).
    fn written_by(&self, t: f64) -> u64 {
        let log = self.log.lock().unwrap();
        log.iter()
            .take_while(|(at, _)| *at <= t)
            .last()
            .map_or(0, |&(_, b)| b)
    }

    /// When it started (UNIX seconds).
    fn started(&self) -> f64 {
        self.log.lock().unwrap()[0].0
    }

    /// Stops it; the bytes it wrote.
    fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[test]
fn the_exposition_passes_promtool() {
    let promtool = tool("promtool");
    let root = TempDir::new("promtool");
    let server = server(&root);
    let c = client(&server);
    c.create("f", 0o644, false).unwrap();
    for k in 0..4u64 {
        c.write_at("f", k * BLOCK as u64, vec![1u8; BLOCK]).unwrap();
    }
    c.read_at("f", 0, BLOCK).unwrap();
    c.fsync("f").unwrap();
    // Job 8 put into set 2 (priority 10^-2) by the control plane.
    let mut ctl = Conn::connect(server.addr(), 0);
    ctl.set_priority(TOKEN, 8, 0.01);
    let body = exposition(server.admin_addr().unwrap());
    // The page has what the check is about: per-job series with the job_id label, set
    // membership, a rule's series.
    assert!(body.contains("iosets_job_bytes_total{job_id=\"7\",direction=\"write\"} 131072"));
    assert!(
        body.contains("\niosets_job_set{job_id=\"8\"} 2\n"),
        "{body}"
    );
    assert!(
        !body.contains("iosets_job_set{job_id=\"7\"}"),
        "job 7's hint 0.5 is no set's priority"
    );
    assert!(body.contains("iosets_rule_admitted_total{rule=\"writers\"}"));
    // The wait causes add up to the summary's _sum: both are the exact sum of the waits
    // (a _sum of mean × count was off by up to a nanosecond per request).
    let value = |prefix: &str| -> f64 {
        body.lines()
            .filter(|l| l.starts_with(prefix))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
            .sum()
    };
    let causes = value("iosets_job_wait_seconds_total{job_id=\"7\",");
    let sum = value("iosets_job_queue_wait_seconds_sum{job_id=\"7\"}");
    assert!(sum > 0.0, "job 7 waited no time at all?\n{body}");
    assert!(
        (causes - sum).abs() <= 1e-12 + 1e-15 * sum,
        "wait causes {causes} s against the summary's sum {sum} s"
    );

    let mut child = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting promtool");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool check metrics: {}\n{said}",
        out.status
    );
}

/// The families of an exposition (from its `# TYPE` lines) and the sample names each allows.
fn exported_names(body: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in body.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let mut it = rest.split_whitespace();
        let (name, kind) = (it.next().unwrap(), it.next().unwrap());
        names.insert(name.to_string());
        let suffixes: &[&str] = match kind {
            "histogram" => &["_bucket", "_sum", "_count"],
            "summary" => &["_sum", "_count"],
            _ => &[],
        };
        names.extend(suffixes.iter().map(|s| format!("{name}{s}")));
    }
    names
}

/// The `iosets_*` metric names a PromQL expression mentions.
fn metric_names(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(i) = rest.find("iosets_") {
        // Not the tail of a longer identifier (e.g. a label value "x_iosets_y").
        let before = rest[..i].chars().last();
        let tail = &rest[i..];
        let len = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(tail.len());
        if !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            out.push(tail[..len].to_string());
        }
        rest = &tail[len..];
    }
    out
}

/// Every PromQL expression of a Grafana dashboard: panels' targets' `expr`s and the
/// templating variables' queries.
fn dashboard_queries(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("expr", serde_json::Value::String(s)) => out.push(s.clone()),
                    ("query" | "definition", serde_json::Value::String(s)) => out.push(s.clone()),
                    ("query", serde_json::Value::Object(q)) => {
                        if let Some(serde_json::Value::String(s)) = q.get("query") {
                            out.push(s.clone());
                        }
                    }
                    _ => dashboard_queries(x, out),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| dashboard_queries(x, out)),
        _ => {}
    }
}

#[test]
fn the_dashboard_queries_only_exported_metrics() {
    let path = deploy().join("grafana/iosets.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let dashboard: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: not JSON: {e}", path.display()));
    let mut queries = Vec::new();
    dashboard_queries(&dashboard, &mut queries);

    let root = TempDir::new("dashboard");
    let server = server(&root);
    let c = client(&server);
    c.create("f", 0o644, false).unwrap();
    c.write_at("f", 0, vec![1u8; BLOCK]).unwrap();
    let exported = exported_names(&exposition(server.admin_addr().unwrap()));

    let panels = dashboard["panels"].as_array().map_or(0, Vec::len);
    assert!(panels >= 6, "{panels} panels");
    let mut used = BTreeSet::new();
    for q in &queries {
        for name in metric_names(q) {
            assert!(
                exported.contains(&name),
                "the dashboard queries {name} ({q}), which the server does not export"
            );
            used.insert(name);
        }
    }
    // What the issue asks the dashboard to show.
    for needed in [
        "iosets_job_bytes_total",
        "iosets_job_set",
        "iosets_job_queue_wait_seconds",
        "iosets_queue_wait_seconds_bucket",
        "iosets_rule_admitted_bytes_total",
        "iosets_refusals_total",
        "iosets_connections_open",
    ] {
        assert!(used.contains(needed), "the dashboard shows no {needed}");
    }
    // The variables: a data source, a server (instance) and a job id.
    let vars: Vec<&str> = dashboard["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    for v in ["datasource", "instance", "job_id"] {
        assert!(vars.contains(&v), "no ${v} variable in {vars:?}");
    }
}

/// The families of an exposition, from its `# TYPE` lines.
fn families(body: &str) -> BTreeSet<String> {
    body.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|rest| rest.split_whitespace().next().unwrap().to_string())
        .collect()
}

#[test]
fn the_metrics_doc_lists_exactly_the_exported_families() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/metrics.md");
    let text = std::fs::read_to_string(&path).unwrap();
    // The tables of the "## Metrics" section: rows starting with a metric name.
    let section = text
        .split("\n## ")
        .find(|s| s.starts_with("Metrics\n"))
        .expect("a `## Metrics` section");
    let documented: BTreeSet<String> = section
        .lines()
        .filter_map(|l| l.strip_prefix("| `iosets_"))
        .map(|rest| format!("iosets_{}", rest.split('`').next().unwrap()))
        .collect();
    let root = TempDir::new("doc");
    let server = server(&root);
    let exported = families(&exposition(server.admin_addr().unwrap()));
    let missing: Vec<_> = exported.difference(&documented).collect();
    let stale: Vec<_> = documented.difference(&exported).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "{}: undocumented {missing:?}; documented but not exported {stale:?}",
        path.display()
    );
}

#[test]
fn the_example_scrape_config_passes_promtool() {
    let promtool = tool("promtool");
    let config = deploy().join("prometheus/prometheus.yml");
    let out = Command::new(promtool)
        .args(["check", "config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "promtool check config {}: {}\n{}{}",
        config.display(),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Debian's prometheus scrapes a running server every second; `rate()` of job 7's written
/// bytes over 5 s agrees with the rate the job wrote at over the same 5 s within a factor of
/// 1.5 either way, and once the job stops, the scraped total is exactly the bytes it wrote.
/// Also a regression test of the `job` label: Prometheus' own target label keeps its value
/// (`job="iosets"`), no `exported_job` appears, and the server's job id is `job_id`.
#[test]
fn prometheus_scrapes_a_jobs_byte_rate() {
    let deadline = Instant::now() + DEADLINE;
    let root = TempDir::new("scrape");
    let server = server(&root);
    let admin = server.admin_addr().unwrap();
    let writer = Writer::start(client(&server));
    let mut prom = Prometheus::start(admin);
    prom.wait_ready(deadline);

    let series = format!("iosets_job_bytes_total{{job_id=\"{JOB}\",direction=\"write\"}}");
    let rate_query = format!("rate({series}[{WINDOW_S}s])");
    // Samples of the series within one more second than the window: once there are that
    // many (one a second), Prometheus has scraped the job's steady writing across the whole
    // window; before, rate() extrapolates a few samples over part of it and divides by the
    // whole window (0.4 of the true rate with two samples), which is not what is tested.
    let covered_query = format!("count_over_time({series}[{}s])", WINDOW_S + 1);
    // Prometheus' rate and the writer's own over the same window.
    let (labels, rate, own) = loop {
        let t = unix_now();
        let result = prom.query(&rate_query, t);
        let covered = prom
            .query(&covered_query, t)
            .first()
            .is_some_and(|(_, n)| *n >= (WINDOW_S + 1) as f64);
        if let [(labels, rate)] = result.as_slice() {
            if *rate > 0.0 && covered && t - writer.started() > WINDOW_S as f64 + 1.0 {
                let own = (writer.written_by(t) - writer.written_by(t - WINDOW_S as f64)) as f64
                    / WINDOW_S as f64;
                break (labels.clone(), *rate, own);
            }
        } else if result.len() > 1 {
            prom.fail(&format!("{rate_query}: several series: {result:?}"));
        }
        if Instant::now() > deadline {
            prom.fail(&format!(
                "{rate_query}: no positive result in {DEADLINE:?}: {result:?}"
            ));
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    eprintln!(
        "prometheus: {rate_query} = {rate:.0} B/s; the writer's own rate over the window \
         {own:.0} B/s; cap {THROTTLE_MIB_S} MiB/s"
    );
    assert_eq!(labels["job"], "iosets", "the target label: {labels}");
    assert_eq!(labels["job_id"], JOB.to_string(), "{labels}");
    assert!(labels.get("exported_job").is_none(), "{labels}");
    // Tolerance: Prometheus computes the rate from the 4 or 5 samples scraped in the window,
    // extrapolated to its edges, and a scrape sees completions a few ms before the client's
    // acknowledgements; with the rate held steady by the throttle these differ by a block or
    // two per second (~5 %), so a factor of 1.5 fails only a rate off by a unit or a window.
    let ratio = rate / own;
    assert!(
        (1.0 / 1.5..=1.5).contains(&ratio),
        "prometheus says {rate:.0} B/s, the writer wrote {own:.0} B/s"
    );
    assert!(
        rate <= THROTTLE_MIB_S * 1024.0 * 1024.0 * 1.5,
        "{rate:.0} B/s above the server's cap"
    );

    // Stopped: the last scrape's total is exactly what the job wrote.
    let written = writer.finish();
    loop {
        let result = prom.query(&series, unix_now());
        if let [(_, total)] = result.as_slice() {
            if *total == written as f64 {
                break;
            }
        }
        if Instant::now() > deadline {
            prom.fail(&format!(
                "{series}: {result:?}, not the {written} bytes written"
            ));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    // The target is up.
    let up = prom.query("up{job=\"iosets\"}", unix_now());
    assert_eq!(up.len(), 1, "{up:?}");
    assert_eq!(up[0].1, 1.0);
}
