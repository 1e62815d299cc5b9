//! The committed C header `include/iosets.h` must be what cbindgen generates from this crate now.
//!
//! A stale header fails this test (and so the test command). To regenerate it:
//! `IOSETS_BLESS=1 cargo test -p iosets-ffi --test tests header::`.

use std::path::PathBuf;

#[test]
fn committed_header_is_up_to_date() {
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let header = crate_dir.join("../../include/iosets.h");
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml"))
        .expect("crates/ffi/cbindgen.toml is valid");
    let bindings = cbindgen::Builder::new()
        .with_crate(&crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header");
    let mut generated = Vec::new();
    bindings.write(&mut generated);
    let generated = String::from_utf8(generated).expect("the header is UTF-8");

    if std::env::var_os("IOSETS_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&header, &generated).expect("write include/iosets.h");
        return;
    }
    let committed = std::fs::read_to_string(&header).unwrap_or_default();
    assert!(
        committed == generated,
        "include/iosets.h is stale (or missing): it differs from what cbindgen generates from \
         crates/ffi.\nRegenerate it with:\n    IOSETS_BLESS=1 cargo test -p iosets-ffi --test tests header::\n\
         and commit the result."
    );
}
