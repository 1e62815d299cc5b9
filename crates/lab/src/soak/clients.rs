//! `clients`: many clients × many mixed requests, checked against a model.
//!
//! Each client has its own file (`OWN_BLOCKS` blocks of `BLOCK` bytes), a stripe of the shared
//! file that only it writes, and a common region of the shared file that every client writes.
//! It keeps up to `DEPTH` requests in flight, a mix of writes, reads and fsyncs on the three, and
//! a model: a copy of what each acknowledged write put where in its own file and stripe.
//!
//! The server may answer a connection's requests in any order, so a client never sends a write
//! that overlaps a request in flight, nor a read that overlaps a write in flight: then a read must
//! return the model's bytes (its length may be anywhere between what acknowledged writes made
//! the file and the length asked). Reads of the common region are checked for success only.
//!
//! Counted: requests *lost* (never answered), *duplicated* (an answer for a tag not in flight),
//! *wrong* (an error answer, a short write, a read not matching the model), and at the end
//! blocks of the model missing from the files (*final_lost*, read as zeros) or different
//! (*final_wrong*).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use iosets_proto::Request;

use super::report::Row;
use super::Ctx;
use crate::rig::child::describe_status;
use crate::rig::wire::{create, read, write, Answer, Conn, Rng};

/// Bytes per block: writes and reads cover whole blocks.
const BLOCK: u64 = 1024;
/// Blocks in a client's own file.
const OWN_BLOCKS: u64 = 64;
/// Blocks in a client's stripe of the shared file.
const STRIPE_BLOCKS: u64 = 16;
/// Blocks in the common region of the shared file (after every stripe).
const COMMON_BLOCKS: u64 = 16;
/// Requests a client keeps in flight.
const DEPTH: usize = 4;
/// Blocks per request, at most.
const MAX_RUN: u64 = 4;
/// The shared file.
const SHARED: &str = "shared.dat";
/// How long a socket operation may wait.
const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// Where a request goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Area {
    /// The client's own file.
    Own,
    /// Its stripe of the shared file.
    Stripe,
    /// The common region of the shared file (not modelled).
    Common,
}

/// What a request was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Write,
    Read,
    Fsync,
}

/// A request in flight.
#[derive(Debug)]
struct Pending {
    kind: Kind,
    area: Area,
    /// Blocks `[first, end)` of the area.
    first: u64,
    end: u64,
    /// A write's bytes.
    data: Vec<u8>,
    /// A read's area end acknowledged when it was sent (what it must at least see: writes
    /// acknowledged later, elsewhere in the file, may be served after it).
    acked_end: u64,
}

/// A client's model of one area: the bytes its acknowledged writes put there.
#[derive(Debug)]
struct Model {
    /// The area's path.
    path: String,
    /// The area's first byte in its file.
    base: u64,
    /// Its bytes (zeros where nothing was acknowledged).
    bytes: Vec<u8>,
    /// The end, in the file, of the furthest acknowledged write (the file is at least this long).
    acked_end: u64,
}

impl Model {
    fn new(path: String, base: u64, blocks: u64) -> Model {
        Model {
            path,
            base,
            bytes: vec![0; (blocks * BLOCK) as usize],
            acked_end: 0,
        }
    }

    fn apply(&mut self, first: u64, data: &[u8]) {
        let a = (first * BLOCK) as usize;
        self.bytes[a..a + data.len()].copy_from_slice(data);
        self.acked_end = self.acked_end.max(self.base + a as u64 + data.len() as u64);
    }

    /// Whether `got`, read from blocks `[first, end)` by a read sent when the area's
    /// acknowledged end was `acked_end`, is what the model allows.
    fn matches(&self, first: u64, end: u64, got: &[u8], acked_end: u64) -> bool {
        let a = first * BLOCK;
        let b = end * BLOCK;
        let least = (acked_end.min(self.base + b)).saturating_sub(self.base + a);
        let n = got.len() as u64;
        n >= least && n <= b - a && got[..] == self.bytes[a as usize..(a + n) as usize]
    }
}

/// What one client counted.
#[derive(Debug, Default)]
struct Tally {
    sent: u64,
    answered: u64,
    lost: u64,
    duplicated: u64,
    wrong: u64,
    first_wrong: Option<String>,
    final_lost: u64,
    final_wrong: u64,
}

impl Tally {
    fn wrong(&mut self, what: String) {
        self.wrong += 1;
        self.first_wrong.get_or_insert(what);
    }

