#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fabric discovery (sysfs read + choice, then with hwloc locality) per node
# and step, on the DGX H100-like fixture (10 HCAs, 8 GPUs in hwloc XML) and
# on this machine's /sys. Goal: discovery under 5 ms; hwloc's cost is
# measured and printed beside it.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/build.sh
make -s bench  # bench_discover: not part of make
fx=$(mktemp -d /tmp/mn-bench-sysfs.XXXXXX)
trap 'rm -rf "$fx"' EXIT
bash tests/fixtures/make-sysfs.sh "$fx"
./tests/bench/bench_discover "$fx/dgx-h100" "${1:-500}"
./tests/bench/bench_discover /sys "${1:-500}"
