#!/usr/bin/env bash
# Installs libiosets into a prefix: lib/libiosets.so, lib/libiosets.a, lib/libagios.so (a link to
# libiosets.so, for programs linked with -lagios), include/iosets.h, include/agios.h,
# include/scheduling_algorithms.h (AGIOS's algorithm identifiers) and
# lib/pkgconfig/iosets.pc.
#
#   bash crates/ffi/install.sh --prefix /usr/local      # builds with cargo --release first
#   bash crates/ffi/install.sh --prefix P --no-build    # uses what is already built
# Respects CARGO_TARGET_DIR (default: target/ at the workspace root).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
prefix=""
build=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --prefix) prefix="${2:?--prefix needs a directory}"; shift 2 ;;
    --prefix=*) prefix="${1#--prefix=}"; shift ;;
    --no-build) build=0; shift ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown argument $1 (expected --prefix DIR [--no-build])" >&2; exit 2 ;;
  esac
done
[[ -n "$prefix" ]] || { echo "install.sh: --prefix DIR is required" >&2; exit 2; }
mkdir -p "$prefix"
prefix="$(cd "$prefix" && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac

if [[ $build -eq 1 ]]; then
  (cd "$root" && cargo build -p iosets-ffi --release --locked)
fi
lib="$target/release"
for f in libiosets.so libiosets.a; do
  [[ -f "$lib/$f" ]] || { echo "install.sh: $lib/$f not found (build first, or drop --no-build)" >&2; exit 1; }
done

version="$(sed -n 's/^version *= *"\(.*\)"/\1/p' "$root/Cargo.toml" | head -1)"
install -d "$prefix/lib/pkgconfig" "$prefix/include"
install -m 0755 "$lib/libiosets.so" "$prefix/lib/libiosets.so"
install -m 0644 "$lib/libiosets.a" "$prefix/lib/libiosets.a"
ln -sfn libiosets.so "$prefix/lib/libagios.so"
install -m 0644 "$root/include/iosets.h" "$root/include/agios.h" \
  "$root/include/scheduling_algorithms.h" "$prefix/include/"
sed -e "s|@PREFIX@|$prefix|" -e "s|@LIBDIR@|$prefix/lib|" -e "s|@VERSION@|$version|" \
    -e "s|@PRIVATE@|-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc|" \
    "$root/crates/ffi/iosets.pc.in" > "$prefix/lib/pkgconfig/iosets.pc"
echo "installed libiosets $version into $prefix"
