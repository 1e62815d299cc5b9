#!/usr/bin/env bash
# libiosets' AGIOS shim against AGIOS itself (issue 13, goal 1), on this machine, same run:
#  1. AGIOS's own test/agios_test.c, unchanged, builds against the installed shim with only the
#     shim's headers and -lagios;
#  2. throughput (requests added -> called back -> released per second, library only: the
#     callback releases the request itself, no thread per request, no hand-off of the harness's
#     own) for every AGIOS algorithm at T = 1, 2, 4, 8, 16 producer threads;
#  3. time in library per request (seed 000 section 5: add -> callback, averaged over all
#     requests; 100 requests per thread, 10 ns think time, 4 harness workers release);
#  4. CPU used by an idle, initialised library;
#  5. reliability: agios_test itself, unchanged, RELIABILITY_RUNS times per library with a per-run
#     timeout: runs that hang (timeout) or crash; and every harness run checks that each request
#     was called back exactly once (exit 3 otherwise).
# AGIOS is built twice from AGIOS_SRC (never copied into this repository): CMake Release
# (-O3 -DNDEBUG) and CMake's default build type (no optimisation flags).
#
#   AGIOS_SRC=/path/to/agios bash bench/agios_test.sh
#
# Environment: RUNS (3), THREADS ("1 2 4 8 16"), ALGORITHMS (all nine of AGIOS), N (10000 requests
# per thread, throughput), PACED_N (100, time in library), RELIABILITY_RUNS (1000), RUN_TIMEOUT
# (seconds per reliability run, 10), OUT (target/agios-bench). Needs cmake and libconfig-dev.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
: "${AGIOS_SRC:?set AGIOS_SRC to a checkout of github.com/francielizanon/agios}"
AGIOS_SRC="$(cd "$AGIOS_SRC" && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac
out="${OUT:-$target/agios-bench}"
runs="${RUNS:-3}"
threads="${THREADS:-1 2 4 8 16}"
algorithms="${ALGORITHMS:-NOOP TO TO-agg SJF MLF aIOLi SW TWINS WFQ}"
n="${N:-10000}"
paced_n="${PACED_N:-100}"
rel_runs="${RELIABILITY_RUNS:-1000}"
run_timeout="${RUN_TIMEOUT:-10}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
rm -f "$out/failures.txt"
echo "machine: $(nproc) CPUs; load before: $(cut -d' ' -f1-3 /proc/loadavg)" > "$out/machine.txt"

# 1. Builds: AGIOS twice, libiosets, the shim installed into a prefix.
for kind in release default; do
  bt=""; [[ $kind == release ]] && bt="-DCMAKE_BUILD_TYPE=Release"
  mkdir -p "$out/agios-$kind"
  (cd "$out/agios-$kind" && cmake $bt "$AGIOS_SRC" >/dev/null && make -j2 >/dev/null 2>&1) ||
    { echo "building AGIOS ($kind) failed" >&2; exit 1; }
done
cargo build -p iosets-ffi --release --locked --quiet
prefix="$out/shim-prefix"
bash crates/ffi/install.sh --prefix "$prefix" --no-build >/dev/null
echo "== AGIOS's test/agios_test.c, unchanged, against the shim's headers and -lagios"
cc -Wall -Werror -I "$prefix/include" "$AGIOS_SRC/test/agios_test.c" -o "$out/shim-agios_test" \
   -L "$prefix/lib" -lagios -lpthread -Wl,-rpath,"$prefix/lib"
echo "built $out/shim-agios_test"
cflags=(-std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -pthread)
cc "${cflags[@]}" -I "$prefix/include" bench/c_overhead_agios.c -o "$out/bench-shim" \
   -L "$prefix/lib" -lagios -Wl,-rpath,"$prefix/lib"
for kind in release default; do
  cc "${cflags[@]}" -I "$AGIOS_SRC/src" bench/c_overhead_agios.c -o "$out/bench-agios-$kind" \
     -L "$out/agios-$kind" -lagios -Wl,-rpath,"$out/agios-$kind"
done
libs="agios-release agios-default shim"

