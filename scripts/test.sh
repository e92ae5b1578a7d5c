#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs every test: CMocka unit tests (make check), then the integration
# tests on a real local multi-node Slurm of this machine's Debian release,
# then the same suite on the other supported releases, each in a Debian root
# of its own (scripts/cluster/release-matrix.sh). Installs what is missing first.
#
#   scripts/test.sh            everything
#   scripts/test.sh --here     this machine's release only (what each root runs)
# MN_RELEASE_MATRIX=0 skips the other releases (MN_RELEASE_MATRIX="slurm-23.11"
# runs only those named: bookworm, trixie, sid, slurm-23.11); by default the
# roots run the release-dependent subset that fits CI's hour
# (release-matrix.sh) and MN_MATRIX_FULL=1 runs everything in every root,
# Slurm 23.11 from source included (about 2 h here); MN_TEST_PACKAGE=0 the packages;
# MN_SANITIZERS=0 the ASan/UBSan build (scripts/test/test-sanitizers.sh) and the
# fuzzing (scripts/test/fuzz.sh).
# A subset, named as such in the run's summary (release-matrix.sh runs one in
# its slurm-23.11 root, where time is short and the compiler the host's):
# MN_TEST_UNIT=0 skips the CMocka unit tests; MN_TEST_INTEGRATION="test_plugin
# test_inline ..." runs only those files of tests/integration (a name that
# is not there fails the run at once).
set -uo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)
here_only=0
[ "${1:-}" = --here ] && here_only=1

# The integration files this run: every one, or MN_TEST_INTEGRATION's.
# test_containers.sh last: it waits for the container rig that builds
# beside (its image alone takes 10 min of a loaded 2-core machine), which
# the other files' quarter of an hour leaves time to finish.
it_files=()
for f in tests/integration/test_*.sh; do
  [ "$f" = tests/integration/test_containers.sh ] || it_files+=("$f")
done
[ -f tests/integration/test_containers.sh ] && it_files+=(tests/integration/test_containers.sh)
# The rolling upgrade's test builds the previous release from git history,
# which a release root's copy (--here) lacks: the host runs it.
if [ $here_only = 1 ]; then
  it_files=(${it_files[@]/tests\/integration\/test_upgrade.sh/})
  echo "test.sh: test_upgrade.sh runs on the host only (the previous release is built from the clone's history)"
