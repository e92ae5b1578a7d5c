#!/usr/bin/env bash
# Configures (once) and builds mn-nccl in the source tree.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x configure ] || ./autogen.sh >/dev/null
[ -f Makefile ] || ./configure --quiet "$@"
make -s -j"$(nproc)"
