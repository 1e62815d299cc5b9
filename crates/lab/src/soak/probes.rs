//! The resource probes: each starts a server on a fresh root, measures its RSS and descriptors
//! (`/proc`) before and during an abuse, and checks whether a well-behaved client (connect,
//! create, write 4 KiB, read them back) is still served meanwhile.
//!
//! - `idle`: thousands of connections that never send a byte;
//! - `slow`: a frame trickled at 1 byte/s on each of tens of connections (does the server close
//!   them, and when?);
//! - `noread`: connections that send writes and invalid frames as fast as they can and never read
//!   an answer (how much does the server's RSS grow?);
//! - `jobs`: 100,000 distinct job ids, one small write each (RSS, and the size of `/metrics`);
//! - `fdlimit`: the server under a 1,024-descriptor limit: a well-behaved client writes 6,000
//!   files, then 2,000 connections are opened (given up once the accept queue is full), then a
//!   new client must be served; EMFILE answers the well-behaved clients got are counted;
//! - `fulldisk`: the root on a 20 MiB tmpfs: write until ENOSPC, unlink, write again.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::report::{Row, Verdict};
use super::Ctx;
use crate::rig::child::{describe_status, ServerProc, Usage};
use crate::rig::wire::{
    create, frame_bytes, io_text, metrics_size, new_client_served, read, write, Answer, Conn,
    EMFILE, ENOSPC,
};

/// How long a well-behaved client's steps may wait.
const SERVED_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a server may take to exit after SIGTERM at the end of a probe.
const STOP_BOUND: Duration = Duration::from_secs(30);

/// `12.3` MiB.
fn mib(u: &Usage) -> String {
    format!("{:.1}", u.rss_mib())
}

/// Stops the server (SIGTERM) and reports how it went, as a figure.
fn stop(server: &mut ServerProc, row: &mut Row) {
    let s = match server.stop(STOP_BOUND) {
        Ok(st) => describe_status(&st),
        Err(e) => format!("{e:#}"),
    };
    row.figure("stop", s);
}

/// Connection attempts in a row that may time out before the rest are given up (the server's
/// accept queue is full: each further attempt would only wait out its timeout).
const GIVE_UP_AFTER: usize = 5;

/// Opens up to `n` TCP connections that send nothing; returns them and the count not opened
/// (failed, or given up after [`GIVE_UP_AFTER`] failures in a row).
fn open_silent(
    ctx: &Ctx,
    addr: SocketAddr,
    n: usize,
    timeout: Duration,
) -> Result<(Vec<TcpStream>, usize)> {
    let mut conns = Vec::with_capacity(n);
    let mut in_a_row = 0;
    for _ in 0..n {
        ctx.check()?;
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(s) => {
                conns.push(s);
                in_a_row = 0;
            }
            Err(_) => {
                in_a_row += 1;
                if in_a_row >= GIVE_UP_AFTER {
                    break;
                }
            }
        }
    }
    let failed = n - conns.len();
    Ok((conns, failed))
}

/// Whether the server closed (or reset) a connection that this side never closed.
fn closed_by_peer(s: &TcpStream) -> bool {
    if s.set_nonblocking(true).is_err() {
        return true;
    }
    let mut b = [0u8; 1];
    let r = (&*s).read(&mut b);
    let _ = s.set_nonblocking(false);
    match r {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != ErrorKind::WouldBlock,
    }
}

/// `idle`.
pub(crate) fn idle(ctx: &Ctx, row: &mut Row) -> Result<()> {
    let n = ctx.sizes.idle_conns;
    let hold = ctx.sizes.probe;
    row.param("conns", n);
    row.param("hold_s", hold.as_secs());
    let mut server = ctx.fresh_spec("idle")?.start("127.0.0.1:0", 0)?;
    let deadline = Instant::now() + ctx.bound();
    let before = server.usage()?;
    let (conns, failed) = open_silent(ctx, server.addr, n, Duration::from_secs(2))?;
    ctx.sleep(Duration::from_secs(1), deadline)?;
    let during = server.usage()?;
    let served = new_client_served(server.addr, "served-1", SERVED_TIMEOUT);
    ctx.sleep(hold, deadline)?;
    let closed = conns.iter().filter(|s| closed_by_peer(s)).count();
    let served_late = new_client_served(server.addr, "served-2", SERVED_TIMEOUT);
    let held = server.usage()?;
    drop(conns);
    row.figure("opened", n - failed);
    row.figure("not_opened", failed);
    row.figure("closed_by_server", closed);
    row.figure("served", served.describe());
    row.figure("served_after_hold", served_late.describe());
    row.figure("rss_mib_before", mib(&before));
    row.figure("rss_mib_during", mib(&during));
    row.figure("fds_before", before.fds);
    row.figure("fds_during", during.fds.max(held.fds));
    stop(&mut server, row);
    row.check(served.ok(), || {
        format!("a new client was not served: {}", served.describe())
    });
    row.check(served_late.ok(), || {
        format!(
            "a new client was not served after {} s: {}",
            hold.as_secs(),
            served_late.describe()
        )
    });
    Ok(())
}