    fn add(&mut self, o: &Tally) {
        self.sent += o.sent;
        self.answered += o.answered;
        self.lost += o.lost;
        self.duplicated += o.duplicated;
        self.wrong += o.wrong;
        self.final_lost += o.final_lost;
        self.final_wrong += o.final_wrong;
        if self.first_wrong.is_none() {
            self.first_wrong.clone_from(&o.first_wrong);
        }
    }
}

/// One client's run.
struct Client {
    c: u64,
    conn: Conn,
    rng: Rng,
    own: Model,
    stripe: Model,
    in_flight: HashMap<u64, Pending>,
    tally: Tally,
}

impl Client {
    fn model(&self, area: Area) -> Option<&Model> {
        match area {
            Area::Own => Some(&self.own),
            Area::Stripe => Some(&self.stripe),
            Area::Common => None,
        }
    }

    fn path_of(&self, area: Area, clients: u64) -> (String, u64, u64) {
        match area {
            Area::Own => (self.own.path.clone(), 0, OWN_BLOCKS),
            Area::Stripe => (SHARED.into(), self.stripe.base, STRIPE_BLOCKS),
            Area::Common => (
                SHARED.into(),
                clients * STRIPE_BLOCKS * BLOCK,
                COMMON_BLOCKS,
            ),
        }
    }

    /// Whether a `kind` request on blocks `[first, end)` of `area` may be sent now.
    fn free(&self, kind: Kind, area: Area, first: u64, end: u64) -> bool {
        self.in_flight.values().all(|p| {
            p.area != area
                || p.end <= first
                || end <= p.first
                || (p.kind != Kind::Write && kind != Kind::Write)
        })
    }

    /// Picks and sends a request, or returns false when none fits among those in flight.
    fn send_one(&mut self, clients: u64) -> Result<bool> {
        for _ in 0..8 {
            let r = self.rng.below(100);
            let (kind, area) = match r {
                0..40 => (Kind::Write, Area::Own),
                40..65 => (Kind::Read, Area::Own),
                65..80 => (Kind::Write, Area::Stripe),
                80..90 => (Kind::Read, Area::Stripe),
                90..93 => (Kind::Fsync, Area::Own),
                93..95 => (Kind::Fsync, Area::Stripe),
                95..98 => (Kind::Write, Area::Common),
                _ => (Kind::Read, Area::Common),
            };
            let (path, base, blocks) = self.path_of(area, clients);
            let (first, end) = if kind == Kind::Fsync {
                (0, 0)
            } else {
                let first = self.rng.below(blocks);
                (first, (first + 1 + self.rng.below(MAX_RUN)).min(blocks))
            };
            if !self.free(kind, area, first, end) {
                continue;
            }
            let offset = base + first * BLOCK;
            let len = (end - first) * BLOCK;
            let (req, data) = match kind {
                Kind::Write => {
                    let mut data = vec![0u8; len as usize];
                    for chunk in data.chunks_mut(8) {
                        let v = self.rng.next().to_le_bytes();
                        chunk.copy_from_slice(&v[..chunk.len()]);
                    }
                    // Never a zero first byte per block: a lost block reads as zeros.
                    for b in data.chunks_mut(BLOCK as usize) {
                        b[0] |= 1;
                    }
                    (write(&path, offset, data.clone()), data)
                }
                Kind::Read => (read(&path, offset, len as u32), Vec::new()),
                Kind::Fsync => (Request::Fsync { path }, Vec::new()),
            };
            let acked_end = self.model(area).map_or(0, |m| m.acked_end);
            let tag = self.conn.send(req).context("sending")?;
            self.tally.sent += 1;
            self.in_flight.insert(
                tag,
                Pending {
                    kind,
                    area,
                    first,
                    end,
                    data,
                    acked_end,
                },
            );
            return Ok(true);
        }
        Ok(false)
    }

