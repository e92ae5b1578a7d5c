#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Configures (once) and builds mn-nccl in the source tree, for the tests and
# the demo: with mn-preflight's test hooks (configure --enable-test-hooks),
# which the packages never have.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x configure ] || ./autogen.sh >/dev/null
if [ ! -f Makefile ] || ! grep -q 'define MN_TEST_HOOKS 1' build_config.h 2>/dev/null; then
  ./configure --quiet --enable-test-hooks "$@"
fi
make -s -j"$(nproc)"
