//! The quota rule parsers under the stable fuzz loop: every seed of `fuzz/corpus/quota_match` and
//! mutants of them never panic `Match::parse`, `Cidr::parse` or the TOML rule-set reader, and what
//! parses prints to a form that parses back to the same value (`crates/fuzz-harness/src/quota.rs`
//! says what is checked; `crates/fuzz-harness/src/mutator.rs` how inputs are made).
//!
//! - `seeds_and_mutants_never_panic`: 100,000 inputs, in the test command.
//! - `long_run` (ignored): `IOSETS_FUZZ_INPUTS` inputs (default 10 M), from `scripts/fuzz.sh`.
//! - `write_seed_corpus` (ignored): regenerates the corpus (`IOSETS_FUZZ_WRITE_CORPUS=1`, see
//!   `fuzz/README.md`).

use iosets_fuzz_harness::mutator::selector_seed;
use iosets_fuzz_harness::quota;

#[test]
fn every_parser_has_seeds_that_it_reads() {
    quota::TARGET.assert_every_selector_read(&quota::SELECTORS);
}

iosets_fuzz_harness::stable_loop!(quota::TARGET, seeds_and_mutants_never_panic, 100_000);

/// The seed corpus: match expressions in each syntax (sets in braces and with commas, `&` and
/// spaces, every key and its alias), address blocks of both families, and TOML rule sets.
const SEEDS: &[(&str, &str)] = &[
    ("0-all", "*"),
    ("0-jobs-braces", "job={1 2}&class=meta"),
    ("0-jobs-commas", "jobid=1,2 opcode=metadata"),
    ("0-ids", "uid=1000 gid={100 200}"),
    (
        "0-clients",
        "client={10.0.0.0/8 fd00::/8 192.168.1.7} class={data-read write}",
    ),
    ("0-nid", "nid=127.0.0.0/8 & job=18446744073709551615"),
    ("1-v4", "10.1.0.0/16"),
    ("1-v4-host", "192.168.0.1"),
    ("1-v6", "fd00::/8"),
    ("1-v6-all", "::/0"),
    ("1-mapped", "::ffff:127.0.0.1/128"),
    (
        "2-one-rule",
        "job_share_pct = 90\nlend = false\n[[rule]]\nname = \"compute\"\nmatch = \"job={1 2}\"\nthreads_pct = 71\n",
    ),
    (
        "2-rates",
        "lend = true\nkeep_ms = 2\n[[rule]]\nname = \"io.heavy\"\nmatch = \"job=7 class=data-write\"\nrate_ops = 100\nrate_bytes = 1e8\nstrict = true\nreserve_ops = 10\n\n[[rule]]\nname = \"rest\"\nmatch = \"*\"\nweight = 2.5\nthreads_pct = 29\n",
    ),
    (
        "2-clients",
        "[[rule]]\nname = \"lab\"\nmatch = \"client=10.0.0.0/8 uid=1000\"\nweight = 1\n",
    ),
];

#[test]
#[ignore = "writes fuzz/corpus/quota_match: IOSETS_FUZZ_WRITE_CORPUS=1"]
fn write_seed_corpus() {
    let seeds = SEEDS
        .iter()
        .map(|(name, text)| (name.to_string(), selector_seed(name, text)));
    quota::TARGET.write_seeds(seeds);
}

/// Regression (found by this loop, seed `1-mapped`): an IPv4-mapped IPv6 block such as
/// `::ffff:10.0.0.0/104` was kept as an IPv6 block, while a client's mapped address is compared
/// as IPv4: the rule matched no client, and the block did not even cover itself.
#[test]
fn ipv4_mapped_block_matches_its_ipv4_clients() {
    use iosets_runtime::quota::{Cidr, Match, OpClass, Origin};
    use iosets_types::JobId;

    let block = Cidr::parse("::ffff:10.0.0.0/104").unwrap();
    assert_eq!(block, Cidr::parse("10.0.0.0/8").unwrap());
    assert_eq!(block.to_string(), "10.0.0.0/8");
    assert!(block.covers(block));
    let m = Match::parse("client=::ffff:127.0.0.1").unwrap();
    assert!(m.covers(&m));
    for addr in ["127.0.0.1", "::ffff:127.0.0.1"] {
        let origin = Origin {
            addr: Some(addr.parse().unwrap()),
            ..Origin::default()
        };
        assert!(m.matches(JobId(1), OpClass::Meta, &origin), "{addr}");
    }
    let other = Origin {
        addr: Some("127.0.0.2".parse().unwrap()),
        ..Origin::default()
    };
    assert!(!m.matches(JobId(1), OpClass::Meta, &other));
    // An IPv6 block that is not IPv4-mapped stays IPv6.
    assert_eq!(Cidr::parse("fd00::/8").unwrap().to_string(), "fd00::/8");
}
