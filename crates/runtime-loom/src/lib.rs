//! Loom models of `iosets-runtime`'s lock and wake-up protocol: the models are this crate's
//! test, `tests/loom_protocol.rs`, built only under `RUSTFLAGS="--cfg loom"` (see its doc).
//! The crate has no code of its own.
