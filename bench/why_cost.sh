#!/usr/bin/env bash
# What splitting every request's queue wait by cause (crates/runtime/src/why.rs, docs/why.md)
# costs the runtime: the same code built with the split and without it (the runtime's feature
# `bench-without-wait-causes`, which leaves the snapshot, the split and its record out), measured
# in the same run (BENCHMARKS.md, "Wait causes: what `iosets ctl why` costs the runtime").
#
#  1. instructions per request, `valgrind --tool=callgrind` on the hot_path example (one thread,
#     a clock that steps 1 µs per reading: the same count every run, whatever the load);
#  2. the criterion throughput bench (4 producers + 4 workers), RUNS runs, the two builds
#     alternating within each run; every run's median per policy and the ratio with / without.
#
#   bash bench/why_cost.sh
# Environment: RUNS (3), N (50000 requests for callgrind), POLICIES ("noop iosets wfq"),
# SKIP_CRITERION=1 (callgrind only), OUT (target/why-cost).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-$root/target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac
out="${OUT:-$target/why-cost}"
runs="${RUNS:-3}"
n="${N:-50000}"
policies="${POLICIES:-noop iosets wfq}"
feature=bench-without-wait-causes
mkdir -p "$out"
out="$(cd "$out" && pwd)"

# Builds first (both variants), so that no measure runs while compiling.
exe_of() { # exe_of KIND TARGET-ARGS... -> path of the executable cargo built
  python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == sys.argv[1]:
        print(m["executable"])' "$1"
}
for variant in with without; do
  flags=()
  [[ $variant == without ]] && flags=(--features "$feature")
  exe="$(cargo build --release --locked -q -p iosets-runtime --example hot_path "${flags[@]}" \
         --message-format=json | exe_of hot_path)"
  cp "$exe" "$out/hot_path-$variant"
  if [[ -z ${SKIP_CRITERION:-} ]]; then
    exe="$(cargo bench --locked -q -p iosets-runtime --bench throughput --no-run "${flags[@]}" \
           --message-format=json | exe_of throughput)"
    cp "$exe" "$out/throughput-$variant"
  fi
done

echo "machine: $(nproc) CPUs; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "## Instructions per request (callgrind, hot_path POLICY $n)"
echo
echo "| policy | without the split | with it | with / without |"
echo "|---|---|---|---|"
for p in $policies; do
  declare -A ir=()
  for variant in without with; do
    valgrind --tool=callgrind --callgrind-out-file="$out/callgrind-$variant-$p.out" \
      "$out/hot_path-$variant" "$p" "$n" > /dev/null 2> "$out/callgrind-$variant-$p.log"
    ir[$variant]="$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$out/callgrind-$variant-$p.log")"
  done
  python3 -c 'import sys; a, b, n = map(int, sys.argv[1:4]); print(f"| {sys.argv[4]} | {a/n:,.0f} | {b/n:,.0f} | {b/a:.3f}x |")' \
    "${ir[without]}" "${ir[with]}" "$n" "$p"
done
[[ -n ${SKIP_CRITERION:-} ]] && exit 0

echo
echo "## Throughput bench (criterion median per run; the two builds alternate within a run)"
rm -rf "$out/criterion"
for run in $(seq 1 "$runs"); do
  for variant in without with; do
    home="$out/criterion/$run/$variant"
    mkdir -p "$home"
    CRITERION_HOME="$home" "$out/throughput-$variant" --bench > /dev/null 2>&1
  done
  cut -d' ' -f1-3 /proc/loadavg > "$out/criterion/$run/loadavg"
done
python3 - "$out/criterion" "$runs" "$policies" <<'PY'
import json, statistics, sys
from pathlib import Path
root, runs, policies = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3].split()
def median(run, variant, policy):
    [est] = (root / str(run) / variant).glob(f"runtime_throughput/{policy}/*/new/estimates.json")
    return json.loads(est.read_text())["median"]["point_estimate"] / 1e6
print()
print("| run | load after | " + " | ".join(f"{p} without → with (ratio)" for p in policies) + " |")
print("|---|---|" + "---|" * len(policies))
ratios = {p: [] for p in policies}
for run in range(1, runs + 1):
    cells = []
    for p in policies:
        a, b = median(run, "without", p), median(run, "with", p)
        ratios[p].append(b / a)
        cells.append(f"{a:.1f} → {b:.1f} ms ({b / a:.3f}x)")
    load = (root / str(run) / "loadavg").read_text().strip()
    print(f"| {run} | {load} | " + " | ".join(cells) + " |")
print("| median ratio | | " + " | ".join(f"{statistics.median(ratios[p]):.3f}x" for p in policies) + " |")
PY
