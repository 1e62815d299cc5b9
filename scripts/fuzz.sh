#!/usr/bin/env bash
# Fuzzes the wire decoder, the trace parsers and the quota rule parsers at length.
#
#   scripts/fuzz.sh [inputs] [seconds]
#
# With a nightly toolchain (cargo-fuzz is installed when missing), runs
# `cargo +nightly fuzz run` on each target (wire_decode, trace_parse, quota_match) for
# `seconds` (default 300) with debug assertions and overflow checks on; otherwise, or with
# IOSETS_FUZZ_ENGINE=stable, runs the stable-toolchain loop of each crate's
# tests/fuzz_corpus.rs (`long_run`) for `inputs` inputs per target (default 10000000), in release
# with debug assertions and overflow checks. IOSETS_FUZZ_SEED picks the stable loop's seed.
#
# Prints a table (target, engine, inputs executed, crashes, corpus size) and exits non-zero if
# any target crashed; a crashing input is kept (libFuzzer: fuzz/artifacts/<target>/; stable: the
# path printed). fuzz/README.md says how to replay one and add it as a regression.
set -euo pipefail
cd "$(dirname "$0")/.."

inputs=${1:-10000000}
seconds=${2:-300}
engine=${IOSETS_FUZZ_ENGINE:-auto}
case "$inputs$seconds" in
  *[!0-9]*) echo "usage: $0 [inputs] [seconds] (whole numbers)" >&2; exit 2 ;;
esac
if [ "$inputs" -eq 0 ] || [ "$seconds" -eq 0 ]; then
  echo "usage: $0 [inputs] [seconds]: both must be positive" >&2
  exit 2
fi
# With a nightly toolchain, install cargo-fuzz if it is missing (crates.io; cached in ~/.cargo/bin).
if [ "$engine" != stable ] && cargo +nightly --version >/dev/null 2>&1 \
    && ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "== installing cargo-fuzz" >&2
  cargo install --locked cargo-fuzz >&2 || echo "cargo-fuzz could not be installed: the stable loop runs" >&2
fi
if [ "$engine" = auto ]; then
  if cargo +nightly --version >/dev/null 2>&1 && cargo +nightly fuzz --version >/dev/null 2>&1; then
    engine=libfuzzer
  else
    engine=stable
  fi
fi
case "$engine" in
  libfuzzer|stable) ;;
  *) echo "IOSETS_FUZZ_ENGINE=$engine: expected auto, libfuzzer or stable" >&2; exit 2 ;;
esac

targets=(wire_decode trace_parse quota_match)
declare -A crate=([wire_decode]=iosets-proto [trace_parse]=iosets-period [quota_match]=iosets-runtime)
declare -A max_len=([wire_decode]=4096 [trace_parse]=8192 [quota_match]=2048)
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
rows=()
crashed=0

seeds() { find "fuzz/corpus/$1" -type f | wc -l; }

if [ "$engine" = libfuzzer ]; then
  echo "== cargo +nightly fuzz: ${seconds} s per target"
  # Debug assertions and overflow checks on (-a): an overflow is a crash, as in the tests.
  cargo +nightly fuzz build -a -O
  for t in "${targets[@]}"; do
    # New inputs go to a scratch corpus (first directory), not to the checked-in seeds.
    scratch="fuzz/scratch/$t"
    mkdir -p "$scratch" "fuzz/artifacts/$t"
    echo "-- $t"
    status=0
    cargo +nightly fuzz run -a -O "$t" "$scratch" "fuzz/corpus/$t" -- \
      -max_total_time="$seconds" -max_len="${max_len[$t]}" \
      -malloc_limit_mb=64 -rss_limit_mb=2048 -print_final_stats=1 \
      >"$logs/$t" 2>&1 || status=$?
    tail -n 3 "$logs/$t"
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$logs/$t" | tail -n 1)
    runs=${runs:-$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$logs/$t" | tail -n 1)}
    crash=0
    if [ "$status" -ne 0 ]; then
      crash=1
      crashed=1
      grep -E "ERROR|panicked|artifact_prefix|Test unit written" "$logs/$t" | head -n 20 || true
    fi
    corpus="$(seeds "$t") seeds + $(find "$scratch" -type f | wc -l) found"
    rows+=("$t|libFuzzer|${runs:-?}|$crash|$corpus")
  done
else
  echo "== stable loop (crates/*/tests/fuzz_corpus.rs long_run): $inputs inputs per target"
  export IOSETS_FUZZ_INPUTS="$inputs"
  export CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS=true CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=true
  target_dir="${CARGO_TARGET_DIR:-target}/fuzz-stable"
  for t in "${targets[@]}"; do
    echo "-- $t"
    status=0
    cargo test --release --locked --target-dir "$target_dir" -p "${crate[$t]}" \
      --test tests -- --ignored --exact fuzz_corpus::long_run --nocapture >"$logs/$t" 2>&1 || status=$?
    line=$(grep '^fuzz-summary' "$logs/$t" | tail -n 1 || true)
    echo "${line:-no summary (build failed?)}"
    runs=$(sed -n 's/.* inputs=\([0-9]*\).*/\1/p' <<<"$line")
    panics=$(sed -n 's/.* panics=\([0-9]*\).*/\1/p' <<<"$line")
    crash=0
    if [ "$status" -ne 0 ] || [ "${panics:-1}" != 0 ]; then
      crash=1
      crashed=1
      grep -E "panicked|crash-" "$logs/$t" | head -n 20 || tail -n 30 "$logs/$t"
    fi
    rows+=("$t|stable|${runs:-?}|$crash|$(seeds "$t") seeds")
  done
fi

echo
printf '%-12s %-10s %14s %8s  %s\n' target engine inputs crashes corpus
total=0
for r in "${rows[@]}"; do
  IFS='|' read -r t e n c k <<<"$r"
  printf '%-12s %-10s %14s %8s  %s\n' "$t" "$e" "$n" "$c" "$k"
  [[ "$n" =~ ^[0-9]+$ ]] && total=$((total + n))
done
printf '%-12s %-10s %14s\n' total "" "$total"
if [ "$crashed" -ne 0 ]; then
  echo "FAILED: a target crashed (see above)" >&2
  exit 1
fi
