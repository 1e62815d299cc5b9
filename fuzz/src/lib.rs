//! The fuzz targets' checks: `iosets-fuzz-harness` (`crates/fuzz-harness`), the same code the
//! crates' stable-toolchain loops (`crates/*/tests/fuzz_corpus.rs`) run. See `README.md`.

pub use iosets_fuzz_harness::{mutator, quota, trace, wire};