    /// Receives one answer and checks it.
    fn recv_one(&mut self) -> Result<()> {
        let (tag, resp) = self.conn.recv().context("receiving")?;
        let Some(p) = self.in_flight.remove(&tag) else {
            self.tally.duplicated += 1;
            return Ok(());
        };
        self.tally.answered += 1;
        let c = self.c;
        match (p.kind, Answer::from(resp)) {
            (Kind::Write, Answer::Written(n)) if n as usize == p.data.len() => match p.area {
                Area::Own => self.own.apply(p.first, &p.data),
                Area::Stripe => self.stripe.apply(p.first, &p.data),
                Area::Common => {}
            },
            (Kind::Read, Answer::Data(d)) => {
                if let Some(m) = self.model(p.area) {
                    if !m.matches(p.first, p.end, &d, p.acked_end) {
                        self.tally.wrong(format!(
                            "client {c}: read of {} blocks {}..{} ({:?}) returned {} bytes not \
                             matching the model",
                            m.path,
                            p.first,
                            p.end,
                            p.area,
                            d.len()
                        ));
                    }
                } else if d.len() as u64 > (p.end - p.first) * BLOCK {
                    self.tally.wrong(format!(
                        "client {c}: read returned {} bytes, more than asked",
                        d.len()
                    ));
                }
            }
            (Kind::Fsync, Answer::Ok) => {}
            (k, a) => self
                .tally
                .wrong(format!("client {c}: {k:?} on {:?} answered {a:?}", p.area)),
        }
        Ok(())
    }

    /// Reads back the own file and the stripe and counts blocks differing from the model.
    fn final_check(&mut self) -> Result<()> {
        for area in [Area::Own, Area::Stripe] {
            let m = self.model(area).expect("modelled");
            let (path, base, len) = (m.path.clone(), m.base, m.bytes.len());
            let got = match Answer::from(self.conn.call(read(&path, base, len as u32))?) {
                Answer::Data(d) => d.to_vec(),
                a => anyhow::bail!("reading back {path}: {a:?}"),
            };
            let m = self.model(area).expect("modelled");
            let mut lost = 0;
            let mut wrong = 0;
            for (i, want) in m.bytes.chunks(BLOCK as usize).enumerate() {
                let a = i * BLOCK as usize;
                let g = got
                    .get(a..(a + BLOCK as usize).min(got.len()))
                    .unwrap_or(&[]);
                if g == want || (g.is_empty() && want.iter().all(|&b| b == 0)) {
                    continue;
                }
                if g.iter().all(|&b| b == 0) {
                    lost += 1;
                } else {
                    wrong += 1;
                }
            }
            self.tally.final_lost += lost;
            self.tally.final_wrong += wrong;
        }
        Ok(())
    }
}

/// One client: `requests` requests, then the drain and the final check.
fn client(
    addr: SocketAddr,
    c: u64,
    clients: u64,
    requests: u64,
    seed: u64,
    deadline: Instant,
) -> Tally {
    let conn = match Conn::connect(addr, 1000 + c, IO_TIMEOUT) {
        Ok(conn) => conn,
        Err(e) => {
            let mut t = Tally::default();
            t.wrong(format!("client {c}: connecting: {e}"));
            return t;
        }
    };
    let mut cl = Client {
        c,
        conn,
        rng: Rng::new(seed ^ (c << 20) ^ 0xc1),
        own: Model::new(format!("c{c}.dat"), 0, OWN_BLOCKS),
        stripe: Model::new(SHARED.into(), c * STRIPE_BLOCKS * BLOCK, STRIPE_BLOCKS),
        in_flight: HashMap::new(),
        tally: Tally::default(),
    };
    let r = (|| -> Result<()> {
        for path in [cl.own.path.clone(), SHARED.to_string()] {
            if let Answer::Err(e, m) = Answer::from(cl.conn.call(create(&path))?) {
                anyhow::bail!("creating {path}: errno {e} ({m})");
            }
        }
        while cl.tally.sent < requests {
            if Instant::now() > deadline {
                anyhow::bail!("the time bound passed after {} requests", cl.tally.sent);
            }
            if cl.in_flight.len() >= DEPTH || !cl.send_one(clients)? {
                cl.recv_one()?;
            }
        }
        while !cl.in_flight.is_empty() {
            cl.recv_one()?;
        }
        cl.final_check()
    })();
    if let Err(e) = r {
        cl.tally.lost += cl.in_flight.len() as u64;
        cl.tally.wrong(format!("client {c}: {e:#}"));
    }
    cl.tally
}

