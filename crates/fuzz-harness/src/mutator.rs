//! A small deterministic mutation engine and the loop that drives it: the stable-toolchain
//! fuzzer of the wire decoder, the trace parsers and the quota rule parser.
//!
//! # What it is
//! [`run`] replays every seed of a corpus through a check, then feeds it mutants of the seeds
//! (bit flips, byte sets and arithmetic, inserts, deletes, duplicated ranges, splices of two
//! inputs, little-endian length-field edits, truncation, dictionary tokens), stacked 1 to 16 at a
//! time, from a seeded generator: the same seed gives the same inputs. Mutants that the parser
//! accepted are kept in a small pool and mutated further, the one feedback a fuzzer without
//! coverage instrumentation has. The first panic stops the run; the input is written to a file
//! so that it can be replayed (and added to the corpus as a regression).
//!
//! # What it is not
//! Not libFuzzer: no coverage guidance, so it finds less per input than `cargo fuzz` (see
//! `fuzz/README.md`), but it runs on the stable toolchain, in the normal test command and at
//! length from `scripts/fuzz.sh`.
//!
//! # Why it has no dependencies
//! It is a module of `iosets-fuzz-harness`, which three crates' integration tests and the
//! `cargo fuzz` crate depend on; without dependencies of its own it adds nothing to their builds.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

/// A SplitMix64 generator: tiny, fast, and good enough to pick mutations.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator whose sequence is fixed by `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n`; `n` must be positive.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// True once in `n` times on average.
    pub fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }
}

/// Byte values that often sit on a boundary.
const INTERESTING_U8: [u8; 9] = [0, 1, 0x7f, 0x80, 0xff, b'0', b'-', b'\n', b' '];

/// Applies 1 to 16 stacked mutations to `base` (most often 1 to 4), taking spliced bytes from
/// `other` and tokens from `dict`; the result is at most `max_len` bytes.
pub fn mutate(rng: &mut Rng, base: &[u8], other: &[u8], dict: &[&[u8]], max_len: usize) -> Vec<u8> {
    let mut v = base.to_vec();
    let rounds = if rng.one_in(8) {
        1 + rng.below(16)
    } else {
        1 + rng.below(4)
    };
    for _ in 0..rounds {
        mutate_once(rng, &mut v, other, dict);
    }
    v.truncate(max_len);
    v
}

/// One mutation of `v`, in place.
fn mutate_once(rng: &mut Rng, v: &mut Vec<u8>, other: &[u8], dict: &[&[u8]]) {
    // An empty input can only grow.
    if v.is_empty() {
        match rng.below(3) {
            0 if !other.is_empty() => v.extend_from_slice(&other[..1 + rng.below(other.len())]),
            1 if !dict.is_empty() => v.extend_from_slice(dict[rng.below(dict.len())]),
            _ => v.push(rng.next_u64() as u8),
        }
        return;
    }
    let n = v.len();
    match rng.below(14) {
        // Flip one bit.
        0 => {
            let i = rng.below(n);
            v[i] ^= 1 << rng.below(8);
        }
        // Set a byte to a boundary value.
        1 => {
            let i = rng.below(n);
            v[i] = INTERESTING_U8[rng.below(INTERESTING_U8.len())];
        }
        // Set a byte to a random value.
        2 => {
            let i = rng.below(n);
            v[i] = rng.next_u64() as u8;
        }
        // Add or subtract a little (digits stay digits more often than not).
        3 => {
            let i = rng.below(n);
            let d = 1 + rng.below(16) as u8;
            v[i] = if rng.one_in(2) {
                v[i].wrapping_add(d)
            } else {
                v[i].wrapping_sub(d)
            };
        }
        // Insert a random byte.
        4 => {
            let i = rng.below(n + 1);
            v.insert(i, rng.next_u64() as u8);
        }
        // Delete a byte.
        5 => {
            v.remove(rng.below(n));
        }
        // Delete a range.
        6 => {
            let i = rng.below(n);
            let len = 1 + rng.below((n - i).min(64));
            v.drain(i..i + len);
        }
        // Duplicate a range in place (repeated records, repeated fields).
        7 => {
            let i = rng.below(n);
            let len = 1 + rng.below((n - i).min(64));
            let copy = v[i..i + len].to_vec();
            let at = rng.below(n + 1);
            v.splice(at..at, copy);
        }
        // Splice: this input's head with the other's tail.
        8 if !other.is_empty() => {
            let cut = rng.below(n + 1);
            let from = rng.below(other.len());
            v.truncate(cut);
            v.extend_from_slice(&other[from..]);
        }
        // Overwrite a range with the other's bytes.
        9 if !other.is_empty() => {
            let from = rng.below(other.len());
            let len = 1 + rng.below((other.len() - from).min(32));
            let at = rng.below(n);
            let end = (at + len).min(n);
            v[at..end].copy_from_slice(&other[from..from + (end - at)]);
        }
        // Edit a little-endian length field.
        10 => length_field(rng, v),
        // Truncate.
        11 => v.truncate(rng.below(n)),
        // Insert a dictionary token.
        12 if !dict.is_empty() => {
            let t = dict[rng.below(dict.len())];
            let at = rng.below(n + 1);
            v.splice(at..at, t.iter().copied());
        }
        // Overwrite with a dictionary token.
        13 if !dict.is_empty() => {
            let t = dict[rng.below(dict.len())];
            let at = rng.below(n);
            let end = (at + t.len()).min(n);
            v[at..end].copy_from_slice(&t[..end - at]);
        }
        _ => {
            let i = rng.below(n);
            v[i] ^= 0xff;
        }
    }
}

