#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Configures (once) and builds mn-nccl in the source tree, for the tests and
# the demo: with mn-preflight's test hooks (configure --enable-test-hooks),
# which the packages never have.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x configure ] || ./autogen.sh >/dev/null
# Line tables only (-g1): a failing test's backtrace keeps its file and
# line; full debug info doubled the compile of the JSON-heavy files.
if [ ! -f Makefile ] || ! grep -q 'define MN_TEST_HOOKS 1' build_config.h 2>/dev/null; then
  ./configure --quiet --enable-test-hooks CXXFLAGS="${CXXFLAGS:--g1 -O2}" "$@"
fi
make -s -j"$(nproc)"
