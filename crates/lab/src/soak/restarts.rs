//! `kill9` and `sigterm`: the server stopped under load, and every acknowledged write checked.
//!
//! Writer `c` writes record `seq` of `RECORD` bytes at offset `seq × RECORD` of its own file,
//! with contents derived from `(scenario, c, seq)` ([`crate::rig::wire::pattern`]), and remembers every
//! record the server acknowledged (`Written(RECORD)`). A record is *lost* when it reads back
//! as zeros or past the end of the file, *corrupted* when it reads back as other bytes.
//!
//! - `kill9`: writers send one write at a time; a write without an answer (the server died) is
//!   sent again, same record, on a new connection (writing a record twice is harmless). The
//!   server is SIGKILLed at random times and restarted on the same root and port. At the end
//!   the records are read back through the last server, which must then stop with exit 0.
//! - `sigterm`: writers keep 8 writes in flight each; SIGTERM comes while they are busy; the
//!   server must answer what it read, exit 0, and leave every acknowledged record (also those
//!   answered after the signal) in its files, which are read directly from the root.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use super::report::Row;
use super::Ctx;
use crate::rig::child::{describe_status, ServerProc};
use crate::rig::wire::{create, pattern, read, write, Answer, Conn, Rng};

/// Bytes per record.
const RECORD: usize = 4096;
/// Records per read-back request.
const CHUNK: u64 = 256;
/// How long a socket operation may wait.
const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a server may take to exit after SIGTERM.
const STOP_BOUND: Duration = Duration::from_secs(30);
/// Writes each `sigterm` writer keeps in flight.
const DEPTH: usize = 8;

/// What one writer did.
#[derive(Debug, Default)]
struct WriterLog {
    /// Its file, relative to the root.
    path: String,
    /// The records acknowledged, in order of acknowledgement.
    acked: Vec<u64>,
    /// Writes sent that got no answer (the connection died under them).
    unanswered: u64,
    /// Error answers (not acknowledgements).
    errors: u64,
    /// The first error answer.
    first_error: Option<String>,
    /// Connections made.
    connects: u64,
    /// Acknowledgements that came after SIGTERM was sent.
    after_term: u64,
}

impl WriterLog {
    fn error(&mut self, what: String) {
        self.errors += 1;
        self.first_error.get_or_insert(what);
    }
}

/// The record key of writer `c`'s record `seq` in scenario `salt`.
fn key(salt: u64, c: usize, seq: u64) -> u64 {
    salt.wrapping_mul(0x1000_0000_0000_0000) ^ ((c as u64) << 40) ^ seq
}

