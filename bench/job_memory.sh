#!/usr/bin/env bash
# The job book's memory bound, measured on a real server process (issue 13): RSS before, after
# 100,000 distinct job ids (one 1-byte write each, automatic priorities on), and after the forget
# interval. Run twice: with the default max_jobs (16,384) and with max_jobs = 100,000 (every job
# kept: the per-job cost at scale).
#   bash bench/job_memory.sh            # 100,000 jobs
#   JOBS=20000 bash bench/job_memory.sh
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${JOBS:-100000}
forget=${FORGET_S:-5}
cargo build -q --release -p iosets-cli
cargo build -q --release -p iosets-server --example many_jobs
bin=target/release/iosets
load=target/release/examples/many_jobs
work=$(mktemp -d /tmp/iosets-jobmem.XXXXXX)
trap 'kill $pid 2>/dev/null || true; cat "$work/serve.log" >&2; rm -rf "$work"' EXIT
echo "secret" > "$work/tok"
mkdir -p "$work/root"
kib() { awk -v k="$2" '$1 == k":" {print $2}' "/proc/$1/status"; }
stat_field() { IOSETS_TOKEN=secret "$bin" ctl --server "$1" --json stats 2>/dev/null | python3 -c "import json,sys; print(json.load(sys.stdin)['$2'])"; }
echo "| max_jobs | RSS at start | RSS after $jobs jobs | jobs kept | book bytes | RSS after forgetting | jobs kept | book bytes | load avg |"
echo "|---|---|---|---|---|---|---|---|---|"
for max in 16384 100000; do
  port=$((7400 + RANDOM % 500))
  addr=127.0.0.1:$port
  "$bin" serve --root "$work/root" --listen "$addr" --insecure-loopback --auto-priority --forget-idle-s "$forget" \
    --max-jobs "$max" --token-file "$work/tok" >"$work/serve.log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do grep -q listening "$work/serve.log" && break; sleep 0.1; done
  start=$(kib $pid VmRSS)
  "$load" "$addr" "$jobs"
  peak=$(kib $pid VmRSS)
  kept=$(stat_field "$addr" jobs_known)
  bytes=$(stat_field "$addr" job_book_bytes)
  sleep $((forget + 3))
  after=$(kib $pid VmRSS)
  kept2=$(stat_field "$addr" jobs_known)
  bytes2=$(stat_field "$addr" job_book_bytes)
  echo "| $max | $((start / 1024)) MiB | $((peak / 1024)) MiB | $kept | $((bytes / 1024)) KiB | $((after / 1024)) MiB | $kept2 | $((bytes2 / 1024)) KiB | $(cut -d' ' -f1-3 /proc/loadavg) |"
  kill -TERM $pid; wait $pid || true
done
