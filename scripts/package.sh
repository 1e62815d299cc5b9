#!/usr/bin/env bash
# Builds the Debian package (the files of deploy/debian/assets staged and built with dpkg-deb,
# dependencies from dpkg-shlibdeps) and checks it for real, then checks
# `cargo install --path crates/cli`.
#
#   bash scripts/package.sh            # build target/release/package/iosets_<v>-1_<arch>.deb, check it
#   bash scripts/package.sh --no-install   # build and inspect only (no dpkg -i / dpkg -P)
#
# The package holds the command, libiosets (.so, .a, headers, pkg-config file, libagios.so),
# the systemd units, example settings in /etc/iosets, manual pages and bash/zsh/fish completions.
# The check installs it with dpkg (as root), runs the installed command, builds and runs a C
# program against the installed library through pkg-config, verifies the units with
# systemd-analyze, then purges it and checks nothing is left. An iosets package installed before
# the run is left alone (the install check is then skipped, and says so).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
install_check=1
case "${1:-}" in
  "") ;;
  --no-install) install_check=0 ;;
  -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
  *) echo "package.sh: unknown argument $1 (expected --no-install)" >&2; exit 2 ;;
esac
target="${CARGO_TARGET_DIR:-$root/target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac
if [[ "$target" != "$root/target" ]]; then
  # deploy/debian/assets names the workspace's target/release/.
  echo "package.sh: CARGO_TARGET_DIR must be $root/target (deploy/debian/assets names it)" >&2
  exit 2
fi
fail() { echo "package.sh: $*" >&2; exit 1; }

echo "-- cargo build --release (iosets, libiosets)"
cargo build --release --locked -p iosets-cli -p iosets-ffi
bin="$target/release/iosets"
version="$(sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -1)"

echo "-- generated files: manual pages, completions, iosets.pc"
gen="$target/release/package"
rm -rf "$gen"
mkdir -p "$gen/completions"
"$bin" man --out "$gen/man" >/dev/null
gzip -9n "$gen"/man/*.1
"$bin" completions bash >"$gen/completions/iosets.bash"
"$bin" completions zsh >"$gen/completions/_iosets"
"$bin" completions fish >"$gen/completions/iosets.fish"
sed -e "s|@PREFIX@|/usr|" -e "s|@LIBDIR@|/usr/lib|" -e "s|@VERSION@|$version|" \
    -e "s|@PRIVATE@|-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc|" \
    crates/ffi/iosets.pc.in >"$gen/iosets.pc"
pages=$(ls "$gen"/man | wc -l)
[[ $pages -ge 30 ]] || fail "only $pages manual pages generated"

echo "-- the package tree (deploy/debian/assets), stripped binaries, control files"
work_deb="$gen/deb"
pkg="$work_deb/debian/iosets"
rm -rf "$work_deb"
mkdir -p "$pkg/DEBIAN"
while read -r src dest mode; do
  [[ -z "$src" || "$src" == \#* ]] && continue
  if [[ "$dest" == */ ]]; then
    # shellcheck disable=SC2086
    for f in $src; do install -D -m "$mode" "$f" "$pkg/$dest$(basename "$f")"; done
  else
    install -D -m "$mode" "$src" "$pkg/$dest"
  fi
done <deploy/debian/assets
strip --strip-unneeded "$pkg/usr/bin/iosets" "$pkg/usr/lib/libiosets.so"
strip --strip-debug "$pkg/usr/lib/libiosets.a"
install -m 644 deploy/debian/conffiles "$pkg/DEBIAN/conffiles"
install -m 755 deploy/debian/postinst deploy/debian/postrm "$pkg/DEBIAN/"
command -v dpkg-shlibdeps >/dev/null || { apt-get update -qq && apt-get install -y -qq dpkg-dev >/dev/null; }
# dpkg-shlibdeps reads debian/control in the directory it runs in; the package's own is below.
: >"$work_deb/debian/control"
shlibs="$(cd "$work_deb" && dpkg-shlibdeps -O debian/iosets/usr/bin/iosets debian/iosets/usr/lib/libiosets.so)"
depends="${shlibs#shlibs:Depends=}"
[[ -n "$depends" && "$depends" != "$shlibs" ]] || fail "dpkg-shlibdeps gave no dependencies: $shlibs"
size="$(du -sk --exclude=DEBIAN "$pkg" | cut -f1)"
sed -e "s|@VERSION@|$version|" -e "s|@ARCH@|$(dpkg --print-architecture)|" \
    -e "s|@SIZE@|$size|" -e "s|@DEPENDS@|$depends|" deploy/debian/control >"$pkg/DEBIAN/control"
(cd "$pkg" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) \
  >"$pkg/DEBIAN/md5sums"
deb="$gen/iosets_${version}-1_$(dpkg --print-architecture).deb"
dpkg-deb --root-owner-group -Zxz --build "$pkg" "$deb" >/dev/null
echo "built $deb ($(du -k "$deb" | cut -f1) KiB)"