/// A kill9 writer: one write at a time, reconnecting after the server died, until `stop`.
fn kill9_writer(addr: SocketAddr, c: usize, stop: &AtomicBool, deadline: Instant) -> WriterLog {
    let mut log = WriterLog {
        path: format!("w{c}.dat"),
        ..WriterLog::default()
    };
    let mut seq = 0u64;
    let running = || !stop.load(Ordering::Relaxed) && Instant::now() < deadline;
    'connect: while running() {
        let Ok(mut conn) = Conn::connect(addr, 100 + c as u64, IO_TIMEOUT) else {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        log.connects += 1;
        match conn.call(create(&log.path)).map(Answer::from) {
            Ok(Answer::Err(e, m)) => {
                log.error(format!("create: errno {e} ({m})"));
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            Ok(_) => {}
            Err(_) => continue,
        }
        while running() {
            let data = pattern(key(9, c, seq), RECORD);
            match conn
                .call(write(&log.path, seq * RECORD as u64, data))
                .map(Answer::from)
            {
                Ok(Answer::Written(n)) if n as usize == RECORD => {
                    log.acked.push(seq);
                    seq += 1;
                }
                Ok(other) => {
                    log.error(format!("write of record {seq}: {other:?}"));
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(_) => {
                    // Lost with the connection: the same record again on a new one.
                    log.unanswered += 1;
                    continue 'connect;
                }
            }
        }
    }
    log
}

/// Reads `len` bytes at `offset` of `path` (fewer at the end of the file).
type ReadAt<'a> = dyn FnMut(&str, u64, u32) -> Result<Vec<u8>> + 'a;

/// Lost and corrupted records among `log`'s acknowledged ones in scenario `salt`.
fn verify(read_at: &mut ReadAt<'_>, salt: u64, c: usize, log: &WriterLog) -> Result<(u64, u64)> {
    let mut acked = log.acked.clone();
    acked.sort_unstable();
    acked.dedup();
    let (mut lost, mut corrupted) = (0, 0);
    let mut chunk: Option<(u64, Vec<u8>)> = None;
    for &seq in &acked {
        let first = seq / CHUNK * CHUNK;
        if chunk.as_ref().is_none_or(|(f, _)| *f != first) {
            let bytes = read_at(
                &log.path,
                first * RECORD as u64,
                (CHUNK as usize * RECORD) as u32,
            )?;
            chunk = Some((first, bytes));
        }
        let (_, bytes) = chunk.as_ref().expect("just read");
        let at = ((seq - first) as usize) * RECORD;
        let got = bytes.get(at..at + RECORD);
        match got {
            Some(g) if g == &pattern(key(salt, c, seq), RECORD)[..] => {}
            Some(g) if g.iter().any(|&b| b != 0) => corrupted += 1,
            _ => lost += 1,
        }
    }
    Ok((lost, corrupted))
}

/// Reads through a server connection.
fn server_reader(conn: &mut Conn) -> impl FnMut(&str, u64, u32) -> Result<Vec<u8>> + '_ {
    move |path, offset, len| match conn.call(read(path, offset, len)).map(Answer::from) {
        Ok(Answer::Data(d)) => Ok(d.to_vec()),
        Ok(other) => bail!("reading {path} at {offset}: {other:?}"),
        Err(e) => Err(anyhow!("reading {path} at {offset}: {e}")),
    }
}

/// Reads the files under `root` directly.
fn disk_reader(root: &Path) -> impl FnMut(&str, u64, u32) -> Result<Vec<u8>> + '_ {
    move |path, offset, len| {
        let p = root.join(path);
        let f = match std::fs::File::open(&p) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e).with_context(|| format!("opening {}", p.display())),
        };
        let mut buf = vec![0u8; len as usize];
        let mut n = 0;
        while n < buf.len() {
            let k = f
                .read_at(&mut buf[n..], offset + n as u64)
                .with_context(|| format!("reading {}", p.display()))?;
            if k == 0 {
                break;
            }
            n += k;
        }
        buf.truncate(n);
        Ok(buf)
    }
}

/// The criteria both scenarios share: some writes acknowledged, and none of them lost or
/// corrupted.
fn check_durable(row: &mut Row, acked: usize, lost: u64, corrupted: u64) {
    row.check(acked > 0, || "no write was acknowledged".into());
    row.check(lost == 0, || format!("{lost} acknowledged records lost"));
    row.check(corrupted == 0, || {
        format!("{corrupted} acknowledged records corrupted")
    });
}

/// `lo` to `hi` in milliseconds, as a parameter's value: `300-1500`.
fn ms_range(lo: Duration, hi: Duration) -> String {
    format!("{}-{}", lo.as_millis(), hi.as_millis())
}

