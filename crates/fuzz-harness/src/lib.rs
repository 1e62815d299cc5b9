//! The checks the fuzz targets run (`fuzz/`, cargo-fuzz on nightly), shared with the
//! stable-toolchain loops in the crates' tests (`crates/*/tests/fuzz_corpus.rs`, which depend
//! on this crate), and the mutation engine of those loops. See `fuzz/README.md`.

pub mod mutator;
pub mod quota;
pub mod trace;
pub mod wire;

/// The two parts of an input of a target that runs one of several parsers: the first byte, which
/// selects the parser, and the rest as text (invalid UTF-8 replaced); `None` for an empty input.
pub fn selector_and_text(data: &[u8]) -> Option<(u8, std::borrow::Cow<'_, str>)> {
    let (&sel, rest) = data.split_first()?;
    Some((sel, String::from_utf8_lossy(rest)))
}
