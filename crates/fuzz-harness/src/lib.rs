//! The checks the fuzz targets run (`fuzz/`, cargo-fuzz on nightly), shared with the
//! stable-toolchain loops in the crates' tests (`crates/*/tests/fuzz_corpus.rs`, which depend
//! on this crate), and the mutation engine of those loops. See `fuzz/README.md`.

pub mod mutator;
pub mod quota;
pub mod trace;
pub mod wire;