/// `kill9`.
pub(crate) fn kill9(ctx: &Ctx, row: &mut Row) -> Result<()> {
    let s = &ctx.sizes;
    let (lo, hi) = if ctx.quick {
        (Duration::from_millis(200), Duration::from_millis(600))
    } else {
        (Duration::from_millis(300), Duration::from_millis(1500))
    };
    row.param("writers", s.writers);
    row.param("restarts", s.restarts);
    row.param("record_bytes", RECORD);
    row.param("kill_every_ms", ms_range(lo, hi));
    let spec = ctx.fresh_spec("kill9")?;
    let mut server = spec.start("127.0.0.1:0", 0)?;
    let addr = server.addr;
    let deadline = Instant::now() + ctx.bound();
    let stop = AtomicBool::new(false);
    let t0 = Instant::now();
    let (restarted, logs) = std::thread::scope(|sc| {
        let writers: Vec<_> = (0..s.writers)
            .map(|c| {
                let stop = &stop;
                sc.spawn(move || kill9_writer(addr, c, stop, deadline))
            })
            .collect();
        let mut rng = Rng::new(ctx.seed ^ 0x4b11);
        let mut restarted = 0usize;
        let ctl = (|| -> Result<()> {
            for r in 1..=s.restarts {
                ctx.sleep(rng.duration(lo, hi), deadline)?;
                server.kill9()?;
                server = spec
                    .start(&addr.to_string(), r)
                    .with_context(|| format!("restart {r} on {addr}"))?;
                restarted += 1;
            }
            // The last server takes writes too before the check.
            ctx.sleep(hi, deadline)
        })();
        stop.store(true, Ordering::Relaxed);
        let logs: Vec<WriterLog> = writers
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect();
        (ctl.map(|()| restarted), logs)
    });
    let elapsed = t0.elapsed().as_secs_f64();
    let acked: usize = logs.iter().map(|l| l.acked.len()).sum();
    row.figure("restarts", restarted.as_ref().map_or(0, |r| *r));
    row.figure("acked", acked);
    row.figure("writes_per_s", format!("{:.0}", acked as f64 / elapsed));
    row.figure("unanswered", logs.iter().map(|l| l.unanswered).sum::<u64>());
    row.figure("connects", logs.iter().map(|l| l.connects).sum::<u64>());
    let errors: u64 = logs.iter().map(|l| l.errors).sum();
    row.figure("error_answers", errors);
    restarted?;
    let mut conn = Conn::connect(addr, 1, IO_TIMEOUT).context("connecting to read back")?;
    let (mut lost, mut corrupted) = (0, 0);
    {
        let mut reader = server_reader(&mut conn);
        for (c, log) in logs.iter().enumerate() {
            let (l, k) = verify(&mut reader, 9, c, log)?;
            lost += l;
            corrupted += k;
        }
    }
    drop(conn);
    row.figure("lost", lost);
    row.figure("corrupted", corrupted);
    let stop = final_stop(&mut server)?;
    row.figure("final_stop", &stop);
    check_durable(row, acked, lost, corrupted);
    row.check(errors == 0, || {
        format!(
            "{errors} error answers, first: {}",
            logs.iter()
                .find_map(|l| l.first_error.clone())
                .unwrap_or_default()
        )
    });
    row.check(stop == "exit 0", || {
        format!("the last server stopped with {stop} on SIGTERM")
    });
    Ok(())
}

/// SIGTERM and the exit: `exit 0`, or what else.
fn final_stop(server: &mut ServerProc) -> Result<String> {
    match server.stop(STOP_BOUND) {
        Ok(st) => Ok(describe_status(&st)),
        Err(e) => Ok(format!("{e:#}")),
    }
}

/// A sigterm writer: `DEPTH` writes in flight, until the server closes the connection.
fn sigterm_writer(
    addr: SocketAddr,
    cycle: usize,
    c: usize,
    termed: &AtomicBool,
    deadline: Instant,
) -> WriterLog {
    let mut log = WriterLog {
        path: format!("t{cycle}-w{c}.dat"),
        ..WriterLog::default()
    };
    let salt = 100 + cycle as u64;
    let mut conn = loop {
        match Conn::connect(addr, 200 + c as u64, IO_TIMEOUT) {
            Ok(conn) => break conn,
            Err(_) if !termed.load(Ordering::Relaxed) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(_) => return log,
        }
    };
    log.connects = 1;
    match conn.call(create(&log.path)).map(Answer::from) {
        Ok(Answer::Err(e, m)) => {
            log.error(format!("create: errno {e} ({m})"));
            return log;
        }
        Ok(_) => {}
        Err(_) => return log,
    }
    let mut outstanding: HashMap<u64, u64> = HashMap::new();
    let mut seq = 0u64;
    while Instant::now() < deadline {
        while outstanding.len() < DEPTH {
            let data = pattern(key(salt, c, seq), RECORD);
            match conn.send(write(&log.path, seq * RECORD as u64, data)) {
                Ok(tag) => {
                    outstanding.insert(tag, seq);
                    seq += 1;
                }
                Err(_) => break,
            }
        }
        let Ok((tag, resp)) = conn.recv() else { break };
        let after = termed.load(Ordering::Relaxed);
        match (outstanding.remove(&tag), Answer::from(resp)) {
            (Some(s), Answer::Written(n)) if n as usize == RECORD => {
                log.acked.push(s);
                if after {
                    log.after_term += 1;
                }
            }
            (Some(s), other) => {
                // Refused writes after SIGTERM are answers too; before, they are errors.
                if !after {
                    log.error(format!("write of record {s}: {other:?}"));
                }
            }
            (None, other) => log.error(format!("answer with unknown tag {tag}: {other:?}")),
        }
    }
    log.unanswered = outstanding.len() as u64;
    log
}