fi
it_all=${#it_files[@]}
subset=""
if [ -n "${MN_TEST_INTEGRATION:-}" ]; then
  it_files=()
  for n in $MN_TEST_INTEGRATION; do
    f=tests/integration/${n%.sh}.sh
    [ -f "$f" ] || { echo "test.sh: MN_TEST_INTEGRATION names ${n}, but there is no $f" >&2; exit 1; }
    it_files+=("$f")
  done
  subset="integration files ${it_files[*]##*/} (${#it_files[@]} of $it_all, MN_TEST_INTEGRATION)"
fi
unit=1
if [ "${MN_TEST_UNIT:-1}" = 0 ]; then
  unit=0
  subset="no unit tests (MN_TEST_UNIT=0)${subset:+; $subset}"
fi
# A file's own subset (MN_IT_ONLY_test_watch="t_a t_b", tests/integration/lib.sh).
for v in $(compgen -v MN_IT_ONLY_); do
  subset+="${subset:+; }${v#MN_IT_ONLY_} only ${!v}"
done
[ -z "$subset" ] || echo "test.sh: a subset: $subset"

# Each part's wall time, printed at the end: CI has a time limit.
t_all=$(date +%s)
t_part=$t_all
part_name=""
times=""
part() {
  local now
  now=$(date +%s)
  [ -z "$part_name" ] || times+="$(printf '%6d s  %s' $((now - t_part)) "$part_name")"$'\n'
  t_part=$now
  part_name=$1
  [ -z "$1" ] || echo "== $1"
}

part "install (scripts/install-deps.sh)"
deps_args=()
[ $here_only = 1 ] && deps_args=(--here)
bash scripts/install-deps.sh "${deps_args[@]}" || exit 1
# The container rig for tests/integration/test_containers.sh (which waits
# for it): pyxis and enroot from ../shared/vendor and a torch image, built
# beside (about 5 min, mostly the image); host only.
# In a release root (--here) only the base image, where the release root
# asks for it (MN_CONTAINERS=inline: Slurm puts --mn-preflight's check in
# the container; about 2 min).
if [ $here_only = 0 ]; then
  (nice -n 10 bash scripts/cluster/containers.sh all >/tmp/mn-containers.log 2>&1 &)
elif [ "${MN_CONTAINERS:-none}" = inline ]; then
  (nice -n 10 bash scripts/cluster/containers.sh inline >/tmp/mn-containers.log 2>&1 &)
fi
part "build (scripts/build.sh)"
bash scripts/build.sh || exit 1
# The previous release, for test_upgrade.sh, built beside the unit tests.
if [ $here_only = 0 ]; then
  (nice -n 10 bash scripts/test/build-previous.sh >/tmp/mn-previous.log 2>&1 &)
fi

passed=0
failed=0
# Each part that failed, by name: printed again at the very end, since a
# CI log may keep only its head and tail.
failures=""
failed_in() { failures+="  $1"$'\n'; }
# The sanitizer run (every test under ASan + UBSan), the fuzz targets and the
# other releases: host only, not in the release roots (--here).
# MN_SANITIZERS=0 skips the first two, MN_RELEASE_MATRIX=0 the third.
sanitizers=0
matrix=0
[ $here_only = 0 ] && [ "${MN_SANITIZERS:-1}" != 0 ] && sanitizers=1
[ $here_only = 0 ] && [ "${MN_RELEASE_MATRIX:-1}" != 0 ] && matrix=1

# tally NAME LOG: adds LOG's last "WORD: N passed, M failed" line (also
# one with a release root's "[SUITE] " in front, e.g. "[slurm-23.11] ").
tally() {
  local p f
  p=$(sed -n 's/^\(\[[^]]*\] \)\{0,1\}[a-z0-9-]*: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p' "$2" | tail -1)
  f=$(sed -n 's/^\(\[[^]]*\] \)\{0,1\}[a-z0-9-]*: \([0-9]*\) passed, \([0-9]*\) failed$/\3/p' "$2" | tail -1)
  [ -n "$p" ] || { echo "$1: no summary line"; f=1; p=0; }
  passed=$((passed + p))
  failed=$((failed + f))
  [ "$f" -eq 0 ] || failed_in "$1: $f failed ($2)"
}
if [ $unit = 1 ]; then
  part "unit tests (CMocka)"
  make -s -j"$(nproc)" check >/tmp/mn-unit.log 2>&1
  unit_rc=$?
  for log in tests/unit/*/test_*.log; do
    sed -n '/^\[==========\] .* test(s) run\./,$p' "$log" | grep -E 'PASSED|FAILED' | sed "s|^|$(basename "$log" .log): |"
    p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test(s)\./\1/p' "$log")
    f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test(s), listed below:/\1/p' "$log")
    passed=$((passed + ${p:-0}))
    failed=$((failed + ${f:-0}))
    [ "${f:-0}" -eq 0 ] || failed_in "unit $(basename "$log" .log): $f failed ($log)"
  done
  if [ $unit_rc -ne 0 ]; then
    grep -h -B3 -A3 'FAILED\|ERROR' tests/unit/*/test_*.log | head -60
    # A test that failed without a CMocka summary (killed, crashed, a
    # non-zero exit after its tests): automake's .trs names it.
    bad=$(grep -l '^:test-result: \(FAIL\|ERROR\|XPASS\)' tests/unit/*/test_*.trs 2>/dev/null | tr '\n' ' ')
    tail -20 /tmp/mn-unit.log
    [ "$failed" -gt 0 ] || failed=$((failed + 1))
    failed_in "make check exited $unit_rc${bad:+: $bad}(/tmp/mn-unit.log)"
  fi
else
  echo "== unit tests (CMocka): skipped (MN_TEST_UNIT=0)"
  # The integration tests still need make check's fixtures (the stub CUDA
  # driver and NCCL libraries).
  make -s fixtures >/tmp/mn-unit.log 2>&1 || { tail -20 /tmp/mn-unit.log; failed=$((failed + 1)); failed_in "make fixtures (/tmp/mn-unit.log)"; }
fi

# What needs the CPU and not the cluster runs beside what waits on the
# cluster (the integration tests mostly wait on Slurm and timeouts): the
# sanitizer build with its unit tests and corpora, then the fuzz targets;
# and the other releases, whose roots build while this host's tests run and
# take the cluster (one at a time, /tmp/mn-cluster.lock) when it is free.
# Niced, so the tests that measure time here get the CPU first.
bg_san=""
bg_matrix=""
if [ $sanitizers = 1 ]; then
  (nice -n 10 bash scripts/test/test-sanitizers.sh --unit-only >/tmp/mn-san-unit.log 2>&1
   nice -n 10 bash scripts/test/fuzz.sh >/tmp/mn-fuzz.log 2>&1) &
  bg_san=$!
fi
if [ $matrix = 1 ]; then
  # The supported releases other than this machine's own.
  . /etc/os-release
  case "${VERSION_CODENAME:-}" in bookworm | trixie) this=$VERSION_CODENAME ;; *) this=sid ;; esac
  others=()
  for s in bookworm trixie sid; do [ "$s" = "$this" ] || others+=("$s"); done
  # Slurm 23.11 (Ubuntu 24.04's), built from its source in a bookworm root:
  # its build alone takes 25 min of this 2-core machine, so CI has only the
  # plugin built against its spank.h (test-slurm-sources.sh, below) and the
  # cluster runs by hand (MN_RELEASE_MATRIX=slurm-23.11, or MN_MATRIX_FULL=1).
  [ "${MN_MATRIX_FULL:-0}" != 1 ] || others+=(slurm-23.11)
  case "${MN_RELEASE_MATRIX:-1}" in 1) ;; *) read -r -a others <<<"$MN_RELEASE_MATRIX" ;; esac
  echo "== started beside: the other Slurm releases (${others[*]}), in Debian roots"
  nice -n 10 bash scripts/cluster/release-matrix.sh "${others[@]}" >/tmp/mn-matrix.log 2>&1 &
  bg_matrix=$!
fi

part "integration tests (local multi-node Slurm)"
# One local cluster at a time on a machine (its bridge, addresses and
# namespace names are fixed): wait for any other test run to finish.
exec 9>"${MN_CLUSTER_LOCK:-/tmp/mn-cluster.lock}"
flock 9
trap 'bash "$top/scripts/cluster/local-cluster.sh" stop >/dev/null 2>&1' EXIT
start=$(date +%s)
: >/tmp/mn-it-all.log
if bash scripts/cluster/local-cluster.sh start; then
  for t in "${it_files[@]}"; do
    t0=$(date +%s)
    bash "$t" 2>&1 | tee /tmp/mn-it.log
    cat /tmp/mn-it.log >>/tmp/mn-it-all.log
    echo "$(basename "$t"): $(($(date +%s) - t0)) s"
    p=$(sed -n 's/^integration: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p' /tmp/mn-it.log)
    f=$(sed -n 's/^integration: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p' /tmp/mn-it.log)
    [ -n "$p" ] || { echo "$t: no summary line"; f=1; p=0; }
    passed=$((passed + p))
    failed=$((failed + f))
    [ "$f" -eq 0 ] || failed_in "$(basename "$t"): $f failed"
  done
else
  echo "local cluster did not start"
  failed=$((failed + 1))
  failed_in "the local cluster did not start"
fi
bash scripts/cluster/local-cluster.sh stop >/dev/null 2>&1
trap - EXIT
# The release: its package's version, else (built from source) its slurm_version.h's.
slurm_release() {
  dpkg-query -W -f='${Version}' slurmd 2>/dev/null && return
  local n
  n=$(awk '$2 == "SLURM_VERSION_NUMBER" {print $3}' /usr/include/slurm/slurm_version.h 2>/dev/null)
  [ -z "$n" ] || printf '%d.%02d.%d (source)' $((n >> 16)) $(((n >> 8) & 255)) $((n & 255))
}
echo "integration: $(($(date +%s) - start)) s on Slurm $(slurm_release)"

# A short sample of issue 38's campaign (doc/accuracy.md's table runs it by
# hand, 20 faults and 100 healthy runs a case): once each, on the host,
# the cases whose verdict no load changes (the starved conditions and the
# slowest links are the full campaign's: here the sanitizer build runs
# beside; a stop timed from launch may land before a loaded rank's
# rendezvous, and test_preflight's stops, timed from each rank's start,
# cover those). MN_TEST_CAMPAIGN=0 skips it. It runs while this run still
# holds the cluster: after it, the other releases' roots hold it while the
# packages build here.
if [ $here_only = 0 ] && [ "${MN_TEST_CAMPAIGN:-1}" != 0 ]; then
  part "campaign sample (scripts/bench/bench-accuracy.sh 1 1)"
  MN_CLUSTER_LOCK_HELD=1 MN_BENCH_CASES="quiet churn dataflood held-port slow-20m killed skew" \
    MN_BENCH_KEEP=/tmp/mn-accuracy-misses bash scripts/bench/bench-accuracy.sh 1 1 2>&1 | tee /tmp/mn-accuracy.log
  tally campaign /tmp/mn-accuracy.log
fi

exec 9>&-
# Releases Debian does not package, from their sources in ../shared/vendor
# (Slurm 23.11, Ubuntu 24.04's): the plugin built against their spank.h.
# Builds only (as hwloc 3's, next), run before the packages while the
# release roots may hold the cluster, whose wait they fill.
if [ $here_only = 0 ]; then
  part "Slurm sources (scripts/test/test-slurm-sources.sh: the plugin against their spank.h)"
  bash scripts/test/test-slurm-sources.sh 2>&1 | tee /tmp/mn-slurm-src.log
  tally slurm-sources /tmp/mn-slurm-src.log
fi

# hwloc 3 (unreleased): topology.cc against its headers where a clone is at
# hand (one line and no count where none is).
if [ $here_only = 0 ]; then
  part "hwloc 3 (scripts/test/test-hwloc3.sh: topology.cc against hwloc 2's and 3's headers)"
  bash scripts/test/test-hwloc3.sh 2>&1 | tee /tmp/mn-hwloc3.log
  grep -q '^hwloc3: skipped' /tmp/mn-hwloc3.log || tally test-hwloc3 /tmp/mn-hwloc3.log
fi

# MN_TEST_PACKAGE=0 skips it (about 4-5 min on 2 cores: two more builds).
if [ "${MN_TEST_PACKAGE:-1}" != 0 ]; then
  part "packages (scripts/test/test-package.sh: .deb through a real job, RPM)"
  # The RPM (for RHEL sites, from make dist) is built once, on the host.
  rpm_too=${MN_TEST_RPM:-1}
  [ $here_only = 1 ] && rpm_too=0
  MN_TEST_RPM=$rpm_too bash scripts/test/test-package.sh 2>&1 | tee /tmp/mn-pkg.log
  p=$(sed -n 's/^integration: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p' /tmp/mn-pkg.log)
  f=$(sed -n 's/^integration: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p' /tmp/mn-pkg.log)
  [ -n "$p" ] || { echo "test-package.sh: no summary line"; f=1; p=0; }
  passed=$((passed + p))
  failed=$((failed + f))
  [ "$f" -eq 0 ] || failed_in "test-package.sh: $f failed (/tmp/mn-pkg.log)"
fi

if [ -n "$bg_san" ]; then
  part "scripts/test/test-sanitizers.sh (ASan + UBSan build: unit tests, corpora; built beside)"
  # The build and its make check ran beside the tests above; the fuzz
  # targets may still run.
  while ! grep -q '^sanitizers: [0-9]* passed' /tmp/mn-san-unit.log 2>/dev/null && kill -0 "$bg_san" 2>/dev/null; do sleep 5; done
  cat /tmp/mn-san-unit.log
  tally test-sanitizers /tmp/mn-san-unit.log
  part "scripts/test/test-sanitizers.sh --integration-only (the sanitized plugin in slurmstepd)"
  bash scripts/test/test-sanitizers.sh --integration-only 2>&1 | tee /tmp/mn-san-it.log
  tally test-sanitizers /tmp/mn-san-it.log
  part "scripts/test/fuzz.sh (beside)"
  wait "$bg_san"
  cat /tmp/mn-fuzz.log
  tally fuzz /tmp/mn-fuzz.log
fi

matrix_rc=0
if [ -n "$bg_matrix" ]; then
  part "the other Slurm releases (${others[*]}, beside)"
  wait "$bg_matrix" || matrix_rc=1
  cat /tmp/mn-matrix.log
  if [ $matrix_rc -ne 0 ]; then
    # Each release that failed, with its table line (counts, time) and log.
    bad=$(sed -n 's/^release-matrix: failed: //p' /tmp/mn-matrix.log | tail -1)
    for s in $bad; do
      failed_in "release-matrix.sh $s: $(sed 's/^[^ ]* *//' "${MN_ROOTS_DIR:-/var/tmp/mn-roots}/$s.result" 2>/dev/null) (${MN_ROOTS_DIR:-/var/tmp/mn-roots}/$s.test.log)"
    done
    [ -n "$bad" ] || failed_in "release-matrix.sh (/tmp/mn-matrix.log)"
  fi
fi

part ""
echo
# What failed, again at the end: a CI log may keep only its head and tail.
if [ "$failed" -gt 0 ] || [ $matrix_rc -ne 0 ]; then
  logs=(/tmp/mn-it-all.log /tmp/mn-pkg.log /tmp/mn-slurm-src.log /tmp/mn-san-unit.log /tmp/mn-san-it.log /tmp/mn-fuzz.log /tmp/mn-matrix.log)
  marks='^\(\[[^]]*\] \)\{0,1\}not ok\|did not start\|no summary line\|slurm-from-source: [a-z]* failed\|FAILED (rc\|\[  FAILED  \]\|sanitizer report(s)\|ERROR: [A-Za-z]*Sanitizer\|runtime error:'
  echo "== what failed, with what each printed"
  grep -h -A8 "$marks" "${logs[@]}" 2>/dev/null | cut -c1-400 | head -60
  echo
  # Then a line each, last: a log's tail keeps every failure's name.
  echo "== what failed"
  printf '%s' "$failures"
  grep -h "$marks" "${logs[@]}" 2>/dev/null | cut -c1-300 | head -20
  echo
fi
# The time table last but one: a CI log's tail keeps it whole.
echo "== time taken (this run: $(($(date +%s) - t_all)) s)"
printf '%s' "$times"
echo
# A subset says so next to its counts (release-matrix.sh's table shows it).
[ -z "$subset" ] || echo "subset: $subset"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ $matrix_rc -eq 0 ]
