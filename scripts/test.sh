#!/usr/bin/env bash
# Runs every test: CMocka unit tests (make check), then the integration
# tests on a real local multi-node Slurm of this machine's Debian release,
# then the same suite on the other supported releases, each in a Debian root
# of its own (scripts/cluster/release-matrix.sh). Installs what is missing first.
#
#   scripts/test.sh            everything
#   scripts/test.sh --here     this machine's release only (what each root runs)
# MN_RELEASE_MATRIX=0 skips the other releases; MN_TEST_PACKAGE=0 the packages;
# MN_SANITIZERS=0 the ASan/UBSan build (scripts/test/test-sanitizers.sh) and the
# fuzzing (scripts/test/fuzz.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)
here_only=0
[ "${1:-}" = --here ] && here_only=1

bash scripts/install-deps.sh || exit 1
bash scripts/build.sh || exit 1

passed=0
failed=0

echo "== unit tests (CMocka)"
make -s check >/tmp/mn-unit.log 2>&1
unit_rc=$?
for log in tests/unit/*/test_*.log; do
  sed -n '/^\[==========\] .* test(s) run\./,$p' "$log" | grep -E 'PASSED|FAILED' | sed "s|^|$(basename "$log" .log): |"
  p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test(s)\./\1/p' "$log")
  f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test(s), listed below:/\1/p' "$log")
  passed=$((passed + ${p:-0}))
  failed=$((failed + ${f:-0}))
done
if [ $unit_rc -ne 0 ]; then
  grep -h -B3 -A3 'FAILED\|ERROR' tests/unit/*/test_*.log | head -60
  [ "$failed" -gt 0 ] || failed=$((failed + 1))
fi

echo "== integration tests (local multi-node Slurm)"
# One local cluster at a time on a machine (its bridge, addresses and
# namespace names are fixed): wait for any other test run to finish.
exec 9>"${MN_CLUSTER_LOCK:-/tmp/mn-cluster.lock}"
flock 9
trap 'bash "$top/scripts/cluster/local-cluster.sh" stop >/dev/null 2>&1' EXIT
start=$(date +%s)
if bash scripts/cluster/local-cluster.sh start; then
  for t in tests/integration/test_*.sh; do
    bash "$t" 2>&1 | tee /tmp/mn-it.log
    p=$(sed -n 's/^integration: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p' /tmp/mn-it.log)
    f=$(sed -n 's/^integration: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p' /tmp/mn-it.log)
    [ -n "$p" ] || { echo "$t: no summary line"; f=1; p=0; }
    passed=$((passed + p))
    failed=$((failed + f))
  done
else
  echo "local cluster did not start"
  failed=$((failed + 1))
fi
bash scripts/cluster/local-cluster.sh stop >/dev/null 2>&1
trap - EXIT
exec 9>&-
echo "integration: $(($(date +%s) - start)) s on Slurm $(dpkg-query -W -f='${Version}' slurmd 2>/dev/null)"

# MN_TEST_PACKAGE=0 skips it (about 4-5 min on 2 cores: two more builds).
if [ "${MN_TEST_PACKAGE:-1}" != 0 ]; then
  echo "== packages (scripts/test/test-package.sh: .deb through a real job, RPM)"
  # The RPM (for RHEL sites, from make dist) is built once, on the host.
  rpm_too=${MN_TEST_RPM:-1}
  [ $here_only = 1 ] && rpm_too=0
  MN_TEST_RPM=$rpm_too bash scripts/test/test-package.sh 2>&1 | tee /tmp/mn-pkg.log
  p=$(sed -n 's/^integration: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p' /tmp/mn-pkg.log)
  f=$(sed -n 's/^integration: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p' /tmp/mn-pkg.log)
  [ -n "$p" ] || { echo "test-package.sh: no summary line"; f=1; p=0; }
  passed=$((passed + p))
  failed=$((failed + f))
fi

# The sanitizer build (every test under ASan + UBSan) and the fuzz targets,
# on the host only: not in the release roots (--here). MN_SANITIZERS=0 skips.
if [ $here_only = 0 ] && [ "${MN_SANITIZERS:-1}" != 0 ]; then
  for s in test-sanitizers fuzz; do
    echo "== scripts/test/$s.sh"
    bash "scripts/test/$s.sh" 2>&1 | tee /tmp/mn-$s.log
    p=$(sed -n 's/^[a-z]*: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p' /tmp/mn-$s.log | tail -1)
    f=$(sed -n 's/^[a-z]*: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p' /tmp/mn-$s.log | tail -1)
    [ -n "$p" ] || { echo "scripts/test/$s.sh: no summary line"; f=1; p=0; }
    passed=$((passed + p))
    failed=$((failed + f))
  done
fi

matrix_rc=0
if [ $here_only = 0 ] && [ "${MN_RELEASE_MATRIX:-1}" != 0 ]; then
  # The supported releases other than this machine's own.
  . /etc/os-release
  case "${VERSION_CODENAME:-}" in bookworm | trixie) this=$VERSION_CODENAME ;; *) this=sid ;; esac
  others=()
  for s in bookworm trixie sid; do [ "$s" = "$this" ] || others+=("$s"); done
  echo "== the other Slurm releases (${others[*]})"
  bash scripts/cluster/release-matrix.sh "${others[@]}" || matrix_rc=1
fi

echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ $matrix_rc -eq 0 ]
