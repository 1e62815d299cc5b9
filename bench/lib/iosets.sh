# What the bench scripts that start iosets share (sourced; the caller defines `die`).

# `iosets serve` makes the node's cluster secret when there is none; a run that made it removes
# it again (`forget_made_secret`, at exit): tests expect a node without one.
[ -e /etc/iosets/secret ] && iosets_made_secret=0 || iosets_made_secret=1
forget_made_secret() { [ "$iosets_made_secret" = 0 ] || rm -f /etc/iosets/secret; }

# iosets_serve BIN ROOT LOG TOKEN [ARGS...]: `BIN serve` of ROOT on loopback, on a port the
# kernel picks, in the background, its output in LOG. Sets served_pid, and served_addr from
# the server's first line (host:port), or dies with the log.
iosets_serve() {
  local bin=$1 root=$2 log=$3 token=$4 port=""
  shift 4
  : >"$log"
  "$bin" serve --root "$root" --listen 127.0.0.1:0 --token-file "$token" "$@" >"$log" 2>&1 &
  served_pid=$!
  for _ in $(seq 100); do
    port=$(sed -n 's/^iosets serve: listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log")
    [ -z "$port" ] || break
    sleep 0.1
  done
  [ -n "$port" ] || { cat "$log" >&2; die "a server did not start (its log: $log)"; }
  served_addr=127.0.0.1:$port
}

# wait_mounted DIR...: each is a mount point within 10 s, or the script dies.
wait_mounted() {
  local m
  for m in "$@"; do
    for _ in $(seq 100); do mountpoint -q "$m" && break; sleep 0.1; done
    mountpoint -q "$m" || die "$m is not mounted"
  done
}

# bench_scratch NAME: a scratch tmpfs for a bench (sets `work`, a new /tmp/NAME.XXXXXX with a
# client token in $work/token) and the arrays `pids` and `mnts` the bench adds what it starts
# to; at exit every mount in `mnts` is unmounted, every process in `pids` killed, the tmpfs
# removed and a secret this run made forgotten. `bench_stop` unmounts and kills what was
# started so far (between two configurations).
bench_stop() {
  local m
  for m in "${mnts[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
  mnts=()
  [ ${#pids[@]} = 0 ] || { kill "${pids[@]}" 2>/dev/null || true; wait "${pids[@]}" 2>/dev/null || true; }
  pids=()
}
bench_cleanup() {
  set +e
  bench_stop
  umount "$work"
  rmdir "$work"
  forget_made_secret
}
bench_scratch() {
  work=$(mktemp -d "/tmp/$1.XXXXXX")
  mount -t tmpfs -o size=1g tmpfs "$work"
  pids=() mnts=()
  trap bench_cleanup EXIT
  head -c 24 /dev/urandom | base64 >"$work/token"
  chmod 600 "$work/token"
}
