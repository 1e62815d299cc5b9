//! The checks the fuzz targets run, shared with the stable-toolchain loops in the crates'
//! tests (`crates/*/tests/fuzz_corpus.rs` include these files by path), and the mutation engine
//! of those loops. See `fuzz/README.md`.

pub mod mutator;
pub mod quota;
pub mod trace;
pub mod wire;
