//! Running the `iosets` binary in tests, shared by every CLI test file.
#![allow(dead_code)]

pub mod experiment;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A fresh, empty directory for one test.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("iosets-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `iosets ARGS` in `dir`.
pub fn iosets(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_iosets"))
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs and expects exit code 1 with a one-line message containing every `needle`.
pub fn fails(dir: &Path, args: &[&str], needles: &[&str]) {
    let o = iosets(dir, args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{args:?}: {err} {}", stdout(&o));
    assert_eq!(
        err.trim().lines().count(),
        1,
        "{args:?}: not one line: {err}"
    );
    for n in needles {
        assert!(err.contains(n), "{args:?}: {err:?} lacks {n:?}");
    }
}