/// `clients`.
pub(crate) fn run(ctx: &Ctx, row: &mut Row) -> Result<()> {
    let s = &ctx.sizes;
    row.param("clients", s.clients);
    row.param("requests_per_client", s.requests);
    row.param("in_flight_per_client", DEPTH);
    row.param("mix", "write/read/fsync own+stripe+common 55/35/5/5");
    let mut server = ctx.fresh_spec("clients")?.start("127.0.0.1:0", 0)?;
    let addr = server.addr;
    let deadline = Instant::now() + ctx.bound();
    let t0 = Instant::now();
    let clients = s.clients as u64;
    let tallies: Vec<Tally> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..clients)
            .map(|c| {
                let (requests, seed) = (s.requests as u64, ctx.seed);
                sc.spawn(move || client(addr, c, clients, requests, seed, deadline))
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let elapsed = t0.elapsed().as_secs_f64();
    let mut t = Tally::default();
    for x in &tallies {
        t.add(x);
    }
    let stop = match server.stop(Duration::from_secs(30)) {
        Ok(st) => describe_status(&st),
        Err(e) => format!("{e:#}"),
    };
    let expected = clients * s.requests as u64;
    row.figure("sent", t.sent);
    row.figure("answered", t.answered);
    row.figure(
        "requests_per_s",
        format!("{:.0}", t.answered as f64 / elapsed),
    );
    row.figure("lost", t.lost);
    row.figure("duplicated", t.duplicated);
    row.figure("wrong", t.wrong);
    row.figure("final_lost_blocks", t.final_lost);
    row.figure("final_wrong_blocks", t.final_wrong);
    row.figure("stop", &stop);
    row.check(t.sent == expected && t.answered == expected, || {
        format!(
            "{} of {expected} requests sent, {} answered",
            t.sent, t.answered
        )
    });
    row.check(t.lost == 0, || format!("{} requests lost", t.lost));
    row.check(t.duplicated == 0, || {
        format!("{} duplicated answers", t.duplicated)
    });
    row.check(t.wrong == 0, || {
        format!(
            "{} wrong answers, first: {}",
            t.wrong,
            t.first_wrong.clone().unwrap_or_default()
        )
    });
    row.check(t.final_lost == 0 && t.final_wrong == 0, || {
        format!(
            "read back: {} blocks lost, {} wrong",
            t.final_lost, t.final_wrong
        )
    });
    row.check(stop == "exit 0", || {
        format!("the server stopped with {stop} on SIGTERM")
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_allows_short_reads_only_past_acknowledged_ends() {
        let mut m = Model::new("f".into(), 0, 4);
        let data = vec![7u8; BLOCK as usize];
        m.apply(1, &data);
        // The file is 2 blocks long: a read of blocks 0..4 returns 2 to 4 blocks.
        let mut two = vec![0u8; BLOCK as usize];
        two.extend(&data);
        assert!(m.matches(0, 4, &two, m.acked_end));
        let mut three = two.clone();
        three.extend(vec![0u8; BLOCK as usize]);
        assert!(m.matches(0, 4, &three, m.acked_end));
        assert!(
            !m.matches(0, 4, &two[..BLOCK as usize], m.acked_end),
            "the acknowledged block is missing"
        );
        let mut bad = two.clone();
        bad[BLOCK as usize] = 8;
        assert!(!m.matches(0, 4, &bad, m.acked_end));
        assert!(
            m.matches(2, 4, &[], m.acked_end),
            "nothing acknowledged there: EOF is fine"
        );
    }

    #[test]
    fn a_stripe_model_counts_from_its_base() {
        let mut m = Model::new(SHARED.into(), 10 * BLOCK, 2);
        m.apply(0, &vec![1u8; BLOCK as usize]);
        assert_eq!(m.acked_end, 11 * BLOCK);
        assert!(
            !m.matches(0, 1, &[], m.acked_end),
            "the acknowledged block must be read"
        );
        assert!(m.matches(1, 2, &[], m.acked_end));
    }

    #[test]
    fn a_read_is_judged_by_the_writes_acknowledged_when_it_was_sent() {
        // Regression (soak run, 2 wrong answers in 640,000): a read of blocks 1..2 sent while
        // the file was one block long may see EOF, even if a write of block 3 (not overlapping
        // it, so in flight at once) is acknowledged before the read's answer arrives.
        let mut m = Model::new("f".into(), 0, 4);
        m.apply(0, &vec![1u8; BLOCK as usize]);
        let at_send = m.acked_end;
        m.apply(3, &vec![2u8; BLOCK as usize]);
        assert!(m.matches(1, 2, &[], at_send));
        assert!(
            !m.matches(1, 2, &[], m.acked_end),
            "a read sent now must see the hole"
        );
    }
}