/// Rewrites a `u16` or `u32` little-endian field (the frame prefix at offset 0 a quarter of the
/// time) with a value near a boundary: 0, 1, the maximum, the old value ± 1 or doubled, or the
/// number of bytes that follow it (± 1): what a length field would hold if it were right, almost
/// right, or hostile.
fn length_field(rng: &mut Rng, v: &mut [u8]) {
    let width = if rng.one_in(2) { 2 } else { 4 };
    if v.len() < width {
        return;
    }
    let at = if rng.one_in(4) {
        0
    } else {
        rng.below(v.len() - width + 1)
    };
    let mut old = [0u8; 8];
    old[..width].copy_from_slice(&v[at..at + width]);
    let old = u64::from_le_bytes(old);
    let max = if width == 2 {
        u64::from(u16::MAX)
    } else {
        u64::from(u32::MAX)
    };
    let rest = (v.len() - at - width) as u64;
    let new = match rng.below(9) {
        0 => 0,
        1 => 1,
        2 => max,
        3 => old.wrapping_add(1),
        4 => old.wrapping_sub(1),
        5 => old.wrapping_mul(2),
        6 => rest,
        7 => rest + 1,
        _ => rest.wrapping_sub(1),
    } & max;
    v[at..at + width].copy_from_slice(&new.to_le_bytes()[..width]);
}

/// What a run did.
#[derive(Clone, Debug)]
pub struct Report {
    /// The target's name.
    pub target: String,
    /// Inputs fed to the check (corpus replays included).
    pub inputs: u64,
    /// Inputs the check accepted (the parser returned a value, not an error).
    pub accepted: u64,
    /// Seeds in the corpus.
    pub corpus: usize,
    /// The input that panicked, written to a file, if one did (the run stops there).
    pub panic: Option<PathBuf>,
}

impl Report {
    /// One line for `scripts/fuzz.sh` to collect.
    pub fn summary(&self) -> String {
        format!(
            "fuzz-summary target={} inputs={} accepted={} panics={} corpus={}",
            self.target,
            self.inputs,
            self.accepted,
            u8::from(self.panic.is_some()),
            self.corpus
        )
    }
}

/// A fuzz target as its crate's tests run it: what a [`Setup`] takes besides the run's size,
/// seed and crash directory.
#[derive(Clone, Copy, Debug)]
pub struct Target {
    /// The target's name: its seed corpus is `fuzz/corpus/<name>` ([`corpus_dir`]).
    pub name: &'static str,
    /// Tokens worth inserting (field names, separators, numbers at a boundary).
    pub dict: &'static [&'static [u8]],
    /// The longest input generated, bytes.
    pub max_len: usize,
    /// The check [`run`] feeds every input.
    pub check: fn(&[u8]) -> bool,
}

impl Target {
    /// The target's seed corpus directory, `fuzz/corpus/<name>` of the repository.
    pub fn corpus_dir(&self) -> PathBuf {
        corpus_dir(env!("CARGO_MANIFEST_DIR"), self.name)
    }

    /// The target's seeds ([`read_corpus`]).
    ///
    /// # Panics
    /// If the corpus cannot be read.
    pub fn corpus(&self) -> Vec<Vec<u8>> {
        read_corpus(&self.corpus_dir())
            .unwrap_or_else(|e| panic!("reading the {} corpus: {e}", self.name))
    }

    /// [`run_on_corpus`]: `inputs` inputs made from `seed`, an input that panics saved in
    /// `crash_dir`.
    pub fn fuzz(&self, crash_dir: &Path, inputs: u64, seed: u64) -> Report {
        let setup = Setup {
            target: self.name,
            inputs,
            seed,
            dict: self.dict,
            max_len: self.max_len,
            crash_dir,
        };
        run_on_corpus(setup, env!("CARGO_MANIFEST_DIR"), self.check)
    }