/// `slow`.
pub(crate) fn slow(ctx: &Ctx, row: &mut Row) -> Result<()> {
    let n = ctx.sizes.slow_conns;
    let hold = ctx.sizes.probe;
    // A frame longer than the probe, so none completes.
    let payload = hold.as_secs() as usize + 64;
    let frame = frame_bytes(1, 11, write("slow.dat", 0, vec![1u8; payload]));
    row.param("conns", n);
    row.param("bytes_per_s", 1);
    row.param("hold_s", hold.as_secs());
    row.param("frame_bytes", frame.len());
    let mut server = ctx.fresh_spec("slow")?.start("127.0.0.1:0", 0)?;
    let addr = server.addr;
    let deadline = Instant::now() + ctx.bound();
    let before = server.usage()?;
    let (mut conns, failed) = open_silent(ctx, addr, n, Duration::from_secs(2))?;
    let mut closed_at: Vec<Option<f64>> = vec![None; conns.len()];
    let t0 = Instant::now();
    let mut during = before;
    let served = std::thread::scope(|sc| -> Result<_> {
        let check = sc.spawn(move || {
            std::thread::sleep(Duration::from_millis(1500).min(hold / 2));
            new_client_served(addr, "served", SERVED_TIMEOUT)
        });
        let mut sent = 0;
        while t0.elapsed() < hold {
            for (i, s) in conns.iter_mut().enumerate() {
                if closed_at[i].is_some() {
                    continue;
                }
                if closed_by_peer(s) || s.write_all(&frame[sent..=sent]).is_err() {
                    closed_at[i] = Some(t0.elapsed().as_secs_f64());
                }
            }
            sent = (sent + 1).min(frame.len() - 1);
            if let Ok(u) = server.usage() {
                during = u;
            }
            ctx.sleep(Duration::from_secs(1), deadline)?;
        }
        for (i, s) in conns.iter().enumerate() {
            if closed_at[i].is_none() && closed_by_peer(s) {
                closed_at[i] = Some(t0.elapsed().as_secs_f64());
            }
        }
        check
            .join()
            .map_err(|_| anyhow::anyhow!("the served check panicked"))
    })?;
    drop(conns);
    let times: Vec<f64> = closed_at.iter().flatten().copied().collect();
    row.figure("opened", n - failed);
    row.figure("closed_by_server", times.len());
    let fmt = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |t| format!("{t:.0}"));
    row.figure("first_close_s", fmt(times.iter().copied().reduce(f64::min)));
    row.figure("last_close_s", fmt(times.iter().copied().reduce(f64::max)));
    row.figure("served", served.describe());
    row.figure("rss_mib_before", mib(&before));
    row.figure("rss_mib_during", mib(&during));
    row.figure("fds_during", during.fds);
    stop(&mut server, row);
    row.check(served.ok(), || {
        format!("a new client was not served: {}", served.describe())
    });
    Ok(())
}

