#!/usr/bin/env bash
# Builds libiosets (release), compiles the C tests against it (shared and static), runs each under
# valgrind (no leak, no invalid access: any error fails), installs into a temporary prefix and
# builds a program through pkg-config. Called by scripts/test.sh after `cargo test`.
#
#   bash crates/ffi/tests/c/run.sh            # valgrind, installed if missing
#   IOSETS_NO_VALGRIND=1 bash crates/ffi/tests/c/run.sh   # without valgrind (quicker)
#   IOSETS_C_TESTS_NO_BUILD=1 ...                       # use the library already built
set -euo pipefail
root="$(cd "$(dirname "$0")/../../../.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-$root/target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac
lib="$target/release"
out="$target/c-tests"
mkdir -p "$out"

if [[ "${IOSETS_C_TESTS_NO_BUILD:-0}" != 1 ]]; then
  # With the iosets binary, so that the shared dependencies resolve to the features the rest of
  # scripts/test.sh built them with (built alone, libc, memchr, tracing-core and zerocopy would
  # get fewer features and everything above them would be compiled again).
  cargo build -p iosets-ffi -p iosets-cli --release --locked --quiet
fi

cc=${CC:-cc}
cflags=(-std=c11 -D_GNU_SOURCE -O1 -g -Wall -Wextra -Werror -pthread -I "$root/include")
src="$root/crates/ffi/tests/c"
for t in test_api test_threads test_wfq test_agios test_agios_compat test_quota; do
  "$cc" "${cflags[@]}" "$src/$t.c" -o "$out/$t" -L "$lib" -liosets -Wl,-rpath,"$lib" -lm
done
# The static library links too (its system libraries come from rustc --print native-static-libs).
"$cc" "${cflags[@]}" "$src/test_api.c" -o "$out/test_api_static" "$lib/libiosets.a" \
  -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc

if [[ $(id -u) -eq 0 ]]; then sudo=(); else sudo=(sudo); fi
apt_install() { # apt_install PACKAGE: installs a missing tool the way scripts/test.sh installs rustup
  echo "$1 not found: installing it with apt-get" >&2
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1"
}
command -v pkg-config >/dev/null 2>&1 || apt_install pkg-config
runner=()
if [[ "${IOSETS_NO_VALGRIND:-0}" != 1 ]]; then
  command -v valgrind >/dev/null 2>&1 || apt_install valgrind
  runner=(valgrind -q --leak-check=full --show-leak-kinds=definite,indirect,possible
          --errors-for-leak-kinds=definite,indirect,possible --error-exitcode=1 --fair-sched=yes)
fi

passed=0
failed=0
for t in test_api test_api_static test_threads test_wfq test_agios test_agios_compat test_quota; do
  echo "-- $t${runner:+ (under valgrind)}"
  if "${runner[@]}" "$out/$t"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $t"; fi
done

# Install into a temporary prefix and build against it through pkg-config.
prefix="$(mktemp -d)"
trap 'rm -rf "$prefix"' EXIT
bash "$root/crates/ffi/install.sh" --prefix "$prefix" --no-build >/dev/null
echo "-- install + pkg-config"
if PKG_CONFIG_PATH="$prefix/lib/pkgconfig" "$cc" "${cflags[@]}" "$src/test_api.c" -o "$out/test_api_pc" \
     $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs iosets) -lm \
     -Wl,-rpath,"$prefix/lib" && "$out/test_api_pc" >/dev/null; then
  passed=$((passed + 1))
else
  failed=$((failed + 1)); echo "FAILED: install + pkg-config"
fi

echo "C tests: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
