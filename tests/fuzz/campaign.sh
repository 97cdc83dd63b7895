#!/usr/bin/env bash
# A fuzzing campaign (docs/RELIABILITY.md): runs libFuzzer targets side by side, each on its own number of
# processes, for a bounded time, from the committed seeds, and prints what each did: executions (summed over
# its processes), edges covered, findings. Findings (crash-*, leak-*, timeout-* files) stay under OUT.
#
#   tests/fuzz/campaign.sh BUILD_FUZZ SECONDS OUT target:processes...
#   e.g. tests/fuzz/campaign.sh build-fuzz 540 /tmp/campaign form:7 params:5 png:4
set -u
build=$1 seconds=$2 out=$3
shift 3
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$out"
for spec in "$@"; do
  target=${spec%%:*} procs=${spec##*:}
  dir="$out/$target"
  mkdir -p "$dir/corpus"
  cp -r "$here/corpus/$target/." "$dir/corpus/"
  # -jobs with -workers: that many processes, each writing fuzz-N.log in the working directory, sharing the
  # corpus directory; each stops at max_total_time.
  (cd "$dir" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
     "$OLDPWD/$build/tests/fuzz/fuzz_$target" corpus "-dict=$here/$target.dict" -max_total_time="$seconds" \
     -print_final_stats=1 -max_len=65536 -timeout=10 -rss_limit_mb=4096 -jobs="$procs" -workers="$procs" \
     -artifact_prefix="$dir/" > "$dir/main.log" 2>&1) &
done
wait
printf '| target | processes | executions | seconds | edges | findings |\n|---|---|---|---|---|---|\n'
for spec in "$@"; do
  target=${spec%%:*} procs=${spec##*:}
  dir="$out/$target"
  execs=$(cat "$dir"/fuzz-*.log 2>/dev/null | sed -n 's/^stat::number_of_executed_units: *//p' | awk '{s += $1} END {print s}')
  edges=$(cat "$dir"/fuzz-*.log 2>/dev/null | sed -n 's/.*cov: \([0-9]*\).*/\1/p' | sort -n | tail -1)
  found=$(ls "$dir" | grep -cE '^(crash|leak|timeout|oom)-')
  printf '| fuzz_%s | %s | %s | %s | %s | %s |\n' "$target" "$procs" "${execs:-?}" "$seconds" "${edges:-?}" "$found"
done
