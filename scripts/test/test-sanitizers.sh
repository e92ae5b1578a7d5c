#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Every test under AddressSanitizer and UBSan: an out-of-tree build of the
# working tree in build-asan/ (./configure --enable-sanitizers, gcc), then
#   1. make check there: the CMocka tests and the fuzz targets' corpora
#      (tests/fuzz/corpus, replayed without libFuzzer);
#   2. the integration tests (CI's subset; MN_SANITIZERS_FULL=1 every file)
#      on the local cluster with the sanitized plugin
#      loaded into slurmstepd (the ASan runtime preloaded into slurmd, see
#      MN_SLURMD_PRELOAD in scripts/cluster/local-cluster.sh) and into srun, and the
#      sanitized mn-preflight; any sanitizer report file fails the run.
#   scripts/test/test-sanitizers.sh [--unit-only | --integration-only]
# (scripts/test.sh runs the two halves apart: the build and step 1 beside the
# plain integration tests, step 2 when the cluster is free.)
# The last line is "sanitizers: N passed, M failed" (tests, as test.sh counts).
set -uo pipefail
cd "$(dirname "$0")/../.."
top=$(pwd)
unit_only=0
integration_only=0
[ "${1:-}" = --unit-only ] && unit_only=1
[ "${1:-}" = --integration-only ] && integration_only=1
build=$top/build-asan
source scripts/test/build-copy.sh
passed=0
failed=0

echo "== sanitizers: building with ASan + UBSan in build-asan/"
# -O1, as ASan advises; line tables (-g1) are what its reports print.
build_copy "$build" --enable-sanitizers --enable-test-hooks CXXFLAGS="-g1 -O1" || { echo "sanitizers: configure failed"; echo "sanitizers: 0 passed, 1 failed"; exit 1; }
if ! make -s -C "$build" -j2 >"$build/make.out" 2>&1; then
  tail -30 "$build/make.out"
  echo "sanitizers: 0 passed, 1 failed"
  exit 1
fi

