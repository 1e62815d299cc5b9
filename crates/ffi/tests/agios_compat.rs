//! AGIOS source compatibility from `cargo test`: `tests/c/test_agios_compat.c`, written like AGIOS's
//! own `test/agios_test.c` (it includes `<agios.h>` and `<scheduling_algorithms.h>`, reads
//! `config_agios_default_algorithm`, calls `get_algorithm_name_from_index`), is compiled against
//! `include/` only and the libiosets this test run built, then run: it checks the identifiers and
//! names, every algorithm end to end, and that NOOP calls back inside `agios_add_request` on the
//! adding thread. `tests/c/run.sh` runs the same program under valgrind.
//!
//! Needs a C compiler (`cc`, or `$CC`); its absence fails the test with a message saying so.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The directory holding the `libiosets.so` cargo built for this test run.
fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    // target/<profile>/deps/tests-<hash> (the crate's one test binary, tests/main.rs)
    let deps = exe.parent().expect("deps directory").to_path_buf();
    for dir in [
        deps.clone(),
        deps.parent().expect("profile directory").to_path_buf(),
    ] {
        if dir.join("libiosets.so").is_file() {
            return dir;
        }
    }
    panic!(
        "libiosets.so not found next to {} (cargo builds the cdylib with the tests)",
        exe.display()
    );
}

#[test]
fn agios_test_like_program_builds_against_the_shim_headers_and_runs() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let include = crate_dir.join("../../include");
    let source = crate_dir.join("tests/c/test_agios_compat.c");
    let lib = library_dir();
    let out = std::env::temp_dir().join(format!("iosets-agios-compat-{}", std::process::id()));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let build = Command::new(&cc)
        .args([
            "-std=c11",
            "-D_GNU_SOURCE",
            "-O1",
            "-g",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pthread",
        ])
        .arg("-I")
        .arg(&include)
        .arg(&source)
        .arg("-o")
        .arg(&out)
        .arg("-L")
        .arg(&lib)
        .arg("-liosets")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run the C compiler {cc:?}: {e} (install gcc, or set CC)")
        });
    assert!(
        build.status.success(),
        "compiling {} failed:\n{}",
        source.display(),
        String::from_utf8_lossy(&build.stderr)
    );
    // Cargo's LD_LIBRARY_PATH may name an older libiosets.so (target/<profile>); the rpath is this
    // run's.
    let run = Command::new(&out)
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .expect("run the compiled test");
    let _ = std::fs::remove_file(&out);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "test_agios_compat failed ({}):\n{stdout}\n{}",
        run.status,
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(stdout.contains("test_agios_compat:"), "{stdout}");
    assert!(stdout.contains(", 0 failed"), "{stdout}");
    for alg in [
        "NOOP", "TO", "TO-agg", "SJF", "MLF", "aIOLi", "SW", "TWINS", "WFQ", "iosets",
    ] {
        assert!(
            stdout.contains(&format!("  {alg:<7} index")),
            "{alg} did not run:\n{stdout}"
        );
    }
}
