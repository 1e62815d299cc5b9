//! The checks the fuzz targets run (`fuzz/`, cargo-fuzz on nightly), shared with the
//! stable-toolchain loops in the crates' tests (`crates/*/tests/fuzz_corpus.rs`, which depend
//! on this crate), and the mutation engine of those loops. See `fuzz/README.md`.

pub mod mutator;
pub mod quota;
pub mod trace;
pub mod wire;

/// The two tests of a target's stable loop in a crate's `tests/fuzz_corpus.rs`: `$short` runs
/// `$inputs` inputs in the test command ([`mutator::Target::short_run`]), `long_run` (ignored)
/// the long run `scripts/fuzz.sh` asks for ([`mutator::Target::long_run`]); an input that panics
/// is saved in the test target's temporary directory.
#[macro_export]
macro_rules! stable_loop {
    ($target:expr, $short:ident, $inputs:expr) => {
        #[test]
        fn $short() {
            $target.short_run(::std::path::Path::new(env!("CARGO_TARGET_TMPDIR")), $inputs);
        }

        #[test]
        #[ignore = "long: run by scripts/fuzz.sh"]
        fn long_run() {
            $target.long_run(::std::path::Path::new(env!("CARGO_TARGET_TMPDIR")));
        }
    };
}

/// The two parts of an input of a target that runs one of several parsers: the first byte, which
/// selects the parser, and the rest as text (invalid UTF-8 replaced); `None` for an empty input.
pub fn selector_and_text(data: &[u8]) -> Option<(u8, std::borrow::Cow<'_, str>)> {
    let (&sel, rest) = data.split_first()?;
    Some((sel, String::from_utf8_lossy(rest)))
}