    /// The test command's run: `inputs` inputs made from seed 1, an input that panics saved in
    /// `crash_dir`.
    ///
    /// # Panics
    /// Unless the run is clean ([`assert_clean_run`]).
    pub fn short_run(&self, crash_dir: &Path, inputs: u64) {
        assert_clean_run(&self.fuzz(crash_dir, inputs, 1), inputs);
    }

    /// Asserts that each of `selectors` (a first byte, and the name of the parser it selects)
    /// starts at least two seeds of the corpus that the check reads.
    ///
    /// # Panics
    /// At the first selector with fewer, naming it.
    pub fn assert_every_selector_read(&self, selectors: &[(u8, &str)]) {
        let corpus = self.corpus();
        for &(sel, name) in selectors {
            let read = corpus
                .iter()
                .filter(|s| s.first() == Some(&sel) && (self.check)(s))
                .count();
            assert!(read >= 2, "{} {name}: {read} seeds read", self.name);
        }
    }

    /// Writes `seeds` (file name, content) into the corpus directory, made if missing, when
    /// `IOSETS_FUZZ_WRITE_CORPUS` is set (see `fuzz/README.md`); does nothing otherwise.
    ///
    /// # Panics
    /// If a file cannot be written.
    pub fn write_seeds(&self, seeds: impl IntoIterator<Item = (String, Vec<u8>)>) {
        if std::env::var_os("IOSETS_FUZZ_WRITE_CORPUS").is_none() {
            return;
        }
        let dir = self.corpus_dir();
        std::fs::create_dir_all(&dir).unwrap();
        for (name, bytes) in seeds {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
    }

    /// The long run `scripts/fuzz.sh` asks for: [`inputs_from_env`] inputs (10 M by default) made
    /// from [`seed_from_env`] (2 by default), an input that panics saved in `crash_dir`.
    ///
    /// # Panics
    /// If an input panicked, with the run's summary.
    pub fn long_run(&self, crash_dir: &Path) {
        let inputs = inputs_from_env(10_000_000);
        let seed = seed_from_env(2);
        let report = self.fuzz(crash_dir, inputs, seed);
        assert_eq!(report.panic, None, "{}", report.summary());
    }
}

/// How a run is set up.
#[derive(Clone, Copy, Debug)]
pub struct Setup<'a> {
    /// The target's name, for the report and the crash file.
    pub target: &'a str,
    /// How many inputs in all (at least the corpus replays).
    pub inputs: u64,
    /// The generator's seed.
    pub seed: u64,
    /// Tokens worth inserting (field names, separators, numbers at a boundary).
    pub dict: &'a [&'a [u8]],
    /// The longest input generated, bytes.
    pub max_len: usize,
    /// Where to write an input that panicked.
    pub crash_dir: &'a Path,
}

/// Feeds `check` every seed of `corpus`, then mutants of them until `setup.inputs` inputs in all.
/// `check` returns whether the parser accepted the input, and panics (the property failed, or
/// the parser itself panicked) on a bug. Stops at the first panic and reports the input.
pub fn run(setup: Setup<'_>, corpus: &[Vec<u8>], check: impl Fn(&[u8]) -> bool) -> Report {
    let mut report = Report {
        target: setup.target.to_owned(),
        inputs: 0,
        accepted: 0,
        corpus: corpus.len(),
        panic: None,
    };
    let mut rng = Rng::new(setup.seed);
    // Accepted mutants, mutated further: a crude stand-in for coverage feedback.
    let mut pool: Vec<Vec<u8>> = Vec::new();
    const POOL: usize = 256;
    let empty = Vec::new();
    let mut i = 0u64;
    while i < setup.inputs {
        let input = if (i as usize) < corpus.len() {
            corpus[i as usize].clone()
        } else {
            let pick = |rng: &mut Rng| -> &Vec<u8> {
                if !pool.is_empty() && rng.one_in(3) {
                    &pool[rng.below(pool.len())]
                } else if corpus.is_empty() {
                    &empty
                } else {
                    &corpus[rng.below(corpus.len())]
                }
            };
            let base = pick(&mut rng);
            let other = pick(&mut rng);
            mutate(&mut rng, base, other, setup.dict, setup.max_len)
        };
        i += 1;
        report.inputs += 1;
        match catch_unwind(AssertUnwindSafe(|| check(&input))) {
            Ok(true) => {
                report.accepted += 1;
                if pool.len() < POOL {
                    pool.push(input);
                } else {
                    let slot = rng.below(POOL);
                    pool[slot] = input;
                }
            }
            Ok(false) => {}
            Err(_) => {
                report.panic = Some(save_crash(setup.crash_dir, setup.target, &input));
                break;
            }
        }
    }
    report
}

