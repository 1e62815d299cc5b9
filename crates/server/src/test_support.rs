//! Helpers for the unit tests of the server (compiled only under `cfg(test)`).

use tempfile::TempDir;

/// A fresh directory named after `name` in the system's temporary directory, removed on drop.
pub(crate) fn temp_dir(name: &str) -> TempDir {
    tempfile::Builder::new()
        .prefix(&format!("iosets-server-{name}-"))
        .tempdir()
        .unwrap()
}
