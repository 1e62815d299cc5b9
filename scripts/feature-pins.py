#!/usr/bin/env python3
"""Checks that the builds scripts/test.sh makes after `cargo test --workspace` resolve every
shared crate to the features the test build gave it, so that they reuse its artifacts instead
of compiling half the workspace again (BENCHMARKS.md, "Building the tests").

The builds: the CLI alone (mount conformance, Slurm, Python's comparison binary), the CLI with
the FFI (the package, the C tests) and the Python extension (maturin builds `-p iosets-py`).
A crate may appear twice in the workspace's resolve (once for the host, once for the target);
a build matches when its features equal one of them.

Usage: python3 scripts/feature-pins.py    (exit 1, naming each crate that differs)
"""
import collections
import subprocess
import sys

BUILDS = [["-p", "iosets-cli"], ["-p", "iosets-cli", "-p", "iosets-ffi"], ["-p", "iosets-py"]]


def features(args):
    out = subprocess.run(
        ["cargo", "tree", "--locked", "-f", "{p}|{f}", "--prefix", "none"] + args,
        capture_output=True, text=True, check=True,
    ).stdout
    found = collections.defaultdict(set)
    for line in out.splitlines():
        line = line.replace(" (*)", "").strip()
        if "|" in line:
            package, feats = line.split("|", 1)
            found[package.strip()].add(feats.strip())
    return found


def main():
    test_build = features(["--workspace", "-e", "normal,build,dev"])
    bad = 0
    for build in BUILDS:
        for package, feats in sorted(features(build + ["-e", "normal,build"]).items()):
            if not feats <= test_build.get(package, set()):
                bad += 1
                print(f"{' '.join(build)}: {package} has {sorted(feats)}, "
                      f"the test build {sorted(test_build.get(package, []))}")
    if bad:
        print(f"{bad} crates resolve differently: pin their features (see Cargo.toml comments)")
        return 1
    print("every build after the tests resolves its shared crates as the test build does")
    return 0


if __name__ == "__main__":
    sys.exit(main())