/// Writes `input` to `dir/crash-<target>-<fnv1a64 of the input>` and returns the path.
fn save_crash(dir: &Path, target: &str, input: &[u8]) -> PathBuf {
    let hash = input.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let path = dir.join(format!("crash-{target}-{hash:016x}"));
    if let Err(e) = std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&path, input)) {
        eprintln!(
            "could not save the crashing input to {}: {e}",
            path.display()
        );
    }
    path
}

/// The seed corpus directory of `target` (`fuzz/corpus/<target>` of the repository), from the
/// manifest directory of a crate of `crates/`.
pub fn corpus_dir(manifest_dir: &str, target: &str) -> PathBuf {
    Path::new(manifest_dir)
        .join("../../fuzz/corpus")
        .join(target)
}

/// [`run`] over the seed corpus of `setup.target` ([`corpus_dir`]), its summary printed (the
/// line `scripts/fuzz.sh` reads).
///
/// # Panics
/// If the corpus cannot be read.
pub fn run_on_corpus(
    setup: Setup<'_>,
    manifest_dir: &str,
    check: impl Fn(&[u8]) -> bool,
) -> Report {
    let dir = corpus_dir(manifest_dir, setup.target);
    let corpus = read_corpus(&dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
    let report = run(setup, &corpus, check);
    println!("{}", report.summary());
    report
}

/// A seed of a target that runs one of several parsers ([`crate::selector_and_text`]): the first
/// byte of its file name `name` (the selector), then `text`.
pub fn selector_seed(name: &str, text: &str) -> Vec<u8> {
    let mut bytes = vec![name.as_bytes()[0]];
    bytes.extend_from_slice(text.as_bytes());
    bytes
}

/// The seed of a long run: `IOSETS_FUZZ_SEED` if set, else `default`.
///
/// # Panics
/// If `IOSETS_FUZZ_SEED` is set but not a whole number.
pub fn seed_from_env(default: u64) -> u64 {
    std::env::var("IOSETS_FUZZ_SEED").map_or(default, |s| {
        s.trim()
            .parse()
            .unwrap_or_else(|_| panic!("IOSETS_FUZZ_SEED={s:?} is not a whole number"))
    })
}

/// Checks a run of the test command: no panic, every input made, and mutants that reach past
/// the error paths (more than 1,000 accepted beyond the seeds).
///
/// # Panics
/// When one of those does not hold, with the run's summary.
pub fn assert_clean_run(report: &Report, inputs: u64) {
    assert_eq!(report.panic, None, "{}", report.summary());
    assert_eq!(report.inputs, inputs, "{}", report.summary());
    assert!(
        report.accepted > report.corpus as u64 + 1000,
        "{}",
        report.summary()
    );
}

/// Every file of `dir`, sorted by name (a missing directory is an empty corpus).
pub fn read_corpus(dir: &Path) -> std::io::Result<Vec<Vec<u8>>> {
    let mut paths: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .map(|e| e.map(|e| e.path()))
            .collect::<std::io::Result<_>>()?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e),
    };
    paths.retain(|p| p.is_file());
    paths.sort();
    paths.iter().map(std::fs::read).collect()
}

/// The number of inputs a run should make: `IOSETS_FUZZ_INPUTS` if set (it must be a whole
/// number), else `default`.
///
/// # Panics
/// If `IOSETS_FUZZ_INPUTS` is set but not a whole number: a long run asked for and silently
/// shortened would report a number that was never reached.
pub fn inputs_from_env(default: u64) -> u64 {
    match std::env::var("IOSETS_FUZZ_INPUTS") {
        Ok(s) => s
            .trim()
            .replace('_', "")
            .parse()
            .unwrap_or_else(|_| panic!("IOSETS_FUZZ_INPUTS={s:?} is not a whole number")),
        Err(_) => default,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_mutants() {
        let seeds = [b"job,op,offset,len,arrival_ns\n1,read,0,1,2\n".to_vec()];
        let a: Vec<Vec<u8>> = {
            let mut rng = Rng::new(7);
            (0..100)
                .map(|_| mutate(&mut rng, &seeds[0], &seeds[0], &[b","], 256))
                .collect()
        };
        let mut rng = Rng::new(7);
        for want in &a {
            assert_eq!(&mutate(&mut rng, &seeds[0], &seeds[0], &[b","], 256), want);
        }
        assert!(a.iter().any(|m| m != &seeds[0]), "some mutant differs");
        assert!(a.iter().all(|m| m.len() <= 256));
    }
}
