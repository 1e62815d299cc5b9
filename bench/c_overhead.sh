#!/usr/bin/env bash
# Overhead of libiosets in C, by the method of seed 000 section 5 (time from add-request until the
# request is handed back for processing, averaged over all requests), and throughput (requests
# added, handed out and released per second), with T producer threads and a pool of W workers.
#
#   bash bench/c_overhead.sh                      # iosets only
#   AGIOS_SRC=/path/to/agios bash bench/c_overhead.sh   # also AGIOS, same harness, same run
#
# Environment: RUNS (default 3), THREADS (default "1 2 4 8 16"), SIZES (requests per thread,
# default "100 10000"), WORKERS (default 4), THINK_NS (default 10: agios_test's time between
# requests and processing time in seed 000; nanosleep(10 ns) sleeps the timer slack, ~50-60 µs
# here), IDLE_S (default 2), OUT (default target-*/c-overhead: CSV files and the summary).
#
# AGIOS (github.com/francielizanon/agios) is never copied into this repository: give its checkout
# in AGIOS_SRC; it is built from $AGIOS_SRC/src/*.c with libconfig (apt-get install libconfig-dev)
# into $OUT/agios. Measured the same way: the same C harness (bench/c_overhead_agios.c) is linked
# once against libagios.so and once against libiosets (its AGIOS shim). The native API has its own
# harness (bench/c_overhead_native.c): producers iosets_submit, workers iosets_next/complete.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-$root/target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac
out="${OUT:-$target/c-overhead}"
runs="${RUNS:-3}"
threads="${THREADS:-1 2 4 8 16}"
sizes="${SIZES:-100 10000}"
workers="${WORKERS:-4}"
think="${THINK_NS:-10}"
idle_s="${IDLE_S:-2}"
mkdir -p "$out"
rm -f "$out/failures.txt"

cargo build -p iosets-ffi --release --locked --quiet
lib="$target/release"
cflags=(-std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -pthread -I "$root/include")
cc "${cflags[@]}" bench/c_overhead_native.c -o "$out/native" -L "$lib" -liosets -Wl,-rpath,"$lib"
cc "${cflags[@]}" bench/c_overhead_agios.c -o "$out/shim" -L "$lib" -liosets -Wl,-rpath,"$lib"

have_agios=0
if [[ -n "${AGIOS_SRC:-}" ]]; then
  mkdir -p "$out/agios"
  # AGIOS's own sources and headers; its agios.h is used for the AGIOS build only.
  cc -O2 -fPIC -shared -pthread -I "$AGIOS_SRC/src" "$AGIOS_SRC"/src/*.c -lconfig -lm \
     -o "$out/agios/libagios.so"
  cc "${cflags[@]}" -I "$AGIOS_SRC/src" bench/c_overhead_agios.c -o "$out/agios/bench" \
     -L "$out/agios" -lagios -Wl,-rpath,"$out/agios"
  have_agios=1
fi

conf() { # conf NAME ALGORITHM [EXTRA] -> path of a libconfig file
  local f="$out/$1.conf"
  {
    echo "library_options: {"
    echo "  trace = false; trace_file_prefix = \"/tmp/agios_tracefile\"; trace_file_sufix = \"out\";"
    echo "  default_algorithm = \"$2\"; waiting_time = 900000; aioli_quantum = 65536; mlf_quantum = 8192;"
    echo "  select_algorithm_period = 1000; select_algorithm_min_reqnumber = 1; starting_algorithm = \"SJF\";"
    echo "  performance_values = 5; enable_SW = false; SW_window = 1000; twins_window = 1000;"
    echo "  max_trace_buffer_size = 32768; ${3:-}"
    echo "};"
  } > "$f"
  echo "$f"
}

csv="$out/results.csv"
echo "run,library,policy,threads,per_thread,workers,requests,mean_us,throughput,cpu_s,wall_s" > "$csv"
idle_csv="$out/idle.csv"
echo "run,library,policy,wall_s,cpu_s" > "$idle_csv"
echo "machine: $(nproc) CPUs; load before: $(cut -d' ' -f1-3 /proc/loadavg)" > "$out/machine.txt"

for run in $(seq 1 "$runs"); do
  for n in $sizes; do
    for t in $threads; do
      for p in noop timeorder wfq iosets; do
        line="$(timeout 600 "$out/native" run "$p" "$t" "$n" "$workers" "$think")" ||
          { echo "FAILED: native $p T=$t N=$n (exit $?)" | tee -a "$out/failures.txt" >&2; continue; }
        echo "$run,iosets-native,$p,$line" >> "$csv"
      done
      for a in NOOP TO wfq iosets; do
        line="$(timeout 600 "$out/shim" run "$(conf "shim-$a" "$a")" "$t" "$n" "$workers" "$think")" ||
          { echo "FAILED: shim $a T=$t N=$n (exit $?)" | tee -a "$out/failures.txt" >&2; continue; }
        echo "$run,iosets-shim,$a,$line" >> "$csv"
      done
      if [[ $have_agios -eq 1 ]]; then
        for a in NOOP TO SJF; do
          line="$(timeout 600 "$out/agios/bench" run "$(conf "agios-$a" "$a")" "$t" "$n" "$workers" "$think")" ||
            { echo "FAILED: agios $a T=$t N=$n (exit $?)" | tee -a "$out/failures.txt" >&2; continue; }
          echo "$run,agios,$a,$line" >> "$csv"
        done
      fi
    done
  done
  for p in noop wfq iosets; do
    echo "$run,iosets-native,$p,$("$out/native" idle "$p" "$idle_s")" >> "$idle_csv"
  done
  echo "$run,iosets-shim,TO,$("$out/shim" idle "$(conf shim-TO TO)" "$idle_s")" >> "$idle_csv"
  if [[ $have_agios -eq 1 ]]; then
    echo "$run,agios,TO,$("$out/agios/bench" idle "$(conf agios-TO TO)" "$idle_s")" >> "$idle_csv"
  fi
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/machine.txt"
python3 bench/c_overhead_table.py "$csv" "$idle_csv" "$out/machine.txt" | tee "$out/summary.md"
