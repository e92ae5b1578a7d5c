#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs the libFuzzer targets of tests/fuzz (a clang build in build-fuzz/).
#
#   scripts/test/fuzz.sh                 CI: each target for MN_FUZZ_SECONDS (30) from
#                                   the committed corpus; new inputs go to a
#                                   scratch dir. A crash or a broken property
#                                   prints the input (hex and base64) and fails.
#   scripts/test/fuzz.sh --long MINUTES  MINUTES in all, split over the targets, niced;
#                                   then merges the new finds that add coverage
#                                   into tests/fuzz/corpus (-merge=1).
#   scripts/test/fuzz.sh [...] TARGET... only these targets (hostlist, sysfs, ...)
#
# MN_FUZZ_JOBS targets run at once (default: one per core).
# Prints per target: executions, coverage (cov: edges, ft: features), corpus
# size and the result; the last line is "fuzz: N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
top=$(pwd)
long=0
minutes=0
if [ "${1:-}" = --long ]; then
  long=1
  minutes=${2:?usage: scripts/test/fuzz.sh --long MINUTES [TARGET...]}
  shift 2
fi
# Every target Makefile.am builds (FUZZ_TARGETS), so a new one is never left out.
mapfile -t all < <(awk '/^FUZZ_TARGETS \+?= / {on = 1} on {for (i = 1; i <= NF; i++) if ($i ~ /^tests\/fuzz\/fuzz_/) {sub(/^tests\/fuzz\/fuzz_/, "", $i); print $i}; on = /\\$/}' Makefile.am)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")

command -v clang++ >/dev/null || { echo "fuzz: clang++ missing (Debian: clang libclang-rt-14-dev)"; exit 1; }
source scripts/test/build-copy.sh
build=${MN_FUZZ_BUILD:-$top/build-fuzz}  # a long run beside CI runs gets its own
echo "== fuzz: building the targets with clang (libFuzzer, ASan, UBSan) in build-fuzz/"
build_copy "$build" CXX=clang++ --enable-fuzz CXXFLAGS="-g1 -O1" || { echo "fuzz: configure failed"; exit 1; }
make -s -C "$build" -j2 fuzz >"$build/make.out" 2>&1 || { tail -30 "$build/make.out"; echo "fuzz: build failed"; exit 1; }

if [ $long = 1 ]; then
  secs=$((minutes * 60 * ${MN_FUZZ_JOBS:-$(nproc)} / ${#targets[@]}))
  nice=(nice -n 19)
else
  secs=${MN_FUZZ_SECONDS:-30}
  nice=()
fi
work=$(mktemp -d /tmp/mn-fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work  # the sysfs and hwloc targets write their inputs here

# One target's run: its log, exit code and seconds into $work.
fuzz_one() {
  local t=$1 start
  mkdir -p "$work/new-$t" "$work/art-$t"
  start=$(date +%s)
  "${nice[@]}" "$build/tests/fuzz/fuzz_$t" -max_total_time="$secs" -timeout=20 -rss_limit_mb=4096 \
    -print_final_stats=1 -artifact_prefix="$work/art-$t/" "$work/new-$t" "$top/tests/fuzz/corpus/$t" \
    >"$work/$t.log" 2>&1
  echo $? >"$work/$t.rc"
  echo $(($(date +%s) - start)) >"$work/$t.took"
}
# MN_FUZZ_JOBS targets at a time (default: one per core), so the run's
# tail in CI, when the tests beside it are over, keeps every core busy.
jobs=${MN_FUZZ_JOBS:-$(nproc)}
running=0
for t in "${targets[@]}"; do
  [ -x "$build/tests/fuzz/fuzz_$t" ] || continue
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
  fuzz_one "$t" &
  running=$((running + 1))
done
wait

passed=0
failed=0
table=""
for t in "${targets[@]}"; do
  bin=$build/tests/fuzz/fuzz_$t
  seeds=$top/tests/fuzz/corpus/$t
  [ -x "$bin" ] || { echo "fuzz: no target $t"; failed=$((failed + 1)); continue; }
  rc=$(cat "$work/$t.rc" 2>/dev/null || echo 1)
  took=$(cat "$work/$t.took" 2>/dev/null || echo 0)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t.log" | tail -1)
  last=$(grep -E '^#[0-9]+' "$work/$t.log" | grep -E 'cov: ' | tail -1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([^ ]*\).*/\1/p' <<<"$last")
  # A slow-unit file is libFuzzer's note that one input took over 10 s
  # (on a machine starved of CPU, as a busy CI runner is); rc 0 says it
  # still ended within -timeout. Crashes, timeouts, leaks and broken
  # properties leave other files, and a non-zero rc.
  slow=$(ls "$work/art-$t"/slow-unit-* 2>/dev/null | wc -l)
  art=$(ls "$work/art-$t"/* 2>/dev/null | grep -v '/slow-unit-' | head -1)
  if [ $rc -eq 0 ] && [ -z "$art" ]; then
    result=ok
    [ "$slow" -gt 0 ] && result="ok ($slow input(s) over 10 s, within -timeout 20)"
    passed=$((passed + 1))
  else
    result="FAILED (rc $rc)"
    failed=$((failed + 1))
    echo "---- fuzz_$t failed; its report:"
    grep -E 'fuzz property failed|^  |ERROR: |SUMMARY|runtime error' "$work/$t.log" | head -20
    if [ -n "$art" ]; then
      echo "---- the input ($(basename "$art"), $(stat -c %s "$art") bytes), hex:"
      od -An -tx1 -v "$art" | head -64
      echo "---- base64 (save with: base64 -d >tests/fuzz/corpus/$t/regress-NAME):"
      base64 -w0 "$art" | head -c 65536
      echo
      mkdir -p "$build/crashes"
      cp "$art" "$build/crashes/$t-$(basename "$art")"
      echo "---- kept as $build/crashes/$t-$(basename "$art"); replay: $bin <file>"
    else
      tail -20 "$work/$t.log"
    fi
  fi
  line=$(printf '%-15s %4ss %11s execs  cov %-6s ft %-6s corpus %-12s %s' "$t" "$took" "${execs:-?}" "${cov:-?}" \
    "${ft:-?}" "${corp:-?}" "$result")
  echo "$line"
  table+="$line"$'\n'
  if [ $long = 1 ] && [ "$result" = ok ]; then
    # Only the finds that add coverage, and none above 64 KiB.
    before=$(ls "$seeds" | wc -l)
    "${nice[@]}" "$bin" -merge=1 -max_len=65536 "$seeds" "$work/new-$t" >"$work/$t.merge.log" 2>&1 ||
      { echo "fuzz: merge for $t failed"; tail -5 "$work/$t.merge.log"; }
    echo "               merged $(($(ls "$seeds" | wc -l) - before)) new inputs into tests/fuzz/corpus/$t"
  fi
done
echo
echo "== fuzz summary ($([ $long = 1 ] && echo "long run, $minutes min" || echo "CI, ${secs} s per target"))"
printf '%s' "$table"
echo "fuzz: $passed passed, $failed failed"
[ $failed -eq 0 ]