if [ $integration_only = 0 ]; then
  echo "== sanitizers: unit tests and fuzz corpora (make check)"
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  export ASAN_OPTIONS=abort_on_error=0:detect_leaks=1
  export LSAN_OPTIONS=suppressions=$top/tests/fuzz/lsan.supp
  make -s -C "$build" -j2 check >"$build/check.out" 2>&1
  check_rc=$?
  for log in "$build"/tests/unit/*/test_*.log; do
    p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test(s)\./\1/p' "$log")
    f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test(s), listed below:/\1/p' "$log")
    echo "asan $(basename "$log" .log): ${p:-0} passed, ${f:-0} failed"
    # Which test failed, and its assertion, before any leak report it left.
    [ "${f:-0}" = 0 ] || grep -B3 '^\[  FAILED  \] [a-z_0-9]*$' "$log" | head -30
    passed=$((passed + ${p:-0}))
    failed=$((failed + ${f:-0}))
    # A sanitizer report ends the program: no CMocka summary at all.
    grep -q 'ERROR: AddressSanitizer\|runtime error:\|ERROR: LeakSanitizer' "$log" &&
      { failed=$((failed + 1)); grep -A25 'ERROR: AddressSanitizer\|runtime error:\|ERROR: LeakSanitizer' "$log" | head -40; }
  done
  for log in "$build"/tests/fuzz/fuzz_*.log; do
    [ -f "$log" ] || continue
    if grep -q 'every property held' "$log" && ! grep -q 'ERROR: \|runtime error:' "$log"; then
      passed=$((passed + 1))
      echo "asan $(basename "$log" .log): $(grep -o '[0-9]* inputs replayed' "$log")"
    else
      failed=$((failed + 1))
      echo "asan $(basename "$log" .log): FAILED"
      grep -B2 -A25 'fuzz property failed\|ERROR: \|runtime error:' "$log" | head -40
    fi
  done
  if [ $check_rc -ne 0 ]; then
    grep -E '^(FAIL|ERROR):' "$build/check.out" | head
    [ $failed -gt 0 ] || failed=$((failed + 1))
  fi
fi

if [ $unit_only = 0 ]; then
  echo "== sanitizers: integration tests, the sanitized plugin in slurmstepd"
  # The stub libraries and sysfs trees the tests use: built by make check,
  # which a run with --integration-only may not have had.
  make -s -C "$build" -j2 fixtures >"$build/fixtures.out" 2>&1 ||
    { tail -20 "$build/fixtures.out"; echo "sanitizers: the test fixtures did not build"; failed=$((failed + 1)); }
  # The sanitized mn-preflight loads the stub NCCL (tests/fixtures/fake_nccl.c,
  # version only), never NVIDIA's libnccl.so.2 where the machine has one:
  # its static CUDA runtime is not built for ASan, and its constructor
  # crashed in __cudaRegisterFunction (SEGV at 0x48) under ASan on this
  # kind of machine (/usr/local/cuda-13.0) in a CI run; without ASan it
  # loads cleanly. srun passes it to every task; tests that point a node
  # at another NCCL set their own.
  export MN_PREFLIGHT_NCCL=$build/tests/fixtures/nccl-2.21.5/libnccl.so
  # libtool links the plugin without the runtimes (-shared -nostdlib): they
  # come preloaded, ASan's first.
  asan_rt="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
  for l in $asan_rt; do [ -f "$l" ] || { echo "sanitizers: no $l from gcc"; failed=$((failed + 1)); }; done
  reports=$(mktemp -d /tmp/mn-asan.XXXXXX)
  chmod 1777 "$reports"  # tasks run as the job's user
  # Leaks of programs that merely carry the runtime (slurmd, bash, python)
  # are not ours; memory errors and undefined behaviour anywhere are.
  export ASAN_OPTIONS=log_path=$reports/asan:detect_leaks=0:abort_on_error=0
  export UBSAN_OPTIONS=log_path=$reports/ubsan:print_stacktrace=1:halt_on_error=1
  # srun and friends load the plugin too: the runtime goes first there as well.
  wrap=$reports/bin
  mkdir -p "$wrap"
  for c in srun sbatch salloc; do
    real=$(command -v $c) || continue
    printf '#!/bin/sh\nLD_PRELOAD="%s" exec %s "$@"\n' "$asan_rt" "$real" >"$wrap/$c"
    chmod +x "$wrap/$c"
  done
  start=$(date +%s)
  exec 9>"${MN_CLUSTER_LOCK:-/tmp/mn-cluster.lock}"
  flock 9
  trap 'bash "$build/scripts/cluster/local-cluster.sh" stop >/dev/null 2>&1; kill "$watch_pid" 2>/dev/null' EXIT
  # Children of slurmstepd stuck in the runtime's own fork deadlock are
  # killed and their command re-run (scripts/test/asan-fork-watch.sh says why).
  export MN_FORK_DEADLOCKS=$reports/fork-deadlocks
  : >"$MN_FORK_DEADLOCKS"
  bash scripts/test/asan-fork-watch.sh "$MN_FORK_DEADLOCKS" &
  watch_pid=$!
  # Exported: a test that restarts the cluster (test_gpus' task/cgroup)
  # starts it with the runtime too.
  export MN_SLURMD_PRELOAD=$asan_rt
  # slurmd and slurmstepd only (tasks and srun keep the full options): no
  # quarantine. Its recycling holds the allocator's locks longest, so a
  # fork then most often leaves the child one it waits on for ever (GCC
  # 12's runtime, scripts/test/asan-fork-watch.sh); three forks in a row
  # hung so in one CI run. The plugin's code there loses only the late
  # use-after-free reports (of memory already handed out again).
  export MN_SLURMD_ASAN_OPTIONS=$ASAN_OPTIONS:quarantine_size_mb=0:thread_local_quarantine_size_kb=0
  if bash "$build/scripts/cluster/local-cluster.sh" start; then
    # What this run claims: the task's parent, slurmstepd, holds the ASan
    # runtime and this build's plugin.
    maps=$(SLURM_CONF=${MN_CLUSTER_DIR:-/tmp/mn-cluster}/slurm.conf PATH=$wrap:$PATH timeout 60 srun -N1 -n1 --mn-nccl \
      sh -c 'cat /proc/$PPID/comm; grep -oE "[^ ]*(libasan[^ ]*|mn_nccl.so)$" /proc/$PPID/maps | sort -u' 2>&1)
    if grep -q '^slurmstepd' <<<"$maps" && grep -q libasan <<<"$maps" && grep -qF "$build/spank/.libs/mn_nccl.so" <<<"$maps"; then
      echo "asan slurmstepd: runs with the ASan runtime and $build/spank/.libs/mn_nccl.so"
      passed=$((passed + 1))
    else
      echo "asan slurmstepd: FAILED: the sanitized plugin is not what slurmstepd runs:"
      sed 's/^/    /' <<<"$maps" | head
      failed=$((failed + 1))
    fi
    # CI's hour holds the files where outside input meets the sanitized code
    # (the plugin in slurmstepd, its failing hooks, the check's wire and doorway);
    # MN_SANITIZERS_FULL=1 runs every file (about 25 min more here).
    files=()
    if [ "${MN_SANITIZERS_FULL:-0}" = 1 ]; then
      files=("$build"/tests/integration/test_*.sh)
    else
      for n in test_plugin test_spank_failures test_hostile_inputs test_preflight; do
        files+=("$build/tests/integration/$n.sh")
      done
      echo "asan: integration files ${files[*]##*/} (${#files[@]} of $(ls "$build"/tests/integration/test_*.sh | wc -l); MN_SANITIZERS_FULL=1 runs all)"
    fi
    for t in "${files[@]}"; do
      t0=$(date +%s)
      PATH=$wrap:$PATH bash "$t" >"$reports/it.log" 2>&1
      p=$(sed -n 's/^integration: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p' "$reports/it.log")
      f=$(sed -n 's/^integration: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p' "$reports/it.log")
      [ -n "$p" ] || { echo "$(basename "$t"): no summary line"; tail -5 "$reports/it.log"; f=1; p=0; }
      echo "asan $(basename "$t" .sh): $p passed, $f failed ($(($(date +%s) - t0)) s)"
      grep '^not ok' -A12 "$reports/it.log" | head -60
      passed=$((passed + p))
      failed=$((failed + f))
    done
  else
    echo "sanitizers: the local cluster did not start with the ASan runtime in slurmd"
    failed=$((failed + 1))
  fi
  bash "$build/scripts/cluster/local-cluster.sh" stop >/dev/null 2>&1
  kill "$watch_pid" 2>/dev/null
  trap - EXIT
  exec 9>&-
  if [ -s "$MN_FORK_DEADLOCKS" ]; then
    echo "sanitizers: the ASan runtime's fork deadlock, $(wc -l <"$MN_FORK_DEADLOCKS") time(s) (commands re-run):"
    sed 's/^/    /' "$MN_FORK_DEADLOCKS"
  fi
  found=$(ls "$reports"/asan.* "$reports"/ubsan.* 2>/dev/null)
  if [ -n "$found" ]; then
    echo "sanitizers: $(wc -l <<<"$found") sanitizer report(s) from the cluster run:"
    for r in $found; do
      echo "---- $r"
      head -40 "$r"
    done
    failed=$((failed + 1))
  else
    echo "sanitizers: no sanitizer report from slurmd, slurmstepd, srun or the tasks"
  fi
  echo "sanitizers: integration took $(($(date +%s) - start)) s"
  rm -rf "$reports"
fi

echo "sanitizers: $passed passed, $failed failed"
[ $failed -eq 0 ]
