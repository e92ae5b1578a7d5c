#!/usr/bin/env bash
# Fabric discovery (sysfs read + choice) per node and step, on the DGX
# H100-like fixture (10 HCAs) and on this machine's /sys. Goal: under 5 ms.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
fx=$(mktemp -d /tmp/mn-bench-sysfs.XXXXXX)
trap 'rm -rf "$fx"' EXIT
bash tests/fixtures/make-sysfs.sh "$fx"
./tests/bench/bench_discover "$fx/dgx-h100" "${1:-500}"
./tests/bench/bench_discover /sys "${1:-500}"
