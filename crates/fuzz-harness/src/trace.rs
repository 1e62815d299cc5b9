//! The trace parsers' fuzz check (`trace_parse`): every reader of `iosets_period::trace`, chosen
//! by the input's first byte, on the rest of the input as text.
//!
//! Shared by the `cargo fuzz` target and the stable loop in `crates/period/tests/fuzz_corpus.rs`.
//!
//! | first byte | reader |
//! |---|---|
//! | `'0'` | `parse(text, Format::Csv)` (a request trace, or the older seconds dialect) |
//! | `'1'` | `parse(text, Format::Jsonl)` |
//! | `'2'` | `parse(text, Format::Ftio)` |
//! | `'3'` | `parse(text, Format::Tmio)` |
//! | `'4'` | `parse(text, Format::Dxt)` |
//! | `'5'` | `parse_requests`, `clock_zero`, `is_request_trace`, and the write-read round trip |
//! | `'6'` | `Format::sniff` on the content, then the sniffed format's reader; and the first reader `Format::by_name` gives four file names |
//!
//! Other bytes count modulo 7 from `'0'`. Bytes that are not UTF-8 are read lossily (U+FFFD
//! for each bad sequence): the readers take `&str`, and the file readers refuse non-UTF-8 before
//! any parser sees it.

use std::path::Path;

use iosets_period::trace::requests::{clock_zero, is_request_trace};
use iosets_period::trace::{parse, parse_requests, Format, TraceWriter};
use iosets_period::Error;

/// The selector byte of each reader, in the order of the table above.
pub const SELECTORS: [(u8, &str); 7] = [
    (b'0', "csv"),
    (b'1', "jsonl"),
    (b'2', "ftio"),
    (b'3', "tmio"),
    (b'4', "dxt"),
    (b'5', "requests"),
    (b'6', "sniff"),
];

/// The target as the tests run it (`fuzz/corpus/trace_parse`, inputs up to 8192 bytes).
pub const TARGET: crate::mutator::Target = crate::mutator::Target {
    name: "trace_parse",
    dict: DICT,
    max_len: 8192,
    check: trace_parse,
};

/// Tokens worth inserting into traces: separators, quotes, column and key names, numbers at a
/// boundary.
pub const DICT: &[&[u8]] = &[
    b",",
    b"\n",
    b"\r\n",
    b"\"",
    b"#",
    b" ",
    b"{",
    b"}",
    b"[",
    b"]",
    b":",
    b"-1",
    b"0",
    b"1e309",
    b"-0.0",
    b"NaN",
    b"18446744073709551615",
    b"18446744073709551616",
    b"2147483648",
    b"1.8e10",
    b"9e18",
    b"job",
    b"op",
    b"offset",
    b"len",
    b"arrival_ns",
    b"dispatch_ns",
    b"complete_ns",
    b"errno",
    b"path",
    b"tag",
    b"start",
    b"end",
    b"bytes",
    b"read",
    b"write",
    b"fsync",
    b"\"t\"",
    b"\"b\"",
    b"\"job\"",
    b"\"start\"",
    b"\"end\"",
    b"\"bytes\"",
    b"\"bandwidth\"",
    b"\"b_ind\"",
    b"\"t_ind_s\"",
    b"\"t_ind_e\"",
    b"\"b_rank_avr\"",
    b"\"write_sync\"",
    b"\"read_async_t\"",
    b"X_POSIX",
    b"X_MPIIO",
    b"# jobid:",
    b"# DXT",
    b"# clock_zero_unix_ns=",
    b"\xc3\xa9",
    b"\xff",
];

/// Runs the reader the first byte selects on the rest. Returns whether it read a trace.
///
/// # Panics
/// If a reader panics, or an error breaks its contract (a parse error names a line of the
/// input, counted from 1), or a request trace that was read, written back with
/// [`TraceWriter`] and read again, comes back different.
pub fn trace_parse(data: &[u8]) -> bool {
    let Some((sel, text)) = crate::selector_and_text(data) else {
        return false;
    };
    let text = text.as_ref();
    let format = |f: Format| checked(text, parse(text, f)).is_some();
    match sel.wrapping_sub(b'0') % 7 {
        0 => format(Format::Csv),
        1 => format(Format::Jsonl),
        2 => format(Format::Ftio),
        3 => format(Format::Tmio),
        4 => format(Format::Dxt),
        5 => requests(text),
        _ => {
            let mut any = false;
            if let Some(f) = Format::sniff(text.as_bytes()) {
                any |= format(f);
            }
            for name in ["trace", "trace.csv", "trace.json", "trace.jsonl"] {
                any |= format(Format::by_name(Path::new(name))[0]);
            }
            any
        }
    }
}

/// A request trace: read, and if it reads, written and read again to the same records.
fn requests(text: &str) -> bool {
    let _ = clock_zero(text);
    let is_trace = is_request_trace(text);
    let Some(records) = checked(text, parse_requests(text)) else {
        return false;
    };
    assert!(
        is_trace,
        "parse_requests read a text whose header lacks arrival_ns"
    );
    let mut w = TraceWriter::new(Vec::new()).expect("writing to a Vec");
    for r in &records {
        w.write(r).expect("writing to a Vec");
    }
    let written = String::from_utf8(w.into_inner().expect("flush to a Vec"))
        .expect("the writer writes UTF-8");
    let again = parse_requests(&written)
        .unwrap_or_else(|e| panic!("a written trace does not read back ({e}):\n{written}"));
    assert_eq!(
        again, records,
        "the write-read round trip changed the records"
    );
    true
}

/// The value, or `None` after checking the error: a parse error names a line of `text`.
fn checked<T>(text: &str, r: Result<T, Error>) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(e) => {
            if let Error::Parse { line, .. } = &e {
                let lines = text.split('\n').count();
                assert!(
                    (1..=lines).contains(line),
                    "parse error at line {line} of a {lines}-line text: {e}"
                );
            }
            assert!(!e.to_string().is_empty());
            None
        }
    }
}
