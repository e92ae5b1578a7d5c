#!/usr/bin/env bash
# Runs every test: CMocka unit tests (make check), then the integration
# tests on a real local multi-node Slurm. Installs what is missing first.
set -uo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)

bash scripts/install-deps.sh || exit 1
bash scripts/build.sh || exit 1

passed=0
failed=0

echo "== unit tests (CMocka)"
make -s check >/tmp/mn-unit.log 2>&1
unit_rc=$?
for log in tests/unit/test_*.log; do
  sed -n '/^\[==========\] .* test(s) run\./,$p' "$log" | grep -E 'PASSED|FAILED' | sed "s|^|$(basename "$log" .log): |"
  p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test(s)\./\1/p' "$log")
  f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test(s), listed below:/\1/p' "$log")
  passed=$((passed + ${p:-0}))
  failed=$((failed + ${f:-0}))
done
if [ $unit_rc -ne 0 ]; then
  grep -h -B3 -A3 'FAILED\|ERROR' tests/unit/test_*.log | head -60
  [ "$failed" -gt 0 ] || failed=$((failed + 1))
fi

echo "== integration tests (local multi-node Slurm)"
# One local cluster at a time (its addresses, ports and namespace names are fixed).
trap 'bash "$top/scripts/local-cluster.sh" stop >/dev/null 2>&1' EXIT
if bash scripts/local-cluster.sh start; then
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

echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