/// Writes all of `buf`, waiting out full socket buffers until `end`: `Ok(false)` at `end`.
fn write_until(s: &mut TcpStream, buf: &[u8], end: Instant) -> std::io::Result<bool> {
    let mut n = 0;
    while n < buf.len() {
        if Instant::now() >= end {
            return Ok(false);
        }
        match s.write(&buf[n..]) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(k) => n += k,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// What the flooders did.
#[derive(Debug, Default)]
struct Flood {
    bytes: AtomicU64,
    frames: AtomicU64,
    invalid: AtomicU64,
    reconnects: AtomicU64,
}

/// One never-reading connection after another until `end`: writes and reads of 64 KiB in turn
/// (a read's answer is 64 KiB that cannot be sent), and every 16th frame an invalid one (an
/// unknown protocol version).
fn flooder(addr: SocketAddr, k: u64, end: Instant, flood: &Flood) {
    let path = format!("noread-{k}.dat");
    let data = vec![0x5au8; 64 * 1024];
    let mut tag = 0u64;
    while Instant::now() < end {
        let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(2)) else {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        let _ = s.set_write_timeout(Some(Duration::from_millis(200)));
        flood.reconnects.fetch_add(1, Ordering::Relaxed);
        tag += 1;
        let mut ok = matches!(
            write_until(&mut s, &frame_bytes(tag, 300 + k, create(&path)), end),
            Ok(true)
        );
        while ok && Instant::now() < end {
            tag += 1;
            let offset = (tag % 64) * 65536;
            let req = if tag & 1 == 0 {
                write(&path, offset, data.clone())
            } else {
                read(&path, offset, 65536)
            };
            let mut f = frame_bytes(tag, 300 + k, req);
            let invalid = tag & 15 == 0;
            if invalid {
                f[4] = 0xee; // the version byte
            }
            match write_until(&mut s, &f, end) {
                Ok(true) => {
                    flood.bytes.fetch_add(f.len() as u64, Ordering::Relaxed);
                    flood.frames.fetch_add(1, Ordering::Relaxed);
                    if invalid {
                        flood.invalid.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Ok(false) | Err(_) => ok = false,
            }
        }
    }
}

/// The in-flight byte bound `noread` gives its server (`--max-inflight-mib`), MiB.
pub(crate) const NOREAD_INFLIGHT_MIB: u64 = 128;

/// `noread`.
pub(crate) fn noread(ctx: &Ctx, row: &mut Row) -> Result<()> {
    let k = ctx.sizes.flooders;
    let hold = ctx.sizes.probe;
    let bound = ctx.sizes.rss_bound_mib;
    row.param("flooders", k);
    row.param("hold_s", hold.as_secs());
    row.param("request_bytes", 65536);
    row.param("mix", "write/read 50/50");
    row.param("invalid_every", 16);
    row.param("rss_growth_bound_mib", bound);
    let mut spec = ctx.fresh_spec("noread")?;
    // The bound the server is configured with: its in-flight bytes (unless given).
    if !spec
        .flags
        .iter()
        .any(|a| a.starts_with("--max-inflight-mib"))
    {
        spec.flags
            .push(format!("--max-inflight-mib={NOREAD_INFLIGHT_MIB}"));
        row.param("server_max_inflight_mib", NOREAD_INFLIGHT_MIB);
    }
    let mut server = spec.start("127.0.0.1:0", 0)?;
    let addr = server.addr;
    let pid = server.pid();
    let before = server.usage()?;
    let flood = Flood::default();
    let end = Instant::now() + hold;
    let done = AtomicBool::new(false);
    let (peak, served) = std::thread::scope(|sc| {
        for i in 0..k as u64 {
            let flood = &flood;
            sc.spawn(move || flooder(addr, i, end, flood));
        }
        let sampler = sc.spawn(|| {
            let mut peak = before;
            while !done.load(Ordering::Relaxed) {
                if let Ok(u) = crate::rig::child::usage_of(pid) {
                    peak.rss_kib = peak.rss_kib.max(u.rss_kib);
                    peak.fds = peak.fds.max(u.fds);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            peak
        });
        std::thread::sleep(hold / 2);
        let served = new_client_served(addr, "served", SERVED_TIMEOUT);
        while Instant::now() < end && !super::interrupted() {
            std::thread::sleep(Duration::from_millis(50));
        }
        // The flooders stop at `end` (their writes wait at most until then).
        std::thread::sleep(Duration::from_millis(300));
        done.store(true, Ordering::Relaxed);
        (sampler.join().unwrap_or(before), served)
    });
    ctx.check()?;
    std::thread::sleep(Duration::from_secs(1));
    let after = server.usage().unwrap_or_default();
    let growth = peak.rss_mib() - before.rss_mib();
    row.figure(
        "sent_mib",
        format!(
            "{:.0}",
            flood.bytes.load(Ordering::Relaxed) as f64 / 1048576.0
        ),
    );
    row.figure("frames", flood.frames.load(Ordering::Relaxed));
    row.figure("invalid_frames", flood.invalid.load(Ordering::Relaxed));
    row.figure("connections", flood.reconnects.load(Ordering::Relaxed));
    row.figure("rss_mib_before", mib(&before));
    row.figure("rss_mib_peak", mib(&peak));
    row.figure("rss_mib_after", mib(&after));
    row.figure("rss_growth_mib", format!("{growth:.1}"));
    row.figure("fds_peak", peak.fds);
    row.figure("served", served.describe());
    stop(&mut server, row);
    row.check(growth <= bound as f64, || {
        format!("the server's RSS grew by {growth:.1} MiB, more than {bound} MiB")
    });
    row.check(served.ok(), || {
        format!("a new client was not served: {}", served.describe())
    });
    Ok(())
}

/// `jobs`.
pub(crate) fn jobs(ctx: &Ctx, row: &mut Row) -> Result<()> {
    const CONNS: u64 = 8;
    const DEPTH: usize = 64;
    const FIRST_JOB: u64 = 1_000_000;
    let n = ctx.sizes.jobs as u64;
    let (rss_max_mb, metrics_max_bytes) = (200.0, 1_000_000usize);
    row.param("jobs", n);
    row.param("write_bytes", 16);
    row.param("conns", CONNS);
    let mut server = ctx.fresh_spec("jobs")?.start("127.0.0.1:0", 0)?;
    let addr = server.addr;
    let deadline = Instant::now() + ctx.bound();
    let before = server.usage()?;
    let t0 = Instant::now();
    let results: Vec<Result<(u64, u64, Option<String>)>> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..CONNS)
            .map(|k| {
                sc.spawn(move || -> Result<(u64, u64, Option<String>)> {
                    let mut conn = Conn::connect(addr, FIRST_JOB, SERVED_TIMEOUT)?;
                    let path = format!("jobs-{k}.dat");
                    if let Answer::Err(e, m) = Answer::from(conn.call(create(&path))?) {
                        bail!("creating {path}: errno {e} ({m})");
                    }
                    let mine: Vec<u64> = (0..n).filter(|i| i % CONNS == k).collect();
                    let (mut ok, mut errors, mut first) = (0u64, 0u64, None);
                    let mut in_flight = 0usize;
                    let mut next = mine.iter();
                    loop {
                        if Instant::now() > deadline || super::interrupted() {
                            bail!("stopped after {ok} writes (time bound or interrupt)");
                        }
                        let mut sent_any = false;
                        while in_flight < DEPTH {
                            let Some(&i) = next.next() else { break };
                            conn.send_as(
                                FIRST_JOB + i,
                                write(&path, (i / CONNS) * 16, vec![7u8; 16]),
                            )?;
                            in_flight += 1;
                            sent_any = true;
                        }
                        if in_flight == 0 && !sent_any {
                            break;
                        }
                        let (_, r) = conn.recv()?;
                        in_flight -= 1;
                        match Answer::from(r) {
                            Answer::Written(16) => ok += 1,
                            a => {
                                errors += 1;
                                first.get_or_insert(format!("{a:?}"));
                            }
                        }
                    }
                    Ok((ok, errors, first))
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| anyhow::anyhow!("a jobs connection panicked"))?
            })
            .collect()
    });
    let elapsed = t0.elapsed().as_secs_f64();
    let (mut ok, mut errors, mut first) = (0, 0, None);
    for r in results {
        let (o, e, f) = r?;
        ok += o;
        errors += e;
        if first.is_none() {
            first = f;
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    let after = server.usage()?;
    let metrics = metrics_size(&server.metrics, SERVED_TIMEOUT);
    row.figure("written", ok);
    row.figure("errors", errors);
    row.figure("writes_per_s", format!("{:.0}", ok as f64 / elapsed));
    row.figure("rss_mib_before", mib(&before));
    row.figure("rss_mib_after", mib(&after));
    row.figure("fds_after", after.fds);
    row.figure(
        "metrics_bytes",
        metrics
            .as_ref()
            .map_or_else(|e| format!("error: {e:#}"), |b| b.to_string()),
    );
    row.param("metrics_at", &server.metrics);
    stop(&mut server, row);
    let rss_mb = after.rss_kib as f64 * 1024.0 / 1e6;
    row.check(ok == n, || {
        format!(
            "{ok} of {n} writes acknowledged; first error: {}",
            first.unwrap_or_default()
        )
    });
    row.check(rss_mb <= rss_max_mb, || {
        format!("RSS {rss_mb:.0} MB > {rss_max_mb} MB")
    });
    match metrics {
        Ok(b) => row.check(b <= metrics_max_bytes, || {
            format!("/metrics is {b} bytes > 1 MB")
        }),
        Err(e) => row.check(false, || format!("/metrics: {e:#}")),
    }
    Ok(())
}

/// `fdlimit`.
pub(crate) fn fdlimit(ctx: &Ctx, row: &mut Row) -> Result<()> {
    const BATCH: usize = 16;
    let s = &ctx.sizes;
    row.param("nofile", s.fd_limit);
    row.param("conns", s.fd_conns);
    row.param("files", s.fd_files);
    let root = ctx.fresh_root("fdlimit")?;
    let mut server = ctx
        .spec("fdlimit", &root, Some(s.fd_limit))
        .start("127.0.0.1:0", 0)?;
    let addr = server.addr;
    let deadline = Instant::now() + ctx.bound();
    let before = server.usage()?;
    // A well-behaved client writes the files first (creates, then writes, BATCH at a time)...
    let (mut files_ok, mut emfile, mut other) = (0usize, 0u64, 0u64);
    let mut first_error: Option<String> = None;
    let mut peak_fds = before.fds;
    let writer = (|| -> Result<()> {
        let mut conn = Conn::connect(addr, 400, SERVED_TIMEOUT).context("connecting")?;
        let names: Vec<String> = (0..s.fd_files).map(|i| format!("f{i}")).collect();
        for (b, batch) in names.chunks(BATCH).enumerate() {
            ctx.check()?;
            if Instant::now() > deadline {
                bail!("the time bound passed after {files_ok} files");
            }
            for step in 0..2 {
                let mut tags = Vec::new();
                for p in batch {
                    let req = if step == 0 {
                        create(p)
                    } else {
                        write(p, 0, vec![9u8; 4096])
                    };
                    tags.push(conn.send(req)?);
                }
                for _ in &tags {
                    let (_, r) = conn.recv().map_err(|e| {
                        anyhow::anyhow!(
                            "waiting for an answer at file {}: {}",
                            b * BATCH,
                            io_text(&e, SERVED_TIMEOUT)
                        )
                    })?;
                    match Answer::from(r) {
                        Answer::Written(4096) if step == 1 => files_ok += 1,
                        Answer::Err(EMFILE, m) => {
                            emfile += 1;
                            first_error.get_or_insert(format!("errno {EMFILE} ({m})"));
                        }
                        Answer::Err(e, m) => {
                            other += 1;
                            first_error.get_or_insert(format!("errno {e} ({m})"));
                        }
                        _ => {}
                    }
                }
            }
            if b % 32 == 0 {
                if let Ok(u) = server.usage() {
                    peak_fds = peak_fds.max(u.fds);
                }
            }
        }
        Ok(())
    })();
    let with_files = server.usage().unwrap_or_default();
    // Then the connections, and a new client.
    let (conns, failed) = open_silent(ctx, addr, s.fd_conns, Duration::from_secs(1))?;
    ctx.sleep(Duration::from_secs(1), deadline)?;
    let served = new_client_served(addr, "served", SERVED_TIMEOUT);
    let after = server.usage().unwrap_or_default();
    peak_fds = peak_fds.max(with_files.fds).max(after.fds);
    drop(conns);
    emfile += served.emfile;
    row.figure("opened", s.fd_conns - failed);
    row.figure("not_opened", failed);
    row.figure("files_written", files_ok);
    row.figure("emfile", emfile);
    row.figure("other_errors", other);
    row.figure(
        "writer",
        match &writer {
            Ok(()) => "finished".to_string(),
            Err(e) => format!("stopped: {e:#}"),
        },
    );
    row.figure("served", served.describe());
    row.figure("fds_before", before.fds);
    row.figure("fds_after_files", with_files.fds);
    row.figure("fds_peak", peak_fds);
    row.figure("rss_mib_after", mib(&after));
    stop(&mut server, row);
    ctx.check()?;
    row.check(served.ok(), || {
        format!("a new client was not served: {}", served.describe())
    });
    row.check(emfile == 0, || {
        format!("{emfile} EMFILE answers reached well-behaved clients")
    });
    row.check(writer.is_ok() && files_ok == s.fd_files, || {
        format!(
            "{files_ok} of {} files written ({}){}",
            s.fd_files,
            writer
                .as_ref()
                .err()
                .map_or_else(String::new, |e| format!("{e:#}")),
            first_error
                .as_ref()
                .map_or_else(String::new, |e| format!("; first error {e}"))
        )
    });
    Ok(())
}

/// A tmpfs mounted by the probe; unmounted (lazily if busy) and removed when dropped.
#[derive(Debug)]
struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Mounts a tmpfs of `mib` MiB at `dir`: `Err(reason)` when this process may not.
    fn mount(dir: PathBuf, mib: u64) -> std::result::Result<Tmpfs, String> {
        if !rustix::process::geteuid().is_root() {
            return Err("needs root to mount a tmpfs".into());
        }
        std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "iosets-soak"])
            .arg(&dir)
            .output()
            .map_err(|e| format!("running mount: {e}"))?;
        if !out.status.success() {
            let _ = std::fs::remove_dir(&dir);
            return Err(format!(
                "mount -t tmpfs failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Tmpfs(dir))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.0)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// `fulldisk`.
pub(crate) fn fulldisk(ctx: &Ctx, row: &mut Row) -> Result<()> {
    const MIB: usize = 1 << 20;
    let size = ctx.sizes.tmpfs_mib;
    row.param("tmpfs_mib", size);
    row.param("write_bytes", MIB);
    let mnt = match Tmpfs::mount(ctx.scratch_path("fulldisk-mnt"), size) {
        Ok(m) => m,
        Err(why) => {
            row.verdict = Verdict::Skip(why);
            return Ok(());
        }
    };
    // Declared after the mount: dropped (killed) before it is unmounted.
    let mut server = ctx.spec("fulldisk", &mnt.0, None).start("127.0.0.1:0", 0)?;
    let mut conn = Conn::connect(server.addr, 500, SERVED_TIMEOUT)?;
    let call = |conn: &mut Conn, req| -> Result<Answer> { Ok(Answer::from(conn.call(req)?)) };
    if let Answer::Err(e, m) = call(&mut conn, create("a"))? {
        bail!("creating a: errno {e} ({m})");
    }
    let mut written = 0u64;
    let mut enospc = false;
    for i in 0..(2 * size) {
        match call(&mut conn, write("a", i * MIB as u64, vec![3u8; MIB]))? {
            Answer::Written(n) => written += u64::from(n),
            Answer::Err(ENOSPC, _) => {
                enospc = true;
                break;
            }
            a => bail!("writing a at {i} MiB: {a:?}"),
        }
    }
    let unlink = match call(
        &mut conn,
        iosets_proto::Request::Unlink { path: "a".into() },
    )? {
        Answer::Err(e, m) => format!("errno {e} ({m})"),
        _ => "ok".into(),
    };
    let free_mib = rustix::fs::statvfs(&mnt.0)
        .map(|v| (v.f_bavail * v.f_frsize) as f64 / MIB as f64)
        .map_or_else(|e| format!("error: {e}"), |f| format!("{f:.1}"));
    if let Answer::Err(e, m) = call(&mut conn, create("b"))? {
        bail!("creating b: errno {e} ({m})");
    }
    let second = call(&mut conn, write("b", 0, vec![4u8; MIB]))?;
    let second_ok = second == Answer::Written(MIB as u32);
    drop(conn);
    row.figure(
        "written_before_enospc_mib",
        format!("{:.1}", written as f64 / MIB as f64),
    );
    row.figure("enospc", if enospc { "yes" } else { "no" });
    row.figure("unlink", &unlink);
    row.figure("free_mib_after_unlink", free_mib);
    row.figure(
        "second_write",
        match &second {
            Answer::Written(n) => format!("wrote {n}"),
            Answer::Err(e, m) => format!("errno {e} ({m})"),
            a => format!("{a:?}"),
        },
    );
    stop(&mut server, row);
    drop(server);
    row.check(enospc, || {
        format!(
            "no ENOSPC after writing {} MiB into {size} MiB",
            written >> 20
        )
    });
    row.check(unlink == "ok", || format!("unlink: {unlink}"));
    row.check(second_ok, || {
        format!("the write after unlink answered {second:?}")
    });
    drop(mnt);
    Ok(())
}
