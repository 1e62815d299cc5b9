//! `cargo +nightly fuzz run wire_decode`: see `crates/fuzz-harness/src/wire.rs` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    iosets_fuzz::wire::wire_decode(data);
});