echo "1024 2048 3072 4096" > "$out/wfq.conf"
conf() { # conf ALGORITHM -> path of a complete AGIOS configuration file (AGIOS reads every key)
  local f="$out/conf-$1.conf"
  cat > "$f" <<CONF
library_options: {
  trace = false; trace_file_prefix = "/tmp/agios_tracefile"; trace_file_sufix = "out";
  default_algorithm = "$1"; waiting_time = 900000; aioli_quantum = 65536; mlf_quantum = 8192;
  select_algorithm_period = 1000; select_algorithm_min_reqnumber = 1; starting_algorithm = "SJF";
  performance_values = 5; enable_SW = false; SW_window = 1000; twins_window = 1000;
  max_trace_buffer_size = 32768; wfq_conf = "$out/wfq.conf";
};
CONF
  echo "$f"
}

csv="$out/results.csv"
echo "run,library,algorithm,mode,threads,per_thread,workers,requests,mean_us,throughput,cpu_s,wall_s" > "$csv"
measure() { # measure RUN LIB ALG MODE T PER_THREAD WORKERS THINK_NS
  local line rc=0
  line="$(timeout 300 "$out/bench-$2" run "$(conf "$3")" "$5" "$6" "$7" "$8" 2>>"$out/stderr.txt")" || rc=$?
  if [[ $rc -ne 0 ]]; then
    # exit 124: timeout (a hang); 3: a request lost or called back twice; 139: SIGSEGV.
    echo "FAILED: $2 $3 $4 T=$5 run $1 (exit $rc)" | tee -a "$out/failures.txt" >&2
    return 0
  fi
  echo "$1,$2,$3,$4,$line" >> "$csv"
}
echo "== throughput and time in library ($runs runs; load $(cut -d' ' -f1 /proc/loadavg))"
for run in $(seq 1 "$runs"); do
  for alg in $algorithms; do
    for t in $threads; do
      for lib in $libs; do
        measure "$run" "$lib" "$alg" flood "$t" "$n" 0 0
        measure "$run" "$lib" "$alg" paced "$t" "$paced_n" 4 10
      done
    done
  done
  echo "  run $run done; load $(cut -d' ' -f1-3 /proc/loadavg)"
done

idle_csv="$out/idle.csv"
echo "run,library,wall_s,cpu_s" > "$idle_csv"
for run in $(seq 1 "$runs"); do
  for lib in $libs; do
    echo "$run,$lib,$("$out/bench-$lib" idle "$(conf TO)" 2)" >> "$idle_csv"
  done
done

# 5. agios_test itself, unchanged: AGIOS Release's build and the shim's.
echo "== reliability: agios_test x $rel_runs per library (timeout ${run_timeout} s per run)"
rel_csv="$out/reliability.csv"
echo "library,run,algorithm,threads,status" > "$rel_csv"
rel_algs=($algorithms)
rel_threads=($threads)
for lib in agios-release shim; do
  exe="$out/agios-release/agios_test"
  [[ $lib == shim ]] && exe="$out/shim-agios_test"
  for i in $(seq 1 "$rel_runs"); do
    alg="${rel_algs[$(( i % ${#rel_algs[@]} ))]}"
    t="${rel_threads[$(( (i / ${#rel_algs[@]}) % ${#rel_threads[@]} ))]}"
    rc=0
    # seed 000 section 5: T threads, 1 file, 100 requests each, 4 queue ids, sequential, 1 KiB,
    # 10 ns between requests and to process them.
    (cd "$out" && AGIOS_CONF="$(conf "$alg")" timeout -s KILL "$run_timeout" "$exe" "$t" 1 100 4 100 1024 10 10 "$i" \
       >/dev/null 2>&1) || rc=$?
    case $rc in 0) st=ok ;; 137) st=hang ;; *) st="crash($rc)" ;; esac
    echo "$lib,$i,$alg,$t,$st" >> "$rel_csv"
  done
  rm -f "$out"/output_*.csv
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/machine.txt"
python3 bench/agios_table.py "$out" | tee "$out/summary.md"