/// `sigterm`.
pub(crate) fn sigterm(ctx: &Ctx, row: &mut Row) -> Result<()> {
    let s = &ctx.sizes;
    let (lo, hi) = (Duration::from_millis(300), Duration::from_millis(1000));
    row.param("cycles", s.sigterms);
    row.param("writers", s.writers);
    row.param("in_flight_per_writer", DEPTH);
    row.param("term_after_ms", ms_range(lo, hi));
    let spec = ctx.fresh_spec("sigterm")?;
    let deadline = Instant::now() + ctx.bound();
    let mut rng = Rng::new(ctx.seed ^ 0x7e4);
    let mut exits = Vec::new();
    let (mut acked, mut after_term, mut unanswered, mut errors) = (0usize, 0u64, 0u64, 0u64);
    let (mut lost, mut corrupted) = (0u64, 0u64);
    let mut first_error = None;
    let max_drain_ms = AtomicU64::new(0);
    for cycle in 0..s.sigterms {
        ctx.check()?;
        let mut server = spec.start("127.0.0.1:0", cycle)?;
        let addr = server.addr;
        let termed = AtomicBool::new(false);
        let (exit, logs) = std::thread::scope(|sc| {
            let writers: Vec<_> = (0..s.writers)
                .map(|c| {
                    let termed = &termed;
                    sc.spawn(move || sigterm_writer(addr, cycle, c, termed, deadline))
                })
                .collect();
            let exit = (|| -> Result<String> {
                ctx.sleep(rng.duration(lo, hi), deadline)?;
                termed.store(true, Ordering::Relaxed);
                let t = Instant::now();
                server.sigterm();
                let st = server.wait_exit(STOP_BOUND)?;
                max_drain_ms.fetch_max(t.elapsed().as_millis() as u64, Ordering::Relaxed);
                Ok(st.map_or_else(
                    || format!("no exit within {} s (killed)", STOP_BOUND.as_secs()),
                    |st| describe_status(&st),
                ))
            })();
            if exit.is_err() {
                server.sigterm();
                let _ = server.wait_exit(STOP_BOUND);
            }
            let logs: Vec<WriterLog> = writers
                .into_iter()
                .map(|h| h.join().unwrap_or_default())
                .collect();
            (exit, logs)
        });
        exits.push(exit?);
        let mut reader = disk_reader(&spec.root);
        for (c, log) in logs.iter().enumerate() {
            let (l, k) = verify(&mut reader, 100 + cycle as u64, c, log)?;
            lost += l;
            corrupted += k;
            acked += log.acked.len();
            after_term += log.after_term;
            unanswered += log.unanswered;
            errors += log.errors;
            if first_error.is_none() {
                first_error.clone_from(&log.first_error);
            }
        }
    }
    let clean = exits.iter().filter(|e| *e == "exit 0").count();
    row.figure("clean_exits", format!("{clean}/{}", exits.len()));
    row.figure("max_drain_ms", max_drain_ms.load(Ordering::Relaxed));
    row.figure("acked", acked);
    row.figure("acked_after_term", after_term);
    row.figure("unanswered", unanswered);
    row.figure("error_answers", errors);
    row.figure("lost", lost);
    row.figure("corrupted", corrupted);
    row.check(clean == exits.len(), || {
        format!("exits on SIGTERM: {}", exits.join(", "))
    });
    check_durable(row, acked, lost, corrupted);
    row.check(errors == 0, || {
        format!(
            "{errors} error answers before SIGTERM, first: {}",
            first_error.unwrap_or_default()
        )
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verify_tells_lost_from_corrupted() {
        let log = WriterLog {
            path: "f".into(),
            acked: vec![0, 1, 2, 3],
            ..WriterLog::default()
        };
        // Record 0 right, 1 zeros (lost), 2 another record's bytes (corrupted), 3 past the end.
        let mut file = pattern(key(5, 0, 0), RECORD);
        file.extend(vec![0u8; RECORD]);
        file.extend(pattern(key(5, 1, 2), RECORD));
        let mut reader = |_: &str, off: u64, len: u32| -> Result<Vec<u8>> {
            let a = (off as usize).min(file.len());
            let b = (a + len as usize).min(file.len());
            Ok(file[a..b].to_vec())
        };
        assert_eq!(verify(&mut reader, 5, 0, &log).unwrap(), (2, 1));
    }

    #[test]
    fn records_of_writers_and_scenarios_differ() {
        assert_ne!(key(9, 0, 1), key(9, 1, 1));
        assert_ne!(key(9, 0, 1), key(100, 0, 1));
    }
}
