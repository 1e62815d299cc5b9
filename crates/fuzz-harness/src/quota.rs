//! The quota rule parsers' fuzz check (`quota_match`): a rule's match expression
//! ([`Match::parse`]), an address block ([`Cidr::parse`]) and a whole TOML rule set
//! ([`QuotaConfig::from_toml_value`]), chosen by the input's first byte.
//!
//! Shared by the `cargo fuzz` target and the stable loop in `crates/runtime/tests/fuzz_corpus.rs`.
//!
//! | first byte | parser |
//! |---|---|
//! | `'0'` | `Match::parse`, then its printed form parsed again, and its matching checked |
//! | `'1'` | `Cidr::parse`, then its printed form parsed again |
//! | `'2'` | the TOML text read as a `TomlQuota`, then `QuotaConfig::from_toml_value` |
//!
//! Other bytes count modulo 3 from `'0'`; bytes that are not UTF-8 are read lossily.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use iosets_runtime::quota::{Cidr, Match, OpClass, Origin, QuotaConfig, TomlQuota};
use iosets_types::JobId;

/// The selector byte of each parser, in the order of the table above.
pub const SELECTORS: [(u8, &str); 3] = [(b'0', "match"), (b'1', "cidr"), (b'2', "toml")];

/// The target as the tests run it (`fuzz/corpus/quota_match`, inputs up to 2048 bytes).
pub const TARGET: crate::mutator::Target = crate::mutator::Target {
    name: "quota_match",
    dict: DICT,
    max_len: 2048,
    check: quota_match,
};

/// Tokens worth inserting: keys, separators, sets, addresses and prefixes at a boundary, TOML
/// syntax.
pub const DICT: &[&[u8]] = &[
    b"job=",
    b"jobid=",
    b"uid=",
    b"gid=",
    b"client=",
    b"nid=",
    b"class=",
    b"opcode=",
    b"data-read",
    b"data-write",
    b"meta",
    b"*",
    b"&",
    b" ",
    b",",
    b"{",
    b"}",
    b"=",
    b"/",
    b"/0",
    b"/32",
    b"/33",
    b"/128",
    b"/129",
    b"::",
    b"::ffff:",
    b"255.255.255.255",
    b"10.0.0.0",
    b"18446744073709551615",
    b"4294967296",
    b"[[rule]]\n",
    b"name = \"a\"\n",
    b"match = \"",
    b"threads_pct = ",
    b"rate_ops = ",
    b"rate_bytes = ",
    b"reserve_ops = ",
    b"weight = ",
    b"strict = true\n",
    b"lend = true\n",
    b"keep_ms = ",
    b"job_share_pct = ",
    b"nan",
    b"inf",
    b"-0.0",
    b"1e308",
    b"\n",
    b"\"",
];

/// `text` parsed with `parse`, its printed form, and that form parsed back; `None` when `text`
/// does not parse.
///
/// # Panics
/// If the printed form does not parse.
fn parse_and_reparse<T: std::fmt::Display, E: std::fmt::Display>(
    text: &str,
    parse: impl Fn(&str) -> Result<T, E>,
) -> Option<(T, String, T)> {
    let value = parse(text).ok()?;
    let printed = value.to_string();
    let back = parse(&printed)
        .unwrap_or_else(|e| panic!("{printed:?} (printed from {text:?}) fails: {e}"));
    Some((value, printed, back))
}

/// Runs the parser the first byte selects on the rest. Returns whether it parsed.
///
/// # Panics
/// If a parser panics; if a match or an address block does not parse back from its printed
/// form to the same value, or a match does not cover itself, or `*` fails to cover it; if a
/// TOML rule set that was accepted fails its own validation.
pub fn quota_match(data: &[u8]) -> bool {
    let Some((sel, text)) = crate::selector_and_text(data) else {
        return false;
    };
    let text = text.as_ref();
    match sel.wrapping_sub(b'0') % 3 {
        0 => {
            let Some((m, printed, back)) = parse_and_reparse(text, Match::parse) else {
                return false;
            };
            assert_eq!(
                back, m,
                "{text:?} printed as {printed:?} parses differently"
            );
            assert!(m.covers(&m), "{printed} does not cover itself");
            assert!(Match::all().covers(&m));
            for (job, class, origin) in origins() {
                // A match and its printed form agree on every request.
                assert_eq!(
                    m.matches(job, class, &origin),
                    back.matches(job, class, &origin)
                );
                // A request `m` matches is matched by everything covering `m`.
                if m.matches(job, class, &origin) {
                    assert!(Match::all().matches(job, class, &origin));
                }
            }
            true
        }
        1 => {
            let Some((c, _, back)) = parse_and_reparse(text, Cidr::parse) else {
                return false;
            };
            assert_eq!(back, c);
            assert!(c.covers(c));
            true
        }
        _ => {
            let Ok(value) = toml::from_str::<TomlQuota>(text) else {
                return false;
            };
            let Ok(cfg) = QuotaConfig::from_toml_value(&value) else {
                return false;
            };
            cfg.validate()
                .unwrap_or_else(|e| panic!("an accepted rule set fails validation: {e}"));
            true
        }
    }
}

/// A few requests to match against: jobs, classes and origins at the edges.
fn origins() -> impl Iterator<Item = (JobId, OpClass, Origin)> {
    let addrs = [
        None,
        Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))),
        Some(IpAddr::V4(Ipv4Addr::BROADCAST)),
        Some(IpAddr::V6(Ipv6Addr::LOCALHOST)),
        Some(IpAddr::V6(Ipv4Addr::new(127, 0, 0, 1).to_ipv6_mapped())),
    ];
    let classes = [OpClass::DataRead, OpClass::DataWrite, OpClass::Meta];
    let jobs = [0, 1, 2, u64::MAX];
    addrs.into_iter().enumerate().flat_map(move |(i, addr)| {
        classes.into_iter().zip(jobs).map(move |(class, job)| {
            let id = (i as u32).wrapping_mul(1000);
            let origin = Origin {
                uid: (i % 2 == 0).then_some(id),
                gid: Some(id.wrapping_add(100)),
                addr,
                ..Origin::default()
            };
            (JobId(job), class, origin)
        })
    })
}
