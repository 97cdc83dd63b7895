#!/usr/bin/env bash
# A fuzzing campaign (docs/RELIABILITY.md): runs libFuzzer targets side by side, each on its own number of
# processes, for a bounded time, from the committed seeds, and prints what each did: executions (summed over
# its processes), edges covered, findings. Findings (crash-*, leak-*, timeout-* files) stay under OUT.
#
#   tests/fuzz/campaign.sh BUILD_FUZZ SECONDS OUT target:processes[:runs]...
#   e.g. tests/fuzz/campaign.sh build-fuzz 540 /tmp/campaign form:7 params:5 png:4:1000000
#
# runs: each process stops after that many executions and a fresh one takes its place until SECONDS.
# fuzz_png needs it: its encoder starts threads, and AddressSanitizer keeps every thread's context for the
# life of the process (google/sanitizers#232), about 300 bytes each, and dies at 4,194,304 threads
# (google/sanitizers#681): one process grew by 1 KiB an execution, 2.6 GB after 2.8 million.
set -u
build=$1 seconds=$2 out=$3
shift 3
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$out"
for spec in "$@"; do
  IFS=: read -r target procs runs <<< "$spec"
  dir="$out/$target"
  mkdir -p "$dir/corpus"
  cp -r "$here/corpus/$target/." "$dir/corpus/"
  flags=(corpus "-dict=$here/$target.dict" -print_final_stats=1 -max_len=65536 -timeout=10 -rss_limit_mb=4096
         -artifact_prefix="$dir/")
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  if [ -z "$runs" ]; then
    # -jobs with -workers: that many processes, each writing fuzz-N.log in the working directory, sharing
    # the corpus directory; each stops at max_total_time.
    (cd "$dir" && "$OLDPWD/$build/tests/fuzz/fuzz_$target" "${flags[@]}" -max_total_time="$seconds" \
       -jobs="$procs" -workers="$procs" > "$dir/main.log" 2>&1) &
  else
    # procs loops of processes, each for runs executions or the time left, logs numbered per loop. A loop
    # ends at the time (max_total_time=0 would mean no limit to libFuzzer), or when a process fails: a finding,
    # or a fuzzer that cannot run at all, which must not be started again and again.
    end=$((SECONDS + seconds))
    for ((p = 0; p < procs; p++)); do
      (cd "$dir" && n=0 && while left=$((end - SECONDS)) && [ "$left" -gt 0 ] &&
                                 ! ls "$dir" | grep -qE '^(crash|leak|timeout|oom)-'; do
         "$OLDPWD/$build/tests/fuzz/fuzz_$target" "${flags[@]}" -runs="$runs" -max_total_time="$left" \
           > "$dir/fuzz-$p-$n.log" 2>&1 || break
         n=$((n + 1))
       done) &
    done
  fi
done
wait
printf '| target | processes | executions | seconds | edges | findings |\n|---|---|---|---|---|---|\n'
for spec in "$@"; do
  IFS=: read -r target procs runs <<< "$spec"
  dir="$out/$target"
  execs=$(cat "$dir"/fuzz-*.log 2>/dev/null | sed -n 's/^stat::number_of_executed_units: *//p' | awk '{s += $1} END {print s}')
  edges=$(cat "$dir"/fuzz-*.log 2>/dev/null | sed -n 's/.*cov: \([0-9]*\).*/\1/p' | sort -n | tail -1)
  found=$(ls "$dir" | grep -cE '^(crash|leak|timeout|oom)-')
  printf '| fuzz_%s | %s | %s | %s | %s | %s |\n' "$target" "$procs" "${execs:-?}" "$seconds" "${edges:-?}" "$found"
done
