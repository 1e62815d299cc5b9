//! `cargo +nightly fuzz run trace_parse`: see `crates/fuzz-harness/src/trace.rs` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    iosets_fuzz::trace::trace_parse(data);
});
