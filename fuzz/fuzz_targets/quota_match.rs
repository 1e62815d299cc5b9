//! `cargo +nightly fuzz run quota_match`: see `crates/fuzz-harness/src/quota.rs` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    iosets_fuzz::quota::quota_match(data);
});