echo "-- contents"
listing="$(dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|')"
for f in /usr/bin/iosets /usr/lib/libiosets.so /usr/lib/libiosets.a /usr/include/iosets.h \
         /usr/include/agios.h /usr/lib/pkgconfig/iosets.pc /usr/share/man/man1/iosets.1.gz \
         /usr/share/man/man1/iosets-serve.1.gz /usr/share/bash-completion/completions/iosets \
         /usr/share/zsh/vendor-completions/_iosets /usr/share/fish/vendor_completions.d/iosets.fish \
         /lib/systemd/system/iosets.service /lib/systemd/system/iosets-mount.service \
         /etc/iosets/iosets.toml /etc/iosets/mount.env; do
  grep -qx "$f" <<<"$listing" || fail "$deb lacks $f"
done
control="$(dpkg-deb -f "$deb" Package Version Depends)"
grep -q "^Depends:.*fuse3" <<<"$control" || fail "the package does not depend on fuse3: $control"
echo "$control" | sed 's/^/  /'

if [[ $install_check -eq 1 ]]; then
  if [[ "$(id -u)" != 0 ]]; then
    fail "the install check needs root (dpkg -i); run as root or with --no-install"
  elif dpkg-query -W -f='${Status}' iosets 2>/dev/null | grep -q "installed"; then
    echo "-- install check skipped: an iosets package is already installed on this machine"
  else
    echo "-- dpkg -i, then the installed files at work"
    work="$(mktemp -d)"
    cleanup() { dpkg -P iosets >/dev/null 2>&1 || true; rm -rf "$work"; }
    trap cleanup EXIT
    dpkg -i "$deb" >/dev/null
    [[ "$(/usr/bin/iosets --version)" == "iosets $version" ]] || fail "installed iosets --version: $(/usr/bin/iosets --version)"
    [[ "$(pkg-config --modversion iosets)" == "$version" ]] || fail "pkg-config iosets: $(pkg-config --modversion iosets 2>&1)"
    [[ -L /usr/lib/libagios.so ]] || fail "postinst did not link /usr/lib/libagios.so"
    cat >"$work/t.c" <<'EOF'
#include <iosets.h>
#include <stdio.h>
#include <string.h>
int main(void) {
    iosets_scheduler *s = NULL;
    if (iosets_create("wfq", NULL, 0, &s) != IOSETS_OK || s == NULL) return 1;
    iosets_destroy(s);
    if (iosets_create("no-such-policy", NULL, 0, &s) == IOSETS_OK) return 2;
    printf("libiosets %s\n", iosets_version());
    return 0;
}
EOF
    # shellcheck disable=SC2046
    gcc -o "$work/t" "$work/t.c" $(pkg-config --cflags --libs iosets)
    out="$("$work/t")" || fail "a C program built with pkg-config against the installed library failed"
    [[ "$out" == "libiosets $version" ]] || fail "the C program printed: $out"
    zcat /usr/share/man/man1/iosets-serve.1.gz | grep -q -- "auth" || fail "iosets-serve.1 lacks --auth-file"
    bash -c 'source /usr/share/bash-completion/completions/iosets && complete -p iosets' >/dev/null \
      || fail "the bash completion does not register for iosets"
    if command -v systemd-analyze >/dev/null; then
      verify="$(systemd-analyze verify /lib/systemd/system/iosets.service /lib/systemd/system/iosets-mount.service 2>&1 || true)"
      # Outside a booted systemd (a container), verify still parses the units; report only
      # complaints about them, not about the machine.
      bad="$(grep -E 'iosets(-mount)?\.service' <<<"$verify" | grep -viE 'bus|not booted|Failed to (connect|prepare)' || true)"
      [[ -z "$bad" ]] || fail "systemd-analyze verify: $bad"
    fi
    mkdir -p "$work/srv"
    sed "s|/srv/iosets|$work/srv|" /etc/iosets/iosets.toml >"$work/iosets.toml"
    /usr/bin/iosets config check "$work/iosets.toml" >/dev/null 2>&1 \
      || fail "the shipped /etc/iosets/iosets.toml does not pass iosets config check"
    dpkg -P iosets >/dev/null
    for f in /usr/bin/iosets /usr/lib/libiosets.so /usr/lib/libagios.so /etc/iosets/iosets.toml; do
      [[ ! -e "$f" && ! -L "$f" ]] || fail "$f is left after dpkg -P"
    done
    echo "installed, used and purged cleanly"
  fi
fi

echo "-- cargo install --path crates/cli"
dest="$(mktemp -d)"
CARGO_TARGET_DIR="$target" cargo install --path crates/cli --locked --root "$dest" --quiet
[[ "$("$dest/bin/iosets" --version)" == "iosets $version" ]] || fail "cargo install gave $("$dest/bin/iosets" --version)"
rm -rf "$dest"
echo "package.sh: ok"
